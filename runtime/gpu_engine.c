/* CUDA backend: builds the planned forward pass into one CUDA graph per (precision, batch). */
#include "runtime/engine_internal.h"

gr_status gr_backend_gpu_init(gr_engine *e)
{
    (void)e;
    return gr_fail(GR_ERR_UNSUPPORTED, "the GPU engine is not built yet; use --device cpu");
}
