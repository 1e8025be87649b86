/* The network IR: Darknet's layer list after parsing, with shapes inferred and (optionally)
 * weights attached. models/ knows Darknet's file formats and nothing of CUDA.
 *
 * Invariants after a successful gr_net_parse*:
 *   - layers[i].inputs[k] < i (edges point backwards; -1 is the network input), so list order is
 *     a topological order;
 *   - every layer's `out` shape was inferred by its op's infer() from its inputs' shapes;
 *   - weights pointers are NULL until gr_net_load_weights*() or gr_net_synthesize_weights(). */
#ifndef GR_MODELS_NET_H
#define GR_MODELS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

typedef struct gr_layer {
    gr_op_params p;
    int n_inputs;
    int inputs[GR_MAX_INPUTS]; /* producing layer indices in order; -1 = the network input */
    gr_shape out;              /* per image */
    gr_weights w;              /* conv / connected only */
    int cfg_line;              /* line of the [section] header in the cfg, 1-based */
} gr_layer;

/* int8 quantization a model file states itself (an ONNX graph's QuantizeLinear/DequantizeLinear
 * pairs, models/onnx/qdq.c; docs/onnx.md "Explicit Q/DQ"): per layer, the activation range of
 * its output (scale * 127, the range calibration would give; 0: none), the network input's, and
 * per conv the per-output-channel weight scales of its int8 weights (NULL: none; then the
 * planner's own max|w|/127). Owned by the net (gr_net_free); models/qdq.c. */
typedef struct gr_net_qdq {
    int n_layers;
    float input_range;   /* 0: the file quantizes no network input */
    float *range;        /* [n_layers], 0 = none */
    float **wscale;      /* [n_layers], each NULL or [n_wscale[i]] (the conv's filters) */
    int *n_wscale;       /* [n_layers] */
    int n_ranges;        /* tensors whose range is the file's (the input included) */
    int n_wscaled;       /* convs whose int8 weights are the file's */
} gr_net_qdq;

gr_net_qdq *gr_net_qdq_new(int n_layers);
void gr_net_qdq_free(gr_net_qdq *q);
/* A deep copy (NULL in, NULL out); GR_ERR_OUT_OF_MEMORY. */
gr_status gr_net_qdq_clone(const gr_net_qdq *src, gr_net_qdq **out);

#define GR_NET_NAME_LEN 64
#define GR_NET_MAX_OUTPUTS 8 /* a network's outputs without a detection head (ONNX) */

typedef struct gr_net {
    char name[GR_NET_NAME_LEN]; /* built-in name or cfg file name */
    int w, h, c;                /* network input */
    int n_layers;
    gr_layer *layers;
    float *weight_block;        /* every layer's gr_weights points into this one block */
    size_t n_weight_floats;
    int weights_borrowed;       /* weight_block is not the net's: it points into read-only memory
                                   its lender keeps alive and unchanged longer than the net (a
                                   file-loaded engine's mapped file, runtime/engine_file.c), and
                                   gr_net_free leaves it; else the net owns (malloc'd) it */
    int synthetic;              /* weights were generated, not loaded */
    char **class_names;         /* NULL or n_class_names strings */
    int n_class_names;
    size_t nonfinite_weights;   /* NaN/Inf among loaded weights (counted by gr_model_load) */
    char load_notice[512];      /* gr_model_notice(): one line, e.g. about those weights */
    int n_outputs;              /* 0: the outputs are the heads (gr_net_heads); else the layers
                                   output_layers[0..n_outputs) (an ONNX graph's outputs) */
    int output_layers[GR_NET_MAX_OUTPUTS];
    struct gr_onnx_tail *tail;  /* an ONNX detection head run on the host after the outputs
                                   (models/onnx/tail.h; shared by copies), else NULL */
    gr_preprocess preprocess;   /* LETTERBOX or STRETCH (gr_model_preprocess): the cfg's Darknet's
                                   (models/parse.c); an engine's copy: the engine's */
    gr_net_qdq *qdq;            /* NULL, or the file's own int8 scales (ONNX Q/DQ) */
} gr_net;

/* Shape of input k of layer i (the network input for -1). */
gr_shape gr_net_input_shape(const gr_net *net, int layer, int k);

/* Parse cfg text. `source` names the file in messages ("yolov2-tiny-voc.cfg:17: ..."). */
gr_status gr_net_parse(const char *text, size_t len, const char *source, gr_net **out);
gr_status gr_net_parse_file(const char *path, gr_net **out);
void gr_net_free(gr_net *net);

/* Exact size in bytes of a weights file for this net with a header of `header_bytes` (16 or 20). */
size_t gr_net_weights_file_size(const gr_net *net, size_t header_bytes);

/* Load Darknet weights (header versions with 32- and 64-bit 'seen'). A truncated or oversized file
 * is an error naming expected and found byte counts. */
gr_status gr_net_load_weights(gr_net *net, const char *path);
gr_status gr_net_load_weights_mem(gr_net *net, const uint8_t *data, size_t len, const char *source);
/* NaN and Inf among the weights (0 without weights); *first_layer: the first layer holding one,
 * -1 if none. */
size_t gr_net_count_nonfinite_weights(const gr_net *net, int *first_layer);

/* Write the net's weights as a Darknet .weights file (header version 0.2.0, seen = 0). */
gr_status gr_net_save_weights(const gr_net *net, const char *path);

/* Deterministic synthetic weights from `seed` (see models/synthetic.c for the statistics). */
gr_status gr_net_synthesize_weights(gr_net *net, uint64_t seed);

/* The network a command line names (tools/: plan, compare's per-layer trace): an ONNX file
 * (`cfg`, or `model` ending in .onnx; models/onnx/onnx.h) with its own weights (`weights` refused);
 * else the cfg file or built-in `model` with the Darknet weights file `weights`, or synthetic
 * weights from `seed`. */
gr_status gr_net_open(const char *model, const char *cfg, const char *weights, uint64_t seed,
                      gr_net **out);

/* Built-in models: cfg and class names compiled into the library. */
const char *const *gr_net_builtin_names(void);
gr_status gr_net_builtin(const char *name, gr_net **out);
/* File name (in the data directory) of a built-in model's bundled trained weights, or NULL when
 * it has none (its default weights are then synthetic). */
const char *gr_net_builtin_weights(const char *name);
/* Load class names, one per line (blank lines ignored). */
gr_status gr_net_load_class_names(gr_net *net, const char *path);
gr_status gr_net_set_class_names_text(gr_net *net, const char *text, size_t len, const char *source);

/* Binary form of the whole network (layers, shapes, weights, class names, notice; then its
 * outputs, the detection head run on the host and the file's int8 scales) for saved
 * engines (models/net_file.c). gr_net_write appends to b; gr_net_read checks everything as the
 * parser would (parameters, edges, shapes inferred again, the weight count) and refuses with the
 * layer and field that differ, naming `source`. The weight floats start at a multiple of
 * GR_NET_WEIGHT_ALIGN bytes from the start of b (zero bytes before them, checked on reading), so
 * a file that begins with b and is mapped holds them aligned. */
#define GR_NET_WEIGHT_ALIGN 64
struct gr_bytes;
struct gr_reader;
gr_status gr_net_write(const gr_net *net, struct gr_bytes *b);
/* borrow_weights: when set and the floats are float-aligned in r's buffer, the net's weights are
 * that buffer's bytes (weights_borrowed; the caller keeps the buffer alive and unchanged longer
 * than the net), not a copy. with_outputs: the record ends with the outputs, head and Q/DQ
 * section gr_net_write writes (engine file format 5 on; without it, as format 3 and 4 wrote it:
 * a network without them). The head (models/onnx/tail.h) is rebuilt through its builder and
 * checked as an imported one; its inputs must be the outputs. */
gr_status gr_net_read(struct gr_reader *r, const char *source, int borrow_weights,
                      int with_outputs, gr_net **out);

/* What the parser refuses with GR_ERR_UNSUPPORTED (README "What graphrun refuses" lists the
 * same, tests/test_cfg.c checks both ways): a whole section (key NULL), or a key of `section`
 * ("any layer" for every layer) accepted only at `accepted`. Fills at most `max` entries and
 * returns how many there are. */
typedef struct gr_cfg_refusal {
    const char *section;
    const char *key;
    char accepted[24];
} gr_cfg_refusal;
int gr_cfg_refusals(gr_cfg_refusal *out, int max);

/* Output heads: layer indices whose outputs are the network's raw outputs (the input of each
 * region/yolo layer; without a head, output_layers when n_outputs is set, else the last layer).
 * Returns the count (<= max). */
int gr_net_heads(const gr_net *net, int *head_layers, int max);
/* The region/yolo layer that decodes head k, or -1 when the net has no detection head. */
int gr_net_head_decoder(const gr_net *net, int head_index);

#endif
