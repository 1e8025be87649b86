/* Check suite for tools/npy.c: round trips through the writer and reader, the exact v1.0
 * layout the writer produces, and one malformed file per way a .npy can lie. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/npy.h"

static void temp_path(char *out, size_t cap)
{
    static int counter;
    snprintf(out, cap, "/tmp/gr_test_npy_%d_%d.npy", (int)getpid(), counter++);
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* A v1.0 file with header text `dict` (padded here like NumPy does) and `data_bytes` bytes of
 * float data (the values 0, 1, 2, ... as floats, then zero bytes). */
static void write_npy(const char *path, const char *dict, size_t data_bytes)
{
    size_t dict_len = strlen(dict);
    size_t header_len = (10 + dict_len + 1 + 63) / 64 * 64 - 10;
    size_t total = 10 + header_len + data_bytes;
    unsigned char *b = calloc(total, 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(header_len & 0xff);
    b[9] = (unsigned char)(header_len >> 8);
    memset(b + 10, ' ', header_len);
    memcpy(b + 10, dict, dict_len);
    b[10 + header_len - 1] = '\n';
    for (size_t i = 0; i + 4 <= data_bytes; i += 4) {
        float v = (float)(i / 4);
        memcpy(b + 10 + header_len + i, &v, 4);
    }
    write_bytes(path, b, total);
    free(b);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    b[*len] = 0;
    return b;
}

START_TEST(test_round_trip_shapes)
{
    static const int shapes[][4] = {{2, 3, 4, 5}, {7, 0, 0, 0}, {1, 3, 13, 13}};
    static const int ndims[] = {4, 1, 4};
    for (int c = 0; c < 3; c++) {
        size_t elems = 1;
        for (int i = 0; i < ndims[c]; i++)
            elems *= (size_t)shapes[c][i];
        float *data = malloc(elems * sizeof *data);
        for (size_t i = 0; i < elems; i++)
            data[i] = (float)i * 0.37f - 11.0f;
        char path[256];
        temp_path(path, sizeof path);
        ck_assert_int_eq(gr_npy_write(path, data, shapes[c], ndims[c]), GR_OK);
        float *back = NULL;
        int dims[8], nd = -1;
        ck_assert_int_eq(gr_npy_read(path, &back, dims, &nd, 8), GR_OK);
        ck_assert_int_eq(nd, ndims[c]);
        for (int i = 0; i < nd; i++)
            ck_assert_int_eq(dims[i], shapes[c][i]);
        ck_assert_mem_eq(back, data, elems * sizeof *data);
        free(back);
        free(data);
        unlink(path);
    }
}
END_TEST

START_TEST(test_scalar_round_trip)
{
    float x = 3.5f;
    char path[256];
    temp_path(path, sizeof path);
    ck_assert_int_eq(gr_npy_write(path, &x, NULL, 0), GR_OK);
    float *back = NULL;
    int dims[1], nd = -1;
    ck_assert_int_eq(gr_npy_read(path, &back, dims, &nd, 1), GR_OK);
    ck_assert_int_eq(nd, 0);
    ck_assert_mem_eq(back, &x, sizeof x);
    free(back);
    unlink(path);
}
END_TEST

START_TEST(test_written_layout)
{
    /* What NumPy writes for np.zeros((2, 3), '<f4'): magic, version 1.0, a header padded to a
     * 64-byte boundary ending in '\n', then 24 data bytes. */
    float data[6] = {0};
    int dims[2] = {2, 3};
    char path[256];
    temp_path(path, sizeof path);
    ck_assert_int_eq(gr_npy_write(path, data, dims, 2), GR_OK);
    size_t len;
    unsigned char *b = read_all(path, &len);
    ck_assert_mem_eq(b, "\x93NUMPY\x01\x00", 8);
    size_t header_len = (size_t)b[8] | (size_t)b[9] << 8;
    ck_assert_uint_eq((10 + header_len) % 64, 0);
    ck_assert_uint_eq(len, 10 + header_len + 24);
    ck_assert_int_eq(b[10 + header_len - 1], '\n');
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    ck_assert_mem_eq(b + 10, dict, strlen(dict));
    free(b);
    unlink(path);

    int one[1] = {5};
    float five[5] = {0};
    ck_assert_int_eq(gr_npy_write(path, five, one, 1), GR_OK);
    b = read_all(path, &len);
    ck_assert_ptr_nonnull(strstr((char *)b + 10, "'shape': (5,)")); /* Python's 1-tuple */
    free(b);
    unlink(path);
}
END_TEST

START_TEST(test_reads_numpy_variants)
{
    /* Double quotes, no trailing comma, keys in another order, a Python 2 long: all legal. */
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{\"shape\": (3L, 2), \"fortran_order\": False, \"descr\": \"<f4\"}", 24);
    float *data = NULL;
    int dims[4], nd = 0;
    ck_assert_int_eq(gr_npy_read(path, &data, dims, &nd, 4), GR_OK);
    ck_assert_int_eq(nd, 2);
    ck_assert_int_eq(dims[0], 3);
    ck_assert_int_eq(dims[1], 2);
    ck_assert_double_eq((double)data[5], 5.0);
    free(data);
    unlink(path);
}
END_TEST

/* Six floats, a NaN at element 2 and an Inf at element 4. */
static size_t write_nonfinite(const char *path)
{
    const float six[6] = {0.5f, 1.0f, NAN, 0.25f, INFINITY, 0.0f};
    const int dims[2] = {2, 3};
    ck_assert_int_eq(gr_npy_write(path, six, dims, 2), GR_OK);
    size_t len = 0;
    free(read_all(path, &len));
    return len - sizeof six; /* the data's byte offset */
}

START_TEST(test_nonfinite_values_counted_or_refused)
{
    char path[256], want[512];
    temp_path(path, sizeof path);
    size_t offset = write_nonfinite(path);
    float *data = NULL;
    int dims[4], nd = 0;
    size_t bad = 99;
    ck_assert_int_eq(gr_npy_read_counted(path, &data, dims, &nd, 4, 0, &bad), GR_OK);
    ck_assert_uint_eq(bad, 2);
    ck_assert_int_eq(nd, 2);
    ck_assert(isnan(data[2]) && isinf(data[4]));
    free(data);
    /* Refused on request: the count, and where the first one is. */
    ck_assert_int_eq(gr_npy_read_counted(path, &data, dims, &nd, 4, 1, &bad), GR_ERR_NUMERIC);
    ck_assert_ptr_null(data);
    ck_assert_int_eq(nd, 0);
    snprintf(want, sizeof want, "%s: 2 non-finite values (NaN/Inf), the first at element 2 (byte "
             "%zu)", path, offset + 2 * sizeof(float));
    ck_assert_str_eq(gr_last_error(), want);
    /* The same from memory. */
    size_t len = 0;
    unsigned char *bytes = read_all(path, &len);
    ck_assert_int_eq(gr_npy_read_mem_counted(bytes, len, "m.npy", &data, dims, &nd, 4, 0, &bad),
                     GR_OK);
    ck_assert_uint_eq(bad, 2);
    free(data);
    ck_assert_int_eq(gr_npy_read_mem_counted(bytes, len, "m.npy", &data, dims, &nd, 4, 1, &bad),
                     GR_ERR_NUMERIC);
    ck_assert_ptr_null(data);
    free(bytes);
    unlink(path);
}
END_TEST

/* gr_npy_read's stderr while reading `path`, into out. */
static void stderr_of_read(const char *path, char *out, size_t cap)
{
    char log[256];
    temp_path(log, sizeof log);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    float *data = NULL;
    int dims[4], nd = 0;
    gr_status st = gr_npy_read(path, &data, dims, &nd, 4);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_int_eq(st, GR_OK);
    free(data);
    FILE *f = fopen(log, "r");
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    unlink(log);
}

START_TEST(test_nonfinite_input_warns)
{
    char path[256], err[512], want[512];
    temp_path(path, sizeof path);
    write_nonfinite(path);
    stderr_of_read(path, err, sizeof err);
    snprintf(want, sizeof want, "graphrun: warning: %s: 2 non-finite values (NaN/Inf) in the "
             "input: outputs will be meaningless\n", path);
    ck_assert_str_eq(err, want);
    /* Finite data: nothing said. */
    const float two[2] = {1.0f, 2.0f};
    const int dims[1] = {2};
    ck_assert_int_eq(gr_npy_write(path, two, dims, 1), GR_OK);
    stderr_of_read(path, err, sizeof err);
    ck_assert_str_eq(err, "");
    unlink(path);
}
END_TEST

/* Expect gr_npy_read to fail with `status` and a one-line message naming the file, a byte
 * offset and `what`. */
static void expect_failure(const char *path, int max_ndim, gr_status status, const char *what)
{
    float *data = (float *)1;
    int dims[8], nd = 99;
    ck_assert_int_eq(gr_npy_read(path, &data, dims, &nd, max_ndim), status);
    ck_assert_ptr_null(data);
    ck_assert_int_eq(nd, 0);
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, path) != NULL, "message '%s' lacks the path", msg);
    ck_assert_msg(strstr(msg, what) != NULL, "message '%s' lacks '%s'", msg, what);
    ck_assert_ptr_null(strchr(msg, '\n'));
}

START_TEST(test_rejects_bad_magic)
{
    char path[256];
    temp_path(path, sizeof path);
    write_bytes(path, "\x93NUMPX\x01\x00\x10\x00{}", 12);
    expect_failure(path, 8, GR_ERR_PARSE, "byte 0: bad magic");
    write_bytes(path, "", 0);
    expect_failure(path, 8, GR_ERR_PARSE, "byte 0: bad magic");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_fortran_order)
{
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
    /* 'True' starts at byte 10 + 34. */
    expect_failure(path, 8, GR_ERR_UNSUPPORTED, "byte 44: npy fortran_order True");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_other_dtypes)
{
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24);
    expect_failure(path, 8, GR_ERR_UNSUPPORTED, "'<f8'");
    write_npy(path, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12);
    expect_failure(path, 8, GR_ERR_UNSUPPORTED, "'>f4'");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_truncated_data)
{
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23);
    /* The 60-character dict pads to a 118-byte header: data starts at byte 128. */
    expect_failure(path, 8, GR_ERR_PARSE,
                   "byte 128: truncated npy data: expected 24 bytes, found 23");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_trailing_data)
{
    /* The header understates the data: 25 bytes follow a (2, 3) float header that ends at
     * byte 128, so the extra byte is at 128 + 24. */
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 25);
    expect_failure(path, 8, GR_ERR_PARSE, "byte 152: trailing bytes");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_header_past_end)
{
    /* Header length 0xffff but the file ends after 30 bytes. */
    char path[256];
    temp_path(path, sizeof path);
    unsigned char b[30] = "\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'";
    write_bytes(path, b, sizeof b);
    expect_failure(path, 8, GR_ERR_PARSE, "byte 10: npy header claims 65535 bytes");
    /* A 4-byte length (v2.0) beyond the sanity cap. */
    unsigned char v2[16] = "\x93NUMPY\x02\x00\x00\x00\x00\x40{}";
    write_bytes(path, v2, sizeof v2);
    expect_failure(path, 8, GR_ERR_LIMIT, "byte 8: npy header length");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_absurd_dims)
{
    char path[256];
    temp_path(path, sizeof path);
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }", 8);
    expect_failure(path, 8, GR_ERR_LIMIT, "npy shape has more than");
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
              8);
    expect_failure(path, 8, GR_ERR_LIMIT, "npy dimension exceeds");
    write_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), }", 4);
    expect_failure(path, 2, GR_ERR_LIMIT, "more than 2 dimensions");
    unlink(path);
}
END_TEST

START_TEST(test_rejects_malformed_dict)
{
    static const struct {
        const char *dict, *what;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "non-negative integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, }", "missing"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", "unknown key"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}", "True or False"},
        {"['descr', '<f4']", "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", "after the dict"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': ()}", "expected ':'"},
    };
    char path[256];
    temp_path(path, sizeof path);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy(path, cases[i].dict, 8);
        expect_failure(path, 8, GR_ERR_PARSE, cases[i].what);
        ck_assert_ptr_nonnull(strstr(gr_last_error(), ": byte "));
    }
    unlink(path);
}
END_TEST

START_TEST(test_missing_file_and_bad_args)
{
    float *data = NULL;
    int dims[4], nd;
    ck_assert_int_eq(gr_npy_read("/nonexistent/x.npy", &data, dims, &nd, 4), GR_ERR_IO);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "/nonexistent/x.npy"));
    float x = 0;
    int neg[1] = {-1};
    ck_assert_int_eq(gr_npy_write("/tmp/gr_test_npy_bad.npy", &x, neg, 1),
                     GR_ERR_INVALID_ARGUMENT);
    int ok[1] = {1};
    ck_assert_int_eq(gr_npy_write("/nonexistent/x.npy", &x, ok, 1), GR_ERR_IO);
    ck_assert_int_eq(gr_npy_write(NULL, &x, ok, 1), GR_ERR_INVALID_ARGUMENT);
}
END_TEST

static Suite *npy_suite(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_round_trip_shapes);
    tcase_add_test(tc, test_scalar_round_trip);
    tcase_add_test(tc, test_written_layout);
    tcase_add_test(tc, test_reads_numpy_variants);
    tcase_add_test(tc, test_rejects_bad_magic);
    tcase_add_test(tc, test_rejects_fortran_order);
    tcase_add_test(tc, test_rejects_other_dtypes);
    tcase_add_test(tc, test_rejects_truncated_data);
    tcase_add_test(tc, test_rejects_trailing_data);
    tcase_add_test(tc, test_rejects_header_past_end);
    tcase_add_test(tc, test_rejects_absurd_dims);
    tcase_add_test(tc, test_rejects_malformed_dict);
    tcase_add_test(tc, test_missing_file_and_bad_args);
    tcase_add_test(tc, test_nonfinite_values_counted_or_refused);
    tcase_add_test(tc, test_nonfinite_input_warns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
