/* Check suite for runtime/detect.c: region and yolo decoding on constructed head tensors (box
 * coordinates worked out by hand from Darknet's formulas), thresholds, class-wise NMS with
 * Darknet's do_nms_sort semantics, letterbox correction and the whole gr_detect_heads chain. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "runtime/detect.h"

/* Box coordinates are a few float operations on values up to ~800 px: 1e-3 px is far above
 * float rounding (~1e-4 at that magnitude) and far below any real error. */
#define PX_TOL 1e-3
#define ASSERT_NEAR(a, b, tol) ck_assert_double_eq_tol((double)(a), (double)(b), (double)(tol))
#define ASSERT_EXACT(a, b) ck_assert_double_eq((double)(a), (double)(b))

/* Write `value` at entry e of anchor a at (row, col) of a head with `entries` per anchor. */
static void set_entry(float *t, int w, int h, int entries, int a, int e, int row, int col,
                      float value)
{
    t[((size_t)(a * entries + e) * (size_t)h + (size_t)row) * (size_t)w + (size_t)col] = value;
}

/* YOLOv2-tiny-voc's region head: 13x13, 5 anchors (in grid cells), 20 classes. */
static gr_op_params voc_region(void)
{
    static const float anchors[10] = {1.08f, 1.19f, 3.42f, 4.41f, 6.63f,
                                      11.38f, 9.42f, 5.11f, 16.62f, 10.52f};
    gr_op_params p;
    memset(&p, 0, sizeof p);
    p.op = GR_OP_REGION;
    p.classes = 20;
    p.coords = 4;
    p.num = 5;
    p.softmax = 1;
    memcpy(p.anchors, anchors, sizeof anchors);
    return p;
}

/* YOLOv3-tiny's first head: 13x13, mask 3,4,5 of 6 anchors (network pixels), 80 classes. */
static gr_op_params tiny_yolo(void)
{
    static const float anchors[12] = {10, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319};
    gr_op_params p;
    gr_op_params_default(GR_OP_YOLO, &p);
    p.classes = 80;
    p.num = 6;
    p.n_mask = 3;
    p.mask[0] = 3;
    p.mask[1] = 4;
    p.mask[2] = 5;
    memcpy(p.anchors, anchors, sizeof anchors);
    return p;
}

START_TEST(test_region_decode_box)
{
    gr_op_params p = voc_region();
    gr_shape s = {125, 13, 13};
    float *t = calloc(125 * 13 * 13, sizeof *t);
    /* Anchor 2 (6.63 x 11.38 cells) at row 4, column 7. */
    set_entry(t, 13, 13, 25, 2, 0, 4, 7, 0.25f);  /* x (already logistic) */
    set_entry(t, 13, 13, 25, 2, 1, 4, 7, 0.75f);  /* y */
    set_entry(t, 13, 13, 25, 2, 2, 4, 7, 0.5f);   /* tw (raw) */
    set_entry(t, 13, 13, 25, 2, 3, 4, 7, -0.25f); /* th */
    set_entry(t, 13, 13, 25, 2, 4, 4, 7, 0.9f);   /* objectness */
    set_entry(t, 13, 13, 25, 2, 5 + 3, 4, 7, 0.8f); /* class 3 */
    set_entry(t, 13, 13, 25, 2, 5 + 4, 4, 7, 0.1f); /* class 4: 0.09 <= thresh */
    gr_detection d[4];
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, d, 4), 1);
    /* By hand: centre x (7 + .25)/13, width exp(.5) * 6.63 / 13; centre y (4 + .75)/13, height
     * exp(-.25) * 11.38 / 13; corners = (centre -+ size/2) * 416. */
    double cx = 7.25 / 13, w = exp(0.5) * 6.63 / 13, cy = 4.75 / 13, h = exp(-0.25) * 11.38 / 13;
    ASSERT_NEAR(d[0].left, (cx - w / 2) * 416, PX_TOL);
    ASSERT_NEAR(d[0].right, (cx + w / 2) * 416, PX_TOL);
    ASSERT_NEAR(d[0].top, (cy - h / 2) * 416, PX_TOL);
    ASSERT_NEAR(d[0].bottom, (cy + h / 2) * 416, PX_TOL);
    ck_assert_int_eq(d[0].class_id, 3);
    ASSERT_NEAR(d[0].prob, 0.9 * 0.8, 1e-6);
    ASSERT_NEAR(d[0].objectness, 0.9, 1e-7);
    free(t);
}
END_TEST

START_TEST(test_region_thresholds_are_strict)
{
    gr_op_params p = voc_region();
    gr_shape s = {125, 13, 13};
    float *t = calloc(125 * 13 * 13, sizeof *t);
    /* Objectness exactly at the threshold: skipped (Darknet keeps obj > thresh). With real
     * class probabilities (<= 1) the product test alone would reject it too, so the class value
     * here is 1.5 to make the objectness gate itself observable: 0.5 * 1.5 = 0.75. */
    set_entry(t, 13, 13, 25, 0, 4, 0, 0, 0.5f);
    set_entry(t, 13, 13, 25, 0, 5, 0, 0, 1.5f);
    /* Objectness passes but 0.6 * 0.8 = 0.48 does not. */
    set_entry(t, 13, 13, 25, 1, 4, 1, 1, 0.6f);
    set_entry(t, 13, 13, 25, 1, 5, 1, 1, 0.8f);
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, NULL, 0), 0);
    /* 0.6 * 0.9 = 0.54 passes. */
    set_entry(t, 13, 13, 25, 1, 6, 1, 1, 0.9f);
    gr_detection d;
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, &d, 1), 1);
    ck_assert_int_eq(d.class_id, 1);
    /* A lower threshold lets the first cell through too. */
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.4f, NULL, 0), 3);
    free(t);
}
END_TEST

START_TEST(test_region_rejects_mismatched_params)
{
    gr_op_params p = voc_region();
    float t[4] = {0};
    gr_shape s = {124, 13, 13}; /* not 5 x (4 + 1 + 20) */
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, NULL, 0), -1);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "124"));
    p.op = GR_OP_YOLO;
    s.c = 125;
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, NULL, 0), -1);
    p = voc_region();
    ck_assert_int_eq(gr_decode_region(&p, NULL, s, 416, 416, 0.5f, NULL, 0), -1);
    ck_assert_int_eq(gr_decode_region(&p, t, s, 416, 416, 0.5f, NULL, 3), -1);
}
END_TEST

START_TEST(test_yolo_decode_box_and_classes)
{
    gr_op_params p = tiny_yolo();
    gr_shape s = {255, 13, 13};
    float *t = calloc(255 * 13 * 13, sizeof *t);
    /* Mask slot 1 = anchor 4 (135 x 169 px) at row 2, column 10. */
    set_entry(t, 13, 13, 85, 1, 0, 2, 10, 0.5f);
    set_entry(t, 13, 13, 85, 1, 1, 2, 10, 0.5f);
    set_entry(t, 13, 13, 85, 1, 2, 2, 10, 0.0f);
    set_entry(t, 13, 13, 85, 1, 3, 2, 10, (float)log(2.0));
    set_entry(t, 13, 13, 85, 1, 4, 2, 10, 0.95f);
    set_entry(t, 13, 13, 85, 1, 5 + 16, 2, 10, 0.6f);  /* 0.57 */
    set_entry(t, 13, 13, 85, 1, 5 + 7, 2, 10, 0.55f);  /* 0.5225 */
    set_entry(t, 13, 13, 85, 1, 5 + 40, 2, 10, 0.5f);  /* 0.475: below */
    gr_detection d[4];
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, d, 4), 2);
    /* By hand: centre (10.5/13 * 416, 2.5/13 * 416) = (336, 80); size (135 * e^0, 169 * 2). */
    for (int i = 0; i < 2; i++) {
        ASSERT_NEAR(d[i].left, 336 - 67.5, PX_TOL);
        ASSERT_NEAR(d[i].right, 336 + 67.5, PX_TOL);
        ASSERT_NEAR(d[i].top, 80 - 169, PX_TOL);
        ASSERT_NEAR(d[i].bottom, 80 + 169, PX_TOL);
        ASSERT_NEAR(d[i].objectness, 0.95, 1e-7);
    }
    /* Classes come out in class order for one box. */
    ck_assert_int_eq(d[0].class_id, 7);
    ASSERT_NEAR(d[0].prob, 0.95 * 0.55, 1e-6);
    ck_assert_int_eq(d[1].class_id, 16);
    ASSERT_NEAR(d[1].prob, 0.95 * 0.6, 1e-6);

    /* Counting without storage, and a short buffer only gets what fits. */
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, NULL, 0), 2);
    gr_detection one[2];
    memset(one, 0, sizeof one);
    one[1].class_id = -7;
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, one, 1), 2);
    ck_assert_int_eq(one[1].class_id, -7);
    /* Objectness at the threshold is skipped even though 0.5 * 1.2 = 0.6 would pass (a class
     * value above 1 only to make the objectness gate observable). */
    set_entry(t, 13, 13, 85, 1, 4, 2, 10, 0.5f);
    set_entry(t, 13, 13, 85, 1, 5 + 16, 2, 10, 1.2f);
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, NULL, 0), 0);
    free(t);
}
END_TEST

/* AlexeyAB's new_coords (yolo_layer.c get_yolo_box): w = tw * tw * 4 * anchor / net_w, and the
 * raw decoder applies no logistic (the conv did) but still scales x, y by scale_x_y. */
START_TEST(test_yolo_new_coords_and_scale_x_y)
{
    gr_op_params p = tiny_yolo();
    p.new_coords = 1;
    p.scale_x_y = 2.0f;
    gr_shape s = {255, 13, 13};
    float *t = calloc(255 * 13 * 13, sizeof *t);
    /* Raw (= the logistic conv's output): x 0.75 -> 0.75 * 2 - 0.5 = 1.0, y 0.25 -> 0. */
    set_entry(t, 13, 13, 85, 1, 0, 2, 10, 0.75f);
    set_entry(t, 13, 13, 85, 1, 1, 2, 10, 0.25f);
    set_entry(t, 13, 13, 85, 1, 2, 2, 10, 0.5f);  /* w = 0.25 * 4 * 135 = 135 px */
    set_entry(t, 13, 13, 85, 1, 3, 2, 10, 1.0f);  /* h = 4 * 169 = 676 px */
    set_entry(t, 13, 13, 85, 1, 4, 2, 10, 0.9f);
    set_entry(t, 13, 13, 85, 1, 5 + 3, 2, 10, 0.8f);
    gr_detection d[2];
    ck_assert_int_eq(gr_decode_yolo_raw(&p, t, s, 416, 416, 0.5f, d, 2), 1);
    /* centre ((10 + 1) / 13 * 416, (2 + 0) / 13 * 416) = (352, 64). */
    ASSERT_NEAR(d[0].left, 352 - 67.5, PX_TOL);
    ASSERT_NEAR(d[0].right, 352 + 67.5, PX_TOL);
    ASSERT_NEAR(d[0].top, 64 - 338, PX_TOL);
    ASSERT_NEAR(d[0].bottom, 64 + 338, PX_TOL);
    ASSERT_NEAR(d[0].objectness, 0.9, 1e-7); /* no logistic */
    ASSERT_NEAR(d[0].prob, 0.9 * 0.8, 1e-6);
    ck_assert_int_eq(d[0].class_id, 3);
    /* Without new_coords, scale_x_y 1.05 on the logistic: x = 0.5 * 1.05 - 0.025 = 0.5. */
    p.new_coords = 0;
    p.scale_x_y = 1.05f;
    memset(t, 0, 255 * 13 * 13 * sizeof *t);
    set_entry(t, 13, 13, 85, 1, 0, 2, 10, 2.0f); /* logistic 0.8808 -> 0.8998 */
    set_entry(t, 13, 13, 85, 1, 4, 2, 10, 5.0f);
    set_entry(t, 13, 13, 85, 1, 5, 2, 10, 5.0f);
    ck_assert_int_eq(gr_decode_yolo_raw(&p, t, s, 416, 416, 0.5f, d, 2), 1);
    double x = 1.0 / (1.0 + exp(-2.0)) * 1.05 - 0.025;
    ASSERT_NEAR((d[0].left + d[0].right) / 2, (10 + x) / 13 * 416, PX_TOL);
    ASSERT_NEAR((d[0].top + d[0].bottom) / 2, (2 + 0.5) / 13 * 416, PX_TOL);
    free(t);
}
END_TEST

START_TEST(test_yolo_rejects_bad_mask)
{
    gr_op_params p = tiny_yolo();
    float t[1] = {0};
    gr_shape s = {255, 13, 13};
    p.mask[2] = 6; /* only anchors 0..5 exist */
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, NULL, 0), -1);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "mask"));
    p = tiny_yolo();
    s.c = 256;
    ck_assert_int_eq(gr_decode_yolo(&p, t, s, 416, 416, 0.5f, NULL, 0), -1);
}
END_TEST

static gr_detection box(float l, float t, float r, float b, int class_id, float prob)
{
    gr_detection d = {l, t, r, b, class_id, prob, prob};
    return d;
}

START_TEST(test_nms_same_class_overlap)
{
    /* IoU = 9*9 / (100 + 100 - 81) = 0.68 > 0.45: the weaker one goes, whatever the order. */
    gr_detection d[2] = {box(1, 1, 11, 11, 4, 0.8f), box(0, 0, 10, 10, 4, 0.9f)};
    ck_assert_int_eq(gr_nms_per_class(d, 2, 0.45f), 1);
    ASSERT_NEAR(d[0].prob, 0.9, 1e-7);
    ASSERT_EXACT(d[0].left, 0);
}
END_TEST

/* AlexeyAB's diounms_sort: IoU = 65 / 135 = 0.481 (> 0.45: do_nms_sort suppresses), centres
 * 3.5 px apart in a 100 x 100 image, enclosing box 10 x 13.5: (d^2 / c^2) = 12.25 / 282.25 =
 * 0.0434. greedynms: 0.481 - 0.0434^0.6 = 0.329, kept; diounms with beta 6: 0.481 - 6.6e-9,
 * suppressed; with beta 0.6 kept like greedynms. */
START_TEST(test_nms_diou_kinds)
{
    gr_nms_params k = {GR_NMS_DEFAULT, 0.45f, 0.6f, 100, 100};
    gr_detection d[2] = {box(0, 0, 10, 10, 2, 0.9f), box(0, 3.5f, 10, 13.5f, 2, 0.8f)};
    ck_assert_int_eq(gr_nms_per_class_kind(d, 2, &k), 1);
    gr_detection e[2] = {box(0, 0, 10, 10, 2, 0.9f), box(0, 3.5f, 10, 13.5f, 2, 0.8f)};
    k.kind = GR_NMS_GREEDY;
    ck_assert_int_eq(gr_nms_per_class_kind(e, 2, &k), 2);
    gr_detection f[2] = {box(0, 0, 10, 10, 2, 0.9f), box(0, 3.5f, 10, 13.5f, 2, 0.8f)};
    k.kind = GR_NMS_DIOU;
    k.beta = 6.0f;
    ck_assert_int_eq(gr_nms_per_class_kind(f, 2, &k), 1);
    ASSERT_NEAR(f[0].prob, 0.9, 1e-7);
    gr_detection g[2] = {box(0, 0, 10, 10, 2, 0.9f), box(0, 3.5f, 10, 13.5f, 2, 0.8f)};
    k.beta = 0.6f;
    ck_assert_int_eq(gr_nms_per_class_kind(g, 2, &k), 2);
    /* The distance term is measured in coordinates relative to the image, as Darknet's boxes
     * are: in a 10 x 100 image the enclosing box is 1.0 x 0.135 and the centres 0.035 apart,
     * d^2/c^2 = 0.0012, ^0.6 = 0.018, DIoU 0.463 > 0.45: greedynms now suppresses (in pixels it
     * kept the pair, above). */
    gr_detection h[2] = {box(0, 0, 10, 10, 2, 0.9f), box(0, 3.5f, 10, 13.5f, 2, 0.8f)};
    k.kind = GR_NMS_GREEDY;
    k.image_w = 10;
    k.image_h = 100;
    ck_assert_int_eq(gr_nms_per_class_kind(h, 2, &k), 1);
    k.image_w = 0;
    ck_assert_int_eq(gr_nms_per_class_kind(h, 2, &k), -1);
}
END_TEST

START_TEST(test_nms_different_classes_kept)
{
    gr_detection d[2] = {box(0, 0, 10, 10, 1, 0.7f), box(0, 0, 10, 10, 2, 0.9f)};
    ck_assert_int_eq(gr_nms_per_class(d, 2, 0.45f), 2);
    /* Sorted by prob, descending. */
    ck_assert_int_eq(d[0].class_id, 2);
    ck_assert_int_eq(d[1].class_id, 1);
}
END_TEST

START_TEST(test_nms_iou_at_threshold_kept)
{
    /* A (3x3) inside B (4x5): IoU = 9 / (9 + 20 - 9) = 9/20, which in float is exactly 0.45f.
     * Darknet suppresses only when IoU > thresh, so at 0.45 both stay; at 0.44 one goes. */
    gr_detection a = box(0, 0, 3, 3, 0, 0.9f), b = box(0, 0, 4, 5, 0, 0.8f);
    ck_assert(gr_box_iou(&a, &b) == 0.45f);
    gr_detection d[2] = {a, b};
    ck_assert_int_eq(gr_nms_per_class(d, 2, 0.45f), 2);
    gr_detection e[2] = {a, b};
    ck_assert_int_eq(gr_nms_per_class(e, 2, 0.44f), 1);
}
END_TEST

START_TEST(test_nms_suppressed_box_suppresses_nothing)
{
    /* A suppresses B (IoU 50/150 = .33 > .3); B would suppress C (70/130 = .54) but is gone;
     * A and C overlap little (20/180 = .11), so C stays: do_nms_sort skips prob-0 boxes. */
    gr_detection d[3] = {box(8, 0, 18, 10, 3, 0.7f), box(0, 0, 10, 10, 3, 0.9f),
                         box(5, 0, 15, 10, 3, 0.8f)};
    ck_assert_int_eq(gr_nms_per_class(d, 3, 0.3f), 2);
    ASSERT_NEAR(d[0].prob, 0.9, 1e-7);
    ASSERT_NEAR(d[1].prob, 0.7, 1e-7);
    ASSERT_EXACT(d[1].left, 8);
    ck_assert_int_eq(gr_nms_per_class(d, 0, 0.3f), 0);
    ck_assert_int_eq(gr_nms_per_class(NULL, 2, 0.3f), -1);
}
END_TEST

START_TEST(test_iou_values)
{
    gr_detection a = box(0, 0, 10, 10, 0, 1), b = box(5, 5, 15, 15, 0, 1);
    ASSERT_NEAR(gr_box_iou(&a, &b), 25.0 / 175.0, 1e-7);
    gr_detection far_away = box(20, 20, 30, 30, 0, 1);
    ASSERT_EXACT(gr_box_iou(&a, &far_away), 0);
    gr_detection empty = box(3, 3, 3, 3, 0, 1);
    ASSERT_EXACT(gr_box_iou(&empty, &empty), 0);
}
END_TEST

START_TEST(test_letterbox_correction)
{
    /* 768x576 in 416x416: new 416x312 at rows 52..363, so network rows 52 and 364 are image
     * rows 0 and 576 and columns scale by 768/416. */
    gr_detection d = box(100, 52, 200, 364, 0, 1);
    gr_detections_correct_letterbox(&d, 1, GR_PREPROCESS_LETTERBOX, 416, 416, 768, 576);
    ASSERT_NEAR(d.left, 100.0 * 768 / 416, PX_TOL);
    ASSERT_NEAR(d.right, 200.0 * 768 / 416, PX_TOL);
    ASSERT_NEAR(d.top, 0, PX_TOL);
    ASSERT_NEAR(d.bottom, 576, PX_TOL);

    /* Odd padding: 100x50 in 10x10 gives new 10x5, pasted at integer row 2 but corrected with
     * Darknet's real offset (10-5)/2. = 2.5: network rows 2.5 and 7.5 are image rows 0 and 50. */
    gr_detection e = box(0, 2.5f, 10, 7.5f, 0, 1);
    gr_detections_correct_letterbox(&e, 1, GR_PREPROCESS_LETTERBOX, 10, 10, 100, 50);
    ASSERT_NEAR(e.top, 0, PX_TOL);
    ASSERT_NEAR(e.bottom, 50, PX_TOL);
    ASSERT_NEAR(e.right, 100, PX_TOL);

    /* Same size: the identity. */
    gr_detection f = box(-3, 7, 400, 415, 0, 1);
    gr_detections_correct_letterbox(&f, 1, GR_PREPROCESS_LETTERBOX, 416, 416, 416, 416);
    ASSERT_EXACT(f.left, -3);
    ASSERT_EXACT(f.bottom, 415);
}
END_TEST

START_TEST(test_stretch_correction)
{
    /* AlexeyAB's correct_yolo_boxes with letter = 0: no offset, x * 768/416 and y * 576/416 (a
     * letterbox correction would put network row 52 at image row 0). */
    gr_detection d = box(104, 52, 208, 364, 0, 1);
    gr_detections_correct_letterbox(&d, 1, GR_PREPROCESS_STRETCH, 416, 416, 768, 576);
    ASSERT_NEAR(d.left, 192, PX_TOL);
    ASSERT_NEAR(d.right, 384, PX_TOL);
    ASSERT_NEAR(d.top, 72, PX_TOL);
    ASSERT_NEAR(d.bottom, 504, PX_TOL);
    /* gr_detect_heads takes it from the options; AUTO (no engine) is the letterbox. */
    int w, h;
    gr_letterbox_size(GR_PREPROCESS_STRETCH, 768, 576, 320, 256, &w, &h);
    ck_assert(w == 320 && h == 256);
    gr_letterbox_size(GR_PREPROCESS_AUTO, 768, 576, 320, 256, &w, &h);
    ck_assert(w == 320 && h == 240);
}
END_TEST

START_TEST(test_clip)
{
    gr_detection d[2] = {box(-5, NAN, 900, 20, 0, 1), box(10, 20, 30, 40, 0, 1)};
    gr_detections_clip(d, 2, 768, 576);
    ASSERT_EXACT(d[0].left, 0);
    ASSERT_EXACT(d[0].top, 0);
    ASSERT_EXACT(d[0].right, 767);
    ASSERT_EXACT(d[0].bottom, 20);
    ASSERT_EXACT(d[1].left, 10);
    ASSERT_EXACT(d[1].bottom, 40);
}
END_TEST

START_TEST(test_options_default)
{
    gr_detect_options o;
    memset(&o, 0x7f, sizeof o);
    gr_detect_options_default(&o);
    ASSERT_EXACT(o.thresh, 0.5);
    ASSERT_EXACT(o.hier_thresh, 0.5);
    ASSERT_EXACT(o.nms, 0.45f);
    ck_assert_int_eq(o.image_w, 0);
    ck_assert_int_eq(o.image_h, 0);
    gr_detections_free(NULL);
}
END_TEST

/* One-anchor region head, 10 classes, anchor 3.25 x 3.25 cells = a quarter of the 13x13 grid,
 * so tw = th = 0 gives a 104 x 104 px box in a 416 network. */
START_TEST(test_detect_heads_pipeline)
{
    gr_op_params p;
    memset(&p, 0, sizeof p);
    p.op = GR_OP_REGION;
    p.classes = 10;
    p.coords = 4;
    p.num = 1;
    p.anchors[0] = 3.25f;
    p.anchors[1] = 3.25f;
    gr_shape s = {15, 13, 13};
    float *t = calloc(15 * 13 * 13, sizeof *t);
    /* Box 1: cell (6, 6), centre offsets .5: network box 156..260 both ways; class 5 at 0.8. */
    set_entry(t, 13, 13, 15, 0, 0, 6, 6, 0.5f);
    set_entry(t, 13, 13, 15, 0, 1, 6, 6, 0.5f);
    set_entry(t, 13, 13, 15, 0, 4, 6, 6, 1.0f);
    set_entry(t, 13, 13, 15, 0, 5 + 5, 6, 6, 0.8f);
    /* Box 2: cell (6, 7), x offset 0: columns 172..276 (IoU with box 1 = 88/120 = .73);
     * class 5 at 0.7 (suppressed by box 1) and class 9 at 0.6 (kept). */
    set_entry(t, 13, 13, 15, 0, 1, 6, 7, 0.5f);
    set_entry(t, 13, 13, 15, 0, 4, 6, 7, 1.0f);
    set_entry(t, 13, 13, 15, 0, 5 + 5, 6, 7, 0.7f);
    set_entry(t, 13, 13, 15, 0, 5 + 9, 6, 7, 0.6f);
    /* Box 3: cell (0, 0), offsets 0: network -52..52, off the image's top-left; class 2, 0.9. */
    set_entry(t, 13, 13, 15, 0, 4, 0, 0, 1.0f);
    set_entry(t, 13, 13, 15, 0, 5 + 2, 0, 0, 0.9f);

    gr_head_output head = {&p, t, s, 0};
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    opt.image_w = 768;
    opt.image_h = 576;
    gr_detection *d = NULL;
    int n = -1;
    ck_assert_int_eq(gr_detect_heads(&head, 1, 416, 416, &opt, &d, &n), GR_OK);
    ck_assert_int_eq(n, 3);
    /* In image pixels: x' = x * 768/416, y' = (y - 52) * 576/312, then clipped. */
    ck_assert_int_eq(d[0].class_id, 2);
    ASSERT_NEAR(d[0].left, 0, PX_TOL);
    ASSERT_NEAR(d[0].right, 52.0 * 768 / 416, PX_TOL);
    ASSERT_NEAR(d[0].top, 0, PX_TOL);
    ASSERT_NEAR(d[0].bottom, 0, PX_TOL);
    ck_assert_int_eq(d[1].class_id, 5);
    ASSERT_NEAR(d[1].prob, 0.8, 1e-6);
    ASSERT_NEAR(d[1].left, 288, PX_TOL);
    ASSERT_NEAR(d[1].right, 480, PX_TOL);
    ASSERT_NEAR(d[1].top, 192, PX_TOL);
    ASSERT_NEAR(d[1].bottom, 384, PX_TOL);
    ck_assert_int_eq(d[2].class_id, 9);
    ASSERT_NEAR(d[2].left, 172.0 * 768 / 416, PX_TOL);
    ASSERT_NEAR(d[2].right, 276.0 * 768 / 416, PX_TOL);
    gr_detections_free(d);

    /* A stretched input (opt.preprocess): y' = y * 576/416, no offset. */
    opt.preprocess = GR_PREPROCESS_STRETCH;
    ck_assert_int_eq(gr_detect_heads(&head, 1, 416, 416, &opt, &d, &n), GR_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(d[1].class_id, 5);
    ASSERT_NEAR(d[1].left, 288, PX_TOL);
    ASSERT_NEAR(d[1].top, 216, PX_TOL);
    ASSERT_NEAR(d[1].bottom, 360, PX_TOL);
    gr_detections_free(d);
    opt.preprocess = GR_PREPROCESS_AUTO;

    /* nms = 0 skips suppression (Darknet's `if (nms)`): all four (box, class) pairs. */
    opt.nms = 0;
    ck_assert_int_eq(gr_detect_heads(&head, 1, 416, 416, &opt, &d, &n), GR_OK);
    ck_assert_int_eq(n, 4);
    ASSERT_NEAR(d[0].prob, 0.9, 1e-6);
    ASSERT_NEAR(d[3].prob, 0.6, 1e-6);
    gr_detections_free(d);

    /* Two copies of the head behave as one head with everything twice: NMS spans heads. */
    gr_head_output two[2] = {head, head};
    opt.nms = 0.45f;
    ck_assert_int_eq(gr_detect_heads(two, 2, 416, 416, &opt, &d, &n), GR_OK);
    ck_assert_int_eq(n, 3);
    gr_detections_free(d);
    free(t);
}
END_TEST

START_TEST(test_detect_heads_rejects_bad_options)
{
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    gr_detection *d = (gr_detection *)1;
    int n = 5;
    ck_assert_int_eq(gr_detect_heads(NULL, 0, 416, 416, &opt, &d, &n), GR_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_nonnull(d);
    gr_detections_free(d);
    opt.thresh = -0.1f;
    ck_assert_int_eq(gr_detect_heads(NULL, 0, 416, 416, &opt, &d, &n), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(d);
    gr_detect_options_default(&opt);
    opt.image_w = 640; /* image_h left 0 */
    ck_assert_int_eq(gr_detect_heads(NULL, 0, 416, 416, &opt, &d, &n), GR_ERR_INVALID_ARGUMENT);
    gr_detect_options_default(&opt);
    opt.preprocess = (gr_preprocess)4;
    ck_assert_int_eq(gr_detect_heads(NULL, 0, 416, 416, &opt, &d, &n), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "detect: preprocess=4 is not a gr_preprocess"), "%s",
                  gr_last_error());
    ck_assert_int_eq(gr_detect_heads(NULL, 0, 416, 416, NULL, &d, &n), GR_ERR_INVALID_ARGUMENT);
    gr_op_params conv;
    memset(&conv, 0, sizeof conv);
    conv.op = GR_OP_CONV;
    float t[1] = {0};
    gr_head_output head = {&conv, t, {1, 1, 1}, 0};
    gr_detect_options_default(&opt);
    ck_assert_int_eq(gr_detect_heads(&head, 1, 416, 416, &opt, &d, &n), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "head 0"));
}
END_TEST

static Suite *detect_suite(void)
{
    Suite *s = suite_create("detect");
    TCase *tc = tcase_create("detect");
    tcase_add_test(tc, test_region_decode_box);
    tcase_add_test(tc, test_region_thresholds_are_strict);
    tcase_add_test(tc, test_region_rejects_mismatched_params);
    tcase_add_test(tc, test_yolo_decode_box_and_classes);
    tcase_add_test(tc, test_yolo_rejects_bad_mask);
    tcase_add_test(tc, test_nms_same_class_overlap);
    tcase_add_test(tc, test_nms_different_classes_kept);
    tcase_add_test(tc, test_nms_iou_at_threshold_kept);
    tcase_add_test(tc, test_nms_suppressed_box_suppresses_nothing);
    tcase_add_test(tc, test_iou_values);
    tcase_add_test(tc, test_letterbox_correction);
    tcase_add_test(tc, test_stretch_correction);
    tcase_add_test(tc, test_clip);
    tcase_add_test(tc, test_options_default);
    tcase_add_test(tc, test_yolo_new_coords_and_scale_x_y);
    tcase_add_test(tc, test_nms_diou_kinds);
    tcase_add_test(tc, test_detect_heads_pipeline);
    tcase_add_test(tc, test_detect_heads_rejects_bad_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(detect_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
