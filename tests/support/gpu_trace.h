/* The GPU suites' node-by-node check in common: a GPU engine's own plan run on the planner's CPU
 * emulation (gr_plan_execute) and on the GPU one node at a time (gr_engine_debug_trace) from the
 * same uint8 input, each launching node's two outputs handed to the caller to judge. */
#ifndef GR_TESTS_SUPPORT_GPU_TRACE_H
#define GR_TESTS_SUPPORT_GPU_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "graphrun/runtime.h"

struct gr_plan;

/* After each launching node: the plan, the node, its output as float NCHW real values (int8
 * dequantized with its scale) from the GPU and from the emulation (NULL if the emulation wrote
 * none), and their element count (n*c*h*w of the node's output tensor). */
typedef void (*gr_test_node_fn)(const struct gr_plan *plan, int node, const float *gpu,
                                 const float *cpu, size_t count, void *user);

/* Run engine's plan (gr_engine_debug_plan) both ways on `input` (uint8 NHWC, the plan's batch)
 * and call fn for every launching node, in schedule order. GR_OK, or the status of what failed
 * (gr_last_error() says what); GR_ERR_UNSUPPORTED in a build without CUDA. */
gr_status gr_test_trace_nodes(gr_engine *engine, const uint8_t *input, gr_test_node_fn fn,
                              void *user);

/* Elements of a plan tensor: n*c*h*w. */
size_t gr_test_tensor_elems(const struct gr_plan *plan, int tensor);

/* got (the GPU's) against want (the reference) over count floats. NRMSE = sqrt(mean(d^2)) /
 * (max - min of want), over the values finite on both sides (range 0: divided by 1). */
typedef struct gr_test_diff {
    size_t differing;       /* values not bit-identical (NaN against NaN counts as equal) */
    size_t first;           /* index of the first of them; count when none */
    double nrmse, max_abs;
    double range;           /* max - min of want's finite values, 0 when constant */
    int nonfinite_mismatch; /* a value finite on one side only */
} gr_test_diff;
gr_test_diff gr_test_compare(const float *got, const float *want, size_t count);

/* "(n N, c C, y Y, x X): GPU g, CPU w" of element i of n x c x h x w arrays, into buf. */
void gr_test_where(char *buf, size_t len, size_t i, int c, int h, int w, const float *got,
                   const float *want);

#endif
