/* Where graphrun's data is: found relative to the file this code was loaded from (the shared
 * library, or a program linked with the static one), never through a path compiled in from the
 * source tree, so an installed tree works wherever it is moved. For the directory D holding that
 * file the candidates are, in order:
 *   D/GR_BIN_TO_DATA        a program in <prefix>/bin: <prefix>/share/graphrun
 *   D/GR_LIB_TO_DATA        the shared library in <prefix>/lib (multiarch lib dirs included)
 *   D/data                  the build tree, where CMake links build/data to the source's data/
 *   GR_INSTALL_DATA_DIR     the configured prefix's share/graphrun (programs linked statically
 *                           outside the installed tree)
 * CMake computes the relative parts from the install layout (CMakeLists.txt, "install layout").
 * The candidates are computed once per process; each lookup checks them in order. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/data.h"

#ifndef GR_BIN_TO_DATA
#define GR_BIN_TO_DATA "../share/graphrun"
#endif
#ifndef GR_LIB_TO_DATA
#define GR_LIB_TO_DATA "../share/graphrun"
#endif
#ifndef GR_INSTALL_DATA_DIR
#define GR_INSTALL_DATA_DIR "/usr/local/share/graphrun"
#endif

#define MAX_DIRS 4

static struct {
    pthread_once_t once;
    int n;
    char dir[MAX_DIRS][PATH_MAX];
    char photo_path[GR_BUNDLED_PHOTOS][PATH_MAX];
    const char *photos[GR_BUNDLED_PHOTOS + 1];
    int photos_ok;
} data = {.once = PTHREAD_ONCE_INIT};

static const char anchor; /* an address inside the file this code is in */

/* The absolute path of the file holding this code: the shared object's, or for the main program
 * (whose link map has no name) /proc/self/exe. 0 on success. */
static int own_file(char *path)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(&anchor, &info, (void **)&map, RTLD_DL_LINKMAP))
        return -1;
    const char *name = map && map->l_name && map->l_name[0] ? map->l_name : NULL;
    if (name)
        return realpath(name, path) ? 0 : -1;
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
    if (n <= 0)
        return -1;
    path[n] = '\0';
    return 0;
}

/* Candidate a/b, resolved to its real path when it exists (messages and paths then read
 * <prefix>/share/graphrun, not <prefix>/bin/../share/graphrun). */
static void add_dir(const char *a, const char *b)
{
    char joined[PATH_MAX];
    int n = snprintf(joined, sizeof joined, "%s%s%s", a, b ? "/" : "", b ? b : "");
    if (n <= 0 || n >= PATH_MAX)
        return;
    if (!realpath(joined, data.dir[data.n]))
        memcpy(data.dir[data.n], joined, (size_t)n + 1);
    for (int i = 0; i < data.n; i++)
        if (strcmp(data.dir[i], data.dir[data.n]) == 0)
            return;
    data.n++;
}

static void find_dirs(void)
{
    char self[PATH_MAX];
    if (own_file(self) == 0) {
        char *slash = strrchr(self, '/');
        if (slash)
            *(slash == self ? slash + 1 : slash) = '\0';
        add_dir(self, GR_BIN_TO_DATA);
        add_dir(self, GR_LIB_TO_DATA);
        add_dir(self, "data");
    }
    add_dir(GR_INSTALL_DATA_DIR, NULL);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

gr_status gr_data_path(const char *name, char *buf, size_t size)
{
    if (!name || !name[0] || !buf || size == 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_data_path: NULL or empty argument");
    buf[0] = '\0';
    pthread_once(&data.once, find_dirs);
    char tried[MAX_DIRS * (PATH_MAX + 2)] = "";
    for (int i = 0; i < data.n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", data.dir[i], name);
        if (exists(path)) {
            if (strlen(path) >= size)
                return gr_fail(GR_ERR_LIMIT, "gr_data_path: %s does not fit in %zu bytes", path,
                               size);
            memcpy(buf, path, strlen(path) + 1);
            return GR_OK;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", data.dir[i]);
    }
    return gr_fail(GR_ERR_IO, "graphrun data file '%s' not found; looked in %s (install graphrun "
                              "with cmake --install: its data goes to <prefix>/share/graphrun)",
                   name, data.n ? tried : "no folder (the library's own location is unknown)");
}

static const char *const photo_names[GR_BUNDLED_PHOTOS] = {"dog.jpg", "person.jpg", "horses.jpg",
                                                           "eagle.jpg", "giraffe.jpg"};

static void find_photos(void)
{
    data.photos_ok = 1;
    for (int i = 0; i < GR_BUNDLED_PHOTOS; i++) {
        data.photos[i] = data.photo_path[i];
        if (gr_data_path(photo_names[i], data.photo_path[i], PATH_MAX) != GR_OK)
            data.photos_ok = 0;
    }
    data.photos[GR_BUNDLED_PHOTOS] = NULL;
}

gr_status gr_data_bundled_photos(const char *const **list)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    *list = NULL;
    pthread_once(&once, find_photos);
    if (!data.photos_ok) {
        /* The message is per thread: look the missing one up again here to set this thread's. */
        char path[PATH_MAX];
        for (int i = 0; i < GR_BUNDLED_PHOTOS; i++)
            GR_TRY(gr_data_path(photo_names[i], path, sizeof path));
        return gr_fail(GR_ERR_IO, "the bundled photos were missing when graphrun first looked for "
                                  "them (%s): restart the program", path);
    }
    *list = data.photos;
    return GR_OK;
}
