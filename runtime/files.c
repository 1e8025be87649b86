/* gr_pool_detect_files: image files to detections through a pool's engines, the pipeline of
 * `graphrun --input DIR` / `--input-list` and of the Python package's Engine.detect_files
 * (runtime.h, "image files to detections"); gr_pool_detect_source (files.h) feeds it from a
 * caller's images instead (the CLI's video frames).
 *
 * The engines' slots' input buffers (pinned memory on the GPU) are the batch buffers: worker
 * threads decode and letterbox images straight into them (no copy), each with its own
 * gr_image_reader (file and pixel buffers and JPEG decompressor kept between images). Image i
 * belongs to batch i / batch, which lives in buffer (i / batch) % n_buf: slot buffer / D of
 * engine buffer % D, so batches go round robin over the devices. Images are claimed in order from
 * a shared counter, so the buffers fill front to back.
 *
 * The calling thread submits batch k as soon as it is filled, then waits for the run of batch
 * k - D (one run queued per device while the one before it is reported) and has it reported: each
 * image's NaN/Inf counted, its detections decoded (gr_engine_detect_outputs on the outputs kept
 * from that run: pure, any thread), with opt->jsonl its JSON Lines record formatted into the
 * image's own buffer (runtime/jsonl.c, the CLI's text; the buffer is kept for the next image of
 * that place), and the caller's prepare hook called (the CLI formats its record there). The images of the batch are claimed one by one by whoever is free: the workers,
 * which take reporting before decoding (between images, and while waiting for a buffer), and the
 * calling thread itself, so a batch is reported by up to threads + 1 cores. The calling thread
 * then gives the results to the callback in input order and hands the buffer to batch k + n_buf.
 * So decoding the next batches, the copy and compute of batch k and the reporting of batch k - 1
 * overlap; a worker waits only when it is n_buf batches ahead of the results.
 *
 * JPEG decoding on the GPU (decode GPU or AUTO): the workers only read each JPEG whose markers the
 * GPU decoder takes (gr_jpeg_gpu_decodable) into the image's own file buffer; the worker that
 * completes a batch hands those files to its slot's decoder (gr_engine_decode_jpegs) and decodes
 * on the CPU, from the same bytes, the ones it does not take. Every other file goes the CPU way at
 * once, so its result (error included) is the same as with CPU decoding.
 *
 * A device that fails (runtime.h, "A device that fails": a device-level status of its submit,
 * wait, outputs or GPU decoding) is marked dead by the calling thread: its runs in flight are
 * lost (GR_FILE_FAILED_DEVICE), its buffers are retired, and from then on a freed buffer goes to
 * the next batch without one (buffer_of: the same as k % n_buf while nothing failed), or is held
 * for a batch stranded in a dead engine's buffer, which is copied into it (move_batch: the only
 * copy, after a failure only). With no engine left, the remaining files each get a line
 * unread (fail_rest).
 *
 * A file that fails to read or decode gets its message and a grey place in its batch; the rest go
 * on. A batch whose every image failed is not run at all (nothing in it to detect). Where the time goes is counted per stage (gr_files_stats) for the CLI's report. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/engine_internal.h"
#include "runtime/files.h"
#include "runtime/image/image.h"
#include "runtime/jsonl.h"

typedef struct image_slot {
    int w, h;            /* the image in its file, to map boxes back */
    double ready;        /* when its pixels were in place (now_s): its latency runs from here */
    gr_file_failure failure; /* GR_FILE_FAILED_READ or _DETECT with status and error, else OK */
    gr_status status;
    char *error;         /* NULL without a failure, or (out of memory) "out of memory" failing */
    size_t nonfinite;    /* NaN/Inf values in its part of the outputs */
    gr_detection *dets;  /* once reported */
    int n_dets;
    gr_bytes line;       /* opt->jsonl: its record once reported (the buffer kept for the next
                            image of this place) */
    /* Decoding on the GPU: the file's bytes when they go to the GPU decoder (jpeg_len 0: the
     * image is in the batch buffer already, decoded on the CPU); the buffer is kept for the
     * next image of this place. */
    uint8_t *jpeg;
    size_t jpeg_len, jpeg_cap;
} image_slot;

typedef struct batch_buffer {
    int batch_index;     /* which batch this buffer holds (or is being filled with) */
    int filled;          /* images of that batch in place */
    int size;            /* images in that batch, once filled (the calling thread's wait_batch) */
    void *input;         /* the engine slot's input: batch images, uint8 HWC or float CHW */
    gr_engine *engine;   /* the pool's engine this buffer is a slot of, and which slot */
    int slot;
    int in_flight;       /* submitted, not waited for */
    int engine_index;    /* the engine's place in the pool */
    int lost;            /* its engine failed with the batch in flight: GR_FILE_FAILED_DEVICE */
    int reserved;        /* held free for a batch stranded in a failed engine's buffer */
    image_slot *slots;
    const float **outputs; /* the slot's outputs after its run's wait (n_out) */
    /* The batch failed as a whole (its GPU decoding, submit, run or outputs): every image gets
     * this. The GPU decoding's failure is set by the worker that hands the batch over. */
    gr_status status;
    char *error;
    /* Decoding on the GPU: the worker that completes the batch hands its JPEG files over
     * (gpu_decode_batch), then sets handed. The arrays are that call's arguments. */
    int handed;
    const uint8_t **jpeg_data;
    size_t *jpeg_bytes;
    int *jpeg_decoded;
} batch_buffer;

typedef struct pipeline {
    const char *const *paths; /* the images, or NULL for a source */
    gr_files_next_fn next;    /* the source: one worker at a time takes its next image */
    int source_busy;
    int total;           /* images; a source's: INT_MAX until its end */
    gr_file_fn cb;
    gr_file_prepare_fn prepare;
    void *user;
    double *latency;     /* per image, seconds from its pixels in place to its result delivered */
    int n_latency, cap_latency;
    int batch, net_w, net_h, use_u8;
    int fast_decode;     /* the readers DCT-scale large JPEGs */
    int gpu_decode;      /* the workers read JPEG files, the GPU decodes them */
    size_t per_image;    /* elements per image */
    int n_out;           /* engine outputs, and each one's elements per image */
    size_t *out_elems;
    const gr_engine *engine; /* the first: letterboxes for all (the pool is one engine) */
    int classes;
    gr_detect_options detect; /* thresh and nms; each image sets its size */
    int jsonl;           /* each image's JSON Lines record made when it is reported */
    gr_class_names names; /* the records' class names */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int next_image;      /* next image a worker claims */
    int stop;            /* the calling thread gave up (cb stopped the run) */
    int finished;        /* every batch delivered: the workers may leave */
    int n_buf;           /* batch buffers: devices x slots used */
    int n_engines;       /* batch k runs on engine k % n_engines (until one fails) */
    int next_assign;     /* the batch the next buffer freed takes (buffer_of) */
    int processed;       /* the last batch the calling thread submitted (or found lost) */
    /* Engines that failed with a device-level error (device_level): the calling thread's only.
     * Their buffers take no further batch. */
    int dead[GR_MAX_DEVICES];
    gr_status dead_status[GR_MAX_DEVICES];
    char dead_error[GR_MAX_DEVICES][512]; /* "device K (gpu N) failed: why" */
    int alive;
    int device_ordinal[GR_MAX_DEVICES]; /* gr_pool_device: -1 for the CPU */
    gr_status end_status; /* a source whose every device failed: the run's status and message */
    char end_error[600];
    /* The test hook GR_TEST_FAIL_ENGINE=K:N (docs/errors.md): engine K's N-th run fails as a lost
     * device would, after its wait. fail_engine -1: off. */
    int fail_engine, fail_run, runs[GR_MAX_DEVICES];
    batch_buffer buf[GR_MAX_INFLIGHT * GR_MAX_DEVICES];
    /* The batch being reported (NULL: none): its images are claimed from report_next by whoever
     * is free, workers and the calling thread; report_done counts those finished. */
    batch_buffer *reporting;
    int report_next, report_done, report_n;
    gr_files_stats st;   /* the full layout; the caller's copy gets its struct_size of it */
} pipeline;

/* One image's time in the worker stages (seconds). */
typedef struct stage_times {
    double read, decode, letterbox;
} stage_times;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* The cores this process may run on: its CPU affinity mask, which a container's cpuset limits,
 * where sysconf(_SC_NPROCESSORS_ONLN) counts every core of the host (a 16-core container on a
 * 128-core host would start 128 decoding threads). */
static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

static int batch_size(const pipeline *p, int batch_index)
{
    int left = p->total - batch_index * p->batch;
    return left < p->batch ? left : p->batch;
}

/* The buffer that holds (or is being filled with) batch k, NULL while none does: buffer
 * k % n_buf, unless a device failed and the batches went on in the other engines' buffers. Read
 * with the lock held, or on the calling thread (the only one that hands buffers over). */
static batch_buffer *buffer_of(pipeline *p, int k)
{
    batch_buffer *b = &p->buf[k % p->n_buf];
    if (b->batch_index == k)
        return b;
    for (int j = 0; j < p->n_buf; j++)
        if (p->buf[j].batch_index == k)
            return &p->buf[j];
    return NULL;
}

/* A failure after which the engine runs nothing more (its device or context is gone): a CUDA or
 * cuBLAS error, a lost device, an engine that refuses because it failed before. A batch's own
 * failure (NaN/Inf, memory, its input) is not one. */
static int device_level(gr_status st)
{
    return st == GR_ERR_CUDA || st == GR_ERR_CUBLAS || st == GR_ERR_NO_DEVICE || st == GR_ERR_STATE;
}

/* Engine e failed with a device-level error (why): its batches in flight are lost, its buffers
 * take no further batch, and the stats say which device. The calling thread's. */
static void engine_failed(pipeline *p, int e, gr_status st, const char *why)
{
    if (p->dead[e])
        return;
    p->dead[e] = 1;
    p->alive--;
    p->dead_status[e] = st;
    char name[48];
    if (p->device_ordinal[e] >= 0)
        snprintf(name, sizeof name, "device %d (gpu %d)", e, p->device_ordinal[e]);
    else
        snprintf(name, sizeof name, "device %d (the CPU)", e);
    snprintf(p->dead_error[e], sizeof p->dead_error[e], "%s failed: %s", name, why);
    p->st.devices_failed++;
    if (p->st.failed_device < 0) {
        p->st.failed_device = e;
        snprintf(p->st.failed_device_error, sizeof p->st.failed_device_error, "%s",
                 p->dead_error[e]);
    }
}

/* Batch b was bound to an engine that failed: every image of it gets that failure
 * (GR_FILE_FAILED_DEVICE; a file's own read failure still comes first). */
static void lose_batch(pipeline *p, batch_buffer *b)
{
    int e = b->engine_index;
    free(b->error);
    b->status = p->dead_status[e];
    b->error = strdup(p->dead_error[e]);
    b->lost = 1;
}

/* A copy of the calling thread's last message (NULL only without memory). */
static char *copy_error(void)
{
    char *copy = strdup(gr_last_error());
    return copy ? copy : strdup("out of memory");
}

/* A folder may hold anything under an image's name: only a regular file of at most the image
 * file limit is opened (a FIFO would block the reader forever, /dev/zero would be read up to the
 * limit), from its stat, before any read. */
static gr_status check_image_file(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gr_fail(GR_ERR_IO, "%s: cannot open image file: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) {
        const char *kind = S_ISDIR(sb.st_mode)                          ? "a directory"
                           : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                           : S_ISSOCK(sb.st_mode)                       ? "a socket"
                           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                        : "not a file";
        return gr_fail(GR_ERR_IO, "%s: not a regular file (%s)", path, kind);
    }
    if ((unsigned long long)sb.st_size > (unsigned long long)GR_MAX_IMAGE_FILE_BYTES)
        return gr_fail(GR_ERR_LIMIT, "%s: %lld bytes, larger than the image file limit (%zu bytes)",
                       path, (long long)sb.st_size, (size_t)GR_MAX_IMAGE_FILE_BYTES);
    return GR_OK;
}

/* The image in dst failed (gr_last_error() says why): its failure kept, its place grey like the
 * letterbox's border (the batch still runs). */
static void fail_image(const pipeline *p, image_slot *slot, void *dst, gr_status st)
{
    free(slot->error);
    slot->error = copy_error();
    slot->failure = GR_FILE_FAILED_READ;
    slot->status = st;
    slot->w = slot->h = 0;
    if (p->use_u8)
        memset(dst, 128, p->per_image);
    else
        for (size_t i = 0; i < p->per_image; i++)
            ((float *)dst)[i] = 0.5f;
}

static void decode_into(const pipeline *p, gr_image_reader *reader, const char *path, void *dst,
                        image_slot *slot, stage_times *spent)
{
    const gr_image *im = NULL;
    double t0 = now_s();
    gr_status st = check_image_file(path);
    double checked = now_s(), read = 0.0;
    if (st == GR_OK) {
        st = reader ? gr_image_reader_load(reader, path, &im)
                    : gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: no memory for a reader", path);
        read = gr_image_reader_read_seconds(reader);
    }
    double t1 = now_s();
    if (st == GR_OK) {
        /* Boxes map back to the size in the file, also when fast_decode decoded it smaller: so
         * the letterbox places and sizes the image by that size too. */
        gr_image_reader_source_size(reader, &slot->w, &slot->h);
        st = gr_engine_letterbox_as(p->engine, im, slot->w, slot->h, dst); /* any thread */
    }
    slot->ready = now_s();
    /* The stat and the reader's read are the read; the rest of its load is the decode. */
    spent->read = checked - t0 + read;
    spent->decode = t1 - checked - read > 0 ? t1 - checked - read : 0.0;
    spent->letterbox = slot->ready - t1;
    if (st != GR_OK)
        fail_image(p, slot, dst, st);
}

/* Decoding on the GPU: the file's bytes into slot->jpeg, kept for the GPU decoder when its
 * structure is one the GPU decodes (gr_jpeg_gpu_decodable) and its size within the CPU decoder's
 * limits; returns 0 otherwise (nothing kept: the CPU path decodes it and reports what is wrong
 * with it, exactly as with CPU decoding). */
static int read_for_gpu(const char *path, image_slot *slot, stage_times *spent)
{
    double t0 = now_s();
    slot->jpeg_len = 0;
    struct stat sb;
    if (check_image_file(path) != GR_OK || stat(path, &sb) != 0 || sb.st_size < 4)
        return 0;
    size_t size = (size_t)sb.st_size;
    if (size > slot->jpeg_cap) {
        uint8_t *grown = realloc(slot->jpeg, size);
        if (!grown)
            return 0;
        slot->jpeg = grown;
        slot->jpeg_cap = size;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(slot->jpeg, 1, size, f);
    fclose(f);
    if (got != size)
        return 0;
    gr_jpeg_info info;
    gr_jpeg_scan(slot->jpeg, size, &info);
    int w, h;
    if (!gr_jpeg_gpu_decodable(&info) || gr_image_probe_mem(slot->jpeg, size, path, &w, &h) != GR_OK)
        return 0;
    slot->w = w;
    slot->h = h;
    slot->jpeg_len = size;
    slot->ready = now_s();
    spent->read = slot->ready - t0;
    return 1;
}

/* The source's image `index` letterboxed into dst: 1 at the source's end, else 0. */
static int take_from_source(pipeline *p, int index, void *dst, image_slot *slot,
                            stage_times *spent)
{
    const gr_image *im = NULL;
    double t0 = now_s();
    if (!p->next(p->user, index, &im))
        return 1;
    double t1 = now_s();
    slot->w = im->w;
    slot->h = im->h;
    gr_status st = gr_engine_letterbox(p->engine, im, dst);
    slot->ready = now_s();
    spent->decode = t1 - t0;
    spent->letterbox = slot->ready - t1;
    if (st != GR_OK)
        fail_image(p, slot, dst, st);
    return 0;
}

/* NaN/Inf values in image s's part of the outputs batch b kept. */
static size_t count_nonfinite(const pipeline *p, const batch_buffer *b, int s)
{
    size_t bad = 0;
    for (int k = 0; k < p->n_out; k++) {
        const float *v = b->outputs[k] + (size_t)s * p->out_elems[k];
        for (size_t i = 0; i < p->out_elems[k]; i++)
            bad += !isfinite(v[i]);
    }
    return bad;
}

/* What image s of batch b came to, for the caller: its file's failure first, then its batch's,
 * then its detections'. */
static void fill_result(const pipeline *p, const batch_buffer *b, int s, gr_file_result *r)
{
    const image_slot *slot = &b->slots[s];
    int index = b->batch_index * p->batch + s;
    *r = (gr_file_result){.path = p->paths ? p->paths[index] : NULL, .index = index,
                          .width = slot->w, .height = slot->h, .batch_end = s == b->size - 1};
    if (slot->failure == GR_FILE_FAILED_READ || b->status == GR_OK) {
        r->failure = slot->failure;
        r->status = slot->status;
        r->error = slot->error;
    } else {
        r->failure = b->lost ? GR_FILE_FAILED_DEVICE : GR_FILE_FAILED_RUN;
        r->status = b->status;
        r->error = b->error;
    }
    if (r->failure == GR_FILE_OK) {
        r->nonfinite = slot->nonfinite;
        r->detections = slot->dets;
        r->n_detections = slot->n_dets;
    }
    if (p->jsonl && slot->line.len && !slot->line.failed) {
        r->jsonl = (const char *)slot->line.data;
        r->jsonl_len = slot->line.len;
    }
}

/* The JSON Lines record of result r (runtime/jsonl.h) into its slot's line: the text, '\n',
 * then a NUL that jsonl_len leaves out. Any failure is an error record (its message, or its
 * status's name where it has none). */
static void format_line(const pipeline *p, image_slot *slot, const gr_file_result *r)
{
    gr_bytes *line = &slot->line;
    line->len = 0;
    line->failed = 0;
    const char *error = NULL;
    if (r->failure != GR_FILE_OK)
        error = r->error && r->error[0] ? r->error : gr_status_str(r->status);
    gr_jsonl_image im = {.path = r->path, .frame = -1, .width = r->width, .height = r->height,
                         .error = error, .nonfinite = r->nonfinite};
    gr_json_record(line, &im, p->names, r->detections, r->n_detections);
    gr_bytes_put(line, "\n", 2); /* the newline and the NUL */
    if (!line->failed)
        line->len--;
}

/* Image s of batch b reported: its NaN/Inf counted and its detections decoded from the outputs
 * the batch kept, then the caller's prepare. Touches only the slot (and reads the batch): any
 * thread. */
static void report_image(const pipeline *p, batch_buffer *b, int s)
{
    image_slot *slot = &b->slots[s];
    if (b->status == GR_OK && slot->failure == GR_FILE_OK) {
        slot->nonfinite = count_nonfinite(p, b, s);
        if (!slot->nonfinite && p->classes > 0) {
            gr_detect_options dopt = p->detect;
            dopt.image_w = slot->w;
            dopt.image_h = slot->h;
            gr_status st = gr_engine_detect_outputs(b->engine, b->outputs, s, &dopt, &slot->dets,
                                                    &slot->n_dets);
            if (st != GR_OK) {
                slot->failure = GR_FILE_FAILED_DETECT;
                slot->status = st;
                slot->error = copy_error();
            }
        }
    }
    if (p->jsonl || p->prepare) {
        gr_file_result r;
        fill_result(p, b, s, &r);
        if (p->jsonl) {
            format_line(p, slot, &r);
            fill_result(p, b, s, &r);
        }
        if (p->prepare)
            p->prepare(p->user, &r);
    }
}

/* Claim and report one image of the batch being reported, if one is left: 1 if it did. Called
 * with the lock held, returns with it held; *spent (guarded by the lock) gets the time. */
static int report_one(pipeline *p, double *spent)
{
    batch_buffer *b = p->reporting;
    if (!b || p->report_next >= p->report_n)
        return 0;
    int s = p->report_next++;
    pthread_mutex_unlock(&p->lock);
    double t = now_s();
    report_image(p, b, s);
    t = now_s() - t;
    pthread_mutex_lock(&p->lock);
    *spent += t;
    if (++p->report_done == p->report_n)
        pthread_cond_broadcast(&p->changed);
    return 1;
}

/* The batch failed as a whole (the first failure stays): gr_last_error() says why. */
static void fail_batch(batch_buffer *b, gr_status st, const char *prefix)
{
    if (b->status != GR_OK)
        return;
    b->status = st;
    size_t len = strlen(prefix) + strlen(gr_last_error()) + 1;
    b->error = malloc(len);
    if (b->error)
        snprintf(b->error, len, "%s%s", prefix, gr_last_error());
    else
        b->error = strdup("out of memory");
}

/* Decoding on the GPU: the n images of batch b (all read or decoded) to its engine's decoder, by
 * the worker that finished the batch; the JPEG files it does not take decoded here on the CPU
 * from the same bytes, as CPU decoding would decode them (their error in their result). Returns
 * the seconds it took and how many the GPU decoded; a failure of the device fails the batch. */
static double gpu_decode_batch(const pipeline *p, batch_buffer *b, int n, int *on_gpu)
{
    double t0 = now_s();
    *on_gpu = 0;
    for (int s = 0; s < n; s++) {
        b->jpeg_data[s] = b->slots[s].jpeg_len ? b->slots[s].jpeg : NULL;
        b->jpeg_bytes[s] = b->slots[s].jpeg_len;
    }
    gr_status st = gr_engine_decode_jpegs(b->engine, b->slot, n, b->jpeg_data, b->jpeg_bytes,
                                          b->jpeg_decoded);
    if (st != GR_OK) {
        fail_batch(b, st, "JPEG decoding on the GPU: ");
        return now_s() - t0;
    }
    for (int s = 0; s < n; s++) {
        image_slot *slot = &b->slots[s];
        *on_gpu += b->jpeg_decoded[s];
        if (!slot->jpeg_len || b->jpeg_decoded[s])
            continue;
        const char *path = p->paths[b->batch_index * p->batch + s];
        uint8_t *dst = (uint8_t *)b->input + (size_t)s * p->per_image;
        gr_image *im = NULL;
        gr_status one = gr_image_decode_mem(slot->jpeg, slot->jpeg_len, path, &im);
        if (one == GR_OK)
            one = gr_engine_letterbox(p->engine, im, dst);
        gr_image_destroy(im);
        if (one != GR_OK)
            fail_image(p, slot, dst, one);
    }
    return now_s() - t0;
}

/* A worker: images are claimed in order and put into their batch's buffer; between images, and
 * while waiting for a buffer or for more work, it reports images of the batch being reported
 * (that is what frees buffers). A source's images are claimed by one worker at a time, which
 * holds the source from its claim to the image in place, so they land in order. It leaves when
 * the calling thread says so. */
static void *worker(void *arg)
{
    pipeline *p = arg;
    /* Without a reader (out of memory) every file this worker claims fails with a message. */
    gr_image_reader *reader = NULL;
    if (p->paths && gr_image_reader_create(&reader) == GR_OK && p->fast_decode)
        gr_image_reader_fast_decode(reader, gr_model_preprocess(gr_engine_model(p->engine)),
                                    p->net_w, p->net_h);
    pthread_mutex_lock(&p->lock);
    while (!p->stop && !p->finished) {
        if (report_one(p, &p->st.workers_report_s))
            continue;
        if (p->next_image >= p->total || p->source_busy) {
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        int i = p->next_image++;
        p->source_busy = p->next != NULL;
        int batch_index = i / p->batch, s = i % p->batch;
        batch_buffer *b = NULL;
        while (!p->stop && !(b = buffer_of(p, batch_index))) { /* held by an earlier batch */
            if (report_one(p, &p->st.workers_report_s))
                continue;
            double t = now_s();
            pthread_cond_wait(&p->changed, &p->lock);
            p->st.workers_blocked_s += now_s() - t;
        }
        if (p->stop || !b)
            break;
        pthread_mutex_unlock(&p->lock);
        size_t elem = p->use_u8 ? 1 : sizeof(float);
        void *dst = (char *)b->input + (size_t)s * p->per_image * elem;
        image_slot *slot = &b->slots[s];
        slot->failure = GR_FILE_OK;
        slot->nonfinite = 0;
        int ended = 0;
        stage_times spent = {0.0, 0.0, 0.0};
        if (p->next)
            ended = take_from_source(p, i, dst, slot, &spent);
        else if (!p->gpu_decode || !read_for_gpu(p->paths[i], slot, &spent))
            decode_into(p, reader, p->paths[i], dst, slot, &spent);
        pthread_mutex_lock(&p->lock);
        p->st.read_s += spent.read;
        p->st.decode_s += spent.decode;
        p->st.letterbox_s += spent.letterbox;
        if (ended)
            p->total = i; /* batch_size() shrinks: the calling thread submits what is there */
        else
            b->filled++;
        p->source_busy = 0;
        int n = batch_size(p, batch_index);
        if (p->gpu_decode && b->filled == n) { /* the batch's last image: hand it over */
            pthread_mutex_unlock(&p->lock);
            int on_gpu;
            double spent_s = gpu_decode_batch(p, b, n, &on_gpu);
            pthread_mutex_lock(&p->lock);
            p->st.handoff_s += spent_s;
            p->st.gpu_decoded += on_gpu;
            b->handed = 1;
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    gr_image_reader_destroy(reader);
    return NULL;
}

static void record_latency(pipeline *p, double seconds)
{
    if (p->n_latency == p->cap_latency) {
        int cap = p->cap_latency ? 2 * p->cap_latency : 1024;
        double *grown = realloc(p->latency, (size_t)cap * sizeof *grown);
        if (!grown)
            return; /* the statistics are of the images recorded so far */
        p->latency = grown;
        p->cap_latency = cap;
    }
    p->latency[p->n_latency++] = seconds;
}

/* After batch b's run: the engine's time split, its GPU decoding time and the outputs kept for
 * reporting (a failure fails the batch). */
static void collect_outputs(pipeline *p, batch_buffer *b)
{
    gr_timing split;
    if (gr_engine_timing(b->engine, &split) == GR_OK)
        p->st.engine_s += (split.convert_us + split.copy_us + split.compute_us) * 1e-6;
    double decode_us = 0.0;
    if (p->gpu_decode && gr_engine_jpeg_decoder(b->engine, &decode_us))
        p->st.gpu_decode_s += decode_us * 1e-6;
    for (int k = 0; k < p->n_out; k++) {
        gr_status st = gr_engine_output(b->engine, k, &b->outputs[k]);
        if (st != GR_OK) {
            fail_batch(b, st, "");
            if (device_level(st))
                engine_failed(p, b->engine_index, st, gr_last_error());
            return;
        }
    }
}

/* gr_engine_wait for batch b's run; then the test hook's failure, if this is its run. */
static gr_status wait_run(pipeline *p, batch_buffer *b)
{
    gr_status st = gr_engine_wait(b->engine, b->slot);
    int e = b->engine_index;
    if (e == p->fail_engine && ++p->runs[e] == p->fail_run)
        return gr_fail(GR_ERR_CUDA, "injected failure (test hook GR_TEST_FAIL_ENGINE=%d:%d)", e,
                       p->fail_run);
    return st;
}

/* Wait for the run of batch b (on its buffer's engine and slot), have its images reported (by the
 * workers and this thread), give cb their results in order. Returns 1 when cb stopped the run. */
static int deliver_batch(pipeline *p, batch_buffer *b)
{
    double t0 = now_s();
    int ran = b->in_flight;
    if (ran) {
        b->in_flight = 0;
        gr_status st = wait_run(p, b);
        /* GR_ERR_NUMERIC (an engine built with nonfinite_is_error): the outputs are readable,
         * and each image's NaN/Inf is counted. */
        if (st != GR_OK && st != GR_ERR_NUMERIC) {
            fail_batch(b, st, "");
            if (device_level(st))
                engine_failed(p, b->engine_index, st, gr_last_error());
        }
    }
    double t1 = now_s();
    p->st.main_wait_engine_s += t1 - t0;
    if (ran && b->status == GR_OK && !p->dead[b->engine_index])
        collect_outputs(p, b);
    if (ran && p->dead[b->engine_index]) /* in flight when its engine failed, or the failing run */
        lose_batch(p, b);
    int n = b->size;
    double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    pthread_mutex_lock(&p->lock);
    p->reporting = b;
    p->report_next = p->report_done = 0;
    p->report_n = n;
    pthread_cond_broadcast(&p->changed);
    while (p->report_done < n)
        if (!report_one(p, &p->st.main_report_own_s))
            pthread_cond_wait(&p->changed, &p->lock);
    p->reporting = NULL;
    pthread_mutex_unlock(&p->lock);
    double t2 = now_s();
    p->st.main_report_s += t2 - t1;
    int stopped = 0;
    for (int s = 0; s < n && !stopped; s++) {
        gr_file_result r;
        fill_result(p, b, s, &r);
        p->st.files_lost += r.failure == GR_FILE_FAILED_DEVICE;
        stopped = p->cb(p->user, &r) != 0;
    }
    double delivered = now_s();
    for (int s = 0; s < n; s++) {
        image_slot *slot = &b->slots[s];
        if (!stopped)
            record_latency(p, delivered - slot->ready);
        gr_detections_free(slot->dets);
        slot->dets = NULL;
        slot->n_dets = 0;
        free(slot->error);
        slot->error = NULL;
    }
    p->st.main_deliver_s += now_s() - t2;
    p->st.main_deliver_cpu_s += clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return stopped;
}

/* Batches in failed engines' buffers that the calling thread has not reached (decoded, or being
 * decoded, into them: never submitted there), less the buffers held free for them. */
static int stranded(const pipeline *p)
{
    int n = 0;
    for (int j = 0; j < p->n_buf; j++) {
        const batch_buffer *b = &p->buf[j];
        if (p->dead[b->engine_index])
            n += b->batch_index > p->processed;
        else
            n -= b->reserved;
    }
    return n;
}

/* Hand batch k's buffer to the next batch without one (batch k + n_buf while no device failed;
 * a failed engine's buffer to none), or stop the workers when cb stopped the run. */
static void release_buffer(pipeline *p, batch_buffer *b, int k, int stop)
{
    (void)k;
    pthread_mutex_lock(&p->lock);
    b->reserved = 0;
    if (p->dead[b->engine_index])
        b->batch_index = -1;
    else if (p->alive < p->n_engines && stranded(p) > 0) /* (never while no device failed) */
        b->batch_index = -1, b->reserved = 1;
    else
        b->batch_index = p->next_assign++;
    b->lost = 0;
    b->filled = 0;
    b->handed = 0;
    b->status = GR_OK;
    free(b->error);
    b->error = NULL;
    if (stop)
        p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* Wait until batch k is filled: 1, or 0 when there is no batch k (the images, or the source,
 * ended before it; a source's end is known only once reached). */
static int wait_batch(pipeline *p, batch_buffer *b, int k)
{
    double t = now_s();
    pthread_mutex_lock(&p->lock);
    while (batch_size(p, k) > 0 &&
           (b->filled < batch_size(p, k) || (p->gpu_decode && !b->handed)))
        pthread_cond_wait(&p->changed, &p->lock);
    int more = batch_size(p, k) > 0;
    if (more) /* (no batch k: its buffer may still hold batch k - 1, whose size stays) */
        b->size = batch_size(p, k); /* read under the lock: a source's end changes p->total */
    pthread_mutex_unlock(&p->lock);
    p->st.main_wait_decoded_s += now_s() - t;
    return more;
}

/* Deliver batch k (its run waited for) and free its buffer. */
static int deliver_next(pipeline *p, int k)
{
    batch_buffer *b = buffer_of(p, k);
    int stopped = deliver_batch(p, b);
    release_buffer(p, b, k, stopped);
    return stopped;
}

/* Every image of filled batch b failed to read or decode: there is nothing to run it for (a list
 * of missing files costs no inference; their results are their errors, as they would be after a
 * run). Read after wait_batch: no worker touches the batch any more. */
static int batch_all_failed(const batch_buffer *b)
{
    for (int s = 0; s < b->size; s++)
        if (b->slots[s].failure != GR_FILE_FAILED_READ)
            return 0;
    return 1;
}

/* A buffer of a healthy engine held free for a stranded batch, or NULL. */
static batch_buffer *reserved_buffer(pipeline *p)
{
    for (int j = 0; j < p->n_buf; j++)
        if (p->buf[j].reserved && !p->dead[p->buf[j].engine_index])
            return &p->buf[j];
    return NULL;
}

/* Batch k, filled in buffer `from` of a failed engine (never submitted there), moved into `to`,
 * a healthy engine's free buffer: its decoded images copied (the only copy of the pipeline, and
 * only after a failure), its images' state handed over; with GPU decoding its JPEGs go to the
 * new slot's decoder again (the failed device's decode is gone with it). */
static void move_batch(pipeline *p, batch_buffer *from, batch_buffer *to, int k)
{
    size_t elem = p->use_u8 ? 1 : sizeof(float);
    memcpy(to->input, from->input, (size_t)from->size * p->per_image * elem);
    pthread_mutex_lock(&p->lock);
    image_slot *slots = to->slots;
    to->slots = from->slots;
    from->slots = slots;
    to->batch_index = k;
    to->filled = from->filled;
    to->size = from->size;
    to->handed = from->handed;
    to->reserved = 0;
    free(to->error);
    to->error = NULL;
    to->status = GR_OK;
    if (!device_level(from->status)) { /* a failure of the batch's own stays */
        to->status = from->status;
        to->error = from->error;
        from->error = NULL;
    }
    from->batch_index = -1;
    from->filled = from->handed = 0;
    from->status = GR_OK;
    free(from->error);
    from->error = NULL;
    pthread_mutex_unlock(&p->lock);
    if (p->gpu_decode && to->status == GR_OK) {
        int on_gpu;
        double spent = gpu_decode_batch(p, to, to->size, &on_gpu);
        pthread_mutex_lock(&p->lock);
        p->st.handoff_s += spent;
        p->st.gpu_decoded += on_gpu;
        pthread_mutex_unlock(&p->lock);
    }
    p->st.batches_moved++;
}

/* Every engine failed and batches k on have no buffer: each of their images gets a
 * GR_FILE_FAILED_DEVICE result naming the first failure, unread (in order, with its line and
 * prepare as any other); a source ends there, its run failing with that status. Returns 1 (the
 * run ends), 0 when there is no batch k (the images ended). */
static int fail_rest(pipeline *p, int k)
{
    pthread_mutex_lock(&p->lock);
    int total = p->total, rest = k * p->batch < total;
    if (rest) {
        p->stop = 1; /* the workers leave: no buffer will come */
        if (p->next)
            p->total = k * p->batch;
    }
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    if (!rest)
        return 0;
    int first = p->st.failed_device;
    gr_status status = first >= 0 ? p->dead_status[first] : GR_ERR_INTERNAL;
    char why[sizeof p->dead_error[0] + 64];
    snprintf(why, sizeof why, "not run: no device left (%s)",
             first >= 0 ? p->dead_error[first] : "no batch buffer left");
    if (p->next) {
        p->end_status = status;
        snprintf(p->end_error, sizeof p->end_error, "%s", why);
        return 1;
    }
    image_slot none;
    memset(&none, 0, sizeof none);
    int stopped = 0;
    for (int i = k * p->batch; i < total && !stopped; i++) {
        gr_file_result r = {.path = p->paths[i], .index = i, .failure = GR_FILE_FAILED_DEVICE,
                            .status = status, .error = why,
                            .batch_end = (i + 1) % p->batch == 0 || i + 1 == total};
        if (p->jsonl) {
            format_line(p, &none, &r);
            if (!none.line.failed && none.line.len) {
                r.jsonl = (const char *)none.line.data;
                r.jsonl_len = none.line.len;
            }
        }
        if (p->prepare)
            p->prepare(p->user, &r);
        p->st.files_lost++;
        stopped = p->cb(p->user, &r) != 0;
    }
    gr_bytes_free(&none.line);
    return 1;
}

/* Submit batch k once filled, then deliver batch k - lag (after the last batch: the rest, in
 * order), so that each device has a run queued while the one before it is reported. lag is the
 * devices, less where the buffers are too few to fill batch k while k - lag is not delivered. */
static void main_loop(pipeline *p)
{
    int lag = p->n_engines < p->n_buf - 1 ? p->n_engines : p->n_buf - 1;
    int stopped = 0, delivered = 0, k;
    for (k = 0; !stopped; k++) {
        /* After a device failed, fewer buffers go round: batch k gets one once an earlier batch's
         * is freed. */
        batch_buffer *b;
        while (!(b = buffer_of(p, k)) && delivered < k && !stopped)
            stopped = deliver_next(p, delivered++);
        if (stopped)
            break;
        if (!b) { /* every engine failed (or the images ended) */
            stopped = fail_rest(p, k);
            break;
        }
        if (!wait_batch(p, b, k))
            break;
        int e = b->engine_index;
        if (b->status != GR_OK && device_level(b->status)) /* its GPU decoding */
            engine_failed(p, e, b->status, b->error ? b->error : gr_status_str(b->status));
        if (p->dead[e]) { /* stranded: to a healthy engine's buffer once one is free */
            batch_buffer *to;
            while (!(to = reserved_buffer(p)) && delivered < k && !stopped)
                stopped = deliver_next(p, delivered++);
            if (stopped)
                break;
            if (to) {
                move_batch(p, b, to, k);
                b = to;
                e = b->engine_index;
                if (b->status != GR_OK && device_level(b->status)) /* its GPU decoding again */
                    engine_failed(p, e, b->status, b->error ? b->error : "");
            }
            if (p->dead[e])
                lose_batch(p, b); /* every engine failed */
        }
        p->processed = k;
        if (!p->dead[e] && b->status == GR_OK && !batch_all_failed(b)) {
            gr_status st = gr_engine_submit(b->engine, b->slot);
            if (st != GR_OK) {
                fail_batch(b, st, "");
                if (device_level(st)) {
                    engine_failed(p, e, st, gr_last_error());
                    lose_batch(p, b);
                }
            }
            b->in_flight = st == GR_OK;
        }
        if (k - delivered >= lag)
            stopped = deliver_next(p, delivered++);
    }
    while (!stopped && delivered < k)
        stopped = deliver_next(p, delivered++);
}

/* Start up to `threads` workers; returns how many started. */
static int start_workers(pipeline *p, pthread_t *tids, int threads)
{
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker, p) != 0)
            break;
    return started;
}

/* Every result delivered (or cb stopped the run): the workers leave; then no run is left in
 * flight on the engines. */
static void stop_workers(pipeline *p, pthread_t *tids, int started)
{
    pthread_mutex_lock(&p->lock);
    p->finished = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    for (int k = 0; k < p->n_buf; k++)
        if (p->buf[k].in_flight) {
            (void)gr_engine_wait(p->buf[k].engine, p->buf[k].slot); /* results not wanted */
            p->buf[k].in_flight = 0;
        }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-th percentile of n sorted values, linear between the closest ranks; 0 for none. */
static double percentile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0.0;
    double pos = q / 100.0 * (double)(n - 1);
    int k = (int)pos;
    return k + 1 < n ? sorted[k] + (pos - k) * (sorted[k + 1] - sorted[k]) : sorted[n - 1];
}

/* ---- setup -------------------------------------------------------------------------------- */

/* Slot `slot` of engine e ready for JPEG decoding on the GPU: uint8 input, its decoder open. A
 * float-input (CPU) engine is left as it is: gr_engine_decode_jpegs refuses it. */
static gr_status open_slot_decoder(gr_engine *e, int slot)
{
    void *input;
    size_t bytes;
    if (gr_engine_image_u8(e))
        GR_TRY(gr_engine_slot_input(e, slot, 1, &input, &bytes));
    return gr_engine_decode_jpegs(e, slot, 0, NULL, NULL, NULL);
}

gr_status gr_pool_open_jpeg_decoders(gr_pool *pool)
{
    if (!pool)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_open_jpeg_decoders: NULL pool");
    for (int k = 0; k < gr_pool_devices(pool); k++) {
        gr_engine *e = gr_pool_engine(pool, k);
        for (int slot = 0; slot < gr_engine_inflight(e); slot++)
            GR_TRY(open_slot_decoder(e, slot));
    }
    return GR_OK;
}

/* Where the JPEGs are decoded (runtime.h, gr_files_options.decode): p->gpu_decode, and in the
 * stats the decoder or why the CPU decodes. Every buffer's decoder is opened now (a hardware
 * decoder's handle takes milliseconds), before the clock starts and the workers hand batches
 * over. */
static gr_status choose_decoder(pipeline *p, const gr_files_options *o)
{
    const char *why = o->decode == GR_FILES_DECODE_CPU ? "decode cpu"
                      : !p->use_u8                      ? "a CPU engine"
                      : o->fast_decode                  ? "fast_decode"
                                                        : NULL;
    if (o->decode == GR_FILES_DECODE_GPU && why)
        return gr_fail(p->use_u8 ? GR_ERR_INVALID_ARGUMENT : GR_ERR_UNSUPPORTED,
                       "gr_pool_detect_files: decode GPU: not with %s", why);
    const char *name = NULL;
    for (int k = 0; !why && k < p->n_buf; k++) {
        gr_status st = open_slot_decoder(p->buf[k].engine, p->buf[k].slot);
        if (st != GR_OK) {
            if (o->decode == GR_FILES_DECODE_GPU)
                return st;
            why = gr_last_error();
        }
        name = gr_engine_jpeg_decoder(p->buf[k].engine, NULL);
    }
    p->gpu_decode = p->st.gpu_decode = !why && name;
    snprintf(p->st.decoder, sizeof p->st.decoder, "%s",
             p->gpu_decode ? name : why ? why : "no GPU decoder");
    for (int k = 0; p->gpu_decode && k < p->n_buf; k++) {
        batch_buffer *b = &p->buf[k];
        size_t n = (size_t)p->batch;
        b->jpeg_data = calloc(n, sizeof *b->jpeg_data);
        b->jpeg_bytes = calloc(n, sizeof *b->jpeg_bytes);
        b->jpeg_decoded = calloc(n, sizeof *b->jpeg_decoded);
        if (!b->jpeg_data || !b->jpeg_bytes || !b->jpeg_decoded)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory for batches of %d images",
                           p->batch);
    }
    return GR_OK;
}

/* The batch buffers of a pool: buffer k is slot k / devices of engine k % devices, so that batch
 * k (in buffer k % n_buf) runs on engine k % devices. Slots beyond what the images need (n
 * known) are left out. */
static gr_status pipeline_init(pipeline *p, gr_pool *pool, int n_images)
{
    gr_engine *engine = gr_pool_engine(pool, 0);
    gr_tensor_desc in;
    gr_model_info info;
    GR_TRY(gr_engine_input_desc(engine, &in));
    GR_TRY(gr_model_get_info(gr_engine_model(engine), &info));
    if (in.c != 3) /* before any file: each would fail the letterbox */
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_detect_files: images are RGB; the "
                       "network takes %d input channels", in.c);
    p->batch = in.n;
    p->net_w = in.w;
    p->net_h = in.h;
    p->use_u8 = gr_engine_image_u8(engine); /* the slots' input type gr_engine_letterbox fills */
    p->per_image = (size_t)in.c * (size_t)in.w * (size_t)in.h;
    p->n_engines = gr_pool_devices(pool);
    p->engine = engine;
    p->classes = info.classes;
    int slots = INT_MAX;
    for (int k = 0; k < p->n_engines; k++) {
        int inflight = gr_engine_inflight(gr_pool_engine(pool, k));
        slots = inflight < slots ? inflight : slots;
    }
    if (n_images >= 0) {
        int per_engine = ((n_images + p->batch - 1) / p->batch + p->n_engines - 1) / p->n_engines;
        slots = per_engine < slots ? per_engine : slots;
    }
    p->n_buf = p->n_engines * (slots > 0 ? slots : 1);
    p->next_assign = p->n_buf;
    p->processed = -1;
    p->alive = p->n_engines;
    for (int k = 0; k < p->n_engines; k++)
        p->device_ordinal[k] = gr_pool_device(pool, k);
    p->n_out = gr_engine_output_count(engine);
    p->out_elems = gr_calloc((size_t)p->n_out, sizeof *p->out_elems, "the outputs' sizes");
    if (!p->out_elems)
        return GR_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < p->n_out; k++) {
        gr_tensor_desc d;
        GR_TRY(gr_engine_output_desc(engine, k, &d));
        p->out_elems[k] = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    }
    for (int k = 0; k < p->n_buf; k++) {
        batch_buffer *b = &p->buf[k];
        size_t bytes;
        b->engine = gr_pool_engine(pool, k % p->n_engines);
        b->engine_index = k % p->n_engines;
        b->slot = k / p->n_engines;
        b->batch_index = k;
        gr_status st = gr_engine_slot_input(b->engine, b->slot, p->use_u8, &b->input, &bytes);
        if (st != GR_OK)
            return gr_fail_prefix(st, "the engine's input buffers: ");
        b->slots = calloc((size_t)p->batch, sizeof *b->slots);
        b->outputs = calloc((size_t)(p->n_out > 0 ? p->n_out : 1), sizeof *b->outputs);
        if (!b->slots || !b->outputs)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory for %d batches of %d images",
                           p->n_buf, p->batch);
    }
    return GR_OK;
}

static void pipeline_free(pipeline *p)
{
    for (int k = 0; k < p->n_buf; k++) {
        batch_buffer *b = &p->buf[k];
        for (int s = 0; b->slots && s < p->batch; s++) {
            free(b->slots[s].error);
            free(b->slots[s].jpeg);
            gr_detections_free(b->slots[s].dets);
            gr_bytes_free(&b->slots[s].line);
        }
        free(b->slots);
        free(b->outputs);
        free(b->error);
        free(b->jpeg_data);
        free(b->jpeg_bytes);
        free(b->jpeg_decoded);
    }
    free(p->out_elems);
    free(p->latency);
}

/* The caller's stats: the first struct_size bytes of ours. */
static void copy_stats(const pipeline *p, gr_files_stats *stats)
{
    if (!stats)
        return;
    uint32_t size = stats->struct_size;
    memcpy(stats, &p->st, size < sizeof p->st ? size : sizeof p->st);
    stats->struct_size = size;
}

/* The test hook GR_TEST_FAIL_ENGINE=K:N (docs/errors.md, "A device that fails mid-run"): engine
 * K of the pool fails its N-th run as a lost device would (GR_ERR_CUDA after the run's wait), to
 * test what a failing device loses; not a user feature. Read once per call; a value other than
 * K:N (K >= 0, N >= 1) is refused. */
static gr_status read_test_hook(pipeline *p, const char *fn)
{
    p->fail_engine = -1;
    const char *value = getenv("GR_TEST_FAIL_ENGINE");
    if (!value || !*value)
        return GR_OK;
    int k, n, used = 0;
    if (sscanf(value, "%d:%d%n", &k, &n, &used) != 2 || value[used] || k < 0 || n < 1)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: GR_TEST_FAIL_ENGINE=%s: K:N expected (a test "
                       "hook: engine K fails its N-th run)", fn, value);
    p->fail_engine = k;
    p->fail_run = n;
    return GR_OK;
}

static gr_status run_files(gr_pool *pool, const char *const *paths, int n, gr_files_next_fn next,
                           const gr_files_options *given, gr_file_fn cb, void *user,
                           gr_files_stats *stats, const char *fn)
{
    if (!pool || !cb || (!next && !paths && n > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                       !pool ? "pool" : !cb ? "callback" : "paths");
    if (n < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: %d images", fn, n);
    for (int i = 0; i < n; i++)
        if (!paths[i])
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: paths[%d] is NULL", fn, i);
    if (stats && stats->struct_size < sizeof(uint32_t))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: stats->struct_size is %u (set it to "
                       "sizeof(gr_files_stats))", fn, (unsigned)stats->struct_size);
    gr_files_options o;
    GR_TRY(gr_files_options_take(given, &o));
    if (o.class_names && o.n_class_names < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: n_class_names is %d", fn, o.n_class_names);
    /* A video's records hold its frames' times, which only the source knows. */
    if (o.jsonl && next)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: jsonl: a source's records are its caller's "
                       "to format", fn);
    double entry = now_s();
    pipeline *p = gr_calloc(1, sizeof *p, "the pipeline");
    if (!p)
        return GR_ERR_OUT_OF_MEMORY;
    p->paths = paths;
    p->next = next;
    p->total = next ? INT_MAX : n;
    p->cb = cb;
    p->prepare = o.prepare;
    p->user = user;
    p->fast_decode = o.fast_decode;
    p->jsonl = o.jsonl != 0;
    p->names = o.class_names ? (gr_class_names){o.class_names, o.n_class_names}
                             : gr_model_names(gr_engine_model(gr_pool_engine(pool, 0)));
    gr_detect_options_default(&p->detect);
    p->detect.thresh = o.thresh;
    p->detect.nms = o.nms;
    p->st.struct_size = sizeof p->st;
    p->st.failed_device = -1;
    gr_status hook = read_test_hook(p, fn);
    if (hook != GR_OK) {
        free(p);
        return hook;
    }
    p->st.images = next ? 0 : n;
    p->st.cores = usable_cores();
    int threads = o.threads > 0 ? o.threads : p->st.cores;
    if (!next && threads > n)
        threads = n;
    gr_status st = next || n > 0 ? pipeline_init(p, pool, next ? -1 : n) : GR_OK;
    if (st == GR_OK && !next && n > 0)
        st = choose_decoder(p, &o);
    pthread_t *tids = NULL;
    if (st == GR_OK && (next || n > 0) &&
        !(tids = calloc((size_t)threads, sizeof *tids)))
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory for %d threads", threads);
    p->st.batch = p->batch;
    p->st.buffers = p->n_buf;
    p->st.devices = gr_pool_devices(pool);
    p->st.threads = tids ? threads : 0;
    if (st != GR_OK || !tids) { /* a failure, or no image */
        copy_stats(p, stats);
        pipeline_free(p);
        free(p);
        return st;
    }
    copy_stats(p, stats);
    if (o.started)
        o.started(user, &p->st);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    double t0 = now_s(), cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    p->st.setup_s = t0 - entry;
    int started = start_workers(p, tids, threads);
    if (started == 0)
        st = gr_fail(GR_ERR_STATE, "cannot start a decoding thread");
    else
        main_loop(p);
    stop_workers(p, tids, started);
    if (st == GR_OK && p->end_status != GR_OK)
        st = gr_fail(p->end_status, "%s: %s", fn, p->end_error);
    p->st.elapsed_s = now_s() - t0;
    p->st.main_cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    p->st.images = p->total;
    p->st.threads = started;
    if (p->n_latency > 1)
        qsort(p->latency, (size_t)p->n_latency, sizeof *p->latency, cmp_double);
    p->st.latency_p50_s = percentile(p->latency, p->n_latency, 50.0);
    p->st.latency_p99_s = percentile(p->latency, p->n_latency, 99.0);
    double finish = now_s();
    pipeline_free(p);
    p->st.finish_s = now_s() - finish + (finish - t0 - p->st.elapsed_s);
    copy_stats(p, stats);
    free(p);
    free(tids);
    return st;
}

gr_status gr_pool_detect_files(gr_pool *pool, const char *const *paths, int n,
                               const gr_files_options *opt, gr_file_fn cb, void *user,
                               gr_files_stats *stats)
{
    return run_files(pool, paths, n, NULL, opt, cb, user, stats, "gr_pool_detect_files");
}

gr_status gr_pool_detect_source(gr_pool *pool, gr_files_next_fn next, const gr_files_options *opt,
                                gr_file_fn cb, void *user, gr_files_stats *stats)
{
    if (!next)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_detect_source: NULL source");
    return run_files(pool, NULL, 0, next, opt, cb, user, stats, "gr_pool_detect_source");
}
