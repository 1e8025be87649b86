/* JSON output shared by the CLI's subcommands and the benchmark (tools/bench_core.c).
 *
 * A JSON string must be valid UTF-8, and file names are any bytes: a byte that does not start a
 * well-formed UTF-8 sequence (a lone continuation byte, a cut or overlong sequence, a surrogate,
 * above U+10FFFF) is written as \ufffd (U+FFFD, the replacement character), one per such byte, so
 * every line stays valid JSON; control characters and DEL are written as \u00XX. */
#include <stdio.h>

#include "tools/cli.h"

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

void gr_cli_json_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned char ch = *s;
        int n = ch < 0x80 ? 1 : utf8_length(s);
        if (n == 0)
            fputs("\\ufffd", f);
        else if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fwrite(s, 1, (size_t)n, f);
        s += n ? n : 1;
    }
    fputc('"', f);
}

void gr_cli_json_detections(FILE *f, const gr_model *model, const gr_detection *dets, int n,
                            const char *indent)
{
    fprintf(f, "\"detections\": [");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s%s{\"class\": ", i ? ", " : "", indent);
        gr_cli_json_string(f, gr_model_class_name(model, dets[i].class_id));
        fprintf(f, ", \"class_id\": %d, \"prob\": %.6f, \"objectness\": %.6f, \"left\": %.1f, "
                   "\"top\": %.1f, \"right\": %.1f, \"bottom\": %.1f}",
                dets[i].class_id, (double)dets[i].prob, (double)dets[i].objectness,
                (double)dets[i].left, (double)dets[i].top, (double)dets[i].right,
                (double)dets[i].bottom);
    }
    fputc(']', f);
}
