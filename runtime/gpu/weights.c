/* Device memory a variant needs besides its arena: every conv's weights in its kernel's layout
 * (f32, and [connected]: the planner's folded weights as they are, for cuBLAS; f16 / i8
 * tensor-core convs: channels-last re-layout of kernels/conv_weights.h, int8 values and scales
 * from the planner's quantizer; f16 / i8 direct convs: Darknet's order), the int8 multipliers m[c] = s_in * s_w[c], the biases; and the scratch of the conv
 * kernels. */
#include <stdlib.h>
#include <string.h>

#include "kernels/misc.h"
#include "kernels/conv_weights.h"
#include "base/bytes.h"
#include "runtime/gpu/backend.h"

/* Bytes of a conv's weights in its kernel's layout (x: the conv's input). */
static size_t weight_bytes(const gr_plan *plan, const gr_plan_node *nd, const gr_plan_tensor *x)
{
    int out_c = nd->p.filters, k = nd->p.size;
    gr_dtype compute = gr_plan_conv_in_dtype(plan, nd);
    if (compute != GR_DTYPE_F32 && gr_gpu_conv_direct(plan, nd))
        return nd->n_w * (compute == GR_DTYPE_I8 ? 1 : sizeof(uint16_t));
    switch (compute) {
    case GR_DTYPE_I8: return gr_conv_weights_count(out_c, x->c, k, GR_KALIGN_I8);
    case GR_DTYPE_F16:
        return gr_conv_weights_count(out_c, x->c, k, GR_KALIGN_F16) * sizeof(uint16_t);
    default: return nd->n_w * sizeof(float);
    }
}

/* Fill one conv's weights and multipliers in host memory: f16 / i8 in the re-layout of the
 * tensor-core kernels, or in Darknet's order for the direct kernels (the same values: half_rn of
 * w', the planner's q_w). */
static void fill_weights(const gr_plan *plan, const gr_plan_node *nd, const gr_plan_tensor *x,
                         uint8_t *weights, float *mul)
{
    int out_c = nd->p.filters, k = nd->p.size;
    const float *w = plan->weights + nd->w_offset;
    gr_dtype compute = gr_plan_conv_in_dtype(plan, nd); /* i8 / f16 also for a fused u8 input */
    int direct = gr_gpu_conv_direct(plan, nd);
    if (compute == GR_DTYPE_I8) {
        if (direct)
            memcpy(weights, plan->qweights + nd->qw_offset, nd->n_w);
        else
            gr_conv_weights_relayout_i8(plan->qweights + nd->qw_offset, out_c, x->c, k,
                                        (int8_t *)weights);
        const float *weight_scale = plan->weights + nd->ws_offset;
        const float s_in = gr_plan_conv_in_scale(plan, nd);
        for (int c = 0; c < out_c; c++)
            mul[c] = s_in * weight_scale[c]; /* m[c] = s_in * s_w[c], in f32 (planner/plan.h) */
    } else if (compute == GR_DTYPE_F16 && direct) {
        uint16_t *half = (uint16_t *)weights;
        for (size_t i = 0; i < nd->n_w; i++)
            half[i] = gr_f32_to_f16(w[i]);
    } else if (compute == GR_DTYPE_F16) {
        gr_conv_weights_relayout_f16(w, out_c, x->c, k, (uint16_t *)weights);
    } else {
        memcpy(weights, w, nd->n_w * sizeof(float));
    }
}

/* Where each conv's weights, multipliers and biases go in the packed block (offsets[3 * node +
 * 0/1/2], 256-byte aligned) and its size. */
static gr_status layout_of(const gr_plan *plan, size_t **offsets_out, size_t *total_out)
{
    size_t total = 0;
    size_t *offsets = gr_calloc((size_t)plan->n_nodes * 3 + 1, sizeof *offsets, "weight offsets");
    if (!offsets)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_op_has(nd->kind, GR_OPF_WEIGHTS))
            continue;
        size_t channel_bytes = (size_t)nd->p.filters * sizeof(float);
        offsets[3 * i] = total;
        total = gr_gpu_align(total + weight_bytes(plan, nd, &plan->tensors[nd->inputs[0]]), 256);
        offsets[3 * i + 1] = total;
        total = gr_gpu_align(total + channel_bytes, 256);
        offsets[3 * i + 2] = total;
        total = gr_gpu_align(total + channel_bytes, 256);
    }
    *offsets_out = offsets;
    *total_out = total;
    return GR_OK;
}

uint64_t gr_gpu_weights_layout(const gr_plan *plan)
{
    size_t *offsets = NULL, total = 0;
    if (layout_of(plan, &offsets, &total) != GR_OK)
        return 0;
    uint64_t h = gr_fnv1a(GR_FNV1A_INIT, &total, sizeof total);
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_op_has(nd->kind, GR_OPF_WEIGHTS))
            continue;
        const int what[6] = {i, nd->kind, (int)gr_plan_conv_in_dtype(plan, nd),
                             gr_gpu_conv_direct(plan, nd), nd->p.filters,
                             plan->tensors[nd->inputs[0]].c};
        h = gr_fnv1a(h, what, sizeof what);
        h = gr_fnv1a(h, &nd->n_w, sizeof nd->n_w);
        h = gr_fnv1a(h, &offsets[3 * i], 3 * sizeof *offsets);
    }
    free(offsets);
    return h;
}

gr_status gr_gpu_upload_weights(gpu_variant *v, const gr_saved_weights *saved)
{
    const gr_plan *plan = v->plan;
    size_t *offsets = NULL, total = 0;
    GR_TRY(layout_of(plan, &offsets, &total));
    if (saved && saved->bytes != total) {
        free(offsets);
        return gr_fail(GR_ERR_PARSE, "engine file: its device weights are %zu bytes, the plan's "
                       "%zu: file corrupt", saved->bytes, total);
    }
    if (!saved && !plan->weights && plan->n_weight_floats) {
        free(offsets);
        return gr_fail(GR_ERR_INTERNAL, "uploading the weights: a plan without weight data");
    }
    const uint8_t *bytes = saved ? saved->data : NULL;
    uint8_t *host = NULL;
    if (!saved) { /* pack them from the plan */
        host = gr_calloc(total ? total : 1, 1, "packed weights");
        if (!host) {
            free(offsets);
            return GR_ERR_OUT_OF_MEMORY;
        }
        for (int i = 0; i < plan->n_nodes; i++) {
            const gr_plan_node *nd = &plan->nodes[i];
            if (!gr_op_has(nd->kind, GR_OPF_WEIGHTS))
                continue;
            fill_weights(plan, nd, &plan->tensors[nd->inputs[0]], host + offsets[3 * i],
                         (float *)(host + offsets[3 * i + 1]));
            memcpy(host + offsets[3 * i + 2], plan->weights + nd->b_offset,
                   (size_t)nd->p.filters * sizeof(float));
        }
        bytes = host;
    }
    gr_status st = GR_OK;
    v->weights_packed = total;
    v->weights_bytes = total ? total : 256;
    cudaError_t err = cudaMalloc((void **)&v->weights, v->weights_bytes);
    if (err == cudaSuccess && total)
        err = cudaMemcpy(v->weights, bytes, total, cudaMemcpyHostToDevice);
    if (err != cudaSuccess)
        st = gr_gpu_cuda_fail(err, "uploading the weights", __FILE__, __LINE__);
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        if (!gr_op_has(plan->nodes[i].kind, GR_OPF_WEIGHTS))
            continue;
        int is_i8 = gr_plan_conv_in_dtype(plan, &plan->nodes[i]) == GR_DTYPE_I8;
        v->nw[i].weights = v->weights + offsets[3 * i];
        v->nw[i].mul = is_i8 ? (float *)(v->weights + offsets[3 * i + 1]) : NULL;
        v->nw[i].bias = (float *)(v->weights + offsets[3 * i + 2]);
    }
    free(host);
    free(offsets);
    return st;
}

gr_status gr_gpu_download_weights(const gpu_variant *v, uint8_t **host, size_t *bytes)
{
    *host = NULL;
    *bytes = 0;
    uint8_t *h = gr_malloc(v->weights_packed ? v->weights_packed : 1, "device weights copy");
    if (!h)
        return GR_ERR_OUT_OF_MEMORY;
    cudaError_t err = v->weights_packed ? cudaMemcpy(h, v->weights, v->weights_packed,
                                                     cudaMemcpyDeviceToHost)
                                        : cudaSuccess;
    if (err != cudaSuccess) {
        free(h);
        return gr_gpu_cuda_fail(err, "copying the device weights back", __FILE__, __LINE__);
    }
    *host = h;
    *bytes = v->weights_packed;
    return GR_OK;
}

/* im2col per stream for fp32 convs (convs on one stream run one after another); split-K
 * partials and counters per tensor-core conv node, sized by the same arguments it launches with
 * (instance 0's: every instance has the same shapes); the GEMM tactic's scratch (im2col matrix,
 * accumulator, cuBLASLt workspace: nothing in it outlives its node) once per stream, as large as
 * the stream's largest. Each instance gets its own. A GEMM node ignores programmatic launch, so
 * it starts only after the kernel before it on the stream has finished. */
gr_status gr_gpu_alloc_scratch(gpu_state *g, gpu_variant *v)
{
    const gr_plan *plan = v->plan;
    size_t im2col[GR_GPU_MAX_STREAMS] = {0}, gemm[GR_GPU_MAX_STREAMS] = {0}, splitk_total = 0;
    v->splitk_offset = gr_calloc((size_t)plan->n_nodes, sizeof(size_t), "split-K offsets");
    v->splitk_bytes = gr_calloc((size_t)plan->n_nodes, sizeof(size_t), "split-K sizes");
    if (!v->splitk_offset || !v->splitk_bytes)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if ((nd->kind != GR_OP_CONV && nd->kind != GR_OP_CONNECTED) || nd->noop)
            continue;
        gpu_conv c;
        GR_TRY(gr_gpu_conv_args(g, v, &v->inst[0], i, &c));
        if (c.direct) /* no workspace */
            continue;
        if (!c.tensor_cores) {
            int ok = 1;
            size_t floats = gr_conv_f32_workspace_floats(&c.f32, &ok);
            if (!ok)
                return gr_fail(GR_ERR_LIMIT, "layer %d: im2col workspace too large", nd->layer);
            if (floats > im2col[nd->stream])
                im2col[nd->stream] = floats;
        } else if (v->tactic && v->tactic[i].gemm) {
            v->splitk_bytes[i] = v->tactic[i].gemm_scratch; /* offset: the stream's, below */
            if (v->splitk_bytes[i] > gemm[nd->stream])
                gemm[nd->stream] = v->splitk_bytes[i];
        } else {
            size_t bytes = c.is_i8 ? gr_conv_workspace_bytes_i8(&c.tc)
                                   : gr_conv_workspace_bytes_f16(&c.tc);
            v->splitk_offset[i] = splitk_total;
            v->splitk_bytes[i] = bytes;
            splitk_total = gr_gpu_align(splitk_total + bytes, 256);
        }
    }
    size_t gemm_offset[GR_GPU_MAX_STREAMS] = {0};
    for (int s = 0; s < g->n_streams; s++) {
        gemm_offset[s] = splitk_total;
        splitk_total = gr_gpu_align(splitk_total + gemm[s], 256);
    }
    for (int i = 0; v->tactic && i < plan->n_nodes; i++)
        if (v->tactic[i].gemm && v->splitk_bytes[i])
            v->splitk_offset[i] = gemm_offset[plan->nodes[i].stream];
    v->splitk_total = splitk_total;
    v->im2col_bytes = 0;
    for (int s = 0; s < g->n_streams; s++) {
        v->im2col_floats[s] = im2col[s];
        v->im2col_bytes += im2col[s] * sizeof(float);
    }
    for (int k = 0; k < v->n_inst; k++)
        if (v->inst[k].arena) /* a micro-batch candidate has instance 0 only, until it wins */
            GR_TRY(gr_gpu_alloc_instance_scratch(g, v, &v->inst[k]));
    return GR_OK;
}

gr_status gr_gpu_alloc_instance_scratch(const gpu_state *g, const gpu_variant *v,
                                        gpu_instance *inst)
{
    for (int s = 0; s < g->n_streams; s++)
        if (v->im2col_floats[s])
            CUDA_TRY(cudaMalloc((void **)&inst->im2col[s], v->im2col_floats[s] * sizeof(float)));
    if (v->splitk_total) {
        CUDA_TRY(cudaMalloc((void **)&inst->splitk, v->splitk_total));
        CUDA_TRY(cudaMemset(inst->splitk, 0, v->splitk_total)); /* tile counters start at 0 */
    }
    return GR_OK;
}
