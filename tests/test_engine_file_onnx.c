/* Saved engines of ONNX models (docs/onnx.md, "Saved engines"; runtime/engine_file.c, format 5):
 * the network's outputs, the detection head run on the host (models/onnx/tail.h) and the file's
 * int8 weight scales (ONNX Q/DQ) travel in the engine file. For the host-head models (YOLOv8n's
 * anchor-free head at opset 17, YOLOv5n's anchor head, YOLO11n with its PSA attention), the
 * 3-output YOLOv8n-like network and qdq.onnx in int8 with the file's int8 weights, a CPU engine
 * built from the .onnx, saved to a file and loaded gives bit-identical outputs, graph output
 * (gr_engine_graph_output) and detections on the recorded input, and so does that loaded engine
 * saved and loaded again. A damaged head record - every byte of it flipped in turn, targeted
 * fields (the output's value, an argument, an input's layer, a slice's start) set to wrong
 * values, the record cut short - with the checksum made again is refused with one line naming
 * the head, or (a constant's floats changed) loads and runs; every truncation of the file is
 * refused; so are an output past the layers and a weight scale that is not finite and > 0. Run under the ASan build to see that nothing leaks or reads past. */
#define _GNU_SOURCE /* mkstemp, memmem */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"
#include "models/net.h"
#include "models/onnx/tail.h"
#include "runtime/engine_file.h"
#include "tests/support/onnx_inputs.h"

#define DIR "tests/onnx/"

static const struct {
    const char *model, *input;
    gr_precision prec;
} cases[] = {{"yolov8n_head_op17.onnx", "input_dog.png", GR_PREC_FP32},
             {"yolov5n_head_op13.onnx", "input_horses.png", GR_PREC_FP32},
             {"yolo11n_psa_op13.onnx", "input_dog.png", GR_PREC_FP32},
             {"yolov8n_like_op13.onnx", "input_dog.png", GR_PREC_FP32},
             {"qdq.onnx", "tiny_input.npy", GR_PREC_INT8},
             {"qdq.onnx", "tiny_input.npy", GR_PREC_FP16}};

static gr_engine *build_cpu(const char *model, gr_precision prec)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", model);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = path;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s: %s", path, gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = prec;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s: %s", path, gr_last_error());
    gr_model_destroy(m); /* the engine keeps its own copy of the network */
    return e;
}

static void save_bytes(const gr_engine *e, uint8_t **data, size_t *bytes)
{
    void *p = NULL;
    ck_assert_msg(gr_engine_save_to_memory(e, &p, bytes) == GR_OK, "%s", gr_last_error());
    *data = p;
}

/* Through a file (mapped, its weights borrowed), as graphrun --engine loads it. */
static gr_engine *through_file(const gr_engine *e)
{
    char path[] = "/tmp/gr_engine_onnx_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(gr_engine_save(e, path) == GR_OK, "%s", gr_last_error());
    gr_engine *loaded = NULL;
    gr_status st = gr_engine_load(path, NULL, &loaded);
    unlink(path);
    ck_assert_msg(st == GR_OK, "%s", gr_last_error());
    return loaded;
}

static size_t output_elems(const gr_engine *e, int k)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, k, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

/* Both engines run on x: outputs, the graph output and the detections bit for bit. */
static void expect_same(gr_engine *a, gr_engine *b, const float *x, const char *what)
{
    ck_assert_msg(gr_engine_run_f32(a, x) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(gr_engine_run_f32(b, x) == GR_OK, "%s", gr_last_error());
    const int n_out = gr_engine_output_count(a);
    const int ca = gr_test_expect_same_results(a, b, what);
    gr_model_info ia, ib;
    ck_assert_int_eq(gr_model_get_info(gr_engine_model(a), &ia), GR_OK);
    ck_assert_int_eq(gr_model_get_info(gr_engine_model(b), &ib), GR_OK);
    ck_assert_int_eq(ia.classes, ib.classes);
    ck_assert_int_eq(ia.n_outputs, ib.n_outputs);
    for (int c = 0; c < ia.classes; c++)
        ck_assert_str_eq(gr_model_class_name(gr_engine_model(a), c),
                         gr_model_class_name(gr_engine_model(b), c));
    ck_assert_int_eq(gr_model_preprocess(gr_engine_model(a)),
                     gr_model_preprocess(gr_engine_model(b)));
    printf("%s: %d outputs, %d detections identical\n", what, n_out, ca);
}

START_TEST(round_trip)
{
    if (!gr_test_have_onnx())
        return;
    char what[128];
    snprintf(what, sizeof what, "%s %s", cases[_i].model, gr_precision_name(cases[_i].prec));
    gr_engine *built = build_cpu(cases[_i].model, cases[_i].prec);
    gr_engine *loaded = through_file(built);
    float *x = gr_test_onnx_input(cases[_i].input);
    expect_same(built, loaded, x, what);
    if (cases[_i].prec == GR_PREC_INT8) /* the file's scales, not a calibration's */
        ck_assert_msg(strstr(gr_engine_notice(loaded), "at build: int8: scales from the file's "
                             "QuantizeLinear/DequantizeLinear") != NULL, "%s",
                      gr_engine_notice(loaded));
    /* The loaded engine saved and loaded again (from memory): the same engine. */
    uint8_t *data;
    size_t bytes;
    save_bytes(loaded, &data, &bytes);
    gr_engine *again = NULL;
    ck_assert_msg(gr_engine_load_from_memory(data, bytes, NULL, &again) == GR_OK, "%s",
                  gr_last_error());
    expect_same(built, again, x, what);
    gr_free(data);
    free(x);
    gr_engine_destroy(again);
    gr_engine_destroy(loaded);
    gr_engine_destroy(built);
}
END_TEST

/* The int8 engine keeps the file's int8 weights: without the stored weight scales (the planner's
 * own max|w| / 127 per filter instead) its outputs would differ - checked by loading a file
 * whose scales were all doubled (re-signed): the outputs change, so the loaded engine uses them. */
START_TEST(int8_weight_scales_are_used)
{
    if (!gr_test_have_onnx())
        return;
    gr_engine *built = build_cpu("qdq.onnx", GR_PREC_INT8);
    const gr_net_qdq *q = gr_engine_model(built)->net->qdq;
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(q->n_wscaled, 5);
    uint8_t *data;
    size_t bytes;
    save_bytes(built, &data, &bytes);
    int changed = 0;
    for (int i = 0; i < q->n_layers; i++) {
        if (!q->wscale[i])
            continue;
        size_t n = (size_t)q->n_wscale[i] * sizeof(float);
        uint8_t *at = memmem(data, bytes, q->wscale[i], n);
        ck_assert_ptr_nonnull(at);
        for (int c = 0; c < q->n_wscale[i]; c++) {
            float s;
            memcpy(&s, at + (size_t)c * sizeof s, sizeof s);
            s *= 2.0f;
            memcpy(at + (size_t)c * sizeof s, &s, sizeof s);
        }
        changed++;
    }
    ck_assert_int_eq(changed, 5);
    uint64_t h = gr_hash64(data, bytes - 8);
    for (int k = 0; k < 8; k++)
        data[bytes - 8 + (size_t)k] = (uint8_t)(h >> (8 * k));
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load_from_memory(data, bytes, NULL, &loaded) == GR_OK, "%s",
                  gr_last_error());
    float *x = gr_test_onnx_input("tiny_input.npy");
    ck_assert_int_eq(gr_engine_run_f32(built, x), GR_OK);
    ck_assert_int_eq(gr_engine_run_f32(loaded, x), GR_OK);
    const float *a, *b;
    ck_assert_int_eq(gr_engine_output(built, 0, &a), GR_OK);
    ck_assert_int_eq(gr_engine_output(loaded, 0, &b), GR_OK);
    ck_assert_msg(memcmp(a, b, output_elems(built, 0) * sizeof *a) != 0,
                  "doubled weight scales changed nothing: the load did not use them");
    free(x);
    gr_free(data);
    gr_engine_destroy(loaded);
    gr_engine_destroy(built);
}
END_TEST

/* Content length and checksum made to agree with the bytes, so the content checks are reached. */
static void resign(uint8_t *data, size_t bytes)
{
    uint64_t content = bytes - GR_ENGINE_FILE_HEADER - 8;
    for (int k = 0; k < 8; k++)
        data[GR_ENGINE_FILE_OFF_CONTENT_BYTES + k] = (uint8_t)(content >> (8 * k));
    uint64_t h = gr_hash64(data, bytes - 8);
    for (int k = 0; k < 8; k++)
        data[bytes - 8 + (size_t)k] = (uint8_t)(h >> (8 * k));
}

static void expect_refused(const uint8_t *data, size_t bytes, const char *text)
{
    gr_engine *e = (gr_engine *)data; /* must come back NULL */
    ck_assert_int_eq(gr_engine_load_from_memory(data, bytes, NULL, &e), GR_ERR_PARSE);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(gr_last_error(), text) != NULL, "'%s' not in: %s", text,
                  gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
}

/* The outputs and the Q/DQ scales are checked too (a re-signed file): an output past the layers,
 * a negative or NaN weight scale. */
START_TEST(outputs_and_scales_checked)
{
    if (!gr_test_have_onnx())
        return;
    gr_engine *e = build_cpu("yolov8n_like_op13.onnx", GR_PREC_FP32);
    const gr_net *net = gr_engine_model(e)->net;
    ck_assert_int_eq(net->n_outputs, 3);
    int32_t outputs[4] = {3, net->output_layers[0], net->output_layers[1], net->output_layers[2]};
    uint8_t *data;
    size_t bytes;
    save_bytes(e, &data, &bytes);
    uint8_t *at = memmem(data, bytes, outputs, sizeof outputs);
    ck_assert_ptr_nonnull(at);
    int32_t past = net->n_layers;
    memcpy(at + 8, &past, sizeof past);
    resign(data, bytes);
    char want[64];
    snprintf(want, sizeof want, "output 1 is layer %d (outside 0..%d)", past, past - 1);
    expect_refused(data, bytes, want);
    gr_free(data);
    gr_engine_destroy(e);

    e = build_cpu("qdq.onnx", GR_PREC_INT8);
    const gr_net_qdq *q = gr_engine_model(e)->net->qdq;
    int conv = 0;
    while (!q->wscale[conv])
        conv++;
    save_bytes(e, &data, &bytes);
    at = memmem(data, bytes, q->wscale[conv], (size_t)q->n_wscale[conv] * sizeof(float));
    ck_assert_ptr_nonnull(at);
    const float bad[] = {-1.0f, NAN, 0.0f};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        float keep;
        memcpy(&keep, at, sizeof keep);
        memcpy(at, &bad[k], sizeof bad[k]);
        resign(data, bytes);
        snprintf(want, sizeof want, "layer %d: int8 weight scale 0 is", conv);
        expect_refused(data, bytes, want);
        memcpy(at, &keep, sizeof keep);
    }
    resign(data, bytes);
    gr_engine *loaded = NULL;
    ck_assert_int_eq(gr_engine_load_from_memory(data, bytes, NULL, &loaded), GR_OK);
    gr_engine_destroy(loaded);
    gr_free(data);
    gr_engine_destroy(e);
}
END_TEST

/* ---- damaged head records ------------------------------------------------------------------- */

/* tail_ops.onnx's fp32 engine file (a head that stays on the host: tiny_head.onnx's anchor-free
 * decode is a dfl_head layer now, its tail one copy), where its head's record starts in it and its
 * length. */
typedef struct saved_head {
    gr_engine *built;
    uint8_t *data;
    size_t bytes, at, len;
} saved_head;

static void saved_head_make(saved_head *s)
{
    s->built = build_cpu("tail_ops.onnx", GR_PREC_FP32);
    save_bytes(s->built, &s->data, &s->bytes);
    gr_bytes rec = {0};
    gr_tail_write(gr_engine_model(s->built)->net->tail, &rec);
    ck_assert(!rec.failed && rec.len > 100);
    uint8_t *at = memmem(s->data, s->bytes, rec.data, rec.len);
    ck_assert_ptr_nonnull(at);
    s->at = (size_t)(at - s->data);
    s->len = rec.len;
    gr_bytes_free(&rec);
}

static void saved_head_free(saved_head *s)
{
    gr_free(s->data);
    gr_engine_destroy(s->built);
}

/* Loaded: GR_OK and the engine runs and decodes; refused: GR_ERR_PARSE, one line with `text`. */
static gr_status load_or_refuse(const uint8_t *data, size_t bytes, const char *text)
{
    gr_engine *e = (gr_engine *)data; /* must come back NULL on a refusal */
    gr_status st = gr_engine_load_from_memory(data, bytes, NULL, &e);
    if (st != GR_OK) {
        ck_assert_msg(st == GR_ERR_PARSE, "%s: %s", gr_status_str(st), gr_last_error());
        ck_assert_ptr_null(e);
        ck_assert_msg(strstr(gr_last_error(), text) != NULL, "'%s' not in: %s", text,
                      gr_last_error());
        ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
        return st;
    }
    float *x = calloc(3 * 32 * 32, sizeof *x);
    ck_assert_int_eq(gr_engine_run_f32(e, x), GR_OK);
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    gr_detection *dets = NULL;
    int n = 0;
    ck_assert_int_eq(gr_engine_detect(e, 0, &dopt, &dets, &n), GR_OK);
    gr_detections_free(dets);
    free(x);
    gr_engine_destroy(e);
    return GR_OK;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* Every byte of the head's record flipped in turn (the checksum made again): refused with one
 * line naming the head, or loaded (a constant's floats, an axis an op does not read) and run. */
START_TEST(flipped_head_bytes)
{
    if (!gr_test_have_onnx())
        return;
    saved_head s;
    saved_head_make(&s);
    int refused = 0;
    for (size_t i = s.at; i < s.at + s.len; i++) {
        s.data[i] ^= 0x41;
        resign(s.data, s.bytes);
        refused += load_or_refuse(s.data, s.bytes, "the detection head run on the host") != GR_OK;
        s.data[i] ^= 0x41;
    }
    printf("tail_ops: %d of %zu head bytes flipped refused, the others loaded and ran\n", refused,
           s.len);
    ck_assert_int_gt(refused, (int)s.len / 2);
    saved_head_free(&s);
}
END_TEST

/* Fields set to values the importer never makes, each refused naming what is wrong: found by
 * walking the record (runtime/engine_file.h, models/onnx/tail.c's gr_tail_write). */
START_TEST(wrong_head_fields)
{
    if (!gr_test_have_onnx())
        return;
    saved_head s;
    saved_head_make(&s);
    uint8_t *rec = s.data + s.at;
    size_t pos = 4, first_input = 0, first_slice_start = 0, first_node = 0;
    uint32_t n_values = get_u32(rec);
    for (uint32_t i = 0; i < n_values; i++) {
        uint32_t kind = get_u32(rec + pos), ndim = get_u32(rec + pos + 4);
        uint64_t n = 1;
        pos += 8;
        for (uint32_t d = 0; d < ndim; d++, pos += 8)
            n *= get_u32(rec + pos);
        if (kind == 0 && !first_input)
            first_input = pos;
        pos += kind == 0 ? 4 : kind == 1 ? n * 4 : 0;
    }
    uint32_t n_nodes = get_u32(rec + pos);
    pos += 4;
    first_node = pos;
    for (uint32_t i = 0; i < n_nodes; i++) {
        uint32_t op = get_u32(rec + pos), n_args = get_u32(rec + pos + 16);
        pos += 20 + 4 * (size_t)n_args;
        uint32_t rank = get_u32(rec + pos);
        pos += 4;
        if (op == GR_TAIL_SLICE && !first_slice_start)
            first_slice_start = pos;
        pos += (op == GR_TAIL_SLICE ? 16 : 8) * (size_t)rank;
    }
    ck_assert_uint_eq(pos + 4, s.len); /* the output's value id ends the record */
    ck_assert(first_input && first_slice_start);
    const struct {
        size_t at;
        uint32_t value;
        const char *text;
    } wrong[] = {
        {first_input, 99, ": an input of"},                       /* a layer the net lacks */
        {first_node + 20, 4000, "argument 0 is value 4000"},       /* an argument past them */
        {first_node + 4, 0, "its output, value 0, is not a value"}, /* writes an input */
        {first_slice_start, 1000, "start or step is out of range"}, /* outside the input */
        {s.len - 4, 0, "is not a detection head's output"},         /* not a computed value */
        {s.len - 4, 1u << 31, "which no node computes"},
        {0, 5000, "5000 values (at most"},
    };
    uint8_t *copy = malloc(s.bytes);
    for (size_t k = 0; k < sizeof wrong / sizeof wrong[0]; k++) {
        memcpy(copy, s.data, s.bytes);
        put_u32(copy + s.at + wrong[k].at, wrong[k].value);
        resign(copy, s.bytes);
        ck_assert_int_eq(load_or_refuse(copy, s.bytes, wrong[k].text), GR_ERR_PARSE);
        ck_assert_msg(strstr(gr_last_error(), "engine in memory: the detection head run on the "
                             "host: ") && strstr(gr_last_error(), ": file corrupt"), "%s",
                      gr_last_error());
    }
    free(copy);
    saved_head_free(&s);
}
END_TEST

/* The file cut anywhere: refused by its length; the head's record cut short inside a file whose
 * length and checksum were made to agree: refused too (the record ends early, or what follows
 * does not read as a head). */
START_TEST(truncated_heads)
{
    if (!gr_test_have_onnx())
        return;
    saved_head s;
    saved_head_make(&s);
    for (size_t len = 0; len < s.bytes; len += len < s.at ? 97 : 13) {
        uint8_t *cut = malloc(len ? len : 1); /* exactly len bytes: a read past is ASan's */
        memcpy(cut, s.data, len);
        gr_engine *e = NULL;
        ck_assert_int_eq(gr_engine_load_from_memory(cut, len, NULL, &e), GR_ERR_PARSE);
        ck_assert_ptr_null(e);
        free(cut);
    }
    for (size_t keep = 0; keep < s.len; keep += 3) {
        size_t len = s.bytes - (s.len - keep);
        uint8_t *cut = malloc(len);
        memcpy(cut, s.data, s.at + keep);
        memcpy(cut + s.at + keep, s.data + s.at + s.len, s.bytes - s.at - s.len);
        resign(cut, len);
        gr_engine *e = (gr_engine *)cut;
        gr_status st = gr_engine_load_from_memory(cut, len, NULL, &e);
        ck_assert_msg(st == GR_ERR_PARSE, "head cut to %zu bytes: %s", keep, gr_last_error());
        ck_assert_ptr_null(e);
        ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
        free(cut);
    }
    saved_head_free(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_file_onnx");
    TCase *tc = tcase_create("onnx");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, round_trip, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, int8_weight_scales_are_used);
    tcase_add_test(tc, outputs_and_scales_checked);
    tcase_add_test(tc, flipped_head_bytes);
    tcase_add_test(tc, wrong_head_fields);
    tcase_add_test(tc, truncated_heads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_onnx()) {
        printf("test_engine_file_onnx: this build has no ONNX import\n");
        return 77;
    }
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
