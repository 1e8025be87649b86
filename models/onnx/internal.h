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
enum { ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9,
       ONNX_DOUBLE = 11 };

/* A constant tensor: float32 values (is_float) or integers (int64, also int32 and bool), row
 * major. A rank-0 tensor (a scalar) has ndim 0 and n 1. */
typedef struct onnx_const {
    int ndim;
    int64_t dims[ONNX_MAX_RANK];
    size_t n;
    int is_float;
    float *f;
    int64_t *i;
    int dtype; /* the ONNX data type it was read as (an initializer or Constant), else 0 */
} onnx_const;

void onnx_const_free(onnx_const *k);
/* A new constant of the given shape, values zero. GR_ERR_LIMIT past ONNX_MAX_FOLD_ELEMS (when
 * `limit`) or GR_MAX_TENSOR_ELEMS; messages go to `why`. */
gr_status onnx_const_alloc(onnx_const *k, int ndim, const int64_t *dims, int is_float, int limit,
                           char *why, size_t why_len);
/* A TensorProto (initializer or Constant attribute) as a constant: float32, int64, int32, int8,
 * uint8 (the last two: Q/DQ's integers and zero points) or bool,
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

/* ---- explicit Q/DQ (models/onnx/qdq.c, docs/onnx.md "Explicit Q/DQ") ---------------------- */

/* A QuantizeLinear / DequantizeLinear node's parameters, checked. */
typedef struct onnx_qdq_params {
    int dtype;          /* ONNX_INT8 or ONNX_UINT8 (Q's output, DQ's input); DQ on constants
                           also ONNX_INT32 */
    int axis;           /* -1: per tensor; else the per-axis scales' axis (non-negative) */
    size_t n;           /* scales (1 per tensor) */
    const float *scale; /* [n], finite and > 0 */
    const int64_t *zp;  /* [n] or NULL (0) */
    int symmetric;      /* zero points 0 (int8) or 128 (uint8) */
} onnx_qdq_params;

/* Reads and checks a Q (`quantize`) or DQ node's scale and zero point (`scale`, `zp` may be NULL:
 * absent) for input x of rank `rank` with dims `dims`. `activation`: x is a computed tensor, whose
 * int8 graphrun keeps symmetric and per tensor. GR_ERR_UNSUPPORTED / GR_ERR_PARSE with `why`. */
gr_status onnx_qdq_read(const Onnx__NodeProto *node, int opset, bool quantize, bool activation,
                        const onnx_const *scale, const onnx_const *zp, int x_dtype, int rank,
                        const int64_t *dims, onnx_qdq_params *p, char *why, size_t why_len);
/* Q or DQ of a constant (ONNX's arithmetic: q = saturate(rint(x / s) + zp), x = (q - zp) * s). */
gr_status onnx_qdq_fold(bool quantize, const onnx_const *x, const onnx_qdq_params *p,
                        onnx_const *out, char *why, size_t why_len);
/* The activation range graphrun's int8 uses for scale s: r with r / 127 == s in float. */
float onnx_qdq_range(float s);
/* The per-output-channel scales (`filters`) of conv weights `w` (the layer's, after anything the
 * importer folded into them) that a DQ with params `p` gave as `dq` (its float output): the
 * file's scales, times |f| where a batch norm or constant factor f was folded in. False (nothing
 * written) when the weights are not the file's integers times those scales. */
bool onnx_qdq_weight_scales(const onnx_qdq_params *p, const onnx_const *dq, const float *w,
                            int filters, float *scales);

static inline const char *onnx_str(const char *s) { return s ? s : ""; }

#endif
