/* Binary records in memory and atomic file writes (base/bytes.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/bytes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gr_bytes_put(gr_bytes *b, const void *p, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->failed = 1;
                return;
            }
            cap *= 2;
        }
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void gr_bytes_u32(gr_bytes *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gr_bytes_put(b, le, sizeof le);
}

void gr_bytes_i32(gr_bytes *b, int32_t v) { gr_bytes_u32(b, (uint32_t)v); }

void gr_bytes_u64(gr_bytes *b, uint64_t v)
{
    gr_bytes_u32(b, (uint32_t)v);
    gr_bytes_u32(b, (uint32_t)(v >> 32));
}

void gr_bytes_f32(gr_bytes *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    gr_bytes_u32(b, bits);
}

void gr_bytes_str(gr_bytes *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    gr_bytes_u32(b, (uint32_t)n);
    gr_bytes_put(b, s, n);
}

void gr_bytes_free(gr_bytes *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void gr_reader_get(gr_reader *r, void *out, size_t n)
{
    if (r->short_read || n > r->len - r->pos) {
        r->short_read = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
}

uint32_t gr_reader_u32(gr_reader *r)
{
    uint8_t le[4];
    gr_reader_get(r, le, sizeof le);
    return (uint32_t)le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
}

int32_t gr_reader_i32(gr_reader *r) { return (int32_t)gr_reader_u32(r); }

uint64_t gr_reader_u64(gr_reader *r)
{
    uint64_t lo = gr_reader_u32(r);
    return lo | (uint64_t)gr_reader_u32(r) << 32;
}

float gr_reader_f32(gr_reader *r)
{
    uint32_t bits = gr_reader_u32(r);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

void gr_reader_str(gr_reader *r, char *buf, size_t len)
{
    uint32_t n = gr_reader_u32(r);
    buf[0] = '\0';
    if (r->short_read || n >= len || n > r->len - r->pos) {
        r->short_read = 1;
        return;
    }
    memcpy(buf, r->p + r->pos, n);
    buf[n] = '\0';
    r->pos += n;
}

const uint8_t *gr_reader_take(gr_reader *r, size_t n)
{
    if (r->short_read || n > r->len - r->pos) {
        r->short_read = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint64_t gr_fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

gr_status gr_write_file_atomic(const char *path, const void *data, size_t len, const char *what)
{
    size_t tmp_len = strlen(path) + 32;
    char *tmp = malloc(tmp_len);
    if (!tmp)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory (%s)", path, what);
    /* Unique per process: two processes writing the same file never share a temporary. */
    snprintf(tmp, tmp_len, "%s.tmp%ld", path, (long)getpid());
    gr_status st = GR_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = gr_fail(GR_ERR_IO, "%s: cannot write the %s: %s", tmp, what, strerror(errno));
    } else {
        int bad = len > 0 && fwrite(data, 1, len, f) != len;
        int err = bad ? errno : 0;
        if (fclose(f) != 0 && !bad) {
            bad = 1;
            err = errno;
        }
        if (bad)
            st = gr_fail(GR_ERR_IO, "%s: write error (%s): %s", tmp, what,
                         err ? strerror(err) : "short write");
        else if (rename(tmp, path) != 0)
            st = gr_fail(GR_ERR_IO, "%s: cannot rename the %s into place: %s", path, what,
                         strerror(errno));
        if (st != GR_OK)
            remove(tmp);
    }
    free(tmp);
    return st;
}
