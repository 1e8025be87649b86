/* Check suite for a device that fails mid-run in the folder pipeline (runtime/files.c,
 * gr_pool_detect_files; runtime.h "A device that fails"): a pool of CPU engines of the built-in
 * shapes model (gr_pool_wrap) over 50 files (data/shapes-val, the photos of data/, two missing),
 * one engine failing mid-run either with a sticky device error (a stand-in backend whose wait
 * and submit keep failing with GR_ERR_CUDA, as a GPU's after an illegal access) or through the
 * test hook GR_TEST_FAIL_ENGINE=K:N. Only the failed engine's runs in flight are lost (each file
 * GR_FILE_FAILED_DEVICE naming the device and why); a batch decoded into its buffers but not
 * submitted runs on another engine; every other file's result and JSON line is the run without
 * a failure's, in input order; a missing file keeps its own error; the stats count it. Every engine failing: every file still gets its line, no hang (the
 * tcase's timeout), a source ends with the failure. A per-batch failure is test_files.c's. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "runtime/engine_internal.h"
#include "runtime/files.h"
#include "tests/support/files_seen.h"

enum { N_FILES = 50, N_ENGINES = 3 };

static char names[N_FILES][64];
static const char *paths[N_FILES];

/* 45 of the shapes' validation images, the 5 photos; 9 and 20 missing. */
static void make_list(void)
{
    const char *photos[] = {"dog", "eagle", "giraffe", "horses", "person"};
    for (int i = 0; i < N_FILES; i++) {
        if (i == 9 || i == 20)
            snprintf(names[i], sizeof names[i], "data/shapes-val/missing-%d.png", i);
        else if (i < 45)
            snprintf(names[i], sizeof names[i], "data/shapes-val/%03d.png", i);
        else
            snprintf(names[i], sizeof names[i], "data/%s.jpg", photos[i - 45]);
        paths[i] = names[i];
    }
}

/* ---- engines: plain CPU ones, or with a stand-in that fails as a lost device --------------- */

static gr_model *model;
static gr_engine *engines[N_ENGINES];

/* A stand-in backend for some engines: from its fail_at-th wait on (that one included) every
 * wait and submit fails with GR_ERR_CUDA, as a GPU's calls do after a sticky error. */
static gr_backend_ops sticky_ops;
static const gr_backend_ops *cpu_ops;
static struct {
    const gr_engine *e;
    int fail_at, waits, failed;
} sticky[N_ENGINES];

static int sticky_of(const gr_engine *e)
{
    for (int k = 0; k < N_ENGINES; k++)
        if (sticky[k].e == e)
            return k;
    ck_abort_msg("not a stand-in engine");
    return -1;
}

static gr_status sticky_submit(gr_engine *e, int slot, int u8)
{
    if (sticky[sticky_of(e)].failed)
        return gr_fail(GR_ERR_CUDA, "stand-in: cudaGraphLaunch: an illegal memory access was "
                       "encountered");
    return cpu_ops->submit(e, slot, u8);
}

static gr_status sticky_wait(gr_engine *e, int slot, int u8)
{
    int k = sticky_of(e);
    gr_status st = cpu_ops->wait(e, slot, u8);
    if (++sticky[k].waits == sticky[k].fail_at || sticky[k].failed) {
        sticky[k].failed = 1;
        return gr_fail(GR_ERR_CUDA, "stand-in: cudaStreamSynchronize: an illegal memory access "
                       "was encountered");
    }
    return st;
}

static gr_engine *cpu_engine(int inflight)
{
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.batch = 2;
    opt.inflight = inflight;
    gr_engine *built = NULL;
    ck_assert_msg(gr_engine_build(model, &opt, &built) == GR_OK, "%s", gr_last_error());
    return built;
}

/* Engine k fails its fail_at-th run and every call after it. */
static void make_sticky(int k, int fail_at)
{
    cpu_ops = engines[k]->ops;
    sticky_ops = *cpu_ops;
    sticky_ops.submit = sticky_submit;
    sticky_ops.wait = sticky_wait;
    engines[k]->ops = &sticky_ops;
    sticky[k].e = engines[k];
    sticky[k].fail_at = fail_at;
    sticky[k].waits = sticky[k].failed = 0;
}

static void setup(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    for (int k = 0; k < N_ENGINES; k++)
        engines[k] = cpu_engine(3);
    memset(sticky, 0, sizeof sticky);
    make_list();
    unsetenv("GR_TEST_FAIL_ENGINE");
}

/* The engines again with `inflight` slots each. */
static void use_inflight(int inflight)
{
    for (int k = 0; k < N_ENGINES; k++) {
        gr_engine_destroy(engines[k]);
        engines[k] = cpu_engine(inflight);
    }
}

static void teardown(void)
{
    for (int k = 0; k < N_ENGINES; k++) {
        if (cpu_ops && engines[k]->ops == &sticky_ops)
            engines[k]->ops = cpu_ops;
        gr_engine_destroy(engines[k]);
    }
    gr_model_destroy(model);
    unsetenv("GR_TEST_FAIL_ENGINE");
}

/* ---- what a run gave ------------------------------------------------------------------------ */

typedef gr_seen seen;

/* The files through a pool of the first n engines, with their JSON lines: every file once, in
 * input order. */
static seen *run(int n)
{
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_wrap(engines, n, &pool) == GR_OK, "%s", gr_last_error());
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.jsonl = 1;
    opt.threads = 2;
    seen *s = gr_seen_run(pool, paths, N_FILES, &opt);
    gr_pool_destroy(pool);
    ck_assert_int_eq(s->calls, N_FILES);
    for (int k = 0; k < N_FILES; k++) {
        ck_assert_int_eq(s->index[k], k);
        ck_assert_str_ne(s->line[k], "");
    }
    return s;
}

/* The run without a failure: no file lost, the missing ones their own error. */
static seen *healthy(int n)
{
    seen *want = run(n);
    ck_assert_int_eq(want->returned, GR_OK);
    ck_assert_int_eq(want->st.devices_failed, 0);
    ck_assert_int_eq(want->st.failed_device, -1);
    ck_assert_int_eq(want->st.files_lost, 0);
    ck_assert_str_eq(want->st.failed_device_error, "");
    for (int k = 0; k < N_FILES; k++)
        ck_assert_int_eq(want->failure[k], k == 9 || k == 20 ? GR_FILE_FAILED_READ : GR_FILE_OK);
    return want;
}

/* Files lost are exactly `lost` (ascending, -1 ended), each naming why; the rest as `want`. */
static void assert_lost_only(const seen *want, const seen *got, const int *lost, const char *why)
{
    int n_lost = 0;
    for (int k = 0; k < N_FILES; k++) {
        if (lost[n_lost] != k) {
            gr_seen_assert_same(want, got, k);
            continue;
        }
        n_lost++;
        ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_DEVICE);
        ck_assert_int_eq(got->status[k], GR_ERR_CUDA);
        ck_assert_str_eq(got->error[k], why);
        ck_assert_int_eq(got->n_dets[k], 0);
        char line[1024];
        snprintf(line, sizeof line, "{\"input\": \"%s\", \"error\": \"%s\"}\n", paths[k], why);
        ck_assert_str_eq(got->line[k], line);
    }
    ck_assert_int_eq(got->returned, GR_OK);
    ck_assert_int_eq(got->st.files_lost, n_lost);
    ck_assert_int_eq(got->st.devices_failed, 1);
    ck_assert_int_eq(got->st.failed_device, 1);
    ck_assert_str_eq(got->st.failed_device_error, why);
}

/* 3 engines, batch 2, 3 slots each: batch b runs on engine b % 3. Engine 1's second run (batch 4,
 * files 8 and 9) fails while batch 7 (files 14, 15) is submitted on it: those are lost (9 is
 * missing: its own error), nothing else. Batch 10 (files 20, 21), decoded into engine 1's third
 * buffer by then, is moved to another engine's and runs there. Before, every later batch of
 * engine 1's buffers failed too (10, 13, ...: a third of the rest). */
static const int lost_of_engine_1[] = {8, 14, 15, -1};

START_TEST(a_sticky_device_error_loses_only_its_batches_in_flight)
{
    seen *want = healthy(N_ENGINES);
    make_sticky(1, 2);
    seen *got = run(N_ENGINES);
    assert_lost_only(want, got, lost_of_engine_1,
                     "device 1 (the CPU) failed: stand-in: cudaStreamSynchronize: an illegal "
                     "memory access was encountered");
    ck_assert_int_eq(got->st.batches_moved, 1);
    free(want);
    free(got);
}
END_TEST

/* The hook failing engine 1's second run in a pool of n engines: `lost` lost, one batch moved. */
static void hook_loses(int n, const int *lost)
{
    unsetenv("GR_TEST_FAIL_ENGINE");
    seen *want = healthy(n);
    setenv("GR_TEST_FAIL_ENGINE", "1:2", 1);
    seen *got = run(n);
    assert_lost_only(want, got, lost,
                     "device 1 (the CPU) failed: injected failure (test hook "
                     "GR_TEST_FAIL_ENGINE=1:2)");
    ck_assert_int_eq(got->st.batches_moved, 1);
    free(got);
    free(want);
}

START_TEST(the_test_hook_fails_one_engine_as_a_lost_device)
{
    hook_loses(N_ENGINES, lost_of_engine_1);
    /* Two engines: engine 1's second run is batch 3 (files 6, 7), batch 5 (10, 11) in flight,
     * batch 7 (14, 15) moved. */
    static const int lost[] = {6, 7, 10, 11, -1};
    hook_loses(2, lost);
    seen *want;
    /* A hook that names no engine of the pool changes nothing; a malformed one is refused. */
    setenv("GR_TEST_FAIL_ENGINE", "7:1", 1);
    want = healthy(N_ENGINES);
    free(want);
    setenv("GR_TEST_FAIL_ENGINE", "1", 1);
    gr_pool *pool = NULL;
    ck_assert_int_eq(gr_pool_wrap(engines, 1, &pool), GR_OK);
    seen *none = gr_seen_run(pool, paths, N_FILES, NULL);
    ck_assert_int_eq(none->returned, GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "GR_TEST_FAIL_ENGINE=1: K:N expected"));
    ck_assert_int_eq(none->calls, 0);
    free(none);
    gr_pool_destroy(pool);
}
END_TEST

/* Every engine failing: every file still gets its line (no hang: the tcase's timeout). 2
 * engines of 2 slots: engine 1 fails its second run (batch 3) with batch 5 on it, engine 0 its third (batch
 * 4) with batch 6 on it; batches 7 on (files 14..49) have no device left and are never read (the
 * missing file 20 too). */
START_TEST(every_engine_failing_reports_every_file)
{
    use_inflight(2);
    seen *want = healthy(2);
    make_sticky(0, 3);
    make_sticky(1, 2);
    seen *got = run(2);
    ck_assert_int_eq(got->returned, GR_OK);
    const char *dead0 = "device 0 (the CPU) failed: stand-in: cudaStreamSynchronize: an illegal "
                        "memory access was encountered";
    const char *dead1 = "device 1 (the CPU) failed: stand-in: cudaStreamSynchronize: an illegal "
                        "memory access was encountered";
    char rest[600];
    snprintf(rest, sizeof rest, "not run: no device left (%s)", dead1);
    for (int k = 0; k < N_FILES; k++) {
        if (k < 6 || k == 9) {
            gr_seen_assert_same(want, got, k);
            continue;
        }
        const char *why = k >= 14 ? rest : k / 2 == 3 || k / 2 == 5 ? dead1 : dead0;
        ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_DEVICE);
        ck_assert_int_eq(got->status[k], GR_ERR_CUDA);
        ck_assert_str_eq(got->error[k], why);
        char line[1024];
        snprintf(line, sizeof line, "{\"input\": \"%s\", \"error\": \"%s\"}\n", paths[k], why);
        ck_assert_str_eq(got->line[k], line); /* its own line */
    }
    ck_assert_int_eq(got->st.devices_failed, 2);
    ck_assert_int_eq(got->st.files_lost, N_FILES - 7);
    ck_assert_int_eq(got->st.failed_device, 1);
    ck_assert_str_eq(got->st.failed_device_error, dead1);
    free(got);
    free(want);
}
END_TEST

/* One engine (2 slots), the hook failing its second run: the same, and a source ends with the failure. */
static gr_image *frame;

static int next_frame(void *user, int index, const gr_image **image)
{
    (void)user;
    *image = frame;
    return index < 40;
}

static int count(void *user, const gr_file_result *r)
{
    int *n = user;
    ck_assert_int_eq(r->index, *n);
    (*n)++;
    return 0;
}

START_TEST(a_pool_of_one_failing_ends_in_order)
{
    use_inflight(2);
    seen *want = healthy(1);
    setenv("GR_TEST_FAIL_ENGINE", "0:2", 1);
    seen *got = run(1);
    ck_assert_int_eq(got->returned, GR_OK);
    for (int k = 0; k < 2; k++)
        gr_seen_assert_same(want, got, k);
    int lost = 0;
    /* Batch 1 failed with batch 2 on the engine; from batch 3 (file 6) on, never read. */
    for (int k = 2; k < N_FILES; k++) {
        ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_DEVICE);
        ck_assert_str_eq(got->error[k], k < 6 ? "device 0 (the CPU) failed: injected failure "
                                                "(test hook GR_TEST_FAIL_ENGINE=0:2)"
                                              : "not run: no device left (device 0 (the CPU) "
                                                "failed: injected failure (test hook "
                                                "GR_TEST_FAIL_ENGINE=0:2))");
        lost++;
    }
    ck_assert_int_eq(got->st.files_lost, lost);
    ck_assert_int_eq(got->st.failed_device, 0);
    free(got);
    free(want);

    ck_assert_int_eq(gr_image_load("data/dog.jpg", &frame), GR_OK);
    gr_pool *pool = NULL;
    ck_assert_int_eq(gr_pool_wrap(engines, 1, &pool), GR_OK);
    int delivered = 0;
    gr_files_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(gr_pool_detect_source(pool, next_frame, NULL, count, &delivered, &st),
                     GR_ERR_CUDA);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "gr_pool_detect_source: not run: no device "
                                                  "left (device 0 (the CPU) failed: injected"));
    ck_assert_int_ge(delivered, 2);
    ck_assert_int_lt(delivered, 40);
    ck_assert_int_eq(st.images, delivered);
    ck_assert_int_eq(st.devices_failed, 1);
    gr_pool_destroy(pool);
    gr_image_destroy(frame);
}
END_TEST

static Suite *failover_suite(void)
{
    Suite *s = suite_create("failover");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_sticky_device_error_loses_only_its_batches_in_flight);
    tcase_add_test(tc, the_test_hook_fails_one_engine_as_a_lost_device);
    tcase_add_test(tc, every_engine_failing_reports_every_file);
    tcase_add_test(tc, a_pool_of_one_failing_ends_in_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(failover_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
