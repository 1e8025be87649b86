/* CLI helpers shared by `graphrun detect` and `graphrun compare`: loading the model, the
 * calibration image folder, the calibration progress bar, the non-finite output report, and a
 * layer-by-layer CPU trace of a plan (where --find-overflow and --per-layer see every tensor). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "planner/plan.h"
#include "tools/cli.h"

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot &&
           (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void gr_cli_free_list(char **paths)
{
    for (char **p = paths; p && *p; p++)
        free(*p);
    free(paths);
}

int gr_cli_list_images(const char *dir, char ***paths)
{
    *paths = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "graphrun: --calib-images %s: %s\n", dir, strerror(errno));
        return GR_EXIT_INPUT;
    }
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    for (struct dirent *ent; list && (ent = readdir(d));) {
        if (!is_image_name(ent->d_name))
            continue;
        if (n + 1 >= cap) {
            char **grown = realloc(list, (cap *= 2) * sizeof *list);
            if (!grown) {
                list[n] = NULL;
                gr_cli_free_list(list);
                list = NULL;
                break;
            }
            list = grown;
        }
        size_t len = strlen(dir) + strlen(ent->d_name) + 2;
        if (!(list[n] = malloc(len))) {
            gr_cli_free_list(list);
            list = NULL;
            break;
        }
        snprintf(list[n++], len, "%s/%s", dir, ent->d_name);
        list[n] = NULL;
    }
    closedir(d);
    if (!list) {
        fprintf(stderr, "graphrun: out of memory listing %s\n", dir);
        return GR_EXIT_OOM;
    }
    list[n] = NULL;
    if (n == 0) {
        free(list);
        fprintf(stderr, "graphrun: --calib-images %s: no .jpg, .jpeg or .png file in it\n", dir);
        return GR_EXIT_INPUT;
    }
    qsort(list, n, sizeof *list, cmp_str); /* the same set in the same order every time */
    *paths = list;
    return GR_EXIT_OK;
}

static void progress_bar(int done, int total, void *user)
{
    (void)user;
    enum { WIDTH = 30 };
    int filled = (int)((long)done * WIDTH / total);
    fprintf(stderr, "\rcalibrating [%.*s%*s] %d/%d", filled, "##############################",
            WIDTH - filled, "", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

void gr_cli_calib_options(const gr_cli_options *o, const char *const *images,
                          gr_engine_options *eo)
{
    eo->calib_method = o->calib_method;
    eo->calib_percentile = o->calib_percentile;
    eo->calib_images = images;
    eo->calib_cache = o->calib_cache;
    eo->calib_device = o->calib_device;
    eo->max_nrmse = o->max_nrmse;
    if (isatty(2))
        eo->calib_progress = progress_bar;
}

void gr_cli_print_notices(const gr_engine *engine)
{
    for (const char *line = gr_engine_notice(engine); *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "graphrun: %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
}

int gr_cli_report_nonfinite(const gr_engine *engine, const char *what)
{
    int bad_outputs = 0;
    for (int k = 0; k < gr_engine_output_count(engine); k++) {
        size_t bad = 0;
        gr_tensor_desc d;
        if (gr_engine_output_nonfinite(engine, k, &bad) != GR_OK || bad == 0)
            continue;
        gr_engine_output_desc(engine, k, &d);
        size_t n = (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
        fprintf(stderr,
                "graphrun: %s: output %d holds %zu non-finite values (NaN/Inf) of %zu: activations "
                "overflow; use --prec fp32 or int8 (--find-overflow names the first layer)\n",
                what, k, bad, n);
        bad_outputs++;
    }
    return bad_outputs;
}

gr_status gr_cli_load_model(const gr_cli_options *o, gr_model **model)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = o->cfg ? NULL : o->model;
    mo.cfg_path = o->cfg;
    mo.weights_path = o->weights;
    mo.seed = o->seed;
    return gr_model_load(&mo, model);
}

gr_status gr_cli_load_net(const gr_cli_options *o, gr_net **net)
{
    GR_TRY(o->cfg ? gr_net_parse_file(o->cfg, net) : gr_net_builtin(o->model, net));
    gr_status st = o->weights ? gr_net_load_weights(*net, o->weights)
                              : gr_net_synthesize_weights(*net, o->seed);
    if (st != GR_OK) {
        gr_net_free(*net);
        *net = NULL;
    }
    return st;
}

typedef struct trace_state {
    const gr_plan *plan;
    gr_cli_layer_fn fn;
    void *user;
    float *values;
    size_t cap;
    int stopped;
    gr_status status;
} trace_state;

static void trace_node(const gr_plan_exec *ex, int node, void *user)
{
    trace_state *ts = user;
    const gr_plan_node *nd = &ts->plan->nodes[node];
    if (ts->stopped || nd->output < 0 || nd->layer < 0)
        return;
    const gr_plan_tensor *t = &ts->plan->tensors[nd->output];
    if (t->layer != nd->layer)
        return; /* a planner-inserted conversion's output */
    size_t n = (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
    if (n > ts->cap) {
        float *grown = realloc(ts->values, n * sizeof *grown);
        if (!grown) {
            ts->status = gr_fail(GR_ERR_OUT_OF_MEMORY, "layer trace: out of memory");
            ts->stopped = 1;
            return;
        }
        ts->values = grown;
        ts->cap = n;
    }
    gr_plan_exec_read_tensor(ex, nd->output, ts->values);
    ts->stopped = ts->fn(nd->layer, nd->kind, ts->values, n, ts->user);
}

gr_status gr_cli_trace_layers(const gr_net *net, gr_precision prec, const float *layer_range,
                              float input_range, const float *input, gr_cli_layer_fn fn,
                              void *user)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.input_u8 = 0;
    gr_plan *plan = NULL;
    gr_plan_exec *ex = NULL;
    GR_TRY(gr_plan_build(net, &opt, &plan));
    gr_status st = prec == GR_PREC_INT8 ? gr_plan_set_ranges(plan, layer_range, input_range) : GR_OK;
    if (st == GR_OK)
        st = gr_plan_exec_create(plan, 0, &ex);
    trace_state ts = {.plan = plan, .fn = fn, .user = user};
    if (st == GR_OK) {
        gr_plan_exec_set_hook(ex, trace_node, &ts);
        st = gr_plan_execute(ex, input);
    }
    if (st == GR_OK)
        st = ts.status;
    free(ts.values);
    gr_plan_exec_destroy(ex);
    gr_plan_free(plan);
    return st;
}
