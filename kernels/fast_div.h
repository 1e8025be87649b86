/* n / d for every 32-bit unsigned n by a divisor fixed at launch, in a multiply-high, an add and a
 * shift (an integer division is ~20 instructions on the GPU, a 64-bit one ~70): the round-up
 * method of Granlund and Montgomery, "Division by invariant integers using multiplication" (PLDI
 * 1994), section 4. With l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1,
 * n / d = (mulhi(n, m) + n) >> l, exact for 0 <= n < 2^32 and 1 <= d < 2^31 (the sum is taken in 64
 * bits). Plain C so that the host fills it and a CPU test checks it (tests/test_fast_div.c); the
 * kernels include it for gr_fast_div_do. */
#ifndef GR_KERNELS_FAST_DIV_H
#define GR_KERNELS_FAST_DIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define GR_FAST_DIV_FN __host__ __device__ static inline
#else
#define GR_FAST_DIV_FN static inline
#endif

typedef struct gr_fast_div {
    uint32_t m; /* the magic multiplier */
    uint32_t l; /* ceil(log2 d) */
    uint32_t d; /* the divisor itself (remainders) */
} gr_fast_div;

/* 0 when d is out of range (0 or >= 2^31): the caller refuses the launch. */
GR_FAST_DIV_FN int gr_fast_div_init(gr_fast_div *f, uint32_t d)
{
    if (d < 1u || d >= (1u << 31))
        return 0;
    uint32_t l = 0;
    while ((1ull << l) < d)
        ++l;
    f->m = (uint32_t)((((1ull << l) - d) << 32) / d + 1u);
    f->l = l;
    f->d = d;
    return 1;
}

GR_FAST_DIV_FN uint32_t gr_fast_div_do(uint32_t n, gr_fast_div f)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, f.m);
#else
    const uint32_t t = (uint32_t)(((uint64_t)n * f.m) >> 32);
#endif
    return (uint32_t)(((uint64_t)t + n) >> f.l);
}

#endif
