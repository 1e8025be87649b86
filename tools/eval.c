/* Detection accuracy (AP, mAP@0.5, mAP@0.5:0.95): the definitions are in eval.h. Each image is
 * matched when it is added, both ways (VOC, and COCO per IoU threshold and area range), so the
 * accumulator keeps only the probability and a few flag bits of every detection, per class. */
#include "tools/eval.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "runtime/detect.h"

/* COCO's area ranges (pycocotools' areaRng): all, small, medium, large; both ends inclusive. */
#define GR_EVAL_N_AREA 4
static const double area_range[GR_EVAL_N_AREA][2] = {
    {0, 1e10}, {0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e10}};

/* One detection as the accumulator keeps it. */
typedef struct det_rec {
    float prob;
    unsigned short voc_tp;              /* bit t: VOC true positive at threshold t */
    unsigned char coco_kept;            /* among the GR_EVAL_MAX_DETS best of its image */
    unsigned coco[GR_EVAL_N_AREA];      /* per area range: COCO_TP(t) and COCO_IGNORED(t) bits */
} det_rec;

#define COCO_TP(t) (1u << (t))
#define COCO_IGNORED(t) (1u << (16 + (t)))

typedef struct class_dets {
    det_rec *d;                 /* in the order added: images in order, each by rank */
    int n, cap;
    int n_gt;                   /* without crowd regions (VOC's ground truth) */
    int n_gt_area[GR_EVAL_N_AREA]; /* COCO: not ignored in each area range */
} class_dets;

struct gr_eval {
    int classes, images;
    long long gt, dets;
    class_dets *per_class;
};

/* numpy's linspace(.5, .95, 10): i * step + start, the last exactly the end, so that an IoU on a
 * threshold compares as in pycocotools. */
double gr_eval_iou_threshold(int i)
{
    if (i >= GR_EVAL_N_IOU - 1)
        return 0.95;
    double step = (0.95 - 0.5) / (GR_EVAL_N_IOU - 1);
    return (double)i * step + 0.5;
}

typedef struct scored {
    float prob;
    unsigned char tp;
    int index;
} scored;

/* Decreasing probability, NaN last, then the order given. */
static int by_prob_desc(const void *pa, const void *pb)
{
    const scored *x = pa, *y = pb;
    float a = x->prob, b = y->prob;
    if (a > b)
        return -1;
    if (a < b)
        return 1;
    int c = (int)isnan(a) - (int)isnan(b);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static bool same_prob(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/* COCO's interpolation (pycocotools' accumulate): prec[0..n) made monotone from the right, read
 * at the first point whose recall reaches each of 0, 0.01, ..., 1 (0 past the last); the mean. */
static double ap_101_point(const double *rec, double *prec, int n)
{
    for (int i = n - 1; i > 0; i--)
        if (prec[i] > prec[i - 1])
            prec[i - 1] = prec[i];
    double sum = 0.0;
    int i = 0;
    for (int r = 0; r <= 100; r++) {
        double at = r == 100 ? 1.0 : (double)r * 0.01; /* numpy's linspace(0, 1, 101) */
        while (i < n && rec[i] < at)
            i++;
        sum += i < n ? prec[i] : 0.0;
    }
    return sum / 101.0;
}

/* Precision as pycocotools has it: tp / (fp + tp + eps). */
static double coco_precision(double tp, double fp) { return tp / (fp + tp + DBL_EPSILON); }

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
    for (int i = 0; i < n; i++)
        s[i] = (scored){prob[i], tp[i] ? 1 : 0, i};
    qsort(s, (size_t)n, sizeof *s, by_prob_desc);
    /* VOC: one precision/recall point at the end of each group of equal probabilities. COCO: one
     * per detection, ties in the order given. */
    int points = 0;
    long long ctp = 0;
    for (int i = 0; i < n; i++) {
        ctp += s[i].tp;
        if (method != GR_AP_COCO && i + 1 < n && same_prob(s[i].prob, s[i + 1].prob))
            continue;
        rec[points] = (double)ctp / n_gt;
        prec[points] = method == GR_AP_COCO ? coco_precision((double)ctp, (double)(i + 1 - ctp))
                                            : (double)ctp / (i + 1);
        points++;
    }
    double ap = 0.0;
    if (method == GR_AP_COCO) {
        ap = ap_101_point(rec, prec, points);
    } else {
        for (int i = points - 2; i >= 0; i--) /* the envelope: best precision at this recall or more */
            if (prec[i + 1] > prec[i])
                prec[i] = prec[i + 1];
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
    for (int c = 0; c < ev->classes; c++)
        free(ev->per_class[c].d);
    free(ev->per_class);
    free(ev);
}

static gr_status push(class_dets *cd, const det_rec *r)
{
    if (cd->n == cd->cap) {
        if (cd->cap > (1 << 27))
            return gr_fail(GR_ERR_LIMIT, "eval: more than %d detections of one class", cd->cap);
        int cap = cd->cap ? 2 * cd->cap : 256;
        det_rec *d = realloc(cd->d, (size_t)cap * sizeof *d);
        if (!d)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory for %d detections", cap);
        cd->d = d;
        cd->cap = cap;
    }
    cd->d[cd->n++] = *r;
    return GR_OK;
}

/* IoU of two pixel boxes as pycocotools' bbIou computes it (in double); against a crowd region
 * the union is the detection's own area. */
static double coco_iou(const gr_detection *d, const gr_detection *g, bool crowd)
{
    double dl = d->left, dt = d->top, dr = d->right, db = d->bottom;
    double gl = g->left, gt = g->top, gr = g->right, gb = g->bottom;
    double w = fmin(dr, gr) - fmax(dl, gl);
    if (w <= 0)
        return 0.0;
    double h = fmin(db, gb) - fmax(dt, gt);
    if (h <= 0)
        return 0.0;
    double inter = w * h, da = (dr - dl) * (db - dt), ga = (gr - gl) * (gb - gt);
    return inter / (crowd ? da : da + ga - inter);
}

static double box_area(const gr_detection *b)
{
    double l = b->left, t = b->top, r = b->right, bottom = b->bottom;
    return (r - l) * (bottom - t);
}

/* One image's ground truth of one class, for COCO matching. */
typedef struct class_truth {
    const gr_detection *gt;
    const int *idx;      /* [n]: indices into gt of this class */
    int n;
    const double *area;  /* [n_gt of the image] or NULL */
    const unsigned char *crowd;
} class_truth;

/* pycocotools' evaluateImg for one class, area range `a` and every threshold: ranked[0..n) are
 * the image's kept detections of the class (by rank). rec[k].coco[a] gets the flags. */
static void coco_match(const gr_detection *dets, const int *ranked, int n, const class_truth *ct,
                       int a, int *order, unsigned char *ig, unsigned char *gtm, det_rec *rec)
{
    /* Ground truth: not ignored first, then ignored, each in the order given (a stable sort). */
    int m = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < ct->n; k++) {
            int g = ct->idx[k];
            double area = ct->area ? ct->area[g] : box_area(&ct->gt[g]);
            bool ignored = (ct->crowd && ct->crowd[g]) || area < area_range[a][0] ||
                           area > area_range[a][1];
            if (ignored == (pass == 1)) {
                ig[m] = ignored;
                order[m++] = g;
            }
        }
    for (int t = 0; t < GR_EVAL_N_IOU; t++) {
        memset(gtm, 0, (size_t)m);
        double thr = fmin(gr_eval_iou_threshold(t), 1 - 1e-10);
        for (int r = 0; r < n; r++) {
            const gr_detection *d = &dets[ranked[r]];
            double best = thr;
            int hit = -1;
            for (int k = 0; k < m; k++) {
                bool crowd = ct->crowd && ct->crowd[order[k]];
                if (gtm[k] && !crowd)
                    continue;
                if (hit >= 0 && !ig[hit] && ig[k])
                    break;
                double iou = coco_iou(d, &ct->gt[order[k]], crowd);
                if (iou < best)
                    continue;
                best = iou;
                hit = k;
            }
            if (hit >= 0) {
                gtm[hit] = 1;
                rec[r].coco[a] |= ig[hit] ? COCO_IGNORED(t) : COCO_TP(t);
            } else {
                double area = box_area(d);
                if (area < area_range[a][0] || area > area_range[a][1])
                    rec[r].coco[a] |= COCO_IGNORED(t);
            }
        }
    }
}

/* VOC matching of detection d against the image's ground truth: its bits. Crowd regions are not
 * ground truth here. */
static unsigned short voc_match(const gr_detection *d, const gr_detection *gt, int n_gt,
                                const unsigned char *crowd, unsigned short *taken)
{
    int best = -1;
    float best_iou = -1.0f;
    for (int g = 0; g < n_gt; g++) {
        if (gt[g].class_id != d->class_id || (crowd && crowd[g]))
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
        if ((double)best_iou >= 0.5 + 0.05 * t - 1e-9 && !(taken[best] & bit)) {
            taken[best] |= bit;
            tp |= bit;
        }
    }
    return tp;
}

/* Scratch of one image: detections by rank, and per-class lists. */
typedef struct image_scratch {
    scored *order;          /* [n_dets] by rank */
    int *ranked, *gt_idx, *gt_order;
    unsigned short *taken;  /* [n_gt] VOC */
    unsigned char *ig, *gtm;
    det_rec *rec;           /* [n_dets] */
} image_scratch;

static void scratch_free(image_scratch *s)
{
    free(s->order);
    free(s->ranked);
    free(s->gt_idx);
    free(s->gt_order);
    free(s->taken);
    free(s->ig);
    free(s->gtm);
    free(s->rec);
}

static gr_status scratch_alloc(image_scratch *s, int n_dets, int n_gt)
{
    size_t nd = (size_t)(n_dets ? n_dets : 1), ng = (size_t)(n_gt ? n_gt : 1);
    s->order = malloc(nd * sizeof *s->order);
    s->ranked = malloc(nd * sizeof *s->ranked);
    s->rec = calloc(nd, sizeof *s->rec);
    s->gt_idx = malloc(ng * sizeof *s->gt_idx);
    s->gt_order = malloc(ng * sizeof *s->gt_order);
    s->taken = calloc(ng, sizeof *s->taken);
    s->ig = malloc(ng);
    s->gtm = malloc(ng);
    if (!s->order || !s->ranked || !s->rec || !s->gt_idx || !s->gt_order || !s->taken || !s->ig ||
        !s->gtm)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory for an image of %d "
                                             "detections and %d boxes", n_dets, n_gt);
    return GR_OK;
}

static gr_status check_classes(const gr_eval *ev, const gr_detection *b, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (b[i].class_id < 0 || b[i].class_id >= ev->classes)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "eval: %s class %d (model has %d)", what,
                           b[i].class_id, ev->classes);
    return GR_OK;
}

/* Class c of one image: COCO-match its kept detections in every area range, VOC-match all, and
 * keep them (by rank). */
static gr_status add_class(gr_eval *ev, int c, const gr_detection *dets, int n_dets,
                           const gr_detection *gt, int n_gt, const double *gt_area,
                           const unsigned char *gt_crowd, image_scratch *s)
{
    int n = 0, kept;
    for (int r = 0; r < n_dets; r++)
        if (dets[s->order[r].index].class_id == c)
            s->ranked[n++] = s->order[r].index;
    int m = 0;
    for (int g = 0; g < n_gt; g++)
        if (gt[g].class_id == c)
            s->gt_idx[m++] = g;
    class_dets *cd = &ev->per_class[c];
    for (int k = 0; k < m; k++) {
        int g = s->gt_idx[k];
        if (gt_crowd && gt_crowd[g])
            continue;
        cd->n_gt++;
        double area = gt_area ? gt_area[g] : box_area(&gt[g]);
        for (int a = 0; a < GR_EVAL_N_AREA; a++)
            cd->n_gt_area[a] += area >= area_range[a][0] && area <= area_range[a][1];
    }
    kept = n < GR_EVAL_MAX_DETS ? n : GR_EVAL_MAX_DETS;
    memset(s->rec, 0, (size_t)(n ? n : 1) * sizeof *s->rec);
    class_truth ct = {gt, s->gt_idx, m, gt_area, gt_crowd};
    for (int a = 0; a < GR_EVAL_N_AREA && kept; a++)
        coco_match(dets, s->ranked, kept, &ct, a, s->gt_order, s->ig, s->gtm, s->rec);
    for (int r = 0; r < n; r++) {
        const gr_detection *d = &dets[s->ranked[r]];
        s->rec[r].prob = d->prob;
        s->rec[r].coco_kept = r < kept;
        s->rec[r].voc_tp = voc_match(d, gt, n_gt, gt_crowd, s->taken);
        GR_TRY(push(cd, &s->rec[r]));
    }
    return GR_OK;
}

gr_status gr_eval_add_image_coco(gr_eval *ev, const gr_detection *dets, int n_dets,
                                 const gr_detection *gt, int n_gt, const double *gt_area,
                                 const unsigned char *gt_crowd)
{
    if (!ev || n_dets < 0 || n_gt < 0 || (!dets && n_dets) || (!gt && n_gt))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_add_image: bad arguments");
    GR_TRY(check_classes(ev, dets, n_dets, "detection"));
    GR_TRY(check_classes(ev, gt, n_gt, "ground-truth"));
    image_scratch s = {0};
    gr_status st = scratch_alloc(&s, n_dets, n_gt);
    for (int i = 0; st == GR_OK && i < n_dets; i++)
        s.order[i] = (scored){dets[i].prob, 0, i};
    if (st == GR_OK && n_dets > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(s.order, (size_t)n_dets, sizeof *s.order, by_prob_desc);
    /* Whole images only: on an error the classes already added stay, so the caller stops. */
    for (int c = 0; st == GR_OK && c < ev->classes; c++)
        st = add_class(ev, c, dets, n_dets, gt, n_gt, gt_area, gt_crowd, &s);
    if (st == GR_OK) {
        long long crowd = 0;
        for (int g = 0; gt_crowd && g < n_gt; g++)
            crowd += gt_crowd[g] != 0;
        ev->images++;
        ev->gt += n_gt - crowd;
        ev->dets += n_dets;
    }
    scratch_free(&s);
    return st;
}

gr_status gr_eval_add_image(gr_eval *ev, const gr_detection *dets, int n_dets,
                            const gr_detection *gt, int n_gt)
{
    return gr_eval_add_image_coco(ev, dets, n_dets, gt, n_gt, NULL, NULL);
}

/* COCO AP of class cd in area range a at threshold t (-1: no ground truth there). rank[] are
 * the class's detections by decreasing probability, ties in the order added. */
static double coco_class_ap(const class_dets *cd, const int *rank, int a, int t, double *rec,
                            double *prec)
{
    int npig = cd->n_gt_area[a];
    if (npig == 0)
        return -1.0;
    double tp = 0, fp = 0;
    int n = 0;
    for (int i = 0; i < cd->n; i++) {
        const det_rec *d = &cd->d[rank[i]];
        if (!d->coco_kept)
            continue;
        if (!(d->coco[a] & COCO_IGNORED(t))) {
            if (d->coco[a] & COCO_TP(t))
                tp += 1;
            else
                fp += 1;
        }
        rec[n] = tp / npig;
        prec[n] = coco_precision(tp, fp);
        n++;
    }
    return ap_101_point(rec, prec, n);
}

/* VOC AP of class cd at threshold t (all-point or 11-point). */
static double voc_class_ap(const class_dets *cd, int t, gr_ap_method method, float *prob,
                           unsigned char *tp)
{
    for (int i = 0; i < cd->n; i++) {
        prob[i] = cd->d[i].prob;
        tp[i] = (unsigned char)((cd->d[i].voc_tp >> t) & 1u);
    }
    return gr_eval_ap(prob, tp, cd->n, cd->n_gt, method);
}

/* Work arrays for one class's results. */
typedef struct result_scratch {
    scored *s;
    int *rank;
    double *rec, *prec;
    float *prob;
    unsigned char *tp;
} result_scratch;

static void result_scratch_free(result_scratch *r)
{
    free(r->s);
    free(r->rank);
    free(r->rec);
    free(r->prec);
    free(r->prob);
    free(r->tp);
}

static gr_status result_scratch_alloc(result_scratch *r, int n)
{
    size_t k = (size_t)(n ? n : 1);
    r->s = malloc(k * sizeof *r->s);
    r->rank = malloc(k * sizeof *r->rank);
    r->rec = malloc(k * sizeof *r->rec);
    r->prec = malloc(k * sizeof *r->prec);
    r->prob = malloc(k * sizeof *r->prob);
    r->tp = malloc(k);
    if (!r->s || !r->rank || !r->rec || !r->prec || !r->prob || !r->tp)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory for %d detections", n);
    return GR_OK;
}

/* One class: ap[t] (area all) and, for COCO, ap_area[a] = mean over t in range a (-1: none). */
static gr_status class_result(const class_dets *cd, gr_ap_method method, gr_eval_class *out,
                              double ap_area[GR_EVAL_N_AREA])
{
    *out = (gr_eval_class){.n_gt = cd->n_gt, .n_dets = cd->n, .ap50_95 = -1.0};
    for (int t = 0; t < GR_EVAL_N_IOU; t++)
        out->ap[t] = -1.0;
    for (int a = 0; a < GR_EVAL_N_AREA; a++)
        ap_area[a] = -1.0;
    bool coco = method == GR_AP_COCO;
    int any_area = 0;
    for (int a = 0; a < GR_EVAL_N_AREA; a++)
        any_area |= cd->n_gt_area[a] > 0;
    if (coco ? !any_area : cd->n_gt == 0)
        return GR_OK;
    result_scratch r = {0};
    gr_status st = result_scratch_alloc(&r, cd->n);
    if (st == GR_OK && coco) {
        for (int i = 0; i < cd->n; i++)
            r.s[i] = (scored){cd->d[i].prob, 0, i};
        if (cd->n > 1)
            qsort(r.s, (size_t)cd->n, sizeof *r.s, by_prob_desc);
        for (int i = 0; i < cd->n; i++)
            r.rank[i] = r.s[i].index;
        for (int a = 0; a < GR_EVAL_N_AREA; a++) {
            if (cd->n_gt_area[a] == 0)
                continue;
            double sum = 0.0;
            for (int t = 0; t < GR_EVAL_N_IOU; t++) {
                double ap = coco_class_ap(cd, r.rank, a, t, r.rec, r.prec);
                sum += ap;
                if (a == 0)
                    out->ap[t] = ap;
            }
            ap_area[a] = sum / GR_EVAL_N_IOU;
        }
        out->ap50_95 = ap_area[0];
    } else if (st == GR_OK) {
        out->ap50_95 = 0.0;
        for (int t = 0; t < GR_EVAL_N_IOU && st == GR_OK; t++) {
            out->ap[t] = voc_class_ap(cd, t, method, r.prob, r.tp);
            if (out->ap[t] < 0)
                st = GR_ERR_OUT_OF_MEMORY;
            out->ap50_95 += out->ap[t] / GR_EVAL_N_IOU;
        }
    }
    result_scratch_free(&r);
    return st;
}

gr_status gr_eval_summarize(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                            gr_eval_summary *out)
{
    if (!ev || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_summarize: NULL argument");
    if (method != GR_AP_ALL_POINT && method != GR_AP_11_POINT && method != GR_AP_COCO)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_summarize: unknown method %d",
                       (int)method);
    double sum50 = 0, sum75 = 0, sum = 0, sum_area[GR_EVAL_N_AREA] = {0};
    int with_gt = 0, with_area[GR_EVAL_N_AREA] = {0};
    for (int c = 0; c < ev->classes; c++) {
        gr_eval_class r;
        double ap_area[GR_EVAL_N_AREA];
        GR_TRY(class_result(&ev->per_class[c], method, &r, ap_area));
        if (r.ap50_95 >= 0) {
            with_gt++;
            sum50 += r.ap[0];
            sum75 += r.ap[5];
            sum += r.ap50_95;
        }
        for (int a = 1; a < GR_EVAL_N_AREA; a++)
            if (ap_area[a] >= 0) {
                with_area[a]++;
                sum_area[a] += ap_area[a];
            }
        if (per_class)
            per_class[c] = r;
    }
    out->map50 = with_gt ? sum50 / with_gt : 0.0;
    out->map75 = with_gt ? sum75 / with_gt : 0.0;
    out->map50_95 = with_gt ? sum / with_gt : 0.0;
    for (int a = 1; a < GR_EVAL_N_AREA; a++)
        out->map_area[a - 1] = with_area[a] ? sum_area[a] / with_area[a] : -1.0;
    return GR_OK;
}

gr_status gr_eval_result(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                         double *map50, double *map50_95)
{
    if (!map50 || !map50_95)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_eval_result: NULL argument");
    gr_eval_summary s;
    GR_TRY(gr_eval_summarize(ev, method, per_class, &s));
    *map50 = s.map50;
    *map50_95 = s.map50_95;
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
