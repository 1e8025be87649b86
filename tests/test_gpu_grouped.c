/* GPU suite for grouped, depthwise, dilated and stride_x != stride_y convolutions in fp16 and int8
 * engines: the direct kernels of kernels/conv_direct.h on the planner's channels-last tensors.
 * Exits 77 (skipped) with one line when no CUDA device is visible.
 *
 * Two small cfgs with synthetic weights (seed 7):
 *   - "convs" (tests/data/grouped_convs.cfg): an ordinary 3x3 conv, then depthwise 3x3 stride 1 and 2 (groups = channels),
 *     groups=2 and groups=4 3x3, a dilated 3x3 (dilation 2), stride_x=2 (stride_y 1), a depthwise
 *     multiplier 2 (32 filters, 16 groups), groups=4 with 12 filters (padding channels the next,
 *     ordinary, tensor-core conv reads: they must be written 0), and a grouped 1x1 head (groups 4,
 *     its dequantize fused: the direct kernel writes f32 NCHW);
 *   - "fusions" (tests/data/grouped_fusions.cfg): the first conv is stride_x=2 (the direct kernel reads the uint8 network input
 *     and quantizes it itself), a depthwise conv followed by a 2x2 maxpool (no fused maxpool in
 *     the direct kernel: the engine plans that layer without the fusion), and a depthwise conv
 *     writing its channel slice of a concat (route -3,-1 in place).
 * Activations without a libm call only (leaky, relu, relu6, hard_mish, linear), so nothing but our
 * own arithmetic can differ (test_gpu_activations covers the libm ones on the same epilogue).
 *
 * Checks, per precision:
 *   1. node by node against the planner's CPU emulation of the engine's own plan
 *      (gr_engine_debug_trace vs gr_plan_execute): int8 tensors bit-identical (the integer sums
 *      are exact on both sides and the epilogue is the same float expression, plan.h); fp16
 *      NRMSE <= 1e-2 (test_gpu_mixed's fp16 rule: half rounding of inputs, weights, outputs; the
 *      direct kernel sums in the emulation's order without fma, so it is in fact expected to be
 *      bit-identical too: the differing count is printed);
 *   2. the engine's outputs at batch 2 (two different images) against the CPU engine of the same
 *      precision (the same calibration, on the CPU, so the same scales): int8 bit-identical, fp16
 *      NRMSE <= 1e-2 as above.
 * A failure names the cfg, precision, node, layer and the first differing element (n, c, y, x). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h> /* the CUDA build only (the engine's debug hooks) */

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"

#define SIDE 40

static const char *const calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                    "data/shapes-calib/02.png", "data/shapes-calib/03.png", NULL};

typedef struct net_case {
    const char *name;
    const char *cfg;
    int out_c, out_h, out_w; /* the head's shape, asserted */
} net_case;

static const net_case cases[] = {{"convs", "tests/data/grouped_convs.cfg", 8, 20, 10},
                                 {"fusions", "tests/data/grouped_fusions.cfg", 8, 20, 10}};

static const gr_precision precisions[2] = {GR_PREC_FP16, GR_PREC_INT8};

static gr_model *load_cfg(const char *path)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = path;
    mo.seed = 7;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_engine *build(const gr_model *m, gr_device dev, gr_precision prec, int batch)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = prec;
    eo.batch = batch;
    eo.calib_images = calib;
    eo.calib_device = GR_DEVICE_CPU;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s %s build: %s",
                  dev == GR_DEVICE_GPU ? "GPU" : "CPU", gr_precision_name(prec), gr_last_error());
    return e;
}

/* `count` letterboxed validation images back to back, uint8 HWC. */
static uint8_t *load_images(int count)
{
    uint8_t *u8 = malloc((size_t)count * 3 * SIDE * SIDE);
    ck_assert(u8);
    for (int k = 0; k < count; k++) {
        char path[64];
        snprintf(path, sizeof path, "data/shapes-val/%03d.png", k);
        gr_image *im = NULL;
        ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
        ck_assert(gr_image_letterbox_u8(im, SIDE, SIDE, u8 + (size_t)k * 3 * SIDE * SIDE) == GR_OK);
        gr_image_destroy(im);
    }
    return u8;
}

/* Comparison of two NCHW arrays of shape n x c x h x w. */
typedef struct diff {
    size_t differing, first; /* first: index of the first differing value (n*c*h*w if none) */
    double nrmse, max_abs;
} diff;

static diff compare(const float *got, const float *want, size_t count)
{
    diff d = {0, count, 0.0, 0.0};
    double sq = 0.0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (got[i] != want[i] && !(isnan(got[i]) && isnan(want[i]))) {
            if (d.differing++ == 0)
                d.first = i;
        }
        sq += isfinite(e) ? e * e : (double)INFINITY;
        d.max_abs = fmax(d.max_abs, e);
        lo = fmin(lo, (double)want[i]);
        hi = fmax(hi, (double)want[i]);
    }
    d.nrmse = sqrt(sq / (double)count) / (hi > lo ? hi - lo : 1.0);
    return d;
}

/* "(n, c, y, x) GPU v, CPU v" of value i of an n x c x h x w array, for the failure message. */
static const char *where(char *buf, size_t len, size_t i, int c, int h, int w, const float *got,
                         const float *want)
{
    size_t plane = (size_t)h * w, image = (size_t)c * plane;
    snprintf(buf, len, "(n %zu, c %zu, y %zu, x %zu): GPU %.9g, CPU %.9g", i / image,
             i % image / plane, i % plane / (size_t)w, i % (size_t)w, (double)got[i],
             (double)want[i]);
    return buf;
}

typedef struct trace {
    const gr_plan *plan;
    float **cpu;
    char what[64]; /* "convs int8" */
    gr_precision prec;
    int checked, direct_convs;
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

static int is_direct(const gr_plan_node *nd)
{
    return nd->kind == GR_OP_CONV &&
           (nd->p.groups > 1 || gr_conv_dilation(&nd->p) > 1 ||
            gr_conv_stride_y(&nd->p) != nd->p.stride);
}

static void gpu_hook(const gr_plan *plan, int node, const float *values, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &plan->nodes[node];
    const gr_plan_tensor *pt = &plan->tensors[nd->output];
    const float *want = t->cpu[node];
    ck_assert_msg(want, "%s: node %d has no CPU value", t->what, node);
    size_t n = tensor_elems(plan, nd->output);
    diff d = compare(values, want, n);
    char at[160] = "";
    if (d.differing)
        where(at, sizeof at, d.first, pt->c, pt->h, pt->w, values, want);
    printf("  %s node %d %s layer %d%s (%s out): NRMSE %.3g, %zu of %zu differ %s\n", t->what,
           node, gr_plan_kind_name(nd->kind), nd->layer, is_direct(nd) ? " direct" : "",
           gr_dtype_name(pt->dtype), d.nrmse, d.differing, n, at);
    if (t->prec == GR_PREC_INT8 && (pt->dtype == GR_DTYPE_I8 || is_direct(nd)))
        ck_assert_msg(d.differing == 0,
                      "%s: node %d %s (layer %d) differs from the CPU emulation at %zu of %zu "
                      "values; first %s (int8 step %g)",
                      t->what, node, gr_plan_kind_name(nd->kind), nd->layer, d.differing, n, at,
                      (double)pt->scale);
    else
        ck_assert_msg(d.nrmse <= 1e-2, "%s: node %d %s (layer %d) NRMSE %g > 1e-2; first %s",
                      t->what, node, gr_plan_kind_name(nd->kind), nd->layer, d.nrmse, at);
    t->direct_convs += is_direct(nd);
    t->checked++;
}

/* _i = case * 2 + precision */
START_TEST(direct_convs_match_emulation_node_by_node)
{
    const net_case *c = &cases[_i / 2];
    gr_precision prec = precisions[_i % 2];
    gr_model *m = load_cfg(c->cfg);
    gr_engine *e = build(m, GR_DEVICE_GPU, prec, 1);
    const gr_plan *plan = gr_engine_debug_plan(e);
    ck_assert(plan);
    trace t = {plan, calloc((size_t)plan->n_nodes, sizeof(float *)), "", prec, 0, 0};
    ck_assert(t.cpu);
    snprintf(t.what, sizeof t.what, "%s %s", c->name, gr_precision_name(prec));
    const char *notice = gr_engine_notice(e);
    printf("%s: notice: %s\n", t.what, notice && notice[0] ? notice : "(none)");
    uint8_t *u8 = load_images(1);
    gr_plan_exec *ex = NULL;
    ck_assert(gr_plan_exec_create(plan, 0, &ex) == GR_OK);
    gr_plan_exec_set_hook(ex, cpu_hook, &t);
    ck_assert_msg(gr_plan_execute(ex, u8) == GR_OK, "%s: %s", t.what, gr_last_error());
    ck_assert_msg(gr_engine_debug_trace(e, u8, gpu_hook, &t) == GR_OK, "%s: %s", t.what,
                  gr_last_error());
    ck_assert_msg(t.direct_convs >= 3, "%s: only %d direct convs compared", t.what,
                  t.direct_convs);
    for (int i = 0; i < plan->n_nodes; i++)
        free(t.cpu[i]);
    free(t.cpu);
    free(u8);
    gr_plan_exec_destroy(ex);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

/* _i = case * 2 + precision */
START_TEST(direct_convs_match_cpu_engine_at_batch_2)
{
    const net_case *c = &cases[_i / 2];
    gr_precision prec = precisions[_i % 2];
    char what[64];
    snprintf(what, sizeof what, "%s %s batch 2", c->name, gr_precision_name(prec));
    gr_model *m = load_cfg(c->cfg);
    gr_engine *gpu = build(m, GR_DEVICE_GPU, prec, 2);
    gr_engine *cpu = build(m, GR_DEVICE_CPU, prec, 2);
    uint8_t *u8 = load_images(2);
    ck_assert_msg(gr_engine_run_u8(gpu, u8) == GR_OK, "%s: GPU: %s", what, gr_last_error());
    ck_assert_msg(gr_engine_run_u8(cpu, u8) == GR_OK, "%s: CPU: %s", what, gr_last_error());
    gr_tensor_desc dg, dc;
    ck_assert(gr_engine_output_desc(gpu, 0, &dg) == GR_OK);
    ck_assert(gr_engine_output_desc(cpu, 0, &dc) == GR_OK);
    ck_assert_msg(dg.n == 2 && dg.c == c->out_c && dg.h == c->out_h && dg.w == c->out_w,
                  "%s: output %dx%dx%dx%d, expected 2x%dx%dx%d", what, dg.n, dg.c, dg.h, dg.w,
                  c->out_c, c->out_h, c->out_w);
    ck_assert(dc.n == dg.n && dc.c == dg.c && dc.h == dg.h && dc.w == dg.w);
    const float *gy = NULL, *cy = NULL;
    ck_assert(gr_engine_output(gpu, 0, &gy) == GR_OK && gr_engine_output(cpu, 0, &cy) == GR_OK);
    size_t n = (size_t)dg.n * dg.c * dg.h * dg.w;
    diff d = compare(gy, cy, n);
    char at[160] = "";
    if (d.differing)
        where(at, sizeof at, d.first, dg.c, dg.h, dg.w, gy, cy);
    printf("%s: output against the CPU engine: NRMSE %.3g, max |d| %.3g, %zu of %zu differ %s\n",
           what, d.nrmse, d.max_abs, d.differing, n, at);
    if (prec == GR_PREC_INT8)
        ck_assert_msg(d.differing == 0, "%s: %zu of %zu output values differ; first %s", what,
                      d.differing, n, at);
    else
        ck_assert_msg(d.nrmse <= 1e-2, "%s: output NRMSE %g > 1e-2; first %s", what, d.nrmse, at);
    free(u8);
    gr_engine_destroy(cpu);
    gr_engine_destroy(gpu);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("test_gpu_grouped"))
        return 77;
    Suite *s = suite_create("gpu_grouped");
    TCase *tc = tcase_create("gpu_grouped");
    tcase_set_timeout(tc, 300);
    int n = (int)(sizeof cases / sizeof cases[0]) * 2;
    tcase_add_loop_test(tc, direct_convs_match_emulation_node_by_node, 0, n);
    tcase_add_loop_test(tc, direct_convs_match_cpu_engine_at_batch_2, 0, n);
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s) ? 1 : 0;
}
