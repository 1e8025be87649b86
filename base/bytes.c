/* Binary records in memory and atomic file writes (base/bytes.h). */
#define _DEFAULT_SOURCE /* realpath, fchmod, lstat */
#include "base/bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void gr_bytes_put(gr_bytes *b, const void *p, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->failed = 1;
                return;
            }
            cap *= 2;
        }
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void gr_bytes_u32(gr_bytes *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gr_bytes_put(b, le, sizeof le);
}

void gr_bytes_i32(gr_bytes *b, int32_t v) { gr_bytes_u32(b, (uint32_t)v); }

void gr_bytes_u64(gr_bytes *b, uint64_t v)
{
    gr_bytes_u32(b, (uint32_t)v);
    gr_bytes_u32(b, (uint32_t)(v >> 32));
}

void gr_bytes_f32(gr_bytes *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    gr_bytes_u32(b, bits);
}

void gr_bytes_str(gr_bytes *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    gr_bytes_u32(b, (uint32_t)n);
    gr_bytes_put(b, s, n);
}

void gr_bytes_free(gr_bytes *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void gr_reader_get(gr_reader *r, void *out, size_t n)
{
    if (r->short_read || n > r->len - r->pos) {
        r->short_read = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
}

uint32_t gr_reader_u32(gr_reader *r)
{
    uint8_t le[4];
    gr_reader_get(r, le, sizeof le);
    return (uint32_t)le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
}

int32_t gr_reader_i32(gr_reader *r) { return (int32_t)gr_reader_u32(r); }

uint64_t gr_reader_u64(gr_reader *r)
{
    uint64_t lo = gr_reader_u32(r);
    return lo | (uint64_t)gr_reader_u32(r) << 32;
}

float gr_reader_f32(gr_reader *r)
{
    uint32_t bits = gr_reader_u32(r);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

void gr_reader_str(gr_reader *r, char *buf, size_t len)
{
    uint32_t n = gr_reader_u32(r);
    buf[0] = '\0';
    if (r->short_read || n >= len || n > r->len - r->pos) {
        r->short_read = 1;
        return;
    }
    memcpy(buf, r->p + r->pos, n);
    buf[n] = '\0';
    r->pos += n;
}

const uint8_t *gr_reader_take(gr_reader *r, size_t n)
{
    if (r->short_read || n > r->len - r->pos) {
        r->short_read = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint64_t gr_fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* What the write replaces: path itself, or the existing regular file a symbolic link leads to (the
 * link stays a link). A missing path is created; anything else is refused. *target is malloc'd. */
static gr_status write_target(const char *path, const char *what, char **target, struct stat *old,
                              int *exists)
{
    *exists = 0;
    *target = NULL;
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return gr_fail(GR_ERR_IO, "%s: cannot write the %s: %s", path, what, strerror(errno));
        *target = strdup(path);
        return *target ? GR_OK : gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory (%s)", path, what);
    }
    if (S_ISLNK(sb.st_mode)) {
        *target = realpath(path, NULL);
        if (!*target)
            return gr_fail(GR_ERR_IO, "%s: a symbolic link graphrun cannot follow to a file (%s): "
                           "the %s is written through a link only to an existing regular file",
                           path, strerror(errno), what);
        if (stat(*target, &sb) != 0) {
            gr_status st = gr_fail(GR_ERR_IO, "%s: cannot write the %s: %s", path, what,
                                   strerror(errno));
            free(*target);
            *target = NULL;
            return st;
        }
    }
    if (!S_ISREG(sb.st_mode)) {
        free(*target);
        *target = NULL;
        return gr_fail(GR_ERR_IO, "%s: not a regular file (%s): graphrun writes the %s as a "
                       "new file renamed over a regular file, never onto a device, FIFO, socket "
                       "or directory", path, gr_file_kind(sb.st_mode), what);
    }
    if (!*target)
        *target = strdup(path);
    if (!*target)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory (%s)", path, what);
    *old = sb;
    *exists = 1;
    return GR_OK;
}

/* A new file beside target, created exclusively (O_EXCL | O_NOFOLLOW: nothing planted at the
 * name is opened or followed) under a name nobody can predict; mode 0666 less the umask. */
static int create_temporary(const char *target, char *tmp, size_t tmp_len)
{
    static _Atomic unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = gr_fnv1a(GR_FNV1A_INIT, &ts, sizeof ts);
    const long pid = (long)getpid();
    h = gr_fnv1a(h, &pid, sizeof pid);
    h = gr_fnv1a(h, &tmp, sizeof tmp); /* the stack's address: randomised per process */
    for (int attempt = 0; attempt < 64; attempt++) {
        const unsigned n = counter++;
        h = gr_fnv1a(h, &n, sizeof n);
        snprintf(tmp, tmp_len, "%s.tmp-%012llx", target, (unsigned long long)(h >> 16));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The directory entry made durable too: best effort (some file systems refuse fsync on a
 * directory, and the file itself is in place either way). */
static void sync_directory(const char *target)
{
    const char *slash = strrchr(target, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - target) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", slash == target ? 1 : (int)(slash - target), target);
    else
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

gr_status gr_write_file_atomic(const char *path, const void *data, size_t len, const char *what)
{
    return gr_write_file_parts_atomic(path, &data, &len, 1, what);
}

gr_status gr_write_file_parts_atomic(const char *path, const void *const *parts,
                                     const size_t *lens, int n_parts, const char *what)
{
    char *target;
    struct stat old;
    int exists;
    GR_TRY(write_target(path, what, &target, &old, &exists));
    size_t tmp_len = strlen(target) + 32;
    char *tmp = malloc(tmp_len);
    if (!tmp) {
        free(target);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory (%s)", path, what);
    }
    gr_status st = GR_OK;
    int fd = create_temporary(target, tmp, tmp_len);
    if (fd < 0) {
        st = gr_fail(GR_ERR_IO, "%s: cannot write the %s (a new file beside it): %s", path, what,
                     strerror(errno));
    } else {
        int err = 0;
        for (int k = 0; k < n_parts && !err; k++)
            err = write_all(fd, parts[k], lens[k]);
        /* Replacing a file keeps its permissions (the owner is whoever writes). */
        if (!err && exists && fchmod(fd, old.st_mode & 07777) != 0)
            err = errno;
        if (!err && fsync(fd) != 0)
            err = errno;
        if (close(fd) != 0 && !err)
            err = errno;
        if (err)
            st = gr_fail(GR_ERR_IO, "%s: write error (%s): %s", path, what, strerror(err));
        else if (rename(tmp, target) != 0)
            st = gr_fail(GR_ERR_IO, "%s: cannot rename the %s into place: %s", path, what,
                         strerror(errno));
        if (st != GR_OK)
            unlink(tmp);
        else
            sync_directory(target);
    }
    free(tmp);
    free(target);
    return st;
}

FILE *gr_memfile_open(gr_memfile *m, const char *path)
{
    *m = (gr_memfile){0};
    m->f = open_memstream(&m->data, &m->len);
    if (!m->f)
        gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot start the file in memory: %s", path,
                strerror(errno));
    return m->f;
}

gr_status gr_memfile_commit(gr_memfile *m, const char *path, const char *what)
{
    int failed = ferror(m->f);
    if (fclose(m->f) != 0)
        failed = 1;
    gr_status st = failed ? gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory writing the %s",
                                    path, what)
                          : gr_write_file_atomic(path, m->data, m->len, what);
    free(m->data);
    *m = (gr_memfile){0};
    return st;
}
