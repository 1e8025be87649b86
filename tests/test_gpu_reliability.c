/* GPU engine under failure and concurrency: an injected CUDA error during a run is reported with
 * its name, the engine then refuses to run (GR_ERR_STATE, no hang) and destruction still returns
 * every byte of device memory; several threads each with their own engine run at once with results
 * identical to a single-threaded run; one engine shared by two threads answers GR_ERR_BUSY to the
 * second, never racing. Exits 77 (skipped) with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"

static gr_model *model;
static uint8_t *image; /* letterboxed dog.jpg, uint8 HWC */
static size_t image_bytes;

static gr_engine *build(gr_precision prec)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.calib_cache = "/tmp/graphrun_gpu_reliability.calib";
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(model, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

static size_t out_elems(const gr_engine *e)
{
    gr_tensor_desc d;
    gr_engine_output_desc(e, 0, &d);
    return (size_t)d.n * d.c * d.h * d.w;
}

START_TEST(test_injected_fault)
{
    size_t free_before, free_after, total;
    gr_engine *warm = build(GR_PREC_INT8); /* CUDA context and module loading out of the way */
    gr_engine_destroy(warm);
    ck_assert(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
    gr_engine *e = build(GR_PREC_INT8);
    ck_assert(gr_engine_run_u8(e, image) == GR_OK);
    ck_assert(gr_engine_debug_inject_error(e, (int)cudaErrorLaunchFailure) == GR_OK);
    gr_status st = gr_engine_run_u8(e, image);
    ck_assert_int_eq(st, GR_ERR_CUDA);
    ck_assert_msg(strstr(gr_last_error(), "cudaErrorLaunchFailure"), "%s", gr_last_error());
    ck_assert_msg(strstr(gr_engine_last_error(e), "cudaErrorLaunchFailure"), "%s",
                  gr_engine_last_error(e));
    st = gr_engine_run_u8(e, image);
    ck_assert_int_eq(st, GR_ERR_STATE);
    ck_assert_msg(strstr(gr_last_error(), "unusable"), "%s", gr_last_error());
    gr_engine_destroy(e);
    ck_assert(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
    printf("device memory free before build %zu MiB, after destroy %zu MiB\n", free_before >> 20,
           free_after >> 20);
    ck_assert_msg(free_after + (2u << 20) >= free_before, "destroy leaked %zu bytes of device memory",
                  free_before - free_after);
}
END_TEST

typedef struct worker {
    gr_precision prec;
    const float *expect;
    size_t n;
    int runs, mismatches, failures;
    pthread_t thread;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = w->prec;
    eo.calib_cache = "/tmp/graphrun_gpu_reliability.calib";
    gr_engine *e = NULL;
    if (gr_engine_build(model, &eo, &e) != GR_OK) {
        w->failures++;
        return NULL;
    }
    for (int r = 0; r < w->runs; r++) {
        const float *out;
        if (gr_engine_run_u8(e, image) != GR_OK || gr_engine_output(e, 0, &out) != GR_OK) {
            w->failures++;
            continue;
        }
        w->mismatches += memcmp(out, w->expect, w->n * sizeof(float)) != 0;
    }
    gr_engine_destroy(e);
    return NULL;
}

START_TEST(test_threads_with_own_engines)
{
    float *expect[2];
    size_t n = 0;
    for (int p = 0; p < 2; p++) {
        gr_engine *e = build(p ? GR_PREC_INT8 : GR_PREC_FP16);
        ck_assert(gr_engine_run_u8(e, image) == GR_OK);
        const float *out;
        gr_engine_output(e, 0, &out);
        n = out_elems(e);
        expect[p] = malloc(n * sizeof(float));
        memcpy(expect[p], out, n * sizeof(float));
        gr_engine_destroy(e);
    }
    enum { THREADS = 4 };
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){t % 2 ? GR_PREC_INT8 : GR_PREC_FP16, expect[t % 2], n, 300, 0, 0, 0};
        ck_assert(pthread_create(&w[t].thread, NULL, work, &w[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(w[t].thread, NULL);
        ck_assert_msg(w[t].failures == 0, "thread %d: %d failed runs", t, w[t].failures);
        ck_assert_msg(w[t].mismatches == 0, "thread %d: %d runs differ from the single-threaded "
                      "result", t, w[t].mismatches);
    }
    printf("%d threads x 300 runs, each with its own engine: all identical to single-threaded\n",
           THREADS);
    free(expect[0]);
    free(expect[1]);
}
END_TEST

typedef struct sharer {
    gr_engine *e;
    atomic_int *stop;
    int ok, busy, other;
    pthread_t thread;
} sharer;

static void *share(void *arg)
{
    sharer *s = arg;
    while (!atomic_load(s->stop)) {
        gr_status st = gr_engine_run_u8(s->e, image);
        if (st == GR_OK)
            s->ok++;
        else if (st == GR_ERR_BUSY)
            s->busy++;
        else
            s->other++;
    }
    return NULL;
}

START_TEST(test_shared_engine_rejects_second_thread)
{
    gr_engine *e = build(GR_PREC_FP32); /* the slowest run: the widest window */
    atomic_int stop = 0;
    sharer s[2] = {{e, &stop, 0, 0, 0, 0}, {e, &stop, 0, 0, 0, 0}};
    for (int t = 0; t < 2; t++)
        ck_assert(pthread_create(&s[t].thread, NULL, share, &s[t]) == 0);
    int busy = 0;
    for (int spin = 0; spin < 2000 && busy == 0; spin++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        busy = s[0].busy + s[1].busy;
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < 2; t++)
        pthread_join(s[t].thread, NULL);
    printf("shared engine: %d + %d runs ok, %d + %d rejected as busy\n", s[0].ok, s[1].ok,
           s[0].busy, s[1].busy);
    ck_assert_int_eq(s[0].other + s[1].other, 0);
    ck_assert_int_gt(s[0].ok + s[1].ok, 0);
    ck_assert_int_gt(s[0].busy + s[1].busy, 0);
    gr_engine_destroy(e);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_reliability"))
        return 77;
    gr_model_options mo;
    gr_model_options_default(&mo);
    gr_image *im = NULL;
    if (gr_model_load(&mo, &model) != GR_OK || gr_image_load("data/dog.jpg", &im) != GR_OK) {
        printf("gpu_reliability: setup failed: %s\n", gr_last_error());
        return 1;
    }
    image_bytes = 416u * 416u * 3u;
    image = malloc(image_bytes);
    gr_image_letterbox_u8(im, 416, 416, image);
    gr_image_destroy(im);
    Suite *su = suite_create("gpu_reliability");
    TCase *tc = tcase_create("reliability");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_injected_fault);
    tcase_add_test(tc, test_threads_with_own_engines);
    tcase_add_test(tc, test_shared_engine_rejects_second_thread);
    suite_add_tcase(su, tc);
    int failed = gr_test_run_in_process(su);
    free(image);
    gr_model_destroy(model);
    remove("/tmp/graphrun_gpu_reliability.calib");
    return failed == 0 ? 0 : 1;
}
