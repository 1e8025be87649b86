/* Check suite for runtime.h's thread rules on the CPU engine:
 *   - separate engines are independent: four threads, each building its own engine from one
 *     shared gr_model (read-only after loading), run at the same time and get exactly the outputs
 *     of a single-threaded run;
 *   - one engine shared by two threads: a thread entering a run while the other is inside one gets
 *     GR_ERR_BUSY, never a race; every call returns GR_OK or GR_ERR_BUSY and the outputs stay
 *     correct.
 * The CPU reference is deterministic (same code, same data, one thread per run), so outputs are
 * compared bit for bit. Built with -DGR_SANITIZE=thread this suite is what ThreadSanitizer checks. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"

/* A reduced YOLOv2-tiny: four conv/maxpool stages, the VOC region head. */
static const char cfg_format[] =
    "[net]\nwidth=%d\nheight=%d\nchannels=3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=32\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=64\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=128\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[convolutional]\nsize=1\nstride=1\npad=1\nfilters=125\nactivation=linear\n"
    "[region]\nanchors=1.08,1.19,3.42,4.41,6.63,11.38,9.42,5.11,16.62,10.52\n"
    "classes=20\ncoords=4\nnum=5\nsoftmax=1\n";

static gr_model *load_reduced(int size)
{
    char cfg[2048], path[] = "/tmp/gr_concurrency_XXXXXX";
    int n = snprintf(cfg, sizeof cfg, cfg_format, size, size);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, cfg, (size_t)n), n);
    close(fd);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = path;
    gr_model *model = NULL;
    gr_status st = gr_model_load(&mo, &model);
    unlink(path);
    ck_assert_msg(st == GR_OK, "%s", gr_last_error());
    return model;
}

static float *make_input(const gr_model *model, size_t *elems)
{
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    *elems = (size_t)info.channels * (size_t)info.width * (size_t)info.height;
    float *input = malloc(*elems * sizeof *input);
    ck_assert_ptr_nonnull(input);
    for (size_t i = 0; i < *elems; i++)
        input[i] = (float)((i * 7919) % 256) / 255.0f;
    return input;
}

static gr_engine *build_cpu(const gr_model *model)
{
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

/* Output 0 of the engine's last run, copied. */
static float *copy_output(const gr_engine *engine, size_t *elems)
{
    gr_tensor_desc d;
    const float *data = NULL;
    ck_assert_int_eq(gr_engine_output_desc(engine, 0, &d), GR_OK);
    ck_assert_int_eq(gr_engine_output(engine, 0, &data), GR_OK);
    *elems = (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
    float *copy = malloc(*elems * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, data, *elems * sizeof *copy);
    return copy;
}

/* ---- separate engines ---------------------------------------------------------------------- */

#define N_THREADS 4
#define RUNS_PER_THREAD 3

typedef struct engine_job {
    const gr_model *model;
    const float *input;
    const float *expected;
    size_t expected_elems;
    gr_status status;       /* first failure, or GR_OK */
    char message[256];
    int mismatches;
} engine_job;

static void *run_own_engine(void *arg)
{
    engine_job *job = arg;
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    job->status = gr_engine_build(job->model, &opt, &engine);
    for (int r = 0; r < RUNS_PER_THREAD && job->status == GR_OK; r++) {
        job->status = gr_engine_run_f32(engine, job->input);
        const float *out = NULL;
        if (job->status == GR_OK)
            job->status = gr_engine_output(engine, 0, &out);
        if (job->status == GR_OK && memcmp(out, job->expected,
                                           job->expected_elems * sizeof(float)) != 0)
            job->mismatches++;
    }
    if (job->status != GR_OK)
        snprintf(job->message, sizeof job->message, "%s", gr_last_error());
    gr_engine_destroy(engine);
    return NULL;
}

START_TEST(four_threads_own_engines_match_single_thread)
{
    gr_model *model = load_reduced(64);
    size_t in_elems, out_elems;
    float *input = make_input(model, &in_elems);
    gr_engine *reference = build_cpu(model);
    ck_assert_int_eq(gr_engine_run_f32(reference, input), GR_OK);
    float *expected = copy_output(reference, &out_elems);
    gr_engine_destroy(reference);

    pthread_t threads[N_THREADS];
    engine_job jobs[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (engine_job){model, input, expected, out_elems, GR_OK, "", 0};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, run_own_engine, &jobs[t]), 0);
    }
    for (int t = 0; t < N_THREADS; t++)
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
    for (int t = 0; t < N_THREADS; t++) {
        ck_assert_msg(jobs[t].status == GR_OK, "thread %d: %s", t, jobs[t].message);
        ck_assert_msg(jobs[t].mismatches == 0, "thread %d: %d of %d runs differ from the "
                      "single-threaded output", t, jobs[t].mismatches, RUNS_PER_THREAD);
    }
    free(expected);
    free(input);
    gr_model_destroy(model);
}
END_TEST

/* ---- one engine, two threads --------------------------------------------------------------- */

#define MAX_CALLS_PER_THREAD 2000

typedef struct shared_job {
    gr_engine *engine;
    atomic_int *busy_seen;
    int ok, busy, other;
    gr_status other_status;
    char busy_message[256];
} shared_job;

/* Call gr_engine_run until one of the two threads has been turned away with GR_ERR_BUSY. */
static void *hammer_shared_engine(void *arg)
{
    shared_job *job = arg;
    for (int i = 0; i < MAX_CALLS_PER_THREAD && !atomic_load(job->busy_seen); i++) {
        gr_status st = gr_engine_run(job->engine);
        if (st == GR_OK) {
            job->ok++;
        } else if (st == GR_ERR_BUSY) {
            if (job->busy++ == 0)
                snprintf(job->busy_message, sizeof job->busy_message, "%s", gr_last_error());
            atomic_store(job->busy_seen, 1);
        } else {
            job->other++;
            job->other_status = st;
        }
    }
    return NULL;
}

START_TEST(shared_engine_second_thread_gets_busy)
{
    gr_model *model = load_reduced(160);
    size_t in_elems, out_elems;
    float *input = make_input(model, &in_elems);
    gr_engine *reference = build_cpu(model);
    ck_assert_int_eq(gr_engine_run_f32(reference, input), GR_OK);
    float *expected = copy_output(reference, &out_elems);
    gr_engine_destroy(reference);

    gr_engine *engine = build_cpu(model);
    void *buffer = NULL;
    size_t bytes = 0;
    ck_assert_int_eq(gr_engine_input_buffer(engine, 0, &buffer, &bytes), GR_OK);
    ck_assert_uint_eq(bytes, in_elems * sizeof(float));
    memcpy(buffer, input, bytes);

    atomic_int busy_seen;
    atomic_init(&busy_seen, 0);
    shared_job jobs[2];
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) {
        jobs[t] = (shared_job){engine, &busy_seen, 0, 0, 0, GR_OK, ""};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, hammer_shared_engine, &jobs[t]), 0);
    }
    for (int t = 0; t < 2; t++)
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);

    int ok = jobs[0].ok + jobs[1].ok, busy = jobs[0].busy + jobs[1].busy;
    for (int t = 0; t < 2; t++)
        ck_assert_msg(jobs[t].other == 0, "thread %d: %d calls returned %s", t, jobs[t].other,
                      gr_status_str(jobs[t].other_status));
    ck_assert_msg(busy >= 1, "no GR_ERR_BUSY in %d runs", ok);
    ck_assert_int_ge(ok, 1); /* someone was inside the run that turned the other away */
    for (int t = 0; t < 2; t++)
        if (jobs[t].busy)
            ck_assert_msg(strstr(jobs[t].busy_message, "already running on another thread"),
                          "BUSY message: '%s'", jobs[t].busy_message);
    /* The engine is intact: the last run's output is right, and it runs again. */
    const float *out = NULL;
    ck_assert_int_eq(gr_engine_output(engine, 0, &out), GR_OK);
    ck_assert(memcmp(out, expected, out_elems * sizeof(float)) == 0);
    ck_assert_int_eq(gr_engine_run(engine), GR_OK);
    ck_assert_int_eq(gr_engine_output(engine, 0, &out), GR_OK);
    ck_assert(memcmp(out, expected, out_elems * sizeof(float)) == 0);
    gr_engine_destroy(engine);
    free(expected);
    free(input);
    gr_model_destroy(model);
}
END_TEST

static Suite *concurrency_suite(void)
{
    Suite *s = suite_create("concurrency");
    TCase *tc = tcase_create("cpu engines");
    tcase_set_timeout(tc, 300); /* sanitizer builds (TSan especially) run the nets slowly */
    tcase_add_test(tc, four_threads_own_engines_match_single_thread);
    tcase_add_test(tc, shared_engine_second_thread_gets_busy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(concurrency_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
