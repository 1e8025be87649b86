/* The task graph (planner/tasks.h), checked without trusting its own bookkeeping:
 *   - each op's row dependence (gr_op_info.rows) against the op's CPU reference: perturb one input
 *     row, see which output rows change; every such input row must lie in what rows() returns;
 *   - the tasks of a node tile its output exactly once;
 *   - the static order is topological and the graph is deterministic;
 *   - dependencies are complete: the graph is executed on a shadow arena in many random orders
 *     that respect only the listed dependencies (each task reads its input rows and writes its
 *     output tile, element by element in the plan's layouts); every element a task reads must hold
 *     the tensor it expects, fully written. A missing RAW edge shows up as an unwritten or stale
 *     element, a missing WAR edge as an element overwritten by a later tenant. Over 120 random
 *     DAGs (route, shortcut, upsample, reorg, several heads, fused pools, mixed precisions,
 *     batch 1-2) and the built-in models; and dropping one edge is caught (the check can fail). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "planner/tasks.h"
#include "tests/support/plan_nets.h"

/* --- op row dependence against the reference --- */

static void fill(float *x, size_t n, uint64_t seed)
{
    gr_rng r;
    gr_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(gr_rng_u64(&r) % 2001) / 1000.0f - 1.0f;
}

/* For op p on inputs `in` (one image), every input row whose perturbation changes output row y
 * must be inside rows(y, y + 1) of that input. */
static void check_rows_sound(const gr_op_params *p, const gr_shape *in, int n_in)
{
    gr_shape out;
    ck_assert_int_eq(gr_op_infer(p, in, n_in, &out), GR_OK);
    const size_t n_out = gr_shape_elems(out);
    float *x[GR_MAX_INPUTS], *y0 = malloc(n_out * sizeof *y0), *y1 = malloc(n_out * sizeof *y1);
    gr_weights w = {0};
    float *wbuf = NULL, *bias = NULL;
    if (p->op == GR_OP_CONV) {
        w.n = p->filters;
        w.n_weights = (size_t)p->filters * (size_t)(in[0].c / p->groups) * p->size * p->size;
        wbuf = malloc(w.n_weights * sizeof *wbuf);
        bias = calloc((size_t)p->filters, sizeof *bias);
        fill(wbuf, w.n_weights, 7);
        w.weights = wbuf;
        w.biases = bias;
    }
    for (int k = 0; k < n_in; k++) {
        x[k] = malloc(gr_shape_elems(in[k]) * sizeof *x[k]);
        fill(x[k], gr_shape_elems(in[k]), 11 + (uint64_t)k);
    }
    gr_op_ref(p, &w, (const float *const *)x, in, n_in, y0, out, 1);
    for (int k = 0; k < n_in; k++)
        for (int row = 0; row < in[k].h; row++) {
            const size_t plane = (size_t)in[k].h * in[k].w;
            for (int c = 0; c < in[k].c; c++)
                for (int col = 0; col < in[k].w; col++)
                    x[k][c * plane + (size_t)row * in[k].w + col] += 0.5f;
            gr_op_ref(p, &w, (const float *const *)x, in, n_in, y1, out, 1);
            for (size_t i = 0; i < n_out; i++) {
                if (y0[i] == y1[i])
                    continue;
                const int yrow = (int)((i / (size_t)out.w) % (size_t)out.h);
                int lo, hi;
                gr_op_rows(p, in, n_in, out, k, yrow, yrow + 1, &lo, &hi);
                ck_assert_msg(row >= lo && row < hi,
                              "%s: output row %d changes with input %d row %d, rows() says "
                              "[%d, %d)", gr_op_get(p->op)->name, yrow, k, row, lo, hi);
            }
            for (int c = 0; c < in[k].c; c++)
                for (int col = 0; col < in[k].w; col++)
                    x[k][c * plane + (size_t)row * in[k].w + col] -= 0.5f;
        }
    for (int k = 0; k < n_in; k++)
        free(x[k]);
    free(y0);
    free(y1);
    free(wbuf);
    free(bias);
}

START_TEST(op_rows_cover_what_the_reference_reads)
{
    gr_op_params p;
    const gr_shape s9 = {4, 9, 7}, s8 = {4, 8, 8}, s4 = {3, 4, 4};
    static const int conv[][3] = {{3, 1, 1}, {3, 2, 1}, {1, 1, 0}, {5, 2, 2}, {3, 1, 0}, {2, 2, 0}};
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        gr_op_params_default(GR_OP_CONV, &p);
        p.filters = 5, p.size = conv[i][0], p.stride = conv[i][1], p.pad = conv[i][2];
        p.activation = GR_ACT_LINEAR;
        check_rows_sound(&p, &s9, 1);
    }
    /* AlexeyAB's dilation (padding (size-1)/2 scaled by it) and a vertical stride of its own. */
    gr_op_params_default(GR_OP_CONV, &p);
    p.filters = 3, p.size = 3, p.stride = 1, p.pad = 1, p.dilation = 2, p.activation = GR_ACT_LINEAR;
    check_rows_sound(&p, &s9, 1);
    p.dilation = 1, p.stride_y = 2;
    check_rows_sound(&p, &s9, 1);
    static const int pool[][3] = {{2, 2, 1}, {2, 1, 1}, {3, 2, 2}, {3, 1, 2}, {5, 1, 4}};
    for (size_t i = 0; i < sizeof pool / sizeof pool[0]; i++)
        for (int avg = 0; avg < 2; avg++) { /* [local_avgpool] reads maxpool's windows */
            gr_op_params_default(avg ? GR_OP_LOCAL_AVGPOOL : GR_OP_MAXPOOL, &p);
            p.size = pool[i][0], p.stride = pool[i][1], p.pad = pool[i][2];
            check_rows_sound(&p, &s9, 1);
        }
    gr_op_params_default(GR_OP_UPSAMPLE, &p);
    p.stride = 2;
    check_rows_sound(&p, &s4, 1);
    gr_op_params_default(GR_OP_REORG, &p);
    p.stride = 2;
    check_rows_sound(&p, &s8, 1);
    gr_op_params_default(GR_OP_ROUTE, &p);
    const gr_shape two[2] = {{2, 6, 5}, {3, 6, 5}};
    check_rows_sound(&p, two, 2);
    const gr_shape sc[][2] = {{{4, 8, 8}, {4, 8, 8}}, {{4, 8, 8}, {3, 4, 4}}, {{4, 4, 4}, {4, 8, 8}}};
    for (size_t i = 0; i < 3; i++) {
        gr_op_params_default(GR_OP_SHORTCUT, &p);
        p.activation = GR_ACT_LINEAR;
        check_rows_sound(&p, sc[i], 2);
    }
    gr_op_params_default(GR_OP_SAM, &p);
    check_rows_sound(&p, sc[0], 2);
    /* scale_channels: from, then one scale per channel (every output row reads the 1-row input)
     * or per position (row for row) */
    const gr_shape per_channel[2] = {{4, 8, 8}, {4, 1, 1}}, per_position[2] = {{4, 8, 8}, {1, 8, 8}};
    gr_op_params_default(GR_OP_SCALE_CHANNELS, &p);
    check_rows_sound(&p, per_channel, 2);
    p.scale_wh = 1;
    check_rows_sound(&p, per_position, 2);
}
END_TEST

/* --- graph structure --- */

static gr_plan *plan_of(const gr_net *net, const gr_plan_options *opt)
{
    gr_plan *plan = NULL;
    ck_assert_msg(gr_plan_build(net, opt, &plan) == GR_OK, "plan: %s", gr_last_error());
    return plan;
}

static void check_tiling(const gr_task_graph *g, const gr_plan *plan)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_task_node *tn = &g->nodes[i];
        if (!tn->count)
            continue;
        const gr_plan_tensor *x = &plan->tensors[plan->nodes[i].output];
        const size_t cells = (size_t)x->n * x->h * x->c;
        unsigned char *hit = calloc(cells, 1);
        for (int t = tn->first; t < tn->first + tn->count; t++) {
            const gr_task *k = &g->tasks[t];
            ck_assert_int_eq(k->node, i);
            for (int r = k->row0; r < k->row0 + k->rows; r++)
                for (int c = k->ch0; c < k->ch0 + k->chs; c++) {
                    size_t cell = ((size_t)k->image * x->h + r) * x->c + c;
                    ck_assert_msg(!hit[cell]++, "node %d: cell written twice", i);
                }
        }
        for (size_t c = 0; c < cells; c++)
            ck_assert_msg(hit[c] == 1, "node %d: cell %zu not covered", i, c);
        free(hit);
    }
}

static void check_order(const gr_task_graph *g)
{
    int *pos = malloc((size_t)g->n_tasks * sizeof *pos);
    for (int i = 0; i < g->n_tasks; i++)
        pos[g->order[i]] = i;
    for (int t = 0; t < g->n_tasks; t++)
        for (int d = 0; d < g->tasks[t].n_deps; d++)
            ck_assert_int_lt(pos[g->deps[g->tasks[t].dep_begin + d]], pos[t]);
    free(pos);
}

/* --- execution on a shadow arena --- */

typedef struct shadow {
    const gr_plan *plan;
    const gr_task_graph *g;
    int *tag;        /* per arena byte: the tensor last written there + 1, 0 = never */
    char task[128], why[128];
} shadow;

/* Call fn on every element byte offset of (image, rows, channels) of tensor t. */
static int for_each_elem(shadow *s, int t, int im, int r0, int r1, int c0, int c1,
                         int (*fn)(shadow *, size_t, int), int arg)
{
    const gr_plan_tensor *x = &s->plan->tensors[t];
    const size_t base = s->plan->buffers[x->buffer].offset, es = gr_dtype_size(x->dtype);
    for (int r = r0; r < r1; r++)
        for (int col = 0; col < x->w; col++)
            for (int c = c0; c < c1; c++) {
                size_t e = x->layout == GR_LAYOUT_NHWC
                               ? (((size_t)im * x->h + r) * x->w + col) * x->c_stride +
                                     x->c_offset + c
                               : (((size_t)im * x->c_stride + x->c_offset + c) * x->h + r) * x->w +
                                     col;
                for (size_t b = 0; b < es; b++)
                    if (!fn(s, base + e * es + b, arg))
                        return 0;
            }
    return 1;
}

static int write_byte(shadow *s, size_t at, int t)
{
    s->tag[at] = t + 1;
    return 1;
}

/* What a reader of t accepts at a byte: t's own value, a slice of t written by the slice's
 * producer, or - t being a view of another tensor (a concat in place) - that tensor's value. */
static int read_byte(shadow *s, size_t at, int t)
{
    const int got = s->tag[at] - 1;
    if (got == t || (got >= 0 && s->plan->tensors[got].view_of == t) ||
        (got >= 0 && s->plan->tensors[t].view_of == got))
        return 1;
    snprintf(s->why, sizeof s->why, "reads tensor %d at byte %zu, finds %s %d", t, at,
             got < 0 ? "nothing written" : "tensor", got);
    return 0;
}

static int run_task(shadow *s, int id)
{
    const gr_task *k = &s->g->tasks[id];
    const gr_plan_node *nd = &s->plan->nodes[k->node];
    for (int in = 0; in < nd->n_inputs; in++) {
        /* Every row and channel the task may read: its input rows per the graph's own rule is
         * what we test the edges of, so ask the op (tested above against the reference). */
        const int u = nd->inputs[in];
        const gr_plan_tensor *x = &s->plan->tensors[u];
        int lo = 0, hi = x->h;
        gr_task_graph_input_rows(s->plan, k->node, in, k->row0, k->row0 + k->rows, &lo, &hi);
        if (!for_each_elem(s, u, k->image, lo, hi, 0, x->c, read_byte, u)) {
            snprintf(s->task, sizeof s->task, "task %d (node %d %s, image %d, rows %d..%d)", id,
                     k->node, gr_plan_kind_name(nd->kind), k->image, k->row0,
                     k->row0 + k->rows);
            return 0;
        }
    }
    return for_each_elem(s, nd->output, k->image, k->row0, k->row0 + k->rows, k->ch0,
                         k->ch0 + k->chs, write_byte, nd->output);
}

/* Run every task once in an order that respects only the graph's edges: random among the ready
 * ones (mode 0) or always the latest-created ready one (mode 1: runs consumers as early as the
 * edges allow), but the producer of edge skip_edge (dropped, when >= 0) only when nothing else is
 * ready. Returns 1 when every read found what it expected; s->why says what did not. */
static int execute(shadow *s, uint64_t seed, int mode, int skip_edge)
{
    const int defer = skip_edge >= 0 ? s->g->deps[skip_edge] : -1;
    const gr_task_graph *g = s->g;
    const gr_plan *plan = s->plan;
    memset(s->tag, 0, plan->arena_bytes * sizeof *s->tag);
    for (int t = 0; t < plan->n_tensors; t++) /* the network input is there before any task */
        if (plan->tensors[t].producer >= 0 &&
            plan->nodes[plan->tensors[t].producer].kind == GR_NODE_INPUT)
            for (int im = 0; im < plan->tensors[t].n; im++)
                for_each_elem(s, t, im, 0, plan->tensors[t].h, 0, plan->tensors[t].c, write_byte,
                              t);
    int *waiting = calloc((size_t)g->n_tasks, sizeof *waiting), *ready = malloc(
        (size_t)g->n_tasks * sizeof *ready), n_ready = 0, ok = 1;
    int **users = calloc((size_t)g->n_tasks, sizeof *users), *n_users = calloc((size_t)g->n_tasks,
                                                                              sizeof *n_users);
    for (int t = 0; t < g->n_tasks; t++)
        for (int d = 0; d < g->tasks[t].n_deps; d++) {
            const int e = g->tasks[t].dep_begin + d, p = g->deps[e];
            if (e == skip_edge)
                continue;
            waiting[t]++;
            users[p] = realloc(users[p], (size_t)(n_users[p] + 1) * sizeof **users);
            users[p][n_users[p]++] = t;
        }
    for (int t = 0; t < g->n_tasks; t++)
        if (!waiting[t])
            ready[n_ready++] = t;
    gr_rng r;
    gr_rng_seed(&r, seed);
    for (int done = 0; ok && done < g->n_tasks; done++) {
        ck_assert_int_gt(n_ready, 0);
        int pick = mode ? n_ready - 1 : (int)(gr_rng_u64(&r) % (uint64_t)n_ready);
        if (mode)
            for (int i = 0; i < n_ready; i++)
                pick = ready[i] > ready[pick] ? i : pick;
        if (ready[pick] == defer && n_ready > 1)
            pick = pick ? pick - 1 : 1;
        const int t = ready[pick];
        ready[pick] = ready[--n_ready];
        ok = run_task(s, t);
        for (int u = 0; u < n_users[t]; u++)
            if (--waiting[users[t][u]] == 0)
                ready[n_ready++] = users[t][u];
    }
    for (int t = 0; t < g->n_tasks; t++)
        free(users[t]);
    free(users);
    free(n_users);
    free(waiting);
    free(ready);
    return ok;
}

static void check_graph(const gr_plan *plan, int target, uint64_t seed, int orders)
{
    gr_task_options o;
    gr_task_options_default(&o);
    o.target_tasks = target;
    gr_task_graph *g = NULL;
    ck_assert_msg(gr_task_graph_build(plan, &o, &g) == GR_OK, "%s", gr_last_error());
    check_tiling(g, plan);
    check_order(g);
    shadow s = {.plan = plan, .g = g, .tag = malloc(plan->arena_bytes * sizeof(int))};
    for (int i = 0; i < orders; i++)
        ck_assert_msg(execute(&s, seed * 131 + (uint64_t)i, i == 0, -1), "seed %llu: %s %s",
                      (unsigned long long)seed, s.task, s.why);
    free(s.tag);
    gr_task_graph_free(g);
}

START_TEST(random_dags_run_in_any_order_the_edges_allow)
{
    for (uint64_t seed = 1; seed <= 120; seed++) {
        gr_net *net = NULL;
        ck_assert_int_eq(gr_test_random_net(seed, &net), GR_OK);
        gr_plan_options opt;
        gr_plan_options_default(&opt);
        gr_rng r;
        gr_rng_seed(&r, seed);
        opt.precision = (gr_precision)(gr_rng_u64(&r) % 3);
        opt.batch = 1 + (int)(gr_rng_u64(&r) % 2);
        opt.fuse_maxpool = (int)(gr_rng_u64(&r) % 2);
        opt.in_place = (int)(gr_rng_u64(&r) % 2);
        opt.decode_heads = (int)(gr_rng_u64(&r) % 4 == 0);
        gr_plan *plan = plan_of(net, &opt);
        check_graph(plan, 1 + (int)(gr_rng_u64(&r) % 40), seed, 3);
        gr_plan_free(plan);
        gr_net_free(net);
    }
}
END_TEST

START_TEST(builtin_models_run_in_any_order_the_edges_allow)
{
    static const char *const cfgs[] = {"yolov2-tiny-voc.cfg", "yolov3-tiny.cfg"};
    for (int i = 0; i < 2; i++)
        for (int prec = 0; prec < 3; prec++) {
            gr_net *net = NULL;
            ck_assert_int_eq(gr_test_builtin_at(cfgs[i], 96, &net), GR_OK);
            gr_plan_options opt;
            gr_plan_options_default(&opt);
            opt.precision = (gr_precision)prec;
            opt.fuse_maxpool = 1;
            gr_plan *plan = plan_of(net, &opt);
            check_graph(plan, 132, (uint64_t)(i * 3 + prec), 3);
            gr_plan_free(plan);
            gr_net_free(net);
        }
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_route_reorg_net(&net), GR_OK);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    gr_plan *plan = plan_of(net, &opt);
    check_graph(plan, 16, 99, 8);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

/* Whether task `to` is reachable backwards from task `from` through dependencies other than
 * edge `skip` (then dropping `skip` changes nothing). */
static int reaches(const gr_task_graph *g, int from, int to, int skip, unsigned char *seen)
{
    if (from == to)
        return 1;
    if (seen[from]++)
        return 0;
    const gr_task *t = &g->tasks[from];
    for (int d = 0; d < t->n_deps; d++)
        if (t->dep_begin + d != skip && reaches(g, g->deps[t->dep_begin + d], to, skip, seen))
            return 1;
    return 0;
}

/* The shadow execution can fail: with any one RAW edge of a conv dropped (one that no other path
 * implies), running consumers as early as possible reads an unwritten element. */
START_TEST(dropping_an_edge_is_caught)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at("yolov2-tiny-voc.cfg", 96, &net), GR_OK);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_INT8;
    gr_plan *plan = plan_of(net, &opt);
    gr_task_graph *g = NULL;
    ck_assert_int_eq(gr_task_graph_build(plan, NULL, &g), GR_OK);
    shadow s = {.plan = plan, .g = g, .tag = malloc(plan->arena_bytes * sizeof(int))};
    ck_assert_msg(execute(&s, 1, 1, -1), "%s %s", s.task, s.why);
    int tried = 0, caught = 0;
    for (int t = 0; t < g->n_tasks && tried < 40; t += 17) {
        if (plan->nodes[g->tasks[t].node].kind != GR_OP_CONV || !g->tasks[t].n_deps)
            continue;
        /* Its first edge to the producer of its input: with the latest-created ready task
         * always run first, the conv runs before that producer task once the edge is gone. */
        const int producer = plan->tensors[plan->nodes[g->tasks[t].node].inputs[0]].producer;
        int edge = -1;
        for (int d = 0; d < g->tasks[t].n_deps && edge < 0; d++)
            if (g->tasks[g->deps[g->tasks[t].dep_begin + d]].node == producer)
                edge = g->tasks[t].dep_begin + d;
        unsigned char *seen = calloc((size_t)g->n_tasks, 1);
        const int implied = edge >= 0 && reaches(g, t, g->deps[edge], edge, seen);
        free(seen);
        if (edge < 0 || implied)
            continue;
        tried++;
        caught += !execute(&s, 1, 1, edge);
    }
    ck_assert_int_gt(tried, 10);
    ck_assert_int_eq(caught, tried);
    free(s.tag);
    gr_task_graph_free(g);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

START_TEST(graphs_are_deterministic_and_options_checked)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at("yolov3-tiny.cfg", 96, &net), GR_OK);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_FP16;
    gr_plan *plan = plan_of(net, &opt);
    gr_task_graph *a = NULL, *b = NULL;
    ck_assert_int_eq(gr_task_graph_build(plan, NULL, &a), GR_OK);
    ck_assert_int_eq(gr_task_graph_build(plan, NULL, &b), GR_OK);
    ck_assert_int_eq(a->n_tasks, b->n_tasks);
    ck_assert_int_eq(a->n_deps, b->n_deps);
    ck_assert(!memcmp(a->tasks, b->tasks, (size_t)a->n_tasks * sizeof *a->tasks));
    ck_assert(!memcmp(a->deps, b->deps, (size_t)a->n_deps * sizeof *a->deps));
    ck_assert(!memcmp(a->order, b->order, (size_t)a->n_tasks * sizeof *a->order));
    gr_task_options o;
    gr_task_options_default(&o);
    o.target_tasks = 0;
    gr_task_graph *c = NULL;
    ck_assert_int_eq(gr_task_graph_build(plan, &o, &c), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "target_tasks"));
    gr_task_graph_free(a);
    gr_task_graph_free(b);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

static Suite *tasks_suite(void)
{
    Suite *s = suite_create("planner_tasks");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, op_rows_cover_what_the_reference_reads);
    tcase_add_test(tc, random_dags_run_in_any_order_the_edges_allow);
    tcase_add_test(tc, builtin_models_run_in_any_order_the_edges_allow);
    tcase_add_test(tc, dropping_an_edge_is_caught);
    tcase_add_test(tc, graphs_are_deterministic_and_options_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tasks_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
