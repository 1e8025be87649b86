/* Soak: one engine replayed many times (default 100,000). Every output must be bit-identical to the
 * first; host RSS and free device memory are reported at the start and the end (they must stay
 * flat); p50 / p99 per block of 10,000 replays. Runs on the GPU machine, not in CI:
 *   ./build-gpu/03_soak [--prec int8] [--replays 100000]
 * Exit 0 when every replay matched and memory stayed flat (RSS within 1 MiB, device within 1 MiB),
 * 1 otherwise, 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "graphrun/runtime.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *prec_name = "int8";
    long replays = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--prec"))
            prec_name = argv[i + 1];
        else if (!strcmp(argv[i], "--replays"))
            replays = atol(argv[i + 1]);
    }
    if (gr_cuda_device_count() == 0) {
        printf("03_soak: no CUDA device visible\n");
        return 77;
    }
    gr_precision prec;
    if (replays < 10000 || gr_precision_parse(prec_name, &prec) != GR_OK) {
        fprintf(stderr, "usage: 03_soak [--prec fp32|fp16|int8] [--replays N >= 10000]\n");
        return 2;
    }
    gr_model_options mo;
    gr_model_options_default(&mo);
    gr_model *model = NULL;
    gr_engine *engine = NULL;
    gr_image *im = NULL;
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    void *buf;
    size_t bytes;
    if (gr_model_load(&mo, &model) != GR_OK || gr_engine_build(model, &eo, &engine) != GR_OK ||
        gr_image_load("data/dog.jpg", &im) != GR_OK ||
        gr_engine_input_buffer(engine, 1, &buf, &bytes) != GR_OK ||
        gr_image_letterbox_u8(im, 416, 416, buf) != GR_OK) {
        fprintf(stderr, "03_soak: setup failed: %s\n", gr_last_error());
        return 1;
    }
    gr_tensor_desc d;
    gr_engine_output_desc(engine, 0, &d);
    size_t n = (size_t)d.n * d.c * d.h * d.w;
    float *first = malloc(n * sizeof *first);
    double *lat = malloc(10000 * sizeof *lat);
    const float *out;
    if (!first || !lat || gr_engine_run(engine) != GR_OK || gr_engine_output(engine, 0, &out) != GR_OK) {
        fprintf(stderr, "03_soak: first run failed: %s\n", gr_last_error());
        return 1;
    }
    memcpy(first, out, n * sizeof *first);
    size_t dev_free0, dev_free1, total;
    cudaMemGetInfo(&dev_free0, &total);
    long rss0 = rss_kib();
    long mismatches = 0, failures = 0;
    printf("03_soak: %s, %ld replays of one engine on %s\n", prec_name, replays,
           gr_engine_device_name(engine));
    printf("start: host RSS %ld KiB, device free %zu MiB\n", rss0, dev_free0 >> 20);
    for (long block = 0; block < replays / 10000; block++) {
        for (int i = 0; i < 10000; i++) {
            double t0 = now_us();
            if (gr_engine_run(engine) != GR_OK) {
                failures++;
                lat[i] = 0;
                continue;
            }
            lat[i] = now_us() - t0;
            gr_engine_output(engine, 0, &out);
            mismatches += memcmp(out, first, n * sizeof *first) != 0;
        }
        qsort(lat, 10000, sizeof *lat, cmp);
        printf("block %2ld: p50 %.1f us, p99 %.1f us, max %.1f us\n", block, lat[5000], lat[9900],
               lat[9999]);
    }
    cudaMemGetInfo(&dev_free1, &total);
    long rss1 = rss_kib();
    printf("end:   host RSS %ld KiB, device free %zu MiB\n", rss1, dev_free1 >> 20);
    printf("replays differing from the first: %ld; failed runs: %ld\n", mismatches, failures);
    int flat = labs(rss1 - rss0) <= 1024 &&
               (dev_free0 > dev_free1 ? dev_free0 - dev_free1 : dev_free1 - dev_free0) <= (1u << 20);
    printf("memory %s\n", flat ? "flat" : "NOT flat");
    free(first);
    free(lat);
    gr_image_destroy(im);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
    return mismatches == 0 && failures == 0 && flat ? 0 : 1;
}
