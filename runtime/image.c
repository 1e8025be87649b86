/* Images: decoding (JPEG through libjpeg-turbo, PNG through libpng, BMP here), writing through
 * stb_image_write (libstb holds the implementation), Darknet's letterbox preprocessing, and
 * drawing labelled detection boxes.
 *
 * The letterbox reproduces Darknet's load_image_color + letterbox_image + resize_image float for
 * float: pixels are (float)(v / 255.) computed in double as Darknet does, and the bilinear resize
 * is Darknet's two-pass one (horizontal into an im_h x new_w buffer, then vertical), in float
 * arithmetic, with its align-corners scales (in-1)/(out-1) and its special cases for the last
 * column and row. The build uses -std=c11, which keeps gcc from contracting a*b+c into FMA, so
 * the rounding is Darknet's. */
#include "runtime/detect.h"
#include "runtime/image.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <stb/stb_image_write.h>
#include <turbojpeg.h>

/* stb_easy_font is header-only and all static; this is its one translation unit. We use only
 * part of it, and it is not written for our warning set. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wconversion"
#endif
#include <stb/stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

void gr_image_destroy(gr_image *im)
{
    if (!im)
        return;
    free(im->data);
    free(im);
}

/* ---- decoding --------------------------------------------------------------------------------
 * JPEG goes to libjpeg-turbo (TurboJPEG API) and PNG to libpng (its simplified API): the decoders
 * the field uses, SIMD-fast and fuzzed upstream (OSS-Fuzz). BMP, rare in detection data, is read
 * here (read_bmp: uncompressed 24- and 32-bit only). Formats are recognised by signature; GIF, PSD,
 * HDR, PIC and PNM are named in the refusal, anything else is "not an image". Sizes are checked
 * from the header (gr_image_probe_mem) before any pixel is decoded. A decoder's warning (a
 * truncated or damaged JPEG that libjpeg-turbo would pad with grey) is an error: graphrun runs a
 * detector on what the file holds or refuses it. */

static bool starts_with(const uint8_t *data, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(data, magic, n) == 0;
}

typedef enum { FORMAT_JPEG, FORMAT_PNG, FORMAT_BMP } image_format;

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
    static const struct {
        const char *magic;
        size_t n;
        const char *format;
    } refused[] = {{"GIF8", 4, "GIF"},           {"8BPS", 4, "PSD"},
                   {"#?RADIANCE", 10, "HDR"},   {"#?RGBE", 6, "HDR"},
                   {"\x53\x80\xf6\x34", 4, "PIC"}, {"P5", 2, "PGM"},
                   {"P6", 2, "PPM"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (starts_with(data, len, refused[i].magic, refused[i].n))
            return gr_fail(GR_ERR_UNSUPPORTED,
                           "%s: byte 0: %s images are not accepted (JPEG, PNG, BMP)",
                           name, refused[i].format);
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

/* `tj`: a decompressor kept between images (a gr_image_reader's), or NULL for one of its own. */
static gr_status decode_jpeg(tjhandle tj, const uint8_t *data, size_t len, const char *name, int w,
                             int h, uint8_t *rgb)
{
    tjhandle own = NULL;
    if (!tj) {
        GR_TRY(jpeg_open(name, &own));
        tj = own;
    }
    /* LIMITSCANS: a progressive JPEG of more than 500 scans is refused (a CPU-time bomb). */
    int rc = tjDecompress2(tj, data, (unsigned long)len, rgb, w, 0, h, TJPF_RGB,
                           TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS);
    gr_status st = GR_OK;
    if (rc != 0)
        st = gr_fail(GR_ERR_PARSE, "%s: corrupt image: JPEG: %s", name, tjGetErrorStr2(tj));
    if (own)
        tjDestroy(own);
    return st;
}

/* ---- PNG: libpng's simplified API ---------------------------------------------------------- */

static gr_status png_begin(png_image *png, const uint8_t *data, size_t len, const char *name)
{
    memset(png, 0, sizeof *png);
    png->version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(png, data, len))
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: PNG: %s", name, png->message);
    return GR_OK;
}

/* An alpha channel is dropped, not composited (what Darknet's loader does). */
static gr_status decode_png(const uint8_t *data, size_t len, const char *name, uint8_t **rgb)
{
    png_image png;
    GR_TRY(png_begin(&png, data, len, name));
    bool alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
    png.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    size_t channels = alpha ? 4 : 3;
    size_t pixels = (size_t)png.width * (size_t)png.height;
    uint8_t *buf = gr_malloc(pixels * channels, "image pixels");
    if (!buf) {
        png_image_free(&png);
        return GR_ERR_OUT_OF_MEMORY;
    }
    if (!png_image_finish_read(&png, NULL, buf, 0, NULL)) {
        gr_status st = gr_fail(GR_ERR_PARSE, "%s: corrupt image: PNG: %s", name, png.message);
        png_image_free(&png);
        free(buf);
        return st;
    }
    if (alpha)
        for (size_t i = 0; i < pixels; i++)
            memmove(buf + i * 3, buf + i * 4, 3);
    *rgb = buf;
    return GR_OK;
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

/* Decode into *pixels, which holds *cap bytes (grown as needed; a PNG brings its own buffer,
 * which replaces it). On failure *pixels and *cap stay valid for the next image. */
static gr_status decode_into(tjhandle tj, const uint8_t *data, size_t len, const char *name,
                             uint8_t **pixels, size_t *cap, int *w, int *h)
{
    GR_TRY(probe_mem(tj, data, len, name, w, h));
    image_format format = FORMAT_JPEG;
    GR_TRY(identify_format(data, len, name, &format));
    if (format == FORMAT_PNG) {
        uint8_t *png = NULL;
        GR_TRY(decode_png(data, len, name, &png));
        free(*pixels);
        *pixels = png;
        *cap = (size_t)*w * (size_t)*h * 3;
        return GR_OK;
    }
    size_t need = (size_t)*w * (size_t)*h * 3;
    if (need > *cap) {
        uint8_t *bigger = gr_malloc(need, "image pixels");
        if (!bigger)
            return GR_ERR_OUT_OF_MEMORY;
        free(*pixels);
        *pixels = bigger;
        *cap = need;
    }
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

gr_status gr_image_load(const char *path, gr_image **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_load: NULL argument");
    char *text;
    size_t len;
    GR_TRY(gr_read_file(path, GR_MAX_IMAGE_FILE_BYTES, "image", &text, &len));
    uint8_t *data = (uint8_t *)text;
    gr_status st = gr_image_decode_mem(data, len, path, out);
    free(data);
    return st;
}

/* ---- a reader for many images: buffers and the JPEG decompressor kept between them ---------- */

struct gr_image_reader {
    tjhandle tj;      /* created on the first JPEG */
    uint8_t *file;    /* the last file's bytes */
    size_t file_cap;
    uint8_t *pixels;  /* the last image's RGB */
    size_t pixel_cap;
    gr_image image;   /* what gr_image_reader_load hands out: w, h, c and pixels */
    int source_w, source_h;   /* the last image's size in its file */
    int fast_net_w, fast_net_h; /* > 0: JPEGs decoded scaled down (gr_image_reader_fast_decode) */
};

void gr_image_reader_fast_decode(gr_image_reader *r, int net_w, int net_h)
{
    if (!r)
        return;
    r->fast_net_w = net_w > 0 && net_h > 0 ? net_w : 0;
    r->fast_net_h = net_w > 0 && net_h > 0 ? net_h : 0;
}

void gr_image_reader_source_size(const gr_image_reader *r, int *w, int *h)
{
    *w = r ? r->source_w : 0;
    *h = r ? r->source_h : 0;
}

/* The smallest size libjpeg-turbo can decode a w x h JPEG to (its DCT scaling: 1/2, 1/4, 1/8)
 * that is still at least the size the letterbox resizes it to in net_w x net_h, so the
 * letterbox still only shrinks it; w x h itself when no factor qualifies. */
static void fast_decode_size(int w, int h, int net_w, int net_h, int *out_w, int *out_h)
{
    int new_w, new_h;
    gr_letterbox_size(w, h, net_w, net_h, &new_w, &new_h);
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

/* The whole file into r->file (gr_read_file's checks and messages, without a buffer per file). */
static gr_status reader_read(gr_image_reader *r, const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gr_fail(GR_ERR_IO, "%s: cannot open image file: %s", path, strerror(errno));
    gr_status st = GR_OK;
    size_t used = 0;
    for (;;) {
        if (used == r->file_cap) {
            if (r->file_cap > GR_MAX_IMAGE_FILE_BYTES) {
                st = gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes (the image file limit)",
                             path, GR_MAX_IMAGE_FILE_BYTES);
                break;
            }
            size_t cap = r->file_cap ? 2 * r->file_cap : (size_t)1 << 20;
            uint8_t *bigger = realloc(r->file, cap);
            if (!bigger) {
                st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory reading the image file",
                             path);
                break;
            }
            r->file = bigger;
            r->file_cap = cap;
        }
        size_t got = fread(r->file + used, 1, r->file_cap - used, f);
        used += got;
        if (got == 0) {
            if (ferror(f))
                st = gr_fail(GR_ERR_IO, "%s: read error after %zu bytes: %s", path, used,
                             strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st == GR_OK && used > GR_MAX_IMAGE_FILE_BYTES)
        st = gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes (the image file limit)", path,
                     GR_MAX_IMAGE_FILE_BYTES);
    *len = used;
    return st;
}

gr_status gr_image_reader_load(gr_image_reader *r, const char *path, const gr_image **out)
{
    if (out)
        *out = NULL;
    if (!r || !path || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_reader_load: NULL argument");
    size_t len;
    GR_TRY(reader_read(r, path, &len));
    if (!r->tj && starts_with(r->file, len, "\xff\xd8\xff", 3))
        GR_TRY(jpeg_open(path, &r->tj));
    int w = 0, h = 0;
    r->source_w = r->source_h = 0;
    if (r->fast_net_w > 0 && r->tj && starts_with(r->file, len, "\xff\xd8\xff", 3)) {
        GR_TRY(probe_mem(r->tj, r->file, len, path, &w, &h));
        r->source_w = w;
        r->source_h = h;
        int sw, sh;
        fast_decode_size(w, h, r->fast_net_w, r->fast_net_h, &sw, &sh);
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
            /* TurboJPEG picks the scaling factor from the requested size. */
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

static bool check_image(const gr_image *im)
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
    if (!check_image(im))
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
 * Darknet's steps one after the other on whole float planes, as DARKNET.md describes them. The
 * fast letterbox below must equal it byte for byte (tests/test_image.c, bench/06_stream.c). */

/* Darknet's resize_image from planar float `src` (c x src_h x src_w) to `dst` (c x dst_h x
 * dst_w), using `part` (c x src_h x dst_w) as its horizontal-pass buffer. */
static void resize_darknet(const float *src, int c, int src_w, int src_h, float *part, float *dst,
                           int dst_w, int dst_h)
{
    /* Darknet divides by (out-1) even when out is 1 (inf or NaN scale, then NaN*0 for the row);
     * a 1-pixel output takes the last column (Darknet's c == w-1 branch) and the first row. */
    float w_scale = dst_w > 1 ? (float)(src_w - 1) / (float)(dst_w - 1) : 0.0f;
    float h_scale = dst_h > 1 ? (float)(src_h - 1) / (float)(dst_h - 1) : 0.0f;
    size_t src_plane = (size_t)src_w * (size_t)src_h;
    size_t part_plane = (size_t)dst_w * (size_t)src_h;
    size_t dst_plane = (size_t)dst_w * (size_t)dst_h;
    for (int k = 0; k < c; k++) {
        for (int r = 0; r < src_h; r++) {
            const float *in = src + k * src_plane + (size_t)r * (size_t)src_w;
            float *row = part + k * part_plane + (size_t)r * (size_t)dst_w;
            for (int x = 0; x < dst_w; x++) {
                if (x == dst_w - 1 || src_w == 1) {
                    row[x] = in[src_w - 1];
                } else {
                    float sx = (float)x * w_scale;
                    int ix = (int)sx;
                    float dx = sx - (float)ix;
                    int ix1 = ix + 1 < src_w ? ix + 1 : src_w - 1; /* never taken; memory safety */
                    row[x] = (1 - dx) * in[ix] + dx * in[ix1];
                }
            }
        }
        for (int r = 0; r < dst_h; r++) {
            float sy = (float)r * h_scale;
            int iy = (int)sy;
            float dy = sy - (float)iy;
            if (iy > src_h - 1) /* memory safety only; cannot happen for finite scales */
                iy = src_h - 1;
            const float *p0 = part + k * part_plane + (size_t)iy * (size_t)dst_w;
            float *o = dst + k * dst_plane + (size_t)r * (size_t)dst_w;
            for (int x = 0; x < dst_w; x++)
                o[x] = (1 - dy) * p0[x];
            /* Darknet adds the second row only when there is one: the last output row keeps
             * (1-dy) * row iy alone. */
            if (r == dst_h - 1 || src_h == 1)
                continue;
            const float *p1 = p0 + (iy + 1 < src_h ? (size_t)dst_w : 0);
            for (int x = 0; x < dst_w; x++)
                o[x] += dy * p1[x];
        }
    }
}

/* The reference letterbox as planar CHW floats into out (3 x net_h x net_w). */
static gr_status letterbox_reference_f32(const gr_image *im, int net_w, int net_h, float *out,
                               const char *who)
{
    if (!check_image(im) || im->c != 3 || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL or non-RGB image or NULL output", who);
    if (net_w <= 0 || net_h <= 0 || net_w > GR_MAX_DIM || net_h > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad network size %dx%d", who, net_w, net_h);
    int new_w, new_h;
    gr_letterbox_size(im->w, im->h, net_w, net_h, &new_w, &new_h);

    size_t src_elems, part_elems, dst_elems, total;
    if (!gr_mul_size((size_t)im->w * (size_t)im->h, 3, &src_elems) ||
        !gr_mul_size((size_t)new_w * (size_t)im->h, 3, &part_elems) ||
        !gr_mul_size((size_t)new_w * (size_t)new_h, 3, &dst_elems) ||
        !gr_add_size(src_elems, part_elems, &total) || !gr_add_size(total, dst_elems, &total) ||
        !gr_mul_size(total, sizeof(float), &total))
        return gr_fail(GR_ERR_LIMIT, "%s: %dx%d image to %dx%d overflows", who, im->w, im->h,
                       new_w, new_h);
    float *src = gr_malloc(total, "letterbox buffers");
    if (!src)
        return GR_ERR_OUT_OF_MEMORY;
    float *part = src + src_elems;
    float *resized = part + part_elems;

    /* load_image_stb: interleaved bytes -> planar (float)(v / 255.), the 256 values computed
     * once (the same doubles rounded the same way; a division per pixel was half of the
     * letterbox's time). */
    float to_unit[256];
    for (int v = 0; v < 256; v++)
        to_unit[v] = (float)(v / 255.);
    size_t plane = (size_t)im->w * (size_t)im->h;
    const uint8_t *px = im->data;
    for (size_t i = 0; i < plane; i++, px += 3) {
        src[i] = to_unit[px[0]];
        src[plane + i] = to_unit[px[1]];
        src[2 * plane + i] = to_unit[px[2]];
    }

    resize_darknet(src, 3, im->w, im->h, part, resized, new_w, new_h);

    size_t net_plane = (size_t)net_w * (size_t)net_h;
    for (size_t i = 0; i < 3 * net_plane; i++)
        out[i] = 0.5f;
    int dx = (net_w - new_w) / 2, dy = (net_h - new_h) / 2;
    for (int k = 0; k < 3; k++)
        for (int r = 0; r < new_h; r++)
            memcpy(out + (size_t)k * net_plane + (size_t)(r + dy) * (size_t)net_w + (size_t)dx,
                   resized + ((size_t)k * (size_t)new_h + (size_t)r) * (size_t)new_w,
                   (size_t)new_w * sizeof(float));
    free(src);
    return GR_OK;
}

gr_status gr_image_letterbox_reference(const gr_image *im, int net_w, int net_h, float *out)
{
    return letterbox_reference_f32(im, net_w, net_h, out, "gr_image_letterbox_reference");
}

gr_status gr_image_letterbox_reference_u8(const gr_image *im, int net_w, int net_h, uint8_t *out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_letterbox_u8: NULL output");
    if (net_w <= 0 || net_h <= 0 || net_w > GR_MAX_DIM || net_h > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_letterbox_u8: bad network size %dx%d",
                       net_w, net_h);
    size_t plane = (size_t)net_w * (size_t)net_h;
    float *planar = gr_calloc(plane, 3 * sizeof(float), "letterbox");
    if (!planar)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = letterbox_reference_f32(im, net_w, net_h, planar, "gr_image_letterbox_u8");
    if (st != GR_OK) {
        free(planar);
        return st;
    }
    for (size_t i = 0; i < plane; i++) {
        for (size_t k = 0; k < 3; k++) {
            float v = planar[k * plane + i] * 255.0f + 0.5f;
            v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
            out[i * 3 + k] = (uint8_t)v;
        }
    }
    free(planar);
    return GR_OK;
}

/* ---- letterbox: the fast one ---------------------------------------------------------------
 * The same float operations as the reference in the same order, so the same bits, without its
 * float planes: each output row needs source rows iy and iy + 1 only, resized horizontally
 * straight from the interleaved bytes into a two-row cache (rows go down monotonically, so each
 * source row is resized at most once, and rows no output row uses are skipped); the column
 * positions and weights are computed once per image. Why the results are identical:
 *  - horizontal: the reference's row[x] = (1 - dx) * in[ix] + dx * in[ix1] with the same float
 *    dx; its last-column case row[x] = in[w-1] is written as 1 * in[w-1] + 0 * in[w-1], exact
 *    for the finite, non-negative values in[] holds (v * 1 = v, v * 0 = +0, v + 0 = v);
 *  - vertical: the reference rounds (1 - dy) * p0 to a float, then adds the float dy * p1; here
 *    w0 * p0 + w1 * p1 with the same two products and one sum; its last-row case (the first
 *    product alone) is w1 = 0, again exact (+0 added to a value >= 0);
 *  - uint8: the reference's v * 255 + 0.5, clamped, truncated, on the same float v; the border
 *    is 0.5 * 255 + 0.5 = 128.
 * The build's -std=c11 keeps gcc from contracting a * b + c into an FMA here as there. */

typedef struct letterbox_plan {
    int src_w, src_h, new_w, new_h;
    float h_scale;
    int *col_off0, *col_off1; /* byte offsets of the two source pixels of output column x */
    float *col_w0, *col_w1;   /* their weights: 1 - dx and dx */
    float *rows[2];           /* two horizontally resized source rows, new_w x 3 interleaved */
    int row_of[2];            /* which source row each holds, -1 none */
    float to_unit[256];
} letterbox_plan;

static void free_plan(letterbox_plan *lp)
{
    free(lp->col_off0); /* one allocation holds all the tables and rows */
}

static gr_status make_plan(const gr_image *im, int net_w, int net_h, letterbox_plan *lp)
{
    memset(lp, 0, sizeof *lp);
    lp->src_w = im->w;
    lp->src_h = im->h;
    gr_letterbox_size(im->w, im->h, net_w, net_h, &lp->new_w, &lp->new_h);
    size_t nw = (size_t)lp->new_w; /* <= net_w <= GR_MAX_DIM: no overflow below */
    size_t bytes = nw * (2 * sizeof(int) + 2 * sizeof(float)) + 2 * 3 * nw * sizeof(float);
    char *mem = gr_malloc(bytes, "letterbox tables");
    if (!mem)
        return GR_ERR_OUT_OF_MEMORY;
    lp->col_off0 = (int *)mem;
    lp->col_off1 = lp->col_off0 + nw;
    lp->col_w0 = (float *)(lp->col_off1 + nw);
    lp->col_w1 = lp->col_w0 + nw;
    lp->rows[0] = lp->col_w1 + nw;
    lp->rows[1] = lp->rows[0] + 3 * nw;
    lp->row_of[0] = lp->row_of[1] = -1;
    for (int v = 0; v < 256; v++)
        lp->to_unit[v] = (float)(v / 255.);
    int src_w = im->w, dst_w = lp->new_w;
    float w_scale = dst_w > 1 ? (float)(src_w - 1) / (float)(dst_w - 1) : 0.0f;
    lp->h_scale = lp->new_h > 1 ? (float)(im->h - 1) / (float)(lp->new_h - 1) : 0.0f;
    for (int x = 0; x < dst_w; x++) {
        if (x == dst_w - 1 || src_w == 1) {
            lp->col_off0[x] = lp->col_off1[x] = (src_w - 1) * 3;
            lp->col_w0[x] = 1.0f;
            lp->col_w1[x] = 0.0f;
        } else {
            float sx = (float)x * w_scale;
            int ix = (int)sx;
            float dx = sx - (float)ix;
            int ix1 = ix + 1 < src_w ? ix + 1 : src_w - 1;
            lp->col_off0[x] = ix * 3;
            lp->col_off1[x] = ix1 * 3;
            lp->col_w0[x] = 1 - dx;
            lp->col_w1[x] = dx;
        }
    }
    return GR_OK;
}

/* Source row `src_row` resized horizontally, from the cache; `keep` is the other row the
 * current output row needs (its cache entry is not evicted). */
static const float *resized_row(letterbox_plan *lp, const gr_image *im, int src_row, int keep)
{
    for (int i = 0; i < 2; i++)
        if (lp->row_of[i] == src_row)
            return lp->rows[i];
    int slot = lp->row_of[0] == keep ? 1 : 0;
    float *row = lp->rows[slot];
    const uint8_t *in = im->data + (size_t)src_row * (size_t)im->w * 3;
    const float *to_unit = lp->to_unit;
    for (int x = 0; x < lp->new_w; x++) {
        const uint8_t *a = in + lp->col_off0[x], *b = in + lp->col_off1[x];
        float w0 = lp->col_w0[x], w1 = lp->col_w1[x];
        row[3 * x + 0] = w0 * to_unit[a[0]] + w1 * to_unit[b[0]];
        row[3 * x + 1] = w0 * to_unit[a[1]] + w1 * to_unit[b[1]];
        row[3 * x + 2] = w0 * to_unit[a[2]] + w1 * to_unit[b[2]];
    }
    lp->row_of[slot] = src_row;
    return row;
}

/* Output row r of the resized image (new_w x 3 interleaved floats): its two source rows and
 * their weights. */
static void output_row(letterbox_plan *lp, const gr_image *im, int r, const float **p0,
                       const float **p1, float *w0, float *w1)
{
    float sy = (float)r * lp->h_scale;
    int iy = (int)sy;
    float dy = sy - (float)iy;
    if (iy > lp->src_h - 1) /* memory safety only, as in the reference */
        iy = lp->src_h - 1;
    int iy1 = iy + 1 < lp->src_h ? iy + 1 : iy;
    *w0 = 1 - dy;
    *w1 = (r == lp->new_h - 1 || lp->src_h == 1) ? 0.0f : dy;
    *p0 = resized_row(lp, im, iy, iy1);
    *p1 = resized_row(lp, im, iy1, iy);
}

static gr_status check_letterbox_args(const gr_image *im, int net_w, int net_h, const void *out,
                                      const char *who)
{
    if (!check_image(im) || im->c != 3 || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL or non-RGB image or NULL output", who);
    if (net_w <= 0 || net_h <= 0 || net_w > GR_MAX_DIM || net_h > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad network size %dx%d", who, net_w, net_h);
    return GR_OK;
}

gr_status gr_image_letterbox(const gr_image *im, int net_w, int net_h, float *out)
{
    GR_TRY(check_letterbox_args(im, net_w, net_h, out, "gr_image_letterbox"));
    letterbox_plan lp;
    GR_TRY(make_plan(im, net_w, net_h, &lp));
    size_t net_plane = (size_t)net_w * (size_t)net_h;
    for (size_t i = 0; i < 3 * net_plane; i++)
        out[i] = 0.5f;
    int left = (net_w - lp.new_w) / 2, top = (net_h - lp.new_h) / 2;
    for (int r = 0; r < lp.new_h; r++) {
        const float *p0, *p1;
        float w0, w1;
        output_row(&lp, im, r, &p0, &p1, &w0, &w1);
        float *o = out + (size_t)(r + top) * (size_t)net_w + (size_t)left;
        for (int x = 0; x < lp.new_w; x++) {
            o[x] = w0 * p0[3 * x] + w1 * p1[3 * x];
            o[net_plane + (size_t)x] = w0 * p0[3 * x + 1] + w1 * p1[3 * x + 1];
            o[2 * net_plane + (size_t)x] = w0 * p0[3 * x + 2] + w1 * p1[3 * x + 2];
        }
    }
    free_plan(&lp);
    return GR_OK;
}

gr_status gr_image_letterbox_u8(const gr_image *im, int net_w, int net_h, uint8_t *out)
{
    GR_TRY(check_letterbox_args(im, net_w, net_h, out, "gr_image_letterbox_u8"));
    letterbox_plan lp;
    GR_TRY(make_plan(im, net_w, net_h, &lp));
    int left = (net_w - lp.new_w) / 2, top = (net_h - lp.new_h) / 2;
    size_t row_bytes = (size_t)net_w * 3;
    /* Grey above and below the image, and left and right of it on its rows. */
    memset(out, 128, (size_t)top * row_bytes);
    memset(out + (size_t)(top + lp.new_h) * row_bytes, 128,
           (size_t)(net_h - top - lp.new_h) * row_bytes);
    size_t n = (size_t)lp.new_w * 3;
    for (int r = 0; r < lp.new_h; r++) {
        const float *p0, *p1;
        float w0, w1;
        output_row(&lp, im, r, &p0, &p1, &w0, &w1);
        uint8_t *line = out + (size_t)(r + top) * row_bytes;
        memset(line, 128, (size_t)left * 3);
        memset(line + (size_t)(left + lp.new_w) * 3, 128, (size_t)(net_w - left - lp.new_w) * 3);
        uint8_t *o = line + (size_t)left * 3;
        for (size_t i = 0; i < n; i++) {
            float v = (w0 * p0[i] + w1 * p1[i]) * 255.0f + 0.5f;
            v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
            o[i] = (uint8_t)v;
        }
    }
    free_plan(&lp);
    return GR_OK;
}

/* ---- drawing ------------------------------------------------------------------------------- */

void gr_class_color(int class_id, int classes, uint8_t rgb[3])
{
    /* Darknet's draw_detections: offset = class*123457 % classes, then get_color(2|1|0, offset,
     * classes) interpolating this table for red, green, blue. */
    static const float colors[6][3] = {{1, 0, 1}, {0, 0, 1}, {0, 1, 1},
                                       {0, 1, 0}, {1, 1, 0}, {1, 0, 0}};
    if (classes <= 0)
        classes = 1;
    long long offset = ((long long)(class_id < 0 ? 0 : class_id) * 123457LL) % classes;
    float ratio = ((float)offset / (float)classes) * 5;
    int i = (int)floorf(ratio);
    int j = (int)ceilf(ratio);
    ratio -= (float)i;
    for (int ch = 0; ch < 3; ch++) {
        int darknet_c = 2 - ch; /* rgb[0] = get_color(2, ...) */
        float v = (1 - ratio) * colors[i][darknet_c] + ratio * colors[j][darknet_c];
        rgb[ch] = (uint8_t)(v * 255.0f + 0.5f);
    }
}

/* Fill [x0, x1) x [y0, y1), clipped to the image. */
static void fill_rect(gr_image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    if (x0 < 0)
        x0 = 0;
    if (y0 < 0)
        y0 = 0;
    if (x1 > im->w)
        x1 = im->w;
    if (y1 > im->h)
        y1 = im->h;
    for (int y = y0; y < y1; y++) {
        uint8_t *row = im->data + ((size_t)y * (size_t)im->w) * (size_t)im->c;
        for (int x = x0; x < x1; x++)
            for (int k = 0; k < im->c && k < 3; k++)
                row[(size_t)x * (size_t)im->c + (size_t)k] = rgb[k];
    }
}

/* Clamp a float pixel coordinate to an int in [0, hi]. */
static int to_pixel(float v, int hi)
{
    if (!(v >= 0.0f))
        return 0;
    if (v >= (float)hi)
        return hi;
    return (int)v;
}

/* Darknet's draw_box_width: `width` nested 1-pixel rectangles shrinking inwards. */
static void draw_box(gr_image *im, int left, int top, int right, int bottom, int width,
                     const uint8_t rgb[3])
{
    for (int i = 0; i < width; i++) {
        int x1 = left + i, y1 = top + i, x2 = right - i, y2 = bottom - i;
        if (x1 > x2 || y1 > y2)
            break;
        fill_rect(im, x1, y1, x2 + 1, y1 + 1, rgb);
        fill_rect(im, x1, y2, x2 + 1, y2 + 1, rgb);
        fill_rect(im, x1, y1, x1 + 1, y2 + 1, rgb);
        fill_rect(im, x2, y1, x2 + 1, y2 + 1, rgb);
    }
}

#define LABEL_MAX_CHARS 64
/* stb_easy_font needs ~270 bytes of vertices per character; floats keep them aligned. */
#define LABEL_VERTEX_FLOATS (LABEL_MAX_CHARS * 80)
/* Glyph cell height in stb_easy_font units (capitals are 7, descenders reach 9). */
#define FONT_HEIGHT 10

/* Text label with a filled background of `bg`, black text, top-left at (x, y). */
static void draw_label(gr_image *im, int x, int y, const char *text, int scale, const uint8_t bg[3])
{
    char clean[LABEL_MAX_CHARS + 1];
    size_t len = 0;
    /* stb_easy_font indexes a table with (char - 32): only printable ASCII is safe. */
    for (; text[len] && len < LABEL_MAX_CHARS; len++) {
        unsigned char ch = (unsigned char)text[len];
        clean[len] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    clean[len] = '\0';
    int pad = scale;
    int text_w = stb_easy_font_width(clean) * scale;
    fill_rect(im, x, y, x + text_w + 2 * pad, y + FONT_HEIGHT * scale + 2 * pad, bg);

    static const uint8_t black[3] = {0, 0, 0};
    float vertices[LABEL_VERTEX_FLOATS];
    int quads = stb_easy_font_print(0, 0, clean, NULL, vertices, (int)sizeof vertices);
    for (int q = 0; q < quads; q++) {
        /* 4 vertices of 16 bytes (x, y, z, rgba) per axis-aligned quad: corners 0 and 2. */
        const float *v = vertices + q * 16;
        int qx0 = (int)v[0], qy0 = (int)v[1], qx1 = (int)v[8], qy1 = (int)v[9];
        fill_rect(im, x + pad + qx0 * scale, y + pad + qy0 * scale, x + pad + qx1 * scale,
                  y + pad + qy1 * scale, black);
    }
}

gr_status gr_draw_detections_labelled(gr_image *im, const gr_detection *dets, int n, int classes,
                                      gr_class_label_fn label, const void *ctx)
{
    if (!check_image(im) || n < 0 || (!dets && n > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "draw detections: bad image or detections");
    if (classes <= 0) {
        classes = 1;
        for (int i = 0; i < n; i++)
            if (dets[i].class_id >= classes)
                classes = dets[i].class_id + 1;
    }
    /* Darknet: line width im.h * .006, label height im.h * .03 (stb glyphs are FONT_HEIGHT). */
    int width = (int)((float)im->h * 0.006f);
    if (width < 2)
        width = 2;
    int scale = (int)((float)im->h * 0.03f / (float)FONT_HEIGHT + 0.5f);
    if (scale < 1)
        scale = 1;
    for (int i = 0; i < n; i++) {
        const gr_detection *d = &dets[i];
        uint8_t rgb[3];
        gr_class_color(d->class_id, classes, rgb);
        int left = to_pixel(d->left, im->w - 1), right = to_pixel(d->right, im->w - 1);
        int top = to_pixel(d->top, im->h - 1), bottom = to_pixel(d->bottom, im->h - 1);
        draw_box(im, left, top, right, bottom, width, rgb);

        const char *name = label ? label(ctx, d->class_id) : NULL;
        char text[LABEL_MAX_CHARS + 32];
        if (name)
            snprintf(text, sizeof text, "%.*s %.2f", LABEL_MAX_CHARS - 8, name, (double)d->prob);
        else
            snprintf(text, sizeof text, "class %d %.2f", d->class_id, (double)d->prob);
        /* Above the box when it fits (Darknet's draw_label), else inside its top edge. */
        int label_h = FONT_HEIGHT * scale + 2 * scale;
        int label_y = top - label_h >= 0 ? top - label_h : top;
        draw_label(im, left, label_y, text, scale, rgb);
    }
    return GR_OK;
}

gr_status gr_image_load_planar(const char *path, int net_w, int net_h, float *dst)
{
    size_t plane = (size_t)net_w * (size_t)net_h;
    uint8_t *u8 = gr_malloc(plane * 3, "letterboxed image");
    if (!u8)
        return GR_ERR_OUT_OF_MEMORY;
    gr_image *im = NULL;
    gr_status st = gr_image_load(path, &im);
    if (st == GR_OK)
        st = gr_image_letterbox_u8(im, net_w, net_h, u8);
    for (size_t p = 0; p < plane && st == GR_OK; p++)
        for (size_t c = 0; c < 3; c++)
            dst[c * plane + p] = (float)u8[p * 3 + c] / 255.0f;
    gr_image_destroy(im);
    free(u8);
    return st;
}
