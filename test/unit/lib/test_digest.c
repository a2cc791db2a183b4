/* Tests for lib/src/digest.c: SHA-256 and CRC-32/IEEE against known values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/digest.h"

static void test_sha256_known(void **state) {
    char hex[DFC_SHA256_HEX_LEN + 1];
    assert_int_equal(dfc_sha256_hex("", 0, hex), 0);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(dfc_sha256_hex("abc", 3, hex), 0);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_sha256_incremental_equals_oneshot(void **state) {
    char a[DFC_SHA256_HEX_LEN + 1], b[DFC_SHA256_HEX_LEN + 1];
    static char buf[100000];
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (char)(i * 31 + 7);
    }
    dfc_sha256_hex(buf, sizeof(buf), a);
    struct dfc_sha256 h;
    assert_int_equal(dfc_sha256_init(&h), 0);
    for (size_t off = 0; off < sizeof(buf); off += 777) {
        size_t n = sizeof(buf) - off < 777 ? sizeof(buf) - off : 777;
        dfc_sha256_update(&h, buf + off, n);
    }
    dfc_sha256_final_hex(&h, b);
    dfc_sha256_done(&h);
    dfc_sha256_done(&h); /* twice is harmless */
    assert_string_equal(a, b);
}

/* The chaining value at a 64-byte boundary, resumed in another context, finishes as the
 * plain SHA-256 of the whole; a copy finishes the same; no state inside a block. */
static void test_sha256_chain_resumes(void **state) {
    (void)state;
    enum { N = 64 * 1000 + 37 };
    uint8_t *buf = malloc(N);
    for (size_t i = 0; i < N; i++) {
        buf[i] = (uint8_t)(i * 131 + 7);
    }
    char want[DFC_SHA256_HEX_LEN + 1], got[DFC_SHA256_HEX_LEN + 1];
    assert_int_equal(dfc_sha256_hex(buf, N, want), 0);
    struct dfc_sha256c a, b, c;
    uint8_t mid[DFC_SHA256_LEN], md[DFC_SHA256_LEN];
    assert_int_equal(dfc_sha256c_init(&a), 0);
    dfc_sha256c_update(&a, buf, 640 * 10 + 5);
    assert_int_equal(dfc_sha256c_state(&a, mid), -EINVAL); /* inside a block */
    dfc_sha256c_update(&a, buf + 6405, 64 * 500 - 6405);
    assert_int_equal(dfc_sha256c_state(&a, mid), 0);
    assert_int_equal(dfc_sha256c_copy(&c, &a), 0);
    assert_int_equal(dfc_sha256c_init(&b), 0);
    assert_int_equal(dfc_sha256c_resume(&b, mid, 64 * 500), 0);
    assert_int_equal(dfc_sha256c_resume(&b, mid, 63), -EINVAL);
    assert_int_equal(dfc_sha256c_resume(&b, mid, 64 * 500), 0);
    dfc_sha256c_update(&b, buf + 64 * 500, N - 64 * 500);
    dfc_sha256c_final(&b, md);
    dfc_sha256_to_hex(md, got);
    assert_string_equal(got, want);
    dfc_sha256c_update(&c, buf + 64 * 500, N - 64 * 500);
    dfc_sha256c_final(&c, md);
    dfc_sha256_to_hex(md, got);
    assert_string_equal(got, want);
    dfc_sha256c_done(&a);
    dfc_sha256c_done(&b);
    dfc_sha256c_done(&c);
    free(buf);
}

static void test_crc32_ieee(void **state) {
    /* The CRC-32/IEEE check value; Castagnoli would give 0xe3069283. */
    assert_int_equal(dfc_crc32_update(0, "123456789", 9), 0xcbf43926u);
    uint32_t c = dfc_crc32_update(0, "12345", 5);
    c = dfc_crc32_update(c, "6789", 4);
    assert_int_equal(c, 0xcbf43926u);
    char d[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(0xcbf43926u, d);
    assert_string_equal(d, "crc32:3421780262");
    dfc_crc32_format(0xffffffffu, d);
    assert_string_equal(d, "crc32:4294967295");
}

/* Both carry-less multiply paths (the one this CPU takes, and the 128-bit one) against zlib
 * alone: every length 0..4200 at every alignment 0..15 of random bytes, from a random seed
 * crc, and in two calls split anywhere. */
static void test_crc32_simd_equals_zlib(void **state) {
    enum { MAX = 4200, ALIGN = 16 };
    static unsigned char buf[MAX + ALIGN];
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    const char *simd = dfc_crc32_simd();
    print_message("crc32: %s\n", simd != NULL ? simd : "zlib only");
    for (size_t a = 0; a < ALIGN; a++) {
        for (size_t n = 0; n <= MAX; n += (n < 300 ? 1 : 37)) {
            uint32_t seed = (uint32_t)(x >> (n % 32));
            uint32_t want = dfc_crc32_update_portable(seed, buf + a, n);
            assert_int_equal(dfc_crc32_update(seed, buf + a, n), want);
            assert_int_equal(dfc_crc32_update_narrow(seed, buf + a, n), want);
            size_t cut = (n * 7) / 11;
            uint32_t c = dfc_crc32_update(seed, buf + a, cut);
            assert_int_equal(dfc_crc32_update(c, buf + a + cut, n - cut), want);
        }
    }
    /* A piece-sized buffer: 4 MiB of a pattern, one call. */
    size_t big = (size_t)4 << 20;
    unsigned char *p = malloc(big);
    assert_non_null(p);
    for (size_t i = 0; i < big; i++) {
        p[i] = (unsigned char)(i * 2654435761u >> 13);
    }
    assert_int_equal(dfc_crc32_update(0, p, big), dfc_crc32_update_portable(0, p, big));
    assert_int_equal(dfc_crc32_update_narrow(0, p, big), dfc_crc32_update_portable(0, p, big));
    free(p);
}

static void test_evp_by_name(void **state) {
    struct dfc_evp h;
    char hex[DFC_EVP_HEX_MAX];
    assert_int_equal(dfc_evp_init(&h, "sha512"), 0);
    dfc_evp_update(&h, "abc", 3);
    dfc_evp_final_hex(&h, hex);
    dfc_evp_done(&h);
    assert_string_equal(hex, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                             "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
    assert_int_equal(dfc_evp_init(&h, "sha256"), 0);
    dfc_evp_final_hex(&h, hex);
    dfc_evp_done(&h);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(dfc_evp_init(&h, "nosuchdigest"), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_known),
        cmocka_unit_test(test_sha256_incremental_equals_oneshot),
        cmocka_unit_test(test_sha256_chain_resumes),
        cmocka_unit_test(test_crc32_ieee),
        cmocka_unit_test(test_crc32_simd_equals_zlib),
        cmocka_unit_test(test_evp_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
