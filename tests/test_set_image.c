/* Check suite for runtime/engine_image.c (gr_engine_set_image, gr_engine_letterbox,
 * gr_engine_image_u8): a CPU engine's image input is Darknet's exact float letterbox, byte for byte,
 * and what the `graphrun` CLI feeds: the CLI's saved outputs for the bundled photo equal the C
 * API's bit for bit (the CPU reference is deterministic, so equal outputs follow from equal input
 * tensors and differ otherwise: the uint8 letterbox the example fed before moved boxes by pixels).
 * Bad arguments: one-line errors. The GPU side is tests/test_gpu_set_image.c. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tools/cli.h"
#include "tools/npy.h"

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes"; /* small (160x160) and trained: real detections */
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine *cpu_engine_how(const gr_model *model, int batch, gr_preprocess how)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.batch = batch;
    eo.preprocess = how;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &eo, &engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

static gr_engine *cpu_engine(const gr_model *model, int batch)
{
    return cpu_engine_how(model, batch, GR_PREPROCESS_AUTO);
}

/* The first index where a and b differ, or -1. */
static long first_difference(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return (long)i;
    return -1;
}

/* The engine's preprocessing: the model's (shapes, a pjreddie cfg: the letterbox) or its option. */
static void image_input_is_the_float_preprocess(gr_preprocess how)
{
    gr_model *model = load_shapes();
    gr_engine *engine = cpu_engine_how(model, 2, how);
    gr_preprocess want = how == GR_PREPROCESS_STRETCH ? how : GR_PREPROCESS_LETTERBOX;
    ck_assert_int_eq(gr_model_preprocess(model), GR_PREPROCESS_LETTERBOX);
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(engine)), want);
    gr_image *image = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &image), GR_OK);
    ck_assert_int_eq(gr_engine_image_u8(engine), 0);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 1, image), GR_OK);
    gr_model_info info;
    gr_model_get_info(model, &info);
    size_t per_image = (size_t)3 * (size_t)info.width * (size_t)info.height;
    float *expected = malloc(per_image * sizeof(float));
    ck_assert_ptr_nonnull(expected);
    ck_assert_int_eq(gr_image_preprocess(image, want, info.width, info.height, expected), GR_OK);
    void *buffer = NULL;
    size_t bytes = 0;
    ck_assert_int_eq(gr_engine_input_buffer(engine, 0, &buffer, &bytes), GR_OK); /* float */
    ck_assert_uint_eq(bytes, 2 * per_image * sizeof(float));
    long at = first_difference((const float *)buffer + per_image, expected, per_image);
    ck_assert_msg(at < 0, "image 1 of the input differs from the %s at %ld: %.9g vs %.9g",
                  gr_preprocess_name(want), at, at < 0 ? 0.0 : (double)((const float *)buffer)[per_image + (size_t)at],
                  at < 0 ? 0.0 : (double)expected[at]);
    free(expected);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}

START_TEST(test_cpu_image_input_is_the_float_letterbox)
{
    image_input_is_the_float_preprocess(GR_PREPROCESS_AUTO);
}
END_TEST

START_TEST(test_cpu_image_input_is_the_float_stretch)
{
    image_input_is_the_float_preprocess(GR_PREPROCESS_STRETCH);
}
END_TEST

/* The CLI (in this process, as `graphrun --model shapes --device cpu --input data/dog.jpg
 * --save-output F`) and the C API (gr_engine_set_image + gr_engine_run) give the same outputs. */
START_TEST(test_cli_and_api_same_outputs)
{
    char npy[64];
    snprintf(npy, sizeof npy, "/tmp/gr_test_set_image_%d.npy", (int)getpid());
    char *argv[] = {"graphrun", "--model", "shapes", "--device", "cpu", "--input", "data/dog.jpg",
                    "--no-output", "--save-output", npy, NULL};
    gr_cli_options o;
    char err[256];
    ck_assert_int_eq(gr_cli_parse(10, argv, &o, err, sizeof err), 0);
    ck_assert_int_eq(gr_cli_detect_images(&o), 0);
    float *cli = NULL;
    int dims[4], ndim = 0;
    ck_assert_msg(gr_npy_read(npy, &cli, dims, &ndim, 4) == GR_OK, "%s", gr_last_error());
    remove(npy);

    gr_model *model = load_shapes();
    gr_engine *engine = cpu_engine(model, 1);
    gr_image *image = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &image), GR_OK);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, image), GR_OK);
    ck_assert_msg(gr_engine_run(engine) == GR_OK, "%s", gr_last_error());
    gr_tensor_desc d;
    const float *api = NULL;
    ck_assert_int_eq(gr_engine_output_desc(engine, 0, &d), GR_OK);
    ck_assert_int_eq(gr_engine_output(engine, 0, &api), GR_OK);
    size_t n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    size_t saved = 1;
    for (int k = 0; k < ndim; k++)
        saved *= (size_t)dims[k];
    ck_assert_uint_eq(saved, n);
    long at = first_difference(api, cli, n);
    ck_assert_msg(at < 0, "output 0 differs at %ld of %zu: API %.9g, CLI %.9g", at, n,
                  at < 0 ? 0.0 : (double)api[at], at < 0 ? 0.0 : (double)cli[at]);
    free(cli);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(test_bad_arguments)
{
    gr_model *model = load_shapes();
    gr_engine *engine = cpu_engine(model, 1);
    gr_image *image = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &image), GR_OK);
    ck_assert_int_eq(gr_engine_set_image(NULL, 0, 0, image), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 1, image), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "batch_index 1 is outside 0..0"), "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_set_image(engine, 0, -1, image), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_set_image(engine, 1, 0, image), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "gr_engine_set_image: slot 1 is outside 0..0"), "%s",
                  gr_last_error());
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    uint8_t pixels[4 * 4 * 4] = {0};
    gr_image rgba = {4, 4, 4, pixels};
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, &rgba), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "4 channels"), "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_letterbox(NULL, image, pixels), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_letterbox(engine, image, NULL), GR_ERR_INVALID_ARGUMENT);
    /* The preprocessing: a value outside the enum, as an engine option or for the image. */
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.preprocess = (gr_preprocess)4;
    gr_engine *bad = NULL;
    ck_assert_int_eq(gr_engine_build(model, &eo, &bad), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "engine option preprocess=4"), "%s", gr_last_error());
    float planes[3 * 8 * 8];
    ck_assert_int_eq(gr_image_preprocess(image, GR_PREPROCESS_AUTO, 8, 8, planes),
                     GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "gr_image_preprocess: preprocessing 0 is not letterbox"),
                  "%s", gr_last_error());
    ck_assert_int_eq(gr_image_preprocess_u8(image, (gr_preprocess)7, 4, 4, pixels),
                     GR_ERR_INVALID_ARGUMENT);
    gr_preprocess p = GR_PREPROCESS_AUTO;
    ck_assert_int_eq(gr_preprocess_parse("stretch", &p), GR_OK);
    ck_assert_int_eq(p, GR_PREPROCESS_STRETCH);
    ck_assert_str_eq(gr_preprocess_name(GR_PREPROCESS_LETTERBOX), "letterbox");
    ck_assert_int_eq(gr_preprocess_parse("letter_box", &p), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_image_u8(NULL), 0);
    /* A submitted slot is not written until it is waited for. */
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, image), GR_OK);
    ck_assert_int_eq(gr_engine_submit(engine, 0), GR_OK);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, image), GR_ERR_STATE);
    ck_assert_msg(strstr(gr_last_error(), "in flight"), "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_wait(engine, 0), GR_OK);
    ck_assert_int_eq(gr_engine_set_image(engine, 0, 0, image), GR_OK);
    gr_image_destroy(image);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

static Suite *set_image_suite(void)
{
    Suite *s = suite_create("set_image");
    TCase *tc = tcase_create("set_image");
    tcase_set_timeout(tc, 120); /* the CPU reference runs the shapes model a few times */
    tcase_add_test(tc, test_cpu_image_input_is_the_float_letterbox);
    tcase_add_test(tc, test_cpu_image_input_is_the_float_stretch);
    tcase_add_test(tc, test_cli_and_api_same_outputs);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(set_image_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
