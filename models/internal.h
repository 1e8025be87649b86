/* Helpers shared by the files of models/ (not part of any other module's contract).
 *
 * The weight block of a network is laid out exactly in Darknet's .weights file order (layers in
 * cfg order; conv: biases, [scales, rolling_mean, rolling_variance], weights; connected: biases,
 * weights, [scales, rolling_mean, rolling_variance]), so loading a file is one read into the block
 * and saving one write out of it. */
#ifndef GR_MODELS_INTERNAL_H
#define GR_MODELS_INTERNAL_H

#include <stddef.h>

#include "models/net.h"

/* Parameter floats of layer `layer` (0 for parameter-free layers). When `base` is not NULL, also
 * points `w` into base in file order. The parser has bounded every layer's count, so this cannot
 * overflow for a parsed net. */
size_t gr_layer_param_floats(const gr_net *net, int layer, float *base, gr_weights *w);

/* Total parameter floats of the net (checked sum). */
gr_status gr_net_param_floats(const gr_net *net, size_t *n_floats);

/* Free the net's current weight block (if any, and its own) and make `block` (n_floats, laid out
 * as above, malloc'd) the net's weights; every conv / connected layer's gr_weights points into it
 * afterwards. */
void gr_net_attach_weights(gr_net *net, float *block, size_t n_floats);

/* True on a little-endian host (the only kind whose memory layout matches .weights files). */
int gr_host_is_little_endian(void);

#endif
