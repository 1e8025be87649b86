/* [local_avgpool] (AlexeyAB Darknet): the mean of each maxpool window. The windows are maxpool's
 * (ops/maxpool.c, the same size / stride / padding keys and defaults, the same output size and
 * window start i*stride + (-padding)/2); forward_local_avgpool_layer (maxpool_layer.c) sums the
 * taps inside the input in float, in window order (row, then column), and divides by how many
 * there are, so a window cut by the padding averages fewer taps. */
#include "ops/op_util.h"
#include "ops/ops.h"

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    /* one add per tap, one divide */
    cost->flops = (double)gr_shape_elems(c->out) * ((double)c->p->size * (double)c->p->size + 1.0);
}

static float window_mean(const float *plane, gr_shape is, int y0, int x0, int size)
{
    float sum = 0.0f;
    int taps = 0;
    for (int dy = 0; dy < size; dy++) {
        const int y = y0 + dy;
        for (int dx = 0; dx < size; dx++) {
            const int x = x0 + dx;
            if (y < 0 || y >= is.h || x < 0 || x >= is.w)
                continue;
            sum += plane[(size_t)y * is.w + x];
            taps++;
        }
    }
    return sum / (float)taps; /* infer refuses windows wholly in the padding */
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_shape is = c->in[0], os = c->out;
    const int offset = -p->pad / 2;
    for (int b = 0; b < c->batch; b++)
        for (int ch = 0; ch < is.c; ch++) {
            const float *src = c->src[0] + ((size_t)b * is.c + ch) * is.h * is.w;
            float *dst = c->dst + ((size_t)b * os.c + ch) * os.h * os.w;
            for (int oy = 0; oy < os.h; oy++)
                for (int ox = 0; ox < os.w; ox++)
                    dst[(size_t)oy * os.w + ox] = window_mean(
                        src, is, oy * p->stride + offset, ox * p->stride + offset, p->size);
        }
}

const gr_op_hooks gr_op_local_avgpool_hooks = {.infer = gr_op_pool_window_infer, .cost = cost,
                                               .rows = gr_op_pool_window_rows, .ref = ref,
                                               .defaults = gr_op_pool_window_defaults,
                                               .resolve = gr_op_pool_window_resolve};
