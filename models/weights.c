/* Darknet .weights files: layout of the network's weight block, loading, saving.
 *
 * File format (little endian): int32 major, int32 minor, int32 revision, then `seen` (images
 * trained on): 64-bit when major*10 + minor >= 2, else 32-bit, so the header is 20 or 16 bytes.
 * Then the float32 parameters of every conv / connected layer in cfg order (see models/internal.h
 * for the order inside a layer). Darknet silently tolerates short files; graphrun computes the
 * exact size from the cfg and rejects a truncated or oversized file, naming both byte counts.
 *
 * NaN or Inf values are loaded as they are (Darknet does not look) but never silently:
 * gr_net_count_nonfinite_weights() counts them for gr_model_load, which reports them in one notice
 * line or, with gr_model_options.nonfinite_weights_is_error, refuses the file (a diverged
 * training run's weights give meaningless outputs, and int8 quantization turns them into finite
 * garbage that no later check can see).
 * Headers with major or minor above 1000 (Darknet then transposes connected weights) are rejected.
 * Big-endian hosts are not supported: loading fails there with GR_ERR_UNSUPPORTED. */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "models/internal.h"
#include "models/net.h"

#define WEIGHTS_MIN_HEADER 12 /* major, minor, revision; `seen` follows */
#define WEIGHTS_MAX_VERSION 1000

int gr_host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

size_t gr_layer_param_floats(const gr_net *net, int layer, float *base, gr_weights *w)
{
    const gr_layer *l = &net->layers[layer];
    if (!gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
        return 0;
    gr_shape in = gr_net_input_shape(net, layer, 0);
    size_t n = (size_t)l->p.filters;
    size_t fan_in = l->p.op == GR_OP_CONV
                        ? (size_t)(in.c / l->p.groups) * (size_t)l->p.size * (size_t)l->p.size
                        : gr_shape_elems(in);
    size_t n_weights = n * fan_in;
    size_t bn = l->p.batch_normalize ? 3 * n : 0;
    if (base) {
        memset(w, 0, sizeof *w);
        w->n = l->p.filters;
        w->n_weights = n_weights;
        float *p = base;
        w->biases = p;
        p += n;
        if (l->p.op == GR_OP_CONNECTED) {
            w->weights = p;
            p += n_weights;
        }
        if (l->p.batch_normalize) {
            w->scales = p;
            w->rolling_mean = p + n;
            w->rolling_variance = p + 2 * n;
            p += 3 * n;
        }
        if (l->p.op == GR_OP_CONV)
            w->weights = p;
    }
    return n + bn + n_weights;
}

gr_status gr_net_param_floats(const gr_net *net, size_t *n_floats)
{
    size_t total = 0;
    for (int i = 0; i < net->n_layers; i++) {
        if (!gr_add_size(total, gr_layer_param_floats(net, i, NULL, NULL), &total))
            return gr_fail(GR_ERR_LIMIT, "%s: total weight count overflows", net->name);
    }
    size_t bytes;
    if (!gr_mul_size(total, sizeof(float), &bytes) || !gr_add_size(bytes, 20, &bytes))
        return gr_fail(GR_ERR_LIMIT, "%s: weights size overflows", net->name);
    *n_floats = total;
    return GR_OK;
}

void gr_net_attach_weights(gr_net *net, float *block, size_t n_floats)
{
    if (!net->weights_borrowed)
        free(net->weight_block);
    net->weights_borrowed = 0;
    net->weight_block = block;
    net->n_weight_floats = n_floats;
    size_t offset = 0;
    for (int i = 0; i < net->n_layers; i++) {
        gr_layer *l = &net->layers[i];
        if (gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
            offset += gr_layer_param_floats(net, i, block + offset, &l->w);
        else
            memset(&l->w, 0, sizeof l->w);
    }
}

size_t gr_net_count_nonfinite_weights(const gr_net *net, int *first_layer)
{
    size_t count = 0, offset = 0;
    *first_layer = -1;
    for (int i = 0; net->weight_block && i < net->n_layers; i++) {
        size_t n = gr_layer_param_floats(net, i, NULL, NULL), before = count;
        for (size_t k = 0; k < n && offset + k < net->n_weight_floats; k++)
            count += !isfinite(net->weight_block[offset + k]);
        if (count > before && *first_layer < 0)
            *first_layer = i;
        offset += n;
    }
    return count;
}

size_t gr_net_weights_file_size(const gr_net *net, size_t header_bytes)
{
    size_t n_floats, bytes;
    if (!net || gr_net_param_floats(net, &n_floats) != GR_OK)
        return 0;
    if (!gr_mul_size(n_floats, sizeof(float), &bytes) || !gr_add_size(bytes, header_bytes, &bytes))
        return 0;
    return bytes;
}

static uint32_t read_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Validate the header (the first min(len, 20) bytes in `head`) against a file of `total` bytes;
 * on success *header_bytes is 16 or 20 and *n_floats the net's parameter count. */
static gr_status check_weights(const gr_net *net, const uint8_t *head, size_t head_len,
                               size_t total, const char *source, size_t *header_bytes,
                               size_t *n_floats)
{
    if (!gr_host_is_little_endian())
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: loading .weights needs a little-endian host",
                       source);
    if (total < WEIGHTS_MIN_HEADER || head_len < WEIGHTS_MIN_HEADER)
        return gr_fail(GR_ERR_PARSE,
                       "%s: truncated header: file is %zu bytes, the version fields need %d "
                       "(offset 0)", source, total, WEIGHTS_MIN_HEADER);
    uint32_t major = read_u32le(head), minor = read_u32le(head + 4);
    uint32_t revision = read_u32le(head + 8);
    if (major > WEIGHTS_MAX_VERSION || minor > WEIGHTS_MAX_VERSION)
        return gr_fail(GR_ERR_PARSE,
                       "%s: bad header at offset 0: version %u.%u.%u is not a Darknet weights "
                       "version (major and minor are at most %d)", source, major, minor, revision,
                       WEIGHTS_MAX_VERSION);
    *header_bytes = (uint64_t)major * 10 + minor >= 2 ? 20 : 16;
    if (total < *header_bytes)
        return gr_fail(GR_ERR_PARSE,
                       "%s: truncated header: version %u.%u needs a %zu-byte header, file is %zu "
                       "bytes (offset %d: 'seen')", source, major, minor, *header_bytes, total,
                       WEIGHTS_MIN_HEADER);
    GR_TRY(gr_net_param_floats(net, n_floats));
    size_t expected = *header_bytes + *n_floats * sizeof(float); /* checked by param_floats */
    if (total != expected)
        return gr_fail(GR_ERR_PARSE,
                       "%s: %s: expected %zu bytes (header %zu + %zu floats), found %zu", source,
                       total < expected ? "truncated" : "oversized", expected, *header_bytes,
                       *n_floats, total);
    return GR_OK;
}

gr_status gr_net_load_weights_mem(gr_net *net, const uint8_t *data, size_t len, const char *source)
{
    if (!net || (!data && len > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_load_weights_mem: NULL argument");
    if (!source)
        source = "<weights>";
    size_t header_bytes = 0, n_floats = 0;
    GR_TRY(check_weights(net, data, len, len, source, &header_bytes, &n_floats));
    float *block = gr_calloc(n_floats, sizeof(float), "weights");
    if (!block)
        return GR_ERR_OUT_OF_MEMORY;
    if (n_floats)
        memcpy(block, data + header_bytes, n_floats * sizeof(float));
    gr_net_attach_weights(net, block, n_floats);
    net->synthetic = 0;
    return GR_OK;
}

static gr_status file_size(FILE *f, const char *path, size_t *size)
{
    if (fseek(f, 0, SEEK_END) != 0)
        return gr_fail(GR_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    long end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0)
        return gr_fail(GR_ERR_IO, "%s: cannot determine the file size: %s", path,
                       strerror(errno));
    *size = (size_t)end;
    return GR_OK;
}

gr_status gr_net_load_weights(gr_net *net, const char *path)
{
    if (!net || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_load_weights: NULL argument");
    /* The base reader's open: a regular file only, opened without blocking (a FIFO would wait
     * for a writer, then fail to seek), refused by kind with one line. */
    int fd;
    size_t size;
    GR_TRY(gr_open_regular_file(path, SIZE_MAX, "weights", &fd, &size));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot open weights: %s", path, strerror(errno));
    }
    size_t total = 0, header_bytes = 0, n_floats = 0;
    uint8_t head[20];
    gr_status st = file_size(f, path, &total);
    size_t head_len = st == GR_OK ? fread(head, 1, sizeof head, f) : 0;
    /* A directory opens and "seeks" to a huge size on Linux; reading it fails. */
    if (st == GR_OK && ferror(f))
        st = gr_fail(GR_ERR_IO, "%s: cannot read weights: %s", path, strerror(errno));
    if (st == GR_OK)
        st = check_weights(net, head, head_len, total, path, &header_bytes, &n_floats);
    float *block = NULL;
    if (st == GR_OK) {
        block = gr_calloc(n_floats, sizeof(float), "weights");
        if (!block)
            st = GR_ERR_OUT_OF_MEMORY;
    }
    if (st == GR_OK && fseek(f, (long)header_bytes, SEEK_SET) != 0)
        st = gr_fail(GR_ERR_IO, "%s: cannot seek past the header: %s", path, strerror(errno));
    if (st == GR_OK) {
        size_t got = fread(block, sizeof(float), n_floats, f);
        /* The size was checked up front; a short read now means the file changed or failed. */
        if (got != n_floats || fgetc(f) != EOF)
            st = gr_fail(GR_ERR_IO, "%s: read %zu of %zu floats at offset %zu (file changed or "
                         "read error)", path, got, n_floats, header_bytes);
    }
    fclose(f);
    if (st != GR_OK) {
        free(block);
        return st;
    }
    gr_net_attach_weights(net, block, n_floats);
    net->synthetic = 0;
    return GR_OK;
}

gr_status gr_net_save_weights(const gr_net *net, const char *path)
{
    if (!net || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_save_weights: NULL argument");
    size_t n_floats;
    GR_TRY(gr_net_param_floats(net, &n_floats));
    if (!net->weight_block || net->n_weight_floats != n_floats)
        return gr_fail(GR_ERR_STATE, "%s: no weights to save (load or synthesize them first)",
                       net->name);
    if (!gr_host_is_little_endian())
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: writing .weights needs a little-endian host",
                       path);
    /* Version 0.2.0 (what Darknet writes): 64-bit `seen`, here 0. */
    const uint8_t header[20] = {0, 0, 0, 0, 2, 0, 0, 0, 0};
    const void *parts[2] = {header, net->weight_block};
    const size_t lens[2] = {sizeof header, n_floats * sizeof(float)};
    return gr_write_file_parts_atomic(path, parts, lens, 2, "weights file");
}
