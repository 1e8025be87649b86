/* The benchmark behind `graphrun bench` and bench/graphrun_bench (tools/bench_core.c). */
#ifndef GR_TOOLS_BENCH_CORE_H
#define GR_TOOLS_BENCH_CORE_H

/* Run the benchmark on argv (argv[0] is the program or subcommand); `program` names it in
 * messages. Returns the exit status (0 ok, 1 a configuration failed, 2 usage, 77 no GPU). */
int gr_bench_main(const char *program, int argc, char **argv);

#endif
