/* GPU pools (runtime.h, "pools: one engine per device") over every visible GPU: with one GPU a
 * pool of one, with two or more the real thing. YOLOv2-tiny at batch 4 with 2 runs in flight per
 * engine, int8 and fp16, with CUDA graphs and eager: RUNS batches of generated non-zero images go
 * round robin over the pool's engines and slots from one thread (batch r on engine r % D, as
 * `graphrun --device gpu:all` does), each waited for in submission order, and every output
 * equals, bit for bit, the output of a plain single-GPU engine (gr_engine_build on GPU 0) on the
 * same batch. Exact because every
 * device runs the same kernels with the same tactics (the pool's other engines are loaded from
 * the first's saved bytes; the plain engine and the pool share one calibration cache and one
 * timing cache) on GPUs of one model, and int8/fp16 kernels use no atomics across blocks: a
 * difference means a device computes something else (wrong weights, tactics or ranges on that
 * GPU) or a run's outputs were read from the wrong slot or engine. A failure names the device,
 * the precision, the run, the output and the first differing float. Also: the engines past the
 * first were loaded (no notice of a separate build on identical GPUs), each sits on its own
 * ordinal, an ordinal past the visible count is refused, and destroying a pool with runs in
 * flight on every device is clean. A device that fails mid-run in the folder pipeline (two
 * engines on GPU 0 wrapped in a pool, the test hook GR_TEST_FAIL_ENGINE=1:2): only the batches
 * bound to engine 1 then are lost, each naming it; every other file's detections are the healthy
 * run's, bit for bit, in input order (runtime.h, "A device that fails"; tests/test_failover.c
 * checks the same on CPU engines). Exits 77 (skipped) with one line when no CUDA device is
 * visible. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "tests/support/files_seen.h"
#include "tests/support/gpu_test.h"

enum { BATCH = 4, INFLIGHT = 2, RUNS = 12, MAX_HEADS = 4 };

static char calib_cache[256], timing_cache[256];
static const gr_precision precisions[] = {GR_PREC_INT8, GR_PREC_FP16};

static gr_model *load_model(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "yolo"; /* YOLOv2-tiny VOC */
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_engine_options options(gr_precision prec, int inflight, int graph)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = BATCH;
    eo.inflight = inflight;
    eo.use_cuda_graph = graph;
    eo.calib_cache = calib_cache;
    eo.timing_cache = timing_cache;
    return eo;
}

/* Batch `run`: a different pattern per run and per image, no image all zero. */
static void fill_input(uint8_t *buffer, size_t bytes, int run)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)(1 + ((i * 7919u + (size_t)run * 104729u) >> 3) % 254);
}

static size_t output_floats(const gr_engine *e, int index)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, index, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

/* The plain single-GPU engine's outputs of every run (one synchronous run each). */
static void reference_outputs(gr_engine *e, float *want[RUNS][MAX_HEADS])
{
    void *in;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(e, 1, &in, &bytes), GR_OK);
    ck_assert_int_le(gr_engine_output_count(e), MAX_HEADS);
    for (int r = 0; r < RUNS; r++) {
        fill_input(in, bytes, r);
        ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
        for (int h = 0; h < gr_engine_output_count(e); h++) {
            const float *out;
            ck_assert_int_eq(gr_engine_output(e, h, &out), GR_OK);
            size_t n = output_floats(e, h);
            want[r][h] = malloc(n * sizeof(float));
            ck_assert_ptr_nonnull(want[r][h]);
            memcpy(want[r][h], out, n * sizeof(float));
        }
    }
}

/* Output `h` of run `r`, read on engine k of the pool (GPU `gpu`), against the reference. */
static void expect_equal(const gr_engine *e, int h, const float *want, int gpu, gr_precision prec,
                         int graph, int r)
{
    const float *got;
    ck_assert_int_eq(gr_engine_output(e, h, &got), GR_OK);
    size_t n = output_floats(e, h), differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0)
            first = i;
    ck_assert_msg(differ == 0, "gpu %d, %s%s, run %d, output %d: %zu of %zu floats differ from "
                  "the single-GPU engine's, the first at %zu (image %zu): %.9g vs %.9g", gpu,
                  gr_precision_name(prec), graph ? "" : " eager", r, h, differ, n, first,
                  first / (n / BATCH),
                  (double)got[first], (double)want[first]);
}

START_TEST(every_device_equals_single_gpu)
{
    gr_precision prec = precisions[_i % 2];
    int graph = _i < 2; /* eager: every launch goes to the current device, set per submit */
    gr_model *m = load_model();
    gr_engine_options eo = options(prec, 1, graph);
    gr_engine *plain = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &plain) == GR_OK, "single-GPU %s: %s",
                  gr_precision_name(prec), gr_last_error());
    float *want[RUNS][MAX_HEADS] = {{NULL}};
    reference_outputs(plain, want);
    int heads = gr_engine_output_count(plain);
    gr_engine_destroy(plain);

    eo = options(prec, INFLIGHT, graph);
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(m, &eo, NULL, 0, &pool) == GR_OK, "pool %s: %s",
                  gr_precision_name(prec), gr_last_error());
    int devices = gr_pool_devices(pool), lanes = devices * INFLIGHT;
    ck_assert_int_eq(devices, gr_cuda_device_count() < GR_MAX_DEVICES ? gr_cuda_device_count()
                                                                       : GR_MAX_DEVICES);
    fprintf(stderr, "gpu_pool: %s%s over %d device%s\n", gr_precision_name(prec),
            graph ? "" : " eager", devices,
            devices == 1 ? " (a pool of one: the multi-GPU case needs 2)" : "s");
    for (int r = 0; r < RUNS + lanes; r++) {
        if (r >= lanes) { /* run r - lanes holds the slot run r needs */
            int done = r - lanes, k = done % devices;
            gr_engine *e = gr_pool_engine(pool, k);
            ck_assert_msg(gr_engine_wait(e, (done / devices) % INFLIGHT) == GR_OK, "gpu %d: %s",
                          gr_pool_device(pool, k), gr_last_error());
            for (int h = 0; h < heads; h++)
                expect_equal(e, h, want[done][h], gr_pool_device(pool, k), prec, graph, done);
        }
        if (r >= RUNS)
            continue;
        gr_engine *e = gr_pool_engine(pool, r % devices);
        void *in;
        size_t bytes;
        ck_assert_int_eq(gr_engine_slot_input(e, (r / devices) % INFLIGHT, 1, &in, &bytes), GR_OK);
        fill_input(in, bytes, r);
        ck_assert_msg(gr_engine_submit(e, (r / devices) % INFLIGHT) == GR_OK, "gpu %d: %s",
                      gr_pool_device(pool, r % devices), gr_last_error());
    }
    gr_pool_destroy(pool);
    for (int r = 0; r < RUNS; r++)
        for (int h = 0; h < heads; h++)
            free(want[r][h]);
    gr_model_destroy(m);
}
END_TEST

/* The engines past the first are loaded from it: the same tactics, no separate build. */
START_TEST(other_devices_load_the_first_engine)
{
    gr_model *m = load_model();
    gr_engine_options eo = options(GR_PREC_INT8, 1, 1);
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(m, &eo, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
    gr_engine *first = gr_pool_engine(pool, 0);
    for (int k = 0; k < gr_pool_devices(pool); k++) {
        gr_engine *e = gr_pool_engine(pool, k);
        ck_assert_int_eq(gr_pool_device(pool, k), k);
        ck_assert_int_eq(gr_engine_device(e), GR_DEVICE_GPU);
        ck_assert_int_eq(gr_engine_tactic_count(e), gr_engine_tactic_count(first));
        for (int t = 0; t < gr_engine_tactic_count(e); t++) {
            gr_tactic_info a, b;
            ck_assert_int_eq(gr_engine_tactic(first, t, &a), GR_OK);
            ck_assert_int_eq(gr_engine_tactic(e, t, &b), GR_OK);
            ck_assert_msg(strcmp(a.name, b.name) == 0, "gpu %d, layer %d: tactic %s, gpu 0: %s",
                          k, a.layer, b.name, a.name);
        }
        if (strcmp(gr_engine_device_name(e), gr_engine_device_name(first)) == 0)
            ck_assert_msg(gr_pool_notice(pool)[0] == '\0', "identical GPUs, yet: %s",
                          gr_pool_notice(pool));
    }
    gr_pool_destroy(pool);
    gr_model_destroy(m);
}
END_TEST

START_TEST(ordinal_past_visible_is_refused)
{
    gr_model *m = load_model();
    gr_engine_options eo = options(GR_PREC_FP16, 1, 1);
    int visible = gr_cuda_device_count();
    const int list[] = {0, visible};
    gr_pool *pool = NULL;
    ck_assert_int_eq(gr_pool_build(m, &eo, list, 2, &pool), GR_ERR_NO_DEVICE);
    ck_assert_ptr_null(pool);
    char words[64];
    snprintf(words, sizeof words, "gpu %d: only %d CUDA device", visible, visible);
    ck_assert_msg(strstr(gr_last_error(), words) != NULL, "'%s' not in: %s", words,
                  gr_last_error());
    gr_model_destroy(m);
}
END_TEST

START_TEST(destroy_with_runs_in_flight_on_every_device)
{
    gr_model *m = load_model();
    gr_engine_options eo = options(GR_PREC_INT8, INFLIGHT, 1);
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(m, &eo, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
    for (int k = 0; k < gr_pool_devices(pool); k++)
        for (int slot = 0; slot < INFLIGHT; slot++) {
            gr_engine *e = gr_pool_engine(pool, k);
            void *in;
            size_t bytes;
            ck_assert_int_eq(gr_engine_slot_input(e, slot, 1, &in, &bytes), GR_OK);
            fill_input(in, bytes, slot);
            ck_assert_int_eq(gr_engine_submit(e, slot), GR_OK);
        }
    gr_pool_destroy(pool); /* nothing waited */
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    gr_model_destroy(m);
}
END_TEST

/* ---- a device that fails mid-run (the folder pipeline) ------------------------------------- */

enum { N_FILES = 40 };

/* The files through the pool: every file once, in input order. */
static gr_seen *detect_files(gr_pool *pool, const char *const *paths)
{
    gr_seen *s = gr_seen_run(pool, paths, N_FILES, NULL);
    ck_assert_msg(s->returned == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(s->calls, N_FILES);
    for (int k = 0; k < N_FILES; k++)
        ck_assert_int_eq(s->index[k], k);
    return s;
}

START_TEST(a_failed_device_loses_only_its_batches)
{
    const char *photos[] = {"data/dog.jpg", "data/eagle.jpg", "data/giraffe.jpg",
                            "data/horses.jpg", "data/person.jpg"};
    const char *paths[N_FILES];
    for (int k = 0; k < N_FILES; k++)
        paths[k] = photos[k % 5];
    gr_model *m = load_model();
    gr_engine_options eo = options(GR_PREC_FP16, INFLIGHT, 1);
    gr_engine *engines[2] = {NULL, NULL};
    ck_assert_msg(gr_engine_build(m, &eo, &engines[0]) == GR_OK, "%s", gr_last_error());
    void *bytes = NULL; /* the second engine the first's saved bytes: the same kernels */
    size_t len = 0;
    ck_assert_int_eq(gr_engine_save_to_memory(engines[0], &bytes, &len), GR_OK);
    ck_assert_msg(gr_engine_load_from_memory(bytes, len, &eo, &engines[1]) == GR_OK, "%s",
                  gr_last_error());
    free(bytes);
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_wrap(engines, 2, &pool) == GR_OK, "%s", gr_last_error());
    unsetenv("GR_TEST_FAIL_ENGINE");
    gr_seen *want = detect_files(pool, paths);
    ck_assert_int_eq(want->st.devices_failed, 0);
    setenv("GR_TEST_FAIL_ENGINE", "1:2", 1);
    gr_seen *got = detect_files(pool, paths);
    unsetenv("GR_TEST_FAIL_ENGINE");
    /* Batches of 4, 2 slots per engine: engine 1's second run is batch 3 (files 12..15), and
     * batch 5 (20..23) is submitted on it by then. */
    int lost = 0;
    for (int k = 0; k < N_FILES; k++) {
        if (k / BATCH == 3 || k / BATCH == 5) {
            ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_DEVICE);
            ck_assert_int_eq(got->status[k], GR_ERR_CUDA);
            ck_assert_str_eq(got->error[k], "device 1 (gpu 0) failed: injected failure (test "
                                            "hook GR_TEST_FAIL_ENGINE=1:2)");
            lost++;
            continue;
        }
        ck_assert_int_eq(want->failure[k], GR_FILE_OK);
        gr_seen_assert_same(want, got, k);
    }
    ck_assert_int_eq(got->st.files_lost, lost);
    ck_assert_int_eq(got->st.devices_failed, 1);
    ck_assert_int_eq(got->st.failed_device, 1);
    free(want);
    free(got);
    gr_pool_destroy(pool);
    gr_engine_destroy(engines[1]);
    gr_engine_destroy(engines[0]);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_pool"))
        return 77;
    snprintf(calib_cache, sizeof calib_cache, "/tmp/graphrun_gpu_pool_%d.calib", (int)getpid());
    snprintf(timing_cache, sizeof timing_cache, "/tmp/graphrun_gpu_pool_%d.tactics",
             (int)getpid());
    Suite *s = suite_create("gpu_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 600);
    /* int8, fp16 with CUDA graphs, then eager */
    tcase_add_loop_test(tc, every_device_equals_single_gpu, 0, 4);
    tcase_add_test(tc, other_devices_load_the_first_engine);
    tcase_add_test(tc, ordinal_past_visible_is_refused);
    tcase_add_test(tc, destroy_with_runs_in_flight_on_every_device);
    tcase_add_test(tc, a_failed_device_loses_only_its_batches);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    unlink(calib_cache);
    unlink(timing_cache);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
