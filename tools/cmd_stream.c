/* `graphrun --input DIR` / `--input-list FILE`, and a video's frames: detection over many images,
 * streamed through the library's folder pipeline (runtime/files.c: gr_pool_detect_files over the
 * listed files, gr_pool_detect_source over a video's frames), and one record per image written in
 * input order.
 *
 * The pool is built with STREAM_INFLIGHT runs in flight per device (runtime.h, "Runs in flight";
 * fewer when there are fewer batches); its slots' input buffers are the batch buffers. This file
 * lists the images, checks the flags, says what runs (the decoder, threads, buffers), and gives
 * the pipeline two callbacks: the record of an image is formatted (tools/results.h: its
 * detections, or its error) and its --output DIR image drawn in the prepare hook, which the
 * pipeline calls on whichever of its threads reports the image (the workers and the main
 * thread), into its own buffer; the main thread's callback then appends the records in input
 * order, one flush per batch, counts the failures, and writes a video's --output frames. So the
 * main thread's own per-image work is writing a line (~1 us) plus its share of the reporting
 * (detection decoding ~15 us at thresh 0.5 on YOLOv2-tiny, JSON ~10 us: bench/06_stream.c), and
 * the lines are the same bytes whatever the thread count (tests/cli_stream.sh).
 *
 * A file that fails to read or decode gets {"input": ..., "error": ...} (the pipeline ran it
 * grey); the rest go on, and the exit status is 3. A device that fails mid-run (a GPU's CUDA
 * error) loses only its runs in flight, each file an error record, and the rest run on the
 * other devices: exit 1 (runtime.h, "A device that fails"). Any other failure of the engine, of
 * decoding detections or of the results stream stops the run. Throughput is reported from files on disk to
 * detections (the engine build and calibration excluded, then included), with where the time
 * went (gr_files_stats): the main thread waiting for decoded batches (decoding-bound), for the
 * engine (GPU-bound), getting a batch reported and writing it, its CPU time per image; the
 * workers' time waiting for a buffer and reporting; each stage's busy time. --fast-decode lets
 * the readers decode large JPEGs DCT-scaled (opt-in; the default input is Darknet's exactly). */
#define _POSIX_C_SOURCE 200809L /* open_memstream, strdup */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "runtime/files.h"
#include "tools/cli.h"
#include "tools/results.h"
#include "tools/video.h"

/* Batch buffers (engine slots) per device: one being reported, one running, the rest filling. */
#define STREAM_INFLIGHT 4

/* ---- records: formatted by the pipeline's threads, written in order by the main thread ----- */

/* What the prepare hook leaves for the main thread's callback, one per image between being read
 * and written: a ring of buffers x batch entries, image i's at i % ring_n (runtime.h: at most that
 * many images are between being claimed and delivered). A video's frame lives there too. */
typedef struct record {
    char *line;          /* its record (tools/results.h; open_memstream's buffer) */
    size_t line_len;
    char *output_error;  /* its label file or annotated image could not be written: why */
    gr_status status;    /* GR_OK, or why its record could not be made (the run stops) */
    char *error;
    gr_image *frame;     /* a video's frame (the buffer reused), drawn into for --output */
    double pts;          /* its time in seconds */
} record;

typedef struct stream {
    const gr_cli_options *o;
    const gr_cli_image_list *list;   /* the images, or NULL for a video */
    int total;               /* images (INT_MAX for a video: known at its end) */
    /* A video: read by the pipeline's workers one at a time (next_frame); its end or error
     * (video_status, video_error) ends the run. */
    gr_video_reader *video;
    const char *video_path;
    gr_status video_status;
    char *video_error;
    gr_video_writer *writer; /* --output of a video: the frames with their boxes */
    const char *output;
    long long frames_written;
    const char *draw_dir;    /* --output DIR: annotated images there, NULL for none */
    const gr_model *model;
    gr_results *results;     /* the records' format (read only by prepare), their destination
                                (the main thread appends) */
    record *ring;
    int ring_n;
    int failed[3];           /* unreadable images, NaN/Inf outputs, output files not written */
    int rc;                  /* the exit code that stopped the run */
    int started, show_progress;
    double t0;
} stream;

/* --output DIR: the image decoded again at its full size (the reader's buffer holds another
 * image by now, maybe DCT-scaled), its boxes drawn, written as DIR/<stem> with its own extension
 * (.bmp, which the encoder lacks, becomes .png). A failure is kept in rec->output_error. */
static void draw_image(const char *dir, const char *path, const gr_detection *dets, int n,
                       const gr_model *model, record *rec)
{
    char out[4200];
    gr_cli_drawn_name(dir, path, out, sizeof out);
    gr_image *im = NULL;
    gr_status st = gr_image_load(path, &im);
    if (st == GR_OK)
        st = gr_image_draw_detections(im, dets, n, model);
    if (st == GR_OK)
        st = gr_image_write(im, out);
    gr_image_destroy(im);
    if (st != GR_OK && !rec->output_error)
        rec->output_error = strdup(gr_last_error());
}


/* The prepare hook: image r's record into its ring entry (its error, or its detections), its
 * --output DIR image drawn, a video frame's boxes drawn into it. A failed run or detection
 * decoding makes no record: the callback stops there. Touches only the entry: any thread. */
static void prepare_record(void *user, const gr_file_result *r)
{
    stream *s = user;
    record *rec = &s->ring[r->index % s->ring_n];
    if (r->failure == GR_FILE_FAILED_RUN || r->failure == GR_FILE_FAILED_DETECT)
        return;
    const char *path = s->video ? s->video_path : r->path;
    char *text = NULL;
    size_t len = 0;
    gr_status st = GR_OK;
    if (s->output && rec->frame)
        st = gr_image_draw_detections(rec->frame, r->detections, r->n_detections, s->model);
    FILE *f = st == GR_OK ? open_memstream(&text, &len) : NULL;
    if (f) {
        gr_result_image im = {.path = path, .index = r->index, .width = r->width,
                              .height = r->height, .frame = s->video ? r->index : -1,
                              .time_s = s->video ? rec->pts : 0.0, .error = r->error,
                              .nonfinite = r->nonfinite};
        char err[4400];
        int rc = gr_results_format(s->results, &im, r->detections, r->n_detections, f, err,
                                   sizeof err);
        if (rc != GR_EXIT_OK && rc != GR_EXIT_OOM)
            rec->output_error = strdup(err);
        if (fclose(f) != 0 || !text || rc == GR_EXIT_OOM) {
            free(text);
            text = NULL;
        }
    }
    if (st == GR_OK && text && s->draw_dir && !r->error && !r->nonfinite)
        draw_image(s->draw_dir, path, r->detections, r->n_detections, s->model, rec);
    rec->line = text;
    rec->line_len = text ? len : 0;
    if (st == GR_OK && !text) {
        char message[4200];
        snprintf(message, sizeof message, "%s: out of memory for its record", path);
        rec->error = strdup(message);
        st = GR_ERR_OUT_OF_MEMORY;
    } else if (st != GR_OK) {
        rec->error = strdup(gr_last_error());
    }
    rec->status = st;
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


/* Count image r's failures; say on stderr what its record cannot (coco, csv, yolo-txt have no
 * place for an error) and every file that could not be written (failed[2]). */
static void report_failures(stream *s, const gr_file_result *r, const record *rec)
{
    if ((r->error || r->nonfinite) && !gr_results_carries_errors(s->results)) {
        if (r->error)
            fprintf(stderr, "graphrun: %s\n", r->error);
        else
            fprintf(stderr, "graphrun: %s: its outputs hold %zu non-finite values (NaN/Inf)\n",
                    s->video ? s->video_path : r->path, r->nonfinite);
    }
    if (rec->output_error)
        fprintf(stderr, "graphrun: %s\n", rec->output_error);
    s->failed[0] += r->error != NULL;
    s->failed[1] += r->nonfinite != 0;
    s->failed[2] += rec->output_error != NULL;
}

/* --output of a video: the frame with its boxes, in order; the writer opens at the first frame
 * (its size, the input's frame rate). */
static int write_frame(stream *s, const record *rec)
{
    if (!s->output || !rec->frame)
        return GR_EXIT_OK;
    gr_status st = GR_OK;
    if (!s->writer) {
        st = gr_video_writer_open(s->output, rec->frame->w, rec->frame->h,
                                  gr_video_fps(s->video), GR_VIDEO_CODEC_DEFAULT, &s->writer);
        if (st == GR_OK && strcmp(gr_video_writer_codec(s->writer), "mjpeg") == 0)
            fprintf(stderr, "graphrun: no H.264 encoder in this FFmpeg: %s gets MJPEG\n",
                    s->output);
    }
    if (st == GR_OK)
        st = gr_video_writer_write(s->writer, rec->frame);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    s->frames_written++;
    return GR_EXIT_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The callback, on the main thread in input order: image r's record appended, its failures
 * counted and said, a video frame written; the results flushed at the end of each batch (a full
 * disk or a closed pipe stops the run), with the progress. A failure of the engine, of decoding
 * detections or of writing stops the run (s->rc says how). */
static int write_record(void *user, const gr_file_result *r)
{
    stream *s = user;
    record *rec = &s->ring[r->index % s->ring_n];
    int rc = GR_EXIT_OK;
    if (r->failure == GR_FILE_FAILED_RUN) {
        fprintf(stderr, "graphrun: run: %s\n", r->error);
        rc = gr_cli_exit_code(r->status);
    } else if (r->failure == GR_FILE_FAILED_DETECT || rec->status != GR_OK) {
        fprintf(stderr, "graphrun: decoding detections: %s\n",
                rec->status != GR_OK ? (rec->error ? rec->error : "?") : r->error);
        rc = gr_cli_exit_code(rec->status != GR_OK ? rec->status : r->status);
    } else {
        rc = gr_results_append(s->results, rec->line, rec->line_len);
        report_failures(s, r, rec);
        if (rc == GR_EXIT_OK)
            rc = write_frame(s, rec);
    }
    free(rec->line);
    free(rec->output_error);
    free(rec->error);
    rec->line = rec->output_error = rec->error = NULL;
    rec->status = GR_OK;
    if (rc == GR_EXIT_OK && r->batch_end) {
        rc = gr_results_flush(s->results);
        if (s->show_progress)
            progress(r->index + 1, s->total, now_s() - s->t0);
    }
    s->rc = rc;
    return rc != GR_EXIT_OK;
}

/* A video's next frame into its ring entry (the frame buffer reused): 0 at its end, on an error
 * (s->video_status, s->video_error: the run stops there) or after Ctrl-C. */
static volatile sig_atomic_t interrupted; /* Ctrl-C during a video: end it there */

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

static int next_frame(void *user, int index, const gr_image **image)
{
    stream *s = user;
    record *rec = &s->ring[index % s->ring_n];
    int eof = interrupted;
    gr_status st = eof ? GR_OK : gr_video_read(s->video, &rec->frame, &rec->pts, &eof);
    if (st != GR_OK) {
        s->video_status = st;
        s->video_error = strdup(gr_last_error());
    }
    *image = rec->frame;
    return st == GR_OK && !eof;
}

/* What runs, before the first image: the decoder (with why the CPU decodes), then the images,
 * threads and buffers. */
static void say_started(void *user, const gr_files_stats *st)
{
    stream *s = user;
    const gr_cli_options *o = s->o;
    s->started = 1;
    s->t0 = now_s();
    if (s->video) {
        fprintf(stderr, "graphrun: %s: %.3g frames/s; frames decoded in order by one thread at "
                        "a time, %d threads, batches of %d, %d in flight\n",
                s->video_path, gr_video_fps(s->video), st->threads, st->batch, st->buffers);
        return;
    }
    if (st->gpu_decode)
        fprintf(stderr, "graphrun: JPEG decoding on the GPU: %s (other files: libjpeg-turbo, "
                        "libpng on the CPU)\n", st->decoder);
    else
        fprintf(stderr, "graphrun: JPEG decoding on the CPU: libjpeg-turbo (%s)\n",
                o->decode == GR_CLI_DECODE_CPU ? "--decode cpu"
                : strcmp(st->decoder, "fast_decode") == 0 ? "--fast-decode"
                                                           : st->decoder);
    fprintf(stderr, "graphrun: %d images, %d decoding threads, batches of %d, %d in flight%s%s\n",
            s->list->n, st->threads, st->batch, st->buffers,
            st->devices > 1 ? " over the devices round robin" : "",
            o->fast_decode ? "; --fast-decode: JPEGs of 2x the input or more decoded scaled" : "");
}

/* ---- the summary -------------------------------------------------------------------------- */

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
static void print_stages(const gr_files_stats *st)
{
    int n = st->images, threads = st->threads, devices = st->devices;
    double report = st->workers_report_s + st->main_report_own_s;
    double cpu = st->read_s + st->decode_s + st->letterbox_s + st->handoff_s + report;
    int cpu_lanes = threads + 1 < st->cores ? threads + 1 : st->cores;
    double cpu_rate = stage_rate(n, cpu, cpu_lanes);
    double engine_rate = stage_rate(n, st->engine_s, devices);
    double write_rate = stage_rate(n, st->main_deliver_s, 1);
    /* --decode gpu: the devices' decoding (the JPEG engines and the letterbox, beside the runs) */
    double gpu_decode_rate = stage_rate(n, st->gpu_decode_s, devices);
    const char *bound = "the engine";
    double slowest = engine_rate;
    if (write_rate < slowest)
        slowest = write_rate, bound = "writing";
    if (st->gpu_decode && gpu_decode_rate < slowest)
        slowest = gpu_decode_rate, bound = "GPU decode";
    if (cpu_rate < slowest) {
        double worst = st->read_s;
        bound = "read";
        if (st->decode_s > worst)
            worst = st->decode_s, bound = "decode";
        if (st->letterbox_s > worst)
            worst = st->letterbox_s, bound = "letterbox";
        if (st->handoff_s > worst)
            worst = st->handoff_s, bound = "hand-off to the GPU decoder";
        if (report > worst)
            bound = "detections/JSON";
    }
    char gpu[256] = "";
    if (st->gpu_decode)
        snprintf(gpu, sizeof gpu, ", hand-off to the GPU decoder %.0f (workers), GPU decode %.0f "
                                  "(%d of %d images; allows %.4g images/s)",
                 1e6 * st->handoff_s / n, 1e6 * st->gpu_decode_s / n, st->gpu_decoded, n,
                 gpu_decode_rate);
    fprintf(stderr, "graphrun: stages, busy us per image: read %.0f, decode %.0f, letterbox %.0f "
                    "(%d workers), engine %.0f (%d device%s)%s, detections/JSON %.0f, writing %.1f; "
                    "bound: %s (the CPU stages allow %.4g images/s on %d threads, the engine "
                    "%.4g, writing %.4g; measured %.4g)\n",
            1e6 * st->read_s / n, 1e6 * st->decode_s / n, 1e6 * st->letterbox_s / n, threads,
            1e6 * st->engine_s / n, devices, devices == 1 ? "" : "s", gpu, 1e6 * report / n,
            1e6 * st->main_deliver_s / n, bound, cpu_rate, cpu_lanes, engine_rate, write_rate,
            st->elapsed_s > 0 ? n / st->elapsed_s : 0.0);
}

static void print_summary(const stream *s, const gr_files_stats *st, double t_start)
{
    int n = st->images, bad = s->failed[0] + s->failed[1];
    double elapsed = st->elapsed_s;
    const char *noun = s->video ? "frames" : "images";
    if (s->failed[2])
        fprintf(stderr, "graphrun: %d output files could not be written (above)\n", s->failed[2]);
    fprintf(stderr, "graphrun: %d %s in %.2f s: %.1f %s/s from %s to detections%s", n, noun,
            elapsed, elapsed > 0 ? n / elapsed : 0.0, noun,
            s->video ? "the video" : "files on disk", bad ? "; " : "\n");
    if (bad)
        fprintf(stderr, "%d failed (%s)\n", bad,
                gr_results_carries_errors(s->results) ? "their lines hold the error" : "above");
    if (st->devices_failed)
        fprintf(stderr, "graphrun: %s; %d of %d devices failed mid-run, %d %s lost with them%s\n",
                st->failed_device_error, st->devices_failed, st->devices, st->files_lost, noun,
                st->devices_failed < st->devices ? ", the others ran the rest" : "");
    if (st->batches_moved)
        fprintf(stderr, "graphrun: %d batches decoded for a failed device ran on another\n",
                st->batches_moved);
    double total = now_s() - t_start;
    fprintf(stderr, "graphrun: %.2f s with the %s and the engine build (%.1f %s/s)\n", total,
            s->video ? "opening" : "listing", total > 0 ? n / total : 0.0, noun);
    /* Latency: from the image's pixels in the batch buffer to its line flushed (batching and the
     * runs in flight trade it for throughput). */
    fprintf(stderr, "graphrun: latency per %s from decoded to its line written: p50 %.1f ms, "
                    "p99 %.1f ms\n", s->video ? "frame" : "image",
            1e3 * st->latency_p50_s, 1e3 * st->latency_p99_s);
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
            st->main_wait_decoded_s, st->main_wait_engine_s, st->main_report_s,
            st->main_report_own_s, st->main_deliver_s,
            s->output ? " and encoding the --output video" : "", 1e6 * st->main_cpu_s / n,
            1e6 * st->main_deliver_cpu_s / n, st->threads, st->workers_blocked_s,
            st->workers_report_s);
    if (n > 0 && !s->video)
        print_stages(st);
}

/* A video's end: its error (after the lines of the frames before it), no frames at all, or
 * --output closed (its trailer written) and named. Returns rc or the first failure. */
static int finish_video(stream *s, int frames, int rc)
{
    if (!s->video)
        return rc;
    const char *codec = s->writer ? gr_video_writer_codec(s->writer) : "";
    char codec_name[64];
    snprintf(codec_name, sizeof codec_name, "%s", codec);
    gr_status st = gr_video_writer_close(s->writer);
    s->writer = NULL;
    if (rc != GR_EXIT_OK)
        return rc;
    if (s->video_error) {
        fprintf(stderr, "graphrun: %s\n", s->video_error);
        return gr_cli_exit_code(s->video_status);
    }
    if (frames == 0) {
        fprintf(stderr, "graphrun: %s: no video frames\n", s->video_path);
        return GR_EXIT_INPUT;
    }
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    if (s->output)
        fprintf(stderr, "graphrun: wrote %s (%lld frames, %s)\n", s->output, s->frames_written,
                codec_name);
    return GR_EXIT_OK;
}

/* --decode: the GPU decodes a folder's JPEGs when asked (gpu) or able (auto: a GPU engine and a
 * decoder that opens on every device, and no --fast-decode, which is the CPU decoder's); the
 * pipeline decides and says which (say_started). --decode gpu where it cannot be is refused here
 * before any image, the decoders' own failure named as --decode gpu's. */
static int check_decode(const gr_cli_options *o, gr_pool *pool)
{
    if (o->decode != GR_CLI_DECODE_GPU)
        return GR_EXIT_OK;
    const char *why = !gr_engine_image_u8(gr_pool_engine(pool, 0)) ? "a CPU engine"
                      : o->fast_decode                              ? "--fast-decode"
                                                                    : NULL;
    if (why) {
        fprintf(stderr, "graphrun: --decode gpu: not with %s\n", why);
        return GR_EXIT_USAGE;
    }
    gr_status st = gr_pool_open_jpeg_decoders(pool);
    return st == GR_OK ? GR_EXIT_OK : gr_cli_fail(st, "--decode gpu");
}

/* The images of `list` (or the video's frames) through the pool, their records to `results`,
 * the summary on stderr. Returns the exit code. */
static int run_stream(stream *s, gr_pool *pool, double t_start)
{
    const gr_cli_options *o = s->o;
    gr_engine *first = gr_pool_engine(pool, 0);
    s->ring_n = gr_pool_devices(pool) * gr_engine_inflight(first) * o->batch;
    s->ring = calloc((size_t)s->ring_n, sizeof *s->ring);
    if (!s->ring) {
        fprintf(stderr, "graphrun: out of memory for %d records\n", s->ring_n);
        return GR_EXIT_OOM;
    }
    s->show_progress = isatty(STDERR_FILENO);
    gr_files_options fo;
    gr_files_options_default(&fo);
    fo.threads = o->threads;
    fo.thresh = o->thresh;
    fo.nms = o->nms;
    fo.decode = o->decode == GR_CLI_DECODE_CPU   ? GR_FILES_DECODE_CPU
                : o->decode == GR_CLI_DECODE_GPU ? GR_FILES_DECODE_GPU
                                                 : GR_FILES_DECODE_AUTO;
    fo.fast_decode = o->fast_decode;
    fo.prepare = prepare_record;
    fo.started = say_started;
    gr_files_stats st = {.struct_size = sizeof st};
    gr_status status = s->list ? gr_pool_detect_files(pool, (const char *const *)s->list->paths,
                                                      s->list->n, &fo, write_record, s, &st)
                               : gr_pool_detect_source(pool, next_frame, &fo, write_record, s,
                                                       &st);
    if (s->show_progress && s->started)
        fputc('\n', stderr);
    int rc = status != GR_OK ? gr_cli_fail(status, NULL) : s->rc;
    rc = finish_video(s, st.images, rc);
    if (rc == GR_EXIT_OK) {
        print_summary(s, &st, t_start);
        /* Files lost to a failed device and NaN/Inf outputs (exit 1, as with one image) before
         * unreadable files and outputs not written (exit 3). */
        rc = s->failed[1] || st.files_lost ? GR_EXIT_FAILURE
             : s->failed[0] || s->failed[2] ? GR_EXIT_INPUT
                                            : GR_EXIT_OK;
    }
    for (int i = 0; i < s->ring_n; i++) {
        free(s->ring[i].line);
        free(s->ring[i].output_error);
        free(s->ring[i].error);
        gr_image_destroy(s->ring[i].frame);
    }
    free(s->ring);
    free(s->video_error);
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
    if (rc != GR_EXIT_OK)
        return rc;
    double t_start = now_s();
    gr_cli_image_list list = {0};
    rc = o->input_list ? gr_cli_read_image_list(o->input_list, &list)
                      : gr_cli_read_image_dir(o->inputs[0], &list);
    if (rc == GR_EXIT_OK && list.n == 0) {
        fprintf(stderr, "graphrun: %s: no images (.jpg, .jpeg, .png, .bmp)\n",
                o->input_list ? o->input_list : o->inputs[0]);
        rc = GR_EXIT_INPUT;
    }
    /* --output DIR (drawn images, yolo-txt labels) must not be the folder of an input. */
    if (rc == GR_EXIT_OK && o->output && o->output[0])
        rc = gr_cli_check_output("--output", o->output, 1, (const char *const *)list.paths,
                                 list.n);
    if (rc == GR_EXIT_OK && o->output && o->output[0])
        rc = gr_cli_check_output("--output", o->output, 1,
                                 o->input_list ? &o->input_list : o->inputs, 1);
    if (rc == GR_EXIT_OK && o->output && o->output[0])
        rc = gr_cli_make_dir(o->output);
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
        rc = check_decode(&opened, pool);
    if (rc == GR_EXIT_OK) {
        stream s = {.o = &opened, .list = &list, .total = list.n, .results = results,
                    .model = gr_cli_model(model, gr_pool_engine(pool, 0))};
        s.draw_dir = opened.format != GR_FORMAT_YOLO_TXT && o->output && o->output[0] ? o->output
                                                                                      : NULL;
        rc = run_stream(&s, pool, t_start);
    }
    int closed = gr_results_close(results);
    rc = rc == GR_EXIT_OK || rc == GR_EXIT_INPUT ? (closed != GR_EXIT_OK ? closed : rc) : rc;
    gr_pool_destroy(pool);
    gr_model_destroy(model);
    gr_cli_image_list_free(&list);
    return rc;
}

/* ---- video: the same pipeline, its frames read in order by one worker at a time ------------- */

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
    if (o->output && o->output[0] && o->format != GR_FORMAT_YOLO_TXT &&
        !gr_video_has_extension(o->output)) {
        fprintf(stderr, "graphrun: --output %s: a video's boxes are drawn into a video file (.mp4, "
                        ".mkv, .avi, .mov, .webm ...)\n", o->output);
        return GR_EXIT_USAGE;
    }
    return GR_EXIT_OK;
}

int gr_cli_detect_video(const gr_cli_options *o)
{
    int rc = check_video_flags(o);
    /* --output: the video drawn, or with yolo-txt the folder of its frames' label files */
    int labels = o->format == GR_FORMAT_YOLO_TXT;
    if (rc == GR_EXIT_OK && o->output && o->output[0])
        rc = gr_cli_check_output("--output", o->output, labels, o->inputs, 1);
    if (rc != GR_EXIT_OK)
        return rc;
    double t_start = now_s();
    gr_video_reader *video = NULL;
    gr_status st = gr_video_open(o->inputs[0], (double)o->io_timeout, &video);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    gr_model *model = NULL;
    gr_pool *pool = NULL;
    gr_results *results = NULL;
    gr_model_info info;
    gr_cli_options opened = *o; /* with --engine, its batch and precision */
    rc = open_engine(&opened, -1, &model, &pool, &info);
    if (rc == GR_EXIT_OK)
        rc = open_outputs(&opened, gr_cli_model(model, gr_pool_engine(pool, 0)), &info, 1,
                          &results);
    /* A camera or a stream has no end: Ctrl-C ends the run as the video's end would (the frames
     * so far reported, --output finished so that it plays). */
    interrupted = 0;
    void (*previous)(int) = signal(SIGINT, on_interrupt);
    if (rc == GR_EXIT_OK) {
        stream s = {.o = &opened, .total = INT_MAX, .video = video, .video_path = o->inputs[0],
                    .output = o->output && o->output[0] && !labels ? o->output : NULL,
                    .results = results,
                    .model = gr_cli_model(model, gr_pool_engine(pool, 0))};
        rc = run_stream(&s, pool, t_start);
    }
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

