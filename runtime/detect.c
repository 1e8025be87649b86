/* Detection heads to boxes: region/yolo decoding, letterbox correction, class-wise NMS, clipping
 * (see detect.h for the pipeline). Every formula follows pjreddie Darknet's region_layer.c,
 * yolo_layer.c, box.c and image.c, including where Darknet mixes float and double arithmetic,
 * so thresholds and NMS decide the same way Darknet does. */
#include "runtime/detect.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gr_detect_options_default(gr_detect_options *opt)
{
    if (!opt)
        return;
    opt->thresh = 0.5f;
    opt->hier_thresh = 0.5f;
    opt->nms = 0.45f;
    opt->image_w = 0;
    opt->image_h = 0;
}

void gr_detections_free(gr_detection *dets) { free(dets); }

void gr_letterbox_size(int im_w, int im_h, int net_w, int net_h, int *new_w, int *new_h)
{
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

/* Appends one (box, class) detection when there is room; always counts it. */
static void emit(gr_detection *out, int max_out, long long *count, const gr_detection *d)
{
    if (*count < max_out)
        out[*count] = *d;
    (*count)++;
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

int gr_decode_region(const gr_op_params *p, const float *activated, gr_shape s, int net_w,
                     int net_h, float thresh, gr_detection *out, int max_out)
{
    if (!check_decode_args("region decode", p, activated, s, net_w, net_h, out, max_out))
        return -1;
    if (p->op != GR_OP_REGION || p->num < 1 || p->num > GR_MAX_ANCHORS || p->coords < 4) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "region decode: not a region head (op %d, num %d, coords %d)", (int)p->op, p->num,
                p->coords);
        return -1;
    }
    long long entries = (long long)p->coords + 1 + p->classes;
    if ((long long)s.c != entries * p->num) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "region decode: %d channels but num %d x (coords %d + 1 + classes %d) = %lld",
                s.c, p->num, p->coords, p->classes, entries * p->num);
        return -1;
    }
    size_t plane = (size_t)s.h * (size_t)s.w;
    long long count = 0;
    for (int row = 0; row < s.h; row++) {
        for (int col = 0; col < s.w; col++) {
            size_t cell = (size_t)row * (size_t)s.w + (size_t)col;
            for (int a = 0; a < p->num; a++) {
                const float *base = activated + (size_t)a * (size_t)entries * plane + cell;
                float objectness = base[(size_t)p->coords * plane];
                /* get_region_detections: objectness = scale > thresh ? scale : 0, and classes are
                 * only scored when it is nonzero. */
                if (!(objectness > thresh))
                    continue;
                gr_detection d;
                /* get_region_box: float centre, double exp() for the size, anchors in cells. */
                float x = ((float)col + base[0]) / (float)s.w;
                float y = ((float)row + base[plane]) / (float)s.h;
                float w = (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * a] / s.w);
                float h =
                    (float)(exp((double)base[3 * plane]) * (double)p->anchors[2 * a + 1] / s.h);
                set_corners(&d, x, y, w, h, net_w, net_h);
                d.objectness = objectness;
                for (int k = 0; k < p->classes; k++) {
                    float prob = objectness * base[((size_t)p->coords + 1 + (size_t)k) * plane];
                    if (prob > thresh) {
                        d.class_id = k;
                        d.prob = prob;
                        emit(out, max_out, &count, &d);
                    }
                }
            }
        }
    }
    return (int)count; /* <= elements of the head, checked <= INT_MAX above */
}

int gr_decode_yolo(const gr_op_params *p, const float *activated, gr_shape s, int net_w, int net_h,
                   float thresh, gr_detection *out, int max_out)
{
    if (!check_decode_args("yolo decode", p, activated, s, net_w, net_h, out, max_out))
        return -1;
    if (p->op != GR_OP_YOLO || p->n_mask < 1 || p->n_mask > GR_MAX_ANCHORS || p->num < 1 ||
        p->num > GR_MAX_ANCHORS) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "yolo decode: not a yolo head (op %d, mask %d, num %d)",
                (int)p->op, p->n_mask, p->num);
        return -1;
    }
    for (int m = 0; m < p->n_mask; m++) {
        if (p->mask[m] < 0 || p->mask[m] >= p->num) {
            gr_fail(GR_ERR_INVALID_ARGUMENT, "yolo decode: mask[%d] = %d is not an anchor of %d",
                    m, p->mask[m], p->num);
            return -1;
        }
    }
    long long entries = 5LL + p->classes;
    if ((long long)s.c != entries * p->n_mask) {
        gr_fail(GR_ERR_INVALID_ARGUMENT,
                "yolo decode: %d channels but mask %d x (5 + classes %d) = %lld", s.c, p->n_mask,
                p->classes, entries * p->n_mask);
        return -1;
    }
    size_t plane = (size_t)s.h * (size_t)s.w;
    long long count = 0;
    for (int row = 0; row < s.h; row++) {
        for (int col = 0; col < s.w; col++) {
            size_t cell = (size_t)row * (size_t)s.w + (size_t)col;
            for (int m = 0; m < p->n_mask; m++) {
                const float *base = activated + (size_t)m * (size_t)entries * plane + cell;
                float objectness = base[4 * plane];
                if (!(objectness > thresh)) /* get_yolo_detections: objectness <= thresh skips */
                    continue;
                int anchor = p->mask[m];
                gr_detection d;
                /* get_yolo_box: anchors in network pixels. */
                float x = ((float)col + base[0]) / (float)s.w;
                float y = ((float)row + base[plane]) / (float)s.h;
                float w =
                    (float)(exp((double)base[2 * plane]) * (double)p->anchors[2 * anchor] / net_w);
                float h = (float)(exp((double)base[3 * plane]) *
                                  (double)p->anchors[2 * anchor + 1] / net_h);
                set_corners(&d, x, y, w, h, net_w, net_h);
                d.objectness = objectness;
                for (int k = 0; k < p->classes; k++) {
                    float prob = objectness * base[(5 + (size_t)k) * plane];
                    if (prob > thresh) {
                        d.class_id = k;
                        d.prob = prob;
                        emit(out, max_out, &count, &d);
                    }
                }
            }
        }
    }
    return (int)count;
}

void gr_detections_correct_letterbox(gr_detection *d, int n, int net_w, int net_h, int im_w,
                                     int im_h)
{
    if (!d || n <= 0 || net_w <= 0 || net_h <= 0 || im_w <= 0 || im_h <= 0)
        return;
    int new_w, new_h;
    gr_letterbox_size(im_w, im_h, net_w, net_h, &new_w, &new_h);
    /* correct_region_boxes: x' = (x - (netw - new_w)/2./netw) / (new_w/netw), then * im_w.
     * Note Darknet's offset is a real half ((netw - new_w)/2.), while the image is pasted at the
     * integer (netw - new_w)/2: we reproduce both. */
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

int gr_nms_per_class(gr_detection *d, int n, float iou_thresh)
{
    if (n < 0 || (!d && n > 0)) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "NMS: bad detection array (n %d)", n);
        return -1;
    }
    if (n == 0)
        return 0;
    nms_key *keys = make_keys(d, n);
    if (!keys)
        return -1;
    qsort(keys, (size_t)n, sizeof *keys, by_class_prob_index);
    /* do_nms_sort per class: a box already suppressed (prob set to 0 in Darknet) suppresses
     * nothing; suppression needs IoU strictly above the threshold. */
    for (int start = 0; start < n;) {
        int end = start;
        while (end < n && keys[end].class_id == keys[start].class_id)
            end++;
        for (int i = start; i < end; i++) {
            if (keys[i].suppressed)
                continue;
            const gr_detection *a = &d[keys[i].index];
            for (int j = i + 1; j < end; j++) {
                if (!keys[j].suppressed && gr_box_iou(a, &d[keys[j].index]) > iou_thresh)
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
    return GR_OK;
}

static int decode_head(const gr_head_output *head, int net_w, int net_h, float thresh,
                       gr_detection *out, int max_out)
{
    if (!head->params) {
        gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: head without params");
        return -1;
    }
    if (head->params->op == GR_OP_REGION)
        return gr_decode_region(head->params, head->activated, head->shape, net_w, net_h, thresh,
                                out, max_out);
    if (head->params->op == GR_OP_YOLO)
        return gr_decode_yolo(head->params, head->activated, head->shape, net_w, net_h, thresh,
                              out, max_out);
    gr_fail(GR_ERR_INVALID_ARGUMENT, "detect: layer op %d is not a region or yolo head",
            (int)head->params->op);
    return -1;
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

    /* Count first so the array is allocated once, exactly. */
    size_t total = 0;
    for (int h = 0; h < n_heads; h++) {
        int c = decode_head(&heads[h], net_w, net_h, opt->thresh, NULL, 0);
        if (c < 0)
            return gr_fail_prefix(GR_ERR_INVALID_ARGUMENT, "head %d: ", h);
        total += (size_t)c;
    }
    if (total > (size_t)INT_MAX)
        return gr_fail(GR_ERR_LIMIT, "detect: %zu detections above threshold %g", total,
                       (double)opt->thresh);
    gr_detection *all = gr_calloc(total, sizeof *all, "detections");
    if (!all)
        return GR_ERR_OUT_OF_MEMORY;
    int count = 0;
    for (int h = 0; h < n_heads; h++) {
        int c = decode_head(&heads[h], net_w, net_h, opt->thresh, all + count, (int)total - count);
        if (c < 0 || c > (int)total - count) { /* the same call counted differently above */
            free(all);
            return gr_fail(GR_ERR_INTERNAL, "detect: head %d decoded %d boxes, counted fewer", h,
                           c);
        }
        count += c;
    }

    int im_w = opt->image_w ? opt->image_w : net_w;
    int im_h = opt->image_h ? opt->image_h : net_h;
    gr_detections_correct_letterbox(all, count, net_w, net_h, im_w, im_h);
    int kept = opt->nms > 0.0f ? gr_nms_per_class(all, count, opt->nms) : sort_by_prob(all, count);
    if (kept < 0) {
        free(all);
        return GR_ERR_OUT_OF_MEMORY;
    }
    gr_detections_clip(all, kept, im_w, im_h);
    *dets = all;
    *n = kept;
    return GR_OK;
}
