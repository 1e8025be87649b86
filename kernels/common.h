/* Error bookkeeping shared by every kernel family (C view). Launchers return a cudaError_t /
 * cublasStatus_t; when one of their internal checks fails they also record which statement failed,
 * where, and the error's name, thread-locally, so the runtime can build a one-line gr_fail message.
 * Plain C11 header; implemented in kernels/common.cu. */
#ifndef GR_KERNELS_COMMON_H
#define GR_KERNELS_COMMON_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "kernels/conv_wmma.cu:123: cudaGetDevice(&dev): cudaErrorNoDevice", or "" when no check failed
 * on this thread since the last gr_kernels_clear_failure(). Never NULL. */
const char *gr_kernels_last_failure(void);
void gr_kernels_clear_failure(void);

#ifdef __cplusplus
}
#endif

#endif
