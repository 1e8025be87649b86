/* ONNX import (models/onnx/, docs/onnx.md) against its oracle, PyTorch (tests/onnx/make_models.py):
 * a YOLOv8n-like network exported at opsets 13 and 17 loads through the public API
 * (gr_model_load, as `--model x.onnx` and `--cfg x.onnx` do), runs on the CPU engine on the two
 * recorded inputs (the photos letterboxed to 128 x 128 by the script, stored as PNG, fed as
 * pixel / 255 in NCHW: the float the script fed PyTorch), and every output is within 1e-5 NRMSE
 * (RMSE / range of PyTorch's output) of PyTorch's. Measured: 3.2e-8 to 1.9e-7 (float rounding
 * over ~45 convs; PyTorch ran its batch norms unfolded, the export folds them). A dropped or
 * mis-mapped layer gives O(0.1). The oracle networks' own fp16 / int8 loss on the CPU engine is
 * bounded too (test_conditioning), so that the GPU test's bounds stay meetable.
 * Refusals: an op outside the slice names the node, its op type and the opset (GR_ERR_UNSUPPORTED);
 * an ONNX file without ONNX import in the build says so; corrupt protobufs fail cleanly.
 * Explicit Q/DQ (make_qdq.py): int8 with the file's scales against PyTorch's fake quantization. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "models/onnx/onnx.h"
#include "tests/support/classify_nets.h"
#include "tests/support/onnx_inputs.h"
#include "tools/npy.h"

#define DIR "tests/onnx/"
#define NRMSE_BOUND 1e-5

static const char *const models[] = {DIR "yolov8n_like_op13.onnx", DIR "yolov8n_like_op17.onnx"};
static const char *const photos[] = {"dog", "horses"};

/* The model at `path` (named as a cfg or as the model, as --cfg and --model do) on a CPU engine. */
static gr_engine *cpu_engine(const char *path, bool as_cfg, gr_model **m)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    if (as_cfg)
        mo.cfg_path = path;
    else
        mo.builtin = path;
    *m = NULL;
    ck_assert_msg(gr_model_load(&mo, m) == GR_OK, "%s: %s", path, gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(*m, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

static void check_model(const char *path, bool as_cfg)
{
    gr_model *m = NULL;
    gr_engine *e = cpu_engine(path, as_cfg, &m);
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(m, &info), GR_OK);
    ck_assert_int_eq(info.width, 128);
    ck_assert_int_eq(info.height, 128);
    ck_assert_int_eq(info.n_outputs, 3);
    ck_assert_int_eq(info.classes, 0);
    ck_assert_int_eq(info.synthetic_weights, 0);
    ck_assert_int_eq(gr_engine_output_count(e), 3);
    for (size_t p = 0; p < sizeof photos / sizeof photos[0]; p++) {
        char name[64];
        snprintf(name, sizeof name, "input_%s.png", photos[p]);
        float *x = gr_test_onnx_input(name); /* 3 x 128 x 128, the model's input */
        ck_assert_int_eq(info.width, 128);
        ck_assert_int_eq(info.height, 128);
        ck_assert_msg(gr_engine_run_f32(e, x) == GR_OK, "%s", gr_last_error());
        free(x);
        for (int k = 0; k < 3; k++) {
            char ref_path[256];
            snprintf(ref_path, sizeof ref_path, DIR "out_%s_%d.npy", photos[p], k);
            float *ref = NULL;
            int dims[8], ndim = 0;
            ck_assert_msg(gr_npy_read(ref_path, &ref, dims, &ndim, 8) == GR_OK, "%s",
                          gr_last_error());
            gr_tensor_desc d;
            ck_assert_int_eq(gr_engine_output_desc(e, k, &d), GR_OK);
            ck_assert_int_eq(ndim, 4);
            ck_assert_int_eq(d.c, dims[1]);
            ck_assert_int_eq(d.h, dims[2]);
            ck_assert_int_eq(d.w, dims[3]);
            const float *got = NULL;
            ck_assert_int_eq(gr_engine_output(e, k, &got), GR_OK);
            size_t n = (size_t)d.c * d.h * d.w;
            double nrmse = gr_test_nrmse(got, ref, n);
            printf("%s %s output %d (%dx%dx%d): NRMSE %.2e\n", path, photos[p], k, d.c, d.h, d.w,
                   nrmse);
            ck_assert_msg(nrmse <= NRMSE_BOUND, "%s on %s output %d: NRMSE %.3e > %.0e", path,
                          photos[p], k, nrmse, NRMSE_BOUND);
            free(ref);
        }
    }
    gr_engine_destroy(e);
    gr_model_destroy(m);
}

START_TEST(test_pytorch_oracle)
{
    if (!gr_test_have_onnx())
        return;
    check_model(models[_i], _i == 1); /* opset 17 named as a cfg, --cfg x.onnx's path */
}
END_TEST

/* The oracle networks' conditioning (docs/onnx.md, "Precision of the oracle networks"): on the
 * CPU engine, fp16 and int8 (max calibration on the bundled photos, what test_gpu_onnx's engines
 * use) against fp32, every output of the networks test_gpu_onnx runs, on both photos. The GPU
 * test holds the GPU to the CPU's emulation of the same precision within 1e-3 (fp16) and 1e-2
 * (int8); two fp16 implementations that round the same values in another summation order differ
 * by about what either loses against fp32 (the device, 2026-12-07, on the unconditioned seeding:
 * GPU-vs-CPU fp16 0.4 to 0.7 times the CPU's fp16-vs-fp32), so the GPU bound is meetable only
 * while the network passes rounding on at a small gain. FP16_BOUND 4e-4 keeps that difference
 * under 3e-4, a 3x margin (measured: at most 2.3e-4; the unconditioned seeding lost 9.4e-4 to
 * 8.1e-3). INT8_BOUND 5e-2: one int8 rounding of a max-calibrated tensor is ~2.3e-3 NRMSE (step /
 * sqrt(12) over the range), so at most ~20x amplification over the network (measured: at most
 * 0.031; the unconditioned seeding lost 0.07 to 1.37, noise). A re-seed of make_models.py that
 * makes the GPU bounds unmeetable fails here first, on any machine. */
#define FP16_BOUND 4e-4
#define INT8_BOUND 5e-2
static const char *const conditioned[] = {"yolov8n_like_op13.onnx", "yolov8n_head_op13.onnx",
                                          "yolov5n_head_op13.onnx", "yolo11n_head_op13.onnx",
                                          "yolo11n_psa_op13.onnx"};

/* The engine's outputs (at most 3) in `prec` on x, copied into out[k] (malloc'd, n[k] floats). */
static int run_precision(const gr_model *m, gr_precision prec, const float *x, float **out,
                         size_t *n)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = prec;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run_f32(e, x) == GR_OK, "%s", gr_last_error());
    int count = gr_test_copy_outputs(e, out, n, 3);
    gr_engine_destroy(e);
    return count;
}

START_TEST(test_conditioning)
{
    if (!gr_test_have_onnx())
        return;
    char path[256];
    snprintf(path, sizeof path, DIR "%s", conditioned[_i]);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = path;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s: %s", path, gr_last_error());
    for (size_t p = 0; p < sizeof photos / sizeof photos[0]; p++) {
        char name[64];
        snprintf(name, sizeof name, "input_%s.png", photos[p]);
        float *x = gr_test_onnx_input(name);
        float *ref[3] = {NULL}, *got[3] = {NULL};
        size_t n_ref[3], n_got[3];
        int count = run_precision(m, GR_PREC_FP32, x, ref, n_ref);
        const gr_precision precs[] = {GR_PREC_FP16, GR_PREC_INT8};
        const double bounds[] = {FP16_BOUND, INT8_BOUND};
        for (int q = 0; q < 2; q++) {
            ck_assert_int_eq(run_precision(m, precs[q], x, got, n_got), count);
            for (int k = 0; k < count; k++) {
                ck_assert_uint_eq(n_got[k], n_ref[k]);
                double nrmse = gr_test_nrmse(got[k], ref[k], n_ref[k]);
                printf("%s %s %s output %d: NRMSE against fp32 %.2e (bound %.0e)\n", path,
                       photos[p], gr_precision_name(precs[q]), k, nrmse, bounds[q]);
                ck_assert_msg(nrmse <= bounds[q], "%s on %s, %s output %d: NRMSE %.3e > %.0e "
                              "against fp32: the oracle network amplifies rounding (see "
                              "make_models.py's condition_weights)", path, photos[p],
                              gr_precision_name(precs[q]), k, nrmse, bounds[q]);
                free(got[k]);
            }
        }
        for (int k = 0; k < count; k++)
            free(ref[k]);
        free(x);
    }
    gr_model_destroy(m);
}
END_TEST

/* The other mappings on a fixed input (tiny_input.npy): make_models.py's TinyOps (an unfused
 * BatchNormalization, LeakyRelu(0.1), a grouped strided conv + Relu, Split with sizes, a dilated
 * conv + Sigmoid, MaxPool 2x2, Resize, Add + Relu; measured 3e-8) and TinyClassifier (Relu +
 * Clip(0, 6) as relu6, Tanh, Elu, GlobalAveragePool, Flatten, Gemm + Sigmoid, Gemm + Softmax: a
 * C x 1 x 1 output for ONNX's [1, C]; measured 1e-7) and ConstArith (constants folded into the
 * conv / Gemm before them: a per-channel Mul and Add, a scalar Div, a Sub after a Gemm; measured
 * 1e-8). */
static const char *const tiny[][2] = {
    {"tiny_ops.onnx", "tiny_out.npy"},
    {"tiny_classifier.onnx", "tiny_classifier_out.npy"},
    {"const_arith.onnx", "const_arith_out.npy"},
    /* YOLO11's PSA attention alone (make_models.py's AttentionNet: the subgraph mapped onto one
     * attention layer, docs/onnx.md): Split by attribute (opset 11) and by input (13), and q
     * scaled before its MatMul */
    {"attention_op11.onnx", "attention_op11_out.npy"},
    {"attention_op13.onnx", "attention_op13_out.npy"},
    {"attention_prescale.onnx", "attention_prescale_out.npy"}};

START_TEST(test_tiny_models)
{
    if (!gr_test_have_onnx())
        return;
    char path[256];
    snprintf(path, sizeof path, DIR "%s", tiny[_i][0]);
    gr_model *m = NULL;
    gr_engine *e = cpu_engine(path, false, &m);
    float *x = NULL, *ref = NULL;
    int dims[8], ndim = 0;
    ck_assert_int_eq(gr_npy_read(DIR "tiny_input.npy", &x, dims, &ndim, 8), GR_OK);
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    snprintf(path, sizeof path, DIR "%s", tiny[_i][1]);
    ck_assert_int_eq(gr_npy_read(path, &ref, dims, &ndim, 8), GR_OK);
    size_t want = 1;
    for (int k = 0; k < ndim; k++)
        want *= (size_t)dims[k];
    gr_tensor_desc d;
    const float *got = NULL;
    ck_assert_int_eq(gr_engine_output_count(e), 1);
    ck_assert_int_eq(gr_engine_output_desc(e, 0, &d), GR_OK);
    ck_assert_int_eq(dims[1], d.c);
    ck_assert_uint_eq(want, (size_t)d.c * d.h * d.w);
    ck_assert_int_eq(gr_engine_output(e, 0, &got), GR_OK);
    double nrmse = gr_test_nrmse(got, ref, want);
    printf("%s: NRMSE %.2e\n", tiny[_i][0], nrmse);
    ck_assert_msg(nrmse <= NRMSE_BOUND, "%s: NRMSE %.3e", tiny[_i][0], nrmse);
    free(x);
    free(ref);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

START_TEST(test_refuses_unsupported_op)
{
    if (!gr_test_have_onnx())
        return;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = DIR "erf.onnx";
    gr_model *m = NULL;
    ck_assert_int_eq(gr_model_load(&mo, &m), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(m);
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, "erf.onnx: node '/Erf' (Erf, opset 13): not supported") != NULL,
                  "%s", msg);
    ck_assert_ptr_null(strchr(msg, '\n'));
}
END_TEST

/* Near misses of the attention pattern (make_models.py's AttentionNet variants): the softmax over
 * the queries' axis, one scale per head instead of a scalar, q transposed [0, 2, 1, 3]. Each is
 * refused in one line naming its node and the pattern's start, not mapped onto the attention
 * layer. And the attention at 132 x 132 (66 x 66 = 4356 tokens, past GR_ATTENTION_MAX_TOKENS):
 * GR_ERR_LIMIT at load, naming the node, not a failure at build or run time. */
static const struct {
    const char *file;
    gr_status status;
    const char *message;
} attention_bad[] = {
    {"attention_bad_axis.onnx", GR_ERR_UNSUPPORTED,
     "node '/attn/Softmax' (Softmax, opset 13): on axis -2 (the pattern's softmax is over the "
     "last axis, the keys) (in the attention pattern from '/attn/Reshape'"},
    {"attention_bad_scale.onnx", GR_ERR_UNSUPPORTED,
     "node '/attn/Mul' (Mul, opset 13): by a constant of several values"},
    {"attention_bad_perm.onnx", GR_ERR_UNSUPPORTED,
     "node '/attn/Transpose' (Transpose, opset 13): of q with another perm than [0, 1, 3, 2]"},
    {"attention_big.onnx", GR_ERR_LIMIT,
     "node '/attn/Reshape_1' (Reshape, opset 13): attention: 66x66 = 4356 tokens (graphrun's "
     "attention takes at most 4096"}};

START_TEST(test_refuses_attention_near_miss)
{
    if (!gr_test_have_onnx())
        return;
    char path[256];
    snprintf(path, sizeof path, DIR "%s", attention_bad[_i].file);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = path;
    gr_model *m = NULL;
    ck_assert_int_eq(gr_model_load(&mo, &m), attention_bad[_i].status);
    ck_assert_ptr_null(m);
    const char *msg = gr_last_error();
    ck_assert_msg(strstr(msg, attention_bad[_i].message) != NULL, "%s", msg);
    ck_assert_ptr_null(strchr(msg, '\n'));
}
END_TEST

/* A Relu after an Identity of a conv output that is also a graph output cannot be folded into
 * the conv: the other output would see it. Refused (before: folded, the second output wrong). */
START_TEST(test_refuses_fold_into_aliased)
{
    if (!gr_test_have_onnx())
        return;
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_load_onnx(DIR "alias.onnx", &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(gr_last_error(), "node 'relu' (Relu, opset 13)") != NULL, "%s",
                  gr_last_error());
}
END_TEST

static size_t varint_size(size_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

static uint8_t *put_varint(uint8_t *p, size_t v)
{
    for (; v >= 0x80; v >>= 7)
        *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* GraphProto -> NodeProto -> AttributeProto.g -> GraphProto ... 100000 deep (1.2 MB): protobuf-c
 * recurses once per level and overflowed the stack (a crash); now refused up front. */
START_TEST(test_refuses_deep_nesting)
{
    if (!gr_test_have_onnx())
        return;
    enum { DEPTH = 100000 };
    /* len[i]: bytes of the GraphProto at level i (innermost empty); the fields are
     * GraphProto.node = 1, NodeProto.attribute = 5, AttributeProto.g = 6, ModelProto.graph = 7. */
    size_t *len = malloc((DEPTH + 1) * sizeof *len);
    ck_assert_ptr_nonnull(len);
    len[DEPTH] = 0;
    for (int i = DEPTH - 1; i >= 0; i--) {
        size_t attr = 1 + varint_size(len[i + 1]) + len[i + 1];
        size_t node = 1 + varint_size(attr) + attr;
        len[i] = 1 + varint_size(node) + node;
    }
    size_t total = 2 + 1 + varint_size(len[0]) + len[0];
    uint8_t *data = malloc(total), *p = data;
    ck_assert_ptr_nonnull(data);
    *p++ = 0x08;
    *p++ = 0x07;
    *p++ = 7 << 3 | 2;
    p = put_varint(p, len[0]);
    for (int i = 0; i < DEPTH; i++) {
        size_t attr = 1 + varint_size(len[i + 1]) + len[i + 1];
        size_t node = 1 + varint_size(attr) + attr;
        *p++ = 1 << 3 | 2;
        p = put_varint(p, node);
        *p++ = 5 << 3 | 2;
        p = put_varint(p, attr);
        *p++ = 6 << 3 | 2;
        p = put_varint(p, len[i + 1]);
    }
    ck_assert_uint_eq((size_t)(p - data), total);
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse_onnx(data, total, "deep.onnx", &net), GR_ERR_LIMIT);
    ck_assert_ptr_null(net);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "nested more than"));
    free(data);
    free(len);
}
END_TEST

/* An initializer whose dims declare 2^30 floats but which holds one: refused as a parse error
 * before anything is allocated for the dims (the importer used to calloc 4 GB first: ASan aborts
 * on that, a small machine fails it; fuzz_onnx found it). Hand-made bytes: ModelProto {ir_version
 * 7, opset_import {version 13}, graph {initializer {dims [2^30], data_type FLOAT, name "w",
 * raw_data 4 bytes}}}. */
START_TEST(test_refuses_dims_beyond_data)
{
    if (!gr_test_have_onnx())
        return;
    uint8_t tensor[32], *t = tensor;
    *t++ = 1 << 3 | 0; /* dims */
    t = put_varint(t, (size_t)1 << 30);
    *t++ = 2 << 3 | 0; /* data_type FLOAT */
    *t++ = 1;
    *t++ = 8 << 3 | 2; /* name */
    *t++ = 1;
    *t++ = 'w';
    *t++ = 9 << 3 | 2; /* raw_data */
    *t++ = 4;
    for (int i = 0; i < 4; i++)
        *t++ = (uint8_t)(0x10 + i);
    size_t tlen = (size_t)(t - tensor);
    uint8_t data[64], *p = data;
    *p++ = 1 << 3 | 0; /* ir_version */
    *p++ = 7;
    *p++ = 8 << 3 | 2; /* opset_import */
    *p++ = 2;
    *p++ = 2 << 3 | 0;
    *p++ = 13;
    *p++ = 7 << 3 | 2; /* graph */
    p = put_varint(p, 1 + varint_size(tlen) + tlen);
    *p++ = 5 << 3 | 2; /* initializer */
    p = put_varint(p, tlen);
    memcpy(p, tensor, tlen);
    p += tlen;
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse_onnx(data, (size_t)(p - data), "dims.onnx", &net), GR_ERR_PARSE);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(gr_last_error(), "holds 1 values where its dims say 1073741824"), "%s",
                  gr_last_error());
}
END_TEST

START_TEST(test_refuses_weights_file)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.cfg_path = models[0];
    mo.weights_path = "data/shapes.weights";
    gr_model *m = NULL;
    ck_assert_int_eq(gr_model_load(&mo, &m), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "holds its weights"));
}
END_TEST

START_TEST(test_detection)
{
    static const uint8_t model_head[] = {0x08, 0x07, 0x12};
    static const uint8_t cfg_head[] = {'[', 'n', 'e', 't'};
    ck_assert(gr_onnx_is_model("a/b.ONNX", NULL, 0));
    ck_assert(gr_onnx_is_model("model", model_head, sizeof model_head));
    ck_assert(!gr_onnx_is_model("x.cfg", cfg_head, sizeof cfg_head));
    ck_assert(!gr_onnx_is_model("yolo", NULL, 0)); /* a built-in name */
    ck_assert(gr_onnx_is_model_file(models[0]));
    ck_assert(!gr_onnx_is_model_file("models/yolov2-tiny.cfg"));
}
END_TEST

/* Every prefix of a real model and a few flipped bytes: an error or a net, never a crash (ASan
 * builds check the rest). */
START_TEST(test_corrupt_files)
{
    if (!gr_test_have_onnx())
        return;
    char *data = NULL;
    size_t len = 0;
    FILE *f = fopen(DIR "erf.onnx", "rb");
    ck_assert_ptr_nonnull(f);
    data = malloc(4096);
    len = fread(data, 1, 4096, f);
    fclose(f);
    ck_assert(len > 100 && len < 4096);
    for (size_t cut = 0; cut < len; cut += 7) {
        gr_net *net = NULL;
        gr_status st = gr_net_parse_onnx((const uint8_t *)data, cut, "cut.onnx", &net);
        ck_assert_int_ne(st, GR_OK);
        ck_assert_ptr_null(net);
    }
    for (size_t at = 0; at < len; at += 13) {
        data[at] ^= 0x5a;
        gr_net *net = NULL;
        gr_status st = gr_net_parse_onnx((const uint8_t *)data, len, "flip.onnx", &net);
        ck_assert(st == GR_OK || net == NULL);
        gr_net_free(net);
        data[at] ^= 0x5a;
    }
    free(data);
}
END_TEST

/* Explicit Q/DQ (docs/onnx.md "Explicit Q/DQ"; tests/onnx/make_qdq.py): PyTorch's fake-quantized
 * network (int8 weights per channel and per tensor, -128 among them; int8 activations, the input
 * uint8 with zero point 128) exported as QuantizeLinear/DequantizeLinear pairs. The CPU int8
 * engine takes the file's scales without calibrating (the calibration images named do not
 * exist: calibrating would fail) and says so. Its output before the file's last Q/DQ is the
 * accumulator's (graphrun's fused dequantize keeps it); with that Q/DQ applied here, every value
 * must be within one step of PyTorch's fake-quant output and at least 99% equal (measured: all
 * 384 equal: the same round-half-even, the same y * (1 / s) requantization; a last-bit
 * difference in a float sum may move a value across a rounding edge, one step). Raw, the NRMSE
 * is half a step of rounding at most: <= 1e-2 (measured 1.4e-3). The fp32 engine runs the float
 * network with the file's int8 weights dequantized, the activations' Q/DQ pairs as identities:
 * against PyTorch with the activations unquantized, <= 1e-5 (measured 7.9e-8). */
START_TEST(test_qdq)
{
    if (!gr_test_have_onnx())
        return;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = DIR "qdq.onnx";
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    float *x = NULL, *ref = NULL;
    int dims[8], ndim = 0;
    ck_assert_int_eq(gr_npy_read(DIR "tiny_input.npy", &x, dims, &ndim, 8), GR_OK);
    const char *const absent[] = {DIR "no-such-calibration-image.jpg", NULL};
    for (int prec = 0; prec < 2; prec++) {
        gr_engine_options eo;
        gr_engine_options_default(&eo);
        eo.device = GR_DEVICE_CPU;
        eo.precision = prec ? GR_PREC_INT8 : GR_PREC_FP32;
        eo.calib_images = absent;
        gr_engine *e = NULL;
        ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
        if (prec)
            ck_assert_msg(strstr(gr_engine_notice(e), "scales from the file's QuantizeLinear/"
                                 "DequantizeLinear (7 tensors, 5 convs with the file's int8 "
                                 "weights), no calibration") != NULL &&
                              strstr(gr_engine_notice(e), "joins") == NULL, "%s",
                          gr_engine_notice(e));
        /* The engine file keeps the file's int8 weight scales (an int8 engine was refused,
         * "cannot be saved yet"): the loaded engine's output is the built one's, bit for bit. */
        void *saved = NULL;
        size_t saved_bytes = 0;
        ck_assert_msg(gr_engine_save_to_memory(e, &saved, &saved_bytes) == GR_OK, "%s",
                      gr_last_error());
        gr_engine *loaded = NULL;
        ck_assert_msg(gr_engine_load_from_memory(saved, saved_bytes, NULL, &loaded) == GR_OK,
                      "%s", gr_last_error());
        gr_free(saved);
        ck_assert_int_eq(gr_engine_run_f32(loaded, x), GR_OK);
        ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
        const float *from_file = NULL, *built = NULL;
        ck_assert_int_eq(gr_engine_output(loaded, 0, &from_file), GR_OK);
        ck_assert_int_eq(gr_engine_output(e, 0, &built), GR_OK);
        ck_assert_mem_eq(from_file, built, 6 * 8 * 8 * sizeof *built);
        gr_engine_destroy(loaded);
        ck_assert_int_eq(gr_npy_read(prec ? DIR "qdq_out.npy" : DIR "qdq_float_out.npy", &ref,
                                     dims, &ndim, 8), GR_OK);
        const size_t n = 6 * 8 * 8;
        gr_tensor_desc d;
        const float *got = NULL;
        ck_assert_int_eq(gr_engine_output_desc(e, 0, &d), GR_OK);
        ck_assert_uint_eq((size_t)d.c * d.h * d.w, n);
        ck_assert_int_eq(gr_engine_output(e, 0, &got), GR_OK);
        double nrmse = gr_test_nrmse(got, ref, n);
        printf("qdq.onnx %s: NRMSE %.2e\n", prec ? "int8" : "fp32", nrmse);
        ck_assert_msg(nrmse <= (prec ? 1e-2 : NRMSE_BOUND), "NRMSE %.3e", nrmse);
        if (prec) {
            const float s = 0.0012378941755741835f; /* the output's Q/DQ (qdq_scales.txt) */
            size_t equal = 0;
            for (size_t i = 0; i < n; i++) {
                float r = rintf(got[i] * (1.0f / s));
                float q = (r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r) * s;
                ck_assert_msg(fabsf(q - ref[i]) <= 1.5f * s, "value %zu: %g (%g after the Q/DQ) "
                              "vs PyTorch's %g", i, (double)got[i], (double)q, (double)ref[i]);
                equal += q == ref[i];
            }
            printf("qdq.onnx int8: %zu of %zu values equal PyTorch's after the output Q/DQ\n",
                   equal, n);
            ck_assert_msg(equal * 100 >= n * 99, "%zu of %zu equal", equal, n);
        }
        free(ref);
        ref = NULL;
        gr_engine_destroy(e);
    }
    free(x);
    gr_model_destroy(m);
}
END_TEST

/* A conv with int8 weights (Q/DQ) followed by an unfolded BatchNormalization (qdq_bn.onnx, a QAT
 * export that kept it): the importer folds the batch norm into the weights, and its factor into
 * the weight scales, so the file's integers stay (the notice counts both convs). Int8 against
 * PyTorch's fake quantization, after the output's Q/DQ: measured all 1024 values equal. */
START_TEST(test_qdq_batchnorm)
{
    if (!gr_test_have_onnx())
        return;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = DIR "qdq_bn.onnx";
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = GR_PREC_INT8;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(strstr(gr_engine_notice(e), "(3 tensors, 2 convs with the file's int8 "
                         "weights)") != NULL, "%s", gr_engine_notice(e));
    float *x = NULL, *ref = NULL;
    int dims[8], ndim = 0;
    ck_assert_int_eq(gr_npy_read(DIR "tiny_input.npy", &x, dims, &ndim, 8), GR_OK);
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    ck_assert_int_eq(gr_npy_read(DIR "qdq_bn_out.npy", &ref, dims, &ndim, 8), GR_OK);
    const float *got = NULL;
    ck_assert_int_eq(gr_engine_output(e, 0, &got), GR_OK);
    const float s = 0.004203432239592075f; /* the output's Q/DQ (qdq_scales.txt) */
    size_t equal = 0, n = 4 * 16 * 16;
    for (size_t i = 0; i < n; i++) {
        float r = rintf(got[i] * (1.0f / s));
        float q = (r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r) * s;
        ck_assert_msg(fabsf(q - ref[i]) <= 1.5f * s, "value %zu: %g vs %g", i, (double)q,
                      (double)ref[i]);
        equal += q == ref[i];
    }
    printf("qdq_bn.onnx int8: %zu of %zu values equal PyTorch's after the output Q/DQ\n", equal,
           n);
    ck_assert_msg(equal * 100 >= n * 99, "%zu of %zu equal", equal, n);
    free(x);
    free(ref);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

/* Q/DQ the importer refuses: one line naming the node (make_qdq.py's edits of qdq.onnx), and an
 * int8 build of a Q/DQ model whose layer has no scale (fp32 builds). */
static const char *const qdq_bad[][2] = {
    {"qdq_bad_zp.onnx", "node '/QuantizeLinear_2' (QuantizeLinear, opset 13): zero point 3 of "
                        "int8 on a computed tensor: graphrun's int8 is symmetric"},
    {"qdq_bad_scale0.onnx", "node '/QuantizeLinear_2' (QuantizeLinear, opset 13): scale 0 "
                            "(element 0): a scale must be finite and > 0"},
    {"qdq_bad_scalenan.onnx", "node '/QuantizeLinear_2' (QuantizeLinear, opset 13): scale nan"},
    {"qdq_bad_dtype.onnx", "node '/QuantizeLinear_2' (QuantizeLinear, opset 13): int32 codes"},
    {"qdq_bad_noq.onnx", "node '/Conv_1' (Conv, opset 13): input 0 ('/QuantizeLinear_2_output_0') "
                         "is a QuantizeLinear's int8 output"},
    {"qdq_bad_float.onnx", "node '/DequantizeLinear_2' (DequantizeLinear, opset 13): input 0 "
                           "('/Relu_output_0') is a float tensor, not a QuantizeLinear's output"},
};

START_TEST(test_qdq_refusals)
{
    if (!gr_test_have_onnx())
        return;
    char path[256];
    snprintf(path, sizeof path, DIR "%s", qdq_bad[_i][0]);
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_load_onnx(path, &net), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(net);
    ck_assert_msg(strstr(gr_last_error(), qdq_bad[_i][1]) != NULL, "%s", gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
}
END_TEST

START_TEST(test_qdq_partial)
{
    if (!gr_test_have_onnx())
        return;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = DIR "qdq_partial.onnx";
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = GR_PREC_INT8;
    gr_engine *e = NULL;
    ck_assert_int_eq(gr_engine_build(m, &eo, &e), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), "int8 with the file's Q/DQ scales: layer 3 (conv, node "
                         "#29 of qdq_partial.onnx) has no QuantizeLinear/DequantizeLinear on its "
                         "output") != NULL, "%s", gr_last_error());
    eo.precision = GR_PREC_FP32;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    gr_engine_destroy(e);
    gr_model_destroy(m);
    /* A concat whose inputs the file quantizes differently runs with one scale, and says so. */
    mo.builtin = DIR "qdq_mixed.onnx";
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    eo.precision = GR_PREC_INT8;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(strstr(gr_engine_notice(e), "int8: layer 7 (route, node #52) joins tensors the "
                         "file quantizes with different scales") != NULL, "%s",
                  gr_engine_notice(e));
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

static Suite *onnx_suite(void)
{
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("import");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_pytorch_oracle, 0, 2);
    tcase_add_loop_test(tc, test_conditioning, 0,
                        (int)(sizeof conditioned / sizeof conditioned[0]));
    tcase_add_loop_test(tc, test_tiny_models, 0, (int)(sizeof tiny / sizeof tiny[0]));
    tcase_add_test(tc, test_refuses_unsupported_op);
    tcase_add_loop_test(tc, test_refuses_attention_near_miss, 0,
                        (int)(sizeof attention_bad / sizeof attention_bad[0]));
    tcase_add_test(tc, test_refuses_fold_into_aliased);
    tcase_add_test(tc, test_refuses_deep_nesting);
    tcase_add_test(tc, test_refuses_dims_beyond_data);
    tcase_add_test(tc, test_refuses_weights_file);
    tcase_add_test(tc, test_detection);
    tcase_add_test(tc, test_corrupt_files);
    tcase_add_test(tc, test_qdq);
    tcase_add_loop_test(tc, test_qdq_refusals, 0, (int)(sizeof qdq_bad / sizeof qdq_bad[0]));
    tcase_add_test(tc, test_qdq_partial);
    tcase_add_test(tc, test_qdq_batchnorm);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_onnx())
        printf("test_onnx: this build has no ONNX import: only the detection and refusal checks "
               "run\n");
    SRunner *sr = srunner_create(onnx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
