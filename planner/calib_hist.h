/* Range and histogram collector for int8 calibration: a plain C module that takes a tensor's float
 * values (from the CPU plan executor today, from a GPU engine's readback later) and turns the |x|
 * statistics into a clipping threshold by one of the calibration methods.
 *
 * The histogram grows with its range instead of needing the maximum first (one pass over the
 * calibration set, nothing stored per value): GR_HIST_BINS bins of equal width cover [0, 2^e)
 * where 2^e is the smallest power of two above the largest |x| seen, so the maximum always lies in
 * the upper half of the bins (at least 1024 bins span [0, max]). When a larger value arrives, e
 * grows and neighbouring bins are summed pairwise (width doubles); because every edge is a
 * multiple of a power of two, a value lands in the same bin whether it was added before or after
 * the growth. Counts are integers and merging is exact, so a histogram is the same bit for bit
 * whatever the order of the values and however they were split between collectors (threads).
 * Non-finite values are counted in `nonfinite` and otherwise ignored. */
#ifndef GR_PLANNER_CALIB_HIST_H
#define GR_PLANNER_CALIB_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "graphrun/runtime.h"

#define GR_HIST_LOG2_BINS 11
#define GR_HIST_BINS (1 << GR_HIST_LOG2_BINS)
#define GR_HIST_QUANT_LEVELS 128 /* int8: 127 positive levels and zero; the entropy's Q has 128 */

typedef struct gr_hist {
    uint64_t count[GR_HIST_BINS];
    uint64_t total;     /* finite values added */
    uint64_t nonfinite; /* NaN / Inf values skipped */
    float max;          /* largest finite |x| */
    int exponent;       /* bins cover [0, 2^exponent); meaningful once max > 0 */
    int max_only;       /* 1: keep only max and total (the MAX method needs nothing else) */
} gr_hist;

void gr_hist_init(gr_hist *h, int max_only);
/* Add |x| of n values. */
void gr_hist_add(gr_hist *h, const float *x, size_t n);
/* dst += src (both must have the same max_only). */
void gr_hist_merge(gr_hist *dst, const gr_hist *src);
/* h += a histogram made elsewhere (a GPU kernel, kernels/calib.h): `total` finite values whose
 * largest |x| is `max`, binned as bin = (int)(|x| * 2^(GR_HIST_LOG2_BINS - exponent)) (exact in
 * double; every value in bin 0 when max is 0), `nonfinite` values skipped. The result equals
 * gr_hist_add of the same values bit for bit when exponent is frexpf(max)'s exponent (the
 * smallest e with max < 2^e) — what kernels/calib.h's producers pass; a larger exponent into a
 * histogram that ends smaller keeps that larger range (not what gr_hist_add would give).
 * counts (GR_HIST_BINS entries) is not read for a max_only histogram and may be NULL there.
 * GR_ERR_INTERNAL when the counts cannot be such a histogram (sum != total, max >= 2^exponent,
 * max negative or not finite): a producer bug, never silently merged. */
gr_status gr_hist_merge_bins(gr_hist *h, const uint64_t *counts, int exponent, float max,
                             uint64_t total, uint64_t nonfinite);
/* Width of one bin (0 while every value was 0). */
double gr_hist_bin_width(const gr_hist *h);

/* The clipping threshold of a method (0 for an empty or all-zero histogram):
 *   MAX        max |x|
 *   PERCENTILE upper edge of the bin holding the nearest-rank `percentile` (0 < p <= 100) of |x|,
 *              capped at max: at most one bin width above the exact percentile
 *   ENTROPY    TensorRT's legacy KL calibration: for i = 128 .. (bins up to the max), P = bins
 *              [0, i) with the outliers added to bin i-1, Q = bins [0, i) merged into 128 levels
 *              and spread back over P's non-zero bins, both smoothed (eps 1e-4); the i of least
 *              KL(P || Q) gives (i + 0.5) * bin width
 *   MSE        the bin edge T minimising the expected squared error of quantizing to 127 levels
 *              of T: clipped values cost (x - T)^2 (x at the bin centre), others the rounding
 *              error (T / 127)^2 / 12
 * Ties go to the smaller threshold; nothing depends on the order the values came in. */
float gr_hist_threshold(const gr_hist *h, gr_calib_method method, float percentile);

#endif
