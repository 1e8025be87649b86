/* Check suite for the JPEG structure walk that picks the decoder (runtime/image/jpeg_scan.c):
 * what it reads from files TurboJPEG writes here (every subsampling, progressive, greyscale),
 * that it agrees with TurboJPEG's own header reader on size and subsampling, and that no damaged
 * file is ever called GPU-decodable: every truncation of a good file, bytes between markers, a
 * second frame, an Adobe RGB marker. Those files go to libjpeg-turbo, which reports them as CPU
 * mode does, so what the GPU path refuses here decides nothing about the error lines. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "runtime/image/image.h"

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 8;
}

/* A w x h JPEG of smooth random content (never blank) at `subsamp`, maybe progressive. */
static uint8_t *make_jpeg(int w, int h, int subsamp, int progressive, unsigned long *len)
{
    unsigned seed = (unsigned)(w * 31 + h * 7 + subsamp);
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    ck_assert_ptr_nonnull(rgb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                rgb[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] =
                    (uint8_t)((x * (c + 1) + y * (3 - c)) * 2 + (int)(next_random(&seed) % 24));
    tjhandle tj = tjInitCompress();
    ck_assert_ptr_nonnull(tj);
    uint8_t *jpeg = NULL;
    *len = 0;
    int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
    ck_assert_int_eq(tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, len, subsamp, 90, flags), 0);
    tjDestroy(tj);
    free(rgb);
    return jpeg;
}

typedef struct scan_case {
    int w, h, tjsamp, progressive;
    int subsampling; /* expected gr_jpeg_info.subsampling */
    int decodable;
} scan_case;

static const scan_case cases[] = {
    {640, 480, TJSAMP_420, 0, GR_JPEG_420, 1}, {333, 217, TJSAMP_422, 0, GR_JPEG_422, 1},
    {97, 61, TJSAMP_444, 0, GR_JPEG_444, 1},   {128, 96, TJSAMP_440, 0, GR_JPEG_440, 1},
    {1, 1, TJSAMP_420, 0, GR_JPEG_420, 1},     {200, 150, TJSAMP_420, 1, GR_JPEG_420, 0},
    {120, 80, TJSAMP_GRAY, 0, -1, 0},          {160, 64, TJSAMP_411, 0, -1, 0},
};

START_TEST(test_reads_what_turbojpeg_wrote)
{
    const scan_case *c = &cases[_i];
    unsigned long len;
    uint8_t *jpeg = make_jpeg(c->w, c->h, c->tjsamp, c->progressive, &len);
    gr_jpeg_info info;
    gr_jpeg_scan(jpeg, len, &info);
    ck_assert_int_eq(info.is_jpeg, 1);
    ck_assert_int_eq(info.complete, 1);
    ck_assert_int_eq(info.width, c->w);
    ck_assert_int_eq(info.height, c->h);
    ck_assert_int_eq(info.precision, 8);
    ck_assert_int_eq(info.components, c->tjsamp == TJSAMP_GRAY ? 1 : 3);
    ck_assert_int_eq(info.sof, c->progressive ? 0xC2 : 0xC0);
    ck_assert_int_eq(info.subsampling, c->subsampling);
    ck_assert_int_eq(info.scans > 1, c->progressive);
    ck_assert_int_eq(gr_jpeg_gpu_decodable(&info), c->decodable);
    /* TurboJPEG's own reading of the header agrees */
    tjhandle tj = tjInitDecompress();
    int w, h, samp, cs;
    ck_assert_int_eq(tjDecompressHeader3(tj, jpeg, len, &w, &h, &samp, &cs), 0);
    ck_assert_int_eq(w, info.width);
    ck_assert_int_eq(h, info.height);
    ck_assert_int_eq(samp, c->tjsamp);
    tjDestroy(tj);
    tjFree(jpeg);
}
END_TEST

/* Every prefix of a good file (cut anywhere: in a header, in the entropy-coded data, before the
 * EOI's second byte) is incomplete and never GPU-decodable. */
START_TEST(test_every_truncation_refused)
{
    unsigned long len;
    uint8_t *jpeg = make_jpeg(64, 48, TJSAMP_420, 0, &len);
    gr_jpeg_info info;
    for (unsigned long cut = 0; cut < len; cut++) {
        gr_jpeg_scan(jpeg, cut, &info);
        ck_assert_msg(!info.complete && !gr_jpeg_gpu_decodable(&info),
                      "a file cut to %lu of %lu bytes passed", cut, len);
    }
    gr_jpeg_scan(jpeg, len, &info);
    ck_assert(gr_jpeg_gpu_decodable(&info));
    tjFree(jpeg);
}
END_TEST

/* Offset of the first marker `m` (0xFF m) after SOI, walking segments. */
static size_t marker_at(const uint8_t *d, size_t len, uint8_t m)
{
    size_t pos = 2;
    while (pos + 4 <= len && d[pos] == 0xFF) {
        if (d[pos + 1] == m)
            return pos;
        pos += 2 + ((size_t)d[pos + 2] << 8 | d[pos + 3]);
    }
    ck_abort_msg("marker 0x%02x not found", m);
    return 0;
}

/* `extra` bytes inserted at `at`. */
static uint8_t *spliced(const uint8_t *d, size_t len, size_t at, const uint8_t *extra, size_t n)
{
    uint8_t *out = malloc(len + n);
    ck_assert_ptr_nonnull(out);
    memcpy(out, d, at);
    memcpy(out + at, extra, n);
    memcpy(out + at + n, d + at, len - at);
    return out;
}

START_TEST(test_damaged_structure_refused)
{
    unsigned long len;
    uint8_t *jpeg = make_jpeg(64, 48, TJSAMP_420, 0, &len);
    size_t sof = marker_at(jpeg, len, 0xC0), sos = marker_at(jpeg, len, 0xDA);
    gr_jpeg_info info;

    /* bytes between two marker segments (libjpeg: "extraneous bytes before marker") */
    static const uint8_t junk[] = {0x12, 0x34, 0x56};
    uint8_t *f = spliced(jpeg, len, sof, junk, sizeof junk);
    gr_jpeg_scan(f, len + sizeof junk, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(f);

    /* a second frame header */
    size_t sof_len = 2 + ((size_t)jpeg[sof + 2] << 8 | jpeg[sof + 3]);
    f = spliced(jpeg, len, sos, jpeg + sof, sof_len);
    gr_jpeg_scan(f, len + sof_len, &info);
    ck_assert_int_eq(info.frames, 2);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(f);

    /* an Adobe APP14 marker saying the components are RGB, not YCbCr (transform 0) */
    static const uint8_t adobe[] = {0xFF, 0xEE, 0x00, 0x0E, 'A', 'd', 'o', 'b', 'e',
                                    0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00};
    f = spliced(jpeg, len, 2, adobe, sizeof adobe);
    gr_jpeg_scan(f, len + sizeof adobe, &info);
    ck_assert_int_eq(info.adobe_transform, 0);
    ck_assert(info.complete && !gr_jpeg_gpu_decodable(&info));
    free(f);
    /* ... and with transform 1 (YCbCr) it is decodable */
    uint8_t ycc[sizeof adobe];
    memcpy(ycc, adobe, sizeof adobe);
    ycc[sizeof ycc - 1] = 1;
    f = spliced(jpeg, len, 2, ycc, sizeof ycc);
    gr_jpeg_scan(f, len + sizeof ycc, &info);
    ck_assert_int_eq(info.adobe_transform, 1);
    ck_assert(gr_jpeg_gpu_decodable(&info));
    free(f);

    /* a segment length running past the end, and a marker segment of length < 2 */
    f = malloc(len);
    memcpy(f, jpeg, len);
    f[sof + 2] = 0xFF;
    gr_jpeg_scan(f, len, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    memcpy(f, jpeg, len);
    f[sof + 2] = 0x00;
    f[sof + 3] = 0x01;
    gr_jpeg_scan(f, len, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(f);

    /* not a JPEG at all, and nothing */
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    gr_jpeg_scan(png, sizeof png, &info);
    ck_assert_int_eq(info.is_jpeg, 0);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    gr_jpeg_scan(NULL, 0, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    tjFree(jpeg);
}
END_TEST

/* Headers libjpeg refuses or warns about are never the GPU's (each found by fuzz_jpeg_scan: the
 * walk called them decodable, tjDecompressHeader3 refused them). */
START_TEST(test_headers_libjpeg_refuses)
{
    unsigned long len;
    uint8_t *jpeg = make_jpeg(64, 48, TJSAMP_420, 0, &len);
    size_t sof = marker_at(jpeg, len, 0xC0), sos = marker_at(jpeg, len, 0xDA);
    uint8_t *f = malloc(len);
    gr_jpeg_info info;
    /* an unknown marker (0xFF23) with a valid length */
    static const uint8_t unknown[] = {0xFF, 0x23, 0x00, 0x04, 0x00, 0x00};
    uint8_t *g = spliced(jpeg, len, sof, unknown, sizeof unknown);
    gr_jpeg_scan(g, len + sizeof unknown, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(g);
    /* a JFIF APP0 of major version 2 (libjpeg: "unknown JFIF revision number") */
    static const uint8_t jfif2[] = {0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x02, 0x01,
                                    0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00};
    g = spliced(jpeg, len, 2, jfif2, sizeof jfif2);
    gr_jpeg_scan(g, len + sizeof jfif2, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(g);
    /* the scan naming a component twice, or out of the frame's order */
    size_t first = sos + 5; /* the first component's id in the SOS */
    memcpy(f, jpeg, len);
    f[first + 2] = f[first]; /* second = first */
    gr_jpeg_scan(f, len, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    memcpy(f, jpeg, len);
    uint8_t t = f[first];
    f[first] = f[first + 2];
    f[first + 2] = t; /* the first two swapped */
    gr_jpeg_scan(f, len, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    /* a restart-interval segment of the wrong length (get_dri: "Bogus marker length"); of the
     * right one it is the GPU's */
    static const uint8_t dri5[] = {0xFF, 0xDD, 0x00, 0x05, 0x00, 0x00, 0x00};
    g = spliced(jpeg, len, sof, dri5, sizeof dri5);
    gr_jpeg_scan(g, len + sizeof dri5, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(g);
    static const uint8_t dri4[] = {0xFF, 0xDD, 0x00, 0x04, 0x00, 0x00};
    g = spliced(jpeg, len, sof, dri4, sizeof dri4);
    gr_jpeg_scan(g, len + sizeof dri4, &info);
    ck_assert(gr_jpeg_gpu_decodable(&info));
    free(g);
    /* arithmetic-coding conditioning (get_dac: "Bogus DAC value 0x12") */
    static const uint8_t dac[] = {0xFF, 0xCC, 0x00, 0x04, 0x00, 0x12};
    g = spliced(jpeg, len, sof, dac, sizeof dac);
    gr_jpeg_scan(g, len + sizeof dac, &info);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(g);
    /* a width past libjpeg's 65500 */
    memcpy(f, jpeg, len);
    f[sof + 7] = 0xFF;
    f[sof + 8] = 0xF7; /* 65527 */
    gr_jpeg_scan(f, len, &info);
    ck_assert_int_eq(info.width, 65527);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    free(f);
    tjFree(jpeg);
}
END_TEST

/* Without JFIF or Adobe markers libjpeg guesses the colour space from the component ids: 'R' 'G'
 * 'B' is RGB (found by fuzz_jpeg_scan), 1 2 3 or anything else YCbCr. */
START_TEST(test_colour_space_from_ids)
{
    unsigned long len;
    uint8_t *jpeg = make_jpeg(64, 48, TJSAMP_420, 0, &len);
    size_t app0 = marker_at(jpeg, len, 0xE0);
    size_t app0_len = 2 + ((size_t)jpeg[app0 + 2] << 8 | jpeg[app0 + 3]);
    size_t n = len - app0_len;
    uint8_t *f = malloc(n);
    ck_assert_ptr_nonnull(f);
    memcpy(f, jpeg, app0);
    memcpy(f + app0, jpeg + app0 + app0_len, len - app0 - app0_len);
    gr_jpeg_info info;
    gr_jpeg_scan(f, n, &info);
    ck_assert(!info.jfif && info.ycbcr);
    ck_assert(gr_jpeg_gpu_decodable(&info));
    size_t sof = marker_at(f, n, 0xC0), sos = marker_at(f, n, 0xDA);
    static const uint8_t rgb[3] = {'R', 'G', 'B'};
    for (int c = 0; c < 3; c++) {
        f[sof + 10 + 3 * c] = rgb[c];
        f[sos + 5 + 2 * c] = rgb[c];
    }
    gr_jpeg_scan(f, n, &info);
    ck_assert(info.complete && !info.ycbcr);
    ck_assert(!gr_jpeg_gpu_decodable(&info));
    tjhandle tj = tjInitDecompress();
    int w, h, samp, cs;
    ck_assert_int_eq(tjDecompressHeader3(tj, f, n, &w, &h, &samp, &cs), 0);
    ck_assert_int_eq(cs, TJCS_RGB); /* what the rule above models */
    tjDestroy(tj);
    /* with the JFIF marker back, the same ids are YCbCr */
    gr_jpeg_scan(jpeg, len, &info);
    ck_assert(info.jfif && info.ycbcr);
    free(f);
    tjFree(jpeg);
}
END_TEST

/* Stuffed 0xFF 0x00 bytes and fill bytes before a marker belong to a well-formed file. */
START_TEST(test_fill_bytes_accepted)
{
    unsigned long len;
    uint8_t *jpeg = make_jpeg(64, 48, TJSAMP_444, 0, &len);
    size_t sof = marker_at(jpeg, len, 0xC0);
    static const uint8_t fill[] = {0xFF, 0xFF};
    uint8_t *f = spliced(jpeg, len, sof, fill, sizeof fill); /* 0xFF 0xFF 0xFF 0xC0 */
    gr_jpeg_info info;
    gr_jpeg_scan(f, len + sizeof fill, &info);
    ck_assert(gr_jpeg_gpu_decodable(&info));
    free(f);
    tjFree(jpeg);
}
END_TEST

static Suite *jpeg_scan_suite(void)
{
    Suite *s = suite_create("jpeg_scan");
    TCase *tc = tcase_create("scan");
    tcase_add_loop_test(tc, test_reads_what_turbojpeg_wrote, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_every_truncation_refused);
    tcase_add_test(tc, test_damaged_structure_refused);
    tcase_add_test(tc, test_fill_bytes_accepted);
    tcase_add_test(tc, test_headers_libjpeg_refuses);
    tcase_add_test(tc, test_colour_space_from_ids);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jpeg_scan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
