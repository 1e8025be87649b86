/* Shared by models/onnx/import.c (graph -> layers) and fold.c (constants): the constant tensor
 * that shape subgraphs and initializers become, and the node attribute readers. Needs the
 * protobuf-c code that CMake generates from onnx.proto into the build directory. */
#ifndef GR_MODELS_ONNX_INTERNAL_H
#define GR_MODELS_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "onnx.pb-c.h"

#define ONNX_MAX_RANK 8
/* Largest constant a node folds (shape subgraphs are tiny; a ConstantOfShape or Range that asks
 * for more is refused rather than allocated). */
#define ONNX_MAX_FOLD_ELEMS ((size_t)1 << 24)

/* ONNX TensorProto.DataType values the importer reads. */
enum { ONNX_FLOAT = 1, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 };

/* A constant tensor: float32 values (is_float) or integers (int64, also int32 and bool), row
 * major. A rank-0 tensor (a scalar) has ndim 0 and n 1. */
typedef struct onnx_const {
    int ndim;
    int64_t dims[ONNX_MAX_RANK];
    size_t n;
    int is_float;
    float *f;
    int64_t *i;
} onnx_const;

void onnx_const_free(onnx_const *k);
/* A new constant of the given shape, values zero. GR_ERR_LIMIT past ONNX_MAX_FOLD_ELEMS (when
 * `limit`) or GR_MAX_TENSOR_ELEMS; messages go to `why`. */
gr_status onnx_const_alloc(onnx_const *k, int ndim, const int64_t *dims, int is_float, int limit,
                           char *why, size_t why_len);
/* A TensorProto (initializer or Constant attribute) as a constant: float32, int64, int32 or bool,
 * stored inline or as raw_data; anything else (external data, other types) refused in `why`. */
gr_status onnx_const_from_tensor(const Onnx__TensorProto *t, onnx_const *k, char *why,
                                 size_t why_len);
/* Value i as an integer (floats truncated). */
int64_t onnx_const_int(const onnx_const *k, size_t i);

/* Fold a node whose inputs are all constants (NULL for an omitted optional input). Returns
 * GR_ERR_UNSUPPORTED with `why` for an op or form it cannot fold. */
gr_status onnx_fold(const Onnx__NodeProto *node, int opset, const onnx_const *const *in, int n_in,
                    onnx_const *out, char *why, size_t why_len);

/* How deep messages may nest in a file (ModelProto is level 0); real models use about 10. */
#define ONNX_MAX_NESTING 64
/* False when the file's messages nest deeper (models/onnx/wire.c: protobuf-c's unpacker would
 * recurse without limit). */
bool onnx_nesting_ok(const uint8_t *data, size_t len);

/* Node attributes: NULL / the default when absent. */
const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *node, const char *name);
int64_t onnx_attr_int(const Onnx__NodeProto *node, const char *name, int64_t fallback);
float onnx_attr_float(const Onnx__NodeProto *node, const char *name, float fallback);
/* A string attribute compared with `value` (true when absent and `value` is `fallback`). */
const char *onnx_attr_string(const Onnx__NodeProto *node, const char *name, char *buf, size_t n,
                             const char *fallback);
/* An ints attribute: its count (0 when absent), values in *ints. */
size_t onnx_attr_ints(const Onnx__NodeProto *node, const char *name, const int64_t **ints);

static inline const char *onnx_str(const char *s) { return s ? s : ""; }

#endif
