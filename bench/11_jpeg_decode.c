/* JPEG decoding on the GPU (gr_engine_decode_jpegs) alone and with the engine's runs: how many
 * images/s each nvJPEG backend decodes and letterboxes, and what bounds it - the JPEG engines or
 * the calling threads - for the folder mode's design.
 *
 *   ./build-gpu/11_jpeg_decode DIR [--batch 64] [--rounds 3] [--limit N files]
 *
 * Reads every .jpg of DIR into memory (generate one with bench/multi_gpu.py), then for each
 * backend (hardware, GPU hybrid) and thread count T, two layouts: "decode" - T threads on one
 * engine of T slots, each decoding its share of the batches into its slot and waiting for the
 * slot's stream (decoding and letterbox only; a handle per slot); "decode+run" - T engines of one
 * slot each (YOLOv2-tiny int8, synthetic weights), each thread decoding a batch then running it
 * (submit + wait). Prints images/s of the whole set (best of --rounds), the host time per batch
 * inside gr_engine_decode_jpegs (checking the files; in nvjpegDecodeBatched), and how many files
 * the GPU took. Then the difference the decoders make on this folder: the letterboxed input of
 * every image (up to 1,024) from the GPU decoder against the CPU's (libjpeg-turbo's pixels through
 * the same letterbox): mean |d|, the 99.9th percentile and the largest, the share of bytes equal.
 * Exits 77 with one line without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h> /* a CUDA build's benchmark: runtime/gpu/debug.h's hooks */

#include "graphrun/runtime.h"
#include "runtime/gpu/debug.h"
#include "runtime/image/image.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct files {
    uint8_t **data;
    size_t *len;
    int n;
} files;

static int read_dir(const char *dir, files *f)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int cap = 0;
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".jpg") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            continue;
        fseek(fp, 0, SEEK_END);
        long size = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        if (f->n == cap) {
            cap = cap ? 2 * cap : 1024;
            f->data = realloc(f->data, (size_t)cap * sizeof *f->data);
            f->len = realloc(f->len, (size_t)cap * sizeof *f->len);
        }
        uint8_t *buf = malloc((size_t)size);
        if (size <= 0 || !buf || fread(buf, 1, (size_t)size, fp) != (size_t)size) {
            free(buf);
            fclose(fp);
            continue;
        }
        fclose(fp);
        f->data[f->n] = buf;
        f->len[f->n++] = (size_t)size;
    }
    closedir(d);
    return f->n;
}

typedef struct worker {
    gr_engine *engine;
    int slot, first_batch, step, batch, n_batches, run;
    const files *f;
    long decoded;
    int failed;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    const uint8_t *data[1024];
    size_t len[1024];
    int dec[1024];
    void *buf;
    size_t bytes;
    if (gr_engine_slot_input(w->engine, w->slot, 1, &buf, &bytes) != GR_OK) {
        w->failed = 1;
        return NULL;
    }
    for (int b = w->first_batch; b < w->n_batches; b += w->step) {
        for (int i = 0; i < w->batch; i++) {
            int k = (b * w->batch + i) % w->f->n;
            data[i] = w->f->data[k];
            len[i] = w->f->len[k];
        }
        gr_status st = gr_engine_decode_jpegs(w->engine, w->slot, w->batch, data, len, dec);
        if (st == GR_OK && !w->run)
            st = gr_engine_debug_slot_sync(w->engine, w->slot);
        if (st == GR_OK && w->run)
            st = gr_engine_submit(w->engine, w->slot);
        if (st == GR_OK && w->run)
            st = gr_engine_wait(w->engine, w->slot);
        if (st != GR_OK) {
            fprintf(stderr, "11_jpeg_decode: %s\n", gr_last_error());
            w->failed = 1;
            return NULL;
        }
        for (int i = 0; i < w->batch; i++)
            w->decoded += dec[i];
    }
    return NULL;
}

static gr_engine *build(const gr_model *model, int batch, int inflight, gr_jpeg_decoder which)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = GR_PREC_INT8;
    eo.batch = batch;
    eo.inflight = inflight;
    eo.jpeg_decoder = which;
    eo.tactic_search = 0;
    gr_engine *e = NULL;
    if (gr_engine_build(model, &eo, &e) != GR_OK) {
        fprintf(stderr, "11_jpeg_decode: build: %s\n", gr_last_error());
        return NULL;
    }
    return e;
}

/* The GPU decoder's letterboxed inputs against libjpeg-turbo's through the CPU letterbox. */
static void compare(const gr_model *model, const files *f, int batch)
{
    gr_engine *e = build(model, batch, 1, GR_JPEG_DECODER_AUTO);
    if (!e)
        return;
    gr_model_info info;
    gr_model_get_info(model, &info);
    size_t per = (size_t)info.width * (size_t)info.height * 3;
    uint8_t *dev = malloc(per * (size_t)batch), *cpu = malloc(per);
    const uint8_t *data[1024];
    size_t len[1024];
    int dec[1024];
    void *buf;
    size_t bytes;
    unsigned long long hist[256] = {0}, count = 0, sum = 0;
    int images = 0, worst = 0, n = f->n < 1024 ? f->n : 1024;
    if (!dev || !cpu || gr_engine_slot_input(e, 0, 1, &buf, &bytes) != GR_OK)
        n = 0;
    for (int first = 0; first + batch <= n; first += batch) {
        for (int i = 0; i < batch; i++) {
            data[i] = f->data[first + i];
            len[i] = f->len[first + i];
        }
        if (gr_engine_decode_jpegs(e, 0, batch, data, len, dec) != GR_OK ||
            gr_engine_debug_device_input(e, 0, dev, per * (size_t)batch) != GR_OK)
            break;
        for (int i = 0; i < batch; i++) {
            gr_image *im = NULL;
            if (!dec[i] || gr_image_decode_mem(data[i], len[i], "x.jpg", &im) != GR_OK ||
                gr_image_letterbox_u8(im, info.width, info.height, cpu) != GR_OK) {
                gr_image_destroy(im);
                continue;
            }
            gr_image_destroy(im);
            images++;
            for (size_t k = 0; k < per; k++) {
                int d = abs((int)dev[(size_t)i * per + k] - (int)cpu[k]);
                hist[d]++;
                sum += (unsigned long long)d;
                worst = d > worst ? d : worst;
            }
            count += per;
        }
    }
    if (count) {
        unsigned long long below = 0;
        int p999 = 0;
        for (int d = 0; d < 256; d++)
            if ((below += hist[d]) >= count - count / 1000) {
                p999 = d;
                break;
            }
        printf("letterboxed input, GPU decoder vs libjpeg-turbo, %d images: mean |d| %.3f, "
               "99.9th percentile %d, max %d, equal %.1f%%\n", images, (double)sum / (double)count,
               p999, worst, 100.0 * (double)hist[0] / (double)count);
    }
    free(dev);
    free(cpu);
    gr_engine_destroy(e);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: 11_jpeg_decode DIR [--batch N] [--rounds N] [--limit N]\n");
        return 2;
    }
    int batch = 64, rounds = 3, limit = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--limit") == 0)
            limit = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
    }
    if (batch < 1 || batch > 1024 || rounds < 1)
        return 2;
    if (gr_cuda_device_count() == 0) {
        printf("11_jpeg_decode: no CUDA device: skipped\n");
        return 77;
    }
    files f = {0};
    if (!read_dir(argv[1], &f)) {
        fprintf(stderr, "11_jpeg_decode: no .jpg in %s\n", argv[1]);
        return 1;
    }
    int loaded = f.n;
    if (limit > 0 && f.n > limit)
        f.n = limit;
    size_t total = 0;
    for (int i = 0; i < f.n; i++)
        total += f.len[i];
    gr_model_options mo;
    gr_model_options_default(&mo);
    gr_model *model = NULL;
    if (gr_model_load(&mo, &model) != GR_OK)
        return 1;
    printf("%d JPEGs, %.1f KB on average; YOLOv2-tiny int8 batch %d\n", f.n,
           (double)total / f.n / 1024.0, batch);
    printf("%-8s %-10s %3s %9s %14s %14s %12s %8s\n", "backend", "layout", "thr", "img/s",
           "check ms/batch", "call ms/batch", "GPU-decoded", "of");
    static const struct {
        gr_jpeg_decoder which;
        const char *name;
    } backends[] = {{GR_JPEG_DECODER_HARDWARE, "hardware"}, {GR_JPEG_DECODER_GPU_HYBRID, "hybrid"}};
    static const int threads[] = {1, 2, 4};
    int n_batches = (f.n + batch - 1) / batch;
    for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++)
        for (int run = 0; run <= 1; run++)
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                int T = threads[t];
                gr_engine *engines[4] = {0};
                int ok = 1;
                int n_engines = run ? T : 1;
                for (int k = 0; k < n_engines && ok; k++)
                    ok = (engines[k] = build(model, batch, run ? 1 : T, backends[b].which)) != NULL;
                if (ok) {
                    int dummy[1];
                    if (gr_engine_decode_jpegs(engines[0], 0, 0, NULL, NULL, dummy) != GR_OK) {
                        printf("%-8s %s\n", backends[b].name, gr_last_error());
                        ok = 0;
                    }
                }
                double best = 0.0, check = 0.0, call = 0.0;
                long decoded = 0;
                for (int r = 0; r < rounds && ok; r++) {
                    worker w[4];
                    pthread_t tid[4];
                    long d = 0;
                    double c0 = 0.0, k0 = 0.0;
                    for (int k = 0; k < n_engines; k++) {
                        double c, l;
                        gr_engine_debug_jpeg_host(engines[k], &c, &l);
                        c0 += c, k0 += l;
                    }
                    double t0 = now_s();
                    for (int k = 0; k < T; k++) {
                        w[k] = (worker){.engine = engines[run ? k : 0], .slot = run ? 0 : k,
                                        .first_batch = k, .step = T, .batch = batch,
                                        .n_batches = n_batches, .run = run, .f = &f};
                        pthread_create(&tid[k], NULL, work, &w[k]);
                    }
                    for (int k = 0; k < T; k++) {
                        pthread_join(tid[k], NULL);
                        ok = ok && !w[k].failed;
                        d += w[k].decoded;
                    }
                    double rate = (double)n_batches * batch / (now_s() - t0);
                    double c1 = 0.0, k1 = 0.0;
                    for (int k = 0; k < n_engines; k++) {
                        double c, l;
                        gr_engine_debug_jpeg_host(engines[k], &c, &l);
                        c1 += c, k1 += l;
                    }
                    if (rate > best) {
                        best = rate;
                        check = 1e3 * (c1 - c0) / n_batches;
                        call = 1e3 * (k1 - k0) / n_batches;
                        decoded = d;
                    }
                }
                if (ok)
                    printf("%-8s %-10s %3d %9.0f %14.2f %14.2f %12ld %8d\n", backends[b].name,
                           run ? "decode+run" : "decode", T, best, check, call, decoded,
                           n_batches * batch);
                for (int k = 0; k < 4; k++)
                    gr_engine_destroy(engines[k]);
            }
    compare(model, &f, batch);
    gr_model_destroy(model);
    for (int i = 0; i < loaded; i++)
        free(f.data[i]);
    free(f.data);
    free(f.len);
    return 0;
}
