/* Declarations of the part of NVIDIA's nvJPEG API that runtime/gpu/jpeg.c uses, written from the
 * nvJPEG documentation (docs.nvidia.com/cuda/nvjpeg, "nvJPEG API Reference"), for one purpose:
 * tests/host_check.sh compiles the GR_HAVE_NVJPEG code with warnings as errors on a machine whose
 * CUDA toolkit has no nvJPEG (CI's). Nothing links against it; the real header is used by every
 * build that has one. The enum values follow the documentation; only their distinctness matters
 * here. */
#ifndef GR_NVJPEG_STUB_H
#define GR_NVJPEG_STUB_H

#include <stddef.h>
#include <cuda_runtime_api.h>

typedef enum {
    NVJPEG_STATUS_SUCCESS = 0,
    NVJPEG_STATUS_NOT_INITIALIZED = 1,
    NVJPEG_STATUS_INVALID_PARAMETER = 2,
    NVJPEG_STATUS_BAD_JPEG = 3,
    NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4,
    NVJPEG_STATUS_ALLOCATOR_FAILURE = 5,
    NVJPEG_STATUS_EXECUTION_FAILED = 6,
    NVJPEG_STATUS_ARCH_MISMATCH = 7,
    NVJPEG_STATUS_INTERNAL_ERROR = 8,
    NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
    NVJPEG_STATUS_INCOMPLETE_BITSTREAM = 10
} nvjpegStatus_t;

typedef enum {
    NVJPEG_CSS_444 = 0,
    NVJPEG_CSS_422 = 1,
    NVJPEG_CSS_420 = 2,
    NVJPEG_CSS_440 = 3,
    NVJPEG_CSS_411 = 4,
    NVJPEG_CSS_410 = 5,
    NVJPEG_CSS_GRAY = 6,
    NVJPEG_CSS_410V = 7,
    NVJPEG_CSS_UNKNOWN = -1
} nvjpegChromaSubsampling_t;

typedef enum {
    NVJPEG_BACKEND_DEFAULT = 0,
    NVJPEG_BACKEND_HYBRID = 1,
    NVJPEG_BACKEND_GPU_HYBRID = 2,
    NVJPEG_BACKEND_HARDWARE = 3
} nvjpegBackend_t;

typedef enum {
    NVJPEG_OUTPUT_UNCHANGED = 0,
    NVJPEG_OUTPUT_YUV = 1,
    NVJPEG_OUTPUT_Y = 2,
    NVJPEG_OUTPUT_RGB = 3,
    NVJPEG_OUTPUT_BGR = 4,
    NVJPEG_OUTPUT_RGBI = 5,
    NVJPEG_OUTPUT_BGRI = 6
} nvjpegOutputFormat_t;

#define NVJPEG_MAX_COMPONENT 4
typedef struct {
    unsigned char *channel[NVJPEG_MAX_COMPONENT];
    size_t pitch[NVJPEG_MAX_COMPONENT];
} nvjpegImage_t;

typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;
typedef struct nvjpegJpegStream *nvjpegJpegStream_t;
typedef struct nvjpegDevAllocator nvjpegDevAllocator_t;
typedef struct nvjpegPinnedAllocator nvjpegPinnedAllocator_t;

nvjpegStatus_t nvjpegCreateEx(nvjpegBackend_t backend, nvjpegDevAllocator_t *dev_allocator,
                              nvjpegPinnedAllocator_t *pinned_allocator, unsigned int flags,
                              nvjpegHandle_t *handle);
nvjpegStatus_t nvjpegDestroy(nvjpegHandle_t handle);
nvjpegStatus_t nvjpegSetDeviceMemoryPadding(size_t padding, nvjpegHandle_t handle);
nvjpegStatus_t nvjpegSetPinnedMemoryPadding(size_t padding, nvjpegHandle_t handle);
nvjpegStatus_t nvjpegJpegStateCreate(nvjpegHandle_t handle, nvjpegJpegState_t *jpeg_handle);
nvjpegStatus_t nvjpegJpegStateDestroy(nvjpegJpegState_t jpeg_handle);
nvjpegStatus_t nvjpegJpegStreamCreate(nvjpegHandle_t handle, nvjpegJpegStream_t *jpeg_stream);
nvjpegStatus_t nvjpegJpegStreamDestroy(nvjpegJpegStream_t jpeg_stream);
nvjpegStatus_t nvjpegJpegStreamParseHeader(nvjpegHandle_t handle, const unsigned char *data,
                                           size_t length, nvjpegJpegStream_t jpeg_stream);
nvjpegStatus_t nvjpegJpegStreamGetFrameDimensions(nvjpegJpegStream_t jpeg_stream,
                                                  unsigned int *width, unsigned int *height);
nvjpegStatus_t nvjpegJpegStreamGetComponentsNum(nvjpegJpegStream_t jpeg_stream,
                                                unsigned int *components_num);
nvjpegStatus_t nvjpegJpegStreamGetChromaSubsampling(nvjpegJpegStream_t jpeg_stream,
                                                    nvjpegChromaSubsampling_t *chroma_subsampling);
nvjpegStatus_t nvjpegDecodeBatchedSupported(nvjpegHandle_t handle, nvjpegJpegStream_t jpeg_stream,
                                            int *is_supported);
nvjpegStatus_t nvjpegDecodeBatchedInitialize(nvjpegHandle_t handle, nvjpegJpegState_t jpeg_handle,
                                             int batch_size, int max_cpu_threads,
                                             nvjpegOutputFormat_t output_format);
nvjpegStatus_t nvjpegDecodeBatched(nvjpegHandle_t handle, nvjpegJpegState_t jpeg_handle,
                                   const unsigned char *const *data, const size_t *lengths,
                                   nvjpegImage_t *destinations, cudaStream_t stream);

#endif
