/* Helpers shared by the ops/<stem>.c files (not part of the op contract in ops.h): validation of
 * parameters and shapes with one-line messages in the "[section] what" form that the parser
 * prefixes with "file:line: ", and small loops the references share.
 *
 * Status codes: a parameter outside what Darknet accepts is GR_ERR_PARSE, a dimension or element
 * count beyond graphrun's limits is GR_ERR_LIMIT, valid Darknet that graphrun does not run is
 * GR_ERR_UNSUPPORTED, and a wrong number of inputs is GR_ERR_INVALID_ARGUMENT (the caller built
 * the layer, not the cfg). */
#ifndef GR_OPS_OP_UTIL_H
#define GR_OPS_OP_UTIL_H

#include "ops/ops.h"

/* The tag used in messages: the Darknet section ("convolutional"), or the op name for
 * planner-inserted ops ("quantize"). */
const char *gr_op_tag(gr_op_kind op);

/* n_in must equal `expected` and `in` must be non-NULL. */
gr_status gr_op_check_n_in(gr_op_kind op, const gr_shape *in, int n_in, int expected);
/* gr_op_check_n_in, then gr_op_check_input on each input: the usual start of an infer hook. */
gr_status gr_op_check_inputs(const gr_op_ctx *c, int expected);
/* Input k has positive dims within GR_MAX_DIM and at most GR_MAX_TENSOR_ELEMS elements. */
gr_status gr_op_check_input(gr_op_kind op, gr_shape s, int k);
/* lo <= value (GR_ERR_PARSE) and value <= hi (GR_ERR_LIMIT). */
gr_status gr_op_check_range(gr_op_kind op, const char *key, int value, int lo, int hi);
gr_status gr_op_check_activation(gr_op_kind op, gr_activation a);
/* Store (c, h, w) in *out after checking each dim is in 1..GR_MAX_DIM and the element count is
 * within GR_MAX_TENSOR_ELEMS. Dims are long long so callers can pass products without overflow. */
gr_status gr_op_set_output(gr_op_kind op, long long c, long long h, long long w, gr_shape *out);
/* quantize / dequantize: dtype i8 with a positive finite scale, or f16 (ops/quantize.c). */
gr_status gr_op_check_quant_params(gr_op_kind op, const gr_op_params *p);
/* The infer hook of both: one input, its shape kept, the quant params checked. */
gr_status gr_op_quant_infer(const gr_op_ctx *c, gr_shape *out);
/* ... and their defaults: i8, scale 1. */
void gr_op_quant_defaults(gr_op_params *p);

/* maxpool's window rule (ops/maxpool.c), shared by [local_avgpool]: size, stride and padding
 * checked, out = (in + padding - size)/stride + 1; output row y reads input rows
 * y*stride + (-padding)/2 + [0, size). */
gr_status gr_op_pool_window_infer(const gr_op_ctx *c, gr_shape *out);
void gr_op_pool_window_rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi);
/* ... and its defaults: stride 1, size = stride, padding = size - 1. */
void gr_op_pool_window_defaults(gr_op_params *p);
void gr_op_pool_window_resolve(gr_op_params *p);

/* Apply `a` to n consecutive values in place. */
void gr_activate_array(float *x, size_t n, gr_activation a, gr_act_form form);
/* Elementwise flops charged for one activation (linear 0, leaky/relu 1, logistic 4, swish 5,
 * mish 8, gelu 10, other exp-based 5, piecewise 2): rough counts of the arithmetic and transcendental calls, used for cost estimates only. */
double gr_activation_flops(gr_activation a);
/* Darknet's softmax over n values spaced `stride` apart (max subtracted, exp in double like
 * Darknet's exp() call, float sum). */
void gr_softmax_strided(const float *input, size_t n, size_t stride, float *output);
/* The same with its own output stride (e.g. strided input to a contiguous vector). */
void gr_softmax_strided_to(const float *input, size_t n, size_t in_stride, float *output,
                           size_t out_stride);

/* Row dependence helpers for the ops' rows() (ops/ops.h). Every row of an input of h rows. */
void gr_op_rows_all(int h, int *lo, int *hi);
/* Output row y reads input rows y*stride + offset + [0, size), clamped to [0, h). */
void gr_op_rows_window(int r0, int r1, int stride, int offset, int size, int h, int *lo, int *hi);
/* A rows hook: every output row reads every row of input k. */
void gr_op_rows_whole(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi);
/* A cost hook for `act(a op b)` element by element: one op plus the activation per output. */
void gr_op_cost_activated(const gr_op_ctx *c, gr_cost *cost);

#endif
