/* GPU statistics for int8 calibration (runtime/gpu/calib.c): per tensor, the largest finite |x|,
 * the number of NaN/Inf values, and the 2048-bin histogram of |x| that planner/calib_hist.h
 * defines, so the host merges the counts with gr_hist_merge_bins() and gets bit for bit what
 * gr_hist_add() of the same values would give.
 * Plain C11 interface; the kernels live in kernels/calib.cu. They know tensors (a gr_kview, see
 * kernels/misc.h), not plans.
 *
 * Values read: the view's real channels only (c channels from c_offset; the padding channels of
 * an NHWC buffer and the other channels of a concat buffer are never read), images 0..view.n-1.
 * f32: |x|. u8 (the network input): v / 255.0f (IEEE division), as the engine's conversion.
 * Binning (planner/calib_hist.c, exactly): with max the largest finite |x| of the statistics
 * record at the time the histogram kernel runs and e frexpf's exponent of max (max < 2^e), a
 * finite |x| goes to bin (int)((double)|x| * 2^(11 - e)) (exact in double, truncated); every
 * finite value goes to bin 0 when max is 0. Non-finite values are counted, never binned.
 *
 * Launchers take a cudaStream_t, launch (never allocate or synchronize) and return
 * cudaGetLastError(), or cudaErrorInvalidValue for inconsistent arguments (recorded for
 * gr_kernels_last_failure()); a dtype other than f32 / u8 is cudaErrorNotSupported. */
#ifndef GR_KERNELS_CALIB_H
#define GR_KERNELS_CALIB_H

#include <cuda_runtime_api.h>

#include "kernels/misc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GR_CALIB_LOG2_BINS 11
#define GR_CALIB_BINS (1 << GR_CALIB_LOG2_BINS)

/* Accumulated by the kernels; zero it (cudaMemsetAsync) before the first launch. */
typedef struct gr_calib_stats {
    unsigned int max_bits;        /* largest finite |x| seen, as its float bits (non-negative
                                     floats order like their bit patterns: atomicMax on bits) */
    unsigned int reserved;
    unsigned long long nonfinite; /* NaN / Inf values seen */
} gr_calib_stats;

/* stats->max_bits = max(itself, largest finite |x|), stats->nonfinite += non-finite values.
 * nhwc: 0 = NCHW addressing, 1 = NHWC (kernels/misc.h's formulas). */
cudaError_t gr_launch_calib_absmax(gr_dtype dtype, const void *x, gr_kview view, int nhwc,
                                   gr_calib_stats *stats, cudaStream_t stream);

/* counts[bin] += finite values in that bin, binned at the exponent of __uint_as_float(
 * stats->max_bits) as it is when the kernel runs: launch gr_launch_calib_absmax over every value
 * to be binned first, on the same stream. counts: GR_CALIB_BINS entries (zero them first). */
cudaError_t gr_launch_calib_hist(gr_dtype dtype, const void *x, gr_kview view, int nhwc,
                                 const gr_calib_stats *stats, unsigned long long *counts,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
