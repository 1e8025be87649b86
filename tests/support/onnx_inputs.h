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

/* Two engines of one model that have both run on the same input: every output, the graph output
 * (gr_engine_graph_output) and the detections (thresh 0.25, NMS 0.45) bit for bit, else fails the
 * running Check test naming `what`; returns the detections' count. (Saved and loaded engines,
 * CPU and GPU: test_engine_file_onnx, test_gpu_engine_file.) */
int gr_test_expect_same_results(const gr_engine *a, const gr_engine *b, const char *what);

#endif
