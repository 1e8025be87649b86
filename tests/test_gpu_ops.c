/* The table-driven GPU op test: every op the cfg parser takes, in every precision, on odd map
 * sizes and at batch 1 and > 1, through the whole engine against the CPU (ggml's test-backend-ops
 * idea, on graphrun's engines). One row of the table
 * (gr_test_op_cases, tests/support/ops_table.c) is one small synthetic network (a cfg
 * snippet after a generated [net], or a cfg file), its input size and batch, the precisions it
 * runs in, the activations it runs with, and the engine options it forces. Each (row, activation,
 * precision) is one run:
 *   1. the network (synthetic weights, seed 7: never all zero) is built as a GPU engine and as a
 *      CPU engine of the same precision (int8: one calibration on the CPU, shared through a
 *      calibration cache, so both engines have the same scales);
 *   2. both run the same batch (data/shapes-val/000.png, 001.png, ... letterboxed: real images,
 *      non-zero, different per batch index) and every output is compared, after checking that
 *      the shapes agree, output 0 has the row's shape, and the CPU's output is not constant;
 *   3. node by node: the GPU engine's own plan runs on the planner's CPU emulation
 *      (gr_plan_execute) and on the GPU one node at a time (gr_engine_debug_trace); each
 *      launching node's output is compared (not for the dataflow executor's rows, whose kernel
 *      runs no node by itself).
 * Every node and output is printed with its error; a failure names the run (row, activation,
 * precision, batch), the node or output, the first differing element (n, c, y, x) and both values.
 *
 * Tolerances (NRMSE = sqrt(mean(d^2)) / (max - min of the CPU's values)), and why:
 *   - int8, every node up to the first "inexact" one, and the outputs of a network without any:
 *     bit-identical. The integer sums are exact on both sides and the epilogue, requantization,
 *     pools, copies, shortcut and products are the same float expressions (planner/plan.h,
 *     "Epilogue math": the spec the kernels implement bit for bit; ops/activation.h's
 *     gr_act_epilogue, no fma contraction: GR_FMUL). Inexact nodes: an activation with a libm
 *     call (logistic, mish, swish, elu, selu, gelu, tanh, loggy: CUDA's expf / logf / tanhf / powf
 *     are within 2 ulp of glibc's) and the f32 ops whose sums run in another order or call expf
 *     ([connected] on cuBLAS, [softmax]);
 *   - int8 after a libm activation (and no inexact f32 op): int8 tensors at most one
 *     quantization step apart at the first such node, two after it (a tipped input tips the next
 *     node's outputs at most once more), on at most 1% of the values; other tensors NRMSE <= 1e-2;
 *   - int8 after [connected] / [softmax], and outputs of such networks: NRMSE <= 1e-2
 *     (test_gpu_engine's int8 limit against the emulation; test_gpu_mixed's output rule);
 *   - fp16: NRMSE <= 1e-2 (test_gpu_mixed's fp16 rule: half rounding of inputs, weights and
 *     outputs; f32 accumulation in another order flips last bits that later layers carry on);
 *   - fp32: NRMSE <= 1e-5 and max |d| <= 1e-4 x range (3xTF32 / SGEMM / direct kernels sum in
 *     other orders than the CPU; the float leaky / logistic of the GPU against the reference's
 *     double ones differ by an ulp; test_gpu_engine's fp32 bound).
 *
 * Tactics: CTest runs the GPU suites with GR_DISABLE_TACTIC_SEARCH=1 (the automatic tactics);
 * rows force the fp32 algorithms (f32_algo), eager launches (use_cuda_graph = 0) and the dataflow
 * executor where the per-family tests did. Which tactic a card prefers is never asserted
 * (test_gpu_tactic tests the search; test_gpu_conv / conv_fused / gemm_f32 / misc test each kernel,
 * tile shape and split-K on its own, with guard bytes).
 *
 * The table is tests/support/ops_table.c (tests/test_ops_table.c checks every row on the CPU in
 * every build). Adding a case (a new conv shape, a new op): one row there; a new op gets its rows
 * in the marked place at its end. GR_TEST_OPS_FILTER=<text> runs only the rows whose name
 * contains <text>. Exits 77 (skipped) with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h> /* built with CUDA only (CMakeLists.txt: gr_drop_cuda_sources) */

#include "graphrun/runtime.h"
#include "planner/plan.h"
#include "runtime/gpu/debug.h"
#include "tests/support/gpu_test.h"
#include "tests/support/gpu_trace.h"
#include "tests/support/ops_table.h"

/* ---- runs -------------------------------------------------------------------------------- */

#define MAX_RUNS 1024
static gr_test_op_run runs[MAX_RUNS];
static int n_runs;

/* ---- the network and its input ------------------------------------------------------------ */

/* This process's cfg and calibration cache files. */
static char cfg_path[64], calib_path[64];

static void name_temp_files(void)
{
    snprintf(cfg_path, sizeof cfg_path, "/tmp/gr_test_gpu_ops_%d.cfg", (int)getpid());
    snprintf(calib_path, sizeof calib_path, "/tmp/gr_test_gpu_ops_%d.calib", (int)getpid());
}

static gr_engine *build(const gr_model *m, const gr_test_op_case *c, gr_device dev,
                        gr_precision prec, const char *what)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = prec;
    eo.batch = c->batch;
    eo.calib_images = gr_test_op_calib;
    eo.calib_device = GR_DEVICE_CPU;
    eo.calib_cache = calib_path; /* the GPU engine writes it, the CPU engine reads its ranges */
    eo.f32_algo = F32_ALGO(c->opts);
    eo.use_cuda_graph = !(c->opts & EAGER);
    eo.executor = c->opts & DATAFLOW ? GR_EXECUTOR_DATAFLOW : GR_EXECUTOR_GRAPH;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s: %s build: %s", what,
                  dev == GR_DEVICE_GPU ? "GPU" : "CPU", gr_last_error());
    return e;
}

/* ---- comparison --------------------------------------------------------------------------- */

typedef enum rule { RULE_EXACT, RULE_STEPS, RULE_NRMSE_1E2, RULE_FP32 } rule;

static const char *rule_name(rule r)
{
    switch (r) {
    case RULE_EXACT: return "bit-identical";
    case RULE_STEPS: return "int8 steps";
    case RULE_NRMSE_1E2: return "NRMSE <= 1e-2";
    default: return "NRMSE <= 1e-5, max |d| <= 1e-4 x range";
    }
}

/* Empty when d passes rule r (steps: the int8 steps allowed, scale the tensor's step), else why
 * not, into buf. */
static const char *judge(char *buf, size_t len, rule r, const gr_test_diff *d, size_t count,
                         int steps, double scale)
{
    buf[0] = '\0';
    if (d->nonfinite_mismatch)
        snprintf(buf, len, "a value is finite on one side only");
    else if (r == RULE_EXACT && d->differing)
        snprintf(buf, len, "%zu of %zu values differ (bit-identical expected)", d->differing,
                 count);
    else if (r == RULE_STEPS && d->max_abs > (steps + 1e-4) * scale)
        snprintf(buf, len, "max |d| %g > %d step(s) of %g", d->max_abs, steps, scale);
    else if (r == RULE_STEPS && (double)d->differing > 0.01 * (double)count)
        snprintf(buf, len, "%zu of %zu values differ (> 1%%)", d->differing, count);
    else if (r == RULE_NRMSE_1E2 && !(d->nrmse <= 1e-2))
        snprintf(buf, len, "NRMSE %g > 1e-2", d->nrmse);
    else if (r == RULE_FP32 && !(d->nrmse <= 1e-5 && d->max_abs <= 1e-4 * d->range))
        snprintf(buf, len, "NRMSE %g (limit 1e-5), max |d| %g (limit %g)", d->nrmse, d->max_abs,
                 1e-4 * d->range);
    return buf;
}

static int uses_libm(gr_activation a)
{
    switch (a) {
    case GR_ACT_LOGISTIC:
    case GR_ACT_MISH:
    case GR_ACT_SWISH:
    case GR_ACT_ELU:
    case GR_ACT_SELU:
    case GR_ACT_GELU:
    case GR_ACT_TANH:
    case GR_ACT_LOGGY: return 1;
    default: return 0;
    }
}

/* A node whose activation calls libm (the kinds that have one). */
static int libm_node(const gr_plan_node *nd)
{
    switch (nd->kind) {
    case GR_OP_CONV:
    case GR_OP_CONNECTED:
    case GR_OP_SHORTCUT:
    case GR_OP_SAM:
    case GR_OP_SCALE_CHANNELS: return uses_libm(nd->p.activation);
    default: return 0;
    }
}

/* An f32 op that sums in another order than the CPU (cuBLAS, attention's block sums) or calls
 * expf. */
static int inexact_f32_node(const gr_plan_node *nd)
{
    return nd->kind == GR_OP_CONNECTED || nd->kind == GR_OP_SOFTMAX ||
           nd->kind == GR_OP_ATTENTION;
}

/* The plan's launching nodes: any libm or inexact f32 node at all (the outputs' int8 rule). */
static int plan_inexact(const gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++)
        if (libm_node(&plan->nodes[i]) || inexact_f32_node(&plan->nodes[i]))
            return 1;
    return 0;
}

/* ---- node by node ------------------------------------------------------------------------- */

typedef struct trace {
    gr_precision prec;
    const char *what;
    int libm_before, inexact_before; /* seen in the nodes compared so far */
    int checked;
    char failure[640];               /* the first failing node */
} trace;

static void check_node(const gr_plan *plan, int node, const float *values, const float *want,
                       size_t n, void *user)
{
    trace *t = user;
    const gr_plan_node *nd = &plan->nodes[node];
    const gr_plan_tensor *pt = &plan->tensors[nd->output];
    const int libm = libm_node(nd), inexact = inexact_f32_node(nd);
    rule r = RULE_NRMSE_1E2;
    int steps = 0;
    if (t->prec == GR_PREC_FP32)
        r = RULE_FP32;
    else if (t->prec == GR_PREC_INT8) {
        if (!libm && !inexact && !t->libm_before && !t->inexact_before)
            r = RULE_EXACT;
        else if (!inexact && !t->inexact_before && pt->dtype == GR_DTYPE_I8) {
            r = RULE_STEPS;
            steps = t->libm_before ? 2 : 1;
        }
    }
    char why[160] = "no CPU value", at[200] = "";
    gr_test_diff d = {0, 0, 0.0, 0.0, 0.0, 0};
    if (want) {
        d = gr_test_compare(values, want, n);
        if (d.differing)
            gr_test_where(at, sizeof at, d.first, pt->c, pt->h, pt->w, values, want);
        judge(why, sizeof why, r, &d, n, steps, (double)pt->scale);
    }
    printf("  %s node %d %s layer %d (%s, %s): NRMSE %.3g, max |d| %.3g, %zu of %zu differ %s%s\n",
           t->what, node, gr_plan_kind_name(nd->kind), nd->layer, gr_dtype_name(pt->dtype),
           rule_name(r), d.nrmse, d.max_abs, d.differing, n, at, why[0] ? " FAILS" : "");
    if (why[0] && !t->failure[0])
        snprintf(t->failure, sizeof t->failure, "%s: node %d %s (layer %d, %s): %s; first %s",
                 t->what, node, gr_plan_kind_name(nd->kind), nd->layer, rule_name(r), why, at);
    t->libm_before += libm;
    t->inexact_before += inexact;
    t->checked++;
}

/* ---- the test ----------------------------------------------------------------------------- */

/* _i: index into runs */
START_TEST(op_matches_cpu)
{
    const gr_test_op_run *run = &runs[_i];
    const gr_test_op_case *c = &gr_test_op_cases[run->row];
    const char *act = run->act >= 0 ? gr_activation_name((gr_activation)run->act) : NULL;
    char what[160];
    snprintf(what, sizeof what, "[%s%s%s] %s batch %d %dx%d", c->name, act ? " " : "",
             act ? act : "", gr_precision_name(run->prec), c->batch, c->w, c->h);
    unlink(calib_path); /* a new network: a new calibration */
    gr_model *m = gr_test_op_model(c, act, cfg_path);
    uint8_t *u8 = gr_test_op_images(c);
    gr_engine *gpu = build(m, c, GR_DEVICE_GPU, run->prec, what);
    gr_engine *cpu = build(m, c, GR_DEVICE_CPU, run->prec, what);
    const char *notice = gr_engine_notice(gpu);
    printf("%s: notice: %s\n", what, notice && notice[0] ? notice : "(none)");
    if (c->opts & DATAFLOW) /* the row tests that executor, not the fallback */
        ck_assert_msg(notice && strstr(notice, "executor: dataflow"), "%s: notice: %s", what,
                      notice ? notice : "(none)");

    /* Whole engines: every output. */
    ck_assert_msg(gr_engine_run_u8(gpu, u8) == GR_OK, "%s: GPU run: %s", what, gr_last_error());
    ck_assert_msg(gr_engine_run_u8(cpu, u8) == GR_OK, "%s: CPU run: %s", what, gr_last_error());
    int n_out = gr_engine_output_count(gpu);
    ck_assert_msg(n_out >= 1 && n_out == gr_engine_output_count(cpu), "%s: %d GPU, %d CPU outputs",
                  what, n_out, gr_engine_output_count(cpu));
    const gr_plan *plan = gr_engine_debug_plan(gpu);
    ck_assert_msg(plan, "%s: no plan", what);
    rule r = run->prec == GR_PREC_FP32 ? RULE_FP32
             : run->prec == GR_PREC_INT8 && !plan_inexact(plan) ? RULE_EXACT
                                                               : RULE_NRMSE_1E2;
    for (int k = 0; k < n_out; k++) {
        gr_tensor_desc dg, dc;
        ck_assert(gr_engine_output_desc(gpu, k, &dg) == GR_OK);
        ck_assert(gr_engine_output_desc(cpu, k, &dc) == GR_OK);
        ck_assert_msg(dg.n == dc.n && dg.c == dc.c && dg.h == dc.h && dg.w == dc.w,
                      "%s: output %d: GPU %dx%dx%dx%d, CPU %dx%dx%dx%d", what, k, dg.n, dg.c, dg.h,
                      dg.w, dc.n, dc.c, dc.h, dc.w);
        ck_assert_msg(dg.n == c->batch, "%s: output %d holds %d images", what, k, dg.n);
        if (k == 0)
            ck_assert_msg(dg.c == c->out_c && dg.h == c->out_h && dg.w == c->out_w,
                          "%s: output 0 is %dx%dx%d, the table says %dx%dx%d", what, dg.c, dg.h,
                          dg.w, c->out_c, c->out_h, c->out_w);
        const float *gy = NULL, *cy = NULL;
        ck_assert(gr_engine_output(gpu, k, &gy) == GR_OK);
        ck_assert(gr_engine_output(cpu, k, &cy) == GR_OK);
        size_t n = (size_t)dg.n * dg.c * dg.h * dg.w;
        gr_test_diff d = gr_test_compare(gy, cy, n);
        char why[160], at[200] = "";
        if (d.differing)
            gr_test_where(at, sizeof at, d.first, dg.c, dg.h, dg.w, gy, cy);
        judge(why, sizeof why, r, &d, n, 0, 0.0);
        printf("%s: output %d against the CPU engine (%s): NRMSE %.3g, max |d| %.3g of range "
               "%.3g, %zu of %zu differ %s\n",
               what, k, rule_name(r), d.nrmse, d.max_abs, d.range, d.differing, n, at);
        ck_assert_msg(d.range > 0.0, "%s: output %d is constant on the CPU (%g): nothing to "
                      "compare", what, k, (double)cy[0]);
        ck_assert_msg(why[0] == '\0', "%s: output %d (%s): %s; first %s", what, k, rule_name(r),
                      why, at);
    }

    /* Node by node (the dataflow executor's kernel runs no node by itself). */
    if (!(c->opts & DATAFLOW)) {
        trace t = {run->prec, what, 0, 0, 0, ""};
        ck_assert_msg(gr_test_trace_nodes(gpu, u8, check_node, &t) == GR_OK, "%s: trace: %s",
                      what, gr_last_error());
        ck_assert_msg(t.checked > 0, "%s: no node was compared", what);
        ck_assert_msg(t.failure[0] == '\0', "%s", t.failure);
    }

    free(u8);
    gr_engine_destroy(cpu);
    gr_engine_destroy(gpu);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("test_gpu_ops"))
        return 77;
    name_temp_files();
    const char *filter = getenv("GR_TEST_OPS_FILTER");
    n_runs = gr_test_op_runs(filter && filter[0] ? filter : NULL, runs, MAX_RUNS);
    if (n_runs < 0) {
        printf("test_gpu_ops: more than %d runs: raise MAX_RUNS\n", MAX_RUNS);
        return 1;
    }
    printf("test_gpu_ops: %d runs of %d rows%s%s\n", n_runs, gr_test_op_n_cases,
           filter ? ", filter " : "", filter ? filter : "");
    if (n_runs == 0) {
        printf("test_gpu_ops: no row matches GR_TEST_OPS_FILTER=%s\n", filter ? filter : "");
        return 1;
    }
    int failed = gr_test_run_loop("gpu_ops", op_matches_cpu, 0, n_runs, 600);
    unlink(cfg_path);
    unlink(calib_path);
    return failed ? 1 : 0;
}
