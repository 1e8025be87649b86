/* Check suite replaying every input under tests/data/regress/<target>/ through the code path of the
 * fuzzer of the same name (tests/fuzz/fuzz_<target>.c): each file there once crashed, leaked or hit
 * undefined behaviour. Replayed in the sanitizer builds, they must now give a status and a
 * one-line message (or success), nothing else.
 *   cfg/      gr_net_parse             weights/  gr_net_load_weights_mem on the fuzzer's small net
 *   image/    gr_image_decode_mem + letterbox     npy/      gr_npy_read_mem
 *   cli/      gr_cli_parse on the bytes split at NUL into argv
 *   coco/     gr_coco_parse as an instances file and as a results array */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/net.h"
#include "runtime/image/image.h"
#include "tools/coco.h"
#include "tools/npy.h"
#include "tools/cli.h"

/* The CLI's argument parser lives with the CLI, outside the library: compile it in here. */
#include "tools/cli_args.c"

#define REGRESS_DIR "tests/data/regress/"

typedef gr_status (*replay_fn)(const uint8_t *data, size_t len, const char *name);

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 4096;
    uint8_t *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    *len = 0;
    size_t got;
    while ((got = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += got;
        if (*len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    return buf;
}

static gr_status replay_cfg(const uint8_t *data, size_t len, const char *name)
{
    gr_net *net = NULL;
    gr_status st = gr_net_parse((const char *)data, len, name, &net);
    gr_net_free(net);
    return st;
}

static gr_status replay_weights(const uint8_t *data, size_t len, const char *name)
{
    static const char cfg[] = "[net]\nwidth=8\nheight=8\nchannels=3\n"
                              "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\n"
                              "pad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n"
                              "[convolutional]\nfilters=7\nsize=1\nstride=1\nactivation=linear\n"
                              "[region]\nanchors=1.5,2.5\nclasses=2\ncoords=4\nnum=1\nsoftmax=1\n";
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(cfg, sizeof cfg - 1, "small.cfg", &net), GR_OK);
    gr_status st = gr_net_load_weights_mem(net, data, len, name);
    gr_net_free(net);
    return st;
}

static gr_status replay_image(const uint8_t *data, size_t len, const char *name)
{
    gr_image *im = NULL;
    gr_status st = gr_image_decode_mem(data, len, name, &im);
    if (st == GR_OK) {
        float planar[3 * 16 * 12];
        uint8_t packed[3 * 16 * 12];
        ck_assert_int_eq(gr_image_letterbox(im, 16, 12, planar), GR_OK);
        ck_assert_int_eq(gr_image_letterbox_u8(im, 16, 12, packed), GR_OK);
    }
    gr_image_destroy(im);
    return st;
}

static gr_status replay_npy(const uint8_t *data, size_t len, const char *name)
{
    float *values = NULL;
    int dims[4], ndim = 0;
    gr_status st = gr_npy_read_mem(data, len, name, &values, dims, &ndim, 4);
    free(values);
    return st;
}

static gr_status replay_coco(const uint8_t *data, size_t len, const char *name)
{
    gr_coco c;
    gr_status st = gr_coco_parse((const char *)data, len, name, 0, &c);
    gr_coco_free(&c);
    if (st != GR_OK)
        return st;
    st = gr_coco_parse((const char *)data, len, name, 1, &c);
    gr_coco_free(&c);
    return st;
}

/* Usage errors map to GR_ERR_INVALID_ARGUMENT so the replay loop can check the message. */
static gr_status replay_cli(const uint8_t *data, size_t len, const char *name)
{
    (void)name;
    char *text = malloc(len + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text, data, len);
    text[len] = '\0';
    char *argv[258];
    int argc = 0;
    argv[argc++] = (char *)"graphrun";
    for (size_t start = 0; start <= len && argc < 257;) {
        argv[argc++] = text + start;
        start += strlen(text + start) + 1;
    }
    argv[argc] = NULL;
    gr_cli_options o;
    char err[256];
    int rc = gr_cli_parse(argc, argv, &o, err, sizeof err);
    free(text);
    if (rc == 0)
        return GR_OK;
    ck_assert_int_eq(rc, GR_EXIT_USAGE);
    gr_fail(GR_ERR_INVALID_ARGUMENT, "%s", err);
    return GR_ERR_INVALID_ARGUMENT;
}

static const struct {
    const char *dir;
    replay_fn fn;
} targets[] = {{"cfg", replay_cfg},   {"weights", replay_weights}, {"image", replay_image},
               {"npy", replay_npy},   {"cli", replay_cli},         {"coco", replay_coco}};

START_TEST(regression_inputs_fail_cleanly)
{
    const char *dir_name = targets[_i].dir;
    char dir_path[256];
    snprintf(dir_path, sizeof dir_path, REGRESS_DIR "%s", dir_name);
    DIR *dir = opendir(dir_path);
    if (!dir)
        return; /* no finding for this target yet */
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name);
        size_t len;
        uint8_t *data = read_all(path, &len);
        gr_clear_error();
        gr_status st = targets[_i].fn(data, len, entry->d_name);
        free(data);
        if (st == GR_OK)
            continue;
        const char *msg = gr_last_error();
        ck_assert_msg(st != GR_ERR_INTERNAL, "%s: internal error: %s", path, msg);
        ck_assert_msg(msg[0] != '\0', "%s: %s without a message", path, gr_status_str(st));
        ck_assert_msg(strchr(msg, '\n') == NULL, "%s: message is not one line: %s", path, msg);
    }
    closedir(dir);
}
END_TEST

/* Fuzzing stb_image 2.27 (the decoder before libjpeg-turbo) found an out-of-bounds write when a
 * JPEG Huffman table declares more than 256 codes (also in a table cut off by the end of the file).
 * libjpeg-turbo refuses both with its own message. */
START_TEST(jpeg_huffman_table_over_256_codes_is_refused)
{
    static const char *const files[] = {"jpeg_huffman_table_over_256_codes.jpg",
                                        "jpeg_huffman_table_past_end.jpg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, REGRESS_DIR "image/%s", files[i]);
        size_t len;
        uint8_t *data = read_all(path, &len);
        gr_image *im = (gr_image *)1;
        ck_assert_int_eq(gr_image_decode_mem(data, len, "bad.jpg", &im), GR_ERR_PARSE);
        ck_assert_ptr_null(im);
        ck_assert_msg(strstr(gr_last_error(), "bad.jpg: ") &&
                          strstr(gr_last_error(), "JPEG: Bogus Huffman table definition"),
                      "%s: %s", files[i], gr_last_error());
        free(data);
    }
}
END_TEST

/* GIF, PSD, HDR, PIC and PNM (stb_image 2.27 had published memory bugs in these, and the fuzzer
 * crashed its PNM decoder with a 20-byte 16-bit PGM: tests/data/regress/image/pgm_*) are named in
 * the refusal; nothing decodes them. */
START_TEST(other_formats_are_refused_by_signature)
{
    static const struct {
        const char *bytes;
        const char *format;
    } cases[] = {{"GIF89a\x01\x00\x01\x00\x80\x00\x00", "GIF"},
                 {"8BPS\x00\x01\x00\x00\x00\x00\x00\x00", "PSD"},
                 {"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n", "HDR"},
                 {"\x53\x80\xf6\x34PICT", "PIC"},
                 {"P5 2 2 65535\n\x01\x02", "PGM"},
                 {"P6 1 1 255\n\x01\x02\x03", "PPM"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gr_image *im = NULL;
        ck_assert_int_eq(gr_image_decode_mem((const uint8_t *)cases[i].bytes,
                                             strlen(cases[i].bytes) + 1, "x.img", &im),
                         GR_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(gr_last_error(), cases[i].format));
        ck_assert_ptr_nonnull(strstr(gr_last_error(), "x.img: byte 0: "));
    }
    /* No signature at all (TGA has none): refused as not an accepted image. */
    static const uint8_t tga[18] = {0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 24, 0};
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_decode_mem(tga, sizeof tga, "x.tga", &im), GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "not a JPEG, PNG or BMP image"));
}
END_TEST

START_TEST(regression_folder_is_not_empty)
{
    /* The replay above must have something to replay: at least the CLI finding is there. */
    int files = 0;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        char dir_path[256];
        snprintf(dir_path, sizeof dir_path, REGRESS_DIR "%s", targets[t].dir);
        DIR *dir = opendir(dir_path);
        if (!dir)
            continue;
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL)
            files += entry->d_name[0] != '.';
        closedir(dir);
    }
    ck_assert_int_ge(files, 1);
}
END_TEST

static Suite *regress_suite(void)
{
    Suite *s = suite_create("regress");
    TCase *tc = tcase_create("fuzz findings");
    tcase_add_loop_test(tc, regression_inputs_fail_cleanly, 0,
                        (int)(sizeof targets / sizeof targets[0]));
    tcase_add_test(tc, regression_folder_is_not_empty);
    tcase_add_test(tc, jpeg_huffman_table_over_256_codes_is_refused);
    tcase_add_test(tc, other_formats_are_refused_by_signature);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(regress_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
