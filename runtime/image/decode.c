/* Image decoding: JPEG through libjpeg-turbo (TurboJPEG API), PNG through libpng, BMP here; the
 * per-thread reader the folder and calibration workers use. */
#define _POSIX_C_SOURCE 200809L /* close */

#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <png.h>
#include <turbojpeg.h>

void gr_image_destroy(gr_image *im)
{
    if (!im)
        return;
    free(im->data);
    free(im);
}

/* ---- decoding --------------------------------------------------------------------------------
 * JPEG goes to libjpeg-turbo (TurboJPEG API) and PNG to libpng (its low-level API): the decoders
 * the field uses, SIMD-fast and fuzzed upstream (OSS-Fuzz). BMP, rare in detection data, is read
 * here (read_bmp: uncompressed 24- and 32-bit only). Formats are recognised by signature; GIF, PSD,
 * HDR, PIC, PNM, HEIF and AVIF are named in the refusal, anything else is "not an image". WebP
 * and TIFF go to decode_extra.c (libwebp, libtiff where the build has them). Sizes are checked
 * from the header (gr_image_probe_mem) before any pixel is decoded. A decoder's warning (a
 * truncated or damaged JPEG that libjpeg-turbo would pad with grey) is an error: graphrun runs a
 * detector on what the file holds or refuses it. */

static bool starts_with(const uint8_t *data, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(data, magic, n) == 0;
}

typedef enum { FORMAT_JPEG, FORMAT_PNG, FORMAT_BMP, FORMAT_WEBP, FORMAT_TIFF } image_format;

static gr_status identify_format(const uint8_t *data, size_t len, const char *name,
                                 image_format *format)
{
    if (starts_with(data, len, "\xff\xd8\xff", 3)) {
        *format = FORMAT_JPEG;
        return GR_OK;
    }
    if (starts_with(data, len, "\x89PNG\r\n\x1a\n", 8)) {
        *format = FORMAT_PNG;
        return GR_OK;
    }
    if (starts_with(data, len, "BM", 2)) {
        *format = FORMAT_BMP;
        return GR_OK;
    }
    gr_image_extra extra = gr_image_extra_kind(data, len); /* WebP, TIFF: decode_extra.c */
    if (extra != GR_IMAGE_EXTRA_NONE) {
        if (!gr_image_extra_available(extra))
            return gr_image_extra_refuse(extra, name);
        *format = extra == GR_IMAGE_EXTRA_WEBP ? FORMAT_WEBP : FORMAT_TIFF;
        return GR_OK;
    }
    static const struct {
        const char *magic;
        size_t n;
        const char *format;
    } refused[] = {{"GIF8", 4, "GIF"},           {"8BPS", 4, "PSD"},
                   {"#?RADIANCE", 10, "HDR"},   {"#?RGBE", 6, "HDR"},
                   {"\x53\x80\xf6\x34", 4, "PIC"}, {"P5", 2, "PGM"},
                   {"P6", 2, "PPM"}};
    const char *other = NULL;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (starts_with(data, len, refused[i].magic, refused[i].n))
            other = refused[i].format;
    /* Common in photo folders: HEIF/AVIF (an ISO media file of that brand). */
    if (len >= 12 && memcmp(data + 4, "ftyp", 4) == 0)
        other = memcmp(data + 8, "avif", 4) == 0 || memcmp(data + 8, "avis", 4) == 0 ? "AVIF"
                : memcmp(data + 8, "heic", 4) == 0 || memcmp(data + 8, "heix", 4) == 0 ||
                        memcmp(data + 8, "mif1", 4) == 0
                    ? "HEIF"
                    : other;
    if (other)
        return gr_fail(GR_ERR_UNSUPPORTED,
                       "%s: byte 0: %s images are not accepted (JPEG, PNG, BMP)", name, other);
    return gr_fail(GR_ERR_PARSE, "%s: byte 0: not a JPEG, PNG or BMP image", name);
}

static uint32_t read_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- BMP: BITMAPINFOHEADER (or a later, longer header), BI_RGB, 24 or 32 bits per pixel ---- */

static uint32_t read_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct bmp_header {
    int w, h;          /* h > 0 */
    bool top_down;     /* a negative height in the file */
    int bytes_per_pixel;
    size_t pixel_offset, row_stride;
} bmp_header;

/* Dimensions first (so a huge header reports the size limit), then what this reader supports. */
static gr_status read_bmp_header(const uint8_t *data, size_t len, const char *name, bmp_header *b,
                                 bool dims_only)
{
    if (len < 54 || read_le32(data + 14) < 40)
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: BMP header cut short or older "
                       "than BITMAPINFOHEADER", name);
    int32_t w = (int32_t)read_le32(data + 18), h = (int32_t)read_le32(data + 22);
    if (w <= 0 || h == 0 || h == INT32_MIN)
        return gr_fail(GR_ERR_PARSE, "%s: byte 18: BMP size %dx%d", name, (int)w, (int)h);
    b->w = (int)w;
    b->top_down = h < 0;
    b->h = (int)(h < 0 ? -h : h);
    if (dims_only)
        return GR_OK;
    unsigned bits = (unsigned)(data[28] | data[29] << 8);
    uint32_t compression = read_le32(data + 30);
    if (compression != 0 || (bits != 24 && bits != 32))
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: byte 28: BMP with %u bits per pixel, compression "
                       "%u (only uncompressed 24- and 32-bit BMP is read)", name, bits,
                       (unsigned)compression);
    b->bytes_per_pixel = (int)bits / 8;
    b->row_stride = ((size_t)b->w * (size_t)b->bytes_per_pixel + 3) & ~(size_t)3;
    b->pixel_offset = read_le32(data + 10);
    size_t need; /* the dimensions are within the limits here, so this cannot overflow */
    need = b->row_stride * (size_t)b->h;
    if (b->pixel_offset > len || len - b->pixel_offset < need)
        return gr_fail(GR_ERR_PARSE, "%s: corrupt image: BMP pixel data at byte %zu needs %zu "
                       "bytes, the file has %zu", name, b->pixel_offset, need,
                       b->pixel_offset > len ? (size_t)0 : len - b->pixel_offset);
    return GR_OK;
}

static gr_status decode_bmp(const uint8_t *data, size_t len, const char *name, uint8_t *rgb)
{
    bmp_header b;
    GR_TRY(read_bmp_header(data, len, name, &b, false));
    for (int y = 0; y < b.h; y++) {
        int src_row = b.top_down ? y : b.h - 1 - y; /* BMP rows go bottom-up by default */
        const uint8_t *src = data + b.pixel_offset + (size_t)src_row * b.row_stride;
        uint8_t *dst = rgb + (size_t)y * (size_t)b.w * 3;
        for (int x = 0; x < b.w; x++, src += b.bytes_per_pixel, dst += 3) {
            dst[0] = src[2]; /* stored BGR(A) */
            dst[1] = src[1];
            dst[2] = src[0];
        }
    }
    return GR_OK;
}

/* ---- JPEG: libjpeg-turbo ----------------------------------------------------------------- */

static gr_status jpeg_open(const char *name, tjhandle *tj)
{
    *tj = tjInitDecompress();
    if (!*tj)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot start the JPEG decoder: %s", name,
                       tjGetErrorStr2(NULL));
    return GR_OK;
}

static gr_status jpeg_size(tjhandle tj, const uint8_t *data, size_t len, const char *name, int *w,
                           int *h)
{
    int subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(tj, data, (unsigned long)len, w, h, &subsamp, &colorspace) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: JPEG: %s", name,
                       tjGetErrorStr2(tj));
    if (*w <= 0 || *h <= 0) /* libjpeg-turbo reached the end of the data before a frame header */
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: JPEG: no frame header before the "
                       "end of the data (%zu bytes)", name, len);
    return GR_OK;
}

/* CMYK to RGB as OpenCV's cv2.imread converts it (imgcodecs icvCvt_CMYK2BGR_8u_C4C3R): libjpeg
 * hands out the stored values, which Adobe's CMYK and YCCK JPEGs (nearly all of them) store
 * inverted, so R = k - ((255 - c) * k >> 8), about c * k / 255; likewise G from m, B from y. */
static void cmyk_to_rgb(const uint8_t *cmyk, size_t pixels, uint8_t *rgb)
{
    for (size_t i = 0; i < pixels; i++, cmyk += 4, rgb += 3) {
        int k = cmyk[3];
        for (int ch = 0; ch < 3; ch++)
            rgb[ch] = (uint8_t)(k - ((255 - cmyk[ch]) * k >> 8));
    }
}

/* LIMITSCANS: a progressive JPEG of more than 500 scans is refused (a CPU-time bomb). A
 * decoder's warning is an error (see above). TurboJPEG picks the DCT scaling factor from w x h. */
#define JPEG_FLAGS (TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)

/* A CMYK or YCCK JPEG: decoded to CMYK, then converted. */
static gr_status decode_jpeg_cmyk(tjhandle tj, const uint8_t *data, size_t len, const char *name,
                                  int w, int h, uint8_t *rgb)
{
    size_t pixels = (size_t)w * (size_t)h; /* within GR_MAX_IMAGE_PIXELS: x4 cannot overflow */
    uint8_t *cmyk = gr_malloc(pixels * 4, "CMYK pixels");
    if (!cmyk)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = GR_OK;
    if (tjDecompress2(tj, data, (unsigned long)len, cmyk, w, 0, h, TJPF_CMYK, JPEG_FLAGS) != 0)
        st = gr_fail(GR_ERR_PARSE, "%s: corrupt image: JPEG (CMYK): %s", name, tjGetErrorStr2(tj));
    else
        cmyk_to_rgb(cmyk, pixels, rgb);
    free(cmyk);
    return st;
}

static gr_status decode_jpeg_with(tjhandle tj, const uint8_t *data, size_t len, const char *name,
                                  int w, int h, uint8_t *rgb)
{
    int file_w, file_h, subsamp, colorspace;
    if (tjDecompressHeader3(tj, data, (unsigned long)len, &file_w, &file_h, &subsamp,
                            &colorspace) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: JPEG: %s", name,
                       tjGetErrorStr2(tj));
    if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
        return decode_jpeg_cmyk(tj, data, len, name, w, h, rgb);
    if (tjDecompress2(tj, data, (unsigned long)len, rgb, w, 0, h, TJPF_RGB, JPEG_FLAGS) != 0)
        return gr_fail(GR_ERR_PARSE, "%s: corrupt image: JPEG: %s", name, tjGetErrorStr2(tj));
    return GR_OK;
}

/* `tj`: a decompressor kept between images (a gr_image_reader's, which drops it after a
 * failure), or NULL for one of its own. */
static gr_status decode_jpeg(tjhandle tj, const uint8_t *data, size_t len, const char *name, int w,
                             int h, uint8_t *rgb)
{
    if (tj)
        return decode_jpeg_with(tj, data, len, name, w, h, rgb);
    tjhandle own = NULL;
    GR_TRY(jpeg_open(name, &own));
    gr_status st = decode_jpeg_with(own, data, len, name, w, h, rgb);
    tjDestroy(own);
    return st;
}

/* ---- PNG: libpng ---------------------------------------------------------------------------
 * libpng's low-level API with explicit transforms, so that every pixel is the value the file
 * stores, as Darknet's stb_image and OpenCV's cv2.imread read it. (libpng's simplified API treats
 * 16-bit samples as linear light and gamma-encodes them on the way to 8 bits: up to 72 levels too
 * bright.)
 *  - 16-bit samples keep their high byte, v >> 8 (png_set_strip_16; stb_image's 16-to-8
 *    conversion and cv2.imread do the same, where png_set_scale_16 would round v * 255 / 65535:
 *    they differ by one level on some values);
 *  - palette entries become their RGB; grey of 1, 2 or 4 bits is scaled to 0..255; grey is
 *    copied to R, G and B;
 *  - alpha (an alpha channel, or transparency from a tRNS chunk) is dropped, not composited
 *    (Darknet's loader keeps the first three channels);
 *  - gAMA, sRGB, iCCP, cHRM and sBIT are ignored, as stb_image and OpenCV ignore them.
 * libpng reports errors by longjmp; png_run holds the setjmp and touches only the png_job (a
 * caller's object), so nothing it changes is lost by the jump. */

typedef struct png_job {
    const uint8_t *data;
    size_t len, pos;
    bool header_read; /* past IHDR and the chunks before the image data */
    uint8_t *rgb;     /* w x h x 3 */
    int w, h;
    char message[200];
} png_job;

static void png_job_error(png_structp png, png_const_charp message)
{
    png_job *job = png_get_error_ptr(png);
    snprintf(job->message, sizeof job->message, "%s", message);
    png_longjmp(png, 1);
}

static void png_job_warning(png_structp png, png_const_charp message)
{
    (void)png; /* a damaged ancillary chunk, an unknown profile: the pixels are still right */
    (void)message;
}

static void png_job_read(png_structp png, png_bytep dst, size_t n)
{
    png_job *job = png_get_io_ptr(png);
    if (n > job->len - job->pos)
        png_error(png, "the data ends early");
    memcpy(dst, job->data + job->pos, n);
    job->pos += n;
}

/* Read info, set the transforms, read every row (every pass of an interlaced image). */
static bool png_run(png_structp png, png_infop info, png_job *job)
{
    if (setjmp(png_jmpbuf(png)))
        return false;
    png_read_info(png, info);
    job->header_read = true;
    int depth = png_get_bit_depth(png, info), color = png_get_color_type(png, info);
    if ((int)png_get_image_width(png, info) != job->w ||
        (int)png_get_image_height(png, info) != job->h)
        png_error(png, "IHDR changed between the probe and the decode");
    if (depth == 16)
        png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    png_set_strip_alpha(png); /* also the alpha a palette's tRNS expands to */
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8)
        png_error(png, "unexpected layout after the transforms"); /* a libpng surprise */
    size_t stride = (size_t)job->w * 3;
    for (int pass = 0; pass < passes; pass++)
        for (int y = 0; y < job->h; y++)
            png_read_row(png, job->rgb + (size_t)y * stride, NULL);
    return true;
}

/* Decode the w x h PNG (its size from probe_mem) into rgb. */
static gr_status decode_png(const uint8_t *data, size_t len, const char *name, int w, int h,
                            uint8_t *rgb)
{
    png_job job = {.data = data, .len = len, .rgb = rgb, .w = w, .h = h};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, png_job_error,
                                             png_job_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: cannot start the PNG decoder", name);
    }
    png_set_read_fn(png, &job, png_job_read);
    bool ok = png_run(png, info, &job);
    png_destroy_read_struct(&png, &info, NULL);
    if (ok)
        return GR_OK;
    return gr_fail(GR_ERR_PARSE, "%s: %s image: PNG: %s", name,
                   job.header_read ? "corrupt" : "not a readable", job.message);
}

static gr_status probe_mem(tjhandle tj, const uint8_t *data, size_t len, const char *name, int *w,
                           int *h)
{
    *w = *h = 0;
    if (len > GR_MAX_IMAGE_FILE_BYTES)
        return gr_fail(GR_ERR_LIMIT, "%s: %zu bytes is larger than the %zu-byte image file limit",
                       name, len, GR_MAX_IMAGE_FILE_BYTES);
    image_format format = FORMAT_JPEG;
    GR_TRY(identify_format(data, len, name, &format));
    if (format == FORMAT_JPEG) {
        tjhandle own = NULL;
        if (!tj) {
            GR_TRY(jpeg_open(name, &own));
            tj = own;
        }
        gr_status st = jpeg_size(tj, data, len, name, w, h);
        if (own)
            tjDestroy(own);
        GR_TRY(st);
    } else if (format == FORMAT_WEBP || format == FORMAT_TIFF) {
        GR_TRY(gr_image_extra_probe(format == FORMAT_WEBP ? GR_IMAGE_EXTRA_WEBP
                                                          : GR_IMAGE_EXTRA_TIFF,
                                    data, len, name, w, h));
    } else if (format == FORMAT_PNG) {
        /* The size straight from IHDR (which must come first), so that a file cut short after it
         * still reports the size limit; libpng checks the chunk, its CRC and the rest. */
        if (len < 24 || memcmp(data + 12, "IHDR", 4) != 0)
            return gr_fail(GR_ERR_PARSE, "%s: byte 12: not a readable image: PNG without an IHDR "
                           "chunk first", name);
        uint32_t pw = read_be32(data + 16), ph = read_be32(data + 20);
        *w = pw > INT32_MAX ? INT32_MAX : (int)pw;
        *h = ph > INT32_MAX ? INT32_MAX : (int)ph;
    } else {
        bmp_header b;
        GR_TRY(read_bmp_header(data, len, name, &b, true));
        *w = b.w;
        *h = b.h;
    }
    if (*w <= 0 || *h <= 0 || *w > GR_MAX_DIM || *h > GR_MAX_DIM ||
        (size_t)*w * (size_t)*h > GR_MAX_IMAGE_PIXELS)
        return gr_fail(GR_ERR_LIMIT, "%s: image is %dx%d; the limit is %d per side and %zu pixels",
                       name, *w, *h, GR_MAX_DIM, GR_MAX_IMAGE_PIXELS);
    return GR_OK;
}

gr_status gr_image_probe_mem(const uint8_t *data, size_t len, const char *name, int *w, int *h)
{
    if (!w || !h || (!data && len > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_probe_mem: NULL argument");
    return probe_mem(NULL, data, len, name ? name : "<image>", w, h);
}

/* Decode into *pixels, which holds *cap bytes (grown as needed). On failure *pixels and *cap stay
 * valid for the next image. */
static gr_status decode_into(tjhandle tj, const uint8_t *data, size_t len, const char *name,
                             uint8_t **pixels, size_t *cap, int *w, int *h)
{
    GR_TRY(probe_mem(tj, data, len, name, w, h));
    image_format format = FORMAT_JPEG;
    GR_TRY(identify_format(data, len, name, &format));
    size_t need = (size_t)*w * (size_t)*h * 3;
    if (need > *cap) {
        uint8_t *bigger = gr_malloc(need, "image pixels");
        if (!bigger)
            return GR_ERR_OUT_OF_MEMORY;
        free(*pixels);
        *pixels = bigger;
        *cap = need;
    }
    if (format == FORMAT_PNG)
        return decode_png(data, len, name, *w, *h, *pixels);
    if (format == FORMAT_WEBP || format == FORMAT_TIFF)
        return gr_image_extra_decode(format == FORMAT_WEBP ? GR_IMAGE_EXTRA_WEBP
                                                           : GR_IMAGE_EXTRA_TIFF,
                                     data, len, name, *w, *h, *pixels);
    return format == FORMAT_JPEG ? decode_jpeg(tj, data, len, name, *w, *h, *pixels)
                                 : decode_bmp(data, len, name, *pixels);
}

gr_status gr_image_decode_mem(const uint8_t *data, size_t len, const char *name, gr_image **out)
{
    if (out)
        *out = NULL;
    if (!out || (!data && len > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_decode_mem: NULL argument");
    if (!name)
        name = "<image>";
    int w = 0, h = 0;
    uint8_t *pixels = NULL;
    size_t cap = 0;
    gr_status st = decode_into(NULL, data, len, name, &pixels, &cap, &w, &h);
    if (st != GR_OK) {
        free(pixels);
        return st;
    }
    gr_image *im = gr_malloc(sizeof *im, "image");
    if (!im) {
        free(pixels);
        return GR_ERR_OUT_OF_MEMORY;
    }
    im->w = w;
    im->h = h;
    im->c = 3;
    im->data = pixels;
    *out = im;
    return GR_OK;
}

/* ---- reading an image file -------------------------------------------------------------------
 * Only regular files are read: a FIFO would block the worker until something writes to it, and a
 * device such as /dev/zero never ends: base/'s gr_open_regular_file checks the kind and the size
 * (GR_MAX_IMAGE_FILE_BYTES) before a byte is read. */

/* The whole regular file at `path` into *buf (*cap bytes, grown as needed; kept on failure). */
static gr_status read_image_file(const char *path, uint8_t **buf, size_t *cap, size_t *len)
{
    *len = 0;
    int fd = -1;
    size_t size = 0;
    GR_TRY(gr_open_regular_file(path, GR_MAX_IMAGE_FILE_BYTES, "image", &fd, &size));
    gr_status st = gr_read_fd(fd, path, size, "image", buf, cap, len);
    close(fd);
    return st;
}

gr_status gr_image_load(const char *path, gr_image **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_load: NULL argument");
    uint8_t *data = NULL;
    size_t cap = 0, len = 0;
    gr_status st = read_image_file(path, &data, &cap, &len);
    if (st == GR_OK)
        st = gr_image_decode_mem(data, len, path, out);
    free(data);
    return st;
}

/* ---- a reader for many images: buffers and the JPEG decompressor kept between them ---------- */

struct gr_image_reader {
    tjhandle tj;      /* created on the first JPEG, dropped after any failed load */
    uint8_t *file;    /* the last file's bytes */
    size_t file_cap;
    uint8_t *pixels;  /* the last image's RGB */
    size_t pixel_cap;
    gr_image image;   /* what gr_image_reader_load hands out: w, h, c and pixels */
    int source_w, source_h;   /* the last image's size in its file */
    int fast_net_w, fast_net_h; /* > 0: JPEGs decoded scaled down (gr_image_reader_fast_decode) */
    gr_preprocess fast_how;     /* the preprocessing the scaled image is made for */
    double read_s;            /* the last load's time reading the file (the rest is decoding) */
};

double gr_image_reader_read_seconds(const gr_image_reader *r) { return r ? r->read_s : 0.0; }

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gr_image_reader_fast_decode(gr_image_reader *r, gr_preprocess how, int net_w, int net_h)
{
    if (!r)
        return;
    r->fast_how = how;
    r->fast_net_w = net_w > 0 && net_h > 0 ? net_w : 0;
    r->fast_net_h = net_w > 0 && net_h > 0 ? net_h : 0;
}

void gr_image_reader_source_size(const gr_image_reader *r, int *w, int *h)
{
    *w = r ? r->source_w : 0;
    *h = r ? r->source_h : 0;
}

/* The smallest size libjpeg-turbo can decode a w x h JPEG to (its DCT scaling: 1/2, 1/4, 1/8)
 * that is still at least the size the letterbox (or stretch) resizes it to in net_w x net_h, so
 * the resize still only shrinks it; w x h itself when no factor qualifies. Its other scales
 * (M/8: 7/8, 3/4, 5/8, 3/8) are not used: they run its C IDCTs and decode slower than the full
 * size, or than 1/2 or 1/4 where those fit (bench/results/cpu-decode-latest.txt). */
static void fast_decode_size(gr_preprocess how, int w, int h, int net_w, int net_h, int *out_w,
                             int *out_h)
{
    int new_w, new_h;
    gr_letterbox_size(how, w, h, net_w, net_h, &new_w, &new_h);
    *out_w = w;
    *out_h = h;
    static const int denoms[] = {2, 4, 8};
    for (size_t i = 0; i < sizeof denoms / sizeof denoms[0]; i++) {
        tjscalingfactor sf = {1, denoms[i]};
        int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
        if (sw < new_w || sh < new_h)
            break;
        *out_w = sw;
        *out_h = sh;
    }
}

gr_status gr_image_reader_create(gr_image_reader **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_reader_create: NULL argument");
    *out = gr_calloc(1, sizeof **out, "image reader");
    return *out ? GR_OK : GR_ERR_OUT_OF_MEMORY;
}

void gr_image_reader_destroy(gr_image_reader *r)
{
    if (!r)
        return;
    if (r->tj)
        tjDestroy(r->tj);
    free(r->file);
    free(r->pixels);
    free(r);
}

/* Read and decode `path` into the reader's buffers. */
static gr_status reader_decode(gr_image_reader *r, const char *path, const gr_image **out)
{
    size_t len;
    double t0 = monotonic_s();
    gr_status st = read_image_file(path, &r->file, &r->file_cap, &len);
    r->read_s = monotonic_s() - t0;
    GR_TRY(st);
    if (!r->tj && starts_with(r->file, len, "\xff\xd8\xff", 3))
        GR_TRY(jpeg_open(path, &r->tj));
    int w = 0, h = 0;
    if (r->fast_net_w > 0 && r->tj && starts_with(r->file, len, "\xff\xd8\xff", 3)) {
        GR_TRY(probe_mem(r->tj, r->file, len, path, &w, &h));
        r->source_w = w;
        r->source_h = h;
        int sw, sh;
        fast_decode_size(r->fast_how, w, h, r->fast_net_w, r->fast_net_h, &sw, &sh);
        if (sw != w || sh != h) {
            size_t need = (size_t)sw * (size_t)sh * 3;
            if (need > r->pixel_cap) {
                uint8_t *bigger = gr_malloc(need, "image pixels");
                if (!bigger)
                    return GR_ERR_OUT_OF_MEMORY;
                free(r->pixels);
                r->pixels = bigger;
                r->pixel_cap = need;
            }
            GR_TRY(decode_jpeg(r->tj, r->file, len, path, sw, sh, r->pixels));
            r->image = (gr_image){.w = sw, .h = sh, .c = 3, .data = r->pixels};
            *out = &r->image;
            return GR_OK;
        }
    }
    GR_TRY(decode_into(r->tj, r->file, len, path, &r->pixels, &r->pixel_cap, &w, &h));
    r->source_w = w;
    r->source_h = h;
    r->image = (gr_image){.w = w, .h = h, .c = 3, .data = r->pixels};
    *out = &r->image;
    return GR_OK;
}

gr_status gr_image_reader_load(gr_image_reader *r, const char *path, const gr_image **out)
{
    if (out)
        *out = NULL;
    if (!r || !path || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_reader_load: NULL argument");
    r->source_w = r->source_h = 0;
    gr_status st = reader_decode(r, path, out);
    /* TurboJPEG leaves its decompressor mid-header after a failed tjDecompressHeader3 (it skips
     * jpeg_abort_decompress on that path), so the next file would be parsed as the rest of this
     * one ("two SOI markers", this file's message on a good one). A decompressor that has failed
     * is never reused: the next JPEG gets a new one. libpng and the BMP reader keep no state
     * between files. */
    if (st != GR_OK) {
        *out = NULL;
        if (r->tj) {
            tjDestroy(r->tj);
            r->tj = NULL;
        }
    }
    return st;
}
