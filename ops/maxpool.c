/* [maxpool]: Darknet's max pooling. `pad` holds Darknet's total padding (default size-1, resolved
 * by the parser). out = (in + padding - size)/stride + 1; the window of output i starts at
 * i*stride + (-padding)/2 (C's truncating division), and taps outside the input count as
 * -FLT_MAX, i.e. never win. So size 2 / stride 1 keeps the size and pads only right and bottom,
 * and size 2 / stride 2 gives ceil(in/2). */
#include <float.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_maxpool_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_MAXPOOL;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 1));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_range(op, "size", p->size, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "padding", p->pad, 0, GR_MAX_DIM));
    /* A window lies wholly in the padding (and would output -FLT_MAX) exactly when
     * ceil(padding/2) >= size; Darknet would compute that garbage, we refuse it. */
    if ((p->pad + 1) / 2 >= p->size)
        return gr_fail(GR_ERR_PARSE,
                       "[maxpool] padding %d too large for size %d (at most 2*size-2 = %d)",
                       p->pad, p->size, 2 * p->size - 2);
    long long span_h = (long long)in[0].h + p->pad;
    long long span_w = (long long)in[0].w + p->pad;
    if (span_h < p->size || span_w < p->size)
        return gr_fail(GR_ERR_PARSE, "[maxpool] size %d larger than the padded input %lldx%lld",
                       p->size, span_h, span_w);
    return gr_op_set_output(op, in[0].c, (span_h - p->size) / p->stride + 1,
                            (span_w - p->size) / p->stride + 1, out);
}

void gr_op_maxpool_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                        gr_cost *cost)
{
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    /* one comparison per tap */
    cost->flops = (double)gr_shape_elems(out) * (double)p->size * (double)p->size;
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Output row y reads input rows y*stride + (-padding)/2 + [0, size) (the header's window). */
void gr_op_maxpool_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                        int r0, int r1, int *lo, int *hi)
{
    (void)n_in;
    (void)out;
    (void)k;
    gr_op_rows_window(r0, r1, p->stride, -p->pad / 2, p->size, in[0].h, lo, hi);
}

void gr_op_maxpool_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                       const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                       int batch)
{
    (void)w;
    (void)n_in;
    const gr_shape is = in_shapes[0];
    const int offset = -p->pad / 2;
    for (int b = 0; b < batch; b++) {
        for (int c = 0; c < is.c; c++) {
            const float *src = in[0] + ((size_t)b * is.c + c) * is.h * is.w;
            float *dst = out + ((size_t)b * out_shape.c + c) * out_shape.h * out_shape.w;
            for (int oy = 0; oy < out_shape.h; oy++) {
                for (int ox = 0; ox < out_shape.w; ox++) {
                    float best = -FLT_MAX;
                    for (int ky = 0; ky < p->size; ky++) {
                        int y = oy * p->stride + offset + ky;
                        if (y < 0 || y >= is.h)
                            continue;
                        for (int kx = 0; kx < p->size; kx++) {
                            int x = ox * p->stride + offset + kx;
                            if (x < 0 || x >= is.w)
                                continue;
                            float v = src[(size_t)y * is.w + x];
                            best = v > best ? v : best;
                        }
                    }
                    dst[(size_t)oy * out_shape.w + ox] = best;
                }
            }
        }
    }
}
