/* quantize (planner-inserted, no Darknet section): float -> the quantized dtype, values carried
 * as floats.
 *   int8: q = clamp(round_half_even(x / scale), -127, 127). Round half to even is what the GPU's
 *         __float2int_rn does; we implement it without relying on the FPU rounding mode (rintf
 *         would follow fesetround). The range is symmetric (-128 unused). NaN maps to 0, as
 *         __float2int_rn does.
 *   f16:  q = the nearest binary16 value (gr_round_f16, round to nearest even). */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_check_quant_params(gr_op_kind op, const gr_op_params *p)
{
    if (p->dtype == GR_DTYPE_F16)
        return GR_OK;
    if (p->dtype != GR_DTYPE_I8)
        return gr_fail(GR_ERR_UNSUPPORTED, "[%s] dtype %s unsupported (only i8 and f16)",
                       gr_op_tag(op), gr_dtype_name(p->dtype));
    if (!(p->scale > 0.0f) || !isfinite(p->scale))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "[%s] int8 scale %g must be positive and finite",
                       gr_op_tag(op), (double)p->scale);
    return GR_OK;
}

gr_status gr_op_quant_infer(const gr_op_ctx *c, gr_shape *out)
{
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_quant_params(c->p->op, c->p));
    *out = c->in[0];
    return GR_OK;
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    cost->flops = 2.0 * (double)gr_shape_elems(c->out); /* scale, round/clamp */
}

static float round_half_even(float v)
{
    float r = roundf(v); /* half away from zero */
    if (fabsf(r - v) == 0.5f)
        r = 2.0f * roundf(0.5f * v); /* a tie: take the even neighbour */
    return r;
}

static float quantize_i8(float x, float scale)
{
    float v = x / scale;
    if (isnan(v))
        return 0.0f;
    float q = round_half_even(v);
    return q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
}

static void ref(const gr_op_ctx *c)
{
    const size_t n = (size_t)c->batch * gr_shape_elems(c->in[0]);
    if (c->p->dtype == GR_DTYPE_F16) {
        for (size_t i = 0; i < n; i++)
            c->dst[i] = gr_round_f16(c->src[0][i]);
    } else {
        for (size_t i = 0; i < n; i++)
            c->dst[i] = quantize_i8(c->src[0][i], c->p->scale);
    }
}

void gr_op_quant_defaults(gr_op_params *p)
{
    p->dtype = GR_DTYPE_I8;
    p->scale = 1.0f;
}

/* Elementwise: row y of the output is row y of the input. */
const gr_op_hooks gr_op_quantize_hooks = {.infer = gr_op_quant_infer, .cost = cost, .ref = ref,
                                          .defaults = gr_op_quant_defaults};
