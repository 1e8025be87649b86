/* Internal hooks of the CUDA backend for the GPU tests and the benchmark: what the captured graph
 * holds, and the plan the engine runs. Not part of the public API. */
#ifndef GR_RUNTIME_GPU_INTERNAL_H
#define GR_RUNTIME_GPU_INTERNAL_H

#include "graphrun/runtime.h"

typedef struct gr_graph_info {
    int nodes;        /* every node of the captured graph */
    int kernels;
    int memcpy_h2d;   /* host -> device copies */
    int memcpy_d2h;   /* device -> host copies */
    int memcpy_other; /* device -> device or host -> host copies */
    int memsets;
    int mem_alloc;    /* memory allocation / free nodes */
    int mem_free;
    int events;       /* event record / wait nodes */
    int empty;        /* join points */
    int other;
} gr_graph_info;

/* Inspect the captured graph of the engine's current input type (GR_ERR_STATE for a CPU engine
 * or one running eagerly). */
gr_status gr_engine_graph_info(const gr_engine *engine, gr_graph_info *info);

/* Number of plan nodes that launch work, and the plan's arena bytes. */
gr_status gr_engine_plan_stats(const gr_engine *engine, int *launching_nodes, size_t *arena_bytes);

#endif
