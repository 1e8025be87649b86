/* Kernels of the tactic search (runtime/gpu/tactic.c, docs/tactics.md): the deterministic test
 * input a conv is timed on, and the numerics check of a candidate's output against the automatic
 * tactic's, both on the device, so that a candidate costs its launches and a few bytes read back
 * rather than a copy of its whole output to the host and a loop over it there.
 * Plain C interface; the kernels are in kernels/search.cu. */
#ifndef GR_KERNELS_SEARCH_H
#define GR_KERNELS_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the test input holds: every value non-zero (zeros would time the easy case and hide
 * numerics bugs). U8 [1, 255] (the network's input), I8 [-127, -1] u [1, 127], F16 magnitude
 * [1/16, 2) with either sign (exponents 2^-4..2^0, any mantissa), F32 magnitude [1/16, 1] with
 * either sign. */
typedef enum gr_search_fill_kind {
    GR_SEARCH_FILL_U8 = 0,
    GR_SEARCH_FILL_I8,
    GR_SEARCH_FILL_F16,
    GR_SEARCH_FILL_F32
} gr_search_fill_kind;

/* Fill `rows` rows of `row_elems` elements, `pitch` bytes apart: the first `filled` elements of a
 * row with values of `kind` drawn from a counter-based hash of (seed, row, element), the rest with
 * 0 (padding channels, as the kernels require). Deterministic: the same arguments give the same
 * bytes on any GPU. */
cudaError_t gr_launch_search_fill(void *dev, size_t pitch, size_t rows, size_t row_elems,
                                  size_t filled, gr_search_fill_kind kind, uint64_t seed,
                                  cudaStream_t stream);

/* The comparison of a candidate's output with the reference's, element by element (elements of
 * `elem` bytes: 1 int8, 2 f16, 4 f32): `ref` dense (rows of `width` bytes back to back), `out`
 * rows of `width` bytes every `pitch` bytes. */
typedef struct gr_search_diff {
    unsigned long long differ;    /* elements whose bits differ */
    unsigned long long nonfinite; /* of them, those where either value is not finite (f16/f32) */
    double err2;                  /* sum of (out - ref)^2 over the differing finite elements */
    double ref2;                  /* sum of ref^2 over the finite reference values compared */
} gr_search_diff;

/* Accumulates into *diff (device memory, zeroed by the caller before the first launch). */
cudaError_t gr_launch_search_compare(const void *ref, const void *out, size_t pitch, size_t width,
                                     size_t rows, int elem, gr_search_diff *diff,
                                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
