/* Replay latency and determinism of the captured graphs: for each precision, N >= 1000 replays of
 * one engine must each give output bit-identical to the first, to an eager (non-graph) stream
 * execution of the same plan, and to a second engine built from the same model. Prints p50 / p99 /
 * max replay latency next to the eager latency (the benchmark, not this test, holds the targets).
 * For sanitizer runs (compute-sanitizer makes 1,000 fp32 replays take minutes): GR_TEST_REPLAYS=N
 * (10..1000) replays fewer, GR_TEST_PREC=fp32|fp16|int8 runs one precision.
 * Exits 77 (skipped) with one line when no CUDA device is visible. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"

enum { MAX_REPLAYS = 1000, MAX_EAGER_RUNS = 200 };

static int n_replays = MAX_REPLAYS, n_eager = MAX_EAGER_RUNS;

static gr_engine *build(const gr_model *m, gr_precision prec, int graph)
{
    gr_model_info info;
    gr_model_get_info(m, &info);
    char cache[256];
    snprintf(cache, sizeof cache, "/tmp/graphrun_gpu_replay_%s.calib", info.name);
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.use_cuda_graph = graph;
    eo.calib_cache = cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Fill the engine's pinned input with the letterboxed photo; run `runs` times; check every output
 * against `expect` (or record the first run into it). Returns sorted latencies. */
static void replay(gr_engine *e, const uint8_t *image, size_t bytes, int runs, float *expect,
                   size_t out_elems, double *lat)
{
    void *buf;
    size_t have;
    ck_assert(gr_engine_input_buffer(e, 1, &buf, &have) == GR_OK);
    ck_assert(have == bytes);
    memcpy(buf, image, bytes);
    for (int r = 0; r < runs; r++) {
        ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
        gr_timing t;
        gr_engine_timing(e, &t);
        lat[r] = t.end_to_end_us;
        const float *out;
        ck_assert(gr_engine_output(e, 0, &out) == GR_OK);
        ck_assert_msg(memcmp(out, expect, out_elems * sizeof(float)) == 0,
                      "run %d differs from the reference output", r);
    }
    qsort(lat, (size_t)runs, sizeof *lat, cmp_double);
}

START_TEST(test_replays_bit_identical)
{
    gr_precision prec = (gr_precision)_i;
    const char *only = getenv("GR_TEST_PREC");
    if (only && strcmp(only, gr_precision_name(prec)) != 0) {
        printf("gpu_replay: %s skipped (GR_TEST_PREC=%s)\n", gr_precision_name(prec), only);
        return;
    }
    const char *names[] = {"yolo", "yolov3-tiny"};
    for (int mi = 0; mi < 2; mi++) {
        gr_model_options mo;
        gr_model_options_default(&mo);
        mo.builtin = names[mi];
        gr_model *m = NULL;
        ck_assert(gr_model_load(&mo, &m) == GR_OK);
        gr_model_info info;
        gr_model_get_info(m, &info);
        size_t bytes = (size_t)info.width * info.height * 3;
        uint8_t *image = malloc(bytes);
        gr_image *im = NULL;
        ck_assert(gr_image_load("data/dog.jpg", &im) == GR_OK);
        ck_assert(gr_image_letterbox_u8(im, info.width, info.height, image) == GR_OK);
        gr_image_destroy(im);

        gr_engine *graph = build(m, prec, 1), *eager = build(m, prec, 0), *second = build(m, prec, 1);
        gr_tensor_desc d;
        gr_engine_output_desc(graph, 0, &d);
        size_t out_elems = (size_t)d.n * d.c * d.h * d.w;
        float *expect = malloc(out_elems * sizeof *expect);
        double *lat = malloc(n_replays * sizeof *lat), *lat_eager = malloc(n_eager * sizeof *lat);
        ck_assert(image && expect && lat && lat_eager);

        /* Reference: the eager stream execution. */
        ck_assert(gr_engine_run_u8(eager, image) == GR_OK);
        const float *out;
        gr_engine_output(eager, 0, &out);
        memcpy(expect, out, out_elems * sizeof *expect);
        int nonzero = 0;
        for (size_t i = 0; i < out_elems; i++)
            nonzero += expect[i] != 0.0f;
        ck_assert_msg(nonzero > (int)(out_elems / 2), "output is mostly zeros");

        replay(graph, image, bytes, n_replays, expect, out_elems, lat);
        replay(eager, image, bytes, n_eager, expect, out_elems, lat_eager);
        double lat2[10];
        replay(second, image, bytes, 10, expect, out_elems, lat2);
        printf("%-12s %s: %d graph replays bit-identical (also to eager and to a second build); "
               "replay p50 %.1f us, p99 %.1f us, max %.1f us; eager p50 %.1f us, p99 %.1f us\n",
               names[mi], gr_precision_name(prec), n_replays, lat[n_replays / 2],
               lat[n_replays * 99 / 100], lat[n_replays - 1], lat_eager[n_eager / 2],
               lat_eager[n_eager * 99 / 100]);
        free(lat);
        free(lat_eager);
        free(expect);
        free(image);
        gr_engine_destroy(graph);
        gr_engine_destroy(eager);
        gr_engine_destroy(second);
        gr_model_destroy(m);
    }
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_replay"))
        return 77;
    const char *n = getenv("GR_TEST_REPLAYS");
    if (n) {
        const int v = atoi(n);
        if (v < 10 || v > MAX_REPLAYS) {
            fprintf(stderr, "gpu_replay: GR_TEST_REPLAYS=%s: expected 10..%d\n", n, MAX_REPLAYS);
            return 2;
        }
        n_replays = v;
        n_eager = v < MAX_EAGER_RUNS ? v : MAX_EAGER_RUNS;
    }
    Suite *s = suite_create("gpu_replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_replays_bit_identical, GR_PREC_FP32, GR_PREC_INT8 + 1);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    return failed == 0 ? 0 : 1;
}
