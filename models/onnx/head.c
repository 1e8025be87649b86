/* ONNX nodes -> head-tail nodes (models/onnx/head.h): each op's ONNX semantics (attributes,
 * constant inputs, output dims) checked here at load, so that the tail (tail.c) only runs fixed
 * shapes. Also the file's Ultralytics metadata_props. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx/head.h"

static const char *const tail_ops[] = {
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
    "Slice", "Softmax", "Sigmoid", "Add", "Sub", "Mul", "Div", "Pow", "Conv", NULL};

/* The ops that start a head on graphrun layers' outputs when no layer runs them: they move data
 * (a convolution or an activation no layer runs is refused as it was, not moved to the host). */
static const char *const starting_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                           "Transpose", "Concat", "Split", "Slice", "Softmax",
                                           NULL};

static bool listed(const char *const *list, const char *op)
{
    for (const char *const *o = list; *o; o++)
        if (strcmp(*o, op) == 0)
            return true;
    return false;
}

bool onnx_head_runs(const char *op) { return listed(tail_ops, op); }

bool onnx_head_starts(const char *op) { return listed(starting_ops, op); }

/* One node's build: its inputs as tail values, messages into `why`. */
typedef struct head_build {
    gr_onnx_tail *t;
    const Onnx__NodeProto *node;
    int opset;
    const head_in *in;
    int n_in;
    char *why;
    size_t why_len;
} head_build;

static gr_status refuse(const head_build *b, gr_status st, const char *fmt, ...) GR_PRINTF(3, 4);
static gr_status refuse(const head_build *b, gr_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, b->why_len, fmt, ap);
    va_end(ap);
    return st;
}

/* The library's last message (a tail limit) as the reason. */
static gr_status refuse_last(const head_build *b, gr_status st)
{
    return refuse(b, st, "%s", gr_last_error());
}

/* Input k as a tail value (constants become tail constants, in float). */
static gr_status tail_arg(const head_build *b, int k, int *id)
{
    const head_in *x = k < b->n_in ? &b->in[k] : NULL;
    if (!x || x->kind == HEAD_IN_NONE)
        return refuse(b, GR_ERR_PARSE, "input %d is missing", k);
    if (x->kind == HEAD_IN_TAIL) {
        *id = x->id;
    } else if (x->kind == HEAD_IN_LAYER) {
        *id = gr_tail_input(b->t, x->layer, x->ndim, x->dims);
    } else {
        const onnx_const *c = x->k;
        float *f = c->is_float ? c->f : gr_malloc((c->n ? c->n : 1) * sizeof *f, "constant");
        if (!f)
            return GR_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; !c->is_float && i < c->n; i++)
            f[i] = (float)c->i[i];
        *id = gr_tail_const(b->t, c->ndim, c->dims, f);
        if (!c->is_float)
            free(f);
    }
    return *id < 0 ? refuse_last(b, GR_ERR_LIMIT) : GR_OK;
}

/* Input k as an integer constant (a shape, axes, sizes); NULL when omitted and optional. */
static gr_status int_arg(const head_build *b, int k, bool optional, const onnx_const **out)
{
    const head_in *x = k < b->n_in ? &b->in[k] : NULL;
    *out = NULL;
    if ((!x || x->kind == HEAD_IN_NONE) && optional)
        return GR_OK;
    if (!x || x->kind != HEAD_IN_CONST || x->k->is_float || x->k->ndim > 1)
        return refuse(b, GR_ERR_UNSUPPORTED, "input %d must be a constant list of integers", k);
    *out = x->k;
    return GR_OK;
}

/* A normalised axis of a rank-`rank` tensor, or -1. */
static int axis_of(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* A node with one output of these dims; *out its value. */
static gr_status emit(const head_build *b, gr_tail_node *nd, int ndim, const int64_t *dims,
                      int *out)
{
    nd->out = gr_tail_value(b->t, ndim, dims);
    if (nd->out < 0)
        return refuse_last(b, GR_ERR_LIMIT);
    gr_status st = gr_tail_add_node(b->t, nd);
    if (st != GR_OK)
        return refuse_last(b, st);
    *out = nd->out;
    return GR_OK;
}

static gr_status copy_to(const head_build *b, int x, int ndim, const int64_t *dims, int *out)
{
    gr_tail_node nd = {.op = GR_TAIL_COPY, .n_args = 1, .args = {x}};
    return emit(b, &nd, ndim, dims, out);
}

static size_t count(int ndim, const int64_t *dims)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)dims[d];
    return n;
}

static gr_status do_reshape(const head_build *b, int x, int *out)
{
    const onnx_const *shape;
    GR_TRY(int_arg(b, 1, false, &shape));
    int64_t in[GR_TAIL_MAX_RANK], dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    if (shape->n > GR_TAIL_MAX_RANK)
        return refuse(b, GR_ERR_UNSUPPORTED, "to rank %zu (at most %d)", shape->n,
                      GR_TAIL_MAX_RANK);
    int infer = -1;
    size_t known = 1;
    bool allowzero = onnx_attr_int(b->node, "allowzero", 0) != 0;
    for (size_t d = 0; d < shape->n; d++) {
        dims[d] = shape->i[d];
        if (dims[d] == 0 && !allowzero && (int)d < rank)
            dims[d] = in[d];
        if (dims[d] == -1 && infer < 0)
            infer = (int)d;
        else if (dims[d] < 0 || dims[d] > (int64_t)GR_MAX_TENSOR_ELEMS)
            return refuse(b, GR_ERR_UNSUPPORTED, "target dim %zu is %lld", d,
                          (long long)shape->i[d]);
        else
            known *= (size_t)dims[d];
    }
    size_t n = count(rank, in);
    if (infer >= 0)
        dims[infer] = known && n % known == 0 ? (int64_t)(n / known) : -1;
    if ((infer >= 0 && dims[infer] < 0) || count((int)shape->n, dims) != n)
        return refuse(b, GR_ERR_UNSUPPORTED, "%zu values cannot take the shape asked", n);
    return copy_to(b, x, (int)shape->n, dims, out);
}

static gr_status do_squeeze(const head_build *b, int x, bool unsqueeze, int *out)
{
    const int64_t *axes = NULL;
    size_t n_axes = onnx_attr_ints(b->node, "axes", &axes);
    const onnx_const *k = NULL;
    if (b->opset >= 13) {
        GR_TRY(int_arg(b, 1, !unsqueeze, &k));
        n_axes = k ? k->n : 0;
        axes = k ? k->i : NULL;
    }
    int64_t in[GR_TAIL_MAX_RANK], dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    int out_rank = unsqueeze ? rank + (int)n_axes : rank;
    if (out_rank > GR_TAIL_MAX_RANK)
        return refuse(b, GR_ERR_UNSUPPORTED, "to rank %d (at most %d)", out_rank,
                      GR_TAIL_MAX_RANK);
    bool mark[GR_TAIL_MAX_RANK] = {false};
    for (size_t i = 0; i < n_axes; i++) {
        int a = axis_of(axes[i], out_rank);
        if (a < 0 || mark[a] || (!unsqueeze && in[a] != 1))
            return refuse(b, GR_ERR_UNSUPPORTED, "axis %lld", (long long)axes[i]);
        mark[a] = true;
    }
    int r = 0;
    for (int d = 0, s = 0; d < out_rank; d++) {
        if (unsqueeze)
            dims[r++] = mark[d] ? 1 : in[s++];
        else if (!(mark[d] || (n_axes == 0 && in[d] == 1)))
            dims[r++] = in[d];
    }
    return copy_to(b, x, r, dims, out);
}

static gr_status do_transpose(const head_build *b, int x, int *out)
{
    int64_t in[GR_TAIL_MAX_RANK], dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    const int64_t *perm = NULL;
    size_t n = onnx_attr_ints(b->node, "perm", &perm);
    gr_tail_node nd = {.op = GR_TAIL_TRANSPOSE, .n_args = 1, .args = {x}};
    if (n && n != (size_t)rank)
        return refuse(b, GR_ERR_UNSUPPORTED, "perm of %zu axes for rank %d", n, rank);
    bool seen[GR_TAIL_MAX_RANK] = {false};
    for (int d = 0; d < rank; d++) {
        int64_t p = n ? perm[d] : rank - 1 - d;
        if (p < 0 || p >= rank || seen[p])
            return refuse(b, GR_ERR_UNSUPPORTED, "perm is not a permutation of 0..%d", rank - 1);
        seen[p] = true;
        nd.perm[d] = p;
        dims[d] = in[p];
    }
    return emit(b, &nd, rank, dims, out);
}

static gr_status do_concat(const head_build *b, int *out)
{
    gr_tail_node nd = {.op = GR_TAIL_CONCAT};
    int64_t dims[GR_TAIL_MAX_RANK], d0[GR_TAIL_MAX_RANK];
    int rank = 0, axis = -1;
    if (b->n_in < 1 || b->n_in > GR_TAIL_MAX_ARGS)
        return refuse(b, GR_ERR_UNSUPPORTED, "%d inputs (1 to %d)", b->n_in, GR_TAIL_MAX_ARGS);
    for (int k = 0; k < b->n_in; k++) {
        GR_TRY(tail_arg(b, k, &nd.args[k]));
        int r = gr_tail_dims(b->t, nd.args[k], k ? d0 : dims);
        if (k == 0) {
            rank = r;
            axis = axis_of(onnx_attr_int(b->node, "axis", 0), rank);
            if (axis < 0)
                return refuse(b, GR_ERR_UNSUPPORTED, "axis out of range for rank %d", rank);
            continue;
        }
        bool same = r == rank;
        for (int d = 0; same && d < rank; d++)
            same = d == axis || d0[d] == dims[d];
        if (!same)
            return refuse(b, GR_ERR_UNSUPPORTED, "input %d's dims differ off the axis", k);
        dims[axis] += d0[axis];
    }
    nd.n_args = b->n_in;
    nd.axis = axis;
    return emit(b, &nd, rank, dims, out);
}

/* A slice of x: per axis start, step and length (the other axes whole). */
static gr_status slice_of(const head_build *b, int x, const int64_t *start, const int64_t *step,
                          const int64_t *len, int *out)
{
    int64_t in[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    gr_tail_node nd = {.op = GR_TAIL_SLICE, .n_args = 1, .args = {x}};
    memcpy(nd.start, start, (size_t)rank * sizeof *start);
    memcpy(nd.step, step, (size_t)rank * sizeof *step);
    return emit(b, &nd, rank, len, out);
}

static gr_status do_split(const head_build *b, int x, int *out_ids)
{
    int64_t in[GR_TAIL_MAX_RANK], start[GR_TAIL_MAX_RANK] = {0}, step[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    int axis = axis_of(onnx_attr_int(b->node, "axis", 0), rank);
    int n_out = (int)b->node->n_output;
    if (axis < 0 || n_out < 1 || n_out > 64)
        return refuse(b, GR_ERR_UNSUPPORTED, "axis out of range or %d outputs", n_out);
    const int64_t *sizes = NULL;
    size_t n_sizes = onnx_attr_ints(b->node, "split", &sizes);
    const onnx_const *k = NULL;
    if (b->opset >= 13) {
        GR_TRY(int_arg(b, 1, true, &k));
        n_sizes = k ? k->n : 0;
        sizes = k ? k->i : NULL;
    }
    int64_t total = 0, part = (in[axis] + n_out - 1) / n_out;
    if (n_sizes && n_sizes != (size_t)n_out)
        return refuse(b, GR_ERR_UNSUPPORTED, "%zu sizes for %d outputs", n_sizes, n_out);
    for (int d = 0; d < rank; d++)
        step[d] = 1;
    for (int o = 0; o < n_out; o++) {
        int64_t len[GR_TAIL_MAX_RANK];
        memcpy(len, in, (size_t)rank * sizeof *len);
        len[axis] = n_sizes ? sizes[o] : (total + part <= in[axis] ? part : in[axis] - total);
        if (len[axis] < 0 || total + len[axis] > in[axis])
            return refuse(b, GR_ERR_UNSUPPORTED, "sizes do not add up to dim %lld",
                          (long long)in[axis]);
        start[axis] = total;
        total += len[axis];
        out_ids[o] = -1;
        if (b->node->output[o][0])
            GR_TRY(slice_of(b, x, start, step, len, &out_ids[o]));
    }
    if (total != in[axis])
        return refuse(b, GR_ERR_UNSUPPORTED, "sizes add up to %lld, not dim %lld",
                      (long long)total, (long long)in[axis]);
    return GR_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static gr_status do_slice(const head_build *b, int x, int *out)
{
    if (b->opset < 10)
        return refuse(b, GR_ERR_UNSUPPORTED, "Slice before opset 10");
    int64_t in[GR_TAIL_MAX_RANK], start[GR_TAIL_MAX_RANK] = {0}, step[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, in);
    int64_t len[GR_TAIL_MAX_RANK];
    memcpy(len, in, sizeof len);
    for (int d = 0; d < rank; d++)
        step[d] = 1;
    const onnx_const *starts, *ends, *axes, *steps;
    GR_TRY(int_arg(b, 1, false, &starts));
    GR_TRY(int_arg(b, 2, false, &ends));
    GR_TRY(int_arg(b, 3, true, &axes));
    GR_TRY(int_arg(b, 4, true, &steps));
    if (ends->n != starts->n || (axes && axes->n != starts->n) || (steps && steps->n != starts->n))
        return refuse(b, GR_ERR_UNSUPPORTED, "starts, ends, axes and steps of different lengths");
    for (size_t i = 0; i < starts->n; i++) {
        int a = axis_of(axes ? axes->i[i] : (int64_t)i, rank);
        int64_t s = steps ? steps->i[i] : 1;
        if (a < 0 || s < 1)
            return refuse(b, GR_ERR_UNSUPPORTED, "axis out of range or step %lld (steps >= 1)",
                          (long long)s);
        int64_t lo = starts->i[i], hi = ends->i[i];
        lo = clamp64(lo < 0 ? lo + in[a] : lo, 0, in[a]);
        hi = clamp64(hi < 0 ? hi + in[a] : hi, 0, in[a]);
        start[a] = lo;
        step[a] = s;
        len[a] = hi > lo ? (hi - lo + s - 1) / s : 0;
    }
    return slice_of(b, x, start, step, len, out);
}

static gr_status do_softmax(const head_build *b, int x, int *out)
{
    int64_t dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(b->t, x, dims);
    int axis = axis_of(onnx_attr_int(b->node, "axis", b->opset >= 13 ? -1 : 1), rank);
    if (axis < 0)
        return refuse(b, GR_ERR_UNSUPPORTED, "axis out of range for rank %d", rank);
    /* Before opset 13 Softmax flattens at the axis: over every dim from it on. */
    gr_tail_node nd = {.op = GR_TAIL_SOFTMAX, .n_args = 1, .args = {x}, .axis = axis,
                       .axis_end = b->opset >= 13 ? axis + 1 : rank};
    return emit(b, &nd, rank, dims, out);
}

static gr_status do_binary(const head_build *b, gr_tail_op op, int *out)
{
    gr_tail_node nd = {.op = op, .n_args = 2};
    GR_TRY(tail_arg(b, 0, &nd.args[0]));
    GR_TRY(tail_arg(b, 1, &nd.args[1]));
    int64_t da[GR_TAIL_MAX_RANK], db[GR_TAIL_MAX_RANK], dims[GR_TAIL_MAX_RANK];
    int ra = gr_tail_dims(b->t, nd.args[0], da), rb = gr_tail_dims(b->t, nd.args[1], db);
    int rank = ra > rb ? ra : rb;
    for (int d = 0; d < rank; d++) {
        int64_t x = d - (rank - ra) >= 0 ? da[d - (rank - ra)] : 1;
        int64_t y = d - (rank - rb) >= 0 ? db[d - (rank - rb)] : 1;
        if (x != y && x != 1 && y != 1)
            return refuse(b, GR_ERR_UNSUPPORTED, "dims %lld and %lld do not broadcast",
                          (long long)x, (long long)y);
        dims[d] = x == 1 ? y : x;
    }
    return emit(b, &nd, rank, dims, out);
}

/* A 1x1 convolution with constant weights (the DFL's expectation). */
static gr_status do_conv(const head_build *b, int x, int *out)
{
    int64_t in[GR_TAIL_MAX_RANK], dims[4];
    int rank = gr_tail_dims(b->t, x, in);
    const head_in *w = b->n_in > 1 ? &b->in[1] : NULL;
    const head_in *bias = b->n_in > 2 && b->in[2].kind != HEAD_IN_NONE ? &b->in[2] : NULL;
    const int64_t *a = NULL;
    bool plain = rank == 4 && onnx_attr_int(b->node, "group", 1) == 1;
    size_t n = onnx_attr_ints(b->node, "strides", &a);
    for (size_t i = 0; plain && i < n; i++)
        plain = a[i] == 1;
    n = onnx_attr_ints(b->node, "pads", &a);
    for (size_t i = 0; plain && i < n; i++)
        plain = a[i] == 0;
    n = onnx_attr_ints(b->node, "dilations", &a);
    for (size_t i = 0; plain && i < n; i++)
        plain = a[i] == 1;
    if (!plain || !w || w->kind != HEAD_IN_CONST || !w->k->is_float || w->k->ndim != 4 ||
        w->k->dims[1] != in[1] || w->k->dims[2] != 1 || w->k->dims[3] != 1 ||
        (bias && (bias->kind != HEAD_IN_CONST || bias->k->n != (size_t)w->k->dims[0])))
        return refuse(b, GR_ERR_UNSUPPORTED, "after graphrun's layers only a 1x1 convolution "
                      "of constant float weights, stride 1, no padding, one group runs here");
    gr_tail_node nd = {.op = GR_TAIL_CONV1X1, .n_args = bias ? 3 : 2, .args = {x, -1, -1}};
    GR_TRY(tail_arg(b, 1, &nd.args[1]));
    if (bias)
        GR_TRY(tail_arg(b, 2, &nd.args[2]));
    dims[0] = in[0];
    dims[1] = w->k->dims[0];
    dims[2] = in[2];
    dims[3] = in[3];
    return emit(b, &nd, 4, dims, out);
}

gr_status onnx_head_node(gr_onnx_tail **tail, const Onnx__NodeProto *node, int opset,
                         const head_in *in, int n_in, int *out_ids, char *why, size_t why_len)
{
    if (!*tail && !(*tail = gr_tail_new()))
        return GR_ERR_OUT_OF_MEMORY;
    head_build b = {*tail, node, opset, in, n_in, why, why_len};
    const char *op = onnx_str(node->op_type);
    for (size_t k = 0; k < node->n_output; k++)
        out_ids[k] = -1;
    static const struct {
        const char *name;
        gr_tail_op op;
    } binaries[] = {{"Add", GR_TAIL_ADD}, {"Sub", GR_TAIL_SUB}, {"Mul", GR_TAIL_MUL},
                    {"Div", GR_TAIL_DIV}, {"Pow", GR_TAIL_POW}};
    for (size_t i = 0; i < sizeof binaries / sizeof binaries[0]; i++)
        if (strcmp(op, binaries[i].name) == 0)
            return do_binary(&b, binaries[i].op, &out_ids[0]);
    if (strcmp(op, "Concat") == 0)
        return do_concat(&b, &out_ids[0]);
    int x;
    GR_TRY(tail_arg(&b, 0, &x));
    int64_t dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(*tail, x, dims);
    if (strcmp(op, "Identity") == 0) {
        out_ids[0] = x;
        return GR_OK;
    }
    if (strcmp(op, "Reshape") == 0)
        return do_reshape(&b, x, &out_ids[0]);
    if (strcmp(op, "Flatten") == 0) {
        int axis = axis_of(onnx_attr_int(node, "axis", 1), rank + 1);
        if (axis < 0)
            return refuse(&b, GR_ERR_UNSUPPORTED, "axis out of range for rank %d", rank);
        int64_t flat[2] = {(int64_t)count(axis, dims), (int64_t)count(rank - axis, dims + axis)};
        return copy_to(&b, x, 2, flat, &out_ids[0]);
    }
    if (strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0)
        return do_squeeze(&b, x, op[0] == 'U', &out_ids[0]);
    if (strcmp(op, "Transpose") == 0)
        return do_transpose(&b, x, &out_ids[0]);
    if (strcmp(op, "Split") == 0)
        return do_split(&b, x, out_ids);
    if (strcmp(op, "Slice") == 0)
        return do_slice(&b, x, &out_ids[0]);
    if (strcmp(op, "Softmax") == 0)
        return do_softmax(&b, x, &out_ids[0]);
    if (strcmp(op, "Conv") == 0)
        return do_conv(&b, x, &out_ids[0]);
    if (strcmp(op, "Sigmoid") == 0) {
        gr_tail_node nd = {.op = GR_TAIL_SIGMOID, .n_args = 1, .args = {x}};
        return emit(&b, &nd, rank, dims, &out_ids[0]);
    }
    return refuse(&b, GR_ERR_UNSUPPORTED, "not supported after graphrun's layers (the "
                  "detection head runs %s; docs/onnx.md)", "Reshape, Transpose, Concat, Split, "
                  "Slice, Softmax, Sigmoid, 1x1 Conv, Add, Sub, Mul, Div, Pow");
}

gr_status onnx_head_shape(const gr_onnx_tail *tail, int id, const Onnx__NodeProto *node,
                          onnx_const *out, char *why, size_t why_len)
{
    int64_t dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_dims(tail, id, dims);
    int64_t start = onnx_attr_int(node, "start", 0), end = onnx_attr_int(node, "end", rank);
    start = clamp64(start < 0 ? start + rank : start, 0, rank);
    end = clamp64(end < 0 ? end + rank : end, 0, rank);
    int64_t n = end > start ? end - start : 0;
    GR_TRY(onnx_const_alloc(out, 1, &n, 0, 1, why, why_len));
    for (int64_t i = 0; i < n; i++)
        out->i[i] = dims[start + i];
    return GR_OK;
}

/* ---- metadata ----------------------------------------------------------------------------- */

#define MAX_NAMES 4096

static void warn(gr_net *net, const char *source, const char *fmt, ...) GR_PRINTF(3, 4);
static void warn(gr_net *net, const char *source, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!net->load_notice[0])
        snprintf(net->load_notice, sizeof net->load_notice, "%.200s: %s", source, what);
}

static const char *skip_space(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* A quoted Python string at p ('...' or "...", backslash escapes kept as the next char) into
 * dst; returns the position after it, NULL when malformed. */
static const char *quoted(const char *p, char *dst, size_t cap)
{
    char q = *p;
    if (q != '\'' && q != '"')
        return NULL;
    size_t n = 0;
    for (p++; *p && *p != q; p++) {
        if (*p == '\\' && p[1])
            p++;
        if (*p == '\n' || n + 1 >= cap)
            return NULL;
        dst[n++] = *p;
    }
    dst[n] = '\0';
    return *p == q ? p + 1 : NULL;
}

/* names: "{0: 'person', 1: 'bicycle'}" (keys 0, 1, ... in order) or "['person', ...]" as one name
 * a line in *text (malloc'd); false when malformed. */
static bool parse_names(const char *s, char **text)
{
    size_t cap = strlen(s) + 2, used = 0;
    char *out = gr_malloc(cap, "class names");
    if (!out)
        return false;
    const char *p = skip_space(s);
    char close = *p == '{' ? '}' : *p == '[' ? ']' : 0;
    bool dict = close == '}', ok = close != 0;
    p = ok ? skip_space(p + 1) : p;
    for (long want = 0; ok && *p != close; want++) {
        if (want >= MAX_NAMES) {
            ok = false;
            break;
        }
        if (dict) {
            char *end;
            long key = strtol(p, &end, 10);
            ok = end != p && key == want;
            p = ok ? skip_space(end) : p;
            ok = ok && *p == ':';
            p = skip_space(p + (ok ? 1 : 0));
        }
        char name[256];
        const char *next = ok ? quoted(p, name, sizeof name) : NULL;
        ok = next && name[0];
        if (!ok)
            break;
        size_t len = strlen(name);
        memcpy(out + used, name, len);
        used += len;
        out[used++] = '\n';
        p = skip_space(next);
        if (*p == ',')
            p = skip_space(p + 1);
        else
            ok = *p == close;
    }
    ok = ok && *p == close && *skip_space(p + 1) == '\0' && used > 0;
    if (!ok) {
        free(out);
        return false;
    }
    out[used] = '\0';
    *text = out;
    return true;
}

/* imgsz: "[H, W]" or "N"; false when malformed. */
static bool parse_imgsz(const char *s, long *h, long *w)
{
    const char *p = skip_space(s);
    bool list = *p == '[' || *p == '(';
    char *end;
    *h = strtol(list ? p + 1 : p, &end, 10);
    if (end == (list ? p + 1 : p))
        return false;
    *w = *h;
    p = skip_space(end);
    if (list && *p == ',') {
        const char *q = skip_space(p + 1);
        *w = strtol(q, &end, 10);
        if (end == q)
            return false;
        p = skip_space(end);
    }
    if (list && *p != ']' && *p != ')')
        return false;
    return *skip_space(list ? p + 1 : p) == '\0' && *h > 0 && *w > 0;
}

void onnx_head_metadata(const Onnx__ModelProto *model, gr_net *net, const char *source)
{
    for (size_t i = 0; i < model->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = model->metadata_props[i];
        if (!e || !e->key || !e->value)
            continue;
        if (strcmp(e->key, "names") == 0) {
            char *text = NULL;
            if (!parse_names(e->value, &text)) {
                warn(net, source, "metadata 'names' is not a list or {0: 'name', ...} dict of "
                     "quoted names: ignored (--names gives them)");
                continue;
            }
            if (gr_net_set_class_names_text(net, text, strlen(text), source) != GR_OK)
                warn(net, source, "metadata 'names': %.150s: ignored", gr_last_error());
            else if (net->tail && net->n_class_names != gr_tail_classes(net->tail))
                warn(net, source, "metadata 'names' lists %d names for a head of %d classes",
                     net->n_class_names, gr_tail_classes(net->tail));
            free(text);
        } else if (strcmp(e->key, "imgsz") == 0) {
            long h, w;
            if (!parse_imgsz(e->value, &h, &w))
                warn(net, source, "metadata 'imgsz' (%.40s) is not [H, W]: ignored", e->value);
            else if (h != net->h || w != net->w)
                warn(net, source, "metadata 'imgsz' [%ld, %ld] differs from the graph's input "
                     "%dx%d: the input's size is used", h, w, net->h, net->w);
        } else if (strcmp(e->key, "stride") == 0) {
            char *end;
            long s = strtol(e->value, &end, 10);
            if (end == e->value || *skip_space(end) || s < 1 || net->h % s || net->w % s)
                warn(net, source, "metadata 'stride' (%.40s) is not a stride dividing the input "
                     "%dx%d: ignored", e->value, net->h, net->w);
        }
    }
}
