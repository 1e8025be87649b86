/* Check suite for runtime/image/: loading and writing images, Darknet's letterbox (geometry,
 * values against an independent bilinear computation, uint8 rounding) and drawing. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/detect.h"
#include "runtime/image/image.h"

/* Check's float macros pass floats through varargs (-Wdouble-promotion): compare as double. */
#define ASSERT_NEAR(a, b, tol) ck_assert_double_eq_tol((double)(a), (double)(b), (double)(tol))
#define ASSERT_FEQ(a, b) ck_assert_double_eq((double)(a), (double)(b))
#define ASSERT_FLT(a, b) ck_assert_double_lt((double)(a), (double)(b))

/* A fresh temporary path ending in `suffix`; the caller unlinks it. */
static void temp_path(char *out, size_t cap, const char *suffix)
{
    static int counter;
    snprintf(out, cap, "/tmp/gr_test_image_%d_%d%s", (int)getpid(), counter++, suffix);
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* An image with every byte produced by `fill`. */
static gr_image *make_image(int w, int h, unsigned seed)
{
    gr_image *im = malloc(sizeof *im);
    ck_assert_ptr_nonnull(im);
    im->w = w;
    im->h = h;
    im->c = 3;
    im->data = malloc((size_t)w * (size_t)h * 3);
    ck_assert_ptr_nonnull(im->data);
    unsigned state = seed * 2654435761u + 1u;
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++) {
        state = state * 1103515245u + 12345u;
        im->data[i] = (uint8_t)(state >> 16);
    }
    return im;
}

static gr_image *make_uniform(int w, int h, uint8_t value)
{
    gr_image *im = make_image(w, h, 0);
    memset(im->data, value, (size_t)w * (size_t)h * 3);
    return im;
}

/* ---- letterbox ------------------------------------------------------------------------------ */

START_TEST(test_letterbox_geometry_768x576)
{
    /* docs/darknet.md: a 768x576 photo becomes 416x312 placed at rows 52..363 on 0.5 grey. */
    gr_image *im = make_uniform(768, 576, 255);
    float *out = malloc(sizeof(float) * 3 * 416 * 416);
    ck_assert_int_eq(gr_image_letterbox(im, 416, 416, out), GR_OK);
    for (int k = 0; k < 3; k++) {
        for (int y = 0; y < 416; y++) {
            for (int x = 0; x < 416; x++) {
                float v = out[(k * 416 + y) * 416 + x];
                if (y >= 52 && y <= 363)
                    /* 1.0 interpolated with itself: float rounding of (1-d)*1 + d*1 only. */
                    ASSERT_NEAR(v, 1.0f, 1e-6f);
                else
                    ASSERT_FEQ(v, 0.5f);
            }
        }
    }
    int new_w, new_h;
    gr_letterbox_size(GR_PREPROCESS_LETTERBOX, 768, 576, 416, 416, &new_w, &new_h);
    ck_assert_int_eq(new_w, 416);
    ck_assert_int_eq(new_h, 312);
    free(out);
    gr_image_destroy(im);
}
END_TEST

START_TEST(test_letterbox_pillarbox_columns)
{
    /* A tall image: new_h = net_h, new_w = 300*416/600 = 208, pasted at column (416-208)/2. */
    gr_image *im = make_uniform(300, 600, 0);
    float *out = malloc(sizeof(float) * 3 * 416 * 416);
    ck_assert_int_eq(gr_image_letterbox(im, 416, 416, out), GR_OK);
    for (int y = 0; y < 416; y++) {
        ASSERT_FEQ(out[y * 416 + 103], 0.5f);
        ASSERT_FEQ(out[y * 416 + 104], 0.0f);
        ASSERT_FEQ(out[y * 416 + 311], 0.0f);
        ASSERT_FEQ(out[y * 416 + 312], 0.5f);
    }
    free(out);
    gr_image_destroy(im);
}
END_TEST

/* Textbook align-corners bilinear sample of channel k at real position (sx, sy), in double. */
static double bilinear(const gr_image *im, int k, double sx, double sy)
{
    int x0 = (int)floor(sx), y0 = (int)floor(sy);
    int x1 = x0 + 1 < im->w ? x0 + 1 : im->w - 1;
    int y1 = y0 + 1 < im->h ? y0 + 1 : im->h - 1;
    double fx = sx - x0, fy = sy - y0;
#define PX(x, y) (im->data[((size_t)(y) * (size_t)im->w + (size_t)(x)) * 3 + (size_t)k] / 255.0)
    double top = (1 - fx) * PX(x0, y0) + fx * PX(x1, y0);
    double bottom = (1 - fx) * PX(x0, y1) + fx * PX(x1, y1);
#undef PX
    return (1 - fy) * top + fy * bottom;
}

START_TEST(test_letterbox_matches_bilinear)
{
    /* Odd sizes in both orientations: 9x7 -> 16x16 (new 16x12 at row 2) and 7x11 -> 15x13
     * (new 8x13 at column 3). Expected values come from the textbook formula above with the
     * letterbox geometry written out here, not from the code under test. */
    static const struct {
        int im_w, im_h, net_w, net_h, new_w, new_h;
    } cases[] = {{9, 7, 16, 16, 16, 12}, {7, 11, 15, 13, 8, 13}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gr_image *im = make_image(cases[c].im_w, cases[c].im_h, (unsigned)c + 7);
        int nw = cases[c].net_w, nh = cases[c].net_h;
        int new_w = cases[c].new_w, new_h = cases[c].new_h;
        int dx = (nw - new_w) / 2, dy = (nh - new_h) / 2;
        float *out = malloc(sizeof(float) * 3 * (size_t)nw * (size_t)nh);
        ck_assert_int_eq(gr_image_letterbox(im, nw, nh, out), GR_OK);
        for (int k = 0; k < 3; k++) {
            for (int y = 0; y < nh; y++) {
                for (int x = 0; x < nw; x++) {
                    float v = out[((size_t)k * (size_t)nh + (size_t)y) * (size_t)nw + (size_t)x];
                    int rx = x - dx, ry = y - dy;
                    if (rx < 0 || ry < 0 || rx >= new_w || ry >= new_h) {
                        ASSERT_FEQ(v, 0.5f);
                        continue;
                    }
                    double sx = rx * (double)(im->w - 1) / (new_w - 1);
                    double sy = ry * (double)(im->h - 1) / (new_h - 1);
                    /* Darknet works in float: scales and products round at ~1e-7 relative,
                     * and a pixel step changes the value by at most 1, so 1e-5 is far above
                     * rounding and far below one 8-bit level (0.0039). */
                    ck_assert_double_eq_tol((double)v, bilinear(im, k, sx, sy), 1e-5);
                }
            }
        }
        free(out);
        gr_image_destroy(im);
    }
}
END_TEST

START_TEST(test_letterbox_darknet_last_row_quirk)
{
    /* Darknet's vertical pass computes sy = r * ((in-1)/(out-1)) in float and, for the last
     * row, keeps only (1-dy) * row[iy]. For 2 -> 42 rows, 41 * (1/41.f) = 0.99999994f, so
     * iy = 0, dy = 0.99999994 and Darknet's last row is ~6e-8 * row 0: nearly black. graphrun
     * reproduces Darknet; this pins that down. */
    gr_image *im = make_uniform(2, 2, 255);
    float *out = malloc(sizeof(float) * 3 * 42 * 42);
    ck_assert_int_eq(gr_image_letterbox(im, 42, 42, out), GR_OK);
    ASSERT_NEAR(out[40 * 42 + 5], 1.0f, 1e-6f);
    ASSERT_FLT(out[41 * 42 + 5], 1e-6f);
    free(out);
    gr_image_destroy(im);
}
END_TEST

START_TEST(test_letterbox_u8_rounding)
{
    gr_image *im = make_image(9, 7, 3);
    float *f = malloc(sizeof(float) * 3 * 16 * 16);
    uint8_t *u = malloc(3 * 16 * 16);
    ck_assert_int_eq(gr_image_letterbox(im, 16, 16, f), GR_OK);
    ck_assert_int_eq(gr_image_letterbox_u8(im, 16, 16, u), GR_OK);
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++)
            for (int k = 0; k < 3; k++) {
                double expect = floor((double)f[(k * 16 + y) * 16 + x] * 255.0 + 0.5);
                ck_assert_int_eq(u[(y * 16 + x) * 3 + k], (int)expect);
            }
    /* The grey canvas (0.5) rounds up to 128. */
    ck_assert_int_eq(u[0], 128);
    free(f);
    free(u);
    gr_image_destroy(im);

    /* Same size in and out: scale 1, every pixel v/255 exactly, so bytes come back unchanged. */
    im = make_image(13, 10, 5);
    u = malloc(3 * 13 * 10);
    ck_assert_int_eq(gr_image_letterbox_u8(im, 13, 10, u), GR_OK);
    ck_assert_mem_eq(u, im->data, 3 * 13 * 10);
    free(u);
    gr_image_destroy(im);
}
END_TEST

START_TEST(test_letterbox_rejects_bad_args)
{
    gr_image *im = make_image(4, 4, 1);
    float out[3 * 4 * 4];
    ck_assert_int_eq(gr_image_letterbox(NULL, 4, 4, out), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_letterbox(im, 0, 4, out), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_letterbox(im, 4, 4, NULL), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_letterbox_u8(im, -1, 4, (uint8_t *)out), GR_ERR_INVALID_ARGUMENT);
    gr_image_destroy(im);
}
END_TEST

START_TEST(test_letterbox_extreme_aspect)
{
    /* 1000x1: Darknet's new_h = 1*8/1000 = 0 would divide by zero; graphrun uses one row. */
    gr_image *im = make_uniform(1000, 1, 255);
    float out[3 * 8 * 8];
    ck_assert_int_eq(gr_image_letterbox(im, 8, 8, out), GR_OK);
    ASSERT_NEAR(out[3 * 8 + 2], 1.0f, 1e-6f); /* row (8-1)/2 = 3 holds the image */
    ASSERT_FEQ(out[2 * 8 + 2], 0.5f);
    gr_image_destroy(im);
}
END_TEST

/* ---- load / write --------------------------------------------------------------------------- */

START_TEST(test_load_dog)
{
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &im), GR_OK);
    ck_assert_ptr_nonnull(im);
    ck_assert_int_eq(im->w, 768);
    ck_assert_int_eq(im->h, 576);
    ck_assert_int_eq(im->c, 3);
    /* A photo, not a blank: the channels vary. */
    int lo = 255, hi = 0;
    for (size_t i = 0; i < (size_t)768 * 576 * 3; i += 97) {
        lo = im->data[i] < lo ? im->data[i] : lo;
        hi = im->data[i] > hi ? im->data[i] : hi;
    }
    ck_assert_int_gt(hi - lo, 100);
    gr_image_destroy(im);
}
END_TEST

START_TEST(test_load_missing_file)
{
    gr_image *im = (gr_image *)1;
    ck_assert_int_eq(gr_image_load("data/no_such_image.jpg", &im), GR_ERR_IO);
    ck_assert_ptr_null(im);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "data/no_such_image.jpg"));
}
END_TEST

START_TEST(test_load_non_image)
{
    char path[256];
    temp_path(path, sizeof path, ".jpg");
    const char text[] = "this is a text file, not a picture\n";
    write_bytes(path, text, sizeof text - 1);
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_load(path, &im), GR_ERR_PARSE);
    ck_assert_ptr_null(im);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), path));
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
    unlink(path);
}
END_TEST

START_TEST(test_load_truncated_and_corrupt)
{
    /* The first 300 bytes of dog.jpg (before its frame header), and a PNG written here then cut
     * in the middle of its compressed data. */
    FILE *f = fopen("data/dog.jpg", "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char head[300];
    ck_assert_uint_eq(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    char path[256];
    temp_path(path, sizeof path, ".jpg");
    write_bytes(path, head, 100);
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_load(path, &im), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), path));
    unlink(path);

    gr_image *src = make_image(64, 64, 11); /* noise: the PNG stays large */
    char png[256];
    temp_path(png, sizeof png, ".png");
    ck_assert_int_eq(gr_image_write(src, png), GR_OK);
    f = fopen(png, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size);
    ck_assert_uint_eq(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    write_bytes(png, bytes, (size_t)size / 2);
    ck_assert_int_eq(gr_image_load(png, &im), GR_ERR_PARSE);
    ck_assert_ptr_null(im);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), png));
    unlink(png);
    free(bytes);
    gr_image_destroy(src);
}
END_TEST

/* A PNG signature and IHDR chunk claiming w x h, with no pixel data at all. */
static void write_png_header(const char *path, uint32_t w, uint32_t h)
{
    unsigned char b[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                           'I', 'H', 'D', 'R'};
    for (int i = 0; i < 4; i++) {
        b[16 + i] = (unsigned char)(w >> (24 - 8 * i));
        b[20 + i] = (unsigned char)(h >> (24 - 8 * i));
    }
    b[24] = 8; /* bit depth */
    b[25] = 2; /* RGB */
    write_bytes(path, b, sizeof b);
}

START_TEST(test_load_rejects_absurd_dimensions)
{
    /* Rejected from the header alone: the files hold no pixels, so a decode attempt would
     * report corruption instead of GR_ERR_LIMIT. */
    char path[256];
    temp_path(path, sizeof path, ".png");
    gr_image *im = NULL;
    write_png_header(path, 100000, 10); /* over GR_MAX_DIM on one side */
    ck_assert_int_eq(gr_image_load(path, &im), GR_ERR_LIMIT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), path));
    write_png_header(path, 17000, 17000); /* 2.9e8 pixels > 2^28 */
    ck_assert_int_eq(gr_image_load(path, &im), GR_ERR_LIMIT);
    ck_assert_ptr_null(im);
    unlink(path);
}
END_TEST

START_TEST(test_png_round_trip)
{
    gr_image *src = make_image(37, 23, 9);
    char path[256];
    temp_path(path, sizeof path, ".PNG"); /* extension match ignores case */
    ck_assert_int_eq(gr_image_write(src, path), GR_OK);
    gr_image *back = NULL;
    ck_assert_int_eq(gr_image_load(path, &back), GR_OK);
    ck_assert_int_eq(back->w, 37);
    ck_assert_int_eq(back->h, 23);
    ck_assert_mem_eq(back->data, src->data, 37 * 23 * 3);
    unlink(path);
    gr_image_destroy(back);
    gr_image_destroy(src);
}
END_TEST

START_TEST(test_jpeg_write)
{
    /* A smooth gradient survives quality-90 JPEG within a few levels on average. */
    gr_image *src = make_uniform(64, 48, 0);
    for (int y = 0; y < 48; y++)
        for (int x = 0; x < 64; x++) {
            uint8_t *p = src->data + ((size_t)y * 64 + (size_t)x) * 3;
            p[0] = (uint8_t)(x * 4);
            p[1] = (uint8_t)(y * 5);
            p[2] = 128;
        }
    char path[256];
    temp_path(path, sizeof path, ".jpeg");
    ck_assert_int_eq(gr_image_write(src, path), GR_OK);
    gr_image *back = NULL;
    ck_assert_int_eq(gr_image_load(path, &back), GR_OK);
    ck_assert_int_eq(back->w, 64);
    ck_assert_int_eq(back->h, 48);
    double diff = 0;
    for (size_t i = 0; i < 64 * 48 * 3; i++)
        diff += fabs((double)back->data[i] - (double)src->data[i]);
    ck_assert_double_lt(diff / (64 * 48 * 3), 4.0);
    unlink(path);
    gr_image_destroy(back);
    gr_image_destroy(src);
}
END_TEST

/* A w x h BMP written byte by byte as the format says: BITMAPINFOHEADER, `bits` per pixel, rows
 * padded to 4 bytes, bottom-up unless top_down (negative height). Pixel (x, y) is
 * (x*40, y*60, x+y) in RGB, stored BGR(A). */
static size_t make_bmp(uint8_t *b, int w, int h, int bits, int top_down)
{
    size_t bpp = (size_t)bits / 8, stride = ((size_t)w * bpp + 3) & ~(size_t)3;
    size_t size = 54 + stride * (size_t)h;
    memset(b, 0, size);
    uint32_t fields[][2] = {{2, (uint32_t)size}, {10, 54}, {14, 40}, {18, (uint32_t)w},
                            {22, (uint32_t)(top_down ? -h : h)}};
    b[0] = 'B';
    b[1] = 'M';
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (int k = 0; k < 4; k++)
            b[fields[f][0] + (uint32_t)k] = (uint8_t)(fields[f][1] >> (8 * k));
    b[26] = 1; /* planes */
    b[28] = (uint8_t)bits;
    for (int y = 0; y < h; y++) {
        int row = top_down ? y : h - 1 - y;
        uint8_t *p = b + 54 + (size_t)row * stride;
        for (int x = 0; x < w; x++, p += bpp) {
            p[0] = (uint8_t)(x + y);
            p[1] = (uint8_t)(y * 60);
            p[2] = (uint8_t)(x * 40);
        }
    }
    return size;
}

START_TEST(test_bmp_24_and_32_bit)
{
    uint8_t bmp[54 + 8 * 4 * 3];
    for (int variant = 0; variant < 4; variant++) {
        int bits = variant & 1 ? 32 : 24, top_down = variant >> 1;
        size_t len = make_bmp(bmp, 5, 3, bits, top_down);
        gr_image *im = NULL;
        ck_assert_int_eq(gr_image_decode_mem(bmp, len, "x.bmp", &im), GR_OK);
        ck_assert_int_eq(im->w, 5);
        ck_assert_int_eq(im->h, 3);
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 5; x++) {
                const uint8_t *p = im->data + ((size_t)y * 5 + (size_t)x) * 3;
                ck_assert_int_eq(p[0], x * 40);
                ck_assert_int_eq(p[1], y * 60);
                ck_assert_int_eq(p[2], x + y);
            }
        gr_image_destroy(im);
        /* One byte short of the pixel data. */
        ck_assert_int_eq(gr_image_decode_mem(bmp, len - 1, "x.bmp", &im), GR_ERR_PARSE);
        ck_assert_ptr_nonnull(strstr(gr_last_error(), "x.bmp: corrupt image: BMP pixel data"));
    }
    size_t len = make_bmp(bmp, 5, 3, 24, 0);
    bmp[28] = 8; /* paletted: not read */
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_decode_mem(bmp, len, "x.bmp", &im), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "only uncompressed 24- and 32-bit BMP"));
}
END_TEST

START_TEST(test_write_rejects_unknown_extension)
{
    gr_image *src = make_image(4, 4, 1);
    ck_assert_int_eq(gr_image_write(src, "/tmp/gr_test_image.bmp"), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "gr_test_image.bmp"));
    ck_assert_int_eq(gr_image_write(src, "/tmp/noextension"), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_write(NULL, "/tmp/x.png"), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_write(src, "/nonexistent_dir/x.png"), GR_ERR_IO);
    gr_image_destroy(src);
    gr_image_destroy(NULL); /* a no-op */
}
END_TEST

/* ---- drawing -------------------------------------------------------------------------------- */

START_TEST(test_class_color_darknet)
{
    /* Darknet's get_color with 20 classes, by hand:
     * class 0: offset 0, ratio 0 -> colors[0] = {1,0,1}: r = colors[0][2] = 1, g = 0, b = 1.
     * class 1: offset 123457 % 20 = 17, ratio 17/20*5 = 4.25 -> i 4, j 5, frac .25:
     *   r = .75*colors[4][2] + .25*colors[5][2] = 0; g = .75*1 + .25*0 = .75 -> 191;
     *   b = .75*colors[4][0] + .25*colors[5][0] = 1. */
    uint8_t rgb[3];
    gr_class_color(0, 20, rgb);
    ck_assert_int_eq(rgb[0], 255);
    ck_assert_int_eq(rgb[1], 0);
    ck_assert_int_eq(rgb[2], 255);
    gr_class_color(1, 20, rgb);
    ck_assert_int_eq(rgb[0], 0);
    ck_assert_int_eq(rgb[1], 191);
    ck_assert_int_eq(rgb[2], 255);
}
END_TEST

static const char *test_label(const void *ctx, int class_id)
{
    (void)ctx;
    return class_id == 0 ? "dog" : NULL;
}

START_TEST(test_draw_detections)
{
    gr_image *im = make_uniform(200, 150, 100);
    gr_detection d = {.left = 50, .top = 60, .right = 150, .bottom = 120, .class_id = 0,
                      .prob = 0.82f, .objectness = 0.9f};
    ck_assert_int_eq(gr_draw_detections_labelled(im, &d, 1, 20, test_label, NULL), GR_OK);
    uint8_t color[3];
    gr_class_color(0, 20, color);
#define AT(x, y) (im->data + ((size_t)(y) * 200 + (size_t)(x)) * 3)
    /* The box outline (2 px thick at this height) in the class colour, the inside untouched. */
    ck_assert_mem_eq(AT(100, 120), color, 3);
    ck_assert_mem_eq(AT(100, 119), color, 3);
    ck_assert_mem_eq(AT(50, 90), color, 3);
    ck_assert_mem_eq(AT(150, 90), color, 3);
    ck_assert_int_eq(AT(100, 90)[0], 100);
    ck_assert_int_eq(AT(100, 118)[1], 100);
    /* The label sits above the box: a filled background in the class colour with black text. */
    int background = 0, text = 0;
    for (int y = 40; y < 60; y++)
        for (int x = 50; x < 90; x++) {
            if (memcmp(AT(x, y), color, 3) == 0)
                background++;
            else if (AT(x, y)[0] == 0 && AT(x, y)[1] == 0 && AT(x, y)[2] == 0)
                text++;
        }
    ck_assert_int_gt(background, 100);
    ck_assert_int_gt(text, 10);
    /* Nothing drawn far from the box. */
    ck_assert_int_eq(AT(5, 5)[0], 100);
    ck_assert_int_eq(AT(190, 140)[2], 100);
#undef AT
    /* Boxes partly or wholly outside, NaN coordinates and unprintable names never write out of
     * bounds (AddressSanitizer checks this run). */
    gr_detection odd[3] = {
        {.left = -50, .top = -50, .right = 500, .bottom = 500, .class_id = 3, .prob = 0.6f},
        {.left = NAN, .top = 10, .right = 20, .bottom = NAN, .class_id = 1, .prob = 0.7f},
        {.left = 190, .top = 0, .right = 199, .bottom = 3, .class_id = 2, .prob = 0.9f}};
    ck_assert_int_eq(gr_draw_detections_labelled(im, odd, 3, 0, NULL, NULL), GR_OK);
    ck_assert_int_eq(gr_draw_detections_labelled(NULL, odd, 3, 0, NULL, NULL),
                     GR_ERR_INVALID_ARGUMENT);
    gr_image_destroy(im);
}
END_TEST

static Suite *image_suite(void)
{
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("image");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_letterbox_geometry_768x576);
    tcase_add_test(tc, test_letterbox_pillarbox_columns);
    tcase_add_test(tc, test_letterbox_matches_bilinear);
    tcase_add_test(tc, test_letterbox_darknet_last_row_quirk);
    tcase_add_test(tc, test_letterbox_u8_rounding);
    tcase_add_test(tc, test_letterbox_rejects_bad_args);
    tcase_add_test(tc, test_letterbox_extreme_aspect);
    tcase_add_test(tc, test_load_dog);
    tcase_add_test(tc, test_load_missing_file);
    tcase_add_test(tc, test_load_non_image);
    tcase_add_test(tc, test_load_truncated_and_corrupt);
    tcase_add_test(tc, test_load_rejects_absurd_dimensions);
    tcase_add_test(tc, test_png_round_trip);
    tcase_add_test(tc, test_jpeg_write);
    tcase_add_test(tc, test_bmp_24_and_32_bit);
    tcase_add_test(tc, test_write_rejects_unknown_extension);
    tcase_add_test(tc, test_class_color_darknet);
    tcase_add_test(tc, test_draw_detections);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(image_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
