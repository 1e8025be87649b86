/* int8 weight quantization: per output channel, symmetric, from the folded weights
 * (s_w[c] = max |w'| / 127, q_w = clamp(rint(w' / s_w[c]), -127, 127); plan.h), or with the scales
 * the model file gives (an ONNX model's DequantizeLinear of int8 weights: q_w = clamp(rint(w' /
 * s_w[c]), -128, 127), which gives back the file's int8 weights, -128 included). */
#include <math.h>
#include <stdlib.h>

#include "planner/passes.h"

/* One filter: its scale s = max|w| / 127 (1 when all zero) and q = clamp(rint(w / s), +-127),
 * NaN -> 0. Written so that the compiler vectorises it (about 15.8 million weights in YOLOv2-tiny,
 * quantized at every int8 build and load): the comparisons skip NaN exactly as fmaxf does, and
 * adding and subtracting 1.5 * 2^23 rounds a clamped |r| <= 127 to an integer in the current
 * rounding mode exactly as rintf does (clamping before rounding gives the integers that
 * rounding before clamping gives: (127, 127.5] rounds to 127, anything above to 128 or more,
 * which the clamp brings back to 127). */
static float quantize_filter(const float *w, size_t n, int8_t *q)
{
    float max_abs = 0.0f;
    for (size_t k = 0; k < n; k++) {
        float a = fabsf(w[k]);
        max_abs = a > max_abs ? a : max_abs;
    }
    const float s = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    for (size_t k = 0; k < n; k++) {
        float r = w[k] / s;
        r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
        r = (r + magic) - magic;
        q[k] = (int8_t)(r == r ? r : 0.0f); /* r != r: NaN */
    }
    return s;
}

/* One filter with the file's scale s: the file's integers back (w' = q * s exactly up to float
 * rounding, which rint undoes), -128 kept. */
static void quantize_filter_file(const float *w, size_t n, float s, int8_t *q)
{
    for (size_t k = 0; k < n; k++) {
        float r = rintf(w[k] / s);
        r = r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r;
        q[k] = (int8_t)(r == r ? r : 0.0f);
    }
}

static int quantized_conv(const gr_plan *plan, const gr_plan_node *nd)
{
    return nd->kind == GR_OP_CONV && gr_plan_conv_in_dtype(plan, nd) == GR_DTYPE_I8;
}

gr_status gr_pass_quantize_weights(gr_plan *plan)
{
    size_t total = plan->n_qweights;
    for (int i = 0; i < plan->n_nodes; i++)
        if (quantized_conv(plan, &plan->nodes[i]) &&
            !gr_add_size(total, plan->nodes[i].n_w, &total))
            return gr_fail(GR_ERR_LIMIT, "planner: int8 weight block size overflow");
    if (total == plan->n_qweights)
        return GR_OK;
    if (!plan->options.weight_data) { /* where they would be, nothing stored */
        for (int i = 0; i < plan->n_nodes; i++) {
            gr_plan_node *nd = &plan->nodes[i];
            if (!quantized_conv(plan, nd))
                continue;
            GR_TRY(gr_plan_append_floats(plan, NULL, (size_t)nd->p.filters, &nd->ws_offset));
            nd->qw_offset = plan->n_qweights;
            plan->n_qweights += nd->n_w;
        }
        return GR_OK;
    }
    int8_t *grown = realloc(plan->qweights, total);
    if (!grown)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory quantizing weights");
    plan->qweights = grown;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (!quantized_conv(plan, nd))
            continue;
        int filters = nd->p.filters;
        size_t per_filter = nd->n_w / (size_t)filters;
        GR_TRY(gr_plan_append_floats(plan, NULL, (size_t)filters, &nd->ws_offset));
        nd->qw_offset = plan->n_qweights;
        plan->n_qweights += nd->n_w;
        const float *w = plan->weights + nd->w_offset;
        float *ws = plan->weights + nd->ws_offset;
        int8_t *q = plan->qweights + nd->qw_offset;
        const float *file_ws = nd->file_wscale ? plan->weights + nd->fws_offset : NULL;
        for (int c = 0; c < filters; c++) {
            if (file_ws) {
                ws[c] = file_ws[c];
                quantize_filter_file(w + (size_t)c * per_filter, per_filter, file_ws[c],
                                     q + (size_t)c * per_filter);
            } else {
                ws[c] = quantize_filter(w + (size_t)c * per_filter, per_filter,
                                        q + (size_t)c * per_filter);
            }
        }
    }
    return GR_OK;
}
