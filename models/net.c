/* The network IR's small accessors: freeing, input shapes, and which layers are the outputs.
 * A "head" is the layer whose output the region/yolo decoder reads (the raw detector output the
 * engine hands back); a network without a decoder has its last layer as its only head. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/internal.h"
#include "models/net.h"

void gr_net_free(gr_net *net)
{
    if (!net)
        return;
    free(net->layers);
    free(net->weight_block);
    if (net->class_names) {
        for (int i = 0; i < net->n_class_names; i++)
            free(net->class_names[i]);
        free(net->class_names);
    }
    free(net);
}

gr_shape gr_net_input_shape(const gr_net *net, int layer, int k)
{
    gr_shape none = {0, 0, 0};
    if (!net || layer < 0 || layer >= net->n_layers || k < 0 || k >= net->layers[layer].n_inputs)
        return none;
    int from = net->layers[layer].inputs[k];
    if (from < 0) {
        gr_shape input = {net->c, net->h, net->w};
        return input;
    }
    if (from >= layer)
        return none; /* cannot happen after a successful parse: edges point backwards */
    return net->layers[from].out;
}

static int is_decoder(const gr_layer *l)
{
    return l->p.op == GR_OP_REGION || l->p.op == GR_OP_YOLO;
}

int gr_net_heads(const gr_net *net, int *head_layers, int max)
{
    if (!net || net->n_layers <= 0 || max <= 0)
        return 0;
    int count = 0;
    for (int i = 0; i < net->n_layers && count < max; i++) {
        const gr_layer *l = &net->layers[i];
        if (is_decoder(l) && l->n_inputs > 0)
            head_layers[count++] = l->inputs[0];
    }
    if (count == 0)
        head_layers[count++] = net->n_layers - 1;
    return count;
}

int gr_net_head_decoder(const gr_net *net, int head_index)
{
    if (!net || head_index < 0)
        return -1;
    int seen = 0;
    for (int i = 0; i < net->n_layers; i++) {
        if (!is_decoder(&net->layers[i]))
            continue;
        if (seen == head_index)
            return i;
        seen++;
    }
    return -1;
}

gr_status gr_read_small_file(const char *path, size_t max_bytes, const char *what, char **text,
                             size_t *len)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gr_fail(GR_ERR_IO, "%s: cannot open %s file: %s", path, what, strerror(errno));
    size_t cap = 64 * 1024, used = 0;
    char *buf = gr_malloc(cap + 1, what);
    gr_status st = buf ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    while (st == GR_OK) {
        if (used == cap) {
            if (cap > max_bytes) {
                st = gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes: not a %s file", path,
                             max_bytes, what);
                break;
            }
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) {
                st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory reading the %s file", path,
                             what);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + used, 1, cap - used, f);
        used += got;
        if (got == 0) {
            if (ferror(f))
                st = gr_fail(GR_ERR_IO, "%s: read error after %zu bytes: %s", path, used,
                             strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st == GR_OK && used > max_bytes)
        st = gr_fail(GR_ERR_LIMIT, "%s: larger than %zu bytes: not a %s file", path, max_bytes,
                     what);
    if (st != GR_OK) {
        free(buf);
        return st;
    }
    buf[used] = '\0';
    *text = buf;
    *len = used;
    return GR_OK;
}
