/* The FP32 conv path's own kernels (kernels/gemm_f32.h): the im2col copy, bit for bit against a
 * CPU im2col, and the 3xTF32 GEMM with its fused bias + activation against a double-precision CPU
 * reference, on every tile and odd shapes (N, K, column tails, misaligned operands, batch > 1),
 * plus the conv launcher with its algorithms (the direct 3x3 kernel with its fused maxpool too),
 * the engine's f32_algo option (each forced algorithm, and the measured choice with its timing
 * cache entries) and the argument checks.
 *
 * Data have a large dynamic range (each operand's exponent spread over 2^-8 .. 2^8, never zero) so
 * that a handful of terms dominate each sum: the test shows that plain TF32 (both operands rounded
 * to 10-bit mantissas) breaks its tolerance, so passing it takes the split-precision scheme.
 * Outputs sit between guard bytes, poisoned before each run. Each run uses a fresh seed (printed;
 * GR_TEST_SEED=N repeats one). Exits 77 without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup, getpid */
#include <stdio.h>

#ifndef GR_HAVE_CUDA
int main(void)
{
    printf("SKIP gpu_gemm_f32: graphrun was built without CUDA\n");
    return 77;
}
#else

#include <float.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/gemm_f32.h"
#include "graphrun/runtime.h"
#include "base/base.h"
#include "tests/support/gpu_test.h"

static uint64_t test_seed;
static gr_rng rng;
static int device_major;

#define GUARD_FLOATS 64
#define CUDA_OK(stmt)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (stmt);                                                                   \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s (%s)", #stmt, cudaGetErrorName(e_),               \
                      gr_kernels_last_failure());                                                  \
    } while (0)

/* ---- helpers ------------------------------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Never zero, sign random, |x| = m * 2^e with m in [1, 2), e in [-8, 8]. */
static float wide_value(void)
{
    const int e = (int)(gr_rng_u64(&rng) % 17) - 8;
    const float m = 1.0f + gr_rng_uniform(&rng);
    const float x = ldexpf(m, e);
    return gr_rng_u64(&rng) & 1 ? -x : x;
}

/* A device buffer of n floats with GUARD_FLOATS on both sides, `shift` floats into the payload
 * (shift 1: the operand is 4 bytes off 16-byte alignment). */
typedef struct dev_floats {
    float *base;
    float *data;
    size_t n;
} dev_floats;

static dev_floats dev_alloc(size_t n, int shift)
{
    dev_floats d = {NULL, NULL, n};
    CUDA_OK(cudaMalloc((void **)&d.base, (n + 2 * GUARD_FLOATS) * sizeof(float)));
    d.data = d.base + GUARD_FLOATS + shift;
    return d;
}

static dev_floats dev_upload(const float *host, size_t n, int shift)
{
    dev_floats d = dev_alloc(n, shift);
    CUDA_OK(cudaMemcpy(d.data, host, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void dev_poison(dev_floats *d, int pattern)
{
    CUDA_OK(cudaMemset(d->base, pattern, (d->n + 2 * GUARD_FLOATS) * sizeof(float)));
}

/* Copy the payload out; every byte before and after it must still hold `pattern`. */
static void dev_fetch(const dev_floats *d, int pattern, float *host)
{
    const size_t total = (d->n + 2 * GUARD_FLOATS) * sizeof(float);
    unsigned char *all = xmalloc(total);
    CUDA_OK(cudaMemcpy(all, d->base, total, cudaMemcpyDeviceToHost));
    const size_t begin = (size_t)((const unsigned char *)d->data - (const unsigned char *)d->base);
    const size_t end = begin + d->n * sizeof(float);
    for (size_t i = 0; i < total; ++i)
        if (i < begin || i >= end)
            ck_assert_msg(all[i] == (unsigned char)pattern,
                          "guard byte %zd (from the output) changed",
                          (ptrdiff_t)i - (ptrdiff_t)begin);
    memcpy(host, all + begin, d->n * sizeof(float));
    free(all);
}

static void dev_free(dev_floats *d)
{
    CUDA_OK(cudaFree(d->base));
    d->base = d->data = NULL;
}

static double act_ref(double y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LEAKY: return y > 0 ? y : 0.1 * y;
    case GR_CONV_ACT_RELU: return y > 0 ? y : 0.0;
    case GR_CONV_ACT_LOGISTIC: return 1.0 / (1.0 + exp(-y));
    default: return y;
    }
}

/* What cvt.rna.tf32.f32 keeps: the float rounded to 10 mantissa bits, ties away from zero. */
static double tf32_rna(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x1000u) & 0xFFFFE000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return (double)r;
}

static const char *act_name(int act)
{
    static const char *names[] = {"linear", "leaky", "relu", "logistic"};
    return names[act];
}

/* ---- im2col: a copy, bit-identical --------------------------------------------------------- */

typedef struct im2col_case {
    int batch, in_c, in_h, in_w, ksize, stride, pad;
} im2col_case;

static const im2col_case im2col_cases[] = {
    {2, 3, 13, 13, 3, 1, 1},   /* hw 169: scalar stores, 2 rows per block of 256 threads */
    {2, 5, 16, 16, 3, 1, 1},   /* hw 256: float4 stores */
    {3, 4, 17, 9, 3, 2, 1},    /* stride 2, hw 9 x 5 */
    {2, 3, 15, 15, 5, 2, 2},   /* ksize 5, pad 2, hw 8 x 8 */
    {1, 7, 11, 13, 1, 2, 0},   /* 1x1 stride 2 */
    {2, 6, 12, 12, 5, 1, 0},   /* ksize 5, pad 0 */
    {1, 2, 7, 9, 3, 2, 2},     /* pad 2 with stride 2: rows and columns fully in the padding */
    {1, 3, 300, 301, 3, 1, 1}, /* hw 90300: 256-thread rows, several pixel blocks */
};
#define N_IM2COL ((int)(sizeof im2col_cases / sizeof im2col_cases[0]))

START_TEST(test_im2col_bit_identical)
{
    const im2col_case *c = &im2col_cases[_i];
    const int oh = gr_conv_out_dim(c->in_h, c->ksize, c->stride, c->pad);
    const int ow = gr_conv_out_dim(c->in_w, c->ksize, c->stride, c->pad);
    const size_t hw = (size_t)oh * ow, rows = (size_t)c->in_c * c->ksize * c->ksize;
    const size_t n_in = (size_t)c->batch * c->in_c * c->in_h * c->in_w;
    const size_t n_col = (size_t)c->batch * rows * hw;
    float *in = xmalloc(n_in * sizeof(float));
    float *ref = xmalloc(n_col * sizeof(float));
    float *got = xmalloc(n_col * sizeof(float));
    /* a copy keeps every bit: include -0, a subnormal and large values */
    for (size_t i = 0; i < n_in; ++i)
        in[i] = i % 97 == 5 ? -0.0f : (i % 89 == 7 ? 1.0e-40f : wide_value() * 1.0e30f);
    for (int b = 0; b < c->batch; ++b)
        for (size_t r = 0; r < rows; ++r) {
            const int kx = (int)(r % (size_t)c->ksize);
            const int ky = (int)(r / (size_t)c->ksize % (size_t)c->ksize);
            const int ci = (int)(r / ((size_t)c->ksize * c->ksize));
            for (size_t p = 0; p < hw; ++p) {
                const int iy = (int)(p / (size_t)ow) * c->stride - c->pad + ky;
                const int ix = (int)(p % (size_t)ow) * c->stride - c->pad + kx;
                float v = 0.0f;
                if (iy >= 0 && iy < c->in_h && ix >= 0 && ix < c->in_w)
                    v = in[(((size_t)b * c->in_c + ci) * c->in_h + iy) * c->in_w + ix];
                ref[((size_t)b * rows + r) * hw + p] = v;
            }
        }
    dev_floats d_in = dev_upload(in, n_in, 0);
    dev_floats d_col = dev_alloc(n_col, 0);
    for (int pattern = 0xA5; pattern >= 0x5A; pattern -= 0x4B) { /* two poisons: no stale hits */
        dev_poison(&d_col, pattern);
        CUDA_OK(gr_launch_im2col_f32(d_in.data, c->batch, c->in_c, c->in_h, c->in_w, c->ksize,
                                     c->stride, c->pad, d_col.data, 0));
        CUDA_OK(cudaDeviceSynchronize());
        dev_fetch(&d_col, pattern, got);
        for (size_t i = 0; i < n_col; ++i)
            ck_assert_msg(memcmp(&got[i], &ref[i], sizeof(float)) == 0,
                          "im2col case %d: element %zu = %a, reference %a", _i, i, (double)got[i],
                          (double)ref[i]);
    }
    dev_free(&d_in);
    dev_free(&d_col);
    free(in);
    free(ref);
    free(got);
}
END_TEST

/* ---- the 3xTF32 GEMM ---------------------------------------------------------------------- */

typedef struct gemm_case {
    int n, k, p, batch, act, has_bias, shift; /* shift 1: w, col and out 4 bytes off alignment */
} gemm_case;

static const gemm_case gemm_cases[] = {
    {1, 27, 169, 2, GR_CONV_ACT_LEAKY, 1, 0},      /* one row; first layer's K; 13x13 columns */
    {13, 27, 1, 3, GR_CONV_ACT_LOGISTIC, 0, 0},    /* one column per image */
    {16, 144, 256, 2, GR_CONV_ACT_RELU, 1, 0},     /* aligned everywhere: 16-byte copies */
    {64, 36, 37, 3, GR_CONV_ACT_LEAKY, 1, 0},      /* odd P: 4-byte col copies */
    {130, 68, 100, 2, GR_CONV_ACT_LINEAR, 0, 0},   /* N over one 128 tile, K not a multiple of 16 */
    {33, 4608, 13, 1, GR_CONV_ACT_LEAKY, 1, 0},    /* long K */
    {125, 4608, 169, 1, GR_CONV_ACT_LINEAR, 1, 0}, /* the head's N, long K, 13x13 */
    {40, 64, 64, 2, GR_CONV_ACT_LEAKY, 1, 1},      /* aligned shapes, misaligned pointers */
    {20, 9, 12, 3, GR_CONV_ACT_LOGISTIC, 1, 1},
    /* aimed at the K32 tiles (and run on all): K % 32 != 0, odd N, column tails */
    {130, 100, 169, 2, GR_CONV_ACT_LOGISTIC, 0, 0}, /* N over one 128 tile, K % 32 = 4, no bias */
    {256, 1000, 52, 3, GR_CONV_ACT_RELU, 1, 0},     /* P % 4 == 0: 16-byte col copies; J 156 */
    {77, 9220, 13, 2, GR_CONV_ACT_LEAKY, 1, 0},     /* longer K than layer 7's 9216, K % 32 = 4 */
    {72, 132, 68, 2, GR_CONV_ACT_LINEAR, 1, 1},     /* misaligned pointers, K % 32 = 4 */
    {129, 33, 131, 1, GR_CONV_ACT_LEAKY, 0, 0},     /* one k row past a stage, N = 128 + 1 */
};
#define N_GEMM ((int)(sizeof gemm_cases / sizeof gemm_cases[0]))

/* Tolerance, per output: |got - ref| <= 1e-5 * (S + |bias|) + 4 FLT_EPSILON |ref|, S = sum_k |w x|.
 * 3xTF32 keeps ~22 of each operand's 24 bits: per product the dropped small*small and the rounding
 * of the small halves are <= 1.5 * 2^-21 |w x| (7e-7 S in all; the K32 tiles truncate the small
 * halves: 2.5 * 2^-21, 1.2e-6 S). The tensor core sums a partial's chain of MMAs with truncation:
 * the K16 tiles chain 3 MMAs (24 products) per k8 step, <= 3 * 2^-23 of that step's sum (4e-7 S);
 * the K32 tiles 12 MMAs per 32-k stage, <= 12 * 2^-23 (1.4e-6 S). The partials are added in f32
 * with rounding to nearest: the probabilistic bound sqrt(K/8) 2^-24 S is 1.4e-6 S at K = 4608 (the
 * K32 tiles add a quarter as many partials: 0.7e-6 S; the worst case (K/8) 2^-24 S, 3.4e-5 S, is
 * that of any f32 GEMM, cuBLAS included). The activations are 1-Lipschitz (logistic 1/4); expf
 * adds an ulp or two of the output (the last term). 1e-5 leaves a margin of 4x over the K16 tiles'
 * bound (0.7 + 0.4 + 1.4 = 2.5e-6 S at K = 4608), 3x over the K32 tiles' (1.2 + 1.4 + 0.7 =
 * 3.3e-6 S). Plain TF32 errs by ~2^-11 of the largest products, which the wide data make a good
 * share of S: test_gemm_tf32x3 asserts the tolerance rejects it. A CPU model (docs/performance.md) of the
 * K16 tiles on the same data (CPU): plain TF32 lands 6-76x past the tolerance, the kernel's
 * rounding uses 1.3-4% of it. */
static double gemm_tol(double s, double bias, double ref)
{
    return 1e-5 * (s + fabs(bias)) + 4.0 * (double)FLT_EPSILON * fabs(ref);
}

/* splits > 1: gr_launch_gemm_tf32x3_splitk_f32 with its partial sums in a poisoned buffer (the
 * parts must overwrite it, not add to it); the same tolerance (the parts' sums are f32 sums of
 * the same terms, added in f32 once more: one rounding per part, below the bound's slack). */
static void run_gemm_case(const gemm_case *c, int tile, int splits)
{
    const size_t n_w = (size_t)c->n * c->k, n_col = (size_t)c->batch * c->k * c->p;
    const size_t n_out = (size_t)c->batch * c->n * c->p;
    float *w = xmalloc(n_w * sizeof(float));
    float *col = xmalloc(n_col * sizeof(float));
    float *bias = xmalloc((size_t)c->n * sizeof(float));
    float *got = xmalloc(n_out * sizeof(float));
    for (size_t i = 0; i < n_w; ++i)
        w[i] = wide_value();
    for (size_t i = 0; i < n_col; ++i)
        col[i] = wide_value();
    for (int i = 0; i < c->n; ++i)
        bias[i] = wide_value();

    dev_floats d_w = dev_upload(w, n_w, c->shift);
    dev_floats d_col = dev_upload(col, n_col, c->shift);
    dev_floats d_bias = dev_upload(bias, (size_t)c->n, 0);
    dev_floats d_out = dev_alloc(n_out, c->shift);
    dev_poison(&d_out, 0x7F);
    dev_floats d_part = dev_alloc(splits > 1 ? (size_t)splits * n_out : 1, 0);
    dev_poison(&d_part, 0x4B);
    gr_kernels_clear_failure();
    if (splits > 1)
        CUDA_OK(gr_launch_gemm_tf32x3_splitk_f32(
            d_w.data, d_col.data, c->has_bias ? d_bias.data : NULL, d_out.data, c->n, c->k, c->p,
            c->batch, c->act, tile, splits, d_part.data, 0));
    else
        CUDA_OK(gr_launch_gemm_tf32x3_f32(d_w.data, d_col.data, c->has_bias ? d_bias.data : NULL,
                                          d_out.data, c->n, c->k, c->p, c->batch, c->act, tile,
                                          0));
    CUDA_OK(cudaDeviceSynchronize());
    dev_fetch(&d_out, 0x7F, got);

    double tf32_worst = 0.0; /* largest |plain TF32 error| / tolerance before the activation */
    for (int b = 0; b < c->batch; ++b)
        for (int n = 0; n < c->n; ++n)
            for (int p = 0; p < c->p; ++p) {
                double sum = 0.0, s = 0.0, sum_tf32 = 0.0;
                for (int k = 0; k < c->k; ++k) {
                    const float wv = w[(size_t)n * c->k + k];
                    const float xv = col[((size_t)b * c->k + k) * c->p + p];
                    sum += (double)wv * (double)xv;
                    s += fabs((double)wv * (double)xv);
                    sum_tf32 += tf32_rna(wv) * tf32_rna(xv);
                }
                const double bv = c->has_bias ? (double)bias[n] : 0.0;
                const double ref = act_ref(sum + bv, c->act);
                const double tol = gemm_tol(s, bv, ref);
                const double y_tol = gemm_tol(s, bv, sum + bv);
                tf32_worst = fmax(tf32_worst, fabs(sum_tf32 - sum) / y_tol);
                const size_t i = ((size_t)b * c->n + n) * c->p + p;
                ck_assert_msg(fabs((double)got[i] - ref) <= tol,
                              "N %d K %d P %d batch %d %s tile %d splits %d: out[%d][%d][%d] = "
                              "%.9g, reference %.9g, error %.3g > tolerance %.3g (seed %llu)",
                              c->n, c->k, c->p, c->batch, act_name(c->act), tile, splits, b, n, p,
                              (double)got[i], ref, fabs((double)got[i] - ref), tol,
                              (unsigned long long)test_seed);
            }
    /* the tolerance is tight enough to tell 3xTF32 from plain TF32 on these data */
    ck_assert_msg(tf32_worst > 1.0,
                  "N %d K %d P %d: plain TF32 stays within the tolerance (worst %.3g of it): the "
                  "test would not catch a 1-pass kernel",
                  c->n, c->k, c->p, tf32_worst);
    dev_free(&d_w);
    dev_free(&d_col);
    dev_free(&d_bias);
    dev_free(&d_out);
    dev_free(&d_part);
    free(w);
    free(col);
    free(bias);
    free(got);
}

/* Every case on every tile (0 = the automatic choice). */
START_TEST(test_gemm_tf32x3)
{
    if (device_major < 8)
        return; /* test_gemm_refused_before_sm80 covers it */
    const int c = _i / (GR_TF32X3_TILES + 1), tile = _i % (GR_TF32X3_TILES + 1);
    run_gemm_case(&gemm_cases[c], tile, 1);
}
END_TEST

/* Split-K: every case in 2, 3 and 8 parts (clamped to the K tiles: the short-K cases run whole)
 * on the automatic tile, a K16 and a K32 tile. */
START_TEST(test_gemm_splitk)
{
    if (device_major < 8)
        return;
    static const int splits[] = {2, 3, 8};
    static const int tiles[] = {GR_TF32X3_TILE_AUTO, GR_TF32X3_TILE_128x128,
                                GR_TF32X3_TILE_128x128_K32};
    run_gemm_case(&gemm_cases[_i / 9], tiles[_i % 3], splits[(_i / 3) % 3]);
}
END_TEST

/* The policy: layer 7 of YOLOv2-tiny at batch 64 (680 blocks of the 128x128 K32 tile on 132 SMs,
 * 5.15 waves) splits in 3 (16 waves of thirds: 5.33); the same layer at batch 2 (too few blocks
 * for that tile), a short K, and a GEMM whose blocks fill whole waves do not. */
START_TEST(test_gemm_auto_splits)
{
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(1024, 9216, 64 * 169, 132), 3);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(1024, 4608, 64 * 169, 132), 3);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(1024, 9216, 2 * 169, 132), 1);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(512, 2304, 64 * 169, 132), 1);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(1024, 9216, 132 * 128, 132), 1);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_splits(1024, 9216, 64 * 169, 0), 1);
}
END_TEST

START_TEST(test_gemm_refused_before_sm80)
{
    if (device_major >= 8)
        return;
    float *buf = NULL;
    CUDA_OK(cudaMalloc((void **)&buf, 64 * sizeof(float)));
    gr_kernels_clear_failure();
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 2, 2, 2, 1, 0, 0, 0),
                     cudaErrorNotSupported);
    ck_assert_msg(strstr(gr_kernels_last_failure(), "sm_80") != NULL, "message: %s",
                  gr_kernels_last_failure());
    CUDA_OK(cudaFree(buf));
}
END_TEST

START_TEST(test_gemm_bad_arguments)
{
    float *buf = NULL;
    CUDA_OK(cudaMalloc((void **)&buf, 64 * sizeof(float)));
    const cudaError_t inval = cudaErrorInvalidValue;
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(NULL, buf, NULL, buf, 2, 2, 2, 1, 0, 0, 0), inval);
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, NULL, NULL, buf, 2, 2, 2, 1, 0, 0, 0), inval);
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, buf, NULL, NULL, 2, 2, 2, 1, 0, 0, 0), inval);
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 0, 2, 2, 1, 0, 0, 0), inval);
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 2, 2, 2, 0, 0, 0, 0), inval);
    /* An activation no epilogue knows (every gr_activation is accepted since they all fuse). */
    ck_assert_int_eq(gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 2, 2, 2, 1, 1000, 0, 0), inval);
    ck_assert_int_eq(
        gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 2, 2, 2, 1, 0, GR_TF32X3_TILES + 1, 0),
        inval);
    gr_kernels_clear_failure();
    ck_assert_int_eq(
        gr_launch_gemm_tf32x3_f32(buf, buf, NULL, buf, 2, 1 << 16, 1 << 16, 1, 0, 0, 0),
        inval); /* k * p >= 2^31 */
    ck_assert_msg(strstr(gr_kernels_last_failure(), "gemm_tf32x3.cu") != NULL, "message: %s",
                  gr_kernels_last_failure());
    ck_assert_int_eq(gr_launch_im2col_f32(buf, 1, 1, 4, 4, 3, 1, -1, buf, 0), inval);
    ck_assert_int_eq(gr_launch_im2col_f32(buf, 1, 1, 2, 2, 5, 1, 0, buf, 0), inval); /* empty */

    gr_conv_f32_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1;
    a.in_c = a.in_h = a.in_w = a.out_c = 2;
    a.ksize = a.stride = 1;
    a.in = a.weights = buf;
    a.out = buf + 16;
    cudaError_t cerr = cudaSuccess;
    a.algo = GR_CONV_F32_TF32X3_IMPLICIT + 1; /* no such algorithm */
    ck_assert_int_eq(gr_launch_conv_f32(NULL, &a, 0, &cerr), CUBLAS_STATUS_INVALID_VALUE);
    a.algo = GR_CONV_F32_SGEMM; /* needs the cuBLAS handle */
    ck_assert_int_eq(gr_launch_conv_f32(NULL, &a, 0, &cerr), CUBLAS_STATUS_INVALID_VALUE);
    a.algo = GR_CONV_F32_TF32X3;
    a.tile = GR_TF32X3_TILES + 1;
    ck_assert_int_eq(gr_launch_conv_f32(NULL, &a, 0, &cerr), CUBLAS_STATUS_INVALID_VALUE);
    a.tile = 0; /* TF32X3 does not need the handle; refused with NotSupported before sm_80 */
    const cublasStatus_t st = gr_launch_conv_f32(NULL, &a, 0, &cerr);
    if (device_major >= 8) {
        ck_assert_int_eq(st, CUBLAS_STATUS_SUCCESS);
    } else {
        ck_assert_int_eq(st, CUBLAS_STATUS_EXECUTION_FAILED);
        ck_assert_int_eq(cerr, cudaErrorNotSupported);
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(buf));
}
END_TEST

/* The automatic tile: the smallest row tile that covers N up to 64, 128 rows (the K32 main loop)
 * after that unless that leaves SMs idle. */
START_TEST(test_auto_tile)
{
    /* the blocks the automatic tile launches (the engine's SGEMM fallback counts them) */
    ck_assert_int_eq(gr_gemm_tf32x3_blocks(16, 173056, 132), 676);
    ck_assert_int_eq(gr_gemm_tf32x3_blocks(1024, 64 * 169, 132), 8 * 85);
    ck_assert_int_eq(gr_gemm_tf32x3_blocks(1024, 169, 132), 16 * 2);
    ck_assert_int_eq(gr_gemm_tf32x3_blocks(0, 169, 132), 0);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(1, 100000, 132), GR_TF32X3_TILE_16x256);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(16, 100000, 132), GR_TF32X3_TILE_16x256);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(32, 100000, 132), GR_TF32X3_TILE_32x256);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(64, 100000, 132), GR_TF32X3_TILE_64x128);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(1024, 64 * 169, 132), GR_TF32X3_TILE_128x128_K32);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(65, 100000, 132), GR_TF32X3_TILE_128x128_K32);
    ck_assert_int_eq(gr_gemm_tf32x3_auto_tile(1024, 169, 132), GR_TF32X3_TILE_64x128);
}
END_TEST

/* ---- the conv launcher: the three algorithms on conv shapes -------------------------------- */

typedef struct conv_case {
    int batch, in_c, in_h, in_w, out_c, ksize, stride, pad, act, has_bias;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 3, 17, 15, 16, 3, 1, 1, GR_CONV_ACT_LEAKY, 1},   /* first-layer-like, K 27 */
    {3, 16, 13, 13, 125, 1, 1, 0, GR_CONV_ACT_LINEAR, 1}, /* 1x1: reads the input directly */
    {2, 8, 13, 13, 13, 3, 2, 2, GR_CONV_ACT_LOGISTIC, 0}, /* stride 2, pad 2, no bias */
    {1, 512, 13, 13, 1, 3, 1, 1, GR_CONV_ACT_RELU, 1},    /* K 4608, one output channel */
    {2, 5, 11, 9, 70, 5, 1, 2, GR_CONV_ACT_LEAKY, 1},     /* ksize 5 */
    {2, 7, 11, 13, 20, 1, 2, 0, GR_CONV_ACT_LEAKY, 1},    /* 1x1 stride 2: not direct */
    {3, 16, 26, 26, 32, 3, 2, 1, GR_CONV_ACT_RELU, 1},    /* stride 2, 13x13 out, batch 3 */
};
#define N_CONV ((int)(sizeof conv_cases / sizeof conv_cases[0]))

/* SGEMM, TF32X3 (im2col + GEMM) and TF32X3_IMPLICIT (the GEMM gathers the input itself: no
 * workspace, which gr_conv_f32_workspace_floats must say) against the double reference. */
static void run_conv_case(int index, int algo, int tile, int splits)
{
    const conv_case *c = &conv_cases[index];
    const int oh = gr_conv_out_dim(c->in_h, c->ksize, c->stride, c->pad);
    const int ow = gr_conv_out_dim(c->in_w, c->ksize, c->stride, c->pad);
    static const char *algo_names[] = {"sgemm", "tf32x3", "tf32x3 implicit"};
    const int hw = oh * ow, kk = c->ksize * c->ksize;
    const size_t n_in = (size_t)c->batch * c->in_c * c->in_h * c->in_w;
    const size_t n_w = (size_t)c->out_c * c->in_c * kk, n_out = (size_t)c->batch * c->out_c * hw;
    float *in = xmalloc(n_in * sizeof(float)), *w = xmalloc(n_w * sizeof(float));
    float *bias = xmalloc((size_t)c->out_c * sizeof(float)), *got = xmalloc(n_out * sizeof(float));
    for (size_t i = 0; i < n_in; ++i)
        in[i] = wide_value();
    for (size_t i = 0; i < n_w; ++i)
        w[i] = wide_value();
    for (int i = 0; i < c->out_c; ++i)
        bias[i] = wide_value();

    gr_conv_f32_args a;
    memset(&a, 0, sizeof a);
    a.batch = c->batch;
    a.in_c = c->in_c;
    a.in_h = c->in_h;
    a.in_w = c->in_w;
    a.out_c = c->out_c;
    a.ksize = c->ksize;
    a.stride = c->stride;
    a.pad = c->pad;
    a.activation = c->act;
    a.algo = algo;
    a.tile = tile;
    a.splits = splits;
    int ok = 0;
    const size_t ws = gr_conv_f32_workspace_floats(&a, &ok);
    ck_assert(ok);
    if (algo == GR_CONV_F32_TF32X3_IMPLICIT)
        ck_assert_uint_eq(ws, 0);
    if (splits > 1) { /* the parts' sums after the im2col matrix */
        gr_conv_f32_args whole = a;
        whole.splits = 1;
        int ok1 = 0;
        ck_assert_uint_eq(ws, gr_conv_f32_workspace_floats(&whole, &ok1) + (size_t)splits * n_out);
    }
    dev_floats d_in = dev_upload(in, n_in, 0), d_w = dev_upload(w, n_w, 0);
    dev_floats d_bias = dev_upload(bias, (size_t)c->out_c, 0);
    dev_floats d_ws = dev_alloc(ws ? ws : 1, 0);
    dev_floats d_out = dev_alloc(n_out, 0);
    a.in = d_in.data;
    a.weights = d_w.data;
    a.bias = c->has_bias ? d_bias.data : NULL;
    a.workspace = ws ? d_ws.data : NULL;
    a.out = d_out.data;
    cublasHandle_t h = NULL;
    if (algo == GR_CONV_F32_SGEMM)
        ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    dev_poison(&d_out, 0x33);
    cudaError_t cerr = cudaSuccess;
    ck_assert_msg(gr_launch_conv_f32(h, &a, 0, &cerr) == CUBLAS_STATUS_SUCCESS, "%s",
                  gr_kernels_last_failure());
    CUDA_OK(cudaDeviceSynchronize());
    dev_fetch(&d_out, 0x33, got);
    for (int b = 0; b < c->batch; ++b)
        for (int o = 0; o < c->out_c; ++o)
            for (int p = 0; p < hw; ++p) {
                const int oy = p / ow, ox = p % ow;
                double sum = 0.0, s = 0.0;
                for (int ci = 0; ci < c->in_c; ++ci)
                    for (int ky = 0; ky < c->ksize; ++ky)
                        for (int kx = 0; kx < c->ksize; ++kx) {
                            const int iy = oy * c->stride - c->pad + ky;
                            const int ix = ox * c->stride - c->pad + kx;
                            if (iy < 0 || iy >= c->in_h || ix < 0 || ix >= c->in_w)
                                continue;
                            const double t =
                                (double)in[(((size_t)b * c->in_c + ci) * c->in_h + iy) * c->in_w +
                                           ix] *
                                (double)w[(((size_t)o * c->in_c + ci) * c->ksize + ky) * c->ksize +
                                          kx];
                            sum += t;
                            s += fabs(t);
                        }
                const double bv = c->has_bias ? (double)bias[o] : 0.0;
                const double ref = act_ref(sum + bv, c->act);
                const double tol = gemm_tol(s, bv, ref);
                const size_t i = ((size_t)b * c->out_c + o) * hw + p;
                ck_assert_msg(fabs((double)got[i] - ref) <= tol,
                              "conv case %d (%s, tile %d): out[%d][%d][%d] = %.9g, reference %.9g, "
                              "tolerance %.3g (seed %llu)",
                              index, algo_names[algo], tile, b, o, p, (double)got[i], ref, tol,
                              (unsigned long long)test_seed);
            }
    if (h)
        cublasDestroy(h);
    dev_free(&d_in);
    dev_free(&d_w);
    dev_free(&d_bias);
    dev_free(&d_ws);
    dev_free(&d_out);
    free(in);
    free(w);
    free(bias);
    free(got);
}

START_TEST(test_conv_algorithms)
{
    const int algo = _i % 3; /* GR_CONV_F32_SGEMM, _TF32X3, _TF32X3_IMPLICIT */
    if (algo != GR_CONV_F32_SGEMM && device_major < 8)
        return;
    run_conv_case(_i / 3, algo, GR_TF32X3_TILE_AUTO, 1);
}
END_TEST

/* The implicit im2col's loader on every tile (each gives its threads other rows and columns). */
START_TEST(test_conv_implicit_tiles)
{
    if (device_major < 8)
        return;
    run_conv_case(_i / GR_TF32X3_TILES, GR_CONV_F32_TF32X3_IMPLICIT, 1 + _i % GR_TF32X3_TILES,
                  1);
}
END_TEST

/* The launcher's split-K (TF32X3 through im2col, 1x1 convs straight from the input): 2 or 3
 * parts, the partial sums placed after the im2col matrix in the workspace. */
START_TEST(test_conv_splitk)
{
    if (device_major < 8)
        return;
    run_conv_case(_i, GR_CONV_F32_TF32X3, GR_TF32X3_TILE_AUTO, 2 + _i % 2);
}
END_TEST

/* ---- the direct 3x3 kernel, its fused maxpool -------------------------------------------- */

typedef struct direct_case {
    int batch, in_c, in_h, in_w, out_c, act, has_bias;
    int pool_pad; /* -1: no pool; else Darknet's 2x2 / stride 2 pool with this total padding */
} direct_case;

/* Each exercises a part of kernels/conv3x3_f32.cu: the four channel-group widths (out_c <= 8,
 * 16, 32, > 32), partial groups and channel blocks, channel chunks (3, 4 or 8 per stage) with a
 * partial last one, tiles cut by the map's edge in both directions, both pool paddings on odd
 * maps (the last window half outside), a 1x1 map and every activation. */
static const direct_case direct_cases[] = {
    {2, 3, 17, 15, 16, GR_CONV_ACT_LEAKY, 1, -1},    /* first-layer-like, odd map */
    {2, 3, 34, 33, 16, GR_CONV_ACT_LEAKY, 1, 1},     /* pool padding 1: ceil, last window half */
    {1, 16, 20, 21, 32, GR_CONV_ACT_RELU, 1, 0},     /* pool padding 0: floor */
    {3, 32, 18, 18, 64, GR_CONV_ACT_LEAKY, 1, 1},    /* 4 chunks of 8 channels */
    {1, 35, 13, 13, 72, GR_CONV_ACT_LOGISTIC, 0, -1}, /* partial chunk, 2 blocks, no bias */
    {2, 5, 9, 70, 5, GR_CONV_ACT_LINEAR, 1, 1},      /* 5 channels of a group of 8; 2 tiles across */
    {1, 7, 1, 1, 9, GR_CONV_ACT_LEAKY, 1, -1},       /* 1x1 map: only the centre tap */
    {1, 64, 40, 36, 128, GR_CONV_ACT_LEAKY, 1, 1},   /* layer-3-like: 8 chunks, 2 blocks */
    {2, 12, 35, 70, 24, GR_CONV_ACT_RELU, 1, -1},    /* 3 chunks of 4 on the 16x32 tile */
};
#define N_DIRECT ((int)(sizeof direct_cases / sizeof direct_cases[0]))

/* DIRECT3X3 against the double reference: conv + bias + activation with gemm_tol's bound (exact
 * FP32 FMAs: Darknet's order, an ulp per term at most), then Darknet's maxpool over the window's
 * taps inside the map. |max(a) - max(b)| <= max |a - b|, so a pooled output may differ by the
 * largest tolerance of its window. The pooled map's size is Darknet's (in + padding - 2)/2 + 1. */
static void run_direct_case(const direct_case *c, int index)
{
    const int pool = c->pool_pad >= 0;
    const int oh = pool ? (c->in_h + c->pool_pad - 2) / 2 + 1 : c->in_h;
    const int ow = pool ? (c->in_w + c->pool_pad - 2) / 2 + 1 : c->in_w;
    const size_t plane = (size_t)c->in_h * c->in_w;
    const size_t n_in = (size_t)c->batch * c->in_c * plane, n_w = (size_t)c->out_c * c->in_c * 9;
    const size_t n_conv = (size_t)c->batch * c->out_c * plane;
    const size_t n_out = (size_t)c->batch * c->out_c * oh * ow;
    float *in = xmalloc(n_in * sizeof(float)), *w = xmalloc(n_w * sizeof(float));
    float *bias = xmalloc((size_t)c->out_c * sizeof(float)), *got = xmalloc(n_out * sizeof(float));
    double *ref = xmalloc(n_conv * sizeof(double)), *tol = xmalloc(n_conv * sizeof(double));
    for (size_t i = 0; i < n_in; ++i)
        in[i] = wide_value();
    for (size_t i = 0; i < n_w; ++i)
        w[i] = wide_value();
    for (int i = 0; i < c->out_c; ++i)
        bias[i] = wide_value();
    for (int b = 0; b < c->batch; ++b)
        for (int o = 0; o < c->out_c; ++o)
            for (int y = 0; y < c->in_h; ++y)
                for (int x = 0; x < c->in_w; ++x) {
                    double sum = 0.0, s = 0.0;
                    for (int ci = 0; ci < c->in_c; ++ci)
                        for (int ky = 0; ky < 3; ++ky)
                            for (int kx = 0; kx < 3; ++kx) {
                                const int iy = y - 1 + ky, ix = x - 1 + kx;
                                if (iy < 0 || iy >= c->in_h || ix < 0 || ix >= c->in_w)
                                    continue;
                                const double t =
                                    (double)in[((size_t)b * c->in_c + ci) * plane +
                                               (size_t)iy * c->in_w + ix] *
                                    (double)w[(((size_t)o * c->in_c + ci) * 3 + ky) * 3 + kx];
                                sum += t;
                                s += fabs(t);
                            }
                    const double bv = c->has_bias ? (double)bias[o] : 0.0;
                    const size_t i = ((size_t)b * c->out_c + o) * plane + (size_t)y * c->in_w + x;
                    ref[i] = act_ref(sum + bv, c->act);
                    tol[i] = gemm_tol(s, bv, ref[i]);
                }

    gr_conv_f32_args a;
    memset(&a, 0, sizeof a);
    a.batch = c->batch;
    a.in_c = c->in_c;
    a.in_h = c->in_h;
    a.in_w = c->in_w;
    a.out_c = c->out_c;
    a.ksize = 3;
    a.stride = a.pad = 1;
    a.activation = c->act;
    a.algo = GR_CONV_F32_DIRECT3X3;
    if (pool) {
        a.pool_size = a.pool_stride = 2;
        a.pool_pad = c->pool_pad;
    }
    ck_assert(gr_conv_f32_direct3x3_fits(&a));
    int ok = 0;
    ck_assert_uint_eq(gr_conv_f32_workspace_floats(&a, &ok), 0);
    ck_assert(ok);
    int dh = 0, dw = 0;
    gr_conv_f32_direct3x3_out_dims(&a, &dh, &dw);
    ck_assert_int_eq(dh, oh);
    ck_assert_int_eq(dw, ow);
    dev_floats d_in = dev_upload(in, n_in, index % 2), d_w = dev_upload(w, n_w, 0);
    dev_floats d_bias = dev_upload(bias, (size_t)c->out_c, 0);
    dev_floats d_out = dev_alloc(n_out, index % 3 == 2); /* shifted: no 16-byte row stores */
    a.in = d_in.data;
    a.weights = d_w.data;
    a.bias = c->has_bias ? d_bias.data : NULL;
    a.out = d_out.data;
    dev_poison(&d_out, 0x5a);
    cudaError_t cerr = cudaSuccess;
    ck_assert_msg(gr_launch_conv_f32(NULL, &a, 0, &cerr) == CUBLAS_STATUS_SUCCESS, "%s",
                  gr_kernels_last_failure());
    CUDA_OK(cudaDeviceSynchronize());
    dev_fetch(&d_out, 0x5a, got);
    for (int b = 0; b < c->batch; ++b)
        for (int o = 0; o < c->out_c; ++o)
            for (int y = 0; y < oh; ++y)
                for (int x = 0; x < ow; ++x) {
                    const size_t base = ((size_t)b * c->out_c + o) * plane;
                    double want = -DBL_MAX, t = 0.0;
                    const int taps = pool ? 2 : 1;
                    for (int dy = 0; dy < taps; ++dy)
                        for (int dx = 0; dx < taps; ++dx) {
                            const int yy = y * taps + dy, xx = x * taps + dx;
                            if (yy >= c->in_h || xx >= c->in_w)
                                continue;
                            const size_t i = base + (size_t)yy * c->in_w + xx;
                            want = fmax(want, ref[i]);
                            t = fmax(t, tol[i]);
                        }
                    const double v = got[(((size_t)b * c->out_c + o) * oh + y) * ow + x];
                    ck_assert_msg(fabs(v - want) <= t,
                                  "direct case %d: out[%d][%d][%d][%d] = %.9g, reference %.9g, "
                                  "tolerance %.3g (seed %llu)",
                                  index, b, o, y, x, v, want, t, (unsigned long long)test_seed);
                }
    dev_free(&d_in);
    dev_free(&d_w);
    dev_free(&d_bias);
    dev_free(&d_out);
    free(in);
    free(w);
    free(bias);
    free(got);
    free(ref);
    free(tol);
}

START_TEST(test_conv_direct3x3)
{
    run_direct_case(&direct_cases[_i], _i);
}
END_TEST

/* Every 3x3 conv shape of YOLOv2-tiny and yolov3-tiny (416x416 input, batch 1), forced onto the
 * direct kernel (the engine takes it only up to 32 input channels: this covers
 * f32_algo DIRECT3X3), with the 2x2/2 pool fused where the network has one (Darknet's default
 * padding 1). Indices 100 + i in the messages. */
static const direct_case network_cases[] = {
    {1, 3, 416, 416, 16, GR_CONV_ACT_LEAKY, 1, 1},
    {1, 16, 208, 208, 32, GR_CONV_ACT_LEAKY, 1, 1},
    {1, 32, 104, 104, 64, GR_CONV_ACT_LEAKY, 1, 1},
    {1, 64, 52, 52, 128, GR_CONV_ACT_LEAKY, 1, 1},
    {1, 128, 26, 26, 256, GR_CONV_ACT_LEAKY, 1, 1},
    {1, 256, 13, 13, 512, GR_CONV_ACT_LEAKY, 1, -1},
    {1, 512, 13, 13, 1024, GR_CONV_ACT_LEAKY, 1, -1},
    {1, 1024, 13, 13, 1024, GR_CONV_ACT_LEAKY, 1, -1},
    {1, 384, 26, 26, 256, GR_CONV_ACT_LEAKY, 1, -1}, /* yolov3-tiny's second head (route 128+256) */
};
#define N_NETWORK ((int)(sizeof network_cases / sizeof network_cases[0]))

START_TEST(test_conv_direct3x3_network_shapes)
{
    run_direct_case(&network_cases[_i], 100 + _i);
}
END_TEST

/* Shapes it does not take are refused, before anything runs, with CUBLAS_STATUS_INVALID_VALUE; a
 * pool asked of another algorithm is refused too. */
START_TEST(test_conv_direct3x3_refusals)
{
    static float dummy_storage[4];
    gr_conv_f32_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1;
    a.in_c = 4;
    a.in_h = a.in_w = 8;
    a.out_c = 8;
    a.ksize = 3;
    a.stride = a.pad = 1;
    a.algo = GR_CONV_F32_DIRECT3X3;
    a.in = a.weights = a.out = dummy_storage; /* never read: every call below is refused */
    ck_assert(gr_conv_f32_direct3x3_fits(&a));
    struct {
        int ksize, stride, pad, pool_size, pool_stride, pool_pad, batch;
    } bad[] = {{5, 1, 2, 0, 0, 0, 1}, {3, 2, 1, 0, 0, 0, 1}, {3, 1, 0, 0, 0, 0, 1},
               {3, 1, 1, 2, 1, 1, 1}, {3, 1, 1, 3, 3, 2, 1}, {3, 1, 1, 2, 2, 2, 1},
               {3, 1, 1, 0, 0, 0, 65536}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        gr_conv_f32_args b = a;
        b.ksize = bad[k].ksize;
        b.stride = bad[k].stride;
        b.pad = bad[k].pad;
        b.pool_size = bad[k].pool_size;
        b.pool_stride = bad[k].pool_stride;
        b.pool_pad = bad[k].pool_pad;
        b.batch = bad[k].batch;
        ck_assert_msg(!gr_conv_f32_direct3x3_fits(&b), "case %zu fits", k);
        int ok = 1;
        gr_conv_f32_workspace_floats(&b, &ok);
        ck_assert_msg(!ok, "case %zu: workspace ok", k);
        cudaError_t cerr = cudaSuccess;
        ck_assert_int_eq(gr_launch_conv_f32(NULL, &b, 0, &cerr), CUBLAS_STATUS_INVALID_VALUE);
    }
    gr_conv_f32_args b = a; /* a pool with the 3xTF32 GEMM */
    b.algo = GR_CONV_F32_TF32X3;
    b.pool_size = b.pool_stride = 2;
    int ok = 1;
    gr_conv_f32_workspace_floats(&b, &ok);
    ck_assert(!ok);
    cudaError_t cerr = cudaSuccess;
    ck_assert_int_eq(gr_launch_conv_f32(NULL, &b, 0, &cerr), CUBLAS_STATUS_INVALID_VALUE);
    CUDA_OK(cudaDeviceSynchronize());
}
END_TEST

/* ---- the engine: f32_algo ------------------------------------------------------------------- */

static gr_engine *build_engine(const gr_model *m, gr_device dev, gr_f32_algo algo, int search,
                               const char *timing_cache)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = dev;
    eo.precision = GR_PREC_FP32;
    eo.batch = 2;
    eo.f32_algo = algo;
    eo.tactic_search = search;
    eo.timing_cache = timing_cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "%s", gr_last_error());
    return e;
}

/* YOLOv2-tiny (synthetic weights) at batch 2, one random input, and the CPU reference's output. */
typedef struct f32_case {
    gr_model *model;
    gr_engine *cpu;
    float *input;
    const float *ref;
    size_t n_out;
    double range;
} f32_case;

static void f32_case_init(f32_case *t)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    ck_assert_msg(gr_model_load(&mo, &t->model) == GR_OK, "%s", gr_last_error());
    t->cpu = build_engine(t->model, GR_DEVICE_CPU, GR_F32_ALGO_AUTO, 0, NULL);
    gr_tensor_desc in, od;
    ck_assert(gr_engine_input_desc(t->cpu, &in) == GR_OK);
    const size_t n_in = (size_t)in.n * in.c * in.h * in.w;
    t->input = xmalloc(n_in * sizeof(float));
    for (size_t i = 0; i < n_in; ++i)
        t->input[i] = 0.05f + 0.9f * gr_rng_uniform(&rng);
    ck_assert(gr_engine_run_f32(t->cpu, t->input) == GR_OK);
    ck_assert(gr_engine_output_desc(t->cpu, 0, &od) == GR_OK);
    t->n_out = (size_t)od.n * od.c * od.h * od.w;
    ck_assert(gr_engine_output(t->cpu, 0, &t->ref) == GR_OK);
    double lo = 1e300, hi = -1e300;
    for (size_t i = 0; i < t->n_out; ++i) {
        lo = fmin(lo, (double)t->ref[i]);
        hi = fmax(hi, (double)t->ref[i]);
    }
    t->range = hi - lo;
}

static void f32_case_free(f32_case *t)
{
    free(t->input);
    gr_engine_destroy(t->cpu);
    gr_model_destroy(t->model);
}

/* The GPU engine's output against the CPU's: NRMSE of the output range. */
static double f32_case_nrmse(const f32_case *t, gr_engine *gpu)
{
    ck_assert_msg(gr_engine_run_f32(gpu, t->input) == GR_OK, "%s", gr_last_error());
    const float *out = NULL;
    ck_assert(gr_engine_output(gpu, 0, &out) == GR_OK);
    double sq = 0.0;
    for (size_t i = 0; i < t->n_out; ++i)
        sq += ((double)out[i] - (double)t->ref[i]) * ((double)out[i] - (double)t->ref[i]);
    return sqrt(sq / (double)t->n_out) / t->range;
}

/* Every f32_algo, forced (the search off), agrees with the CPU reference within test_gpu_engine's
 * fp32 bound (NRMSE 1e-5 of the output range). AUTO: the rule (the direct kernel with its pools
 * on layers 0-2, 3xTF32 where its grid fills the SMs, SGEMM elsewhere); DIRECT3X3: every 3x3 conv
 * direct. A value outside the enum fails the build with a message naming the option. */
START_TEST(test_engine_f32_algorithms)
{
    f32_case t;
    f32_case_init(&t);
    for (int a = GR_F32_ALGO_AUTO; a <= GR_F32_ALGO_DIRECT3X3; ++a) {
        gr_engine *gpu = build_engine(t.model, GR_DEVICE_GPU, (gr_f32_algo)a, 0, NULL);
        const double nrmse = f32_case_nrmse(&t, gpu);
        const char *name = gr_f32_algo_name((gr_f32_algo)a);
        printf("gpu_gemm_f32: engine fp32 with f32_algo %s: NRMSE %.3g\n", name, nrmse);
        ck_assert_msg(nrmse <= 1e-5, "f32_algo %s: NRMSE %g", name, nrmse);
        gr_engine_destroy(gpu);
    }
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.f32_algo = (gr_f32_algo)99;
    gr_engine *bad = NULL;
    ck_assert_int_eq(gr_engine_build(t.model, &eo, &bad), GR_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gr_last_error(), "f32_algo=99") != NULL, "%s", gr_last_error());
    ck_assert_ptr_null(bad);
    f32_case_free(&t);
}
END_TEST

/* Lines of the timing cache file whose layer key is an fp32 conv's ("f32:..."). */
static int f32_cache_entries(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "timing cache %s was not written", path);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "f32:", 4) == 0;
    fclose(f);
    return n;
}

/* f32_algo AUTO with the tactic search on: each fp32 conv's algorithm is measured (the search is
 * turned on here although CMake turns it off for the GPU suites), the engine still agrees with the
 * CPU within 1e-5, the choices land in the timing cache as "f32:" entries, and a second build
 * from that file measures nothing and agrees too. */
START_TEST(test_engine_f32_search_cached)
{
    const char *env = getenv("GR_DISABLE_TACTIC_SEARCH");
    char *saved = env ? strdup(env) : NULL;
    ck_assert_int_eq(unsetenv("GR_DISABLE_TACTIC_SEARCH"), 0);
    char cache[256];
    snprintf(cache, sizeof cache, "/tmp/graphrun_gpu_gemm_f32_%d.timing", (int)getpid());
    unlink(cache);
    f32_case t;
    f32_case_init(&t);
    for (int build = 0; build < 2; ++build) {
        gr_engine *gpu = build_engine(t.model, GR_DEVICE_GPU, GR_F32_ALGO_AUTO, 1, cache);
        gr_tactic_stats st;
        ck_assert_int_eq(gr_engine_tactic_stats(gpu, &st), GR_OK);
        const double nrmse = f32_case_nrmse(&t, gpu);
        printf("gpu_gemm_f32: fp32 search, build %d: %d convs, %d measured (%d candidates), %d "
               "cached, NRMSE %.3g\n", build, st.convs, st.searched, st.candidates, st.cached,
               nrmse);
        ck_assert_msg(nrmse <= 1e-5, "build %d: NRMSE %g", build, nrmse);
        ck_assert_int_gt(st.convs, 0);
        ck_assert_int_eq(st.searched + st.cached, st.convs);
        if (build == 0)
            ck_assert_int_gt(st.candidates, st.convs); /* more than the rule's was timed */
        else
            ck_assert_int_eq(st.candidates, 0);
        ck_assert_int_gt(f32_cache_entries(cache), 0); /* convs of one shape share an entry */
        gr_engine_destroy(gpu);
    }
    f32_case_free(&t);
    unlink(cache);
    if (saved)
        setenv("GR_DISABLE_TACTIC_SEARCH", saved, 1);
    free(saved);
}
END_TEST

/* One TCase per part, so a sanitizer run can take one
 * (CK_RUN_CASE=im2col|gemm|conv|direct|engine). */
static Suite *gemm_suite(void)
{
    Suite *s = suite_create("gpu_gemm_f32");
    TCase *im2col = tcase_create("im2col");
    tcase_set_timeout(im2col, 600);
    tcase_add_loop_test(im2col, test_im2col_bit_identical, 0, N_IM2COL);
    suite_add_tcase(s, im2col);
    TCase *gemm = tcase_create("gemm");
    tcase_set_timeout(gemm, 600);
    tcase_add_loop_test(gemm, test_gemm_tf32x3, 0, N_GEMM * (GR_TF32X3_TILES + 1));
    tcase_add_test(gemm, test_gemm_refused_before_sm80);
    tcase_add_test(gemm, test_gemm_bad_arguments);
    tcase_add_test(gemm, test_auto_tile);
    tcase_add_loop_test(gemm, test_gemm_splitk, 0, N_GEMM * 9);
    tcase_add_test(gemm, test_gemm_auto_splits);
    suite_add_tcase(s, gemm);
    TCase *conv = tcase_create("conv");
    tcase_set_timeout(conv, 600);
    tcase_add_loop_test(conv, test_conv_algorithms, 0, 3 * N_CONV);
    tcase_add_loop_test(conv, test_conv_implicit_tiles, 0, N_CONV * GR_TF32X3_TILES);
    tcase_add_loop_test(conv, test_conv_splitk, 0, N_CONV);
    suite_add_tcase(s, conv);
    TCase *direct = tcase_create("direct");
    tcase_set_timeout(direct, 600);
    tcase_add_loop_test(direct, test_conv_direct3x3, 0, N_DIRECT);
    tcase_add_loop_test(direct, test_conv_direct3x3_network_shapes, 0, N_NETWORK);
    tcase_add_test(direct, test_conv_direct3x3_refusals);
    suite_add_tcase(s, direct);
    TCase *engine = tcase_create("engine");
    tcase_set_timeout(engine, 600);
    tcase_add_test(engine, test_engine_f32_algorithms);
    tcase_add_test(engine, test_engine_f32_search_cached);
    suite_add_tcase(s, engine);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_gemm_f32"))
        return 77;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&device_major, cudaDevAttrComputeCapabilityMajor, dev) !=
            cudaSuccess) {
        printf("gpu_gemm_f32: cannot read the device's compute capability\n");
        return 1;
    }
    const char *seed_env = getenv("GR_TEST_SEED");
    test_seed = seed_env ? strtoull(seed_env, NULL, 10)
                         : ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)clock();
    printf("gpu_gemm_f32: seed %llu (GR_TEST_SEED=%llu repeats this run), sm_%d\n",
           (unsigned long long)test_seed, (unsigned long long)test_seed, device_major);
    gr_rng_seed(&rng, test_seed);
    int failed = gr_test_run_in_process(gemm_suite());
    return failed == 0 ? 0 : 1;
}
#endif
