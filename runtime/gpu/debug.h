/* Internal hooks of the CUDA backend for the GPU tests and the benchmark: what the captured graph
 * holds, and the plan the engine runs. Not part of the public API. */
#ifndef GR_RUNTIME_GPU_DEBUG_H
#define GR_RUNTIME_GPU_DEBUG_H

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
 * or one running eagerly): slot 0's, or slot `slot`'s (runs in flight). */
gr_status gr_engine_graph_info(const gr_engine *engine, gr_graph_info *info);
gr_status gr_engine_slot_graph_info(const gr_engine *engine, int slot, gr_graph_info *info);

/* Number of plan nodes that launch work, and the plan's arena bytes. */
gr_status gr_engine_plan_stats(const gr_engine *engine, int *launching_nodes, size_t *arena_bytes);

/* Debugging and per-layer tests: run the plan eagerly on `input` (uint8 HWC), and after every node
 * that launches work call `fn` with the plan, the node index and the node's output tensor as
 * float NCHW real values (int8 dequantized with its scale), read back from the device. */
struct gr_plan;
typedef void (*gr_trace_fn)(const struct gr_plan *plan, int node, const float *values, void *user);
gr_status gr_engine_debug_trace(gr_engine *engine, const uint8_t *input, gr_trace_fn fn, void *user);
/* Fault injection (tests): the engine's next run fails as if the GPU had returned `cuda_error`
 * (a cudaError_t value). */
gr_status gr_engine_debug_inject_error(gr_engine *engine, int cuda_error);
/* Fault injection for the dataflow executor (tests): from the next run on, the kernel never
 * publishes the flag of task `task` (static order; -1 restores), so its consumers' waits time out
 * and the run returns the timeout error. The graphs are captured again. GR_ERR_STATE for an engine
 * that does not run the dataflow executor. Also: how many tasks its uint8 program has. */
gr_status gr_engine_debug_dataflow_skip_publish(gr_engine *engine, int task);
/* The dataflow programs of the engines this process builds from now on fail a run when a task
 * waits longer than `ns` for a dependency (0 restores the default, 200 ms): for tools that slow
 * the kernel down by orders of magnitude (compute-sanitizer: bench/12_dataflow_trace --timeout-ms). */
void gr_debug_dataflow_timeout(uint64_t ns);
gr_status gr_engine_debug_dataflow_tasks(const gr_engine *engine, int *n_tasks);
/* The dataflow kernel's per-task timeline (docs/dataflow.md, "Where the time goes"): `on` = 1
 * makes every later run write one gr_df_trace_record per task (the graphs are captured again,
 * with %globaltimer reads and a store per task more: a trace run is not a timed run); 0 stops.
 * _read waits for the engine's runs and copies the last run's n_tasks records (static order) of
 * the uint8-input program. GR_ERR_STATE for an engine that does not run the dataflow executor. */
struct gr_df_trace_record;
struct gr_df_program;
/* The uint8-input variant's dataflow program (the engine keeps it; valid while it lives). */
gr_status gr_engine_debug_dataflow_program(const gr_engine *engine,
                                           const struct gr_df_program **program);
gr_status gr_engine_debug_dataflow_trace(gr_engine *engine, int on);
gr_status gr_engine_debug_dataflow_trace_read(gr_engine *engine, struct gr_df_trace_record *records,
                                              int n_tasks);
/* JPEG decoding on the GPU (gr_engine_decode_jpegs), for its tests: the slot's uint8 device
 * input as it is now (bytes: the whole batch's), waiting for the slot's stream first; and the
 * pixels the decoder made of the k-th image it decoded in the slot's last call (interleaved RGB,
 * a new image the caller destroys). */
gr_status gr_engine_debug_device_input(gr_engine *engine, int slot, uint8_t *host, size_t bytes);
gr_status gr_engine_debug_jpeg_pixels(gr_engine *engine, int slot, int k, gr_image **out);
/* The host seconds every slot's gr_engine_decode_jpegs calls spent so far checking the files
 * (structure walk, nvJPEG's header parse) and inside nvjpegDecodeBatched; and waiting for the
 * slot's stream (its decoding finished) without running anything. */
gr_status gr_engine_debug_jpeg_host(const gr_engine *engine, double *check_s, double *call_s);
gr_status gr_engine_debug_slot_sync(gr_engine *engine, int slot);
/* The plan of the engine's uint8-input graph. */
const struct gr_plan *gr_engine_debug_plan(const gr_engine *engine);

#endif
