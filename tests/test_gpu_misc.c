/* GPU tests of the non-GEMM kernels (kernels/misc.h): every kernel, every dtype, against an
 * independent CPU computation written here, on random inputs and odd shapes (13x13, 7x5, c = 3,
 * c = 125, batch 3, channel slices), and the classifier's softmax against its op reference.
 *
 * How a case is checked: the output buffer (with GUARD bytes on both sides) is filled with a poison
 * byte on the device and in the host's expected copy; the CPU reference writes only what the
 * kernel must write; the kernel runs; the whole region, guards included, must then equal the
 * expectation. Each case runs twice with two different poison bytes, so an element the kernel
 * forgot cannot match by chance, and a write outside the output (guards, channels outside a slice)
 * shows up as a changed poison byte. Input buffers are random everywhere, padding channels and
 * channels outside a slice included, so reading the wrong channel changes the result.
 *
 * Exact equality wherever the math is exact (moves, max, rint-based conversion, sequential sums
 * done in the same order with IEEE-rounded operations); a relative tolerance only where the GPU and
 * the C library may differ in the last bits of exp (logistic/softmax: see rel_tol uses).
 * Seed: fresh per run (time), printed; GR_TEST_SEED=<n> repeats one.
 * Exits 77 with "SKIP gpu_misc: no CUDA device (...)" when no device is visible. */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels/common.h"
#include "kernels/misc.h"
#include "base/base.h"
#include "ops/activation.h"
#include "ops/ops.h"
#include "tests/support/gpu_test.h"

#define GUARD 256

static uint64_t test_seed;
static gr_rng rng;

/* ---- layouts (the contract in kernels/misc.h, written out again here) ------------------------ */

static size_t esize(gr_dtype t) { return t == GR_DTYPE_F32 ? 4 : t == GR_DTYPE_F16 ? 2 : 1; }
static int align_of(gr_dtype t) { return t == GR_DTYPE_F16 ? 8 : t == GR_DTYPE_I8 ? 16 : 1; }

static size_t at(gr_dtype t, const gr_kview *v, int n, int ch, int y, int x)
{
    if (t == GR_DTYPE_F32)
        return (((size_t)n * v->c_stride + v->c_offset + ch) * v->h + y) * v->w + x;
    return (((size_t)n * v->h + y) * v->w + x) * v->c_stride + v->c_offset + ch;
}

static size_t buffer_elems(const gr_kview *v) { return (size_t)v->n * v->c_stride * v->h * v->w; }

/* Channels the producer writes: its own, plus the buffer's padding if it ends in the last
 * granule. */
static int written_channels(gr_dtype t, const gr_kview *v)
{
    int a = align_of(t);
    return (a > 1 && v->c_offset + v->c > v->c_stride - a) ? v->c_stride - v->c_offset : v->c;
}

static gr_kview view(gr_dtype t, int n, int c, int h, int w)
{
    return gr_kview_dense(t, n, c, h, w);
}

static gr_kview slice(int n, int c, int h, int w, int c_stride, int c_offset)
{
    gr_kview v = {n, c, h, w, c_stride, c_offset};
    return v;
}

static float load_real(gr_dtype t, const unsigned char *buf, size_t i)
{
    if (t == GR_DTYPE_F32) {
        float f;
        memcpy(&f, buf + 4 * i, 4);
        return f;
    }
    if (t == GR_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, buf + 2 * i, 2);
        return gr_f16_to_f32(h);
    }
    return (float)(int8_t)buf[i];
}

static int8_t requantize(float y, float inv_scale)
{
    float q = rintf(y * inv_scale);
    return (int8_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : (int)q);
}

static void store_real(gr_dtype t, unsigned char *buf, size_t i, float y, float inv_scale)
{
    if (t == GR_DTYPE_F32) {
        memcpy(buf + 4 * i, &y, 4);
    } else if (t == GR_DTYPE_F16) {
        uint16_t h = gr_f32_to_f16(y);
        memcpy(buf + 2 * i, &h, 2);
    } else {
        buf[i] = (unsigned char)requantize(y, inv_scale);
    }
}

static void copy_elem(gr_dtype t, unsigned char *dst, size_t di, const unsigned char *src,
                      size_t si)
{
    memcpy(dst + di * esize(t), src + si * esize(t), esize(t));
}

static void store_zero(gr_dtype t, unsigned char *buf, size_t i)
{
    memset(buf + i * esize(t), 0, esize(t));
}

/* Zero the padding channels the producer of view v must write. */
static void expect_padding(gr_dtype t, const gr_kview *v, unsigned char *out)
{
    int cw = written_channels(t, v);
    for (int n = 0; n < v->n; n++)
        for (int y = 0; y < v->h; y++)
            for (int x = 0; x < v->w; x++)
                for (int ch = v->c; ch < cw; ch++)
                    store_zero(t, out, at(t, v, n, ch, y, x));
}

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct kcase {
    gr_dtype in_t, out_t;
    gr_kview in_v, in2_v, out_v;
    unsigned char *in_host, *in2_host;
    void *in_dev, *in2_dev;
    float in_scale, in2_scale, out_scale;
    int size, stride, padding, factor;
    gr_activation act;
    int num, coords, classes, softmax;
    int groups; /* [softmax] */
    float scale_x_y; /* [yolo] */
    int new_coords;
} kcase;

typedef cudaError_t (*launch_fn)(const kcase *k, void *out);
typedef void (*ref_fn)(const kcase *k, unsigned char *out);

static float random_scale(void) { return 0.01f + 0.1f * gr_rng_uniform(&rng); }

/* Random non-zero-biased contents for a whole buffer (padding and foreign channels too). */
static unsigned char *random_buffer(gr_dtype t, size_t elems, float spread)
{
    unsigned char *b = malloc(elems * esize(t) + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < elems; i++) {
        if (t == GR_DTYPE_U8)
            b[i] = (unsigned char)(gr_rng_u64(&rng) & 0xFF);
        else if (t == GR_DTYPE_I8)
            b[i] = (unsigned char)(int8_t)((int)(gr_rng_u64(&rng) % 255) - 127);
        else
            store_real(t, b, i, spread * gr_rng_normal(&rng), 1.0f);
    }
    return b;
}

static void *upload(const unsigned char *host, size_t bytes)
{
    void *dev = NULL;
    ck_assert_int_eq(cudaMalloc(&dev, bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return dev;
}

static void case_input(kcase *k, int second, gr_dtype t, gr_kview v, float spread)
{
    size_t elems = buffer_elems(&v);
    unsigned char *host = random_buffer(t, elems, spread);
    void *dev = upload(host, elems * esize(t));
    if (second) {
        k->in2_v = v, k->in2_host = host, k->in2_dev = dev;
    } else {
        k->in_t = t, k->in_v = v, k->in_host = host, k->in_dev = dev;
    }
}

static void case_free(kcase *k)
{
    free(k->in_host);
    free(k->in2_host);
    cudaFree(k->in_dev);
    cudaFree(k->in2_dev);
    k->in_host = k->in2_host = NULL;
    k->in_dev = k->in2_dev = NULL;
}

/* Run one case twice (two poison bytes) and compare the whole output region, guards included.
 * rel_tol = 0: bytes must be identical. rel_tol > 0 (f32 outputs only): each element within
 * rel_tol * max(|expected|, 1e-3), guards still exact. The floor: AlexeyAB's tanh is
 * (e^2x - 1) / (e^2x + 1), whose result near 0 carries the absolute error of expf near 1 (a few
 * 2^-24: the H100 gave 7.2e-7 where the CPU gave 6.0e-7), not a relative one. */
static void run_case(const kcase *k, launch_fn launch, ref_fn ref, float rel_tol, const char *what)
{
    size_t es = esize(k->out_t);
    size_t bytes = buffer_elems(&k->out_v) * es, total = bytes + 2 * GUARD;
    unsigned char *dev = NULL, *expect = malloc(total), *got = malloc(total);
    ck_assert_ptr_nonnull(expect);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(cudaMalloc((void **)&dev, total), cudaSuccess);
    static const unsigned char poisons[2] = {0xA5, 0x5A};
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(cudaMemset(dev, poisons[pass], total), cudaSuccess);
        memset(expect, poisons[pass], total);
        ref(k, expect + GUARD);
        cudaError_t launched = launch(k, dev + GUARD);
        ck_assert_msg(launched == cudaSuccess, "%s: launch failed: %s", what,
                      cudaGetErrorString(launched));
        cudaError_t synced = cudaDeviceSynchronize();
        ck_assert_msg(synced == cudaSuccess, "%s: kernel failed: %s", what,
                      cudaGetErrorString(synced));
        ck_assert_int_eq(cudaMemcpy(got, dev, total, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_msg(memcmp(got, expect, GUARD) == 0 &&
                          memcmp(got + GUARD + bytes, expect + GUARD + bytes, GUARD) == 0,
                      "%s: guard bytes overwritten", what);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < bytes / es; i++) {
            const unsigned char *g = got + GUARD, *e = expect + GUARD;
            int same = memcmp(g + i * es, e + i * es, es) == 0;
            if (!same && rel_tol > 0.0f && k->out_t == GR_DTYPE_F32) {
                float gv = load_real(GR_DTYPE_F32, g, i), ev = load_real(GR_DTYPE_F32, e, i);
                float mag = fabsf(ev) > 1e-3f ? fabsf(ev) : 1e-3f;
                same = fabsf(gv - ev) <= rel_tol * mag;
            }
            if (!same && bad++ == 0)
                first = i;
        }
        ck_assert_msg(bad == 0,
                      "%s (poison 0x%02X, seed %" PRIu64 "): %zu of %zu elements differ; first at "
                      "element %zu: got %.9g expected %.9g",
                      what, poisons[pass], test_seed, bad, bytes / es, first,
                      (double)load_real(k->out_t, got + GUARD, first),
                      (double)load_real(k->out_t, expect + GUARD, first));
    }
    cudaFree(dev);
    free(expect);
    free(got);
}

static const gr_dtype all_dtypes[3] = {GR_DTYPE_F32, GR_DTYPE_F16, GR_DTYPE_I8};

/* ---- maxpool --------------------------------------------------------------------------------- */

static void ref_maxpool(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    gr_dtype t = k->in_t;
    int start = -k->padding / 2;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int oy = 0; oy < ov->h; oy++)
                for (int ox = 0; ox < ov->w; ox++) {
                    long best = -1;
                    float best_val = 0.0f;
                    for (int dy = 0; dy < k->size; dy++)
                        for (int dx = 0; dx < k->size; dx++) {
                            int y = oy * k->stride + start + dy, x = ox * k->stride + start + dx;
                            if (y < 0 || y >= iv->h || x < 0 || x >= iv->w)
                                continue;
                            size_t i = at(t, iv, n, ch, y, x);
                            float v = load_real(t, k->in_host, i);
                            if (best < 0 || v > best_val)
                                best = (long)i, best_val = v;
                        }
                    ck_assert(best >= 0); /* the cases below never have an empty window */
                    copy_elem(t, out, at(t, ov, n, ch, oy, ox), k->in_host, (size_t)best);
                }
    expect_padding(t, ov, out);
}

static cudaError_t launch_maxpool(const kcase *k, void *out)
{
    return gr_launch_maxpool(k->in_t, k->in_dev, k->in_v, out, k->out_v, k->size, k->stride,
                             k->padding, 0);
}

START_TEST(maxpool_matches_darknet_windows)
{
    /* {n, c, h, w, size, stride, padding}: 13x13 size 2 stride 1 keeps 13x13 (pads right/bottom),
     * size 2 stride 2 on odd input gives ceil, a 3x3 window with padding on both sides. */
    static const int shapes[][7] = {
        {1, 3, 13, 13, 2, 1, 1}, {3, 125, 13, 13, 2, 2, 1}, {3, 19, 7, 5, 2, 2, 1},
        {1, 125, 7, 5, 3, 1, 2}, {2, 3, 7, 5, 3, 2, 2},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 3; d++) {
            const int *p = shapes[s];
            gr_dtype t = all_dtypes[d];
            kcase k = {0};
            k.size = p[4], k.stride = p[5], k.padding = p[6];
            int oh = (p[2] + k.padding - k.size) / k.stride + 1;
            int ow = (p[3] + k.padding - k.size) / k.stride + 1;
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 3.0f);
            k.out_t = t;
            k.out_v = view(t, p[0], p[1], oh, ow);
            char what[128];
            snprintf(what, sizeof what, "maxpool %s case %zu", gr_dtype_name(t), s);
            run_case(&k, launch_maxpool, ref_maxpool, 0.0f, what);
            case_free(&k);
        }
    /* 13x13, size 2 stride 1 must keep the spatial size */
    ck_assert_int_eq((13 + 1 - 2) / 1 + 1, 13);
}
END_TEST

START_TEST(maxpool_reads_and_writes_channel_slices)
{
    for (int d = 0; d < 3; d++) {
        gr_dtype t = all_dtypes[d];
        int a = align_of(t);
        kcase k = {0};
        k.size = 2, k.stride = 2, k.padding = 1;
        /* input: 5 channels from inside a wider buffer; output: 5 channels at a granule start of
         * a 2-granule buffer (f16/i8: the slice ends in the last granule, so it writes the tail
         * padding), batch 3. */
        int f32 = t == GR_DTYPE_F32;
        case_input(&k, 0, t, slice(3, 5, 13, 13, f32 ? 9 : 3 * a, f32 ? 2 : a), 3.0f);
        k.out_t = t;
        k.out_v = slice(3, 5, 7, 7, f32 ? 9 : 2 * a, f32 ? 3 : a);
        char what[64];
        snprintf(what, sizeof what, "maxpool slice %s", gr_dtype_name(t));
        run_case(&k, launch_maxpool, ref_maxpool, 0.0f, what);
        /* an output slice off the granule grid: f16/i8 take the scalar path, not the vector one */
        k.out_v = slice(3, 5, 7, 7, f32 ? 9 : 2 * a, 3);
        snprintf(what, sizeof what, "maxpool unaligned slice %s", gr_dtype_name(t));
        run_case(&k, launch_maxpool, ref_maxpool, 0.0f, what);
        case_free(&k);
    }
}
END_TEST

/* ---- avgpool --------------------------------------------------------------------------------- */

static void ref_avgpool(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    gr_dtype t = k->in_t;
    for (int n = 0; n < iv->n; n++)
        for (int ch = 0; ch < iv->c; ch++) {
            float mean;
            if (t == GR_DTYPE_I8) {
                int sum = 0;
                for (int y = 0; y < iv->h; y++)
                    for (int x = 0; x < iv->w; x++)
                        sum += (int8_t)k->in_host[at(t, iv, n, ch, y, x)];
                mean = ((float)sum * k->in_scale) / (float)(iv->h * iv->w);
            } else {
                float sum = 0.0f;
                for (int y = 0; y < iv->h; y++)
                    for (int x = 0; x < iv->w; x++)
                        sum += load_real(t, k->in_host, at(t, iv, n, ch, y, x));
                mean = sum / (float)(iv->h * iv->w);
            }
            store_real(t, out, at(t, ov, n, ch, 0, 0), mean, 1.0f / k->out_scale);
        }
    expect_padding(t, ov, out);
}

static cudaError_t launch_avgpool(const kcase *k, void *out)
{
    return gr_launch_avgpool(k->in_t, k->in_dev, k->in_v, k->in_scale, out, k->out_v, k->out_scale,
                             0);
}

START_TEST(avgpool_is_global_mean_per_channel)
{
    static const int shapes[][4] = {{1, 3, 13, 13}, {3, 125, 7, 5}, {2, 19, 1, 1}};
    for (size_t s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[s];
            kcase k = {0};
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 2.0f);
            k.in_scale = random_scale();
            /* the mean of i8 values is smaller than its inputs: a smaller output scale */
            k.out_scale = k.in_scale * (0.1f + 0.3f * gr_rng_uniform(&rng));
            k.out_t = t;
            k.out_v = view(t, p[0], p[1], 1, 1);
            char what[64];
            snprintf(what, sizeof what, "avgpool %s case %zu", gr_dtype_name(t), s);
            run_case(&k, launch_avgpool, ref_avgpool, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

/* ---- upsample -------------------------------------------------------------------------------- */

static void ref_upsample(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++)
                    copy_elem(k->in_t, out, at(k->in_t, ov, n, ch, y, x), k->in_host,
                              at(k->in_t, iv, n, ch, y / k->factor, x / k->factor));
    expect_padding(k->in_t, ov, out);
}

static cudaError_t launch_upsample(const kcase *k, void *out)
{
    return gr_launch_upsample(k->in_t, k->in_dev, k->in_v, out, k->out_v, k->factor, 0);
}

START_TEST(upsample_repeats_nearest)
{
    static const int shapes[][5] = {{1, 3, 13, 13, 2}, {3, 125, 7, 5, 2}, {2, 5, 7, 5, 3}};
    for (size_t s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[s];
            kcase k = {0};
            k.factor = p[4];
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 2.0f);
            k.out_t = t;
            k.out_v = view(t, p[0], p[1], p[2] * k.factor, p[3] * k.factor);
            if (s == 2) /* write into the second slice of a concat buffer (yolov3-tiny's route) */
                k.out_v = slice(p[0], p[1], p[2] * k.factor, p[3] * k.factor,
                                t == GR_DTYPE_F32 ? 7 : 2 * align_of(t), align_of(t));
            char what[64];
            snprintf(what, sizeof what, "upsample %s case %zu", gr_dtype_name(t), s);
            run_case(&k, launch_upsample, ref_upsample, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

/* ---- reorg ----------------------------------------------------------------------------------- */

/* Darknet's reorg_cpu(x, w, h, c, batch, stride, forward = 0, out) literally, on dense NCHW
 * arrays of element indices; then the layouts are applied. */
static void ref_reorg(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    int w = iv->w, h = iv->h, c = iv->c, s = k->stride, out_c = c / (s * s);
    for (int b = 0; b < iv->n; b++)
        for (int kk = 0; kk < c; kk++)
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++) {
                    int in_index = i + w * (j + h * kk);
                    int c2 = kk % out_c, offset = kk / out_c;
                    int w2 = i * s + offset % s, h2 = j * s + offset / s;
                    int out_index = w2 + w * s * (h2 + h * s * c2);
                    /* out[in_index] = x[out_index]: flat index -> logical (ch, y, x) of each side
                     */
                    size_t dst = at(k->in_t, ov, b, (int)(in_index / (ov->h * ov->w)),
                                    (in_index / ov->w) % ov->h, in_index % ov->w);
                    size_t src = at(k->in_t, iv, b, (int)(out_index / (h * w)), (out_index / w) % h,
                                    out_index % w);
                    copy_elem(k->in_t, out, dst, k->in_host, src);
                }
    expect_padding(k->in_t, ov, out);
}

static cudaError_t launch_reorg(const kcase *k, void *out)
{
    return gr_launch_reorg(k->in_t, k->in_dev, k->in_v, out, k->out_v, k->stride, 0);
}

START_TEST(reorg_follows_darknet_order)
{
    /* YOLOv2's 64x26x26 -> 256x13x13 (batch 3), an odd channel count, stride 3 */
    static const int shapes[][5] = {{3, 64, 26, 26, 2}, {1, 12, 14, 10, 2}, {2, 18, 9, 6, 3}};
    for (size_t s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[s];
            kcase k = {0};
            k.stride = p[4];
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 2.0f);
            k.out_t = t;
            k.out_v = view(t, p[0], p[1] * k.stride * k.stride, p[2] / k.stride, p[3] / k.stride);
            char what[64];
            snprintf(what, sizeof what, "reorg %s case %zu", gr_dtype_name(t), s);
            run_case(&k, launch_reorg, ref_reorg, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

START_TEST(reorg_small_literal_case)
{
    /* C=4, H=W=2, s=2 (oc = 1): out[i + 2*(j + 2*k)] = in[(2i + k%2) + 4*(2j + k/2)], read back
     * flat: in flat 0..15 -> out flat = {0,2,8,10, 1,3,9,11, 4,6,12,14, 5,7,13,15}. */
    static const int expect_src[16] = {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15};
    float host_in[16], host_out[16];
    for (int i = 0; i < 16; i++)
        host_in[i] = (float)i + 0.5f;
    void *din = upload((const unsigned char *)host_in, sizeof host_in), *dout = NULL;
    ck_assert_int_eq(cudaMalloc(&dout, sizeof host_out), cudaSuccess);
    ck_assert_int_eq(gr_launch_reorg(GR_DTYPE_F32, din, view(GR_DTYPE_F32, 1, 4, 2, 2), dout,
                                     view(GR_DTYPE_F32, 1, 16, 1, 1), 2, 0),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(host_out, dout, sizeof host_out, cudaMemcpyDeviceToHost),
                     cudaSuccess);
    for (int i = 0; i < 16; i++)
        ck_assert_msg(host_out[i] == (float)expect_src[i] + 0.5f, "reorg literal: out[%d] = %g", i,
                      (double)host_out[i]);
    cudaFree(din);
    cudaFree(dout);
}
END_TEST

/* ---- route copy ------------------------------------------------------------------------------ */

static void ref_route_copy(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++)
                    copy_elem(k->in_t, out, at(k->in_t, ov, n, ch, y, x), k->in_host,
                              at(k->in_t, iv, n, ch, y, x));
    expect_padding(k->in_t, ov, out);
}

static cudaError_t launch_route_copy(const kcase *k, void *out)
{
    return gr_launch_route_copy(k->in_t, k->in_dev, k->in_v, out, k->out_v, 0);
}

START_TEST(route_copy_fills_concat_slices)
{
    /* Concat of c1 = 5 and c2 = 13 channels (total 18, not a granule multiple so the planner
     * cannot alias): the first copy leaves the rest alone, the second writes the tail padding. A
     * third case copies one group (route groups=2 group_id=1) of a 125-channel tensor, batch 3.
     * The fourth and fifth are granule-aligned (f16 / i8: the 16-byte vector path), a slice of
     * two granules into the middle of a four-granule buffer and a 3-channel tensor (padding
     * lanes) into the last granule of its own. */
    for (int d = 0; d < 3; d++) {
        gr_dtype t = all_dtypes[d];
        int a = align_of(t), total = 18, stride = (total + a - 1) / a * a;
        struct {
            gr_kview in, out;
        } cases[5] = {
            {view(t, 2, 5, 7, 5), slice(2, 5, 7, 5, stride, 0)},
            {view(t, 2, 13, 7, 5), slice(2, 13, 7, 5, stride, 5)},
            {slice(3, 62, 13, 13, view(t, 3, 125, 13, 13).c_stride, 63), view(t, 3, 62, 13, 13)},
            {view(t, 2, 2 * a, 7, 5), slice(2, 2 * a, 7, 5, 4 * a, a)},
            {view(t, 3, 3, 6, 9), view(t, 3, 3, 6, 9)},
        };
        for (int c = 0; c < 5; c++) {
            kcase k = {0};
            case_input(&k, 0, t, cases[c].in, 2.0f);
            k.out_t = t;
            k.out_v = cases[c].out;
            char what[64];
            snprintf(what, sizeof what, "route copy %s case %d", gr_dtype_name(t), c);
            run_case(&k, launch_route_copy, ref_route_copy, 0.0f, what);
            case_free(&k);
        }
    }
}
END_TEST

/* ---- shortcut -------------------------------------------------------------------------------- */

static float logistic_darknet(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* Darknet's CPU activations (the ops reference follows them): double .1 in leaky, x*(x>0);
 * AlexeyAB's float formulas for the others (ops/activation.h, checked against AlexeyAB's own
 * activations.c by tests/test_ops.c). */
static float act_ref(float y, gr_activation a)
{
    switch (a) {
    case GR_ACT_LEAKY: return y > 0.0f ? y : (float)(0.1 * (double)y);
    case GR_ACT_RELU: return y * (y > 0.0f ? 1.0f : 0.0f);
    case GR_ACT_LOGISTIC: return logistic_darknet(y);
    default: return gr_act_common(y, a);
    }
}

/* Darknet shortcut_cpu with alpha = beta = 1, written as its loops over the overlap. */
static void ref_shortcut(const kcase *k, unsigned char *out)
{
    const gr_kview *xv = &k->in_v, *fv = &k->in2_v, *ov = &k->out_v;
    gr_dtype t = k->in_t;
    int is_i8 = t == GR_DTYPE_I8;
    float sx = is_i8 ? k->in_scale : 1.0f, sf = is_i8 ? k->in2_scale : 1.0f;
    float *sum = malloc(sizeof(float) * (size_t)ov->n * ov->c * ov->h * ov->w);
    ck_assert_ptr_nonnull(sum);
#define SUM(n, ch, y, x) sum[(((size_t)(n)*ov->c + (ch)) * ov->h + (y)) * ov->w + (x)]
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++)
                    SUM(n, ch, y, x) = load_real(t, k->in_host, at(t, xv, n, ch, y, x)) * sx;
    int stride = fv->w / xv->w, sample = xv->w / fv->w;
    stride = stride < 1 ? 1 : stride;
    sample = sample < 1 ? 1 : sample;
    int minw = xv->w < fv->w ? xv->w : fv->w, minh = xv->h < fv->h ? xv->h : fv->h;
    int minc = xv->c < fv->c ? xv->c : fv->c;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < minc; ch++)
            for (int j = 0; j < minh; j++)
                for (int i = 0; i < minw; i++)
                    SUM(n, ch, j * sample, i * sample) +=
                        load_real(t, k->in2_host, at(t, fv, n, ch, j * stride, i * stride)) * sf;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++)
                    store_real(t, out, at(t, ov, n, ch, y, x), act_ref(SUM(n, ch, y, x), k->act),
                               1.0f / k->out_scale);
#undef SUM
    free(sum);
    expect_padding(t, ov, out);
}

static cudaError_t launch_shortcut(const kcase *k, void *out)
{
    return gr_launch_shortcut(k->in_t, k->in_dev, k->in_v, k->in_scale, k->in2_dev, k->in2_v,
                              k->in2_scale, out, k->out_v, k->out_scale, k->act, 0);
}

START_TEST(shortcut_adds_with_darknet_shape_rule)
{
    /* {x: n c h w}, {from: c h w}, activation: same shape; from twice as large (stride 2) with
     * more channels; from half as large (sample 2: only every other pixel gets added) with
     * fewer channels. Activations with exact f32 formulas only (logistic: next test). */
    static const int shapes[][7] = {
        {3, 125, 13, 13, 125, 13, 13},
        {2, 19, 7, 5, 32, 14, 10},
        {1, 40, 14, 10, 3, 7, 5},
    };
    static const gr_activation acts[3] = {GR_ACT_LINEAR, GR_ACT_LEAKY, GR_ACT_RELU};
    for (size_t s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[s];
            kcase k = {0};
            k.act = acts[s];
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 2.0f);
            case_input(&k, 1, t, view(t, p[0], p[4], p[5], p[6]), 2.0f);
            k.in_scale = random_scale(), k.in2_scale = random_scale();
            k.out_scale = k.in_scale + k.in2_scale;
            k.out_t = t;
            k.out_v = k.in_v;
            char what[64];
            snprintf(what, sizeof what, "shortcut %s case %zu", gr_dtype_name(t), s);
            run_case(&k, launch_shortcut, ref_shortcut, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

START_TEST(shortcut_transcendental_activations_f32)
{
    /* logistic: double exp on both sides (CUDA's and glibc's differ by at most an ulp of a
     * double, invisible after rounding to f32 but for a rare tie): 1e-6 relative. Every other
     * exp-based one is AlexeyAB's float formula: expf/logf/tanhf/powf within 2 ulp on the GPU and
     * 1 in glibc, and the formulas cancel near 0 (tanh_activate's 2/(1+e^-2s) - 1 in mish and
     * tanh, logf(expf(x)+1) in mish's softplus, expf(x) - 1 in elu/selu, loggy): a few ulp of 1
     * become ~1e-4 of a small result (inputs reach -6: softplus(-6) = 0.0025, its error ~2e-7):
     * 1e-3 relative, far below what a wrong formula or a wrong activation gives. The piecewise
     * ones have no libm call: exact. */
    static const gr_activation acts[] = {GR_ACT_LOGISTIC, GR_ACT_SWISH,    GR_ACT_MISH,
                                         GR_ACT_RELU6,    GR_ACT_HARD_MISH, GR_ACT_ELU,
                                         GR_ACT_SELU,     GR_ACT_GELU,      GR_ACT_TANH,
                                         GR_ACT_LOGGY,    GR_ACT_RELIE,     GR_ACT_RAMP,
                                         GR_ACT_PLSE,     GR_ACT_STAIR,     GR_ACT_HARDTAN,
                                         GR_ACT_LHTAN};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        static const float piecewise = 0.0f;
        float tol = acts[a] == GR_ACT_LOGISTIC ? 1e-6f : 1e-3f;
        switch (acts[a]) {
        case GR_ACT_RELU6:
        case GR_ACT_HARD_MISH:
        case GR_ACT_RELIE:
        case GR_ACT_RAMP:
        case GR_ACT_PLSE:
        case GR_ACT_STAIR:
        case GR_ACT_HARDTAN:
        case GR_ACT_LHTAN: tol = piecewise; break;
        default: break;
        }
        kcase k = {0};
        k.act = acts[a];
        case_input(&k, 0, GR_DTYPE_F32, view(GR_DTYPE_F32, 3, 7, 13, 13), 3.0f);
        case_input(&k, 1, GR_DTYPE_F32, view(GR_DTYPE_F32, 3, 7, 13, 13), 3.0f);
        k.out_scale = 1.0f;
        k.out_t = GR_DTYPE_F32;
        k.out_v = k.in_v;
        char what[64];
        snprintf(what, sizeof what, "shortcut f32 %s", gr_activation_name(acts[a]));
        run_case(&k, launch_shortcut, ref_shortcut, tol, what);
        case_free(&k);
    }
}
END_TEST

START_TEST(shortcut_in_place)
{
    /* out == x: the same buffer, read then written element by element. */
    for (int d = 0; d < 3; d++) {
        gr_dtype t = all_dtypes[d];
        gr_kview v = view(t, 2, 21, 7, 5);
        size_t bytes = buffer_elems(&v) * esize(t);
        unsigned char *x = random_buffer(t, buffer_elems(&v), 2.0f);
        unsigned char *from = random_buffer(t, buffer_elems(&v), 2.0f);
        unsigned char *expect = malloc(bytes), *got = malloc(bytes);
        ck_assert_ptr_nonnull(expect);
        ck_assert_ptr_nonnull(got);
        kcase k = {0};
        k.in_t = k.out_t = t, k.in_v = k.in2_v = k.out_v = v;
        k.in_host = x, k.in2_host = from;
        k.in_scale = 0.05f, k.in2_scale = 0.03f, k.out_scale = 0.08f, k.act = GR_ACT_LEAKY;
        memcpy(expect, x, bytes);
        ref_shortcut(&k, expect);
        k.in_dev = upload(x, bytes);
        k.in2_dev = upload(from, bytes);
        ck_assert_int_eq(launch_shortcut(&k, k.in_dev), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(got, k.in_dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_msg(memcmp(got, expect, bytes) == 0, "in-place shortcut %s differs",
                      gr_dtype_name(t));
        free(expect);
        free(got);
        case_free(&k);
    }
}
END_TEST

/* ---- mul ([sam], [scale_channels]) ----------------------------------------------------------- */

/* out = act(x * s), s broadcast over a dimension it has only one of (kernels/misc.h); each operand
 * widened and (i8) scaled on its own, as the CPU emulation does. */
static void ref_mul(const kcase *k, unsigned char *out)
{
    const gr_kview *xv = &k->in_v, *sv = &k->in2_v, *ov = &k->out_v;
    gr_dtype t = k->in_t;
    int is_i8 = t == GR_DTYPE_I8, per_position = sv->h != 1 || sv->w != 1;
    float sx = is_i8 ? k->in_scale : 1.0f, ss = is_i8 ? k->in2_scale : 1.0f;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++) {
                    float a = load_real(t, k->in_host, at(t, xv, n, ch, y, x)) * sx;
                    size_t si = at(t, sv, n, sv->c == 1 ? 0 : ch, per_position ? y : 0,
                                   per_position ? x : 0);
                    float b = load_real(t, k->in2_host, si) * ss;
                    store_real(t, out, at(t, ov, n, ch, y, x), act_ref(a * b, k->act),
                               1.0f / k->out_scale);
                }
    expect_padding(t, ov, out);
}

static cudaError_t launch_mul(const kcase *k, void *out)
{
    return gr_launch_mul(k->in_t, k->in_dev, k->in_v, k->in_scale, k->in2_dev, k->in2_v,
                         k->in2_scale, out, k->out_v, k->out_scale, k->act, 0);
}

START_TEST(mul_broadcasts_like_sam_and_scale_channels)
{
    /* {x: n c h w}, {s: c h w}: sam (same shape), scale_channels per channel (c x 1 x 1, and
     * c = 3 below one granule), per position (1 x h x w); activations with exact formulas. */
    static const int shapes[][7] = {
        {3, 19, 7, 5, 19, 7, 5}, {2, 40, 13, 13, 40, 1, 1}, {1, 3, 7, 5, 3, 1, 1},
        {2, 21, 7, 5, 1, 7, 5},  {1, 125, 13, 13, 1, 13, 13},
    };
    static const gr_activation acts[] = {GR_ACT_LINEAR, GR_ACT_LEAKY, GR_ACT_RELU, GR_ACT_RELU6,
                                         GR_ACT_LINEAR};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[c];
            kcase k = {0};
            k.act = acts[c];
            case_input(&k, 0, t, view(t, p[0], p[1], p[2], p[3]), 2.0f);
            case_input(&k, 1, t, view(t, p[0], p[4], p[5], p[6]), 2.0f);
            k.in_scale = random_scale(), k.in2_scale = random_scale();
            k.out_scale = 2.0f * k.in_scale * k.in2_scale * 127.0f / 16.0f;
            k.out_t = t;
            k.out_v = k.in_v;
            char what[64];
            snprintf(what, sizeof what, "mul %s case %zu (%s)", gr_dtype_name(t), c,
                     gr_activation_name(k.act));
            run_case(&k, launch_mul, ref_mul, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

START_TEST(mul_reads_channel_slices_and_runs_in_place)
{
    for (int d = 0; d < 3; d++) {
        gr_dtype t = all_dtypes[d];
        int a = align_of(t), f32 = t == GR_DTYPE_F32;
        /* x: 5 channels from inside a wider buffer (a route's slice), s per channel */
        kcase k = {0};
        k.act = GR_ACT_LEAKY;
        case_input(&k, 0, t, slice(2, 5, 7, 5, f32 ? 9 : 3 * a, f32 ? 2 : a), 2.0f);
        case_input(&k, 1, t, view(t, 2, 5, 1, 1), 2.0f);
        k.in_scale = 0.05f, k.in2_scale = 0.03f, k.out_scale = 0.01f;
        k.out_t = t;
        k.out_v = view(t, 2, 5, 7, 5);
        char what[64];
        snprintf(what, sizeof what, "mul slice %s", gr_dtype_name(t));
        run_case(&k, launch_mul, ref_mul, 0.0f, what);
        case_free(&k);
        /* out == x (same view), s per position */
        gr_kview v = view(t, 2, 21, 7, 5), sv = view(t, 2, 1, 7, 5);
        size_t bytes = buffer_elems(&v) * esize(t);
        unsigned char *x = random_buffer(t, buffer_elems(&v), 2.0f);
        unsigned char *sc = random_buffer(t, buffer_elems(&sv), 2.0f);
        unsigned char *expect = malloc(bytes), *got = malloc(bytes);
        ck_assert_ptr_nonnull(expect);
        ck_assert_ptr_nonnull(got);
        kcase in_place = {0};
        in_place.in_t = in_place.out_t = t, in_place.in_v = in_place.out_v = v, in_place.in2_v = sv;
        in_place.in_host = x, in_place.in2_host = sc;
        in_place.in_scale = 0.05f, in_place.in2_scale = 0.03f, in_place.out_scale = 0.01f;
        in_place.act = GR_ACT_RELU;
        memcpy(expect, x, bytes);
        ref_mul(&in_place, expect);
        in_place.in_dev = upload(x, bytes);
        in_place.in2_dev = upload(sc, buffer_elems(&sv) * esize(t));
        ck_assert_int_eq(launch_mul(&in_place, in_place.in_dev), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(got, in_place.in_dev, bytes, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        ck_assert_msg(memcmp(got, expect, bytes) == 0, "in-place mul %s differs",
                      gr_dtype_name(t));
        free(expect);
        free(got);
        case_free(&in_place);
    }
}
END_TEST

START_TEST(mul_transcendental_activations_f32)
{
    /* The tolerances of shortcut_transcendental_activations_f32, for the same reasons. */
    static const gr_activation acts[] = {GR_ACT_LOGISTIC, GR_ACT_ELU, GR_ACT_TANH};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        kcase k = {0};
        k.act = acts[i];
        case_input(&k, 0, GR_DTYPE_F32, view(GR_DTYPE_F32, 2, 7, 13, 13), 2.0f);
        case_input(&k, 1, GR_DTYPE_F32, view(GR_DTYPE_F32, 2, 7, 1, 1), 2.0f);
        k.out_scale = 1.0f;
        k.out_t = GR_DTYPE_F32;
        k.out_v = k.in_v;
        char what[64];
        snprintf(what, sizeof what, "mul f32 %s", gr_activation_name(acts[i]));
        run_case(&k, launch_mul, ref_mul, acts[i] == GR_ACT_LOGISTIC ? 1e-6f : 1e-3f, what);
        case_free(&k);
    }
}
END_TEST

/* ---- quantize / dequantize ------------------------------------------------------------------- */

static float u8_real(unsigned char v) { return (float)v / 255.0f; }

static int8_t quantize_ref(float real, float scale)
{
    float q = rintf(real / scale);
    return (int8_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : (int)q);
}

/* u8 NHWC dense input (in_v describes its shape, dense c) -> out_t in out_v. */
static void ref_from_u8(const kcase *k, unsigned char *out)
{
    const gr_kview *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int y = 0; y < ov->h; y++)
            for (int x = 0; x < ov->w; x++)
                for (int ch = 0; ch < ov->c; ch++) {
                    float real =
                        u8_real(k->in_host[(((size_t)n * ov->h + y) * ov->w + x) * ov->c + ch]);
                    size_t o = at(k->out_t, ov, n, ch, y, x);
                    if (k->out_t == GR_DTYPE_I8)
                        out[o] = (unsigned char)quantize_ref(real, k->out_scale);
                    else
                        store_real(k->out_t, out, o, real, 1.0f);
                }
    expect_padding(k->out_t, ov, out);
}

static cudaError_t launch_convert(const kcase *k, void *out)
{
    return gr_launch_convert(k->in_t, k->out_t, k->in_dev, k->in_v, k->in_scale, out, k->out_v,
                             k->out_scale, 0);
}

START_TEST(quantize_network_input_u8)
{
    static const int shapes[][3] = {{1, 13, 13}, {3, 7, 5}, {2, 7, 5}};
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            gr_dtype t = all_dtypes[d];
            const int *p = shapes[s];
            kcase k = {0};
            gr_kview in = {p[0], 3, p[1], p[2], 3, 0};
            case_input(&k, 0, GR_DTYPE_U8, in, 0.0f);
            /* an i8 scale below 1/255/127 would clamp; a coarse one exercises rounding ties */
            k.out_scale = s == 0 ? 1.0f / 127.0f : 0.003f + 0.01f * gr_rng_uniform(&rng);
            k.out_t = t;
            k.out_v = view(t, p[0], 3, p[1], p[2]);
            if (s ==
                2) /* off the granule grid: the scalar path (dense outputs take the vector one) */
                k.out_v = slice(p[0], 3, p[1], p[2], t == GR_DTYPE_F32 ? 9 : 2 * align_of(t), 5);
            char what[64];
            snprintf(what, sizeof what, "u8 -> %s case %d", gr_dtype_name(t), s);
            run_case(&k, launch_convert, ref_from_u8, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

/* f32 NCHW -> f16 / i8 NHWC */
static void ref_quantize_f32(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++) {
                    float real =
                        load_real(GR_DTYPE_F32, k->in_host, at(GR_DTYPE_F32, iv, n, ch, y, x));
                    size_t o = at(k->out_t, ov, n, ch, y, x);
                    if (k->out_t == GR_DTYPE_I8)
                        out[o] = (unsigned char)quantize_ref(real, k->out_scale);
                    else
                        store_real(k->out_t, out, o, real, 1.0f);
                }
    expect_padding(k->out_t, ov, out);
}

START_TEST(quantize_f32_to_nhwc)
{
    static const int shapes[][4] = {{1, 3, 13, 13}, {3, 125, 7, 5}};
    for (int s = 0; s < 2; s++)
        for (int d = 1; d < 3; d++) {
            const int *p = shapes[s];
            kcase k = {0};
            /* values up to ~4 sigma beyond the clamp range so clamping is exercised */
            case_input(&k, 0, GR_DTYPE_F32, view(GR_DTYPE_F32, p[0], p[1], p[2], p[3]), 2.0f);
            k.out_scale = 4.0f / 127.0f;
            k.out_t = all_dtypes[d];
            k.out_v = view(k.out_t, p[0], p[1], p[2], p[3]);
            char what[64];
            snprintf(what, sizeof what, "f32 -> %s case %d", gr_dtype_name(k.out_t), s);
            run_case(&k, launch_convert, ref_quantize_f32, 0.0f, what);
            case_free(&k);
        }
}
END_TEST

static void ref_dequantize(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++) {
                    float real = load_real(k->in_t, k->in_host, at(k->in_t, iv, n, ch, y, x));
                    if (k->in_t == GR_DTYPE_I8)
                        real *= k->in_scale;
                    store_real(GR_DTYPE_F32, out, at(GR_DTYPE_F32, ov, n, ch, y, x), real, 1.0f);
                }
}

START_TEST(dequantize_nhwc_to_f32)
{
    /* YOLOv2-tiny's head 125x13x13 (batch 3) and a 3-channel tensor read from a slice */
    for (int d = 1; d < 3; d++) {
        gr_dtype t = all_dtypes[d];
        gr_kview ins[2] = {view(t, 3, 125, 13, 13),
                           slice(2, 3, 7, 5, 2 * align_of(t), align_of(t))};
        for (int s = 0; s < 2; s++) {
            kcase k = {0};
            case_input(&k, 0, t, ins[s], 2.0f);
            k.in_scale = random_scale();
            k.out_t = GR_DTYPE_F32;
            k.out_v = view(GR_DTYPE_F32, ins[s].n, ins[s].c, ins[s].h, ins[s].w);
            char what[64];
            snprintf(what, sizeof what, "%s -> f32 case %d", gr_dtype_name(t), s);
            run_case(&k, launch_convert, ref_dequantize, 0.0f, what);
            case_free(&k);
        }
    }
}
END_TEST

/* i8 <-> f16 NHWC (the boundaries of a mixed-precision plan): i8 -> f16 half_rn(q * s_in),
 * f16 -> i8 clamp(rint(x / s_out), -127, 127); dense, and channel slices of padded buffers (the
 * output's padding written only when the slice ends in its buffer's last granule). */
static void ref_convert_nhwc(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    for (int n = 0; n < ov->n; n++)
        for (int ch = 0; ch < ov->c; ch++)
            for (int y = 0; y < ov->h; y++)
                for (int x = 0; x < ov->w; x++) {
                    float real = load_real(k->in_t, k->in_host, at(k->in_t, iv, n, ch, y, x));
                    if (k->in_t == GR_DTYPE_I8)
                        real *= k->in_scale;
                    size_t o = at(k->out_t, ov, n, ch, y, x);
                    if (k->out_t == GR_DTYPE_I8)
                        out[o] = (unsigned char)quantize_ref(real, k->out_scale);
                    else
                        store_real(k->out_t, out, o, real, 1.0f);
                }
    expect_padding(k->out_t, ov, out);
}

START_TEST(convert_between_i8_and_f16)
{
    for (int dir = 0; dir < 2; dir++) {
        gr_dtype from = dir ? GR_DTYPE_F16 : GR_DTYPE_I8, to = dir ? GR_DTYPE_I8 : GR_DTYPE_F16;
        gr_kview ins[3] = {view(from, 2, 40, 7, 5),
                           slice(2, 3, 7, 5, 2 * align_of(from), align_of(from)),
                           slice(2, 5, 7, 5, 3 * align_of(from), 0)};
        gr_kview outs[3] = {view(to, 2, 40, 7, 5), slice(2, 3, 7, 5, 2 * align_of(to), align_of(to)),
                            slice(2, 5, 7, 5, 3 * align_of(to), 0)};
        for (int s = 0; s < 3; s++) {
            kcase k = {0};
            case_input(&k, 0, from, ins[s], 2.0f); /* f16 values beyond the i8 range: clamping */
            k.in_scale = random_scale();
            k.out_scale = random_scale();
            k.out_t = to;
            k.out_v = outs[s];
            char what[64];
            snprintf(what, sizeof what, "%s -> %s case %d", gr_dtype_name(from), gr_dtype_name(to),
                     s);
            run_case(&k, launch_convert, ref_convert_nhwc, 0.0f, what);
            case_free(&k);
        }
    }
}
END_TEST

/* ---- region / yolo --------------------------------------------------------------------------- */

static void ref_region(const kcase *k, unsigned char *out)
{
    const gr_kview *v = &k->in_v;
    int entries = k->coords + 1 + k->classes, cells = v->h * v->w;
    for (size_t i = 0; i < buffer_elems(v); i++)
        copy_elem(GR_DTYPE_F32, out, i, k->in_host, i);
    float *o = malloc(buffer_elems(v) * sizeof(float));
    ck_assert_ptr_nonnull(o);
    memcpy(o, out, buffer_elems(v) * sizeof(float));
    for (int b = 0; b < v->n; b++)
        for (int a = 0; a < k->num; a++) {
            float *box = o + ((size_t)b * v->c + (size_t)a * entries) * cells;
            for (int cell = 0; cell < cells; cell++) {
                box[cell] = logistic_darknet(box[cell]);
                box[cells + cell] = logistic_darknet(box[cells + cell]);
                box[k->coords * cells + cell] = logistic_darknet(box[k->coords * cells + cell]);
                float *cls = box + (size_t)(k->coords + 1) * cells + cell;
                if (!k->softmax) { /* forward_region_layer: logistic on the classes instead */
                    for (int c = 0; c < k->classes; c++)
                        cls[c * cells] = logistic_darknet(cls[c * cells]);
                    continue;
                }
                /* Darknet softmax(): largest, e = exp(x - largest) (double exp), sum, divide */
                float largest = -FLT_MAX, sum = 0.0f;
                for (int c = 0; c < k->classes; c++)
                    largest = cls[c * cells] > largest ? cls[c * cells] : largest;
                for (int c = 0; c < k->classes; c++) {
                    float e = (float)exp((double)(cls[c * cells] - largest));
                    sum += e;
                    cls[c * cells] = e;
                }
                for (int c = 0; c < k->classes; c++)
                    cls[c * cells] /= sum;
            }
        }
    memcpy(out, o, buffer_elems(v) * sizeof(float));
    free(o);
}

static cudaError_t launch_region(const kcase *k, void *out)
{
    return gr_launch_region(k->in_t, k->in_dev, out, k->in_v.n, k->in_v.h, k->in_v.w, k->num,
                            k->coords, k->classes, k->softmax, 0);
}

START_TEST(region_activation_matches_darknet)
{
    /* Darknet's double-precision logistic and exp are reproduced on the GPU in double; the two
     * libraries' double exp differ by at most an ulp of a double, so the f32 results agree except
     * for a rare rounding tie: 1e-6 relative is a generous bound. */
    static const int shapes[][5] = {{1, 13, 13, 5, 20}, {3, 7, 5, 5, 80}, {2, 13, 13, 3, 1}};
    for (int s = 0; s < 3; s++)
        for (int softmax = 0; softmax < 2; softmax++) {
            const int *p = shapes[s];
            kcase k = {0};
            k.num = p[3], k.coords = 4, k.classes = p[4], k.softmax = softmax;
            case_input(&k, 0, GR_DTYPE_F32,
                       view(GR_DTYPE_F32, p[0], k.num * (5 + k.classes), p[1], p[2]), 4.0f);
            k.out_t = GR_DTYPE_F32;
            k.out_v = k.in_v;
            char what[64];
            snprintf(what, sizeof what, "region case %d softmax %d", s, softmax);
            run_case(&k, launch_region, ref_region, 1e-6f, what);
            case_free(&k);
        }
}
END_TEST

/* The CPU reference itself (ops/yolo.c), AlexeyAB's forward_yolo_layer with scale_x_y and
 * new_coords. */
static void yolo_params(const kcase *k, gr_op_params *p)
{
    gr_op_params_default(GR_OP_YOLO, p);
    p->classes = k->classes;
    p->num = p->n_mask = k->num;
    for (int a = 0; a < k->num; a++)
        p->mask[a] = a;
    p->scale_x_y = k->scale_x_y;
    p->new_coords = k->new_coords;
}

static void ref_yolo(const kcase *k, unsigned char *out)
{
    gr_op_params p;
    yolo_params(k, &p);
    const gr_kview *v = &k->in_v;
    gr_shape s = {v->c, v->h, v->w};
    const float *in = (const float *)k->in_host;
    gr_op_ref(&p, NULL, &in, &s, 1, (float *)out, s, v->n);
}

static cudaError_t launch_yolo(const kcase *k, void *out)
{
    return gr_launch_yolo(k->in_t, k->in_dev, out, k->in_v.n, k->in_v.h, k->in_v.w, k->num,
                          k->classes, k->scale_x_y, k->new_coords, 0);
}

/* Darknet's yolov3 head (scale 1), yolov4's scale_x_y 1.05/1.2, and yolov7/yolov4-csp's
 * new_coords=1 with scale_x_y 2. Each element within 1e-6 relative (the double exp of the
 * logistic on the CPU vs the GPU's double exp; the scale is the same f32 mul and add). */
START_TEST(yolo_activation_matches_darknet)
{
    static const int shapes[][5] = {{1, 13, 13, 3, 80}, {3, 7, 5, 3, 20}, {2, 5, 9, 3, 80},
                                    {1, 13, 13, 3, 80}, {2, 4, 6, 3, 7}};
    static const float scales[] = {1.0f, 1.05f, 1.2f, 2.0f, 2.0f};
    static const int new_coords[] = {0, 0, 0, 1, 1};
    for (int s = 0; s < 5; s++) {
        const int *p = shapes[s];
        kcase k = {0};
        k.num = p[3], k.classes = p[4];
        k.scale_x_y = scales[s], k.new_coords = new_coords[s];
        case_input(&k, 0, GR_DTYPE_F32,
                   view(GR_DTYPE_F32, p[0], k.num * (5 + k.classes), p[1], p[2]), 4.0f);
        k.out_t = GR_DTYPE_F32;
        k.out_v = k.in_v;
        char what[96];
        snprintf(what, sizeof what, "yolo case %d (scale_x_y %g, new_coords %d)", s,
                 (double)k.scale_x_y, k.new_coords);
        run_case(&k, launch_yolo, ref_yolo, 1e-6f, what);
        case_free(&k);
    }
}
END_TEST

/* Launch with out = the input buffer (dense f32) and compare with the reference, each element
 * within 1e-6 relative (the double exp, as the cases above). */
static void check_in_place(kcase *k, launch_fn launch, ref_fn ref, const char *what)
{
    size_t bytes = buffer_elems(&k->in_v) * 4;
    unsigned char *expect = malloc(bytes), *got = malloc(bytes);
    ck_assert_ptr_nonnull(expect);
    ck_assert_ptr_nonnull(got);
    ref(k, expect);
    ck_assert_int_eq(launch(k, k->in_dev), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(got, k->in_dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < bytes / 4; i++) {
        float g = load_real(GR_DTYPE_F32, got, i), e = load_real(GR_DTYPE_F32, expect, i);
        ck_assert_msg(fabsf(g - e) <= 1e-6f * fabsf(e), "in-place %s element %zu: %.9g vs %.9g",
                      what, i, (double)g, (double)e);
    }
    free(expect);
    free(got);
}

START_TEST(head_activations_in_place)
{
    gr_kview v = view(GR_DTYPE_F32, 2, 5 * 25, 13, 13);
    kcase k = {0};
    k.num = 5, k.coords = 4, k.classes = 20, k.softmax = 1;
    case_input(&k, 0, GR_DTYPE_F32, v, 4.0f);
    k.out_t = GR_DTYPE_F32;
    k.out_v = v;
    check_in_place(&k, launch_region, ref_region, "region");
    case_free(&k);
}
END_TEST

/* ---- [softmax] ------------------------------------------------------------------------------- */

/* The op's CPU reference (ops/softmax.c) on a dense copy of the input slice, written back into
 * the output slice: an image's c*h*w values are contiguous in f32 NCHW. */
static void ref_softmax(const kcase *k, unsigned char *out)
{
    const gr_kview *iv = &k->in_v, *ov = &k->out_v;
    size_t hw = (size_t)iv->h * iv->w, image = (size_t)iv->c * hw;
    float *x = malloc((size_t)iv->n * image * sizeof(float));
    float *y = malloc((size_t)iv->n * image * sizeof(float));
    ck_assert(x && y);
    for (int b = 0; b < iv->n; b++)
        memcpy(x + b * image,
               k->in_host + ((size_t)b * iv->c_stride + (size_t)iv->c_offset) * hw * sizeof(float),
               image * sizeof(float));
    gr_op_params p;
    gr_op_params_default(GR_OP_SOFTMAX, &p);
    p.groups = k->groups;
    gr_shape shape = {iv->c, iv->h, iv->w};
    const float *in[1] = {x};
    gr_op_ref(&p, NULL, in, &shape, 1, y, shape, iv->n);
    for (int b = 0; b < iv->n; b++)
        memcpy(out + ((size_t)b * ov->c_stride + (size_t)ov->c_offset) * hw * sizeof(float),
               y + b * image, image * sizeof(float));
    free(x);
    free(y);
}

static cudaError_t launch_softmax(const kcase *k, void *out)
{
    return gr_launch_softmax(k->in_t, k->in_dev, k->in_v, out, k->out_v, k->groups, 0);
}

START_TEST(softmax_matches_darknet_groups_and_slices)
{
    /* Same arithmetic as the region softmax (double exp, sequential f32 sum): 1e-6 relative, as
     * there. Shapes: a classifier's 1000 classes, batch 3 with 5 groups of 21 on a 7x5x3 map, a
     * single value (softmax = 1), and channel slices on both sides with batch 2. */
    static const struct {
        int n, c, h, w, groups;
        int in_stride, in_offset, out_stride, out_offset; /* 0: dense */
    } cases[] = {{1, 1000, 1, 1, 1, 0, 0, 0, 0},   {3, 7, 5, 3, 5, 0, 0, 0, 0},
                 {2, 1, 1, 1, 1, 0, 0, 0, 0},      {2, 10, 3, 3, 3, 16, 4, 12, 1},
                 {2, 100, 1, 1, 1, 101, 1, 100, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kcase k = {0};
        k.groups = cases[i].groups;
        gr_kview in = view(GR_DTYPE_F32, cases[i].n, cases[i].c, cases[i].h, cases[i].w);
        gr_kview out = in;
        if (cases[i].in_stride)
            in = slice(cases[i].n, cases[i].c, cases[i].h, cases[i].w, cases[i].in_stride,
                       cases[i].in_offset);
        if (cases[i].out_stride)
            out = slice(cases[i].n, cases[i].c, cases[i].h, cases[i].w, cases[i].out_stride,
                        cases[i].out_offset);
        case_input(&k, 0, GR_DTYPE_F32, in, 4.0f);
        k.out_t = GR_DTYPE_F32;
        k.out_v = out;
        char what[64];
        snprintf(what, sizeof what, "softmax case %zu", i);
        run_case(&k, launch_softmax, ref_softmax, 1e-6f, what);
        case_free(&k);
    }
}
END_TEST

START_TEST(softmax_in_place)
{
    kcase k = {0};
    k.groups = 2;
    case_input(&k, 0, GR_DTYPE_F32, view(GR_DTYPE_F32, 2, 40, 1, 1), 4.0f);
    k.out_t = GR_DTYPE_F32;
    k.out_v = k.in_v;
    check_in_place(&k, launch_softmax, ref_softmax, "softmax");
    case_free(&k);
}
END_TEST

/* ---- argument checks ------------------------------------------------------------------------- */

START_TEST(launchers_reject_inconsistent_shapes)
{
    /* Nothing is launched, so any non-NULL pointer serves; the device is never touched. */
    float *p = (float *)(uintptr_t)0x1000;
    uint16_t *h = (uint16_t *)(uintptr_t)0x1000;
    int8_t *q = (int8_t *)(uintptr_t)0x1000;
    gr_kview in = view(GR_DTYPE_F32, 1, 16, 13, 13);
    /* maxpool 2/2 on 13 gives 7, not 6 */
    ck_assert_int_eq(gr_launch_maxpool(GR_DTYPE_F32, p, in, p, view(GR_DTYPE_F32, 1, 16, 6, 6), 2,
                                       2, 1, 0),
                     cudaErrorInvalidValue);
    /* the launcher says which check failed, and where */
    ck_assert_msg(strstr(gr_kernels_last_failure(), "kernels/pool.cu:") &&
                      strstr(gr_kernels_last_failure(), "maxpool_args_ok"),
                  "%s", gr_kernels_last_failure());
    /* f16 buffer not padded to 8 channels */
    gr_kview bad = {1, 5, 4, 4, 5, 0};
    ck_assert_int_eq(
        gr_launch_upsample(GR_DTYPE_F16, h, bad, h, view(GR_DTYPE_F16, 1, 5, 8, 8), 2, 0),
        cudaErrorInvalidValue);
    /* slice running past its buffer */
    ck_assert_int_eq(
        gr_launch_route_copy(GR_DTYPE_I8, q, view(GR_DTYPE_I8, 1, 8, 3, 3), q,
                             slice(1, 8, 3, 3, 16, 12), 0),
        cudaErrorInvalidValue);
    /* reorg channels not divisible by stride^2 */
    ck_assert_int_eq(gr_launch_reorg(GR_DTYPE_F32, p, view(GR_DTYPE_F32, 1, 6, 4, 4), p,
                                     view(GR_DTYPE_F32, 1, 24, 2, 2), 2, 0),
                     cudaErrorInvalidValue);
    /* shortcut with inconsistent width/height ratios */
    ck_assert_int_eq(gr_launch_shortcut(GR_DTYPE_F32, p, view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, p,
                                        view(GR_DTYPE_F32, 1, 4, 16, 8), 1.0f, p,
                                        view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, GR_ACT_LINEAR, 0),
                     cudaErrorInvalidValue);
    /* mul: scales with 2 of x's 4 channels; scales 8 x 1 (neither per position nor 1 x 1) */
    ck_assert_int_eq(gr_launch_mul(GR_DTYPE_F32, p, view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, p,
                                   view(GR_DTYPE_F32, 1, 2, 1, 1), 1.0f, p,
                                   view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, GR_ACT_LINEAR, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_mul(GR_DTYPE_F32, p, view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, p,
                                   view(GR_DTYPE_F32, 1, 4, 8, 1), 1.0f, p,
                                   view(GR_DTYPE_F32, 1, 4, 8, 8), 1.0f, GR_ACT_LINEAR, 0),
                     cudaErrorInvalidValue);
    /* i8 with a non-positive scale; NULL input */
    ck_assert_int_eq(gr_launch_convert(GR_DTYPE_F32, GR_DTYPE_I8, p, in, 1.0f, q,
                                       view(GR_DTYPE_I8, 1, 16, 13, 13), 0.0f, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_convert(GR_DTYPE_I8, GR_DTYPE_F32, NULL,
                                       view(GR_DTYPE_I8, 1, 16, 13, 13), 1.0f, p, in, 1.0f, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_region(GR_DTYPE_F32, p, p, 1, 13, 13, 5, 4, -1, 1, 0),
                     cudaErrorInvalidValue);
    /* dtypes without a kernel: not supported, recorded like a failed check */
    ck_assert_int_eq(gr_launch_maxpool(GR_DTYPE_U8, q, in, q, in, 2, 2, 1, 0),
                     cudaErrorNotSupported);
    ck_assert_msg(strstr(gr_kernels_last_failure(), "no kernel"), "%s", gr_kernels_last_failure());
    ck_assert_int_eq(gr_launch_convert(GR_DTYPE_F16, GR_DTYPE_U8, h, in, 1.0f, q, in, 1.0f, 0),
                     cudaErrorNotSupported);
    /* i8 <-> f16: a non-positive scale */
    ck_assert_int_eq(gr_launch_convert(GR_DTYPE_F16, GR_DTYPE_I8, h, view(GR_DTYPE_F16, 1, 16, 13,
                                       13), 1.0f, q, view(GR_DTYPE_I8, 1, 16, 13, 13), 0.0f, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_convert(GR_DTYPE_I8, GR_DTYPE_F16, q, view(GR_DTYPE_I8, 1, 16, 13,
                                       13), -1.0f, h, view(GR_DTYPE_F16, 1, 16, 13, 13), 1.0f, 0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_region(GR_DTYPE_F16, h, h, 1, 13, 13, 5, 4, 20, 1, 0),
                     cudaErrorNotSupported);
    /* softmax: 10 values in 3 groups; shapes differ; f16 */
    gr_kview ten = view(GR_DTYPE_F32, 1, 10, 1, 1);
    ck_assert_int_eq(gr_launch_softmax(GR_DTYPE_F32, p, ten, p, ten, 3, 0), cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_softmax(GR_DTYPE_F32, p, ten, p, view(GR_DTYPE_F32, 2, 10, 1, 1), 1,
                                       0),
                     cudaErrorInvalidValue);
    ck_assert_int_eq(gr_launch_softmax(GR_DTYPE_F16, h, ten, h, ten, 1, 0), cudaErrorNotSupported);
}
END_TEST

static Suite *misc_suite(void)
{
    Suite *s = suite_create("gpu_misc");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, maxpool_matches_darknet_windows);
    tcase_add_test(tc, maxpool_reads_and_writes_channel_slices);
    tcase_add_test(tc, avgpool_is_global_mean_per_channel);
    tcase_add_test(tc, upsample_repeats_nearest);
    tcase_add_test(tc, reorg_follows_darknet_order);
    tcase_add_test(tc, reorg_small_literal_case);
    tcase_add_test(tc, route_copy_fills_concat_slices);
    tcase_add_test(tc, shortcut_adds_with_darknet_shape_rule);
    tcase_add_test(tc, shortcut_transcendental_activations_f32);
    tcase_add_test(tc, shortcut_in_place);
    tcase_add_test(tc, mul_broadcasts_like_sam_and_scale_channels);
    tcase_add_test(tc, mul_reads_channel_slices_and_runs_in_place);
    tcase_add_test(tc, mul_transcendental_activations_f32);
    tcase_add_test(tc, quantize_network_input_u8);
    tcase_add_test(tc, quantize_f32_to_nhwc);
    tcase_add_test(tc, dequantize_nhwc_to_f32);
    tcase_add_test(tc, convert_between_i8_and_f16);
    tcase_add_test(tc, region_activation_matches_darknet);
    tcase_add_test(tc, yolo_activation_matches_darknet);
    tcase_add_test(tc, head_activations_in_place);
    tcase_add_test(tc, softmax_matches_darknet_groups_and_slices);
    tcase_add_test(tc, softmax_in_place);
    tcase_add_test(tc, launchers_reject_inconsistent_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!gr_test_have_gpu("gpu_misc"))
        return 77;
    const char *env = getenv("GR_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("gpu_misc: seed %" PRIu64 " (GR_TEST_SEED=%" PRIu64 " repeats this run)\n", test_seed,
           test_seed);
    gr_rng_seed(&rng, test_seed);
    int failed = gr_test_run_in_process(misc_suite());
    return failed == 0 ? 0 : 1;
}
