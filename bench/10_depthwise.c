/* Benchmark 10: the FP32 direct conv (kernels/conv_direct.cu) on MobileNet-style depthwise 3x3
 * layers (groups = channels, stride 1 and 2) and a dilated 3x3, at batch 1 and 8; for the
 * depthwise ones also the per-group path the fp32 engine took before (one cuBLAS SGEMM conv per
 * channel, gr_launch_conv_f32). Per layer, median microseconds (CUDA events around each launch,
 * after 10 warm-ups) and the direct kernel's effective bandwidth (input + output + weights bytes
 * over the time: a depthwise conv does 9 multiply-adds per output and is memory-bound, so this is
 * the figure to hold against the device's peak). Random non-zero data.
 * Usage: 10_depthwise [runs]   (results to stdout) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("10_depthwise: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/conv_direct.h"
#include "kernels/gemm_f32.h"

#define BENCH_NAME "10_depthwise"
#include "bench/bench_util.h"

typedef struct dw_layer {
    int hw, c, stride, dilation;
} dw_layer;

static const dw_layer layers[] = {{208, 32, 1, 1}, {208, 64, 2, 1}, {104, 128, 1, 1},
                                  {52, 256, 1, 1},  {52, 256, 2, 1}, {26, 512, 1, 1},
                                  {13, 1024, 1, 1}, {52, 128, 1, 2}};

static float median_us(float *ms, int runs)
{
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
    return 1000.0f * ms[runs / 2];
}

static float time_direct(const gr_conv_direct_f32_args *a, cudaStream_t st, int runs, float *ms,
                         cudaEvent_t e0, cudaEvent_t e1)
{
    for (int r = 0; r < 10 + runs; ++r) {
        CHECK(cudaEventRecord(e0, st));
        CHECK(gr_launch_conv_direct_f32(a, st));
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        if (r >= 10)
            CHECK(cudaEventElapsedTime(&ms[r - 10], e0, e1));
    }
    return median_us(ms, runs);
}

/* The per-group path: one SGEMM conv per channel and image (what dispatch.c did for groups). */
static float time_per_group(cublasHandle_t h, const gr_conv_direct_f32_args *a, float *workspace,
                            cudaStream_t st, int runs, float *ms, cudaEvent_t e0, cudaEvent_t e1)
{
    for (int r = 0; r < 10 + runs; ++r) {
        CHECK(cudaEventRecord(e0, st));
        for (int n = 0; n < a->batch; ++n)
            for (int c = 0; c < a->in_c; ++c) {
                gr_conv_f32_args g = {0};
                g.batch = 1;
                g.in_c = 1;
                g.in_h = a->in_h;
                g.in_w = a->in_w;
                g.out_c = 1;
                g.ksize = 3;
                g.stride = a->stride_x;
                g.pad = 1;
                g.in = a->in + (size_t)n * a->in_image_stride + (size_t)c * a->in_h * a->in_w;
                g.weights = a->weights + (size_t)c * 9;
                g.bias = a->bias + c;
                g.out = a->out + (size_t)n * a->out_image_stride + (size_t)c * a->out_h * a->out_w;
                g.workspace = workspace;
                g.activation = a->activation;
                g.algo = GR_CONV_F32_SGEMM;
                cudaError_t ce = cudaSuccess;
                if (gr_launch_conv_f32(h, &g, st, &ce) != CUBLAS_STATUS_SUCCESS) {
                    fprintf(stderr, "10_depthwise: per-group conv failed: %s\n",
                            gr_kernels_last_failure());
                    exit(1);
                }
            }
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        if (r >= 10)
            CHECK(cudaEventElapsedTime(&ms[r - 10], e0, e1));
    }
    return median_us(ms, runs);
}

int main(int argc, char **argv)
{
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    int runs = bench_runs_arg(argc, argv, 100);
    if (runs < 0)
        return 2;
    float *ms = malloc((size_t)runs * sizeof *ms);
    gr_rng rng;
    gr_rng_seed(&rng, 10);
    cudaStream_t st;
    cudaEvent_t e0, e1;
    cublasHandle_t h;
    CHECK(cudaStreamCreate(&st));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    if (!ms || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, st))
        return 1;
    printf("%s on %s, %d runs, median us (direct kernel: effective GB/s)\n", BENCH_NAME, prop.name,
           runs);
    printf("%-26s %5s %10s %8s %12s\n", "layer", "batch", "direct us", "GB/s", "per-group us");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; ++i) {
        const dw_layer *l = &layers[i];
        for (int batch = 1; batch <= 8; batch *= 8) {
            const int out_hw = (l->hw + 2 - 3) / l->stride + 1;
            const size_t in_n = (size_t)batch * l->c * l->hw * l->hw;
            const size_t out_n = (size_t)batch * l->c * out_hw * out_hw;
            gr_conv_direct_f32_args a = {
                .batch = batch, .in_c = l->c, .in_h = l->hw, .in_w = l->hw, .out_c = l->c,
                .out_h = out_hw, .out_w = out_hw, .ksize = 3, .stride_x = l->stride,
                .stride_y = l->stride, .pad = 1, .dilation = l->dilation,
                .groups = l->dilation > 1 ? 1 : l->c,
                .in_image_stride = (size_t)l->c * l->hw * l->hw,
                .out_image_stride = (size_t)l->c * out_hw * out_hw,
                .activation = 1 /* leaky */};
            const size_t w_n = (size_t)l->c * (size_t)(l->c / a.groups) * 9;
            a.in = bench_random_device(&rng, in_n * 4, BENCH_FLOATS);
            a.weights = bench_random_device(&rng, w_n * 4, BENCH_FLOATS);
            a.bias = bench_random_device(&rng, (size_t)l->c * 4, BENCH_FLOATS);
            CHECK(cudaMalloc((void **)&a.out, out_n * 4));
            const float us = time_direct(&a, st, runs, ms, e0, e1);
            const double gbs = (double)(in_n + out_n + w_n) * 4.0 / ((double)us * 1e3);
            char name[64];
            snprintf(name, sizeof name, "%s %dx%dx%d s%d%s", l->dilation > 1 ? "dilated" : "dw",
                     l->c, l->hw, l->hw, l->stride, l->dilation > 1 ? " d2" : "");
            if (l->dilation == 1 && batch == 1) {
                float *ws = NULL;
                CHECK(cudaMalloc((void **)&ws, (size_t)9 * out_hw * out_hw * 4));
                const float pg = time_per_group(h, &a, ws, st, runs < 20 ? runs : 20, ms, e0, e1);
                printf("%-26s %5d %10.1f %8.0f %12.1f\n", name, batch, (double)us, gbs,
                       (double)pg);
                CHECK(cudaFree(ws));
            } else {
                printf("%-26s %5d %10.1f %8.0f %12s\n", name, batch, (double)us, gbs, "-");
            }
            CHECK(cudaFree((void *)a.in));
            CHECK(cudaFree((void *)a.weights));
            CHECK(cudaFree((void *)a.bias));
            CHECK(cudaFree(a.out));
        }
    }
    cublasDestroy(h);
    free(ms);
    return 0;
}

#endif
