/* JSON string output shared by the CLI's subcommands and the benchmark (tools/bench_core.c). */
#include <stdio.h>

#include "tools/cli.h"

void gr_cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
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
