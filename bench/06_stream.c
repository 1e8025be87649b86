/* The CPU side of `graphrun --input DIR` without a GPU: what each stage costs per image, and how
 * many images per second the decoding workers deliver at 1, 2, 4, ... threads.
 *
 *   ./build/06_stream [DIR [max_threads [min_images [CFG]]]]   (DIR default data/, from the source
 *                                                               root)
 *
 * Stages (one thread, every image of DIR in turn until >= min_images, default 200):
 *   read       the file into memory (gr_read_file)
 *   decode     JPEG/PNG/BMP to RGB (gr_image_decode_mem)
 *   letterbox  gr_image_letterbox_u8 to 416x416 (what the streaming workers run), and the
 *              reference implementation it must equal byte for byte (checked here too)
 *   worker     all three through the streaming workers' gr_image_reader (buffers and the JPEG
 *              handle kept between images), and the same with --fast-decode (JPEGs of twice the
 *              letterboxed size or more decoded at 1/2..1/8 scale; the same as without for smaller)
 *   detect     gr_engine_detect for one image of YOLOv2-tiny VOC (the built-in "yolo", synthetic
 *              weights, CPU engine run once on dog.jpg; or CFG, synthetic weights, whose one
 *              head must be VOC's 13x13 [region] as "before" assumes), at the CLI's default
 *              thresh 0.5 and at thresh 0.005 (hundreds of boxes: NMS and JSON at their worst);
 *              next to it the arithmetic it replaced ("before": the region reference activation
 *              of the whole head, then gr_detect_heads on it), whose results must be identical
 *              (checked)
 *   json       the JSON line of those detections (the CLI's gr_cli_json_detections) into an
 *              open_memstream buffer, as the folder mode's reporting threads format it
 *   write      that line written to /dev/null: what is left on the folder mode's main thread per
 *              image
 * detect + json run on any of the pipeline's threads (runtime/files.c: workers and main; json in
 * the CLI's prepare hook) once a batch's run is done; write on the main thread; read + decode +
 * letterbox on the workers. Then the workers' loop (gr_image_reader + letterbox into a batch
 * buffer, images claimed from a shared counter) at 1, 2, 4, ... max_threads threads: images/s,
 * next to the loop the workers ran before (gr_image_load + the reference letterbox, allocating
 * per image). The engine is not in it: on the GPU it overlaps with both. Stage costs are CPU
 * time of the timing thread; the threaded loop gives wall images/s and the process's CPU time
 * per image (cores / that = the images/s the workers could reach if they scaled perfectly). */
#define _GNU_SOURCE /* sched_getaffinity */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "base/base.h"
#include "runtime/detect.h"
#include "runtime/image/image.h"
#include "tools/cli.h"

#define NET 416

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Stages are timed in this thread's CPU time, not wall time: on a shared machine (the 2-core
 * build machine runs other jobs) wall time counts the time other processes hold the core. */
static double now_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static int is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && name[0] != '.' &&
           (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png") ||
            !strcasecmp(dot, ".bmp"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **list_images(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **paths = NULL;
    int cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_image(e->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(paths, (size_t)cap * sizeof *grown);
            if (!grown)
                break;
            paths = grown;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        paths[*n] = malloc(len);
        if (!paths[*n])
            break;
        snprintf(paths[*n], len, "%s/%s", dir, e->d_name);
        (*n)++;
    }
    closedir(d);
    if (*n > 1)
        qsort(paths, (size_t)*n, sizeof *paths, cmp_str);
    return paths;
}

typedef struct workers {
    char **paths;
    int n_paths, total;
    int old_way;  /* gr_image_load + the reference letterbox, what the workers ran before */
    atomic_int next;
    atomic_int failed;
} workers;

static void *worker(void *arg)
{
    workers *w = arg;
    gr_image_reader *reader = NULL;
    uint8_t *out = malloc((size_t)NET * NET * 3);
    if (gr_image_reader_create(&reader) != GR_OK || !out) {
        atomic_fetch_add(&w->failed, 1);
        free(out);
        return NULL;
    }
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->total;) {
        const char *path = w->paths[i % w->n_paths];
        gr_status st;
        if (w->old_way) {
            gr_image *im = NULL;
            st = gr_image_load(path, &im);
            if (st == GR_OK)
                st = gr_image_letterbox_reference_u8(im, GR_PREPROCESS_LETTERBOX, NET, NET, out);
            gr_image_destroy(im);
        } else {
            const gr_image *im;
            st = gr_image_reader_load(reader, path, &im);
            if (st == GR_OK)
                st = gr_image_letterbox_u8(im, NET, NET, out);
        }
        if (st != GR_OK)
            atomic_fetch_add(&w->failed, 1);
    }
    gr_image_reader_destroy(reader);
    free(out);
    return NULL;
}

/* gr_engine_detect as it was before the raw-head decoders: the region reference activation of
 * the whole head of image 0 (YOLOv2-tiny VOC's [region]), then the activated-head decoder. */
static gr_status detect_before(const gr_engine *engine, const gr_detect_options *opt,
                               gr_detection **dets, int *n)
{
    static const float anchors[10] = {1.08f, 1.19f, 3.42f, 4.41f, 6.63f,
                                      11.38f, 9.42f, 5.11f, 16.62f, 10.52f};
    gr_op_params p;
    gr_op_params_default(GR_OP_REGION, &p);
    p.classes = 20;
    p.coords = 4;
    p.num = 5;
    p.softmax = 1;
    memcpy(p.anchors, anchors, sizeof anchors);
    gr_shape s = {125, 13, 13};
    const float *raw;
    GR_TRY(gr_engine_output(engine, 0, &raw));
    float *act = gr_malloc(gr_shape_elems(s) * sizeof *act, "activated head");
    if (!act)
        return GR_ERR_OUT_OF_MEMORY;
    gr_op_ref(&p, NULL, &raw, &s, 1, act, s, 1);
    gr_head_output head = {&p, act, s, 0};
    gr_status st = gr_detect_heads(&head, 1, NET, NET, opt, dets, n);
    free(act);
    return st;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "data";
    cpu_set_t set; /* the cores this process may use, as runtime/files.c counts them */
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    int max_threads = argc > 2 ? atoi(argv[2]) : (int)(cores > 0 ? cores : 1);
    int min_images = argc > 3 ? atoi(argv[3]) : 200;
    const char *detect_cfg = argc > 4 ? argv[4] : NULL; /* NULL: the built-in "yolo" */
    if (max_threads < 1 || max_threads > 1024 || min_images < 1) {
        fprintf(stderr, "usage: 06_stream [DIR [max_threads [min_images [CFG]]]]\n");
        return 2;
    }
    int n = 0;
    char **paths = list_images(dir, &n);
    if (!paths || n == 0) {
        fprintf(stderr, "06_stream: %s: no images\n", dir);
        return 1;
    }
    int reps = (min_images + n - 1) / n, total = reps * n;
    printf("%d images in %s, %d passes (%d images); %ld usable cores (%ld online)\n", n, dir,
           reps, total, cores, sysconf(_SC_NPROCESSORS_ONLN));

    /* ---- stages, one thread ---- */
    double t_read = 0, t_decode = 0, t_lb = 0, t_ref = 0, t_worker = 0, t_fast = 0;
    size_t plane = (size_t)NET * NET * 3;
    uint8_t *fast = malloc(plane), *ref = malloc(plane);
    gr_image_reader *reader = NULL, *fast_reader = NULL;
    if (!fast || !ref || gr_image_reader_create(&reader) != GR_OK ||
        gr_image_reader_create(&fast_reader) != GR_OK) {
        fprintf(stderr, "06_stream: out of memory\n");
        return 1;
    }
    gr_image_reader_fast_decode(fast_reader, GR_PREPROCESS_LETTERBOX, NET, NET);
    int mismatches = 0, failures = 0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n; i++) {
            char *bytes;
            size_t len;
            gr_image *im = NULL;
            double t0 = now_s();
            gr_status st = gr_read_file(paths[i], GR_MAX_IMAGE_FILE_BYTES, "image", &bytes, &len);
            double t1 = now_s();
            if (st == GR_OK)
                st = gr_image_decode_mem((const uint8_t *)bytes, len, paths[i], &im);
            double t2 = now_s();
            if (st == GR_OK)
                st = gr_image_letterbox_u8(im, NET, NET, fast);
            double t3 = now_s();
            if (st == GR_OK)
                st = gr_image_letterbox_reference_u8(im, GR_PREPROCESS_LETTERBOX, NET, NET, ref);
            double t4 = now_s();
            const gr_image *rim;
            if (st == GR_OK)
                st = gr_image_reader_load(reader, paths[i], &rim);
            if (st == GR_OK)
                st = gr_image_letterbox_u8(rim, NET, NET, fast);
            double t5 = now_s();
            if (st == GR_OK && memcmp(fast, ref, plane) != 0)
                mismatches++;
            if (st == GR_OK)
                st = gr_image_reader_load(fast_reader, paths[i], &rim);
            int fw = 0, fh = 0; /* placed by the file's size, as the folder mode does */
            gr_image_reader_source_size(fast_reader, &fw, &fh);
            if (st == GR_OK) /* inexact: not compared */
                st = gr_image_preprocess_as_u8(rim, fw, fh, GR_PREPROCESS_LETTERBOX, NET, NET, ref);
            t_fast += now_s() - t5;
            if (st != GR_OK) {
                failures++;
                fprintf(stderr, "06_stream: %s\n", gr_last_error());
            }
            t_read += t1 - t0;
            t_decode += t2 - t1;
            t_lb += t3 - t2;
            t_ref += t4 - t3;
            t_worker += t5 - t4;
            free(bytes);
            gr_image_destroy(im);
        }
    }
    gr_image_reader_destroy(reader);
    gr_image_reader_destroy(fast_reader);
    printf("per image, 1 thread (us): read %.0f  decode %.0f  letterbox_u8 %.0f (reference %.0f, "
           "%d differ)  worker (reader+letterbox) %.0f  with --fast-decode %.0f\n",
           1e6 * t_read / total, 1e6 * t_decode / total, 1e6 * t_lb / total, 1e6 * t_ref / total,
           mismatches, 1e6 * t_worker / total, 1e6 * t_fast / total);

    /* ---- detection decoding and JSON, the main thread's per-image work ---- */
    gr_model *model = NULL;
    gr_engine *engine = NULL;
    gr_model_options mo;
    gr_model_options_default(&mo);
    if (detect_cfg) {
        mo.builtin = NULL;
        mo.cfg_path = detect_cfg;
    }
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_image *dog = NULL;
    uint8_t *dog_in = malloc(plane);
    FILE *devnull = fopen("/dev/null", "w");
    if (gr_model_load(&mo, &model) == GR_OK && gr_engine_build(model, &eo, &engine) == GR_OK &&
        gr_image_load("data/dog.jpg", &dog) == GR_OK && dog_in && devnull &&
        gr_image_letterbox_u8(dog, NET, NET, dog_in) == GR_OK &&
        gr_engine_run_u8(engine, dog_in) == GR_OK) {
      for (int pass = 0; pass < 2; pass++) {
        gr_detect_options dopt;
        gr_detect_options_default(&dopt);
        dopt.thresh = pass == 0 ? 0.5f : 0.005f;
        dopt.nms = 0.45f;
        dopt.image_w = dog->w;
        dopt.image_h = dog->h;
        int iters = 300, n_dets = 0, differ = 0;
        double t_det = 0, t_before = 0, t_json = 0, t_write = 0;
        for (int it = 0; it < iters; it++) {
            gr_detection *dets = NULL, *old = NULL;
            int n_old = 0;
            double t0 = now_s();
            if (gr_engine_detect(engine, 0, &dopt, &dets, &n_dets) != GR_OK) {
                fprintf(stderr, "06_stream: detect: %s\n", gr_last_error());
                break;
            }
            double t1 = now_s();
            if (detect_before(engine, &dopt, &old, &n_old) != GR_OK) {
                fprintf(stderr, "06_stream: detect (before): %s\n", gr_last_error());
                gr_detections_free(dets);
                break;
            }
            double t2 = now_s();
            differ += n_old != n_dets || memcmp(old, dets, (size_t)n_dets * sizeof *dets) != 0;
            char *line = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&line, &len);
            if (f) {
                fprintf(f, "{\"input\": ");
                gr_cli_json_string(f, "data/dog.jpg");
                fprintf(f, ", \"width\": %d, \"height\": %d, ", dog->w, dog->h);
                gr_cli_json_detections(f, model, dets, n_dets, "");
                fprintf(f, "}\n");
                fclose(f);
            }
            double t3 = now_s();
            if (line)
                fwrite(line, 1, len, devnull);
            double t4 = now_s();
            t_det += t1 - t0;
            t_before += t2 - t1;
            t_json += t3 - t2;
            t_write += t4 - t3;
            free(line);
            gr_detections_free(dets);
            gr_detections_free(old);
        }
        printf("per image (us), thresh %.3f: detect %.1f (before: %.1f, %d of %d differ)  json "
               "%.1f  write %.1f  (%d detections kept)\n",
               (double)dopt.thresh, 1e6 * t_det / iters, 1e6 * t_before / iters, differ, iters,
               1e6 * t_json / iters, 1e6 * t_write / iters, n_dets);
        mismatches += differ;
      }
    } else {
        fprintf(stderr, "06_stream: detection stage skipped: %s\n", gr_last_error());
    }
    if (devnull)
        fclose(devnull);
    free(dog_in);
    gr_image_destroy(dog);
    gr_engine_destroy(engine);
    gr_model_destroy(model);

    /* ---- the workers' loop at 1, 2, 4, ... threads ---- */
    for (int threads = 1, old_way = 1;;) {
        workers w = {.paths = paths, .n_paths = n, .total = total, .old_way = old_way};
        atomic_init(&w.next, 0);
        atomic_init(&w.failed, 0);
        pthread_t tids[1024];
        double t0 = clock_s(CLOCK_MONOTONIC), cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        int started = 0;
        for (; started < threads; started++)
            if (pthread_create(&tids[started], NULL, worker, &w) != 0)
                break;
        for (int t = 0; t < started; t++)
            pthread_join(tids[t], NULL);
        double s = clock_s(CLOCK_MONOTONIC) - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        printf("workers %-6s %3d threads: %7.0f images/s wall (%d images in %.3f s), CPU %.0f us "
               "per image, %d failed\n", old_way ? "before" : "now", started, total / s, total, s,
               1e6 * cpu / total, atomic_load(&w.failed));
        if (!old_way) {
            if (threads >= max_threads)
                break;
            threads = threads * 2 > max_threads ? max_threads : threads * 2;
        }
        old_way = !old_way;
    }
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(fast);
    free(ref);
    return mismatches || failures ? 1 : 0;
}
