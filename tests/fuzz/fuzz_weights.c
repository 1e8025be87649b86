/* libFuzzer harness: the .weights loader on arbitrary bytes against one small fixed network
 * (conv with batch norm, maxpool, conv without, region head), parsed once. Accepted weights, NaN
 * and Inf included, then go through the whole CPU engine: forward pass and detection decoding. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/net.h"
#include "runtime/engine_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 8x8x3 input; filters of the last conv = num * (coords + 1 + classes) = 1 * (4 + 1 + 2). */
static const char small_cfg[] = "[net]\nwidth=8\nheight=8\nchannels=3\n"
                                "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\n"
                                "pad=1\nactivation=leaky\n"
                                "[maxpool]\nsize=2\nstride=2\n"
                                "[convolutional]\nfilters=7\nsize=1\nstride=1\nactivation=linear\n"
                                "[region]\nanchors=1.5,2.5\nclasses=2\ncoords=4\nnum=1\nsoftmax=1\n";

static gr_net *small_net(void)
{
    static gr_net *net;
    if (!net && gr_net_parse(small_cfg, sizeof small_cfg - 1, "small.cfg", &net) != GR_OK)
        __builtin_trap(); /* the harness's own cfg must parse */
    return net;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_net *net = small_net();
    if (gr_net_load_weights_mem(net, data, size, "fuzz.weights") != GR_OK)
        return 0;
    gr_model model = {net, 0};
    gr_engine_options opt;
    gr_engine_options_default(&opt);
    opt.device = GR_DEVICE_CPU;
    gr_engine *engine = NULL;
    if (gr_engine_build(&model, &opt, &engine) != GR_OK)
        __builtin_trap(); /* a tiny valid net always builds */
    float input[3 * 8 * 8];
    for (size_t i = 0; i < sizeof input / sizeof input[0]; i++)
        input[i] = (float)(i % 17) / 16.0f;
    if (gr_engine_run_f32(engine, input) == GR_OK) {
        gr_detect_options dopt;
        gr_detect_options_default(&dopt);
        dopt.thresh = 0.0f; /* decode every box, whatever the weights make of them */
        dopt.image_w = 640;
        dopt.image_h = 480;
        gr_detection *dets = NULL;
        int n = 0;
        if (gr_engine_detect(engine, 0, &dopt, &dets, &n) == GR_OK)
            gr_detections_free(dets);
    }
    gr_engine_destroy(engine);
    return 0;
}
