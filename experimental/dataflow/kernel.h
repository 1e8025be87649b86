/* The persistent dataflow kernel (experimental/dataflow/kernel.cu): one launch runs a whole
 * dataflow program (experimental/dataflow/format.h, built by experimental/dataflow/plan.c) - every
 * block loops: claim the next task of the static order, start copying its first filters into shared memory, wait for its producers'
 * flags (bounded by %globaltimer), compute it with its fused epilogue, publish its flag. No
 * grid-wide barrier; the state makes the next launch valid without a host reset. Design and
 * protocol: docs/dataflow.md.
 *
 * Requirements: sm_80+ (cp.async, ldmatrix, mma.sync); checked at every launch
 * (cudaErrorNotSupported before). Launchers neither allocate nor synchronize. Plain C11 header. */
#ifndef GR_EXPERIMENTAL_DATAFLOW_KERNEL_H
#define GR_EXPERIMENTAL_DATAFLOW_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "experimental/dataflow/format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_dataflow_args {
    const void *program;       /* device copy of the program block (16-byte aligned) */
    int n_tasks;               /* the program's header->n_tasks (host copy) */
    void *state;               /* gr_df_state + n_flags flags, zeroed once, one per run in flight */
    void *spaces[GR_DF_MAX_SPACES]; /* base of each space: arena, io input, io outputs */
    const void *weights;       /* the weights block the nodes' w/mul/bias offsets index */
    gr_df_status *status;      /* where the last block reports the run (device memory) */
    int blocks;                /* 0 = every SM times the blocks that fit on one */
    int skip_publish;          /* tests: this task never publishes (the timeout path); -1 none */
    gr_df_trace_record *trace; /* debugging: n_tasks records of the run (NULL: none) */
    int smem_pool;             /* set by gr_launch_dataflow (callers leave 0): dynamic shared
                                  bytes per block, the conv tasks' pipeline stages */
} gr_dataflow_args;

/* Bytes of a run-in-flight's state for a program of n_flags flags (format.h beside this). */
size_t gr_dataflow_state_bytes(int n_flags);

/* Can this device run the kernel (sm_80+, the shared memory it needs)? cudaErrorNotSupported with
 * the reason in gr_kernels_last_failure() otherwise. */
cudaError_t gr_dataflow_check(void);

/* Launch the persistent kernel on `stream` (inside stream capture too: it is one kernel node). */
cudaError_t gr_launch_dataflow(const gr_dataflow_args *args, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
