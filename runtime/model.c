/* gr_model: a parsed network with weights (loaded or synthetic) and class names. The public face of
 * models/; read-only after loading, so threads may share it while building engines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx/onnx.h"
#include "models/onnx/tail.h"
#include "runtime/engine_internal.h"
#include "runtime/image/image.h"


const char *const *gr_builtin_models(void) { return gr_net_builtin_names(); }

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* NaN/Inf weights are never silent: counted, one notice line, or an error when asked. */
static gr_status check_weights_finite(gr_net *net, const gr_model_options *opt)
{
    int first = -1;
    net->nonfinite_weights = gr_net_count_nonfinite_weights(net, &first);
    if (net->nonfinite_weights == 0)
        return GR_OK;
    const char *source = opt->weights_path ? opt->weights_path : net->name;
    const char *op = gr_op_get(net->layers[first].p.op)->name;
    if (opt->nonfinite_weights_is_error)
        return gr_fail(GR_ERR_NUMERIC, "%s: %zu non-finite weights (NaN/Inf), the first in layer "
                       "%d (%s): refused (nonfinite_weights_is_error)", source,
                       net->nonfinite_weights, first, op);
    snprintf(net->load_notice, sizeof net->load_notice,
             "%s: %zu non-finite weights (NaN/Inf), the first in layer %d (%s): outputs will be "
             "meaningless (nonfinite_weights_is_error refuses such weights)",
             source, net->nonfinite_weights, first, op);
    return GR_OK;
}

gr_status gr_model_load(const gr_model_options *opt, gr_model **out)
{
    if (!opt || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_model_load: NULL %s", opt ? "out" : "options");
    *out = NULL;
    gr_model_options full;
    GR_TRY(gr_model_options_take(opt, &full));
    opt = &full;
    gr_net *net = NULL;
    gr_status st;
    /* An ONNX model (models/onnx/onnx.h) holds its weights: named as a cfg or as the model. */
    const char *onnx = opt->cfg_path && gr_onnx_is_model_file(opt->cfg_path) ? opt->cfg_path
                       : !opt->cfg_path && opt->builtin && gr_onnx_is_model(opt->builtin, NULL, 0)
                           ? opt->builtin : NULL;
    if (onnx) {
        st = gr_net_open(opt->builtin, opt->cfg_path, opt->weights_path, opt->seed, &net);
    } else if (opt->cfg_path) {
        st = gr_net_parse_file(opt->cfg_path, &net);
        if (st == GR_OK && opt->builtin && strcmp(opt->builtin, "") != 0) {
            /* A --cfg with a built-in name keeps the built-in class names when the counts match. */
            gr_net *builtin = NULL;
            if (gr_net_builtin(opt->builtin, &builtin) == GR_OK && builtin->class_names) {
                int classes = 0;
                for (int i = 0; i < net->n_layers; i++)
                    if (gr_op_has((int)net->layers[i].p.op, GR_OPF_HEAD))
                        classes = net->layers[i].p.classes;
                if (classes == builtin->n_class_names) {
                    net->class_names = builtin->class_names;
                    net->n_class_names = builtin->n_class_names;
                    builtin->class_names = NULL;
                    builtin->n_class_names = 0;
                }
            }
            gr_net_free(builtin);
            gr_clear_error();
        }
    } else if (opt->builtin) {
        st = gr_net_builtin(opt->builtin, &net);
    } else {
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_model_load: neither a built-in name nor a cfg path");
    }
    if (st != GR_OK)
        return st;
    /* A built-in model with bundled trained weights loads them unless other weights are named
     * (a --cfg replaces the network, so it gets synthetic weights like any cfg). */
    const char *bundled = opt->cfg_path || onnx ? NULL : gr_net_builtin_weights(opt->builtin);
    if (onnx) {
        st = GR_OK;
    } else if (opt->weights_path) {
        st = gr_net_load_weights(net, opt->weights_path);
    } else if (bundled) {
        char path[4096];
        st = gr_data_path(bundled, path, sizeof path);
        if (st == GR_OK)
            st = gr_net_load_weights(net, path);
        if (st != GR_OK)
            gr_fail_prefix(st, "built-in model '%s' needs its trained weights (made by "
                               "tools/train/train_shapes.py; or pass --weights FILE): ",
                           opt->builtin);
    } else {
        st = gr_net_synthesize_weights(net, opt->seed);
    }
    if (st != GR_OK) {
        gr_net_free(net);
        return st;
    }
    gr_model *m = gr_calloc(1, sizeof *m, "model");
    if (!m) {
        gr_net_free(net);
        return GR_ERR_OUT_OF_MEMORY;
    }
    if (opt->cfg_path && net->name[0] == '\0')
        snprintf(net->name, sizeof net->name, "%s", base_name(opt->cfg_path));
    m->net = net;
    m->seed = opt->seed;
    st = check_weights_finite(net, opt);
    if (st != GR_OK) {
        gr_model_destroy(m);
        return st;
    }
    *out = m;
    return GR_OK;
}

gr_preprocess gr_model_preprocess(const gr_model *model)
{
    return gr_preprocess_concrete(model ? model->net->preprocess : GR_PREPROCESS_AUTO);
}

const char *gr_model_notice(const gr_model *model) { return model ? model->net->load_notice : ""; }

void gr_model_destroy(gr_model *model)
{
    if (!model)
        return;
    gr_net_free(model->net);
    free(model);
}

gr_status gr_model_get_info(const gr_model *model, gr_model_info *info)
{
    if (!model || !info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_model_get_info: NULL argument");
    const gr_net *net = model->net;
    memset(info, 0, sizeof *info);
    info->nonfinite_weights = model->net->nonfinite_weights;
    info->name = net->name;
    info->width = net->w;
    info->height = net->h;
    info->channels = net->c;
    info->n_layers = net->n_layers;
    int heads[GR_MAX_HEADS];
    info->n_outputs = gr_net_heads(net, heads, GR_MAX_HEADS);
    info->synthetic_weights = net->synthetic;
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        gr_shape in[GR_MAX_INPUTS];
        for (int k = 0; k < l->n_inputs; k++)
            in[k] = gr_net_input_shape(net, i, k);
        gr_cost cost;
        memset(&cost, 0, sizeof cost);
        gr_op_cost(&l->p, in, l->n_inputs, l->out, &cost);
        info->gflops += cost.flops * 1e-9;
        info->n_params += cost.n_params;
        if (gr_op_has((int)l->p.op, GR_OPF_HEAD))
            info->classes = l->p.classes;
    }
    if (net->tail) /* an ONNX detection head run on the host */
        info->classes = gr_tail_classes(net->tail);
    return GR_OK;
}

const char *gr_model_class_name(const gr_model *model, int class_id)
{
    static _Thread_local char fallback[32];
    if (model && model->net->class_names && class_id >= 0 && class_id < model->net->n_class_names)
        return model->net->class_names[class_id];
    snprintf(fallback, sizeof fallback, "class %d", class_id);
    return fallback;
}

gr_status gr_model_set_class_names(gr_model *model, const char *names_path)
{
    if (!model || !names_path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_model_set_class_names: NULL argument");
    return gr_net_load_class_names(model->net, names_path);
}

static void free_names(char **names, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

gr_status gr_net_clone(const gr_net *src, gr_net **out)
{
    *out = NULL;
    gr_net *dst = gr_calloc(1, sizeof *dst, "network copy");
    if (!dst)
        return GR_ERR_OUT_OF_MEMORY;
    *dst = *src;
    dst->layers = NULL;
    dst->weight_block = NULL;
    dst->weights_borrowed = 0; /* the copy owns its weights */
    dst->class_names = NULL;
    dst->n_class_names = 0;
    dst->qdq = NULL;
    if (gr_net_qdq_clone(src->qdq, &dst->qdq) != GR_OK)
        goto oom;
    dst->tail = NULL;
    dst->layers = gr_calloc((size_t)src->n_layers, sizeof *dst->layers, "network copy layers");
    if (!dst->layers)
        goto oom;
    memcpy(dst->layers, src->layers, (size_t)src->n_layers * sizeof *dst->layers);
    if (src->weight_block) {
        dst->weight_block = gr_calloc(src->n_weight_floats, sizeof(float), "network copy weights");
        if (!dst->weight_block)
            goto oom;
        memcpy(dst->weight_block, src->weight_block, src->n_weight_floats * sizeof(float));
        /* Rebase every weight pointer from the source block into the copy. */
        for (int i = 0; i < dst->n_layers; i++) {
            gr_weights *w = &dst->layers[i].w;
            float **ptrs[] = {&w->biases, &w->scales, &w->rolling_mean, &w->rolling_variance,
                              &w->weights};
            for (size_t k = 0; k < sizeof ptrs / sizeof ptrs[0]; k++)
                if (*ptrs[k])
                    *ptrs[k] = dst->weight_block + (*ptrs[k] - src->weight_block);
        }
    }
    if (src->class_names) {
        dst->class_names = gr_calloc((size_t)src->n_class_names, sizeof(char *), "class names");
        if (!dst->class_names)
            goto oom;
        dst->n_class_names = src->n_class_names;
        for (int i = 0; i < src->n_class_names; i++) {
            size_t len = strlen(src->class_names[i]) + 1;
            dst->class_names[i] = gr_malloc(len, "class name");
            if (!dst->class_names[i])
                goto oom;
            memcpy(dst->class_names[i], src->class_names[i], len);
        }
    }
    dst->tail = gr_tail_retain(src->tail);
    *out = dst;
    return GR_OK;
oom:
    gr_net_qdq_free(dst->qdq);
    free(dst->layers);
    free(dst->weight_block);
    free_names(dst->class_names, dst->n_class_names);
    free(dst);
    return GR_ERR_OUT_OF_MEMORY;
}
