/* Benchmark 01: the nine YOLOv2-tiny-VOC convolutions at batch 1 through the tensor-core kernels
 * (kernels/conv.h), FP16 and INT8, with random data (never zeros). For each layer: every tile shape
 * and the automatic choice (with a split-K workspace), and the automatic choice without one, each
 * timed with CUDA events around single launches (20 warm-up runs, then 200 timed; median and p99),
 * plus the nine automatic launches captured in one CUDA graph and replayed 200 times (median per
 * replay: the whole network's conv time without launch gaps). Usage: 01_conv [runs]   (results go
 * to stdout; decisions made from them: docs/performance.md) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("01_conv: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/conv.h"

#define BENCH_NAME "01_conv"
#include "bench/bench_util.h"
#include "kernels/conv_weights.h"

typedef struct layer {
    int hw, in_c, out_c, ksize, act;
} layer;

/* yolov2-tiny-voc.cfg: 416x416 input, maxpools between the first six convs. */
static const layer layers[9] = {
    {416, 3, 16, 3, GR_CONV_ACT_LEAKY},     {208, 16, 32, 3, GR_CONV_ACT_LEAKY},
    {104, 32, 64, 3, GR_CONV_ACT_LEAKY},    {52, 64, 128, 3, GR_CONV_ACT_LEAKY},
    {26, 128, 256, 3, GR_CONV_ACT_LEAKY},   {13, 256, 512, 3, GR_CONV_ACT_LEAKY},
    {13, 512, 1024, 3, GR_CONV_ACT_LEAKY},  {13, 1024, 1024, 3, GR_CONV_ACT_LEAKY},
    {13, 1024, 125, 1, GR_CONV_ACT_LINEAR},
};

typedef struct stats {
    float median_us, p99_us;
} stats;

static stats summarize(float *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, bench_cmp_float);
    stats s;
    s.median_us = 1000.0f * ms[n / 2];
    s.p99_us = 1000.0f * ms[(int)((double)n * 0.99)];
    return s;
}

static int time_launch(gr_conv_args *a, int is_i8, int runs, float *ms, cudaEvent_t ev0,
                       cudaEvent_t ev1, cudaStream_t st, stats *out)
{
    for (int r = 0; r < 20 + runs; ++r) {
        CHECK(cudaEventRecord(ev0, st));
        CHECK(is_i8 ? gr_launch_conv_i8(a, st) : gr_launch_conv_f16(a, st));
        CHECK(cudaEventRecord(ev1, st));
        CHECK(cudaEventSynchronize(ev1));
        if (r >= 20)
            CHECK(cudaEventElapsedTime(&ms[r - 20], ev0, ev1));
    }
    *out = summarize(ms, runs);
    return 0;
}

int main(int argc, char **argv)
{
    const int runs = bench_runs_arg(argc, argv, 200);
    if (runs < 0)
        return 2;
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    printf("01_conv: %s, %d SMs, batch 1, %d timed runs per entry (median / p99 in us)\n",
           prop.name, prop.multiProcessorCount, runs);

    gr_rng rng;
    gr_rng_seed(&rng, 20261122);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev0, ev1;
    CHECK(cudaEventCreate(&ev0));
    CHECK(cudaEventCreate(&ev1));
    float *ms = malloc((size_t)runs * sizeof(float));
    if (!ms)
        return 1;

    gr_conv_args args[2][9];
    void *bufs[2][9][5];
    double flops[9];
    size_t ws_bytes = 0;
    for (int p = 0; p < 2; ++p) { /* 0: fp16, 1: int8 */
        const int is_i8 = p;
        for (int l = 0; l < 9; ++l) {
            const layer *L = &layers[l];
            const int gran_in = is_i8 ? 16 : 8, gran_out = is_i8 ? 16 : 8;
            const int cin_pad = (L->in_c + gran_in - 1) / gran_in * gran_in;
            const int cout_pad = (L->out_c + gran_out - 1) / gran_out * gran_out;
            const int pad = L->ksize / 2;
            const size_t es = is_i8 ? 1 : 2;
            const size_t n_in = (size_t)L->hw * L->hw * cin_pad;
            const size_t n_out = (size_t)L->hw * L->hw * cout_pad;
            const size_t n_wf = (size_t)L->out_c * L->in_c * L->ksize * L->ksize;
            const size_t n_w = gr_conv_weights_count(L->out_c, L->in_c, L->ksize, gran_in);
            flops[l] = 2.0 * L->hw * L->hw * (double)n_wf;
            unsigned char *in = malloc(n_in * es);
            float *wf = malloc(n_wf * sizeof(float));
            unsigned char *wp = malloc(n_w * es);
            float *vec = malloc((size_t)L->out_c * sizeof(float));
            float *scale = malloc((size_t)L->out_c * sizeof(float));
            int8_t *qw = malloc(n_wf);
            if (!in || !wf || !wp || !vec || !scale || !qw)
                return 1;
            for (size_t i = 0; i < n_in; ++i) { /* padding channels must be 0 */
                const int ch = (int)(i % (size_t)cin_pad);
                const float v = ch < L->in_c ? gr_rng_uniform(&rng) : 0.0f;
                if (is_i8)
                    in[i] = (unsigned char)(int8_t)(v * 127.0f);
                else
                    ((uint16_t *)in)[i] = gr_f32_to_f16(v);
            }
            for (size_t i = 0; i < n_wf; ++i)
                wf[i] = gr_rng_normal(&rng) * 0.05f;
            /* int8: the same weights in steps of one scale for every filter (0.2 / 127, about the
             * largest of each filter's N(0, 0.05) weights); the timing does not depend on it. */
            const float s_w = 0.2f / 127.0f;
            for (size_t i = 0; i < n_wf; ++i)
                qw[i] = (int8_t)fminf(fmaxf(rintf(wf[i] / s_w), -127.0f), 127.0f);
            for (int c = 0; c < L->out_c; ++c)
                scale[c] = s_w;
            if (is_i8)
                gr_conv_weights_relayout_i8(qw, L->out_c, L->in_c, L->ksize, (int8_t *)wp);
            else
                gr_conv_weights_relayout_f16(wf, L->out_c, L->in_c, L->ksize, (uint16_t *)wp);
            for (int c = 0; c < L->out_c; ++c)
                vec[c] = 0.1f * gr_rng_normal(&rng);
            for (int b = 0; b < 5; ++b)
                bufs[p][l][b] = NULL;
            CHECK(cudaMalloc(&bufs[p][l][0], n_in * es));
            CHECK(cudaMalloc(&bufs[p][l][1], n_w * es));
            CHECK(cudaMalloc(&bufs[p][l][2], (size_t)L->out_c * sizeof(float)));
            CHECK(cudaMalloc(&bufs[p][l][3], (size_t)L->out_c * sizeof(float)));
            CHECK(cudaMalloc(&bufs[p][l][4], n_out * es));
            CHECK(cudaMemcpy(bufs[p][l][0], in, n_in * es, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(bufs[p][l][1], wp, n_w * es, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(bufs[p][l][2], vec, (size_t)L->out_c * sizeof(float),
                             cudaMemcpyHostToDevice));
            for (int c = 0; c < L->out_c; ++c)
                scale[c] *= 1.0f / 127.0f; /* mul = s_in * s_w */
            CHECK(cudaMemcpy(bufs[p][l][3], scale, (size_t)L->out_c * sizeof(float),
                             cudaMemcpyHostToDevice));
            free(in);
            free(wf);
            free(wp);
            free(vec);
            free(scale);
            free(qw);

            gr_conv_args *a = &args[p][l];
            memset(a, 0, sizeof *a);
            a->batch = 1;
            a->in_h = a->in_w = L->hw;
            a->in_c = L->in_c;
            a->in_c_stride = cin_pad;
            a->out_c = L->out_c;
            a->out_c_stride = cout_pad;
            a->ksize = L->ksize;
            a->stride = 1;
            a->pad = pad;
            a->in = bufs[p][l][0];
            a->weights = bufs[p][l][1];
            a->bias = bufs[p][l][2];
            a->mul = is_i8 ? bufs[p][l][3] : NULL;
            a->out = bufs[p][l][4];
            a->activation = L->act;
            a->out_kind = is_i8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16;
            a->out_inv_scale = 20.0f;
            for (int t = 0; t <= GR_CONV_TILES; ++t) {
                a->tile_config = t;
                const size_t ws =
                    is_i8 ? gr_conv_workspace_bytes_i8(a) : gr_conv_workspace_bytes_f16(a);
                ws_bytes = ws > ws_bytes ? ws : ws_bytes;
            }
            a->tile_config = 0;
        }
    }
    /* One split-K workspace for every launch: they run one at a time on one stream. */
    void *ws = NULL;
    CHECK(cudaMalloc(&ws, ws_bytes ? ws_bytes : 256));
    CHECK(cudaMemset(ws, 0, ws_bytes ? ws_bytes : 256));
    for (int p = 0; p < 2; ++p)
        for (int l = 0; l < 9; ++l) {
            args[p][l].workspace = ws;
            args[p][l].workspace_bytes = ws_bytes;
        }

    printf("split-K workspace %zu bytes; 'nosplit' = automatic tile without a workspace\n",
           ws_bytes);
    printf("%-5s %-4s %-22s %8s %8s %8s %8s %8s %8s %8s\n", "prec", "layer", "shape", "auto", "p99",
           "nosplit", "128x64", "64x64", "128x16", "32x64");
    double total_auto[2] = {0, 0}, total_best[2] = {0, 0};
    for (int p = 0; p < 2; ++p)
        for (int l = 0; l < 9; ++l) {
            const layer *L = &layers[l];
            gr_conv_args a = args[p][l];
            stats s_auto, s_nosplit, s_tile[GR_CONV_TILES];
            float best = 1e30f;
            a.tile_config = 0;
            if (time_launch(&a, p, runs, ms, ev0, ev1, st, &s_auto))
                return 1;
            a.workspace = NULL;
            if (time_launch(&a, p, runs, ms, ev0, ev1, st, &s_nosplit))
                return 1;
            a.workspace = args[p][l].workspace;
            for (int t = 1; t <= GR_CONV_TILES; ++t) {
                a.tile_config = t;
                if (time_launch(&a, p, runs, ms, ev0, ev1, st, &s_tile[t - 1]))
                    return 1;
                best = fminf(best, s_tile[t - 1].median_us);
            }
            char shape[64];
            snprintf(shape, sizeof shape, "%dx%d %d->%d k%d", L->hw, L->hw, L->in_c, L->out_c,
                     L->ksize);
            printf("%-5s %-4d %-22s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %6.1f TOPS\n",
                   p ? "int8" : "fp16", l + 1, shape, (double)s_auto.median_us,
                   (double)s_auto.p99_us, (double)s_nosplit.median_us, (double)s_tile[0].median_us,
                   (double)s_tile[1].median_us, (double)s_tile[2].median_us,
                   (double)s_tile[3].median_us, flops[l] / (double)s_auto.median_us * 1e-6);
            total_auto[p] += (double)s_auto.median_us;
            total_best[p] += (double)best;
        }

    /* Whole network's convs in one graph (automatic tiles), per precision. */
    for (int p = 0; p < 2; ++p) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < 9; ++l)
            CHECK(p ? gr_launch_conv_i8(&args[p][l], st) : gr_launch_conv_f16(&args[p][l], st));
        CHECK(cudaStreamEndCapture(st, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int r = 0; r < 20 + runs; ++r) {
            CHECK(cudaEventRecord(ev0, st));
            CHECK(cudaGraphLaunch(exec, st));
            CHECK(cudaEventRecord(ev1, st));
            CHECK(cudaEventSynchronize(ev1));
            if (r >= 20)
                CHECK(cudaEventElapsedTime(&ms[r - 20], ev0, ev1));
        }
        const stats s = summarize(ms, runs);
        printf("%s: sum of per-layer medians %.1f us (auto tiles), %.1f us (best tile per layer); "
               "9-conv graph replay median %.1f us, p99 %.1f us\n",
               p ? "int8" : "fp16", total_auto[p], total_best[p], (double)s.median_us,
               (double)s.p99_us);
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
    }

    for (int p = 0; p < 2; ++p)
        for (int l = 0; l < 9; ++l)
            for (int b = 0; b < 5; ++b)
                CHECK(cudaFree(bufs[p][l][b]));
    CHECK(cudaFree(ws));
    CHECK(cudaEventDestroy(ev0));
    CHECK(cudaEventDestroy(ev1));
    CHECK(cudaStreamDestroy(st));
    free(ms);
    return 0;
}
#endif
