/* INT8 calibration cache (format in calib_cache.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/precision/calib_cache.h"
#include "runtime/image/image.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* File name without its directory: the same photos in another folder are the same set. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static gr_status hash_images(const char *const *paths, int n, uint64_t *out)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < n; i++) {
        char *bytes = NULL;
        size_t size = 0;
        GR_TRY(gr_read_file(paths[i], GR_MAX_IMAGE_FILE_BYTES, "calibration image", &bytes, &size));
        const char *name = base_name(paths[i]);
        h = fnv1a(h, name, strlen(name) + 1);
        uint64_t size64 = size;
        h = fnv1a(h, &size64, sizeof size64);
        h = fnv1a(h, bytes, size);
        free(bytes);
    }
    *out = h;
    return GR_OK;
}

gr_status gr_calib_key_make(const gr_net *net, gr_calib_method method, float percentile,
                            const char *const *paths, int n_images, gr_calib_key *key)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int dims[3] = {net->w, net->h, net->c};
    h = fnv1a(h, dims, sizeof dims);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        int fields[12] = {(int)l->p.op, (int)l->p.activation, l->p.filters, l->p.size, l->p.stride,
                          l->p.pad, l->p.groups, l->p.batch_normalize, l->out.c, l->out.h,
                          l->out.w, l->n_inputs};
        h = fnv1a(h, fields, sizeof fields);
        h = fnv1a(h, l->inputs, (size_t)l->n_inputs * sizeof l->inputs[0]);
    }
    if (net->weight_block)
        h = fnv1a(h, net->weight_block, net->n_weight_floats * sizeof(float));
    *key = (gr_calib_key){h, method, method == GR_CALIB_PERCENTILE ? percentile : 0.0f, net->name,
                          n_images, 0};
    return hash_images(paths, n_images, &key->images_hash);
}

static void method_str(const gr_calib_key *key, char *buf, size_t len)
{
    if (key->method == GR_CALIB_PERCENTILE)
        snprintf(buf, len, "percentile %.6g", (double)key->percentile);
    else
        snprintf(buf, len, "%s", gr_calib_method_name(key->method));
}

gr_status gr_calib_cache_read(const char *path, const gr_calib_key *key, int n_layers,
                              float *layer_range, float *input_range, int *found, char *notice,
                              size_t notice_len)
{
    *found = 0;
    notice[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return GR_OK;
        return gr_fail(GR_ERR_IO, "%s: cannot open calibration cache: %s", path, strerror(errno));
    }
    char line[512], want_method[64], method[64] = "";
    method_str(key, want_method, sizeof want_method);
    int lineno = 0, version = 0, layers_seen = 0, have_input = 0;
    uint64_t hash = 0;
    gr_status st = GR_OK;
    char *seen = calloc((size_t)n_layers + 1, 1);
    if (!seen) {
        fclose(f);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "calibration cache: out of memory");
    }
    while (st == GR_OK && fgets(line, sizeof line, f)) {
        lineno++;
        char name[128];
        int index, images;
        uint64_t images_hash;
        float range;
        if (sscanf(line, "graphrun-calibration %d", &version) == 1) {
            if (version == 1) { /* no method parameters or image set recorded: cannot be trusted */
                snprintf(notice, notice_len,
                         "%s: calibration cache from an older graphrun (no image-set hash): "
                         "ignored, calibrating again and replacing it",
                         path);
                break;
            }
            if (version != 2)
                st = gr_fail(GR_ERR_PARSE, "%s:%d: calibration cache version %d (expected 2)", path,
                             lineno, version);
        } else if (sscanf(line, "model %127s %" SCNx64, name, &hash) == 2) {
            if (hash != key->hash)
                st = gr_fail(GR_ERR_PARSE,
                             "%s:%d: calibration cache is for a different model (%s, hash %016" PRIx64
                             "; this model %s has %016" PRIx64 "): delete it or pass another path",
                             path, lineno, name, hash, key->name, key->hash);
        } else if (strncmp(line, "method ", 7) == 0) {
            size_t len = strcspn(line + 7, "\r\n");
            if (len >= sizeof method)
                len = sizeof method - 1;
            memcpy(method, line + 7, len);
            method[len] = '\0';
            if (strcmp(method, want_method) != 0)
                st = gr_fail(GR_ERR_PARSE,
                             "%s:%d: calibration cache was made with method '%s', this build asks "
                             "for '%s': delete it or pass another path",
                             path, lineno, method, want_method);
        } else if (sscanf(line, "images %d %" SCNx64, &images, &images_hash) == 2) {
            if (images != key->n_images || images_hash != key->images_hash)
                st = gr_fail(GR_ERR_PARSE,
                             "%s:%d: calibration cache was made from another image set (%d images, "
                             "hash %016" PRIx64 "; these %d images have %016" PRIx64
                             "): delete it or pass another path",
                             path, lineno, images, images_hash, key->n_images, key->images_hash);
        } else if (sscanf(line, "input %f", &range) == 1) {
            *input_range = range;
            have_input = 1;
        } else if (sscanf(line, "layer %d %f", &index, &range) == 2) {
            if (index < 0 || index >= n_layers || seen[index])
                st = gr_fail(GR_ERR_PARSE, "%s:%d: layer index %d is out of range or repeated",
                             path, lineno, index);
            else {
                layer_range[index] = range;
                seen[index] = 1;
                layers_seen++;
            }
        } else if (line[0] != '\n' && line[0] != '#') {
            st = gr_fail(GR_ERR_PARSE, "%s:%d: unrecognised calibration cache line", path, lineno);
        }
    }
    fclose(f);
    free(seen);
    if (notice[0])
        return GR_OK;
    if (st == GR_OK && (version != 2 || hash == 0 || !have_input || layers_seen != n_layers))
        st = gr_fail(GR_ERR_PARSE, "%s: incomplete calibration cache (%d of %d layers)", path,
                     layers_seen, n_layers);
    if (st == GR_OK)
        *found = 1;
    return st;
}

gr_status gr_calib_cache_write(const char *path, const gr_calib_key *key, int n_layers,
                               const float *layer_range, float input_range)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return gr_fail(GR_ERR_IO, "%s: cannot write calibration cache: %s", path, strerror(errno));
    char method[64];
    method_str(key, method, sizeof method);
    fprintf(f,
            "graphrun-calibration 2\nmodel %s %016" PRIx64 "\nmethod %s\nimages %d %016" PRIx64
            "\ninput %.9g\n",
            key->name[0] ? key->name : "unnamed", key->hash, method, key->n_images,
            key->images_hash, (double)input_range);
    for (int i = 0; i < n_layers; i++)
        fprintf(f, "layer %d %.9g\n", i, (double)layer_range[i]);
    if (fclose(f) != 0)
        return gr_fail(GR_ERR_IO, "%s: error writing calibration cache", path);
    return GR_OK;
}
