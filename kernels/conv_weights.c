/* Re-layout of convolution weights for the tensor-core kernels (see conv_weights.h). */
#include "kernels/conv_weights.h"

#include "base/base.h"

static int round_up(int v, int to) { return (v + to - 1) / to * to; }

size_t gr_conv_weights_count(int out_c, int in_c, int ksize, int granule)
{
    return (size_t)out_c * (size_t)ksize * (size_t)ksize * (size_t)round_up(in_c, granule);
}

/* Position in Darknet's order of weight (c, ci, ky, kx). */
static size_t darknet_index(int c, int ci, int ky, int kx, int in_c, int ksize)
{
    return (((size_t)c * in_c + ci) * ksize + ky) * ksize + kx;
}

void gr_conv_weights_relayout_i8(const int8_t *q, int out_c, int in_c, int ksize, int8_t *out)
{
    int in_c_pad = round_up(in_c, 16);
    for (int c = 0; c < out_c; c++)
        for (int ky = 0; ky < ksize; ky++)
            for (int kx = 0; kx < ksize; kx++)
                for (int ci = 0; ci < in_c_pad; ci++)
                    *out++ = ci < in_c ? q[darknet_index(c, ci, ky, kx, in_c, ksize)] : 0;
}

void gr_conv_weights_relayout_f16(const float *w, int out_c, int in_c, int ksize, uint16_t *out)
{
    int in_c_pad = round_up(in_c, 8);
    for (int c = 0; c < out_c; c++)
        for (int ky = 0; ky < ksize; ky++)
            for (int kx = 0; kx < ksize; kx++)
                for (int ci = 0; ci < in_c_pad; ci++)
                    *out++ = ci < in_c ? gr_f32_to_f16(w[darknet_index(c, ci, ky, kx, in_c, ksize)])
                                       : 0;
}
