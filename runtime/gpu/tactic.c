/* Per-conv tactic selection at engine build, by measurement (docs/tactics.md).
 *
 * For every tensor-core conv of a variant (the first layer too: its SIMT kernel is the automatic
 * tactic, the tensor-core first-layer kernel, tile 5, and for 17-32 filters the same at two blocks
 * per SM, tile 6, the other candidates) the candidates are the
 * automatic tactic (tile_config 0, split_k 0) and every tile shape the
 * kernels accept for the layer crossed with split_k in {1,2,3,4,6,8,12,16}, fewer where two give
 * the same launch (same tile and same workspace size: the kernel clamps the split to the K steps,
 * and ignores it with fp16 accumulation) or the split-K workspace would exceed 32 MiB (a layer
 * with that many tiles fills the GPU without splitting); plus the GEMM tactic
 * (kernels/conv_gemm.h: im2col + cuBLASLt + epilogue) where it applies. Each runs on the node's
 * real buffers of instance 0 with deterministic non-zero input (never zeros, which would time the
 * easy case and hide numerics bugs); its output must match the automatic tactic's on the same
 * input - int8 bit-identical (int32 sums are exact whatever the tile or split), fp16 NRMSE <= 1e-3
 * - before it is timed: one launch doubles as check and warm-up, then 1 to 7 launches bracketed by
 * CUDA events (time_candidate: an early cut-off, fewer launches when they agree). All of it on
 * the conv's first rep_batch() images, a grid that already fills the GPU 8 times over, so the
 * choice holds for the whole batch and the timing-cache key names that batch (engines of larger
 * batches share it). The fastest wins; a candidate less than 2% faster than the automatic
 * tactic does not replace it (timing noise would otherwise flip choices from build to build).
 *
 * A timing-cache hit (runtime/timing_cache.h) is not trusted blindly either: the cached tactic
 * must pass the kernels' argument checks and the numerics check (two untimed launches) or the
 * layer is measured again. A saved engine's own tactics pass the argument checks only: they were
 * checked at its build, on the device identity its load requires (gpu_state.tcache_trusted).
 *
 * Invariants: everything runs on the engine's first stream before the scratch is sized and the
 * graph captured; nothing here is captured. The arena is left zeroed, as instance_alloc left it
 * (the search writes inputs and outputs of every conv it times). */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "kernels/common.h"
#include "kernels/search.h"
#include "base/base.h"
#include "runtime/gpu/backend.h"
#include "runtime/timing_cache.h"

/* Timed launches: FIRST_RUNS (one, the early cut-off's), then up to SETTLE_RUNS, then up to
 * TIMED_RUNS in all when the spread is large (time_candidate). */
enum { TIMED_RUNS = 7, SETTLE_RUNS = 3, N_SPLITS = 8, MAX_CANDIDATES = 2 + GR_CONV_TILES * N_SPLITS };
/* A candidate whose first timed launch is this much slower than the best median so far cannot
 * win (launch-to-launch spread on the H100 is a few %): not timed further. */
static const double cut_off_ratio = 1.5;
/* Three launches within 3% of their median: the median of three is as good as of seven. */
static const double settled_spread = 0.03;
/* The search times a conv on its first rep_batch() images: enough for rep_waves waves of the
 * largest tile (128x64 outputs) on every SM. A grid that fills the GPU that many times over picks
 * the same tile and split as a larger one (the tail wave is <= 1/8 of the time, split-K never
 * pays), so the choice holds for the whole batch (docs/tactics.md, "Representative batch"). */
enum { REP_WAVES = 8, REP_TILE_ELEMS = 128 * 64 };
/* The GEMM tactic's code in the timing cache's tile field (split 0). */
enum { TILE_GEMM = 16 };
static const int split_choices[N_SPLITS] = {1, 2, 3, 4, 6, 8, 12, 16};
static const size_t max_candidate_workspace = 32u << 20;
/* The GEMM tactic's scratch (im2col matrix, accumulator, cuBLASLt workspace) per launch, shared
 * by a stream's GEMM nodes (gr_gpu_alloc_scratch) and held once per run in flight. 512 MiB: the
 * 13x13x1024 layer at batch 64 needs 144 MiB and wins 3x there (bench/07_gemm, H100). */
static const size_t max_gemm_scratch = 512u << 20;
/* fp16 outputs: accumulation is f32 in every tactic, only the order of the K sum changes (tiles
 * and split parts). That moves an f32 sum by a few f32 ulps relative to |sum|, which flips the
 * final f16 rounding of some outputs by one f16 ulp (2^-11 relative): an NRMSE of about 1e-4 at
 * worst if every element flipped. 1e-3 leaves headroom for fp16-accumulate layers while a wrong
 * tactic (a missed K part, a race in the split reduction) gives O(1). */
static const double fp16_max_nrmse = 1e-3;
static const double keep_auto_ratio = 0.98;
/* fp32 candidates are all FP32-level (SGEMM and the direct kernel exact FP32 products, 3xTF32
 * within a few FP32 ulps per product): they differ from the reference in the K sum's order, whose
 * random-signed roundings grow like sqrt(K) x 2^-24 relative (4e-6 for K = 4,608).
 * test_gpu_gemm_f32 holds every algorithm within 1e-5 of the CPU on whole networks; a wrong
 * candidate (a lost K part, a race in the split-K sum) gives O(1). */
static const double f32_max_nrmse = 1e-5;
/* gate_wait gives up after gate_max_us; a hold launch that took gate_blocked_us blocked on it. */
static const double gate_max_us = 1e5, gate_blocked_us = 5e4;

typedef struct candidate {
    int tile, split;
    size_t ws;               /* split-K workspace */
    int gemm;                /* the GEMM tactic: plan and scratch bytes */
    gr_conv_gemm *plan;
    size_t scratch;
} candidate;

typedef struct search_ctx {
    gr_engine *e;
    gpu_state *g;
    gpu_variant *v;
    cudaStream_t stream;
    cudaEvent_t ev[TIMED_RUNS + 1];
    void *ws;            /* split-K workspace for the candidates, zeroed when allocated */
    size_t ws_bytes;
    void *gemm_scratch;  /* the GEMM tactic's scratch */
    size_t gemm_scratch_bytes;
    uint8_t *ref;        /* device: the automatic tactic's output, dense */
    size_t ref_bytes;
    gr_search_diff *diff, *diff_host; /* the comparison's result: device, pinned host */
    atomic_int gate;     /* 0 holds the stream before a timed batch of launches (gate_wait) */
    int no_gate;         /* launches block until the stream moves: time without the gate */
} search_ctx;

/* Where a conv's output lives: rows of `width` bytes every `pitch` bytes (NHWC: one row per
 * pixel, the conv's own channel slice; NCHW: one row per image, its channel slice's planes). */
typedef struct out_region {
    uint8_t *dev;
    size_t pitch, width, height;
    int elem;            /* 1 i8, 2 f16, 4 f32 */
    unsigned char poison; /* a byte pattern no correct run leaves: -128 for i8, NaN otherwise */
} out_region;

void gr_gpu_tactic_name(int tile, int split, char *buf, size_t len)
{
    if (tile == TILE_GEMM)
        snprintf(buf, len, "gemm (cuBLASLt)");
    else if (tile == 0 && split == 0)
        snprintf(buf, len, "auto");
    else if (split > 1)
        snprintf(buf, len, "%s split %d", gr_conv_tile_name(tile), split);
    else if (split == 0)
        snprintf(buf, len, "%s split auto", gr_conv_tile_name(tile));
    else
        snprintf(buf, len, "%s", gr_conv_tile_name(tile));
}

gr_status gr_gpu_device_key(const gpu_state *g, char *key, size_t len)
{
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, g->device));
    int runtime = 0, driver = 0;
    CUDA_TRY(cudaRuntimeGetVersion(&runtime));
    CUDA_TRY(cudaDriverGetVersion(&driver));
    snprintf(key, len, "%.100s; sm_%d%d; %d SMs; CUDA runtime %d; driver %d; cuBLASLt %zu",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, runtime, driver,
             (size_t)cublasLtGetVersion());
    return GR_OK;
}

/* Everything a tactic's speed depends on besides the GPU: dtype, shapes, strides, fusions. */
static void layer_key(const gr_conv_args *a, int is_i8, char *key, size_t len)
{
    snprintf(key, len,
             "%s:n%d:in%dx%dx%d/%d+%d:out%d/%d+%d:k%ds%dp%d:act%d:o%d:acc%d:pool%d.%d.%d",
             is_i8 ? "i8" : "f16", a->batch, a->in_h, a->in_w, a->in_c, a->in_c_stride,
             a->in_c_offset, a->out_c, a->out_c_stride, a->out_c_offset, a->ksize, a->stride,
             a->pad, a->activation, (int)a->out_kind, a->fp16_accumulate, a->pool_size,
             a->pool_stride, a->pool_pad);
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* Images the search times a conv with an output of out_h x out_w x out_c per image (before a
 * fused pool): a power of two, so that batches above it share the timing-cache entry; at most
 * the batch. */
static int rep_batch(const gpu_state *g, int batch, int in_h, int in_w, int ksize, int stride,
                     int pad, int out_c)
{
    const int out_h = (in_h + 2 * pad - ksize) / stride + 1;
    const int out_w = (in_w + 2 * pad - ksize) / stride + 1;
    const double per_image = (double)out_h * out_w * out_c;
    const double fill = (double)REP_WAVES * (g->sm_count > 0 ? g->sm_count : 1) * REP_TILE_ELEMS;
    int rep = 1;
    while (rep < batch && rep * per_image < fill)
        rep *= 2;
    return rep < batch ? rep : batch;
}

static size_t ws_bytes_of(const gr_conv_args *a, int is_i8)
{
    return is_i8 ? gr_conv_workspace_bytes_i8(a) : gr_conv_workspace_bytes_f16(a);
}

/* Deterministic non-zero values in the conv's input channels (padding channels 0, as the
 * kernels require): i8 in [-127, -1] u [1, 127], f16 of magnitude in [1/16, 2); the first
 * layer's uint8 network input (in_u8, unpadded) in [1, 255] (kernels/search.h). Written on the
 * device, ordered before the launches on the search's stream. */
static gr_status fill_input(search_ctx *s, const gpu_conv *c, int index)
{
    const double start = gr_now_us();
    const gr_plan *plan = s->v->plan;
    const gr_plan_tensor *x = &plan->tensors[plan->nodes[index].inputs[0]];
    const int u8 = c->tc.in_u8;
    const int elem = c->is_i8 || u8 ? 1 : 2;
    const size_t cin_pad = u8 ? (size_t)x->c : (size_t)round_up(x->c, c->is_i8 ? 16 : 8);
    const size_t pixels = (size_t)c->tc.batch * x->h * x->w; /* the images timed */
    uint8_t *dev = gr_gpu_tensor_storage(s->v, &s->v->inst[0], plan->nodes[index].inputs[0]) +
                   (size_t)x->c_offset * elem;
    const gr_search_fill_kind kind = u8 ? GR_SEARCH_FILL_U8
                                     : c->is_i8 ? GR_SEARCH_FILL_I8 : GR_SEARCH_FILL_F16;
    cudaError_t err = gr_launch_search_fill(dev, (size_t)x->c_stride * elem, pixels, cin_pad,
                                            (size_t)x->c, kind, 0x7ac71c + (uint64_t)index,
                                            s->stream);
    s->e->build_detail.search_fill_ms += (gr_now_us() - start) / 1e3;
    if (err != cudaSuccess)
        return gr_gpu_cuda_fail(err, "tactic search: input fill", __FILE__, __LINE__);
    return GR_OK;
}

/* Device room for the reference output of `bytes` (dense), and the comparison's result. */
static gr_status ensure_ref(search_ctx *s, size_t bytes)
{
    if (!s->diff) {
        CUDA_TRY(cudaMalloc((void **)&s->diff, sizeof *s->diff));
        CUDA_TRY(cudaMallocHost((void **)&s->diff_host, sizeof *s->diff_host));
    }
    if (bytes <= s->ref_bytes)
        return GR_OK;
    cudaFree(s->ref);
    s->ref = NULL;
    s->ref_bytes = 0;
    CUDA_TRY(cudaMalloc((void **)&s->ref, bytes));
    s->ref_bytes = bytes;
    return GR_OK;
}

static gr_status output_region(search_ctx *s, const gpu_conv *c, int index, out_region *r)
{
    const gr_plan *plan = s->v->plan;
    const gr_plan_tensor *y = &plan->tensors[plan->nodes[index].output];
    const gr_conv_args *a = &c->tc;
    if (a->out_kind == GR_CONV_OUT_F32_NCHW) {
        const size_t plane = (size_t)y->h * y->w * 4;
        r->elem = 4;
        r->dev = (uint8_t *)a->out + (size_t)a->out_c_offset * plane;
        r->width = (size_t)y->c * plane;
        r->pitch = (size_t)a->out_c_stride * plane;
        r->height = (size_t)a->batch;
    } else {
        r->elem = a->out_kind == GR_CONV_OUT_I8 ? 1 : a->out_kind == GR_CONV_OUT_F16 ? 2 : 4;
        const size_t c_pad = (size_t)round_up(y->c, a->out_kind == GR_CONV_OUT_I8 ? 16 : 8);
        r->dev = (uint8_t *)a->out + (size_t)a->out_c_offset * r->elem;
        r->pitch = (size_t)a->out_c_stride * r->elem;
        r->width = c_pad * r->elem;
        r->height = (size_t)a->batch * y->h * y->w;
    }
    r->poison = a->out_kind == GR_CONV_OUT_I8 ? 0x80 : 0xff;
    return ensure_ref(s, r->width * r->height);
}

/* An fp32 conv searched (one image block, one group) writes one dense NCHW block. */
static gr_status output_region_f32(search_ctx *s, const gpu_conv *c, int index, out_region *r)
{
    const gr_plan *plan = s->v->plan;
    const gr_plan_tensor *y = &plan->tensors[plan->nodes[index].output];
    r->elem = 4;
    r->dev = (uint8_t *)c->f32.out;
    r->width = (size_t)c->f32.batch * c->f32.out_c * y->h * y->w * 4;
    r->pitch = r->width;
    r->height = 1;
    r->poison = 0xff; /* NaN */
    return ensure_ref(s, r->width);
}

/* Deterministic non-zero floats, magnitude in [1/16, 1], in the fp32 conv's input block
 * (kernels/search.h). */
static gr_status fill_input_f32(search_ctx *s, const gpu_conv *c, int index)
{
    const gr_conv_f32_args *a = &c->f32;
    const size_t n = (size_t)a->batch * a->in_c * a->in_h * a->in_w;
    const double start = gr_now_us();
    cudaError_t err = gr_launch_search_fill((void *)a->in, n * sizeof(float), 1, n, n,
                                            GR_SEARCH_FILL_F32, 0xf32f32 + (uint64_t)index,
                                            s->stream);
    s->e->build_detail.search_fill_ms += (gr_now_us() - start) / 1e3;
    if (err != cudaSuccess)
        return gr_gpu_cuda_fail(err, "tactic search: fp32 input fill", __FILE__, __LINE__);
    return GR_OK;
}

static gr_status ensure_workspace(search_ctx *s, size_t bytes)
{
    if (bytes <= s->ws_bytes)
        return GR_OK;
    cudaFree(s->ws);
    s->ws = NULL;
    s->ws_bytes = 0;
    CUDA_TRY(cudaMalloc(&s->ws, bytes));
    CUDA_TRY(cudaMemset(s->ws, 0, bytes)); /* tile counters start at 0 (kernels/conv.h) */
    s->ws_bytes = bytes;
    return GR_OK;
}

/* An fp32 candidate: tile is its GR_CONV_F32_* algorithm, split its split-K parts, ws its
 * im2col + partial-sums workspace; cuBLAS on the engine's first stream's handle. */
static gr_status launch_f32(search_ctx *s, const gpu_conv *c, const candidate *k, int index)
{
    gr_conv_f32_args a = c->f32;
    a.algo = k->tile;
    a.splits = k->split;
    a.workspace = k->ws ? s->ws : NULL;
    cudaError_t cuda_err = cudaSuccess;
    gr_kernels_clear_failure();
    cublasStatus_t st = gr_launch_conv_f32(s->g->cublas[0], &a, s->stream, &cuda_err);
    if (st != CUBLAS_STATUS_SUCCESS)
        return gr_gpu_cublas_fail(st, cuda_err, s->v->plan, index);
    return GR_OK;
}

static gr_status launch(search_ctx *s, const gpu_conv *c, const candidate *k, int index)
{
    if (!c->tensor_cores)
        return launch_f32(s, c, k, index);
    if (k->gemm) {
        gr_kernels_clear_failure();
        cudaError_t err = gr_conv_gemm_launch(k->plan, &c->tc, s->gemm_scratch, s->stream);
        return gr_gpu_launch_status(err, s->v->plan, index);
    }
    gr_conv_args a = c->tc;
    a.tile_config = k->tile;
    a.split_k = k->split;
    a.workspace = k->ws ? s->ws : NULL;
    a.workspace_bytes = k->ws ? s->ws_bytes : 0;
    gr_kernels_clear_failure();
    cudaError_t err =
        c->is_i8 ? gr_launch_conv_i8(&a, s->stream) : gr_launch_conv_f16(&a, s->stream);
    return gr_gpu_launch_status(err, s->v->plan, index);
}

/* Poison the output and run the candidate once; then keep its output as the reference (`as_ref`:
 * a device copy) or compare it with the reference on the device (s->diff_host, for
 * outputs_match): a few bytes come back, not the output. The workspace is zeroed first: launches
 * of one tactic leave their tile counters at 0, but another tactic's counters may lie where the
 * previous one kept its partial sums. */
static gr_status run_once(search_ctx *s, const gpu_conv *c, const candidate *k, int index,
                          const out_region *r, int as_ref)
{
    double start = gr_now_us();
    if (k->ws)
        CUDA_TRY(cudaMemsetAsync(s->ws, 0, k->ws, s->stream));
    CUDA_TRY(cudaMemset2DAsync(r->dev, r->pitch, r->poison, r->width, r->height, s->stream));
    GR_TRY(launch(s, c, k, index));
    if (as_ref) {
        CUDA_TRY(cudaMemcpy2DAsync(s->ref, r->width, r->dev, r->pitch, r->width, r->height,
                                   cudaMemcpyDeviceToDevice, s->stream));
    } else {
        CUDA_TRY(cudaMemsetAsync(s->diff, 0, sizeof *s->diff, s->stream));
        cudaError_t err = gr_launch_search_compare(s->ref, r->dev, r->pitch, r->width, r->height,
                                                   r->elem, s->diff, s->stream);
        if (err != cudaSuccess)
            return gr_gpu_cuda_fail(err, "tactic search: output comparison", __FILE__, __LINE__);
        CUDA_TRY(cudaMemcpyAsync(s->diff_host, s->diff, sizeof *s->diff, cudaMemcpyDeviceToHost,
                                 s->stream));
        s->e->build_detail.checks++;
    }
    CUDA_TRY(cudaStreamSynchronize(s->stream));
    s->e->build_detail.search_check_ms += (gr_now_us() - start) / 1e3;
    return GR_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* A host function that holds its stream until the gate opens: the timed launches are all queued
 * before the first starts, so a kernel shorter than a launch call is timed, not the launch rate.
 * It only spins on an atomic (no CUDA calls, as host functions must). */
static void CUDART_CB gate_wait(void *arg)
{
    /* At most 100 ms: should a launch block until the stream moves (CUDA_LAUNCH_BLOCKING,
     * a tool serializing launches, another thread's device-wide sync), the hold ends by itself
     * and the timing is only less precise, instead of the build hanging. */
    atomic_int *gate = arg;
    double start = gr_now_us();
    while (!atomic_load(gate) && gr_now_us() - start < gate_max_us)
        ;
}

static gr_status enqueue_timed(search_ctx *s, const gpu_conv *c, const candidate *k, int index,
                              int runs)
{
    CUDA_TRY(cudaEventRecord(s->ev[0], s->stream));
    for (int r = 0; r < runs; r++) {
        GR_TRY(launch(s, c, k, index));
        CUDA_TRY(cudaEventRecord(s->ev[r + 1], s->stream));
    }
    return GR_OK;
}

/* `runs` back-to-back launches, each between two events, into ms[0..runs). */
static gr_status time_runs(search_ctx *s, const gpu_conv *c, const candidate *k, int index,
                           int runs, float *ms)
{
    if (!s->no_gate) {
        atomic_store(&s->gate, 0);
        double start = gr_now_us();
        cudaError_t err = cudaLaunchHostFunc(s->stream, gate_wait, &s->gate);
        if (err != cudaSuccess) {
            atomic_store(&s->gate, 1);
            return gr_gpu_cuda_fail(err, "cudaLaunchHostFunc (tactic timing)", __FILE__, __LINE__);
        }
        /* The launch waited for the hold to time out: launches block here
         * (CUDA_LAUNCH_BLOCKING=1, a tool serializing them). No more gates for this search. */
        s->no_gate = gr_now_us() - start > gate_blocked_us;
    }
    gr_status st = enqueue_timed(s, c, k, index, runs);
    atomic_store(&s->gate, 1); /* on every path: the stream must never stay held */
    GR_TRY(st);
    CUDA_TRY(cudaEventSynchronize(s->ev[runs]));
    for (int r = 0; r < runs; r++)
        CUDA_TRY(cudaEventElapsedTime(&ms[r], s->ev[r], s->ev[r + 1]));
    return GR_OK;
}

/* The candidate's median launch time (microseconds): one launch first - slower than
 * cut_off_ratio x best_us (0: no cut-off) and it stops there, *cut set; then two more, and the
 * median of those three when they agree within settled_spread, else of TIMED_RUNS. */
static gr_status time_candidate_runs(search_ctx *s, const gpu_conv *c, const candidate *k,
                                     int index, double best_us, double *us, int *cut)
{
    float ms[TIMED_RUNS];
    *cut = 0;
    GR_TRY(time_runs(s, c, k, index, 1, ms));
    s->e->build_detail.timed_launches++;
    if (best_us > 0.0 && 1e3 * (double)ms[0] > cut_off_ratio * best_us) {
        *us = 1e3 * (double)ms[0];
        *cut = 1;
        s->e->tactic_stats.cut++;
        return GR_OK;
    }
    GR_TRY(time_runs(s, c, k, index, SETTLE_RUNS - 1, ms + 1));
    s->e->build_detail.timed_launches += SETTLE_RUNS - 1;
    qsort(ms, SETTLE_RUNS, sizeof ms[0], cmp_float);
    if (ms[SETTLE_RUNS - 1] - ms[0] <= (float)settled_spread * ms[SETTLE_RUNS / 2]) {
        *us = 1e3 * (double)ms[SETTLE_RUNS / 2];
        return GR_OK;
    }
    GR_TRY(time_runs(s, c, k, index, TIMED_RUNS - SETTLE_RUNS, ms + SETTLE_RUNS));
    s->e->build_detail.timed_launches += TIMED_RUNS - SETTLE_RUNS;
    qsort(ms, TIMED_RUNS, sizeof ms[0], cmp_float);
    *us = 1e3 * (double)ms[TIMED_RUNS / 2];
    return GR_OK;
}

static gr_status time_candidate(search_ctx *s, const gpu_conv *c, const candidate *k, int index,
                                double best_us, double *us, int *cut)
{
    const double start = gr_now_us();
    gr_status st = time_candidate_runs(s, c, k, index, best_us, us, cut);
    s->e->build_detail.search_time_ms += (gr_now_us() - start) / 1e3;
    return st;
}

/* Does the candidate's output (compared on the device by run_once) match the automatic tactic's?
 * int8 convs: bit for bit. fp16 convs (f16, f32 or, in mixed precision, i8 outputs) and fp32
 * convs: NRMSE over the values (elements equal bit for bit count as exact; a non-finite value
 * where the other differs fails). */
static int outputs_match(const search_ctx *s, const gpu_conv *c)
{
    const gr_search_diff *d = s->diff_host;
    if (c->is_i8)
        return d->differ == 0;
    if (d->nonfinite)
        return 0;
    if (d->err2 == 0.0)
        return 1;
    const double max_nrmse = c->tensor_cores ? fp16_max_nrmse : f32_max_nrmse;
    return d->ref2 > 0.0 && sqrt(d->err2 / d->ref2) <= max_nrmse;
}

/* The candidates besides the automatic tactic: accepted by the kernels, distinct launches,
 * workspace within bounds. */
static int list_candidates(const gpu_conv *c, int full_batch, candidate *list)
{
    int n = 0;
    for (int tile = 1; tile <= GR_CONV_TILES; tile++)
        for (int k = 0; k < N_SPLITS; k++) {
            gr_conv_args a = c->tc;
            a.tile_config = tile;
            a.split_k = split_choices[k];
            gr_kernels_clear_failure();
            if (gr_conv_check(&a, c->is_i8) != cudaSuccess)
                continue;
            size_t ws = a.split_k > 1 ? ws_bytes_of(&a, c->is_i8) : 0;
            gr_conv_args whole = a; /* the checks and the bound hold for the batch it will run */
            whole.batch = full_batch;
            if (full_batch != a.batch && gr_conv_check(&whole, c->is_i8) != cudaSuccess)
                continue;
            size_t ws_whole = a.split_k > 1 ? ws_bytes_of(&whole, c->is_i8) : 0;
            if (ws_whole > max_candidate_workspace || (a.split_k > 1 && ws == 0))
                continue; /* too big, or the split does not happen: same as split 1 */
            int seen = 0;
            for (int j = 0; j < n && !seen; j++)
                seen = list[j].tile == tile && list[j].ws == ws;
            if (!seen)
                list[n++] = (candidate){tile, a.split_k, ws, 0, NULL, 0};
        }
    gr_kernels_clear_failure();
    return n;
}

static int gemm_candidate(search_ctx *s, const gpu_conv *c, int index, candidate *k);

/* Is a cached tactic one the kernels accept here, within the workspace bound? */
static int cached_candidate(search_ctx *s, const gpu_conv *c, int full_batch, int index,
                            const gr_tcache_entry *hit, candidate *k)
{
    if (hit->tile == TILE_GEMM)
        return hit->split == 0 && gemm_candidate(s, c, index, k);
    if (hit->tile < 0 || hit->tile > GR_CONV_TILES || hit->split < 0 || hit->split > 64)
        return 0;
    gr_conv_args a = c->tc;
    a.tile_config = hit->tile;
    a.split_k = hit->split;
    gr_kernels_clear_failure();
    int ok = gr_conv_check(&a, c->is_i8) == cudaSuccess;
    a.batch = full_batch; /* where it will run too */
    ok = ok && gr_conv_check(&a, c->is_i8) == cudaSuccess;
    gr_kernels_clear_failure();
    size_t ws = ok ? ws_bytes_of(&a, c->is_i8) : 0;
    if (!ok || ws > max_candidate_workspace)
        return 0;
    *k = (candidate){hit->tile, hit->split, ws, 0, NULL, 0};
    return 1;
}

/* The GEMM tactic as a candidate for node `index`: its plan goes to v->gemm[index] (owned by the
 * variant from here on, so no error path leaks it). 0 when it does not apply (fp16 accumulation,
 * no cuBLASLt algorithm for the shape, scratch too large) or is turned off: never an error, it is
 * only one more candidate. */
static int gemm_candidate(search_ctx *s, const gpu_conv *c, int index, candidate *k)
{
    gpu_state *g = s->g;
    if (!g->gemm_tactic || c->tc.fp16_accumulate)
        return 0;
    if (!g->lt && cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        g->lt = NULL;
        g->gemm_tactic = 0;
        return 0;
    }
    gr_conv_gemm_destroy(s->v->gemm[index]);
    s->v->gemm[index] = NULL;
    gr_conv_gemm *plan = NULL;
    size_t scratch = 0;
    gr_conv_args a = c->tc;
    a.workspace = NULL;
    a.workspace_bytes = 0;
    gr_kernels_clear_failure();
    const double start = gr_now_us();
    cudaError_t err = gr_conv_gemm_create(&a, c->is_i8, g->lt, &plan, &scratch);
    s->e->build_detail.search_gemm_ms += (gr_now_us() - start) / 1e3;
    gr_kernels_clear_failure();
    cudaGetLastError();
    if (err != cudaSuccess || !plan)
        return 0;
    if (scratch == 0 || scratch > max_gemm_scratch) {
        gr_conv_gemm_destroy(plan);
        return 0;
    }
    s->v->gemm[index] = plan;
    *k = (candidate){0, 0, 0, 1, plan, scratch};
    return 1;
}

/* 1 when the GEMM tactic's scratch of `bytes` is there; 0 (not an error: the GEMM tactic is
 * only one more candidate) when it cannot be allocated. */
static int ensure_gemm_scratch(search_ctx *s, size_t bytes)
{
    if (bytes <= s->gemm_scratch_bytes)
        return 1;
    cudaFree(s->gemm_scratch);
    s->gemm_scratch = NULL;
    s->gemm_scratch_bytes = 0;
    if (cudaMalloc(&s->gemm_scratch, bytes) != cudaSuccess) {
        cudaGetLastError();
        char line[160];
        snprintf(line, sizeof line, "tactic search: no memory for the GEMM tactic's %zu MiB of "
                 "scratch: left out", bytes >> 20);
        gr_engine_add_notice(s->e, line);
        return 0;
    }
    s->gemm_scratch_bytes = bytes;
    return 1;
}

/* The node's tactic is k: keep the GEMM plan only if it is the GEMM tactic. */
static void set_tactic(search_ctx *s, int index, gpu_tactic *t, const candidate *k, double us,
                       double auto_us, int timed, int batch_timed)
{
    *t = (gpu_tactic){.tile = k->tile, .split = k->split, .gemm = k->gemm,
                      .gemm_scratch = k->gemm ? k->scratch : 0, .us = us, .auto_us = auto_us,
                      .candidates = timed, .searched = 1, .batch_timed = batch_timed};
    if (!k->gemm) {
        gr_conv_gemm_destroy(s->v->gemm[index]);
        s->v->gemm[index] = NULL;
    }
}

/* run_once, where a failing GEMM tactic (a cuBLASLt status, not a CUDA fault: the synchronize
 * after it must succeed) only leaves that candidate out, with a notice: it is optional. *ok is 0
 * then. Any other failure is the build's. */
static gr_status try_run_once(search_ctx *s, const gpu_conv *c, const candidate *k, int index,
                              const out_region *r, int *ok)
{
    *ok = 1;
    gr_status st = run_once(s, c, k, index, r, 0);
    if (st == GR_OK || !k->gemm)
        return st;
    char line[400];
    snprintf(line, sizeof line, "GEMM tactic left out of layer %d: %.300s",
             s->v->plan->nodes[index].layer, gr_last_error());
    cudaGetLastError();
    CUDA_TRY(cudaStreamSynchronize(s->stream));
    gr_engine_add_notice(s->e, line);
    *ok = 0;
    return GR_OK;
}

/* The GEMM tactic's plan is per shape: when it won on the representative batch, make it again
 * for the whole batch (`full`). 0 when that fails (no cuBLASLt algorithm, scratch past the bound:
 * the caller takes the best other tactic); 1 for every other tactic. */
static int gemm_for_batch(search_ctx *s, const gpu_conv *c, const gr_conv_args *full, int index,
                          candidate *k)
{
    if (!k->gemm || c->tc.batch == full->batch)
        return 1;
    gpu_conv whole = *c;
    whole.tc = *full;
    if (gemm_candidate(s, &whole, index, k))
        return 1;
    char line[160];
    snprintf(line, sizeof line, "GEMM tactic of layer %d does not scale to batch %d: the best "
             "other tactic", s->v->plan->nodes[index].layer, full->batch);
    gr_engine_add_notice(s->e, line);
    return 0;
}

/* A cached tactic that passes the numerics check on this conv and runs at the whole batch:
 * *ok 1 and the tactic set. `hit` must be a valid candidate here (cached_candidate). */
static gr_status try_cached(search_ctx *s, gpu_conv *c, const gr_conv_args *full, int index,
                            const gr_tcache_entry *hit, candidate *k, const out_region *r,
                            gpu_tactic *t, int *ok)
{
    *ok = 0;
    if (k->gemm && !ensure_gemm_scratch(s, k->scratch))
        return GR_OK;
    int ran = 0;
    GR_TRY(try_run_once(s, c, k, index, r, &ran));
    if (ran && outputs_match(s, c) && gemm_for_batch(s, c, full, index, k)) {
        set_tactic(s, index, t, k, hit->us, hit->auto_us, 0, c->tc.batch);
        s->e->tactic_stats.cached++;
        *ok = 1;
    }
    return GR_OK;
}

/* The timing-cache key of a conv's best tactic other than the GEMM tactic, for the engines whose
 * batch the GEMM tactic that won at the representative batch does not scale to (its scratch
 * grows with the batch): the entry under `key` stays the representative batch's winner, which
 * the engines it scales to take. */
static void nogemm_key(const char *key, char *out, size_t len)
{
    snprintf(out, len, "%.*s:nogemm", GR_TCACHE_KEY_MAX - 8, key);
}

static gr_status search_node(search_ctx *s, int index, gpu_tactic *t)
{
    gpu_state *g = s->g;
    gpu_variant *v = s->v;
    const gr_plan_node *nd = &v->plan->nodes[index];
    gpu_conv c;
    GR_TRY(gr_gpu_conv_args(g, v, &v->inst[0], index, &c));
    c.tc.pdl = 0; /* alone on the stream: nothing to overlap with */
    const gr_conv_args full = c.tc;
    c.tc.batch = rep_batch(g, full.batch, full.in_h, full.in_w, full.ksize, full.stride, full.pad,
                           full.out_c);
    char key[GR_TCACHE_KEY_MAX], key_ng[GR_TCACHE_KEY_MAX];
    layer_key(&c.tc, c.is_i8, key, sizeof key);
    nogemm_key(key, key_ng, sizeof key_ng);

    candidate auto_k = {0, 0, ws_bytes_of(&c.tc, c.is_i8), 0, NULL, 0};
    candidate list[MAX_CANDIDATES];
    int n = list_candidates(&c, full.batch, list);
    size_t ws_max = auto_k.ws;
    for (int k = 0; k < n; k++)
        ws_max = list[k].ws > ws_max ? list[k].ws : ws_max;
    const gr_tcache_entry *hit = s->g->tcache ? gr_timing_cache_find(g->tcache, key) : NULL;
    const gr_tcache_entry *hit_ng = s->g->tcache ? gr_timing_cache_find(g->tcache, key_ng) : NULL;
    candidate cached, cached_ng;
    int use_cache = hit && cached_candidate(s, &c, full.batch, index, hit, &cached);
    int use_ng = hit_ng && hit_ng->tile != TILE_GEMM &&
                 cached_candidate(s, &c, full.batch, index, hit_ng, &cached_ng);
    if (use_cache && g->tcache_trusted && gemm_for_batch(s, &c, &full, index, &cached)) {
        set_tactic(s, index, t, &cached, hit->us, hit->auto_us, 0, c.tc.batch);
        s->e->tactic_stats.cached++; /* a saved engine's own tactic (tcache_trusted) */
        return GR_OK;
    }
    if (use_cache && cached.gemm && use_ng && g->tcache_trusted) {
        set_tactic(s, index, t, &cached_ng, hit_ng->us, hit_ng->auto_us, 0, c.tc.batch);
        s->e->tactic_stats.cached++;
        return GR_OK;
    }
    out_region r;
    GR_TRY(output_region(s, &c, index, &r));
    GR_TRY(fill_input(s, &c, index));
    if (use_cache && cached.ws > ws_max)
        ws_max = cached.ws;
    if (use_ng && cached_ng.ws > ws_max)
        ws_max = cached_ng.ws;
    GR_TRY(ensure_workspace(s, ws_max));
    GR_TRY(run_once(s, &c, &auto_k, index, &r, 1));

    if (use_cache) {
        int ok = 0;
        GR_TRY(try_cached(s, &c, &full, index, hit, &cached, &r, t, &ok));
        if (ok)
            return GR_OK;
        /* The GEMM tactic that does not scale to this batch: the best other one, if cached. */
        if (cached.gemm && use_ng) {
            GR_TRY(try_cached(s, &c, &full, index, hit_ng, &cached_ng, &r, t, &ok));
            if (ok)
                return GR_OK;
        }
        char line[160];
        snprintf(line, sizeof line, "timing cache: the tactic of layer %d fails the numerics "
                 "check on this GPU: measured again", nd->layer);
        gr_engine_add_notice(s->e, line);
    } else if (hit) {
        char line[160];
        snprintf(line, sizeof line, "timing cache: the tactic of layer %d is not valid here: "
                 "measured again", nd->layer);
        gr_engine_add_notice(s->e, line);
    }

    /* The GEMM tactic last (its plan replaces a cached one that failed). */
    if (gemm_candidate(s, &c, index, &list[n]) && ensure_gemm_scratch(s, list[n].scratch))
        n++;
    double auto_us = 0.0;
    int cut = 0;
    GR_TRY(time_candidate(s, &c, &auto_k, index, 0.0, &auto_us, &cut));
    int timed = 1;
    candidate best = auto_k, best_other = auto_k; /* best_other: the best but the GEMM tactic */
    double best_us = auto_us, best_other_us = auto_us;
    for (int k = 0; k < n; k++) {
        int ran = 0;
        GR_TRY(try_run_once(s, &c, &list[k], index, &r, &ran));
        if (!ran)
            continue;
        if (!outputs_match(s, &c)) {
            s->e->tactic_stats.rejected++;
            continue;
        }
        double us = 0.0;
        GR_TRY(time_candidate(s, &c, &list[k], index, best_us, &us, &cut));
        timed++;
        if (!cut && us < best_us) {
            best = list[k];
            best_us = us;
        }
        if (!cut && !list[k].gemm && us < best_other_us) {
            best_other = list[k];
            best_other_us = us;
        }
    }
    if (best_us > keep_auto_ratio * auto_us) {
        best = auto_k;
        best_us = auto_us;
    }
    /* The representative batch's winner is what the cache keeps under `key` (engines of the
     * batches it scales to take it); where the GEMM tactic won but does not scale to this batch,
     * the best other tactic, kept under key_ng. */
    if (g->tcache)
        GR_TRY(gr_timing_cache_put(g->tcache, key, best.gemm ? TILE_GEMM : best.tile, best.split,
                                   best_us > 0.0 ? best_us : 1e-3, auto_us > 0.0 ? auto_us : 1e-3));
    if (!gemm_for_batch(s, &c, &full, index, &best)) {
        best = best_other_us > keep_auto_ratio * auto_us ? auto_k : best_other;
        best_us = best_other_us > keep_auto_ratio * auto_us ? auto_us : best_other_us;
        if (g->tcache)
            GR_TRY(gr_timing_cache_put(g->tcache, key_ng, best.tile, best.split,
                                       best_us > 0.0 ? best_us : 1e-3,
                                       auto_us > 0.0 ? auto_us : 1e-3));
    }
    set_tactic(s, index, t, &best, best_us, auto_us, timed, c.tc.batch);
    s->e->tactic_stats.searched++;
    s->e->tactic_stats.candidates += timed;
    return GR_OK;
}

/* Everything an fp32 algorithm's speed depends on besides the GPU; `tf` cuBLAS's TF32 math (no
 * 3xTF32 candidates then), `sk` whether split-K candidates were allowed (it depends on the runs
 * in flight). */
static void f32_layer_key(const gr_conv_f32_args *a, int split_ok, char *key, size_t len)
{
    snprintf(key, len, "f32:n%d:in%dx%dx%d:out%d:k%ds%dp%d:act%d:tf%d:sk%d", a->batch, a->in_h,
             a->in_w, a->in_c, a->out_c, a->ksize, a->stride, a->pad, a->activation, a->tf32,
             split_ok);
}

/* An fp32 candidate: its im2col / partial-sums workspace; 0 when the algorithm does not take the
 * conv or would need more than `limit` bytes of it. */
static int f32_candidate(const gr_conv_f32_args *a, int algo, int splits, size_t limit,
                         candidate *k)
{
    gr_conv_f32_args t = *a;
    t.algo = algo;
    t.splits = splits;
    int ok = 0;
    size_t floats = gr_conv_f32_workspace_floats(&t, &ok);
    if (!ok || floats > limit / sizeof(float))
        return 0;
    *k = (candidate){algo, splits, floats * sizeof(float), 0, NULL, 0};
    return 1;
}

/* The fp32 algorithms that run this conv here, the split-K variant where it may split; none
 * whose workspace exceeds both the rule's (`ref_ws`) and the GEMM tactic's bound. */
static int list_f32_candidates(const search_ctx *s, const gr_conv_f32_args *a, int split_ok,
                               long long columns, size_t ref_ws, candidate *list)
{
    const size_t limit = ref_ws > max_gemm_scratch ? ref_ws : max_gemm_scratch;
    int n = 0;
    n += f32_candidate(a, GR_CONV_F32_SGEMM, 0, limit, &list[n]);
    n += f32_candidate(a, GR_CONV_F32_DIRECT3X3, 0, limit, &list[n]);
    if (!s->g->f32_tensor_cores || columns > INT_MAX)
        return n;
    n += f32_candidate(a, GR_CONV_F32_TF32X3, 0, limit, &list[n]);
    if (!(a->ksize == 1 && a->stride == 1 && a->pad == 0)) /* else the same as TF32X3 */
        n += f32_candidate(a, GR_CONV_F32_TF32X3_IMPLICIT, 0, limit, &list[n]);
    int splits = split_ok ? gr_gemm_tf32x3_auto_splits(a->out_c, a->in_c * a->ksize * a->ksize,
                                                       (int)columns, s->g->sm_count)
                          : 1;
    if (splits > 1)
        n += f32_candidate(a, GR_CONV_F32_TF32X3, splits, limit, &list[n]);
    return n;
}

/* Is a cached fp32 choice one of this conv's candidates here? */
static int cached_f32(const candidate *list, int n, const gr_tcache_entry *hit, candidate *k)
{
    for (int i = 0; i < n; i++)
        if (list[i].tile == hit->tile && list[i].split == hit->split) {
            *k = list[i];
            return 1;
        }
    return 0;
}

/* The cached choice, if it passes the numerics check against the rule's output (in s->ref). */
static gr_status try_cached_f32(search_ctx *s, const gpu_conv *c, int index, const candidate *k,
                                const gr_tcache_entry *hit, const out_region *r, gpu_tactic *t)
{
    GR_TRY(run_once(s, c, k, index, r, 0));
    if (!outputs_match(s, c)) {
        char line[160];
        snprintf(line, sizeof line, "timing cache: the fp32 algorithm of layer %d fails the "
                 "numerics check on this GPU: measured again", s->v->plan->nodes[index].layer);
        gr_engine_add_notice(s->e, line);
        return GR_OK;
    }
    *t = (gpu_tactic){.us = hit->us, .auto_us = hit->auto_us, .f32_measured = 1,
                      .f32_algo = k->tile, .f32_splits = k->split};
    s->e->tactic_stats.cached++;
    return GR_OK;
}

/* Time every candidate that matches the reference's output; the fastest wins unless it is less
 * than 2% faster than the reference. */
static gr_status time_f32(search_ctx *s, const gpu_conv *c, int index, const candidate *ref,
                          const candidate *list, int n, const out_region *r, gpu_tactic *t)
{
    double ref_us = 0.0;
    int cut = 0;
    GR_TRY(time_candidate(s, c, ref, index, 0.0, &ref_us, &cut));
    candidate best = *ref;
    double best_us = ref_us;
    int timed = 1;
    for (int k = 0; k < n; k++) {
        if (list[k].tile == ref->tile && list[k].split == ref->split)
            continue;
        GR_TRY(run_once(s, c, &list[k], index, r, 0));
        if (!outputs_match(s, c)) {
            s->e->tactic_stats.rejected++;
            continue;
        }
        double us = 0.0;
        GR_TRY(time_candidate(s, c, &list[k], index, best_us, &us, &cut));
        timed++;
        if (!cut && us < best_us) {
            best = list[k];
            best_us = us;
        }
    }
    if (best_us > keep_auto_ratio * ref_us) {
        best = *ref;
        best_us = ref_us;
    }
    *t = (gpu_tactic){.us = best_us, .auto_us = ref_us, .candidates = timed, .f32_measured = 1,
                      .f32_algo = best.tile, .f32_splits = best.split};
    s->e->tactic_stats.searched++;
    s->e->tactic_stats.candidates += timed;
    return GR_OK;
}

/* An fp32 conv's algorithm by measurement: the rule's choice is the reference (and the one to
 * beat), the timing cache remembers the winner. Convs that run one image or one group at a time,
 * and those with a fused pool (only the direct kernel pools), keep the rule's. */
static gr_status search_f32_node(search_ctx *s, int index, gpu_tactic *t)
{
    gpu_state *g = s->g;
    gpu_variant *v = s->v;
    const gr_plan_node *nd = &v->plan->nodes[index];
    const gr_plan_tensor *y = &v->plan->tensors[nd->output];
    gpu_conv c;
    GR_TRY(gr_gpu_conv_args(g, v, &v->inst[0], index, &c));
    if (c.direct || c.images != 1 || c.groups != 1 || c.f32.pool_size)
        return GR_OK;
    s->e->tactic_stats.convs++;
    /* The representative batch, unless the rule splits K (a grid that does not fill the GPU). */
    if (c.f32.splits <= 1)
        c.f32.batch = rep_batch(g, c.f32.batch, c.f32.in_h, c.f32.in_w, c.f32.ksize, c.f32.stride,
                                c.f32.pad, c.f32.out_c);
    const long long columns = (long long)c.f32.batch * y->h * y->w;
    const int split_ok = gr_gpu_f32_split_allowed(g, v, 1);
    candidate list[8], ref;
    if (!f32_candidate(&c.f32, c.f32.algo, c.f32.splits, SIZE_MAX, &ref))
        return gr_fail(GR_ERR_INTERNAL, "layer %d: the fp32 rule's algorithm does not take it",
                       nd->layer);
    int n = list_f32_candidates(s, &c.f32, split_ok, columns, ref.ws, list);
    size_t ws_max = ref.ws;
    for (int k = 0; k < n; k++)
        ws_max = list[k].ws > ws_max ? list[k].ws : ws_max;
    out_region r;
    GR_TRY(output_region_f32(s, &c, index, &r));
    GR_TRY(fill_input_f32(s, &c, index));
    GR_TRY(ensure_workspace(s, ws_max));
    GR_TRY(run_once(s, &c, &ref, index, &r, 1));
    char key[GR_TCACHE_KEY_MAX];
    f32_layer_key(&c.f32, split_ok, key, sizeof key);
    const gr_tcache_entry *hit = g->tcache ? gr_timing_cache_find(g->tcache, key) : NULL;
    candidate cached;
    if (hit && cached_f32(list, n, hit, &cached)) {
        GR_TRY(try_cached_f32(s, &c, index, &cached, hit, &r, t));
        if (t->f32_measured)
            return GR_OK;
    }
    GR_TRY(time_f32(s, &c, index, &ref, list, n, &r, t));
    if (g->tcache)
        GR_TRY(gr_timing_cache_put(g->tcache, key, t->f32_algo, t->f32_splits,
                                   t->us > 0.0 ? t->us : 1e-3,
                                   t->auto_us > 0.0 ? t->auto_us : 1e-3));
    return GR_OK;
}

static gr_status search_variant(search_ctx *s)
{
    gpu_variant *v = s->v;
    const gr_plan *plan = v->plan;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV || !gr_gpu_node_launches(nd))
            continue;
        gpu_conv c;
        GR_TRY(gr_gpu_conv_args(s->g, v, NULL, i, &c));
        if (!c.tensor_cores) {
            if (s->g->f32_search)
                GR_TRY(search_f32_node(s, i, &v->tactic[i]));
            continue;
        }
        s->e->tactic_stats.convs++;
        GR_TRY(search_node(s, i, &v->tactic[i]));
    }
    return GR_OK;
}

gr_status gr_gpu_choose_tactics(gr_engine *e, gpu_state *g, gpu_variant *v)
{
    v->tactic = gr_calloc((size_t)v->plan->n_nodes, sizeof *v->tactic, "tactics");
    v->gemm = gr_calloc((size_t)v->plan->n_nodes, sizeof *v->gemm, "GEMM tactic plans");
    if (!v->tactic || !v->gemm)
        return GR_ERR_OUT_OF_MEMORY;
    if (!g->tactic_search)
        return GR_OK;
    double start = gr_now_us();
    search_ctx s = {.e = e, .g = g, .v = v, .stream = g->streams[0]};
    atomic_init(&s.gate, 1);
    gr_status st = GR_OK;
    int created = 0;
    cudaError_t err = cudaDeviceSynchronize(); /* uploads and memsets on other streams are done */
    if (err != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "cudaDeviceSynchronize (tactic search)", __FILE__, __LINE__);
    for (; created <= TIMED_RUNS && st == GR_OK; created++) {
        err = cudaEventCreate(&s.ev[created]);
        if (err != cudaSuccess) {
            st = gr_gpu_cuda_fail(err, "cudaEventCreate (tactic search)", __FILE__, __LINE__);
            break;
        }
    }
    if (st == GR_OK)
        st = search_variant(&s);
    /* Leave the arena as instance_alloc did, whatever happened. */
    size_t arena = v->plan->arena_bytes ? v->plan->arena_bytes : 256;
    err = cudaMemsetAsync(v->inst[0].arena, 0, arena, s.stream);
    cudaError_t synced = cudaStreamSynchronize(s.stream); /* always: a held stream reads s.gate */
    err = err != cudaSuccess ? err : synced;
    if (err != cudaSuccess && st == GR_OK)
        st = gr_gpu_cuda_fail(err, "tactic search: clearing the arena", __FILE__, __LINE__);
    for (int i = 0; i < created; i++)
        cudaEventDestroy(s.ev[i]);
    cudaFree(s.ws);
    cudaFree(s.gemm_scratch);
    cudaFree(s.ref);
    cudaFree(s.diff);
    cudaFreeHost(s.diff_host);
    if (st != GR_OK)
        cudaGetLastError();
    e->tactic_stats.search_ms += (gr_now_us() - start) / 1e3;
    return st;
}

gr_status gr_gpu_publish_tactics(gr_engine *e, const gpu_variant *v)
{
    free(e->tactics);
    e->tactics = NULL;
    e->n_tactics = 0;
    const gr_plan *plan = v->plan;
    int n = 0;
    for (int i = 0; i < plan->n_nodes && v->tactic; i++)
        n += v->tactic[i].searched;
    if (n == 0)
        return GR_OK;
    e->tactics = gr_calloc((size_t)n, sizeof *e->tactics, "tactic list");
    if (!e->tactics)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gpu_tactic *t = &v->tactic[i];
        if (!t->searched)
            continue;
        gr_tactic_info *info = &e->tactics[e->n_tactics++];
        info->layer = plan->nodes[i].layer;
        info->tile_config = t->tile;
        info->split_k = t->split;
        info->gemm = t->gemm;
        gr_gpu_tactic_name(t->gemm ? TILE_GEMM : t->tile, t->split, info->name,
                           sizeof info->name);
        info->us = t->us;
        info->auto_us = t->auto_us;
        info->candidates = t->candidates;
        info->batch = t->batch_timed;
    }
    return GR_OK;
}
