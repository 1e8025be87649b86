/* Check suite for what the decoders make of each PNG and JPEG colour layout (runtime/image/
 * decode.c): the values the file stores, as Darknet's stb_image and OpenCV's cv2.imread read
 * them, exactly (no tolerance: these are integer conversions with one right answer).
 * PNGs of every colour type and bit depth are written here with libpng from random samples and
 * the expected RGB computed from the samples: 16-bit v >> 8, low-bit grey scaled to 0..255, grey
 * copied to R, G and B, palette entries looked up, alpha dropped, gAMA and sRGB ignored.
 * CMYK JPEGs (written here with TurboJPEG) decode to RGB as cv2.imread converts them; where a
 * python3 with OpenCV is found, cv2.imread itself is run on the file and must agree byte for
 * byte. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/image/image.h"

static void temp_path(char *out, size_t cap, const char *suffix)
{
    static int counter;
    snprintf(out, cap, "/tmp/gr_test_image_formats_%d_%d%s", (int)getpid(), counter++, suffix);
}

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* ---- PNG ----------------------------------------------------------------------------------- */

typedef struct png_case {
    const char *what;
    int color, depth;
    bool interlaced;
    double gamma;  /* > 0: a gAMA chunk */
    bool srgb;     /* an sRGB chunk */
} png_case;

static int png_channels(int color)
{
    switch (color) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 1; /* palette index */
    }
}

/* Pack one row of samples (each < 2^depth) as PNG stores it: big-endian 16-bit, MSB-first bits. */
static void pack_row(const unsigned *samples, size_t n, int depth, uint8_t *row)
{
    size_t bytes = depth >= 8 ? n * (size_t)depth / 8 : (n * (size_t)depth + 7) / 8;
    memset(row, 0, bytes);
    for (size_t i = 0; i < n; i++) {
        if (depth == 16) {
            row[2 * i] = (uint8_t)(samples[i] >> 8);
            row[2 * i + 1] = (uint8_t)samples[i];
        } else if (depth == 8) {
            row[i] = (uint8_t)samples[i];
        } else {
            size_t bit = i * (size_t)depth;
            row[bit / 8] |= (uint8_t)(samples[i] << (8 - depth - (int)(bit % 8)));
        }
    }
}

/* Write a w x h PNG of random samples to `path`; `want` gets the RGB bytes it must decode to. */
static void write_png_case(const png_case *pc, const char *path, int w, int h, uint8_t *want)
{
    int ch = png_channels(pc->color);
    unsigned maxv = (1u << pc->depth) - 1;
    unsigned state = (unsigned)pc->color * 31u + (unsigned)pc->depth;
    png_color palette[256];
    png_byte alpha[256];
    int entries = pc->color == PNG_COLOR_TYPE_PALETTE ? (int)maxv + 1 : 0;
    for (int i = 0; i < entries; i++) {
        palette[i].red = (png_byte)next_random(&state);
        palette[i].green = (png_byte)next_random(&state);
        palette[i].blue = (png_byte)next_random(&state);
        alpha[i] = (png_byte)next_random(&state);
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert(png && info); /* no setjmp: a libpng error aborts, which Check reports */
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, pc->depth, pc->color,
                 pc->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (entries) {
        png_set_PLTE(png, info, palette, entries);
        png_set_tRNS(png, info, alpha, entries, NULL);
    }
    if (pc->gamma > 0)
        png_set_gAMA(png, info, pc->gamma);
    if (pc->srgb)
        png_set_sRGB(png, info, PNG_sRGB_INTENT_PERCEPTUAL);
    png_write_info(png, info);

    unsigned *samples = malloc((size_t)w * (size_t)ch * sizeof *samples);
    uint8_t *rows = malloc((size_t)h * (size_t)w * (size_t)ch * 2);
    png_bytep *row_ptrs = malloc((size_t)h * sizeof *row_ptrs);
    ck_assert(samples && rows && row_ptrs);
    size_t stride = (size_t)w * (size_t)ch * 2;
    for (int y = 0; y < h; y++) {
        for (size_t i = 0; i < (size_t)w * (size_t)ch; i++) {
            unsigned r = next_random(&state);
            /* Extremes and the values where rounding and truncation part ways, then noise. */
            samples[i] = r % 5 == 0 ? maxv : r % 5 == 1 ? 0 : r % 5 == 2 ? (r >> 3) % 2 * 128u + 127u
                                                                           : (r >> 4) & maxv;
            samples[i] &= maxv;
        }
        pack_row(samples, (size_t)w * (size_t)ch, pc->depth, rows + (size_t)y * stride);
        row_ptrs[y] = rows + (size_t)y * stride;
        for (int x = 0; x < w; x++) {
            const unsigned *s = samples + (size_t)x * (size_t)ch;
            uint8_t *o = want + ((size_t)y * (size_t)w + (size_t)x) * 3;
            if (entries) {
                o[0] = palette[s[0]].red;
                o[1] = palette[s[0]].green;
                o[2] = palette[s[0]].blue;
                continue;
            }
            for (int k = 0; k < 3; k++) {
                unsigned v = s[ch >= 3 ? k : 0];
                o[k] = (uint8_t)(pc->depth == 16 ? v >> 8 : v * 255u / maxv);
            }
        }
    }
    png_write_image(png, row_ptrs);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    ck_assert_int_eq(fclose(f), 0);
    free(samples);
    free(rows);
    free(row_ptrs);
}

static const png_case png_cases[] = {
    {"RGB 16-bit", PNG_COLOR_TYPE_RGB, 16, false, 0, false},
    {"RGBA 16-bit", PNG_COLOR_TYPE_RGB_ALPHA, 16, false, 0, false},
    {"grey 16-bit", PNG_COLOR_TYPE_GRAY, 16, false, 0, false},
    {"grey+alpha 16-bit", PNG_COLOR_TYPE_GRAY_ALPHA, 16, false, 0, false},
    {"RGB 16-bit, sRGB chunk, interlaced", PNG_COLOR_TYPE_RGB, 16, true, 0, true},
    {"RGB 8-bit", PNG_COLOR_TYPE_RGB, 8, false, 0, false},
    {"RGB 8-bit, gAMA 1.0", PNG_COLOR_TYPE_RGB, 8, false, 1.0, false},
    {"RGBA 8-bit", PNG_COLOR_TYPE_RGB_ALPHA, 8, false, 0, false},
    {"RGBA 8-bit, gAMA 0.7, interlaced", PNG_COLOR_TYPE_RGB_ALPHA, 8, true, 0.7, false},
    {"grey 8-bit", PNG_COLOR_TYPE_GRAY, 8, false, 0, false},
    {"grey+alpha 8-bit", PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, 0, false},
    {"grey 1-bit", PNG_COLOR_TYPE_GRAY, 1, false, 0, false},
    {"grey 2-bit", PNG_COLOR_TYPE_GRAY, 2, false, 0, false},
    {"grey 4-bit", PNG_COLOR_TYPE_GRAY, 4, false, 0, false},
    {"palette 8-bit with tRNS", PNG_COLOR_TYPE_PALETTE, 8, false, 0, false},
    {"palette 4-bit with tRNS, interlaced", PNG_COLOR_TYPE_PALETTE, 4, true, 0, false},
    {"palette 1-bit with tRNS", PNG_COLOR_TYPE_PALETTE, 1, false, 0, false},
};

/* Every PNG layout decodes to the stored values, through gr_image_load and a reader. */
START_TEST(test_png_values_as_stored)
{
    const png_case *pc = &png_cases[_i];
    const int w = 37, h = 23; /* odd: partial bytes at row ends, every Adam7 pass non-empty */
    uint8_t *want = malloc((size_t)w * h * 3);
    ck_assert_ptr_nonnull(want);
    char path[128];
    temp_path(path, sizeof path, ".png");
    write_png_case(pc, path, w, h, want);
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s: %s", pc->what, gr_last_error());
    ck_assert_int_eq(im->w, w);
    ck_assert_int_eq(im->h, h);
    ck_assert_int_eq(im->c, 3);
    size_t worst = 0, first = (size_t)-1;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        size_t d = (size_t)abs((int)im->data[i] - (int)want[i]);
        if (d && first == (size_t)-1)
            first = i;
        worst = d > worst ? d : worst;
    }
    ck_assert_msg(worst == 0, "%s: up to %zu levels off the stored values (first at byte %zu: "
                  "%u, want %u)", pc->what, worst, first, im->data[first], want[first]);
    gr_image_reader *r = NULL;
    const gr_image *got = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    ck_assert_int_eq(gr_image_reader_load(r, path, &got), GR_OK);
    ck_assert_mem_eq(got->data, want, (size_t)w * h * 3);
    gr_image_reader_destroy(r);
    gr_image_destroy(im);
    unlink(path);
    free(want);
}
END_TEST

/* ---- CMYK JPEG ----------------------------------------------------------------------------- */

/* A w x h JPEG of smooth random CMYK (TurboJPEG writes it as YCCK with an Adobe marker, as
 * Photoshop does), written to `path`; returns its bytes (*len). */
static uint8_t *write_cmyk_jpeg(const char *path, int w, int h, unsigned long *len)
{
    uint8_t *cmyk = malloc((size_t)w * (size_t)h * 4);
    ck_assert_ptr_nonnull(cmyk);
    unsigned state = 99;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 4; k++)
                cmyk[((size_t)y * (size_t)w + (size_t)x) * 4 + (size_t)k] =
                    (uint8_t)((x * (k + 1) * 255 / w + y * (4 - k) * 255 / h) / 2 +
                              (int)(next_random(&state) % 16));
    tjhandle tj = tjInitCompress();
    ck_assert_ptr_nonnull(tj);
    uint8_t *jpeg = NULL;
    ck_assert_int_eq(tjCompress2(tj, cmyk, w, 0, h, TJPF_CMYK, &jpeg, len, TJSAMP_420, 90, 0), 0);
    tjDestroy(tj);
    free(cmyk);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(jpeg, 1, *len, f), *len);
    ck_assert_int_eq(fclose(f), 0);
    return jpeg;
}

/* What the JPEG must decode to at out_w x out_h: TurboJPEG's CMYK output converted the way
 * OpenCV's imgcodecs does (c = k - ((255 - c) * k >> 8) per channel, for Adobe's inverted CMYK). */
static uint8_t *expected_rgb(const uint8_t *jpeg, unsigned long len, int out_w, int out_h)
{
    size_t pixels = (size_t)out_w * (size_t)out_h;
    uint8_t *cmyk = malloc(pixels * 4), *rgb = malloc(pixels * 3);
    ck_assert(cmyk && rgb);
    tjhandle tj = tjInitDecompress();
    ck_assert_int_eq(tjDecompress2(tj, jpeg, len, cmyk, out_w, 0, out_h, TJPF_CMYK, 0), 0);
    tjDestroy(tj);
    for (size_t i = 0; i < pixels; i++) {
        int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
        rgb[3 * i] = (uint8_t)(k - ((255 - c) * k >> 8));
        rgb[3 * i + 1] = (uint8_t)(k - ((255 - m) * k >> 8));
        rgb[3 * i + 2] = (uint8_t)(k - ((255 - y) * k >> 8));
    }
    free(cmyk);
    return rgb;
}

/* cv2.imread's RGB bytes of `path` into out (n bytes), or false when no python3 with OpenCV. */
static bool opencv_rgb(const char *path, uint8_t *out, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "for py in /usr/bin/python3 python3; do $py -c 'import sys\ntry:\n import cv2\n"
             "except ImportError:\n sys.exit(1)\nim = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR)\n"
             "sys.stdout.buffer.write(im[:, :, ::-1].tobytes())' '%s' 2>/dev/null && break; done",
             path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, n, p);
    pclose(p);
    return got == n;
}

START_TEST(test_cmyk_jpeg)
{
    const int w = 61, h = 47;
    char path[128];
    temp_path(path, sizeof path, ".jpg");
    unsigned long len = 0;
    uint8_t *jpeg = write_cmyk_jpeg(path, w, h, &len);
    uint8_t *want = expected_rgb(jpeg, len, w, h);
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(im->w, w);
    ck_assert_int_eq(im->h, h);
    ck_assert_mem_eq(im->data, want, (size_t)w * h * 3);
    gr_image_reader *r = NULL;
    const gr_image *got = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    ck_assert_int_eq(gr_image_reader_load(r, path, &got), GR_OK);
    ck_assert_mem_eq(got->data, want, (size_t)w * h * 3);
    gr_image_reader_destroy(r);

    uint8_t *cv = malloc((size_t)w * h * 3);
    ck_assert_ptr_nonnull(cv);
    if (opencv_rgb(path, cv, (size_t)w * h * 3)) {
        ck_assert_mem_eq(im->data, cv, (size_t)w * h * 3);
        printf("test_cmyk_jpeg: equal to cv2.imread\n");
    } else {
        printf("test_cmyk_jpeg: no python3 with OpenCV; not compared with cv2.imread\n");
    }
    fflush(stdout);
    free(cv);
    gr_image_destroy(im);
    tjFree(jpeg);
    free(want);
    unlink(path);
}
END_TEST

/* Fast decode of a large CMYK JPEG: scaled (1/8) like any other JPEG, then converted. */
START_TEST(test_cmyk_jpeg_fast_decode)
{
    char path[128];
    temp_path(path, sizeof path, ".jpg");
    unsigned long len = 0;
    uint8_t *jpeg = write_cmyk_jpeg(path, 1024, 768, &len);
    uint8_t *want = expected_rgb(jpeg, len, 128, 96);
    gr_image_reader *r = NULL;
    const gr_image *got = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    gr_image_reader_fast_decode(r, GR_PREPROCESS_LETTERBOX, 128, 128);
    ck_assert_msg(gr_image_reader_load(r, path, &got) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(got->w, 128);
    ck_assert_int_eq(got->h, 96);
    ck_assert_mem_eq(got->data, want, (size_t)128 * 96 * 3);
    gr_image_reader_destroy(r);
    tjFree(jpeg);
    free(want);
    unlink(path);
}
END_TEST

/* Image types graphrun does not decode are named by their signature (a folder lists them, and each
 * file's error line says what it is), with GR_ERR_UNSUPPORTED; an unknown signature is a parse
 * error. */
START_TEST(test_other_formats_named)
{
    static const struct {
        const char *bytes;
        size_t n;
        const char *named;
    } cases[] = {
        {"\0\0\0\x18" "ftypheic\0\0\0\0", 16, "HEIF images are not accepted"},
        {"\0\0\0\x1c" "ftypavif\0\0\0\0", 16, "AVIF images are not accepted"},
        {"RIFF\x24\0\0\0WAVEfmt ", 16, "not a JPEG, PNG or BMP image"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gr_image *im = NULL;
        gr_status st = gr_image_decode_mem((const uint8_t *)cases[i].bytes, cases[i].n, "x", &im);
        ck_assert_ptr_null(im);
        ck_assert_int_eq(st, i + 1 < sizeof cases / sizeof cases[0] ? GR_ERR_UNSUPPORTED
                                                                     : GR_ERR_PARSE);
        ck_assert_msg(strstr(gr_last_error(), cases[i].named) != NULL, "case %zu: %s", i,
                      gr_last_error());
    }
}
END_TEST

/* WebP and TIFF (tests/data/formats: data/shapes-val/000.png encoded losslessly by libwebp and by
 * libtiff, LZW) decode to the PNG's pixels exactly where the build has their decoder, and are
 * refused naming the package to install where it does not. Damaged, they fail with a message. */
START_TEST(test_webp_and_tiff)
{
    static const char *const files[] = {"tests/data/formats/shapes000.webp",
                                        "tests/data/formats/shapes000.tiff"};
    static const int available[] = {
#ifdef GR_HAVE_WEBP
        1,
#else
        0,
#endif
#ifdef GR_HAVE_TIFF
        1,
#else
        0,
#endif
    };
    gr_image *png = NULL;
    ck_assert_int_eq(gr_image_load("data/shapes-val/000.png", &png), GR_OK);
    for (int k = 0; k < 2; k++) {
        gr_image *im = NULL;
        gr_status st = gr_image_load(files[k], &im);
        if (!available[k]) {
            ck_assert_int_eq(st, GR_ERR_UNSUPPORTED);
            ck_assert_msg(strstr(gr_last_error(), "this graphrun was built without") != NULL, "%s",
                          gr_last_error());
            continue;
        }
        ck_assert_msg(st == GR_OK, "%s", gr_last_error());
        ck_assert_int_eq(im->w, png->w);
        ck_assert_int_eq(im->h, png->h);
        ck_assert_int_eq(im->c, 3);
        ck_assert_int_eq(memcmp(im->data, png->data, (size_t)png->w * png->h * 3), 0);
        gr_image_destroy(im);
        /* Cut to its first 200 bytes: an error naming the file, no crash. */
        FILE *f = fopen(files[k], "rb");
        ck_assert_ptr_nonnull(f);
        uint8_t head[200];
        size_t n = fread(head, 1, sizeof head, f);
        fclose(f);
        im = NULL;
        st = gr_image_decode_mem(head, n, "cut", &im);
        ck_assert_int_ne(st, GR_OK);
        ck_assert_ptr_null(im);
        ck_assert_msg(strncmp(gr_last_error(), "cut: ", 5) == 0, "%s", gr_last_error());
    }
    gr_image_destroy(png);
}
END_TEST

static Suite *image_formats_suite(void)
{
    Suite *s = suite_create("image_formats");
    TCase *tc = tcase_create("png");
    tcase_add_loop_test(tc, test_png_values_as_stored, 0,
                        (int)(sizeof png_cases / sizeof png_cases[0]));
    tcase_add_test(tc, test_other_formats_named);
    tcase_add_test(tc, test_webp_and_tiff);
    suite_add_tcase(s, tc);
    TCase *cmyk = tcase_create("cmyk");
    tcase_set_timeout(cmyk, 60); /* python3 and OpenCV take seconds to start */
    tcase_add_test(cmyk, test_cmyk_jpeg);
    tcase_add_test(cmyk, test_cmyk_jpeg_fast_decode);
    suite_add_tcase(s, cmyk);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(image_formats_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
