/* gr_file_view: a whole file's bytes to read once (base/base.h). A regular file is mapped and its
 * pages faulted in together (MAP_POPULATE), so the bytes are the page cache's own: no buffer is
 * allocated, faulted in and copied into, which for a 64 MB saved engine was a sixth of its load.
 * Anything that cannot be mapped - a pipe, an empty file, a file system without mmap - is read
 * by gr_read_file, whose refusals (missing, a directory, too large) are the messages either way.
 * A mapped file stays open so that gr_file_view_check can tell whether it was written since. */
#define _DEFAULT_SOURCE /* MAP_POPULATE, strdup */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/bytes.h"

/* What a file is now: a write updates the mtime, a truncation the size too. Not the ctime: a
 * rename or unlink of the file (the deploy by rename that is safe) changes it, and the data not. */
static void identity(const struct stat *sb, int64_t id[4])
{
    id[0] = (int64_t)sb->st_dev;
    id[1] = (int64_t)sb->st_ino;
    id[2] = (int64_t)sb->st_size;
    id[3] = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

gr_status gr_file_view_open(const char *path, size_t max_bytes, const char *what, gr_file_view *v)
{
    *v = (gr_file_view){.fd = -1};
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uintmax_t)sb.st_size <= max_bytes) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat now;
        if (fd >= 0 && fstat(fd, &now) == 0 && S_ISREG(now.st_mode) && now.st_size > 0 &&
            (uintmax_t)now.st_size <= max_bytes) {
            int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
            flags |= MAP_POPULATE;
#endif
            void *map = mmap(NULL, (size_t)now.st_size, PROT_READ, flags, fd, 0);
            char *copy = strdup(path);
            if (map != MAP_FAILED && copy) {
                v->map = map;
                v->data = map;
                v->len = (size_t)now.st_size;
                v->fd = fd;
                v->path = copy;
                identity(&now, v->id);
                return GR_OK;
            }
            free(copy);
            if (map != MAP_FAILED)
                munmap(map, (size_t)now.st_size);
        }
        if (fd >= 0)
            close(fd);
    }
    char *heap = NULL;
    GR_TRY(gr_read_file(path, max_bytes, what, &heap, &v->len));
    v->heap = heap;
    v->data = (const uint8_t *)heap;
    return GR_OK;
}

/* The mapped bytes still what the caller verified (see has_sum); the size is unchanged, so every
 * page is inside the file. */
static int same_sum(const gr_file_view *v)
{
    if (!v->has_sum || v->len < 8)
        return 0;
    uint64_t stored = 0;
    for (int k = 0; k < 8; k++)
        stored |= (uint64_t)v->data[v->len - 8 + k] << (8 * k);
    return stored == v->sum && gr_hash64(v->data, v->len - 8) == v->sum;
}

gr_status gr_file_view_check(gr_file_view *v)
{
    if (!v->map)
        return GR_OK;
    struct stat sb;
    int64_t now[4];
    if (fstat(v->fd, &sb) != 0)
        return gr_fail(GR_ERR_IO, "%s: cannot stat the loaded file: %s", v->path, strerror(errno));
    identity(&sb, now);
    if (memcmp(now, v->id, sizeof now) == 0)
        return GR_OK;
    if (memcmp(now, v->id, 3 * sizeof now[0]) == 0 && same_sum(v)) {
        v->id[3] = now[3]; /* touched, or the same bytes written again */
        return GR_OK;
    }
    return gr_fail(GR_ERR_IO, "%s: the file was rewritten in place since it was loaded (%s): "
                   "load it again, and replace a loaded file by rename (mv, install), never by "
                   "cp over it", v->path,
                   now[2] != v->id[2] ? "its size changed" : "it was written");
}

void gr_file_view_release(gr_file_view *v)
{
    if (v->map) { /* fd is set only with a mapping (a zeroed view has none to close) */
        munmap(v->map, v->len);
        close(v->fd);
    }
    free(v->heap);
    free(v->path);
    *v = (gr_file_view){.fd = -1};
}
