/* Check suite for models/weights.c and models/synthetic.c: .weights size accounting, both header
 * versions, bit-exact round trips, precise errors for truncated / oversized / malformed files,
 * Darknet's parameter order inside a layer, and the synthetic generator's determinism and
 * statistics. Runs from the source root; temporary files come from mkstemp. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "models/net.h"

static gr_net *builtin(const char *name)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_net_builtin(name, &net) == GR_OK, "%s", gr_last_error());
    return net;
}

static gr_net *parse_text(const char *text)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse(text, strlen(text), "test.cfg", &net) == GR_OK, "%s",
                  gr_last_error());
    return net;
}

/* A small net with every parameter layout: conv with and without BN, connected with BN. */
static const char small_cfg[] = "[net]\nwidth=16\nheight=16\nchannels=3\n"
                                "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\npad=1\n"
                                "activation=leaky\n"
                                "[maxpool]\nsize=2\nstride=2\n"
                                "[convolutional]\nfilters=6\nsize=1\nactivation=linear\n"
                                "[connected]\noutput=5\nbatch_normalize=1\nactivation=leaky\n";

static char *temp_path(void)
{
    char *path = malloc(64);
    ck_assert_ptr_nonnull(path);
    snprintf(path, 64, "/tmp/gr_test_weights_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return path;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(data);
    ck_assert_int_eq(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return data;
}

static void write_all(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ---- sizes and layout ------------------------------------------------------------------- */

/* The official pjreddie files: yolov2-tiny-voc.weights (version 0.1, 16-byte header) is
 * 63,471,556 bytes and yolov3-tiny.weights (0.2, 20 bytes) 35,434,956 bytes. */
START_TEST(file_size_matches_official_weights)
{
    gr_net *v2 = builtin("yolov2-tiny-voc");
    ck_assert_uint_eq(gr_net_weights_file_size(v2, 16), 63471556u);
    ck_assert_uint_eq(gr_net_weights_file_size(v2, 20), 63471560u);
    gr_net_free(v2);
    gr_net *v3 = builtin("yolov3-tiny");
    ck_assert_uint_eq(gr_net_weights_file_size(v3, 20), 35434956u);
    gr_net_free(v3);
}
END_TEST

/* small_cfg by hand: conv0 4*(1+3) + 4*3*3*3 = 124; conv2 6 + 6*4 = 30; connected 5 + 5*(6*8*8)
 * + 3*5 = 1940. */
START_TEST(darknet_order_inside_layers)
{
    gr_net *net = parse_text(small_cfg);
    ck_assert_uint_eq(gr_net_weights_file_size(net, 20), 20u + 4u * (124u + 30u + 1940u));
    ck_assert_int_eq(gr_net_synthesize_weights(net, 3), GR_OK);
    const float *base = net->weight_block;
    const gr_weights *c0 = &net->layers[0].w, *c2 = &net->layers[2].w, *fc = &net->layers[3].w;
    /* conv: biases, scales, rolling_mean, rolling_variance, weights */
    ck_assert_ptr_eq(c0->biases, base);
    ck_assert_ptr_eq(c0->scales, base + 4);
    ck_assert_ptr_eq(c0->rolling_mean, base + 8);
    ck_assert_ptr_eq(c0->rolling_variance, base + 12);
    ck_assert_ptr_eq(c0->weights, base + 16);
    ck_assert_uint_eq(c0->n_weights, 108u);
    /* conv without BN: biases, weights */
    ck_assert_ptr_eq(c2->biases, base + 124);
    ck_assert_ptr_null(c2->scales);
    ck_assert_ptr_eq(c2->weights, base + 130);
    /* connected: biases, weights, then scales, rolling_mean, rolling_variance */
    ck_assert_ptr_eq(fc->biases, base + 154);
    ck_assert_ptr_eq(fc->weights, base + 159);
    ck_assert_uint_eq(fc->n_weights, 5u * 384u);
    ck_assert_ptr_eq(fc->scales, base + 159 + 1920);
    ck_assert_ptr_eq(fc->rolling_variance, base + 159 + 1920 + 10);
    ck_assert_uint_eq(net->n_weight_floats, 2094u);
    ck_assert_ptr_null(net->layers[1].w.biases); /* maxpool has none */
    gr_net_free(net);
}
END_TEST

/* ---- round trips and headers ------------------------------------------------------------- */

START_TEST(save_load_round_trip_is_bit_identical)
{
    gr_net *src = builtin("yolov3-tiny");
    ck_assert_int_eq(gr_net_synthesize_weights(src, 11), GR_OK);
    char *path = temp_path();
    ck_assert_int_eq(gr_net_save_weights(src, path), GR_OK);
    size_t len;
    uint8_t *data = read_all(path, &len);
    ck_assert_uint_eq(len, gr_net_weights_file_size(src, 20));
    /* Version 0.2.0 header: major 0, minor 2, revision 0, then a 64-bit seen. */
    const uint8_t header[12] = {0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_mem_eq(data, header, sizeof header);

    gr_net *dst = builtin("yolov3-tiny");
    ck_assert_int_eq(gr_net_load_weights(dst, path), GR_OK);
    ck_assert_int_eq(dst->synthetic, 0);
    ck_assert_uint_eq(dst->n_weight_floats, src->n_weight_floats);
    ck_assert_mem_eq(dst->weight_block, src->weight_block, src->n_weight_floats * sizeof(float));
    ck_assert_ptr_eq(dst->layers[0].w.biases, dst->weight_block);
    ck_assert_ptr_nonnull(dst->layers[22].w.weights);
    unlink(path);
    free(path);
    free(data);
    gr_net_free(src);
    gr_net_free(dst);
}
END_TEST

START_TEST(header_v01_with_32bit_seen_is_accepted)
{
    gr_net *src = parse_text(small_cfg);
    ck_assert_int_eq(gr_net_synthesize_weights(src, 5), GR_OK);
    size_t payload = src->n_weight_floats * sizeof(float);
    uint8_t *data = calloc(1, 16 + payload);
    ck_assert_ptr_nonnull(data);
    data[4] = 1;  /* major 0, minor 1, revision 0 */
    data[12] = 7; /* seen (32-bit) = 7 */
    memcpy(data + 16, src->weight_block, payload);
    gr_net *dst = parse_text(small_cfg);
    ck_assert_int_eq(gr_net_load_weights_mem(dst, data, 16 + payload, "v01.weights"), GR_OK);
    ck_assert_mem_eq(dst->weight_block, src->weight_block, payload);
    /* The same file with a 20-byte v0.2 header is accepted too (and 4 bytes longer). */
    uint8_t *data2 = calloc(1, 20 + payload);
    ck_assert_ptr_nonnull(data2);
    data2[4] = 2;
    memcpy(data2 + 20, src->weight_block, payload);
    ck_assert_int_eq(gr_net_load_weights_mem(dst, data2, 20 + payload, "v02.weights"), GR_OK);
    ck_assert_mem_eq(dst->weight_block, src->weight_block, payload);
    /* A 0.1 header in front of a v0.2-sized file is oversized by the 4 bytes. */
    data2[4] = 1;
    ck_assert_int_eq(gr_net_load_weights_mem(dst, data2, 20 + payload, "mixed.weights"),
                     GR_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "oversized"));
    free(data);
    free(data2);
    gr_net_free(src);
    gr_net_free(dst);
}
END_TEST

/* Status, file size and message checks for files derived from a correct one. */
static void expect_load_error(gr_net *net, const char *path, size_t len, const char *says1,
                              const char *says2)
{
    float *before = net->weight_block;
    gr_status st = gr_net_load_weights(net, path);
    ck_assert_msg(st == GR_ERR_PARSE, "%zu-byte file: %s (%s)", len, gr_status_str(st),
                  gr_last_error());
    const char *msg = gr_last_error();
    ck_assert_msg(strncmp(msg, path, strlen(path)) == 0, "'%s' does not name the file", msg);
    ck_assert_msg(strstr(msg, says1), "'%s' does not say '%s'", msg, says1);
    ck_assert_msg(!says2 || strstr(msg, says2), "'%s' does not say '%s'", msg, says2);
    ck_assert_ptr_eq(net->weight_block, before); /* a failed load changes nothing */
}

START_TEST(truncated_and_oversized_files_name_both_sizes)
{
    gr_net *net = parse_text(small_cfg);
    size_t expected = gr_net_weights_file_size(net, 20);
    size_t n_floats = (expected - 20) / 4;
    uint8_t *data = calloc(1, expected + 1);
    ck_assert_ptr_nonnull(data);
    data[4] = 2;
    char *path = temp_path();
    char want[160], found[256];
    snprintf(want, sizeof want, "expected %zu bytes (header 20 + %zu floats)", expected, n_floats);

    write_all(path, data, expected - 1);
    snprintf(found, sizeof found, "truncated: %s, found %zu", want, expected - 1);
    expect_load_error(net, path, expected - 1, found, NULL);

    write_all(path, data, expected + 1);
    snprintf(found, sizeof found, "found %zu", expected + 1);
    expect_load_error(net, path, expected + 1, "oversized", found);

    write_all(path, data, 1000);
    expect_load_error(net, path, 1000, want, "found 1000");

    write_all(path, data, expected);
    ck_assert_int_eq(gr_net_load_weights(net, path), GR_OK);
    unlink(path);
    free(path);
    free(data);
    gr_net_free(net);
}
END_TEST

START_TEST(header_only_empty_and_bad_headers)
{
    gr_net *net = parse_text(small_cfg);
    char *path = temp_path();
    uint8_t header[20] = {0, 0, 0, 0, 2};

    write_all(path, header, 20); /* header, no floats */
    expect_load_error(net, path, 20, "truncated", "found 20");

    write_all(path, header, 0);
    expect_load_error(net, path, 0, "truncated header", "offset 0");

    write_all(path, header, 7);
    expect_load_error(net, path, 7, "truncated header", "7 bytes");

    write_all(path, header, 14); /* version 0.2 needs 20 header bytes */
    expect_load_error(net, path, 14, "truncated header", "20-byte header");

    uint8_t garbage[20] = {0x47, 0x49, 0x46, 0x38, 0x39, 0x61}; /* "GIF89a": major 0x38464947 */
    write_all(path, garbage, 20);
    expect_load_error(net, path, 20, "bad header at offset 0", "version");

    ck_assert_int_eq(gr_net_load_weights(net, "/no/such/dir/x.weights"), GR_ERR_IO);
    ck_assert_int_eq(gr_net_load_weights_mem(net, NULL, 0, "null.weights"), GR_ERR_PARSE);
    unlink(path);
    free(path);
    gr_net_free(net);
}
END_TEST

START_TEST(save_without_weights_is_state_error)
{
    gr_net *net = parse_text(small_cfg);
    ck_assert_int_eq(gr_net_save_weights(net, "/tmp/never-written.weights"), GR_ERR_STATE);
    ck_assert_int_eq(gr_net_save_weights(NULL, "x"), GR_ERR_INVALID_ARGUMENT);
    gr_net_free(net);
}
END_TEST

/* A weights path that is a FIFO: the load is refused by kind at once (it blocked until something
 * wrote to it, then could not seek), the save refuses to replace it (it wrote into it, blocking
 * without a reader); the FIFO stays. */
START_TEST(fifo_is_neither_read_nor_replaced)
{
    gr_net *net = parse_text(small_cfg);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 3), GR_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gr_weights_fifo_%d", (int)getpid());
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(gr_net_load_weights(net, path), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a FIFO)"), "%s", gr_last_error());
    ck_assert_int_eq(gr_net_save_weights(net, path), GR_ERR_IO);
    ck_assert_msg(strstr(gr_last_error(), "not a regular file (a FIFO)"), "%s", gr_last_error());
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    unlink(path);
    gr_net_free(net);
}
END_TEST

/* ---- synthetic weights ---------------------------------------------------------------------- */

START_TEST(synthetic_is_deterministic_per_seed)
{
    gr_net *a = builtin("yolov3-tiny"), *c = builtin("yolov3-tiny");
    ck_assert_int_eq(gr_net_synthesize_weights(a, 42), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(c, 43), GR_OK);
    ck_assert_int_eq(a->synthetic, 1);
    size_t same = 0;
    for (size_t i = 0; i < a->n_weight_floats; i++)
        same += a->weight_block[i] == c->weight_block[i];
    /* Independent draws coincide only by accident (and a few calibrated constants). */
    ck_assert_msg(same < a->n_weight_floats / 1000, "%zu of %zu equal across seeds", same,
                  a->n_weight_floats);
    /* The same seed again gives the same bytes; re-synthesizing replaces the block (ASan checks
     * the old one is freed). */
    ck_assert_int_eq(gr_net_synthesize_weights(c, 42), GR_OK);
    ck_assert_mem_eq(a->weight_block, c->weight_block, a->n_weight_floats * sizeof(float));
    gr_net_free(a);
    gr_net_free(c);
}
END_TEST

/* Layer i's weights come from its own stream: identical layer shapes at the same index of two
 * different nets get identical weights. */
START_TEST(layer_weights_do_not_depend_on_other_layers)
{
    gr_net *v2 = builtin("yolov2-tiny"), *v3 = builtin("yolov3-tiny");
    ck_assert_int_eq(gr_net_synthesize_weights(v2, 9), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(v3, 9), GR_OK);
    for (int i = 0; i <= 12; i += 2) {
        const gr_weights *a = &v2->layers[i].w, *b = &v3->layers[i].w;
        ck_assert_uint_eq(a->n_weights, b->n_weights);
        ck_assert_mem_eq(a->weights, b->weights, a->n_weights * sizeof(float));
    }
    gr_net_free(v2);
    gr_net_free(v3);
}
END_TEST

START_TEST(synthetic_values_are_finite_and_variances_positive)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    /* Count first: a Check assertion per float would cost a pipe write each in fork mode. */
    size_t not_finite = 0;
    for (size_t i = 0; i < net->n_weight_floats; i++)
        not_finite += !isfinite(net->weight_block[i]);
    ck_assert_uint_eq(not_finite, 0);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_weights *w = &net->layers[i].w;
        if (!w->rolling_variance)
            continue;
        for (int c = 0; c < w->n; c++)
            ck_assert_msg(w->rolling_variance[c] > 0.0f, "layer %d channel %d", i, c);
    }
    /* He initialisation: conv 0 weights have standard deviation sqrt(2 / 27) = 0.272; with 432
     * samples the estimate is within 15% with overwhelming probability (its relative standard
     * error is about 1/sqrt(2*432) = 3.4%). */
    const gr_weights *w0 = &net->layers[0].w;
    double sum_sq = 0.0;
    for (size_t k = 0; k < w0->n_weights; k++)
        sum_sq += (double)w0->weights[k] * (double)w0->weights[k];
    double std0 = sqrt(sum_sq / (double)w0->n_weights);
    ck_assert_msg(fabs(std0 / sqrt(2.0 / 27.0) - 1.0) < 0.15, "conv 0 weight std %g", std0);
    gr_net_free(net);
}
END_TEST

/* Forward the synthetic yolov2-tiny-voc with the CPU references on a smooth test image (not the
 * calibration image) at 160x160 and check a trained net's look: every batch-normalized layer's
 * output has a standard deviation within [0.2, 3] (neither vanishing nor exploding through 13
 * layers and 6 maxpools), and the head's objectness logits are mostly negative with some
 * positive ones, its box offsets spread about 1 (0.3 to 3). */
START_TEST(synthetic_activations_look_trained)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    const int side = 160;
    gr_shape input_shape = {3, side, side};
    float *input = malloc(gr_shape_elems(input_shape) * sizeof(float));
    ck_assert_ptr_nonnull(input);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++)
                input[((size_t)c * side + y) * side + x] =
                    0.5f + 0.25f * sinf(0.07f * (float)x + 0.4f * (float)c) *
                               cosf(0.05f * (float)y - 0.3f * (float)c);
    float *outputs[16] = {0};
    gr_shape shapes[16];
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        gr_shape in_shape = l->inputs[0] < 0 ? input_shape : shapes[l->inputs[0]];
        ck_assert_int_eq(gr_op_infer(&l->p, &in_shape, 1, &shapes[i]), GR_OK);
        outputs[i] = malloc(gr_shape_elems(shapes[i]) * sizeof(float));
        ck_assert_ptr_nonnull(outputs[i]);
        const float *in = l->inputs[0] < 0 ? input : outputs[l->inputs[0]];
        gr_op_ref(&l->p, &l->w, &in, &in_shape, 1, outputs[i], shapes[i], 1);
        if (!l->p.batch_normalize)
            continue;
        size_t n = gr_shape_elems(shapes[i]);
        double sum = 0.0, sum_sq = 0.0;
        for (size_t k = 0; k < n; k++) {
            sum += (double)outputs[i][k];
            sum_sq += (double)outputs[i][k] * (double)outputs[i][k];
        }
        double std = sqrt(sum_sq / (double)n - (sum / (double)n) * (sum / (double)n));
        ck_assert_msg(std > 0.2 && std < 3.0, "layer %d output std %g", i, std);
    }
    /* Head: channel a*25 + e; e = 0..3 box, 4 objectness. */
    const float *head = outputs[14];
    size_t plane = (size_t)shapes[14].h * (size_t)shapes[14].w;
    int positive = 0, total = 0;
    double box_sq = 0.0;
    for (int a = 0; a < 5; a++) {
        for (size_t k = 0; k < plane; k++) {
            positive += head[(size_t)(a * 25 + 4) * plane + k] > 0.0f;
            total++;
            for (int e = 0; e < 4; e++)
                box_sq += (double)head[(size_t)(a * 25 + e) * plane + k] *
                          (double)head[(size_t)(a * 25 + e) * plane + k];
        }
    }
    ck_assert_msg(positive < total / 4, "%d of %d objectness logits positive", positive, total);
    double box_rms = sqrt(box_sq / (4.0 * total));
    ck_assert_msg(box_rms > 0.3 && box_rms < 3.0, "box offsets rms %g", box_rms);
    for (int i = 0; i < net->n_layers; i++)
        free(outputs[i]);
    free(input);
    gr_net_free(net);
}
END_TEST

/* A deep net's synthetic heads look trained too: yolov7-tiny (55 batch-normalized convs, logistic
 * head convs) on data/dog.jpg. Its heads stay off the logistic's rails - under 1% of the values
 * exactly 0 or 1 (measured none; the one-image calibration at 160 put 2.4% there) - and the
 * CLI's defaults (threshold 0.5, NMS 0.45) leave a few boxes: measured 2, at most 50 here (the
 * one-image calibration gave 59,384). */
START_TEST(synthetic_deep_heads_do_not_saturate)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "yolov7-tiny";
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load("data/dog.jpg", &im) == GR_OK, "%s", gr_last_error());
    float *input = malloc((size_t)3 * 416 * 416 * sizeof *input);
    ck_assert_ptr_nonnull(input);
    ck_assert(gr_image_letterbox(im, 416, 416, input) == GR_OK);
    ck_assert_msg(gr_engine_run_f32(e, input) == GR_OK, "%s", gr_last_error());
    size_t rails = 0, total = 0;
    for (int k = 0; k < gr_engine_output_count(e); k++) {
        gr_tensor_desc d;
        const float *head = NULL;
        ck_assert(gr_engine_output_desc(e, k, &d) == GR_OK);
        ck_assert(gr_engine_output(e, k, &head) == GR_OK);
        size_t n = (size_t)d.n * d.c * d.h * d.w;
        for (size_t i = 0; i < n; i++)
            rails += head[i] == 0.0f || head[i] == 1.0f;
        total += n;
    }
    printf("yolov7-tiny on data/dog.jpg: %zu of %zu head values exactly 0 or 1\n", rails, total);
    ck_assert_msg(rails * 100 < total, "%zu of %zu head values exactly 0 or 1", rails, total);
    gr_detect_options opt;
    gr_detect_options_default(&opt);
    gr_detection *dets = NULL;
    int n_dets = 0;
    ck_assert_msg(gr_engine_detect(e, 0, &opt, &dets, &n_dets) == GR_OK, "%s", gr_last_error());
    printf("yolov7-tiny on data/dog.jpg: %d detections\n", n_dets);
    ck_assert_msg(n_dets <= 50, "%d detections on data/dog.jpg", n_dets);
    gr_detections_free(dets);
    free(input);
    gr_image_destroy(im);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

START_TEST(synthesize_rejects_null)
{
    ck_assert_int_eq(gr_net_synthesize_weights(NULL, 1), GR_ERR_INVALID_ARGUMENT);
}
END_TEST

/* One NaN in layer 2 (a conv) and one Inf in layer 3 (connected) of small_cfg's weights: the
 * load says so in one notice line and the model info, or refuses the file when asked. */
START_TEST(nonfinite_weights_are_reported_or_refused)
{
    char *cfg = temp_path(), *weights = temp_path();
    write_all(cfg, (const uint8_t *)small_cfg, strlen(small_cfg));
    gr_net *net = parse_text(small_cfg);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 3), GR_OK);
    ck_assert_ptr_nonnull(net->layers[2].w.weights);
    ck_assert_ptr_nonnull(net->layers[3].w.weights);
    net->layers[2].w.weights[5] = NAN;
    net->layers[3].w.weights[0] = INFINITY;
    ck_assert_int_eq(gr_net_save_weights(net, weights), GR_OK);
    gr_model_options opt;
    gr_model_options_default(&opt);
    opt.cfg_path = cfg;
    opt.weights_path = weights;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&opt, &m) == GR_OK, "%s", gr_last_error());
    const char *notice = gr_model_notice(m);
    ck_assert_msg(strstr(notice, "2 non-finite weights (NaN/Inf), the first in layer 2 (conv)"),
                  "notice '%s'", notice);
    ck_assert_ptr_nonnull(strstr(notice, weights));
    ck_assert_ptr_null(strchr(notice, '\n'));
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(m, &info), GR_OK);
    ck_assert_uint_eq(info.nonfinite_weights, 2);
    gr_model_destroy(m);
    /* Refused on request, naming the file, the count and the layer. */
    opt.nonfinite_weights_is_error = 1;
    m = NULL;
    ck_assert_int_eq(gr_model_load(&opt, &m), GR_ERR_NUMERIC);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(gr_last_error(), "2 non-finite weights") &&
                      strstr(gr_last_error(), weights),
                  "%s", gr_last_error());
    /* Sound weights: no notice, count 0, accepted in strict mode too. */
    net->layers[2].w.weights[5] = 0.5f;
    net->layers[3].w.weights[0] = 0.5f;
    ck_assert_int_eq(gr_net_save_weights(net, weights), GR_OK);
    ck_assert_int_eq(gr_model_load(&opt, &m), GR_OK);
    ck_assert_str_eq(gr_model_notice(m), "");
    ck_assert_int_eq(gr_model_get_info(m, &info), GR_OK);
    ck_assert_uint_eq(info.nonfinite_weights, 0);
    gr_model_destroy(m);
    ck_assert_str_eq(gr_model_notice(NULL), "");
    gr_net_free(net);
    unlink(cfg);
    unlink(weights);
    free(cfg);
    free(weights);
}
END_TEST

static Suite *weights_suite(void)
{
    Suite *s = suite_create("weights");
    TCase *files = tcase_create("files");
    tcase_add_test(files, file_size_matches_official_weights);
    tcase_add_test(files, darknet_order_inside_layers);
    tcase_add_test(files, save_load_round_trip_is_bit_identical);
    tcase_add_test(files, header_v01_with_32bit_seen_is_accepted);
    tcase_add_test(files, truncated_and_oversized_files_name_both_sizes);
    tcase_add_test(files, header_only_empty_and_bad_headers);
    tcase_add_test(files, save_without_weights_is_state_error);
    tcase_add_test(files, fifo_is_neither_read_nor_replaced);
    tcase_add_test(files, nonfinite_weights_are_reported_or_refused);
    tcase_set_timeout(files, 60);
    suite_add_tcase(s, files);

    TCase *synthetic = tcase_create("synthetic");
    tcase_add_test(synthetic, synthetic_is_deterministic_per_seed);
    tcase_add_test(synthetic, layer_weights_do_not_depend_on_other_layers);
    tcase_add_test(synthetic, synthetic_values_are_finite_and_variances_positive);
    tcase_add_test(synthetic, synthetic_activations_look_trained);
    tcase_add_test(synthetic, synthetic_deep_heads_do_not_saturate);
    tcase_add_test(synthetic, synthesize_rejects_null);
    /* Each synthesis takes about a second; under AddressSanitizer about ten times that. */
    tcase_set_timeout(synthetic, 300);
    suite_add_tcase(s, synthetic);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(weights_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
