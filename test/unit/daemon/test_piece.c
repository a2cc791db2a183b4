/* Tests for daemon/storage/piece.c: geometry, the upstream task-id vectors, piece CRCs and
 * SHA-256 digests (chaining values), the content's SHA-256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "storage/piece.h"

#define MiB ((uint64_t)1 << 20)

static void test_auto_piece_length(void **state) {
    assert_true(dfd_piece_length_auto(0) == 4 * MiB);
    assert_true(dfd_piece_length_auto(1) == 4 * MiB);
    assert_true(dfd_piece_length_auto(2000 * MiB) == 4 * MiB);   /* 4 MiB: 500 pieces */
    assert_true(dfd_piece_length_auto(2001 * MiB) == 8 * MiB);   /* just over: doubles */
    assert_true(dfd_piece_length_auto(10000 * MiB) == 32 * MiB); /* 20 MiB -> 32 MiB */
    assert_true(dfd_piece_length_auto(1ULL << 45) == 64 * MiB);  /* clamped */
}

static void test_piece_count(void **state) {
    assert_int_equal(dfd_piece_count(0, 4 * MiB), 0);
    assert_int_equal(dfd_piece_count(1, 4 * MiB), 1);
    assert_int_equal(dfd_piece_count(4 * MiB, 4 * MiB), 1);
    assert_int_equal(dfd_piece_count(4 * MiB + 1, 4 * MiB), 2);
}

/* Runs the digester over buf with the given parameters. */
static void digest(const char *buf, size_t len, const char *tag, const char *app, uint64_t pl,
                   struct dfd_digest_result *r) {
    struct dfd_digester d;
    struct dfd_digest_params p = {
        .hash_content = true, .tag = tag, .application = app, .piece_length = pl};
    assert_int_equal(dfd_digester_init(&d, &p), 0);
    assert_int_equal(dfd_digester_update(&d, buf, len), 0);
    assert_int_equal(dfd_digester_finish(&d, r), 0);
    dfd_digester_done(&d);
}

static void test_upstream_task_id_vectors(void **state) {
    /* The upstream client's own vector: content "This is a test file". */
    static const char content[] = "This is a test file";
    const size_t n = sizeof(content) - 1;
    struct dfd_digest_result r;
    digest(content, n, "tag1", "app1", 1024, &r);
    assert_string_equal(r.task_id,
                        "7160a071a9acea5ac341e770c14d0211c38a4b15b3bbe2c5f848a706fd47419e");
    dfd_digest_result_done(&r);
    digest(content, n, NULL, "app1", 0, &r);
    assert_string_equal(r.task_id,
                        "0d0f8536f51227fda07141308f5ae8149b561b51b61c6517125f25dfa27acf5b");
    dfd_digest_result_done(&r);
    digest(content, n, "tag1", NULL, 0, &r);
    assert_string_equal(r.task_id,
                        "a98b76813681e30cf83733fe055792b86393bba6f18e3d89fd8c18253922d992");
    dfd_digest_result_done(&r);
    digest(content, n, NULL, NULL, 1024, &r);
    assert_string_equal(r.task_id,
                        "e894374a39e39cfa78c409cac02f2cdbb5605a24f5ff55c7bc2b624877556c03");
    dfd_digest_result_done(&r);
    char id[DFD_TASK_ID_LEN + 1];
    assert_int_equal(dfd_task_id_from_string(content, id), 0);
    assert_string_equal(id, "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249");
    /* An empty tag is present but contributes nothing. */
    digest(content, n, "", "app1", 0, &r);
    assert_string_equal(r.task_id,
                        "0d0f8536f51227fda07141308f5ae8149b561b51b61c6517125f25dfa27acf5b");
    dfd_digest_result_done(&r);
}

static void test_task_id_valid(void **state) {
    assert_true(
        dfd_task_id_valid("e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"));
    assert_false(
        dfd_task_id_valid("E2D0FE1585A63EC6009C8016FF8DDA8B17719A637405A4E23C0FF81339148249"));
    assert_false(dfd_task_id_valid("e2d0fe"));
    assert_false(dfd_task_id_valid("../../etc/passwd"));
    assert_false(dfd_task_id_valid(""));
}

/* Piece CRCs equal direct CRCs of each piece, with the length known up front or not, and
 * however the bytes are chunked. */
static void check_pieces(uint64_t len, uint64_t pl, size_t chunk) {
    char *buf = malloc(len ? len : 1);
    for (uint64_t i = 0; i < len; i++) {
        buf[i] = (char)(i * 2654435761u >> 13);
    }
    struct dfd_digester d;
    struct dfd_digest_params p = {.hash_content = false, .piece_length = pl};
    assert_int_equal(dfd_digester_init(&d, &p), 0);
    for (uint64_t off = 0; off < len; off += chunk) {
        size_t k = len - off < chunk ? (size_t)(len - off) : chunk;
        assert_int_equal(dfd_digester_update(&d, buf + off, k), 0);
    }
    struct dfd_digest_result r;
    assert_int_equal(dfd_digester_finish(&d, &r), 0);
    uint64_t want_pl = pl ? pl : dfd_piece_length_auto(len);
    assert_true(r.piece_length == want_pl);
    assert_true(r.content_length == len);
    assert_int_equal(r.piece_count, dfd_piece_count(len, want_pl));
    for (uint32_t i = 0; i < r.piece_count; i++) {
        uint64_t off = i * want_pl, n = len - off < want_pl ? len - off : want_pl;
        uint32_t want = (uint32_t)crc32_z(0, (const unsigned char *)buf + off, n);
        assert_int_equal(r.piece_crcs[i], want);
        /* The piece's digest, from the same pass (docs/integrity.md): the content hash's
         * chaining value at its end (the last: the content's SHA-256). */
        struct dfc_sha256c c;
        uint8_t md[DFC_SHA256_LEN];
        assert_int_equal(dfc_sha256c_init(&c), 0);
        dfc_sha256c_update(&c, buf, off + n);
        if (i + 1 < r.piece_count) {
            assert_int_equal(dfc_sha256c_state(&c, md), 0);
        } else {
            dfc_sha256c_final(&c, md);
        }
        dfc_sha256c_done(&c);
        if (want_pl % 64 == 0) {
            assert_non_null(r.piece_shas);
            assert_memory_equal(r.piece_shas[i], md, DFC_SHA256_LEN);
        } else {
            assert_null(r.piece_shas); /* no chaining value inside a block */
        }
    }
    /* And the content's, with or without a content-derived id. */
    struct dfc_sha256 h;
    uint8_t md[DFC_SHA256_LEN];
    assert_int_equal(dfc_sha256_init(&h), 0);
    dfc_sha256_update(&h, buf, len);
    dfc_sha256_final(&h, md);
    dfc_sha256_done(&h);
    assert_memory_equal(r.content_sha256, md, DFC_SHA256_LEN);
    dfd_digest_result_done(&r);
    dfd_digester_done(&d);
    free(buf);
}

static void test_piece_crcs(void **state) {
    check_pieces(0, 0, 4096);
    check_pieces(1, 0, 4096);
    check_pieces(4 * MiB, 0, 1 << 20);               /* exactly one piece */
    check_pieces(4 * MiB + 1, 0, 1 << 20);           /* a one-byte last piece */
    check_pieces(11 * MiB + 12345, 4 * MiB, 777777); /* explicit length, odd chunks */
    check_pieces(13 * MiB + 5, 5 * MiB, 3 << 20);    /* a length that is no power of two */
    check_pieces(2100 * MiB / 100, 0, 4 << 20);      /* 21 MiB */
}

static void test_unknown_length_combines_units(void **state) {
    /* With a 1 KiB CRC unit, a 9 MiB + 3 byte stream of unknown length becomes 4 MiB automatic
     * pieces built from 4096 combined units each; they must equal direct piece CRCs. */
    const uint64_t len = 9 * MiB + 3;
    char *buf = malloc(len);
    for (uint64_t i = 0; i < len; i++) {
        buf[i] = (char)(i * 40503u >> 7);
    }
    struct dfd_digester d;
    struct dfd_digest_params p = {.hash_content = false, .unit = 1024};
    assert_int_equal(dfd_digester_init(&d, &p), 0);
    for (uint64_t off = 0; off < len; off += 100000) {
        assert_int_equal(
            dfd_digester_update(&d, buf + off, len - off < 100000 ? len - off : 100000), 0);
    }
    struct dfd_digest_result r;
    assert_int_equal(dfd_digester_finish(&d, &r), 0);
    assert_true(r.piece_length == 4 * MiB);
    assert_int_equal(r.piece_count, 3);
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t off = i * 4 * MiB, n = len - off < 4 * MiB ? len - off : 4 * MiB;
        assert_int_equal(r.piece_crcs[i], (uint32_t)crc32_z(0, (unsigned char *)buf + off, n));
    }
    /* The piece digests are the content hash's chaining values at the piece ends (kept at
     * every 1 KiB unit end), the last one the content's SHA-256: resuming from the digest
     * before a piece and hashing the piece gives its own. */
    assert_non_null(r.piece_shas);
    for (uint32_t i = 0; i < 3; i++) {
        uint64_t off = i * 4 * MiB, n = len - off < 4 * MiB ? len - off : 4 * MiB;
        struct dfc_sha256c c;
        uint8_t md[DFC_SHA256_LEN];
        assert_int_equal(dfc_sha256c_init(&c), 0);
        assert_int_equal(dfc_sha256c_resume(&c, i ? r.piece_shas[i - 1] : NULL, off), 0);
        dfc_sha256c_update(&c, buf + off, n);
        if (i < 2) {
            assert_int_equal(dfc_sha256c_state(&c, md), 0);
        } else {
            dfc_sha256c_final(&c, md);
        }
        dfc_sha256c_done(&c);
        assert_memory_equal(r.piece_shas[i], md, DFC_SHA256_LEN);
    }
    assert_memory_equal(r.piece_shas[2], r.content_sha256, DFC_SHA256_LEN);
    dfd_digest_result_done(&r);
    dfd_digester_done(&d);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_piece_length),
        cmocka_unit_test(test_piece_count),
        cmocka_unit_test(test_upstream_task_id_vectors),
        cmocka_unit_test(test_task_id_valid),
        cmocka_unit_test(test_piece_crcs),
        cmocka_unit_test(test_unknown_length_combines_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
