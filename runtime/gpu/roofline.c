/* The roofline table (runtime.h, gr_engine_roofline; docs/performance.md, "Roofline"):
 *   - the device's peaks, measured once per device and process: a device-to-device copy for the
 *     bandwidth, dense cuBLAS GEMMs for each precision's throughput;
 *   - each plan node's floor from the planner's model of its work and bytes
 *     (gr_plan_node_cost_of) and those peaks;
 *   - each plan node's time inside a replay of the captured graph: a fresh capture of the same
 *     forward pass made while CUPTI traces (its resource callbacks give the graph node each
 *     node's launches created, and the node each of those was cloned into when the graph was
 *     instantiated; its activity records give every kernel's, copy's and memset's start and end
 *     with that graph node's id; the launches, one after the other on one stream, are told apart
 *     by time).
 * CUPTI is optional (GR_HAVE_CUPTI, found by CMake): without it the table is unavailable. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef GR_HAVE_CUPTI
#include <cupti.h>
#endif

#include "runtime/gpu/backend.h"

/* ---- peaks ------------------------------------------------------------------------------- */

enum {
    GEMM_N = 8192,          /* square GEMMs: large enough to run at the tensor cores' peak */
    PEAK_RUNS = 5,          /* timed runs after two untimed; the best is the peak */
    COPY_BYTES_MB = 512,
    MAX_DEVICES = 64,
    FILL_CHUNK = 1 << 20    /* elements of host pseudo-random data copied over and over */
};

typedef enum { GEMM_I8, GEMM_F16_ACC32, GEMM_F16_ACC16, GEMM_F32 } gemm_kind;

typedef struct peak_slot {
    int have_base, have_f16[2];
    double dram_gbs, int8_tops, fp32_tflops, fp16_tops[2];
} peak_slot;

static pthread_mutex_t peaks_lock = PTHREAD_MUTEX_INITIALIZER;
static peak_slot peak_cache[MAX_DEVICES];

typedef struct gemm_ctx {
    cublasHandle_t h;
    gemm_kind kind;
    void *a, *b, *c;
} gemm_ctx;

/* Fill `bytes` of device memory with pseudo-random values of the GEMM's input type: int8 any
 * byte, fp16 / fp32 magnitudes in [0.5, 1) with random signs (no NaN, no denormals). */
static gr_status fill(void *dev, size_t bytes, gemm_kind kind)
{
    uint32_t *chunk = malloc((size_t)FILL_CHUNK * sizeof *chunk);
    if (!chunk)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory (roofline GEMM data)");
    uint32_t x = 12345u;
    for (size_t i = 0; i < FILL_CHUNK; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t r = x >> 8;
        if (kind == GEMM_F32)
            chunk[i] = 0x3f000000u | (r & 0x007fffffu) | ((x & 1u) << 31);
        else if (kind == GEMM_I8)
            chunk[i] = x;
        else /* two halves */
            chunk[i] = (0x3800u | (r & 0x3ffu) | ((x & 1u) << 15)) |
                       ((0x3800u | ((r >> 10) & 0x3ffu) | ((x & 2u) << 14)) << 16);
    }
    const size_t chunk_bytes = (size_t)FILL_CHUNK * sizeof *chunk;
    cudaError_t err = cudaSuccess;
    for (size_t off = 0; off < bytes && err == cudaSuccess; off += chunk_bytes) {
        size_t n = bytes - off < chunk_bytes ? bytes - off : chunk_bytes;
        err = cudaMemcpy((uint8_t *)dev + off, chunk, n, cudaMemcpyHostToDevice);
    }
    free(chunk);
    return err == cudaSuccess ? GR_OK
                              : gr_gpu_cuda_fail(err, "cudaMemcpy (roofline GEMM data)", __FILE__,
                                                 __LINE__);
}

static cublasStatus_t gemm_once(const gemm_ctx *c)
{
    const int n = GEMM_N;
    switch (c->kind) {
    case GEMM_I8: {
        const int32_t one = 1, zero = 0; /* IMMA: A transposed, int32 out */
        return cublasGemmEx(c->h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, c->a, CUDA_R_8I, n,
                            c->b, CUDA_R_8I, n, &zero, c->c, CUDA_R_32I, n, CUBLAS_COMPUTE_32I,
                            CUBLAS_GEMM_DEFAULT);
    }
    case GEMM_F16_ACC32: {
        const float one = 1.0f, zero = 0.0f;
        return cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->a, CUDA_R_16F, n,
                            c->b, CUDA_R_16F, n, &zero, c->c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT);
    }
    case GEMM_F16_ACC16: {
        const uint16_t one = 0x3c00u, zero = 0; /* __half 1 and 0 */
        return cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->a, CUDA_R_16F, n,
                            c->b, CUDA_R_16F, n, &zero, c->c, CUDA_R_16F, n, CUBLAS_COMPUTE_16F,
                            CUBLAS_GEMM_DEFAULT);
    }
    default: {
        const float one = 1.0f, zero = 0.0f;
        return cublasSgemm(c->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, c->a, n, c->b, n, &zero,
                           c->c, n);
    }
    }
}

/* The best of PEAK_RUNS timed runs of op (GEMM: `gemm` set; else a copy of `bytes` from src to
 * dst), after two untimed ones, in milliseconds. */
static gr_status best_ms(cudaStream_t s, const gemm_ctx *gemm, void *dst, const void *src,
                         size_t bytes, float *best)
{
    cudaEvent_t ev[2] = {NULL, NULL};
    gr_status st = GR_OK;
    cudaError_t err = cudaEventCreate(&ev[0]);
    if (err == cudaSuccess)
        err = cudaEventCreate(&ev[1]);
    *best = 0.0f;
    for (int r = 0; r < PEAK_RUNS + 2 && err == cudaSuccess && st == GR_OK; r++) {
        if (r >= 2)
            err = cudaEventRecord(ev[0], s);
        if (err == cudaSuccess && gemm) {
            cublasStatus_t cs = gemm_once(gemm);
            if (cs != CUBLAS_STATUS_SUCCESS)
                st = gr_fail(GR_ERR_CUBLAS, "roofline peak GEMM (kind %d, %d^3): cuBLAS status %d",
                             (int)gemm->kind, GEMM_N, (int)cs);
        } else if (err == cudaSuccess) {
            err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
        }
        if (r >= 2 && err == cudaSuccess && st == GR_OK) {
            float ms = 0.0f;
            err = cudaEventRecord(ev[1], s);
            if (err == cudaSuccess)
                err = cudaEventSynchronize(ev[1]);
            if (err == cudaSuccess)
                err = cudaEventElapsedTime(&ms, ev[0], ev[1]);
            if (err == cudaSuccess && (*best == 0.0f || ms < *best))
                *best = ms;
        }
    }
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(s);
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    if (st == GR_OK && err != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "timing the roofline peaks", __FILE__, __LINE__);
    if (st == GR_OK && *best <= 0.0f)
        st = gr_fail(GR_ERR_INTERNAL, "roofline peaks: a timed run took no time");
    return st;
}

/* Tera-ops per second of one GEMM kind at GEMM_N. */
static gr_status gemm_peak(cudaStream_t s, gemm_kind kind, double *tops)
{
    const size_t nn = (size_t)GEMM_N * GEMM_N;
    const size_t in_size = kind == GEMM_I8 ? 1 : kind == GEMM_F32 ? 4 : 2;
    const size_t out_size = kind == GEMM_F16_ACC32 || kind == GEMM_F16_ACC16 ? 2 : 4;
    gemm_ctx c = {NULL, kind, NULL, NULL, NULL};
    gr_status st = GR_OK;
    cudaError_t err = cudaMalloc(&c.a, nn * in_size);
    if (err == cudaSuccess)
        err = cudaMalloc(&c.b, nn * in_size);
    if (err == cudaSuccess)
        err = cudaMalloc(&c.c, nn * out_size);
    if (err != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "cudaMalloc (roofline peak GEMM)", __FILE__, __LINE__);
    if (st == GR_OK)
        st = fill(c.a, nn * in_size, kind);
    if (st == GR_OK)
        st = fill(c.b, nn * in_size, kind);
    if (st == GR_OK && (cublasCreate(&c.h) != CUBLAS_STATUS_SUCCESS ||
                        cublasSetStream(c.h, s) != CUBLAS_STATUS_SUCCESS ||
                        cublasSetMathMode(c.h, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS))
        st = gr_fail(GR_ERR_CUBLAS, "roofline peaks: cuBLAS could not be set up");
    float ms = 0.0f;
    if (st == GR_OK)
        st = best_ms(s, &c, NULL, NULL, 0, &ms);
    if (c.h)
        cublasDestroy(c.h);
    cudaFree(c.a);
    cudaFree(c.b);
    cudaFree(c.c);
    if (st == GR_OK)
        *tops = 2.0 * (double)GEMM_N * (double)GEMM_N * (double)GEMM_N / ((double)ms * 1e-3) / 1e12;
    return st;
}

static gr_status copy_peak(cudaStream_t s, double *gbs)
{
    size_t bytes = (size_t)COPY_BYTES_MB << 20;
    void *a = NULL, *b = NULL;
    cudaError_t err = cudaMalloc(&a, bytes);
    if (err == cudaSuccess)
        err = cudaMalloc(&b, bytes);
    gr_status st = err == cudaSuccess ? GR_OK
                                      : gr_gpu_cuda_fail(err, "cudaMalloc (roofline copy peak)",
                                                         __FILE__, __LINE__);
    if (st == GR_OK && (err = cudaMemset(a, 1, bytes)) != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "cudaMemset (roofline copy peak)", __FILE__, __LINE__);
    float ms = 0.0f;
    if (st == GR_OK)
        st = best_ms(s, NULL, b, a, bytes, &ms);
    cudaFree(a);
    cudaFree(b);
    if (st == GR_OK)
        *gbs = 2.0 * (double)bytes / ((double)ms * 1e-3) / 1e9; /* read + write */
    return st;
}

/* The peaks of g's device, measured at the first call for it (and the fp16 GEMM at the first
 * call for each accumulation), then the cached values. */
static gr_status device_peaks(gpu_state *g, gr_roofline_peaks *p)
{
    if (g->device < 0 || g->device >= MAX_DEVICES)
        return gr_fail(GR_ERR_LIMIT, "roofline: device %d is past the %d the peak cache holds",
                       g->device, MAX_DEVICES);
    const int acc16 = g->fp16_accumulate != 0;
    cudaStream_t s = g->streams[0];
    pthread_mutex_lock(&peaks_lock);
    peak_slot *slot = &peak_cache[g->device];
    gr_status st = GR_OK;
    if (!slot->have_base) {
        st = copy_peak(s, &slot->dram_gbs);
        if (st == GR_OK)
            st = gemm_peak(s, GEMM_I8, &slot->int8_tops);
        if (st == GR_OK)
            st = gemm_peak(s, GEMM_F32, &slot->fp32_tflops);
        slot->have_base = st == GR_OK;
    }
    if (st == GR_OK && !slot->have_f16[acc16]) {
        st = gemm_peak(s, acc16 ? GEMM_F16_ACC16 : GEMM_F16_ACC32, &slot->fp16_tops[acc16]);
        slot->have_f16[acc16] = st == GR_OK;
    }
    if (st == GR_OK)
        *p = (gr_roofline_peaks){slot->dram_gbs, slot->int8_tops, slot->fp16_tops[acc16],
                                 slot->fp32_tflops, GEMM_N, acc16};
    pthread_mutex_unlock(&peaks_lock);
    return st;
}

/* ---- the model's rows -------------------------------------------------------------------- */

static double peak_of(const gr_roofline_peaks *p, gr_precision prec)
{
    return prec == GR_PREC_INT8 ? p->int8_tops : prec == GR_PREC_FP16 ? p->fp16_tops
                                                                      : p->fp32_tflops;
}

/* r->nodes: every launching node of v's plan with its work, bytes and floor for a whole replay
 * (n_slices passes: activations and work each pass, weights once); row_of[node] its row or -1. */
static gr_status model_rows(const gpu_variant *v, gr_roofline *r, int *row_of)
{
    const gr_plan *plan = v->plan;
    const double slices = v->n_slices > 1 ? (double)v->n_slices : 1.0;
    r->nodes = gr_calloc((size_t)plan->n_nodes + 1, sizeof *r->nodes, "roofline rows");
    if (!r->nodes)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        row_of[i] = -1;
        if (!gr_gpu_node_launches(nd))
            continue;
        gr_plan_node_cost c;
        GR_TRY(gr_plan_node_cost_of(plan, i, &c));
        gr_roofline_node *row = &r->nodes[r->n_nodes];
        row_of[i] = r->n_nodes++;
        row->node = i;
        row->layer = nd->layer;
        snprintf(row->kind, sizeof row->kind, "%s", gr_plan_kind_name(nd->kind));
        row->prec = nd->prec;
        row->flops = c.flops * slices;
        row->weight_bytes = c.weight_bytes;
        row->bytes = c.act_bytes * slices + c.weight_bytes;
        const double mem_us = row->bytes / (r->peaks.dram_gbs * 1e3);
        const double math_us = row->flops / (peak_of(&r->peaks, nd->prec) * 1e6);
        row->floor_us = mem_us > math_us ? mem_us : math_us;
        r->floor_sum_us += row->floor_us;
    }
    return GR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Median of `runs` replays of the engine's own graph (instance 0), each between two events. */
static gr_status replay_median(gpu_state *g, const gpu_variant *v, int runs, double *us)
{
    cudaStream_t s = g->streams[0];
    cudaEvent_t ev[2] = {NULL, NULL};
    double *t = gr_calloc((size_t)runs, sizeof *t, "replay times");
    if (!t)
        return GR_ERR_OUT_OF_MEMORY;
    cudaError_t err = cudaEventCreate(&ev[0]);
    if (err == cudaSuccess)
        err = cudaEventCreate(&ev[1]);
    for (int r = -2; r < runs && err == cudaSuccess; r++) { /* two untimed */
        float ms = 0.0f;
        err = cudaEventRecord(ev[0], s);
        if (err == cudaSuccess)
            err = cudaGraphLaunch(v->inst[0].exec, s);
        if (err == cudaSuccess)
            err = cudaEventRecord(ev[1], s);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(ev[1]);
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&ms, ev[0], ev[1]);
        if (r >= 0)
            t[r] = 1e3 * (double)ms;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    if (err == cudaSuccess)
        *us = median(t, runs);
    free(t);
    return err == cudaSuccess ? GR_OK
                              : gr_gpu_cuda_fail(err, "timing the graph's replays (roofline)",
                                                 __FILE__, __LINE__);
}

/* ---- in-graph times (CUPTI) -------------------------------------------------------------- */

#ifdef GR_HAVE_CUPTI

typedef struct node_id {
    uint64_t id;   /* CUPTI's graph node id */
    int node;      /* plan node */
} node_id;

typedef struct trace_rec {
    int copy;      /* a memcpy or memset, not a kernel */
    uint64_t graph_node, start, end;
} trace_rec;

/* One measurement at a time per process (CUPTI's state is the process's); under it: */
static pthread_mutex_t profile_lock = PTHREAD_MUTEX_INITIALIZER;
static int buffers_registered;
/* The records CUPTI hands back (from its own thread: rec_lock), and the graph node map the
 * resource callbacks fill (in the measuring thread, while it captures and instantiates). */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    trace_rec *recs;
    size_t n, cap;
    int oom;
    size_t dropped;
    node_id *ids;
    size_t n_ids, cap_ids;
    size_t created, cloned; /* ids the capture gave plan nodes, and their clones (diagnostics) */
    int ids_oom;
    int current;   /* plan node being enqueued, -1 between nodes */
    int active;
    pthread_t owner;
} tr;

static const char *cupti_str(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        s = "unknown CUPTI error";
    return s;
}

static void add_rec(uint64_t graph_node, uint64_t start, uint64_t end, int copy)
{
    if (graph_node == 0) /* not launched by a graph */
        return;
    pthread_mutex_lock(&rec_lock);
    if (tr.n == tr.cap) {
        size_t cap = tr.cap ? 2 * tr.cap : 4096;
        trace_rec *p = realloc(tr.recs, cap * sizeof *p);
        if (p) {
            tr.recs = p;
            tr.cap = cap;
        }
    }
    if (tr.n < tr.cap)
        tr.recs[tr.n++] = (trace_rec){copy, graph_node, start, end};
    else
        tr.oom = 1;
    pthread_mutex_unlock(&rec_lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = (size_t)8 << 20;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    while (buffer && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            add_rec(k->graphNodeId, k->start, k->end, 0);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            add_rec(m->graphNodeId, m->start, m->end, 1);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            add_rec(m->graphNodeId, m->start, m->end, 1);
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        pthread_mutex_lock(&rec_lock);
        tr.dropped += dropped;
        pthread_mutex_unlock(&rec_lock);
    }
    free(buffer);
}

static int id_find(uint64_t id)
{
    for (size_t i = 0; i < tr.n_ids; i++)
        if (tr.ids[i].id == id)
            return tr.ids[i].node;
    return -1;
}

static void id_add(uint64_t id, int node)
{
    if (tr.n_ids == tr.cap_ids) {
        size_t cap = tr.cap_ids ? 2 * tr.cap_ids : 1024;
        node_id *p = realloc(tr.ids, cap * sizeof *p);
        if (!p) {
            tr.ids_oom = 1;
            return;
        }
        tr.ids = p;
        tr.cap_ids = cap;
    }
    tr.ids[tr.n_ids++] = (node_id){id, node};
}

/* Graph nodes created while a plan node is enqueued (capture) are that node's; their clones
 * in the instantiated graph (whose ids the activity records carry) too. */
static void CUPTIAPI on_resource(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata)
{
    (void)user;
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || !tr.active || !pthread_equal(tr.owner, pthread_self()))
        return;
    const CUpti_ResourceData *rd = cbdata;
    const CUpti_GraphData *gd = rd ? rd->resourceDescriptor : NULL;
    uint64_t id = 0, original = 0;
    if (!gd)
        return;
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && tr.current >= 0) {
        if (cuptiGetGraphNodeId(gd->node, &id) == CUPTI_SUCCESS) {
            id_add(id, tr.current);
            tr.created++;
        }
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
        if (cuptiGetGraphNodeId(gd->originalNode, &original) == CUPTI_SUCCESS &&
            cuptiGetGraphNodeId(gd->node, &id) == CUPTI_SUCCESS) {
            int node = id_find(original);
            if (node >= 0) {
                id_add(id, node);
                tr.cloned++;
            }
        }
    }
}

static gr_status mark_before(gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                             int node, void *user)
{
    (void)g, (void)v, (void)inst, (void)user;
    tr.current = node;
    return GR_OK;
}

static gr_status mark_after(gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                            int node, void *user)
{
    (void)g, (void)v, (void)inst, (void)node, (void)user;
    tr.current = -1;
    return GR_OK;
}

static const CUpti_ActivityKind traced[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                            CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

/* Capture the forward pass again (hooks marking each plan node), instantiate it, and launch it
 * 1 + replays times, all while CUPTI traces; the records end in tr. */
static gr_status traced_replays(gpu_state *g, gpu_variant *v, int replays)
{
    CUpti_SubscriberHandle sub = NULL;
    CUptiResult cr = CUPTI_SUCCESS;
    if (!buffers_registered) /* once per process: the buffers outlive a measurement */
        cr = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    buffers_registered = cr == CUPTI_SUCCESS;
    if (cr == CUPTI_SUCCESS)
        cr = cuptiSubscribe(&sub, on_resource, NULL);
    if (cr != CUPTI_SUCCESS)
        return gr_fail(GR_ERR_UNSUPPORTED, "roofline: CUPTI could not be set up (%s; is a profiler "
                       "such as nsys or ncu attached?)", cupti_str(cr));
    if (cr == CUPTI_SUCCESS)
        cr = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                 CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    if (cr == CUPTI_SUCCESS)
        cr = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                 CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    size_t enabled = 0;
    for (; cr == CUPTI_SUCCESS && enabled < sizeof traced / sizeof traced[0]; enabled++)
        cr = cuptiActivityEnable(traced[enabled]);
    gr_status st = cr == CUPTI_SUCCESS
                       ? GR_OK
                       : gr_fail(GR_ERR_UNSUPPORTED, "roofline: CUPTI tracing could not be "
                                 "enabled (%s)", cupti_str(cr));
    tr.owner = pthread_self();
    tr.active = 1;
    tr.current = -1;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStream_t s = g->streams[0];
    cudaError_t err = cudaSuccess;
    if (st == GR_OK) {
        gpu_instance part = v->inst[0];
        part.input_on_device = 0;
        err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        if (err == cudaSuccess) {
            g->before_node = mark_before;
            g->after_node = mark_after;
            g->after_node_user = NULL;
            st = gr_gpu_enqueue_forward(g, v, &part, NULL, NULL);
            g->before_node = NULL;
            g->after_node = NULL;
            err = cudaStreamEndCapture(s, &graph);
        }
    }
    if (st == GR_OK && err == cudaSuccess)
        err = cudaGraphInstantiate(&exec, graph, 0);
    for (int r = 0; r <= replays && st == GR_OK && err == cudaSuccess; r++)
        err = cudaGraphLaunch(exec, s);
    if (st == GR_OK && err == cudaSuccess)
        err = cudaStreamSynchronize(s);
    tr.active = 0;
    tr.current = -1;
    if (st == GR_OK && err != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "the roofline's traced replays", __FILE__, __LINE__);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < enabled; i++)
        cuptiActivityDisable(traced[i]);
    cuptiUnsubscribe(sub);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    return st;
}

static int cmp_start(const void *a, const void *b)
{
    const trace_rec *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* tr's records -> each row's median times, the busy, copy and other times. The launches ran one
 * after the other on one stream, so in start order the records are the 1 + replays launches'
 * in turn, each as many: launch l is records [l * per, (l + 1) * per), none starting before the
 * previous launch ended (checked). The first (the warm-up) is left out. */
static gr_status attribute(gr_roofline *r, const gpu_variant *v, const int *row_of, int replays)
{
    if (tr.oom || tr.ids_oom)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory (roofline trace records)");
    if (tr.dropped)
        return gr_fail(GR_ERR_INTERNAL, "roofline: CUPTI dropped %zu activity records",
                       tr.dropped);
    const size_t launches = (size_t)replays + 1;
    if (tr.n == 0 || tr.n % launches != 0)
        return gr_fail(GR_ERR_INTERNAL, "roofline: CUPTI traced %zu operations in %zu graph "
                       "launches, not the same number in each (did another thread launch graphs "
                       "meanwhile?)", tr.n, launches);
    const size_t per = tr.n / launches;
    qsort(tr.recs, tr.n, sizeof *tr.recs, cmp_start);
    for (size_t l = 1; l < launches; l++) {
        uint64_t end = 0;
        for (size_t i = (l - 1) * per; i < l * per; i++)
            end = tr.recs[i].end > end ? tr.recs[i].end : end;
        if (tr.recs[l * per].start < end)
            return gr_fail(GR_ERR_INTERNAL, "roofline: traced launch %zu starts before launch %zu "
                           "ended (did another thread launch graphs meanwhile?)", l, l - 1);
    }
    const size_t rows = (size_t)r->n_nodes + 1;
    double *raw = gr_calloc(rows * (size_t)replays, sizeof *raw, "roofline times");
    double *excl = gr_calloc(rows * (size_t)replays, sizeof *excl, "roofline times");
    double *sums = gr_calloc(3 * (size_t)replays, sizeof *sums, "roofline times");
    int *count = gr_calloc(rows, sizeof *count, "roofline kernel counts");
    gr_status st = raw && excl && sums && count ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    double *busy = sums, *copy = sums + replays, *other = sums + 2 * (size_t)replays;
    int mapped = 0;
    for (int l = 0; l < replays && st == GR_OK; l++) {
        uint64_t reach = 0; /* the latest end so far in this launch */
        for (size_t i = (size_t)(l + 1) * per; i < (size_t)(l + 2) * per; i++) {
            const trace_rec *t = &tr.recs[i];
            if (t->end <= t->start)
                continue;
            const double dur = (double)(t->end - t->start) * 1e-3;
            const uint64_t from = t->start > reach ? t->start : reach;
            const double own = t->end > from ? (double)(t->end - from) * 1e-3 : 0.0;
            if (t->end > reach)
                reach = t->end;
            busy[l] += own;
            int node = id_find(t->graph_node);
            int row = node >= 0 && node < v->plan->n_nodes ? row_of[node] : -1;
            if (row >= 0) {
                raw[(size_t)row * (size_t)replays + (size_t)l] += dur;
                excl[(size_t)row * (size_t)replays + (size_t)l] += own;
                count[row] += l == 0;
                mapped++;
            } else if (t->copy) {
                copy[l] += dur;
            } else {
                other[l] += dur;
            }
        }
    }
    if (st == GR_OK && mapped == 0 && !v->dataflow)
        st = gr_fail(GR_ERR_INTERNAL, "roofline: none of the %zu traced operations belongs to a "
                     "plan node (CUPTI's graph node ids matched none of the capture's: %zu graph "
                     "nodes recorded at capture, %zu clones at instantiation)", tr.n, tr.created,
                     tr.cloned);
    for (int k = 0; k < r->n_nodes && st == GR_OK; k++) {
        gr_roofline_node *row = &r->nodes[k];
        row->us = median(raw + (size_t)k * (size_t)replays, replays);
        row->exclusive_us = median(excl + (size_t)k * (size_t)replays, replays);
        row->kernels = count[k];
        r->kernel_sum_us += row->us;
    }
    if (st == GR_OK) {
        r->busy_us = median(busy, replays);
        r->copy_us = median(copy, replays);
        r->other_us = median(other, replays);
    }
    free(raw);
    free(excl);
    free(sums);
    free(count);
    return st;
}

static gr_status in_graph_times(gpu_state *g, gpu_variant *v, gr_roofline *r, const int *row_of,
                                int replays)
{
    pthread_mutex_lock(&profile_lock);
    pthread_mutex_lock(&rec_lock);
    tr.n = tr.n_ids = tr.dropped = tr.created = tr.cloned = 0;
    tr.oom = tr.ids_oom = 0;
    pthread_mutex_unlock(&rec_lock);
    gr_status st = traced_replays(g, v, replays);
    pthread_mutex_lock(&rec_lock);
    if (st == GR_OK)
        st = attribute(r, v, row_of, replays);
    free(tr.recs);
    free(tr.ids);
    tr.recs = NULL;
    tr.ids = NULL;
    tr.n = tr.cap = tr.n_ids = tr.cap_ids = 0;
    pthread_mutex_unlock(&rec_lock);
    pthread_mutex_unlock(&profile_lock);
    return st;
}

int gr_roofline_available(void) { return 1; }

#else /* no CUPTI */

static gr_status in_graph_times(gpu_state *g, gpu_variant *v, gr_roofline *r, const int *row_of,
                                int replays)
{
    (void)g, (void)v, (void)r, (void)row_of, (void)replays;
    return gr_fail(GR_ERR_UNSUPPORTED, "roofline: this graphrun was built without CUPTI (the CUDA "
                   "toolkit's extras/CUPTI), so in-graph kernel times cannot be measured");
}

int gr_roofline_available(void) { return 0; }

#endif

/* ---- the public call --------------------------------------------------------------------- */

void gr_roofline_free(gr_roofline *roofline)
{
    if (!roofline)
        return;
    free(roofline->nodes);
    free(roofline);
}

gr_status gr_engine_roofline(gr_engine *engine, int replays, gr_roofline **out)
{
    if (!engine || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_roofline: NULL argument");
    *out = NULL;
    if (replays < 1 || replays > 1000)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_roofline: replays %d is outside 1..1000",
                       replays);
    if (engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_roofline: not a GPU engine");
    if (!gr_roofline_available())
        return in_graph_times(NULL, NULL, NULL, NULL, replays);
    if (!engine->opt.use_cuda_graph)
        return gr_fail(GR_ERR_UNSUPPORTED, "gr_engine_roofline: the engine runs without CUDA "
                       "graphs (use_cuda_graph 0 or GR_DISABLE_CUDA_GRAPHS): nothing to replay");
    GR_TRY(gr_gpu_ensure_variant(engine, 1));
    gpu_state *g = engine->impl;
    gpu_variant *v = gr_gpu_variant(g, 1);
    CUDA_TRY(cudaSetDevice(g->device));
    gr_roofline *r = gr_calloc(1, sizeof *r, "roofline");
    int *row_of = gr_calloc((size_t)v->plan->n_nodes + 1, sizeof *row_of, "roofline rows");
    gr_status st = r && row_of ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    if (st == GR_OK) {
        r->batch = engine->opt.batch;
        r->micro_batch = v->micro_batch;
        r->replays = replays;
        st = device_peaks(g, &r->peaks);
    }
    if (st == GR_OK)
        st = model_rows(v, r, row_of);
    if (st == GR_OK)
        st = replay_median(g, v, replays, &r->replay_us);
    if (st == GR_OK)
        st = in_graph_times(g, v, r, row_of, replays);
    free(row_of);
    if (st != GR_OK) {
        gr_roofline_free(r);
        return st;
    }
    *out = r;
    return GR_OK;
}
