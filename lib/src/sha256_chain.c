/*
 * sha256_chain.c - SHA-256 whose chaining value can be read at a 64-byte boundary and resumed
 * from (dfc/digest.h, struct dfc_sha256c; docs/integrity.md): the piece digests of a task are
 * the content hash's chaining values at the piece ends, so one pass over the bytes gives both
 * the content's SHA-256 and every piece's digest, and a piece is checked alone, from the
 * chaining value before it, with the same work as hashing it once.
 *
 * DESIGN: EVP hides the state; OpenSSL's SHA256_CTX is the one interface that exposes it (its
 * h[] and bit count are public fields), so this file uses the low-level calls, deprecated in
 * OpenSSL 3.0 but kept (and SHA-NI-accelerated as EVP's). Nothing else in the tree does.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/digest.h"

int dfc_sha256c_init(struct dfc_sha256c *c) {
    c->ctx = malloc(sizeof(SHA256_CTX));
    if (c->ctx == NULL) {
        return -ENOMEM;
    }
    SHA256_Init(c->ctx);
    return 0;
}

int dfc_sha256c_resume(struct dfc_sha256c *c, const uint8_t state[DFC_SHA256_LEN],
                       uint64_t nbytes) {
    if (nbytes % 64 != 0) {
        return -EINVAL;
    }
    SHA256_Init(c->ctx);
    if (state != NULL) {
        for (int i = 0; i < 8; i++) {
            c->ctx->h[i] = (SHA_LONG)state[4 * i] << 24 | (SHA_LONG)state[4 * i + 1] << 16 |
                           (SHA_LONG)state[4 * i + 2] << 8 | (SHA_LONG)state[4 * i + 3];
        }
    }
    uint64_t bits = nbytes * 8;
    c->ctx->Nl = (SHA_LONG)bits;
    c->ctx->Nh = (SHA_LONG)(bits >> 32);
    c->ctx->num = 0;
    return 0;
}

void dfc_sha256c_update(struct dfc_sha256c *c, const void *data, size_t len) {
    if (len > 0) {
        SHA256_Update(c->ctx, data, len);
    }
}

int dfc_sha256c_state(const struct dfc_sha256c *c, uint8_t out[DFC_SHA256_LEN]) {
    if (c->ctx->num != 0) {
        return -EINVAL; /* a partial block is buffered: no chaining value here */
    }
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->ctx->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->ctx->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->ctx->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->ctx->h[i];
    }
    return 0;
}

void dfc_sha256c_final(struct dfc_sha256c *c, uint8_t out[DFC_SHA256_LEN]) {
    SHA256_Final(out, c->ctx);
}

int dfc_sha256c_copy(struct dfc_sha256c *dst, const struct dfc_sha256c *src) {
    dst->ctx = malloc(sizeof(SHA256_CTX));
    if (dst->ctx == NULL) {
        return -ENOMEM;
    }
    memcpy(dst->ctx, src->ctx, sizeof(SHA256_CTX));
    return 0;
}

void dfc_sha256c_done(struct dfc_sha256c *c) {
    free(c->ctx);
    c->ctx = NULL;
}
