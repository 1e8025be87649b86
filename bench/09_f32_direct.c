/* Benchmark 09: the direct 3x3 FP32 conv (GR_CONV_F32_DIRECT3X3, kernels/conv3x3_f32.cu) against
 * the 3xTF32 path the fp32 engine runs otherwise (im2col + 3xTF32 GEMM, automatic tile, then the
 * maxpool as its own kernel), on YOLOv2-tiny-VOC's 3x3 convs at batch 1 and 64.
 * Per layer, median microseconds (CUDA events around each launcher call, after 10 warm-ups):
 *   tf32x3     gr_launch_conv_f32 with TF32X3 (im2col + GEMM)
 *   +pool      the same plus the separate maxpool kernel (gr_launch_maxpool, NCHW f32)
 *   direct     DIRECT3X3 without the pool, and its effective TFLOP/s
 *   d+pool     DIRECT3X3 with the pool fused (the layers that have a 2x2/2 pool)
 * and the largest |direct - tf32x3| over the largest |output| (both FP32-level: ~1e-6).
 * Random non-zero data. Usage: 09_f32_direct [runs [batch]]   (batch: only that one; for ncu) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("09_f32_direct: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/gemm_f32.h"
#include "kernels/misc.h"

#define BENCH_NAME "09_f32_direct"
#include "bench/bench_util.h"

typedef struct ctx {
    cudaStream_t st;
    gr_conv_f32_args a;
    float *pool_out;
    int pool; /* time the separate pool after the GEMM path */
} ctx;

static void launch(const ctx *c, int algo, int pool)
{
    gr_conv_f32_args b = c->a;
    b.algo = algo;
    if (algo == GR_CONV_F32_DIRECT3X3 && pool) {
        b.pool_size = b.pool_stride = 2;
        b.pool_pad = 1;
        b.out = c->pool_out;
    }
    cudaError_t ce = cudaSuccess;
    if (gr_launch_conv_f32(NULL, &b, c->st, &ce) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "09_f32_direct: conv failed: %s\n", gr_kernels_last_failure());
        exit(1);
    }
    if (algo != GR_CONV_F32_DIRECT3X3 && pool) {
        const int ph = (b.in_h + 1 - 2) / 2 + 1;
        gr_kview x = {b.batch, b.out_c, b.in_h, b.in_w, b.out_c, 0};
        gr_kview y = {b.batch, b.out_c, ph, ph, b.out_c, 0};
        CHECK(gr_launch_maxpool(GR_DTYPE_F32, b.out, x, c->pool_out, y, 2, 2, 1, c->st));
    }
}

static float time_us(const ctx *c, int algo, int pool, int runs, float *ms, cudaEvent_t e0,
                     cudaEvent_t e1)
{
    for (int r = 0; r < 10 + runs; ++r) {
        CHECK(cudaEventRecord(e0, c->st));
        launch(c, algo, pool);
        CHECK(cudaEventRecord(e1, c->st));
        CHECK(cudaEventSynchronize(e1));
        if (r >= 10)
            CHECK(cudaEventElapsedTime(&ms[r - 10], e0, e1));
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
    return 1000.0f * ms[runs / 2];
}

static float *fetch(const float *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        exit(1);
    CHECK(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

int main(int argc, char **argv)
{
    const int runs = bench_runs_arg(argc, argv, 50);
    if (runs < 0)
        return 2;
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    const int tf32x3 = prop.major >= 8;
    printf("09_f32_direct: %s, %d SMs, %d runs per entry (median us)%s\n", prop.name,
           prop.multiProcessorCount, runs, tf32x3 ? "" : "; no 3xTF32 before sm_80");
    gr_rng rng;
    gr_rng_seed(&rng, 20261124);
    ctx c;
    memset(&c, 0, sizeof c);
    CHECK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float *ms = malloc((size_t)runs * sizeof(float));
    if (!ms)
        return 1;
    int failures = 0;
    const int only = argc > 2 ? atoi(argv[2]) : 0;
    if (argc > 2 && (only < 1 || only > 4096)) {
        fprintf(stderr, "09_f32_direct: batch %s: expected 1..4096\n", argv[2]);
        return 2;
    }
    static const int batches[] = {1, 64};
    for (int bi = 0; bi < 2; ++bi) {
        const int batch = only ? only : batches[bi];
        if (only && bi)
            break;
        printf("batch %-3d %-24s %8s %8s %8s %7s %8s  %s\n", batch, "layer", "tf32x3", "+pool",
               "direct", "TFLOP/s", "d+pool", "agreement");
        for (int l = 0; l < 8; ++l) {
            const bench_layer *L = bench_yolo_layer(l);
            gr_conv_f32_args *a = &c.a;
            memset(a, 0, sizeof *a);
            a->batch = batch;
            a->in_c = L->in_c;
            a->in_h = a->in_w = L->hw;
            a->out_c = L->out_c;
            a->ksize = 3;
            a->stride = a->pad = 1;
            a->activation = L->act;
            a->algo = GR_CONV_F32_TF32X3;
            int ok = 0;
            const size_t ws = gr_conv_f32_workspace_floats(a, &ok);
            if (!ok)
                return 1;
            const size_t hw = (size_t)L->hw * L->hw, n_out = (size_t)batch * L->out_c * hw;
            const int ph = L->hw / 2;
            a->in = bench_random_device(&rng, (size_t)batch * L->in_c * hw * 4, BENCH_FLOATS);
            a->weights = bench_random_device(&rng, (size_t)L->out_c * L->in_c * 9 * 4,
                                             BENCH_FLOATS);
            a->bias = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
            float *out_gemm = NULL, *out_direct = NULL;
            CHECK(cudaMalloc((void **)&out_gemm, n_out * 4));
            CHECK(cudaMalloc((void **)&out_direct, n_out * 4));
            CHECK(cudaMalloc((void **)&c.pool_out, (size_t)batch * L->out_c * ph * ph * 4));
            CHECK(cudaMalloc((void **)&a->workspace, (ws ? ws : 1) * 4));
            const int pool = L->pool_stride == 2;
            float t_gemm = 0.0f, t_gemm_pool = 0.0f;
            a->out = out_gemm;
            if (tf32x3) {
                t_gemm = time_us(&c, GR_CONV_F32_TF32X3, 0, runs, ms, e0, e1);
                if (pool)
                    t_gemm_pool = time_us(&c, GR_CONV_F32_TF32X3, 1, runs, ms, e0, e1);
                launch(&c, GR_CONV_F32_TF32X3, 0);
            }
            a->out = out_direct;
            const float t_direct = time_us(&c, GR_CONV_F32_DIRECT3X3, 0, runs, ms, e0, e1);
            const float t_direct_pool =
                pool ? time_us(&c, GR_CONV_F32_DIRECT3X3, 1, runs, ms, e0, e1) : 0.0f;
            launch(&c, GR_CONV_F32_DIRECT3X3, 0);
            CHECK(cudaStreamSynchronize(c.st));
            double rel = 0.0;
            if (tf32x3) {
                float *h0 = fetch(out_gemm, n_out), *h1 = fetch(out_direct, n_out);
                double big = 0.0, diff = 0.0;
                for (size_t i = 0; i < n_out; ++i) {
                    big = fmax(big, fabs((double)h0[i]));
                    diff = fmax(diff, fabs((double)h0[i] - (double)h1[i]));
                }
                rel = big > 0.0 ? diff / big : 0.0;
                free(h0);
                free(h1);
            }
            const int bad = !(rel <= 1e-5);
            failures += bad;
            const double flop = 2.0 * L->out_c * L->in_c * 9.0 * (double)hw * batch;
            char shape[64];
            snprintf(shape, sizeof shape, "%d: %dx%d %d->%d", l, L->hw, L->hw, L->in_c, L->out_c);
            printf("batch %-3d %-24s %8.1f %8.1f %8.1f %7.1f %8.1f  max %.2g of max|y|%s\n", batch,
                   shape, (double)t_gemm, (double)t_gemm_pool, (double)t_direct,
                   flop / ((double)t_direct * 1e6), (double)t_direct_pool, rel,
                   bad ? "  MISMATCH" : "");
            CHECK(cudaFree((void *)a->in));
            CHECK(cudaFree((void *)a->weights));
            CHECK(cudaFree((void *)a->bias));
            CHECK(cudaFree(out_gemm));
            CHECK(cudaFree(out_direct));
            CHECK(cudaFree(c.pool_out));
            CHECK(cudaFree(a->workspace));
        }
        printf("\n");
    }
    free(ms);
    CHECK(cudaStreamDestroy(c.st));
    if (failures)
        printf("09_f32_direct: %d layer(s) where direct and 3xTF32 disagree\n", failures);
    return failures ? 1 : 0;
}

#endif
