/* The dataflow program's binary format: the contract between its writer
 * (experimental/dataflow/plan.c), its reader on the device (the persistent kernel,
 * experimental/dataflow/kernel.cu; docs/dataflow.md) and its reader on the host
 * (tests/test_dataflow.c's emulation of the protocol). Plain C, no CUDA, no pointers: a program is
 * one contiguous block (header, nodes, tasks, dependencies) that one copy puts on the device, and
 * every reference inside it is an index or a byte offset. It includes nothing of the project, so
 * both the plan and the kernel part of experimental/dataflow/ may include it, and neither
 * includes the other (tests/test_layering.py).
 *
 * Protocol (docs/dataflow.md has the argument; the names here are the kernel's):
 *   - state: per run in flight, one gr_df_state followed by n_flags uint32 flags, zeroed once at
 *     allocation and never reset by the host.
 *   - epoch: a block reads state.epoch at start; the run's epoch is that + 1. Task t is complete in
 *     this run when flags[t] == epoch (the flag of task t is its index in the static order).
 *   - claim: a block takes the next task of the static order with an atomic add on
 *     state.next_task (the order is static, the block that runs a task is not: any set of resident
 *     blocks makes progress, so runs in flight on other streams cannot deadlock this one).
 *   - wait: for every dependency d: spin on a load of flags[d] until it equals epoch, with acquire
 *     semantics (the kernel: relaxed polls, then one fence.acq_rel), at most timeout_ns
 *     (%globaltimer); on timeout, or when state.error_task is set by another block, record the
 *     error (first one wins) and abandon the run.
 *   - publish: after the task's writes (every thread of the block; __syncthreads), one thread
 *     stores flags[t] = epoch with release semantics at device scope.
 *   - end: every block increments state.blocks_done (acq_rel); the last one writes the run's
 *     gr_df_status into the io block (the output copy brings it home), then clears next_task,
 *     blocks_done and the error fields and finally stores the run's epoch into state.epoch. The next run
 *     on the same stream starts after this kernel has ended (stream order), so it sees all of it. */
#ifndef GR_EXPERIMENTAL_DATAFLOW_FORMAT_H
#define GR_EXPERIMENTAL_DATAFLOW_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define GR_DF_MAGIC 0x31464447u /* "GDF1" little-endian */
#define GR_DF_VERSION 1u
#define GR_DF_MAX_INPUTS 4     /* a node's inputs (a route copy of more is unsupported) */
#define GR_DF_MAX_OUTPUTS 8    /* plan outputs (io spaces) */
#define GR_DF_MAX_SPACES (2 + GR_DF_MAX_OUTPUTS)
#define GR_DF_UNBOUND UINT64_MAX /* a weight offset not set by the runtime yet */

/* What a task computes. */
enum {
    GR_DF_OP_CONV = 0, /* i8 / f16 tensor-core conv with its fused epilogue */
    GR_DF_OP_MAXPOOL,  /* Darknet maxpool on stored values (i8 / f16 NHWC) */
    GR_DF_OP_UPSAMPLE, /* nearest, stored values (i8 / f16 NHWC) */
    GR_DF_OP_COPY,     /* a route that is not a view: its inputs' channels one after the other */
    GR_DF_OP_CONVERT,  /* u8 -> i8 / f16 (quantize the input), i8 / f16 -> f32 NCHW (dequantize) */
    GR_DF_OP_COUNT
};

/* Where a view's storage is: the kernel gets one base pointer per space. */
enum {
    GR_DF_SPACE_ARENA = 0,  /* the instance's activation arena */
    GR_DF_SPACE_INPUT = 1,  /* the network input in the io block */
    GR_DF_SPACE_OUTPUT = 2  /* + k: plan output k in the io block */
};

/* GR_DF_OP_CONV flags */
enum {
    GR_DF_CONV_I8 = 1u << 0,          /* computes on i8 (m16n8k32 IMMA), else f16 (m16n8k16 HMMA) */
    GR_DF_CONV_QUANTIZE_IN = 1u << 1, /* reads the u8 network input and quantizes it itself */
    GR_DF_CONV_POOL = 1u << 2,        /* fused maxpool (size 2) before the output conversion */
    GR_DF_CONV_DEQUANT_OUT = 1u << 3  /* writes f32 NCHW, nothing rounded */
};

/* A tensor as a task addresses it (planner/plan.h's layouts): element (n, c, y, x) of NHWC at
 * offset + (((n*h + y)*w + x)*c_stride + c_offset + c) * elem, of NCHW at
 * offset + (((n*c_stride + c_offset + c)*h + y)*w + x) * elem, from the space's base. */
typedef struct gr_df_view {
    uint64_t offset;  /* bytes from the space's base to the storage (c_offset not included) */
    int32_t space;    /* GR_DF_SPACE_* */
    int32_t dtype;    /* gr_dtype */
    int32_t layout;   /* 0 NCHW, 1 NHWC */
    int32_t n, c, h, w;
    int32_t c_pad;    /* channels stored per pixel (NHWC), written as 0 past c */
    int32_t c_stride, c_offset;
    float scale;      /* i8: real = q * scale */
    int32_t tensor;   /* the plan tensor (messages, the host emulation's shadow check) */
} gr_df_view;

typedef struct gr_df_node {
    int32_t op;         /* GR_DF_OP_* */
    int32_t plan_node;  /* schedule index in the plan (messages) */
    int32_t layer;      /* net layer, -1 for planner-inserted nodes */
    uint32_t flags;     /* GR_DF_CONV_* */
    int32_t n_inputs;
    gr_df_view in[GR_DF_MAX_INPUTS];
    gr_df_view out;
    /* conv: kernel, the conv's own map (before a fused pool), epilogue */
    int32_t ksize, stride, pad, activation; /* activation: gr_activation (= GR_CONV_ACT_*) */
    int32_t cin_pad;    /* input channels per tap in the GEMM's K (the weights' in_c_pad) */
    int32_t k_bytes;    /* ksize * ksize * cin_pad * elem: a filter's bytes, multiple of 16 */
    int32_t conv_h, conv_w;
    /* maxpool (fused into a conv, or the node itself): window size, stride and its start
     * y * stride + pool_offset, Darknet's (-pad) / 2; upsample: pool_stride is its stride */
    int32_t pool_size, pool_stride, pool_offset;
    float in_scale;       /* GR_DF_CONV_QUANTIZE_IN, i8: s_in */
    float out_inv_scale;  /* i8 output: 1.0f / s_out (f32, as the per-layer kernels) */
    int32_t reserved;
    /* bytes into the engine's weights block, set by the runtime after its upload:
     * weights [out_c][ksize][ksize][cin_pad], multipliers m[c] (i8) and biases b'[c] (f32) */
    uint64_t w_offset, mul_offset, bias_offset;
} gr_df_node;

typedef struct gr_df_task {
    int32_t node;              /* program node */
    int32_t image;             /* batch index */
    int32_t row0, rows;        /* output rows of the node's output view */
    int32_t ch0, chs;          /* output channels; the slice with ch0 + chs == c also writes the
                                  padding channels [c, c_pad) of NHWC outputs */
    int32_t dep_begin, n_deps; /* deps[dep_begin ..): tasks (= flags) complete before this one */
} gr_df_task;

/* The program's first bytes. Section offsets are from the header's first byte, each a multiple
 * of 16. */
typedef struct gr_df_header {
    uint32_t magic, version;
    int32_t n_nodes, n_tasks, n_deps, n_flags; /* n_flags == n_tasks (one flag per task) */
    uint64_t nodes_at, tasks_at, deps_at, total_bytes;
    uint64_t space_bytes[GR_DF_MAX_SPACES]; /* what each space must hold (arena, input, outputs) */
    int32_t n_spaces;
    int32_t max_fan_in;
    uint64_t timeout_ns; /* a wait longer than this is the run's error */
} gr_df_header;

/* The per-run-in-flight state before its flags (one cache line each for the hot words). */
typedef struct gr_df_state {
    uint32_t epoch;         /* runs completed on this state */
    uint32_t pad0[31];
    uint32_t next_task;     /* the next position of the static order to claim */
    uint32_t pad1[31];
    uint32_t blocks_done;   /* blocks that have finished this run */
    uint32_t pad2[31];
    int32_t error_task;     /* 1 + the task whose wait timed out (static order), 0 = none */
    int32_t error_dep;      /* the dependency it was waiting for */
    uint32_t pad3[30];
} gr_df_state;

/* What the last block of a run writes into the io block (after the outputs). */
typedef struct gr_df_status {
    uint32_t magic;   /* GR_DF_MAGIC: the kernel ran to its end */
    uint32_t epoch;   /* the run's epoch */
    int32_t failed_task; /* -1: none; else the task (static order) whose wait timed out */
    int32_t waited_on;   /* its dependency that was never published (-1 when none) */
} gr_df_status;

/* One task's trace record (debugging and the timeline in docs/dataflow.md): written by the block
 * that ran the task when the launch has a trace buffer (one record per task, static order). Times
 * are %globaltimer nanoseconds: claimed, dependencies satisfied (compute starts), published. */
typedef struct gr_df_trace_record {
    uint64_t claim_ns;
    uint64_t ready_ns;
    uint64_t done_ns;
    uint32_t sm;    /* %smid of the block */
    uint32_t block; /* blockIdx.x */
} gr_df_trace_record;

static inline size_t gr_df_state_bytes(int n_flags)
{
    return sizeof(gr_df_state) + (size_t)(n_flags > 0 ? n_flags : 1) * sizeof(uint32_t);
}

#endif
