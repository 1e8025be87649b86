/* Check suite for the bundled trained model (`--model shapes`): graphrun's CPU fp32 reference
 * against PyTorch, which trained it. tools/train/train_shapes.py writes, next to the exported
 * weights, PyTorch's raw head output and its decoded detections (threshold 0.5) for
 * data/shapes-val/000.png; they are kept in tests/data/shapes/ and must be replaced together with
 * data/shapes.weights. Agreement here means the export (layer order, BN statistics and epsilon),
 * the input pixels and the [yolo] decoding are all the same on both sides. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "tools/npy.h"

#define IMAGE "data/shapes-val/000.png"
#define HEAD_REF "tests/data/shapes/shapes_head_ref.npy"
#define DETS_REF "tests/data/shapes/shapes_dets_ref.txt"
/* NRMSE = RMSE / (max - min of the reference), the GPU suites' measure. Both sides compute in
 * float32 with different summation orders over at most 1152 products per output: about 1e-7 of
 * the range; 1e-5 still catches any real difference (a wrong BN epsilon alone gives ~1e-4). */
#define HEAD_NRMSE_MAX 1e-5
/* The reference detections are printed with 4 decimals (prob) and 2 (pixels). */
#define PROB_TOL 2e-4
#define PX_TOL 0.02

static gr_model *load_shapes(void)
{
    gr_model *model = NULL;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine *build_cpu_fp32(gr_model **model)
{
    *model = load_shapes();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(*model, &eo, &engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

static void run_on_image(gr_engine *engine, gr_image **im)
{
    ck_assert_int_eq(gr_image_load(IMAGE, im), GR_OK);
    float *input = malloc(3 * 160 * 160 * sizeof *input);
    ck_assert_ptr_nonnull(input);
    ck_assert_int_eq(gr_image_letterbox(*im, 160, 160, input), GR_OK);
    ck_assert_int_eq(gr_engine_run_f32(engine, input), GR_OK);
    free(input);
}

START_TEST(bundled_weights_are_trained)
{
    gr_model *model = load_shapes();
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    ck_assert_int_eq(info.synthetic_weights, 0);
    ck_assert_int_eq(info.width, 160);
    ck_assert_int_eq(info.classes, 5);
    ck_assert_str_eq(gr_model_class_name(model, 4), "cross");
    gr_model_destroy(model);
    /* Other weights named explicitly win; a missing file is an I/O error naming it. */
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    mo.weights_path = "tests/data/no-such.weights";
    ck_assert_int_eq(gr_model_load(&mo, &model), GR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "no-such.weights"));
}
END_TEST

START_TEST(head_matches_pytorch)
{
    gr_model *model = NULL;
    gr_engine *engine = build_cpu_fp32(&model);
    gr_image *im = NULL;
    run_on_image(engine, &im);
    float *ref = NULL;
    int dims[4], ndim = 0;
    ck_assert_int_eq(gr_npy_read(HEAD_REF, &ref, dims, &ndim, 4), GR_OK);
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(engine, 0, &d), GR_OK);
    ck_assert_int_eq(ndim, 4);
    ck_assert(dims[0] == 1 && dims[1] == d.c && dims[2] == d.h && dims[3] == d.w);
    const float *out = NULL;
    ck_assert_int_eq(gr_engine_output(engine, 0, &out), GR_OK);
    size_t n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    double se = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double e = (double)out[i] - (double)ref[i];
        se += e * e;
        lo = fmin(lo, (double)ref[i]);
        hi = fmax(hi, (double)ref[i]);
    }
    double nrmse = sqrt(se / (double)n) / (hi - lo);
    printf("shapes head vs PyTorch: NRMSE %.3g (range %.3g)\n", nrmse, hi - lo);
    ck_assert_msg(nrmse <= HEAD_NRMSE_MAX, "NRMSE %g > %g", nrmse, HEAD_NRMSE_MAX);
    free(ref);
    gr_image_destroy(im);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

START_TEST(detections_match_pytorch)
{
    gr_model *model = NULL;
    gr_engine *engine = build_cpu_fp32(&model);
    gr_image *im = NULL;
    run_on_image(engine, &im);
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    opt.image_w = im->w;
    opt.image_h = im->h;
    gr_detection *dets = NULL;
    int n = 0;
    ck_assert_int_eq(gr_engine_detect(engine, 0, &opt, &dets, &n), GR_OK);
    FILE *f = fopen(DETS_REF, "r");
    ck_assert_ptr_nonnull(f);
    char name[64];
    double prob, box[4];
    int k = 0;
    while (fscanf(f, "%63s %lf %lf %lf %lf %lf", name, &prob, &box[0], &box[1], &box[2],
                  &box[3]) == 6) {
        ck_assert_msg(k < n, "graphrun found %d detections, PyTorch more", n);
        ck_assert_str_eq(gr_model_class_name(model, dets[k].class_id), name);
        ck_assert_double_eq_tol((double)dets[k].prob, prob, PROB_TOL);
        ck_assert_double_eq_tol((double)dets[k].left, box[0], PX_TOL);
        ck_assert_double_eq_tol((double)dets[k].top, box[1], PX_TOL);
        ck_assert_double_eq_tol((double)dets[k].right, box[2], PX_TOL);
        ck_assert_double_eq_tol((double)dets[k].bottom, box[3], PX_TOL);
        k++;
    }
    fclose(f);
    ck_assert_int_eq(k, n);
    printf("shapes detections vs PyTorch: %d of %d equal\n", k, n);
    gr_detections_free(dets);
    gr_image_destroy(im);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

static Suite *shapes_suite(void)
{
    Suite *s = suite_create("shapes");
    TCase *tc = tcase_create("shapes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bundled_weights_are_trained);
    tcase_add_test(tc, head_matches_pytorch);
    tcase_add_test(tc, detections_match_pytorch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(shapes_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
