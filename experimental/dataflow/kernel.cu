/* The persistent dataflow kernel (experimental/dataflow/kernel.h; protocol
 * experimental/dataflow/format.h; design docs/dataflow.md). One launch per run: every block loops over the program's tasks in the static
 * order, claiming the next with an atomic add; for a conv it starts the cp.async copy of the
 * task's first filters into shared memory, then waits (warp 0, one lane per dependency) for the
 * producers' flags to equal the run's epoch - relaxed polls and one acquire fence, bounded by
 * %globaltimer, abandoning the run as soon as any block has recorded an error - computes the task
 * and publishes its flag with a release store. The last block to finish reports the run
 * (gr_df_status, in the io block) and readies the state for the next launch.
 *
 * Conv tasks: an implicit GEMM over the task's pixels (rows x width, x 4 taps when a 2x2 maxpool
 * is fused) and its channel slice, BM x 32 tiles (BM by the task's rows: Tiling), K in 256-byte
 * chunks through a cp.async pipeline in shared memory (cp.async.cg, L2 only, so no stale L1 line
 * of an earlier run is read), ldmatrix and mma.sync (kernels/conv_mma.cuh's MmaOp: m16n8k32 IMMA
 * for int8, m16n8k16 HMMA with f32 accumulators for fp16), the GEMM-row -> pixel map of
 * conv_mma.cuh (row_pixel, once per tile row), and the per-layer kernels' epilogue functions
 * (conv_internal.cuh: gr_conv_epilogue_loaded, gr_conv_i8_bits, the input quantize), so the
 * values and their rounding are theirs. Layer 0 (the fused u8 input quantize) stages its input
 * rows once per task. The other ops read their inputs with ld.global.cg for the same reason and
 * are element loops. Measured (H100) in docs/dataflow.md, "Where the time goes". */
#include <cfloat>
#include <climits>
#include <cstdint>

#include <cuda_fp16.h>

#include "experimental/dataflow/kernel.h"
#include "kernels/common.cuh"
#include "kernels/conv_internal.cuh"
#include "kernels/conv_mma.cuh"
#include "kernels/misc_common.cuh"

using namespace gr_conv;

namespace
{

constexpr int kWarps = 8, kThreads = kWarps * 32;

constexpr int kMaxBM = kWarps * 16; /* GEMM rows (pixels, or pooled pixels x 4 taps) per tile */
constexpr int BN = 32;          /* filters per tile */
constexpr int kMaxStages = 6;   /* K chunks in flight (cp.async pipeline) */
constexpr int NJ = BN / 8;      /* MMA tiles of 8 filters */
constexpr int KC = 256;         /* K bytes per staged chunk */
constexpr int LDS = KC + 16;    /* shared row pitch: (KC + 16) / 16 odd, conflict-free ldmatrix */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

/* ---- the protocol's memory operations (device scope) ---- */

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

/* After relaxed loads that saw the producers' release stores: their writes happen before what
 * follows (PTX: an acquire pattern). One per task instead of an acquire load per poll. */
__device__ __forceinline__ void fence_acquire()
{
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
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
        unsigned sleep = 32;
        for (unsigned spins = 1; ld_relaxed(flag) != cx.epoch; ++spins) {
            if ((spins & 31u) != 0) {
                __nanosleep(sleep);
                sleep = sleep < 256 ? sleep * 2 : sleep;
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
    if (dt.n_deps > 0)
        fence_acquire();
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

/* How a conv task is tiled (the same for its filter prefetch before the wait and its compute):
 * warps split the tile's BM = 16 wm rows and, when the task has few GEMM rows (a 13x13 map's row
 * band: 13 or 52), the K steps of each chunk (wk = 8 / wm: warp w takes steps w / wm, w / wm + wk,
 * ...; their partial sums are added in shared memory before the epilogue); every warp computes
 * 16 rows x all BN filters. K streams in KC-byte chunks through `stages` buffers (cp.async
 * pipeline). The u8-input conv (layer 0) stages its input patch once per task instead (quant). */
struct Tiling {
    int wm, wk, bm, stages, stage_bytes, nk;
    bool quant; /* the staged-patch path: one K chunk, patch after stage 0 */
    int iy0, prow; /* quant: the input rows [iy0, iy0 + prow) the task reads */
};

__device__ __forceinline__ int task_rows(const gr_df_node &dn, const gr_df_task &dt)
{
    return dt.rows * dn.out.w * ((dn.flags & GR_DF_CONV_POOL) ? 4 : 1);
}

/* Bytes per staged input pixel of the quant path: its (at most 4) channels quantized. */
__device__ __forceinline__ int patch_pixel_bytes(const gr_df_node &dn)
{
    return (dn.flags & GR_DF_CONV_I8) ? 4 : 8;
}

__device__ Tiling tiling(const gr_df_node &dn, const gr_df_task &dt, int pool_bytes)
{
    Tiling t;
    const int rows = task_rows(dn, dt);
    t.wm = rows > 64 ? 8 : rows > 32 ? 4 : rows > 16 ? 2 : 1;
    t.wk = kWarps / t.wm;
    t.bm = 16 * t.wm;
    t.stage_bytes = (t.bm + BN) * LDS;
    t.nk = (dn.k_bytes + KC - 1) / KC;
    t.stages = min(kMaxStages, pool_bytes / t.stage_bytes);
    t.quant = false;
    t.iy0 = t.prow = 0;
    if ((dn.flags & GR_DF_CONV_QUANTIZE_IN) && t.nk == 1 && dn.in[0].c <= 4 && dn.cin_pad >= 4 &&
        t.wm == kWarps) {
        /* the conv rows the task's GEMM rows reach, then the input rows of their receptive field */
        const bool pool = (dn.flags & GR_DF_CONV_POOL) != 0;
        const int oy0 = pool ? dt.row0 * dn.pool_stride + dn.pool_offset : dt.row0;
        const int oy1 = pool ? (dt.row0 + dt.rows - 1) * dn.pool_stride + dn.pool_offset + 1
                             : dt.row0 + dt.rows - 1;
        const int iy0 = max(0, oy0 * dn.stride - dn.pad);
        const int iy1 = min(dn.in[0].h - 1, oy1 * dn.stride - dn.pad + dn.ksize - 1);
        const int bytes = max(0, iy1 - iy0 + 1) * dn.in[0].w * patch_pixel_bytes(dn);
        if (bytes <= pool_bytes - t.stage_bytes) {
            t.quant = true;
            t.iy0 = iy0;
            t.prow = max(0, iy1 - iy0 + 1);
        }
    }
    return t;
}

__device__ __forceinline__ unsigned char *stage_a(unsigned char *smem, const Tiling &tl, int s)
{
    return smem + s * tl.stage_bytes;
}
__device__ __forceinline__ unsigned char *stage_b(unsigned char *smem, const Tiling &tl, int s)
{
    return smem + s * tl.stage_bytes + tl.bm * LDS;
}

/* Wait until at most n of this thread's cp.async groups are in flight (n < kMaxStages). */
__device__ __forceinline__ void cp_async_wait_n(int n)
{
    switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    default: cp_async_wait<5>(); break;
    }
}
static_assert(kMaxStages <= 6, "cp_async_wait_n covers 0..5");

/* A thread's share of every K chunk's filter copies, set once per tile: the starts of filter
 * rows tid / 16 and tid / 16 + 16 of the tile (nullptr past the slice's end) at the thread's
 * 16-byte column (tid % 16); a chunk's copies then add k0 and nothing else. */
struct FilterCursor {
    const unsigned char *row[2];
};
static_assert(BN * (KC / 16) == 2 * kThreads, "two filter copies per thread and chunk");

__device__ __forceinline__ FilterCursor filter_cursor(const gr_df_node &dn, const unsigned char *wts,
                                                      int n0, int n_end, int tid)
{
    FilterCursor fc;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int n = n0 + tid / (KC / 16) + i * (BN / 2);
        fc.row[i] = n < n_end ? wts + static_cast<long long>(n) * dn.k_bytes + (tid % (KC / 16)) * 16
                              : nullptr;
    }
    return fc;
}

/* Filters [n0, n0 + BN) (zero past the slice's end), K bytes [k0, k0 + KC), into sB. */
__device__ __forceinline__ void load_filters(const FilterCursor &fc, const gr_df_node &dn,
                                             const unsigned char *wts, int k0, unsigned char *sB,
                                             int tid)
{
    const int col = (tid % (KC / 16)) * 16;
    const bool k_ok = k0 + col < dn.k_bytes;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const bool ok = k_ok && fc.row[i] != nullptr;
        copy16(sB + (tid / (KC / 16) + i * (BN / 2)) * LDS + col, ok ? fc.row[i] + k0 : wts, ok);
    }
}

/* Where a thread's 16-byte column of the next K chunk to issue falls in the filter: tap (ky, kx)
 * and the channel element ci within it. Set at chunk 0 of a tile, advanced by one chunk after
 * each issue (chunks are issued in order), so no chunk divides. */
struct ColCursor {
    int ky, kx, ci;
};

template <typename In> __device__ __forceinline__ ColCursor col_cursor(const gr_df_node &dn, int tid)
{
    const int k = (tid % (KC / 16)) * 16 / static_cast<int>(sizeof(In));
    const int tap = k / dn.cin_pad;
    ColCursor cc;
    cc.ky = tap / dn.ksize;
    cc.kx = tap - cc.ky * dn.ksize;
    cc.ci = k - tap * dn.cin_pad;
    return cc;
}

template <typename In> __device__ __forceinline__ void advance(ColCursor &cc, const gr_df_node &dn)
{
    cc.ci += KC / static_cast<int>(sizeof(In));
    while (cc.ci >= dn.cin_pad) {
        cc.ci -= dn.cin_pad;
        if (++cc.kx == dn.ksize) {
            cc.kx = 0;
            ++cc.ky;
        }
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

/* The tile's GEMM rows [m0, m0 + bm), once per tile (row_pixel divides; nothing per element
 * does): s_rows[r] = the top-left input row and column of the row's receptive field, the input
 * element of (that pixel, channel 0) for an NHWC input (the cp.async gather adds a column's tap
 * offset), and whether the row is an output pixel of the task (a pooling tap inside the conv's
 * map); s_out[r] = the output element of (the row's output pixel, channel 0), whose channel c is
 * at + c * ch_step, or -1 where the row stores nothing (past the task, or a pooling window's
 * taps 1-3: tap 0 stores the window's maximum). */
__device__ __forceinline__ void map_rows(const gr_df_node &dn, const ConvParams &p, int m0,
                                         int m_end, int bm, int4 *s_rows, int *s_out, int tid)
{
    if (tid < bm) {
        const gr_df_view &iv = dn.in[0], &ov = dn.out;
        const int m = m0 + tid;
        int img = 0, oy = 0, ox = 0;
        const bool ok = m < m_end && row_pixel(p, m, img, oy, ox);
        const int iy = oy * dn.stride - dn.pad, ix = ox * dn.stride - dn.pad;
        const int base = iv.layout ? ((img * iv.h + iy) * iv.w + ix) * iv.c_stride + iv.c_offset : 0;
        s_rows[tid] = make_int4(iy, ix, base, ok);
        int at = -1;
        if (m < m_end && (!p.pool || (m & 3) == 0)) {
            int py = oy, px = ox;
            if (p.pool) {
                const int pm = m >> 2, phw = ov.h * ov.w;
                img = pm / phw;
                py = (pm - img * phw) / ov.w;
                px = pm - img * phw - py * ov.w;
            }
            if (ok || p.pool)
                at = static_cast<int>(elem_at(ov, img, 0, py, px));
        }
        s_out[tid] = at;
    }
}

/* The im2col rows [m0, m0 + bm) (s_rows: map_rows's) x K bytes [k0, k0 + KC) into sA: 16-byte
 * cp.async chunks from the NHWC input (zero outside the image and past K), or for the fused
 * input quantize whose patch is not staged (too wide) element by element from the u8 input, up
 * to the 32-byte step the MMAs read. */
template <typename In>
__device__ void load_rows(const Ctx &cx, const gr_df_node &dn, const int4 *s_rows, int bm, int k0,
                          const ColCursor &cc, int image, unsigned char *sA, int tid)
{
    const gr_df_view &iv = dn.in[0];
    const unsigned char *in = space_of(cx, iv);
    constexpr int elem = sizeof(In);
    if (dn.flags & GR_DF_CONV_QUANTIZE_IN) {
        const bool i8 = (dn.flags & GR_DF_CONV_I8) != 0;
        const int cols = min(KC, (dn.k_bytes - k0 + 31) / 32 * 32) / elem;
        for (int it = tid; it < bm * cols; it += kThreads) {
            const int r = it / cols, kk = it - r * cols, k = k0 / elem + kk;
            const int tap = k / dn.cin_pad, ci = k - tap * dn.cin_pad;
            const int ky = tap / dn.ksize, kx = tap - ky * dn.ksize;
            const int4 q = s_rows[r];
            int v = -1;
            if (q.w && k * elem < dn.k_bytes && ci < iv.c) {
                const int iy = q.x + ky, ix = q.y + kx;
                if (iy >= 0 && iy < iv.h && ix >= 0 && ix < iv.w)
                    v = in[elem_at(iv, image, ci, iy, ix)];
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
    /* NHWC: a thread keeps its 16-byte column (kThreads is a multiple of KC / 16), whose tap and
     * channel the cursor holds */
    static_assert(kThreads % (KC / 16) == 0, "a thread's column is fixed");
    const int c = tid % (KC / 16);
    const int tap_off = (cc.ky * iv.w + cc.kx) * iv.c_stride + cc.ci;
    const bool k_ok = k0 + c * 16 < dn.k_bytes;
    for (int r = tid / (KC / 16); r < bm; r += kThreads / (KC / 16)) {
        const int4 q = s_rows[r];
        const bool ok = k_ok && q.w && static_cast<unsigned>(q.x + cc.ky) < static_cast<unsigned>(iv.h) &&
                        static_cast<unsigned>(q.y + cc.kx) < static_cast<unsigned>(iv.w);
        copy16(sA + r * LDS + c * 16, ok ? in + static_cast<long long>(q.z + tap_off) * elem : in, ok);
    }
}

/* The quant path's input patch: rows [iy0, iy0 + prow) x the whole width of the u8 input, each
 * pixel's channels quantized once (the quantize node's formulas) and packed: i8 one word, f16 two. */
__device__ void stage_patch(const Ctx &cx, const gr_df_node &dn, int image, const Tiling &tl,
                            unsigned char *patch, int tid)
{
    const gr_df_view &iv = dn.in[0];
    const unsigned char *in = space_of(cx, iv);
    const bool i8 = (dn.flags & GR_DF_CONV_I8) != 0;
    const int w = iv.w, cs = iv.c;
    for (int it = tid; it < tl.prow * w; it += kThreads) {
        const int y = tl.iy0 + it / w, x = it - it / w * w;
        unsigned lo = 0, hi = 0; /* i8: lo = 4 bytes; f16: lo, hi = 2 halves each */
#pragma unroll
        for (int ci = 0; ci < 4; ++ci) {
            if (ci >= cs)
                break;
            const int v = in[elem_at(iv, image, ci, y, x)];
            const unsigned q = i8 ? static_cast<unsigned>(gr_conv_quantize_u8_i8(v, dn.in_scale)) & 0xffu
                                  : __half_as_ushort(gr_conv_quantize_u8_f16(v));
            if (i8)
                lo |= q << (8 * ci);
            else if (ci < 2)
                lo |= q << (16 * ci);
            else
                hi |= q << (16 * (ci - 2));
        }
        if (i8)
            reinterpret_cast<unsigned *>(patch)[it] = lo;
        else
            reinterpret_cast<uint2 *>(patch)[it] = make_uint2(lo, hi);
    }
}

/* The quant path's A tile: for each GEMM row and tap, the staged pixel's packed channels at the
 * tap's K offset (the rest of the row stays zero from the task's start). */
__device__ void gather_patch(const gr_df_node &dn, const Tiling &tl, const unsigned char *patch,
                             const int4 *s_rows, unsigned char *sA, int tid)
{
    const gr_df_view &iv = dn.in[0];
    const bool i8 = (dn.flags & GR_DF_CONV_I8) != 0;
    const int taps = dn.ksize * dn.ksize, tap_bytes = dn.cin_pad * (i8 ? 1 : 2);
    const int r = tid % tl.bm; /* kThreads is a multiple of bm: a thread keeps its row */
    const int4 q = s_rows[r];
    for (int tap = tid / tl.bm; tap < taps; tap += kThreads / tl.bm) {
        const int ky = tap / dn.ksize, kx = tap - ky * dn.ksize;
        const int iy = q.x + ky, ix = q.y + kx;
        const bool ok = q.w && iy >= tl.iy0 && iy < tl.iy0 + tl.prow && ix >= 0 && ix < iv.w;
        const int at = (iy - tl.iy0) * iv.w + ix;
        unsigned char *dst = sA + r * LDS + tap * tap_bytes;
        if (i8)
            *reinterpret_cast<unsigned *>(dst) = ok ? reinterpret_cast<const unsigned *>(patch)[at] : 0u;
        else
            *reinterpret_cast<uint2 *>(dst) =
                ok ? reinterpret_cast<const uint2 *>(patch)[at] : make_uint2(0u, 0u);
    }
}

/* One conv task: output rows [row0, row0 + rows) of one image, channels [ch0, ch0 + chs). The
 * filters of the first tile's first stages - 1 chunks are in flight already when `prefetched`
 * (one cp.async group, committed before the wait). */
template <typename In>
__device__ void conv_task(const Ctx &cx, const gr_df_node &dn, const gr_df_task &dt,
                          const Tiling &tl, unsigned char *smem, int4 *s_rows, int *s_out,
                          bool prefetched, int tid)
{
    using Acc = typename AccOf<In>::T;
    using Op = MmaOp<In, Acc>;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const int mat = lane >> 3, r8 = lane & 7;
    const int wm = warp % tl.wm, wk = warp / tl.wm;
    const bool pool = (dn.flags & GR_DF_CONV_POOL) != 0;
    const bool dequant = (dn.flags & GR_DF_CONV_DEQUANT_OUT) != 0;
    const gr_df_view &ov = dn.out;
    const ConvParams p = row_map(dn);
    const int m_first = ((dt.image * ov.h + dt.row0) * ov.w) * (pool ? 4 : 1);
    const int m_end = m_first + task_rows(dn, dt);
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
    const int S = tl.stages;
    unsigned char *patch = smem + tl.stage_bytes;
    if (tl.quant) { /* the patch once, and zero the A rows the gathers leave alone */
        stage_patch(cx, dn, dt.image, tl, patch, tid);
        unsigned char *sA = stage_a(smem, tl, 0);
        const int cols = (dn.k_bytes + 31) / 32 * 2; /* 16-byte columns up to the last K step */
        for (int it = tid; it < tl.bm * cols; it += kThreads)
            *reinterpret_cast<uint4 *>(sA + (it / cols) * LDS + (it % cols) * 16) =
                make_uint4(0u, 0u, 0u, 0u);
    }
    bool first = true;
    for (int n0 = dt.ch0; n0 < n_end; n0 += BN)
        for (int m0 = m_first; m0 < m_end; m0 += tl.bm) {
            typename Op::Reg c[NJ][Op::regs];
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int r = 0; r < Op::regs; ++r)
                    c[j][r] = 0;
            __syncthreads(); /* the last tile's readers of the stages and s_rows are done */
            map_rows(dn, p, m0, m_end, tl.bm, s_rows, s_out, tid);
            __syncthreads();
            const bool have_b = prefetched && first;
            first = false;
            const FilterCursor fc = filter_cursor(dn, wts, n0, n_end, tid);
            ColCursor cc = col_cursor<In>(dn, tid);
            if (tl.quant) {
                if (!have_b && m0 == m_first)
                    load_filters(fc, dn, wts, 0, stage_b(smem, tl, 0), tid);
                cp_async_commit();
                gather_patch(dn, tl, patch, s_rows, stage_a(smem, tl, 0), tid);
                cp_async_wait<0>();
                __syncthreads();
            } else {
                /* prologue: chunks 0 .. S - 2 */
                for (int s = 0; s < S - 1; ++s) {
                    if (s < tl.nk) {
                        if (!have_b)
                            load_filters(fc, dn, wts, s * KC, stage_b(smem, tl, s), tid);
                        load_rows<In>(cx, dn, s_rows, tl.bm, s * KC, cc, dt.image, stage_a(smem, tl, s), tid);
                        advance<In>(cc, dn);
                    }
                    cp_async_commit();
                }
            }
            const int nk = tl.quant ? 1 : tl.nk;
            for (int kc = 0; kc < nk; ++kc) {
                const int st = kc % S;
                if (!tl.quant) {
                    const int next = kc + S - 1, ns = next % S; /* ns was read in iteration kc - 1 */
                    if (next < tl.nk) {
                        load_filters(fc, dn, wts, next * KC, stage_b(smem, tl, ns), tid);
                        load_rows<In>(cx, dn, s_rows, tl.bm, next * KC, cc, dt.image, stage_a(smem, tl, ns), tid);
                        advance<In>(cc, dn);
                    }
                    cp_async_commit();
                    cp_async_wait_n(S - 1); /* chunk kc has landed (this thread's copies) */
                    __syncthreads();        /* ... and every thread's */
                }
                const unsigned char *sA = stage_a(smem, tl, st), *sB = stage_b(smem, tl, st);
                const int k_steps = (min(KC, dn.k_bytes - kc * KC) + 31) / 32;
                for (int kk = wk; kk < k_steps; kk += tl.wk) {
                    unsigned a[4];
                    ldmatrix_x4(a, sA + (wm * 16 + (mat & 1) * 8 + r8) * LDS + kk * 32 + (mat >> 1) * 16);
#pragma unroll
                    for (int j = 0; j < NJ / 2; ++j) {
                        unsigned b[4];
                        ldmatrix_x4(b, sB + (j * 16 + (mat >> 1) * 8 + r8) * LDS + kk * 32 + (mat & 1) * 16);
                        Op::mma(c[2 * j], a, b[0], b[1]);
                        Op::mma(c[2 * j + 1], a, b[2], b[3]);
                    }
                }
                __syncthreads(); /* the chunk is consumed: its stage may be refilled */
            }
            if (tl.wk > 1) { /* add the K-split warps' partial sums (the stages are free now) */
                Acc *red = reinterpret_cast<Acc *>(smem);
                if (wk > 0)
#pragma unroll
                    for (int j = 0; j < NJ; ++j)
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            red[(((wk - 1) * tl.wm + wm) * NJ * 4 + j * 4 + r) * 32 + lane] = c[j][r];
                __syncthreads();
                if (wk > 0)
                    continue; /* the next tile starts with a barrier these warps reach too */
                for (int o = 1; o < tl.wk; ++o)
#pragma unroll
                    for (int j = 0; j < NJ; ++j)
#pragma unroll
                        for (int r = 0; r < 4; ++r)
                            c[j][r] += red[(((o - 1) * tl.wm + wm) * NJ * 4 + j * 4 + r) * 32 + lane];
            }
            /* Epilogue: thread (g, t4) holds rows g, g + 8 of its warp's 16, filters 8j + 2t4 (+1).
             * A pooled window's four taps are rows 4w..4w+3: lanes whose g differs in bits 0-1. */
            const int ch_step = ov.layout ? 1 : ov.h * ov.w;
            bool row_ok[2];
            int row_at[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                row_ok[h] = s_rows[wm * 16 + h * 8 + g].w != 0;
                row_at[h] = s_out[wm * 16 + h * 8 + g];
            }
#pragma unroll
            for (int j = 0; j < NJ; ++j) {
                if (n0 + j * 8 >= n_end)
                    break; /* the warp's remaining filters are past the slice (uniform) */
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int n = n0 + j * 8 + 2 * t4 + e;
                    const int nc = n < ov.c ? n : 0;
                    /* the channel's multiplier and bias once for both rows (the stores below may
                     * alias the weights block for all the compiler knows) */
                    const float mu = mul ? mul[nc] : 0.0f, bi = bias ? bias[nc] : 0.0f;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        static_assert(Op::regs == 4, "f32 / int32 accumulators: 4 per MMA tile");
                        float v = gr_conv_epilogue_loaded(acc_to_float(c[j][2 * h + e]), mul != nullptr,
                                                          mu, bi, dn.activation);
                        if (pool) {
                            v = row_ok[h] ? v : -FLT_MAX;
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
                        }
                        if (row_at[h] < 0 || n >= n_end)
                            continue;
                        const long long at = row_at[h] + static_cast<long long>(n) * ch_step;
                        if (dequant)
                            reinterpret_cast<float *>(out)[at] = v;
                        else if (ov.dtype == GR_DTYPE_I8)
                            out[at] = static_cast<unsigned char>(gr_conv_i8_bits(v, dn.out_inv_scale));
                        else
                            reinterpret_cast<__half *>(out)[at] = __float2half_rn(v);
                    }
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

__global__ void __launch_bounds__(kThreads, 2) k_dataflow(const gr_dataflow_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char smem[]; /* a.smem_pool bytes: conv stages */
    __shared__ int4 s_rows[kMaxBM];
    __shared__ int s_out[kMaxBM];
    __shared__ gr_df_node s_node; /* the task's node: read all through the task */
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
        static_assert(sizeof(gr_df_node) % 4 == 0, "a node copies as words");
        for (int i = tid; i < static_cast<int>(sizeof(gr_df_node) / 4); i += kThreads)
            reinterpret_cast<unsigned *>(&s_node)[i] =
                reinterpret_cast<const unsigned *>(cx.nodes + dt.node)[i];
        __syncthreads();
        const gr_df_node &dn = s_node;
        /* the filters do not depend on this run: copy the first tile's first chunks while waiting */
        const bool prefetch = dn.op == GR_DF_OP_CONV;
        Tiling tl = {};
        if (prefetch) {
            tl = tiling(dn, dt, a.smem_pool);
            const unsigned char *w = static_cast<const unsigned char *>(a.weights) + dn.w_offset;
            const FilterCursor fc = filter_cursor(dn, w, dt.ch0, dt.ch0 + dt.chs, tid);
            for (int s = 0; s < tl.stages - 1 && s < tl.nk; ++s)
                load_filters(fc, dn, w, s * KC, stage_b(smem, tl, s), tid);
            cp_async_commit();
        }
        if (warp == 0) {
            const bool ok = wait_deps(cx, t, lane);
            if (lane == 0)
                s_abort = !ok;
        }
        __syncthreads(); /* warp 0's acquire, then this barrier: the producers' writes are visible */
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
                conv_task<signed char>(cx, dn, dt, tl, smem, s_rows, s_out, prefetch, tid);
            else
                conv_task<__half>(cx, dn, dt, tl, smem, s_rows, s_out, prefetch, tid);
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

/* Dynamic shared memory per block: as much as two blocks per SM leave (at most kPoolMax), at
 * least two stages of the largest tile (kPoolMin). */
constexpr int kPoolMax = 104 * 1024, kPoolMin = 2 * (kMaxBM + BN) * LDS;

cudaError_t pool_bytes(int *bytes)
{
    int dev = 0, per_sm = 0, optin = 0;
    cudaFuncAttributes fa;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    GR_CUDA_TRY(cudaFuncGetAttributes(&fa, k_dataflow));
    const int fixed = static_cast<int>(fa.sharedSizeBytes) + 1024; /* static + the reserved 1 KB */
    int pool = per_sm / 2 - fixed;
    pool = pool < optin - fixed ? pool : optin - fixed;
    pool = pool < kPoolMax ? pool / 128 * 128 : kPoolMax;
    if (pool < kPoolMin) {
        gr_kernels_record_failure(__FILE__, __LINE__, "shared memory check",
                                  "the dataflow kernel needs two conv stages of shared memory "
                                  "per block");
        return cudaErrorNotSupported;
    }
    *bytes = pool;
    return cudaSuccess;
}

} // namespace

size_t gr_dataflow_state_bytes(int n_flags)
{
    return gr_df_state_bytes(n_flags);
}

cudaError_t gr_dataflow_check(void)
{
    int dev = 0, major = 0, pool = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  "the dataflow kernel needs sm_80+ (cp.async, mma.sync)");
        return cudaErrorNotSupported;
    }
    return pool_bytes(&pool);
}

cudaError_t gr_launch_dataflow(const gr_dataflow_args *args, cudaStream_t stream)
{
    GR_ARG_CHECK(args && args->program && args->state && args->status && args->n_tasks >= 0);
    GR_ARG_CHECK(reinterpret_cast<uintptr_t>(args->program) % 16 == 0);
    const cudaError_t supported = gr_dataflow_check();
    if (supported != cudaSuccess)
        return supported;
    gr_dataflow_args a = *args;
    GR_CUDA_TRY(pool_bytes(&a.smem_pool));
    GR_CUDA_TRY(cudaFuncSetAttribute(k_dataflow, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     a.smem_pool));
    int blocks = args->blocks;
    if (blocks <= 0) {
        int dev = 0, sms = 0, per_sm = 0;
        GR_CUDA_TRY(cudaGetDevice(&dev));
        GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        GR_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_dataflow, kThreads,
                                                                  static_cast<size_t>(a.smem_pool)));
        GR_ARG_CHECK(per_sm > 0);
        blocks = sms * per_sm;
    }
    /* Claims are dynamic, so any number of resident blocks makes progress; more blocks than tasks
     * would only claim nothing. */
    if (args->n_tasks > 0 && blocks > args->n_tasks)
        blocks = args->n_tasks;
    k_dataflow<<<blocks, kThreads, static_cast<size_t>(a.smem_pool), stream>>>(a);
    return cudaGetLastError();
}
