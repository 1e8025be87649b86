/* INT8 calibration on the CPU: time gr_plan_calibrate_images() over N images at 1, 2, 4, ...
 * threads up to the core count, for one method, and check that every thread count gives the same
 * ranges bit for bit. Images are deterministic pseudo-photos (decoding is not what is timed).
 *
 *   ./build/05_calib [model-or-cfg [images [method]]]     default: yolo 16 max
 *   e.g. ./build/05_calib yolov2-voc.cfg 32 entropy
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "planner/calib.h"

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

int main(int argc, char **argv)
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
