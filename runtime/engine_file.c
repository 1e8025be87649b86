/* Saved engines: gr_engine_save writes everything a start needs - the network with its weights
 * and class names, the options that shaped the plan, the precision map, the int8 ranges and the
 * backend's blob (the GPU's chosen conv tactics and its device weights, runtime/saved_gpu.h) -
 * and gr_engine_load rebuilds the engine from them through the one build path (build.c) without
 * calibrating or searching. The plan is made again (its structure only where the blob holds the
 * device weights, which are uploaded as they are: docs/performance.md, "Saved engines").
 *
 * A file is trusted only whole: magic, format and graphrun version, the device it was built for
 * (a GPU engine needs the same GPU model, SM count, CUDA runtime, driver and cuBLASLt, since its
 * tactics were chosen there; a CPU engine loads anywhere), its exact length and the checksum are
 * checked before any content is read, and the content is checked again as it is read (the
 * network as the parser would, see models/net_file.c). Layout: runtime/engine_file.h.
 *
 * A load from a mapped file does not copy the network's fp32 weights: they stay in the mapping
 * (64-byte aligned by the writer), which the engine owns from then on (gr_engine.weight_file,
 * released after its network). A load from memory copies them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/engine_file.h"
#include "runtime/precision/calib_cache.h"

#define VERSION_LEN 16
#define NAME_LEN 128

void gr_free(void *p) { free(p); }

const gr_model *gr_engine_model(const gr_engine *engine) { return engine ? &engine->model_view : NULL; }

/* ---- the device ------------------------------------------------------------------------------ */

static gr_status identity_of(gr_device device, int gpu_index, gr_device_identity *id)
{
    memset(id, 0, sizeof *id);
    id->kind = device;
    return device == GR_DEVICE_GPU ? gr_gpu_device_identity(gpu_index, id) : GR_OK;
}

gr_status gr_engine_file_check_device(const gr_device_identity *file, const gr_device_identity *here,
                                      const char *source)
{
    if (file->kind == GR_DEVICE_CPU)
        return GR_OK;
    if (here->kind != GR_DEVICE_GPU)
        return gr_fail(GR_ERR_NO_DEVICE, "%s: built for sm_%d (%s), this machine has no usable "
                       "GPU (a GPU engine runs on the GPU it was built for)",
                       source, file->sm, file->name);
    const char *what = NULL;
    char built[160], is[160];
    if (file->sm != here->sm || strcmp(file->name, here->name) != 0) {
        what = "GPU";
        snprintf(built, sizeof built, "sm_%d (%s)", file->sm, file->name);
        snprintf(is, sizeof is, "sm_%d (%s)", here->sm, here->name);
    } else if (file->sm_count != here->sm_count) {
        what = "GPU";
        snprintf(built, sizeof built, "%d SMs", file->sm_count);
        snprintf(is, sizeof is, "%d SMs", here->sm_count);
    } else if (file->cuda_runtime != here->cuda_runtime) {
        what = "CUDA runtime";
        snprintf(built, sizeof built, "CUDA runtime %d", file->cuda_runtime);
        snprintf(is, sizeof is, "%d", here->cuda_runtime);
    } else if (file->cuda_driver != here->cuda_driver) {
        what = "driver";
        snprintf(built, sizeof built, "driver %d", file->cuda_driver);
        snprintf(is, sizeof is, "%d", here->cuda_driver);
    } else if (file->cublaslt != here->cublaslt) {
        what = "cuBLASLt";
        snprintf(built, sizeof built, "cuBLASLt %llu", (unsigned long long)file->cublaslt);
        snprintf(is, sizeof is, "%llu", (unsigned long long)here->cublaslt);
    }
    if (!what)
        return GR_OK;
    return gr_fail(GR_ERR_UNSUPPORTED, "%s: built for %s, this %s is %s (rebuild the engine here)",
                   source, built, what, is);
}

/* ---- saving ---------------------------------------------------------------------------------- */

static void put_fixed(gr_bytes *b, const char *s, size_t len)
{
    char buf[NAME_LEN] = {0};
    snprintf(buf, len, "%s", s);
    gr_bytes_put(b, buf, len);
}

static void put_header(gr_bytes *b, const gr_device_identity *id)
{
    gr_bytes_put(b, GR_ENGINE_FILE_MAGIC, 8);
    gr_bytes_u32(b, GR_ENGINE_FILE_VERSION);
    put_fixed(b, gr_version(), VERSION_LEN);
    gr_bytes_u32(b, (uint32_t)id->kind);
    gr_bytes_u32(b, (uint32_t)id->sm);
    put_fixed(b, id->name, NAME_LEN);
    gr_bytes_i32(b, id->cuda_runtime);
    gr_bytes_i32(b, id->cuda_driver);
    gr_bytes_i32(b, id->sm_count);
    gr_bytes_u64(b, id->cublaslt);
    gr_bytes_u64(b, 0); /* content bytes: set once known */
}

/* The options that shaped the plan (and the run-time ones, the defaults of a load without
 * options), field by field. */
static void put_options(gr_bytes *b, const gr_engine *e)
{
    const gr_engine_options *o = &e->opt;
    const int ints[] = {(int)e->device,    (int)o->precision, o->batch,           o->gpu_index,
                        o->use_cuda_graph, o->tf32,           o->fp16_accumulate, (int)o->calib_method,
                        o->nonfinite_is_error, o->inflight,   o->tactic_search,   (int)o->f32_algo,
                        (int)o->f32_split_k, (int)o->pdl,     (int)o->gemm_tactic, e->observable};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        gr_bytes_i32(b, ints[k]);
    gr_bytes_f32(b, o->calib_percentile);
    gr_bytes_f32(b, o->max_nrmse);
    gr_bytes_i32(b, (int)o->preprocess); /* format 4 on: resolved, LETTERBOX or STRETCH */
}

static gr_status put_content(gr_bytes *b, const gr_engine *e)
{
    const gr_net *net = e->net;
    gr_bytes_str(b, e->notice);
    put_options(b, e);
    GR_TRY(gr_net_write(net, b));
    gr_bytes_u32(b, e->layer_prec != NULL);
    for (int i = 0; e->layer_prec && i < net->n_layers; i++)
        gr_bytes_i32(b, (int)e->layer_prec[i]);
    gr_bytes_u32(b, e->layer_range != NULL);
    gr_bytes_f32(b, e->input_range);
    for (int i = 0; e->layer_range && i < net->n_layers; i++)
        gr_bytes_f32(b, e->layer_range[i]);
    gr_bytes blob = {0};
    gr_status st = e->ops->save_blob(e, &blob);
    if (st == GR_OK && blob.failed)
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "gr_engine_save: out of memory (backend blob)");
    gr_bytes_u64(b, blob.len);
    gr_bytes_put(b, blob.data, blob.len);
    gr_bytes_free(&blob);
    return st;
}

gr_status gr_engine_save_to_memory(const gr_engine *engine, void **data, size_t *bytes)
{
    if (!engine || !data || !bytes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_save_to_memory: NULL argument");
    *data = NULL;
    *bytes = 0;
    if (engine->failed)
        return gr_fail(GR_ERR_STATE, "gr_engine_save: the engine is unusable after an earlier "
                       "failure: %s", engine->error);
    /* The weights it would write. The view is the engine's (a save reads the engine as a run
     * does, on one thread): the check may remember a touched file's new mtime. */
    GR_TRY(gr_file_view_check((gr_file_view *)&engine->weight_file));
    gr_device_identity id;
    GR_TRY(identity_of(engine->device, engine->opt.gpu_index, &id));
    gr_bytes b = {0};
    put_header(&b, &id);
    gr_status st = put_content(&b, engine);
    if (st == GR_OK && b.failed)
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "gr_engine_save: out of memory (%zu bytes written)",
                     b.len);
    if (st != GR_OK) {
        gr_bytes_free(&b);
        return st;
    }
    uint64_t content = b.len - GR_ENGINE_FILE_HEADER;
    for (int k = 0; k < 8; k++)
        b.data[GR_ENGINE_FILE_OFF_CONTENT_BYTES + k] = (uint8_t)(content >> (8 * k));
    gr_bytes_u64(&b, gr_hash64(b.data, b.len));
    if (b.failed) {
        gr_bytes_free(&b);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "gr_engine_save: out of memory (checksum)");
    }
    *data = b.data;
    *bytes = b.len;
    return GR_OK;
}

gr_status gr_engine_save(const gr_engine *engine, const char *path)
{
    if (!engine || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_save: NULL %s", engine ? "path" : "engine");
    void *data = NULL;
    size_t bytes = 0;
    GR_TRY(gr_engine_save_to_memory(engine, &data, &bytes));
    gr_status st = gr_write_file_atomic(path, data, bytes, "engine file");
    free(data);
    return st;
}

/* ---- loading --------------------------------------------------------------------------------- */

typedef struct file_header {
    uint32_t version; /* GR_ENGINE_FILE_OLDEST_VERSION .. GR_ENGINE_FILE_VERSION */
    gr_device_identity id;
    uint64_t content;
} file_header;

/* A fixed-size text field of field_len bytes into out (field_len + 1 bytes), NUL-terminated and
 * with control characters shown as '?' (it goes into messages). */
static void get_fixed(gr_reader *r, char *out, size_t field_len)
{
    gr_reader_get(r, out, field_len);
    out[field_len] = '\0';
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
            *c = '?';
}

static gr_status read_header(const uint8_t *p, size_t len, const char *source, file_header *h)
{
    if (len < 8 || memcmp(p, GR_ENGINE_FILE_MAGIC, 8) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: not a graphrun engine file (no \"%s\" magic)", source,
                       GR_ENGINE_FILE_MAGIC);
    if (len < GR_ENGINE_FILE_HEADER)
        return gr_fail(GR_ERR_PARSE, "%s: truncated: %zu bytes, the header alone is %d", source,
                       len, GR_ENGINE_FILE_HEADER);
    gr_reader r = {p, len, 8, 0};
    uint32_t version = gr_reader_u32(&r);
    if (version < GR_ENGINE_FILE_OLDEST_VERSION || version > GR_ENGINE_FILE_VERSION)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: engine file format %u, this graphrun reads format "
                       "%d to %d (rebuild the engine)", source, version,
                       GR_ENGINE_FILE_OLDEST_VERSION, GR_ENGINE_FILE_VERSION);
    h->version = version;
    char built_by[VERSION_LEN + 1];
    get_fixed(&r, built_by, VERSION_LEN);
    if (strcmp(built_by, gr_version()) != 0)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: built by graphrun %s, this is graphrun %s (rebuild "
                       "the engine)", source, built_by, gr_version());
    uint32_t kind = gr_reader_u32(&r);
    if (kind != GR_DEVICE_CPU && kind != GR_DEVICE_GPU)
        return gr_fail(GR_ERR_PARSE, "%s: device kind %u is neither CPU (%d) nor GPU (%d): file "
                       "corrupt", source, kind, GR_DEVICE_CPU, GR_DEVICE_GPU);
    h->id.kind = (gr_device)kind;
    h->id.sm = (int)gr_reader_u32(&r);
    char name[NAME_LEN + 1];
    get_fixed(&r, name, NAME_LEN);
    name[sizeof h->id.name - 1] = '\0'; /* the writer wrote at most this much (put_fixed) */
    memcpy(h->id.name, name, sizeof h->id.name);
    h->id.cuda_runtime = gr_reader_i32(&r);
    h->id.cuda_driver = gr_reader_i32(&r);
    h->id.sm_count = gr_reader_i32(&r);
    h->id.cublaslt = gr_reader_u64(&r);
    h->content = gr_reader_u64(&r);
    return GR_OK;
}

/* The exact length the header announces, then the checksum over everything before it. */
static gr_status check_whole(const uint8_t *p, size_t len, const char *source, uint64_t content)
{
    size_t fixed = GR_ENGINE_FILE_HEADER + 8;
    if (len < fixed || content > len - fixed)
        return gr_fail(GR_ERR_PARSE, "%s: truncated: %zu bytes, the header says %llu", source, len,
                       (unsigned long long)content + fixed);
    if (content != len - fixed)
        return gr_fail(GR_ERR_PARSE, "%s: %zu bytes, the header says %llu: file corrupt", source,
                       len, (unsigned long long)content + fixed);
    gr_reader r = {p, len, len - 8, 0};
    if (gr_reader_u64(&r) != gr_hash64(p, len - 8))
        return gr_fail(GR_ERR_PARSE, "%s: checksum mismatch: file corrupt", source);
    return GR_OK;
}

/* What the content holds, owned until the engine is built. */
typedef struct saved_engine {
    char notice[GR_NOTICE_LEN];
    gr_engine_options opt;
    gr_device device;
    int observable;
    gr_net *net;
    gr_precision *map;
    float *ranges;
    float input_range;
    const uint8_t *blob;
    size_t blob_len;
} saved_engine;

static gr_status read_options(gr_reader *r, const char *source, uint32_t version,
                               saved_engine *s)
{
    gr_engine_options *o = &s->opt;
    gr_engine_options_default(o);
    int v[16];
    for (int k = 0; k < 16; k++)
        v[k] = gr_reader_i32(r);
    s->device = (gr_device)v[0];
    o->device = s->device;
    o->precision = (gr_precision)v[1];
    o->batch = v[2];
    o->gpu_index = v[3];
    o->use_cuda_graph = v[4];
    o->tf32 = v[5];
    o->fp16_accumulate = v[6];
    o->calib_method = (gr_calib_method)v[7];
    o->nonfinite_is_error = v[8];
    o->inflight = v[9];
    o->tactic_search = v[10];
    o->f32_algo = (gr_f32_algo)v[11];
    o->f32_split_k = (gr_toggle)v[12];
    o->pdl = (gr_toggle)v[13];
    o->gemm_tactic = (gr_toggle)v[14];
    s->observable = v[15] != 0;
    o->calib_percentile = gr_reader_f32(r);
    o->max_nrmse = gr_reader_f32(r);
    /* Format 3 had no preprocessing: its engines letterboxed every image. */
    int32_t how = version >= 4 ? gr_reader_i32(r) : GR_PREPROCESS_LETTERBOX;
    if (!r->short_read && how != GR_PREPROCESS_LETTERBOX && how != GR_PREPROCESS_STRETCH &&
        how != GR_PREPROCESS_LETTERBOX_114)
        return gr_fail(GR_ERR_PARSE, "%s: preprocessing %d is not letterbox (%d), stretch (%d) "
                       "or letterbox114 (%d): file corrupt", source, (int)how,
                       GR_PREPROCESS_LETTERBOX, GR_PREPROCESS_STRETCH,
                       GR_PREPROCESS_LETTERBOX_114);
    o->preprocess = (gr_preprocess)how;
    if (!r->short_read && ((v[0] != GR_DEVICE_CPU && v[0] != GR_DEVICE_GPU) ||
                           (unsigned)v[1] > GR_PREC_INT8))
        return gr_fail(GR_ERR_PARSE, "%s: device %d or precision %d is not one an engine is built "
                       "with: file corrupt", source, v[0], v[1]);
    return GR_OK; /* the rest is checked by the build (gr_engine_validate) */
}

/* An int8 range as the calibration cache bounds it (runtime/precision/calib_cache.h): a clipping
 * threshold, 0 where nothing non-zero was seen (a layer not calibrated). */
static int range_ok(float r, float hi)
{
    return r == 0.0f || (r >= GR_CALIB_RANGE_MIN && r <= hi);
}

/* The precision map and the int8 ranges, n_layers entries each when present. */
static gr_status read_map_and_ranges(gr_reader *r, const char *source, saved_engine *s)
{
    int n = s->net->n_layers;
    if (gr_reader_u32(r)) {
        s->map = gr_malloc((size_t)n * sizeof *s->map, "precision map");
        if (!s->map)
            return GR_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < n; i++) {
            int32_t p = gr_reader_i32(r);
            if (!r->short_read && (p < GR_PREC_FP32 || p > GR_PREC_INT8))
                return gr_fail(GR_ERR_PARSE, "%s: layer %d: precision %d: file corrupt", source, i,
                               (int)p);
            s->map[i] = (gr_precision)p;
        }
    }
    int has_ranges = gr_reader_u32(r) != 0;
    s->input_range = gr_reader_f32(r);
    if (has_ranges) {
        s->ranges = gr_malloc((size_t)n * sizeof *s->ranges, "calibration ranges");
        if (!s->ranges)
            return GR_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < n; i++)
            s->ranges[i] = gr_reader_f32(r);
        for (int i = 0; i < n && !r->short_read; i++)
            if (!range_ok(s->ranges[i], GR_CALIB_RANGE_MAX))
                return gr_fail(GR_ERR_PARSE, "%s: layer %d: int8 range %g is neither 0 nor in "
                               "[%g, %g]: file corrupt", source, i, (double)s->ranges[i],
                               (double)GR_CALIB_RANGE_MIN, (double)GR_CALIB_RANGE_MAX);
    }
    if (!r->short_read && !range_ok(s->input_range, 1.0f))
        return gr_fail(GR_ERR_PARSE, "%s: the input's int8 range %g is neither 0 nor in [%g, 1] "
                       "(pixels are 0..1): file corrupt", source, (double)s->input_range,
                       (double)GR_CALIB_RANGE_MIN);
    return GR_OK;
}

/* The stored notice goes to a terminal: control characters (C0, DEL, and the C1 controls as
 * UTF-8, U+0080..U+009F: U+009B is a CSI to some terminals) and malformed UTF-8 are shown as '?'
 * byte for byte; line breaks stay (one line per notice). */
static void sanitize_notice(char *s)
{
    for (unsigned char *c = (unsigned char *)s; *c;) {
        int n = *c < 0x80 ? 1 : *c >= 0xc2 && *c < 0xe0 ? 2 : *c >= 0xe0 && *c < 0xf0 ? 3
                : *c >= 0xf0 && *c < 0xf5 ? 4 : 0;
        int ok = n > 0;
        for (int k = 1; ok && k < n; k++)
            ok = (c[k] & 0xc0) == 0x80;
        if (n == 1)
            ok = *c == '\n' || (*c >= 0x20 && *c != 0x7f);
        else if (ok && n == 2)
            ok = !(c[0] == 0xc2 && c[1] < 0xa0);
        if (!ok) {
            *c++ = '?';
            continue;
        }
        c += n;
    }
}

static gr_status read_content(gr_reader *r, const char *source, uint32_t version, int borrow,
                               saved_engine *s)
{
    gr_reader_str(r, s->notice, sizeof s->notice);
    sanitize_notice(s->notice);
    GR_TRY(read_options(r, source, version, s));
    if (r->short_read)
        return GR_OK;
    GR_TRY(gr_net_read(r, source, borrow, version >= 5, &s->net));
    /* The options as a build checks the caller's (enums, counts): in a file, corruption. */
    if (gr_engine_validate(s->net, &s->opt) != GR_OK)
        return gr_fail_prefix(GR_ERR_PARSE, "%s: ", source);
    GR_TRY(read_map_and_ranges(r, source, s));
    uint64_t blob_len = gr_reader_u64(r);
    s->blob = blob_len <= r->len - r->pos ? gr_reader_take(r, (size_t)blob_len)
                                          : gr_reader_take(r, r->len - r->pos + 1);
    s->blob_len = s->blob ? (size_t)blob_len : 0;
    return GR_OK;
}

static void saved_free(saved_engine *s)
{
    gr_net_free(s->net);
    free(s->map);
    free(s->ranges);
}

/* The caller's run-time options over the file's (NULL: the file's, as built). */
static void apply_runtime_options(gr_engine_options *o, const gr_engine_options *caller)
{
    if (!caller)
        return;
    o->gpu_index = caller->gpu_index;
    o->inflight = caller->inflight;
    o->use_cuda_graph = caller->use_cuda_graph;
    o->nonfinite_is_error = caller->nonfinite_is_error;
}

/* The build's notice lines, each marked as the build's: a load calibrated and searched nothing.
 * A line a loaded engine kept from its own file is marked already (an engine saved again). */
static void build_notice(const char *stored, char *out, size_t len)
{
    static const char mark[] = "at build: ";
    size_t used = 0;
    out[0] = '\0';
    for (const char *line = stored; *line && used < len;) {
        const char *end = strchr(line, '\n');
        int n = end ? (int)(end - line) : (int)strlen(line);
        const char *prefix = strncmp(line, mark, sizeof mark - 1) == 0 ? "" : mark;
        int w = snprintf(out + used, len - used, "%s%s%.*s", used ? "\n" : "", prefix, n, line);
        used += w > 0 ? (size_t)w : 0;
        line += n + (end != NULL);
    }
}

/* The engine takes s->net (set to NULL here). */
static gr_status build_saved(saved_engine *s, const gr_engine_options *caller,
                             const char *source, gr_engine **out)
{
    if (s->opt.precision == GR_PREC_INT8 && !s->ranges)
        return gr_fail(GR_ERR_PARSE, "%s: an int8 engine without its int8 ranges: file corrupt",
                       source);
    gr_build_request req = {.net = s->net, .adopt_net = s->net, .opt = s->opt,
                            .device = s->device};
    s->net = NULL;
    apply_runtime_options(&req.opt, caller);
    req.layer_precision = s->map;
    req.layer_range = s->ranges;
    req.input_range = s->input_range;
    req.observable = s->observable;
    char notice[GR_NOTICE_LEN];
    build_notice(s->notice, notice, sizeof notice);
    req.notice = notice;
    req.stored = 1;
    req.backend_blob = s->blob_len ? s->blob : NULL;
    req.backend_blob_len = s->blob_len;
    gr_status st = gr_engine_create(&req, out);
    if (st != GR_OK)
        gr_fail_prefix(st, "%s: ", source);
    return st;
}

/* borrow: the network's weights may point into p, which the caller then keeps for the engine's
 * life when they do (engine->net->weights_borrowed). */
static gr_status load_buffer(const uint8_t *p, size_t len, const char *source,
                             const gr_engine_options *opt, int borrow, gr_engine **out)
{
    gr_engine_options caller;
    if (opt) { /* the caller's struct_size honoured (runtime.h, "Option structs") */
        GR_TRY(gr_engine_options_take(opt, &caller));
        opt = &caller;
    }
    file_header h;
    memset(&h, 0, sizeof h);
    GR_TRY(read_header(p, len, source, &h));
    gr_device_identity here;
    if (h.id.kind == GR_DEVICE_GPU) {
        int gpu_index = opt ? opt->gpu_index : 0;
        if (identity_of(GR_DEVICE_GPU, gpu_index, &here) != GR_OK)
            here.kind = GR_DEVICE_CPU; /* no usable GPU: said by the comparison */
    } else {
        identity_of(GR_DEVICE_CPU, 0, &here);
    }
    GR_TRY(gr_engine_file_check_device(&h.id, &here, source));
    GR_TRY(check_whole(p, len, source, h.content));
    saved_engine s;
    memset(&s, 0, sizeof s);
    gr_reader r = {p, len - 8, GR_ENGINE_FILE_HEADER, 0};
    gr_status st = read_content(&r, source, h.version, borrow, &s);
    if (st == GR_OK && (r.short_read || r.pos != r.len))
        st = gr_fail(GR_ERR_PARSE, "%s: the content %s at byte %zu of %zu: file corrupt", source,
                     r.short_read ? "ends early" : "has bytes left", r.pos, r.len);
    if (st == GR_OK && s.device != h.id.kind)
        st = gr_fail(GR_ERR_PARSE, "%s: the header says %s, the options %s: file corrupt", source,
                     h.id.kind == GR_DEVICE_GPU ? "GPU" : "CPU",
                     s.device == GR_DEVICE_GPU ? "GPU" : "CPU");
    if (st == GR_OK)
        st = build_saved(&s, opt, source, out);
    saved_free(&s);
    return st;
}

gr_status gr_engine_load_from_memory(const void *data, size_t bytes, const gr_engine_options *opt,
                                     gr_engine **out)
{
    if (!out || (!data && bytes > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_load_from_memory: NULL %s",
                       out ? "data" : "out");
    *out = NULL;
    /* Copied: the caller may free its buffer once the engine exists. */
    return load_buffer(data ? data : "", bytes, "engine in memory", opt, 0, out);
}

gr_status gr_engine_load(const char *path, const gr_engine_options *opt, gr_engine **out)
{
    if (!path || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_load: NULL %s", path ? "out" : "path");
    *out = NULL;
    gr_file_view file;
    GR_TRY(gr_file_view_open(path, GR_ENGINE_FILE_MAX_BYTES, "engine", &file));
    /* A mapped file lends the network its fp32 weights instead of their copy into fresh memory
     * (most of a load's file phase: docs/performance.md, "Saved engines"), and the engine keeps
     * the mapping until it is destroyed; a file that was read (a pipe) is copied from as memory
     * is. */
    gr_status st = load_buffer(file.data, file.len, path, opt, file.map != NULL, out);
    /* The checksum was of the bytes as they were: a file written meanwhile is refused too. The
     * trailing checksum, verified, lets a later check accept a touched file by its bytes. */
    file.has_sum = 0;
    if (st == GR_OK && (st = gr_file_view_check(&file)) != GR_OK) {
        gr_engine_destroy(*out);
        *out = NULL;
    }
    if (st == GR_OK && (*out)->net->weights_borrowed) {
        for (int k = 0; k < 8; k++)
            file.sum |= (uint64_t)file.data[file.len - 8 + k] << (8 * k);
        file.has_sum = 1;
        (*out)->weight_file = file;
    }
    else
        gr_file_view_release(&file);
    return st;
}
