/* Check suite for runtime/cpu/reference.c, the whole-network CPU reference executor: a small
 * hand-built network with values worked out by hand (wiring, liveness, keep_all), error paths,
 * and YOLOv2-tiny-VOC with synthetic weights end to end (shape, finiteness, determinism, and each
 * conv layer equal to calling the op reference directly on the executor's own inputs). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/net.h"
#include "runtime/cpu/reference.h"

/* ---- a hand-built three-layer network ---------------------------------------------------------
 * input 1x2x2 = (1 2 3 4)
 * layer 0: conv 1 filter 1x1, weight 2, bias 1, linear  -> 2x+1     = 3 5 7 9
 * layer 1: shortcut x = layer 0, from = the input       -> 3x+1     = 4 7 10 13
 * layer 2: route [0, 1]                                 -> 3 5 7 9 4 7 10 13 (2x2x2)
 * Layer 0 is read by layers 1 and 2, so with keep_all=0 it must survive until layer 2 ran. */

typedef struct small_net {
    gr_net net;
    gr_layer layers[3];
    float weight[1], bias[1];
} small_net;

static void build_small_net(small_net *s)
{
    memset(s, 0, sizeof *s);
    s->net.c = 1;
    s->net.h = 2;
    s->net.w = 2;
    s->net.n_layers = 3;
    s->net.layers = s->layers;
    s->weight[0] = 2.0f;
    s->bias[0] = 1.0f;

    gr_layer *conv = &s->layers[0];
    gr_op_params_default(GR_OP_CONV, &conv->p);
    conv->p.filters = 1;
    conv->p.activation = GR_ACT_LINEAR;
    conv->n_inputs = 1;
    conv->inputs[0] = -1;
    conv->w = (gr_weights){.n = 1, .biases = s->bias, .weights = s->weight, .n_weights = 1};

    gr_layer *shortcut = &s->layers[1];
    gr_op_params_default(GR_OP_SHORTCUT, &shortcut->p);
    shortcut->n_inputs = 2;
    shortcut->inputs[0] = 0;
    shortcut->inputs[1] = -1;

    gr_layer *route = &s->layers[2];
    gr_op_params_default(GR_OP_ROUTE, &route->p);
    route->n_inputs = 2;
    route->inputs[0] = 0;
    route->inputs[1] = 1;

    for (int i = 0; i < 3; i++) {
        gr_layer *l = &s->layers[i];
        l->cfg_line = 10 * (i + 1);
        gr_shape in[GR_MAX_INPUTS];
        for (int k = 0; k < l->n_inputs; k++)
            in[k] = gr_net_input_shape(&s->net, i, k);
        ck_assert_int_eq(gr_op_infer(&l->p, in, l->n_inputs, &l->out), GR_OK);
    }
}

static void free_outputs(float **outputs, int n)
{
    for (int i = 0; i < n; i++)
        free(outputs[i]);
}

START_TEST(test_small_net_keep_all)
{
    small_net s;
    build_small_net(&s);
    const float input[4] = {1, 2, 3, 4};
    float *outputs[3];
    ck_assert_int_eq(gr_reference_forward(&s.net, input, 1, 1, outputs), GR_OK);
    const float want0[4] = {3, 5, 7, 9}, want1[4] = {4, 7, 10, 13};
    const float want2[8] = {3, 5, 7, 9, 4, 7, 10, 13};
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(outputs[i]);
    ck_assert_mem_eq(outputs[0], want0, sizeof want0);
    ck_assert_mem_eq(outputs[1], want1, sizeof want1);
    ck_assert_mem_eq(outputs[2], want2, sizeof want2);
    free_outputs(outputs, 3);
}
END_TEST

START_TEST(test_small_net_keeps_only_heads)
{
    /* No region/yolo layer: the head is the last layer; everything else is freed (NULL). Batch 2
     * (second image = first + 1: 2x+1 -> 5 7 9 11, 3x+1 -> 7 10 13 16). */
    small_net s;
    build_small_net(&s);
    const float input[8] = {1, 2, 3, 4, 2, 3, 4, 5};
    float *outputs[3] = {(float *)&s, (float *)&s, (float *)&s}; /* incoming values ignored */
    ck_assert_int_eq(gr_reference_forward(&s.net, input, 2, 0, outputs), GR_OK);
    ck_assert_ptr_null(outputs[0]);
    ck_assert_ptr_null(outputs[1]);
    ck_assert_ptr_nonnull(outputs[2]);
    const float want[16] = {3, 5, 7, 9, 4, 7, 10, 13, 5, 7, 9, 11, 7, 10, 13, 16};
    ck_assert_mem_eq(outputs[2], want, sizeof want);
    free_outputs(outputs, 3);
}
END_TEST

START_TEST(test_missing_weights_fail_cleanly)
{
    small_net s;
    build_small_net(&s);
    s.layers[0].w.weights = NULL;
    const float input[4] = {1, 2, 3, 4};
    float *outputs[3];
    gr_status st = gr_reference_forward(&s.net, input, 1, 1, outputs);
    ck_assert_int_eq(st, GR_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "layer 0 (conv, cfg line 10)"));
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_null(outputs[i]);
}
END_TEST

START_TEST(test_bad_arguments)
{
    small_net s;
    build_small_net(&s);
    const float input[4] = {1, 2, 3, 4};
    float *outputs[3];
    ck_assert_int_eq(gr_reference_forward(&s.net, input, 0, 1, outputs), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_reference_forward(NULL, input, 1, 1, outputs), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_reference_forward(&s.net, NULL, 1, 1, outputs), GR_ERR_INVALID_ARGUMENT);
    /* a forward edge breaks the topological order */
    s.layers[1].inputs[1] = 2;
    ck_assert_int_eq(gr_reference_forward(&s.net, input, 1, 1, outputs), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "layer 1"));
    /* a stored shape that is not what infer() gives */
    build_small_net(&s);
    s.layers[2].out.c = 3;
    ck_assert_int_eq(gr_reference_forward(&s.net, input, 1, 1, outputs), GR_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_null(outputs[i]);
}
END_TEST

/* ---- YOLOv2-tiny-VOC end to end ---------------------------------------------------------------- */

static gr_net *load_yolov2_tiny(void)
{
    gr_net *net = NULL;
    gr_status st = gr_net_builtin("yolov2-tiny-voc", &net);
    ck_assert_msg(st == GR_OK, "gr_net_builtin: %s", gr_last_error());
    st = gr_net_synthesize_weights(net, 1);
    ck_assert_msg(st == GR_OK, "gr_net_synthesize_weights: %s", gr_last_error());
    return net;
}

static float *deterministic_input(const gr_net *net)
{
    size_t n = (size_t)net->c * (size_t)net->h * (size_t)net->w;
    float *input = malloc(n * sizeof *input);
    ck_assert_ptr_nonnull(input);
    gr_rng rng;
    gr_rng_seed(&rng, 2024);
    for (size_t i = 0; i < n; i++)
        input[i] = gr_rng_uniform(&rng); /* pixel values in [0, 1), like a decoded image */
    return input;
}

static double seconds_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(test_yolov2_tiny_forward)
{
    gr_net *net = load_yolov2_tiny();
    float *input = deterministic_input(net);
    const int n = net->n_layers;
    float **all = calloc((size_t)n, sizeof *all);
    float **heads_only = calloc((size_t)n, sizeof *heads_only);
    ck_assert_ptr_nonnull(all);
    ck_assert_ptr_nonnull(heads_only);

    double t0 = seconds_now();
    gr_status st = gr_reference_forward(net, input, 1, 1, all);
    double t1 = seconds_now();
    ck_assert_msg(st == GR_OK, "forward: %s", gr_last_error());
    printf("test_reference: yolov2-tiny-voc reference forward %.2f s\n", t1 - t0);

    /* The head is the region layer's input: the last conv, 125 = 5*(4+1+20) channels of 13x13. */
    int head;
    ck_assert_int_eq(gr_net_heads(net, &head, 1), 1);
    ck_assert_int_eq(head, n - 2);
    ck_assert_int_eq(net->layers[head].out.c, 125);
    ck_assert_int_eq(net->layers[head].out.h, 13);
    ck_assert_int_eq(net->layers[head].out.w, 13);

    /* Every value of every layer is finite, and not everything is zero. */
    for (int i = 0; i < n; i++) {
        size_t elems = gr_shape_elems(net->layers[i].out);
        size_t nonzero = 0;
        for (size_t e = 0; e < elems; e++) {
            ck_assert_msg(isfinite(all[i][e]), "layer %d element %zu is %g", i, e,
                          (double)all[i][e]);
            nonzero += all[i][e] != 0.0f;
        }
        ck_assert_msg(nonzero > 0, "layer %d is all zeros", i);
    }

    /* Deterministic: a second run (keep_all=0) gives the same head bytes. */
    st = gr_reference_forward(net, input, 1, 0, heads_only);
    ck_assert_msg(st == GR_OK, "forward: %s", gr_last_error());
    for (int i = 0; i < n; i++)
        ck_assert_msg((heads_only[i] != NULL) == (i == head), "layer %d kept=%d", i,
                      heads_only[i] != NULL);
    ck_assert_mem_eq(heads_only[head], all[head], gr_shape_elems(net->layers[head].out) * 4);

    /* Layer by layer: each conv output equals the conv reference (gr_op_ref) on its own input. */
    for (int i = 0; i < n; i++) {
        const gr_layer *l = &net->layers[i];
        if (l->p.op != GR_OP_CONV)
            continue;
        gr_shape in_shape = gr_net_input_shape(net, i, 0);
        const float *in = l->inputs[0] < 0 ? input : all[l->inputs[0]];
        size_t elems = gr_shape_elems(l->out);
        float *direct = malloc(elems * sizeof *direct);
        ck_assert_ptr_nonnull(direct);
        gr_op_ref(&l->p, &l->w, &in, &in_shape, 1, direct, l->out, 1);
        ck_assert_msg(memcmp(direct, all[i], elems * sizeof *direct) == 0,
                      "conv layer %d differs from the conv reference", i);
        free(direct);
    }

    free_outputs(all, n);
    free_outputs(heads_only, n);
    free(all);
    free(heads_only);
    free(input);
    gr_net_free(net);
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("reference");
    /* the YOLOv2-tiny forward runs ~7 GFLOP three times; generous for sanitizer builds */
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_small_net_keep_all);
    tcase_add_test(tc, test_small_net_keeps_only_heads);
    tcase_add_test(tc, test_missing_weights_fail_cleanly);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_yolov2_tiny_forward);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reference_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
