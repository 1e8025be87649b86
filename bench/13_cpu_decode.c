/* The CPU decode path of `graphrun --input DIR --decode cpu` per image, one thread: JPEG decode in
 * full and DCT-scaled (`--fast-decode`), and the letterbox after each, for one network size; and
 * the photos to measure it on.
 *
 *   ./build/13_cpu_decode make DIR N W H [SEED]   N photo-like W x H JPEGs (quality 90, 4:2:0)
 *                                                 into DIR (made; its parent must exist):
 *                                                 random crops of the bundled photos
 *                                                 (data/, the .jpg) resized, maybe mirrored,
 *                                                 with noise (sigma ~4)
 *   ./build/13_cpu_decode enlarge SRC DST K       every .png/.jpg of SRC as DST/<stem>.jpg, K x
 *                                                 larger (bilinear stretch, quality 90), and its
 *                                                 YOLO label file <stem>.txt copied beside it
 *   ./build/13_cpu_decode scales DIR              TurboJPEG's decode time of the JPEGs of DIR at
 *                                                 each scale it offers up to 1 (M/8): which are
 *                                                 faster than the full decode
 *   ./build/13_cpu_decode time DIR NET [MIN]      per image (thread CPU time, every .jpg of DIR
 *                                                 in turn until >= MIN images, default 200):
 *                                                 read; decode full / DCT-scaled (the reader's
 *                                                 --fast-decode); letterbox_u8 to NET x NET from
 *                                                 each; the reference letterbox; how far the
 *                                                 scaled input is from the exact one
 *
 * Run from the source root (make reads data/). The decode times include nothing but the decode
 * (the file is read first, timed apart). Results: bench/results/cpu-decode-*.txt. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <turbojpeg.h>

#include "graphrun/runtime.h"
#include "base/base.h"
#include "runtime/image/image.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static double uniform(unsigned *s) { return (double)(rnd(s) & 0xffffff) / 16777216.0; }

static int has_ext(const char *name, const char *const *exts)
{
    const char *dot = strrchr(name, '.');
    for (; dot && *exts; exts++)
        if (!strcasecmp(dot, *exts))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir with one of exts, sorted. */
static char **list(const char *dir, const char *const *exts, int *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d)
        return NULL;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !has_ext(e->d_name, exts))
            continue;
        char **grown = realloc(names, (size_t)(*n + 1) * sizeof *names);
        if (!grown)
            break;
        names = grown;
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n > 1)
        qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static int make(const char *dir, int n, int w, int h, unsigned seed)
{
    static const char *photos[] = {"data/dog.jpg", "data/person.jpg", "data/horses.jpg",
                                   "data/eagle.jpg", "data/giraffe.jpg"};
    gr_image *src[5] = {0};
    for (int i = 0; i < 5; i++)
        if (gr_image_load(photos[i], &src[i]) != GR_OK) {
            fprintf(stderr, "13_cpu_decode: %s\n", gr_last_error());
            return 1;
        }
    mkdir(dir, 0755);
    gr_image out = {.w = w, .h = h, .c = 3, .data = malloc((size_t)w * h * 3)};
    int rc = out.data ? 0 : 1;
    for (int i = 0; i < n && rc == 0; i++) {
        const gr_image *s = src[i % 5];
        int cw = (int)(s->w * (0.6 + 0.4 * uniform(&seed)));
        int ch = (int)(s->h * (0.6 + 0.4 * uniform(&seed)));
        int x0 = (int)(rnd(&seed) % (unsigned)(s->w - cw + 1));
        int y0 = (int)(rnd(&seed) % (unsigned)(s->h - ch + 1));
        gr_image crop = {.w = cw, .h = ch, .c = 3, .data = malloc((size_t)cw * ch * 3)};
        if (!crop.data)
            return 1;
        int mirror = rnd(&seed) & 1;
        for (int y = 0; y < ch; y++)
            for (int x = 0; x < cw; x++)
                memcpy(crop.data + ((size_t)y * cw + (mirror ? cw - 1 - x : x)) * 3,
                       s->data + ((size_t)(y0 + y) * s->w + x0 + x) * 3, 3);
        rc = gr_image_preprocess_u8(&crop, GR_PREPROCESS_STRETCH, w, h, out.data) != GR_OK;
        for (size_t k = 0; k < (size_t)w * h * 3 && rc == 0; k++) {
            /* Noise of sigma ~4 (a sum of four uniforms), as a camera's sensor adds. */
            double z = (uniform(&seed) + uniform(&seed) + uniform(&seed) + uniform(&seed) - 2.0) *
                       6.9;
            double v = out.data[k] + z;
            out.data[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : lround(v));
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/img%05d.jpg", dir, i);
        if (rc == 0 && gr_image_write(&out, path) != GR_OK) {
            fprintf(stderr, "13_cpu_decode: %s\n", gr_last_error());
            rc = 1;
        }
        free(crop.data);
    }
    free(out.data);
    for (int i = 0; i < 5; i++)
        gr_image_destroy(src[i]);
    if (rc == 0)
        printf("%d %dx%d JPEGs in %s\n", n, w, h, dir);
    return rc;
}

static int enlarge(const char *srcdir, const char *dstdir, int k)
{
    static const char *const exts[] = {".png", ".jpg", ".jpeg", NULL};
    int n = 0;
    char **names = list(srcdir, exts, &n);
    mkdir(dstdir, 0755);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[4200], stem[4096];
        snprintf(path, sizeof path, "%s/%s", srcdir, names[i]);
        snprintf(stem, sizeof stem, "%s", names[i]);
        *strrchr(stem, '.') = '\0';
        gr_image *im = NULL;
        rc = gr_image_load(path, &im) != GR_OK;
        gr_image big = {.w = im ? im->w * k : 1, .h = im ? im->h * k : 1, .c = 3};
        big.data = malloc((size_t)big.w * big.h * 3);
        if (rc == 0 && big.data &&
            gr_image_preprocess_u8(im, GR_PREPROCESS_STRETCH, big.w, big.h, big.data) == GR_OK) {
            snprintf(path, sizeof path, "%s/%s.jpg", dstdir, stem);
            rc = gr_image_write(&big, path) != GR_OK;
        } else {
            rc = 1;
        }
        /* The label file, if any: YOLO boxes are normalised, so they hold for the larger copy. */
        char label[4200], copy[4200];
        snprintf(label, sizeof label, "%s/%s.txt", srcdir, stem);
        snprintf(copy, sizeof copy, "%s/%s.txt", dstdir, stem);
        FILE *in = fopen(label, "rb"), *out = in ? fopen(copy, "wb") : NULL;
        for (int ch; in && out && (ch = fgetc(in)) != EOF;)
            fputc(ch, out);
        if (in)
            fclose(in);
        if (out)
            fclose(out);
        if (rc)
            fprintf(stderr, "13_cpu_decode: %s: %s\n", path, gr_last_error());
        free(big.data);
        gr_image_destroy(im);
        free(names[i]);
    }
    free(names);
    printf("%d images of %s, %dx larger, in %s\n", n, srcdir, k, dstdir);
    return rc;
}

static int timing(const char *dir, int net, int min_images)
{
    static const char *const exts[] = {".jpg", ".jpeg", NULL};
    int n = 0;
    char **names = list(dir, exts, &n);
    if (n == 0) {
        fprintf(stderr, "13_cpu_decode: %s: no JPEGs\n", dir);
        return 1;
    }
    gr_image_reader *full = NULL, *fast = NULL;
    size_t plane = (size_t)net * net * 3;
    uint8_t *a = malloc(plane), *b = malloc(plane), *ref = malloc(plane);
    if (!a || !b || !ref || gr_image_reader_create(&full) != GR_OK ||
        gr_image_reader_create(&fast) != GR_OK)
        return 1;
    gr_image_reader_fast_decode(fast, GR_PREPROCESS_LETTERBOX, net, net);
    double t_read = 0, t_full = 0, t_fast = 0, t_lb_full = 0, t_lb_fast = 0, t_ref = 0;
    double sum_diff = 0;
    int worst = 0, mismatches = 0, total = 0, scaled = 0;
    long src_px = 0, dec_px = 0;
    int hist_w[2] = {0, 0}, hist_h[2] = {0, 0}; /* the first image's sizes */
    for (int pass = 0; total < min_images; pass++) {
        for (int i = 0; i < n; i++, total++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            char *bytes = NULL;
            size_t len = 0;
            const gr_image *f = NULL, *s = NULL;
            double t0 = cpu_s();
            if (gr_read_file(path, GR_MAX_IMAGE_FILE_BYTES, "image", &bytes, &len) != GR_OK)
                return 1;
            double t1 = cpu_s();
            free(bytes);
            /* The reader reads the file again (from the page cache): its read time is taken off. */
            double t2 = cpu_s();
            gr_status st = gr_image_reader_load(full, path, &f);
            double t3 = cpu_s();
            if (st == GR_OK)
                st = gr_image_letterbox_u8(f, net, net, a);
            double t4 = cpu_s();
            if (st == GR_OK)
                st = gr_image_reader_load(fast, path, &s);
            double t5 = cpu_s();
            int fw = 0, fh = 0; /* placed by the file's size, as the folder mode does */
            gr_image_reader_source_size(fast, &fw, &fh);
            if (st == GR_OK)
                st = gr_image_preprocess_as_u8(s, fw, fh, GR_PREPROCESS_LETTERBOX, net, net, b);
            double t6 = cpu_s();
            if (st == GR_OK)
                st = gr_image_letterbox_reference_u8(f, GR_PREPROCESS_LETTERBOX, net, net, ref);
            double t7 = cpu_s();
            if (st != GR_OK) {
                fprintf(stderr, "13_cpu_decode: %s\n", gr_last_error());
                return 1;
            }
            mismatches += memcmp(a, ref, plane) != 0;
            for (size_t k = 0; k < plane; k++) {
                int d = abs((int)a[k] - (int)b[k]);
                sum_diff += d;
                worst = d > worst ? d : worst;
            }
            if (total == 0) {
                hist_w[0] = f->w, hist_h[0] = f->h;
                hist_w[1] = s->w, hist_h[1] = s->h;
            }
            scaled += s->w != f->w;
            src_px += (long)f->w * f->h;
            dec_px += (long)s->w * s->h;
            double rd = t1 - t0;
            t_read += rd;
            t_full += t3 - t2 - rd;
            t_lb_full += t4 - t3;
            t_fast += t5 - t4 - rd;
            t_lb_fast += t6 - t5;
            t_ref += t7 - t6;
        }
    }
    double us = 1e6 / total;
    printf("%s: %d images (%d files, first %dx%d), network %dx%d, 1 thread, us per image:\n", dir,
           total, n, hist_w[0], hist_h[0], net, net);
    printf("  read %.0f\n  exact:  decode %.0f  letterbox %.0f  (reference letterbox %.0f; "
           "%d differ from it)  decode+letterbox %.0f\n",
           t_read * us, t_full * us, t_lb_full * us, t_ref * us, mismatches,
           (t_full + t_lb_full) * us);
    printf("  --fast-decode: decode %.0f  letterbox %.0f  decode+letterbox %.0f  (%d of %d "
           "scaled, first to %dx%d, %.2f of the pixels decoded)\n",
           t_fast * us, t_lb_fast * us, (t_fast + t_lb_fast) * us, scaled, total, hist_w[1],
           hist_h[1], (double)dec_px / (double)src_px);
    printf("  network input, fast against exact: mean |diff| %.3f, max %d (uint8 levels)\n",
           sum_diff / ((double)plane * total), worst);
    gr_image_reader_destroy(full);
    gr_image_reader_destroy(fast);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(a);
    free(b);
    free(ref);
    return mismatches != 0;
}

/* Every reducing scale TurboJPEG offers, timed on the JPEGs of dir (3 passes). */
static int scales(const char *dir)
{
    static const char *const exts[] = {".jpg", ".jpeg", NULL};
    int n = 0;
    char **names = list(dir, exts, &n);
    uint8_t **data = calloc((size_t)(n ? n : 1), sizeof *data);
    size_t *len = calloc((size_t)(n ? n : 1), sizeof *len);
    tjhandle tj = tjInitDecompress();
    int n_sf = 0, w = 0, h = 0, ss, cs;
    tjscalingfactor *sf = tjGetScalingFactors(&n_sf);
    if (n == 0 || !data || !len || !tj || !sf)
        return 1;
    for (int i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (gr_read_file(path, GR_MAX_IMAGE_FILE_BYTES, "image", (char **)&data[i], &len[i]) !=
            GR_OK)
            return 1;
    }
    tjDecompressHeader3(tj, data[0], (unsigned long)len[0], &w, &h, &ss, &cs);
    uint8_t *out = malloc((size_t)w * (size_t)h * 3);
    double full = 0;
    printf("%s: %d JPEGs (first %dx%d), decode us per image, 1 thread, best of 3 passes:\n", dir,
           n, w, h);
    for (int k = 0; k < n_sf && out; k++) {
        if (sf[k].num > sf[k].denom)
            continue;
        double best = 1e30;
        for (int pass = 0; pass < 3; pass++) {
            double t0 = cpu_s();
            for (int i = 0; i < n; i++) {
                tjDecompressHeader3(tj, data[i], (unsigned long)len[i], &w, &h, &ss, &cs);
                if (tjDecompress2(tj, data[i], (unsigned long)len[i], out, TJSCALED(w, sf[k]), 0,
                                  TJSCALED(h, sf[k]), TJPF_RGB, 0) != 0) {
                    fprintf(stderr, "13_cpu_decode: %s: %s\n", names[i], tjGetErrorStr2(tj));
                    return 1;
                }
            }
            double t = (cpu_s() - t0) * 1e6 / n;
            best = t < best ? t : best;
        }
        if (sf[k].num == sf[k].denom)
            full = best;
        printf("  %d/%d: %.0f%s\n", sf[k].num, sf[k].denom, best,
               full > 0 && sf[k].num != sf[k].denom ? (best < full ? "  faster than 1/1"
                                                                   : "  SLOWER than 1/1")
                                                    : "");
    }
    tjDestroy(tj);
    for (int i = 0; i < n; i++) {
        free(data[i]);
        free(names[i]);
    }
    free(names);
    free(data);
    free(len);
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && !strcmp(argv[1], "make"))
        return make(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                    argc > 6 ? (unsigned)atoi(argv[6]) : 7u);
    if (argc == 5 && !strcmp(argv[1], "enlarge") && atoi(argv[4]) >= 1)
        return enlarge(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && !strcmp(argv[1], "scales"))
        return scales(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "time") && atoi(argv[3]) > 0)
        return timing(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 200);
    fprintf(stderr, "usage: 13_cpu_decode make DIR N W H [SEED] | enlarge SRC DST K | "
                    "scales DIR | time DIR NET [MIN]\n");
    return 2;
}
