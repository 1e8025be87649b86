/* Where the dataflow executor's time goes (docs/dataflow.md): one engine run by the persistent
 * kernel, its per-task timeline read from %globaltimer records.
 *
 *   ./build-gpu/12_dataflow_trace [--model yolo | --cfg FILE] [--prec int8|fp16] [--runs 300]
 *                                 [--warmup 50] [--csv FILE] [--no-tactic-search]
 *                                 [--timeout-ms 200]
 *
 * Builds the model (synthetic weights; --cfg: any Darknet cfg, e.g. tests/data/dataflow_dag.cfg,
 * small enough for compute-sanitizer's racecheck) with executor = dataflow, times --runs synchronous runs
 * untraced (p50, p99: the figure graphrun_bench would give), then turns the trace on, runs 20
 * more and reads the last run's records. Prints per program node: tasks, when its first task was
 * claimed, became ready (its dependencies published) and its last finished, relative to the
 * run's first claim, and the medians of each task's wait (claim -> ready) and compute (ready ->
 * published); then the kernel's span and how busy the blocks were. --csv writes one line per task
 * (bench/dataflow_timeline.py draws it). --no-tactic-search builds without timing the per-layer
 * kernels' tactics, so that under compute-sanitizer only the build's few per-layer launches and
 * the dataflow kernel run; --timeout-ms raises the kernel's dependency wait limit (200 ms), which
 * a kernel slowed down by compute-sanitizer's racecheck exceeds. Exits 77 with one line without a
 * GPU. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h> /* a CUDA build's benchmark: runtime/gpu/debug.h's hooks */

#include "experimental/dataflow/plan.h"
#include "graphrun/runtime.h"
#include "runtime/gpu/debug.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *v, int n, double p)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static int fail(const char *what)
{
    fprintf(stderr, "12_dataflow_trace: %s: %s\n", what, gr_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *model = "yolo", *cfg = NULL, *csv = NULL;
    gr_precision prec = GR_PREC_INT8;
    int runs = 300, warmup = 50, tactic_search = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--model") == 0 && v)
            model = argv[++i];
        else if (strcmp(a, "--cfg") == 0 && v)
            cfg = argv[++i];
        else if (strcmp(a, "--prec") == 0 && v && gr_precision_parse(v, &prec) == GR_OK)
            i++;
        else if (strcmp(a, "--runs") == 0 && v && atoi(v) > 0)
            runs = atoi(argv[++i]);
        else if (strcmp(a, "--warmup") == 0 && v && atoi(v) >= 0)
            warmup = atoi(argv[++i]);
        else if (strcmp(a, "--csv") == 0 && v)
            csv = argv[++i];
        else if (strcmp(a, "--no-tactic-search") == 0)
            tactic_search = 0;
        else if (strcmp(a, "--timeout-ms") == 0 && v && atoi(v) > 0)
            gr_debug_dataflow_timeout((uint64_t)atoi(argv[++i]) * 1000000u);
        else {
            fprintf(stderr, "usage: 12_dataflow_trace [--model M | --cfg F] [--prec int8|fp16] [--runs N] "
                            "[--warmup N] [--csv FILE] [--no-tactic-search] "
                            "[--timeout-ms N]\n");
            return 2;
        }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("12_dataflow_trace: skipped: no CUDA device\n");
        return 77;
    }
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = cfg ? NULL : model;
    mo.cfg_path = cfg;
    if (cfg)
        model = cfg;
    gr_model *m = NULL;
    if (gr_model_load(&mo, &m) != GR_OK)
        return fail("model");
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.executor = GR_EXECUTOR_DATAFLOW;
    eo.tactic_search = tactic_search;
    gr_engine *e = NULL;
    if (gr_engine_build(m, &eo, &e) != GR_OK)
        return fail("build");
    gr_tensor_desc in;
    gr_engine_input_desc(e, &in);
    const size_t bytes = (size_t)in.n * in.c * in.h * in.w;
    uint8_t *input = malloc(bytes);
    double *times = malloc((size_t)runs * sizeof *times);
    if (!input || !times)
        return 1;
    for (size_t i = 0; i < bytes; i++) /* a fixed pattern, never zeros */
        input[i] = (uint8_t)((i * 7919u) >> 4);
    for (int r = 0; r < warmup; r++)
        if (gr_engine_run_u8(e, input) != GR_OK)
            return fail("warm-up run");
    for (int r = 0; r < runs; r++) {
        const double t0 = now_us();
        if (gr_engine_run_u8(e, input) != GR_OK)
            return fail("run");
        times[r] = now_us() - t0;
    }
    const double p50 = percentile(times, runs, 50.0), p99 = percentile(times, runs, 99.0);

    const gr_df_program *p = NULL;
    if (gr_engine_debug_dataflow_program(e, &p) != GR_OK || gr_engine_debug_dataflow_trace(e, 1) != GR_OK)
        return fail("trace");
    const int n = p->header->n_tasks;
    gr_df_trace_record *rec = calloc((size_t)n, sizeof *rec);
    if (!rec)
        return 1;
    for (int r = 0; r < (warmup < 20 ? 1 : 20); r++)
        if (gr_engine_run_u8(e, input) != GR_OK)
            return fail("traced run");
    if (gr_engine_debug_dataflow_trace_read(e, rec, n) != GR_OK)
        return fail("trace read");

    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int t = 0; t < n; t++) {
        t0 = rec[t].claim_ns < t0 ? rec[t].claim_ns : t0;
        t1 = rec[t].done_ns > t1 ? rec[t].done_ns : t1;
    }
    printf("%s %s batch 1, dataflow executor: %d tasks, %d dependencies; untraced run p50 %.1f us, "
           "p99 %.1f us (%d runs, host clock, both copies)\n", model, gr_precision_name(prec), n,
           p->header->n_deps, p50, p99, runs);
    printf("traced run: kernel span %.1f us (first claim to last publish)\n", (t1 - t0) / 1e3);
    printf(" node layer op        tasks  claimed   ready    done |  wait p50  compute p50  "
           "compute max (us)\n");
    double *wait = malloc((size_t)n * sizeof *wait), *comp = malloc((size_t)n * sizeof *comp);
    double busy = 0.0;
    for (int i = 0; i < p->header->n_nodes; i++) {
        const gr_df_node *dn = &p->nodes[i];
        int k = 0;
        uint64_t c0 = UINT64_MAX, r0 = UINT64_MAX, d1 = 0;
        double cmax = 0.0;
        for (int t = 0; t < n; t++) {
            if (p->tasks[t].node != i)
                continue;
            const gr_df_trace_record *x = &rec[t];
            c0 = x->claim_ns < c0 ? x->claim_ns : c0;
            r0 = x->ready_ns < r0 ? x->ready_ns : r0;
            d1 = x->done_ns > d1 ? x->done_ns : d1;
            wait[k] = (x->ready_ns - x->claim_ns) / 1e3;
            comp[k] = (x->done_ns - x->ready_ns) / 1e3;
            cmax = comp[k] > cmax ? comp[k] : cmax;
            busy += comp[k];
            k++;
        }
        if (!k)
            continue;
        printf("%5d %5d %-9s %5d %8.1f %7.1f %7.1f | %9.2f %12.2f %12.2f\n", dn->plan_node,
               dn->layer, gr_df_op_name(dn->op), k, (c0 - t0) / 1e3, (r0 - t0) / 1e3,
               (d1 - t0) / 1e3, percentile(wait, k, 50.0), percentile(comp, k, 50.0), cmax);
    }
    int sms = 0, blocks = 0;
    for (int t = 0; t < n; t++) {
        sms = (int)rec[t].sm + 1 > sms ? (int)rec[t].sm + 1 : sms;
        blocks = (int)rec[t].block + 1 > blocks ? (int)rec[t].block + 1 : blocks;
    }
    printf("blocks that ran tasks: up to %d on %d SMs; compute time summed over tasks %.1f us = "
           "%.1f SM-equivalents busy over the span\n", blocks, sms, busy,
           busy / ((t1 - t0) / 1e3));
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f)
            return fail("csv");
        fprintf(f, "task,node,layer,op,sm,block,claim_us,ready_us,done_us\n");
        for (int t = 0; t < n; t++) {
            const gr_df_node *dn = &p->nodes[p->tasks[t].node];
            fprintf(f, "%d,%d,%d,%s,%u,%u,%.3f,%.3f,%.3f\n", t, dn->plan_node, dn->layer,
                    gr_df_op_name(dn->op), rec[t].sm, rec[t].block, (rec[t].claim_ns - t0) / 1e3,
                    (rec[t].ready_ns - t0) / 1e3, (rec[t].done_ns - t0) / 1e3);
        }
        if (fclose(f) != 0)
            return fail("csv write");
    }
    free(wait);
    free(comp);
    free(rec);
    free(times);
    free(input);
    gr_engine_destroy(e);
    gr_model_destroy(m);
    return 0;
}
