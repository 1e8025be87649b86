/* The whole-network CPU reference executor: runs a parsed gr_net layer by layer with each op's
 * reference (ops/<stem>.c) in float32 NCHW, Darknet's semantics. It is the oracle the GPU engine
 * is compared against and the CPU backend's compute. Single-threaded, no global state: separate
 * calls may run concurrently on different output arrays. */
#ifndef GR_RUNTIME_CPU_REFERENCE_H
#define GR_RUNTIME_CPU_REFERENCE_H

#include "models/net.h"

/* Run net layer by layer on the CPU reference. input: batch x net->c x net->h x net->w float NCHW.
   outputs[i] receives a malloc'd buffer with layer i's output (batch x out shape), caller frees
   each with free() — or pass keep_all=0 to keep only heads (gr_net_heads; the others are freed as
   soon as no later layer reads them and left NULL). outputs must hold net->n_layers pointers; its
   incoming values are ignored. Conv and connected layers need weights attached. Every layer's
   shape is re-checked with its op's infer() before anything runs. On failure every outputs[i] is
   NULL (unless net or outputs itself was unusable) and the message names the layer (index, op,
   cfg line). */
gr_status gr_reference_forward(const gr_net *net, const float *input, int batch, int keep_all,
                               float **outputs);

#endif
