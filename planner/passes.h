/* The planner's passes, each a small function graph -> graph (the plan is rewritten in place) with
 * a test of its own. gr_plan_build runs them in this order:
 *   build_dag -> dead_nodes -> fold_bn -> fuse_maxpool -> precision -> fuse_epilogue ->
 *   quantize_weights -> concat_views -> streams -> memory
 * Internal to the planner and its tests. */
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
gr_status gr_pass_precision(gr_plan *plan, gr_precision input_side);
/* Record bias/activation/requantize/convert as fused parts of each conv (and shortcut act). */
gr_status gr_pass_fuse_epilogue(gr_plan *plan);
/* Per-output-channel symmetric int8 weights for every conv computing in int8. */
gr_status gr_pass_quantize_weights(gr_plan *plan);
/* Concatenation without a copy: producers write into their channel slice of the route's tensor;
 * the route becomes a no-op. */
gr_status gr_pass_concat_views(gr_plan *plan, int nchw_strided_views);
/* Stream ids and fork/join events; builds the happens-before matrix. */
gr_status gr_pass_streams(gr_plan *plan, int single_stream);
/* Live intervals, in-place reuse, buffers, arena placement, lower bound and naive sum. */
gr_status gr_pass_memory(gr_plan *plan, int in_place);

/* Helpers shared by the passes. */
int gr_plan_new_tensor(gr_plan *plan, int n, int c, int h, int w, gr_dtype dtype, int layer);
int gr_plan_new_node(gr_plan *plan, int kind, int layer);
void gr_plan_set_dtype(gr_plan_tensor *t, gr_dtype dtype);
/* Remove nodes with kind < 0 and tensors nobody produces or reads, remapping indices. */
gr_status gr_plan_compact(gr_plan *plan);
/* The tensor owning t's storage through views and in-place links. */
int gr_plan_root(const gr_plan *plan, int t);
/* Number of consumers of tensor t (node input slots referencing it). */
int gr_plan_consumers(const gr_plan *plan, int t);

#endif
