/* Check suite for COCO's side of the CLI: the JSON reader of tools/coco.c (values read, members
 * skipped, one malformed file per way JSON or COCO's schema can be broken, each error naming the
 * file and the byte offset), and the id rules of tools/results.c (coco80_to_91, image_id). */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/coco.h"
#include "tools/results.h"

static char path[256];

static const char *write_text(const char *text)
{
    static int counter;
    snprintf(path, sizeof path, "/tmp/gr_test_coco_%d_%d.json", (int)getpid(), counter++);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

START_TEST(reads_instances)
{
    const char *p = write_text(
        "{\"info\": {\"year\": 2017, \"nested\": [[1, 2e3, -0.5], {\"a\": null}]},\n"
        " \"images\": [{\"id\": 397133, \"file_name\": \"000000397133.jpg\", \"width\": 640,"
        " \"height\": 427, \"license\": 4},\n"
        "   {\"file_name\": \"caf\\u00e9 \\ud83d\\ude00\\\"q\\\".png\", \"id\": 7}],\n"
        " \"annotations\": [{\"segmentation\": [[1.5, 2, 3, 4]], \"area\": 12.5, \"iscrowd\": 0,"
        " \"image_id\": 397133, \"bbox\": [1.25, 2, 30, 40.5], \"category_id\": 18, \"id\": 1},\n"
        "   {\"image_id\": 7, \"category_id\": 1, \"bbox\": [0, 0, 1, 1], \"iscrowd\": 1,"
        " \"segmentation\": {\"counts\": [1, 2], \"size\": [3, 4]}},\n"
        "   {\"image_id\": 7, \"category_id\": 1, \"bbox\": [5, 6, 7, 8]}],\n"
        " \"categories\": [{\"supercategory\": \"animal\", \"id\": 18, \"name\": \"dog\"},"
        " {\"id\": 1, \"name\": \"person\"}]}");
    gr_coco c;
    ck_assert_int_eq(gr_coco_read_instances(p, &c), GR_OK);
    ck_assert_int_eq(c.n_images, 2);
    ck_assert_int_eq((int)c.images[0].id, 397133);
    ck_assert_str_eq(c.images[0].file_name, "000000397133.jpg");
    ck_assert_int_eq(c.images[0].width, 640);
    ck_assert_int_eq(c.images[0].height, 427);
    ck_assert_str_eq(c.images[1].file_name, "caf\xc3\xa9 \xf0\x9f\x98\x80\"q\".png");
    ck_assert_int_eq(c.images[1].width, 0);
    ck_assert_int_eq((int)c.n_boxes, 3);
    ck_assert_int_eq((int)c.boxes[0].image_id, 397133);
    ck_assert_int_eq(c.boxes[0].category_id, 18);
    ck_assert(c.boxes[0].bbox[0] == 1.25 && c.boxes[0].bbox[3] == 40.5);
    ck_assert_int_eq(c.boxes[0].iscrowd, 0);
    ck_assert_int_eq(c.boxes[1].iscrowd, 1);
    ck_assert_int_eq(c.boxes[2].iscrowd, 0); /* absent: 0 */
    ck_assert(c.boxes[0].has_area && c.boxes[0].area == 12.5); /* COCOeval's area ranges use it */
    ck_assert_int_eq(c.boxes[2].has_area, 0);
    ck_assert_int_eq(c.n_categories, 2);
    ck_assert_int_eq(c.categories[0].id, 18);
    ck_assert_str_eq(c.categories[0].name, "dog");
    gr_coco_free(&c);
    unlink(p);
}
END_TEST

START_TEST(reads_results)
{
    const char *p = write_text("[{\"image_id\": 3, \"category_id\": 1, \"bbox\": [3.9647198, "
                               "31.855438, 34.654953, 30.988934], \"score\": 0.99916315},\n"
                               " {\"image_id\": 4, \"category_id\": 2, \"bbox\": [0,0,0,0], "
                               "\"score\": 1e-3}]\n");
    gr_coco c;
    ck_assert_int_eq(gr_coco_read_results(p, &c), GR_OK);
    ck_assert_int_eq((int)c.n_boxes, 2);
    ck_assert((float)c.boxes[0].bbox[0] == 3.9647198f);
    ck_assert((float)c.boxes[0].score == 0.99916315f);
    ck_assert(c.boxes[1].score == 1e-3);
    gr_coco_free(&c);
    unlink(p);
    ck_assert_int_eq(gr_coco_read_results(write_text("[]"), &c), GR_OK);
    ck_assert_int_eq((int)c.n_boxes, 0);
    unlink(path);
}
END_TEST

/* Each malformed text: the error names the file and says `want` (which holds the byte offset). */
static const struct {
    const char *text, *want;
} bad_files[] = {
    {"", "byte 0: expected an object"},
    {"{\"images\": [{\"id\": 1}]}", "byte 12: image without \"file_name\""},
    {"{\"images\": [{\"file_name\": \"a.jpg\"}]}", "byte 12: image without \"id\""},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"},]}", "byte 40: expected an object"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a}]}", "byte 35: unterminated string"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\\q\"}]}", "byte 37: bad escape"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"\\ud800x\"}]}", "byte 36: high surrogate"},
    {"{\"images\": [{\"id\": 01, \"file_name\": \"a\"}]}", "byte 20: expected ',' or '}'"},
    {"{\"images\": [{\"id\": 1.5, \"file_name\": \"a\"}]}", "byte 19: id 1.5 is not an integer"},
    {"{\"images\": [{\"id\": NaN}]}", "byte 19: expected a number"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}] \"x\": 1}", "byte 41: expected ',' or '}'"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}]} x", "byte 42: text after the JSON value"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}], \"annotations\": [{\"image_id\": 1, "
     "\"category_id\": 1, \"bbox\": [1, 2, 3]}]}",
     "byte 100: bbox is not [x, y, width, height]"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}], \"annotations\": [{\"image_id\": 1, "
     "\"category_id\": 1, \"bbox\": [1, 2, -3, 4]}]}",
     "byte 107: bbox has a negative width"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}], \"annotations\": [{\"image_id\": 1, "
     "\"category_id\": 1, \"area\": -2, \"bbox\": [1, 2, 3, 4]}]}",
     "byte 100: negative area"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}], \"annotations\": [{\"image_id\": 1, "
     "\"bbox\": [1, 2, 3, 4]}]}",
     "byte 58: annotation without \"category_id\""},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}, {\"id\": 1, \"file_name\": \"b\"}], "
     "\"categories\": [{\"id\": 1, \"name\": \"x\"}]}",
     "two images have the id 1"},
    {"{\"images\": [{\"id\": 1, \"file_name\": \"a\"}]}", "no \"categories\""},
    {"{\"info\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
     "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
     "nested deeper than 64 levels"},
    {"{\"info\": \"a\x01\"}", "byte 11: control character in a string"},
    {"{\"info\": tru}", "byte 9: expected a value"},
};

START_TEST(refuses_malformed)
{
    const char *p = write_text(bad_files[_i].text);
    gr_coco c;
    ck_assert_int_eq(gr_coco_read_instances(p, &c), GR_ERR_PARSE);
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, p) && strstr(msg, bad_files[_i].want),
                  "case %d: got '%s', want the file and '%s'", _i, msg, bad_files[_i].want);
    ck_assert_ptr_null(strchr(msg, '\n'));
    ck_assert_ptr_null(c.images);
    unlink(p);
}
END_TEST

START_TEST(results_need_a_score)
{
    const char *p = write_text("[{\"image_id\": 3, \"category_id\": 1, \"bbox\": [1, 2, 3, 4]}]");
    gr_coco c;
    ck_assert_int_eq(gr_coco_read_results(p, &c), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "byte 1: result without \"score\""));
    unlink(p);
    ck_assert_int_eq(gr_coco_read_results("/nonexistent/r.json", &c), GR_ERR_IO);
}
END_TEST

START_TEST(coco_category_ids)
{
    /* The standard table's landmarks: person, the first gap (12), stop sign, toothbrush. */
    ck_assert_int_eq(gr_coco80_to_91(0), 1);
    ck_assert_int_eq(gr_coco80_to_91(10), 11);
    ck_assert_int_eq(gr_coco80_to_91(11), 13);
    ck_assert_int_eq(gr_coco80_to_91(79), 90);
    ck_assert_int_eq(gr_coco80_to_91(80), -1);
    ck_assert_int_eq(gr_coco80_to_91(-1), -1);
    const int gaps[] = {0, 12, 26, 29, 30, 45, 66, 68, 69, 71, 83, 91};
    for (size_t k = 0; k < sizeof gaps / sizeof gaps[0]; k++)
        ck_assert_int_eq(gr_coco91_to_80(gaps[k]), -1);
    for (int c = 0; c < 80; c++) {
        ck_assert_int_eq(gr_coco91_to_80(gr_coco80_to_91(c)), c);
        if (c)
            ck_assert_int_gt(gr_coco80_to_91(c), gr_coco80_to_91(c - 1));
    }
}
END_TEST

START_TEST(coco_image_ids)
{
    ck_assert_int_eq(gr_results_image_id("val2017/000000397133.jpg", 5), 397133);
    ck_assert_int_eq(gr_results_image_id("042.png", 5), 42);
    ck_assert_int_eq(gr_results_image_id("d.1/7", 5), 7);
    ck_assert_int_eq(gr_results_image_id("img_0042.jpg", 5), 5);
    ck_assert_int_eq(gr_results_image_id("12a.jpg", 5), 5);
    ck_assert_int_eq(gr_results_image_id(".jpg", 5), 5);
    ck_assert_int_eq(gr_results_image_id("dir/1234567890123456789.jpg", 5), 5); /* 19 digits */
    ck_assert(gr_results_image_id("123456789012345678.jpg", 5) == 123456789012345678LL);
}
END_TEST

START_TEST(format_names)
{
    const char *names[] = {"json", "jsonl", "coco", "yolo-txt", "csv"};
    for (int k = 0; k < 5; k++) {
        gr_result_format f;
        ck_assert(gr_result_format_parse(names[k], &f));
        ck_assert_str_eq(gr_result_format_name(f), names[k]);
    }
    gr_result_format f;
    ck_assert(!gr_result_format_parse("xml", &f));
    ck_assert(!gr_result_format_parse("default", &f));
    ck_assert(!gr_result_format_parse("JSON", &f));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coco");
    TCase *tc = tcase_create("coco");
    tcase_add_test(tc, reads_instances);
    tcase_add_test(tc, reads_results);
    tcase_add_loop_test(tc, refuses_malformed, 0, (int)(sizeof bad_files / sizeof bad_files[0]));
    tcase_add_test(tc, results_need_a_score);
    tcase_add_test(tc, coco_category_ids);
    tcase_add_test(tc, coco_image_ids);
    tcase_add_test(tc, format_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
