/* The input both sides of the AlexeyAB oracle feed their network: tests/alexeyab/driver.c (linked
 * against AlexeyAB Darknet) and tests/test_alexeyab.c (graphrun's CPU reference) include this
 * one definition, so the floats are the same by construction.
 *
 * A "dead leaves" picture, 3 x h x w in [0, 1]: opaque discs of random grey-ish colour painted
 * over each other, radii from a power law (density ~ r^-3) between 1 pixel and a third of the
 * image - the kind of picture models/synthetic.c calibrates the synthetic weights on, so the
 * heads see values in the range they were calibrated for (an input unlike it, such as flat 8 x 8
 * blocks, drives the deep nets' heads to +-10^4 or into the logistic's saturation, where the f32
 * rounding differences of two GEMM orders are amplified and the detections are ties).
 * Integer geometry and colours (the radius alone goes through one sqrt), so no compiler's
 * contraction or libm can move a pixel between the two builds. */
#ifndef GR_TESTS_ALEXEYAB_RECORD_INPUT_H
#define GR_TESTS_ALEXEYAB_RECORD_INPUT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* splitmix64 */
static uint64_t record_input_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t record_input_below(uint64_t *state, int64_t n)
{
    return (int64_t)(record_input_next(state) % (uint64_t)n);
}

static void record_input_fill(float *img, int w, int h)
{
    uint64_t state = 0x616c657865796162ULL; /* "alexeyab" */
    const size_t plane = (size_t)w * (size_t)h;
    const int64_t max_r16 = 16 * (int64_t)(w < h ? w : h) / 3; /* 1/16 pixel units */
    const int n_discs = (int)(4 * plane / 12) + 64;
    for (size_t k = 0; k < 3 * plane; k++)
        img[k] = 0.5f;
    for (int d = 0; d < n_discs; d++) {
        int64_t cx = record_input_below(&state, 16 * (int64_t)w);
        int64_t cy = record_input_below(&state, 16 * (int64_t)h);
        double u = (double)(record_input_next(&state) >> 11) / 9007199254740992.0; /* [0, 1) */
        int64_t r16 = (int64_t)(16.0 / sqrt(1.0 - u));
        if (r16 > max_r16)
            r16 = max_r16;
        int64_t luma = 13 + record_input_below(&state, 230);
        float colour[3];
        for (int c = 0; c < 3; c++) {
            int64_t v = luma + record_input_below(&state, 61) - 30;
            colour[c] = (float)(v < 0 ? 0 : v > 255 ? 255 : v) / 255.0f;
        }
        int64_t x0 = (cx - r16) / 16, x1 = (cx + r16) / 16 + 1;
        int64_t y0 = (cy - r16) / 16, y1 = (cy + r16) / 16 + 1;
        for (int64_t y = y0 < 0 ? 0 : y0; y < (y1 > h ? h : y1); y++) {
            for (int64_t x = x0 < 0 ? 0 : x0; x < (x1 > w ? w : x1); x++) {
                int64_t dx = 16 * x + 8 - cx, dy = 16 * y + 8 - cy; /* pixel centres */
                if (dx * dx + dy * dy > r16 * r16)
                    continue;
                for (int c = 0; c < 3; c++)
                    img[(size_t)c * plane + (size_t)y * (size_t)w + (size_t)x] = colour[c];
            }
        }
    }
}

#endif
