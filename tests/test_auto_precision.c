/* Check suite for mixed precision on the CPU engine: the explicit per-layer map
 * (gr_engine_options.layer_precision) and the automatic search (GR_PREC_AUTO, max_nrmse) on the
 * bundled trained model `shapes`.
 *
 * The error of a map is measured here independently of the search, through the public API: a CPU
 * engine with that explicit map against the CPU fp32 engine on the same calibration images, per
 * image and output NRMSE = sqrt(mean((x - y)^2)) / (max(y) - min(y)), max over both. The search
 * uses the planner's fp32 plan as its reference where the fp32 engine runs the reference executor:
 * both compute the same float32 values in different summation orders, about 1e-7 of the range
 * apart, so the two measures agree to ERROR_SLACK.
 * Four calibration images keep the searches (each up to ~25 emulated runs per image) short. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "tests/support/plan_nets.h"

#define N_IMAGES 4
#define SIDE 160
#define ERROR_SLACK 1e-5

static const char *const calib[] = {"data/shapes-calib/00.png", "data/shapes-calib/01.png",
                                    "data/shapes-calib/02.png", "data/shapes-calib/03.png", NULL};

static gr_model *load_shapes(void)
{
    gr_model *model = NULL;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static gr_engine_options cpu_options(gr_precision prec)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = prec;
    eo.calib_images = calib;
    return eo;
}

static gr_engine *build(const gr_model *model, const gr_engine_options *eo)
{
    gr_engine *e = NULL;
    gr_status st = gr_engine_build(model, eo, &e);
    ck_assert_msg(st == GR_OK, "build: %s", gr_last_error());
    return e;
}

/* Output k of every calibration image (u8 letterbox, as the engine's input), concatenated. */
static float *run_all(gr_engine *e, size_t *per_image)
{
    size_t n = 0;
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, 0, &d), GR_OK);
    ck_assert_int_eq(gr_engine_output_count(e), 1); /* shapes has one yolo head */
    n = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    float *all = malloc(n * N_IMAGES * sizeof *all);
    uint8_t *u8 = malloc(3 * SIDE * SIDE);
    ck_assert(all && u8);
    for (int i = 0; i < N_IMAGES; i++) {
        gr_image *im = NULL;
        ck_assert_int_eq(gr_image_load(calib[i], &im), GR_OK);
        ck_assert_int_eq(gr_image_letterbox_u8(im, SIDE, SIDE, u8), GR_OK);
        gr_image_destroy(im);
        ck_assert_msg(gr_engine_run_u8(e, u8) == GR_OK, "%s", gr_last_error());
        const float *out = NULL;
        ck_assert_int_eq(gr_engine_output(e, 0, &out), GR_OK);
        memcpy(all + (size_t)i * n, out, n * sizeof *out);
    }
    free(u8);
    *per_image = n;
    return all;
}

static double max_nrmse(const float *x, const float *y, size_t n)
{
    double worst = 0.0;
    for (int i = 0; i < N_IMAGES; i++) {
        const float *a = x + (size_t)i * n, *b = y + (size_t)i * n;
        double sq = 0.0, lo = INFINITY, hi = -INFINITY;
        for (size_t k = 0; k < n; k++) {
            double d = (double)a[k] - (double)b[k];
            sq += d * d;
            lo = fmin(lo, (double)b[k]);
            hi = fmax(hi, (double)b[k]);
        }
        double e = sqrt(sq / (double)n) / (hi > lo ? hi - lo : 1.0);
        worst = fmax(worst, e);
    }
    return worst;
}

static float *fp32_outputs(const gr_model *model, size_t *n)
{
    gr_engine_options eo = cpu_options(GR_PREC_FP32);
    gr_engine *e = build(model, &eo);
    float *out = run_all(e, n);
    gr_engine_destroy(e);
    return out;
}

/* The error of an explicit map (n_layers entries), measured through the engine. */
static double map_error(const gr_model *model, const gr_precision *map, int n_layers,
                        const float *reference)
{
    gr_engine_options eo = cpu_options(GR_PREC_FP32);
    eo.layer_precision = map;
    eo.n_layer_precision = n_layers;
    gr_engine *e = build(model, &eo);
    size_t n;
    float *out = run_all(e, &n);
    double err = max_nrmse(out, reference, n);
    free(out);
    gr_engine_destroy(e);
    return err;
}

static int n_layers_of(const gr_model *model)
{
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    return info.n_layers;
}

/* Build an auto engine with this budget; its map copied to `map`; returns its fp16 layers. */
static int auto_map(const gr_model *model, float budget, gr_precision *map, char *notice,
                    size_t len)
{
    gr_engine_options eo = cpu_options(GR_PREC_AUTO);
    eo.max_nrmse = budget;
    gr_engine *e = build(model, &eo);
    int n = 0;
    const gr_precision *m = gr_engine_layer_precision(e, &n);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(n, n_layers_of(model));
    memcpy(map, m, (size_t)n * sizeof *map);
    if (notice)
        snprintf(notice, len, "%s", gr_engine_notice(e));
    ck_assert_msg(strstr(gr_engine_notice(e), "precision map:") != NULL, "notice: %s",
                  gr_engine_notice(e));
    gr_engine_destroy(e);
    int fp16 = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(map[i] == GR_PREC_INT8 || map[i] == GR_PREC_FP16 || map[i] == GR_PREC_FP32,
                      "layer %d precision %d", i, (int)map[i]);
        fp16 += map[i] == GR_PREC_FP16;
    }
    return fp16;
}

static gr_precision *uniform_map(int n, gr_precision p)
{
    gr_precision *m = malloc((size_t)n * sizeof *m);
    ck_assert_ptr_nonnull(m);
    for (int i = 0; i < n; i++)
        m[i] = p;
    return m;
}

/* A uniform explicit map is the uniform engine, bit for bit (same plan, same ranges). */
START_TEST(uniform_explicit_map_equals_uniform_engine)
{
    gr_model *model = load_shapes();
    int n = n_layers_of(model);
    static const gr_precision precs[] = {GR_PREC_INT8, GR_PREC_FP16};
    for (int k = 0; k < 2; k++) {
        gr_engine_options eo = cpu_options(precs[k]);
        gr_engine *uniform = build(model, &eo);
        gr_precision *map = uniform_map(n, precs[k]);
        eo = cpu_options(GR_PREC_FP32);
        eo.layer_precision = map;
        eo.n_layer_precision = n;
        gr_engine *mapped = build(model, &eo);
        size_t elems;
        float *a = run_all(uniform, &elems), *b = run_all(mapped, &elems);
        ck_assert_msg(memcmp(a, b, elems * N_IMAGES * sizeof *a) == 0, "%s map differs",
                      gr_precision_name(precs[k]));
        int count = 0;
        const gr_precision *view = gr_engine_layer_precision(mapped, &count);
        ck_assert_int_eq(count, n);
        ck_assert_int_eq(view[0], precs[k]); /* layer 0 is a conv */
        free(a);
        free(b);
        free(map);
        gr_engine_destroy(uniform);
        gr_engine_destroy(mapped);
    }
    gr_model_destroy(model);
}
END_TEST

/* Mixed maps in both directions (int8 -> fp16 and fp16 -> int8 boundaries, a fp16 maxpool
 * between int8 convs) run, and land between all-int8 and fp32 in error: they are neither broken
 * (an error near the output's range) nor silently all-fp32 (error 0). */
START_TEST(mixed_maps_run_with_sane_error)
{
    gr_model *model = load_shapes();
    int n = n_layers_of(model);
    size_t elems;
    float *ref = fp32_outputs(model, &elems);
    gr_precision *map = uniform_map(n, GR_PREC_INT8);
    double e_int8 = map_error(model, map, n, ref);
    for (int i = 0; i < n; i++)
        map[i] = i % 4 < 2 ? GR_PREC_FP16 : GR_PREC_INT8; /* conv, pool fp16; next pair int8 */
    double e_mixed = map_error(model, map, n, ref);
    map[1] = GR_PREC_INT8; /* a pool in another precision than its conv: not fused, converted */
    map[3] = GR_PREC_FP16; /* and a pool in fp16 after an int8 conv */
    double e_mixed2 = map_error(model, map, n, ref);
    /* int8 on this trained model is below 2% of the output range (compare shows ~0.6%). */
    ck_assert_msg(e_int8 > 0.0 && e_int8 < 0.02, "all-int8 error %g", e_int8);
    ck_assert_msg(e_mixed > 0.0 && e_mixed < 0.02, "mixed error %g", e_mixed);
    ck_assert_msg(e_mixed2 > 0.0 && e_mixed2 < 0.02, "mixed error %g", e_mixed2);
    free(map);
    free(ref);
    gr_model_destroy(model);
}
END_TEST

/* The chosen map meets its budget (measured independently), and a tighter budget never gives
 * fewer fp16 layers: loose = twice the all-int8 error (all int8 qualifies, so no fp16 layer),
 * tight = half of it (all int8 fails, so at least one fp16 layer). */
START_TEST(budget_is_met_and_tighter_means_more_fp16)
{
    gr_model *model = load_shapes();
    int n = n_layers_of(model);
    size_t elems;
    float *ref = fp32_outputs(model, &elems);
    gr_precision *int8 = uniform_map(n, GR_PREC_INT8);
    double e_int8 = map_error(model, int8, n, ref);
    ck_assert(e_int8 > 0.0);
    gr_precision *map = malloc((size_t)n * sizeof *map);
    ck_assert_ptr_nonnull(map);
    float loose = (float)(2.0 * e_int8), tight = (float)(0.5 * e_int8);
    int fp16_loose = auto_map(model, loose, map, NULL, 0);
    ck_assert_int_eq(fp16_loose, 0);
    double e_loose = map_error(model, map, n, ref);
    ck_assert_msg(e_loose <= (double)loose + ERROR_SLACK, "loose: %g > %g", e_loose,
                  (double)loose);
    char notice[2048];
    int fp16_tight = auto_map(model, tight, map, notice, sizeof notice);
    ck_assert_msg(fp16_tight >= 1 && fp16_tight >= fp16_loose, "tight: %d fp16 layers",
                  fp16_tight);
    double e_tight = map_error(model, map, n, ref);
    ck_assert_msg(e_tight <= (double)tight + ERROR_SLACK, "tight: %g > %g (%s)", e_tight,
                  (double)tight, notice);
    ck_assert_msg(strstr(notice, "fp16") != NULL, "%s", notice);
    free(map);
    free(int8);
    free(ref);
    gr_model_destroy(model);
}
END_TEST

/* Budget 0: fp16 rounding alone gives a non-zero error, so even all fp16 exceeds it; the rule
 * falls back to all fp16 and says so. */
START_TEST(budget_zero_falls_back_to_all_fp16)
{
    gr_model *model = load_shapes();
    int n = n_layers_of(model);
    gr_precision *map = malloc((size_t)n * sizeof *map);
    ck_assert_ptr_nonnull(map);
    char notice[2048];
    auto_map(model, 0.0f, map, notice, sizeof notice);
    gr_model_info info;
    gr_model_get_info(model, &info);
    for (int i = 0; i < n; i++)
        ck_assert_msg(map[i] != GR_PREC_INT8, "layer %d is int8", i);
    ck_assert_int_eq(map[0], GR_PREC_FP16);
    ck_assert_msg(strstr(notice, "even all fp16 exceeds the budget") != NULL, "%s", notice);
    free(map);
    gr_model_destroy(model);
}
END_TEST

START_TEST(bad_options_are_refused_with_a_message)
{
    gr_model *model = load_shapes();
    int n = n_layers_of(model);
    gr_precision *map = uniform_map(n, GR_PREC_FP16);
    gr_engine *e = NULL;
    gr_engine_options eo = cpu_options(GR_PREC_FP32);
    eo.layer_precision = map;

    eo.n_layer_precision = n - 1; /* wrong count */
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), "entries") && !strchr(gr_last_error(), '\n'), "%s",
                  gr_last_error());

    eo.n_layer_precision = n;
    map[3] = (gr_precision)7; /* not a precision */
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "layer_precision[3]"), "%s", gr_last_error());
    map[3] = GR_PREC_AUTO; /* auto is for the whole engine, not a layer */
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    map[3] = GR_PREC_FP16;

    eo.precision = GR_PREC_AUTO; /* both at once */
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "exclude"), "%s", gr_last_error());

    eo = cpu_options(GR_PREC_FP16);
    eo.n_layer_precision = n; /* a count without a map */
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);

    eo = cpu_options(GR_PREC_AUTO);
    eo.max_nrmse = -0.5f;
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "max_nrmse"), "%s", gr_last_error());
    eo.max_nrmse = NAN;
    ck_assert_int_eq(gr_engine_build(model, &eo, &e), GR_ERR_INVALID_ARGUMENT);

    const char *const missing[] = {"data/shapes-calib/no-such.png", NULL};
    eo = cpu_options(GR_PREC_AUTO);
    eo.calib_images = missing;
    ck_assert_int_ne(gr_engine_build(model, &eo, &e), GR_OK);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), "no-such.png"), "%s", gr_last_error());

    gr_precision p;
    ck_assert_int_eq(gr_precision_parse("auto", &p), GR_OK);
    ck_assert_int_eq(p, GR_PREC_AUTO);
    ck_assert_str_eq(gr_precision_name(GR_PREC_AUTO), "auto");
    free(map);
    gr_model_destroy(model);
}
END_TEST

/* Mixed maps on DAGs (route/concat, upsample, shortcut, reorg, several heads) through the planner:
 * every plan builds, runs in its arena and gives finite outputs; on yolov3-tiny (128x128) a map
 * alternating int8 and fp16 convs converts between them (convert nodes) and stays within the
 * int8 bound of test_planner_exec (rms error <= 0.2 of the fp32 output's rms: int8 with max
 * calibration on synthetic weights loses a few % per layer; a wrong scale, layout or channel
 * mapping at a precision boundary gives errors of order 1). */
static gr_plan *mixed_plan(const gr_net *net, const gr_precision *map)
{
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.precision = GR_PREC_INT8;
    po.layer_precision = map;
    po.n_layer_precision = net->n_layers;
    po.input_u8 = 0;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &po, &p) == GR_OK, "%s", gr_last_error());
    return p;
}

static float *plan_output(const gr_plan *p, const float *input, int k, size_t *n)
{
    gr_plan_exec *ex = NULL;
    ck_assert_int_eq(gr_plan_exec_create(p, 0, &ex), GR_OK);
    ck_assert_msg(gr_plan_execute(ex, input) == GR_OK, "%s", gr_last_error());
    const gr_plan_tensor *t = &p->tensors[p->output_tensors[k]];
    *n = (size_t)t->n * t->c * t->h * t->w;
    float *out = malloc(*n * sizeof *out);
    ck_assert_ptr_nonnull(out);
    memcpy(out, gr_plan_exec_output(ex, k), *n * sizeof *out);
    gr_plan_exec_destroy(ex);
    return out;
}

static float *smooth_image(const gr_net *net, uint64_t seed)
{
    size_t n = (size_t)net->c * net->h * net->w;
    float *f = malloc(n * sizeof *f);
    ck_assert_ptr_nonnull(f);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f[i] = 0.5f + 0.3f * sinf((float)i * 0.01f) + 0.2f * (float)(x % 1000) / 1000.0f - 0.1f;
    }
    return f;
}

START_TEST(mixed_maps_on_dags_plan_and_run)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        gr_net *net = NULL;
        ck_assert_int_eq(gr_test_random_net(seed, &net), GR_OK);
        gr_precision *map = malloc((size_t)net->n_layers * sizeof *map);
        ck_assert_ptr_nonnull(map);
        uint64_t bits = seed * 0x2545F4914F6CDD1Dull;
        for (int i = 0; i < net->n_layers; i++)
            map[i] = (bits >> (i % 61)) & 1 ? GR_PREC_FP16 : GR_PREC_INT8;
        gr_plan *p = mixed_plan(net, map);
        float *f = smooth_image(net, seed);
        ck_assert_int_eq(gr_plan_calibrate(p, net, f, 1, GR_CALIB_MAX, 0.0f), GR_OK);
        for (int k = 0; k < p->n_outputs; k++) {
            size_t n;
            float *out = plan_output(p, f, k, &n);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(isfinite(out[i]), "seed %llu output %d [%zu] = %g",
                              (unsigned long long)seed, k, i, (double)out[i]);
            free(out);
        }
        free(f);
        free(map);
        gr_plan_free(p);
        gr_net_free(net);
    }

    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at("yolov3-tiny.cfg", 128, &net), GR_OK);
    gr_precision *map = malloc((size_t)net->n_layers * sizeof *map);
    ck_assert_ptr_nonnull(map);
    int conv = 0;
    for (int i = 0; i < net->n_layers; i++) {
        if (net->layers[i].p.op == GR_OP_CONV)
            conv++;
        map[i] = conv % 2 ? GR_PREC_INT8 : GR_PREC_FP16;
    }
    gr_plan *p = mixed_plan(net, map);
    ck_assert_int_gt(gr_plan_count_kind(p, GR_NODE_CONVERT), 0);
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.input_u8 = 0;
    gr_plan *p32 = NULL;
    ck_assert_int_eq(gr_plan_build(net, &po, &p32), GR_OK);
    float *f = smooth_image(net, 7);
    ck_assert_int_eq(gr_plan_calibrate(p, net, f, 1, GR_CALIB_MAX, 0.0f), GR_OK);
    for (int k = 0; k < p->n_outputs; k++) {
        size_t n, n32;
        float *x = plan_output(p, f, k, &n), *y = plan_output(p32, f, k, &n32);
        ck_assert_uint_eq(n, n32);
        double sq = 0.0, ref = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)x[i] - (double)y[i];
            sq += d * d;
            ref += (double)y[i] * (double)y[i];
        }
        double rel = sqrt(sq / (ref > 0.0 ? ref : 1.0));
        printf("yolov3-tiny mixed head %d: rms error %.4f of fp32\n", k, rel);
        ck_assert_msg(rel > 0.0 && rel <= 0.2, "head %d: rms error %g", k, rel);
        free(x);
        free(y);
    }
    free(f);
    free(map);
    gr_plan_free(p);
    gr_plan_free(p32);
    gr_net_free(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("auto_precision");
    TCase *tc = tcase_create("auto_precision");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bad_options_are_refused_with_a_message);
    tcase_add_test(tc, uniform_explicit_map_equals_uniform_engine);
    tcase_add_test(tc, mixed_maps_run_with_sane_error);
    tcase_add_test(tc, mixed_maps_on_dags_plan_and_run);
    tcase_add_test(tc, budget_is_met_and_tighter_means_more_fp16);
    tcase_add_test(tc, budget_zero_falls_back_to_all_fp16);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
