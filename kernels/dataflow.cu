/* The persistent dataflow kernel (kernels/dataflow.h; protocol ops/dataflow_format.h; design
 * docs/dataflow.md). One launch per run: every block loops over the program's tasks in the static
 * order, claiming the next with an atomic add; for a conv it starts the cp.async copy of the
 * task's first filters into shared memory, then waits (warp 0, one lane per dependency) for the
 * producers' flags to equal the run's epoch - acquire loads, bounded by %globaltimer, abandoning
 * the run as soon as any block has recorded an error - computes the task and publishes its flag
 * with a release store. The last block to finish reports the run (gr_df_status, in the io block)
 * and readies the state for the next launch.
 *
 * Conv tasks: an implicit GEMM over the task's pixels (rows x width, x 4 taps when a 2x2 maxpool
 * is fused) and its channel slice, 128 x 32 tiles, K in 256-byte chunks staged in shared memory
 * (cp.async.cg, L2 only, so no stale L1 line of an earlier run is read), ldmatrix and mma.sync
 * (kernels/conv_mma.cuh's MmaOp: m16n8k32 IMMA for int8, m16n8k16 HMMA with f32 accumulators for
 * fp16), the GEMM-row -> pixel map of conv_mma.cuh (row_pixel), and the per-layer kernels'
 * epilogue functions (conv_internal.cuh: gr_conv_epilogue, gr_conv_i8_bits, the input quantize),
 * so the values and their rounding are theirs. The other ops read their inputs with ld.global.cg
 * for the same reason.
 *
 * First version: correctness over speed (single-buffered K chunks, one pass of A per 32 filters,
 * element-wise simple ops). Compile-checked only so far; not run on a GPU. */
#include <cfloat>
#include <climits>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/common.cuh"
#include "kernels/conv_internal.cuh"
#include "kernels/conv_mma.cuh"
#include "kernels/dataflow.h"
#include "kernels/misc_common.cuh"

using namespace gr_conv;

namespace
{

constexpr int kWarps = 8, kThreads = kWarps * 32;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr int BM = kWarps * 16; /* GEMM rows (pixels, or pooled pixels x 4 taps) per tile */
constexpr int BN = 32;          /* filters per tile */
constexpr int NJ = BN / 8;      /* MMA tiles of 8 filters */
constexpr int KC = 256;         /* K bytes per staged chunk */
constexpr int LDS = KC + 16;    /* shared row pitch: (KC + 16) / 16 odd, conflict-free ldmatrix */

/* ---- the protocol's memory operations (device scope) ---- */

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned ld_relaxed(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed(unsigned *p, unsigned v)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned add_acq_rel(unsigned *p, unsigned v)
{
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
    return old;
}

__device__ __forceinline__ unsigned smid()
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
    return s;
}

__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* ---- the program ---- */

struct Ctx {
    const gr_df_header *h;
    const gr_df_node *nodes;
    const gr_df_task *tasks;
    const int32_t *deps;
    gr_df_state *state;
    unsigned *flags;
    const gr_dataflow_args *a;
    unsigned epoch;
};

__device__ __forceinline__ unsigned char *space_of(const Ctx &cx, const gr_df_view &v)
{
    return static_cast<unsigned char *>(cx.a->spaces[v.space]) + v.offset;
}

/* Element index of (n, c, y, x) in view v (planner/plan.h's layouts). */
__device__ __forceinline__ long long elem_at(const gr_df_view &v, int n, int c, int y, int x)
{
    if (v.layout)
        return ((static_cast<long long>(n) * v.h + y) * v.w + x) * v.c_stride + v.c_offset + c;
    return ((static_cast<long long>(n) * v.c_stride + v.c_offset + c) * v.h + y) * v.w + x;
}

/* Loads of values other tasks of this run wrote: through L2 only (ld.global.cg). */
__device__ __forceinline__ float load_real(const unsigned char *base, const gr_df_view &v,
                                           long long at)
{
    if (v.dtype == GR_DTYPE_I8)
        return static_cast<float>(__ldcg(reinterpret_cast<const signed char *>(base) + at));
    return __half2float(__ushort_as_half(__ldcg(reinterpret_cast<const unsigned short *>(base) + at)));
}

/* A stored value (maxpool, upsample, copy move values as they are). */
template <typename T> struct Stored;
template <> struct Stored<int8_t> {
    static __device__ int8_t load(const unsigned char *base, long long at)
    {
        return static_cast<int8_t>(__ldcg(reinterpret_cast<const signed char *>(base) + at));
    }
};
template <> struct Stored<__half> {
    static __device__ __half load(const unsigned char *base, long long at)
    {
        return __ushort_as_half(__ldcg(reinterpret_cast<const unsigned short *>(base) + at));
    }
};

/* ---- wait ---- */

/* Warp 0: every dependency's flag equal to the epoch, or false (the run is abandoned: this wait
 * timed out, recorded first-come in the state, or another block's did). */
__device__ bool wait_deps(const Ctx &cx, int t, int lane)
{
    const gr_df_task &dt = cx.tasks[t];
    bool ok = true;
    for (int i = lane; i < dt.n_deps && ok; i += 32) {
        const int dep = cx.deps[dt.dep_begin + i];
        const unsigned *flag = cx.flags + dep;
        const unsigned long long start = globaltimer();
        for (unsigned spins = 1; ld_acquire(flag) != cx.epoch; ++spins) {
            if ((spins & 31u) != 0) {
                __nanosleep(64);
                continue;
            }
            if (ld_relaxed(reinterpret_cast<const unsigned *>(&cx.state->error_task)) != 0) {
                ok = false;
                break;
            }
            if (globaltimer() - start > cx.h->timeout_ns) {
                if (atomicCAS(&cx.state->error_task, 0, t + 1) == 0)
                    st_relaxed(reinterpret_cast<unsigned *>(&cx.state->error_dep),
                               static_cast<unsigned>(dep));
                ok = false;
                break;
            }
        }
    }
    return __all_sync(0xffffffffu, ok);
}

/* ---- conv ---- */

template <typename In> struct AccOf;
template <> struct AccOf<signed char> {
    using T = int;
};
template <> struct AccOf<__half> {
    using T = float;
};

/* Filters [n0, n0 + BN) (zero past the slice's end), K bytes [k0, k0 + KC), into sB. */
__device__ __forceinline__ void load_filters(const gr_df_node &dn, const unsigned char *wts,
                                             int n0, int n_end, int k0, unsigned char *sB, int tid)
{
    for (int it = tid; it < BN * (KC / 16); it += kThreads) {
        const int r = it / (KC / 16), c = it - r * (KC / 16), n = n0 + r, kbyte = k0 + c * 16;
        const bool ok = n < n_end && kbyte < dn.k_bytes;
        copy16(sB + r * LDS + c * 16,
               ok ? wts + static_cast<long long>(n) * dn.k_bytes + kbyte : wts, ok);
    }
}

/* The conv's ConvParams for row_pixel: the GEMM rows of the whole output (batch x map [x 4]). */
__device__ __forceinline__ ConvParams row_map(const gr_df_node &dn)
{
    ConvParams p = {};
    const bool pool = (dn.flags & GR_DF_CONV_POOL) != 0;
    p.out_h = dn.conv_h;
    p.out_w = dn.conv_w;
    p.pool = pool ? 1 : 0;
    p.pool_stride = dn.pool_stride;
    p.pool_offset = dn.pool_offset;
    p.pool_h = dn.out.h;
    p.pool_w = dn.out.w;
    p.M = dn.out.n * dn.out.h * dn.out.w * (pool ? 4 : 1);
    return p;
}

/* The tile's GEMM rows [m0, m0 + BM) as input coordinates, once per tile (row_pixel divides):
 * image, the top-left input row and column of the receptive field, and whether the row is an
 * output pixel of the task. */
__device__ __forceinline__ void map_rows(const gr_df_node &dn, const ConvParams &p, int m0, int m_end,
                                         int4 *s_rows, int tid)
{
    if (tid < BM) {
        int img = 0, oy = 0, ox = 0;
        const bool ok = m0 + tid < m_end && row_pixel(p, m0 + tid, img, oy, ox);
        s_rows[tid] = make_int4(img, oy * dn.stride - dn.pad, ox * dn.stride - dn.pad, ok);
    }
}

/* The im2col rows [m0, m0 + BM) (s_rows: map_rows's) x K bytes [k0, k0 + KC) into sA: 16-byte
 * cp.async chunks from the NHWC input (zero outside the image and past K), or for the fused
 * input quantize element by element from the u8 input, up to the 32-byte step the MMAs read. */
template <typename In>
__device__ void load_rows(const Ctx &cx, const gr_df_node &dn, const int4 *s_rows, int k0,
                          unsigned char *sA, int tid)
{
    const gr_df_view &iv = dn.in[0];
    const unsigned char *in = space_of(cx, iv);
    constexpr int elem = sizeof(In);
    if (dn.flags & GR_DF_CONV_QUANTIZE_IN) {
        const bool i8 = (dn.flags & GR_DF_CONV_I8) != 0;
        const int cols = min(KC, (dn.k_bytes - k0 + 31) / 32 * 32) / elem;
        for (int it = tid; it < BM * cols; it += kThreads) {
            const int r = it / cols, kk = it - r * cols, k = k0 / elem + kk;
            const int tap = k / dn.cin_pad, ci = k - tap * dn.cin_pad;
            const int ky = tap / dn.ksize, kx = tap - ky * dn.ksize;
            const int4 q = s_rows[r];
            int v = -1;
            if (q.w && k * elem < dn.k_bytes && ci < iv.c) {
                const int iy = q.y + ky, ix = q.z + kx;
                if (iy >= 0 && iy < iv.h && ix >= 0 && ix < iv.w)
                    v = in[elem_at(iv, q.x, ci, iy, ix)];
            }
            unsigned char *dst = sA + r * LDS + kk * elem;
            if (i8)
                *reinterpret_cast<signed char *>(dst) =
                    static_cast<signed char>(v < 0 ? 0 : gr_conv_quantize_u8_i8(v, dn.in_scale));
            else
                *reinterpret_cast<__half *>(dst) =
                    v < 0 ? __ushort_as_half(0) : gr_conv_quantize_u8_f16(v);
        }
        return;
    }
    /* kThreads is a multiple of KC / 16: a thread keeps its 16-byte column, so its tap once */
    static_assert(kThreads % (KC / 16) == 0, "a thread's column is fixed");
    const int c = tid % (KC / 16), kbyte = k0 + c * 16;
    const int k = kbyte / elem, tap = k / dn.cin_pad, ci = k - tap * dn.cin_pad;
    const int ky = tap / dn.ksize, kx = tap - ky * dn.ksize;
    const bool k_ok = kbyte < dn.k_bytes;
    for (int r = tid / (KC / 16); r < BM; r += kThreads / (KC / 16)) {
        const int4 q = s_rows[r];
        const int iy = q.y + ky, ix = q.z + kx;
        const bool ok = k_ok && q.w && iy >= 0 && iy < iv.h && ix >= 0 && ix < iv.w;
        copy16(sA + r * LDS + c * 16, ok ? in + elem_at(iv, q.x, ci, iy, ix) * elem : in, ok);
    }
}

/* One conv task: output rows [row0, row0 + rows) of one image, channels [ch0, ch0 + chs); the
 * first filter chunk is in sB already when `prefetched`. */
template <typename In>
__device__ void conv_task(const Ctx &cx, const gr_df_node &dn, const gr_df_task &dt,
                          unsigned char *sA, unsigned char *sB, int4 *s_rows, bool prefetched,
                          int tid)
{
    using Acc = typename AccOf<In>::T;
    using Op = MmaOp<In, Acc>;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const int mat = lane >> 3, r8 = lane & 7;
    const bool pool = (dn.flags & GR_DF_CONV_POOL) != 0;
    const bool dequant = (dn.flags & GR_DF_CONV_DEQUANT_OUT) != 0;
    const gr_df_view &ov = dn.out;
    const ConvParams p = row_map(dn);
    const int taps = pool ? 4 : 1;
    const int m_first = ((dt.image * ov.h + dt.row0) * ov.w) * taps;
    const int m_end = m_first + dt.rows * ov.w * taps;
    const int n_end = dt.ch0 + dt.chs;
    const unsigned char *wts = static_cast<const unsigned char *>(cx.a->weights) + dn.w_offset;
    const float *mul = dn.flags & GR_DF_CONV_I8
                           ? reinterpret_cast<const float *>(
                                 static_cast<const unsigned char *>(cx.a->weights) + dn.mul_offset)
                           : nullptr;
    const float *bias = dn.bias_offset == GR_DF_UNBOUND
                            ? nullptr
                            : reinterpret_cast<const float *>(
                                  static_cast<const unsigned char *>(cx.a->weights) + dn.bias_offset);
    unsigned char *out = space_of(cx, ov);
    for (int n0 = dt.ch0; n0 < n_end; n0 += BN)
        for (int m0 = m_first; m0 < m_end; m0 += BM) {
            typename Op::Reg c[NJ][Op::regs];
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int r = 0; r < Op::regs; ++r)
                    c[j][r] = 0;
            map_rows(dn, p, m0, m_end, s_rows, tid); /* the last tile's readers passed a barrier */
            __syncthreads();
            for (int k0 = 0; k0 < dn.k_bytes; k0 += KC) {
                if (!(prefetched && n0 == dt.ch0 && m0 == m_first && k0 == 0))
                    load_filters(dn, wts, n0, n_end, k0, sB, tid);
                load_rows<In>(cx, dn, s_rows, k0, sA, tid);
                cp_async_commit();
                cp_async_wait<0>();
                __syncthreads();
                const int k_steps = min(KC, dn.k_bytes - k0);
                for (int kk = 0; kk < k_steps; kk += 32) {
                    unsigned a[4];
                    ldmatrix_x4(a, sA + (warp * 16 + (mat & 1) * 8 + r8) * LDS + kk + (mat >> 1) * 16);
#pragma unroll
                    for (int j = 0; j < NJ / 2; ++j) {
                        unsigned b[4];
                        ldmatrix_x4(b, sB + (j * 16 + (mat >> 1) * 8 + r8) * LDS + kk + (mat & 1) * 16);
                        Op::mma(c[2 * j], a, b[0], b[1]);
                        Op::mma(c[2 * j + 1], a, b[2], b[3]);
                    }
                }
                __syncthreads(); /* the chunk is consumed: the next one may land */
            }
            /* Epilogue: thread (g, t4) holds rows g, g + 8 of its warp's 16, filters 8j + 2t4 (+1).
             * A pooled window's four taps are rows 4w..4w+3: lanes whose g differs in bits 0-1. */
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = m0 + warp * 16 + h * 8 + g;
                int img = 0, oy = 0, ox = 0;
                const bool row_ok = m < m_end && row_pixel(p, m, img, oy, ox);
#pragma unroll
                for (int j = 0; j < NJ; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int n = n0 + j * 8 + 2 * t4 + e;
                        const int nc = n < ov.c ? n : 0;
                        static_assert(Op::regs == 4, "f32 / int32 accumulators: 4 per MMA tile");
                        float v = gr_conv_epilogue(acc_to_float(c[j][2 * h + e]), mul, bias, nc,
                                                   dn.activation);
                        int py = oy, px = ox;
                        if (pool) {
                            v = row_ok ? v : -FLT_MAX;
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
                            const int pm = m >> 2, phw = ov.h * ov.w;
                            img = pm / phw;
                            py = (pm - img * phw) / ov.w;
                            px = pm - img * phw - py * ov.w;
                            if ((g & 3) != 0 || m >= m_end)
                                continue;
                        } else if (!row_ok) {
                            continue;
                        }
                        if (n >= n_end)
                            continue;
                        const long long at = elem_at(ov, img, n, py, px);
                        if (dequant)
                            reinterpret_cast<float *>(out)[at] = v;
                        else if (ov.dtype == GR_DTYPE_I8)
                            out[at] = static_cast<unsigned char>(gr_conv_i8_bits(v, dn.out_inv_scale));
                        else
                            reinterpret_cast<__half *>(out)[at] = __float2half_rn(v);
                    }
            }
        }
    /* The last slice writes the padding channels [c, c_pad) of its rows as 0. */
    if (!dequant && n_end == ov.c && ov.c_pad > ov.c) {
        const int pad_c = ov.c_pad - ov.c, elem = ov.dtype == GR_DTYPE_I8 ? 1 : 2;
        for (int it = tid; it < dt.rows * ov.w * pad_c; it += kThreads) {
            const int ch = ov.c + it % pad_c, px = it / pad_c % ov.w, y = dt.row0 + it / pad_c / ov.w;
            const long long at = elem_at(ov, dt.image, ch, y, px) * elem;
            if (elem == 1)
                out[at] = 0;
            else
                *reinterpret_cast<unsigned short *>(out + at) = 0;
        }
    }
}

/* ---- the other ops: one thread per output element of the band (NHWC: padding channels 0) ---- */

template <typename T>
__device__ void stored_task(const Ctx &cx, const gr_df_node &dn, const gr_df_task &dt, int tid)
{
    const gr_df_view &ov = dn.out;
    T *out = reinterpret_cast<T *>(space_of(cx, ov));
    const int cw = ov.c_pad;
    for (int it = tid; it < dt.rows * ov.w * cw; it += kThreads) {
        const int ch = it % cw, x = it / cw % ov.w, y = dt.row0 + it / cw / ov.w;
        T v = grk::Dtype<T>::zero();
        if (ch < ov.c) {
            if (dn.op == GR_DF_OP_MAXPOOL) {
                const gr_df_view &iv = dn.in[0];
                const unsigned char *in = space_of(cx, iv);
                v = grk::Dtype<T>::lowest();
                const int y0 = y * dn.pool_stride + dn.pool_offset, x0 = x * dn.pool_stride + dn.pool_offset;
                for (int dy = 0; dy < dn.pool_size; ++dy)
                    for (int dx = 0; dx < dn.pool_size; ++dx) {
                        const int iy = y0 + dy, ix = x0 + dx;
                        if (iy < 0 || iy >= iv.h || ix < 0 || ix >= iv.w)
                            continue;
                        const T tap = Stored<T>::load(in, elem_at(iv, dt.image, ch, iy, ix));
                        if (grk::Dtype<T>::greater(tap, v))
                            v = tap;
                    }
            } else if (dn.op == GR_DF_OP_UPSAMPLE) {
                const gr_df_view &iv = dn.in[0];
                v = Stored<T>::load(space_of(cx, iv), elem_at(iv, dt.image, ch, y / dn.pool_stride,
                                                               x / dn.pool_stride));
            } else { /* copy: the input whose channels these are */
                int k = 0, first = 0;
                while (k + 1 < dn.n_inputs && ch >= first + dn.in[k].c)
                    first += dn.in[k++].c;
                v = Stored<T>::load(space_of(cx, dn.in[k]), elem_at(dn.in[k], dt.image, ch - first, y, x));
            }
        }
        out[elem_at(ov, dt.image, ch, y, x)] = v;
    }
}

/* Quantize the u8 input (i8 / f16 NHWC out) or dequantize i8 / f16 NHWC into f32 NCHW. */
__device__ void convert_task(const Ctx &cx, const gr_df_node &dn, const gr_df_task &dt, int tid)
{
    const gr_df_view &iv = dn.in[0], &ov = dn.out;
    const unsigned char *in = space_of(cx, iv);
    unsigned char *out = space_of(cx, ov);
    if (iv.dtype == GR_DTYPE_U8) {
        const int cw = ov.c_pad;
        for (int it = tid; it < dt.rows * ov.w * cw; it += kThreads) {
            const int ch = it % cw, x = it / cw % ov.w, y = dt.row0 + it / cw / ov.w;
            const int v = ch < ov.c ? in[elem_at(iv, dt.image, ch, y, x)] : -1;
            const long long at = elem_at(ov, dt.image, ch, y, x);
            if (ov.dtype == GR_DTYPE_I8)
                out[at] = static_cast<unsigned char>(v < 0 ? 0 : gr_conv_quantize_u8_i8(v, ov.scale));
            else
                reinterpret_cast<__half *>(out)[at] = v < 0 ? __ushort_as_half(0) : gr_conv_quantize_u8_f16(v);
        }
        return;
    }
    for (int it = tid; it < dt.rows * ov.w * ov.c; it += kThreads) { /* NCHW: columns fastest */
        const int x = it % ov.w, ch = it / ov.w % ov.c, y = dt.row0 + it / ov.w / ov.c;
        const float q = load_real(in, iv, elem_at(iv, dt.image, ch, y, x));
        reinterpret_cast<float *>(out)[elem_at(ov, dt.image, ch, y, x)] =
            iv.dtype == GR_DTYPE_I8 ? __fmul_rn(q, iv.scale) : q;
    }
}

#endif /* __CUDA_ARCH__ >= 800 */

__global__ void __launch_bounds__(kThreads) k_dataflow(const gr_dataflow_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(128) unsigned char sA[BM * LDS];
    __shared__ __align__(128) unsigned char sB[BN * LDS];
    __shared__ int4 s_rows[BM];
    __shared__ int s_task, s_abort;
    __shared__ unsigned s_epoch;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned char *prog = static_cast<const unsigned char *>(a.program);
    Ctx cx;
    cx.h = reinterpret_cast<const gr_df_header *>(prog);
    cx.nodes = reinterpret_cast<const gr_df_node *>(prog + cx.h->nodes_at);
    cx.tasks = reinterpret_cast<const gr_df_task *>(prog + cx.h->tasks_at);
    cx.deps = reinterpret_cast<const int32_t *>(prog + cx.h->deps_at);
    cx.state = static_cast<gr_df_state *>(a.state);
    cx.flags = reinterpret_cast<unsigned *>(cx.state + 1);
    cx.a = &a;
    /* The previous run on this state ended before this launch began (stream order). */
    if (tid == 0)
        s_epoch = ld_relaxed(&cx.state->epoch) + 1;
    __syncthreads();
    cx.epoch = s_epoch;
    for (;;) {
        if (tid == 0) {
            s_task = static_cast<int>(atomicAdd(&cx.state->next_task, 1u));
            s_abort = ld_relaxed(reinterpret_cast<const unsigned *>(&cx.state->error_task)) != 0;
        }
        __syncthreads();
        const int t = s_task;
        if (t >= a.n_tasks || s_abort)
            break;
        unsigned long long claimed = 0;
        if (a.trace && tid == 0)
            claimed = globaltimer();
        const gr_df_task dt = cx.tasks[t];
        const gr_df_node &dn = cx.nodes[dt.node];
        /* the filters do not depend on this run: copy the first chunk while waiting */
        const bool prefetch = dn.op == GR_DF_OP_CONV;
        if (prefetch) {
            load_filters(dn, static_cast<const unsigned char *>(a.weights) + dn.w_offset, dt.ch0,
                         dt.ch0 + dt.chs, 0, sB, tid);
            cp_async_commit();
        }
        if (warp == 0) {
            const bool ok = wait_deps(cx, t, lane);
            if (lane == 0)
                s_abort = !ok;
        }
        __syncthreads(); /* warp 0's acquires, then this barrier: the producers' writes are visible */
        if (s_abort) {
            cp_async_wait<0>();
            break;
        }
        unsigned long long ready = 0;
        if (a.trace && tid == 0)
            ready = globaltimer();
        switch (dn.op) {
        case GR_DF_OP_CONV:
            if (dn.flags & GR_DF_CONV_I8)
                conv_task<signed char>(cx, dn, dt, sA, sB, s_rows, prefetch, tid);
            else
                conv_task<__half>(cx, dn, dt, sA, sB, s_rows, prefetch, tid);
            break;
        case GR_DF_OP_CONVERT: convert_task(cx, dn, dt, tid); break;
        default:
            if (dn.out.dtype == GR_DTYPE_I8)
                stored_task<int8_t>(cx, dn, dt, tid);
            else
                stored_task<__half>(cx, dn, dt, tid);
            break;
        }
        __syncthreads(); /* every thread's writes of the task, before its flag */
        if (tid == 0 && t != a.skip_publish) {
            __threadfence();
            st_release(cx.flags + t, cx.epoch);
        }
        if (a.trace && tid == 0)
            a.trace[t] = {claimed, ready, globaltimer(), smid(), blockIdx.x};
    }
    if (tid == 0) {
        __threadfence();
        const unsigned done = add_acq_rel(&cx.state->blocks_done, 1u);
        if (done == gridDim.x - 1) { /* every other block has finished: report, ready the state */
            const int err = static_cast<int>(
                ld_relaxed(reinterpret_cast<const unsigned *>(&cx.state->error_task)));
            const int dep = static_cast<int>(
                ld_relaxed(reinterpret_cast<const unsigned *>(&cx.state->error_dep)));
            a.status->magic = GR_DF_MAGIC;
            a.status->epoch = cx.epoch;
            a.status->failed_task = err ? err - 1 : -1;
            a.status->waited_on = err ? dep : -1;
            st_relaxed(&cx.state->next_task, 0u);
            st_relaxed(&cx.state->blocks_done, 0u);
            st_relaxed(reinterpret_cast<unsigned *>(&cx.state->error_task), 0u);
            st_relaxed(reinterpret_cast<unsigned *>(&cx.state->error_dep), 0u);
            __threadfence();
            st_release(&cx.state->epoch, cx.epoch);
        }
    }
#endif
}

} // namespace

size_t gr_dataflow_state_bytes(int n_flags)
{
    return gr_df_state_bytes(n_flags);
}

cudaError_t gr_dataflow_check(void)
{
    int dev = 0, major = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  "the dataflow kernel needs sm_80+ (cp.async, mma.sync)");
        return cudaErrorNotSupported;
    }
    return cudaSuccess;
}

cudaError_t gr_launch_dataflow(const gr_dataflow_args *args, cudaStream_t stream)
{
    GR_ARG_CHECK(args && args->program && args->state && args->status && args->n_tasks >= 0);
    GR_ARG_CHECK(reinterpret_cast<uintptr_t>(args->program) % 16 == 0);
    const cudaError_t supported = gr_dataflow_check();
    if (supported != cudaSuccess)
        return supported;
    int blocks = args->blocks;
    if (blocks <= 0) {
        int dev = 0, sms = 0, per_sm = 0;
        GR_CUDA_TRY(cudaGetDevice(&dev));
        GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        GR_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_dataflow, kThreads, 0));
        GR_ARG_CHECK(per_sm > 0);
        blocks = sms * per_sm;
    }
    /* Claims are dynamic, so any number of resident blocks makes progress; more blocks than tasks
     * would only claim nothing. */
    if (args->n_tasks > 0 && blocks > args->n_tasks)
        blocks = args->n_tasks;
    k_dataflow<<<blocks, kThreads, 0, stream>>>(*args);
    return cudaGetLastError();
}
