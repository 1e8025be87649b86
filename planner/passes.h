/* The planner's passes, each a small function graph -> graph (the plan is rewritten in place and
 * keeps plan->nodes a valid schedule) with a test of its own, and the plan helpers they share
 * (planner/plan.c). planner/pipeline.c holds the one table that orders them:
 *   build_dag -> dead_nodes -> fold_bn -> fuse_maxpool -> precision -> fuse_input_quantize ->
 *   fuse_output_dequantize -> fuse_epilogue -> quantize_weights -> concat_views -> streams ->
 *   memory
 * Each pass reads the options it needs from plan->options. Files: pass_dag.c (build_dag,
 * dead_nodes), pass_fold_bn.c, pass_fuse.c (maxpool, input quantize, output dequantize,
 * epilogue), pass_precision.c, pass_weights.c, pass_concat.c, pass_streams.c, placement.c
 * (memory), check.c (gr_plan_check). Internal to the planner and its tests. */
#ifndef GR_PLANNER_PASSES_H
#define GR_PLANNER_PASSES_H

#include "planner/plan.h"

/* A fresh plan holding one node per layer (f32 NCHW everywhere), the input node, one output node
 * per head (or per region/yolo layer with decode_heads), and copies of the conv weights. */
gr_status gr_pass_build_dag(const gr_net *net, const gr_plan_options *opt, gr_plan **out);
/* Remove nodes whose results reach no output node. */
gr_status gr_pass_dead_nodes(gr_plan *plan);
/* Fold batch norm into conv weights and bias (Darknet's formula, epsilon on the std). */
gr_status gr_pass_fold_bn(gr_plan *plan);
/* Fuse a maxpool into its producing conv when the conv's output has it as its only consumer. */
gr_status gr_pass_fuse_maxpool(gr_plan *plan);
/* Assign dtypes/layouts from each node's precision; insert quantize/dequantize/convert nodes
 * exactly where a consumer needs another dtype (one per tensor and target dtype). */
gr_status gr_pass_precision(gr_plan *plan);
/* A quantize of the u8 network input whose only consumer is a conv disappears: the conv reads
 * the u8 input and quantizes as it loads (GR_FUSED_QUANTIZE_IN). */
gr_status gr_pass_fuse_input_quantize(gr_plan *plan);
/* A dequantize whose input is a conv's output read by nothing else disappears: the conv writes
 * the f32 NCHW tensor from its unrounded epilogue value (GR_FUSED_DEQUANT_OUT). Likewise for a
 * concat (route) read only by the dequantize whose inputs are all convs' outputs read only by it:
 * each conv writes its channel slice of the f32 tensor, the route becomes a no-op of views. */
gr_status gr_pass_fuse_output_dequantize(gr_plan *plan);
/* Record bias/activation/requantize/convert as fused parts of each conv (and shortcut act). */
gr_status gr_pass_fuse_epilogue(gr_plan *plan);
/* Per-output-channel symmetric int8 weights for every conv computing in int8. */
gr_status gr_pass_quantize_weights(gr_plan *plan);
/* Concatenation without a copy: producers write into their channel slice of the route's tensor;
 * the route becomes a no-op. */
gr_status gr_pass_concat_views(gr_plan *plan);
/* Stream ids and fork/join events; builds the happens-before matrix. */
gr_status gr_pass_streams(gr_plan *plan);
/* Live intervals, in-place reuse, buffers, arena placement, lower bound and naive sum. */
gr_status gr_pass_memory(gr_plan *plan);

/* ---- helpers shared by the passes (planner/plan.c unless noted) ---------------------------- */
int gr_plan_new_tensor(gr_plan *plan, int n, int c, int h, int w, gr_dtype dtype, int layer);
int gr_plan_new_node(gr_plan *plan, int kind, int layer);
void gr_plan_set_dtype(gr_plan_tensor *t, gr_dtype dtype);
/* Channels an NHWC tensor of this dtype is padded to a multiple of (8 f16, 16 i8; 1 otherwise). */
int gr_plan_channel_granule(gr_dtype dtype);
/* Append count floats (zeros when src is NULL) to plan->weights; *offset receives where. Without
 * weight data (gr_plan_options.weight_data = 0) only the offset advances. */
gr_status gr_plan_append_floats(gr_plan *plan, const float *src, size_t count, size_t *offset);
/* Room for `count` more floats at plan->weights, so that the appends up to there move nothing
 * (a plan's weights are tens of MB: growing them append by append copied them again and again). */
gr_status gr_plan_reserve_floats(gr_plan *plan, size_t count);
/* Remove nodes with kind < 0 and tensors nobody produces or reads, remapping indices. */
gr_status gr_plan_compact(gr_plan *plan);
/* The tensor owning t's storage through views and in-place links. */
int gr_plan_root(const gr_plan *plan, int t);
/* Number of consumers of tensor t (node input slots referencing it). */
int gr_plan_consumers(const gr_plan *plan, int t);
/* The node reading tensor t when exactly one input slot of one node does, else -1. */
int gr_plan_sole_consumer(const gr_plan *plan, int t);
/* May the fusion passes fuse into conv node `conv`? (plan options' no_fuse_layer) */
int gr_plan_may_fuse(const gr_plan *plan, const gr_plan_node *conv);
/* placement.c: n_buffers x n_buffers, 1 where two buffers may be live at once (gr_plan_check
 * verifies the placement against the same relation). */
gr_status gr_plan_conflict_matrix(const gr_plan *plan, char **out);

/* Bit a of row b of the happens-before matrix (pass_streams.c builds it). */
static inline int gr_plan_order_bit(const gr_plan *plan, int a, int b)
{
    const uint64_t *row = plan->order + (size_t)b * (size_t)plan->order_words;
    return (int)((row[a / 64] >> (a % 64)) & 1u);
}

#endif
