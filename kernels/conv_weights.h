/* Convolution weights in the tensor-core kernels' layout (kernels/conv.h): Darknet's order
 * [out_c][in_c][ksize][ksize] re-laid out as [out_c][ksize][ksize][in_c_pad], the padding input
 * channels 0, in_c_pad = round_up(in_c, granule) (8 for f16, 16 for i8). The values themselves
 * come from the planner: i8 takes its quantized weights as they are (plan->qweights, quantized
 * once by gr_pass_quantize_weights), f16 rounds its folded f32 weights w' to nearest even
 * (gr_f32_to_f16, the rounding the CPU emulation uses too). Plain C without CUDA, so the CPU
 * suites test it (tests/test_conv_weights.c); the GPU engine uploads the result. */
#ifndef GR_KERNELS_CONV_WEIGHTS_H
#define GR_KERNELS_CONV_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

/* Elements of the re-laid-out array: out_c * ksize * ksize * round_up(in_c, granule). */
size_t gr_conv_weights_count(int out_c, int in_c, int ksize, int granule);

/* q: [out_c][in_c][ksize][ksize] int8 -> out: gr_conv_weights_count(.., 16) elements. */
void gr_conv_weights_relayout_i8(const int8_t *q, int out_c, int in_c, int ksize, int8_t *out);

/* w: [out_c][in_c][ksize][ksize] f32 -> out: gr_conv_weights_count(.., 8) binary16 values. */
void gr_conv_weights_relayout_f16(const float *w, int out_c, int in_c, int ksize, uint16_t *out);

#endif
