/* INT8 calibration cache (format and validation rules in calib_cache.h): a file is used only
 * once all of it has been checked, checksum first. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/precision/calib_cache.h"
#include "base/bytes.h"
#include "runtime/image/image.h"

/* File name without its directory: the same photos in another folder are the same set. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static gr_status hash_images(const char *const *paths, int n, uint64_t *out)
{
    uint64_t h = GR_FNV1A_INIT;
    for (int i = 0; i < n; i++) {
        char *bytes = NULL;
        size_t size = 0;
        GR_TRY(gr_read_regular_file(paths[i], GR_MAX_IMAGE_FILE_BYTES, "calibration image", &bytes,
                                    &size));
        const char *name = base_name(paths[i]);
        h = gr_fnv1a(h, name, strlen(name) + 1);
        uint64_t size64 = size;
        h = gr_fnv1a(h, &size64, sizeof size64);
        h = gr_fnv1a(h, bytes, size);
        free(bytes);
    }
    *out = h;
    return GR_OK;
}

gr_status gr_calib_key_make(const gr_net *net, gr_preprocess how, gr_calib_method method,
                            float percentile, const char *const *paths, int n_images,
                            gr_calib_key *key)
{
    uint64_t h = GR_FNV1A_INIT;
    int dims[3] = {net->w, net->h, net->c};
    h = gr_fnv1a(h, dims, sizeof dims);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        int fields[12] = {(int)l->p.op, (int)l->p.activation, l->p.filters, l->p.size, l->p.stride,
                          l->p.pad, l->p.groups, l->p.batch_normalize, l->out.c, l->out.h,
                          l->out.w, l->n_inputs};
        h = gr_fnv1a(h, fields, sizeof fields);
        h = gr_fnv1a(h, l->inputs, (size_t)l->n_inputs * sizeof l->inputs[0]);
    }
    if (net->weight_block)
        h = gr_fnv1a(h, net->weight_block, net->n_weight_floats * sizeof(float));
    if (how == GR_PREPROCESS_STRETCH) /* other input values; letterboxed keys stay as they were */
        h = gr_fnv1a(h, "stretch", 7);
    else if (how == GR_PREPROCESS_LETTERBOX_114)
        h = gr_fnv1a(h, "letterbox114", 12);
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

/* A cache's text, line by line. */
typedef struct cache_text {
    const char *origin, *text;
    size_t len, pos;
    int lineno;
    char line[512];
} cache_text;

/* The next line into t->line without its '\n': 1, or 0 past the end or for a line that does not
 * fit or holds a NUL (a corrupt file either way). */
static int next_line(cache_text *t)
{
    if (t->pos >= t->len)
        return 0;
    const char *start = t->text + t->pos, *nl = memchr(start, '\n', t->len - t->pos);
    size_t n = nl ? (size_t)(nl - start) : t->len - t->pos;
    t->pos += n + (nl != NULL);
    t->lineno++;
    if (n >= sizeof t->line || memchr(start, '\0', n))
        return 0;
    memcpy(t->line, start, n);
    t->line[n] = '\0';
    return 1;
}

/* Corrupt (not stale, not another key): the caller calibrates again and replaces the file. */
static gr_status corrupt(const cache_text *t, int lineno, const char *what, char *notice,
                         size_t notice_len)
{
    snprintf(notice, notice_len,
             "%s:%d: corrupt calibration cache (%s): ignored, calibrating again and replacing it",
             t->origin, lineno, what);
    return GR_OK;
}

/* "<word><float>" and nothing else; the value must be finite and within [lo, hi]. */
static int parse_range(const char *text, float lo, float hi, float *out, char *why, size_t why_len)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE) {
        snprintf(why, why_len, "'%.40s' is not a number", text);
        return 0;
    }
    if (!isfinite(v) || v < lo || v > hi) {
        snprintf(why, why_len, "range %.9g outside [%g, %g]", (double)v, (double)lo,
                 (double)hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* The checksum line must be the last; its line number in *lineno, the checked prefix in *body. */
static int checksum_ok(const char *text, size_t len, int *lineno, size_t *body)
{
    size_t end = len > 0 && text[len - 1] == '\n' ? len - 1 : len, start = end;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    *lineno = 1;
    for (size_t i = 0; i < start; i++)
        *lineno += text[i] == '\n';
    *body = start;
    char line[32], hex[17];
    int used = 0;
    uint64_t want = 0;
    if (end == len || end - start != 25) /* no final newline, or not "checksum <16 hex>" */
        return 0;
    memcpy(line, text + start, 25);
    line[25] = '\0';
    if (sscanf(line, "checksum %16[0-9a-f]%n", hex, &used) != 1 || used != 25 ||
        sscanf(hex, "%" SCNx64, &want) != 1)
        return 0;
    return gr_fnv1a(GR_FNV1A_INIT, text, start) == want;
}

/* Lines 2..5: the key (another key is an error) and the input range. */
static gr_status parse_head(cache_text *t, const gr_calib_key *key, float *input_range,
                            char *notice, size_t notice_len)
{
    char name[128], want_method[64], why[160];
    method_str(key, want_method, sizeof want_method);
    uint64_t hash = 0, images_hash = 0;
    int images = 0, end = 0;
    if (!next_line(t) || sscanf(t->line, "model %127s %" SCNx64 "%n", name, &hash, &end) != 2 ||
        t->line[end] != '\0')
        return corrupt(t, t->lineno, "expected 'model <name> <hash>'", notice, notice_len);
    if (hash != key->hash)
        return gr_fail(GR_ERR_PARSE,
                       "%s:%d: calibration cache is for a different model (%s, hash %016" PRIx64
                       "; this model %s has %016" PRIx64 "): delete it or pass another path",
                       t->origin, t->lineno, name, hash, key->name, key->hash);
    if (!next_line(t) || strncmp(t->line, "method ", 7) != 0)
        return corrupt(t, t->lineno, "expected 'method <name>'", notice, notice_len);
    if (strcmp(t->line + 7, want_method) != 0)
        return gr_fail(GR_ERR_PARSE,
                       "%s:%d: calibration cache was made with method '%.60s', this build asks "
                       "for '%s': delete it or pass another path",
                       t->origin, t->lineno, t->line + 7, want_method);
    end = 0;
    if (!next_line(t) ||
        sscanf(t->line, "images %d %" SCNx64 "%n", &images, &images_hash, &end) != 2 ||
        t->line[end] != '\0' || images < 1)
        return corrupt(t, t->lineno, "expected 'images <count> <hash>'", notice, notice_len);
    if (images != key->n_images || images_hash != key->images_hash)
        return gr_fail(GR_ERR_PARSE,
                       "%s:%d: calibration cache was made from another image set (%d images, "
                       "hash %016" PRIx64 "; these %d images have %016" PRIx64
                       "): delete it or pass another path",
                       t->origin, t->lineno, images, images_hash, key->n_images, key->images_hash);
    if (!next_line(t) || strncmp(t->line, "input ", 6) != 0)
        return corrupt(t, t->lineno, "expected 'input <range>'", notice, notice_len);
    if (!parse_range(t->line + 6, GR_CALIB_INPUT_MIN, 1.0f, input_range, why, sizeof why))
        return corrupt(t, t->lineno, why, notice, notice_len);
    return GR_OK;
}

/* Lines 6..: exactly one "layer <i> <range>" per layer, in order, then the checksum line. */
static gr_status parse_layers(cache_text *t, int n_layers, int checksum_line, float *layer_range,
                              char *notice, size_t notice_len)
{
    char why[160];
    for (int i = 0; i < n_layers; i++) {
        int index = -1, end = 0;
        if (!next_line(t) || t->lineno >= checksum_line ||
            sscanf(t->line, "layer %d %n", &index, &end) != 1 || index != i || end == 0) {
            snprintf(why, sizeof why, "expected 'layer %d <range>' (the model has %d layers)", i,
                     n_layers);
            return corrupt(t, t->lineno, why, notice, notice_len);
        }
        if (!parse_range(t->line + end, GR_CALIB_RANGE_MIN, GR_CALIB_RANGE_MAX, &layer_range[i],
                         why, sizeof why))
            return corrupt(t, t->lineno, why, notice, notice_len);
    }
    if (t->lineno + 1 != checksum_line)
        return corrupt(t, t->lineno + 1, "more lines than the model's layers", notice, notice_len);
    return GR_OK;
}

gr_status gr_calib_cache_parse(const char *origin, const char *text, size_t len,
                               const gr_calib_key *key, int n_layers, float *layer_range,
                               float *input_range, int *found, char *notice, size_t notice_len)
{
    *found = 0;
    notice[0] = '\0';
    cache_text t = {.origin = origin, .text = text, .len = len};
    int version = 0, end = 0;
    if (!next_line(&t) || sscanf(t.line, "graphrun-calibration %d%n", &version, &end) != 1 ||
        t.line[end] != '\0')
        return gr_fail(GR_ERR_PARSE, "%s:1: not a graphrun calibration cache: delete it or pass "
                       "another path", origin);
    if (version == 1 || version == 2) { /* no checksum (version 1: no image set): not trusted */
        snprintf(notice, notice_len,
                 "%s: calibration cache from an older graphrun (version %d, no checksum): "
                 "ignored, calibrating again and replacing it",
                 origin, version);
        return GR_OK;
    }
    if (version != 3)
        return gr_fail(GR_ERR_PARSE, "%s:1: calibration cache version %d (this graphrun reads 3): "
                       "delete it or pass another path", origin, version);
    int checksum_line;
    size_t body;
    if (!checksum_ok(text, len, &checksum_line, &body))
        return corrupt(&t, checksum_line, "checksum line missing or wrong: edited or truncated",
                       notice, notice_len);
    float input = 0.0f;
    float *ranges = malloc(((size_t)n_layers + 1) * sizeof *ranges);
    if (!ranges)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: calibration cache: out of memory", origin);
    gr_status st = parse_head(&t, key, &input, notice, notice_len);
    if (st == GR_OK && !notice[0])
        st = parse_layers(&t, n_layers, checksum_line, ranges, notice, notice_len);
    if (st == GR_OK && !notice[0]) { /* nothing is used before the whole file is checked */
        memcpy(layer_range, ranges, (size_t)n_layers * sizeof *ranges);
        *input_range = input;
        *found = 1;
    }
    free(ranges);
    return st;
}

gr_status gr_calib_cache_read(const char *path, const gr_calib_key *key, int n_layers,
                              float *layer_range, float *input_range, int *found, char *notice,
                              size_t notice_len)
{
    *found = 0;
    notice[0] = '\0';
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return GR_OK; /* none yet: the build calibrates and writes it */
    char *text = NULL;
    size_t len = 0;
    GR_TRY(gr_read_regular_file(path, GR_CALIB_CACHE_MAX_BYTES, "calibration cache", &text,
                                &len));
    gr_status st = gr_calib_cache_parse(path, text, len, key, n_layers, layer_range, input_range,
                                        found, notice, notice_len);
    free(text);
    return st;
}

/* Appends to buf (cap bytes); returns the new length, cap on overflow. */
static size_t append(char *buf, size_t used, size_t cap, const char *fmt, ...) GR_PRINTF(4, 5);
static size_t append(char *buf, size_t used, size_t cap, const char *fmt, ...)
{
    if (used >= cap)
        return cap;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= cap - used ? cap : used + (size_t)n;
}

/* The name is informational (the hash is the key): one token of at most 100 printable bytes. */
static void name_token(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (; name && name[n] && n + 1 < cap && n < 100; n++)
        out[n] = (unsigned char)name[n] <= 0x20 || (unsigned char)name[n] >= 0x7f ? '_' : name[n];
    out[n] = '\0';
    if (n == 0)
        snprintf(out, cap, "unnamed");
}

static double written_range(float r) { return r == 0.0f ? 1.0 : (double)r; }

gr_status gr_calib_cache_write(const char *path, const gr_calib_key *key, int n_layers,
                               const float *layer_range, float input_range)
{
    char method[64], name[128];
    method_str(key, method, sizeof method);
    name_token(key->name, name, sizeof name);
    /* Bounded lines: header and key under 512 bytes, a layer line under 48, the checksum 26. */
    size_t cap = 512 + (size_t)n_layers * 48 + 32;
    char *text = malloc(cap);
    if (!text)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: calibration cache: out of memory", path);
    size_t used = append(text, 0, cap,
                         "graphrun-calibration 3\nmodel %s %016" PRIx64 "\nmethod %s\nimages %d "
                         "%016" PRIx64 "\ninput %.9g\n",
                         name, key->hash, method, key->n_images,
                         key->images_hash, written_range(input_range));
    for (int i = 0; i < n_layers; i++)
        used = append(text, used, cap, "layer %d %.9g\n", i, written_range(layer_range[i]));
    used = append(text, used, cap, "checksum %016" PRIx64 "\n",
                  gr_fnv1a(GR_FNV1A_INIT, text, used));
    gr_status st = used >= cap
                       ? gr_fail(GR_ERR_INTERNAL, "%s: calibration cache: text overflow", path)
                       : gr_write_file_atomic(path, text, used, "calibration cache");
    free(text);
    return st;
}
