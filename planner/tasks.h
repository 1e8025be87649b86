/* The plan as a tile dataflow graph: the pass a dataflow executor runs from (issue "batch-1
 * latency through a new execution model"; docs/planner.md, "The task graph").
 *
 * Every node that computes is split into tasks: a band of output rows of one image x (convs
 * only) a slice of output channels, with everything fused into the node (pool, activation,
 * requantize). Each task lists the tasks it must wait for:
 *   - RAW: the producer tasks whose rows its input rows need. Each op says which input rows an
 *     output band reads (gr_op_info.rows, ops/ops.h); a conv with a fused maxpool composes the
 *     pool's window with the conv's. A no-op node (a concat written in place by its producers)
 *     has no tasks: its readers wait for the producers of its inputs instead.
 *   - WAR/WAW: writing a band overwrites arena bytes that an earlier tensor held (liveness
 *     reuse, or an in-place result over its dying input): the writer waits for every task that
 *     reads or writes those bytes of the earlier tensor (a byte nobody reads is still written,
 *     and that write must not land last). Byte ranges are the envelope of a band's elements;
 *     tasks of one node never wait for each other (in-place ops are elementwise).
 * Dependencies point only to earlier nodes in schedule order, so the graph is acyclic. The static
 * order is topological: by depth (1 + the deepest dependency), then node, then task index - the
 * order a persistent kernel hands tasks out in. Same plan + same options -> identical graph. */
#ifndef GR_PLANNER_TASKS_H
#define GR_PLANNER_TASKS_H

#include <stdio.h>

#include "planner/plan.h"

typedef struct gr_task {
    int node;               /* plan node (schedule index) */
    int image;              /* batch index */
    int row0, rows;         /* output rows [row0, row0 + rows) of the node's output tensor */
    int ch0, chs;           /* output channels [ch0, ch0 + chs) */
    int depth;              /* 1 + the largest depth among its dependencies (0 without any) */
    int dep_begin, n_deps;  /* graph->deps[dep_begin ..): task ids that complete first */
} gr_task;

typedef struct gr_task_options {
    int target_tasks;       /* tasks a node is split into, at most about this many (the SMs
                               that run them: 132 on an H100); 132 default */
    int channel_align;      /* a conv's channel slices are multiples of this; 16 default (the
                               int8 tensor-core tile; fp16 needs 8) */
} gr_task_options;

void gr_task_options_default(gr_task_options *opt);

typedef struct gr_task_node {
    int first, count;       /* tasks [first, first + count) in creation order (node-major) */
    int bands, rows_per_band, slices, channels_per_slice;
    int max_fan_in;
} gr_task_node;

typedef struct gr_task_graph {
    int n_tasks;
    gr_task *tasks;         /* node-major: node, image, band, slice */
    int n_deps;
    int *deps;
    int *order;             /* [n_tasks] task ids in the static (topological) order */
    int n_nodes;
    gr_task_node *nodes;    /* [n_nodes], per plan node; count 0 for nodes without work */
    int n_raw, n_war;       /* dependencies by kind: RAW, and storage reuse (WAR/WAW); a pair
                               counted once, as RAW if both */
    int max_fan_in, max_depth;
    gr_task_options options;
} gr_task_graph;

gr_status gr_task_graph_build(const gr_plan *plan, const gr_task_options *opt,
                              gr_task_graph **out);
void gr_task_graph_free(gr_task_graph *g);

/* Rows [*lo, *hi) of input k of plan node `node` that its output rows [r0, r1) read (the op's
 * rows() rule, composed with a fused maxpool's): what a task of that node reads. */
void gr_task_graph_input_rows(const gr_plan *plan, int node, int k, int r0, int r1, int *lo,
                              int *hi);

/* `graphrun plan --tasks`: a per-node table and the totals (text), or everything, every task
 * with its dependencies included (JSON). */
gr_status gr_task_graph_dump_text(const gr_task_graph *g, const gr_plan *plan, FILE *f);
gr_status gr_task_graph_dump_json(const gr_task_graph *g, const gr_plan *plan, FILE *f);

#endif
