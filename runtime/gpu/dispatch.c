/* From plan to launches: where each tensor lives on the device, which launcher runs each plan
 * node (the launchers pick the kernel for the node's dtype, kernels/misc.h), and the forward pass
 * on the plan's streams with its fork, cross-stream events and join. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/misc.h"
#include "runtime/gpu/backend.h"
#include "runtime/trace.h"

/* ---- addresses -------------------------------------------------------------------------- */

static int output_index(const gr_plan *plan, int tensor)
{
    for (int k = 0; k < plan->n_outputs; k++)
        if (plan->output_tensors[k] == tensor)
            return k;
    return -1;
}

/* The network input and the outputs live in the io block (slice j of a micro-batched run: its
 * images' part of each, batch being the outermost dimension), everything else in the arena. */
uint8_t *gr_gpu_tensor_storage(const gpu_variant *v, const gpu_instance *inst, int tensor)
{
    const gr_plan *plan = v->plan;
    const gr_plan_tensor *t = &plan->tensors[tensor];
    int root = t->view_of >= 0 ? t->view_of : tensor;
    const size_t slice = (size_t)inst->slice;
    if (root == plan->input_tensor)
        return inst->io + slice * v->slice_in_bytes;
    int k = output_index(plan, root);
    if (k >= 0)
        return inst->io + v->in_bytes + v->out_offset[k] + slice * v->slice_out_bytes[k];
    return inst->arena + plan->buffers[t->buffer].offset;
}

static gr_kview kview(const gr_plan_tensor *t)
{
    gr_kview kv = {t->n, t->c, t->h, t->w, t->c_stride, t->c_offset};
    return kv;
}

/* ---- convolution -------------------------------------------------------------------------- */

/* An fp32 conv's (or [connected]'s) cuBLAS-path arguments, its algorithm left unset: NCHW; a
 * channel slice with batch > 1 is not contiguous, so one image at a time, each a contiguous
 * block; groups: one conv per group on its slices. */
static void f32_conv_args(const gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                          int index, gpu_conv *c)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const gpu_conv_weights *w = v->nw ? &v->nw[index] : NULL;
    const int connected = nd->kind == GR_OP_CONNECTED;
    const int pool = (nd->fused & GR_FUSED_MAXPOOL) != 0;
    const int groups = !connected && nd->p.groups > 1 ? nd->p.groups : 1;
    const int per_image = x->n > 1 && (x->c_stride != x->c || y->c_stride != y->c || groups > 1);
    c->images = per_image ? x->n : 1;
    c->x_image = (size_t)x->c_stride * x->h * x->w;
    c->y_image = (size_t)y->c_stride * y->h * y->w;
    c->groups = groups;
    c->x_group = (size_t)(x->c / groups) * x->h * x->w;
    c->y_group = (size_t)(y->c / groups) * y->h * y->w;
    c->w_group = (size_t)(y->c / groups) * (x->c / groups) * nd->p.size * nd->p.size;
    c->b_group = (size_t)(y->c / groups);
    c->f32 = (gr_conv_f32_args){
        .batch = per_image ? 1 : x->n,
        /* [connected] is a 1x1 conv on the flattened image: W [outputs][c*h*w] is the conv's
         * [out_c][in_c][1][1], and an image's c*h*w values are contiguous in NCHW. */
        .in_c = connected ? x->c * x->h * x->w : x->c / groups, .in_h = connected ? 1 : x->h,
        .in_w = connected ? 1 : x->w, .out_c = y->c / groups,
        .ksize = connected ? 1 : nd->p.size, .stride = connected ? 1 : nd->p.stride,
        .pad = connected ? 0 : nd->p.pad,
        .in = inst ? (const float *)gr_gpu_tensor_storage(v, inst, nd->inputs[0]) +
                         (size_t)x->c_offset * x->h * x->w
                   : NULL,
        .weights = w ? w->weights : NULL, .bias = w ? w->bias : NULL,
        .out = inst ? (float *)gr_gpu_tensor_storage(v, inst, nd->output) +
                          (size_t)y->c_offset * y->h * y->w
                    : NULL,
        .workspace = inst ? inst->im2col[nd->stream] : NULL, .activation = (int)nd->p.activation,
        .tf32 = g->tf32, .pool_size = pool ? nd->pool_size : 0,
        .pool_stride = pool ? nd->pool_stride : 0, .pool_pad = pool ? nd->pool_pad : 0};
}

/* May the 3xTF32 GEMM split K? `automatic`: the algorithm is AUTO's (or DIRECT3X3's rule for
 * the convs the direct kernel does not take). AUTO splits only with one run in flight: with
 * several, the other runs' kernels fill the SMs a last wave leaves idle (docs/performance.md). */
int gr_gpu_f32_split_allowed(const gpu_state *g, const gpu_variant *v, int automatic)
{
    if (g->f32_split_k == GR_TOGGLE_OFF)
        return 0;
    return g->f32_split_k == GR_TOGGLE_ON || (automatic && v->n_inst == 1);
}

void gr_gpu_f32_rule(const gpu_state *g, const gpu_variant *v, int connected, long long columns,
                     gr_conv_f32_args *a)
{
    const gr_f32_algo want = g->f32_algo;
    a->splits = 0;
    /* the direct 3x3 kernel where it is preferred (the narrow early layers) or forced */
    if (!connected && gr_conv_f32_direct3x3_fits(a) &&
        (want == GR_F32_ALGO_DIRECT3X3 ||
         (want == GR_F32_ALGO_AUTO && gr_conv_f32_direct3x3_preferred(a)))) {
        a->algo = GR_CONV_F32_DIRECT3X3;
        return;
    }
    if (!g->f32_tensor_cores || want == GR_F32_ALGO_SGEMM)
        a->algo = GR_CONV_F32_SGEMM;
    else
        a->algo = want == GR_F32_ALGO_TF32X3_IMPLICIT ? GR_CONV_F32_TF32X3_IMPLICIT
                                                      : GR_CONV_F32_TF32X3;
    const int automatic = want == GR_F32_ALGO_AUTO || want == GR_F32_ALGO_DIRECT3X3;
    if (a->algo != GR_CONV_F32_TF32X3 || columns > INT_MAX)
        return;
    /* 3xTF32 where its grid fills the SMs once; SGEMM (which splits K itself) below that */
    if (automatic && gr_gemm_tf32x3_blocks(a->out_c, (int)columns, g->sm_count) < g->sm_count) {
        a->algo = GR_CONV_F32_SGEMM;
        return;
    }
    if (gr_gpu_f32_split_allowed(g, v, automatic))
        a->splits = gr_gemm_tf32x3_auto_splits(a->out_c, a->in_c * a->ksize * a->ksize,
                                               (int)columns, g->sm_count);
}

int gr_gpu_conv_direct(const gr_plan *plan, const gr_plan_node *nd)
{
    if (nd->kind != GR_OP_CONV)
        return 0;
    const int groups = nd->p.groups > 1 ? nd->p.groups : 1;
    if (gr_conv_dilation(&nd->p) > 1 || gr_conv_stride_y(&nd->p) != nd->p.stride)
        return 1;
    if (gr_plan_conv_in_dtype(plan, nd) != GR_DTYPE_F32)
        return groups > 1;
    return groups > 1 && plan->tensors[nd->inputs[0]].c / groups <= 8;
}

static void f32_direct_args(const gr_conv_f32_args *f, const gr_plan_node *nd,
                            const gr_plan_tensor *x, const gr_plan_tensor *y,
                            gr_conv_direct_f32_args *d)
{
    *d = (gr_conv_direct_f32_args){
        .batch = x->n, .in_c = x->c, .in_h = x->h, .in_w = x->w,
        .out_c = y->c, .out_h = y->h, .out_w = y->w,
        .ksize = nd->p.size, .stride_x = nd->p.stride, .stride_y = gr_conv_stride_y(&nd->p),
        .pad = nd->p.pad, .dilation = gr_conv_dilation(&nd->p),
        .groups = nd->p.groups > 1 ? nd->p.groups : 1,
        .in_image_stride = (size_t)x->c_stride * x->h * x->w,
        .out_image_stride = (size_t)y->c_stride * y->h * y->w,
        .in = f->in, .weights = f->weights, .bias = f->bias, .out = f->out,
        .activation = f->activation};
}

/* The fp32 path: arguments, then the algorithm (measured, else the rule). Only the direct 3x3
 * kernel pools. */
static gr_status f32_conv(const gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                          int index, gpu_conv *c)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const unsigned fusions = GR_FUSED_MAXPOOL | GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT;
    if (y->dtype != GR_DTYPE_F32 || (nd->fused & fusions & ~(unsigned)GR_FUSED_MAXPOOL))
        return gr_gpu_unsupported(plan, index);
    f32_conv_args(g, v, inst, index, c);
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    if (gr_gpu_conv_direct(plan, nd)) {
        if (c->f32.pool_size)
            return gr_gpu_unsupported_because(plan, index, "no fused maxpool in the direct kernel");
        c->direct = 1;
        f32_direct_args(&c->f32, nd, x, y, &c->direct_args);
        return GR_OK;
    }
    const gpu_tactic *t = v->tactic ? &v->tactic[index] : NULL;
    if (t && t->f32_measured) {
        c->f32.algo = t->f32_algo;
        c->f32.splits = t->f32_splits;
    } else {
        gr_gpu_f32_rule(g, v, nd->kind == GR_OP_CONNECTED,
                        (long long)c->f32.batch * y->h * y->w, &c->f32);
    }
    if (c->f32.pool_size && c->f32.algo != GR_CONV_F32_DIRECT3X3)
        return gr_gpu_unsupported(plan, index);
    return GR_OK;
}

/* Where an fp16 / int8 conv writes: f32 NCHW with the dequantization fused (its channel slice of
 * the tensor's storage through out_c_stride / out_c_offset, kernels/conv.h: a concat's slice is
 * strided at batch > 1), else its dtype, NHWC. */
static gr_status tc_out_kind(const gr_plan *plan, int index, gr_conv_out_kind *kind)
{
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    if (nd->fused & GR_FUSED_DEQUANT_OUT) {
        if (y->dtype != GR_DTYPE_F32 || y->layout != GR_LAYOUT_NCHW)
            return gr_gpu_unsupported(plan, index);
        *kind = GR_CONV_OUT_F32_NCHW;
    } else if (y->dtype == GR_DTYPE_I8) {
        *kind = GR_CONV_OUT_I8;
    } else if (y->dtype == GR_DTYPE_F16) {
        *kind = GR_CONV_OUT_F16;
    } else {
        return gr_gpu_unsupported(plan, index);
    }
    return GR_OK;
}

/* The fp16 / int8 path: the tensor-core kernels with the node's tactic. */
static gr_status tc_conv(const gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                         int index, gr_dtype compute, gpu_conv *c)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const gpu_conv_weights *w = v->nw ? &v->nw[index] : NULL;
    gr_conv_out_kind out_kind = GR_CONV_OUT_I8;
    GR_TRY(tc_out_kind(plan, index, &out_kind));
    const int in_u8 = (nd->fused & GR_FUSED_QUANTIZE_IN) != 0;
    if ((compute != GR_DTYPE_I8 && compute != GR_DTYPE_F16) || (in_u8 && x->dtype != GR_DTYPE_U8))
        return gr_gpu_unsupported(plan, index);
    const int pooled = (nd->fused & GR_FUSED_MAXPOOL) != 0;
    c->tensor_cores = 1;
    c->is_i8 = compute == GR_DTYPE_I8;
    c->tc = (gr_conv_args){
        .batch = x->n, .in_h = x->h, .in_w = x->w, .in_c = x->c,
        .in_c_stride = x->c_stride, .in_c_offset = x->c_offset,
        .out_c = y->c, .out_c_stride = y->c_stride, .out_c_offset = y->c_offset,
        .ksize = nd->p.size, .stride = nd->p.stride, .pad = nd->p.pad,
        .in = inst ? gr_gpu_tensor_storage(v, inst, nd->inputs[0]) : NULL,
        .weights = w ? w->weights : NULL, .mul = w ? w->mul : NULL, .bias = w ? w->bias : NULL,
        .out = inst ? gr_gpu_tensor_storage(v, inst, nd->output) : NULL,
        .activation = (int)nd->p.activation, .out_kind = out_kind,
        .out_inv_scale = y->dtype == GR_DTYPE_I8 ? 1.0f / y->scale : 1.0f,
        .fp16_accumulate = compute == GR_DTYPE_F16 && g->fp16_accumulate,
        /* the tactic search's choice (runtime/gpu/tactic.c); 0/0 = the kernels' own */
        .tile_config = v->tactic ? v->tactic[index].tile : 0,
        .split_k = v->tactic ? v->tactic[index].split : 0,
        .pool_size = pooled ? nd->pool_size : 0, .pool_stride = pooled ? nd->pool_stride : 0,
        .pool_pad = pooled ? nd->pool_pad : 0,
        .in_u8 = in_u8, .in_scale = in_u8 ? nd->in_scale : 0.0f,
        .pdl = v->pdl ? v->pdl[index] : 0};
    return GR_OK;
}

/* The fp16 / int8 direct path (grouped, dilated, stride_x != stride_y): the planner's NHWC
 * tensors as they are, the input quantize and the output dequantize fused as in tc_conv; a fused
 * maxpool is refused (the engine then plans the layer without it). */
static gr_status nhwc_direct_conv(const gpu_variant *v, const gpu_instance *inst, int index,
                                  gr_dtype compute, gpu_conv *c)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const gpu_conv_weights *w = v->nw ? &v->nw[index] : NULL;
    gr_conv_out_kind out_kind = GR_CONV_OUT_I8;
    GR_TRY(tc_out_kind(plan, index, &out_kind));
    const int in_u8 = (nd->fused & GR_FUSED_QUANTIZE_IN) != 0;
    if ((compute != GR_DTYPE_I8 && compute != GR_DTYPE_F16) || (in_u8 && x->dtype != GR_DTYPE_U8) ||
        (!in_u8 && x->dtype != compute))
        return gr_gpu_unsupported(plan, index);
    if (nd->fused & GR_FUSED_MAXPOOL)
        return gr_gpu_unsupported_because(plan, index, "no fused maxpool in the direct kernel");
    c->direct = c->direct_nhwc = 1;
    c->is_i8 = compute == GR_DTYPE_I8;
    c->nhwc_args = (gr_conv_direct_nhwc_args){
        .batch = x->n, .in_c = x->c, .in_h = x->h, .in_w = x->w,
        .in_c_stride = x->c_stride, .in_c_offset = x->c_offset,
        .out_c = y->c, .out_h = y->h, .out_w = y->w,
        .out_c_stride = y->c_stride, .out_c_offset = y->c_offset,
        .ksize = nd->p.size, .stride_x = nd->p.stride, .stride_y = gr_conv_stride_y(&nd->p),
        .pad = nd->p.pad, .dilation = gr_conv_dilation(&nd->p),
        .groups = nd->p.groups > 1 ? nd->p.groups : 1,
        .in = inst ? gr_gpu_tensor_storage(v, inst, nd->inputs[0]) : NULL,
        .weights = w ? w->weights : NULL, .mul = w ? w->mul : NULL, .bias = w ? w->bias : NULL,
        .out = inst ? gr_gpu_tensor_storage(v, inst, nd->output) : NULL,
        .activation = (int)nd->p.activation, .out_kind = (int)out_kind,
        .out_inv_scale = y->dtype == GR_DTYPE_I8 ? 1.0f / y->scale : 1.0f,
        .in_u8 = in_u8, .in_scale = in_u8 ? nd->in_scale : 0.0f};
    return GR_OK;
}

gr_status gr_gpu_conv_args(const gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                           int index, gpu_conv *c)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    memset(c, 0, sizeof *c);
    const gr_dtype compute = gr_plan_conv_in_dtype(plan, nd);
    if (compute == GR_DTYPE_F32)
        return f32_conv(g, v, inst, index, c);
    if (nd->kind == GR_OP_CONNECTED)
        return gr_gpu_unsupported(plan, index);
    if (gr_gpu_conv_direct(plan, nd))
        return nhwc_direct_conv(v, inst, index, compute, c);
    return tc_conv(g, v, inst, index, compute, c);
}

gr_status gr_gpu_plan_check(const gpu_state *g, const gpu_variant *v, int *bad_node)
{
    const gr_plan *plan = v->plan;
    *bad_node = -1;
    for (int i = 0; i < plan->n_nodes; i++) {
        if (plan->nodes[i].kind != GR_OP_CONV || !gr_gpu_node_launches(&plan->nodes[i]))
            continue;
        *bad_node = i;
        gpu_conv c;
        GR_TRY(gr_gpu_conv_args(g, v, NULL, i, &c));
        if (c.tensor_cores)
            GR_TRY(gr_gpu_launch_status(gr_conv_check(&c.tc, c.is_i8), plan, i));
    }
    *bad_node = -1;
    return GR_OK;
}

void gr_gpu_mark_pdl(const gpu_state *g, gpu_variant *v)
{
    const gr_plan *plan = v->plan;
    int prev_launch = -1; /* the previous launching node (one stream only) */
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_gpu_node_launches(nd))
            continue;
        v->pdl[i] = g->pdl && plan->n_streams <= 1 && nd->kind == GR_OP_CONV && prev_launch >= 0 &&
                    nd->n_waits == 0 && plan->nodes[prev_launch].record_event < 0;
        prev_launch = i;
    }
}

int gr_gpu_node_uses_cublas(const gr_plan *plan, const gr_plan_node *nd)
{
    if (!gr_gpu_node_launches(nd))
        return 0;
    return nd->kind == GR_OP_CONNECTED ||
           (nd->kind == GR_OP_CONV && gr_plan_conv_in_dtype(plan, nd) == GR_DTYPE_F32);
}

/* A conv, or a [connected] (an f32 1x1 conv for gr_gpu_conv_args). */
static gr_status launch_conv(gpu_state *g, gpu_variant *v, const gpu_instance *inst, int index)
{
    const gr_plan *plan = v->plan;
    int s = plan->nodes[index].stream;
    gpu_conv c;
    GR_TRY(gr_gpu_conv_args(g, v, inst, index, &c));
    if (c.tensor_cores && v->tactic && v->tactic[index].gemm) {
        /* the GEMM tactic: its scratch is the node's region (no split-K there) */
        cudaError_t err = gr_conv_gemm_launch(v->gemm[index], &c.tc,
                                              inst->splitk + v->splitk_offset[index],
                                              g->streams[s]);
        return gr_gpu_launch_status(err, plan, index);
    }
    if (c.tensor_cores) {
        c.tc.workspace = v->splitk_bytes[index] ? inst->splitk + v->splitk_offset[index] : NULL;
        c.tc.workspace_bytes = v->splitk_bytes[index];
        cudaError_t err = c.is_i8 ? gr_launch_conv_i8(&c.tc, g->streams[s])
                                  : gr_launch_conv_f16(&c.tc, g->streams[s]);
        return gr_gpu_launch_status(err, plan, index);
    }
    if (c.direct_nhwc) {
        cudaError_t err = c.is_i8 ? gr_launch_conv_direct_i8(&c.nhwc_args, g->streams[s])
                                  : gr_launch_conv_direct_f16(&c.nhwc_args, g->streams[s]);
        return gr_gpu_launch_status(err, plan, index);
    }
    if (c.direct)
        return gr_gpu_launch_status(gr_launch_conv_direct_f32(&c.direct_args, g->streams[s]),
                                    plan, index);
    for (int b = 0; b < c.images; b++)
        for (int k = 0; k < c.groups; k++) {
            gr_conv_f32_args a = c.f32;
            a.in += (size_t)b * c.x_image + (size_t)k * c.x_group;
            a.out += (size_t)b * c.y_image + (size_t)k * c.y_group;
            a.weights += (size_t)k * c.w_group;
            if (a.bias)
                a.bias += (size_t)k * c.b_group;
            cudaError_t cuda_err = cudaSuccess;
            cublasStatus_t st = gr_launch_conv_f32(g->cublas[s], &a, g->streams[s], &cuda_err);
            if (st != CUBLAS_STATUS_SUCCESS)
                return gr_gpu_cublas_fail(st, cuda_err, plan, index);
        }
    return GR_OK;
}

/* ---- every other node --------------------------------------------------------------------- */

/* Not aliased by the planner: copy each input (or its group slice) into place. */
static cudaError_t launch_route(gpu_variant *v, const gpu_instance *inst, const gr_plan_node *nd,
                                cudaStream_t stream)
{
    const gr_plan_tensor *y = &v->plan->tensors[nd->output];
    void *out = gr_gpu_tensor_storage(v, inst, nd->output);
    int groups = nd->p.groups > 1 ? nd->p.groups : 1;
    int offset = 0;
    for (int k = 0; k < nd->n_inputs; k++) {
        const gr_plan_tensor *src = &v->plan->tensors[nd->inputs[k]];
        gr_kview sv = kview(src);
        sv.c = src->c / groups;
        sv.c_offset += (nd->p.groups > 1 ? nd->p.group_id : 0) * sv.c;
        gr_kview dv = kview(y);
        dv.c = sv.c;
        dv.c_offset += offset;
        offset += sv.c;
        cudaError_t err = gr_launch_route_copy(y->dtype, gr_gpu_tensor_storage(v, inst, nd->inputs[k]),
                                               sv, out, dv, stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

int gr_gpu_node_launches(const gr_plan_node *nd)
{
    return !(nd->noop || nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT);
}

gr_status gr_gpu_launch_node(gpu_state *g, gpu_variant *v, const gpu_instance *inst, int index)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    if (!gr_gpu_node_launches(nd))
        return GR_OK;
    gr_kernels_clear_failure(); /* what a failing launcher records is about this node */
    if (nd->kind == GR_OP_CONV || nd->kind == GR_OP_CONNECTED)
        return launch_conv(g, v, inst, index);
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const void *in = gr_gpu_tensor_storage(v, inst, nd->inputs[0]);
    void *out = gr_gpu_tensor_storage(v, inst, nd->output);
    gr_kview xv = kview(x), yv = kview(y);
    const gr_op_params *p = &nd->p;
    cudaStream_t stream = g->streams[nd->stream];
    cudaError_t err;
    switch (nd->kind) {
    case GR_OP_QUANTIZE:
    case GR_OP_DEQUANTIZE:
    case GR_NODE_CONVERT:
        err = gr_launch_convert(x->dtype, y->dtype, in, xv, x->scale, out, yv, y->scale, stream);
        break;
    case GR_OP_MAXPOOL:
        err = gr_launch_maxpool(y->dtype, in, xv, out, yv, p->size, p->stride, p->pad, stream);
        break;
    case GR_OP_LOCAL_AVGPOOL:
        err = gr_launch_local_avgpool(y->dtype, in, xv, out, yv, p->size, p->stride, p->pad,
                                      stream);
        break;
    case GR_OP_AVGPOOL:
        err = gr_launch_avgpool(y->dtype, in, xv, x->scale, out, yv, y->scale, stream);
        break;
    case GR_OP_UPSAMPLE:
        err = gr_launch_upsample(y->dtype, in, xv, out, yv, p->stride, stream);
        break;
    case GR_OP_REORG: err = gr_launch_reorg(y->dtype, in, xv, out, yv, p->stride, stream); break;
    case GR_OP_SHORTCUT: {
        const gr_plan_tensor *f = &plan->tensors[nd->inputs[1]];
        err = gr_launch_shortcut(y->dtype, in, xv, x->scale,
                                 gr_gpu_tensor_storage(v, inst, nd->inputs[1]), kview(f), f->scale,
                                 out, yv, y->scale, p->activation, stream);
        break;
    }
    case GR_OP_SAM: /* in[1]: sam's from-layer, scale_channels' scales (ops/<op>.c) */
    case GR_OP_SCALE_CHANNELS: {
        const gr_plan_tensor *s = &plan->tensors[nd->inputs[1]];
        err = gr_launch_mul(y->dtype, in, xv, x->scale,
                            gr_gpu_tensor_storage(v, inst, nd->inputs[1]), kview(s), s->scale, out,
                            yv, y->scale, p->activation, stream);
        break;
    }
    case GR_OP_ROUTE: err = launch_route(v, inst, nd, stream); break;
    case GR_OP_REGION:
        err = gr_launch_region(y->dtype, in, out, x->n, x->h, x->w, p->num, p->coords, p->classes,
                               p->softmax, stream);
        break;
    case GR_OP_YOLO:
        err = gr_launch_yolo(y->dtype, in, out, x->n, x->h, x->w, p->n_mask, p->classes,
                             p->scale_x_y, p->new_coords, stream);
        break;
    case GR_OP_SOFTMAX:
        err = gr_launch_softmax(y->dtype, in, xv, out, yv, p->groups, stream);
        break;
    case GR_OP_ATTENTION: /* groups: heads, size: key_dim (ops/attention.c) */
        err = gr_launch_attention(y->dtype, in, xv, out, yv, p->groups, p->size, p->scale,
                                  stream);
        break;
    case GR_OP_DFL_HEAD: { /* size: bins, anchors[k]: input k's stride (ops/dfl_head.c) */
        const void *ins[GR_MAX_INPUTS];
        gr_kview views[GR_MAX_INPUTS];
        for (int k = 0; k < nd->n_inputs && k < GR_MAX_INPUTS; k++) {
            ins[k] = gr_gpu_tensor_storage(v, inst, nd->inputs[k]);
            views[k] = kview(&plan->tensors[nd->inputs[k]]);
        }
        err = gr_launch_dfl_head(y->dtype, ins, views, p->anchors, nd->n_inputs, out, yv, p->size,
                                 p->classes, stream);
        break;
    }
    default: return gr_gpu_unsupported(plan, index);
    }
    return gr_gpu_launch_status(err, plan, index);
}

/* ---- the forward pass ----------------------------------------------------------------------- */

/* One slice's nodes on the plan's streams, forked from and joined back into stream 0. */
static gr_status enqueue_slice(gpu_state *g, gpu_variant *v, const gpu_instance *inst,
                               cudaEvent_t *node_events)
{
    const gr_plan *plan = v->plan;
    cudaStream_t s0 = g->streams[0];
    /* Fork: every other stream starts after the input copy (and the previous slice). */
    if (g->n_streams > 1) {
        CUDA_TRY(cudaEventRecord(g->fork, s0));
        for (int s = 1; s < g->n_streams; s++)
            CUDA_TRY(cudaStreamWaitEvent(g->streams[s], g->fork, 0));
    }
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        cudaStream_t stream = g->streams[nd->stream];
        for (int k = 0; k < nd->n_waits; k++)
            CUDA_TRY(cudaStreamWaitEvent(stream, g->events[plan->waits[nd->wait_begin + k]], 0));
        if (node_events)
            CUDA_TRY(cudaEventRecord(node_events[2 * i], stream));
        char name[64];
        snprintf(name, sizeof name, "node %d %s (layer %d)", i, gr_plan_kind_name(nd->kind),
                 nd->layer);
        if (g->before_node)
            GR_TRY(g->before_node(g, v, inst, i, g->after_node_user));
        gr_trace_push(name); /* Nsight Systems shows the plan's nodes */
        gr_status st = gr_gpu_launch_node(g, v, inst, i);
        gr_trace_pop();
        GR_TRY(st);
        if (g->after_node)
            GR_TRY(g->after_node(g, v, inst, i, g->after_node_user));
        if (node_events)
            CUDA_TRY(cudaEventRecord(node_events[2 * i + 1], stream));
        if (nd->record_event >= 0)
            CUDA_TRY(cudaEventRecord(g->events[nd->record_event], stream));
    }
    for (int k = 0; k < plan->n_join_waits; k++)
        CUDA_TRY(cudaStreamWaitEvent(s0, g->events[plan->waits[plan->join_wait_begin + k]], 0));
    /* Join every stream back (capture requires it; eagerly it orders the output copy, and the
     * next slice, which reuses the arena and the scratch, after this one). */
    for (int s = 1; s < g->n_streams; s++) {
        CUDA_TRY(cudaEventRecord(g->join[s], g->streams[s]));
        CUDA_TRY(cudaStreamWaitEvent(s0, g->join[s], 0));
    }
    return GR_OK;
}

gr_status gr_gpu_copy_host_images(const gpu_variant *v, const gpu_instance *inst,
                                  cudaStream_t stream)
{
    size_t batch = (size_t)v->micro_batch * (size_t)(v->n_slices > 1 ? v->n_slices : 1);
    size_t per_image = v->in_bytes / batch;
    for (size_t i = 0; i < batch;) {
        if (!inst->host_image[i]) {
            i++;
            continue;
        }
        size_t first = i;
        while (i < batch && inst->host_image[i])
            i++;
        CUDA_TRY(cudaMemcpyAsync(inst->io + first * per_image,
                                 (const uint8_t *)inst->host_in + first * per_image,
                                 (i - first) * per_image, cudaMemcpyHostToDevice, stream));
    }
    return GR_OK;
}

/* The whole batch's input copy, the slices one after the other, the whole batch's output copy:
 * two copies per run however many slices. node_events then hold the last slice's times. */
gr_status gr_gpu_enqueue_forward(gpu_state *g, gpu_variant *v, const gpu_instance *inst,
                                 cudaEvent_t *node_events, cudaEvent_t *copy_events)
{
    cudaStream_t s0 = g->streams[0];
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[0], s0));
    if (inst->input_on_device)
        GR_TRY(gr_gpu_copy_host_images(v, inst, s0));
    else
        CUDA_TRY(cudaMemcpyAsync(inst->io, inst->host_in, v->in_bytes, cudaMemcpyHostToDevice,
                                 s0));
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[1], s0));
    const int slices = v->n_slices > 1 ? v->n_slices : 1;
    if (v->dataflow) /* one persistent kernel for every node (experimental/dataflow/runtime.c) */
        GR_TRY(gr_gpu_dataflow_launch(g, v, inst));
    for (int j = 0; j < slices && !v->dataflow; j++) {
        gpu_instance part = *inst;
        part.slice = j;
        GR_TRY(enqueue_slice(g, v, &part, node_events));
    }
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[2], s0));
    CUDA_TRY(cudaMemcpyAsync(inst->host_out, inst->io + v->in_bytes, v->out_bytes,
                             cudaMemcpyDeviceToHost, s0));
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[3], s0));
    return GR_OK;
}
