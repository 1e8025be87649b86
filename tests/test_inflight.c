/* Check suite for runs in flight (runtime.h, "Runs in flight") on the CPU engine: the slot
 * contract (slot numbers outside 0..inflight-1 are invalid arguments with a message naming the
 * range; submitting a slot in flight, or waiting on one never submitted, is GR_ERR_STATE; a
 * synchronous run refuses while slot 0 is in flight), every slot has its own input buffer, outputs
 * read after a wait are that run's, and round-robin runs in flight give exactly the outputs of
 * serial gr_engine_run_u8 calls on the same inputs (the CPU reference is deterministic, so bit
 * for bit). The GPU twin is tests/test_gpu_inflight.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"

enum { SLOTS = 3, RUNS = 7 };

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    mo.weights_path = NULL;
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine *build(const gr_model *model, int inflight)
{
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.inflight = inflight;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

/* Input `run` of the sequence: a different deterministic pattern per run. */
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

static void expect_invalid_slot(gr_status st, const char *range)
{
    ck_assert_int_eq(st, GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), range) != NULL, "'%s' not in: %s", range,
                  gr_last_error());
}

START_TEST(option_outside_range_is_rejected)
{
    gr_model *model = load_shapes();
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    ck_assert_int_eq(opt.inflight, 1);
    opt.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    const int bad[] = {-1, GR_MAX_INFLIGHT + 1};
    for (int i = 0; i < 2; i++) {
        opt.inflight = bad[i];
        ck_assert_int_eq(gr_engine_build(model, &opt, &engine), GR_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(engine);
        ck_assert_ptr_nonnull(strstr(gr_last_error(), "inflight"));
    }
    gr_model_destroy(model);
}
END_TEST

START_TEST(slot_numbers_outside_range_are_invalid)
{
    gr_model *model = load_shapes();
    gr_engine *engine = build(model, SLOTS);
    ck_assert_int_eq(gr_engine_inflight(engine), SLOTS);
    void *buffer = NULL;
    size_t bytes = 0;
    const int bad[] = {-1, SLOTS, 1000};
    for (int i = 0; i < 3; i++) {
        expect_invalid_slot(gr_engine_slot_input(engine, bad[i], 1, &buffer, &bytes), "outside 0..2");
        ck_assert_ptr_null(buffer);
        expect_invalid_slot(gr_engine_submit(engine, bad[i]), "outside 0..2");
        expect_invalid_slot(gr_engine_wait(engine, bad[i]), "outside 0..2");
    }
    expect_invalid_slot(gr_engine_submit(NULL, 0), "NULL engine");
    ck_assert_int_eq(gr_engine_inflight(NULL), 0);
    gr_engine_destroy(engine);
    /* A default engine has one slot: slot 1 is out of range. */
    engine = build(model, 1);
    expect_invalid_slot(gr_engine_submit(engine, 1), "outside 0..0");
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(slot_states_are_checked)
{
    gr_model *model = load_shapes();
    gr_engine *engine = build(model, SLOTS);
    void *buffer;
    size_t bytes;
    ck_assert_int_eq(gr_engine_slot_input(engine, 0, 1, &buffer, &bytes), GR_OK);
    fill_input(buffer, bytes, 0);
    ck_assert_int_eq(gr_engine_wait(engine, 0), GR_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "nothing was submitted on slot 0"));
    ck_assert_int_eq(gr_engine_submit(engine, 0), GR_OK);
    ck_assert_int_eq(gr_engine_submit(engine, 0), GR_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "slot 0 is in flight"));
    ck_assert_int_eq(gr_engine_run(engine), GR_ERR_STATE);
    ck_assert_int_eq(gr_engine_run_u8(engine, buffer), GR_ERR_STATE);
    /* Refusals leave the engine usable: the submitted run completes. */
    ck_assert_int_eq(gr_engine_wait(engine, 0), GR_OK);
    ck_assert_int_eq(gr_engine_wait(engine, 0), GR_ERR_STATE);
    ck_assert_int_eq(gr_engine_run(engine), GR_OK);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(slots_have_their_own_buffers)
{
    gr_model *model = load_shapes();
    gr_engine *engine = build(model, SLOTS);
    void *buffers[SLOTS];
    size_t bytes[SLOTS];
    for (int s = 0; s < SLOTS; s++) {
        ck_assert_int_eq(gr_engine_slot_input(engine, s, 1, &buffers[s], &bytes[s]), GR_OK);
        ck_assert_uint_eq(bytes[s], bytes[0]);
        for (int t = 0; t < s; t++)
            ck_assert_ptr_ne(buffers[s], buffers[t]);
    }
    void *buffer0;
    size_t bytes0;
    ck_assert_int_eq(gr_engine_input_buffer(engine, 1, &buffer0, &bytes0), GR_OK);
    ck_assert_ptr_eq(buffer0, buffers[0]); /* the synchronous API is slot 0 */
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(inflight_outputs_equal_serial_runs)
{
    gr_model *model = load_shapes();
    gr_engine *serial = build(model, 1), *engine = build(model, SLOTS);
    int heads = gr_engine_output_count(engine);
    void *buffer;
    size_t bytes;
    ck_assert_int_eq(gr_engine_slot_input(engine, 0, 1, &buffer, &bytes), GR_OK);
    uint8_t *input = malloc(bytes);
    float *expected[RUNS][8] = {{0}};
    ck_assert_ptr_nonnull(input);
    ck_assert_int_le(heads, 8);
    for (int r = 0; r < RUNS; r++) {
        fill_input(input, bytes, r);
        ck_assert_int_eq(gr_engine_run_u8(serial, input), GR_OK);
        for (int h = 0; h < heads; h++) {
            const float *out;
            ck_assert_int_eq(gr_engine_output(serial, h, &out), GR_OK);
            expected[r][h] = malloc(output_elems(serial, h) * sizeof(float));
            ck_assert_ptr_nonnull(expected[r][h]);
            memcpy(expected[r][h], out, output_elems(serial, h) * sizeof(float));
        }
    }
    /* Round robin: submit run r on slot r % SLOTS after waiting for run r - SLOTS there. */
    int checked = 0;
    for (int r = 0; r < RUNS + SLOTS; r++) {
        int slot = r % SLOTS, done = r - SLOTS;
        if (done >= 0) {
            ck_assert_msg(gr_engine_wait(engine, slot) == GR_OK, "%s", gr_last_error());
            for (int h = 0; h < heads; h++) {
                const float *out;
                ck_assert_int_eq(gr_engine_output(engine, h, &out), GR_OK);
                ck_assert_msg(memcmp(out, expected[done][h], output_elems(engine, h) * sizeof(float)) == 0,
                              "run %d (slot %d) output %d differs from the serial run", done, slot, h);
            }
            gr_detect_options dopt;
            gr_detect_options_default(&dopt);
            gr_detection *dets = NULL;
            int n = 0;
            ck_assert_int_eq(gr_engine_detect(engine, 0, &dopt, &dets, &n), GR_OK);
            gr_detections_free(dets);
            checked++;
        }
        if (r < RUNS) {
            ck_assert_int_eq(gr_engine_slot_input(engine, slot, 1, &buffer, &bytes), GR_OK);
            fill_input(buffer, bytes, r);
            ck_assert_msg(gr_engine_submit(engine, slot) == GR_OK, "%s", gr_last_error());
        }
    }
    ck_assert_int_eq(checked, RUNS);
    for (int r = 0; r < RUNS; r++)
        for (int h = 0; h < heads; h++)
            free(expected[r][h]);
    free(input);
    gr_engine_destroy(serial);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(memory_counts_weights_once)
{
    gr_model *model = load_shapes();
    gr_engine *one = build(model, 1), *three = build(model, SLOTS);
    gr_engine_memory_info a, b;
    ck_assert_int_eq(gr_engine_memory(one, &a), GR_OK);
    ck_assert_int_eq(gr_engine_memory(three, &b), GR_OK);
    ck_assert_int_eq(a.inflight, 1);
    ck_assert_int_eq(b.inflight, SLOTS);
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    ck_assert_uint_ge(a.weights_bytes, info.n_params * sizeof(float));
    ck_assert_uint_eq(a.weights_bytes, b.weights_bytes);
    ck_assert_uint_eq(a.arena_bytes, b.arena_bytes);
    ck_assert_uint_gt(a.io_bytes, 0);
    /* Every slot adds its own io, nothing else. */
    ck_assert_uint_eq(b.total_bytes - a.total_bytes, (SLOTS - 1) * a.io_bytes);
    ck_assert_int_eq(gr_engine_memory(NULL, &a), GR_ERR_INVALID_ARGUMENT);
    gr_engine_destroy(one);
    gr_engine_destroy(three);
    gr_model_destroy(model);
}
END_TEST

static Suite *inflight_suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, option_outside_range_is_rejected);
    tcase_add_test(tc, slot_numbers_outside_range_are_invalid);
    tcase_add_test(tc, slot_states_are_checked);
    tcase_add_test(tc, slots_have_their_own_buffers);
    tcase_add_test(tc, inflight_outputs_equal_serial_runs);
    tcase_add_test(tc, memory_counts_weights_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(inflight_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
