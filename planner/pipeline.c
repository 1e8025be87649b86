/* gr_plan_build: the planner as one pipeline. The table below is the whole pass order; a row runs
 * when its option is set (or always). Every pass rewrites the plan in place (planner/passes.h). */
#include <stddef.h>

#include "planner/passes.h"

#define ALWAYS SIZE_MAX
#define OPTION(field) offsetof(gr_plan_options, field)

static const struct {
    const char *name;
    gr_status (*run)(gr_plan *plan);
    size_t enabled_by; /* offset of an int in gr_plan_options, or ALWAYS */
} pipeline[] = {
    {"dead_nodes", gr_pass_dead_nodes, ALWAYS},
    {"fold_bn", gr_pass_fold_bn, OPTION(fold_bn)},
    {"fuse_maxpool", gr_pass_fuse_maxpool, OPTION(fuse_maxpool)},
    {"precision", gr_pass_precision, ALWAYS},
    {"fuse_input_quantize", gr_pass_fuse_input_quantize, OPTION(fuse_input_quantize)},
    {"fuse_output_dequantize", gr_pass_fuse_output_dequantize, OPTION(fuse_output_dequantize)},
    {"fuse_epilogue", gr_pass_fuse_epilogue, ALWAYS},
    {"quantize_weights", gr_pass_quantize_weights, ALWAYS},
    {"concat_views", gr_pass_concat_views, OPTION(concat_in_place)},
    {"streams", gr_pass_streams, ALWAYS},
    {"memory", gr_pass_memory, ALWAYS},
};

static int enabled(const gr_plan_options *opt, size_t offset)
{
    if (offset == ALWAYS)
        return 1;
    return *(const int *)(const void *)((const char *)opt + offset) != 0;
}

gr_status gr_plan_build(const gr_net *net, const gr_plan_options *opt, gr_plan **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: NULL output");
    *out = NULL;
    gr_plan *plan = NULL;
    GR_TRY(gr_pass_build_dag(net, opt, &plan));
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        if (!enabled(&plan->options, pipeline[i].enabled_by))
            continue;
        gr_status st = pipeline[i].run(plan);
        if (st != GR_OK) {
            gr_plan_free(plan);
            return gr_fail_prefix(st, "planner pass %s: ", pipeline[i].name);
        }
    }
    plan->options.no_fuse_layer = NULL; /* read by the passes above; not owned */
    plan->options.n_no_fuse_layer = 0;
    /* i8 tensors (and convs quantizing the u8 input to i8) have no scale until calibration or
     * gr_plan_set_ranges. */
    plan->scales_ready = 1;
    for (int t = 0; t < plan->n_tensors; t++)
        if (plan->tensors[t].dtype == GR_DTYPE_I8)
            plan->scales_ready = 0;
    for (int i = 0; i < plan->n_nodes; i++)
        if ((plan->nodes[i].fused & GR_FUSED_QUANTIZE_IN) && plan->nodes[i].in_dtype == GR_DTYPE_I8)
            plan->scales_ready = 0;
    *out = plan;
    return GR_OK;
}
