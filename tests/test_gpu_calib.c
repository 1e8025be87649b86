/* INT8 calibration on the GPU (runtime/gpu/calib.c, kernels/calib.cu):
 *
 *   - the statistics kernels against gr_hist_add on the same host values, EXACTLY (max, NaN/Inf
 *     count and every histogram count: memcmp of the whole gr_hist): f32 NCHW and NHWC, dense,
 *     padded and channel slices, fewer images than the buffer holds, the uint8 input (v / 255),
 *     values from 1e-30 to 1e4, zeros, NaN/Inf; everything outside the view (padding channels,
 *     other channels of a slice, the images after view.n) holds huge values and NaN that must
 *     not count. Two chunks of different scale binned separately and merged (as batches are).
 *   - the whole path against the CPU path (planner/calib.c) on the 5 bundled photos, YOLOv2-tiny
 *     VOC with synthetic weights (seed 1) and the shapes model with its trained weights, every
 *     method. Tolerances:
 *       input range: exactly equal (both decode and letterbox with the same code to the same
 *         uint8, and divide by 255 with IEEE rounding);
 *       MAX: 2e-4 relative. The fp32 activations differ only by summation order (cuBLAS vs the
 *         reference's loops): test_gpu_engine holds whole-network outputs to 1e-5 NRMSE and every
 *         value to 1e-4 x (max - min) <= 2e-4 x max |x|; a maximum is one such value;
 *       PERCENTILE / ENTROPY / MSE: 2 bin widths of the layer's histogram (a bin is 2^e / 2048
 *         with max < 2^e, so <= max / 1024: the tolerance is max / 512) plus 2e-4 x max. Their
 *         thresholds are bin edges: a value within 1e-5 of an edge may land in the neighbouring
 *         bin, moving a percentile rank or the KL / MSE objective by a few counts out of
 *         millions, i.e. the threshold by one bin; the second bin covers a max landing on the
 *         other side of a power of two; 2e-4 x max as for MAX. (A larger difference on ENTROPY/MSE would mean two
 *         candidates whose objectives tie to ~1e-6: the message prints the numbers.)
 *   - a partial last batch counts only its real images (constant images whose 60th percentile
 *     changes if a stale image of an earlier batch were counted), and batch 2 agrees with
 *     batch 5 within the MAX tolerance;
 *   - the engine: a GPU int8 engine calibrates on the GPU by default (its notice says so), a CPU
 *     engine with calib_device = GPU writes the same cache byte for byte, calib_device = CPU on a
 *     GPU engine calibrates on the CPU.
 * Seed of the kernel tests: fresh per run, printed; GR_TEST_SEED=<n> repeats one.
 * Exits 77 with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"
#include "kernels/calib.h"
#include "kernels/common.h"
#include "base/base.h"
#include "planner/calib.h"
#include "planner/calib_hist.h"
#include "runtime/engine_internal.h"
#include "runtime/gpu/calib.h"
#include "runtime/image/image.h"
#include "tests/support/gpu_test.h"

static uint64_t test_seed;
static gr_rng rng;

static const char *const photos[] = {"data/dog.jpg", "data/person.jpg", "data/horses.jpg",
                                     "data/eagle.jpg", "data/giraffe.jpg", NULL};
enum { N_PHOTOS = 5 };

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s (%s)", #call, cudaGetErrorName(e_),               \
                      gr_kernels_last_failure());                                                  \
    } while (0)

/* ---- the kernels against gr_hist_add ----------------------------------------------------------- */

typedef struct kcase {
    const char *name;
    int u8, nhwc;
    int n_buf, n_used, c, c_stride, c_offset, h, w;
    float scale; /* f32: |x| up to about 4 x scale; 0: all zeros */
} kcase;

static size_t elem_at(const kcase *k, int n, int ch, int y, int x)
{
    if (k->nhwc)
        return (((size_t)n * k->h + y) * k->w + x) * k->c_stride + k->c_offset + ch;
    return (((size_t)n * k->c_stride + k->c_offset + ch) * k->h + y) * k->w + x;
}

/* One chunk: fill a buffer (outside the view: poison), run the kernels on a fresh statistics
 * record, merge the counts into `got`; add the view's values to `want` with gr_hist_add. */
static void run_chunk(const kcase *k, int max_only, gr_hist *want, gr_hist *got)
{
    size_t extent = (size_t)k->n_buf * k->c_stride * k->h * k->w;
    size_t elem = k->u8 ? 1 : sizeof(float);
    unsigned char *host = malloc(extent * elem);
    float *values = malloc(extent * sizeof(float));
    ck_assert(host && values);
    float *hf = (float *)host;
    for (size_t i = 0; i < extent; i++) { /* poison: must never be read */
        if (k->u8)
            host[i] = 255;
        else
            hf[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? 3e38f : -INFINITY;
    }
    size_t count = 0;
    for (int n = 0; n < k->n_used; n++)
        for (int ch = 0; ch < k->c; ch++)
            for (int y = 0; y < k->h; y++)
                for (int x = 0; x < k->w; x++) {
                    size_t at = elem_at(k, n, ch, y, x);
                    if (k->u8) {
                        host[at] = (unsigned char)(gr_rng_u64(&rng) % 255); /* 255 is poison */
                        values[count++] = (float)host[at] / 255.0f;
                        continue;
                    }
                    uint64_t r = gr_rng_u64(&rng) % 1000;
                    float v = k->scale * gr_rng_normal(&rng);
                    if (r == 0)
                        v = NAN;
                    else if (r == 1)
                        v = (gr_rng_u64(&rng) & 1) ? INFINITY : -INFINITY;
                    else if (r < 20)
                        v = 0.0f;
                    else if (r < 25)
                        v = -v * 1e-3f; /* tiny values */
                    hf[at] = v;
                    values[count++] = v;
                }
    gr_hist_add(want, values, count);

    void *dev = NULL;
    gr_calib_stats *stats = NULL;
    unsigned long long *counts = NULL;
    CUDA_OK(cudaMalloc(&dev, extent * elem));
    CUDA_OK(cudaMalloc((void **)&stats, sizeof *stats));
    CUDA_OK(cudaMalloc((void **)&counts, GR_CALIB_BINS * sizeof *counts));
    CUDA_OK(cudaMemcpy(dev, host, extent * elem, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(stats, 0, sizeof *stats));
    CUDA_OK(cudaMemset(counts, 0, GR_CALIB_BINS * sizeof *counts));
    gr_kview view = {k->n_used, k->c, k->h, k->w, k->c_stride, k->c_offset};
    gr_dtype dtype = k->u8 ? GR_DTYPE_U8 : GR_DTYPE_F32;
    gr_kernels_clear_failure();
    CUDA_OK(gr_launch_calib_absmax(dtype, dev, view, k->nhwc, stats, 0));
    if (!max_only)
        CUDA_OK(gr_launch_calib_hist(dtype, dev, view, k->nhwc, stats, counts, 0));
    CUDA_OK(cudaDeviceSynchronize());
    gr_calib_stats s;
    uint64_t *host_counts = malloc(GR_CALIB_BINS * sizeof *host_counts);
    CUDA_OK(cudaMemcpy(&s, stats, sizeof s, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(host_counts, counts, GR_CALIB_BINS * sizeof *host_counts,
                       cudaMemcpyDeviceToHost));
    float max;
    memcpy(&max, &s.max_bits, sizeof max);
    int exponent = 0;
    frexpf(max, &exponent);
    ck_assert_msg(s.nonfinite <= count, "%s: %llu non-finite of %zu", k->name, s.nonfinite, count);
    ck_assert_msg(gr_hist_merge_bins(got, max_only ? NULL : host_counts, exponent, max,
                                     count - s.nonfinite, s.nonfinite) == GR_OK,
                  "%s: %s", k->name, gr_last_error());
    cudaFree(dev);
    cudaFree(stats);
    cudaFree(counts);
    free(host_counts);
    free(host);
    free(values);
}

static const kcase kernel_cases[] = {
    {"f32 NCHW dense", 0, 0, 3, 3, 16, 16, 0, 13, 13, 4.0f},
    {"f32 NCHW slice, 2 of 3 images", 0, 0, 3, 2, 5, 12, 4, 7, 5, 1.0f},
    {"f16-style NHWC padded (13 of 16)", 0, 1, 2, 2, 13, 16, 0, 9, 11, 100.0f},
    {"NHWC slice (8 at 16 of 32)", 0, 1, 3, 1, 8, 32, 16, 5, 6, 0.25f},
    {"u8 input NHWC, 3 of 4 images", 1, 1, 4, 3, 3, 3, 0, 24, 32, 0.0f},
    {"f32 NCHW large", 0, 0, 4, 4, 64, 64, 0, 104, 104, 0.01f},
    {"f32 tiny values", 0, 0, 1, 1, 7, 7, 0, 3, 3, 1e-30f},
    {"f32 all zeros", 0, 0, 2, 2, 3, 3, 0, 4, 4, 0.0f},
};

START_TEST(kernel_histogram_equals_gr_hist_add)
{
    const kcase *k = &kernel_cases[_i];
    for (int max_only = 0; max_only <= 1; max_only++) {
        gr_hist *want = malloc(sizeof *want), *got = malloc(sizeof *got);
        gr_hist_init(want, max_only);
        gr_hist_init(got, max_only);
        /* Two chunks, the second at 1000x the scale (u8 and zeros: the same kind again): the
         * first chunk's counts are regrouped when the second is merged, as batches are. */
        run_chunk(k, max_only, want, got);
        kcase bigger = *k;
        bigger.scale *= 1000.0f;
        run_chunk(&bigger, max_only, want, got);
        ck_assert_msg(want->max == got->max, "%s: max %.9g, kernels %.9g", k->name,
                      (double)want->max, (double)got->max);
        ck_assert_msg(want->nonfinite == got->nonfinite && want->total == got->total,
                      "%s: total %llu / %llu, non-finite %llu / %llu", k->name,
                      (unsigned long long)want->total, (unsigned long long)got->total,
                      (unsigned long long)want->nonfinite, (unsigned long long)got->nonfinite);
        ck_assert_msg(memcmp(want, got, sizeof *want) == 0, "%s%s: histograms differ", k->name,
                      max_only ? " (max only)" : "");
        free(want);
        free(got);
    }
}
END_TEST

START_TEST(bad_views_are_rejected)
{
    gr_calib_stats *stats = NULL;
    float *x = NULL;
    CUDA_OK(cudaMalloc((void **)&stats, sizeof *stats));
    CUDA_OK(cudaMalloc((void **)&x, 64 * sizeof *x));
    gr_kview slice_past_end = {1, 4, 2, 2, 4, 1};
    ck_assert_int_eq(gr_launch_calib_absmax(GR_DTYPE_F32, x, slice_past_end, 0, stats, 0),
                     cudaErrorInvalidValue);
    ck_assert(strstr(gr_kernels_last_failure(), "c_offset") != NULL);
    gr_kview ok = {1, 4, 2, 2, 4, 0};
    ck_assert_int_eq(gr_launch_calib_absmax(GR_DTYPE_F16, x, ok, 1, stats, 0),
                     cudaErrorNotSupported);
    ck_assert_int_eq(gr_launch_calib_hist(GR_DTYPE_F32, x, ok, 0, stats, NULL, 0),
                     cudaErrorInvalidValue);
    cudaFree(stats);
    cudaFree(x);
}
END_TEST

/* ---- the whole path against the CPU path ------------------------------------------------------- */

typedef struct photo_source {
    const char *const *paths;
    const gr_net *net;
} photo_source;

/* runtime/precision/calibrate.c's loader: the uint8 letterbox, / 255, planar. */
static gr_status load_photo(int index, float *dst, void *user)
{
    const photo_source *src = user;
    return gr_image_load_planar(src->paths[index], GR_PREPROCESS_LETTERBOX, src->net->w, src->net->h, dst);
}

static gr_model *load_model(const char *name)
{
    return gr_test_load_model(name, NULL, 0);
}

static void cpu_ranges(const gr_net *net, const char *const *paths, int n, gr_calib_method method,
                       float percentile, float *ranges, float *input)
{
    photo_source src = {paths, net};
    gr_calib_config cfg;
    gr_calib_config_default(&cfg);
    cfg.method = method;
    cfg.percentile = percentile;
    cfg.load = load_photo;
    cfg.load_user = &src;
    ck_assert_msg(gr_plan_calibrate_images(net, n, &cfg, ranges, input) == GR_OK, "%s",
                  gr_last_error());
}

static int gpu_ranges(const gr_net *net, const char *const *paths, int n, gr_calib_method method,
                      float percentile, int batch, float *ranges, float *input)
{
    gr_gpu_calib_request req = {.net = net, .paths = paths, .n_images = n, .method = method,
                                .percentile = percentile, .batch = batch};
    int used = 0;
    ck_assert_msg(gr_gpu_calibrate(&req, ranges, input, &used) == GR_OK, "%s", gr_last_error());
    return used;
}

static void compare_with_cpu(const char *model_name)
{
    gr_model *m = load_model(model_name);
    const gr_net *net = m->net;
    int L = net->n_layers;
    float *cpu = calloc((size_t)L, sizeof *cpu), *gpu = calloc((size_t)L, sizeof *gpu);
    float *layer_max = calloc((size_t)L, sizeof *layer_max);
    ck_assert(cpu && gpu && layer_max);
    for (int method = GR_CALIB_MAX; method <= GR_CALIB_MSE; method++) {
        float cpu_in = -1.0f, gpu_in = -2.0f;
        cpu_ranges(net, photos, N_PHOTOS, (gr_calib_method)method, 99.99f, cpu, &cpu_in);
        int batch = gpu_ranges(net, photos, N_PHOTOS, (gr_calib_method)method, 99.99f, 0, gpu,
                               &gpu_in);
        ck_assert_int_eq(batch, N_PHOTOS);
        const char *name = gr_calib_method_name((gr_calib_method)method);
        ck_assert_msg(cpu_in == gpu_in, "%s %s: input range %.9g on the CPU, %.9g on the GPU",
                      model_name, name, (double)cpu_in, (double)gpu_in);
        double worst = 0.0;
        int observed = 0;
        for (int l = 0; l < L; l++) {
            if (method == GR_CALIB_MAX)
                layer_max[l] = fmaxf(cpu[l], gpu[l]);
            double lmax = (double)layer_max[l];
            double tol = method == GR_CALIB_MAX ? 2e-4 * (double)cpu[l] : lmax / 512.0 + 2e-4 * lmax;
            double diff = fabs((double)cpu[l] - (double)gpu[l]);
            observed += cpu[l] > 0.0f;
            if (lmax > 0.0 && diff / lmax > worst)
                worst = diff / lmax;
            ck_assert_msg(diff <= tol,
                          "%s %s layer %d: CPU %.9g, GPU %.9g (difference %.3g, tolerance %.3g, "
                          "layer max %.9g)",
                          model_name, name, l, (double)cpu[l], (double)gpu[l], diff, tol,
                          (double)layer_max[l]);
        }
        ck_assert_msg(observed >= L / 2, "%s: only %d of %d layers have a range", model_name,
                      observed, L);
        printf("%s %-10s: %d layers, input %.6g, largest |GPU - CPU| = %.3g x the layer's max\n",
               model_name, name, L, (double)gpu_in, worst);
    }
    free(cpu);
    free(gpu);
    free(layer_max);
    gr_model_destroy(m);
}

START_TEST(yolov2_tiny_ranges_agree_with_the_cpu)
{
    compare_with_cpu("yolo");
}
END_TEST

START_TEST(shapes_ranges_agree_with_the_cpu)
{
    compare_with_cpu("shapes");
}
END_TEST

/* ---- batches ----------------------------------------------------------------------------------- */

START_TEST(partial_batches_count_only_their_images)
{
    gr_model *m = load_model("shapes");
    const gr_net *net = m->net;
    /* Five images of one grey level each, at the network's size: 100, 250, 50, 60, 70. At batch
     * 2 they run as [0 1] [2 3] [4 -], the last batch in the first instance's input again, where
     * image 1 (250) still lies in the second place. The input's 60th percentile is the 70 level
     * with the five images, the 100 level if the stale image were counted too. */
    static const int level[5] = {100, 250, 50, 60, 70};
    char dir[] = "/tmp/graphrun_gpu_calib_XXXXXX", paths[5][96];
    ck_assert(mkdtemp(dir) != NULL);
    const char *list[6] = {paths[0], paths[1], paths[2], paths[3], paths[4], NULL};
    for (int i = 0; i < 5; i++) {
        gr_image im = {net->w, net->h, 3, malloc((size_t)net->w * net->h * 3)};
        memset(im.data, level[i], (size_t)net->w * net->h * 3);
        snprintf(paths[i], sizeof paths[i], "%s/level%d.png", dir, i);
        ck_assert_msg(gr_image_write(&im, paths[i]) == GR_OK, "%s", gr_last_error());
        free(im.data);
    }
    float *ranges = calloc((size_t)net->n_layers, sizeof *ranges);
    float *ranges5 = calloc((size_t)net->n_layers, sizeof *ranges5);
    float input = 0.0f, input5 = 0.0f, cpu_input = 0.0f, stale_input = 0.0f;
    ck_assert_int_eq(gpu_ranges(net, list, 5, GR_CALIB_PERCENTILE, 60.0f, 2, ranges, &input), 2);
    cpu_ranges(net, list, 5, GR_CALIB_PERCENTILE, 60.0f, ranges5, &cpu_input);
    const char *stale[7] = {paths[0], paths[1], paths[2], paths[3], paths[4], paths[1], NULL};
    cpu_ranges(net, stale, 6, GR_CALIB_PERCENTILE, 60.0f, ranges5, &stale_input);
    ck_assert_msg(stale_input > cpu_input, "the test cannot tell: %.6g with the stale image, %.6g "
                  "without", (double)stale_input, (double)cpu_input);
    ck_assert_msg(input == cpu_input, "60th percentile of the input %.6g on the GPU, %.6g on the "
                  "CPU (%.6g if the stale image counted)", (double)input, (double)cpu_input,
                  (double)stale_input);
    /* Batch 2 (two runs, one partial) against batch 5 (one run): MAX within 2e-4 (cuBLAS may
     * sum in another order at another batch). */
    ck_assert_int_eq(gpu_ranges(net, photos, N_PHOTOS, GR_CALIB_MAX, 0.0f, 2, ranges, &input), 2);
    ck_assert_int_eq(gpu_ranges(net, photos, N_PHOTOS, GR_CALIB_MAX, 0.0f, 5, ranges5, &input5),
                     5);
    ck_assert(input == input5);
    for (int l = 0; l < net->n_layers; l++)
        ck_assert_msg(fabsf(ranges[l] - ranges5[l]) <= 2e-4f * ranges5[l],
                      "layer %d: batch 2 %.9g, batch 5 %.9g", l, (double)ranges[l],
                      (double)ranges5[l]);
    for (int i = 0; i < 5; i++)
        remove(paths[i]);
    rmdir(dir);
    free(ranges);
    free(ranges5);
    gr_model_destroy(m);
}
END_TEST

START_TEST(a_bad_image_fails_with_its_name)
{
    gr_model *m = load_model("shapes");
    const char *list[] = {"data/dog.jpg", "data/no_such_photo.jpg", NULL};
    float *ranges = calloc((size_t)m->net->n_layers, sizeof *ranges), input;
    gr_gpu_calib_request req = {.net = m->net, .paths = list, .n_images = 2};
    ck_assert_int_ne(gr_gpu_calibrate(&req, ranges, &input, NULL), GR_OK);
    ck_assert_msg(strstr(gr_last_error(), "no_such_photo.jpg") != NULL, "%s", gr_last_error());
    free(ranges);
    gr_model_destroy(m);
}
END_TEST

/* ---- the engine -------------------------------------------------------------------------------- */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    static char bufs[2][65536];
    static int which;
    char *buf = bufs[which++ % 2];
    size_t n = fread(buf, 1, sizeof bufs[0] - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void build_int8(const gr_model *m, gr_device device, gr_device calib_device,
                       const char *cache, const char *want_notice)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = device;
    eo.precision = GR_PREC_INT8;
    eo.calib_device = calib_device;
    eo.calib_cache = cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(strstr(gr_engine_notice(e), "calibration: 5 images in ") != NULL &&
                      strstr(gr_engine_notice(e), want_notice) != NULL,
                  "notice '%s', want '%s'", gr_engine_notice(e), want_notice);
    printf("%s\n", gr_engine_notice(e));
    gr_engine_destroy(e);
}

START_TEST(engines_calibrate_where_asked)
{
    gr_model *m = load_model("yolo");
    char gpu_cache[64], cpu_engine_cache[64], cpu_cache[64];
    snprintf(gpu_cache, sizeof gpu_cache, "/tmp/graphrun_gpu_calib_%d.a", (int)getpid());
    snprintf(cpu_engine_cache, sizeof cpu_engine_cache, "/tmp/graphrun_gpu_calib_%d.b",
             (int)getpid());
    snprintf(cpu_cache, sizeof cpu_cache, "/tmp/graphrun_gpu_calib_%d.c", (int)getpid());
    remove(gpu_cache);
    remove(cpu_engine_cache);
    remove(cpu_cache);
    build_int8(m, GR_DEVICE_GPU, GR_DEVICE_AUTO, gpu_cache, "(GPU, batch 5)");
    build_int8(m, GR_DEVICE_CPU, GR_DEVICE_GPU, cpu_engine_cache, "(GPU, batch 5)");
    ck_assert_msg(strcmp(read_file(gpu_cache), read_file(cpu_engine_cache)) == 0,
                  "the same GPU calibration wrote two different caches");
    build_int8(m, GR_DEVICE_GPU, GR_DEVICE_CPU, cpu_cache, "(CPU)");
    remove(gpu_cache);
    remove(cpu_engine_cache);
    remove(cpu_cache);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_calib"))
        return 77;
    const char *env = getenv("GR_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("gpu_calib: seed %" PRIu64 " (GR_TEST_SEED=%" PRIu64 " repeats this run)\n", test_seed,
           test_seed);
    gr_rng_seed(&rng, test_seed);
    Suite *s = suite_create("gpu_calib");
    TCase *tc = tcase_create("gpu_calib");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, kernel_histogram_equals_gr_hist_add, 0,
                        (int)(sizeof kernel_cases / sizeof kernel_cases[0]));
    tcase_add_test(tc, bad_views_are_rejected);
    tcase_add_test(tc, yolov2_tiny_ranges_agree_with_the_cpu);
    tcase_add_test(tc, shapes_ranges_agree_with_the_cpu);
    tcase_add_test(tc, partial_batches_count_only_their_images);
    tcase_add_test(tc, a_bad_image_fails_with_its_name);
    tcase_add_test(tc, engines_calibrate_where_asked);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    return failed == 0 ? 0 : 1;
}
