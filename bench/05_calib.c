/* INT8 calibration speed.
 *
 * Thread scaling on the CPU (the original mode): time gr_plan_calibrate_images() over N images at
 * 1, 2, 4, ... threads up to the core count, for one method, and check that every thread count
 * gives the same ranges bit for bit. Images are deterministic pseudo-photos (decoding is not what
 * is timed).
 *
 *   ./build/05_calib [model-or-cfg [images [method]]]     default: yolo 16 max
 *   e.g. ./build/05_calib yolov2-voc.cfg 32 entropy
 *
 * Real images, the whole calibration as an engine build does it (decode, letterbox, run, ranges),
 * on the GPU (runtime/gpu/calib.c), the CPU (planner/calib.c) or both (then the ranges are
 * compared: largest |GPU - CPU| relative to the layer's range):
 *
 *   ./build/05_calib --device gpu|cpu|both --images DIR [--count N] [--model NAME | --cfg FILE]
 *                    [--method M] [--batch B] [--threads T]
 *
 *   --images DIR  the .jpg/.jpeg/.png files of DIR, sorted by name, repeated in order up to
 *                 --count N images (default: each once), e.g. --images data/shapes-val --count 500
 *   --model NAME  a built-in model (default yolo = YOLOv2-tiny VOC, synthetic weights seed 1), or
 *                 yolov3-like: the YOLOv3 topology (Darknet-53 backbone, 3 yolo heads, 416x416,
 *                 80 classes, 107 layers, ~66 GFLOP/image) generated here, synthetic weights
 *   --batch B     GPU images per run (default 32, halved while memory runs short)
 *   --threads T   decoding threads (GPU) or calibrating threads (CPU); default one per core
 * Prints "calibration: N images in X s (device ...)" per device. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "planner/calib.h"
#include "runtime/gpu/calib.h"
#include "runtime/image/image.h"


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static gr_status pseudo_photo(int index, float *dst, void *user)
{
    const gr_net *net = user;
    size_t plane = (size_t)net->w * (size_t)net->h;
    for (int c = 0; c < net->c; c++)
        for (size_t p = 0; p < plane; p++)
            dst[(size_t)c * plane + p] =
                0.5f + 0.4f * sinf(0.013f * (float)(p % (size_t)net->w) * (float)(index + 1 + c)) *
                           cosf(0.017f * (float)(p / (size_t)net->w));
    return GR_OK;
}

static int thread_scaling(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "yolo";
    int n_images = argc > 2 ? atoi(argv[2]) : 16;
    gr_calib_method method = GR_CALIB_MAX;
    if (n_images < 1 || (argc > 3 && gr_calib_method_parse(argv[3], &method) != GR_OK)) {
        fprintf(stderr, "usage: 05_calib [model-or-cfg [images [max|percentile|entropy|mse]]]\n");
        return 2;
    }
    gr_net *net = NULL;
    size_t len = strlen(model);
    gr_status st = len > 4 && !strcmp(model + len - 4, ".cfg") ? gr_net_parse_file(model, &net)
                                                                : gr_net_builtin(model, &net);
    if (st == GR_OK)
        st = gr_net_synthesize_weights(net, 1);
    if (st != GR_OK) {
        fprintf(stderr, "05_calib: %s\n", gr_last_error());
        return 1;
    }
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    float *first = malloc(((size_t)net->n_layers + 1) * sizeof *first);
    float *ranges = malloc(((size_t)net->n_layers + 1) * sizeof *ranges);
    printf("%s, %d images, method %s, %d cores\n", net->name, n_images,
           gr_calib_method_name(method), cores);
    double one = 0.0;
    for (int threads = 1; threads <= cores || threads == 1; threads *= 2) {
        gr_calib_config cfg;
        gr_calib_config_default(&cfg);
        cfg.method = method;
        cfg.threads = threads;
        cfg.load = pseudo_photo;
        cfg.load_user = net;
        float *out = threads == 1 ? first : ranges;
        double t0 = now_s();
        st = gr_plan_calibrate_images(net, n_images, &cfg, out, &out[net->n_layers]);
        double t = now_s() - t0;
        if (st != GR_OK) {
            fprintf(stderr, "05_calib: %s\n", gr_last_error());
            return 1;
        }
        if (threads == 1)
            one = t;
        int same = memcmp(first, out, ((size_t)net->n_layers + 1) * sizeof *out) == 0;
        printf("threads %3d: %8.2f s  (%.2f s/image, x%.1f)  ranges %s\n", threads, t,
               t / n_images, one / t, same ? "identical" : "DIFFER");
        if (!same)
            return 1;
    }
    free(first);
    free(ranges);
    gr_net_free(net);
    return 0;
}

/* ---- real images on a device ------------------------------------------------------------------ */

/* The YOLOv3 topology written out by loops (Darknet-53: residual stages of 1, 2, 8, 8, 4 blocks;
 * three detection scales joined by route + upsample), 416x416, 80 classes. */
static char *yolov3_like_cfg(void)
{
    size_t cap = 1 << 16, used = 0;
    char *s = malloc(cap);
#define EMIT(...) used += (size_t)snprintf(s + used, cap - used, __VA_ARGS__)
#define CONV(f, k, st)                                                                             \
    EMIT("[convolutional]\nbatch_normalize=1\nfilters=%d\nsize=%d\nstride=%d\npad=1\n"             \
         "activation=leaky\n\n",                                                                   \
         f, k, st)
#define HEAD(mask)                                                                                 \
    EMIT("[convolutional]\nsize=1\nstride=1\npad=1\nfilters=255\nactivation=linear\n\n[yolo]\n"    \
         "mask = %s\nanchors = 10,13, 16,30, 33,23, 30,61, 62,45, 59,119, 116,90, 156,198, "       \
         "373,326\nclasses=80\nnum=9\n\n",                                                         \
         mask)
    EMIT("[net]\nbatch=1\nwidth=416\nheight=416\nchannels=3\n\n");
    CONV(32, 3, 1);
    static const int blocks[5] = {1, 2, 8, 8, 4};
    for (int stage = 0, f = 64; stage < 5; stage++, f *= 2) {
        CONV(f, 3, 2);
        for (int b = 0; b < blocks[stage]; b++) {
            CONV(f / 2, 1, 1);
            CONV(f, 3, 1);
            EMIT("[shortcut]\nfrom=-3\nactivation=linear\n\n");
        }
    } /* layers 0..74; stage outputs at 36 (256 ch) and 61 (512 ch) */
    for (int k = 0; k < 3; k++) {
        CONV(512, 1, 1);
        CONV(1024, 3, 1);
    }
    HEAD("6,7,8"); /* 81, 82 */
    EMIT("[route]\nlayers = -4\n\n");
    CONV(256, 1, 1);
    EMIT("[upsample]\nstride=2\n\n[route]\nlayers = -1, 61\n\n");
    for (int k = 0; k < 3; k++) {
        CONV(256, 1, 1);
        CONV(512, 3, 1);
    }
    HEAD("3,4,5"); /* 93, 94 */
    EMIT("[route]\nlayers = -4\n\n");
    CONV(128, 1, 1);
    EMIT("[upsample]\nstride=2\n\n[route]\nlayers = -1, 36\n\n");
    for (int k = 0; k < 3; k++) {
        CONV(128, 1, 1);
        CONV(256, 3, 1);
    }
    HEAD("0,1,2"); /* 105, 106 */
#undef HEAD
#undef CONV
#undef EMIT
    return s;
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot &&
           (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DIR's images sorted, repeated up to `count` (0 = each once); NULL-terminated. */
static char **list_images(const char *dir, int count, int *n_out)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    int n = 0, cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    for (struct dirent *ent; (ent = readdir(d));) {
        if (!is_image_name(ent->d_name))
            continue;
        if (n == cap)
            names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        size_t len = strlen(dir) + strlen(ent->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", dir, ent->d_name);
    }
    closedir(d);
    if (n == 0)
        return NULL;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int total = count > 0 ? count : n;
    char **list = malloc(((size_t)total + 1) * sizeof *list);
    for (int i = 0; i < total; i++)
        list[i] = strdup(names[i % n]);
    list[total] = NULL;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    *n_out = total;
    return list;
}

typedef struct photo_source {
    char **paths;
    const gr_net *net;
} photo_source;

/* runtime/precision/calibrate.c's loader: the uint8 letterbox, / 255, planar. */
static gr_status load_photo(int index, float *dst, void *user)
{
    const photo_source *src = user;
    return gr_image_load_planar(src->paths[index], GR_PREPROCESS_LETTERBOX, src->net->w, src->net->h, dst);
}

static int on_devices(int argc, char **argv)
{
    const char *device = "gpu", *dir = NULL, *model = "yolo", *cfg = NULL;
    int count = 0, batch = 0, threads = 0;
    gr_calib_method method = GR_CALIB_MAX;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "05_calib: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--images")) dir = v;
        else if (!strcmp(a, "--count")) count = atoi(v);
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--cfg")) cfg = v;
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--method")) {
            if (gr_calib_method_parse(v, &method) != GR_OK) {
                fprintf(stderr, "05_calib: %s\n", gr_last_error());
                return 2;
            }
        } else {
            fprintf(stderr, "05_calib: unknown option %s (see the comment at the top of "
                            "bench/05_calib.c)\n", a);
            return 2;
        }
    }
    int gpu = !strcmp(device, "gpu") || !strcmp(device, "both");
    int cpu = !strcmp(device, "cpu") || !strcmp(device, "both");
    if (!dir || (!gpu && !cpu) || count < 0 || batch < 0 || threads < 0) {
        fprintf(stderr, "usage: 05_calib --device gpu|cpu|both --images DIR [--count N] "
                        "[--model NAME | --cfg FILE] [--method M] [--batch B] [--threads T]\n");
        return 2;
    }
    gr_net *net = NULL;
    gr_status st;
    if (cfg) {
        st = gr_net_parse_file(cfg, &net);
    } else if (!strcmp(model, "yolov3-like")) {
        char path[] = "/tmp/graphrun_yolov3_like_XXXXXX";
        int fd = mkstemp(path);
        char *text = yolov3_like_cfg();
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f) {
            fputs(text, f);
            fclose(f);
        }
        free(text);
        st = gr_net_parse_file(path, &net);
        remove(path);
    } else {
        st = gr_net_builtin(model, &net);
    }
    char weights[4096];
    if (st == GR_OK && !cfg && !strcmp(model, "shapes")) {
        st = gr_data_path("shapes.weights", weights, sizeof weights);
        if (st == GR_OK)
            st = gr_net_load_weights(net, weights);
    } else if (st == GR_OK) {
        st = gr_net_synthesize_weights(net, 1);
    }
    int n = 0;
    char **paths = st == GR_OK ? list_images(dir, count, &n) : NULL;
    if (st != GR_OK || !paths) {
        fprintf(stderr, "05_calib: %s\n", st != GR_OK ? gr_last_error() : "no images in --images");
        return 1;
    }
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    printf("%s (%d layers, %dx%d), %d images from %s, method %s, %d cores\n", net->name,
           net->n_layers, net->w, net->h, n, dir, gr_calib_method_name(method), cores);
    float *gpu_ranges = calloc((size_t)net->n_layers + 1, sizeof(float));
    float *cpu_ranges = calloc((size_t)net->n_layers + 1, sizeof(float));
    int rc = 0;
    if (gpu) {
        gr_gpu_calib_request req = {.net = net, .paths = (const char *const *)paths,
                                    .n_images = n, .method = method, .percentile = 99.99f,
                                    .threads = threads, .batch = batch};
        int used = 0;
        double t0 = now_s();
        st = gr_gpu_calibrate(&req, gpu_ranges, &gpu_ranges[net->n_layers], &used);
        double t = now_s() - t0;
        if (st != GR_OK) {
            fprintf(stderr, "05_calib: GPU: %s\n", gr_last_error());
            rc = 1;
        } else {
            printf("calibration: %d images in %.2f s (GPU, batch %d; %.2f ms/image, engine build "
                   "included)\n", n, t, used, 1e3 * t / n);
        }
    }
    if (cpu && rc == 0) {
        photo_source src = {paths, net};
        gr_calib_config c;
        gr_calib_config_default(&c);
        c.method = method;
        c.threads = threads;
        c.load = load_photo;
        c.load_user = &src;
        double t0 = now_s();
        st = gr_plan_calibrate_images(net, n, &c, cpu_ranges, &cpu_ranges[net->n_layers]);
        double t = now_s() - t0;
        if (st != GR_OK) {
            fprintf(stderr, "05_calib: CPU: %s\n", gr_last_error());
            rc = 1;
        } else {
            printf("calibration: %d images in %.2f s (CPU, %d threads; %.2f s/image)\n", n, t,
                   threads ? threads : cores, t / n);
        }
    }
    if (gpu && cpu && rc == 0) {
        double worst = 0.0;
        int worst_layer = -1;
        for (int l = 0; l <= net->n_layers; l++) {
            double ref = fmax((double)cpu_ranges[l], (double)gpu_ranges[l]);
            double d = ref > 0.0 ? fabs((double)cpu_ranges[l] - (double)gpu_ranges[l]) / ref : 0.0;
            if (d > worst) {
                worst = d;
                worst_layer = l;
            }
        }
        printf("largest |GPU - CPU| / range: %.3g (layer %d; %d = the input)\n", worst,
               worst_layer, net->n_layers);
    }
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(gpu_ranges);
    free(cpu_ranges);
    gr_net_free(net);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strncmp(argv[1], "--", 2))
        return on_devices(argc, argv);
    return thread_scaling(argc, argv);
}
