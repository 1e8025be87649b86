/* Binary records in memory: a growable little-endian writer and a bounds-checked reader, the
 * checksums (FNV-1a for small records, gr_hash64 for large ones), and the atomic file write every
 * file graphrun writes goes through (a temporary file beside it, then rename).
 *
 * Both sides record the first failure instead of returning it from every call: a writer that ran
 * out of memory, or a reader asked for bytes past its end, ignores later calls and reads zeros,
 * and the caller checks `failed` / `short_read` once. Values are little endian whatever the host
 * (graphrun runs on little-endian hosts only: models/weights.c refuses others). */
#ifndef GR_BASE_BYTES_H
#define GR_BASE_BYTES_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "base/base.h"

typedef struct gr_bytes {
    uint8_t *data;
    size_t len, cap;
    int failed; /* an allocation failed: data holds what came before */
} gr_bytes;

void gr_bytes_put(gr_bytes *b, const void *p, size_t n);
void gr_bytes_u32(gr_bytes *b, uint32_t v);
void gr_bytes_i32(gr_bytes *b, int32_t v);
void gr_bytes_u64(gr_bytes *b, uint64_t v);
void gr_bytes_f32(gr_bytes *b, float v);
/* A string as u32 length + bytes (no NUL). */
void gr_bytes_str(gr_bytes *b, const char *s);
void gr_bytes_free(gr_bytes *b);

typedef struct gr_reader {
    const uint8_t *p;
    size_t len, pos;
    int short_read; /* a read went past the end: it and every later one read zeros */
} gr_reader;

void gr_reader_get(gr_reader *r, void *out, size_t n);
uint32_t gr_reader_u32(gr_reader *r);
int32_t gr_reader_i32(gr_reader *r);
uint64_t gr_reader_u64(gr_reader *r);
float gr_reader_f32(gr_reader *r);
/* A string written by gr_bytes_str into buf (len bytes, NUL-terminated); a longer one is a short
 * read (the caller refuses the record). */
void gr_reader_str(gr_reader *r, char *buf, size_t len);
/* A pointer to the next n bytes (NULL and a short read past the end). */
const uint8_t *gr_reader_take(gr_reader *r, size_t n);

/* FNV-1a 64 of data, continuing from h (start with GR_FNV1A_INIT). */
#define GR_FNV1A_INIT 0xcbf29ce484222325ULL
uint64_t gr_fnv1a(uint64_t h, const void *data, size_t len);

/* A 64-bit checksum of data for large blocks (an engine file's tens of megabytes of weights):
 * XXH3-64 with seed 0, value for value (base/hash64.c says why and how). FNV-1a goes a byte at a
 * time behind a multiply's latency (about 80 ms for 64 MB on the 2-core VM); this runs near memory
 * speed. Detects corruption, not tampering. */
uint64_t gr_hash64(const void *data, size_t len);

/* Write len bytes to path atomically: every file graphrun writes goes through here. A new file
 * beside path, created O_EXCL | O_NOFOLLOW under an unpredictable name (mode 0666 less the
 * umask, or the replaced file's), written, fsync'ed, renamed over path, the directory synced;
 * every step checked, the new file removed on failure. A symbolic link to a regular file is
 * written through (its target replaced, the link kept); an existing path that is not a regular
 * file (device, FIFO, socket, directory) or a dangling link is refused with GR_ERR_IO. Messages
 * name path, never the temporary; `what` names the kind of file. */
gr_status gr_write_file_atomic(const char *path, const void *data, size_t len, const char *what);
/* The same for a file made of n_parts pieces (a header and a large block), none copied. */
gr_status gr_write_file_parts_atomic(const char *path, const void *const *parts,
                                     const size_t *lens, int n_parts, const char *what);

/* A file written with stdio and then placed whole by gr_write_file_atomic: gr_memfile_open gives
 * a FILE * into memory (NULL and a message when it cannot), gr_memfile_commit closes it and writes
 * what it holds (nothing on a stream error); either way the memory is freed. For the reports,
 * labels and arrays the tools write (a stream to watch, like --results, stays a stream). */
typedef struct gr_memfile {
    FILE *f;
    char *data;
    size_t len;
} gr_memfile;
FILE *gr_memfile_open(gr_memfile *m, const char *path);
gr_status gr_memfile_commit(gr_memfile *m, const char *path, const char *what);

#endif
