/* Asynchronous global -> shared copies (cp.async, sm_80+) with zero-fill, and their group
 * commit / wait. Before sm_80 the same calls copy synchronously through registers, so a kernel's
 * pipeline is still correct there (its __syncthreads orders the stores), only not overlapped.
 * CUDA side only. */
#ifndef GR_KERNELS_CP_ASYNC_CUH
#define GR_KERNELS_CP_ASYNC_CUH

#include <cstdint>

#include <cuda_runtime.h>

/* 4 bytes; valid = false writes zeros and reads nothing (src must still be a valid address form). */
__device__ __forceinline__ void copy4(void *smem_dst, const void *src, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
#else
    *static_cast<uint32_t *>(smem_dst) = valid ? __ldg(static_cast<const uint32_t *>(src)) : 0u;
#endif
}

/* 16 bytes, both addresses 16-byte aligned; valid = false as copy4. */
__device__ __forceinline__ void copy16(void *smem_dst, const void *src, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    const int bytes = valid ? 16 : 0; /* 0: zero-fill, nothing read */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (valid)
        v = __ldg(static_cast<const uint4 *>(src));
    *static_cast<uint4 *>(smem_dst) = v;
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Wait until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

#endif
