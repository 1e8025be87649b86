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

#include "base/bytes.h"
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
    int written;   /* V_TEMP: a node computes it (exactly one, before any node reads it) */
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
    size_t n = ndim >= 0 && ndim <= GR_TAIL_MAX_RANK ? elems(ndim, dims) : MAX_ELEMS + 1;
    for (int d = 0; n <= MAX_ELEMS && d < ndim; d++)
        if (dims[d] > (int64_t)MAX_ELEMS) /* a dim beside a 0: no sum or product of dims wraps */
            n = MAX_ELEMS + 1;
    if (n > MAX_ELEMS || t->n_values >= MAX_VALUES) {
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

/* ---- the nodes' checks ----------------------------------------------------------------------
 * Every node is checked here against the values it reads and writes, whoever adds it (the
 * importer, models/onnx/head.c, after its ONNX checks; an engine file's tail, gr_tail_read): what
 * gr_tail_run assumes - arguments computed before, one node per computed value, dims the op
 * gives - holds for any tail that was built, so a loaded tail is trusted exactly as an imported
 * one. */

static bool same_dims(const tail_value *a, const tail_value *b)
{
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof *a->dims) == 0;
}

/* A value a node may read: an input, a constant, or a value an earlier node computed. */
static bool ready(const gr_onnx_tail *t, int id)
{
    return id >= 0 && id < t->n_values && (t->values[id].kind != V_TEMP || t->values[id].written);
}

static const char *op_name(gr_tail_op op)
{
    static const char *const names[] = {"copy", "transpose", "concat", "slice", "softmax",
                                        "sigmoid", "add", "sub", "mul", "div", "pow", "conv1x1"};
    return (unsigned)op <= GR_TAIL_CONV1X1 ? names[op] : "unknown";
}

/* The dims of op's output from its inputs', where they follow from them alone. */
static bool dims_ok(const gr_onnx_tail *t, const gr_tail_node *nd)
{
    const tail_value *o = &t->values[nd->out], *x = &t->values[nd->args[0]];
    switch (nd->op) {
    case GR_TAIL_COPY: return x->n == o->n;
    case GR_TAIL_SIGMOID: return same_dims(x, o);
    case GR_TAIL_SOFTMAX:
        return same_dims(x, o) && nd->axis >= 0 && nd->axis < nd->axis_end &&
               nd->axis_end <= o->ndim;
    case GR_TAIL_TRANSPOSE: {
        bool seen[GR_TAIL_MAX_RANK] = {false};
        if (x->ndim != o->ndim)
            return false;
        for (int d = 0; d < o->ndim; d++) {
            int64_t p = nd->perm[d];
            if (p < 0 || p >= o->ndim || seen[p] || o->dims[d] != x->dims[p])
                return false;
            seen[p] = true;
        }
        return true;
    }
    case GR_TAIL_SLICE: /* every index start + k * step, k < the output's dim, inside the input */
        if (x->ndim != o->ndim)
            return false;
        for (int d = 0; d < o->ndim; d++)
            if (nd->start[d] < 0 || nd->start[d] >= x->dims[d] || nd->step[d] < 1 ||
                o->dims[d] - 1 > (x->dims[d] - 1 - nd->start[d]) / nd->step[d])
                return false;
        return true;
    case GR_TAIL_CONCAT: {
        if (nd->axis < 0 || nd->axis >= o->ndim)
            return false;
        int64_t along = 0;
        for (int k = 0; k < nd->n_args; k++) {
            const tail_value *in = &t->values[nd->args[k]];
            if (in->ndim != o->ndim)
                return false;
            for (int d = 0; d < o->ndim; d++)
                if (d != nd->axis && in->dims[d] != o->dims[d])
                    return false;
            along += in->dims[nd->axis];
        }
        return along == o->dims[nd->axis];
    }
    case GR_TAIL_CONV1X1: { /* weights [M, C] and bias [M]: constants, as the importer's */
        const tail_value *w = &t->values[nd->args[1]];
        const tail_value *bias = nd->n_args > 2 ? &t->values[nd->args[2]] : NULL;
        return x->ndim == 4 && o->ndim == 4 && o->dims[0] == x->dims[0] &&
               o->dims[2] == x->dims[2] && o->dims[3] == x->dims[3] && w->kind == V_CONST &&
               w->n == (size_t)o->dims[1] * (size_t)x->dims[1] &&
               (!bias || (bias->kind == V_CONST && bias->n == (size_t)o->dims[1]));
    }
    default: { /* numpy broadcasting */
        const tail_value *y = &t->values[nd->args[1]];
        int rank = x->ndim > y->ndim ? x->ndim : y->ndim;
        if (o->ndim != rank)
            return false;
        for (int d = 0; d < rank; d++) {
            int64_t a = d - (rank - x->ndim) >= 0 ? x->dims[d - (rank - x->ndim)] : 1;
            int64_t b = d - (rank - y->ndim) >= 0 ? y->dims[d - (rank - y->ndim)] : 1;
            if ((a != b && a != 1 && b != 1) || o->dims[d] != (a == 1 ? b : a))
                return false;
        }
        return true;
    }
    }
}

static gr_status check_node(const gr_onnx_tail *t, const gr_tail_node *nd)
{
    int lo = 1, hi = 1;
    if ((unsigned)nd->op > GR_TAIL_CONV1X1)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "head-tail node %d: op %d is unknown", t->n_nodes,
                       (int)nd->op);
    if (nd->op == GR_TAIL_CONCAT)
        hi = GR_TAIL_MAX_ARGS;
    else if (nd->op == GR_TAIL_CONV1X1)
        lo = 2, hi = 3;
    else if (nd->op >= GR_TAIL_ADD)
        lo = hi = 2;
    if (nd->n_args < lo || nd->n_args > hi)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "head-tail node %d (%s): %d arguments (%d to %d)",
                       t->n_nodes, op_name(nd->op), nd->n_args, lo, hi);
    for (int k = 0; k < nd->n_args; k++)
        if (!ready(t, nd->args[k]))
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "head-tail node %d (%s): argument %d is value "
                           "%d, which is no input, constant or value computed before it",
                           t->n_nodes, op_name(nd->op), k, nd->args[k]);
    if (nd->out < 0 || nd->out >= t->n_values || t->values[nd->out].kind != V_TEMP ||
        t->values[nd->out].written)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "head-tail node %d (%s): its output, value %d, is "
                       "not a value still to compute", t->n_nodes, op_name(nd->op), nd->out);
    if (!dims_ok(t, nd))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "head-tail node %d (%s): output value %d's dims "
                       "are not what the op gives from its arguments' (or its axis, perm, start "
                       "or step is out of range)", t->n_nodes, op_name(nd->op), nd->out);
    return GR_OK;
}

gr_status gr_tail_add_node(gr_onnx_tail *t, const gr_tail_node *node)
{
    if (t->n_nodes >= MAX_NODES)
        return gr_fail(GR_ERR_LIMIT, "more than %d nodes in the detection head", MAX_NODES);
    GR_TRY(check_node(t, node));
    gr_tail_node *nodes = reserve(t->nodes, t->n_nodes, &t->cap_nodes, sizeof *nodes);
    if (!nodes)
        return GR_ERR_OUT_OF_MEMORY;
    t->nodes = nodes;
    t->nodes[t->n_nodes++] = *node;
    t->values[node->out].written = 1;
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
    if (id < 0 || id >= t->n_values || (t->values[id].kind == V_TEMP && !t->values[id].written))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "graph output '%.100s' is value %d of the head "
                       "tail, which no node computes", name, id);
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
        /* One element along d: its step is never taken (and may be any size, an ONNX Slice's
         * INT64_MAX among them: the product would overflow). */
        stride[d] = out->dims[d] > 1 ? (int64_t)in_strides[d] * nd->step[d] : 0;
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

int gr_tail_passthrough_input(const gr_onnx_tail *t)
{
    if (t->n_nodes != 1 || t->nodes[0].op != GR_TAIL_COPY || t->nodes[0].out != t->output)
        return -1;
    const tail_value *x = &t->values[t->nodes[0].args[0]];
    return x->kind == V_INPUT ? x->input : -1;
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

/* ---- engine files ------------------------------------------------------------------------- */

void gr_tail_write(const gr_onnx_tail *t, gr_bytes *b)
{
    gr_bytes_u32(b, (uint32_t)t->n_values);
    for (int i = 0; i < t->n_values; i++) {
        const tail_value *v = &t->values[i];
        gr_bytes_u32(b, (uint32_t)v->kind);
        gr_bytes_u32(b, (uint32_t)v->ndim);
        for (int d = 0; d < v->ndim; d++)
            gr_bytes_u64(b, (uint64_t)v->dims[d]);
        if (v->kind == V_INPUT)
            gr_bytes_i32(b, t->input_layers[v->input]);
        else if (v->kind == V_CONST)
            gr_bytes_put(b, v->data, v->n * sizeof *v->data);
    }
    gr_bytes_u32(b, (uint32_t)t->n_nodes);
    for (int i = 0; i < t->n_nodes; i++) {
        const gr_tail_node *nd = &t->nodes[i];
        const int head[] = {(int)nd->op, nd->out, nd->axis, nd->axis_end, nd->n_args};
        for (size_t k = 0; k < sizeof head / sizeof head[0]; k++)
            gr_bytes_i32(b, head[k]);
        for (int k = 0; k < nd->n_args; k++)
            gr_bytes_i32(b, nd->args[k]);
        /* perm (transpose), start and step (slice): one per axis of the output */
        int rank = nd->op == GR_TAIL_TRANSPOSE || nd->op == GR_TAIL_SLICE
                       ? t->values[nd->out].ndim : 0;
        gr_bytes_u32(b, (uint32_t)rank);
        for (int d = 0; d < rank; d++) {
            gr_bytes_u64(b, (uint64_t)(nd->op == GR_TAIL_TRANSPOSE ? nd->perm[d] : nd->start[d]));
            if (nd->op == GR_TAIL_SLICE)
                gr_bytes_u64(b, (uint64_t)nd->step[d]);
        }
    }
    gr_bytes_i32(b, t->output);
}

/* The status of a builder call's refusal (its message set): a limit or a check in a file is
 * corruption, out of memory stays what it is. */
static gr_status builder_refusal(void)
{
    return strncmp(gr_last_error(), "out of memory", 13) == 0 ? GR_ERR_OUT_OF_MEMORY
                                                              : GR_ERR_PARSE;
}

/* Value i of the record, made by the builder call of its kind: GR_OK with *made its id, or a
 * short read (GR_OK, *made -1), or the builder's refusal / the record's. */
static gr_status read_value(gr_reader *r, gr_onnx_tail *t, int i, const size_t *layer_elems,
                            int n_layers, int *made)
{
    *made = -1;
    uint32_t kind = gr_reader_u32(r), ndim = gr_reader_u32(r);
    if (r->short_read)
        return GR_OK;
    if (kind > V_TEMP || ndim > GR_TAIL_MAX_RANK)
        return gr_fail(GR_ERR_PARSE, "value %d: kind %u, rank %u (at most %d)", i, kind, ndim,
                       GR_TAIL_MAX_RANK);
    int64_t dims[GR_TAIL_MAX_RANK];
    for (uint32_t d = 0; d < ndim; d++)
        dims[d] = (int64_t)gr_reader_u64(r);
    if (kind == V_INPUT) {
        int32_t layer = gr_reader_i32(r);
        if (r->short_read)
            return GR_OK;
        size_t n = elems((int)ndim, dims);
        if (layer < 0 || layer >= n_layers || n != layer_elems[layer])
            return gr_fail(GR_ERR_PARSE, "value %d: an input of %zu values from layer %d, which "
                           "is not a layer of the network or holds another count", i, n,
                           (int)layer);
        *made = gr_tail_input(t, layer, (int)ndim, dims);
    } else if (kind == V_CONST) {
        if (r->short_read)
            return GR_OK;
        size_t n = elems((int)ndim, dims);
        if (n > MAX_ELEMS)
            return gr_fail(GR_ERR_PARSE, "value %d: a constant of more than %zu values", i,
                           MAX_ELEMS);
        const uint8_t *p = gr_reader_take(r, n * sizeof(float));
        if (!p)
            return GR_OK;
        float *data = gr_malloc((n ? n : 1) * sizeof *data, "head-tail constant");
        if (!data)
            return GR_ERR_OUT_OF_MEMORY;
        memcpy(data, p, n * sizeof *data); /* p need not be float-aligned */
        *made = gr_tail_const(t, (int)ndim, dims, data);
        free(data);
    } else {
        if (r->short_read)
            return GR_OK;
        *made = gr_tail_value(t, (int)ndim, dims);
    }
    if (*made < 0)
        return builder_refusal();
    if (*made != i) /* an input value the same as an earlier one: never written so */
        return gr_fail(GR_ERR_PARSE, "value %d repeats value %d", i, *made);
    return GR_OK;
}

static gr_status read_node(gr_reader *r, gr_onnx_tail *t, int i)
{
    gr_tail_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = (gr_tail_op)gr_reader_i32(r);
    nd.out = gr_reader_i32(r);
    nd.axis = gr_reader_i32(r);
    nd.axis_end = gr_reader_i32(r);
    nd.n_args = gr_reader_i32(r);
    if (r->short_read)
        return GR_OK;
    if (nd.n_args < 0 || nd.n_args > GR_TAIL_MAX_ARGS)
        return gr_fail(GR_ERR_PARSE, "node %d: %d arguments (at most %d)", i, nd.n_args,
                       GR_TAIL_MAX_ARGS);
    for (int k = 0; k < nd.n_args; k++)
        nd.args[k] = gr_reader_i32(r);
    uint32_t rank = gr_reader_u32(r);
    if (r->short_read)
        return GR_OK;
    if (rank > GR_TAIL_MAX_RANK)
        return gr_fail(GR_ERR_PARSE, "node %d: %u axes (at most %d)", i, rank, GR_TAIL_MAX_RANK);
    for (uint32_t d = 0; d < rank; d++) {
        int64_t v = (int64_t)gr_reader_u64(r);
        if (nd.op == GR_TAIL_TRANSPOSE)
            nd.perm[d] = v;
        else
            nd.start[d] = v;
        if (nd.op == GR_TAIL_SLICE)
            nd.step[d] = (int64_t)gr_reader_u64(r);
    }
    if (r->short_read)
        return GR_OK;
    /* Transpose and slice give one entry per axis of their output, every other op none. */
    int want = (nd.op == GR_TAIL_TRANSPOSE || nd.op == GR_TAIL_SLICE) && nd.out >= 0 &&
                       nd.out < t->n_values ? t->values[nd.out].ndim : 0;
    if ((int)rank != want)
        return gr_fail(GR_ERR_PARSE, "node %d: %u axes of perm, start or step, not %d", i, rank,
                       want);
    return gr_tail_add_node(t, &nd) == GR_OK ? GR_OK : builder_refusal();
}

static gr_status read_tail(gr_reader *r, gr_onnx_tail *t, const size_t *layer_elems,
                           int n_layers)
{
    uint32_t n_values = gr_reader_u32(r);
    if (!r->short_read && n_values > MAX_VALUES)
        return gr_fail(GR_ERR_PARSE, "%u values (at most %d)", n_values, MAX_VALUES);
    for (uint32_t i = 0; i < n_values && !r->short_read; i++) {
        int made;
        GR_TRY(read_value(r, t, (int)i, layer_elems, n_layers, &made));
    }
    uint32_t n_nodes = gr_reader_u32(r);
    if (!r->short_read && n_nodes > MAX_NODES)
        return gr_fail(GR_ERR_PARSE, "%u nodes (at most %d)", n_nodes, MAX_NODES);
    for (uint32_t i = 0; i < n_nodes && !r->short_read; i++)
        GR_TRY(read_node(r, t, (int)i));
    int32_t output = gr_reader_i32(r);
    if (r->short_read)
        return GR_OK;
    return gr_tail_finish(t, output, "(the saved head's)") == GR_OK ? GR_OK : builder_refusal();
}

gr_status gr_tail_read(gr_reader *r, const char *source, const size_t *layer_elems, int n_layers,
                       gr_onnx_tail **out)
{
    *out = NULL;
    gr_onnx_tail *t = gr_tail_new();
    if (!t)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = read_tail(r, t, layer_elems, n_layers);
    if (st == GR_OK && !r->short_read) {
        *out = t;
        return GR_OK;
    }
    gr_tail_release(t);
    if (st == GR_OK) /* a short read */
        st = gr_fail(GR_ERR_PARSE, "its record ends early (byte %zu of %zu)", r->pos, r->len);
    if (st != GR_ERR_PARSE)
        return st;
    char why[512];
    snprintf(why, sizeof why, "%s", gr_last_error());
    return gr_fail(st, "%s: the detection head run on the host: %s: file corrupt", source, why);
}
