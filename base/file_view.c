/* gr_file_view: a whole file's bytes to read once (base/base.h). A regular file is mapped and its
 * pages faulted in together (MAP_POPULATE), so the bytes are the page cache's own: no buffer is
 * allocated, faulted in and copied into, which for a 64 MB saved engine was a sixth of its load.
 * Anything that cannot be mapped - a pipe, an empty file, a file system without mmap - is read
 * by gr_read_file, whose refusals (missing, a directory, too large) are the messages either way. */
#define _DEFAULT_SOURCE /* MAP_POPULATE */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

gr_status gr_file_view_open(const char *path, size_t max_bytes, const char *what, gr_file_view *v)
{
    *v = (gr_file_view){0};
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
            if (map != MAP_FAILED) {
                v->map = map;
                v->data = map;
                v->len = (size_t)now.st_size;
            }
        }
        if (fd >= 0)
            close(fd);
        if (v->map)
            return GR_OK;
    }
    char *heap = NULL;
    GR_TRY(gr_read_file(path, max_bytes, what, &heap, &v->len));
    v->heap = heap;
    v->data = (const uint8_t *)heap;
    return GR_OK;
}

void gr_file_view_release(gr_file_view *v)
{
    if (v->map)
        munmap(v->map, v->len);
    free(v->heap);
    *v = (gr_file_view){0};
}
