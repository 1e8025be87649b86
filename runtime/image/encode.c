/* Image writing through stb_image_write, and the shape check the image functions share.
 * stb_image_write's implementation is compiled here with its functions static: the library needs
 * stb's headers to build and nothing of stb to link or run (Debian's libstb.so is not linked, so
 * programs using graphrun need no stb package). */
#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
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

/* stb encodes into this callback, which writes to the file and remembers the first failure: stb's
 * own file writer ignores write and close errors (a full disk would leave a cut file). */
typedef struct sink {
    FILE *f;
    int err; /* errno of the first failed write, 0 while all went through */
} sink;

static void sink_write(void *ctx, void *data, int size)
{
    sink *k = ctx;
    if (k->err || size <= 0)
        return;
    if (fwrite(data, 1, (size_t)size, k->f) != (size_t)size)
        k->err = errno ? errno : EIO;
}

gr_status gr_image_write(const gr_image *im, const char *path)
{
    if (!path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_write: NULL path");
    if (!gr_image_valid(im))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: cannot write an empty or malformed image",
                       path);
    const int png = has_extension(path, ".png");
    if (!png && !has_extension(path, ".jpg") && !has_extension(path, ".jpeg"))
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "%s: unknown image extension (expected .png, .jpg or .jpeg)", path);
    sink k = {.f = fopen(path, "wb"), .err = 0};
    if (!k.f)
        return gr_fail(GR_ERR_IO, "%s: cannot create image file: %s", path, strerror(errno));
    errno = 0;
    int ok = png ? stbi_write_png_to_func(sink_write, &k, im->w, im->h, im->c, im->data,
                                          im->w * im->c)
                 : stbi_write_jpg_to_func(sink_write, &k, im->w, im->h, im->c, im->data, 90);
    if (!k.err && fflush(k.f) != 0)
        k.err = errno ? errno : EIO;
    if (fclose(k.f) != 0 && !k.err)
        k.err = errno ? errno : EIO;
    if (k.err)
        return gr_fail(GR_ERR_IO, "%s: cannot write image: %s", path, strerror(k.err));
    if (!ok)
        return gr_fail(GR_ERR_IO, "%s: cannot encode image", path);
    return GR_OK;
}
