/*
 * Tests for daemon/p2p/vortex_server.c: a real store in a temp dir (a file imported with
 * dfd_storage_import_fd) and a real server on 127.0.0.1:0, read with the real client
 * (vortex_client.c) and with raw sockets that send what a hostile peer could: every piece
 * byte-identical, NotFound, hostile headers answered with an Error frame, a stalled request
 * closed after request_timeout, a peer that reads too slowly reset after answer_timeout,
 * connections over max_conns closed at once, stop with connections open, parallel clients; a
 * piece being delivered answered Busy to another peer; the verified pieces of a shared replica
 * still downloading.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "p2p/vortex.h"
#include "p2p/vortex_client.h"
#include "p2p/vortex_server.h"
#include "storage/storage.h"
#include "test_support.h"

#define MiB     ((uint64_t)1 << 20)
#define SEC     INT64_C(1000000000)
#define TIMEOUT (20 * SEC) /* generous: sanitizer runs are slow; never asserted as a duration */
#define CONTENT (2 * 4 * MiB + 12345) /* three pieces of 4 MiB, the last one short */
#define OTHER   "00000000000000000000000000000000000000000000000000000000000000aa"

struct fx {
    char dir[256];
    char store[300];
    struct dfd_storage *s;
    uint8_t *content;
    struct dfd_task_meta task;
    struct dfd_piece_meta *pieces;
    size_t npieces;
    struct dfd_vortex_server *v;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "vortex");
    snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    f->content = malloc(CONTENT);
    uint32_t x = 12345;
    for (uint64_t i = 0; i < CONTENT; i++) {
        x = x * 1103515245 + 12345;
        f->content[i] = (uint8_t)(x >> 16);
    }
    char src[400];
    snprintf(src, sizeof(src), "%s/src", f->dir);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->content, CONTENT), (ssize_t)CONTENT);
    struct dfd_import_params p = {.piece_length = 4 * MiB,
                                  .replica_count = 1,
                                  .ttl_ns = 3600 * SEC,
                                  .persistent = true,
                                  .expected_length = -1};
    bool existed = false;
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, INT64_C(1700000000) * SEC, NULL, NULL,
                                           &f->task, &existed, NULL, &err),
                     0);
    close(fd);
    assert_int_equal(dfd_storage_pieces(f->s, f->task.id, &f->pieces, &f->npieces, &err), 0);
    assert_int_equal(f->npieces, 3);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfd_vortex_server_stop(f->v);
    free(f->pieces);
    dfd_task_meta_done(&f->task);
    dfd_storage_close(f->s);
    free(f->content);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static void start_per_ip(struct fx *f, unsigned max_conns, unsigned per_ip, int64_t request_timeout,
                         int64_t answer_timeout) {
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .port = 0,
                                       .max_conns = max_conns,
                                       .max_conns_per_ip = per_ip,
                                       .request_timeout_ns = request_timeout,
                                       .answer_timeout_ns = answer_timeout,
                                       .parent_id = "host-1"};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &f->v, &err), 0);
    assert_true(dfd_vortex_server_port(f->v) != 0);
}

static void start_answer(struct fx *f, unsigned max_conns, int64_t request_timeout,
                         int64_t answer_timeout) {
    start_per_ip(f, max_conns, 0, request_timeout, answer_timeout);
}

static void start(struct fx *f, unsigned max_conns, int64_t request_timeout) {
    start_answer(f, max_conns, request_timeout, TIMEOUT);
}

/* A raw connection to the server, with a receive timeout for the tests' own safety and, when
 * rcvbuf > 0, that SO_RCVBUF (set before connect, so the advertised window is small). */
static int dial_rcvbuf(struct fx *f, int rcvbuf) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    if (rcvbuf > 0) {
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(dfd_vortex_server_port(f->v)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 30};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    return fd;
}

static int dial(struct fx *f) {
    return dial_rcvbuf(f, 0);
}

static void send_bytes(int fd, const void *b, size_t n) {
    assert_int_equal(send(fd, b, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Reads until n bytes or EOF; returns how many. */
static size_t recv_upto(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(fd, p + got, n - got, 0);
        if (k <= 0) {
            assert_true(k == 0); /* EOF; a timeout (EAGAIN) fails the test */
            break;
        }
        got += (size_t)k;
    }
    return got;
}

/* Reads a whole header from fd into h. */
static void recv_header(int fd, struct dfd_vortex_header *h) {
    uint8_t hb[DFD_VORTEX_HEADER_LEN];
    assert_int_equal(recv_upto(fd, hb, sizeof(hb)), sizeof(hb));
    dfd_vortex_header_decode(hb, h);
}

/* Reads an Error frame and then EOF; returns its code, the message into msg. */
static uint8_t recv_error(int fd, char *msg, size_t size) {
    uint8_t b[DFD_VORTEX_HEADER_LEN + 1 + DFD_VORTEX_ERROR_MAX + 1];
    size_t n = recv_upto(fd, b, sizeof(b));
    assert_true(n >= DFD_VORTEX_HEADER_LEN + 1 && n < sizeof(b)); /* then EOF */
    struct dfd_vortex_header h;
    dfd_vortex_header_decode(b, &h);
    assert_int_equal(h.tag, DFD_VORTEX_TAG_ERROR);
    assert_int_equal(h.length, n - DFD_VORTEX_HEADER_LEN);
    uint8_t code;
    const char *m;
    size_t mlen;
    struct dfc_error err;
    assert_int_equal(dfd_vortex_error_decode(b + 6, h.length, &code, &m, &mlen, &err), 0);
    assert_true(mlen < size);
    memcpy(msg, m, mlen);
    msg[mlen] = '\0';
    return code;
}

static void test_every_piece(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    uint8_t *buf = malloc(4 * MiB);
    for (size_t i = 0; i < f->npieces; i++) {
        const struct dfd_piece_meta *pm = &f->pieces[i];
        struct dfd_vortex_fetched got = {0};
        struct dfc_error err = {0};
        memset(buf, 0, 4 * MiB);
        int r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id,
                                 pm->number, pm->offset, pm->length, buf, TIMEOUT, &got, &err);
        if (r != 0) {
            fail_msg("piece %u: %s", pm->number, err.msg);
        }
        assert_memory_equal(buf, f->content + pm->offset, pm->length);
        char d[DFC_CRC32_DIGEST_MAX];
        dfc_crc32_format(got.crc32, d);
        assert_string_equal(d, pm->digest);
    }
    free(buf);
    assert_true(f->pieces[2].length == 12345);
}

/* A sink that assembles the piece and checks the chunks come in order, each at most the
 * buffer's size; fail_at makes it fail (as a full disk would) once that offset is reached. */
struct assembler {
    uint8_t *out;
    uint64_t next;
    size_t max_chunk;
    unsigned calls;
    uint64_t fail_at;
};

static int assemble(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    struct assembler *a = arg;
    assert_int_equal(at, a->next);
    assert_true(n > 0 && n <= a->max_chunk);
    if (at + n > a->fail_at) {
        return dfc_error_set(err, -ENOSPC, "no space left (the test's sink)");
    }
    memcpy(a->out + at, data, n);
    a->next += n;
    a->calls++;
    return 0;
}

/* dfd_vortex_fetch_to: every piece through a 1000-byte buffer (not a divisor of any length)
 * arrives in order and intact with the right CRC; the sink's error ends the fetch with it. */
static void test_every_piece_through_a_sink(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    uint8_t *out = malloc(4 * MiB);
    uint8_t chunk[1000];
    for (size_t i = 0; i < f->npieces; i++) {
        const struct dfd_piece_meta *pm = &f->pieces[i];
        struct assembler a = {.out = out, .max_chunk = sizeof(chunk), .fail_at = UINT64_MAX};
        struct dfd_vortex_sink sink = {.arg = &a, .write = assemble};
        struct dfd_vortex_fetched got = {0};
        struct dfc_error err = {0};
        memset(out, 0, 4 * MiB);
        int r = dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                    f->task.id, pm->number, pm->offset, pm->length, &sink, chunk,
                                    sizeof(chunk), TIMEOUT, &got, &err);
        if (r != 0) {
            fail_msg("piece %u: %s", pm->number, err.msg);
        }
        assert_int_equal(a.next, pm->length);
        assert_int_equal(a.calls, (pm->length + sizeof(chunk) - 1) / sizeof(chunk));
        assert_memory_equal(out, f->content + pm->offset, pm->length);
        char d[DFC_CRC32_DIGEST_MAX];
        dfc_crc32_format(got.crc32, d);
        assert_string_equal(d, pm->digest);
    }
    const struct dfd_piece_meta *pm = &f->pieces[0];
    struct assembler a = {.out = out, .max_chunk = sizeof(chunk), .fail_at = 5000};
    struct dfd_vortex_sink sink = {.arg = &a, .write = assemble};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                         f->task.id, pm->number, pm->offset, pm->length, &sink,
                                         chunk, sizeof(chunk), TIMEOUT, NULL, &err),
                     -ENOSPC);
    assert_non_null(strstr(err.msg, "the test's sink"));
    assert_int_equal(a.next, 5000);
    /* No sink, or a sink without a buffer, is refused before any connection. */
    assert_int_equal(dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                         f->task.id, 0, 0, pm->length, NULL, chunk, sizeof(chunk),
                                         TIMEOUT, NULL, &err),
                     -EINVAL);
    assert_int_equal(dfd_vortex_fetch_to(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                         f->task.id, 0, 0, pm->length, &sink, chunk, 0, TIMEOUT,
                                         NULL, &err),
                     -EINVAL);
    free(out);
}

struct fetcher {
    struct fx *f;
    int failures;
    int busy;
};

static void *fetcher_main(void *arg) {
    struct fetcher *w = arg;
    struct fx *f = w->f;
    uint8_t *buf = malloc(4 * MiB);
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < f->npieces; i++) {
            const struct dfd_piece_meta *pm = &f->pieces[i];
            struct dfc_error err = {0};
            int r;
            /* Busy: another fetcher is being sent this piece; a downloader asks again later. */
            while ((r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                         f->task.id, pm->number, pm->offset, pm->length, buf,
                                         TIMEOUT, NULL, &err)) == -EBUSY) {
                w->busy++;
                usleep(1000);
            }
            if (r != 0 || memcmp(buf, f->content + pm->offset, pm->length) != 0) {
                w->failures++;
            }
        }
    }
    free(buf);
    return NULL;
}

/* Parallel clients, fewer than max_conns: every piece arrives intact every time (asked again
 * while the server answers Busy). */
static void test_concurrent_fetches(void **state) {
    struct fx *f = *state;
    enum { T = 6 };
    start(f, 2 * T, 5 * SEC);
    pthread_t th[T];
    struct fetcher w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct fetcher){.f = f};
        assert_int_equal(pthread_create(&th[i], NULL, fetcher_main, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
}

/* Reads an answer's header and its value (at most size bytes) from fd. */
static void recv_packet(int fd, struct dfd_vortex_header *h, uint8_t *value, size_t size) {
    recv_header(fd, h);
    assert_true(h->length <= size);
    assert_int_equal(recv_upto(fd, value, h->length), h->length);
}

/* Beyond upstream: a piece being delivered to one peer (its bytes not yet acknowledged) is
 * answered Error Busy to another, whose connection stays for its next request; once the first
 * peer has the piece, it is served to others again. */
static void test_busy_while_delivering(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    const struct dfd_piece_meta *p0 = &f->pieces[0], *p1 = &f->pieces[1];
    struct dfc_error err = {0};
    uint8_t req0[DFD_VORTEX_REQUEST_PACKET_LEN], req1[DFD_VORTEX_REQUEST_PACKET_LEN];
    assert_int_equal(dfd_vortex_request_encode(1, f->task.id, 0, req0, &err), 0);
    assert_int_equal(dfd_vortex_request_encode(2, f->task.id, 1, req1, &err), 0);

    /* a: asks for piece 0 and reads only the answer's header (a window of 4 KiB). */
    int a = dial_rcvbuf(f, 4096);
    send_bytes(a, req0, sizeof(req0));
    struct dfd_vortex_header ha;
    recv_header(a, &ha);
    assert_int_equal(ha.tag, DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT);

    /* b: piece 0 is Busy; piece 1 on the same connection is served whole. */
    int b = dial(f);
    send_bytes(b, req0, sizeof(req0));
    uint8_t value[4 + DFD_VORTEX_METADATA_MAX];
    struct dfd_vortex_header h;
    recv_packet(b, &h, value, sizeof(value));
    assert_int_equal(h.tag, DFD_VORTEX_TAG_ERROR);
    uint8_t code;
    const char *m;
    size_t mlen;
    assert_int_equal(dfd_vortex_error_decode(value, h.length, &code, &m, &mlen, &err), 0);
    assert_int_equal(code, DFD_VORTEX_ERR_BUSY);
    char msg[DFD_VORTEX_ERROR_MAX + 1];
    memcpy(msg, m, mlen);
    msg[mlen] = '\0';
    assert_non_null(strstr(msg, "being sent to another peer"));
    send_bytes(b, req1, sizeof(req1));
    recv_packet(b, &h, value, sizeof(value));
    assert_int_equal(h.tag, DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT);
    uint8_t *buf = malloc(4 * MiB);
    assert_non_null(buf);
    assert_int_equal(recv_upto(b, buf, p1->length), p1->length);
    assert_memory_equal(buf, f->content + p1->offset, p1->length);

    /* The client: -EBUSY naming the answer. */
    uint16_t port = dfd_vortex_server_port(f->v);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 0, p0->offset,
                                      p0->length, buf, TIMEOUT, NULL, &err),
                     -EBUSY);
    assert_non_null(strstr(err.msg, "Busy"));

    /* a takes its piece whole: then piece 0 is served again (asked until its last bytes are
     * acknowledged, at most 2 s). */
    assert_int_equal(recv_upto(a, value, ha.length), ha.length);
    assert_int_equal(recv_upto(a, buf, p0->length), p0->length);
    assert_memory_equal(buf, f->content + p0->offset, p0->length);
    int r = -EBUSY;
    for (int i = 0; i < 200 && r == -EBUSY; i++) {
        memset(buf, 0, p0->length);
        if ((r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 0, p0->offset,
                                  p0->length, buf, TIMEOUT, NULL, &err)) == -EBUSY) {
            usleep(10 * 1000);
        }
    }
    assert_int_equal(r, 0);
    assert_memory_equal(buf, f->content + p0->offset, p0->length);
    free(buf);
    close(a);
    close(b);
}

static void test_metadata_on_the_wire(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    int fd = dial(f);
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    struct dfc_error err;
    assert_int_equal(dfd_vortex_request_encode(9, f->task.id, 2, req, &err), 0);
    send_bytes(fd, req, sizeof(req));
    struct dfd_vortex_header h;
    recv_header(fd, &h);
    assert_int_equal(h.tag, DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT);
    assert_true(h.length <= 4 + DFD_VORTEX_METADATA_MAX);
    uint8_t value[4 + DFD_VORTEX_METADATA_MAX];
    assert_int_equal(recv_upto(fd, value, h.length), h.length);
    struct dfd_vortex_piece p;
    assert_int_equal(dfd_vortex_content_decode(value, h.length, &p, &err), 0);
    assert_int_equal(p.number, 2);
    assert_true(p.offset == 8 * MiB);
    assert_true(p.length == 12345);
    assert_int_equal(p.digest_len, strlen(f->pieces[2].digest));
    assert_memory_equal(p.digest, f->pieces[2].digest, p.digest_len);
    assert_int_equal(p.parent_id_len, 6);
    assert_memory_equal(p.parent_id, "host-1", 6);
    assert_int_equal(p.traffic_type, 1);
    /* The raw bytes follow, then the server closes. */
    uint8_t *bytes = malloc(12345 + 1);
    assert_int_equal(recv_upto(fd, bytes, 12345 + 1), 12345);
    assert_memory_equal(bytes, f->content + 8 * MiB, 12345);
    free(bytes);
    close(fd);
}

static void test_not_found(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    uint8_t buf[16];
    struct dfc_error err = {0};
    uint16_t port = dfd_vortex_server_port(f->v);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 3, 0, 16, buf,
                                      TIMEOUT, NULL, &err),
                     -ENOENT);
    char want[128];
    snprintf(want, sizeof(want), "piece %s-3 not found", f->task.id);
    assert_non_null(strstr(err.msg, want));
    assert_int_equal(
        dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, OTHER, 0, 0, 16, buf, TIMEOUT, NULL, &err),
        -ENOENT);
    assert_non_null(strstr(err.msg, "piece " OTHER "-0 not found"));
    /* The raw frame: code NotFound and upstream's message. */
    int fd = dial(f);
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    assert_int_equal(dfd_vortex_request_encode(1, OTHER, 7, req, &err), 0);
    send_bytes(fd, req, sizeof(req));
    char msg[DFD_VORTEX_ERROR_MAX + 1];
    assert_int_equal(recv_error(fd, msg, sizeof(msg)), DFD_VORTEX_ERR_NOT_FOUND);
    assert_string_equal(msg, "piece " OTHER "-7 not found");
    close(fd);
}

/* A replica this node is still downloading, shared: its written pieces are served from the
 * spool (byte-identical, the CRC as the rows would have it), the others NotFound; after an
 * abort, none. */
static void test_shared_replica_in_progress(void **state) {
    struct fx *f = *state;
    start(f, 4, 5 * SEC);
    struct dfc_error err = {0};
    assert_int_equal(dfd_storage_delete(f->s, f->task.id, &err), 0);
    struct dfd_replica_params rp = {.id = f->task.id,
                                    .piece_length = 4 * MiB,
                                    .content_length = CONTENT,
                                    .piece_count = 3,
                                    .replica_count = 1,
                                    .ttl_ns = 3600 * SEC,
                                    .created_at_ns = INT64_C(1700000000) * SEC};
    struct dfd_replica *rep;
    assert_int_equal(dfd_replica_begin(f->s, &rp, &rep, &err), 0);
    const struct dfd_piece_meta *pm = &f->pieces[2];
    assert_int_equal(
        dfd_replica_write_piece(rep, 2, f->content + pm->offset, pm->length,
                                dfc_crc32_update(0, f->content + pm->offset, pm->length), &err),
        0);
    uint16_t port = dfd_vortex_server_port(f->v);
    uint8_t *buf = malloc(4 * MiB);
    /* Not shared: nothing. */
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 2, pm->offset,
                                      pm->length, buf, TIMEOUT, NULL, &err),
                     -ENOENT);
    dfd_replica_share(rep);
    struct dfd_vortex_fetched got = {0};
    int r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 2, pm->offset, pm->length,
                             buf, TIMEOUT, &got, &err);
    if (r != 0) {
        fail_msg("piece 2: %s", err.msg);
    }
    assert_memory_equal(buf, f->content + pm->offset, pm->length);
    char d[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(got.crc32, d);
    assert_string_equal(d, pm->digest);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 0, 0, 4 * MiB, buf,
                                      TIMEOUT, NULL, &err),
                     -ENOENT);
    char want[128];
    snprintf(want, sizeof(want), "piece %s-0 not found", f->task.id);
    assert_non_null(strstr(err.msg, want));
    dfd_replica_abort(rep);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", port, f->task.id, 2, pm->offset,
                                      pm->length, buf, TIMEOUT, NULL, &err),
                     -ENOENT);
    free(buf);
}

static void test_hostile_headers(void **state) {
    struct fx *f = *state;
    /* More slots than the five connections below: a handler still finishing its error
     * answer's drain (slow under TSan) must not refuse the last fetch at accept. The limit
     * itself is test_max_conns's. */
    start(f, 8, 5 * SEC);
    char msg[DFD_VORTEX_ERROR_MAX + 1];
    /* A request claiming 4 GiB: answered from the header alone. */
    static const uint8_t huge[] = {0x01, 0x04, 0xff, 0xff, 0xff, 0xff};
    int fd = dial(f);
    send_bytes(fd, huge, sizeof(huge));
    assert_int_equal(recv_error(fd, msg, sizeof(msg)), DFD_VORTEX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "length 4294967295"));
    close(fd);
    /* Unknown tag 0 (a standard-task DownloadPiece), with a valid-looking length. */
    static const uint8_t tag0[] = {0x01, 0x00, 0x00, 0x00, 0x00, 0x44};
    fd = dial(f);
    send_bytes(fd, tag0, sizeof(tag0));
    assert_int_equal(recv_error(fd, msg, sizeof(msg)), DFD_VORTEX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "tag 0"));
    close(fd);
    /* Tag 4 with length 67, and a header followed by more bytes than it announced. */
    static const uint8_t short4[] = {0x01, 0x04, 0x00, 0x00, 0x00, 0x43};
    fd = dial(f);
    send_bytes(fd, short4, sizeof(short4));
    assert_int_equal(recv_error(fd, msg, sizeof(msg)), DFD_VORTEX_ERR_INVALID_ARGUMENT);
    close(fd);
    /* A task id that is not 64 lowercase hex digits. */
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    struct dfc_error err;
    assert_int_equal(dfd_vortex_request_encode(1, f->task.id, 0, req, &err), 0);
    req[6] = 'Z';
    fd = dial(f);
    send_bytes(fd, req, sizeof(req));
    assert_int_equal(recv_error(fd, msg, sizeof(msg)), DFD_VORTEX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "task_id"));
    close(fd);
    /* The server still serves after all that. */
    uint8_t *buf = malloc(4 * MiB);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                      f->task.id, 0, 0, 4 * MiB, buf, TIMEOUT, NULL, &err),
                     0);
    free(buf);
}

static void test_stalled_request(void **state) {
    struct fx *f = *state;
    start(f, 4, SEC / 4);
    int fd = dial(f);
    static const uint8_t part[] = {0x01, 0x04, 0x00};
    send_bytes(fd, part, sizeof(part));
    /* Closed after request_timeout, without an answer (the socket's own 30 s timeout would
     * fail recv_upto with EAGAIN instead). */
    uint8_t b[8];
    assert_int_equal(recv_upto(fd, b, sizeof(b)), 0);
    close(fd);
    /* Stalled after a whole header: the same. */
    fd = dial(f);
    static const uint8_t head[] = {0x01, 0x04, 0x00, 0x00, 0x00, 0x44, 'a'};
    send_bytes(fd, head, sizeof(head));
    assert_int_equal(recv_upto(fd, b, sizeof(b)), 0);
    close(fd);
}

/* A peer that takes a piece a few KiB at a time keeps every single write within
 * request_timeout, but not the whole answer within answer_timeout: the server resets the
 * connection then, instead of holding a slot for as long as the peer likes. The piece is
 * larger than the server's send buffer (4 MiB, doubled by the kernel), so the server really
 * waits on the peer. Without the bound this loop would read all 16 MiB (tens of seconds), and
 * the assertion on the byte count fails. */
#define BIG_PIECE (16 * MiB)

static void test_slow_reader_reset(void **state) {
    struct fx *f = *state;
    char src[400];
    snprintf(src, sizeof(src), "%s/big", f->dir);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)BIG_PIECE), 0);
    struct dfd_import_params p = {.piece_length = BIG_PIECE,
                                  .replica_count = 1,
                                  .ttl_ns = 3600 * SEC,
                                  .persistent = true,
                                  .expected_length = -1};
    struct dfd_task_meta big;
    bool existed = false;
    struct dfc_error err;
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, INT64_C(1700000000) * SEC, NULL, NULL,
                                           &big, &existed, NULL, &err),
                     0);
    close(fd);
    start_answer(f, 4, 10 * SEC, SEC / 2);

    int c = dial_rcvbuf(f, 4096);
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    assert_int_equal(dfd_vortex_request_encode(0, big.id, 0, req, &err), 0);
    send_bytes(c, req, sizeof(req));

    /* 4 KiB every 10 ms: ~400 KiB/s, 40 s for the piece; stops at the reset (or EOF). */
    uint8_t b[4096];
    uint64_t got = 0;
    ssize_t k;
    int last_errno = 0;
    for (int i = 0; i < 4000; i++) {
        k = recv(c, b, sizeof(b), 0);
        if (k <= 0) {
            last_errno = k < 0 ? errno : 0;
            break;
        }
        got += (uint64_t)k;
        usleep(10 * 1000);
    }
    assert_true(k <= 0);
    assert_true(k == 0 || last_errno == ECONNRESET);
    assert_true(got < BIG_PIECE);
    close(c);
    dfd_task_meta_done(&big);
}

static void test_max_conns(void **state) {
    struct fx *f = *state;
    enum { N = 3 };
    start(f, N, 120 * SEC); /* stalled connections hold their slots for the whole test */
    int held[N];
    for (int i = 0; i < N; i++) {
        held[i] = dial(f);
    }
    /* One more: closed at once (a wait for request_timeout would hit the 30 s recv timeout). */
    int extra = dial(f);
    uint8_t b[8];
    assert_int_equal(recv_upto(extra, b, sizeof(b)), 0);
    close(extra);
    /* The held ones are still open. */
    for (int i = 0; i < N; i++) {
        assert_int_equal(recv(held[i], b, sizeof(b), MSG_DONTWAIT), -1);
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    }
    /* Freeing a slot lets a fetch through once the server has seen the close. */
    close(held[0]);
    uint8_t *buf = malloc(4 * MiB);
    int r = -1;
    struct dfc_error err = {0};
    for (int attempt = 0; attempt < 500 && r != 0; attempt++) {
        r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id, 1,
                             4 * MiB, 4 * MiB, buf, TIMEOUT, NULL, &err);
        if (r != 0) {
            /* refused at accept: closed before any answer (a reset: the request was unread) */
            assert_true(r == -EPROTO || r == -ECONNRESET);
            usleep(10 * 1000);
        }
    }
    assert_int_equal(r, 0);
    assert_memory_equal(buf, f->content + 4 * MiB, 4 * MiB);
    free(buf);
    for (int i = 1; i < N; i++) {
        close(held[i]);
    }
}

/* A raw connection from the local address from, with the tests' receive timeout. */
static int dial_from(struct fx *f, const char *from) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in b = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, from, &b.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(dfd_vortex_server_port(f->v)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 30};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    return fd;
}

/* One peer address holds at most max_conns_per_ip of the slots: its next connection is closed
 * at once, while another address still fetches. */
static void test_max_conns_per_ip(void **state) {
    struct fx *f = *state;
    start_per_ip(f, 8, 2, 120 * SEC, TIMEOUT);
    int held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = dial_from(f, "127.0.0.2");
    }
    int extra = dial_from(f, "127.0.0.2");
    uint8_t b[8];
    assert_int_equal(recv_upto(extra, b, sizeof(b)), 0);
    close(extra);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(recv(held[i], b, sizeof(b), MSG_DONTWAIT), -1);
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    }
    uint8_t *buf = malloc(4 * MiB);
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                      f->task.id, 1, 4 * MiB, 4 * MiB, buf, TIMEOUT, NULL, &err),
                     0);
    assert_memory_equal(buf, f->content + 4 * MiB, 4 * MiB);
    free(buf);
    for (int i = 0; i < 2; i++) {
        close(held[i]);
    }
}

/* The request deadline runs from the accept: a peer that trickles a valid request a byte at a
 * time (74 bytes, 7.4 s at this pace) is closed after request_timeout, unanswered. */
static void test_trickled_request(void **state) {
    struct fx *f = *state;
    start(f, 4, SEC / 2);
    int fd = dial(f);
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    struct dfc_error err;
    assert_int_equal(dfd_vortex_request_encode(0, f->task.id, 0, req, &err), 0);
    double t0 = test_now_ms();
    size_t sent = 0;
    while (sent < sizeof(req) && send(fd, req + sent, 1, MSG_NOSIGNAL) == 1 &&
           !test_closed_by_peer(fd)) {
        sent++;
        usleep(100 * 1000);
    }
    assert_true(sent < sizeof(req));
    assert_true(test_now_ms() - t0 < 2000);
    close(fd);
}

static void test_stop_with_connections_open(void **state) {
    struct fx *f = *state;
    start(f, 4, 120 * SEC);
    int held[3];
    for (int i = 0; i < 3; i++) {
        held[i] = dial(f);
    }
    static const uint8_t part[] = {0x01, 0x04};
    send_bytes(held[1], part, sizeof(part));
    /* Make sure the server's handlers hold them (a fetch gets through the fourth slot). */
    uint8_t piece[16];
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), OTHER,
                                      0, 0, 16, piece, TIMEOUT, NULL, &err),
                     -ENOENT);
    dfd_vortex_server_stop(f->v); /* returns, well before the 120 s request timeout */
    f->v = NULL;
    uint8_t b[8];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(recv_upto(held[i], b, sizeof(b)), 0);
        close(held[i]);
    }
    /* Stop on a server with nothing open, and NULL. */
    start(f, 1, SEC);
    dfd_vortex_server_stop(f->v);
    f->v = NULL;
    dfd_vortex_server_stop(NULL);
}

static void test_start_errors(void **state) {
    struct fx *f = *state;
    struct dfc_error err = {0};
    struct dfd_vortex_server *v = NULL;
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .max_conns = 0,
                                       .request_timeout_ns = SEC,
                                       .answer_timeout_ns = SEC,
                                       .parent_id = "h"};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "max_conns"));
    o.max_conns = 1;
    o.request_timeout_ns = 0;
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &v, &err), -EINVAL);
    o.request_timeout_ns = SEC;
    o.answer_timeout_ns = 0;
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "answer_timeout"));
    o.answer_timeout_ns = SEC;
    o.ip = "not-an-ip";
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not-an-ip"));
    /* A port in use. */
    start(f, 1, SEC);
    o.ip = "127.0.0.1";
    o.port = dfd_vortex_server_port(f->v);
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &v, &err), -EADDRINUSE);
    assert_null(v);
}

int main(void) {
    /* As in dfdaemon (lib/src/signals.c): a client that hangs up mid-piece (the sink test) must
     * not kill the server's process with SIGPIPE from sendfile. */
    (void)signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_piece, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_piece_through_a_sink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_fetches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_while_delivering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata_on_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_replica_in_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stalled_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_reader_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_conns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_conns_per_ip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trickled_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_with_connections_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
