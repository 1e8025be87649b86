/* INT8 calibration: the histogram collector (binning exact under growth and merging), each
 * method's threshold on distributions whose answer is known or bounded analytically, parallel
 * calibration identical bit for bit for any thread count, the calibration cache's key (method,
 * image set, old format), and the engine's non-finite output report. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "planner/calib.h"
#include "planner/calib_hist.h"
#include "tests/support/plan_nets.h"

static gr_hist *hist_new(void)
{
    gr_hist *h = malloc(sizeof *h);
    gr_hist_init(h, 0);
    return h;
}

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* |x| sorted, for exact percentiles. */
static float exact_percentile(const float *v, size_t n, float percentile)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(v[i]);
    qsort(a, n, sizeof *a, compare_float);
    size_t rank = (size_t)ceil((double)percentile / 100.0 * (double)n);
    float r = a[rank < 1 ? 0 : rank - 1];
    free(a);
    return r;
}

START_TEST(growth_and_merging_are_exact)
{
    /* Values spanning 2^-10 .. 2^10 added in one piece, in chunks that force the range to grow
     * many times, and split over three collectors merged in two orders: every count the same. */
    enum { N = 200000 };
    float *v = malloc(N * sizeof *v);
    gr_rng r;
    gr_rng_seed(&r, 7);
    for (int i = 0; i < N; i++)
        v[i] = (gr_rng_uniform(&r) - 0.5f) * exp2f(20.0f * (float)i / N - 10.0f);
    gr_hist *whole = hist_new(), *grown = hist_new(), *a = hist_new(), *b = hist_new(),
            *c = hist_new();
    gr_hist_add(whole, v, N);
    for (int i = 0; i < N; i += 1000)
        gr_hist_add(grown, v + i, 1000);
    gr_hist_add(a, v + N / 2, N / 4);
    gr_hist_add(b, v, N / 2);
    gr_hist_add(c, v + 3 * (N / 4), N - 3 * (N / 4));
    gr_hist *ab = hist_new();
    gr_hist_merge(ab, c);
    gr_hist_merge(ab, a);
    gr_hist_merge(ab, b);
    gr_hist_merge(a, b);
    gr_hist_merge(a, c);
    ck_assert(memcmp(whole, grown, sizeof *whole) == 0);
    ck_assert(memcmp(whole, a, sizeof *whole) == 0);
    ck_assert(memcmp(whole, ab, sizeof *whole) == 0);
    ck_assert_uint_eq(whole->total, N);
    /* The maximum sits in the upper half of the bins. */
    ck_assert((double)whole->max >= gr_hist_bin_width(whole) * GR_HIST_BINS / 2);
    ck_assert((double)whole->max < gr_hist_bin_width(whole) * GR_HIST_BINS);
    free(v);
    free(whole);
    free(grown);
    free(a);
    free(b);
    free(c);
    free(ab);
}
END_TEST

/* What the GPU kernels of kernels/calib.cu compute for one chunk of values, written out plainly:
 * the chunk's largest finite |x|, then every finite |x| binned at `exponent` (0: the chunk's own,
 * frexpf's exponent of its max) by (int)(|x| * 2^(11 - exponent)) in double. */
static int bin_chunk(const float *v, size_t n, int exponent, uint64_t *counts, float *max,
                     uint64_t *total, uint64_t *nonfinite)
{
    *max = 0.0f;
    *total = *nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(v[i]);
        if (!isfinite(a)) {
            ++*nonfinite;
            continue;
        }
        ++*total;
        *max = fmaxf(*max, a);
    }
    if (exponent == 0)
        frexpf(*max, &exponent);
    memset(counts, 0, GR_HIST_BINS * sizeof *counts);
    double to_bin = *max > 0.0f ? ldexp(1.0, GR_HIST_LOG2_BINS - exponent) : 0.0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(v[i]);
        if (isfinite(a))
            counts[(int)((double)a * to_bin)]++;
    }
    return exponent;
}

START_TEST(merging_kernel_style_counts_equals_adding_values)
{
    /* Chunks of growing, shrinking, all-zero and non-finite values, each binned at its own
     * exponent (as the GPU does per batch) and merged with gr_hist_merge_bins: the same
     * histogram, bit for bit, as gr_hist_add of every value; also when a chunk is binned at a
     * larger exponent that the final histogram reaches anyway. */
    enum { N = 120000, CHUNK = 10000 };
    float *v = malloc(N * sizeof *v);
    gr_rng r;
    gr_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        float scale = exp2f(12.0f * sinf((float)i * 3e-4f) - 3.0f);
        v[i] = (gr_rng_uniform(&r) - 0.5f) * scale;
    }
    for (int i = 2 * CHUNK; i < 3 * CHUNK; i++)
        v[i] = 0.0f;
    v[5 * CHUNK + 7] = NAN;
    v[7 * CHUNK + 1] = -INFINITY;
    uint64_t *counts = malloc(GR_HIST_BINS * sizeof *counts);
    for (int max_only = 0; max_only <= 1; max_only++) {
        gr_hist *added = malloc(sizeof *added), *merged = malloc(sizeof *merged),
                *merged_high = malloc(sizeof *merged_high);
        gr_hist_init(added, max_only);
        gr_hist_init(merged, max_only);
        gr_hist_init(merged_high, max_only);
        gr_hist_add(added, v, N);
        for (int c = 0; c < N / CHUNK; c++) {
            float max;
            uint64_t total, nonfinite;
            int e = bin_chunk(v + c * CHUNK, CHUNK, 0, counts, &max, &total, &nonfinite);
            ck_assert_int_eq(gr_hist_merge_bins(merged, max_only ? NULL : counts, e, max, total,
                                                nonfinite),
                             GR_OK);
            /* the whole set's exponent: at least every chunk's */
            int high = bin_chunk(v + c * CHUNK, CHUNK, added->exponent, counts, &max, &total,
                                 &nonfinite);
            ck_assert_int_eq(gr_hist_merge_bins(merged_high, counts, high, max, total, nonfinite),
                             GR_OK);
        }
        ck_assert_uint_eq(added->nonfinite, 2);
        ck_assert(memcmp(added, merged, sizeof *added) == 0);
        ck_assert(memcmp(added, merged_high, sizeof *added) == 0);
        free(added);
        free(merged);
        free(merged_high);
    }
    /* Counts that cannot come from such values are refused, not merged. */
    gr_hist *h = hist_new();
    memset(counts, 0, GR_HIST_BINS * sizeof *counts);
    counts[5] = 3;
    ck_assert_int_eq(gr_hist_merge_bins(h, counts, 2, 3.0f, 4, 0), GR_ERR_INTERNAL); /* sum */
    ck_assert(strstr(gr_last_error(), "3 values binned, 4 counted") != NULL);
    ck_assert_int_eq(gr_hist_merge_bins(h, counts, 1, 3.0f, 3, 0), GR_ERR_INTERNAL); /* 3 >= 2^1 */
    ck_assert_int_eq(gr_hist_merge_bins(h, counts, 2, NAN, 3, 0), GR_ERR_INTERNAL);
    ck_assert_int_eq(gr_hist_merge_bins(h, counts, 2, 0.0f, 3, 0), GR_ERR_INTERNAL); /* not bin 0 */
    ck_assert_uint_eq(h->total, 0);
    free(h);
    free(counts);
    free(v);
}
END_TEST

START_TEST(nonfinite_values_are_counted_not_binned)
{
    float v[] = {1.0f, NAN, INFINITY, -2.0f, -INFINITY, 0.5f};
    gr_hist *h = hist_new();
    gr_hist_add(h, v, 6);
    ck_assert_uint_eq(h->total, 3);
    ck_assert_uint_eq(h->nonfinite, 3);
    ck_assert(h->max == 2.0f);
    /* all zero: every method gives 0 */
    gr_hist *z = hist_new();
    float zeros[4] = {0};
    gr_hist_add(z, zeros, 4);
    for (int m = GR_CALIB_MAX; m <= GR_CALIB_MSE; m++)
        ck_assert(gr_hist_threshold(z, (gr_calib_method)m, 99.0f) == 0.0f);
    free(h);
    free(z);
}
END_TEST

START_TEST(uniform_data_thresholds_near_the_max)
{
    /* |x| uniform on [0, 1): nothing is an outlier, so clipping only loses. MSE's continuous
     * optimum is where the clipping cost (1-T)^2 meets the rounding cost's slope 2T/(12*127^2):
     * T = 0.9968. KL: folding any tail into the last bin makes a spike Q cannot follow, so the
     * minimum is within sampling noise of the top (~5% per bin at 488 values a bin); 0.95 max is
     * the bound for both. Percentile: within one bin width (1/2048) above the exact value. */
    enum { N = 1000000 };
    float *v = malloc(N * sizeof *v);
    gr_rng r;
    gr_rng_seed(&r, 11);
    for (int i = 0; i < N; i++)
        v[i] = 2.0f * gr_rng_uniform(&r) - 1.0f;
    gr_hist *h = hist_new();
    gr_hist_add(h, v, N);
    float max = gr_hist_threshold(h, GR_CALIB_MAX, 0.0f);
    float entropy = gr_hist_threshold(h, GR_CALIB_ENTROPY, 0.0f);
    float mse = gr_hist_threshold(h, GR_CALIB_MSE, 0.0f);
    float p99 = gr_hist_threshold(h, GR_CALIB_PERCENTILE, 99.0f);
    float exact99 = exact_percentile(v, N, 99.0f);
    printf("uniform: max %.5f entropy %.5f mse %.5f p99 %.5f (exact %.5f)\n", (double)max,
           (double)entropy, (double)mse, (double)p99, (double)exact99);
    ck_assert(max > 0.999f && max < 1.0f);
    ck_assert(entropy >= 0.95f * max && entropy <= max);
    ck_assert(mse >= 0.95f * max && mse <= max);
    ck_assert(p99 >= exact99 && p99 <= exact99 + 1.0f / 2048.0f);
    free(v);
    free(h);
}
END_TEST

START_TEST(one_huge_outlier_moves_only_the_max)
{
    /* N(0, 1) samples and one value of 1000: the histogram spans [0, 1024) in bins of 0.5.
     *   max        = 1000 exactly.
     *   percentile 99.99 of |N(0,1)| is 3.89: at most one bin (0.5) above, < 4.5.
     *   entropy    the Gaussian fills 11 bins. Candidates of 128..255 bins keep one bin per
     *              level, so Q = P but for the folded outlier (1 value in 4e6) and their KLs
     *              differ only in the smoothing terms; from 256 bins on, levels merge bins and
     *              the Gaussian's shape is lost (KL larger by orders). So the answer is at most
     *              (255 + 0.5) * 0.5 = 127.75: far below the outlier, bound < 128.
     *   MSE        the outlier's clipping cost (1000 - T)^2 / N against the rounding cost
     *              T^2 / (12 * 127^2): optimum T = 1000 / (1 + N / 193548) = 46 for N = 4e6;
     *              bound (4, 100): above the Gaussian's tail, well below the outlier. */
    enum { N = 4000000 };
    float *v = malloc((N + 1) * sizeof *v);
    gr_rng r;
    gr_rng_seed(&r, 13);
    for (int i = 0; i < N; i++)
        v[i] = gr_rng_normal(&r);
    v[N] = -1000.0f;
    gr_hist *h = hist_new();
    gr_hist_add(h, v, N + 1);
    float max = gr_hist_threshold(h, GR_CALIB_MAX, 0.0f);
    float pct = gr_hist_threshold(h, GR_CALIB_PERCENTILE, 99.99f);
    float entropy = gr_hist_threshold(h, GR_CALIB_ENTROPY, 0.0f);
    float mse = gr_hist_threshold(h, GR_CALIB_MSE, 0.0f);
    printf("gaussian + outlier: max %.3f p99.99 %.3f entropy %.3f mse %.3f\n", (double)max,
           (double)pct, (double)entropy, (double)mse);
    ck_assert(gr_hist_bin_width(h) == 0.5);
    ck_assert(max == 1000.0f);
    ck_assert(pct > 3.5f && pct < 4.5f);
    ck_assert(entropy < 128.0f);
    ck_assert(mse > 4.0f && mse < 100.0f);
    free(v);
    free(h);
}
END_TEST

START_TEST(a_point_mass_keeps_its_value)
{
    /* Every value 1.0: entropy's only candidate with a non-empty Q is the one holding the mass
     * (KL 0 there); MSE's best is the edge at the bin's start, where clipping costs 3 * (half a
     * bin)^2 and nothing is rounded. Both are capped at the max: exactly 1. */
    float one[3] = {1.0f, -1.0f, 1.0f};
    gr_hist *h = hist_new();
    gr_hist_add(h, one, 3);
    ck_assert(gr_hist_threshold(h, GR_CALIB_ENTROPY, 0.0f) == 1.0f);
    ck_assert(gr_hist_threshold(h, GR_CALIB_MSE, 0.0f) == 1.0f);
    ck_assert(gr_hist_threshold(h, GR_CALIB_PERCENTILE, 50.0f) == 1.0f);
    free(h);
}
END_TEST

START_TEST(method_names_round_trip)
{
    for (int m = GR_CALIB_MAX; m <= GR_CALIB_MSE; m++) {
        gr_calib_method back;
        ck_assert_int_eq(gr_calib_method_parse(gr_calib_method_name((gr_calib_method)m), &back),
                         GR_OK);
        ck_assert_int_eq(back, m);
    }
    gr_calib_method x;
    ck_assert_int_eq(gr_calib_method_parse("kl", &x), GR_ERR_INVALID_ARGUMENT);
    ck_assert(strstr(gr_last_error(), "'kl'") != NULL);
}
END_TEST

/* Deterministic pseudo-photos for the calibration images. */
static gr_status synthetic_image(int index, float *dst, void *user)
{
    const gr_net *net = user;
    size_t n = (size_t)net->c * (size_t)net->h * (size_t)net->w;
    gr_rng r;
    gr_rng_seed(&r, 100 + (uint64_t)index);
    for (size_t i = 0; i < n; i++)
        dst[i] = 0.5f + 0.4f * sinf(0.05f * (float)i * (float)(index + 1)) +
                 0.1f * gr_rng_uniform(&r) - 0.05f;
    return GR_OK;
}

static int progress_calls, progress_last;
static void count_progress(int done, int total, void *user)
{
    (void)user;
    progress_calls++;
    ck_assert(done >= 1 && done <= total);
    progress_last = done;
}

START_TEST(any_thread_count_gives_the_same_ranges)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at("yolov2-tiny-voc.cfg", 64, &net), GR_OK);
    enum { IMAGES = 7 };
    int L = net->n_layers;
    float *first = malloc((size_t)(L + 1) * sizeof *first);
    float *ranges = malloc((size_t)(L + 1) * sizeof *ranges);
    static const int threads[] = {1, 2, 3, 8};
    for (int m = GR_CALIB_MAX; m <= GR_CALIB_MSE; m++) {
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            gr_calib_config cfg;
            gr_calib_config_default(&cfg);
            cfg.method = (gr_calib_method)m;
            cfg.threads = threads[t];
            cfg.load = synthetic_image;
            cfg.load_user = net;
            cfg.progress = count_progress;
            progress_calls = 0;
            float *out = t == 0 ? first : ranges;
            ck_assert_msg(gr_plan_calibrate_images(net, IMAGES, &cfg, out, &out[L]) == GR_OK, "%s",
                          gr_last_error());
            ck_assert_int_eq(progress_calls, IMAGES);
            ck_assert_int_eq(progress_last, IMAGES);
            if (t > 0)
                ck_assert_msg(memcmp(first, ranges, (size_t)(L + 1) * sizeof *ranges) == 0,
                              "method %s: %d threads differ from 1",
                              gr_calib_method_name((gr_calib_method)m), threads[t]);
        }
        for (int l = 0; l < L; l++)
            if (net->layers[l].p.op == GR_OP_CONV)
                ck_assert(first[l] > 0.0f);
    }
    free(first);
    free(ranges);
    gr_net_free(net);
}
END_TEST

static gr_status failing_image(int index, float *dst, void *user)
{
    (void)dst;
    (void)user;
    if (index == 3)
        return gr_fail(GR_ERR_IO, "image %d: cannot read", index);
    return GR_OK;
}

START_TEST(a_failing_image_fails_the_calibration_with_its_message)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at("yolov2-tiny-voc.cfg", 32, &net), GR_OK);
    float *ranges = malloc((size_t)(net->n_layers + 1) * sizeof *ranges);
    gr_calib_config cfg;
    gr_calib_config_default(&cfg);
    cfg.threads = 3;
    cfg.load = failing_image;
    ck_assert_int_eq(gr_plan_calibrate_images(net, 6, &cfg, ranges, &ranges[net->n_layers]),
                     GR_ERR_IO);
    ck_assert_str_eq(gr_last_error(), "image 3: cannot read");
    free(ranges);
    gr_net_free(net);
}
END_TEST

/* ---- engine: cache key, non-finite outputs ------------------------------------------------ */

static const char small_cfg[] = "[net]\nwidth=32\nheight=32\nchannels=3\n"
                                "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\n"
                                "pad=1\nactivation=leaky\n"
                                "[maxpool]\nsize=2\nstride=2\n"
                                "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\n"
                                "pad=1\nactivation=leaky\n"
                                "[convolutional]\nfilters=4\nsize=1\nstride=1\npad=0\n"
                                "activation=linear\n";

static gr_model *small_model(char *cfg_path)
{
    strcpy(cfg_path, "/tmp/graphrun_calib_cfg_XXXXXX");
    int fd = mkstemp(cfg_path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, small_cfg, strlen(small_cfg)) == (ssize_t)strlen(small_cfg));
    close(fd);
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = NULL;
    mo.cfg_path = cfg_path;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static gr_status build_int8(gr_model *m, gr_calib_method method, const char *const *images,
                            const char *cache, gr_engine **e)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = GR_PREC_INT8;
    eo.calib_method = method;
    eo.calib_images = images;
    eo.calib_cache = cache;
    return gr_engine_build(m, &eo, e);
}

/* "calibration: N images in X s (DEVICE)" and nothing after it. */
static int notice_line_is_timing(const char *line, int images, const char *device)
{
    int n = 0, end = 0;
    double seconds = -1.0;
    char tail[64] = "";
    if (sscanf(line, "calibration: %d images in %lf s %63[^\n]%n", &n, &seconds, tail, &end) != 3)
        return 0;
    return n == images && seconds >= 0.0 && strcmp(tail, device) == 0 && line[end] == '\0';
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert(f != NULL);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A path no file has yet (a mkstemp template, its file removed): where a cache will be written. */
static void fresh_path(char *template)
{
    int fd = mkstemp(template);
    ck_assert(fd >= 0);
    close(fd);
    remove(template);
}

START_TEST(cache_key_covers_method_and_image_set)
{
    char cfg_path[64], cache[] = "/tmp/graphrun_calib_cache_XXXXXX";
    gr_model *m = small_model(cfg_path);
    fresh_path(cache);
    static const char *const two[] = {"data/dog.jpg", "data/eagle.jpg", NULL};
    static const char *const other[] = {"data/dog.jpg", "data/horses.jpg", NULL};
    gr_engine *e = NULL;
    ck_assert_msg(build_int8(m, GR_CALIB_ENTROPY, two, cache, &e) == GR_OK, "%s", gr_last_error());
    /* A calibration that ran says so in one notice line: count, time, device. */
    ck_assert_msg(notice_line_is_timing(gr_engine_notice(e), 2, "(CPU)"), "notice '%s'",
                  gr_engine_notice(e));
    gr_engine_destroy(e);
    const char *text = read_text(cache);
    ck_assert(strstr(text, "graphrun-calibration 3\n") != NULL);
    ck_assert(strstr(text, "method entropy\n") != NULL);
    ck_assert(strstr(text, "images 2 ") != NULL);
    /* Same model, method and images: the cache is used as is (an engine builds from it). */
    ck_assert_int_eq(build_int8(m, GR_CALIB_ENTROPY, two, cache, &e), GR_OK);
    ck_assert_str_eq(gr_engine_notice(e), "");
    gr_engine_destroy(e);
    /* Another method, another image set: rejected, naming what differs. */
    ck_assert_int_eq(build_int8(m, GR_CALIB_MSE, two, cache, &e), GR_ERR_PARSE);
    ck_assert(strstr(gr_last_error(), "method 'entropy'") != NULL);
    ck_assert_int_eq(build_int8(m, GR_CALIB_ENTROPY, other, cache, &e), GR_ERR_PARSE);
    ck_assert(strstr(gr_last_error(), "another image set") != NULL);
    /* A version-1 cache (no image set) is stale: ignored with a notice, then replaced. */
    FILE *f = fopen(cache, "w");
    fprintf(f, "graphrun-calibration 1\nmodel x 0123456789abcdef\nmethod max\nimages 5\n"
               "input 1\nlayer 0 1\n");
    fclose(f);
    ck_assert_msg(build_int8(m, GR_CALIB_MAX, two, cache, &e) == GR_OK, "%s", gr_last_error());
    /* Two lines: the stale cache, then the calibration that replaced it. */
    const char *notice = gr_engine_notice(e), *newline = strchr(notice, '\n');
    ck_assert(newline != NULL && strstr(notice, "older graphrun") < newline);
    ck_assert_msg(notice_line_is_timing(newline + 1, 2, "(CPU)"), "notice '%s'", notice);
    gr_engine_destroy(e);
    ck_assert(strstr(read_text(cache), "graphrun-calibration 3\n") != NULL);
    /* A corrupt one (a range edited to nan, so the checksum fails): the same, the notice naming
     * the file and line; the rewritten cache is then used as is. */
    char edited[8192];
    snprintf(edited, sizeof edited, "%s", read_text(cache));
    char *range = strstr(edited, "\nlayer 0 ");
    ck_assert(range != NULL);
    memcpy(range + 9, "nan\n", 4);
    f = fopen(cache, "w");
    fputs(edited, f);
    fclose(f);
    ck_assert_msg(build_int8(m, GR_CALIB_MAX, two, cache, &e) == GR_OK, "%s", gr_last_error());
    notice = gr_engine_notice(e);
    ck_assert_msg(strstr(notice, cache) && strstr(notice, "corrupt calibration cache"),
                  "notice '%s'", notice);
    gr_engine_destroy(e);
    ck_assert_int_eq(build_int8(m, GR_CALIB_MAX, two, cache, &e), GR_OK);
    ck_assert_str_eq(gr_engine_notice(e), "");
    gr_engine_destroy(e);
    remove(cache);
    remove(cfg_path);
    gr_model_destroy(m);
}
END_TEST

/* calib_max_images (runtime.h): the first N images only. Calibrating 2 of 3 records the same
 * image set as calibrating those 2 (the cache of one serves the other), not the 3's; 0 is every
 * image; a negative N is refused naming the option. */
START_TEST(calib_max_images_takes_the_first_n)
{
    char cfg_path[64], cache[] = "/tmp/graphrun_calib_max_XXXXXX";
    gr_model *m = small_model(cfg_path);
    fresh_path(cache);
    static const char *const three[] = {"data/dog.jpg", "data/eagle.jpg", "data/horses.jpg",
                                        NULL};
    static const char *const two[] = {"data/dog.jpg", "data/eagle.jpg", NULL};
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    ck_assert_int_eq(eo.calib_max_images, 0);
    eo.device = GR_DEVICE_CPU;
    eo.precision = GR_PREC_INT8;
    eo.calib_images = three;
    eo.calib_cache = cache;
    eo.calib_max_images = 2;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    ck_assert_msg(notice_line_is_timing(gr_engine_notice(e), 2, "(CPU)"), "notice '%s'",
                  gr_engine_notice(e));
    gr_engine_destroy(e);
    ck_assert(strstr(read_text(cache), "images 2 ") != NULL);
    /* The first two, given as such: the cache is theirs. */
    ck_assert_int_eq(build_int8(m, GR_CALIB_MAX, two, cache, &e), GR_OK);
    ck_assert_str_eq(gr_engine_notice(e), "");
    gr_engine_destroy(e);
    /* All three: another image set. */
    ck_assert_int_eq(build_int8(m, GR_CALIB_MAX, three, cache, &e), GR_ERR_PARSE);
    ck_assert(strstr(gr_last_error(), "another image set") != NULL);
    remove(cache);
    /* 0 and N above the count: every image. */
    eo.calib_cache = NULL;
    for (int n = 0; n <= 5; n += 5) {
        eo.calib_max_images = n;
        ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
        ck_assert_msg(notice_line_is_timing(gr_engine_notice(e), 3, "(CPU)"), "notice '%s'",
                      gr_engine_notice(e));
        gr_engine_destroy(e);
    }
    eo.calib_max_images = -1;
    ck_assert_int_eq(gr_engine_build(m, &eo, &e), GR_ERR_INVALID_ARGUMENT);
    ck_assert(strstr(gr_last_error(), "engine option calib_max_images=-1") != NULL);
    remove(cfg_path);
    gr_model_destroy(m);
}
END_TEST

START_TEST(fp16_overflow_is_reported_not_silent)
{
    /* Inputs of 60000 (still finite in fp16, max 65504) through a 3x3x3 conv and batch norm:
     * sums of 27 such products exceed fp16's range, so the fp16 engine's outputs hold Inf/NaN
     * while fp32 stays finite. */
    char cfg_path[64];
    gr_model *m = small_model(cfg_path);
    size_t n_in = 3 * 32 * 32;
    float *input = malloc(n_in * sizeof *input);
    for (size_t i = 0; i < n_in; i++)
        input[i] = 60000.0f;
    size_t bad[2];
    for (int p = 0; p < 2; p++) {
        gr_engine_options eo;
        gr_engine_options_default(&eo);
        eo.device = GR_DEVICE_CPU;
        eo.precision = p ? GR_PREC_FP16 : GR_PREC_FP32;
        gr_engine *e = NULL;
        ck_assert_int_eq(gr_engine_build(m, &eo, &e), GR_OK);
        ck_assert_int_eq(gr_engine_output_nonfinite(e, 0, &bad[p]), GR_ERR_STATE);
        ck_assert_int_eq(gr_engine_run_f32(e, input), GR_OK); /* default: not an error */
        ck_assert_int_eq(gr_engine_output_nonfinite(e, 0, &bad[p]), GR_OK);
        gr_engine_destroy(e);
        /* Opted in: the run says so, and its outputs are still there. */
        eo.nonfinite_is_error = 1;
        ck_assert_int_eq(gr_engine_build(m, &eo, &e), GR_OK);
        gr_status st = gr_engine_run_f32(e, input);
        ck_assert_int_eq(st, p ? GR_ERR_NUMERIC : GR_OK);
        const float *out = NULL;
        ck_assert_int_eq(gr_engine_output(e, 0, &out), GR_OK);
        if (p)
            ck_assert(strstr(gr_engine_last_error(e), "non-finite") != NULL);
        gr_engine_destroy(e);
    }
    printf("non-finite outputs: fp32 %zu, fp16 %zu\n", bad[0], bad[1]);
    ck_assert_uint_eq(bad[0], 0);
    ck_assert_uint_gt(bad[1], 0);
    free(input);
    remove(cfg_path);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calib");
    TCase *tc = tcase_create("calib");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, growth_and_merging_are_exact);
    tcase_add_test(tc, merging_kernel_style_counts_equals_adding_values);
    tcase_add_test(tc, nonfinite_values_are_counted_not_binned);
    tcase_add_test(tc, uniform_data_thresholds_near_the_max);
    tcase_add_test(tc, one_huge_outlier_moves_only_the_max);
    tcase_add_test(tc, a_point_mass_keeps_its_value);
    tcase_add_test(tc, method_names_round_trip);
    tcase_add_test(tc, any_thread_count_gives_the_same_ranges);
    tcase_add_test(tc, a_failing_image_fails_the_calibration_with_its_message);
    tcase_add_test(tc, cache_key_covers_method_and_image_set);
    tcase_add_test(tc, calib_max_images_takes_the_first_n);
    tcase_add_test(tc, fp16_overflow_is_reported_not_silent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
