/* INT8 calibration on the GPU (runtime/gpu/calib.h): an fp32 GPU engine of the network at a
 * calibration batch runs over the images, and right after every plan node whose output is a
 * network layer's value (the tensors the CPU path observes, planner/calib.c: same layers, same
 * values) two kernels (kernels/calib.h) take the largest finite |x| and the NaN/Inf count over
 * the real images and real channels, then the 2048-bin histogram of |x| at the batch's own
 * exponent. The host merges each batch's counts into one gr_hist per layer with
 * gr_hist_merge_bins(), which gives bit for bit what gr_hist_add() of the same values gives; the
 * ranges come from gr_hist_threshold() as on the CPU. Only the fp32 activations themselves differ
 * from the CPU path's (cuBLAS sums in another order: ~1e-6 relative per layer).
 *
 * Ordering: the statistics kernels of a node are enqueued on the node's stream right after it,
 * through the dispatch loop's after-node hook, before the node's cross-stream event: everything
 * that may reuse the node's memory comes after its consumers, which come after those kernels.
 *
 * Overlap: the engine has two instances (runs in flight). While the GPU runs batch b from one
 * instance's pinned input, CPU threads decode and letterbox batch b+1 into the other's (the same
 * uint8 letterbox gr_image_letterbox_u8 makes for the engine); each batch ends with one copy of
 * its statistics to pinned memory and an event; the host merges a batch's statistics before it
 * reuses that instance. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/calib.h"
#include "kernels/common.h"
#include "planner/calib_hist.h"
#include "runtime/gpu/calib.h"
#include "runtime/gpu/backend.h"
#include "runtime/image/image.h"

_Static_assert(GR_CALIB_BINS == GR_HIST_BINS, "the kernels bin as planner/calib_hist.h does");

#define SLOTS 2
#define MAX_DECODE_THREADS 64

typedef struct calib_run {
    const gr_gpu_calib_request *req;
    gr_engine *engine;            /* the fp32 engine */
    gpu_state *g;
    gpu_variant *v;               /* its uint8-input variant */
    int max_only;
    int n_obs;                    /* observed tensors */
    int *obs_of_node;             /* per plan node: observation index or -1 */
    int *obs_node;                /* per observation: the node, */
    int *obs_layer;               /* and the histogram (a layer, or n_layers for the input) */
    gr_hist *hists;               /* n_layers + 1 */
    gr_calib_stats *dev_stats[SLOTS];
    unsigned long long *dev_counts[SLOTS];
    gr_calib_stats *host_stats[SLOTS];  /* pinned */
    uint64_t *host_counts[SLOTS];       /* pinned */
    cudaEvent_t done[SLOTS];
    int pending[SLOTS];           /* images of the batch in flight in the slot, 0 = none */
    int enqueue_images;           /* the hook's view: images of the batch being enqueued */
    int enqueue_slot;
    int images_done;
} calib_run;

/* ---- statistics: the hook and the merge ------------------------------------------------------ */

static gr_status observe_node(gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                              int node, void *user)
{
    calib_run *r = user;
    int o = r->obs_of_node[node];
    if (o < 0)
        return GR_OK;
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[node];
    const gr_plan_tensor *t = &plan->tensors[nd->output];
    gr_kview view = {r->enqueue_images, t->c, t->h, t->w, t->c_stride, t->c_offset};
    int nhwc = t->layout == GR_LAYOUT_NHWC;
    const void *x = gr_gpu_tensor_storage(v, inst, nd->output);
    cudaStream_t stream = g->streams[nd->stream];
    gr_calib_stats *stats = r->dev_stats[r->enqueue_slot] + o;
    gr_kernels_clear_failure();
    cudaError_t err = gr_launch_calib_absmax(t->dtype, x, view, nhwc, stats, stream);
    if (err == cudaSuccess && !r->max_only)
        err = gr_launch_calib_hist(t->dtype, x, view, nhwc, stats,
                                   r->dev_counts[r->enqueue_slot] + (size_t)o * GR_CALIB_BINS,
                                   stream);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return gr_fail(err == cudaErrorNotSupported ? GR_ERR_UNSUPPORTED : GR_ERR_CUDA,
                       "int8 calibration on the GPU: statistics of node %d (%s, layer %d, %s "
                       "%dx%dx%dx%d): %s: %s",
                       node, gr_plan_kind_name(nd->kind), t->layer, gr_dtype_name(t->dtype), t->n,
                       t->c, t->h, t->w, cudaGetErrorName(err), gr_kernels_last_failure());
    }
    return GR_OK;
}

/* Wait for the slot's batch and merge its statistics into the histograms. */
static gr_status collect(calib_run *r, int slot)
{
    int images = r->pending[slot];
    if (images == 0)
        return GR_OK;
    r->pending[slot] = 0;
    CUDA_TRY(cudaEventSynchronize(r->done[slot]));
    const gr_plan *plan = r->v->plan;
    for (int o = 0; o < r->n_obs; o++) {
        const gr_plan_tensor *t = &plan->tensors[plan->nodes[r->obs_node[o]].output];
        const gr_calib_stats *s = &r->host_stats[slot][o];
        float max;
        memcpy(&max, &s->max_bits, sizeof max);
        uint64_t values = (uint64_t)images * (uint64_t)t->c * (uint64_t)t->h * (uint64_t)t->w;
        if (s->nonfinite > values)
            return gr_fail(GR_ERR_INTERNAL, "int8 calibration on the GPU: layer %d: %llu "
                                            "non-finite values of %llu",
                           t->layer, s->nonfinite, (unsigned long long)values);
        int exponent = 0;
        frexpf(max, &exponent); /* the kernels binned at the batch's own exponent */
        GR_TRY(gr_hist_merge_bins(&r->hists[r->obs_layer[o]],
                                  r->max_only ? NULL
                                              : r->host_counts[slot] + (size_t)o * GR_HIST_BINS,
                                  exponent, max, values - s->nonfinite, s->nonfinite));
    }
    for (int i = 0; i < images && r->req->progress; i++)
        r->req->progress(++r->images_done, r->req->n_images, r->req->progress_user);
    return GR_OK;
}

/* Zero the slot's statistics, run the forward pass of its instance with the statistics kernels
 * after the observed nodes, copy the statistics home and record the slot's event; no wait. */
static gr_status enqueue(calib_run *r, int slot, int images)
{
    gpu_state *g = r->g;
    cudaStream_t s0 = g->streams[0];
    size_t stats_bytes = (size_t)r->n_obs * sizeof(gr_calib_stats);
    size_t counts_bytes = (size_t)r->n_obs * GR_CALIB_BINS * sizeof(unsigned long long);
    CUDA_TRY(cudaMemsetAsync(r->dev_stats[slot], 0, stats_bytes, s0));
    if (!r->max_only)
        CUDA_TRY(cudaMemsetAsync(r->dev_counts[slot], 0, counts_bytes, s0));
    r->enqueue_slot = slot;
    r->enqueue_images = images;
    g->after_node = observe_node;
    g->after_node_user = r;
    gr_status st = gr_gpu_enqueue_forward(g, r->v, &r->v->inst[slot], NULL, NULL);
    g->after_node = NULL;
    g->after_node_user = NULL;
    GR_TRY(st);
    /* After the forward pass's join on stream 0: every statistics kernel is done. */
    CUDA_TRY(cudaMemcpyAsync(r->host_stats[slot], r->dev_stats[slot], stats_bytes,
                             cudaMemcpyDeviceToHost, s0));
    if (!r->max_only)
        CUDA_TRY(cudaMemcpyAsync(r->host_counts[slot], r->dev_counts[slot], counts_bytes,
                                 cudaMemcpyDeviceToHost, s0));
    CUDA_TRY(cudaEventRecord(r->done[slot], s0));
    r->pending[slot] = images;
    return GR_OK;
}

/* ---- decoding on CPU threads ------------------------------------------------------------------ */

typedef struct decode_job {
    const calib_run *run;
    uint8_t *dst;     /* the slot's pinned uint8 HWC batch */
    int first, count; /* images [first, first + count) of the request */
    int next, failed;
    pthread_mutex_t lock;
    char error[1024];
} decode_job;

static void *decode_worker(void *arg)
{
    decode_job *job = arg;
    const gr_net *net = job->run->req->net;
    size_t image_bytes = (size_t)net->w * (size_t)net->h * (size_t)net->c;
    for (;;) {
        pthread_mutex_lock(&job->lock);
        int j = job->failed || job->next >= job->count ? -1 : job->next++;
        pthread_mutex_unlock(&job->lock);
        if (j < 0)
            break;
        gr_image *im = NULL;
        gr_status st = gr_image_load(job->run->req->paths[job->first + j], &im);
        if (st != GR_OK)
            gr_fail_prefix(st, "int8 calibration: ");
        else
            st = gr_image_preprocess_u8(im, gr_preprocess_concrete(job->run->req->preprocess),
                                        net->w, net->h, job->dst + (size_t)j * image_bytes);
        gr_image_destroy(im);
        if (st != GR_OK) {
            pthread_mutex_lock(&job->lock);
            if (!job->failed) /* the message is thread-local: carry it to the caller's thread */
                snprintf(job->error, sizeof job->error, "%s", gr_last_error());
            job->failed = st;
            pthread_mutex_unlock(&job->lock);
        }
    }
    return NULL;
}

static int decode_threads(const gr_gpu_calib_request *req, int count)
{
    long n = req->threads > 0 ? req->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > MAX_DECODE_THREADS)
        n = MAX_DECODE_THREADS;
    return n > count ? count : (int)n;
}

/* Images [first, first + count) into the slot's pinned input; the calling thread is one of the
 * decoders. */
static gr_status decode_batch(calib_run *r, int slot, int first, int count)
{
    decode_job job = {.run = r, .dst = r->v->inst[slot].host_in, .first = first, .count = count};
    pthread_mutex_init(&job.lock, NULL);
    pthread_t threads[MAX_DECODE_THREADS];
    int n_threads = decode_threads(r->req, count), started = 0;
    gr_status st = GR_OK;
    for (int t = 1; t < n_threads; t++, started++)
        if (pthread_create(&threads[t], NULL, decode_worker, &job) != 0) {
            st = gr_fail(GR_ERR_INTERNAL, "int8 calibration: cannot start decoding thread %d", t);
            pthread_mutex_lock(&job.lock);
            job.failed = st; /* stop the others */
            pthread_mutex_unlock(&job.lock);
            break;
        }
    if (st == GR_OK)
        decode_worker(&job);
    for (int t = 1; t <= started; t++)
        pthread_join(threads[t], NULL);
    if (st == GR_OK && job.failed)
        st = gr_fail(job.failed, "%s", job.error);
    pthread_mutex_destroy(&job.lock);
    return st;
}

/* ---- setup ------------------------------------------------------------------------------------ */

/* The fp32 engine at `batch`, two instances, eager (the hook needs the dispatch loop), exact
 * FP32 (no TF32: the ranges of the fp32 network, as on the CPU). */
static gr_status build_engine(const gr_gpu_calib_request *req, int batch, gr_engine **out)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = GR_PREC_FP32;
    eo.batch = batch;
    eo.gpu_index = req->gpu_index;
    eo.use_cuda_graph = 0;
    eo.tf32 = 0;
    eo.inflight = SLOTS;
    /* The fp32 algorithms by the fixed rule, not measured: the ranges (and so every int8 engine
     * built from them) must not depend on a build's timings. */
    eo.tactic_search = 0;
    eo.f32_algo = GR_F32_ALGO_AUTO;
    /* Observable: every layer's value, no fusion. fp32: no ranges, so no calibration inside. */
    gr_build_request build = {.net = req->net, .opt = eo, .device = GR_DEVICE_GPU, .observable = 1};
    return gr_engine_create(&build, out);
}

/* Which plan nodes to observe: as planner/calib.c, every node whose output is a layer's value,
 * and the network input (calib.c adds the loaded image: here the u8 input, read as v / 255). */
static gr_status plan_observations(calib_run *r)
{
    const gr_plan *plan = r->v->plan;
    r->obs_of_node = gr_malloc((size_t)plan->n_nodes * sizeof(int), "calibration nodes");
    r->obs_node = gr_malloc((size_t)plan->n_nodes * sizeof(int), "calibration nodes");
    r->obs_layer = gr_malloc((size_t)plan->n_nodes * sizeof(int), "calibration nodes");
    if (!r->obs_of_node || !r->obs_node || !r->obs_layer)
        return GR_ERR_OUT_OF_MEMORY;
    int have_input = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        r->obs_of_node[i] = -1;
        if (nd->output < 0)
            continue;
        const gr_plan_tensor *t = &plan->tensors[nd->output];
        int hist;
        if (nd->output == plan->input_tensor && nd->kind == GR_NODE_INPUT)
            hist = plan->n_layers;
        else if (t->layer >= 0 && t->layer < plan->n_layers)
            hist = t->layer;
        else
            continue;
        if (t->dtype != GR_DTYPE_F32 && t->dtype != GR_DTYPE_U8)
            return gr_fail(GR_ERR_INTERNAL, "int8 calibration on the GPU: node %d (layer %d) "
                                            "is %s in the fp32 plan",
                           i, t->layer, gr_dtype_name(t->dtype));
        have_input |= hist == plan->n_layers;
        r->obs_of_node[i] = r->n_obs;
        r->obs_node[r->n_obs] = i;
        r->obs_layer[r->n_obs] = hist;
        r->n_obs++;
    }
    if (!have_input)
        return gr_fail(GR_ERR_INTERNAL, "int8 calibration on the GPU: the plan has no input node");
    return GR_OK;
}

static gr_status alloc_slots(calib_run *r)
{
    size_t stats_bytes = (size_t)r->n_obs * sizeof(gr_calib_stats);
    size_t counts_bytes = (size_t)r->n_obs * GR_CALIB_BINS * sizeof(unsigned long long);
    for (int k = 0; k < SLOTS; k++) {
        CUDA_TRY(cudaMalloc((void **)&r->dev_stats[k], stats_bytes));
        CUDA_TRY(cudaMallocHost((void **)&r->host_stats[k], stats_bytes));
        if (!r->max_only) {
            CUDA_TRY(cudaMalloc((void **)&r->dev_counts[k], counts_bytes));
            CUDA_TRY(cudaMallocHost((void **)&r->host_counts[k], counts_bytes));
        }
        CUDA_TRY(cudaEventCreateWithFlags(&r->done[k], cudaEventDisableTiming));
    }
    r->hists = gr_malloc(((size_t)r->req->net->n_layers + 1) * sizeof *r->hists,
                         "calibration histograms");
    if (!r->hists)
        return GR_ERR_OUT_OF_MEMORY;
    for (int l = 0; l <= r->req->net->n_layers; l++)
        gr_hist_init(&r->hists[l], r->max_only);
    return GR_OK;
}

static void run_free(calib_run *r)
{
    if (r->g)
        cudaSetDevice(r->g->device);
    /* A batch that failed half-way has no `done` event: drain the device before anything it may
     * still use is freed. */
    cudaDeviceSynchronize();
    for (int k = 0; k < SLOTS; k++) {
        if (r->done[k]) {
            cudaEventSynchronize(r->done[k]); /* nothing is freed under a batch in flight */
            cudaEventDestroy(r->done[k]);
        }
        cudaFree(r->dev_stats[k]);
        cudaFree(r->dev_counts[k]);
        if (r->host_stats[k])
            cudaFreeHost(r->host_stats[k]);
        if (r->host_counts[k])
            cudaFreeHost(r->host_counts[k]);
    }
    gr_engine_destroy(r->engine); /* synchronizes its streams first */
    cudaGetLastError();
    free(r->obs_of_node);
    free(r->obs_node);
    free(r->obs_layer);
    free(r->hists);
}

/* ---- the calibration -------------------------------------------------------------------------- */

static gr_status calibrate_batches(calib_run *r, int batch)
{
    const gr_gpu_calib_request *req = r->req;
    int n = req->n_images, batches = (n + batch - 1) / batch;
    GR_TRY(decode_batch(r, 0, 0, batch < n ? batch : n));
    for (int b = 0; b < batches; b++) {
        int slot = b % SLOTS, first = b * batch, count = n - first < batch ? n - first : batch;
        GR_TRY(enqueue(r, slot, count));
        if (b + 1 < batches) {
            /* The next batch goes to the other instance: its last batch must be home first. */
            int next = (b + 1) % SLOTS, next_first = first + batch;
            GR_TRY(collect(r, next));
            GR_TRY(decode_batch(r, next, next_first,
                                n - next_first < batch ? n - next_first : batch));
        }
    }
    for (int b = batches - SLOTS < 0 ? 0 : batches - SLOTS; b < batches; b++)
        GR_TRY(collect(r, b % SLOTS));
    return GR_OK;
}

gr_status gr_gpu_calibrate(const gr_gpu_calib_request *req, float *layer_range,
                           float *input_range, int *batch_used)
{
    if (!req || !req->net || !req->paths || req->n_images < 1 || !layer_range || !input_range)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_gpu_calibrate: bad argument");
    if ((unsigned)req->method > GR_CALIB_MSE)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_gpu_calibrate: method %d is not a "
                                                "gr_calib_method",
                       (int)req->method);
    if (req->method == GR_CALIB_PERCENTILE && !(req->percentile > 0.0f && req->percentile <= 100.0f))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_gpu_calibrate: percentile %g outside (0, 100]",
                       (double)req->percentile);
    if (req->batch < 0 || req->threads < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_gpu_calibrate: negative batch or threads");
    int count = gr_cuda_device_count();
    if (count == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "int8 calibration on the GPU: no CUDA device is visible "
                                         "(calib_device cpu calibrates on the CPU)");
    if (req->gpu_index >= count)
        return gr_fail(GR_ERR_NO_DEVICE, "int8 calibration on the GPU: gpu_index %d, %d device%s",
                       req->gpu_index, count, count == 1 ? "" : "s");
    calib_run r = {.req = req, .max_only = req->method == GR_CALIB_MAX};
    /* The batch: as asked (or the default), at most the images; halved while memory runs out. */
    int batch = req->batch > 0 ? req->batch : GR_GPU_CALIB_BATCH;
    if (batch > req->n_images)
        batch = req->n_images;
    gr_status st;
    for (;;) {
        st = build_engine(req, batch, &r.engine);
        if ((st != GR_ERR_OUT_OF_MEMORY && st != GR_ERR_LIMIT) || batch == 1 || req->batch > 0)
            break;
        batch /= 2;
    }
    if (st == GR_OK) {
        r.g = r.engine->impl;
        r.v = gr_gpu_variant(r.g, 1);
        if (!r.v->built || r.v->n_inst < SLOTS)
            st = gr_fail(GR_ERR_INTERNAL, "int8 calibration on the GPU: engine without its "
                                          "uint8 instances");
    }
    if (st == GR_OK)
        st = plan_observations(&r);
    if (st == GR_OK) {
        cudaError_t err = cudaSetDevice(r.g->device);
        st = err == cudaSuccess ? alloc_slots(&r)
                                : gr_gpu_cuda_fail(err, "cudaSetDevice", __FILE__, __LINE__);
    }
    if (st == GR_OK)
        st = calibrate_batches(&r, batch);
    if (st == GR_OK) {
        const gr_net *net = req->net;
        for (int l = 0; l < net->n_layers; l++)
            layer_range[l] = gr_hist_threshold(&r.hists[l], req->method, req->percentile);
        *input_range = gr_hist_threshold(&r.hists[net->n_layers], req->method, req->percentile);
        if (batch_used)
            *batch_used = batch;
    }
    run_free(&r);
    return st;
}
