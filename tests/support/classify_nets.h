/* Darknet's ImageNet classifiers (models/darknet19.cfg, models/resnet18.cfg) for the classifier
 * suites: loading at a chosen input size, the bundled photos letterboxed, and the measures the
 * suites compare outputs with (NRMSE, top-k). */
#ifndef GR_TESTS_CLASSIFY_NETS_H
#define GR_TESTS_CLASSIFY_NETS_H

#include <stddef.h>
#include <stdint.h>

#include "graphrun/runtime.h"

/* models/<name>.cfg with its [net] width and height set to side (0 = the cfg's own size), loaded
 * through the public API (a temporary copy of the cfg, removed again) with synthetic weights of
 * `seed`. Run from the source tree's root. */
gr_status gr_test_classifier_at(const char *name, int side, uint64_t seed, gr_model **out);

/* `count` bundled photos (data/dog.jpg, eagle, giraffe, horses, person; count <= 5) letterboxed
 * to side x side as uint8 HWC, back to back, in a malloc'd buffer (*out). */
gr_status gr_test_photos_u8(int count, int side, uint8_t **out);

/* sqrt(mean((x - ref)^2)) / (max(ref) - min(ref)); +inf if x holds a non-finite value. */
double gr_test_nrmse(const float *x, const float *ref, size_t n);

/* Indices of the k largest values of p[0..n) in descending order (k <= n, k <= 16). */
void gr_test_top_k(const float *p, int n, int k, int *out);

/* 1 when `id` is among the first k of top[]. */
int gr_test_in_top(const int *top, int k, int id);

#endif
