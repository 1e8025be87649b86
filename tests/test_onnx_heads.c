/* ONNX detection heads (docs/onnx.md, "Detection heads") against PyTorch
 * (tests/onnx/make_models.py): a YOLOv8n-like network with the anchor-free head (DFL decode,
 * anchor points, strides; output [1, 7, 336]) and a YOLOv5n-like one with the anchor head (grid
 * and anchor arithmetic, objectness; output [1, 1008, 8]) and a YOLO11n-like one without its
 * C2PSA block (C3k2 blocks, the depthwise class branch) and with it (its attention mapped onto
 * one attention layer), each exported at opsets 13 and 17, run
 * on the CPU engine on the two recorded inputs: the graph's output (gr_engine_graph_output: the
 * anchor-free heads' dfl_head layer, YOLOv5's host-side head tail after the engine's layers)
 * within 1e-5 NRMSE of PyTorch's, and the
 * detections at thresh 0.25, NMS 0.45 those of the script's numpy decode (class, score within
 * 1e-4, box within 0.01 px or 2e-4 of the coordinate: YOLOv5's (2 sigmoid)^2 x anchor turns the
 * float rounding of ~45 convs into up to 0.013 px at 98 px). Metadata names come through
 * (opset 17's v8 file); a saved and loaded engine gives the same graph output, bit for bit, and
 * detections; malformed metadata is a one-line notice; a tail op the tail does not run
 * and a tail output that is no detection head's are refused with one line naming them; corrupted
 * copies of tiny_head.onnx load or fail cleanly, and what loads runs. */
#define _GNU_SOURCE /* clock_gettime, mkstemps */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "models/net.h"
#include "models/onnx/onnx.h"
#include "models/onnx/tail.h"
#include "runtime/engine_internal.h"
#include "tests/support/classify_nets.h"
#include "tests/support/onnx_inputs.h"
#include "tools/npy.h"

#define DIR "tests/onnx/"
#define NRMSE_BOUND 1e-5

static const char *const models[] = {"yolov8n_head_op13", "yolov8n_head_op17",
                                     "yolov5n_head_op13", "yolov5n_head_op17",
                                     "yolo11n_head_op13", "yolo11n_head_op17",
                                     "yolo11n_psa_op13",  "yolo11n_psa_op17"};
static const char *const photos[] = {"dog", "horses"};

/* The recorded input of a photo (input_<photo>.png). */
static float *load_png(const char *photo)
{
    char name[64];
    snprintf(name, sizeof name, "input_%s.png", photo);
    return gr_test_onnx_input(name);
}

/* The model at `path` (a file, or a built-in model's name), as `--model` loads it. */
static gr_model *load_model(const char *path)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = path;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s: %s", path, gr_last_error());
    return m;
}

static gr_engine *cpu_engine(const char *path, gr_model **m)
{
    *m = load_model(path);
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(*m, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

/* The graph's output against PyTorch's (the .npy at ref_path); `label` names it. */
static void check_output(gr_engine *e, const char *ref_path, const char *label)
{
    const float *outs[8];
    for (int k = 0; k < gr_engine_output_count(e); k++)
        ck_assert_int_eq(gr_engine_output(e, k, &outs[k]), GR_OK);
    float *got = NULL;
    int64_t dims[8];
    int n_dims = 0;
    ck_assert_msg(gr_engine_graph_output(e, outs, 0, &got, dims, &n_dims) == GR_OK, "%s",
                  gr_last_error());
    float *ref = NULL;
    int rdims[8], rn = 0;
    ck_assert_msg(gr_npy_read(ref_path, &ref, rdims, &rn, 8) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(n_dims, rn);
    size_t n = 1;
    for (int d = 0; d < rn; d++) {
        ck_assert_int_eq(dims[d], rdims[d]);
        n *= (size_t)rdims[d];
    }
    double nrmse = gr_test_nrmse(got, ref, n);
    printf("%s graph output [1, %lld, %lld]: NRMSE %.2e\n", label, (long long)dims[1],
           (long long)dims[2], nrmse);
    ck_assert_msg(nrmse <= NRMSE_BOUND, "%s: NRMSE %.3e", label, nrmse);
    free(got);
    free(ref);
}

/* The detections against the script's decode (tests/onnx/<stem>_<photo>.txt). */
static void check_detections(gr_engine *e, const char *stem, const char *model, const char *photo)
{
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = 0.25f;
    dopt.nms = 0.45f;
    gr_detection *dets = NULL;
    int n = 0;
    ck_assert_msg(gr_engine_detect(e, 0, &dopt, &dets, &n) == GR_OK, "%s", gr_last_error());
    char path[256], line[256];
    snprintf(path, sizeof path, DIR "%s_%s.txt", stem, photo);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int i = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        int cls;
        float score, box[4];
        ck_assert_int_eq(sscanf(line, "%d %f %f %f %f %f", &cls, &score, &box[0], &box[1],
                                &box[2], &box[3]), 6);
        ck_assert_msg(i < n, "%s %s: %d detections, the reference has more", model, photo, n);
        const gr_detection *d = &dets[i++];
        float got[4] = {d->left, d->top, d->right, d->bottom};
        ck_assert_int_eq(d->class_id, cls);
        ck_assert_msg(fabsf(d->prob - score) <= 1e-4f, "%s %s det %d: score %g, want %g", model,
                      photo, i, (double)d->prob, (double)score);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(fabsf(got[k] - box[k]) <= fmaxf(0.01f, 2e-4f * fabsf(box[k])),
                          "%s %s det %d: box %g, want %g", model, photo, i, (double)got[k],
                          (double)box[k]);
    }
    fclose(f);
    printf("%s %s: %d detections as the reference's\n", model, photo, n);
    ck_assert_int_eq(i, n);
    ck_assert_int_gt(n, 0);
    gr_detections_free(dets);
}

START_TEST(test_heads_against_pytorch)
{
    if (!gr_test_have_onnx())
        return;
    char path[256], stem[64];
    snprintf(path, sizeof path, DIR "%s.onnx", models[_i]);
    snprintf(stem, sizeof stem, "%s", models[_i]);
    *strrchr(stem, '_') = '\0'; /* yolov8n_head, ..., yolo11n_psa */
    gr_model *m = NULL;
    gr_engine *e = cpu_engine(path, &m);
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(m, &info), GR_OK);
    ck_assert_int_eq(info.classes, 3);
    /* The layers the head reads: YOLOv5's three scales, its tail on the host; the anchor-free
     * heads' decode became a dfl_head layer (models/onnx/import.c), their one output. */
    ck_assert_int_eq(gr_engine_output_count(e), strstr(stem, "yolov5") ? 3 : 1);
    /* ... whose program left is one copy, which the decode reads in place of running it */
    ck_assert_int_eq(gr_tail_passthrough_input(m->net->tail), strstr(stem, "yolov5") ? -1 : 0);
    for (size_t p = 0; p < sizeof photos / sizeof photos[0]; p++) {
        float *x = load_png(photos[p]);
        ck_assert_msg(gr_engine_run_f32(e, x) == GR_OK, "%s", gr_last_error());
        free(x);
        char ref[256], label[128];
        snprintf(ref, sizeof ref, DIR "%s_%s.npy", stem, photos[p]);
        snprintf(label, sizeof label, "%s %s", models[_i], photos[p]);
        check_output(e, ref, label);
        check_detections(e, stem, models[_i], photos[p]);
    }
    /* The engine file keeps the host-side head (it was refused, "cannot be saved yet"): the
     * loaded engine's graph output is the built one's, bit for bit, and decodes the same
     * detections (tests/test_engine_file_onnx.c checks the file's other cases). */
    void *saved = NULL;
    size_t bytes = 0;
    ck_assert_msg(gr_engine_save_to_memory(e, &saved, &bytes) == GR_OK, "%s", gr_last_error());
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load_from_memory(saved, bytes, NULL, &loaded) == GR_OK, "%s",
                  gr_last_error());
    gr_free(saved);
    float *x = load_png("dog");
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    ck_assert_int_eq(gr_engine_run_f32(loaded, x), GR_OK);
    free(x);
    const float *oa[8], *ob[8];
    for (int k = 0; k < gr_engine_output_count(e); k++) {
        ck_assert_int_eq(gr_engine_output(e, k, &oa[k]), GR_OK);
        ck_assert_int_eq(gr_engine_output(loaded, k, &ob[k]), GR_OK);
    }
    float *ga = NULL, *gb = NULL;
    int64_t da[8], db[8];
    int na = 0, nb = 0;
    ck_assert_int_eq(gr_engine_graph_output(e, oa, 0, &ga, da, &na), GR_OK);
    ck_assert_int_eq(gr_engine_graph_output(loaded, ob, 0, &gb, db, &nb), GR_OK);
    ck_assert_int_eq(na, 3);
    ck_assert_int_eq(nb, 3);
    ck_assert_mem_eq(da, db, sizeof da[0] * 3);
    ck_assert_mem_eq(ga, gb, (size_t)(da[0] * da[1] * da[2]) * sizeof *ga);
    free(ga);
    free(gb);
    check_detections(loaded, stem, models[_i], "dog");
    gr_engine_destroy(loaded);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

/* TinyHead (the fuzz corpus's head model: the anchor-free head on 4-channel scales of a 32 x 32
 * input, [1, 6, 21]) on its fixed input. Also the host time of the head per image (the tail and
 * the decode, gr_engine_detect, best of 20) on the bigger models, printed for docs/onnx.md. */
START_TEST(test_tiny_head)
{
    if (!gr_test_have_onnx())
        return;
    gr_model *m = NULL;
    gr_engine *e = cpu_engine(DIR "tiny_head.onnx", &m);
    /* Its metadata names a class too many (a list, not a dict): kept, with one warning. */
    ck_assert_str_eq(gr_model_class_name(m, 1), "b");
    ck_assert_msg(strstr(gr_model_notice(m), "metadata 'names' lists 3 names for a head of 2 "
                                             "classes") != NULL, "%s", gr_model_notice(m));
    float *x = gr_test_onnx_input("tiny_head_input.npy");
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    check_output(e, DIR "tiny_head_out.npy", "tiny_head");
    free(x);
    gr_engine_destroy(e);
    gr_model_destroy(m);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i += 2) {
        char path[256];
        snprintf(path, sizeof path, DIR "%s.onnx", models[i]);
        e = cpu_engine(path, &m);
        x = load_png("dog");
        ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
        double best = 1e30;
        for (int r = 0; r < 20; r++) {
            gr_detect_options dopt;
            gr_detect_options_default(&dopt);
            gr_detection *dets = NULL;
            int n = 0;
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            ck_assert_int_eq(gr_engine_detect(e, 0, &dopt, &dets, &n), GR_OK);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            gr_detections_free(dets);
            double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                        (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3;
            best = us < best ? us : best;
        }
        printf("%s: head on the host (tail + decode + NMS) %.1f us per image\n", models[i], best);
        free(x);
        gr_engine_destroy(e);
        gr_model_destroy(m);
    }
}
END_TEST

/* The host-side head's other ONNX forms at opset 11 (make_models.py's tail_ops_model: Softmax
 * flattening at its axis, Slice with a negative start and step 2, Split / Squeeze / Unsqueeze by
 * attribute, Pow, broadcast Div and Mul, Sub with the constant first, Flatten) against numpy. */
START_TEST(test_tail_ops)
{
    if (!gr_test_have_onnx())
        return;
    gr_model *m = NULL;
    gr_engine *e = cpu_engine(DIR "tail_ops.onnx", &m);
    float *x = gr_test_onnx_input("tail_ops_input.npy");
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    check_output(e, DIR "tail_ops_out.npy", "tail_ops");
    free(x);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

/* ONNX models letterbox with Ultralytics' border 114 (GR_PREPROCESS_LETTERBOX_114), Darknet
 * models keep Darknet's 0.5; inside the border the two letterboxes are the same pixels. */
START_TEST(test_letterbox_114)
{
    if (!gr_test_have_onnx())
        return;
    gr_model *m = load_model(DIR "yolov8n_head_op17.onnx");
    ck_assert_int_eq(gr_model_preprocess(m), GR_PREPROCESS_LETTERBOX_114);
    gr_model_destroy(m);
    m = load_model("yolov2-tiny");
    ck_assert_int_eq(gr_model_preprocess(m), GR_PREPROCESS_LETTERBOX);
    gr_model_destroy(m);
    gr_preprocess p = GR_PREPROCESS_AUTO;
    ck_assert_int_eq(gr_preprocess_parse("letterbox114", &p), GR_OK);
    ck_assert_int_eq(p, GR_PREPROCESS_LETTERBOX_114);
    ck_assert_str_eq(gr_preprocess_name(p), "letterbox114");
    /* data/dog.jpg (768 x 576) into 32 x 32: 32 x 24 of picture at row 4, rows 0-3 and 28-31
     * border. */
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &im), GR_OK);
    float *a = malloc(3 * 32 * 32 * sizeof *a), *b = malloc(3 * 32 * 32 * sizeof *b);
    uint8_t *u = malloc(3 * 32 * 32), *v = malloc(3 * 32 * 32);
    ck_assert(a && b && u && v);
    ck_assert_int_eq(gr_image_preprocess(im, GR_PREPROCESS_LETTERBOX_114, 32, 32, a), GR_OK);
    ck_assert_int_eq(gr_image_preprocess(im, GR_PREPROCESS_LETTERBOX, 32, 32, b), GR_OK);
    ck_assert_int_eq(gr_image_preprocess_u8(im, GR_PREPROCESS_LETTERBOX_114, 32, 32, u), GR_OK);
    ck_assert_int_eq(gr_image_preprocess_u8(im, GR_PREPROCESS_LETTERBOX, 32, 32, v), GR_OK);
    for (int i = 0; i < 3 * 32 * 32; i++) {
        int row = (i % 1024) / 32;                /* planar float: channel, row, column */
        bool border = row < 4 || row >= 28;
        ck_assert(a[i] == (border ? 114.0f / 255.0f : b[i]));
        ck_assert(!border || b[i] == 0.5f);
        int row_u8 = i / 96;                      /* interleaved bytes: row, column, channel */
        bool border_u8 = row_u8 < 4 || row_u8 >= 28;
        ck_assert_int_eq(u[i], border_u8 ? 114 : v[i]);
        ck_assert(!border_u8 || v[i] == 128);
    }
    free(a);
    free(b);
    free(u);
    free(v);
    gr_image_destroy(im);
}
END_TEST

/* metadata_props: Ultralytics' names dict becomes the class names; without it, "class N". */
START_TEST(test_metadata_names)
{
    if (!gr_test_have_onnx())
        return;
    gr_model *m = load_model(DIR "yolov8n_head_op17.onnx");
    ck_assert_str_eq(gr_model_class_name(m, 0), "person");
    ck_assert_str_eq(gr_model_class_name(m, 2), "dog");
    ck_assert_str_eq(gr_model_notice(m), "");
    gr_model_destroy(m);
    m = load_model(DIR "yolov8n_head_op13.onnx");
    ck_assert_str_eq(gr_model_class_name(m, 2), "class 2");
    gr_model_destroy(m);
}
END_TEST

/* Malformed metadata ({0: 'a', 1: }, imgsz [64, x], stride 7 of a 4x4 input): the model loads,
 * the names are ignored, one line says so. */
START_TEST(test_bad_metadata)
{
    if (!gr_test_have_onnx())
        return;
    gr_model *m = load_model(DIR "bad_metadata.onnx");
    const char *notice = gr_model_notice(m);
    ck_assert_msg(strstr(notice, "metadata 'names'") != NULL, "%s", notice);
    ck_assert_ptr_null(strchr(notice, '\n'));
    ck_assert_str_eq(gr_model_class_name(m, 0), "class 0");
    gr_model_destroy(m);
}
END_TEST

/* An op the head tail does not run names the node; a tail whose output is no detection head's
 * names the output and its dims. */
START_TEST(test_head_refusals)
{
    if (!gr_test_have_onnx())
        return;
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_load_onnx(DIR "head_erf.onnx", &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(gr_last_error(), "head_erf.onnx: node 'erf' (Erf, opset 13): not "
                                          "supported after graphrun's layers") != NULL,
                  "%s", gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
    ck_assert_int_eq(gr_net_load_onnx(DIR "head_not_boxes.onnx", &net), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "head_not_boxes.onnx: graph output 'y' [1, 2, 256] is "
                                          "computed after graphrun's layers but is not a "
                                          "detection head's output") != NULL,
                  "%s", gr_last_error());
    /* A head's output after another graph output (it said "graph output 'y' is the input"). */
    ck_assert_int_eq(gr_net_load_onnx(DIR "head_two_outputs.onnx", &net), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "head_two_outputs.onnx: 2 graph outputs with a "
                                          "detection head") != NULL, "%s", gr_last_error());
    /* Only data-moving nodes start a head: a conv no layer runs keeps the layer mapping's
     * reason (it was "only a 1x1 convolution ... runs here" while every op the host runs could
     * start one). */
    ck_assert_int_eq(gr_net_load_onnx(DIR "conv_dilations.onnx", &net), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "node 'conv2' (Conv, opset 13): dilations 1, 2 differ")
                      != NULL, "%s", gr_last_error());
}
END_TEST

/* tiny_head.onnx with bytes flipped (every 61st) or cut short: refused cleanly, or loaded, built
 * and run with detections (the head's shapes are all checked at load). */
START_TEST(test_corrupt_heads)
{
    if (!gr_test_have_onnx())
        return;
    FILE *f = fopen(DIR "tiny_head.onnx", "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t *data = malloc(1 << 16);
    ck_assert_ptr_nonnull(data);
    size_t len = fread(data, 1, 1 << 16, f);
    fclose(f);
    ck_assert(len > 1000 && len < (1 << 16));
    float *x = calloc(3 * 32 * 32, sizeof *x);
    int loaded = 0;
    for (size_t at = 0; at < len + len / 8; at += 61) {
        size_t n = at < len ? len : at - len; /* flips, then cuts */
        if (at < len)
            data[at] ^= 0x5a;
        gr_net *net = NULL;
        gr_status st = gr_net_parse_onnx(data, n, "flip.onnx", &net);
        if (at < len)
            data[at] ^= 0x5a;
        ck_assert(st == GR_OK || net == NULL);
        gr_net_free(net);
        if (st != GR_OK || at >= len)
            continue;
        /* The same bytes through the public API, run. */
        data[at] ^= 0x5a;
        char path[] = "/tmp/graphrun_heads_XXXXXX.onnx";
        int fd = mkstemps(path, 5);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
        close(fd);
        data[at] ^= 0x5a;
        gr_model_options mo;
        gr_model_options_default(&mo);
        mo.builtin = path;
        gr_model *m = NULL;
        if (gr_model_load(&mo, &m) == GR_OK) {
            gr_engine_options eo;
            gr_engine_options_default(&eo);
            eo.device = GR_DEVICE_CPU;
            gr_engine *e = NULL;
            gr_model_info info;
            gr_model_get_info(m, &info);
            if (info.channels == 3 && info.width == 32 && info.height == 32 &&
                gr_engine_build(m, &eo, &e) == GR_OK && gr_engine_run_f32(e, x) == GR_OK) {
                gr_detect_options dopt;
                gr_detect_options_default(&dopt);
                gr_detection *dets = NULL;
                int nd = 0;
                if (gr_engine_detect(e, 0, &dopt, &dets, &nd) == GR_OK)
                    loaded++;
                gr_detections_free(dets);
            }
            gr_engine_destroy(e);
            gr_model_destroy(m);
        }
        unlink(path);
    }
    printf("corrupt tiny_head: %d flipped copies loaded, ran and decoded\n", loaded);
    free(x);
    free(data);
}
END_TEST

static Suite *heads_suite(void)
{
    Suite *s = suite_create("onnx_heads");
    TCase *tc = tcase_create("heads");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_heads_against_pytorch, 0,
                        (int)(sizeof models / sizeof models[0]));
    tcase_add_test(tc, test_tiny_head);
    tcase_add_test(tc, test_tail_ops);
    tcase_add_test(tc, test_letterbox_114);
    tcase_add_test(tc, test_metadata_names);
    tcase_add_test(tc, test_bad_metadata);
    tcase_add_test(tc, test_head_refusals);
    tcase_add_test(tc, test_corrupt_heads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_onnx()) {
        printf("test_onnx_heads: this build has no ONNX import\n");
        return 77;
    }
    SRunner *sr = srunner_create(heads_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
