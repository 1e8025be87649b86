/* Detection accuracy: average precision per class and mAP, behind `graphrun eval`.
 *
 * Definitions (docs/eval.md has the reasoning):
 *   - Matching, per image, class and IoU threshold t (as Pascal VOC's devkit): detections in
 *     decreasing probability each take the ground-truth box of their class they overlap most
 *     (IoU of the pixel corner boxes, no +1); a true positive needs IoU >= t and that box not
 *     taken yet, anything else is a false positive.
 *   - AP of a class: detections of every image sorted by decreasing probability; a group of
 *     equal probabilities is one step (so the order of ties cannot change the result); precision
 *     made monotone from the right; all-point interpolation (VOC 2010+: sum over recall steps of
 *     delta-recall x precision) or, for comparison, VOC 2007's 11-point average.
 *   - mAP: mean over the classes that have ground truth (a class without ground truth has no AP;
 *     one with ground truth and no detections has AP 0). mAP@0.5 at t = 0.5; mAP@0.5:0.95 is the
 *     mean of the mAPs at t = 0.50, 0.55, ..., 0.95 (COCO's thresholds, all-point AP). */
#ifndef GR_TOOLS_EVAL_H
#define GR_TOOLS_EVAL_H

#include "graphrun/runtime.h"

#define GR_EVAL_N_IOU 10 /* 0.50, 0.55, ..., 0.95 */

typedef enum gr_ap_method { GR_AP_ALL_POINT = 0, GR_AP_11_POINT } gr_ap_method;

/* AP of one class from its detections: probability and true-positive flag of each (any order),
 * and the number of ground-truth boxes. Returns -1 when n_gt is 0 (no AP; also on allocation
 * failure, with a message), else a value in [0,1]. */
double gr_eval_ap(const float *prob, const unsigned char *tp, int n, int n_gt, gr_ap_method method);

/* The IoU thresholds: 0.5 + 0.05 * i. */
double gr_eval_iou_threshold(int i);

typedef struct gr_eval gr_eval;

/* An accumulator for `classes` classes. */
gr_status gr_eval_create(int classes, gr_eval **out);
void gr_eval_destroy(gr_eval *ev);

/* Add one image: its detections and its ground truth (gr_detection with class_id and corners;
 * prob unused), both in the same pixel coordinates. Class ids outside 0..classes-1 are an error. */
gr_status gr_eval_add_image(gr_eval *ev, const gr_detection *dets, int n_dets,
                            const gr_detection *gt, int n_gt);

typedef struct gr_eval_class {
    int n_gt, n_dets;
    double ap[GR_EVAL_N_IOU]; /* -1 when n_gt is 0 */
    double ap50_95;           /* mean of ap[]; -1 when n_gt is 0 */
} gr_eval_class;

/* Per-class results (`classes` entries into `per_class`, may be NULL) and the two mAPs over the
 * classes with ground truth (0 when no class has any). */
gr_status gr_eval_result(const gr_eval *ev, gr_ap_method method, gr_eval_class *per_class,
                         double *map50, double *map50_95);

/* Totals: images added, ground-truth boxes, detections. */
void gr_eval_counts(const gr_eval *ev, int *images, long long *gt, long long *dets);

#endif
