/* The roofline model (planner/plan.h, gr_plan_node_cost_of): FLOPs and must-move bytes of plan
 * nodes of YOLOv2-tiny (VOC) against values computed by hand, per precision and batch. The GPU
 * side (peaks, in-graph times) is tests/test_gpu_roofline.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/plan.h"

static gr_net *v2tiny;

static gr_plan *build(gr_precision prec, int batch, int fuse)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    opt.fuse_maxpool = fuse;
    opt.fuse_input_quantize = fuse;
    gr_plan *p = NULL;
    ck_assert_msg(gr_plan_build(v2tiny, &opt, &p) == GR_OK, "%s", gr_last_error());
    return p;
}

static int node_of(const gr_plan *p, int layer, int kind)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].layer == layer && p->nodes[i].kind == kind)
            return i;
    ck_abort_msg("no node of kind %d for layer %d", kind, layer);
    return -1;
}

static void expect(const gr_plan *p, int node, double flops, double act, double weights)
{
    gr_plan_node_cost c;
    ck_assert_int_eq(gr_plan_node_cost_of(p, node, &c), GR_OK);
    ck_assert_msg(c.flops == flops, "node %d flops %.0f, expected %.0f", node, c.flops, flops);
    ck_assert_msg(c.act_bytes == act, "node %d act bytes %.0f, expected %.0f", node, c.act_bytes,
                  act);
    ck_assert_msg(c.weight_bytes == weights, "node %d weight bytes %.0f, expected %.0f", node,
                  c.weight_bytes, weights);
}

/* Layer 0: 3 -> 16 channels, 3x3, 416 x 416, batch norm, leaky. Per image 2 x 27 multiply-adds
 * per output, plus the epilogue ops/conv.c counts: the plan folds the BN into w' and b', so 1
 * (adding b') + 1 (leaky) per output. */
static const double l0_outputs = 416.0 * 416.0 * 16.0;
static double l0_flops(void) { return 2.0 * 27.0 * l0_outputs + 2.0 * l0_outputs; }

START_TEST(layer0_int8_fused)
{
    /* The engine's plan: the conv reads the u8 input (1 byte a value) and writes its 2x2-pooled
     * i8 output (208 x 208 x 16); 432 i8 weights, b' and m[c] as floats. */
    static const int batches[] = {1, 64};
    for (int i = 0; i < 2; i++) {
        const double b = batches[i];
        gr_plan *p = build(GR_PREC_INT8, batches[i], 1);
        int n = node_of(p, 0, GR_OP_CONV);
        ck_assert(p->nodes[n].fused & GR_FUSED_MAXPOOL);
        ck_assert(p->nodes[n].fused & GR_FUSED_QUANTIZE_IN);
        expect(p, n, b * l0_flops(), b * (416.0 * 416.0 * 3.0 + 208.0 * 208.0 * 16.0),
               432.0 + 4.0 * 2.0 * 16.0);
        gr_plan_free(p);
    }
}
END_TEST

START_TEST(layer0_per_precision_unfused)
{
    /* Unfused: the conv reads the quantized / converted input at its dtype and writes the full
     * 416 x 416 x 16 map; the maxpool and the input's quantize are nodes of their own. */
    struct {
        gr_precision prec;
        double size;         /* activation bytes a value */
        double weight_bytes; /* 432 weights at the precision's size, b' (and m[c] for i8) */
    } cases[] = {
        {GR_PREC_INT8, 1.0, 432.0 + 4.0 * 2.0 * 16.0},
        {GR_PREC_FP16, 2.0, 432.0 * 2.0 + 4.0 * 16.0},
        {GR_PREC_FP32, 4.0, 432.0 * 4.0 + 4.0 * 16.0},
    };
    for (int i = 0; i < 3; i++) {
        const double b = 2.0, s = cases[i].size;
        gr_plan *p = build(cases[i].prec, 2, 0);
        expect(p, node_of(p, 0, GR_OP_CONV), b * l0_flops(),
               b * s * (416.0 * 416.0 * 3.0 + l0_outputs), cases[i].weight_bytes);
        /* Layer 1, the maxpool: reads the map, writes a quarter of it; no weights. Its flops are
         * the op table's (ops/maxpool.c): 4 per output here, checked against the op directly. */
        int mp = node_of(p, 1, GR_OP_MAXPOOL);
        gr_plan_node_cost c;
        ck_assert_int_eq(gr_plan_node_cost_of(p, mp, &c), GR_OK);
        ck_assert(c.weight_bytes == 0.0);
        ck_assert_msg(c.act_bytes == b * s * (l0_outputs + l0_outputs / 4.0), "%.0f",
                      c.act_bytes);
        ck_assert(c.flops > 0.0);
        gr_plan_free(p);
    }
}
END_TEST

START_TEST(last_conv_and_conversions)
{
    /* Layer 14: 1x1, 1024 -> 125 on 13 x 13, linear, bias only (no BN); in fp16 it writes f32
     * through its fused dequantize or an f16 tensor. */
    gr_plan *p = build(GR_PREC_FP16, 1, 1);
    int n = node_of(p, 14, GR_OP_CONV);
    const double outputs = 13.0 * 13.0 * 125.0;
    double out_size = gr_dtype_size(p->tensors[p->nodes[n].output].dtype);
    expect(p, n, 2.0 * 1024.0 * outputs + 1.0 * outputs,
           13.0 * 13.0 * 1024.0 * 2.0 + outputs * out_size, 1024.0 * 125.0 * 2.0 + 4.0 * 125.0);
    /* Markers and nodes that launch nothing cost nothing. */
    for (int i = 0; i < p->n_nodes; i++) {
        const gr_plan_node *nd = &p->nodes[i];
        if (nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT || nd->noop)
            expect(p, i, 0.0, 0.0, 0.0);
    }
    gr_plan_free(p);

    /* The unfused int8 plan's input quantize: u8 in, i8 out, one pass over 416 x 416 x 3. */
    p = build(GR_PREC_INT8, 1, 0);
    int q = node_of(p, -1, GR_OP_QUANTIZE);
    gr_plan_node_cost c;
    ck_assert_int_eq(gr_plan_node_cost_of(p, q, &c), GR_OK);
    ck_assert(c.act_bytes == 2.0 * 416.0 * 416.0 * 3.0);
    ck_assert(c.weight_bytes == 0.0);
    gr_plan_free(p);
}
END_TEST

START_TEST(bad_arguments)
{
    gr_plan *p = build(GR_PREC_FP32, 1, 0);
    gr_plan_node_cost c;
    ck_assert_int_eq(gr_plan_node_cost_of(p, -1, &c), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_plan_node_cost_of(p, p->n_nodes, &c), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_plan_node_cost_of(NULL, 0, &c), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_plan_node_cost_of(p, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    gr_plan_free(p);
}
END_TEST

int main(void)
{
    if (gr_net_builtin("yolov2-tiny-voc", &v2tiny) != GR_OK ||
        gr_net_synthesize_weights(v2tiny, 1) != GR_OK) {
        fprintf(stderr, "cannot load yolov2-tiny-voc: %s\n", gr_last_error());
        return 1;
    }
    Suite *s = suite_create("roofline");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, layer0_int8_fused);
    tcase_add_test(tc, layer0_per_precision_unfused);
    tcase_add_test(tc, last_conv_and_conversions);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    gr_net_free(v2tiny);
    return failed == 0 ? 0 : 1;
}
