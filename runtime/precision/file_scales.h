/* INT8 ranges a model file states itself (ONNX Q/DQ: gr_net_qdq, models/net.h), for the engine
 * build (runtime/engine_internal.h gr_file_ranges) and the tools that trace int8 layer by layer
 * (graphrun compare --per-layer). docs/onnx.md "Explicit Q/DQ". */
#ifndef GR_RUNTIME_PRECISION_FILE_SCALES_H
#define GR_RUNTIME_PRECISION_FILE_SCALES_H

#include "models/net.h"

/* The ranges of net->qdq into range[n_layers] and *input_range: the file's, and for a layer
 * without one that holds its inputs' stored values (maxpool, upsample, route) the largest of its
 * inputs'. A layer computing in int8 (map[i], or prec without a map) left without one is
 * refused (GR_ERR_UNSUPPORTED, naming it); the input without one gets 1. *mixed (may be NULL):
 * the first layer that joins tensors the file quantizes with different scales (a concat, a
 * maxpool: graphrun's int8 gives them one), -1 when none. */
gr_status gr_net_file_ranges(const gr_net *net, const gr_precision *map, gr_precision prec,
                             float *range, float *input_range, int *mixed);

#endif
