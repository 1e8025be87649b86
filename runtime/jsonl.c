/* The JSON record of one image (runtime/jsonl.h): the CLI's JSON Lines and the folder pipeline's
 * gr_file_result.jsonl, byte for byte the same text. Numbers go through snprintf (%.6f, %.1f,
 * %lld), so the text does not depend on the thread or the caller; runs of plain characters of a
 * string are copied in one piece. */
#include "runtime/jsonl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/engine_internal.h"

gr_class_names gr_model_names(const gr_model *model)
{
    gr_class_names names = {NULL, 0};
    if (model && model->net->class_names) {
        names.names = (const char *const *)model->net->class_names;
        names.n = model->net->n_class_names;
    }
    return names;
}

static void put_text(gr_bytes *b, const char *s) { gr_bytes_put(b, s, strlen(s)); }

/* snprintf onto b (the texts here are short: numbers and fixed words). */
static void put_format(gr_bytes *b, const char *fmt, ...) GR_PRINTF(2, 3);
static void put_format(gr_bytes *b, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n > 0)
        gr_bytes_put(b, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

/* Length of the well-formed UTF-8 sequence at s (2..4), or 0. */
static int utf8_length(const unsigned char *s)
{
    unsigned char c = s[0];
    int n = c >= 0xc2 && c <= 0xdf   ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong 3- and 4-byte forms, surrogates (U+D800..DFFF) and code points above U+10FFFF. */
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

static int plain_ascii(unsigned char ch)
{
    return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\';
}

void gr_json_string(gr_bytes *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    gr_bytes_put(b, "\"", 1);
    while (*s) {
        const unsigned char *run = s;
        while (plain_ascii(*s))
            s++;
        gr_bytes_put(b, run, (size_t)(s - run));
        if (!*s)
            break;
        unsigned char ch = *s;
        int n = ch < 0x80 ? 1 : utf8_length(s);
        char escaped[8];
        if (n == 0)
            put_text(b, "\\ufffd");
        else if (ch == '"' || ch == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)ch;
            gr_bytes_put(b, escaped, 2);
        } else if (ch < 0x20 || ch == 0x7f)
            put_format(b, "\\u%04x", ch);
        else
            gr_bytes_put(b, s, (size_t)n);
        s += n ? n : 1;
    }
    gr_bytes_put(b, "\"", 1);
}

static void put_class_name(gr_bytes *b, gr_class_names names, int class_id)
{
    if (names.names && class_id >= 0 && class_id < names.n && names.names[class_id]) {
        gr_json_string(b, names.names[class_id]);
        return;
    }
    put_format(b, "\"class %d\"", class_id);
}

void gr_json_detections(gr_bytes *b, gr_class_names names, const gr_detection *dets, int n,
                        const char *indent)
{
    put_text(b, "\"detections\": [");
    for (int i = 0; i < n; i++) {
        if (i)
            gr_bytes_put(b, ", ", 2);
        put_text(b, indent);
        put_text(b, "{\"class\": ");
        put_class_name(b, names, dets[i].class_id);
        put_format(b, ", \"class_id\": %d, \"prob\": %.6f, \"objectness\": %.6f, \"left\": %.1f, "
                      "\"top\": %.1f, \"right\": %.1f, \"bottom\": %.1f}",
                   dets[i].class_id, (double)dets[i].prob, (double)dets[i].objectness,
                   (double)dets[i].left, (double)dets[i].top, (double)dets[i].right,
                   (double)dets[i].bottom);
    }
    gr_bytes_put(b, "]", 1);
}

void gr_json_record(gr_bytes *b, const gr_jsonl_image *im, gr_class_names names,
                    const gr_detection *dets, int n)
{
    put_text(b, "{\"input\": ");
    gr_json_string(b, im->path ? im->path : "");
    if (im->frame >= 0)
        put_format(b, ", \"frame\": %lld, \"time\": %.6f", im->frame, im->time_s);
    if (im->error) {
        put_text(b, ", \"error\": ");
        gr_json_string(b, im->error);
    } else if (im->nonfinite) {
        put_format(b, ", \"width\": %d, \"height\": %d, \"error\": \"its outputs hold %zu "
                      "non-finite values (NaN/Inf): activations overflow; use --prec fp32 or "
                      "int8\", \"nonfinite\": %zu", im->width, im->height, im->nonfinite,
                   im->nonfinite);
    } else {
        put_format(b, ", \"width\": %d, \"height\": %d, ", im->width, im->height);
        gr_json_detections(b, names, dets, n, "");
    }
    gr_bytes_put(b, "}", 1);
}
