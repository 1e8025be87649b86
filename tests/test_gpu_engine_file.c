/* Saved GPU engines (runtime.h, "saved engines"; runtime/engine_file.c, gpu_save_blob in
 * runtime/gpu/engine.c): an engine built with the tactic search, saved and loaded, gives outputs
 * bit-identical to the freshly built engine (same plan, same int8 ranges, same tactics: a stored
 * tactic that failed its check on load would be measured again and named in the notice, which
 * this test refuses) for int8 and fp16 at batch 1 and 64, and fp32 (its measured algorithms);
 * the loaded engine lists the same tactics and searched nothing. Build and load times are printed
 * beside each other, not asserted (the targets live in bench/graphrun_bench.c). A GPU file whose
 * header names another GPU is refused naming both. Exits 77 (skipped) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* unsetenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"
#include "runtime/engine_file.h"
#include "tests/support/gpu_test.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static gr_model *load_yolo(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s", gr_last_error());
    return m;
}

static void run(gr_engine *e)
{
    void *buf;
    size_t bytes;
    ck_assert_int_eq(gr_engine_input_buffer(e, 1, &buf, &bytes), GR_OK);
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)buf)[i] = (uint8_t)((i * 7919u) >> 3);
    ck_assert_msg(gr_engine_run(e) == GR_OK, "%s", gr_last_error());
}

static void expect_same_outputs(gr_engine *a, gr_engine *b, const char *what)
{
    run(a);
    run(b);
    for (int k = 0; k < gr_engine_output_count(a); k++) {
        const float *x, *y;
        gr_tensor_desc d;
        ck_assert_int_eq(gr_engine_output_desc(a, k, &d), GR_OK);
        ck_assert_int_eq(gr_engine_output(a, k, &x), GR_OK);
        ck_assert_int_eq(gr_engine_output(b, k, &y), GR_OK);
        size_t n = (size_t)d.n * d.c * d.h * d.w, differ = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&x[i], &y[i], sizeof x[i]) != 0 && differ++ == 0)
                first = i;
        ck_assert_msg(differ == 0, "%s output %d: %zu of %zu values differ, the first at %zu: "
                      "built %.9g, loaded %.9g", what, k, differ, n, first, (double)x[first],
                      (double)y[first]);
    }
}

static void expect_same_tactics(const gr_engine *a, const gr_engine *b, const char *what)
{
    ck_assert_int_eq(gr_engine_tactic_count(a), gr_engine_tactic_count(b));
    for (int i = 0; i < gr_engine_tactic_count(a); i++) {
        gr_tactic_info x, y;
        ck_assert_int_eq(gr_engine_tactic(a, i, &x), GR_OK);
        ck_assert_int_eq(gr_engine_tactic(b, i, &y), GR_OK);
        ck_assert_msg(x.layer == y.layer && x.tile_config == y.tile_config &&
                          x.split_k == y.split_k && x.gemm == y.gemm,
                      "%s tactic %d: built layer %d %s, loaded layer %d %s", what, i, x.layer,
                      x.name, y.layer, y.name);
    }
    gr_tactic_stats st;
    ck_assert_int_eq(gr_engine_tactic_stats(b, &st), GR_OK);
    ck_assert_msg(st.searched == 0 && st.candidates == 0,
                  "%s: the load searched %d convs (%d candidates); notice: %s", what, st.searched,
                  st.candidates, gr_engine_notice(b));
    ck_assert_msg(strstr(gr_engine_notice(b), "measured again") == NULL, "%s: %s", what,
                  gr_engine_notice(b));
}

static const struct {
    gr_precision prec;
    int batch;
} cases[] = {{GR_PREC_INT8, 1}, {GR_PREC_INT8, 64}, {GR_PREC_FP16, 1}, {GR_PREC_FP16, 64},
             {GR_PREC_FP32, 1}};

START_TEST(round_trip)
{
    gr_model *m = load_yolo();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = cases[_i].prec;
    eo.batch = cases[_i].batch;
    char what[64];
    snprintf(what, sizeof what, "%s batch %d", gr_precision_name(eo.precision), eo.batch);
    gr_engine *built = NULL;
    double t0 = now_ms();
    ck_assert_msg(gr_engine_build(m, &eo, &built) == GR_OK, "%s: %s", what, gr_last_error());
    double t1 = now_ms();
    gr_model_destroy(m);
    char path[64];
    snprintf(path, sizeof path, "/tmp/graphrun_gpu_engine_%d.grengine", (int)getpid());
    ck_assert_msg(gr_engine_save(built, path) == GR_OK, "%s: %s", what, gr_last_error());
    gr_engine *loaded = NULL;
    double t2 = now_ms();
    ck_assert_msg(gr_engine_load(path, NULL, &loaded) == GR_OK, "%s: %s", what, gr_last_error());
    double t3 = now_ms();
    unlink(path);
    printf("engine file %-12s build %8.1f ms, load %7.1f ms (%.1f%%), %d tactics\n", what, t1 - t0,
           t3 - t2, 100.0 * (t3 - t2) / (t1 - t0), gr_engine_tactic_count(loaded));
    expect_same_outputs(built, loaded, what);
    expect_same_tactics(built, loaded, what);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
}
END_TEST

/* The header's GPU made another: refused naming both, before anything is built. */
START_TEST(other_gpu_refused)
{
    gr_model *m = load_yolo();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.tactic_search = 0;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    gr_model_destroy(m);
    void *p = NULL;
    size_t bytes = 0;
    ck_assert_int_eq(gr_engine_save_to_memory(e, &p, &bytes), GR_OK);
    gr_engine_destroy(e);
    uint8_t *data = p;
    data[GR_ENGINE_FILE_OFF_SM] = 61; /* sm_61 */
    gr_engine *loaded = NULL;
    ck_assert_int_eq(gr_engine_load_from_memory(data, bytes, NULL, &loaded), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(loaded);
    ck_assert_msg(strstr(gr_last_error(), "built for sm_61 (") != NULL, "%s", gr_last_error());
    gr_free(p);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_engine_file"))
        return 77;
    unsetenv("GR_DISABLE_TACTIC_SEARCH"); /* the stored tactics are what is tested */
    Suite *s = suite_create("gpu_engine_file");
    TCase *tc = tcase_create("engine_file");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, round_trip, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, other_gpu_refused);
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
