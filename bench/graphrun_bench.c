/* graphrun_bench: the GPU engine's latency and throughput per precision and batch. The same code
 * as `graphrun bench` (tools/bench_core.c, which documents the method); kept as its own program
 * for the scripts and logs that call it by this name. */
#include "tools/bench_core.h"

int main(int argc, char **argv) { return gr_bench_main("graphrun_bench", argc, argv); }
