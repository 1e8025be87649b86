/* The table-driven GPU op test: every op the cfg parser takes, in every precision, on odd map
 * sizes and at batch 1 and > 1, through the whole engine against the CPU (ggml's test-backend-ops
 * idea, on graphrun's engines). One row of `cases` below is one small synthetic network (a cfg
 * snippet after a generated [net], or a cfg file), its input size and batch, the precisions it
 * runs in, the activations it runs with, and the engine options it forces. Each (row, activation,
 * precision) is one run:
 *   1. the network (synthetic weights, seed 7: never all zero) is built as a GPU engine and as a
 *      CPU engine of the same precision (int8: one calibration on the CPU, shared through a
 *      calibration cache, so both engines have the same scales);
 *   2. both run the same batch (data/shapes-val/000.png, 001.png, ... letterboxed: real images,
 *      non-zero, different per batch index) and every output is compared, after checking that
 *      the shapes agree, output 0 has the row's shape, and the CPU's output is not constant;
 *   3. node by node: the GPU engine's own plan runs on the planner's CPU emulation
 *      (gr_plan_execute) and on the GPU one node at a time (gr_engine_debug_trace); each
 *      launching node's output is compared (not for the dataflow executor's rows, whose kernel
 *      runs no node by itself).
 * Every node and output is printed with its error; a failure names the run (row, activation,
 * precision, batch), the node or output, the first differing element (n, c, y, x) and both values.
 *
 * Tolerances (NRMSE = sqrt(mean(d^2)) / (max - min of the CPU's values)), and why:
 *   - int8, every node up to the first "inexact" one, and the outputs of a network without any:
 *     bit-identical. The integer sums are exact on both sides and the epilogue, requantization,
 *     pools, copies, shortcut and products are the same float expressions (planner/plan.h,
 *     "Epilogue math": the spec the kernels implement bit for bit; ops/activation.h's
 *     gr_act_epilogue, no fma contraction: GR_FMUL). Inexact nodes: an activation with a libm
 *     call (logistic, mish, swish, elu, selu, gelu, tanh, loggy: CUDA's expf / logf / tanhf / powf
 *     are within 2 ulp of glibc's) and the f32 ops whose sums run in another order or call expf
 *     ([connected] on cuBLAS, [softmax]);
 *   - int8 after a libm activation (and no inexact f32 op): int8 tensors at most one
 *     quantization step apart at the first such node, two after it (a tipped input tips the next
 *     node's outputs at most once more), on at most 1% of the values; other tensors NRMSE <= 1e-2;
 *   - int8 after [connected] / [softmax], and outputs of such networks: NRMSE <= 1e-2
 *     (test_gpu_engine's int8 limit against the emulation; test_gpu_mixed's output rule);
 *   - fp16: NRMSE <= 1e-2 (test_gpu_mixed's fp16 rule: half rounding of inputs, weights and
 *     outputs; f32 accumulation in another order flips last bits that later layers carry on);
 *   - fp32: NRMSE <= 1e-5 and max |d| <= 1e-4 x range (3xTF32 / SGEMM / direct kernels sum in
 *     other orders than the CPU; the float leaky / logistic of the GPU against the reference's
 *     double ones differ by an ulp; test_gpu_engine's fp32 bound).
 *
 * Tactics: CTest runs the GPU suites with GR_DISABLE_TACTIC_SEARCH=1 (the automatic tactics);
 * rows force the fp32 algorithms (f32_algo), eager launches (use_cuda_graph = 0) and the dataflow
 * executor where the per-family tests did. Which tactic a card prefers is never asserted
 * (test_gpu_tactic tests the search; test_gpu_conv / conv_fused / gemm_f32 / misc test each kernel,
 * tile shape and split-K on its own, with guard bytes).
 *
 * Adding a case (a new conv shape, a new op): one row in `cases`; a new op gets its rows in the
 * marked place at the end of the table. GR_TEST_OPS_FILTER=<text> runs only the rows whose name
 * contains <text>. Exits 77 (skipped) with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h> /* built with CUDA only (CMakeLists.txt: gr_drop_cuda_sources) */

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"
#include "tests/support/gpu_trace.h"

/* ---- the table ---------------------------------------------------------------------------- */

enum { P32 = 1u << GR_PREC_FP32, P16 = 1u << GR_PREC_FP16, P8 = 1u << GR_PREC_INT8 };
#define PALL (P32 | P16 | P8)
#define ACT(a) (1u << (a))
#define EVERY_ACT ((1u << GR_ACT_COUNT) - 1u)
enum { EAGER = 1u << 0, DATAFLOW = 1u << 1 };
#define F32(algo) ((unsigned)(algo) << 4)
#define F32_ALGO(opts) ((gr_f32_algo)((opts) >> 4))

typedef struct op_case {
    const char *name;     /* names the row in every message; GR_TEST_OPS_FILTER matches it */
    const char *layers;   /* the cfg after a generated [net] (width, height, channels=3): "$ACT"
                             stands for the activation under test */
    const char *cfg_file; /* or a whole cfg file (layers NULL): its width= / height= lines are set
                             to w / h, and its "activation=logistic" lines are the activation
                             under test where acts is not 0 */
    int w, h;             /* the network input, w x h x 3 (uint8: the engines' 3-channel input) */
    int batch;
    unsigned precs;       /* P32 | P16 | P8 */
    unsigned acts;        /* 0: the layers name their own; else one run per ACT(a) set */
    int out_c, out_h, out_w; /* output 0 per image, asserted */
    unsigned opts;        /* engine options forced: 0, or F32(algo) (fp32 runs: the conv
                             algorithm), EAGER (use_cuda_graph = 0: the same launches on a
                             stream), DATAFLOW (executor DATAFLOW, fp16 / int8: the notice must
                             say the engine kept it; no node-by-node trace) */
} op_case;

/* cfg lines. CONV: a batch-normalized conv, pad 1; CONV_G with groups; HEAD: the 1x1 linear head
 * of 8 filters (no BN) every network below ends in; ACT_UNDER_TEST: the row's activation. */
#define CONV(filters, size, stride, act)                                                           \
    "[convolutional]\nbatch_normalize=1\nfilters=" #filters "\nsize=" #size "\nstride=" #stride   \
    "\npad=1\nactivation=" act "\n"
#define CONV_G(filters, groups, size, stride, act)                                                 \
    "[convolutional]\nbatch_normalize=1\nfilters=" #filters "\ngroups=" #groups "\nsize=" #size   \
    "\nstride=" #stride "\npad=1\nactivation=" act "\n"
#define LINEAR(filters) /* a 1x1 conv without BN */                                                \
    "[convolutional]\nfilters=" #filters "\nsize=1\nstride=1\nactivation=linear\n"
#define HEAD LINEAR(8)
#define MAXPOOL(size, stride) "[maxpool]\nsize=" #size "\nstride=" #stride "\n"
#define ROUTE(layers) "[route]\nlayers=" layers "\n"
#define ACT_UNDER_TEST "$ACT"
/* Three convs, the activation under test in the first two: the first layer (conv_first.cu's
 * fused-quantize kernels in fp16 / int8), a 3x3/2 (the general tensor-core kernels), the head. */
#define CONV3_ACT CONV(16, 3, 1, ACT_UNDER_TEST) CONV(16, 3, 2, ACT_UNDER_TEST) HEAD
/* Tiny-YOLO's stem: 3->16 3x3, 2x2/2 maxpool, 16->32 3x3, 2x2/2 maxpool, the head. */
#define STEM CONV(16, 3, 1, "leaky") MAXPOOL(2, 2) CONV(32, 3, 1, "leaky") MAXPOOL(2, 2) HEAD
#define YOLO(mask)                                                                                 \
    "[yolo]\nmask=" mask "\nanchors=10,14,23,27,37,58,81,82,135,169,344,319\nclasses=1\nnum=6\n"
#define ALEXEYAB_CFG "tests/data/alexeyab/sam-scale.cfg"
/* yolov3-tiny's upsample concatenated with an earlier map */
#define UPSAMPLE_NET                                                                               \
    CONV(16, 3, 1, "leaky") MAXPOOL(2, 2) CONV(16, 3, 1, "leaky") "[upsample]\nstride=2\n"         \
        ROUTE("-1,-4") HEAD
/* yolov2's passthrough: an earlier map's reorg concatenated with a stride-2 conv */
#define REORG_NET                                                                                  \
    CONV(16, 3, 1, "leaky") CONV(32, 3, 2, "leaky") ROUTE("-2") "[reorg]\nstride=2\n"              \
        ROUTE("-1,-3") HEAD
/* two [yolo] heads, the second after a route back and a stride-2 conv */
#define YOLO_NET                                                                                   \
    CONV(16, 3, 1, "leaky") LINEAR(18) YOLO("0,1,2") ROUTE("-3") CONV(16, 3, 2, "leaky")          \
        LINEAR(18) YOLO("3,4,5")
/* [connected] on a flattened 8 x h/2 x w/2 map, softmax in two groups */
#define CONNECTED_NET                                                                              \
    CONV(16, 3, 1, "leaky") MAXPOOL(2, 2) CONV(8, 3, 1, "relu")                                   \
        "[connected]\noutput=32\nactivation=leaky\n[connected]\noutput=10\nactivation=linear\n"  \
        "[softmax]\ngroups=2\n"

static const op_case cases[] = {
    /* -- activations fused in the conv epilogues ------------------------------------------- */
    {"act", CONV3_ACT, NULL, 40, 40, 1, PALL, EVERY_ACT, 8, 20, 20, 0},
    {"act odd batch", CONV3_ACT, NULL, 37, 37, 3, PALL,
     ACT(GR_ACT_LINEAR) | ACT(GR_ACT_LEAKY) | ACT(GR_ACT_MISH) | ACT(GR_ACT_SWISH) |
         ACT(GR_ACT_LOGISTIC),
     8, 19, 19, 0},

    /* -- convolutions and pools ----------------------------------------------------------- */
    {"conv 3x3/1 + 1x1", CONV(16, 3, 1, "leaky") HEAD, NULL, 13, 13, 1, PALL, 0, 8, 13, 13, 0},
    {"conv 3x3/1 + 1x1 batch", CONV(16, 3, 1, "leaky") HEAD, NULL, 13, 13, 3, PALL, 0, 8, 13, 13, 0},
    {"conv 3x3/2 twice", CONV(16, 3, 2, "leaky") CONV(32, 3, 2, "leaky") HEAD, NULL, 37, 37, 3,
     PALL, 0, 8, 10, 10, 0},
    {"stem 16->32 + maxpool", STEM, NULL, 26, 26, 1, PALL, 0, 8, 7, 7, 0},
    {"stem batch 64", STEM, NULL, 26, 26, 64, PALL, 0, 8, 7, 7, 0},
    {"stem non-square", STEM, NULL, 37, 13, 3, PALL, 0, 8, 4, 10, 0},
    /* yolov2-tiny's stride-1 pool (right/bottom padding), and a 3/2 one */
    {"maxpool 2/1", CONV(16, 3, 1, "leaky") MAXPOOL(2, 1) HEAD, NULL, 13, 13, 3, PALL, 0, 8, 13,
     13, 0},
    {"maxpool 3/2", CONV(16, 3, 1, "leaky") MAXPOOL(3, 2) HEAD, NULL, 13, 13, 3, PALL, 0, 8, 7, 7, 0},
    /* The fp32 algorithms, forced (gr_engine_options.f32_algo; direct3x3 fuses the maxpools),
     * eager launches, the dataflow executor. */
    {"stem fp32 sgemm", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_SGEMM)},
    {"stem fp32 tf32x3", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_TF32X3)},
    {"stem fp32 implicit", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_TF32X3_IMPLICIT)},
    {"stem fp32 direct3x3", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_DIRECT3X3)},
    {"stem eager", STEM, NULL, 13, 13, 3, PALL, 0, 8, 4, 4, EAGER},
    {"stem dataflow", STEM, NULL, 26, 26, 1, P16 | P8, 0, 8, 7, 7, DATAFLOW},
    /* Grouped, depthwise, dilated and stride_x != stride_y convs: the direct kernels
     * (kernels/conv_direct.h; the cfg files say what each layer tests). No libm activations:
     * int8 bit-identical throughout. */
    {"grouped convs", NULL, "tests/data/grouped_convs.cfg", 40, 40, 1, P16 | P8, 0, 8, 20, 10, 0},
    {"grouped convs batch", NULL, "tests/data/grouped_convs.cfg", 40, 40, 2, P16 | P8, 0, 8, 20,
     10, 0},
    {"grouped fusions", NULL, "tests/data/grouped_fusions.cfg", 40, 40, 1, P16 | P8, 0, 8, 20, 10, 0},
    {"grouped fusions batch", NULL, "tests/data/grouped_fusions.cfg", 40, 40, 2, P16 | P8, 0, 8,
     20, 10, 0},
    /* The same kinds in fp32 with AlexeyAB's libm activations (the direct kernel and the
     * per-group GEMMs): depthwise 3x3 stride 1 and 2, multiplier 2, groups 2 and 4, dilation 2,
     * stride_x 2, a grouped 1x1 head. */
    {"grouped fp32 activations",
     CONV(16, 3, 1, "leaky") CONV_G(16, 16, 3, 1, "relu6") CONV_G(16, 16, 3, 2, "mish")
         CONV_G(32, 16, 3, 1, "swish") CONV_G(32, 2, 3, 1, "elu") CONV_G(16, 4, 3, 1, "hard_mish")
         "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\ndilation=2\n"
         "activation=leaky\n"
         "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nstride_x=2\n"
         "activation=gelu\n"
         "[convolutional]\nfilters=8\ngroups=4\nsize=1\nstride=1\nactivation=linear\n",
     NULL, 40, 40, 3, P32, 0, 8, 20, 10, 0},

    /* -- routes, shortcuts, resampling ---------------------------------------------------- */
    /* yolov4's SPP: stride-1 maxpools of 5, 9 and 13 concatenated with their input */
    {"spp route concat",
     CONV(16, 3, 1, "leaky") MAXPOOL(5, 1) ROUTE("-2") MAXPOOL(9, 1) ROUTE("-4") MAXPOOL(13, 1)
         ROUTE("-1,-3,-5,-6") HEAD,
     NULL, 13, 13, 3, PALL, 0, 8, 13, 13, 0},
    /* yolov4-tiny's CSP block: route groups (a channel half), concats in place, a maxpool */
    {"csp route groups",
     CONV(16, 3, 1, "leaky") CONV(16, 3, 1, "leaky") "[route]\nlayers=-1\ngroups=2\ngroup_id=1\n"
         CONV(8, 3, 1, "leaky") ROUTE("-1,-2") CONV(16, 1, 1, "leaky") ROUTE("-6,-1")
             MAXPOOL(2, 2) HEAD,
     NULL, 26, 26, 3, PALL, 0, 8, 13, 13, 0},
    /* [shortcut] with its activation after the add (Darknet's CPU formulas, leaky with a double
     * .1, on the GPU and in the emulation) */
    {"shortcut",
     CONV(16, 3, 1, "leaky") CONV(16, 3, 1, "linear") "[shortcut]\nfrom=-2\nactivation=$ACT\n" HEAD,
     NULL, 40, 40, 1, PALL, ACT(GR_ACT_LEAKY) | ACT(GR_ACT_LOGISTIC), 8, 40, 40, 0},
    {"shortcut odd batch",
     CONV(16, 3, 1, "leaky") CONV(16, 3, 1, "linear") "[shortcut]\nfrom=-2\nactivation=$ACT\n" HEAD,
     NULL, 13, 13, 3, PALL, ACT(GR_ACT_LEAKY) | ACT(GR_ACT_LINEAR), 8, 13, 13, 0},
    {"upsample route", UPSAMPLE_NET, NULL, 18, 18, 1, PALL, 0, 8, 18, 18, 0},
    {"upsample route batch", UPSAMPLE_NET, NULL, 26, 26, 3, PALL, 0, 8, 26, 26, 0},
    {"reorg route", REORG_NET, NULL, 18, 18, 1, PALL, 0, 8, 9, 9, 0},
    {"reorg route batch", REORG_NET, NULL, 26, 26, 3, PALL, 0, 8, 13, 13, 0},
    {"dropout", CONV(16, 3, 1, "leaky") "[dropout]\nprobability=.5\n" HEAD, NULL, 13, 13, 1, PALL,
     0, 8, 13, 13, 0},

    /* -- heads and classifier tails (the engines' outputs are the convs before [yolo] and
     *    [region]: the decoders run at detection) -------------------------------------------- */
    {"yolo heads", YOLO_NET, NULL, 13, 13, 1, PALL, 0, 18, 13, 13, 0},
    {"yolo heads batch", YOLO_NET, NULL, 26, 26, 3, PALL, 0, 18, 26, 26, 0},
    {"region head",
     CONV(16, 3, 1, "leaky") LINEAR(30)
         "[region]\nanchors=1.08,1.19,3.42,4.41,6.63,11.38,9.42,5.11,16.62,10.52\nclasses=1\n"
         "coords=4\nnum=5\n",
     NULL, 13, 13, 3, PALL, 0, 30, 13, 13, 0},
    /* darknet19's tail: 1x1 conv, global avgpool, softmax */
    {"avgpool softmax",
     CONV(16, 3, 1, "leaky") MAXPOOL(2, 2) LINEAR(10) "[avgpool]\n[softmax]\ngroups=1\n", NULL,
     20, 18, 3, PALL, 0, 10, 1, 1, 0},
    /* the same after a grouped conv (the direct kernel; fp16 / int8 plan that layer without
     * the fused maxpool) */
    {"grouped avgpool softmax",
     CONV(16, 3, 1, "leaky") CONV_G(24, 4, 3, 1, "leaky") MAXPOOL(2, 2) LINEAR(10)
         "[avgpool]\n[softmax]\ngroups=1\n",
     NULL, 20, 18, 3, PALL, 0, 10, 1, 1, 0},
    {"connected softmax", CONNECTED_NET, NULL, 13, 13, 1, PALL, 0, 10, 1, 1, 0},
    {"connected softmax batch", CONNECTED_NET, NULL, 20, 18, 3, PALL, 0, 10, 1, 1, 0},
    /* AlexeyAB's [sam] and [scale_channels] per channel and per position, each feeding a head:
     * as written (logistic attention convs), or relu6 in their place, which leaves no libm
     * call: int8 bit-identical, the products included (the same float products, no fma:
     * kernels/data.cu mul_body). */
    {"sam scale_channels", NULL, ALEXEYAB_CFG, 40, 40, 1, PALL,
     ACT(GR_ACT_LOGISTIC) | ACT(GR_ACT_RELU6), 6, 20, 20, 0},
    {"sam scale_channels batch", NULL, ALEXEYAB_CFG, 26, 26, 3, PALL, ACT(GR_ACT_RELU6), 6, 13, 13, 0},

    /* -- new ops: their rows here (every precision they run in, batch 1 and > 1, odd sizes) --- */
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- runs: (row, activation, precision) --------------------------------------------------- */

typedef struct op_run {
    int row;
    int act; /* -1: the row names its own */
    gr_precision prec;
} op_run;

#define MAX_RUNS 1024
static op_run runs[MAX_RUNS];
static int n_runs;

/* The runs of the rows whose name contains `filter` (NULL: every row); 0, or -1 past MAX_RUNS. */
static int add_runs(const char *filter)
{
    for (int r = 0; r < N_CASES; r++) {
        if (filter && !strstr(cases[r].name, filter))
            continue;
        for (int a = cases[r].acts ? 0 : -1; a < (cases[r].acts ? GR_ACT_COUNT : 0); a++) {
            if (a >= 0 && !(cases[r].acts & ACT(a)))
                continue;
            for (int p = GR_PREC_FP32; p <= GR_PREC_INT8; p++) {
                if (!(cases[r].precs & (1u << p)))
                    continue;
                if (n_runs == MAX_RUNS)
                    return -1;
                runs[n_runs++] = (op_run){r, a, (gr_precision)p};
            }
        }
    }
    return 0;
}

/* ---- the network and its input ------------------------------------------------------------ */

static const char *const calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                    "data/shapes-calib/02.png", "data/shapes-calib/03.png", NULL};

/* This process's cfg and calibration cache files. */
static char cfg_path[64], calib_path[64];

static void name_temp_files(void)
{
    snprintf(cfg_path, sizeof cfg_path, "/tmp/gr_test_gpu_ops_%d.cfg", (int)getpid());
    snprintf(calib_path, sizeof calib_path, "/tmp/gr_test_gpu_ops_%d.calib", (int)getpid());
}

/* Append the first n bytes of `s` to the growing string *text (*len bytes long). */
static void append(char **text, size_t *len, const char *s, size_t n)
{
    char *grown = realloc(*text, *len + n + 1);
    ck_assert(grown);
    memcpy(grown + *len, s, n);
    *len += n;
    grown[*len] = '\0';
    *text = grown;
}

/* `src` with every "$ACT" replaced by `act`, appended to *text. */
static void append_substituted(char **text, size_t *len, const char *src, const char *act)
{
    const char *p;
    while ((p = strstr(src, "$ACT")) != NULL) {
        ck_assert_msg(act, "\"$ACT\" in a row without activations");
        append(text, len, src, (size_t)(p - src));
        append(text, len, act, strlen(act));
        src = p + 4;
    }
    append(text, len, src, strlen(src));
}

/* The row's cfg text (the caller frees it). */
static char *cfg_text(const op_case *c, const char *act)
{
    char *text = NULL, line[512];
    size_t len = 0;
    append(&text, &len, "", 0);
    if (c->layers) {
        snprintf(line, sizeof line, "[net]\nwidth=%d\nheight=%d\nchannels=3\n", c->w, c->h);
        append(&text, &len, line, strlen(line));
        append_substituted(&text, &len, c->layers, act);
        return text;
    }
    FILE *f = fopen(c->cfg_file, "r");
    ck_assert_msg(f != NULL, "%s: cannot open %s", c->name, c->cfg_file);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "width=", 6) == 0)
            snprintf(line, sizeof line, "width=%d\n", c->w);
        else if (strncmp(line, "height=", 7) == 0)
            snprintf(line, sizeof line, "height=%d\n", c->h);
        else if (act && strcmp(line, "activation=logistic\n") == 0)
            snprintf(line, sizeof line, "activation=%s\n", act);
        append(&text, &len, line, strlen(line));
    }
    fclose(f);
    return text;
}

static gr_model *load_model(const op_case *c, const char *act)
{
    char *text = cfg_text(c, act);
    FILE *f = fopen(cfg_path, "w");
    ck_assert_msg(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s",
                  cfg_path);
    free(text);
    return gr_test_load_model(NULL, cfg_path, 7);
}

/* The run's batch: data/shapes-val/000.png, 001.png, ... letterboxed, uint8 NHWC back to back. */
static uint8_t *load_images(const op_case *c)
{
    size_t image = (size_t)3 * c->w * c->h;
    uint8_t *u8 = malloc((size_t)c->batch * image);
    ck_assert(u8);
    for (int k = 0; k < c->batch; k++) {
        char path[64];
        snprintf(path, sizeof path, "data/shapes-val/%03d.png", k);
        gr_image *im = NULL;
        ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
        ck_assert(gr_image_letterbox_u8(im, c->w, c->h, u8 + (size_t)k * image) == GR_OK);
        gr_image_destroy(im);
    }
    return u8;
}

static gr_engine *build(const gr_model *m, const op_case *c, gr_device dev, gr_precision prec,
                        const char *what)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = prec;
    eo.batch = c->batch;
    eo.calib_images = calib;
    eo.calib_device = GR_DEVICE_CPU;
    eo.calib_cache = calib_path; /* the GPU engine writes it, the CPU engine reads its ranges */
    eo.f32_algo = F32_ALGO(c->opts);
    eo.use_cuda_graph = !(c->opts & EAGER);
    eo.executor = c->opts & DATAFLOW ? GR_EXECUTOR_DATAFLOW : GR_EXECUTOR_GRAPH;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s: %s build: %s", what,
                  dev == GR_DEVICE_GPU ? "GPU" : "CPU", gr_last_error());
    return e;
}

/* ---- comparison --------------------------------------------------------------------------- */

typedef enum rule { RULE_EXACT, RULE_STEPS, RULE_NRMSE_1E2, RULE_FP32 } rule;

static const char *rule_name(rule r)
{
    switch (r) {
    case RULE_EXACT: return "bit-identical";
    case RULE_STEPS: return "int8 steps";
    case RULE_NRMSE_1E2: return "NRMSE <= 1e-2";
    default: return "NRMSE <= 1e-5, max |d| <= 1e-4 x range";
    }
}

/* Empty when d passes rule r (steps: the int8 steps allowed, scale the tensor's step), else why
 * not, into buf. */
static const char *judge(char *buf, size_t len, rule r, const gr_test_diff *d, size_t count,
                         int steps, double scale)
{
    buf[0] = '\0';
    if (d->nonfinite_mismatch)
        snprintf(buf, len, "a value is finite on one side only");
    else if (r == RULE_EXACT && d->differing)
        snprintf(buf, len, "%zu of %zu values differ (bit-identical expected)", d->differing,
                 count);
    else if (r == RULE_STEPS && d->max_abs > (steps + 1e-4) * scale)
        snprintf(buf, len, "max |d| %g > %d step(s) of %g", d->max_abs, steps, scale);
    else if (r == RULE_STEPS && (double)d->differing > 0.01 * (double)count)
        snprintf(buf, len, "%zu of %zu values differ (> 1%%)", d->differing, count);
    else if (r == RULE_NRMSE_1E2 && !(d->nrmse <= 1e-2))
        snprintf(buf, len, "NRMSE %g > 1e-2", d->nrmse);
    else if (r == RULE_FP32 && !(d->nrmse <= 1e-5 && d->max_abs <= 1e-4 * d->range))
        snprintf(buf, len, "NRMSE %g (limit 1e-5), max |d| %g (limit %g)", d->nrmse, d->max_abs,
                 1e-4 * d->range);
    return buf;
}

static int uses_libm(gr_activation a)
{
    switch (a) {
    case GR_ACT_LOGISTIC:
    case GR_ACT_MISH:
    case GR_ACT_SWISH:
    case GR_ACT_ELU:
    case GR_ACT_SELU:
    case GR_ACT_GELU:
    case GR_ACT_TANH:
    case GR_ACT_LOGGY: return 1;
    default: return 0;
    }
}

/* A node whose activation calls libm (the kinds that have one). */
static int libm_node(const gr_plan_node *nd)
{
    switch (nd->kind) {
    case GR_OP_CONV:
    case GR_OP_CONNECTED:
    case GR_OP_SHORTCUT:
    case GR_OP_SAM:
    case GR_OP_SCALE_CHANNELS: return uses_libm(nd->p.activation);
    default: return 0;
    }
}

/* An f32 op that sums in another order than the CPU (cuBLAS) or calls expf. */
static int inexact_f32_node(const gr_plan_node *nd)
{
    return nd->kind == GR_OP_CONNECTED || nd->kind == GR_OP_SOFTMAX;
}

/* The plan's launching nodes: any libm or inexact f32 node at all (the outputs' int8 rule). */
static int plan_inexact(const gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++)
        if (libm_node(&plan->nodes[i]) || inexact_f32_node(&plan->nodes[i]))
            return 1;
    return 0;
}

/* ---- node by node ------------------------------------------------------------------------- */

typedef struct trace {
    gr_precision prec;
    const char *what;
    int libm_before, inexact_before; /* seen in the nodes compared so far */
    int checked;
    char failure[640];               /* the first failing node */
} trace;

static void check_node(const gr_plan *plan, int node, const float *values, const float *want,
                       size_t n, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &plan->nodes[node];
    const gr_plan_tensor *pt = &plan->tensors[nd->output];
    const int libm = libm_node(nd), inexact = inexact_f32_node(nd);
    rule r = RULE_NRMSE_1E2;
    int steps = 0;
    if (t->prec == GR_PREC_FP32)
        r = RULE_FP32;
    else if (t->prec == GR_PREC_INT8) {
        if (!libm && !inexact && !t->libm_before && !t->inexact_before)
            r = RULE_EXACT;
        else if (!inexact && !t->inexact_before && pt->dtype == GR_DTYPE_I8) {
            r = RULE_STEPS;
            steps = t->libm_before ? 2 : 1;
        }
    }
    char why[160] = "no CPU value", at[200] = "";
    gr_test_diff d = {0, 0, 0.0, 0.0, 0.0, 0};
    if (want) {
        d = gr_test_compare(values, want, n);
        if (d.differing)
            gr_test_where(at, sizeof at, d.first, pt->c, pt->h, pt->w, values, want);
        judge(why, sizeof why, r, &d, n, steps, (double)pt->scale);
    }
    printf("  %s node %d %s layer %d (%s, %s): NRMSE %.3g, max |d| %.3g, %zu of %zu differ %s%s\n",
           t->what, node, gr_plan_kind_name(nd->kind), nd->layer, gr_dtype_name(pt->dtype),
           rule_name(r), d.nrmse, d.max_abs, d.differing, n, at, why[0] ? " FAILS" : "");
    if (why[0] && !t->failure[0])
        snprintf(t->failure, sizeof t->failure, "%s: node %d %s (layer %d, %s): %s; first %s",
                 t->what, node, gr_plan_kind_name(nd->kind), nd->layer, rule_name(r), why, at);
    t->libm_before += libm;
    t->inexact_before += inexact;
    t->checked++;
}

/* ---- the test ----------------------------------------------------------------------------- */

/* _i: index into runs */
START_TEST(op_matches_cpu)
{
    const op_run *run = &runs[_i];
    const op_case *c = &cases[run->row];
    const char *act = run->act >= 0 ? gr_activation_name((gr_activation)run->act) : NULL;
    char what[160];
    snprintf(what, sizeof what, "[%s%s%s] %s batch %d %dx%d", c->name, act ? " " : "",
             act ? act : "", gr_precision_name(run->prec), c->batch, c->w, c->h);
    unlink(calib_path); /* a new network: a new calibration */
    gr_model *m = load_model(c, act);
    uint8_t *u8 = load_images(c);
    gr_engine *gpu = build(m, c, GR_DEVICE_GPU, run->prec, what);
    gr_engine *cpu = build(m, c, GR_DEVICE_CPU, run->prec, what);
    const char *notice = gr_engine_notice(gpu);
    printf("%s: notice: %s\n", what, notice && notice[0] ? notice : "(none)");
    if (c->opts & DATAFLOW) /* the row tests that executor, not the fallback */
        ck_assert_msg(notice && strstr(notice, "executor: dataflow"), "%s: notice: %s", what,
                      notice ? notice : "(none)");

    /* Whole engines: every output. */
    ck_assert_msg(gr_engine_run_u8(gpu, u8) == GR_OK, "%s: GPU run: %s", what, gr_last_error());
    ck_assert_msg(gr_engine_run_u8(cpu, u8) == GR_OK, "%s: CPU run: %s", what, gr_last_error());
    int n_out = gr_engine_output_count(gpu);
    ck_assert_msg(n_out >= 1 && n_out == gr_engine_output_count(cpu), "%s: %d GPU, %d CPU outputs",
                  what, n_out, gr_engine_output_count(cpu));
    const gr_plan *plan = gr_engine_debug_plan(gpu);
    ck_assert_msg(plan, "%s: no plan", what);
    rule r = run->prec == GR_PREC_FP32 ? RULE_FP32
             : run->prec == GR_PREC_INT8 && !plan_inexact(plan) ? RULE_EXACT
                                                               : RULE_NRMSE_1E2;
    for (int k = 0; k < n_out; k++) {
        gr_tensor_desc dg, dc;
        ck_assert(gr_engine_output_desc(gpu, k, &dg) == GR_OK);
        ck_assert(gr_engine_output_desc(cpu, k, &dc) == GR_OK);
        ck_assert_msg(dg.n == dc.n && dg.c == dc.c && dg.h == dc.h && dg.w == dc.w,
                      "%s: output %d: GPU %dx%dx%dx%d, CPU %dx%dx%dx%d", what, k, dg.n, dg.c, dg.h,
                      dg.w, dc.n, dc.c, dc.h, dc.w);
        ck_assert_msg(dg.n == c->batch, "%s: output %d holds %d images", what, k, dg.n);
        if (k == 0)
            ck_assert_msg(dg.c == c->out_c && dg.h == c->out_h && dg.w == c->out_w,
                          "%s: output 0 is %dx%dx%d, the table says %dx%dx%d", what, dg.c, dg.h,
                          dg.w, c->out_c, c->out_h, c->out_w);
        const float *gy = NULL, *cy = NULL;
        ck_assert(gr_engine_output(gpu, k, &gy) == GR_OK);
        ck_assert(gr_engine_output(cpu, k, &cy) == GR_OK);
        size_t n = (size_t)dg.n * dg.c * dg.h * dg.w;
        gr_test_diff d = gr_test_compare(gy, cy, n);
        char why[160], at[200] = "";
        if (d.differing)
            gr_test_where(at, sizeof at, d.first, dg.c, dg.h, dg.w, gy, cy);
        judge(why, sizeof why, r, &d, n, 0, 0.0);
        printf("%s: output %d against the CPU engine (%s): NRMSE %.3g, max |d| %.3g of range "
               "%.3g, %zu of %zu differ %s\n",
               what, k, rule_name(r), d.nrmse, d.max_abs, d.range, d.differing, n, at);
        ck_assert_msg(d.range > 0.0, "%s: output %d is constant on the CPU (%g): nothing to "
                      "compare", what, k, (double)cy[0]);
        ck_assert_msg(why[0] == '\0', "%s: output %d (%s): %s; first %s", what, k, rule_name(r),
                      why, at);
    }

    /* Node by node (the dataflow executor's kernel runs no node by itself). */
    if (!(c->opts & DATAFLOW)) {
        trace t = {run->prec, what, 0, 0, 0, ""};
        ck_assert_msg(gr_test_trace_nodes(gpu, u8, check_node, &t) == GR_OK, "%s: trace: %s",
                      what, gr_last_error());
        ck_assert_msg(t.checked > 0, "%s: no node was compared", what);
        ck_assert_msg(t.failure[0] == '\0', "%s", t.failure);
    }

    free(u8);
    gr_engine_destroy(cpu);
    gr_engine_destroy(gpu);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("test_gpu_ops"))
        return 77;
    name_temp_files();
    const char *filter = getenv("GR_TEST_OPS_FILTER");
    if (add_runs(filter && filter[0] ? filter : NULL) != 0) {
        printf("test_gpu_ops: more than %d runs: raise MAX_RUNS\n", MAX_RUNS);
        return 1;
    }
    printf("test_gpu_ops: %d runs of %d rows%s%s\n", n_runs, N_CASES, filter ? ", filter " : "",
           filter ? filter : "");
    if (n_runs == 0) {
        printf("test_gpu_ops: no row matches GR_TEST_OPS_FILTER=%s\n", filter ? filter : "");
        return 1;
    }
    int failed = gr_test_run_loop("gpu_ops", op_matches_cpu, 0, n_runs, 600);
    unlink(cfg_path);
    unlink(calib_path);
    return failed ? 1 : 0;
}
