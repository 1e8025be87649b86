/* GPU engine, runs in flight (runtime.h, "Runs in flight"): an engine with inflight = 3 runs
 * different inputs on its three slots at once, round robin, and every output equals, bit for bit,
 * a serial gr_engine_run of the same input on the same engine (slot 0), for fp32, fp16 and int8,
 * with and without CUDA graphs. Equality is exact because each instance runs the same kernels
 * with the same arguments on its own memory: any difference means instances share something
 * they write (activations, split-K counters, cuBLAS workspaces). Also: each slot's captured graph
 * holds exactly one H2D and one D2H copy and no allocation, and gr_engine_memory counts the
 * weights once. Exits 77 (skipped) with one line when no CUDA device is visible. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"

enum { SLOTS = 3, RUNS = 8, MAX_HEADS = 8 };

static char calib_cache[256];

static gr_model *load_model(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "yolov3-tiny"; /* two heads, a route and an upsample */
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_engine *build(const gr_model *m, gr_precision prec, int batch, int inflight, int graph)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = batch;
    eo.inflight = inflight;
    eo.use_cuda_graph = graph;
    eo.calib_cache = calib_cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build %s inflight %d: %s",
                  gr_precision_name(prec), inflight, gr_last_error());
    return e;
}

static void fill_input(uint8_t *buffer, size_t bytes, int run)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)((i * 7919u + (size_t)run * 104729u) >> 3);
}

static size_t output_bytes(const gr_engine *e, int index)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, index, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w * sizeof(float);
}

/* Serial outputs of every run: gr_engine_run_u8 on slot 0, one at a time. */
static void serial_outputs(gr_engine *e, size_t in_bytes, float *expected[RUNS][MAX_HEADS])
{
    uint8_t *input = malloc(in_bytes);
    ck_assert_ptr_nonnull(input);
    for (int r = 0; r < RUNS; r++) {
        fill_input(input, in_bytes, r);
        ck_assert_msg(gr_engine_run_u8(e, input) == GR_OK, "%s", gr_last_error());
        for (int h = 0; h < gr_engine_output_count(e); h++) {
            const float *out;
            ck_assert_int_eq(gr_engine_output(e, h, &out), GR_OK);
            expected[r][h] = malloc(output_bytes(e, h));
            ck_assert_ptr_nonnull(expected[r][h]);
            memcpy(expected[r][h], out, output_bytes(e, h));
        }
    }
    free(input);
    /* Different inputs give different outputs, so a slot reading another's results fails. */
    ck_assert(memcmp(expected[0][0], expected[1][0], output_bytes(e, 0)) != 0);
}

/* All slots in flight at once, round robin; each wait's outputs against the serial run. */
static void check_inflight(gr_engine *e, float *expected[RUNS][MAX_HEADS], const char *what)
{
    for (int r = 0; r < RUNS + SLOTS; r++) {
        int slot = r % SLOTS, done = r - SLOTS;
        if (done >= 0) {
            ck_assert_msg(gr_engine_wait(e, slot) == GR_OK, "%s", gr_last_error());
            for (int h = 0; h < gr_engine_output_count(e); h++) {
                const float *out;
                ck_assert_int_eq(gr_engine_output(e, h, &out), GR_OK);
                ck_assert_msg(memcmp(out, expected[done][h], output_bytes(e, h)) == 0,
                              "%s: run %d on slot %d, output %d differs from the serial run", what,
                              done, slot, h);
            }
        }
        if (r < RUNS) {
            void *buffer;
            size_t bytes;
            ck_assert_int_eq(gr_engine_slot_input(e, slot, 1, &buffer, &bytes), GR_OK);
            fill_input(buffer, bytes, r);
            ck_assert_msg(gr_engine_submit(e, slot) == GR_OK, "%s", gr_last_error());
        }
    }
}

START_TEST(test_inflight_equals_serial)
{
    gr_model *m = load_model();
    const gr_precision prec = (gr_precision)(_i / 2);
    const int graph = 1 - _i % 2;
    for (int batch = 1; batch <= 2; batch++) {
        gr_engine *e = build(m, prec, batch, SLOTS, graph);
        void *buffer;
        size_t in_bytes;
        ck_assert_int_eq(gr_engine_slot_input(e, 0, 1, &buffer, &in_bytes), GR_OK);
        float *expected[RUNS][MAX_HEADS] = {{0}};
        ck_assert_int_le(gr_engine_output_count(e), MAX_HEADS);
        serial_outputs(e, in_bytes, expected);
        char what[64];
        snprintf(what, sizeof what, "%s batch %d %s", gr_precision_name(prec), batch,
                 graph ? "graphs" : "eager");
        check_inflight(e, expected, what);
        /* And the synchronous API still works after runs in flight. */
        uint8_t *input = malloc(in_bytes);
        fill_input(input, in_bytes, 3);
        ck_assert_int_eq(gr_engine_run_u8(e, input), GR_OK);
        const float *out;
        ck_assert_int_eq(gr_engine_output(e, 0, &out), GR_OK);
        ck_assert(memcmp(out, expected[3][0], output_bytes(e, 0)) == 0);
        free(input);
        printf("%s: %d runs on %d slots equal the serial runs\n", what, RUNS, SLOTS);
        for (int r = 0; r < RUNS; r++)
            for (int h = 0; h < MAX_HEADS; h++)
                free(expected[r][h]);
        gr_engine_destroy(e);
    }
    gr_model_destroy(m);
}
END_TEST

START_TEST(test_each_slot_graph_has_two_copies)
{
    gr_model *m = load_model();
    gr_engine *e = build(m, (gr_precision)_i, 1, SLOTS, 1);
    for (int s = 0; s < SLOTS; s++) {
        gr_graph_info gi;
        ck_assert_msg(gr_engine_slot_graph_info(e, s, &gi) == GR_OK, "%s", gr_last_error());
        ck_assert_int_eq(gi.memcpy_h2d, 1);
        ck_assert_int_eq(gi.memcpy_d2h, 1);
        ck_assert_int_eq(gi.memcpy_other, 0);
        ck_assert_int_eq(gi.mem_alloc, 0);
        ck_assert_int_eq(gi.mem_free, 0);
    }
    gr_graph_info gi;
    ck_assert_int_eq(gr_engine_slot_graph_info(e, SLOTS, &gi), GR_ERR_INVALID_ARGUMENT);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

START_TEST(test_memory_counts_weights_once)
{
    gr_model *m = load_model();
    gr_precision prec = (gr_precision)_i;
    gr_engine *one = build(m, prec, 1, 1, 1), *three = build(m, prec, 1, SLOTS, 1);
    gr_engine_memory_info a, b;
    ck_assert_int_eq(gr_engine_memory(one, &a), GR_OK);
    ck_assert_int_eq(gr_engine_memory(three, &b), GR_OK);
    ck_assert_uint_gt(a.weights_bytes, 0);
    ck_assert_uint_eq(a.weights_bytes, b.weights_bytes);
    ck_assert_uint_eq(a.arena_bytes, b.arena_bytes);
    ck_assert_uint_eq(a.io_bytes, b.io_bytes);
    size_t per_instance = b.arena_bytes + b.workspace_bytes + b.io_bytes;
    ck_assert_uint_eq(b.total_bytes - a.total_bytes,
                      (SLOTS - 1) * per_instance + (b.cublas_workspace_bytes - a.cublas_workspace_bytes));
    printf("%s: weights %zu, per instance arena %zu + workspace %zu + io %zu, cuBLAS %zu -> %zu, "
           "total %zu -> %zu bytes\n",
           gr_precision_name(prec), b.weights_bytes, b.arena_bytes, b.workspace_bytes, b.io_bytes,
           a.cublas_workspace_bytes, b.cublas_workspace_bytes, a.total_bytes, b.total_bytes);
    gr_engine_destroy(one);
    gr_engine_destroy(three);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_inflight"))
        return 77;
    snprintf(calib_cache, sizeof calib_cache, "/tmp/graphrun_gpu_inflight_%d.calib", (int)getpid());
    Suite *s = suite_create("gpu_inflight");
    TCase *tc = tcase_create("inflight");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_inflight_equals_serial, 0, 6); /* 3 precisions x graph/eager */
    tcase_add_loop_test(tc, test_each_slot_graph_has_two_copies, 0, 3);
    tcase_add_loop_test(tc, test_memory_counts_weights_once, 0, 3);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    unlink(calib_cache);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
