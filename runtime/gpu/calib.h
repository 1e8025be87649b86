/* INT8 calibration on the GPU (runtime/gpu/calib.c; runtime/gpu/none.c without CUDA): the same
 * per-layer ranges as the CPU path (planner/calib.c) from an fp32 GPU engine of the network run
 * over the calibration images in batches, the statistics computed on the device. Plain C. */
#ifndef GR_RUNTIME_GPU_CALIB_H
#define GR_RUNTIME_GPU_CALIB_H

#include "models/net.h"

#define GR_GPU_CALIB_BATCH 32 /* default images per run; halved while the GPU is short of memory */

typedef struct gr_gpu_calib_request {
    const gr_net *net;
    const char *const *paths; /* images, decoded and letterboxed to uint8 as the engine's input */
    int n_images;
    gr_calib_method method;
    float percentile;         /* PERCENTILE: in (0, 100] */
    int gpu_index;
    int threads;              /* CPU threads decoding images; 0 = one per online core */
    int batch;                /* images per GPU run; 0 = GR_GPU_CALIB_BATCH (never more than the
                                 images) */
    void (*progress)(int done, int total, void *user); /* after each image, from the calling
                                                          thread; NULL = none */
    void *progress_user;
    gr_preprocess preprocess; /* STRETCH, else the letterbox: the engine's */
} gr_gpu_calib_request;

/* layer_range: net->n_layers entries. *batch_used (may be NULL): the batch the engine ran at. */
gr_status gr_gpu_calibrate(const gr_gpu_calib_request *req, float *layer_range,
                           float *input_range, int *batch_used);

#endif
