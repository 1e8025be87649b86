/* The GPU engine on imported ONNX models (tests/onnx/, docs/onnx.md): the importer maps every node
 * onto existing ops, so the GPU engine runs them unchanged; this checks that it does, in every
 * precision, against the CPU engine of the same precision on the same input (the photo record of
 * the YOLOv8n-like export, the fixed tensor of the tiny ones), the same int8 ranges (the GPU
 * engine writes its calibration cache, the CPU engine reads it):
 *   fp32 <= 1e-5, fp16 <= 1e-3, int8 <= 1e-2 NRMSE (RMSE / range of the CPU output) on every
 *   output: the Darknet models' bounds. Same-precision comparisons: the GPU kernels against the
 *   planner's emulation of their arithmetic, not the precision's own error (bounded on the CPU
 *   by test_onnx's test_conditioning: docs/onnx.md, "Precision of the oracle networks").
 * qdq.onnx (explicit Q/DQ, make_qdq.py): both int8 engines take the file's scales and int8
 * weights (no calibration; the notice says so), so the GPU runs the CPU emulation's arithmetic.
 * The attention model and the YOLO11n-like network with C2PSA run the attention layer's kernel
 * (kernels/attention.cu; fp16 and int8 engines convert around it).
 * For the detection-head models (YOLOv8n-, YOLOv5n- and YOLO11n-like, docs/onnx.md "Detection
 * heads": the anchor-free heads' decode runs as the dfl_head layer, kernels/head.cu; YOLOv5's on
 * the host) also
 * the graph's output after the head (fp32 <= 1e-5) and the detections at thresh 0.25
 * (same count, classes, scores within 1e-4, boxes within 0.01 px or 2e-4 of the coordinate).
 * Every NRMSE is printed. Exits 77 with one line when no CUDA device is visible. */
#define _GNU_SOURCE /* mkdtemp */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tests/support/classify_nets.h"
#include "tests/support/gpu_test.h"
#include "tests/support/onnx_inputs.h"

#define DIR "tests/onnx/"
#define MAX_OUT 3

typedef struct onnx_case {
    const char *model;
    const char *input; /* a PNG record (pixels / 255) or an .npy tensor */
} onnx_case;

static const onnx_case cases[] = {
    {"yolov8n_like_op13.onnx", "input_dog.png"},
    {"tiny_ops.onnx", "tiny_input.npy"},
    {"tiny_classifier.onnx", "tiny_input.npy"},
    {"qdq.onnx", "tiny_input.npy"}, /* explicit Q/DQ: int8 with the file's scales on both */
    {"yolov8n_head_op13.onnx", "input_dog.png"}, /* the decoded head: the dfl_head layer */
    {"yolov5n_head_op13.onnx", "input_horses.png"},
    {"attention_op13.onnx", "tiny_input.npy"}, /* the attention layer (YOLO11's C2PSA) alone */
    {"yolo11n_psa_op13.onnx", "input_dog.png"}, /* ... inside the YOLO11n-like network */
};
/* The detection-head models: the graph's output (the host-side head on the engine's outputs)
 * and the detections at thresh 0.25, GPU fp32 against CPU fp32. */
static const onnx_case head_cases[] = {
    {"yolov8n_head_op17.onnx", "input_dog.png"},
    {"yolov5n_head_op17.onnx", "input_dog.png"},
    {"yolo11n_head_op17.onnx", "input_horses.png"},
    {"yolo11n_psa_op17.onnx", "input_dog.png"},
};
static const gr_precision precisions[] = {GR_PREC_FP32, GR_PREC_FP16, GR_PREC_INT8};
static const double bounds[] = {1e-5, 1e-3, 1e-2};
static char tmp_dir[] = "/tmp/graphrun_gpu_onnx_XXXXXX";

/* Build on `dev` in `prec` for `batch` images, run once on x, copy the outputs (n[k] floats each,
 * the whole batch's). */
static int run_batch(const gr_model *m, const char *cache, gr_device dev, gr_precision prec,
                     int batch, const float *x, float **out, size_t *n)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = prec;
    eo.calib_cache = cache;
    eo.batch = batch;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s %s: %s",
                  dev == GR_DEVICE_GPU ? "gpu" : "cpu", gr_precision_name(prec), gr_last_error());
    ck_assert(gr_engine_device(e) == dev);
    gr_model_info info;
    ck_assert(gr_model_get_info(m, &info) == GR_OK);
    if (prec == GR_PREC_INT8 && strstr(info.name, "qdq"))
        ck_assert_msg(strstr(gr_engine_notice(e), "scales from the file's QuantizeLinear") != NULL,
                      "%s", gr_engine_notice(e));
    ck_assert_msg(gr_engine_run_f32(e, x) == GR_OK, "%s", gr_last_error());
    int count = gr_test_copy_outputs(e, out, n, MAX_OUT);
    for (int k = 0; k < count && batch > 1; k++) { /* every image, not only the first */
        const float *o = NULL;
        ck_assert_int_eq(gr_engine_output(e, k, &o), GR_OK);
        n[k] *= (size_t)batch;
        free(out[k]);
        out[k] = malloc(n[k] * sizeof *out[k]);
        ck_assert_ptr_nonnull(out[k]);
        memcpy(out[k], o, n[k] * sizeof *out[k]);
    }
    gr_engine_destroy(e);
    return count;
}

/* The GPU and the CPU engine of precisions[p] for `batch` images on x (int8: the same ranges,
 * through the calibration cache `cache`): every output within the precision's bound, printed. */
static void expect_gpu_matches_cpu(const gr_model *m, const char *model, const char *cache,
                                   size_t p, int batch, const float *x)
{
    float *gpu[MAX_OUT] = {NULL}, *cpu[MAX_OUT] = {NULL};
    size_t n_gpu[MAX_OUT], n_cpu[MAX_OUT];
    char what[160];
    snprintf(what, sizeof what, "%s %s%s", model, gr_precision_name(precisions[p]),
             batch > 1 ? " (batch)" : "");
    int count = run_batch(m, cache, GR_DEVICE_GPU, precisions[p], batch, x, gpu, n_gpu);
    ck_assert_int_eq(run_batch(m, cache, GR_DEVICE_CPU, precisions[p], batch, x, cpu, n_cpu), count);
    for (int k = 0; k < count; k++) {
        ck_assert_uint_eq(n_gpu[k], n_cpu[k]);
        double nrmse = gr_test_nrmse(gpu[k], cpu[k], n_cpu[k]);
        printf("%s output %d: GPU vs CPU NRMSE %.2e (bound %.0e)\n", what, k, nrmse, bounds[p]);
        ck_assert_msg(nrmse <= bounds[p], "%s output %d: NRMSE %.3e > %.0e", what, k, nrmse,
                      bounds[p]);
        free(gpu[k]);
        free(cpu[k]);
    }
}

START_TEST(gpu_matches_cpu)
{
    const onnx_case *oc = &cases[_i];
    char path[256], cache[512];
    snprintf(path, sizeof path, DIR "%s", oc->model);
    gr_model *m = gr_test_load_model(NULL, path, 0);
    float *x = gr_test_onnx_input(oc->input);
    snprintf(cache, sizeof cache, "%s/%s.calib", tmp_dir, oc->model);
    for (size_t p = 0; p < sizeof precisions / sizeof precisions[0]; p++)
        expect_gpu_matches_cpu(m, oc->model, cache, p, 1, x);
    unlink(cache);
    free(x);
    gr_model_destroy(m);
}
END_TEST

/* The heads' outputs at batch 3 (the dog, the horses, the dog again) in fp16 and int8: each
 * output is Concat(box conv, class conv), whose convs write their channel slices of the f32
 * output themselves (the concat's dequantize fused: docs/planner.md), strided over the batch.
 * GPU against CPU as above, over every image. */
START_TEST(gpu_batch_matches_cpu)
{
    static const char *const models[] = {"yolov8n_head_op13.onnx", "yolo11n_head_op13.onnx"};
    char path[256], cache[512];
    snprintf(path, sizeof path, DIR "%s", models[_i]);
    gr_model *m = gr_test_load_model(NULL, path, 0);
    float *images[2] = {gr_test_onnx_input("input_dog.png"), gr_test_onnx_input("input_horses.png")};
    gr_model_info info;
    ck_assert(gr_model_get_info(m, &info) == GR_OK);
    const size_t image = (size_t)3 * info.width * info.height;
    float *x = malloc(3 * image * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int b = 0; b < 3; b++)
        memcpy(x + (size_t)b * image, images[b % 2], image * sizeof *x);
    snprintf(cache, sizeof cache, "%s/batch_%s.calib", tmp_dir, models[_i]);
    for (size_t p = 1; p < sizeof precisions / sizeof precisions[0]; p++) /* fp16, int8 */
        expect_gpu_matches_cpu(m, models[_i], cache, p, 3, x);
    unlink(cache);
    free(x);
    free(images[0]);
    free(images[1]);
    gr_model_destroy(m);
}
END_TEST

/* Build on `dev` in fp32, run on x; the graph's output (malloc'd) and detections. */
static gr_engine *run_head(const gr_model *m, gr_device dev, const float *x, float **graph,
                           size_t *n, gr_detection **dets, int *n_dets)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run_f32(e, x) == GR_OK, "%s", gr_last_error());
    const float *outs[MAX_OUT];
    int count = gr_engine_output_count(e);
    ck_assert(count >= 1 && count <= MAX_OUT);
    for (int k = 0; k < count; k++)
        ck_assert(gr_engine_output(e, k, &outs[k]) == GR_OK);
    int64_t dims[8];
    int n_dims = 0;
    ck_assert_msg(gr_engine_graph_output(e, outs, 0, graph, dims, &n_dims) == GR_OK, "%s",
                  gr_last_error());
    *n = 1;
    for (int d = 0; d < n_dims; d++)
        *n *= (size_t)dims[d];
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = 0.25f;
    ck_assert_msg(gr_engine_detect(e, 0, &dopt, dets, n_dets) == GR_OK, "%s", gr_last_error());
    return e;
}

START_TEST(gpu_head_detections)
{
    const onnx_case *oc = &head_cases[_i];
    char path[256];
    snprintf(path, sizeof path, DIR "%s", oc->model);
    gr_model *m = gr_test_load_model(NULL, path, 0);
    float *x = gr_test_onnx_input(oc->input);
    float *gpu = NULL, *cpu = NULL;
    size_t n_gpu = 0, n_cpu = 0;
    gr_detection *dg = NULL, *dc = NULL;
    int ng = 0, nc = 0;
    gr_engine *eg = run_head(m, GR_DEVICE_GPU, x, &gpu, &n_gpu, &dg, &ng);
    gr_engine *ec = run_head(m, GR_DEVICE_CPU, x, &cpu, &n_cpu, &dc, &nc);
    ck_assert_uint_eq(n_gpu, n_cpu);
    double nrmse = gr_test_nrmse(gpu, cpu, n_cpu);
    printf("%s graph output: GPU vs CPU fp32 NRMSE %.2e; %d and %d detections\n", oc->model,
           nrmse, ng, nc);
    ck_assert_msg(nrmse <= 1e-5, "%s: NRMSE %.3e", oc->model, nrmse);
    ck_assert_int_eq(ng, nc);
    ck_assert_int_gt(nc, 0);
    /* Box corners are in input pixels. The graph outputs agree to 1e-5 NRMSE (RMS over the
     * output's range, which is about the input's side); single values differ by up to ~20x the
     * RMS, and a YOLOv8 box side is a DFL expectation times the stride, where a logit's last-bit
     * difference in a K = 9 x C sum moves a stride-32 corner by ~1e-4 of the side (H100,
     * 2026-12-07: 0.0138 px at 128 px). So: 2e-4 of the input's larger side, at least 0.01 px. */
    gr_model_info info;
    ck_assert(gr_model_get_info(m, &info) == GR_OK);
    const float box_tol = fmaxf(0.01f, 2e-4f * (float)(info.width > info.height ? info.width : info.height));
    for (int i = 0; i < nc; i++) {
        float g[4] = {dg[i].left, dg[i].top, dg[i].right, dg[i].bottom};
        float c[4] = {dc[i].left, dc[i].top, dc[i].right, dc[i].bottom};
        ck_assert_int_eq(dg[i].class_id, dc[i].class_id);
        ck_assert_msg(fabsf(dg[i].prob - dc[i].prob) <= 1e-4f, "det %d: %g vs %g", i,
                      (double)dg[i].prob, (double)dc[i].prob);
        for (int k = 0; k < 4; k++)
            ck_assert_msg(fabsf(g[k] - c[k]) <= fmaxf(box_tol, 2e-4f * fabsf(c[k])),
                          "det %d: box %g vs %g (tolerance %g px)", i, (double)g[k], (double)c[k],
                          (double)box_tol);
    }
    gr_detections_free(dg);
    gr_detections_free(dc);
    free(gpu);
    free(cpu);
    free(x);
    gr_engine_destroy(eg);
    gr_engine_destroy(ec);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_onnx"))
        return 77;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = DIR "tiny_ops.onnx";
    gr_model *probe = NULL;
    if (gr_model_load(&mo, &probe) != GR_OK &&
        strstr(gr_last_error(), "built without ONNX import")) {
        printf("SKIP gpu_onnx: %s\n", gr_last_error());
        return 77;
    }
    gr_model_destroy(probe);
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    int failed = gr_test_run_loop("gpu_onnx", gpu_matches_cpu, 0,
                                  (int)(sizeof cases / sizeof cases[0]), 600);
    failed += gr_test_run_loop("gpu_onnx_heads", gpu_head_detections, 0,
                               (int)(sizeof head_cases / sizeof head_cases[0]), 300);
    failed += gr_test_run_loop("gpu_onnx_batch", gpu_batch_matches_cpu, 0, 2, 300);
    rmdir(tmp_dir);
    return failed ? 1 : 0;
}
