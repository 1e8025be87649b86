/* INT8 calibration cache: the per-layer activation ranges of a model, keyed by a hash of the
 * network (layer parameters and every weight) and the calibration method, so a later build of the
 * same model skips calibration and a changed model is rejected with a message. Text format:
 *   graphrun-calibration 1
 *   model <name> <64-bit hash, hex>
 *   method max | percentile <p>
 *   images <n>
 *   input <range>
 *   layer <index> <range>          (one line per layer)
 */
#ifndef GR_RUNTIME_CALIB_CACHE_H
#define GR_RUNTIME_CALIB_CACHE_H

#include "models/net.h"

typedef struct gr_calib_key {
    uint64_t hash;
    gr_calib_method method;
    float percentile;
    const char *name;
} gr_calib_key;

gr_calib_key gr_calib_key_make(const gr_net *net, gr_calib_method method, float percentile);

/* A missing file sets *found = 0 and succeeds. A file for another model or method, or a
 * malformed one, is an error naming the file and line (delete it or pass another path). */
gr_status gr_calib_cache_read(const char *path, const gr_calib_key *key, int n_layers,
                              float *layer_range, float *input_range, int *found);
gr_status gr_calib_cache_write(const char *path, const gr_calib_key *key, int n_layers,
                               const float *layer_range, float input_range, int n_images);

#endif
