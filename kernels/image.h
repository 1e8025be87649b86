/* Image kernels: Darknet's letterbox of decoded RGB images on the GPU, into a uint8 batch input.
 * Plain C11 interface; the kernel lives in kernels/letterbox.cu.
 *
 * The letterbox is runtime/image/letterbox.c's gr_image_letterbox_u8, bit for bit on the same
 * pixels: the image resized bilinearly to new_w x new_h (Darknet's resize_image: a horizontal
 * pass per source row, then a vertical one), placed at (left, top) of a net_w x net_h canvas of
 * grey 128, each value (w0 * p0 + w1 * p1) * 255 + 0.5 clamped to [0, 255] and truncated. Every
 * float operation is the CPU's, rounded separately (no fma contraction), with the CPU's scales
 * (w_scale, h_scale: gr_letterbox_geometry computes them on the host for both). AlexeyAB's
 * stretch (resize_image straight to the network size) is the same job with the stretch
 * geometry: new_w x new_h = net_w x net_h at (0, 0), no border. */
#ifndef GR_KERNELS_IMAGE_H
#define GR_KERNELS_IMAGE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One image of a batch: the decoded source (interleaved RGB, `pitch` bytes per row, device
 * memory) and where it goes (net_w x net_h x 3 bytes at dst, device memory). */
typedef struct gr_letterbox_job {
    const uint8_t *src;
    uint8_t *dst;
    int src_w, src_h, pitch;
    int new_w, new_h, left, top;
    float w_scale, h_scale;
    uint8_t pad; /* the border's byte (gr_letterbox_geom.pad) */
} gr_letterbox_job;

/* Letterbox n images (any n >= 0; launched GR_LETTERBOX_PER_LAUNCH at a time) on `stream`. */
#define GR_LETTERBOX_PER_LAUNCH 32
cudaError_t gr_launch_letterbox_u8(const gr_letterbox_job *jobs, int n, int net_w, int net_h,
                                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
