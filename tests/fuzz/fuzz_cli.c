/* libFuzzer harness: the CLI's argument parser. The bytes are split at NUL into argv[1..]; every
 * outcome is 0 or GR_EXIT_USAGE with a message, never a crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private NUL-terminated copy: argv strings may be anywhere in it. */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = (char *)"graphrun";
    for (size_t start = 0; start <= size && argc < MAX_ARGS;) {
        argv[argc++] = text + start;
        start += strlen(text + start) + 1;
    }
    argv[argc] = NULL;
    gr_cli_options o;
    char err[256];
    int rc = gr_cli_parse(argc, argv, &o, err, sizeof err);
    if (rc != 0 && (rc != GR_EXIT_USAGE || err[0] == '\0' || strchr(err, '\n')))
        __builtin_trap(); /* a usage error always carries a one-line message */
    if (rc == 0 && (o.batch < 1 || o.batch > GR_MAX_BATCH_CLI || o.n_inputs > GR_CLI_MAX_INPUTS))
        __builtin_trap();
    free(text);
    return 0;
}
