/* NumPy .npy I/O for float32 tensors (format spec: numpy.lib.format).
 *
 * Layout: magic "\x93NUMPY", major, minor, header length (uint16 LE in v1.0, uint32 LE in v2.0
 * and v3.0), then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), }
 * padded with spaces to a 64-byte boundary and ending in '\n', then the raw data.
 * The reader trusts nothing: it parses the dict with a small tokenizer, checks the dims against
 * graphrun's limits before allocating, and requires the data to be exactly the size the header
 * promises. The host is assumed little-endian, like the rest of graphrun. */
#include "tools/npy.h"

#include "base/bytes.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* Largest header accepted: NumPy itself caps v1 headers at 64 KiB; v2 allows more but a real
 * header for <= 32 dims is a few hundred bytes. */
#define NPY_MAX_HEADER (1u << 20)

gr_status gr_npy_write(const char *path, const float *data, const int *dims, int ndim)
{
    if (!path || ndim < 0 || ndim > GR_NPY_MAX_NDIM || (!dims && ndim > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_npy_write: bad arguments (ndim %d)", ndim);
    size_t elems = 1;
    char shape[GR_NPY_MAX_NDIM * 14 + 8];
    size_t used = 0;
    shape[used++] = '(';
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || !gr_mul_size(elems, (size_t)dims[i], &elems) ||
            elems > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad dimension %d = %d", path, i,
                           dims[i]);
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%d", i ? ", " : "",
                                 dims[i]);
    }
    snprintf(shape + used, sizeof shape - used, "%s)", ndim == 1 ? "," : "");
    if (!data && elems > 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL data", path);

    char header[512];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
    /* Pad with spaces so that magic (6) + version (2) + length (2) + header is a multiple of
     * 64, the last header byte being '\n'. */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t header_len = padded - 10;
    if (header_len >= sizeof header)
        return gr_fail(GR_ERR_INTERNAL, "%s: npy header too long", path);
    memset(header + len, ' ', header_len - (size_t)len - 1);
    header[header_len - 1] = '\n';

    gr_memfile out; /* written whole by rename (base/bytes.h) */
    FILE *f = gr_memfile_open(&out, path);
    if (!f)
        return GR_ERR_OUT_OF_MEMORY;
    uint8_t prefix[10];
    memcpy(prefix, npy_magic, 6);
    prefix[6] = 1;
    prefix[7] = 0;
    prefix[8] = (uint8_t)(header_len & 0xff);
    prefix[9] = (uint8_t)(header_len >> 8);
    fwrite(prefix, 1, sizeof prefix, f);
    fwrite(header, 1, header_len, f);
    if (elems > 0)
        fwrite(data, sizeof(float), elems, f);
    return gr_memfile_commit(&out, path, "npy array");
}

/* ---- reading --------------------------------------------------------------------------------- */

/* Cursor over the header text; `base` is the file offset of text[0] for messages. */
typedef struct npy_parser {
    const char *path;
    const char *text;
    size_t len, pos, base;
} npy_parser;

static gr_status parse_error(const npy_parser *ps, const char *what)
{
    return gr_fail(GR_ERR_PARSE, "%s: byte %zu: npy header: %s", ps->path, ps->base + ps->pos,
                   what);
}

static void skip_space(npy_parser *ps)
{
    while (ps->pos < ps->len && (ps->text[ps->pos] == ' ' || ps->text[ps->pos] == '\t'))
        ps->pos++;
}

static bool accept_char(npy_parser *ps, char c)
{
    skip_space(ps);
    if (ps->pos < ps->len && ps->text[ps->pos] == c) {
        ps->pos++;
        return true;
    }
    return false;
}

/* A quoted Python string literal (no escapes, which no valid key or dtype needs). */
static gr_status parse_string(npy_parser *ps, char *out, size_t cap)
{
    skip_space(ps);
    if (ps->pos >= ps->len || (ps->text[ps->pos] != '\'' && ps->text[ps->pos] != '"'))
        return parse_error(ps, "expected a quoted string");
    char quote = ps->text[ps->pos++];
    size_t n = 0;
    while (ps->pos < ps->len && ps->text[ps->pos] != quote) {
        if (n + 1 >= cap)
            return parse_error(ps, "string too long");
        out[n++] = ps->text[ps->pos++];
    }
    if (ps->pos >= ps->len)
        return parse_error(ps, "unterminated string");
    ps->pos++;
    out[n] = '\0';
    return GR_OK;
}

static gr_status parse_bool(npy_parser *ps, bool *out)
{
    skip_space(ps);
    const char *rest = ps->text + ps->pos;
    size_t left = ps->len - ps->pos;
    if (left >= 4 && memcmp(rest, "True", 4) == 0) {
        ps->pos += 4;
        *out = true;
    } else if (left >= 5 && memcmp(rest, "False", 5) == 0) {
        ps->pos += 5;
        *out = false;
    } else {
        return parse_error(ps, "expected True or False");
    }
    return GR_OK;
}

/* '(' [int {',' int} [',']] ')' with each int checked against GR_MAX_TENSOR_ELEMS. */
static gr_status parse_shape(npy_parser *ps, int *dims, int *ndim, int max_ndim)
{
    if (!accept_char(ps, '('))
        return parse_error(ps, "expected '(' to open the shape");
    *ndim = 0;
    size_t elems = 1;
    for (;;) {
        if (accept_char(ps, ')'))
            return GR_OK;
        skip_space(ps);
        if (ps->pos >= ps->len || ps->text[ps->pos] < '0' || ps->text[ps->pos] > '9')
            return parse_error(ps, "expected a non-negative integer dimension");
        size_t start = ps->pos;
        unsigned long long v = 0;
        while (ps->pos < ps->len && ps->text[ps->pos] >= '0' && ps->text[ps->pos] <= '9') {
            v = v * 10 + (unsigned long long)(ps->text[ps->pos] - '0');
            if (v > GR_MAX_TENSOR_ELEMS) {
                ps->pos = start;
                return gr_fail(GR_ERR_LIMIT, "%s: byte %zu: npy dimension exceeds %zu elements",
                               ps->path, ps->base + start, GR_MAX_TENSOR_ELEMS);
            }
            ps->pos++;
        }
        if (ps->pos < ps->len && ps->text[ps->pos] == 'L') /* Python 2 long literal */
            ps->pos++;
        if (*ndim >= max_ndim)
            return gr_fail(GR_ERR_LIMIT, "%s: byte %zu: npy array has more than %d dimensions",
                           ps->path, ps->base + start, max_ndim);
        if (v > INT_MAX)
            return gr_fail(GR_ERR_LIMIT, "%s: byte %zu: npy dimension %llu too large", ps->path,
                           ps->base + start, v);
        if (!gr_mul_size(elems, (size_t)v, &elems) || elems > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_LIMIT, "%s: byte %zu: npy shape has more than %zu elements",
                           ps->path, ps->base + start, GR_MAX_TENSOR_ELEMS);
        dims[(*ndim)++] = (int)v;
        if (accept_char(ps, ','))
            continue;
        if (accept_char(ps, ')'))
            return GR_OK;
        return parse_error(ps, "expected ',' or ')' in the shape");
    }
}

/* Parse the dict and check it describes '<f4' C-order data. */
static gr_status parse_header(npy_parser *ps, int *dims, int *ndim, int max_ndim)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (!accept_char(ps, '{'))
        return parse_error(ps, "expected '{'");
    for (;;) {
        if (accept_char(ps, '}'))
            break;
        char key[32];
        size_t key_pos = ps->pos;
        GR_TRY(parse_string(ps, key, sizeof key));
        if (!accept_char(ps, ':'))
            return parse_error(ps, "expected ':' after a key");
        if (strcmp(key, "descr") == 0) {
            char descr[32];
            skip_space(ps);
            size_t at = ps->pos;
            GR_TRY(parse_string(ps, descr, sizeof descr));
            if (strcmp(descr, "<f4") != 0) {
                ps->pos = at;
                return gr_fail(GR_ERR_UNSUPPORTED,
                               "%s: byte %zu: npy dtype '%s' is not float32 '<f4'", ps->path,
                               ps->base + at, descr);
            }
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            bool fortran = false;
            skip_space(ps);
            size_t at = ps->pos;
            GR_TRY(parse_bool(ps, &fortran));
            if (fortran)
                return gr_fail(GR_ERR_UNSUPPORTED,
                               "%s: byte %zu: npy fortran_order True is not supported (C order "
                               "only)",
                               ps->path, ps->base + at);
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            GR_TRY(parse_shape(ps, dims, ndim, max_ndim));
            have_shape = true;
        } else {
            ps->pos = key_pos;
            return parse_error(ps, "unknown key (expected descr, fortran_order, shape)");
        }
        if (accept_char(ps, ','))
            continue;
        if (accept_char(ps, '}'))
            break;
        return parse_error(ps, "expected ',' or '}'");
    }
    while (ps->pos < ps->len && (ps->text[ps->pos] == ' ' || ps->text[ps->pos] == '\n' ||
                                 ps->text[ps->pos] == '\r' || ps->text[ps->pos] == '\t'))
        ps->pos++;
    if (ps->pos != ps->len)
        return parse_error(ps, "unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return parse_error(ps, "missing descr, fortran_order or shape");
    return GR_OK;
}

/* The fixed prefix: magic, version and header length. `got` bytes of `p` are available (at most
 * 12 are looked at). On success *header_start is 10 (v1.0) or 12 and *header_len the dict's size. */
static gr_status parse_prefix(const uint8_t *p, size_t got, const char *path,
                              size_t *header_start, size_t *header_len)
{
    if (got < 8 || memcmp(p, npy_magic, 6) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: byte 0: bad magic (not a .npy file)", path);
    int major = p[6];
    if (major < 1 || major > 3)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: byte 6: npy format version %d.%d not supported",
                       path, major, p[7]);
    *header_start = major == 1 ? 10 : 12;
    if (got < *header_start)
        return gr_fail(GR_ERR_PARSE, "%s: byte %zu: truncated npy header length", path,
                       got < 10 ? got : (size_t)10);
    *header_len = (size_t)p[8] | (size_t)p[9] << 8;
    if (major > 1)
        *header_len |= (size_t)p[10] << 16 | (size_t)p[11] << 24;
    if (*header_len > NPY_MAX_HEADER)
        return gr_fail(GR_ERR_LIMIT, "%s: byte 8: npy header length %zu exceeds %u", path,
                       *header_len, NPY_MAX_HEADER);
    return GR_OK;
}

/* Check the dict text (header_len bytes starting at file offset header_start) and return the
 * shape and the data's byte count (bounded by GR_MAX_TENSOR_ELEMS floats). */
static gr_status parse_dict(const char *text, size_t header_len, size_t header_start,
                            const char *path, int *dims, int *ndim, int max_ndim, size_t *bytes)
{
    const char *nul = memchr(text, '\0', header_len);
    if (nul)
        return gr_fail(GR_ERR_PARSE, "%s: byte %zu: NUL byte in the npy header", path,
                       header_start + (size_t)(nul - text));
    npy_parser ps = {path, text, header_len, 0, header_start};
    GR_TRY(parse_header(&ps, dims, ndim, max_ndim));
    size_t elems = 1; /* parse_shape bounded the product by GR_MAX_TENSOR_ELEMS */
    for (int i = 0; i < *ndim; i++)
        elems *= (size_t)dims[i];
    *bytes = elems * sizeof(float);
    return GR_OK;
}

/* The data must be exactly what the header promises: checked before allocating anything. */
static gr_status check_data_size(const char *path, size_t data_offset, size_t bytes,
                                 size_t available)
{
    if (available < bytes)
        return gr_fail(GR_ERR_PARSE,
                       "%s: byte %zu: truncated npy data: expected %zu bytes, found %zu", path,
                       data_offset, bytes, available);
    if (available > bytes)
        return gr_fail(GR_ERR_PARSE, "%s: byte %zu: trailing bytes after %zu bytes of npy data",
                       path, data_offset + bytes, bytes);
    return GR_OK;
}

static gr_status check_read_args(float **data, int *dims, int *ndim, int max_ndim)
{
    if (data)
        *data = NULL;
    if (ndim)
        *ndim = 0;
    if (!data || !ndim || max_ndim < 0 || (!dims && max_ndim > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_npy_read: bad arguments");
    return GR_OK;
}

/* Counts NaN/Inf in a read array; with nonfinite_is_error any fails the read (freed, emptied). */
static gr_status check_finite(const char *name, size_t data_offset, size_t n, float **data,
                              int *ndim, int nonfinite_is_error, size_t *nonfinite)
{
    size_t first = 0, count = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite((*data)[i]) && count++ == 0)
            first = i;
    *nonfinite = count;
    if (count == 0 || !nonfinite_is_error)
        return GR_OK;
    free(*data);
    *data = NULL;
    *ndim = 0;
    return gr_fail(GR_ERR_NUMERIC, "%s: %zu non-finite values (NaN/Inf), the first at element %zu "
                   "(byte %zu)", name, count, first, data_offset + first * sizeof(float));
}

gr_status gr_npy_read_mem(const uint8_t *bytes, size_t len, const char *name, float **data,
                          int *dims, int *ndim, int max_ndim)
{
    size_t nonfinite = 0;
    return gr_npy_read_mem_counted(bytes, len, name, data, dims, ndim, max_ndim, 0, &nonfinite);
}

gr_status gr_npy_read_mem_counted(const uint8_t *bytes, size_t len, const char *name,
                                  float **data, int *dims, int *ndim, int max_ndim,
                                  int nonfinite_is_error, size_t *nonfinite)
{
    if (nonfinite)
        *nonfinite = 0;
    GR_TRY(check_read_args(data, dims, ndim, max_ndim));
    if (!nonfinite)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_npy_read_mem_counted: NULL count");
    if (!bytes && len > 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_npy_read_mem: NULL bytes");
    if (!name)
        name = "<npy>";
    size_t header_start = 0, header_len = 0;
    GR_TRY(parse_prefix(bytes, len, name, &header_start, &header_len));
    if (len - header_start < header_len)
        return gr_fail(GR_ERR_PARSE,
                       "%s: byte %zu: npy header claims %zu bytes but the file ends %zu bytes in",
                       name, header_start, header_len, len - header_start);
    int shape[GR_NPY_MAX_NDIM];
    int n = 0;
    size_t data_bytes = 0, data_offset = header_start + header_len;
    int limit = max_ndim < GR_NPY_MAX_NDIM ? max_ndim : GR_NPY_MAX_NDIM;
    GR_TRY(parse_dict((const char *)bytes + header_start, header_len, header_start, name, shape,
                      &n, limit, &data_bytes));
    GR_TRY(check_data_size(name, data_offset, data_bytes, len - data_offset));
    float *values = gr_malloc(data_bytes, "npy data");
    if (!values)
        return GR_ERR_OUT_OF_MEMORY;
    if (data_bytes)
        memcpy(values, bytes + data_offset, data_bytes);
    if (n > 0)
        memcpy(dims, shape, (size_t)n * sizeof *dims);
    *ndim = n;
    *data = values;
    return check_finite(name, data_offset, data_bytes / sizeof(float), data, ndim,
                        nonfinite_is_error, nonfinite);
}

/* Bytes from the current position to the end of the file, or SIZE_MAX when the stream cannot
 * seek (a pipe): then the data read itself finds a short or long file. */
static size_t bytes_left(FILE *f)
{
    long here = ftell(f);
    if (here < 0 || fseek(f, 0, SEEK_END) != 0)
        return SIZE_MAX;
    long end = ftell(f);
    if (end < here || fseek(f, here, SEEK_SET) != 0)
        return SIZE_MAX;
    return (size_t)(end - here);
}

/* Reads the header and validates it; the file is left positioned at the data. */
static gr_status read_header(FILE *f, const char *path, int *dims, int *ndim, int max_ndim,
                             size_t *data_offset, size_t *data_bytes)
{
    uint8_t prefix[12];
    size_t got = fread(prefix, 1, 10, f);
    if (got == 10 && prefix[6] > 1 && prefix[6] <= 3)
        got += fread(prefix + 10, 1, 2, f);
    if (ferror(f)) /* a directory, for one */
        return gr_fail(GR_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    size_t header_start = 0, header_len = 0;
    GR_TRY(parse_prefix(prefix, got, path, &header_start, &header_len));
    char *text = gr_malloc(header_len + 1, "npy header");
    if (!text)
        return GR_ERR_OUT_OF_MEMORY;
    size_t text_got = fread(text, 1, header_len, f);
    if (text_got != header_len) {
        free(text);
        return gr_fail(GR_ERR_PARSE,
                       "%s: byte %zu: npy header claims %zu bytes but the file ends %zu bytes in",
                       path, header_start, header_len, text_got);
    }
    text[header_len] = '\0';
    gr_status st = parse_dict(text, header_len, header_start, path, dims, ndim, max_ndim,
                              data_bytes);
    free(text);
    *data_offset = header_start + header_len;
    return st;
}

gr_status gr_npy_read(const char *path, float **data, int *dims, int *ndim, int max_ndim)
{
    size_t nonfinite = 0;
    GR_TRY(gr_npy_read_counted(path, data, dims, ndim, max_ndim, 0, &nonfinite));
    if (nonfinite)
        fprintf(stderr, "graphrun: warning: %s: %zu non-finite values (NaN/Inf) in the input: "
                "outputs will be meaningless\n", path, nonfinite);
    return GR_OK;
}

gr_status gr_npy_read_counted(const char *path, float **data, int *dims, int *ndim, int max_ndim,
                              int nonfinite_is_error, size_t *nonfinite)
{
    if (nonfinite)
        *nonfinite = 0;
    GR_TRY(check_read_args(data, dims, ndim, max_ndim));
    if (!path || !nonfinite)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_npy_read: bad arguments");
    FILE *f = fopen(path, "rb");
    if (!f)
        return gr_fail(GR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int shape[GR_NPY_MAX_NDIM];
    int n = 0;
    size_t data_offset = 0, bytes = 0;
    int limit = max_ndim < GR_NPY_MAX_NDIM ? max_ndim : GR_NPY_MAX_NDIM;
    gr_status st = read_header(f, path, shape, &n, limit, &data_offset, &bytes);
    size_t left = st == GR_OK ? bytes_left(f) : SIZE_MAX;
    if (st == GR_OK && left != SIZE_MAX)
        st = check_data_size(path, data_offset, bytes, left);
    if (st != GR_OK) {
        fclose(f);
        return st;
    }
    float *values = gr_malloc(bytes, "npy data");
    if (!values) {
        fclose(f);
        return GR_ERR_OUT_OF_MEMORY;
    }
    size_t got = fread(values, 1, bytes, f);
    /* One more byte would mean the header understates the data (or the file grew). */
    int extra = got == bytes ? fgetc(f) : EOF;
    bool read_error = ferror(f) != 0;
    fclose(f);
    if (read_error || got != bytes || extra != EOF) {
        free(values);
        if (read_error)
            return gr_fail(GR_ERR_IO, "%s: read error in the data at byte %zu", path, data_offset);
        return check_data_size(path, data_offset, bytes, got != bytes ? got : bytes + 1);
    }
    if (n > 0)
        memcpy(dims, shape, (size_t)n * sizeof *dims);
    *ndim = n;
    *data = values;
    return check_finite(path, data_offset, bytes / sizeof(float), data, ndim, nonfinite_is_error,
                        nonfinite);
}
