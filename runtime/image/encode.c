/* Image writing, and the shape check the image functions share. PNG goes through stb_image_write,
 * compiled here with its functions static: the library needs stb's headers to build and nothing of
 * stb to link or run (Debian's libstb.so is not linked, so programs using graphrun need no stb
 * package). JPEG goes through libturbojpeg, which the decoder links anyway: stb's JPEG writer
 * shifts negative ints left (undefined behaviour that UBSan reports on ordinary photos). */
#include "base/bytes.h"
#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

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

/* stb encodes into memory through this callback (a failed allocation is remembered in
 * gr_bytes.failed); the file is then written whole by gr_write_file_atomic. */
static void sink_write(void *ctx, void *data, int size)
{
    if (size > 0)
        gr_bytes_put(ctx, data, (size_t)size);
}

/* JPEG-encode im (quality 90, 4:2:0 colour; grey stays grey, alpha is dropped) into a buffer
 * turbojpeg allocates; the caller frees it with tjFree. */
static gr_status encode_jpeg(const gr_image *im, const char *path, unsigned char **out,
                             unsigned long *size)
{
    static const int formats[] = {TJPF_GRAY, TJPF_GRAY, TJPF_RGB, TJPF_RGBA};
    const unsigned char *src = im->data;
    unsigned char *grey = NULL;
    if (im->c == 2) { /* grey + alpha: turbojpeg has no such format, keep the grey plane */
        size_t n = (size_t)im->w * (size_t)im->h;
        grey = gr_malloc(n, "JPEG grey plane");
        if (!grey)
            return GR_ERR_OUT_OF_MEMORY;
        for (size_t p = 0; p < n; p++)
            grey[p] = im->data[2 * p];
        src = grey;
    }
    const int pitch = im->c == 2 ? im->w : im->w * im->c;
    const int subsamp = im->c <= 2 ? TJSAMP_GRAY : TJSAMP_420;
    gr_status st = GR_OK;
    tjhandle tj = tjInitCompress();
    if (!tj)
        st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot start the JPEG encoder: %s", path,
                     tjGetErrorStr2(NULL));
    else if (tjCompress2(tj, src, im->w, pitch, im->h, formats[im->c - 1], out, size, subsamp, 90,
                         TJFLAG_ACCURATEDCT) != 0)
        st = gr_fail(GR_ERR_IO, "%s: cannot encode image: %s", path, tjGetErrorStr2(tj));
    if (tj)
        tjDestroy(tj);
    free(grey);
    return st;
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
    unsigned char *jpeg = NULL;
    unsigned long jpeg_size = 0;
    if (!png) { /* encode before creating the file: a failure leaves nothing behind */
        gr_status st = encode_jpeg(im, path, &jpeg, &jpeg_size);
        if (st != GR_OK) {
            tjFree(jpeg);
            return st;
        }
    }
    /* Encoded into memory, then written by the one atomic writer (base/bytes.h): a temporary file
     * beside path renamed over it, so a failure leaves the old picture or none, never a cut one. */
    if (png) {
        gr_bytes b = {0};
        int ok = stbi_write_png_to_func(sink_write, &b, im->w, im->h, im->c, im->data,
                                        im->w * im->c);
        gr_status st = !ok || b.failed
                           ? gr_fail(b.failed ? GR_ERR_OUT_OF_MEMORY : GR_ERR_IO,
                                     "%s: cannot encode image", path)
                           : gr_write_file_atomic(path, b.data, b.len, "image");
        gr_bytes_free(&b);
        return st;
    }
    gr_status st = gr_write_file_atomic(path, jpeg, jpeg_size, "image");
    tjFree(jpeg);
    return st;
}
