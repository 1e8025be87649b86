/* Drawing labelled detection boxes into an image, with Darknet's per-class colours and a bitmap
 * font (stb_easy_font); gr_image_draw_detections takes class names and counts from a model. */
#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <stdio.h>
#include <string.h>

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

/* Fill [x0, x1) x [y0, y1), clipped to the image (of 3 or 4 channels). */
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
            for (int k = 0; k < 3; k++) /* c is 3 or 4: alpha untouched */
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
    if (!gr_image_valid(im) || n < 0 || (!dets && n > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "draw detections: bad image or detections");
    /* Colours are RGB: a grey image would get only their red component. */
    if (im->c != 3 && im->c != 4)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "draw detections: image has %d channels; boxes "
                       "are drawn into 3 (RGB) or 4 (RGBA, alpha left as it is)", im->c);
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



static const char *model_label(const void *ctx, int class_id)
{
    return gr_model_class_name((const gr_model *)ctx, class_id);
}

gr_status gr_image_draw_detections(gr_image *im, const gr_detection *dets, int n,
                                   const gr_model *model)
{
    int classes = 0;
    if (model) {
        gr_model_info info;
        if (gr_model_get_info(model, &info) == GR_OK)
            classes = info.classes;
    }
    /* Without a model, labels read "class N" and colours spread over the classes present. */
    return gr_draw_detections_labelled(im, dets, n, classes, model ? model_label : NULL, model);
}
