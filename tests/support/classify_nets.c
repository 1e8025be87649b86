/* Classifier test networks: Darknet's cfgs at a reduced input size, photos, NRMSE and top-k. */
#define _GNU_SOURCE /* mkstemp */
#include "tests/support/classify_nets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CFG_BYTES (1 << 20)

/* Copy the cfg to `f`, replacing the value of every width= / height= line (only [net] has them). */
static int write_resized(const char *text, int side, FILE *f)
{
    const char *line = text;
    while (*line) {
        size_t len = strcspn(line, "\n");
        int sized = side > 0 && (strncmp(line, "width=", 6) == 0 || strncmp(line, "height=", 7) == 0);
        if (sized) {
            if (fprintf(f, "%.*s=%d\n", (int)strcspn(line, "="), line, side) < 0)
                return 0;
        } else if (fprintf(f, "%.*s\n", (int)len, line) < 0) {
            return 0;
        }
        line += len + (line[len] == '\n');
    }
    return 1;
}

gr_status gr_test_classifier_at(const char *name, int side, uint64_t seed, gr_model **out)
{
    *out = NULL;
    char path[512];
    snprintf(path, sizeof path, "models/%s.cfg", name);
    FILE *in = fopen(path, "rb");
    if (!in)
        return GR_ERR_IO;
    char *text = calloc(MAX_CFG_BYTES + 1, 1);
    size_t len = text ? fread(text, 1, MAX_CFG_BYTES, in) : 0;
    fclose(in);
    if (!text || len == 0 || len == MAX_CFG_BYTES) {
        free(text);
        return GR_ERR_IO;
    }
    char tmp[] = "/tmp/graphrun_classifier_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int written = f && write_resized(text, side, f);
    free(text);
    if (f ? fclose(f) != 0 : (fd >= 0 && close(fd) != 0))
        written = 0;
    gr_status st = GR_ERR_IO;
    if (written) {
        gr_model_options mo;
        gr_model_options_default(&mo);
        mo.builtin = NULL;
        mo.cfg_path = tmp;
        mo.seed = seed;
        st = gr_model_load(&mo, out);
    }
    if (fd >= 0)
        unlink(tmp);
    return st;
}

gr_status gr_test_photos_u8(int count, int side, uint8_t **out)
{
    static const char *const photos[] = {"data/dog.jpg", "data/eagle.jpg", "data/giraffe.jpg",
                                         "data/horses.jpg", "data/person.jpg"};
    *out = NULL;
    if (count < 1 || count > 5)
        return GR_ERR_INVALID_ARGUMENT;
    size_t per_image = (size_t)3 * side * side;
    uint8_t *buf = malloc(per_image * (size_t)count);
    if (!buf)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < count; i++) {
        gr_image *im = NULL;
        gr_status st = gr_image_load(photos[i], &im);
        if (st == GR_OK)
            st = gr_image_letterbox_u8(im, side, side, buf + per_image * (size_t)i);
        gr_image_destroy(im);
        if (st != GR_OK) {
            free(buf);
            return st;
        }
    }
    *out = buf;
    return GR_OK;
}

double gr_test_nrmse(const float *x, const float *ref, size_t n)
{
    double lo = INFINITY, hi = -INFINITY, sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return (double)INFINITY;
        double d = (double)x[i] - (double)ref[i];
        sq += d * d;
        lo = fmin(lo, (double)ref[i]);
        hi = fmax(hi, (double)ref[i]);
    }
    return n && hi > lo ? sqrt(sq / (double)n) / (hi - lo) : (double)INFINITY;
}

void gr_test_top_k(const float *p, int n, int k, int *out)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!gr_test_in_top(out, j, i) && (best < 0 || p[i] > p[best]))
                best = i;
        out[j] = best;
    }
}

int gr_test_in_top(const int *top, int k, int id)
{
    for (int j = 0; j < k; j++)
        if (top[j] == id)
            return 1;
    return 0;
}
