/* graphrun's CPU reference against AlexeyAB Darknet's own CPU build (commit 59596d78) on the four
 * built-in AlexeyAB models: yolov4-tiny, yolov7-tiny (new_coords, diounms), yolov4 (mish,
 * scale_x_y 1.2/1.1/1.05, greedynms) and yolov4-csp (new_coords, diounms, mish), and on a small
 * test net of [sam] and [scale_channels] layers (tests/data/alexeyab/sam-scale.cfg). The records in
 * tests/data/alexeyab/<model>-<size>.txt were printed by tests/alexeyab/driver.c (linked against
 * AlexeyAB's objects) on the built-in cfg at that input size with graphrun's synthetic weights
 * (seed 1) and the dead-leaves picture of tests/alexeyab/record_input.h, which both sides
 * include; tests/data/alexeyab/README.md has the commands. yolov4 and yolov4-csp run at 160 x 160,
 * not their 608 / 512, to keep this test a few seconds (the arithmetic per layer does not depend
 * on the size; the cfg's width/height are the only lines changed, on both sides).
 *
 * Checks, per head (the yolo layer's input, "raw", and its output, "act", which graphrun computes
 * with ops/yolo.c's reference from the raw head):
 *   - shape equal;
 *   - NRMSE over the recorded samples (every n/400-th value) <= NRMSE_MAX, RMSE divided by the
 *     reference tensor's range;
 *   - the full tensor's mean, RMS, min and max each within NRMSE_MAX times the range;
 * and the detections after NMS (the last yolo layer's nms_kind, as test_detector): the same
 * count, and each reference detection matched by one of graphrun's of the same class with prob
 * within PROB_TOL and corners within BOX_TOL_PX (graphrun's boxes are clipped to the image as its
 * API returns them; the reference's are clipped the same way here).
 *
 * The bounds are the record's printing, not an arithmetic difference: graphrun's reference does
 * AlexeyAB's arithmetic operation for operation (the convolution's summation order is gemm_nn's;
 * batch norm folded into the weights as its fuse_conv_batchnorm does; the conv's leaky in
 * double, every other leaky and every logistic in float, as its gemm.c and activations.h do:
 * ops/conv.c, ops/ops.c), so the heads agree to the 9 significant digits the driver prints
 * (measured: <= 3e-10 on every head of the five nets; every detection of the four models equal).
 * That holds against AlexeyAB's source built without fast-math (make OPTS=-O2): its Makefile's
 * -Ofast lets the compiler call glibc's vector expf/logf, a few ulps from the scalar ones, and
 * that build differs from its own -O2 build by up to 2.8e-5 on yolov4's heads (mish), 9.5e-6 on
 * yolov4-csp's and 1.8e-9 on yolov4-tiny's (the yolo logistic), detections equal. One operation
 * done another way fails this test by far (first heads, measured): the conv's leaky in float
 * (AlexeyAB's AVX2 build does that) 4.5e-7 on yolov4-tiny, 1.1e-6 on yolov7-tiny and yolov4;
 * batch norm applied after the convolution instead of folded into its weights 7.6e-7 on
 * yolov4-tiny, 1.3e-6 on yolov7-tiny, 1.6e-5 on yolov4, 3.7e-8 on the small test net.
 *
 * `test_alexeyab --write-weights MODEL SIZE CFG_OUT WEIGHTS_OUT` writes the sized cfg and the
 * synthetic weights the driver reads; `test_alexeyab --walk CFG...` parses each cfg and prints
 * what the parser says (tests/data/alexeyab/cfg_walk.txt). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "graphrun/runtime.h"
#include "models/net.h"
#include "ops/ops.h"
#include "runtime/detect.h"
#include "tests/alexeyab/record_input.h"

#define MAX_HEADS 4
#define MAX_SAMPLES 1024
#define MAX_DETS 4096
#define NRMSE_MAX 1e-8
#define PROB_TOL 1e-6f
#define BOX_TOL_PX 1e-3f

typedef struct tensor_record {
    int layer, c, h, w;
    size_t n;
    double sum, sumsq, lo, hi;
    int n_samples;
    size_t index[MAX_SAMPLES];
    double value[MAX_SAMPLES];
} tensor_record;

typedef struct det_record {
    int class_id;
    double prob, x, y, w, h;
} det_record;

typedef struct record {
    tensor_record raw[MAX_HEADS], act[MAX_HEADS];
    int n_heads;
    det_record dets[MAX_DETS];
    int n_dets;
    int image_w, image_h, letter_box; /* a photo's record: its "image" line */
} record;

typedef struct model_case {
    const char *name;
    int size;
    float thresh, nms;
    bool dets; /* compare detections (the test net's record keeps none) */
} model_case;

/* Thresholds that leave tens to hundreds of detections (62, 49, 221, 29): the synthetic heads
 * on the dead-leaves picture are as unsaturated as a trained net's, so no detections tie at
 * probability 1 (which Darknet's qsort would order arbitrarily before NMS). */
static const model_case cases[] = {
    {"yolov4-tiny", 416, 0.25f, 0.45f, true},
    {"yolov7-tiny", 416, 0.1f, 0.45f, true},
    {"yolov4", 160, 0.5f, 0.45f, true},
    {"yolov4-csp", 160, 0.25f, 0.45f, true},
    /* A test net (tests/data/alexeyab/sam-scale.cfg) whose three heads are the outputs of [sam],
     * [scale_channels] and [scale_channels] scale_wh=1 themselves, after two or three convs: a
     * wrong channel, position or operand gives errors of order 1e-1. Its record keeps the heads'
     * inputs only (48 samples of each), to stay a few KB; the yolo activation is the built-ins'
     * business. */
    {"sam-scale", 16, 0.5f, 0.45f, false},
};


/* The cfg of `model` (a built-in in models/, else a test net in tests/data/alexeyab/) with its
 * [net] width and height set to `size` (and letter_box=1 added after them when `letter_box`):
 * written to `path`. No Check asserts here: --write-weights runs it outside a test. */
static bool write_sized_cfg(const char *model, int size, bool letter_box, const char *path)
{
    char src[256];
    snprintf(src, sizeof src, "models/%s.cfg", model);
    FILE *in = fopen(src, "r");
    if (!in) {
        snprintf(src, sizeof src, "tests/data/alexeyab/%s.cfg", model);
        in = fopen(src, "r");
    }
    FILE *out = fopen(path, "w");
    int replaced = 0;
    char line[4096];
    while (in && out && fgets(line, sizeof line, in)) {
        if (replaced < 2 && (strncmp(line, "width=", 6) == 0 || strncmp(line, "height=", 7) == 0)) {
            fprintf(out, "%.*s=%d\n", (int)strcspn(line, "="), line, size);
            if (++replaced == 2 && letter_box)
                fputs("letter_box=1\n", out);
        } else {
            fputs(line, out);
        }
    }
    bool ok = in && out && replaced == 2;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "test_alexeyab: cannot write %s from %s (width/height lines)\n", path,
                src);
    return ok;
}

static tensor_record *tensor_of(record *r, int k, const char *kind)
{
    ck_assert_msg(k >= 0 && k < MAX_HEADS, "head %d out of range", k);
    return strcmp(kind, "raw") == 0 ? &r->raw[k] : &r->act[k];
}

static void parse_line(record *r, const char *line, const char *path)
{
    int k, layer, c, h, w;
    char kind[8];
    size_t n, idx;
    double a, b, lo, hi, v;
    det_record d;
    if (sscanf(line, "head %d %d %d %d %d %7s %zu %lf %lf %lf %lf", &k, &layer, &c, &h, &w, kind,
               &n, &a, &b, &lo, &hi) == 11) {
        tensor_record *t = tensor_of(r, k, kind);
        *t = (tensor_record){layer, c, h, w, n, a, b, lo, hi, 0, {0}, {0}};
        r->n_heads = k + 1 > r->n_heads ? k + 1 : r->n_heads;
    } else if (sscanf(line, "sample %d %7s %zu %lf", &k, kind, &idx, &v) == 4) {
        tensor_record *t = tensor_of(r, k, kind);
        ck_assert_int_lt(t->n_samples, MAX_SAMPLES);
        t->index[t->n_samples] = idx;
        t->value[t->n_samples++] = v;
    } else if (sscanf(line, "image %d %d %d", &r->image_w, &r->image_h, &r->letter_box) == 3) {
    } else if (sscanf(line, "det %d %lf %lf %lf %lf %lf", &d.class_id, &d.prob, &d.x, &d.y, &d.w,
                      &d.h) == 6) {
        ck_assert_int_lt(r->n_dets, MAX_DETS);
        r->dets[r->n_dets++] = d;
    } else if (line[0] != '#' && line[0] != '\n') {
        ck_abort_msg("%s: unreadable line '%s'", path, line);
    }
}

static record *read_record(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    record *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    char line[512];
    while (fgets(line, sizeof line, f))
        parse_line(r, line, path);
    fclose(f);
    ck_assert_msg(r->n_heads > 0 || r->image_w > 0, "%s: no heads and no image", path);
    return r;
}

/* Compare one tensor with its record; `what` names it in failures. */
static void check_tensor(const tensor_record *t, const float *v, int c, int h, int w,
                         double nrmse_max, const char *what)
{
    ck_assert_msg(t->c == c && t->h == h && t->w == w, "%s: shape %dx%dx%d, AlexeyAB %dx%dx%d",
                  what, c, h, w, t->c, t->h, t->w);
    size_t n = (size_t)c * h * w;
    double range = t->hi - t->lo, sq = 0;
    ck_assert_msg(range > 0, "%s: constant reference tensor", what);
    for (int i = 0; i < t->n_samples; i++) {
        ck_assert_msg(t->index[i] < n, "%s: sample index %zu", what, t->index[i]);
        double d = (double)v[t->index[i]] - t->value[i];
        sq += d * d;
    }
    double nrmse = sqrt(sq / t->n_samples) / range;
    printf("%s: NRMSE %.3g over %d samples\n", what, nrmse, t->n_samples);
    fflush(stdout); /* bench/alexeyab.py reads these lines, also from a run cut short */
    ck_assert_msg(nrmse <= nrmse_max, "%s: NRMSE %.3g over %d samples (limit %g)", what, nrmse,
                  t->n_samples, nrmse_max);
    double sum = 0, sumsq = 0, lo = v[0], hi = v[0];
    for (size_t i = 0; i < n; i++) {
        sum += (double)v[i];
        sumsq += (double)v[i] * (double)v[i];
        lo = fmin(lo, (double)v[i]);
        hi = fmax(hi, (double)v[i]);
    }
    double tol = nrmse_max * range;
    ck_assert_msg(fabs(sum / n - t->sum / n) <= tol, "%s: mean %.9g, AlexeyAB %.9g", what,
                  sum / n, t->sum / n);
    ck_assert_msg(fabs(sqrt(sumsq / n) - sqrt(t->sumsq / n)) <= tol,
                  "%s: RMS %.9g, AlexeyAB %.9g", what, sqrt(sumsq / n), sqrt(t->sumsq / n));
    ck_assert_msg(fabs(lo - t->lo) <= tol && fabs(hi - t->hi) <= tol,
                  "%s: range [%.9g, %.9g], AlexeyAB [%.9g, %.9g]", what, lo, hi, t->lo, t->hi);
}

/* The reference detections as graphrun's API returns boxes: corners in pixels of the w x h
 * image (the network's input for the dead-leaves picture), clipped. */
static gr_detection *reference_dets(const record *r, int net_w, int net_h)
{
    gr_detection *d = calloc((size_t)r->n_dets + 1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (int i = 0; i < r->n_dets; i++) {
        const det_record *e = &r->dets[i];
        d[i].left = (float)((e->x - e->w / 2.) * net_w);
        d[i].right = (float)((e->x + e->w / 2.) * net_w);
        d[i].top = (float)((e->y - e->h / 2.) * net_h);
        d[i].bottom = (float)((e->y + e->h / 2.) * net_h);
        d[i].class_id = e->class_id;
        d[i].prob = (float)e->prob;
    }
    gr_detections_clip(d, r->n_dets, net_w, net_h);
    return d;
}

static bool same_det(const gr_detection *a, const gr_detection *b, float box_tol)
{
    return a->class_id == b->class_id && fabsf(a->prob - b->prob) <= PROB_TOL &&
           fabsf(a->left - b->left) <= box_tol && fabsf(a->right - b->right) <= box_tol &&
           fabsf(a->top - b->top) <= box_tol && fabsf(a->bottom - b->bottom) <= box_tol;
}

/* The detections of the engine's last run (image_w x image_h: boxes in its pixels; 0: the
 * network's) against the record's: the same count, each matched. */
static void check_dets(const char *name, const record *r, const gr_engine *e, float thresh,
                       float nms, int image_w, int image_h, float box_tol)
{
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    opt.thresh = thresh;
    opt.nms = nms;
    opt.image_w = image_w;
    opt.image_h = image_h;
    gr_detection *got = NULL;
    int n = 0;
    ck_assert_msg(gr_engine_detect(e, 0, &opt, &got, &n) == GR_OK, "%s", gr_last_error());
    gr_model_info info;
    gr_model_get_info(gr_engine_model(e), &info);
    gr_detection *want = reference_dets(r, image_w ? image_w : info.width,
                                        image_h ? image_h : info.height);
    ck_assert_msg(n == r->n_dets, "%s: %d detections, AlexeyAB %d", name, n, r->n_dets);
    bool *used = calloc((size_t)n + 1, sizeof *used);
    ck_assert_ptr_nonnull(used);
    for (int i = 0; i < r->n_dets; i++) {
        int match = -1;
        for (int j = 0; j < n && match < 0; j++)
            if (!used[j] && same_det(&want[i], &got[j], box_tol))
                match = j;
        ck_assert_msg(match >= 0,
                      "%s: AlexeyAB detection %d (class %d prob %.6f box %.3f %.3f %.3f %.3f) "
                      "has no match in graphrun's",
                      name, i, want[i].class_id, (double)want[i].prob, (double)want[i].left,
                      (double)want[i].top, (double)want[i].right, (double)want[i].bottom);
        used[match] = true;
    }
    printf("%s detections: %d, AlexeyAB %d, all matched (class, prob within %g, corners within "
           "%g px)\n", name, n, r->n_dets, (double)PROB_TOL, (double)box_tol);
    free(used);
    free(want);
    gr_detections_free(got);
}

/* Parse the sized cfg again for the yolo layers' params (the act tensors' reference). */
static void check_heads(const model_case *mc, record *r, const gr_engine *e, const char *cfg)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse_file(cfg, &net) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_output_count(e), r->n_heads);
    for (int k = 0; k < r->n_heads; k++) {
        const tensor_record *t = &r->raw[k];
        const float *raw = NULL;
        ck_assert(gr_engine_output(e, k, &raw) == GR_OK);
        char what[96];
        snprintf(what, sizeof what, "%s head %d (layer %d) raw", mc->name, k, t->layer);
        check_tensor(t, raw, t->c, t->h, t->w, NRMSE_MAX, what);
        const gr_layer *yolo = &net->layers[t->layer];
        ck_assert_int_eq(yolo->p.op, GR_OP_YOLO);
        gr_shape s = yolo->out;
        float *act = malloc(gr_shape_elems(s) * sizeof *act);
        ck_assert_ptr_nonnull(act);
        gr_op_ref(&yolo->p, NULL, &raw, &s, 1, act, s, 1);
        snprintf(what, sizeof what, "%s head %d (layer %d) act", mc->name, k, t->layer);
        /* AlexeyAB's -Ofast build (finite-math-only) turns the logistic of a head value beyond
         * about +-88 into NaN where IEEE gives 0 or 1; synthetic yolov4's exploding heads have
         * such values, so its act tensors are skipped (their raw ones are compared). */
        if (r->act[k].n == 0)
            printf("%s: not recorded (the test net's record keeps the raw heads only)\n", what);
        else if (isnan(r->act[k].sum))
            printf("%s: skipped, AlexeyAB's tensor holds NaN\n", what);
        else
            check_tensor(&r->act[k], act, s.c, s.h, s.w, NRMSE_MAX, what);
        free(act);
    }
    gr_net_free(net);
}

/* The CPU engine of `model` at size x size (letter_box=1 added when asked), synthetic weights of
 * seed 1 as --write-weights makes them; the sized cfg's path into cfg (unlinked by the caller). */
static gr_engine *build_engine(const char *model, int size, bool letter_box, char *cfg,
                               gr_model **m_out)
{
    int fd = mkstemp(cfg);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(write_sized_cfg(model, size, letter_box, cfg));
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = cfg;
    mo.seed = 1;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    *m_out = m;
    return e;
}

static void run_case(const model_case *mc)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/alexeyab/%s-%d.txt", mc->name, mc->size);
    record *r = read_record(path);
    char cfg[] = "/tmp/gr_alexeyab_XXXXXX";
    gr_model *m = NULL;
    gr_engine *e = build_engine(mc->name, mc->size, false, cfg, &m);
    size_t n_in = (size_t)3 * mc->size * mc->size;
    float *input = malloc(n_in * sizeof *input);
    ck_assert_ptr_nonnull(input);
    record_input_fill(input, mc->size, mc->size);
    ck_assert_msg(gr_engine_run_f32(e, input) == GR_OK, "%s", gr_last_error());
    check_heads(mc, r, e, cfg);
    if (mc->dets)
        check_dets(mc->name, r, e, mc->thresh, mc->nms, 0, 0, BOX_TOL_PX);
    else
        printf("%s detections: not compared (the record keeps none)\n", mc->name);
    fflush(stdout);
    free(input);
    gr_engine_destroy(e);
    gr_model_destroy(m);
    unlink(cfg);
    free(r);
}

START_TEST(cpu_reference_matches_alexeyab)
{
    run_case(&cases[_i]);
}
END_TEST

/* Photos through test_detector's whole chain (tests/alexeyab/driver.c with a photo): AlexeyAB
 * stretches the photo to the network size (resize_image) unless the cfg's [net] sets letter_box,
 * and maps the boxes back accordingly. graphrun's CPU engine with its default preprocessing
 * (the cfg's: stretch, or letterbox with letter_box=1), fed by gr_engine_set_image, must give the
 * same detections in the photo's pixels. The records are the driver's on a PNG of graphrun's own
 * decode of each JPEG (test_alexeyab --write-png: stb_image and libjpeg-turbo decode JPEGs a few
 * levels apart), so the two sides see the same pixels; they differ then only in the 9 digits the
 * record prints: corners within PHOTO_BOX_TOL_PX. Letterboxing where AlexeyAB stretches (or the
 * other way round, or the wrong box correction) moves boxes by tens of pixels and changes the
 * detections. Non-square photos, so the two differ. */
#define PHOTO_BOX_TOL_PX 0.01f
typedef struct photo_case {
    const char *model;
    int size;
    float thresh;
    const char *photo; /* data/<photo>.jpg */
    bool letter_box;
} photo_case;

/* 320 x 320 to keep the test short; thresholds that keep 15 to 74 detections (records of 1 to
 * 5 KB). */
static const photo_case photo_cases[] = {
    {"yolov4-tiny", 320, 0.25f, "dog", false},
    {"yolov4-tiny", 320, 0.25f, "eagle", false},
    {"yolov4-tiny", 320, 0.3f, "person", false},
    {"yolov7-tiny", 320, 0.15f, "dog", false},
    {"yolov7-tiny", 320, 0.25f, "horses", false},
    {"yolov7-tiny", 320, 0.35f, "person", false},
    {"yolov4-tiny", 320, 0.25f, "horses", true},
    {"yolov7-tiny", 320, 0.15f, "eagle", true},
};

static void photo_record_path(const photo_case *pc, char *path, size_t len)
{
    snprintf(path, len, "tests/data/alexeyab/photo-%s-%d-%s%s.txt", pc->model, pc->size,
             pc->photo, pc->letter_box ? "-letterbox" : "");
}

START_TEST(photos_match_alexeyab_detector_test)
{
    const photo_case *pc = &photo_cases[_i];
    char path[256], name[128];
    photo_record_path(pc, path, sizeof path);
    snprintf(name, sizeof name, "%s %s%s", pc->model, pc->photo,
             pc->letter_box ? " letter_box=1" : "");
    record *r = read_record(path);
    char cfg[] = "/tmp/gr_alexeyab_XXXXXX";
    gr_model *m = NULL;
    gr_engine *e = build_engine(pc->model, pc->size, pc->letter_box, cfg, &m);
    gr_preprocess want = pc->letter_box ? GR_PREPROCESS_LETTERBOX : GR_PREPROCESS_STRETCH;
    ck_assert_msg(gr_model_preprocess(m) == want && gr_model_preprocess(gr_engine_model(e)) == want,
                  "%s: preprocessing %s, AlexeyAB's %s", name,
                  gr_preprocess_name(gr_model_preprocess(m)), gr_preprocess_name(want));
    ck_assert_int_eq(r->letter_box, pc->letter_box);
    char jpg[128];
    snprintf(jpg, sizeof jpg, "data/%s.jpg", pc->photo);
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(jpg, &im) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(im->w == r->image_w && im->h == r->image_h, "%s: %dx%d, the record's %dx%d",
                  jpg, im->w, im->h, r->image_w, r->image_h);
    ck_assert_msg(gr_engine_set_image(e, 0, 0, im) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
    check_dets(name, r, e, pc->thresh, 0.45f, im->w, im->h, PHOTO_BOX_TOL_PX);
    fflush(stdout);
    gr_image_destroy(im);
    gr_engine_destroy(e);
    gr_model_destroy(m);
    unlink(cfg);
    free(r);
}
END_TEST

/* --write-weights MODEL SIZE CFG_OUT WEIGHTS_OUT [letterbox]: the driver's inputs (the cfg with
 * letter_box=1 given "letterbox"). */
static int write_weights(int argc, char **argv)
{
    int size = atoi(argv[3]);
    gr_net *net = NULL;
    if (!write_sized_cfg(argv[2], size, argc == 7 && strcmp(argv[6], "letterbox") == 0, argv[4]))
        return 1;
    if (gr_net_parse_file(argv[4], &net) != GR_OK || gr_net_synthesize_weights(net, 1) != GR_OK ||
        gr_net_save_weights(net, argv[5]) != GR_OK) {
        fprintf(stderr, "test_alexeyab: %s\n", gr_last_error());
        gr_net_free(net);
        return 1;
    }
    gr_net_free(net);
    return 0;
}

/* --walk CFG...: for each cfg, "NAME: parses" or the parser's one-line refusal
 * (tests/data/alexeyab/cfg_walk.txt is this over AlexeyAB's cfg/\*yolo\*.cfg). */
static int walk(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *base = strrchr(argv[i], '/');
        base = base ? base + 1 : argv[i];
        gr_net *net = NULL;
        gr_status st = gr_net_parse_file(argv[i], &net);
        if (st == GR_OK)
            printf("%s: parses (%d layers)\n", base, net->n_layers);
        else
            printf("%s: %s: %s\n", base, gr_status_str(st), gr_last_error());
        gr_net_free(net);
    }
    return 0;
}

/* --write-png JPEG PNG: graphrun's decode of the photo, losslessly, for the driver. */
static int write_png(char **argv)
{
    gr_image *im = NULL;
    gr_status st = gr_image_load(argv[2], &im);
    if (st == GR_OK)
        st = gr_image_write(im, argv[3]);
    gr_image_destroy(im);
    if (st != GR_OK)
        fprintf(stderr, "test_alexeyab: %s\n", gr_last_error());
    return st == GR_OK ? 0 : 1;
}

/* --list-photos: "MODEL SIZE THRESH PHOTO letterbox|stretch RECORD" per photo case, for
 * tests/alexeyab/record.sh. */
static int list_photos(void)
{
    for (size_t i = 0; i < sizeof photo_cases / sizeof photo_cases[0]; i++) {
        const photo_case *pc = &photo_cases[i];
        char path[256];
        photo_record_path(pc, path, sizeof path);
        printf("%s %d %g %s %s %s\n", pc->model, pc->size, (double)pc->thresh, pc->photo,
               pc->letter_box ? "letterbox" : "stretch", path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "--write-weights") == 0)
        return write_weights(argc, argv);
    if (argc == 4 && strcmp(argv[1], "--write-png") == 0)
        return write_png(argv);
    if (argc == 2 && strcmp(argv[1], "--list-photos") == 0)
        return list_photos();
    if (argc > 2 && strcmp(argv[1], "--walk") == 0)
        return walk(argc, argv);
    Suite *s = suite_create("alexeyab");
    TCase *tc = tcase_create("oracle");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, cpu_reference_matches_alexeyab, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    TCase *photos = tcase_create("photos");
    tcase_set_timeout(photos, 300);
    tcase_add_loop_test(photos, photos_match_alexeyab_detector_test, 0,
                        (int)(sizeof photo_cases / sizeof photo_cases[0]));
    suite_add_tcase(s, photos);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
