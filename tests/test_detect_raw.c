/* Check suite for the raw-head decoders (runtime/detect.c: gr_decode_region_raw,
 * gr_decode_yolo_raw, gr_detect_heads with raw heads) and gr_engine_detect_outputs.
 *
 * The raw decoders skip the activation of every box whose objectness is <= thresh. That must not
 * change a single bit: each test compares them with the arithmetic gr_engine_detect used before,
 * kept here in its plain form: the op's CPU reference activation over the whole head
 * (gr_op_get(op)->ref, ops/region.c and ops/yolo.c) followed by a straightforward decoding loop
 * (ref_decode, Darknet's get_region_detections / get_yolo_detections as detect.c had them).
 * Results are compared with memcmp (every float bit, count and order): there is no tolerance,
 * because the new code must compute the same floats, not nearby ones. Head values are random
 * (a fixed seed), with NaN, +-Inf and huge values mixed in, at thresholds 0 and 0.005 (where
 * nearly every box passes), the CLI's 0.25 and 0.5, 0.9, 1 (nothing passes), and, for the
 * decoders alone, -1 and NaN. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/detect.h"

static const float thresholds[] = {0.0f, 0.005f, 0.25f, 0.5f, 0.9f, 1.0f};
#define N_THRESH (sizeof thresholds / sizeof thresholds[0])

/* ---- the arithmetic before: reference activation, then a plain decoding loop ---- */

static float *activate_ref(const gr_op_params *p, const float *raw, gr_shape s)
{
    size_t elems = (size_t)s.c * (size_t)s.h * (size_t)s.w;
    float *act = malloc(elems * sizeof *act);
    ck_assert_ptr_nonnull(act);
    gr_op_ref(p, NULL, &raw, &s, 1, act, s, 1);
    return act;
}

/* get_region_detections / get_yolo_detections on an activated head, as detect.c decoded before
 * the raw decoders: every (box, class) with objectness > thresh and objectness * class > thresh,
 * in row, column, anchor, class order. Writes all of them (out has room for s.c*s.h*s.w). */
static int ref_decode(const gr_op_params *p, const float *act, gr_shape s, int net_w, int net_h,
                      float thresh, gr_detection *out)
{
    int yolo = p->op == GR_OP_YOLO;
    int n_anchors = yolo ? p->n_mask : p->num;
    size_t first_class = yolo ? 5 : (size_t)p->coords + 1;
    size_t entries = first_class + (size_t)p->classes, obj = first_class - 1;
    size_t plane = (size_t)s.h * (size_t)s.w;
    int count = 0;
    for (int row = 0; row < s.h; row++) {
        for (int col = 0; col < s.w; col++) {
            for (int a = 0; a < n_anchors; a++) {
                const float *base =
                    act + (size_t)a * entries * plane + (size_t)row * (size_t)s.w + (size_t)col;
                float objectness = base[obj * plane];
                if (!(objectness > thresh))
                    continue;
                float x = ((float)col + base[0]) / (float)s.w;
                float y = ((float)row + base[plane]) / (float)s.h;
                float w, h;
                if (yolo) {
                    int anchor = p->mask[a];
                    w = (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * anchor] /
                                net_w);
                    h = (float)(exp((double)base[3 * plane]) *
                                (double)p->anchors[2 * anchor + 1] / net_h);
                } else {
                    w = (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * a] / s.w);
                    h = (float)(exp((double)base[3 * plane]) * (double)p->anchors[2 * a + 1] /
                                s.h);
                }
                gr_detection d;
                d.left = (float)(((double)x - (double)w / 2.) * net_w);
                d.right = (float)(((double)x + (double)w / 2.) * net_w);
                d.top = (float)(((double)y - (double)h / 2.) * net_h);
                d.bottom = (float)(((double)y + (double)h / 2.) * net_h);
                d.objectness = objectness;
                for (int k = 0; k < p->classes; k++) {
                    float prob = objectness * base[(first_class + (size_t)k) * plane];
                    if (prob > thresh) {
                        d.class_id = k;
                        d.prob = prob;
                        out[count++] = d;
                    }
                }
            }
        }
    }
    return count;
}

/* ---- heads ---- */

static gr_op_params region_params(int classes, int softmax)
{
    static const float anchors[10] = {1.08f, 1.19f, 3.42f, 4.41f, 6.63f,
                                      11.38f, 9.42f, 5.11f, 16.62f, 10.52f};
    gr_op_params p;
    gr_op_params_default(GR_OP_REGION, &p);
    p.classes = classes;
    p.coords = 4;
    p.num = 5;
    p.softmax = softmax;
    memcpy(p.anchors, anchors, sizeof anchors);
    return p;
}

static gr_op_params yolo_params(int classes, int first_mask)
{
    static const float anchors[12] = {10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319};
    gr_op_params p;
    gr_op_params_default(GR_OP_YOLO, &p);
    p.classes = classes;
    p.num = 6;
    p.n_mask = 3;
    for (int m = 0; m < 3; m++)
        p.mask[m] = first_mask + m;
    memcpy(p.anchors, anchors, sizeof anchors);
    return p;
}

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)rng() / 4294967296.0f; }

/* Raw head values: mostly uniform in [-8, 8] (objectness from ~3e-4 to ~1), a few special ones
 * (NaN, +-Inf, +-100 where exp() overflows, 0) anywhere, including objectness and classes. */
static float *random_head(gr_shape s, uint64_t seed)
{
    size_t elems = (size_t)s.c * (size_t)s.h * (size_t)s.w;
    float *t = malloc(elems * sizeof *t);
    ck_assert_ptr_nonnull(t);
    rng_state = seed;
    static const float special[] = {NAN, INFINITY, -INFINITY, 100.0f, -100.0f, 0.0f, -0.0f};
    for (size_t i = 0; i < elems; i++) {
        uint32_t r = rng() % 1000;
        t[i] = r < 7 ? special[r] : uniform(-8.0f, 8.0f);
    }
    return t;
}

static size_t head_elems(gr_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

static int decode_raw(const gr_op_params *p, const float *raw, gr_shape s, int net_w, int net_h,
                      float thresh, gr_detection *out, int max_out)
{
    return p->op == GR_OP_REGION
               ? gr_decode_region_raw(p, raw, s, net_w, net_h, thresh, out, max_out)
               : gr_decode_yolo_raw(p, raw, s, net_w, net_h, thresh, out, max_out);
}

/* Decoder level: the raw decoder equals activate_ref + ref_decode (and so does the activated
 * decoder), bit for bit; the count-only call (max_out 0) agrees; a short buffer gets a prefix. */
static void check_decoder(const gr_op_params *p, gr_shape s, int net_w, int net_h, uint64_t seed)
{
    float *raw = random_head(s, seed);
    float *act = activate_ref(p, raw, s);
    size_t room = head_elems(s);
    gr_detection *want = calloc(room, sizeof *want), *got = calloc(room, sizeof *got);
    ck_assert(want && got);
    float extra[] = {-1.0f, NAN};
    for (size_t t = 0; t < N_THRESH + 2; t++) {
        float thresh = t < N_THRESH ? thresholds[t] : extra[t - N_THRESH];
        int n_want = ref_decode(p, act, s, net_w, net_h, thresh, want);
        int n_got = decode_raw(p, raw, s, net_w, net_h, thresh, got, (int)room);
        ck_assert_msg(n_got == n_want, "thresh %g: %d detections, reference %d", (double)thresh,
                      n_got, n_want);
        ck_assert_msg(memcmp(got, want, (size_t)n_want * sizeof *got) == 0,
                      "thresh %g: detections differ from the reference", (double)thresh);
        ck_assert_int_eq(decode_raw(p, raw, s, net_w, net_h, thresh, NULL, 0), n_want);
        int n_act = p->op == GR_OP_REGION
                        ? gr_decode_region(p, act, s, net_w, net_h, thresh, got, (int)room)
                        : gr_decode_yolo(p, act, s, net_w, net_h, thresh, got, (int)room);
        ck_assert_int_eq(n_act, n_want);
        ck_assert(memcmp(got, want, (size_t)n_want * sizeof *got) == 0);
        if (n_want > 1) {
            memset(got, 0xab, room * sizeof *got);
            ck_assert_int_eq(decode_raw(p, raw, s, net_w, net_h, thresh, got, n_want / 2),
                             n_want);
            ck_assert(memcmp(got, want, (size_t)(n_want / 2) * sizeof *got) == 0);
            unsigned char guard[sizeof *got];
            memset(guard, 0xab, sizeof guard);
            ck_assert(memcmp(&got[n_want / 2], guard, sizeof guard) == 0); /* nothing past it */
        }
        /* 0 and 0.005 must keep many boxes, or the test would prove little there. */
        if (thresh == 0.0f)
            ck_assert_int_gt(n_want, 100);
    }
    free(want);
    free(got);
    free(act);
    free(raw);
}

START_TEST(test_region_softmax_raw_equals_reference)
{
    gr_op_params p = region_params(20, 1);
    check_decoder(&p, (gr_shape){125, 13, 13}, 416, 416, 0x1234567u);
}
END_TEST

START_TEST(test_region_logistic_raw_equals_reference)
{
    gr_op_params p = region_params(20, 0);
    check_decoder(&p, (gr_shape){125, 13, 11}, 416, 352, 0x2345678u);
}
END_TEST

START_TEST(test_yolo_raw_equals_reference)
{
    gr_op_params p = yolo_params(80, 3);
    check_decoder(&p, (gr_shape){255, 13, 13}, 416, 416, 0x3456789u);
    p = yolo_params(80, 0);
    check_decoder(&p, (gr_shape){255, 26, 26}, 416, 416, 0x456789au);
}
END_TEST

/* More classes than the decoder's stack scratch (256): the heap path. */
START_TEST(test_many_classes_raw_equals_reference)
{
    gr_op_params p = yolo_params(300, 2);
    check_decoder(&p, (gr_shape){3 * 305, 5, 4}, 128, 160, 0x56789abu);
    p = region_params(300, 1);
    check_decoder(&p, (gr_shape){5 * 305, 4, 5}, 160, 128, 0x6789abcu);
}
END_TEST

/* Whole chain (decode, letterbox, NMS or not, clip), several heads: raw heads equal activated
 * ones, bit for bit. */
START_TEST(test_detect_heads_raw_equals_activated)
{
    gr_op_params y0 = yolo_params(80, 3), y1 = yolo_params(80, 0);
    gr_op_params r = region_params(20, 1);
    gr_shape s0 = {255, 7, 7}, s1 = {255, 13, 13}, sr = {125, 13, 13};
    float *raw[3] = {random_head(s0, 11), random_head(s1, 12), random_head(sr, 13)};
    float *act[3] = {activate_ref(&y0, raw[0], s0), activate_ref(&y1, raw[1], s1),
                     activate_ref(&r, raw[2], sr)};
    gr_head_output raw_heads[3] = {{&y0, raw[0], s0, 1}, {&y1, raw[1], s1, 1}, {&r, raw[2], sr, 1}};
    gr_head_output act_heads[3] = {{&y0, act[0], s0, 0}, {&y1, act[1], s1, 0}, {&r, act[2], sr, 0}};
    static const float nms[] = {0.45f, 0.0f};
    for (size_t t = 0; t < N_THRESH; t++) {
        for (size_t k = 0; k < 2; k++) {
            gr_detect_options opt;
            gr_detect_options_default(&opt);
            opt.thresh = thresholds[t];
            opt.nms = nms[k];
            opt.image_w = 768;
            opt.image_h = 576;
            gr_detection *want = NULL, *got = NULL;
            int n_want = -1, n_got = -1;
            ck_assert_int_eq(gr_detect_heads(act_heads, 3, 416, 416, &opt, &want, &n_want), GR_OK);
            ck_assert_int_eq(gr_detect_heads(raw_heads, 3, 416, 416, &opt, &got, &n_got), GR_OK);
            ck_assert_msg(n_got == n_want, "thresh %g nms %g: %d kept, activated %d",
                          (double)opt.thresh, (double)opt.nms, n_got, n_want);
            ck_assert(memcmp(got, want, (size_t)n_want * sizeof *got) == 0);
            if (thresholds[t] <= 0.25f)
                ck_assert_int_gt(n_want, 0);
            gr_detections_free(want);
            gr_detections_free(got);
        }
    }
    for (int i = 0; i < 3; i++) {
        free(raw[i]);
        free(act[i]);
    }
}
END_TEST

START_TEST(test_raw_decoders_reject_bad_heads)
{
    gr_op_params r = region_params(20, 1);
    float t[125] = {0};
    gr_detection d[4];
    /* channels disagree with num x (coords + 1 + classes) */
    ck_assert_int_eq(gr_decode_region_raw(&r, t, (gr_shape){124, 1, 1}, 416, 416, 0.5f, d, 4), -1);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "channels"));
    ck_assert_int_eq(gr_decode_region_raw(&r, NULL, (gr_shape){125, 1, 1}, 416, 416, 0.5f, d, 4),
                     -1);
    ck_assert_int_eq(gr_decode_region_raw(&r, t, (gr_shape){125, 1, 1}, 416, 416, 0.5f, d, -1),
                     -1);
    ck_assert_int_eq(gr_decode_yolo_raw(&r, t, (gr_shape){125, 1, 1}, 416, 416, 0.5f, d, 4), -1);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "not a yolo head"));
    gr_op_params y = yolo_params(20, 3);
    y.mask[1] = 6;
    float ty[75] = {0};
    ck_assert_int_eq(gr_decode_yolo_raw(&y, ty, (gr_shape){75, 1, 1}, 416, 416, 0.5f, d, 4), -1);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "mask[1]"));
    /* In gr_detect_heads, the failing head is named. */
    gr_head_output heads[2] = {{&r, t, {125, 1, 1}, 1}, {&r, t, {124, 1, 1}, 1}};
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    gr_detection *out = NULL;
    int n = 0;
    ck_assert_int_eq(gr_detect_heads(heads, 2, 416, 416, &opt, &out, &n), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "head 1"));
}
END_TEST

/* ---- gr_engine_detect / gr_engine_detect_outputs on CPU engines ---- */

/* Reduced networks (a few conv/maxpool stages) with the VOC region head, and two yolo heads. */
static const char region_cfg[] =
    "[net]\nwidth=128\nheight=96\nchannels=3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nsize=1\nstride=1\npad=1\nfilters=125\nactivation=linear\n"
    "[region]\nanchors=1.08,1.19,3.42,4.41,6.63,11.38,9.42,5.11,16.62,10.52\n"
    "classes=20\ncoords=4\nnum=5\nsoftmax=1\n";

static const char yolo_cfg[] =
    "[net]\nwidth=64\nheight=64\nchannels=3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nsize=1\nstride=1\npad=1\nfilters=255\nactivation=linear\n"
    "[yolo]\nmask=3,4,5\nanchors=10,14,23,27,37,58,81,82,135,169,344,319\nclasses=80\nnum=6\n"
    "[route]\nlayers=-4\n"
    "[convolutional]\nsize=1\nstride=1\npad=1\nfilters=255\nactivation=linear\n"
    "[yolo]\nmask=0,1,2\nanchors=10,14,23,27,37,58,81,82,135,169,344,319\nclasses=80\nnum=6\n";

#define ENGINE_BATCH 3

static gr_model *load_cfg(const char *cfg)
{
    char path[] = "/tmp/gr_detect_raw_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(cfg);
    ck_assert_int_eq(write(fd, cfg, len), (ssize_t)len);
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

/* A CPU engine of batch ENGINE_BATCH run once on three different random images. */
static gr_engine *run_engine(const gr_model *model)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.batch = ENGINE_BATCH;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &eo, &engine) == GR_OK, "%s", gr_last_error());
    void *input;
    size_t bytes;
    ck_assert_int_eq(gr_engine_slot_input(engine, 0, 1, &input, &bytes), GR_OK);
    rng_state = 99;
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)input)[i] = (uint8_t)rng();
    ck_assert_msg(gr_engine_run(engine) == GR_OK, "%s", gr_last_error());
    return engine;
}

/* What gr_engine_detect computed before: the reference activation of each head, then
 * gr_detect_heads on activated heads. */
static void detect_before(const gr_model *model, const gr_engine *engine, int image,
                          const gr_detect_options *opt, gr_detection **dets, int *n)
{
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(model, &info), GR_OK);
    int n_out = gr_engine_output_count(engine);
    ck_assert_int_le(n_out, 2);
    gr_head_output heads[2];
    float *act[2] = {NULL, NULL};
    gr_op_params params[2];
    for (int k = 0; k < n_out; k++) {
        gr_tensor_desc d;
        const float *raw;
        ck_assert_int_eq(gr_engine_output_desc(engine, k, &d), GR_OK);
        ck_assert_int_eq(gr_engine_output(engine, k, &raw), GR_OK);
        gr_shape s = {d.c, d.h, d.w};
        params[k] = s.c == 125 ? region_params(20, 1) : yolo_params(80, s.h == 8 ? 3 : 0);
        act[k] = activate_ref(&params[k], raw + (size_t)image * head_elems(s), s);
        heads[k] = (gr_head_output){&params[k], act[k], s, 0};
    }
    ck_assert_int_eq(gr_detect_heads(heads, n_out, info.width, info.height, opt, dets, n), GR_OK);
    for (int k = 0; k < n_out; k++)
        free(act[k]);
}

static void check_engine(const char *cfg, int expect_heads)
{
    gr_model *model = load_cfg(cfg);
    gr_engine *engine = run_engine(model);
    ck_assert_int_eq(gr_engine_output_count(engine), expect_heads);
    for (size_t t = 0; t < N_THRESH; t++) {
        for (int image = 0; image < ENGINE_BATCH; image++) {
            gr_detect_options opt;
            gr_detect_options_default(&opt);
            opt.thresh = thresholds[t];
            opt.image_w = 640 + 10 * image;
            opt.image_h = 480;
            gr_detection *want = NULL, *got = NULL;
            int n_want = -1, n_got = -1;
            detect_before(model, engine, image, &opt, &want, &n_want);
            ck_assert_int_eq(gr_engine_detect(engine, image, &opt, &got, &n_got), GR_OK);
            ck_assert_msg(n_got == n_want, "thresh %g image %d: %d kept, before %d",
                          (double)opt.thresh, image, n_got, n_want);
            ck_assert(memcmp(got, want, (size_t)n_want * sizeof *got) == 0);
            if (thresholds[t] == 0.0f)
                ck_assert_int_gt(n_want, 0);
            gr_detections_free(want);
            gr_detections_free(got);
        }
    }
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}

START_TEST(test_engine_detect_region_equals_before) { check_engine(region_cfg, 1); }
END_TEST

START_TEST(test_engine_detect_yolo_equals_before) { check_engine(yolo_cfg, 2); }
END_TEST

/* gr_engine_detect_outputs from several threads at once, on outputs kept from the run, equals
 * gr_engine_detect on one thread (and the arguments are checked). */
typedef struct detect_job {
    const gr_engine *engine;
    const float *outputs[2];
    int image, rounds, mismatches;
    gr_detection *want;
    int n_want;
} detect_job;

static void *detect_thread(void *arg)
{
    detect_job *j = arg;
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    opt.thresh = 0.005f;
    for (int r = 0; r < j->rounds; r++) {
        gr_detection *d = NULL;
        int n = 0;
        if (gr_engine_detect_outputs(j->engine, j->outputs, j->image, &opt, &d, &n) != GR_OK ||
            n != j->n_want || memcmp(d, j->want, (size_t)n * sizeof *d) != 0)
            j->mismatches++;
        gr_detections_free(d);
    }
    return NULL;
}

START_TEST(test_engine_detect_outputs_threads)
{
    gr_model *model = load_cfg(yolo_cfg);
    gr_engine *engine = run_engine(model);
    detect_job jobs[2 * ENGINE_BATCH];
    pthread_t tids[2 * ENGINE_BATCH];
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    opt.thresh = 0.005f;
    for (int i = 0; i < 2 * ENGINE_BATCH; i++) {
        detect_job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        j->engine = engine;
        j->image = i % ENGINE_BATCH;
        j->rounds = 20;
        for (int k = 0; k < 2; k++)
            ck_assert_int_eq(gr_engine_output(engine, k, &j->outputs[k]), GR_OK);
        ck_assert_int_eq(gr_engine_detect(engine, j->image, &opt, &j->want, &j->n_want), GR_OK);
    }
    for (int i = 0; i < 2 * ENGINE_BATCH; i++)
        ck_assert_int_eq(pthread_create(&tids[i], NULL, detect_thread, &jobs[i]), 0);
    for (int i = 0; i < 2 * ENGINE_BATCH; i++) {
        pthread_join(tids[i], NULL);
        ck_assert_int_eq(jobs[i].mismatches, 0);
        gr_detections_free(jobs[i].want);
    }
    /* Bad arguments: a clear error, outputs cleared. */
    gr_detection *d = (gr_detection *)1;
    int n = 7;
    const float *none[2] = {NULL, NULL};
    ck_assert_int_eq(gr_engine_detect_outputs(engine, none, 0, &opt, &d, &n),
                     GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(gr_engine_detect_outputs(engine, jobs[0].outputs, ENGINE_BATCH, &opt, &d, &n),
                     GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "batch index"));
    ck_assert_int_eq(gr_engine_detect_outputs(NULL, jobs[0].outputs, 0, &opt, &d, &n),
                     GR_ERR_INVALID_ARGUMENT);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

static Suite *detect_raw_suite(void)
{
    Suite *s = suite_create("detect_raw");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_region_softmax_raw_equals_reference);
    tcase_add_test(tc, test_region_logistic_raw_equals_reference);
    tcase_add_test(tc, test_yolo_raw_equals_reference);
    tcase_add_test(tc, test_many_classes_raw_equals_reference);
    tcase_add_test(tc, test_detect_heads_raw_equals_activated);
    tcase_add_test(tc, test_raw_decoders_reject_bad_heads);
    tcase_add_test(tc, test_engine_detect_region_equals_before);
    tcase_add_test(tc, test_engine_detect_yolo_equals_before);
    tcase_add_test(tc, test_engine_detect_outputs_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(detect_raw_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
