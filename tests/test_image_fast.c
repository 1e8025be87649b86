/* Check suite for the streaming path's image code (runtime/image/): the fast letterbox
 * (gr_image_letterbox, gr_image_letterbox_u8) must equal the reference one
 * (gr_image_letterbox_reference*, Darknet's steps on float planes) byte for byte: no tolerance,
 * since the default output is promised bit-identical to what it was. Checked on the bundled
 * photos at several network sizes and on random images of random sizes (down- and upscaling,
 * one-pixel sides, extreme aspects), with guard bytes after the output. And gr_image_reader,
 * which keeps its buffers between images, must give what gr_image_load gives, including after a
 * failed file; with --fast-decode it scales only large JPEGs. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/image/image.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

static gr_image *random_image(int w, int h, unsigned *state)
{
    gr_image *im = malloc(sizeof *im);
    ck_assert_ptr_nonnull(im);
    im->w = w;
    im->h = h;
    im->c = 3;
    im->data = malloc((size_t)w * (size_t)h * 3);
    ck_assert_ptr_nonnull(im->data);
    /* Runs of equal bytes, gradients and noise: the resize's weights meet every kind of pair. */
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++) {
        *state = *state * 1103515245u + 12345u;
        unsigned r = *state >> 16;
        im->data[i] = (uint8_t)(r % 4 == 0 ? 255 : r % 4 == 1 ? 0 : r % 4 == 2 ? i % 256 : r);
    }
    return im;
}

/* Fast and reference letterboxes (and stretches) of `im` to net_w x net_h, uint8 and float:
 * identical bytes, and nothing written past the end. */
static void check_same_how(const gr_image *im, gr_preprocess how, int net_w, int net_h)
{
    size_t elems = (size_t)net_w * (size_t)net_h * 3;
    uint8_t *fast = malloc(elems + GUARD), *ref = malloc(elems + GUARD);
    float *fast_f = malloc(elems * sizeof(float) + GUARD), *ref_f = malloc(elems * sizeof(float));
    ck_assert(fast && ref && fast_f && ref_f);
    memset(fast, GUARD_BYTE, elems + GUARD);
    memset(fast_f, GUARD_BYTE, elems * sizeof(float) + GUARD);
    ck_assert_int_eq(gr_image_preprocess_u8(im, how, net_w, net_h, fast), GR_OK);
    ck_assert_int_eq(gr_image_letterbox_reference_u8(im, how, net_w, net_h, ref), GR_OK);
    ck_assert_int_eq(gr_image_preprocess(im, how, net_w, net_h, fast_f), GR_OK);
    ck_assert_int_eq(gr_image_letterbox_reference(im, how, net_w, net_h, ref_f), GR_OK);
    if (memcmp(fast, ref, elems) != 0 || memcmp(fast_f, ref_f, elems * sizeof(float)) != 0) {
        size_t i = 0;
        while (i < elems && fast[i] == ref[i])
            i++;
        ck_abort_msg("%dx%d image to %dx%d (%s): fast != reference (first uint8 difference at "
                     "%zu)", im->w, im->h, net_w, net_h, gr_preprocess_name(how), i);
    }
    for (size_t i = 0; i < GUARD; i++) {
        ck_assert_uint_eq(fast[elems + i], GUARD_BYTE);
        ck_assert_uint_eq(((uint8_t *)fast_f)[elems * sizeof(float) + i], GUARD_BYTE);
    }
    free(fast);
    free(ref);
    free(fast_f);
    free(ref_f);
}

static void check_same(const gr_image *im, int net_w, int net_h)
{
    check_same_how(im, GR_PREPROCESS_LETTERBOX, net_w, net_h);
    check_same_how(im, GR_PREPROCESS_STRETCH, net_w, net_h);
}

START_TEST(test_fast_equals_reference_photos)
{
    static const char *const photos[] = {"data/dog.jpg", "data/eagle.jpg", "data/giraffe.jpg",
                                         "data/horses.jpg", "data/person.jpg"};
    static const int sizes[][2] = {{416, 416}, {608, 608}, {320, 256}, {1024, 1024}, {13, 10}};
    for (size_t p = 0; p < sizeof photos / sizeof photos[0]; p++) {
        gr_image *im = NULL;
        ck_assert_int_eq(gr_image_load(photos[p], &im), GR_OK);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            check_same(im, sizes[s][0], sizes[s][1]);
        gr_image_destroy(im);
    }
}
END_TEST

START_TEST(test_fast_equals_reference_random_sizes)
{
    unsigned state = 12345;
    for (int trial = 0; trial < 300; trial++) {
        state = state * 1103515245u + 12345u;
        unsigned r = state >> 8;
        /* Mostly small, sometimes large; one-pixel sides on purpose. */
        int w = 1 + (int)(r % (trial % 5 == 0 ? 900u : 64u));
        int h = 1 + (int)((r >> 10) % (trial % 7 == 0 ? 700u : 64u));
        state = state * 1103515245u + 12345u;
        r = state >> 8;
        int net_w = 1 + (int)(r % 200u), net_h = 1 + (int)((r >> 9) % 200u);
        if (trial % 11 == 0)
            w = 1;
        if (trial % 13 == 0)
            h = 1;
        if (trial % 17 == 0)
            net_w = 1;
        gr_image *im = random_image(w, h, &state);
        check_same(im, net_w, net_h);
        gr_image_destroy(im);
    }
}
END_TEST

START_TEST(test_fast_rejects_bad_args)
{
    unsigned state = 1;
    gr_image *im = random_image(4, 4, &state);
    uint8_t out[3 * 4 * 4];
    ck_assert_int_eq(gr_image_letterbox_u8(NULL, 4, 4, out), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_letterbox_u8(im, 4, 0, out), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_letterbox_u8(im, 4, 4, NULL), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "gr_image_letterbox_u8"));
    im->c = 4;
    ck_assert_int_eq(gr_image_letterbox_u8(im, 4, 4, out), GR_ERR_INVALID_ARGUMENT);
    gr_image_destroy(im);
}
END_TEST

/* ---- gr_image_reader ------------------------------------------------------------------------ */

static void check_reader_equals_load(gr_image_reader *r, const char *path)
{
    const gr_image *got = NULL;
    gr_image *want = NULL;
    ck_assert_int_eq(gr_image_load(path, &want), GR_OK);
    ck_assert_int_eq(gr_image_reader_load(r, path, &got), GR_OK);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->w, want->w);
    ck_assert_int_eq(got->h, want->h);
    ck_assert_int_eq(got->c, 3);
    ck_assert_mem_eq(got->data, want->data, (size_t)want->w * (size_t)want->h * 3);
    gr_image_destroy(want);
}

START_TEST(test_reader_equals_load)
{
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    /* Big, small, other formats, big again: the buffers grow, are reused and are replaced (PNG). */
    static const char *const paths[] = {
        "data/giraffe.jpg", "tests/fuzz/corpus/image/rgb8x6.jpg", "data/shapes.png",
        "tests/fuzz/corpus/image/rgb8x6.bmp", "tests/fuzz/corpus/image/rgba5x3.png",
        "data/dog.jpg", "tests/fuzz/corpus/image/grey3x9.jpg", "data/person.jpg"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        check_reader_equals_load(r, paths[i]);
    gr_image_reader_destroy(r);
    gr_image_reader_destroy(NULL);
}
END_TEST

START_TEST(test_reader_errors_then_goes_on)
{
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    const gr_image *im = (const gr_image *)1;
    ck_assert_int_eq(gr_image_reader_load(r, "data/no_such_image.jpg", &im), GR_ERR_IO);
    ck_assert_ptr_null(im);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "data/no_such_image.jpg: cannot open"));

    /* A truncated JPEG: the same message as gr_image_load's. */
    char cut[64];
    snprintf(cut, sizeof cut, "/tmp/gr_test_image_fast_%d.jpg", (int)getpid());
    gr_image *dog = NULL;
    char *bytes;
    size_t len;
    ck_assert_int_eq(gr_read_file("data/dog.jpg", 1 << 24, "image", &bytes, &len), GR_OK);
    FILE *f = fopen(cut, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, 20000, f), 20000);
    fclose(f);
    free(bytes);
    ck_assert_int_eq(gr_image_load(cut, &dog), GR_ERR_PARSE);
    char want[512];
    snprintf(want, sizeof want, "%s", gr_last_error());
    ck_assert_int_eq(gr_image_reader_load(r, cut, &im), GR_ERR_PARSE);
    ck_assert_str_eq(gr_last_error(), want);
    unlink(cut);

    /* A directory with an image's name. */
    ck_assert_int_ne(gr_image_reader_load(r, "data/shapes-val", &im), GR_OK);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "data/shapes-val"));

    /* The reader still decodes the next file right. */
    check_reader_equals_load(r, "data/horses.jpg");
    ck_assert_int_eq(gr_image_reader_load(NULL, "data/dog.jpg", &im), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_reader_create(NULL), GR_ERR_INVALID_ARGUMENT);
    gr_image_reader_destroy(r);
}
END_TEST

/* --fast-decode (opt-in): a JPEG of at least twice the letterboxed size is decoded DCT-scaled, the
 * source size stays the file's, smaller JPEGs and other formats are untouched (exact). */
START_TEST(test_reader_fast_decode)
{
    /* A 2304x1728 photo-like JPEG: dog.jpg letterboxed up x3 (no grey border at 4:3). */
    gr_image *dog = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &dog), GR_OK);
    gr_image big = {.w = 2304, .h = 1728, .c = 3, .data = malloc((size_t)2304 * 1728 * 3)};
    ck_assert_ptr_nonnull(big.data);
    ck_assert_int_eq(gr_image_letterbox_u8(dog, 2304, 1728, big.data), GR_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_test_image_fast_big_%d.jpg", (int)getpid());
    ck_assert_int_eq(gr_image_write(&big, path), GR_OK);
    free(big.data);

    gr_image_reader *exact = NULL, *fast = NULL;
    ck_assert_int_eq(gr_image_reader_create(&exact), GR_OK);
    ck_assert_int_eq(gr_image_reader_create(&fast), GR_OK);
    gr_image_reader_fast_decode(fast, GR_PREPROCESS_LETTERBOX, 416, 416);
    const gr_image *e = NULL, *f = NULL;
    int sw = 0, sh = 0;
    ck_assert_int_eq(gr_image_reader_load(exact, path, &e), GR_OK);
    ck_assert_int_eq(gr_image_reader_load(fast, path, &f), GR_OK);
    /* Letterboxed to 416x312: 1/4 gives 576x432 >= 416x312, 1/8 gives 288x216 < it. */
    ck_assert_int_eq(f->w, 576);
    ck_assert_int_eq(f->h, 432);
    gr_image_reader_source_size(fast, &sw, &sh);
    ck_assert_int_eq(sw, 2304);
    ck_assert_int_eq(sh, 1728);
    ck_assert_int_eq(e->w, 2304);

    /* The network input differs a little (printed; the README quotes it). The DCT-scaled decode
     * averages 4x4 blocks where the exact path point-samples a bilinear resize, so sharp edges
     * differ most: measured mean 2.2 levels of 255, max 83. The bounds (mean < 4, max <= 128) are
     * about twice that; a wrong scale, offset or channel order gives a mean of tens of levels. */
    size_t n = (size_t)416 * 416 * 3;
    uint8_t *a = malloc(n), *b = malloc(n);
    ck_assert(a && b);
    ck_assert_int_eq(gr_image_letterbox_u8(e, 416, 416, a), GR_OK);
    ck_assert_int_eq(gr_image_letterbox_u8(f, 416, 416, b), GR_OK);
    double sum = 0;
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        sum += d;
        worst = d > worst ? d : worst;
    }
    printf("fast decode 2304x1728 -> 576x432 -> 416x312: mean |diff| %.3f, max %d (uint8 levels)\n",
           sum / (double)n, worst);
    fflush(stdout);
    ck_assert_double_lt(sum / (double)n, 4.0);
    ck_assert_int_le(worst, 128);
    ck_assert_int_gt(worst, 0); /* it is not exact, which is why it is opt-in */

    /* 768x576 is less than twice 416x312: decoded in full, exactly. */
    check_reader_equals_load(fast, "data/dog.jpg");
    gr_image_reader_source_size(fast, &sw, &sh);
    ck_assert_int_eq(sw, 768);
    /* PNG: untouched. */
    check_reader_equals_load(fast, "data/shapes.png");
    /* Off again. */
    gr_image_reader_fast_decode(fast, GR_PREPROCESS_LETTERBOX, 0, 0);
    ck_assert_int_eq(gr_image_reader_load(fast, path, &f), GR_OK);
    ck_assert_int_eq(f->w, 2304);
    unlink(path);
    free(a);
    free(b);
    gr_image_destroy(dog);
    gr_image_reader_destroy(exact);
    gr_image_reader_destroy(fast);
}
END_TEST

/* Every byte value through the SSE2 path's (float)v / 255.0f (whole rows: a resize to at least
 * half the width) and the lookup path (a resize below half), floats and bytes equal to the
 * reference's: bit for bit, the promise the default output keeps. */
START_TEST(test_fast_every_byte_value)
{
    gr_image im = {.w = 300, .h = 40, .c = 3, .data = malloc((size_t)300 * 40 * 3)};
    ck_assert_ptr_nonnull(im.data);
    for (size_t i = 0; i < (size_t)300 * 40 * 3; i++)
        im.data[i] = (uint8_t)(i * 7 % 256); /* every value in every row and channel */
    check_same(&im, 200, 200);
    check_same(&im, 100, 30);
    check_same(&im, 300, 41);
    free(im.data);
}
END_TEST

/* gr_image_preprocess_as: the letterbox of a decode at reduced scale, placed and sized as its
 * file's size says; its own size (or 0 x 0) is gr_image_preprocess; a file size smaller than
 * the image or past the limit is refused. */
START_TEST(test_preprocess_as)
{
    unsigned state = 7;
    gr_image *im = random_image(250, 177, &state);
    size_t n = (size_t)3 * 160 * 160;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    uint8_t *u = malloc(n), *v = malloc(n);
    ck_assert(a && b && u && v);
    for (int own = 0; own < 2; own++) {
        int fw = own ? 250 : 0, fh = own ? 177 : 0;
        ck_assert_int_eq(gr_image_preprocess_as(im, fw, fh, GR_PREPROCESS_LETTERBOX, 160, 160, a),
                         GR_OK);
        ck_assert_int_eq(gr_image_preprocess(im, GR_PREPROCESS_LETTERBOX, 160, 160, b), GR_OK);
        ck_assert(memcmp(a, b, n * sizeof *a) == 0);
        ck_assert_int_eq(gr_image_preprocess_as_u8(im, fw, fh, GR_PREPROCESS_STRETCH, 160, 160, u),
                         GR_OK);
        ck_assert_int_eq(gr_image_preprocess_u8(im, GR_PREPROCESS_STRETCH, 160, 160, v), GR_OK);
        ck_assert(memcmp(u, v, n) == 0);
    }
    /* As 1000x705: 160x112 at row 24 (its own size would give 160x113). */
    gr_letterbox_geom g;
    gr_letterbox_geometry(GR_PREPROCESS_LETTERBOX, 1000, 705, 160, 160, &g);
    ck_assert_int_eq(g.new_h, 112);
    ck_assert_int_eq(g.top, 24);
    gr_letterbox_geometry(GR_PREPROCESS_LETTERBOX, 250, 177, 160, 160, &g);
    ck_assert_int_eq(g.new_h, 113);
    ck_assert_int_eq(gr_image_preprocess_as_u8(im, 1000, 705, GR_PREPROCESS_LETTERBOX, 160, 160,
                                               u), GR_OK);
    for (int y = 0; y < 160; y++) {
        int grey = 1;
        for (int x = 0; x < 160 * 3; x++)
            grey &= u[(size_t)y * 160 * 3 + (size_t)x] == 128;
        ck_assert_int_eq(grey, y < 24 || y >= 24 + 112); /* random pixels are never all grey */
    }
    /* Stretched, the file's size changes nothing. */
    ck_assert_int_eq(gr_image_preprocess_as_u8(im, 1000, 705, GR_PREPROCESS_STRETCH, 160, 160, u),
                     GR_OK);
    ck_assert(memcmp(u, v, n) == 0);
    ck_assert_int_eq(gr_image_preprocess_as_u8(im, 249, 705, GR_PREPROCESS_LETTERBOX, 160, 160, u),
                     GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "gr_image_preprocess_as_u8: a 250x177 image"));
    ck_assert_int_eq(gr_image_preprocess_as(im, 1000, GR_MAX_DIM + 1, GR_PREPROCESS_LETTERBOX,
                                            160, 160, a), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_image_preprocess_as(NULL, 1000, 705, GR_PREPROCESS_LETTERBOX, 160, 160, a),
                     GR_ERR_INVALID_ARGUMENT);
    free(a);
    free(b);
    free(u);
    free(v);
    gr_image_destroy(im);
}
END_TEST

/* dog.jpg stretched to w x h and written as a JPEG by TurboJPEG (4:2:0 quality 90, or greyscale,
 * maybe progressive) at path. */
static void write_dog_jpeg(const char *path, int w, int h, int grey, int progressive)
{
    gr_image *dog = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &dog), GR_OK);
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    ck_assert_ptr_nonnull(rgb);
    ck_assert_int_eq(gr_image_preprocess_u8(dog, GR_PREPROCESS_STRETCH, w, h, rgb), GR_OK);
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long len = 0;
    ck_assert_int_eq(tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &len,
                                 grey ? TJSAMP_GRAY : TJSAMP_420, 90,
                                 progressive ? TJFLAG_PROGRESSIVE : 0), 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(jpeg, 1, len, f), len);
    fclose(f);
    tjFree(jpeg);
    tjDestroy(tj);
    free(rgb);
    gr_image_destroy(dog);
}

/* --fast-decode's scale: the smallest of 1/2, 1/4, 1/8 whose size (rounded up) is still at least
 * the letterbox's (or stretch's) in both sides, else the full size; the other M/8 factors
 * libjpeg-turbo offers decode slower than the full size (docs/performance.md) and are not used.
 * Baseline, progressive and greyscale JPEGs alike; the file's size is still reported. */
START_TEST(test_fast_decode_scale_table)
{
    static const struct {
        int w, h, net, stretch, grey, progressive, want_w, want_h;
    } cases[] = {
        {640, 480, 416, 0, 0, 0, 640, 480},   /* 1/2 = 320x240 < 416x312: full */
        {830, 620, 416, 0, 0, 0, 830, 620},   /* 1/2 = 415x310, one column short of 416x310 */
        {831, 623, 416, 0, 0, 0, 416, 312},   /* 1/2 = 416x312 >= 416x311 */
        {833, 625, 416, 0, 0, 0, 417, 313},   /* 1/2 rounds up */
        {1280, 960, 416, 0, 0, 0, 640, 480},
        {1280, 960, 416, 0, 0, 1, 640, 480},  /* progressive */
        {1280, 960, 416, 0, 1, 0, 640, 480},  /* greyscale */
        {1280, 960, 416, 1, 0, 0, 640, 480},  /* stretched to 416x416: 1/4 = 320x240 is short */
        {480, 1280, 416, 0, 0, 0, 240, 640},  /* portrait: 156x416; 1/4 = 120x320 is short */
        {2304, 1728, 416, 0, 0, 0, 576, 432},
        {640, 480, 160, 0, 0, 0, 160, 120},   /* 1/4 */
        {1280, 960, 160, 0, 0, 1, 160, 120},  /* 1/8, progressive */
        {1000, 705, 160, 0, 0, 0, 250, 177},  /* 1/8 = 125x89 < 160x112 */
    };
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_test_image_fast_scale_%d.jpg", (int)getpid());
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_dog_jpeg(path, cases[i].w, cases[i].h, cases[i].grey, cases[i].progressive);
        gr_image_reader_fast_decode(r, cases[i].stretch ? GR_PREPROCESS_STRETCH
                                                        : GR_PREPROCESS_LETTERBOX,
                                    cases[i].net, cases[i].net);
        const gr_image *im = NULL;
        ck_assert_msg(gr_image_reader_load(r, path, &im) == GR_OK, "%s", gr_last_error());
        ck_assert_msg(im->w == cases[i].want_w && im->h == cases[i].want_h,
                      "%dx%d at %d: decoded %dx%d, want %dx%d", cases[i].w, cases[i].h,
                      cases[i].net, im->w, im->h, cases[i].want_w, cases[i].want_h);
        ck_assert_int_eq(im->c, 3);
        int sw = 0, sh = 0;
        gr_image_reader_source_size(r, &sw, &sh);
        ck_assert_int_eq(sw, cases[i].w);
        ck_assert_int_eq(sh, cases[i].h);
        if (cases[i].grey) /* grey stays grey: R = G = B */
            for (size_t p = 0; p < (size_t)im->w * (size_t)im->h; p++)
                ck_assert(im->data[3 * p] == im->data[3 * p + 1] &&
                          im->data[3 * p] == im->data[3 * p + 2]);
        /* The network input against the exact one (full decode, Darknet's letterbox): the scaled
         * decode averages 2x2..8x8 blocks where the exact path point-samples a bilinear shrink
         * (which aliases more the more it shrinks), so they differ at edges: on these photos
         * by 1.2-2.8 levels of 255 on average at 1/2 and 4.7-5.5 at 1/4 and 1/8 (printed).
         * Bounds: mean < 4 at 1/2 (as test_reader_fast_decode's), < 8 below; a wrong scale or
         * channel order gives tens of levels (the place, a row off at most, is checked exactly by
         * test_preprocess_as and test_files). Unscaled: equal, byte for byte. */
        gr_preprocess how = cases[i].stretch ? GR_PREPROCESS_STRETCH : GR_PREPROCESS_LETTERBOX;
        int net = cases[i].net;
        size_t n = (size_t)net * (size_t)net * 3;
        uint8_t *fast = malloc(n), *exact = malloc(n);
        gr_image *whole = NULL;
        ck_assert(fast && exact);
        ck_assert_int_eq(gr_image_load(path, &whole), GR_OK);
        ck_assert_int_eq(gr_image_preprocess_as_u8(im, sw, sh, how, net, net, fast), GR_OK);
        ck_assert_int_eq(gr_image_preprocess_u8(whole, how, net, net, exact), GR_OK);
        double sum = 0;
        for (size_t k = 0; k < n; k++)
            sum += abs((int)fast[k] - (int)exact[k]);
        printf("fast decode %dx%d -> %dx%d for %d: mean |diff| %.3f\n", cases[i].w, cases[i].h,
               im->w, im->h, net, sum / (double)n);
        fflush(stdout);
        ck_assert_double_lt(sum / (double)n, 2 * im->w >= cases[i].w ? 4.0 : 8.0);
        if (im->w == cases[i].w)
            ck_assert(memcmp(fast, exact, n) == 0);
        free(fast);
        free(exact);
        gr_image_destroy(whole);
    }
    fflush(stdout);
    /* A large JPEG cut short: the same error as a full decode gives it, and the next file is
     * decoded right. */
    write_dog_jpeg(path, 1280, 960, 0, 0);
    uint8_t *bytes = NULL;
    size_t len = 0;
    ck_assert_int_eq(gr_read_file(path, 1 << 24, "image", (char **)&bytes, &len), GR_OK);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len / 2, f), len / 2);
    fclose(f);
    free(bytes);
    gr_image *full = NULL;
    ck_assert_int_eq(gr_image_load(path, &full), GR_ERR_PARSE);
    char want[512];
    snprintf(want, sizeof want, "%s", gr_last_error());
    const gr_image *im = NULL;
    gr_image_reader_fast_decode(r, GR_PREPROCESS_LETTERBOX, 416, 416);
    ck_assert_int_eq(gr_image_reader_load(r, path, &im), GR_ERR_PARSE);
    ck_assert_str_eq(gr_last_error(), want);
    ck_assert_int_eq(gr_image_reader_load(r, "data/dog.jpg", &im), GR_OK);
    ck_assert_int_eq(im->w, 768);
    unlink(path);
    gr_image_reader_destroy(r);
}
END_TEST

static Suite *image_fast_suite(void)
{
    Suite *s = suite_create("image_fast");
    TCase *tc = tcase_create("image_fast");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fast_equals_reference_photos);
    tcase_add_test(tc, test_fast_equals_reference_random_sizes);
    tcase_add_test(tc, test_fast_rejects_bad_args);
    tcase_add_test(tc, test_reader_equals_load);
    tcase_add_test(tc, test_reader_errors_then_goes_on);
    tcase_add_test(tc, test_reader_fast_decode);
    tcase_add_test(tc, test_fast_every_byte_value);
    tcase_add_test(tc, test_preprocess_as);
    tcase_add_test(tc, test_fast_decode_scale_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(image_fast_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
