/* `graphrun --input DIR` / `--input-list FILE`: detection over many images, streamed.
 *
 * The engine is built with n_buf = STREAM_INFLIGHT runs in flight (runtime.h, "Runs in flight";
 * fewer when there are fewer batches), and its slots' input buffers (pinned memory on the GPU)
 * are the batch buffers: worker threads decode and letterbox images straight into them (no
 * copy), each with its own gr_image_reader (file and pixel buffers and JPEG decompressor kept
 * between images). Image i belongs to batch i / batch, which lives in slot (i / batch) % n_buf.
 * Images are claimed in order from a shared counter, so the buffers fill front to back.
 *
 * The main thread submits batch k as soon as it is decoded, then waits for batch k-1's run and
 * has it reported: each image's detections decoded (gr_engine_detect_outputs on the outputs
 * kept from that run: pure, any thread) and its JSON line formatted into its own buffer. The
 * images of the batch are claimed one by one by whoever is free: the workers, which take
 * reporting before decoding (between images, and while waiting for a buffer), and the main
 * thread itself, so a batch is reported by up to threads + 1 cores (and by the main thread alone
 * if every worker is busy decoding). The main thread then writes the lines in input order, one
 * flush per batch, and hands the buffer to batch k-1+n_buf. So decoding batches k+1..k+n_buf-2,
 * the copy and compute of batch k and the reporting of batch k-1 overlap, and the main thread's
 * own per-image work is writing a line (~1 us) plus its share of the reporting (detection
 * decoding ~15 us at thresh 0.5 on YOLOv2-tiny, JSON ~10 us: bench/06_stream.c). A worker waits
 * only when it is n_buf batches ahead of the report. The lines are the same bytes whatever the
 * thread count (tests/cli_stream.sh).
 *
 * A file that fails to read or decode gets {"input": ..., "error": ...} and a grey slot in its
 * batch; the rest go on, and the exit status is 3. Throughput is reported from files on disk to
 * detections (the engine build and calibration excluded, then included), with where the time
 * went: the main thread waiting for decoded batches (decoding-bound), for the engine (GPU-bound),
 * getting a batch reported and writing it, its CPU time per image; the workers' time waiting for
 * a buffer and reporting. --fast-decode lets the readers decode large JPEGs DCT-scaled (opt-in;
 * the default input is Darknet's exactly). */
#define _GNU_SOURCE /* sched_getaffinity */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/image/image.h"
#include "tools/cli.h"
#include "tools/results.h"
#include "tools/video.h"

/* Batch buffers (engine slots) in flight: one being reported, one running, the rest filling. */
#define STREAM_INFLIGHT 4

/* ---- the list of images ------------------------------------------------------------------- */

typedef struct path_list {
    char **paths;
    int n, cap;
} path_list;

static int list_add(path_list *l, const char *dir, const char *name, size_t name_len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        char **grown = realloc(l->paths, (size_t)cap * sizeof *grown);
        if (!grown)
            return 0;
        l->paths = grown;
        l->cap = cap;
    }
    size_t dir_len = dir ? strlen(dir) + 1 : 0;
    char *p = malloc(dir_len + name_len + 1);
    if (!p)
        return 0;
    if (dir)
        snprintf(p, dir_len + 1, "%s/", dir);
    memcpy(p + dir_len, name, name_len);
    p[dir_len + name_len] = '\0';
    l->paths[l->n++] = p;
    return 1;
}

static void list_free(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->paths[i]);
    free(l->paths);
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || name[0] == '.')
        return 0;
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return 1;
    return 0;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_directory(const char *dir, path_list *l)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "graphrun: %s: cannot open directory\n", dir);
        return GR_EXIT_INPUT;
    }
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/')
        dir_len--;
    char trimmed[4096];
    snprintf(trimmed, sizeof trimmed, "%.*s", (int)dir_len, dir);
    struct dirent *entry;
    int rc = GR_EXIT_OK;
    while ((entry = readdir(d)) != NULL && rc == GR_EXIT_OK)
        if (is_image_name(entry->d_name) &&
            !list_add(l, trimmed, entry->d_name, strlen(entry->d_name)))
            rc = GR_EXIT_OOM;
    closedir(d);
    if (rc == GR_EXIT_OK && l->n > 1) /* qsort's array may not be NULL, even for 0 items */
        qsort(l->paths, (size_t)l->n, sizeof *l->paths, cmp_path);
    return rc;
}

/* One path per line; blank lines are skipped, a trailing '\r' is dropped. */
static int read_list_file(const char *file, path_list *l)
{
    char *text;
    size_t len;
    gr_status st = gr_read_file(file, (size_t)1 << 30, "image list", &text, &len);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    int rc = GR_EXIT_OK;
    for (size_t start = 0; start < len && rc == GR_EXIT_OK;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len, line_end = end;
        if (line_end > start && text[line_end - 1] == '\r')
            line_end--;
        if (line_end > start && !list_add(l, NULL, text + start, line_end - start))
            rc = GR_EXIT_OOM;
        start = end + 1;
    }
    free(text);
    return rc;
}

/* ---- the pipeline ------------------------------------------------------------------------- */

/* Engine outputs (detection heads) a batch keeps pointers to; YOLO nets have 1 to 3. */
#define STREAM_MAX_OUTPUTS 16

typedef struct image_slot {
    int w, h;            /* original size, to map boxes back */
    double ready;        /* when it was decoded (now_s): its latency runs to its line written */
    double pts;          /* video: the frame's time in seconds */
    gr_image *frame;     /* video: the decoded frame (reused), drawn into for --output */
    char *error;         /* NULL when the image decoded, else its message (any length) */
    size_t nonfinite;    /* NaN/Inf values in its part of the outputs */
    char *line;          /* its record (tools/results.h; open_memstream's buffer), once reported */
    size_t line_len;
    char *output_error;  /* its label file or annotated image could not be written: why */
    gr_status report_status;     /* GR_OK, or why its detections could not be decoded */
    char *report_error;  /* ... with gr_last_error()'s message of the reporting thread */
    /* --decode gpu: the file's bytes when they go to the GPU decoder (jpeg_len 0: the image is
     * in the batch buffer already, decoded on the CPU); the buffer is kept for the next image */
    uint8_t *jpeg;
    size_t jpeg_len, jpeg_cap;
} image_slot;

typedef struct batch_buffer {
    int batch_index;     /* which batch this buffer holds (or is being filled with) */
    int filled;          /* slots of that batch finished */
    int size;            /* images in that batch, once decoded (the main thread's wait_batch) */
    void *input;         /* the engine slot's input: batch images, uint8 HWC or float CHW */
    gr_engine *engine;   /* the pool's engine this buffer is a slot of, and which slot */
    int slot;
    image_slot *slots;
    const float *outputs[STREAM_MAX_OUTPUTS]; /* the slot's outputs after its run's wait */
    /* --decode gpu: the worker that finishes the batch hands its JPEG files to the GPU decoder
     * (gpu_decode_batch) and then sets handed; a failure of the device is kept for the main
     * thread. The arrays are that call's arguments. */
    int handed;
    gr_status handoff_status;
    char *handoff_error;
    const uint8_t **jpeg_data;
    size_t *jpeg_bytes;
    int *jpeg_decoded;
} batch_buffer;

typedef struct pipeline {
    const path_list *list; /* the images, or NULL for a video */
    int total;           /* images, or a video's frames: INT_MAX until its end is decoded */
    /* A video is decoded by one worker at a time (decoder_busy) in frame order; the others
     * report. Its end or error (video_status, video_error) sets total. */
    gr_video_reader *video;
    const char *video_path;
    int decoder_busy;
    gr_status video_status;
    char *video_error;
    gr_video_writer *writer; /* --output of a video: the frames with their boxes */
    const char *output;
    gr_status write_status;
    long long frames_written;
    double *latency;     /* per image, seconds from decoded to its line written */
    int n_latency, cap_latency;
    int batch, net_w, net_h, use_u8;
    int fast_decode;     /* --fast-decode: the readers DCT-scale large JPEGs */
    int gpu_decode;      /* --decode gpu: the workers read JPEG files, the GPU decodes them */
    size_t per_image;    /* elements per image */
    int n_out;           /* engine outputs, and each one's elements per image */
    size_t out_elems[STREAM_MAX_OUTPUTS];
    /* Reporting (decoding detections and formatting the JSON line of one image) runs on any
     * thread: gr_engine_detect_outputs reads only outputs kept from the batch's run. The first
     * engine letterboxes for all (the pool's engines are one engine on several devices). */
    const gr_engine *engine;
    const gr_model *model;
    gr_results *results;  /* the records' format (read only by the reporting threads), their
                             destination (the main thread appends) */
    const char *draw_dir; /* --output DIR: annotated images there, NULL for none */
    int classes;
    float thresh, nms;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int next_image;      /* next image a worker claims */
    int stop;            /* the main thread gave up */
    int finished;        /* the main thread reported the last batch: workers may leave */
    int n_buf;           /* batch buffers = every engine's slots: devices x inflight */
    int n_engines;       /* the pool's: batch k runs on engine k % n_engines */
    batch_buffer buf[STREAM_INFLIGHT * GR_MAX_DEVICES];
    /* The batch being reported (NULL: none): its images are claimed from report_next by whoever
     * is free, workers and the main thread; report_done counts those finished. */
    batch_buffer *reporting;
    int report_next, report_done, report_n;
    /* Where the time goes (seconds; printed at the end, to tell what bounds the run). */
    double workers_blocked; /* summed over workers: waiting for a free batch buffer (lock held) */
    double workers_report;  /* summed over workers: reporting images */
    double main_fill, main_gpu; /* main thread: waiting for a decoded batch, for the engine */
    double main_report, main_report_own, main_write; /* main: from the engine's results to the
                                                        lines ready (of which reporting images
                                                        itself), writing them */
    double main_report_cpu; /* main: thread CPU time from the engine's results to the lines
                               written (its per-image work beside the engine) */
    /* Each stage's busy time (seconds, summed over the threads or devices doing it), for the
     * stage report: which one bounds the run. */
    double stage_read, stage_decode, stage_letterbox; /* the workers */
    double stage_engine;    /* the engines' own time split of each run (gr_engine_timing:
                               conversion, copies, compute), summed over the devices */
    double stage_gpu_decode; /* --decode gpu: the devices' decoding and letterbox time */
    double stage_handoff;   /* --decode gpu: the workers handing batches to the GPU decoder and
                               decoding on the CPU the files it did not take */
    int gpu_decoded;        /* images the GPU decoded */
    int stage_threads;      /* workers */
} pipeline;

/* One image's time in the worker stages (seconds). */
typedef struct stage_times {
    double read, decode, letterbox;
} stage_times;

static int batch_size(const pipeline *p, int batch_index)
{
    int left = p->total - batch_index * p->batch;
    return left < p->batch ? left : p->batch;
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

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static void decode_into(pipeline *p, gr_image_reader *reader, const char *path, void *dst,
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
        /* Boxes map back to the size in the file, also when --fast-decode decoded it smaller. */
        gr_image_reader_source_size(reader, &slot->w, &slot->h);
        st = gr_engine_letterbox(p->engine, im, dst); /* as gr_engine_set_image: any thread */
    }
    slot->ready = now_s();
    /* The stat and the reader's read are the read; the rest of its load is the decode. */
    spent->read = checked - t0 + read;
    spent->decode = t1 - checked - read > 0 ? t1 - checked - read : 0.0;
    spent->letterbox = slot->ready - t1;
    if (st != GR_OK) {
        slot->error = strdup(gr_last_error()); /* NULL only without memory: the line says so */
        if (!slot->error)
            slot->error = strdup("out of memory");
        /* The slot still runs: grey, like the letterbox's border. */
        if (p->use_u8)
            memset(dst, 128, p->per_image);
        else
            for (size_t i = 0; i < p->per_image; i++)
                ((float *)dst)[i] = 0.5f;
    }
}

/* --decode gpu: the file's bytes into slot->jpeg, kept for the GPU decoder when its structure
 * is one the GPU decodes (gr_jpeg_gpu_decodable) and its size within the CPU decoder's limits;
 * returns 0 otherwise (nothing kept: the CPU path decodes it and reports what is wrong with it,
 * exactly as with --decode cpu). */
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

/* The video's next frame into its slot (slot->frame, kept for --output) and letterboxed into
 * dst, exactly as an image of those RGB pixels would be. Returns 1 at the video's end or on an
 * error (p->video_status, p->video_error: the run stops there), 0 with the frame in place. */
static volatile sig_atomic_t interrupted; /* Ctrl-C during a video: end it there */

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

static int decode_frame(pipeline *p, void *dst, image_slot *slot)
{
    int eof = interrupted;
    gr_status st = eof ? GR_OK : gr_video_read(p->video, &slot->frame, &slot->pts, &eof);
    if (st == GR_OK && !eof) {
        slot->w = slot->frame->w;
        slot->h = slot->frame->h;
        st = p->use_u8 ? gr_image_letterbox_u8(slot->frame, p->net_w, p->net_h, dst)
                       : gr_image_letterbox(slot->frame, p->net_w, p->net_h, dst);
        slot->ready = now_s();
    }
    if (st != GR_OK) {
        p->video_status = st;
        p->video_error = strdup(gr_last_error());
    }
    return st != GR_OK || eof;
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

/* --output DIR: the image decoded again at its full size (the reader's buffer holds another
 * image by now, maybe DCT-scaled), its boxes drawn, written as DIR/<stem> with its own extension
 * (.bmp, which the encoder lacks, becomes .png). A failure is kept in slot->output_error. */
static void draw_image(const char *dir, const char *path, const gr_detection *dets, int n,
                       const gr_model *model, image_slot *slot)
{
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *dot = strrchr(name, '.');
    size_t stem = dot && dot != name ? (size_t)(dot - name) : strlen(name);
    const char *ext = dot && strcasecmp(dot, ".bmp") != 0 ? dot : ".png";
    size_t dir_len = strlen(dir);
    char out[4200];
    snprintf(out, sizeof out, "%s%s%.*s%s", dir, dir_len && dir[dir_len - 1] == '/' ? "" : "/",
             (int)stem, name, ext);
    gr_image *im = NULL;
    gr_status st = gr_image_load(path, &im);
    if (st == GR_OK)
        st = gr_image_draw_detections(im, dets, n, model);
    if (st == GR_OK)
        st = gr_image_write(im, out);
    gr_image_destroy(im);
    if (st != GR_OK && !slot->output_error)
        slot->output_error = strdup(gr_last_error());
}

/* The record of image s of batch b into slot->line: its error, or its detections decoded
 * from the outputs the batch kept. Touches only the slot (and reads the batch): any thread. */
static void report_image(const pipeline *p, batch_buffer *b, int s)
{
    image_slot *slot = &b->slots[s];
    int index = b->batch_index * p->batch + s;
    const char *path = p->video ? p->video_path : p->list->paths[index];
    char *text = NULL;
    size_t len = 0;
    gr_detection *dets = NULL;
    int n = 0;
    gr_status st = GR_OK;
    slot->nonfinite = slot->error ? 0 : count_nonfinite(p, b, s);
    if (!slot->error && !slot->nonfinite && p->classes > 0) {
        gr_detect_options dopt;
        gr_detect_options_default(&dopt);
        dopt.thresh = p->thresh;
        dopt.nms = p->nms;
        dopt.image_w = slot->w;
        dopt.image_h = slot->h;
        st = gr_engine_detect_outputs(b->engine, b->outputs, s, &dopt, &dets, &n);
    }
    if (st == GR_OK && p->output && slot->frame)
        st = gr_image_draw_detections(slot->frame, dets, n, p->model);
    FILE *f = st == GR_OK ? open_memstream(&text, &len) : NULL;
    if (f) {
        gr_result_image im = {.path = path, .index = index, .width = slot->w,
                              .height = slot->h, .frame = p->video ? index : -1,
                              .time_s = p->video ? slot->pts : 0.0, .error = slot->error,
                              .nonfinite = slot->nonfinite};
        char err[4400];
        if (gr_results_format(p->results, &im, dets, n, f, err, sizeof err) != GR_EXIT_OK)
            slot->output_error = strdup(err);
        if (fclose(f) != 0 || !text) {
            free(text);
            text = NULL;
        }
    }
    if (st == GR_OK && text && p->draw_dir && !slot->error && !slot->nonfinite)
        draw_image(p->draw_dir, path, dets, n, p->model, slot);
    if (st == GR_OK && !text)
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for its record", path);
    gr_detections_free(dets);
    slot->line = text;
    slot->line_len = text ? len : 0;
    slot->report_status = st;
    if (st != GR_OK)
        slot->report_error = strdup(gr_last_error());
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

/* --decode gpu: the n images of batch b (all read or decoded) to its engine's GPU decoder, by
 * the worker that finished the batch; the JPEG files it does not take decoded here on the CPU
 * from the same bytes, as --decode cpu would decode them (their error on their line). Returns
 * the seconds it took and how many the GPU decoded; b->handoff_status says whether the device
 * failed (the run stops). */
static double gpu_decode_batch(pipeline *p, batch_buffer *b, int n, int *on_gpu)
{
    double t0 = now_s();
    *on_gpu = 0;
    for (int s = 0; s < n; s++) {
        b->jpeg_data[s] = b->slots[s].jpeg_len ? b->slots[s].jpeg : NULL;
        b->jpeg_bytes[s] = b->slots[s].jpeg_len;
    }
    gr_status st = gr_engine_decode_jpegs(b->engine, b->slot, n, b->jpeg_data, b->jpeg_bytes,
                                          b->jpeg_decoded);
    b->handoff_status = st;
    if (st != GR_OK) {
        b->handoff_error = strdup(gr_last_error());
        return now_s() - t0;
    }
    for (int s = 0; s < n; s++) {
        image_slot *slot = &b->slots[s];
        *on_gpu += b->jpeg_decoded[s];
        if (!slot->jpeg_len || b->jpeg_decoded[s])
            continue;
        const char *path = p->list->paths[b->batch_index * p->batch + s];
        uint8_t *dst = (uint8_t *)b->input + (size_t)s * p->per_image;
        gr_image *im = NULL;
        gr_status one = gr_image_decode_mem(slot->jpeg, slot->jpeg_len, path, &im);
        if (one == GR_OK)
            one = gr_engine_letterbox(p->engine, im, dst);
        gr_image_destroy(im);
        if (one != GR_OK) {
            free(slot->error);
            slot->error = strdup(gr_last_error());
            if (!slot->error)
                slot->error = strdup("out of memory");
            memset(dst, 128, p->per_image);
        }
    }
    return now_s() - t0;
}

/* A worker: images are claimed in order and decoded into their batch's buffer; between images,
 * and while waiting for a buffer or for more work, it reports images of the batch being
 * reported (that is what frees buffers). A video's frames are claimed by one worker at a time,
 * which holds the decoder from its claim to the frame in place, so frames land in order. It
 * leaves when the main thread says so. */
static void *worker(void *arg)
{
    pipeline *p = arg;
    /* Without a reader (out of memory) every image this worker claims fails on its line. */
    gr_image_reader *reader = NULL;
    if (!p->video && gr_image_reader_create(&reader) == GR_OK && p->fast_decode)
        gr_image_reader_fast_decode(reader, p->net_w, p->net_h);
    pthread_mutex_lock(&p->lock);
    while (!p->stop && !p->finished) {
        if (report_one(p, &p->workers_report))
            continue;
        if (p->next_image >= p->total || p->decoder_busy) {
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        int i = p->next_image++;
        p->decoder_busy = p->video != NULL;
        int batch_index = i / p->batch, slot = i % p->batch;
        batch_buffer *b = &p->buf[batch_index % p->n_buf];
        while (!p->stop && b->batch_index != batch_index) { /* held by batch_index - n_buf */
            if (report_one(p, &p->workers_report))
                continue;
            double t = now_s();
            pthread_cond_wait(&p->changed, &p->lock);
            p->workers_blocked += now_s() - t;
        }
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->lock);
        size_t elem = p->use_u8 ? 1 : sizeof(float);
        void *dst = (char *)b->input + (size_t)slot * p->per_image * elem;
        free(b->slots[slot].error);
        b->slots[slot].error = NULL;
        int ended = 0;
        stage_times spent = {0.0, 0.0, 0.0};
        if (p->video)
            ended = decode_frame(p, dst, &b->slots[slot]);
        else if (!p->gpu_decode || !read_for_gpu(p->list->paths[i], &b->slots[slot], &spent))
            decode_into(p, reader, p->list->paths[i], dst, &b->slots[slot], &spent);
        pthread_mutex_lock(&p->lock);
        p->stage_read += spent.read;
        p->stage_decode += spent.decode;
        p->stage_letterbox += spent.letterbox;
        if (ended)
            p->total = i; /* batch_size() shrinks: the main thread submits what is there */
        else
            b->filled++;
        p->decoder_busy = 0;
        int n = batch_size(p, batch_index);
        if (p->gpu_decode && b->filled == n) { /* the batch's last image: hand it over */
            pthread_mutex_unlock(&p->lock);
            int on_gpu;
            double spent_s = gpu_decode_batch(p, b, n, &on_gpu);
            pthread_mutex_lock(&p->lock);
            p->stage_handoff += spent_s;
            p->gpu_decoded += on_gpu;
            b->handed = 1;
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    gr_image_reader_destroy(reader);
    return NULL;
}

static void progress(int done, int total, double elapsed)
{
    if (total == INT_MAX) { /* a video: its length is known at its end */
        fprintf(stderr, "\r%d frames, %.0f frames/s ", done, elapsed > 0 ? done / elapsed : 0.0);
        return;
    }
    int width = 30, bar = total ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%.*s] %d/%d images, %.0f images/s ", bar,
            "##############################", width - bar, "                              ",
            done, total, elapsed > 0 ? done / elapsed : 0.0);
}

/* Count image s's failures; say on stderr what its record cannot (coco, csv, yolo-txt have no
 * place for an error) and every file that could not be written (failed[2]). */
static void report_failures(const pipeline *p, const batch_buffer *b, int s, int failed[3])
{
    const image_slot *slot = &b->slots[s];
    if ((slot->error || slot->nonfinite) && !gr_results_carries_errors(p->results)) {
        const char *path = p->video ? p->video_path
                                   : p->list->paths[b->batch_index * p->batch + s];
        if (slot->error)
            fprintf(stderr, "graphrun: %s\n", slot->error);
        else
            fprintf(stderr, "graphrun: %s: its outputs hold %zu non-finite values (NaN/Inf)\n",
                    path, slot->nonfinite);
    }
    if (slot->output_error)
        fprintf(stderr, "graphrun: %s\n", slot->output_error);
    failed[0] += slot->error != NULL;
    failed[1] += slot->nonfinite != 0;
    failed[2] += slot->output_error != NULL;
}

/* --output of a video: the frame with its boxes, in order; the writer opens at the first frame
 * (its size, the input's frame rate). */
static int write_frame(pipeline *p, const image_slot *slot)
{
    if (!p->output || !slot->frame)
        return GR_EXIT_OK;
    gr_status st = GR_OK;
    if (!p->writer) {
        st = gr_video_writer_open(p->output, slot->frame->w, slot->frame->h,
                                  gr_video_fps(p->video), GR_VIDEO_CODEC_DEFAULT, &p->writer);
        if (st == GR_OK && strcmp(gr_video_writer_codec(p->writer), "mjpeg") == 0)
            fprintf(stderr, "graphrun: no H.264 encoder in this FFmpeg: %s gets MJPEG\n",
                    p->output);
    }
    if (st == GR_OK)
        st = gr_video_writer_write(p->writer, slot->frame);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    p->frames_written++;
    return GR_EXIT_OK;
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

/* Wait for the run of batch b->batch_index (on its buffer's engine and slot), have its images
 * reported (by the workers and this thread), write their lines in order and flush. Returns an
 * exit code (failures of the engine or of the results stream stop everything; a bad image only
 * counts in failed[0], one with NaN/Inf outputs in failed[1], a file not written in failed[2]). */
static int report_batch(pipeline *p, batch_buffer *b, int failed[3])
{
    gr_engine *engine = b->engine;
    double t0 = now_s();
    gr_status st = gr_engine_wait(engine, b->slot);
    double t1 = now_s();
    p->main_gpu += t1 - t0;
    if (st != GR_OK)
        return gr_cli_fail(st, "run");
    gr_timing split;
    if (gr_engine_timing(engine, &split) == GR_OK)
        p->stage_engine += (split.convert_us + split.copy_us + split.compute_us) * 1e-6;
    double decode_us = 0.0;
    if (p->gpu_decode && gr_engine_jpeg_decoder(engine, &decode_us))
        p->stage_gpu_decode += decode_us * 1e-6;
    for (int k = 0; k < p->n_out; k++)
        if ((st = gr_engine_output(engine, k, &b->outputs[k])) != GR_OK)
            return gr_cli_fail(st, "run");
    int n_images = b->size;
    double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    pthread_mutex_lock(&p->lock);
    p->reporting = b;
    p->report_next = p->report_done = 0;
    p->report_n = n_images;
    pthread_cond_broadcast(&p->changed);
    while (p->report_done < n_images)
        if (!report_one(p, &p->main_report_own))
            pthread_cond_wait(&p->changed, &p->lock);
    p->reporting = NULL;
    pthread_mutex_unlock(&p->lock);
    double t2 = now_s();
    p->main_report += t2 - t1;
    int rc = GR_EXIT_OK;
    for (int s = 0; s < n_images; s++) {
        image_slot *slot = &b->slots[s];
        if (rc == GR_EXIT_OK && slot->report_status != GR_OK) {
            gr_fail(slot->report_status, "%s", slot->report_error ? slot->report_error : "?");
            rc = gr_cli_fail(slot->report_status, "decoding detections");
        }
        if (rc == GR_EXIT_OK) {
            rc = gr_results_append(p->results, slot->line, slot->line_len);
            report_failures(p, b, s, failed);
            if (rc == GR_EXIT_OK)
                rc = write_frame(p, slot);
        }
        free(slot->line);
        free(slot->report_error);
        free(slot->output_error);
        slot->line = slot->report_error = slot->output_error = NULL;
    }
    if (rc == GR_EXIT_OK)
        rc = gr_results_flush(p->results); /* a full disk or a closed pipe stops the run */
    double written = now_s();
    for (int s = 0; s < n_images && rc == GR_EXIT_OK; s++)
        record_latency(p, written - b->slots[s].ready);
    p->main_write += now_s() - t2;
    p->main_report_cpu += clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return rc;
}

/* Hand batch k's buffer to batch k + n_buf (or stop the workers after a failure). */
static void release_buffer(pipeline *p, batch_buffer *b, int k, int rc)
{
    pthread_mutex_lock(&p->lock);
    b->batch_index = k + p->n_buf;
    b->filled = 0;
    b->handed = 0;
    if (rc != GR_EXIT_OK)
        p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

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

/* What a pipeline reads: a list of images, or a video (and where its annotated copy goes). */
typedef struct stream_source {
    const path_list *list;
    gr_video_reader *video;
    const char *video_path;
} stream_source;

/* --decode: the GPU decodes a folder's JPEGs when asked (gpu) or able (auto: a GPU engine and a
 * decoder that opens on every device, and no --fast-decode, which is the CPU decoder's); one
 * line on stderr says which decoder runs. Returns an exit code. */
static int choose_decoder(pipeline *p, const gr_cli_options *o)
{
    p->gpu_decode = 0;
    if (p->video)
        return GR_EXIT_OK;
    int want = o->decode == GR_CLI_DECODE_GPU;
    const char *why = o->decode == GR_CLI_DECODE_CPU ? "--decode cpu"
                      : !p->use_u8                   ? "a CPU engine"
                      : o->fast_decode                ? "--fast-decode"
                                                      : NULL;
    if (want && why) {
        fprintf(stderr, "graphrun: --decode gpu: not with %s\n", why);
        return GR_EXIT_USAGE;
    }
    const char *name = NULL;
    /* Every slot's decoder opened now (a hardware decoder's handle takes milliseconds), before
     * the clock starts and the workers hand batches over. */
    for (int k = 0; !why && k < p->n_buf; k++) {
        gr_status st = gr_engine_decode_jpegs(p->buf[k].engine, p->buf[k].slot, 0, NULL, NULL,
                                              NULL);
        if (st != GR_OK) {
            if (want)
                return gr_cli_fail(st, "--decode gpu");
            why = gr_last_error();
        }
        name = gr_engine_jpeg_decoder(p->buf[k].engine, NULL);
    }
    if (!why && name) {
        size_t n = (size_t)p->batch;
        for (int k = 0; k < p->n_buf; k++) {
            batch_buffer *b = &p->buf[k];
            b->jpeg_data = calloc(n, sizeof *b->jpeg_data);
            b->jpeg_bytes = calloc(n, sizeof *b->jpeg_bytes);
            b->jpeg_decoded = calloc(n, sizeof *b->jpeg_decoded);
            if (!b->jpeg_data || !b->jpeg_bytes || !b->jpeg_decoded) {
                fprintf(stderr, "graphrun: out of memory for batches of %d images\n", p->batch);
                return GR_EXIT_OOM;
            }
        }
        p->gpu_decode = 1;
        fprintf(stderr, "graphrun: JPEG decoding on the GPU: %s (other files: libjpeg-turbo, "
                        "libpng on the CPU)\n", name);
    } else {
        fprintf(stderr, "graphrun: JPEG decoding on the CPU: libjpeg-turbo (%s)\n",
                why ? why : "no GPU decoder");
    }
    return GR_EXIT_OK;
}

/* The pipeline of a pool: its engines' slots' input buffers are the batch buffers, buffer k
 * slot k / devices of engine k % devices, so that batch k (in buffer k % n_buf) runs on engine
 * k % devices: round robin over the devices, then over each one's slots. */
static int pipeline_init(pipeline *p, const gr_cli_options *o, const stream_source *src,
                         const gr_model *model, gr_pool *pool, const gr_model_info *info)
{
    gr_engine *engine = gr_pool_engine(pool, 0);
    *p = (pipeline){.list = src->list, .batch = o->batch, .net_w = info->width,
                    .net_h = info->height};
    p->total = src->list ? src->list->n : INT_MAX;
    p->video = src->video;
    p->video_path = src->video_path;
    p->output = src->video && o->output && o->output[0] ? o->output : NULL;
    p->use_u8 = gr_engine_image_u8(engine); /* the slots' input type gr_engine_letterbox fills */
    p->fast_decode = o->fast_decode;
    p->per_image = (size_t)info->channels * (size_t)info->width * (size_t)info->height;
    p->n_engines = gr_pool_devices(pool);
    p->n_buf = p->n_engines * gr_engine_inflight(engine);
    p->engine = engine;
    p->model = gr_cli_model(model, engine);
    p->classes = info->classes;
    p->thresh = o->thresh;
    p->nms = o->nms;
    p->n_out = gr_engine_output_count(engine);
    if (p->n_out > STREAM_MAX_OUTPUTS) {
        fprintf(stderr, "graphrun: %d network outputs (at most %d in folder mode)\n", p->n_out,
                STREAM_MAX_OUTPUTS);
        return GR_EXIT_FAILURE;
    }
    for (int k = 0; k < p->n_out; k++) {
        gr_tensor_desc d;
        gr_engine_output_desc(engine, k, &d);
        p->out_elems[k] = (size_t)d.c * (size_t)d.h * (size_t)d.w;
    }
    for (int k = 0; k < p->n_buf; k++) {
        size_t bytes;
        p->buf[k].engine = gr_pool_engine(pool, k % p->n_engines);
        p->buf[k].slot = k / p->n_engines;
        gr_status st = gr_engine_slot_input(p->buf[k].engine, p->buf[k].slot, p->use_u8,
                                            &p->buf[k].input, &bytes);
        if (st != GR_OK)
            return gr_cli_fail(st, "the engine's input buffers");
        p->buf[k].batch_index = k;
        if (!(p->buf[k].slots = calloc((size_t)o->batch, sizeof(image_slot)))) {
            fprintf(stderr, "graphrun: out of memory for %d batches of %d images\n", p->n_buf,
                    o->batch);
            return GR_EXIT_OOM;
        }
    }
    return choose_decoder(p, o);
}

static void pipeline_free(pipeline *p)
{
    for (int k = 0; k < p->n_buf; k++)
        for (int s = 0; p->buf[k].slots && s < p->batch; s++) {
            free(p->buf[k].slots[s].error);
            free(p->buf[k].slots[s].jpeg);
            gr_image_destroy(p->buf[k].slots[s].frame);
        }
    for (int k = 0; k < p->n_buf; k++) {
        free(p->buf[k].jpeg_data);
        free(p->buf[k].jpeg_bytes);
        free(p->buf[k].jpeg_decoded);
        free(p->buf[k].handoff_error);
    }
    free(p->video_error);
    free(p->latency);
    for (int k = 0; k < p->n_buf; k++)
        free(p->buf[k].slots);
}

/* Wait until batch k is decoded: 1, or 0 when there is no batch k (the images, or the video,
 * ended before it; a video's end is known only once decoded). */
static int wait_batch(pipeline *p, int k)
{
    batch_buffer *b = &p->buf[k % p->n_buf];
    double t = now_s();
    pthread_mutex_lock(&p->lock);
    while (batch_size(p, k) > 0 &&
           (b->filled < batch_size(p, k) || (p->gpu_decode && !b->handed)))
        pthread_cond_wait(&p->changed, &p->lock);
    int more = batch_size(p, k) > 0;
    if (more) /* (no batch k: its buffer may still hold batch k - 1, whose size stays) */
        b->size = batch_size(p, k); /* read under the lock: a video's end changes p->total */
    pthread_mutex_unlock(&p->lock);
    p->main_fill += now_s() - t;
    return more;
}

/* Report batch k (its run waited for), free its buffer, show the progress. */
static int report_next(pipeline *p, int k, int *failed, int show_progress, double t0)
{
    batch_buffer *done = &p->buf[k % p->n_buf];
    int rc = report_batch(p, done, failed);
    release_buffer(p, done, k, rc);
    if (show_progress)
        progress(k * p->batch + done->size, p->list ? p->list->n : INT_MAX, now_s() - t0);
    return rc;
}

/* Submit batch k once decoded, then report batch k - devices (after the last batch: the rest,
 * in order), so that each device has a run queued while the one before it is reported.
 * failed[0]: images that could not be read, failed[1]: images with NaN/Inf outputs, failed[2]:
 * label files or annotated images not written. */
static int main_loop(pipeline *p, int *failed, double t0)
{
    int show_progress = isatty(STDERR_FILENO), rc = GR_EXIT_OK, reported = 0, k;
    for (k = 0; rc == GR_EXIT_OK && wait_batch(p, k); k++) {
        batch_buffer *b = &p->buf[k % p->n_buf];
        gr_status st = b->handoff_status;
        if (st != GR_OK)
            gr_fail(st, "JPEG decoding on the GPU: %s", b->handoff_error ? b->handoff_error : "?");
        else
            st = gr_engine_submit(b->engine, b->slot);
        if (st != GR_OK) {
            rc = gr_cli_fail(st, "run");
            release_buffer(p, b, k, rc);
            break;
        }
        if (k - reported >= p->n_engines)
            rc = report_next(p, reported++, failed, show_progress, t0);
    }
    while (rc == GR_EXIT_OK && reported < k)
        rc = report_next(p, reported++, failed, show_progress, t0);
    if (show_progress)
        fputc('\n', stderr);
    return rc;
}

/* Start up to `threads` workers; returns how many started. */
static int start_workers(pipeline *p, pthread_t *tids, int threads)
{
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker, p) != 0)
            break;
    if (started == 0)
        fprintf(stderr, "graphrun: cannot start a decoding thread\n");
    return started;
}

static void stop_workers(pipeline *p, pthread_t *tids, int started)
{
    pthread_mutex_lock(&p->lock); /* every batch reported (or given up): the workers leave */
    p->finished = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
}

/* Images/s a stage allows: `lanes` threads or devices doing it, `busy` seconds of it in all. */
static double stage_rate(int n, double busy, int lanes)
{
    return busy > 0 ? n * (double)lanes / busy : HUGE_VAL;
}

/* Which stage bounds the run: each stage's busy time per image, and the images/s it allows with
 * the threads or devices that do it. The worker stages (read, decode, letterbox) and the
 * reporting (detections/JSON, on the workers and the main thread) share the same cores, so their
 * bound is their sum over those threads; the bounding stage named is the engine, the main
 * thread's writing, or the largest of the CPU stages when the cores bound. */
static void print_stages(const pipeline *p, int threads, double elapsed)
{
    int n = p->total;
    if (n <= 0 || p->video)
        return;
    double report = p->workers_report + p->main_report_own;
    double cpu = p->stage_read + p->stage_decode + p->stage_letterbox + p->stage_handoff + report;
    int cores = usable_cores(), cpu_lanes = threads + 1 < cores ? threads + 1 : cores;
    double cpu_rate = stage_rate(n, cpu, cpu_lanes);
    double engine_rate = stage_rate(n, p->stage_engine, p->n_engines);
    double write_rate = stage_rate(n, p->main_write, 1);
    /* --decode gpu: the devices' decoding (the JPEG engines and the letterbox, beside the runs) */
    double gpu_decode_rate = stage_rate(n, p->stage_gpu_decode, p->n_engines);
    const char *bound = "the engine";
    double slowest = engine_rate;
    if (write_rate < slowest)
        slowest = write_rate, bound = "writing";
    if (p->gpu_decode && gpu_decode_rate < slowest)
        slowest = gpu_decode_rate, bound = "GPU decode";
    if (cpu_rate < slowest) {
        double worst = p->stage_read;
        bound = "read";
        if (p->stage_decode > worst)
            worst = p->stage_decode, bound = "decode";
        if (p->stage_letterbox > worst)
            worst = p->stage_letterbox, bound = "letterbox";
        if (p->stage_handoff > worst)
            worst = p->stage_handoff, bound = "hand-off to the GPU decoder";
        if (report > worst)
            bound = "detections/JSON";
    }
    char gpu[256] = "";
    if (p->gpu_decode)
        snprintf(gpu, sizeof gpu, ", hand-off to the GPU decoder %.0f (workers), GPU decode %.0f "
                                  "(%d of %d images; allows %.4g images/s)",
                 1e6 * p->stage_handoff / n, 1e6 * p->stage_gpu_decode / n, p->gpu_decoded, n,
                 gpu_decode_rate);
    fprintf(stderr, "graphrun: stages, busy us per image: read %.0f, decode %.0f, letterbox %.0f "
                    "(%d workers), engine %.0f (%d device%s)%s, detections/JSON %.0f, writing %.1f; "
                    "bound: %s (the CPU stages allow %.4g images/s on %d threads, the engine "
                    "%.4g, writing %.4g; measured %.4g)\n",
            1e6 * p->stage_read / n, 1e6 * p->stage_decode / n, 1e6 * p->stage_letterbox / n,
            threads, 1e6 * p->stage_engine / n, p->n_engines, p->n_engines == 1 ? "" : "s", gpu,
            1e6 * report / n, 1e6 * p->main_write / n, bound, cpu_rate, cpu_lanes, engine_rate,
            write_rate, elapsed > 0 ? n / elapsed : 0.0);
}

static void print_summary(const pipeline *p, const int *failed, int started, double elapsed,
                          double main_cpu, double t_start)
{
    int n = p->total, bad = failed[0] + failed[1];
    const char *noun = p->video ? "frames" : "images";
    if (failed[2])
        fprintf(stderr, "graphrun: %d output files could not be written (above)\n", failed[2]);
    fprintf(stderr, "graphrun: %d %s in %.2f s: %.1f %s/s from %s to detections%s", n, noun,
            elapsed, elapsed > 0 ? n / elapsed : 0.0, noun,
            p->video ? "the video" : "files on disk", bad ? "; " : "\n");
    if (bad)
        fprintf(stderr, "%d failed (%s)\n", bad,
                gr_results_carries_errors(p->results) ? "their lines hold the error" : "above");
    double total = now_s() - t_start;
    fprintf(stderr, "graphrun: %.2f s with the %s and the engine build (%.1f %s/s)\n", total,
            p->video ? "opening" : "listing", total > 0 ? n / total : 0.0, noun);
    /* Latency: from the image's pixels in the batch buffer to its line flushed (batching and the
     * runs in flight trade it for throughput). */
    gr_cli_sort(p->latency, p->n_latency);
    fprintf(stderr, "graphrun: latency per %s from decoded to its line written: p50 %.1f ms, "
                    "p99 %.1f ms\n", p->video ? "frame" : "image",
            1e3 * gr_cli_percentile(p->latency, p->n_latency, 50.0),
            1e3 * gr_cli_percentile(p->latency, p->n_latency, 99.0));
    /* Decoding-bound: the main thread mostly waits for batches and the workers never for
     * buffers. GPU-bound: the main thread waits for the engine. Report-bound (decoding
     * detections and formatting JSON, now spread over every thread): the main thread spends its
     * time getting batches reported and the workers wait for buffers. */
    fprintf(stderr, "graphrun: main thread %.2f s waiting for decoded batches, %.2f s for the "
                    "engine, %.2f s getting batches reported (%.2f s decoding detections and "
                    "formatting JSON itself), %.2f s writing JSON%s; CPU time %.0f us per "
                    "image, %.0f us of it reporting and writing; %d workers %.2f s waiting for "
                    "a free buffer, %.2f s decoding detections and formatting JSON (in "
                    "total)\n",
            p->main_fill, p->main_gpu, p->main_report, p->main_report_own, p->main_write,
            p->output ? " and encoding the --output video" : "", 1e6 * main_cpu / n, 1e6 * p->main_report_cpu / n, started, p->workers_blocked,
            p->workers_report);
    print_stages(p, started, elapsed);
}

/* A video's end: its error (after the lines of the frames before it), no frames at all, or
 * --output closed (its trailer written) and named. Returns rc or the first failure. */
static int finish_video(pipeline *p, int rc)
{
    if (!p->video)
        return rc;
    const char *codec = p->writer ? gr_video_writer_codec(p->writer) : "";
    char codec_name[64];
    snprintf(codec_name, sizeof codec_name, "%s", codec);
    gr_status st = gr_video_writer_close(p->writer);
    p->writer = NULL;
    if (rc != GR_EXIT_OK)
        return rc;
    if (p->video_error) {
        gr_fail(p->video_status, "%s", p->video_error);
        return gr_cli_fail(p->video_status, NULL);
    }
    if (p->total == 0) {
        fprintf(stderr, "graphrun: %s: no video frames\n", p->video_path);
        return GR_EXIT_INPUT;
    }
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    if (p->output)
        fprintf(stderr, "graphrun: wrote %s (%lld frames, %s)\n", p->output, p->frames_written,
                codec_name);
    return GR_EXIT_OK;
}

static int run_pipeline(const gr_cli_options *o, const stream_source *src, gr_model *model,
                        gr_pool *pool, const gr_model_info *info, gr_results *results,
                        double t_start)
{
    pipeline p;
    int threads = o->threads > 0 ? o->threads : usable_cores();
    if (src->list && threads > src->list->n)
        threads = src->list->n;
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    int rc = pipeline_init(&p, o, src, model, pool, info);
    p.results = results;
    p.draw_dir = !src->video && o->format != GR_FORMAT_YOLO_TXT && o->output && o->output[0]
                     ? o->output
                     : NULL;
    if (rc == GR_EXIT_OK && !tids) {
        fprintf(stderr, "graphrun: out of memory for %d threads\n", threads);
        rc = GR_EXIT_OOM;
    }
    if (rc != GR_EXIT_OK) {
        pipeline_free(&p);
        free(tids);
        return rc;
    }
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.changed, NULL);
    if (src->list)
        fprintf(stderr,
                "graphrun: %d images, %d decoding threads, batches of %d, %d in flight%s%s\n",
                src->list->n, threads, o->batch, p.n_buf,
                p.n_engines > 1 ? " over the devices round robin" : "",
                p.fast_decode ? "; --fast-decode: JPEGs of 2x the input or more decoded scaled"
                              : "");
    else
        fprintf(stderr, "graphrun: %s: %.3g frames/s; frames decoded in order by one thread at "
                        "a time, %d threads, batches of %d, %d in flight\n",
                src->video_path, gr_video_fps(src->video), threads, o->batch, p.n_buf);
    int failed[3] = {0, 0, 0};
    double t0 = now_s(), main_cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    int started = start_workers(&p, tids, threads);
    rc = started ? main_loop(&p, failed, t0) : GR_EXIT_FAILURE;
    stop_workers(&p, tids, started);
    double elapsed = now_s() - t0, main_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - main_cpu0;
    pthread_cond_destroy(&p.changed);
    pthread_mutex_destroy(&p.lock);
    rc = finish_video(&p, rc);
    if (rc == GR_EXIT_OK) {
        print_summary(&p, failed, started, elapsed, main_cpu, t_start);
        /* NaN/Inf outputs (exit 1, as with one image) before unreadable files and outputs not
         * written (exit 3). */
        rc = failed[1] ? GR_EXIT_FAILURE : failed[0] || failed[2] ? GR_EXIT_INPUT : GR_EXIT_OK;
    }
    pipeline_free(&p);
    free(tids);
    return rc;
}

/* Flags that act on one run's images or outputs mean nothing here: refused, never ignored. */
static int refuse_single_image_flags(const gr_cli_options *o)
{
    const char *flag = o->save_output      ? "--save-output"
                       : o->runs_given     ? "--runs"
                       : o->find_overflow  ? "--find-overflow"
                                           : NULL;
    if (flag) {
        fprintf(stderr, "graphrun: %s applies to images given as --input FILE, not to --input DIR "
                        "or --input-list\n", flag);
        return GR_EXIT_USAGE;
    }
    /* A folder named like an image is almost certainly --output FILE of the one-image mode. */
    const char *dot = o->output ? strrchr(o->output, '.') : NULL;
    if (dot && !strchr(dot, '/') && !gr_cli_is_directory(o->output) &&
        (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
         !strcasecmp(dot, ".bmp"))) {
        fprintf(stderr, "graphrun: --output '%s': with --input DIR or --input-list, --output names "
                        "the folder of annotated images (or of yolo-txt labels)\n", o->output);
        return GR_EXIT_USAGE;
    }
    return GR_EXIT_OK;
}

/* Devices --device asks for, before the pool says (gpu:all: those visible). */
static int devices_asked(const gr_cli_options *o)
{
    int visible = gr_cuda_device_count();
    if (o->all_devices)
        return visible > 0 ? visible : 1;
    return o->n_devices > 0 ? o->n_devices : 1;
}

/* The pool (one engine per --device), each engine with STREAM_INFLIGHT slots (no more than its
 * share of the batches; n_images < 0: not known, a video), or 2 where those do not fit. */
static int open_engine(gr_cli_options *o, int n_images, gr_model **model, gr_pool **pool,
                       gr_model_info *info)
{
    gr_cli_options streaming = *o;
    int devices = devices_asked(o);
    int n_batches = n_images > 0   ? (n_images + o->batch - 1) / o->batch
                    : n_images < 0 ? STREAM_INFLIGHT * devices
                                   : 1;
    int per_device = (n_batches + devices - 1) / devices;
    streaming.inflight = per_device < STREAM_INFLIGHT ? per_device : STREAM_INFLIGHT;
    int rc = gr_cli_open_pool(&streaming, model, pool, info);
    /* Each slot is an instance of the engine: where four do not fit, two still overlap decoding
     * with the runs (what this mode did before it had four). */
    if (rc == GR_EXIT_OOM && streaming.inflight > 2) {
        fprintf(stderr, "graphrun: retrying with 2 runs in flight instead of %d\n",
                streaming.inflight);
        streaming.inflight = 2;
        rc = gr_cli_open_pool(&streaming, model, pool, info);
    }
    if (rc == GR_EXIT_OK)
        rc = gr_cli_check_image_input(gr_pool_engine(*pool, 0), o->cfg ? o->cfg : info->name);
    o->batch = streaming.batch; /* --engine: the file's */
    o->precision = streaming.precision;
    return rc;
}

/* The results writer: jsonl by default; yolo-txt into --output DIR. */
static int open_outputs(const gr_cli_options *o, const gr_model *model, const gr_model_info *info,
                        int frames, gr_results **results)
{
    gr_results_options ro = {.format = o->format ? (gr_result_format)o->format : GR_FORMAT_JSONL,
                             .frames = frames,
                             .save_conf = o->save_conf, .model = model, .model_name = info->name,
                             .synthetic_weights = info->synthetic_weights,
                             .precision = gr_precision_name(o->precision)};
    if (ro.format == GR_FORMAT_YOLO_TXT)
        ro.label_dir = o->output; /* given: gr_cli_check_format */
    return gr_results_open(&ro, results);
}

int gr_cli_detect_stream(const gr_cli_options *o)
{
    if (o->n_inputs > (o->input_list ? 0 : 1)) {
        fprintf(stderr, "graphrun: a directory or --input-list is the only input of a run "
                        "(no other --input)\n");
        return GR_EXIT_USAGE;
    }
    int rc = refuse_single_image_flags(o);
    /* --output DIR (annotated images or yolo-txt labels) made before the engine's work. */
    if (rc == GR_EXIT_OK && o->output && o->output[0])
        rc = gr_cli_make_dir(o->output);
    if (rc != GR_EXIT_OK)
        return rc;
    double t_start = now_s();
    path_list list = {0};
    rc = o->input_list ? read_list_file(o->input_list, &list) : read_directory(o->inputs[0], &list);
    stream_source src = {.list = &list};
    if (rc == GR_EXIT_OK && list.n == 0) {
        fprintf(stderr, "graphrun: %s: no images (.jpg, .jpeg, .png, .bmp)\n",
                o->input_list ? o->input_list : o->inputs[0]);
        rc = GR_EXIT_INPUT;
    }
    gr_model *model = NULL;
    gr_pool *pool = NULL;
    gr_results *results = NULL;
    gr_model_info info;
    gr_cli_options opened = *o; /* with --engine, its batch and precision */
    if (rc == GR_EXIT_OK)
        rc = open_engine(&opened, list.n, &model, &pool, &info);
    if (rc == GR_EXIT_OK)
        rc = open_outputs(&opened, gr_cli_model(model, gr_pool_engine(pool, 0)), &info, 0,
                          &results);
    if (rc == GR_EXIT_OK)
        rc = run_pipeline(&opened, &src, model, pool, &info, results, t_start);
    int closed = gr_results_close(results);
    rc = rc == GR_EXIT_OK || rc == GR_EXIT_INPUT ? (closed != GR_EXIT_OK ? closed : rc) : rc;
    gr_pool_destroy(pool);
    gr_model_destroy(model);
    list_free(&list);
    return rc;
}

/* ---- video: the same pipeline, its frames decoded in order by one worker at a time ---------- */

int gr_cli_wants_video(const gr_cli_options *o)
{
    if (o->input_list || o->n_inputs == 0 || o->input_type == GR_CLI_INPUT_IMAGE)
        return 0;
    return o->input_type == GR_CLI_INPUT_VIDEO ||
           (!gr_cli_is_directory(o->inputs[0]) && gr_video_is_input(o->inputs[0]));
}

/* A video is the only input; the single-image flags are refused; --output is a video file. */
static int check_video_flags(const gr_cli_options *o)
{
    if (o->n_inputs != 1 || o->input_list) {
        fprintf(stderr, "graphrun: a video is the only input of a run (one --input, no "
                        "--input-list)\n");
        return GR_EXIT_USAGE;
    }
    const char *flag = o->save_output      ? "--save-output"
                       : o->runs_given     ? "--runs"
                       : o->find_overflow  ? "--find-overflow"
                       : o->fast_decode    ? "--fast-decode"
                       : o->decode == GR_CLI_DECODE_GPU ? "--decode gpu"
                                           : NULL;
    if (flag) {
        fprintf(stderr, "graphrun: %s applies to images, not to a video\n", flag);
        return GR_EXIT_USAGE;
    }
    if (o->output && o->output[0] && !gr_video_has_extension(o->output)) {
        fprintf(stderr, "graphrun: --output %s: a video's boxes are drawn into a video file (.mp4, "
                        ".mkv, .avi, .mov, .webm ...)\n", o->output);
        return GR_EXIT_USAGE;
    }
    return GR_EXIT_OK;
}

int gr_cli_detect_video(const gr_cli_options *o)
{
    int rc = check_video_flags(o);
    if (rc != GR_EXIT_OK)
        return rc;
    double t_start = now_s();
    gr_video_reader *video = NULL;
    gr_status st = gr_video_open(o->inputs[0], &video);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    gr_model *model = NULL;
    gr_pool *pool = NULL;
    gr_results *results = NULL;
    gr_model_info info;
    gr_cli_options opened = *o; /* with --engine, its batch and precision */
    rc = open_engine(&opened, -1, &model, &pool, &info);
    stream_source src = {.video = video, .video_path = o->inputs[0]};
    if (rc == GR_EXIT_OK)
        rc = open_outputs(&opened, gr_cli_model(model, gr_pool_engine(pool, 0)), &info, 1,
                          &results);
    /* A camera or a stream has no end: Ctrl-C ends the run as the video's end would (the frames
     * so far reported, --output finished so that it plays). */
    interrupted = 0;
    void (*previous)(int) = signal(SIGINT, on_interrupt);
    if (rc == GR_EXIT_OK)
        rc = run_pipeline(&opened, &src, model, pool, &info, results, t_start);
    signal(SIGINT, previous);
    int closed = gr_results_close(results);
    rc = rc == GR_EXIT_OK || rc == GR_EXIT_INPUT ? (closed != GR_EXIT_OK ? closed : rc) : rc;
    if (interrupted)
        fprintf(stderr, "graphrun: interrupted: the video ended there\n");
    gr_pool_destroy(pool);
    gr_model_destroy(model);
    gr_video_close(video);
    return rc;
}
