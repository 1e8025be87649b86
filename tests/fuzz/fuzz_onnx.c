/* libFuzzer harness: the ONNX importer (models/onnx/) on arbitrary bytes. Whatever the bytes,
 * gr_net_parse_onnx returns a status (never crashes, leaks or hits UB), and a network it accepts
 * holds the IR's invariants: backward edges, shapes within limits, and the weight block its
 * layers imply; a detection head it keeps for the host (models/onnx/tail.h) reads the net's
 * output layers and runs on any values of their shapes. Built with -DGR_FUZZ=ON; run by
 * tests/fuzz/run.sh (corpus: tests/onnx's small models). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "models/internal.h"
#include "models/onnx/onnx.h"
#include "models/onnx/tail.h"

/* Run the head on zeros (small nets only: the fuzzer's memory limit). */
static void run_tail(const gr_net *net)
{
    const float *in[GR_TAIL_MAX_INPUTS];
    float *bufs[GR_TAIL_MAX_INPUTS] = {NULL};
    size_t total = gr_tail_scratch_floats(net->tail);
    if (gr_tail_input_count(net->tail) != net->n_outputs)
        __builtin_trap();
    for (int k = 0; k < net->n_outputs; k++) {
        if (gr_tail_input_layer(net->tail, k) != net->output_layers[k])
            __builtin_trap();
        total += gr_shape_elems(net->layers[net->output_layers[k]].out);
    }
    if (total > ((size_t)1 << 22))
        return;
    float *scratch = calloc(gr_tail_scratch_floats(net->tail), sizeof *scratch);
    int ok = scratch != NULL;
    for (int k = 0; k < net->n_outputs; k++) {
        bufs[k] = calloc(gr_shape_elems(net->layers[net->output_layers[k]].out), sizeof(float));
        ok &= bufs[k] != NULL;
        in[k] = bufs[k];
    }
    if (ok)
        gr_tail_run(net->tail, in, scratch);
    for (int k = 0; k < net->n_outputs; k++)
        free(bufs[k]);
    free(scratch);
}

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
    if (net->tail)
        run_tail(net);
    gr_net_free(net);
    return 0;
}
