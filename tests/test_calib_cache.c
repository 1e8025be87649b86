/* Check suite for runtime/precision/calib_cache.c on files alone (no model, no calibration): a
 * written cache reads back; every number is range-checked, every line required, the checksum
 * verified; a corrupt cache is refused with a notice naming file:line (the caller calibrates again)
 * and nothing of it is used; a cache for another key or not a cache at all is an error. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "runtime/precision/calib_cache.h"

enum { N_LAYERS = 4 };

static const gr_calib_key key = {0x8c1b0e7d4f2a9c33ULL, GR_CALIB_MAX, 0.0f, "tiny", 2,
                                 0x3f0c2b7a9d1e6f42ULL};

static void temp_path(char *out, size_t cap)
{
    static int counter;
    snprintf(out, cap, "/tmp/gr_test_calib_cache_%d_%d.txt", (int)getpid(), counter++);
}

static char *read_all(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* FNV-1a 64, as the format specifies: lets a test forge a valid checksum over edited content, so
 * that what refuses the file is the value check, not the checksum. */
static uint64_t fnv1a(const char *text, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Writes `body` followed by its correct checksum line. */
static void write_signed(const char *path, const char *body)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%schecksum %016" PRIx64 "\n", body, fnv1a(body, strlen(body)));
    ck_assert_int_eq(fclose(f), 0);
}

static const char good_head[] = "graphrun-calibration 3\nmodel tiny 8c1b0e7d4f2a9c33\nmethod max\n"
                                "images 2 3f0c2b7a9d1e6f42\n";

/* A body with the given input line and layer lines (each with its '\n'). */
static const char *body_of(const char *input_line, const char *layers)
{
    static char body[1024];
    snprintf(body, sizeof body, "%s%s%s", good_head, input_line, layers);
    return body;
}

static const char good_layers[] = "layer 0 7.5\nlayer 1 3.25\nlayer 2 12\nlayer 3 0.5\n";

/* Reads path: returns the status, fills found and notice; the ranges start as sentinels so that
 * a refused file can be seen to have left them alone. */
static gr_status read_cache(const char *path, float *ranges, float *input, int *found,
                            char *notice, size_t notice_len)
{
    for (int i = 0; i < N_LAYERS; i++)
        ranges[i] = -1.0f;
    *input = -1.0f;
    return gr_calib_cache_read(path, &key, N_LAYERS, ranges, input, found, notice, notice_len);
}

/* The file is refused as corrupt: success, nothing found or written, a notice with file:line. */
static void assert_corrupt(const char *path, int line, const char *what)
{
    float ranges[N_LAYERS], input;
    int found = 1;
    char notice[512], where[128];
    gr_status st = read_cache(path, ranges, &input, &found, notice, sizeof notice);
    ck_assert_msg(st == GR_OK, "%s: status %d (%s)", what, st, gr_last_error());
    ck_assert_msg(!found, "%s: accepted (layer 0 = %g, input %g)", what, (double)ranges[0],
                  (double)input);
    snprintf(where, sizeof where, "%s:%d: corrupt calibration cache", path, line);
    ck_assert_msg(strstr(notice, where) != NULL, "%s: notice '%s' lacks '%s'", what, notice, where);
    ck_assert_msg(strchr(notice, '\n') == NULL, "%s: notice is not one line", what);
    for (int i = 0; i < N_LAYERS; i++)
        ck_assert(ranges[i] == -1.0f);
    ck_assert(input == -1.0f);
}

START_TEST(written_cache_reads_back_with_its_checksum)
{
    char path[128], notice[512];
    temp_path(path, sizeof path);
    /* 0 (no non-zero value seen) is written as 1: the planner's scale is the same for both. */
    const float layers[N_LAYERS] = {7.41f, 0.0f, 1234.5f, 1e-3f};
    ck_assert_int_eq(gr_calib_cache_write(path, &key, N_LAYERS, layers, 200.0f / 255.0f), GR_OK);
    const char *text = read_all(path);
    ck_assert_msg(strncmp(text, "graphrun-calibration 3\n", 23) == 0, "%s", text);
    const char *sum = strstr(text, "checksum ");
    ck_assert_ptr_nonnull(sum);
    ck_assert_uint_eq(strtoull(sum + 9, NULL, 16), fnv1a(text, (size_t)(sum - text)));
    float ranges[N_LAYERS], input;
    int found = 0;
    ck_assert_int_eq(read_cache(path, ranges, &input, &found, notice, sizeof notice), GR_OK);
    ck_assert_str_eq(notice, "");
    ck_assert_int_eq(found, 1);
    ck_assert(ranges[0] == 7.41f);
    ck_assert(ranges[1] == 1.0f);
    ck_assert(ranges[2] == 1234.5f);
    ck_assert(ranges[3] == 1e-3f);
    ck_assert(input == 200.0f / 255.0f);
    remove(path);
}
END_TEST

/* The values that used to be accepted and changed the detections, each with a valid checksum. */
START_TEST(out_of_range_values_are_refused)
{
    static const char *const bad[] = {"nan", "-5", "0", "1e-30", "inf", "-inf", "1e10", "7.5x",
                                      "", "0x1p200"};
    char path[128], layers[256], input_line[64];
    temp_path(path, sizeof path);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* As layer 2's range (line 8). */
        snprintf(layers, sizeof layers, "layer 0 7.5\nlayer 1 3.25\nlayer 2 %s\nlayer 3 0.5\n",
                 bad[i]);
        write_signed(path, body_of("input 1\n", layers));
        assert_corrupt(path, 8, bad[i]);
        /* As the input's (line 5). */
        snprintf(input_line, sizeof input_line, "input %s\n", bad[i]);
        write_signed(path, body_of(input_line, good_layers));
        assert_corrupt(path, 5, bad[i]);
    }
    /* The input is v / 255 of uint8 pixels: above 1 or below 1/255 cannot come from calibration. */
    write_signed(path, body_of("input 1.5\n", good_layers));
    assert_corrupt(path, 5, "input 1.5");
    write_signed(path, body_of("input 0.001\n", good_layers));
    assert_corrupt(path, 5, "input 0.001");
    remove(path);
}
END_TEST

START_TEST(every_line_is_required)
{
    char path[128], body[1024];
    temp_path(path, sizeof path);
    /* Without the method line, the images line (line 4), a layer line, the input line. */
    snprintf(body, sizeof body, "graphrun-calibration 3\nmodel tiny 8c1b0e7d4f2a9c33\n"
             "images 2 3f0c2b7a9d1e6f42\ninput 1\n%s", good_layers);
    write_signed(path, body);
    assert_corrupt(path, 3, "no method line");
    snprintf(body, sizeof body, "graphrun-calibration 3\nmodel tiny 8c1b0e7d4f2a9c33\n"
             "method max\ninput 1\n%s", good_layers);
    write_signed(path, body);
    assert_corrupt(path, 4, "no images line");
    write_signed(path, body_of("input 1\n", "layer 0 7.5\nlayer 1 3.25\nlayer 3 0.5\n"));
    assert_corrupt(path, 8, "no layer 2");
    write_signed(path, body_of("input 1\n", "layer 0 7.5\nlayer 1 3.25\nlayer 2 12\n"));
    assert_corrupt(path, 9, "no layer 3");
    write_signed(path, body_of("", good_layers));
    assert_corrupt(path, 5, "no input line");
    write_signed(path, body_of("input 1\n", "layer 0 7.5\nlayer 1 3.25\nlayer 1 3.25\nlayer 2 12\n"
                                            "layer 3 0.5\n"));
    assert_corrupt(path, 8, "repeated layer");
    write_signed(path, body_of("input 1\n", "layer 0 7.5\nlayer 1 3.25\nlayer 2 12\nlayer 3 0.5\n"
                                            "layer 4 0.5\n"));
    assert_corrupt(path, 10, "a layer too many");
    remove(path);
}
END_TEST

START_TEST(checksum_is_verified)
{
    char path[128];
    temp_path(path, sizeof path);
    const float layers[N_LAYERS] = {7.5f, 3.25f, 12.0f, 0.5f};
    ck_assert_int_eq(gr_calib_cache_write(path, &key, N_LAYERS, layers, 1.0f), GR_OK);
    char text[4096];
    snprintf(text, sizeof text, "%s", read_all(path));
    size_t len = strlen(text);
    /* One range edited (7.5 -> 7.6, still a valid value): the checksum (line 10) refuses it. */
    char *edit = strstr(text, "layer 0 7.5");
    ck_assert_ptr_nonnull(edit);
    edit[10] = '6';
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, len, f);
    fclose(f);
    assert_corrupt(path, 10, "edited range");
    /* The checksum line dropped: the last line (a layer's) is not a checksum. */
    edit[10] = '5';
    f = fopen(path, "wb");
    fwrite(text, 1, (size_t)(strstr(text, "checksum") - text), f);
    fclose(f);
    assert_corrupt(path, 9, "no checksum line");
    /* Truncated in the middle of the last line. */
    f = fopen(path, "wb");
    fwrite(text, 1, len - 5, f);
    fclose(f);
    assert_corrupt(path, 10, "truncated");
    remove(path);
}
END_TEST

START_TEST(another_key_or_not_a_cache_is_an_error)
{
    char path[128], notice[512];
    float ranges[N_LAYERS], input;
    int found = 1;
    temp_path(path, sizeof path);
    /* Documented: a cache for another model, method or image set is an error naming the line. */
    const char *other_method = "graphrun-calibration 3\nmodel tiny 8c1b0e7d4f2a9c33\nmethod mse\n"
                               "images 2 3f0c2b7a9d1e6f42\ninput 1\nlayer 0 1\nlayer 1 1\n"
                               "layer 2 1\nlayer 3 1\n";
    write_signed(path, other_method);
    ck_assert_int_eq(read_cache(path, ranges, &input, &found, notice, sizeof notice),
                     GR_ERR_PARSE);
    ck_assert_msg(strstr(gr_last_error(), ":3: calibration cache was made with method 'mse'"),
                  "%s", gr_last_error());
    /* Not a cache at all (the wrong path, say): an error, so the file is never overwritten. */
    write_signed(path, "P6\n1 1\n255\n");
    ck_assert_int_eq(read_cache(path, ranges, &input, &found, notice, sizeof notice),
                     GR_ERR_PARSE);
    ck_assert(strstr(gr_last_error(), ":1: not a graphrun calibration cache") != NULL);
    /* Version 2 (no checksum): stale, replaced with a notice. */
    FILE *f = fopen(path, "wb");
    fprintf(f, "graphrun-calibration 2\nmodel tiny 8c1b0e7d4f2a9c33\nmethod max\n"
               "images 2 3f0c2b7a9d1e6f42\ninput 1\nlayer 0 1\nlayer 1 1\nlayer 2 1\nlayer 3 1\n");
    fclose(f);
    ck_assert_int_eq(read_cache(path, ranges, &input, &found, notice, sizeof notice), GR_OK);
    ck_assert_int_eq(found, 0);
    ck_assert(strstr(notice, "older graphrun") != NULL);
    remove(path);
}
END_TEST

/* A calibration cache that is not a regular file is refused at once, by kind: a FIFO neither
 * blocks the read (nothing writes to it) nor the write, and stays a FIFO. */
START_TEST(special_files_neither_block_nor_are_replaced)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_calib_fifo_%d", (int)getpid());
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    float ranges[N_LAYERS], input;
    int found = 1;
    char notice[256];
    ck_assert_int_eq(read_cache(path, ranges, &input, &found, notice, sizeof notice), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a FIFO)"), "%s", gr_last_error());
    ck_assert_int_eq(found, 0);
    const float layers[N_LAYERS] = {1, 2, 3, 4};
    ck_assert_int_eq(gr_calib_cache_write(path, &key, N_LAYERS, layers, 0.5f), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a FIFO)"), "%s", gr_last_error());
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calib_cache");
    TCase *tc = tcase_create("calib_cache");
    tcase_add_test(tc, written_cache_reads_back_with_its_checksum);
    tcase_add_test(tc, out_of_range_values_are_refused);
    tcase_add_test(tc, every_line_is_required);
    tcase_add_test(tc, checksum_is_verified);
    tcase_add_test(tc, another_key_or_not_a_cache_is_an_error);
    tcase_add_test(tc, special_files_neither_block_nor_are_replaced);
    tcase_set_timeout(tc, 20); /* a FIFO that blocks fails the test instead of hanging it */
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
