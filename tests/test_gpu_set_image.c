/* GPU side of gr_engine_set_image (runtime/engine_image.c): a GPU engine's image input is the
 * uint8 letterbox (gr_image_letterbox_u8) byte for byte, in every slot and batch position, and
 * the `graphrun` CLI feeds the GPU the same: its saved outputs for the bundled photo equal the C
 * API's bit for bit, per precision (the same engine options give the same kernels and the same
 * deterministic graph, so any difference is the input). Exits 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"
#include "tools/cli.h"
#include "tools/npy.h"

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine *gpu_engine(const gr_model *model, gr_precision prec, int batch, int inflight,
                             gr_preprocess how)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.preprocess = how;
    eo.precision = prec;
    eo.batch = batch;
    eo.inflight = inflight;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &eo, &engine) == GR_OK, "%s engine: %s",
                  gr_precision_name(prec), gr_last_error());
    return engine;
}

/* The engine's preprocessing (its option: the model's letterbox, or stretch) rounded to uint8. */
static void image_input_is_the_u8_preprocess(gr_preprocess how)
{
    gr_model *model = load_shapes();
    gr_engine *engine = gpu_engine(model, GR_PREC_FP32, 2, 2, how);
    gr_image *image = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &image), GR_OK);
    ck_assert_int_eq(gr_engine_image_u8(engine), 1);
    gr_model_info info;
    gr_model_get_info(model, &info);
    size_t per_image = (size_t)3 * (size_t)info.width * (size_t)info.height;
    uint8_t *expected = malloc(per_image);
    ck_assert_ptr_nonnull(expected);
    gr_preprocess want = how == GR_PREPROCESS_STRETCH ? how : GR_PREPROCESS_LETTERBOX;
    ck_assert_int_eq(gr_image_preprocess_u8(image, want, info.width, info.height, expected), GR_OK);
    for (int slot = 0; slot < 2; slot++) {
        ck_assert_msg(gr_engine_set_image(engine, slot, 1, image) == GR_OK, "%s", gr_last_error());
        void *buffer = NULL;
        size_t bytes = 0;
        ck_assert_int_eq(gr_engine_slot_input(engine, slot, 1, &buffer, &bytes), GR_OK);
        ck_assert_uint_eq(bytes, 2 * per_image);
        const uint8_t *got = (const uint8_t *)buffer + per_image;
        for (size_t i = 0; i < per_image; i++)
            ck_assert_msg(got[i] == expected[i], "slot %d image 1 byte %zu: %u, "
                          "gr_image_preprocess_u8 (%s) %u", slot, i, got[i],
                          gr_preprocess_name(want), expected[i]);
    }
    free(expected);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}

START_TEST(test_gpu_image_input_is_the_u8_letterbox)
{
    image_input_is_the_u8_preprocess(GR_PREPROCESS_AUTO);
}
END_TEST

START_TEST(test_gpu_image_input_is_the_u8_stretch)
{
    image_input_is_the_u8_preprocess(GR_PREPROCESS_STRETCH);
}
END_TEST

/* `graphrun --model shapes --device gpu --prec P --input data/dog.jpg --save-output F` in this
 * process against gr_engine_set_image + gr_engine_run with the same options. */
static void cli_and_api(gr_precision prec)
{
    char npy[64];
    snprintf(npy, sizeof npy, "/tmp/gr_test_gpu_set_image_%d.npy", (int)getpid());
    char *argv[] = {"graphrun", "--model", "shapes", "--device", "gpu", "--prec",
                    (char *)gr_precision_name(prec), "--input", "data/dog.jpg", "--no-output",
                    "--save-output", npy, NULL};
    gr_cli_options o;
    char err[256];
    ck_assert_int_eq(gr_cli_parse(12, argv, &o, err, sizeof err), 0);
    ck_assert_int_eq(gr_cli_detect_images(&o), 0);
    float *cli = NULL;
    int dims[4], ndim = 0;
    ck_assert_msg(gr_npy_read(npy, &cli, dims, &ndim, 4) == GR_OK, "%s", gr_last_error());
    remove(npy);
    gr_model *model = load_shapes();
    gr_engine *engine = gpu_engine(model, prec, 1, 1, GR_PREPROCESS_AUTO);
    gr_image *image = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &image), GR_OK);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, image), GR_OK);
    ck_assert_msg(gr_engine_run(engine) == GR_OK, "%s", gr_last_error());
    gr_tensor_desc d;
    const float *api = NULL;
    ck_assert_int_eq(gr_engine_output_desc(engine, 0, &d), GR_OK);
    ck_assert_int_eq(gr_engine_output(engine, 0, &api), GR_OK);
    size_t n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&api[i], &cli[i], sizeof(float)) != 0 && differ++ == 0)
            first = i;
    ck_assert_msg(differ == 0, "%s: %zu of %zu outputs differ, the first at %zu: API %.9g, CLI "
                  "%.9g", gr_precision_name(prec), differ, n, first, (double)api[first],
                  (double)cli[first]);
    free(cli);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}

START_TEST(test_cli_and_api_same_outputs_fp32) { cli_and_api(GR_PREC_FP32); }
END_TEST

START_TEST(test_cli_and_api_same_outputs_int8) { cli_and_api(GR_PREC_INT8); }
END_TEST

static Suite *gpu_set_image_suite(void)
{
    Suite *s = suite_create("gpu_set_image");
    TCase *tc = tcase_create("gpu_set_image");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_gpu_image_input_is_the_u8_letterbox);
    tcase_add_test(tc, test_gpu_image_input_is_the_u8_stretch);
    tcase_add_test(tc, test_cli_and_api_same_outputs_fp32);
    tcase_add_test(tc, test_cli_and_api_same_outputs_int8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_set_image"))
        return 77;
    int failed = gr_test_run_in_process(gpu_set_image_suite());
    return failed == 0 ? 0 : 1;
}
