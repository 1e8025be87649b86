/* Stand-in for the CUDA backend in a build without CUDA (GR_ENABLE_CUDA=OFF): no device is ever
 * visible, and asking for one says why. */
#include "runtime/engine_internal.h"

int gr_cuda_device_count(void) { return 0; }

gr_status gr_backend_gpu_init(gr_engine *e)
{
    (void)e;
    return gr_fail(GR_ERR_NO_DEVICE, "this graphrun was built without CUDA (GR_ENABLE_CUDA=OFF); "
                                     "rebuild with the CUDA toolkit or use --device cpu");
}

gr_status gr_engine_layer_times(gr_engine *engine, double *us_per_layer)
{
    (void)engine;
    (void)us_per_layer;
    return gr_fail(GR_ERR_NO_DEVICE, "gr_engine_layer_times: built without CUDA");
}
