/* INT8 calibration cache: the per-layer activation ranges of a model, keyed by a hash of the
 * network (layer parameters and every weight), the calibration method with its parameter, and a
 * hash of the calibration image set (file names, sizes and contents), so a later build of the same
 * model skips calibration and a changed model, method or image set is rejected with a message.
 * Text format, every line required, in this order:
 *   graphrun-calibration 3
 *   model <name> <64-bit hash, hex>
 *   method max | percentile <p> | entropy | mse
 *   images <n> <64-bit hash of the image set, hex>
 *   input <range>                  (in [GR_CALIB_INPUT_MIN, 1])
 *   layer <index> <range>          (one line per layer, 0..n-1, in [GR_CALIB_RANGE_MIN, _MAX])
 *   checksum <FNV-1a 64 of every byte before this line, hex>
 * Versions 1 and 2 (no checksum; version 1 no image-set hash) are never trusted: they read as stale
 * and are replaced. A version-3 file that fails its checksum or holds a missing, repeated,
 * malformed or out-of-range line reads as corrupt: also replaced, with a notice naming file:line.
 * Why the bounds (docs/calibration.md): a range is a max |activation|; the input is the letterboxed
 * image, v / 255 for uint8 pixels, so its range is k / 255 with 1 <= k <= 255 (0 only for an
 * all-black set: written as 1, which the planner treats the same). */
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

/* The key of a network, its input's preprocessing, method and image set (paths[0..n_images));
 * reads every image file. */
gr_status gr_calib_key_make(const gr_net *net, gr_preprocess how, gr_calib_method method,
                            float percentile, const char *const *paths, int n_images,
                            gr_calib_key *key);

#define GR_CALIB_INPUT_MIN (1.0f / 255.0f)
#define GR_CALIB_RANGE_MIN 1e-6f
#define GR_CALIB_RANGE_MAX 1e9f
#define GR_CALIB_CACHE_MAX_BYTES (16u << 20)

/* A missing file sets *found = 0 and succeeds; so does a stale (version 1 or 2) or corrupt one,
 * with a one-line notice in `notice` naming file:line and the problem (else notice[0] = 0): the
 * caller calibrates again and replaces it. A file for another model, method or image set, a
 * newer version, or one that is not a calibration cache at all (first line), is GR_ERR_PARSE
 * naming the file and line (delete it or pass another path): it is never overwritten. */
gr_status gr_calib_cache_read(const char *path, const gr_calib_key *key, int n_layers,
                              float *layer_range, float *input_range, int *found, char *notice,
                              size_t notice_len);
/* The same on a cache's bytes (text[0..len), no NUL needed); `origin` names it in messages. */
gr_status gr_calib_cache_parse(const char *origin, const char *text, size_t len,
                               const gr_calib_key *key, int n_layers, float *layer_range,
                               float *input_range, int *found, char *notice, size_t notice_len);
/* Writes version 3 with its checksum; a range of exactly 0 (no non-zero value seen) is written as
 * 1, which gets the same int8 scale from the planner (planner/plan.c). */
gr_status gr_calib_cache_write(const char *path, const gr_calib_key *key, int n_layers,
                               const float *layer_range, float input_range);

#endif
