/* Detection accuracy: average precision per class and mAP, behind `graphrun eval`.
 *
 * Two metrics (docs/eval.md has the reasoning):
 *
 * GR_AP_COCO (the default of `graphrun eval`): pycocotools' COCOeval for boxes, rule for rule.
 *   - Per image and class, the detections are ranked by decreasing probability (ties keep the
 *     order they were given in) and only the first GR_EVAL_MAX_DETS are kept.
 *   - Each ground-truth box has an area (COCO's `area` field, else the box's) and may be a crowd
 *     region. For an area range (all, small < 32^2, medium, large > 96^2; both ends inclusive)
 *     a box outside it, or a crowd region, is "ignored"; ignored boxes come after the others.
 *   - Matching at IoU threshold t: each detection in rank order takes the still-unmatched
 *     ground truth of best IoU >= t (a crowd region stays available: it can be matched many
 *     times), preferring non-ignored boxes: once it has one, ignored ones are not considered.
 *     IoU is intersection over union of the pixel boxes, over the detection's own area against a
 *     crowd region. A detection matched to an ignored box, or unmatched and outside the area
 *     range, is ignored: neither true nor false positive.
 *   - AP of a class: its detections of every image by decreasing probability (ties in the order
 *     the images were added, then their rank); precision made monotone from the right and read
 *     at the 101 recalls 0, 0.01, ..., 1 (the first point reaching each; 0 past the last); AP is
 *     their mean. A class without non-ignored ground truth has no AP.
 *   - Thresholds 0.50, 0.55, ..., 0.95; mAP@0.5:0.95 the mean over classes and thresholds.
 *
 * GR_AP_ALL_POINT / GR_AP_11_POINT (`--metric voc` / `voc07`): Pascal VOC's devkit.
 *   - Matching, per image, class and IoU threshold t: detections in decreasing probability each
 *     take the ground-truth box of their class they overlap most (IoU of the pixel corner boxes,
 *     no +1); a true positive needs IoU >= t and that box not taken yet, anything else is a false
 *     positive. Crowd regions are left out (not ground truth, never matched).
 *   - AP of a class: detections of every image sorted by decreasing probability; a group of
 *     equal probabilities is one step (so the order of ties cannot change the result); precision
 *     made monotone from the right; all-point interpolation (VOC 2010+: sum over recall steps of
 *     delta-recall x precision) or VOC 2007's 11-point average.
 *
 * mAP: mean over the classes that have ground truth (a class without ground truth has no AP;
 * one with ground truth and no detections has AP 0). mAP@0.5 at t = 0.5; mAP@0.5:0.95 the mean
 * of the mAPs at t = 0.50, 0.55, ..., 0.95. */
#ifndef GR_TOOLS_EVAL_H
#define GR_TOOLS_EVAL_H

#include "graphrun/runtime.h"

#define GR_EVAL_N_IOU 10    /* 0.50, 0.55, ..., 0.95 */
#define GR_EVAL_MAX_DETS 100 /* COCO: detections kept per image and class */

typedef enum gr_ap_method { GR_AP_ALL_POINT = 0, GR_AP_11_POINT, GR_AP_COCO } gr_ap_method;

/* AP of one class from its detections: probability and true-positive flag of each (any order;
 * GR_AP_COCO breaks ties of probability by this order), and the number of ground-truth boxes.
 * Returns -1 when n_gt is 0 (no AP; also on allocation failure, with a message), else a value in
 * [0,1]. */
double gr_eval_ap(const float *prob, const unsigned char *tp, int n, int n_gt, gr_ap_method method);

/* The IoU thresholds: 0.5 + 0.05 * i (computed as numpy's linspace(.5, .95, 10) does). */
double gr_eval_iou_threshold(int i);

typedef struct gr_eval gr_eval;

/* An accumulator for `classes` classes. */
gr_status gr_eval_create(int classes, gr_eval **out);
void gr_eval_destroy(gr_eval *ev);

/* Add one image: its detections and its ground truth (gr_detection with class_id and corners;
 * prob unused), both in the same pixel coordinates. Class ids outside 0..classes-1 are an error.
 * The boxes' areas are their own and none is a crowd region. */
gr_status gr_eval_add_image(gr_eval *ev, const gr_detection *dets, int n_dets,
                            const gr_detection *gt, int n_gt);

/* The same with, per ground-truth box, its COCO area (gt_area, NULL: the boxes' own) and crowd
 * flag (gt_crowd, NULL: none). */
gr_status gr_eval_add_image_coco(gr_eval *ev, const gr_detection *dets, int n_dets,
                                 const gr_detection *gt, int n_gt, const double *gt_area,
                                 const unsigned char *gt_crowd);

typedef struct gr_eval_class {
    int n_gt, n_dets;         /* ground truth without crowd regions; every detection given */
    double ap[GR_EVAL_N_IOU]; /* -1 when n_gt is 0 */
    double ap50_95;           /* mean of ap[]; -1 when n_gt is 0 */
} gr_eval_class;

/* Per-class results (`classes` entries into `per_class`, may be NULL) and the two mAPs over the
 * classes with ground truth (0 when no class has any). */
gr_status gr_eval_result(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                         double *map50, double *map50_95);

typedef struct gr_eval_summary {
    double map50, map75, map50_95;
    /* GR_AP_COCO: mAP@0.5:0.95 of the small, medium and large objects (COCO's APs, APm, APl);
     * -1 where no class has such ground truth, and always for the VOC methods. */
    double map_area[3];
} gr_eval_summary;

/* gr_eval_result with mAP@0.75 and the COCO area ranges: pycocotools' stats[0..5]. */
gr_status gr_eval_summarize(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                            gr_eval_summary *out);

/* Totals: images added, ground-truth boxes (crowd regions not counted), detections. */
void gr_eval_counts(const gr_eval *ev, int *images, long long *gt, long long *dets);

#endif
