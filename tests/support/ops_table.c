#include "tests/support/ops_table.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/gpu_test.h"
#include "tests/support/onnx_inputs.h"

/* ---- the table ---------------------------------------------------------------------------- */


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
#define ATTENTION_ONNX "tests/onnx/attention_op13.onnx"
#define DFL_HEAD_ONNX "tests/onnx/tiny_head.onnx"
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

const gr_test_op_case gr_test_op_cases[] = {
    /* -- activations fused in the conv epilogues ------------------------------------------- */
    {"act", CONV3_ACT, NULL, 40, 40, 1, PALL, EVERY_ACT, 8, 20, 20, 0},
    {"act odd batch", CONV3_ACT, NULL, 37, 37, 3, PALL,
     ACT(GR_ACT_LINEAR) | ACT(GR_ACT_LEAKY) | ACT(GR_ACT_MISH) | ACT(GR_ACT_SWISH) |
         ACT(GR_ACT_LOGISTIC),
     8, 19, 19, 0},

    /* -- convolutions and pools ----------------------------------------------------------- */
    {"conv 3x3/1 + 1x1", CONV(16, 3, 1, "leaky") HEAD, NULL, 13, 13, 1, PALL, 0, 8, 13, 13, 0},
    {"conv 3x3/1 + 1x1 batch", CONV(16, 3, 1, "leaky") HEAD, NULL, 13, 13, 3, PALL, 0, 8, 13, 13,
     0},
    {"conv 3x3/2 twice", CONV(16, 3, 2, "leaky") CONV(32, 3, 2, "leaky") HEAD, NULL, 37, 37, 3,
     PALL, 0, 8, 10, 10, 0},
    {"stem 16->32 + maxpool", STEM, NULL, 26, 26, 1, PALL, 0, 8, 7, 7, 0},
    {"stem batch 64", STEM, NULL, 26, 26, 64, PALL, 0, 8, 7, 7, 0},
    {"stem non-square", STEM, NULL, 37, 13, 3, PALL, 0, 8, 4, 10, 0},
    /* yolov2-tiny's stride-1 pool (right/bottom padding), and a 3/2 one */
    {"maxpool 2/1", CONV(16, 3, 1, "leaky") MAXPOOL(2, 1) HEAD, NULL, 13, 13, 3, PALL, 0, 8, 13,
     13, 0},
    {"maxpool 3/2", CONV(16, 3, 1, "leaky") MAXPOOL(3, 2) HEAD, NULL, 13, 13, 3, PALL, 0, 8, 7, 7,
     0},
    /* The fp32 algorithms, forced (gr_engine_options.f32_algo; direct3x3 fuses the maxpools),
     * eager launches, the dataflow executor. */
    {"stem fp32 sgemm", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_SGEMM)},
    {"stem fp32 tf32x3", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_TF32X3)},
    {"stem fp32 implicit", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7,
     F32(GR_F32_ALGO_TF32X3_IMPLICIT)},
    {"stem fp32 direct3x3", STEM, NULL, 26, 26, 3, P32, 0, 8, 7, 7, F32(GR_F32_ALGO_DIRECT3X3)},
    {"stem eager", STEM, NULL, 13, 13, 3, PALL, 0, 8, 4, 4, EAGER},
    {"stem dataflow", STEM, NULL, 26, 26, 1, P16 | P8, 0, 8, 7, 7, DATAFLOW},
    /* Grouped, depthwise, dilated and stride_x != stride_y convs: the direct kernels
     * (kernels/conv_direct.h; the cfg files say what each layer tests). No libm activations:
     * int8 bit-identical throughout. */
    {"grouped convs", NULL, "tests/data/grouped_convs.cfg", 40, 40, 1, P16 | P8, 0, 8, 20, 10, 0},
    {"grouped convs batch", NULL, "tests/data/grouped_convs.cfg", 40, 40, 2, P16 | P8, 0, 8, 20,
     10, 0},
    {"grouped fusions", NULL, "tests/data/grouped_fusions.cfg", 40, 40, 1, P16 | P8, 0, 8, 20, 10,
     0},
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
    {"sam scale_channels batch", NULL, ALEXEYAB_CFG, 26, 26, 3, PALL, ACT(GR_ACT_RELU6), 6, 13,
     13, 0},

    /* -- new ops: their rows here (every precision they run in, batch 1 and > 1, odd sizes) --- */
    /* AlexeyAB's [local_avgpool] (an f32 kernel: fp16 engines convert around it). Not int8 yet:
     * on the H100 (2026-12-07) the int8 GPU engine differed from the CPU emulation after it
     * (381 of 392 head values, NRMSE 3.2e-3) where every other int8 row is bit-identical: an open
     * finding (test_gpu_local_avgpool holds int8 to the NRMSE bound meanwhile). */
    {"local_avgpool", CONV(16, 3, 1, "leaky") "[local_avgpool]\nsize=2\nstride=2\n" HEAD, NULL, 13,
     13, 1, P32 | P16, 0, 8, 7, 7, 0},
    {"local_avgpool batch", CONV(16, 3, 1, "leaky") "[local_avgpool]\nsize=3\nstride=2\n" HEAD,
     NULL, 18, 18, 3, P32 | P16, 0, 8, 9, 9, 0},
    /* The attention op (YOLO11's C2PSA, ops/attention.c): no Darknet section, so an ONNX file
     * (tests/onnx/make_models.py's AttentionNet: a stride-2 conv, the qkv conv, 2 heads of 8
     * channels over 8 x 8 tokens, the route of v, the depthwise pe conv, the add, the proj
     * conv). f32 kernel (kernels/attention.cu); fp16 / int8 convert around it. */
    {"attention", NULL, ATTENTION_ONNX, 16, 16, 1, PALL, 0, 16, 8, 8, 0},
    {"attention batch", NULL, ATTENTION_ONNX, 16, 16, 3, PALL, 0, 16, 8, 8, 0},
    /* The anchor-free head's decode (YOLOv8 / YOLO11, ops/dfl_head.c): no Darknet section, so
     * an ONNX file (make_models.py's TinyHead: three scales of 4x4, 2x2, 1x1 cells, 16 bins, 2
     * classes; each scale's concat of box and class convs, f32 slices in fp16 / int8 engines).
     * f32 kernel (kernels/head.cu). */
    {"dfl_head", NULL, DFL_HEAD_ONNX, 32, 32, 1, PALL, 0, 6, 1, 21, 0},
    {"dfl_head batch", NULL, DFL_HEAD_ONNX, 32, 32, 3, PALL, 0, 6, 1, 21, 0},
};

const int gr_test_op_n_cases = (int)(sizeof gr_test_op_cases / sizeof gr_test_op_cases[0]);

const char *const gr_test_op_calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                        "data/shapes-calib/02.png", "data/shapes-calib/03.png",
                                        NULL};

/* ---- reading it --------------------------------------------------------------------------- */

/* A row whose file is an ONNX model (its own weights and input size: w and h must be its). */
static bool is_onnx(const gr_test_op_case *c)
{
    size_t n = c->cfg_file ? strlen(c->cfg_file) : 0;
    return n > 5 && strcmp(c->cfg_file + n - 5, ".onnx") == 0;
}

int gr_test_op_runs(const char *filter, gr_test_op_run *runs, int max)
{
    int n = 0;
    const bool onnx = gr_test_have_onnx();
    for (int r = 0; r < gr_test_op_n_cases; r++) {
        const gr_test_op_case *c = &gr_test_op_cases[r];
        if ((filter && !strstr(c->name, filter)) || (is_onnx(c) && !onnx))
            continue; /* a build without ONNX import (-DGR_ENABLE_ONNX=OFF) skips ONNX rows */
        for (int a = c->acts ? 0 : -1; a < (c->acts ? GR_ACT_COUNT : 0); a++) {
            if (a >= 0 && !(c->acts & ACT(a)))
                continue;
            for (int p = GR_PREC_FP32; p <= GR_PREC_INT8; p++) {
                if (!(c->precs & (1u << p)))
                    continue;
                if (n == max)
                    return -1;
                runs[n++] = (gr_test_op_run){r, a, (gr_precision)p};
            }
        }
    }
    return n;
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

char *gr_test_op_cfg(const gr_test_op_case *c, const char *act)
{
    char *text = NULL, line[512];
    size_t len = 0;
    append(&text, &len, "", 0);
    if (is_onnx(c)) { /* nothing to substitute: the text is its path */
        append(&text, &len, c->cfg_file, strlen(c->cfg_file));
        return text;
    }
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

gr_model *gr_test_op_model(const gr_test_op_case *c, const char *act, const char *cfg_path)
{
    if (is_onnx(c))
        return gr_test_load_model(NULL, c->cfg_file, 0);
    char *text = gr_test_op_cfg(c, act);
    FILE *f = fopen(cfg_path, "w");
    ck_assert_msg(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s",
                  cfg_path);
    free(text);
    return gr_test_load_model(NULL, cfg_path, 7);
}

uint8_t *gr_test_op_images(const gr_test_op_case *c)
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
