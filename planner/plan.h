/* The execution plan: a network's layer list (gr_net) turned into a scheduled DAG of nodes and
 * tensors with dtypes, layouts, int8 scales, arena offsets, live intervals and stream ids. The GPU
 * runtime consumes it as is; the CPU executor (gr_plan_execute) runs it inside the same arena so
 * every layout and memory decision is tested without a GPU. No CUDA in here.
 *
 * Shape of a plan ("the tensor is data; the node is an op with inputs and outputs; the graph is
 * arrays in schedule order"): plan->nodes[0..n_nodes) in schedule order, plan->tensors, and
 * plan->buffers (storage shared by tensors that alias: in-place results and concat slices). All
 * cross references are indices. Same net + same options -> byte-identical plan.
 *
 * Layouts (the contract with kernels/; docs/planner.md has the same with tables):
 *   - f32: NCHW. Element (n, c, y, x) at ((n*c_stride + c_offset + c)*h + y)*w + x.
 *   - f16 / i8: NHWC channels-last, channels padded to c_pad = round_up(c, 8) (f16) or
 *     round_up(c, 16) (i8); padding channels hold 0. Element at ((n*h + y)*w + x)*c_stride +
 *     c_offset + c.
 *   - u8 network input: NHWC, c = 3 unpadded, value v means v / 255.
 *   For a tensor that owns its storage c_stride = c (NCHW) or c_pad (NHWC) and c_offset = 0; a
 *   concat slice has the concat tensor's c_stride and its own channel offset (a multiple of 8/16
 *   for NHWC by construction).
 *
 * Epilogue math (the spec the GPU kernels implement bit for bit; acc is the convolution sum):
 *   f32 conv : y = acc + b'[c]; y = act(y); out = y                          (acc in f32)
 *   f16 conv : operands half(w'), half inputs; acc in f32 (f16 with fp16_accumulate);
 *              y = acc + b'[c]; y = act(y); out = __float2half_rn(y)
 *   i8 conv  : s_w[c] = max_k |w'[c,k]| / 127 (1.0 when all zero);
 *              q_w = clamp(rint(w' / s_w[c]), -127, 127); acc = sum q_in * q_w in int32;
 *              m[c] = s_in * s_w[c] (f32 multiply on the host);
 *              y = fmaf((float)acc, m[c], b'[c]); y = act(y);
 *              i8 out : q = clamp(rint(y * inv_s_out), -127, 127), inv_s_out = 1.0f / s_out (f32)
 *              f16 out: half_rn(y); f32 out: y
 *   act in the f16/i8 epilogues: leaky y > 0 ? y : 0.1f*y, relu y > 0 ? y : 0, logistic
 *   1.0f/(1.0f+expf(-y)); the CPU fp32 path uses gr_activate (Darknet's CPU code, = the refs).
 *   rint = round half to even (__float2int_rn). Fused maxpool (GR_FUSED_MAXPOOL) takes the max of
 *   the activated y over the window before the output conversion.
 *   Fused input quantize (GR_FUSED_QUANTIZE_IN): the conv reads the u8 network input and loads v
 *   as clamp(rint((v / 255.0f) / s_in), -127, 127) (i8, s_in = node->in_scale) or
 *   half_rn(v / 255.0f) (f16), the quantize formulas below; the rest is unchanged.
 *   Fused output dequantize (GR_FUSED_DEQUANT_OUT): the output is f32 NCHW and nothing is rounded:
 *     i8: y = fmaf((float)acc, m[c], b'[c]); y = act(y); out = y   (no int8, no output scale)
 *     f16: y = acc + b'[c]; y = act(y); out = y                    (no half rounding)
 *   BN folding (Darknet's formula, epsilon on the standard deviation):
 *     d[c] = sqrt(var[c]) + 0.000001 (in double, as Darknet), w' = (float)(w * scale[c] / d[c]),
 *     b' = (float)(bias[c] - mean[c] * scale[c] / d[c]); without BN w' = w, b' = bias.
 *   Quantize  u8 -> i8 : clamp(rint((v / 255.0f) / s), -127, 127);  u8 -> f16: half_rn(v / 255.0f)
 *             f32 -> i8: clamp(rint(x / s), -127, 127);             f32 -> f16: half_rn(x)
 *   Dequantize i8 -> f32: q * s; f16 -> f32: exact. Convert u8 -> f32: v / 255.0f;
 *             i8 -> f16: half_rn(q * s); f16 -> i8: clamp(rint(x / s), -127, 127).
 *   Shortcut on i8: dequantize both (q * s), add, act, requantize with the output scale as above.
 *   maxpool / upsample / reorg / route work on the stored values. */
#ifndef GR_PLANNER_PLAN_H
#define GR_PLANNER_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "models/net.h"

/* Node kinds: every op of ops.def keeps its gr_op_kind value; the planner adds these. */
enum {
    GR_NODE_INPUT = GR_OP_COUNT, /* writes the network input (pinned); nothing to compute */
    GR_NODE_OUTPUT,              /* marks a plan output (pinned); nothing to compute */
    GR_NODE_CONVERT,             /* u8 -> f32, i8 <-> f16 (quantize/dequantize are ops.def rows) */
    GR_NODE_KIND_COUNT
};

/* Parts fused into a node (conv epilogue, shortcut activation). */
enum {
    GR_FUSED_BN = 1u << 0,       /* batch norm folded into the weights and bias */
    GR_FUSED_BIAS = 1u << 1,     /* bias added in the epilogue */
    GR_FUSED_ACT = 1u << 2,      /* activation (not linear) applied in the epilogue */
    GR_FUSED_REQUANT = 1u << 3,  /* int8 output: requantized with the output scale */
    GR_FUSED_CONVERT = 1u << 4,  /* f16 output rounded in the epilogue */
    GR_FUSED_MAXPOOL = 1u << 5,  /* the following maxpool is applied before the output conversion */
    GR_FUSED_QUANTIZE_IN = 1u << 6, /* conv reads the u8 network input and quantizes it itself */
    GR_FUSED_DEQUANT_OUT = 1u << 7  /* conv writes f32 NCHW directly (its dequantize folded in),
                                       possibly a channel slice (c_stride, c_offset) of a concat */
};

typedef enum gr_layout { GR_LAYOUT_NCHW = 0, GR_LAYOUT_NHWC } gr_layout;

#define GR_PLAN_ALIGN 256 /* every buffer offset and size is a multiple of this */

typedef struct gr_plan_tensor {
    int n, c, h, w;       /* batch, channels, rows, columns */
    gr_dtype dtype;
    gr_layout layout;
    int c_pad;            /* channels stored per pixel (NHWC) or per image (NCHW) of this tensor */
    int c_stride;         /* addressing, see the header comment */
    int c_offset;
    int view_of;          /* -1, or the tensor whose storage holds this one at channel c_offset */
    int inplace_of;       /* -1, or the tensor whose storage this one overwrites in place */
    int buffer;           /* storage (plan->buffers) */
    int producer;         /* node writing it */
    int layer;            /* net layer whose value this is, -1 for the network input */
    int live_begin;       /* schedule steps, inclusive */
    int live_end;
    int pinned;           /* network input or a plan output: live over the whole schedule */
    float scale;          /* i8: real value = q * scale */
    size_t bytes;         /* n * h * w * c_pad * dtype size (the slice itself for views) */
} gr_plan_tensor;

typedef struct gr_plan_buffer {
    size_t offset;        /* in the arena, multiple of GR_PLAN_ALIGN */
    size_t bytes;         /* rounded up to GR_PLAN_ALIGN */
    int live_begin, live_end;
    int root;             /* the tensor that owns it */
    int pinned;
} gr_plan_buffer;

typedef struct gr_plan_node {
    int kind;             /* gr_op_kind or GR_NODE_* */
    int layer;            /* net layer, -1 for planner-inserted nodes */
    gr_precision prec;    /* precision the node computes in */
    int n_inputs;
    int inputs[GR_MAX_INPUTS]; /* tensors */
    int output;           /* tensor, -1 for GR_NODE_OUTPUT */
    unsigned fused;       /* GR_FUSED_* */
    int noop;             /* nothing to run: a concat whose inputs were written into its slices */
    gr_op_params p;       /* the layer's params (conv activation is the fused one) */
    int pool_size, pool_stride, pool_pad, pool_layer; /* GR_FUSED_MAXPOOL */
    gr_dtype in_dtype;    /* GR_FUSED_QUANTIZE_IN: the dtype it computes on (i8 or f16) */
    float in_scale;       /* GR_FUSED_QUANTIZE_IN, i8: s_in, set with the other scales */
    /* conv / connected parameters in plan->weights (floats) and plan->qweights (int8) */
    size_t w_offset, n_w; /* weights, w' after folding: [filters][c/groups][size][size] */
    size_t b_offset;      /* bias b' [filters] */
    size_t bn_offset;     /* unfolded BN (fold_bn = 0): scales, mean, variance, [filters] each */
    size_t ws_offset;     /* i8: per-output-channel weight scales s_w [filters] */
    size_t qw_offset;     /* i8: quantized weights q_w, same order as w' */
    int file_wscale;      /* the model file's weight scales (ONNX Q/DQ) at fws_offset [filters]:
                             i8 uses them instead of max|w'|/127 */
    size_t fws_offset;
    int stream;           /* stream id, 0 = the origin stream */
    int record_event;     /* -1, or the event recorded on `stream` after this node */
    int wait_begin, n_waits; /* plan->waits[wait_begin ..): events to wait on before running */
} gr_plan_node;


typedef struct gr_plan_options {
    gr_precision precision;     /* uniform precision, and the default for unmapped layers */
    const gr_precision *layer_precision; /* NULL, or n_layer_precision entries (layer -> prec) */
    int n_layer_precision;
    int batch;                  /* >= 1 */
    int fold_bn;                /* 1 default */
    int fuse_maxpool;           /* 0 default: fuse a conv's sole-consumer maxpool */
    int fuse_input_quantize;    /* 0 default: a conv that is the only reader of the u8 input's
                                   quantize reads the u8 input itself (GR_FUSED_QUANTIZE_IN) */
    int fuse_output_dequantize; /* 0 default: a conv whose only reader is a dequantize writes
                                   the f32 result itself (GR_FUSED_DEQUANT_OUT); so do the convs
                                   whose outputs only a concat reads that only a dequantize
                                   reads, each into its channel slice of the f32 result (strided
                                   NCHW views whatever nchw_strided_views says: only the convs
                                   write them; with concat_in_place 0 an f32 copy instead) */
    const unsigned char *no_fuse_layer; /* NULL, or n_no_fuse_layer flags (layer -> 1: nothing is
                                   fused into that layer's conv; the GPU engine's per-layer
                                   fallback when a kernel refuses a fusion). Read during
                                   gr_plan_build only (cleared in plan->options: not owned) */
    int n_no_fuse_layer;
    int concat_in_place;        /* 1 default */
    int nchw_strided_views;     /* 0 default: f32 tensors stay dense (Layouts above), so f32 concats
                                   alias only at batch 1; 1 also aliases strided batch > 1 slices */
    int in_place;               /* 1 default: elementwise ops overwrite a dying input */
    int no_reuse;               /* 0 default; 1: no two tensors share arena bytes (no liveness
                                   reuse, no in-place results; concat slices stay views): the
                                   arena is the naive sum, and a task graph of the plan has only
                                   RAW edges (the dataflow executor's plans, docs/dataflow.md) */
    int single_stream;          /* 0 default */
    int max_streams;            /* 0 default = as many as the DAG's branches fork; else at most
                                   this many (a node that would fork one more continues the stream
                                   of its first input, after that stream's tail) */
    int decode_heads;           /* 0 default: outputs are the raw head convs; 1 keeps region/yolo */
    int weight_data;            /* 1 default: the plan carries the weights (copied from the net,
                                   BN folded, int8 quantized); 0: their offsets and sizes only,
                                   weights and qweights NULL - for an engine whose device weights
                                   are already made (a saved GPU engine's load), which then never
                                   touches the net's fp32 weights. Such a plan cannot run on the
                                   CPU (gr_plan_exec_create refuses it) */
    int input_u8;               /* -1 default: u8 NHWC network input for fp16/int8, f32 NCHW for
                                   fp32; 1 forces u8 (fp32 plans then convert on the device);
                                   0 forces f32 NCHW (fp16/int8 plans then quantize from f32) */
} gr_plan_options;

void gr_plan_options_default(gr_plan_options *opt);

typedef struct gr_plan {
    int n_layers;               /* of the source net */
    int net_w, net_h, net_c;
    int batch;
    gr_precision precision;
    int n_nodes, n_tensors, n_buffers;
    gr_plan_node *nodes;        /* schedule order */
    gr_plan_tensor *tensors;
    gr_plan_buffer *buffers;
    int input_tensor;
    int n_outputs;
    int *output_tensors;        /* [n_outputs], f32 NCHW, in head order */
    float *weights;             /* folded weights, biases, BN, weight scales */
    size_t n_weight_floats;
    size_t weight_capacity;     /* floats allocated at weights (gr_plan_reserve_floats) */
    int8_t *qweights;
    size_t n_qweights;
    int n_streams, n_events;
    int *waits;                 /* event ids, indexed by node wait_begin */
    int n_waits;
    int join_wait_begin, n_join_waits; /* after the last node, stream 0 waits on these (join) */
    size_t arena_bytes;         /* chosen placement */
    size_t lower_bound_bytes;   /* max over steps of the live bytes */
    size_t naive_bytes;         /* every tensor its own buffer */
    const char *placement;      /* name of the heuristic that won */
    int scales_ready;           /* every i8 tensor has a scale (calibrated or set) */
    int fused_nodes_removed;    /* bookkeeping for reports: nodes fused away (maxpools, Q/DQ), */
    int dead_nodes_removed;     /* dead nodes */
    gr_plan_options options;    /* as built; layer_precision is cleared (not owned), its effect
                                   is in the nodes' precisions */
    /* private to the planner */
    int cap_nodes, cap_tensors;
    uint64_t *order;            /* happens-before bit matrix, n_nodes rows of order_words */
    int order_words;
} gr_plan;

gr_status gr_plan_build(const gr_net *net, const gr_plan_options *opt, gr_plan **out);
void gr_plan_free(gr_plan *plan);

/* Name of a node kind ("conv", "quantize", "input", "convert"). */
const char *gr_plan_kind_name(int kind);
/* "bn+bias+leaky+requant" style list of the fused parts into buf; returns buf. */
const char *gr_plan_fused_str(const gr_plan_node *node, char *buf, size_t len);
int gr_plan_count_kind(const gr_plan *plan, int kind);
/* The dtype a conv computes on: its input tensor's, or, with GR_FUSED_QUANTIZE_IN, the one it
 * quantizes the u8 input to (node->in_dtype). */
gr_dtype gr_plan_conv_in_dtype(const gr_plan *plan, const gr_plan_node *nd);
/* The scale of the values a conv multiplies: its input tensor's, or node->in_scale with
 * GR_FUSED_QUANTIZE_IN. */
float gr_plan_conv_in_scale(const gr_plan *plan, const gr_plan_node *nd);

/* ---- int8 scales ------------------------------------------------------------------------- */
/* Set the activation range (max |x| or a percentile of |x|) of each net layer's output and of
 * the network input; every i8 tensor gets scale = range / 127 with scales unified where stored
 * values are shared (maxpool/upsample/reorg/route outputs and concat slices take one scale).
 * layer_range has plan->n_layers entries; a range <= 0 gives scale 1/127. */
gr_status gr_plan_set_ranges(gr_plan *plan, const float *layer_range, float input_range);

/* Host-side calibration on the CPU: run an fp32 plan of `net` (batch 1) over n_images inputs
 * (float NCHW c x h x w each, values in [0, 1]) and return per-layer ranges (layer_range has
 * net->n_layers entries) and the input range, by `method` (max, percentile, entropy, MSE over a
 * histogram of |x|: planner/calib_hist.h), on all cores. gr_plan_calibrate_images()
 * (planner/calib.h) takes a loader callback, a thread count and a progress callback instead. */
gr_status gr_plan_calibrate_ranges(const gr_net *net, const float *images, int n_images,
                                   gr_calib_method method, float percentile, float *layer_range,
                                   float *input_range);
/* Both steps at once. */
gr_status gr_plan_calibrate(gr_plan *plan, const gr_net *net, const float *images, int n_images,
                            gr_calib_method method, float percentile);

/* ---- CPU execution ----------------------------------------------------------------------- */
/* Storage for execution: arena mode (one block of arena_bytes, planned offsets) or private mode
 * (one malloc per buffer; for tests). */
typedef struct gr_plan_exec gr_plan_exec;
gr_status gr_plan_exec_create(const gr_plan *plan, int private_buffers, gr_plan_exec **out);
void gr_plan_exec_destroy(gr_plan_exec *ex);
/* Run the plan. input: f32 plans take float NCHW (batch x c x h x w, values in [0, 1]); u8 plans
 * take uint8 NHWC (batch x h x w x 3). Outputs are read with gr_plan_exec_output. */
gr_status gr_plan_execute(gr_plan_exec *ex, const void *input);
/* Output k as float NCHW (plan->tensors[output_tensors[k]] shape). */
const float *gr_plan_exec_output(const gr_plan_exec *ex, int k);
/* Copy any tensor out as float NCHW real values (i8 dequantized with its scale, u8 / 255).
 * dst holds n*c*h*w floats. Valid for tensors whose storage has not been reused yet. */
gr_status gr_plan_exec_read_tensor(const gr_plan_exec *ex, int tensor, float *dst);
/* Overwrite a buffer's storage (e.g. with a GPU's copy of the same buffer, to decode it with
 * gr_plan_exec_read_tensor). */
gr_status gr_plan_exec_load_buffer(gr_plan_exec *ex, int buffer, const void *src, size_t bytes);
/* Called after each node with the node index (calibration, debugging); NULL = none. */
void gr_plan_exec_set_hook(gr_plan_exec *ex, void (*hook)(const gr_plan_exec *, int node, void *),
                           void *user);

/* ---- views ------------------------------------------------------------------------------- */
gr_status gr_plan_dump_text(const gr_plan *plan, FILE *f);
gr_status gr_plan_dump_json(const gr_plan *plan, FILE *f);
gr_status gr_plan_dump_dot(const gr_plan *plan, FILE *f);
gr_status gr_plan_dump_svg(const gr_plan *plan, FILE *f);

/* ---- checks (tests, debugging) ----------------------------------------------------------- */
/* Verify the placement: no two buffers that may be live at once share bytes, every buffer fits
 * in the arena and is aligned, views lie inside their buffer. GR_ERR_INTERNAL with the pair. */
gr_status gr_plan_check(const gr_plan *plan);
/* True when node a's work is ordered before node b's (same stream or through events). */
int gr_plan_happens_before(const gr_plan *plan, int a, int b);

/* ---- roofline model (docs/performance.md, "Roofline") ------------------------------------- */
/* What node `node` of `plan` must compute and move for one pass (plan->batch images), at the
 * dtypes the plan gives it: flops as the op table's cost counts them (ops/<op>.c: 2 x multiply-adds
 * plus the elementwise epilogue) x batch; act_bytes the activations read and written (each input
 * tensor's and the output tensor's c x h x w x batch elements at its dtype: a fused maxpool's
 * pooled output, a fused quantize's u8 input); weight_bytes the weights at the node's precision
 * (i8 1, f16 2, f32 4 bytes) and its per-channel floats (bias b', i8 multipliers m[c], unfolded
 * BN), read once per pass whatever the batch. Nodes that launch nothing (input, output markers,
 * concats written in place) cost 0. GR_ERR_INVALID_ARGUMENT for a NULL plan or a node out of
 * range. */
typedef struct gr_plan_node_cost {
    double flops;
    double act_bytes;
    double weight_bytes;
} gr_plan_node_cost;
gr_status gr_plan_node_cost_of(const gr_plan *plan, int node, gr_plan_node_cost *cost);

#endif
