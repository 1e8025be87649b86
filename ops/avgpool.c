/* [avgpool]: Darknet's global average pool, c x h x w -> c x 1 x 1 (mean of each channel). */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_avgpool_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    (void)p;
    GR_TRY(gr_op_check_n_in(GR_OP_AVGPOOL, in, n_in, 1));
    GR_TRY(gr_op_check_input(GR_OP_AVGPOOL, in[0], 0));
    return gr_op_set_output(GR_OP_AVGPOOL, in[0].c, 1, 1, out);
}

void gr_op_avgpool_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                        gr_cost *cost)
{
    (void)p;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->flops = (double)gr_shape_elems(in[0]) + (double)gr_shape_elems(out); /* adds, divides */
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Global average: every output reads the whole plane. */
void gr_op_avgpool_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                        int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    (void)k;
    (void)r0;
    (void)r1;
    gr_op_rows_all(in[0].h, lo, hi);
}

void gr_op_avgpool_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                       const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                       int batch)
{
    (void)p;
    (void)w;
    (void)n_in;
    (void)out_shape;
    const gr_shape is = in_shapes[0];
    const size_t plane = (size_t)is.h * (size_t)is.w;
    for (int b = 0; b < batch; b++) {
        for (int c = 0; c < is.c; c++) {
            const float *src = in[0] + ((size_t)b * is.c + c) * plane;
            /* Darknet sums in float and divides by h*w */
            float sum = 0.0f;
            for (size_t i = 0; i < plane; i++)
                sum += src[i];
            out[(size_t)b * is.c + c] = sum / (float)plane;
        }
    }
}
