/* Check suite for tools/eval.c: AP and mAP on tiny cases worked out by hand (in the comments),
 * so a change to matching, tie handling or interpolation fails here. */
#include <check.h>
#include <stdlib.h>

#include "graphrun/runtime.h"
#include "tools/eval.h"

/* APs are sums of a few exact fractions: 1e-9 is far above double rounding. */
#define AP_TOL 1e-9
#define ASSERT_AP(a, b) ck_assert_double_eq_tol((a), (b), AP_TOL)

static gr_detection box(int class_id, float prob, float l, float t, float r, float b)
{
    gr_detection d = {.left = l, .top = t, .right = r, .bottom = b, .class_id = class_id,
                      .prob = prob, .objectness = prob};
    return d;
}

START_TEST(ap_perfect)
{
    const float prob[] = {0.9f, 0.8f};
    const unsigned char tp[] = {1, 1};
    ASSERT_AP(gr_eval_ap(prob, tp, 2, 2, GR_AP_ALL_POINT), 1.0);
    ASSERT_AP(gr_eval_ap(prob, tp, 2, 2, GR_AP_11_POINT), 1.0);
}
END_TEST

START_TEST(ap_false_positive_first)
{
    /* FP at 0.9, TP at 0.8, one GT: points (r 0, p 0), (r 1, p 1/2); envelope 1/2 -> AP 1/2. */
    const float prob[] = {0.8f, 0.9f}; /* given out of order on purpose */
    const unsigned char tp[] = {1, 0};
    ASSERT_AP(gr_eval_ap(prob, tp, 2, 1, GR_AP_ALL_POINT), 0.5);
}
END_TEST

START_TEST(ap_false_positive_last_costs_nothing)
{
    /* TP then FP: recall reaches 1 at precision 1 first. */
    const float prob[] = {0.9f, 0.8f};
    const unsigned char tp[] = {1, 0};
    ASSERT_AP(gr_eval_ap(prob, tp, 2, 1, GR_AP_ALL_POINT), 1.0);
}
END_TEST

START_TEST(ap_missed_object)
{
    /* Two GT, one found at precision 1: recall stops at 1/2 -> AP 1/2. */
    const float prob[] = {0.9f};
    const unsigned char tp[] = {1};
    ASSERT_AP(gr_eval_ap(prob, tp, 1, 2, GR_AP_ALL_POINT), 0.5);
}
END_TEST

START_TEST(ap_ties_are_one_step)
{
    /* A TP and an FP with the same probability: one point (r 1, p 1/2) whatever their order.
     * Ranking the TP first would give 1, the FP first 1/2. */
    const float prob[] = {0.7f, 0.7f};
    const unsigned char tp_first[] = {1, 0}, fp_first[] = {0, 1};
    ASSERT_AP(gr_eval_ap(prob, tp_first, 2, 1, GR_AP_ALL_POINT), 0.5);
    ASSERT_AP(gr_eval_ap(prob, fp_first, 2, 1, GR_AP_ALL_POINT), 0.5);
}
END_TEST

START_TEST(ap_all_point_vs_11_point)
{
    /* TP 0.9, FP 0.8, TP 0.7, three GT: points (1/3, 1), (1/3, 1/2), (2/3, 2/3); envelope
     * (1/3, 1), (1/3, 2/3), (2/3, 2/3).
     * All-point: 1/3 * 1 + 0 + 1/3 * 2/3 = 5/9.
     * 11-point: recall 0, .1, .2, .3 -> 1; .4, .5, .6 -> 2/3; .7 ... 1 -> 0: (4 + 2) / 11. */
    const float prob[] = {0.9f, 0.8f, 0.7f};
    const unsigned char tp[] = {1, 0, 1};
    ASSERT_AP(gr_eval_ap(prob, tp, 3, 3, GR_AP_ALL_POINT), 5.0 / 9.0);
    ASSERT_AP(gr_eval_ap(prob, tp, 3, 3, GR_AP_11_POINT), 6.0 / 11.0);
}
END_TEST

START_TEST(ap_interpolation_uses_later_precision)
{
    /* TP, FP, FP, TP, TP with four GT: precisions 1, 1/2, 1/3, 1/2, 3/5 at recalls 1/4, 1/4,
     * 1/4, 1/2, 3/4. Envelope at recall 1/2 and 3/4: 3/5. AP = 1/4 * 1 + 1/4 * 3/5 + 1/4 * 3/5. */
    const float prob[] = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f};
    const unsigned char tp[] = {1, 0, 0, 1, 1};
    ASSERT_AP(gr_eval_ap(prob, tp, 5, 4, GR_AP_ALL_POINT), 0.25 + 0.15 + 0.15);
}
END_TEST

START_TEST(ap_without_ground_truth_or_detections)
{
    const float prob[] = {0.9f};
    const unsigned char tp[] = {0};
    ck_assert_double_eq(gr_eval_ap(prob, tp, 1, 0, GR_AP_ALL_POINT), -1.0);
    ck_assert_double_eq(gr_eval_ap(NULL, NULL, 0, 3, GR_AP_ALL_POINT), 0.0);
}
END_TEST

static gr_eval *make_eval(int classes)
{
    gr_eval *ev = NULL;
    ck_assert_int_eq(gr_eval_create(classes, &ev), GR_OK);
    return ev;
}

START_TEST(match_duplicate_is_false_positive)
{
    /* Two detections on one object: the better one is the TP, the duplicate an FP ranked after
     * it: AP 1 (the FP comes after full recall). */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10)};
    gr_detection dets[] = {box(0, 0.5f, 1, 0, 11, 10), box(0, 0.9f, 0, 0, 10, 10)};
    ck_assert_int_eq(gr_eval_add_image(ev, dets, 2, gt, 1), GR_OK);
    gr_eval_class c;
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, &c, &m50, &m), GR_OK);
    ck_assert_int_eq(c.n_gt, 1);
    ck_assert_int_eq(c.n_dets, 2);
    ASSERT_AP(m50, 1.0);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(match_takes_the_most_overlapping_box_only)
{
    /* VOC matching: the second detection overlaps the taken GT most (IoU 90/110) and the free
     * one little (30/170), so it is an FP, not a match to the free box: AP 1/2. */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 8, 0, 18, 10)};
    gr_detection dets[] = {box(0, 0.9f, 0, 0, 10, 10), box(0, 0.8f, 1, 0, 11, 10)};
    ck_assert_int_eq(gr_eval_add_image(ev, dets, 2, gt, 2), GR_OK);
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, NULL, &m50, &m), GR_OK);
    ASSERT_AP(m50, 0.5);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(iou_thresholds_of_map50_95)
{
    /* IoU exactly 0.6 (60/100): a TP at thresholds 0.50, 0.55, 0.60 and an FP at the 7 others:
     * AP@0.5 1, AP@0.5:0.95 3/10. */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10)};
    gr_detection dets[] = {box(0, 0.9f, 0, 0, 10, 6)};
    ck_assert_int_eq(gr_eval_add_image(ev, dets, 1, gt, 1), GR_OK);
    gr_eval_class c;
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, &c, &m50, &m), GR_OK);
    ASSERT_AP(c.ap[0], 1.0);
    ASSERT_AP(c.ap[2], 1.0);
    ASSERT_AP(c.ap[3], 0.0);
    ASSERT_AP(c.ap50_95, 0.3);
    ASSERT_AP(m50, 1.0);
    ASSERT_AP(m, 0.3);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(map_over_classes_with_ground_truth)
{
    /* Class 0: found (AP 1). Class 1: one of two found (AP 1/2), in a second image. Class 2:
     * only a false positive, no ground truth: not in the mean. Wrong class never matches.
     * mAP = (1 + 1/2) / 2. */
    gr_eval *ev = make_eval(3);
    gr_detection gt1[] = {box(0, 0, 0, 0, 10, 10)};
    gr_detection dets1[] = {box(0, 0.9f, 0, 0, 10, 10), box(2, 0.95f, 0, 0, 10, 10)};
    gr_detection gt2[] = {box(1, 0, 20, 20, 40, 40), box(1, 0, 50, 50, 60, 60)};
    gr_detection dets2[] = {box(1, 0.6f, 20, 20, 40, 40)};
    ck_assert_int_eq(gr_eval_add_image(ev, dets1, 2, gt1, 1), GR_OK);
    ck_assert_int_eq(gr_eval_add_image(ev, dets2, 1, gt2, 2), GR_OK);
    ck_assert_int_eq(gr_eval_add_image(ev, NULL, 0, NULL, 0), GR_OK);
    gr_eval_class c[3];
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, c, &m50, &m), GR_OK);
    ASSERT_AP(c[0].ap[0], 1.0);
    ASSERT_AP(c[1].ap[0], 0.5);
    ck_assert_double_eq(c[2].ap[0], -1.0);
    ck_assert_int_eq(c[2].n_dets, 1);
    ASSERT_AP(m50, 0.75);
    int images;
    long long n_gt, n_dets;
    gr_eval_counts(ev, &images, &n_gt, &n_dets);
    ck_assert_int_eq(images, 3);
    ck_assert_int_eq((int)n_gt, 3);
    ck_assert_int_eq((int)n_dets, 3);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(ties_across_images)
{
    /* Equal probabilities in different images: TP in image 1, FP in image 2, one GT in all:
     * one point (r 1, p 1/2) -> AP 1/2 whichever image is added first. */
    for (int order = 0; order < 2; order++) {
        gr_eval *ev = make_eval(1);
        gr_detection gt[] = {box(0, 0, 0, 0, 10, 10)};
        gr_detection hit[] = {box(0, 0.7f, 0, 0, 10, 10)};
        gr_detection miss[] = {box(0, 0.7f, 50, 50, 60, 60)};
        if (order == 0) {
            ck_assert_int_eq(gr_eval_add_image(ev, hit, 1, gt, 1), GR_OK);
            ck_assert_int_eq(gr_eval_add_image(ev, miss, 1, NULL, 0), GR_OK);
        } else {
            ck_assert_int_eq(gr_eval_add_image(ev, miss, 1, NULL, 0), GR_OK);
            ck_assert_int_eq(gr_eval_add_image(ev, hit, 1, gt, 1), GR_OK);
        }
        double m50, m;
        ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, NULL, &m50, &m), GR_OK);
        ASSERT_AP(m50, 0.5);
        gr_eval_destroy(ev);
    }
}
END_TEST

START_TEST(coco_ap_101_point)
{
    /* TP, FP, TP over 2 GT: recall 1/2, 1/2, 1 at precision 1, 1/2, 2/3; made monotone 1, 2/3,
     * 2/3. The 51 recalls 0..0.50 read 1, the 50 above read 2/3: (51 + 50 * 2/3) / 101. (The
     * all-point AP would be 1/2 + 1/2 * 2/3.) */
    const float prob[] = {0.9f, 0.8f, 0.7f};
    const unsigned char tp[] = {1, 0, 1};
    ASSERT_AP(gr_eval_ap(prob, tp, 3, 2, GR_AP_COCO), (51.0 + 50.0 * 2.0 / 3.0) / 101.0);
    ASSERT_AP(gr_eval_ap(prob, tp, 3, 2, GR_AP_ALL_POINT), 0.5 + 0.5 * 2.0 / 3.0);
}
END_TEST

START_TEST(coco_ap_ties_in_the_order_given)
{
    /* pycocotools ranks equal scores in their order (a stable sort): TP first gives 1, FP first
     * 1/2 - unlike VOC's one step per group. */
    const float prob[] = {0.7f, 0.7f};
    const unsigned char tp_first[] = {1, 0}, fp_first[] = {0, 1};
    ASSERT_AP(gr_eval_ap(prob, tp_first, 2, 1, GR_AP_COCO), 1.0);
    ASSERT_AP(gr_eval_ap(prob, fp_first, 2, 1, GR_AP_COCO), 0.5);
}
END_TEST

START_TEST(coco_matches_the_free_box)
{
    /* Two objects, IoU 0.43 with each other. The second detection overlaps the taken box most
     * (82.5/117.5 = 0.70) and the free one by 77.5/122.5 = 0.63: COCO matches it to the free box
     * (AP50 1, as pycocotools: tests/data/pycocotools two_boxes_one_class), VOC calls it a false
     * positive (1/2). */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 4, 0, 14, 10)};
    gr_detection dets[] = {box(0, 0.9f, 4, 0, 14, 10), box(0, 0.8f, 2.25f, 0, 12.25f, 10)};
    ck_assert_int_eq(gr_eval_add_image(ev, dets, 2, gt, 2), GR_OK);
    gr_eval_summary coco, voc;
    ck_assert_int_eq(gr_eval_summarize(ev, GR_AP_COCO, NULL, &coco), GR_OK);
    ck_assert_int_eq(gr_eval_summarize(ev, GR_AP_ALL_POINT, NULL, &voc), GR_OK);
    ASSERT_AP(coco.map50, 1.0);
    ASSERT_AP(voc.map50, 0.5);
    /* IoU 0.63: both matched at 0.50..0.60, the second only up to 0.60 (3 of 10) -> at 0.65 and
     * above one of two found at precision 1: 101-point AP 51/101. */
    ASSERT_AP(coco.map75, 51.0 / 101.0);
    ck_assert_double_eq(voc.map_area[0], -1.0);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(coco_crowd_region_is_ignored)
{
    /* A detection inside a crowd region (IoU over its own area: 1) is neither true nor false
     * positive for COCO: AP 1. VOC leaves the region out: that detection, ranked first, is a
     * false positive: AP 1/2. The region is no ground truth either way. */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10), box(0, 0, 20, 20, 60, 60)};
    const double area[] = {100, 1600};
    const unsigned char crowd[] = {0, 1};
    gr_detection dets[] = {box(0, 0.9f, 25, 25, 35, 35), box(0, 0.8f, 0, 0, 10, 10),
                           box(0, 0.7f, 30, 30, 40, 40)};
    ck_assert_int_eq(gr_eval_add_image_coco(ev, dets, 3, gt, 2, area, crowd), GR_OK);
    gr_eval_class c;
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_COCO, &c, &m50, &m), GR_OK);
    ck_assert_int_eq(c.n_gt, 1);
    ASSERT_AP(m50, 1.0);
    ASSERT_AP(m, 1.0);
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, NULL, &m50, &m), GR_OK);
    ASSERT_AP(m50, 0.5);
    long long n_gt;
    gr_eval_counts(ev, NULL, &n_gt, NULL);
    ck_assert_int_eq((int)n_gt, 1);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(coco_keeps_100_detections_per_image_and_class)
{
    /* 101 detections of class 0 in one image; the only one on the object ranks last: COCO cuts
     * it (AP 0), VOC keeps it (recall 1 at precision 1/101). 101 of class 1 too, its object found
     * by the best: the cut is per class, class 1 keeps AP 1. */
    gr_eval *ev = make_eval(2);
    gr_detection gt[] = {box(0, 0, 0, 0, 10, 10), box(1, 0, 0, 0, 10, 10)};
    gr_detection dets[202];
    for (int i = 0; i < 101; i++) {
        float x = i == 100 ? 0.0f : 20.0f + (float)i * 11.0f;
        dets[i] = box(0, 0.9f - 0.001f * (float)i, x, 0, x + 10, 10);
        float x1 = i == 0 ? 0.0f : 20.0f + (float)i * 11.0f;
        dets[101 + i] = box(1, 0.9f - 0.001f * (float)i, x1, 0, x1 + 10, 10);
    }
    ck_assert_int_eq(gr_eval_add_image(ev, dets, 202, gt, 2), GR_OK);
    gr_eval_class c[2], v[2];
    double m50, m;
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_COCO, c, &m50, &m), GR_OK);
    ASSERT_AP(c[0].ap[0], 0.0);
    ASSERT_AP(c[1].ap[0], 1.0);
    ck_assert_int_eq(c[0].n_dets, 101);
    ck_assert_int_eq(gr_eval_result(ev, GR_AP_ALL_POINT, v, &m50, &m), GR_OK);
    ASSERT_AP(v[0].ap[0], 1.0 / 101.0);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(coco_area_ranges_use_the_area_given)
{
    /* A 40x40 box whose COCO area is 900: small (< 32^2), not medium. A missed large object.
     * A large unmatched detection is ignored for small (outside the range), a false positive in
     * "all". */
    gr_eval *ev = make_eval(1);
    gr_detection gt[] = {box(0, 0, 0, 0, 40, 40), box(0, 0, 100, 100, 200, 200)};
    const double area[] = {900, 10000};
    gr_detection dets[] = {box(0, 0.9f, 300, 300, 400, 400), box(0, 0.8f, 0, 0, 40, 40)};
    ck_assert_int_eq(gr_eval_add_image_coco(ev, dets, 2, gt, 2, area, NULL), GR_OK);
    gr_eval_summary s;
    ck_assert_int_eq(gr_eval_summarize(ev, GR_AP_COCO, NULL, &s), GR_OK);
    ASSERT_AP(s.map_area[0], 1.0);  /* small: the found box, the big false alarm ignored */
    ck_assert_double_eq(s.map_area[1], -1.0); /* medium: no ground truth */
    ASSERT_AP(s.map_area[2], 0.0);  /* large: missed, its only detection a false positive */
    /* all: FP then TP of 2 GT: recall 1/2 at precision 1/2 -> 51 of 101 recalls read 1/2. */
    ASSERT_AP(s.map50, 0.5 * 51.0 / 101.0);
    gr_eval_destroy(ev);
}
END_TEST

START_TEST(bad_arguments)
{
    gr_eval *ev = NULL;
    ck_assert_int_eq(gr_eval_create(0, &ev), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ev);
    ev = make_eval(2);
    gr_detection bad[] = {box(2, 0.5f, 0, 0, 1, 1)};
    ck_assert_int_eq(gr_eval_add_image(ev, bad, 1, NULL, 0), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_eval_add_image(ev, NULL, 0, bad, 1), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_eval_add_image(ev, NULL, 1, NULL, 0), GR_ERR_INVALID_ARGUMENT);
    int images;
    gr_eval_counts(ev, &images, NULL, NULL);
    ck_assert_int_eq(images, 0); /* rejected images are not counted */
    gr_eval_destroy(ev);
    gr_eval_destroy(NULL);
}
END_TEST

static Suite *eval_suite(void)
{
    Suite *s = suite_create("eval");
    TCase *tc = tcase_create("eval");
    tcase_add_test(tc, ap_perfect);
    tcase_add_test(tc, ap_false_positive_first);
    tcase_add_test(tc, ap_false_positive_last_costs_nothing);
    tcase_add_test(tc, ap_missed_object);
    tcase_add_test(tc, ap_ties_are_one_step);
    tcase_add_test(tc, ap_all_point_vs_11_point);
    tcase_add_test(tc, ap_interpolation_uses_later_precision);
    tcase_add_test(tc, ap_without_ground_truth_or_detections);
    tcase_add_test(tc, match_duplicate_is_false_positive);
    tcase_add_test(tc, match_takes_the_most_overlapping_box_only);
    tcase_add_test(tc, iou_thresholds_of_map50_95);
    tcase_add_test(tc, map_over_classes_with_ground_truth);
    tcase_add_test(tc, ties_across_images);
    tcase_add_test(tc, coco_ap_101_point);
    tcase_add_test(tc, coco_ap_ties_in_the_order_given);
    tcase_add_test(tc, coco_matches_the_free_box);
    tcase_add_test(tc, coco_crowd_region_is_ignored);
    tcase_add_test(tc, coco_keeps_100_detections_per_image_and_class);
    tcase_add_test(tc, coco_area_ranges_use_the_area_given);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(eval_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
