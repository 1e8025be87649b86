/* The ONNX suites' inputs (tests/onnx/, docs/onnx.md): whether this build imports ONNX, and the
 * recorded inputs as the float tensors PyTorch got. */
#ifndef GR_TESTS_ONNX_INPUTS_H
#define GR_TESTS_ONNX_INPUTS_H

#include <stdbool.h>
#include <stddef.h>

#include "graphrun/runtime.h"

/* False in a build without ONNX import (erf.onnx is then refused with "built without ONNX
 * import"). Run from the source tree's root. */
bool gr_test_have_onnx(void);

/* tests/onnx/<name>: a PNG record (the letterboxed photo: its pixels / 255, NCHW) or a float32
 * .npy tensor, in a malloc'd buffer; fails the running Check test when it cannot be read. */
float *gr_test_onnx_input(const char *name);

/* The engine's outputs after a run, each copied into a malloc'd out[k] of n[k] floats (C x H x
 * W); returns their count, which must be 1 to `max` (else fails the running Check test). */
int gr_test_copy_outputs(const gr_engine *e, float **out, size_t *n, int max);

#endif
