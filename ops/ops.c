/* The op table (one row per line of ops/ops.def), activations, Darknet's parameter defaults and
 * the validation helpers of op_util.h. Each op's own logic lives in ops/<stem>.c. */
#include "ops/ops.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/activation.h"
#include "ops/op_util.h"

static const gr_op_info op_table[] = {
#define GR_OP(e, stem, section, flags) [GR_OP_##e] = {#stem, section, flags, &gr_op_##stem##_hooks},
#include "ops/ops.def"
#undef GR_OP
};

_Static_assert(sizeof op_table / sizeof op_table[0] == GR_OP_COUNT,
               "ops/ops.def and the op table disagree: every op needs a row");

const gr_op_info *gr_op_get(gr_op_kind op)
{
    if ((int)op < 0 || op >= GR_OP_COUNT)
        return NULL;
    return &op_table[op];
}

bool gr_op_from_section(const char *section, gr_op_kind *out)
{
    if (!section || !section[0])
        return false; /* planner-inserted ops have "" and are never parsed */
    for (int i = 0; i < GR_OP_COUNT; i++) {
        if (strcmp(op_table[i].section, section) == 0) {
            if (out)
                *out = (gr_op_kind)i;
            return true;
        }
    }
    return false;
}

bool gr_op_has(int kind, unsigned flags)
{
    if (kind < 0 || kind >= GR_OP_COUNT)
        return false;
    return (op_table[kind].flags & flags) == flags;
}

/* The hooks of p->op; the callers below do nothing (infer fails) for a kind outside ops.def. */
static const gr_op_hooks *hooks_of(const gr_op_params *p)
{
    const gr_op_info *info = gr_op_get(p->op);
    return info ? info->hooks : NULL;
}

static gr_op_ctx context(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out)
{
    gr_op_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.in = in;
    c.n_in = n_in;
    c.out = out;
    return c;
}

gr_status gr_op_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_shape unknown = {0, 0, 0};
    const gr_op_ctx c = context(p, in, n_in, unknown);
    const gr_op_hooks *h = hooks_of(p);
    if (!h)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "op kind %d is not an op", (int)p->op);
    return h->infer(&c, out);
}

void gr_op_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, gr_cost *cost)
{
    const gr_op_ctx c = context(p, in, n_in, out);
    memset(cost, 0, sizeof *cost);
    for (int k = 0; k < n_in; k++)
        cost->in_elems += (double)gr_shape_elems(in[k]);
    cost->out_elems = (double)gr_shape_elems(out);
    const gr_op_hooks *h = hooks_of(p);
    if (h && h->cost)
        h->cost(&c, cost);
}

void gr_op_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k, int r0,
                int r1, int *lo, int *hi)
{
    const gr_op_ctx c = context(p, in, n_in, out);
    const gr_op_hooks *h = hooks_of(p);
    if (h && h->rows)
        h->rows(&c, k, r0, r1, lo, hi);
    else
        gr_op_rows_window(r0, r1, 1, 0, 1, in[k].h, lo, hi);
}

void gr_op_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
               const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape, int batch)
{
    gr_op_ctx c = context(p, in_shapes, n_in, out_shape);
    c.w = w;
    c.src = in;
    c.dst = out;
    c.batch = batch;
    const gr_op_hooks *h = hooks_of(p);
    if (h)
        h->ref(&c);
}

static const char *const activation_names[GR_ACT_COUNT] = {
    [GR_ACT_LINEAR] = "linear", [GR_ACT_LEAKY] = "leaky", [GR_ACT_RELU] = "relu",
    [GR_ACT_LOGISTIC] = "logistic", [GR_ACT_MISH] = "mish", [GR_ACT_SWISH] = "swish",
    [GR_ACT_RELU6] = "relu6", [GR_ACT_HARD_MISH] = "hard_mish", [GR_ACT_ELU] = "elu",
    [GR_ACT_SELU] = "selu", [GR_ACT_GELU] = "gelu", [GR_ACT_TANH] = "tanh",
    [GR_ACT_LOGGY] = "loggy", [GR_ACT_RELIE] = "relie", [GR_ACT_RAMP] = "ramp",
    [GR_ACT_PLSE] = "plse", [GR_ACT_STAIR] = "stair", [GR_ACT_HARDTAN] = "hardtan",
    [GR_ACT_LHTAN] = "lhtan",
};

const char *gr_activation_name(gr_activation a)
{
    if ((int)a < 0 || a >= GR_ACT_COUNT)
        return "?";
    return activation_names[a];
}

bool gr_activation_parse(const char *name, gr_activation *out)
{
    if (!name)
        return false;
    if (strcmp(name, "revleaky") == 0) { /* activations.c: activate() treats it as leaky */
        if (out)
            *out = GR_ACT_LEAKY;
        return true;
    }
    for (int i = 0; i < GR_ACT_COUNT; i++) {
        if (strcmp(name, activation_names[i]) == 0) {
            if (out)
                *out = (gr_activation)i;
            return true;
        }
    }
    return false;
}

/* pjreddie's Darknet computes logistic as 1./(1. + exp(-x)) in double and stores a float; so do
 * we, so the reference matches it bit for bit where the libm agrees. AlexeyAB's logistic_activate
 * is the float 1.f/(1.f + expf(-x)) (activations.h:61), at most an ulp or two away; its swish
 * uses that float form (ops/activation.h), [logistic] keeps the double one. */
static float logistic(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* Darknet's leaky is (x>0) ? x : .1*x with a double .1 (its GPU kernel uses .1f, which can differ
 * in the last bit; the CPU path is the reference). */
static float leaky(float x) { return x > 0.0f ? x : (float)(0.1 * (double)x); }

float gr_activate(float x, gr_activation a)
{
    switch (a) {
    case GR_ACT_LINEAR: return x;
    case GR_ACT_LEAKY: return leaky(x);
    case GR_ACT_RELU: return x * (x > 0.0f ? 1.0f : 0.0f); /* Darknet's x*(x>0): -0 for x < 0 */
    case GR_ACT_LOGISTIC: return logistic(x);
    default: return gr_act_common(x, a); /* AlexeyAB's float formulas, shared with the GPU */
    }
}

/* AlexeyAB's activations.h: leaky_activate (x>0) ? x : .1f*x and logistic_activate
 * 1.f/(1.f + expf(-x)), both in float; relu_activate is pjreddie's x*(x>0); the rest are
 * gr_act_common's. Its conv's leaky is pjreddie's (gemm.c). (Its fused batch norm: ops/conv.c.) */
float gr_activate_as(float x, gr_activation a, gr_act_form form)
{
    if (form == GR_ACT_FORM_PJREDDIE || (a == GR_ACT_LEAKY && form == GR_ACT_FORM_ALEXEYAB_CONV))
        return gr_activate(x, a);
    if (a == GR_ACT_LEAKY)
        return x > 0.0f ? x : 0.1f * x;
    if (a == GR_ACT_LOGISTIC)
        return 1.0f / (1.0f + expf(-x));
    return gr_activate(x, a);
}

gr_act_form gr_act_form_of(const gr_op_params *p, bool conv)
{
    if (!p->alexeyab)
        return GR_ACT_FORM_PJREDDIE;
    return conv ? GR_ACT_FORM_ALEXEYAB_CONV : GR_ACT_FORM_ALEXEYAB;
}

void gr_activate_array(float *x, size_t n, gr_activation a, gr_act_form form)
{
    switch (a) {
    case GR_ACT_LINEAR: return;
    case GR_ACT_LEAKY:
        if (form != GR_ACT_FORM_ALEXEYAB) {
            for (size_t i = 0; i < n; i++)
                x[i] = leaky(x[i]);
            return;
        }
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];
        return;
    default:
        for (size_t i = 0; i < n; i++)
            x[i] = gr_activate_as(x[i], a, form);
        return;
    }
}

double gr_activation_flops(gr_activation a)
{
    switch (a) {
    case GR_ACT_LINEAR: return 0.0;
    case GR_ACT_LEAKY: return 1.0;
    case GR_ACT_RELU: return 1.0;
    case GR_ACT_LOGISTIC: return 4.0;
    case GR_ACT_SWISH: return 5.0;
    case GR_ACT_MISH: return 8.0;
    case GR_ACT_GELU: return 10.0;
    case GR_ACT_ELU:
    case GR_ACT_SELU:
    case GR_ACT_TANH:
    case GR_ACT_LOGGY: return 5.0;
    default: return 2.0; /* piecewise linear / polynomial */
    }
}

void gr_softmax_strided_to(const float *input, size_t n, size_t in_stride, float *output,
                           size_t out_stride)
{
    float largest = -FLT_MAX;
    for (size_t i = 0; i < n; i++)
        if (input[i * in_stride] > largest)
            largest = input[i * in_stride];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        /* float subtract, as Darknet; each input is read before its output is written, so
         * input == output (in place) gives the same values */
        float e = (float)exp((double)(input[i * in_stride] - largest));
        sum += e;
        output[i * out_stride] = e;
    }
    for (size_t i = 0; i < n; i++)
        output[i * out_stride] /= sum;
}

void gr_softmax_strided(const float *input, size_t n, size_t stride, float *output)
{
    gr_softmax_strided_to(input, n, stride, output, stride);
}

double gr_bn_denominator(int alexeyab, float var)
{
    if (alexeyab)
        return sqrt((double)var + GR_BN_EPSILON_ALEXEYAB);
    return sqrt((double)var) + (double)GR_BN_EPSILON;
}

double gr_bn_alexeyab_factor(const gr_weights *w, int oc)
{
    return (double)w->scales[oc] / sqrt((double)w->rolling_variance[oc] + GR_BN_EPSILON_ALEXEYAB);
}

float gr_bn_alexeyab_fused_bias(const gr_weights *w, int oc)
{
    return (float)((double)w->biases[oc] - (double)w->scales[oc] * (double)w->rolling_mean[oc] /
                                               sqrt((double)w->rolling_variance[oc] +
                                                    GR_BN_EPSILON_ALEXEYAB));
}

void gr_op_params_default(gr_op_kind op, gr_op_params *p)
{
    memset(p, 0, sizeof *p);
    p->op = op;
    p->activation = GR_ACT_LINEAR;
    p->dtype = GR_DTYPE_F32;
    p->groups = 1;
    const gr_op_info *info = gr_op_get(op);
    if (info && info->hooks->defaults)
        info->hooks->defaults(p);
}

void gr_op_params_resolve(gr_op_params *p)
{
    const gr_op_info *info = gr_op_get(p->op);
    if (info && info->hooks->resolve)
        info->hooks->resolve(p);
}

/* ---- validation helpers (op_util.h) ---------------------------------------------------------- */

const char *gr_op_tag(gr_op_kind op)
{
    const gr_op_info *info = gr_op_get(op);
    if (!info)
        return "?";
    return info->section[0] ? info->section : info->name;
}

gr_status gr_op_check_n_in(gr_op_kind op, const gr_shape *in, int n_in, int expected)
{
    if (!in || n_in != expected)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "[%s] takes %d input%s, got %d", gr_op_tag(op),
                       expected, expected == 1 ? "" : "s", in ? n_in : 0);
    return GR_OK;
}

gr_status gr_op_check_inputs(const gr_op_ctx *c, int expected)
{
    GR_TRY(gr_op_check_n_in(c->p->op, c->in, c->n_in, expected));
    for (int k = 0; k < c->n_in; k++)
        GR_TRY(gr_op_check_input(c->p->op, c->in[k], k));
    return GR_OK;
}

gr_status gr_op_check_input(gr_op_kind op, gr_shape s, int k)
{
    if (s.c < 1 || s.h < 1 || s.w < 1)
        return gr_fail(GR_ERR_PARSE, "[%s] input %d has an empty shape %dx%dx%d", gr_op_tag(op), k,
                       s.c, s.h, s.w);
    if (s.c > GR_MAX_DIM || s.h > GR_MAX_DIM || s.w > GR_MAX_DIM)
        return gr_fail(GR_ERR_LIMIT, "[%s] input %d shape %dx%dx%d exceeds the dimension limit %d",
                       gr_op_tag(op), k, s.c, s.h, s.w, GR_MAX_DIM);
    if (gr_shape_elems(s) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "[%s] input %d shape %dx%dx%d exceeds %zu elements",
                       gr_op_tag(op), k, s.c, s.h, s.w, GR_MAX_TENSOR_ELEMS);
    return GR_OK;
}

gr_status gr_op_check_range(gr_op_kind op, const char *key, int value, int lo, int hi)
{
    if (value < lo)
        return gr_fail(GR_ERR_PARSE, "[%s] %s %d must be >= %d", gr_op_tag(op), key, value, lo);
    if (value > hi)
        return gr_fail(GR_ERR_LIMIT, "[%s] %s %d exceeds the limit %d", gr_op_tag(op), key, value,
                       hi);
    return GR_OK;
}

gr_status gr_op_check_activation(gr_op_kind op, gr_activation a)
{
    if ((int)a < 0 || a >= GR_ACT_COUNT)
        return gr_fail(GR_ERR_PARSE, "[%s] activation %d is not a known activation", gr_op_tag(op),
                       (int)a);
    return GR_OK;
}

gr_status gr_op_set_output(gr_op_kind op, long long c, long long h, long long w, gr_shape *out)
{
    if (c < 1 || h < 1 || w < 1)
        return gr_fail(GR_ERR_PARSE, "[%s] output shape %lldx%lldx%lld is empty", gr_op_tag(op), c,
                       h, w);
    if (c > GR_MAX_DIM || h > GR_MAX_DIM || w > GR_MAX_DIM)
        return gr_fail(GR_ERR_LIMIT, "[%s] output shape %lldx%lldx%lld exceeds the dimension limit %d",
                       gr_op_tag(op), c, h, w, GR_MAX_DIM);
    if ((unsigned long long)c * (unsigned long long)h * (unsigned long long)w > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "[%s] output shape %lldx%lldx%lld exceeds %zu elements",
                       gr_op_tag(op), c, h, w, GR_MAX_TENSOR_ELEMS);
    out->c = (int)c;
    out->h = (int)h;
    out->w = (int)w;
    return GR_OK;
}

void gr_op_rows_all(int h, int *lo, int *hi)
{
    *lo = 0;
    *hi = h;
}

void gr_op_rows_window(int r0, int r1, int stride, int offset, int size, int h, int *lo, int *hi)
{
    if (r1 <= r0) {
        *lo = *hi = 0;
        return;
    }
    int a = r0 * stride + offset, b = (r1 - 1) * stride + offset + size;
    *lo = a < 0 ? 0 : a > h ? h : a;
    *hi = b < 0 ? 0 : b > h ? h : b;
    if (*hi < *lo)
        *hi = *lo;
}

void gr_op_rows_whole(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    if (r1 <= r0)
        *lo = *hi = 0; /* an empty band reads nothing, as gr_op_rows_window says */
    else
        gr_op_rows_all(c->in[k].h, lo, hi);
}

void gr_op_cost_activated(const gr_op_ctx *c, gr_cost *cost)
{
    cost->flops = (double)gr_shape_elems(c->out) * (1.0 + gr_activation_flops(c->p->activation));
}
