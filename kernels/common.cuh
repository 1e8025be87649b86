/* CUDA-side helpers shared by the kernel families: the check macro (records statement, file, line
 * and error name, then returns the error: kernels never abort) and small device utilities. */
#ifndef GR_KERNELS_COMMON_CUH
#define GR_KERNELS_COMMON_CUH

#include <cuda_runtime.h>

#include "kernels/common.h"

/* Record a failed check for gr_kernels_last_failure(). */
void gr_kernels_record_failure(const char *file, int line, const char *stmt, const char *what);

/* Evaluate a CUDA runtime call; on failure record it and return its cudaError_t. */
#define GR_CUDA_TRY(stmt)                                                                          \
    do {                                                                                           \
        cudaError_t gr_cuda_try_err_ = (stmt);                                                     \
        if (gr_cuda_try_err_ != cudaSuccess) {                                                     \
            gr_kernels_record_failure(__FILE__, __LINE__, #stmt,                                   \
                                      cudaGetErrorName(gr_cuda_try_err_));                         \
            return gr_cuda_try_err_;                                                               \
        }                                                                                          \
    } while (0)

/* Reject bad launcher arguments: record the condition and return cudaErrorInvalidValue. */
#define GR_ARG_CHECK(cond)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            gr_kernels_record_failure(__FILE__, __LINE__, #cond, "invalid argument");              \
            return cudaErrorInvalidValue;                                                          \
        }                                                                                          \
    } while (0)

/* The launch itself: report a configuration error from the kernel launch just issued. */
#define GR_LAUNCH_CHECK() GR_CUDA_TRY(cudaGetLastError())

static inline int gr_ceil_div(long long a, long long b)
{
    return (int)((a + b - 1) / b);
}

#ifdef __cplusplus
#include <mutex>

/* The dynamic shared memory limit of a kernel is a process-wide attribute, per device: raise
 * Kernel's (the __global__ function itself) to `bytes` once per device, under a lock, and never
 * lower it (a launch of another thread cannot lose its limit between the set and its launch). */
template <auto Kernel> cudaError_t gr_raise_dynamic_smem(int dev, int bytes)
{
    constexpr int max_devices = 64;
    static std::mutex mutex;
    static bool raised[max_devices];
    std::lock_guard<std::mutex> lock(mutex);
    GR_ARG_CHECK(dev >= 0 && dev < max_devices);
    if (!raised[dev]) {
        GR_CUDA_TRY(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        raised[dev] = true;
    }
    return cudaSuccess;
}
#endif

#endif
