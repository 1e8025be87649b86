/* Detection heads to boxes: region/yolo decoding, letterbox correction, class-wise NMS, clipping
 * (see detect.h for the pipeline). Every formula follows pjreddie Darknet's region_layer.c,
 * yolo_layer.c, box.c and image.c, including where Darknet mixes float and double arithmetic,
 * so thresholds and NMS decide the same way Darknet does; AlexeyAB's additions (scale_x_y,
 * new_coords, greedynms/diounms) follow its yolo_layer.c and box.c (docs/darknet.md). */
#include "runtime/detect.h"

#include "ops/op_util.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gr_detections_free(gr_detection *dets) { free(dets); }

void gr_letterbox_size(gr_preprocess how, int im_w, int im_h, int net_w, int net_h, int *new_w,
                       int *new_h)
{
    if (how == GR_PREPROCESS_STRETCH) { /* AlexeyAB's resize_image(im, net.w, net.h) */
        *new_w = net_w;
        *new_h = net_h;
        return;
    }
    /* Darknet compares in float and divides in int; 64-bit products because im * net can pass
     * INT_MAX at GR_MAX_DIM. */
    long long w, h;
    if ((float)net_w / (float)im_w < (float)net_h / (float)im_h) {
        w = net_w;
        h = (long long)im_h * net_w / im_w;
    } else {
        h = net_h;
        w = (long long)im_w * net_h / im_h;
    }
    *new_w = w < 1 ? 1 : (int)w;
    *new_h = h < 1 ? 1 : (int)h;
}

/* Where a decoder puts its detections: the caller's array (at most `cap`, every one counted) or,
 * with `grow`, a heap array doubled as needed. */
typedef struct det_sink {
    gr_detection *out;
    size_t cap;
    long long count;
    bool grow;
    bool oom; /* growing failed: later detections are counted, not stored */
} det_sink;

static void emit(det_sink *sink, const gr_detection *d)
{
    if ((size_t)sink->count >= sink->cap && sink->grow && !sink->oom) {
        size_t cap = sink->cap ? 2 * sink->cap : 64;
        gr_detection *grown = cap < SIZE_MAX / sizeof *grown
                                  ? realloc(sink->out, cap * sizeof *grown)
                                  : NULL;
        if (grown) {
            sink->out = grown;
            sink->cap = cap;
        } else {
            sink->oom = true;
        }
    }
    if ((size_t)sink->count < sink->cap)
        sink->out[sink->count] = *d;
    sink->count++;
}

/* Darknet's relative centre box -> corners in network pixels, as draw_detections converts
 * (b.x - b.w/2.) * width in double. */
static void set_corners(gr_detection *d, float x, float y, float w, float h, int net_w, int net_h)
{
    d->left = (float)(((double)x - (double)w / 2.) * net_w);
    d->right = (float)(((double)x + (double)w / 2.) * net_w);
    d->top = (float)(((double)y - (double)h / 2.) * net_h);
    d->bottom = (float)(((double)y + (double)h / 2.) * net_h);
}

/* Shared argument checks of both decoders; returns false with a message. */
static bool check_decode_args(const char *who, const gr_op_params *p, const float *activated,
                              gr_shape s, int net_w, int net_h, const gr_detection *out,
                              int max_out)
{
    if (!p || !activated) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL params or tensor", who);
        return false;
    }
    if (s.c <= 0 || s.h <= 0 || s.w <= 0 || s.h > GR_MAX_DIM || s.w > GR_MAX_DIM) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad head shape %dx%dx%d", who, s.c, s.h, s.w);
        return false;
    }
    if (gr_shape_elems(s) > (size_t)INT_MAX) {
        gr_fail(GR_ERR_LIMIT, "%s: head of %zu elements is too large", who, gr_shape_elems(s));
        return false;
    }
    if (net_w <= 0 || net_h <= 0 || net_w > GR_MAX_DIM || net_h > GR_MAX_DIM) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad network size %dx%d", who, net_w, net_h);
        return false;
    }
    if (max_out < 0 || (!out && max_out > 0)) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad output buffer (max_out %d)", who, max_out);
        return false;
    }
    if (p->classes < 0) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: classes %d is negative", who, p->classes);
        return false;
    }
    return true;
}

/* The region head's own checks; false with a message. */
static bool check_region(const gr_op_params *p, gr_shape s)
{
    if (p->op != GR_OP_REGION || p->num < 1 || p->num > GR_MAX_ANCHORS || p->coords < 4) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "region decode: not a region head (op %d, num %d, coords %d)", (int)p->op, p->num,
                p->coords);
        return false;
    }
    long long entries = (long long)p->coords + 1 + p->classes;
    if ((long long)s.c != entries * p->num) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "region decode: %d channels but num %d x (coords %d + 1 + classes %d) = %lld",
                s.c, p->num, p->coords, p->classes, entries * p->num);
        return false;
    }
    return true;
}

static bool check_yolo(const gr_op_params *p, gr_shape s)
{
    if (p->op != GR_OP_YOLO || p->n_mask < 1 || p->n_mask > GR_MAX_ANCHORS || p->num < 1 ||
        p->num > GR_MAX_ANCHORS) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "yolo decode: not a yolo head (op %d, mask %d, num %d)",
                (int)p->op, p->n_mask, p->num);
        return false;
    }
    for (int m = 0; m < p->n_mask; m++) {
        if (p->mask[m] < 0 || p->mask[m] >= p->num) {
            gr_fail(GR_ERR_INVALID_ARGUMENT, "yolo decode: mask[%d] = %d is not an anchor of %d",
                    m, p->mask[m], p->num);
            return false;
        }
    }
    long long entries = 5LL + p->classes;
    if ((long long)s.c != entries * p->n_mask) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "yolo decode: %d channels but mask %d x (5 + classes %d) = %lld", s.c, p->n_mask,
                p->classes, entries * p->n_mask);
        return false;
    }
    return true;
}

/* The values a decoder reads: the activated head, or (raw) the head's input, the conv output, to
 * which the decoder applies the region/yolo activation itself, box by box, and only to a box
 * whose objectness passes the threshold. Every other value of a box is read only after that
 * test, so the values skipped cannot change a result; and the activation is computed with the
 * functions ops/region.c and ops/yolo.c's references use (gr_activate's logistic,
 * gr_softmax_strided_to), so the values read are the same floats (tests/test_detect_raw.c). */
typedef struct head_values {
    const float *data;
    bool raw;
    float *classes; /* raw: one anchor's class probabilities (p->classes floats) */
} head_values;

static float logistic(float v) { return gr_activate(v, GR_ACT_LOGISTIC); }

/* The `classes` class probabilities of the box at `base` (first class at base[0], `stride`
 * apart); raw values are activated into v->classes. Returns where they are and their stride. */
static const float *class_probs(const head_values *v, const float *base, size_t classes,
                                size_t stride, bool softmax, size_t *out_stride)
{
    if (!v->raw) {
        *out_stride = stride;
        return base;
    }
    if (softmax) {
        gr_softmax_strided_to(base, classes, stride, v->classes, 1);
    } else {
        for (size_t k = 0; k < classes; k++)
            v->classes[k] = logistic(base[k * stride]);
    }
    *out_stride = 1;
    return v->classes;
}

static void decode_region_values(const gr_op_params *p, const head_values *v, gr_shape s,
                                 int net_w, int net_h, float thresh, det_sink *sink)
{
    size_t plane = (size_t)s.h * (size_t)s.w;
    size_t entries = (size_t)p->coords + 1 + (size_t)p->classes;
    for (int row = 0; row < s.h; row++) {
        for (int col = 0; col < s.w; col++) {
            size_t cell = (size_t)row * (size_t)s.w + (size_t)col;
            for (int a = 0; a < p->num; a++) {
                const float *base = v->data + (size_t)a * entries * plane + cell;
                float objectness = base[(size_t)p->coords * plane];
                if (v->raw)
                    objectness = logistic(objectness);
                /* get_region_detections: objectness = scale > thresh ? scale : 0, and classes are
                 * only scored when it is nonzero. */
                if (!(objectness > thresh))
                    continue;
                float tx = base[0], ty = base[plane];
                if (v->raw) {
                    tx = logistic(tx);
                    ty = logistic(ty);
                }
                gr_detection d;
                /* get_region_box: float centre, double exp() for the size, anchors in cells. */
                float x = ((float)col + tx) / (float)s.w;
                float y = ((float)row + ty) / (float)s.h;
                float w = (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * a] / s.w);
                float h =
                    (float)(exp((double)base[3 * plane]) * (double)p->anchors[2 * a + 1] / s.h);
                set_corners(&d, x, y, w, h, net_w, net_h);
                d.objectness = objectness;
                size_t stride;
                const float *probs =
                    class_probs(v, base + ((size_t)p->coords + 1) * plane, (size_t)p->classes,
                                plane, p->softmax != 0, &stride);
                for (int k = 0; k < p->classes; k++) {
                    float prob = objectness * probs[(size_t)k * stride];
                    if (prob > thresh) {
                        d.class_id = k;
                        d.prob = prob;
                        emit(sink, &d);
                    }
                }
            }
        }
    }
}

/* get_yolo_box (AlexeyAB yolo_layer.c:131-152): the centre from the activated, scaled x, y; the
 * size exp(tw) * anchor in double, or with new_coords (tw * tw * 4) * anchor in float, anchors
 * in network pixels. `base` points at the box's x entry, `plane` apart. */
static void yolo_box(const gr_op_params *p, const float *base, size_t plane, float tx, float ty,
                     int anchor, int col, int row, gr_shape s, int net_w, int net_h,
                     gr_detection *d)
{
    float x = ((float)col + tx) / (float)s.w;
    float y = ((float)row + ty) / (float)s.h;
    float w, h;
    if (p->new_coords) {
        float tw = base[2 * plane], th = base[3 * plane];
        w = tw * tw * 4.0f * p->anchors[2 * anchor] / (float)net_w;
        h = th * th * 4.0f * p->anchors[2 * anchor + 1] / (float)net_h;
    } else {
        w = (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * anchor] / net_w);
        h = (float)(exp((double)base[3 * plane]) * (double)p->anchors[2 * anchor + 1] / net_h);
    }
    set_corners(d, x, y, w, h, net_w, net_h);
}

static void decode_yolo_values(const gr_op_params *p, const head_values *v, gr_shape s, int net_w,
                               int net_h, float thresh, det_sink *sink)
{
    size_t plane = (size_t)s.h * (size_t)s.w;
    size_t entries = 5 + (size_t)p->classes;
    /* new_coords: the values are already activated by the conv (the yolo layer adds no
     * logistic), so raw and activated heads read the same except for x, y's scaling. */
    bool activate = v->raw && !p->new_coords;
    head_values cv = *v;
    cv.raw = activate;
    for (int row = 0; row < s.h; row++) {
        for (int col = 0; col < s.w; col++) {
            size_t cell = (size_t)row * (size_t)s.w + (size_t)col;
            for (int m = 0; m < p->n_mask; m++) {
                const float *base = v->data + (size_t)m * entries * plane + cell;
                float objectness = base[4 * plane];
                if (activate)
                    objectness = logistic(objectness);
                if (!(objectness > thresh)) /* get_yolo_detections: objectness <= thresh skips */
                    continue;
                float tx = base[0], ty = base[plane];
                if (activate) {
                    tx = logistic(tx);
                    ty = logistic(ty);
                }
                if (v->raw) {
                    tx = gr_yolo_scale_xy(p, tx);
                    ty = gr_yolo_scale_xy(p, ty);
                }
                gr_detection d;
                yolo_box(p, base, plane, tx, ty, p->mask[m], col, row, s, net_w, net_h, &d);
                d.objectness = objectness;
                size_t stride;
                const float *probs =
                    class_probs(&cv, base + 5 * plane, (size_t)p->classes, plane, false, &stride);
                for (int k = 0; k < p->classes; k++) {
                    float prob = objectness * probs[(size_t)k * stride];
                    if (prob > thresh) {
                        d.class_id = k;
                        d.prob = prob;
                        emit(sink, &d);
                    }
                }
            }
        }
    }
}

/* Class scratch of a raw decode on the stack up to this many classes (COCO's 80, VOC's 20). */
#define STACK_CLASSES 256

/* Check and decode one head of kind `op` into `sink`; a status with a message. */
static gr_status decode_values(gr_op_kind op, const gr_op_params *p, const float *data, bool raw,
                               gr_shape s, int net_w, int net_h, float thresh, det_sink *sink)
{
    const char *who = op == GR_OP_REGION ? "region decode" : "yolo decode";
    if (!check_decode_args(who, p, data, s, net_w, net_h, sink->grow ? NULL : sink->out,
                           sink->grow ? 0 : (int)sink->cap))
        return GR_ERR_INVALID_ARGUMENT;
    if (op == GR_OP_REGION ? !check_region(p, s) : !check_yolo(p, s))
        return GR_ERR_INVALID_ARGUMENT;
    float stack_classes[STACK_CLASSES];
    head_values v = {data, raw, stack_classes};
    if (raw && p->classes > STACK_CLASSES) {
        v.classes = gr_malloc((size_t)p->classes * sizeof *v.classes, "class probabilities");
        if (!v.classes)
            return GR_ERR_OUT_OF_MEMORY;
    }
    if (op == GR_OP_REGION)
        decode_region_values(p, &v, s, net_w, net_h, thresh, sink);
    else
        decode_yolo_values(p, &v, s, net_w, net_h, thresh, sink);
    if (v.classes != stack_classes)
        free(v.classes);
    return GR_OK;
}

/* The public decoders: into the caller's array, every detection counted. */
static int decode_into(gr_op_kind op, const gr_op_params *p, const float *data, bool raw,
                       gr_shape s, int net_w, int net_h, float thresh, gr_detection *out,
                       int max_out)
{
    if (max_out < 0) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "%s decode: bad output buffer (max_out %d)",
                op == GR_OP_REGION ? "region" : "yolo", max_out);
        return -1;
    }
    det_sink sink = {.out = out, .cap = (size_t)max_out};
    if (decode_values(op, p, data, raw, s, net_w, net_h, thresh, &sink) != GR_OK)
        return -1;
    return (int)sink.count; /* <= elements of the head, checked <= INT_MAX */
}

int gr_decode_region(const gr_op_params *p, const float *activated, gr_shape s, int net_w,
                     int net_h, float thresh, gr_detection *out, int max_out)
{
    return decode_into(GR_OP_REGION, p, activated, false, s, net_w, net_h, thresh, out, max_out);
}

int gr_decode_region_raw(const gr_op_params *p, const float *raw, gr_shape s, int net_w,
                         int net_h, float thresh, gr_detection *out, int max_out)
{
    return decode_into(GR_OP_REGION, p, raw, true, s, net_w, net_h, thresh, out, max_out);
}

int gr_decode_yolo(const gr_op_params *p, const float *activated, gr_shape s, int net_w, int net_h,
                   float thresh, gr_detection *out, int max_out)
{
    return decode_into(GR_OP_YOLO, p, activated, false, s, net_w, net_h, thresh, out, max_out);
}

int gr_decode_yolo_raw(const gr_op_params *p, const float *raw, gr_shape s, int net_w, int net_h,
                       float thresh, gr_detection *out, int max_out)
{
    return decode_into(GR_OP_YOLO, p, raw, true, s, net_w, net_h, thresh, out, max_out);
}

void gr_detections_correct_letterbox(gr_detection *d, int n, gr_preprocess how, int net_w,
                                     int net_h, int im_w, int im_h)
{
    if (!d || n <= 0 || net_w <= 0 || net_h <= 0 || im_w <= 0 || im_h <= 0)
        return;
    int new_w, new_h;
    gr_letterbox_size(how, im_w, im_h, net_w, net_h, &new_w, &new_h);
    /* correct_region_boxes: x' = (x - (netw - new_w)/2./netw) / (new_w/netw), then * im_w.
     * Note Darknet's offset is a real half ((netw - new_w)/2.), while the image is pasted at the
     * integer (netw - new_w)/2: we reproduce both. Stretched (AlexeyAB's correct_yolo_boxes with
     * letter = 0: new_w = netw), the offset is 0 and the scale im_w / net_w. */
    double pad_x = (net_w - new_w) / 2.;
    double pad_y = (net_h - new_h) / 2.;
    double scale_x = (double)im_w / new_w;
    double scale_y = (double)im_h / new_h;
    for (int i = 0; i < n; i++) {
        d[i].left = (float)(((double)d[i].left - pad_x) * scale_x);
        d[i].right = (float)(((double)d[i].right - pad_x) * scale_x);
        d[i].top = (float)(((double)d[i].top - pad_y) * scale_y);
        d[i].bottom = (float)(((double)d[i].bottom - pad_y) * scale_y);
    }
}

/* Clamp to [0, hi]; NaN goes to 0. */
static float clamp_coord(float v, float hi)
{
    if (!(v >= 0.0f))
        return 0.0f;
    return v > hi ? hi : v;
}

void gr_detections_clip(gr_detection *d, int n, int im_w, int im_h)
{
    if (!d || n <= 0 || im_w <= 0 || im_h <= 0)
        return;
    float max_x = (float)(im_w - 1), max_y = (float)(im_h - 1);
    for (int i = 0; i < n; i++) {
        d[i].left = clamp_coord(d[i].left, max_x);
        d[i].right = clamp_coord(d[i].right, max_x);
        d[i].top = clamp_coord(d[i].top, max_y);
        d[i].bottom = clamp_coord(d[i].bottom, max_y);
    }
}

float gr_box_iou(const gr_detection *a, const gr_detection *b)
{
    /* box.c: overlap per axis, zero intersection when either overlap is negative. */
    float ow = fminf(a->right, b->right) - fmaxf(a->left, b->left);
    float oh = fminf(a->bottom, b->bottom) - fmaxf(a->top, b->top);
    if (!(ow >= 0.0f) || !(oh >= 0.0f))
        return 0.0f;
    float inter = ow * oh;
    float area_a = (a->right - a->left) * (a->bottom - a->top);
    float area_b = (b->right - b->left) * (b->bottom - b->top);
    float uni = area_a + area_b - inter;
    if (!(uni > 0.0f)) /* Darknet divides 0/0 = NaN, which never suppresses: same outcome */
        return 0.0f;
    return inter / uni;
}

typedef struct nms_key {
    int class_id;
    float prob;
    int index;
    int suppressed;
} nms_key;

/* Descending prob with NaN last, so qsort sees a consistent order. */
static int compare_prob_desc(float a, float b)
{
    if (a > b)
        return -1;
    if (a < b)
        return 1;
    if (isnan(a) != isnan(b))
        return isnan(a) ? 1 : -1;
    return 0;
}

static int by_class_prob_index(const void *pa, const void *pb)
{
    const nms_key *a = pa, *b = pb;
    if (a->class_id != b->class_id)
        return a->class_id < b->class_id ? -1 : 1;
    int c = compare_prob_desc(a->prob, b->prob);
    if (c)
        return c;
    return (a->index > b->index) - (a->index < b->index);
}

static int by_prob_class_index(const void *pa, const void *pb)
{
    const nms_key *a = pa, *b = pb;
    int c = compare_prob_desc(a->prob, b->prob);
    if (c)
        return c;
    if (a->class_id != b->class_id)
        return a->class_id < b->class_id ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Shared by NMS and the plain sort: keep the unsuppressed keys, order them by prob, and
 * rewrite d[] front to back. Returns the kept count, or -1 on allocation failure. */
static int compact_sorted(gr_detection *d, nms_key *keys, int n)
{
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (!keys[i].suppressed)
            keys[kept++] = keys[i];
    qsort(keys, (size_t)kept, sizeof *keys, by_prob_class_index);
    gr_detection *copy = gr_malloc((size_t)kept * sizeof *copy, "sorted detections");
    if (!copy)
        return -1;
    for (int i = 0; i < kept; i++)
        copy[i] = d[keys[i].index];
    memcpy(d, copy, (size_t)kept * sizeof *copy);
    free(copy);
    return kept;
}

static nms_key *make_keys(const gr_detection *d, int n)
{
    nms_key *keys = gr_malloc((size_t)n * sizeof *keys, "NMS keys");
    if (!keys)
        return NULL;
    for (int i = 0; i < n; i++) {
        keys[i].class_id = d[i].class_id;
        keys[i].prob = d[i].prob;
        keys[i].index = i;
        keys[i].suppressed = 0;
    }
    return keys;
}

/* AlexeyAB's box_diou / box_diounms (box.c:195-229) on the boxes as its diounms_sort sees them:
 * centre form relative to the image (get_network_boxes with relative = 1). IoU minus
 * (d^2 / c^2)^beta, d the centres' distance, c the diagonal of the smallest enclosing box; the
 * IoU itself where c is 0. */
static float box_diou(const gr_detection *a, const gr_detection *b, float beta, int im_w,
                      int im_h)
{
    float iw = (float)im_w, ih = (float)im_h;
    float ax = (a->left + a->right) / 2.0f / iw, ay = (a->top + a->bottom) / 2.0f / ih;
    float bx = (b->left + b->right) / 2.0f / iw, by = (b->top + b->bottom) / 2.0f / ih;
    float aw = (a->right - a->left) / iw, ah = (a->bottom - a->top) / ih;
    float bw = (b->right - b->left) / iw, bh = (b->bottom - b->top) / ih;
    float top = (float)fmin((double)(ay - ah / 2), (double)(by - bh / 2));
    float bot = (float)fmax((double)(ay + ah / 2), (double)(by + bh / 2));
    float left = (float)fmin((double)(ax - aw / 2), (double)(bx - bw / 2));
    float right = (float)fmax((double)(ax + aw / 2), (double)(bx + bw / 2));
    float w = right - left, h = bot - top;
    float c = w * w + h * h;
    float iou = gr_box_iou(a, b);
    if (c == 0)
        return iou;
    float d = (ax - bx) * (ax - bx) + (ay - by) * (ay - by);
    float u = (float)pow((double)(d / c), (double)beta);
    return iou - u;
}

/* Whether kept box a suppresses b under this kind (diounms_sort, box.c:868-925; its tests at
 * lines 916 and 920): the plain IoU for DEFAULT (do_nms_sort), box_diou (beta 0.6 fixed) for
 * GREEDY, box_diounms (beta_nms) for DIOU. */
static bool suppresses(const gr_detection *a, const gr_detection *b, const gr_nms_params *k)
{
    switch (k->kind) {
    case GR_NMS_GREEDY: return box_diou(a, b, 0.6f, k->image_w, k->image_h) > k->thresh;
    case GR_NMS_DIOU: return box_diou(a, b, k->beta, k->image_w, k->image_h) > k->thresh;
    default: return gr_box_iou(a, b) > k->thresh;
    }
}

int gr_nms_per_class(gr_detection *d, int n, float iou_thresh)
{
    gr_nms_params k = {GR_NMS_DEFAULT, iou_thresh, 0.6f, 1, 1};
    return gr_nms_per_class_kind(d, n, &k);
}

int gr_nms_per_class_kind(gr_detection *d, int n, const gr_nms_params *k)
{
    if (n < 0 || (!d && n > 0) || !k || k->image_w < 1 || k->image_h < 1) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "NMS: bad detection array (n %d) or parameters", n);
        return -1;
    }
    if (n == 0)
        return 0;
    nms_key *keys = make_keys(d, n);
    if (!keys)
        return -1;
    qsort(keys, (size_t)n, sizeof *keys, by_class_prob_index);
    /* do_nms_sort per class: a box already suppressed (prob set to 0 in Darknet) suppresses
     * nothing; suppression needs the measure strictly above the threshold. */
    for (int start = 0; start < n;) {
        int end = start;
        while (end < n && keys[end].class_id == keys[start].class_id)
            end++;
        for (int i = start; i < end; i++) {
            if (keys[i].suppressed)
                continue;
            const gr_detection *a = &d[keys[i].index];
            for (int j = i + 1; j < end; j++) {
                if (!keys[j].suppressed && suppresses(a, &d[keys[j].index], k))
                    keys[j].suppressed = 1;
            }
        }
        start = end;
    }
    int kept = compact_sorted(d, keys, n);
    free(keys);
    return kept;
}

/* Sort without suppression (Darknet skips NMS when nms == 0). */
static int sort_by_prob(gr_detection *d, int n)
{
    if (n == 0)
        return 0;
    nms_key *keys = make_keys(d, n);
    if (!keys)
        return -1;
    int kept = compact_sorted(d, keys, n);
    free(keys);
    return kept;
}

static gr_status check_detect_options(const gr_detect_options *opt)
{
    if (!(opt->thresh >= 0.0f) || !isfinite(opt->thresh))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: threshold %g must be >= 0",
                       (double)opt->thresh);
    if (!(opt->nms >= 0.0f) || !isfinite(opt->nms))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: NMS threshold %g must be >= 0",
                       (double)opt->nms);
    bool no_size = opt->image_w == 0 && opt->image_h == 0;
    bool size_ok = opt->image_w > 0 && opt->image_h > 0 && opt->image_w <= GR_MAX_DIM &&
                   opt->image_h <= GR_MAX_DIM;
    if (!no_size && !size_ok)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "detect: image size %dx%d (both 0 for the network size, else 1..%d)",
                       opt->image_w, opt->image_h, GR_MAX_DIM);
    if ((unsigned)opt->preprocess > GR_PREPROCESS_LETTERBOX_114)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: preprocess=%d is not a gr_preprocess "
                       "(auto, letterbox, stretch or letterbox114)", (int)opt->preprocess);
    return GR_OK;
}

gr_status gr_detect_heads(const gr_head_output *heads, int n_heads, int net_w, int net_h,
                          const gr_detect_options *opt, gr_detection **dets, int *n)
{
    if (dets)
        *dets = NULL;
    if (n)
        *n = 0;
    if (!dets || !n || !opt || n_heads < 0 || (!heads && n_heads > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: NULL argument or bad head count %d",
                       n_heads);
    GR_TRY(check_detect_options(opt));
    if (net_w <= 0 || net_h <= 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: bad network size %dx%d", net_w, net_h);

    /* One pass over each head into an array that grows (a pass that only counts would decode,
     * and in raw heads activate, every box above the threshold twice). */
    det_sink sink = {.grow = true, .cap = 64};
    sink.out = gr_malloc(sink.cap * sizeof *sink.out, "detections");
    if (!sink.out)
        return GR_ERR_OUT_OF_MEMORY;
    for (int h = 0; h < n_heads; h++) {
        const gr_op_params *p = heads[h].params;
        gr_status st;
        if (!p)
            st = gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: head without params");
        else if (p->op != GR_OP_REGION && p->op != GR_OP_YOLO)
            st = gr_fail(GR_ERR_INVALID_ARGUMENT,
                         "detect: layer op %d is not a region or yolo head", (int)p->op);
        else
            st = decode_values(p->op, p, heads[h].values, heads[h].raw != 0, heads[h].shape,
                               net_w, net_h, opt->thresh, &sink);
        if (st != GR_OK) {
            free(sink.out);
            return gr_fail_prefix(st, "head %d: ", h);
        }
    }
    if (sink.oom || sink.count > INT_MAX) {
        free(sink.out);
        if (sink.count > INT_MAX)
            return gr_fail(GR_ERR_LIMIT, "detect: %lld detections above threshold %g",
                           sink.count, (double)opt->thresh);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "detect: out of memory for %lld detections",
                       sink.count);
    }
    /* AlexeyAB's test_detector takes the NMS kind of the network's last layer, the last head. */
    const gr_op_params *last = n_heads > 0 ? heads[n_heads - 1].params : NULL;
    gr_nms_params nms = {GR_NMS_DEFAULT, opt->nms, 0.6f, 1, 1};
    if (last && last->op == GR_OP_YOLO) {
        nms.kind = last->nms_kind;
        nms.beta = last->beta_nms;
    }
    return gr_detections_finish(sink.out, (int)sink.count, net_w, net_h, opt, &nms, dets, n);
}

gr_status gr_detections_finish(gr_detection *all, int count, int net_w, int net_h,
                               const gr_detect_options *opt, const gr_nms_params *kind,
                               gr_detection **dets, int *n)
{
    int im_w = opt->image_w ? opt->image_w : net_w;
    int im_h = opt->image_h ? opt->image_h : net_h;
    gr_detections_correct_letterbox(all, count, opt->preprocess, net_w, net_h, im_w, im_h);
    gr_nms_params nms = *kind;
    nms.thresh = opt->nms;
    nms.image_w = im_w;
    nms.image_h = im_h;
    int kept = opt->nms > 0.0f ? gr_nms_per_class_kind(all, count, &nms) : sort_by_prob(all, count);
    if (kept < 0) {
        free(all);
        return GR_ERR_OUT_OF_MEMORY;
    }
    gr_detections_clip(all, kept, im_w, im_h);
    *dets = all;
    *n = kept;
    return GR_OK;
}
