/* dequantize (planner-inserted, no Darknet section): quantized values carried as floats back to
 * real values. int8: x = q * scale; f16: identity (an f16 value is already an exact float). */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_dequantize_infer(const gr_op_params *p, const gr_shape *in, int n_in,
                                 gr_shape *out)
{
    GR_TRY(gr_op_check_n_in(GR_OP_DEQUANTIZE, in, n_in, 1));
    GR_TRY(gr_op_check_input(GR_OP_DEQUANTIZE, in[0], 0));
    GR_TRY(gr_op_check_quant_params(GR_OP_DEQUANTIZE, p));
    *out = in[0];
    return GR_OK;
}

void gr_op_dequantize_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                           gr_cost *cost)
{
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->flops = p->dtype == GR_DTYPE_I8 ? (double)gr_shape_elems(out) : 0.0;
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Elementwise: row y of the output is row y of the input. */
void gr_op_dequantize_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                           int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    (void)k;
    gr_op_rows_window(r0, r1, 1, 0, 1, in[0].h, lo, hi);
}

void gr_op_dequantize_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                          const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                          int batch)
{
    (void)w;
    (void)n_in;
    (void)out_shape;
    const size_t n = (size_t)batch * gr_shape_elems(in_shapes[0]);
    if (p->dtype == GR_DTYPE_F16) {
        memcpy(out, in[0], n * sizeof *out);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = in[0][i] * p->scale;
    }
}
