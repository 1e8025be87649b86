/* The dataflow executor on the GPU (docs/dataflow.md): whether a variant's plan can run as one
 * persistent kernel, its program (experimental/dataflow/plan.h) uploaded once per variant, a
 * protocol state per instance (run in flight), the kernel's launch between the input and the
 * output copy, and the check of the kernel's report after each run. runtime/gpu/engine.c decides
 * which executor a variant uses (the option, or measured for AUTO) and captures it;
 * runtime/gpu/dispatch.c enqueues it. Compiled with CUDA only. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "experimental/dataflow/kernel.h"
#include "experimental/dataflow/plan.h"
#include "kernels/common.h"
#include "runtime/gpu/backend.h"
#include "runtime/gpu/debug.h"

static _Atomic uint64_t df_timeout_ns; /* gr_debug_dataflow_timeout; 0: the program's default */

void gr_debug_dataflow_timeout(uint64_t ns)
{
    atomic_store(&df_timeout_ns, ns);
}

gr_status gr_gpu_dataflow_prepare(const gpu_state *g, gpu_variant *v, char *why, size_t len)
{
    const gr_plan *plan = v->plan;
    why[0] = '\0';
    if (g->observable)
        return GR_OK; /* calibration's engine: no executor choice to report */
    if (v->n_slices > 1) {
        snprintf(why, len, "micro-batched (%d passes of %d images)", v->n_slices, v->micro_batch);
        return GR_OK;
    }
    if (g->fp16_accumulate) {
        snprintf(why, len, "fp16_accumulate (the kernel accumulates fp16 convs in f32)");
        return GR_OK;
    }
    gr_kernels_clear_failure();
    if (gr_dataflow_check() != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, len, "%s", gr_kernels_last_failure());
        return GR_OK;
    }
    if (gr_df_plan_supported(plan) != GR_OK) {
        snprintf(why, len, "%s", gr_last_error());
        return GR_OK;
    }
    gr_task_graph *tg = NULL;
    GR_TRY(gr_task_graph_build(plan, NULL, &tg));
    gr_df_options o;
    gr_df_options_default(&o);
    const uint64_t timeout = atomic_load(&df_timeout_ns);
    if (timeout)
        o.timeout_ns = timeout;
    gr_status st = gr_df_program_build(plan, tg, &o, &v->df_program);
    gr_task_graph_free(tg);
    if (st == GR_ERR_UNSUPPORTED) {
        snprintf(why, len, "%s", gr_last_error());
        return GR_OK;
    }
    return st;
}

gr_status gr_gpu_dataflow_upload(gpu_variant *v)
{
    gr_df_program *p = v->df_program;
    const gr_plan *plan = v->plan;
    for (int i = 0; i < plan->n_nodes; i++) {
        if (p->node_of_plan[i] < 0 || plan->nodes[i].kind != GR_OP_CONV)
            continue;
        const gpu_conv_weights *w = &v->nw[i];
        if (!w->weights)
            return gr_fail(GR_ERR_INTERNAL, "dataflow: conv node %d has no uploaded weights", i);
        const uint64_t at = (uint64_t)((const uint8_t *)w->weights - v->weights);
        const uint64_t mul = w->mul ? (uint64_t)((const uint8_t *)w->mul - v->weights) : GR_DF_UNBOUND;
        const uint64_t bias = w->bias ? (uint64_t)((const uint8_t *)w->bias - v->weights)
                                      : GR_DF_UNBOUND;
        GR_TRY(gr_df_program_bind_weights(p, i, at, mul, bias));
    }
    GR_TRY(gr_df_program_check(p));
    CUDA_TRY(cudaMalloc(&v->df_device, p->bytes));
    CUDA_TRY(cudaMemcpy(v->df_device, p->blob, p->bytes, cudaMemcpyHostToDevice));
    return GR_OK;
}

gr_status gr_gpu_dataflow_alloc_state(const gpu_variant *v, gpu_instance *inst)
{
    const size_t bytes = gr_dataflow_state_bytes(v->df_program->header->n_flags);
    CUDA_TRY(cudaMalloc(&inst->df_state, bytes));
    CUDA_TRY(cudaMemset(inst->df_state, 0, bytes));
    inst->df_epoch = 0;
    return GR_OK;
}

gr_status gr_gpu_dataflow_launch(gpu_state *g, const gpu_variant *v, const gpu_instance *inst)
{
    const gr_df_header *h = v->df_program->header;
    const gr_plan *plan = v->plan;
    gr_dataflow_args a;
    memset(&a, 0, sizeof a);
    a.program = v->df_device;
    a.n_tasks = h->n_tasks;
    a.state = inst->df_state;
    a.spaces[GR_DF_SPACE_ARENA] = inst->arena;
    a.spaces[GR_DF_SPACE_INPUT] = inst->io;
    for (int k = 0; k < plan->n_outputs; k++)
        a.spaces[GR_DF_SPACE_OUTPUT + k] = inst->io + v->in_bytes + v->out_offset[k];
    a.weights = v->weights;
    a.status = (gr_df_status *)(void *)(inst->io + v->in_bytes + v->df_status_offset);
    a.skip_publish = g->df_skip_publish;
    a.trace = g->df_trace;
    gr_kernels_clear_failure();
    cudaError_t err = gr_launch_dataflow(&a, g->streams[0]);
    if (err == cudaErrorNotSupported)
        return gr_fail(GR_ERR_UNSUPPORTED, "dataflow kernel: %s", gr_kernels_last_failure());
    if (err != cudaSuccess)
        return gr_fail(err == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY : GR_ERR_CUDA,
                       "dataflow kernel: launch failed: %s (%s); %s", cudaGetErrorName(err),
                       cudaGetErrorString(err), gr_kernels_last_failure());
    return GR_OK;
}

/* "task 12 (node 3 conv, layer 4, image 0, rows 8..9, channels 0..31)" */
static void name_task(const gr_df_program *p, const gr_plan *plan, int t, char *buf, size_t len)
{
    if (t < 0 || t >= p->header->n_tasks) {
        snprintf(buf, len, "task %d (not in the program)", t);
        return;
    }
    const gr_df_task *dt = &p->tasks[t];
    const gr_df_node *dn = &p->nodes[dt->node];
    snprintf(buf, len, "task %d (node %d %s, layer %d, image %d, rows %d..%d, channels %d..%d)", t,
             dn->plan_node, gr_plan_kind_name(plan->nodes[dn->plan_node].kind), dn->layer,
             dt->image, dt->row0, dt->row0 + dt->rows - 1, dt->ch0, dt->ch0 + dt->chs - 1);
}

gr_status gr_gpu_dataflow_check_run(const gpu_variant *v, gpu_instance *inst)
{
    gr_df_status st;
    memcpy(&st, inst->host_out + v->df_status_offset, sizeof st);
    /* Every launch advances the epoch by one; runs the engine launched without checking (replay
     * timing) advance it further, so a newer report is all that is asked. */
    if (st.magic != GR_DF_MAGIC || (int32_t)(st.epoch - inst->df_epoch) <= 0)
        return gr_fail(GR_ERR_INTERNAL, "dataflow run: the kernel did not report (status magic "
                       "%08x, epoch %u after %u)", st.magic, st.epoch, inst->df_epoch);
    inst->df_epoch = st.epoch;
    if (st.failed_task < 0)
        return GR_OK;
    char waiting[160], missing[160];
    name_task(v->df_program, v->plan, st.failed_task, waiting, sizeof waiting);
    name_task(v->df_program, v->plan, st.waited_on, missing, sizeof missing);
    return gr_fail(GR_ERR_INTERNAL, "dataflow run %u: %s waited more than %.0f ms for %s, which "
                   "never completed: a dependency bug (the run was abandoned)", st.epoch, waiting,
                   (double)v->df_program->header->timeout_ns / 1e6, missing);
}

void gr_gpu_dataflow_free(gpu_variant *v)
{
    cudaFree(v->df_device); /* the instances' states go with them (gpu/engine.c) */
    v->df_device = NULL;
    gr_df_program_free(v->df_program);
    v->df_program = NULL;
}
