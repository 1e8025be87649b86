/* NVTX implementation of runtime/trace.h; no-ops in a build without CUDA. */
#include "runtime/trace.h"

#ifdef GR_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>

void gr_trace_push(const char *name) { nvtxRangePushA(name); }
void gr_trace_pop(void) { nvtxRangePop(); }
#else
void gr_trace_push(const char *name) { (void)name; }
void gr_trace_pop(void) {}
#endif
