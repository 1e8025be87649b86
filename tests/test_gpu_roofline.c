/* The roofline table's GPU side (runtime.h, gr_engine_roofline; docs/performance.md,
 * "Roofline"): YOLOv2-tiny in each precision; every node that launches work has its in-graph
 * time (one positive time, at least one kernel), the exclusive times add up to no more than the
 * untraced replay (events) plus slack, and a batch run as 2 passes of 1 image ran each node's
 * kernels twice. The peaks are measured once per process. Never asserts which kernel a card
 * prefers, nor that a node reaches its floor.
 * Exits 77 (skipped) with one line when no CUDA device is visible or the build has no CUPTI. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"

enum { REPLAYS = 10 };

static gr_model *model;

static gr_engine *build(gr_precision prec, int batch, int micro_batch, int graph)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = batch;
    eo.micro_batch = micro_batch;
    eo.use_cuda_graph = graph;
    eo.calib_cache = "/tmp/graphrun_gpu_roofline_yolo.calib";
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(model, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

static gr_roofline *measure(gr_engine *e)
{
    gr_roofline *r = NULL;
    ck_assert_msg(gr_engine_roofline(e, REPLAYS, &r) == GR_OK, "%s", gr_last_error());
    ck_assert(r != NULL);
    return r;
}

/* The table's invariants for an engine of `batch` images. */
static void check_table(gr_engine *e, const gr_roofline *r, int batch)
{
    ck_assert_int_eq(r->batch, batch);
    ck_assert_int_eq(r->replays, REPLAYS);
    ck_assert(r->peaks.dram_gbs > 0 && r->peaks.int8_tops > 0 && r->peaks.fp16_tops > 0 &&
              r->peaks.fp32_tflops > 0);
    /* The same launching nodes as the engine's per-node times, in the same order. */
    ck_assert_int_eq(r->n_nodes, gr_engine_node_time_count(e));
    double floors = 0, exclusive = 0;
    for (int k = 0; k < r->n_nodes; k++) {
        const gr_roofline_node *n = &r->nodes[k];
        gr_node_time t;
        ck_assert(gr_engine_node_time(e, k, &t) == GR_OK);
        ck_assert_int_eq(n->layer, t.layer);
        ck_assert_str_eq(n->kind, t.kind);
        ck_assert_msg(n->kernels >= 1 && n->us > 0, "node %d (layer %d %s): %d kernels, %.3f us",
                      n->node, n->layer, n->kind, n->kernels, n->us);
        ck_assert_msg(n->exclusive_us >= 0 && n->exclusive_us <= n->us + 1e-6,
                      "node %d: exclusive %.3f of %.3f us", n->node, n->exclusive_us, n->us);
        ck_assert(n->flops > 0 && n->bytes > 0 && n->floor_us > 0);
        ck_assert(n->weight_bytes >= 0 && n->weight_bytes <= n->bytes);
        floors += n->floor_us;
        exclusive += n->exclusive_us;
    }
    ck_assert(fabs(floors - r->floor_sum_us) <= 1e-6 * floors + 1e-9);
    ck_assert(r->replay_us > 0);
    /* Kernels of one replay cannot take longer than the replay (+10% and 20 us: the traced
     * replays are not the timed ones). */
    ck_assert_msg(exclusive <= 1.1 * r->replay_us + 20.0, "node times %.1f us, replay %.1f us",
                  exclusive, r->replay_us);
    ck_assert_msg(r->busy_us + 1e-6 >= exclusive && r->busy_us <= 1.1 * r->replay_us + 20.0,
                  "busy %.1f us, nodes %.1f us, replay %.1f us", r->busy_us, exclusive,
                  r->replay_us);
}

START_TEST(every_node_timed_in_the_graph)
{
    gr_precision prec = (gr_precision)_i;
    gr_engine *e = build(prec, 1, 0, 1);
    gr_roofline *r = measure(e);
    check_table(e, r, 1);
    printf("gpu_roofline: %s batch 1: %d nodes, floors %.1f us, kernels %.1f us, replay %.1f us\n",
           gr_precision_name(prec), r->n_nodes, r->floor_sum_us, r->kernel_sum_us, r->replay_us);
    gr_roofline_free(r);
    gr_engine_destroy(e);
}
END_TEST

START_TEST(slices_counted_per_replay)
{
    /* Batch 8 as two passes of four images (a pass's f32 head output then ends on a 16-byte
     * boundary, as the kernels need): each node's kernels run twice a replay, its work and
     * activations double, its weights are counted once. */
    gr_engine *one = build(GR_PREC_INT8, 4, 0, 1);
    gr_engine *two = build(GR_PREC_INT8, 8, 4, 1);
    ck_assert_int_eq(gr_engine_micro_batch(two), 4);
    gr_roofline *a = measure(one), *b = measure(two);
    check_table(two, b, 8);
    ck_assert_int_eq(a->n_nodes, b->n_nodes);
    for (int k = 0; k < a->n_nodes; k++) {
        const gr_roofline_node *x = &a->nodes[k], *y = &b->nodes[k];
        ck_assert_msg(y->kernels == 2 * x->kernels, "node %d: %d kernels a pass, %d in 2 passes",
                      x->node, x->kernels, y->kernels);
        ck_assert(fabs(y->flops - 2 * x->flops) <= 1e-9 * y->flops);
        ck_assert(y->weight_bytes == x->weight_bytes);
        ck_assert(fabs(y->bytes - y->weight_bytes - 2 * (x->bytes - x->weight_bytes)) <=
                  1e-9 * y->bytes);
    }
    /* The peaks were measured once: the second table has the first's. */
    ck_assert(memcmp(&a->peaks, &b->peaks, sizeof a->peaks) == 0);
    gr_roofline_free(a);
    gr_roofline_free(b);
    gr_engine_destroy(one);
    gr_engine_destroy(two);
}
END_TEST

START_TEST(refusals)
{
    gr_roofline *r = (gr_roofline *)1;
    ck_assert_int_eq(gr_engine_roofline(NULL, REPLAYS, &r), GR_ERR_INVALID_ARGUMENT);
    gr_engine *e = build(GR_PREC_FP16, 1, 0, 1);
    ck_assert_int_eq(gr_engine_roofline(e, 0, &r), GR_ERR_INVALID_ARGUMENT);
    ck_assert(r == NULL);
    ck_assert_int_eq(gr_engine_roofline(e, REPLAYS, NULL), GR_ERR_INVALID_ARGUMENT);
    gr_engine_destroy(e);
    /* Without a CUDA graph there is no replay to trace. */
    e = build(GR_PREC_FP16, 1, 0, 0);
    ck_assert_int_eq(gr_engine_roofline(e, REPLAYS, &r), GR_ERR_UNSUPPORTED);
    ck_assert(strstr(gr_last_error(), "without CUDA graphs") != NULL);
    gr_engine_destroy(e);
    /* A CPU engine has no kernels. */
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    ck_assert(gr_engine_build(model, &eo, &e) == GR_OK);
    ck_assert_int_eq(gr_engine_roofline(e, REPLAYS, &r), GR_ERR_STATE);
    gr_engine_destroy(e);
    gr_roofline_free(NULL);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_roofline"))
        return 77;
    if (!gr_roofline_available()) {
        printf("SKIP gpu_roofline: this graphrun was built without CUPTI\n");
        return 77;
    }
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "yolo";
    if (gr_model_load(&mo, &model) != GR_OK) {
        fprintf(stderr, "gpu_roofline: loading yolo: %s\n", gr_last_error());
        return 1;
    }
    Suite *s = suite_create("gpu_roofline");
    TCase *tc = tcase_create("roofline");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, every_node_timed_in_the_graph, GR_PREC_FP32, GR_PREC_INT8 + 1);
    tcase_add_test(tc, slices_counted_per_replay);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    gr_model_destroy(model);
    return failed == 0 ? 0 : 1;
}
