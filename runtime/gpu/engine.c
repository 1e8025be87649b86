/* CUDA backend: turns a plan (planner/plan.h) into one captured CUDA graph.
 *
 * Build: plan the network for (precision, batch, input type); make sure there are as many
 * streams and events as the plan uses; allocate one arena for every activation, one block for the
 * weights, one device block for the network input and the outputs (outputs back to back, so one
 * copy brings them all home), pinned host staging for both; upload the weights (build-time
 * copies, gpu/weights.c); run the forward pass once eagerly (module loading, cuBLAS setup) and
 * time it node by node for the time split; then capture the same dispatch loop (gpu/dispatch.c)
 * on the plan's streams - H2D input copy, every node, D2H output copy - into one graph and
 * instantiate it.
 *
 * Runs in flight (inflight = N): a variant has N instances, each with its own arena, io block,
 * pinned staging, im2col / split-K scratch, done event, and graph (captured from the same dispatch
 * loop with the instance's addresses); the plan and the weights are the variant's, shared.
 * Instance 0 launches on the engine's first stream, the others on their own streams.
 *
 * Run: one cudaGraphLaunch, an event record and one event synchronization. Nothing is allocated,
 * copied by the host or synchronized besides. With use_cuda_graph = 0 the same dispatch loop runs
 * eagerly instead (every instance on the plan's streams, so runs in flight then do not overlap).
 *
 * An engine takes u8 HWC input by default (a quarter of the bytes of float). Float input (the
 * f32 entry points) gets its own plan and graph, built the first time it is asked for.
 * Every CUDA and cuBLAS status is checked; a failure during a run marks the engine failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "experimental/dataflow/plan.h"
#include "runtime/gpu/backend.h"
#include "runtime/timing_cache.h"

static const size_t cublas_ws_bytes = 32u << 20; /* what cuBLAS asks for on Hopper */

/* ---- streams and events -------------------------------------------------------------------- */

/* A cuBLAS handle for stream s, with its own workspace so capture never allocates and parallel
 * branches never share scratch. */
static gr_status create_cublas(gpu_state *g, int s)
{
    if (!g->cublas_ws[s])
        CUDA_TRY(cudaMalloc(&g->cublas_ws[s], cublas_ws_bytes));
    if (cublasCreate(&g->cublas[s]) != CUBLAS_STATUS_SUCCESS) {
        g->cublas[s] = NULL;
        return gr_fail(GR_ERR_CUBLAS, "cublasCreate failed");
    }
    /* Stream first: cublasSetStream resets the workspace to cuBLAS's own pool, which would
     * then allocate inside graph capture. */
    if (cublasSetStream(g->cublas[s], g->streams[s]) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g->cublas[s], g->cublas_ws[s], cublas_ws_bytes) !=
            CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(g->cublas[s]);
        g->cublas[s] = NULL;
        return gr_fail(GR_ERR_CUBLAS, "cublasSetStream/cublasSetWorkspace failed");
    }
    return GR_OK;
}

/* Grow the streams (with their join events, and a cuBLAS handle on each once a plan calls
 * cuBLAS: f32 convs, [connected], in any engine precision) and the plan events to what `plan`
 * uses. Variants built earlier keep working: their plans use a prefix of both. */
static gr_status ensure_streams(gpu_state *g, const gr_plan *plan)
{
    int streams = plan->n_streams < 1 ? 1 : plan->n_streams;
    if (streams > GR_GPU_MAX_STREAMS)
        return gr_fail(GR_ERR_UNSUPPORTED, "the plan uses %d streams, the engine at most %d",
                       streams, GR_GPU_MAX_STREAMS);
    for (; g->n_streams < streams; g->n_streams++) {
        int s = g->n_streams;
        CUDA_TRY(cudaStreamCreateWithFlags(&g->streams[s], cudaStreamNonBlocking));
        if (s > 0)
            CUDA_TRY(cudaEventCreateWithFlags(&g->join[s], cudaEventDisableTiming));
    }
    int uses_cublas = 0;
    for (int i = 0; i < plan->n_nodes && !uses_cublas; i++)
        uses_cublas = gr_gpu_node_uses_cublas(plan, &plan->nodes[i]);
    for (int s = 0; s < streams && uses_cublas; s++)
        if (!g->cublas[s])
            GR_TRY(create_cublas(g, s));
    if (plan->n_events > g->n_events) {
        cudaEvent_t *events = gr_calloc((size_t)plan->n_events, sizeof *events, "events");
        if (!events)
            return GR_ERR_OUT_OF_MEMORY;
        if (g->n_events)
            memcpy(events, g->events, (size_t)g->n_events * sizeof *events);
        free(g->events);
        g->events = events;
        for (; g->n_events < plan->n_events; g->n_events++)
            CUDA_TRY(cudaEventCreateWithFlags(&g->events[g->n_events], cudaEventDisableTiming));
    }
    return GR_OK;
}

/* ---- variants and their instances ----------------------------------------------------------- */

/* Where an instance's graph is launched: instance 0 on the engine's first stream (where eager runs
 * and capture happen too), the others on their own, so their runs overlap. */
static cudaStream_t launch_stream(const gpu_state *g, const gpu_instance *inst)
{
    return inst->stream ? inst->stream : g->streams[0];
}

static void instance_free(gpu_instance *inst)
{
    if (inst->done)
        cudaEventSynchronize(inst->done); /* nothing is freed under a run in flight */
    gr_gpu_jpeg_slot_free(inst->jpeg);
    free(inst->host_image);
    if (inst->exec)
        cudaGraphExecDestroy(inst->exec);
    if (inst->graph)
        cudaGraphDestroy(inst->graph);
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++) {
        cudaFree(inst->im2col[s]);
        cudaFree(inst->cublas_ws[s]);
    }
    cudaFree(inst->splitk);
    cudaFree(inst->df_state);
    cudaFree(inst->arena);
    cudaFree(inst->io);
    if (inst->host_in)
        cudaFreeHost(inst->host_in);
    if (inst->host_out)
        cudaFreeHost(inst->host_out);
    if (inst->done)
        cudaEventDestroy(inst->done);
    if (inst->stream)
        cudaStreamDestroy(inst->stream);
    memset(inst, 0, sizeof *inst);
}

static void variant_free(gpu_variant *v)
{
    for (int k = 0; k < GR_MAX_INFLIGHT; k++)
        instance_free(&v->inst[k]);
    gr_gpu_dataflow_free(v);
    free(v->splitk_offset);
    free(v->splitk_bytes);
    cudaFree(v->weights);
    free(v->nw);
    free(v->pdl);
    for (int i = 0; v->gemm && v->plan && i < v->plan->n_nodes; i++)
        gr_conv_gemm_destroy(v->gemm[i]);
    free(v->gemm);
    free(v->tactic);
    free(v->node_us);
    gr_plan_free(v->plan);
    memset(v, 0, sizeof *v);
}

/* Instance `k`'s activations, io block and pinned staging, with deterministic non-zero input
 * before the first run (warm-up and timing); instances >= 1 also get their launch stream and,
 * where the engine has cuBLAS handles, a cuBLAS workspace per stream for their captured graph. */
static gr_status instance_alloc(const gpu_state *g, const gpu_variant *v, gpu_instance *inst, int k)
{
    size_t arena = v->plan->arena_bytes ? v->plan->arena_bytes : 256;
    CUDA_TRY(cudaMalloc((void **)&inst->arena, arena));
    CUDA_TRY(cudaMemset(inst->arena, 0, arena));
    CUDA_TRY(cudaMalloc((void **)&inst->io, v->in_bytes + v->out_bytes));
    CUDA_TRY(cudaMallocHost(&inst->host_in, v->in_bytes));
    CUDA_TRY(cudaMallocHost((void **)&inst->host_out, v->out_bytes));
    memset(inst->host_in, 0x40, v->in_bytes);
    CUDA_TRY(cudaEventCreateWithFlags(&inst->done, cudaEventDisableTiming));
    if (k == 0)
        return GR_OK;
    CUDA_TRY(cudaStreamCreateWithFlags(&inst->stream, cudaStreamNonBlocking));
    for (int s = 0; s < g->n_streams; s++)
        if (g->cublas[s])
            CUDA_TRY(cudaMalloc(&inst->cublas_ws[s], cublas_ws_bytes));
    return GR_OK;
}

/* Point the cuBLAS handles at these workspaces (one per stream). */
static gr_status use_cublas_workspaces(gpu_state *g, void *const *ws)
{
    for (int s = 0; s < g->n_streams; s++)
        if (g->cublas[s] && ws[s] &&
            cublasSetWorkspace(g->cublas[s], ws[s], cublas_ws_bytes) != CUBLAS_STATUS_SUCCESS)
            return gr_fail(GR_ERR_CUBLAS, "cublasSetWorkspace failed (stream %d)", s);
    return GR_OK;
}

/* The graph's input copy: its one root memcpy node (gr_gpu_enqueue_forward copies the input
 * first, on stream 0, before anything forks), which a launch whose input gr_engine_decode_jpegs
 * put on the device disables. None found (NULL): such launches are refused, never wrong. */
static gr_status find_input_copy(gpu_instance *inst)
{
    inst->input_copy = NULL;
    size_t n = 0;
    CUDA_TRY(cudaGraphGetRootNodes(inst->graph, NULL, &n));
    cudaGraphNode_t roots[8];
    if (n == 0 || n > sizeof roots / sizeof roots[0])
        return GR_OK;
    CUDA_TRY(cudaGraphGetRootNodes(inst->graph, roots, &n));
    int copies = 0;
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType type;
        CUDA_TRY(cudaGraphNodeGetType(roots[i], &type));
        if (type == cudaGraphNodeTypeMemcpy) {
            inst->input_copy = roots[i];
            copies++;
        }
    }
    if (copies != 1)
        inst->input_copy = NULL;
    return GR_OK;
}

/* Record the instance's forward pass on the plan's streams into its own graph. The cuBLAS kernels
 * recorded keep the workspace set at capture: an instance >= 1 captures with its own, so graphs
 * running at once never share one; the engine's are restored afterwards for instance 0 and eager
 * runs. */
static gr_status capture_instance(gpu_state *g, gpu_variant *v, gpu_instance *inst)
{
    if (inst->stream)
        GR_TRY(use_cublas_workspaces(g, inst->cublas_ws));
    gr_status st = GR_OK;
    cudaError_t err = cudaStreamBeginCapture(g->streams[0], cudaStreamCaptureModeThreadLocal);
    cudaGraph_t graph = NULL;
    if (err == cudaSuccess) {
        st = gr_gpu_enqueue_forward(g, v, inst, NULL, NULL);
        err = cudaStreamEndCapture(g->streams[0], &graph);
    }
    if (inst->stream) {
        gr_status restored = use_cublas_workspaces(g, g->cublas_ws);
        st = st != GR_OK ? st : restored;
    }
    if (st != GR_OK || err != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        return st != GR_OK ? st : gr_gpu_cuda_fail(err, "capturing the graph", __FILE__, __LINE__);
    }
    inst->graph = graph;
    GR_TRY(find_input_copy(inst));
    CUDA_TRY(cudaGraphInstantiate(&inst->exec, inst->graph, 0));
    CUDA_TRY(cudaGraphUpload(inst->exec, launch_stream(g, inst)));
    CUDA_TRY(cudaStreamSynchronize(launch_stream(g, inst)));
    return GR_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Eager runs of instance 0 with events around every node: the time split (type conversion,
 * copies, computation), median over a few runs. Also the warm-up before capture (module loading
 * and cuBLAS setup are per engine, so the other instances need none). */
static gr_status instrumented_runs(gpu_state *g, gpu_variant *v)
{
    const gr_plan *plan = v->plan;
    enum { RUNS = 3 };
    int n_ev = 2 * plan->n_nodes;
    cudaEvent_t *ev = gr_calloc((size_t)n_ev + 4, sizeof *ev, "timing events");
    if (!ev)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = GR_OK;
    int created = 0;
    for (; created < n_ev + 4 && st == GR_OK; created++) {
        cudaError_t err = cudaEventCreate(&ev[created]);
        if (err != cudaSuccess)
            st = gr_gpu_cuda_fail(err, "cudaEventCreate", __FILE__, __LINE__);
    }
    float convert[RUNS], copy[RUNS], compute[RUNS], total[RUNS];
    float *node_ms = gr_calloc((size_t)RUNS * (size_t)plan->n_nodes, sizeof *node_ms, "node times");
    v->node_us = gr_calloc((size_t)plan->n_nodes, sizeof *v->node_us, "node times");
    if (!node_ms || !v->node_us)
        st = GR_ERR_OUT_OF_MEMORY;
    for (int r = 0; r < RUNS && st == GR_OK; r++) {
        st = gr_gpu_enqueue_forward(g, v, &v->inst[0], ev, ev + n_ev);
        if (st == GR_OK) {
            cudaError_t err = cudaStreamSynchronize(g->streams[0]);
            if (err != cudaSuccess)
                st = gr_gpu_cuda_fail(err, "cudaStreamSynchronize (instrumented run)", __FILE__,
                                      __LINE__);
        }
        float cv = 0, cp = 0, cm = 0, ms = 0;
        for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
            const gr_plan_node *nd = &plan->nodes[i];
            if (cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) != cudaSuccess)
                continue;
            node_ms[(size_t)i * RUNS + (size_t)r] = ms;
            if (nd->kind == GR_OP_QUANTIZE || nd->kind == GR_OP_DEQUANTIZE ||
                nd->kind == GR_NODE_CONVERT)
                cv += ms;
            else
                cm += ms;
        }
        float a = 0, b = 0, all = 0;
        cudaEventElapsedTime(&a, ev[n_ev], ev[n_ev + 1]);
        cudaEventElapsedTime(&b, ev[n_ev + 2], ev[n_ev + 3]);
        cudaEventElapsedTime(&all, ev[n_ev], ev[n_ev + 3]);
        cp = a + b;
        /* The node events hold the last slice's times; the slices are the same launches. */
        convert[r] = cv * (float)v->n_slices;
        copy[r] = cp;
        compute[r] = cm * (float)v->n_slices;
        total[r] = all;
    }
    cudaGetLastError();
    for (int i = 0; i < created; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        float *runs = node_ms + (size_t)i * RUNS;
        qsort(runs, RUNS, sizeof(float), cmp_float);
        v->node_us[i] = 1e3f * runs[RUNS / 2] * (float)v->n_slices; /* the slices are alike */
    }
    free(node_ms);
    if (st != GR_OK)
        return st;
    qsort(convert, RUNS, sizeof(float), cmp_float);
    qsort(copy, RUNS, sizeof(float), cmp_float);
    qsort(compute, RUNS, sizeof(float), cmp_float);
    qsort(total, RUNS, sizeof(float), cmp_float);
    v->split = (gr_timing){1e3 * (double)convert[RUNS / 2], 1e3 * (double)copy[RUNS / 2],
                           1e3 * (double)compute[RUNS / 2], 1e3 * (double)total[RUNS / 2]};
    return GR_OK;
}

/* ---- the executor (docs/dataflow.md) ------------------------------------------------------ */

static gr_status time_replays(gr_engine *e, gpu_state *g, gpu_variant *v, double best_us,
                              double *us, int *cut);

static void drop_graph(gpu_instance *inst)
{
    if (inst->exec)
        cudaGraphExecDestroy(inst->exec);
    if (inst->graph)
        cudaGraphDestroy(inst->graph);
    inst->exec = NULL;
    inst->graph = NULL;
    inst->input_copy = NULL;
    inst->input_copy_off = 0;
}

/* One eager dataflow run of instance 0, waited for and checked: the warm-up before capture, and
 * the proof that the kernel runs this program here before any choice relies on it. */
static gr_status dataflow_warm_up(gpu_state *g, gpu_variant *v)
{
    gpu_instance *inst = &v->inst[0];
    GR_TRY(gr_gpu_enqueue_forward(g, v, inst, NULL, NULL));
    CUDA_TRY(cudaStreamSynchronize(g->streams[0]));
    return gr_gpu_dataflow_check_run(v, inst);
}

/* The timing-cache key of the executor choice: the micro-batch key's network hash, with its own
 * prefix. */
static void micro_batch_key(const gr_engine *e, int u8, char *key, size_t len);

/* Which executor runs the variant (v->dataflow), and the notice line that says why: the option,
 * the timing cache, or (AUTO) whole replays of both graphs on instance 0, the faster kept. */
static gr_status choose_executor(gr_engine *e, gpu_state *g, gpu_variant *v, int u8,
                                 const char *why_not)
{
    char line[512];
    v->dataflow = 0;
    if (g->executor == GR_EXECUTOR_GRAPH || g->observable)
        return GR_OK;
    if (!v->df_program) {
        snprintf(line, sizeof line, "executor: graph (%s input: the dataflow kernel cannot run "
                 "this plan: %.400s)", u8 ? "uint8" : "float", why_not);
        gr_engine_add_notice(e, line);
        return GR_OK;
    }
    v->dataflow = 1;
    gr_status st = dataflow_warm_up(g, v);
    if (st != GR_OK) {
        v->dataflow = 0;
        if (g->executor == GR_EXECUTOR_DATAFLOW)
            return st;
        snprintf(line, sizeof line, "executor: graph (the dataflow warm-up run failed: %.400s)",
                 gr_last_error());
        gr_engine_add_notice(e, line);
        cudaGetLastError();
        return GR_OK;
    }
    if (g->executor == GR_EXECUTOR_DATAFLOW) {
        snprintf(line, sizeof line, "executor: dataflow (the executor option; %d tasks, %d "
                 "dependencies)", v->df_program->header->n_tasks, v->df_program->header->n_deps);
        gr_engine_add_notice(e, line);
        return GR_OK;
    }
    char key[GR_TCACHE_KEY_MAX];
    micro_batch_key(e, u8, key, sizeof key);
    memcpy(key, "df", 2); /* "mb:..." -> "df:...": the same network, its own entry */
    const gr_tcache_entry *hit = g->tcache ? gr_timing_cache_find(g->tcache, key) : NULL;
    if (hit && (hit->tile == 0 || hit->tile == 1)) {
        v->dataflow = hit->tile;
        snprintf(line, sizeof line, "executor: %s (timing cache: dataflow %.1f us, graph %.1f us "
                 "per replay)", v->dataflow ? "dataflow" : "graph", hit->us, hit->auto_us);
        gr_engine_add_notice(e, line);
        return GR_OK;
    }
    if (!e->opt.use_cuda_graph) {
        v->dataflow = 0;
        gr_engine_add_notice(e, "executor: graph (auto measures graph replays; this engine runs "
                                "eagerly)");
        return GR_OK;
    }
    double us[2] = {0.0, 0.0};
    for (int x = 0; x < 2; x++) {
        v->dataflow = x;
        GR_TRY(capture_instance(g, v, &v->inst[0]));
        int cut = 0;
        st = time_replays(e, g, v, 0.0, &us[x], &cut);
        drop_graph(&v->inst[0]);
        GR_TRY(st);
    }
    /* replays leave the instance's state further on: the next check accepts any newer report */
    v->dataflow = us[1] < us[0];
    if (g->tcache)
        GR_TRY(gr_timing_cache_put(g->tcache, key, v->dataflow, 0, us[1], us[0]));
    snprintf(line, sizeof line, "executor: %s (measured: dataflow %.1f us, graph %.1f us per "
             "replay)", v->dataflow ? "dataflow" : "graph", us[1], us[0]);
    gr_engine_add_notice(e, line);
    return GR_OK;
}

/* The variant's plan, its int8 scales set. */
static gr_status plan_variant(gr_engine *e, const gpu_state *g, gpu_variant *v, int input_u8,
                              int fuse, const unsigned char *no_fuse_layer, int weight_data)
{
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.weight_data = weight_data;
    gr_engine_plan_precision(e, &po); /* a mixed engine: its per-layer map */
    po.batch = v->micro_batch;
    po.max_streams = GR_GPU_MAX_STREAMS;
    po.input_u8 = input_u8;
    po.fuse_maxpool = po.fuse_input_quantize = po.fuse_output_dequantize = fuse;
    po.no_fuse_layer = no_fuse_layer;
    po.n_no_fuse_layer = no_fuse_layer ? e->net->n_layers : 0;
    /* The dataflow executor's plans share no arena bytes between tensors: their task graphs then
     * have data edges only (docs/dataflow.md). AUTO's per-layer graph runs on the same plan. */
    po.no_reuse = g->executor != GR_EXECUTOR_GRAPH && !g->observable;
    GR_TRY(gr_plan_build(e->net, &po, &v->plan));
    const gr_plan *plan = v->plan;
    if (plan->n_outputs != e->n_heads || plan->n_outputs > GR_MAX_HEADS)
        return gr_fail(GR_ERR_INTERNAL, "plan has %d outputs, the network %d heads",
                       plan->n_outputs, e->n_heads);
    if (e->opt.precision == GR_PREC_INT8)
        GR_TRY(gr_plan_set_ranges(v->plan, g->layer_range, g->input_range));
    if (!plan->scales_ready)
        return gr_fail(GR_ERR_INTERNAL, "plan has int8 tensors without scales");
    return GR_OK;
}

static gr_status plan_with_fusions(gr_engine *e, gpu_state *g, gpu_variant *v, int input_u8,
                                   int weight_data)
{
    /* The tensor-core precisions fuse what the kernels can: maxpools into the convs' epilogues,
     * the input quantization into the first conv, the output dequantization into the heads.
     * If a kernel cannot take one of the planned convs (a 7x7 first layer with 64 filters, say),
     * plan again without fusions into that layer, and so on; a refusal no exclusion can fix (a
     * conv with nothing fused into it) is the build's error. */
    /* fp32: only the direct 3x3 kernel pools; the convs it does not take are planned again
     * without their pool (no notice: that is the fp32 plan, not a degraded one). An observable
     * engine (calibration's) keeps every layer's value: no fusion. */
    const int f32 = e->opt.precision == GR_PREC_FP32;
    const int f32_pools = g->f32_algo == GR_F32_ALGO_AUTO || g->f32_algo == GR_F32_ALGO_DIRECT3X3;
    int fuse = !g->observable && (!f32 || f32_pools);
    unsigned char *no_fuse = NULL;
    /* The retries plan without the weights' data (shapes and offsets are the same: the check
     * reads no weight), the plan kept is made once with them: each plan with data copies, folds
     * and quantizes every weight (~50-130 ms for YOLOv2-tiny), and an fp32 engine retries once
     * per pooled conv the direct kernel does not take. */
    int final_fuse = fuse;
    gr_status st = plan_variant(e, g, v, input_u8, fuse, NULL, 0);
    for (int tries = 0; st == GR_OK && fuse; tries++) {
        int bad = -1;
        gr_status refused = gr_gpu_plan_check(g, v, &bad);
        if (refused == GR_OK)
            break;
        const gr_plan_node *nd = bad >= 0 ? &v->plan->nodes[bad] : NULL;
        const unsigned fusions = GR_FUSED_MAXPOOL | GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT;
        int layer = nd && (nd->fused & fusions) ? nd->layer : -1;
        if (layer < 0) { /* nothing fused there: the message of the check stands */
            st = refused;
            break;
        }
        size_t used = strlen(e->notice);
        if (!f32)
            snprintf(e->notice + used, sizeof e->notice - used, "%sfusions off for layer %d "
                     "(slower plan): %s", used ? "\n" : "", layer, gr_last_error());
        if (!no_fuse)
            no_fuse = gr_calloc((size_t)e->net->n_layers, 1, "fusion exclusions");
        gr_plan_free(v->plan);
        v->plan = NULL;
        if (!no_fuse) {
            st = GR_ERR_OUT_OF_MEMORY;
        } else if (layer >= e->net->n_layers || no_fuse[layer] || tries >= e->net->n_layers) {
            final_fuse = 0;
            st = plan_variant(e, g, v, input_u8, 0, NULL, 0);
            break;
        } else {
            no_fuse[layer] = 1;
            st = plan_variant(e, g, v, input_u8, fuse, no_fuse, 0);
        }
    }
    if (st == GR_OK && weight_data) {
        gr_plan_free(v->plan);
        v->plan = NULL;
        st = plan_variant(e, g, v, input_u8, final_fuse, final_fuse ? no_fuse : NULL, 1);
    }
    free(no_fuse);
    int bad = -1;
    if (st == GR_OK && fuse)
        st = gr_gpu_plan_check(g, v, &bad); /* the plan the loop ended with */
    return st;
}

/* One eager run of instance 0, waited for: module loading and cuBLAS setup before capture. */
static gr_status warm_up(gpu_state *g, gpu_variant *v)
{
    GR_TRY(gr_gpu_enqueue_forward(g, v, &v->inst[0], NULL, NULL));
    CUDA_TRY(cudaStreamSynchronize(g->streams[0]));
    return GR_OK;
}

/* A saved engine's load takes the device weights its file holds for this variant when they fit
 * the plan (the same layout hash: the same graphrun on the same GPU plans the same), and a
 * micro-batch candidate those of the first candidate; then it plans without the network's fp32
 * weights: no copy, BN folding, quantization or re-layout. */
static gr_status variant_build(gr_engine *e, gpu_state *g, gpu_variant *v, int input_u8,
                               int trial)
{
    double phase = gr_now_us();
    const gr_saved_weights *saved =
        g->has_saved ? gr_saved_gpu_weights(&g->saved, input_u8, v->micro_batch) : NULL;
    const int from_file = saved != NULL;
    if (!saved)
        saved = g->reuse;
    GR_TRY(plan_with_fusions(e, g, v, input_u8, saved == NULL));
    if (saved && saved->layout != gr_gpu_weights_layout(v->plan)) {
        if (from_file)
            gr_engine_add_notice(e, "the engine file's device weights do not fit this plan: "
                                    "made again from the network's weights");
        gr_plan_free(v->plan);
        v->plan = NULL;
        saved = NULL;
        GR_TRY(plan_with_fusions(e, g, v, input_u8, 1));
    }
    gr_plan *plan = v->plan;
    char df_why[400] = "";
    if (g->executor != GR_EXECUTOR_GRAPH)
        GR_TRY(gr_gpu_dataflow_prepare(g, v, df_why, sizeof df_why));
    e->build_times.plan_ms += (gr_now_us() - phase) / 1e3;
    GR_TRY(ensure_streams(g, plan));
    v->nw = gr_calloc((size_t)plan->n_nodes, sizeof *v->nw, "node weights");
    v->pdl = gr_calloc((size_t)plan->n_nodes, 1, "launch modes");
    if (!v->nw || !v->pdl)
        return GR_ERR_OUT_OF_MEMORY;
    gr_gpu_mark_pdl(g, v);

    /* The io block: the whole batch's input, then each output (f32 NCHW, 256-byte aligned) back
     * to back; a slice's part of each is its images' (batch is the outermost dimension). */
    const gr_plan_tensor *in = &plan->tensors[plan->input_tensor];
    const size_t slices = (size_t)v->n_slices;
    v->slice_in_bytes = in->bytes;
    v->in_bytes = gr_gpu_align(in->bytes * slices, 256);
    v->out_bytes = 0;
    for (int k = 0; k < plan->n_outputs; k++) {
        const gr_plan_tensor *t = &plan->tensors[plan->output_tensors[k]];
        if (t->dtype != GR_DTYPE_F32 || t->view_of >= 0)
            return gr_fail(GR_ERR_INTERNAL, "plan output %d is not a dense f32 tensor", k);
        v->out_offset[k] = v->out_bytes;
        v->slice_out_bytes[k] = t->bytes;
        v->out_bytes += gr_gpu_align(t->bytes * slices, 256);
    }
    /* A pass's input and outputs start where the previous pass's end; the kernels take 16-byte
     * aligned tensors, so a micro batch whose pass does not fill whole 16-byte units is refused
     * (the measured candidates are multiples of MIN_MICRO_BATCH images and always fit). */
    for (int k = -1; slices > 1 && k < plan->n_outputs; k++) {
        size_t bytes = k < 0 ? v->slice_in_bytes : v->slice_out_bytes[k];
        if (bytes % 16 != 0)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "micro_batch %d: a pass's %s of %zu bytes "
                           "would leave the next pass's off the 16-byte alignment the kernels "
                           "need; take a micro batch that is a multiple of 16 images (or 0: "
                           "measured)", v->micro_batch, k < 0 ? "input" : "output", bytes);
    }
    if (v->df_program) { /* the dataflow kernel's report rides home with the outputs */
        v->df_status_offset = v->out_bytes;
        v->out_bytes += 256;
    }
    /* A micro-batch candidate (trial) gets instance 0 only, all its timing needs; the winner its
     * other runs in flight afterwards (variant_finish). n_inst is the engine's in any case (the
     * fp32 rule's split-K depends on it). */
    v->n_inst = e->inflight;
    phase = gr_now_us();
    for (int k = 0; k < (trial ? 1 : v->n_inst); k++) {
        GR_TRY(instance_alloc(g, v, &v->inst[k], k));
        if (v->df_program)
            GR_TRY(gr_gpu_dataflow_alloc_state(v, &v->inst[k]));
    }
    e->build_detail.alloc_ms += (gr_now_us() - phase) / 1e3;
    phase = gr_now_us();
    GR_TRY(gr_gpu_upload_weights(v, saved));
    if (v->df_program)
        GR_TRY(gr_gpu_dataflow_upload(v));
    CUDA_TRY(cudaDeviceSynchronize());
    e->build_times.weights_ms += (gr_now_us() - phase) / 1e3;
    /* Tactics before the scratch: each conv's split-K workspace is sized for its own. */
    GR_TRY(gr_gpu_choose_tactics(e, g, v));
    phase = gr_now_us();
    GR_TRY(gr_gpu_alloc_scratch(g, v));
    CUDA_TRY(cudaDeviceSynchronize());
    e->build_detail.alloc_ms += (gr_now_us() - phase) / 1e3;

    /* Warm-up and the time split, eagerly (a trial: one warm-up run, the time split is the
     * winner's); then capture the same launches, once per instance allocated. */
    phase = gr_now_us();
    GR_TRY(trial ? warm_up(g, v) : instrumented_runs(g, v));
    e->build_detail.warmup_ms += (gr_now_us() - phase) / 1e3;
    GR_TRY(choose_executor(e, g, v, input_u8, df_why));
    for (int k = 0; k < (trial ? 1 : v->n_inst) && e->opt.use_cuda_graph; k++)
        GR_TRY(capture_instance(g, v, &v->inst[k]));
    e->build_times.capture_ms += (gr_now_us() - phase) / 1e3;
    v->built = 1;
    return GR_OK;
}

/* The micro-batch winner, built as a trial, made the engine's: its other runs in flight
 * (instances, scratch, graphs) and the time split. */
static gr_status variant_finish(gr_engine *e, gpu_state *g, gpu_variant *v)
{
    double phase = gr_now_us();
    for (int k = 1; k < v->n_inst; k++) {
        GR_TRY(instance_alloc(g, v, &v->inst[k], k));
        if (v->df_program)
            GR_TRY(gr_gpu_dataflow_alloc_state(v, &v->inst[k]));
        GR_TRY(gr_gpu_alloc_instance_scratch(g, v, &v->inst[k]));
    }
    CUDA_TRY(cudaDeviceSynchronize());
    e->build_detail.alloc_ms += (gr_now_us() - phase) / 1e3;
    phase = gr_now_us();
    /* The time split is of the per-node launches, as a full build's (made before the executor
     * is chosen); eager runs leave the dataflow kernel's state as it is. */
    const int dataflow = v->dataflow;
    v->dataflow = 0;
    gr_status st = instrumented_runs(g, v);
    v->dataflow = dataflow;
    GR_TRY(st);
    e->build_detail.warmup_ms += (gr_now_us() - phase) / 1e3;
    for (int k = 1; k < v->n_inst && e->opt.use_cuda_graph; k++)
        GR_TRY(capture_instance(g, v, &v->inst[k]));
    e->build_times.capture_ms += (gr_now_us() - phase) / 1e3;
    return GR_OK;
}

/* New measurements go to the timing cache file; failing to write it is a notice, not an error
 * (the engine is built). */
static void save_timing_cache(gr_engine *e, gpu_state *g)
{
    if (!g->tcache || !g->timing_cache_path || !g->tcache->dirty)
        return;
    if (gr_timing_cache_save(g->tcache, g->timing_cache_path) == GR_OK) {
        g->tcache->dirty = 0;
        return;
    }
    char line[400];
    snprintf(line, sizeof line, "timing cache not written: %.360s", gr_last_error());
    gr_engine_add_notice(e, line);
}

/* A saved engine's tactics (its blob: the timing cache of its build, see gpu_save_blob) become
 * this engine's cache, so the search finds every conv there. They were checked (one run and the
 * numerics check) when the engine was built, and the front compared the device identity (GPU
 * model and SM count, CUDA runtime, driver, cuBLASLt: engine_file.c) before reading them, so they
 * are taken as they are: running each conv twice more and comparing on the host cost a load up
 * to 0.5 s (fp16, batch 64, H100). The kernels' argument checks still apply. A cache the parser
 * refuses means the file is not what its header says. */
static gr_status take_saved_tactics(gr_engine *e, gpu_state *g)
{
    char notice[512] = "";
    if (g->saved.tactics_len == 0)
        return GR_OK;
    gr_timing_cache_parse(g->tcache, g->saved.tactics, g->saved.tactics_len, "engine file", notice,
                          sizeof notice);
    if (notice[0])
        return gr_fail(GR_ERR_PARSE, "engine file: its stored tactics are refused: %s", notice);
    g->tcache->dirty = 0;
    g->tcache_trusted = 1; /* the front checked the device identity (engine_file.c) */
    (void)e;
    return GR_OK;
}

/* The tactic search's settings (the front applied the environment to e->opt) and the timing
 * cache (read once per engine). */
static gr_status tactics_init(gr_engine *e, gpu_state *g)
{
    g->tactic_search = e->opt.tactic_search != 0;
    g->gemm_tactic = e->opt.gemm_tactic != GR_TOGGLE_OFF;
    /* fp32 convs are measured only in an fp32 engine: the fp32 layers of an int8 or fp16 engine
     * keep the rule, so that engine's outputs do not depend on a build's timings (the candidates
     * agree to 1e-5, not bit for bit). */
    g->f32_search = g->tactic_search && g->f32_algo == GR_F32_ALGO_AUTO &&
                    e->opt.precision == GR_PREC_FP32 && !e->layer_prec;
    if (!g->tactic_search)
        return GR_OK;
    char device[GR_TCACHE_DEVICE_MAX];
    GR_TRY(gr_gpu_device_key(g, device, sizeof device));
    g->tcache = gr_calloc(1, sizeof *g->tcache, "timing cache");
    if (!g->tcache)
        return GR_ERR_OUT_OF_MEMORY;
    gr_timing_cache_init(g->tcache, device);
    if (g->has_saved)
        return take_saved_tactics(e, g);
    if (!e->opt.timing_cache)
        return GR_OK;
    size_t len = strlen(e->opt.timing_cache) + 1;
    g->timing_cache_path = malloc(len);
    if (!g->timing_cache_path)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory (timing cache path)");
    memcpy(g->timing_cache_path, e->opt.timing_cache, len);
    char notice[512];
    gr_timing_cache_load(g->tcache, g->timing_cache_path, notice, sizeof notice);
    gr_engine_add_notice(e, notice);
    return GR_OK;
}

/* e->node_times: the launching nodes of v's plan and their instrumented times. */
static gr_status publish_node_times(gr_engine *e, const gpu_variant *v)
{
    const gr_plan *plan = v->plan;
    free(e->node_times);
    e->n_node_times = 0;
    e->node_times = gr_calloc((size_t)plan->n_nodes + 1, sizeof *e->node_times, "node times");
    if (!e->node_times)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes && v->node_us; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_gpu_node_launches(nd))
            continue;
        gr_node_time *t = &e->node_times[e->n_node_times++];
        t->layer = nd->layer;
        snprintf(t->kind, sizeof t->kind, "%s", gr_plan_kind_name(nd->kind));
        t->us = (double)v->node_us[i];
    }
    return GR_OK;
}

/* ---- micro-batching (docs/performance.md, "Micro-batching") -------------------------------- */

/* Sub-batches measured: halvings of the batch down to 32 images (below that a YOLO layer's grid
 * no longer fills an H100 and the per-launch overheads grow, bench/results). */
enum { MIN_MICRO_BATCH = 32, MAX_MB_CANDIDATES = 13, MB_REPLAYS = 7, MB_SETTLE_REPLAYS = 3 };
/* The tactic search's timing rule for whole replays (docs/tactics.md): a candidate whose first
 * replay is 1.5x the best median so far cannot win (replays spread by about 1%); three replays
 * within 3% of their median give that median, else seven are timed. */
static const double mb_cut_off_ratio = 1.5, mb_settled_spread = 0.03;
/* A smaller sub-batch must be 2% faster to win: replay timings move by about 1% from build to
 * build, and the choice should not flip with them. */
static const double keep_larger_ratio = 0.98;

/* The variant built for sub-batches of `micro` images; freed again on failure. */
static gr_status build_sized(gr_engine *e, gpu_state *g, gpu_variant *v, int u8, int micro,
                             int trial)
{
    v->micro_batch = micro;
    v->n_slices = e->opt.batch / micro;
    gr_status st = variant_build(e, g, v, u8, trial);
    if (st != GR_OK)
        variant_free(v);
    return st;
}

/* The timing-cache key of the micro-batch choice: the network's shape (name, input, every
 * layer's inputs and output shape, its parameter count), the precision map, batch, input type,
 * runs in flight and fp16 accumulation. */
static void micro_batch_key(const gr_engine *e, int u8, char *key, size_t len)
{
    const gr_net *net = e->net;
    uint64_t h = gr_fnv1a(0xcbf29ce484222325ull, net->name, strlen(net->name));
    const int shape[4] = {net->w, net->h, net->c, net->n_layers};
    h = gr_fnv1a(h, shape, sizeof shape);
    h = gr_fnv1a(h, &net->n_weight_floats, sizeof net->n_weight_floats);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        const int dims[4] = {l->out.c, l->out.h, l->out.w, l->n_inputs};
        h = gr_fnv1a(h, dims, sizeof dims);
        h = gr_fnv1a(h, l->inputs, (size_t)l->n_inputs * sizeof l->inputs[0]);
        if (e->layer_prec)
            h = gr_fnv1a(h, &e->layer_prec[i], sizeof e->layer_prec[i]);
    }
    snprintf(key, len, "mb:%s:n%d:u8%d:if%d:acc%d:net%016llx", gr_precision_name(e->opt.precision),
             e->opt.batch, u8, e->inflight, e->opt.fp16_accumulate != 0, (unsigned long long)h);
}

/* `runs` back-to-back replays of instance 0's graph, each between two events, into ms[]; with
 * `warm` one more before them, untimed. */
static gr_status replay_runs(gpu_state *g, gpu_variant *v, int warm, int runs, float *ms)
{
    cudaEvent_t ev[MB_REPLAYS + 1];
    int created = 0;
    gr_status st = GR_OK;
    for (; created <= runs && st == GR_OK; created++) {
        cudaError_t err = cudaEventCreate(&ev[created]);
        if (err != cudaSuccess) {
            st = gr_gpu_cuda_fail(err, "cudaEventCreate (micro-batch timing)", __FILE__, __LINE__);
            break;
        }
    }
    cudaStream_t s = launch_stream(g, &v->inst[0]);
    cudaError_t err = st == GR_OK && warm ? cudaGraphLaunch(v->inst[0].exec, s) : cudaSuccess;
    if (err == cudaSuccess && st == GR_OK)
        err = cudaEventRecord(ev[0], s);
    for (int r = 0; r < runs && err == cudaSuccess && st == GR_OK; r++) {
        err = cudaGraphLaunch(v->inst[0].exec, s);
        if (err == cudaSuccess)
            err = cudaEventRecord(ev[r + 1], s);
    }
    if (err == cudaSuccess && st == GR_OK)
        err = cudaEventSynchronize(ev[runs]);
    for (int r = 0; r < runs && err == cudaSuccess && st == GR_OK; r++)
        err = cudaEventElapsedTime(&ms[r], ev[r], ev[r + 1]);
    if (err != cudaSuccess && st == GR_OK)
        st = gr_gpu_cuda_fail(err, "timing the micro-batch candidates", __FILE__, __LINE__);
    for (int i = 0; i < created; i++)
        cudaEventDestroy(ev[i]);
    return st;
}

/* Median replay time of instance 0's graph (microseconds), the tactic search's rule
 * (docs/tactics.md, "Timing"): one untimed replay, then one timed - more than mb_cut_off_ratio x
 * best_us (0: no cut-off) and it stops there, *cut set, since it cannot win -; then two more,
 * the median of the three when they lie within mb_settled_spread of it, else of MB_REPLAYS. */
static gr_status time_replays(gr_engine *e, gpu_state *g, gpu_variant *v, double best_us,
                              double *us, int *cut)
{
    float ms[MB_REPLAYS];
    *cut = 0;
    GR_TRY(replay_runs(g, v, 1, 1, ms));
    e->build_detail.replays++;
    if (best_us > 0.0 && 1e3 * (double)ms[0] > mb_cut_off_ratio * best_us) {
        *us = 1e3 * (double)ms[0];
        *cut = 1;
        e->build_detail.mb_cut++;
        return GR_OK;
    }
    GR_TRY(replay_runs(g, v, 0, MB_SETTLE_REPLAYS - 1, ms + 1));
    e->build_detail.replays += MB_SETTLE_REPLAYS - 1;
    qsort(ms, MB_SETTLE_REPLAYS, sizeof ms[0], cmp_float);
    if (ms[MB_SETTLE_REPLAYS - 1] - ms[0] <= (float)mb_settled_spread * ms[MB_SETTLE_REPLAYS / 2]) {
        *us = 1e3 * (double)ms[MB_SETTLE_REPLAYS / 2];
        return GR_OK;
    }
    GR_TRY(replay_runs(g, v, 0, MB_REPLAYS - MB_SETTLE_REPLAYS, ms + MB_SETTLE_REPLAYS));
    e->build_detail.replays += MB_REPLAYS - MB_SETTLE_REPLAYS;
    qsort(ms, MB_REPLAYS, sizeof ms[0], cmp_float);
    *us = 1e3 * (double)ms[MB_REPLAYS / 2];
    return GR_OK;
}

/* Build every candidate sub-batch, time whole replays, keep the fastest in *v (a smaller one
 * only when keep_larger_ratio faster); the others are freed as soon as they lose. */
static gr_status measure_micro_batch(gr_engine *e, gpu_state *g, gpu_variant *v, int u8,
                                     const int *candidates, int n, const char *key,
                                     char *report, size_t len)
{
    gpu_variant best;
    memset(&best, 0, sizeof best);
    double best_us = 0.0;
    size_t used = 0;
    /* The candidates differ only in how many images a pass runs: their weights are the same
     * bytes (the same layout hash), packed from the plan once and uploaded as they are for the
     * others, which then plan without the fp32 weights. */
    uint8_t *packed = NULL;
    gr_saved_weights first = {u8, 0, 0, NULL, 0};
    for (int i = 0; i < n; i++) {
        gpu_variant trial;
        memset(&trial, 0, sizeof trial);
        g->reuse = packed ? &first : NULL;
        gr_status st = build_sized(e, g, &trial, u8, candidates[i], 1);
        g->reuse = NULL;
        if (st == GR_OK && !packed) {
            st = gr_gpu_download_weights(&trial, &packed, &first.bytes);
            first.data = packed;
            first.micro_batch = trial.micro_batch;
            first.layout = gr_gpu_weights_layout(trial.plan);
        }
        double us = 0.0;
        int cut = 0;
        double timing = gr_now_us();
        if (st == GR_OK)
            st = time_replays(e, g, &trial, i ? best_us : 0.0, &us, &cut);
        e->build_times.micro_batch_ms += (gr_now_us() - timing) / 1e3;
        if (st != GR_OK) {
            variant_free(&trial);
            variant_free(&best);
            free(packed);
            return st;
        }
        snprintf(report + used, len - used, "%s%d: %.0f us%s", i ? ", " : "", candidates[i], us,
                 cut ? " (cut)" : "");
        used += strlen(report + used);
        if (i == 0 || (!cut && us < keep_larger_ratio * best_us)) {
            variant_free(&best);
            best = trial;
            best_us = us;
        } else {
            variant_free(&trial);
        }
    }
    free(packed);
    *v = best;
    GR_TRY(variant_finish(e, g, v));
    if (g->tcache)
        return gr_timing_cache_put(g->tcache, key, best.micro_batch, 0, best_us, best_us);
    return GR_OK;
}

/* The variant, micro-batched as asked (opt.micro_batch), as the other input type's variant is,
 * as the timing cache says, or as measured; one notice line says which and why. */
static gr_status build_variant(gr_engine *e, gpu_state *g, gpu_variant *v, int u8)
{
    const int batch = e->opt.batch;
    const gpu_variant *other = gr_gpu_variant(g, !u8);
    /* The front validated the option; an engine built inside another's build (calibration's,
     * observable, of its own batch) runs whole batches. */
    const int forced = e->opt.micro_batch > 0 && batch % e->opt.micro_batch == 0 && !g->observable
                           ? e->opt.micro_batch
                           : 0;
    char line[400];
    if (g->observable)
        return build_sized(e, g, v, u8, batch, 0);
    if (forced || other->built) {
        int micro = forced ? forced : other->micro_batch;
        if (forced && micro < batch && u8) {
            snprintf(line, sizeof line, "micro-batch: %d x %d images (the micro_batch option)",
                     batch / micro, micro);
            gr_engine_add_notice(e, line);
        }
        return build_sized(e, g, v, u8, micro, 0);
    }
    int candidates[MAX_MB_CANDIDATES], n = 0;
    for (int k = 1; n < MAX_MB_CANDIDATES && batch % k == 0 && batch / k >= MIN_MICRO_BATCH;
         k *= 2)
        candidates[n++] = batch / k;
    if (n <= 1 || !e->opt.use_cuda_graph || !g->tactic_search || g->observable)
        return build_sized(e, g, v, u8, batch, 0);
    char key[GR_TCACHE_KEY_MAX];
    micro_batch_key(e, u8, key, sizeof key);
    const gr_tcache_entry *hit = g->tcache ? gr_timing_cache_find(g->tcache, key) : NULL;
    if (hit && hit->tile >= 1 && batch % hit->tile == 0 && hit->tile >= MIN_MICRO_BATCH) {
        snprintf(line, sizeof line, "micro-batch: %d x %d images (timing cache)", batch / hit->tile,
                 hit->tile);
        gr_engine_add_notice(e, line);
        return build_sized(e, g, v, u8, hit->tile, 0);
    }
    char report[300] = "";
    double start = gr_now_us();
    GR_TRY(measure_micro_batch(e, g, v, u8, candidates, n, key, report, sizeof report));
    snprintf(line, sizeof line, "micro-batch: %d x %d images (measured in %.0f ms, replay of a "
             "batch of %d: %.280s)", v->n_slices, v->micro_batch, (gr_now_us() - start) / 1e3,
             batch, report);
    gr_engine_add_notice(e, line);
    return GR_OK;
}

gr_status gr_gpu_ensure_variant(gr_engine *e, int u8)
{
    gpu_state *g = e->impl;
    gpu_variant *v = gr_gpu_variant(g, u8);
    if (v->built)
        return GR_OK;
    CUDA_TRY(cudaSetDevice(g->device));
    GR_TRY(build_variant(e, g, v, u8));
    e->micro_batch = v->micro_batch;
    if (u8) {
        GR_TRY(gr_gpu_publish_tactics(e, v));
        GR_TRY(publish_node_times(e, v));
    }
    save_timing_cache(e, g);
    return GR_OK;
}

gr_status gr_gpu_recapture(gr_engine *e)
{
    gpu_state *g = e->impl;
    CUDA_TRY(cudaSetDevice(g->device));
    for (int u8 = 0; u8 < 2; u8++) {
        gpu_variant *v = gr_gpu_variant(g, u8);
        for (int k = 0; v->built && e->opt.use_cuda_graph && k < v->n_inst; k++) {
            if (v->inst[k].done)
                CUDA_TRY(cudaEventSynchronize(v->inst[k].done));
            drop_graph(&v->inst[k]);
            GR_TRY(capture_instance(g, v, &v->inst[k]));
        }
    }
    return GR_OK;
}

/* ---- backend ops -------------------------------------------------------------------------- */

static void point_outputs(gr_engine *e, const gpu_variant *v, const gpu_instance *inst)
{
    for (int k = 0; k < e->n_heads; k++)
        e->outputs[k] = (float *)(inst->host_out + v->out_offset[k]);
}

static gr_status gpu_input_buffer(gr_engine *e, int slot, int u8, void **buffer, size_t *bytes)
{
    GR_TRY(gr_gpu_ensure_variant(e, u8));
    gpu_variant *v = gr_gpu_variant(e->impl, u8);
    *buffer = v->inst[slot].host_in;
    *bytes = v->slice_in_bytes * (size_t)v->n_slices;
    return GR_OK;
}

static gr_status run_failed(gr_engine *e, cudaError_t err, const char *what)
{
    e->failed = 1;
    cudaGetLastError();
    return gr_gpu_cuda_fail(err, what, __FILE__, __LINE__);
}

/* The launch's input copy: the captured one (the whole batch from the pinned buffer), or after
 * gr_engine_decode_jpegs none, the node disabled, and before the launch only the images the GPU
 * did not decode. */
static gr_status set_input_copy(gpu_state *g, gpu_variant *v, gpu_instance *inst,
                                cudaStream_t stream)
{
    int off = inst->input_on_device;
    if (off && !inst->input_copy)
        return gr_fail(GR_ERR_INTERNAL, "the captured graph has no input copy node to skip");
    if (off)
        GR_TRY(gr_gpu_copy_host_images(v, inst, stream));
    if (off != inst->input_copy_off) {
        CUDA_TRY(cudaGraphNodeSetEnabled(inst->exec, inst->input_copy, !off));
        inst->input_copy_off = off;
    }
    (void)g;
    inst->input_on_device = 0;
    return GR_OK;
}

/* One graph launch on the slot's stream (or the eager launches on the plan's streams) and the
 * slot's done event after it; nothing waits here. */
static gr_status gpu_submit(gr_engine *e, int slot, int u8)
{
    gpu_state *g = e->impl;
    GR_TRY(gr_gpu_ensure_variant(e, u8));
    gpu_variant *v = gr_gpu_variant(g, u8);
    gpu_instance *inst = &v->inst[slot];
    inst->submitted_us = gr_now_us();
    /* The engines of a pool live on several GPUs and one thread may drive them all: the launches
     * (eager ones above all) go to the current device, so it is made this engine's each time. */
    cudaError_t err = cudaSetDevice(g->device);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaSetDevice");
    if (g->inject != cudaSuccess) {
        err = g->inject;
        g->inject = cudaSuccess;
        return run_failed(e, err, "cudaGraphLaunch (injected by a test)");
    }
    cudaStream_t stream = g->streams[0];
    if (inst->exec) {
        stream = launch_stream(g, inst);
        gr_status st = set_input_copy(g, v, inst, stream);
        if (st != GR_OK) {
            e->failed = 1;
            return st;
        }
        err = cudaGraphLaunch(inst->exec, stream);
        if (err != cudaSuccess)
            return run_failed(e, err, "cudaGraphLaunch");
    } else {
        gr_status st = gr_gpu_enqueue_forward(g, v, inst, NULL, NULL);
        inst->input_on_device = 0;
        if (st != GR_OK) {
            e->failed = 1;
            return st;
        }
    }
    err = cudaEventRecord(inst->done, stream);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaEventRecord (end of the run)");
    return GR_OK;
}

static gr_status gpu_wait(gr_engine *e, int slot, int u8)
{
    gpu_variant *v = gr_gpu_variant(e->impl, u8);
    gpu_instance *inst = &v->inst[slot];
    cudaError_t err = cudaEventSynchronize(inst->done);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaEventSynchronize after the run");
    if (v->dataflow) {
        gr_status st = gr_gpu_dataflow_check_run(v, inst);
        if (st != GR_OK) {
            e->failed = 1;
            return st;
        }
    }
    point_outputs(e, v, inst);
    e->timing = v->split;
    e->timing.end_to_end_us = gr_now_us() - inst->submitted_us;
    e->jpeg_us = gr_gpu_jpeg_slot_us(inst->jpeg);
    return GR_OK;
}

/* The slot's next input from JPEG files decoded on the GPU (runtime.h, gr_engine_decode_jpegs):
 * the images it decodes are written to the slot's device input on its launch stream; the others
 * (and those >= n) are copied from the pinned buffer at the submit. */
static gr_status gpu_decode_jpegs(gr_engine *e, int slot, int n, const uint8_t *const *jpeg,
                                  const size_t *bytes, int *decoded)
{
    gpu_state *g = e->impl;
    GR_TRY(gr_gpu_ensure_variant(e, 1));
    gpu_variant *v = gr_gpu_variant(g, 1);
    gpu_instance *inst = &v->inst[slot];
    if (inst->exec && !inst->input_copy)
        return gr_fail(GR_ERR_UNSUPPORTED, "JPEG decoding on the GPU: this engine's graph has no "
                                           "separate input copy to skip");
    int batch = e->opt.batch;
    if (!inst->host_image && !(inst->host_image = gr_calloc((size_t)batch, 1, "input images")))
        return GR_ERR_OUT_OF_MEMORY;
    cudaStream_t stream = inst->exec ? launch_stream(g, inst) : g->streams[0];
    gr_status st = gr_gpu_decode_jpegs(g, inst, e->opt.jpeg_decoder, stream, n, jpeg, bytes,
                                       decoded, gr_model_preprocess(&e->model_view), e->net->w,
                                       e->net->h);
    if (st != GR_OK)
        return st;
    int on_device = 0;
    for (int i = 0; i < batch; i++) {
        inst->host_image[i] = !(i < n && decoded[i]);
        on_device += !inst->host_image[i];
    }
    inst->input_on_device = on_device > 0;
    return GR_OK;
}

static const char *gpu_jpeg_decoder(const gr_engine *e)
{
    return gr_gpu_jpeg_backend(e->impl);
}

static gr_status gpu_run_async(gr_engine *e, void *stream, void *event)
{
    gpu_state *g = e->impl;
    GR_TRY(gr_gpu_ensure_variant(e, e->input_u8));
    gpu_variant *v = gr_gpu_variant(g, e->input_u8);
    gpu_instance *inst = &v->inst[0];
    if (!inst->exec)
        return gr_fail(GR_ERR_STATE, "gr_engine_run_async needs use_cuda_graph = 1");
    cudaStream_t s = stream ? (cudaStream_t)stream : g->streams[0];
    cudaError_t err = cudaSetDevice(g->device); /* as gpu_submit: a pool's engines share a thread */
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaSetDevice");
    err = cudaGraphLaunch(inst->exec, s);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaGraphLaunch (async)");
    if (event && (err = cudaEventRecord((cudaEvent_t)event, s)) != cudaSuccess)
        return run_failed(e, err, "cudaEventRecord (async completion)");
    point_outputs(e, v, inst);
    e->timing = v->split;
    e->timing.end_to_end_us = 0.0;
    return GR_OK;
}

/* Device bytes: weights once per variant, every instance's own memory, every cuBLAS workspace. */
static gr_status gpu_memory(const gr_engine *e, gr_engine_memory_info *info)
{
    const gpu_state *g = e->impl;
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++)
        info->cublas_workspace_bytes += g->cublas_ws[s] ? cublas_ws_bytes : 0;
    for (int u8 = 0; u8 < 2; u8++) {
        const gpu_variant *v = &g->var[u8];
        if (!v->built)
            continue;
        size_t arena = v->plan->arena_bytes ? v->plan->arena_bytes : 256;
        size_t workspace = v->im2col_bytes + v->splitk_total;
        size_t io = v->in_bytes + v->out_bytes;
        for (int k = 0; k < v->n_inst; k++)
            for (int s = 0; s < GR_GPU_MAX_STREAMS; s++)
                info->cublas_workspace_bytes += v->inst[k].cublas_ws[s] ? cublas_ws_bytes : 0;
        info->total_bytes += v->weights_bytes + (arena + workspace + io) * (size_t)v->n_inst;
        if (u8 != (e->input_u8 != 0))
            continue;
        info->weights_bytes = v->weights_bytes;
        info->arena_bytes = arena;
        info->workspace_bytes = workspace;
        info->io_bytes = io;
        info->pinned_bytes = io;
    }
    info->total_bytes += info->cublas_workspace_bytes;
    return GR_OK;
}

static void gpu_destroy(gr_engine *e)
{
    gpu_state *g = e->impl;
    if (!g)
        return;
    cudaSetDevice(g->device);
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++)
        if (g->streams[s])
            cudaStreamSynchronize(g->streams[s]);
    for (int i = 0; i < 2; i++)
        variant_free(&g->var[i]);
    gr_gpu_jpeg_free(g);
    for (int i = 0; i < g->n_events; i++)
        cudaEventDestroy(g->events[i]);
    free(g->events);
    if (g->fork)
        cudaEventDestroy(g->fork);
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++) {
        if (g->join[s])
            cudaEventDestroy(g->join[s]);
        if (g->cublas[s])
            cublasDestroy(g->cublas[s]);
        cudaFree(g->cublas_ws[s]);
        if (g->streams[s])
            cudaStreamDestroy(g->streams[s]);
    }
    cudaFree(g->df_trace);
    free(g->layer_range);
    if (g->tcache)
        gr_timing_cache_free(g->tcache);
    free(g->tcache);
    free(g->timing_cache_path);
    if (g->lt)
        cublasLtDestroy(g->lt);
    cudaGetLastError();
    for (int k = 0; k < e->n_heads; k++)
        e->outputs[k] = NULL;
    free(g);
    e->impl = NULL;
}

/* What a saved GPU engine needs besides the front's plan inputs (runtime/saved_gpu.h): the
 * tactics its build chose, as the text of its timing cache (every measured or cached conv of the
 * variants built so far; none without the search: the tactics are then the fixed rules), so a
 * load searches nothing, and each built variant's device weights as they are in GPU memory, so a
 * load neither plans with the fp32 weights nor re-lays them out. */
static gr_status gpu_save_blob(const gr_engine *e, struct gr_bytes *out)
{
    const gpu_state *g = e->impl;
    gr_saved_gpu s;
    memset(&s, 0, sizeof s);
    CUDA_TRY(cudaSetDevice(g->device));
    char *text = NULL;
    if (g->tcache)
        GR_TRY(gr_timing_cache_serialize(g->tcache, &text, &s.tactics_len));
    s.tactics = text;
    uint8_t *copies[GR_SAVED_GPU_MAX_WEIGHTS] = {NULL};
    gr_status st = GR_OK;
    for (int u8 = 0; u8 < 2 && st == GR_OK; u8++) {
        const gpu_variant *v = &g->var[u8];
        if (!v->built)
            continue;
        gr_saved_weights *w = &s.weights[s.n_weights];
        st = gr_gpu_download_weights(v, &copies[s.n_weights], &w->bytes);
        w->data = copies[s.n_weights];
        w->input_u8 = u8;
        w->micro_batch = v->micro_batch;
        w->layout = gr_gpu_weights_layout(v->plan);
        s.n_weights += st == GR_OK;
    }
    if (st == GR_OK)
        gr_saved_gpu_put(out, &s);
    for (int k = 0; k < GR_SAVED_GPU_MAX_WEIGHTS; k++)
        free(copies[k]);
    free(text);
    return st;
}

static const gr_backend_ops gpu_ops = {"gpu",         gpu_input_buffer, gpu_submit, gpu_wait,
                                       gpu_run_async, gpu_memory,       gpu_destroy, gpu_save_blob,
                                       gpu_decode_jpegs, gpu_jpeg_decoder};

gr_status gr_backend_gpu_init(gr_engine *e, const gr_backend_inputs *in)
{
    int count = gr_cuda_device_count();
    if (count == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "no CUDA device is visible (--device gpu)");
    if (e->opt.gpu_index >= count)
        return gr_fail(GR_ERR_NO_DEVICE, "gpu_index %d: only %d CUDA device%s visible",
                       e->opt.gpu_index, count, count == 1 ? " is" : "s are");
    gpu_state *g = gr_calloc(1, sizeof *g, "GPU engine");
    if (!g)
        return GR_ERR_OUT_OF_MEMORY;
    e->impl = g;
    e->ops = &gpu_ops;
    g->device = e->opt.gpu_index;
    g->tf32 = e->opt.tf32 != 0;
    g->fp16_accumulate = e->opt.fp16_accumulate != 0;
    g->pdl = e->opt.pdl != GR_TOGGLE_OFF;
    g->executor = e->opt.executor;
    g->df_skip_publish = -1;
    CUDA_TRY(cudaSetDevice(g->device));
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, g->device));
    if (e->opt.precision != GR_PREC_FP32 && prop.major * 10 + prop.minor < 72)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s needs tensor cores with int8 (sm_72+); %s is sm_%d%d",
                       gr_precision_name(e->opt.precision), prop.name, prop.major, prop.minor);
    snprintf(e->device_name, sizeof e->device_name, "%.100s (sm_%d%d)", prop.name, prop.major,
             prop.minor);
    /* Exact fp32 (docs/tactics.md): the 3xTF32 GEMMs need sm_80+, and --tf32 asks for cuBLAS's
     * TF32 math instead; which algorithm each conv gets is gr_gpu_f32_rule's or measured. */
    g->f32_algo = e->opt.f32_algo;
    g->f32_tensor_cores = prop.major >= 8 && !g->tf32;
    g->f32_split_k = e->opt.f32_split_k;
    g->sm_count = prop.multiProcessorCount;
    CUDA_TRY(cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming));

    /* The build's inputs, kept for the variants built later: int8 scales before planning. */
    g->observable = in->observable;
    if (e->opt.precision == GR_PREC_INT8) {
        g->input_range = in->input_range;
        GR_TRY(gr_ranges_copy(in->layer_range, e->net->n_layers, &g->layer_range));
    }

    if (in->blob) {
        GR_TRY(gr_saved_gpu_parse(in->blob, in->blob_len, "engine file", &g->saved));
        g->has_saved = 1;
    }
    GR_TRY(tactics_init(e, g));

    /* The default input is uint8; build it now so a failure shows at build time (its plan sizes
     * the streams and events; a float-input variant built later may add more). A loaded engine's
     * blob is the caller's only during the load. */
    gr_status st = gr_gpu_ensure_variant(e, 1);
    g->has_saved = 0;
    memset(&g->saved, 0, sizeof g->saved);
    GR_TRY(st);
    point_outputs(e, gr_gpu_variant(g, 1), &gr_gpu_variant(g, 1)->inst[0]);
    return GR_OK;
}
