/* What a saved GPU engine's backend blob holds (runtime/engine_file.c stores it whole; the GPU
 * backend writes and reads it, runtime/gpu/engine.c): the tactics its build chose, as the text of
 * its timing cache, and the device weights of each input variant it had built, byte for byte as
 * they were in GPU memory (runtime/gpu/weights.c's layout: every conv's weights in its kernel's
 * layout, the int8 multipliers, the biases), so that a load uploads them as they are and plans
 * without the network's fp32 weights (gr_plan_options.weight_data = 0).
 *
 * Layout (little endian):
 *     "GRGPUBL1"                       magic, 8 bytes
 *     u64 n, n bytes                   the tactics (timing cache text; n = 0 without the search)
 *     u32 k                            variants with weights, at most GR_SAVED_GPU_MAX_WEIGHTS
 *     k x { u32 input_u8, u32 micro_batch, u64 layout, u64 n, n bytes }
 * `layout` is the hash of the packing those bytes follow (gr_gpu_weights_layout): a load that
 * plans differently (another graphrun would have refused the file already) does not use them.
 * The engine file's checksum covers all of it. Pure C: the tests run it without a GPU. */
#ifndef GR_RUNTIME_SAVED_GPU_H
#define GR_RUNTIME_SAVED_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"

#define GR_SAVED_GPU_MAGIC "GRGPUBL1"
#define GR_SAVED_GPU_MAX_WEIGHTS 2 /* the float-input and the uint8-input variant */

typedef struct gr_saved_weights {
    int input_u8, micro_batch;
    uint64_t layout;
    const uint8_t *data; /* into the blob */
    size_t bytes;
} gr_saved_weights;

typedef struct gr_saved_gpu {
    const char *tactics; /* into the blob, not NUL-terminated */
    size_t tactics_len;
    int n_weights;
    gr_saved_weights weights[GR_SAVED_GPU_MAX_WEIGHTS];
} gr_saved_gpu;

void gr_saved_gpu_put(gr_bytes *b, const gr_saved_gpu *s);
/* Parse a blob (pointers into it); GR_ERR_PARSE with one line naming `source` for anything that
 * is not exactly such a blob. */
gr_status gr_saved_gpu_parse(const uint8_t *p, size_t len, const char *source, gr_saved_gpu *out);
/* The stored weights of one variant, or NULL. */
const gr_saved_weights *gr_saved_gpu_weights(const gr_saved_gpu *s, int input_u8, int micro_batch);

#endif
