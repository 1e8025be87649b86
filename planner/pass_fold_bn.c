/* Batch-norm folding: Darknet's y = scale*(x - mean)/(sqrt(var) + 0.000001) + bias folded into
 * the conv's weights and bias, in double as Darknet computes it (plan.h has the formula). */
#include <math.h>

#include "planner/passes.h"

gr_status gr_pass_fold_bn(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV || !nd->p.batch_normalize)
            continue;
        nd->p.batch_normalize = 0;
        nd->fused |= GR_FUSED_BN;
        if (!plan->options.weight_data) /* the same plan, no numbers */
            continue;
        int filters = nd->p.filters;
        size_t per_filter = nd->n_w / (size_t)filters;
        float *w = plan->weights + nd->w_offset;
        float *b = plan->weights + nd->b_offset;
        const float *scales = plan->weights + nd->bn_offset;
        const float *mean = scales + filters;
        const float *var = mean + filters;
        for (int c = 0; c < filters; c++) {
            /* Darknet: (x - mean) / (sqrt(var) + 0.000001) * scale + bias, in double (AlexeyAB's
             * fork: sqrt(var + 0.00001)). */
            double factor = (double)scales[c] / gr_bn_denominator(nd->p.alexeyab, var[c]);
            for (size_t k = 0; k < per_filter; k++)
                w[(size_t)c * per_filter + k] =
                    (float)((double)w[(size_t)c * per_filter + k] * factor);
            b[c] = (float)((double)b[c] - (double)mean[c] * factor);
        }
    }
    return GR_OK;
}
