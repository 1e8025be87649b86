/* The dataflow program: a plan and its task graph (planner/tasks.h) flattened into the block of
 * bytes the persistent dataflow kernel runs (format and protocol: experimental/dataflow/format.h;
 * design: docs/dataflow.md). Tasks in the static order, each with its node's parameters (op, views of its
 * inputs and output in the arena or the io block, conv shape, fused parts, weight offsets) and its
 * dependencies as indices of earlier tasks (their completion flags). No CUDA, no pointers inside
 * the block; the host struct around it carries what the runtime and the views need.
 *
 * Supported nodes (first version: what YOLOv2-tiny and yolov3-tiny need in int8 and fp16):
 *   - conv computing on i8 or f16 (not a direct-kernel conv: groups, dilation, stride_x !=
 *     stride_y), i8 / f16 NHWC output or, with its dequantize fused, f32 NCHW; the input
 *     quantize fused (u8 NHWC, at most 4 channels); a fused 2x2 maxpool (stride 1 or 2);
 *   - maxpool and upsample on i8 / f16 NHWC; a route that is not a view (a copy, no groups, at
 *     most GR_DF_MAX_INPUTS inputs, one dtype); quantize u8 -> i8 / f16 and dequantize
 *     i8 / f16 -> f32 NCHW;
 *   - input, output markers and in-place concats (no tasks).
 * Anything else makes gr_df_program_build fail with GR_ERR_UNSUPPORTED and the message
 * "unsupported: <op> (node N[, why])": the runtime then keeps the per-layer graph. */
#ifndef GR_EXPERIMENTAL_DATAFLOW_PLAN_H
#define GR_EXPERIMENTAL_DATAFLOW_PLAN_H

#include <stdio.h>

#include "experimental/dataflow/format.h"
#include "planner/plan.h"
#include "planner/tasks.h"

typedef struct gr_df_options {
    uint64_t timeout_ns;  /* a dependency waited on longer than this fails the run; 200 ms default */
} gr_df_options;

void gr_df_options_default(gr_df_options *opt);

typedef struct gr_df_program {
    void *blob;                 /* the device-ready block: header, nodes, tasks, deps */
    size_t bytes;
    gr_df_header *header;       /* = blob */
    gr_df_node *nodes;          /* into blob: header->n_nodes */
    gr_df_task *tasks;          /* into blob: header->n_tasks, in the static order */
    int32_t *deps;              /* into blob: header->n_deps */
    int *node_of_plan;          /* [plan->n_nodes]: program node, -1 for nodes without tasks */
    int *task_of_graph;         /* [graph->n_tasks]: position in the static order */
    int n_raw, n_war;           /* the graph's dependencies by kind */
} gr_df_program;

/* Can the dataflow kernel run every node of `plan`? GR_OK, or GR_ERR_UNSUPPORTED with
 * "unsupported: <op> (node N[, why])" for the first node it cannot (recorded with gr_fail). */
gr_status gr_df_plan_supported(const gr_plan *plan);

/* The program of `plan` and its task graph `g` (built from the same plan). Weight offsets are
 * GR_DF_UNBOUND until the runtime sets them (gr_df_program_bind_weights). */
gr_status gr_df_program_build(const gr_plan *plan, const gr_task_graph *g,
                              const gr_df_options *opt, gr_df_program **out);
void gr_df_program_free(gr_df_program *p);

/* The weights of plan node `plan_node` (a conv) at these byte offsets of the weights block. */
gr_status gr_df_program_bind_weights(gr_df_program *p, int plan_node, uint64_t w_offset,
                                     uint64_t mul_offset, uint64_t bias_offset);

/* Checks of the block against itself (tests, and the runtime before an upload): magic, section
 * bounds, every dependency an earlier task, every task's node and rows inside its view, every
 * view inside its space. GR_ERR_INTERNAL naming the first violation. */
gr_status gr_df_program_check(const gr_df_program *p);

/* One line per program node (op, tasks, fan-in, fused parts) and the totals. */
gr_status gr_df_program_dump_text(const gr_df_program *p, FILE *f);

/* "conv" / "maxpool" / "upsample" / "copy" / "convert". */
const char *gr_df_op_name(int op);

#endif
