/* ONNX ModelProto -> gr_net (models/onnx/onnx.h; what is supported: docs/onnx.md).
 *
 * The graph is walked once in node order (ONNX requires a topological order). Every tensor name
 * becomes a value: a constant (initializers, Constant nodes and the shape subgraphs folded by
 * fold.c, which need the fixed input size) or the output of one graphrun layer (-1: the network
 * input). Nodes on computed tensors map onto the existing ops:
 *   Conv -> conv (BatchNormalization after it folded into its weights; Relu, LeakyRelu(0.1),
 *   Sigmoid and the SiLU pattern x * Sigmoid(x) into its activation), MaxPool -> maxpool,
 *   Add -> shortcut (its activation likewise), Concat on channels -> route, Split and Slice on
 *   channels -> route groups, Resize nearest with an integer scale -> upsample,
 *   GlobalAveragePool -> avgpool, Gemm -> connected, Softmax over a whole tensor -> softmax;
 *   Identity, Flatten and Reshape to the same shape or [1, -1] are aliases (a flattened tensor
 *   is marked flat: the same values, seen as [1, C*H*W]); YOLO11's C2PSA attention subgraph
 *   (Reshape / Split / Transpose / MatMul / scale / Softmax from a Conv) -> one attention layer,
 *   matched as a pattern ("attention" below).
 * Anything else is one line "FILE: node 'NAME' (OP, opset N): why", GR_ERR_UNSUPPORTED, and
 * malformed files GR_ERR_PARSE / GR_ERR_LIMIT; the protobuf is parsed by protobuf-c.
 * Layers use float math as PyTorch does (the AlexeyAB forms: ops/ops.h gr_act_form). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/internal.h"
#include "models/onnx/head.h"
#include "models/onnx/internal.h"
#include "models/onnx/onnx.h"

#define OPSET_MIN 11
#define OPSET_MAX 19
#define MAX_NODES 1000000

enum { VAL_NONE = 0, VAL_LAYER, VAL_CONST, VAL_TAIL, VAL_ATTN };

/* VAL_ATTN: the intermediates of an attention subgraph (YOLO11's C2PSA, "attention" below),
 * mapped as a whole onto one attention layer: the role of each. */
enum { ATT_HEADS = 1, ATT_Q, ATT_K, ATT_V, ATT_QT, ATT_SCORES, ATT_PROBS, ATT_PROBS_T, ATT_OUT };

/* One attention subgraph being matched, from the Reshape of its qkv conv's output. */
typedef struct attn_match {
    const char *start;  /* that Reshape's name (messages) */
    int conv;           /* the qkv conv's layer */
    int heads, qkv_dim; /* the Reshape's [1, heads, qkv_dim, tokens] */
    int key_dim, head_dim; /* the Split's sizes: key_dim, key_dim, head_dim */
    float scale;        /* the product of the Mul / Div constants (1: none) */
    int scaled;         /* a Mul / Div was seen */
    int v_layer;        /* the route taking v's channels, -1 until a Reshape of v needs it */
} attn_match;

typedef struct value {
    const char *name;
    int kind;
    int layer;    /* VAL_LAYER: the producing layer, -1 the network input */
    int flat;     /* VAL_LAYER: ONNX sees it as [1, C*H*W] (after Flatten, Gemm), not 4-D */
    onnx_const k; /* VAL_CONST */
    int uses;     /* node inputs and graph outputs that read it (Shape's reads not counted) */
    int user[2];  /* the first two reading nodes (-1: a graph output) */
    int qcodes;   /* a QuantizeLinear's output: int8 codes only a DequantizeLinear may read */
    int has_qp;   /* VAL_CONST made by a DequantizeLinear: its parameters in qp (qdq.c) */
    onnx_qdq_params qp;
    int tail_id;  /* VAL_TAIL: the value of the host-side head tail (models/onnx/head.h) */
    int role;     /* VAL_ATTN: ATT_*, of match im->attn[attn] */
    int attn;
} value;

/* A layer's learned parameters until the net's weight block exists. */
typedef struct layer_params {
    float *weights;
    float *biases;
    int bn_folded;
    int aliased; /* another name reads this layer's output (Identity, ...): nothing may be
                    folded into the layer any more, the other readers would see it */
    float qrange; /* its output's int8 range from a Q/DQ pair (0: none) */
} layer_params;

typedef struct importer {
    const char *source;
    int opset;
    const Onnx__GraphProto *g;
    value *vals;
    size_t n_vals, cap_vals;
    size_t *slots; /* hash of names: index + 1 into vals, 0 empty */
    size_t slot_mask;
    gr_net *net;
    int cap_layers;
    layer_params *params;
    unsigned char *absorbed; /* nodes already handled with an earlier one (SiLU's Mul) */
    int node_index;
    float qinput;  /* the network input's int8 range from a Q/DQ pair (0: none) */
    int n_qdq;     /* Q/DQ nodes seen */
    gr_onnx_tail *tail; /* the detection head's nodes after the layers, NULL when none */
    attn_match *attn;   /* the attention subgraphs seen */
    int n_attn;
} importer;

/* ---- messages ------------------------------------------------------------------------------ */

static gr_status node_fail(const importer *im, const Onnx__NodeProto *node, gr_status st,
                           const char *fmt, ...) GR_PRINTF(4, 5);
static gr_status node_fail(const importer *im, const Onnx__NodeProto *node, gr_status st,
                           const char *fmt, ...)
{
    char what[512], name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (node->name && node->name[0])
        snprintf(name, sizeof name, "'%.150s'", node->name);
    else
        snprintf(name, sizeof name, "#%d", im->node_index);
    return gr_fail(st, "%s: node %s (%.64s, opset %d): %s", im->source, name,
                   onnx_str(node->op_type), im->opset, what);
}

/* ---- values -------------------------------------------------------------------------------- */

static size_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (size_t)h;
}

static value *find_value(const importer *im, const char *name)
{
    if (!name || !name[0])
        return NULL;
    for (size_t i = hash_name(name) & im->slot_mask; im->slots[i]; i = (i + 1) & im->slot_mask)
        if (strcmp(im->vals[im->slots[i] - 1].name, name) == 0)
            return &im->vals[im->slots[i] - 1];
    return NULL;
}

/* A new value named `name`; GR_ERR_PARSE when the name is taken. */
static gr_status add_value(importer *im, const char *name, value **out)
{
    if (find_value(im, name))
        return gr_fail(GR_ERR_PARSE, "%s: tensor '%.200s' is defined twice", im->source, name);
    GR_CHECK_INTERNAL(im->n_vals < im->cap_vals);
    value *v = &im->vals[im->n_vals++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->user[0] = v->user[1] = -1;
    size_t i = hash_name(name) & im->slot_mask;
    while (im->slots[i])
        i = (i + 1) & im->slot_mask;
    im->slots[i] = im->n_vals;
    *out = v;
    return GR_OK;
}

static gr_shape value_shape(const importer *im, const value *v)
{
    if (v->layer < 0) {
        gr_shape s = {im->net->c, im->net->h, im->net->w};
        return s;
    }
    return im->net->layers[v->layer].out;
}

/* The ONNX dims of a computed tensor: [1, C, H, W], or [1, C*H*W] when flat. Returns the rank. */
static int value_dims(const importer *im, const value *v, int64_t dims[4])
{
    gr_shape s = value_shape(im, v);
    dims[0] = 1;
    if (v->flat) {
        dims[1] = (int64_t)gr_shape_elems(s);
        return 2;
    }
    dims[1] = s.c;
    dims[2] = s.h;
    dims[3] = s.w;
    return 4;
}

/* Input k of the node, or NULL when omitted (past the end or an empty name). */
static value *node_input(const importer *im, const Onnx__NodeProto *node, size_t k)
{
    return k < node->n_input ? find_value(im, node->input[k]) : NULL;
}

static void set_output_layer(importer *im, const Onnx__NodeProto *node, size_t k, int layer)
{
    value *v = k < node->n_output ? find_value(im, node->output[k]) : NULL;
    if (v) {
        v->kind = VAL_LAYER;
        v->layer = layer;
        v->flat = 0;
    }
}

/* Output k is the flat ([1, C*H*W]) output of `layer`. */
static void set_output_flat(importer *im, const Onnx__NodeProto *node, size_t k, int layer)
{
    set_output_layer(im, node, k, layer);
    value *v = k < node->n_output ? find_value(im, node->output[k]) : NULL;
    if (v)
        v->flat = 1;
}

/* Output k is another name for the existing tensor x (Identity, a reshape to the same shape, a
 * whole-channel slice, a scale-1 resize). */
static void alias_output(importer *im, const Onnx__NodeProto *node, size_t k, const value *x)
{
    if (x->layer >= 0)
        im->params[x->layer].aliased = 1;
    if (x->flat)
        set_output_flat(im, node, k, x->layer);
    else
        set_output_layer(im, node, k, x->layer);
}

/* Is the optional output k read by anything? */
static bool output_read(const importer *im, const Onnx__NodeProto *node, size_t k)
{
    const value *v = k < node->n_output ? find_value(im, node->output[k]) : NULL;
    return v && v->uses > 0;
}

/* The computed tensor that input k must be (not a constant, not omitted). */
static gr_status layer_input(const importer *im, const Onnx__NodeProto *node, size_t k,
                             value **out)
{
    value *v = node_input(im, node, k);
    *out = NULL;
    if (!v)
        return node_fail(im, node, GR_ERR_PARSE, "input %zu is missing", k);
    if (v->kind != VAL_LAYER)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "input %zu ('%.100s') is a constant where graphrun's mapping of this "
                         "op needs a computed tensor", k, v->name);
    *out = v;
    return GR_OK;
}

/* The 4-D computed tensor that input k must be (not flattened). */
static gr_status spatial_input(const importer *im, const Onnx__NodeProto *node, size_t k,
                               value **out)
{
    GR_TRY(layer_input(im, node, k, out));
    if ((*out)->flat)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "input %zu ('%.100s') is a flattened (2-D) tensor where a 4-D one is "
                         "needed", k, (*out)->name);
    return GR_OK;
}

/* The constant that input k must be; NULL in *out when omitted and `optional`. */
static gr_status const_input(const importer *im, const Onnx__NodeProto *node, size_t k,
                             bool optional, const onnx_const **out)
{
    value *v = node_input(im, node, k);
    *out = NULL;
    if (!v && optional)
        return GR_OK;
    if (!v || v->kind != VAL_CONST)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "input %zu must be a constant (an initializer or a folded shape "
                         "computation)", k);
    *out = &v->k;
    return GR_OK;
}

/* ---- layers -------------------------------------------------------------------------------- */

static gr_status add_layer(importer *im, const Onnx__NodeProto *node, const gr_op_params *p,
                           const int *inputs, int n_inputs, int *index)
{
    gr_net *net = im->net;
    if (net->n_layers == im->cap_layers) {
        int cap = im->cap_layers ? 2 * im->cap_layers : 64;
        gr_layer *layers = realloc(net->layers, (size_t)cap * sizeof *layers);
        if (layers)
            net->layers = layers;
        layer_params *params = realloc(im->params, (size_t)cap * sizeof *params);
        if (params)
            im->params = params;
        if (!layers || !params)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for %d layers", im->source,
                           cap);
        im->cap_layers = cap;
    }
    int i = net->n_layers;
    gr_layer *l = &net->layers[i];
    memset(l, 0, sizeof *l);
    memset(&im->params[i], 0, sizeof im->params[i]);
    l->p = *p;
    l->p.alexeyab = 1;
    gr_op_params_resolve(&l->p);
    l->n_inputs = n_inputs;
    gr_shape in[GR_MAX_INPUTS];
    for (int k = 0; k < n_inputs; k++) {
        l->inputs[k] = inputs[k];
        in[k] = inputs[k] < 0 ? (gr_shape){net->c, net->h, net->w} : net->layers[inputs[k]].out;
    }
    l->cfg_line = im->node_index + 1;
    net->n_layers++; /* counted now, so a failure below frees what the layer owns */
    gr_status st = gr_op_infer(&l->p, in, n_inputs, &l->out);
    if (st != GR_OK)
        return node_fail(im, node, st, "%s", gr_last_error());
    if (l->out.c > GR_MAX_DIM || l->out.h > GR_MAX_DIM || l->out.w > GR_MAX_DIM ||
        gr_shape_elems(l->out) > GR_MAX_TENSOR_ELEMS)
        return node_fail(im, node, GR_ERR_LIMIT, "output %dx%dx%d is too large", l->out.c,
                         l->out.h, l->out.w);
    *index = i;
    return GR_OK;
}

static void base_params(gr_op_kind op, gr_op_params *p)
{
    memset(p, 0, sizeof *p);
    gr_op_params_default(op, p);
    p->op = op;
    p->activation = GR_ACT_LINEAR;
}

/* A one-input route that takes channels [start, start + len) of a c-channel tensor, when route
 * groups can express it (len divides c and start). */
static gr_status channel_range(importer *im, const Onnx__NodeProto *node, const value *x,
                               int64_t start, int64_t len, size_t out_k)
{
    int c = value_shape(im, x).c;
    if (start == 0 && len == c) {
        alias_output(im, node, out_k, x);
        return GR_OK;
    }
    if (len <= 0 || start < 0 || start + len > c || c % len != 0 || start % len != 0)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "channels %lld..%lld of %d: graphrun's route takes only equal groups "
                         "(a range whose length divides the channels and its start)",
                         (long long)start, (long long)(start + len), c);
    gr_op_params p;
    base_params(GR_OP_ROUTE, &p);
    p.groups = (int)(c / len);
    p.group_id = (int)(start / len);
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    set_output_layer(im, node, out_k, layer);
    return GR_OK;
}

/* ---- nodes on computed tensors ------------------------------------------------------------- */

static gr_status check_pad_mode(const importer *im, const Onnx__NodeProto *node, const int *in_hw,
                                int k, const int *strides, int dilation, int64_t pads[4])
{
    char buf[32];
    const char *mode = onnx_attr_string(node, "auto_pad", buf, sizeof buf, "NOTSET");
    if (strcmp(mode, "NOTSET") == 0)
        return GR_OK;
    if (strcmp(mode, "VALID") == 0) {
        memset(pads, 0, 4 * sizeof *pads);
        return GR_OK;
    }
    bool upper = strcmp(mode, "SAME_UPPER") == 0;
    if (!upper && strcmp(mode, "SAME_LOWER") != 0)
        return node_fail(im, node, GR_ERR_PARSE, "unknown auto_pad '%s'", mode);
    for (int d = 0; d < 2; d++) {
        long long out = (in_hw[d] + strides[d] - 1) / strides[d];
        long long total = (out - 1) * strides[d] + (long long)(k - 1) * dilation + 1 - in_hw[d];
        if (total < 0)
            total = 0;
        pads[d] = upper ? total / 2 : total - total / 2;
        pads[d + 2] = total - pads[d];
    }
    return GR_OK;
}

/* kernel_shape / strides / dilations / pads of a 2-D Conv or MaxPool; k the square kernel. */
static gr_status window_attrs(const importer *im, const Onnx__NodeProto *node, gr_shape in,
                              int kh, int kw, int *strides, int *dilation, int64_t pads[4])
{
    const int64_t *a;
    size_t n = onnx_attr_ints(node, "kernel_shape", &a);
    if (n && (n != 2 || a[0] != kh || a[1] != kw))
        return node_fail(im, node, GR_ERR_PARSE, "kernel_shape does not match the kernel");
    if (kh != kw)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "kernel %dx%d (graphrun's conv and maxpool windows are square)", kh, kw);
    strides[0] = strides[1] = 1;
    if ((n = onnx_attr_ints(node, "strides", &a))) {
        if (n != 2 || a[0] < 1 || a[1] < 1 || a[0] > GR_MAX_DIM || a[1] > GR_MAX_DIM)
            return node_fail(im, node, GR_ERR_PARSE, "bad strides");
        strides[0] = (int)a[0];
        strides[1] = (int)a[1];
    }
    *dilation = 1;
    if ((n = onnx_attr_ints(node, "dilations", &a))) {
        if (n != 2 || a[0] < 1 || a[0] > GR_MAX_DIM)
            return node_fail(im, node, GR_ERR_PARSE, "bad dilations");
        if (a[0] != a[1])
            return node_fail(im, node, GR_ERR_UNSUPPORTED,
                             "dilations %lld, %lld differ (graphrun's are equal)",
                             (long long)a[0], (long long)a[1]);
        *dilation = (int)a[0];
    }
    memset(pads, 0, 4 * sizeof *pads);
    if ((n = onnx_attr_ints(node, "pads", &a))) {
        if (n != 4)
            return node_fail(im, node, GR_ERR_PARSE, "pads has %zu values (4 for 2-D)", n);
        for (int d = 0; d < 4; d++) {
            if (a[d] < 0 || a[d] > GR_MAX_DIM)
                return node_fail(im, node, GR_ERR_PARSE, "bad pads");
            pads[d] = a[d];
        }
    }
    int in_hw[2] = {in.h, in.w};
    return check_pad_mode(im, node, in_hw, kh, strides, *dilation, pads);
}

static gr_status import_conv(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    const onnx_const *w, *b;
    GR_TRY(spatial_input(im, node, 0, &x));
    GR_TRY(const_input(im, node, 1, false, &w));
    GR_TRY(const_input(im, node, 2, true, &b));
    gr_shape in = value_shape(im, x);
    if (!w->is_float || w->ndim != 4)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "weights must be float32 of rank 4 (2-D "
                         "convolution)");
    int64_t group = onnx_attr_int(node, "group", 1);
    int64_t m = w->dims[0];
    if (group < 1 || group > in.c || m < 1 || m > GR_MAX_DIM || w->dims[1] * group != in.c ||
        m % group != 0 || w->dims[2] < 1 || w->dims[2] > GR_MAX_DIM || w->dims[3] < 1 ||
        w->dims[3] > GR_MAX_DIM)
        return node_fail(im, node, GR_ERR_PARSE,
                         "weights %lldx%lldx%lldx%lld, group %lld do not fit %d input channels",
                         (long long)w->dims[0], (long long)w->dims[1], (long long)w->dims[2],
                         (long long)w->dims[3], (long long)group, in.c);
    if (b && (!b->is_float || b->n != (size_t)m))
        return node_fail(im, node, GR_ERR_PARSE, "bias must be %lld float32 values",
                         (long long)m);
    int k = (int)w->dims[2], strides[2], dilation;
    int64_t pads[4];
    GR_TRY(window_attrs(im, node, in, k, (int)w->dims[3], strides, &dilation, pads));
    if (pads[0] != pads[1] || pads[0] != pads[2] || pads[0] != pads[3])
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "pads %lld,%lld,%lld,%lld (graphrun's conv pads all sides alike)",
                         (long long)pads[0], (long long)pads[1], (long long)pads[2],
                         (long long)pads[3]);
    int pad = (int)pads[0];
    if (dilation > 1 && k > 1) {
        /* graphrun's dilated conv pads (size-1)/2 taps, dilation pixels apart (ops/conv.c). */
        if (k % 2 == 0 || pads[0] != (int64_t)dilation * (k - 1) / 2)
            return node_fail(im, node, GR_ERR_UNSUPPORTED,
                             "dilation %d with pads %lld (graphrun's dilated conv needs an odd "
                             "kernel and pads dilation*(kernel-1)/2 = %d)",
                             dilation, (long long)pads[0], dilation * (k - 1) / 2);
        pad = (k - 1) / 2;
    }
    gr_op_params p;
    base_params(GR_OP_CONV, &p);
    p.filters = (int)m;
    p.size = k;
    p.stride = strides[1];
    p.stride_y = strides[0];
    p.dilation = k > 1 ? dilation : 1;
    p.pad = pad;
    p.groups = (int)group;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    layer_params *lp = &im->params[layer];
    lp->weights = gr_malloc(w->n * sizeof *lp->weights, "ONNX conv weights");
    lp->biases = gr_calloc((size_t)m, sizeof *lp->biases, "ONNX conv biases");
    if (!lp->weights || !lp->biases)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(lp->weights, w->f, w->n * sizeof *lp->weights);
    if (b)
        memcpy(lp->biases, b->f, (size_t)m * sizeof *lp->biases);
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* A Conv's own output that nothing else reads (`uses` readers in all), not yet activated: what
 * a batch norm or an activation can be folded into. Shortcut (Add) and connected (Gemm) take
 * activations too. */
static bool foldable_into(const importer *im, const value *x, int uses, bool conv_only)
{
    if (x->kind != VAL_LAYER || x->layer < 0 || x->uses != uses || im->params[x->layer].aliased)
        return false;
    const gr_layer *l = &im->net->layers[x->layer];
    if (l->p.activation != GR_ACT_LINEAR)
        return false;
    return l->p.op == GR_OP_CONV ||
           (!conv_only && (l->p.op == GR_OP_SHORTCUT || l->p.op == GR_OP_CONNECTED));
}

static gr_status import_batchnorm(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    const onnx_const *c[4];
    GR_TRY(layer_input(im, node, 0, &x));
    for (int k = 0; k < 4; k++)
        GR_TRY(const_input(im, node, (size_t)k + 1, false, &c[k]));
    if (onnx_attr_int(node, "training_mode", 0) != 0 || output_read(im, node, 1) ||
        output_read(im, node, 2))
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "training mode (inference only)");
    if (!foldable_into(im, x, 1, true) || im->params[x->layer].bn_folded)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "not directly after a Conv whose output nothing else reads (graphrun "
                         "folds a batch norm into the Conv before it)");
    gr_layer *l = &im->net->layers[x->layer];
    layer_params *lp = &im->params[x->layer];
    int n = l->p.filters;
    for (int k = 0; k < 4; k++)
        if (!c[k]->is_float || c[k]->n != (size_t)n)
            return node_fail(im, node, GR_ERR_PARSE, "input %d must be %d float32 values", k + 1,
                             n);
    double eps = onnx_attr_float(node, "epsilon", 1e-5f);
    size_t per_filter = (size_t)(gr_net_input_shape(im->net, x->layer, 0).c / l->p.groups) *
                        (size_t)l->p.size * (size_t)l->p.size;
    for (int oc = 0; oc < n; oc++) {
        double scale = (double)c[0]->f[oc] / sqrt((double)c[3]->f[oc] + eps);
        for (size_t i = 0; i < per_filter; i++)
            lp->weights[(size_t)oc * per_filter + i] =
                (float)((double)lp->weights[(size_t)oc * per_filter + i] * scale);
        lp->biases[oc] =
            (float)(((double)lp->biases[oc] - (double)c[2]->f[oc]) * scale + (double)c[1]->f[oc]);
    }
    lp->bn_folded = 1;
    set_output_layer(im, node, 0, x->layer);
    return GR_OK;
}

/* Output 0 of a node folded into the layer of x (its only reader): the layer's output now. */
static void alias_free_output(importer *im, const Onnx__NodeProto *node, const value *x)
{
    if (x->flat)
        set_output_flat(im, node, 0, x->layer);
    else
        set_output_layer(im, node, 0, x->layer);
}

/* Relu, LeakyRelu (alpha 0.1), Sigmoid, Tanh, Elu (alpha 1), Clip to [0, 6] or [0, none]
 * (relu6, relu), and Sigmoid + Mul (SiLU: swish) folded into the Conv, Add or Gemm before them. */
static gr_status import_activation(importer *im, const Onnx__NodeProto *node)
{
    const char *op = onnx_str(node->op_type);
    value *x = NULL;
    GR_TRY(layer_input(im, node, 0, &x));
    gr_activation act = GR_ACT_RELU;
    if (strcmp(op, "Sigmoid") == 0) {
        act = GR_ACT_LOGISTIC;
        value *s = node->n_output ? find_value(im, node->output[0]) : NULL;
        int other = x->user[0] == im->node_index ? x->user[1] : x->user[0];
        if (s && s->uses == 1 && other >= 0 && other == s->user[0] &&
            foldable_into(im, x, 2, false)) {
            const Onnx__NodeProto *mul = im->g->node[other];
            if (strcmp(onnx_str(mul->op_type), "Mul") == 0 && onnx_str(mul->domain)[0] == '\0' &&
                mul->n_input == 2 && mul->n_output >= 1 &&
                ((find_value(im, mul->input[0]) == x && find_value(im, mul->input[1]) == s) ||
                 (find_value(im, mul->input[1]) == x && find_value(im, mul->input[0]) == s))) {
                im->net->layers[x->layer].p.activation = GR_ACT_SWISH;
                im->absorbed[other] = 1;
                alias_free_output(im, mul, x);
                return GR_OK;
            }
        }
    } else if (strcmp(op, "LeakyRelu") == 0) {
        float alpha = onnx_attr_float(node, "alpha", 0.01f);
        if (alpha != 0.1f)
            return node_fail(im, node, GR_ERR_UNSUPPORTED,
                             "alpha %g (graphrun's leaky activation is Darknet's, alpha 0.1)",
                             (double)alpha);
        act = GR_ACT_LEAKY;
    } else if (strcmp(op, "Tanh") == 0) {
        act = GR_ACT_TANH;
    } else if (strcmp(op, "Elu") == 0) {
        if (onnx_attr_float(node, "alpha", 1.0f) != 1.0f)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "alpha %g (graphrun's elu: alpha 1)",
                             (double)onnx_attr_float(node, "alpha", 1.0f));
        act = GR_ACT_ELU;
    } else if (strcmp(op, "Clip") == 0) {
        /* Clip(0, inf) is relu, Clip(0, 6) relu6 (opset 11+: min and max are inputs). */
        const onnx_const *lo, *hi;
        GR_TRY(const_input(im, node, 1, true, &lo));
        GR_TRY(const_input(im, node, 2, true, &hi));
        float lo_v = lo && lo->n == 1 && lo->is_float ? lo->f[0] : NAN;
        float hi_v = !hi ? INFINITY : hi->n == 1 && hi->is_float ? hi->f[0] : NAN;
        if (lo_v != 0.0f || (hi_v != 6.0f && hi_v != INFINITY))
            return node_fail(im, node, GR_ERR_UNSUPPORTED,
                             "bounds other than [0, 6] (relu6) or [0, none] (relu)");
        act = hi_v == 6.0f ? GR_ACT_RELU6 : GR_ACT_RELU;
        /* PyTorch's ReLU6 exports as Relu then Clip(0, 6): relu6 of the relu'd layer. */
        gr_layer *l = x->layer >= 0 ? &im->net->layers[x->layer] : NULL;
        if (l && l->p.activation == GR_ACT_RELU && x->uses == 1 && !im->params[x->layer].aliased) {
            l->p.activation = act;
            alias_free_output(im, node, x);
            return GR_OK;
        }
    }
    if (!foldable_into(im, x, 1, false))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "on a tensor that is not the own output of a Conv, Add or Gemm that "
                         "nothing else reads (graphrun applies activations in the op before "
                         "them)");
    im->net->layers[x->layer].p.activation = act;
    alias_free_output(im, node, x);
    return GR_OK;
}

static gr_status import_maxpool(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    GR_TRY(spatial_input(im, node, 0, &x));
    if (output_read(im, node, 1))
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "the Indices output is not supported");
    gr_shape in = value_shape(im, x);
    const int64_t *ks;
    if (onnx_attr_ints(node, "kernel_shape", &ks) != 2 || ks[0] < 1 || ks[0] > GR_MAX_DIM ||
        ks[1] < 1 || ks[1] > GR_MAX_DIM)
        return node_fail(im, node, GR_ERR_PARSE, "kernel_shape must hold 2 sizes");
    int k = (int)ks[0], strides[2], dilation;
    int64_t pads[4];
    GR_TRY(window_attrs(im, node, in, k, (int)ks[1], strides, &dilation, pads));
    if (dilation != 1 || strides[0] != strides[1])
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "dilation %d, strides %d,%d (graphrun's maxpool: dilation 1, one stride)",
                         dilation, strides[0], strides[1]);
    /* Darknet's maxpool pads `padding`/2 before and the rest after, the same on both axes. */
    if (pads[0] != pads[1] || pads[2] != pads[3] || pads[2] - pads[0] < 0 || pads[2] - pads[0] > 1)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "pads %lld,%lld,%lld,%lld (graphrun's maxpool pads top = left and "
                         "bottom = right = top or top + 1)",
                         (long long)pads[0], (long long)pads[1], (long long)pads[2],
                         (long long)pads[3]);
    int total = (int)(pads[0] + pads[2]);
    if (onnx_attr_int(node, "ceil_mode", 0) != 0 &&
        ((in.h + total - k) % strides[0] != 0 || (in.w + total - k) % strides[0] != 0))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "ceil_mode 1 where it changes the output size");
    gr_op_params p;
    base_params(GR_OP_MAXPOOL, &p);
    p.size = k;
    p.stride = strides[0];
    p.pad = total;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

static gr_status import_add(importer *im, const Onnx__NodeProto *node)
{
    value *a = NULL, *b = NULL;
    GR_TRY(layer_input(im, node, 0, &a));
    GR_TRY(layer_input(im, node, 1, &b));
    gr_shape sa = value_shape(im, a), sb = value_shape(im, b);
    if (sa.c != sb.c || sa.h != sb.h || sa.w != sb.w || a->flat != b->flat)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "of %dx%dx%d and %dx%dx%d (only tensors of one shape are added in this "
                         "slice)", sa.c, sa.h, sa.w, sb.c, sb.h, sb.w);
    gr_op_params p;
    base_params(GR_OP_SHORTCUT, &p);
    int inputs[2] = {a->layer, b->layer}, layer = -1;
    GR_TRY(add_layer(im, node, &p, inputs, 2, &layer));
    if (a->flat)
        set_output_flat(im, node, 0, layer);
    else
        set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* Add / Sub / Mul / Div of a Conv's or Gemm's own output and a constant, one value or one per
 * channel ([1, C, 1, 1] or [C, 1, 1]; [N] or [1, N] after a Gemm): folded into its weights and
 * bias (y = x * scale + shift, in double), as a batch norm is. */
static gr_status import_affine(importer *im, const Onnx__NodeProto *node, const char *op)
{
    value *a = node_input(im, node, 0), *b = node_input(im, node, 1);
    bool const_first = a && a->kind == VAL_CONST;
    value *x = const_first ? b : a;
    const onnx_const *k = const_first ? &a->k : &b->k;
    if (!foldable_into(im, x, 1, false) || im->net->layers[x->layer].p.op == GR_OP_SHORTCUT)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "of a constant and a tensor that is not the own output of a Conv or "
                         "Gemm that nothing else reads (graphrun folds such constants into "
                         "the op before)");
    if (const_first && (op[0] == 'S' || op[0] == 'D'))
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "with the constant first");
    gr_layer *l = &im->net->layers[x->layer];
    int n = l->p.filters;
    bool per_channel = k->n == (size_t)n && n > 1 &&
                       (x->flat ? k->ndim <= 2 && k->dims[k->ndim - 1] == n
                                : (k->ndim == 3 || k->ndim == 4) && k->dims[k->ndim - 3] == n &&
                                      k->dims[k->ndim - 2] == 1 && k->dims[k->ndim - 1] == 1);
    if (!k->is_float || (k->n != 1 && !per_channel))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "with a constant of %zu values (one, or one per channel: [1, %d, 1, 1] "
                         "or [%d, 1, 1])", k->n, n, n);
    layer_params *lp = &im->params[x->layer];
    gr_shape in = gr_net_input_shape(im->net, x->layer, 0);
    size_t per_filter = l->p.op == GR_OP_CONV
                     ? (size_t)(in.c / l->p.groups) * (size_t)l->p.size * (size_t)l->p.size
                     : gr_shape_elems(in);
    for (int oc = 0; oc < n; oc++) {
        double v = k->f[k->n == 1 ? 0 : oc], scale = 1.0, shift = 0.0;
        switch (op[0]) {
        case 'A': shift = v; break;
        case 'S': shift = -v; break;
        case 'M': scale = v; break;
        default: scale = 1.0 / v;
        }
        if (scale != 1.0)
            for (size_t i = 0; i < per_filter; i++)
                lp->weights[(size_t)oc * per_filter + i] =
                    (float)((double)lp->weights[(size_t)oc * per_filter + i] * scale);
        lp->biases[oc] = (float)((double)lp->biases[oc] * scale + shift);
    }
    alias_free_output(im, node, x);
    return GR_OK;
}

/* Axis `axis` of a [1, C, H, W] tensor, normalised; -1 when out of range. */
static int axis4(int64_t axis)
{
    if (axis < 0)
        axis += 4;
    return axis >= 0 && axis < 4 ? (int)axis : -1;
}

static gr_status import_concat(importer *im, const Onnx__NodeProto *node)
{
    if (axis4(onnx_attr_int(node, "axis", 1)) != 1)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "on axis %lld (graphrun's route concatenates channels, axis 1)",
                         (long long)onnx_attr_int(node, "axis", 1));
    if (node->n_input < 1 || node->n_input > GR_MAX_INPUTS)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "of %zu tensors (1 to %d)",
                         node->n_input, GR_MAX_INPUTS);
    int inputs[GR_MAX_INPUTS], layer = -1;
    for (size_t k = 0; k < node->n_input; k++) {
        value *v = NULL;
        GR_TRY(spatial_input(im, node, k, &v));
        inputs[k] = v->layer;
    }
    gr_op_params p;
    base_params(GR_OP_ROUTE, &p);
    GR_TRY(add_layer(im, node, &p, inputs, (int)node->n_input, &layer));
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

static gr_status import_split(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    GR_TRY(spatial_input(im, node, 0, &x));
    if (axis4(onnx_attr_int(node, "axis", 0)) != 1)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "on axis %lld (only channels, axis 1)",
                         (long long)onnx_attr_int(node, "axis", 0));
    int c = value_shape(im, x).c;
    size_t n = node->n_output;
    const int64_t *sizes = NULL;
    size_t n_sizes = 0;
    const onnx_const *split = NULL;
    if (im->opset >= 13) {
        GR_TRY(const_input(im, node, 1, true, &split));
        if (split && (split->is_float || split->n != n))
            return node_fail(im, node, GR_ERR_PARSE, "split must hold one size per output");
    } else {
        n_sizes = onnx_attr_ints(node, "split", &sizes);
        if (n_sizes && n_sizes != n)
            return node_fail(im, node, GR_ERR_PARSE, "split must hold one size per output");
    }
    if (n < 1 || n > (size_t)c)
        return node_fail(im, node, GR_ERR_PARSE, "%zu outputs of %d channels", n, c);
    int64_t start = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t len = split ? split->i[k] : n_sizes ? sizes[k] : (c + (int64_t)n - 1) / (int64_t)n;
        if (!split && !n_sizes && k == n - 1)
            len = c - start;
        if (len < 0 || len > c - start)
            return node_fail(im, node, GR_ERR_PARSE, "split sizes exceed the %d channels", c);
        if (find_value(im, node->output[k]))
            GR_TRY(channel_range(im, node, x, start, len, k));
        start += len;
    }
    return GR_OK;
}

static gr_status import_slice(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    const onnx_const *starts, *ends, *axes, *steps;
    GR_TRY(spatial_input(im, node, 0, &x));
    if (im->opset < 10)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "Slice-1 (attributes) is not supported");
    GR_TRY(const_input(im, node, 1, false, &starts));
    GR_TRY(const_input(im, node, 2, false, &ends));
    GR_TRY(const_input(im, node, 3, true, &axes));
    GR_TRY(const_input(im, node, 4, true, &steps));
    if (starts->n != ends->n || (axes && axes->n != starts->n) ||
        (steps && steps->n != starts->n) || starts->n > 4)
        return node_fail(im, node, GR_ERR_PARSE, "starts, ends, axes and steps differ in length");
    gr_shape s = value_shape(im, x);
    const int64_t dims[4] = {1, s.c, s.h, s.w};
    int64_t c_start = 0, c_end = s.c;
    for (size_t i = 0; i < starts->n; i++) {
        int axis = axis4(axes ? onnx_const_int(axes, i) : (int64_t)i);
        int64_t step = steps ? onnx_const_int(steps, i) : 1;
        if (axis < 0 || step != 1)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "axis %d step %lld (step 1 only)",
                             axis, (long long)step);
        int64_t dim = dims[axis], b = onnx_const_int(starts, i), e = onnx_const_int(ends, i);
        b = b < 0 ? (b < -dim ? 0 : b + dim) : (b > dim ? dim : b);
        e = e < 0 ? (e < -dim ? 0 : e + dim) : (e > dim ? dim : e);
        if (axis == 1) {
            c_start = b;
            c_end = e;
        } else if (b != 0 || e != dim) {
            return node_fail(im, node, GR_ERR_UNSUPPORTED,
                             "on axis %d (only channel slices, axis 1, are supported)", axis);
        }
    }
    return channel_range(im, node, x, c_start, c_end - c_start, 0);
}

/* ONNX Resize's nearest source index for output i (scale s, input size n, output size m). */
static int64_t nearest_source(const char *ctm, const char *mode, int64_t i, int s, int64_t n,
                              int64_t m, bool *known)
{
    double x;
    *known = true;
    if (strcmp(ctm, "asymmetric") == 0)
        x = (double)i / s;
    else if (strcmp(ctm, "half_pixel") == 0)
        x = ((double)i + 0.5) / s - 0.5;
    else if (strcmp(ctm, "pytorch_half_pixel") == 0)
        x = m > 1 ? ((double)i + 0.5) / s - 0.5 : 0.0;
    else if (strcmp(ctm, "tf_half_pixel_for_nn") == 0)
        x = ((double)i + 0.5) / s;
    else if (strcmp(ctm, "align_corners") == 0)
        x = m > 1 ? (double)i * (double)(n - 1) / (double)(m - 1) : 0.0;
    else
        return *known = false, 0;
    double r;
    if (strcmp(mode, "floor") == 0)
        r = floor(x);
    else if (strcmp(mode, "ceil") == 0)
        r = ceil(x);
    else if (strcmp(mode, "round_prefer_ceil") == 0)
        r = floor(x + 0.5);
    else if (strcmp(mode, "round_prefer_floor") == 0)
        r = x == floor(x) + 0.5 ? floor(x) : floor(x + 0.5);
    else
        return *known = false, 0;
    return r < 0 ? 0 : (int64_t)r >= n ? n - 1 : (int64_t)r;
}

static gr_status import_resize(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    const onnx_const *scales, *sizes;
    GR_TRY(spatial_input(im, node, 0, &x));
    GR_TRY(const_input(im, node, 2, true, &scales));
    GR_TRY(const_input(im, node, 3, true, &sizes));
    char mode_buf[32], ctm_buf[32], near_buf[32];
    const char *mode = onnx_attr_string(node, "mode", mode_buf, sizeof mode_buf, "nearest");
    const char *ctm = onnx_attr_string(node, "coordinate_transformation_mode", ctm_buf,
                                       sizeof ctm_buf, "half_pixel");
    const char *near = onnx_attr_string(node, "nearest_mode", near_buf, sizeof near_buf,
                                        "round_prefer_floor");
    if (strcmp(mode, "nearest") != 0 || onnx_attr(node, "axes"))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "mode '%s'%s (graphrun's upsample is nearest, on all axes)", mode,
                         onnx_attr(node, "axes") ? " with axes" : "");
    gr_shape s = value_shape(im, x);
    const double in_dims[4] = {1, s.c, s.h, s.w};
    double f[4];
    if (scales && scales->n > 0) {
        if (!scales->is_float || scales->n != 4)
            return node_fail(im, node, GR_ERR_PARSE, "scales must hold 4 float32 values");
        for (int d = 0; d < 4; d++)
            f[d] = scales->f[d];
    } else if (sizes && sizes->n == 4 && !sizes->is_float) {
        for (int d = 0; d < 4; d++)
            f[d] = (double)sizes->i[d] / in_dims[d];
    } else {
        return node_fail(im, node, GR_ERR_PARSE, "needs constant scales or sizes of 4 values");
    }
    if (f[0] != 1.0 || f[1] != 1.0 || f[2] != f[3] || !(f[2] >= 1.0 && f[2] <= 64.0) ||
        f[2] != floor(f[2]))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "scales %g,%g,%g,%g (graphrun's upsample: one integer scale on height "
                         "and width)", f[0], f[1], f[2], f[3]);
    int scale = (int)f[2];
    /* The attributes must pick input floor(i / scale) for every output pixel, as upsample does. */
    const int64_t n_in[2] = {s.h, s.w};
    for (int d = 0; d < 2; d++) {
        for (int64_t i = 0; i < n_in[d] * scale; i++) {
            bool known;
            int64_t src = nearest_source(ctm, near, i, scale, n_in[d], n_in[d] * scale, &known);
            if (!known || src != i / scale)
                return node_fail(im, node, GR_ERR_UNSUPPORTED,
                                 "coordinate_transformation_mode '%s' with nearest_mode '%s' at "
                                 "scale %d does not repeat each pixel (graphrun's upsample does)",
                                 ctm, near, scale);
        }
    }
    if (scale == 1) {
        alias_output(im, node, 0, x);
        return GR_OK;
    }
    gr_op_params p;
    base_params(GR_OP_UPSAMPLE, &p);
    p.stride = scale;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* Shape of a computed tensor: [1, C, H, W] or flat [1, C*H*W] (opset 15's start / end slice it). */
static gr_status import_shape(importer *im, const Onnx__NodeProto *node, const value *x)
{
    int64_t dims[4];
    int rank = value_dims(im, x, dims);
    int64_t start = onnx_attr_int(node, "start", 0), end = onnx_attr_int(node, "end", rank);
    start = start < 0 ? (start < -rank ? 0 : start + rank) : start > rank ? rank : start;
    end = end < 0 ? (end < -rank ? 0 : end + rank) : end > rank ? rank : end;
    int64_t n = end > start ? end - start : 0;
    value *out = node->n_output ? find_value(im, node->output[0]) : NULL;
    if (!out)
        return GR_OK;
    char why[256];
    gr_status st = onnx_const_alloc(&out->k, 1, &n, 0, 1, why, sizeof why);
    if (st != GR_OK)
        return node_fail(im, node, st, "%s", why);
    for (int64_t i = 0; i < n; i++)
        out->k.i[i] = dims[start + i];
    out->kind = VAL_CONST;
    return GR_OK;
}

/* Reshape of a computed tensor to its own shape (exporters write such no-ops) or to [1, -1]. */
static gr_status import_reshape(importer *im, const Onnx__NodeProto *node, const value *x)
{
    const onnx_const *shape;
    GR_TRY(const_input(im, node, 1, false, &shape));
    int64_t dims[4];
    int rank = value_dims(im, x, dims);
    gr_shape s = value_shape(im, x);
    bool same = !shape->is_float && shape->n == (size_t)rank;
    for (int d = 0; same && d < rank; d++)
        same = shape->i[d] == dims[d] || shape->i[d] == 0;
    /* [1, -1] or [1, C*H*W] of a 4-D tensor is a flatten. */
    bool flatten = !shape->is_float && shape->n == 2 && shape->i[0] == 1 &&
                   (shape->i[1] == -1 || shape->i[1] == (int64_t)gr_shape_elems(s));
    if (!same && !flatten)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "to another shape than [1, %d, %d, %d] or [1, %zu] (reshapes are not "
                         "in this slice)", s.c, s.h, s.w, gr_shape_elems(s));
    alias_output(im, node, 0, x);
    if (flatten)
        set_output_flat(im, node, 0, x->layer);
    return GR_OK;
}

/* Flatten at axis 0 or 1 of [1, C, H, W]: [1, C*H*W], the same values in the same order. */
static gr_status import_flatten(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    GR_TRY(layer_input(im, node, 0, &x));
    int64_t axis = onnx_attr_int(node, "axis", 1);
    if (!x->flat && axis != 0 && axis != 1 && axis != -3 && axis != -4)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "at axis %lld (only to [1, C*H*W]: axis 0 or 1)", (long long)axis);
    alias_output(im, node, 0, x);
    set_output_flat(im, node, 0, x->layer);
    return GR_OK;
}

/* GlobalAveragePool -> avgpool (Darknet's is global). */
static gr_status import_global_avgpool(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    GR_TRY(spatial_input(im, node, 0, &x));
    gr_op_params p;
    base_params(GR_OP_AVGPOOL, &p);
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* Gemm of a flat [1, K] tensor and constant weights -> connected: Y = alpha * X * B' + beta * C,
 * B' = B^T with transB (PyTorch's Linear), else B; C optional, [N] or [1, N]. */
static gr_status import_gemm(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    const onnx_const *b, *c;
    GR_TRY(layer_input(im, node, 0, &x));
    GR_TRY(const_input(im, node, 1, false, &b));
    GR_TRY(const_input(im, node, 2, true, &c));
    gr_shape in = value_shape(im, x);
    size_t k = gr_shape_elems(in);
    if (!x->flat && !(in.h == 1 && in.w == 1))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "input is %dx%dx%d, not 2-D (flatten it first)", in.c, in.h, in.w);
    if (onnx_attr_int(node, "transA", 0) != 0)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "transA 1 is not supported");
    int trans_b = onnx_attr_int(node, "transB", 0) != 0;
    if (!b->is_float || b->ndim != 2 || (size_t)b->dims[trans_b ? 1 : 0] != k ||
        b->dims[trans_b ? 0 : 1] < 1 || b->dims[trans_b ? 0 : 1] > GR_MAX_DIM)
        return node_fail(im, node, GR_ERR_PARSE, "weights must be float32 %s x %zu",
                         trans_b ? "N" : "K", k);
    int64_t n = b->dims[trans_b ? 0 : 1];
    if (c && (!c->is_float || c->n != (size_t)n))
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "C must hold %lld float32 values (one "
                         "per output)", (long long)n);
    gr_op_params p;
    base_params(GR_OP_CONNECTED, &p);
    p.filters = (int)n;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    layer_params *lp = &im->params[layer];
    lp->weights = gr_malloc(b->n * sizeof *lp->weights, "ONNX Gemm weights");
    lp->biases = gr_calloc((size_t)n, sizeof *lp->biases, "ONNX Gemm biases");
    if (!lp->weights || !lp->biases)
        return GR_ERR_OUT_OF_MEMORY;
    float alpha = onnx_attr_float(node, "alpha", 1.0f), beta = onnx_attr_float(node, "beta", 1.0f);
    for (int64_t o = 0; o < n; o++) {
        for (size_t i = 0; i < k; i++) {
            float w = trans_b ? b->f[(size_t)o * k + i] : b->f[i * (size_t)n + (size_t)o];
            lp->weights[(size_t)o * k + i] = alpha == 1.0f ? w : alpha * w;
        }
        if (c)
            lp->biases[o] = beta == 1.0f ? c->f[o] : beta * c->f[o];
    }
    set_output_flat(im, node, 0, layer);
    return GR_OK;
}

/* Softmax over all of a flat tensor (or a C x 1 x 1 one): Darknet's softmax, one group. Before
 * opset 13 ONNX's Softmax flattens at `axis` (default 1), so any [1, C, H, W] at axis 1 is that. */
static gr_status import_softmax(importer *im, const Onnx__NodeProto *node)
{
    value *x = NULL;
    GR_TRY(layer_input(im, node, 0, &x));
    gr_shape s = value_shape(im, x);
    int64_t axis = onnx_attr_int(node, "axis", im->opset >= 13 ? -1 : 1);
    int rank = x->flat ? 2 : 4;
    if (axis < 0)
        axis += rank;
    bool whole = x->flat ? axis == 1
                         : (axis == 1 && (im->opset < 13 || (s.h == 1 && s.w == 1))) ||
                               (axis == 3 && s.c == 1 && s.h == 1);
    if (!whole)
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "on axis %lld of %dx%dx%d (graphrun's softmax covers the whole tensor)",
                         (long long)onnx_attr_int(node, "axis", im->opset >= 13 ? -1 : 1), s.c,
                         s.h, s.w);
    gr_op_params p;
    base_params(GR_OP_SOFTMAX, &p);
    p.groups = 1;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &x->layer, 1, &layer));
    if (x->flat)
        set_output_flat(im, node, 0, layer);
    else
        set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* ---- attention (YOLO11's C2PSA) ------------------------------------------------------------ */

/* PSABlock's Attention exports as (PyTorch 1.13, opsets 11 to 17; docs/onnx.md):
 *   t = Reshape(qkv, [1, heads, 2 key_dim + head_dim, H*W])      qkv: a Conv's own output
 *   q, k, v = Split(t, axis 2, [key_dim, key_dim, head_dim])
 *   s = MatMul(Transpose(q, [0, 1, 3, 2]), k) * scale              (Mul or Div by a scalar,
 *                                                                  on q, q^T, k or the scores)
 *   o = MatMul(v, Transpose(Softmax(s, last axis), [0, 1, 3, 2]))
 *   Reshape(o, [1, heads*head_dim, H, W])  -> one attention layer (ops/attention.c)
 *   Reshape(v, [1, heads*head_dim, H, W])  -> a route of v's channels (pe's input)
 * The qkv conv's output channels are reordered at the Split (its weights and biases: nothing
 * else reads that output) into [q of every head | k | v], the attention op's input, where v's
 * channels are one contiguous range a route can take. The match starts at a Reshape of a
 * Conv's output to [1, a, b, H*W] read only by a three-way Split; from there every node
 * reading an intermediate must be the pattern's next step, else it is refused by name. */

static gr_status attn_fail(const importer *im, const Onnx__NodeProto *node, const attn_match *a,
                           const char *fmt, ...) GR_PRINTF(4, 5);
static gr_status attn_fail(const importer *im, const Onnx__NodeProto *node, const attn_match *a,
                           const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return node_fail(im, node, GR_ERR_UNSUPPORTED, "%s (in the attention pattern from '%.100s': "
                     "docs/onnx.md)", what, a->start);
}

/* Node `user`'s op is `op` (a node index from value.user). */
static bool node_is(const importer *im, int user, const char *op)
{
    return user >= 0 && strcmp(onnx_str(im->g->node[user]->op_type), op) == 0;
}

/* Does this Reshape of a computed tensor start an attention subgraph? Its output read only by a
 * three-way Split whose second part (k) goes to a MatMul (or its scale): a detection head that
 * splits a reshaped layer output (the host-side tail) does not look like that. */
static bool attn_starts(const importer *im, const Onnx__NodeProto *node, const value *x)
{
    const value *t = node->n_output ? find_value(im, node->output[0]) : NULL;
    if (x->flat || x->layer < 0 || !t || t->uses != 1 || !node_is(im, t->user[0], "Split") ||
        im->g->node[t->user[0]]->n_output != 3)
        return false;
    const value *k = find_value(im, im->g->node[t->user[0]]->output[1]);
    if (!k || k->uses != 1 || !(node_is(im, k->user[0], "MatMul") ||
                                node_is(im, k->user[0], "Mul") || node_is(im, k->user[0], "Div")))
        return false;
    const value *shape = node_input(im, node, 1);
    return shape && shape->kind == VAL_CONST && !shape->k.is_float && shape->k.n == 4;
}

/* A reshape's target (ONNX's 0: copy the dim, -1: the rest) of a [1, C, H, W] tensor. */
static bool reshape_dims(const onnx_const *shape, gr_shape in, int64_t out[4])
{
    const int64_t dims[4] = {1, in.c, in.h, in.w};
    int64_t known = 1, total = (int64_t)gr_shape_elems(in);
    int rest = -1;
    if (shape->is_float || shape->n != 4)
        return false;
    for (int d = 0; d < 4; d++) {
        out[d] = shape->i[d] == 0 ? dims[d] : shape->i[d];
        if (out[d] == -1 && rest < 0)
            rest = d;
        else if (out[d] < 1 || out[d] > total / known)
            return false; /* more elements than the input has (and no overflow) */
        else
            known *= out[d];
    }
    if (rest >= 0)
        out[rest] = known > 0 && total % known == 0 ? total / known : -1;
    return out[rest >= 0 ? rest : 0] >= 1;
}

static void attn_role(importer *im, const Onnx__NodeProto *node, size_t k, int id, int role)
{
    value *v = k < node->n_output ? find_value(im, node->output[k]) : NULL;
    if (v) {
        v->kind = VAL_ATTN;
        v->attn = id;
        v->role = role;
    }
}

static gr_status attn_start(importer *im, const Onnx__NodeProto *node, const value *x)
{
    attn_match *grown = realloc(im->attn, (size_t)(im->n_attn + 1) * sizeof *grown);
    if (!grown)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory", im->source);
    im->attn = grown;
    attn_match *a = &im->attn[im->n_attn];
    memset(a, 0, sizeof *a);
    a->start = node->name && node->name[0] ? node->name : "?";
    a->conv = x->layer;
    a->scale = 1.0f;
    a->v_layer = -1;
    gr_shape s = value_shape(im, x);
    const gr_layer *l = &im->net->layers[x->layer];
    if (l->p.op != GR_OP_CONV || x->uses != 1 || im->params[x->layer].aliased)
        return attn_fail(im, node, a, "input '%.100s' is not the own output of a Conv that "
                         "nothing else reads (graphrun reorders the qkv conv's channels)",
                         x->name);
    int64_t d[4];
    if (!reshape_dims(&node_input(im, node, 1)->k, s, d) || d[0] != 1 ||
        d[1] * d[2] != s.c || d[3] != (int64_t)s.h * s.w)
        return attn_fail(im, node, a, "to another shape than [1, heads, channels / heads, %d x "
                         "%d] of its %dx%dx%d input", s.h, s.w, s.c, s.h, s.w);
    a->heads = (int)d[1];
    a->qkv_dim = (int)d[2];
    attn_role(im, node, 0, im->n_attn++, ATT_HEADS);
    return GR_OK;
}

/* The Split into q, k, v: their sizes, and the qkv conv's channels reordered to the attention
 * op's blocks (q of every head, then k, then v). */
static gr_status attn_split(importer *im, const Onnx__NodeProto *node, attn_match *a, int id)
{
    int64_t axis = onnx_attr_int(node, "axis", 0), sizes[3];
    if (axis4(axis) != 2 || node->n_output != 3)
        return attn_fail(im, node, a, "on axis %lld into %zu parts (the pattern splits axis 2 "
                         "into q, k and v)", (long long)axis, node->n_output);
    const onnx_const *split = NULL;
    const int64_t *attr = NULL;
    size_t n_attr = 0;
    if (im->opset >= 13)
        GR_TRY(const_input(im, node, 1, true, &split));
    else
        n_attr = onnx_attr_ints(node, "split", &attr);
    if ((split && (split->is_float || split->n != 3)) || (!split && n_attr && n_attr != 3))
        return node_fail(im, node, GR_ERR_PARSE, "split must hold one size per output");
    for (int k = 0; k < 3; k++)
        sizes[k] = split ? split->i[k] : n_attr ? attr[k] : a->qkv_dim / 3;
    if (sizes[0] != sizes[1] || sizes[0] < 1 || sizes[2] < 1 ||
        sizes[0] + sizes[1] + sizes[2] != a->qkv_dim)
        return attn_fail(im, node, a, "sizes %lld, %lld, %lld of %d (the pattern splits into "
                         "key_dim, key_dim, head_dim)", (long long)sizes[0], (long long)sizes[1],
                         (long long)sizes[2], a->qkv_dim);
    for (int k = 0; k < 2; k++) {
        const value *qk = find_value(im, node->output[k]);
        if (!qk || qk->uses != 1)
            return attn_fail(im, node, a, "output %d (%s) is read by %d nodes (one in the "
                             "pattern)", k, k ? "k" : "q", qk ? qk->uses : 0);
    }
    a->key_dim = (int)sizes[0];
    a->head_dim = (int)sizes[2];
    /* Reorder the conv's filters: new channel f takes old channel src(f). */
    const gr_layer *l = &im->net->layers[a->conv];
    layer_params *lp = &im->params[a->conv];
    int n = l->p.filters, kd = a->key_dim, hd = a->head_dim, heads = a->heads;
    size_t per = gr_net_input_shape(im->net, a->conv, 0).c / (size_t)l->p.groups *
                 (size_t)l->p.size * (size_t)l->p.size;
    float *w = gr_malloc((size_t)n * per * sizeof *w, "attention qkv weights");
    float *b = gr_malloc((size_t)n * sizeof *b, "attention qkv biases");
    if (!w || !b) {
        free(w);
        free(b);
        return GR_ERR_OUT_OF_MEMORY;
    }
    for (int f = 0; f < n; f++) {
        int block = f < heads * kd ? 0 : f < 2 * heads * kd ? 1 : 2;
        int rel = f - block * heads * kd, width = block < 2 ? kd : hd;
        int src = rel / width * a->qkv_dim + block * kd + rel % width;
        memcpy(w + (size_t)f * per, lp->weights + (size_t)src * per, per * sizeof *w);
        b[f] = lp->biases[src];
    }
    free(lp->weights);
    free(lp->biases);
    lp->weights = w;
    lp->biases = b;
    attn_role(im, node, 0, id, ATT_Q);
    attn_role(im, node, 1, id, ATT_K);
    attn_role(im, node, 2, id, ATT_V);
    return GR_OK;
}

/* Mul or Div of q, q^T, k or the scores by a scalar: the scores' factor. */
static gr_status attn_scale(importer *im, const Onnx__NodeProto *node, attn_match *a, int id,
                            const value *x, const value *c)
{
    bool div = strcmp(onnx_str(node->op_type), "Div") == 0;
    if (x->role != ATT_Q && x->role != ATT_QT && x->role != ATT_K && x->role != ATT_SCORES)
        return attn_fail(im, node, a, "scales '%.100s' (the pattern scales q, k or the scores "
                         "q^T k)", x->name);
    if (!c || c->kind != VAL_CONST || !c->k.is_float || c->k.n != 1 || !isfinite(c->k.f[0]) ||
        c->k.f[0] == 0.0f || (div && node_input(im, node, 0) == c))
        return attn_fail(im, node, a, "by %s (the pattern scales by one finite non-zero float "
                         "constant, second for a Div)", !c || c->kind != VAL_CONST ? "a computed "
                         "tensor" : c->k.n != 1 ? "a constant of several values" : "that constant");
    if (a->scaled)
        return attn_fail(im, node, a, "a second scale factor (one Mul or Div in the pattern)");
    a->scaled = 1;
    a->scale = div ? 1.0f / c->k.f[0] : c->k.f[0];
    attn_role(im, node, 0, id, x->role);
    return GR_OK;
}

/* The final Reshapes: o to the attention layer, v to the route of its channels. */
static gr_status attn_reshape(importer *im, const Onnx__NodeProto *node, attn_match *a,
                              const value *x)
{
    const value *shape = node_input(im, node, 1);
    gr_shape s = value_shape(im, &(value){.kind = VAL_LAYER, .layer = a->conv});
    int c = a->heads * a->head_dim;
    gr_shape as4 = {c, s.h, s.w};
    int64_t d[4];
    if (!shape || shape->kind != VAL_CONST || !reshape_dims(&shape->k, as4, d) || d[0] != 1 ||
        d[1] != c || d[2] != s.h || d[3] != s.w)
        return attn_fail(im, node, a, "to another shape than [1, %d, %d, %d] (heads x head_dim "
                         "channels)", c, s.h, s.w);
    if (x->role == ATT_V) {
        if (a->v_layer >= 0) {
            set_output_layer(im, node, 0, a->v_layer);
            return GR_OK;
        }
        value qkv = {.name = "qkv", .kind = VAL_LAYER, .layer = a->conv};
        GR_TRY(channel_range(im, node, &qkv, 2LL * a->heads * a->key_dim, c, 0));
        a->v_layer = find_value(im, node->output[0])->layer;
        return GR_OK;
    }
    gr_op_params p;
    base_params(GR_OP_ATTENTION, &p);
    p.groups = a->heads;
    p.size = a->key_dim;
    p.scale = a->scale;
    int layer = -1;
    GR_TRY(add_layer(im, node, &p, &a->conv, 1, &layer));
    set_output_layer(im, node, 0, layer);
    return GR_OK;
}

/* A node reading an intermediate of an attention match: the pattern's next step, or refused. */
static gr_status import_attention(importer *im, const Onnx__NodeProto *node)
{
    const char *op = onnx_str(node->op_type);
    value *x = NULL, *y = node_input(im, node, 1);
    for (size_t k = 0; k < node->n_input && !x; k++)
        if (node_input(im, node, k) && node_input(im, node, k)->kind == VAL_ATTN)
            x = node_input(im, node, k);
    int id = x->attn;
    attn_match *a = &im->attn[id];
    value *out = node->n_output ? find_value(im, node->output[0]) : NULL;
    static const char *const names[] = {"", "the heads' qkv", "q", "k", "v", "q^T", "the scores",
                                        "the attention", "the attention^T", "the output"};
    int role = x->role, next = 0;
    /* every intermediate but v and the output has one reader: the pattern's next node */
    if (strcmp(op, "Split") == 0 && role == ATT_HEADS)
        return attn_split(im, node, a, id);
    if ((strcmp(op, "Mul") == 0 || strcmp(op, "Div") == 0) && node->n_input == 2)
        return attn_scale(im, node, a, id, x,
                          node_input(im, node, x == node_input(im, node, 0) ? 1 : 0));
    if (strcmp(op, "Reshape") == 0 && (role == ATT_V || role == ATT_OUT))
        return attn_reshape(im, node, a, x);
    if (strcmp(op, "Transpose") == 0 && (role == ATT_Q || role == ATT_PROBS)) {
        const int64_t *perm;
        size_t n = onnx_attr_ints(node, "perm", &perm);
        if (n != 4 || perm[0] != 0 || perm[1] != 1 || perm[2] != 3 || perm[3] != 2)
            return attn_fail(im, node, a, "of %s with another perm than [0, 1, 3, 2] (the "
                             "pattern swaps the last two axes)", names[role]);
        next = role == ATT_Q ? ATT_QT : ATT_PROBS_T;
    } else if (strcmp(op, "MatMul") == 0) {
        const value *l = node_input(im, node, 0), *r = y;
        bool lr = l && r && l->kind == VAL_ATTN && r->kind == VAL_ATTN && l->attn == r->attn;
        if (lr && l->role == ATT_QT && r->role == ATT_K)
            next = ATT_SCORES;
        else if (lr && l->role == ATT_V && r->role == ATT_PROBS_T)
            next = ATT_OUT;
        else
            return attn_fail(im, node, a, "of %s and %s (the pattern multiplies q^T by k, and v "
                             "by the attention^T)",
                             l && l->kind == VAL_ATTN ? names[l->role] : "another tensor",
                             r && r->kind == VAL_ATTN ? names[r->role] : "another tensor");
    } else if (strcmp(op, "Softmax") == 0 && role == ATT_SCORES) {
        int64_t axis = onnx_attr_int(node, "axis", im->opset >= 13 ? -1 : 1);
        if (axis4(axis) != 3)
            return attn_fail(im, node, a, "on axis %lld (the pattern's softmax is over the last "
                             "axis, the keys)", (long long)axis);
        next = ATT_PROBS;
    } else {
        return attn_fail(im, node, a, "reads '%.100s' (%s) where the pattern does not",
                         x->name, names[role]);
    }
    if (!out || (next != ATT_OUT && out->uses != 1) || (next == ATT_OUT && out->uses < 1))
        return attn_fail(im, node, a, "its output is read by %d nodes (the pattern's next node "
                         "only)", out ? out->uses : 0);
    attn_role(im, node, 0, id, next);
    return GR_OK;
}

/* ---- the walk ------------------------------------------------------------------------------ */

static const char *const foldable_ops[] = {
    "Constant", "Identity", "Shape", "Cast", "ConstantOfShape", "Concat", "Unsqueeze", "Squeeze",
    "Range", "Slice", "Gather", "Reshape", "Add", "Sub", "Mul", "Div", NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static gr_status fold_node(importer *im, const Onnx__NodeProto *node)
{
    const onnx_const *in[16];
    if (node->n_input > 16)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "%zu constant inputs (at most 16)",
                         node->n_input);
    for (size_t k = 0; k < node->n_input; k++) {
        value *v = node_input(im, node, k);
        in[k] = v ? &v->k : NULL;
    }
    value *out = node->n_output ? find_value(im, node->output[0]) : NULL;
    onnx_const result;
    char why[256];
    gr_status st = onnx_fold(node, im->opset, in, (int)node->n_input, &result, why, sizeof why);
    if (st != GR_OK)
        return node_fail(im, node, st, "%s", why);
    if (!out) {
        onnx_const_free(&result);
        return GR_OK;
    }
    out->k = result;
    out->kind = VAL_CONST;
    return GR_OK;
}

/* QuantizeLinear / DequantizeLinear (qdq.c; docs/onnx.md "Explicit Q/DQ"). On constants: folded
 * (int8 weights to float; their scales kept for the conv's int8). On a computed tensor: a Q/DQ
 * pair is the tensor itself in the float graph, and its scale the tensor's int8 range. */
static gr_status import_qdq(importer *im, const Onnx__NodeProto *node, bool quantize)
{
    im->n_qdq++;
    value *x = node_input(im, node, 0);
    const onnx_const *scale, *zp;
    if (!x)
        return node_fail(im, node, GR_ERR_PARSE, "input 0 is missing");
    GR_TRY(const_input(im, node, 1, false, &scale));
    GR_TRY(const_input(im, node, 2, true, &zp));
    bool activation = x->kind == VAL_LAYER;
    if (activation && !quantize && !x->qcodes)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "input 0 ('%.100s') is a float tensor, "
                         "not a QuantizeLinear's output (graphrun maps Q/DQ pairs)", x->name);
    int64_t dims[4];
    int rank = activation ? value_dims(im, x, dims) : x->k.ndim;
    onnx_qdq_params qp;
    char why[256];
    gr_status st = onnx_qdq_read(node, im->opset, quantize, activation, scale, zp,
                                 activation ? (x->qcodes ? x->qp.dtype : ONNX_INT8)
                                            : x->k.dtype, rank,
                                 activation ? dims : x->k.dims, &qp, why, sizeof why);
    if (st != GR_OK)
        return node_fail(im, node, st, "%s", why);
    value *out = node->n_output ? find_value(im, node->output[0]) : NULL;
    if (!activation) {
        if (!out)
            return GR_OK;
        st = onnx_qdq_fold(quantize, &x->k, &qp, &out->k, why, sizeof why);
        if (st != GR_OK)
            return node_fail(im, node, st, "%s", why);
        out->kind = VAL_CONST;
        out->qcodes = quantize;
        out->has_qp = !quantize;
        out->qp = qp;
        return GR_OK;
    }
    if (quantize) {
        if (x->qcodes)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "quantizes int8 codes");
        if (!out || out->uses == 0)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "its output is read by nothing (a "
                             "QuantizeLinear needs its DequantizeLinear)");
        float r = onnx_qdq_range(qp.scale[0]);
        float *slot = x->layer < 0 ? &im->qinput : &im->params[x->layer].qrange;
        if (*slot != 0.0f && *slot != r)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "tensor '%.100s' is quantized with "
                             "scale %g here and %g by another QuantizeLinear (graphrun's int8 "
                             "has one scale per tensor)", x->name, (double)qp.scale[0],
                             (double)(*slot / 127.0f));
        *slot = r;
        alias_output(im, node, 0, x);
        out->qcodes = 1;
        out->qp = qp;
        return GR_OK;
    }
    if (x->qp.scale[0] != qp.scale[0] || x->qp.dtype != qp.dtype ||
        (x->qp.zp ? x->qp.zp[0] : 0) != (qp.zp ? qp.zp[0] : 0))
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "scale %g / zero point %lld differ from "
                         "its QuantizeLinear's (%g / %lld)", (double)qp.scale[0],
                         (long long)(qp.zp ? qp.zp[0] : 0), (double)x->qp.scale[0],
                         (long long)(x->qp.zp ? x->qp.zp[0] : 0));
    if (out)
        alias_output(im, node, 0, x);
    if (out)
        out->qcodes = 0;
    return GR_OK;
}

/* After the weights are attached: the file's int8 scales onto the net (gr_net_qdq). */
static gr_status qdq_scales(importer *im)
{
    gr_net *net = im->net;
    net->qdq = gr_net_qdq_new(net->n_layers);
    if (!net->qdq)
        return GR_ERR_OUT_OF_MEMORY;
    gr_net_qdq *q = net->qdq;
    q->input_range = im->qinput;
    q->n_ranges = im->qinput > 0.0f;
    for (int i = 0; i < net->n_layers; i++) {
        q->range[i] = im->params[i].qrange;
        q->n_ranges += q->range[i] > 0.0f;
    }
    for (size_t n = 0; n < im->g->n_node; n++) {
        const Onnx__NodeProto *node = im->g->node[n];
        if (strcmp(onnx_str(node->op_type), "Conv") != 0 || node->n_input < 2 || !node->n_output)
            continue;
        const value *w = find_value(im, node->input[1]);
        const value *y = find_value(im, node->output[0]);
        if (!w || !w->has_qp || !y || y->kind != VAL_LAYER || y->layer < 0)
            continue;
        gr_layer *l = &net->layers[y->layer];
        float *s = gr_malloc((size_t)l->p.filters * sizeof *s, "Q/DQ weight scales");
        if (!s)
            return GR_ERR_OUT_OF_MEMORY;
        if (l->p.op == GR_OP_CONV && l->w.n_weights == w->k.n &&
            onnx_qdq_weight_scales(&w->qp, &w->k, l->w.weights, l->p.filters, s)) {
            q->wscale[y->layer] = s;
            q->n_wscale[y->layer] = l->p.filters;
            q->n_wscaled++;
        } else {
            free(s);
        }
    }
    return GR_OK;
}

/* The nodes on computed tensors that map onto a graphrun op (docs/onnx.md's table). */
typedef struct mapping {
    const char *op;
    gr_status (*import)(importer *im, const Onnx__NodeProto *node);
} mapping;

static const mapping mappings[] = {
    {"Conv", import_conv},
    {"BatchNormalization", import_batchnorm},
    {"Relu", import_activation},
    {"LeakyRelu", import_activation},
    {"Sigmoid", import_activation},
    {"Tanh", import_activation},
    {"Elu", import_activation},
    {"Clip", import_activation},
    {"MaxPool", import_maxpool},
    {"Add", import_add},
    {"Concat", import_concat},
    {"Split", import_split},
    {"Slice", import_slice},
    {"Resize", import_resize},
    {"Flatten", import_flatten},
    {"GlobalAveragePool", import_global_avgpool},
    {"Gemm", import_gemm},
    {"Softmax", import_softmax},
};

static gr_status map_node(importer *im, const Onnx__NodeProto *node, const char *op)
{
    value *x = node_input(im, node, 0);
    static const char *const arith[] = {"Add", "Sub", "Mul", "Div", NULL};
    value *y = node_input(im, node, 1);
    if (in_list(arith, op) && node->n_input == 2 && x && y &&
        (x->kind == VAL_CONST) != (y->kind == VAL_CONST))
        return import_affine(im, node, op);
    for (size_t i = 0; i < sizeof mappings / sizeof mappings[0]; i++)
        if (strcmp(op, mappings[i].op) == 0)
            return mappings[i].import(im, node);
    if (strcmp(op, "Identity") == 0 && x) {
        alias_output(im, node, 0, x);
        return GR_OK;
    }
    if (strcmp(op, "Shape") == 0 && x)
        return import_shape(im, node, x);
    if (strcmp(op, "Reshape") == 0 && x && x->kind == VAL_LAYER && attn_starts(im, node, x))
        return attn_start(im, node, x);
    if (strcmp(op, "Reshape") == 0 && x)
        return import_reshape(im, node, x);
    if (in_list(foldable_ops, op))
        return node_fail(im, node, GR_ERR_UNSUPPORTED,
                         "on a computed tensor (graphrun folds it only on constants; on "
                         "computed tensors only the ops of docs/onnx.md are supported)");
    return node_fail(im, node, GR_ERR_UNSUPPORTED,
                     "not supported by graphrun's ONNX importer (docs/onnx.md lists the ops)");
}

/* ---- the detection head's tail (models/onnx/head.h) ---------------------------------------- */

static bool reads_tail(const importer *im, const Onnx__NodeProto *node)
{
    for (size_t k = 0; k < node->n_input; k++) {
        const value *v = node_input(im, node, k);
        if (v && v->kind == VAL_TAIL)
            return true;
    }
    return false;
}

/* Can the tail start with this node on graphrun layers' outputs (not the network input)? */
static bool tail_takes(const importer *im, const Onnx__NodeProto *node)
{
    if (!onnx_head_starts(onnx_str(node->op_type)))
        return false;
    bool any_layer = false;
    for (size_t k = 0; k < node->n_input; k++) {
        const value *v = node_input(im, node, k);
        if (v && v->kind == VAL_LAYER && v->layer < 0)
            return false;
        any_layer |= v && v->kind == VAL_LAYER;
    }
    return any_layer;
}

static gr_status import_tail_node(importer *im, const Onnx__NodeProto *node)
{
    char why[512] = "out of memory"; /* what an allocation failure leaves */
    if (strcmp(onnx_str(node->op_type), "Shape") == 0) {
        value *x = node_input(im, node, 0), *out = node->n_output ? find_value(im, node->output[0])
                                                                   : NULL;
        if (!out)
            return GR_OK;
        gr_status st = onnx_head_shape(im->tail, x->tail_id, node, &out->k, why, sizeof why);
        if (st != GR_OK)
            return node_fail(im, node, st, "%s", why);
        out->kind = VAL_CONST;
        return GR_OK;
    }
    head_in in[GR_TAIL_MAX_ARGS];
    int out_ids[64];
    if (node->n_input > GR_TAIL_MAX_ARGS || node->n_output > 64)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "%zu inputs, %zu outputs (at most %d, 64 "
                         "after graphrun's layers)", node->n_input, node->n_output,
                         GR_TAIL_MAX_ARGS);
    for (size_t k = 0; k < node->n_input; k++) {
        const value *v = node_input(im, node, k);
        memset(&in[k], 0, sizeof in[k]);
        if (!v)
            continue;
        if (v->kind == VAL_CONST) {
            in[k].kind = HEAD_IN_CONST;
            in[k].k = &v->k;
        } else if (v->kind == VAL_TAIL) {
            in[k].kind = HEAD_IN_TAIL;
            in[k].id = v->tail_id;
        } else if (v->layer < 0) {
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "reads the network input after "
                             "graphrun's layers (the detection head reads layers only)");
        } else {
            in[k].kind = HEAD_IN_LAYER;
            in[k].layer = v->layer;
            in[k].ndim = value_dims(im, v, in[k].dims);
            im->params[v->layer].aliased = 1; /* the head reads it as it is */
        }
    }
    gr_status st = onnx_head_node(&im->tail, node, im->opset, in, (int)node->n_input, out_ids,
                                  why, sizeof why);
    if (st != GR_OK)
        return node_fail(im, node, st, "%s", why);
    for (size_t k = 0; k < node->n_output; k++) {
        value *out = find_value(im, node->output[k]);
        if (out && out_ids[k] >= 0) {
            out->kind = VAL_TAIL;
            out->tail_id = out_ids[k];
        }
    }
    return GR_OK;
}

static gr_status import_node(importer *im, const Onnx__NodeProto *node)
{
    const char *op = onnx_str(node->op_type);
    const char *domain = onnx_str(node->domain);
    if (domain[0] && strcmp(domain, "ai.onnx") != 0)
        return node_fail(im, node, GR_ERR_UNSUPPORTED, "domain '%.64s' is not supported "
                         "(only the default ONNX domain)", domain);
    bool all_const = true, any_input = false;
    for (size_t k = 0; k < node->n_input; k++) {
        value *v = node_input(im, node, k);
        if (!v)
            continue;
        if (v->kind == VAL_NONE)
            return node_fail(im, node, GR_ERR_PARSE,
                             "input '%.100s' is produced by no earlier node (the graph is not "
                             "in topological order)", v->name);
        any_input = true;
        all_const &= v->kind == VAL_CONST;
    }
    if (strcmp(op, "QuantizeLinear") == 0 || strcmp(op, "DequantizeLinear") == 0)
        return import_qdq(im, node, op[0] == 'Q');
    for (size_t k = 0; k < node->n_input; k++) {
        const value *v = node_input(im, node, k);
        if (v && v->qcodes)
            return node_fail(im, node, GR_ERR_UNSUPPORTED, "input %zu ('%.100s') is a "
                             "QuantizeLinear's int8 output (graphrun reads it only through a "
                             "DequantizeLinear)", k, v->name);
    }
    for (size_t k = 0; k < node->n_input; k++) {
        const value *v = node_input(im, node, k);
        if (v && v->kind == VAL_ATTN)
            return import_attention(im, node);
    }
    if (all_const && (any_input || strcmp(op, "Constant") == 0) && in_list(foldable_ops, op))
        return fold_node(im, node);
    if (reads_tail(im, node))
        return import_tail_node(im, node);
    int layers_before = im->net->n_layers;
    gr_status st = map_node(im, node, op);
    /* A data-moving node no layer runs (a Reshape to another shape, a Transpose, a Concat off the
     * channels ...) starts the detection head on the host; if the head cannot take it either,
     * the layer mapping's reason stands. */
    if (st != GR_ERR_UNSUPPORTED || im->net->n_layers != layers_before || !tail_takes(im, node))
        return st;
    char why[512];
    snprintf(why, sizeof why, "%s", gr_last_error());
    if (import_tail_node(im, node) == GR_OK)
        return GR_OK;
    return gr_fail(st, "%s", why);
}

/* ---- the model ----------------------------------------------------------------------------- */

static gr_status read_opset(importer *im, const Onnx__ModelProto *model)
{
    for (size_t i = 0; i < model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = model->opset_import[i];
        if (o && (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)) {
            if (!o->has_version || o->version < OPSET_MIN || o->version > OPSET_MAX)
                return gr_fail(GR_ERR_UNSUPPORTED,
                               "%s: opset %lld (graphrun's ONNX importer reads opsets %d to %d)",
                               im->source, (long long)o->version, OPSET_MIN, OPSET_MAX);
            im->opset = (int)o->version;
            return GR_OK;
        }
    }
    return gr_fail(GR_ERR_PARSE, "%s: no opset_import for the default ONNX domain", im->source);
}

static gr_status read_input(importer *im)
{
    const Onnx__GraphProto *g = im->g;
    const Onnx__ValueInfoProto *input = NULL;
    for (size_t i = 0; i < g->n_input; i++) {
        const value *v = find_value(im, g->input[i]->name);
        if (v && v->kind == VAL_CONST)
            continue; /* an initializer listed as an input too (older exporters) */
        if (input)
            return gr_fail(GR_ERR_UNSUPPORTED, "%s: graph inputs '%.100s' and '%.100s' (graphrun "
                           "runs networks of one input)", im->source, onnx_str(input->name),
                           onnx_str(g->input[i]->name));
        input = g->input[i];
    }
    if (!input || !input->name || !input->name[0])
        return gr_fail(GR_ERR_PARSE, "%s: the graph has no (named) input", im->source);
    const Onnx__TypeProto *t = input->type;
    const Onnx__TensorShapeProto *shape =
        t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type
            ? t->tensor_type->shape : NULL;
    if (!shape || !t->tensor_type->has_elem_type || t->tensor_type->elem_type != ONNX_FLOAT)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: input '%.100s' is not a float32 tensor with a "
                       "shape", im->source, input->name);
    int64_t dims[4];
    if (shape->n_dim != 4)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: input '%.100s' has rank %zu (graphrun reads "
                       "images: N x C x H x W)", im->source, input->name, shape->n_dim);
    for (int d = 0; d < 4; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = shape->dim[d];
        bool fixed = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[d] = fixed ? dim->dim_value : -1;
        if (d > 0 && (dims[d] < 1 || dims[d] > GR_MAX_DIM))
            return gr_fail(GR_ERR_UNSUPPORTED, "%s: input '%.100s' dim %d is %s (graphrun "
                           "needs a fixed channel count and size: export with a fixed input "
                           "size)", im->source, input->name, d, fixed ? "out of range" :
                           "dynamic");
    }
    if (dims[0] != 1 && dims[0] != -1)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: input '%.100s' has batch %lld (1 or dynamic)",
                       im->source, input->name, (long long)dims[0]);
    im->net->c = (int)dims[1];
    im->net->h = (int)dims[2];
    im->net->w = (int)dims[3];
    gr_shape in = {im->net->c, im->net->h, im->net->w};
    if (gr_shape_elems(in) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "%s: input %dx%dx%d is too large", im->source, in.c, in.h,
                       in.w);
    value *v = NULL;
    GR_TRY(add_value(im, input->name, &v));
    v->kind = VAL_LAYER;
    v->layer = -1;
    return GR_OK;
}

/* Every node output becomes a value, and every read is counted (uses, user). */
static gr_status index_graph(importer *im)
{
    const Onnx__GraphProto *g = im->g;
    for (size_t n = 0; n < g->n_node; n++) {
        const Onnx__NodeProto *node = g->node[n];
        for (size_t k = 0; k < node->n_output; k++) {
            value *v = NULL;
            if (node->output[k][0])
                GR_TRY(add_value(im, node->output[k], &v));
        }
    }
    for (size_t n = 0; n < g->n_node; n++) {
        const Onnx__NodeProto *node = g->node[n];
        /* Shape reads dims only, which folding into a layer keeps: not a use that blocks it. */
        bool shape_only = strcmp(onnx_str(node->op_type), "Shape") == 0;
        for (size_t k = 0; k < node->n_input; k++) {
            if (!node->input[k][0])
                continue;
            value *v = find_value(im, node->input[k]);
            if (!v) {
                im->node_index = (int)n;
                return node_fail(im, node, GR_ERR_PARSE, "input '%.100s' is defined nowhere",
                                 node->input[k]);
            }
            if (shape_only)
                continue;
            if (v->uses < 2)
                v->user[v->uses] = (int)n;
            v->uses++;
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        value *v = find_value(im, g->output[i]->name);
        if (!v)
            return gr_fail(GR_ERR_PARSE, "%s: graph output '%.100s' is defined nowhere",
                           im->source, onnx_str(g->output[i]->name));
        if (v->uses < 2)
            v->user[v->uses] = -1;
        v->uses++;
    }
    return GR_OK;
}

/* ---- the anchor-free head's decode on the layers (ops/dfl_head.c) ------------------------- */

/* The dfl_head parameters the tail's inputs would have as a YOLOv8 / YOLO11 head: each input a
 * layer of 4 R + nc channels, the strides the input size over its cells, the cells adding up to
 * the output's anchors. False when the tail is not shaped so. */
static bool dfl_head_params(const importer *im, const gr_onnx_tail *t, gr_op_params *p,
                            int *inputs, int *n_in)
{
    const gr_net *net = im->net;
    int64_t dims[GR_TAIL_MAX_RANK];
    int nc = gr_tail_classes(t), n = gr_tail_input_count(t);
    if (gr_tail_get_layout(t) != GR_TAIL_ANCHOR_FREE || gr_tail_output_dims(t, dims) != 3 ||
        n < 1 || n > GR_MAX_INPUTS || nc < 1)
        return false;
    base_params(GR_OP_DFL_HEAD, p);
    p->classes = nc;
    int64_t anchors = 0;
    for (int k = 0; k < n; k++) {
        int layer = gr_tail_input_layer(t, k);
        if (layer < 0 || layer >= net->n_layers)
            return false;
        gr_shape s = net->layers[layer].out;
        int bins = (s.c - nc) / 4;
        if (bins < 1 || s.c != 4 * bins + nc || (k > 0 && bins != p->size) ||
            net->h % s.h != 0 || net->w % s.w != 0 || net->h / s.h != net->w / s.w)
            return false;
        p->size = bins;
        p->anchors[k] = (float)(net->h / s.h);
        inputs[k] = layer;
        anchors += (int64_t)s.h * s.w;
    }
    *n_in = n;
    return anchors == dims[2];
}

/* Whether the dfl_head op computes what the tail does: both run on one image of pseudo-random
 * logits in [-6, 6) and agree within 1e-5 relative (float rounding in other orders; a wrong
 * anchor offset, stride, side or class order is off by far more). */
static bool dfl_head_matches(const importer *im, const gr_onnx_tail *t, const gr_op_params *p,
                             const int *inputs, int n_in)
{
    const gr_net *net = im->net;
    gr_shape shapes[GR_MAX_INPUTS], out;
    for (int k = 0; k < n_in; k++)
        shapes[k] = net->layers[inputs[k]].out;
    if (gr_op_infer(p, shapes, n_in, &out) != GR_OK)
        return false;
    float *in[GR_MAX_INPUTS] = {NULL};
    size_t n_out = gr_shape_elems(out);
    float *scratch = malloc(gr_tail_scratch_floats(t) * sizeof *scratch);
    float *mine = malloc(n_out * sizeof *mine);
    bool ok = scratch && mine;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int k = 0; ok && k < n_in; k++) {
        size_t n = gr_shape_elems(shapes[k]);
        in[k] = malloc(n * sizeof *in[k]);
        ok = in[k] != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            in[k][i] = (float)((double)(state >> 40) / (double)(1ull << 24) * 12.0 - 6.0);
        }
    }
    if (ok) {
        const float *theirs = gr_tail_run(t, (const float *const *)in, scratch);
        gr_op_ref(p, NULL, (const float *const *)in, shapes, n_in, mine, out, 1);
        for (size_t i = 0; ok && i < n_out; i++)
            ok = fabsf(mine[i] - theirs[i]) <= 1e-5f * (1.0f + fabsf(theirs[i]));
    }
    for (int k = 0; k < n_in; k++)
        free(in[k]);
    free(scratch);
    free(mine);
    return ok;
}

/* A YOLOv8 / YOLO11 head's tail (the DFL decode, the boxes around the anchor points, the class
 * sigmoid) becomes a dfl_head layer on the scales' raw heads, so engines run it (on the GPU
 * with the rest) and copy out the decoded [4 + nc, A] instead of the 4 R + nc channels; the tail
 * left is one copy of that layer. Any other tail, or one the op does not reproduce, stays. */
static gr_status lower_dfl_head(importer *im, const char *name)
{
    gr_op_params p;
    int inputs[GR_MAX_INPUTS], n_in = 0;
    if (!dfl_head_params(im, im->tail, &p, inputs, &n_in) ||
        !dfl_head_matches(im, im->tail, &p, inputs, n_in))
        return GR_OK;
    int64_t dims[GR_TAIL_MAX_RANK];
    int rank = gr_tail_output_dims(im->tail, dims), layer = -1;
    GR_TRY(add_layer(im, im->g->node[im->g->n_node - 1], &p, inputs, n_in, &layer));
    gr_onnx_tail *t = gr_tail_new();
    if (!t)
        return GR_ERR_OUT_OF_MEMORY;
    gr_tail_node copy = {.op = GR_TAIL_COPY, .n_args = 1};
    copy.args[0] = gr_tail_input(t, layer, rank, dims);
    copy.out = gr_tail_value(t, rank, dims);
    gr_status st = copy.args[0] < 0 || copy.out < 0 ? GR_ERR_LIMIT : gr_tail_add_node(t, &copy);
    if (st == GR_OK)
        st = gr_tail_finish(t, copy.out, name);
    if (st != GR_OK) {
        gr_tail_release(t);
        return gr_fail_prefix(st, "%s: ", im->source);
    }
    gr_tail_release(im->tail);
    im->tail = t;
    return GR_OK;
}

/* A graph ending in a detection head: its one output is the tail's; the net's outputs are the
 * layers the tail reads, in the tail's input order. */
static gr_status tail_outputs(importer *im)
{
    const Onnx__GraphProto *g = im->g;
    if (g->n_output != 1)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: %zu graph outputs with a detection head (one: "
                       "its boxes)", im->source, g->n_output);
    const value *v = find_value(im, g->output[0]->name);
    if (!v || v->kind != VAL_TAIL)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: graph output '%.100s' is not the detection "
                       "head's", im->source, onnx_str(g->output[0]->name));
    gr_status st = gr_tail_finish(im->tail, v->tail_id, v->name);
    if (st != GR_OK)
        return gr_fail_prefix(st, "%s: ", im->source);
    GR_TRY(lower_dfl_head(im, v->name));
    gr_net *net = im->net;
    net->n_outputs = gr_tail_input_count(im->tail);
    for (int k = 0; k < net->n_outputs; k++)
        net->output_layers[k] = gr_tail_input_layer(im->tail, k);
    net->tail = im->tail;
    im->tail = NULL;
    return GR_OK;
}

static gr_status read_outputs(importer *im)
{
    const Onnx__GraphProto *g = im->g;
    gr_net *net = im->net;
    if (g->n_output < 1 || g->n_output > GR_NET_MAX_OUTPUTS)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: %zu graph outputs (1 to %d)", im->source,
                       g->n_output, GR_NET_MAX_OUTPUTS);
    for (size_t i = 0; im->tail && i < g->n_output; i++) {
        const value *v = find_value(im, g->output[i]->name);
        if (v && v->kind == VAL_TAIL)
            return tail_outputs(im);
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const value *v = find_value(im, g->output[i]->name);
        if (v && v->qcodes)
            return gr_fail(GR_ERR_UNSUPPORTED, "%s: graph output '%.100s' is a QuantizeLinear's "
                           "int8 output (graphrun's outputs are float: end with a "
                           "DequantizeLinear)", im->source, v->name);
        if (!v || v->kind != VAL_LAYER || v->layer < 0)
            return gr_fail(GR_ERR_UNSUPPORTED, "%s: graph output '%.100s' is %s, not a computed "
                           "tensor", im->source, onnx_str(g->output[i]->name),
                           v && v->kind == VAL_CONST ? "a constant"
                           : v && v->kind == VAL_ATTN ? "inside an attention pattern"
                                                      : "the input");
        net->output_layers[net->n_outputs++] = v->layer;
    }
    if (net->n_outputs == 1 && net->output_layers[0] == net->n_layers - 1)
        net->n_outputs = 0; /* the last layer: the default, which saved engines hold */
    return GR_OK;
}

static gr_status attach_weights(importer *im)
{
    gr_net *net = im->net;
    size_t n_floats;
    GR_TRY(gr_net_param_floats(net, &n_floats));
    float *block = gr_calloc(n_floats ? n_floats : 1, sizeof *block, "ONNX weights");
    if (!block)
        return GR_ERR_OUT_OF_MEMORY;
    gr_net_attach_weights(net, block, n_floats);
    for (int i = 0; i < net->n_layers; i++) {
        gr_layer *l = &net->layers[i];
        if (l->p.op != GR_OP_CONV && l->p.op != GR_OP_CONNECTED)
            continue;
        memcpy(l->w.biases, im->params[i].biases, (size_t)l->p.filters * sizeof(float));
        memcpy(l->w.weights, im->params[i].weights, l->w.n_weights * sizeof(float));
    }
    return GR_OK;
}

static gr_status import_model(importer *im, const Onnx__ModelProto *model)
{
    GR_TRY(read_opset(im, model));
    const Onnx__GraphProto *g = model->graph;
    if (!g)
        return gr_fail(GR_ERR_PARSE, "%s: no graph", im->source);
    if (g->n_node > MAX_NODES)
        return gr_fail(GR_ERR_LIMIT, "%s: %zu nodes (at most %d)", im->source, g->n_node,
                       MAX_NODES);
    im->g = g;
    size_t cap = g->n_initializer + g->n_input + 1;
    for (size_t n = 0; n < g->n_node; n++)
        cap += g->node[n]->n_output;
    size_t slots = 16;
    while (slots < 2 * cap)
        slots *= 2;
    im->vals = gr_calloc(cap, sizeof *im->vals, "ONNX values");
    im->slots = gr_calloc(slots, sizeof *im->slots, "ONNX names");
    im->absorbed = gr_calloc(g->n_node + 1, 1, "ONNX nodes");
    if (!im->vals || !im->slots || !im->absorbed)
        return GR_ERR_OUT_OF_MEMORY;
    im->cap_vals = cap;
    im->slot_mask = slots - 1;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return gr_fail(GR_ERR_PARSE, "%s: initializer %zu has no name", im->source, i);
        value *v = NULL;
        GR_TRY(add_value(im, t->name, &v));
        char why[256];
        gr_status st = onnx_const_from_tensor(t, &v->k, why, sizeof why);
        if (st != GR_OK)
            return gr_fail(st, "%s: initializer %s", im->source, why);
        v->kind = VAL_CONST;
    }
    GR_TRY(read_input(im));
    GR_TRY(index_graph(im));
    for (size_t n = 0; n < g->n_node; n++) {
        im->node_index = (int)n;
        if (!im->absorbed[n])
            GR_TRY(import_node(im, g->node[n]));
    }
    if (im->net->n_layers == 0)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: the graph computes nothing graphrun runs (no "
                       "layers)", im->source);
    GR_TRY(read_outputs(im));
    onnx_head_metadata(model, im->net, im->source);
    GR_TRY(attach_weights(im));
    return im->n_qdq ? qdq_scales(im) : GR_OK;
}

static void importer_free(importer *im)
{
    for (size_t i = 0; i < im->n_vals; i++)
        onnx_const_free(&im->vals[i].k);
    for (int i = 0; im->params && i < im->net->n_layers; i++) {
        free(im->params[i].weights);
        free(im->params[i].biases);
    }
    free(im->params);
    free(im->vals);
    free(im->slots);
    free(im->absorbed);
    free(im->attn);
    gr_tail_release(im->tail);
}

gr_status gr_net_parse_onnx(const uint8_t *data, size_t len, const char *source, gr_net **out)
{
    if (!out || (!data && len))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_parse_onnx: NULL argument");
    *out = NULL;
    if (!source)
        source = "<onnx>";
    if (data && !onnx_nesting_ok(data, len))
        return gr_fail(GR_ERR_LIMIT, "%s: messages nested more than %d deep (not an ONNX model "
                       "graphrun reads)", source, ONNX_MAX_NESTING);
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, data);
    if (!model)
        return gr_fail(GR_ERR_PARSE, "%s: not a valid ONNX protobuf (ModelProto)", source);
    importer im;
    memset(&im, 0, sizeof im);
    im.source = source;
    im.net = gr_calloc(1, sizeof *im.net, "network");
    gr_status st = im.net ? import_model(&im, model) : GR_ERR_OUT_OF_MEMORY;
    importer_free(&im);
    onnx__model_proto__free_unpacked(model, NULL);
    if (st != GR_OK) {
        gr_net_free(im.net);
        return st;
    }
    const char *base = strrchr(source, '/');
    snprintf(im.net->name, sizeof im.net->name, "%s", base ? base + 1 : source);
    im.net->preprocess = GR_PREPROCESS_LETTERBOX_114; /* what YOLO exports expect (docs/onnx.md) */
    *out = im.net;
    return GR_OK;
}

gr_status gr_net_load_onnx(const char *path, gr_net **out)
{
    if (!out || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_load_onnx: NULL argument");
    *out = NULL;
    char *data;
    size_t len;
    GR_TRY(gr_read_file(path, GR_ONNX_MAX_BYTES, "ONNX model", &data, &len));
    gr_status st = gr_net_parse_onnx((const uint8_t *)data, len, path, out);
    free(data);
    return st;
}
