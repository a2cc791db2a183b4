/*
 * Tests for daemon/p2p/vortex.c and vortex_client.c: byte-exact frames written out by hand
 * from docs/dragonfly-compat.md ("Vortex": the 74-byte request, the piece-7 content packet,
 * the error packet), every decoder error, and the client against a real TCP server thread on
 * 127.0.0.1 that sends scripted answers (good, corrupt, hostile, truncated, silent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "p2p/vortex.h"
#include "p2p/vortex_client.h"

#define TASK    "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"
#define MiB     ((uint64_t)1 << 20)
#define SEC     INT64_C(1000000000)
#define TIMEOUT (10 * SEC) /* generous: sanitizer runs are slow; never asserted as a duration */

/* request (id 0x2a, task TASK, piece 7), 74 bytes. */
static const uint8_t request_packet[] = {
    0x2a, 0x04, 0x00, 0x00, 0x00, 0x44, /* id, tag 4, length 68 */
    'e',  '2',  'd',  '0',  'f',  'e',  '1', '5', '8',  '5',  'a',  '6',  '3', 'e',
    'c',  '6',  '0',  '0',  '9',  'c',  '8', '0', '1',  '6',  'f',  'f',  '8', 'd',
    'd',  'a',  '8',  'b',  '1',  '7',  '7', '1', '9',  'a',  '6',  '3',  '7', '4',
    '0',  '5',  'a',  '4',  'e',  '2',  '3', 'c', '0',  'f',  'f',  '8',  '1', '3',
    '3',  '9',  '1',  '4',  '8',  '2',  '4', '9', 0x00, 0x00, 0x00, 0x07, /* piece 7 */
};

/* The content packet for piece 7 (offset 7 * 4 MiB, length 5, the bytes "hello"), digest
 * "crc32:907060870", parent "", traffic REMOTE_PEER, cost 0 s, created 1787000000. */
static const uint8_t content_packet[] = {
    0x99, 0x05, 0x00, 0x00, 0x00, 0x40,             /* id, tag 5, length 64 */
    0x00, 0x00, 0x00, 0x3c,                         /* metadata_length 60 */
    0x00, 0x00, 0x00, 0x07,                         /* number */
    0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0x00, 0x00, /* offset */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, /* length */
    0x00, 0x00, 0x00, 0x0f,                         /* digest_len 15 */
    'c',  'r',  'c',  '3',  '2',  ':',  '9',  '0',  '7',  '0',
    '6',  '0',  '8',  '7',  '0',  0x00, 0x00, 0x00, 0x00, /* parent_id_len 0 */
    0x01,                                                 /* traffic_type */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       /* cost_secs */
    0x00, 0x00, 0x00, 0x00, 0x6a, 0x83, 0x74, 0xc0,       /* created_at */
};

static const uint8_t hello[] = {'h', 'e', 'l', 'l', 'o'}; /* the piece's raw bytes */

#define ERROR_MSG "piece " TASK "-7 not found"

static const uint8_t error_head[] = {0x11, 0xff, 0x00, 0x00, 0x00, 0x53, 0x02};

static struct dfd_vortex_piece piece7(void) {
    return (struct dfd_vortex_piece){
        .number = 7,
        .offset = 7 * 4 * MiB,
        .length = 5,
        .digest = "crc32:907060870",
        .digest_len = 15,
        .parent_id = "",
        .parent_id_len = 0,
        .traffic_type = 1,
        .cost_secs = 0,
        .created_at = 1787000000,
    };
}

/*---- codec ----*/

static void test_header(void **state) {
    uint8_t b[DFD_VORTEX_HEADER_LEN];
    struct dfd_vortex_header h = {.packet_id = 0xab, .tag = 0xff, .length = 0xfffffffe};
    dfd_vortex_header_encode(&h, b);
    const uint8_t want[] = {0xab, 0xff, 0xff, 0xff, 0xff, 0xfe};
    assert_memory_equal(b, want, sizeof(want));
    struct dfd_vortex_header g;
    dfd_vortex_header_decode(b, &g);
    assert_int_equal(g.packet_id, 0xab);
    assert_int_equal(g.tag, 0xff);
    assert_true(g.length == 0xfffffffe);
}

static void test_request_bytes(void **state) {
    struct dfc_error err;
    uint8_t b[DFD_VORTEX_REQUEST_PACKET_LEN];
    assert_int_equal(sizeof(request_packet), 74);
    assert_int_equal(dfd_vortex_request_encode(0x2a, TASK, 7, b, &err), 0);
    assert_memory_equal(b, request_packet, sizeof(request_packet));
    char id[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t n = 0;
    assert_int_equal(dfd_vortex_request_decode(request_packet + 6, 68, id, &n, &err), 0);
    assert_string_equal(id, TASK);
    assert_int_equal(n, 7);
    /* The encoder refuses a task id that the decoder would. */
    assert_int_equal(dfd_vortex_request_encode(0, "e2d0fe", 7, b, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "task_id"));
    assert_int_equal(dfd_vortex_request_encode(0, TASK "0", 7, b, &err), -EINVAL);
}

static void test_request_decode_errors(void **state) {
    struct dfc_error err;
    char id[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t n = 0;
    const uint8_t *v = request_packet + 6;
    assert_int_equal(dfd_vortex_request_decode(v, 67, id, &n, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "length"));
    uint8_t longer[69];
    memcpy(longer, v, 68);
    longer[68] = 0;
    assert_int_equal(dfd_vortex_request_decode(longer, 69, id, &n, &err), -EPROTO);
    assert_int_equal(dfd_vortex_request_decode(v, 0, id, &n, &err), -EPROTO);
    uint8_t bad[68];
    memcpy(bad, v, 68);
    bad[10] = 'g'; /* not hex */
    assert_int_equal(dfd_vortex_request_decode(bad, 68, id, &n, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "task_id"));
    bad[10] = 'E'; /* uppercase hex is not a task id */
    assert_int_equal(dfd_vortex_request_decode(bad, 68, id, &n, &err), -EINVAL);
    bad[10] = '\0'; /* a NUL inside the id */
    assert_int_equal(dfd_vortex_request_decode(bad, 68, id, &n, &err), -EINVAL);
    bad[10] = '/';
    assert_int_equal(dfd_vortex_request_decode(bad, 68, id, &n, &err), -EINVAL);
}

static void test_content_bytes(void **state) {
    struct dfc_error err;
    assert_int_equal(sizeof(content_packet), 70);
    struct dfd_vortex_piece p = piece7();
    uint8_t b[128];
    size_t len = 0;
    assert_int_equal(dfd_vortex_content_encode(0x99, &p, b, sizeof(b), &len, &err), 0);
    assert_int_equal(len, sizeof(content_packet));
    assert_memory_equal(b, content_packet, sizeof(content_packet));
    struct dfd_vortex_piece d;
    assert_int_equal(dfd_vortex_content_decode(content_packet + 6, 64, &d, &err), 0);
    assert_int_equal(d.number, 7);
    assert_true(d.offset == 7 * 4 * MiB);
    assert_true(d.length == 5);
    assert_int_equal(d.digest_len, 15);
    assert_memory_equal(d.digest, "crc32:907060870", 15);
    assert_int_equal(d.parent_id_len, 0);
    assert_int_equal(d.traffic_type, 1);
    assert_true(d.cost_secs == 0);
    assert_true(d.created_at == 1787000000);
    /* A parent id and a negative created_at round-trip. */
    p.parent_id = "peer-1";
    p.parent_id_len = 6;
    p.created_at = -5;
    p.cost_secs = UINT64_MAX;
    assert_int_equal(dfd_vortex_content_encode(1, &p, b, sizeof(b), &len, &err), 0);
    assert_int_equal(len, sizeof(content_packet) + 6);
    assert_int_equal(dfd_vortex_content_decode(b + 6, len - 6, &d, &err), 0);
    assert_memory_equal(d.parent_id, "peer-1", 6);
    assert_true(d.created_at == -5);
    assert_true(d.cost_secs == UINT64_MAX);
}

static void test_content_encode_errors(void **state) {
    struct dfc_error err;
    struct dfd_vortex_piece p = piece7();
    uint8_t b[128];
    size_t len = 0;
    assert_int_equal(dfd_vortex_content_encode(0, &p, b, sizeof(content_packet) - 1, &len, &err),
                     -ENOBUFS);
    static char big[DFD_VORTEX_METADATA_MAX];
    memset(big, 'x', sizeof(big));
    p.parent_id = big;
    p.parent_id_len = DFD_VORTEX_METADATA_MAX - 45 - 15 + 1; /* one byte over the bound */
    assert_int_equal(dfd_vortex_content_encode(0, &p, b, sizeof(b), &len, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "metadata"));
    p.parent_id_len = UINT32_MAX;
    assert_int_equal(dfd_vortex_content_encode(0, &p, b, sizeof(b), &len, &err), -EINVAL);
    /* Exactly at the bound fits. */
    static uint8_t out[DFD_VORTEX_HEADER_LEN + 4 + DFD_VORTEX_METADATA_MAX];
    p.parent_id_len = DFD_VORTEX_METADATA_MAX - 45 - 15;
    assert_int_equal(dfd_vortex_content_encode(0, &p, out, sizeof(out), &len, &err), 0);
    assert_int_equal(len, sizeof(out));
    struct dfd_vortex_piece d;
    assert_int_equal(dfd_vortex_content_decode(out + 6, len - 6, &d, &err), 0);
    assert_int_equal(d.parent_id_len, p.parent_id_len);
}

/* Writes v as big-endian at p. */
static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void test_content_decode_errors(void **state) {
    struct dfc_error err;
    struct dfd_vortex_piece d;
    const uint8_t *v = content_packet + 6; /* the 64-byte value */
    /* Too short for metadata_length. */
    for (size_t n = 0; n < 4; n++) {
        assert_int_equal(dfd_vortex_content_decode(v, n, &d, &err), -EPROTO);
    }
    assert_non_null(strstr(err.msg, "metadata_length"));
    /* Every cut of the value: metadata_length no longer matches. */
    for (size_t n = 4; n < 64; n++) {
        assert_int_equal(dfd_vortex_content_decode(v, n, &d, &err), -EPROTO);
    }
    /* Every cut with metadata_length adjusted to match: the metadata itself is short. */
    uint8_t b[80];
    for (size_t n = 4; n < 64; n++) {
        memcpy(b, v, n);
        be32(b, (uint32_t)(n - 4));
        assert_int_equal(dfd_vortex_content_decode(b, n, &d, &err), -EPROTO);
    }
    /* metadata_length larger than the value. */
    memcpy(b, v, 64);
    be32(b, 61);
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "metadata_length 61"));
    /* metadata_length beyond our bound, whatever the value holds. */
    be32(b, DFD_VORTEX_METADATA_MAX + 1);
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    be32(b, UINT32_MAX);
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    /* Trailing bytes after created_at, with metadata_length counting them. */
    memcpy(b, v, 64);
    b[64] = 0;
    be32(b, 61);
    assert_int_equal(dfd_vortex_content_decode(b, 65, &d, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "trailing"));
    /* digest_len that would overflow a position. */
    memcpy(b, v, 64);
    be32(b + 4 + 20, UINT32_MAX);
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "digest_len"));
    be32(b + 4 + 20, 16); /* one more than there is before parent_id_len fits */
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    /* parent_id_len that overflows. */
    memcpy(b, v, 64);
    be32(b + 4 + 24 + 15, UINT32_MAX);
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "parent_id_len"));
    be32(b + 4 + 24 + 15, 1); /* eats into traffic_type..created_at */
    assert_int_equal(dfd_vortex_content_decode(b, 64, &d, &err), -EPROTO);
}

static void test_error_bytes(void **state) {
    struct dfc_error err;
    uint8_t b[128];
    size_t len = 0;
    assert_int_equal(dfd_vortex_error_encode(0x11, DFD_VORTEX_ERR_NOT_FOUND, ERROR_MSG, b,
                                             sizeof(b), &len, &err),
                     0);
    assert_int_equal(len, 6 + 1 + 82);
    assert_memory_equal(b, error_head, sizeof(error_head));
    assert_memory_equal(b + 7, "piece e2d0fe", 12);
    assert_memory_equal(b + 7, ERROR_MSG, 82);
    uint8_t code = 0;
    const char *msg = NULL;
    size_t mlen = 0;
    assert_int_equal(dfd_vortex_error_decode(b + 6, 83, &code, &msg, &mlen, &err), 0);
    assert_int_equal(code, 2);
    assert_int_equal(mlen, 82);
    assert_memory_equal(msg, ERROR_MSG, 82);
    /* A message with no room is cut, and never inside a UTF-8 sequence. */
    assert_int_equal(dfd_vortex_error_encode(1, 3, "abc\xc3\xa9z", b, 6 + 1 + 4, &len, &err), 0);
    assert_int_equal(len, 6 + 1 + 3);
    assert_memory_equal(b,
                        "\x01\xff\x00\x00\x00\x04\x03"
                        "abc",
                        10);
    assert_int_equal(dfd_vortex_error_encode(1, 3, NULL, b, 7, &len, &err), 0);
    assert_int_equal(len, 7);
    assert_int_equal(dfd_vortex_error_encode(1, 3, "x", b, 6, &len, &err), -ENOBUFS);
    /* Never more than DFD_VORTEX_ERROR_MAX bytes of message. */
    static char huge[DFD_VORTEX_ERROR_MAX * 2];
    memset(huge, 'm', sizeof(huge) - 1);
    static uint8_t out[sizeof(huge) + 16];
    assert_int_equal(dfd_vortex_error_encode(1, 0, huge, out, sizeof(out), &len, &err), 0);
    assert_int_equal(len, 6 + 1 + DFD_VORTEX_ERROR_MAX);
}

static void test_error_decode_errors(void **state) {
    struct dfc_error err;
    uint8_t code;
    const char *msg;
    size_t mlen;
    static uint8_t v[DFD_VORTEX_ERROR_MAX + 2];
    assert_int_equal(dfd_vortex_error_decode(v, 0, &code, &msg, &mlen, &err), -EPROTO);
    assert_int_equal(dfd_vortex_error_decode(v, sizeof(v), &code, &msg, &mlen, &err), -EPROTO);
    assert_int_equal(dfd_vortex_error_decode(v, sizeof(v) - 1, &code, &msg, &mlen, &err), 0);
    assert_int_equal(mlen, DFD_VORTEX_ERROR_MAX);
}

/*---- client against a scripted server ----*/

/* A one-connection TCP server on 127.0.0.1:0: accepts, reads the 74-byte request, sends
 * answer, then closes at once or, with hold, waits for the client to close first. */
struct scripted {
    int lfd;
    uint16_t port;
    const uint8_t *answer;
    size_t answer_len;
    bool hold;
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    size_t req_len;
    pthread_t th;
};

static void *scripted_main(void *arg) {
    struct scripted *s = arg;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) {
        return NULL;
    }
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (s->req_len < sizeof(s->req)) {
        ssize_t k = recv(fd, s->req + s->req_len, sizeof(s->req) - s->req_len, 0);
        if (k <= 0) {
            break;
        }
        s->req_len += (size_t)k;
    }
    size_t off = 0;
    while (off < s->answer_len) {
        ssize_t k = send(fd, s->answer + off, s->answer_len - off, MSG_NOSIGNAL);
        if (k <= 0) {
            break;
        }
        off += (size_t)k;
    }
    if (s->hold) {
        char c;
        while (recv(fd, &c, 1, 0) > 0) {
        }
    }
    close(fd);
    return NULL;
}

static int listen_local(uint16_t *ret_port, bool do_listen) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (do_listen) {
        assert_int_equal(listen(fd, 4), 0);
    }
    socklen_t sl = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
    *ret_port = ntohs(a.sin_port);
    return fd;
}

static void scripted_start(struct scripted *s, const uint8_t *answer, size_t len, bool hold) {
    memset(s, 0, sizeof(*s));
    s->lfd = listen_local(&s->port, true);
    s->answer = answer;
    s->answer_len = len;
    s->hold = hold;
    assert_int_equal(pthread_create(&s->th, NULL, scripted_main, s), 0);
}

static void scripted_join(struct scripted *s) {
    assert_int_equal(pthread_join(s->th, NULL), 0);
    close(s->lfd);
}

/* Fetches piece 7 (offset 7 * 4 MiB, length 5) from a server that answers with answer. */
static int fetch_with(const uint8_t *answer, size_t len, bool hold, int64_t timeout, uint8_t got[5],
                      struct dfc_error *err) {
    struct scripted s;
    scripted_start(&s, answer, len, hold);
    struct dfd_vortex_fetched f = {0};
    int r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", s.port, TASK, 7, 7 * 4 * MiB, 5, got, timeout,
                             &f, err);
    scripted_join(&s);
    /* Whatever the answer, the request on the wire was tag 4, length 68, TASK, piece 7. */
    assert_int_equal(s.req_len, 74);
    assert_memory_equal(s.req + 1, request_packet + 1, 73);
    if (r == 0) {
        assert_int_equal(f.crc32, 907060870u);
    }
    return r;
}

/* The content packet of piece p followed by tail (the "raw bytes"), into out. */
static size_t content_with(const struct dfd_vortex_piece *p, const char *tail, size_t tail_len,
                           uint8_t *out, size_t size) {
    struct dfc_error err;
    size_t len = 0;
    assert_int_equal(dfd_vortex_content_encode(0x42, p, out, size, &len, &err), 0);
    assert_true(len + tail_len <= size);
    memcpy(out + len, tail, tail_len);
    return len + tail_len;
}

static void test_fetch_good(void **state) {
    uint8_t answer[128];
    memcpy(answer, content_packet, sizeof(content_packet));
    memcpy(answer + sizeof(content_packet), hello, 5);
    uint8_t got[5] = {0};
    struct dfc_error err = {0};
    assert_int_equal(fetch_with(answer, sizeof(content_packet) + 5, false, TIMEOUT, got, &err), 0);
    assert_memory_equal(got, "hello", 5);
}

static void test_fetch_wrong_crc(void **state) {
    struct dfd_vortex_piece p = piece7();
    uint8_t answer[128];
    size_t n = content_with(&p, "hellO", 5, answer, sizeof(answer));
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), DFC_E_DATA_LOSS);
    assert_non_null(strstr(err.msg, "digest mismatch"));
    assert_non_null(strstr(err.msg, "vortex 127.0.0.1:"));
    assert_non_null(strstr(err.msg, "piece " TASK "-7"));
    /* A digest "crc32:0907060870" is not the canonical form of the same number: refused. */
    p.digest = "crc32:0907060870";
    p.digest_len = 16;
    n = content_with(&p, "hello", 5, answer, sizeof(answer));
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), DFC_E_DATA_LOSS);
}

struct collected {
    char bytes[8];
    size_t n;
};

static int collect(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    struct collected *c = arg;
    (void)err;
    assert_int_equal(at, c->n);
    assert_true(c->n + n <= sizeof(c->bytes));
    memcpy(c->bytes + c->n, data, n);
    c->n += n;
    return 0;
}

/* Through a sink (2-byte buffer): the good piece arrives in 3 chunks with its CRC; a corrupt
 * one reaches the sink, unverified, and the fetch still ends DATA_LOSS, so the caller never
 * counts it. */
static void test_fetch_to_a_sink_checks_the_crc(void **state) {
    struct dfd_vortex_piece p = piece7();
    for (int bad = 0; bad < 2; bad++) {
        uint8_t answer[128];
        size_t n = content_with(&p, bad ? "hellO" : "hello", 5, answer, sizeof(answer));
        struct scripted s;
        scripted_start(&s, answer, n, false);
        struct collected c = {.n = 0};
        struct dfd_vortex_sink sink = {.arg = &c, .write = collect};
        uint8_t chunk[2];
        struct dfd_vortex_fetched f = {0};
        struct dfc_error err = {0};
        int r = dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", s.port, TASK, 7, 7 * 4 * MiB, 5, &sink,
                                    chunk, sizeof(chunk), TIMEOUT, &f, &err);
        scripted_join(&s);
        assert_int_equal(c.n, 5);
        if (bad) {
            assert_int_equal(r, DFC_E_DATA_LOSS);
            assert_non_null(strstr(err.msg, "digest mismatch"));
        } else {
            assert_int_equal(r, 0);
            assert_int_equal(f.crc32, 907060870u);
            assert_memory_equal(c.bytes, "hello", 5);
        }
    }
}

/* A sink that lends its own buffers (two of 2 bytes): each chunk comes in one of them and is
 * handed back by write(), and the one a cut connection left half-filled by release(). */
struct lender {
    uint8_t bufs[2][2];
    bool lent[2];
    unsigned taken, written, released;
    char bytes[8];
    size_t n;
};

static void *lend(void *arg) {
    struct lender *l = arg;
    int i = l->lent[0] ? 1 : 0;
    assert_false(l->lent[i]);
    l->lent[i] = true;
    l->taken++;
    return l->bufs[i];
}

static void give_back(struct lender *l, const void *buf) {
    int i = buf == l->bufs[0] ? 0 : 1;
    assert_ptr_equal(buf, l->bufs[i]);
    assert_true(l->lent[i]);
    l->lent[i] = false;
}

static int lender_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    struct lender *l = arg;
    (void)err;
    assert_int_equal(at, l->n);
    assert_true(l->n + n <= sizeof(l->bytes));
    memcpy(l->bytes + l->n, data, n);
    l->n += n;
    l->written++;
    give_back(l, data);
    return 0;
}

static void lender_release(void *arg, void *buf) {
    struct lender *l = arg;
    l->released++;
    give_back(l, buf);
}

static void test_fetch_to_a_sink_with_its_own_buffers(void **state) {
    struct dfd_vortex_piece p = piece7();
    for (int cut = 0; cut < 2; cut++) {
        uint8_t answer[128];
        size_t n = content_with(&p, "hello", cut ? 3 : 5, answer, sizeof(answer));
        struct scripted s;
        scripted_start(&s, answer, n, false);
        struct lender l = {.n = 0};
        struct dfd_vortex_sink sink = {
            .arg = &l, .write = lender_write, .buffer = lend, .release = lender_release};
        struct dfd_vortex_fetched f = {0};
        struct dfc_error err = {0};
        int r = dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", s.port, TASK, 7, 7 * 4 * MiB, 5, &sink,
                                    NULL, 2, TIMEOUT, &f, &err);
        scripted_join(&s);
        assert_false(l.lent[0] || l.lent[1]); /* every buffer came back */
        assert_int_equal(l.taken, l.written + l.released);
        if (cut) {
            assert_int_equal(r, -EPROTO);
            assert_int_equal(l.written, 1); /* "he"; the chunk "l" was cut short */
            assert_int_equal(l.released, 1);
        } else {
            assert_int_equal(r, 0);
            assert_int_equal(l.written, 3);
            assert_int_equal(l.released, 0);
            assert_memory_equal(l.bytes, "hello", 5);
        }
    }
    /* Its own buffers and the caller's, or its own without a release, are refused. */
    uint8_t chunk[2];
    struct lender l = {.n = 0};
    struct dfd_vortex_sink both = {
        .arg = &l, .write = lender_write, .buffer = lend, .release = lender_release};
    struct dfd_vortex_sink no_release = {.arg = &l, .write = lender_write, .buffer = lend};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", 9, TASK, 7, 0, 5, &both, chunk, 2,
                                         TIMEOUT, NULL, &err),
                     -EINVAL);
    assert_int_equal(dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", 9, TASK, 7, 0, 5, &no_release,
                                         NULL, 2, TIMEOUT, NULL, &err),
                     -EINVAL);
    assert_int_equal(l.taken, 0);
}

static void test_fetch_empty_digest(void **state) {
    struct dfd_vortex_piece p = piece7();
    p.digest = "";
    p.digest_len = 0;
    uint8_t answer[128];
    size_t n = content_with(&p, "hello", 5, answer, sizeof(answer));
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), DFC_E_DATA_LOSS);
    assert_non_null(strstr(err.msg, "empty digest"));
}

static void test_fetch_malformed_digest(void **state) {
    static const char *const bad[] = {"sha256:abc",         "crc32:", "crc32:12a",
                                      "crc32:123456789012", "crc32",  "CRC32:907060870"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dfd_vortex_piece p = piece7();
        p.digest = bad[i];
        p.digest_len = (uint32_t)strlen(bad[i]);
        uint8_t answer[128];
        size_t n = content_with(&p, "hello", 5, answer, sizeof(answer));
        uint8_t got[5];
        struct dfc_error err = {0};
        assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), DFC_E_DATA_LOSS);
        assert_non_null(strstr(err.msg, "crc32:<decimal>"));
    }
}

static void test_fetch_huge_length(void **state) {
    /* A content header claiming 4 GiB of value: refused from the header, nothing read. */
    static const uint8_t content4g[] = {0x01, 0x05, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(fetch_with(content4g, sizeof(content4g), true, TIMEOUT, got, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "content packet length 4294967295"));
    /* An error header claiming 4 GiB. */
    static const uint8_t error4g[] = {0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 2};
    assert_int_equal(fetch_with(error4g, sizeof(error4g), true, TIMEOUT, got, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "error packet length"));
    /* Too short to hold metadata_length, and an empty error packet. */
    static const uint8_t content3[] = {0x01, 0x05, 0, 0, 0, 3, 0, 0, 0};
    assert_int_equal(fetch_with(content3, sizeof(content3), true, TIMEOUT, got, &err), -EPROTO);
    static const uint8_t error0[] = {0x01, 0xff, 0, 0, 0, 0};
    assert_int_equal(fetch_with(error0, sizeof(error0), true, TIMEOUT, got, &err), -EPROTO);
}

static void test_fetch_wrong_piece(void **state) {
    uint8_t answer[128];
    uint8_t got[5];
    struct dfc_error err = {0};
    struct dfd_vortex_piece p = piece7();
    p.number = 8;
    size_t n = content_with(&p, "hello", 5, answer, sizeof(answer));
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), -EPROTO);
    assert_non_null(strstr(err.msg, "metadata names piece 8"));
    p = piece7();
    p.length = 4;
    n = content_with(&p, "hell", 4, answer, sizeof(answer));
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), -EPROTO);
    p = piece7();
    p.length = UINT64_MAX; /* never read into a 5-byte buffer */
    n = content_with(&p, "hello", 5, answer, sizeof(answer));
    assert_int_equal(fetch_with(answer, n, true, TIMEOUT, got, &err), -EPROTO);
    p = piece7();
    p.offset = 0;
    n = content_with(&p, "hello", 5, answer, sizeof(answer));
    assert_int_equal(fetch_with(answer, n, false, TIMEOUT, got, &err), -EPROTO);
    /* A request packet back, or Close, is not an answer. */
    assert_int_equal(fetch_with(request_packet, sizeof(request_packet), true, TIMEOUT, got, &err),
                     -EPROTO);
    assert_non_null(strstr(err.msg, "unexpected tag 4"));
    /* Metadata that does not decode (metadata_length disagrees with the header). */
    memcpy(answer, content_packet, sizeof(content_packet));
    be32(answer + 6, 59);
    assert_int_equal(fetch_with(answer, sizeof(content_packet), true, TIMEOUT, got, &err), -EPROTO);
}

static void test_fetch_truncated(void **state) {
    uint8_t answer[128];
    memcpy(answer, content_packet, sizeof(content_packet));
    memcpy(answer + sizeof(content_packet), hello, 3);
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(fetch_with(answer, sizeof(content_packet) + 3, false, TIMEOUT, got, &err),
                     -EPROTO);
    assert_non_null(strstr(err.msg, "closed after 3 of 5 bytes"));
    /* Cut inside the header and inside the metadata. */
    assert_int_equal(fetch_with(answer, 4, false, TIMEOUT, got, &err), -EPROTO);
    assert_int_equal(fetch_with(answer, 30, false, TIMEOUT, got, &err), -EPROTO);
    /* No answer at all: the server reads the request and closes. */
    assert_int_equal(fetch_with(answer, 0, false, TIMEOUT, got, &err), -EPROTO);
}

static void test_fetch_not_found(void **state) {
    uint8_t answer[128];
    size_t len = 0;
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_error_encode(0x11, DFD_VORTEX_ERR_NOT_FOUND, ERROR_MSG, answer,
                                             sizeof(answer), &len, &err),
                     0);
    uint8_t got[5];
    assert_int_equal(fetch_with(answer, len, false, TIMEOUT, got, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "NotFound"));
    assert_non_null(strstr(err.msg, ERROR_MSG));
    /* Other codes; a control character in the message is not passed through. */
    assert_int_equal(dfd_vortex_error_encode(0x11, DFD_VORTEX_ERR_INTERNAL, "disk\nfailed", answer,
                                             sizeof(answer), &len, &err),
                     0);
    assert_int_equal(fetch_with(answer, len, false, TIMEOUT, got, &err), DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "disk?failed"));
    assert_int_equal(dfd_vortex_error_encode(0x11, 200, "", answer, sizeof(answer), &len, &err), 0);
    assert_int_equal(fetch_with(answer, len, false, TIMEOUT, got, &err), DFC_E_UNKNOWN);
}

static void test_fetch_silent_server(void **state) {
    uint8_t got[5];
    struct dfc_error err = {0};
    /* The server accepts and reads the request, then says nothing until the client leaves. */
    assert_int_equal(fetch_with(NULL, 0, true, SEC / 5, got, &err), -ETIMEDOUT);
    assert_non_null(strstr(err.msg, "timed out reading the header"));
    /* Silent after the metadata: the bytes never come. */
    assert_int_equal(fetch_with(content_packet, sizeof(content_packet), true, SEC / 5, got, &err),
                     -ETIMEDOUT);
    assert_non_null(strstr(err.msg, "the piece"));
}

static void test_fetch_refused(void **state) {
    /* A bound socket that does not listen: the kernel answers a SYN with RST. */
    uint16_t port;
    int fd = listen_local(&port, false);
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, TASK, 7, 0, 5, got, TIMEOUT, NULL, &err),
        -ECONNREFUSED);
    assert_non_null(strstr(err.msg, "connect"));
    close(fd);
}

static void test_fetch_bad_arguments(void **state) {
    uint8_t got[5];
    struct dfc_error err = {0};
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "127.0.0.1", 1, "e2d0", 7, 0, 5, got, TIMEOUT, NULL, &err),
        -EINVAL);
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "localhost", 1, TASK, 7, 0, 5, got, TIMEOUT, NULL, &err),
        -EINVAL);
    assert_non_null(strstr(err.msg, "IPv4 or IPv6"));
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "127.0.0.1", 1, TASK, 7, 0, 5, NULL, TIMEOUT, NULL, &err),
        -EINVAL);
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "127.0.0.1", 1, TASK, 7, 0, 5, got, 0, NULL, &err), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_request_bytes),
        cmocka_unit_test(test_request_decode_errors),
        cmocka_unit_test(test_content_bytes),
        cmocka_unit_test(test_content_encode_errors),
        cmocka_unit_test(test_content_decode_errors),
        cmocka_unit_test(test_error_bytes),
        cmocka_unit_test(test_error_decode_errors),
        cmocka_unit_test(test_fetch_good),
        cmocka_unit_test(test_fetch_wrong_crc),
        cmocka_unit_test(test_fetch_to_a_sink_checks_the_crc),
        cmocka_unit_test(test_fetch_to_a_sink_with_its_own_buffers),
        cmocka_unit_test(test_fetch_empty_digest),
        cmocka_unit_test(test_fetch_malformed_digest),
        cmocka_unit_test(test_fetch_huge_length),
        cmocka_unit_test(test_fetch_wrong_piece),
        cmocka_unit_test(test_fetch_truncated),
        cmocka_unit_test(test_fetch_not_found),
        cmocka_unit_test(test_fetch_silent_server),
        cmocka_unit_test(test_fetch_refused),
        cmocka_unit_test(test_fetch_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
