/* kernels/fast_div.h: the GPU's division by an invariant divisor, checked on the CPU against the
 * '/' operator (the device runs the same formula with __umulhi, the exact high word of the product).
 * Exhaustive over n for small divisors would take minutes; instead every divisor 1..70,000 with the
 * n where rounding errors show first (multiples of d and their neighbours near 2^32, and a sweep),
 * and divisors near powers of two and 2^31 with random n. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/fast_div.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static int failures;
static void check(uint32_t n, uint32_t d, const gr_fast_div *f)
{
    const uint32_t want = n / d, got = gr_fast_div_do(n, *f);
    if (got != want && failures++ < 10)
        fprintf(stderr, "FAIL: %" PRIu32 " / %" PRIu32 " = %" PRIu32 ", fast_div gave %" PRIu32 "\n",
                n, d, want, got);
}

static void check_divisor(uint32_t d, int randoms)
{
    gr_fast_div f;
    if (!gr_fast_div_init(&f, d)) {
        fprintf(stderr, "FAIL: init refused d = %" PRIu32 "\n", d);
        ++failures;
        return;
    }
    const uint32_t top = UINT32_MAX - UINT32_MAX % d; /* the largest multiple of d */
    for (uint32_t k = 0; k < 3; ++k) {
        const uint32_t mult[2] = {k * d, top - k * d};
        for (int s = 0; s < 2; ++s) {
            check(mult[s], d, &f);
            if (mult[s] > 0)
                check(mult[s] - 1, d, &f);
            if (mult[s] < UINT32_MAX)
                check(mult[s] + 1, d, &f);
        }
    }
    check(UINT32_MAX, d, &f);
    for (int i = 0; i < randoms; ++i)
        check(next32(), d, &f);
}

int main(void)
{
    for (uint32_t d = 1; d <= 70000; ++d)
        check_divisor(d, 8);
    for (int l = 1; l < 31; ++l)
        for (int e = -3; e <= 3; ++e)
            if ((1ll << l) + e >= 1)
                check_divisor((uint32_t)((1ll << l) + e), 2000);
    for (uint32_t d = (1u << 31) - 1000; d < (1u << 31); ++d)
        check_divisor(d, 50);
    for (int i = 0; i < 2000; ++i)
        check_divisor(1 + next32() % ((1u << 31) - 1), 50);
    gr_fast_div f;
    if (gr_fast_div_init(&f, 0) || gr_fast_div_init(&f, 1u << 31)) {
        fprintf(stderr, "FAIL: init accepted 0 or 2^31\n");
        ++failures;
    }
    /* a sweep of every n below 2^22 for the divisors the kernels meet most (pixels, channels) */
    const uint32_t common[] = {3, 13, 26, 52, 104, 169, 208, 416, 676, 2704, 43264};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; ++i) {
        gr_fast_div c;
        if (!gr_fast_div_init(&c, common[i]))
            return 1;
        for (uint32_t n = 0; n < (1u << 22); ++n)
            check(n, common[i], &c);
    }
    if (failures) {
        fprintf(stderr, "%d wrong quotients\n", failures);
        return 1;
    }
    printf("fast_div: exact on every case checked\n");
    return 0;
}
