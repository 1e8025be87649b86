/* Detection accuracy (AP, mAP@0.5, mAP@0.5:0.95): the definitions are in eval.h. Each image is
 * matched once per IoU threshold when it is added, so the accumulator keeps only the probability
 * and one true-positive bit per threshold of every detection, per class. */
#include "tools/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/detect.h"

typedef struct class_dets {
    float *prob;
    unsigned short *tp; /* bit i: true positive at gr_eval_iou_threshold(i) */
    int n, cap, n_gt;
} class_dets;

struct gr_eval {
    int classes, images;
    long long gt, dets;
    class_dets *per_class;
};

double gr_eval_iou_threshold(int i) { return 0.5 + 0.05 * i; }

typedef struct scored {
    float prob;
    unsigned char tp;
} scored;

/* Decreasing probability, NaN last. */
static int by_prob_desc(const void *pa, const void *pb)
{
    float a = ((const scored *)pa)->prob, b = ((const scored *)pb)->prob;
    if (a > b)
        return -1;
    if (a < b)
        return 1;
    return (int)isnan(a) - (int)isnan(b);
}

static bool same_prob(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

double gr_eval_ap(const float *prob, const unsigned char *tp, int n, int n_gt, gr_ap_method method)
{
    if (n_gt <= 0)
        return -1.0;
    if (n <= 0 || !prob || !tp)
        return 0.0;
    scored *s = malloc((size_t)n * sizeof *s);
    double *rec = malloc((size_t)n * sizeof *rec);
    double *prec = malloc((size_t)n * sizeof *prec);
    if (!s || !rec || !prec) {
        free(s);
        free(rec);
        free(prec);
        gr_fail(GR_ERR_OUT_OF_MEMORY, "AP of %d detections: out of memory", n);
        return -1.0;
    }
    for (int i = 0; i < n; i++) {
        s[i].prob = prob[i];
        s[i].tp = tp[i] ? 1 : 0;
    }
    qsort(s, (size_t)n, sizeof *s, by_prob_desc);
    /* One precision/recall point at the end of each group of equal probabilities. */
    int points = 0;
    long long ctp = 0;
    for (int i = 0; i < n; i++) {
        ctp += s[i].tp;
        if (i + 1 < n && same_prob(s[i].prob, s[i + 1].prob))
            continue;
        rec[points] = (double)ctp / n_gt;
        prec[points] = (double)ctp / (i + 1);
        points++;
    }
    for (int i = points - 2; i >= 0; i--) /* the envelope: best precision at this recall or more */
        if (prec[i + 1] > prec[i])
            prec[i] = prec[i + 1];
    double ap = 0.0;
    if (method == GR_AP_11_POINT) {
        for (int k = 0; k <= 10; k++) {
            double r = k / 10.0, best = 0.0;
            for (int i = 0; i < points; i++)
                if (rec[i] >= r - 1e-12 && prec[i] > best)
                    best = prec[i];
            ap += best / 11.0;
        }
    } else {
        double prev = 0.0;
        for (int i = 0; i < points; i++) {
            ap += (rec[i] - prev) * prec[i];
            prev = rec[i];
        }
    }
    free(s);
    free(rec);
    free(prec);
    return ap;
}

gr_status gr_eval_create(int classes, gr_eval **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_create: NULL out");
    *out = NULL;
    if (classes < 1 || classes > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "eval: %d classes (1..%d)", classes, GR_MAX_DIM);
    gr_eval *ev = gr_calloc(1, sizeof *ev, "eval");
    if (!ev)
        return GR_ERR_OUT_OF_MEMORY;
    ev->per_class = gr_calloc((size_t)classes, sizeof *ev->per_class, "eval classes");
    if (!ev->per_class) {
        free(ev);
        return GR_ERR_OUT_OF_MEMORY;
    }
    ev->classes = classes;
    *out = ev;
    return GR_OK;
}

void gr_eval_destroy(gr_eval *ev)
{
    if (!ev)
        return;
    for (int c = 0; c < ev->classes; c++) {
        free(ev->per_class[c].prob);
        free(ev->per_class[c].tp);
    }
    free(ev->per_class);
    free(ev);
}

static gr_status push(class_dets *cd, float prob, unsigned short tp)
{
    if (cd->n == cd->cap) {
        if (cd->cap > (1 << 28))
            return gr_fail(GR_ERR_LIMIT, "eval: more than %d detections of one class", cd->cap);
        int cap = cd->cap ? 2 * cd->cap : 256;
        float *p = realloc(cd->prob, (size_t)cap * sizeof *p);
        if (p)
            cd->prob = p;
        unsigned short *t = realloc(cd->tp, (size_t)cap * sizeof *t);
        if (t)
            cd->tp = t;
        if (!p || !t)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory for %d detections", cap);
        cd->cap = cap;
    }
    cd->prob[cd->n] = prob;
    cd->tp[cd->n] = tp;
    cd->n++;
    return GR_OK;
}

typedef struct ranked {
    float prob;
    int index;
} ranked;

static int by_prob_then_index(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    int c = by_prob_desc(&(scored){a->prob, 0}, &(scored){b->prob, 0});
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

gr_status gr_eval_add_image(gr_eval *ev, const gr_detection *dets, int n_dets,
                            const gr_detection *gt, int n_gt)
{
    if (!ev || n_dets < 0 || n_gt < 0 || (!dets && n_dets) || (!gt && n_gt))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_add_image: bad arguments");
    for (int i = 0; i < n_dets; i++)
        if (dets[i].class_id < 0 || dets[i].class_id >= ev->classes)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "eval: detection class %d (model has %d)",
                           dets[i].class_id, ev->classes);
    for (int i = 0; i < n_gt; i++)
        if (gt[i].class_id < 0 || gt[i].class_id >= ev->classes)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "eval: ground-truth class %d (model has %d)",
                           gt[i].class_id, ev->classes);
    ranked *order = n_dets ? gr_malloc((size_t)n_dets * sizeof *order, "eval ranking") : NULL;
    unsigned short *taken = n_gt ? gr_calloc((size_t)n_gt, sizeof *taken, "eval matches") : NULL;
    gr_status st = GR_OK;
    if ((n_dets && !order) || (n_gt && !taken)) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (int i = 0; i < n_dets; i++)
        order[i] = (ranked){dets[i].prob, i};
    if (n_dets > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(order, (size_t)n_dets, sizeof *order, by_prob_then_index);
    for (int r = 0; r < n_dets && st == GR_OK; r++) {
        const gr_detection *d = &dets[order[r].index];
        int best = -1;
        float best_iou = -1.0f;
        for (int g = 0; g < n_gt; g++) {
            if (gt[g].class_id != d->class_id)
                continue;
            float iou = gr_box_iou(d, &gt[g]);
            if (iou > best_iou) {
                best_iou = iou;
                best = g;
            }
        }
        unsigned short tp = 0;
        for (int t = 0; t < GR_EVAL_N_IOU && best >= 0; t++) {
            unsigned short bit = (unsigned short)(1u << t);
            if ((double)best_iou >= gr_eval_iou_threshold(t) - 1e-9 && !(taken[best] & bit)) {
                taken[best] |= bit;
                tp |= bit;
            }
        }
        st = push(&ev->per_class[d->class_id], d->prob, tp);
    }
    if (st == GR_OK) {
        for (int g = 0; g < n_gt; g++)
            ev->per_class[gt[g].class_id].n_gt++;
        ev->images++;
        ev->gt += n_gt;
        ev->dets += n_dets;
    }
done:
    free(order);
    free(taken);
    return st;
}

gr_status gr_eval_result(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                         double *map50, double *map50_95)
{
    if (!ev || !map50 || !map50_95)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_result: NULL argument");
    double sum[GR_EVAL_N_IOU] = {0};
    int with_gt = 0;
    unsigned char *tp = NULL;
    for (int c = 0; c < ev->classes; c++) {
        const class_dets *cd = &ev->per_class[c];
        gr_eval_class r = {.n_gt = cd->n_gt, .n_dets = cd->n, .ap50_95 = -1.0};
        if (cd->n_gt > 0) {
            unsigned char *grown = cd->n ? realloc(tp, (size_t)cd->n) : tp;
            if (cd->n && !grown) {
                free(tp);
                return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory for class %d", c);
            }
            tp = grown;
            r.ap50_95 = 0.0;
            for (int t = 0; t < GR_EVAL_N_IOU; t++) {
                for (int i = 0; i < cd->n; i++)
                    tp[i] = (unsigned char)((cd->tp[i] >> t) & 1u);
                r.ap[t] = gr_eval_ap(cd->prob, tp, cd->n, cd->n_gt, method);
                if (r.ap[t] < 0) {
                    free(tp);
                    return GR_ERR_OUT_OF_MEMORY;
                }
                sum[t] += r.ap[t];
                r.ap50_95 += r.ap[t] / GR_EVAL_N_IOU;
            }
            with_gt++;
        } else {
            for (int t = 0; t < GR_EVAL_N_IOU; t++)
                r.ap[t] = -1.0;
        }
        if (per_class)
            per_class[c] = r;
    }
    free(tp);
    *map50 = with_gt ? sum[0] / with_gt : 0.0;
    double all = 0.0;
    for (int t = 0; t < GR_EVAL_N_IOU; t++)
        all += with_gt ? sum[t] / with_gt : 0.0;
    *map50_95 = all / GR_EVAL_N_IOU;
    return GR_OK;
}

void gr_eval_counts(const gr_eval *ev, int *images, long long *gt, long long *dets)
{
    if (images)
        *images = ev ? ev->images : 0;
    if (gt)
        *gt = ev ? ev->gt : 0;
    if (dets)
        *dets = ev ? ev->dets : 0;
}
