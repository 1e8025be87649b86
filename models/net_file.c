/* A network in binary form, for saved engines (runtime/engine_file.c): the layer list with its
 * parameters, shapes and weights, the class names and the load notice, then (engine file format
 * 5 on) an ONNX graph's outputs, its detection head run on the host (models/onnx/tail.c's
 * record) and the file's int8 scales (gr_net_qdq) - everything gr_net holds, so a saved engine
 * needs neither the cfg, the .weights nor the .onnx file again.
 *
 * Reading trusts nothing: every parameter is range-checked as the parser would (ops, activations,
 * dims within GR_MAX_DIM), edges must point backwards, each layer's shape is inferred again by its
 * op and must equal the stored one, and the weight count must be the one the layers imply; the
 * outputs are layers, the head is rebuilt through its builder (each node checked as the importer's
 * are) and reads exactly those outputs, the scales are finite and sit on convolutions. A file
 * that passes holds a network the parser could have produced; one that does not is refused with
 * the layer and field that differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "models/internal.h"
#include "models/net.h"
#include "models/onnx/tail.h"

#define MAX_CLASS_NAME 4096

/* Zero bytes before the weight floats at `offset` of the record's buffer, so they start at a
 * multiple of GR_NET_WEIGHT_ALIGN. */
static size_t weight_padding(size_t offset)
{
    return (GR_NET_WEIGHT_ALIGN - offset % GR_NET_WEIGHT_ALIGN) % GR_NET_WEIGHT_ALIGN;
}

static void write_params(gr_bytes *b, const gr_op_params *p)
{
    const int ints[] = {(int)p->op,         (int)p->activation, p->filters, p->size,
                        p->stride,          p->pad,             p->groups,  p->group_id,
                        p->batch_normalize, p->classes,         p->coords,  p->num,
                        p->n_mask,          p->softmax,         (int)p->dtype};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        gr_bytes_i32(b, ints[k]);
    for (int k = 0; k < GR_MAX_ANCHORS; k++)
        gr_bytes_i32(b, p->mask[k]);
    for (int k = 0; k < 2 * GR_MAX_ANCHORS; k++)
        gr_bytes_f32(b, p->anchors[k]);
    gr_bytes_f32(b, p->scale);
    /* AlexeyAB's keys (conv stride_y/dilation, its batch norm, the yolo decoding and NMS). */
    const int more[] = {p->stride_y, p->dilation, p->alexeyab, p->new_coords, (int)p->nms_kind};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        gr_bytes_i32(b, more[k]);
    gr_bytes_f32(b, p->scale_x_y);
    gr_bytes_f32(b, p->beta_nms);
}

/* The file's int8 scales (gr_net_qdq): the input's range, then per layer its range and its
 * weight scales (a count, 0 for none, and the floats); the counts are derived again on reading. */
static void write_qdq(const gr_net_qdq *q, gr_bytes *b)
{
    gr_bytes_u32(b, q != NULL);
    if (!q)
        return;
    gr_bytes_f32(b, q->input_range);
    for (int i = 0; i < q->n_layers; i++) {
        gr_bytes_f32(b, q->range[i]);
        int n = q->wscale[i] ? q->n_wscale[i] : 0;
        gr_bytes_i32(b, n);
        gr_bytes_put(b, q->wscale[i], (size_t)n * sizeof(float));
    }
}

/* Format 5 on: the outputs (an ONNX graph's), the detection head run on the host
 * (models/onnx/tail.h) and the file's int8 scales. */
static void write_outputs(const gr_net *net, gr_bytes *b)
{
    gr_bytes_i32(b, net->n_outputs);
    for (int k = 0; k < net->n_outputs; k++)
        gr_bytes_i32(b, net->output_layers[k]);
    gr_bytes_u32(b, net->tail != NULL);
    if (net->tail)
        gr_tail_write(net->tail, b);
    write_qdq(net->qdq, b);
}

gr_status gr_net_write(const gr_net *net, gr_bytes *b)
{
    if (net->qdq && net->qdq->n_layers != net->n_layers)
        return gr_fail(GR_ERR_INTERNAL, "%s: Q/DQ scales of %d layers in a network of %d",
                       net->name, net->qdq->n_layers, net->n_layers);
    gr_bytes_str(b, net->name);
    gr_bytes_i32(b, net->w);
    gr_bytes_i32(b, net->h);
    gr_bytes_i32(b, net->c);
    gr_bytes_i32(b, net->n_layers);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        write_params(b, &l->p);
        gr_bytes_i32(b, l->n_inputs);
        for (int k = 0; k < l->n_inputs; k++)
            gr_bytes_i32(b, l->inputs[k]);
        gr_bytes_i32(b, l->out.c);
        gr_bytes_i32(b, l->out.h);
        gr_bytes_i32(b, l->out.w);
        gr_bytes_i32(b, l->cfg_line);
    }
    gr_bytes_u64(b, net->weight_block ? net->n_weight_floats : 0);
    if (net->weight_block) {
        static const uint8_t zeros[GR_NET_WEIGHT_ALIGN] = {0};
        gr_bytes_put(b, zeros, weight_padding(b->len));
        gr_bytes_put(b, net->weight_block, net->n_weight_floats * sizeof(float));
    }
    gr_bytes_i32(b, net->synthetic);
    gr_bytes_u64(b, net->nonfinite_weights);
    gr_bytes_str(b, net->load_notice);
    gr_bytes_i32(b, net->class_names ? net->n_class_names : 0);
    for (int i = 0; net->class_names && i < net->n_class_names; i++)
        gr_bytes_str(b, net->class_names[i]);
    write_outputs(net, b);
    return b->failed ? gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory writing the network",
                               net->name)
                     : GR_OK;
}

static int in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }

/* The parameters, each within what the parser accepts (GR_PARAM_DERIVED was resolved there). */
static gr_status read_params(gr_reader *r, const char *source, int index, gr_op_params *p)
{
    memset(p, 0, sizeof *p);
    int v[15];
    for (int k = 0; k < 15; k++)
        v[k] = gr_reader_i32(r);
    p->op = (gr_op_kind)v[0];
    p->activation = (gr_activation)v[1];
    int *fields[] = {&p->filters, &p->size,    &p->stride, &p->pad,    &p->groups, &p->group_id,
                     &p->batch_normalize, &p->classes, &p->coords, &p->num, &p->n_mask, &p->softmax};
    for (int k = 0; k < 12; k++)
        *fields[k] = v[2 + k];
    p->dtype = (gr_dtype)v[14];
    for (int k = 0; k < GR_MAX_ANCHORS; k++)
        p->mask[k] = gr_reader_i32(r);
    for (int k = 0; k < 2 * GR_MAX_ANCHORS; k++)
        p->anchors[k] = gr_reader_f32(r);
    p->scale = gr_reader_f32(r);
    int more[5];
    for (int k = 0; k < 5; k++)
        more[k] = gr_reader_i32(r);
    p->scale_x_y = gr_reader_f32(r);
    p->beta_nms = gr_reader_f32(r);
    if (r->short_read)
        return GR_OK; /* the caller says where the record ended */
    if (!in_range(more[0], 0, GR_MAX_DIM) || !in_range(more[1], 0, GR_MAX_DIM) ||
        !in_range(more[2], 0, 1) || !in_range(more[3], 0, 1) ||
        !in_range(more[4], GR_NMS_DEFAULT, GR_NMS_DIOU) || !isfinite(p->scale_x_y) ||
        !isfinite(p->beta_nms))
        return gr_fail(GR_ERR_PARSE, "%s: layer %d: stride_y %d, dilation %d, batch norm kind %d, "
                       "new_coords %d or nms_kind %d out of range, or a non-finite scale_x_y / "
                       "beta_nms", source, index, more[0], more[1], more[2], more[3], more[4]);
    p->stride_y = more[0];
    p->dilation = more[1];
    p->alexeyab = more[2];
    p->new_coords = more[3];
    p->nms_kind = (gr_nms_kind)more[4];
    if (!in_range(v[0], 0, GR_OP_COUNT - 1) || !in_range(v[1], 0, GR_ACT_COUNT - 1) ||
        !in_range(v[14], 0, GR_DTYPE_I32))
        return gr_fail(GR_ERR_PARSE, "%s: layer %d: op %d, activation %d or dtype %d is unknown",
                       source, index, v[0], v[1], v[14]);
    for (int k = 2; k < 14; k++)
        if (!in_range(v[k], 0, GR_MAX_DIM))
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: parameter %d = %d is outside 0..%d",
                           source, index, k, v[k], GR_MAX_DIM);
    for (int k = 0; k < GR_MAX_ANCHORS; k++)
        if (!in_range(p->mask[k], 0, GR_MAX_ANCHORS - 1))
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: mask[%d] = %d is outside 0..%d", source,
                           index, k, p->mask[k], GR_MAX_ANCHORS - 1);
    for (int k = 0; k < 2 * GR_MAX_ANCHORS; k++)
        if (!isfinite(p->anchors[k]))
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: anchor %d is not finite", source, index, k);
    if (!isfinite(p->scale))
        return gr_fail(GR_ERR_PARSE, "%s: layer %d: scale is not finite", source, index);
    return GR_OK;
}

/* One layer: parameters, edges (backwards only), and its shape inferred again by the op. */
static gr_status read_layer(gr_reader *r, const char *source, gr_net *net, int i)
{
    gr_layer *l = &net->layers[i];
    GR_TRY(read_params(r, source, i, &l->p));
    l->n_inputs = gr_reader_i32(r);
    if (!r->short_read && !in_range(l->n_inputs, 0, GR_MAX_INPUTS))
        return gr_fail(GR_ERR_PARSE, "%s: layer %d: %d inputs (at most %d)", source, i,
                       l->n_inputs, GR_MAX_INPUTS);
    for (int k = 0; k < l->n_inputs && !r->short_read; k++) {
        l->inputs[k] = gr_reader_i32(r);
        if (!in_range(l->inputs[k], -1, i - 1))
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: input %d is layer %d (outside -1..%d)",
                           source, i, k, l->inputs[k], i - 1);
    }
    gr_shape stored = {gr_reader_i32(r), gr_reader_i32(r), gr_reader_i32(r)};
    l->cfg_line = gr_reader_i32(r);
    if (r->short_read)
        return GR_OK;
    gr_shape in[GR_MAX_INPUTS];
    for (int k = 0; k < l->n_inputs; k++)
        in[k] = gr_net_input_shape(net, i, k);
    /* An op's refusal (inputs it does not take, a parameter out of range) is, in a file written
     * from a network that was built, corruption: GR_ERR_PARSE whatever the op said. */
    if (gr_op_infer(&l->p, in, l->n_inputs, &l->out) != GR_OK)
        return gr_fail_prefix(GR_ERR_PARSE, "%s: layer %d: ", source, i);
    if (l->out.c != stored.c || l->out.h != stored.h || l->out.w != stored.w ||
        l->out.c > GR_MAX_DIM || l->out.h > GR_MAX_DIM || l->out.w > GR_MAX_DIM ||
        gr_shape_elems(l->out) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_PARSE, "%s: layer %d: stored shape %dx%dx%d, inferred %dx%dx%d",
                       source, i, stored.c, stored.h, stored.w, l->out.c, l->out.h, l->out.w);
    return GR_OK;
}

static gr_status read_layers(gr_reader *r, const char *source, gr_net *net)
{
    gr_reader_str(r, net->name, sizeof net->name);
    net->w = gr_reader_i32(r);
    net->h = gr_reader_i32(r);
    net->c = gr_reader_i32(r);
    int n = gr_reader_i32(r);
    if (r->short_read)
        return GR_OK;
    if (!in_range(net->w, 1, GR_MAX_DIM) || !in_range(net->h, 1, GR_MAX_DIM) ||
        !in_range(net->c, 1, GR_MAX_DIM) ||
        gr_shape_elems((gr_shape){net->c, net->h, net->w}) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_PARSE, "%s: network input %dx%dx%d is empty or too large", source,
                       net->c, net->h, net->w);
    if (!in_range(n, 1, GR_MAX_LAYERS))
        return gr_fail(GR_ERR_PARSE, "%s: %d layers (1..%d)", source, n, GR_MAX_LAYERS);
    net->layers = gr_calloc((size_t)n, sizeof *net->layers, "network layers");
    if (!net->layers)
        return GR_ERR_OUT_OF_MEMORY;
    net->n_layers = n;
    for (int i = 0; i < n && !r->short_read; i++)
        GR_TRY(read_layer(r, source, net, i));
    return GR_OK;
}

/* Each conv / connected layer's weight count within GR_MAX_TENSOR_ELEMS, as the parser bounds it
 * (so the layout arithmetic of models/weights.c cannot wrap). */
static gr_status check_weight_counts(const char *source, const gr_net *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (!gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
            continue;
        gr_shape in = gr_net_input_shape(net, i, 0);
        size_t fan_in = gr_shape_elems(in), n_weights = 0;
        int ok = 1;
        if (l->p.op == GR_OP_CONV)
            ok = l->p.groups > 0 && gr_mul_size((size_t)(in.c / l->p.groups),
                                                (size_t)l->p.size * (size_t)l->p.size, &fan_in);
        if (!ok || !gr_mul_size((size_t)l->p.filters, fan_in, &n_weights) ||
            n_weights > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_PARSE, "%s: layer %d has too many weights (more than %zu)",
                           source, i, (size_t)GR_MAX_TENSOR_ELEMS);
    }
    return GR_OK;
}

/* The weight block: exactly the count the layers imply, copied and attached, or lent by r's
 * buffer (gr_net_read's borrow_weights). */
static gr_status read_weights(gr_reader *r, const char *source, int borrow, gr_net *net)
{
    uint64_t stored = gr_reader_u64(r);
    if (r->short_read)
        return GR_OK;
    size_t need = 0;
    GR_TRY(check_weight_counts(source, net));
    GR_TRY(gr_net_param_floats(net, &need));
    if (stored == 0)
        return GR_OK; /* a network without weights (never saved by an engine, but valid) */
    if (stored != need)
        return gr_fail(GR_ERR_PARSE, "%s: %llu weights stored, the layers need %zu", source,
                       (unsigned long long)stored, need);
    size_t pad_len = weight_padding(r->pos);
    const uint8_t *pad = gr_reader_take(r, pad_len);
    for (size_t k = 0; pad && k < pad_len; k++)
        if (pad[k] != 0)
            return gr_fail(GR_ERR_PARSE, "%s: byte %zu of the padding before the weights is not "
                           "zero", source, k);
    const uint8_t *p = gr_reader_take(r, need * sizeof(float));
    if (!p)
        return GR_OK;
    if (borrow && (uintptr_t)p % _Alignof(float) == 0) {
        gr_net_attach_weights(net, (float *)(uintptr_t)p, need); /* read only, like the buffer */
        net->weights_borrowed = 1;
        return GR_OK;
    }
    float *block = gr_malloc(need ? need * sizeof(float) : 1, "network weights");
    if (!block)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(block, p, need * sizeof(float));
    gr_net_attach_weights(net, block, need);
    return GR_OK;
}

static gr_status read_names(gr_reader *r, const char *source, gr_net *net)
{
    net->synthetic = gr_reader_i32(r) != 0;
    net->nonfinite_weights = (size_t)gr_reader_u64(r);
    gr_reader_str(r, net->load_notice, sizeof net->load_notice);
    int n = gr_reader_i32(r);
    if (r->short_read || n == 0)
        return GR_OK;
    if (!in_range(n, 1, GR_MAX_DIM))
        return gr_fail(GR_ERR_PARSE, "%s: %d class names (1..%d)", source, n, GR_MAX_DIM);
    net->class_names = gr_calloc((size_t)n, sizeof(char *), "class names");
    if (!net->class_names)
        return GR_ERR_OUT_OF_MEMORY;
    net->n_class_names = n;
    char name[MAX_CLASS_NAME];
    for (int i = 0; i < n && !r->short_read; i++) {
        gr_reader_str(r, name, sizeof name);
        size_t len = strlen(name) + 1;
        net->class_names[i] = gr_malloc(len, "class name");
        if (!net->class_names[i])
            return GR_ERR_OUT_OF_MEMORY;
        memcpy(net->class_names[i], name, len);
    }
    return GR_OK;
}

static gr_status read_qdq(gr_reader *r, const char *source, gr_net *net)
{
    uint32_t has = gr_reader_u32(r);
    if (r->short_read || has == 0)
        return GR_OK;
    if (has != 1)
        return gr_fail(GR_ERR_PARSE, "%s: Q/DQ flag %u is neither 0 nor 1", source, has);
    gr_net_qdq *q = net->qdq = gr_net_qdq_new(net->n_layers);
    if (!q)
        return GR_ERR_OUT_OF_MEMORY;
    q->input_range = gr_reader_f32(r);
    if (!r->short_read && !(q->input_range >= 0.0f && isfinite(q->input_range)))
        return gr_fail(GR_ERR_PARSE, "%s: the input's Q/DQ range %g is not a finite value >= 0",
                       source, (double)q->input_range);
    q->n_ranges = q->input_range > 0.0f;
    for (int i = 0; i < net->n_layers && !r->short_read; i++) {
        const gr_layer *l = &net->layers[i];
        q->range[i] = gr_reader_f32(r);
        int n = gr_reader_i32(r);
        if (r->short_read)
            return GR_OK;
        if (!(q->range[i] >= 0.0f && isfinite(q->range[i])))
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: Q/DQ range %g is not a finite value >= 0",
                           source, i, (double)q->range[i]);
        q->n_ranges += q->range[i] > 0.0f;
        if (n == 0)
            continue;
        if (l->p.op != GR_OP_CONV || n != l->p.filters)
            return gr_fail(GR_ERR_PARSE, "%s: layer %d: %d int8 weight scales, and it is not a "
                           "convolution of as many filters", source, i, n);
        const uint8_t *p = gr_reader_take(r, (size_t)n * sizeof(float));
        if (!p)
            return GR_OK;
        q->wscale[i] = gr_malloc((size_t)n * sizeof(float), "Q/DQ weight scales");
        if (!q->wscale[i])
            return GR_ERR_OUT_OF_MEMORY;
        memcpy(q->wscale[i], p, (size_t)n * sizeof(float));
        q->n_wscale[i] = n;
        q->n_wscaled++;
        for (int c = 0; c < n; c++)
            if (!(q->wscale[i][c] > 0.0f && isfinite(q->wscale[i][c])))
                return gr_fail(GR_ERR_PARSE, "%s: layer %d: int8 weight scale %d is %g, not a "
                               "finite value > 0", source, i, c, (double)q->wscale[i][c]);
    }
    return GR_OK;
}

/* The head read from the record: it reads the layers the outputs name, in their order. */
static gr_status read_tail(gr_reader *r, const char *source, gr_net *net)
{
    size_t *elems = gr_malloc((size_t)net->n_layers * sizeof *elems, "layer sizes");
    if (!elems)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < net->n_layers; i++)
        elems[i] = gr_shape_elems(net->layers[i].out);
    gr_status st = gr_tail_read(r, source, elems, net->n_layers, &net->tail);
    free(elems);
    if (st != GR_OK)
        return st;
    bool same = gr_tail_input_count(net->tail) == net->n_outputs;
    for (int k = 0; same && k < net->n_outputs; k++)
        same = gr_tail_input_layer(net->tail, k) == net->output_layers[k];
    if (!same)
        return gr_fail(GR_ERR_PARSE, "%s: the detection head run on the host reads %d layers, "
                       "not the network's %d outputs in their order: file corrupt", source,
                       gr_tail_input_count(net->tail), net->n_outputs);
    return GR_OK;
}

/* The outputs (layers, backwards edges only), the head, the Q/DQ scales (format 5 on). */
static gr_status read_outputs(gr_reader *r, const char *source, gr_net *net)
{
    int n = gr_reader_i32(r);
    if (r->short_read)
        return GR_OK;
    if (!in_range(n, 0, GR_NET_MAX_OUTPUTS))
        return gr_fail(GR_ERR_PARSE, "%s: %d outputs (0..%d)", source, n, GR_NET_MAX_OUTPUTS);
    for (int k = 0; k < n && !r->short_read; k++) {
        net->output_layers[k] = gr_reader_i32(r);
        if (!r->short_read && !in_range(net->output_layers[k], 0, net->n_layers - 1))
            return gr_fail(GR_ERR_PARSE, "%s: output %d is layer %d (outside 0..%d)", source, k,
                           net->output_layers[k], net->n_layers - 1);
    }
    net->n_outputs = n;
    /* The outputs replace the heads of a network without region/yolo layers (gr_net_heads). */
    for (int i = 0; n > 0 && i < net->n_layers; i++)
        if (gr_op_has((int)net->layers[i].p.op, GR_OPF_HEAD))
            return gr_fail(GR_ERR_PARSE, "%s: %d outputs listed beside layer %d's region/yolo "
                           "head", source, n, i);
    uint32_t has_tail = gr_reader_u32(r);
    if (r->short_read)
        return GR_OK;
    if (has_tail > 1)
        return gr_fail(GR_ERR_PARSE, "%s: head flag %u is neither 0 nor 1", source, has_tail);
    if (has_tail)
        GR_TRY(read_tail(r, source, net));
    return read_qdq(r, source, net);
}

gr_status gr_net_read(gr_reader *r, const char *source, int borrow_weights, int with_outputs,
                      gr_net **out)
{
    *out = NULL;
    gr_net *net = gr_calloc(1, sizeof *net, "network");
    if (!net)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = read_layers(r, source, net);
    if (st == GR_OK)
        st = read_weights(r, source, borrow_weights, net);
    if (st == GR_OK)
        st = read_names(r, source, net);
    if (st == GR_OK && with_outputs)
        st = read_outputs(r, source, net);
    if (st == GR_OK && r->short_read)
        st = gr_fail(GR_ERR_PARSE, "%s: the network's record ends early (byte %zu of %zu)", source,
                     r->pos, r->len);
    if (st != GR_OK) {
        gr_net_free(net);
        return st;
    }
    *out = net;
    return GR_OK;
}
