/* Base utilities shared by every layer of graphrun's host code (models, ops, planner, runtime):
 * error reporting, checked size arithmetic, a deterministic RNG, fp16 conversion.
 * Pure C11, no CUDA. The error message is thread-local: a failing function records what and
 * where with gr_fail() and returns its status; the public gr_last_error() reads it back. */
#ifndef GR_BASE_BASE_H
#define GR_BASE_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "graphrun/runtime.h"

#if defined(__GNUC__)
#define GR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GR_PRINTF(a, b)
#endif

/* Record a one-line message for the calling thread and return `status`. */
gr_status gr_fail(gr_status status, const char *fmt, ...) GR_PRINTF(2, 3);
/* Prepend context ("yolo.cfg: ") to the current thread message; returns `status`. */
gr_status gr_fail_prefix(gr_status status, const char *fmt, ...) GR_PRINTF(2, 3);
void gr_clear_error(void);

/* Internal invariant (a graphrun bug, not bad input): returns GR_ERR_INTERNAL from the function. */
#define GR_CHECK_INTERNAL(cond)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return gr_fail(GR_ERR_INTERNAL, "internal error: %s (%s:%d)", #cond, __FILE__,         \
                           __LINE__);                                                              \
    } while (0)

/* Propagate a failing status. */
#define GR_TRY(expr)                                                                               \
    do {                                                                                           \
        gr_status gr_try_status_ = (expr);                                                         \
        if (gr_try_status_ != GR_OK)                                                               \
            return gr_try_status_;                                                                 \
    } while (0)

/* Checked arithmetic: false on overflow. */
bool gr_mul_size(size_t a, size_t b, size_t *out);
bool gr_add_size(size_t a, size_t b, size_t *out);

/* Allocation that records an OOM message naming `what`. Returns NULL on failure. */
void *gr_malloc(size_t bytes, const char *what);
void *gr_calloc(size_t count, size_t size, const char *what);

/* Largest dimension (width, height, channels, filters) graphrun accepts anywhere, and the largest
 * element count of one tensor. Checked before allocating. */
#define GR_MAX_DIM 65536
#define GR_MAX_TENSOR_ELEMS ((size_t)1 << 31)
#define GR_MAX_LAYERS 4096
#define GR_MAX_BATCH 4096

/* Deterministic RNG (splitmix64 seeded xoshiro-style); same sequence on every platform. */
typedef struct gr_rng {
    uint64_t s[4];
} gr_rng;
void gr_rng_seed(gr_rng *r, uint64_t seed);
uint64_t gr_rng_u64(gr_rng *r);
float gr_rng_uniform(gr_rng *r);  /* [0, 1) */
float gr_rng_normal(gr_rng *r);   /* N(0, 1), Box-Muller */

/* IEEE binary16 conversion, round to nearest even (what the GPU's __float2half does). The
 * inline functions take the normal range with a few integer operations (weight re-layouts and the
 * CPU fp16 engine convert tens of millions of values); zeros, subnormals, overflow, inf and NaN go
 * to the *_any functions, which handle every value (and are the reference the tests compare the
 * fast path with). */
uint16_t gr_f32_to_f16_any(float x);
float gr_f16_to_f32_any(uint16_t h);

static inline uint16_t gr_f32_to_f16(float x)
{
    uint32_t f;
    memcpy(&f, &x, sizeof f);
    uint32_t a = f & 0x7fffffffu;
    if (a < 0x38800000u || a >= 0x47800000u) /* |x| < 2^-14 or >= 2^16 (or not finite) */
        return gr_f32_to_f16_any(x);
    a += 0xfffu + ((a >> 13) & 1u); /* round the 13 dropped bits to nearest even; a carry into
                                       the exponent is the right result (up to inf) */
    return (uint16_t)(((f >> 16) & 0x8000u) | ((a >> 13) - (112u << 10)));
}

static inline float gr_f16_to_f32(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu;
    if (e == 0 || e == 31) /* zero, subnormal, inf, NaN */
        return gr_f16_to_f32_any(h);
    uint32_t f = ((uint32_t)(h & 0x8000u) << 16) | (((uint32_t)(h & 0x7fffu) + (112u << 10)) << 13);
    float x;
    memcpy(&x, &f, sizeof x);
    return x;
}
static inline float gr_round_f16(float x) { return gr_f16_to_f32(gr_f32_to_f16(x)); }

/* Files found by listing a folder are read only when they are regular files: a stray FIFO would
 * block the reader until something writes to it, a device such as /dev/zero never ends.
 * gr_open_regular_file opens `path` without
 * blocking, checks with fstat that it is a regular file of at most max_bytes (refusals name the
 * path and the kind of file: GR_ERR_IO, or GR_ERR_LIMIT for the size) and returns the descriptor
 * and size; gr_read_fd reads such a descriptor whole into *buf (*cap bytes, grown as needed, kept
 * on failure; NUL-terminated) and refuses a file that grew past `size`. `what` names the kind of
 * file in messages ("cfg", "image"). */
/* "a directory", "a FIFO", "a character device", ...: a file that is not regular, for messages. */
const char *gr_file_kind(mode_t mode);
gr_status gr_open_regular_file(const char *path, size_t max_bytes, const char *what, int *fd,
                               size_t *size);
gr_status gr_read_fd(int fd, const char *path, size_t size, const char *what, uint8_t **buf,
                     size_t *cap, size_t *len);

/* Read a whole file (at most max_bytes) into a malloc'd NUL-terminated buffer: a regular file
 * (its size checked first) or a stream named explicitly (a pipe, a FIFO, a terminal); a directory
 * or a device (/dev/zero would never end) is refused by kind. */
gr_status gr_read_file(const char *path, size_t max_bytes, const char *what, char **data,
                       size_t *len);
/* The same for a file that must be regular (a cache, a listed image): anything else - a FIFO,
 * which would block the reader until something writes to it - is refused by kind without
 * blocking (gr_open_regular_file). */
gr_status gr_read_regular_file(const char *path, size_t max_bytes, const char *what, char **data,
                               size_t *len);

/* A whole file (at most max_bytes) to read once, without copying it where the system allows: a
 * regular file is mapped read-only (MAP_PRIVATE), anything else read by gr_read_file (the same
 * refusals). The view's data and len stay valid until gr_file_view_release, which a view may
 * outlive its open by (a loaded engine keeps its file's to lend its network the weights).
 * A mapping shows the file's bytes as they are now: a file rewritten in place (`cp new old`)
 * changes them, and truncated makes reading them a SIGBUS. Replacing the file by rename (graphrun
 * writes its files so: gr_write_file_atomic) or deleting it leaves the mapping intact. A mapped
 * view therefore keeps its file open and remembers what it was (device, inode, size, modification time):
 * gr_file_view_check refuses, with GR_ERR_IO naming the path, a view whose file was written since
 * it was opened; callers check before each use of the bytes. base/file_view.c */
typedef struct gr_file_view {
    const uint8_t *data;
    size_t len;
    void *map;  /* the mapping, or NULL */
    char *heap; /* gr_read_file's buffer, or NULL */
    int fd;     /* the mapped file, kept open to be checked; -1 when not mapped */
    char *path; /* the path it was opened by (for messages); NULL when not mapped */
    int64_t id[4]; /* the mapped file at open: device, inode, size, mtime (ns) */
    int has_sum;   /* set by a caller that verified that the last 8 bytes are sum, the gr_hash64 */
    uint64_t sum;  /* of all before them (an engine file): see gr_file_view_check */
} gr_file_view;
gr_status gr_file_view_open(const char *path, size_t max_bytes, const char *what, gr_file_view *v);
/* GR_OK for a view that was read (it is a private copy) or whose file is unchanged. With has_sum,
 * a file whose mtime changed but not its size is hashed again: the same bytes (touch, or cp of
 * the identical file) are accepted and the new mtime remembered; other bytes are refused. */
gr_status gr_file_view_check(gr_file_view *v);
void gr_file_view_release(gr_file_view *v);

size_t gr_dtype_size(gr_dtype t);
const char *gr_dtype_name(gr_dtype t);

#endif
