/* Detection heads to boxes: internal API behind gr_engine_detect() and the CLI.
 *
 * Pipeline, exactly as Darknet's test_detector runs it (docs/darknet.md):
 *   decode (gr_decode_region / gr_decode_yolo) on the ACTIVATED head tensor of one image
 *     -> boxes in network-input pixels, one gr_detection per (box, class) whose prob > thresh
 *   gr_detections_correct_letterbox -> original-image pixels (unclipped, Darknet's
 *     correct_region_boxes / correct_yolo_boxes; letterboxed or stretched input)
 *   gr_nms_per_class_kind           -> Darknet's do_nms_sort: per class, IoU > nms suppresses
 *                                      (AlexeyAB's diounms_sort for the last yolo head's nms_kind)
 *   gr_detections_clip              -> clipped to the image as Darknet's draw_detections does
 * gr_detect_heads() runs the whole chain over every head of a network.
 *
 * Thresholds are strict like Darknet's: a box needs objectness > thresh and each class
 * objectness * class_prob > thresh; NMS suppresses only when IoU > nms (equal is kept). */
#ifndef GR_RUNTIME_DETECT_H
#define GR_RUNTIME_DETECT_H

#include "ops/ops.h"

/* Decode a region (YOLOv2) head. `activated`: s.c x s.h x s.w floats, channel
 * a*(coords+1+classes)+e with logistic already applied to x, y, objectness and softmax to the
 * classes; anchors in grid cells. Writes at most max_out detections to `out` (out may be NULL
 * when max_out is 0) and returns how many there are in total (so a call with max_out 0 counts
 * them), or -1 with gr_last_error() set when the params and shape disagree. Boxes are in
 * network-input pixels (net_w x net_h), unclipped. */
int gr_decode_region(const gr_op_params *p, const float *activated, gr_shape s, int net_w,
                     int net_h, float thresh, gr_detection *out, int max_out);

/* Decode a yolo (YOLOv3) head: channel n*(5+classes)+e for the n_mask anchors picked by mask
 * (anchors in network pixels), logistic already applied to x, y, objectness and classes. Same
 * contract as gr_decode_region. */
int gr_decode_yolo(const gr_op_params *p, const float *activated, gr_shape s, int net_w, int net_h,
                   float thresh, gr_detection *out, int max_out);

/* The same decoders on the head's RAW values (the conv output the region/yolo layer reads, as
 * gr_engine_output gives it): they apply the layer's activation themselves (ops/region.c,
 * ops/yolo.c), and only where it can change the result: x, y and the classes of a box whose
 * objectness (computed first, exactly as the reference activation computes it) is <= thresh are
 * never read, since Darknet drops that box whatever they hold. Results equal, bit for bit and in
 * order, the activated decoders' on the reference activation of the same values, for any thresh
 * (tests/test_detect_raw.c); no head-sized scratch memory. */
int gr_decode_region_raw(const gr_op_params *p, const float *raw, gr_shape s, int net_w,
                         int net_h, float thresh, gr_detection *out, int max_out);
int gr_decode_yolo_raw(const gr_op_params *p, const float *raw, gr_shape s, int net_w, int net_h,
                       float thresh, gr_detection *out, int max_out);

/* Darknet's preprocessing geometry: the size (new_w, new_h) the im_w x im_h image is resized to
 * inside net_w x net_h. LETTERBOX: letterbox_image's (integer division; at least 1 pixel, where
 * Darknet would divide by zero or read garbage); STRETCH (AlexeyAB's resize_image to the network
 * size): net_w x net_h. Shared by every preprocessing (CPU, GPU, the fast JPEG decode) and the
 * box correction so they agree; anything but STRETCH is taken as LETTERBOX. */
void gr_letterbox_size(gr_preprocess how, int im_w, int im_h, int net_w, int net_h, int *new_w,
                       int *new_h);

/* Map boxes from network-input pixels of an input made by `how` back to pixels of the im_w x im_h
 * original (Darknet's correct_*_boxes, including its (net_w - new_w)/2. offset, 0 when
 * stretched). No clipping. */
void gr_detections_correct_letterbox(gr_detection *d, int n, gr_preprocess how, int net_w,
                                     int net_h, int im_w, int im_h);

/* Clip boxes to [0, im_w-1] x [0, im_h-1] (Darknet's draw_detections clip). NaN -> 0. */
void gr_detections_clip(gr_detection *d, int n, int im_w, int im_h);

/* Class-wise NMS with Darknet's do_nms_sort semantics: within each class, in order of
 * decreasing prob, a kept box suppresses every later box whose IoU with it is > iou_thresh.
 * Compacts the kept detections to the front of `d`, sorted by prob descending (ties: class,
 * then original order), and returns their count; -1 (with a message) if scratch memory cannot
 * be allocated, in which case `d` is unchanged. */
int gr_nms_per_class(gr_detection *d, int n, float iou_thresh);

/* NMS with AlexeyAB's kinds (diounms_sort): per class as gr_nms_per_class, suppressing where
 * the kind's measure (IoU, or IoU - (d^2/c^2)^beta in coordinates relative to the image_w x
 * image_h image, as Darknet computes it) is > thresh. */
typedef struct gr_nms_params {
    gr_nms_kind kind;
    float thresh;
    float beta;          /* GR_NMS_DIOU's exponent (beta_nms) */
    int image_w, image_h; /* the boxes' image, >= 1 */
} gr_nms_params;
int gr_nms_per_class_kind(gr_detection *d, int n, const gr_nms_params *k);

/* Intersection over union of two corner boxes; 0 when they do not overlap or both are empty. */
float gr_box_iou(const gr_detection *a, const gr_detection *b);

/* One detection head of a network for one image: the region/yolo layer's params and its
 * activated output, or (raw = 1) its raw input, decoded by the *_raw decoders. */
typedef struct gr_head_output {
    const gr_op_params *params; /* op must be GR_OP_REGION or GR_OP_YOLO */
    const float *values;
    gr_shape shape;
    int raw; /* 0: `values` are activated; 1: raw (the conv output) */
} gr_head_output;

/* Decode every head, undo the preprocessing (opt->preprocess: STRETCH, else the letterbox) to
 * opt->image_w x image_h (0 = network size), run NMS
 * (skipped when opt->nms == 0, as Darknet does) and clip. *dets is a malloc'd array (free with
 * gr_detections_free; non-NULL even when *n is 0), sorted by prob descending. */
gr_status gr_detect_heads(const gr_head_output *heads, int n_heads, int net_w, int net_h,
                          const gr_detect_options *opt, gr_detection **dets, int *n);

/* The chain after decoding, for any decoder: `all` (count boxes in network pixels, malloc'd; taken
 * over, freed on failure) mapped to the image, NMS of kind->kind / beta at opt->nms, clipped. */
gr_status gr_detections_finish(gr_detection *all, int count, int net_w, int net_h,
                               const gr_detect_options *opt, const gr_nms_params *kind,
                               gr_detection **dets, int *n);

/* An ONNX detection head run on the host (models/onnx/tail.h), for image `batch_index` of the
 * engine's outputs (net->n_outputs tensors of batch images each): gr_detect_tail decodes it into
 * detections (runtime/detect_tail.c: docs/onnx.md's layouts and scores) and gr_detect_tail_output
 * gives the graph's output itself (malloc'd floats; its dims from gr_tail_output_dims). */
struct gr_net;
gr_status gr_detect_tail(const struct gr_net *net, const float *const *outputs, int batch_index,
                         const gr_detect_options *opt, gr_detection **dets, int *n);
gr_status gr_detect_tail_output(const struct gr_net *net, const float *const *outputs,
                                int batch_index, float **data);

/* Darknet's get_color(c, x, max) for channel c (0 blue, 1 green, 2 red in Darknet's call order)
 * and its per-class offset: the box colour of class_id among `classes`, as RGB bytes. */
void gr_class_color(int class_id, int classes, uint8_t rgb[3]);

/* Drawing without a model: `classes` sets the colour spread (<= 0: max class_id + 1), and
 * `label` names a class (NULL, or returning NULL: "class N"). gr_image_draw_detections() is this
 * with the model's class count and names. */
typedef const char *(*gr_class_label_fn)(const void *ctx, int class_id);
gr_status gr_draw_detections_labelled(gr_image *im, const gr_detection *dets, int n, int classes,
                                      gr_class_label_fn label, const void *ctx);

#endif
