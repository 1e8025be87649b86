/* INT8 ranges a model file states itself (an ONNX graph's QuantizeLinear/DequantizeLinear pairs,
 * gr_net_qdq: models/onnx/qdq.c; docs/onnx.md "Explicit Q/DQ"): used instead of calibration.
 * Every layer that computes in int8 needs its output's range from the file, directly or through
 * the layers whose output holds their inputs' stored values (maxpool, upsample, route: they
 * share one scale, docs/planner.md); a layer left without one is refused by name, since a
 * made-up scale would be silently wrong. The network input without a Q/DQ gets range 1, the
 * whole span of the image's v / 255. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/precision/file_scales.h"

/* Does layer i join tensors (its inputs, with the ranges r[] they got, and its own output) that
 * the file quantizes with different scales? graphrun's int8 stores them with one (the largest:
 * gr_plan_set_ranges). */
static bool mixed_scales(const gr_net *net, int i, const float *r, float input_range)
{
    const gr_net_qdq *q = net->qdq;
    const gr_layer *l = &net->layers[i];
    if (!gr_op_has((int)l->p.op, GR_OPF_STORED_VALUES))
        return false;
    float lo = q->range[i] > 0.0f ? q->range[i] : INFINITY, hi = q->range[i];
    for (int k = 0; k < l->n_inputs; k++) {
        float in = l->inputs[k] < 0 ? input_range : r[l->inputs[k]];
        if (in > 0.0f) {
            lo = in < lo ? in : lo;
            hi = in > hi ? in : hi;
        }
    }
    return hi > 0.0f && lo < hi;
}

gr_status gr_net_file_ranges(const gr_net *net, const gr_precision *map, gr_precision prec,
                             float *r, float *input_range, int *mixed)
{
    const gr_net_qdq *q = net->qdq;
    if (!q)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: no int8 scales in the file", net->name);
    *input_range = q->input_range > 0.0f ? q->input_range : 1.0f;
    if (mixed)
        *mixed = -1;
    for (int i = 0; i < net->n_layers; i++) {
        if (mixed && *mixed < 0 && mixed_scales(net, i, r, *input_range))
            *mixed = i;
        const gr_layer *l = &net->layers[i];
        r[i] = q->range[i];
        if (r[i] > 0.0f || gr_op_has((int)l->p.op, GR_OPF_F32_ONLY))
            continue;
        gr_precision p = map ? map[i] : prec;
        bool shares = gr_op_has((int)l->p.op, GR_OPF_STORED_VALUES);
        for (int k = 0; shares && k < l->n_inputs; k++) {
            float in = l->inputs[k] < 0 ? *input_range : r[l->inputs[k]];
            if (!(in > 0.0f))
                shares = false;
            else if (in > r[i])
                r[i] = in;
        }
        if (!shares)
            r[i] = 0.0f;
        if (p == GR_PREC_INT8 && !(r[i] > 0.0f))
            return gr_fail(GR_ERR_UNSUPPORTED, "int8 with the file's Q/DQ scales: layer %d "
                           "(%s, node #%d of %s) has no QuantizeLinear/DequantizeLinear on its "
                           "output, so no int8 scale (quantize that tensor in the model, or build "
                           "this layer in fp16: --prec fp16 or a per-layer precision map)",
                           i, gr_plan_kind_name((int)l->p.op), l->cfg_line - 1, net->name);
    }
    return GR_OK;
}

gr_status gr_file_ranges(const gr_build_request *req, float **layer_range, float *input_range,
                         char *notice, size_t notice_len)
{
    const gr_net *net = req->net;
    const gr_net_qdq *q = net->qdq;
    float *r = gr_calloc((size_t)net->n_layers + 1, sizeof *r, "Q/DQ ranges");
    if (!r)
        return GR_ERR_OUT_OF_MEMORY;
    *layer_range = r; /* the caller's from here on */
    int mixed = -1;
    GR_TRY(gr_net_file_ranges(net, req->layer_precision, req->opt.precision, r, input_range,
                              &mixed));
    char line[400];
    snprintf(line, sizeof line, "int8: scales from the file's QuantizeLinear/DequantizeLinear "
             "(%d tensor%s, %d conv%s with the file's int8 weights), no calibration",
             q->n_ranges, q->n_ranges == 1 ? "" : "s", q->n_wscaled, q->n_wscaled == 1 ? "" : "s");
    size_t used = 0;
    while (used < notice_len && notice[used])
        used++;
    snprintf(notice + used, notice_len - used, "%s%s", used ? "\n" : "", line);
    if (mixed >= 0) {
        const gr_layer *l = &net->layers[mixed];
        used += strlen(notice + used);
        snprintf(notice + used, notice_len - used, "\nint8: layer %d (%s, node #%d) joins "
                 "tensors the file quantizes with different scales: graphrun stores them with "
                 "one, the largest (the file's arithmetic is matched where a concat's inputs "
                 "share one scale)", mixed, gr_plan_kind_name((int)l->p.op), l->cfg_line - 1);
    }
    return GR_OK;
}
