/* GPU tests of the tactic search's kernels (kernels/search.h): the comparison that decides
 * whether a candidate tactic's output matches the automatic tactic's (runtime/gpu/tactic.c), held
 * against the same sums computed here on the host element by element, as the search computed
 * them before it moved to the device; and the test input (every value non-zero and in its range,
 * the padding zero, the same bytes for the same seed).
 * Exits 77 with "SKIP gpu_search: no CUDA device (...)" when no device is visible. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/search.h"
#include "base/base.h"
#include "tests/support/gpu_test.h"

/* The host comparison the device one replaces: bit-equal elements count as exact; a non-finite
 * value where the other differs is counted apart. */
static void host_diff(const uint8_t *ref, const uint8_t *out, size_t pitch, size_t width,
                      size_t rows, int elem, gr_search_diff *d)
{
    memset(d, 0, sizeof *d);
    for (size_t y = 0; y < rows; y++)
        for (size_t x = 0; x < width / (size_t)elem; x++) {
            const uint8_t *a = ref + y * width + x * elem, *b = out + y * pitch + x * elem;
            double want, got;
            if (elem == 1) {
                want = (double)(int8_t)a[0];
                got = (double)(int8_t)b[0];
            } else if (elem == 2) {
                uint16_t ha, hb;
                memcpy(&ha, a, 2);
                memcpy(&hb, b, 2);
                want = (double)gr_f16_to_f32(ha);
                got = (double)gr_f16_to_f32(hb);
            } else {
                float fa, fb;
                memcpy(&fa, a, 4);
                memcpy(&fb, b, 4);
                want = (double)fa;
                got = (double)fb;
            }
            if (memcmp(a, b, (size_t)elem) == 0) {
                d->ref2 += isfinite(want) ? want * want : 0.0;
                continue;
            }
            d->differ++;
            if (!isfinite(want) || !isfinite(got)) {
                d->nonfinite++;
                continue;
            }
            d->err2 += (got - want) * (got - want);
            d->ref2 += want * want;
        }
}

static void device_diff(const uint8_t *ref, const uint8_t *out, size_t pitch, size_t width,
                        size_t rows, int elem, gr_search_diff *d)
{
    uint8_t *dref = NULL, *dout = NULL;
    gr_search_diff *dd = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dref, width * rows), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dout, pitch * rows), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dd, sizeof *dd), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dref, ref, width * rows, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dout, out, pitch * rows, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemset(dd, 0, sizeof *dd), cudaSuccess);
    ck_assert_int_eq(gr_launch_search_compare(dref, dout, pitch, width, rows, elem, dd, 0),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, dd, sizeof *d, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dref);
    cudaFree(dout);
    cudaFree(dd);
}

/* Random reference values; the output equal to them except a sprinkling of changed elements (one
 * f16 / f32 ulp, a larger error, a NaN, -0 for +0) and different bytes in the pitch's gap, which
 * must not count. */
START_TEST(test_compare_matches_host)
{
    static const int elems[3] = {1, 2, 4};
    const int elem = elems[_i % 3];
    const int with_nan = _i >= 3;
    const size_t rows = 1000 + 7, width = (size_t)elem * 333, pitch = width + 64;
    uint8_t *ref = malloc(width * rows), *out = malloc(pitch * rows);
    ck_assert(ref && out);
    gr_rng rng;
    gr_rng_seed(&rng, 42 + (uint64_t)_i);
    for (size_t k = 0; k < width * rows / (size_t)elem; k++) {
        uint64_t r = gr_rng_u64(&rng);
        if (elem == 1) {
            ref[k] = (uint8_t)(r % 255);
        } else if (elem == 2) {
            uint16_t h = gr_f32_to_f16((float)((double)(r % 2000) / 500.0 - 2.0));
            memcpy(ref + 2 * k, &h, 2);
        } else {
            float f = (float)((double)(r % 200000) / 5e4 - 2.0);
            memcpy(ref + 4 * k, &f, 4);
        }
    }
    for (size_t y = 0; y < rows; y++) {
        memcpy(out + y * pitch, ref + y * width, width);
        memset(out + y * pitch + width, 0x5a, pitch - width); /* not the output's */
    }
    size_t changed = 0;
    for (size_t y = 3; y < rows; y += 17, changed++) {
        uint8_t *p = out + y * pitch + (y % (width / (size_t)elem)) * (size_t)elem;
        if (elem == 1)
            p[0] = (uint8_t)(p[0] + 1);
        else if (with_nan && y == 20)
            memset(p, 0xff, (size_t)elem); /* NaN */
        else
            p[0] ^= (uint8_t)(y % 5 == 0 ? 0x40 : 0x01); /* a large error, or one ulp */
    }
    gr_search_diff want, got;
    host_diff(ref, out, pitch, width, rows, elem, &want);
    device_diff(ref, out, pitch, width, rows, elem, &got);
    ck_assert_uint_eq(got.differ, want.differ);
    ck_assert_uint_eq(got.differ, changed);
    ck_assert_uint_eq(got.nonfinite, want.nonfinite);
    ck_assert_uint_eq(got.nonfinite, (unsigned long long)(with_nan && elem > 1));
    ck_assert(want.err2 > 0.0);
    ck_assert_msg(fabs(got.err2 - want.err2) <= 1e-12 * want.err2, "err2 %.17g vs %.17g",
                  got.err2, want.err2);
    ck_assert_msg(fabs(got.ref2 - want.ref2) <= 1e-12 * want.ref2, "ref2 %.17g vs %.17g",
                  got.ref2, want.ref2);
    /* Identical outputs: nothing differs, nothing accumulates as error. */
    for (size_t y = 0; y < rows; y++)
        memcpy(out + y * pitch, ref + y * width, width);
    device_diff(ref, out, pitch, width, rows, elem, &got);
    ck_assert_uint_eq(got.differ, 0);
    ck_assert(got.err2 == 0.0);
    free(ref);
    free(out);
}
END_TEST

/* The test input: every filled element non-zero and within its kind's range, the padding zero,
 * the bytes past a row's elements (the pitch's gap) untouched, the same bytes for the same seed and
 * different ones for another. */
START_TEST(test_fill_ranges)
{
    static const int elems[4] = {1, 1, 2, 4};
    const gr_search_fill_kind kind = (gr_search_fill_kind)_i;
    const int elem = elems[_i];
    const size_t rows = 513, row_elems = 24, filled = 19, pitch = row_elems * (size_t)elem + 16;
    uint8_t *dev = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dev, pitch * rows), cudaSuccess);
    uint8_t *a = malloc(pitch * rows), *b = malloc(pitch * rows);
    ck_assert(a && b);
    ck_assert_int_eq(cudaMemset(dev, 0x77, pitch * rows), cudaSuccess);
    ck_assert_int_eq(gr_launch_search_fill(dev, pitch, rows, row_elems, filled, kind, 99, 0),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(a, dev, pitch * rows, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(gr_launch_search_fill(dev, pitch, rows, row_elems, filled, kind, 99, 0),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(b, dev, pitch * rows, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(memcmp(a, b, pitch * rows) == 0);
    int negative = 0;
    for (size_t y = 0; y < rows; y++) {
        const uint8_t *row = a + y * pitch;
        for (size_t x = 0; x < row_elems; x++) {
            double v;
            if (kind == GR_SEARCH_FILL_U8) {
                v = row[x];
            } else if (kind == GR_SEARCH_FILL_I8) {
                v = (double)(int8_t)row[x];
                ck_assert(x >= filled || (v >= -127 && v <= 127));
            } else if (kind == GR_SEARCH_FILL_F16) {
                uint16_t h;
                memcpy(&h, row + 2 * x, 2);
                v = (double)gr_f16_to_f32(h);
                ck_assert(x >= filled || (fabs(v) >= 1.0 / 16 && fabs(v) < 2.0));
            } else {
                float f;
                memcpy(&f, row + 4 * x, 4);
                v = (double)f;
                ck_assert(x >= filled || (fabs(v) >= 1.0 / 16 && fabs(v) <= 1.0));
            }
            if (x >= filled)
                ck_assert_msg(v == 0.0, "padding element %zu of row %zu is %g", x, y, v);
            else
                ck_assert_msg(v != 0.0, "element %zu of row %zu is 0", x, y);
            negative += v < 0.0;
        }
        for (size_t k = row_elems * (size_t)elem; k < pitch; k++)
            ck_assert_uint_eq(row[k], 0x77);
    }
    if (kind != GR_SEARCH_FILL_U8) /* both signs */
        ck_assert(negative > (int)(rows * filled / 4) && negative < (int)(rows * filled * 3 / 4));
    ck_assert_int_eq(gr_launch_search_fill(dev, pitch, rows, row_elems, filled, kind, 100, 0),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(b, dev, pitch * rows, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(memcmp(a, b, pitch * rows) != 0);
    free(a);
    free(b);
    cudaFree(dev);
}
END_TEST

static Suite *search_suite(void)
{
    Suite *s = suite_create("gpu_search");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_compare_matches_host, 0, 6);
    tcase_add_loop_test(tc, test_fill_ranges, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_search"))
        return 77;
    return gr_test_run_in_process(search_suite()) == 0 ? 0 : 1;
}
