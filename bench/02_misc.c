/* Bench 02: the non-GEMM kernels (kernels/misc.h) on YOLOv2-tiny's shapes at batch 1: input
 * quantize, the six maxpools per precision, head dequantize and region activation.
 * Method: random inputs, 20 warm-up launches, then 100 samples, each a batch of 10 back-to-back
 * launches between two CUDA events (per-launch time = batch time / 10, so the host's launch gaps
 * are hidden as in a captured graph); prints median and p99 of the samples in microseconds and the
 * effective bandwidth (bytes read once + written once over the median). Exits 77 without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/misc.h"
#include "base/base.h"

#define REPS 100
#define BATCH 10
#define WARMUP 20

typedef enum { MAXPOOL, QUANT_U8, DEQUANT, REGION } bench_op;

typedef struct bench_case {
    const char *name;
    bench_op op;
    gr_dtype t;
    int c, h, w, size, stride;
} bench_case;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static size_t esize(gr_dtype t) { return t == GR_DTYPE_F32 ? 4 : t == GR_DTYPE_F16 ? 2 : 1; }

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    cudaGetErrorString(err_));                                                     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static cudaError_t launch(const bench_case *b, const void *in, void *out, gr_kview iv, gr_kview ov)
{
    switch (b->op) {
    case MAXPOOL:
        return gr_launch_maxpool(b->t, in, iv, out, ov, b->size, b->stride, b->size - 1, 0);
    case QUANT_U8:
        return gr_launch_convert(GR_DTYPE_U8, b->t, in, iv, 1.0f, out, ov, 1.0f / 127.0f, 0);
    case DEQUANT: return gr_launch_convert(b->t, GR_DTYPE_F32, in, iv, 0.05f, out, ov, 1.0f, 0);
    case REGION: return gr_launch_region(GR_DTYPE_F32, in, out, 1, b->h, b->w, 5, 4, 20, 1, 0);
    }
    return cudaErrorInvalidValue;
}

static int run(const bench_case *b, gr_rng *rng)
{
    gr_kview iv, ov;
    size_t in_bytes, out_bytes;
    if (b->op == MAXPOOL) {
        int oh = (b->h + b->size - 1 - b->size) / b->stride + 1;
        int ow = (b->w + b->size - 1 - b->size) / b->stride + 1;
        iv = gr_kview_dense(b->t, 1, b->c, b->h, b->w);
        ov = gr_kview_dense(b->t, 1, b->c, oh, ow);
        in_bytes = (size_t)iv.c_stride * iv.h * iv.w * esize(b->t);
        out_bytes = (size_t)ov.c_stride * ov.h * ov.w * esize(b->t);
    } else if (b->op == QUANT_U8) {
        iv = ov = gr_kview_dense(b->t, 1, b->c, b->h, b->w);
        in_bytes = (size_t)b->c * b->h * b->w;
        out_bytes = (size_t)ov.c_stride * ov.h * ov.w * esize(b->t);
    } else if (b->op == DEQUANT) {
        iv = gr_kview_dense(b->t, 1, b->c, b->h, b->w);
        ov = gr_kview_dense(GR_DTYPE_F32, 1, b->c, b->h, b->w);
        in_bytes = (size_t)iv.c_stride * iv.h * iv.w * esize(b->t);
        out_bytes = (size_t)b->c * b->h * b->w * 4;
    } else {
        iv = ov = gr_kview_dense(GR_DTYPE_F32, 1, b->c, b->h, b->w);
        in_bytes = out_bytes = (size_t)b->c * b->h * b->w * 4;
    }
    unsigned char *host = malloc(in_bytes);
    if (!host)
        return 1;
    for (size_t i = 0; i < in_bytes; i++)
        host[i] =
            (unsigned char)(gr_rng_u64(rng) & 0x3F); /* finite f32/f16 patterns, i8/u8 0..63 */
    void *in = NULL, *out = NULL;
    CHECK(cudaMalloc(&in, in_bytes));
    CHECK(cudaMalloc(&out, out_bytes));
    CHECK(cudaMemcpy(in, host, in_bytes, cudaMemcpyHostToDevice));
    free(host);
    for (int i = 0; i < WARMUP; i++)
        CHECK(launch(b, in, out, iv, ov));
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    float us[REPS];
    for (int i = 0; i < REPS; i++) {
        CHECK(cudaEventRecord(start, 0));
        for (int j = 0; j < BATCH; j++)
            CHECK(launch(b, in, out, iv, ov));
        CHECK(cudaEventRecord(stop, 0));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        us[i] = ms * 1000.0f / BATCH;
    }
    qsort(us, REPS, sizeof us[0], cmp_float);
    float median = us[REPS / 2], p99 = us[REPS * 99 / 100];
    double gbps = (double)(in_bytes + out_bytes) / ((double)median * 1e-6) / 1e9;
    printf("%-28s %-4s %9.2f %9.2f %9.1f\n", b->name, gr_dtype_name(b->t), (double)median,
           (double)p99, gbps);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(in);
    cudaFree(out);
    return 0;
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("SKIP 02_misc: no CUDA device\n");
        return 77;
    }
    static const struct {
        const char *name;
        int c, h, w, stride;
    } pools[] = {
        {"maxpool 16x416x416 2/2", 16, 416, 416, 2}, {"maxpool 32x208x208 2/2", 32, 208, 208, 2},
        {"maxpool 64x104x104 2/2", 64, 104, 104, 2}, {"maxpool 128x52x52 2/2", 128, 52, 52, 2},
        {"maxpool 256x26x26 2/2", 256, 26, 26, 2},   {"maxpool 512x13x13 2/1", 512, 13, 13, 1},
    };
    static const gr_dtype dtypes[3] = {GR_DTYPE_I8, GR_DTYPE_F16, GR_DTYPE_F32};
    gr_rng rng;
    gr_rng_seed(&rng, 2);
    printf("%-28s %-4s %9s %9s %9s\n", "kernel (batch 1)", "type", "median_us", "p99_us", "GB/s");
    for (int d = 0; d < 3; d++) {
        bench_case q = {"input u8 3x416x416", QUANT_U8, dtypes[d], 3, 416, 416, 0, 0};
        if (run(&q, &rng))
            return 1;
        for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
            bench_case b = {pools[p].name, MAXPOOL,    dtypes[d], pools[p].c,
                            pools[p].h,    pools[p].w, 2,         pools[p].stride};
            if (run(&b, &rng))
                return 1;
        }
        if (dtypes[d] != GR_DTYPE_F32) {
            bench_case dq = {"dequantize 125x13x13", DEQUANT, dtypes[d], 125, 13, 13, 0, 0};
            if (run(&dq, &rng))
                return 1;
        }
    }
    bench_case r = {"region 125x13x13 (20 cls)", REGION, GR_DTYPE_F32, 125, 13, 13, 0, 0};
    return run(&r, &rng);
}
