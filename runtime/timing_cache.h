/* Timing cache of the conv tactic search (runtime/gpu/tactic.c): which tactic won for a layer
 * shape on one GPU, so a second build of the same engine measures nothing. Plain C, no CUDA: the
 * tests parse and write it on any machine.
 *
 * File format (text, one record per line, '\n' endings):
 *     graphrun-timing-cache <GR_TCACHE_VERSION> <graphrun version>
 *     device <device key: GPU name, compute capability, SMs, CUDA runtime and driver, cuBLASLt>
 *     entries <n>
 *     <layer key> <tile> <split> <us> <auto_us>      (n lines)
 *     checksum <FNV-1a 64 of every byte before this line, 16 hex digits>
 *     end
 * A layer key is one token of printable ASCII without spaces (dtype, shapes, strides, fusions,
 * batch: gpu/tactic.c builds it). tile 0..GR_TCACHE_MAX_TILE, split 0..GR_TCACHE_MAX_SPLIT (0 =
 * the kernels' automatic choice; gpu/tactic.c writes tile 16 for the GEMM tactic), times in
 * microseconds, finite, in (0, GR_TCACHE_MAX_US]. A file's tactics must also be ones gpu/tactic.c
 * writes (GR_TCACHE_CONV_TILES, GR_TCACHE_TILE_GEMM, the split choices in timing_cache.c): tile 0
 * or the GEMM with split 0, or a conv tile 1..GR_TCACHE_CONV_TILES with a split of
 * {1,2,3,4,6,8,12,16}; an fp32 conv's entry (key "f32:...") has its algorithm as the tile
 * (0..GR_TCACHE_F32_ALGOS-1) and its split-K parts as the split (0, or 2..16); a micro-batch
 * entry (key "mb:<precision>:n<batch>:...", gpu/engine.c) has the chosen sub-batch as the tile
 * (1..GR_TCACHE_MAX_MICRO_BATCH), split 0, and the replay time of the whole batch with it as
 * both times. A conv key's n<batch> is the batch the search timed (its representative
 * sub-batch), so engines of different batches share the entry. Entries may be
 * found in any order; lookups go through a hash index, so reading n entries is O(n).
 *
 * Invariant: a cache is never trusted in part. A file of another format version, graphrun
 * version or device, or with any malformed line, a wrong entry count or no "end", is ignored as a
 * whole with a one-line notice; a missing file is simply empty. The GPU side still checks every
 * cached tactic against the kernels' own argument checks and the numerics check before use. */
#ifndef GR_RUNTIME_TIMING_CACHE_H
#define GR_RUNTIME_TIMING_CACHE_H

#include <stddef.h>

#include "graphrun/runtime.h"

/* 3: tile 7 (patch) and the tensor-core first layer; 4: checksum; 5: a conv key's batch is the
 * batch timed (the representative sub-batch, gpu/tactic.c), micro-batch entries */
#define GR_TCACHE_VERSION 5
#define GR_TCACHE_VERSION_S "5" /* the same, for messages */
#define GR_TCACHE_MAX_MICRO_BATCH 4096 /* GR_MAX_BATCH: a micro-batch entry's tile */
#define GR_TCACHE_KEY_MAX 192     /* bytes of a layer key, NUL included */
#define GR_TCACHE_DEVICE_MAX 256  /* bytes of the device key, NUL included */
#define GR_TCACHE_MAX_ENTRIES 65536
#define GR_TCACHE_MAX_FILE_BYTES (16u << 20)
#define GR_TCACHE_MAX_TILE 16
#define GR_TCACHE_MAX_SPLIT 64
#define GR_TCACHE_MAX_US 1e9
#define GR_TCACHE_CONV_TILES 7 /* kernels/conv.h GR_CONV_TILES */
#define GR_TCACHE_TILE_GEMM 16 /* gpu/tactic.c TILE_GEMM */
#define GR_TCACHE_F32_ALGOS 4   /* kernels/gemm_f32.h GR_CONV_F32_*: an fp32 entry's tile */

typedef struct gr_tcache_entry {
    char key[GR_TCACHE_KEY_MAX];
    int tile, split;
    double us, auto_us;
} gr_tcache_entry;

typedef struct gr_timing_cache {
    char device[GR_TCACHE_DEVICE_MAX];
    gr_tcache_entry *entries;
    int n, cap;
    int dirty; /* entries added since it was read */
    int *slots; /* open-addressing index into entries (-1 empty), n_slots a power of two */
    int n_slots;
} gr_timing_cache;

/* An empty cache for `device` (control characters become '?', truncated to fit). */
void gr_timing_cache_init(gr_timing_cache *c, const char *device);
void gr_timing_cache_free(gr_timing_cache *c);

/* Replace the entries with those of `text` (len bytes, from `origin`, a file name for the
 * notice). Any problem leaves the cache empty and writes one line to notice ("" otherwise).
 * Never fails: a cache is an optimization. */
void gr_timing_cache_parse(gr_timing_cache *c, const char *text, size_t len, const char *origin,
                           char *notice, size_t notice_len);
/* Read `path` into the cache: a missing file is an empty cache without a notice; an unreadable,
 * oversized or invalid one is empty with a notice. */
void gr_timing_cache_load(gr_timing_cache *c, const char *path, char *notice, size_t notice_len);

/* The entry of `key`, or NULL. */
const gr_tcache_entry *gr_timing_cache_find(const gr_timing_cache *c, const char *key);
/* Add or replace the entry of `key`; GR_ERR_INVALID_ARGUMENT for a key or values the format
 * cannot hold, GR_ERR_LIMIT past GR_TCACHE_MAX_ENTRIES. Sets dirty. */
gr_status gr_timing_cache_put(gr_timing_cache *c, const char *key, int tile, int split, double us,
                              double auto_us);

/* The file's text (malloc'd, NUL-terminated; *len without the NUL). */
gr_status gr_timing_cache_serialize(const gr_timing_cache *c, char **text, size_t *len);
/* Write the cache to `path` atomically: a temporary file in the same folder, then rename. */
gr_status gr_timing_cache_save(const gr_timing_cache *c, const char *path);

#endif
