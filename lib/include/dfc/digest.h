/*
 * digest.h - SHA-256 (OpenSSL EVP) and CRC-32/IEEE (crc32.c: PCLMULQDQ, VPCLMULQDQ or zlib)
 * helpers.
 *
 * The CRC is the IEEE polynomial (zlib's crc32, the same as Rust's crc32fast), not Castagnoli;
 * Dragonfly formats piece digests as "crc32:<unsigned decimal>".
 */
#ifndef DFC_DIGEST_H
#define DFC_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DFC_SHA256_HEX_LEN   64
#define DFC_SHA256_LEN       32 /* raw digest bytes */
#define DFC_CRC32_DIGEST_MAX 17 /* "crc32:" + 10 digits + NUL */

struct evp_md_ctx_st;

/* An incremental SHA-256. Embedded by the caller: dfc_sha256_init() then dfc_sha256_done(). */
struct dfc_sha256 {
    struct evp_md_ctx_st *ctx;
};

/* -ENOMEM when OpenSSL cannot allocate its context. */
int dfc_sha256_init(struct dfc_sha256 *h);
void dfc_sha256_update(struct dfc_sha256 *h, const void *data, size_t len);
/* Writes 64 lowercase hex digits and a NUL to out. The context may not be updated after. */
void dfc_sha256_final_hex(struct dfc_sha256 *h, char out[DFC_SHA256_HEX_LEN + 1]);
/* The 32 raw bytes; the context may not be updated after (but may be reset). */
void dfc_sha256_final(struct dfc_sha256 *h, uint8_t out[DFC_SHA256_LEN]);
/* Starts h (initialised) over again, as a fresh SHA-256; -ENOMEM. */
int dfc_sha256_reset(struct dfc_sha256 *h);
/* dst (uninitialised) becomes a copy of src's state (its own context: dfc_sha256_done both);
 * so a prefix hashed once can be finished several ways. -ENOMEM. */
int dfc_sha256_copy(struct dfc_sha256 *dst, const struct dfc_sha256 *src);
/* The raw digest of 64 lowercase hex digits (nothing after them); -EINVAL. */
int dfc_sha256_from_hex(const char *hex, uint8_t out[DFC_SHA256_LEN]);
/* 64 lowercase hex digits and a NUL of raw digest md. */
void dfc_sha256_to_hex(const uint8_t md[DFC_SHA256_LEN], char out[DFC_SHA256_HEX_LEN + 1]);
/* Frees the context; safe on a zeroed or already-done struct. */
void dfc_sha256_done(struct dfc_sha256 *h);

/* A SHA-256 whose chaining value (the 32-byte state between blocks) can be read at a 64-byte
 * boundary and resumed from (sha256_chain.c, docs/integrity.md). Init, then any updates; the
 * result of _final is the plain SHA-256 of everything fed (after a resume: of the bytes the
 * state stood for, then these). Embedded by the caller; _done frees (safe on a zeroed one). */
struct SHA256state_st;
struct dfc_sha256c {
    struct SHA256state_st *ctx;
};
int dfc_sha256c_init(struct dfc_sha256c *c); /* -ENOMEM */
/* Sets c (initialised) to the chaining value state after nbytes (a multiple of 64: -EINVAL
 * else) bytes; state NULL: SHA-256's initial value (nbytes should then be 0). */
int dfc_sha256c_resume(struct dfc_sha256c *c, const uint8_t state[DFC_SHA256_LEN], uint64_t nbytes);
void dfc_sha256c_update(struct dfc_sha256c *c, const void *data, size_t len);
/* The chaining value now; -EINVAL unless the bytes fed so far are a multiple of 64. */
int dfc_sha256c_state(const struct dfc_sha256c *c, uint8_t out[DFC_SHA256_LEN]);
/* Finishes (padding and length) into out; c may only be resumed or freed after. */
void dfc_sha256c_final(struct dfc_sha256c *c, uint8_t out[DFC_SHA256_LEN]);
/* dst (uninitialised) becomes a copy of src. -ENOMEM. */
int dfc_sha256c_copy(struct dfc_sha256c *dst, const struct dfc_sha256c *src);
void dfc_sha256c_done(struct dfc_sha256c *c);

/* One-shot SHA-256 of a buffer as lowercase hex. */
int dfc_sha256_hex(const void *data, size_t len, char out[DFC_SHA256_HEX_LEN + 1]);

/* Any OpenSSL digest by name ("sha256", "sha512"), for whole-file verification. */
struct dfc_evp {
    struct evp_md_ctx_st *ctx;
    unsigned len; /* digest length in bytes */
};

#define DFC_EVP_HEX_MAX 129 /* sha512: 128 hex digits + NUL */

/* -EINVAL for an unknown name, -ENOMEM. */
int dfc_evp_init(struct dfc_evp *h, const char *name);
void dfc_evp_update(struct dfc_evp *h, const void *data, size_t len);
void dfc_evp_final_hex(struct dfc_evp *h, char out[DFC_EVP_HEX_MAX]);
void dfc_evp_done(struct dfc_evp *h);

/* Extends crc (start with 0) over data; any length. Carry-less multiplies where the CPU has them
 * (crc32.c). */
uint32_t dfc_crc32_update(uint32_t crc, const void *data, size_t len);
/* The same value through zlib's crc32_z alone (the reference the tests compare with). */
uint32_t dfc_crc32_update_portable(uint32_t crc, const void *data, size_t len);
/* The same value through the 128-bit carry-less multiply path even where the 512-bit one
 * exists (zlib alone where neither does): so the tests check both paths on any CPU. */
uint32_t dfc_crc32_update_narrow(uint32_t crc, const void *data, size_t len);
/* The carry-less multiply path dfc_crc32_update takes on this CPU ("PCLMULQDQ" or
 * "VPCLMULQDQ (AVX-512)"), NULL when it uses zlib alone. */
const char *dfc_crc32_simd(void);

/* Formats "crc32:<decimal>". */
void dfc_crc32_format(uint32_t crc, char out[DFC_CRC32_DIGEST_MAX]);

#endif /* DFC_DIGEST_H */
