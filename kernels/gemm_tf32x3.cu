/* Exact-FP32-level GEMM on TF32 tensor cores (3xTF32) with the conv epilogue fused
 * (kernels/gemm_f32.h, gr_launch_gemm_tf32x3_f32):
 *
 *   out[b][n][p] = act(bias[n] + sum_k W[n][k] * col[b][k][p])
 *
 * Darknet's row-major view of a conv (N = out_c, K = in_c*ksize*ksize, P = out_h*out_w). The
 * GEMM's columns are the batch's pixels flattened, j = b*P + p, so a 13x13 map at batch 64 is one
 * 10816-column GEMM instead of 64 GEMMs of 169 mostly padded columns.
 *
 * 3xTF32 (CUTLASS's OpMultiplyAddFastF32): every operand x is split into big = tf32(x) and
 * small = tf32(x - big) (cvt.rna: round to nearest, ties away), so x = big + small to ~2^-22
 * relative; each k8 step computes small_a*big_b + big_a*small_b + big_a*big_b (small*small, below
 * 2^-22, dropped) on the tensor cores into a zeroed 4-register partial, then adds that partial to
 * the f32 accumulator with an ordinary (round-to-nearest) FADD. The tensor core rounds its own
 * sums toward zero; keeping its chains short (3 MMAs of 8 products per k8 step on the K16 tiles,
 * 12 per 32-k stage on the K32 tiles) stops that bias from growing with K, so the result has FP32
 * GEMM accuracy (not bit-identical to cuBLAS: another summation order).
 *
 * Tiles: BM (out channels) x BN (columns) x BK (K, 16 or 32) per block of 8 warps, a 3- or 4-stage
 * cp.async pipeline (16-byte copies where the rows allow it - K % 4 == 0 for W, P % 4 == 0 for
 * col, 16-byte aligned bases - else 4-byte copies), zero-filled outside N, K and the columns. The
 * K32 tiles (the large layers) do twice the MMAs per barrier, read A fragments 16 bytes at a time
 * and add their partials once per stage (mma_stage_k32). mma.sync and cp.async need sm_80+: the
 * kernel compiles to an empty body before that and the launcher refuses such a device with
 * cudaErrorNotSupported. */
#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_internal.cuh" /* gr_conv_activate: k_bias_act_f32's expressions */
#include "kernels/cp_async.cuh"
#include "kernels/gemm_f32.h"

namespace
{

constexpr int kThreads = 256; /* 8 warps */
constexpr int kPadA = 4; /* As row stride BK + 4 = 20 or 4 mod 32: bank-conflict-free A reads */
constexpr int kPadB = 8; /* K16 tiles: Bs row stride BN + 8 = 8 mod 32, conflict-free B reads */

/* BM x BN block tile, WM x WN warps: each warp owns (BM/WM) x (BN/WN) outputs = MT x NT MMA tiles
 * of 16 x 8. BK = 16: the original main loop (two k8 steps per stage, a zeroed partial per k8
 * step, 4-byte fragment reads). BK = 32: the K32 main loop (four k8 steps per stage, one partial
 * per stage, 16-byte A fragment reads from a k order permuted inside the stage, B rows XOR-swizzled
 * in 16-byte chunks instead of padded; see k_gemm_tf32x3_f32). */
template <int BM_, int BN_, int WM_, int WN_, int MIN_BLOCKS_ = 1, int BK_ = 16, int STAGES_ = 3>
struct Tile {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, BK = BK_, stages = STAGES_;
    static constexpr bool k32 = BK == 32;
    static constexpr int min_blocks = MIN_BLOCKS_; /* __launch_bounds__: blocks per SM */
    static constexpr int warp_m = BM / WM, warp_n = BN / WN;
    static constexpr int MT = warp_m / 16, NT = warp_n / 8;
    static constexpr int lda = BK + kPadA;            /* As[BM][lda]: row n, k contiguous */
    static constexpr int ldb = k32 ? BN : BN + kPadB; /* Bs[BK][ldb]: row k, columns contiguous */
    static constexpr int a_stage = BM * lda, b_stage = BK * ldb;
    /* the 4-byte B loaders' copies per thread and stage, and how many of them to unroll: all with
     * K16; K32's 16 unrolled hold so many row offsets that the main loop spills */
    static constexpr int b_scalar_copies = BK * BN / kThreads;
    static constexpr int b_scalar_unroll = k32 ? 4 : b_scalar_copies;
    static_assert(b_scalar_copies % b_scalar_unroll == 0, "whole unrolled groups");
    static constexpr int smem_bytes =
        stages * (a_stage + b_stage) * static_cast<int>(sizeof(float));
    static_assert(BK == 16 || BK == 32, "the two main loops");
    static_assert(stages >= 2, "a pipeline");
    static_assert(WM * WN * 32 == kThreads, "8 warps");
    static_assert(BM % (16 * WM) == 0 && BN % (8 * WN) == 0, "warp tiles are whole 16x8 MMAs");
    static_assert(MT >= 1 && NT >= 1, "at least one MMA per warp");
    static_assert(kThreads % BN == 0 && kThreads % (BN / 4) == 0,
                  "the B loaders give each thread one fixed column (group)");
    static_assert((BK * BN) % kThreads == 0 && (BK * BN / 4) % kThreads == 0,
                  "the B loaders cover the tile in whole rounds");
    static_assert(kThreads % BK == 0 && (BM * BK) % kThreads == 0 && kThreads % (BK / 4) == 0,
                  "the A loaders give each thread one fixed k (group)");
    static_assert((lda * 4) % 16 == 0 && (ldb * 4) % 16 == 0 && (a_stage * 4) % 16 == 0 &&
                      (b_stage * 4) % 16 == 0,
                  "16-byte cp.async destinations and A fragment reads stay aligned");
    static_assert(k32 ? lda % 32 == 4 && BN % 32 == 0 : lda % 32 == 20 && ldb % 32 == 8,
                  "the bank-conflict-free strides (K32: 8 chunks of 16 bytes to swizzle a row)");
    static_assert(smem_bytes <= 227 * 1024, "fits an sm_90 block's shared memory");
};

/* The tile configurations, indexed by GR_TF32X3_TILE_* - 1. */
using Tile16x256 = Tile<16, 256, 1, 8>;  /* out_c <= 16: warp 16 x 32 */
using Tile32x256 = Tile<32, 256, 1, 8>;  /* out_c <= 32: warp 32 x 32 */
using Tile64x128 = Tile<64, 128, 2, 4>;  /* out_c <= 64: warp 32 x 32 */
using Tile128x128 = Tile<128, 128, 2, 4>; /* warp 64 x 32; 1 block per SM */
/* the same capped at 128 registers for 2 blocks (16 warps) per SM: a few bytes of spills (ptxas,
 * sm_90), which may or may not cost more than the occupancy gains; not chosen automatically */
using Tile128x128x2 = Tile<128, 128, 2, 4, 2>;
/* K32 main loop, 4 stages (136 KiB): warp 64 x 32, 1 block per SM; the automatic tile for
 * out_c > 64 */
using Tile128x128K32 = Tile<128, 128, 2, 4, 1, 32, 4>;
/* K32, 64 rows: warp 32 x 32, 4 stages (100 KiB), ~150 registers: 1 block per SM (forced only) */
using Tile64x128K32 = Tile<64, 128, 2, 4, 1, 32, 4>;

struct GemmParams {
    const float *w;    /* [N][K] */
    const float *col;  /* [batch][K][P]; implicit: the conv's input [batch][in_c][in_h][in_w] */
    const float *bias; /* [N] or NULL */
    float *out;        /* [batch][N][P] */
    int N, K, P, J;    /* J = batch * P columns */
    int n_tiles;       /* row tiles: block b is row tile b % n_tiles of column tile b / n_tiles */
    int activation;
    /* implicit im2col: col[b][(ci*ks + ky)*ks + kx][oy*out_w + ox] read from the input */
    int in_h, in_w, ksize, stride, pad, out_w;
    /* split-K (gridDim.y = parts > 1): part y takes K tiles [y*kt_per_split, +kt_per_split) and
     * writes its raw sums (no bias, no activation) to partial + y * J * N, laid out as out */
    int kt_per_split;
    float *partial;
    int splits; /* host side: the parts asked for (0 or 1: none) */
};

/* Where the B operand comes from. */
enum BMode { kBScalar = 0, kBVec = 1, kBImplicit = 2 };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

/* cvt.rna.tf32.f32 for finite x (round the magnitude to 10 mantissa bits, ties away: add half a
 * TF32 ulp to the bit pattern, clear the 13 bits below it; a carry into the exponent is right, and
 * the largest floats round to infinity as cvt.rna does). Two integer instructions, where ptxas
 * (CUDA 13, sm_90) expands cvt.rna.tf32.f32 into about three times as many (cubin sizes compared).
 * An infinite x splits into (inf, NaN) either way, so a non-finite operand still makes the output
 * non-finite. */
__device__ __forceinline__ unsigned to_tf32(float x)
{
    return (__float_as_uint(x) + 0x1000u) & 0xFFFFE000u;
}

/* x = big + small (to ~2^-22 relative), both TF32 bit patterns (rounded to nearest). */
__device__ __forceinline__ void split_tf32(float x, unsigned &big, unsigned &small)
{
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

/* The K32 loop's split: big as split_tf32's, small = x - big (exact) handed to the MMA as an f32
 * bit pattern. This assumes the tensor core uses only a .tf32 operand's top 19 bits (sign,
 * exponent, 10 mantissa bits), truncating the rest: small's error is then <= 2^-21 |x| instead of
 * 2^-22, a product's split error <= 2.5 * 2^-21 |w x| (1.2e-6) with small*small dropped (were the
 * low bits rounded or used, it would be smaller). Three instructions per element instead of
 * five; test_gpu_gemm_f32 holds the K32 tiles to the same tolerance. */
__device__ __forceinline__ void split_tf32_fast(float x, unsigned &big, unsigned &small)
{
    big = to_tf32(x);
    small = __float_as_uint(x - __uint_as_float(big));
}

/* d = a * b + c, m16n8k8, TF32 inputs, f32 accumulators. Fragments (PTX ISA, "Matrix Fragments
 * for mma.m16n8k8", .tf32; g = lane >> 2, t = lane & 3):
 *   A (16 x 8, row):  a0 (row g,   col t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
 *   B (8 x 8, col):   b0 (k t,   col g),   b1 (k t+4, col g)
 *   C/D (16 x 8):     c0 (row g, col 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1) */
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2], const float (&c)[4])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/* The thread's B column: its (b, p) base in col (k = 0), or for the implicit im2col its image
 * and the top-left input position of its output pixel's window. */
struct BColumn {
    const float *base;
    int iy0, ix0;
    bool valid;
};

/* Where Bs holds element (k row r, column c) of a stage. K32 tiles XOR the row's 16-byte chunk
 * index with 2 * ((r / 8) % 4): the K32 loop's B fragment reads (rows 8t + 2s, columns g of an
 * 8-column tile) then hit 32 distinct banks with unpadded rows. */
template <class T> __device__ __forceinline__ int b_index(int r, int c)
{
    if constexpr (T::k32)
        return r * T::ldb + ((((c >> 2) ^ ((r >> 2) & 6)) << 2) | (c & 3));
    else
        return r * T::ldb + c;
}

/* One K tile (rows k0 .. k0+BK-1) of W and col into a pipeline stage. VecA: 16-byte copies of W
 * (K % 4 == 0, W 16-byte aligned); kBVec: of col (P % 4 == 0, col 16-byte aligned); kBImplicit:
 * 4-byte copies from the conv input, zero outside the image. Out-of-range elements are zero-filled
 * from a valid address (the matrix base). */
template <class T, bool VecA, int BMode>
__device__ __forceinline__ void load_tile(const GemmParams &p, float *As, float *Bs, int n0, int k0,
                                          const BColumn &bc, int tid)
{
    constexpr int BK = T::BK;
    const float *b_col_base = bc.base;
    const bool b_col_valid = bc.valid;
    if (VecA) {
        constexpr int per_row = BK / 4, chunks = T::BM * per_row;
        const int cc = tid % per_row; /* fixed: kThreads % per_row == 0 */
        const int k = k0 + cc * 4;    /* K % 4 == 0: the 4 values are all in or all out */
#pragma unroll
        for (int i = 0; i < (chunks + kThreads - 1) / kThreads; ++i) {
            const int c = tid + i * kThreads;
            if (chunks % kThreads == 0 || c < chunks) {
                const int row = c / per_row, n = n0 + row;
                const bool valid = n < p.N && k < p.K;
                copy16(As + row * T::lda + cc * 4,
                           valid ? p.w + static_cast<size_t>(n) * p.K + k : p.w, valid);
            }
        }
    } else {
        const int kk = tid % BK, k = k0 + kk;
#pragma unroll
        for (int i = 0; i < T::BM * BK / kThreads; ++i) {
            const int row = tid / BK + i * (kThreads / BK), n = n0 + row;
            const bool valid = n < p.N && k < p.K;
            copy4(As + row * T::lda + kk, valid ? p.w + static_cast<size_t>(n) * p.K + k : p.w,
                      valid);
        }
    }
    /* B: the thread's column (group) is fixed; b_col_base points at its (b, p) in image b's block
     * (k = 0), b_col_valid says whether that column exists. */
    if (BMode == kBVec) {
        constexpr int per_row = T::BN / 4;
        const int cc = tid % per_row;
#pragma unroll
        for (int i = 0; i < BK * per_row / kThreads; ++i) {
            const int r = tid / per_row + i * (kThreads / per_row), k = k0 + r;
            const bool valid = b_col_valid && k < p.K;
            copy16(Bs + b_index<T>(r, cc * 4),
                       valid ? b_col_base + k * p.P : p.col, valid); /* k * P < K * P < 2^31 */
        }
    } else if (BMode == kBScalar) {
        const int cc = tid % T::BN;
#pragma unroll(T::b_scalar_unroll)
        for (int i = 0; i < BK * T::BN / kThreads; ++i) {
            const int r = tid / T::BN + i * (kThreads / T::BN), k = k0 + r;
            const bool valid = b_col_valid && k < p.K;
            copy4(Bs + b_index<T>(r, cc),
                      valid ? b_col_base + k * p.P : p.col, valid);
        }
    } else {
        /* Rows r0, r0 + step, ... of the tile: decode k = k0 + r0 into (ci, ky, kx) once, then
         * step (kx, then ky, then ci carry). */
        constexpr int step = kThreads / T::BN;
        const int cc = tid % T::BN, r0 = tid / T::BN;
        const int kk = p.ksize * p.ksize;
        int k = k0 + r0;
        int ci = k / kk, kyx = k - ci * kk;
        int ky = kyx / p.ksize, kx = kyx - ky * p.ksize;
        const int plane = p.in_h * p.in_w;
#pragma unroll(T::b_scalar_unroll)
        for (int i = 0; i < BK * T::BN / kThreads; ++i) {
            const int r = r0 + i * step;
            const int iy = bc.iy0 + ky, ix = bc.ix0 + kx;
            const bool valid = b_col_valid && k < p.K && iy >= 0 && iy < p.in_h && ix >= 0 &&
                               ix < p.in_w;
            copy4(Bs + b_index<T>(r, cc),
                      valid ? b_col_base + ci * plane + iy * p.in_w + ix : p.col, valid);
            k += step;
            kx += step;
            while (kx >= p.ksize) {
                kx -= p.ksize;
                ++ky;
            }
            while (ky >= p.ksize) {
                ky -= p.ksize;
                ++ci;
            }
        }
    }
}

/* One K16 stage: per k8 step, each (i, j) MMA tile gets a zeroed partial of 3 MMAs (24 products
 * each), added to the f32 accumulator. 4-byte fragment reads, split per read. */
/* Zero a warp's accumulator (or partial) tiles. */
template <int MT, int NT> __device__ __forceinline__ void zero_tiles(float (&x)[MT][NT][4])
{
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                x[i][j][e] = 0.0f;
}

template <class T>
__device__ __forceinline__ void mma_stage_k16(const float *As, const float *Bs,
                                              float (&acc)[T::MT][T::NT][4], int warp_row,
                                              int warp_col, int g, int t)
{
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int kk = 0; kk < T::BK; kk += 8) {
        unsigned b_big[T::NT][2], b_small[T::NT][2];
#pragma unroll
        for (int j = 0; j < T::NT; ++j) {
            const float *b = Bs + (kk + t) * T::ldb + warp_col + j * 8 + g;
            split_tf32(b[0], b_big[j][0], b_small[j][0]);          /* (k t, col g) */
            split_tf32(b[4 * T::ldb], b_big[j][1], b_small[j][1]); /* (k t+4, col g) */
        }
#pragma unroll
        for (int i = 0; i < T::MT; ++i) {
            /* one 16-row A fragment at a time: fewer live registers */
            unsigned a_big[4], a_small[4];
            const float *a = As + (warp_row + i * 16 + g) * T::lda + kk + t;
            split_tf32(a[0], a_big[0], a_small[0]);              /* (g, t) */
            split_tf32(a[8 * T::lda], a_big[1], a_small[1]);     /* (g+8, t) */
            split_tf32(a[4], a_big[2], a_small[2]);              /* (g, t+4) */
            split_tf32(a[8 * T::lda + 4], a_big[3], a_small[3]); /* (g+8, t+4) */
#pragma unroll
            for (int j = 0; j < T::NT; ++j) {
                float part[4];
                mma_tf32(part, a_small, b_big[j], zero);
                mma_tf32(part, a_big, b_small[j], part);
                mma_tf32(part, a_big, b_big[j], part);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[i][j][e] += part[e];
            }
        }
    }
}

/* One K32 stage. The four k8 steps s = 0..3 of the stage take the stage's 32 k rows in a permuted
 * order: the MMA's k index t (lane t = lane % 4) of step s is stage row 8t + 2s, its index t + 4
 * is row 8t + 2s + 1. A and B use the same order (the sum over k does not care), and it puts the
 * A values a lane needs for two steps (rows g and g + 8, stage rows 8t + 4h .. 8t + 4h + 3) in 16
 * contiguous bytes: one 128-bit read per row per step pair (lda = 36 floats: a quarter-warp's 8
 * reads cover the 32 banks once). B values stay 4-byte reads (rows 8t + 2s (+1), columns g),
 * conflict-free through b_index's swizzle.
 *
 * Each (i, j) MMA tile gets one zeroed partial for the whole stage: a chain of 12 MMAs (4 steps x
 * small_a*big_b, big_a*small_b, big_a*big_b; 96 products), then one f32 FADD per accumulator. The
 * tensor core rounds each MMA's sum toward zero, an error below 2^-23 of the chain's running sum
 * per MMA (bounded by the sum of its products' magnitudes): <= 12 * 2^-23 = 1.4e-6 of sum |w x|
 * over the stage, so <= 1.4e-6 of sum_k |w x| in all, whatever K is (the FADDs round to nearest:
 * no bias across stages). test_gpu_gemm_f32's tolerance (1e-5 of sum_k |w x|) keeps a 3x margin
 * over this plus split_tf32_fast's 1.2e-6 and the FADDs' probabilistic sqrt(K/32) 2^-24 (see
 * gemm_tol). */
template <class T>
__device__ __forceinline__ void mma_stage_k32(const float *As, const float *Bs,
                                              float (&acc)[T::MT][T::NT][4], int warp_row,
                                              int warp_col, int g, int t)
{
    float part[T::MT][T::NT][4];
    zero_tiles(part);
#pragma unroll
    for (int h = 0; h < 2; ++h) { /* steps 2h and 2h + 1 */
        unsigned b_big[2][T::NT][2], b_small[2][T::NT][2];
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int r = 8 * t + 4 * h + 2 * s; /* stage row of k index t; r + 1: index t + 4 */
#pragma unroll
            for (int j = 0; j < T::NT; ++j) {
                const int c = warp_col + j * 8 + g;
                split_tf32_fast(Bs[b_index<T>(r, c)], b_big[s][j][0], b_small[s][j][0]);
                split_tf32_fast(Bs[b_index<T>(r + 1, c)], b_big[s][j][1], b_small[s][j][1]);
            }
        }
#pragma unroll
        for (int i = 0; i < T::MT; ++i) {
            const float *a = As + (warp_row + i * 16 + g) * T::lda + 8 * t + 4 * h;
            const float4 lo = *reinterpret_cast<const float4 *>(a);               /* row g */
            const float4 hi = *reinterpret_cast<const float4 *>(a + 8 * T::lda); /* row g + 8 */
            /* a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4) of steps 2h and 2h + 1 */
            unsigned a_big[2][4], a_small[2][4];
            split_tf32_fast(lo.x, a_big[0][0], a_small[0][0]);
            split_tf32_fast(hi.x, a_big[0][1], a_small[0][1]);
            split_tf32_fast(lo.y, a_big[0][2], a_small[0][2]);
            split_tf32_fast(hi.y, a_big[0][3], a_small[0][3]);
            split_tf32_fast(lo.z, a_big[1][0], a_small[1][0]);
            split_tf32_fast(hi.z, a_big[1][1], a_small[1][1]);
            split_tf32_fast(lo.w, a_big[1][2], a_small[1][2]);
            split_tf32_fast(hi.w, a_big[1][3], a_small[1][3]);
            /* each partial's chain in the same order (per step: small_a*big_b, big_a*small_b,
             * big_a*big_b), issued j-innermost so consecutive MMAs are independent */
#pragma unroll
            for (int s = 0; s < 2; ++s) {
#pragma unroll
                for (int j = 0; j < T::NT; ++j)
                    mma_tf32(part[i][j], a_small[s], b_big[s][j], part[i][j]);
#pragma unroll
                for (int j = 0; j < T::NT; ++j)
                    mma_tf32(part[i][j], a_big[s], b_small[s][j], part[i][j]);
#pragma unroll
                for (int j = 0; j < T::NT; ++j)
                    mma_tf32(part[i][j], a_big[s], b_big[s][j], part[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < T::MT; ++i)
#pragma unroll
        for (int j = 0; j < T::NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] += part[i][j][e];
}

#endif

template <class T, bool VecA, int BMode>
__global__ void __launch_bounds__(kThreads, T::min_blocks) k_gemm_tf32x3_f32(GemmParams p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int warp_row = (warp / T::WN) * T::warp_m; /* in the block tile */
    const int warp_col = (warp % T::WN) * T::warp_n;
    /* Row tiles vary fastest: the blocks running together share their column tiles (B) in L2,
     * and all of them read the same few row tiles (A), so a large-K layer streams col once. */
    const int n0 = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.n_tiles)) * T::BM;
    const int j0 = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.n_tiles)) * T::BN;

    /* This thread's B column (group of 4 with kBVec): fixed for the whole K loop. */
    const int my_col = j0 + (BMode == kBVec ? (tid % (T::BN / 4)) * 4 : tid % T::BN);
    BColumn bc;
    bc.valid = my_col < p.J; /* kBVec: J % 4 == 0, so the whole group is in */
    bc.base = p.col;
    bc.iy0 = bc.ix0 = 0;
    if (bc.valid) {
        const int b = my_col / p.P, pix = my_col - b * p.P;
        if (BMode == kBImplicit) {
            const int oy = pix / p.out_w, ox = pix - oy * p.out_w;
            /* K = in_c * ksize^2: the image is in_c planes */
            bc.base =
                p.col + static_cast<size_t>(b) * (p.K / (p.ksize * p.ksize)) * p.in_h * p.in_w;
            bc.iy0 = oy * p.stride - p.pad;
            bc.ix0 = ox * p.stride - p.pad;
        } else {
            bc.base = p.col + static_cast<size_t>(b) * p.K * p.P + pix;
        }
    }

    float acc[T::MT][T::NT][4];
    zero_tiles(acc);

    constexpr int BK = T::BK, stages = T::stages;
    const int kt0 = static_cast<int>(blockIdx.y) * p.kt_per_split; /* this part's first K tile */
    const int k_tiles = min((p.K + BK - 1) / BK - kt0, p.kt_per_split);
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < k_tiles)
            load_tile<T, VecA, BMode>(p, smem + s * (T::a_stage + T::b_stage),
                                      smem + s * (T::a_stage + T::b_stage) + T::a_stage, n0,
                                      (kt0 + s) * BK, bc, tid);
        cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<stages - 2>(); /* tile kt has landed (this thread's copies) */
        __syncthreads();             /* everyone's copies; everyone is done with tile kt - 1 */
        {
            const int next = kt + stages - 1; /* into the stage tile kt - 1 used */
            if (next < k_tiles) {
                float *stage = smem + (next % stages) * (T::a_stage + T::b_stage);
                load_tile<T, VecA, BMode>(p, stage, stage + T::a_stage, n0, (kt0 + next) * BK, bc,
                                          tid);
            }
            cp_async_commit();
        }
        const float *As = smem + (kt % stages) * (T::a_stage + T::b_stage);
        const float *Bs = As + T::a_stage;
        if constexpr (T::k32)
            mma_stage_k32<T>(As, Bs, acc, warp_row, warp_col, g, t);
        else
            mma_stage_k16<T>(As, Bs, acc, warp_row, warp_col, g, t);
    }
    cp_async_wait<0>();

    /* Epilogue: + bias, activation, f32 stores (a split-K part: its raw sums into its partial).
     * Column j of the GEMM is pixel j % P of image j / P; this thread's columns are
     * warp_col + j*8 + 2t (+1). */
    const bool part = gridDim.y > 1;
    float *dst = part ? p.partial + blockIdx.y * static_cast<size_t>(p.J) * p.N : p.out;
    size_t out_off[T::NT][2];
    bool out_ok[T::NT][2];
#pragma unroll
    for (int j = 0; j < T::NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int c = j0 + warp_col + j * 8 + 2 * t + e;
            out_ok[j][e] = c < p.J;
            const int b = out_ok[j][e] ? c / p.P : 0, pix = c - b * p.P;
            out_off[j][e] = static_cast<size_t>(b) * p.N * p.P + pix;
        }
#pragma unroll
    for (int i = 0; i < T::MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = n0 + warp_row + i * 16 + g + h * 8;
            if (n >= p.N)
                continue;
            const float bv = p.bias && !part ? p.bias[n] : 0.0f;
            float *row = dst + static_cast<size_t>(n) * p.P;
#pragma unroll
            for (int j = 0; j < T::NT; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (out_ok[j][e])
                        row[out_off[j][e]] = part ? acc[i][j][h * 2 + e]
                                                  : gr_conv_activate(acc[i][j][h * 2 + e] + bv,
                                                             p.activation);
        }
#else
    (void)p;
#endif
}

/* Split-K's second pass: out[i] = act(bias[n] + the parts' sums for i, added in part order), i
 * over the [batch][N][P] output; deterministic. */
__global__ void k_splitk_reduce(const float *__restrict__ partial, int parts, size_t part_stride,
                                const float *__restrict__ bias, float *__restrict__ out, int N,
                                int P, size_t total, int activation)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        float v = partial[i];
        for (int s = 1; s < parts; ++s)
            v += partial[s * part_stride + i];
        const int n = static_cast<int>((i / static_cast<size_t>(P)) % static_cast<size_t>(N));
        out[i] = gr_conv_activate(v + (bias ? bias[n] : 0.0f), activation);
    }
}

template <class T, bool VecA, int BMode>
cudaError_t launch_tile(const GemmParams &p, int dev, cudaStream_t stream)
{
    const auto kernel = k_gemm_tf32x3_f32<T, VecA, BMode>;
    const cudaError_t raised =
        gr_raise_dynamic_smem<k_gemm_tf32x3_f32<T, VecA, BMode>>(dev, T::smem_bytes);
    if (raised != cudaSuccess)
        return raised;
    GemmParams q = p;
    q.n_tiles = gr_ceil_div(p.N, T::BM);
    const long long blocks = static_cast<long long>(q.n_tiles) * gr_ceil_div(p.J, T::BN);
    GR_ARG_CHECK(blocks < INT_MAX);
    const int k_tiles = gr_ceil_div(p.K, T::BK);
    const int parts = p.splits > 1 ? (p.splits < k_tiles ? p.splits : k_tiles) : 1;
    q.kt_per_split = gr_ceil_div(k_tiles, parts);
    const int used = gr_ceil_div(k_tiles, q.kt_per_split); /* no empty part */
    GR_ARG_CHECK(used == 1 || p.partial != nullptr);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(used));
    kernel<<<grid, kThreads, T::smem_bytes, stream>>>(q);
    GR_LAUNCH_CHECK();
    if (used > 1) {
        const size_t total = static_cast<size_t>(p.J) * p.N;
        const long long want = static_cast<long long>((total + 255) / 256);
        const unsigned grid_r = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
        k_splitk_reduce<<<grid_r, 256, 0, stream>>>(p.partial, used, total, p.bias, p.out, p.N,
                                                   p.P, total, p.activation);
        GR_LAUNCH_CHECK();
    }
    return cudaSuccess;
}

template <class T, int BMode> cudaError_t launch_a(const GemmParams &p, bool vec_a, int dev,
                                                   cudaStream_t stream)
{
    return vec_a ? launch_tile<T, true, BMode>(p, dev, stream)
                 : launch_tile<T, false, BMode>(p, dev, stream);
}

template <class T> cudaError_t launch_vec(const GemmParams &p, bool vec_a, int b_mode, int dev,
                                          cudaStream_t stream)
{
    switch (b_mode) {
    case kBVec: return launch_a<T, kBVec>(p, vec_a, dev, stream);
    case kBImplicit: return launch_a<T, kBImplicit>(p, vec_a, dev, stream);
    default: return launch_a<T, kBScalar>(p, vec_a, dev, stream);
    }
}

bool aligned16(const void *ptr)
{
    return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

} // namespace

extern "C" cudaError_t gr_gemm_tf32x3_check_device(int *device)
{
    int dev = 0, major = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (device)
        *device = dev;
    if (major < 8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  "3xTF32 needs sm_80+ (mma.sync tf32, cp.async)");
        return cudaErrorNotSupported;
    }
    return cudaSuccess;
}

extern "C" int gr_gemm_tf32x3_auto_tile(int n_out, int columns, int sm_count)
{
    if (n_out <= 16)
        return GR_TF32X3_TILE_16x256;
    if (n_out <= 32)
        return GR_TF32X3_TILE_32x256;
    if (n_out <= 64)
        return GR_TF32X3_TILE_64x128;
    /* 128-row tiles unless they leave SMs idle (few columns: batch 1 on a 13x13 map) */
    const long long big =
        static_cast<long long>(gr_ceil_div(n_out, 128)) * gr_ceil_div(columns, 128);
    return big < sm_count ? GR_TF32X3_TILE_64x128 : GR_TF32X3_TILE_128x128_K32;
}

extern "C" long long gr_gemm_tf32x3_blocks(int n_out, int columns, int sm_count)
{
    if (n_out <= 0 || columns <= 0)
        return 0;
    int bm = 128, bn = 128;
    switch (gr_gemm_tf32x3_auto_tile(n_out, columns, sm_count)) {
    case GR_TF32X3_TILE_16x256: bm = 16, bn = 256; break;
    case GR_TF32X3_TILE_32x256: bm = 32, bn = 256; break;
    case GR_TF32X3_TILE_64x128: bm = 64; break;
    default: break; /* 128x128 */
    }
    return static_cast<long long>(gr_ceil_div(n_out, bm)) * gr_ceil_div(columns, bn);
}

namespace
{

/* Checks shared by both entry points, then the tile and the copy widths. */
cudaError_t launch_gemm(GemmParams &prm, int batch, int b_mode, int tile, cudaStream_t stream)
{
    GR_ARG_CHECK(prm.w != nullptr && prm.col != nullptr && prm.out != nullptr);
    GR_ARG_CHECK(prm.N > 0 && prm.K > 0 && prm.P > 0 && batch > 0);
    GR_ARG_CHECK(prm.activation >= GR_CONV_ACT_LINEAR && prm.activation < GR_CONV_ACT_COUNT);
    GR_ARG_CHECK(tile >= GR_TF32X3_TILE_AUTO && tile <= GR_TF32X3_TILES);
    /* 32-bit in-image offsets and column indices */
    GR_ARG_CHECK(static_cast<long long>(prm.K) * prm.P < INT_MAX &&
                 static_cast<long long>(prm.N) * prm.P < INT_MAX &&
                 static_cast<long long>(batch) * prm.P < INT_MAX);
    int dev = 0;
    cudaError_t err = gr_gemm_tf32x3_check_device(&dev);
    if (err != cudaSuccess)
        return err;
    prm.J = batch * prm.P;
    const bool vec_a = prm.K % 4 == 0 && aligned16(prm.w);
    if (b_mode == kBScalar && prm.P % 4 == 0 && aligned16(prm.col))
        b_mode = kBVec;
    if (tile == GR_TF32X3_TILE_AUTO) {
        int sms = 0;
        GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        tile = gr_gemm_tf32x3_auto_tile(prm.N, prm.J, sms);
    }
    if (tile == GR_TF32X3_TILE_128x128_K32 || tile == GR_TF32X3_TILE_64x128_K32) {
        /* the K32 tiles' 4 stages (100-136 KiB) exceed sm_86/sm_89's 99 KiB per block: there
         * the K16 tile of the same shape runs instead */
        int smem_optin = 0;
        GR_CUDA_TRY(
            cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        if (tile == GR_TF32X3_TILE_128x128_K32 && smem_optin < Tile128x128K32::smem_bytes)
            tile = GR_TF32X3_TILE_128x128;
        if (tile == GR_TF32X3_TILE_64x128_K32 && smem_optin < Tile64x128K32::smem_bytes)
            tile = GR_TF32X3_TILE_64x128;
    }
    switch (tile) {
    case GR_TF32X3_TILE_16x256: return launch_vec<Tile16x256>(prm, vec_a, b_mode, dev, stream);
    case GR_TF32X3_TILE_32x256: return launch_vec<Tile32x256>(prm, vec_a, b_mode, dev, stream);
    case GR_TF32X3_TILE_64x128: return launch_vec<Tile64x128>(prm, vec_a, b_mode, dev, stream);
    case GR_TF32X3_TILE_128x128_2:
        return launch_vec<Tile128x128x2>(prm, vec_a, b_mode, dev, stream);
    case GR_TF32X3_TILE_128x128_K32:
        return launch_vec<Tile128x128K32>(prm, vec_a, b_mode, dev, stream);
    case GR_TF32X3_TILE_64x128_K32:
        return launch_vec<Tile64x128K32>(prm, vec_a, b_mode, dev, stream);
    default: return launch_vec<Tile128x128>(prm, vec_a, b_mode, dev, stream);
    }
}

} // namespace

extern "C" cudaError_t gr_launch_gemm_tf32x3_splitk_f32(const float *w, const float *col,
                                                        const float *bias, float *out, int n_out,
                                                        int k, int p, int batch, int activation,
                                                        int tile, int splits, float *partial,
                                                        cudaStream_t stream)
{
    GR_ARG_CHECK(splits >= 1 && splits <= GR_TF32X3_MAX_SPLITS && (splits == 1 || partial));
    GemmParams prm;
    memset(&prm, 0, sizeof prm);
    prm.w = w;
    prm.col = col;
    prm.bias = bias;
    prm.out = out;
    prm.N = n_out;
    prm.K = k;
    prm.P = p;
    prm.activation = activation;
    prm.splits = splits;
    prm.partial = partial;
    return launch_gemm(prm, batch, kBScalar, tile, stream);
}

extern "C" cudaError_t gr_launch_gemm_tf32x3_f32(const float *w, const float *col,
                                                 const float *bias, float *out, int n_out, int k,
                                                 int p, int batch, int activation, int tile,
                                                 cudaStream_t stream)
{
    return gr_launch_gemm_tf32x3_splitk_f32(w, col, bias, out, n_out, k, p, batch, activation,
                                            tile, 1, nullptr, stream);
}

extern "C" int gr_gemm_tf32x3_auto_splits(int n_out, int k, int columns, int sm_count)
{
    /* Only the 128x128 K32 tile, one block per SM: its last wave of blocks is what split-K
     * fills. Parts of at least 32 K tiles (1,024 of K) keep the extra pass (each part's sums
     * written and read once more) small next to the GEMM; a split must shorten the
     * wave-quantised time, ceil(blocks * s / SMs) / s waves, by 6% or more. */
    if (n_out <= 0 || k <= 0 || columns <= 0 || sm_count <= 0 ||
        gr_gemm_tf32x3_auto_tile(n_out, columns, sm_count) != GR_TF32X3_TILE_128x128_K32)
        return 1;
    const long long blocks = gr_gemm_tf32x3_blocks(n_out, columns, sm_count);
    const int k_tiles = gr_ceil_div(k, 32);
    int best = 1;
    double best_waves = static_cast<double>(gr_ceil_div(blocks, sm_count));
    const double one = best_waves;
    for (int s = 2; s <= 3 && k_tiles / s >= 32; ++s) {
        const double waves = static_cast<double>(gr_ceil_div(blocks * s, sm_count)) / s;
        if (waves < best_waves) {
            best_waves = waves;
            best = s;
        }
    }
    return best_waves <= 0.94 * one ? best : 1;
}

extern "C" cudaError_t gr_launch_conv_tf32x3_f32(const float *in, const float *w, const float *bias,
                                                 float *out, int batch, int in_c, int in_h,
                                                 int in_w, int out_c, int ksize, int stride,
                                                 int pad, int activation, int tile,
                                                 cudaStream_t stream)
{
    GR_ARG_CHECK(in_c > 0 && in_h > 0 && in_w > 0 && ksize > 0 && stride > 0 && pad >= 0 &&
                 ksize <= 64 && pad <= 64);
    const int out_h = gr_conv_out_dim(in_h, ksize, stride, pad);
    const int out_w = gr_conv_out_dim(in_w, ksize, stride, pad);
    GR_ARG_CHECK(out_h > 0 && out_w > 0);
    /* 32-bit offsets inside an image, positions of the windows */
    GR_ARG_CHECK(static_cast<long long>(in_c) * in_h * in_w < INT_MAX &&
                 static_cast<long long>(out_h) * out_w < INT_MAX &&
                 static_cast<long long>(in_c) * ksize * ksize < INT_MAX &&
                 static_cast<long long>(out_h) * stride + ksize < INT_MAX &&
                 static_cast<long long>(out_w) * stride + ksize < INT_MAX);
    GemmParams prm;
    memset(&prm, 0, sizeof prm);
    prm.w = w;
    prm.col = in;
    prm.bias = bias;
    prm.out = out;
    prm.N = out_c;
    prm.K = in_c * ksize * ksize;
    prm.P = out_h * out_w;
    prm.activation = activation;
    prm.in_h = in_h;
    prm.in_w = in_w;
    prm.ksize = ksize;
    prm.stride = stride;
    prm.pad = pad;
    prm.out_w = out_w;
    return launch_gemm(prm, batch, kBImplicit, tile, stream);
}
