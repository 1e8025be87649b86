/* Check suite for graphrun's option table (include/graphrun/options.def) against the option structs
 * of runtime.h and the CLI, field by field:
 *   - each struct is exactly its rows: row k's field sits where the rows before it end, aligned
 *     as its C type (offsetof), with its type's size; the struct ends after the last row (sizeof).
 *     A field added to runtime.h without a row shifts an offset or the size and fails here (one
 *     fitting in the tail padding: python/tests/test_graphrun.py compares runtime.h's field names
 *     with the rows). Each row's C type is the field's (a pointer to the field converts to a
 *     pointer to the row's type without a cast: -Werror=incompatible-pointer-types);
 *   - *_init gives every field its row's default;
 *   - an enum or toggle row names one value per member, its range those values; the library
 *     refuses a value just outside each checked row's range naming the option;
 *   - every row with a flag parses in every subcommand its row names, into its field, and
 *     --no-FLAG / --FLAG on|off for the on/off rows.
 * `test_option_table --dump` prints the rows (struct, field, kind, offset, size, default, flag,
 * GR_CMD_* bits, a value for the flag other than the default) for the
 * Python test, which checks graphrun/_capi.py's ctypes mirrors and each command's --help. */
#include <check.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun/runtime.h"
#include "tools/cli.h"

enum { K_SIZE, K_BOOL, K_INT, K_U64, K_FLOAT, K_ENUM, K_TOGGLE, K_STR, K_PTR };

typedef struct row {
    const char *structure, *field, *kind_name;
    int kind;
    size_t offset, size, align;
    double lo, hi, def_number;
    const char *def_string; /* STR rows */
    const char *flag;
    unsigned commands;
    const char *choices;
} row;

/* The default as a number (0 for pointers) or a string, whatever the row's C type. */
static double number_of_pointer(const void *p) { (void)p; return 0.0; }
static double number_of_number(double v) { return v; }
static const char *string_of_string(const char *s) { return s; }
static const char *string_of_pointer(const void *p) { (void)p; return NULL; }
static const char *string_of_number(double v) { (void)v; return NULL; }
#define NUMBER(def)                                                                               \
    _Generic((def), char *: number_of_pointer, void *: number_of_pointer,                        \
             default: number_of_number)(def)
#define STRING(def)                                                                               \
    _Generic((def), char *: string_of_string, void *: string_of_pointer,                         \
             default: string_of_number)(def)

#define ROW(S, field, type, kind, def, lo, hi, flag, cmds, choices, help)                         \
    {#S, #field, #kind, K_##kind, offsetof(S, field), sizeof(((S *)0)->field), alignof(type),     \
     (double)(lo), (double)(hi), NUMBER(def), STRING(def), flag, cmds, choices},
#define MODEL_ROW(...) ROW(gr_model_options, __VA_ARGS__)
#define ENGINE_ROW(...) ROW(gr_engine_options, __VA_ARGS__)
#define DETECT_ROW(...) ROW(gr_detect_options, __VA_ARGS__)
#define FILES_ROW(...) ROW(gr_files_options, __VA_ARGS__)
#define COUNT(...) +1
enum {
    N_ROWS = 0
#define GR_MODEL_OPT COUNT
#define GR_ENGINE_OPT COUNT
#define GR_DETECT_OPT COUNT
#define GR_FILES_OPT COUNT
#include "graphrun/options.def"
};
static row rows[N_ROWS];

static void read_table(void)
{
    const row table[] = {
#define GR_MODEL_OPT MODEL_ROW
#define GR_ENGINE_OPT ENGINE_ROW
#define GR_DETECT_OPT DETECT_ROW
#define GR_FILES_OPT FILES_ROW
#include "graphrun/options.def"
    };
    memcpy(rows, table, sizeof table);
}

/* Row r's index among the engine rows: its bit in gr_cli_parser.engine_given. */
static int engine_index(int r)
{
    int k = 0;
    for (int j = 0; j < r; j++)
        k += !strcmp(rows[j].structure, "gr_engine_options");
    return k;
}

/* Each row's C type is its field's (compatible types, as _Generic tells). */
#define TYPE_CHECK(S, field, type, ...)                                                           \
    ck_assert_msg(_Generic(s_##S.field, type: 1, default: 0), "%s.%s is not a %s", #S, #field,  \
                  #type);
static void type_check(void)
{
    gr_model_options s_gr_model_options = {0};
    gr_engine_options s_gr_engine_options = {0};
    gr_detect_options s_gr_detect_options = {0};
    gr_files_options s_gr_files_options = {0};
#define GR_MODEL_OPT(...) TYPE_CHECK(gr_model_options, __VA_ARGS__)
#define GR_ENGINE_OPT(...) TYPE_CHECK(gr_engine_options, __VA_ARGS__)
#define GR_DETECT_OPT(...) TYPE_CHECK(gr_detect_options, __VA_ARGS__)
#define GR_FILES_OPT(...) TYPE_CHECK(gr_files_options, __VA_ARGS__)
#include "graphrun/options.def"
    (void)s_gr_model_options;
    (void)s_gr_engine_options;
    (void)s_gr_detect_options;
    (void)s_gr_files_options;
}

typedef struct layout {
    const char *name;
    size_t size, align;
} layout;

static const layout structs[] = {
    {"gr_model_options", sizeof(gr_model_options), alignof(gr_model_options)},
    {"gr_engine_options", sizeof(gr_engine_options), alignof(gr_engine_options)},
    {"gr_detect_options", sizeof(gr_detect_options), alignof(gr_detect_options)},
    {"gr_files_options", sizeof(gr_files_options), alignof(gr_files_options)},
};

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

START_TEST(each_struct_is_exactly_its_rows)
{
    type_check();
    for (size_t s = 0; s < sizeof structs / sizeof structs[0]; s++) {
        size_t end = 0;
        int n = 0;
        for (int r = 0; r < N_ROWS; r++) {
            const row *w = &rows[r];
            if (strcmp(w->structure, structs[s].name) != 0)
                continue;
            ck_assert_msg(w->offset == align_up(end, w->align), "%s.%s at %zu: expected %zu (a "
                          "field of runtime.h without a row in options.def before it?)",
                          w->structure, w->field, w->offset, align_up(end, w->align));
            ck_assert_msg(n > 0 || strcmp(w->field, "struct_size") == 0, "%s: first row %s",
                          w->structure, w->field);
            end = w->offset + w->size;
            n++;
        }
        ck_assert_msg(n > 1, "%s has no rows", structs[s].name);
        ck_assert_msg(structs[s].size == align_up(end, structs[s].align), "sizeof(%s) = %zu, its "
                      "rows end at %zu: a field after the last row?", structs[s].name,
                      structs[s].size, end);
    }
}
END_TEST

/* The field's value as a double (the value's kind says how to read it). */
static double read_number(const void *base, const row *w)
{
    const char *p = (const char *)base + w->offset;
    if (w->kind == K_FLOAT) {
        float f;
        memcpy(&f, p, sizeof f);
        return (double)f;
    }
    if (w->kind == K_U64) {
        uint64_t u;
        memcpy(&u, p, sizeof u);
        return (double)u;
    }
    if (w->kind == K_SIZE) {
        uint32_t u;
        memcpy(&u, p, sizeof u);
        return (double)u;
    }
    int i;
    memcpy(&i, p, sizeof i);
    return (double)i;
}

static const void *read_pointer(const void *base, const row *w)
{
    const void *v;
    memcpy(&v, (const char *)base + w->offset, sizeof v);
    return v;
}

static void fill_defaults(const char *structure, void *out)
{
    gr_status st = GR_ERR_INVALID_ARGUMENT;
    if (!strcmp(structure, "gr_model_options"))
        st = gr_model_options_init(out, sizeof(gr_model_options));
    else if (!strcmp(structure, "gr_engine_options"))
        st = gr_engine_options_init(out, sizeof(gr_engine_options));
    else if (!strcmp(structure, "gr_detect_options"))
        st = gr_detect_options_init(out, sizeof(gr_detect_options));
    else if (!strcmp(structure, "gr_files_options"))
        st = gr_files_options_init(out, sizeof(gr_files_options));
    ck_assert_msg(st == GR_OK, "%s: %s", structure, gr_last_error());
}

static union {
    gr_model_options m;
    gr_engine_options e;
    gr_detect_options d;
    gr_files_options f;
} scratch;

START_TEST(init_gives_each_row_its_default)
{
    for (int r = 0; r < N_ROWS; r++) {
        const row *w = &rows[r];
        memset(&scratch, 0x5a, sizeof scratch);
        fill_defaults(w->structure, &scratch);
        if (w->kind == K_SIZE)
            continue;
        if (w->kind == K_STR || w->kind == K_PTR) {
            const char *v = read_pointer(&scratch, w);
            ck_assert_msg(w->def_string ? v && !strcmp(v, w->def_string) : v == NULL,
                          "%s.%s: default %s, row %s", w->structure, w->field, v ? v : "NULL",
                          w->def_string ? w->def_string : "NULL");
        } else {
            double v = read_number(&scratch, w);
            double want = w->kind == K_FLOAT ? (double)(float)w->def_number : w->def_number;
            ck_assert_msg(v == want, "%s.%s: default %g, row %g", w->structure, w->field, v, want);
        }
    }
}
END_TEST

static int count_choices(const char *c)
{
    int n = c && *c ? 1 : 0;
    for (; c && *c; c++)
        n += *c == '|';
    return n;
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

static void set_number(void *base, const row *w, double v)
{
    char *p = (char *)base + w->offset;
    if (w->kind == K_FLOAT) {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof i);
    }
}

START_TEST(ranges_are_the_library_checks)
{
    gr_model *model = load_shapes();
    int checked = 0;
    for (int r = 0; r < N_ROWS; r++) {
        const row *w = &rows[r];
        if (w->kind == K_ENUM || w->kind == K_TOGGLE)
            ck_assert_msg(count_choices(w->choices) == (int)(w->hi - w->lo) + 1 ||
                          w->lo > w->hi, "%s.%s: %d names for %g..%g", w->structure, w->field,
                          count_choices(w->choices), w->lo, w->hi);
        if (strcmp(w->structure, "gr_engine_options") != 0 || w->lo > w->hi ||
            !(w->kind == K_INT || w->kind == K_FLOAT || w->kind == K_ENUM ||
              w->kind == K_TOGGLE))
            continue;
        const double step = w->kind == K_FLOAT ? 0.5 : 1.0;
        const double outside[2] = {w->lo - step, w->hi + step};
        for (int k = 0; k < 2; k++) {
            if (outside[k] < -2147483648.0 || outside[k] > 2147483647.0)
                continue; /* an int can't be there */
            gr_engine_options opt;
            gr_engine_options_default(&opt);
            opt.device = GR_DEVICE_CPU;
            set_number(&opt, w, outside[k]);
            if (!strcmp(w->field, "batch") || !strcmp(w->field, "micro_batch"))
                continue; /* their own checks in runtime/build.c */
            gr_engine *engine = NULL;
            ck_assert_msg(gr_engine_build(model, &opt, &engine) == GR_ERR_INVALID_ARGUMENT,
                          "%s=%g built", w->field, outside[k]);
            char want[64];
            snprintf(want, sizeof want, "engine option %s=", w->field);
            ck_assert_msg(strstr(gr_last_error(), want), "'%s' not in: %s", want,
                          gr_last_error());
            checked++;
        }
    }
    ck_assert_int_ge(checked, 10);
    gr_model_destroy(model);
}
END_TEST

static const unsigned commands[] = {GR_CMD_DETECT, GR_CMD_COMPARE, GR_CMD_PLAN, GR_CMD_EVAL,
                                    GR_CMD_BENCH, GR_CMD_BUILD};

/* A value of row w other than its default, as the command line spells it. */
static const char *other_value(const row *w, char *buf, size_t size, double *expect)
{
    if (w->kind == K_BOOL) {
        *expect = w->def_number ? 0 : 1;
        return w->def_number ? "off" : "on";
    }
    if (w->kind == K_ENUM || w->kind == K_TOGGLE) {
        int k = (int)w->def_number == 0 ? 1 : 0;
        const char *c = w->choices;
        for (int j = 0; j < k; j++)
            c = strchr(c, '|') + 1;
        snprintf(buf, size, "%.*s", (int)strcspn(c, "|"), c);
        *expect = k;
        return buf;
    }
    if (w->kind == K_STR) {
        *expect = 0;
        return "some/file";
    }
    *expect = w->def_number == w->hi ? w->lo : w->hi;
    snprintf(buf, size, w->kind == K_INT ? "%.0f" : "%g", *expect); /* 2147483647, not 2.1e+09 */
    return buf;
}

static void expect_value(const gr_engine_options *eo, const row *w, double expect,
                         const char *how)
{
    if (w->kind == K_STR) {
        const char *v = read_pointer(eo, w);
        ck_assert_msg(v && !strcmp(v, "some/file"), "%s: %s", how, v ? v : "NULL");
    } else {
        ck_assert_msg(read_number(eo, w) == expect, "%s: %s = %g, expected %g", how, w->field,
                      read_number(eo, w), expect);
    }
}

static int parse(unsigned command, gr_engine_options *eo, unsigned long long *given, int argc,
                 char **argv)
{
    gr_cli_parser p = {.command = "test", .engine = eo, .commands = command,
                       .engine_given = given};
    char err[256];
    gr_engine_options_default(eo);
    int rc = gr_cli_parse_flags(&p, argc, argv, err, sizeof err);
    ck_assert_msg(rc == GR_EXIT_OK, "%s %s: %s", argv[1], argc > 2 ? argv[2] : "", err);
    return rc;
}

START_TEST(every_flag_parses_in_every_command_it_names)
{
    int flags = 0;
    for (int r = 0; r < N_ROWS; r++) {
        const row *w = &rows[r];
        if (!w->flag)
            continue;
        ck_assert_msg(!strcmp(w->structure, "gr_engine_options"), "%s: only engine rows have "
                      "flags yet", w->field);
        ck_assert_msg(w->kind != K_PTR && w->kind != K_SIZE && w->kind != K_U64,
                      "%s: no flag for its kind", w->field);
        int offered = 0;
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
            unsigned cmd = commands[c];
            gr_engine_options eo;
            unsigned long long given = 0;
            char buf[64], how[128];
            double expect = 0;
            const char *v = other_value(w, buf, sizeof buf, &expect);
            char *argv[] = {"test", (char *)w->flag, (char *)v, NULL};
            if (!(w->commands & cmd)) {
                /* not offered: unknown there */
                gr_cli_parser p = {.command = "test", .engine = &eo, .commands = cmd};
                char err[256];
                ck_assert_int_eq(gr_cli_parse_flags(&p, 3, argv, err, sizeof err), GR_EXIT_USAGE);
                continue;
            }
            offered++;
            snprintf(how, sizeof how, "%s %s (command bit %#x)", w->flag, v, cmd);
            parse(cmd, &eo, &given, 3, argv);
            expect_value(&eo, w, expect, how);
            ck_assert_msg(given == 1ull << engine_index(r), "%s: given %#llx", how, given);
            char eq[96];
            snprintf(eq, sizeof eq, "%s=%s", w->flag, v);
            char *argv_eq[] = {"test", eq, NULL};
            parse(cmd, &eo, NULL, 2, argv_eq);
            expect_value(&eo, w, expect, eq);
            if (w->kind == K_BOOL || w->kind == K_TOGGLE) {
                char no[64];
                snprintf(no, sizeof no, "--no-%s", w->flag + 2);
                char *argv_no[] = {"test", no, NULL};
                parse(cmd, &eo, NULL, 2, argv_no);
                expect_value(&eo, w, w->kind == K_BOOL ? 0 : GR_TOGGLE_OFF, no);
                char *argv_on[] = {"test", (char *)w->flag, NULL};
                parse(cmd, &eo, NULL, 2, argv_on);
                expect_value(&eo, w, w->kind == K_BOOL ? 1 : GR_TOGGLE_ON, w->flag);
            }
        }
        ck_assert_msg(offered > 0, "%s: a flag no command offers", w->flag);
        flags++;
    }
    ck_assert_int_ge(flags, 15);
}
END_TEST

static void dump(void)
{
    for (int r = 0; r < N_ROWS; r++) {
        const row *w = &rows[r];
        printf("%s\t%s\t%s\t%zu\t%zu\t", w->structure, w->field, w->kind_name, w->offset,
               w->size);
        if (w->kind == K_STR || w->kind == K_PTR)
            printf("%s", w->def_string ? w->def_string : "NULL");
        else
            printf("%.9g", w->kind == K_FLOAT ? (double)(float)w->def_number : w->def_number);
        char buf[64];
        double expect;
        printf("\t%s\t%#x\t%s\n", w->flag ? w->flag : "-", w->commands,
               w->flag ? other_value(w, buf, sizeof buf, &expect) : "-");
    }
}

int main(int argc, char **argv)
{
    read_table();
    if (argc > 1 && !strcmp(argv[1], "--dump")) {
        dump();
        return EXIT_SUCCESS;
    }
    Suite *s = suite_create("option table");
    TCase *tc = tcase_create("field by field");
    tcase_add_test(tc, each_struct_is_exactly_its_rows);
    tcase_add_test(tc, init_gives_each_row_its_default);
    tcase_add_test(tc, ranges_are_the_library_checks);
    tcase_add_test(tc, every_flag_parses_in_every_command_it_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
