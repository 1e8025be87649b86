/* Check suite for the option structs' struct_size contract (runtime.h, "Option structs";
 * runtime/options.c): *_default sets struct_size to the caller's sizeof; an entry point refuses a
 * struct_size of 0, below the oldest layout or above the library's with GR_ERR_INVALID_ARGUMENT and
 * a one-line message naming the struct; a struct of the oldest accepted size is taken field for
 * field, whatever lies in memory after it, and every later field gets its default. *_init never
 * writes past the size it is given (an older caller's struct is that big). No GPU needed. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "runtime/engine_internal.h"

#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
/* 0.1.0's layouts ended here (runtime/options.c keeps the same constants). */
#define MODEL_MIN END_OF(gr_model_options, nonfinite_weights_is_error)
#define ENGINE_MIN END_OF(gr_engine_options, gemm_tactic)
#define DETECT_MIN END_OF(gr_detect_options, image_h)
/* gr_files_options' first layout (it came after 0.1.0). */
#define FILES_MIN END_OF(gr_files_options, started)
#define GARBAGE 0xa5

static void expect_refused(gr_status status, const char *what)
{
    ck_assert_int_eq(status, GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), what) != NULL, "'%s' not in: %s", what, gr_last_error());
    ck_assert_ptr_null(strchr(gr_last_error(), '\n'));
}

static gr_model *load_shapes(void)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = "shapes";
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mo, &model) == GR_OK, "%s", gr_last_error());
    return model;
}

START_TEST(defaults_set_the_callers_size)
{
    gr_model_options mo;
    gr_engine_options eo;
    gr_detect_options dopt;
    gr_model_options_default(&mo);
    gr_engine_options_default(&eo);
    gr_detect_options_default(&dopt);
    ck_assert_uint_eq(mo.struct_size, sizeof mo);
    ck_assert_uint_eq(eo.struct_size, sizeof eo);
    ck_assert_uint_eq(dopt.struct_size, sizeof dopt);
    ck_assert_int_eq(eo.batch, 1);
    ck_assert(dopt.nms == 0.45f);
    ck_assert_str_eq(mo.builtin, "yolo");
    gr_files_options fo;
    gr_files_options_default(&fo);
    ck_assert_uint_eq(fo.struct_size, sizeof fo);
    ck_assert(fo.thresh == 0.5f && fo.nms == 0.45f);
    ck_assert_int_eq(fo.decode, GR_FILES_DECODE_AUTO);
    ck_assert_int_eq(fo.threads, 0);
    ck_assert(fo.prepare == NULL && fo.started == NULL);
    ck_assert_int_eq(fo.jsonl, 0);
    ck_assert(fo.class_names == NULL && fo.n_class_names == 0);
}
END_TEST

START_TEST(bad_sizes_are_refused_naming_the_struct)
{
    gr_model *model = load_shapes();
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    eo.struct_size = 0;
    expect_refused(gr_engine_build(model, &eo, &engine), "gr_engine_options.struct_size is 0: "
                   "fill the struct with gr_engine_options_default() first");
    ck_assert_ptr_null(engine);
    eo.struct_size = 8;
    expect_refused(gr_engine_build(model, &eo, &engine),
                   "gr_engine_options.struct_size 8 is smaller than the oldest layout");
    eo.struct_size = (uint32_t)sizeof eo + 8;
    expect_refused(gr_engine_build(model, &eo, &engine),
                   "gr_engine_options.struct_size");
    ck_assert_ptr_nonnull(strstr(gr_last_error(), "is larger than this library's"));
    ck_assert_ptr_null(engine);

    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.struct_size = (uint32_t)MODEL_MIN - 1;
    gr_model *m2 = NULL;
    expect_refused(gr_model_load(&mo, &m2), "gr_model_options.struct_size");
    ck_assert_ptr_null(m2);

    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.struct_size = 1000;
    gr_detection *dets = NULL;
    int n = -1;
    const float *outputs[1] = {NULL};
    eo.struct_size = (uint32_t)sizeof eo;
    ck_assert_int_eq(gr_engine_build(model, &eo, &engine), GR_OK);
    float *zeros = calloc(1 << 20, sizeof *zeros); /* larger than the shapes net's head */
    outputs[0] = zeros;
    expect_refused(gr_engine_detect_outputs(engine, outputs, 0, &dopt, &dets, &n),
                   "gr_detect_options.struct_size 1000");
    ck_assert_ptr_null(dets);
    free(zeros);
    gr_engine_destroy(engine);
    gr_model_destroy(model);

    expect_refused(gr_engine_options_init(NULL, sizeof eo), "gr_engine_options_init: NULL");
    expect_refused(gr_detect_options_init(&dopt, 4), "gr_detect_options.struct_size 4");
    gr_files_options fo;
    expect_refused(gr_files_options_init(&fo, 4), "gr_files_options.struct_size 4");
    expect_refused(gr_files_options_init(&fo, sizeof fo + 8), "larger than this library's");
}
END_TEST

/* An older caller's struct is struct_size bytes: init writes nothing past it. */
START_TEST(init_writes_only_the_given_size)
{
    unsigned char buf[sizeof(gr_engine_options) + 64];
    memset(buf, GARBAGE, sizeof buf);
    ck_assert_int_eq(gr_engine_options_init((gr_engine_options *)(void *)buf, ENGINE_MIN), GR_OK);
    for (size_t i = ENGINE_MIN; i < sizeof buf; i++)
        ck_assert_msg(buf[i] == GARBAGE, "byte %zu past struct_size %zu written", i,
                      (size_t)ENGINE_MIN);
    gr_engine_options head;
    memcpy(&head, buf, ENGINE_MIN);
    ck_assert_uint_eq(head.struct_size, ENGINE_MIN);
    ck_assert_int_eq(head.batch, 1);
    ck_assert_int_eq(head.tactic_search, 1);

    unsigned char mbuf[sizeof(gr_model_options) + 16];
    memset(mbuf, GARBAGE, sizeof mbuf);
    ck_assert_int_eq(gr_model_options_init((gr_model_options *)(void *)mbuf, MODEL_MIN), GR_OK);
    for (size_t i = MODEL_MIN; i < sizeof mbuf; i++)
        ck_assert_msg(mbuf[i] == GARBAGE, "model options: byte %zu written", i);

    unsigned char fbuf[sizeof(gr_files_options) + 16];
    memset(fbuf, GARBAGE, sizeof fbuf);
    ck_assert_int_eq(gr_files_options_init((gr_files_options *)(void *)fbuf, FILES_MIN), GR_OK);
    for (size_t i = FILES_MIN; i < sizeof fbuf; i++)
        ck_assert_msg(fbuf[i] == GARBAGE, "files options: byte %zu written", i);
}
END_TEST

/* Every byte of a taken struct past the caller's size `min` is the defaults' (the fields appended
 * since that layout, and the padding). */
static void assert_defaults_past(const void *full, const void *defaults, size_t min, size_t size)
{
    ck_assert_int_eq(memcmp((const unsigned char *)full + min,
                            (const unsigned char *)defaults + min, size - min), 0);
}

/* A struct of the oldest size followed by garbage: its fields are the caller's, every byte past
 * it is the defaults'. */
START_TEST(smaller_struct_gets_defaults_past_its_size)
{
    gr_engine_options defaults, full;
    gr_engine_options_default(&defaults);
    union {
        gr_engine_options opt;
        unsigned char bytes[sizeof(gr_engine_options) + 64];
    } given;
    memset(given.bytes, GARBAGE, sizeof given.bytes);
    ck_assert_int_eq(gr_engine_options_init(&given.opt, ENGINE_MIN), GR_OK);
    given.opt.batch = 3;
    given.opt.gemm_tactic = GR_TOGGLE_OFF; /* the oldest layout's last field */
    ck_assert_int_eq(gr_engine_options_take(&given.opt, &full), GR_OK);
    ck_assert_uint_eq(full.struct_size, sizeof full);
    ck_assert_int_eq(full.batch, 3);
    ck_assert_int_eq(full.gemm_tactic, GR_TOGGLE_OFF);
    assert_defaults_past(&full, &defaults, ENGINE_MIN, sizeof full);

    gr_model_options mdefaults, mfull;
    gr_model_options_default(&mdefaults);
    union {
        gr_model_options opt;
        unsigned char bytes[sizeof(gr_model_options) + 16];
    } mgiven;
    memset(mgiven.bytes, GARBAGE, sizeof mgiven.bytes);
    ck_assert_int_eq(gr_model_options_init(&mgiven.opt, MODEL_MIN), GR_OK);
    mgiven.opt.seed = 42;
    ck_assert_int_eq(gr_model_options_take(&mgiven.opt, &mfull), GR_OK);
    ck_assert_uint_eq(mfull.seed, 42);
    assert_defaults_past(&mfull, &mdefaults, MODEL_MIN, sizeof mfull);

    /* gr_files_options of its first layout: jsonl and the class names past it are defaults. */
    gr_files_options fdefaults, ffull;
    gr_files_options_default(&fdefaults);
    union {
        gr_files_options opt;
        unsigned char bytes[sizeof(gr_files_options) + 16];
    } fgiven;
    memset(fgiven.bytes, GARBAGE, sizeof fgiven.bytes);
    ck_assert_int_eq(gr_files_options_init(&fgiven.opt, FILES_MIN), GR_OK);
    fgiven.opt.threads = 3;
    ck_assert_int_eq(gr_files_options_take(&fgiven.opt, &ffull), GR_OK);
    ck_assert_int_eq(ffull.threads, 3);
    ck_assert_int_eq(ffull.jsonl, 0);
    ck_assert_ptr_null(ffull.class_names);
    assert_defaults_past(&ffull, &fdefaults, FILES_MIN, sizeof ffull);

    /* And through the public entry points: the oldest-size structs build and detect. */
    ck_assert_int_eq(gr_model_options_init(&mgiven.opt, MODEL_MIN), GR_OK);
    mgiven.opt.builtin = "shapes";
    gr_model *model = NULL;
    ck_assert_msg(gr_model_load(&mgiven.opt, &model) == GR_OK, "%s", gr_last_error());
    given.opt.device = GR_DEVICE_CPU;
    given.opt.batch = 1;
    gr_engine *engine = NULL;
    ck_assert_msg(gr_engine_build(model, &given.opt, &engine) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_run(engine), GR_OK);
    union {
        gr_detect_options opt;
        unsigned char bytes[sizeof(gr_detect_options) + 16];
    } dgiven;
    memset(dgiven.bytes, GARBAGE, sizeof dgiven.bytes);
    ck_assert_int_eq(gr_detect_options_init(&dgiven.opt, DETECT_MIN), GR_OK);
    gr_detection *dets = NULL;
    int n = -1;
    ck_assert_msg(gr_engine_detect(engine, 0, &dgiven.opt, &dets, &n) == GR_OK, "%s",
                  gr_last_error());
    ck_assert_int_ge(n, 0);
    gr_detections_free(dets);
    gr_engine_destroy(engine);
    gr_model_destroy(model);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("struct_size");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_set_the_callers_size);
    tcase_add_test(tc, bad_sizes_are_refused_naming_the_struct);
    tcase_add_test(tc, init_writes_only_the_given_size);
    tcase_add_test(tc, smaller_struct_gets_defaults_past_its_size);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
