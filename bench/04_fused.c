/* Benchmark 04: YOLOv2-tiny-VOC's nine convolutions (batch 1 by default) as the fused engine runs them
 * (kernels/conv.h): the first layer straight from the uint8 input with its maxpool, the 2x2
 * maxpools of layers 2-6 in the conv epilogues, the head writing f32 NCHW from the accumulator.
 * Random packed weights and inputs (never zeros). Per layer: the automatic choice and every tile
 * shape x split-K factor (median of event-timed single launches, which include the host
 * launcher: compare within a column); then the nine launches captured in one
 * CUDA graph (automatic, and the best tile and split per layer), with and without
 * programmatic dependent launch, replayed (median and p99 per
 * replay). Usage: 04_fused [runs [batch]]   (decisions: docs/performance.md) */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("04_fused: graphrun was built without CUDA\n");
    return 0;
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/conv.h"

#define BENCH_NAME "04_fused"
#include "bench/bench_util.h"

static cudaError_t launch(const gr_conv_args *a, int is_i8, cudaStream_t st)
{
    return is_i8 ? gr_launch_conv_i8(a, st) : gr_launch_conv_f16(a, st);
}

static float time_launch(const gr_conv_args *a, int is_i8, int runs, float *ms, cudaEvent_t ev0,
                         cudaEvent_t ev1, cudaStream_t st)
{
    for (int r = 0; r < 20 + runs; ++r) {
        CHECK(cudaEventRecord(ev0, st));
        CHECK(launch(a, is_i8, st));
        CHECK(cudaEventRecord(ev1, st));
        CHECK(cudaEventSynchronize(ev1));
        if (r >= 20)
            CHECK(cudaEventElapsedTime(&ms[r - 20], ev0, ev1));
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
    return 1000.0f * ms[runs / 2];
}

int main(int argc, char **argv)
{
    const int runs = argc > 1 ? atoi(argv[1]) : 200;
    const int batch = argc > 2 ? atoi(argv[2]) : 1;
    if (runs < 10 || runs > 100000 || batch < 1 || batch > 256) {
        fprintf(stderr, "usage: 04_fused [runs >= 10 [batch 1..256]]\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    if (bench_no_device(&prop))
        return 0;
    printf("04_fused: %s, %d SMs, batch %d, fused layers, %d runs per entry (median us)\n",
           prop.name, prop.multiProcessorCount, batch, runs);
    gr_rng rng;
    gr_rng_seed(&rng, 20261123);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev0, ev1;
    CHECK(cudaEventCreate(&ev0));
    CHECK(cudaEventCreate(&ev1));
    float *ms = malloc((size_t)runs * sizeof(float));
    const size_t ws_bytes = 64u << 20;
    void *ws = NULL;
    CHECK(cudaMalloc(&ws, ws_bytes));
    CHECK(cudaMemset(ws, 0, ws_bytes));

    static const int splits[] = {1, 2, 4, 8};
    for (int is_i8 = 1; is_i8 >= 0; --is_i8) {
        gr_conv_args args[9];
        void *allocs[9][5];
        const size_t es = is_i8 ? 1 : 2;
        const int gran = is_i8 ? 16 : 8;
        /* Each layer reads its own input buffer (so single-layer timings see a real input);
         * the graph chains them through the same buffers. */
        for (int l = 0; l < 9; ++l) {
            const bench_layer *L = bench_yolo_layer(l);
            const int first = l == 0;
            const int cin_pad = first ? 3 : (L->in_c + gran - 1) / gran * gran;
            const int cout_pad = (L->out_c + gran - 1) / gran * gran;
            const int out_hw = L->pool_stride == 2 ? L->hw / 2 : L->hw;
            const int head = l == 8;
            const size_t in_bytes = (size_t)batch * L->hw * L->hw * cin_pad * (first ? 1 : es);
            const size_t w_bytes =
                (size_t)L->out_c * L->ksize * L->ksize * ((L->in_c + gran - 1) / gran * gran) * es;
            const size_t out_bytes =
                (size_t)batch * (head ? (size_t)L->hw * L->hw * L->out_c * 4
                                      : (size_t)out_hw * out_hw * cout_pad * es);
            allocs[l][0] = bench_random_device(&rng, in_bytes, first || is_i8 ? BENCH_BYTES : BENCH_HALVES);
            allocs[l][1] = bench_random_device(&rng, w_bytes, is_i8 ? BENCH_BYTES : BENCH_HALVES);
            allocs[l][2] = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
            allocs[l][3] = bench_random_device(&rng, (size_t)L->out_c * 4, BENCH_FLOATS);
            CHECK(cudaMalloc(&allocs[l][4], out_bytes));
            gr_conv_args *a = &args[l];
            memset(a, 0, sizeof *a);
            a->batch = batch;
            a->in_h = a->in_w = L->hw;
            a->in_c = L->in_c;
            a->in_c_stride = cin_pad;
            a->out_c = L->out_c;
            a->out_c_stride = head ? L->out_c : cout_pad;
            a->ksize = L->ksize;
            a->stride = 1;
            a->pad = L->ksize / 2;
            a->in = allocs[l][0];
            a->weights = allocs[l][1];
            a->bias = allocs[l][2];
            a->mul = is_i8 ? allocs[l][3] : NULL;
            a->out = allocs[l][4];
            a->activation = L->act;
            a->out_kind = head ? GR_CONV_OUT_F32_NCHW : (is_i8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16);
            a->out_inv_scale = 20.0f;
            a->pool_size = L->pool_stride ? 2 : 0;
            a->pool_stride = L->pool_stride;
            a->pool_pad = L->pool_stride ? 1 : 0;
            a->in_u8 = first;
            a->in_scale = 1.0f / 127.0f;
            a->workspace = first ? NULL : ws;
            a->workspace_bytes = first ? 0 : ws_bytes;
        }
        printf("%-5s %-5s %-28s %8s   (tile x split-K: median us)\n", is_i8 ? "int8" : "fp16",
               "layer", "shape", "auto");
        double sum_auto = 0, sum_best = 0;
        int best_split[9], best_tile[9];
        for (int l = 0; l < 9; ++l) {
            const bench_layer *L = bench_yolo_layer(l);
            gr_conv_args a = args[l];
            const float t_auto = time_launch(&a, is_i8, runs, ms, ev0, ev1, st);
            float best = t_auto;
            best_split[l] = best_tile[l] = 0;
            char shape[64];
            snprintf(shape, sizeof shape, "%dx%d %d->%d k%d%s", L->hw, L->hw, L->in_c, L->out_c,
                     L->ksize, L->pool_stride == 2 ? " +pool2/2" : L->pool_stride ? " +pool2/1" : "");
            printf("%-5s %-5d %-28s %8.2f ", is_i8 ? "int8" : "fp16", l + 1, shape, (double)t_auto);
            for (int t = 1; t <= GR_CONV_TILES && l > 0; ++t)
                for (size_t s = 0; s < sizeof splits / sizeof splits[0]; ++s) {
                    a.tile_config = t;
                    a.split_k = splits[s];
                    if (t >= GR_CONV_TILE_STREAM && s > 0)
                        break; /* the stream tiles never split */
                    const size_t need =
                        is_i8 ? gr_conv_workspace_bytes_i8(&a) : gr_conv_workspace_bytes_f16(&a);
                    if (gr_conv_check(&a, is_i8) != cudaSuccess || need > ws_bytes) {
                        printf(" %s/%d:-", gr_conv_tile_name(t), splits[s]);
                        gr_kernels_clear_failure();
                        continue;
                    }
                    const float tm = time_launch(&a, is_i8, runs, ms, ev0, ev1, st);
                    printf(" %s/%d:%.1f", gr_conv_tile_name(t), splits[s], (double)tm);
                    if (tm < best) {
                        best = tm;
                        best_split[l] = splits[s];
                        best_tile[l] = t;
                    }
                }
            printf("\n");
            sum_auto += (double)t_auto;
            sum_best += (double)best;
        }
        printf("%s: sum of medians %.1f us (auto), %.1f us (best tile and split per layer)\n",
               is_i8 ? "int8" : "fp16", sum_auto, sum_best);

        /* The chain in one graph: layer l reads layer l-1's output. */
        for (int l = 1; l < 9; ++l)
            args[l].in = args[l - 1].out;
        for (int variant = 0; variant < 4; ++variant) {
            const int pdl = variant & 1, tuned = variant >> 1;
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            for (int l = 0; l < 9; ++l) {
                gr_conv_args a = args[l];
                a.pdl = pdl;
                a.split_k = tuned ? best_split[l] : 0;
                a.tile_config = tuned ? best_tile[l] : 0;
                CHECK(launch(&a, is_i8, st));
            }
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
            qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_float);
            printf("%s: 9-conv graph, %s splits, PDL %s: median %.1f us, p99 %.1f us\n",
                   is_i8 ? "int8" : "fp16", tuned ? "best" : "auto", pdl ? "on " : "off",
                   1000.0 * (double)ms[runs / 2], 1000.0 * (double)ms[(int)(runs * 0.99)]);
            CHECK(cudaGraphExecDestroy(exec));
            CHECK(cudaGraphDestroy(graph));
        }
        for (int l = 0; l < 9; ++l)
            for (int b = 0; b < 5; ++b)
                CHECK(cudaFree(allocs[l][b]));
    }
    CHECK(cudaFree(ws));
    CHECK(cudaEventDestroy(ev0));
    CHECK(cudaEventDestroy(ev1));
    CHECK(cudaStreamDestroy(st));
    free(ms);
    return 0;
}
#endif
