/* graphrun: command-line entry point. Dispatches subcommands; the default is detect, which runs
 * on files given one by one (cmd_detect.c) or streams a folder or a list (cmd_stream.c). */
#include <stdio.h>
#include <string.h>

#include "tools/bench_core.h"
#include "tools/cli.h"

static int detect(int argc, char **argv)
{
    gr_cli_options o;
    gr_cli_options_default(&o);
    gr_cli_parser p = {.command = "graphrun", .shared = gr_cli_detect_flags,
                       .apply = gr_cli_detect_apply, .ctx = &o};
    int rc = gr_cli_run_parser(&p, argc, argv, gr_cli_detect_usage);
    if (rc >= 0)
        return rc;
    if (o.list_models) {
        for (const char *const *n = gr_builtin_models(); *n; n++)
            printf("%s\n", *n);
        return GR_EXIT_OK;
    }
    if (o.input_list || (o.n_inputs > 0 && gr_cli_is_directory(o.inputs[0])))
        return gr_cli_detect_stream(&o);
    return gr_cli_detect_images(&o);
}

static int dispatch(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    if (strcmp(sub, "plan") == 0)
        return gr_cli_plan(argc - 1, argv + 1);
    if (strcmp(sub, "compare") == 0)
        return gr_cli_compare(argc - 1, argv + 1);
    if (strcmp(sub, "eval") == 0)
        return gr_cli_eval(argc - 1, argv + 1);
    if (strcmp(sub, "bench") == 0)
        return gr_bench_main("graphrun bench", argc - 1, argv + 1);
    if (strcmp(sub, "detect") == 0)
        return detect(argc - 1, argv + 1);
    return detect(argc, argv);
}

int main(int argc, char **argv)
{
    return dispatch(argc, argv);
}
