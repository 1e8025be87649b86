/* Check suite for the channel contract of the image functions (runtime/image/, runtime.h):
 * caller-built images of 1, 2, 3 and 4 channels, each in a buffer of exactly w x h x c bytes (so
 * that the ASan build, -DGR_SANITIZE=address,undefined, catches any read or write past it),
 * through every public function that takes a gr_image. The letterboxes take 3 channels only;
 * drawing takes 3 or 4 (alpha untouched); writing takes 1 to 4; everything else is refused with
 * GR_ERR_INVALID_ARGUMENT and a message that says how many channels it got. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/detect.h"
#include "runtime/image/image.h"

#define W 23
#define H 17
#define NET 16

/* A W x H image of c channels with exactly W*H*c bytes. */
static gr_image make_image(int c)
{
    gr_image im = {.w = W, .h = H, .c = c, .data = malloc((size_t)W * H * (size_t)c)};
    ck_assert_ptr_nonnull(im.data);
    for (size_t i = 0; i < (size_t)W * H * (size_t)c; i++)
        im.data[i] = (uint8_t)(i * 37u + 11u);
    return im;
}

static void expect_channels_refused(gr_status st, int c)
{
    ck_assert_int_eq(st, GR_ERR_INVALID_ARGUMENT);
    char want[32];
    snprintf(want, sizeof want, "image has %d channels", c);
    ck_assert_msg(strstr(gr_last_error(), want), "message: %s", gr_last_error());
}

/* The four letterboxes: 3 channels only. */
START_TEST(test_letterbox_channels)
{
    int c = _i + 1;
    gr_image im = make_image(c);
    float *f = malloc(sizeof(float) * NET * NET * 3);
    uint8_t *u = malloc(NET * NET * 3);
    ck_assert(f && u);
    gr_status st[4] = {gr_image_letterbox(&im, NET, NET, f), gr_image_letterbox_u8(&im, NET, NET, u),
                       gr_image_letterbox_reference(&im, GR_PREPROCESS_LETTERBOX, NET, NET, f),
                       gr_image_letterbox_reference_u8(&im, GR_PREPROCESS_LETTERBOX, NET, NET, u)};
    for (int i = 0; i < 4; i++) {
        if (c == 3) {
            ck_assert_int_eq(st[i], GR_OK);
        } else {
            /* gr_last_error holds the last call's message: check that one, and every status. */
            ck_assert_int_eq(st[i], GR_ERR_INVALID_ARGUMENT);
        }
    }
    if (c != 3)
        expect_channels_refused(gr_image_letterbox_u8(&im, NET, NET, u), c);
    free(f);
    free(u);
    free(im.data);
}
END_TEST

/* Drawing: 3 or 4 channels; a box's pixels get the class colour, a 4th channel is untouched. */
START_TEST(test_draw_channels)
{
    int c = _i + 1;
    gr_image im = make_image(c);
    uint8_t *before = malloc((size_t)W * H * (size_t)c);
    ck_assert_ptr_nonnull(before);
    memcpy(before, im.data, (size_t)W * H * (size_t)c);
    /* The label (12 rows at this height) goes above the box, in rows 2..13. */
    gr_detection det = {.left = 2, .top = 14, .right = 20, .bottom = 16, .class_id = 1,
                        .prob = 0.9f, .objectness = 0.9f};
    gr_status st = gr_image_draw_detections(&im, &det, 1, NULL);
    if (c != 3 && c != 4) {
        expect_channels_refused(st, c);
        ck_assert_mem_eq(im.data, before, (size_t)W * H * (size_t)c);
    } else {
        ck_assert_int_eq(st, GR_OK);
        uint8_t rgb[3];
        gr_class_color(1, 2, rgb); /* no model: colours spread over the classes present (2) */
        const uint8_t *corner = im.data + ((size_t)16 * W + 20) * (size_t)c;
        ck_assert_mem_eq(corner, rgb, 3);
        for (size_t p = 0; c == 4 && p < (size_t)W * H; p++)
            ck_assert_uint_eq(im.data[p * 4 + 3], before[p * 4 + 3]);
    }
    free(before);
    free(im.data);
}
END_TEST

/* Writing: 1 to 4 channels, PNG and JPEG; the PNG reads back as RGB (grey copied, alpha dropped). */
START_TEST(test_write_channels)
{
    int c = _i + 1;
    gr_image im = make_image(c);
    char png[96], jpg[96];
    snprintf(png, sizeof png, "/tmp/gr_test_image_channels_%d_%d.png", (int)getpid(), c);
    snprintf(jpg, sizeof jpg, "/tmp/gr_test_image_channels_%d_%d.jpg", (int)getpid(), c);
    ck_assert_int_eq(gr_image_write(&im, png), GR_OK);
    ck_assert_int_eq(gr_image_write(&im, jpg), GR_OK);
    gr_image *back = NULL;
    ck_assert_int_eq(gr_image_load(png, &back), GR_OK);
    ck_assert_int_eq(back->c, 3);
    for (size_t p = 0; p < (size_t)W * H; p++)
        for (int k = 0; k < 3; k++)
            ck_assert_uint_eq(back->data[p * 3 + (size_t)k],
                              im.data[p * (size_t)c + (size_t)(c >= 3 ? k : 0)]);
    gr_image_destroy(back);
    ck_assert_int_eq(gr_image_load(jpg, &back), GR_OK);
    ck_assert_int_eq(back->w, W);
    gr_image_destroy(back);
    unlink(png);
    unlink(jpg);
    free(im.data);
}
END_TEST

/* Channels outside 1..4, and images without data: refused by every function. */
START_TEST(test_malformed_images_refused)
{
    uint8_t px[W * H * 4];
    uint8_t u[NET * NET * 3];
    gr_image bad[] = {{.w = W, .h = H, .c = 0, .data = px}, {.w = W, .h = H, .c = 5, .data = px},
                      {.w = W, .h = H, .c = 3, .data = NULL}, {.w = 0, .h = H, .c = 3, .data = px}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(gr_image_letterbox_u8(&bad[i], NET, NET, u), GR_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(gr_image_draw_detections(&bad[i], NULL, 0, NULL), GR_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(gr_image_write(&bad[i], "/tmp/never.png"), GR_ERR_INVALID_ARGUMENT);
    }
}
END_TEST

static Suite *image_channels_suite(void)
{
    Suite *s = suite_create("image_channels");
    TCase *tc = tcase_create("image_channels");
    tcase_add_loop_test(tc, test_letterbox_channels, 0, 4);
    tcase_add_loop_test(tc, test_draw_channels, 0, 4);
    tcase_add_loop_test(tc, test_write_channels, 0, 4);
    tcase_add_test(tc, test_malformed_images_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(image_channels_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
