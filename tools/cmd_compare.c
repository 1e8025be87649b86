/* `graphrun compare`: the same images through fp32 and the reduced precisions (fp16, and int8 once
 * per calibration method), against fp32: NRMSE per output head (sqrt(mean((x - y)^2)) /
 * (max(y) - min(y)), y = fp32, over every input), max abs error, detection agreement (fp32 boxes
 * matched by a box of the same class with IoU >= 0.5, greedily in fp32's order) and the p50
 * latency of a run. --per-layer runs the first input layer by layer in the CPU emulation of each
 * precision and prints every layer's NRMSE against fp32, to show where the error enters.
 *
 * stdout carries the table (or JSON with --json); notices go to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/data.h"
#include "runtime/image/image.h"
#include "runtime/precision/calib_cache.h"
#include "runtime/precision/file_scales.h"
#include "tools/cli.h"
#include "tools/results.h"


#define MAX_CONFIGS 7      /* fp32, fp16, int8 x 4 methods, auto */
#define GR_MAX_HEADS_CLI 8

typedef struct config {
    gr_precision prec;
    gr_calib_method method; /* int8 only */
    char name[32];          /* "fp32", "int8 entropy" */
    char cache[256];        /* int8: where its ranges were kept */
    /* results */
    double sq_err[GR_MAX_HEADS_CLI], max_abs;
    size_t nonfinite;
    int matched, p50_runs;
    double p50_us;
    double *layer_nrmse; /* [n_layers], NaN where the layer has no value */
} config;

typedef struct reference {
    float **outputs; /* [input][head] fp32 outputs */
    double ymin[GR_MAX_HEADS_CLI], ymax[GR_MAX_HEADS_CLI];
    size_t elems[GR_MAX_HEADS_CLI], count[GR_MAX_HEADS_CLI];
    gr_detection **dets;
    int *n_dets;
    int total_dets;
} reference;

static void print_help(FILE *f)
{
    fprintf(f, "usage: graphrun compare [options]   fp32 vs fp16 vs int8 on the same inputs\n"
           "\n"
           "  --input FILE        image (repeat; default the bundled photos)\n"
           "  --model/--cfg/--weights/--seed   the network, as for detect\n"
           "  --device D          auto (default), cpu, gpu\n"
           "  --calib M           int8 calibration method to compare (repeat; default all four:\n"
           "                      max, percentile, entropy, mse)\n"
           "  --calib-percentile P, --calib-images DIR, --calib-device D   as for detect\n"
           "  --calib-cache FILE  keep each method's ranges in FILE.<method> (default: temporary)\n"
           "  --runs N            timed runs per input (default 1); p50 is reported\n"
           "  --thresh T, --nms T detection thresholds for the agreement (defaults 0.5, 0.45)\n"
           "  --per-layer         NRMSE of every layer (CPU emulation of the first input)\n"
           "  --prec auto         add a row for the automatic mixed precision map chosen within\n"
           "                      --max-nrmse X (default 0.003; its map is printed on stderr)\n"
           "  --json              JSON on stdout\n"
           "\n"
           "NRMSE = sqrt(mean((x - y)^2)) / (max(y) - min(y)) with y the fp32 output.\n");
}

static float iou(const gr_detection *a, const gr_detection *b)
{
    float w = fminf(a->right, b->right) - fmaxf(a->left, b->left);
    float h = fminf(a->bottom, b->bottom) - fmaxf(a->top, b->top);
    if (w <= 0.0f || h <= 0.0f)
        return 0.0f;
    float inter = w * h;
    float area_a = (a->right - a->left) * (a->bottom - a->top);
    float area_b = (b->right - b->left) * (b->bottom - b->top);
    return inter / (area_a + area_b - inter);
}

/* fp32 boxes matched by a distinct box of the same class with IoU >= 0.5. */
static int match_boxes(const gr_detection *ref, int n_ref, const gr_detection *d, int n)
{
    char used[1024] = {0};
    int matched = 0;
    for (int i = 0; i < n_ref; i++)
        for (int j = 0; j < n && j < (int)sizeof used; j++)
            if (!used[j] && d[j].class_id == ref[i].class_id && iou(&ref[i], &d[j]) >= 0.5f) {
                used[j] = 1;
                matched++;
                break;
            }
    return matched;
}

static double nrmse(double sq_err, size_t count, double ymin, double ymax)
{
    if (count == 0)
        return 0.0;
    double range = ymax - ymin;
    return sqrt(sq_err / (double)count) / (range > 0.0 ? range : 1.0);
}

/* The command line: detect's flags, plus --per-layer and --calib repeated (one int8 row per
 * method). */
typedef struct compare_args {
    gr_cli_options o;
    gr_calib_method methods[4];
    int n_methods, per_layer;
} compare_args;

enum { F_PER_LAYER = 1000, F_CALIB_METHOD };

static const gr_cli_flag compare_flags[] = {
    {"--per-layer", F_PER_LAYER, 0}, {"--calib", F_CALIB_METHOD, 1}, {NULL, 0, 0}};

static int compare_apply(void *ctx, int id, const char *name, const char *value, char *err,
                         size_t errlen)
{
    compare_args *a = ctx;
    if (id == F_PER_LAYER) {
        a->per_layer = 1;
        return GR_EXIT_OK;
    }
    if (id != F_CALIB_METHOD)
        return gr_cli_detect_apply(&a->o, id, name, value, err, errlen);
    gr_calib_method m;
    if (gr_calib_method_parse(value, &m) != GR_OK)
        return gr_cli_usage_error(err, errlen,
                                  "--calib '%s' is not max, percentile, entropy or mse", value);
    if (a->n_methods < 4)
        a->methods[a->n_methods++] = m;
    return GR_EXIT_OK;
}

typedef struct layer_capture {
    float **values; /* [n_layers], fp32 run */
    size_t *n;
    const config *cfg;
    double *out;    /* [n_layers] */
} layer_capture;

static int keep_layer(int layer, int kind, const float *values, size_t n, void *user)
{
    (void)kind;
    layer_capture *lc = user;
    free(lc->values[layer]);
    lc->values[layer] = malloc(n * sizeof(float));
    if (lc->values[layer]) {
        memcpy(lc->values[layer], values, n * sizeof(float));
        lc->n[layer] = n;
    }
    return 0;
}

static int score_layer(int layer, int kind, const float *values, size_t n, void *user)
{
    (void)kind;
    layer_capture *lc = user;
    const float *ref = lc->values[layer];
    if (!ref || lc->n[layer] != n)
        return 0;
    double sq = 0.0, ymin = INFINITY, ymax = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double d = (double)values[i] - (double)ref[i];
        sq += d * d;
        ymin = fmin(ymin, (double)ref[i]);
        ymax = fmax(ymax, (double)ref[i]);
    }
    lc->out[layer] = nrmse(sq, n, ymin, ymax);
    return 0;
}

/* How the inputs are made: --letterbox / --stretch, else the model's (the engines' option). */
static gr_preprocess compare_preprocess(const gr_cli_options *o, const gr_net *net)
{
    if (o->preprocess != GR_PREPROCESS_AUTO)
        return o->preprocess;
    return gr_preprocess_concrete(net->preprocess);
}

/* --per-layer: every layer's NRMSE for each reduced precision, on the first input. */
static gr_status per_layer(const gr_cli_options *o, const gr_net *net, const float *input,
                           config *cfgs, int n_cfgs, const char *const *calib_images)
{
    layer_capture lc = {0};
    lc.values = calloc((size_t)net->n_layers, sizeof *lc.values);
    lc.n = calloc((size_t)net->n_layers, sizeof *lc.n);
    float *ranges = calloc((size_t)net->n_layers, sizeof *ranges);
    if (!lc.values || !lc.n || !ranges) {
        free(lc.values);
        free(lc.n);
        free(ranges);
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "--per-layer: out of memory");
    }
    gr_status st = gr_cli_trace_layers(net, GR_PREC_FP32, NULL, 0.0f, input, keep_layer, &lc);
    int n_images = 0;
    while (calib_images[n_images])
        n_images++;
    for (int c = 0; c < n_cfgs && st == GR_OK; c++) {
        config *cf = &cfgs[c];
        cf->layer_nrmse = malloc((size_t)net->n_layers * sizeof *cf->layer_nrmse);
        if (!cf->layer_nrmse) {
            st = gr_fail(GR_ERR_OUT_OF_MEMORY, "--per-layer: out of memory");
            break;
        }
        for (int l = 0; l < net->n_layers; l++)
            cf->layer_nrmse[l] = NAN;
        if (cf->prec == GR_PREC_AUTO)
            continue; /* mixed: not traced layer by layer (its map is in the notice) */
        float input_range = 0.0f;
        if (cf->prec == GR_PREC_INT8 && net->qdq && net->qdq->n_ranges > 0) {
            /* The file's own (ONNX Q/DQ), which the engine was built with. */
            st = gr_net_file_ranges(net, NULL, GR_PREC_INT8, ranges, &input_range, NULL);
        } else if (cf->prec == GR_PREC_INT8) {
            /* The ranges the engine was built with, from the cache it wrote. */
            gr_calib_key key;
            int found = 0;
            char notice[512];
            st = gr_calib_key_make(net, compare_preprocess(o, net), cf->method, o->engine.calib_percentile, calib_images, n_images,
                                   &key);
            if (st == GR_OK)
                st = gr_calib_cache_read(cf->cache, &key, net->n_layers, ranges, &input_range,
                                         &found, notice, sizeof notice);
            if (st == GR_OK && !found)
                st = gr_fail(GR_ERR_STATE, "%s: the int8 ranges were not kept", cf->cache);
        }
        lc.cfg = cf;
        lc.out = cf->layer_nrmse;
        if (st == GR_OK)
            st = gr_cli_trace_layers(net, cf->prec, ranges, input_range, input, score_layer, &lc);
    }
    for (int l = 0; l < net->n_layers; l++)
        free(lc.values[l]);
    free(lc.values);
    free(lc.n);
    free(ranges);
    return st;
}

/* A run with NaN/Inf outputs has no meaningful error numbers: NaN (printed nan / null). */
static double head_nrmse(const config *cf, const reference *ref, int h)
{
    return cf->nonfinite ? (double)NAN
                         : nrmse(cf->sq_err[h], ref->count[h], ref->ymin[h], ref->ymax[h]);
}

static double max_abs_error(const config *cf) { return cf->nonfinite ? (double)NAN : cf->max_abs; }

static void print_number(double v, int json)
{
    if (isfinite(v))
        printf("%.6g", v);
    else
        printf(json ? "null" : "nan");
}

static void print_results(const gr_cli_options *o, const gr_net *net, const config *cfgs,
                          int n_cfgs, int n_heads, const reference *ref, int per_layer_done)
{
    if (o->json) {
        printf("{\"model\": ");
        gr_cli_json_string(stdout, net->name);
        printf(", \"inputs\": %d, \"fp32_boxes\": %d, \"rows\": [", o->n_inputs, ref->total_dets);
        for (int c = 0; c < n_cfgs; c++) {
            const config *cf = &cfgs[c];
            printf("%s\n  {\"precision\": \"%s\", \"method\": ", c ? "," : "",
                   gr_precision_name(cf->prec));
            if (cf->prec == GR_PREC_INT8)
                printf("\"%s\"", gr_calib_method_name(cf->method));
            else
                printf("null");
            printf(", \"nrmse\": [");
            for (int h = 0; h < n_heads; h++) {
                printf("%s", h ? ", " : "");
                print_number(head_nrmse(cf, ref, h), 1);
            }
            printf("], \"max_abs_error\": ");
            print_number(max_abs_error(cf), 1);
            printf(", \"nonfinite\": %zu, \"boxes_matched\": %d, \"p50_us\": %.1f", cf->nonfinite,
                   cf->matched, cf->p50_us);
            if (per_layer_done && cf->layer_nrmse) {
                printf(", \"layer_nrmse\": [");
                for (int l = 0; l < net->n_layers; l++) {
                    printf("%s", l ? ", " : "");
                    print_number(cf->layer_nrmse[l], 1);
                }
                printf("]");
            }
            printf("}");
        }
        printf("\n]}\n");
        return;
    }
    printf("%-18s", "precision");
    for (int h = 0; h < n_heads; h++)
        printf(" nrmse[%d]   ", h);
    printf(" max_abs_err  detections_agree  p50_us\n");
    for (int c = 0; c < n_cfgs; c++) {
        const config *cf = &cfgs[c];
        printf("%-18s", cf->name);
        for (int h = 0; h < n_heads; h++)
            printf(" %-11.4g", head_nrmse(cf, ref, h));
        char agree[48];
        snprintf(agree, sizeof agree, "%d/%d", cf->matched, ref->total_dets);
        printf(" %-12.4g %-17s %.1f\n", max_abs_error(cf), agree, cf->p50_us);
    }
    if (!per_layer_done)
        return;
    printf("\nper-layer NRMSE against fp32 (first input, CPU emulation)\nlayer  op          ");
    for (int c = 1; c < n_cfgs; c++)
        printf(" %-16s", cfgs[c].name);
    printf("\n");
    for (int l = 0; l < net->n_layers; l++) {
        if (!cfgs[1 < n_cfgs ? 1 : 0].layer_nrmse || isnan(cfgs[n_cfgs - 1].layer_nrmse[l]))
            continue;
        printf("%-6d %-12s", l, gr_op_get(net->layers[l].p.op)->name);
        for (int c = 1; c < n_cfgs; c++)
            printf(" %-16.4g", cfgs[c].layer_nrmse[l]);
        printf("\n");
    }
}

/* Input i's heads against the reference (the fp32 configuration keeps them as the reference). */
static gr_status compare_heads(const gr_engine *e, config *cf, reference *ref, int i, int n_heads)
{
    for (int h = 0; h < n_heads; h++) {
        const float *out;
        gr_engine_output(e, h, &out);
        size_t n = ref->elems[h];
        float **slot = &ref->outputs[i * n_heads + h];
        if (cf->prec == GR_PREC_FP32) {
            if (!(*slot = malloc(n * sizeof **slot)))
                return gr_fail(GR_ERR_OUT_OF_MEMORY, "compare: out of memory");
            memcpy(*slot, out, n * sizeof **slot);
            for (size_t k = 0; k < n; k++) {
                ref->ymin[h] = fmin(ref->ymin[h], (double)out[k]);
                ref->ymax[h] = fmax(ref->ymax[h], (double)out[k]);
            }
            ref->count[h] += n;
        }
        for (size_t k = 0; k < n; k++) {
            double d = (double)out[k] - (double)(*slot)[k];
            cf->sq_err[h] += d * d;
            cf->max_abs = fmax(cf->max_abs, fabs(d));
        }
    }
    return GR_OK;
}

/* Input i's detections: the reference's, or matched against them. */
static gr_status compare_detections(const gr_cli_options *o, const gr_model *model,
                                    const gr_engine *e, const gr_image *image, config *cf,
                                    reference *ref, int i)
{
    gr_model_info info;
    gr_model_get_info(model, &info);
    if (info.classes <= 0)
        return GR_OK;
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = o->thresh;
    dopt.nms = o->nms;
    dopt.image_w = image->w;
    dopt.image_h = image->h;
    gr_detection *dets = NULL;
    int n = 0;
    GR_TRY(gr_engine_detect(e, 0, &dopt, &dets, &n));
    if (cf->prec == GR_PREC_FP32) {
        ref->dets[i] = dets;
        ref->n_dets[i] = n;
        ref->total_dets += n;
    } else {
        cf->matched += match_boxes(ref->dets[i], ref->n_dets[i], dets, n);
        gr_detections_free(dets);
    }
    return GR_OK;
}

/* --runs timed runs of one input; each end-to-end time appended to times[*n_times]. */
static gr_status timed_runs(gr_engine *e, const gr_cli_options *o, const float *input,
                            const uint8_t *input_u8, double *times, int *n_times)
{
    for (int r = 0; r < o->runs; r++) {
        GR_TRY(input_u8 ? gr_engine_run_u8(e, input_u8) : gr_engine_run_f32(e, input));
        gr_timing t;
        if (gr_engine_timing(e, &t) == GR_OK)
            times[(*n_times)++] = t.end_to_end_us;
    }
    return GR_OK;
}

/* Run one configuration over every input, compare with the fp32 reference (or become it). */
static gr_status run_config(const gr_cli_options *o, const gr_model *model, config *cf,
                            const char *const *calib_images, const float *inputs,
                            const uint8_t *inputs_u8, const gr_image *const *images,
                            size_t per_image, int n_heads, reference *ref, double *times)
{
    gr_engine_options eo;
    gr_cli_engine_options(&o->engine, o->device, cf->prec, 1, &eo);
    eo.preprocess = o->preprocess;
    gr_cli_calib_options(o, calib_images, &eo);
    eo.calib_method = cf->method;
    eo.calib_cache = cf->prec == GR_PREC_INT8 ? cf->cache : NULL;
    gr_engine *e = NULL;
    GR_TRY(gr_engine_build(model, &eo, &e));
    gr_cli_print_notices(e);
    gr_status st = GR_OK;
    int n_times = 0;
    /* The GPU takes the uint8 letterbox (its input copy moves bytes, as detect does); the CPU the
     * float one. Every configuration of one device sees the same input. */
    int u8 = gr_engine_device(e) == GR_DEVICE_GPU;
    for (int i = 0; i < o->n_inputs && st == GR_OK; i++) {
        st = timed_runs(e, o, inputs + (size_t)i * per_image,
                        u8 ? inputs_u8 + (size_t)i * per_image : NULL, times, &n_times);
        if (st == GR_OK && gr_cli_report_nonfinite(e, cf->name))
            for (int h = 0; h < n_heads; h++) {
                size_t bad = 0;
                gr_engine_output_nonfinite(e, h, &bad);
                cf->nonfinite += bad;
            }
        if (st == GR_OK)
            st = compare_heads(e, cf, ref, i, n_heads);
        if (st == GR_OK)
            st = compare_detections(o, model, e, images[i], cf, ref, i);
    }
    if (cf->prec == GR_PREC_FP32)
        cf->matched = ref->total_dets;
    gr_cli_sort(times, n_times);
    cf->p50_us = gr_cli_percentile(times, n_times, 50.0);
    gr_engine_destroy(e);
    return st;
}


/* One invocation: the configurations, the network, the inputs and the fp32 reference. */
typedef struct compare_run {
    gr_cli_options o;
    config cfgs[MAX_CONFIGS];
    int n_cfgs, per_layer;
    char tmpdir[32]; /* "" unless the calibrations go to a temporary folder */
    char **calib_list;
    const char *const *calib_images;
    gr_model *model;
    gr_net *net;
    gr_model_info info;
    gr_image *images[GR_CLI_MAX_INPUTS];
    float *inputs;
    uint8_t *inputs_u8;
    double *times;
    size_t per_image;
    reference ref;
    int n_heads;
} compare_run;

/* fp32, fp16, int8 once per calibration method (each with its cache file), then auto. */
static int setup_configs(compare_run *r, const compare_args *args)
{
    const gr_cli_options *o = &r->o;
    int n_int8 = args->n_methods ? args->n_methods : 4;
    for (int m = 0; m < n_int8; m++)
        r->cfgs[2 + m].method = args->n_methods ? args->methods[m] : (gr_calib_method)m;
    r->n_cfgs = 2 + n_int8 + (o->precision == GR_PREC_AUTO); /* --prec auto: one more row */
    if (!o->engine.calib_cache) {
        snprintf(r->tmpdir, sizeof r->tmpdir, "/tmp/graphrun_compare_XXXXXX");
        if (!mkdtemp(r->tmpdir)) {
            r->tmpdir[0] = '\0';
            fprintf(stderr, "graphrun: cannot make a temporary folder for the calibrations\n");
            return GR_EXIT_FAILURE;
        }
    }
    for (int c = 0; c < r->n_cfgs; c++) {
        config *cf = &r->cfgs[c];
        cf->prec = c == 0 ? GR_PREC_FP32 : c == 1 ? GR_PREC_FP16
                   : c == 2 + n_int8 ? GR_PREC_AUTO : GR_PREC_INT8;
        const char *method = gr_calib_method_name(cf->method);
        if (cf->prec == GR_PREC_AUTO)
            snprintf(cf->name, sizeof cf->name, "auto <= %g", (double)o->engine.max_nrmse);
        else if (cf->prec == GR_PREC_INT8)
            snprintf(cf->name, sizeof cf->name, "int8 %s", method);
        else
            snprintf(cf->name, sizeof cf->name, "%s", gr_precision_name(cf->prec));
        if (cf->prec == GR_PREC_INT8 && r->tmpdir[0])
            snprintf(cf->cache, sizeof cf->cache, "%s/%s.calib", r->tmpdir, method);
        else if (cf->prec == GR_PREC_INT8)
            snprintf(cf->cache, sizeof cf->cache, "%s.%s", o->engine.calib_cache, method);
    }
    return GR_EXIT_OK;
}

static gr_status allocate_reference(compare_run *r)
{
    int n = r->o.n_inputs, heads[GR_MAX_HEADS_CLI];
    r->n_heads = gr_net_heads(r->net, heads, GR_MAX_HEADS_CLI);
    r->per_image = (size_t)r->info.channels * (size_t)r->info.width * (size_t)r->info.height;
    r->inputs = malloc((size_t)n * r->per_image * sizeof *r->inputs);
    r->inputs_u8 = malloc((size_t)n * r->per_image);
    r->times = malloc((size_t)n * (size_t)r->o.runs * sizeof *r->times);
    r->ref.outputs = calloc((size_t)n * (size_t)r->n_heads, sizeof *r->ref.outputs);
    r->ref.dets = calloc((size_t)n, sizeof *r->ref.dets);
    r->ref.n_dets = calloc((size_t)n, sizeof *r->ref.n_dets);
    if (!r->inputs || !r->inputs_u8 || !r->times || !r->ref.outputs || !r->ref.dets ||
        !r->ref.n_dets)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "compare: out of memory for %d inputs", n);
    for (int h = 0; h < r->n_heads; h++) {
        r->ref.elems[h] = gr_shape_elems(r->net->layers[heads[h]].out);
        r->ref.ymin[h] = INFINITY;
        r->ref.ymax[h] = -INFINITY;
    }
    return GR_OK;
}

/* Every input letterboxed (or stretched: --letterbox/--stretch, else the model's) both ways:
 * float for the CPU, uint8 for the GPU. */
static gr_status load_inputs(compare_run *r)
{
    const gr_model_info *info = &r->info;
    gr_preprocess how = compare_preprocess(&r->o, r->net);
    for (int i = 0; i < r->o.n_inputs; i++) {
        GR_TRY(gr_image_load(r->o.inputs[i], &r->images[i]));
        GR_TRY(gr_image_preprocess(r->images[i], how, info->width, info->height,
                                   r->inputs + (size_t)i * r->per_image));
        GR_TRY(gr_image_preprocess_u8(r->images[i], how, info->width, info->height,
                                      r->inputs_u8 + (size_t)i * r->per_image));
    }
    return GR_OK;
}

static gr_status run_configs(compare_run *r)
{
    fprintf(stderr, "graphrun compare: model %s, %d input%s, %d configurations\n", r->info.name,
            r->o.n_inputs, r->o.n_inputs == 1 ? "" : "s", r->n_cfgs);
    for (int c = 0; c < r->n_cfgs; c++) {
        fprintf(stderr, "graphrun: running %s\n", r->cfgs[c].name);
        GR_TRY(run_config(&r->o, r->model, &r->cfgs[c], r->calib_images, r->inputs, r->inputs_u8,
                          (const gr_image *const *)r->images, r->per_image, r->n_heads, &r->ref,
                          r->times));
    }
    if (r->per_layer)
        GR_TRY(per_layer(&r->o, r->net, r->inputs, r->cfgs, r->n_cfgs, r->calib_images));
    return GR_OK;
}

/* The model and network (images need 3 channels), then every configuration, then the table. */
static int compare(compare_run *r)
{
    if (r->o.calib_images) {
        int rc = gr_cli_list_images(r->o.calib_images, &r->calib_list);
        if (rc != GR_EXIT_OK)
            return rc;
    }
    r->calib_images = (const char *const *)r->calib_list;
    gr_status st = r->calib_images ? GR_OK : gr_data_bundled_photos(&r->calib_images);
    if (st == GR_OK)
        st = gr_cli_load_model(&r->o, &r->model);
    if (st == GR_OK)
        st = gr_cli_load_net(&r->o, &r->net);
    if (st == GR_OK) {
        gr_model_get_info(r->model, &r->info);
        int rc = gr_cli_check_image_channels(r->info.channels, r->info.height, r->info.width,
                                             r->o.cfg ? r->o.cfg : r->info.name);
        if (rc != GR_EXIT_OK)
            return rc;
        st = allocate_reference(r);
    }
    if (st == GR_OK)
        st = load_inputs(r);
    if (st == GR_OK)
        st = run_configs(r);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun: compare: %s\n", gr_last_error());
        return gr_cli_exit_code(st);
    }
    print_results(&r->o, r->net, r->cfgs, r->n_cfgs, r->n_heads, &r->ref, r->per_layer);
    return GR_EXIT_OK;
}

static void compare_free(compare_run *r)
{
    for (int c = 0; c < r->n_cfgs; c++) {
        free(r->cfgs[c].layer_nrmse);
        if (r->tmpdir[0] && r->cfgs[c].prec == GR_PREC_INT8)
            remove(r->cfgs[c].cache);
    }
    if (r->tmpdir[0])
        rmdir(r->tmpdir);
    for (int i = 0; i < r->o.n_inputs; i++) {
        gr_image_destroy(r->images[i]);
        if (r->ref.dets)
            gr_detections_free(r->ref.dets[i]);
        for (int h = 0; r->ref.outputs && h < r->n_heads; h++)
            free(r->ref.outputs[i * r->n_heads + h]);
    }
    gr_cli_free_list(r->calib_list);
    gr_net_free(r->net);
    gr_model_destroy(r->model);
    free(r->inputs);
    free(r->inputs_u8);
    free(r->times);
    free(r->ref.dets);
    free(r->ref.n_dets);
    free(r->ref.outputs);
}

int gr_cli_compare(int argc, char **argv)
{
    compare_args args = {0};
    gr_cli_options_default(&args.o);
    gr_cli_parser parser = {.command = "graphrun compare", .own = compare_flags,
                            .shared = gr_cli_detect_flags, .apply = compare_apply, .ctx = &args,
                            .engine = &args.o.engine, .commands = GR_CMD_DETECT | GR_CMD_COMPARE,
                            .engine_given = &args.o.engine_given};
    int rc = gr_cli_run_parser(&parser, argc, argv, print_help);
    if (rc >= 0)
        return rc;
    if (args.o.engine_file) { /* compare builds an engine per precision from the model */
        fprintf(stderr, "graphrun compare: --engine is not a compare option: compare builds its "
                        "own engines from --model/--cfg\n");
        return GR_EXIT_USAGE;
    }
    /* compare reports precisions, not detections: text or --json, no other result format. */
    if (args.o.format && args.o.format != GR_FORMAT_JSON) {
        fprintf(stderr, "graphrun compare: --format applies to detection (compare has text or "
                        "--json)\n");
        return GR_EXIT_USAGE;
    }
    args.o.json |= args.o.format == GR_FORMAT_JSON;
    compare_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "graphrun: compare: out of memory\n");
        return GR_EXIT_OOM;
    }
    r->o = args.o;
    r->per_layer = args.per_layer;
    const char *const *bundled = NULL;
    if (r->o.n_inputs == 0 && gr_data_bundled_photos(&bundled) != GR_OK)
        rc = gr_cli_fail(GR_ERR_IO, "the default --input (the bundled photos)");
    for (; bundled && bundled[r->o.n_inputs]; r->o.n_inputs++)
        r->o.inputs[r->o.n_inputs] = bundled[r->o.n_inputs];
    if (rc < 0)
        rc = setup_configs(r, &args);
    if (rc == GR_EXIT_OK)
        rc = compare(r);
    compare_free(r);
    free(r);
    return rc;
}
