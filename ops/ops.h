/* The op catalogue. For every op kind (ops/ops.def) one file ops/<stem>.c holds all of that op's
 * knowledge: parameter validation and shape rule (infer), cost (cost), row dependence (rows), and
 * a straightforward CPU reference with Darknet's semantics (ref), four hooks on one context
 * (gr_op_ctx, gr_op_hooks below) that callers reach through gr_op_infer/_cost/_rows/_ref. The
 * reference is the oracle every GPU path is checked against: obviously right first, fast enough
 * second.
 *
 * Conventions
 *   - Shapes are per image (c, h, w); a batch of n images is n such tensors back to back.
 *   - The reference works on float32 NCHW tensors. Quantized values are carried as exactly
 *     representable floats (an int8 value q is stored as (float)q).
 *   - infer() validates parameters and input shapes and records a message without file context
 *     (the caller prefixes "file:line: "); it never allocates.
 *   - ref() cannot fail: everything it relies on was checked by infer(). */
#ifndef GR_OPS_OPS_H
#define GR_OPS_OPS_H

#include <stddef.h>

#include "base/base.h"

/* Op properties, the flags column of ops/ops.def. */
enum {
    GR_OPF_STORED_VALUES = 1u << 0, /* the output holds the input's stored values (copies, max):
                                       exact on i8/f16 storage, one int8 scale for both */
    GR_OPF_IN_PLACE = 1u << 1,      /* elementwise: may overwrite its dying first input */
    GR_OPF_HEAD = 1u << 2,          /* a detection head's decoder (region, yolo) */
    GR_OPF_WEIGHTS = 1u << 3,       /* learned weights and bias, a bias/activation epilogue */
    GR_OPF_F32_ONLY = 1u << 4,      /* the planner computes it in f32 whatever the precision */
    GR_OPF_CONVERSION = 1u << 5,    /* a dtype conversion inserted by the planner */
    GR_OPF_GPU_F32 = 1u << 6,       /* the GPU engine has a kernel for it on f32 tensors */
    GR_OPF_GPU_F16 = 1u << 7,       /* ... on f16 tensors (quantize/dequantize: f16 side) */
    GR_OPF_GPU_I8 = 1u << 8         /* ... on i8 tensors (quantize/dequantize: i8 side) */
};

typedef enum gr_op_kind {
#define GR_OP(e, stem, section, flags) GR_OP_##e,
#include "ops/ops.def"
#undef GR_OP
    GR_OP_COUNT
} gr_op_kind;

typedef enum gr_activation {
    GR_ACT_LINEAR = 0,
    GR_ACT_LEAKY,    /* x > 0 ? x : 0.1x */
    GR_ACT_RELU,
    GR_ACT_LOGISTIC, /* 1/(1+exp(-x)) */
    GR_ACT_MISH,     /* x * tanh(softplus(x)) */
    GR_ACT_SWISH,    /* x * logistic(x) */
    /* AlexeyAB Darknet's others (formulas: ops/activation.h) */
    GR_ACT_RELU6,
    GR_ACT_HARD_MISH,
    GR_ACT_ELU,
    GR_ACT_SELU,
    GR_ACT_GELU,
    GR_ACT_TANH,
    GR_ACT_LOGGY,
    GR_ACT_RELIE,
    GR_ACT_RAMP,
    GR_ACT_PLSE,
    GR_ACT_STAIR,
    GR_ACT_HARDTAN,
    GR_ACT_LHTAN,
    GR_ACT_COUNT
} gr_activation;

const char *gr_activation_name(gr_activation a);
/* Parse a Darknet activation name (AlexeyAB's get_activation: "revleaky" is leaky there too);
 * returns false for an unknown one. */
bool gr_activation_parse(const char *name, gr_activation *out);
float gr_activate(float x, gr_activation a);
/* Darknet's two forks compute leaky and logistic in forms a last bit apart: */
typedef enum gr_act_form {
    GR_ACT_FORM_PJREDDIE,      /* .1 * x and 1. / (1. + exp(-x)) in double (gr_activate) */
    GR_ACT_FORM_ALEXEYAB,      /* AlexeyAB's activations.h (activate_array: shortcut, yolo, ...):
                                * .1f * x and 1.f / (1.f + expf(-x)) in float */
    GR_ACT_FORM_ALEXEYAB_CONV, /* AlexeyAB's conv (gemm.c activate_array_cpu_custom, as its
                                * Makefile builds it, AVX=0): leaky .1 * x in double, the rest
                                * as GR_ACT_FORM_ALEXEYAB (its AVX2 build uses 0.1F instead) */
} gr_act_form;
float gr_activate_as(float x, gr_activation a, gr_act_form form);

typedef struct gr_shape {
    int c, h, w;
} gr_shape;

static inline size_t gr_shape_elems(gr_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

#define GR_MAX_INPUTS 8   /* route inputs at most */
/* attention (ops/attention.c): tokens (h x w) at most; one query's scores fit in 16 kB */
#define GR_ATTENTION_MAX_TOKENS 4096

/* A yolo head's NMS (AlexeyAB Darknet's nms_kind; the network's last [yolo] layer picks it for
 * the whole image, as its test_detector does): DEFAULT is do_nms_sort (IoU > thresh); GREEDY
 * ("greedynms") suppresses where IoU - (d^2/c^2)^0.6 > thresh; DIOU ("diounms") where
 * IoU - (d^2/c^2)^beta_nms > thresh (box.c box_diou / box_diounms). */
typedef enum gr_nms_kind { GR_NMS_DEFAULT = 0, GR_NMS_GREEDY, GR_NMS_DIOU } gr_nms_kind;
#define GR_MAX_ANCHORS 16 /* anchor (w, h) pairs of a region/yolo head */

/* Parameters of one op, flat: each op reads the fields its comment names. */
typedef struct gr_op_params {
    gr_op_kind op;
    gr_activation activation; /* conv, connected, shortcut, sam, scale_channels */
    int filters;              /* conv: output channels; connected: outputs */
    int size;                 /* conv kernel size; maxpool window; attention: key_dim; dfl_head:
                                 the DFL bins per box side (reg_max) */
    int stride;               /* conv (horizontal: Darknet's stride_x), maxpool; upsample factor;
                                 reorg block */
    int stride_y;             /* conv: vertical stride (Darknet's stride_y); 0 = stride */
    int dilation;             /* conv: tap spacing (Darknet's dilation); 0 = 1 */
    int pad;                  /* conv: pixels each side; maxpool: total padding (Darknet's
                                 'padding', default size-1) */
    int groups;               /* conv groups; softmax groups; route groups (1 = whole tensor);
                                 attention: heads */
    int group_id;             /* route: which group of each input */
    int scale_wh;             /* scale_channels: 1 = one scale per position, 0 = per channel */
    int batch_normalize;      /* conv, connected */
    int alexeyab;             /* the layer is from an AlexeyAB Darknet cfg (models/parse.c): its
                               * batch norm (gr_bn_denominator; a conv's fused into its weights,
                               * gr_bn_alexeyab_factor) and its float leaky and logistic
                               * (gr_activate_as) in the CPU reference */
    /* region / yolo heads */
    int classes;              /* region, yolo, dfl_head */
    int coords;               /* region: 4 */
    int num;                  /* anchors in the cfg (region: per cell; yolo: total) */
    int n_mask;               /* yolo: anchors used by this head (= channels / (5+classes)) */
    int mask[GR_MAX_ANCHORS]; /* yolo: indices into anchors */
    float anchors[2 * GR_MAX_ANCHORS]; /* region, yolo: (w, h) pairs; dfl_head: anchors[k] is
                                          input k's stride in input pixels (an integer) */
    int softmax;              /* region: softmax over classes (Darknet default 0, cfgs set 1) */
    float scale_x_y;          /* yolo: x, y = v * scale_x_y - (scale_x_y - 1) / 2 (default 1) */
    int new_coords;           /* yolo: 1 = no logistic (the conv has it); w = (2 tw)^2 anchor */
    gr_nms_kind nms_kind;     /* yolo: the NMS its detections get (see gr_nms_kind) */
    float beta_nms;           /* yolo: DIoU-NMS exponent (default 0.6) */
    /* quantize / dequantize (planner-inserted) */
    gr_dtype dtype;           /* the quantized side: GR_DTYPE_I8 or GR_DTYPE_F16 */
    float scale;              /* int8: real = q * scale; unused for f16; attention: the
                                 scores' factor (key_dim^-0.5) */
} gr_op_params;

/* A conv's vertical stride and dilation, their "not set" zeros read as Darknet's defaults. */
static inline int gr_conv_stride_y(const gr_op_params *p) { return p->stride_y > 0 ? p->stride_y : p->stride; }
static inline int gr_conv_dilation(const gr_op_params *p) { return p->dilation > 0 ? p->dilation : 1; }

/* Learned parameters of conv / connected, in Darknet's order and layout. Pointers into one block
 * owned by the network. */
typedef struct gr_weights {
    int n;                     /* output channels / outputs */
    float *biases;             /* [n] */
    float *scales;             /* [n] when batch_normalize, else NULL */
    float *rolling_mean;       /* [n] */
    float *rolling_variance;   /* [n] */
    float *weights;            /* conv: [n][c/groups][size][size]; connected: [n][inputs] */
    size_t n_weights;
} gr_weights;

/* Darknet's batch-norm epsilon: added to the standard deviation, not the variance. */
#define GR_BN_EPSILON 0.000001f
/* AlexeyAB Darknet's: added to the variance (blas.c normalize_cpu, network.c
 * fuse_conv_batchnorm: x / sqrt(var + .00001)). */
#define GR_BN_EPSILON_ALEXEYAB 0.00001

/* The batch-norm divisor of a channel of variance `var`, in double: sqrt(var) + 1e-6 (pjreddie),
 * or sqrt(var + 1e-5) when `alexeyab` (the parser sets p->alexeyab for cfgs of that fork,
 * models/parse.c). */
double gr_bn_denominator(int alexeyab, float var);
/* The form of layer `p` (its p->alexeyab; `conv`: it is a convolution). */
gr_act_form gr_act_form_of(const gr_op_params *p, bool conv);
/* AlexeyAB Darknet folds batch norm into the weights when it loads a network for inference
 * (network.c fuse_conv_batchnorm): weight * factor rounded to float, and the bias below, both in
 * its double arithmetic; its forward pass then adds the bias to the convolution's sum. */
double gr_bn_alexeyab_factor(const gr_weights *w, int oc);
float gr_bn_alexeyab_fused_bias(const gr_weights *w, int oc);

/* Per-image cost. Bytes are element counts; multiply by the dtype size in use. */
typedef struct gr_cost {
    double flops;       /* 2 x multiply-adds, plus elementwise work */
    double in_elems;    /* elements read from inputs */
    double out_elems;   /* elements written */
    size_t n_params;    /* learned parameters (biases, BN, weights) */
    size_t n_weights;   /* of which the weight tensor */
} gr_cost;

/* What each of an op's hooks receives, one struct instead of a fixed 8-9 parameter list: the op's
 * parameters (p->op is its kind), its inputs' shapes and its output's, and for ref the tensors. */
typedef struct gr_op_ctx {
    const gr_op_params *p;
    const gr_shape *in;       /* [n_in] per-image input shapes */
    int n_in;
    gr_shape out;             /* per-image output shape (unset, zero, in infer) */
    /* ref only */
    const gr_weights *w;      /* learned weights (GR_OPF_WEIGHTS ops); NULL or empty otherwise */
    const float *const *src;  /* [n_in] inputs, `batch` images each */
    float *dst;               /* the output, `batch` images */
    int batch;
} gr_op_ctx;

/* An op's hooks: ops/<stem>.c fills gr_op_<stem>_hooks with its file-local functions. */
typedef struct gr_op_hooks {
    /* Validate p and the input shapes, store the output shape (never allocates). */
    gr_status (*infer)(const gr_op_ctx *c, gr_shape *out);
    /* Called on a cost already holding the data movement (in_elems: every input's elements,
     * out_elems: the output's, the rest 0): the op adds flops and parameters, or corrects the
     * movement (route). NULL: data movement only (copies, upsample, reorg). */
    void (*cost)(const gr_op_ctx *c, gr_cost *cost);
    /* Row dependence, what the dataflow task graph (planner/tasks.c) splits work by: output rows
     * [r0, r1) of one image read rows [*lo, *hi) of input k (clamped to the input; empty when
     * they read none of it). NULL: row for row (element-wise and shape-preserving ops);
     * gr_op_rows_whole: every row (connected, softmax, avgpool, reorg's scramble). */
    void (*rows)(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi);
    /* The CPU reference: c->dst from c->src, c->batch images. */
    void (*ref)(const gr_op_ctx *c);
    /* Darknet's defaults for this op's keys, over the common ones gr_op_params_default sets
     * (activation linear, groups 1, dtype f32); NULL: none. */
    void (*defaults)(gr_op_params *p);
    /* Fill the GR_PARAM_DERIVED defaults from the keys a cfg gave; NULL: none. */
    void (*resolve)(gr_op_params *p);
} gr_op_hooks;

typedef struct gr_op_info {
    const char *name;    /* "conv" */
    const char *section; /* Darknet section, "" for planner-inserted ops */
    unsigned flags;      /* GR_OPF_* */
    const gr_op_hooks *hooks;
} gr_op_info;

const gr_op_info *gr_op_get(gr_op_kind op);
/* Op of a Darknet section name as ops.def spells it ("convolutional"); false if none. Darknet's
 * aliases ([conv], [max], ...) are the parser's section table's business (models/parse.c). */
bool gr_op_from_section(const char *section, gr_op_kind *out);
/* True when `kind` has every flag of `flags`. Takes any int so planner node kinds (>= GR_OP_COUNT,
 * see planner/plan.h) can be asked too: they have no flags. */
bool gr_op_has(int kind, unsigned flags);

/* The callers' side: each builds the context for op p->op and runs its hook, or the default. */
gr_status gr_op_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out);
void gr_op_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, gr_cost *cost);
void gr_op_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k, int r0,
                int r1, int *lo, int *hi);
void gr_op_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
               const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape, int batch);

/* Per-op hook tables, one per row of ops.def. */
#define GR_OP(e, stem, section, flags) extern const gr_op_hooks gr_op_##stem##_hooks;
#include "ops/ops.def"
#undef GR_OP

/* Marks a parameter whose Darknet default depends on others (gr_op_params_resolve fills it). */
#define GR_PARAM_DERIVED (-1)

/* Darknet's defaults for a fresh layer of kind `op`, written down in one place per op, its hooks'
 * `defaults` (the parser only reads the keys a cfg gives over them): e.g. conv activation
 * logistic, upsample stride 2, region classes 20. Defaults that depend on other keys are
 * GR_PARAM_DERIVED until gr_op_params_resolve (the hooks' `resolve`): maxpool size (= stride)
 * and padding (= size - 1), yolo mask (every anchor). */
void gr_op_params_default(gr_op_kind op, gr_op_params *p);
/* [yolo] x, y after the activation (AlexeyAB's forward_yolo_layer scal_add_cpu): v * scale_x_y
 * + (float)(-0.5 * (scale_x_y - 1)), in float; the identity at scale_x_y 1. Shared by the
 * reference and the raw decoders (runtime/detect.c) so they compute the same floats. */
float gr_yolo_scale_xy(const gr_op_params *p, float v);

/* Fill the GR_PARAM_DERIVED parameters from the others, once a cfg's keys are read. */
void gr_op_params_resolve(gr_op_params *p);

#endif
