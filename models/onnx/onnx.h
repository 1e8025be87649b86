/* ONNX import (docs/onnx.md): an ONNX ModelProto -> the same gr_net the Darknet cfg parser makes,
 * mapped onto the existing ops (conv, maxpool, route, shortcut, upsample), so that the planner,
 * the CPU reference and the GPU engine run it unchanged.
 *
 * Built with protobuf-c over Debian's onnx.proto when CMake finds them (GR_ENABLE_ONNX, code in
 * models/onnx/import.c and fold.c); without them models/onnx/none.c refuses every ONNX file with
 * one line naming the packages. models/onnx/detect.c (always built) says whether a file is one. */
#ifndef GR_MODELS_ONNX_H
#define GR_MODELS_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/net.h"

/* Largest ONNX file read (weights included). */
#define GR_ONNX_MAX_BYTES ((size_t)1 << 30)

/* Is `path` an ONNX model? By its extension (".onnx", any case) or, when `head` (the file's first
 * `n` bytes, may be NULL) is given, by content: a protobuf whose first field is ModelProto's
 * ir_version (byte 0x08), which no text cfg starts with. */
bool gr_onnx_is_model(const char *path, const uint8_t *head, size_t n);
/* The same, reading the file's first byte (false when it cannot be read). */
bool gr_onnx_is_model_file(const char *path);

/* Parse an ONNX model (weights from its initializers) into a net. `source` names it in messages.
 * GR_ERR_UNSUPPORTED in a build without ONNX import. */
gr_status gr_net_parse_onnx(const uint8_t *data, size_t len, const char *source, gr_net **out);
gr_status gr_net_load_onnx(const char *path, gr_net **out);

#endif
