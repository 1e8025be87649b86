/* Darknet's elementwise activations as float formulas, one definition shared by the CPU reference
 * (ops/ops.c), the CPU emulation of the f16/int8 epilogues (planner/exec.c) and the GPU kernels
 * (kernels/conv_internal.cuh, kernels/misc_common.cuh): the same expression in the same order on
 * both sides, so only the math library (expf, logf, tanhf, powf: glibc vs CUDA) can differ.
 *
 * Each formula is AlexeyAB Darknet's src/activations.h (commit 59596d78), operator for operator,
 * including its int-times-float products ((x >= 0) * x), its mixed double constants (gelu) and
 * their consequences (elu/selu are NaN above ~88.7 where expf overflows and 0 * inf is NaN).
 * The header is plain C; under nvcc the functions are also device functions. */
#ifndef GR_OPS_ACTIVATION_H
#define GR_OPS_ACTIVATION_H

#include <math.h>

#include "ops/ops.h"

#ifdef __CUDACC__
#define GR_ACT_FN static inline __host__ __device__
#else
#define GR_ACT_FN static inline
#endif

/* Products that an addition follows, kept apart from it: nvcc contracts a*b + c into one fma by
 * default (one rounding instead of two), C11 compilers here do not; __fmul_rn / __dmul_rn are
 * never contracted. */
#ifdef __CUDA_ARCH__
#define GR_FMUL(a, b) __fmul_rn((a), (b))
#define GR_DMUL(a, b) __dmul_rn((a), (b))
#else
#define GR_FMUL(a, b) ((a) * (b))
#define GR_DMUL(a, b) ((a) * (b))
#endif

/* activations.h: tanh_activate, 2/(1 + e^-2x) - 1 (not tanhf: mish uses it too) */
GR_ACT_FN float gr_act_tanh(float x) { return 2.0f / (1.0f + expf(-2.0f * x)) - 1.0f; }

/* activations.h: softplus_activate with mish's threshold 20 (activations.c: MISH_THRESHOLD) */
GR_ACT_FN float gr_act_softplus20(float x)
{
    if (x > 20.0f)
        return x;
    if (x < -20.0f)
        return expf(x);
    return logf(expf(x) + 1.0f);
}

/* activations.c: activate_array_mish, x * tanh_activate(softplus_activate(x, 20)) */
GR_ACT_FN float gr_act_mish(float x) { return x * gr_act_tanh(gr_act_softplus20(x)); }

/* activations.c: hard_mish_yashas */
GR_ACT_FN float gr_act_hard_mish(float x)
{
    if (x > 0.0f)
        return x;
    if (x > -2.0f)
        return GR_FMUL(x, x) / 2.0f + x;
    return 0.0f;
}

/* activations.h: logistic_activate in float (swish's sigmoid; [logistic] itself: ops/ops.c) */
GR_ACT_FN float gr_act_logistic_f(float x) { return 1.0f / (1.0f + expf(-x)); }

/* activations.c: activate_array_swish, x * logistic_activate(x) */
GR_ACT_FN float gr_act_swish(float x) { return x * gr_act_logistic_f(x); }

/* activations.h: relu6_activate, min_val_cmp(max_val_cmp(x, 0), 6) */
GR_ACT_FN float gr_act_relu6(float x)
{
    float lower = x > 0.0f ? x : 0.0f;
    return lower < 6.0f ? lower : 6.0f;
}

/* activations.h: elu_activate, (x >= 0)*x + (x < 0)*(expf(x)-1) */
GR_ACT_FN float gr_act_elu(float x)
{
    return GR_FMUL((float)(x >= 0.0f), x) + GR_FMUL((float)(x < 0.0f), expf(x) - 1.0f);
}

/* activations.h: selu_activate */
GR_ACT_FN float gr_act_selu(float x)
{
    return GR_FMUL(GR_FMUL((float)(x >= 0.0f), 1.0507f), x) +
           GR_FMUL(GR_FMUL(GR_FMUL((float)(x < 0.0f), 1.0507f), 1.6732f), expf(x) - 1.0f);
}

/* activations.h: gelu_activate, 0.5*x*(1 + tanhf(0.797885*x + 0.035677*powf(x, 3))) with C's
 * promotions spelled out: double constants, tanhf of the double argument rounded to float,
 * 1 + tanhf in float, the product in double, the result rounded to float. */
GR_ACT_FN float gr_act_gelu(float x)
{
    float inner = (float)(GR_DMUL(0.797885, (double)x) + GR_DMUL(0.035677, (double)powf(x, 3.0f)));
    return (float)(0.5 * (double)x * (double)(1.0f + tanhf(inner)));
}

/* activations.h: loggy_activate */
GR_ACT_FN float gr_act_loggy(float x) { return 2.0f / (1.0f + expf(-x)) - 1.0f; }

/* activations.h: relie_activate */
GR_ACT_FN float gr_act_relie(float x) { return x > 0.0f ? x : 0.01f * x; }

/* activations.h: ramp_activate, x*(x>0) + .1f*x */
GR_ACT_FN float gr_act_ramp(float x) { return GR_FMUL(x, (float)(x > 0.0f)) + GR_FMUL(0.1f, x); }

/* activations.h: plse_activate */
GR_ACT_FN float gr_act_plse(float x)
{
    if (x < -4.0f)
        return 0.01f * (x + 4.0f);
    if (x > 4.0f)
        return GR_FMUL(0.01f, x - 4.0f) + 1.0f;
    return GR_FMUL(0.125f, x) + 0.5f;
}

/* activations.h: stair_activate (n = floorf(x) converted to int, as Darknet's `int n`) */
GR_ACT_FN float gr_act_stair(float x)
{
    int n = (int)floorf(x);
    if (n % 2 == 0)
        return floorf(x / 2.0f);
    return (x - (float)n) + floorf(x / 2.0f);
}

/* activations.h: hardtan_activate */
GR_ACT_FN float gr_act_hardtan(float x)
{
    if (x < -1.0f)
        return -1.0f;
    if (x > 1.0f)
        return 1.0f;
    return x;
}

/* activations.h: lhtan_activate */
GR_ACT_FN float gr_act_lhtan(float x)
{
    if (x < 0.0f)
        return 0.001f * x;
    if (x > 1.0f)
        return GR_FMUL(0.001f, x - 1.0f) + 1.0f;
    return x;
}

/* The activations whose formula is the same everywhere (every one but linear, leaky, relu and
 * logistic, whose CPU reference and epilogue forms differ: ops/ops.c, planner/exec.c); others
 * return x. */
GR_ACT_FN float gr_act_common(float x, gr_activation act)
{
    switch (act) {
    case GR_ACT_MISH: return gr_act_mish(x);
    case GR_ACT_SWISH: return gr_act_swish(x);
    case GR_ACT_RELU6: return gr_act_relu6(x);
    case GR_ACT_HARD_MISH: return gr_act_hard_mish(x);
    case GR_ACT_ELU: return gr_act_elu(x);
    case GR_ACT_SELU: return gr_act_selu(x);
    case GR_ACT_GELU: return gr_act_gelu(x);
    case GR_ACT_TANH: return gr_act_tanh(x);
    case GR_ACT_LOGGY: return gr_act_loggy(x);
    case GR_ACT_RELIE: return gr_act_relie(x);
    case GR_ACT_RAMP: return gr_act_ramp(x);
    case GR_ACT_PLSE: return gr_act_plse(x);
    case GR_ACT_STAIR: return gr_act_stair(x);
    case GR_ACT_HARDTAN: return gr_act_hardtan(x);
    case GR_ACT_LHTAN: return gr_act_lhtan(x);
    default: return x;
    }
}

/* The f16/int8 epilogue's activation (what the tensor-core and fp32 GPU kernels compute and the
 * CPU emulation reproduces): float constants for leaky (0.1f) and logistic (expf), relu as a
 * select; the rest as gr_act_common. */
GR_ACT_FN float gr_act_epilogue(float y, gr_activation act)
{
    switch (act) {
    case GR_ACT_LINEAR: return y;
    case GR_ACT_LEAKY: return y > 0.0f ? y : 0.1f * y;
    case GR_ACT_RELU: return y > 0.0f ? y : 0.0f;
    case GR_ACT_LOGISTIC: return 1.0f / (1.0f + expf(-y));
    default: return gr_act_common(y, act);
    }
}

#endif
