/* Command-line parsing for every subcommand: one parser over a table of flags per command, so
 * --help, --version, an unknown option and a missing value read the same everywhere; and the
 * detect command's table. The parser (gr_cli_parse_flags, gr_cli_parse) is pure: no I/O, no
 * allocation, no exit, so the fuzzer can hammer it; gr_cli_run_parser prints its outcome. */
#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/results.h"

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
int gr_cli_usage_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return GR_EXIT_USAGE;
}

int gr_cli_parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return 0;
    *out = (int)v;
    return 1;
}

int gr_cli_parse_float(const char *s, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return 0;
    *out = v;
    return 1;
}

int gr_cli_parse_device(const char *s, gr_device *out)
{
    if (!strcmp(s, "auto")) *out = GR_DEVICE_AUTO;
    else if (!strcmp(s, "cpu")) *out = GR_DEVICE_CPU;
    else if (!strcmp(s, "gpu")) *out = GR_DEVICE_GPU;
    else return 0;
    return 1;
}

/* "gpu:" then "all" or ordinals separated by commas; the caller's list is left as it was unless
 * the whole value is valid. */
static int parse_gpu_list(const char *list, const char *s, gr_cli_options *o, char *err,
                          size_t errlen)
{
    if (!strcmp(list, "all")) {
        o->all_devices = 1;
        o->n_devices = 0;
        return GR_EXIT_OK;
    }
    int devices[GR_MAX_DEVICES], n = 0;
    if (!*list)
        return gr_cli_usage_error(err, errlen, "--device '%s': empty device list (gpu:all, gpu:N "
                                  "or gpu:N,M,...)", s);
    for (const char *p = list;; ) {
        size_t len = strcspn(p, ",");
        char item[16];
        if (len == 0 || len >= sizeof item)
            return gr_cli_usage_error(err, errlen, "--device '%s': entry %d is %s (a CUDA device "
                                      "ordinal, 0..%d)", s, n + 1, len ? "too long" : "empty",
                                      1023);
        memcpy(item, p, len);
        item[len] = '\0';
        if (n == GR_MAX_DEVICES)
            return gr_cli_usage_error(err, errlen, "--device '%s': more than %d devices", s,
                                      GR_MAX_DEVICES);
        if (!gr_cli_parse_int(item, 0, 1023, &devices[n]))
            return gr_cli_usage_error(err, errlen, "--device '%s': '%s' is not a CUDA device "
                                      "ordinal (0..1023)", s, item);
        for (int j = 0; j < n; j++)
            if (devices[j] == devices[n])
                return gr_cli_usage_error(err, errlen, "--device '%s': gpu %d given twice", s,
                                          devices[n]);
        n++;
        if (!p[len])
            break;
        p += len + 1;
    }
    memcpy(o->devices, devices, (size_t)n * sizeof devices[0]);
    o->n_devices = n;
    o->all_devices = 0;
    return GR_EXIT_OK;
}

int gr_cli_parse_device_list(const char *s, gr_cli_options *o, char *err, size_t errlen)
{
    if (gr_cli_parse_device(s, &o->device)) {
        o->n_devices = o->all_devices = 0;
        return GR_EXIT_OK;
    }
    if (strncmp(s, "gpu:", 4) != 0)
        return gr_cli_usage_error(err, errlen, "--device '%s' is not auto, cpu, gpu, gpu:all or "
                                  "gpu:N[,M...]", s);
    int rc = parse_gpu_list(s + 4, s, o, err, errlen);
    if (rc == GR_EXIT_OK)
        o->device = GR_DEVICE_GPU;
    return rc;
}

const char *gr_cli_device_text(const gr_cli_options *o, char *buf, size_t size)
{
    if (o->all_devices) {
        snprintf(buf, size, "gpu:all");
        return buf;
    }
    if (!o->n_devices) {
        snprintf(buf, size, "%s", o->device == GR_DEVICE_GPU ? "gpu" : o->device == GR_DEVICE_CPU
                                                                         ? "cpu" : "auto");
        return buf;
    }
    size_t used = (size_t)snprintf(buf, size, "gpu:");
    for (int i = 0; i < o->n_devices && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%d", i ? "," : "", o->devices[i]);
    return buf;
}

/* ---- the engine option flags: graphrun/options.def's rows ------------------------------- */

enum { K_SIZE, K_BOOL, K_INT, K_U64, K_FLOAT, K_ENUM, K_TOGGLE, K_STR, K_PTR };

typedef struct engine_row {
    const char *flag;    /* "--tf32", or NULL: no flag */
    const char *field;
    int kind;            /* K_* */
    size_t offset, size; /* in gr_engine_options */
    double lo, hi;       /* lo > hi: any value here, the library checks it */
    unsigned commands;   /* GR_CMD_* */
    const char *choices; /* "auto|on|off" (ENUM, TOGGLE), the word for 0 (INT), or NULL */
    const char *help;    /* value flags: the placeholder, a space, the text */
} engine_row;

#define ENGINE_ROW(field, type, kind, def, lo, hi, flag, cmds, choices, help)                    \
    {flag, #field, K_##kind, offsetof(gr_engine_options, field),                                  \
     sizeof(((gr_engine_options *)0)->field), (double)(lo), (double)(hi), cmds, choices, help},
static const engine_row engine_rows[] = {
#define GR_ENGINE_OPT ENGINE_ROW
#include "graphrun/options.def"
};
#undef ENGINE_ROW
#define N_ENGINE_ROWS ((int)(sizeof engine_rows / sizeof engine_rows[0]))
_Static_assert(sizeof engine_rows / sizeof engine_rows[0] <= 64, "engine_given has 64 bits");

/* The row whose flag (or its --no- form, *negated = 1, on/off rows only) is name[0..len). */
static int engine_row_of(const gr_cli_parser *p, const char *name, size_t len, int *negated)
{
    if (!p->engine)
        return -1;
    for (int r = 0; r < N_ENGINE_ROWS; r++) {
        const engine_row *e = &engine_rows[r];
        if (!e->flag || !(e->commands & p->commands))
            continue;
        size_t n = strlen(e->flag);
        if (len == n && strncmp(name, e->flag, len) == 0) {
            *negated = 0;
            return r;
        }
        if ((e->kind == K_BOOL || e->kind == K_TOGGLE) && len == n + 3 &&
            strncmp(name, "--no-", 5) == 0 && strncmp(name + 5, e->flag + 2, n - 2) == 0) {
            *negated = 1;
            return r;
        }
    }
    return -1;
}

/* The index of v among the '|'-separated names, or -1. */
static int choice_index(const char *choices, const char *v)
{
    size_t len = strlen(v);
    int k = 0;
    for (const char *c = choices; c && *c; k++) {
        size_t n = strcspn(c, "|");
        if (n == len && strncmp(c, v, n) == 0)
            return k;
        c += n + (c[n] == '|');
    }
    return -1;
}

/* "auto, on or off" from "auto|on|off". */
static void choices_text(const char *choices, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *c = choices; *c && used < size;) {
        size_t n = strcspn(c, "|");
        const char *sep = !used ? "" : c[n] ? ", " : " or ";
        used += (size_t)snprintf(out + used, size - used, "%s%.*s", sep, (int)n, c);
        c += n + (c[n] == '|');
    }
}

static int apply_engine_row(const engine_row *e, const char *v, gr_engine_options *eo, char *err,
                            size_t errlen)
{
    char *field = (char *)eo + e->offset;
    char want[160] = "";
    int i = 0;
    float x = 0.0f;
    switch (e->kind) {
    case K_BOOL:
        i = choice_index("off|on", v);
        if (i < 0)
            snprintf(want, sizeof want, "on or off");
        break;
    case K_ENUM:
    case K_TOGGLE:
        i = choice_index(e->choices, v);
        if (i < 0)
            choices_text(e->choices, want, sizeof want);
        break;
    case K_INT:
        if (e->choices && strcmp(v, e->choices) == 0)
            i = 0;
        else if (!gr_cli_parse_int(v, (long)e->lo, (long)e->hi, &i))
            snprintf(want, sizeof want, "%s%san integer in %.0f..%.0f",
                     e->choices ? e->choices : "", e->choices ? " or " : "", e->lo, e->hi);
        break;
    case K_FLOAT:
        if (!gr_cli_parse_float(v, e->lo <= e->hi ? (float)e->lo : -FLT_MAX,
                                e->lo <= e->hi ? (float)e->hi : FLT_MAX, &x))
            snprintf(want, sizeof want, e->lo <= e->hi ? "a number in [%g, %g]" : "a number",
                     e->lo, e->hi);
        break;
    case K_STR: memcpy(field, &v, sizeof v); return GR_EXIT_OK;
    default: return gr_cli_usage_error(err, errlen, "%s: no value of this kind", e->flag);
    }
    if (want[0])
        return gr_cli_usage_error(err, errlen, "%s '%s' is not %s", e->flag, v, want);
    if (e->kind == K_FLOAT)
        memcpy(field, &x, sizeof x);
    else
        memcpy(field, &i, sizeof i); /* int, and the enums: int-sized (tests/test_option_table.c) */
    return GR_EXIT_OK;
}

/* Row r's flag at argv[*i] (its value after '=' in eq, or NULL): the value taken as the row's
 * kind says. */
static int parse_engine_flag(gr_cli_parser *p, int r, int negated, const char *eq, int argc,
                             char **argv, int *i, char *err, size_t errlen)
{
    const engine_row *e = &engine_rows[r];
    const char *v = eq;
    if (e->kind == K_BOOL || e->kind == K_TOGGLE) {
        if (negated && eq)
            return gr_cli_usage_error(err, errlen, "option '--no-%s' takes no value",
                                      e->flag + 2);
        const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
        if (negated)
            v = "off";
        else if (!eq && next && next[0] != '-') /* no command takes a bare argument here */
            v = argv[++*i];
        else if (!eq)
            v = "on";
    } else if (!eq) {
        if (*i + 1 >= argc || !argv[*i + 1])
            return gr_cli_usage_error(err, errlen, "missing value for '%s'", e->flag);
        v = argv[++*i];
    }
    if (p->engine_given)
        *p->engine_given |= 1ull << r;
    return apply_engine_row(e, v, p->engine, err, errlen);
}

void gr_cli_engine_usage(FILE *f, unsigned commands)
{
    for (int r = 0; r < N_ENGINE_ROWS; r++) {
        const engine_row *e = &engine_rows[r];
        if (!e->flag || !(e->commands & commands))
            continue;
        char left[64], text[512];
        const char *help = e->help;
        if (e->kind == K_BOOL) {
            snprintf(left, sizeof left, "%s, --no-%s", e->flag, e->flag + 2);
            snprintf(text, sizeof text, "%s", help);
        } else if (e->kind == K_TOGGLE) {
            snprintf(left, sizeof left, "%s T", e->flag);
            snprintf(text, sizeof text, "%s; %s alone: on, --no-%s: off", help, e->flag,
                     e->flag + 2);
        } else {
            size_t n = strcspn(help, " ");
            snprintf(left, sizeof left, "%s %.*s", e->flag, (int)n, help);
            snprintf(text, sizeof text, "%s", help[n] ? help + n + 1 : "");
        }
        /* "  LEFT" padded to column 22 (a longer one: two spaces, or the text on the next line), the text
         * wrapped at 94 columns, continued at column 22. */
        int col = fprintf(f, "  %s", left);
        if (col <= 24)
            col += fprintf(f, "%*s", col <= 20 ? 22 - col : 2, "");
        else
            col = fprintf(f, "\n%22s", "") - 1;
        int line_start = 1;
        for (const char *w = text; *w;) {
            size_t n = strcspn(w, " ");
            if (!line_start && col + 1 + (int)n > 94) {
                col = fprintf(f, "\n%22s", "") - 1;
                line_start = 1;
            }
            col += fprintf(f, "%s%.*s", line_start ? "" : " ", (int)n, w);
            line_start = 0;
            w += n;
            while (*w == ' ')
                w++;
        }
        fputc('\n', f);
    }
}

const char *gr_cli_engine_given_flag(unsigned long long given, unsigned bits)
{
    for (int r = 0; r < N_ENGINE_ROWS; r++)
        if ((given >> r & 1) && (engine_rows[r].commands & bits) == bits)
            return engine_rows[r].flag;
    return NULL;
}

void gr_cli_engine_options(const gr_engine_options *flags, gr_device device, gr_precision precision,
                           int batch, gr_engine_options *eo)
{
    *eo = *flags;
    eo->struct_size = sizeof *eo;
    eo->device = device;
    eo->precision = precision;
    eo->batch = batch;
}

/* ---- the parser --------------------------------------------------------------------------- */

static const gr_cli_flag *find_flag(const gr_cli_parser *p, const char *name, size_t len)
{
    const gr_cli_flag *tables[2] = {p->own, p->shared};
    for (int t = 0; t < 2; t++)
        for (const gr_cli_flag *f = tables[t]; f && f->name; f++)
            if (strlen(f->name) == len && strncmp(f->name, name, len) == 0)
                return f;
    return NULL;
}

/* One argument at argv[*i] (advanced past a separate value). */
static int parse_one(gr_cli_parser *p, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *a = argv[*i];
    if (!a)
        return gr_cli_usage_error(err, errlen, "argument %d is NULL", *i);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        p->help = 1;
        return GR_EXIT_OK;
    }
    if (!strcmp(a, "--version")) {
        p->version = 1;
        return GR_EXIT_OK;
    }
    if (strncmp(a, "--", 2) != 0) {
        /* More values of a flag that takes several (--input a.jpg b.jpg: a shell glob) */
        if (p->several)
            return p->apply(p->ctx, p->several->id, p->several->name, a, err, errlen);
        return gr_cli_usage_error(err, errlen, "unexpected argument '%s' (options start with --)",
                                  a);
    }
    p->several = NULL;
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const gr_cli_flag *f = find_flag(p, a, len);
    int negated = 0, row = f ? -1 : engine_row_of(p, a, len, &negated);
    if (row >= 0)
        return parse_engine_flag(p, row, negated, eq ? eq + 1 : NULL, argc, argv, i, err, errlen);
    if (!f)
        return gr_cli_usage_error(err, errlen, "unknown option '%.*s' (see %s --help)",
                                  (int)(len > 64 ? 64 : len), a, p->command);
    if (!f->takes_value) {
        if (eq)
            return gr_cli_usage_error(err, errlen, "option '%s' takes no value", f->name);
        return p->apply(p->ctx, f->id, f->name, NULL, err, errlen);
    }
    const char *val = eq ? eq + 1 : NULL;
    if (!eq) {
        if (*i + 1 >= argc || !argv[*i + 1])
            return gr_cli_usage_error(err, errlen, "missing value for '%s'", f->name);
        val = argv[++*i];
    }
    p->several = f->takes_value == GR_CLI_SEVERAL_VALUES ? f : NULL;
    return p->apply(p->ctx, f->id, f->name, val, err, errlen);
}

int gr_cli_parse_flags(gr_cli_parser *p, int argc, char **argv, char *err, size_t errlen)
{
    err[0] = '\0';
    p->help = p->version = 0;
    p->several = NULL;
    for (int i = 1; i < argc; i++) {
        int rc = parse_one(p, argc, argv, &i, err, errlen);
        if (rc != GR_EXIT_OK)
            return rc;
    }
    return GR_EXIT_OK;
}

int gr_cli_run_parser(gr_cli_parser *p, int argc, char **argv, void (*usage)(FILE *))
{
    char err[512];
    int rc = gr_cli_parse_flags(p, argc, argv, err, sizeof err);
    if (rc != GR_EXIT_OK) {
        fprintf(stderr, "%s: %s\n", p->command, err);
        return rc;
    }
    if (p->help) {
        usage(stdout);
        return GR_EXIT_OK;
    }
    if (p->version) {
        printf("graphrun %s\n", gr_version());
        return GR_EXIT_OK;
    }
    return -1;
}

/* ---- `graphrun [detect]` (also the base of `graphrun compare`) --------------------------- */

/* The engine options' flags (--tf32, --calib, --split-k, ...) are graphrun/options.def's rows,
 * parsed above into gr_cli_options.engine. */
enum {
    F_JSON = 1, F_LIST_MODELS, F_NO_OUTPUT, F_FIND_OVERFLOW, F_EAGER, F_FAST_DECODE,
    F_STRICT_WEIGHTS, F_SAVE_CONF, F_FORMAT, F_MODEL, F_CFG, F_WEIGHTS, F_NAMES, F_OUTPUT,
    F_SAVE_OUTPUT, F_INPUT, F_SEED, F_DEVICE, F_PREC, F_BATCH, F_RUNS, F_THRESH, F_NMS,
    F_CALIB_IMAGES, F_INPUT_LIST, F_THREADS, F_ENGINE, F_INPUT_TYPE, F_DECODE, F_IO_TIMEOUT,
    F_LETTERBOX, F_STRETCH
};

const gr_cli_flag gr_cli_detect_flags[] = {
    {"--json", F_JSON, 0}, {"--list-models", F_LIST_MODELS, 0}, {"--no-output", F_NO_OUTPUT, 0},
    {"--find-overflow", F_FIND_OVERFLOW, 0}, {"--eager", F_EAGER, 0},
    {"--fast-decode", F_FAST_DECODE, 0}, {"--strict-weights", F_STRICT_WEIGHTS, 0},
    {"--save-conf", F_SAVE_CONF, 0}, {"--format", F_FORMAT, 1},
    {"--model", F_MODEL, 1}, {"--cfg", F_CFG, 1}, {"--weights", F_WEIGHTS, 1},
    {"--names", F_NAMES, 1}, {"--output", F_OUTPUT, 1}, {"--save-output", F_SAVE_OUTPUT, 1},
    {"--input", F_INPUT, GR_CLI_SEVERAL_VALUES}, {"--seed", F_SEED, 1}, {"--device", F_DEVICE, 1},
    {"--prec", F_PREC, 1}, {"--batch", F_BATCH, 1}, {"--runs", F_RUNS, 1},
    {"--thresh", F_THRESH, 1}, {"--nms", F_NMS, 1}, {"--calib-images", F_CALIB_IMAGES, 1},
    {"--input-list", F_INPUT_LIST, 1}, {"--threads", F_THREADS, 1}, {"--engine", F_ENGINE, 1},
    {"--input-type", F_INPUT_TYPE, 1}, {"--decode", F_DECODE, 1},
    {"--io-timeout", F_IO_TIMEOUT, 1}, {"--letterbox", F_LETTERBOX, 0}, {"--stretch", F_STRETCH, 0},
    {NULL, 0, 0}};

void gr_cli_options_default(gr_cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "yolo";
    o->seed = 1;
    o->device = GR_DEVICE_AUTO;
    o->precision = GR_PREC_FP32;
    o->batch = 1;
    o->thresh = 0.5f;
    o->nms = 0.45f;
    o->runs = 1;
    gr_engine_options_default(&o->engine);
    o->io_timeout = GR_CLI_IO_TIMEOUT_DEFAULT;
}

static int apply_switch(gr_cli_options *o, int id)
{
    switch (id) {
    case F_JSON: o->json = 1; break;
    case F_SAVE_CONF: o->save_conf = 1; break;
    case F_LIST_MODELS: o->list_models = 1; break;
    case F_NO_OUTPUT: o->output = ""; break;
    case F_FIND_OVERFLOW: o->find_overflow = 1; break;
    case F_EAGER: o->eager = 1; o->engine.use_cuda_graph = 0; break;
    case F_FAST_DECODE: o->fast_decode = 1; break;
    case F_STRICT_WEIGHTS: o->strict_weights = 1; break;
    case F_LETTERBOX: o->preprocess = GR_PREPROCESS_LETTERBOX; break;
    case F_STRETCH: o->preprocess = GR_PREPROCESS_STRETCH; break;
    default: return 0;
    }
    return 1;
}

static int apply_path(gr_cli_options *o, int id, const char *v)
{
    switch (id) {
    case F_MODEL: o->model = v; break;
    case F_CFG: o->cfg = v; break;
    case F_WEIGHTS: o->weights = v; break;
    case F_NAMES: o->names = v; break;
    case F_OUTPUT: o->output = v; break;
    case F_SAVE_OUTPUT: o->save_output = v; break;
    case F_CALIB_IMAGES: o->calib_images = v; break;
    case F_INPUT_LIST: o->input_list = v; break;
    case F_ENGINE: o->engine_file = v; break;
    default: return 0;
    }
    return 1;
}

static int parse_seed(const char *v, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-')
        return 0;
    *out = s;
    return 1;
}

/* A number or a name: the value's check, and its message when it fails. */
static int apply_number(gr_cli_options *o, int id, const char *v, char *err, size_t errlen)
{
    const char *want = NULL;
    switch (id) {
    case F_THREADS:
        want = gr_cli_parse_int(v, 1, 1024, &o->threads)
                   ? NULL : "an integer in 1..1024";
        break;
    case F_BATCH:
        want = gr_cli_parse_int(v, 1, GR_MAX_BATCH_CLI, &o->batch)
                   ? NULL : "an integer in 1..4096";
        break;
    case F_RUNS:
        want = gr_cli_parse_int(v, 1, 1000000, &o->runs) ? NULL : "an integer in 1..1000000";
        o->runs_given = 1;
        break;
    case F_THRESH:
        want = gr_cli_parse_float(v, 0.0f, 1.0f, &o->thresh)
                   ? NULL : "a number in [0, 1]";
        break;
    case F_NMS:
        want = gr_cli_parse_float(v, 0.0f, 1.0f, &o->nms)
                   ? NULL : "a number in [0, 1]";
        break;
    case F_IO_TIMEOUT:
        want = gr_cli_parse_float(v, 0.0f, 86400.0f, &o->io_timeout)
                   ? NULL : "a number of seconds in [0, 86400] (0: no timeout)";
        break;
    case F_SEED: want = parse_seed(v, &o->seed) ? NULL : "a non-negative integer"; break;
    case F_DEVICE: return gr_cli_parse_device_list(v, o, err, errlen);
    case F_PREC:
        want = gr_precision_parse(v, &o->precision) == GR_OK
                   ? NULL : "fp32, fp16, int8 or auto";
        break;
    case F_INPUT_TYPE:
        o->input_type = strcmp(v, "auto") == 0    ? GR_CLI_INPUT_AUTO
                        : strcmp(v, "image") == 0 ? GR_CLI_INPUT_IMAGE
                        : strcmp(v, "video") == 0 ? GR_CLI_INPUT_VIDEO
                                                  : -1;
        want = o->input_type >= 0 ? NULL : "auto, image or video";
        break;
    case F_DECODE:
        o->decode = strcmp(v, "auto") == 0  ? GR_CLI_DECODE_AUTO
                    : strcmp(v, "cpu") == 0 ? GR_CLI_DECODE_CPU
                    : strcmp(v, "gpu") == 0 ? GR_CLI_DECODE_GPU
                                            : -1;
        want = o->decode >= 0 ? NULL : "auto, cpu or gpu";
        break;
    default: return gr_cli_usage_error(err, errlen, "option %d has no handler", id);
    }
    if (!want)
        return GR_EXIT_OK;
    return gr_cli_usage_error(err, errlen, "%s '%s' is not %s", gr_cli_flag_name(id), v, want);
}

const char *gr_cli_flag_name(int id)
{
    for (const gr_cli_flag *f = gr_cli_detect_flags; f->name; f++)
        if (f->id == id)
            return f->name;
    return "?";
}

int gr_cli_detect_apply(void *ctx, int id, const char *name, const char *value, char *err,
                        size_t errlen)
{
    (void)name;
    gr_cli_options *o = ctx;
    if (id > 0 && id < 64)
        o->given |= 1ull << id;
    if (((id == F_LETTERBOX && (o->given >> F_STRETCH & 1)) ||
         (id == F_STRETCH && (o->given >> F_LETTERBOX & 1))))
        return gr_cli_usage_error(err, errlen, "--letterbox and --stretch contradict each other");
    if (!value) {
        if (apply_switch(o, id))
            return GR_EXIT_OK;
        return gr_cli_usage_error(err, errlen, "option %d has no handler", id);
    }
    if (apply_path(o, id, value))
        return GR_EXIT_OK;
    if (id == F_FORMAT) {
        gr_result_format f;
        if (!gr_result_format_parse(value, &f))
            return gr_cli_usage_error(err, errlen, "--format '%s' is not %s", value,
                                      GR_RESULT_FORMAT_CHOICES);
        o->format = (int)f;
        return GR_EXIT_OK;
    }
    if (id == F_INPUT) {
        if (o->n_inputs >= GR_CLI_MAX_INPUTS)
            return gr_cli_usage_error(err, errlen, "too many --input files (at most %d): give "
                                      "their folder (--input DIR) or a list of them "
                                      "(--input-list FILE)", GR_CLI_MAX_INPUTS);
        o->inputs[o->n_inputs++] = value;
        return GR_EXIT_OK;
    }
    return apply_number(o, id, value, err, errlen);
}

gr_precision gr_cli_engine_precision(const gr_engine *engine)
{
    int n = 0, seen[GR_PREC_INT8 + 1] = {0};
    const gr_precision *map = gr_engine_layer_precision(engine, &n);
    for (int i = 0; map && i < n; i++)
        seen[map[i]] = 1;
    if (seen[GR_PREC_INT8] && seen[GR_PREC_FP16])
        return GR_PREC_AUTO;
    return seen[GR_PREC_INT8] ? GR_PREC_INT8 : seen[GR_PREC_FP16] ? GR_PREC_FP16 : GR_PREC_FP32;
}

/* The flags a saved engine fixes and no command line can change: these, and the engine option
 * rows marked GR_CMD_FIXED (graphrun/options.def). */
static const int engine_fixed_flags[] = {F_WEIGHTS, F_NAMES, F_SEED, F_STRICT_WEIGHTS,
                                         F_CALIB_IMAGES};

static int given(const gr_cli_options *o, int id) { return (o->given >> id) & 1; }

int gr_cli_check_engine_flags(const gr_cli_options *o, const gr_engine *engine)
{
    const char *file = o->engine_file;
    const char *fixed = gr_cli_engine_given_flag(o->engine_given, GR_CMD_FIXED);
    for (size_t k = 0; !fixed && k < sizeof engine_fixed_flags / sizeof engine_fixed_flags[0]; k++)
        if (given(o, engine_fixed_flags[k]))
            fixed = gr_cli_flag_name(engine_fixed_flags[k]);
    if (fixed) {
        fprintf(stderr, "graphrun: %s has no effect with --engine: %s fixes it (rebuild the "
                        "engine with graphrun build)\n", fixed, file);
        return GR_EXIT_USAGE;
    }
    gr_model_info info;
    gr_model_get_info(gr_engine_model(engine), &info);
    gr_tensor_desc in;
    gr_engine_input_desc(engine, &in);
    gr_precision prec = gr_cli_engine_precision(engine);
    const char *name = o->cfg ? strrchr(o->cfg, '/') ? strrchr(o->cfg, '/') + 1 : o->cfg : o->model;
    gr_device dev = gr_engine_device(engine);
    char flag[96] = "", is[96] = "";
    if ((given(o, F_MODEL) || given(o, F_CFG)) && strcmp(name, info.name) != 0) {
        snprintf(flag, sizeof flag, "%s %.80s", o->cfg ? "--cfg" : "--model", name);
        snprintf(is, sizeof is, "its model is %.60s", info.name);
    } else if (given(o, F_PREC) && o->precision != prec) {
        snprintf(flag, sizeof flag, "--prec %s", gr_precision_name(o->precision));
        snprintf(is, sizeof is, "it is %s", gr_precision_name(prec));
    } else if (given(o, F_BATCH) && o->batch != in.n) {
        snprintf(flag, sizeof flag, "--batch %d", o->batch);
        snprintf(is, sizeof is, "its batch is %d", in.n);
    } else if (given(o, F_DEVICE) && o->device != GR_DEVICE_AUTO && o->device != dev) {
        snprintf(flag, sizeof flag, "--device %s", o->device == GR_DEVICE_GPU ? "gpu" : "cpu");
        snprintf(is, sizeof is, "it runs on the %s", dev == GR_DEVICE_GPU ? "GPU" : "CPU");
    } else if (o->preprocess != GR_PREPROCESS_AUTO &&
               o->preprocess != gr_model_preprocess(gr_engine_model(engine))) {
        snprintf(flag, sizeof flag, "--%s", gr_preprocess_name(o->preprocess));
        snprintf(is, sizeof is, "its input is made by %s",
                 gr_preprocess_name(gr_model_preprocess(gr_engine_model(engine))));
    }
    if (!flag[0])
        return GR_EXIT_OK;
    fprintf(stderr, "graphrun: %s contradicts --engine %s: %s (leave the flag out, or rebuild the "
                    "engine with graphrun build)\n", flag, file, is);
    return GR_EXIT_USAGE;
}

/* Here rather than in tools/results.c: the parser stands alone (the fuzzer links it alone). */
static const char *const format_names[] = {"default", "json", "jsonl", "coco", "yolo-txt", "csv",
                                           "text"};

int gr_result_format_parse(const char *s, gr_result_format *out)
{
    for (int k = GR_FORMAT_JSON; k <= GR_FORMAT_TEXT; k++)
        if (s && strcmp(s, format_names[k]) == 0) {
            *out = (gr_result_format)k;
            return 1;
        }
    return 0;
}

const char *gr_result_format_name(gr_result_format f)
{
    return f >= GR_FORMAT_DEFAULT && f <= GR_FORMAT_TEXT ? format_names[f] : "?";
}

int gr_cli_check_format(gr_cli_options *o, char *err, size_t errlen)
{
    if (o->json && o->format && o->format != GR_FORMAT_JSON)
        return gr_cli_usage_error(err, errlen, "--json and --format %s ask for two formats",
                                  gr_result_format_name((gr_result_format)o->format));
    if (o->json)
        o->format = GR_FORMAT_JSON;
    o->json = o->format == GR_FORMAT_JSON;
    if (o->format == GR_FORMAT_YOLO_TXT && (!o->output || !o->output[0]))
        return gr_cli_usage_error(err, errlen, "--format yolo-txt writes one label file per "
                                  "image: give their folder as --output DIR");
    if (o->save_conf && o->format != GR_FORMAT_YOLO_TXT)
        return gr_cli_usage_error(err, errlen, "--save-conf applies to --format yolo-txt only");
    return GR_EXIT_OK;
}

int gr_cli_parse(int argc, char **argv, gr_cli_options *o, char *err, size_t errlen)
{
    gr_cli_options_default(o);
    gr_cli_parser p = {.command = "graphrun", .shared = gr_cli_detect_flags,
                       .apply = gr_cli_detect_apply, .ctx = o, .engine = &o->engine,
                       .commands = GR_CMD_DETECT, .engine_given = &o->engine_given};
    int rc = gr_cli_parse_flags(&p, argc, argv, err, errlen);
    o->help = p.help;
    o->version = p.version;
    return rc == GR_EXIT_OK ? gr_cli_check_format(o, err, errlen) : rc;
}
