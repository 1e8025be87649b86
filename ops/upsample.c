/* [upsample]: nearest-neighbour upsampling by the integer factor `stride`:
 * out[c][y][x] = in[c][y/stride][x/stride]. (Darknet's negative stride, a downsample, and its
 * scale key are not supported by the parser.) */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_upsample_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_UPSAMPLE;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 1));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, GR_MAX_DIM));
    return gr_op_set_output(op, in[0].c, (long long)in[0].h * p->stride,
                            (long long)in[0].w * p->stride, out);
}

void gr_op_upsample_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                         gr_cost *cost)
{
    (void)p;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Output row y reads input row y/stride. */
void gr_op_upsample_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                         int r0, int r1, int *lo, int *hi)
{
    (void)n_in;
    (void)out;
    (void)k;
    if (r1 <= r0) {
        *lo = *hi = 0;
        return;
    }
    *lo = r0 / p->stride;
    *hi = (r1 - 1) / p->stride + 1;
    if (*hi > in[0].h)
        *hi = in[0].h;
}

void gr_op_upsample_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                        const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                        int batch)
{
    (void)w;
    (void)n_in;
    const gr_shape is = in_shapes[0];
    const int s = p->stride;
    for (int b = 0; b < batch; b++) {
        for (int c = 0; c < is.c; c++) {
            const float *src = in[0] + ((size_t)b * is.c + c) * is.h * is.w;
            float *dst = out + ((size_t)b * out_shape.c + c) * out_shape.h * out_shape.w;
            for (int y = 0; y < out_shape.h; y++)
                for (int x = 0; x < out_shape.w; x++)
                    dst[(size_t)y * out_shape.w + x] = src[(size_t)(y / s) * is.w + x / s];
        }
    }
}
