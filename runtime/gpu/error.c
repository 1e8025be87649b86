/* The CUDA engine's failures as gr_status values with one-line messages: CUDA runtime calls,
 * kernel launchers (with the launcher's own record of the check that failed,
 * gr_kernels_last_failure()) and cuBLAS. */
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"
#include "runtime/gpu/backend.h"

/* "runtime/gpu/engine.c" from the compiler's (absolute) __FILE__. */
static const char *source_name(const char *file)
{
    const char *found = NULL;
    for (const char *p = strstr(file, "runtime/"); p; p = strstr(p + 1, "runtime/"))
        found = p;
    return found ? found : file;
}

gr_status gr_gpu_cuda_fail(cudaError_t err, const char *what, const char *file, int line)
{
    gr_status st = err == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY
                   : err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver
                       ? GR_ERR_NO_DEVICE
                       : GR_ERR_CUDA;
    return gr_fail(st, "CUDA error %s (%s) in %s (%s:%d)", cudaGetErrorName(err),
                   cudaGetErrorString(err), what, source_name(file), line);
}

/* "; kernels/pool.cu:231: <check>: invalid argument", or "" when the launcher recorded nothing. */
static const char *failure_suffix(char *buf, size_t len)
{
    const char *f = gr_kernels_last_failure();
    if (!f[0])
        return "";
    snprintf(buf, len, "; %s", f);
    return buf;
}

static gr_status no_kernel(const gr_plan *plan, int index, const char *why)
{
    const gr_plan_node *nd = &plan->nodes[index];
    return gr_fail(GR_ERR_UNSUPPORTED, "the GPU engine has no kernel for %s (layer %d) from %s to %s%s",
                   gr_plan_kind_name(nd->kind), nd->layer,
                   gr_dtype_name(plan->tensors[nd->inputs[0]].dtype),
                   gr_dtype_name(plan->tensors[nd->output].dtype), why);
}

gr_status gr_gpu_unsupported(const gr_plan *plan, int index) { return no_kernel(plan, index, ""); }

gr_status gr_gpu_unsupported_because(const gr_plan *plan, int index, const char *why)
{
    char buf[300];
    snprintf(buf, sizeof buf, ": %s", why);
    return no_kernel(plan, index, buf);
}

gr_status gr_gpu_launch_status(cudaError_t err, const gr_plan *plan, int index)
{
    if (err == cudaSuccess)
        return GR_OK;
    const gr_plan_node *nd = &plan->nodes[index];
    char buf[600];
    const char *why = failure_suffix(buf, sizeof buf);
    if (err == cudaErrorNotSupported)
        return no_kernel(plan, index, why);
    return gr_fail(err == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY : GR_ERR_CUDA,
                   "plan node %d (%s, layer %d): launch failed: %s (%s)%s", index,
                   gr_plan_kind_name(nd->kind), nd->layer, cudaGetErrorName(err),
                   cudaGetErrorString(err), why);
}

gr_status gr_gpu_cublas_fail(cublasStatus_t status, cudaError_t cuda_err, const gr_plan *plan,
                             int index)
{
    if (cuda_err != cudaSuccess)
        return gr_gpu_launch_status(cuda_err, plan, index);
    char buf[600];
    return gr_fail(GR_ERR_CUBLAS, "plan node %d (%s, layer %d): cuBLAS status %d%s", index,
                   gr_plan_kind_name(plan->nodes[index].kind), plan->nodes[index].layer,
                   (int)status, failure_suffix(buf, sizeof buf));
}
