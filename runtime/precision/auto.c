/* Automatic mixed precision (GR_PREC_AUTO): int8 or fp16 per convolution, for the least latency
 * whose error stays within the budget opt.max_nrmse. docs/calibration.md ("Automatic mixed
 * precision") has the same in prose.
 *
 * Error of a map: the planner's CPU emulation of the mixed plan (the GPU's arithmetic: int8 layers
 * bit for bit, fp16 layers up to accumulation order) on up to AUTO_MAX_IMAGES calibration images,
 * against the fp32 plan on the same images; per image and output NRMSE = sqrt(mean((x - y)^2)) /
 * (max(y) - min(y)) (y = fp32; a constant y divides by 1), and the error is the max over images
 * and outputs. The same on both backends, so a CPU and a GPU engine choose the same map for the
 * same latency ranking.
 *
 * Latency of a map: the sum over layers of the layer's time in its precision. On the GPU the
 * times are measured (gr_engine_layer_times: node-by-node event timing of eager runs of an all-int8
 * and an all-fp16 engine); on the CPU a static cost model: a convolution costs its multiply-adds,
 * an int8 multiply-add half an fp16 one, other layers nothing. Q/DQ conversions at precision
 * boundaries are not in the prediction (the GPU's measured latency of the result includes them).
 *
 * Search: the candidates are the convolutions; every other layer follows the precision of its
 * first input. Start all-int8: within budget -> done. Measure all-fp16: over budget -> all fp16,
 * with a notice. Otherwise the sensitivity of each candidate is the error with that single layer
 * in fp16; candidates are flipped to fp16 in order of error reduction per added latency (layers
 * that reduce nothing last, the least harmful first), the error re-measured after each flip, until
 * it is within budget (at the latest with every layer flipped, which is the all-fp16 map). Then
 * a backward pass tries each flipped layer back in int8, the largest latency saving first, and
 * keeps it there when the error stays within budget. Last (also when all int8 qualified), a layer
 * whose fp16 time is no more than its int8 time goes to fp16 if the error stays within budget
 * (the CPU cost model has none; measured GPU times can).
 * Emulated evaluations: at most 3 + 4 * candidates (and the fp32 reference), each over every
 * image, on all cores. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/data.h"
#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/image/image.h"


#define AUTO_MAX_IMAGES 16

typedef struct search {
    const gr_net *net;
    gr_preprocess how;      /* the engine's preprocessing of the calibration images */
    int n_images;
    size_t image_elems;
    float *images;          /* n_images x (c x h x w) float CHW, the engine's u8 input / 255 */
    int n_out;
    size_t out_elems[GR_MAX_HEADS];
    size_t out_offset[GR_MAX_HEADS + 1]; /* per image, in floats */
    float *reference;       /* n_images x out_offset[n_out]: the fp32 outputs */
    const float *ranges;
    float input_range;
    int threads;
    int evaluations;
} search;

/* ---- evaluation of one map ---------------------------------------------------------------- */

typedef struct worker {
    const search *s;
    const gr_plan *plan;
    int first, step;        /* images first, first + step, ... */
    float *store;           /* the reference run: outputs go here; else compared */
    double *image_error;    /* [n_images] */
    gr_status status;
    char error[256];
} worker;

static double nrmse(const float *x, const float *y, size_t n)
{
    double ymin = (double)INFINITY, ymax = -(double)INFINITY, sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        sq += d * d;
        ymin = fmin(ymin, (double)y[i]);
        ymax = fmax(ymax, (double)y[i]);
    }
    double range = ymax - ymin;
    double e = sqrt(sq / (double)(n ? n : 1)) / (range > 0.0 ? range : 1.0);
    return isfinite(e) ? e : (double)INFINITY;
}

static void *work(void *arg)
{
    worker *w = arg;
    const search *s = w->s;
    gr_plan_exec *ex = NULL;
    w->status = gr_plan_exec_create(w->plan, 0, &ex);
    for (int i = w->first; i < s->n_images && w->status == GR_OK; i += w->step) {
        w->status = gr_plan_execute(ex, s->images + (size_t)i * s->image_elems);
        if (w->status != GR_OK)
            break;
        double err = 0.0;
        for (int k = 0; k < s->n_out; k++) {
            const float *out = gr_plan_exec_output(ex, k);
            size_t at = (size_t)i * s->out_offset[s->n_out] + s->out_offset[k];
            if (w->store)
                memcpy(w->store + at, out, s->out_elems[k] * sizeof(float));
            else
                err = fmax(err, nrmse(out, s->reference + at, s->out_elems[k]));
        }
        w->image_error[i] = err;
    }
    if (w->status != GR_OK)
        snprintf(w->error, sizeof w->error, "%s", gr_last_error());
    gr_plan_exec_destroy(ex);
    return NULL;
}

/* Run the plan of `map` (NULL: fp32) over every image: store the outputs (store != NULL) or
 * return the error against the reference in *error. */
static gr_status evaluate(search *s, const gr_precision *map, float *store, double *error)
{
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.precision = gr_precision_widest(s->net, map);
    po.layer_precision = map;
    po.n_layer_precision = map ? s->net->n_layers : 0;
    po.batch = 1;
    po.input_u8 = 0; /* as the CPU engine: float input, v / 255 */
    /* Both engines' heads write f32 from the accumulator (no int8/f16 rounding of the output):
     * evaluate the same arithmetic (the other fusions change no value). */
    po.fuse_output_dequantize = 1;
    gr_plan *plan = NULL;
    GR_TRY(gr_plan_build(s->net, &po, &plan));
    gr_status st = GR_OK;
    if (po.precision == GR_PREC_INT8)
        st = gr_plan_set_ranges(plan, s->ranges, s->input_range);
    if (st == GR_OK && plan->n_outputs != s->n_out)
        st = gr_fail(GR_ERR_INTERNAL, "auto precision: plan has %d outputs, expected %d",
                     plan->n_outputs, s->n_out);
    int threads = s->threads < s->n_images ? s->threads : s->n_images;
    worker *w = gr_calloc((size_t)threads, sizeof *w, "auto precision workers");
    pthread_t *tid = gr_calloc((size_t)threads, sizeof *tid, "auto precision threads");
    double *image_error = gr_calloc((size_t)s->n_images, sizeof *image_error, "image errors");
    if (st == GR_OK && (!w || !tid || !image_error))
        st = GR_ERR_OUT_OF_MEMORY;
    int started = 0;
    for (int t = 0; t < threads && st == GR_OK; t++) {
        w[t] = (worker){s, plan, t, threads, store, image_error, GR_OK, ""};
        if (t > 0 && pthread_create(&tid[t], NULL, work, &w[t]) != 0)
            st = gr_fail(GR_ERR_INTERNAL, "auto precision: pthread_create failed");
        else if (t > 0)
            started = t;
    }
    if (st == GR_OK)
        work(&w[0]); /* the calling thread takes the first share */
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < threads && st == GR_OK && w; t++)
        if (w[t].status != GR_OK)
            st = gr_fail(w[t].status, "auto precision: %s", w[t].error);
    double worst = 0.0;
    for (int i = 0; st == GR_OK && i < s->n_images; i++)
        worst = fmax(worst, image_error[i]);
    if (error)
        *error = worst;
    s->evaluations++;
    free(w);
    free(tid);
    free(image_error);
    gr_plan_free(plan);
    return st;
}

/* ---- inputs ------------------------------------------------------------------------------- */

/* Up to AUTO_MAX_IMAGES calibration images, letterboxed to uint8 as the engine's input is, as
 * float CHW v / 255 (what runtime/precision/calibrate.c feeds the calibration). */
static gr_status load_images(search *s, const char *const *paths)
{
    const gr_net *net = s->net;
    int n = 0;
    while (paths[n] && n < AUTO_MAX_IMAGES)
        n++;
    if (n == 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "auto precision needs at least one calibration "
                                                "image");
    if (net->c != 3) /* the images are letterboxed to RGB */
        return gr_fail(GR_ERR_UNSUPPORTED, "auto precision calibrates on photos: it needs a "
                       "3-channel network; this one takes %d channels", net->c);
    size_t plane = (size_t)net->w * (size_t)net->h;
    s->image_elems = plane * (size_t)net->c;
    s->images = gr_malloc((size_t)n * s->image_elems * sizeof(float), "auto precision images");
    gr_status st = s->images ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n && st == GR_OK; i++) {
        st = gr_image_load_planar(paths[i], s->how, net->w, net->h, s->images + (size_t)i * s->image_elems);
        if (st != GR_OK)
            gr_fail_prefix(st, "auto precision: ");
    }
    s->n_images = n;
    return st;
}

/* ---- maps and costs ----------------------------------------------------------------------- */

/* Every conv, grouped, dilated and stride_x != stride_y ones included (the GPU's direct kernels
 * take them in fp16 and int8). */
static int is_candidate(const gr_layer *l)
{
    return l->p.op == GR_OP_CONV && !gr_op_has((int)l->p.op, GR_OPF_F32_ONLY);
}

/* Candidates in fp16 where fp16[i] is set, int8 otherwise; every other layer follows its first
 * input (the network input: the first candidate's precision). */
static void make_map(const gr_net *net, const char *fp16, gr_precision *map)
{
    gr_precision first = GR_PREC_INT8;
    for (int i = 0; i < net->n_layers; i++)
        if (is_candidate(&net->layers[i])) {
            first = fp16[i] ? GR_PREC_FP16 : GR_PREC_INT8;
            break;
        }
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (is_candidate(l))
            map[i] = fp16[i] ? GR_PREC_FP16 : GR_PREC_INT8;
        else if (l->p.op == GR_OP_CONV)
            map[i] = GR_PREC_FP32; /* grouped */
        else
            map[i] = l->inputs[0] >= 0 ? map[l->inputs[0]] : first;
    }
}

/* CPU cost model: a convolution's multiply-adds per image, int8 at half an fp16 one. */
static void static_costs(const gr_net *net, double *t8, double *t16)
{
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        t8[i] = t16[i] = 0.0;
        if (l->p.op != GR_OP_CONV)
            continue;
        gr_shape in = gr_net_input_shape(net, i, 0);
        int groups = l->p.groups > 0 ? l->p.groups : 1;
        double macs = (double)l->out.c * l->out.h * l->out.w * (double)(in.c / groups) *
                      l->p.size * l->p.size;
        t16[i] = macs;
        t8[i] = 0.5 * macs;
    }
}

/* GPU: measured per-layer times of an all-int8 and an all-fp16 engine of this configuration. */
static gr_status measured_costs(const gr_build_request *req, const search *s, double *t8,
                                double *t16)
{
    for (int k = 0; k < 2; k++) {
        gr_engine_options o = req->opt;
        o.precision = k == 0 ? GR_PREC_INT8 : GR_PREC_FP16;
        o.layer_precision = NULL;
        o.n_layer_precision = 0;
        o.use_cuda_graph = 0; /* timed eagerly anyway: no capture needed */
        o.inflight = 1;
        o.calib_cache = NULL;
        o.calib_progress = NULL;
        gr_build_request probe_req = {.net = s->net,
                                      .opt = o,
                                      .device = GR_DEVICE_GPU,
                                      .layer_range = s->ranges,
                                      .input_range = s->input_range};
        gr_engine *probe = NULL;
        gr_status st = gr_engine_create(&probe_req, &probe);
        if (st == GR_OK)
            st = gr_engine_layer_times(probe, k == 0 ? t8 : t16);
        gr_engine_destroy(probe);
        if (st != GR_OK)
            return gr_fail_prefix(st, "auto precision: timing the all-%s engine: ",
                                  k == 0 ? "int8" : "fp16");
    }
    return GR_OK;
}

static double map_cost(const gr_net *net, const gr_precision *map, const double *t8,
                       const double *t16)
{
    double sum = 0.0;
    for (int i = 0; i < net->n_layers; i++)
        sum += map[i] == GR_PREC_FP16 ? t16[i] : t8[i];
    return sum;
}

void gr_precision_map_str(const gr_net *net, const gr_precision *map, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "precision map:");
    int first = 1;
    for (int i = 0; i < net->n_layers && at < len; i++) {
        if (!gr_op_has((int)net->layers[i].p.op, GR_OPF_WEIGHTS))
            continue;
        gr_precision p = gr_op_has((int)net->layers[i].p.op, GR_OPF_F32_ONLY) ? GR_PREC_FP32
                                                                                : map[i];
        at += (size_t)snprintf(buf + at, len - at, "%s L%d %s", first ? "" : ",", i,
                               gr_precision_name(p));
        first = 0;
    }
}

/* ---- the search --------------------------------------------------------------------------- */

typedef struct candidate {
    int layer;
    double reduction, added;
} candidate;

/* Flip order: layers that reduce the error first, by reduction per added latency (a layer that
 * is no slower in fp16 first of all); then the others, least harmful first. */
static int cmp_candidate(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb; /* reductions are finite (clamped when measured) */
    int ra = a->reduction > 0.0, rb = b->reduction > 0.0;
    if (ra != rb)
        return rb - ra;
    if (!ra)
        return (a->reduction < b->reduction) - (a->reduction > b->reduction);
    double sa = a->added > 0.0 ? a->reduction / a->added : (double)INFINITY;
    double sb = b->added > 0.0 ? b->reduction / b->added : (double)INFINITY;
    if (sa != sb)
        return (sa < sb) - (sa > sb);
    return a->layer - b->layer;
}

static int cmp_added(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    if (a->added != b->added)
        return (a->added < b->added) - (a->added > b->added);
    return a->layer - b->layer;
}

typedef struct outcome {
    double error, error_int8, error_fp16;
    double cost, cost_int8, cost_fp16;
    int fallback, flipped, candidates;
} outcome;

static gr_status run_search(const gr_build_request *req, search *s, gr_precision *map,
                            outcome *out)
{
    const gr_net *net = s->net;
    int n = net->n_layers;
    char *fp16 = gr_calloc((size_t)n, 1, "auto precision flags");
    double *t8 = gr_calloc((size_t)n, sizeof *t8, "layer costs");
    double *t16 = gr_calloc((size_t)n, sizeof *t16, "layer costs");
    candidate *cand = gr_calloc((size_t)n, sizeof *cand, "candidates");
    gr_status st = fp16 && t8 && t16 && cand ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    double budget = (double)req->opt.max_nrmse;
    int n_cand = 0;
    for (int i = 0; i < n; i++)
        n_cand += is_candidate(&net->layers[i]);
    out->candidates = n_cand;
    if (st == GR_OK && n_cand == 0)
        st = gr_fail(GR_ERR_UNSUPPORTED, "auto precision: %s has no convolution to choose a "
                                         "precision for", net->name);
    if (st == GR_OK) {
        if (req->device == GR_DEVICE_GPU)
            st = measured_costs(req, s, t8, t16);
        else
            static_costs(net, t8, t16);
    }
    /* All int8. */
    if (st == GR_OK) {
        make_map(net, fp16, map);
        out->cost_int8 = map_cost(net, map, t8, t16);
        st = evaluate(s, map, NULL, &out->error_int8);
        out->error = out->error_int8;
        out->cost = out->cost_int8;
    }
    /* All fp16. */
    if (st == GR_OK) {
        memset(fp16, 1, (size_t)n);
        make_map(net, fp16, map);
        out->cost_fp16 = map_cost(net, map, t8, t16);
        memset(fp16, 0, (size_t)n);
        if (out->error_int8 > budget)
            st = evaluate(s, map, NULL, &out->error_fp16);
        if (st == GR_OK && out->error_int8 <= budget) {
            make_map(net, fp16, map); /* all int8 qualifies */
            goto free_flips;
        }
        if (st == GR_OK && out->error_fp16 > budget) {
            out->fallback = 1; /* map is all fp16 */
            out->flipped = n_cand;
            out->error = out->error_fp16;
            out->cost = out->cost_fp16;
            goto done;
        }
    }
    /* Sensitivities: one layer in fp16 at a time. */
    int k = 0;
    for (int i = 0; i < n && st == GR_OK; i++) {
        if (!is_candidate(&net->layers[i]))
            continue;
        double err = 0.0;
        fp16[i] = 1;
        make_map(net, fp16, map);
        double cost = map_cost(net, map, t8, t16);
        st = evaluate(s, map, NULL, &err);
        fp16[i] = 0;
        double reduction = out->error_int8 - err; /* inf - inf (non-finite outputs): no gain */
        cand[k++] = (candidate){i, isfinite(reduction) ? reduction : 0.0, cost - out->cost_int8};
    }
    if (st == GR_OK)
        qsort(cand, (size_t)k, sizeof *cand, cmp_candidate);
    /* Flip in that order until within budget; the last flip is the all-fp16 map, measured. */
    for (int j = 0; j < k && st == GR_OK; j++) {
        fp16[cand[j].layer] = 1;
        make_map(net, fp16, map);
        out->flipped = j + 1;
        out->cost = map_cost(net, map, t8, t16);
        if (j == k - 1) {
            out->error = out->error_fp16;
            break;
        }
        st = evaluate(s, map, NULL, &out->error);
        if (st == GR_OK && out->error <= budget)
            break;
    }
    /* Backward pass: a layer flipped early may not be needed once later ones are fp16. Try each
     * flipped layer back in int8, the largest latency saving first; keep what stays in budget. */
    int flipped = out->flipped;
    if (st == GR_OK && flipped > 1) {
        qsort(cand, (size_t)flipped, sizeof *cand, cmp_added);
        for (int j = 0; j < flipped && st == GR_OK; j++) {
            if (cand[j].added <= 0.0)
                continue; /* no faster in int8 */
            double err = 0.0;
            fp16[cand[j].layer] = 0;
            make_map(net, fp16, map);
            st = evaluate(s, map, NULL, &err);
            if (st == GR_OK && err <= budget) {
                out->error = err;
                out->flipped--;
                out->cost = map_cost(net, map, t8, t16);
            } else {
                fp16[cand[j].layer] = 1;
            }
        }
        make_map(net, fp16, map);
    }
free_flips:
    /* A layer measured no slower in fp16 than in int8 (the GPU's small layers can be) goes to
     * fp16 when the error stays within budget: less latency for no error. */
    for (int i = 0; i < n && st == GR_OK; i++) {
        if (!is_candidate(&net->layers[i]) || fp16[i])
            continue;
        fp16[i] = 1;
        make_map(net, fp16, map);
        double cost = map_cost(net, map, t8, t16), err = 0.0;
        if (cost <= out->cost)
            st = evaluate(s, map, NULL, &err);
        if (st == GR_OK && cost <= out->cost && err <= budget) {
            out->cost = cost;
            out->error = err;
            out->flipped++;
        } else {
            fp16[i] = 0;
        }
    }
    make_map(net, fp16, map);
done:
    free(fp16);
    free(t8);
    free(t16);
    free(cand);
    return st;
}

static int cpu_threads(const gr_engine_options *opt)
{
    if (opt->calib_threads > 0)
        return opt->calib_threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < 64 ? n : 64) : 1;
}

static void append_notice(char *notice, size_t len, const char *line)
{
    size_t at = strlen(notice);
    snprintf(notice + at, len - at, "%s%s", at ? "\n" : "", line);
}

/* The notice lines of a finished search: the map, the error and latency, a fallback. */
static void describe(const gr_build_request *req, const search *s, const outcome *o,
                     const gr_precision *map, double t0, char *notice, size_t len)
{
    const int gpu = req->device == GR_DEVICE_GPU;
    const double budget = (double)req->opt.max_nrmse;
    char line[1400];
    gr_precision_map_str(s->net, map, line, sizeof line);
    append_notice(notice, len, line);
    const char *unit = gpu ? "us (measured per layer)" : "M int8-MAC units (CPU cost model)";
    double scale = gpu ? 1.0 : 1e-6 / 0.5;
    char fp16_error[32] = "not needed";
    if (o->error_int8 > budget)
        snprintf(fp16_error, sizeof fp16_error, "%.4g", o->error_fp16);
    snprintf(line, sizeof line,
             "auto precision: %d of %d convolutions fp16; error %.4g %s budget %.4g "
             "(max output NRMSE vs fp32 over %d calibration images; all-int8 %.4g, "
             "all-fp16 %s); predicted latency %.4g %s, all-int8 %.4g, all-fp16 %.4g; "
             "%d emulated evaluations in %.1f s",
             o->flipped, o->candidates, o->error, o->error <= budget ? "<=" : ">", budget,
             s->n_images, o->error_int8, fp16_error, o->cost * scale, unit, o->cost_int8 * scale,
             o->cost_fp16 * scale, s->evaluations, (gr_now_us() - t0) * 1e-6);
    append_notice(notice, len, line);
    if (o->fallback) {
        snprintf(line, sizeof line,
                 "auto precision: even all fp16 exceeds the budget (%.4g > %.4g): running "
                 "all fp16",
                 o->error_fp16, budget);
        append_notice(notice, len, line);
    }
}

gr_status gr_auto_precision(const gr_build_request *req, gr_precision **map_out,
                            float **ranges, float *input_range, char *notice, size_t notice_len)
{
    const gr_net *net = req->net;
    if (req->device == GR_DEVICE_GPU && gr_cuda_device_count() == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "no CUDA device is visible (--device gpu)");
    search s = {.net = net, .how = req->opt.preprocess, .threads = cpu_threads(&req->opt)};
    gr_precision *map = gr_calloc((size_t)net->n_layers, sizeof *map, "precision map");
    *map_out = map; /* the caller's from here on, also on failure */
    if (!map)
        return GR_ERR_OUT_OF_MEMORY;
    double t0 = gr_now_us();
    /* int8 ranges first: the calibration (or its cache) over every calibration image. */
    gr_status st = gr_calibrate(req, ranges, input_range, notice, notice_len);
    s.ranges = *ranges;
    s.input_range = *input_range;
    const char *const *images = req->opt.calib_images;
    if (st == GR_OK && !images)
        st = gr_data_bundled_photos(&images); /* the calibration's default set */
    if (st == GR_OK)
        st = load_images(&s, images);
    /* Output sizes and the fp32 reference. */
    int heads[GR_MAX_HEADS];
    s.n_out = st == GR_OK ? gr_net_heads(net, heads, GR_MAX_HEADS) : 0;
    s.out_offset[0] = 0;
    for (int k = 0; k < s.n_out; k++) {
        s.out_elems[k] = gr_shape_elems(net->layers[heads[k]].out);
        s.out_offset[k + 1] = s.out_offset[k] + s.out_elems[k];
    }
    if (st == GR_OK) {
        s.reference = gr_malloc((size_t)s.n_images * s.out_offset[s.n_out] * sizeof(float),
                                "auto precision reference");
        st = s.reference ? evaluate(&s, NULL, s.reference, NULL) : GR_ERR_OUT_OF_MEMORY;
    }
    outcome o;
    memset(&o, 0, sizeof o);
    if (st == GR_OK)
        st = run_search(req, &s, map, &o);
    if (st == GR_OK)
        describe(req, &s, &o, map, t0, notice, notice_len);
    free(s.images);
    free(s.reference);
    return st;
}

gr_status gr_auto_precision_measure(gr_engine *e)
{
    double *t = gr_calloc((size_t)e->net->n_layers, sizeof *t, "layer times");
    if (!t)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = gr_engine_layer_times(e, t);
    double sum = 0.0;
    for (int i = 0; st == GR_OK && i < e->net->n_layers; i++)
        sum += t[i];
    free(t);
    if (st != GR_OK)
        return gr_fail_prefix(st, "auto precision: timing the chosen map: ");
    char line[200];
    snprintf(line, sizeof line,
             "auto precision: measured latency of the chosen map %.4g us (the same per-layer sum, "
             "precision boundaries' conversions included)",
             sum);
    append_notice(e->notice, sizeof e->notice, line);
    return GR_OK;
}
