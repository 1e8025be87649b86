/* GPU suite for AlexeyAB's activations fused in the conv epilogues, for grouped / depthwise /
 * dilated / stride_x != stride_y convolutions in fp32 (fp16 / int8: tests/test_gpu_grouped.c)
 * and for [sam] / [scale_channels] (the products after them), through the whole engine on small
 * synthetic cfgs,
 * against the planner's CPU emulation of the same plan node by node (gr_engine_debug_trace vs
 * gr_plan_execute). Exits 77 (skipped) with one line when no CUDA device is visible.
 *
 * The cfg of the activation test: [net] 40x40x3, conv 3x3/1 16 filters with the activation under
 * test (the first layer: conv_first.cu's fused-quantize kernels in fp16/int8), conv 3x3/2 16 with
 * it again (the general tensor-core kernels), conv 1x1 8 linear (the output).
 *
 * Tolerances, per node (NRMSE = sqrt(mean(d^2)) / (max - min of the emulation)):
 *   - int8, activations without a libm call (linear, leaky, relu, relu6, hard_mish, relie, ramp,
 *     plse, stair, hardtan, lhtan): bit-identical, every node. The integer sums are exact on both
 *     sides and the epilogue is the same float expression (ops/activation.h's gr_act_epilogue,
 *     no fma contraction: GR_FMUL), so nothing can differ;
 *   - int8, the others (logistic, mish, swish, elu, selu, gelu, tanh, loggy): CUDA's expf / logf
 *     / tanhf / powf are within 2 ulp of glibc's, which can tip an output lying on a rounding
 *     boundary by one step: at most one quantization step, on at most 1% of the values (the first
 *     node; a tipped input tips the next node's outputs at most once more: 2 steps there);
 *   - fp16: NRMSE <= 1e-2 (test_gpu_mixed's fp16 rule: half rounding of inputs, weights, outputs);
 *   - fp32: NRMSE <= 1e-5 and max |d| <= 1e-4 x range (3xTF32 / SGEMM / direct kernels sum in
 *     other orders than the emulation; the float leaky/logistic of the GPU against the reference's
 *     double ones differ by an ulp). */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"

#define SIDE 40

static const char *const calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                    "data/shapes-calib/02.png", "data/shapes-calib/03.png", NULL};

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

/* Write `text` to a temporary cfg file; returns its path (static buffer). */
static const char *write_cfg(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/gr_test_gpu_act_%d.cfg", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fputs(text, f) >= 0);
    ck_assert(fclose(f) == 0);
    return path;
}

static gr_model *load_cfg(const char *cfg_path)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = cfg_path;
    mo.seed = 7;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_status build(const gr_model *m, gr_device dev, gr_precision prec, gr_engine **e)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = prec;
    eo.calib_images = calib;
    eo.calib_device = GR_DEVICE_CPU;
    return gr_engine_build(m, &eo, e);
}

static uint8_t *load_u8(void)
{
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load("data/shapes-val/000.png", &im) == GR_OK, "%s", gr_last_error());
    uint8_t *u8 = malloc(3 * SIDE * SIDE);
    ck_assert(u8);
    ck_assert(gr_image_letterbox_u8(im, SIDE, SIDE, u8) == GR_OK);
    gr_image_destroy(im);
    return u8;
}

typedef struct trace {
    const gr_plan *plan;
    float **cpu;
    const char *what; /* "mish int8" */
    gr_activation act;
    gr_precision prec;
    int first_conv_seen, checked;
} trace;

static size_t tensor_elems(const gr_plan *plan, int t)
{
    const gr_plan_tensor *pt = &plan->tensors[t];
    return (size_t)pt->n * pt->c * pt->h * pt->w;
}

static void cpu_hook(const gr_plan_exec *ex, int node, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &t->plan->nodes[node];
    if (nd->output < 0)
        return;
    t->cpu[node] = malloc(tensor_elems(t->plan, nd->output) * sizeof(float));
    ck_assert(t->cpu[node]);
    ck_assert(gr_plan_exec_read_tensor(ex, nd->output, t->cpu[node]) == GR_OK);
}

/* The first differing value, for the failure message. */
static size_t first_difference(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return i;
    return n;
}

static void gpu_hook(const gr_plan *plan, int node, const float *values, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &plan->nodes[node];
    const float *want = t->cpu[node];
    ck_assert_msg(want, "%s: node %d has no CPU value", t->what, node);
    size_t n = tensor_elems(plan, nd->output), differing = 0;
    double sq = 0.0, lo = INFINITY, hi = -INFINITY, max_abs = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)values[i] - (double)want[i]);
        ck_assert_msg(isfinite(values[i]) == isfinite(want[i]),
                      "%s: node %d value %zu: GPU %g, CPU %g", t->what, node, i,
                      (double)values[i], (double)want[i]);
        if (!isfinite(want[i]))
            continue;
        sq += d * d;
        max_abs = fmax(max_abs, d);
        differing += values[i] != want[i];
        lo = fmin(lo, (double)want[i]);
        hi = fmax(hi, (double)want[i]);
    }
    double range = hi > lo ? hi - lo : 1.0, nrmse = sqrt(sq / (double)n) / range;
    const gr_plan_tensor *pt = &plan->tensors[nd->output];
    printf("  %s node %d %s layer %d: NRMSE %.3g, max |d| %.3g, %zu of %zu differ\n", t->what,
           node, gr_plan_kind_name(nd->kind), nd->layer, nrmse, max_abs, differing, n);
    if (t->prec == GR_PREC_INT8 && pt->dtype == GR_DTYPE_I8) {
        if (!uses_libm(t->act)) {
            size_t k = first_difference(values, want, n);
            ck_assert_msg(differing == 0,
                          "%s: node %d (layer %d) int8 differs from the CPU emulation at %zu of "
                          "%zu values; first at %zu: GPU %g, CPU %g (step %g)",
                          t->what, node, nd->layer, differing, n, k, (double)values[k],
                          (double)want[k], (double)pt->scale);
        } else {
            double steps = t->first_conv_seen ? 2.0001 : 1.0001;
            ck_assert_msg(max_abs <= steps * (double)pt->scale,
                          "%s: node %d max |d| %g > %.0f step(s) of %g", t->what, node, max_abs,
                          floor(steps), (double)pt->scale);
            ck_assert_msg((double)differing <= 0.01 * (double)n,
                          "%s: node %d: %zu of %zu values differ (> 1%%)", t->what, node,
                          differing, n);
        }
    } else if (t->prec == GR_PREC_FP32) {
        ck_assert_msg(nrmse <= 1e-5 && max_abs <= 1e-4 * range,
                      "%s: node %d NRMSE %g (limit 1e-5), max |d| %g (limit %g)", t->what, node,
                      nrmse, max_abs, 1e-4 * range);
    } else {
        ck_assert_msg(nrmse <= 1e-2, "%s: node %d NRMSE %g > 1e-2", t->what, node, nrmse);
    }
    t->first_conv_seen |= nd->kind == GR_OP_CONV;
    t->checked++;
}

/* Build `m` on the GPU in `prec`, trace it against the CPU emulation of its own plan. */
static void check_against_emulation(const gr_model *m, gr_precision prec, gr_activation act,
                                    const char *what)
{
    gr_engine *e = NULL;
    ck_assert_msg(build(m, GR_DEVICE_GPU, prec, &e) == GR_OK, "%s: build: %s", what,
                  gr_last_error());
    const gr_plan *plan = gr_engine_debug_plan(e);
    ck_assert(plan);
    uint8_t *u8 = load_u8();
    trace t = {plan, calloc((size_t)plan->n_nodes, sizeof(float *)), what, act, prec, 0, 0};
    ck_assert(t.cpu);
    gr_plan_exec *ex = NULL;
    ck_assert(gr_plan_exec_create(plan, 0, &ex) == GR_OK);
    gr_plan_exec_set_hook(ex, cpu_hook, &t);
    ck_assert_msg(gr_plan_execute(ex, u8) == GR_OK, "%s: %s", what, gr_last_error());
    ck_assert_msg(gr_engine_debug_trace(e, u8, gpu_hook, &t) == GR_OK, "%s: %s", what,
                  gr_last_error());
    ck_assert_msg(t.checked > 0, "%s: no node was compared", what);
    for (int i = 0; i < plan->n_nodes; i++)
        free(t.cpu[i]);
    free(t.cpu);
    free(u8);
    gr_plan_exec_destroy(ex);
    gr_engine_destroy(e);
}

static const gr_precision precisions[3] = {GR_PREC_FP32, GR_PREC_FP16, GR_PREC_INT8};
static const char *const prec_names[3] = {"fp32", "fp16", "int8"};

/* _i = activation * 3 + precision */
START_TEST(activation_fused_in_conv_matches_emulation)
{
    gr_activation act = (gr_activation)(_i / 3);
    int p = _i % 3;
    char text[512], what[64];
    snprintf(text, sizeof text,
             "[net]\nwidth=%d\nheight=%d\nchannels=3\n"
             "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\n"
             "activation=%s\n"
             "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=2\npad=1\n"
             "activation=%s\n"
             "[convolutional]\nfilters=8\nsize=1\nstride=1\npad=1\nactivation=linear\n",
             SIDE, SIDE, gr_activation_name(act), gr_activation_name(act));
    snprintf(what, sizeof what, "%s %s", gr_activation_name(act), prec_names[p]);
    gr_model *m = load_cfg(write_cfg(text));
    check_against_emulation(m, precisions[p], act, what);
    gr_model_destroy(m);
}
END_TEST

/* tests/data/alexeyab/sam-scale.cfg (the net test_alexeyab checks the CPU reference of against
 * AlexeyAB's build: [sam], [scale_channels] per channel and per position, each feeding a head) at
 * SIDE x SIDE, as written (logistic attention convs) or with relu6 in place of logistic, which
 * leaves no libm call in the int8 plan: there every node, the products included, must be
 * bit-identical to the emulation (the same float products, no fma: kernels/data.cu mul_body).
 * _i = variant * 3 + precision. */
START_TEST(sam_and_scale_channels_match_emulation)
{
    const int relu6 = _i / 3, p = _i % 3;
    FILE *f = fopen("tests/data/alexeyab/sam-scale.cfg", "r");
    ck_assert_msg(f != NULL, "cannot open tests/data/alexeyab/sam-scale.cfg");
    char text[4096] = "", line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "width=", 6) == 0 || strncmp(line, "height=", 7) == 0)
            snprintf(line, sizeof line, "%s=%d\n", line[0] == 'w' ? "width" : "height", SIDE);
        else if (relu6 && strcmp(line, "activation=logistic\n") == 0)
            snprintf(line, sizeof line, "activation=relu6\n");
        ck_assert(strlen(text) + strlen(line) < sizeof text);
        strcat(text, line);
    }
    fclose(f);
    char what[64];
    snprintf(what, sizeof what, "sam-scale (%s) %s", relu6 ? "relu6" : "logistic", prec_names[p]);
    gr_model *m = load_cfg(write_cfg(text));
    check_against_emulation(m, precisions[p], relu6 ? GR_ACT_RELU6 : GR_ACT_LOGISTIC, what);
    gr_model_destroy(m);
}
END_TEST

/* [shortcut] with leaky (and logistic) in every precision: the GPU's shortcut kernel applies the
 * activation with Darknet's CPU formulas (leaky with a double .1) after the add; the emulation
 * must do the same (it used the conv epilogues' 0.1f, which differs in the last bit for some
 * sums). Leaky in int8 leaves no libm call: bit-identical there. _i = activation * 3 + precision. */
START_TEST(shortcut_activation_matches_emulation)
{
    const gr_activation act = _i / 3 ? GR_ACT_LOGISTIC : GR_ACT_LEAKY;
    const int p = _i % 3;
    char text[640], what[64];
    snprintf(text, sizeof text,
             "[net]\nwidth=%d\nheight=%d\nchannels=3\n"
             "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\n"
             "activation=leaky\n"
             "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\n"
             "activation=linear\n"
             "[shortcut]\nfrom=-2\nactivation=%s\n"
             "[convolutional]\nfilters=8\nsize=1\nstride=1\npad=1\nactivation=linear\n",
             SIDE, SIDE, gr_activation_name(act));
    snprintf(what, sizeof what, "shortcut %s %s", gr_activation_name(act), prec_names[p]);
    gr_model *m = load_cfg(write_cfg(text));
    check_against_emulation(m, precisions[p], act, what);
    gr_model_destroy(m);
}
END_TEST

/* Grouped, depthwise, dilated and stride_x != stride_y convs in fp32: the direct kernel
 * (kernels/conv_direct.cu: depthwise 3x3 stride 1 and 2, multiplier 2, groups of 8 channels,
 * dilation 2, stride_x 2, grouped 1x1) and the per-group GEMMs (groups of 16 channels), with
 * AlexeyAB's activations. Against the emulation (fp32 tolerance above) and, for the output,
 * against the CPU engine. */
START_TEST(grouped_dilated_strided_fp32_match_cpu)
{
    static const char text[] =
        "[net]\nwidth=40\nheight=40\nchannels=3\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\ngroups=16\nsize=3\nstride=1\npad=1\n"
        "activation=relu6\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\ngroups=16\nsize=3\nstride=2\npad=1\n"
        "activation=mish\n"
        "[convolutional]\nbatch_normalize=1\nfilters=32\ngroups=16\nsize=3\nstride=1\npad=1\n"
        "activation=swish\n"
        "[convolutional]\nbatch_normalize=1\nfilters=32\ngroups=2\nsize=3\nstride=1\npad=1\n"
        "activation=elu\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\ngroups=4\nsize=3\nstride=1\npad=1\n"
        "activation=hard_mish\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\ndilation=2\n"
        "activation=leaky\n"
        "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\nstride_x=2\n"
        "activation=gelu\n"
        "[convolutional]\nfilters=8\ngroups=4\nsize=1\nstride=1\nactivation=linear\n";
    gr_model *m = load_cfg(write_cfg(text));
    check_against_emulation(m, GR_PREC_FP32, GR_ACT_LINEAR, "grouped fp32");
    gr_engine *gpu = NULL, *cpu = NULL;
    ck_assert_msg(build(m, GR_DEVICE_GPU, GR_PREC_FP32, &gpu) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(build(m, GR_DEVICE_CPU, GR_PREC_FP32, &cpu) == GR_OK, "%s", gr_last_error());
    uint8_t *u8 = load_u8();
    ck_assert_msg(gr_engine_run_u8(gpu, u8) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run_u8(cpu, u8) == GR_OK, "%s", gr_last_error());
    const float *gy = NULL, *cy = NULL;
    ck_assert(gr_engine_output(gpu, 0, &gy) == GR_OK && gr_engine_output(cpu, 0, &cy) == GR_OK);
    gr_tensor_desc d;
    gr_engine_output_desc(gpu, 0, &d);
    ck_assert_int_eq(d.c, 8);
    ck_assert_int_eq(d.h, 20); /* stride 2 rows once */
    ck_assert_int_eq(d.w, 10); /* stride 2 columns twice */
    size_t n = (size_t)d.n * d.c * d.h * d.w;
    double lo = INFINITY, hi = -INFINITY, max_abs = 0.0;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, (double)cy[i]);
        hi = fmax(hi, (double)cy[i]);
        max_abs = fmax(max_abs, fabs((double)gy[i] - (double)cy[i]));
    }
    printf("grouped fp32 output: max |GPU - CPU engine| %.3g of range %.3g\n", max_abs, hi - lo);
    ck_assert_msg(max_abs <= 1e-4 * (hi - lo), "grouped fp32: output max |d| %g > 1e-4 x %g",
                  max_abs, hi - lo);
    free(u8);
    gr_engine_destroy(cpu);
    gr_engine_destroy(gpu);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("test_gpu_activations"))
        return 77;
    Suite *s = suite_create("gpu_activations");
    TCase *tc = tcase_create("gpu_activations");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, activation_fused_in_conv_matches_emulation, 0, 3 * GR_ACT_COUNT);
    tcase_add_loop_test(tc, sam_and_scale_channels_match_emulation, 0, 6);
    tcase_add_loop_test(tc, shortcut_activation_matches_emulation, 0, 6);
    tcase_add_test(tc, grouped_dilated_strided_fp32_match_cpu);
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s) ? 1 : 0;
}
