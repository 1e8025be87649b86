/* Timing cache of the conv tactic search: parsing and writing (format in timing_cache.h). Lookups
 * go through an open-addressing hash index, so reading or filling n entries is O(n). */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/bytes.h"
#include "runtime/timing_cache.h"

static const char magic[] = "graphrun-timing-cache";

static void copy_printable(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) ? '?' : src[i];
    dst[i] = '\0';
}

void gr_timing_cache_init(gr_timing_cache *c, const char *device)
{
    memset(c, 0, sizeof *c);
    copy_printable(c->device, sizeof c->device, device);
}

void gr_timing_cache_free(gr_timing_cache *c)
{
    if (!c)
        return;
    free(c->entries);
    free(c->slots);
    c->entries = NULL;
    c->slots = NULL;
    c->n = c->cap = c->n_slots = 0;
}

/* The slot holding key's entry, or the empty slot where it would go (the table is never full). */
static int *slot_of(const gr_timing_cache *c, const char *key)
{
    size_t mask = (size_t)c->n_slots - 1, i = (size_t)gr_fnv1a(GR_FNV1A_INIT, key, strlen(key)) & mask;
    while (c->slots[i] >= 0 && strcmp(c->entries[c->slots[i]].key, key) != 0)
        i = (i + 1) & mask;
    return &c->slots[i];
}

/* Drops the entries, keeping the memory. */
static void clear(gr_timing_cache *c)
{
    c->n = 0;
    for (int i = 0; i < c->n_slots; i++)
        c->slots[i] = -1;
}

/* Room for one more entry at a load factor of at most 1/2. */
static gr_status reserve_slot(gr_timing_cache *c)
{
    if (2 * (c->n + 1) <= c->n_slots)
        return GR_OK;
    int n_slots = c->n_slots ? 2 * c->n_slots : 64;
    int *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "timing cache: out of memory");
    free(c->slots);
    c->slots = slots;
    c->n_slots = n_slots;
    int n = c->n;
    clear(c);
    for (c->n = 0; c->n < n; c->n++)
        *slot_of(c, c->entries[c->n].key) = c->n;
    return GR_OK;
}

static int key_ok(const char *key)
{
    size_t len = strlen(key);
    if (len == 0 || len >= GR_TCACHE_KEY_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)key[i] <= 0x20 || (unsigned char)key[i] >= 0x7f)
            return 0;
    return 1;
}

static int time_ok(double us) { return isfinite(us) && us > 0.0 && us <= GR_TCACHE_MAX_US; }

static int is_micro_batch_key(const char *key) { return strncmp(key, "mb:", 3) == 0; }

/* A micro-batch entry's tile is the sub-batch (1..GR_TCACHE_MAX_MICRO_BATCH), its split 0. */
static int values_ok(const char *key, int tile, int split, double us, double auto_us)
{
    const int max_tile = is_micro_batch_key(key) ? GR_TCACHE_MAX_MICRO_BATCH : GR_TCACHE_MAX_TILE;
    const int min_tile = is_micro_batch_key(key) ? 1 : 0;
    return tile >= min_tile && tile <= max_tile && split >= 0 && split <= GR_TCACHE_MAX_SPLIT &&
           time_ok(us) && time_ok(auto_us);
}

const gr_tcache_entry *gr_timing_cache_find(const gr_timing_cache *c, const char *key)
{
    if (!c || !key || c->n_slots == 0)
        return NULL;
    int i = *slot_of(c, key);
    return i >= 0 ? &c->entries[i] : NULL;
}

gr_status gr_timing_cache_put(gr_timing_cache *c, const char *key, int tile, int split, double us,
                              double auto_us)
{
    if (!c || !key || !key_ok(key) || !values_ok(key, tile, split, us, auto_us))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "timing cache: entry '%.60s' cannot be stored",
                       key ? key : "(null)");
    gr_tcache_entry *e = (gr_tcache_entry *)gr_timing_cache_find(c, key);
    if (!e) {
        if (c->n >= GR_TCACHE_MAX_ENTRIES)
            return gr_fail(GR_ERR_LIMIT, "timing cache: more than %d entries",
                           GR_TCACHE_MAX_ENTRIES);
        GR_TRY(reserve_slot(c));
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 32;
            gr_tcache_entry *grown = realloc(c->entries, (size_t)cap * sizeof *grown);
            if (!grown)
                return gr_fail(GR_ERR_OUT_OF_MEMORY, "timing cache: out of memory");
            c->entries = grown;
            c->cap = cap;
        }
        e = &c->entries[c->n];
        snprintf(e->key, sizeof e->key, "%s", key);
        *slot_of(c, key) = c->n++;
    }
    e->tile = tile;
    e->split = split;
    e->us = us;
    e->auto_us = auto_us;
    c->dirty = 1;
    return GR_OK;
}

/* The next line of text[*pos..len) into line (without '\n'); 0 at the end of the text, -1 for a
 * line that does not fit or holds a NUL. */
static int next_line(const char *text, size_t len, size_t *pos, char *line, size_t cap)
{
    if (*pos >= len)
        return 0;
    size_t start = *pos, end = start;
    while (end < len && text[end] != '\n')
        end++;
    *pos = end < len ? end + 1 : end;
    if (end - start >= cap || memchr(text + start, '\0', end - start))
        return -1;
    memcpy(line, text + start, end - start);
    line[end - start] = '\0';
    return 1;
}

/* A tactic gpu/tactic.c writes: the automatic one and the GEMM with split 0, a conv tile with one
 * of the search's split choices. */
static int known_tactic(const char *key, int tile, int split)
{
    static const int splits[] = {1, 2, 3, 4, 6, 8, 12, 16};
    /* fp32 convs (keys "f32:..."): tile is the algorithm (GR_CONV_F32_*, 0..3), split the
     * 3xTF32 GEMM's split-K parts (0 = none). */
    if (strncmp(key, "f32:", 4) == 0)
        return tile >= 0 && tile < GR_TCACHE_F32_ALGOS && split >= 0 && split <= 16 && split != 1;
    if (is_micro_batch_key(key))
        return split == 0; /* the sub-batch's range: values_ok */
    if (tile == 0 || tile == GR_TCACHE_TILE_GEMM)
        return split == 0;
    for (size_t i = 0; tile <= GR_TCACHE_CONV_TILES && i < sizeof splits / sizeof splits[0]; i++)
        if (split == splits[i])
            return 1;
    return 0;
}

/* "<key> <tile> <split> <us> <auto_us>", exactly five fields. */
static int parse_entry(const char *line, gr_tcache_entry *e)
{
    char key[GR_TCACHE_KEY_MAX], rest_check[2];
    char tile_s[16], split_s[16], us_s[40], auto_s[40];
    /* Field widths keep sscanf inside the buffers. */
    int n = sscanf(line, "%191s %15s %15s %39s %39s %1s", key, tile_s, split_s, us_s, auto_s,
                   rest_check);
    if (n != 5 || !key_ok(key))
        return 0;
    char *end;
    errno = 0;
    long tile = strtol(tile_s, &end, 10);
    if (errno || *end || end == tile_s)
        return 0;
    long split = strtol(split_s, &end, 10);
    if (errno || *end || end == split_s)
        return 0;
    double us = strtod(us_s, &end);
    if (errno || *end || end == us_s)
        return 0;
    double auto_us = strtod(auto_s, &end);
    if (errno || *end || end == auto_s)
        return 0;
    if (tile < 0 || tile > GR_TCACHE_MAX_MICRO_BATCH || split < 0 || split > GR_TCACHE_MAX_SPLIT ||
        !values_ok(key, (int)tile, (int)split, us, auto_us) ||
        !known_tactic(key, (int)tile, (int)split))
        return 0;
    snprintf(e->key, sizeof e->key, "%s", key);
    e->tile = (int)tile;
    e->split = (int)split;
    e->us = us;
    e->auto_us = auto_us;
    return 1;
}

/* The reason a text is not a cache for c->device, or NULL when it is (entries then in c). */
static const char *parse_text(gr_timing_cache *c, const char *text, size_t len, int *line_no)
{
    char line[GR_TCACHE_KEY_MAX + GR_TCACHE_DEVICE_MAX];
    size_t pos = 0;
    *line_no = 1;
    if (next_line(text, len, &pos, line, sizeof line) != 1)
        return "not a graphrun timing cache";
    char word[32], version_s[64];
    int version = 0;
    if (sscanf(line, "%31s %d %63s", word, &version, version_s) != 3 || strcmp(word, magic) != 0)
        return "not a graphrun timing cache";
    if (version != GR_TCACHE_VERSION)
        return version < GR_TCACHE_VERSION
                   ? "an older format version (this graphrun reads format " GR_TCACHE_VERSION_S
                     "; format 4 keyed tactics by the engine's batch)"
                   : "a newer format version (this graphrun reads format " GR_TCACHE_VERSION_S ")";
    if (strcmp(version_s, gr_version()) != 0)
        return "made by another graphrun version";
    *line_no = 2;
    if (next_line(text, len, &pos, line, sizeof line) != 1 || strncmp(line, "device ", 7) != 0)
        return "no device line";
    if (strcmp(line + 7, c->device) != 0)
        return "made on another GPU, driver or CUDA version";
    *line_no = 3;
    long count = -1;
    char *end;
    if (next_line(text, len, &pos, line, sizeof line) != 1 || strncmp(line, "entries ", 8) != 0)
        return "no entry count";
    errno = 0;
    count = strtol(line + 8, &end, 10);
    if (errno || *end || end == line + 8 || count < 0 || count > GR_TCACHE_MAX_ENTRIES)
        return "bad entry count";
    for (long i = 0; i < count; i++) {
        (*line_no)++;
        gr_tcache_entry e;
        int got = next_line(text, len, &pos, line, sizeof line);
        if (got == 0)
            return "truncated";
        if (got < 0 || !parse_entry(line, &e))
            return "malformed entry";
        if (gr_timing_cache_find(c, e.key))
            return "duplicate entry";
        if (gr_timing_cache_put(c, e.key, e.tile, e.split, e.us, e.auto_us) != GR_OK)
            return "out of memory";
    }
    (*line_no)++;
    size_t body = pos;
    char want[40];
    snprintf(want, sizeof want, "checksum %016" PRIx64, gr_fnv1a(GR_FNV1A_INIT, text, body));
    int got = next_line(text, len, &pos, line, sizeof line);
    if (got == 1 && strncmp(line, "checksum ", 9) != 0)
        return "no checksum line";
    if (got != 1 || strcmp(line, want) != 0)
        return "checksum mismatch: edited or truncated";
    (*line_no)++;
    if (next_line(text, len, &pos, line, sizeof line) != 1 || strcmp(line, "end") != 0)
        return "truncated (no end line)";
    if (pos != len)
        return "data after the end line";
    return NULL;
}

void gr_timing_cache_parse(gr_timing_cache *c, const char *text, size_t len, const char *origin,
                           char *notice, size_t notice_len)
{
    notice[0] = '\0';
    clear(c);
    int line_no = 0;
    const char *why = text ? parse_text(c, text, len, &line_no) : "no text";
    if (why) {
        clear(c);
        snprintf(notice, notice_len, "timing cache %.200s ignored (line %d: %s): tactics measured "
                 "again", origin ? origin : "", line_no, why);
    }
    c->dirty = 0;
}

void gr_timing_cache_load(gr_timing_cache *c, const char *path, char *notice, size_t notice_len)
{
    notice[0] = '\0';
    clear(c);
    c->dirty = 0;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return; /* none yet: written after the search */
    char *text = NULL;
    size_t len = 0;
    if (gr_read_regular_file(path, GR_TCACHE_MAX_FILE_BYTES, "timing cache", &text, &len) !=
        GR_OK) {
        snprintf(notice, notice_len, "timing cache ignored: %.300s", gr_last_error());
        return;
    }
    gr_timing_cache_parse(c, text, len, path, notice, notice_len);
    free(text);
}

gr_status gr_timing_cache_serialize(const gr_timing_cache *c, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    /* Every line is bounded: header, device, count, entries of key + 4 numbers, end. */
    size_t cap = 128 + GR_TCACHE_DEVICE_MAX + 32 + (size_t)c->n * (GR_TCACHE_KEY_MAX + 96) + 40;
    char *buf = malloc(cap);
    if (!buf)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "timing cache: out of memory");
    size_t used = (size_t)snprintf(buf, cap, "%s %d %s\ndevice %s\nentries %d\n", magic,
                                   GR_TCACHE_VERSION, gr_version(), c->device, c->n);
    for (int i = 0; i < c->n && used < cap; i++) {
        const gr_tcache_entry *e = &c->entries[i];
        used += (size_t)snprintf(buf + used, cap - used, "%s %d %d %.9g %.9g\n", e->key, e->tile,
                                 e->split, e->us, e->auto_us);
    }
    if (used < cap)
        used += (size_t)snprintf(buf + used, cap - used, "checksum %016" PRIx64 "\nend\n",
                                 gr_fnv1a(GR_FNV1A_INIT, buf, used));
    if (used >= cap) {
        free(buf);
        return gr_fail(GR_ERR_INTERNAL, "timing cache: serialization overflow");
    }
    *text = buf;
    *len = used;
    return GR_OK;
}

gr_status gr_timing_cache_save(const gr_timing_cache *c, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    GR_TRY(gr_timing_cache_serialize(c, &text, &len));
    gr_status st = gr_write_file_atomic(path, text, len, "timing cache");
    free(text);
    return st;
}
