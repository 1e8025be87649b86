/* dequantize (planner-inserted, no Darknet section): quantized values carried as floats back to
 * real values. int8: x = q * scale; f16: identity (an f16 value is already an exact float). */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    cost->flops = c->p->dtype == GR_DTYPE_I8 ? (double)gr_shape_elems(c->out) : 0.0;
}

static void ref(const gr_op_ctx *c)
{
    const size_t n = (size_t)c->batch * gr_shape_elems(c->in[0]);
    if (c->p->dtype == GR_DTYPE_F16) {
        memcpy(c->dst, c->src[0], n * sizeof *c->dst);
    } else {
        for (size_t i = 0; i < n; i++)
            c->dst[i] = c->src[0][i] * c->p->scale;
    }
}

/* Shape rule: quantize's (ops/quantize.c); elementwise, row for row. */
const gr_op_hooks gr_op_dequantize_hooks = {.infer = gr_op_quant_infer, .cost = cost, .ref = ref,
                                            .defaults = gr_op_quant_defaults};
