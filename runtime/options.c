/* The public option structs' defaults and their struct_size contract (runtime.h, "Option
 * structs"): *_init fills the first struct_size bytes a caller knows of; *_take, at the entry
 * points, turns what a caller passed into the library's full layout, the fields past the caller's
 * struct_size taking their defaults. Fields are only appended, so the oldest accepted size is
 * where each struct's first layout with struct_size (0.1.0) ended: the END_OF constants below
 * stay as they are when fields are added. The defaults and the engine options' ranges are the
 * rows of include/graphrun/options.def. Calls nothing of the runtime but base/. */
#include <stddef.h>
#include <string.h>

#include "runtime/engine_internal.h"

#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* 0.1.0's last fields: later layouts only grow past them. */
#define MODEL_OPTIONS_MIN END_OF(gr_model_options, nonfinite_weights_is_error)
#define ENGINE_OPTIONS_MIN END_OF(gr_engine_options, gemm_tactic)
#define DETECT_OPTIONS_MIN END_OF(gr_detect_options, image_h)
/* gr_files_options came later, with all of these fields: its first layout. */
#define FILES_OPTIONS_MIN END_OF(gr_files_options, started)

/* Each struct's defaults: its rows of graphrun/options.def, field by field. */
#define DEFAULT(field, type, kind, def, lo, hi, flag, cmds, choices, help) \
    opt->field = (type)(def);

static void model_defaults(gr_model_options *opt)
{
    memset(opt, 0, sizeof *opt);
#define GR_MODEL_OPT DEFAULT
#include "graphrun/options.def"
    opt->struct_size = sizeof *opt;
}

static void engine_defaults(gr_engine_options *opt)
{
    memset(opt, 0, sizeof *opt);
#define GR_ENGINE_OPT DEFAULT
#include "graphrun/options.def"
    opt->struct_size = sizeof *opt;
}

static void detect_defaults(gr_detect_options *opt)
{
    memset(opt, 0, sizeof *opt);
#define GR_DETECT_OPT DEFAULT
#include "graphrun/options.def"
    opt->struct_size = sizeof *opt;
}

static void files_defaults(gr_files_options *opt)
{
    memset(opt, 0, sizeof *opt);
#define GR_FILES_OPT DEFAULT
#include "graphrun/options.def"
    opt->struct_size = sizeof *opt;
}
#undef DEFAULT

/* The range of each engine option row with lo <= hi: an enum's or toggle's value must be one of
 * its names, a number within [lo, hi] (NaN never is). One line naming the option and value. */
static gr_status check_long(const char *field, const char *type, int is_enum, long long v,
                            double lo, double hi)
{
    if ((double)v >= lo && (double)v <= hi)
        return GR_OK;
    if (is_enum)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option %s=%lld is not a %s", field, v,
                       type);
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option %s=%lld is outside %.0f..%.0f", field,
                   v, lo, hi);
}

static gr_status check_float(const char *field, double v, double lo, double hi)
{
    if (v >= lo && v <= hi)
        return GR_OK;
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option %s=%g is outside [%g, %g]", field, v,
                   lo, hi);
}

#define CHECK_SIZE(f)
#define CHECK_STR(f)
#define CHECK_PTR(f)
#define CHECK_BOOL(f)
#define CHECK_U64(f)
#define CHECK_INT(f) GR_TRY(check_long(#f, "int", 0, (long long)opt->f, lo, hi));
#define CHECK_ENUM(f) GR_TRY(check_long(#f, type_name, 1, (long long)(int)opt->f, lo, hi));
#define CHECK_TOGGLE(f) CHECK_ENUM(f)
#define CHECK_FLOAT(f) GR_TRY(check_float(#f, (double)opt->f, lo, hi));
#define CHECK_ROW(field, type, kind, def, lo_, hi_, flag, cmds, choices, help) \
    {                                                                          \
        const double lo = (lo_), hi = (hi_);                                   \
        const char *type_name = #type;                                         \
        (void)type_name;                                                       \
        if (lo <= hi) {                                                        \
            CHECK_##kind(field)                                                \
        }                                                                      \
    }

gr_status gr_engine_options_check(const gr_engine_options *opt)
{
#define GR_ENGINE_OPT CHECK_ROW
#include "graphrun/options.def"
    return GR_OK;
}

static gr_status check_size(const char *name, size_t size, size_t min, size_t max)
{
    if (size == 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s.struct_size is 0: fill the struct with "
                       "%s_default() first", name, name);
    if (size < min)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s.struct_size %zu is smaller than the oldest "
                       "layout (%zu bytes)", name, size, min);
    if (size > max)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s.struct_size %zu is larger than this library's "
                       "%zu bytes (libgraphrun %s is older than the caller's runtime.h)", name, size,
                       max, gr_version());
    return GR_OK;
}

/* The first `size` bytes of the defaults: the padding after a caller's last field then holds
 * the defaults' bytes too, so a later field starting there reads as its default in *_take. */
static gr_status init(void *opt, size_t size, const void *defaults, size_t min, size_t max,
                      const char *name)
{
    if (!opt)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s_init: NULL options", name);
    GR_TRY(check_size(name, size, min, max));
    memcpy(opt, defaults, size);
    uint32_t size32 = (uint32_t)size;
    memcpy(opt, &size32, sizeof size32); /* struct_size is every struct's first member */
    return GR_OK;
}

/* The caller's struct in the library's layout: its first struct_size bytes over the defaults. */
static gr_status take(const void *given, void *full, size_t min, size_t max, const char *name)
{
    uint32_t size;
    memcpy(&size, given, sizeof size);
    GR_TRY(check_size(name, size, min, max));
    memcpy(full, given, size);
    size = (uint32_t)max;
    memcpy(full, &size, sizeof size);
    return GR_OK;
}

gr_status gr_model_options_init(gr_model_options *opt, size_t struct_size)
{
    gr_model_options d;
    model_defaults(&d);
    return init(opt, struct_size, &d, MODEL_OPTIONS_MIN, sizeof d, "gr_model_options");
}

gr_status gr_engine_options_init(gr_engine_options *opt, size_t struct_size)
{
    gr_engine_options d;
    engine_defaults(&d);
    return init(opt, struct_size, &d, ENGINE_OPTIONS_MIN, sizeof d, "gr_engine_options");
}

gr_status gr_detect_options_init(gr_detect_options *opt, size_t struct_size)
{
    gr_detect_options d;
    detect_defaults(&d);
    return init(opt, struct_size, &d, DETECT_OPTIONS_MIN, sizeof d, "gr_detect_options");
}

gr_status gr_files_options_init(gr_files_options *opt, size_t struct_size)
{
    gr_files_options d;
    files_defaults(&d);
    return init(opt, struct_size, &d, FILES_OPTIONS_MIN, sizeof d, "gr_files_options");
}

gr_status gr_model_options_take(const gr_model_options *given, gr_model_options *full)
{
    model_defaults(full);
    return given ? take(given, full, MODEL_OPTIONS_MIN, sizeof *full, "gr_model_options") : GR_OK;
}

gr_status gr_engine_options_take(const gr_engine_options *given, gr_engine_options *full)
{
    engine_defaults(full);
    return given ? take(given, full, ENGINE_OPTIONS_MIN, sizeof *full, "gr_engine_options") : GR_OK;
}

gr_status gr_detect_options_take(const gr_detect_options *given, gr_detect_options *full)
{
    detect_defaults(full);
    return given ? take(given, full, DETECT_OPTIONS_MIN, sizeof *full, "gr_detect_options") : GR_OK;
}

gr_status gr_files_options_take(const gr_files_options *given, gr_files_options *full)
{
    files_defaults(full);
    return given ? take(given, full, FILES_OPTIONS_MIN, sizeof *full, "gr_files_options") : GR_OK;
}
