/* The table of the GPU op test (tests/support/ops_table.c, run on the GPU by tests/test_gpu_ops.c)
 * checked on the CPU engine alone, in every build, so that a row's mistakes show here before a
 * GPU runs it: every row has a unique name and options that apply to its precisions; a row that
 * tests activations puts each into its cfg; and every run (row, activation, precision) builds on
 * the CPU engine at the row's batch, runs the row's images, and gives output 0 the shape the
 * row states, finite and not constant (a network that computes nothing cannot pass the GPU
 * comparison either). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tests/support/gpu_test.h"
#include "tests/support/ops_table.h"

#define MAX_RUNS 1024
static gr_test_op_run runs[MAX_RUNS];
static char cfg_path[64];

START_TEST(rows_are_consistent)
{
    for (int r = 0; r < gr_test_op_n_cases; r++) {
        const gr_test_op_case *c = &gr_test_op_cases[r];
        for (int k = 0; k < r; k++)
            ck_assert_msg(strcmp(c->name, gr_test_op_cases[k].name) != 0,
                          "rows %d and %d are both named \"%s\"", k, r, c->name);
        ck_assert_msg((c->layers != NULL) != (c->cfg_file != NULL),
                      "%s: give layers or a cfg file, not both", c->name);
        ck_assert_msg(c->precs && !(c->precs & ~(unsigned)PALL), "%s: precisions %#x", c->name,
                      c->precs);
        ck_assert_msg(c->batch >= 1 && c->w >= 1 && c->h >= 1, "%s: batch %d, %dx%d", c->name,
                      c->batch, c->w, c->h);
        ck_assert_msg(!(c->opts & DATAFLOW) || !(c->precs & P32),
                      "%s: the dataflow executor runs fp16 / int8 only", c->name);
        ck_assert_msg(!F32_ALGO(c->opts) || c->precs == P32,
                      "%s: a forced fp32 algorithm in a row that runs other precisions",
                      c->name);
        char *a = gr_test_op_cfg(c, c->acts ? "leaky" : NULL);
        char *b = gr_test_op_cfg(c, c->acts ? "relu6" : NULL);
        if (c->acts)
            ck_assert_msg(strcmp(a, b) != 0, "%s: its activations do not reach its cfg",
                          c->name);
        ck_assert_msg(!strstr(a, "$ACT"), "%s: \"$ACT\" in a row without activations", c->name);
        free(a);
        free(b);
    }
}
END_TEST

/* _i: a run */
START_TEST(run_builds_on_the_cpu_with_the_stated_shape)
{
    const gr_test_op_run *run = &runs[_i];
    const gr_test_op_case *c = &gr_test_op_cases[run->row];
    const char *act = run->act >= 0 ? gr_activation_name((gr_activation)run->act) : NULL;
    gr_model *m = gr_test_op_model(c, act, cfg_path);
    uint8_t *u8 = gr_test_op_images(c);
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = run->prec;
    eo.batch = c->batch;
    eo.calib_images = gr_test_op_calib;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "[%s %s] %s: %s", c->name,
                  act ? act : "", gr_precision_name(run->prec), gr_last_error());
    ck_assert_msg(gr_engine_run_u8(e, u8) == GR_OK, "%s: %s", c->name, gr_last_error());
    ck_assert_int_ge(gr_engine_output_count(e), 1);
    gr_tensor_desc d;
    ck_assert(gr_engine_output_desc(e, 0, &d) == GR_OK);
    ck_assert_msg(d.n == c->batch && d.c == c->out_c && d.h == c->out_h && d.w == c->out_w,
                  "[%s %s] %s: output 0 is %dx%dx%dx%d, the row says %dx%dx%dx%d", c->name,
                  act ? act : "", gr_precision_name(run->prec), d.n, d.c, d.h, d.w, c->batch,
                  c->out_c, c->out_h, c->out_w);
    const float *y = NULL;
    ck_assert(gr_engine_output(e, 0, &y) == GR_OK);
    size_t n = (size_t)d.n * d.c * d.h * d.w;
    float lo = y[0], hi = y[0];
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(y[i]), "%s: output 0 value %zu is %g", c->name, i, (double)y[i]);
        lo = fminf(lo, y[i]);
        hi = fmaxf(hi, y[i]);
    }
    ck_assert_msg(hi > lo, "[%s %s] %s: output 0 is constant (%g)", c->name, act ? act : "",
                  gr_precision_name(run->prec), (double)lo);
    gr_engine_destroy(e);
    free(u8);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    snprintf(cfg_path, sizeof cfg_path, "/tmp/gr_test_ops_table_%d.cfg", (int)getpid());
    int n_runs = gr_test_op_runs(NULL, runs, MAX_RUNS);
    if (n_runs < 1) {
        printf("test_ops_table: %d runs (MAX_RUNS %d)\n", n_runs, MAX_RUNS);
        return 1;
    }
    Suite *s = suite_create("ops_table");
    TCase *tc = tcase_create("ops_table");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rows_are_consistent);
    tcase_add_loop_test(tc, run_builds_on_the_cpu_with_the_stated_shape, 0, n_runs);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    unlink(cfg_path);
    printf("test_ops_table: %d rows, %d runs\n", gr_test_op_n_cases, n_runs);
    return failed ? 1 : 0;
}
