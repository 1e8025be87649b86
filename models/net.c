/* The network IR's small accessors: freeing, input shapes, and which layers are the outputs.
 * A "head" is the layer whose output the region/yolo decoder reads (the raw detector output the
 * engine hands back); a network without a decoder has its output_layers (ONNX) or else its last
 * layer as its only head. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/internal.h"
#include "models/net.h"
#include "models/onnx/tail.h"

void gr_net_free(gr_net *net)
{
    if (!net)
        return;
    free(net->layers);
    gr_net_qdq_free(net->qdq);
    if (!net->weights_borrowed)
        free(net->weight_block);
    if (net->class_names) {
        for (int i = 0; i < net->n_class_names; i++)
            free(net->class_names[i]);
        free(net->class_names);
    }
    gr_tail_release(net->tail);
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

static int is_decoder(const gr_layer *l) { return gr_op_has((int)l->p.op, GR_OPF_HEAD); }

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
    if (count == 0 && net->n_outputs > 0) {
        count = net->n_outputs < max ? net->n_outputs : max;
        memcpy(head_layers, net->output_layers, (size_t)count * sizeof *head_layers);
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

