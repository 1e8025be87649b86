/* The whole-network CPU reference executor (see reference.h). Two passes: first every layer is
 * validated (edges point backwards, shapes re-inferred and equal to the stored ones, weights
 * present), so the op references, which cannot fail, only ever see checked inputs; then the
 * layers run in list order (a topological order) with one malloc'd output buffer each. With
 * keep_all=0 a buffer is freed right after its last reader ran, unless it is a head. */
#include "runtime/cpu/reference.h"

#include <stdlib.h>
#include <string.h>

static gr_status layer_fail(gr_status st, const gr_net *net, int i, const char *what)
{
    const gr_layer *l = &net->layers[i];
    const gr_op_info *info = gr_op_get(l->p.op);
    return gr_fail(st, "reference: layer %d (%s, cfg line %d): %s", i, info ? info->name : "?",
                   l->cfg_line, what);
}

static gr_status check_weights(const gr_net *net, int i, const gr_shape *in_shapes, int n_in)
{
    const gr_layer *l = &net->layers[i];
    if (!gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
        return GR_OK;
    const gr_weights *w = &l->w;
    if (!w->weights || !w->biases)
        return layer_fail(GR_ERR_STATE, net, i, "no weights attached");
    if (l->p.batch_normalize && (!w->scales || !w->rolling_mean || !w->rolling_variance))
        return layer_fail(GR_ERR_STATE, net, i, "batch-norm parameters missing");
    gr_cost cost;
    gr_op_cost(&l->p, in_shapes, n_in, l->out, &cost);
    if (w->n != l->p.filters || w->n_weights != cost.n_weights)
        return layer_fail(GR_ERR_INTERNAL, net, i, "weight tensor size does not match the layer");
    return GR_OK;
}

/* Validate layer i and fill its input shapes. */
static gr_status check_layer(const gr_net *net, int i, gr_shape *in_shapes)
{
    const gr_layer *l = &net->layers[i];
    const gr_op_info *info = gr_op_get(l->p.op);
    if (!info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "reference: layer %d has unknown op %d", i,
                       (int)l->p.op);
    if (l->n_inputs < 1 || l->n_inputs > GR_MAX_INPUTS)
        return layer_fail(GR_ERR_INVALID_ARGUMENT, net, i, "input count out of range");
    for (int k = 0; k < l->n_inputs; k++) {
        if (l->inputs[k] < -1 || l->inputs[k] >= i)
            return layer_fail(GR_ERR_INVALID_ARGUMENT, net, i,
                              "an input is not an earlier layer or the network input");
        in_shapes[k] = gr_net_input_shape(net, i, k);
    }
    gr_shape inferred;
    gr_status st = gr_op_infer(&l->p, in_shapes, l->n_inputs, &inferred);
    if (st != GR_OK)
        return gr_fail_prefix(st, "reference: layer %d (%s, cfg line %d): ", i, info->name,
                              l->cfg_line);
    if (inferred.c != l->out.c || inferred.h != l->out.h || inferred.w != l->out.w)
        return layer_fail(GR_ERR_INVALID_ARGUMENT, net, i, "stored output shape is not inferred one");
    return check_weights(net, i, in_shapes, l->n_inputs);
}

static void free_all(float **outputs, int n)
{
    for (int i = 0; i < n; i++) {
        free(outputs[i]);
        outputs[i] = NULL;
    }
}

/* last_reader[j]: the last layer reading layer j's output (-1: none); keep[j]: output kept. */
static gr_status plan_lifetimes(const gr_net *net, int keep_all, int *last_reader, char *keep)
{
    for (int j = 0; j < net->n_layers; j++) {
        last_reader[j] = -1;
        keep[j] = (char)(keep_all != 0);
    }
    for (int i = 0; i < net->n_layers; i++)
        for (int k = 0; k < net->layers[i].n_inputs; k++)
            if (net->layers[i].inputs[k] >= 0)
                last_reader[net->layers[i].inputs[k]] = i;
    if (keep_all)
        return GR_OK;
    int *heads = gr_calloc((size_t)net->n_layers, sizeof *heads, "reference head list");
    if (!heads)
        return GR_ERR_OUT_OF_MEMORY;
    int n_heads = gr_net_heads(net, heads, net->n_layers);
    for (int h = 0; h < n_heads && h < net->n_layers; h++)
        if (heads[h] >= 0 && heads[h] < net->n_layers)
            keep[heads[h]] = 1;
    free(heads);
    return GR_OK;
}

static gr_status run_layers(const gr_net *net, const float *input, int batch,
                            const int *last_reader, const char *keep, float **outputs)
{
    gr_shape in_shapes[GR_MAX_INPUTS];
    const float *in_ptrs[GR_MAX_INPUTS];
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        for (int k = 0; k < l->n_inputs; k++) {
            in_shapes[k] = gr_net_input_shape(net, i, k);
            in_ptrs[k] = l->inputs[k] < 0 ? input : outputs[l->inputs[k]];
            GR_CHECK_INTERNAL(in_ptrs[k] != NULL);
        }
        size_t elems, bytes;
        if (!gr_mul_size(gr_shape_elems(l->out), (size_t)batch, &elems) ||
            !gr_mul_size(elems, sizeof(float), &bytes))
            return layer_fail(GR_ERR_LIMIT, net, i, "output size overflows");
        outputs[i] = gr_malloc(bytes, "reference layer output");
        if (!outputs[i])
            return gr_fail_prefix(GR_ERR_OUT_OF_MEMORY, "reference: layer %d: ", i);
        gr_op_ref(&l->p, &l->w, in_ptrs, in_shapes, l->n_inputs, outputs[i], l->out,
                                batch);
        /* Free what is dead now: inputs read for the last time, and this output if unread. */
        for (int k = 0; k < l->n_inputs; k++) {
            int j = l->inputs[k];
            if (j >= 0 && last_reader[j] == i && !keep[j]) {
                free(outputs[j]);
                outputs[j] = NULL;
            }
        }
        if (last_reader[i] < 0 && !keep[i]) {
            free(outputs[i]);
            outputs[i] = NULL;
        }
    }
    return GR_OK;
}

gr_status gr_reference_forward(const gr_net *net, const float *input, int batch, int keep_all,
                               float **outputs)
{
    if (!net || !outputs)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_reference_forward: NULL argument");
    if (net->n_layers < 1 || net->n_layers > GR_MAX_LAYERS || !net->layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_reference_forward: network has %d layers",
                       net->n_layers);
    for (int i = 0; i < net->n_layers; i++)
        outputs[i] = NULL;
    if (!input)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_reference_forward: NULL input");
    if (batch < 1 || batch > GR_MAX_BATCH)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_reference_forward: batch %d not in 1..%d",
                       batch, GR_MAX_BATCH);
    gr_shape in_shapes[GR_MAX_INPUTS];
    for (int i = 0; i < net->n_layers; i++)
        GR_TRY(check_layer(net, i, in_shapes));

    int *last_reader = gr_calloc((size_t)net->n_layers, sizeof *last_reader, "reference lifetimes");
    char *keep = gr_calloc((size_t)net->n_layers, sizeof *keep, "reference lifetimes");
    gr_status st = (last_reader && keep) ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    if (st == GR_OK)
        st = plan_lifetimes(net, keep_all, last_reader, keep);
    if (st == GR_OK)
        st = run_layers(net, input, batch, last_reader, keep, outputs);
    if (st != GR_OK)
        free_all(outputs, net->n_layers);
    free(last_reader);
    free(keep);
    return st;
}
