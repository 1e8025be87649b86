/* The public option structs' defaults and their struct_size contract (runtime.h, "Option
 * structs"): *_init fills the first struct_size bytes a caller knows of; *_take, at the entry
 * points, turns what a caller passed into the library's full layout, the fields past the caller's
 * struct_size taking their defaults. Fields are only appended, so the oldest accepted size is
 * where each struct's first layout with struct_size (0.1.0) ended: the END_OF constants below
 * stay as they are when fields are added. Calls nothing of the runtime but base/. */
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

static void model_defaults(gr_model_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->builtin = "yolo";
    opt->seed = 1;
}

static void engine_defaults(gr_engine_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->device = GR_DEVICE_AUTO;
    opt->precision = GR_PREC_FP32;
    opt->batch = 1;
    opt->gpu_index = 0;
    opt->use_cuda_graph = 1;
    opt->calib_method = GR_CALIB_MAX;
    opt->calib_percentile = 99.99f;
    opt->inflight = 1;
    opt->calib_device = GR_DEVICE_AUTO; /* a GPU engine calibrates on the GPU */
    opt->max_nrmse = GR_MAX_NRMSE_DEFAULT;
    opt->tactic_search = 1; /* docs/tactics.md: measured on the H100, 2026-11-23 */
    opt->f32_algo = GR_F32_ALGO_AUTO;
    opt->f32_split_k = GR_TOGGLE_AUTO;
    opt->pdl = GR_TOGGLE_AUTO;
    opt->gemm_tactic = GR_TOGGLE_AUTO;
    opt->executor = GR_EXECUTOR_GRAPH;
}

static void detect_defaults(gr_detect_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->thresh = 0.5f;      /* Darknet's defaults */
    opt->hier_thresh = 0.5f;
    opt->nms = 0.45f;
}

static void files_defaults(gr_files_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->thresh = 0.5f;
    opt->nms = 0.45f;
    opt->decode = GR_FILES_DECODE_AUTO;
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
