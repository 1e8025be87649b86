/* Constants of an ONNX graph: initializers and Constant nodes read into onnx_const, and the shape
 * subgraphs that exporters write (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Slice bounds
 * computed with Add/Div/Mul, ...) folded at load, when the input size is fixed.
 *
 * Integers are int64 with checked arithmetic (an overflow or a division by zero is refused, never
 * undefined); integer Div truncates toward zero as ONNX Runtime does. Every fold is bounded by
 * ONNX_MAX_FOLD_ELEMS before anything is allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx/internal.h"

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), GR_ERR_UNSUPPORTED)

void onnx_const_free(onnx_const *k)
{
    if (!k)
        return;
    free(k->f);
    free(k->i);
    memset(k, 0, sizeof *k);
}

/* The element count of dims, 0 when a dim is negative or the count passes max. */
static int dims_count(int ndim, const int64_t *dims, size_t max, size_t *n)
{
    *n = 1;
    for (int d = 0; d < ndim; d++)
        if (dims[d] < 0 || (uint64_t)dims[d] > max || !gr_mul_size(*n, (size_t)dims[d], n) ||
            *n > max)
            return 0;
    return 1;
}

gr_status onnx_const_alloc(onnx_const *k, int ndim, const int64_t *dims, int is_float, int limit,
                           char *why, size_t why_len)
{
    memset(k, 0, sizeof *k);
    if (ndim < 0 || ndim > ONNX_MAX_RANK) {
        snprintf(why, why_len, "rank %d (at most %d)", ndim, ONNX_MAX_RANK);
        return GR_ERR_LIMIT;
    }
    size_t n, max = limit ? ONNX_MAX_FOLD_ELEMS : GR_MAX_TENSOR_ELEMS;
    if (!dims_count(ndim, dims, max, &n)) {
        snprintf(why, why_len, "a constant of more than %zu elements (or a negative dim)", max);
        return GR_ERR_LIMIT;
    }
    k->ndim = ndim;
    if (ndim > 0)
        memcpy(k->dims, dims, (size_t)ndim * sizeof *dims);
    k->n = n;
    k->is_float = is_float;
    size_t alloc = n ? n : 1;
    if (is_float)
        k->f = gr_calloc(alloc, sizeof *k->f, "ONNX constant");
    else
        k->i = gr_calloc(alloc, sizeof *k->i, "ONNX constant");
    if (!k->f && !k->i) {
        snprintf(why, why_len, "out of memory for a constant of %zu elements", n);
        return GR_ERR_OUT_OF_MEMORY;
    }
    return GR_OK;
}

int64_t onnx_const_int(const onnx_const *k, size_t i)
{
    if (!k->is_float)
        return k->i[i];
    float v = k->f[i];
    if (!(v > -9.2e18f && v < 9.2e18f))
        return 0;
    return (int64_t)v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

gr_status onnx_const_from_tensor(const Onnx__TensorProto *t, onnx_const *k, char *why,
                                 size_t why_len)
{
    memset(k, 0, sizeof *k);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return WHY("tensor '%s' keeps its data in an external file (not supported: export with "
                   "the weights inside the .onnx)", onnx_str(t->name));
    if (t->segment)
        return WHY("tensor '%s' is segmented (not supported)", onnx_str(t->name));
    int type = t->has_data_type ? t->data_type : 0;
    size_t width;
    switch (type) {
    case ONNX_FLOAT: width = 4; break;
    case ONNX_INT32: width = 4; break;
    case ONNX_INT64: width = 8; break;
    case ONNX_BOOL: width = 1; break;
    case ONNX_INT8: width = 1; break;
    case ONNX_UINT8: width = 1; break;
    default:
        return WHY("tensor '%s' has data type %d (the importer reads float32, int64, int32, int8, "
                   "uint8 and bool)", onnx_str(t->name), type);
    }
    if (t->n_dims > ONNX_MAX_RANK)
        return WHY("tensor '%s' has rank %zu (at most %d)", onnx_str(t->name), t->n_dims,
                   ONNX_MAX_RANK);
    size_t stored;
    if (t->has_raw_data && t->raw_data.len > 0)
        stored = t->raw_data.len / width;
    else if (type == ONNX_FLOAT)
        stored = t->n_float_data;
    else if (type == ONNX_INT64)
        stored = t->n_int64_data;
    else
        stored = t->n_int32_data;
    /* The dims against the values the file holds before anything is allocated: a few bytes
     * declaring dims of billions would otherwise ask for gigabytes (fuzz_onnx found it). */
    size_t want;
    if (dims_count((int)t->n_dims, t->dims, GR_MAX_TENSOR_ELEMS, &want) &&
        (stored != want || (t->has_raw_data && t->raw_data.len > 0 && t->raw_data.len % width))) {
        snprintf(why, why_len, "tensor '%s' holds %zu values where its dims say %zu",
                 onnx_str(t->name), stored, want);
        return GR_ERR_PARSE;
    }
    gr_status st = onnx_const_alloc(k, (int)t->n_dims, t->dims, type == ONNX_FLOAT, 0, why,
                                    why_len);
    if (st != GR_OK)
        return st;
    const uint8_t *raw = t->has_raw_data && t->raw_data.len > 0 ? t->raw_data.data : NULL;
    for (size_t i = 0; i < k->n; i++) {
        if (type == ONNX_FLOAT) {
            uint32_t bits = raw ? le32(raw + 4 * i) : 0;
            if (raw)
                memcpy(&k->f[i], &bits, sizeof bits);
            else
                k->f[i] = t->float_data[i];
        } else if (type == ONNX_INT64) {
            k->i[i] = raw ? (int64_t)((uint64_t)le32(raw + 8 * i) |
                                      (uint64_t)le32(raw + 8 * i + 4) << 32)
                          : t->int64_data[i];
        } else if (type == ONNX_INT32) {
            k->i[i] = raw ? (int32_t)le32(raw + 4 * i) : t->int32_data[i];
        } else if (type == ONNX_INT8) {
            k->i[i] = raw ? (int8_t)raw[i] : (int8_t)t->int32_data[i];
        } else if (type == ONNX_UINT8) {
            k->i[i] = raw ? raw[i] : (uint8_t)t->int32_data[i];
        } else {
            k->i[i] = raw ? raw[i] != 0 : t->int32_data[i] != 0;
        }
    }
    k->dtype = type;
    return GR_OK;
}

/* ---- attributes ---------------------------------------------------------------------------- */

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *node, const char *name)
{
    for (size_t i = 0; i < node->n_attribute; i++)
        if (node->attribute[i] && node->attribute[i]->name &&
            strcmp(node->attribute[i]->name, name) == 0)
            return node->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *node, const char *name, int64_t fallback)
{
    const Onnx__AttributeProto *a = onnx_attr(node, name);
    return a && a->has_i ? a->i : fallback;
}

float onnx_attr_float(const Onnx__NodeProto *node, const char *name, float fallback)
{
    const Onnx__AttributeProto *a = onnx_attr(node, name);
    return a && a->has_f ? a->f : fallback;
}

const char *onnx_attr_string(const Onnx__NodeProto *node, const char *name, char *buf, size_t n,
                             const char *fallback)
{
    const Onnx__AttributeProto *a = onnx_attr(node, name);
    if (!a || !a->has_s)
        return fallback;
    size_t len = a->s.len < n - 1 ? a->s.len : n - 1;
    memcpy(buf, a->s.data, len);
    buf[len] = '\0';
    return buf;
}

size_t onnx_attr_ints(const Onnx__NodeProto *node, const char *name, const int64_t **ints)
{
    const Onnx__AttributeProto *a = onnx_attr(node, name);
    *ints = a ? a->ints : NULL;
    return a ? a->n_ints : 0;
}

/* ---- folding ------------------------------------------------------------------------------- */

static gr_status copy_const(const onnx_const *src, onnx_const *out, char *why, size_t why_len)
{
    GR_TRY(onnx_const_alloc(out, src->ndim, src->dims, src->is_float, 0, why, why_len));
    if (src->is_float)
        memcpy(out->f, src->f, src->n * sizeof *out->f);
    else
        memcpy(out->i, src->i, src->n * sizeof *out->i);
    return GR_OK;
}

/* A normalised axis in [0, rank), or -1. */
static int norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

static gr_status fold_constant(const Onnx__NodeProto *node, onnx_const *out, char *why,
                               size_t why_len)
{
    const Onnx__AttributeProto *a = onnx_attr(node, "value");
    if (a && a->t)
        return onnx_const_from_tensor(a->t, out, why, why_len);
    if ((a = onnx_attr(node, "value_float")) && a->has_f) {
        GR_TRY(onnx_const_alloc(out, 0, NULL, 1, 1, why, why_len));
        out->f[0] = a->f;
        return GR_OK;
    }
    if ((a = onnx_attr(node, "value_int")) && a->has_i) {
        GR_TRY(onnx_const_alloc(out, 0, NULL, 0, 1, why, why_len));
        out->i[0] = a->i;
        return GR_OK;
    }
    if ((a = onnx_attr(node, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        GR_TRY(onnx_const_alloc(out, 1, &n, 0, 1, why, why_len));
        if (a->n_ints)
            memcpy(out->i, a->ints, a->n_ints * sizeof *out->i);
        return GR_OK;
    }
    if ((a = onnx_attr(node, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        GR_TRY(onnx_const_alloc(out, 1, &n, 1, 1, why, why_len));
        if (a->n_floats)
            memcpy(out->f, a->floats, a->n_floats * sizeof *out->f);
        return GR_OK;
    }
    return WHY("a Constant without a tensor, float(s) or int(s) value");
}

/* Elementwise Add/Sub/Mul/Div of two constants of one shape, or one of them a single value. */
static gr_status fold_arith(char op, const onnx_const *x, const onnx_const *y, onnx_const *out,
                            char *why, size_t why_len)
{
    if (x->is_float != y->is_float)
        return WHY("inputs of different types");
    const onnx_const *shape = x->n >= y->n ? x : y;
    if (!(x->n == y->n && x->ndim == y->ndim) && x->n != 1 && y->n != 1)
        return WHY("broadcasting between %zu and %zu values (only one shape or a single value is "
                   "folded)", x->n, y->n);
    GR_TRY(onnx_const_alloc(out, shape->ndim, shape->dims, x->is_float, 1, why, why_len));
    for (size_t i = 0; i < out->n; i++) {
        size_t ix = x->n == 1 ? 0 : i, iy = y->n == 1 ? 0 : i;
        if (x->is_float) {
            float a = x->f[ix], b = y->f[iy];
            out->f[i] = op == '+' ? a + b : op == '-' ? a - b : op == '*' ? a * b : a / b;
            continue;
        }
        int64_t a = x->i[ix], b = y->i[iy], r = 0;
        bool overflow = false;
        switch (op) {
        case '+': overflow = __builtin_add_overflow(a, b, &r); break;
        case '-': overflow = __builtin_sub_overflow(a, b, &r); break;
        case '*': overflow = __builtin_mul_overflow(a, b, &r); break;
        default:
            if (b == 0 || (a == INT64_MIN && b == -1)) {
                onnx_const_free(out);
                return WHY("integer division by zero or overflow");
            }
            r = a / b;
        }
        if (overflow) {
            onnx_const_free(out);
            return WHY("integer overflow");
        }
        out->i[i] = r;
    }
    return GR_OK;
}

static gr_status fold_gather(const Onnx__NodeProto *node, const onnx_const *data,
                             const onnx_const *idx, onnx_const *out, char *why, size_t why_len)
{
    if (data->ndim != 1 || norm_axis(onnx_attr_int(node, "axis", 0), 1) != 0)
        return WHY("Gather folds only rank-1 data on axis 0 (shape subgraphs)");
    if (idx->is_float || idx->ndim > 1)
        return WHY("Gather indices must be integers of rank 0 or 1");
    GR_TRY(onnx_const_alloc(out, idx->ndim, idx->dims, data->is_float, 1, why, why_len));
    for (size_t i = 0; i < idx->n; i++) {
        int64_t j = idx->i[i];
        if (j < 0)
            j += data->dims[0];
        if (j < 0 || j >= data->dims[0]) {
            onnx_const_free(out);
            return WHY("Gather index %lld outside 0..%lld", (long long)idx->i[i],
                       (long long)data->dims[0] - 1);
        }
        if (data->is_float)
            out->f[i] = data->f[j];
        else
            out->i[i] = data->i[j];
    }
    return GR_OK;
}

/* Unsqueeze / Squeeze: the values unchanged, the dims edited. */
static gr_status fold_squeeze(const Onnx__NodeProto *node, int opset, bool unsqueeze,
                              const onnx_const *x, const onnx_const *axes_in, onnx_const *out,
                              char *why, size_t why_len)
{
    int64_t axes[ONNX_MAX_RANK];
    size_t n_axes = 0;
    if (opset >= 13) {
        if (axes_in) {
            if (axes_in->is_float || axes_in->n > ONNX_MAX_RANK)
                return WHY("bad axes");
            for (size_t i = 0; i < axes_in->n; i++)
                axes[n_axes++] = axes_in->i[i];
        }
    } else {
        const int64_t *a;
        size_t n = onnx_attr_ints(node, "axes", &a);
        if (n > ONNX_MAX_RANK)
            return WHY("bad axes");
        for (size_t i = 0; i < n; i++)
            axes[n_axes++] = a[i];
    }
    int64_t dims[ONNX_MAX_RANK];
    int rank = 0;
    if (unsqueeze) {
        int out_rank = x->ndim + (int)n_axes;
        if (out_rank > ONNX_MAX_RANK || n_axes == 0)
            return WHY("Unsqueeze to rank %d", out_rank);
        bool inserted[ONNX_MAX_RANK] = {false};
        for (size_t i = 0; i < n_axes; i++) {
            int ax = norm_axis(axes[i], out_rank);
            if (ax < 0 || inserted[ax])
                return WHY("Unsqueeze axis %lld", (long long)axes[i]);
            inserted[ax] = true;
        }
        for (int d = 0, src = 0; d < out_rank; d++)
            dims[rank++] = inserted[d] ? 1 : x->dims[src++];
    } else {
        bool drop[ONNX_MAX_RANK] = {false};
        for (size_t i = 0; i < n_axes; i++) {
            int ax = norm_axis(axes[i], x->ndim);
            if (ax < 0 || x->dims[ax] != 1)
                return WHY("Squeeze axis %lld", (long long)axes[i]);
            drop[ax] = true;
        }
        for (int d = 0; d < x->ndim; d++)
            if (!(n_axes ? drop[d] : x->dims[d] == 1))
                dims[rank++] = x->dims[d];
    }
    GR_TRY(copy_const(x, out, why, why_len));
    out->ndim = rank;
    if (rank > 0)
        memcpy(out->dims, dims, (size_t)rank * sizeof *dims);
    return GR_OK;
}

static gr_status fold_concat(const Onnx__NodeProto *node, const onnx_const *const *in, int n_in,
                             onnx_const *out, char *why, size_t why_len)
{
    int64_t total = 0;
    for (int k = 0; k < n_in; k++) {
        if (!in[k] || in[k]->ndim != 1 || in[k]->is_float != in[0]->is_float)
            return WHY("Concat folds only rank-1 constants of one type");
        total += in[k]->dims[0];
    }
    if (n_in < 1 || norm_axis(onnx_attr_int(node, "axis", 0), 1) != 0)
        return WHY("Concat of constants on an axis other than 0");
    GR_TRY(onnx_const_alloc(out, 1, &total, in[0]->is_float, 1, why, why_len));
    size_t at = 0;
    for (int k = 0; k < n_in; k++) {
        for (size_t i = 0; i < in[k]->n; i++, at++) {
            if (out->is_float)
                out->f[at] = in[k]->f[i];
            else
                out->i[at] = in[k]->i[i];
        }
    }
    return GR_OK;
}

static gr_status fold_cast(const Onnx__NodeProto *node, const onnx_const *x, onnx_const *out,
                           char *why, size_t why_len)
{
    int64_t to = onnx_attr_int(node, "to", 0);
    int to_float = to == ONNX_FLOAT || to == ONNX_DOUBLE;
    if (!to_float && to != ONNX_INT64 && to != ONNX_INT32 && to != ONNX_BOOL)
        return WHY("Cast to type %lld", (long long)to);
    GR_TRY(onnx_const_alloc(out, x->ndim, x->dims, to_float, 1, why, why_len));
    for (size_t i = 0; i < x->n; i++) {
        if (to_float)
            out->f[i] = x->is_float ? x->f[i] : (float)x->i[i];
        else if (to == ONNX_BOOL)
            out->i[i] = x->is_float ? x->f[i] != 0.0f : x->i[i] != 0;
        else
            out->i[i] = onnx_const_int(x, i);
    }
    return GR_OK;
}

static gr_status fold_constant_of_shape(const Onnx__NodeProto *node, const onnx_const *shape,
                                        onnx_const *out, char *why, size_t why_len)
{
    if (shape->is_float || shape->ndim != 1 || shape->n > ONNX_MAX_RANK)
        return WHY("ConstantOfShape needs a rank-1 integer shape of at most %d dims",
                   ONNX_MAX_RANK);
    onnx_const value = {0};
    const Onnx__AttributeProto *a = onnx_attr(node, "value");
    if (a && a->t)
        GR_TRY(onnx_const_from_tensor(a->t, &value, why, why_len));
    int is_float = a && a->t ? value.is_float : 1;
    gr_status st = onnx_const_alloc(out, (int)shape->n, shape->i, is_float, 1, why, why_len);
    for (size_t i = 0; st == GR_OK && value.n > 0 && i < out->n; i++) {
        if (is_float)
            out->f[i] = value.f[0];
        else
            out->i[i] = value.i[0];
    }
    onnx_const_free(&value);
    return st;
}

static gr_status fold_range(const onnx_const *const *in, onnx_const *out, char *why,
                            size_t why_len)
{
    for (int k = 0; k < 3; k++)
        if (!in[k] || in[k]->n != 1 || in[k]->is_float != in[0]->is_float)
            return WHY("Range needs three scalars of one type");
    if (in[0]->is_float) {
        float start = in[0]->f[0], limit = in[1]->f[0], delta = in[2]->f[0];
        double count = delta != 0.0f ? ((double)limit - (double)start) / (double)delta : -1.0;
        if (!(count >= -1.0 && count <= (double)ONNX_MAX_FOLD_ELEMS))
            return WHY("Range of too many values");
        int64_t n = count > 0 ? (int64_t)count + ((double)(int64_t)count < count) : 0;
        GR_TRY(onnx_const_alloc(out, 1, &n, 1, 1, why, why_len));
        for (int64_t i = 0; i < n; i++)
            out->f[i] = start + (float)i * delta;
        return GR_OK;
    }
    int64_t start = in[0]->i[0], limit = in[1]->i[0], delta = in[2]->i[0];
    if (delta == 0 || start < -(1LL << 40) || start > (1LL << 40) || limit < -(1LL << 40) ||
        limit > (1LL << 40) || delta < -(1LL << 40) || delta > (1LL << 40))
        return WHY("Range with delta 0 or values beyond 2^40");
    int64_t span = limit - start;
    int64_t n = span / delta + (span % delta != 0);
    if (n < 0)
        n = 0;
    GR_TRY(onnx_const_alloc(out, 1, &n, 0, 1, why, why_len));
    for (int64_t i = 0; i < n; i++)
        out->i[i] = start + i * delta;
    return GR_OK;
}

static gr_status fold_reshape(const onnx_const *x, const onnx_const *shape, onnx_const *out,
                              char *why, size_t why_len)
{
    if (shape->is_float || shape->ndim != 1 || shape->n > ONNX_MAX_RANK)
        return WHY("Reshape needs a rank-1 integer shape of at most %d dims", ONNX_MAX_RANK);
    int64_t dims[ONNX_MAX_RANK];
    int infer = -1;
    size_t known = 1;
    for (size_t d = 0; d < shape->n; d++) {
        int64_t v = shape->i[d];
        if (v == 0)
            v = (int)d < x->ndim ? x->dims[d] : -2;
        if (v == -1 && infer < 0) {
            infer = (int)d;
        } else if (v < 0 || !gr_mul_size(known, (size_t)v, &known)) {
            return WHY("Reshape to an invalid shape");
        }
        dims[d] = v;
    }
    if (infer >= 0) {
        if (known == 0 || x->n % known)
            return WHY("Reshape of %zu values cannot infer its -1", x->n);
        dims[infer] = (int64_t)(x->n / known);
        known = x->n;
    }
    if (known != x->n)
        return WHY("Reshape of %zu values to %zu", x->n, known);
    GR_TRY(copy_const(x, out, why, why_len));
    out->ndim = (int)shape->n;
    if (shape->n)
        memcpy(out->dims, dims, shape->n * sizeof *dims);
    return GR_OK;
}

/* Slice of a rank-1 constant (opset 10+: starts, ends, axes, steps as inputs). */
static gr_status fold_slice(const onnx_const *const *in, int n_in, onnx_const *out, char *why,
                            size_t why_len)
{
    const onnx_const *x = in[0];
    if (n_in < 3 || !in[1] || !in[2] || x->ndim != 1 || in[1]->n != 1 || in[2]->n != 1 ||
        (n_in > 3 && in[3] && (in[3]->n != 1 || norm_axis(onnx_const_int(in[3], 0), 1) != 0)))
        return WHY("Slice folds rank-1 constants on axis 0 only");
    int64_t step = n_in > 4 && in[4] ? onnx_const_int(in[4], 0) : 1;
    if (step != 1)
        return WHY("Slice of a constant with step %lld", (long long)step);
    int64_t dim = x->dims[0], start = onnx_const_int(in[1], 0), end = onnx_const_int(in[2], 0);
    if (start < 0)
        start = start < -dim ? 0 : start + dim;
    if (end < 0)
        end = end < -dim ? 0 : end + dim;
    start = start > dim ? dim : start;
    end = end > dim ? dim : end;
    int64_t n = end > start ? end - start : 0;
    GR_TRY(onnx_const_alloc(out, 1, &n, x->is_float, 1, why, why_len));
    for (int64_t i = 0; i < n; i++) {
        if (x->is_float)
            out->f[i] = x->f[start + i];
        else
            out->i[i] = x->i[start + i];
    }
    return GR_OK;
}

gr_status onnx_fold(const Onnx__NodeProto *node, int opset, const onnx_const *const *in, int n_in,
                    onnx_const *out, char *why, size_t why_len)
{
    const char *op = onnx_str(node->op_type);
    memset(out, 0, sizeof *out);
    if (strcmp(op, "Constant") == 0)
        return fold_constant(node, out, why, why_len);
    if (n_in < 1 || !in[0])
        return WHY("a missing first input");
    if (strcmp(op, "Identity") == 0)
        return copy_const(in[0], out, why, why_len);
    if (strcmp(op, "Shape") == 0) {
        int64_t rank = in[0]->ndim;
        GR_TRY(onnx_const_alloc(out, 1, &rank, 0, 1, why, why_len));
        for (int d = 0; d < in[0]->ndim; d++)
            out->i[d] = in[0]->dims[d];
        return GR_OK;
    }
    if (strcmp(op, "Cast") == 0)
        return fold_cast(node, in[0], out, why, why_len);
    if (strcmp(op, "ConstantOfShape") == 0)
        return fold_constant_of_shape(node, in[0], out, why, why_len);
    if (strcmp(op, "Concat") == 0)
        return fold_concat(node, in, n_in, out, why, why_len);
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0)
        return fold_squeeze(node, opset, op[0] == 'U', in[0], n_in > 1 ? in[1] : NULL, out, why,
                            why_len);
    if (strcmp(op, "Range") == 0)
        return n_in < 3 ? WHY("Range needs three inputs") : fold_range(in, out, why, why_len);
    if (strcmp(op, "Slice") == 0)
        return fold_slice(in, n_in, out, why, why_len);
    if (n_in < 2 || !in[1])
        return WHY("a missing second input");
    if (strcmp(op, "Gather") == 0)
        return fold_gather(node, in[0], in[1], out, why, why_len);
    if (strcmp(op, "Reshape") == 0)
        return fold_reshape(in[0], in[1], out, why, why_len);
    static const char *const arith[] = {"Add", "Sub", "Mul", "Div"};
    for (int k = 0; k < 4; k++)
        if (strcmp(op, arith[k]) == 0)
            return fold_arith("+-*/"[k], in[0], in[1], out, why, why_len);
    return WHY("not foldable");
}
