/* Check suite for pools (runtime.h, "pools: one engine per device") on the CPU, where a pool has
 * one device: its engine's outputs equal a plain engine's bit for bit (the CPU reference is
 * deterministic); batches spread round-robin over the pool's engines and slots and waited in
 * submission order come back in input order; a pool loaded from a saved engine runs the same;
 * bad device lists are refused with a message naming the entry; destroying a pool with runs in
 * flight is safe (ASan/LSan builds check the memory). The GPU twin, over every visible GPU, is
 * tests/test_gpu_pool.c. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"

enum { BATCH = 2, INFLIGHT = 2, RUNS = 7 };

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine_options cpu_options(void)
{
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.batch = BATCH;
    opt.inflight = INFLIGHT;
    return opt;
}

/* Input `run`: a different deterministic pattern per run (uint8 HWC). */
static void fill_input(uint8_t *buffer, size_t bytes, int run)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)((i * 7919u + (size_t)run * 104729u) >> 3);
}

static size_t output_elems(const gr_engine *engine, int index)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(engine, index, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

/* Output 0 of a synchronous run of a plain engine on input `run`, malloc'd. */
static float *reference_output(gr_engine *plain, int run, size_t *elems)
{
    void *in;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(plain, 1, &in, &bytes), GR_OK);
    fill_input(in, bytes, run);
    ck_assert_msg(gr_engine_run(plain) == GR_OK, "%s", gr_last_error());
    const float *out;
    ck_assert_int_eq(gr_engine_output(plain, 0, &out), GR_OK);
    *elems = output_elems(plain, 0);
    float *copy = malloc(*elems * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, out, *elems * sizeof *copy);
    return copy;
}

START_TEST(one_device_equals_plain_engine)
{
    gr_model *model = load_shapes();
    gr_engine_options opt = cpu_options();
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(model, &opt, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_pool_devices(pool), 1);
    ck_assert_int_eq(gr_pool_device(pool, 0), -1); /* the CPU */
    ck_assert_ptr_null(gr_pool_engine(pool, 1));
    ck_assert_ptr_null(gr_pool_engine(pool, -1));
    ck_assert_str_eq(gr_pool_notice(pool), "");
    gr_engine *engine = gr_pool_engine(pool, 0);
    ck_assert_int_eq(gr_engine_device(engine), GR_DEVICE_CPU);
    ck_assert_int_eq(gr_engine_inflight(engine), INFLIGHT);

    opt.inflight = 1;
    gr_engine *plain = NULL;
    ck_assert_int_eq(gr_engine_build(model, &opt, &plain), GR_OK);
    size_t elems;
    float *want = reference_output(plain, 3, &elems);
    void *in;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(engine, 1, &in, &bytes), GR_OK);
    fill_input(in, bytes, 3);
    ck_assert_int_eq(gr_engine_run(engine), GR_OK);
    const float *got;
    ck_assert_int_eq(gr_engine_output(engine, 0, &got), GR_OK);
    ck_assert_uint_eq(output_elems(engine, 0), elems);
    ck_assert_msg(memcmp(got, want, elems * sizeof *got) == 0,
                  "the pool's engine differs from a plain engine on the same input");
    free(want);
    gr_engine_destroy(plain);
    /* The list {0} is the CPU too. */
    gr_pool_destroy(pool);
    const int zero = 0;
    ck_assert_msg(gr_pool_build(model, &opt, &zero, 1, &pool) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_pool_devices(pool), 1);
    gr_pool_destroy(pool);
    gr_model_destroy(model);
}
END_TEST

/* RUNS batches, batch r on engine r % devices and its slot (r / devices) % inflight, each waited
 * in submission order once its slot is needed again: output r must be run r's, bit for bit. */
START_TEST(round_robin_keeps_input_order)
{
    gr_model *model = load_shapes();
    gr_engine_options opt = cpu_options();
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(model, &opt, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
    opt.inflight = 1;
    gr_engine *plain = NULL;
    ck_assert_int_eq(gr_engine_build(model, &opt, &plain), GR_OK);
    float *want[RUNS];
    size_t elems = 0;
    for (int r = 0; r < RUNS; r++)
        want[r] = reference_output(plain, r, &elems);
    int devices = gr_pool_devices(pool), lanes = devices * INFLIGHT, checked = 0;
    for (int r = 0; r < RUNS + lanes; r++) {
        if (r >= lanes) { /* run r - lanes holds the lane run r needs: wait, check, free it */
            int done = r - lanes;
            gr_engine *e = gr_pool_engine(pool, done % devices);
            ck_assert_msg(gr_engine_wait(e, (done / devices) % INFLIGHT) == GR_OK, "%s",
                          gr_last_error());
            const float *got;
            ck_assert_int_eq(gr_engine_output(e, 0, &got), GR_OK);
            ck_assert_msg(memcmp(got, want[done], elems * sizeof *got) == 0,
                          "run %d: outputs are not that run's (order lost)", done);
            checked++;
        }
        if (r >= RUNS)
            continue;
        gr_engine *e = gr_pool_engine(pool, r % devices);
        int slot = (r / devices) % INFLIGHT;
        void *in;
        size_t bytes;
        ck_assert_int_eq(gr_engine_slot_input(e, slot, 1, &in, &bytes), GR_OK);
        fill_input(in, bytes, r);
        ck_assert_msg(gr_engine_submit(e, slot) == GR_OK, "%s", gr_last_error());
    }
    ck_assert_int_eq(checked, RUNS);
    for (int r = 0; r < RUNS; r++)
        free(want[r]);
    gr_engine_destroy(plain);
    gr_pool_destroy(pool);
    gr_model_destroy(model);
}
END_TEST

START_TEST(loaded_pool_runs_the_saved_engine)
{
    gr_model *model = load_shapes();
    gr_engine_options opt = cpu_options();
    opt.inflight = 1;
    gr_engine *plain = NULL;
    ck_assert_int_eq(gr_engine_build(model, &opt, &plain), GR_OK);
    char path[] = "/tmp/test_pool_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(gr_engine_save(plain, path) == GR_OK, "%s", gr_last_error());
    size_t elems;
    float *want = reference_output(plain, 5, &elems);
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_load(path, NULL, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_pool_devices(pool), 1);
    gr_engine *engine = gr_pool_engine(pool, 0);
    void *in;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(engine, 1, &in, &bytes), GR_OK);
    fill_input(in, bytes, 5);
    ck_assert_int_eq(gr_engine_run(engine), GR_OK);
    const float *got;
    ck_assert_int_eq(gr_engine_output(engine, 0, &got), GR_OK);
    ck_assert_msg(memcmp(got, want, elems * sizeof *got) == 0,
                  "the loaded pool's engine differs from the engine it was saved from");
    gr_pool_destroy(pool);
    /* A file that is not there: the load's own message, nothing left behind. */
    unlink(path);
    ck_assert_int_eq(gr_pool_load(path, NULL, NULL, 0, &pool), GR_ERR_IO);
    ck_assert_ptr_null(pool);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), path));
    free(want);
    gr_engine_destroy(plain);
    gr_model_destroy(model);
}
END_TEST

static void expect_refused(const gr_model *model, gr_device device, const int *devices, int n,
                           gr_status status, const char *words)
{
    gr_engine_options opt = cpu_options();
    opt.device = device;
    gr_pool *pool = (gr_pool *)&opt; /* must come back NULL */
    ck_assert_int_eq(gr_pool_build(model, &opt, devices, n, &pool), status);
    ck_assert_ptr_null(pool);
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, words) != NULL, "'%s' not in: %s", words, msg);
    ck_assert_ptr_null(strchr(msg, '\n'));
}

START_TEST(bad_device_lists_are_refused)
{
    gr_model *model = load_shapes();
    const int twice[] = {1, 0, 1}, negative[] = {0, -2}, two[] = {0, 1}, one[] = {1};
    int many[GR_MAX_DEVICES + 1];
    for (int i = 0; i <= GR_MAX_DEVICES; i++)
        many[i] = i;
    expect_refused(model, GR_DEVICE_CPU, twice, 3, GR_ERR_INVALID_ARGUMENT,
                   "gpu 1 given twice (entries 0 and 2)");
    expect_refused(model, GR_DEVICE_CPU, negative, 2, GR_ERR_INVALID_ARGUMENT,
                   "entry 1 is gpu -2");
    expect_refused(model, GR_DEVICE_CPU, many, GR_MAX_DEVICES + 1, GR_ERR_INVALID_ARGUMENT,
                   "17 devices (1..16");
    expect_refused(model, GR_DEVICE_CPU, NULL, 2, GR_ERR_INVALID_ARGUMENT,
                   "NULL with n_devices = 2");
    expect_refused(model, GR_DEVICE_CPU, many, -1, GR_ERR_INVALID_ARGUMENT, "-1 devices");
    expect_refused(model, GR_DEVICE_CPU, two, 2, GR_ERR_INVALID_ARGUMENT,
                   "the CPU is one device");
    expect_refused(model, GR_DEVICE_CPU, one, 1, GR_ERR_INVALID_ARGUMENT,
                   "the CPU is one device");
    int visible = gr_cuda_device_count();
    if (visible == 0) {
        expect_refused(model, GR_DEVICE_GPU, NULL, 0, GR_ERR_NO_DEVICE, "no CUDA device");
    } else {
        const int past[] = {0, visible};
        char words[64];
        snprintf(words, sizeof words, "gpu %d: only %d CUDA device", visible, visible);
        expect_refused(model, GR_DEVICE_GPU, past, 2, GR_ERR_NO_DEVICE, words);
    }
    gr_pool *pool = (gr_pool *)model;
    ck_assert_int_eq(gr_pool_build(NULL, NULL, NULL, 0, &pool), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_pool_build(model, NULL, NULL, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_pool_load(NULL, NULL, NULL, 0, &pool), GR_ERR_INVALID_ARGUMENT);
    gr_model_destroy(model);
}
END_TEST

START_TEST(destroy_with_runs_in_flight)
{
    gr_model *model = load_shapes();
    gr_engine_options opt = cpu_options();
    gr_pool *pool = NULL;
    ck_assert_msg(gr_pool_build(model, &opt, NULL, 0, &pool) == GR_OK, "%s", gr_last_error());
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
    gr_pool_destroy(NULL);
    ck_assert_int_eq(gr_pool_devices(NULL), 0);
    ck_assert_ptr_null(gr_pool_engine(NULL, 0));
    ck_assert_int_eq(gr_pool_device(NULL, 0), -1);
    ck_assert_str_eq(gr_pool_notice(NULL), "");
    gr_model_destroy(model);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, one_device_equals_plain_engine);
    tcase_add_test(tc, round_robin_keeps_input_order);
    tcase_add_test(tc, loaded_pool_runs_the_saved_engine);
    tcase_add_test(tc, bad_device_lists_are_refused);
    tcase_add_test(tc, destroy_with_runs_in_flight);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
