/* Check suite for gr_image_reader (runtime/image/decode.c), the long-lived decoder each streaming
 * and calibration worker keeps: a failed file must leave it exactly as able to decode the next
 * one as a fresh reader. Good and bad files alternate through ONE reader (JPEG, PNG and BMP, each
 * bad in several ways; fast decode off and on): every good file decodes to the bytes a fresh
 * gr_image_load gives, every bad one fails with a message that names it (never another file).
 * Files that are not regular files (a FIFO, /dev/zero behind a symlink) are refused at once,
 * without blocking and without reading them. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/image/image.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/gr_test_image_reader_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static uint8_t *read_all(const char *path, size_t *len)
{
    char *bytes = NULL;
    ck_assert_int_eq(gr_read_file(path, (size_t)1 << 26, "test", &bytes, len), GR_OK);
    return (uint8_t *)bytes;
}

/* Write `len` bytes of `data` to dir/name; the path goes to `path`. */
static void put(char *path, size_t cap, const char *name, const void *data, size_t len)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (len > 0)
        ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Good: r decodes `path` to the bytes of a fresh gr_image_load. */
static void expect_good(gr_image_reader *r, const char *path)
{
    gr_image *want = NULL;
    const gr_image *got = NULL;
    ck_assert_msg(gr_image_load(path, &want) == GR_OK, "%s: %s", path, gr_last_error());
    gr_status st = gr_image_reader_load(r, path, &got);
    ck_assert_msg(st == GR_OK, "%s after a bad file: %s", path, gr_last_error());
    ck_assert_int_eq(got->w, want->w);
    ck_assert_int_eq(got->h, want->h);
    ck_assert_int_eq(got->c, 3);
    ck_assert_msg(memcmp(got->data, want->data, (size_t)want->w * (size_t)want->h * 3) == 0,
                  "%s: the reader's pixels differ from gr_image_load's", path);
    gr_image_destroy(want);
}

/* Bad: r refuses `path` with a message that begins with its name. */
static void expect_bad(gr_image_reader *r, const char *path)
{
    const gr_image *got = (const gr_image *)1;
    gr_status st = gr_image_reader_load(r, path, &got);
    ck_assert_msg(st != GR_OK, "%s decoded", path);
    ck_assert_ptr_null(got);
    const char *msg = gr_last_error();
    ck_assert_msg(strncmp(msg, path, strlen(path)) == 0 && msg[strlen(path)] == ':',
                  "%s: the message names another file: %s", path, msg);
}

#define MAX_FILES 16
typedef struct file_set {
    char good[MAX_FILES][128], bad[MAX_FILES][128];
    int n_good, n_bad;
} file_set;

static void add_good(file_set *s, const char *path)
{
    snprintf(s->good[s->n_good++], sizeof s->good[0], "%s", path);
}

static void add_bad(file_set *s, const char *name, const void *data, size_t len)
{
    put(s->bad[s->n_bad], sizeof s->bad[0], name, data, len);
    s->n_bad++;
}

/* The bad files: every kind of broken JPEG, PNG and BMP the decoders meet. */
static void make_bad_files(file_set *s)
{
    size_t len;
    uint8_t *dog = read_all("data/dog.jpg", &len);
    add_bad(s, "jpeg_truncated.jpg", dog, 20000);               /* cut in the scan */
    add_bad(s, "jpeg_header_cut.jpg", dog, 100);                /* cut before the frame */
    static const char garbage[] = "\xff\xd8\xff garbage after the SOI marker";
    add_bad(s, "jpeg_garbage.jpg", garbage, sizeof garbage - 1);
    add_bad(s, "jpeg_soi_only.jpg", "\xff\xd8\xff", 3);
    add_bad(s, "zero_length.jpg", "", 0);
    uint8_t *bogus = malloc(len); /* the first segment's length made 1 ("Bogus marker length") */
    memcpy(bogus, dog, len);
    bogus[4] = 0;
    bogus[5] = 1;
    add_bad(s, "jpeg_bogus_length.jpg", bogus, len);
    free(bogus);
    free(dog);
    static const char *const regress[] = {
        "tests/data/regress/image/jpeg_huffman_table_over_256_codes.jpg",
        "tests/data/regress/image/jpeg_huffman_table_past_end.jpg",
        "tests/data/regress/image/jpeg_bit_reader_shift.jpg"};
    for (size_t i = 0; i < sizeof regress / sizeof regress[0]; i++) {
        uint8_t *b = read_all(regress[i], &len);
        char name[32];
        snprintf(name, sizeof name, "jpeg_regress_%zu.jpg", i);
        add_bad(s, name, b, len);
        free(b);
    }
    uint8_t *png = read_all("data/shapes.png", &len);
    add_bad(s, "png_truncated.png", png, len / 2);
    /* A byte of the first IDAT's data changed, its CRC not: libpng's CRC check. */
    uint8_t *crc = malloc(len);
    memcpy(crc, png, len);
    size_t at = 8;
    while (at + 8 < len && memcmp(crc + at + 4, "IDAT", 4) != 0)
        at += 12 + ((size_t)crc[at] << 24 | (size_t)crc[at + 1] << 16 | (size_t)crc[at + 2] << 8 |
                    crc[at + 3]);
    ck_assert_uint_lt(at + 20, len);
    crc[at + 14] ^= 0x55;
    add_bad(s, "png_bad_crc.png", crc, len);
    free(crc);
    free(png);
    uint8_t *bmp = read_all("tests/fuzz/corpus/image/rgb8x6.bmp", &len);
    add_bad(s, "bmp_truncated.bmp", bmp, 60);
    free(bmp);
}

static void make_good_files(file_set *s)
{
    add_good(s, "data/dog.jpg");
    add_good(s, "data/shapes.png");
    add_good(s, "tests/fuzz/corpus/image/rgb8x6.jpg");
    add_good(s, "tests/fuzz/corpus/image/rgb8x6.bmp");
    add_good(s, "data/eagle.jpg");
    add_good(s, "tests/fuzz/corpus/image/rgba5x3.png");
    add_good(s, "tests/fuzz/corpus/image/grey3x9.jpg");
}

/* Every bad file, each followed by every good one, through one reader. */
static void alternate(gr_image_reader *r, const file_set *s)
{
    for (int b = 0; b < s->n_bad; b++) {
        expect_bad(r, s->bad[b]);
        for (int g = 0; g < s->n_good; g++) {
            expect_good(r, s->good[g]);
            expect_bad(r, s->bad[b]); /* the same bad file again: the same refusal */
        }
        expect_good(r, s->good[0]);
    }
}

START_TEST(test_bad_files_do_not_poison_the_reader)
{
    make_dir();
    file_set s = {0};
    make_good_files(&s);
    make_bad_files(&s);
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    alternate(r, &s);
    gr_image_reader_destroy(r);
    remove_dir();
}
END_TEST

/* Fast decode on, for a network so large nothing is scaled: the same bytes as gr_image_load. */
START_TEST(test_bad_files_do_not_poison_the_fast_reader)
{
    make_dir();
    file_set s = {0};
    make_good_files(&s);
    make_bad_files(&s);
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    gr_image_reader_fast_decode(r, GR_PREPROCESS_LETTERBOX, 8192, 8192);
    alternate(r, &s);
    gr_image_reader_destroy(r);
    remove_dir();
}
END_TEST

/* Fast decode on and scaling (dog.jpg 768x576 to 1/8, 96x72, for a 96x96 network): a long-lived reader
 * between bad files gives what a fresh reader with the same setting gives. */
START_TEST(test_bad_files_do_not_poison_scaled_decode)
{
    make_dir();
    file_set s = {0};
    make_bad_files(&s);
    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    gr_image_reader_fast_decode(r, GR_PREPROCESS_LETTERBOX, 96, 96);
    for (int b = 0; b < s.n_bad; b++) {
        expect_bad(r, s.bad[b]);
        gr_image_reader *fresh = NULL;
        ck_assert_int_eq(gr_image_reader_create(&fresh), GR_OK);
        gr_image_reader_fast_decode(fresh, GR_PREPROCESS_LETTERBOX, 96, 96);
        const gr_image *want = NULL, *got = NULL;
        ck_assert_int_eq(gr_image_reader_load(fresh, "data/dog.jpg", &want), GR_OK);
        ck_assert_msg(gr_image_reader_load(r, "data/dog.jpg", &got) == GR_OK,
                      "after %s: %s", s.bad[b], gr_last_error());
        ck_assert_int_eq(got->w, 96);
        ck_assert_int_eq(got->w, want->w);
        ck_assert_int_eq(got->h, want->h);
        ck_assert_mem_eq(got->data, want->data, (size_t)want->w * (size_t)want->h * 3);
        gr_image_reader_destroy(fresh);
    }
    gr_image_reader_destroy(r);
    remove_dir();
}
END_TEST

/* `path` refused by the reader and by gr_image_load with `status` and a message naming it and
 * containing `what`. */
static void expect_refused(gr_image_reader *r, const char *path, gr_status status, const char *what)
{
    expect_bad(r, path);
    ck_assert_msg(strstr(gr_last_error(), what), "%s: %s", path, gr_last_error());
    gr_image *im = (gr_image *)1;
    ck_assert_int_eq(gr_image_load(path, &im), status);
    ck_assert_ptr_null(im);
    ck_assert_msg(strstr(gr_last_error(), what), "%s: %s", path, gr_last_error());
    ck_assert_ptr_nonnull(strstr(gr_last_error(), path));
}

/* A FIFO (no writer: reading it would block forever), /dev/zero behind a symlink (never ends), a
 * directory and a sparse file one byte over the limit: each refused from fstat, before a byte is
 * read, between good files. The test case's timeout (10 s) catches a blocking open or read. */
START_TEST(test_refuses_non_regular_files)
{
    make_dir();
    char fifo[128], zero[128], sub[128], huge[128];
    snprintf(fifo, sizeof fifo, "%s/fifo.jpg", dir);
    snprintf(zero, sizeof zero, "%s/zero.jpg", dir);
    snprintf(sub, sizeof sub, "%s/dir.jpg", dir);
    snprintf(huge, sizeof huge, "%s/huge.jpg", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(symlink("/dev/zero", zero), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    FILE *f = fopen(huge, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite("\xff\xd8\xff", 1, 3, f), 3);
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)GR_MAX_IMAGE_FILE_BYTES + 1), 0);
    ck_assert_int_eq(fclose(f), 0);

    gr_image_reader *r = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    expect_good(r, "data/dog.jpg");
    expect_refused(r, fifo, GR_ERR_IO, "not a regular file (a FIFO)");
    expect_good(r, "data/dog.jpg");
    expect_refused(r, zero, GR_ERR_IO, "not a regular file (a character device)");
    expect_good(r, "data/shapes.png");
    expect_refused(r, sub, GR_ERR_IO, "not a regular file (a directory)");
    expect_good(r, "data/eagle.jpg");
    expect_refused(r, huge, GR_ERR_LIMIT, "bytes is larger than the 268435456-byte image file limit");
    expect_good(r, "data/dog.jpg");
    gr_image_reader_destroy(r);
    remove_dir();
}
END_TEST

static Suite *image_reader_suite(void)
{
    Suite *s = suite_create("image_reader");
    TCase *tc = tcase_create("image_reader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bad_files_do_not_poison_the_reader);
    tcase_add_test(tc, test_bad_files_do_not_poison_the_fast_reader);
    tcase_add_test(tc, test_bad_files_do_not_poison_scaled_decode);
    suite_add_tcase(s, tc);
    TCase *files = tcase_create("files");
    tcase_set_timeout(files, 10);
    tcase_add_test(files, test_refuses_non_regular_files);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(image_reader_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
