/* [shortcut]: out = activation(x + from). Inputs: in[0] = x (the previous layer), in[1] = the
 * `from` layer. The output has x's shape. When the shapes differ Darknet's shortcut_cpu rule
 * applies: with stride = w_from/w_x and sample = w_x/w_from (each at least 1), for the first
 * min(c) channels and min(h) x min(w) positions, x[k][j*sample][i*sample] +=
 * from[k][j*stride][i*stride]; everything else passes x through unchanged. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SHORTCUT;
    GR_TRY(gr_op_check_inputs(c, 2));
    GR_TRY(gr_op_check_activation(op, c->p->activation));
    /* Darknet asserts the width and height ratios agree */
    const gr_shape x = c->in[0], from = c->in[1];
    if (from.w / x.w != from.h / x.h || x.w / from.w != x.h / from.h)
        return gr_fail(GR_ERR_PARSE,
                       "[shortcut] from-layer %dx%d and input %dx%d differ in w and h ratio",
                       from.h, from.w, x.h, x.w);
    return gr_op_set_output(op, x.c, x.h, x.w, out);
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Input 0 (x) row for row; input 1 (from) only where the sampling above adds: output row
 * j*sample reads from-row j*stride, for j < min(h). */
static void rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    if (k == 0) {
        gr_op_rows_window(r0, r1, 1, 0, 1, c->in[0].h, lo, hi);
        return;
    }
    const gr_shape xs = c->in[0], fs = c->in[1];
    const int stride = fs.w / xs.w > 1 ? fs.w / xs.w : 1;
    const int sample = xs.w / fs.w > 1 ? xs.w / fs.w : 1;
    const int min_h = min_int(xs.h, fs.h);
    const int j0 = (r0 + sample - 1) / sample, j1 = min_int((r1 - 1) / sample, min_h - 1);
    if (r1 <= r0 || j0 > j1) {
        *lo = *hi = 0;
        return;
    }
    *lo = j0 * stride;
    *hi = j1 * stride + 1;
}

static void ref(const gr_op_ctx *c)
{
    const gr_shape xs = c->in[0], fs = c->in[1];
    int stride = fs.w / xs.w, sample = xs.w / fs.w;
    if (stride < 1)
        stride = 1;
    if (sample < 1)
        sample = 1;
    const int min_c = min_int(xs.c, fs.c), min_h = min_int(xs.h, fs.h),
              min_w = min_int(xs.w, fs.w);
    const size_t out_elems = gr_shape_elems(c->out);
    memcpy(c->dst, c->src[0], (size_t)c->batch * out_elems * sizeof *c->dst);
    for (int b = 0; b < c->batch; b++) {
        float *dst = c->dst + (size_t)b * out_elems;
        const float *from = c->src[1] + (size_t)b * gr_shape_elems(fs);
        for (int k = 0; k < min_c; k++)
            for (int j = 0; j < min_h; j++)
                for (int i = 0; i < min_w; i++)
                    dst[(size_t)i * sample +
                        (size_t)xs.w * ((size_t)j * sample + (size_t)xs.h * k)] +=
                        from[(size_t)i * stride +
                             (size_t)fs.w * ((size_t)j * stride + (size_t)fs.h * k)];
        gr_activate_array(dst, out_elems, c->p->activation, gr_act_form_of(c->p, false));
    }
}

const gr_op_hooks gr_op_shortcut_hooks = {.infer = infer, .cost = gr_op_cost_activated,
                                          .rows = rows, .ref = ref};
