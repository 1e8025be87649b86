/* Darknet's letterbox preprocessing: the step-by-step reference and the fast float and uint8
 * versions that equal it byte for byte. AlexeyAB's stretch (resize_image straight to the network
 * size) is the same code with the geometry gr_letterbox_geometry gives it: the resized image
 * fills the canvas (new = net, no border), so one resize serves both.
 *
 * The letterbox reproduces Darknet's load_image_color + letterbox_image + resize_image float for
 * float: pixels are (float)(v / 255.) computed in double as Darknet does, and the bilinear resize
 * is Darknet's two-pass one (horizontal into an im_h x new_w buffer, then vertical), in float
 * arithmetic, with its align-corners scales (in-1)/(out-1) and its special cases for the last
 * column and row. The build uses -std=c11, which keeps gcc from contracting a*b+c into FMA, so
 * the rounding is Darknet's. */
#include "runtime/detect.h"
#include "runtime/image/image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The border of a float letterbox: Darknet's 0.5, or Ultralytics' 114 as the uint8 path's byte
 * becomes (114 / 255, the float the uint8 input's conversion gives). */
static float border_f32(gr_preprocess how)
{
    return how == GR_PREPROCESS_LETTERBOX_114 ? 114.0f / 255.0f : 0.5f;
}

/* Every letterbox reads w x h x 3 bytes: an image of another channel count is refused (its
 * buffer may be smaller than that). */
static gr_status check_letterbox_args(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                                      const void *out, const char *who)
{
    if (how != GR_PREPROCESS_LETTERBOX && how != GR_PREPROCESS_STRETCH &&
        how != GR_PREPROCESS_LETTERBOX_114)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: preprocessing %d is not letterbox (%d), "
                       "stretch (%d) or letterbox114 (%d)", who, (int)how,
                       GR_PREPROCESS_LETTERBOX, GR_PREPROCESS_STRETCH,
                       GR_PREPROCESS_LETTERBOX_114);
    if (!gr_image_valid(im))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL or malformed image (no data, or a side "
                       "outside 1..%d, or channels outside 1..4)", who, GR_MAX_DIM);
    if (im->c != 3)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: image has %d channels; the letterbox takes "
                       "3 (RGB)", who, im->c);
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL output", who);
    if (net_w <= 0 || net_h <= 0 || net_w > GR_MAX_DIM || net_h > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: bad network size %dx%d", who, net_w, net_h);
    return GR_OK;
}

/* The size in the file of an image decoded DCT-scaled (gr_image_preprocess_as): 0 x 0 for the
 * image's own, else at least the decoded size (the decoder only scales down) and within the
 * image limits. */
static gr_status check_file_size(const gr_image *im, int *fw, int *fh, const char *who)
{
    if (*fw == 0 && *fh == 0) { /* 0 x 0: the image's own size */
        *fw = im->w;
        *fh = im->h;
    }
    int file_w = *fw, file_h = *fh;
    if (file_w < im->w || file_h < im->h || file_w > GR_MAX_DIM || file_h > GR_MAX_DIM)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: a %dx%d image cannot be a scaled decode of "
                       "a %dx%d one (the size in the file is at least the image's and at most %d "
                       "per side)", who, im->w, im->h, file_w, file_h, GR_MAX_DIM);
    return GR_OK;
}

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

/* The reference letterbox (or stretch) as planar CHW floats into out (3 x net_h x net_w). */
static gr_status letterbox_reference_f32(const gr_image *im, gr_preprocess how, int net_w,
                                         int net_h, float *out, const char *who)
{
    GR_TRY(check_letterbox_args(im, how, net_w, net_h, out, who));
    gr_letterbox_geom geom;
    gr_letterbox_geometry(how, im->w, im->h, net_w, net_h, &geom);
    int new_w = geom.new_w, new_h = geom.new_h;

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
        out[i] = border_f32(how);
    int dx = geom.left, dy = geom.top;
    for (int k = 0; k < 3; k++)
        for (int r = 0; r < new_h; r++)
            memcpy(out + (size_t)k * net_plane + (size_t)(r + dy) * (size_t)net_w + (size_t)dx,
                   resized + ((size_t)k * (size_t)new_h + (size_t)r) * (size_t)new_w,
                   (size_t)new_w * sizeof(float));
    free(src);
    return GR_OK;
}

gr_status gr_image_letterbox_reference(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                                       float *out)
{
    return letterbox_reference_f32(im, how, net_w, net_h, out, "gr_image_letterbox_reference");
}

gr_status gr_image_letterbox_reference_u8(const gr_image *im, gr_preprocess how, int net_w,
                                          int net_h, uint8_t *out)
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
    gr_status st = letterbox_reference_f32(im, how, net_w, net_h, planar, "gr_image_letterbox_u8");
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
    int *col_off0, *col_off1; /* offsets (3 x pixel) of the two source pixels of column x */
    float *col_w0, *col_w1;   /* their weights: 1 - dx and dx */
    int whole_rows;           /* SSE2: convert whole source rows (see resized_row) */
    float *unit_row;          /* the source row being resized as (float)(v / 255.), 3 x src_w,
                               * then 4 zeros (what a weight of 0 multiplies past the end) */
    float *rows[2];           /* two horizontally resized source rows, new_w x 3 interleaved
                               * and one float more (the 4-wide store of the last column) */
    int row_of[2];            /* which source row each holds, -1 none */
    float to_unit[256];
} letterbox_plan;

static void free_plan(letterbox_plan *lp)
{
    free(lp->col_off0); /* one allocation holds all the tables and rows */
}

gr_preprocess gr_preprocess_concrete(gr_preprocess how)
{
    return how == GR_PREPROCESS_STRETCH || how == GR_PREPROCESS_LETTERBOX_114
               ? how
               : GR_PREPROCESS_LETTERBOX;
}

void gr_letterbox_geometry(gr_preprocess how, int im_w, int im_h, int net_w, int net_h,
                           gr_letterbox_geom *g)
{
    g->pad = how == GR_PREPROCESS_LETTERBOX_114 ? 114 : 128;
    gr_letterbox_size(how, im_w, im_h, net_w, net_h, &g->new_w, &g->new_h);
    g->left = (net_w - g->new_w) / 2;
    g->top = (net_h - g->new_h) / 2;
    g->w_scale = g->new_w > 1 ? (float)(im_w - 1) / (float)(g->new_w - 1) : 0.0f;
    g->h_scale = g->new_h > 1 ? (float)(im_h - 1) / (float)(g->new_h - 1) : 0.0f;
}

/* The plan for resizing `im` into the letterbox of a file_w x file_h image (im's own size, or
 * the size in the file of an image decoded DCT-scaled): where it lands and how large it is come
 * from file_w x file_h, the resize's scales from im's size. */
static gr_status make_plan(const gr_image *im, int file_w, int file_h, gr_preprocess how,
                           int net_w, int net_h, letterbox_plan *lp, gr_letterbox_geom *geom)
{
    memset(lp, 0, sizeof *lp);
    lp->src_w = im->w;
    lp->src_h = im->h;
    gr_letterbox_geometry(how, file_w, file_h, net_w, net_h, geom);
    geom->w_scale = geom->new_w > 1 ? (float)(im->w - 1) / (float)(geom->new_w - 1) : 0.0f;
    geom->h_scale = geom->new_h > 1 ? (float)(im->h - 1) / (float)(geom->new_h - 1) : 0.0f;
    lp->new_w = geom->new_w;
    lp->new_h = geom->new_h;
    size_t nw = (size_t)lp->new_w; /* <= net_w <= GR_MAX_DIM: no overflow below */
    size_t row_floats = 3 * nw + 4, unit_floats = 3 * (size_t)im->w + 4;
    size_t bytes = nw * (2 * sizeof(int) + 2 * sizeof(float)) +
                   (2 * row_floats + unit_floats) * sizeof(float);
    char *mem = gr_malloc(bytes, "letterbox tables");
    if (!mem)
        return GR_ERR_OUT_OF_MEMORY;
    lp->col_off0 = (int *)mem;
    lp->col_off1 = lp->col_off0 + nw;
    lp->col_w0 = (float *)(lp->col_off1 + nw);
    lp->col_w1 = lp->col_w0 + nw;
    lp->rows[0] = lp->col_w1 + nw;
    lp->rows[1] = lp->rows[0] + row_floats;
    lp->unit_row = lp->rows[1] + row_floats;
    memset(lp->unit_row + unit_floats - 4, 0, 4 * sizeof(float));
    lp->row_of[0] = lp->row_of[1] = -1;
    for (int v = 0; v < 256; v++)
        lp->to_unit[v] = (float)(v / 255.);
    int src_w = im->w, dst_w = lp->new_w;
    float w_scale = geom->w_scale;
    lp->h_scale = geom->h_scale;
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
    /* Whole rows when each source pixel is used about once or more; lerp_pixels needs every
     * column's second pixel to be its first + 1 or to weigh 0 (always so: sx < src_w - 1 for
     * every column but the last). */
    lp->whole_rows = 2 * dst_w >= src_w;
    for (int x = 0; x < dst_w; x++)
        if (lp->col_off1[x] != lp->col_off0[x] + 3 && lp->col_w1[x] != 0.0f)
            lp->whole_rows = 0;
    return GR_OK;
}

#if defined(__SSE2__)
/* The row's bytes as floats, (float)v / 255.0f sixteen at a time: that is (float)(v / 255.) for
 * every byte v (both are v / 255 rounded once to the nearest float: the double quotient's
 * rounding never lands on a float tie; test_image_fast checks all 256). */
static void unit_floats(const uint8_t *in, size_t n, const float *to_unit, float *f)
{
    const __m128i zero = _mm_setzero_si128();
    const __m128 d255 = _mm_set1_ps(255.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
        __m128i lo = _mm_unpacklo_epi8(b, zero), hi = _mm_unpackhi_epi8(b, zero);
        __m128i q[4] = {_mm_unpacklo_epi16(lo, zero), _mm_unpackhi_epi16(lo, zero),
                        _mm_unpacklo_epi16(hi, zero), _mm_unpackhi_epi16(hi, zero)};
        for (int k = 0; k < 4; k++)
            _mm_storeu_ps(f + i + 4 * k, _mm_div_ps(_mm_cvtepi32_ps(q[k]), d255));
    }
    for (; i < n; i++)
        f[i] = to_unit[in[i]];
}

/* Each output pixel w0 * (its first source pixel) + w1 * (the next), the three channels at once:
 * four lanes from f + off and f + off + 3, the fourth spare (overwritten by the next pixel, or
 * the row's padding). Per lane the scalar code's multiply, multiply and add, so the same bits. A
 * column whose second pixel is not the next one weighs it 0 (the last column, a one-pixel row):
 * the zeros after the row's floats give 0 * 0 = +0 where the scalar code adds 0 * v = +0. */
static void lerp_pixels(const letterbox_plan *lp, const float *f, float *row)
{
    for (int x = 0; x < lp->new_w; x++) {
        const float *a = f + lp->col_off0[x];
        __m128 w0 = _mm_set1_ps(lp->col_w0[x]), w1 = _mm_set1_ps(lp->col_w1[x]);
        __m128 v = _mm_add_ps(_mm_mul_ps(w0, _mm_loadu_ps(a)), _mm_mul_ps(w1, _mm_loadu_ps(a + 3)));
        _mm_storeu_ps(row + 3 * x, v);
    }
}
#endif

/* Source row `src_row` resized horizontally, from the cache; `keep` is the other row the
 * current output row needs (its cache entry is not evicted). With SSE2, when the resize uses
 * most of the row's pixels (it shrinks at most 2x), the row's bytes are made floats once, not
 * looked up twice per output value, and the pixels are interpolated four lanes at a time;
 * otherwise each output value looks its two bytes up. Both compute every value as
 * w0 * (float)(a / 255.) + w1 * (float)(b / 255.). */
static const float *resized_row(letterbox_plan *lp, const gr_image *im, int src_row, int keep)
{
    for (int i = 0; i < 2; i++)
        if (lp->row_of[i] == src_row)
            return lp->rows[i];
    int slot = lp->row_of[0] == keep ? 1 : 0;
    float *row = lp->rows[slot];
    lp->row_of[slot] = src_row;
    const uint8_t *in = im->data + (size_t)src_row * (size_t)im->w * 3;
    const float *to_unit = lp->to_unit;
#if defined(__SSE2__)
    if (lp->whole_rows) {
        unit_floats(in, (size_t)im->w * 3, to_unit, lp->unit_row);
        lerp_pixels(lp, lp->unit_row, row);
        return row;
    }
#endif
    for (int x = 0; x < lp->new_w; x++) {
        const uint8_t *a = in + lp->col_off0[x], *b = in + lp->col_off1[x];
        float w0 = lp->col_w0[x], w1 = lp->col_w1[x];
        row[3 * x + 0] = w0 * to_unit[a[0]] + w1 * to_unit[b[0]];
        row[3 * x + 1] = w0 * to_unit[a[1]] + w1 * to_unit[b[1]];
        row[3 * x + 2] = w0 * to_unit[a[2]] + w1 * to_unit[b[2]];
    }
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

static gr_status preprocess_f32(const gr_image *im, int file_w, int file_h, gr_preprocess how,
                                int net_w, int net_h, float *out, const char *who)
{
    GR_TRY(check_letterbox_args(im, how, net_w, net_h, out, who));
    GR_TRY(check_file_size(im, &file_w, &file_h, who));
    letterbox_plan lp;
    gr_letterbox_geom geom;
    GR_TRY(make_plan(im, file_w, file_h, how, net_w, net_h, &lp, &geom));
    size_t net_plane = (size_t)net_w * (size_t)net_h;
    for (size_t i = 0; i < 3 * net_plane; i++)
        out[i] = border_f32(how);
    int left = geom.left, top = geom.top;
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

#if defined(__SSE2__)
/* The vertical pass into bytes, sixteen at a time: per lane the scalar loop's operations in its
 * order (two products and their sum, * 255, + 0.5), min(v, 255) (MINPS is v < 255 ? v : 255),
 * truncation (CVTTPS2DQ), and packs that cannot saturate 0..255. Returns how many it did. */
static size_t rows_to_u8(const float *p0, const float *p1, float w0, float w1, size_t n,
                         uint8_t *o)
{
    const __m128 a = _mm_set1_ps(w0), b = _mm_set1_ps(w1);
    const __m128 k255 = _mm_set1_ps(255.0f), half = _mm_set1_ps(0.5f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i q[4];
        for (int k = 0; k < 4; k++) {
            __m128 v = _mm_add_ps(_mm_mul_ps(a, _mm_loadu_ps(p0 + i + 4 * k)),
                                  _mm_mul_ps(b, _mm_loadu_ps(p1 + i + 4 * k)));
            v = _mm_add_ps(_mm_mul_ps(v, k255), half);
            q[k] = _mm_cvttps_epi32(_mm_min_ps(v, k255));
        }
        __m128i lo = _mm_packs_epi32(q[0], q[1]), hi = _mm_packs_epi32(q[2], q[3]);
        _mm_storeu_si128((__m128i *)(void *)(o + i), _mm_packus_epi16(lo, hi));
    }
    return i;
}
#endif

static gr_status preprocess_u8(const gr_image *im, int file_w, int file_h, gr_preprocess how,
                               int net_w, int net_h, uint8_t *out, const char *who)
{
    GR_TRY(check_letterbox_args(im, how, net_w, net_h, out, who));
    GR_TRY(check_file_size(im, &file_w, &file_h, who));
    letterbox_plan lp;
    gr_letterbox_geom geom;
    GR_TRY(make_plan(im, file_w, file_h, how, net_w, net_h, &lp, &geom));
    int left = geom.left, top = geom.top;
    size_t row_bytes = (size_t)net_w * 3;
    /* Grey above and below the image, and left and right of it on its rows. */
    memset(out, geom.pad, (size_t)top * row_bytes);
    memset(out + (size_t)(top + lp.new_h) * row_bytes, geom.pad,
           (size_t)(net_h - top - lp.new_h) * row_bytes);
    size_t n = (size_t)lp.new_w * 3;
    for (int r = 0; r < lp.new_h; r++) {
        const float *p0, *p1;
        float w0, w1;
        output_row(&lp, im, r, &p0, &p1, &w0, &w1);
        uint8_t *line = out + (size_t)(r + top) * row_bytes;
        memset(line, geom.pad, (size_t)left * 3);
        memset(line + (size_t)(left + lp.new_w) * 3, geom.pad,
               (size_t)(net_w - left - lp.new_w) * 3);
        uint8_t *o = line + (size_t)left * 3;
        /* The reference clamps v to 0..255 and truncates it; v >= 0.5 here (every value and
         * weight is >= 0), so the lower clamp is never taken and the truncation is (int)'s. */
        size_t i = 0;
#if defined(__SSE2__)
        i = rows_to_u8(p0, p1, w0, w1, n, o);
#endif
        for (; i < n; i++) {
            float v = (w0 * p0[i] + w1 * p1[i]) * 255.0f + 0.5f;
            o[i] = (uint8_t)(int)(v < 255.0f ? v : 255.0f);
        }
    }
    free_plan(&lp);
    return GR_OK;
}

gr_status gr_image_preprocess(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                              float *out)
{
    return preprocess_f32(im, 0, 0, how, net_w, net_h, out, "gr_image_preprocess");
}

gr_status gr_image_preprocess_u8(const gr_image *im, gr_preprocess how, int net_w, int net_h,
                                 uint8_t *out)
{
    return preprocess_u8(im, 0, 0, how, net_w, net_h, out, "gr_image_preprocess_u8");
}

gr_status gr_image_letterbox(const gr_image *im, int net_w, int net_h, float *out)
{
    return preprocess_f32(im, 0, 0, GR_PREPROCESS_LETTERBOX, net_w, net_h, out,
                          "gr_image_letterbox");
}

gr_status gr_image_letterbox_u8(const gr_image *im, int net_w, int net_h, uint8_t *out)
{
    return preprocess_u8(im, 0, 0, GR_PREPROCESS_LETTERBOX, net_w, net_h, out,
                         "gr_image_letterbox_u8");
}

gr_status gr_image_preprocess_as(const gr_image *im, int file_w, int file_h, gr_preprocess how,
                                 int net_w, int net_h, float *out)
{
    return preprocess_f32(im, file_w, file_h, how, net_w, net_h, out, "gr_image_preprocess_as");
}

gr_status gr_image_preprocess_as_u8(const gr_image *im, int file_w, int file_h,
                                    gr_preprocess how, int net_w, int net_h, uint8_t *out)
{
    return preprocess_u8(im, file_w, file_h, how, net_w, net_h, out,
                         "gr_image_preprocess_as_u8");
}

gr_status gr_image_load_planar(const char *path, gr_preprocess how, int net_w, int net_h,
                               float *dst)
{
    size_t plane = (size_t)net_w * (size_t)net_h;
    uint8_t *u8 = gr_malloc(plane * 3, "letterboxed image");
    if (!u8)
        return GR_ERR_OUT_OF_MEMORY;
    gr_image *im = NULL;
    gr_status st = gr_image_load(path, &im);
    if (st == GR_OK)
        st = gr_image_preprocess_u8(im, how, net_w, net_h, u8);
    for (size_t p = 0; p < plane && st == GR_OK; p++)
        for (size_t c = 0; c < 3; c++)
            dst[c * plane + p] = (float)u8[p * 3 + c] / 255.0f;
    gr_image_destroy(im);
    free(u8);
    return st;
}
