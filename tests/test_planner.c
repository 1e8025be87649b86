/* Planner passes, one test per behaviour: DAG construction, dead nodes, BN folding, maxpool
 * fusion, precision with explicit Q/DQ, input-quantize / output-dequantize fusion, epilogue
 * fusion, int8 weights, concat views, in-place, streams, plan views and argument errors.
 * Numerics of execution are in test_planner_exec.c, the arena properties in
 * test_planner_arena.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"
#include "tests/support/plan_nets.h"

/* Built-in models with synthetic weights, loaded once in main() before the tests fork (the
 * generator takes about a second per model). Tests treat them as read-only. */
static const char *const model_names[] = {"yolov2-tiny-voc", "yolov3-tiny"};
static gr_net *models[2];

static gr_net *builtin(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(name, model_names[i]) == 0 && models[i])
            return models[i];
    ck_abort_msg("model %s was not loaded", name);
    return NULL;
}

/* Shared models are freed by main(). */
static void release(gr_net *net)
{
    for (int i = 0; i < 2; i++)
        if (net == models[i])
            return;
    gr_net_free(net);
}

static gr_net *from_cfg(const char *text)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse(text, strlen(text), "test.cfg", &net) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_eq(gr_net_synthesize_weights(net, 3), GR_OK);
    return net;
}

static gr_plan *build(const gr_net *net, gr_precision prec, int batch)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    return p;
}

static int node_of_layer(const gr_plan *p, int layer, int kind)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].layer == layer && p->nodes[i].kind == kind)
            return i;
    return -1;
}

/* Every input of every node is written by an earlier node. */
static void assert_valid_schedule(const gr_plan *p)
{
    for (int i = 0; i < p->n_nodes; i++)
        for (int k = 0; k < p->nodes[i].n_inputs; k++) {
            int prod = p->tensors[p->nodes[i].inputs[k]].producer;
            ck_assert_int_ge(prod, 0);
            ck_assert_int_lt(prod, i);
        }
}

/* The GPU engine takes at most GR_GPU_MAX_STREAMS (8) streams; yolov4's SPP and CSP branches fork
 * 16 uncapped. The same shape, small: one conv feeding twelve independent branches (a route back
 * to it and a conv each) that routes join. With max_streams the plan stays within the cap
 * and still checks (every cross-stream read behind an event). */
START_TEST(streams_capped)
{
    char cfg[4096];
    size_t n = (size_t)snprintf(cfg, sizeof cfg,
                                "[net]\nwidth=32\nheight=32\nchannels=3\n"
                                "[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\n"
                                "activation=leaky\n");
    for (int b = 0; b < 12; b++)
        /* Layer 0 is the stem; branch b is layers 1 + 2b (route) and 2 + 2b (conv). */
        n += (size_t)snprintf(cfg + n, sizeof cfg - n,
                              "[route]\nlayers=0\n[convolutional]\nfilters=4\nsize=%d\n"
                              "stride=1\npad=1\nactivation=leaky\n",
                              1 + 2 * (b % 2));
    /* A route takes at most 8 inputs: two joins of six (layers 25, 26), then one of those two. */
    n += (size_t)snprintf(cfg + n, sizeof cfg - n,
                          "[route]\nlayers=2,4,6,8,10,12\n[route]\nlayers=14,16,18,20,22,24\n"
                          "[route]\nlayers=25,26\n");
    ck_assert_uint_lt(n, sizeof cfg);
    gr_net *net = from_cfg(cfg);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    gr_plan *plan = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &plan) == GR_OK, "%s", gr_last_error());
    ck_assert_int_gt(plan->n_streams, 8);
    gr_plan_free(plan);
    opt.max_streams = 8;
    ck_assert_msg(gr_plan_build(net, &opt, &plan) == GR_OK, "%s", gr_last_error());
    ck_assert_int_le(plan->n_streams, 8);
    ck_assert_int_eq(gr_plan_check(plan), GR_OK);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

START_TEST(dag_has_one_node_per_layer_plus_input_and_outputs)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_pass_build_dag(net, &opt, &p), GR_OK);
    ck_assert_int_eq(p->n_nodes, net->n_layers + 1 + 2);
    ck_assert_int_eq(p->n_outputs, 2);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_NODE_INPUT), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_NODE_OUTPUT), 2);
    for (int t = 0; t < p->n_tensors; t++) {
        ck_assert_int_eq(p->tensors[t].dtype, GR_DTYPE_F32);
        ck_assert_int_eq(p->tensors[t].layout, GR_LAYOUT_NCHW);
    }
    /* Route 20 reads layers 19 and 8: real fan-in; layer 8 feeds maxpool 9 and route 20. */
    int route = node_of_layer(p, 20, GR_OP_ROUTE);
    ck_assert_int_eq(p->nodes[route].n_inputs, 2);
    ck_assert_int_eq(p->tensors[p->nodes[route].inputs[1]].layer, 8);
    ck_assert_int_eq(gr_plan_consumers(p, p->nodes[node_of_layer(p, 8, GR_OP_CONV)].output), 2);
    assert_valid_schedule(p);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(dead_nodes_are_removed)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_pass_build_dag(net, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_pass_dead_nodes(p), GR_OK);
    /* The raw heads are the outputs: both [yolo] decoders reach nothing. */
    ck_assert_int_eq(p->dead_nodes_removed, 2);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_YOLO), 0);
    assert_valid_schedule(p);
    gr_plan_free(p);
    opt.decode_heads = 1;
    ck_assert_int_eq(gr_pass_build_dag(net, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_pass_dead_nodes(p), GR_OK);
    ck_assert_int_eq(p->dead_nodes_removed, 0);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_YOLO), 2);
    gr_plan_free(p);
    release(net);

    /* A branch that ends nowhere: layer 1 is only read by nothing. */
    net = from_cfg("[net]\nwidth=8\nheight=8\nchannels=3\n"
                   "[convolutional]\nfilters=4\nsize=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
                   "[route]\nlayers=0\n"
                   "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n");
    opt.decode_heads = 0;
    ck_assert_int_eq(gr_pass_build_dag(net, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_pass_dead_nodes(p), GR_OK);
    ck_assert_int_eq(p->dead_nodes_removed, 1);
    ck_assert_int_eq(node_of_layer(p, 1, GR_OP_CONV), -1);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(bn_folding_follows_darknet_formula)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_pass_build_dag(net, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_pass_fold_bn(p), GR_OK);
    int folded = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        const gr_layer *l = &net->layers[nd->layer];
        ck_assert_int_eq(nd->p.batch_normalize, 0);
        ck_assert_int_eq(!!(nd->fused & GR_FUSED_BN), l->p.batch_normalize);
        size_t per = l->w.n_weights / (size_t)l->p.filters;
        for (int c = 0; c < l->p.filters; c++) {
            double expect_b = l->w.biases[c], factor = 1.0;
            if (l->p.batch_normalize) {
                /* Darknet: epsilon on the standard deviation, not inside the square root. */
                double std = sqrt((double)l->w.rolling_variance[c]) + 0.000001;
                factor = (double)l->w.scales[c] / std;
                expect_b = (double)l->w.biases[c] - (double)l->w.rolling_mean[c] * factor;
            }
            /* One float rounding of a double result: within half an ulp, 1e-6 relative is ample
             * and still 10x below the sqrt(var + 1e-5) convention's difference at var ~ 1. */
            double b = p->weights[nd->b_offset + (size_t)c];
            ck_assert_double_le(fabs(b - expect_b), 1e-6 * fabs(expect_b) + 1e-12);
            size_t bad = 0;
            for (size_t k = 0; k < per; k++) {
                double expect_w = (double)l->w.weights[(size_t)c * per + k] * factor;
                double w = p->weights[nd->w_offset + (size_t)c * per + k];
                bad += fabs(w - expect_w) > 1e-6 * fabs(expect_w) + 1e-12;
            }
            ck_assert_uint_eq(bad, 0);
        }
        folded += l->p.batch_normalize;
    }
    ck_assert_int_eq(folded, 8);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(maxpool_fuses_only_into_a_sole_consumer_conv)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.fuse_maxpool = 1;
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    /* Six conv -> maxpool pairs; conv 8 also feeds route 20, so maxpool 9 stays. */
    ck_assert_int_eq(p->fused_nodes_removed, 5);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_MAXPOOL), 1);
    ck_assert_int_ne(node_of_layer(p, 9, GR_OP_MAXPOOL), -1);
    int conv0 = node_of_layer(p, 0, GR_OP_CONV);
    ck_assert(p->nodes[conv0].fused & GR_FUSED_MAXPOOL);
    ck_assert_int_eq(p->nodes[conv0].pool_layer, 1);
    ck_assert_int_eq(p->tensors[p->nodes[conv0].output].layer, 1);
    ck_assert_int_eq(p->tensors[p->nodes[conv0].output].h, 208);
    ck_assert(!(p->nodes[node_of_layer(p, 8, GR_OP_CONV)].fused & GR_FUSED_MAXPOOL));
    assert_valid_schedule(p);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(uniform_int8_has_one_quantize_and_one_dequantize_per_head)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
        gr_plan *p = build(net, (gr_precision)prec, 1);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 1);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_NODE_CONVERT), 0);
        gr_dtype low = prec == GR_PREC_INT8 ? GR_DTYPE_I8 : GR_DTYPE_F16;
        for (int i = 0; i < p->n_nodes; i++) {
            const gr_plan_node *nd = &p->nodes[i];
            if (nd->kind == GR_OP_QUANTIZE) {
                /* At the input side: it reads the network input (u8 NHWC, 3 channels). */
                ck_assert_int_eq(nd->inputs[0], p->input_tensor);
                ck_assert_int_eq(p->tensors[p->input_tensor].dtype, GR_DTYPE_U8);
                ck_assert_int_eq(p->tensors[p->input_tensor].c_pad, 3);
            } else if (nd->kind == GR_OP_DEQUANTIZE) {
                /* At the output side: it writes the plan output. */
                ck_assert_int_eq(nd->output, p->output_tensors[0]);
            } else if (nd->kind == GR_OP_CONV || nd->kind == GR_OP_MAXPOOL) {
                ck_assert_int_eq(p->tensors[nd->output].dtype, low);
                ck_assert_int_eq(p->tensors[nd->inputs[0]].dtype, low);
                ck_assert_int_eq(p->tensors[nd->output].layout, GR_LAYOUT_NHWC);
                ck_assert_int_eq(p->tensors[nd->output].c_pad % (low == GR_DTYPE_I8 ? 16 : 8), 0);
            }
        }
        const gr_plan_tensor *out = &p->tensors[p->output_tensors[0]];
        ck_assert_int_eq(out->dtype, GR_DTYPE_F32);
        ck_assert_int_eq(out->layout, GR_LAYOUT_NCHW);
        ck_assert_int_eq(out->c, 125);
        gr_plan_free(p);
    }
    gr_plan *p = build(net, GR_PREC_FP32, 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE) +
                         gr_plan_count_kind(p, GR_OP_DEQUANTIZE) +
                         gr_plan_count_kind(p, GR_NODE_CONVERT),
                     0);
    gr_plan_free(p);
    release(net);

    net = builtin("yolov3-tiny");
    p = build(net, GR_PREC_INT8, 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 2);
    gr_plan_free(p);
    release(net);
}
END_TEST

/* Grouped, depthwise, dilated and stride_x != stride_y convs in fp16 / int8 (the GPU's direct
 * kernels, kernels/conv_direct.h) are planned like every other conv: channels-last tensors of the
 * engine's dtype in and out, so no conversion surrounds them (converting to f32 NCHW and back
 * around each would cost two extra passes over the tensor per conv, each as large as the conv's
 * own reads); with the GPU engine's fusions the stride_x conv reading the network input
 * quantizes it itself and the grouped head writes f32. */
START_TEST(grouped_dilated_strided_convs_stay_channels_last)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_net_parse_file("tests/data/grouped_convs.cfg", &net) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
        gr_dtype low = prec == GR_PREC_INT8 ? GR_DTYPE_I8 : GR_DTYPE_F16;
        gr_plan *p = build(net, (gr_precision)prec, 2);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 1);
        ck_assert_int_eq(gr_plan_count_kind(p, GR_NODE_CONVERT), 0);
        int special = 0;
        for (int i = 0; i < p->n_nodes; i++) {
            const gr_plan_node *nd = &p->nodes[i];
            if (nd->kind != GR_OP_CONV)
                continue;
            const gr_plan_tensor *x = &p->tensors[nd->inputs[0]], *y = &p->tensors[nd->output];
            ck_assert_msg(x->dtype == low && y->dtype == low && x->layout == GR_LAYOUT_NHWC &&
                              y->layout == GR_LAYOUT_NHWC,
                          "%s: layer %d reads %s, writes %s", gr_precision_name(prec), nd->layer,
                          gr_dtype_name(x->dtype), gr_dtype_name(y->dtype));
            special += nd->p.groups > 1 || gr_conv_dilation(&nd->p) > 1 ||
                       gr_conv_stride_y(&nd->p) != nd->p.stride;
        }
        ck_assert_int_eq(special, 9); /* layers 1-8 and the head */
        gr_plan_free(p);
    }
    gr_net_free(net);

    ck_assert_int_eq(gr_net_parse_file("tests/data/grouped_fusions.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    opt.fuse_input_quantize = opt.fuse_output_dequantize = 1;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE) + gr_plan_count_kind(p, GR_OP_DEQUANTIZE) +
                         gr_plan_count_kind(p, GR_NODE_CONVERT),
                     0);
    const gr_plan_node *first = &p->nodes[node_of_layer(p, 0, GR_OP_CONV)];
    const gr_plan_node *head = &p->nodes[node_of_layer(p, 6, GR_OP_CONV)];
    ck_assert_int_eq(first->p.stride, 2); /* stride_x 2, stride_y 1 */
    ck_assert_int_eq(gr_conv_stride_y(&first->p), 1);
    ck_assert(first->fused & GR_FUSED_QUANTIZE_IN);
    ck_assert_int_eq(head->p.groups, 2);
    ck_assert(head->fused & GR_FUSED_DEQUANT_OUT);
    gr_plan_free(p);
    gr_net_free(net);
}
END_TEST

/* Count dtype boundaries independently: distinct (producing layer, wanted dtype) pairs where a
 * consumer runs in another precision than its producer. */
START_TEST(per_layer_map_converts_once_per_boundary)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_precision map[24];
    for (int i = 0; i < net->n_layers; i++)
        map[i] = GR_PREC_INT8;
    map[4] = GR_PREC_FP32;  /* int8 maxpool 3 -> fp32 conv 4 -> int8 maxpool 5 */
    map[8] = GR_PREC_FP16;  /* int8 -> fp16 conv 8 -> int8 maxpool 9 and int8 route 20 */
    map[14] = GR_PREC_FP32; /* conv 13's output feeds fp32 conv 14 and fp32 route 17 */
    map[17] = GR_PREC_FP32;
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    opt.layer_precision = map;
    opt.n_layer_precision = net->n_layers;
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    /* quantize: input -> conv 0; conv 4 -> maxpool 5; conv 14 (fp32) -> conv 15; route 17 ->
     * conv 18. dequantize: maxpool 3 -> conv 4; conv 13 -> {14, 17} (one, shared); both heads.
     * convert: maxpool 7 -> conv 8; conv 8 -> {maxpool 9, route 20} (one, shared). */
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 4);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 4);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_NODE_CONVERT), 2);
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind != GR_OP_QUANTIZE && nd->kind != GR_OP_DEQUANTIZE &&
            nd->kind != GR_NODE_CONVERT)
            continue;
        ck_assert_int_ne(p->tensors[nd->inputs[0]].dtype, p->tensors[nd->output].dtype);
        for (int j = i + 1; j < p->n_nodes; j++)
            ck_assert(!(p->nodes[j].n_inputs && p->nodes[j].inputs[0] == nd->inputs[0] &&
                        p->nodes[j].kind == nd->kind &&
                        p->tensors[p->nodes[j].output].dtype == p->tensors[nd->output].dtype));
    }
    /* Consumers see their own precision. */
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->layer < 0 || nd->kind == GR_NODE_OUTPUT)
            continue;
        gr_dtype want = map[nd->layer] == GR_PREC_FP32
                            ? GR_DTYPE_F32
                            : (map[nd->layer] == GR_PREC_FP16 ? GR_DTYPE_F16 : GR_DTYPE_I8);
        for (int k = 0; k < nd->n_inputs; k++)
            ck_assert_int_eq(p->tensors[nd->inputs[k]].dtype, want);
    }
    assert_valid_schedule(p);
    gr_plan_free(p);
    release(net);
}
END_TEST

/* The I/O fusions take a conversion only when a conv is on its other side alone: the mixed map of
 * per_layer_map_converts_once_per_boundary leaves quantizes and dequantizes that must stay. */
START_TEST(io_fusions_apply_only_where_a_conv_is_the_sole_partner)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_precision map[24];
    for (int i = 0; i < net->n_layers; i++)
        map[i] = GR_PREC_INT8;
    map[4] = GR_PREC_FP32;
    map[8] = GR_PREC_FP16;
    map[14] = GR_PREC_FP32;
    map[17] = GR_PREC_FP32;
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    ck_assert_int_eq(opt.fuse_input_quantize, 0);
    ck_assert_int_eq(opt.fuse_output_dequantize, 0);
    opt.precision = GR_PREC_INT8;
    opt.layer_precision = map;
    opt.n_layer_precision = net->n_layers;
    opt.fuse_input_quantize = 1;
    opt.fuse_output_dequantize = 1;
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    /* Gone: the input's quantize (into conv 0), the dequantize of conv 13 (shared by 14 and 17:
     * conv 13's i8 output has it as its only reader) and both heads'. Kept: the quantizes of
     * conv 4 and 14 and route 17 (not the u8 input) and maxpool 3's dequantize (not a conv). */
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 3);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 1);
    ck_assert_int_eq(p->fused_nodes_removed, 4);
    const gr_plan_node *conv0 = &p->nodes[node_of_layer(p, 0, GR_OP_CONV)];
    ck_assert(conv0->fused & GR_FUSED_QUANTIZE_IN);
    ck_assert_int_eq(conv0->inputs[0], p->input_tensor);
    ck_assert_int_eq(conv0->in_dtype, GR_DTYPE_I8);
    static const int dequant_out[] = {13, 15, 22};
    for (int k = 0; k < 3; k++) {
        const gr_plan_node *c = &p->nodes[node_of_layer(p, dequant_out[k], GR_OP_CONV)];
        ck_assert(c->fused & GR_FUSED_DEQUANT_OUT);
        ck_assert_uint_eq(c->fused & GR_FUSED_REQUANT, 0);
        ck_assert_int_eq(p->tensors[c->output].dtype, GR_DTYPE_F32);
    }
    ck_assert_int_eq(p->tensors[p->nodes[node_of_layer(p, 14, GR_OP_CONV)].inputs[0]].dtype,
                     GR_DTYPE_F32);
    char fused[96];
    ck_assert_str_eq(gr_plan_fused_str(conv0, fused, sizeof fused),
                     "quant-in+bn+bias+leaky+requant");
    assert_valid_schedule(p);
    ck_assert_int_eq(gr_plan_check(p), GR_OK);
    gr_plan_free(p);

    /* An f32 network input is quantized f32 -> i8: not the u8 read the fused conv does. */
    opt.layer_precision = NULL;
    opt.n_layer_precision = 0;
    opt.input_u8 = 0;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 0);
    gr_plan_free(p);
    release(net);

    /* A maxpool reading the input first: its quantize stays. */
    gr_net *pool_first = from_cfg("[net]\nwidth=16\nheight=16\nchannels=3\n"
                                  "[maxpool]\nsize=2\nstride=2\n"
                                  "[convolutional]\nfilters=4\nsize=3\npad=1\n"
                                  "activation=leaky\n");
    opt.input_u8 = -1;
    ck_assert_int_eq(gr_plan_build(pool_first, &opt, &p), GR_OK);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 0);
    gr_plan_free(p);
    release(pool_first);
}
END_TEST

/* no_fuse_layer (the GPU engine's per-layer fallback): nothing is fused into the layers named,
 * everything else still is. YOLOv2-tiny int8 with every fusion: layer 0 excluded keeps its input
 * quantize and its maxpool; layer 14 (the head) keeps its dequantize. */
START_TEST(no_fuse_layer_excludes_only_those_convs)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    unsigned char no_fuse[16] = {0};
    ck_assert_int_ge((int)sizeof no_fuse, net->n_layers);
    no_fuse[0] = no_fuse[14] = 1;
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    opt.fuse_maxpool = opt.fuse_input_quantize = opt.fuse_output_dequantize = 1;
    opt.no_fuse_layer = no_fuse;
    opt.n_no_fuse_layer = net->n_layers;
    gr_plan *p = NULL;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    const unsigned io = GR_FUSED_MAXPOOL | GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT;
    ck_assert_uint_eq(p->nodes[node_of_layer(p, 0, GR_OP_CONV)].fused & io, 0);
    ck_assert_uint_eq(p->nodes[node_of_layer(p, 14, GR_OP_CONV)].fused & io, 0);
    ck_assert(p->nodes[node_of_layer(p, 2, GR_OP_CONV)].fused & GR_FUSED_MAXPOOL);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_QUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 1);
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_MAXPOOL), 1); /* layer 1, after conv 0 */
    ck_assert_ptr_null(p->options.no_fuse_layer);               /* not kept: not owned */
    assert_valid_schedule(p);
    ck_assert_int_eq(gr_plan_check(p), GR_OK);
    gr_plan_free(p);
    opt.no_fuse_layer = NULL; /* a count without flags */
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    release(net);
}
END_TEST

/* YOLOv8 / YOLO11's ONNX heads, small: Concat(box conv, class conv) is the network's output
 * (tests/data/concat_head.cfg); the variants below keep its first layer. */
#define STEM_CFG                                                                                   \
    "[net]\nwidth=16\nheight=16\nchannels=3\n"                                                     \
    "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"

static gr_net *concat_head_net(void)
{
    gr_net *net = NULL;
    ck_assert_msg(gr_test_concat_head_net(&net) == GR_OK, "%s", gr_last_error());
    return net;
}

static gr_plan *build_head(const gr_net *net, gr_precision prec, int concat_in_place,
                           const unsigned char *no_fuse)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = 2;
    opt.fuse_output_dequantize = 1;
    opt.concat_in_place = concat_in_place;
    opt.no_fuse_layer = no_fuse;
    opt.n_no_fuse_layer = no_fuse ? net->n_layers : 0;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    assert_valid_schedule(p);
    ck_assert_msg(gr_plan_check(p) == GR_OK, "%s", gr_last_error());
    return p;
}

/* In int8 and fp16 the concat's dequantize disappears: each conv writes its channel slice of the
 * f32 NCHW output from its epilogue (GR_FUSED_DEQUANT_OUT; strided, batch 2) and the route is a
 * no-op over those views - or, with concat_in_place = 0, an f32 copy of the convs' own tensors. */
START_TEST(concat_head_dequantize_fuses_into_its_convs)
{
    gr_net *net = concat_head_net();
    static const int layers[2] = {1, 3}, offsets[2] = {0, 64}, channels[2] = {64, 3};
    for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++)
        for (int in_place = 0; in_place <= 1; in_place++) {
            gr_plan *p = build_head(net, (gr_precision)prec, in_place, NULL);
            ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 0);
            ck_assert_int_eq(p->fused_nodes_removed, 1);
            const int out = p->output_tensors[0];
            const gr_plan_tensor *o = &p->tensors[out];
            ck_assert_int_eq(o->dtype, GR_DTYPE_F32);
            ck_assert_int_eq(o->layout, GR_LAYOUT_NCHW);
            ck_assert_int_eq(o->c, 67);
            ck_assert_int_eq(o->c_stride, 67);
            ck_assert_int_eq(o->view_of, -1);
            const gr_plan_node *route = &p->nodes[node_of_layer(p, 4, GR_OP_ROUTE)];
            ck_assert_int_eq(route->output, out);
            ck_assert_int_eq(route->noop, in_place);
            for (int k = 0; k < 2; k++) {
                const gr_plan_node *conv = &p->nodes[node_of_layer(p, layers[k], GR_OP_CONV)];
                ck_assert(conv->fused & GR_FUSED_DEQUANT_OUT);
                ck_assert_uint_eq(conv->fused & (GR_FUSED_REQUANT | GR_FUSED_CONVERT), 0);
                ck_assert_int_eq(route->inputs[k], conv->output);
                const gr_plan_tensor *y = &p->tensors[conv->output];
                ck_assert_int_eq(y->dtype, GR_DTYPE_F32);
                ck_assert_int_eq(y->layout, GR_LAYOUT_NCHW);
                ck_assert_int_eq(y->c, channels[k]);
                ck_assert_int_eq(y->view_of, in_place ? out : -1);
                ck_assert_int_eq(y->c_offset, in_place ? offsets[k] : 0);
                ck_assert_int_eq(y->c_stride, in_place ? 67 : channels[k]);
                if (in_place)
                    ck_assert_int_eq(y->buffer, o->buffer);
            }
            /* the stem still rounds to its own dtype */
            ck_assert_uint_eq(p->nodes[node_of_layer(p, 0, GR_OP_CONV)].fused &
                                  (GR_FUSED_REQUANT | GR_FUSED_CONVERT | GR_FUSED_DEQUANT_OUT),
                              prec == GR_PREC_INT8 ? GR_FUSED_REQUANT : GR_FUSED_CONVERT);
            gr_plan_free(p);
        }
    release(net);

    /* The f32 result read by an fp32 conv instead of being the output: the same fusion, and
     * concat_views leaves the no-op route as it is (at batch 1 it would otherwise take the
     * route's inputs, views of its own output, for a slice of it). */
    net = from_cfg(STEM_CFG "[convolutional]\nfilters=64\nsize=1\nactivation=linear\n"
                            "[route]\nlayers=0\n[convolutional]\nfilters=3\nsize=1\n"
                            "activation=linear\n[route]\nlayers=1,3\n"
                            "[convolutional]\nfilters=4\nsize=1\nactivation=linear\n");
    gr_precision map[6] = {GR_PREC_INT8, GR_PREC_INT8, GR_PREC_INT8,
                           GR_PREC_INT8, GR_PREC_INT8, GR_PREC_FP32};
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    opt.layer_precision = map;
    opt.n_layer_precision = 6;
    opt.fuse_output_dequantize = 1;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &p) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_plan_count_kind(p, GR_OP_DEQUANTIZE), 0);
    const gr_plan_node *route = &p->nodes[node_of_layer(p, 4, GR_OP_ROUTE)];
    const gr_plan_node *reader = &p->nodes[node_of_layer(p, 5, GR_OP_CONV)];
    ck_assert_int_eq(route->noop, 1);
    ck_assert_int_eq(reader->inputs[0], route->output);
    ck_assert_int_eq(p->tensors[route->output].view_of, -1);
    ck_assert_int_eq(p->tensors[route->inputs[1]].view_of, route->output);
    ck_assert_int_eq(p->tensors[route->inputs[1]].c_offset, 64);
    assert_valid_schedule(p);
    ck_assert_int_eq(gr_plan_check(p), GR_OK);
    gr_plan_free(p);
    release(net);
}
END_TEST

/* Where a slice is not a conv's alone, or the concat has another reader, or a conv may not fuse,
 * the concat keeps its dequantize and the convs their own dtype. */
START_TEST(concat_head_keeps_its_dequantize_unless_convs_write_every_slice)
{
#define YOLO_CFG "[yolo]\nmask=0,1,2\nanchors=10,14,23,27,37,58\nclasses=1\nnum=3\n"
#define TWO_HEADS(second_route)                                                                    \
    STEM_CFG "[convolutional]\nfilters=9\nsize=1\nactivation=linear\n[route]\nlayers=0\n"          \
             "[convolutional]\nfilters=9\nsize=1\nactivation=linear\n[route]\nlayers=1,3\n"       \
             YOLO_CFG "[route]\nlayers=" second_route "\n"                                      \
             "[convolutional]\nfilters=18\nsize=1\nactivation=linear\n" YOLO_CFG
    static const struct {
        const char *what, *cfg;
        int no_fuse_layer; /* -1: none */
        int other_head;    /* the conv layer of a second, fused head, or -1 */
    } cases[] = {
        {"a maxpool's slice",
         STEM_CFG "[convolutional]\nfilters=64\nsize=1\nactivation=linear\n[route]\nlayers=0\n"
                  "[maxpool]\nsize=2\nstride=1\n[route]\nlayers=1,3\n",
         -1, -1},
        {"the concat read again", TWO_HEADS("4"), -1, 7},
        {"a conv output read again", TWO_HEADS("1"), -1, 7},
        {"a conv excluded from fusions", NULL, 3, -1}, /* tests/data/concat_head.cfg */
    };
#undef TWO_HEADS
#undef YOLO_CFG
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gr_net *net = cases[c].cfg ? from_cfg(cases[c].cfg) : concat_head_net();
        unsigned char no_fuse[8] = {0};
        if (cases[c].no_fuse_layer >= 0)
            no_fuse[cases[c].no_fuse_layer] = 1;
        for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
            gr_plan *p = build_head(net, (gr_precision)prec, 1,
                                    cases[c].no_fuse_layer >= 0 ? no_fuse : NULL);
            const gr_dtype low = prec == GR_PREC_INT8 ? GR_DTYPE_I8 : GR_DTYPE_F16;
            ck_assert_msg(gr_plan_count_kind(p, GR_OP_DEQUANTIZE) == 1, "%s", cases[c].what);
            const gr_plan_node *route = &p->nodes[node_of_layer(p, 4, GR_OP_ROUTE)];
            ck_assert_int_eq(p->tensors[route->output].dtype, low);
            const gr_plan_node *box = &p->nodes[node_of_layer(p, 1, GR_OP_CONV)];
            ck_assert_msg(!(box->fused & GR_FUSED_DEQUANT_OUT), "%s", cases[c].what);
            ck_assert_int_eq(p->tensors[box->output].dtype, low);
            if (cases[c].other_head >= 0)
                ck_assert(p->nodes[node_of_layer(p, cases[c].other_head, GR_OP_CONV)].fused &
                          GR_FUSED_DEQUANT_OUT);
            gr_plan_free(p);
        }
        release(net);
    }
}
END_TEST
#undef STEM_CFG

START_TEST(epilogue_records_fused_parts)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    static const unsigned expect_first[3] = {
        GR_FUSED_BN | GR_FUSED_BIAS | GR_FUSED_ACT,
        GR_FUSED_BN | GR_FUSED_BIAS | GR_FUSED_ACT | GR_FUSED_CONVERT,
        GR_FUSED_BN | GR_FUSED_BIAS | GR_FUSED_ACT | GR_FUSED_REQUANT};
    static const unsigned expect_head[3] = {GR_FUSED_BIAS, GR_FUSED_BIAS | GR_FUSED_CONVERT,
                                            GR_FUSED_BIAS | GR_FUSED_REQUANT};
    for (int prec = 0; prec < 3; prec++) {
        gr_plan *p = build(net, (gr_precision)prec, 1);
        ck_assert_uint_eq(p->nodes[node_of_layer(p, 0, GR_OP_CONV)].fused, expect_first[prec]);
        ck_assert_uint_eq(p->nodes[node_of_layer(p, 14, GR_OP_CONV)].fused, expect_head[prec]);
        char buf[64];
        gr_plan_fused_str(&p->nodes[node_of_layer(p, 0, GR_OP_CONV)], buf, sizeof buf);
        ck_assert_str_eq(buf, prec == 0
                                  ? "bn+bias+leaky"
                                  : (prec == 1 ? "bn+bias+leaky+f16" : "bn+bias+leaky+requant"));
        gr_plan_free(p);
    }
    release(net);
}
END_TEST

START_TEST(int8_weights_are_per_channel_symmetric)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    gr_plan *p = build(net, GR_PREC_INT8, 1);
    int convs = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        convs++;
        size_t per = nd->n_w / (size_t)nd->p.filters;
        for (int c = 0; c < nd->p.filters; c++) {
            const float *w = p->weights + nd->w_offset + (size_t)c * per;
            const int8_t *q = p->qweights + nd->qw_offset + (size_t)c * per;
            float max_abs = 0.0f;
            int max_q = 0;
            for (size_t k = 0; k < per; k++) {
                max_abs = fmaxf(max_abs, fabsf(w[k]));
                max_q = abs(q[k]) > max_q ? abs(q[k]) : max_q;
            }
            float s = p->weights[nd->ws_offset + (size_t)c];
            ck_assert(s == max_abs / 127.0f);
            ck_assert_int_eq(max_q, 127);
            /* Rounded to nearest: within half a step (plus the division's rounding). Counted,
             * not asserted per weight: a Check assertion costs a pipe write. */
            size_t bad = 0;
            for (size_t k = 0; k < per; k++)
                bad += q[k] < -127 || fabsf((float)q[k] * s - w[k]) > 0.5f * s * 1.0001f;
            ck_assert_uint_eq(bad, 0);
        }
    }
    ck_assert_int_eq(convs, 9);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(concat_writes_into_slices_of_the_route)
{
    gr_net *net = builtin("yolov3-tiny");
    for (int prec = 0; prec < 3; prec++) {
        gr_plan_options opt;
        gr_plan_options_default(&opt);
        opt.precision = (gr_precision)prec;
        opt.batch = 2;
        /* f32 slices of a batch of 2 are strided: only with nchw_strided_views. */
        opt.nchw_strided_views = prec == GR_PREC_FP32;
        gr_plan *p = NULL;
        ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
        int route = node_of_layer(p, 20, GR_OP_ROUTE);
        const gr_plan_node *r = &p->nodes[route];
        ck_assert_int_eq(r->noop, 1);
        const gr_plan_tensor *up = &p->tensors[r->inputs[0]], *l8 = &p->tensors[r->inputs[1]];
        ck_assert_int_eq(up->view_of, r->output);
        ck_assert_int_eq(l8->view_of, r->output);
        ck_assert_int_eq(up->c_offset, 0);
        ck_assert_int_eq(l8->c_offset, 128);
        ck_assert_int_eq(l8->c_stride, p->tensors[r->output].c_stride);
        ck_assert_int_eq(l8->buffer, p->tensors[r->output].buffer);
        /* The one-input route 17 is a view of conv 13's output. */
        const gr_plan_node *r17 = &p->nodes[node_of_layer(p, 17, GR_OP_ROUTE)];
        ck_assert_int_eq(r17->noop, 1);
        ck_assert_int_eq(p->tensors[r17->output].view_of, r17->inputs[0]);
        gr_plan_free(p);
    }
    /* By default f32 tensors stay dense: the batch-2 concat copies, the batch-1 one aliases. */
    gr_plan *dense2 = build(net, GR_PREC_FP32, 2), *dense1 = build(net, GR_PREC_FP32, 1);
    ck_assert_int_eq(dense2->nodes[node_of_layer(dense2, 20, GR_OP_ROUTE)].noop, 0);
    ck_assert_int_eq(dense1->nodes[node_of_layer(dense1, 20, GR_OP_ROUTE)].noop, 1);
    gr_plan_free(dense2);
    gr_plan_free(dense1);
    release(net);

    /* A 12-channel slice would start the next one mid-granule in int8/fp16 (16 / 8 channels):
     * copy there, alias in fp32. */
    net = from_cfg("[net]\nwidth=8\nheight=8\nchannels=3\n"
                   "[convolutional]\nfilters=12\nsize=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                   "[route]\nlayers=0,1\n"
                   "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n");
    static const int aliased[3] = {1, 0, 0};
    for (int prec = 0; prec < 3; prec++) {
        gr_plan *p = build(net, (gr_precision)prec, 1);
        ck_assert_int_eq(p->nodes[node_of_layer(p, 2, GR_OP_ROUTE)].noop, aliased[prec]);
        gr_plan_free(p);
    }
    release(net);
}
END_TEST

/* A C2f block (YOLOv8's): one conv's output split in halves (two grouped routes), a bottleneck on
 * the second half, and the concat of both halves and the bottleneck. The halves are views of one
 * tensor covering it in order, so that tensor becomes the concat's first slice and nothing is
 * copied; the results are the reference's (tests/test_planner_exec.c runs plans against it, and
 * test_onnx runs YOLOv8n-like C2f blocks against PyTorch). Concatenating only the second half, or
 * the halves out of order, leaves a gap or an overlap: copied. */
START_TEST(concat_of_a_split_tensor_writes_it_in_place)
{
    static const char *const tails[3] = {"[route]\nlayers=-4,-3,-1\n", "[route]\nlayers=-3,-1\n",
                                         "[route]\nlayers=-3,-4,-1\n"};
    static const int aliased[3] = {1, 0, 0};
    for (int t = 0; t < 3; t++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg,
                 "[net]\nwidth=16\nheight=16\nchannels=3\n"
                 "[convolutional]\nfilters=32\nsize=1\nactivation=leaky\n"
                 "[route]\nlayers=-1\ngroups=2\ngroup_id=0\n"
                 "[route]\nlayers=-2\ngroups=2\ngroup_id=1\n"
                 "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                 "[shortcut]\nfrom=-2\nactivation=linear\n"
                 "%s"
                 "[convolutional]\nfilters=8\nsize=1\nactivation=linear\n",
                 tails[t]);
        gr_net *net = from_cfg(cfg);
        for (int prec = 0; prec < 3; prec++) {
            gr_plan *p = build(net, (gr_precision)prec, 1);
            const gr_plan_node *r = &p->nodes[node_of_layer(p, 5, GR_OP_ROUTE)];
            ck_assert_msg(r->noop == aliased[t], "route %d, %s: noop %d", t,
                          gr_precision_name((gr_precision)prec), r->noop);
            if (aliased[t]) {
                const gr_plan_tensor *conv0 = &p->tensors[p->nodes[node_of_layer(p, 0, GR_OP_CONV)].output];
                const gr_plan_tensor *add = &p->tensors[r->inputs[2]];
                ck_assert_int_eq(conv0->view_of, r->output);
                ck_assert_int_eq(conv0->c_offset, 0);
                ck_assert_int_eq(add->view_of, r->output);
                ck_assert_int_eq(add->c_offset, 32);
                /* the halves follow their tensor into the concat */
                ck_assert_int_eq(p->tensors[r->inputs[1]].view_of, r->output);
                ck_assert_int_eq(p->tensors[r->inputs[1]].c_offset, 16);
            }
            gr_plan_free(p);
        }
        release(net);
    }
}
END_TEST

/* A one-input [route] groups=2 group_id=1 is a view of its input's second half where the half is
 * a whole number of channel granules: 24 channels -> 12, a view in fp32 only (12 is not a multiple
 * of 8 or 16); 32 -> 16 in every precision. Its outputs: tests/test_planner_exec.c. */
START_TEST(grouped_route_is_a_view_where_the_granule_allows)
{
    static const int filters[2] = {24, 32};
    static const int aliased[2][3] = {{1, 0, 0}, {1, 1, 1}};
    for (int f = 0; f < 2; f++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "[net]\nwidth=8\nheight=8\nchannels=3\n"
                 "[convolutional]\nfilters=%d\nsize=3\npad=1\nactivation=leaky\n"
                 "[route]\nlayers=-1\ngroups=2\ngroup_id=1\n"
                 "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n",
                 filters[f]);
        gr_net *net = from_cfg(cfg);
        for (int prec = 0; prec < 3; prec++) {
            gr_plan *p = build(net, (gr_precision)prec, 1);
            const gr_plan_node *r = &p->nodes[node_of_layer(p, 1, GR_OP_ROUTE)];
            const gr_plan_tensor *y = &p->tensors[r->output];
            ck_assert_msg(r->noop == aliased[f][prec], "%d filters, precision %d: noop %d",
                          filters[f], prec, r->noop);
            if (r->noop) {
                ck_assert_int_eq(y->view_of, r->inputs[0]);
                ck_assert_int_eq(y->c_offset, filters[f] / 2);
                ck_assert_int_eq(y->c_stride, p->tensors[r->inputs[0]].c_stride);
            } else {
                ck_assert_int_eq(y->view_of, -1);
            }
            ck_assert_int_eq(gr_plan_check(p), GR_OK);
            gr_plan_free(p);
        }
        release(net);
    }
}
END_TEST

START_TEST(shortcut_runs_in_place_when_its_input_dies)
{
    gr_net *net = from_cfg("[net]\nwidth=8\nheight=8\nchannels=3\n"
                           "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                           "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                           "[shortcut]\nfrom=0\nactivation=linear\n"
                           "[convolutional]\nfilters=8\nsize=1\nactivation=leaky\n"
                           "[shortcut]\nfrom=-2\nactivation=leaky\n"
                           "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n");
    gr_plan *p = build(net, GR_PREC_FP32, 1);
    /* Shortcut 2 overwrites conv 1 (read only by it). Shortcut 4 adds shortcut 2's output, which
     * it reads as `from`, onto conv 3's: conv 3 dies there too, so it also runs in place. */
    const gr_plan_node *s2 = &p->nodes[node_of_layer(p, 2, GR_OP_SHORTCUT)];
    ck_assert_int_eq(p->tensors[s2->output].inplace_of, s2->inputs[0]);
    ck_assert_int_eq(p->tensors[s2->output].buffer, p->tensors[s2->inputs[0]].buffer);
    const gr_plan_node *s4 = &p->nodes[node_of_layer(p, 4, GR_OP_SHORTCUT)];
    ck_assert_int_eq(p->tensors[s4->output].inplace_of, s4->inputs[0]);
    gr_plan_free(p);

    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.in_place = 0;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    for (int t = 0; t < p->n_tensors; t++)
        ck_assert_int_eq(p->tensors[t].inplace_of, -1);
    gr_plan_free(p);
    release(net);

    /* Conv 1's output is read again after the shortcut: no in-place. */
    net = from_cfg("[net]\nwidth=8\nheight=8\nchannels=3\n"
                   "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=leaky\n"
                   "[shortcut]\nfrom=0\nactivation=linear\n"
                   "[route]\nlayers=1,2\n");
    p = build(net, GR_PREC_FP32, 1);
    const gr_plan_node *s = &p->nodes[node_of_layer(p, 2, GR_OP_SHORTCUT)];
    ck_assert_int_eq(p->tensors[s->output].inplace_of, -1);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(independent_branches_get_their_own_stream)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_plan *p = build(net, GR_PREC_FP16, 1);
    ck_assert_int_eq(p->n_streams, 2);
    int conv13 = node_of_layer(p, 13, GR_OP_CONV), conv14 = node_of_layer(p, 14, GR_OP_CONV);
    int conv18 = node_of_layer(p, 18, GR_OP_CONV), conv21 = node_of_layer(p, 21, GR_OP_CONV);
    ck_assert_int_ne(p->nodes[conv14].stream, p->nodes[conv18].stream);
    /* The fork: conv 13 records an event the other branch waits on. */
    ck_assert_int_ge(p->nodes[conv13].record_event, 0);
    ck_assert(gr_plan_happens_before(p, conv13, conv18));
    ck_assert(!gr_plan_happens_before(p, conv14, conv18));
    ck_assert(!gr_plan_happens_before(p, conv18, conv14));
    /* Route 20 joins conv 8's result (stream 0) into the branch. */
    ck_assert(gr_plan_happens_before(p, node_of_layer(p, 8, GR_OP_CONV), conv21));
    /* The end joins every stream back into stream 0. */
    ck_assert_int_eq(p->n_join_waits, 1);
    gr_plan_free(p);

    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.single_stream = 1;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    ck_assert_int_eq(p->n_streams, 1);
    ck_assert_int_eq(p->n_events, 0);
    for (int i = 0; i < p->n_nodes; i++)
        ck_assert_int_eq(p->nodes[i].stream, 0);
    gr_plan_free(p);
    release(net);
}
END_TEST

static char *dump_to_string(gr_status (*dump)(const gr_plan *, FILE *), const gr_plan *p)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(dump(p, f), GR_OK);
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(views_show_nodes_qdq_and_memory)
{
    gr_net *net = builtin("yolov3-tiny");
    gr_plan *p = build(net, GR_PREC_INT8, 1);
    char *text = dump_to_string(gr_plan_dump_text, p);
    ck_assert_ptr_nonnull(strstr(text, "arena bytes:"));
    ck_assert_ptr_nonnull(strstr(text, "lower bound:"));
    ck_assert_ptr_nonnull(strstr(text, "naive sum:"));
    ck_assert_int_eq(count_substr(text, "\n"), p->n_nodes + 4);
    free(text);
    char *json = dump_to_string(gr_plan_dump_json, p);
    ck_assert_ptr_nonnull(strstr(json, "\"arena_bytes\""));
    ck_assert_ptr_nonnull(strstr(json, "\"lower_bound_bytes\""));
    ck_assert_ptr_nonnull(strstr(json, "\"naive_bytes\""));
    ck_assert_int_eq(count_substr(json, "{\"step\""), p->n_nodes);
    free(json);
    char *dot = dump_to_string(gr_plan_dump_dot, p);
    ck_assert_int_eq(count_substr(dot, "shape=diamond"), 3); /* 1 quantize + 2 dequantize */
    ck_assert_int_eq(count_substr(dot, "fillcolor=orange"), 1);
    free(dot);
    char *svg = dump_to_string(gr_plan_dump_svg, p);
    ck_assert_int_eq(count_substr(svg, "<rect"), p->n_buffers + 1);
    free(svg);
    gr_plan_free(p);
    release(net);
}
END_TEST

START_TEST(bad_arguments_are_reported)
{
    gr_net *net = builtin("yolov2-tiny-voc");
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    gr_plan *p = NULL;
    opt.batch = 0;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "batch 0"));
    release(net);

    ck_assert_int_eq(gr_net_builtin("yolov2-tiny-voc", &net), GR_OK); /* no weights */
    gr_plan_options_default(&opt);
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "no weights"));
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);

    /* int8 without scales cannot run. */
    opt.precision = GR_PREC_INT8;
    ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
    ck_assert_int_eq(p->scales_ready, 0);
    gr_plan_exec *ex = NULL;
    ck_assert_int_eq(gr_plan_exec_create(p, 0, &ex), GR_OK);
    uint8_t pixel = 0;
    ck_assert_int_eq(gr_plan_execute(ex, &pixel), GR_ERR_STATE);
    gr_plan_exec_destroy(ex);
    gr_plan_free(p);
    gr_plan_free(NULL);
    gr_plan_exec_destroy(NULL);
    release(net);
}
END_TEST

/* A plan without weight data (weight_data = 0: a saved GPU engine's load, whose device weights
 * are in the file) is the same plan - nodes with their weight offsets, tensors and their int8
 * scales, buffers, streams, arena - only without the numbers; and it cannot run on the CPU. */
static void expect_same_structure(const gr_plan *a, const gr_plan *b)
{
    ck_assert_int_eq(a->n_nodes, b->n_nodes);
    ck_assert_int_eq(a->n_tensors, b->n_tensors);
    ck_assert_int_eq(a->n_buffers, b->n_buffers);
    ck_assert_int_eq(a->n_outputs, b->n_outputs);
    ck_assert_int_eq(a->n_waits, b->n_waits);
    ck_assert(memcmp(a->nodes, b->nodes, (size_t)a->n_nodes * sizeof *a->nodes) == 0);
    ck_assert(memcmp(a->tensors, b->tensors, (size_t)a->n_tensors * sizeof *a->tensors) == 0);
    ck_assert(memcmp(a->buffers, b->buffers, (size_t)a->n_buffers * sizeof *a->buffers) == 0);
    ck_assert(memcmp(a->output_tensors, b->output_tensors,
                     (size_t)a->n_outputs * sizeof *a->output_tensors) == 0);
    ck_assert(a->n_waits == 0 ||
              memcmp(a->waits, b->waits, (size_t)a->n_waits * sizeof *a->waits) == 0);
    ck_assert_uint_eq(a->n_weight_floats, b->n_weight_floats);
    ck_assert_uint_eq(a->n_qweights, b->n_qweights);
    ck_assert_uint_eq(a->arena_bytes, b->arena_bytes);
    ck_assert_int_eq(a->n_streams, b->n_streams);
    ck_assert_int_eq(a->n_events, b->n_events);
    ck_assert_int_eq(a->scales_ready, b->scales_ready);
    ck_assert_ptr_null(b->weights);
    ck_assert_ptr_null(b->qweights);
}

static void check_without_weight_data(const gr_net *net, gr_precision prec, int batch, int fuse)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    opt.fuse_maxpool = opt.fuse_input_quantize = opt.fuse_output_dequantize = fuse;
    gr_plan *full = NULL, *bare = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &full) == GR_OK, "%s", gr_last_error());
    opt.weight_data = 0;
    ck_assert_msg(gr_plan_build(net, &opt, &bare) == GR_OK, "%s", gr_last_error());
    if (prec == GR_PREC_INT8) {
        float *range = malloc((size_t)net->n_layers * sizeof *range);
        ck_assert_ptr_nonnull(range);
        for (int i = 0; i < net->n_layers; i++)
            range[i] = 0.5f + 0.25f * (float)(i % 7);
        ck_assert_int_eq(gr_plan_set_ranges(full, range, 1.0f), GR_OK);
        ck_assert_int_eq(gr_plan_set_ranges(bare, range, 1.0f), GR_OK);
        free(range);
    }
    expect_same_structure(full, bare);
    gr_plan_exec *ex = NULL;
    ck_assert_int_eq(gr_plan_exec_create(bare, 0, &ex), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(gr_last_error(), "without its weights"), "%s", gr_last_error());
    gr_plan_free(full);
    gr_plan_free(bare);
}

START_TEST(plan_without_weight_data_is_the_same_plan)
{
    for (int m = 0; m < 2; m++)
        for (int prec = GR_PREC_FP32; prec <= GR_PREC_INT8; prec++)
            for (int fuse = 0; fuse < 2; fuse++)
                check_without_weight_data(builtin(model_names[m]), (gr_precision)prec,
                                          1 + 2 * fuse, fuse);
    for (uint64_t seed = 1; seed <= 24; seed++) {
        gr_net *net = NULL;
        ck_assert_int_eq(gr_test_random_net(seed, &net), GR_OK);
        check_without_weight_data(net, (gr_precision)(seed % 3), 1 + (int)(seed % 2), 1);
        gr_net_free(net);
    }
}
END_TEST

static Suite *planner_suite(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("passes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dag_has_one_node_per_layer_plus_input_and_outputs);
    tcase_add_test(tc, streams_capped);
    tcase_add_test(tc, dead_nodes_are_removed);
    tcase_add_test(tc, bn_folding_follows_darknet_formula);
    tcase_add_test(tc, maxpool_fuses_only_into_a_sole_consumer_conv);
    tcase_add_test(tc, uniform_int8_has_one_quantize_and_one_dequantize_per_head);
    tcase_add_test(tc, per_layer_map_converts_once_per_boundary);
    tcase_add_test(tc, grouped_dilated_strided_convs_stay_channels_last);
    tcase_add_test(tc, io_fusions_apply_only_where_a_conv_is_the_sole_partner);
    tcase_add_test(tc, no_fuse_layer_excludes_only_those_convs);
    tcase_add_test(tc, concat_head_dequantize_fuses_into_its_convs);
    tcase_add_test(tc, concat_head_keeps_its_dequantize_unless_convs_write_every_slice);
    tcase_add_test(tc, epilogue_records_fused_parts);
    tcase_add_test(tc, int8_weights_are_per_channel_symmetric);
    tcase_add_test(tc, concat_writes_into_slices_of_the_route);
    tcase_add_test(tc, concat_of_a_split_tensor_writes_it_in_place);
    tcase_add_test(tc, grouped_route_is_a_view_where_the_granule_allows);
    tcase_add_test(tc, shortcut_runs_in_place_when_its_input_dies);
    tcase_add_test(tc, independent_branches_get_their_own_stream);
    tcase_add_test(tc, views_show_nodes_qdq_and_memory);
    tcase_add_test(tc, bad_arguments_are_reported);
    tcase_add_test(tc, plan_without_weight_data_is_the_same_plan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    for (int i = 0; i < 2; i++) {
        if (gr_net_builtin(model_names[i], &models[i]) != GR_OK ||
            gr_net_synthesize_weights(models[i], 1) != GR_OK) {
            fprintf(stderr, "cannot load %s: %s\n", model_names[i], gr_last_error());
            return 1;
        }
    }
    SRunner *sr = srunner_create(planner_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (int i = 0; i < 2; i++)
        gr_net_free(models[i]);
    return failed == 0 ? 0 : 1;
}
