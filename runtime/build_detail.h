/* Where a GPU engine's build goes, finer than gr_build_times (runtime.h): not part of the public
 * API, for the benchmark's build table (tools/bench_core.c, `--build-detail`) and the tests.
 * Host clock, milliseconds, summed over every variant built (the micro-batch candidates' too). */
#ifndef GR_RUNTIME_BUILD_DETAIL_H
#define GR_RUNTIME_BUILD_DETAIL_H

#include "graphrun/runtime.h"

typedef struct gr_build_detail {
    double alloc_ms;        /* instances: arenas, io blocks, pinned staging, scratch */
    double search_fill_ms;  /* tactic search: test inputs written (a kernel per conv) */
    double search_check_ms; /* candidates' check launches and the on-device comparison */
    double search_time_ms;  /* candidates' timed launches */
    double search_gemm_ms;  /* cuBLASLt plans of the GEMM tactic */
    double warmup_ms;       /* eager runs before capture: warm-ups and the time-split runs */
    int checks;             /* candidate launches checked against the automatic tactic's output */
    int timed_launches;     /* launches between timing events (tactics) */
    int replays;            /* whole-graph replays timed (micro-batch candidates) */
    int mb_cut;             /* micro-batch candidates dropped after one replay */
} gr_build_detail;

/* Zeros for a NULL engine or one that built nothing. */
void gr_engine_build_detail(const gr_engine *engine, gr_build_detail *detail);

#endif
