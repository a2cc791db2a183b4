/*
 * crc32.c - the IEEE CRC-32 (zlib's crc32, reflected polynomial 0xedb88320) of dfc/digest.h.
 *
 * zlib's crc32_z (Debian 12: 1.2.13, table-driven "braided") runs at about 3.5 GB/s; every
 * piece an import stores and every piece a peer sends is checked with it, so on a P2P download
 * it cost about a third of a CPU-second per GiB. On x86-64 with PCLMULQDQ the bulk of a buffer
 * is folded with carry-less multiplies instead (Intel, "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ Instruction", 2009; the constants are the paper's bit-reflected
 * k1..k5 and the Barrett pair for this polynomial, as in Chromium's zlib crc32_simd.c), about
 * 4x faster. CPUs with VPCLMULQDQ on 512-bit registers (AVX-512) fold four times as many
 * lanes per step, another 4x from cache (2x from memory); buffers of 256 bytes or more take
 * that path. The tail of fewer than 16 bytes, short buffers, and CPUs without the
 * instruction go through zlib. All give the same value (test_digest compares both loops with
 * zlib on random buffers of every length and alignment up to a few KiB).
 */
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "dfc/digest.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define CRC_SIMD_MIN 64 /* one block of four 16-byte lanes */

static const uint64_t k1k2[2] __attribute__((aligned(16))) = {0x0154442bd4, 0x01c6e41596};
static const uint64_t k3k4[2] __attribute__((aligned(16))) = {0x01751997d0, 0x00ccaa009e};
static const uint64_t k5k0[2] __attribute__((aligned(16))) = {0x0163cd6124, 0x0000000000};
static const uint64_t poly[2] __attribute__((aligned(16))) = {0x01db710641, 0x01f7011641};

/* Folds the four 16-byte lanes x1..x4 (the state after the last whole 64-byte block) and the
 * remaining len bytes of buf (a multiple of 16) into the 32-bit crc. */
__attribute__((target("pclmul,sse4.1"))) static inline uint32_t
crc_reduce(__m128i x1, __m128i x2, __m128i x3, __m128i x4, const unsigned char *buf, size_t len) {
    __m128i x0, x5;
    /* The four lanes into one. */
    x0 = _mm_load_si128((const __m128i *)(const void *)k3k4);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);

    /* The remaining 16-byte blocks, one at a time. */
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)(const void *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }

    /* 128 bits to 64. */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_loadl_epi64((const __m128i *)(const void *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);

    /* Barrett reduction to 32 bits. */
    x0 = _mm_load_si128((const __m128i *)(const void *)poly);
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* Folds len bytes (len >= 64, a multiple of 16) into the pre-inverted crc. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(const unsigned char *buf,
                                                                  size_t len, uint32_t crc) {
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;

    x1 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = _mm_load_si128((const __m128i *)(const void *)k1k2);
    buf += 64;
    len -= 64;

    /* Four lanes, 64 bytes per step. */
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5),
                           _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6),
                           _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7),
                           _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8),
                           _mm_loadu_si128((const __m128i *)(const void *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }

    return crc_reduce(x1, x2, x3, x4, buf, len);
}

#define CRC_WIDE_MIN 256 /* one block of four 64-byte registers */

/* One fold of x's four 128-bit lanes forward by the distance k was made for, into d. */
__attribute__((target("avx512f,vpclmulqdq"))) static inline __m512i fold512(__m512i x, __m512i k,
                                                                            __m512i d) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), d, 0x96);
}

/* crc_fold() four times as wide, for CPUs with VPCLMULQDQ on 512-bit registers: sixteen 16-byte
 * lanes in four registers, 256 bytes per step (k = x^(2048+32) and x^(2048-32) mod P, in the
 * same bit-reflected form as k1k2, which is the same pair for 512 bits), then the registers
 * into one and its four lanes into crc_reduce(). len >= 256, a multiple of 16. */
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) static uint32_t
crc_fold_wide(const unsigned char *buf, size_t len, uint32_t crc) {
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430, 0x011542778a));
    const __m512i k512 =
        _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(const void *)k1k2));
    __m512i z0 = _mm512_loadu_si512(buf + 0x00);
    __m512i z1 = _mm512_loadu_si512(buf + 0x40);
    __m512i z2 = _mm512_loadu_si512(buf + 0x80);
    __m512i z3 = _mm512_loadu_si512(buf + 0xc0);
    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    buf += 256;
    len -= 256;
    while (len >= 256) {
        z0 = fold512(z0, k2048, _mm512_loadu_si512(buf + 0x00));
        z1 = fold512(z1, k2048, _mm512_loadu_si512(buf + 0x40));
        z2 = fold512(z2, k2048, _mm512_loadu_si512(buf + 0x80));
        z3 = fold512(z3, k2048, _mm512_loadu_si512(buf + 0xc0));
        buf += 256;
        len -= 256;
    }
    z0 = fold512(z0, k512, z1);
    z0 = fold512(z0, k512, z2);
    z0 = fold512(z0, k512, z3);
    while (len >= 64) {
        z0 = fold512(z0, k512, _mm512_loadu_si512(buf));
        buf += 64;
        len -= 64;
    }
    return crc_reduce(_mm512_extracti32x4_epi32(z0, 0), _mm512_extracti32x4_epi32(z0, 1),
                      _mm512_extracti32x4_epi32(z0, 2), _mm512_extracti32x4_epi32(z0, 3), buf, len);
}

enum { SIMD_NONE, SIMD_CLMUL, SIMD_WIDE };

static int simd_level(void) {
    static int cached = -1; /* a benign race: every thread computes the same value */
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        __builtin_cpu_init();
        c = SIMD_NONE;
        if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
            c = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq")
                    ? SIMD_WIDE
                    : SIMD_CLMUL;
        }
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* The bulk of the buffer through the widest loop level allows, the tail through zlib. */
static uint32_t update(uint32_t crc, const unsigned char *p, size_t len, int level) {
    if (len >= CRC_SIMD_MIN && level != SIMD_NONE) {
        size_t bulk = len & ~(size_t)15;
        crc = ~(level == SIMD_WIDE && bulk >= CRC_WIDE_MIN ? crc_fold_wide(p, bulk, ~crc)
                                                           : crc_fold(p, bulk, ~crc));
        p += bulk;
        len -= bulk;
    }
    return len > 0 ? (uint32_t)crc32_z(crc, p, len) : crc;
}

uint32_t dfc_crc32_update(uint32_t crc, const void *data, size_t len) {
    return update(crc, data, len, simd_level());
}

uint32_t dfc_crc32_update_narrow(uint32_t crc, const void *data, size_t len) {
    int level = simd_level();
    return update(crc, data, len, level == SIMD_WIDE ? SIMD_CLMUL : level);
}

uint32_t dfc_crc32_update_portable(uint32_t crc, const void *data, size_t len) {
    return (uint32_t)crc32_z(crc, data, len);
}

const char *dfc_crc32_simd(void) {
    static const char *const names[] = {
        [SIMD_NONE] = NULL, [SIMD_CLMUL] = "PCLMULQDQ", [SIMD_WIDE] = "VPCLMULQDQ (AVX-512)"};
    return names[simd_level()];
}

#else

uint32_t dfc_crc32_update(uint32_t crc, const void *data, size_t len) {
    return (uint32_t)crc32_z(crc, data, len);
}

uint32_t dfc_crc32_update_narrow(uint32_t crc, const void *data, size_t len) {
    return (uint32_t)crc32_z(crc, data, len);
}

uint32_t dfc_crc32_update_portable(uint32_t crc, const void *data, size_t len) {
    return (uint32_t)crc32_z(crc, data, len);
}

const char *dfc_crc32_simd(void) {
    return NULL;
}

#endif
