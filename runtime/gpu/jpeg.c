/* JPEG files decoded on the GPU (nvJPEG) and letterboxed there, straight into a run's device
 * input: gr_engine_decode_jpegs (runtime.h).
 *
 * Per engine (its GPU): one nvJPEG handle, the hardware backend where the GPU has JPEG engines
 * (A100, H100: NVJPG), else the GPU-assisted hybrid one; per slot: a batched decoding state and
 * a device buffer for the decoded RGB images, so runs in flight never share either, and the
 * slots' calls may come from different threads. A batch:
 *   1. each file's structure walked (gr_jpeg_scan: a truncated or damaged file never reaches
 *      the GPU decoder), its header parsed on the host (nvJPEG's parser) and checked against
 *      what the backend decodes in a batch (nvjpegDecodeBatchedSupported); files it does not
 *      take are left to the caller (decoded[i] = 0), who decodes them on the CPU as before;
 *   2. one nvjpegDecodeBatched of the others on the slot's decoding stream, of the device's
 *      highest priority (the kernels of other slots' runs would otherwise hold the SMs while
 *      the decoder's colour conversion and the letterbox wait): the compressed bytes cross the
 *      bus (the run's input copy), the RGB images stay on the device;
 *   3. one letterbox launch per 32 images (kernels/image.h) writes each image's part of the
 *      device input, the bytes gr_image_letterbox_u8 would write from the same pixels;
 *   4. the slot's next submit skips the captured input copy (engine.c) and copies from the
 *      pinned buffer only the images the GPU did not decode.
 * A batch the decoder fails on (a file whose header passed but whose data the decoder rejects)
 * gives decoded[i] = 0 for all its files, and the state is re-initialised, so nothing of it
 * reaches the next batch: the caller's CPU decoder then reports each file as CPU mode does.
 * Built only when CMake finds nvJPEG (GR_HAVE_NVJPEG); otherwise GR_ERR_UNSUPPORTED says so. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/image.h"
#include "runtime/gpu/backend.h"
#include "runtime/image/image.h"

#if GR_HAVE_NVJPEG
#include <nvjpeg.h>

/* The engine's choice of backend, made by the first call. Each slot has its own handle: one
 * handle shared by threads serialises their calls inside nvJPEG (bench/11_jpeg_decode: 4
 * threads on one handle spent 11.7 ms per batch of 64 in the call, on a handle each 4.2 ms). */
struct gpu_jpeg {
    nvjpegBackend_t backend;
    const char *name;
};

/* A slot's: used by one thread at a time (the slot's caller). */
struct gpu_jpeg_slot {
    nvjpegHandle_t handle;
    nvjpegJpegState_t state;
    nvjpegJpegStream_t parsed; /* the header being checked */
    int batch_init;          /* images the state was initialised for; 0 none */
    uint8_t *rgb;            /* decoded images, back to back */
    size_t rgb_cap;
    /* per image of the batch: the decoder's arguments and the letterbox's, in one block */
    int cap;
    void *block;
    const unsigned char **data;
    size_t *len;
    nvjpegImage_t *out;
    gr_letterbox_job *jobs;
    int *index;              /* the batch position of the k-th decoded image */
    cudaStream_t stream;     /* the decoding's, highest priority; the launch stream waits on
                                `ready` after it */
    cudaEvent_t begin, end;  /* around the decoding and the letterbox, on that stream */
    cudaEvent_t ready;
    int timed;               /* they hold this batch's: the next wait reads them */
    int decoded;             /* images the last call decoded (jobs[0..decoded) describe them) */
    double check_s, call_s;  /* host seconds so far: checking the files, in nvjpegDecodeBatched */
};

static const char *nvjpeg_error(nvjpegStatus_t s)
{
    switch (s) {
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocator failure";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "implementation not supported";
    default: return "error";
    }
}

#define NVJPEG_TRY(call)                                                                           \
    do {                                                                                           \
        nvjpegStatus_t nvj_st_ = (call);                                                           \
        if (nvj_st_ != NVJPEG_STATUS_SUCCESS)                                                      \
            return gr_fail(nvj_st_ == NVJPEG_STATUS_ALLOCATOR_FAILURE ? GR_ERR_OUT_OF_MEMORY        \
                                                                      : GR_ERR_CUDA,               \
                           "nvJPEG: %s: %s (%d)", #call, nvjpeg_error(nvj_st_), (int)nvj_st_);     \
    } while (0)

/* The engine's backend: hardware decoding where the GPU has it, else the hybrid backend (Huffman
 * decoding on the GPU for large batches); a handle is created to find out, and kept by slot 0. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static gr_status open_decoder_locked(gpu_state *g, gr_jpeg_decoder which)
{
    if (g->jpeg)
        return GR_OK;
    if (which != GR_JPEG_DECODER_AUTO && which != GR_JPEG_DECODER_HARDWARE &&
        which != GR_JPEG_DECODER_GPU_HYBRID)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option jpeg_decoder %d is not a "
                       "gr_jpeg_decoder", (int)which);
    struct gpu_jpeg *j = gr_calloc(1, sizeof *j, "nvJPEG decoder");
    if (!j)
        return GR_ERR_OUT_OF_MEMORY;
    nvjpegHandle_t handle = NULL;
    static const struct {
        nvjpegBackend_t backend;
        const char *name;
    } tries[] = {{NVJPEG_BACKEND_HARDWARE, "nvJPEG hardware decoder"},
                 {NVJPEG_BACKEND_GPU_HYBRID, "nvJPEG GPU hybrid decoder"}};
    nvjpegStatus_t st = NVJPEG_STATUS_NOT_INITIALIZED;
    for (size_t t = 0; t < sizeof tries / sizeof tries[0] && !handle; t++) {
        if ((which == GR_JPEG_DECODER_HARDWARE && t != 0) ||
            (which == GR_JPEG_DECODER_GPU_HYBRID && t != 1))
            continue;
        st = nvjpegCreateEx(tries[t].backend, NULL, NULL, 0, &handle);
        if (st == NVJPEG_STATUS_SUCCESS) {
            j->backend = tries[t].backend;
            j->name = tries[t].name;
        } else {
            handle = NULL;
        }
    }
    if (!handle) {
        free(j);
        return gr_fail(GR_ERR_UNSUPPORTED, "nvJPEG: no decoder backend on this GPU: %s (%d)",
                       nvjpeg_error(st), (int)st);
    }
    nvjpegDestroy(handle);
    g->jpeg = j;
    return GR_OK;
}

/* Opened once per engine, whichever slot's thread comes first. */
static gr_status open_decoder(gpu_state *g, gr_jpeg_decoder which)
{
    pthread_mutex_lock(&open_lock);
    gr_status st = open_decoder_locked(g, which);
    pthread_mutex_unlock(&open_lock);
    return st;
}

void gr_gpu_jpeg_free(gpu_state *g)
{
    struct gpu_jpeg *j = g->jpeg;
    if (!j)
        return;
    free(j);
    g->jpeg = NULL;
}

void gr_gpu_jpeg_slot_free(struct gpu_jpeg_slot *s)
{
    if (!s)
        return;
    if (s->parsed)
        nvjpegJpegStreamDestroy(s->parsed);
    if (s->state)
        nvjpegJpegStateDestroy(s->state);
    if (s->handle)
        nvjpegDestroy(s->handle);
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->begin)
        cudaEventDestroy(s->begin);
    if (s->ready)
        cudaEventDestroy(s->ready);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    if (s->end)
        cudaEventDestroy(s->end);
    cudaFree(s->rgb);
    free(s->block);
    free(s);
}

const char *gr_gpu_jpeg_backend(const gpu_state *g)
{
    return g->jpeg ? g->jpeg->name : NULL;
}

static gr_status slot_open(struct gpu_jpeg *j, gpu_instance *inst, int n)
{
    struct gpu_jpeg_slot *s = inst->jpeg;
    if (!s) {
        if (!(s = gr_calloc(1, sizeof *s, "nvJPEG slot")))
            return GR_ERR_OUT_OF_MEMORY;
        inst->jpeg = s;
        CUDA_TRY(cudaEventCreate(&s->begin));
        CUDA_TRY(cudaEventCreate(&s->end));
        CUDA_TRY(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
        int least, greatest;
        CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CUDA_TRY(cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, greatest));
        NVJPEG_TRY(nvjpegCreateEx(j->backend, NULL, NULL, 0, &s->handle));
        /* nvJPEG's buffers grow with the batches' bytes; rounded up to these sizes, they are
         * reallocated (a device-wide synchronisation for pinned memory) a few times, not with
         * every larger batch */
        NVJPEG_TRY(nvjpegSetPinnedMemoryPadding((size_t)8 << 20, s->handle));
        NVJPEG_TRY(nvjpegSetDeviceMemoryPadding((size_t)32 << 20, s->handle));
        NVJPEG_TRY(nvjpegJpegStateCreate(s->handle, &s->state));
        NVJPEG_TRY(nvjpegJpegStreamCreate(s->handle, &s->parsed));
    }
    if (n > s->cap) {
        size_t each = sizeof *s->jobs + sizeof *s->out + sizeof *s->len + sizeof *s->data +
                      sizeof *s->index;
        char *block = gr_calloc((size_t)n, each, "nvJPEG batch arrays");
        if (!block)
            return GR_ERR_OUT_OF_MEMORY;
        free(s->block);
        s->block = block;
        s->jobs = (gr_letterbox_job *)block; /* the most aligned first */
        s->out = (nvjpegImage_t *)(s->jobs + n);
        s->len = (size_t *)(s->out + n);
        s->data = (const unsigned char **)(s->len + n);
        s->index = (int *)(s->data + n);
        s->cap = n;
    }
    return GR_OK;
}

/* One file: 1 when the batched decoder takes it, with its size. Its structure first
 * (runtime/image/jpeg_scan.c: intact from SOI to EOI, one baseline YCbCr scan), then nvJPEG's
 * own reading of its header and its word on the batched decoder. */
static int batch_takes(struct gpu_jpeg_slot *s, const uint8_t *data, size_t len, int *w, int *h)
{
    gr_jpeg_info info;
    gr_jpeg_scan(data, len, &info);
    if (!gr_jpeg_gpu_decodable(&info) || info.width > GR_MAX_DIM || info.height > GR_MAX_DIM)
        return 0;
    unsigned fw = 0, fh = 0, comps = 0;
    nvjpegChromaSubsampling_t ss = NVJPEG_CSS_UNKNOWN;
    int unsupported = 1;
    if (nvjpegJpegStreamParseHeader(s->handle, data, len, s->parsed) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetFrameDimensions(s->parsed, &fw, &fh) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetComponentsNum(s->parsed, &comps) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetChromaSubsampling(s->parsed, &ss) != NVJPEG_STATUS_SUCCESS ||
        nvjpegDecodeBatchedSupported(s->handle, s->parsed, &unsupported) != NVJPEG_STATUS_SUCCESS)
        return 0;
    /* the same frame as the walk read, of a kind both agree on */
    if (unsupported != 0 || comps != 3 || (int)fw != info.width || (int)fh != info.height ||
        (ss != NVJPEG_CSS_444 && ss != NVJPEG_CSS_422 && ss != NVJPEG_CSS_420 &&
         ss != NVJPEG_CSS_440))
        return 0;
    *w = info.width;
    *h = info.height;
    return 1;
}

/* The slot's RGB buffer holds `bytes`: grown (never while a run of this slot is in flight: the
 * caller waited for it). */
static gr_status reserve_rgb(struct gpu_jpeg_slot *s, size_t bytes, cudaStream_t stream)
{
    if (bytes <= s->rgb_cap)
        return GR_OK;
    size_t cap = bytes + bytes / 2; /* grown by half again: a few reallocations, not one per
                                       larger batch */
    CUDA_TRY(cudaStreamSynchronize(stream));
    cudaFree(s->rgb);
    s->rgb = NULL;
    s->rgb_cap = 0;
    cudaError_t err = cudaMalloc((void **)&s->rgb, cap);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "no device memory for %zu bytes of decoded JPEG "
                                             "images", cap);
    }
    s->rgb_cap = cap;
    return GR_OK;
}

gr_status gr_gpu_decode_jpegs(gpu_state *g, gpu_instance *inst, gr_jpeg_decoder which,
                              cudaStream_t launch, int n, const uint8_t *const *jpeg,
                              const size_t *bytes, int *decoded, gr_preprocess how, int net_w,
                              int net_h)
{
    CUDA_TRY(cudaSetDevice(g->device));
    GR_TRY(open_decoder(g, which));
    struct gpu_jpeg *j = g->jpeg;
    GR_TRY(slot_open(j, inst, n));
    struct gpu_jpeg_slot *s = inst->jpeg;
    cudaStream_t stream = s->stream;
    double t0 = gr_now_us();
    size_t per_image = (size_t)net_w * (size_t)net_h * 3, total = 0;
    int m = 0;
    s->decoded = 0;
    for (int i = 0; i < n; i++) {
        int w, h;
        decoded[i] = 0;
        if (!jpeg[i] || !batch_takes(s, jpeg[i], bytes[i], &w, &h))
            continue;
        gr_letterbox_geom geom;
        gr_letterbox_geometry(how, w, h, net_w, net_h, &geom);
        s->data[m] = jpeg[i];
        s->len[m] = bytes[i];
        s->index[m] = i;
        s->jobs[m] = (gr_letterbox_job){.src = NULL, .dst = inst->io + (size_t)i * per_image,
                                        .src_w = w, .src_h = h, .pitch = 3 * w,
                                        .new_w = geom.new_w, .new_h = geom.new_h,
                                        .left = geom.left, .top = geom.top,
                                        .w_scale = geom.w_scale, .h_scale = geom.h_scale,
                                        .pad = geom.pad};
        total += gr_gpu_align((size_t)w * (size_t)h * 3, 256);
        m++;
    }
    if (m == 0) {
        s->check_s += (gr_now_us() - t0) * 1e-6;
        return GR_OK;
    }
    GR_TRY(reserve_rgb(s, total, stream));
    size_t at = 0;
    for (int k = 0; k < m; k++) {
        memset(&s->out[k], 0, sizeof s->out[k]);
        s->out[k].channel[0] = s->rgb + at;
        s->out[k].pitch[0] = (size_t)s->jobs[k].pitch;
        s->jobs[k].src = s->rgb + at;
        at += gr_gpu_align((size_t)s->jobs[k].pitch * (size_t)s->jobs[k].src_h, 256);
    }
    if (s->batch_init != m) {
        NVJPEG_TRY(nvjpegDecodeBatchedInitialize(s->handle, s->state, m, 1, NVJPEG_OUTPUT_RGBI));
        s->batch_init = m;
    }
    CUDA_TRY(cudaEventRecord(s->begin, stream));
    double t1 = gr_now_us();
    nvjpegStatus_t st = nvjpegDecodeBatched(s->handle, s->state, s->data, s->len, s->out, stream);
    s->check_s += (t1 - t0) * 1e-6;
    s->call_s += (gr_now_us() - t1) * 1e-6;
    if (st != NVJPEG_STATUS_SUCCESS) {
        /* A file the header check passed and the decoder refused: the whole batch goes to the
         * caller's CPU decoder, and the state starts afresh for the next. */
        s->batch_init = 0;
        cudaGetLastError();
        return GR_OK;
    }
    cudaError_t err = gr_launch_letterbox_u8(s->jobs, m, net_w, net_h, stream);
    if (err != cudaSuccess)
        return gr_fail(GR_ERR_CUDA, "letterboxing decoded JPEG images: %s (%s)",
                       cudaGetErrorName(err), gr_kernels_last_failure());
    CUDA_TRY(cudaEventRecord(s->end, stream));
    CUDA_TRY(cudaEventRecord(s->ready, stream));
    CUDA_TRY(cudaStreamWaitEvent(launch, s->ready, 0)); /* the run after the decoding */
    s->timed = 1;
    s->decoded = m;
    for (int k = 0; k < m; k++)
        decoded[s->index[k]] = 1;
    return GR_OK;
}

gr_status gr_gpu_jpeg_pixels(const struct gpu_jpeg_slot *s, int k, gr_image **out)
{
    if (!s || k < 0 || k >= s->decoded)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "no decoded image %d in this slot (%d)", k,
                       s ? s->decoded : 0);
    const gr_letterbox_job *j = &s->jobs[k];
    gr_image *im = gr_calloc(1, sizeof *im, "image");
    if (!im)
        return GR_ERR_OUT_OF_MEMORY;
    im->w = j->src_w;
    im->h = j->src_h;
    im->c = 3;
    im->data = gr_malloc((size_t)j->src_w * (size_t)j->src_h * 3, "image pixels");
    if (!im->data) {
        free(im);
        return GR_ERR_OUT_OF_MEMORY;
    }
    cudaError_t err = cudaMemcpy2D(im->data, (size_t)j->src_w * 3, j->src, (size_t)j->pitch,
                                   (size_t)j->src_w * 3, (size_t)j->src_h, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
        gr_image_destroy(im);
        return gr_gpu_cuda_fail(err, "reading back a decoded JPEG", __FILE__, __LINE__);
    }
    *out = im;
    return GR_OK;
}

void gr_gpu_jpeg_host_seconds(const struct gpu_jpeg_slot *s, double *check_s, double *call_s)
{
    *check_s += s ? s->check_s : 0.0;
    *call_s += s ? s->call_s : 0.0;
}

double gr_gpu_jpeg_slot_us(struct gpu_jpeg_slot *s)
{
    float ms = 0.0f;
    if (!s || !s->timed)
        return 0.0;
    s->timed = 0;
    if (cudaEventElapsedTime(&ms, s->begin, s->end) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    return 1e3 * (double)ms;
}

#else /* !GR_HAVE_NVJPEG */

void gr_gpu_jpeg_free(gpu_state *g) { (void)g; }

void gr_gpu_jpeg_slot_free(struct gpu_jpeg_slot *s) { (void)s; }

double gr_gpu_jpeg_slot_us(struct gpu_jpeg_slot *s)
{
    (void)s;
    return 0.0;
}

void gr_gpu_jpeg_host_seconds(const struct gpu_jpeg_slot *s, double *check_s, double *call_s)
{
    (void)s, (void)check_s, (void)call_s;
}

const char *gr_gpu_jpeg_backend(const gpu_state *g)
{
    (void)g;
    return NULL;
}

gr_status gr_gpu_jpeg_pixels(const struct gpu_jpeg_slot *s, int k, gr_image **out)
{
    (void)s, (void)k, (void)out;
    return gr_fail(GR_ERR_UNSUPPORTED, "built without nvJPEG");
}

gr_status gr_gpu_decode_jpegs(gpu_state *g, gpu_instance *inst, gr_jpeg_decoder which,
                              cudaStream_t launch, int n, const uint8_t *const *jpeg,
                              const size_t *bytes, int *decoded, gr_preprocess how, int net_w,
                              int net_h)
{
    (void)g, (void)which, (void)inst, (void)launch, (void)jpeg, (void)bytes;
    (void)how, (void)net_w, (void)net_h;
    for (int i = 0; i < n; i++)
        decoded[i] = 0;
    return gr_fail(GR_ERR_UNSUPPORTED, "JPEG decoding on the GPU: this graphrun was built "
                                       "without nvJPEG (the CUDA toolkit's libnvjpeg and "
                                       "nvjpeg.h were not found)");
}

#endif
