/* Benchmark 07: the GEMM tactic (kernels/conv_gemm.h: im2col + cuBLASLt + epilogue) against the
 * implicit-GEMM kernel (kernels/conv.h, automatic tile and split) on YOLOv2-tiny-VOC's layers 2-9
 * as the fused int8/fp16 engine runs them (pool fused, head writing f32 NCHW), at batch 1 and 64.
 * Per layer: median of event-timed launches (host launcher included) of each, and the agreement
 * of the two outputs (int8: must be identical; fp16: largest difference relative to the output's
 * range, f32 sums in another order). Random data, never zeros.
 * Usage: 07_gemm [runs]   (decisions: docs/performance.md) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("07_gemm: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/conv.h"
#include "kernels/conv_gemm.h"

#define BENCH_NAME "07_gemm"
#include "bench/bench_util.h"

/* tactic 0: implicit GEMM; 1: GEMM tactic */
static cudaError_t launch(int tactic, const gr_conv_args *a, int is_i8, const gr_conv_gemm *g,
                          void *scratch, cudaStream_t st)
{
    if (tactic)
        return gr_conv_gemm_launch(g, a, scratch, st);
    return is_i8 ? gr_launch_conv_i8(a, st) : gr_launch_conv_f16(a, st);
}

static float time_us(int tactic, const gr_conv_args *a, int is_i8, const gr_conv_gemm *g,
                     void *scratch, int runs, float *ms, cudaEvent_t ev0, cudaEvent_t ev1,
                     cudaStream_t st)
{
    for (int r = 0; r < 10 + runs; ++r) {
        CHECK(cudaEventRecord(ev0, st));
        CHECK(launch(tactic, a, is_i8, g, scratch, st));
        CHECK(cudaEventRecord(ev1, st));
        CHECK(cudaEventSynchronize(ev1));
        if (r >= 10)
            CHECK(cudaEventElapsedTime(&ms[r - 10], ev0, ev1));
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
    return 1000.0f * ms[runs / 2];
}

static double as_double(const void *p, size_t i, int kind) /* 0 i8, 1 f16, 2 f32 */
{
    if (kind == 0)
        return ((const int8_t *)p)[i];
    if (kind == 1)
        return gr_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

int main(int argc, char **argv)
{
    const int runs = bench_runs_arg(argc, argv, 100);
    if (runs < 0)
        return 2;
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    printf("07_gemm: %s, %d SMs, cuBLASLt %zu, %d runs per entry (median us, launch included)\n",
           prop.name, prop.multiProcessorCount, cublasLtGetVersion(), runs);
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "07_gemm: cublasLtCreate failed\n");
        return 1;
    }
    gr_rng rng;
    gr_rng_seed(&rng, 20261123);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev0, ev1;
    CHECK(cudaEventCreate(&ev0));
    CHECK(cudaEventCreate(&ev1));
    float *ms = malloc((size_t)runs * sizeof(float));
    const size_t ws_bytes = 256u << 20;
    void *ws = NULL;
    CHECK(cudaMalloc(&ws, ws_bytes));
    CHECK(cudaMemset(ws, 0, ws_bytes));
    int failures = 0;
    static const int batches[] = {1, 64};
    for (int bi = 0; bi < 2; ++bi)
        for (int is_i8 = 1; is_i8 >= 0; --is_i8) {
            const int batch = batches[bi];
            float sum[2] = {0, 0}, sum_best = 0;
            printf("%-5s batch %-3d %-28s %9s %9s %7s  %s\n", is_i8 ? "int8" : "fp16", batch,
                   "layer", "implicit", "gemm", "ratio", "agreement");
            for (int l = 0; l < 8; ++l) {
                const bench_layer *L = bench_yolo_layer(l + 1);
                const size_t es = is_i8 ? 1 : 2;
                const int gran = is_i8 ? 16 : 8;
                const int cin_pad = (L->in_c + gran - 1) / gran * gran;
                const int cout_pad = (L->out_c + gran - 1) / gran * gran;
                const int out_hw = L->pool_stride == 2 ? L->hw / 2 : L->hw;
                const int head = l == 7;
                const size_t in_bytes = (size_t)batch * L->hw * L->hw * cin_pad * es;
                const size_t w_bytes = (size_t)L->out_c * L->ksize * L->ksize * cin_pad * es;
                const size_t out_elems = head ? (size_t)batch * L->hw * L->hw * L->out_c
                                              : (size_t)batch * out_hw * out_hw * cout_pad;
                const size_t out_bytes = out_elems * (head ? 4 : es);
                void *in = bench_random_device(&rng, in_bytes, is_i8 ? BENCH_BYTES : BENCH_HALVES);
                void *w = bench_random_device(&rng, w_bytes, is_i8 ? BENCH_BYTES : BENCH_HALVES);
                void *bias = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
                void *mul = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
                void *out[2];
                CHECK(cudaMalloc(&out[0], out_bytes));
                CHECK(cudaMalloc(&out[1], out_bytes));
                gr_conv_args a;
                memset(&a, 0, sizeof a);
                a.batch = batch;
                a.in_h = a.in_w = L->hw;
                a.in_c = L->in_c;
                a.in_c_stride = cin_pad;
                a.out_c = L->out_c;
                a.out_c_stride = head ? L->out_c : cout_pad;
                a.ksize = L->ksize;
                a.stride = 1;
                a.pad = L->ksize / 2;
                a.in = in;
                a.weights = w;
                a.bias = bias;
                a.mul = is_i8 ? mul : NULL;
                a.activation = L->act;
                a.out_kind = head ? GR_CONV_OUT_F32_NCHW : (is_i8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16);
                a.out_inv_scale = 20.0f;
                a.pool_size = L->pool_stride ? 2 : 0;
                a.pool_stride = L->pool_stride;
                a.pool_pad = L->pool_stride ? 1 : 0;
                a.workspace = ws;
                a.workspace_bytes = ws_bytes;
                gr_conv_gemm *g = NULL;
                size_t scratch_bytes = 0;
                gr_conv_args ga = a;
                ga.workspace = NULL;
                ga.workspace_bytes = 0;
                cudaError_t ce = gr_conv_gemm_create(&ga, is_i8, lt, &g, &scratch_bytes);
                char shape[64];
                snprintf(shape, sizeof shape, "%d: %dx%d %d->%d k%d%s", l + 2, L->hw, L->hw,
                         L->in_c, L->out_c, L->ksize,
                         L->pool_stride == 2 ? " +pool2/2" : L->pool_stride ? " +pool2/1" : "");
                a.out = out[0];
                const float t0 = time_us(0, &a, is_i8, NULL, NULL, runs, ms, ev0, ev1, st);
                sum[0] += t0;
                if (ce != cudaSuccess) {
                    printf("%-5s batch %-3d %-28s %9.2f %9s  (gemm tactic: %s)\n",
                           is_i8 ? "int8" : "fp16", batch, shape, (double)t0, "-",
                           gr_kernels_last_failure());
                    sum[1] += t0;
                    sum_best += t0;
                } else {
                    void *scratch = NULL;
                    CHECK(cudaMalloc(&scratch, scratch_bytes));
                    ga.out = out[1];
                    ga.in = in;
                    const float t1 = time_us(1, &ga, is_i8, g, scratch, runs, ms, ev0, ev1, st);
                    sum[1] += t1;
                    sum_best += t1 < t0 ? t1 : t0;
                    /* agreement */
                    unsigned char *h0 = malloc(out_bytes), *h1 = malloc(out_bytes);
                    CHECK(cudaMemcpy(h0, out[0], out_bytes, cudaMemcpyDeviceToHost));
                    CHECK(cudaMemcpy(h1, out[1], out_bytes, cudaMemcpyDeviceToHost));
                    const int kind = head ? 2 : (is_i8 ? 0 : 1);
                    double lo = 1e300, hi = -1e300, worst = 0;
                    size_t differ = 0;
                    for (size_t i = 0; i < out_elems; ++i) {
                        const double x = as_double(h0, i, kind), y = as_double(h1, i, kind);
                        lo = x < lo ? x : lo;
                        hi = x > hi ? x : hi;
                        worst = fabs(x - y) > worst ? fabs(x - y) : worst;
                        differ += x != y;
                    }
                    const double rel = hi > lo ? worst / (hi - lo) : worst;
                    /* int8 sums are exact: any difference is a bug. fp16: f32 sums of 9*1024
                     * products in another order, then a half rounding: a few half ulps. */
                    const int bad = is_i8 ? differ != 0 : rel > 1e-2;
                    failures += bad;
                    printf("%-5s batch %-3d %-28s %9.2f %9.2f %7.2f  %zu differ, max %.3g of range%s\n",
                           is_i8 ? "int8" : "fp16", batch, shape, (double)t0, (double)t1,
                           (double)(t0 / t1), differ, rel, bad ? "  MISMATCH" : "");
                    free(h0);
                    free(h1);
                    CHECK(cudaFree(scratch));
                    gr_conv_gemm_destroy(g);
                }
                CHECK(cudaFree(in));
                CHECK(cudaFree(w));
                CHECK(cudaFree(bias));
                CHECK(cudaFree(mul));
                CHECK(cudaFree(out[0]));
                CHECK(cudaFree(out[1]));
            }
            printf("%-5s batch %-3d sum of layers 2-9: implicit %.1f us, gemm %.1f us, best per layer "
                   "%.1f us\n",
                   is_i8 ? "int8" : "fp16", batch, (double)sum[0], (double)sum[1], (double)sum_best);
        }
    free(ms);
    CHECK(cudaFree(ws));
    cublasLtDestroy(lt);
    printf("07_gemm: %s\n", failures ? "OUTPUT MISMATCH" : "outputs agree");
    return failures ? 1 : 0;
}
#endif
