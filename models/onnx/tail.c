/* The host-side head tail of an ONNX detection model (models/onnx/tail.h): a list of nodes on
 * N-D float tensors with fixed dims, run in order. Every computed value has its own place in the
 * caller's scratch (the tensors are a few thousand floats: no reuse needed), constants are owned
 * by the tail, inputs are the engine's output copies. The arithmetic is float as PyTorch's CPU
 * ops do it (sigmoid 1 / (1 + exp(-x)), softmax with the maximum subtracted). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx/tail.h"

#define MAX_VALUES 4096
#define MAX_NODES 4096
#define MAX_ELEMS ((size_t)1 << 26)

enum { V_INPUT, V_CONST, V_TEMP };

typedef struct tail_value {
    int kind;
    int ndim;
    int64_t dims[GR_TAIL_MAX_RANK];
    size_t n;
    int input;     /* V_INPUT: its index */
    size_t offset; /* V_TEMP: in the scratch */
    float *data;   /* V_CONST */
} tail_value;

struct gr_onnx_tail {
    atomic_int refs;
    tail_value *values;
    int n_values, cap_values;
    gr_tail_node *nodes;
    int n_nodes, cap_nodes;
    int input_layers[GR_TAIL_MAX_INPUTS];
    int n_inputs;
    size_t scratch;
    int output;
    gr_tail_layout layout;
    int classes;
};

gr_onnx_tail *gr_tail_new(void)
{
    gr_onnx_tail *t = gr_calloc(1, sizeof *t, "ONNX head tail");
    if (t)
        atomic_init(&t->refs, 1);
    if (t)
        t->output = -1;
    return t;
}

gr_onnx_tail *gr_tail_retain(gr_onnx_tail *t)
{
    if (t)
        atomic_fetch_add(&t->refs, 1);
    return t;
}

void gr_tail_release(gr_onnx_tail *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    for (int i = 0; i < t->n_values; i++)
        free(t->values[i].data);
    free(t->values);
    free(t->nodes);
    free(t);
}

static size_t elems(int ndim, const int64_t *dims)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 0 || (dims[d] > 0 && n > MAX_ELEMS / (size_t)dims[d]))
            return MAX_ELEMS + 1;
        n *= (size_t)dims[d];
    }
    return n;
}

/* Room for item n of `size` bytes in `items` (capacity *cap, doubled when full): the array,
 * perhaps moved, or NULL with a message (`items` then unchanged). */
static void *reserve(void *items, int n, int *cap, size_t size)
{
    if (n < *cap)
        return items;
    int grown_cap = *cap ? 2 * *cap : 64;
    void *grown = realloc(items, (size_t)grown_cap * size);
    if (!grown) {
        gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory for the head tail");
        return NULL;
    }
    *cap = grown_cap;
    return grown;
}

/* A new value; -1 with a message. */
static int add_value(gr_onnx_tail *t, int kind, int ndim, const int64_t *dims)
{
    size_t n = elems(ndim, dims);
    if (ndim < 0 || ndim > GR_TAIL_MAX_RANK || n > MAX_ELEMS || t->n_values >= MAX_VALUES) {
        gr_fail(GR_ERR_LIMIT, "a head-tail tensor of rank %d, %zu elements (the tail holds at "
                "most %d tensors of rank <= %d, %zu elements)", ndim, n, MAX_VALUES,
                GR_TAIL_MAX_RANK, MAX_ELEMS);
        return -1;
    }
    tail_value *values = reserve(t->values, t->n_values, &t->cap_values, sizeof *values);
    if (!values)
        return -1;
    t->values = values;
    tail_value *v = &t->values[t->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->ndim = ndim;
    memcpy(v->dims, dims, (size_t)ndim * sizeof *dims);
    v->n = n;
    return t->n_values++;
}

int gr_tail_input(gr_onnx_tail *t, int layer, int ndim, const int64_t *dims)
{
    for (int i = 0; i < t->n_values; i++) {
        const tail_value *v = &t->values[i];
        if (v->kind == V_INPUT && t->input_layers[v->input] == layer && v->ndim == ndim &&
            memcmp(v->dims, dims, (size_t)ndim * sizeof *dims) == 0)
            return i;
    }
    int k = -1;
    for (int i = 0; i < t->n_inputs; i++)
        if (t->input_layers[i] == layer)
            k = i;
    if (k < 0 && t->n_inputs >= GR_TAIL_MAX_INPUTS) {
        gr_fail(GR_ERR_UNSUPPORTED, "the detection head reads more than %d of graphrun's "
                "layers", GR_TAIL_MAX_INPUTS);
        return -1;
    }
    int id = add_value(t, V_INPUT, ndim, dims);
    if (id < 0)
        return -1;
    if (k < 0) {
        k = t->n_inputs++;
        t->input_layers[k] = layer;
    }
    t->values[id].input = k;
    return id;
}

int gr_tail_const(gr_onnx_tail *t, int ndim, const int64_t *dims, const float *data)
{
    int id = add_value(t, V_CONST, ndim, dims);
    if (id < 0)
        return -1;
    tail_value *v = &t->values[id];
    v->data = gr_malloc((v->n ? v->n : 1) * sizeof *v->data, "head-tail constant");
    if (!v->data) {
        t->n_values--;
        return -1;
    }
    memcpy(v->data, data, v->n * sizeof *v->data);
    return id;
}

int gr_tail_value(gr_onnx_tail *t, int ndim, const int64_t *dims)
{
    if (elems(ndim, dims) == 0) { /* an empty slice: nothing a head computes (a softmax over it
                                     would read past it) */
        gr_fail(GR_ERR_UNSUPPORTED, "an empty tensor (a dim of 0) in the detection head");
        return -1;
    }
    int id = add_value(t, V_TEMP, ndim, dims);
    if (id < 0)
        return -1;
    if (t->scratch + t->values[id].n > MAX_ELEMS) {
        gr_fail(GR_ERR_LIMIT, "the head tail needs more than %zu floats of scratch", MAX_ELEMS);
        t->n_values--;
        return -1;
    }
    t->values[id].offset = t->scratch;
    t->scratch += t->values[id].n;
    return id;
}

gr_status gr_tail_add_node(gr_onnx_tail *t, const gr_tail_node *node)
{
    if (t->n_nodes >= MAX_NODES)
        return gr_fail(GR_ERR_LIMIT, "more than %d nodes in the detection head", MAX_NODES);
    gr_tail_node *nodes = reserve(t->nodes, t->n_nodes, &t->cap_nodes, sizeof *nodes);
    if (!nodes)
        return GR_ERR_OUT_OF_MEMORY;
    t->nodes = nodes;
    t->nodes[t->n_nodes++] = *node;
    return GR_OK;
}

int gr_tail_dims(const gr_onnx_tail *t, int id, int64_t *dims)
{
    const tail_value *v = &t->values[id];
    memcpy(dims, v->dims, (size_t)v->ndim * sizeof *dims);
    return v->ndim;
}

gr_status gr_tail_finish(gr_onnx_tail *t, int id, const char *name)
{
    const tail_value *v = &t->values[id];
    if (v->kind == V_TEMP && v->ndim == 3 && v->dims[0] == 1) {
        /* The smaller of the last two dims holds each box's entries (boxes outnumber them). */
        if (v->dims[1] <= v->dims[2] && v->dims[1] >= 5) {
            t->layout = GR_TAIL_ANCHOR_FREE;
            t->classes = (int)v->dims[1] - 4;
        } else if (v->dims[2] < v->dims[1] && v->dims[2] >= 6) {
            t->layout = GR_TAIL_OBJECTNESS;
            t->classes = (int)v->dims[2] - 5;
        }
    }
    if (!t->layout) {
        char shape[160] = "";
        for (int d = 0; d < v->ndim; d++) {
            size_t used = strlen(shape);
            snprintf(shape + used, sizeof shape - used, "%s%lld", d ? ", " : "",
                     (long long)v->dims[d]);
        }
        return gr_fail(GR_ERR_UNSUPPORTED, "graph output '%.100s' [%s] is computed after "
                       "graphrun's layers but is not a detection head's output ([1, 4 + classes, "
                       "boxes] or [1, boxes, 5 + classes]; docs/onnx.md)", name, shape);
    }
    t->output = id;
    return GR_OK;
}

int gr_tail_input_count(const gr_onnx_tail *t) { return t->n_inputs; }
int gr_tail_input_layer(const gr_onnx_tail *t, int k) { return t->input_layers[k]; }
gr_tail_layout gr_tail_get_layout(const gr_onnx_tail *t) { return t->layout; }
int gr_tail_classes(const gr_onnx_tail *t) { return t->classes; }
size_t gr_tail_scratch_floats(const gr_onnx_tail *t) { return t->scratch ? t->scratch : 1; }
size_t gr_tail_output_elems(const gr_onnx_tail *t) { return t->values[t->output].n; }

int gr_tail_output_dims(const gr_onnx_tail *t, int64_t *dims)
{
    return gr_tail_dims(t, t->output, dims);
}

/* ---- running ------------------------------------------------------------------------------ */

typedef struct run_ctx {
    const gr_onnx_tail *t;
    const float *const *inputs;
    float *scratch;
} run_ctx;

static const float *data_of(const run_ctx *c, int id)
{
    const tail_value *v = &c->t->values[id];
    switch (v->kind) {
    case V_INPUT: return c->inputs[v->input];
    case V_CONST: return v->data;
    default: return c->scratch + v->offset;
    }
}

/* Row-major strides of dims. */
static void strides_of(int ndim, const int64_t *dims, size_t *strides)
{
    size_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= (size_t)dims[d];
    }
}

/* out[i] = in[base + sum idx[d] * stride[d]] over the output's dims (transpose, slice). */
static void gather_strided(float *out, const float *in, int ndim, const int64_t *dims,
                           size_t base, const int64_t *stride, size_t n)
{
    int64_t idx[GR_TAIL_MAX_RANK] = {0};
    int64_t off = (int64_t)base;
    for (size_t i = 0; i < n; i++) {
        out[i] = in[off];
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < dims[d]) {
                off += stride[d];
                break;
            }
            off -= stride[d] * (dims[d] - 1);
            idx[d] = 0;
        }
    }
}

static void run_transpose(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *in = &c->t->values[nd->args[0]], *out = &c->t->values[nd->out];
    size_t in_strides[GR_TAIL_MAX_RANK];
    int64_t stride[GR_TAIL_MAX_RANK];
    strides_of(in->ndim, in->dims, in_strides);
    for (int d = 0; d < out->ndim; d++)
        stride[d] = (int64_t)in_strides[nd->perm[d]];
    gather_strided(c->scratch + out->offset, data_of(c, nd->args[0]), out->ndim, out->dims, 0,
                   stride, out->n);
}

static void run_slice(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *in = &c->t->values[nd->args[0]], *out = &c->t->values[nd->out];
    size_t in_strides[GR_TAIL_MAX_RANK];
    int64_t stride[GR_TAIL_MAX_RANK];
    strides_of(in->ndim, in->dims, in_strides);
    size_t base = 0;
    for (int d = 0; d < out->ndim; d++) {
        base += (size_t)nd->start[d] * in_strides[d];
        stride[d] = (int64_t)in_strides[d] * nd->step[d];
    }
    gather_strided(c->scratch + out->offset, data_of(c, nd->args[0]), out->ndim, out->dims, base,
                   stride, out->n);
}

static void run_concat(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *out = &c->t->values[nd->out];
    size_t outer = 1, inner = 1;
    for (int d = 0; d < nd->axis; d++)
        outer *= (size_t)out->dims[d];
    for (int d = nd->axis + 1; d < out->ndim; d++)
        inner *= (size_t)out->dims[d];
    float *dst = c->scratch + out->offset;
    size_t row = (size_t)out->dims[nd->axis] * inner, at = 0;
    for (int k = 0; k < nd->n_args; k++) {
        const tail_value *in = &c->t->values[nd->args[k]];
        const float *src = data_of(c, nd->args[k]);
        size_t chunk = (size_t)in->dims[nd->axis] * inner;
        for (size_t o = 0; o < outer; o++)
            memcpy(dst + o * row + at, src + o * chunk, chunk * sizeof *dst);
        at += chunk;
    }
}

static void run_softmax(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *out = &c->t->values[nd->out];
    size_t outer = 1, mid = 1, inner = 1;
    for (int d = 0; d < out->ndim; d++) {
        size_t k = (size_t)out->dims[d];
        if (d < nd->axis)
            outer *= k;
        else if (d < nd->axis_end)
            mid *= k;
        else
            inner *= k;
    }
    const float *src = data_of(c, nd->args[0]);
    float *dst = c->scratch + out->offset;
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            const float *x = src + o * mid * inner + i;
            float *y = dst + o * mid * inner + i;
            float hi = x[0];
            for (size_t m = 1; m < mid; m++)
                hi = fmaxf(hi, x[m * inner]);
            float sum = 0.0f;
            for (size_t m = 0; m < mid; m++) {
                y[m * inner] = expf(x[m * inner] - hi);
                sum += y[m * inner];
            }
            for (size_t m = 0; m < mid; m++)
                y[m * inner] /= sum;
        }
    }
}

static float binary(gr_tail_op op, float a, float b)
{
    switch (op) {
    case GR_TAIL_ADD: return a + b;
    case GR_TAIL_SUB: return a - b;
    case GR_TAIL_MUL: return a * b;
    case GR_TAIL_DIV: return a / b;
    default: return b == 2.0f ? a * a : powf(a, b);
    }
}

/* Broadcast strides of an input of rank ndim into an output of rank out_ndim (0 where the input's
 * dim is 1 or missing). */
static void broadcast_strides(const tail_value *in, int out_ndim, int64_t *stride)
{
    size_t s[GR_TAIL_MAX_RANK];
    strides_of(in->ndim, in->dims, s);
    int shift = out_ndim - in->ndim;
    for (int d = 0; d < out_ndim; d++) {
        int k = d - shift;
        stride[d] = k < 0 || in->dims[k] == 1 ? 0 : (int64_t)s[k];
    }
}

static void run_binary(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *a = &c->t->values[nd->args[0]], *b = &c->t->values[nd->args[1]];
    const tail_value *out = &c->t->values[nd->out];
    const float *x = data_of(c, nd->args[0]), *y = data_of(c, nd->args[1]);
    float *dst = c->scratch + out->offset;
    if (a->n == out->n && b->n == out->n) {
        for (size_t i = 0; i < out->n; i++)
            dst[i] = binary(nd->op, x[i], y[i]);
        return;
    }
    if (a->n == out->n && b->n == 1) {
        for (size_t i = 0; i < out->n; i++)
            dst[i] = binary(nd->op, x[i], y[0]);
        return;
    }
    int64_t sa[GR_TAIL_MAX_RANK], sb[GR_TAIL_MAX_RANK], idx[GR_TAIL_MAX_RANK] = {0};
    broadcast_strides(a, out->ndim, sa);
    broadcast_strides(b, out->ndim, sb);
    int64_t ia = 0, ib = 0;
    for (size_t i = 0; i < out->n; i++) {
        dst[i] = binary(nd->op, x[ia], y[ib]);
        for (int d = out->ndim - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d]) {
                ia += sa[d];
                ib += sb[d];
                break;
            }
            ia -= sa[d] * (out->dims[d] - 1);
            ib -= sb[d] * (out->dims[d] - 1);
            idx[d] = 0;
        }
    }
}

static void run_conv1x1(const run_ctx *c, const gr_tail_node *nd)
{
    const tail_value *in = &c->t->values[nd->args[0]], *out = &c->t->values[nd->out];
    const float *x = data_of(c, nd->args[0]), *w = data_of(c, nd->args[1]);
    const float *bias = nd->n_args > 2 && nd->args[2] >= 0 ? data_of(c, nd->args[2]) : NULL;
    size_t n = (size_t)in->dims[0], ch = (size_t)in->dims[1], m_out = (size_t)out->dims[1];
    size_t plane = (size_t)in->dims[2] * (size_t)in->dims[3];
    float *dst = c->scratch + out->offset;
    for (size_t b = 0; b < n; b++) {
        for (size_t m = 0; m < m_out; m++) {
            float *y = dst + (b * m_out + m) * plane;
            for (size_t p = 0; p < plane; p++)
                y[p] = bias ? bias[m] : 0.0f;
            for (size_t k = 0; k < ch; k++) {
                const float *xk = x + (b * ch + k) * plane;
                float wk = w[m * ch + k];
                for (size_t p = 0; p < plane; p++)
                    y[p] += wk * xk[p];
            }
        }
    }
}

const float *gr_tail_run(const gr_onnx_tail *t, const float *const *inputs, float *scratch)
{
    run_ctx c = {t, inputs, scratch};
    for (int i = 0; i < t->n_nodes; i++) {
        const gr_tail_node *nd = &t->nodes[i];
        const tail_value *out = &t->values[nd->out];
        switch (nd->op) {
        case GR_TAIL_COPY:
            memcpy(scratch + out->offset, data_of(&c, nd->args[0]), out->n * sizeof *scratch);
            break;
        case GR_TAIL_TRANSPOSE: run_transpose(&c, nd); break;
        case GR_TAIL_CONCAT: run_concat(&c, nd); break;
        case GR_TAIL_SLICE: run_slice(&c, nd); break;
        case GR_TAIL_SOFTMAX: run_softmax(&c, nd); break;
        case GR_TAIL_SIGMOID: {
            const float *x = data_of(&c, nd->args[0]);
            float *y = scratch + out->offset;
            for (size_t k = 0; k < out->n; k++)
                y[k] = 1.0f / (1.0f + expf(-x[k]));
            break;
        }
        case GR_TAIL_CONV1X1: run_conv1x1(&c, nd); break;
        default: run_binary(&c, nd); break;
        }
    }
    return data_of(&c, t->output);
}
