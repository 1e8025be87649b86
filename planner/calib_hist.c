/* Range and histogram collector for int8 calibration (see calib_hist.h for the binning invariant
 * and the methods). */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "planner/calib_hist.h"

void gr_hist_init(gr_hist *h, int max_only)
{
    memset(h, 0, sizeof *h);
    h->max_only = max_only;
}

/* Grow the range to [0, 2^exponent): bins sum pairwise once per doubling. */
static void grow(gr_hist *h, int exponent)
{
    int shift = exponent - h->exponent;
    if (h->max > 0.0f && shift > 0) {
        for (int k = 1; k < GR_HIST_BINS; k++) {
            uint64_t c = h->count[k];
            h->count[k] = 0;
            h->count[shift >= GR_HIST_LOG2_BINS ? 0 : k >> shift] += c;
        }
    }
    h->exponent = exponent;
}

void gr_hist_add(gr_hist *h, const float *x, size_t n)
{
    float batch_max = 0.0f;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isfinite(a)) {
            batch_max = fmaxf(batch_max, a);
            finite++;
        }
    }
    h->nonfinite += n - finite;
    h->total += finite;
    if (batch_max > h->max) {
        int exponent;
        frexpf(batch_max, &exponent); /* batch_max < 2^exponent, >= 2^(exponent - 1) */
        if (h->max == 0.0f || exponent > h->exponent)
            grow(h, exponent);
        h->max = batch_max;
    }
    if (h->max_only)
        return;
    if (h->max == 0.0f) {
        h->count[0] += finite; /* all zeros so far: bin 0 whatever the range becomes */
        return;
    }
    /* a * 2^(bins_log2 - exponent) is exact in double, so the bin is floor of the exact ratio. */
    double to_bin = ldexp(1.0, GR_HIST_LOG2_BINS - h->exponent);
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isfinite(a))
            h->count[(int)((double)a * to_bin)]++;
    }
}

void gr_hist_merge(gr_hist *dst, const gr_hist *src)
{
    gr_hist grown;
    if (src->max > 0.0f) {
        /* Bring both to the larger range; an all-zero histogram has counts in bin 0 only, which
         * any range keeps. */
        if (dst->max == 0.0f)
            dst->exponent = src->exponent;
        else if (src->exponent > dst->exponent)
            grow(dst, src->exponent);
        if (src->exponent < dst->exponent) {
            grown = *src;
            grow(&grown, dst->exponent);
            src = &grown;
        }
    }
    for (int k = 0; k < GR_HIST_BINS; k++)
        dst->count[k] += src->count[k];
    dst->total += src->total;
    dst->nonfinite += src->nonfinite;
    dst->max = fmaxf(dst->max, src->max);
}

gr_status gr_hist_merge_bins(gr_hist *h, const uint64_t *counts, int exponent, float max,
                             uint64_t total, uint64_t nonfinite)
{
    if (!h || !(max >= 0.0f) || !isfinite(max))
        return gr_fail(GR_ERR_INTERNAL, "gr_hist_merge_bins: bad histogram (max %g)", (double)max);
    gr_hist src;
    gr_hist_init(&src, h->max_only);
    if (!h->max_only) {
        if (!counts)
            return gr_fail(GR_ERR_INTERNAL, "gr_hist_merge_bins: no counts");
        int max_exponent = 0;
        frexpf(max, &max_exponent);
        if (max > 0.0f && exponent < max_exponent)
            return gr_fail(GR_ERR_INTERNAL,
                           "gr_hist_merge_bins: max %g does not lie below 2^%d", (double)max,
                           exponent);
        uint64_t sum = 0;
        for (int k = 0; k < GR_HIST_BINS; k++)
            sum += counts[k];
        if (sum != total || (max == 0.0f && counts[0] != total))
            return gr_fail(GR_ERR_INTERNAL,
                           "gr_hist_merge_bins: %llu values binned, %llu counted (max %g)",
                           (unsigned long long)sum, (unsigned long long)total, (double)max);
        memcpy(src.count, counts, sizeof src.count);
    }
    src.total = total;
    src.nonfinite = nonfinite;
    src.max = max;
    src.exponent = max > 0.0f ? exponent : 0;
    gr_hist_merge(h, &src);
    return GR_OK;
}

double gr_hist_bin_width(const gr_hist *h)
{
    return h->max > 0.0f ? ldexp(1.0, h->exponent - GR_HIST_LOG2_BINS) : 0.0;
}

/* Bins [0, used) hold every value. */
static int used_bins(const gr_hist *h)
{
    int used = GR_HIST_BINS;
    while (used > 1 && h->count[used - 1] == 0)
        used--;
    return used;
}

static float percentile_threshold(const gr_hist *h, float percentile)
{
    double rank = ceil((double)percentile / 100.0 * (double)h->total);
    uint64_t want = rank < 1.0 ? 1 : (uint64_t)rank, seen = 0;
    for (int k = 0; k < GR_HIST_BINS; k++) {
        seen += h->count[k];
        if (seen >= want)
            return fminf((float)((k + 1) * gr_hist_bin_width(h)), h->max);
    }
    return h->max;
}

/* MXNet's _smooth_distribution: move eps of mass onto every zero bin from the non-zero ones, so
 * KL(P || Q) is finite. Returns 0 when that would make a bin negative (candidate rejected). */
static int smooth(double *d, int n)
{
    const double eps = 1e-4;
    int zeros = 0;
    for (int k = 0; k < n; k++)
        zeros += d[k] == 0.0;
    if (zeros == n)
        return 0;
    double take = eps * zeros / (n - zeros);
    for (int k = 0; k < n; k++) {
        d[k] += d[k] == 0.0 ? eps : -take;
        if (d[k] <= 0.0)
            return 0;
    }
    return 1;
}

static double kl_divergence(const double *p, const double *q, int n)
{
    double sp = 0.0, sq = 0.0, kl = 0.0;
    for (int k = 0; k < n; k++) {
        sp += p[k];
        sq += q[k];
    }
    for (int k = 0; k < n; k++) {
        double pn = p[k] / sp, qn = q[k] / sq;
        kl += pn * log(pn / qn);
    }
    return kl;
}

static float entropy_threshold(const gr_hist *h)
{
    const int levels = GR_HIST_QUANT_LEVELS;
    int used = used_bins(h); /* > 1024 >= levels: the max is in the upper half */
    double p[GR_HIST_BINS], q[GR_HIST_BINS];
    uint64_t outliers = 0;
    for (int k = levels; k < used; k++)
        outliers += h->count[k];
    double best = INFINITY;
    int best_i = used;
    for (int i = levels; i <= used; i++) {
        if (i > levels)
            outliers -= h->count[i - 1];
        for (int k = 0; k < i; k++)
            p[k] = (double)h->count[k];
        p[i - 1] += (double)outliers;
        /* Q: the bins (without the outliers) merged into `levels` levels, the last one taking the
         * remainder, each spread evenly over the bins where P is non-zero. */
        int merged = i / levels;
        for (int j = 0; j < levels; j++) {
            int start = j * merged, stop = j == levels - 1 ? i : start + merged;
            double sum = 0.0;
            int nonzero = 0;
            for (int k = start; k < stop; k++) {
                sum += (double)h->count[k];
                nonzero += p[k] != 0.0;
            }
            for (int k = start; k < stop; k++)
                q[k] = p[k] != 0.0 ? sum / nonzero : 0.0;
        }
        if (!smooth(p, i) || !smooth(q, i))
            continue;
        double kl = kl_divergence(p, q, i);
        if (kl < best) {
            best = kl;
            best_i = i;
        }
    }
    return fminf((float)((best_i + 0.5) * gr_hist_bin_width(h)), h->max);
}

static float mse_threshold(const gr_hist *h)
{
    int used = used_bins(h);
    double width = gr_hist_bin_width(h);
    /* Suffix sums over bins >= i of count, count*x and count*x^2 (x = bin centre) give the
     * clipping error of every candidate in one sweep from the top. */
    double n_above = 0.0, x_above = 0.0, xx_above = 0.0, n_total = (double)h->total;
    double best = INFINITY;
    int best_i = used;
    for (int i = used; i >= 1; i--) {
        if (i < used) {
            double c = (double)h->count[i], x = (i + 0.5) * width;
            n_above += c;
            x_above += c * x;
            xx_above += c * x * x;
        }
        double t = i * width, step = t / 127.0;
        double clip = xx_above - 2.0 * t * x_above + t * t * n_above;
        double round = (n_total - n_above) * step * step / 12.0;
        if (clip + round <= best) {
            best = clip + round;
            best_i = i;
        }
    }
    return fminf((float)(best_i * width), h->max);
}

float gr_hist_threshold(const gr_hist *h, gr_calib_method method, float percentile)
{
    if (h->max == 0.0f || method == GR_CALIB_MAX || h->max_only)
        return h->max;
    switch (method) {
    case GR_CALIB_PERCENTILE: return percentile_threshold(h, percentile);
    case GR_CALIB_ENTROPY: return entropy_threshold(h);
    case GR_CALIB_MSE: return mse_threshold(h);
    default: return h->max;
    }
}

static const char *const method_names[] = {"max", "percentile", "entropy", "mse"};

const char *gr_calib_method_name(gr_calib_method m)
{
    return (unsigned)m < sizeof method_names / sizeof method_names[0] ? method_names[m] : "?";
}

gr_status gr_calib_method_parse(const char *name, gr_calib_method *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_calib_method_parse: NULL argument");
    for (size_t i = 0; i < sizeof method_names / sizeof method_names[0]; i++)
        if (strcmp(name, method_names[i]) == 0) {
            *out = (gr_calib_method)i;
            return GR_OK;
        }
    return gr_fail(GR_ERR_INVALID_ARGUMENT,
                   "unknown calibration method '%s' (expected max, percentile, entropy or mse)",
                   name);
}
