/* Check suite for the CLI's shared helpers (tools/cli_common.c, tools/json.c, tools/cli_args.c):
 * percentiles of run times, the JSON string writer, the flag parser's outcomes. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/results.h"

/* Interpolated values are a few additions of exact binary fractions: 1e-12 is rounding slack. */
#define TIME_TOL 1e-12

START_TEST(percentile_of_one_run_is_that_run)
{
    double t[] = {7.0};
    ck_assert_double_eq_tol(gr_cli_percentile(t, 1, 50.0), 7.0, TIME_TOL);
    ck_assert_double_eq_tol(gr_cli_percentile(t, 1, 99.0), 7.0, TIME_TOL);
}
END_TEST

/* The bug: with 2 runs p99 was the faster one and the median the slower. */
START_TEST(percentile_of_two_runs)
{
    double t[] = {10.0, 20.0};
    ck_assert_double_eq_tol(gr_cli_percentile(t, 2, 50.0), 15.0, TIME_TOL);
    ck_assert_double_eq_tol(gr_cli_percentile(t, 2, 99.0), 19.9, 1e-9);
    ck_assert_double_eq_tol(gr_cli_percentile(t, 2, 100.0), 20.0, TIME_TOL);
    ck_assert_double_eq_tol(gr_cli_percentile(t, 2, 0.0), 10.0, TIME_TOL);
}
END_TEST

START_TEST(p99_never_below_p50)
{
    double t[1000];
    for (int n = 1; n <= 1000; n++) {
        for (int i = 0; i < n; i++)
            t[i] = (double)((i * 7919) % 1009);
        gr_cli_sort(t, n);
        double p50 = gr_cli_percentile(t, n, 50.0), p99 = gr_cli_percentile(t, n, 99.0);
        ck_assert_msg(p99 >= p50, "n = %d: p99 %g < p50 %g", n, p99, p50);
        ck_assert(p50 >= t[0] && p99 <= t[n - 1]);
    }
}
END_TEST

START_TEST(percentile_of_nothing_is_zero)
{
    ck_assert_double_eq(gr_cli_percentile(NULL, 0, 50.0), 0.0);
}
END_TEST

/* gr_cli_json_string of s as a C string. */
static char *json_of(const char *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    gr_cli_json_string(f, s);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

#define ASSERT_JSON(in, want)                                                                      \
    do {                                                                                           \
        char *got = json_of(in);                                                                   \
        ck_assert_str_eq(got, want);                                                               \
        free(got);                                                                                 \
    } while (0)

START_TEST(json_escapes_quotes_and_controls)
{
    ASSERT_JSON("a\"b\\c", "\"a\\\"b\\\\c\"");
    ASSERT_JSON("tab\there\n\x01\x7f", "\"tab\\u0009here\\u000a\\u0001\\u007f\"");
}
END_TEST

START_TEST(json_keeps_valid_utf8)
{
    ASSERT_JSON("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}
END_TEST

/* Invalid UTF-8 (a lone 0xff, a cut sequence, an overlong '/', a surrogate, above U+10FFFF)
 * becomes U+FFFD, one per bad byte, so the line stays valid JSON and valid UTF-8. */
START_TEST(json_replaces_invalid_utf8)
{
    ASSERT_JSON("a\xff" "b", "\"a\\ufffdb\"");
    ASSERT_JSON("\xe2\x82", "\"\\ufffd\\ufffd\"");
    ASSERT_JSON("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    ASSERT_JSON("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    ASSERT_JSON("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
    ASSERT_JSON("\xe2\x82\xac\xff", "\"\xe2\x82\xac\\ufffd\"");
}
END_TEST

static int parse(int argc, const char **argv, gr_cli_options *o, char *err)
{
    return gr_cli_parse(argc, (char **)argv, o, err, 256);
}

START_TEST(parser_outcomes)
{
    gr_cli_options o;
    char err[256];
    const char *version[] = {"graphrun", "--version"};
    ck_assert_int_eq(parse(2, version, &o, err), GR_EXIT_OK);
    ck_assert_int_eq(o.version, 1);
    const char *bogus[] = {"graphrun", "--bogus"};
    ck_assert_int_eq(parse(2, bogus, &o, err), GR_EXIT_USAGE);
    ck_assert_str_eq(err, "unknown option '--bogus' (see graphrun --help)");
    const char *missing[] = {"graphrun", "--batch"};
    ck_assert_int_eq(parse(2, missing, &o, err), GR_EXIT_USAGE);
    ck_assert_str_eq(err, "missing value for '--batch'");
    const char *runs[] = {"graphrun", "--runs=3", "--batch", "2"};
    ck_assert_int_eq(parse(4, runs, &o, err), GR_EXIT_OK);
    ck_assert(o.runs == 3 && o.runs_given && o.batch == 2);
}
END_TEST

START_TEST(parser_formats)
{
    gr_cli_options o;
    char err[256];
    const char *coco[] = {"graphrun", "--format", "coco"};
    ck_assert_int_eq(parse(3, coco, &o, err), GR_EXIT_OK);
    ck_assert(o.format == GR_FORMAT_COCO && !o.json);
    const char *json[] = {"graphrun", "--json"};
    ck_assert_int_eq(parse(2, json, &o, err), GR_EXIT_OK);
    ck_assert(o.format == GR_FORMAT_JSON && o.json);
    const char *both[] = {"graphrun", "--format=json", "--json"}; /* the same format twice: fine */
    ck_assert_int_eq(parse(3, both, &o, err), GR_EXIT_OK);
    ck_assert(o.format == GR_FORMAT_JSON && o.json);
    const char *clash[] = {"graphrun", "--json", "--format", "csv"};
    ck_assert_int_eq(parse(4, clash, &o, err), GR_EXIT_USAGE);
    ck_assert_str_eq(err, "--json and --format csv ask for two formats");
    const char *xml[] = {"graphrun", "--format", "xml\n"};
    ck_assert_int_eq(parse(3, xml, &o, err), GR_EXIT_USAGE);
    ck_assert_str_eq(err, "--format 'xml?' is not text, json, jsonl, coco, yolo-txt or csv");
    const char *labels[] = {"graphrun", "--format", "yolo-txt", "--save-conf", "--output", "d"};
    ck_assert_int_eq(parse(6, labels, &o, err), GR_EXIT_OK);
    ck_assert(o.format == GR_FORMAT_YOLO_TXT && o.save_conf && !strcmp(o.output, "d"));
    const char *no_dir[] = {"graphrun", "--format", "yolo-txt", "--no-output"};
    ck_assert_int_eq(parse(4, no_dir, &o, err), GR_EXIT_USAGE);
    const char *conf[] = {"graphrun", "--format", "csv", "--save-conf"};
    ck_assert_int_eq(parse(4, conf, &o, err), GR_EXIT_USAGE);
    ck_assert_str_eq(err, "--save-conf applies to --format yolo-txt only");
}
END_TEST

START_TEST(parser_device_lists)
{
    gr_cli_options o;
    char err[256], text[64];
    const char *pair[] = {"graphrun", "--device", "gpu:3,0"};
    ck_assert_int_eq(parse(3, pair, &o, err), GR_EXIT_OK);
    ck_assert(o.device == GR_DEVICE_GPU && o.n_devices == 2 && o.devices[0] == 3 &&
              o.devices[1] == 0 && !o.all_devices);
    ck_assert_str_eq(gr_cli_device_text(&o, text, sizeof text), "gpu:3,0");
    const char *all[] = {"graphrun", "--device", "gpu:0", "--device=gpu:all"}; /* the last wins */
    ck_assert_int_eq(parse(4, all, &o, err), GR_EXIT_OK);
    ck_assert(o.device == GR_DEVICE_GPU && o.all_devices && o.n_devices == 0);
    const char *plain[] = {"graphrun", "--device", "gpu:all", "--device", "gpu"};
    ck_assert_int_eq(parse(5, plain, &o, err), GR_EXIT_OK);
    ck_assert(o.device == GR_DEVICE_GPU && !o.all_devices && o.n_devices == 0);
    ck_assert_str_eq(gr_cli_device_text(&o, text, sizeof text), "gpu");
    char many[128] = "gpu:0";
    for (int i = 1; i <= GR_MAX_DEVICES; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", i);
    const char *too_many[] = {"graphrun", "--device", many};
    ck_assert_int_eq(parse(3, too_many, &o, err), GR_EXIT_USAGE);
    ck_assert_ptr_nonnull(strstr(err, "more than 16 devices"));
    const char *cases[][2] = {{"gpu:", "empty device list"}, {"gpu:1,1", "gpu 1 given twice"},
                              {"gpu:0,", "entry 2 is empty"}, {"gpu:-1", "'-1' is not a CUDA"},
                              {"gpu:all,0", "'all' is not a CUDA"}, {"gpu0", "is not auto, cpu"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {"graphrun", "--device", cases[i][0]};
        ck_assert_int_eq(parse(3, argv, &o, err), GR_EXIT_USAGE);
        ck_assert_msg(strstr(err, cases[i][1]) != NULL, "%s: '%s' not in: %s", cases[i][0],
                      cases[i][1], err);
    }
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, percentile_of_one_run_is_that_run);
    tcase_add_test(tc, percentile_of_two_runs);
    tcase_add_test(tc, p99_never_below_p50);
    tcase_add_test(tc, percentile_of_nothing_is_zero);
    tcase_add_test(tc, json_escapes_quotes_and_controls);
    tcase_add_test(tc, json_keeps_valid_utf8);
    tcase_add_test(tc, json_replaces_invalid_utf8);
    tcase_add_test(tc, parser_outcomes);
    tcase_add_test(tc, parser_formats);
    tcase_add_test(tc, parser_device_lists);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
