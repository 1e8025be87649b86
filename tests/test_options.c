/* Check suite for the engine options that make kernel choices (runtime.h: f32_algo, f32_split_k,
 * pdl, gemm_tactic; docs/tactics.md, "How each choice is made"): gr_engine_options_default sets
 * each to AUTO, the enum names round-trip through their parse functions and unknown names are
 * refused, a value outside its enum fails the build with GR_ERR_INVALID_ARGUMENT and a one-line
 * message naming the option, and every valid value builds (the CPU engine has no such choices and
 * ignores them). No GPU needed: the front checks options before any backend runs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    mo.weights_path = NULL;
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

static void cpu_options(gr_engine_options *opt)
{
    gr_engine_options_default(opt);
    opt->device = GR_DEVICE_CPU;
}

/* The build is refused with a one-line message holding `what`. */
static void expect_refused(const gr_model *model, const gr_engine_options *opt, const char *what)
{
    gr_engine *engine = NULL;
    ck_assert_int_eq(gr_engine_build(model, opt, &engine), GR_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(engine);
    ck_assert_msg(strstr(gr_last_error(), what) != NULL, "'%s' not in: %s", what, gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
}

START_TEST(defaults_are_auto)
{
    gr_engine_options opt;
    memset(&opt, 0x5a, sizeof opt);
    gr_engine_options_default(&opt);
    ck_assert_int_eq(opt.f32_algo, GR_F32_ALGO_AUTO);
    ck_assert_int_eq(opt.f32_split_k, GR_TOGGLE_AUTO);
    ck_assert_int_eq(opt.pdl, GR_TOGGLE_AUTO);
    ck_assert_int_eq(opt.gemm_tactic, GR_TOGGLE_AUTO);
    ck_assert_int_eq(opt.tactic_search, 1);
    ck_assert_int_eq(opt.executor, GR_EXECUTOR_GRAPH); /* the dataflow executor is opt-in */
}
END_TEST

START_TEST(names_round_trip)
{
    static const char *const algos[] = {"auto", "sgemm", "tf32x3", "implicit", "direct3x3"};
    for (int a = GR_F32_ALGO_AUTO; a <= GR_F32_ALGO_DIRECT3X3; a++) {
        ck_assert_str_eq(gr_f32_algo_name((gr_f32_algo)a), algos[a]);
        gr_f32_algo back = GR_F32_ALGO_AUTO;
        ck_assert_int_eq(gr_f32_algo_parse(algos[a], &back), GR_OK);
        ck_assert_int_eq(back, a);
    }
    static const char *const toggles[] = {"auto", "on", "off"};
    for (int t = GR_TOGGLE_AUTO; t <= GR_TOGGLE_OFF; t++) {
        ck_assert_str_eq(gr_toggle_name((gr_toggle)t), toggles[t]);
        gr_toggle back = GR_TOGGLE_AUTO;
        ck_assert_int_eq(gr_toggle_parse(toggles[t], &back), GR_OK);
        ck_assert_int_eq(back, t);
    }
    static const char *const executors[] = {"graph", "dataflow", "auto"};
    for (int x = GR_EXECUTOR_GRAPH; x <= GR_EXECUTOR_AUTO; x++) {
        ck_assert_str_eq(gr_executor_name((gr_executor)x), executors[x]);
        gr_executor back = GR_EXECUTOR_GRAPH;
        ck_assert_int_eq(gr_executor_parse(executors[x], &back), GR_OK);
        ck_assert_int_eq(back, x);
    }
    ck_assert_str_eq(gr_executor_name((gr_executor)3), "?");
    ck_assert_str_eq(gr_f32_algo_name((gr_f32_algo)99), "?");
    ck_assert_str_eq(gr_toggle_name((gr_toggle)-1), "?");
}
END_TEST

START_TEST(unknown_names_are_refused)
{
    gr_f32_algo algo = GR_F32_ALGO_SGEMM;
    ck_assert_int_eq(gr_f32_algo_parse("banana", &algo), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(algo, GR_F32_ALGO_SGEMM); /* untouched */
    ck_assert_msg(strstr(gr_last_error(), "banana") != NULL, "%s", gr_last_error());
    ck_assert_int_eq(gr_f32_algo_parse("SGEMM", &algo), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gr_f32_algo_parse(NULL, &algo), GR_ERR_INVALID_ARGUMENT);
    gr_toggle toggle = GR_TOGGLE_ON;
    ck_assert_int_eq(gr_toggle_parse("1", &toggle), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(toggle, GR_TOGGLE_ON);
    ck_assert_int_eq(gr_toggle_parse("on", NULL), GR_ERR_INVALID_ARGUMENT);
    gr_executor executor = GR_EXECUTOR_AUTO;
    ck_assert_int_eq(gr_executor_parse("persistent", &executor), GR_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(executor, GR_EXECUTOR_AUTO);
    ck_assert_msg(strstr(gr_last_error(), "graph, dataflow or auto") != NULL, "%s", gr_last_error());
}
END_TEST

START_TEST(values_outside_the_enums_are_refused)
{
    gr_model *model = load_shapes();
    gr_engine_options opt;
    cpu_options(&opt);
    opt.f32_algo = (gr_f32_algo)(GR_F32_ALGO_DIRECT3X3 + 1);
    expect_refused(model, &opt, "f32_algo=5");
    cpu_options(&opt);
    opt.f32_algo = (gr_f32_algo)-1;
    expect_refused(model, &opt, "f32_algo=-1");
    cpu_options(&opt);
    opt.f32_split_k = (gr_toggle)3;
    expect_refused(model, &opt, "f32_split_k=3");
    cpu_options(&opt);
    opt.pdl = (gr_toggle)-2;
    expect_refused(model, &opt, "pdl=-2");
    cpu_options(&opt);
    opt.gemm_tactic = (gr_toggle)7;
    expect_refused(model, &opt, "gemm_tactic=7");
    cpu_options(&opt);
    opt.executor = (gr_executor)3;
    expect_refused(model, &opt, "executor=3");
    gr_model_destroy(model);
}
END_TEST

START_TEST(every_valid_value_builds)
{
    gr_model *model = load_shapes();
    for (int a = GR_F32_ALGO_AUTO; a <= GR_F32_ALGO_DIRECT3X3; a++)
        for (int t = GR_TOGGLE_AUTO; t <= GR_TOGGLE_OFF; t++) {
            gr_engine_options opt;
            cpu_options(&opt);
            opt.f32_algo = (gr_f32_algo)a;
            opt.f32_split_k = opt.pdl = opt.gemm_tactic = (gr_toggle)t;
            opt.executor = (gr_executor)t; /* graph, dataflow, auto: the CPU engine ignores it */
            gr_engine *engine = NULL;
            ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_OK, "%s",
                          gr_last_error());
            gr_engine_destroy(engine);
        }
    gr_model_destroy(model);
}
END_TEST

/* micro_batch (runtime.h): 0 (auto) by default; negative, larger than the batch or not a
 * divisor of it is refused naming both values; a divisor builds, and the CPU engine, which runs
 * whole batches, reports the batch as its pass size. */
START_TEST(micro_batch_is_validated)
{
    gr_engine_options opt;
    memset(&opt, 0x5a, sizeof opt);
    gr_engine_options_default(&opt);
    ck_assert_int_eq(opt.micro_batch, 0);
    gr_model *model = load_shapes();
    const int bad[][2] = {{-1, 4}, {3, 4}, {8, 4}, {4, 10}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cpu_options(&opt);
        opt.micro_batch = bad[i][0];
        opt.batch = bad[i][1];
        char what[64];
        snprintf(what, sizeof what, "micro_batch=%d does not divide batch=%d", bad[i][0],
                 bad[i][1]);
        expect_refused(model, &opt, what);
    }
    const int good[][2] = {{0, 4}, {1, 4}, {2, 4}, {4, 4}, {5, 10}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cpu_options(&opt);
        opt.micro_batch = good[i][0];
        opt.batch = good[i][1];
        gr_engine *engine = NULL;
        ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_OK, "%s", gr_last_error());
        ck_assert_int_eq(gr_engine_micro_batch(engine), good[i][1]);
        gr_engine_destroy(engine);
    }
    ck_assert_int_eq(gr_engine_micro_batch(NULL), 0);
    gr_model_destroy(model);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("kernel choices");
    tcase_add_test(tc, defaults_are_auto);
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, unknown_names_are_refused);
    tcase_add_test(tc, values_outside_the_enums_are_refused);
    tcase_add_test(tc, every_valid_value_builds);
    tcase_add_test(tc, micro_batch_is_validated);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
