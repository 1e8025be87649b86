/* graphrun: command-line entry point. Dispatches subcommands; the default is detect. */
#include <string.h>

#include "tools/bench_core.h"
#include "tools/cli.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "plan") == 0)
        return gr_cli_plan(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "compare") == 0)
        return gr_cli_compare(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "eval") == 0)
        return gr_cli_eval(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return gr_bench_main("graphrun bench", argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "detect") == 0)
        return gr_cli_detect(argc - 1, argv + 1);
    return gr_cli_detect(argc, argv);
}
