/* CUDA device discovery. Host C calling the CUDA runtime's C API. */
#include <cuda_runtime_api.h>

#include "runtime/engine_internal.h"

int gr_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device / no driver" error */
        return 0;
    }
    return n;
}
