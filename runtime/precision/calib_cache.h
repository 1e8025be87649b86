/* INT8 calibration cache: the per-layer activation ranges of a model, keyed by a hash of the
 * network (layer parameters and every weight), the calibration method with its parameter, and a
 * hash of the calibration image set (file names, sizes and contents), so a later build of the same
 * model skips calibration and a changed model, method or image set is rejected with a message.
 * Text format:
 *   graphrun-calibration 2
 *   model <name> <64-bit hash, hex>
 *   method max | percentile <p> | entropy | mse
 *   images <n> <64-bit hash of the image set, hex>
 *   input <range>
 *   layer <index> <range>          (one line per layer)
 * Version 1 (no image-set hash, max/percentile only) is never trusted: it reads as stale and is
 * replaced. */
#ifndef GR_RUNTIME_PRECISION_CALIB_CACHE_H
#define GR_RUNTIME_PRECISION_CALIB_CACHE_H

#include "models/net.h"

typedef struct gr_calib_key {
    uint64_t hash;
    gr_calib_method method;
    float percentile;
    const char *name;
    int n_images;
    uint64_t images_hash;
} gr_calib_key;

/* The key of a network, method and image set (paths[0..n_images)); reads every image file. */
gr_status gr_calib_key_make(const gr_net *net, gr_calib_method method, float percentile,
                            const char *const *paths, int n_images, gr_calib_key *key);

/* A missing file sets *found = 0 and succeeds; so does a version-1 file, with a one-line notice
 * in `notice` (else notice[0] = 0). A file for another model, method or image set, or a
 * malformed one, is an error naming the file and line (delete it or pass another path). */
gr_status gr_calib_cache_read(const char *path, const gr_calib_key *key, int n_layers,
                              float *layer_range, float *input_range, int *found, char *notice,
                              size_t notice_len);
gr_status gr_calib_cache_write(const char *path, const gr_calib_key *key, int n_layers,
                               const float *layer_range, float input_range);

#endif
