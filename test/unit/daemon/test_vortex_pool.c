/*
 * Tests for Vortex connection reuse (vortex_pool.c with vortex_client.c and vortex_server.c):
 * real sockets on 127.0.0.1, a real store and server, and a tiny test server that speaks the
 * framing itself to play an upstream parent. Several pieces go over one connection (the
 * server's accept count), plain and under mutual TLS; a parent that closes after each answer
 * (as upstream), at once or on reading the next request, still serves every piece through the
 * client's reconnect; a connection whose answer failed (a wrong CRC, an Error) is not reused;
 * idle connections are closed after the pool's idle limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/digest.h"
#include "dfc/tls_ssl.h"
#include "p2p/sockio.h"
#include "p2p/vortex.h"
#include "p2p/vortex_client.h"
#include "p2p/vortex_pool.h"
#include "p2p/vortex_server.h"
#include "storage/storage.h"
#include "test_support.h"

#define MiB     ((uint64_t)1 << 20)
#define SEC     INT64_C(1000000000)
#define TIMEOUT (20 * SEC)
#define CONTENT (3 * MiB + 4321) /* four pieces of 1 MiB, the last one short */
#define PIECE   MiB

static char certs[256];

static int group_setup(void **state) {
    (void)state;
    test_mkdtemp(certs, sizeof(certs), "vortex-pool-certs");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "bash %s ca %s/ca && bash %s leaf %s/ca %s/server 'IP:127.0.0.1' && "
             "bash %s leaf %s/ca %s/client 'IP:127.0.0.1'",
             MAKE_CERTS, certs, MAKE_CERTS, certs, certs, MAKE_CERTS, certs, certs);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    test_rmtree(certs);
    return 0;
}

static struct dfc_tls_ctx *ctx(const char *name, bool server) {
    char ca[512], crt[512], key[512];
    snprintf(ca, sizeof(ca), "%s/%s/ca.crt", certs, name);
    snprintf(crt, sizeof(crt), "%s/%s/tls.crt", certs, name);
    snprintf(key, sizeof(key), "%s/%s/tls.key", certs, name);
    struct dfc_tls_files files = {.ca_cert = ca, .cert = crt, .key = key};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    if (dfc_tls_ctx_new(DFC_TLS_MUTUAL, &files, server, DFC_TLS_RECHECK_NS, &c, &err) != 0) {
        fail_msg("dfc_tls_ctx_new(%s): %s", name, err.msg);
    }
    return c;
}

/* ---- fixture: a store with one task ---- */

struct fx {
    char dir[256];
    struct dfd_storage *s;
    uint8_t *content;
    struct dfd_task_meta task;
    struct dfd_piece_meta *pieces;
    size_t npieces;
    struct dfc_tls_ctx *stls, *ctls;
    struct dfd_vortex_server *v;
};

static int setup(void **state) {
    dfd_vortex_pool_flush();
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "vortex-pool");
    char store[400], src[400];
    snprintf(store, sizeof(store), "%s/store", f->dir);
    snprintf(src, sizeof(src), "%s/src", f->dir);
    struct dfd_storage_opts o = {.dir = store, .keep = true};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    f->content = malloc(CONTENT);
    uint32_t x = 77;
    for (uint64_t i = 0; i < CONTENT; i++) {
        x = x * 1103515245 + 12345;
        f->content[i] = (uint8_t)(x >> 16);
    }
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->content, CONTENT), (ssize_t)CONTENT);
    struct dfd_import_params p = {.piece_length = PIECE,
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
    assert_int_equal(f->npieces, 4);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfd_vortex_pool_flush();
    dfd_vortex_server_stop(f->v);
    dfc_tls_ctx_free(f->stls);
    dfc_tls_ctx_free(f->ctls);
    free(f->pieces);
    dfd_task_meta_done(&f->task);
    dfd_storage_close(f->s);
    free(f->content);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static void start(struct fx *f, bool tls) {
    if (tls) {
        f->stls = ctx("server", true);
        f->ctls = ctx("client", false);
    }
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .max_conns = 16,
                                       .request_timeout_ns = 10 * SEC,
                                       .answer_timeout_ns = TIMEOUT,
                                       .parent_id = "host-1",
                                       .tls = f->stls};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &f->v, &err), 0);
}

/* Piece n from 127.0.0.1:port through tls; its bytes must be the content's. */
static int fetch_n(struct fx *f, struct dfc_tls_ctx *tls, uint16_t port, uint32_t n,
                   struct dfc_error *err) {
    uint8_t *buf = malloc(PIECE);
    const struct dfd_piece_meta *pm = &f->pieces[n];
    int r = dfd_vortex_fetch(tls, NULL, "127.0.0.1", port, f->task.id, n, pm->offset, pm->length,
                             buf, TIMEOUT, NULL, err);
    if (r == 0) {
        assert_memory_equal(buf, f->content + pm->offset, pm->length);
    }
    free(buf);
    return r;
}

static void fetch_ok(struct fx *f, struct dfc_tls_ctx *tls, uint16_t port, uint32_t n) {
    struct dfc_error err = {0};
    int r = fetch_n(f, tls, port, n, &err);
    if (r != 0) {
        fail_msg("piece %u: %d %s", n, r, err.msg);
    }
}

static void reuse_over_one_connection(void **state, bool tls) {
    struct fx *f = *state;
    start(f, tls);
    uint16_t port = dfd_vortex_server_port(f->v);
    for (int round = 0; round < 2; round++) {
        for (uint32_t n = 0; n < f->npieces; n++) {
            fetch_ok(f, f->ctls, port, n);
        }
    }
    assert_int_equal(dfd_vortex_server_accepted(f->v), 1);
    assert_int_equal(dfd_vortex_pool_idle(), 1);
    /* An Error answer (a piece that is not there) is not reused: the next piece connects anew. */
    struct dfc_error err = {0};
    uint8_t buf[16];
    assert_int_equal(dfd_vortex_fetch(f->ctls, NULL, "127.0.0.1", port, f->task.id, 9, 0,
                                      sizeof(buf), buf, TIMEOUT, NULL, &err),
                     -ENOENT);
    assert_int_equal(dfd_vortex_pool_idle(), 0);
    fetch_ok(f, f->ctls, port, 0);
    assert_int_equal(dfd_vortex_server_accepted(f->v), 2);
    assert_int_equal(dfd_vortex_pool_idle(), 1);
}

static void test_plain_reuses_one_connection(void **state) {
    reuse_over_one_connection(state, false);
}

static void test_tls_reuses_one_connection(void **state) {
    reuse_over_one_connection(state, true);
}

static bool pool_empty(void *arg) {
    (void)arg;
    return dfd_vortex_pool_idle() == 0;
}

static void test_idle_connection_closed(void **state) {
    struct fx *f = *state;
    start(f, false);
    fetch_ok(f, NULL, dfd_vortex_server_port(f->v), 1);
    assert_int_equal(dfd_vortex_pool_idle(), 1);
    int64_t t0 = dfc_mono_ns();
    assert_true(test_wait_for(pool_empty, NULL, 10000));
    assert_true(dfc_mono_ns() - t0 >= DFD_VORTEX_POOL_IDLE_NS - SEC);
}

/* ---- a tiny parent that speaks the framing itself ---- */

enum mode {
    CLOSE_AFTER_ANSWER, /* upstream: one answer, close */
    CLOSE_ON_NEXT,      /* one answer, then read the next request and close unanswered */
    KEEP_BAD_CRC_1,     /* many answers per connection; piece 1 goes with a wrong digest */
};

struct tiny {
    struct fx *f;
    struct dfc_tls_ctx *tls;
    enum mode mode;
    int lfd;
    uint16_t port;
    pthread_t th;
    int accepts, answers, unanswered; /* written by the thread, read after join */
    atomic_bool stop;
};

/* Reads one request: its piece number, or -1 when the peer closed or stalled. */
static int read_request(const struct dfd_conn *c) {
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    if (dfd_conn_recv_all(c, req, sizeof(req), dfd_deadline_after(5 * SEC), NULL, NULL) < 0) {
        return -1;
    }
    char id[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t number = 0;
    if (dfd_vortex_request_decode(req + DFD_VORTEX_HEADER_LEN, DFD_VORTEX_REQUEST_LEN, id, &number,
                                  NULL) < 0) {
        return -1;
    }
    return (int)number;
}

static int answer(struct tiny *t, const struct dfd_conn *c, uint32_t n) {
    const struct dfd_piece_meta *pm = &t->f->pieces[n];
    const uint8_t *bytes = t->f->content + pm->offset;
    char digest[DFC_CRC32_DIGEST_MAX];
    uint32_t crc = dfc_crc32_update(0, bytes, pm->length);
    dfc_crc32_format(t->mode == KEEP_BAD_CRC_1 && n == 1 ? crc ^ 1 : crc, digest);
    struct dfd_vortex_piece p = {.number = n,
                                 .offset = pm->offset,
                                 .length = pm->length,
                                 .digest = digest,
                                 .digest_len = (uint32_t)strlen(digest),
                                 .parent_id = "tiny",
                                 .parent_id_len = 4,
                                 .traffic_type = 1};
    uint8_t out[DFD_VORTEX_HEADER_LEN + 4 + DFD_VORTEX_METADATA_MAX];
    size_t len = 0;
    int64_t dl = dfd_deadline_after(10 * SEC);
    if (dfd_vortex_content_encode(0, &p, out, sizeof(out), &len, NULL) < 0 ||
        dfd_conn_send_all(c, out, len, dl, NULL) < 0) {
        return -1;
    }
    t->answers++;
    return dfd_conn_send_all(c, bytes, pm->length, dl, NULL);
}

static void *tiny_main(void *arg) {
    struct tiny *t = arg;
    while (!atomic_load(&t->stop)) {
        struct pollfd p = {.fd = t->lfd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        t->accepts++;
        struct dfd_conn c = {.fd = fd, .tls = NULL};
        if (t->tls != NULL &&
            dfc_tls_accept(t->tls, fd, "client", dfd_deadline_after(5 * SEC), &c.tls, NULL) < 0) {
            dfd_conn_close(&c);
            continue;
        }
        int n = read_request(&c);
        while (n >= 0 && answer(t, &c, (uint32_t)n) == 0 && t->mode != CLOSE_AFTER_ANSWER) {
            n = read_request(&c);
            if (n >= 0 && t->mode == CLOSE_ON_NEXT) {
                t->unanswered++;
                break;
            }
        }
        dfd_conn_close(&c);
    }
    return NULL;
}

static void tiny_start(struct tiny *t, struct fx *f, enum mode mode, bool tls) {
    memset(t, 0, sizeof(*t));
    t->f = f;
    t->mode = mode;
    if (tls) {
        f->stls = ctx("server", true);
        f->ctls = ctx("client", false);
        t->tls = f->stls;
    }
    struct dfc_sockaddr sa;
    assert_int_equal(dfc_addr_sockaddr("127.0.0.1", 0, &sa), 0);
    t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(t->lfd >= 0);
    assert_int_equal(bind(t->lfd, (struct sockaddr *)&sa.ss, sa.len), 0);
    assert_int_equal(listen(t->lfd, 16), 0);
    assert_int_equal(getsockname(t->lfd, (struct sockaddr *)&sa.ss, &sa.len), 0);
    t->port = (uint16_t)dfc_addr_port(&sa.ss);
    assert_int_equal(pthread_create(&t->th, NULL, tiny_main, t), 0);
}

static void tiny_stop(struct tiny *t) {
    dfd_vortex_pool_flush();
    atomic_store(&t->stop, true);
    pthread_join(t->th, NULL);
    close(t->lfd);
}

static void upstream_parent(void **state, enum mode mode, bool tls) {
    struct fx *f = *state;
    struct tiny t;
    tiny_start(&t, f, mode, tls);
    for (uint32_t n = 0; n < f->npieces; n++) {
        fetch_ok(f, f->ctls, t.port, n);
        if (mode == CLOSE_AFTER_ANSWER) {
            /* the close may reach us before the next take or after it: either way it works */
            usleep(n % 2 == 0 ? 20000 : 0);
        }
    }
    tiny_stop(&t);
    assert_int_equal(t.accepts, (int)f->npieces);
    assert_int_equal(t.answers, (int)f->npieces);
    if (mode == CLOSE_ON_NEXT) {
        /* every later piece was first asked on the kept connection, then on a new one */
        assert_int_equal(t.unanswered, (int)f->npieces - 1);
    }
}

static void test_upstream_parent_closing_after_answer(void **state) {
    upstream_parent(state, CLOSE_AFTER_ANSWER, false);
}

static void test_upstream_parent_closing_on_next_request(void **state) {
    upstream_parent(state, CLOSE_ON_NEXT, false);
}

static void test_upstream_parent_closing_on_next_request_tls(void **state) {
    upstream_parent(state, CLOSE_ON_NEXT, true);
}

static void failed_answer_not_reused(void **state, bool tls) {
    struct fx *f = *state;
    struct tiny t;
    tiny_start(&t, f, KEEP_BAD_CRC_1, tls);
    fetch_ok(f, f->ctls, t.port, 0);
    assert_int_equal(dfd_vortex_pool_idle(), 1);
    struct dfc_error err = {0};
    assert_int_equal(fetch_n(f, f->ctls, t.port, 1, &err), DFC_E_DATA_LOSS);
    assert_non_null(strstr(err.msg, "digest mismatch"));
    assert_int_equal(dfd_vortex_pool_idle(), 0);
    fetch_ok(f, f->ctls, t.port, 2);
    fetch_ok(f, f->ctls, t.port, 3);
    tiny_stop(&t);
    /* piece 0 on the first connection, piece 1 on it too (then closed), 2 and 3 on a second */
    assert_int_equal(t.accepts, 2);
    assert_int_equal(t.answers, 4);
}

static void test_failed_answer_not_reused(void **state) {
    failed_answer_not_reused(state, false);
}

static void test_failed_answer_not_reused_tls(void **state) {
    failed_answer_not_reused(state, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_plain_reuses_one_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_reuses_one_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connection_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_parent_closing_after_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_parent_closing_on_next_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_upstream_parent_closing_on_next_request_tls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_answer_not_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_answer_not_reused_tls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
