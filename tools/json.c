/* JSON output shared by the CLI's subcommands and the benchmark (tools/bench_core.c): the
 * library's formatter (runtime/jsonl.h: string literals of any bytes, detections, the image
 * records of JSON Lines) onto a stream. */
#include <stdio.h>

#include "runtime/jsonl.h"
#include "tools/cli.h"

/* b's text onto f, b freed. */
static void write_text(FILE *f, gr_bytes *b)
{
    if (b->len)
        fwrite(b->data, 1, b->len, f);
    gr_bytes_free(b);
}

void gr_cli_json_string(FILE *f, const char *str)
{
    gr_bytes b = {0};
    gr_json_string(&b, str);
    write_text(f, &b);
}

void gr_cli_json_detections(FILE *f, const gr_model *model, const gr_detection *dets, int n,
                            const char *indent)
{
    gr_bytes b = {0};
    gr_json_detections(&b, gr_model_names(model), dets, n, indent);
    write_text(f, &b);
}
