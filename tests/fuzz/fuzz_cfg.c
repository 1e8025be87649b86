/* libFuzzer harness: the Darknet .cfg parser on arbitrary bytes. Whatever the bytes, gr_net_parse
 * returns a status (never crashes, leaks or hits UB), and a network it accepts has backward edges
 * and a weights size that can be computed. Built with -DGR_FUZZ=ON; run by tests/fuzz/run.sh. */
#include <stddef.h>
#include <stdint.h>

#include "models/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_net *net = NULL;
    if (gr_net_parse((const char *)data, size, "fuzz.cfg", &net) != GR_OK)
        return 0;
    for (int i = 0; i < net->n_layers; i++)
        for (int k = 0; k < net->layers[i].n_inputs; k++)
            if (net->layers[i].inputs[k] >= i)
                __builtin_trap(); /* the IR's invariant: edges point backwards */
    int heads[8];
    (void)gr_net_heads(net, heads, 8);
    (void)gr_net_weights_file_size(net, 20);
    gr_net_free(net);
    return 0;
}
