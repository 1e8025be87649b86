/* A saved GPU engine's backend blob: runtime/saved_gpu.h. */
#include <string.h>

#include "runtime/saved_gpu.h"

void gr_saved_gpu_put(gr_bytes *b, const gr_saved_gpu *s)
{
    gr_bytes_put(b, GR_SAVED_GPU_MAGIC, 8);
    gr_bytes_u64(b, s->tactics_len);
    gr_bytes_put(b, s->tactics, s->tactics_len);
    gr_bytes_u32(b, (uint32_t)s->n_weights);
    for (int k = 0; k < s->n_weights; k++) {
        const gr_saved_weights *w = &s->weights[k];
        gr_bytes_u32(b, (uint32_t)w->input_u8);
        gr_bytes_u32(b, (uint32_t)w->micro_batch);
        gr_bytes_u64(b, w->layout);
        gr_bytes_u64(b, w->bytes);
        gr_bytes_put(b, w->data, w->bytes);
    }
}

/* n bytes at the reader, or NULL (a short read) when fewer are left. */
static const uint8_t *take(gr_reader *r, uint64_t n)
{
    if (n > r->len - r->pos) {
        r->short_read = 1;
        return NULL;
    }
    return gr_reader_take(r, (size_t)n);
}

gr_status gr_saved_gpu_parse(const uint8_t *p, size_t len, const char *source, gr_saved_gpu *out)
{
    memset(out, 0, sizeof *out);
    if (len < 8 || memcmp(p, GR_SAVED_GPU_MAGIC, 8) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: the GPU part does not start with \"%s\": file corrupt",
                       source, GR_SAVED_GPU_MAGIC);
    gr_reader r = {p, len, 8, 0};
    uint64_t n = gr_reader_u64(&r);
    out->tactics = (const char *)take(&r, n);
    out->tactics_len = out->tactics ? (size_t)n : 0;
    uint32_t k = gr_reader_u32(&r);
    if (!r.short_read && k > GR_SAVED_GPU_MAX_WEIGHTS)
        return gr_fail(GR_ERR_PARSE, "%s: %u sets of device weights, at most %d: file corrupt",
                       source, k, GR_SAVED_GPU_MAX_WEIGHTS);
    for (uint32_t i = 0; i < k && !r.short_read; i++) {
        gr_saved_weights *w = &out->weights[i];
        uint32_t u8 = gr_reader_u32(&r), micro = gr_reader_u32(&r);
        w->layout = gr_reader_u64(&r);
        uint64_t bytes = gr_reader_u64(&r);
        w->data = take(&r, bytes);
        w->bytes = w->data ? (size_t)bytes : 0;
        if (!r.short_read && (u8 > 1 || micro < 1 || micro > INT32_MAX ||
                              gr_saved_gpu_weights(out, (int)u8, (int)micro)))
            return gr_fail(GR_ERR_PARSE, "%s: device weights %u: input %u, micro-batch %u: file "
                           "corrupt", source, i, u8, micro);
        w->input_u8 = (int)u8;
        w->micro_batch = (int)micro;
        out->n_weights = (int)i + 1;
    }
    if (r.short_read || r.pos != len)
        return gr_fail(GR_ERR_PARSE, "%s: the GPU part %s at byte %zu of %zu: file corrupt",
                       source, r.short_read ? "ends early" : "has bytes left", r.pos, len);
    return GR_OK;
}

const gr_saved_weights *gr_saved_gpu_weights(const gr_saved_gpu *s, int input_u8, int micro_batch)
{
    for (int k = 0; s && k < s->n_weights; k++)
        if (s->weights[k].input_u8 == input_u8 && s->weights[k].micro_batch == micro_batch)
            return &s->weights[k];
    return NULL;
}
