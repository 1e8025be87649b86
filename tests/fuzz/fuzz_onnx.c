/* libFuzzer harness: the ONNX importer (models/onnx/) on arbitrary bytes. Whatever the bytes,
 * gr_net_parse_onnx returns a status (never crashes, leaks or hits UB), and a network it accepts
 * holds the IR's invariants: backward edges, shapes within limits, and the weight block its
 * layers imply. Built with -DGR_FUZZ=ON; run by tests/fuzz/run.sh (corpus: tests/onnx's small
 * models). */
#include <stddef.h>
#include <stdint.h>

#include "models/internal.h"
#include "models/onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_net *net = NULL;
    if (gr_net_parse_onnx(data, size, "fuzz.onnx", &net) != GR_OK)
        return 0;
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        for (int k = 0; k < l->n_inputs; k++)
            if (l->inputs[k] >= i)
                __builtin_trap(); /* the IR's invariant: edges point backwards */
        if (l->out.c < 1 || l->out.h < 1 || l->out.w < 1)
            __builtin_trap();
    }
    size_t n_floats = 0;
    if (gr_net_param_floats(net, &n_floats) != GR_OK || n_floats != net->n_weight_floats)
        __builtin_trap();
    int heads[8];
    if (gr_net_heads(net, heads, 8) < 1)
        __builtin_trap();
    gr_net_free(net);
    return 0;
}
