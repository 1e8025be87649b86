/* Planner memory properties over 1,000+ seeded random DAGs (chains, fan-out, concat, shortcut,
 * upsample, reorg, several heads, mixed per-layer dtypes, batch 1-2, random options):
 *   - no two tensors whose live intervals overlap share bytes (checked here from the schedule,
 *     independently of the planner's own bookkeeping, and by gr_plan_check for streams);
 *   - executing in the planned arena is bit-identical to executing the same plan with one
 *     private buffer per storage group, and to a plan without aliasing (no concat views, no
 *     in-place) where every tensor has its own private buffer; with the I/O fusions on or off.
 * Plus the arena targets on the real models. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "tests/support/plan_nets.h"

#define N_RANDOM_DAGS 1000

static void random_options(gr_rng *r, const gr_net *net, gr_plan_options *opt, gr_precision *map)
{
    gr_plan_options_default(opt);
    opt->precision = (gr_precision)(gr_rng_u64(r) % 3);
    opt->batch = 1 + (int)(gr_rng_u64(r) % 2);
    opt->fuse_maxpool = (int)(gr_rng_u64(r) % 2);
    opt->single_stream = (int)(gr_rng_u64(r) % 4 == 0);
    opt->decode_heads = (int)(gr_rng_u64(r) % 4 == 0);
    opt->nchw_strided_views = (int)(gr_rng_u64(r) % 2);
    opt->max_streams = (int)(gr_rng_u64(r) % 4); /* 0: uncapped; 1-3 caps a forking DAG */
    if (gr_rng_u64(r) % 2) {
        for (int i = 0; i < net->n_layers; i++)
            map[i] = (gr_precision)(gr_rng_u64(r) % 3);
        opt->layer_precision = map;
        opt->n_layer_precision = net->n_layers;
    }
}

/* Independent check: tensors with overlapping [first write, last read] share no bytes unless
 * they are the same storage by design (a view of it, or an in-place result of it). */
static void assert_disjoint_live_tensors(const gr_plan *p, uint64_t seed)
{
    int n = p->n_tensors;
    int *begin = malloc((size_t)n * sizeof *begin), *end = malloc((size_t)n * sizeof *end);
    ck_assert_ptr_nonnull(begin);
    ck_assert_ptr_nonnull(end);
    for (int t = 0; t < n; t++)
        begin[t] = end[t] = p->tensors[t].producer;
    for (int i = 0; i < p->n_nodes; i++)
        for (int k = 0; k < p->nodes[i].n_inputs; k++)
            if (i > end[p->nodes[i].inputs[k]])
                end[p->nodes[i].inputs[k]] = i;
    for (int t = 0; t < n; t++)
        if (p->tensors[t].pinned) {
            begin[t] = 0;
            end[t] = p->n_nodes - 1;
        }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const gr_plan_tensor *x = &p->tensors[a], *y = &p->tensors[b];
            if (x->buffer == y->buffer)
                continue; /* aliasing by design: views and in-place, checked by execution */
            const gr_plan_buffer *bx = &p->buffers[x->buffer], *by = &p->buffers[y->buffer];
            int share = bx->offset < by->offset + by->bytes && by->offset < bx->offset + bx->bytes;
            if (!(begin[a] <= end[b] && begin[b] <= end[a])) {
                /* Sharing across streams: every access of the earlier tensor must happen before
                 * the later one is written. */
                if (!share)
                    continue;
                int first = end[a] < begin[b] ? a : b, second = first == a ? b : a;
                int writer = p->tensors[second].producer;
                if (!gr_plan_happens_before(p, p->tensors[first].producer, writer))
                    ck_abort_msg("seed %llu: tensor %d reuses %d before its producer finished",
                                 (unsigned long long)seed, second, first);
                for (int i = 0; i < p->n_nodes; i++)
                    for (int k = 0; k < p->nodes[i].n_inputs; k++)
                        if (p->nodes[i].inputs[k] == first && !gr_plan_happens_before(p, i, writer))
                            ck_abort_msg("seed %llu: tensor %d overwrites %d while node %d may "
                                         "still read it",
                                         (unsigned long long)seed, second, first, i);
                continue;
            }
            if (share) /* (a Check assertion per pair would cost a pipe write each) */
                ck_abort_msg("seed %llu: tensors %d [%d,%d] and %d [%d,%d] share bytes",
                             (unsigned long long)seed, a, begin[a], end[a], b, begin[b], end[b]);
        }
    free(begin);
    free(end);
}

static void *random_input(gr_rng *r, const gr_plan *p)
{
    const gr_plan_tensor *t = &p->tensors[p->input_tensor];
    size_t count = (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
    if (t->dtype == GR_DTYPE_U8) {
        uint8_t *v = malloc(count);
        for (size_t i = 0; i < count; i++)
            v[i] = (uint8_t)(gr_rng_u64(r) & 0xff);
        return v;
    }
    float *v = malloc(count * sizeof *v);
    for (size_t i = 0; i < count; i++)
        v[i] = gr_rng_uniform(r);
    return v;
}

static void set_test_ranges(gr_plan *p, int n_layers)
{
    float ranges[64];
    for (int i = 0; i < n_layers && i < 64; i++)
        ranges[i] = 1.0f + (float)(i % 5);
    ck_assert_int_eq(gr_plan_set_ranges(p, ranges, 1.0f), GR_OK);
}

static float **run_plan(const gr_plan *p, int private_buffers, const void *input)
{
    gr_plan_exec *ex = NULL;
    ck_assert_int_eq(gr_plan_exec_create(p, private_buffers, &ex), GR_OK);
    ck_assert_msg(gr_plan_execute(ex, input) == GR_OK, "%s", gr_last_error());
    float **outs = calloc((size_t)p->n_outputs, sizeof *outs);
    for (int k = 0; k < p->n_outputs; k++) {
        const gr_plan_tensor *t = &p->tensors[p->output_tensors[k]];
        size_t bytes = (size_t)t->n * t->c * t->h * t->w * sizeof(float);
        outs[k] = malloc(bytes);
        memcpy(outs[k], gr_plan_exec_output(ex, k), bytes);
    }
    gr_plan_exec_destroy(ex);
    return outs;
}

static void free_outputs(float **outs, int n)
{
    for (int k = 0; k < n; k++)
        free(outs[k]);
    free(outs);
}

START_TEST(random_dags_arena_equals_private_buffers)
{
    int multi_stream_plans = 0, views = 0, in_place = 0, conversions = 0, fused_io = 0;
    for (uint64_t seed = 1; seed <= N_RANDOM_DAGS; seed++) {
        gr_net *net = NULL;
        ck_assert_msg(gr_test_random_net(seed, &net) == GR_OK, "seed %llu: %s",
                      (unsigned long long)seed, gr_last_error());
        gr_rng r;
        gr_rng_seed(&r, seed);
        gr_precision map[64];
        gr_plan_options opt;
        random_options(&r, net, &opt, map);
        /* The I/O fusions from a stream of their own, so the other draws stay as they were. */
        gr_rng fusion_rng;
        gr_rng_seed(&fusion_rng, seed * 7919u + 1u);
        opt.fuse_input_quantize = (int)(gr_rng_u64(&fusion_rng) % 2);
        opt.fuse_output_dequantize = (int)(gr_rng_u64(&fusion_rng) % 2);
        gr_plan *planned = NULL, *unaliased = NULL;
        ck_assert_msg(gr_plan_build(net, &opt, &planned) == GR_OK, "seed %llu: %s",
                      (unsigned long long)seed, gr_last_error());
        gr_plan_options plain = opt;
        plain.concat_in_place = 0;
        plain.in_place = 0;
        ck_assert_int_eq(gr_plan_build(net, &plain, &unaliased), GR_OK);
        ck_assert_msg(gr_plan_check(planned) == GR_OK, "seed %llu: %s", (unsigned long long)seed,
                      gr_last_error());
        assert_disjoint_live_tensors(planned, seed);
        ck_assert_uint_ge(planned->arena_bytes, planned->lower_bound_bytes);
        ck_assert_uint_le(planned->arena_bytes, planned->naive_bytes);
        set_test_ranges(planned, net->n_layers);
        set_test_ranges(unaliased, net->n_layers);

        void *input = random_input(&r, planned);
        float **in_arena = run_plan(planned, 0, input);
        float **in_private = run_plan(planned, 1, input);
        float **plain_private = run_plan(unaliased, 1, input);
        for (int k = 0; k < planned->n_outputs; k++) {
            const gr_plan_tensor *t = &planned->tensors[planned->output_tensors[k]];
            size_t bytes = (size_t)t->n * t->c * t->h * t->w * sizeof(float);
            ck_assert_msg(memcmp(in_arena[k], in_private[k], bytes) == 0,
                          "seed %llu output %d: arena differs from private buffers",
                          (unsigned long long)seed, k);
            ck_assert_msg(memcmp(in_arena[k], plain_private[k], bytes) == 0,
                          "seed %llu output %d: arena differs from the unaliased plan",
                          (unsigned long long)seed, k);
        }
        multi_stream_plans += planned->n_streams > 1;
        unsigned io_parts = GR_FUSED_QUANTIZE_IN | GR_FUSED_DEQUANT_OUT;
        for (int i = 0; i < planned->n_nodes; i++)
            fused_io += (planned->nodes[i].fused & io_parts) != 0;
        for (int t = 0; t < planned->n_tensors; t++) {
            views += planned->tensors[t].view_of >= 0;
            in_place += planned->tensors[t].inplace_of >= 0;
        }
        conversions += gr_plan_count_kind(planned, GR_OP_QUANTIZE) +
                       gr_plan_count_kind(planned, GR_OP_DEQUANTIZE) +
                       gr_plan_count_kind(planned, GR_NODE_CONVERT);
        free_outputs(in_arena, planned->n_outputs);
        free_outputs(in_private, planned->n_outputs);
        free_outputs(plain_private, unaliased->n_outputs);
        free(input);
        gr_plan_free(planned);
        gr_plan_free(unaliased);
        gr_net_free(net);
    }
    /* The generator must really exercise the interesting cases. */
    printf("random DAGs: %d multi-stream plans, %d views, %d in-place tensors, %d conversions, "
           "%d convs with fused I/O conversions\n",
           multi_stream_plans, views, in_place, conversions, fused_io);
    ck_assert_int_gt(multi_stream_plans, 50);
    ck_assert_int_gt(views, 100);
    ck_assert_int_gt(in_place, 20);
    ck_assert_int_gt(conversions, 500);
    ck_assert_int_gt(fused_io, 100);
}
END_TEST

/* ---- arena targets on the real models ---------------------------------------------------- */

/* Loaded once in main() before the tests fork: synthesizing weights takes about a second. */
static const char *const model_names[] = {"yolov2-tiny-voc", "yolov2-tiny", "yolov3-tiny"};
static gr_net *models[3];
static gr_net *route_reorg;

static void plan_stats(const gr_net *net, gr_precision prec, int batch, gr_plan **out)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.batch = batch;
    ck_assert_msg(gr_plan_build(net, &opt, out) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_plan_check(*out), GR_OK);
    printf("%-16s %-4s batch %d: arena %zu lower bound %zu naive %zu (%s)\n", net->name,
           gr_precision_name(prec), batch, (*out)->arena_bytes, (*out)->lower_bound_bytes,
           (*out)->naive_bytes, (*out)->placement);
}

START_TEST(chain_models_reach_the_lower_bound)
{
    for (int m = 0; m < 2; m++) {
        const gr_net *net = models[m];
        for (int prec = 0; prec < 3; prec++)
            for (int batch = 1; batch <= 8; batch += 7) {
                gr_plan *p = NULL;
                plan_stats(net, (gr_precision)prec, batch, &p);
                ck_assert_uint_eq(p->arena_bytes, p->lower_bound_bytes);
                ck_assert_uint_lt(p->arena_bytes, p->naive_bytes);
                gr_plan_free(p);
            }
    }
}
END_TEST

START_TEST(dag_models_within_five_percent_of_the_lower_bound)
{
    const gr_net *nets[2] = {models[2], route_reorg};
    for (int m = 0; m < 2; m++) {
        for (int prec = 0; prec < 3; prec++)
            for (int batch = 1; batch <= 8; batch += 7) {
                gr_plan *p = NULL;
                plan_stats(nets[m], (gr_precision)prec, batch, &p);
                /* arena <= 1.05 x lower bound, in integers */
                ck_assert_uint_le(p->arena_bytes * 100, p->lower_bound_bytes * 105);
                gr_plan_free(p);
            }
    }
}
END_TEST

START_TEST(pinned_buffers_are_never_shared)
{
    for (int m = 0; m < 3; m++)
        for (int prec = 0; prec < 3; prec++) {
            gr_plan_options opt;
            gr_plan_options_default(&opt);
            opt.precision = (gr_precision)prec;
            gr_plan *p = NULL;
            ck_assert_int_eq(gr_plan_build(models[m], &opt, &p), GR_OK);
            int pinned = 0;
            for (int a = 0; a < p->n_buffers; a++) {
                const gr_plan_buffer *x = &p->buffers[a];
                if (!x->pinned)
                    continue;
                pinned++;
                for (int b = 0; b < p->n_buffers; b++) {
                    const gr_plan_buffer *y = &p->buffers[b];
                    if (b != a && x->offset < y->offset + y->bytes &&
                        y->offset < x->offset + x->bytes)
                        ck_abort_msg("%s: pinned buffer %d shares bytes with %d", models[m]->name,
                                     a, b);
                }
            }
            ck_assert_int_eq(pinned, 1 + p->n_outputs); /* the input and every output */
            gr_plan_free(p);
        }
}
END_TEST

START_TEST(plans_are_deterministic)
{
    const gr_net *net = models[2];
    char *dumps[2] = {NULL, NULL};
    long sizes[2];
    for (int k = 0; k < 2; k++) {
        gr_plan_options opt;
        gr_plan_options_default(&opt);
        opt.precision = GR_PREC_INT8;
        gr_plan *p = NULL;
        ck_assert_int_eq(gr_plan_build(net, &opt, &p), GR_OK);
        FILE *f = tmpfile();
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(gr_plan_dump_json(p, f), GR_OK);
        sizes[k] = ftell(f);
        rewind(f);
        dumps[k] = malloc((size_t)sizes[k]);
        ck_assert_uint_eq(fread(dumps[k], 1, (size_t)sizes[k], f), (size_t)sizes[k]);
        fclose(f);
        if (k == 1) {
            ck_assert_int_eq(sizes[0], sizes[1]);
            ck_assert_int_eq(memcmp(dumps[0], dumps[1], (size_t)sizes[0]), 0);
        }
        gr_plan_free(p);
    }
    free(dumps[0]);
    free(dumps[1]);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("planner_arena");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, random_dags_arena_equals_private_buffers);
    tcase_add_test(tc, chain_models_reach_the_lower_bound);
    tcase_add_test(tc, dag_models_within_five_percent_of_the_lower_bound);
    tcase_add_test(tc, pinned_buffers_are_never_shared);
    tcase_add_test(tc, plans_are_deterministic);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    for (int i = 0; i < 3; i++) {
        if (gr_net_builtin(model_names[i], &models[i]) != GR_OK ||
            gr_net_synthesize_weights(models[i], 1) != GR_OK) {
            fprintf(stderr, "cannot load %s: %s\n", model_names[i], gr_last_error());
            return 1;
        }
    }
    if (gr_test_route_reorg_net(&route_reorg) != GR_OK) {
        fprintf(stderr, "cannot load the route/reorg net: %s\n", gr_last_error());
        return 1;
    }
    SRunner *sr = srunner_create(arena_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (int i = 0; i < 3; i++)
        gr_net_free(models[i]);
    gr_net_free(route_reorg);
    return failed == 0 ? 0 : 1;
}
