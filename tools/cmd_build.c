/* `graphrun build`: build an engine once - calibration, tactic search, everything - and save it
 * (runtime.h, "saved engines"), so later runs start from the file with --engine FILE. It takes the
 * flags that shape an engine, as detect does, and -o / --output FILE for the engine file. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/cli.h"

static void build_usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun build [--model NAME | --cfg FILE --weights FILE] [--prec P] "
            "[--batch N] -o FILE\n"
            "  Build an engine (calibration and tactic search included) and save it to FILE;\n"
            "  later commands load it with --engine FILE, skipping both.\n"
            "  -o, --output FILE   the engine file to write: a new file renamed over FILE (its\n"
            "                      mode kept; a link is written through; a device or FIFO is\n"
            "                      refused, exit 3)\n");
    gr_cli_engine_usage(f, GR_CMD_BUILD);
    fprintf(f,
            "  and the engine flags of graphrun detect: --model --cfg --weights --names --seed\n"
            "  --device --prec --batch --tf32 --fp16-accumulate --calib --calib-percentile\n"
            "  --calib-images --calib-cache --calib-device --max-nrmse --timing-cache\n"
            "  --tactic-search --no-tactic-search --f32-algo --split-k --pdl --gemm-tactic\n"
            "  --strict-weights\n"
            "A GPU engine loads only on the same GPU model, CUDA runtime and driver; a CPU\n"
            "engine anywhere (docs/errors.md, \"Saved engines\"). A loaded engine file stays\n"
            "mapped: deploy a new one by rename (build -o, mv, install), never by cp over the\n"
            "old one (a running graphrun then stops: 'rewritten in place', exit 3).\n");
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Flags of detect that make no sense for a build. */
static int refuse_run_flags(const gr_cli_options *o)
{
    const char *flag = o->engine_file ? "--engine" : o->n_inputs ? "--input"
                       : o->input_list ? "--input-list" : o->save_output ? "--save-output"
                       : o->json ? "--json" : NULL;
    if (!flag && o->output && !o->output[0])
        flag = "--no-output";
    if (flag) {
        fprintf(stderr, "graphrun build: %s is not a build option (see graphrun build --help)\n",
                flag);
        return GR_EXIT_USAGE;
    }
    if (!o->output) {
        fprintf(stderr, "graphrun build: -o FILE is required (the engine file to write)\n");
        return GR_EXIT_USAGE;
    }
    return GR_EXIT_OK;
}

static void report(const gr_cli_options *o, const gr_engine *engine, const gr_model_info *info,
                   double seconds)
{
    struct stat sb;
    double mb = stat(o->output, &sb) == 0 ? (double)sb.st_size / 1e6 : 0.0;
    gr_tactic_stats ts;
    gr_engine_tactic_stats(engine, &ts);
    printf("graphrun build: %s: model %s, %s, batch %d, %s, %d tactic%s (%d searched, %d cached); "
           "built in %.2f s, %.1f MB\n", o->output, info->name, gr_precision_name(o->precision),
           o->batch, gr_engine_device_name(engine), ts.convs, ts.convs == 1 ? "" : "s",
           ts.searched, ts.cached, seconds, mb);
}

int gr_cli_build(int argc, char **argv)
{
    /* -o is the one short flag: the shared parser reads --output. */
    char output_flag[] = "--output";
    for (int i = 1; i < argc; i++)
        if (argv[i] && strcmp(argv[i], "-o") == 0)
            argv[i] = output_flag;
    gr_cli_options o;
    gr_cli_options_default(&o);
    gr_cli_parser p = {.command = "graphrun build", .shared = gr_cli_detect_flags,
                       .apply = gr_cli_detect_apply, .ctx = &o, .engine = &o.engine,
                       .commands = GR_CMD_DETECT | GR_CMD_BUILD, .engine_given = &o.engine_given};
    int rc = gr_cli_run_parser(&p, argc, argv, build_usage);
    if (rc >= 0)
        return rc;
    rc = refuse_run_flags(&o);
    const char *inputs[] = {o.cfg, o.weights, o.names, o.engine.calib_cache, o.engine.timing_cache};
    if (rc == GR_EXIT_OK) /* the engine file must not replace what it is built from */
        rc = gr_cli_check_output("-o", o.output, 0, inputs, 5);
    if (rc != GR_EXIT_OK)
        return rc;
    gr_model *model = NULL;
    gr_engine *engine = NULL;
    gr_model_info info;
    double start = wall_s();
    rc = gr_cli_open(&o, &model, &engine, &info);
    double seconds = wall_s() - start;
    if (rc == GR_EXIT_OK) {
        gr_status st = gr_engine_save(engine, o.output);
        rc = st == GR_OK ? GR_EXIT_OK : gr_cli_fail(st, "saving the engine");
    }
    if (rc == GR_EXIT_OK)
        report(&o, engine, &info, seconds);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
    return rc;
}
