/* CPU execution of plans: fp32 against the ops references (exact without BN folding, within float
 * rounding with it), the int8 and fp16 epilogue spec reproduced bit for bit on a single conv,
 * maxpool fusion, reduced-precision accuracy after calibration, and the calibration table. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "runtime/cpu/reference.h"
#include "tests/support/plan_nets.h"

/* Built in main() before the tests fork (synthetic weights take a moment). */
static gr_net *v2_128, *v3_128, *v2_64, *v3_64;

static float *float_image(int c, int h, int w, int batch, uint64_t seed)
{
    size_t n = (size_t)batch * c * h * w;
    float *v = malloc(n * sizeof *v);
    gr_rng r;
    gr_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = gr_rng_uniform(&r);
    return v;
}

/* A u8 NHWC image and the same values as float NCHW (v / 255). */
static void paired_images(int c, int h, int w, int batch, uint64_t seed, uint8_t **u8, float **f)
{
    size_t n = (size_t)batch * c * h * w;
    *u8 = malloc(n);
    *f = malloc(n * sizeof **f);
    gr_rng r;
    gr_rng_seed(&r, seed);
    for (int b = 0; b < batch; b++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < c; ch++) {
                    /* smooth pattern plus noise, like a photo */
                    int v = (int)(128.0f +
                                  90.0f * sinf(0.11f * (float)(x + 3 * ch)) *
                                      cosf(0.07f * (float)(y + b)) +
                                  30.0f * gr_rng_uniform(&r));
                    v = v < 0 ? 0 : (v > 255 ? 255 : v);
                    (*u8)[(((size_t)b * h + y) * w + x) * c + ch] = (uint8_t)v;
                    (*f)[(((size_t)b * c + ch) * h + y) * w + x] = (float)v / 255.0f;
                }
}

static gr_plan *build(const gr_net *net, gr_precision prec, int batch, int fold_bn, int fuse)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    opt.fold_bn = fold_bn;
    opt.fuse_maxpool = fuse;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    return p;
}

static size_t tensor_elems(const gr_plan_tensor *t)
{
    return (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
}

/* Run and copy output k. */
static float *run_output(const gr_plan *p, const void *input, int k)
{
    gr_plan_exec *ex = NULL;
    ck_assert_int_eq(gr_plan_exec_create(p, 0, &ex), GR_OK);
    ck_assert_msg(gr_plan_execute(ex, input) == GR_OK, "%s", gr_last_error());
    size_t n = tensor_elems(&p->tensors[p->output_tensors[k]]);
    float *out = malloc(n * sizeof *out);
    memcpy(out, gr_plan_exec_output(ex, k), n * sizeof *out);
    gr_plan_exec_destroy(ex);
    return out;
}

START_TEST(fp32_plan_without_folding_equals_the_reference_exactly)
{
    const gr_net *nets[2] = {v2_128, v3_128};
    for (int m = 0; m < 2; m++) {
        const gr_net *net = nets[m];
        float *input = float_image(net->c, net->h, net->w, 2, 11);
        float **ref = calloc((size_t)net->n_layers, sizeof *ref);
        ck_assert_int_eq(gr_reference_forward(net, input, 2, 0, ref), GR_OK);
        gr_plan *p = build(net, GR_PREC_FP32, 2, 0, 0);
        int heads[4];
        int n_heads = gr_net_heads(net, heads, 4);
        ck_assert_int_eq(n_heads, p->n_outputs);
        for (int k = 0; k < n_heads; k++) {
            float *out = run_output(p, input, k);
            size_t n = tensor_elems(&p->tensors[p->output_tensors[k]]);
            ck_assert_int_eq(memcmp(out, ref[heads[k]], n * sizeof *out), 0);
            free(out);
        }
        for (int l = 0; l < net->n_layers; l++)
            free(ref[l]);
        free(ref);
        free(input);
        gr_plan_free(p);
    }
}
END_TEST

START_TEST(fp32_random_dags_equal_the_reference_exactly)
{
    /* Route, shortcut (mismatched channels), upsample, reorg, several heads, in-place and concat
     * views all execute exactly like the op references. */
    for (uint64_t seed = 1; seed <= 100; seed++) {
        gr_net *net = NULL;
        ck_assert_int_eq(gr_test_random_net(seed, &net), GR_OK);
        float *input = float_image(net->c, net->h, net->w, 2, seed);
        float **ref = calloc((size_t)net->n_layers, sizeof *ref);
        ck_assert_int_eq(gr_reference_forward(net, input, 2, 0, ref), GR_OK);
        gr_plan *p = build(net, GR_PREC_FP32, 2, 0, 0);
        int heads[16];
        int n_heads = gr_net_heads(net, heads, 16);
        ck_assert_int_eq(n_heads, p->n_outputs);
        for (int k = 0; k < n_heads; k++) {
            float *out = run_output(p, input, k);
            size_t n = tensor_elems(&p->tensors[p->output_tensors[k]]);
            ck_assert_msg(memcmp(out, ref[heads[k]], n * sizeof *out) == 0, "seed %llu head %d",
                          (unsigned long long)seed, k);
            free(out);
        }
        for (int l = 0; l < net->n_layers; l++)
            free(ref[l]);
        free(ref);
        free(input);
        gr_plan_free(p);
        gr_net_free(net);
    }
}
END_TEST

START_TEST(bn_folding_and_epilogue_fusion_change_results_only_by_rounding)
{
    const gr_net *net = v2_128;
    float *input = float_image(net->c, net->h, net->w, 1, 12);
    float **ref = calloc((size_t)net->n_layers, sizeof *ref);
    ck_assert_int_eq(gr_reference_forward(net, input, 1, 0, ref), GR_OK);
    gr_plan *p = build(net, GR_PREC_FP32, 1, 1, 1);
    float *out = run_output(p, input, 0);
    const float *expect = ref[net->n_layers - 2];
    size_t n = tensor_elems(&p->tensors[p->output_tensors[0]]);
    double max_ref = 0.0, max_diff = 0.0;
    size_t differing = 0;
    for (size_t i = 0; i < n; i++) {
        max_ref = fmax(max_ref, fabs((double)expect[i]));
        max_diff = fmax(max_diff, fabs((double)out[i] - (double)expect[i]));
        differing += out[i] != expect[i];
    }
    /* Folding moves BN's multiply into the weights, so each product rounds differently: a few
     * ulps (~1e-7 relative) per conv, accumulated over sums of up to 9216 products and 9 layers
     * (~1e-5 of the head's range measured). 1e-4 of the range leaves a 10x margin; a wrong fold
     * (scale or mean missing, a channel off by one) is off by O(1) of the range. */
    ck_assert_double_le(max_diff, 1e-4 * max_ref);
    ck_assert_uint_gt(differing, 0); /* it really is a different computation */
    free(out);
    for (int l = 0; l < net->n_layers; l++)
        free(ref[l]);
    free(ref);
    free(input);
    gr_plan_free(p);
}
END_TEST

static const char *one_conv_cfg = "[net]\nwidth=6\nheight=5\nchannels=3\n"
                                  "[convolutional]\nbatch_normalize=1\nfilters=5\nsize=3\n"
                                  "stride=1\npad=1\nactivation=leaky\n";

static float clamp127(float v) { return v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v); }

static int conv_node(const gr_plan *p)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].kind == GR_OP_CONV)
            return i;
    return -1;
}

/* The epilogue spec for one_conv_cfg (3x5x6 u8 input, 5 filters 3x3 pad 1, leaky), written out
 * independently of the executor: y[(oc*5 + y)*6 + x] after the activation and before the output
 * conversion. compute is the dtype the conv runs on (i8: q_in with scale s_in; f16: half inputs
 * and weights, f32 accumulation in (input channel, ky, kx) order: the CPU emulation's order; a
 * GPU's order differs by f32 rounding only). */
static void one_conv_spec(const gr_plan *p, const gr_plan_node *conv, const uint8_t *u8,
                          gr_dtype compute, float s_in, float *out_y)
{
    const float *w = p->weights + conv->w_offset, *bias = p->weights + conv->b_offset;
    float x_in[3][5][6];
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 6; x++) {
                float v = (float)u8[(y * 6 + x) * 3 + c] / 255.0f;
                x_in[c][y][x] =
                    compute == GR_DTYPE_I8 ? clamp127(rintf(v / s_in)) : gr_round_f16(v);
            }
    for (int oc = 0; oc < 5; oc++) {
        float max_abs = 0.0f;
        for (int k = 0; k < 27; k++)
            max_abs = fmaxf(max_abs, fabsf(w[oc * 27 + k]));
        float s_w = max_abs / 127.0f;
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 6; x++) {
                int acc_q = 0;
                float acc = 0.0f;
                for (int ic = 0; ic < 3; ic++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = y + ky - 1, ix = x + kx - 1;
                            if (iy < 0 || iy >= 5 || ix < 0 || ix >= 6)
                                continue;
                            float wk = w[oc * 27 + ic * 9 + ky * 3 + kx];
                            if (compute == GR_DTYPE_I8)
                                acc_q += (int)x_in[ic][iy][ix] * (int)clamp127(rintf(wk / s_w));
                            else
                                acc += gr_round_f16(wk) * x_in[ic][iy][ix];
                        }
                float v = compute == GR_DTYPE_I8 ? fmaf((float)acc_q, s_in * s_w, bias[oc])
                                                 : acc + bias[oc];
                out_y[(oc * 5 + y) * 6 + x] = v > 0.0f ? v : 0.1f * v;
            }
    }
}

START_TEST(int8_conv_follows_the_epilogue_spec_bit_for_bit)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(one_conv_cfg, strlen(one_conv_cfg), "one.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 5), GR_OK);
    gr_plan *p = build(net, GR_PREC_INT8, 1, 1, 0);
    float range = 2.5f;
    ck_assert_int_eq(gr_plan_set_ranges(p, &range, 1.0f), GR_OK);
    const gr_plan_node *conv = &p->nodes[conv_node(p)];
    const gr_plan_tensor *in_t = &p->tensors[conv->inputs[0]], *out_t = &p->tensors[conv->output];
    ck_assert_int_eq(in_t->c_pad, 16);
    ck_assert_int_eq(out_t->c_pad, 16);
    float s_in = in_t->scale, s_out = out_t->scale;
    ck_assert(s_in == 1.0f / 127.0f);
    ck_assert(s_out == 2.5f / 127.0f);

    uint8_t *u8;
    float *unused, y[150];
    paired_images(3, 5, 6, 1, 21, &u8, &unused);
    float *out = run_output(p, u8, 0);
    one_conv_spec(p, conv, u8, GR_DTYPE_I8, s_in, y);
    size_t mismatches = 0;
    for (int i = 0; i < 150; i++)
        mismatches += out[i] != clamp127(rintf(y[i] * (1.0f / s_out))) * s_out;
    ck_assert_uint_eq(mismatches, 0);
    free(out);
    free(u8);
    free(unused);
    gr_plan_free(p);
    gr_net_free(net);
}
END_TEST

START_TEST(fp16_conv_follows_the_epilogue_spec_bit_for_bit)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(one_conv_cfg, strlen(one_conv_cfg), "one.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 5), GR_OK);
    gr_plan *p = build(net, GR_PREC_FP16, 1, 1, 0);
    const gr_plan_node *conv = &p->nodes[conv_node(p)];
    ck_assert_int_eq(p->tensors[conv->output].c_pad, 8);
    uint8_t *u8;
    float *unused, y[150];
    paired_images(3, 5, 6, 1, 22, &u8, &unused);
    float *out = run_output(p, u8, 0);
    one_conv_spec(p, conv, u8, GR_DTYPE_F16, 0.0f, y);
    size_t mismatches = 0;
    for (int i = 0; i < 150; i++)
        mismatches += out[i] != gr_round_f16(y[i]);
    ck_assert_uint_eq(mismatches, 0);
    free(out);
    free(u8);
    free(unused);
    gr_plan_free(p);
    gr_net_free(net);
}
END_TEST

/* Both I/O fusions on one conv: it reads the u8 input (quantizing as the removed quantize did)
 * and writes f32 straight from its epilogue, so the plan's output is the spec's y itself. */
START_TEST(fused_io_conv_writes_the_unrounded_epilogue_value)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(one_conv_cfg, strlen(one_conv_cfg), "one.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 5), GR_OK);
    uint8_t *u8;
    float *unused, y[150];
    paired_images(3, 5, 6, 1, 23, &u8, &unused);
    for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
        gr_plan_options opt;
        gr_plan_options_default(&opt);
        opt.precision = (gr_precision)prec;
        opt.fuse_input_quantize = 1;
        opt.fuse_output_dequantize = 1;
        gr_plan *p = NULL;
        ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
        /* input, conv, output: the quantize and the dequantize are gone */
        ck_assert_int_eq(p->n_nodes, 3);
        ck_assert_int_eq(p->fused_nodes_removed, 2);
        const gr_plan_node *conv = &p->nodes[conv_node(p)];
        gr_dtype compute = prec == GR_PREC_INT8 ? GR_DTYPE_I8 : GR_DTYPE_F16;
        ck_assert_uint_eq(conv->fused & (GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT),
                          GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT);
        ck_assert_uint_eq(conv->fused & (GR_FUSED_REQUANT | GR_FUSED_CONVERT), 0);
        ck_assert_int_eq(conv->in_dtype, compute);
        ck_assert_int_eq(p->tensors[conv->inputs[0]].dtype, GR_DTYPE_U8);
        ck_assert_int_eq(p->tensors[conv->output].dtype, GR_DTYPE_F32);
        ck_assert_int_eq(p->tensors[conv->output].layout, GR_LAYOUT_NCHW);
        ck_assert_int_eq(p->scales_ready, prec != GR_PREC_INT8);
        float range = 2.5f;
        ck_assert_int_eq(gr_plan_set_ranges(p, &range, 0.8f), GR_OK);
        float s_in = prec == GR_PREC_INT8 ? 0.8f / 127.0f : 0.0f;
        ck_assert(conv->in_scale == s_in);
        float *out = run_output(p, u8, 0);
        one_conv_spec(p, conv, u8, compute, s_in, y);
        ck_assert_int_eq(memcmp(out, y, sizeof y), 0);
        free(out);
        gr_plan_free(p);
    }
    free(u8);
    free(unused);
    gr_net_free(net);
}
END_TEST

static gr_plan *build_fused_io_concat(const gr_net *net, gr_precision prec, int batch,
                                      int quant_in, int dequant_out, int concat_in_place)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    opt.fuse_input_quantize = quant_in;
    opt.fuse_output_dequantize = dequant_out;
    opt.concat_in_place = concat_in_place;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    float ranges[GR_MAX_LAYERS];
    for (int l = 0; l < net->n_layers; l++)
        ranges[l] = 4.0f + 0.25f * (float)(l % 5); /* a few distinct scales */
    ck_assert_int_eq(gr_plan_set_ranges(p, ranges, 0.9f), GR_OK);
    return p;
}

static gr_plan *build_fused_io(const gr_net *net, gr_precision prec, int batch, int quant_in,
                               int dequant_out)
{
    return build_fused_io_concat(net, prec, batch, quant_in, dequant_out, 1);
}

/* Plans of yolov2-tiny-voc and yolov3-tiny (64 x 64: every layer kind, a quarter of the work of
 * 128 x 128), fp16 and int8, batch 1 and 2, built
 * without and with the I/O fusions asked for, run on the same u8 images; compare() gets every
 * output pair. Checks each fused plan loses its conversion nodes and stays a valid placement. */
typedef void (*io_compare)(const gr_plan *plain, int k, int prec, const float *plain_out,
                           const float *fused_out, size_t n);

static void for_each_io_fusion_case(int quant_in, int dequant_out, io_compare compare)
{
    const gr_net *nets[2] = {v2_64, v3_64};
    for (int m = 0; m < 2; m++)
        for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++)
            for (int batch = 1; batch <= 2; batch++) {
                const gr_net *net = nets[m];
                uint8_t *u8;
                float *unused;
                paired_images(3, net->h, net->w, batch, 41 + (uint64_t)batch, &u8, &unused);
                gr_plan *plain = build_fused_io(net, (gr_precision)prec, batch, 0, 0);
                gr_plan *fused =
                    build_fused_io(net, (gr_precision)prec, batch, quant_in, dequant_out);
                ck_assert_int_eq(fused->n_nodes,
                                 plain->n_nodes - quant_in - dequant_out * plain->n_outputs);
                ck_assert_int_eq(gr_plan_count_kind(fused, GR_OP_QUANTIZE), 1 - quant_in);
                ck_assert_int_eq(gr_plan_count_kind(fused, GR_OP_DEQUANTIZE),
                                 (1 - dequant_out) * plain->n_outputs);
                ck_assert_int_eq(gr_plan_check(fused), GR_OK);
                gr_plan_exec *ea = NULL, *eb = NULL;
                ck_assert_int_eq(gr_plan_exec_create(plain, 0, &ea), GR_OK);
                ck_assert_int_eq(gr_plan_exec_create(fused, 0, &eb), GR_OK);
                ck_assert_int_eq(gr_plan_execute(ea, u8), GR_OK);
                ck_assert_int_eq(gr_plan_execute(eb, u8), GR_OK);
                for (int k = 0; k < plain->n_outputs; k++)
                    compare(plain, k, prec, gr_plan_exec_output(ea, k), gr_plan_exec_output(eb, k),
                            tensor_elems(&plain->tensors[plain->output_tensors[k]]));
                gr_plan_exec_destroy(ea);
                gr_plan_exec_destroy(eb);
                gr_plan_free(plain);
                gr_plan_free(fused);
                free(u8);
                free(unused);
            }
}

static void expect_identical(const gr_plan *plain, int k, int prec, const float *a, const float *b,
                             size_t n)
{
    (void)plain;
    ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "output %d prec %d", k, prec);
}

START_TEST(fused_input_quantize_is_bit_identical)
{
    for_each_io_fusion_case(1, 0, expect_identical);
}
END_TEST

/* The unfused plan rounds the head conv's y to its storage and dequantizes; the fused one writes y.
 * So, exactly: int8 unfused = clamp(rint(y / s_out)) * s_out, which is within s_out / 2 of y where
 * |y| stays inside the int8 range (one step s_out is the bound asserted); fp16 unfused =
 * half_rn(y), within half an f16 ulp of y (2^-11 relative; 2^-25 absolute near zero). */
static void expect_rounding_removed(const gr_plan *plain, int k, int prec, const float *a,
                                    const float *b, size_t n)
{
    const gr_plan_node *dq = &plain->nodes[plain->tensors[plain->output_tensors[k]].producer];
    float s_out = plain->tensors[dq->inputs[0]].scale, inv = 1.0f / s_out;
    size_t mismatches = 0, off_bound = 0, differing = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        differing += a[i] != b[i];
        if (prec == GR_PREC_INT8) {
            mismatches += a[i] != clamp127(rintf(b[i] * inv)) * s_out;
            off_bound += fabsf(b[i]) < 127.0f * s_out && d > s_out;
        } else {
            mismatches += a[i] != gr_round_f16(b[i]);
            off_bound += d > fabsf(b[i]) * 0x1p-11f + 0x1p-25f;
        }
    }
    ck_assert_uint_eq(mismatches, 0);
    ck_assert_uint_eq(off_bound, 0);
    ck_assert_uint_gt(differing, 0); /* the rounding really is gone */
}

START_TEST(fused_output_dequantize_rounds_only_where_the_unfused_plan_did)
{
    for_each_io_fusion_case(0, 1, expect_rounding_removed);
}
END_TEST

/* The concat head (tests/data/concat_head.cfg, YOLOv8's ONNX head): with its dequantize fused,
 * each conv writes its unrounded y into its strided slice of the f32 output (batch 2): against
 * the unfused plan (whose slices share the concat's one scale) exactly the rounding is gone, and
 * the views equal the f32 copy of concat_in_place = 0 bit for bit. */
START_TEST(concat_head_convs_write_their_slices_unrounded)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_test_concat_head_net(&net) == GR_OK, "%s", gr_last_error());
    uint8_t *u8;
    float *unused;
    paired_images(3, net->h, net->w, 2, 57, &u8, &unused);
    for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
        gr_plan *plain = build_fused_io_concat(net, (gr_precision)prec, 2, 1, 0, 1);
        gr_plan *views = build_fused_io_concat(net, (gr_precision)prec, 2, 1, 1, 1);
        gr_plan *copy = build_fused_io_concat(net, (gr_precision)prec, 2, 1, 1, 0);
        ck_assert_int_eq(gr_plan_count_kind(plain, GR_OP_DEQUANTIZE), 1);
        ck_assert_int_eq(gr_plan_count_kind(views, GR_OP_DEQUANTIZE), 0);
        ck_assert_int_eq(gr_plan_count_kind(copy, GR_OP_DEQUANTIZE), 0);
        float *a = run_output(plain, u8, 0), *b = run_output(views, u8, 0),
              *c = run_output(copy, u8, 0);
        size_t n = tensor_elems(&plain->tensors[plain->output_tensors[0]]);
        expect_rounding_removed(plain, 0, prec, a, b, n);
        ck_assert_int_eq(memcmp(b, c, n * sizeof *b), 0);
        free(a);
        free(b);
        free(c);
        gr_plan_free(plain);
        gr_plan_free(views);
        gr_plan_free(copy);
    }
    free(u8);
    free(unused);
    gr_net_free(net);
}
END_TEST

START_TEST(fused_maxpool_is_bit_identical_in_every_precision)
{
    const gr_net *net = v2_64;
    uint8_t *u8;
    float *f;
    paired_images(3, net->h, net->w, 2, 31, &u8, &f);
    float ranges[16];
    for (int l = 0; l < 16; l++)
        ranges[l] = 6.0f; /* one scale everywhere, so pooling before or after requantizing agree */
    for (int prec = 0; prec < 3; prec++) {
        gr_plan *plain = build(net, (gr_precision)prec, 2, 1, 0);
        gr_plan *fused = build(net, (gr_precision)prec, 2, 1, 1);
        ck_assert_int_eq(fused->fused_nodes_removed, 6);
        ck_assert_int_eq(gr_plan_set_ranges(plain, ranges, 1.0f), GR_OK);
        ck_assert_int_eq(gr_plan_set_ranges(fused, ranges, 1.0f), GR_OK);
        const void *input = prec == GR_PREC_FP32 ? (const void *)f : (const void *)u8;
        float *a = run_output(plain, input, 0), *b = run_output(fused, input, 0);
        size_t n = tensor_elems(&plain->tensors[plain->output_tensors[0]]);
        ck_assert_int_eq(memcmp(a, b, n * sizeof *a), 0);
        free(a);
        free(b);
        gr_plan_free(plain);
        gr_plan_free(fused);
    }
    free(u8);
    free(f);
}
END_TEST

/* yolov4-tiny's three [route] groups=2 group_id=1 read through views of their inputs' second
 * halves (planner/pass_concat.c): every output equals the plan that copies them, bit for bit, in
 * every precision (fp32 at batch 1, where its NCHW slice is dense; fp16 / int8 at batch 2). */
START_TEST(route_group_views_equal_the_copies_bit_for_bit)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_test_builtin_at("yolov4-tiny.cfg", 64, &net) == GR_OK, "%s", gr_last_error());
    for (int prec = 0; prec < 3; prec++) {
        const int batch = prec == GR_PREC_FP32 ? 1 : 2;
        uint8_t *u8;
        float *f;
        paired_images(3, net->h, net->w, batch, 47, &u8, &f);
        gr_plan *plans[2];
        for (int k = 0; k < 2; k++) {
            gr_plan_options opt;
            gr_plan_options_default(&opt);
            opt.precision = (gr_precision)prec;
            opt.batch = batch;
            opt.concat_in_place = k == 0; /* 0: every route copies */
            ck_assert_msg(gr_plan_build(net, &opt, &plans[k]) == GR_OK, "%s", gr_last_error());
            float *ranges = malloc((size_t)plans[k]->n_layers * sizeof *ranges);
            ck_assert_ptr_nonnull(ranges);
            for (int l = 0; l < plans[k]->n_layers; l++)
                ranges[l] = 6.0f;
            ck_assert_int_eq(gr_plan_set_ranges(plans[k], ranges, 1.0f), GR_OK);
            free(ranges);
        }
        int views = 0;
        for (int i = 0; i < plans[0]->n_nodes; i++) {
            const gr_plan_node *nd = &plans[0]->nodes[i];
            if (nd->kind != GR_OP_ROUTE || nd->p.groups < 2)
                continue;
            ck_assert_int_eq(plans[1]->nodes[i].noop, 0);
            ck_assert_msg(nd->noop, "precision %d: route of layer %d copies", prec, nd->layer);
            const gr_plan_tensor *x = &plans[0]->tensors[nd->inputs[0]];
            const gr_plan_tensor *y = &plans[0]->tensors[nd->output];
            const int root = x->view_of >= 0 ? x->view_of : nd->inputs[0];
            ck_assert_int_eq(y->view_of, root);
            ck_assert_int_eq(y->c * 2, x->c);
            ck_assert_int_eq(y->c_offset, (x->view_of >= 0 ? x->c_offset : 0) + y->c);
            ck_assert_int_eq(y->c_stride, plans[0]->tensors[root].c_stride);
            ck_assert_int_eq(y->buffer, plans[0]->tensors[root].buffer);
            views++;
        }
        ck_assert_int_eq(views, 3);
        ck_assert_int_eq(gr_plan_check(plans[0]), GR_OK);
        const void *input = prec == GR_PREC_FP32 ? (const void *)f : (const void *)u8;
        for (int k = 0; k < plans[0]->n_outputs; k++) {
            float *a = run_output(plans[0], input, k), *b = run_output(plans[1], input, k);
            size_t n = tensor_elems(&plans[0]->tensors[plans[0]->output_tensors[k]]);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "precision %d: output %d differs",
                          prec, k);
            free(a);
            free(b);
        }
        gr_plan_free(plans[0]);
        gr_plan_free(plans[1]);
        free(u8);
        free(f);
    }
    gr_net_free(net);
}
END_TEST

/* Root-mean-square error relative to the fp32 output's RMS. */
static double rms_relative(const float *x, const float *ref, size_t n)
{
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)ref[i];
        err += d * d;
        norm += (double)ref[i] * (double)ref[i];
    }
    return sqrt(err / norm);
}

START_TEST(fp16_and_int8_track_fp32_after_calibration)
{
    const gr_net *net = v3_128;
    uint8_t *u8;
    float *f;
    paired_images(3, net->h, net->w, 1, 41, &u8, &f);
    gr_plan *p32 = build(net, GR_PREC_FP32, 1, 1, 0);
    gr_plan *p16 = build(net, GR_PREC_FP16, 1, 1, 0);
    gr_plan *p8 = build(net, GR_PREC_INT8, 1, 1, 0);
    ck_assert_int_eq(gr_plan_calibrate(p8, net, f, 1, GR_CALIB_MAX, 0.0f), GR_OK);
    for (int k = 0; k < 2; k++) {
        float *ref = run_output(p32, f, k), *half = run_output(p16, u8, k);
        float *q8 = run_output(p8, u8, k);
        size_t n = tensor_elems(&p32->tensors[p32->output_tensors[k]]);
        double e16 = rms_relative(half, ref, n), e8 = rms_relative(q8, ref, n);
        printf("head %d: fp16 rms error %.4f, int8 rms error %.4f (relative to fp32)\n", k, e16,
               e8);
        /* fp16 rounds each value to 11 significant bits (~5e-4) at every layer: 1e-3 to 4e-3
         * measured over 13 convs (depending on the synthetic weights' version); 1e-2 is the
         * bound. int8 with max calibration on synthetic weights (activation maxima far above
         * their RMS) loses a few % per layer: 0.03 to 0.14 measured; 0.2 is the bound. A wrong
         * scale, layout or channel mapping gives errors of order 1. */
        ck_assert_double_le(e16, 1e-2);
        ck_assert_double_le(e8, 0.2);
        ck_assert_double_gt(e8, e16); /* int8 really is quantized */
        free(ref);
        free(half);
        free(q8);
    }
    free(u8);
    free(f);
    gr_plan_free(p32);
    gr_plan_free(p16);
    gr_plan_free(p8);
}
END_TEST

START_TEST(calibration_ranges_and_shared_scales)
{
    const gr_net *net = v3_128;
    float *images = float_image(net->c, net->h, net->w, 2, 51);
    float max_r[24], pct_r[24], full_r[24], in_max, in_pct, in_full;
    ck_assert_int_eq(gr_plan_calibrate_ranges(net, images, 2, GR_CALIB_MAX, 0.0f, max_r, &in_max),
                     GR_OK);
    ck_assert_int_eq(
        gr_plan_calibrate_ranges(net, images, 2, GR_CALIB_PERCENTILE, 99.0f, pct_r, &in_pct),
        GR_OK);
    ck_assert_int_eq(
        gr_plan_calibrate_ranges(net, images, 2, GR_CALIB_PERCENTILE, 100.0f, full_r, &in_full),
        GR_OK);
    /* The input is uniform in [0, 1): its max is just below 1, its 99th percentile near 0.99. */
    ck_assert(in_max < 1.0f && in_max > 0.999f);
    ck_assert(in_pct > 0.98f && in_pct < 0.995f);
    for (int l = 0; l < net->n_layers; l++) {
        if (net->layers[l].p.op == GR_OP_YOLO)
            continue; /* decoders are not part of the plan */
        ck_assert(max_r[l] > 0.0f);
        ck_assert(pct_r[l] < max_r[l]);
        ck_assert(full_r[l] == max_r[l]);
    }
    gr_plan *p = build(net, GR_PREC_INT8, 1, 1, 0);
    ck_assert_int_eq(gr_plan_set_ranges(p, max_r, in_max), GR_OK);
    ck_assert_int_eq(p->scales_ready, 1);
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        const gr_plan_tensor *out = nd->output >= 0 ? &p->tensors[nd->output] : NULL;
        if (nd->kind == GR_OP_MAXPOOL || nd->kind == GR_OP_ROUTE || nd->kind == GR_OP_UPSAMPLE)
            for (int k = 0; k < nd->n_inputs; k++)
                ck_assert(p->tensors[nd->inputs[k]].scale == out->scale);
        if (nd->kind == GR_OP_CONV && nd->layer == 13) /* not shared with anything else */
            ck_assert(out->scale == max_r[13] / 127.0f);
        if (nd->kind == GR_OP_QUANTIZE)
            ck_assert(out->scale == in_max / 127.0f);
    }
    /* Layer 8 feeds maxpool 9 and route 20, which also holds upsample 19 and so conv 18: one
     * scale for all of them, the largest range. */
    float expect = fmaxf(fmaxf(max_r[8], max_r[9]), fmaxf(max_r[18], fmaxf(max_r[19], max_r[20])));
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].layer == 20)
            ck_assert(p->tensors[t].scale == expect / 127.0f);
    gr_plan_free(p);
    free(images);
}
END_TEST

START_TEST(classifier_tail_runs_in_fp32_around_int8_convs)
{
    /* avgpool, connected and softmax only exist in f32: an int8 plan dequantizes before them. */
    static const char *cfg = "[net]\nwidth=12\nheight=10\nchannels=3\n"
                             "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\n"
                             "activation=leaky\n"
                             "[maxpool]\nsize=2\nstride=2\n"
                             "[convolutional]\nfilters=24\nsize=3\npad=1\nactivation=relu\n"
                             "[avgpool]\n"
                             "[connected]\noutput=10\nactivation=linear\n"
                             "[softmax]\ngroups=1\n";
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse(cfg, strlen(cfg), "classifier.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 9), GR_OK);
    uint8_t *u8;
    float *f;
    paired_images(3, 10, 12, 2, 61, &u8, &f);
    float **ref = calloc((size_t)net->n_layers, sizeof *ref);
    ck_assert_int_eq(gr_reference_forward(net, f, 2, 0, ref), GR_OK);
    gr_plan *p32 = build(net, GR_PREC_FP32, 2, 0, 0);
    float *out = run_output(p32, f, 0);
    ck_assert_int_eq(memcmp(out, ref[5], 2 * 10 * sizeof *out), 0);
    free(out);

    gr_plan *p8 = build(net, GR_PREC_INT8, 2, 1, 0);
    ck_assert_int_eq(gr_plan_count_kind(p8, GR_OP_QUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p8, GR_OP_DEQUANTIZE), 1);
    for (int i = 0; i < p8->n_nodes; i++)
        if (p8->nodes[i].kind == GR_OP_DEQUANTIZE) /* right before the avgpool */
            ck_assert_int_eq(p8->nodes[i + 1].kind, GR_OP_AVGPOOL);
    ck_assert_int_eq(gr_plan_calibrate(p8, net, f, 2, GR_CALIB_MAX, 0.0f), GR_OK);
    out = run_output(p8, u8, 0);
    /* Softmax outputs are probabilities; int8 features move them a little. 0.05 absolute is the
     * bound (the measured value is printed); a broken dequantize or layout moves them by O(0.1-1).
     */
    double worst = 0.0;
    for (int i = 0; i < 20; i++)
        worst = fmax(worst, fabs((double)out[i] - (double)ref[5][i]));
    printf("classifier: int8 softmax max deviation %.4f\n", worst);
    ck_assert_double_le(worst, 0.05);
    free(out);
    for (int l = 0; l < net->n_layers; l++)
        free(ref[l]);
    free(ref);
    free(u8);
    free(f);
    gr_plan_free(p32);
    gr_plan_free(p8);
    gr_net_free(net);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("planner_exec");
    TCase *tc = tcase_create("exec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fp32_plan_without_folding_equals_the_reference_exactly);
    tcase_add_test(tc, fp32_random_dags_equal_the_reference_exactly);
    tcase_add_test(tc, bn_folding_and_epilogue_fusion_change_results_only_by_rounding);
    tcase_add_test(tc, int8_conv_follows_the_epilogue_spec_bit_for_bit);
    tcase_add_test(tc, fp16_conv_follows_the_epilogue_spec_bit_for_bit);
    tcase_add_test(tc, fused_maxpool_is_bit_identical_in_every_precision);
    tcase_add_test(tc, route_group_views_equal_the_copies_bit_for_bit);
    tcase_add_test(tc, fused_io_conv_writes_the_unrounded_epilogue_value);
    tcase_add_test(tc, fused_input_quantize_is_bit_identical);
    tcase_add_test(tc, fused_output_dequantize_rounds_only_where_the_unfused_plan_did);
    tcase_add_test(tc, concat_head_convs_write_their_slices_unrounded);
    tcase_add_test(tc, fp16_and_int8_track_fp32_after_calibration);
    tcase_add_test(tc, calibration_ranges_and_shared_scales);
    tcase_add_test(tc, classifier_tail_runs_in_fp32_around_int8_convs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (gr_test_builtin_at("yolov2-tiny-voc.cfg", 128, &v2_128) != GR_OK ||
        gr_test_builtin_at("yolov3-tiny.cfg", 128, &v3_128) != GR_OK ||
        gr_test_builtin_at("yolov2-tiny-voc.cfg", 64, &v2_64) != GR_OK ||
        gr_test_builtin_at("yolov3-tiny.cfg", 64, &v3_64) != GR_OK) {
        fprintf(stderr, "cannot load the test models: %s\n", gr_last_error());
        return 1;
    }
    SRunner *sr = srunner_create(exec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    gr_net_free(v2_128);
    gr_net_free(v3_128);
    gr_net_free(v2_64);
    gr_net_free(v3_64);
    return failed == 0 ? 0 : 1;
}
