/* libFuzzer harness: the timing-cache parser (gr_timing_cache_parse, the same code as files) on
 * arbitrary bytes for a fixed device. The first byte says whether the harness rewrites the
 * checksum line (the last "\nchecksum " in the text) to match: without that, almost every input
 * would stop at the checksum. A cache that is accepted must find each of its entries, survive a
 * write and read-back unchanged, and hold only values the format allows. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/timing_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char device[] = "fuzz GPU; sm_90; 132 SMs";

/* The last "\nchecksum " line's 16 hex digits, set to the checksum of what precedes it. */
static void resign(char *text, size_t len)
{
    char *at = NULL;
    for (size_t i = 0; i + 10 + 16 <= len; i++)
        if (memcmp(text + i, "\nchecksum ", 10) == 0)
            at = text + i;
    if (!at)
        return;
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, gr_fnv1a(GR_FNV1A_INIT, text, (size_t)(at + 1 - text)));
    memcpy(at + 10, hex, 16);
}

static void check_accepted(const gr_timing_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        const gr_tcache_entry *e = &c->entries[i];
        if (gr_timing_cache_find(c, e->key) != e || !isfinite(e->us) || !(e->us > 0.0) ||
            !isfinite(e->auto_us) || !(e->auto_us > 0.0))
            __builtin_trap();
    }
    char *text = NULL, notice[512];
    size_t len = 0;
    if (gr_timing_cache_serialize(c, &text, &len) != GR_OK)
        __builtin_trap();
    gr_timing_cache back;
    gr_timing_cache_init(&back, device);
    gr_timing_cache_parse(&back, text, len, "again", notice, sizeof notice);
    if (back.n != c->n || notice[0])
        __builtin_trap(); /* what was accepted is written so that it reads back */
    gr_timing_cache_free(&back);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t len = size - 1;
    char *text = malloc(len ? len : 1);
    if (!text)
        return 0;
    memcpy(text, data + 1, len);
    if (data[0] & 1)
        resign(text, len);
    gr_timing_cache c;
    gr_timing_cache_init(&c, device);
    char notice[512];
    gr_timing_cache_parse(&c, text, len, "fuzz.tcache", notice, sizeof notice);
    if (c.n > 0)
        check_accepted(&c);
    else if (memchr(notice, '\n', strlen(notice)))
        __builtin_trap(); /* a notice is one line */
    gr_timing_cache_free(&c);
    free(text);
    return 0;
}
