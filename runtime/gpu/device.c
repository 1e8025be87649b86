/* CUDA device discovery, and the refusals a GPU build makes before it starts. Host C calling the
 * CUDA runtime's C API. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "runtime/gpu/backend.h"

int gr_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device / no driver" error */
        return 0;
    }
    return n;
}

/* The same checks and messages as the start of gr_backend_gpu_init (gpu/engine.c), which makes
 * them again for the engines built without the front (calibration's, the automatic search's). */
gr_status gr_gpu_device_check(int gpu_index, gr_precision precision)
{
    int count = gr_cuda_device_count();
    if (count == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "no CUDA device is visible (--device gpu)");
    if (gpu_index >= count)
        return gr_fail(GR_ERR_NO_DEVICE, "gpu_index %d: only %d CUDA device%s visible", gpu_index,
                       count, count == 1 ? " is" : "s are");
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, gpu_index));
    if (precision != GR_PREC_FP32 && prop.major * 10 + prop.minor < 72)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s needs tensor cores with int8 (sm_72+); %s is sm_%d%d",
                       gr_precision_name(precision), prop.name, prop.major, prop.minor);
    return GR_OK;
}

gr_status gr_gpu_device_identity(int gpu_index, gr_device_identity *id)
{
    int count = gr_cuda_device_count();
    if (count == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "no CUDA device is visible");
    if (gpu_index < 0 || gpu_index >= count)
        return gr_fail(GR_ERR_NO_DEVICE, "gpu_index %d: only %d CUDA device%s visible", gpu_index,
                       count, count == 1 ? " is" : "s are");
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, gpu_index));
    id->kind = GR_DEVICE_GPU;
    id->sm = prop.major * 10 + prop.minor;
    snprintf(id->name, sizeof id->name, "%.127s", prop.name); /* names are far shorter */
    id->sm_count = prop.multiProcessorCount;
    CUDA_TRY(cudaRuntimeGetVersion(&id->cuda_runtime));
    CUDA_TRY(cudaDriverGetVersion(&id->cuda_driver));
    id->cublaslt = (uint64_t)cublasLtGetVersion();
    return GR_OK;
}
