/* gr_net_qdq (models/net.h): the int8 scales a model file states itself, owned by its net. */
#include <stdlib.h>
#include <string.h>

#include "models/net.h"

gr_net_qdq *gr_net_qdq_new(int n_layers)
{
    gr_net_qdq *q = gr_calloc(1, sizeof *q, "Q/DQ scales");
    if (!q)
        return NULL;
    size_t n = n_layers > 0 ? (size_t)n_layers : 1;
    q->n_layers = n_layers;
    q->range = gr_calloc(n, sizeof *q->range, "Q/DQ ranges");
    q->wscale = gr_calloc(n, sizeof *q->wscale, "Q/DQ weight scales");
    q->n_wscale = gr_calloc(n, sizeof *q->n_wscale, "Q/DQ weight scales");
    if (!q->range || !q->wscale || !q->n_wscale) {
        gr_net_qdq_free(q);
        return NULL;
    }
    return q;
}

void gr_net_qdq_free(gr_net_qdq *q)
{
    if (!q)
        return;
    for (int i = 0; q->wscale && i < q->n_layers; i++)
        free(q->wscale[i]);
    free(q->wscale);
    free(q->n_wscale);
    free(q->range);
    free(q);
}

gr_status gr_net_qdq_clone(const gr_net_qdq *src, gr_net_qdq **out)
{
    *out = NULL;
    if (!src)
        return GR_OK;
    gr_net_qdq *q = gr_net_qdq_new(src->n_layers);
    if (!q)
        return GR_ERR_OUT_OF_MEMORY;
    q->input_range = src->input_range;
    q->n_ranges = src->n_ranges;
    q->n_wscaled = src->n_wscaled;
    for (int i = 0; i < src->n_layers; i++) {
        q->range[i] = src->range[i];
        if (!src->wscale[i])
            continue;
        q->wscale[i] = gr_malloc((size_t)src->n_wscale[i] * sizeof(float), "Q/DQ weight scales");
        if (!q->wscale[i]) {
            gr_net_qdq_free(q);
            return GR_ERR_OUT_OF_MEMORY;
        }
        memcpy(q->wscale[i], src->wscale[i], (size_t)src->n_wscale[i] * sizeof(float));
        q->n_wscale[i] = src->n_wscale[i];
    }
    *out = q;
    return GR_OK;
}
