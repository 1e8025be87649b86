/* The optional image decoders: WebP through libwebp and TIFF through libtiff, each compiled in when
 * CMake found it (GR_HAVE_WEBP, GR_HAVE_TIFF; README "Requirements"). decode.c recognises them by
 * signature and calls here for the size (before any pixel, so the limits apply first) and the
 * pixels, 8-bit RGB like every other format; without the library the file is refused with a line
 * saying how to add it. libtiff's messages are caught per file (TIFFOpenOptions), never printed. */
#define _POSIX_C_SOURCE 200809L

#include "runtime/image/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GR_HAVE_WEBP
#include <webp/decode.h>
#endif
#ifdef GR_HAVE_TIFF
#include <tiffio.h>
#endif

gr_image_extra gr_image_extra_kind(const uint8_t *data, size_t len)
{
    if (len >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0)
        return GR_IMAGE_EXTRA_WEBP;
    if (len >= 4 && (memcmp(data, "II*\0", 4) == 0 || memcmp(data, "MM\0*", 4) == 0))
        return GR_IMAGE_EXTRA_TIFF;
    return GR_IMAGE_EXTRA_NONE;
}

const char *gr_image_extra_name(gr_image_extra kind)
{
    return kind == GR_IMAGE_EXTRA_WEBP ? "WebP" : kind == GR_IMAGE_EXTRA_TIFF ? "TIFF" : "?";
}

int gr_image_extra_available(gr_image_extra kind)
{
#ifdef GR_HAVE_WEBP
    if (kind == GR_IMAGE_EXTRA_WEBP)
        return 1;
#endif
#ifdef GR_HAVE_TIFF
    if (kind == GR_IMAGE_EXTRA_TIFF)
        return 1;
#endif
    (void)kind;
    return 0;
}

gr_status gr_image_extra_refuse(gr_image_extra kind, const char *name)
{
    const char *package = kind == GR_IMAGE_EXTRA_WEBP ? "libwebp-dev" : "libtiff-dev";
    return gr_fail(GR_ERR_UNSUPPORTED, "%s: byte 0: %s images are not accepted (JPEG, PNG, BMP): "
                   "this graphrun was built without %s (install %s and re-run cmake)", name,
                   gr_image_extra_name(kind), kind == GR_IMAGE_EXTRA_WEBP ? "libwebp" : "libtiff",
                   package);
}

/* ---- TIFF: libtiff reading the file's bytes in memory --------------------------------------- */

#ifdef GR_HAVE_TIFF
typedef struct tiff_mem {
    const uint8_t *data;
    size_t len, pos;
    char message[256]; /* libtiff's first error */
} tiff_mem;

static tmsize_t tiff_read(thandle_t h, void *buf, tmsize_t n)
{
    tiff_mem *m = (tiff_mem *)h;
    size_t left = m->len - m->pos, take = n < 0 ? 0 : (size_t)n < left ? (size_t)n : left;
    memcpy(buf, m->data + m->pos, take);
    m->pos += take;
    return (tmsize_t)take;
}

static tmsize_t tiff_write(thandle_t h, void *buf, tmsize_t n)
{
    (void)h, (void)buf, (void)n;
    return 0;
}

static toff_t tiff_seek(thandle_t h, toff_t off, int whence)
{
    tiff_mem *m = (tiff_mem *)h;
    uint64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
    if (off > (uint64_t)m->len || base + off > (uint64_t)m->len)
        return (toff_t)-1;
    m->pos = (size_t)(base + off);
    return m->pos;
}

static int tiff_close(thandle_t h)
{
    (void)h;
    return 0;
}

static toff_t tiff_size(thandle_t h) { return ((tiff_mem *)h)->len; }

static int tiff_map(thandle_t h, void **base, toff_t *size)
{
    (void)h, (void)base, (void)size;
    return 0;
}

static void tiff_unmap(thandle_t h, void *base, toff_t size) { (void)h, (void)base, (void)size; }

static int tiff_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif, (void)module;
    tiff_mem *m = user;
    if (!m->message[0])
        vsnprintf(m->message, sizeof m->message, fmt, ap);
    return 1;
}

static int tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1; /* a warning is not an error, and nothing is printed */
}

static gr_status tiff_open(tiff_mem *m, const char *name, TIFF **tif)
{
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot start the TIFF decoder", name);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_error, m);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_warning, m);
    *tif = TIFFClientOpenExt(name, "rm", (thandle_t)m, tiff_read, tiff_write, tiff_seek,
                             tiff_close, tiff_size, tiff_map, tiff_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!*tif)
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: TIFF: %s", name,
                       m->message[0] ? m->message : "cannot open");
    return GR_OK;
}
#endif

gr_status gr_image_extra_probe(gr_image_extra kind, const uint8_t *data, size_t len,
                               const char *name, int *w, int *h)
{
    *w = *h = 0;
#ifdef GR_HAVE_WEBP
    if (kind == GR_IMAGE_EXTRA_WEBP) {
        if (!WebPGetInfo(data, len, w, h))
            return gr_fail(GR_ERR_PARSE, "%s: not a readable image: WebP header", name);
        return GR_OK;
    }
#endif
#ifdef GR_HAVE_TIFF
    if (kind == GR_IMAGE_EXTRA_TIFF) {
        tiff_mem m = {.data = data, .len = len};
        TIFF *tif;
        GR_TRY(tiff_open(&m, name, &tif));
        uint32_t tw = 0, th = 0;
        int ok = TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &tw) && TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &th);
        TIFFClose(tif);
        if (!ok)
            return gr_fail(GR_ERR_PARSE, "%s: not a readable image: TIFF without its size", name);
        *w = tw > INT32_MAX ? INT32_MAX : (int)tw;
        *h = th > INT32_MAX ? INT32_MAX : (int)th;
        return GR_OK;
    }
#endif
    (void)data, (void)len;
    return gr_image_extra_refuse(kind, name);
}

gr_status gr_image_extra_decode(gr_image_extra kind, const uint8_t *data, size_t len,
                                const char *name, int w, int h, uint8_t *rgb)
{
#ifdef GR_HAVE_WEBP
    if (kind == GR_IMAGE_EXTRA_WEBP) {
        size_t size = (size_t)w * (size_t)h * 3;
        if (!WebPDecodeRGBInto(data, len, rgb, size, w * 3))
            return gr_fail(GR_ERR_PARSE, "%s: corrupt image: WebP data does not decode", name);
        return GR_OK;
    }
#endif
#ifdef GR_HAVE_TIFF
    if (kind == GR_IMAGE_EXTRA_TIFF) {
        /* libtiff's RGBA interface reads every photometric, depth and compression it knows
         * (alpha dropped, as for a PNG): ABGR words, rows top-down. */
        uint32_t *raster = malloc((size_t)w * (size_t)h * sizeof *raster);
        if (!raster)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a %dx%d TIFF", name, w, h);
        tiff_mem m = {.data = data, .len = len};
        TIFF *tif;
        gr_status st = tiff_open(&m, name, &tif);
        if (st == GR_OK) {
            int ok = TIFFReadRGBAImageOriented(tif, (uint32_t)w, (uint32_t)h, raster,
                                               ORIENTATION_TOPLEFT, 1);
            TIFFClose(tif);
            if (!ok)
                st = gr_fail(GR_ERR_PARSE, "%s: corrupt image: TIFF: %s", name,
                             m.message[0] ? m.message : "its pixels do not decode");
        }
        for (size_t i = 0; st == GR_OK && i < (size_t)w * (size_t)h; i++) {
            rgb[3 * i] = (uint8_t)TIFFGetR(raster[i]);
            rgb[3 * i + 1] = (uint8_t)TIFFGetG(raster[i]);
            rgb[3 * i + 2] = (uint8_t)TIFFGetB(raster[i]);
        }
        free(raster);
        return st;
    }
#endif
    (void)data, (void)len, (void)w, (void)h, (void)rgb;
    return gr_image_extra_refuse(kind, name);
}
