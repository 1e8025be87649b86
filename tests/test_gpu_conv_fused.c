/* The convolution kernels' fusions (kernels/conv.h) against a CPU computation written here:
 *   - a 2x2 maxpool fused into the tensor-core conv's epilogue (stride 2 and Darknet's stride-1
 *     pool with its right/bottom padding, odd map sizes, every tile shape, split-K);
 *   - the first-layer kernel reading the uint8 network input (quantize + conv + pool in one);
 *   - programmatic dependent launches captured in a CUDA graph give the eager results;
 *   - the GEMM tactic (kernels/conv_gemm.h: im2col + cuBLASLt + epilogue) on the same cases.
 * INT8 results must equal the reference exactly: the sums are exact in int32 and the epilogue is
 * the same f32 expression (fmaf, leaky 0.1f*y, rint); FP16 within 1e-3 of the output range (f32
 * accumulation order and one f16 rounding, as in test_gpu_conv.c). Outputs are poisoned and
 * guarded: an unwritten element or a stray write fails. Fresh seed per run (GR_TEST_SEED=N
 * repeats one). Exits 77 without a CUDA device. */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("SKIP test_gpu_conv_fused: graphrun was built without CUDA\n");
    return 77;
}
#else

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>
#include <cuda_runtime_api.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/conv_gemm.h"
#include "base/base.h"
#include "tests/support/gpu_test.h"

#define GUARD 256
#define TOL_F16 1.0e-3

#define CUDA_OK(stmt)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s (%s)", #stmt, cudaGetErrorName(e_),               \
                      gr_kernels_last_failure());                                                  \
    } while (0)

static uint64_t test_seed;
static gr_rng rng;
static cublasLtHandle_t lt; /* for the GEMM tactic */

typedef struct fcase {
    const char *name;
    int batch, in_c, in_h, in_w, out_c, ksize, stride, pad, act;
    int pool_stride, pool_pad; /* pool size 2; pool_stride 0 = no pool */
    int in_u8;                 /* first-layer kernel */
    int out_offset, out_extra; /* output channel slice */
    int neg_mul; /* int8: every third filter's multiplier negated (activate, then pool) */
} fcase;

static const fcase cases[] = {
    {"16->32 3x3 26x26, pool 2/2", 1, 16, 26, 26, 32, 3, 1, 1, GR_CONV_ACT_LEAKY, 2, 1, 0, 0, 0, 0},
    {"32->48 3x3 13x11 batch 2, pool 2/2 (odd: padded)", 2, 32, 11, 13, 48, 3, 1, 1,
     GR_CONV_ACT_LEAKY, 2, 1, 0, 0, 0, 0},
    {"64->40 3x3 13x13, pool 2/1 (Darknet's size-keeping pool)", 1, 64, 13, 13, 40, 3, 1, 1,
     GR_CONV_ACT_LEAKY, 1, 1, 0, 0, 0, 0},
    {"128->64 3x3 9x7 batch 3, pool 2/1, output slice", 3, 128, 7, 9, 64, 3, 1, 1,
     GR_CONV_ACT_RELU, 1, 1, 0, 16, 32, 0},
    {"256->96 1x1 12x12 stride 2 conv, pool 2/2 pad 0", 1, 256, 12, 12, 96, 1, 2, 0,
     GR_CONV_ACT_LINEAR, 2, 0, 0, 0, 0, 0},
    {"96->40 1x1 13x13 batch 2, no pool (the GEMM reads the input in place)", 2, 96, 13, 13, 40,
     1, 1, 0, GR_CONV_ACT_LINEAR, 0, 0, 0, 0, 0, 0},
    {"u8 3->16 3x3 416x416 batch 2, pool 2/2 (YOLO's first layer; more tiles than blocks)", 2, 3,
     416, 416, 16, 3, 1, 1, GR_CONV_ACT_LEAKY, 2, 1, 1, 0, 0, 0},
    {"u8 3->16 3x3 33x21 batch 2, pool 2/2", 2, 3, 21, 33, 16, 3, 1, 1, GR_CONV_ACT_LEAKY, 2, 1, 1,
     0, 0, 0},
    {"u8 3->40 3x3 17x9 batch 2, no pool, output slice", 2, 3, 9, 17, 40, 3, 1, 1,
     GR_CONV_ACT_LEAKY, 0, 0, 1, 16, 16, 0},
    {"u8 3->24 5x5 s2 23x19, pool 2/1", 1, 3, 19, 23, 24, 5, 2, 2, GR_CONV_ACT_RELU, 1, 1, 1, 0,
     0, 0},
    {"u8 3->32 3x3 s2 31x27 batch 3, pool 2/1 (its padded taps)", 3, 3, 27, 31, 32, 3, 2, 1,
     GR_CONV_ACT_LEAKY, 1, 1, 1, 0, 0, 0},
    {"u8 4->12 3x3 19x23 batch 2, pool 2/2 pad 1, output slice", 2, 4, 23, 19, 12, 3, 1, 1,
     GR_CONV_ACT_RELU, 2, 1, 1, 16, 16, 0},
    {"16->32 3x3 160x120 batch 8, pool 2/2 (patch: tiles across a row, both stages)", 8, 16, 120,
     160, 32, 3, 1, 1, GR_CONV_ACT_LEAKY, 2, 1, 0, 0, 0, 0},
    {"16->32 3x3 s2 41x37 batch 2, pool 2/2, negative multipliers", 2, 16, 37, 41, 32, 3, 2, 1,
     GR_CONV_ACT_RELU, 2, 1, 0, 0, 0, 1},
    {"u8 3->24 3x3 s2 83x61 batch 5, pool 2/2, negative multipliers", 5, 3, 61, 83, 24, 3, 2, 1,
     GR_CONV_ACT_LEAKY, 2, 1, 1, 0, 0, 1},
    {"u8 3->8 3x3 37x29, pool 2/2 pad 0, logistic (fp16 only)", 1, 3, 29, 37, 8, 3, 1, 1,
     GR_CONV_ACT_LOGISTIC, 2, 0, 1, 0, 0, 0},
    /* unpooled first layers (the tensor-core kernel's 2x2 blocks of conv pixels) */
    {"u8 3->32 3x3 s2 416x416 batch 3, no pool (yolov4-tiny's first layer; more tiles than "
     "blocks)", 3, 3, 416, 416, 32, 3, 2, 1, GR_CONV_ACT_LEAKY, 0, 0, 1, 0, 0, 0},
    {"u8 3->32 3x3 s1 13x17 batch 2, no pool (odd map)", 2, 3, 17, 13, 32, 3, 1, 1,
     GR_CONV_ACT_LEAKY, 0, 0, 1, 0, 0, 0},
    {"u8 3->24 3x3 s2 37x29 batch 2, no pool, output slice, negative multipliers", 2, 3, 29, 37,
     24, 3, 2, 1, GR_CONV_ACT_RELU, 0, 0, 1, 16, 16, 1},
    {"u8 3->16 3x3 s1 45x23 batch 2, no pool (16 filters)", 2, 3, 23, 45, 16, 3, 1, 1,
     GR_CONV_ACT_LINEAR, 0, 0, 1, 0, 0, 0},
    {"u8 4->32 3x3 s2 19x21, no pool, logistic (fp16 only)", 1, 4, 21, 19, 32, 3, 2, 1,
     GR_CONV_ACT_LOGISTIC, 0, 0, 1, 0, 0, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int round_up(int v, int to)
{
    return (v + to - 1) / to * to;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void *upload(const void *host, size_t bytes)
{
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, bytes));
    CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    return dev;
}

static float act_ref(float y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LEAKY: return y > 0.0f ? y : 0.1f * y;
    case GR_CONV_ACT_RELU: return y > 0.0f ? y : 0.0f;
    case GR_CONV_ACT_LOGISTIC: return 1.0f / (1.0f + expf(-y)); /* Darknet's logistic */
    default: return y;
    }
}

/* Everything a case needs on both sides. */
typedef struct prepared {
    int is_i8, gran, cin_pad, in_stride, oh, ow, ph, pw, out_pixels, ogran, out_c_pad, out_stride;
    size_t in_bytes, out_bytes;
    void *in_host;   /* u8, i8 or f16 bits, NHWC with in_stride channels */
    float *in_real;  /* the operand each input element stands for (quantized / half-rounded) */
    float *w_ref;    /* [out_c][in_c][k][k] operands (q_w or half) */
    void *packed;    /* [out_c][k][k][cin_pad] */
    float *mul, *bias;
    float s_in, inv_s_out;
    float *y_ref;    /* [out_pixels][out_c] activated, pooled, before the output conversion */
    float y_max;
} prepared;

static void prepare(const fcase *cs, int is_i8, prepared *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->is_i8 = is_i8;
    pr->gran = is_i8 ? 16 : 8;
    pr->cin_pad = round_up(cs->in_c, pr->gran);
    pr->in_stride = cs->in_u8 ? cs->in_c : pr->cin_pad;
    pr->oh = gr_conv_out_dim(cs->in_h, cs->ksize, cs->stride, cs->pad);
    pr->ow = gr_conv_out_dim(cs->in_w, cs->ksize, cs->stride, cs->pad);
    pr->ph = cs->pool_stride ? (pr->oh + cs->pool_pad - 2) / cs->pool_stride + 1 : pr->oh;
    pr->pw = cs->pool_stride ? (pr->ow + cs->pool_pad - 2) / cs->pool_stride + 1 : pr->ow;
    pr->out_pixels = cs->batch * pr->ph * pr->pw;
    pr->ogran = is_i8 ? 16 : 8;
    pr->out_c_pad = round_up(cs->out_c, pr->ogran);
    pr->out_stride = cs->out_offset + pr->out_c_pad + cs->out_extra;
    pr->s_in = cs->in_u8 ? 0.0041f : 0.02f;

    const size_t in_px = (size_t)cs->batch * cs->in_h * cs->in_w;
    const size_t n_in = in_px * (size_t)pr->in_stride;
    const size_t esize = cs->in_u8 ? 1 : (is_i8 ? 1 : 2);
    pr->in_bytes = n_in * esize;
    pr->in_host = xmalloc(pr->in_bytes);
    pr->in_real = xmalloc(n_in * sizeof(float));
    for (size_t i = 0; i < n_in; ++i) {
        const int ch = (int)(i % (size_t)pr->in_stride);
        const int pad_ch = ch >= cs->in_c;
        if (cs->in_u8) {
            const uint8_t v = (uint8_t)(gr_rng_u64(&rng) & 0xff);
            ((uint8_t *)pr->in_host)[i] = v;
            const float x = (float)v / 255.0f;
            pr->in_real[i] = is_i8 ? fminf(fmaxf(rintf(x / pr->s_in), -127.0f), 127.0f)
                                   : gr_round_f16(x);
        } else if (is_i8) {
            const int q = pad_ch ? 0 : (int)(gr_rng_u64(&rng) % 255) - 127;
            ((int8_t *)pr->in_host)[i] = (int8_t)q;
            pr->in_real[i] = (float)q;
        } else {
            const float h = pad_ch ? 0.0f : gr_round_f16(2.0f * gr_rng_uniform(&rng) - 1.0f);
            ((uint16_t *)pr->in_host)[i] = gr_f32_to_f16(h);
            pr->in_real[i] = h;
        }
    }

    const int kk = cs->ksize * cs->ksize, fan = cs->in_c * kk;
    pr->w_ref = xmalloc((size_t)cs->out_c * fan * sizeof(float));
    pr->mul = xmalloc((size_t)cs->out_c * sizeof(float));
    pr->bias = xmalloc((size_t)cs->out_c * sizeof(float));
    const size_t n_packed = (size_t)cs->out_c * kk * pr->cin_pad;
    pr->packed = xmalloc(n_packed * (is_i8 ? 1 : 2));
    memset(pr->packed, 0, n_packed * (is_i8 ? 1 : 2));
    float *w = xmalloc((size_t)fan * sizeof(float));
    for (int c = 0; c < cs->out_c; ++c) {
        float max_abs = 0.0f;
        for (int k = 0; k < fan; ++k) {
            w[k] = gr_rng_normal(&rng) / sqrtf((float)fan);
            max_abs = fmaxf(max_abs, fabsf(w[k]));
        }
        const float s_w = max_abs / 127.0f;
        pr->mul[c] = pr->s_in * s_w * (cs->neg_mul && c % 3 == 1 ? -1.0f : 1.0f);
        pr->bias[c] = 0.5f * gr_rng_normal(&rng);
        for (int ci = 0; ci < cs->in_c; ++ci)
            for (int t = 0; t < kk; ++t) {
                const float v = w[ci * kk + t];
                const float op = is_i8 ? fminf(fmaxf(rintf(v / s_w), -127.0f), 127.0f)
                                       : gr_round_f16(v);
                pr->w_ref[((size_t)c * cs->in_c + ci) * kk + t] = op;
                const size_t at = ((size_t)c * kk + t) * pr->cin_pad + ci;
                if (is_i8)
                    ((int8_t *)pr->packed)[at] = (int8_t)op;
                else
                    ((uint16_t *)pr->packed)[at] = gr_f32_to_f16(op);
            }
    }
    free(w);

    /* The conv, activated, then the pool window's maximum over the taps inside the map. */
    float *conv = xmalloc((size_t)cs->batch * pr->oh * pr->ow * cs->out_c * sizeof(float));
    for (int b = 0; b < cs->batch; ++b)
        for (int oy = 0; oy < pr->oh; ++oy)
            for (int ox = 0; ox < pr->ow; ++ox)
                for (int c = 0; c < cs->out_c; ++c) {
                    double acc = 0.0;
                    for (int ci = 0; ci < cs->in_c; ++ci)
                        for (int ky = 0; ky < cs->ksize; ++ky)
                            for (int kx = 0; kx < cs->ksize; ++kx) {
                                const int iy = oy * cs->stride - cs->pad + ky;
                                const int ix = ox * cs->stride - cs->pad + kx;
                                if (iy < 0 || iy >= cs->in_h || ix < 0 || ix >= cs->in_w)
                                    continue;
                                const size_t ii =
                                    (((size_t)b * cs->in_h + iy) * cs->in_w + ix) * pr->in_stride +
                                    ci;
                                acc += (double)pr->in_real[ii] *
                                       (double)pr->w_ref[((size_t)c * cs->in_c + ci) * kk +
                                                 ky * cs->ksize + kx];
                            }
                    /* i8: acc is an exact integer below 2^24 here, so (float)acc is exact. */
                    const float y = is_i8 ? fmaf((float)acc, pr->mul[c], pr->bias[c])
                                          : (float)acc + pr->bias[c];
                    conv[(((size_t)b * pr->oh + oy) * pr->ow + ox) * cs->out_c + c] =
                        act_ref(y, cs->act);
                }
    pr->y_ref = xmalloc((size_t)pr->out_pixels * cs->out_c * sizeof(float));
    const int off = -cs->pool_pad / 2;
    for (int b = 0; b < cs->batch; ++b)
        for (int py = 0; py < pr->ph; ++py)
            for (int px = 0; px < pr->pw; ++px)
                for (int c = 0; c < cs->out_c; ++c) {
                    float best = -FLT_MAX;
                    const int taps = cs->pool_stride ? 2 : 1;
                    for (int dy = 0; dy < taps; ++dy)
                        for (int dx = 0; dx < taps; ++dx) {
                            const int y = cs->pool_stride ? py * cs->pool_stride + off + dy : py;
                            const int x = cs->pool_stride ? px * cs->pool_stride + off + dx : px;
                            if (y < 0 || y >= pr->oh || x < 0 || x >= pr->ow)
                                continue;
                            const float v =
                                conv[(((size_t)b * pr->oh + y) * pr->ow + x) * cs->out_c + c];
                            best = v > best ? v : best;
                        }
                    pr->y_ref[(((size_t)b * pr->ph + py) * pr->pw + px) * cs->out_c + c] = best;
                    pr->y_max = fmaxf(pr->y_max, fabsf(best));
                }
    free(conv);
    pr->inv_s_out = 1.0f / (pr->y_max / 100.0f);
    pr->out_bytes = (size_t)pr->out_pixels * pr->out_stride * (is_i8 ? 1 : 2);
}

static void prepared_free(prepared *pr)
{
    free(pr->in_host);
    free(pr->in_real);
    free(pr->w_ref);
    free(pr->packed);
    free(pr->mul);
    free(pr->bias);
    free(pr->y_ref);
}

typedef struct device_case {
    void *in, *w, *mul, *bias, *ws;
    unsigned char *out_base; /* GUARD bytes, payload, GUARD bytes */
} device_case;

static gr_conv_args make_args(const fcase *cs, const prepared *pr, const device_case *d)
{
    gr_conv_args a;
    memset(&a, 0, sizeof a);
    a.batch = cs->batch;
    a.in_h = cs->in_h;
    a.in_w = cs->in_w;
    a.in_c = cs->in_c;
    a.in_c_stride = pr->in_stride;
    a.out_c = cs->out_c;
    a.out_c_stride = pr->out_stride;
    a.out_c_offset = cs->out_offset;
    a.ksize = cs->ksize;
    a.stride = cs->stride;
    a.pad = cs->pad;
    a.in = d->in;
    a.weights = d->w;
    a.mul = pr->is_i8 ? d->mul : NULL;
    a.bias = d->bias;
    a.out = d->out_base + GUARD;
    a.activation = cs->act;
    a.out_kind = pr->is_i8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16;
    a.out_inv_scale = pr->inv_s_out;
    a.pool_size = cs->pool_stride ? 2 : 0;
    a.pool_stride = cs->pool_stride;
    a.pool_pad = cs->pool_pad;
    a.in_u8 = cs->in_u8;
    a.in_scale = pr->s_in;
    return a;
}

static cudaError_t launch(const gr_conv_args *a, int is_i8, cudaStream_t s)
{
    return is_i8 ? gr_launch_conv_i8(a, s) : gr_launch_conv_f16(a, s);
}

/* Compare one fetched output (guards included) with the reference. The wrong values are counted
 * and the first one described, then asserted once: an assertion per value (a Check mark each)
 * made the 416x416 cases the suite's time. */
static void check_output(const fcase *cs, const prepared *pr, const unsigned char *all, int pattern,
                         const char *variant)
{
    size_t bad = 0;
    char first[256] = "";
#define NOTE_BAD(...)                                                                              \
    do {                                                                                           \
        if (bad++ == 0)                                                                            \
            snprintf(first, sizeof first, __VA_ARGS__);                                            \
    } while (0)
    for (int i = 0; i < GUARD; ++i)
        if (all[i] != pattern || all[GUARD + pr->out_bytes + i] != pattern)
            NOTE_BAD("guard byte %d changed", i);
    const unsigned char *out = all + GUARD;
    for (int px = 0; px < pr->out_pixels; ++px)
        for (int ch = 0; ch < pr->out_stride; ++ch) {
            const size_t idx = (size_t)px * pr->out_stride + ch;
            const int c = ch - cs->out_offset;
            if (c < 0 || c >= pr->out_c_pad) {
                const size_t es = pr->is_i8 ? 1 : 2;
                for (size_t k = 0; k < es; ++k)
                    if (out[idx * es + k] != pattern)
                        NOTE_BAD("pixel %d channel %d outside the slice written", px, ch);
                continue;
            }
            const double got = pr->is_i8 ? (double)((const int8_t *)out)[idx]
                                         : (double)gr_f16_to_f32(((const uint16_t *)out)[idx]);
            if (c >= cs->out_c) {
                if (got != 0.0)
                    NOTE_BAD("pixel %d padding channel %d = %g", px, c, got);
                continue;
            }
            const float y = pr->y_ref[(size_t)px * cs->out_c + c];
            if (pr->is_i8) {
                const double want = fminf(fmaxf(rintf(y * pr->inv_s_out), -127.0f), 127.0f);
                if (got != want)
                    NOTE_BAD("pixel %d channel %d = %g, reference %g", px, c, got, want);
            } else {
                const double want = gr_round_f16(y);
                if (!(fabs(got - want) <= TOL_F16 * (double)pr->y_max))
                    NOTE_BAD("pixel %d channel %d = %.6g, reference %.6g", px, c, got, want);
            }
        }
#undef NOTE_BAD
    ck_assert_msg(bad == 0, "%s (%s): %zu wrong bytes or values, the first: %s (seed %llu)",
                  cs->name, variant, bad, first, (unsigned long long)test_seed);
}

static void run_variants(const fcase *cs, int is_i8)
{
    /* int8 is checked bit for bit; the host's expf and the device's may differ by an ulp, which
     * can flip an output's rounding: the logistic cases run in fp16 (tolerance) only. */
    if (is_i8 && cs->act == GR_CONV_ACT_LOGISTIC)
        return;
    prepared pr;
    prepare(cs, is_i8, &pr);
    ck_assert_msg(pr.y_max > 0.0f, "%s: degenerate reference", cs->name);
    device_case d;
    memset(&d, 0, sizeof d);
    d.in = upload(pr.in_host, pr.in_bytes);
    d.w = upload(pr.packed, (size_t)cs->out_c * cs->ksize * cs->ksize * pr.cin_pad * (is_i8 ? 1 : 2));
    d.mul = upload(pr.mul, (size_t)cs->out_c * sizeof(float));
    d.bias = upload(pr.bias, (size_t)cs->out_c * sizeof(float));
    const size_t total = pr.out_bytes + 2 * GUARD;
    CUDA_OK(cudaMalloc((void **)&d.out_base, total));
    unsigned char *host = xmalloc(total);

    /* Tensor-core kernel: every tile shape, then automatic tiles split along K, then the GEMM
     * tactic. First layer: the SIMT kernel and the tensor-core one (tile 5; tile 6 at 2 blocks
     * per SM). */
    const int n_variants = cs->in_u8 ? 3 : GR_CONV_TILES + 3;
    for (int v = 0; v < n_variants; ++v) {
        gr_conv_args a = make_args(cs, &pr, &d);
        char name[64];
        gr_conv_gemm *gemm = NULL;
        if (cs->in_u8) { /* the SIMT kernel, then the tensor-core one */
            a.tile_config = v == 0 ? 0 : (v == 1 ? GR_CONV_TILE_STREAM : GR_CONV_TILE_STREAM_SMALL);
            snprintf(name, sizeof name, "%s",
                     v == 0 ? "SIMT first layer"
                            : (v == 1 ? "tensor-core first layer" : "tensor-core first layer, 2/SM"));
            if (v && gr_conv_check(&a, is_i8) == cudaErrorInvalidValue) {
                /* it takes 3x3 convs of strides <= 2 and at most 32 filters only, pooled or not;
                 * tile 6 only more than 16 (padded) filters */
                ck_assert_msg(cs->ksize != 3 || cs->stride > 2 || cs->out_c > 32 ||
                                  (v == 2 && pr.out_c_pad <= 16),
                              "%s: the %s refused it: %s", cs->name, name,
                              gr_kernels_last_failure());
                gr_kernels_clear_failure();
                continue;
            }
        } else if (v == GR_CONV_TILES + 2) {
            size_t scratch = 0;
            CUDA_OK(gr_conv_gemm_create(&a, is_i8, lt, &gemm, &scratch));
            ck_assert_msg(scratch > 0, "%s: the GEMM tactic needs scratch", cs->name);
            CUDA_OK(cudaMalloc(&d.ws, scratch));
            snprintf(name, sizeof name, "GEMM tactic");
        } else if (v <= GR_CONV_TILES) {
            a.tile_config = v;
            snprintf(name, sizeof name, "tile %s", gr_conv_tile_name(v));
            /* the stream tiles refuse filters that do not fit in shared memory (conv.h); the
             * first case (YOLO's 16->32 layer, pooled) fits in every precision */
            if (v >= GR_CONV_TILE_STREAM && gr_conv_check(&a, is_i8) == cudaErrorInvalidValue) {
                ck_assert_msg(cs != &cases[0], "%s: tile %s refused it: %s", cs->name,
                              gr_conv_tile_name(v), gr_kernels_last_failure());
                gr_kernels_clear_failure();
                continue;
            }
        } else {
            a.split_k = 3;
            a.workspace_bytes =
                is_i8 ? gr_conv_workspace_bytes_i8(&a) : gr_conv_workspace_bytes_f16(&a);
            ck_assert_msg(a.workspace_bytes > 0, "%s: a forced split needs a workspace", cs->name);
            CUDA_OK(cudaMalloc(&d.ws, a.workspace_bytes));
            CUDA_OK(cudaMemset(d.ws, 0, a.workspace_bytes));
            a.workspace = d.ws;
            snprintf(name, sizeof name, "split-K 3");
        }
        const int pattern[2] = {0xA5, 0x3C};
        for (int r = 0; r < 2; ++r) { /* two runs: the second reuses the split-K counters */
            CUDA_OK(cudaMemset(d.out_base, pattern[r], total));
            CUDA_OK(gemm ? gr_conv_gemm_launch(gemm, &a, d.ws, 0) : launch(&a, is_i8, 0));
            CUDA_OK(cudaDeviceSynchronize());
            CUDA_OK(cudaMemcpy(host, d.out_base, total, cudaMemcpyDeviceToHost));
            check_output(cs, &pr, host, pattern[r], name);
        }
        gr_conv_gemm_destroy(gemm);
        if (d.ws) {
            CUDA_OK(cudaFree(d.ws));
            d.ws = NULL;
        }
    }
    free(host);
    CUDA_OK(cudaFree(d.in));
    CUDA_OK(cudaFree(d.w));
    CUDA_OK(cudaFree(d.mul));
    CUDA_OK(cudaFree(d.bias));
    CUDA_OK(cudaFree(d.out_base));
    prepared_free(&pr);
}

START_TEST(test_i8_fused_matches_cpu)
{
    run_variants(&cases[_i], 1);
}
END_TEST

START_TEST(test_f16_fused_matches_cpu)
{
    run_variants(&cases[_i], 0);
}
END_TEST

/* Two dependent convs (first layer from u8, then a pooled conv reading its output), launched
 * with programmatic dependent launch inside stream capture and replayed: the graph's result
 * equals the plain eager launches' byte for byte, replay after replay. */
START_TEST(test_pdl_graph_equals_eager)
{
    const fcase first = {"u8 3->16 3x3 64x48, pool 2/2", 1, 3, 48, 64, 16, 3, 1, 1,
                         GR_CONV_ACT_LEAKY, 2, 1, 1, 0, 0, 0};
    prepared p1;
    prepare(&first, 1, &p1);
    device_case d1;
    memset(&d1, 0, sizeof d1);
    d1.in = upload(p1.in_host, p1.in_bytes);
    d1.w = upload(p1.packed, (size_t)16 * 9 * 16);
    d1.mul = upload(p1.mul, 16 * sizeof(float));
    d1.bias = upload(p1.bias, 16 * sizeof(float));
    CUDA_OK(cudaMalloc((void **)&d1.out_base, p1.out_bytes + 2 * GUARD));
    gr_conv_args a1 = make_args(&first, &p1, &d1);

    /* Second conv: 16 -> 64 on the 32x24 pooled map, pooled again; random int8 weights. */
    const int oc = 64, kk = 9, cin = 16;
    int8_t *w2 = xmalloc((size_t)oc * kk * cin);
    float *mul2 = xmalloc(oc * sizeof(float)), *bias2 = xmalloc(oc * sizeof(float));
    for (int i = 0; i < oc * kk * cin; ++i)
        w2[i] = (int8_t)((int)(gr_rng_u64(&rng) % 255) - 127);
    for (int c = 0; c < oc; ++c) {
        mul2[c] = 1e-4f * (1.0f + gr_rng_uniform(&rng));
        bias2[c] = gr_rng_normal(&rng);
    }
    void *dw2 = upload(w2, (size_t)oc * kk * cin), *dmul2 = upload(mul2, oc * sizeof(float));
    void *dbias2 = upload(bias2, oc * sizeof(float));
    const size_t out2_bytes = (size_t)16 * 12 * oc;
    void *dout2 = NULL;
    CUDA_OK(cudaMalloc(&dout2, out2_bytes));
    gr_conv_args a2;
    memset(&a2, 0, sizeof a2);
    a2.batch = 1;
    a2.in_h = 24;
    a2.in_w = 32;
    a2.in_c = cin;
    a2.in_c_stride = 16;
    a2.out_c = oc;
    a2.out_c_stride = oc;
    a2.ksize = 3;
    a2.stride = 1;
    a2.pad = 1;
    a2.in = a1.out;
    a2.weights = dw2;
    a2.mul = dmul2;
    a2.bias = dbias2;
    a2.out = dout2;
    a2.activation = GR_CONV_ACT_LEAKY;
    a2.out_kind = GR_CONV_OUT_I8;
    a2.out_inv_scale = 8.0f;
    a2.pool_size = 2;
    a2.pool_stride = 2;
    a2.pool_pad = 1;

    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char *eager = xmalloc(out2_bytes), *replayed = xmalloc(out2_bytes);
    CUDA_OK(gr_launch_conv_i8(&a1, s));
    CUDA_OK(gr_launch_conv_i8(&a2, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(eager, dout2, out2_bytes, cudaMemcpyDeviceToHost));

    a1.pdl = a2.pdl = 1;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUDA_OK(gr_launch_conv_i8(&a1, s));
    CUDA_OK(gr_launch_conv_i8(&a2, s));
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 20; ++r) {
        CUDA_OK(cudaMemset(dout2, 0x5A + r, out2_bytes));
        CUDA_OK(cudaMemset(d1.out_base + GUARD, 0x11 * r, p1.out_bytes));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaMemcpy(replayed, dout2, out2_bytes, cudaMemcpyDeviceToHost));
        ck_assert_msg(memcmp(eager, replayed, out2_bytes) == 0, "replay %d differs from eager", r);
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(s));
    free(eager);
    free(replayed);
    free(w2);
    free(mul2);
    free(bias2);
    CUDA_OK(cudaFree(dw2));
    CUDA_OK(cudaFree(dmul2));
    CUDA_OK(cudaFree(dbias2));
    CUDA_OK(cudaFree(dout2));
    CUDA_OK(cudaFree(d1.in));
    CUDA_OK(cudaFree(d1.w));
    CUDA_OK(cudaFree(d1.mul));
    CUDA_OK(cudaFree(d1.bias));
    CUDA_OK(cudaFree(d1.out_base));
    prepared_free(&p1);
}
END_TEST

/* Arguments the fused paths cannot take are refused with the failed check recorded. */
START_TEST(test_fused_bad_arguments)
{
    static char buf[256];
    gr_conv_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1;
    a.in_h = a.in_w = 8;
    a.in_c = 16;
    a.in_c_stride = 16;
    a.out_c = 16;
    a.out_c_stride = 16;
    a.ksize = 3;
    a.stride = a.pad = 1;
    a.in = a.weights = a.out = buf + (16 - (uintptr_t)buf % 16) % 16;
    a.out_kind = GR_CONV_OUT_I8;
    a.pool_size = 3; /* only 2x2 pools are fused */
    a.pool_stride = 2;
    gr_kernels_clear_failure();
    ck_assert_int_eq(gr_launch_conv_i8(&a, 0), cudaErrorInvalidValue);
    ck_assert_msg(strstr(gr_kernels_last_failure(), "pool_size") != NULL, "%s",
                  gr_kernels_last_failure());
    a.pool_size = 2;
    a.out_kind = GR_CONV_OUT_F32_NCHW; /* pooled NCHW is not offered */
    ck_assert_int_eq(gr_launch_conv_i8(&a, 0), cudaErrorInvalidValue);
    a.out_kind = GR_CONV_OUT_I8;
    a.in_u8 = 1;
    a.in_c = 5; /* the first-layer kernel takes at most 4 channels */
    a.in_c_stride = 5;
    a.mul = (const float *)a.in;
    a.in_scale = 0.01f;
    gr_kernels_clear_failure();
    ck_assert_int_eq(gr_launch_conv_i8(&a, 0), cudaErrorInvalidValue);
    ck_assert_msg(strstr(gr_kernels_last_failure(), "in_c") != NULL, "%s",
                  gr_kernels_last_failure());
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_conv_fused"))
        return 77;
    const char *env = getenv("GR_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("test_gpu_conv_fused: seed %llu\n", (unsigned long long)test_seed);
    gr_rng_seed(&rng, test_seed);
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        printf("test_gpu_conv_fused: cublasLtCreate failed\n");
        return 1;
    }
    Suite *s = suite_create("gpu_conv_fused");
    TCase *tc = tcase_create("fused");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_i8_fused_matches_cpu, 0, N_CASES);
    tcase_add_loop_test(tc, test_f16_fused_matches_cpu, 0, N_CASES);
    tcase_add_test(tc, test_pdl_graph_equals_eager);
    tcase_add_test(tc, test_fused_bad_arguments);
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    cublasLtDestroy(lt);
    return failed ? 1 : 0;
}
#endif
