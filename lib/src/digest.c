/*
 * digest.c - thin wrappers over OpenSSL's EVP digests (the CRC-32 is crc32.c's).
 */
#include "dfc/digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>

int dfc_sha256_init(struct dfc_sha256 *h) {
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx == NULL) {
        return -ENOMEM;
    }
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        dfc_sha256_done(h);
        return -ENOMEM;
    }
    return 0;
}

void dfc_sha256_update(struct dfc_sha256 *h, const void *data, size_t len) {
    if (len > 0) {
        EVP_DigestUpdate(h->ctx, data, len);
    }
}

void dfc_sha256_final(struct dfc_sha256 *h, uint8_t out[DFC_SHA256_LEN]) {
    unsigned int n = 0;
    EVP_DigestFinal_ex(h->ctx, out, &n);
}

void dfc_sha256_final_hex(struct dfc_sha256 *h, char out[DFC_SHA256_HEX_LEN + 1]) {
    uint8_t md[DFC_SHA256_LEN];
    dfc_sha256_final(h, md);
    dfc_sha256_to_hex(md, out);
}

void dfc_sha256_to_hex(const uint8_t md[DFC_SHA256_LEN], char out[DFC_SHA256_HEX_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < DFC_SHA256_LEN; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[DFC_SHA256_HEX_LEN] = '\0';
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int dfc_sha256_from_hex(const char *hex, uint8_t out[DFC_SHA256_LEN]) {
    for (size_t i = 0; i < DFC_SHA256_LEN; i++) {
        int hi = hex[2 * i] != '\0' ? hex_digit(hex[2 * i]) : -1;
        int lo = hi >= 0 ? hex_digit(hex[2 * i + 1]) : -1;
        if (lo < 0) {
            return -EINVAL;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return hex[2 * DFC_SHA256_LEN] == '\0' ? 0 : -EINVAL;
}

int dfc_sha256_reset(struct dfc_sha256 *h) {
    return EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
}

int dfc_sha256_copy(struct dfc_sha256 *dst, const struct dfc_sha256 *src) {
    dst->ctx = EVP_MD_CTX_new();
    if (dst->ctx == NULL) {
        return -ENOMEM;
    }
    if (EVP_MD_CTX_copy_ex(dst->ctx, src->ctx) != 1) {
        dfc_sha256_done(dst);
        return -ENOMEM;
    }
    return 0;
}

void dfc_sha256_done(struct dfc_sha256 *h) {
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

int dfc_sha256_hex(const void *data, size_t len, char out[DFC_SHA256_HEX_LEN + 1]) {
    struct dfc_sha256 h;
    int r = dfc_sha256_init(&h);
    if (r < 0) {
        return r;
    }
    dfc_sha256_update(&h, data, len);
    dfc_sha256_final_hex(&h, out);
    dfc_sha256_done(&h);
    return 0;
}

int dfc_evp_init(struct dfc_evp *h, const char *name) {
    const EVP_MD *md = EVP_get_digestbyname(name);
    h->ctx = NULL;
    if (md == NULL) {
        return -EINVAL;
    }
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx == NULL || EVP_DigestInit_ex(h->ctx, md, NULL) != 1) {
        dfc_evp_done(h);
        return -ENOMEM;
    }
    h->len = (unsigned)EVP_MD_get_size(md);
    return 0;
}

void dfc_evp_update(struct dfc_evp *h, const void *data, size_t len) {
    if (len > 0) {
        EVP_DigestUpdate(h->ctx, data, len);
    }
}

void dfc_evp_final_hex(struct dfc_evp *h, char out[DFC_EVP_HEX_MAX]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(h->ctx, md, &n);
    if (n > 64) {
        n = 64;
    }
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * n] = '\0';
}

void dfc_evp_done(struct dfc_evp *h) {
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

void dfc_crc32_format(uint32_t crc, char out[DFC_CRC32_DIGEST_MAX]) {
    snprintf(out, DFC_CRC32_DIGEST_MAX, "crc32:%u", crc);
}
