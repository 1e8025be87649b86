/* libFuzzer harness: saved-engine loading (gr_engine_load_from_memory, the code gr_engine_load
 * runs on a file's bytes) on arbitrary bytes. The first byte says whether the harness makes the
 * header's content length and the trailing checksum agree with the rest (without that, almost
 * every input would stop at the checksum and never reach the network and option checks). A
 * refusal must leave *out NULL; an accepted engine must save again and load back. Nothing runs:
 * the harness looks for crashes, leaks and hangs in reading, not in the executor. The same bytes
 * go to the GPU blob's parser (runtime/saved_gpu.h; a GPU engine file is refused before it on a
 * machine without that GPU): what it accepts must be put back byte for byte. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"
#include "runtime/engine_file.h"
#include "tests/fuzz/engine_resign.h"
#include "runtime/saved_gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(gr_engine *e)
{
    void *again = NULL;
    size_t bytes = 0;
    if (gr_engine_save_to_memory(e, &again, &bytes) != GR_OK)
        __builtin_trap(); /* what was accepted can be written */
    gr_engine *back = NULL;
    if (gr_engine_load_from_memory(again, bytes, NULL, &back) != GR_OK || !back)
        __builtin_trap(); /* and what was written reads back */
    gr_engine_destroy(back);
    gr_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    uint8_t *copy = gr_fuzz_engine_input(data, size, &len);
    if (!copy)
        return 0;
    gr_engine *e = (gr_engine *)copy; /* must come back NULL on a refusal */
    gr_status st = gr_engine_load_from_memory(copy, len, NULL, &e);
    if (st != GR_OK && e != NULL)
        __builtin_trap();
    if (st == GR_OK) {
        if (!e)
            __builtin_trap();
        check_accepted(e);
        gr_engine_destroy(e);
    }
    gr_saved_gpu blob;
    if (gr_saved_gpu_parse(data + 1, len, "fuzz", &blob) == GR_OK) {
        gr_bytes b = {0};
        gr_saved_gpu_put(&b, &blob);
        if (!b.failed && (b.len != len || memcmp(b.data, data + 1, len) != 0))
            __builtin_trap(); /* what was read is what is written */
        gr_bytes_free(&b);
    }
    free(copy);
    return 0;
}
