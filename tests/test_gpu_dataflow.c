/* GPU engine, the dataflow executor (docs/dataflow.md): one persistent kernel instead of a kernel
 * per node. Written before it ever ran on a GPU (the CPU side of the protocol is
 * tests/test_dataflow.c); to run on the H100 first:
 *   - int8 outputs bit-identical to the per-layer graph engine's (fp16: NRMSE <= 1e-3, the tactic
 *     search's bound), on YOLOv2-tiny, yolov3-tiny and the DAG-heavy tests/data/dataflow_dag.cfg,
 *     over 1,000 runs with 3 in flight (16 different inputs, each checked every time it comes);
 *   - each slot's graph is the input copy, one kernel and the output copy, nothing allocated;
 *   - a flag never published (gr_engine_debug_dataflow_skip_publish) turns into the run's error
 *     within the wait timeout, naming the task, instead of a hang;
 *   - executor auto measures both and says which it kept; a plan the kernel cannot run (fp32)
 *     stays on the per-layer graph and the notice says why.
 * Also under compute-sanitizer (memcheck, racecheck): docs/dataflow.md, "What has not run yet".
 * Exits 77 (skipped) with one line when no CUDA device is visible. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"

enum { SLOTS = 3, INPUTS = 16, RUNS = 1000, MAX_HEADS = 8 };

/* The int8 ranges both engines of a comparison share, one cache per model (a cache names the
 * model it was made for and refuses another). */
static char calib_cache[256];

static const char *const models[] = {"yolov2-tiny", "yolov3-tiny", "tests/data/dataflow_dag.cfg"};

static gr_model *load_model(int which)
{
    snprintf(calib_cache, sizeof calib_cache, "/tmp/graphrun_gpu_dataflow_%d_%d.calib",
             (int)getpid(), which);
    gr_model_options mo;
    gr_model_options_default(&mo);
    if (which == 2) {
        mo.builtin = NULL;
        mo.cfg_path = models[2];
    } else {
        mo.builtin = models[which];
    }
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_engine *build(const gr_model *m, gr_precision prec, int inflight, gr_executor executor)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.inflight = inflight;
    eo.executor = executor;
    eo.calib_cache = calib_cache; /* load_model's: both engines of a comparison share it */
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build %s %s: %s",
                  gr_precision_name(prec), gr_executor_name(executor), gr_last_error());
    return e;
}

static void fill_input(uint8_t *buffer, size_t bytes, int input)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)((i * 7919u + (size_t)input * 104729u) >> 3);
}

static size_t output_elems(const gr_engine *e, int index)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, index, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

static double nrmse(const float *got, const float *want, size_t n)
{
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - (double)want[i];
        err += d * d;
        ref += (double)want[i] * (double)want[i];
    }
    return ref > 0.0 ? sqrt(err / ref) : sqrt(err);
}

/* The per-layer graph engine's outputs for each input. */
static void reference_outputs(gr_engine *e, float *ref[INPUTS][MAX_HEADS])
{
    void *buffer;
    size_t bytes;
    for (int in = 0; in < INPUTS; in++) {
        ck_assert_int_eq(gr_engine_slot_input(e, 0, 1, &buffer, &bytes), GR_OK);
        fill_input(buffer, bytes, in);
        ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
        for (int h = 0; h < gr_engine_output_count(e); h++) {
            const float *out;
            ck_assert_int_eq(gr_engine_output(e, h, &out), GR_OK);
            ref[in][h] = malloc(output_elems(e, h) * sizeof(float));
            memcpy(ref[in][h], out, output_elems(e, h) * sizeof(float));
        }
    }
}

START_TEST(dataflow_equals_the_per_layer_graph)
{
    const int which = _i / 2;
    const gr_precision prec = _i % 2 ? GR_PREC_INT8 : GR_PREC_FP16;
    gr_model *m = load_model(which);
    gr_engine *graph = build(m, prec, 1, GR_EXECUTOR_GRAPH);
    gr_engine *df = build(m, prec, SLOTS, GR_EXECUTOR_DATAFLOW);
    ck_assert_msg(strstr(gr_engine_notice(df), "executor: dataflow") != NULL, "%s",
                  gr_engine_notice(df));
    float *ref[INPUTS][MAX_HEADS] = {{0}};
    ck_assert_int_le(gr_engine_output_count(graph), MAX_HEADS);
    reference_outputs(graph, ref);
    double worst = 0.0;
    for (int r = 0; r < RUNS + SLOTS; r++) {
        const int slot = r % SLOTS, done = r - SLOTS;
        if (done >= 0) {
            ck_assert_msg(gr_engine_wait(df, slot) == GR_OK, "run %d: %s", done, gr_last_error());
            for (int h = 0; h < gr_engine_output_count(df); h++) {
                const float *out;
                ck_assert_int_eq(gr_engine_output(df, h, &out), GR_OK);
                const float *want = ref[done % INPUTS][h];
                const size_t n = output_elems(df, h);
                if (prec == GR_PREC_INT8) {
                    ck_assert_msg(memcmp(out, want, n * sizeof(float)) == 0,
                                  "%s int8 run %d output %d differs from the per-layer graph",
                                  models[which], done, h);
                } else {
                    const double e = nrmse(out, want, n);
                    worst = e > worst ? e : worst;
                    ck_assert_msg(e <= 1e-3, "%s fp16 run %d output %d: NRMSE %g", models[which],
                                  done, h, e);
                }
            }
        }
        if (r < RUNS) {
            void *buffer;
            size_t bytes;
            ck_assert_int_eq(gr_engine_slot_input(df, slot, 1, &buffer, &bytes), GR_OK);
            fill_input(buffer, bytes, r % INPUTS);
            ck_assert_msg(gr_engine_submit(df, slot) == GR_OK, "%s", gr_last_error());
        }
    }
    printf("%s %s: %d dataflow runs, %d in flight, equal the per-layer graph (worst NRMSE %g)\n",
           models[which], gr_precision_name(prec), RUNS, SLOTS, worst);
    for (int in = 0; in < INPUTS; in++)
        for (int h = 0; h < MAX_HEADS; h++)
            free(ref[in][h]);
    gr_engine_destroy(df);
    gr_engine_destroy(graph);
    gr_model_destroy(m);
}
END_TEST

START_TEST(each_slot_graph_is_copy_kernel_copy)
{
    gr_model *m = load_model(0);
    gr_engine *e = build(m, GR_PREC_INT8, SLOTS, GR_EXECUTOR_DATAFLOW);
    for (int s = 0; s < SLOTS; s++) {
        gr_graph_info gi;
        ck_assert_msg(gr_engine_slot_graph_info(e, s, &gi) == GR_OK, "%s", gr_last_error());
        ck_assert_int_eq(gi.kernels, 1);
        ck_assert_int_eq(gi.memcpy_h2d, 1);
        ck_assert_int_eq(gi.memcpy_d2h, 1);
        ck_assert_int_eq(gi.memcpy_other + gi.memsets + gi.mem_alloc + gi.mem_free, 0);
    }
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(an_unpublished_flag_is_an_error_not_a_hang)
{
    gr_model *m = load_model(1);
    gr_engine *e = build(m, GR_PREC_INT8, 1, GR_EXECUTOR_DATAFLOW);
    int n_tasks = 0;
    ck_assert_int_eq(gr_engine_debug_dataflow_tasks(e, &n_tasks), GR_OK);
    ck_assert_int_gt(n_tasks, 3);
    ck_assert_int_eq(gr_engine_run(e), GR_OK);
    ck_assert_int_eq(gr_engine_debug_dataflow_skip_publish(e, n_tasks / 3), GR_OK);
    const double start = now_s();
    const gr_status st = gr_engine_run(e);
    const double took = now_s() - start;
    ck_assert_int_eq(st, GR_ERR_INTERNAL);
    ck_assert_msg(strstr(gr_last_error(), "waited more than") != NULL, "%s", gr_last_error());
    ck_assert_msg(took < 2.0, "the failed run took %.2f s", took);
    printf("injected: %s (after %.0f ms)\n", gr_last_error(), took * 1e3);
    ck_assert_int_ne(gr_engine_run(e), GR_OK); /* a failed engine stays failed */
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

START_TEST(auto_measures_and_fp32_falls_back)
{
    gr_model *m = load_model(0);
    gr_engine *e = build(m, GR_PREC_INT8, 1, GR_EXECUTOR_AUTO);
    ck_assert_msg(strstr(gr_engine_notice(e), "(measured: dataflow") != NULL, "%s",
                  gr_engine_notice(e));
    ck_assert_int_eq(gr_engine_run(e), GR_OK);
    printf("auto: %s\n", gr_engine_notice(e));
    gr_engine_destroy(e);
    e = build(m, GR_PREC_FP32, 1, GR_EXECUTOR_DATAFLOW);
    ck_assert_msg(strstr(gr_engine_notice(e), "executor: graph (uint8 input: the dataflow kernel "
                                              "cannot run this plan: unsupported: conv") != NULL,
                  "%s", gr_engine_notice(e));
    ck_assert_int_eq(gr_engine_run(e), GR_OK);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_dataflow"))
        return 77;
    Suite *s = suite_create("gpu_dataflow");
    TCase *tc = tcase_create("dataflow");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, dataflow_equals_the_per_layer_graph, 0, 6); /* 3 nets x fp16/int8 */
    tcase_add_test(tc, each_slot_graph_is_copy_kernel_copy);
    tcase_add_test(tc, an_unpublished_flag_is_an_error_not_a_hang);
    tcase_add_test(tc, auto_measures_and_fp32_falls_back);
    suite_add_tcase(s, tc);
    const int failed = gr_test_run_in_process(s);
    for (int which = 0; which < 3; which++) {
        snprintf(calib_cache, sizeof calib_cache, "/tmp/graphrun_gpu_dataflow_%d_%d.calib",
                 (int)getpid(), which);
        unlink(calib_cache);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
