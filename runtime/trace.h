/* Profiler ranges: gr_trace_push("name") ... gr_trace_pop() mark a span of host time (and, in
 * Nsight Systems, the GPU work launched inside it). Built with CUDA they are NVTX ranges (the
 * header-only NVTX 3 in the CUDA toolkit: nothing to link, and close to free when no profiler is
 * attached); without CUDA they compile to nothing. Pushes and pops nest per thread. */
#ifndef GR_RUNTIME_TRACE_H
#define GR_RUNTIME_TRACE_H

void gr_trace_push(const char *name);
void gr_trace_pop(void);

#endif
