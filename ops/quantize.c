/* quantize (planner-inserted, no Darknet section): float -> the quantized dtype, values carried
 * as floats.
 *   int8: q = clamp(round_half_even(x / scale), -127, 127). Round half to even is what the GPU's
 *         __float2int_rn does; we implement it without relying on the FPU rounding mode (rintf
 *         would follow fesetround). The range is symmetric (-128 unused). NaN maps to 0, as
 *         __float2int_rn does.
 *   f16:  q = the nearest binary16 value (gr_round_f16, round to nearest even). */
#include <math.h>
#include <string.h>

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

gr_status gr_op_quantize_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    GR_TRY(gr_op_check_n_in(GR_OP_QUANTIZE, in, n_in, 1));
    GR_TRY(gr_op_check_input(GR_OP_QUANTIZE, in[0], 0));
    GR_TRY(gr_op_check_quant_params(GR_OP_QUANTIZE, p));
    *out = in[0];
    return GR_OK;
}

void gr_op_quantize_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                         gr_cost *cost)
{
    (void)p;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->flops = 2.0 * (double)gr_shape_elems(out); /* scale, round/clamp */
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
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

/* Elementwise: row y of the output is row y of the input. */
void gr_op_quantize_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                         int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    (void)k;
    gr_op_rows_window(r0, r1, 1, 0, 1, in[0].h, lo, hi);
}

void gr_op_quantize_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                        const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                        int batch)
{
    (void)w;
    (void)n_in;
    (void)out_shape;
    const size_t n = (size_t)batch * gr_shape_elems(in_shapes[0]);
    if (p->dtype == GR_DTYPE_F16) {
        for (size_t i = 0; i < n; i++)
            out[i] = gr_round_f16(in[0][i]);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = quantize_i8(in[0][i], p->scale);
    }
}
