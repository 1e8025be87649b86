/* attention: the multi-head self-attention of YOLO11's C2PSA (PSABlock's Attention), from an ONNX
 * import (models/onnx/import.c recognises the exported MatMul / Softmax subgraph; docs/onnx.md).
 * No Darknet section. Parameters: groups = heads, size = key_dim, scale = the scores' factor
 * (key_dim^-0.5 in YOLO11). The input is the qkv conv's output with its channels in blocks,
 * [q of every head | k of every head | v of every head]: c = heads * (2 key_dim + head_dim), so
 * head_dim = c / heads - 2 key_dim. With N = h * w tokens (pixels), per image and head
 *   scores[n][m] = scale * sum_j q[head*key_dim + j][n] * k[head*key_dim + j][m]
 *   attn[n][.] = softmax(scores[n][.])        (Darknet's softmax: max subtracted, float sum)
 *   out[head*head_dim + d][n] = sum_m v[head*head_dim + d][m] * attn[n][m]
 * which is PyTorch's (v @ softmax(q^T @ k * scale)^T).view(B, C, H, W): the output is
 * heads * head_dim x h x w. Every output pixel reads every input pixel (rows: whole). At most
 * GR_ATTENTION_MAX_TOKENS tokens (the GPU kernel keeps a query's scores in shared memory). */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_ATTENTION;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "heads", p->groups, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "key_dim", p->size, 1, GR_MAX_DIM));
    if (!isfinite(p->scale))
        return gr_fail(GR_ERR_PARSE, "%s: scale %g is not finite", gr_op_tag(op),
                       (double)p->scale);
    const gr_shape in = c->in[0];
    long long per_head = in.c / p->groups, head_dim = per_head - 2LL * p->size;
    if (in.c % p->groups != 0 || head_dim < 1)
        return gr_fail(GR_ERR_PARSE,
                       "%s: %d input channels are not %d heads of 2 x %d (q, k) + head_dim (v) "
                       "channels", gr_op_tag(op), in.c, p->groups, p->size);
    long long tokens = (long long)in.h * in.w;
    if (tokens > GR_ATTENTION_MAX_TOKENS)
        return gr_fail(GR_ERR_LIMIT, "%s: %dx%d = %lld tokens (graphrun's attention takes at "
                       "most %d: a smaller input size)", gr_op_tag(op), in.h, in.w, tokens,
                       GR_ATTENTION_MAX_TOKENS);
    return gr_op_set_output(op, (long long)p->groups * head_dim, in.h, in.w, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    double n = (double)c->in[0].h * c->in[0].w, head_dim = (double)c->out.c / p->groups;
    /* q.k and attn.v multiply-adds, the softmax (as softmax's: 8 per value) */
    cost->flops = (double)p->groups * n * n * (2.0 * p->size + 2.0 * head_dim + 8.0);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const int heads = p->groups, kd = p->size, hd = c->out.c / heads;
    const size_t n_tok = (size_t)c->in[0].h * (size_t)c->in[0].w;
    const size_t in_image = gr_shape_elems(c->in[0]), out_image = gr_shape_elems(c->out);
    float scores[GR_ATTENTION_MAX_TOKENS]; /* one query's, 16 kB */
    for (int b = 0; b < c->batch; b++) {
        const float *x = c->src[0] + (size_t)b * in_image;
        float *y = c->dst + (size_t)b * out_image;
        for (int h = 0; h < heads; h++) {
            const float *q = x + (size_t)h * kd * n_tok;
            const float *k = x + ((size_t)heads * kd + (size_t)h * kd) * n_tok;
            const float *v = x + ((size_t)2 * heads * kd + (size_t)h * hd) * n_tok;
            for (size_t n = 0; n < n_tok; n++) {
                for (size_t m = 0; m < n_tok; m++) {
                    float dot = 0.0f;
                    for (int j = 0; j < kd; j++)
                        dot += q[(size_t)j * n_tok + n] * k[(size_t)j * n_tok + m];
                    scores[m] = dot * p->scale;
                }
                gr_softmax_strided(scores, n_tok, 1, scores);
                for (int d = 0; d < hd; d++) {
                    float sum = 0.0f;
                    for (size_t m = 0; m < n_tok; m++)
                        sum += v[(size_t)d * n_tok + m] * scores[m];
                    y[((size_t)h * hd + (size_t)d) * n_tok + n] = sum;
                }
            }
        }
    }
}

static void defaults(gr_op_params *p)
{
    p->groups = 1;
    p->size = 1;
    p->scale = 1.0f;
}

const gr_op_hooks gr_op_attention_hooks = {.infer = infer, .cost = cost,
                                           .rows = gr_op_rows_whole, .ref = ref,
                                           .defaults = defaults};
