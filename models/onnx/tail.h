/* The host-side "head tail" of an ONNX detection model (docs/onnx.md, "Detection heads"): the
 * nodes between the per-scale head convs (which run as graphrun layers) and the graph's output,
 * kept as a small program of N-D float tensors with ONNX semantics (Reshape, Transpose, Concat,
 * Slice, Softmax, Sigmoid, 1x1 Conv with constant weights, broadcast arithmetic) and run on the
 * host after the engine's output copy, on CPU and GPU engines alike. (A YOLOv8 / YOLO11 head's
 * program is replaced at import by a dfl_head layer and a one-node copy of its output when the
 * two agree: models/onnx/import.c, lower_dfl_head.) Its output is the graph's
 * ([1, 4+nc, A] for YOLOv8 / YOLO11 heads, [1, A, 5+nc] for YOLOv5's), which
 * runtime/detect_tail.c decodes into detections.
 *
 * Built by the importer (models/onnx/head.c) with the builder calls below, or by gr_tail_read
 * from an engine file through the same calls (each node checked by gr_tail_add_node either way);
 * immutable after gr_tail_finish and shared by reference between a net and its copies
 * (gr_net_clone). No protobuf here: the file is built in every configuration (gr_net_free
 * releases a tail). */
#ifndef GR_MODELS_ONNX_TAIL_H
#define GR_MODELS_ONNX_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define GR_TAIL_MAX_RANK 8
#define GR_TAIL_MAX_INPUTS 8 /* the layers it reads: GR_NET_MAX_OUTPUTS */

/* How the graph's output holds boxes (docs/onnx.md): anchor-free [1, 4+nc, A] (cx, cy, w, h in
 * input pixels, then nc class scores; YOLOv8 / YOLO11) or anchor-based [1, A, 5+nc] (cx, cy, w,
 * h, objectness, nc class scores; YOLOv5). */
typedef enum { GR_TAIL_ANCHOR_FREE = 1, GR_TAIL_OBJECTNESS = 2 } gr_tail_layout;

typedef enum {
    GR_TAIL_COPY,      /* same values, other dims (Reshape, Flatten, Squeeze, Unsqueeze) */
    GR_TAIL_TRANSPOSE, /* perm */
    GR_TAIL_CONCAT,    /* axis, 1..GR_TAIL_MAX_ARGS inputs */
    GR_TAIL_SLICE,     /* start, step per axis (output dims given): Slice and Split */
    GR_TAIL_SOFTMAX,   /* over [axis, axis_end) of the dims: opset 13's one axis or the older
                          flattening form */
    GR_TAIL_SIGMOID,
    GR_TAIL_ADD,       /* numpy broadcasting, in float */
    GR_TAIL_SUB,
    GR_TAIL_MUL,
    GR_TAIL_DIV,
    GR_TAIL_POW,
    GR_TAIL_CONV1X1    /* in [N, C, H, W], weights [M, C] (arg 1), bias [M] (arg 2, optional) */
} gr_tail_op;

#define GR_TAIL_MAX_ARGS 16

typedef struct gr_tail_node {
    gr_tail_op op;
    int n_args;
    int args[GR_TAIL_MAX_ARGS]; /* value ids; -1: an omitted optional input */
    int out;                    /* value id */
    int axis, axis_end;
    int64_t perm[GR_TAIL_MAX_RANK];  /* TRANSPOSE */
    int64_t start[GR_TAIL_MAX_RANK]; /* SLICE */
    int64_t step[GR_TAIL_MAX_RANK];
} gr_tail_node;

typedef struct gr_onnx_tail gr_onnx_tail;

/* ---- building (the importer) ------------------------------------------------------------- */
gr_onnx_tail *gr_tail_new(void);
/* A value read from graphrun layer `layer` (the tail's inputs, and so the net's outputs, are the
 * layers in the order first asked), with the dims ONNX sees it in. Returns the value id (the
 * same one for the same layer and dims), or -1 with a message past GR_TAIL_MAX_INPUTS. */
int gr_tail_input(gr_onnx_tail *t, int layer, int ndim, const int64_t *dims);
/* A constant (the floats copied); -1 on out of memory / limit. */
int gr_tail_const(gr_onnx_tail *t, int ndim, const int64_t *dims, const float *data);
/* A computed value of these dims; -1 past the limits (message set). */
int gr_tail_value(gr_onnx_tail *t, int ndim, const int64_t *dims);
/* Append a node (its out value made by gr_tail_value): GR_ERR_LIMIT / OUT_OF_MEMORY, and
 * GR_ERR_INVALID_ARGUMENT for a node gr_tail_run could not run - an argument neither an input, a
 * constant nor a value an earlier node computed, an output value already computed, or dims,
 * axes, perm, start or step that do not follow from the arguments' dims (models/onnx/head.c
 * makes none such; a tail read from an engine file is checked by the same call). */
gr_status gr_tail_add_node(gr_onnx_tail *t, const gr_tail_node *node);
/* Dims of value `id`; returns its rank. */
int gr_tail_dims(const gr_onnx_tail *t, int id, int64_t *dims);
/* The graph output is value `id`: recognise its layout and class count from its dims. A message
 * naming the dims (GR_ERR_UNSUPPORTED) when it is not a detection head's output. */
gr_status gr_tail_finish(gr_onnx_tail *t, int id, const char *name);

/* ---- sharing ----------------------------------------------------------------------------- */
gr_onnx_tail *gr_tail_retain(gr_onnx_tail *t);
void gr_tail_release(gr_onnx_tail *t);

/* ---- engine files (models/net_file.c) ---------------------------------------------------- */
/* A finished tail's record (values in order: kind, dims, an input's layer, a constant's floats;
 * then the nodes; then the output's value id) appended to b. */
struct gr_bytes;
struct gr_reader;
void gr_tail_write(const gr_onnx_tail *t, struct gr_bytes *b);
/* The tail of a record gr_tail_write made, rebuilt through the builder calls above (so checked
 * as an imported tail is) and finished; each input's values count must be layer_elems[layer]
 * (the per-image values of that layer of the network, n_layers of them). A record that fails
 * (a short read included) is GR_ERR_PARSE with one line naming `source`, the value or node,
 * and "file corrupt". */
gr_status gr_tail_read(struct gr_reader *r, const char *source, const size_t *layer_elems,
                       int n_layers, gr_onnx_tail **out);

/* ---- running ----------------------------------------------------------------------------- */
/* The layers it reads, in input order (the net's output layers). */
int gr_tail_input_count(const gr_onnx_tail *t);
int gr_tail_input_layer(const gr_onnx_tail *t, int k);
gr_tail_layout gr_tail_get_layout(const gr_onnx_tail *t);
int gr_tail_classes(const gr_onnx_tail *t);
/* The output's dims (rank returned) and element count. */
int gr_tail_output_dims(const gr_onnx_tail *t, int64_t *dims);
size_t gr_tail_output_elems(const gr_onnx_tail *t);
/* The input whose values are the output as they are (a tail of one copy node, what a dfl_head
 * layer leaves: models/onnx/import.c), so callers may read it instead of running the tail; -1
 * for any other tail. */
int gr_tail_passthrough_input(const gr_onnx_tail *t);
/* Floats of scratch gr_tail_run needs (the output included). */
size_t gr_tail_scratch_floats(const gr_onnx_tail *t);
/* Run on one image: inputs[k] = that image's part of input k (gr_tail_input order). Returns
 * where the output is inside `scratch`. */
const float *gr_tail_run(const gr_onnx_tail *t, const float *const *inputs, float *scratch);

#endif
