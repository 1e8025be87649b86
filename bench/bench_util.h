/* Helpers shared by the kernel benchmarks (01_conv, 04_fused, 07_gemm): the CUDA check that
 * stops the program with the kernels' recorded reason, the median's comparator, random device
 * buffers (never zeros) and the "is there a GPU" prologue. Header-only; CUDA builds only. */
#ifndef GR_BENCH_UTIL_H
#define GR_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "base/base.h"

/* Every benchmark defines BENCH_NAME before including this header. */
#define CHECK(stmt)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s failed: %s (%s)\n", BENCH_NAME, #stmt, cudaGetErrorName(e_),   \
                    gr_kernels_last_failure());                                                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline int bench_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum { BENCH_BYTES, BENCH_FLOATS, BENCH_HALVES };

/* bytes in [2, 252]; floats in [0.01, 0.02) (multipliers, biases); halves in [-0.01, 0.01). */
static inline void *bench_random_device(gr_rng *rng, size_t bytes, int kind)
{
    unsigned char *h = malloc(bytes);
    if (!h)
        exit(1);
    for (size_t i = 0; kind == BENCH_FLOATS && i < bytes / 4; ++i)
        ((float *)h)[i] = 0.01f * (1.0f + gr_rng_uniform(rng));
    for (size_t i = 0; kind == BENCH_HALVES && i < bytes / 2; ++i)
        ((uint16_t *)h)[i] = gr_f32_to_f16(0.02f * (gr_rng_uniform(rng) - 0.5f));
    for (size_t i = 0; kind == BENCH_BYTES && i < bytes; ++i)
        h[i] = (unsigned char)(gr_rng_u64(rng) % 251 + 2);
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes));
    CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* YOLOv2-tiny-VOC's nine convolutions as the fused engine runs them (416x416 input): pool_stride
 * 2 or 1 = the 2x2 maxpool fused after the conv (Darknet's stride-1 pool on layer 6), 0 = none. */
typedef struct bench_layer {
    int hw, in_c, out_c, ksize, act, pool_stride;
} bench_layer;

static inline const bench_layer *bench_yolo_layer(int i) /* 0..8 */
{
    static const bench_layer layers[9] = {
        {416, 3, 16, 3, GR_CONV_ACT_LEAKY, 2},     {208, 16, 32, 3, GR_CONV_ACT_LEAKY, 2},
        {104, 32, 64, 3, GR_CONV_ACT_LEAKY, 2},    {52, 64, 128, 3, GR_CONV_ACT_LEAKY, 2},
        {26, 128, 256, 3, GR_CONV_ACT_LEAKY, 2},   {13, 256, 512, 3, GR_CONV_ACT_LEAKY, 1},
        {13, 512, 1024, 3, GR_CONV_ACT_LEAKY, 0},  {13, 1024, 1024, 3, GR_CONV_ACT_LEAKY, 0},
        {13, 1024, 125, 1, GR_CONV_ACT_LINEAR, 0},
    };
    return &layers[i];
}

/* The first argument as the number of timed runs (def when absent); -1 after a usage line when it
 * is not in [10, 100000]. */
static inline int bench_runs_arg(int argc, char **argv, int def)
{
    const int runs = argc > 1 ? atoi(argv[1]) : def;
    if (runs < 10 || runs > 100000) {
        fprintf(stderr, "usage: %s [runs >= 10]\n", BENCH_NAME);
        return -1;
    }
    return runs;
}

/* 0 and the device's properties when a GPU is visible; else says so and returns 1. */
static inline int bench_no_device(struct cudaDeviceProp *prop)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("%s: no CUDA device\n", BENCH_NAME);
        return 1;
    }
    CHECK(cudaGetDeviceProperties(prop, 0));
    return 0;
}

#endif
