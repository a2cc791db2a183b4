/*
 * Tests for lib/src/rpc_common.c's decoder: the hand-written bulk path must decode exactly as
 * protobuf-c does, whatever the slicing, and hand every awkward case (a oneof sibling, a
 * repeated field, truncation) to protobuf-c's own rules, whether the large bytes field is at
 * the top or nested in message fields (an export response's piece content); a string field holding
 * a NUL byte, at any depth and on either path, is refused naming the field. Leaks fail under ASan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/error.h"
#include "dfc/import.pb-c.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "bulk_in.h"
#include "rpc_internal.h"

typedef Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest Req;

/* A byte buffer of data cut into slices of cut bytes. */
static grpc_byte_buffer *sliced(const uint8_t *data, size_t len, size_t cut) {
    size_t n = len / cut + 1, k = 0;
    grpc_slice *s = calloc(n, sizeof(*s));
    for (size_t off = 0; off < len; off += cut) {
        s[k++] = grpc_slice_from_copied_buffer((const char *)data + off,
                                               len - off < cut ? len - off : cut);
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(s, k);
    for (size_t i = 0; i < k; i++) {
        grpc_slice_unref(s[i]);
    }
    free(s);
    return bb;
}

static Req *decode(const uint8_t *data, size_t len, size_t cut, int *ret) {
    grpc_byte_buffer *bb = sliced(data, len, cut);
    ProtobufCMessage *m = NULL;
    *ret = dfc__rpc_unpack(bb, &dfc__dfdaemon__v1__import_persistent_cache_task_request__descriptor,
                           &m, NULL);
    grpc_byte_buffer_destroy(bb);
    return (Req *)m;
}

/* Appends a length-delimited field. */
static size_t put_len(uint8_t *p, unsigned field, const uint8_t *data, size_t len) {
    size_t n = 0;
    p[n++] = (uint8_t)(field << 3 | 2);
    for (size_t v = len;; v >>= 7) {
        p[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) {
            break;
        }
    }
    memcpy(p + n, data, len);
    return n + len;
}

static int setup(void **state) {
    grpc_init();
    dfc__rpc_bulk_min = 64;
    return 0;
}

static int teardown(void **state) {
    dfc__rpc_bulk_min = (size_t)256 << 10;
    grpc_shutdown();
    return 0;
}

static void test_bulk_matches_protobuf_c_at_any_slicing(void **state) {
    static uint8_t content[1000], wire[1100];
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (uint8_t)(i * 7);
    }
    size_t n = put_len(wire, 2, content, sizeof(content));
    for (size_t cut = 1; cut <= 1100; cut = cut * 3 + 1) {
        int r;
        Req *q = decode(wire, n, cut, &r);
        assert_int_equal(r, 0);
        assert_int_equal(q->request_case,
                         DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT);
        assert_int_equal(q->content.len, sizeof(content));
        assert_memory_equal(q->content.data, content, sizeof(content));
        protobuf_c_message_free_unpacked(&q->base, NULL);
    }
}

static void test_oneof_sibling_last_one_wins(void **state) {
    /* start, then a large content, in one message: content is the last member and wins. */
    static uint8_t content[200], wire[400];
    memset(content, 'c', sizeof(content));
    static const uint8_t start[] = {0x10, 0x02}; /* ImportStart{persistent_replica_count: 2} */
    size_t n = put_len(wire, 1, start, sizeof(start));
    n += put_len(wire + n, 2, content, sizeof(content));
    int r;
    Req *q = decode(wire, n, 7, &r);
    assert_int_equal(r, 0);
    assert_int_equal(q->request_case,
                     DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT);
    assert_int_equal(q->content.len, sizeof(content));
    protobuf_c_message_free_unpacked(&q->base, NULL);
    /* The other order: start is last and wins; the content does not leak. */
    n = put_len(wire, 2, content, sizeof(content));
    n += put_len(wire + n, 1, start, sizeof(start));
    q = decode(wire, n, 5, &r);
    assert_int_equal(r, 0);
    assert_int_equal(q->request_case,
                     DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START);
    assert_int_equal(q->start->persistent_replica_count, 2);
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static void test_repeated_bulk_field_last_one_wins(void **state) {
    static uint8_t a[100], b[150], wire[300];
    memset(a, 'a', sizeof(a));
    memset(b, 'b', sizeof(b));
    size_t n = put_len(wire, 2, a, sizeof(a));
    n += put_len(wire + n, 2, b, sizeof(b));
    int r;
    Req *q = decode(wire, n, 11, &r);
    assert_int_equal(r, 0);
    assert_int_equal(q->content.len, sizeof(b));
    assert_int_equal(q->content.data[0], 'b');
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static void test_truncated_and_garbage_are_refused(void **state) {
    static uint8_t content[100], wire[200];
    size_t n = put_len(wire, 2, content, sizeof(content));
    int r;
    Req *q = decode(wire, n - 1, 13, &r); /* cut short */
    assert_null(q);
    assert_int_equal(r, -EBADMSG);
    wire[0] = 0x13; /* field 2 with wire type 3: a group, not in proto3 */
    q = decode(wire, n, 13, &r);
    assert_null(q);
    assert_int_equal(r, -EBADMSG);
}

/* ---- string fields holding a NUL byte ---- */

static int decode_as(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                     size_t cut, struct dfc_error *err) {
    grpc_byte_buffer *bb = sliced(data, len, cut);
    ProtobufCMessage *m = NULL;
    int r = dfc__rpc_unpack(bb, desc, &m, err);
    grpc_byte_buffer_destroy(bb);
    if (r == 0) {
        assert_non_null(m);
        protobuf_c_message_free_unpacked(m, NULL);
    } else {
        assert_null(m);
    }
    return r;
}

static void test_nul_in_a_string_is_refused_naming_the_field(void **state) {
    /* protobuf-c alone would decode the tag as "a" and say nothing. */
    static const uint8_t tag[] = {'a', 0, '/', 'e', 't', 'c'};
    uint8_t start[32], wire[64];
    size_t k = put_len(start, 3, tag, sizeof(tag)); /* ImportStart.tag */
    size_t n = put_len(wire, 1, start, k);          /* ImportPersistentCacheTaskRequest.start */
    struct dfc_error err;
    const ProtobufCMessageDescriptor *req =
        &dfc__dfdaemon__v1__import_persistent_cache_task_request__descriptor;
    for (size_t cut = 1; cut <= n; cut++) {
        assert_int_equal(decode_as(req, wire, n, cut, &err), -EINVAL);
        assert_string_equal(err.msg, "field `start.tag` contains a NUL byte");
    }
    /* The same string without the NUL decodes. */
    static const uint8_t clean[] = {'a', '/', 'e', 't', 'c'};
    k = put_len(start, 3, clean, sizeof(clean));
    n = put_len(wire, 1, start, k);
    assert_int_equal(decode_as(req, wire, n, 3, &err), 0);
    /* A NUL in bytes is data, not an attack. */
    static const uint8_t bytes[] = {0, 0, 1};
    n = put_len(wire, 2, bytes, sizeof(bytes));
    assert_int_equal(decode_as(req, wire, n, 1, &err), 0);
}

static void test_nul_beside_a_bulk_field_is_refused(void **state) {
    /* Piece{digest: "sha256:\0", content: 1000 bytes}: content takes the bulk path (over
     * dfc__rpc_bulk_min here); digest is checked in the bytes gathered around it. */
    static uint8_t content[1000], wire[1100];
    static const uint8_t digest[] = {'s', 'h', 'a', '2', '5', '6', ':', 0};
    size_t n = put_len(wire, 5, digest, sizeof(digest));
    n += put_len(wire + n, 6, content, sizeof(content));
    struct dfc_error err;
    for (size_t cut = 1; cut <= 1100; cut = cut * 3 + 1) {
        assert_int_equal(decode_as(&common__v2__piece__descriptor, wire, n, cut, &err), -EINVAL);
        assert_string_equal(err.msg, "field `digest` contains a NUL byte");
    }
    n = put_len(wire, 5, digest, sizeof(digest) - 1);
    n += put_len(wire + n, 6, content, sizeof(content));
    assert_int_equal(decode_as(&common__v2__piece__descriptor, wire, n, 64, &err), 0);
}

static void test_nul_finder_survives_broken_framing(void **state) {
    /* It runs after protobuf-c accepted the bytes, but must not read past them either way. */
    static const uint8_t broken[][4] = {{0x0a, 0x7f, 'a', 0}, {0x0a, 0x80}, {0x0b, 0, 0, 0}};
    char path[64];
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
        assert_int_equal(dfc__rpc_find_nul(broken[i], 2 + i,
                                           &dfc__dfdaemon__v1__import_start__descriptor, path,
                                           sizeof(path)),
                         0);
    }
}

/* ---- a bulk field inside message fields ---- */

typedef Dfdaemon__V2__DownloadPersistentCacheTaskResponse Resp;
static const ProtobufCMessageDescriptor *const resp_desc =
    &dfdaemon__v2__download_persistent_cache_task_response__descriptor;

/* Decodes wire at every slicing in steps and checks that the message re-encodes exactly as
 * protobuf-c's own decoding of the contiguous wire does. */
static void same_as_protobuf_c(const ProtobufCMessageDescriptor *desc, const uint8_t *wire,
                               size_t n) {
    ProtobufCMessage *want = protobuf_c_message_unpack(desc, NULL, n, wire);
    assert_non_null(want);
    size_t want_len = protobuf_c_message_get_packed_size(want);
    uint8_t *want_wire = malloc(want_len + 1), *got_wire = malloc(want_len + 1);
    protobuf_c_message_pack(want, want_wire);
    for (size_t cut = 1; cut <= n; cut = cut * 2 + 1) {
        grpc_byte_buffer *bb = sliced(wire, n, cut);
        ProtobufCMessage *got = NULL;
        assert_int_equal(dfc__rpc_unpack(bb, desc, &got, NULL), 0);
        grpc_byte_buffer_destroy(bb);
        assert_int_equal(protobuf_c_message_get_packed_size(got), want_len);
        protobuf_c_message_pack(got, got_wire);
        assert_memory_equal(got_wire, want_wire, want_len);
        protobuf_c_message_free_unpacked(got, NULL);

        /* The same without the copy: the bytes left in the slices, then gathered. */
        struct dfc_rpc_bulk_in *in = NULL;
        assert_int_equal(dfc__rpc_unpack_in(sliced(wire, n, cut), desc, &got, &in, NULL), 0);
        if (in != NULL) {
            assert_int_equal(bulk_in_fill(got, in), 0);
            dfc_rpc_bulk_in_free(in);
        }
        assert_int_equal(protobuf_c_message_get_packed_size(got), want_len);
        protobuf_c_message_pack(got, got_wire);
        assert_memory_equal(got_wire, want_wire, want_len);
        protobuf_c_message_free_unpacked(got, NULL);
    }
    free(want_wire);
    free(got_wire);
    protobuf_c_message_free_unpacked(want, NULL);
}

/* Packs an export response carrying a piece of len content bytes (number, digest, cost set). */
static size_t pack_piece_response(uint8_t *out, uint32_t number, const uint8_t *content,
                                  size_t len) {
    Google__Protobuf__Duration cost = GOOGLE__PROTOBUF__DURATION__INIT;
    cost.nanos = 1500;
    Common__V2__Piece piece = COMMON__V2__PIECE__INIT;
    piece.number = number;
    piece.length = len;
    piece.digest = "crc32:8a3b2c1d";
    piece.cost = &cost;
    if (content != NULL) {
        piece.opt_content_case = COMMON__V2__PIECE__OPT_CONTENT_CONTENT;
        piece.content = (ProtobufCBinaryData){len, (uint8_t *)content};
    }
    Dfdaemon__V2__DownloadPieceFinishedResponse fin =
        DFDAEMON__V2__DOWNLOAD_PIECE_FINISHED_RESPONSE__INIT;
    fin.piece = &piece;
    Resp r = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
    r.host_id = "host-1";
    r.task_id = "task-1";
    r.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PIECE_FINISHED_RESPONSE;
    r.download_piece_finished_response = &fin;
    return protobuf_c_message_pack(&r.base, out);
}

static void test_nested_bulk_matches_protobuf_c(void **state) {
    /* 100 bytes: the piece's length varint shrinks from 2 bytes to 1 without its content;
     * 300: that of the piece-finished message too. */
    static const size_t lens[] = {64, 100, 300, 20000};
    static uint8_t content[20000], wire[20200];
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (uint8_t)(i * 13 + 1);
    }
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        size_t n = pack_piece_response(wire, 7, content, lens[k]);
        same_as_protobuf_c(resp_desc, wire, n);
        grpc_byte_buffer *bb = sliced(wire, n, 97);
        ProtobufCMessage *m = NULL;
        assert_int_equal(dfc__rpc_unpack(bb, resp_desc, &m, NULL), 0);
        grpc_byte_buffer_destroy(bb);
        const Common__V2__Piece *p = ((Resp *)m)->download_piece_finished_response->piece;
        assert_int_equal(p->number, 7);
        assert_string_equal(p->digest, "crc32:8a3b2c1d");
        assert_int_equal(p->opt_content_case, COMMON__V2__PIECE__OPT_CONTENT_CONTENT);
        assert_int_equal(p->content.len, lens[k]);
        assert_memory_equal(p->content.data, content, lens[k]);
        protobuf_c_message_free_unpacked(m, NULL);
    }
}

static void test_nested_repeats_and_oneofs_follow_protobuf_c(void **state) {
    static uint8_t content[500], wire[2000];
    memset(content, 'x', sizeof(content));
    /* The piece-finished message twice, small then holding the content: protobuf-c merges
     * them (number from the second, content kept); and the other way round. */
    size_t n = pack_piece_response(wire, 1, NULL, 0);
    n += pack_piece_response(wire + n, 2, content, sizeof(content));
    same_as_protobuf_c(resp_desc, wire, n);
    n = pack_piece_response(wire, 2, content, sizeof(content));
    n += pack_piece_response(wire + n, 1, NULL, 0);
    same_as_protobuf_c(resp_desc, wire, n);
    /* A started response (the oneof's other member) after or before the piece. */
    static const uint8_t started[] = {0x08, 0x2a}; /* content_length: 42 */
    n = pack_piece_response(wire, 3, content, sizeof(content));
    n += put_len(wire + n, 4, started, sizeof(started));
    same_as_protobuf_c(resp_desc, wire, n);
    n = put_len(wire, 4, started, sizeof(started));
    n += pack_piece_response(wire + n, 3, content, sizeof(content));
    same_as_protobuf_c(resp_desc, wire, n);
    /* The same at the top: a small content, then a large one (the large one wins). */
    static const uint8_t small[] = {1, 2, 3};
    n = put_len(wire, 2, small, sizeof(small));
    n += put_len(wire + n, 2, content, sizeof(content));
    same_as_protobuf_c(&dfc__dfdaemon__v1__import_persistent_cache_task_request__descriptor, wire,
                       n);
    /* Broken inside the nested message: refused, nothing leaks. */
    n = pack_piece_response(wire, 3, content, sizeof(content));
    grpc_byte_buffer *bb = sliced(wire, n - 200, 33); /* every enclosing length overruns */
    ProtobufCMessage *m = NULL;
    int r = dfc__rpc_unpack(bb, resp_desc, &m, NULL);
    grpc_byte_buffer_destroy(bb);
    assert_int_equal(r, -EBADMSG);
    assert_null(m);
}

/* A piece's content received with a bulk_in stays in the slices: the field keeps its length
 * and presence, the iovecs cover exactly its bytes (one per slice it spans), and the message
 * holds nothing else of it. Below the bulk threshold there is no bulk_in, and the field's own
 * memory is what dfc_rpc_bulk_in_iov gives. */
static void test_bulk_in_leaves_the_bytes_in_the_slices(void **state) {
    static uint8_t content[20000], wire[20200];
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (uint8_t)(i * 7 + 3);
    }
    size_t n = pack_piece_response(wire, 9, content, sizeof(content));
    ProtobufCMessage *m = NULL;
    struct dfc_rpc_bulk_in *in = NULL;
    assert_int_equal(dfc__rpc_unpack_in(sliced(wire, n, 97), resp_desc, &m, &in, NULL), 0);
    assert_non_null(in);
    Common__V2__Piece *p = ((Resp *)m)->download_piece_finished_response->piece;
    assert_int_equal(p->number, 9);
    assert_string_equal(p->digest, "crc32:8a3b2c1d");
    assert_int_equal(p->opt_content_case, COMMON__V2__PIECE__OPT_CONTENT_CONTENT);
    assert_int_equal(p->content.len, sizeof(content));
    assert_null(p->content.data);
    struct iovec one;
    const struct iovec *iov;
    int k = dfc_rpc_bulk_in_iov(in, &p->content, &one, &iov);
    assert_ptr_not_equal(iov, &one);
    assert_in_range(k, sizeof(content) / 97, sizeof(content) / 97 + 2);
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        assert_in_range(iov[i].iov_len, 1, 97);
        assert_memory_equal(iov[i].iov_base, content + at, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    assert_int_equal(at, sizeof(content));
    /* Another field is not in's: its own memory comes back. */
    ProtobufCBinaryData other = {3, (uint8_t *)"abc"};
    assert_int_equal(dfc_rpc_bulk_in_iov(in, &other, &one, &iov), 1);
    assert_ptr_equal(iov, &one);
    assert_ptr_equal(one.iov_base, other.data);
    dfc_rpc_bulk_in_free(in); /* before the message: either order is fine */
    protobuf_c_message_free_unpacked(m, NULL);

    n = pack_piece_response(wire, 9, content, 40); /* a message below dfc__rpc_bulk_min */
    assert_int_equal(dfc__rpc_unpack_in(sliced(wire, n, 7), resp_desc, &m, &in, NULL), 0);
    assert_null(in);
    p = ((Resp *)m)->download_piece_finished_response->piece;
    assert_int_equal(dfc_rpc_bulk_in_iov(in, &p->content, &one, &iov), 1);
    assert_int_equal(one.iov_len, 40);
    assert_memory_equal(one.iov_base, content, 40);
    protobuf_c_message_free_unpacked(m, NULL);

    /* Refused input: nothing is returned and the byte buffer is not leaked (ASan). */
    assert_int_equal(dfc__rpc_unpack_in(sliced(wire, n - 1, 7), resp_desc, &m, &in, NULL),
                     -EBADMSG);
    assert_null(in);
    n = pack_piece_response(wire, 9, content, sizeof(content));
    assert_int_equal(dfc__rpc_unpack_in(sliced(wire, n - 1, 97), resp_desc, &m, &in, NULL),
                     -EBADMSG);
    assert_null(in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_matches_protobuf_c_at_any_slicing),
        cmocka_unit_test(test_oneof_sibling_last_one_wins),
        cmocka_unit_test(test_repeated_bulk_field_last_one_wins),
        cmocka_unit_test(test_truncated_and_garbage_are_refused),
        cmocka_unit_test(test_nul_in_a_string_is_refused_naming_the_field),
        cmocka_unit_test(test_nul_beside_a_bulk_field_is_refused),
        cmocka_unit_test(test_nul_finder_survives_broken_framing),
        cmocka_unit_test(test_nested_bulk_matches_protobuf_c),
        cmocka_unit_test(test_nested_repeats_and_oneofs_follow_protobuf_c),
        cmocka_unit_test(test_bulk_in_leaves_the_bytes_in_the_slices),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
