/* JPEG decoding on the GPU (gr_engine_decode_jpegs) alone and with the engine's runs: how many
 * images/s each nvJPEG backend decodes and letterboxes, and what bounds it - the JPEG engines,
 * the calling thread, or one handle shared by the slots - for the folder mode's design.
 *
 *   ./build-gpu/11_jpeg_decode DIR [--batch 64] [--rounds 3]
 *
 * Reads every .jpg of DIR into memory (generate one with bench/multi_gpu.py), then for each
 * backend (hardware, GPU hybrid), batch size and layout - T threads on one engine of T slots
 * (one nvJPEG handle shared), or T engines of one slot each (a handle per thread) - every thread
 * decodes its share of the batches into its slot, then runs it (submit + wait: YOLOv2-tiny int8,
 * synthetic weights). Prints images/s of the whole set (best of --rounds), the host time inside
 * gr_engine_decode_jpegs per batch (what a calling thread spends), and how many files the GPU
 * took. Exits 77 with one line without a GPU or without nvJPEG. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graphrun/runtime.h"

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
    double host_s;     /* inside gr_engine_decode_jpegs */
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
        double t = now_s();
        gr_status st = gr_engine_decode_jpegs(w->engine, w->slot, w->batch, data, len, dec);
        w->host_s += now_s() - t;
        if (st == GR_OK)
            st = gr_engine_submit(w->engine, w->slot);
        if (st == GR_OK)
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: 11_jpeg_decode DIR [--batch N] [--rounds N]\n");
        return 2;
    }
    int batch = 64, rounds = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
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
    printf("%-8s %-9s %3s %9s %11s %12s %8s\n", "backend", "handles", "thr", "img/s",
           "host ms/b", "GPU-decoded", "of");
    static const struct {
        gr_jpeg_decoder which;
        const char *name;
    } backends[] = {{GR_JPEG_DECODER_HARDWARE, "hardware"}, {GR_JPEG_DECODER_GPU_HYBRID, "hybrid"}};
    static const int threads[] = {1, 2, 4};
    int n_batches = (f.n + batch - 1) / batch;
    for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++)
        for (int shared = 1; shared >= 0; shared--)
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                int T = threads[t];
                gr_engine *engines[4] = {0};
                int ok = 1;
                for (int k = 0; k < (shared ? 1 : T) && ok; k++)
                    ok = (engines[k] = build(model, batch, shared ? T : 1, backends[b].which)) != NULL;
                if (ok) {
                    int dummy[1];
                    if (gr_engine_decode_jpegs(engines[0], 0, 0, NULL, NULL, dummy) != GR_OK) {
                        printf("%-8s %s\n", backends[b].name, gr_last_error());
                        ok = 0;
                    }
                }
                double best = 0.0, host = 0.0;
                long decoded = 0;
                for (int r = 0; r < rounds && ok; r++) {
                    worker w[4];
                    pthread_t tid[4];
                    double t0 = now_s();
                    for (int k = 0; k < T; k++) {
                        w[k] = (worker){.engine = engines[shared ? 0 : k], .slot = shared ? k : 0,
                                        .first_batch = k, .step = T, .batch = batch,
                                        .n_batches = n_batches, .f = &f};
                        pthread_create(&tid[k], NULL, work, &w[k]);
                    }
                    double h = 0.0;
                    long d = 0;
                    for (int k = 0; k < T; k++) {
                        pthread_join(tid[k], NULL);
                        ok = ok && !w[k].failed;
                        h += w[k].host_s;
                        d += w[k].decoded;
                    }
                    double rate = (double)n_batches * batch / (now_s() - t0);
                    if (rate > best) {
                        best = rate;
                        host = 1e3 * h / n_batches;
                        decoded = d;
                    }
                }
                if (ok)
                    printf("%-8s %-9s %3d %9.0f %11.2f %12ld %8d\n", backends[b].name,
                           shared ? "shared" : "per-thread", T, best, host, decoded,
                           n_batches * batch);
                for (int k = 0; k < 4; k++)
                    gr_engine_destroy(engines[k]);
            }
    gr_model_destroy(model);
    for (int i = 0; i < f.n; i++)
        free(f.data[i]);
    free(f.data);
    free(f.len);
    return 0;
}
