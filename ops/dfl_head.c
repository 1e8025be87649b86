/* dfl_head: the decode of a YOLOv8 / YOLO11 anchor-free detection head, from an ONNX import
 * (models/onnx/import.c puts it in place of the exported head's tail when the two compute the
 * same values; docs/onnx.md, "Detection heads"). No Darknet section. Parameters: size = R, the
 * DFL bins per box side (reg_max, 16 in YOLOv8), classes = nc, anchors[k] = input k's stride
 * in input pixels (a whole number). Each input k is one scale's raw head, 4 R + nc channels of H_k x W_k cells: the
 * four sides' bins (left, top, right, bottom; R channels each), then the class logits. The
 * output is [4 + nc] x 1 x A, A = the sum of the inputs' cells, anchors in input order and each
 * scale's cells row by row: the graph's [1, 4 + nc, A]. For the cell (x, y) of input k, anchor a:
 *   p_i = softmax(side j's bins)_i            (max subtracted, expf, float sum in bin order)
 *   d_j = sum_i p_i * i                       (the expectation, in bin order)
 *   x1 = x + 0.5 - d_0, y1 = y + 0.5 - d_1, x2 = x + 0.5 + d_2, y2 = y + 0.5 + d_3
 *   out[0..3][a] = ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1) * stride_k
 *   out[4 + c][a] = 1 / (1 + expf(-logit_c))
 * which is the float arithmetic of the exported graph as ONNX Runtime and PyTorch's CPU ops run
 * it (and the host tail, models/onnx/tail.c). Every output reads every input row (rows: whole). */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_DFL_HEAD;
    const gr_op_params *p = c->p;
    if (!c->in || c->n_in < 1 || c->n_in > GR_MAX_INPUTS)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: 1 to %d inputs (scales), got %d",
                       gr_op_tag(op), GR_MAX_INPUTS, c->in ? c->n_in : 0);
    GR_TRY(gr_op_check_range(op, "bins", p->size, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "classes", p->classes, 1, GR_MAX_DIM));
    long long anchors = 0, channels = 4LL * p->size + p->classes;
    for (int k = 0; k < c->n_in; k++) {
        GR_TRY(gr_op_check_input(op, c->in[k], k));
        float stride = p->anchors[k];
        if (!(stride >= 1.0f && stride <= (float)GR_MAX_DIM && stride == floorf(stride)))
            return gr_fail(GR_ERR_PARSE, "%s: input %d's stride %g is not a whole number in 1..%d",
                           gr_op_tag(op), k, (double)stride, GR_MAX_DIM);
        if (c->in[k].c != channels)
            return gr_fail(GR_ERR_PARSE, "%s: input %d has %d channels, not 4 x %d bins + %d "
                           "classes", gr_op_tag(op), k, c->in[k].c, p->size, p->classes);
        anchors += (long long)c->in[k].h * c->in[k].w;
    }
    return gr_op_set_output(op, 4LL + p->classes, 1, anchors, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    double anchors = c->out.w;
    /* per anchor and side: max, exp, sum, division and expectation over the bins (~24 flops per
     * bin, counting the exp as 20); the box arithmetic; an exp and a division per class */
    cost->flops = anchors * (4.0 * p->size * 24.0 + 12.0 + 22.0 * p->classes);
}

/* Side j's expected distance from its R bins, `plane` floats apart. */
static float expectation(const float *bins, int n_bins, size_t plane)
{
    float hi = bins[0];
    for (int i = 1; i < n_bins; i++)
        hi = fmaxf(hi, bins[(size_t)i * plane]);
    float sum = 0.0f;
    for (int i = 0; i < n_bins; i++)
        sum += expf(bins[(size_t)i * plane] - hi);
    float d = 0.0f;
    for (int i = 0; i < n_bins; i++)
        d += expf(bins[(size_t)i * plane] - hi) / sum * (float)i;
    return d;
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const int bins = p->size, nc = p->classes;
    const size_t n_anchors = (size_t)c->out.w, out_image = gr_shape_elems(c->out);
    for (int b = 0; b < c->batch; b++) {
        float *y = c->dst + (size_t)b * out_image;
        size_t a = 0;
        for (int k = 0; k < c->n_in; k++) {
            const gr_shape s = c->in[k];
            const size_t plane = (size_t)s.h * s.w;
            const float *x = c->src[k] + (size_t)b * gr_shape_elems(s);
            const float stride = p->anchors[k];
            for (int cy = 0; cy < s.h; cy++) {
                for (int cx = 0; cx < s.w; cx++, a++) {
                    const float *v = x + (size_t)cy * s.w + cx;
                    float d[4];
                    for (int j = 0; j < 4; j++)
                        d[j] = expectation(v + (size_t)j * bins * plane, bins, plane);
                    float ax = (float)cx + 0.5f, ay = (float)cy + 0.5f;
                    float x1 = ax - d[0], y1 = ay - d[1], x2 = ax + d[2], y2 = ay + d[3];
                    y[0 * n_anchors + a] = (x1 + x2) / 2.0f * stride;
                    y[1 * n_anchors + a] = (y1 + y2) / 2.0f * stride;
                    y[2 * n_anchors + a] = (x2 - x1) * stride;
                    y[3 * n_anchors + a] = (y2 - y1) * stride;
                    for (int cl = 0; cl < nc; cl++) {
                        float logit = v[(size_t)(4 * bins + cl) * plane];
                        y[(size_t)(4 + cl) * n_anchors + a] = 1.0f / (1.0f + expf(-logit));
                    }
                }
            }
        }
    }
}

const gr_op_hooks gr_op_dfl_head_hooks = {.infer = infer, .cost = cost,
                                          .rows = gr_op_rows_whole, .ref = ref};
