/* gr_hash64 (base/bytes.h): XXH3's 64-bit hash with seed 0 and its default secret, value for
 * value (xxHash 0.8, Yann Collet, BSD-2-Clause; the algorithm and the secret as the
 * specification in xxHash's own repository gives them: github.com/Cyan4973/xxHash, file
 * doc/xxhash_spec.md), in portable C.
 *
 * Why XXH3: an engine file's checksum reads the whole file at every load (80-95 MB for a saved
 * GPU YOLOv2-tiny). Its long-input loop feeds 8 independent 64-bit accumulators with one 32x32
 * -> 64-bit multiply per 8 bytes, two lanes per SSE2 instruction (_mm_mul_epu32, as xxHash's own
 * SSE2 path: compilers do not find that pattern themselves), so it runs near memory speed; the
 * 4-lane multiply-rotate hash it replaced needed two scalar 64-bit multiplies per 8 bytes.
 * Elsewhere the same loop in portable C gives the same values. XXH3 passes SMHasher; an engine
 * file's checksum detects corruption, not tampering. Little-endian hosts only, like the rest of
 * the binary formats (base/bytes.h). */
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/bytes.h"

#define P32_1 0x9E3779B1U
#define P32_2 0x85EBCA77U
#define P32_3 0xC2B2AE3DU
#define P64_1 0x9E3779B185EBCA87ULL
#define P64_2 0xC2B2AE3D27D4EB4FULL
#define P64_3 0x165667B19E3779F9ULL
#define P64_4 0x85EBCA77C2B2AE63ULL
#define P64_5 0x27D4EB2F165667C5ULL
#define PRIME_MX1 0x165667919E3779F9ULL
#define PRIME_MX2 0x9FB21C651E98DF25ULL

#define SECRET_LEN 192
#define STRIPE 64                             /* bytes per accumulate step */
#define STRIPES_PER_BLOCK ((SECRET_LEN - STRIPE) / 8) /* then the accumulators are scrambled */

static const uint8_t secret[SECRET_LEN] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

static uint64_t read64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t read32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t xorshift(uint64_t h, int s) { return h ^ (h >> s); }

static uint64_t swap64(uint64_t x)
{
    uint64_t out = 0;
    for (int k = 0; k < 8; k++)
        out |= ((x >> (8 * k)) & 0xff) << (56 - 8 * k);
    return out;
}

/* The 128-bit product of a and b, its halves xor-ed together. */
static uint64_t mul128_fold64(uint64_t a, uint64_t b)
{
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t cross = (ll >> 32) + (uint32_t)lh + hl;
    uint64_t hi = hh + (lh >> 32) + (cross >> 32);
    uint64_t lo = (cross << 32) | (uint32_t)ll;
    return lo ^ hi;
}

static uint64_t avalanche(uint64_t h) { return xorshift(xorshift(h, 37) * PRIME_MX1, 32); }

static uint64_t avalanche_xxh64(uint64_t h)
{
    h = xorshift(h, 33) * P64_2;
    h = xorshift(h, 29) * P64_3;
    return xorshift(h, 32);
}

static uint64_t mix16(const uint8_t *p, const uint8_t *key)
{
    return mul128_fold64(read64(p) ^ read64(key), read64(p + 8) ^ read64(key + 8));
}

/* 0-16 bytes. */
static uint64_t hash_short(const uint8_t *p, size_t len)
{
    const uint8_t *s = secret;
    if (len == 0)
        return avalanche_xxh64(read64(s + 56) ^ read64(s + 64));
    if (len <= 3) {
        uint32_t c = (uint32_t)p[0] << 16 | (uint32_t)p[len >> 1] << 24 | p[len - 1] |
                     (uint32_t)len << 8;
        return avalanche_xxh64(c ^ (uint64_t)(read32(s) ^ read32(s + 4)));
    }
    if (len <= 8) {
        uint64_t h = ((uint64_t)read32(p) << 32 | read32(p + len - 4)) ^ read64(s + 8) ^
                     read64(s + 16);
        h ^= rotl64(h, 49) ^ rotl64(h, 24);
        h *= PRIME_MX2;
        h ^= (h >> 35) + len;
        h *= PRIME_MX2;
        return xorshift(h, 28);
    }
    uint64_t lo = read64(p) ^ read64(s + 24) ^ read64(s + 32);
    uint64_t hi = read64(p + len - 8) ^ read64(s + 40) ^ read64(s + 48);
    return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
}

/* 17-240 bytes. */
static uint64_t hash_medium(const uint8_t *p, size_t len)
{
    uint64_t acc = len * P64_1;
    if (len <= 128) {
        for (size_t k = (len - 1) / 32 + 1; k-- > 0;) {
            acc += mix16(p + 16 * k, secret + 32 * k);
            acc += mix16(p + len - 16 * (k + 1), secret + 32 * k + 16);
        }
        return avalanche(acc);
    }
    for (size_t k = 0; k < 8; k++)
        acc += mix16(p + 16 * k, secret + 16 * k);
    uint64_t end = mix16(p + len - 16, secret + 136 - 17);
    for (size_t k = 8; k < len / 16; k++)
        end += mix16(p + 16 * k, secret + 16 * (k - 8) + 3);
    return avalanche(avalanche(acc) + end);
}

/* One stripe (64 bytes) into the 8 accumulators: each adds its neighbour's word and the product
 * of its own word's halves, keyed. */
static void accumulate(uint64_t acc[8], const uint8_t *p, const uint8_t *key)
{
#if defined(__SSE2__)
    for (int i = 0; i < 4; i++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(acc + 2 * i));
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        __m128i k = _mm_xor_si128(v, _mm_loadu_si128((const __m128i *)(const void *)(key + 16 * i)));
        a = _mm_add_epi64(a, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));  /* the neighbour */
        a = _mm_add_epi64(a, _mm_mul_epu32(k, _mm_shuffle_epi32(k, _MM_SHUFFLE(0, 3, 0, 1))));
        _mm_storeu_si128((__m128i *)(void *)(acc + 2 * i), a);
    }
#else
    for (int i = 0; i < 8; i++) {
        uint64_t v = read64(p + 8 * i), k = v ^ read64(key + 8 * i);
        acc[i ^ 1] += v;
        acc[i] += (k & 0xffffffffULL) * (k >> 32);
    }
#endif
}

static void scramble(uint64_t acc[8], const uint8_t *key)
{
    for (int i = 0; i < 8; i++)
        acc[i] = (xorshift(acc[i], 47) ^ read64(key + 8 * i)) * P32_1;
}

/* More than 240 bytes: blocks of 16 stripes, each followed by a scramble, then the last stripe. */
static uint64_t hash_long(const uint8_t *p, size_t len)
{
    uint64_t acc[8] = {P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1};
    const size_t block = STRIPE * STRIPES_PER_BLOCK, blocks = (len - 1) / block;
    for (size_t b = 0; b < blocks; b++) {
        for (size_t n = 0; n < STRIPES_PER_BLOCK; n++)
            accumulate(acc, p + b * block + STRIPE * n, secret + 8 * n);
        scramble(acc, secret + SECRET_LEN - STRIPE);
    }
    const size_t stripes = (len - 1 - block * blocks) / STRIPE;
    for (size_t n = 0; n < stripes; n++)
        accumulate(acc, p + blocks * block + STRIPE * n, secret + 8 * n);
    accumulate(acc, p + len - STRIPE, secret + SECRET_LEN - STRIPE - 7);
    uint64_t h = len * P64_1;
    for (int i = 0; i < 4; i++)
        h += mul128_fold64(acc[2 * i] ^ read64(secret + 11 + 16 * i),
                           acc[2 * i + 1] ^ read64(secret + 11 + 16 * i + 8));
    return avalanche(h);
}

uint64_t gr_hash64(const void *data, size_t len)
{
    const uint8_t *p = data;
    return len <= 16 ? hash_short(p, len) : len <= 240 ? hash_medium(p, len) : hash_long(p, len);
}
