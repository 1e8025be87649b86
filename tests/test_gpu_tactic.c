/* GPU engine, conv tactic search and timing cache (runtime/gpu/tactic.c, docs/tactics.md; the
 * candidates are the implicit-GEMM kernel's tiles x split-K and the GEMM tactic, cuBLASLt):
 *   - int8: an engine whose tactics were chosen by measurement gives outputs bit-identical to an
 *     engine of the kernels' automatic tactics (int32 sums are exact whatever the tile or split),
 *     at batch 1 and 4, and with two runs in flight (each instance's split-K workspace sized for
 *     its chosen tactic); fp16: within a stated NRMSE;
 *   - every chosen tactic's measured time <= the automatic tactic's, and the search timed more
 *     than the automatic tactic; its cost at batch 1 is printed (and bounded);
 *   - timing cache: the second build with the same file times 0 candidates and picks the same
 *     tactics; a GEMM tactic a larger batch cannot use stays in the entry smaller batches share
 *     (the larger one's other tactic has its own); a corrupt file or one from another GPU gives a notice and everything is measured
 *     again (and the file is rewritten valid);
 *   - GR_DISABLE_TACTIC_SEARCH=1 and tactic_search = 0 turn it off; fp32 engines list no tactics
 *     (their measured algorithms: test_gpu_gemm_f32).
 * Exits 77 (skipped) with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"

enum { MAX_HEADS = 8, INPUTS = 3 };

/* One int8 calibration cache per model (a cache of another model is an error). */
static char calib_caches[4][256], timing_cache[256];
static int n_calib_caches;

static const char *calib_cache_for(const gr_model *m)
{
    gr_model_info info;
    ck_assert_int_eq(gr_model_get_info(m, &info), GR_OK);
    char path[256];
    snprintf(path, sizeof path, "/tmp/graphrun_gpu_tactic_%d_%s.calib", (int)getpid(), info.name);
    for (int i = 0; i < n_calib_caches; i++)
        if (strcmp(calib_caches[i], path) == 0)
            return calib_caches[i];
    ck_assert_int_lt(n_calib_caches, 4);
    snprintf(calib_caches[n_calib_caches], sizeof calib_caches[0], "%s", path);
    return calib_caches[n_calib_caches++];
}

static gr_model *load_model(const char *name)
{
    return gr_test_load_model(name, NULL, 0);
}

static gr_engine *build(const gr_model *m, gr_precision prec, int batch, int search,
                        const char *cache, int inflight)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    ck_assert_int_eq(eo.tactic_search, 1); /* the documented default */
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = batch;
    eo.calib_cache = calib_cache_for(m);
    eo.tactic_search = search;
    eo.timing_cache = cache;
    eo.inflight = inflight;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build %s batch %d search %d: %s",
                  gr_precision_name(prec), batch, search, gr_last_error());
    return e;
}

static size_t input_bytes(const gr_engine *e)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_input_desc(e, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

static size_t output_floats(const gr_engine *e, int h)
{
    gr_tensor_desc d;
    ck_assert_int_eq(gr_engine_output_desc(e, h, &d), GR_OK);
    return (size_t)d.n * d.c * d.h * d.w;
}

static void fill_input(uint8_t *buffer, size_t bytes, int which)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)((i * 7919u + (size_t)which * 104729u) >> 3);
}

/* Outputs of input `which`, copied (every head back to back). */
static float *run_copy(gr_engine *e, int which, size_t *n)
{
    size_t bytes = input_bytes(e);
    uint8_t *in = malloc(bytes);
    ck_assert_ptr_nonnull(in);
    fill_input(in, bytes, which);
    ck_assert_msg(gr_engine_run_u8(e, in) == GR_OK, "%s", gr_last_error());
    free(in);
    size_t total = 0;
    for (int h = 0; h < gr_engine_output_count(e); h++)
        total += output_floats(e, h);
    float *all = malloc(total * sizeof *all);
    ck_assert_ptr_nonnull(all);
    size_t at = 0;
    for (int h = 0; h < gr_engine_output_count(e); h++) {
        const float *out;
        ck_assert_int_eq(gr_engine_output(e, h, &out), GR_OK);
        memcpy(all + at, out, output_floats(e, h) * sizeof *all);
        at += output_floats(e, h);
    }
    *n = total;
    return all;
}

static double nrmse(const float *got, const float *want, size_t n)
{
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        err += d * d;
        ref += (double)want[i] * (double)want[i];
    }
    return ref > 0.0 ? sqrt(err / ref) : sqrt(err);
}

/* Every tactic's fields are consistent; returns how many are not the automatic tactic (another
 * tile or split of the implicit-GEMM kernel, or the GEMM tactic).
 * expect_cached: every tactic came from the timing cache (0 candidates timed). */
static int check_tactics(const gr_engine *e, int expect_cached)
{
    int n = gr_engine_tactic_count(e), changed = 0;
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++) {
        gr_tactic_info t;
        ck_assert_int_eq(gr_engine_tactic(e, i, &t), GR_OK);
        ck_assert_int_ge(t.layer, 0); /* the first layer: SIMT kernel or the stream mode */
        ck_assert_msg(t.us > 0.0 && t.auto_us > 0.0, "layer %d: times %g %g", t.layer, t.us,
                      t.auto_us);
        /* The chosen tactic is never slower than the automatic one as measured (auto is kept
         * unless a candidate is faster). */
        ck_assert_msg(t.us <= t.auto_us, "layer %d: %s %.2f us > auto %.2f us", t.layer, t.name,
                      t.us, t.auto_us);
        if (expect_cached)
            ck_assert_int_eq(t.candidates, 0);
        ck_assert(t.name[0] != '\0');
        ck_assert_int_eq(strcmp(t.name, "auto") == 0,
                         t.tile_config == 0 && t.split_k == 0 && !t.gemm);
        ck_assert(!t.gemm || (t.tile_config == 0 && t.split_k == 0 && strstr(t.name, "gemm")));
        changed += t.tile_config != 0 || t.split_k != 0 || t.gemm;
        printf("  layer %2d  %-16s %8.2f us  (auto %8.2f us, %d candidates)\n", t.layer, t.name,
               t.us, t.auto_us, t.candidates);
    }
    gr_tactic_info t;
    ck_assert_int_eq(gr_engine_tactic(e, n, &t), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_engine_tactic(e, -1, &t), GR_ERR_INVALID_ARGUMENT);
    return changed;
}

/* int8: searched tactics give the automatic tactics' outputs bit for bit (models x batch). */
START_TEST(test_int8_bit_identical_to_auto)
{
    const char *models[] = {"yolo", "yolov3-tiny"};
    const int batches[] = {1, 4};
    const char *name = models[_i / 2];
    int batch = batches[_i % 2];
    gr_model *m = load_model(name);
    gr_engine *plain = build(m, GR_PREC_INT8, batch, 0, NULL, 1);
    gr_engine *tuned = build(m, GR_PREC_INT8, batch, 1, NULL, 1);
    ck_assert_int_eq(gr_engine_tactic_count(plain), 0);
    printf("%s int8 batch %d:\n", name, batch);
    int changed = check_tactics(tuned, 0);
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(tuned, &st), GR_OK);
    ck_assert_int_eq(st.convs, gr_engine_tactic_count(tuned));
    /* Measured, or (two convs of the same shape) reused from the first's measurement. */
    ck_assert_int_gt(st.searched, 0);
    ck_assert_int_eq(st.searched + st.cached, st.convs);
    /* More than the automatic tactic was timed: the candidate list is not empty. */
    ck_assert_int_gt(st.candidates, st.searched);
    printf("%s int8 batch %d: %d convs, %d candidates timed, %d rejected, %.1f ms, %d not "
           "automatic\n", name, batch, st.convs, st.candidates, st.rejected, st.search_ms, changed);
    /* int8 is exact in every tactic: a rejected candidate is a kernel bug in that tile/split
     * (the search kept it out of the engine, but the kernels must be fixed). */
    ck_assert_msg(st.rejected == 0, "%d int8 candidate tactics gave other results than the "
                  "automatic one", st.rejected);
    if (batch == 1) /* the budget at batch 1 is well under 1 s; 3 s catches a regression */
        ck_assert_msg(st.search_ms < 3000.0, "tactic search took %.0f ms", st.search_ms);
    for (int k = 0; k < INPUTS; k++) {
        size_t n1, n2;
        float *want = run_copy(plain, k, &n1);
        float *got = run_copy(tuned, k, &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert_msg(memcmp(want, got, n1 * sizeof *want) == 0,
                      "%s int8 batch %d input %d: tuned output differs from auto (NRMSE %g)",
                      name, batch, k, nrmse(got, want, n1));
        free(want);
        free(got);
    }
    gr_engine_destroy(plain);
    gr_engine_destroy(tuned);
    gr_model_destroy(m);
}
END_TEST

/* fp16: the network output of searched tactics stays close to the automatic tactics'. Each
 * layer's candidate passed NRMSE <= 1e-3 against auto on its own input (in practice ~1e-4: only
 * the order of the f32 K sum differs); through ~15 layers such differences add up to well under
 * 1e-2, while a wrong tactic gives O(1). */
START_TEST(test_fp16_close_to_auto)
{
    gr_model *m = load_model("yolo"); /* no fp16 overflow with the synthetic weights */
    gr_engine *plain = build(m, GR_PREC_FP16, 1, 0, NULL, 1);
    gr_engine *tuned = build(m, GR_PREC_FP16, 1, 1, NULL, 1);
    printf("yolo fp16 batch 1:\n");
    check_tactics(tuned, 0);
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(tuned, &st), GR_OK);
    printf("yolo fp16 batch 1: %d candidates timed, %d rejected by NRMSE > 1e-3, %.1f ms\n",
           st.candidates, st.rejected, st.search_ms);
    for (int k = 0; k < INPUTS; k++) {
        size_t n1, n2;
        float *want = run_copy(plain, k, &n1);
        float *got = run_copy(tuned, k, &n2);
        ck_assert_uint_eq(n1, n2);
        double e = nrmse(got, want, n1);
        ck_assert_msg(e <= 1e-2, "fp16 input %d: NRMSE %g vs auto", k, e);
        free(want);
        free(got);
    }
    gr_engine_destroy(plain);
    gr_engine_destroy(tuned);
    gr_model_destroy(m);
}
END_TEST

/* Two runs in flight on a tuned engine: each instance has split-K scratch sized for the chosen
 * tactics, so concurrent slots equal the automatic engine's serial outputs bit for bit. */
START_TEST(test_inflight_with_tactics)
{
    gr_model *m = load_model("yolov3-tiny");
    gr_engine *plain = build(m, GR_PREC_INT8, 1, 0, NULL, 1);
    gr_engine *tuned = build(m, GR_PREC_INT8, 1, 1, NULL, 2);
    size_t bytes = input_bytes(tuned);
    for (int slot = 0; slot < 2; slot++) {
        void *buf;
        size_t got_bytes;
        ck_assert_int_eq(gr_engine_slot_input(tuned, slot, 1, &buf, &got_bytes), GR_OK);
        ck_assert_uint_eq(got_bytes, bytes);
        fill_input(buf, bytes, slot);
    }
    ck_assert_int_eq(gr_engine_submit(tuned, 0), GR_OK);
    ck_assert_int_eq(gr_engine_submit(tuned, 1), GR_OK);
    for (int slot = 0; slot < 2; slot++) {
        ck_assert_msg(gr_engine_wait(tuned, slot) == GR_OK, "%s", gr_last_error());
        size_t n;
        float *want = run_copy(plain, slot, &n);
        size_t at = 0;
        for (int h = 0; h < gr_engine_output_count(tuned); h++) {
            const float *out;
            ck_assert_int_eq(gr_engine_output(tuned, h, &out), GR_OK);
            ck_assert_msg(memcmp(out, want + at, output_floats(tuned, h) * sizeof *out) == 0,
                          "slot %d head %d differs from the automatic tactics", slot, h);
            at += output_floats(tuned, h);
        }
        free(want);
    }
    gr_engine_destroy(plain);
    gr_engine_destroy(tuned);
    gr_model_destroy(m);
}
END_TEST

static void expect_same_tactics(const gr_engine *a, const gr_engine *b)
{
    ck_assert_int_eq(gr_engine_tactic_count(a), gr_engine_tactic_count(b));
    for (int i = 0; i < gr_engine_tactic_count(a); i++) {
        gr_tactic_info x, y;
        ck_assert_int_eq(gr_engine_tactic(a, i, &x), GR_OK);
        ck_assert_int_eq(gr_engine_tactic(b, i, &y), GR_OK);
        ck_assert_int_eq(x.layer, y.layer);
        ck_assert_msg(x.tile_config == y.tile_config && x.split_k == y.split_k && x.gemm == y.gemm,
                      "layer %d: %s, then %s from the cache", x.layer, x.name, y.name);
    }
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

START_TEST(test_timing_cache_round_trip)
{
    unlink(timing_cache);
    gr_model *m = load_model("yolov3-tiny");
    gr_engine *first = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(first, &st), GR_OK);
    ck_assert_int_gt(st.searched, 0);
    ck_assert_int_gt(st.candidates, 0);
    ck_assert_str_eq(gr_engine_notice(first), ""); /* a missing file is not worth a notice */
    ck_assert_int_eq(access(timing_cache, R_OK), 0);

    gr_engine *second = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
    ck_assert_int_eq(gr_engine_tactic_stats(second, &st), GR_OK);
    ck_assert_int_eq(st.candidates, 0); /* measured nothing */
    ck_assert_int_eq(st.searched, 0);
    ck_assert_int_eq(st.cached, st.convs);
    ck_assert_str_eq(gr_engine_notice(second), "");
    printf("timing cache: second build %d convs from the cache, %.1f ms\n", st.cached,
           st.search_ms);
    check_tactics(second, 1);
    expect_same_tactics(first, second);
    size_t n1, n2;
    float *a = run_copy(first, 0, &n1);
    float *b = run_copy(second, 0, &n2);
    ck_assert_int_eq(memcmp(a, b, n1 * sizeof *a), 0);
    free(a);
    free(b);

    /* Another batch: other layer keys, measured and added; the batch-1 entries stay. */
    gr_engine *batch2 = build(m, GR_PREC_INT8, 2, 1, timing_cache, 1);
    ck_assert_int_eq(gr_engine_tactic_stats(batch2, &st), GR_OK);
    ck_assert_int_gt(st.searched, 0);
    gr_engine *third = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
    ck_assert_int_eq(gr_engine_tactic_stats(third, &st), GR_OK);
    ck_assert_int_eq(st.candidates, 0);
    gr_engine_destroy(first);
    gr_engine_destroy(second);
    gr_engine_destroy(batch2);
    gr_engine_destroy(third);
    gr_model_destroy(m);
}
END_TEST

/* Engines of one batch, not micro-batched (the choice of the sub-batch is another test's). */
static gr_engine *build_whole(const gr_model *m, gr_precision prec, int batch, const char *cache)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = batch;
    eo.micro_batch = batch;
    eo.timing_cache = cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build %s batch %d: %s",
                  gr_precision_name(prec), batch, gr_last_error());
    return e;
}

/* Engines of different batches share a conv's entry when they time it on the same representative
 * batch (64 images for YOLOv2-tiny's 13x13 layers). The GEMM tactic that wins there may not scale
 * to a larger engine's batch (its scratch grows with it: fp16 13x13x1024 at batch 256 is past the
 * bound); that engine takes the best other tactic, and must not leave it in the shared entry,
 * where a batch-64 engine would take it instead of the GEMM tactic (it did until 2026-11-26:
 * fp16 batch 64 from such a cache ran 1.6x slower). */
/* "GEMM tactic of layer L does not scale to batch B" in an engine's notice. */
static int gemm_refused(const gr_engine *e, int layer, int batch)
{
    char line[96];
    snprintf(line, sizeof line, "GEMM tactic of layer %d does not scale to batch %d", layer, batch);
    return strstr(gr_engine_notice(e), line) != NULL;
}

/* A batch-256 build shares its cache entries with the batch-64 engines (same representative
 * batch). Where the GEMM tactic won at the representative batch but does not scale to 256, the
 * batch-256 engine runs the best other tactic and the shared entry keeps the GEMM tactic for the
 * batches it scales to; everywhere else the entry is what the batch-256 engine runs. Whether any
 * GEMM tactic wins, or fails to scale, depends on the card: the test asserts the rule on every
 * layer, never which tactic a card prefers. */
START_TEST(test_timing_cache_gemm_batches)
{
    unlink(timing_cache);
    gr_model *m = load_model("yolo");
    gr_engine *big = build_whole(m, GR_PREC_FP16, 256, timing_cache);
    gr_engine *cached64 = build_whole(m, GR_PREC_FP16, 64, timing_cache);
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(cached64, &st), GR_OK);
    ck_assert_int_gt(st.cached, 0);
    ck_assert_int_eq(gr_engine_tactic_count(big), gr_engine_tactic_count(cached64));
    int shared = 0;
    for (int i = 0; i < gr_engine_tactic_count(big); i++) {
        gr_tactic_info c, b;
        ck_assert_int_eq(gr_engine_tactic(cached64, i, &c), GR_OK);
        ck_assert_int_eq(gr_engine_tactic(big, i, &b), GR_OK);
        ck_assert_int_eq(c.layer, b.layer);
        if (c.candidates > 0 || c.batch != b.batch)
            continue; /* another representative batch: its own entry, measured at this build */
        shared++;
        if (gemm_refused(big, b.layer, 256)) {
            ck_assert_msg(!b.gemm, "layer %d: the batch-256 engine runs the GEMM tactic it "
                          "refused", b.layer);
            ck_assert_msg(c.gemm || gemm_refused(cached64, c.layer, 64),
                          "layer %d: the GEMM tactic won on %d images but the batch-64 engine "
                          "runs %s from the cache the batch-256 engine (%s) wrote", c.layer,
                          c.batch, c.name, b.name);
        } else {
            ck_assert_msg(c.tile_config == b.tile_config && c.split_k == b.split_k &&
                          c.gemm == b.gemm, "layer %d: the batch-256 engine runs %s, the "
                          "batch-64 engine %s from the same cache entry", c.layer, b.name, c.name);
        }
    }
    ck_assert_int_gt(shared, 0);
    /* The batch-256 engine again: everything from the cache, its other tactic included. */
    gr_engine *big2 = build_whole(m, GR_PREC_FP16, 256, timing_cache);
    ck_assert_int_eq(gr_engine_tactic_stats(big2, &st), GR_OK);
    ck_assert_int_eq(st.candidates, 0);
    expect_same_tactics(big, big2);
    gr_engine_destroy(big);
    gr_engine_destroy(cached64);
    gr_engine_destroy(big2);
    gr_model_destroy(m);
}
END_TEST

/* A corrupt cache or another GPU's: one notice line, every layer measured, the file rewritten. */
START_TEST(test_timing_cache_bad_file)
{
    gr_model *m = load_model("yolo");
    unlink(timing_cache);
    gr_engine *e = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
    gr_engine_destroy(e);
    char *good = read_text(timing_cache);
    ck_assert_ptr_nonnull(strstr(good, "\ndevice "));

    char *other = malloc(strlen(good) + 64);
    char *device_line = strstr(good, "\ndevice ") + 1;
    size_t head = (size_t)(device_line - good);
    memcpy(other, good, head);
    sprintf(other + head, "device Some Other GPU; sm_75; 40 SMs%s", strchr(device_line, '\n'));
    const char *files[] = {"garbage\x01\x02 not a cache\n", other,
                           "graphrun-timing-cache 1 0.1.0\ndevice x\nentries 5\n"};
    for (int k = 0; k < 3; k++) {
        write_text(timing_cache, files[k]);
        e = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
        const char *notice = gr_engine_notice(e);
        ck_assert_msg(strstr(notice, "timing cache") && strstr(notice, "ignored"),
                      "file %d: notice '%s'", k, notice);
        ck_assert_ptr_null(strchr(strstr(notice, "timing cache"), '\n'));
        gr_tactic_stats st;
        ck_assert_int_eq(gr_engine_tactic_stats(e, &st), GR_OK);
        ck_assert_int_gt(st.searched, 0);
        ck_assert_int_eq(st.searched + st.cached, st.convs);
        gr_engine_destroy(e);
        /* Rewritten: the next build measures nothing. */
        e = build(m, GR_PREC_INT8, 1, 1, timing_cache, 1);
        ck_assert_int_eq(gr_engine_tactic_stats(e, &st), GR_OK);
        ck_assert_int_eq(st.candidates, 0);
        ck_assert_str_eq(gr_engine_notice(e), "");
        gr_engine_destroy(e);
    }
    free(other);
    free(good);
    gr_model_destroy(m);
}
END_TEST

START_TEST(test_search_off)
{
    gr_model *m = load_model("yolo");
    setenv("GR_DISABLE_TACTIC_SEARCH", "1", 1);
    gr_engine *e = build(m, GR_PREC_INT8, 1, 1, NULL, 1);
    unsetenv("GR_DISABLE_TACTIC_SEARCH");
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(e, &st), GR_OK);
    ck_assert_int_eq(gr_engine_tactic_count(e), 0);
    ck_assert_int_eq(st.convs + st.candidates, 0);
    gr_engine_destroy(e);
    e = build(m, GR_PREC_FP32, 1, 1, NULL, 1); /* fp32 algorithms are not listed as tactics */
    ck_assert_int_eq(gr_engine_tactic_count(e), 0);
    gr_engine_destroy(e);
    ck_assert_int_eq(gr_engine_tactic_count(NULL), 0);
    ck_assert_int_eq(gr_engine_tactic_stats(NULL, &st), GR_ERR_INVALID_ARGUMENT);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_tactic"))
        return 77;
    unsetenv("GR_DISABLE_TACTIC_SEARCH");
    snprintf(timing_cache, sizeof timing_cache, "/tmp/graphrun_gpu_tactic_%d.timing",
             (int)getpid());
    Suite *s = suite_create("gpu_tactic");
    TCase *tc = tcase_create("tactic");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_int8_bit_identical_to_auto, 0, 4);
    tcase_add_test(tc, test_fp16_close_to_auto);
    tcase_add_test(tc, test_inflight_with_tactics);
    tcase_add_test(tc, test_timing_cache_round_trip);
    tcase_add_test(tc, test_timing_cache_gemm_batches);
    tcase_add_test(tc, test_timing_cache_bad_file);
    tcase_add_test(tc, test_search_off);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    for (int i = 0; i < n_calib_caches; i++)
        unlink(calib_caches[i]);
    unlink(timing_cache);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
