/* libFuzzer harness: the calibration-cache reader (gr_calib_cache_parse, the same code as files)
 * on arbitrary bytes against a fixed key. The first byte picks the layer count (1..16) and
 * whether the harness appends the correct checksum line to the rest: without that, almost every
 * input would stop at the checksum and the line parser behind it would go unexplored. A cache
 * that is accepted must hold only in-range values. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/precision/calib_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_LAYERS = 16 };

/* The key of the seed corpus's files (tests/fuzz/corpus/calib_cache). */
static const gr_calib_key key = {0x8c1b0e7d4f2a9c33ULL, GR_CALIB_MAX, 0.0f, "tiny", 2,
                                 0x3f0c2b7a9d1e6f42ULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int n_layers = 1 + (data[0] & 15), sign = data[0] & 16;
    const uint8_t *body = data + 1;
    size_t body_len = size - 1, len = body_len;
    /* Exactly the bytes parsed (no NUL after them): ASan sees any read past the end. */
    uint8_t *text = malloc(body_len + 32);
    if (!text)
        return 0;
    memcpy(text, body, body_len);
    if (sign)
        len += (size_t)snprintf((char *)text + body_len, 32, "checksum %016" PRIx64 "\n",
                                gr_fnv1a(GR_FNV1A_INIT, body, body_len));
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(text);
        return 0;
    }
    memcpy(exact, text, len);
    free(text);
    float ranges[MAX_LAYERS], input = -1.0f;
    int found = 0;
    char notice[512];
    gr_status st = gr_calib_cache_parse("fuzz.calib", (const char *)exact, len, &key, n_layers,
                                        ranges, &input, &found, notice, sizeof notice);
    if (found) {
        if (st != GR_OK || notice[0] || !(input >= GR_CALIB_INPUT_MIN && input <= 1.0f))
            __builtin_trap();
        for (int i = 0; i < n_layers; i++)
            if (!(isfinite(ranges[i]) && ranges[i] >= GR_CALIB_RANGE_MIN &&
                  ranges[i] <= GR_CALIB_RANGE_MAX))
                __builtin_trap(); /* an accepted cache holds only checked values */
    } else if (st == GR_OK && notice[0] && memchr(notice, '\n', strlen(notice))) {
        __builtin_trap(); /* a notice is one line */
    }
    free(exact);
    return 0;
}
