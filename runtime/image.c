/* Images: loading and writing through stb_image (libstb holds the implementations), Darknet's
 * letterbox preprocessing, and drawing labelled detection boxes.
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

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

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

/* ---- what reaches the decoder ---------------------------------------------------------------
 * stb_image 2.27 (what Debian ships as libstb) has known memory-safety bugs in its less common
 * decoders (GIF, PSD, PIC, HDR, TGA: CVE-2021-42715, CVE-2022-28041, CVE-2023-45661..45667), and
 * fuzzing found more: an out-of-bounds write in its JPEG Huffman table builder, a read past the
 * data (a crash) in its 16-bit PGM path and integer overflow in its PNM header parser. graphrun
 * therefore hands stb only the formats detectors are fed - JPEG, PNG and BMP - recognised by
 * their signature, and checks JPEG Huffman tables itself before stb builds them. */

static bool starts_with(const uint8_t *data, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(data, magic, n) == 0;
}

static uint16_t read_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* Every DHT segment's tables hold at most 256 codes (JPEG allows 256 symbols per table; stb's
 * table builder writes one byte per code into a 257-byte array). Walks the marker segments,
 * skipping entropy-coded data after each SOS. Other damage is left to the decoder. */
static gr_status check_jpeg_huffman_tables(const uint8_t *data, size_t len, const char *name)
{
    size_t pos = 2; /* after SOI */
    while (pos + 4 <= len) {
        if (data[pos] != 0xff) { /* entropy-coded data: find the next marker */
            pos++;
            continue;
        }
        uint8_t marker = data[pos + 1];
        if (marker == 0xff) { /* fill byte */
            pos++;
            continue;
        }
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
            pos += 2; /* stuffed zero, TEM, restart markers, SOI: no length field */
            continue;
        }
        if (marker == 0xd9) /* EOI */
            return GR_OK;
        size_t seg_len = read_be16(data + pos + 2);
        if (seg_len < 2)
            return GR_OK; /* malformed: stb rejects it */
        size_t seg_end = pos + 2 + seg_len; /* may lie past the end of a truncated file */
        if (marker == 0xc4) {
            /* As stb reads it: tables back to back while the declared length lasts, bytes past
             * the end of the data reading as 0. */
            size_t t = pos + 4;
            while (t < seg_end) {
                size_t codes = 0;
                for (size_t i = 1; i <= 16; i++)
                    codes += t + i < len ? data[t + i] : 0;
                if (codes > 256)
                    return gr_fail(GR_ERR_PARSE,
                                   "%s: byte %zu: corrupt JPEG: Huffman table with %zu codes (at "
                                   "most 256)", name, t, codes);
                t += 17 + codes;
            }
        }
        pos = seg_end;
    }
    return GR_OK;
}

static gr_status check_image_format(const uint8_t *data, size_t len, const char *name)
{
    if (starts_with(data, len, "\xff\xd8\xff", 3))
        return check_jpeg_huffman_tables(data, len, name);
    if (starts_with(data, len, "\x89PNG\r\n\x1a\n", 8) || starts_with(data, len, "BM", 2))
        return GR_OK;
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

gr_status gr_image_probe_mem(const uint8_t *data, size_t len, const char *name, int *w, int *h)
{
    if (!w || !h || (!data && len > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_probe_mem: NULL argument");
    *w = *h = 0;
    if (!name)
        name = "<image>";
    if (len > GR_MAX_IMAGE_FILE_BYTES)
        return gr_fail(GR_ERR_LIMIT, "%s: %zu bytes is larger than the %zu-byte image file limit",
                       name, len, GR_MAX_IMAGE_FILE_BYTES);
    GR_TRY(check_image_format(data, len, name)); /* so len >= 2 from here */
    int comp = 0;
    if (!stbi_info_from_memory(data, (int)len, w, h, &comp)) {
        const char *why = stbi_failure_reason();
        return gr_fail(GR_ERR_PARSE, "%s: not a readable image: %s", name, why ? why : "unknown");
    }
    if (*w <= 0 || *h <= 0 || *w > GR_MAX_DIM || *h > GR_MAX_DIM ||
        (size_t)*w * (size_t)*h > GR_MAX_IMAGE_PIXELS)
        return gr_fail(GR_ERR_LIMIT, "%s: image is %dx%d; the limit is %d per side and %zu pixels",
                       name, *w, *h, GR_MAX_DIM, GR_MAX_IMAGE_PIXELS);
    return GR_OK;
}

gr_status gr_image_decode_mem(const uint8_t *data, size_t len, const char *name, gr_image **out)
{
    if (out)
        *out = NULL;
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_image_decode_mem: NULL argument");
    if (!name)
        name = "<image>";
    int w = 0, h = 0, comp = 0;
    GR_TRY(gr_image_probe_mem(data, len, name, &w, &h));
    const stbi_uc *bytes = data;
    int dw = 0, dh = 0;
    uint8_t *pixels = stbi_load_from_memory(bytes, (int)len, &dw, &dh, &comp, 3);
    if (!pixels) {
        const char *why = stbi_failure_reason();
        return gr_fail(GR_ERR_PARSE, "%s: corrupt image: %s", name, why ? why : "unknown");
    }
    if (dw != w || dh != h) { /* the header said one thing and the decoder another */
        stbi_image_free(pixels);
        return gr_fail(GR_ERR_PARSE, "%s: header says %dx%d but decoded %dx%d", name, w, h, dw, dh);
    }
    gr_image *im = gr_malloc(sizeof *im, "image");
    if (!im) {
        stbi_image_free(pixels);
        return GR_ERR_OUT_OF_MEMORY;
    }
    /* Copy into our own allocation so gr_image_destroy() frees with free(), whatever allocator
     * stb was built with. */
    size_t n_bytes = (size_t)w * (size_t)h * 3;
    im->data = gr_malloc(n_bytes, "image pixels");
    if (!im->data) {
        free(im);
        stbi_image_free(pixels);
        return GR_ERR_OUT_OF_MEMORY;
    }
    memcpy(im->data, pixels, n_bytes);
    stbi_image_free(pixels);
    im->w = w;
    im->h = h;
    im->c = 3;
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

/* ---- letterbox ----------------------------------------------------------------------------- */

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

/* The letterbox as planar CHW floats into out (3 x net_h x net_w). */
static gr_status letterbox_f32(const gr_image *im, int net_w, int net_h, float *out,
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

    /* load_image_stb: interleaved bytes -> planar (float)(v / 255.) */
    size_t plane = (size_t)im->w * (size_t)im->h;
    for (size_t i = 0; i < plane; i++)
        for (int k = 0; k < 3; k++)
            src[(size_t)k * plane + i] = (float)(im->data[i * 3 + (size_t)k] / 255.);

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

gr_status gr_image_letterbox(const gr_image *im, int net_w, int net_h, float *out)
{
    return letterbox_f32(im, net_w, net_h, out, "gr_image_letterbox");
}

gr_status gr_image_letterbox_u8(const gr_image *im, int net_w, int net_h, uint8_t *out)
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
    gr_status st = letterbox_f32(im, net_w, net_h, planar, "gr_image_letterbox_u8");
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
