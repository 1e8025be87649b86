/* Deterministic synthetic weights: a stand-in for trained .weights files, so every built-in model
 * runs (and can be benchmarked and tested) without downloading anything.
 *
 * The goal is a network that *looks* trained to everything downstream of the weights: activations
 * neither vanish nor explode through the layers, batch norm really normalizes, and the detection
 * heads produce a trained detector's value ranges, so the bundled photos give a few detections at
 * Darknet's 0.5 threshold. The detections are of course meaningless.
 *
 * Generator (all random numbers from gr_rng; layer i uses its own stream seeded from (seed, i), so
 * a layer's random draws do not depend on any other layer's shape or count):
 *   - conv weights: N(0,1) * sqrt(2 / fan_in) (He initialisation, right for leaky/relu), fan_in =
 *     (c / groups) * size * size; connected weights likewise with fan_in = inputs;
 *   - batch-normalized conv: calibrated. A forward pass of a fixed synthetic input (below) through
 *     the layers generated so far gives each output channel's pre-normalization mean m and variance
 *     v; then rolling_mean = m + 0.05*N*sqrt(v), rolling_variance = v * U(0.8, 1.2) (always
 *     positive; 1 for a channel that is constant on the input), scales = 1 + 0.1*N, biases =
 *     0.05*N. So BN output is close to N(bias, scale^2) per channel, as in a trained net, and the
 *     mean that maxpools add is removed again by the next layer's BN;
 *   - conv without batch norm (not a head) and connected layers: biases 0.05*N; a connected
 *     layer's BN, if any, is not calibrated: scales 1 + 0.1*N, rolling_mean 0.05*N,
 *     rolling_variance U(0.8, 1.2);
 *   - head convs (the conv feeding a [region] or [yolo] layer, usually linear without BN): after He
 *     initialisation each filter loses its component along the head input's mean vector (so a
 *     cell's logits do not all rise together where features are strong overall), under [yolo]
 *     each anchor's class filters are centred (so classes compete, as under [region]'s softmax),
 *     then each output channel is rescaled (weights and bias; or the BN statistics if the head has
 *     BN) to a target mean and standard deviation on the calibration input:
 *       box offsets x, y, w, h:  mean 0, spread 1;
 *       objectness logit:        spread 3, mean chosen so that about 12 anchor-cells of the head
 *                                at full resolution would exceed logit 2 (sigmoid 0.88) if the
 *                                logits were normal: mean = 2 - 3*z with Q(z) = 12 / anchor-cells
 *                                (about -4.6 for yolov2-tiny-voc's 13x13x5 head);
 *       class logits:            spread 3; mean 0 under [region]'s softmax, -6 under [yolo]'s
 *                                independent logistic (so about one class of a confident cell
 *                                passes, not half of them).
 *     The spreads are divided by 1.7 at calibration: measured on the five bundled photos, head
 *     logits spread about 1.7 times more than on the calibration image, and with this correction
 *     their spreads on the photos come out near the targets above. The constants were tuned so the
 *     photos give a few boxes at Darknet's 0.5 threshold (seed 1, before NMS: 1 to 28 per photo
 *     for yolov2-tiny-voc, 3 to 310 for yolov3-tiny); other seeds vary around that.
 * Calibration input: "dead leaves" images (opaque discs of random colour painted over each
 * other, radii from a power law between 1 pixel and a third of the image), from a fixed seed
 * independent of `seed`. Such images share photos' 1/f spectrum, sharp edges and flat regions, so
 * the statistics carry over to real pictures (smooth patterns underestimate the feature variance
 * of edges and texture by about 2x per layer). Per-channel statistics of a convolutional net are
 * nearly resolution independent, so the pass runs at a reduced input size (the larger side scaled
 * down to 160, sides multiples of 32: 160x160 for a 416x416 net, so the 13x13 layers are estimated
 * from 5x5 = 25 positions) when every layer's shape can be re-inferred there and the net has no
 * [connected] layer; otherwise at the full input size. The pass uses only the ops' CPU
 * references. yolov2-tiny-voc synthesizes in about 1 s on one core (a third drawing its 15.9M
 * normal numbers, two thirds the calibration pass).
 * Deep nets (more than DEEP_BN_LAYERS batch-normalized convolutions: yolov7-tiny, yolov4 and
 * yolov4-csp have 55 to 112; every pjreddie built-in and yolov4-tiny 6 to 19) calibrate on
 * DEEP_CAL_BATCH images with the larger side scaled down to DEEP_CAL_MAX_SIDE, not one at 160:
 * a one-image estimate of a deep layer's statistics comes from few positions (5 x 5 at 13 x 13
 * scale), and its error compounds over the normalized layers, as does the gap between the
 * calibration size and the network's. Measured (seed 1, boxes over 0.5 on data/dog.jpg before
 * NMS; one image at 160 / four at 160 / four at 320): yolov7-tiny 59,384 / 765 / 2, yolov4-csp
 * 168,865 / 91 / 0, yolov4 476,818 / 17,110 / 182 (yolov4-tiny, one image at 160: 3). The
 * shallow nets keep one image at 160: their heads hold with it, and four would cost them 4x.
 * (After NMS with graphrun's defaults: yolov7-tiny 2 detections, yolov4-csp 0, yolov4 156.)
 * `graphrun --model yolov4-csp` / `yolov4` without weights then take 36 / 46 s on one core,
 * synthesis and one CPU run at full size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/internal.h"
#include "models/net.h"

#define CAL_MAX_SIDE 160
/* A net of more than DEEP_BN_LAYERS batch-normalized convolutions calibrates on DEEP_CAL_BATCH
 * images of at most DEEP_CAL_MAX_SIDE (see the file comment). */
#define DEEP_BN_LAYERS 32
#define DEEP_CAL_BATCH 4
#define DEEP_CAL_MAX_SIDE 320
#define CAL_INPUT_SEED 0x677261706872756eULL /* "graphrun" */
#define HEAD_CONFIDENT_CELLS 12.0
#define HEAD_CONFIDENT_LOGIT 2.0
#define HEAD_LOGIT_SPREAD 3.0
#define YOLO_CLASS_MEAN -6.0
/* Head logits spread this much more on the bundled photos than on the calibration image. */
#define HEAD_PHOTO_SPREAD_RATIO 1.7

typedef struct calib {
    const gr_net *net;
    gr_weights *views;  /* per layer, into the new block */
    gr_shape input;     /* calibration input shape */
    gr_shape *shapes;   /* per layer at the calibration size */
    int batch;          /* calibration images */
    float **outputs;    /* per layer, `batch` images */
    float *input_data;
    int *decoder_of;    /* per layer: the region/yolo layer it feeds, or -1 */
} calib;

static gr_rng layer_rng(uint64_t seed, int layer)
{
    gr_rng r;
    gr_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(layer + 1)));
    return r;
}

/* Shapes of every layer for an input of `input`; false if some layer does not accept it. */
static bool infer_shapes(const gr_net *net, gr_shape input, gr_shape *shapes)
{
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        gr_shape in[GR_MAX_INPUTS];
        for (int k = 0; k < l->n_inputs; k++)
            in[k] = l->inputs[k] < 0 ? input : shapes[l->inputs[k]];
        if (gr_op_infer(&l->p, in, l->n_inputs, &shapes[i]) != GR_OK)
            return false;
    }
    return true;
}

static void choose_calibration_size(calib *cal)
{
    const gr_net *net = cal->net;
    gr_shape full = {net->c, net->h, net->w};
    int side = net->w > net->h ? net->w : net->h;
    const int max_side = cal->batch > 1 ? DEEP_CAL_MAX_SIDE : CAL_MAX_SIDE;
    bool has_connected = false;
    for (int i = 0; i < net->n_layers; i++)
        has_connected |= net->layers[i].p.op == GR_OP_CONNECTED;
    if (side > max_side && !has_connected) {
        double scale = (double)max_side / side;
        gr_shape reduced = {net->c, (int)(net->h * scale) / 32 * 32,
                            (int)(net->w * scale) / 32 * 32};
        if (reduced.h < 32)
            reduced.h = 32;
        if (reduced.w < 32)
            reduced.w = 32;
        if (infer_shapes(net, reduced, cal->shapes)) {
            cal->input = reduced;
            return;
        }
    }
    cal->input = full;
    for (int i = 0; i < net->n_layers; i++)
        cal->shapes[i] = net->layers[i].out;
}

/* A "dead leaves" image: opaque discs of random colour painted over each other, radii drawn from
 * a power law (density ~ r^-3) between 1 pixel and a third of the image. Such images share the
 * statistics of photos that matter here (a 1/f spectrum, sharp occlusion edges, flat regions,
 * scale invariance), so the calibrated statistics carry over to real pictures; smooth patterns
 * underestimate the feature variance that edges and texture produce. */
static void make_calibration_input(calib *cal)
{
    gr_rng r;
    gr_rng_seed(&r, CAL_INPUT_SEED);
    const gr_shape s = cal->input;
    const size_t plane = (size_t)s.h * (size_t)s.w;
    const double max_radius = (s.w < s.h ? s.w : s.h) / 3.0;
    /* Enough discs to cover the image several times over at every scale. */
    const int n_discs = (int)(4.0 * (double)plane / 12.0) + 64;
    for (int b = 0; b < cal->batch; b++) {
        float *img = cal->input_data + (size_t)b * gr_shape_elems(s);
        for (int c = 0; c < s.c; c++)
            for (size_t k = 0; k < plane; k++)
                img[(size_t)c * plane + k] = 0.5f;
        for (int d = 0; d < n_discs; d++) {
            double cx = (double)gr_rng_uniform(&r) * s.w, cy = (double)gr_rng_uniform(&r) * s.h;
            double radius = 1.0 / sqrt(1.0 - (double)gr_rng_uniform(&r));
            if (radius > max_radius)
                radius = max_radius;
            double luma = 0.05 + 0.9 * (double)gr_rng_uniform(&r);
            float colour[3];
            for (int c = 0; c < 3; c++) {
                double v = luma + 0.12 * (double)gr_rng_normal(&r);
                colour[c] = (float)(v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v);
            }
            int x0 = (int)(cx - radius), x1 = (int)(cx + radius) + 1;
            int y0 = (int)(cy - radius), y1 = (int)(cy + radius) + 1;
            for (int y = y0 < 0 ? 0 : y0; y < (y1 > s.h ? s.h : y1); y++) {
                for (int x = x0 < 0 ? 0 : x0; x < (x1 > s.w ? s.w : x1); x++) {
                    double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
                    if (dx * dx + dy * dy > radius * radius)
                        continue;
                    for (int c = 0; c < s.c; c++)
                        img[(size_t)c * plane + (size_t)y * s.w + x] = colour[c % 3];
                }
            }
        }
    }
}

/* Per-channel mean and variance of a `batch`-image tensor. */
static void channel_stats(const float *x, gr_shape s, int batch, int c, double *mean, double *var)
{
    const size_t plane = (size_t)s.h * (size_t)s.w;
    double sum = 0.0, sum_sq = 0.0;
    for (int b = 0; b < batch; b++) {
        const float *p = x + (size_t)b * gr_shape_elems(s) + (size_t)c * plane;
        for (size_t i = 0; i < plane; i++) {
            sum += (double)p[i];
            sum_sq += (double)p[i] * (double)p[i];
        }
    }
    double n = (double)plane * batch;
    *mean = sum / n;
    *var = sum_sq / n - *mean * *mean;
    if (*var < 0.0)
        *var = 0.0;
}

/* Run layer i's reference on the calibration tensors with (p, w) into `out`. */
static void run_layer(const calib *cal, int i, const gr_op_params *p, const gr_weights *w,
                      float *out)
{
    const gr_layer *l = &cal->net->layers[i];
    const float *in[GR_MAX_INPUTS];
    gr_shape in_shapes[GR_MAX_INPUTS];
    for (int k = 0; k < l->n_inputs; k++) {
        int from = l->inputs[k];
        in[k] = from < 0 ? cal->input_data : cal->outputs[from];
        in_shapes[k] = from < 0 ? cal->input : cal->shapes[from];
    }
    gr_op_ref(p, w, in, in_shapes, l->n_inputs, out, cal->shapes[i], cal->batch);
}

/* N(mean, stddev^2) values by Marsaglia's polar method (both values of each pair, no
 * trigonometry): drawing the weights is most of the generator's time. Double precision, so the
 * sequence only depends on gr_rng and a correctly rounding sqrt/log. */
static void fill_normal(gr_rng *r, float *x, size_t n, double mean, double stddev)
{
    for (size_t i = 0; i < n; i += 2) {
        double u, v, s;
        do {
            u = (double)(gr_rng_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
            v = (double)(gr_rng_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
            s = u * u + v * v;
        } while (s >= 1.0 || s == 0.0);
        double m = stddev * sqrt(-2.0 * log(s) / s);
        x[i] = (float)(mean + u * m);
        if (i + 1 < n)
            x[i + 1] = (float)(mean + v * m);
    }
}

/* z with P(N(0,1) > z) = tail, by bisection (tail in (0, 0.5]). */
static double normal_upper_quantile(double tail)
{
    double lo = 0.0, hi = 10.0;
    for (int it = 0; it < 80; it++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(mid / sqrt(2.0)) > tail)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Target mean and standard deviation of head channel `ch` feeding decoder `dec`. */
static void head_target(const gr_net *net, int head, const gr_layer *dec, int ch, double *mean,
                        double *stddev)
{
    int coords = dec->p.op == GR_OP_REGION ? dec->p.coords : 4;
    int entries = coords + 1 + dec->p.classes;
    int e = ch % entries;
    if (e < coords) {
        *mean = 0.0;
        *stddev = 1.0 / HEAD_PHOTO_SPREAD_RATIO;
        return;
    }
    *stddev = HEAD_LOGIT_SPREAD / HEAD_PHOTO_SPREAD_RATIO;
    if (e > coords) {
        *mean = dec->p.op == GR_OP_YOLO ? YOLO_CLASS_MEAN : 0.0;
        return;
    }
    const gr_shape out = net->layers[head].out;
    double anchor_cells = (double)out.h * out.w * (double)(out.c / entries);
    double tail = HEAD_CONFIDENT_CELLS / anchor_cells;
    if (tail > 0.5)
        tail = 0.5;
    *mean = HEAD_CONFIDENT_LOGIT - HEAD_LOGIT_SPREAD * normal_upper_quantile(tail);
}

/* Pre-normalization output of conv layer i (zero bias, no BN, linear) into cal->outputs[i]. */
static void run_conv_linear(const calib *cal, int i, const gr_weights *w, float *zero_bias)
{
    gr_op_params p = cal->net->layers[i].p;
    p.batch_normalize = 0;
    p.activation = GR_ACT_LINEAR;
    gr_weights plain = *w;
    plain.biases = zero_bias;
    plain.scales = plain.rolling_mean = plain.rolling_variance = NULL;
    run_layer(cal, i, &p, &plain, cal->outputs[i]);
}

/* Apply Darknet's inference batch norm and the activation in place (as the conv reference does). */
static void apply_bn(float *x, gr_shape s, int batch, const gr_op_params *p, const gr_weights *w)
{
    const size_t plane = (size_t)s.h * (size_t)s.w;
    for (int b = 0; b < batch; b++) {
        for (int c = 0; c < s.c; c++) {
            float *v = x + (size_t)b * gr_shape_elems(s) + (size_t)c * plane;
            double denom = gr_bn_denominator(p->alexeyab, w->rolling_variance[c]);
            for (size_t k = 0; k < plane; k++) {
                float normalized = (float)((double)(v[k] - w->rolling_mean[c]) / denom);
                v[k] = gr_activate(normalized * w->scales[c] + w->biases[c], p->activation);
            }
        }
    }
}

/* Make every output channel of head conv i blind to the mean of its input: remove from each
 * filter its component along the (per-tap repeated) mean input vector. Otherwise all logits of a
 * cell move together wherever the features are strong overall (high-contrast texture), which
 * makes every class of such cells "confident" at once - not how a trained head behaves. */
static void decorrelate_from_mean_input(const calib *cal, int i, gr_weights *w)
{
    const gr_layer *l = &cal->net->layers[i];
    const int from = l->inputs[0];
    const gr_shape in = from < 0 ? cal->input : cal->shapes[from];
    const float *x = from < 0 ? cal->input_data : cal->outputs[from];
    const int in_per_group = in.c / l->p.groups, out_per_group = l->p.filters / l->p.groups;
    const size_t taps = (size_t)l->p.size * (size_t)l->p.size;
    const size_t fan_in = (size_t)in_per_group * taps;
    for (int oc = 0; oc < w->n; oc++) {
        const int group = oc / out_per_group;
        float *kernel = w->weights + (size_t)oc * fan_in;
        double dot = 0.0, norm = 0.0;
        for (int ic = 0; ic < in_per_group; ic++) {
            double mean, var;
            channel_stats(x, in, cal->batch, group * in_per_group + ic, &mean, &var);
            for (size_t t = 0; t < taps; t++) {
                dot += (double)kernel[(size_t)ic * taps + t] * mean;
                norm += mean * mean;
            }
        }
        if (norm <= 0.0)
            continue;
        for (int ic = 0; ic < in_per_group; ic++) {
            double mean, var;
            channel_stats(x, in, cal->batch, group * in_per_group + ic, &mean, &var);
            for (size_t t = 0; t < taps; t++)
                kernel[(size_t)ic * taps + t] =
                    (float)((double)kernel[(size_t)ic * taps + t] - dot / norm * mean);
        }
    }
}

/* [yolo] scores every class with its own logistic, so classes do not compete as under [region]'s
 * softmax. Centre each anchor's class filters (subtract their mean filter): the class logits of a
 * cell then sum to a constant, one class standing out means the others stand back, and a
 * confident cell does not pass a dozen classes at once. */
static void centre_yolo_class_filters(const calib *cal, int i, const gr_layer *dec, gr_weights *w)
{
    const gr_layer *l = &cal->net->layers[i];
    const int entries = 5 + dec->p.classes;
    const size_t fan_in = w->n_weights / (size_t)w->n;
    if (dec->p.classes < 2 || l->p.filters % entries != 0)
        return;
    for (int a = 0; a < l->p.filters / entries; a++) {
        float *first = w->weights + (size_t)(a * entries + 5) * fan_in;
        for (size_t k = 0; k < fan_in; k++) {
            double mean = 0.0;
            for (int j = 0; j < dec->p.classes; j++)
                mean += (double)first[(size_t)j * fan_in + k];
            mean /= dec->p.classes;
            for (int j = 0; j < dec->p.classes; j++) {
                float *weight = &first[(size_t)j * fan_in + k];
                *weight = (float)((double)*weight - mean);
            }
        }
    }
}

static void synthesize_conv(calib *cal, int i, gr_rng *r, float *zero_bias)
{
    const gr_net *net = cal->net;
    const gr_layer *l = &net->layers[i];
    gr_weights *w = &cal->views[i];
    const gr_shape s = cal->shapes[i];
    size_t fan_in = w->n_weights / (size_t)w->n;
    fill_normal(r, w->weights, w->n_weights, 0.0, sqrt(2.0 / (double)fan_in));
    int dec = cal->decoder_of[i];

    if (!l->p.batch_normalize && dec < 0) {
        fill_normal(r, w->biases, (size_t)w->n, 0.0, 0.05);
        run_layer(cal, i, &l->p, w, cal->outputs[i]);
        return;
    }
    if (dec >= 0) {
        decorrelate_from_mean_input(cal, i, w);
        if (net->layers[dec].p.op == GR_OP_YOLO)
            centre_yolo_class_filters(cal, i, &net->layers[dec], w);
    }
    run_conv_linear(cal, i, w, zero_bias);
    for (int c = 0; c < w->n; c++) {
        double mean, var;
        channel_stats(cal->outputs[i], s, cal->batch, c, &mean, &var);
        if (var < 1e-12)
            var = 1.0; /* a channel constant on this input: nothing to normalize */
        double target_mean = 0.0, target_std = 1.0;
        bool head = dec >= 0;
        if (head)
            head_target(net, i, &net->layers[dec], c, &target_mean, &target_std);
        if (l->p.batch_normalize) {
            double mean_jitter = (double)gr_rng_normal(r), var_jitter = (double)gr_rng_uniform(r);
            double scale_jitter = (double)gr_rng_normal(r), bias_jitter = (double)gr_rng_normal(r);
            if (head) {
                w->rolling_mean[c] = (float)mean;
                w->rolling_variance[c] = (float)var;
                w->scales[c] = (float)target_std;
                w->biases[c] = (float)target_mean;
            } else {
                w->rolling_mean[c] = (float)(mean + 0.05 * mean_jitter * sqrt(var));
                w->rolling_variance[c] = (float)(var * (0.8 + 0.4 * var_jitter));
                w->scales[c] = (float)(1.0 + 0.1 * scale_jitter);
                w->biases[c] = (float)(0.05 * bias_jitter);
            }
        } else {
            /* Head without BN: rescale the channel's weights and set its bias. */
            double gain = target_std / sqrt(var);
            float *kernel = w->weights + (size_t)c * fan_in;
            for (size_t k = 0; k < fan_in; k++)
                kernel[k] = (float)((double)kernel[k] * gain);
            w->biases[c] = (float)(target_mean - mean * gain);
        }
    }
    if (l->p.batch_normalize)
        apply_bn(cal->outputs[i], s, cal->batch, &l->p, w);
    else
        run_layer(cal, i, &l->p, w, cal->outputs[i]);
}

static void synthesize_connected(calib *cal, int i, gr_rng *r)
{
    const gr_layer *l = &cal->net->layers[i];
    gr_weights *w = &cal->views[i];
    size_t fan_in = w->n_weights / (size_t)w->n;
    fill_normal(r, w->weights, w->n_weights, 0.0, sqrt(2.0 / (double)fan_in));
    fill_normal(r, w->biases, (size_t)w->n, 0.0, 0.05);
    if (l->p.batch_normalize) {
        fill_normal(r, w->scales, (size_t)w->n, 1.0, 0.1);
        fill_normal(r, w->rolling_mean, (size_t)w->n, 0.0, 0.05);
        for (int c = 0; c < w->n; c++)
            w->rolling_variance[c] = 0.8f + 0.4f * gr_rng_uniform(r);
    }
    run_layer(cal, i, &l->p, w, cal->outputs[i]);
}

static void calib_free(calib *cal)
{
    if (cal->outputs)
        for (int i = 0; i < cal->net->n_layers; i++)
            free(cal->outputs[i]);
    free(cal->outputs);
    free(cal->shapes);
    free(cal->views);
    free(cal->input_data);
    free(cal->decoder_of);
}

static gr_status calib_alloc(calib *cal)
{
    const gr_net *net = cal->net;
    size_t n = (size_t)net->n_layers;
    cal->views = gr_calloc(n, sizeof *cal->views, "synthetic weight views");
    cal->shapes = gr_calloc(n, sizeof *cal->shapes, "calibration shapes");
    cal->outputs = gr_calloc(n, sizeof *cal->outputs, "calibration outputs");
    cal->decoder_of = gr_calloc(n, sizeof *cal->decoder_of, "calibration heads");
    if (!cal->views || !cal->shapes || !cal->outputs || !cal->decoder_of)
        return GR_ERR_OUT_OF_MEMORY;
    int bn_layers = 0;
    for (int i = 0; i < net->n_layers; i++)
        bn_layers += net->layers[i].p.op == GR_OP_CONV && net->layers[i].p.batch_normalize;
    cal->batch = bn_layers > DEEP_BN_LAYERS ? DEEP_CAL_BATCH : 1;
    choose_calibration_size(cal);
    cal->input_data = gr_calloc(gr_shape_elems(cal->input), (size_t)cal->batch * sizeof(float),
                                "calibration input");
    if (!cal->input_data)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < net->n_layers; i++) {
        cal->decoder_of[i] = -1;
        cal->outputs[i] = gr_calloc(gr_shape_elems(cal->shapes[i]),
                                    (size_t)cal->batch * sizeof(float), "calibration activations");
        if (!cal->outputs[i])
            return GR_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (gr_op_has((int)l->p.op, GR_OPF_HEAD) && l->inputs[0] >= 0 &&
            net->layers[l->inputs[0]].p.op == GR_OP_CONV)
            cal->decoder_of[l->inputs[0]] = i;
    }
    return GR_OK;
}

gr_status gr_net_synthesize_weights(gr_net *net, uint64_t seed)
{
    if (!net || net->n_layers <= 0 || !net->layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_synthesize_weights: no network");
    size_t n_floats;
    GR_TRY(gr_net_param_floats(net, &n_floats));
    calib cal;
    memset(&cal, 0, sizeof cal);
    cal.net = net;
    float *block = gr_calloc(n_floats, sizeof(float), "synthetic weights");
    float *zero_bias = NULL;
    gr_status st = block ? calib_alloc(&cal) : GR_ERR_OUT_OF_MEMORY;
    if (st == GR_OK) {
        int max_filters = 1;
        for (int i = 0; i < net->n_layers; i++)
            if (net->layers[i].p.filters > max_filters)
                max_filters = net->layers[i].p.filters;
        zero_bias = gr_calloc((size_t)max_filters, sizeof(float), "zero biases");
        if (!zero_bias)
            st = GR_ERR_OUT_OF_MEMORY;
    }
    if (st != GR_OK) {
        calib_free(&cal);
        free(block);
        free(zero_bias);
        return st;
    }
    size_t offset = 0;
    for (int i = 0; i < net->n_layers; i++)
        offset += gr_layer_param_floats(net, i, block + offset, &cal.views[i]);
    make_calibration_input(&cal);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        gr_rng r = layer_rng(seed, i);
        if (l->p.op == GR_OP_CONV)
            synthesize_conv(&cal, i, &r, zero_bias);
        else if (l->p.op == GR_OP_CONNECTED)
            synthesize_connected(&cal, i, &r);
        else
            run_layer(&cal, i, &l->p, &cal.views[i], cal.outputs[i]);
    }
    calib_free(&cal);
    free(zero_bias);
    gr_net_attach_weights(net, block, n_floats);
    net->synthetic = 1;
    return GR_OK;
}
