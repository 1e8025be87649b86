/* [upsample]: nearest-neighbour upsampling by the integer factor `stride`:
 * out[c][y][x] = in[c][y/stride][x/stride]. (Darknet's negative stride, a downsample, and its
 * scale key are not supported by the parser.) */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_UPSAMPLE;
    const int s = c->p->stride;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "stride", s, 1, GR_MAX_DIM));
    const gr_shape in = c->in[0];
    return gr_op_set_output(op, in.c, (long long)in.h * s, (long long)in.w * s, out);
}

/* Output row y reads input row y/stride. */
static void rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    if (r1 <= r0) {
        *lo = *hi = 0;
        return;
    }
    *lo = r0 / c->p->stride;
    *hi = (r1 - 1) / c->p->stride + 1;
    if (*hi > c->in[k].h)
        *hi = c->in[k].h;
}

static void ref(const gr_op_ctx *c)
{
    const gr_shape is = c->in[0], os = c->out;
    const int s = c->p->stride;
    for (int b = 0; b < c->batch; b++) {
        for (int ch = 0; ch < is.c; ch++) {
            const float *src = c->src[0] + ((size_t)b * is.c + ch) * is.h * is.w;
            float *dst = c->dst + ((size_t)b * os.c + ch) * os.h * os.w;
            for (int y = 0; y < os.h; y++)
                for (int x = 0; x < os.w; x++)
                    dst[(size_t)y * os.w + x] = src[(size_t)(y / s) * is.w + x / s];
        }
    }
}

static void defaults(gr_op_params *p) { p->stride = 2; }

/* Cost: data movement only. */
const gr_op_hooks gr_op_upsample_hooks = {.infer = infer, .rows = rows, .ref = ref,
                                          .defaults = defaults};
