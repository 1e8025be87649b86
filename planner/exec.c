/* CPU execution of a plan INSIDE its arena: one block of arena_bytes with the planned offsets,
 * in-place results and concat views, so a placement mistake shows up as wrong numbers. Values are
 * stored in their planned dtype and layout (f16 bits, int8, NHWC with zeroed padding channels).
 *
 * Conv is computed here with the precision emulation of plan.h's epilogue spec (int8 products
 * accumulated exactly in int32, f16 operands with f32 accumulation). Every other op gathers its
 * inputs into dense float NCHW scratch, runs the op's CPU reference (ops/), and stores the result
 * back: stored values for maxpool/upsample/reorg/route (exact for i8/f16), real values for the
 * rest. Scratch arrays are workspace, like a GEMM's, never activations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/activation.h"
#include "planner/passes.h"

struct gr_plan_exec {
    const gr_plan *plan;
    int private_buffers;
    uint8_t *arena;
    uint8_t **base;  /* per buffer */
    float **outputs; /* per plan output, dense NCHW */
    void (*hook)(const gr_plan_exec *, int, void *);
    void *hook_user;
};

#define GARBAGE_BYTE 0xA7 /* unwritten storage reads as a distinctive non-zero value */

gr_status gr_plan_exec_create(const gr_plan *plan, int private_buffers, gr_plan_exec **out)
{
    if (!plan || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_exec_create: NULL argument");
    *out = NULL;
    if (!plan->options.weight_data)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_exec_create: the plan was built without "
                       "its weights (weight_data = 0): it cannot run on the CPU");
    gr_plan_exec *ex = gr_calloc(1, sizeof *ex, "plan executor");
    if (!ex)
        return GR_ERR_OUT_OF_MEMORY;
    ex->plan = plan;
    ex->private_buffers = private_buffers;
    ex->base = gr_calloc((size_t)plan->n_buffers + 1, sizeof *ex->base, "buffer table");
    ex->outputs = gr_calloc((size_t)plan->n_outputs + 1, sizeof *ex->outputs, "output table");
    if (!ex->base || !ex->outputs)
        goto oom;
    if (!private_buffers) {
        ex->arena = gr_malloc(plan->arena_bytes, "plan arena");
        if (!ex->arena)
            goto oom;
        memset(ex->arena, GARBAGE_BYTE, plan->arena_bytes);
        for (int b = 0; b < plan->n_buffers; b++)
            ex->base[b] = ex->arena + plan->buffers[b].offset;
    } else {
        for (int b = 0; b < plan->n_buffers; b++) {
            ex->base[b] = gr_malloc(plan->buffers[b].bytes, "private buffer");
            if (!ex->base[b])
                goto oom;
            memset(ex->base[b], GARBAGE_BYTE, plan->buffers[b].bytes);
        }
    }
    for (int k = 0; k < plan->n_outputs; k++) {
        const gr_plan_tensor *t = &plan->tensors[plan->output_tensors[k]];
        ex->outputs[k] = gr_calloc((size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w,
                                   sizeof(float), "plan output");
        if (!ex->outputs[k])
            goto oom;
    }
    *out = ex;
    return GR_OK;
oom:
    gr_plan_exec_destroy(ex);
    return GR_ERR_OUT_OF_MEMORY;
}

void gr_plan_exec_destroy(gr_plan_exec *ex)
{
    if (!ex)
        return;
    if (ex->private_buffers && ex->base)
        for (int b = 0; b < ex->plan->n_buffers; b++)
            free(ex->base[b]);
    for (int k = 0; ex->outputs && k < ex->plan->n_outputs; k++)
        free(ex->outputs[k]);
    free(ex->outputs);
    free(ex->base);
    free(ex->arena);
    free(ex);
}

void gr_plan_exec_set_hook(gr_plan_exec *ex, void (*hook)(const gr_plan_exec *, int node, void *),
                           void *user)
{
    if (!ex)
        return;
    ex->hook = hook;
    ex->hook_user = user;
}

const float *gr_plan_exec_output(const gr_plan_exec *ex, int k)
{
    if (!ex || k < 0 || k >= ex->plan->n_outputs)
        return NULL;
    return ex->outputs[k];
}

gr_status gr_plan_exec_load_buffer(gr_plan_exec *ex, int buffer, const void *src, size_t bytes)
{
    if (!ex || !src || buffer < 0 || buffer >= ex->plan->n_buffers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_exec_load_buffer: bad argument");
    if (bytes > ex->plan->buffers[buffer].bytes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_exec_load_buffer: %zu bytes into buffer %d of %zu",
                       bytes, buffer, ex->plan->buffers[buffer].bytes);
    memcpy(ex->base[buffer], src, bytes);
    return GR_OK;
}

/* ---- element access ---------------------------------------------------------------------- */

static size_t element_index(const gr_plan_tensor *t, int n, int c, int y, int x)
{
    if (t->layout == GR_LAYOUT_NCHW)
        return (((size_t)n * (size_t)t->c_stride + (size_t)t->c_offset + (size_t)c) * (size_t)t->h +
                (size_t)y) *
                   (size_t)t->w +
               (size_t)x;
    return (((size_t)n * (size_t)t->h + (size_t)y) * (size_t)t->w + (size_t)x) *
               (size_t)t->c_stride +
           (size_t)t->c_offset + (size_t)c;
}

static float load_stored(const gr_plan_tensor *t, const uint8_t *base, size_t i)
{
    switch (t->dtype) {
    case GR_DTYPE_F32: {
        float v;
        memcpy(&v, base + i * 4, 4);
        return v;
    }
    case GR_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, base + i * 2, 2);
        return gr_f16_to_f32(h);
    }
    case GR_DTYPE_I8: return (float)(int8_t)base[i];
    case GR_DTYPE_U8: return (float)base[i];
    default: return 0.0f;
    }
}

/* v is already the stored value (integral for i8/u8, f16-representable or rounded here). */
static void store_stored(const gr_plan_tensor *t, uint8_t *base, size_t i, float v)
{
    switch (t->dtype) {
    case GR_DTYPE_F32: memcpy(base + i * 4, &v, 4); break;
    case GR_DTYPE_F16: {
        uint16_t h = gr_f32_to_f16(v);
        memcpy(base + i * 2, &h, 2);
        break;
    }
    case GR_DTYPE_I8: base[i] = (uint8_t)(int8_t)v; break;
    case GR_DTYPE_U8: base[i] = (uint8_t)v; break;
    default: break;
    }
}

static float real_value(const gr_plan_tensor *t, float stored)
{
    if (t->dtype == GR_DTYPE_I8)
        return stored * t->scale;
    if (t->dtype == GR_DTYPE_U8)
        return stored / 255.0f;
    return stored;
}

/* NaN becomes 0, as the GPU's round-to-int of NaN does (and a float-to-int8 cast of NaN would be
 * undefined behaviour). */
static float clamp_q(float r)
{
    if (isnan(r))
        return 0.0f;
    return r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
}

/* The epilogue's output conversion: y (real) -> stored value of tensor t. */
static float requantize(const gr_plan_tensor *t, float y, float inv_scale)
{
    if (t->dtype == GR_DTYPE_I8)
        return clamp_q(rintf(y * inv_scale));
    if (t->dtype == GR_DTYPE_F16)
        return gr_round_f16(y);
    return y;
}

/* The quantize node's u8 conversions (plan.h), for a conv with GR_FUSED_QUANTIZE_IN: the same
 * float operations, so fusing changes no bit. */
static float quantize_u8(float v, gr_dtype to, float scale)
{
    if (to == GR_DTYPE_I8)
        return clamp_q(rintf((v / 255.0f) / scale));
    return gr_round_f16(v / 255.0f);
}

static uint8_t *tensor_base(const gr_plan_exec *ex, const gr_plan_tensor *t)
{
    return ex->base[t->buffer];
}

/* Dense NCHW copy of images [n0, n0 + count) of tensor t, stored or real values. */
static void gather(const gr_plan_exec *ex, int tensor, int n0, int count, int real, float *dst)
{
    const gr_plan_tensor *t = &ex->plan->tensors[tensor];
    const uint8_t *base = tensor_base(ex, t);
    size_t k = 0;
    for (int n = n0; n < n0 + count; n++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++) {
                    float v = load_stored(t, base, element_index(t, n, c, y, x));
                    dst[k++] = real ? real_value(t, v) : v;
                }
}

/* Store dense NCHW stored values into images [n0, n0 + count) of tensor t; zero the padding. */
static void scatter(const gr_plan_exec *ex, int tensor, int n0, int count, const float *src)
{
    const gr_plan_tensor *t = &ex->plan->tensors[tensor];
    uint8_t *base = tensor_base(ex, t);
    size_t k = 0;
    for (int n = n0; n < n0 + count; n++)
        for (int c = 0; c < t->c; c++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++)
                    store_stored(t, base, element_index(t, n, c, y, x), src[k++]);
    if (t->layout == GR_LAYOUT_NHWC)
        for (int n = n0; n < n0 + count; n++)
            for (int y = 0; y < t->h; y++)
                for (int x = 0; x < t->w; x++)
                    for (int c = t->c; c < t->c_pad; c++)
                        store_stored(t, base, element_index(t, n, c, y, x), 0.0f);
}

static size_t image_elems(const gr_plan_tensor *t)
{
    return (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

static gr_shape tensor_shape(const gr_plan_tensor *t)
{
    gr_shape s = {t->c, t->h, t->w};
    return s;
}

/* Activation of the f16/int8 epilogues: the GPU kernels' own definition (ops/activation.h,
 * float constants, expf), so the emulation is the kernels' arithmetic. fp32 uses gr_activate,
 * Darknet's CPU code (double 0.1 and exp), so it equals the references. */
static float epilogue_activate(float y, gr_activation a) { return gr_act_epilogue(y, a); }

static float activate_for(gr_dtype compute, float y, gr_activation a)
{
    return compute == GR_DTYPE_F32 ? gr_activate(y, a) : epilogue_activate(y, a);
}

/* ---- convolution ------------------------------------------------------------------------- */

/* Outputs o in [lo, hi) read input o*stride + offset inside [0, in_n). */
static void tap_range(int out_n, int in_n, int stride, int offset, int *lo, int *hi)
{
    int first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int last_in = in_n - 1 - offset;
    int end = last_in < 0 ? 0 : last_in / stride + 1;
    if (end > out_n)
        end = out_n;
    if (first > end)
        first = end;
    *lo = first;
    *hi = end;
}

typedef struct conv_geometry {
    int in_c, in_h, in_w, out_c, out_h, out_w; /* conv output (before a fused maxpool) */
    int k, stride_x, pad, groups;
    int stride_y, dilation; /* ops/ops.h: gr_conv_stride_y, gr_conv_dilation */
} conv_geometry;

/* Float accumulation in Darknet's order per output: input channel, then ky, then kx. */
static void conv_accumulate_f32(const conv_geometry *g, const float *in, const float *w, float *acc)
{
    int in_per_group = g->in_c / g->groups, out_per_group = g->out_c / g->groups;
    size_t out_plane = (size_t)g->out_h * (size_t)g->out_w, in_plane = (size_t)g->in_h * g->in_w;
    for (int oc = 0; oc < g->out_c; oc++) {
        float *plane = acc + (size_t)oc * out_plane;
        memset(plane, 0, out_plane * sizeof *plane);
        int group = oc / out_per_group;
        for (int ic = 0; ic < in_per_group; ic++) {
            const float *src = in + (size_t)(group * in_per_group + ic) * in_plane;
            const float *kernel =
                w + ((size_t)oc * (size_t)in_per_group + (size_t)ic) * g->k * g->k;
            for (int ky = 0; ky < g->k; ky++)
                for (int kx = 0; kx < g->k; kx++) {
                    float weight = kernel[ky * g->k + kx];
                    int dy = (ky - g->pad) * g->dilation, dx = (kx - g->pad) * g->dilation;
                    int y0, y1, x0, x1;
                    tap_range(g->out_h, g->in_h, g->stride_y, dy, &y0, &y1);
                    tap_range(g->out_w, g->in_w, g->stride_x, dx, &x0, &x1);
                    for (int oy = y0; oy < y1; oy++) {
                        float *restrict row = plane + (size_t)oy * g->out_w;
                        const float *restrict in_row =
                            src + (size_t)(oy * g->stride_y + dy) * g->in_w;
                        for (int ox = x0; ox < x1; ox++)
                            row[ox] += weight * in_row[ox * g->stride_x + dx];
                    }
                }
        }
    }
}

/* Exact integer accumulation of int8 products. */
static void conv_accumulate_i8(const conv_geometry *g, const int16_t *in, const int8_t *w,
                               int32_t *acc)
{
    int in_per_group = g->in_c / g->groups, out_per_group = g->out_c / g->groups;
    size_t out_plane = (size_t)g->out_h * (size_t)g->out_w, in_plane = (size_t)g->in_h * g->in_w;
    for (int oc = 0; oc < g->out_c; oc++) {
        int32_t *plane = acc + (size_t)oc * out_plane;
        memset(plane, 0, out_plane * sizeof *plane);
        int group = oc / out_per_group;
        for (int ic = 0; ic < in_per_group; ic++) {
            const int16_t *src = in + (size_t)(group * in_per_group + ic) * in_plane;
            const int8_t *kernel =
                w + ((size_t)oc * (size_t)in_per_group + (size_t)ic) * g->k * g->k;
            for (int ky = 0; ky < g->k; ky++)
                for (int kx = 0; kx < g->k; kx++) {
                    int32_t weight = kernel[ky * g->k + kx];
                    int dy = (ky - g->pad) * g->dilation, dx = (kx - g->pad) * g->dilation;
                    int y0, y1, x0, x1;
                    tap_range(g->out_h, g->in_h, g->stride_y, dy, &y0, &y1);
                    tap_range(g->out_w, g->in_w, g->stride_x, dx, &x0, &x1);
                    for (int oy = y0; oy < y1; oy++) {
                        int32_t *restrict row = plane + (size_t)oy * g->out_w;
                        const int16_t *restrict in_row =
                            src + (size_t)(oy * g->stride_y + dy) * g->in_w;
                        for (int ox = x0; ox < x1; ox++)
                            row[ox] += weight * (int32_t)in_row[ox * g->stride_x + dx];
                    }
                }
        }
    }
}

static gr_status run_conv(gr_plan_exec *ex, const gr_plan_node *nd)
{
    const gr_plan *plan = ex->plan;
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    conv_geometry g = {x->c,
                       x->h,
                       x->w,
                       nd->p.filters,
                       0,
                       0,
                       nd->p.size,
                       nd->p.stride,
                       nd->p.pad,
                       nd->p.groups > 0 ? nd->p.groups : 1,
                       gr_conv_stride_y(&nd->p),
                       gr_conv_dilation(&nd->p)};
    g.out_h = (g.in_h + 2 * g.pad - g.k) / g.stride_y + 1;
    g.out_w = (g.in_w + 2 * g.pad - g.k) / g.stride_x + 1;
    size_t in_elems = image_elems(x);
    size_t conv_elems = (size_t)g.out_c * (size_t)g.out_h * (size_t)g.out_w;
    size_t out_plane = (size_t)g.out_h * (size_t)g.out_w;
    /* With GR_FUSED_QUANTIZE_IN x is the u8 input and the conv quantizes it as it loads. */
    int quantize_in = (nd->fused & GR_FUSED_QUANTIZE_IN) != 0;
    gr_dtype compute = gr_plan_conv_in_dtype(plan, nd);
    float s_in = gr_plan_conv_in_scale(plan, nd);
    int is_i8 = compute == GR_DTYPE_I8;
    int is_f16 = compute == GR_DTYPE_F16;

    float *in = gr_malloc(in_elems * sizeof *in, "conv input scratch");
    float *act = gr_malloc(conv_elems * sizeof *act, "conv output scratch");
    float *pooled = gr_malloc(image_elems(y) * sizeof *pooled, "conv pool scratch");
    int16_t *in_q = is_i8 ? gr_malloc(in_elems * sizeof *in_q, "conv int8 input") : NULL;
    int32_t *acc_q =
        is_i8 ? gr_malloc(conv_elems * sizeof *acc_q, "conv int32 accumulators") : NULL;
    float *w16 = is_f16 ? gr_malloc(nd->n_w * sizeof *w16, "conv f16 weights") : NULL;
    gr_status st = GR_OK;
    if (!in || !act || !pooled || (is_i8 && (!in_q || !acc_q)) || (is_f16 && !w16)) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    const float *w = plan->weights + nd->w_offset;
    const float *bias = plan->weights + nd->b_offset;
    const float *bn = nd->p.batch_normalize ? plan->weights + nd->bn_offset : NULL;
    if (is_f16) {
        for (size_t k = 0; k < nd->n_w; k++)
            w16[k] = gr_round_f16(w[k]);
        w = w16;
    }
    const float *w_scale = plan->weights + nd->ws_offset;
    float inv_out = y->dtype == GR_DTYPE_I8 ? 1.0f / y->scale : 1.0f;

    for (int n = 0; n < x->n; n++) {
        gather(ex, nd->inputs[0], n, 1, 0, in);
        for (size_t k = 0; quantize_in && k < in_elems; k++)
            in[k] = quantize_u8(in[k], compute, s_in);
        if (is_i8) {
            for (size_t k = 0; k < in_elems; k++)
                in_q[k] = (int16_t)in[k];
            conv_accumulate_i8(&g, in_q, plan->qweights + nd->qw_offset, acc_q);
        } else {
            conv_accumulate_f32(&g, in, w, act);
        }
        for (int oc = 0; oc < g.out_c; oc++) {
            float m = is_i8 ? s_in * w_scale[oc] : 1.0f;
            float *plane = act + (size_t)oc * out_plane;
            const int32_t *qplane = is_i8 ? acc_q + (size_t)oc * out_plane : NULL;
            for (size_t i = 0; i < out_plane; i++) {
                float v;
                if (bn) {
                    /* Unfolded batch norm, exactly as Darknet (and the conv reference). */
                    float raw = is_i8 ? (float)qplane[i] * m : plane[i];
                    double denom = gr_bn_denominator(nd->p.alexeyab, bn[2 * g.out_c + oc]);
                    float normalized = (float)((double)(raw - bn[g.out_c + oc]) / denom);
                    v = normalized * bn[oc] + bias[oc];
                } else if (is_i8) {
                    v = fmaf((float)qplane[i], m, bias[oc]);
                } else {
                    v = plane[i] + bias[oc];
                }
                plane[i] = activate_for(compute, v, nd->p.activation);
            }
        }
        const float *result = act;
        if (nd->fused & GR_FUSED_MAXPOOL) {
            gr_op_params pool;
            gr_op_params_default(GR_OP_MAXPOOL, &pool);
            pool.size = nd->pool_size;
            pool.stride = nd->pool_stride;
            pool.pad = nd->pool_pad;
            gr_shape conv_shape = {g.out_c, g.out_h, g.out_w};
            const float *pool_in[1] = {act};
            gr_op_ref(&pool, NULL, pool_in, &conv_shape, 1, pooled, tensor_shape(y), 1);
            result = pooled;
        }
        size_t out_elems = image_elems(y);
        for (size_t i = 0; i < out_elems; i++)
            pooled[i] = requantize(y, result[i], inv_out);
        scatter(ex, nd->output, n, 1, pooled);
    }
done:
    free(in);
    free(act);
    free(pooled);
    free(in_q);
    free(acc_q);
    free(w16);
    return st;
}

/* ---- conversions ------------------------------------------------------------------------- */

static gr_status run_conversion(gr_plan_exec *ex, const gr_plan_node *nd)
{
    const gr_plan_tensor *x = &ex->plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &ex->plan->tensors[nd->output];
    size_t count = (size_t)x->n * image_elems(x);
    float *v = gr_malloc(count * sizeof *v, "conversion scratch");
    if (!v)
        return GR_ERR_OUT_OF_MEMORY;
    gather(ex, nd->inputs[0], 0, x->n, 1, v);
    for (size_t i = 0; i < count; i++) {
        if (y->dtype == GR_DTYPE_I8)
            v[i] = clamp_q(rintf(v[i] / y->scale));
        else if (y->dtype == GR_DTYPE_F16)
            v[i] = gr_round_f16(v[i]);
    }
    scatter(ex, nd->output, 0, x->n, v);
    free(v);
    return GR_OK;
}

/* ---- everything else: the op reference on dense float copies ----------------------------- */

static gr_status run_reference(gr_plan_exec *ex, const gr_plan_node *nd)
{
    const gr_plan *plan = ex->plan;
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    int batch = y->n;
    float *in[GR_MAX_INPUTS] = {0};
    const float *in_const[GR_MAX_INPUTS];
    gr_shape shapes[GR_MAX_INPUTS];
    int stored = gr_op_has(nd->kind, GR_OPF_STORED_VALUES);
    gr_status st = GR_OK;
    size_t out_count = (size_t)batch * image_elems(y);
    float *out = gr_malloc(out_count * sizeof *out, "op output scratch");
    if (!out)
        return GR_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < nd->n_inputs; k++) {
        const gr_plan_tensor *x = &plan->tensors[nd->inputs[k]];
        in[k] = gr_malloc((size_t)x->n * image_elems(x) * sizeof(float), "op input scratch");
        if (!in[k]) {
            st = GR_ERR_OUT_OF_MEMORY;
            goto done;
        }
        gather(ex, nd->inputs[k], 0, x->n, !stored, in[k]);
        in_const[k] = in[k];
        shapes[k] = tensor_shape(x);
    }
    /* Shortcut in f16/i8: the reference adds (linear), then the activation in f32 before the
     * rounding to the tensor's type - Darknet's CPU formulas (gr_activate: leaky with a double
     * .1), as the GPU's shortcut kernel (kernels/data.cu) applies them, not the conv epilogues'
     * float ones (leaky 0.1f differs in the last bit for some inputs). */
    gr_op_params params = nd->p;
    int low_precision_act = nd->kind == GR_OP_SHORTCUT && y->dtype != GR_DTYPE_F32;
    if (low_precision_act)
        params.activation = GR_ACT_LINEAR;
    gr_weights w;
    memset(&w, 0, sizeof w);
    if (gr_op_has(nd->kind, GR_OPF_WEIGHTS)) {
        w.n = nd->p.filters;
        w.biases = plan->weights + nd->b_offset;
        w.weights = plan->weights + nd->w_offset;
        w.n_weights = nd->n_w;
    }
    gr_op_ref(&params, &w, in_const, shapes, nd->n_inputs, out, tensor_shape(y), batch);
    if (!stored) {
        float inv = y->dtype == GR_DTYPE_I8 ? 1.0f / y->scale : 1.0f;
        for (size_t i = 0; i < out_count; i++) {
            float v = low_precision_act ? gr_activate(out[i], nd->p.activation) : out[i];
            out[i] = requantize(y, v, inv);
        }
    }
    scatter(ex, nd->output, 0, batch, out);
done:
    for (int k = 0; k < nd->n_inputs; k++)
        free(in[k]);
    free(out);
    return st;
}

/* ---- the run ----------------------------------------------------------------------------- */

gr_status gr_plan_execute(gr_plan_exec *ex, const void *input)
{
    if (!ex || !input)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_execute: NULL argument");
    const gr_plan *plan = ex->plan;
    if (!plan->scales_ready)
        return gr_fail(GR_ERR_STATE,
                       "gr_plan_execute: the plan has int8 tensors without scales (calibrate or "
                       "call gr_plan_set_ranges first)");
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        gr_status st = GR_OK;
        if (nd->noop) {
            /* Its inputs were written into its slices. */
        } else if (nd->kind == GR_NODE_INPUT) {
            const gr_plan_tensor *t = &plan->tensors[nd->output];
            memcpy(tensor_base(ex, t), input, t->bytes);
        } else if (nd->kind == GR_NODE_OUTPUT) {
            const gr_plan_tensor *t = &plan->tensors[nd->inputs[0]];
            for (int k = 0; k < plan->n_outputs; k++)
                if (plan->output_tensors[k] == nd->inputs[0])
                    gather(ex, nd->inputs[0], 0, t->n, 1, ex->outputs[k]);
        } else if (nd->kind == GR_OP_CONV) {
            st = run_conv(ex, nd);
        } else if (gr_op_has(nd->kind, GR_OPF_CONVERSION) || nd->kind == GR_NODE_CONVERT) {
            st = run_conversion(ex, nd);
        } else {
            st = run_reference(ex, nd);
        }
        if (st != GR_OK)
            return gr_fail_prefix(st, "plan node %d (%s, layer %d): ", i,
                                  gr_plan_kind_name(nd->kind), nd->layer);
        if (ex->hook)
            ex->hook(ex, i, ex->hook_user);
    }
    return GR_OK;
}

gr_status gr_plan_exec_read_tensor(const gr_plan_exec *ex, int tensor, float *dst)
{
    if (!ex || !dst || tensor < 0 || tensor >= ex->plan->n_tensors)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_exec_read_tensor: bad argument");
    gather(ex, tensor, 0, ex->plan->tensors[tensor].n, 1, dst);
    return GR_OK;
}
