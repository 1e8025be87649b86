/* GPU engine with mixed precision (gr_engine_options.layer_precision, GR_PREC_AUTO) on the trained
 * model `shapes`: the GPU's mixed plan against the planner's CPU emulation of the same plan, node
 * by node, and the automatic map's error and latency. Exits 77 (skipped) with one line when no
 * CUDA device is visible.
 *
 * Tolerances (NRMSE = sqrt(mean((x-y)^2)) / (max(y)-min(y))):
 *   - int8 nodes before any fp16 node (integer accumulation is exact on both sides): at most 0.5%
 *     of the values differ, by at most two quantization steps (an output on a rounding boundary
 *     tips by one step, test_gpu_conv's rule, and a tipped input can tip the next layer's output
 *     once more);
 *   - every node: NRMSE <= 1e-2 against the emulation (fp16 accumulation order flips last bits
 *     that later int8 layers can turn into single steps; test_gpu_engine's int8 limit);
 *   - the engine's output against the CPU engine with the same map: NRMSE <= 1e-2 (same reason).
 * Maps: conv 0 (+ its pool) fp16 and the rest int8 (an f16 -> i8 boundary); int8 up to layer 7
 * and fp16 from 8 (i8 -> f16); alternating pairs, with a pool in another precision than its conv
 * (unfused pool, both boundaries). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"
#include "tests/support/gpu_trace.h"

#define SIDE 160
#define N_LAYERS 12

static const char *const calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                    "data/shapes-calib/02.png", "data/shapes-calib/03.png", NULL};

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static void make_map(int which, gr_precision *map)
{
    for (int i = 0; i < N_LAYERS; i++) {
        switch (which) {
        case 0: map[i] = i < 2 ? GR_PREC_FP16 : GR_PREC_INT8; break;
        case 1: map[i] = i < 8 ? GR_PREC_INT8 : GR_PREC_FP16; break;
        default: map[i] = i % 4 < 2 ? GR_PREC_FP16 : GR_PREC_INT8; break;
        }
    }
    if (which == 2) {
        map[1] = GR_PREC_INT8; /* pool after an fp16 conv in int8: converted, not fused */
        map[3] = GR_PREC_FP16; /* pool after an int8 conv in fp16: likewise */
    }
}

static gr_engine *build_mapped(const gr_model *m, gr_device dev, const gr_precision *map)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.calib_images = calib;
    eo.layer_precision = map;
    eo.n_layer_precision = N_LAYERS;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build: %s", gr_last_error());
    return e;
}

static uint8_t *load_u8(const char *path)
{
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
    uint8_t *u8 = malloc(3 * SIDE * SIDE);
    ck_assert(u8);
    ck_assert(gr_image_letterbox_u8(im, SIDE, SIDE, u8) == GR_OK);
    gr_image_destroy(im);
    return u8;
}

typedef struct trace {
    int seen_f16; /* an fp16 node ran before (schedule order) */
    double worst;
    int worst_node, checked_i8;
} trace;

static void gpu_hook(const gr_plan *plan, int node, const float *values, const float *want,
                     size_t n, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &plan->nodes[node];
    ck_assert_msg(want, "node %d has no CPU value", node);
    gr_test_diff s = gr_test_compare(values, want, n);
    const gr_plan_tensor *pt = &plan->tensors[nd->output];
    int in_f16 = gr_plan_conv_in_dtype(plan, nd) == GR_DTYPE_F16 || pt->dtype == GR_DTYPE_F16;
    printf("  node %2d %-10s layer %2d %s: NRMSE %.3g, max |err| %.3g, %zu of %zu differ\n", node,
           gr_plan_kind_name(nd->kind), nd->layer, pt->dtype == GR_DTYPE_I8 ? "i8" :
           pt->dtype == GR_DTYPE_F16 ? "f16" : "f32", s.nrmse, s.max_abs, s.differing, n);
    if (!t->seen_f16 && !in_f16 && pt->dtype == GR_DTYPE_I8) {
        ck_assert_msg(s.max_abs <= 2.0001 * (double)pt->scale,
                      "node %d (int8, before any fp16): max |err| %g > two steps of %g", node,
                      s.max_abs, (double)pt->scale);
        ck_assert_msg((double)s.differing <= 0.005 * (double)n,
                      "node %d (int8, before any fp16): %zu of %zu values differ", node,
                      s.differing, n);
        t->checked_i8++;
    }
    t->seen_f16 |= in_f16;
    if (s.nrmse > t->worst) {
        t->worst = s.nrmse;
        t->worst_node = node;
    }
}

START_TEST(mixed_plan_matches_cpu_emulation_node_by_node)
{
    gr_model *m = load_shapes();
    gr_precision map[N_LAYERS];
    make_map(_i, map);
    gr_engine *e = build_mapped(m, GR_DEVICE_GPU, map);
    const gr_plan *plan = gr_engine_debug_plan(e);
    ck_assert(plan);
    int f16 = 0, i8 = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        f16 += plan->nodes[i].prec == GR_PREC_FP16 && plan->nodes[i].kind == GR_OP_CONV;
        i8 += plan->nodes[i].prec == GR_PREC_INT8 && plan->nodes[i].kind == GR_OP_CONV;
    }
    ck_assert_msg(f16 > 0 && i8 > 0, "map %d: the plan is not mixed (%d fp16, %d int8 convs)", _i,
                  f16, i8);
    uint8_t *u8 = load_u8("data/shapes-val/000.png");
    trace t = {0, 0.0, -1, 0};
    printf("map %d per node, GPU vs CPU emulation:\n", _i);
    ck_assert_msg(gr_test_trace_nodes(e, u8, gpu_hook, &t) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(t.worst <= 1e-2, "map %d: node %d NRMSE %g > 1e-2", _i, t.worst_node, t.worst);
    if (_i == 1)
        ck_assert_msg(t.checked_i8 > 0, "map 1 starts in int8: its first nodes were not checked");

    /* The graph run's output against the CPU engine with the same map. */
    gr_engine *cpu = build_mapped(m, GR_DEVICE_CPU, map);
    ck_assert_msg(gr_engine_run_u8(e, u8) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run_u8(cpu, u8) == GR_OK, "%s", gr_last_error());
    const float *gy = NULL, *cy = NULL;
    ck_assert(gr_engine_output(e, 0, &gy) == GR_OK && gr_engine_output(cpu, 0, &cy) == GR_OK);
    gr_tensor_desc d;
    gr_engine_output_desc(e, 0, &d);
    gr_test_diff s = gr_test_compare(gy, cy, (size_t)d.n * d.c * d.h * d.w);
    printf("map %d output: GPU vs CPU engine NRMSE %.3g\n", _i, s.nrmse);
    ck_assert_msg(s.nrmse <= 1e-2, "map %d: output NRMSE %g", _i, s.nrmse);
    free(u8);
    gr_engine_destroy(cpu);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

static double median_latency_us(gr_engine *e, const uint8_t *u8)
{
    enum { RUNS = 201 };
    static double t[RUNS];
    for (int r = 0; r < 20; r++)
        ck_assert(gr_engine_run_u8(e, u8) == GR_OK);
    for (int r = 0; r < RUNS; r++) {
        ck_assert(gr_engine_run_u8(e, u8) == GR_OK);
        gr_timing tm;
        gr_engine_timing(e, &tm);
        t[r] = tm.end_to_end_us;
    }
    for (int i = 1; i < RUNS; i++) /* insertion sort: small */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[RUNS / 2];
}

/* GR_PREC_AUTO on the GPU: the map's error (measured by the CPU engine with that map against
 * fp32) is within the budget, the notice has the map and the measured per-layer latencies. The
 * latencies of all-int8, auto and all-fp16 are printed (the issue asks auto to lie between; at
 * this model's size launch overheads dominate, so it is reported, not asserted). */
START_TEST(auto_map_on_the_gpu_meets_its_budget)
{
    gr_model *m = load_shapes();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = GR_PREC_AUTO;
    eo.max_nrmse = 0.003f; /* below all-int8's ~0.006 on these images: forces some fp16 */
    eo.calib_images = calib;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    const char *notice = gr_engine_notice(e);
    printf("auto notice:\n%s\n", notice);
    ck_assert_msg(strstr(notice, "precision map:") && strstr(notice, "measured per layer"), "%s",
                  notice);
    int n = 0;
    const gr_precision *map = gr_engine_layer_precision(e, &n);
    ck_assert_int_eq(n, N_LAYERS);
    gr_precision copy[N_LAYERS];
    memcpy(copy, map, sizeof copy);

    /* Its error, independently: CPU engine of the map vs the CPU fp32 engine on the 4 images. */
    gr_engine *mixed = build_mapped(m, GR_DEVICE_CPU, copy);
    gr_engine_options fo;
    gr_engine_options_default(&fo);
    fo.device = GR_DEVICE_CPU;
    gr_engine *fp32 = NULL;
    ck_assert(gr_engine_build(m, &fo, &fp32) == GR_OK);
    double worst = 0.0;
    for (int i = 0; calib[i]; i++) {
        uint8_t *u8 = load_u8(calib[i]);
        ck_assert(gr_engine_run_u8(mixed, u8) == GR_OK && gr_engine_run_u8(fp32, u8) == GR_OK);
        const float *x, *y;
        gr_engine_output(mixed, 0, &x);
        gr_engine_output(fp32, 0, &y);
        gr_tensor_desc d;
        gr_engine_output_desc(fp32, 0, &d);
        worst = fmax(worst, gr_test_compare(x, y, (size_t)d.c * d.h * d.w).nrmse);
        free(u8);
    }
    printf("auto map error %.4g (budget %.4g)\n", worst, (double)eo.max_nrmse);
    ck_assert_msg(worst <= (double)eo.max_nrmse + 1e-5, "error %g > budget %g", worst,
                  (double)eo.max_nrmse);

    uint8_t *u8 = load_u8("data/shapes-val/000.png");
    double lat[3];
    static const gr_precision precs[] = {GR_PREC_INT8, GR_PREC_AUTO, GR_PREC_FP16};
    for (int k = 0; k < 3; k++) {
        gr_engine *x = e;
        if (precs[k] != GR_PREC_AUTO) {
            eo.precision = precs[k];
            x = NULL;
            ck_assert(gr_engine_build(m, &eo, &x) == GR_OK);
        }
        lat[k] = median_latency_us(x, u8);
        if (x != e)
            gr_engine_destroy(x);
    }
    printf("end-to-end p50, batch 1: all-int8 %.1f us, auto %.1f us, all-fp16 %.1f us\n", lat[0],
           lat[1], lat[2]);
    free(u8);
    gr_engine_destroy(mixed);
    gr_engine_destroy(fp32);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_mixed"))
        return 77;
    Suite *s = suite_create("gpu_mixed");
    TCase *tc = tcase_create("mixed");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, mixed_plan_matches_cpu_emulation_node_by_node, 0, 3);
    tcase_add_test(tc, auto_map_on_the_gpu_meets_its_budget);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
