/* GPU convolution kernels (kernels/conv.h, kernels/gemm_f32.h) against an independent CPU
 * computation written here: FP16 and INT8 tensor-core convs on NHWC with padded channels and
 * channel slices (f32 NCHW ones too: a concat the fused dequantize writes), every output kind
 * and tile shape, and the FP32 cuBLAS path.
 * Each run uses a fresh seed (printed; GR_TEST_SEED=N repeats one). Outputs are surrounded by guard
 * bytes and poisoned with two different patterns on two runs: an element left unwritten, or a write
 * outside the tensor, shows up as a difference. Exits 77 without a CUDA device. */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("SKIP gpu_conv: graphrun was built without CUDA\n");
    return 77;
}
#else

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/conv_gemm.h"
#include "kernels/gemm_f32.h"
#include "base/base.h"
#include "ops/ops.h"
#include "kernels/conv_weights.h"
#include "tests/support/gpu_test.h"

_Static_assert(GR_CONV_ACT_LINEAR == (int)GR_ACT_LINEAR && GR_CONV_ACT_LEAKY == (int)GR_ACT_LEAKY &&
                   GR_CONV_ACT_RELU == (int)GR_ACT_RELU &&
                   GR_CONV_ACT_LOGISTIC == (int)GR_ACT_LOGISTIC,
               "conv activation codes must equal gr_activation");

static uint64_t test_seed;
static gr_rng rng;
static cublasLtHandle_t lt; /* for the GEMM tactic */

#define GUARD_BYTES 256
#define CUDA_OK(stmt)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s (%s)", #stmt, cudaGetErrorName(e_),               \
                      gr_kernels_last_failure());                                                  \
    } while (0)

/* ---- helpers ------------------------------------------------------------------------------- */

static int round_up(int v, int to)
{
    return (v + to - 1) / to * to;
}

static float act_ref(float y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LEAKY: return y > 0.0f ? y : 0.1f * y;
    case GR_CONV_ACT_RELU: return y > 0.0f ? y : 0.0f;
    case GR_CONV_ACT_LOGISTIC: return 1.0f / (1.0f + expf(-y));
    default: return y;
    }
}

static int8_t quantize_ref(float y, float inv_scale)
{
    float q = rintf(y * inv_scale);
    q = fminf(fmaxf(q, -127.0f), 127.0f);
    return (int8_t)q;
}

/* Device buffer with GUARD_BYTES on both sides of `bytes` of payload (payload stays 256-aligned).
 */
typedef struct guarded {
    unsigned char *base;
    void *data;
    size_t bytes;
} guarded;

static guarded guarded_alloc(size_t bytes)
{
    guarded g = {0};
    g.bytes = bytes;
    CUDA_OK(cudaMalloc((void **)&g.base, bytes + 2 * GUARD_BYTES));
    g.data = g.base + GUARD_BYTES;
    return g;
}

/* Poison the whole buffer, guards included. */
static void guarded_poison(guarded *g, int pattern)
{
    CUDA_OK(cudaMemset(g->base, pattern, g->bytes + 2 * GUARD_BYTES));
}

/* Copy the payload back and check both guards still hold `pattern`. */
static void guarded_fetch(const guarded *g, int pattern, void *host)
{
    unsigned char *all = malloc(g->bytes + 2 * GUARD_BYTES);
    ck_assert_ptr_nonnull(all);
    CUDA_OK(cudaMemcpy(all, g->base, g->bytes + 2 * GUARD_BYTES, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < GUARD_BYTES; ++i) {
        ck_assert_msg(all[i] == (unsigned char)pattern, "guard byte %zu before the output changed",
                      i);
        ck_assert_msg(all[GUARD_BYTES + g->bytes + i] == (unsigned char)pattern,
                      "guard byte %zu after the output changed", i);
    }
    memcpy(host, all + GUARD_BYTES, g->bytes);
    free(all);
}

static void *upload(const void *host, size_t bytes)
{
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, bytes));
    CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    return dev;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ---- the shapes ---------------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int batch, in_c, in_h, in_w, out_c, ksize, stride, pad, act;
    int in_extra, in_offset;   /* input is a channel slice: stride = offset + c_pad + extra */
    int out_extra, out_offset; /* output is a channel slice of a wider (concat) buffer: NHWC
                                  rounds the offset and the extra channels up to the granule,
                                  NCHW (f32, the fused dequantize) takes them as they are */
} conv_case;

static const conv_case cases[] = {
    {"3->16 3x3 s1 26x26 (first layer)", 1, 3, 26, 26, 16, 3, 1, 1, GR_CONV_ACT_LEAKY, 0, 0, 0, 0},
    {"3->16 3x3 s1 416x416 (first layer)", 1, 3, 416, 416, 16, 3, 1, 1, GR_CONV_ACT_LEAKY, 0, 0, 0,
     0},
    {"16->125 1x1 13x13 batch 3", 3, 16, 13, 13, 125, 1, 1, 0, GR_CONV_ACT_LINEAR, 0, 0, 0, 0},
    {"128->255 3x3 s1 17x9", 1, 128, 9, 17, 255, 3, 1, 1, GR_CONV_ACT_LOGISTIC, 0, 0, 0, 0},
    {"16->32 3x3 s2 26x26 batch 3", 3, 16, 26, 26, 32, 3, 2, 1, GR_CONV_ACT_RELU, 0, 0, 0, 0},
    {"25->40 3x3 pad 0 17x9 batch 2", 2, 25, 9, 17, 40, 3, 1, 0, GR_CONV_ACT_LEAKY, 0, 0, 0, 0},
    {"64->128 3x3 s1 26x26", 1, 64, 26, 26, 128, 3, 1, 1, GR_CONV_ACT_LEAKY, 0, 0, 0, 0},
    {"128->16 1x1 13x13, input and output are concat slices", 1, 128, 13, 13, 16, 1, 1, 0,
     GR_CONV_ACT_LEAKY, 32, 16, 32, 16},
    {"3->48 3x3 s2 17x9 batch 3, output slice", 3, 3, 9, 17, 48, 3, 2, 1, GR_CONV_ACT_LINEAR, 0, 0,
     16, 48},
    /* YOLOv8's class conv: 3 channels after the 64 box channels of one f32 NCHW output image */
    {"32->3 1x1 10x6 batch 2, output slice at channel 67 of 75", 2, 32, 6, 10, 3, 1, 1, 0,
     GR_CONV_ACT_LINEAR, 0, 0, 5, 67},
    {"128->80 3x3 13x13 batch 2, output slice at channel 64 of 144", 2, 128, 13, 13, 80, 3, 1, 1,
     GR_CONV_ACT_LOGISTIC, 0, 0, 0, 64},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- FP16 / INT8 tensor-core runs ------------------------------------------------------------ */

typedef struct wmma_opts {
    int is_i8;
    int fp16_accumulate;
    int tile_config;
    double tol_rel;    /* FP16 / f32 outputs: |gpu - ref| <= tol_rel * max|ref| */
    int use_workspace; /* give a split-K workspace */
    int split_k;       /* 0 automatic, n forced */
    int gemm;          /* the GEMM tactic (kernels/conv_gemm.h) instead of the kernel */
} wmma_opts;

/* Value of output element `idx` of an output of `kind`, as a double. */
static double out_value(const void *buf, gr_conv_out_kind kind, size_t idx)
{
    switch (kind) {
    case GR_CONV_OUT_I8: return ((const int8_t *)buf)[idx];
    case GR_CONV_OUT_F16: return gr_f16_to_f32(((const uint16_t *)buf)[idx]);
    default: return ((const float *)buf)[idx];
    }
}

static size_t kind_size(gr_conv_out_kind kind)
{
    return kind == GR_CONV_OUT_I8 ? 1 : (kind == GR_CONV_OUT_F16 ? 2 : 4);
}

/* Returns the number of output kinds run (a forced stream tile refuses shapes whose filters do not
 * fit in shared memory, and NCHW outputs: those kinds are skipped). */
static int run_case(const conv_case *cs, const wmma_opts *o)
{
    const int gran = o->is_i8 ? 16 : 8;
    const int cin_pad = round_up(cs->in_c, gran);
    const int in_stride = cs->in_offset + cin_pad + cs->in_extra;
    const int oh = gr_conv_out_dim(cs->in_h, cs->ksize, cs->stride, cs->pad);
    const int ow = gr_conv_out_dim(cs->in_w, cs->ksize, cs->stride, cs->pad);
    const int M = cs->batch * oh * ow, hw = oh * ow;
    const int kk = cs->ksize * cs->ksize;
    const size_t in_pixels = (size_t)cs->batch * cs->in_h * cs->in_w;
    const size_t n_in = in_pixels * (size_t)in_stride;
    const size_t n_w = (size_t)cs->out_c * cs->in_c * kk;
    const size_t n_packed = gr_conv_weights_count(cs->out_c, cs->in_c, cs->ksize, gran);

    /* Inputs: real values in the slice's real channels, 0 in its padding, random values in the
     * channels outside the slice (which the kernel must not read). in_real: the value as float. */
    const float s_in = 0.02f;
    float *in_real = xmalloc(n_in * sizeof(float));
    int8_t *in_i8 = xmalloc(n_in);
    uint16_t *in_f16 = xmalloc(n_in * sizeof(uint16_t));
    for (size_t p = 0; p < in_pixels; ++p)
        for (int ch = 0; ch < in_stride; ++ch) {
            const int ci = ch - cs->in_offset;
            const int inside = ci >= 0 && ci < cin_pad;
            const int real = ci >= 0 && ci < cs->in_c;
            const size_t i = p * (size_t)in_stride + (size_t)ch;
            const int q = (int)(gr_rng_u64(&rng) % 255) - 127;
            const float h = gr_round_f16(2.0f * gr_rng_uniform(&rng) - 1.0f);
            in_i8[i] = (int8_t)(inside && !real ? 0 : q);
            in_f16[i] = gr_f32_to_f16(inside && !real ? 0.0f : h);
            in_real[i] = o->is_i8 ? (float)in_i8[i] : gr_f16_to_f32(in_f16[i]);
        }

    /* Weights ~ N(0, 1/fan_in) so outputs stay O(1); bias ~ N(0, 0.5). */
    float *w = xmalloc(n_w * sizeof(float));
    float *bias = xmalloc((size_t)cs->out_c * sizeof(float));
    const float w_sd = 1.0f / sqrtf((float)(cs->in_c * kk));
    for (size_t i = 0; i < n_w; ++i)
        w[i] = gr_rng_normal(&rng) * w_sd;
    for (int c = 0; c < cs->out_c; ++c)
        bias[c] = 0.5f * gr_rng_normal(&rng);

    /* The reference's own view of the weights: f16-rounded, or quantized as planner/plan.h says
     * (the planner's quantizer gives the same bytes: tests/test_conv_weights.c). */
    float *w_ref = xmalloc(n_w * sizeof(float));
    float *mul = xmalloc((size_t)cs->out_c * sizeof(float));
    for (int c = 0; c < cs->out_c; ++c) {
        const float *wc = w + (size_t)c * cs->in_c * kk;
        float max_abs = 0.0f;
        for (int k = 0; k < cs->in_c * kk; ++k)
            max_abs = fmaxf(max_abs, fabsf(wc[k]));
        const float s_w = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
        mul[c] = s_in * s_w;
        for (int k = 0; k < cs->in_c * kk; ++k) {
            const size_t i = (size_t)c * cs->in_c * kk + (size_t)k;
            w_ref[i] =
                o->is_i8 ? fminf(fmaxf(rintf(wc[k] / s_w), -127.0f), 127.0f) : gr_round_f16(wc[k]);
        }
    }

    /* Reference y (activated, before output conversion), [M][out_c]. */
    float *y_ref = xmalloc((size_t)M * cs->out_c * sizeof(float));
    float y_max = 0.0f;
    for (int m = 0; m < M; ++m) {
        const int b = m / hw, oy = (m % hw) / ow, ox = m % ow;
        for (int c = 0; c < cs->out_c; ++c) {
            double acc_d = 0.0;
            int64_t acc_i = 0;
            for (int ci = 0; ci < cs->in_c; ++ci)
                for (int ky = 0; ky < cs->ksize; ++ky)
                    for (int kx = 0; kx < cs->ksize; ++kx) {
                        const int iy = oy * cs->stride - cs->pad + ky;
                        const int ix = ox * cs->stride - cs->pad + kx;
                        if (iy < 0 || iy >= cs->in_h || ix < 0 || ix >= cs->in_w)
                            continue;
                        const size_t ii =
                            (((size_t)b * cs->in_h + (size_t)iy) * cs->in_w + (size_t)ix) *
                                in_stride +
                            (size_t)(cs->in_offset + ci);
                        const float wv =
                            w_ref[(((size_t)c * cs->in_c + ci) * cs->ksize + ky) * cs->ksize + kx];
                        if (o->is_i8)
                            acc_i += (int64_t)in_i8[ii] * (int64_t)wv;
                        else
                            acc_d += (double)in_real[ii] * (double)wv;
                    }
            const float y = o->is_i8 ? fmaf((float)acc_i, mul[c], bias[c]) : (float)acc_d + bias[c];
            const float a = act_ref(y, cs->act);
            y_ref[(size_t)m * cs->out_c + c] = a;
            y_max = fmaxf(y_max, fabsf(a));
        }
    }
    ck_assert_msg(y_max > 0.0f, "%s: degenerate reference", cs->name);
    /* s_out so that outputs span about +-100 of the int8 range, a few clamp near the top. */
    const float s_out = y_max / 100.0f;
    const float inv_s_out = 1.0f / s_out;
    /* i8 outputs: 1 step (a rounding boundary), or with f16 accumulation the float tolerance in
     * output steps, plus that step. */
    const double i8_max_diff = o->fp16_accumulate ? ceil(o->tol_rel * 100.0) + 1.0 : 1.0;

    /* Weights in the kernel's layout (kernels/conv_weights.h), and upload. */
    void *packed = xmalloc(n_packed * (o->is_i8 ? 1 : 2));
    if (o->is_i8) {
        int8_t *q = xmalloc(n_w);
        for (size_t i = 0; i < n_w; ++i)
            q[i] = (int8_t)w_ref[i];
        gr_conv_weights_relayout_i8(q, cs->out_c, cs->in_c, cs->ksize, packed);
        free(q);
    } else {
        gr_conv_weights_relayout_f16(w, cs->out_c, cs->in_c, cs->ksize, packed);
    }
    void *d_in = o->is_i8 ? upload(in_i8, n_in) : upload(in_f16, n_in * 2);
    void *d_w = upload(packed, n_packed * (o->is_i8 ? 1 : 2));
    void *d_bias = upload(bias, (size_t)cs->out_c * sizeof(float));
    void *d_mul = upload(mul, (size_t)cs->out_c * sizeof(float));

    int kinds_run = 0;
    for (int kind_i = GR_CONV_OUT_I8; kind_i <= GR_CONV_OUT_F32_NCHW; ++kind_i) {
        const gr_conv_out_kind kind = (gr_conv_out_kind)kind_i;
        const int nchw = kind == GR_CONV_OUT_F32_NCHW;
        const int ogran = kind == GR_CONV_OUT_I8 ? 16 : 8;
        const int out_c_pad = round_up(cs->out_c, ogran);
        const int out_offset = nchw ? cs->out_offset : round_up(cs->out_offset, ogran);
        const int out_stride = nchw ? out_offset + cs->out_c + cs->out_extra
                                    : out_offset + out_c_pad + round_up(cs->out_extra, ogran);
        const size_t n_out = (size_t)M * (size_t)out_stride;
        const size_t out_bytes = n_out * kind_size(kind);
        guarded g = guarded_alloc(out_bytes);
        unsigned char *run[2];
        const int pattern[2] = {0xA5, 0x3C};

        gr_conv_args a;
        memset(&a, 0, sizeof a);
        a.batch = cs->batch;
        a.in_h = cs->in_h;
        a.in_w = cs->in_w;
        a.in_c = cs->in_c;
        a.in_c_stride = in_stride;
        a.in_c_offset = cs->in_offset;
        a.out_c = cs->out_c;
        a.out_c_stride = out_stride;
        a.out_c_offset = out_offset;
        a.ksize = cs->ksize;
        a.stride = cs->stride;
        a.pad = cs->pad;
        a.in = d_in;
        a.weights = d_w;
        a.mul = o->is_i8 ? d_mul : NULL;
        a.bias = d_bias;
        a.out = g.data;
        a.activation = cs->act;
        a.out_kind = kind;
        a.out_inv_scale = inv_s_out;
        a.fp16_accumulate = o->fp16_accumulate;
        a.tile_config = o->tile_config;
        a.split_k = o->split_k;
        if (o->tile_config >= GR_CONV_TILE_STREAM &&
            gr_conv_check(&a, o->is_i8) == cudaErrorInvalidValue) {
            gr_kernels_clear_failure();
            CUDA_OK(cudaFree(g.base));
            continue;
        }
        ++kinds_run;
        void *d_ws = NULL;
        if (o->use_workspace) {
            a.workspace_bytes =
                o->is_i8 ? gr_conv_workspace_bytes_i8(&a) : gr_conv_workspace_bytes_f16(&a);
            ck_assert_msg(a.workspace_bytes > 0 || o->split_k == 0,
                          "%s: split_k %d asked for but no workspace needed", cs->name, o->split_k);
            if (a.workspace_bytes > 0) {
                CUDA_OK(cudaMalloc(&d_ws, a.workspace_bytes));
                CUDA_OK(cudaMemset(d_ws, 0, a.workspace_bytes));
            }
            a.workspace = d_ws;
        }
        gr_conv_gemm *gemm = NULL;
        if (o->gemm) {
            size_t scratch = 0;
            const cudaError_t made = gr_conv_gemm_create(&a, o->is_i8, lt, &gemm, &scratch);
            /* cuBLASLt without an algorithm or refusing the shape (the tactic search then skips
             * the candidate); the arguments' own checks (cudaErrorInvalidValue) must pass */
            if (made == cudaErrorNotSupported || made == cudaErrorUnknown) {
                gr_kernels_clear_failure();
                --kinds_run;
                CUDA_OK(cudaFree(g.base));
                continue;
            }
            CUDA_OK(made);
            CUDA_OK(cudaMalloc(&d_ws, scratch));
        }
        /* Both runs share the workspace: the second only works if the first left it ready. */
        for (int r = 0; r < 2; ++r) {
            run[r] = xmalloc(out_bytes);
            guarded_poison(&g, pattern[r]);
            CUDA_OK(gemm ? gr_conv_gemm_launch(gemm, &a, d_ws, 0)
                         : o->is_i8 ? gr_launch_conv_i8(&a, 0) : gr_launch_conv_f16(&a, 0));
            CUDA_OK(cudaDeviceSynchronize());
            guarded_fetch(&g, pattern[r], run[r]);
        }
        gr_conv_gemm_destroy(gemm);

        /* Every element outside the written region keeps its poison; inside, both runs agree.
         * idx enumerates [pixel m][channel ch] (NHWC) or [image][channel ch][pixel] (NCHW). */
        size_t mismatches = 0, compared = 0;
        for (int m = 0; m < M; ++m)
            for (int ch = 0; ch < out_stride; ++ch) {
                const size_t idx = (size_t)m * out_stride + (size_t)ch;
                int c, mm;
                if (nchw) {
                    const size_t image = idx / ((size_t)out_stride * hw);
                    c = (int)((idx / (size_t)hw) % (size_t)out_stride) - out_offset;
                    mm = (int)(image * (size_t)hw + idx % (size_t)hw);
                } else {
                    c = ch - out_offset;
                    mm = m;
                }
                const int written = c >= 0 && c < (nchw ? cs->out_c : out_c_pad);
                const size_t es = kind_size(kind);
                if (!written) {
                    for (size_t byte = 0; byte < es; ++byte) {
                        ck_assert_msg(run[0][idx * es + byte] == pattern[0] &&
                                          run[1][idx * es + byte] == pattern[1],
                                      "%s (%s out): channel %d outside the slice was written",
                                      cs->name, gr_conv_tile_name(o->tile_config), c + out_offset);
                    }
                    continue;
                }
                ck_assert_msg(memcmp(run[0] + idx * es, run[1] + idx * es, es) == 0,
                              "%s: out kind %d element %zu differs between runs (unwritten?)",
                              cs->name, kind_i, idx);
                const double got = out_value(run[0], kind, idx);
                if (c >= cs->out_c) {
                    ck_assert_msg(got == 0.0, "%s: padded channel %d holds %g, not 0", cs->name, c,
                                  got);
                    continue;
                }
                const float y = y_ref[(size_t)mm * cs->out_c + c];
                ++compared;
                if (kind == GR_CONV_OUT_I8) {
                    const double want = quantize_ref(y, inv_s_out);
                    if (got != want) {
                        ++mismatches;
                        ck_assert_msg(fabs(got - want) <= i8_max_diff,
                                      "%s: i8 out (m %d, c %d) = %g, reference %g", cs->name, mm,
                                      c, got, want);
                    }
                } else {
                    const double want =
                        kind == GR_CONV_OUT_F16 ? (double)gr_round_f16(y) : (double)y;
                    const double diff = fabs(got - want);
                    ck_assert_msg(diff <= o->tol_rel * (double)y_max,
                                  "%s (%s, tile %s, out kind %d): (m %d, c %d) = %.7g, reference "
                                  "%.7g, |diff| %.3g > %.3g * range %.4g (seed %llu)",
                                  cs->name, o->is_i8 ? "i8" : "f16",
                                  gr_conv_tile_name(o->tile_config), kind_i, mm, c, got, want,
                                  diff, o->tol_rel, (double)y_max, (unsigned long long)test_seed);
                }
            }
        /* Integer accumulation is exact; an i8 output may differ by 1 only where y/s_out sits on a
         * rounding boundary and expf / accumulation order tip it: allow 0.1% of the outputs.
         * (f16 accumulation is inexact by design: there only the size of the difference counts.) */
        ck_assert_msg(o->fp16_accumulate || mismatches * 1000 <= compared,
                      "%s: %zu of %zu i8 outputs differ from the reference (seed %llu)", cs->name,
                      mismatches, compared, (unsigned long long)test_seed);
        free(run[0]);
        free(run[1]);
        CUDA_OK(cudaFree(g.base));
        CUDA_OK(cudaFree(d_ws));
    }

    CUDA_OK(cudaFree(d_in));
    CUDA_OK(cudaFree(d_w));
    CUDA_OK(cudaFree(d_bias));
    CUDA_OK(cudaFree(d_mul));
    free(in_real);
    free(in_i8);
    free(in_f16);
    free(w);
    free(bias);
    free(w_ref);
    free(mul);
    free(y_ref);
    free(packed);
    return kinds_run;
}

/* FP16 operands with f32 accumulation vs. a reference with the same f16 operands accumulated in
 * double: only the summation order differs (relative ~1e-6 of the range), and the f16 output
 * rounding adds at most one f16 ulp, 2^-10 |y| <= 9.8e-4 of the range, hence 1e-3 (+ rounding of
 * the epilogue's f32 sum). */
#define TOL_F16 1.0e-3
/* f16 accumulation: each partial sum is rounded to f16 (2^-11 relative) along K <= 1152 terms,
 * random signs: about sqrt(K) * 2^-11 * |partial| ~ 1e-2 of the range in the worst cases. */
#define TOL_F16_ACC 3.0e-2
/* INT8 conv with f16/f32 output: y is exactly the reference's fmaf; only expf may differ by an ulp
 * and the f16 rounding by one f16 ulp: same bound as FP16. */
#define TOL_I8_FLOAT_OUT 1.0e-3

START_TEST(test_f16_conv_matches_cpu)
{
    const wmma_opts o = {0, 0, 0, TOL_F16, 0, 0, 0};
    run_case(&cases[_i], &o);
}
END_TEST

START_TEST(test_i8_conv_matches_cpu)
{
    const wmma_opts o = {1, 0, 0, TOL_I8_FLOAT_OUT, 0, 0, 0};
    run_case(&cases[_i], &o);
}
END_TEST

/* Every tile shape on shapes that leave partial tiles in M and N. */
START_TEST(test_every_tile_shape)
{
    const int tile = 1 + _i % GR_CONV_TILES;
    const int is_i8 = _i >= GR_CONV_TILES;
    const wmma_opts o = {is_i8, 0, tile, is_i8 ? TOL_I8_FLOAT_OUT : TOL_F16, 0, 0, 0};
    int kinds = run_case(&cases[3], &o); /* 128->255, 17x9 */
    kinds += run_case(&cases[5], &o);    /* 25->40, batch 2, no padding */
    if (tile >= GR_CONV_TILE_STREAM) {    /* odd shapes whose filters fit */
        const int k4 = run_case(&cases[4], &o); /* 16->32 stride 2, batch 3 */
        const int k6 = run_case(&cases[6], &o); /* 64->128 26x26 */
        /* the patch tile's staged input is small: it takes both (stream may refuse fp16 64->128,
         * whose two im2col tiles and filters exceed shared memory) */
        ck_assert_msg(tile != GR_CONV_TILE_PATCH || (k4 > 0 && k6 > 0),
                      "tile %s refused 16->32 s2 (%d kinds) or 64->128 (%d)",
                      gr_conv_tile_name(tile), k4, k6);
        kinds += k4 + k6;
        kinds += run_case(&cases[7], &o); /* 1x1, concat slices in and out */
        kinds += run_case(&cases[8], &o); /* 3 channels, stride 2, output slice */
    } else { /* every output kind, the f32 NCHW slice at an odd channel included */
        ck_assert_int_eq(run_case(&cases[9], &o), 4);
    }
    /* a stream tile refuses NCHW outputs and filters beyond shared memory, never everything */
    ck_assert_msg(kinds >= (tile >= GR_CONV_TILE_STREAM ? 9 : 8),
                  "tile %s ran %d output kinds", gr_conv_tile_name(tile), kinds);
}
END_TEST

/* Split-K: forced and automatic splits on shapes with partial tiles, f16 and i8. */
START_TEST(test_split_k)
{
    const int is_i8 = _i;
    const double tol = is_i8 ? TOL_I8_FLOAT_OUT : TOL_F16;
    const wmma_opts forced = {is_i8, 0, 0, tol, 1, 3, 0};
    const wmma_opts automatic = {is_i8, 0, 0, tol, 1, 0, 0};
    const wmma_opts forced_small_tile = {is_i8, 0, 4, tol, 1, 5, 0};
    run_case(&cases[6], &forced);            /* 64->128 3x3 26x26 */
    run_case(&cases[3], &automatic);         /* 128->255 3x3 17x9 */
    run_case(&cases[2], &automatic);         /* 16->125 1x1 13x13 batch 3 */
    run_case(&cases[7], &forced_small_tile); /* concat slices, 32x64 tiles */
    const wmma_opts split_64x64 = {is_i8, 0, 2, tol, 1, 2, 0};
    const wmma_opts split_128x64 = {is_i8, 0, 1, tol, 1, 4, 0};
    run_case(&cases[3], &split_64x64);  /* 128->255 17x9 */
    run_case(&cases[5], &split_128x64); /* 25->40 pad 0, batch 2 */
    run_case(&cases[10], &forced);      /* output slices, f32 NCHW strided over 2 images */
}
END_TEST

/* The GEMM tactic (cuBLASLt and its epilogue kernel) on the same contract: every output kind
 * cuBLASLt has an algorithm for, the f32 NCHW slices strided over the batch included. */
START_TEST(test_gemm_tactic)
{
    const int is_i8 = _i;
    const wmma_opts o = {is_i8, 0, 0, is_i8 ? TOL_I8_FLOAT_OUT : TOL_F16, 0, 0, 1};
    run_case(&cases[2], &o); /* 16->125 1x1 13x13 batch 3 */
    run_case(&cases[9], &o); /* 3 channels into an f32 NCHW slice at channel 67 */
    /* 128->80 3x3 into a slice at channel 64 of 144, batch 2: cuBLASLt takes every kind */
    ck_assert_int_eq(run_case(&cases[10], &o), 4);
}
END_TEST

/* A grid of several waves: 16->40 3x3 at 104x104, batch 5 (54,080 pixels). On a GPU of up to 132
 * SMs (H100, H200) every tile shape launches at least its occupancy variant's blocks on each SM
 * (kernels/conv_wmma.cu, occupancy_blocks: 423 blocks of 128x64, 1,690 of 32x64) and the GEMM
 * tactic's epilogue takes 8 channels per item (kernels/conv_gemm.cu): the variants the large
 * batches run, which the small shapes above never reach. */
static const conv_case big_grid = {"16->40 3x3 104x104 batch 5 (several waves)", 5, 16, 104, 104, 40,
                                   3, 1, 1, GR_CONV_ACT_LEAKY, 0, 0, 0, 0};

START_TEST(test_big_grid)
{
    const int is_i8 = _i % 2, variant = _i / 2; /* variant 0..3: tile 1..4; 4: the GEMM tactic */
    const double tol = is_i8 ? TOL_I8_FLOAT_OUT : TOL_F16;
    const wmma_opts o = {is_i8, 0, variant < 4 ? 1 + variant : 0, tol, 0, 0, variant == 4};
    const int kinds = run_case(&big_grid, &o); /* every output kind; cuBLASLt may lack one */
    ck_assert_int_ge(kinds, variant < 4 ? 4 : 3);
}
END_TEST

START_TEST(test_f16_accumulate)
{
    const wmma_opts o = {0, 1, 0, TOL_F16_ACC, 0, 0, 0};
    run_case(&cases[3], &o);
    run_case(&cases[6], &o);
}
END_TEST

START_TEST(test_bad_arguments_rejected)
{
    gr_conv_args a;
    memset(&a, 0, sizeof a);
    void *buf = NULL;
    CUDA_OK(cudaMalloc(&buf, 1 << 16));
    a.batch = 1;
    a.in_h = a.in_w = 8;
    a.in_c = 16;
    a.in_c_stride = 16;
    a.out_c = 16;
    a.out_c_stride = 16;
    a.ksize = 3;
    a.stride = 1;
    a.pad = 1;
    a.in = a.weights = a.out = buf;
    a.out_kind = GR_CONV_OUT_F16;
    gr_kernels_clear_failure();
    CUDA_OK(gr_launch_conv_f16(&a, 0));
    CUDA_OK(cudaDeviceSynchronize());
    a.in_c_stride = 12; /* not a multiple of 8 */
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    ck_assert_msg(strstr(gr_kernels_last_failure(), "conv_wmma.cu") != NULL, "message: %s",
                  gr_kernels_last_failure());
    a.in_c_stride = 16;
    a.out = (char *)buf + 8; /* misaligned */
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    a.out = buf;
    a.out_c_offset = 8; /* slice does not fit the stride */
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    a.out_c_offset = 0;
    a.out_kind = GR_CONV_OUT_F32_NCHW; /* an NCHW slice: any offset, but inside the stride */
    a.out_c_stride = 19;
    a.out_c_offset = 3;
    CUDA_OK(gr_launch_conv_f16(&a, 0));
    CUDA_OK(cudaDeviceSynchronize());
    a.out_c_offset = 4;
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    a.out_c_offset = -1;
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    a.out_kind = GR_CONV_OUT_F16;
    a.out_c_stride = 16;
    a.out_c_offset = 0;
    a.in_c = a.in_c_stride = 8; /* fine for f16 (granule 8), not for i8 (granule 16) */
    CUDA_OK(gr_launch_conv_f16(&a, 0));
    ck_assert_int_eq(gr_launch_conv_i8(&a, 0), cudaErrorInvalidValue);
    a.ksize = 11; /* output would be empty */
    a.pad = 0;
    ck_assert_int_eq(gr_launch_conv_f16(&a, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_conv_f16(NULL, 0), cudaErrorInvalidValue);
    CUDA_OK(cudaFree(buf));
}
END_TEST

/* ---- FP32 cuBLAS path --------------------------------------------------------------------------
 */

static void run_f32_case(const conv_case *cs, int tf32, int algo, double tol_rel)
{
    const int oh = gr_conv_out_dim(cs->in_h, cs->ksize, cs->stride, cs->pad);
    const int ow = gr_conv_out_dim(cs->in_w, cs->ksize, cs->stride, cs->pad);
    const int hw = oh * ow, kk = cs->ksize * cs->ksize;
    const size_t n_in = (size_t)cs->batch * cs->in_c * cs->in_h * cs->in_w;
    const size_t n_w = (size_t)cs->out_c * cs->in_c * kk;
    const size_t n_out = (size_t)cs->batch * cs->out_c * hw;
    float *in = xmalloc(n_in * sizeof(float));
    float *w = xmalloc(n_w * sizeof(float));
    float *bias = xmalloc((size_t)cs->out_c * sizeof(float));
    double *ref = xmalloc(n_out * sizeof(double));
    float *got = xmalloc(n_out * sizeof(float));
    for (size_t i = 0; i < n_in; ++i)
        in[i] = 2.0f * gr_rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < n_w; ++i)
        w[i] = gr_rng_normal(&rng) / sqrtf((float)(cs->in_c * kk));
    for (int c = 0; c < cs->out_c; ++c)
        bias[c] = 0.5f * gr_rng_normal(&rng);
    double range = 0.0;
    for (int b = 0; b < cs->batch; ++b)
        for (int c = 0; c < cs->out_c; ++c)
            for (int p = 0; p < hw; ++p) {
                const int oy = p / ow, ox = p % ow;
                double acc = 0.0;
                for (int ci = 0; ci < cs->in_c; ++ci)
                    for (int ky = 0; ky < cs->ksize; ++ky)
                        for (int kx = 0; kx < cs->ksize; ++kx) {
                            const int iy = oy * cs->stride - cs->pad + ky;
                            const int ix = ox * cs->stride - cs->pad + kx;
                            if (iy < 0 || iy >= cs->in_h || ix < 0 || ix >= cs->in_w)
                                continue;
                            acc +=
                                (double)
                                    in[(((size_t)b * cs->in_c + ci) * cs->in_h + iy) * cs->in_w +
                                       ix] *
                                (double)
                                    w[(((size_t)c * cs->in_c + ci) * cs->ksize + ky) * cs->ksize +
                                      kx];
                        }
                const double y = acc + (double)bias[c];
                double a = y;
                switch (cs->act) {
                case GR_CONV_ACT_LEAKY: a = y > 0 ? y : 0.1 * y; break;
                case GR_CONV_ACT_RELU: a = y > 0 ? y : 0.0; break;
                case GR_CONV_ACT_LOGISTIC: a = 1.0 / (1.0 + exp(-y)); break;
                default: break;
                }
                ref[((size_t)b * cs->out_c + c) * hw + p] = a;
                range = fmax(range, fabs(a));
            }

    gr_conv_f32_args a;
    memset(&a, 0, sizeof a);
    a.batch = cs->batch;
    a.in_c = cs->in_c;
    a.in_h = cs->in_h;
    a.in_w = cs->in_w;
    a.out_c = cs->out_c;
    a.ksize = cs->ksize;
    a.stride = cs->stride;
    a.pad = cs->pad;
    a.activation = cs->act;
    a.tf32 = tf32;
    a.algo = algo;
    int ok = 0;
    const size_t ws = gr_conv_f32_workspace_floats(&a, &ok);
    ck_assert(ok);
    a.in = upload(in, n_in * sizeof(float));
    a.weights = upload(w, n_w * sizeof(float));
    a.bias = upload(bias, (size_t)cs->out_c * sizeof(float));
    if (ws)
        CUDA_OK(cudaMalloc((void **)&a.workspace, ws * sizeof(float)));
    guarded g = guarded_alloc(n_out * sizeof(float));
    a.out = g.data;
    cublasHandle_t h = NULL;
    ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    guarded_poison(&g, 0xA5);
    cudaError_t cerr = cudaSuccess;
    ck_assert_msg(gr_launch_conv_f32(h, &a, 0, &cerr) == CUBLAS_STATUS_SUCCESS, "%s: %s", cs->name,
                  gr_kernels_last_failure());
    CUDA_OK(cudaDeviceSynchronize());
    guarded_fetch(&g, 0xA5, got);
    for (size_t i = 0; i < n_out; ++i)
        ck_assert_msg(fabs((double)got[i] - ref[i]) <= tol_rel * range,
                      "%s (%s): element %zu = %.8g, reference %.8g (range %.4g, seed %llu)",
                      cs->name,
                      algo ? (algo == 2 ? "3xtf32 implicit" : "3xtf32") : (tf32 ? "tf32" : "fp32"),
                      i, (double)got[i], ref[i], range, (unsigned long long)test_seed);
    cublasDestroy(h);
    CUDA_OK(cudaFree((void *)a.in));
    CUDA_OK(cudaFree((void *)a.weights));
    CUDA_OK(cudaFree((void *)a.bias));
    CUDA_OK(cudaFree(a.workspace));
    CUDA_OK(cudaFree(g.base));
    free(in);
    free(w);
    free(bias);
    free(ref);
    free(got);
}

/* Exact FP32 (IEEE FMA, some summation order) vs. double: for K <= 1152 terms of size <= ~0.1 the
 * rounding error is ~sqrt(K) * 6e-8 * |terms|, far under 1e-5 of the output range. */
START_TEST(test_f32_cublas_matches_cpu)
{
    if (_i == 1)
        return; /* the 416x416 shape is covered by the FP16/INT8 runs; keep FP32 fast */
    run_f32_case(&cases[_i], 0, GR_CONV_F32_SGEMM, 1.0e-5);
}
END_TEST

/* The 3xTF32 GEMM (sm_80+; the engine's fp32 default there), after im2col and with the implicit
 * im2col: FP32-level, the same bound
 * (tests/test_gpu_gemm_f32.c derives it per element and shows plain TF32 fails it). */
START_TEST(test_f32_tf32x3_matches_cpu)
{
    int dev = 0, major = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8)
        return;
    run_f32_case(&cases[_i], 0, GR_CONV_F32_TF32X3, 1.0e-5);
    run_f32_case(&cases[_i], 0, GR_CONV_F32_TF32X3_IMPLICIT, 1.0e-5);
}
END_TEST

/* TF32 rounds both operands to 10 mantissa bits (2^-11 relative each): ~sqrt(K) * 1e-3 * |term|,
 * about 5e-4 of the range here; 5e-3 leaves a 10x margin. */
START_TEST(test_tf32_cublas_matches_cpu)
{
    run_f32_case(&cases[3], 1, GR_CONV_F32_SGEMM, 5.0e-3);
    run_f32_case(&cases[6], 1, GR_CONV_F32_SGEMM, 5.0e-3);
}
END_TEST

static Suite *conv_suite(void)
{
    Suite *s = suite_create("gpu_conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bad_arguments_rejected);
    tcase_add_loop_test(tc, test_f16_conv_matches_cpu, 0, N_CASES);
    tcase_add_loop_test(tc, test_i8_conv_matches_cpu, 0, N_CASES);
    tcase_add_loop_test(tc, test_every_tile_shape, 0, 2 * GR_CONV_TILES);
    tcase_add_test(tc, test_f16_accumulate);
    tcase_add_loop_test(tc, test_split_k, 0, 2);
    tcase_add_loop_test(tc, test_gemm_tactic, 0, 2);
    tcase_add_loop_test(tc, test_big_grid, 0, 10);
    tcase_add_loop_test(tc, test_f32_cublas_matches_cpu, 0, N_CASES);
    tcase_add_loop_test(tc, test_f32_tf32x3_matches_cpu, 0, N_CASES);
    tcase_add_test(tc, test_tf32_cublas_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_conv"))
        return 77;
    const char *seed_env = getenv("GR_TEST_SEED");
    test_seed = seed_env ? strtoull(seed_env, NULL, 10)
                         : ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)clock();
    printf("gpu_conv: seed %llu (GR_TEST_SEED=%llu repeats this run)\n",
           (unsigned long long)test_seed, (unsigned long long)test_seed);
    gr_rng_seed(&rng, test_seed);
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        printf("gpu_conv: cublasLtCreate failed\n");
        return 1;
    }
    int failed = gr_test_run_in_process(conv_suite());
    cublasLtDestroy(lt);
    return failed == 0 ? 0 : 1;
}
#endif
