/* ONNX nodes -> the host-side head tail (models/onnx/tail.h), and the file's metadata_props
 * (names, imgsz, stride). Called by the importer (models/onnx/import.c) for every node that reads
 * a tail tensor, and for the nodes on graphrun layers that no layer runs (a Reshape to another
 * shape, a Transpose, a Concat off the channels...): docs/onnx.md, "Detection heads". */
#ifndef GR_MODELS_ONNX_HEAD_H
#define GR_MODELS_ONNX_HEAD_H

#include "models/net.h"
#include "models/onnx/internal.h"
#include "models/onnx/tail.h"

/* One input of a node as the importer holds it. */
typedef enum { HEAD_IN_NONE, HEAD_IN_CONST, HEAD_IN_TAIL, HEAD_IN_LAYER } head_in_kind;

typedef struct head_in {
    head_in_kind kind;
    const onnx_const *k; /* CONST */
    int id;              /* TAIL: the tail value */
    int layer;           /* LAYER: the layer (never the network input) */
    int ndim;            /* LAYER: its ONNX dims ([1, C, H, W] or [1, C*H*W]) */
    int64_t dims[4];
} head_in;

/* Does the tail run this op (on computed tensors)? Does it start a head on layers' outputs (the
 * data-moving ops: Reshape, Transpose, Concat, Split, Slice, Softmax, ...)? */
bool onnx_head_runs(const char *op);
bool onnx_head_starts(const char *op);

/* Add the node to *tail (made on first use). out_ids[k]: the tail value of output k (-1 for an
 * omitted output). GR_ERR_UNSUPPORTED / LIMIT with the reason in `why` (the caller prefixes the
 * node). */
gr_status onnx_head_node(gr_onnx_tail **tail, const Onnx__NodeProto *node, int opset,
                         const head_in *in, int n_in, int *out_ids, char *why, size_t why_len);

/* Shape of a tail value as a constant (start, end attributes). */
gr_status onnx_head_shape(const gr_onnx_tail *tail, int id, const Onnx__NodeProto *node,
                          onnx_const *out, char *why, size_t why_len);

/* Ultralytics' metadata_props: `names` (a Python dict literal {0: 'person', ...} or a list) as
 * the net's class names, `imgsz` and `stride` checked against the input. A malformed or
 * contradicting entry is one line in net->load_notice and is otherwise ignored. */
void onnx_head_metadata(const Onnx__ModelProto *model, gr_net *net, const char *source);

#endif
