/* Command-line parsing for `graphrun [detect]`. Pure: no I/O, no allocation, no exit, so the
 * fuzzer can hammer it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

int gr_cli_exit_code(gr_status st)
{
    switch (st) {
    case GR_OK: return GR_EXIT_OK;
    case GR_ERR_INVALID_ARGUMENT: return GR_EXIT_USAGE;
    case GR_ERR_IO:
    case GR_ERR_PARSE:
    case GR_ERR_UNSUPPORTED:
    case GR_ERR_LIMIT: return GR_EXIT_INPUT;
    case GR_ERR_NO_DEVICE: return GR_EXIT_NO_DEVICE;
    case GR_ERR_OUT_OF_MEMORY: return GR_EXIT_OOM;
    default: return GR_EXIT_FAILURE;
    }
}

/* The message quotes the user's arguments: control characters (a newline in an argument) become
 * '?' so that it stays one line. */
static int usage_error(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    for (char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return GR_EXIT_USAGE;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static int parse_float(const char *s, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return 0;
    *out = v;
    return 1;
}

int gr_cli_parse(int argc, char **argv, gr_cli_options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->model = "yolo";
    o->seed = 1;
    o->device = GR_DEVICE_AUTO;
    o->precision = GR_PREC_FP32;
    o->tactic_search = -1;
    o->batch = 1;
    o->thresh = 0.5f;
    o->nms = 0.45f;
    o->runs = 1;
    o->calib_method = GR_CALIB_MAX;
    o->calib_percentile = 99.99f;
    o->max_nrmse = GR_MAX_NRMSE_DEFAULT;
    err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!a)
            return usage_error(err, errlen, "argument %s%s is NULL", "", "");
        /* Flags without a value. */
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = 1; continue; }
        if (!strcmp(a, "--version")) { o->version = 1; continue; }
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "--list-models")) { o->list_models = 1; continue; }
        if (!strcmp(a, "--no-output")) { o->output = ""; continue; }
        if (!strcmp(a, "--tf32")) { o->tf32 = 1; continue; }
        if (!strcmp(a, "--fp16-accumulate")) { o->fp16_accumulate = 1; continue; }
        if (!strcmp(a, "--find-overflow")) { o->find_overflow = 1; continue; }
        if (!strcmp(a, "--eager")) { o->eager = 1; continue; }
        if (!strcmp(a, "--fast-decode")) { o->fast_decode = 1; continue; }
        if (!strcmp(a, "--no-tactic-search")) { o->tactic_search = 0; continue; }
        if (!strcmp(a, "--tactic-search")) { o->tactic_search = 1; continue; }
        /* Options with a value: --opt VALUE or --opt=VALUE. */
        static const char *const with_value[] = {
            "--model", "--cfg", "--weights", "--names", "--output", "--save-output", "--input",
            "--seed", "--device", "--prec", "--batch", "--runs", "--thresh", "--nms", "--calib-cache",
            "--calib", "--calib-percentile", "--calib-images", "--calib-device", "--input-list",
            "--threads", "--max-nrmse", "--timing-cache", "--f32-algo", "--split-k", "--pdl", NULL};
        const char *val = NULL;
        char name[32];
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0)
            return usage_error(err, errlen, "unexpected argument '%s'%s (options start with --)", a, "");
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name)
            return usage_error(err, errlen, "unknown option '%.40s'%s (see --help)", a, "");
        memcpy(name, a, len);
        name[len] = '\0';
        int known = 0;
        for (int k = 0; with_value[k] && !known; k++)
            known = strcmp(name, with_value[k]) == 0;
        if (!known)
            return usage_error(err, errlen, "unknown option '%s'%s (see --help)", name, "");
        if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc || !argv[i + 1])
                return usage_error(err, errlen, "option %s needs a value%s", name, "");
            val = argv[++i];
        }
        long l;
        if (!strcmp(name, "--model")) o->model = val;
        else if (!strcmp(name, "--cfg")) o->cfg = val;
        else if (!strcmp(name, "--weights")) o->weights = val;
        else if (!strcmp(name, "--names")) o->names = val;
        else if (!strcmp(name, "--output")) o->output = val;
        else if (!strcmp(name, "--save-output")) o->save_output = val;
        else if (!strcmp(name, "--calib-cache")) o->calib_cache = val;
        else if (!strcmp(name, "--calib-images")) o->calib_images = val;
        else if (!strcmp(name, "--timing-cache")) o->timing_cache = val;
        else if (!strcmp(name, "--calib")) {
            if (gr_calib_method_parse(val, &o->calib_method) != GR_OK)
                return usage_error(err, errlen, "--calib '%s' is not max, percentile, entropy or mse%s",
                                   val, "");
        } else if (!strcmp(name, "--f32-algo")) {
            if (gr_f32_algo_parse(val, &o->f32_algo) != GR_OK)
                return usage_error(err, errlen, "--f32-algo '%s' is not auto, sgemm, tf32x3, "
                                   "implicit or direct3x3%s", val, "");
        } else if (!strcmp(name, "--split-k") || !strcmp(name, "--pdl")) {
            if (gr_toggle_parse(val, !strcmp(name, "--pdl") ? &o->pdl : &o->f32_split_k) != GR_OK)
                return usage_error(err, errlen, "%s '%s' is not auto, on or off", name, val);
        } else if (!strcmp(name, "--calib-percentile")) {
            if (!parse_float(val, 50.0f, 100.0f, &o->calib_percentile) || o->calib_percentile == 50.0f)
                return usage_error(err, errlen, "--calib-percentile '%s' is not a number in (50, 100]%s",
                                   val, "");
        } else if (!strcmp(name, "--max-nrmse")) {
            if (!parse_float(val, 0.0f, 1.0f, &o->max_nrmse))
                return usage_error(err, errlen, "--max-nrmse '%s' is not a number in [0, 1]%s", val,
                                   "");
        } else if (!strcmp(name, "--input-list")) o->input_list = val;
        else if (!strcmp(name, "--threads")) {
            if (!parse_long(val, 1, 1024, &l))
                return usage_error(err, errlen, "--threads '%s' is not an integer in 1..%s", val, "1024");
            o->threads = (int)l;
        }
        else if (!strcmp(name, "--input")) {
            if (o->n_inputs >= GR_CLI_MAX_INPUTS)
                return usage_error(err, errlen, "too many --input files (at most %s)%s", "64", "");
            o->inputs[o->n_inputs++] = val;
        } else if (!strcmp(name, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-')
                return usage_error(err, errlen, "--seed '%s' is not a non-negative integer%s", val, "");
            o->seed = v;
        } else if (!strcmp(name, "--device")) {
            if (!strcmp(val, "auto")) o->device = GR_DEVICE_AUTO;
            else if (!strcmp(val, "cpu")) o->device = GR_DEVICE_CPU;
            else if (!strcmp(val, "gpu")) o->device = GR_DEVICE_GPU;
            else return usage_error(err, errlen, "--device '%s' is not auto, cpu or gpu%s", val, "");
        } else if (!strcmp(name, "--calib-device")) {
            if (!strcmp(val, "auto")) o->calib_device = GR_DEVICE_AUTO;
            else if (!strcmp(val, "cpu")) o->calib_device = GR_DEVICE_CPU;
            else if (!strcmp(val, "gpu")) o->calib_device = GR_DEVICE_GPU;
            else return usage_error(err, errlen, "--calib-device '%s' is not auto, cpu or gpu%s", val, "");
        } else if (!strcmp(name, "--prec")) {
            if (gr_precision_parse(val, &o->precision) != GR_OK)
                return usage_error(err, errlen, "--prec '%s' is not fp32, fp16, int8 or auto%s", val,
                                   "");
        } else if (!strcmp(name, "--batch")) {
            if (!parse_long(val, 1, GR_MAX_BATCH_CLI, &l))
                return usage_error(err, errlen, "--batch '%s' is not an integer in 1..%s", val, "4096");
            o->batch = (int)l;
        } else if (!strcmp(name, "--runs")) {
            if (!parse_long(val, 1, 1000000, &l))
                return usage_error(err, errlen, "--runs '%s' is not an integer in 1..%s", val, "1000000");
            o->runs = (int)l;
        } else if (!strcmp(name, "--thresh")) {
            if (!parse_float(val, 0.0f, 1.0f, &o->thresh))
                return usage_error(err, errlen, "--thresh '%s' is not a number in [0, 1]%s", val, "");
        } else if (!strcmp(name, "--nms")) {
            if (!parse_float(val, 0.0f, 1.0f, &o->nms))
                return usage_error(err, errlen, "--nms '%s' is not a number in [0, 1]%s", val, "");
        } else {
            return usage_error(err, errlen, "unknown option '%s'%s (see --help)", name, "");
        }
    }
    return GR_EXIT_OK;
}
