/* For the engine-file harnesses (fuzz_engine_file.c, fuzz_engine_map.c): make an input's header
 * content length and trailing checksum agree with the rest, so that mutated inputs reach the
 * content checks instead of stopping at the checksum. */
#ifndef GR_FUZZ_ENGINE_RESIGN_H
#define GR_FUZZ_ENGINE_RESIGN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/engine_file.h"

static inline void gr_fuzz_engine_resign(uint8_t *p, size_t len)
{
    if (len < GR_ENGINE_FILE_HEADER + 8)
        return;
    uint64_t content = len - GR_ENGINE_FILE_HEADER - 8;
    for (int k = 0; k < 8; k++)
        p[GR_ENGINE_FILE_OFF_CONTENT_BYTES + k] = (uint8_t)(content >> (8 * k));
    uint64_t h = gr_hash64(p, len - 8);
    for (int k = 0; k < 8; k++)
        p[len - 8 + k] = (uint8_t)(h >> (8 * k));
}

/* The engine file an input stands for: a malloc'd copy of data[1..size) (*len bytes), re-signed
 * when bit 0 of data[0] is set; NULL for an empty input or without memory. */
static inline uint8_t *gr_fuzz_engine_input(const uint8_t *data, size_t size, size_t *len)
{
    if (size < 1)
        return NULL;
    *len = size - 1;
    uint8_t *copy = malloc(*len ? *len : 1);
    if (!copy)
        return NULL;
    memcpy(copy, data + 1, *len);
    if (data[0] & 1)
        gr_fuzz_engine_resign(copy, *len);
    return copy;
}

#endif
