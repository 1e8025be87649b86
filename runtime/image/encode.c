/* Image writing through stb_image_write (libstb holds the implementation), and the shape check the
 * image functions share. */
#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include <stb/stb_image_write.h>

bool gr_image_valid(const gr_image *im)
{
    return im && im->data && im->w > 0 && im->h > 0 && im->w <= GR_MAX_DIM &&
           im->h <= GR_MAX_DIM && im->c >= 1 && im->c <= 4;
}

/* Case-insensitive "does path end with ext". */
static bool has_extension(const char *path, const char *ext)
{
    size_t lp = strlen(path), le = strlen(ext);
    if (lp < le)
        return false;
    for (size_t i = 0; i < le; i++)
        if (tolower((unsigned char)path[lp - le + i]) != tolower((unsigned char)ext[i]))
            return false;
    return true;
}

gr_status gr_image_write(const gr_image *im, const char *path)
{
    if (!path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_write: NULL path");
    if (!gr_image_valid(im))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: cannot write an empty or malformed image",
                       path);
    int ok;
    if (has_extension(path, ".png"))
        ok = stbi_write_png(path, im->w, im->h, im->c, im->data, im->w * im->c);
    else if (has_extension(path, ".jpg") || has_extension(path, ".jpeg"))
        ok = stbi_write_jpg(path, im->w, im->h, im->c, im->data, 90);
    else
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "%s: unknown image extension (expected .png, .jpg or .jpeg)", path);
    if (!ok)
        return gr_fail(GR_ERR_IO, "%s: cannot write image", path);
    return GR_OK;
}

/* ---- letterbox: the reference -------------------------------------------------------------
 * Darknet's steps one after the other on whole float planes, as docs/darknet.md describes them. The
 * fast letterbox below must equal it byte for byte (tests/test_image.c, bench/06_stream.c). */
