/* Saved GPU engines (runtime.h, "saved engines"; runtime/engine_file.c, gpu_save_blob in
 * runtime/gpu/engine.c): an engine built with the tactic search, saved and loaded, gives outputs
 * bit-identical to the freshly built engine (same plan, same int8 ranges, same tactics: a stored
 * tactic that failed its check on load would be measured again and named in the notice, which
 * this test refuses) for int8 and fp16 at batch 1 and 64, and fp32 (its measured algorithms);
 * the loaded engine lists the same tactics and searched nothing. Build and load times are printed
 * beside each other, not asserted (the targets live in bench/graphrun_bench.c). The load takes
 * the file's device weights (runtime/saved_gpu.h) as they are: changing them changes the outputs;
 * a loaded engine saves and loads again to the same engine, and its float-input variant (planned
 * from the network's weights) equals the built one's. A GPU file whose header names another GPU is
 * refused naming both. An ONNX model whose detection head runs on the host (YOLOv8n's, fp16) and
 * one with its own int8 weights (qdq.onnx, int8 with the file's scales) save and load too (engine
 * file format 5): outputs, graph output and detections bit-identical. Exits 77 (skipped) without
 * a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* unsetenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"
#include "runtime/engine_file.h"
#include "runtime/saved_gpu.h"
#include "tests/support/gpu_test.h"
#include "tests/support/onnx_inputs.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static gr_model *load_yolo(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

/* One run on deterministic non-zero input: uint8 (the variant a build makes) or float (built on
 * first use; a loaded engine plans it from the network's weights, the file holding only the
 * uint8 variant's device weights). */
static void run_input(gr_engine *e, int u8)
{
    void *buf;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(e, u8, &buf, &bytes), GR_OK);
    if (u8)
        for (size_t i = 0; i < bytes; i++)
            ((uint8_t *)buf)[i] = (uint8_t)((i * 7919u) >> 3);
    else
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            ((float *)buf)[i] = (float)((i * 7919u) >> 3 & 255u) / 255.0f;
    ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
}

static void run(gr_engine *e) { run_input(e, 1); }

/* 0 when every output of a and b is bit-identical, else how many values differ (and a message). */
static size_t count_differences(gr_engine *a, gr_engine *b, const char *what, char *msg,
                                size_t len)
{
    size_t all = 0;
    msg[0] = '\0';
    for (int k = 0; k < gr_engine_output_count(a); k++) {
        const float *x, *y;
        gr_tensor_desc d;
        ck_assert_int_eq(gr_engine_output_desc(a, k, &d), GR_OK);
        ck_assert_int_eq(gr_engine_output(a, k, &x), GR_OK);
        ck_assert_int_eq(gr_engine_output(b, k, &y), GR_OK);
        size_t n = (size_t)d.n * d.c * d.h * d.w, differ = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&x[i], &y[i], sizeof x[i]) != 0 && differ++ == 0)
                first = i;
        if (differ && !msg[0])
            snprintf(msg, len, "%s output %d: %zu of %zu values differ, the first at %zu: built "
                     "%.9g, loaded %.9g", what, k, differ, n, first, (double)x[first],
                     (double)y[first]);
        all += differ;
    }
    return all;
}

static void expect_same_outputs_input(gr_engine *a, gr_engine *b, const char *what, int u8)
{
    run_input(a, u8);
    run_input(b, u8);
    char msg[256];
    ck_assert_msg(count_differences(a, b, what, msg, sizeof msg) == 0, "%s", msg);
}

static void expect_same_outputs(gr_engine *a, gr_engine *b, const char *what)
{
    expect_same_outputs_input(a, b, what, 1);
}

static void expect_same_tactics(const gr_engine *a, const gr_engine *b, const char *what)
{
    ck_assert_int_eq(gr_engine_tactic_count(a), gr_engine_tactic_count(b));
    for (int i = 0; i < gr_engine_tactic_count(a); i++) {
        gr_tactic_info x, y;
        ck_assert_int_eq(gr_engine_tactic(a, i, &x), GR_OK);
        ck_assert_int_eq(gr_engine_tactic(b, i, &y), GR_OK);
        ck_assert_msg(x.layer == y.layer && x.tile_config == y.tile_config &&
                          x.split_k == y.split_k && x.gemm == y.gemm,
                      "%s tactic %d: built layer %d %s, loaded layer %d %s", what, i, x.layer,
                      x.name, y.layer, y.name);
    }
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(b, &st), GR_OK);
    ck_assert_msg(st.searched == 0 && st.candidates == 0,
                  "%s: the load searched %d convs (%d candidates); notice: %s", what, st.searched,
                  st.candidates, gr_engine_notice(b));
    ck_assert_msg(strstr(gr_engine_notice(b), "measured again") == NULL, "%s: %s", what,
                  gr_engine_notice(b));
}

static const struct {
    gr_precision prec;
    int batch;
} cases[] = {{GR_PREC_INT8, 1}, {GR_PREC_INT8, 64}, {GR_PREC_FP16, 1}, {GR_PREC_FP16, 64},
             {GR_PREC_FP32, 1}};

START_TEST(round_trip)
{
    gr_model *m = load_yolo();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = cases[_i].prec;
    eo.batch = cases[_i].batch;
    char what[64];
    snprintf(what, sizeof what, "%s batch %d", gr_precision_name(eo.precision), eo.batch);
    gr_engine *built = NULL;
    double t0 = now_ms();
    ck_assert_msg(gr_engine_build(m, &eo, &built) == GR_OK, "%s: %s", what, gr_last_error());
    double t1 = now_ms();
    gr_model_destroy(m);
    char path[64];
    snprintf(path, sizeof path, "/tmp/graphrun_gpu_engine_%d.grengine", (int)getpid());
    ck_assert_msg(gr_engine_save(built, path) == GR_OK, "%s: %s", what, gr_last_error());
    gr_engine *loaded = NULL;
    double t2 = now_ms();
    ck_assert_msg(gr_engine_load(path, NULL, &loaded) == GR_OK, "%s: %s", what, gr_last_error());
    double t3 = now_ms();
    unlink(path);
    printf("engine file %-12s build %8.1f ms, load %7.1f ms (%.1f%%), %d tactics\n", what, t1 - t0,
           t3 - t2, 100.0 * (t3 - t2) / (t1 - t0), gr_engine_tactic_count(loaded));
    expect_same_outputs(built, loaded, what);
    expect_same_tactics(built, loaded, what);
    /* A loaded engine saved again (its device weights copied back: its plan has no weight data)
     * loads to the same engine; its float-input variant, planned from the network's weights on
     * first use, equals the built engine's. */
    void *again = NULL;
    size_t again_bytes = 0;
    ck_assert_msg(gr_engine_save_to_memory(loaded, &again, &again_bytes) == GR_OK, "%s: %s", what,
                  gr_last_error());
    gr_engine *reloaded = NULL;
    ck_assert_msg(gr_engine_load_from_memory(again, again_bytes, NULL, &reloaded) == GR_OK,
                  "%s: %s", what, gr_last_error());
    gr_free(again);
    expect_same_outputs(built, reloaded, what);
    expect_same_outputs_input(built, loaded, what, 0);
    gr_engine_destroy(reloaded);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

/* The load uploads the file's device weights as they are: the same file with bytes of its stored
 * weights changed (and the checksum made again) gives other outputs, while the tactics, ranges
 * and network are the same. */
START_TEST(stored_device_weights_are_used)
{
    gr_model *m = load_yolo();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = GR_PREC_INT8;
    gr_engine *built = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &built) == GR_OK, "%s", gr_last_error());
    gr_model_destroy(m);
    void *p = NULL;
    size_t bytes = 0;
    ck_assert_int_eq(gr_engine_save_to_memory(built, &p, &bytes), GR_OK);
    uint8_t *data = p;
    const uint8_t *blob = NULL;
    for (size_t i = GR_ENGINE_FILE_HEADER; i + 8 <= bytes && !blob; i++)
        if (memcmp(data + i, GR_SAVED_GPU_MAGIC, 8) == 0)
            blob = data + i;
    ck_assert_ptr_nonnull(blob);
    gr_saved_gpu saved;
    ck_assert_msg(gr_saved_gpu_parse(blob, (size_t)(data + bytes - 8 - blob), "test", &saved) ==
                      GR_OK, "%s", gr_last_error());
    const gr_saved_weights *w = gr_saved_gpu_weights(&saved, 1, 1);
    ck_assert_ptr_nonnull(w);
    uint8_t *stored = data + (w->data - data);
    for (size_t i = 0; i < w->bytes; i += 61)
        stored[i] ^= 0x55;
    uint64_t sum = gr_hash64(data, bytes - 8);
    for (int k = 0; k < 8; k++)
        data[bytes - 8 + (size_t)k] = (uint8_t)(sum >> (8 * k));
    gr_engine *loaded = NULL;
    ck_assert_msg(gr_engine_load_from_memory(data, bytes, NULL, &loaded) == GR_OK, "%s",
                  gr_last_error());
    run(built);
    run(loaded);
    char msg[256];
    ck_assert_msg(count_differences(built, loaded, "int8", msg, sizeof msg) > 0,
                  "the changed stored weights changed no output: the load did not use them");
    gr_free(p);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

/* The header's GPU made another: refused naming both, before anything is built. */
START_TEST(other_gpu_refused)
{
    gr_model *m = load_yolo();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.tactic_search = 0;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    gr_model_destroy(m);
    void *p = NULL;
    size_t bytes = 0;
    ck_assert_int_eq(gr_engine_save_to_memory(e, &p, &bytes), GR_OK);
    gr_engine_destroy(e);
    uint8_t *data = p;
    data[GR_ENGINE_FILE_OFF_SM] = 61; /* sm_61 */
    gr_engine *loaded = NULL;
    ck_assert_int_eq(gr_engine_load_from_memory(data, bytes, NULL, &loaded), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(loaded);
    ck_assert_msg(strstr(gr_last_error(), "built for sm_61 (") != NULL, "%s", gr_last_error());
    gr_free(p);
}
END_TEST

/* ONNX models (engine file format 5: the network's outputs, its host-side head, the file's int8
 * weight scales), built on the GPU, saved to a file and loaded: the outputs, the head's graph
 * output (gr_engine_graph_output) and the detections are the built engine's, bit for bit. */
static const struct {
    const char *model, *input;
    gr_precision prec;
} onnx_cases[] = {{"yolov8n_head_op17.onnx", "input_dog.png", GR_PREC_FP16},
                  {"qdq.onnx", "tiny_input.npy", GR_PREC_INT8}};

START_TEST(onnx_round_trip)
{
    if (!gr_test_have_onnx())
        return;
    char path[256], what[128];
    snprintf(path, sizeof path, "tests/onnx/%s", onnx_cases[_i].model);
    snprintf(what, sizeof what, "%s %s", onnx_cases[_i].model,
             gr_precision_name(onnx_cases[_i].prec));
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = path;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = onnx_cases[_i].prec;
    gr_engine *built = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &built) == GR_OK, "%s: %s", what, gr_last_error());
    gr_model_destroy(m);
    /* Run the float input before saving: the f32-input variant (its first conv without the fused
     * u8 quantization) is built at its first run, and a file holds the tactics and weights of the
     * variants built so far; saved before it, the load would measure that conv (the device run of
     * 2026-12-07 caught it: "the load searched 1 convs"). */
    float *x = gr_test_onnx_input(onnx_cases[_i].input);
    ck_assert_msg(gr_engine_run_f32(built, x) == GR_OK, "%s", gr_last_error());
    char file[64];
    snprintf(file, sizeof file, "/tmp/graphrun_gpu_onnx_%d.grengine", (int)getpid());
    ck_assert_msg(gr_engine_save(built, file) == GR_OK, "%s: %s", what, gr_last_error());
    gr_engine *loaded = NULL;
    gr_status st = gr_engine_load(file, NULL, &loaded);
    unlink(file);
    ck_assert_msg(st == GR_OK, "%s: %s", what, gr_last_error());
    ck_assert_msg(gr_engine_run_f32(loaded, x) == GR_OK, "%s", gr_last_error());
    free(x);
    char msg[256];
    ck_assert_msg(count_differences(built, loaded, what, msg, sizeof msg) == 0, "%s", msg);
    const int ca = gr_test_expect_same_results(built, loaded, what);
    expect_same_tactics(built, loaded, what);
    printf("engine file %s: outputs, graph output and %d detections identical\n", what, ca);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_engine_file"))
        return 77;
    unsetenv("GR_DISABLE_TACTIC_SEARCH"); /* the stored tactics are what is tested */
    Suite *s = suite_create("gpu_engine_file");
    TCase *tc = tcase_create("engine_file");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, round_trip, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, stored_device_weights_are_used);
    tcase_add_test(tc, other_gpu_refused);
    tcase_add_loop_test(tc, onnx_round_trip, 0, (int)(sizeof onnx_cases / sizeof onnx_cases[0]));
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
