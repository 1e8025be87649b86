/* `graphrun bench` and bench/graphrun_bench (the same code, the same JSON): end-to-end latency and
 * throughput of the GPU engine, per precision and batch.
 *
 * For each (precision, batch) it builds a GPU engine from the model (synthetic weights unless the
 * model options say otherwise), fills the input with a letterboxed photo (data/dog.jpg, non-zero,
 * replicated over the batch), warms up, then times --iters synchronous gr_engine_run() calls (input already in the pinned buffer)
 * with the host's monotonic clock: what a caller waits, input copy, compute and output copy
 * included. It reports p50/p99/max/mean, images/s (batch / p50) and the medians of the engine's
 * own time split (gr_engine_timing), checks that the output is finite and not all zero, and
 * compares with the project's targets. Then sustained throughput: --iters runs round robin over
 * the engine's --inflight slots (runtime.h "Runs in flight": submit run i after waiting for run
 * i - N on its slot), images over the wall time of the whole loop; and the engine's device memory
 * (gr_engine_memory). With --device gpu:all or gpu:N,M a pool of one engine per GPU is built
 * (runtime.h, "pools"): latency is the first GPU's; the sustained figure is every GPU's engine
 * alone, then all of them together, driven by this one thread round robin over devices and
 * slots (the total, and the scaling over the first GPU alone).
 *
 * It uses only include/graphrun/runtime.h. Exit status: 0 all configurations ran, 1 one failed
 * (one line each on stderr, the others still run), 2 bad command line, 3 an unreadable
 * image or unwritable --json file, 4 no CUDA device (docs/errors.md; tests/cli_bench.sh turns 4
 * into ctest's skip). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, gmtime_r */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bytes.h"
#include "runtime/build_detail.h"
#include "tools/bench_core.h"
#include "tools/cli.h"


#define MAX_BATCHES 16

typedef struct bench_options {
    const char *model;
    const char *image;
    gr_precision precisions[3];
    int n_precisions;
    int batches[MAX_BATCHES];
    int n_batches;
    int iters, warmup;
    int eager; /* 1: use_cuda_graph = 0 */
    const char *json_path;
    int micro_batch;          /* --micro-batch: 0 auto, -1 whole (no split), N images per pass */
    int layers;               /* --layers: print each engine's per-node times */
    int roofline;             /* --roofline: each engine's roofline table (gr_engine_roofline) */
    gr_cli_options devices;   /* --device: only its device list is read (n_devices,
                                 devices, all_devices) */
    gr_engine_options engine; /* graphrun/options.def's flags (--inflight: the engines' slots
                                 for the sustained throughput, --timing-cache, --split-k, ...) */
} bench_options;

enum { MAX_NODE_TIMES = 128 };

/* One (precision, batch) measurement; times in microseconds. */
typedef struct bench_result {
    const char *model; /* gr_model_info's name: the targets are per model */
    gr_precision precision;
    int batch;
    gr_status status;
    char error[512];
    double p50, p99, max, mean, images_per_s;
    double sustained_images_per_s; /* runs in flight, round robin over the slots (and the
                                      devices: the pool's total) */
    int n_devices;                 /* the pool's */
    int device_ordinal[GR_MAX_DEVICES];
    double device_images_per_s[GR_MAX_DEVICES]; /* sustained, each device's engine alone */
    gr_engine_memory_info memory;
    gr_timing split; /* medians of each component over the timed runs */
    int output_ok;   /* finite and not all zero */
    char device_name[128];
    double build_ms;          /* gr_engine_build, host clock */
    int micro_batch;          /* images per pass of the graph (gr_engine_micro_batch) */
    gr_tactic_stats tactics;  /* of that build */
    gr_build_times phases;    /* where the build went */
    gr_build_detail detail;   /* and finer (runtime/build_detail.h) */
    int n_nodes;              /* the engine's per-node times (gr_engine_node_time) */
    gr_node_time nodes[MAX_NODE_TIMES];
    gr_roofline *roofline;    /* --roofline: the engine's table, the caller frees it */
} bench_result;

/* Traced replays per roofline table: the medians of 20 (docs/performance.md, "Roofline"). */
enum { ROOFLINE_REPLAYS = 20 };

/* The project's targets on the H100 (bench/README.md), per model: batch-1 end-to-end latency
 * ceilings and batch-64 throughput floors. A model, precision and batch not listed has none. */
static const struct bench_target {
    const char *model; /* gr_model_info's name */
    gr_precision precision;
    int batch;
    double p50_us_max, images_per_s_min;
} targets[] = {
    {"yolov2-tiny-voc", GR_PREC_INT8, 1, 60.0, 0}, {"yolov2-tiny-voc", GR_PREC_FP16, 1, 75.0, 0},
    {"yolov2-tiny-voc", GR_PREC_INT8, 64, 0, 48000.0},
    {"yolov2-tiny-voc", GR_PREC_FP16, 64, 0, 36000.0},
    {"yolov3-tiny", GR_PREC_INT8, 1, 75.0, 0}, {"yolov3-tiny", GR_PREC_FP16, 1, 90.0, 0},
    {"yolov4-tiny", GR_PREC_INT8, 1, 200.0, 0}, {"yolov4-tiny", GR_PREC_FP16, 1, 220.0, 0},
    {"yolov4-tiny", GR_PREC_INT8, 64, 0, 40000.0}, {"yolov4-tiny", GR_PREC_FP16, 64, 0, 28000.0},
};

static const struct bench_target *target_of(const bench_result *r)
{
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (strcmp(targets[i].model, r->model) == 0 && targets[i].precision == r->precision &&
            targets[i].batch == r->batch)
            return &targets[i];
    return NULL;
}

static double target_latency_us(const bench_result *r)
{
    const struct bench_target *t = target_of(r);
    return t ? t->p50_us_max : 0;
}

static double target_images_per_s(const bench_result *r)
{
    const struct bench_target *t = target_of(r);
    return t ? t->images_per_s_min : 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The program's name in messages: "graphrun_bench" or "graphrun bench". */
static const char *prog = "graphrun_bench";

static void print_help(FILE *f)
{
    fprintf(f, "usage: %s [--model M] [--prec fp32|fp16|int8|auto|all] [--batch N[,N...]]\n"
           "         [--iters N] [--warmup N] [--inflight N] [--image FILE] [--eager]\n"
           "         [--max-nrmse X] [--json FILE] [--timing-cache FILE] [--calib-cache FILE]\n"
           "         [--[no-]tactic-search]\n"
           "         [--f32-algo A] [--split-k auto|on|off] [--pdl auto|on|off]\n"
           "         [--executor graph|dataflow|auto]\n"
           "         [--micro-batch auto|whole|N] [--layers] [--roofline]\n"
           "         [--device gpu|gpu:all|gpu:N[,M...]]\n"
           "\n"
           "  --model M      built-in model (default yolo = YOLOv2-tiny VOC), synthetic weights\n"
           "  --prec P       precision(s), comma-separated or 'all' (default all = fp32,fp16,int8);\n"
           "                 auto: mixed int8/fp16 within --max-nrmse X (default 0.003), chosen on\n"
           "                 the bundled photos (the int8 calibration images)\n"
           "  --batch LIST   batch sizes, comma-separated (default 1)\n"
           "  --iters N      timed runs per configuration (default 1000)\n"
           "  --warmup N     untimed runs first (default 100)\n"
           "  --image FILE   input photo, letterboxed and replicated (default: the bundled dog.jpg)\n"
           "  --eager        build engines without a CUDA graph (use_cuda_graph = 0)\n"
           "  --json FILE    also write the results as JSON\n"
           "  --device D     gpu (default: gpu 0), gpu:N, gpu:all or gpu:N,M,...: with several,\n"
           "                 one engine per GPU; sustained img/s per GPU alone and together\n"
           "  --layers       also print each engine's per-node times (eager, at build; in the JSON\n"
           "                 always, as \"layers\")\n"
           "  --roofline     also measure each engine's roofline table: per plan node its FLOPs,\n"
           "                 the bytes it must move, its floor from the device's measured peaks\n"
           "                 and its kernels' time inside the graph's replay (CUPTI); in the JSON\n"
           "                 as \"roofline\" (docs/performance.md). Needs a CUPTI build and the\n"
           "                 CUDA graph (not with --eager)\n"
           "  --micro-batch M  images per pass of the graph: auto (default: measured at build for\n"
           "                 batches of 64 and more), whole (never split) or N (a divisor of each\n"
           "                 batch; larger than a batch: that batch whole)\n", prog);
    gr_cli_engine_usage(f, GR_CMD_BENCH);
    fprintf(f, "\n"
           "Times are host-clock microseconds of synchronous gr_engine_run() calls (input already in the pinned buffer)\n"
           "(input copy, compute, output copy).\n"
           "Sustained img/s: --iters runs round robin over --inflight slots (gr_engine_submit /\n"
           "gr_engine_wait), images over the wall time of the loop.\n"
           "Exit: 0 ok, 1 a configuration failed, 2 usage, 3 unreadable input or output file, 4 no GPU\n"
           "(docs/errors.md).\n");
}

/* "1,64" -> batches; returns 0 on a malformed list. */
static int parse_batches(const char *arg, bench_options *o)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return 0;
    strcpy(buf, arg);
    o->n_batches = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_batches == MAX_BATCHES || !gr_cli_parse_int(tok, 1, 4096, &o->batches[o->n_batches]))
            return 0;
        o->n_batches++;
    }
    return o->n_batches > 0;
}

static int parse_precisions(const char *arg, bench_options *o)
{
    if (strcmp(arg, "all") == 0) {
        o->precisions[0] = GR_PREC_FP32;
        o->precisions[1] = GR_PREC_FP16;
        o->precisions[2] = GR_PREC_INT8;
        o->n_precisions = 3;
        return 1;
    }
    char buf[64];
    if (strlen(arg) >= sizeof buf)
        return 0;
    strcpy(buf, arg);
    o->n_precisions = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_precisions == 3 ||
            gr_precision_parse(tok, &o->precisions[o->n_precisions]) != GR_OK)
            return 0;
        o->n_precisions++;
    }
    return o->n_precisions > 0;
}

/* The engine options' flags (--inflight, --split-k, ...): graphrun/options.def's rows. */
enum {
    B_EAGER = 1, B_MODEL, B_IMAGE, B_JSON, B_PREC, B_BATCH, B_ITERS, B_WARMUP, B_MICRO_BATCH,
    B_LAYERS, B_DEVICE, B_ROOFLINE
};

static const gr_cli_flag bench_flags[] = {
    {"--eager", B_EAGER, 0}, {"--model", B_MODEL, 1}, {"--image", B_IMAGE, 1},
    {"--json", B_JSON, 1}, {"--prec", B_PREC, 1}, {"--batch", B_BATCH, 1},
    {"--iters", B_ITERS, 1}, {"--warmup", B_WARMUP, 1}, {"--micro-batch", B_MICRO_BATCH, 1},
    {"--layers", B_LAYERS, 0}, {"--device", B_DEVICE, 1}, {"--roofline", B_ROOFLINE, 0},
    {NULL, 0, 0}};

/* 1 when the flag's value is valid (flags without a value always are). */
static int apply_flag(bench_options *o, int id, const char *v)
{
    switch (id) {
    case B_EAGER: o->eager = 1; return 1;
    case B_LAYERS: o->layers = 1; return 1;
    case B_ROOFLINE: o->roofline = 1; return 1;
    case B_MODEL: o->model = v; return 1;
    case B_IMAGE: o->image = v; return 1;
    case B_JSON: o->json_path = v; return 1;
    case B_PREC: return parse_precisions(v, o);
    case B_BATCH: return parse_batches(v, o);
    case B_ITERS: return gr_cli_parse_int(v, 1, 10000000, &o->iters);
    case B_WARMUP: return gr_cli_parse_int(v, 0, 10000000, &o->warmup);
    case B_MICRO_BATCH:
        if (strcmp(v, "auto") == 0 || strcmp(v, "whole") == 0) {
            o->micro_batch = v[0] == 'a' ? 0 : -1;
            return 1;
        }
        return gr_cli_parse_int(v, 1, GR_MAX_BATCH_CLI, &o->micro_batch);
    default: return 0;
    }
}

static int bench_apply(void *ctx, int id, const char *name, const char *v, char *err,
                       size_t errlen)
{
    bench_options *o = ctx;
    if (id == B_DEVICE) {
        int rc = gr_cli_parse_device_list(v, &o->devices, err, errlen);
        if (rc == GR_EXIT_OK && o->devices.device != GR_DEVICE_GPU &&
            o->devices.device != GR_DEVICE_AUTO)
            rc = gr_cli_usage_error(err, errlen, "--device '%s': %s times GPU engines (gpu, "
                                    "gpu:N, gpu:all, gpu:N,M,...)", v, prog);
        return rc;
    }
    return apply_flag(ctx, id, v) ? GR_EXIT_OK
                                  : gr_cli_usage_error(err, errlen, "%s '%s' is not valid (see "
                                                       "%s --help)", name, v ? v : "", prog);
}

/* The default --image: the bundled photo, wherever graphrun's data is (gr_data_path). */
static char default_image[4096];

/* Returns -1 to go on, else the exit status (help, version or a usage error: printed). */
static int parse_args(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "yolo";
    gr_engine_options_default(&o->engine);
    parse_precisions("all", o);
    o->batches[0] = 1;
    o->n_batches = 1;
    o->iters = 1000;
    o->warmup = 100;
    gr_cli_parser parser = {.command = prog, .own = bench_flags, .apply = bench_apply, .ctx = o,
                            .engine = &o->engine, .commands = GR_CMD_BENCH};
    int rc = gr_cli_run_parser(&parser, argc, argv, print_help);
    if (rc < 0 && o->roofline && o->eager) {
        fprintf(stderr, "%s: --roofline times the kernels inside the CUDA graph's replay; --eager "
                        "builds without one\n", prog);
        return GR_EXIT_USAGE;
    }
    if (rc < 0 && !o->image) {
        gr_status st = gr_data_path("dog.jpg", default_image, sizeof default_image);
        if (st != GR_OK) {
            fprintf(stderr, "%s: the default --image: %s\n", prog, gr_last_error());
            return gr_cli_exit_code(st);
        }
        o->image = default_image;
    }
    return rc;
}

static double median_of(double *values, int n)
{
    gr_cli_sort(values, n);
    return gr_cli_percentile(values, n, 50.0);
}

static gr_status record_failure(bench_result *r, gr_status st, const char *what)
{
    r->status = st;
    snprintf(r->error, sizeof r->error, "%s: %s (%s)", what, gr_last_error(), gr_status_str(st));
    return st;
}

/* Every output finite and at least one non-zero: a broken engine must not look fast. */
static int outputs_sane(const gr_engine *engine)
{
    int any_nonzero = 0;
    for (int k = 0; k < gr_engine_output_count(engine); k++) {
        gr_tensor_desc d;
        const float *data = NULL;
        if (gr_engine_output_desc(engine, k, &d) != GR_OK ||
            gr_engine_output(engine, k, &data) != GR_OK)
            return 0;
        size_t n = (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(data[i]))
                return 0;
            any_nonzero |= data[i] != 0.0f;
        }
    }
    return any_nonzero;
}

/* `runs` runs over the pool's engines [first, first + count): run i on engine first + i % count,
 * its slot (i / count) % inflight, waited for in submission order once that slot is needed
 * again: every device has its slots in flight, from this one thread. */
static gr_status round_robin_pool(gr_pool *pool, int first, int count, int runs, bench_result *r)
{
    int slots = gr_engine_inflight(gr_pool_engine(pool, first)), lanes = count * slots;
    gr_status st;
    for (int i = 0; i < runs + lanes; i++) {
        gr_engine *e = gr_pool_engine(pool, first + i % count);
        int slot = (i / count) % slots;
        if (i >= lanes && (st = gr_engine_wait(e, slot)) != GR_OK)
            return record_failure(r, st, "gr_engine_wait");
        if (i < runs && (st = gr_engine_submit(e, slot)) != GR_OK)
            return record_failure(r, st, "gr_engine_submit");
    }
    return GR_OK;
}

static gr_status build_engine(const gr_model *model, const bench_options *o, bench_result *r,
                              gr_pool **pool)
{
    gr_engine_options eo;
    gr_cli_engine_options(&o->engine, GR_DEVICE_GPU, r->precision, r->batch, &eo);
    eo.use_cuda_graph = !o->eager;
    /* N larger than a batch of the list runs that batch whole; one that does not divide it is
     * the build's error, reported in that row. */
    eo.micro_batch = o->micro_batch < 0 || o->micro_batch > r->batch ? r->batch : o->micro_batch;
    static const int first = 0;
    const gr_cli_options *d = &o->devices;
    int n = d->all_devices ? 0 : d->n_devices ? d->n_devices : 1;
    double build_start = now_us();
    gr_status st = gr_pool_build(model, &eo, d->all_devices ? NULL : d->n_devices ? d->devices
                                                                                  : &first,
                                 n, pool);
    r->build_ms = (now_us() - build_start) / 1e3;
    if (st != GR_OK)
        return record_failure(r, st, "building the GPU engine");
    r->n_devices = gr_pool_devices(*pool);
    for (int k = 0; k < r->n_devices; k++)
        r->device_ordinal[k] = gr_pool_device(*pool, k);
    if (gr_pool_notice(*pool)[0])
        fprintf(stderr, "%s: %s\n", prog, gr_pool_notice(*pool));
    gr_engine *engine = gr_pool_engine(*pool, 0);
    gr_engine_tactic_stats(engine, &r->tactics);
    gr_engine_build_times(engine, &r->phases);
    gr_engine_build_detail(engine, &r->detail);
    r->n_nodes = gr_engine_node_time_count(engine);
    r->n_nodes = r->n_nodes < MAX_NODE_TIMES ? r->n_nodes : MAX_NODE_TIMES;
    for (int i = 0; i < r->n_nodes; i++)
        gr_engine_node_time(engine, i, &r->nodes[i]);
    r->micro_batch = gr_engine_micro_batch(engine);
    if (strstr(gr_engine_notice(engine), "micro-batch:"))
        fprintf(stderr, "%s: %s batch %d: %s\n", prog, gr_precision_name(r->precision), r->batch,
                gr_engine_notice(engine));
    snprintf(r->device_name, sizeof r->device_name, "%s", gr_engine_device_name(engine));
    if (r->precision == GR_PREC_AUTO)
        fprintf(stderr, "%s: %s\n", prog, gr_engine_notice(engine));
    return GR_OK;
}

/* Zero-copy: the image goes straight into every slot's pinned input buffer once; each run is
 * then exactly what a serving loop does after writing its input (one graph launch + sync). */
static gr_status fill_inputs(gr_engine *engine, const uint8_t *image_u8, size_t image_bytes,
                             bench_result *r)
{
    for (int slot = gr_engine_inflight(engine) - 1; slot >= 0; slot--) {
        void *pinned = NULL;
        size_t pinned_bytes = 0;
        gr_status st = gr_engine_slot_input(engine, slot, 1, &pinned, &pinned_bytes);
        if (st != GR_OK)
            return record_failure(r, st, "gr_engine_slot_input");
        for (int b = 0; b < r->batch; b++)
            memcpy((uint8_t *)pinned + (size_t)b * image_bytes, image_u8, image_bytes);
    }
    return GR_OK;
}

/* Warm-up, then --iters timed synchronous runs: host times in times[], the engine's split in
 * parts[4][iters] (convert, copy, compute, end to end). */
static gr_status timed_runs(gr_engine *engine, const bench_options *o, bench_result *r,
                            double *times, double *parts)
{
    gr_status st;
    for (int i = 0; i < o->warmup; i++)
        if ((st = gr_engine_run(engine)) != GR_OK)
            return record_failure(r, st, "warm-up run");
    for (int i = 0; i < o->iters; i++) {
        double t0 = now_us();
        st = gr_engine_run(engine);
        double t1 = now_us();
        if (st != GR_OK)
            return record_failure(r, st, "timed run");
        times[i] = t1 - t0;
        gr_timing t;
        if ((st = gr_engine_timing(engine, &t)) != GR_OK)
            return record_failure(r, st, "gr_engine_timing");
        parts[i] = t.convert_us;
        parts[o->iters + i] = t.copy_us;
        parts[2 * o->iters + i] = t.compute_us;
        parts[3 * o->iters + i] = t.end_to_end_us;
    }
    return GR_OK;
}

/* Sustained throughput of engines [first, first + count) of the pool: --iters runs per engine
 * round robin over them and their slots, after a warm-up; images/s over the loop's wall time. */
static gr_status sustained_on(gr_pool *pool, int first, int count, const bench_options *o,
                              bench_result *r, double *images_per_s)
{
    gr_status st = round_robin_pool(pool, first, count, o->warmup * count, r);
    double t0 = now_us();
    if (st == GR_OK)
        st = round_robin_pool(pool, first, count, o->iters * count, r);
    if (st != GR_OK)
        return st;
    *images_per_s = (double)o->iters * count * r->batch / ((now_us() - t0) * 1e-6);
    return GR_OK;
}

/* One device: its sustained rate. Several: each alone, then all together (the total). */
static gr_status sustained(gr_pool *pool, const bench_options *o, bench_result *r)
{
    int n = gr_pool_devices(pool);
    gr_status st = GR_OK;
    for (int k = 0; n > 1 && k < n && st == GR_OK; k++)
        st = sustained_on(pool, k, 1, o, r, &r->device_images_per_s[k]);
    if (st == GR_OK)
        st = sustained_on(pool, 0, n, o, r, &r->sustained_images_per_s);
    if (n == 1)
        r->device_images_per_s[0] = r->sustained_images_per_s;
    return st;
}

static void summarize(const bench_options *o, double *times, double *parts, bench_result *r)
{
    double sum = 0;
    for (int i = 0; i < o->iters; i++)
        sum += times[i];
    gr_cli_sort(times, o->iters);
    r->p50 = gr_cli_percentile(times, o->iters, 50.0);
    r->p99 = gr_cli_percentile(times, o->iters, 99.0);
    r->max = times[o->iters - 1];
    r->mean = sum / o->iters;
    r->images_per_s = r->batch / (r->p50 * 1e-6);
    r->split.convert_us = median_of(parts, o->iters);
    r->split.copy_us = median_of(parts + o->iters, o->iters);
    r->split.compute_us = median_of(parts + 2 * o->iters, o->iters);
    r->split.end_to_end_us = median_of(parts + 3 * o->iters, o->iters);
}

/* Time one (precision, batch). `image_u8` is one letterboxed image of `image_bytes`. */
static gr_status bench_one(const gr_model *model, const bench_options *o, const uint8_t *image_u8,
                           size_t image_bytes, bench_result *r)
{
    gr_pool *pool = NULL;
    gr_engine *engine = NULL;
    double *times = malloc(sizeof *times * (size_t)o->iters);
    double *parts = malloc(sizeof *parts * 4 * (size_t)o->iters);
    gr_status st = times && parts ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    if (st != GR_OK) {
        snprintf(r->error, sizeof r->error, "out of host memory for batch %d", r->batch);
        r->status = st;
    }
    if (st == GR_OK)
        st = build_engine(model, o, r, &pool);
    engine = gr_pool_engine(pool, 0);
    for (int k = 0; st == GR_OK && k < gr_pool_devices(pool); k++)
        st = fill_inputs(gr_pool_engine(pool, k), image_u8, image_bytes, r);
    if (st == GR_OK)
        st = timed_runs(engine, o, r, times, parts);
    if (st == GR_OK) {
        r->output_ok = outputs_sane(engine);
        st = sustained(pool, o, r);
    }
    if (st == GR_OK) {
        r->output_ok &= outputs_sane(engine);
        if ((st = gr_engine_memory(engine, &r->memory)) != GR_OK)
            record_failure(r, st, "gr_engine_memory");
    }
    if (st == GR_OK && o->roofline &&
        (st = gr_engine_roofline(engine, ROOFLINE_REPLAYS, &r->roofline)) != GR_OK)
        record_failure(r, st, "the roofline table");
    if (st == GR_OK) {
        summarize(o, times, parts, r);
        r->status = GR_OK;
    }
    free(parts);
    free(times);
    gr_pool_destroy(pool);
    return st;
}

/* The throughput a target is judged on: the batch-64 targets (int8 48k, fp16 36k img/s) are for
 * runs in flight (copies overlapped), so the sustained figure where two or more ran in flight,
 * else the synchronous one. */
static double judged_images_per_s(const bench_result *r)
{
    return r->memory.inflight >= 2 ? r->sustained_images_per_s : r->images_per_s;
}

/* "ok" / "MISS" against the target, "-" where there is none. */
static const char *verdict(const bench_result *r)
{
    double lat = target_latency_us(r);
    double ips = target_images_per_s(r);
    if (lat > 0)
        return r->p50 <= lat ? "ok" : "MISS";
    if (ips > 0)
        return judged_images_per_s(r) >= ips ? "ok" : "MISS";
    return "-";
}

static void target_text(const bench_result *r, char *buf, size_t len)
{
    double lat = target_latency_us(r);
    double ips = target_images_per_s(r);
    if (lat > 0)
        snprintf(buf, len, "<=%.0fus %s", lat, verdict(r));
    else if (ips > 0)
        snprintf(buf, len, ">=%.0fk/s %s%s", ips / 1000, verdict(r),
                 r->memory.inflight >= 2 ? " (sust.)" : "");
    else
        snprintf(buf, len, "-");
}

/* The roofline table of one engine (docs/performance.md, "Roofline"). */
static void print_roofline(const bench_result *r)
{
    const gr_roofline *t = r->roofline;
    const gr_roofline_peaks *p = &t->peaks;
    printf("\nroofline %s batch %d on %s (%d x %d images a replay): peaks: copy %.0f GB/s, int8 "
           "%.0f TOPS, fp16 %.0f TFLOPS (fp%d accumulate), fp32 %.1f TFLOPS (cuBLAS GEMMs "
           "%d^3)\n", gr_precision_name(r->precision), r->batch, r->device_name,
           r->batch / (t->micro_batch > 0 ? t->micro_batch : r->batch), t->micro_batch,
           p->dram_gbs, p->int8_tops, p->fp16_tops, p->fp16_accumulate ? 16 : 32, p->fp32_tflops,
           p->gemm_size);
    printf("%5s %5s %-10s %-4s %7s %10s %10s %10s %11s %7s\n", "node", "layer", "op", "prec",
           "kernels", "MFLOP", "KB", "floor us", "measured us", "%floor");
    for (int k = 0; k < t->n_nodes; k++) {
        const gr_roofline_node *n = &t->nodes[k];
        printf("%5d %5d %-10s %-4s %7d %10.1f %10.1f %10.2f %11.2f %6.1f%%\n", n->node, n->layer,
               n->kind, gr_precision_name(n->prec), n->kernels, n->flops / 1e6, n->bytes / 1e3,
               n->floor_us, n->us, n->us > 0 ? 100.0 * n->floor_us / n->us : 0.0);
    }
    printf("sum of floors %.1f us; kernels %.1f us (busy %.1f us; copies %.1f, unclaimed %.1f us); "
           "replay %.1f us (events, untraced): floors / replay %.1f%%\n",
           t->floor_sum_us, t->kernel_sum_us, t->busy_us, t->copy_us, t->other_us, t->replay_us,
           t->replay_us > 0 ? 100.0 * t->floor_sum_us / t->replay_us : 0.0);
}

static void json_roofline(FILE *f, const gr_roofline *t)
{
    const gr_roofline_peaks *p = &t->peaks;
    fprintf(f, ", \"roofline\": {\"peaks\": {\"copy_gb_per_s\": %.1f, \"int8_tops\": %.1f, "
               "\"fp16_tflops\": %.1f, \"fp16_accumulate\": %s, \"fp32_tflops\": %.2f, "
               "\"gemm_size\": %d}, \"micro_batch\": %d, \"replays\": %d, \"replay_us\": %.2f, "
               "\"floor_sum_us\": %.2f, \"kernel_sum_us\": %.2f, \"busy_us\": %.2f, "
               "\"copy_us\": %.2f, \"unclaimed_us\": %.2f, \"nodes\": [",
            p->dram_gbs, p->int8_tops, p->fp16_tops, p->fp16_accumulate ? "true" : "false",
            p->fp32_tflops, p->gemm_size, t->micro_batch, t->replays, t->replay_us,
            t->floor_sum_us, t->kernel_sum_us, t->busy_us, t->copy_us, t->other_us);
    for (int k = 0; k < t->n_nodes; k++) {
        const gr_roofline_node *n = &t->nodes[k];
        fprintf(f, "%s{\"node\": %d, \"layer\": %d, \"op\": ", k ? ", " : "", n->node, n->layer);
        gr_cli_json_string(f, n->kind);
        fprintf(f, ", \"precision\": \"%s\", \"kernels\": %d, \"flops\": %.0f, \"bytes\": %.0f, "
                   "\"weight_bytes\": %.0f, \"floor_us\": %.3f, \"us\": %.3f, "
                   "\"exclusive_us\": %.3f, \"percent_of_floor\": %.2f}",
                gr_precision_name(n->prec), n->kernels, n->flops, n->bytes, n->weight_bytes,
                n->floor_us, n->us, n->exclusive_us, n->us > 0 ? 100.0 * n->floor_us / n->us : 0.0);
    }
    fprintf(f, "]}");
}

static void print_table(const bench_result *results, int n, const bench_options *o)
{
    printf("\n%-5s %5s %9s %9s %9s %9s %10s %10s | %8s %8s %8s %8s | %-14s\n", "prec", "batch",
           "p50 us", "p99 us", "max us", "mean us", "img/s", "sustained", "conv", "copy", "compute",
           "e2e", "target");
    printf("---------------------------------------------------------------------------------------"
           "------------------------------------------\n");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &results[i];
        if (r->status != GR_OK) {
            printf("%-5s %5d  failed: %s\n", gr_precision_name(r->precision), r->batch, r->error);
            continue;
        }
        char target[32];
        target_text(r, target, sizeof target);
        printf("%-5s %5d %9.1f %9.1f %9.1f %9.1f %10.0f %10.0f | %8.1f %8.1f %8.1f %8.1f | %-14s%s\n",
               gr_precision_name(r->precision), r->batch, r->p50, r->p99, r->max, r->mean,
               r->images_per_s, r->sustained_images_per_s, r->split.convert_us, r->split.copy_us, r->split.compute_us,
               r->split.end_to_end_us, target, r->output_ok ? "" : "  OUTPUT NOT SANE");
    }
    printf("host clock around synchronous gr_engine_run (H2D copy + compute + D2H copy), %d runs after %d "
           "warm-up;\nsustained: img/s of %d runs round robin over %d in flight; conv/copy/compute/"
           "e2e: medians of the engine's own split (gr_engine_timing)%s\n",
           o->iters, o->warmup, o->iters, o->engine.inflight, o->eager ? "; eager (no CUDA graph)" : "");
    for (int i = 0; i < n; i++) {
        const gr_engine_memory_info *m = &results[i].memory;
        if (results[i].status == GR_OK)
            printf("%-5s %5d device memory: weights %.2f MiB (shared), per instance: arena %.2f + "
                   "scratch %.2f + io %.2f MiB; cuBLAS %.1f MiB; total %.2f MiB for %d in flight\n",
                   gr_precision_name(results[i].precision), results[i].batch,
                   (double)m->weights_bytes / 1048576.0, (double)m->arena_bytes / 1048576.0,
                   (double)m->workspace_bytes / 1048576.0, (double)m->io_bytes / 1048576.0,
                   (double)m->cublas_workspace_bytes / 1048576.0,
                   (double)m->total_bytes / 1048576.0, m->inflight);
    }
    for (int i = 0; i < n; i++) {
        const bench_result *r = &results[i];
        if (r->status != GR_OK)
            continue;
        const gr_build_times *t = &r->phases;
        printf("%-5s %5d engine build %.0f ms = calibration/map %.0f + plan %.0f + weights %.0f + "
               "tactic search %.0f + micro-batch timing %.0f + capture %.0f ms (+ rest); search: "
               "%d candidates timed (%d cut early, %d failed the check) for %d convs, %d from the "
               "timing cache; runs as %d x %d images\n",
               gr_precision_name(r->precision), r->batch, r->build_ms, t->resolve_ms, t->plan_ms,
               t->weights_ms, t->tactic_ms, t->micro_batch_ms, t->capture_ms,
               r->tactics.candidates, r->tactics.cut, r->tactics.rejected, r->tactics.convs,
               r->tactics.cached, r->batch / (r->micro_batch > 0 ? r->micro_batch : r->batch),
               r->micro_batch);
        const gr_build_detail *d = &r->detail;
        printf("%-5s %5d build detail: allocation %.0f ms; search: inputs %.0f + checks %.0f (%d) "
               "+ timing %.0f (%d launches) + cuBLASLt plans %.0f ms; eager warm-up/time split "
               "%.0f ms; %d replays timed (%d candidates cut)\n",
               gr_precision_name(r->precision), r->batch, d->alloc_ms, d->search_fill_ms,
               d->search_check_ms, d->checks, d->search_time_ms, d->timed_launches,
               d->search_gemm_ms, d->warmup_ms, d->replays, d->mb_cut);
    }
    for (int i = 0; i < n; i++)
        if (results[i].status == GR_OK && results[i].roofline)
            print_roofline(&results[i]);
    for (int i = 0; i < n && o->layers; i++) {
        const bench_result *r = &results[i];
        if (r->status != GR_OK)
            continue;
        printf("%-5s %5d per node (eager at build, median of 3, us):", gr_precision_name(r->precision),
               r->batch);
        for (int k = 0; k < r->n_nodes; k++)
            printf("%s L%d %s %.1f", k ? "," : "", r->nodes[k].layer, r->nodes[k].kind,
                   r->nodes[k].us);
        printf("\n");
    }
}

static int write_json(const char *path, const bench_options *o, const char *model_name,
                      const bench_result *results, int n)
{
    gr_memfile out; /* written whole by rename (base/bytes.h) */
    FILE *f = gr_memfile_open(&out, path);
    if (!f) {
        fprintf(stderr, "%s: %s\n", prog, gr_last_error());
        return 0;
    }
    char date[32] = "";
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc))
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    fprintf(f, "{\"tool\": \"graphrun_bench\", \"version\": \"%s\", \"date\": \"%s\", \"model\": ",
            gr_version(), date);
    gr_cli_json_string(f, model_name);
    fprintf(f, ", \"image\": ");
    gr_cli_json_string(f, o->image);
    fprintf(f, ", \"iters\": %d, \"warmup\": %d, \"inflight\": %d, \"cuda_graph\": %s, \"clock\": "
               "\"host monotonic, synchronous gr_engine_run\",\n \"results\": [",
            o->iters, o->warmup, o->engine.inflight, o->eager ? "false" : "true");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &results[i];
        fprintf(f, "%s\n  {\"precision\": \"%s\", \"batch\": %d, ", i ? "," : "",
                gr_precision_name(r->precision), r->batch);
        if (r->status != GR_OK) {
            fprintf(f, "\"ok\": false, \"status\": \"%s\", \"error\": ", gr_status_str(r->status));
            gr_cli_json_string(f, r->error);
            fprintf(f, "}");
            continue;
        }
        double lat = target_latency_us(r);
        double ips = target_images_per_s(r);
        fprintf(f, "\"ok\": true, \"device\": ");
        gr_cli_json_string(f, r->device_name);
        fprintf(f, ", \"p50_us\": %.2f, \"p99_us\": %.2f, \"max_us\": %.2f, \"mean_us\": %.2f, "
                   "\"images_per_s\": %.1f, \"engine_split_median_us\": {\"convert\": %.2f, "
                   "\"copy\": %.2f, \"compute\": %.2f, \"end_to_end\": %.2f}, \"output_sane\": %s",
                r->p50, r->p99, r->max, r->mean, r->images_per_s, r->split.convert_us,
                r->split.copy_us, r->split.compute_us, r->split.end_to_end_us,
                r->output_ok ? "true" : "false");
        fprintf(f, ", \"inflight\": %d, \"sustained_images_per_s\": %.1f, \"device_memory\": "
                   "{\"weights\": %zu, \"arena_per_instance\": %zu, \"workspace_per_instance\": "
                   "%zu, \"io_per_instance\": %zu, \"cublas_workspace\": %zu, \"total\": %zu}",
                r->memory.inflight, r->sustained_images_per_s, r->memory.weights_bytes,
                r->memory.arena_bytes, r->memory.workspace_bytes, r->memory.io_bytes,
                r->memory.cublas_workspace_bytes, r->memory.total_bytes);
        fprintf(f, ", \"devices\": [");
        for (int k = 0; k < r->n_devices; k++)
            fprintf(f, "%s{\"gpu\": %d, \"sustained_images_per_s_alone\": %.1f}", k ? ", " : "",
                    r->device_ordinal[k], r->device_images_per_s[k]);
        fprintf(f, "]");
        fprintf(f, ", \"build_ms\": %.1f, \"tactic_search\": {\"ms\": %.1f, \"convs\": %d, "
                   "\"searched\": %d, \"cached\": %d, \"candidates\": %d, \"rejected\": %d, "
                   "\"cut\": %d}",
                r->build_ms, r->tactics.search_ms, r->tactics.convs, r->tactics.searched,
                r->tactics.cached, r->tactics.candidates, r->tactics.rejected, r->tactics.cut);
        fprintf(f, ", \"build_phases_ms\": {\"resolve\": %.1f, \"plan\": %.1f, \"weights\": "
                   "%.1f, \"tactic_search\": %.1f, \"micro_batch\": %.1f, \"capture\": %.1f, "
                   "\"total\": %.1f}, \"micro_batch\": %d",
                r->phases.resolve_ms, r->phases.plan_ms, r->phases.weights_ms, r->phases.tactic_ms,
                r->phases.micro_batch_ms, r->phases.capture_ms, r->phases.total_ms,
                r->micro_batch);
        fprintf(f, ", \"build_detail\": {\"alloc_ms\": %.1f, \"search_fill_ms\": %.1f, "
                   "\"search_check_ms\": %.1f, \"search_time_ms\": %.1f, \"search_gemm_ms\": "
                   "%.1f, \"warmup_ms\": %.1f, \"checks\": %d, \"timed_launches\": %d, "
                   "\"replays\": %d, \"micro_batch_cut\": %d}",
                r->detail.alloc_ms, r->detail.search_fill_ms, r->detail.search_check_ms,
                r->detail.search_time_ms, r->detail.search_gemm_ms, r->detail.warmup_ms,
                r->detail.checks, r->detail.timed_launches, r->detail.replays, r->detail.mb_cut);
        fprintf(f, ", \"layers\": [");
        for (int k = 0; k < r->n_nodes; k++) {
            fprintf(f, "%s{\"layer\": %d, \"kind\": ", k ? ", " : "", r->nodes[k].layer);
            gr_cli_json_string(f, r->nodes[k].kind);
            fprintf(f, ", \"us\": %.2f}", r->nodes[k].us);
        }
        fprintf(f, "]");
        if (r->roofline)
            json_roofline(f, r->roofline);
        if (lat > 0)
            fprintf(f, ", \"target_p50_us_max\": %.0f, \"target_met\": %s", lat,
                    r->p50 <= lat ? "true" : "false");
        if (ips > 0)
            fprintf(f, ", \"target_images_per_s_min\": %.0f, \"target_met\": %s", ips,
                    judged_images_per_s(r) >= ips ? "true" : "false");
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    if (gr_memfile_commit(&out, path, "JSON report") != GR_OK) {
        fprintf(stderr, "%s: %s\n", prog, gr_last_error());
        return 0;
    }
    return 1;
}

/* The model and its input: the photo letterboxed once, as uint8 (the GPU's input). Returns an
 * exit code (its line printed). */
static int load_input(const bench_options *o, gr_model **model, gr_model_info *info,
                      uint8_t **image_u8)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = o->model;
    gr_status st = gr_model_load(&mo, model);
    if (st != GR_OK) {
        fprintf(stderr, "%s: loading model '%s': %s (%s)\n", prog, o->model, gr_last_error(),
                gr_status_str(st));
        return gr_cli_exit_code(st);
    }
    gr_model_get_info(*model, info);
    int rc = gr_cli_check_image_channels(info->channels, info->height, info->width, info->name);
    if (rc != GR_EXIT_OK)
        return rc;
    gr_image *image = NULL;
    if ((st = gr_image_load(o->image, &image)) == GR_OK) {
        *image_u8 = malloc((size_t)info->channels * (size_t)info->width * (size_t)info->height);
        st = *image_u8 ? gr_image_preprocess_u8(image, gr_model_preprocess(*model), info->width,
                                                info->height, *image_u8)
                       : GR_ERR_OUT_OF_MEMORY;
    }
    gr_image_destroy(image);
    if (st != GR_OK) {
        fprintf(stderr, "%s: %s: %s (%s)\n", prog, o->image,
                st == GR_ERR_OUT_OF_MEMORY ? "out of host memory" : gr_last_error(),
                gr_status_str(st));
        return gr_cli_exit_code(st);
    }
    return GR_EXIT_OK;
}

/* Several devices: each one's rate alone and the total's scaling over the first alone. */
static void print_devices(const bench_result *r)
{
    if (r->n_devices < 2)
        return;
    printf("  per device alone:");
    for (int k = 0; k < r->n_devices; k++)
        printf("%s gpu %d %.0f images/s", k ? "," : "", r->device_ordinal[k],
               r->device_images_per_s[k]);
    double first = r->device_images_per_s[0];
    printf("; together %.0f images/s on %d devices (%.2fx gpu %d alone)\n",
           r->sustained_images_per_s, r->n_devices,
           first > 0 ? r->sustained_images_per_s / first : 0.0, r->device_ordinal[0]);
}

/* Every (precision, batch): a line each on stdout, a failure's on stderr. Returns the failures;
 * *measured counts those that ran. */
static int run_all(const gr_model *model, const char *model_name, const bench_options *o,
                   const uint8_t *image_u8, size_t image_bytes, bench_result *results,
                   int *measured)
{
    int failures = 0, n = 0;
    for (int p = 0; p < o->n_precisions; p++)
        for (int b = 0; b < o->n_batches; b++) {
            bench_result *r = &results[n++];
            r->model = model_name;
            r->precision = o->precisions[p];
            r->batch = o->batches[b];
            if (bench_one(model, o, image_u8, image_bytes, r) != GR_OK) {
                fprintf(stderr, "%s: %s batch %d: %s\n", prog, gr_precision_name(r->precision),
                        r->batch, r->error);
                failures++;
                continue;
            }
            (*measured)++;
            if (!r->output_ok) {
                fprintf(stderr, "%s: %s batch %d: the output has non-finite values or is all "
                                "zero\n", prog, gr_precision_name(r->precision), r->batch);
                failures++;
            }
            printf("%s batch %d on %s: p50 %.1f us, %.0f images/s; %.0f images/s sustained with %d "
                   "in flight%s\n", gr_precision_name(r->precision), r->batch, r->device_name,
                   r->p50, r->images_per_s, r->sustained_images_per_s, o->engine.inflight,
                   r->n_devices > 1 ? " per device, all devices together" : "");
            print_devices(r);
            fflush(stdout);
        }
    return failures;
}

int gr_bench_main(const char *program, int argc, char **argv)
{
    prog = program;
    bench_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.roofline && !gr_roofline_available()) {
        fprintf(stderr, "%s: --roofline is unavailable: this graphrun was built without CUPTI (the "
                        "CUDA toolkit's in-graph kernel timing) or without CUDA; "
                        "docs/performance.md, \"Roofline\"\n", prog);
        return gr_cli_exit_code(GR_ERR_UNSUPPORTED);
    }
    if (gr_cuda_device_count() == 0) {
        fprintf(stderr, "%s: no CUDA device visible (no GPU or driver, or graphrun was built "
                        "without CUDA): nothing to time\n", prog);
        return GR_EXIT_NO_DEVICE;
    }
    gr_model *model = NULL;
    gr_model_info info;
    uint8_t *image_u8 = NULL;
    int n_results = o.n_precisions * o.n_batches;
    bench_result *results = calloc((size_t)n_results, sizeof *results);
    rc = results ? load_input(&o, &model, &info, &image_u8) : GR_EXIT_OOM;
    if (rc == GR_EXIT_OK) {
        printf("%s %s: model %s (%dx%dx%d, %.2f GFLOP/image, %s weights), input %s\n", prog,
               gr_version(), info.name, info.width, info.height, info.channels, info.gflops,
               info.synthetic_weights ? "synthetic" : "loaded", o.image);
        fflush(stdout);
        size_t image_bytes = (size_t)info.channels * (size_t)info.width * (size_t)info.height;
        int measured = 0;
        int failures = run_all(model, info.name, &o, image_u8, image_bytes, results, &measured);
        if (measured > 0)
            print_table(results, n_results, &o);
        /* An unwritable --json is an output not written (3), as everywhere in the CLI. */
        if (o.json_path && !write_json(o.json_path, &o, info.name, results, n_results))
            rc = GR_EXIT_INPUT;
        else
            rc = failures ? GR_EXIT_FAILURE : GR_EXIT_OK;
    }
    for (int i = 0; results && i < n_results; i++)
        gr_roofline_free(results[i].roofline);
    free(results);
    free(image_u8);
    gr_model_destroy(model);
    return rc;
}
