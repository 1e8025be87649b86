/* Check suite for graphrun's size limits: absurd dimensions, overflowing size arithmetic, huge
 * batches, networks whose run cannot fit in memory, and files whose headers claim absurd sizes are
 * all rejected with GR_ERR_LIMIT and a one-line message naming what and where, before anything is
 * allocated for them (under AddressSanitizer an attempted multi-GiB allocation would abort the
 * test, and LeakSanitizer checks that the failure paths free what they did allocate). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/net.h"
#include "planner/plan.h"
#include "runtime/image/image.h"
#include "tools/npy.h"

static void assert_one_line_containing(const char *what)
{
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, what) != NULL, "message '%s' lacks '%s'", msg, what);
    ck_assert_ptr_null(strchr(msg, '\n'));
}

static gr_status parse_text(const char *text, gr_net **net)
{
    return gr_net_parse(text, strlen(text), "limits.cfg", net);
}

START_TEST(cfg_input_of_65536_squared)
{
    gr_net *net = (gr_net *)1;
    ck_assert_int_eq(parse_text("[net]\nwidth=65536\nheight=65536\nchannels=3\n"
                                "[convolutional]\nfilters=1024\nsize=3\npad=1\n", &net),
                     GR_ERR_LIMIT);
    ck_assert_ptr_null(net);
    assert_one_line_containing("limits.cfg:1: [net] input 3x65536x65536 is too large");
}
END_TEST

START_TEST(cfg_layer_output_too_large)
{
    /* The input (2^30 elements) is allowed; 65536 filters over it are not. */
    gr_net *net = NULL;
    ck_assert_int_eq(parse_text("[net]\nwidth=65536\nheight=16384\nchannels=1\n"
                                "[convolutional]\nfilters=65536\nsize=1\n", &net),
                     GR_ERR_LIMIT);
    assert_one_line_containing("limits.cfg:5: layer 0: [convolutional] output shape 65536x16384x65536 exceeds");
}
END_TEST

START_TEST(cfg_dimension_above_limit)
{
    gr_net *net = NULL;
    ck_assert_int_eq(parse_text("[net]\nwidth=65537\nheight=1\nchannels=1\n[maxpool]\n", &net),
                     GR_ERR_LIMIT);
    assert_one_line_containing("limits.cfg:2: [net] key 'width'");
}
END_TEST

START_TEST(cfg_total_weights_above_limit)
{
    /* Each conv has 2^14 x 2^14 = 2^28 weights (allowed per layer); with their biases the eighth
     * brings the total past 2^31, which would be one 8 GiB weight block. */
    char cfg[2048] = "[net]\nwidth=1\nheight=1\nchannels=16384\n";
    for (int i = 0; i < 9; i++)
        strcat(cfg, "[convolutional]\nfilters=16384\nsize=1\n");
    gr_net *net = NULL;
    ck_assert_int_eq(parse_text(cfg, &net), GR_ERR_LIMIT);
    assert_one_line_containing("limits.cfg:26: [convolutional] layer 7 brings the network to");
}
END_TEST

static gr_model *load_builtin(const char *name)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = name;
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

START_TEST(batch_4096_of_yolov2_tiny)
{
    /* Layer 0's output alone is 16 x 416 x 416 x 4096 = 11.3 G floats. */
    gr_model *model = load_builtin("yolo");
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.batch = 4096;
    gr_engine *engine = (gr_engine *)1;
    ck_assert_int_eq(gr_engine_build(model, &opt, &engine), GR_ERR_LIMIT);
    ck_assert_ptr_null(engine);
    assert_one_line_containing("yolov2-tiny-voc:");
    assert_one_line_containing("layer 0 (conv): output 16x416x416 x batch 4096");
    gr_model_destroy(model);
}
END_TEST

START_TEST(plan_of_batch_4096_of_yolov2_tiny)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_builtin("yolo", &net), GR_OK);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.batch = 4096;
    gr_plan *plan = (gr_plan *)1;
    ck_assert_int_eq(gr_plan_build(net, &opt, &plan), GR_ERR_LIMIT);
    assert_one_line_containing("layer 0 (cfg line 25): output 16x416x416 x batch 4096 is more than");
    gr_net_free(net);
}
END_TEST

START_TEST(batch_above_maximum)
{
    gr_model *model = load_builtin("yolo");
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.batch = GR_MAX_BATCH + 1;
    gr_engine *engine = NULL;
    ck_assert_int_eq(gr_engine_build(model, &opt, &engine), GR_ERR_LIMIT);
    assert_one_line_containing("batch=4097 is outside 1..4096");
    gr_model_destroy(model);
}
END_TEST

START_TEST(cpu_run_larger_than_host_memory)
{
    /* Eight yolo heads, each fed by a 6 x 8192 x 8192 conv: with batch 5 every tensor stays under
     * 2^31 elements, but the eight heads (kept to the end of a run) and their output copies need
     * 16 x 7.5 GiB = 120 GiB at once. */
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    double host_gib = (double)pages * (double)page_size / 1073741824.0;
    if (pages <= 0 || page_size <= 0 || host_gib >= 120.0) {
        fprintf(stderr, "cpu_run_larger_than_host_memory: skipped: this machine has %.0f GiB\n",
                host_gib);
        return;
    }
    char cfg[2048] = "[net]\nwidth=8192\nheight=8192\nchannels=1\n";
    for (int i = 0; i < 8; i++)
        strcat(cfg, "[convolutional]\nfilters=6\nsize=1\nactivation=linear\n"
                    "[yolo]\nclasses=1\nnum=1\nanchors=1,1\n");
    char path[] = "/tmp/gr_limits_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
    close(fd);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = path;
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    unlink(path);
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    opt.batch = 5;
    gr_engine *engine = NULL;
    ck_assert_int_eq(gr_engine_build(model, &opt, &engine), GR_ERR_LIMIT);
    ck_assert_ptr_null(engine);
    assert_one_line_containing("the CPU engine needs about");
    assert_one_line_containing("for a batch of 5");
    gr_model_destroy(model);
}
END_TEST

/* A .npy header for `shape` followed by `data_bytes` zero bytes. */
static uint8_t *npy_bytes(const char *shape, size_t data_bytes, size_t *len)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
                     shape);
    size_t header_len = ((size_t)10 + (size_t)n + 1 + 63) / 64 * 64 - 10;
    *len = 10 + header_len + data_bytes;
    uint8_t *b = calloc(1, *len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(header_len & 0xff);
    b[9] = (uint8_t)(header_len >> 8);
    memset(b + 10, ' ', header_len);
    memcpy(b + 10, dict, (size_t)n);
    b[10 + header_len - 1] = '\n';
    return b;
}

START_TEST(npy_header_claiming_2_pow_40_elements)
{
    size_t len;
    uint8_t *b = npy_bytes("(1048576, 1048576)", 16, &len);
    float *data = (float *)1;
    int dims[4], nd = 7;
    ck_assert_int_eq(gr_npy_read_mem(b, len, "big.npy", &data, dims, &nd, 4), GR_ERR_LIMIT);
    ck_assert_ptr_null(data);
    ck_assert_int_eq(nd, 0);
    assert_one_line_containing("big.npy: byte 70: npy shape has more than 2147483648 elements");
    free(b);
}
END_TEST

START_TEST(npy_large_claim_with_short_data_allocates_nothing)
{
    /* 2^31 floats (8 GiB, within the element limit) but 16 bytes of data: refused from the
     * sizes alone. Under ASan an 8 GiB malloc would abort the test. */
    size_t len;
    uint8_t *b = npy_bytes("(32768, 65536)", 16, &len);
    float *data = NULL;
    int dims[4], nd = 0;
    ck_assert_int_eq(gr_npy_read_mem(b, len, "short.npy", &data, dims, &nd, 4), GR_ERR_PARSE);
    assert_one_line_containing("short.npy: byte 128: truncated npy data: expected 8589934592 bytes, "
                               "found 16");
    char path[] = "/tmp/gr_limits_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
    close(fd);
    ck_assert_int_eq(gr_npy_read(path, &data, dims, &nd, 4), GR_ERR_PARSE);
    assert_one_line_containing("truncated npy data: expected 8589934592 bytes, found 16");
    unlink(path);
    free(b);
}
END_TEST

/* A 54-byte BMP header (24-bit, uncompressed) claiming w x h, with no pixel data. */
static void bmp_header(uint8_t b[54], int w, int h)
{
    memset(b, 0, 54);
    b[0] = 'B';
    b[1] = 'M';
    b[10] = 54;  /* pixel data offset */
    b[14] = 40;  /* BITMAPINFOHEADER */
    for (int i = 0; i < 4; i++) {
        b[18 + i] = (uint8_t)((unsigned)w >> (8 * i));
        b[22 + i] = (uint8_t)((unsigned)h >> (8 * i));
    }
    b[26] = 1;   /* planes */
    b[28] = 24;  /* bits per pixel */
}

START_TEST(image_header_with_huge_dimensions)
{
    uint8_t b[54];
    gr_image *im = (gr_image *)1;
    bmp_header(b, 30000, 30000); /* 9e8 pixels > 2^28, each side within GR_MAX_DIM */
    ck_assert_int_eq(gr_image_decode_mem(b, sizeof b, "huge.bmp", &im), GR_ERR_LIMIT);
    ck_assert_ptr_null(im);
    assert_one_line_containing("huge.bmp: image is 30000x30000; the limit is 65536 per side");
    bmp_header(b, 70000, 2);
    ck_assert_int_eq(gr_image_decode_mem(b, sizeof b, "wide.bmp", &im), GR_ERR_LIMIT);
    assert_one_line_containing("wide.bmp: image is 70000x2");
}
END_TEST

START_TEST(letterbox_to_absurd_network_size)
{
    uint8_t px[3] = {1, 2, 3};
    gr_image im = {1, 1, 3, px};
    float out[3];
    ck_assert_int_eq(gr_image_letterbox(&im, 70000, 1, out), GR_ERR_INVALID_ARGUMENT);
    assert_one_line_containing("bad network size 70000x1");
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *cfg = tcase_create("cfg");
    tcase_add_test(cfg, cfg_input_of_65536_squared);
    tcase_add_test(cfg, cfg_layer_output_too_large);
    tcase_add_test(cfg, cfg_dimension_above_limit);
    tcase_add_test(cfg, cfg_total_weights_above_limit);
    suite_add_tcase(s, cfg);
    TCase *engine = tcase_create("engine");
    tcase_set_timeout(engine, 120);
    tcase_add_test(engine, batch_4096_of_yolov2_tiny);
    tcase_add_test(engine, plan_of_batch_4096_of_yolov2_tiny);
    tcase_add_test(engine, batch_above_maximum);
    tcase_add_test(engine, cpu_run_larger_than_host_memory);
    suite_add_tcase(s, engine);
    TCase *files = tcase_create("files");
    tcase_add_test(files, npy_header_claiming_2_pow_40_elements);
    tcase_add_test(files, npy_large_claim_with_short_data_allocates_nothing);
    tcase_add_test(files, image_header_with_huge_dimensions);
    tcase_add_test(files, letterbox_to_absurd_network_size);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(limits_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
