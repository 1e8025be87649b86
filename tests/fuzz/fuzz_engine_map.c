/* libFuzzer harness: saved-engine loading by path, the way `graphrun --engine FILE` loads: the
 * input is written to a file and gr_engine_load maps it (base/file_view.c) and lends the network
 * the mapping's weights, unlike fuzz_engine_file, which parses bytes in memory. The first byte:
 * bit 0 makes the header's content length and the trailing checksum agree with the rest (as in
 * fuzz_engine_file, so that inputs reach the content checks); bit 1, for an accepted engine,
 * rewrites the file in place afterwards (truncated to half, the `cp new live` that used to be a
 * SIGBUS), after which a run must fail with GR_ERR_IO and never touch the mapping. A refusal
 * must leave *out NULL; an accepted engine must save to a file and load back from it. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"
#include "runtime/engine_file.h"
#include "tests/fuzz/engine_resign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_file(const char *path, const uint8_t *p, size_t len, int flags)
{
    int fd = open(path, O_WRONLY | O_CREAT | flags, 0600);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, p + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    return done == len;
}

static void check_accepted(gr_engine *e, const char *again_path, int rewrite, const char *path,
                           const uint8_t *bytes, size_t len)
{
    if (gr_engine_save(e, again_path) != GR_OK)
        __builtin_trap(); /* what was accepted can be written */
    gr_engine *back = NULL;
    if (gr_engine_load(again_path, NULL, &back) != GR_OK || !back)
        __builtin_trap(); /* and what was written reads back */
    gr_engine_destroy(back);
    unlink(again_path);
    if (!rewrite)
        return;
    if (!write_file(path, bytes, len / 2, O_TRUNC))
        return;
    if (gr_engine_run(e) != GR_ERR_IO)
        __builtin_trap(); /* a file rewritten in place is an error before the run reads it */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    uint8_t *copy = gr_fuzz_engine_input(data, size, &len);
    if (!copy)
        return 0;
    char path[64], again[72];
    snprintf(path, sizeof path, "/tmp/fuzz_engine_map_%ld.grengine", (long)getpid());
    snprintf(again, sizeof again, "%s.again", path);
    if (write_file(path, copy, len, O_TRUNC)) {
        gr_engine *e = (gr_engine *)copy; /* must come back NULL on a refusal */
        gr_status st = gr_engine_load(path, NULL, &e);
        if (st != GR_OK && e != NULL)
            __builtin_trap();
        if (st == GR_OK) {
            if (!e)
                __builtin_trap();
            check_accepted(e, again, data[0] & 2, path, copy, len);
            gr_engine_destroy(e);
        }
        unlink(path);
    }
    free(copy);
    return 0;
}
