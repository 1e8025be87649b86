/* Benchmark 08: the exact-FP32 conv path (kernels/gemm_f32.h) on YOLOv2-tiny-VOC's nine convs as
 * the fp32 engine runs them (no fusion: the maxpools are separate nodes), at batch 1 and 64.
 * Per layer, median microseconds (CUDA events around each launch, host launcher included, after
 * 10 warm-up launches) of:
 *   im2col     the im2col kernel alone ("-": a 1x1 conv reads its input directly)
 *   sgemm      cublasSgemmStridedBatched, CUBLAS_DEFAULT_MATH (exact FP32)
 *   bias_act   the separate bias/activation pass the SGEMM path needs
 *   tf32x3     the 3xTF32 GEMM with the fused epilogue, automatic tile (and the tile it chose)
 *   best       the fastest of the forced tiles, and which (T1 16x256, T2 32x256, T3 64x128,
 *              T4 128x128, T5 128x128 compiled for 2 blocks per SM, T6 128x128 with the K32 main
 *              loop - the automatic tile above 64 out channels -, T7 64x128 with the K32 loop)
 *   conv(s)    gr_launch_conv_f32 with SGEMM: im2col + sgemm + bias_act, one launcher call
 *   conv(3)    gr_launch_conv_f32 with TF32X3: im2col + tf32x3
 *   conv(i)    gr_launch_conv_f32 with TF32X3_IMPLICIT: the GEMM gathering its input (no im2col)
 *   conv(k)    conv(3) with the engine's split-K (gr_gemm_tf32x3_auto_splits; the parts after k)
 * and the tf32x3 GEMM's TFLOP/s (2*N*K*P*batch / time), and the agreement of the 3xTF32 convs
 * with the SGEMM one (largest |difference| over the largest |output|). Random non-zero data.
 * Usage: 08_f32 [runs]   (decisions: docs/performance.md) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("08_f32: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/conv.h"
#include "kernels/gemm_f32.h"

#define BENCH_NAME "08_f32"
#include "bench/bench_util.h"

#define CUBLAS_CHECK(stmt)                                                                         \
    do {                                                                                           \
        cublasStatus_t s_ = (stmt);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s: %s failed: %s (%s)\n", BENCH_NAME, #stmt,                         \
                    cublasGetStatusName(s_), gr_kernels_last_failure());                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum {
    OP_IM2COL,
    OP_SGEMM,
    OP_BIAS_ACT,
    OP_TF32X3,
    OP_CONV_SGEMM,
    OP_CONV_TF32X3,
    OP_CONV_IMPLICIT
};

typedef struct bench_ctx {
    cublasHandle_t h;
    cudaStream_t st;
    gr_conv_f32_args a; /* in, weights, bias, workspace, out set */
    int k, hw;
    int tile;   /* OP_TF32X3 */
    int splits; /* OP_CONV_TF32X3 */
} bench_ctx;

static void launch(const bench_ctx *c, int op)
{
    const gr_conv_f32_args *a = &c->a;
    const float one = 1.0f, zero = 0.0f;
    const float *col = a->ksize == 1 ? a->in : a->workspace; /* a 1x1 conv: no im2col */
    cudaError_t ce = cudaSuccess;
    switch (op) {
    case OP_IM2COL:
        CHECK(gr_launch_im2col_f32(a->in, a->batch, a->in_c, a->in_h, a->in_w, a->ksize, a->stride,
                                   a->pad, a->workspace, c->st));
        break;
    case OP_SGEMM:
        CUBLAS_CHECK(cublasSgemmStridedBatched(c->h, CUBLAS_OP_N, CUBLAS_OP_N, c->hw, a->out_c,
                                               c->k, &one, col, c->hw, (long long)c->k * c->hw,
                                               a->weights, c->k, 0, &zero, a->out, c->hw,
                                               (long long)a->out_c * c->hw, a->batch));
        break;
    case OP_BIAS_ACT:
        CHECK(gr_launch_bias_act_f32(a->out, a->bias, a->batch, a->out_c, c->hw, a->activation,
                                     c->st));
        break;
    case OP_TF32X3:
        CHECK(gr_launch_gemm_tf32x3_f32(a->weights, col, a->bias, a->out, a->out_c, c->k, c->hw,
                                        a->batch, a->activation, c->tile, c->st));
        break;
    default: {
        gr_conv_f32_args b = *a;
        b.splits = op == OP_CONV_TF32X3 ? c->splits : 0;
        b.algo = op == OP_CONV_TF32X3    ? GR_CONV_F32_TF32X3
                 : op == OP_CONV_IMPLICIT ? GR_CONV_F32_TF32X3_IMPLICIT
                                          : GR_CONV_F32_SGEMM;
        CUBLAS_CHECK(gr_launch_conv_f32(c->h, &b, c->st, &ce));
        break;
    }
    }
}

static float time_us(const bench_ctx *c, int op, int runs, float *ms, cudaEvent_t ev0,
                     cudaEvent_t ev1)
{
    for (int r = 0; r < 10 + runs; ++r) {
        CHECK(cudaEventRecord(ev0, c->st));
        launch(c, op);
        CHECK(cudaEventRecord(ev1, c->st));
        CHECK(cudaEventSynchronize(ev1));
        if (r >= 10)
            CHECK(cudaEventElapsedTime(&ms[r - 10], ev0, ev1));
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
    return 1000.0f * ms[runs / 2];
}

int main(int argc, char **argv)
{
    const int runs = bench_runs_arg(argc, argv, 50);
    if (runs < 0)
        return 2;
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    if (prop.major < 8) {
        printf("08_f32: %s is sm_%d%d; the 3xTF32 GEMM needs sm_80+\n", prop.name, prop.major,
               prop.minor);
        return 0;
    }
    printf("08_f32: %s, %d SMs, %d runs per entry (median us, launch included)\n", prop.name,
           prop.multiProcessorCount, runs);
    gr_rng rng;
    gr_rng_seed(&rng, 20261123);
    bench_ctx c;
    memset(&c, 0, sizeof c);
    CUBLAS_CHECK(cublasCreate(&c.h));
    CHECK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasSetStream(c.h, c.st));
    CUBLAS_CHECK(cublasSetMathMode(c.h, CUBLAS_DEFAULT_MATH));
    cudaEvent_t ev0, ev1;
    CHECK(cudaEventCreate(&ev0));
    CHECK(cudaEventCreate(&ev1));
    float *ms = malloc((size_t)runs * sizeof(float));
    if (!ms)
        return 1;
    int failures = 0;
    static const int batches[] = {1, 64};
    for (int bi = 0; bi < 2; ++bi) {
        const int batch = batches[bi];
        double sum_s = 0, sum_3 = 0, sum_i = 0, sum_im2col = 0;
        printf("batch %-3d %-24s %8s %8s %8s %8s %3s %8s %3s %8s %8s %8s %8s %2s %7s  %s\n",
               batch, "layer", "im2col", "sgemm", "bias_act", "tf32x3", "", "best", "", "conv(s)",
               "conv(3)", "conv(i)", "conv(k)", "", "TFLOP/s", "agreement");
        for (int l = 0; l < 9; ++l) {
            const bench_layer *L = bench_yolo_layer(l);
            gr_conv_f32_args *a = &c.a;
            memset(a, 0, sizeof *a);
            a->batch = batch;
            a->in_c = L->in_c;
            a->in_h = a->in_w = L->hw;
            a->out_c = L->out_c;
            a->ksize = L->ksize;
            a->stride = 1;
            a->pad = L->ksize / 2;
            a->activation = L->act;
            int ok = 0;
            const size_t ws = gr_conv_f32_workspace_floats(a, &ok);
            if (!ok) {
                fprintf(stderr, "08_f32: layer %d: bad shape\n", l);
                return 1;
            }
            c.k = L->in_c * L->ksize * L->ksize;
            c.hw = L->hw * L->hw;
            const size_t n_in = (size_t)batch * L->in_c * c.hw;
            const size_t n_out = (size_t)batch * L->out_c * c.hw;
            a->in = bench_random_device(&rng, n_in * 4, BENCH_FLOATS);
            a->weights = bench_random_device(&rng, (size_t)L->out_c * c.k * 4, BENCH_FLOATS);
            a->bias = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
            float *outs[2];
            CHECK(cudaMalloc((void **)&outs[0], n_out * 4));
            CHECK(cudaMalloc((void **)&outs[1], n_out * 4));
            /* room for the split-K parts after the im2col matrix (launch() sets splits) */
            const size_t ws_all = ws + 3 * n_out;
            CHECK(cudaMalloc((void **)&a->workspace, ws_all * 4));
            a->out = outs[0];
            float t_im2col = 0.0f;
            if (ws) {
                t_im2col = time_us(&c, OP_IM2COL, runs, ms, ev0, ev1);
                launch(&c, OP_IM2COL); /* the col the GEMMs read */
            }
            const float t_sgemm = time_us(&c, OP_SGEMM, runs, ms, ev0, ev1);
            const float t_bias = time_us(&c, OP_BIAS_ACT, runs, ms, ev0, ev1);
            c.tile = GR_TF32X3_TILE_AUTO;
            const float t_tf32x3 = time_us(&c, OP_TF32X3, runs, ms, ev0, ev1);
            const int auto_tile = gr_gemm_tf32x3_auto_tile(L->out_c, batch * c.hw,
                                                           prop.multiProcessorCount);
            float t_best = 1e30f;
            int best = 0;
            for (int t = 1; t <= GR_TF32X3_TILES; ++t) {
                c.tile = t;
                const float tt = time_us(&c, OP_TF32X3, runs, ms, ev0, ev1);
                if (tt < t_best) {
                    t_best = tt;
                    best = t;
                }
            }
            c.tile = GR_TF32X3_TILE_AUTO;
            const float t_conv_s = time_us(&c, OP_CONV_SGEMM, runs, ms, ev0, ev1);
            a->out = outs[1];
            const float t_conv_i = time_us(&c, OP_CONV_IMPLICIT, runs, ms, ev0, ev1);
            CHECK(cudaStreamSynchronize(c.st));
            float *h_impl = malloc(n_out * 4);
            if (!h_impl)
                return 1;
            CHECK(cudaMemcpy(h_impl, outs[1], n_out * 4, cudaMemcpyDeviceToHost));
            c.splits = 1;
            const float t_conv_3 = time_us(&c, OP_CONV_TF32X3, runs, ms, ev0, ev1);
            c.splits = gr_gemm_tf32x3_auto_splits(L->out_c, c.k, batch * c.hw,
                                                  prop.multiProcessorCount);
            const float t_conv_k = c.splits > 1 ? time_us(&c, OP_CONV_TF32X3, runs, ms, ev0, ev1)
                                                : t_conv_3; /* the last run's out: compared */
            CHECK(cudaStreamSynchronize(c.st));
            /* agreement of the two convs (outs[0]: SGEMM path, last run; outs[1]: 3xTF32) */
            float *h0 = malloc(n_out * 4), *h1 = malloc(n_out * 4);
            if (!h0 || !h1)
                return 1;
            CHECK(cudaMemcpy(h0, outs[0], n_out * 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(h1, outs[1], n_out * 4, cudaMemcpyDeviceToHost));
            double lo = 1e300, hi = -1e300, worst = 0;
            for (size_t i = 0; i < n_out; ++i) {
                lo = fmin(lo, (double)h0[i]);
                hi = fmax(hi, (double)h0[i]);
                worst = fmax(worst, fabs((double)h0[i] - (double)h1[i]));
                worst = fmax(worst, fabs((double)h0[i] - (double)h_impl[i]));
            }
            /* both FP32-level: a gap over 1e-5 of the largest output is a bug (the data are
             * positive, so the outputs' spread is small next to their size: measure against the
             * size) */
            const double big = fmax(fabs(lo), fabs(hi));
            const double rel = big > 0 ? worst / big : worst;
            const int bad = !(rel <= 1e-5);
            failures += bad;
            const double flop = 2.0 * L->out_c * c.k * (double)c.hw * batch;
            char shape[64];
            snprintf(shape, sizeof shape, "%d: %dx%d %d->%d k%d", l, L->hw, L->hw, L->in_c,
                     L->out_c, L->ksize);
            char im2col_s[16];
            if (ws)
                snprintf(im2col_s, sizeof im2col_s, "%8.1f", (double)t_im2col);
            else
                snprintf(im2col_s, sizeof im2col_s, "%8s", "-");
            printf("batch %-3d %-24s %s %8.1f %8.1f %8.1f T%d %8.1f T%d %8.1f %8.1f %8.1f %8.1f "
                   "k%d %7.1f  max %.2g of max|y|%s\n",
                   batch, shape, im2col_s, (double)t_sgemm, (double)t_bias, (double)t_tf32x3,
                   auto_tile, (double)t_best, best, (double)t_conv_s, (double)t_conv_3,
                   (double)t_conv_i, (double)t_conv_k, c.splits,
                   flop / ((double)t_tf32x3 * 1e6), rel, bad ? "  MISMATCH" : "");
            sum_s += (double)t_conv_s;
            sum_3 += (double)t_conv_3;
            sum_i += (double)t_conv_i;
            sum_im2col += (double)t_im2col;
            free(h0);
            free(h1);
            free(h_impl);
            CHECK(cudaFree((void *)a->in));
            CHECK(cudaFree((void *)a->weights));
            CHECK(cudaFree((void *)a->bias));
            CHECK(cudaFree(outs[0]));
            CHECK(cudaFree(outs[1]));
            CHECK(cudaFree(a->workspace));
        }
        printf("batch %-3d all convs: SGEMM path %.1f us, 3xTF32 path %.1f us (im2col %.1f us of "
               "it), implicit 3xTF32 %.1f us: %.0f / %.0f / %.0f images/s of conv time\n\n",
               batch, sum_s, sum_3, sum_im2col, sum_i, batch * 1e6 / sum_s, batch * 1e6 / sum_3,
               batch * 1e6 / sum_i);
    }
    free(ms);
    cublasDestroy(c.h);
    CHECK(cudaStreamDestroy(c.st));
    if (failures)
        printf("08_f32: %d layer(s) where the two FP32 paths disagree\n", failures);
    return failures ? 1 : 0;
}

#endif
