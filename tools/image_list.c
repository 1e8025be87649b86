/* The images of `graphrun --input DIR` and `--input-list FILE` (tools/cmd_stream.c): a folder's
 * image files by name (.jpg, .jpeg, .png, .bmp, and other image types, which fail with a reason;
 * any case; sorted, so the order is the same every time), or a list file's paths as given. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "tools/cli.h"

static int list_add(gr_cli_image_list *l, const char *dir, const char *name, size_t name_len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        char **grown = realloc(l->paths, (size_t)cap * sizeof *grown);
        if (!grown)
            return 0;
        l->paths = grown;
        l->cap = cap;
    }
    size_t dir_len = dir ? strlen(dir) + 1 : 0;
    char *p = malloc(dir_len + name_len + 1);
    if (!p)
        return 0;
    if (dir)
        snprintf(p, dir_len + 1, "%s/", dir);
    memcpy(p + dir_len, name, name_len);
    p[dir_len + name_len] = '\0';
    l->paths[l->n++] = p;
    return 1;
}

void gr_cli_image_list_free(gr_cli_image_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->paths[i]);
    free(l->paths);
}

/* The images graphrun decodes, and - listed too, so that each gets its error line ("x.webp: byte
 * 0: WebP images are not accepted (JPEG, PNG, BMP)") and the run's exit status says so, instead
 * of being skipped unseen - those of common image types it does not. */
static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || name[0] == '.')
        return 0;
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff",
                                       ".gif", ".heic", ".heif", ".avif", ".ppm", ".pgm", ".pnm",
                                       ".psd", ".hdr", ".tga", ".jp2", ".jxl"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i]) == 0)
            return 1;
    return 0;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int gr_cli_read_image_dir(const char *dir, gr_cli_image_list *l)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "graphrun: %s: cannot open directory\n", dir);
        return GR_EXIT_INPUT;
    }
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/')
        dir_len--;
    char trimmed[4096];
    snprintf(trimmed, sizeof trimmed, "%.*s", (int)dir_len, dir);
    struct dirent *entry;
    int rc = GR_EXIT_OK;
    while ((entry = readdir(d)) != NULL && rc == GR_EXIT_OK)
        if (is_image_name(entry->d_name) &&
            !list_add(l, trimmed, entry->d_name, strlen(entry->d_name)))
            rc = GR_EXIT_OOM;
    closedir(d);
    if (rc == GR_EXIT_OK && l->n > 1) /* qsort's array may not be NULL, even for 0 items */
        qsort(l->paths, (size_t)l->n, sizeof *l->paths, cmp_path);
    return rc;
}

int gr_cli_read_image_list(const char *file, gr_cli_image_list *l)
{
    char *text;
    size_t len;
    gr_status st = gr_read_file(file, (size_t)1 << 30, "image list", &text, &len);
    if (st != GR_OK)
        return gr_cli_fail(st, NULL);
    int rc = GR_EXIT_OK;
    for (size_t start = 0; start < len && rc == GR_EXIT_OK;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len, line_end = end;
        if (line_end > start && text[line_end - 1] == '\r')
            line_end--;
        if (line_end > start && !list_add(l, NULL, text + start, line_end - start))
            rc = GR_EXIT_OOM;
        start = end + 1;
    }
    free(text);
    return rc;
}
