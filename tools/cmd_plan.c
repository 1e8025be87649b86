/* `graphrun plan`: build the execution plan of a model and show it - one row per node and the
 * arena summary (or JSON), optionally the DAG as Graphviz DOT and the memory timeline as SVG.
 * Planning needs no GPU; without --weights the weights are synthesized (seed 1) because BN
 * folding and int8 weight scales need numbers. int8 scales come from --calibrate (a CPU run of
 * the fp32 plan over a deterministic synthetic image) or default to a range of 1.
 * --prec auto builds an engine with GR_PREC_AUTO (the model's own weights: `shapes` its trained
 * ones) to choose the per-layer map, then plans with that map; a mixed plan (auto or --layer-prec)
 * starts with a "precision map:" line. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bytes.h"
#include "experimental/dataflow/plan.h"
#include "planner/plan.h"
#include "planner/tasks.h"
#include "tools/cli.h"


static void plan_usage(FILE *f)
{
    fprintf(f, "usage: graphrun plan [--model NAME | --cfg FILE] [--weights FILE]\n"
               "                     [--prec fp32|fp16|int8|auto] [--layer-prec I=P,...] [--batch N]\n"
               "                     [--max-nrmse X] [--calib-images DIR] [--device D] (auto)\n"
               "                     [--json] [--dot FILE] [--svg FILE] [--single-stream]\n"
               "                     [--fuse-maxpool] [--fuse-quant-in] [--fuse-dequant-out]\n"
               "                     [--fuse-io] [--no-concat] [--no-inplace] [--no-reuse]\n"
               "                     [--decode-heads] [--calibrate]\n"
               "                     [--device gpu [--timing-cache FILE] [--no-tactic-search]\n"
               "                      [--executor graph|dataflow|auto]]\n"
               "                     [--tasks [--task-target N]]\n"
               "--device gpu with fp16/int8 (text output, no --layer-prec) also builds the GPU\n"
               "engine (fusions and int8 calibration as graphrun runs it) and shows each\n"
               "tensor-core conv's tactic: its name, measured time and the automatic tactic's\n"
               "time (docs/tactics.md), and which executor runs the plan and why (--executor;\n"
               "the dataflow executor is experimental: docs/dataflow.md).\n"
               "--tasks shows the plan as a tile dataflow graph instead (docs/planner.md, \"The\n"
               "task graph\"): each node cut into row bands x channel slices of at most N tasks\n"
               "(--task-target, default 132), with their dependencies; --json lists every task.\n"
               "engine options (the GPU engine of --device gpu, the one --prec auto chooses with):\n");
    gr_cli_engine_usage(f, GR_CMD_PLAN);
}

static int fail(gr_status st)
{
    fprintf(stderr, "graphrun plan: %s: %s\n", gr_status_str(st), gr_last_error());
    return gr_cli_exit_code(st);
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "graphrun plan: %s '%s'\n", what, arg ? arg : "");
    return GR_EXIT_USAGE;
}

typedef struct plan_args {
    const char *model, *cfg, *weights, *layer_prec, *dot, *svg, *calib_dir;
    int json, calibrate, tasks, task_target;
    gr_device device;
    gr_plan_options opt;
    gr_engine_options engine; /* graphrun/options.def's flags (--timing-cache, --executor, ...) */
} plan_args;

enum {
    P_JSON = 1, P_SINGLE_STREAM, P_FUSE_MAXPOOL, P_FUSE_QUANT_IN, P_FUSE_DEQUANT_OUT, P_FUSE_IO,
    P_NO_CONCAT, P_NO_INPLACE, P_NO_REUSE, P_DECODE_HEADS, P_CALIBRATE, P_MODEL, P_CFG,
    P_WEIGHTS, P_PREC, P_CALIB_IMAGES, P_DEVICE, P_LAYER_PREC, P_BATCH, P_DOT, P_SVG, P_TASKS,
    P_TASK_TARGET
};

static const gr_cli_flag plan_flags[] = {
    {"--json", P_JSON, 0}, {"--single-stream", P_SINGLE_STREAM, 0},
    {"--fuse-maxpool", P_FUSE_MAXPOOL, 0}, {"--fuse-quant-in", P_FUSE_QUANT_IN, 0},
    {"--fuse-dequant-out", P_FUSE_DEQUANT_OUT, 0}, {"--fuse-io", P_FUSE_IO, 0},
    {"--no-concat", P_NO_CONCAT, 0}, {"--no-inplace", P_NO_INPLACE, 0},
    {"--no-reuse", P_NO_REUSE, 0},
    {"--decode-heads", P_DECODE_HEADS, 0}, {"--calibrate", P_CALIBRATE, 0},
    {"--model", P_MODEL, 1}, {"--cfg", P_CFG, 1}, {"--weights", P_WEIGHTS, 1},
    {"--prec", P_PREC, 1}, {"--precision", P_PREC, 1},
    {"--calib-images", P_CALIB_IMAGES, 1}, {"--device", P_DEVICE, 1},
    {"--layer-prec", P_LAYER_PREC, 1}, {"--batch", P_BATCH, 1}, {"--dot", P_DOT, 1},
    {"--svg", P_SVG, 1}, {"--tasks", P_TASKS, 0}, {"--task-target", P_TASK_TARGET, 1},
    {NULL, 0, 0}};

static void plan_switch(plan_args *a, int id)
{
    gr_plan_options *opt = &a->opt;
    switch (id) {
    case P_JSON: a->json = 1; break;
    case P_SINGLE_STREAM: opt->single_stream = 1; break;
    case P_FUSE_MAXPOOL: opt->fuse_maxpool = 1; break;
    case P_FUSE_QUANT_IN: opt->fuse_input_quantize = 1; break;
    case P_FUSE_DEQUANT_OUT: opt->fuse_output_dequantize = 1; break;
    case P_FUSE_IO: opt->fuse_input_quantize = opt->fuse_output_dequantize = 1; break;
    case P_NO_CONCAT: opt->concat_in_place = 0; break;
    case P_NO_INPLACE: opt->in_place = 0; break;
    case P_NO_REUSE: opt->no_reuse = 1; break;
    case P_DECODE_HEADS: opt->decode_heads = 1; break;
    case P_CALIBRATE: a->calibrate = 1; break;
    case P_TASKS: a->tasks = 1; break;
    default: break;
    }
}

static int plan_apply(void *ctx, int id, const char *name, const char *v, char *err,
                      size_t errlen)
{
    plan_args *a = ctx;
    const char *want = NULL;
    switch (id) {
    case P_MODEL: a->model = v; break;
    case P_CFG: a->cfg = v; break;
    case P_WEIGHTS: a->weights = v; break;
    case P_CALIB_IMAGES: a->calib_dir = v; break;
    case P_LAYER_PREC: a->layer_prec = v; break;
    case P_DOT: a->dot = v; break;
    case P_SVG: a->svg = v; break;
    case P_PREC:
        want = gr_precision_parse(v, &a->opt.precision) == GR_OK ? NULL
                                                                 : "fp32, fp16, int8 or auto";
        break;
    case P_DEVICE: want = gr_cli_parse_device(v, &a->device) ? NULL : "auto, cpu or gpu"; break;
    case P_BATCH:
        want = gr_cli_parse_int(v, 1, GR_MAX_BATCH, &a->opt.batch)
                   ? NULL : "an integer in 1..4096";
        break;
    case P_TASK_TARGET:
        want = gr_cli_parse_int(v, 1, 65536, &a->task_target) ? NULL : "an integer in 1..65536";
        break;
    default: plan_switch(a, id); break;
    }
    return want ? gr_cli_usage_error(err, errlen, "%s '%s' is not %s", name, v, want) : GR_EXIT_OK;
}

/* "3=fp16,7=fp32": layer index = precision; other layers keep --prec. */
static int parse_layer_prec(const char *text, gr_precision base, gr_precision **map, int n_layers)
{
    gr_precision *m = malloc((size_t)n_layers * sizeof *m + 1);
    if (!m)
        return 0;
    for (int i = 0; i < n_layers; i++)
        m[i] = base;
    const char *s = text;
    while (*s) {
        char *end;
        errno = 0;
        long index = strtol(s, &end, 10);
        if (errno || end == s || *end != '=' || index < 0 || index >= n_layers) {
            free(m);
            return 0;
        }
        s = end + 1;
        char name[8];
        size_t len = strcspn(s, ",");
        if (len == 0 || len >= sizeof name) {
            free(m);
            return 0;
        }
        memcpy(name, s, len);
        name[len] = '\0';
        if (gr_precision_parse(name, &m[index]) != GR_OK) {
            free(m);
            return 0;
        }
        s += len;
        if (*s == ',')
            s++;
    }
    *map = m;
    return 1;
}

/* --prec auto: the map an engine with GR_PREC_AUTO chooses (its notice on stderr), into *map. */
static gr_status auto_map(const char *model, const char *cfg, const char *weights,
                          const char *calib_dir, const gr_engine_options *flags,
                          gr_device device, gr_precision **map)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = cfg ? NULL : model;
    mo.cfg_path = cfg;
    mo.weights_path = weights;
    gr_model *m = NULL;
    GR_TRY(gr_model_load(&mo, &m));
    /* `shapes` calibrates on its own calibration set, as `graphrun eval` does. */
    char shapes_calib[4096];
    if (!calib_dir && !cfg && strcmp(model, "shapes") == 0) {
        gr_status st = gr_data_path("shapes-calib", shapes_calib, sizeof shapes_calib);
        if (st != GR_OK) {
            gr_model_destroy(m);
            return st;
        }
        calib_dir = shapes_calib;
    }
    char **paths = NULL;
    if (calib_dir && gr_cli_list_images(calib_dir, &paths) != GR_EXIT_OK) {
        gr_model_destroy(m);
        return gr_fail(GR_ERR_IO, "--calib-images %s: no images", calib_dir);
    }
    gr_engine_options eo;
    gr_cli_engine_options(flags, device, GR_PREC_AUTO, 1, &eo);
    eo.calib_images = (const char *const *)paths;
    gr_engine *e = NULL;
    gr_status st = gr_engine_build(m, &eo, &e);
    gr_cli_free_list(paths);
    int n = 0;
    const gr_precision *chosen = st == GR_OK ? gr_engine_layer_precision(e, &n) : NULL;
    if (chosen) {
        fprintf(stderr, "graphrun plan: %s\n", gr_engine_notice(e));
        *map = malloc((size_t)n * sizeof **map + 1);
        if (*map)
            memcpy(*map, chosen, (size_t)n * sizeof **map);
        else
            st = gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    gr_engine_destroy(e);
    gr_model_destroy(m);
    return st;
}

/* "precision map: L0 int8, L2 fp16, ..." of the plan's convolutions (one line), for a plan whose
 * layers differ in precision, or always (--prec auto). */
static void print_precision_map(const gr_plan *plan, int always, FILE *f)
{
    int mixed = 0, first_prec = -1;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->layer < 0 || (nd->kind != GR_OP_CONV && nd->kind != GR_OP_CONNECTED))
            continue;
        if (first_prec < 0)
            first_prec = (int)nd->prec;
        mixed |= (int)nd->prec != first_prec;
    }
    if (!mixed && !always)
        return;
    fprintf(f, "precision map:");
    const char *sep = " ";
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->layer < 0 || (nd->kind != GR_OP_CONV && nd->kind != GR_OP_CONNECTED))
            continue;
        fprintf(f, "%sL%d %s", sep, nd->layer, gr_precision_name(nd->prec));
        sep = ", ";
    }
    fprintf(f, "\n");
}

static gr_status write_file(const char *path, gr_status (*dump)(const gr_plan *, FILE *),
                            const gr_plan *plan)
{
    gr_memfile out; /* written whole by rename (base/bytes.h) */
    FILE *f = gr_memfile_open(&out, path);
    if (!f)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = dump(plan, f);
    if (st != GR_OK) {
        fclose(f);
        free(out.data);
        return st;
    }
    return gr_memfile_commit(&out, path, "plan dump");
}

/* A deterministic smooth test image in [0, 1] for --calibrate. */
static void synthetic_image(const gr_net *net, float *image)
{
    gr_rng rng;
    gr_rng_seed(&rng, 7);
    size_t plane = (size_t)net->h * (size_t)net->w;
    for (int c = 0; c < net->c; c++)
        for (int y = 0; y < net->h; y++)
            for (int x = 0; x < net->w; x++) {
                float base = 0.5f + 0.4f * (float)((x * (c + 1) + y * 3) % 64) / 64.0f - 0.2f;
                image[(size_t)c * plane + (size_t)y * net->w + x] =
                    base * 0.8f + 0.2f * gr_rng_uniform(&rng);
            }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Build the GPU engine of the same model and print its conv tactics. */
static gr_status show_tactics(const char *model, const char *cfg, const char *weights,
                              const gr_plan_options *opt, const gr_engine_options *flags)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = cfg ? NULL : model;
    mo.cfg_path = cfg;
    mo.weights_path = weights;
    gr_model *m = NULL;
    GR_TRY(gr_model_load(&mo, &m));
    gr_engine_options eo;
    gr_cli_engine_options(flags, GR_DEVICE_GPU, opt->precision, opt->batch, &eo);
    gr_engine *e = NULL;
    double start = now_ms();
    gr_status st = gr_engine_build(m, &eo, &e);
    double build_ms = now_ms() - start;
    gr_model_destroy(m);
    if (st != GR_OK)
        return st;
    for (const char *line = gr_engine_notice(e); *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "graphrun plan: %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    gr_tactic_stats ts;
    gr_engine_tactic_stats(e, &ts);
    printf("\nconv tactics on %s (%s, batch %d): engine build %.0f ms, tactic search %.0f ms, "
           "%d candidates timed, %d of %d convs from the timing cache\n",
           gr_engine_device_name(e), gr_precision_name(opt->precision), opt->batch, build_ms,
           ts.search_ms, ts.candidates, ts.cached, ts.convs);
    if (ts.rejected)
        printf("  %d candidates failed the numerics check against the automatic tactic (not "
               "used)\n", ts.rejected);
    gr_build_times bt;
    gr_engine_build_times(e, &bt);
    printf("  build: calibration/map %.0f ms, plan %.0f, weights %.0f, tactic search %.0f "
           "(%d candidates cut after one launch), micro-batch timing %.0f, capture %.0f\n",
           bt.resolve_ms, bt.plan_ms, bt.weights_ms, bt.tactic_ms, ts.cut, bt.micro_batch_ms,
           bt.capture_ms);
    const int micro = gr_engine_micro_batch(e);
    printf("  micro-batch: %d x %d images per run (docs/performance.md, \"Micro-batching\")\n",
           opt->batch / (micro > 0 ? micro : opt->batch), micro);
    if (gr_engine_tactic_count(e) == 0)
        printf("  none: %s\n", opt->precision == GR_PREC_FP32
                                   ? "fp32 algorithms are not listed (measured and counted "
                                     "above with the search on; else the rule: direct 3x3 "
                                     "kernel with its maxpool on narrow layers, 3xTF32 GEMM on "
                                     "sm_80+, else cuBLAS SGEMM; --f32-algo)"
                                   : "the tactic search is off (automatic tactics)");
    else
        printf("  layer  tactic            time us   auto us  speedup  candidates  timed on\n");
    for (int i = 0; i < gr_engine_tactic_count(e); i++) {
        gr_tactic_info t;
        gr_engine_tactic(e, i, &t);
        char timed[16];
        snprintf(timed, sizeof timed, "%d", t.candidates);
        printf("  %5d  %-16s %8.2f  %8.2f  %6.2fx  %-10s  %d images\n", t.layer, t.name, t.us,
               t.auto_us, t.us > 0.0 ? t.auto_us / t.us : 0.0, t.candidates ? timed : "cached",
               t.batch);
    }
    gr_engine_destroy(e);
    return GR_OK;
}

/* The per-layer precision map (--prec auto or --layer-prec) into a->opt; *usage set for a bad
 * combination or map (its line printed). */
static gr_status precision_map(plan_args *a, const gr_net *net, gr_precision **map, int *usage)
{
    gr_plan_options *opt = &a->opt;
    if (opt->precision == GR_PREC_AUTO && a->layer_prec) {
        *usage = usage_error("--layer-prec cannot be combined with --prec", "auto");
        return GR_OK;
    }
    if (opt->precision == GR_PREC_AUTO) {
        GR_TRY(auto_map(a->model, a->cfg, a->weights, a->calib_dir, &a->engine, a->device, map));
        int any_i8 = 0, any_f16 = 0;
        for (int l = 0; l < net->n_layers; l++) {
            any_i8 |= (*map)[l] == GR_PREC_INT8;
            any_f16 |= (*map)[l] == GR_PREC_FP16;
        }
        opt->precision = any_i8 ? GR_PREC_INT8 : any_f16 ? GR_PREC_FP16 : GR_PREC_FP32;
    } else if (a->layer_prec) {
        if (!parse_layer_prec(a->layer_prec, opt->precision, map, net->n_layers)) {
            *usage = usage_error("bad --layer-prec (expected I=fp32|fp16|int8,...)", a->layer_prec);
            return GR_OK;
        }
    }
    if (*map) {
        opt->layer_precision = *map;
        opt->n_layer_precision = net->n_layers;
    }
    return GR_OK;
}

/* int8 scales when the plan has none yet: --calibrate (a CPU run of the fp32 plan over a
 * synthetic image), or a range of 1. */
static gr_status plan_ranges(const gr_net *net, gr_plan *plan, int calibrate)
{
    if (plan->scales_ready)
        return GR_OK;
    float *ranges = calloc((size_t)net->n_layers + 1, sizeof *ranges);
    float *image = calibrate ? malloc((size_t)net->c * (size_t)net->h * (size_t)net->w *
                                      sizeof *image)
                             : NULL;
    float input_range = 1.0f;
    gr_status st = ranges && (image || !calibrate) ? GR_OK
                                                   : gr_fail(GR_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == GR_OK && calibrate) {
        synthetic_image(net, image);
        st = gr_plan_calibrate_ranges(net, image, 1, GR_CALIB_MAX, 0.0f, ranges, &input_range);
    } else {
        for (int l = 0; ranges && l < net->n_layers; l++)
            ranges[l] = 1.0f;
    }
    if (st == GR_OK)
        st = gr_plan_set_ranges(plan, ranges, input_range);
    free(image);
    free(ranges);
    return st;
}

/* The plan on stdout, the DOT/SVG files, and (--device gpu with one precision, as text) the GPU
 * engine's conv tactics (not for --prec auto: it says where the automatic search runs); with a
 * per-layer map, a "precision map:" line first. */
static gr_status show_tasks(const plan_args *a, const gr_plan *plan)
{
    gr_task_options opt;
    gr_task_options_default(&opt);
    if (a->task_target)
        opt.target_tasks = a->task_target;
    gr_task_graph *g = NULL;
    GR_TRY(gr_task_graph_build(plan, &opt, &g));
    gr_status st = a->json ? gr_task_graph_dump_json(g, plan, stdout)
                           : gr_task_graph_dump_text(g, plan, stdout);
    /* whether the dataflow executor could run it (docs/dataflow.md) */
    gr_df_program *p = NULL;
    if (st == GR_OK && !a->json) {
        gr_status built = gr_df_program_build(plan, g, NULL, &p);
        if (built == GR_OK)
            printf("dataflow executor: can run this plan (program of %zu bytes; --no-reuse "
                   "leaves RAW edges only)\n", p->bytes);
        else if (built == GR_ERR_UNSUPPORTED)
            printf("dataflow executor: cannot run this plan: %s\n", gr_last_error());
        else
            st = built;
    }
    gr_df_program_free(p);
    gr_task_graph_free(g);
    return st;
}

static gr_status show_plan(const plan_args *a, const gr_plan *plan, int has_map, int auto_prec)
{
    if (a->tasks)
        return show_tasks(a, plan);
    const int tactics = a->device == GR_DEVICE_GPU && !a->json && !a->layer_prec && !auto_prec;
    if (!a->json)
        print_precision_map(plan, has_map, stdout);
    GR_TRY(a->json ? gr_plan_dump_json(plan, stdout) : gr_plan_dump_text(plan, stdout));
    if (a->dot)
        GR_TRY(write_file(a->dot, gr_plan_dump_dot, plan));
    if (a->svg)
        GR_TRY(write_file(a->svg, gr_plan_dump_svg, plan));
    if (tactics)
        GR_TRY(show_tactics(a->model, a->cfg, a->weights, &a->opt, &a->engine));
    return GR_OK;
}

int gr_cli_plan(int argc, char **argv)
{
    plan_args a = {.model = "yolo", .device = GR_DEVICE_AUTO};
    gr_plan_options_default(&a.opt);
    gr_engine_options_default(&a.engine);
    gr_cli_parser parser = {.command = "graphrun plan", .own = plan_flags, .apply = plan_apply,
                            .ctx = &a, .engine = &a.engine, .commands = GR_CMD_PLAN};
    int rc = gr_cli_run_parser(&parser, argc, argv, plan_usage);
    if (rc >= 0)
        return rc;
    const char *inputs[] = {a.cfg, a.weights, a.engine.timing_cache};
    if ((rc = gr_cli_check_output("--dot", a.dot, 0, inputs, 3)) != GR_EXIT_OK ||
        (rc = gr_cli_check_output("--svg", a.svg, 0, inputs, 3)) != GR_EXIT_OK)
        return rc;
    const int auto_prec = a.opt.precision == GR_PREC_AUTO;
    gr_net *net = NULL;
    gr_plan *plan = NULL;
    gr_precision *map = NULL;
    int usage = GR_EXIT_OK;
    gr_status st = gr_net_open(a.model, a.cfg, a.weights, 1, &net);
    if (st == GR_OK)
        st = precision_map(&a, net, &map, &usage);
    if (st == GR_OK && usage == GR_EXIT_OK)
        st = gr_plan_build(net, &a.opt, &plan);
    if (plan && st == GR_OK)
        st = plan_ranges(net, plan, a.calibrate);
    if (plan && st == GR_OK)
        st = show_plan(&a, plan, map != NULL, auto_prec);
    int code = st != GR_OK ? fail(st) : usage;
    free(map);
    gr_plan_free(plan);
    gr_net_free(net);
    return code;
}
