/* Stand-in for the GPU calibration in a build without CUDA (GR_ENABLE_CUDA=OFF). */
#include "runtime/gpu_calib.h"

gr_status gr_gpu_calibrate(const gr_gpu_calib_request *req, float *layer_range,
                           float *input_range, int *batch_used)
{
    (void)req;
    (void)layer_range;
    (void)input_range;
    (void)batch_used;
    return gr_fail(GR_ERR_NO_DEVICE, "calibration on the GPU: this graphrun was built without "
                                     "CUDA (GR_ENABLE_CUDA=OFF); use calib_device cpu");
}
