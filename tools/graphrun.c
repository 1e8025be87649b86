/* graphrun: command-line entry point. Dispatches subcommands; the default is detect, which runs
 * on files given one by one (cmd_detect.c) or streams a folder or a list (cmd_stream.c, over the
 * library's gr_pool_detect_files). */
#define _POSIX_C_SOURCE 200809L /* SIGPIPE */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tools/bench_core.h"
#include "tools/cli.h"

static int detect(int argc, char **argv)
{
    gr_cli_options o;
    gr_cli_options_default(&o);
    gr_cli_parser p = {.command = "graphrun", .shared = gr_cli_detect_flags,
                       .apply = gr_cli_detect_apply, .ctx = &o, .engine = &o.engine,
                       .commands = GR_CMD_DETECT, .engine_given = &o.engine_given};
    int rc = gr_cli_run_parser(&p, argc, argv, gr_cli_detect_usage);
    if (rc >= 0)
        return rc;
    char err[512];
    if (gr_cli_check_format(&o, err, sizeof err) != GR_EXIT_OK) {
        fprintf(stderr, "graphrun: %s\n", err);
        return GR_EXIT_USAGE;
    }
    if (o.list_models) {
        for (const char *const *n = gr_builtin_models(); *n; n++)
            printf("%s\n", *n);
        return GR_EXIT_OK;
    }
    if (gr_cli_wants_video(&o))
        return gr_cli_detect_video(&o);
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
    if (strcmp(sub, "build") == 0)
        return gr_cli_build(argc - 1, argv + 1);
    if (strcmp(sub, "bench") == 0)
        return gr_bench_main("graphrun bench", argc - 1, argv + 1);
    if (strcmp(sub, "detect") == 0)
        return detect(argc - 1, argv + 1);
    return detect(argc, argv);
}

/* A closed pipe (graphrun ... | head) is a write error like a full disk: EPIPE, one line on stderr,
 * exit 3, instead of a silent death by SIGPIPE. Every command's results reach stdout's file or
 * the exit status says they did not. */
int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    int rc = dispatch(argc, argv);
    int out = gr_cli_close_stdout();
    return rc != GR_EXIT_OK ? rc : out;
}
