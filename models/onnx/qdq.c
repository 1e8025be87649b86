/* Explicit Q/DQ (docs/onnx.md "Explicit Q/DQ"): the checks and arithmetic of ONNX's
 * QuantizeLinear / DequantizeLinear for the importer (import.c maps the nodes).
 *
 * graphrun's int8 is symmetric (scale = range / 127, zero point 0, codes clamped to [-127, 127];
 * docs/planner.md), per tensor for activations and per output channel for conv weights. So a
 * Q/DQ pair on a computed tensor is accepted with one scale and a zero point that makes it
 * symmetric: int8 with 0, or uint8 with 128 (the same codes shifted); its scale becomes the
 * tensor's int8 range. A DQ of a constant (int8 weights, int32 biases, any zero point) is folded
 * into float, exactly; its scales are kept for the conv's int8 weights when they are symmetric
 * and per output channel (or per tensor). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/onnx/internal.h"

#define WHY(...) (snprintf(why, why_len, __VA_ARGS__), GR_ERR_UNSUPPORTED)

static const char *dtype_name(int t)
{
    switch (t) {
    case ONNX_INT8: return "int8";
    case ONNX_UINT8: return "uint8";
    case ONNX_INT32: return "int32";
    case ONNX_FLOAT: return "float32";
    case ONNX_INT64: return "int64";
    default: return "another type";
    }
}

gr_status onnx_qdq_read(const Onnx__NodeProto *node, int opset, bool quantize, bool activation,
                        const onnx_const *scale, const onnx_const *zp, int x_dtype, int rank,
                        const int64_t *dims, onnx_qdq_params *p, char *why, size_t why_len)
{
    memset(p, 0, sizeof *p);
    if (!scale)
        return snprintf(why, why_len, "no scale (input 1)"), GR_ERR_PARSE;
    if (!scale->is_float || scale->ndim > 1 || scale->n == 0)
        return WHY("the scale must be a float32 scalar or 1-D tensor (has %s, rank %d)",
                   scale->is_float ? "float32" : dtype_name(scale->dtype), scale->ndim);
    for (size_t i = 0; i < scale->n; i++)
        if (!(scale->f[i] > 0.0f) || !isfinite(scale->f[i]))
            return WHY("scale %g (element %zu): a scale must be finite and > 0",
                       (double)scale->f[i], i);
    if (zp && (zp->is_float || zp->n != scale->n))
        return WHY("the zero point must be an integer tensor of the scale's shape (%zu value%s)",
                   scale->n, scale->n == 1 ? "" : "s");
    /* Q's output type is its zero point's (uint8 without one); DQ's is its input's. */
    p->dtype = quantize ? (zp ? zp->dtype : ONNX_UINT8) : x_dtype;
    if (zp && zp->dtype != p->dtype)
        return WHY("zero point of type %s for %s codes", dtype_name(zp->dtype),
                   dtype_name(p->dtype));
    bool int32_ok = !quantize && !activation;
    if (p->dtype != ONNX_INT8 && p->dtype != ONNX_UINT8 && !(int32_ok && p->dtype == ONNX_INT32))
        return WHY("%s codes (graphrun's int8 reads int8 or uint8%s)", dtype_name(p->dtype),
                   int32_ok ? ", and int32 biases" : "");
    p->n = scale->n;
    p->scale = scale->f;
    p->zp = zp ? zp->i : NULL;
    p->axis = -1;
    if (scale->ndim == 1 && (scale->n > 1 || opset >= 13)) {
        int64_t axis = onnx_attr_int(node, "axis", 1);
        if (axis < 0)
            axis += rank;
        if (axis < 0 || axis >= rank || dims[axis] != (int64_t)scale->n) {
            if (scale->n > 1)
                return WHY("%zu scales along axis %lld, which has %lld elements", scale->n,
                           (long long)onnx_attr_int(node, "axis", 1),
                           axis >= 0 && axis < rank ? (long long)dims[axis] : -1LL);
        } else {
            p->axis = (int)axis;
        }
    }
    if (p->n == 1)
        p->axis = -1;
    int64_t sym = p->dtype == ONNX_UINT8 ? 128 : 0;
    p->symmetric = 1;
    for (size_t i = 0; i < p->n; i++)
        if ((p->zp ? p->zp[i] : 0) != sym)
            p->symmetric = 0;
    if (activation) {
        if (p->n != 1)
            return WHY("%zu scales on a computed tensor (graphrun's int8 activations have one "
                       "scale per tensor)", p->n);
        if (!p->symmetric)
            return WHY("zero point %lld of %s on a computed tensor: graphrun's int8 is "
                       "symmetric (int8 with zero point 0, or uint8 with 128)",
                       (long long)(p->zp ? p->zp[0] : 0), dtype_name(p->dtype));
    }
    return GR_OK;
}

/* The scale and zero point of element i (its index along the axis). */
static size_t param_index(const onnx_const *x, const onnx_qdq_params *p, size_t i)
{
    if (p->axis < 0)
        return 0;
    size_t inner = 1;
    for (int d = p->axis + 1; d < x->ndim; d++)
        inner *= (size_t)x->dims[d];
    return (i / inner) % (size_t)x->dims[p->axis];
}

gr_status onnx_qdq_fold(bool quantize, const onnx_const *x, const onnx_qdq_params *p,
                        onnx_const *out, char *why, size_t why_len)
{
    if (quantize != x->is_float)
        return WHY("a %s of %s values", quantize ? "QuantizeLinear" : "DequantizeLinear",
                   x->is_float ? "float" : "integer");
    GR_TRY(onnx_const_alloc(out, x->ndim, x->dims, !quantize, 0, why, why_len));
    int64_t lo = p->dtype == ONNX_UINT8 ? 0 : -128, hi = p->dtype == ONNX_UINT8 ? 255 : 127;
    for (size_t i = 0; i < x->n; i++) {
        size_t c = param_index(x, p, i);
        int64_t zp = p->zp ? p->zp[c] : 0;
        if (quantize) {
            float r = rintf(x->f[i] / p->scale[c]);
            double q = (double)r + (double)zp; /* NaN saturates to 0 - zp, as casts give 0 */
            q = q != q ? 0.0 : q < (double)lo ? (double)lo : q > (double)hi ? (double)hi : q;
            out->i[i] = (int64_t)q;
        } else {
            out->f[i] = (float)(x->i[i] - zp) * p->scale[c];
        }
    }
    out->dtype = quantize ? p->dtype : ONNX_FLOAT;
    return GR_OK;
}

float onnx_qdq_range(float s)
{
    float r = s * 127.0f;
    for (int step = 0; step < 4 && r / 127.0f != s; step++)
        r = nextafterf(r, r / 127.0f < s ? INFINITY : 0.0f);
    return r;
}

bool onnx_qdq_weight_scales(const onnx_qdq_params *p, const onnx_const *dq, const float *w,
                            int filters, float *scales)
{
    if (!p->symmetric || p->dtype == ONNX_INT32 || (p->axis != -1 && p->axis != 0) ||
        (p->axis == 0 && p->n != (size_t)filters) || dq->n % (size_t)filters != 0)
        return false;
    size_t per = dq->n / (size_t)filters;
    if (per == 0)
        return false;
    for (int c = 0; c < filters; c++) {
        const float *d = dq->f + (size_t)c * per, *wc = w + (size_t)c * per;
        float s = p->scale[p->axis == 0 ? c : 0];
        /* A factor folded into this filter (batch norm, a constant Mul): w' = f * dq. */
        size_t big = 0;
        for (size_t k = 1; k < per; k++)
            if (fabsf(d[k]) > fabsf(d[big]))
                big = k;
        if (d[big] != 0.0f && wc[big] != d[big])
            s *= fabsf(wc[big] / d[big]);
        if (!(s > 0.0f) || !isfinite(s))
            return false;
        for (size_t k = 0; k < per; k++) {
            float r = wc[k] / s;
            if (!(fabsf(r - rintf(r)) <= 1e-3f) || r > 127.5f || r < -128.5f)
                return false;
        }
        scales[c] = s;
    }
    return true;
}
