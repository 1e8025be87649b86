/* Stand-in for the CUDA backend in a build without CUDA (GR_ENABLE_CUDA=OFF): no device is ever
 * visible, and asking for one (an engine, GPU calibration) says why. */
#include "runtime/engine_internal.h"
#include "runtime/gpu/calib.h"

int gr_cuda_device_count(void) { return 0; }

static gr_status no_cuda(void)
{
    return gr_fail(GR_ERR_NO_DEVICE, "this graphrun was built without CUDA (GR_ENABLE_CUDA=OFF); "
                                     "rebuild with the CUDA toolkit or use --device cpu");
}

gr_status gr_gpu_device_check(int gpu_index, gr_precision precision)
{
    (void)gpu_index;
    (void)precision;
    return no_cuda();
}

gr_status gr_gpu_device_identity(int gpu_index, gr_device_identity *id)
{
    (void)gpu_index;
    (void)id;
    return no_cuda();
}

gr_status gr_backend_gpu_init(gr_engine *e, const gr_backend_inputs *in)
{
    (void)e;
    (void)in;
    return no_cuda();
}

gr_status gr_engine_layer_times(gr_engine *engine, double *us_per_layer)
{
    (void)engine;
    (void)us_per_layer;
    return gr_fail(GR_ERR_NO_DEVICE, "gr_engine_layer_times: built without CUDA");
}

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

gr_status gr_engine_roofline(gr_engine *engine, int replays, gr_roofline **out)
{
    (void)engine;
    (void)replays;
    if (out)
        *out = NULL;
    return gr_fail(GR_ERR_NO_DEVICE, "gr_engine_roofline: this graphrun was built without CUDA");
}

void gr_roofline_free(gr_roofline *roofline) { (void)roofline; }

int gr_roofline_available(void) { return 0; }
