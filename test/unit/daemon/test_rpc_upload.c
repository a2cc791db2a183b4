/*
 * Tests for daemon/rpc_upload.c's SyncPersistentCachePieces on a real store in a temp dir and a
 * real gRPC server on 127.0.0.1 (the TCP method table), called by the real client: a stream on
 * a replica this node is downloading (shared) reports the pieces it holds, then each written
 * after the call began, and ends OK at the commit; an abort ends it NOT_FOUND naming the task;
 * the call's deadline ends it DEADLINE_EXCEEDED; the per-remote cap refuses one stream too many.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "dfc/clock.h"
#include "dfc/digest.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "dfc/stream_cap.h"
#include "dfc/units.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "service.h"
#include "storage/storage.h"
#include "test_support.h"

#define MiB        ((uint64_t)1 << 20)
#define SEC        DFC_NS_PER_SEC
#define PL         (4 * MiB)
#define LEN        (3 * PL - 77)
#define ID1        "7a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define TIMEOUT_MS 20000
#define VPORT      4321

static struct dfc_rpc_client_method sync_pieces_m;

struct fx {
    char dir[256];
    char store[300];
    struct dfd_storage *s;
    struct dfd_config cfg;
    struct dfd_service svc;
    struct dfc_stream_cap cap;
    struct dfc_rpc_server *srv;
    struct dfc_rpc_client *c;
    char *buf;
};

static int64_t wall_ns(void *arg) {
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-upload");
    snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    static char ip[] = "127.0.0.1", name[] = "node-1";
    f->cfg.host_ip = ip;
    f->cfg.hostname = name;
    f->cfg.vortex_port = VPORT;
    struct dfc_clock clock = {.now_ns = wall_ns};
    assert_int_equal(dfd_service_init(&f->svc, f->s, &f->cfg, &clock, &err), 0);
    dfc_stream_cap_init(&f->cap, 2, "SyncPersistentCachePieces",
                        "upload.server.maxSyncPiecesStreamsPerHost");
    f->svc.sync_pieces_cap = &f->cap;
    f->svc.sync_pieces_max_waiting = 4;
    struct dfc_rpc_server_opts so = {.max_workers = 8, .name = "test-upload"};
    unsigned port = 0;
    assert_int_equal(dfc_rpc_server_new(&so, &f->srv, &err), 0);
    assert_int_equal(dfd_service_register_tcp(&f->svc, f->srv, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_tcp(f->srv, "127.0.0.1", 0, &port, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->srv, &err), 0);
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%u", port);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &f->c, &err), 0);
    f->buf = malloc(LEN);
    for (uint64_t i = 0; i < LEN; i++) {
        f->buf[i] = (char)((i * 2654435761u) >> 13);
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_rpc_client_free(f->c);
    dfc_rpc_server_shutdown(f->srv, 1000);
    dfc_rpc_server_free(f->srv);
    dfc_stream_cap_destroy(&f->cap);
    dfd_storage_close(f->s);
    free(f->buf);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static uint64_t plen(uint32_t i) {
    uint64_t left = LEN - (uint64_t)i * PL;
    return left < PL ? left : PL;
}

static struct dfd_replica *begin_shared(struct fx *f) {
    struct dfd_replica_params p = {.id = ID1,
                                   .piece_length = PL,
                                   .content_length = LEN,
                                   .piece_count = 3,
                                   .replica_count = 1,
                                   .ttl_ns = 3600 * SEC,
                                   .created_at_ns = wall_ns(NULL)};
    struct dfd_replica *rep;
    struct dfc_error err;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    dfd_replica_share(rep);
    return rep;
}

static void write_piece(struct fx *f, struct dfd_replica *rep, uint32_t i) {
    struct dfc_error err;
    const char *p = f->buf + (uint64_t)i * PL;
    assert_int_equal(
        dfd_replica_write_piece(rep, i, p, plen(i), dfc_crc32_update(0, p, plen(i)), &err), 0);
}

static struct dfc_rpc_stream *open_sync(struct fx *f, const uint32_t *nums, size_t n,
                                        int64_t timeout_ms) {
    Dfdaemon__V2__SyncPersistentCachePiecesRequest req =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_REQUEST__INIT;
    req.host_id = "test";
    req.task_id = ID1;
    req.interested_piece_numbers = (uint32_t *)nums;
    req.n_interested_piece_numbers = n;
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(f->c, &sync_pieces_m, timeout_ms, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    return st;
}

/* The next answer: piece k with its geometry and this host's Vortex address. */
static void expect_piece(struct dfc_rpc_stream *st, uint32_t k) {
    ProtobufCMessage *m = NULL;
    struct dfc_error err = {0};
    int r = dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, &err);
    if (r != 1) {
        fail_msg("piece %u: %d %s", k, r, err.msg);
    }
    const Dfdaemon__V2__SyncPersistentCachePiecesResponse *p = (const void *)m;
    assert_int_equal(p->number, k);
    assert_int_equal(p->offset, (uint64_t)k * PL);
    assert_int_equal(p->length, plen(k));
    assert_string_equal(p->ip, "127.0.0.1");
    assert_int_equal(p->tcp_port, VPORT);
    dfc_rpc_msg_free(m);
}

static int expect_end(struct dfc_rpc_stream *st, struct dfc_error *err) {
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, err);
    dfc_rpc_msg_free(m);
    return r;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void test_reports_pieces_as_they_land_and_ends_at_commit(void **state) {
    struct fx *f = *state;
    struct dfd_replica *rep = begin_shared(f);
    write_piece(f, rep, 1);
    const uint32_t nums[] = {2, 1, 0};
    struct dfc_rpc_stream *st = open_sync(f, nums, 3, TIMEOUT_MS);
    expect_piece(st, 1); /* held when the call began */
    sleep_ms(300);       /* the handler waits */
    write_piece(f, rep, 0);
    expect_piece(st, 0);
    sleep_ms(300);
    write_piece(f, rep, 2);
    struct dfd_task_meta t;
    struct dfc_error err;
    assert_int_equal(dfd_replica_commit(rep, wall_ns(NULL), &t, &err), 0);
    dfd_task_meta_done(&t);
    expect_piece(st, 2);
    assert_int_equal(expect_end(st, &err), 0); /* every wanted piece sent: OK */
    dfc_rpc_stream_free(st);

    /* Committed: one pass. */
    st = open_sync(f, nums, 3, TIMEOUT_MS);
    expect_piece(st, 2);
    expect_piece(st, 1);
    expect_piece(st, 0);
    assert_int_equal(expect_end(st, &err), 0);
    dfc_rpc_stream_free(st);
}

static void test_abort_ends_not_found(void **state) {
    struct fx *f = *state;
    struct dfd_replica *rep = begin_shared(f);
    write_piece(f, rep, 0);
    const uint32_t nums[] = {0, 2, 0}; /* a repeated number is answered once */
    struct dfc_rpc_stream *st = open_sync(f, nums, 3, TIMEOUT_MS);
    expect_piece(st, 0);
    sleep_ms(300);
    dfd_replica_abort(rep);
    struct dfc_error err = {0};
    int r = expect_end(st, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_NOT_FOUND);
    assert_non_null(strstr(err.msg, "persistent cache task " ID1 " not found"));
    dfc_rpc_stream_free(st);
}

static void test_deadline_and_cap(void **state) {
    struct fx *f = *state;
    struct dfd_replica *rep = begin_shared(f);
    const uint32_t nums[] = {1};
    /* Two wait (the cap is 2 per remote); the third is refused at once. */
    struct dfc_rpc_stream *a = open_sync(f, nums, 1, TIMEOUT_MS);
    struct dfc_rpc_stream *b = open_sync(f, nums, 1, 1500);
    sleep_ms(500);
    struct dfc_rpc_stream *c = open_sync(f, nums, 1, TIMEOUT_MS);
    struct dfc_error err = {0};
    int r = expect_end(c, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.msg, "(upload.server.maxSyncPiecesStreamsPerHost)"));
    dfc_rpc_stream_free(c);
    /* b's deadline passes while it waits. */
    int64_t t0 = dfc_mono_ns();
    r = expect_end(b, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_DEADLINE_EXCEEDED);
    assert_true(dfc_mono_ns() - t0 < 10 * SEC);
    dfc_rpc_stream_free(b);
    /* a still gets its piece. */
    write_piece(f, rep, 1);
    expect_piece(a, 1);
    assert_int_equal(expect_end(a, &err), 0);
    dfc_rpc_stream_free(a);
    dfd_replica_abort(rep);
}

int main(void) {
    static const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncPersistentCachePieces",
                              &sync_pieces_m),
    };
    struct dfc_error err;
    if (dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reports_pieces_as_they_land_and_ends_at_commit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_abort_ends_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_and_cap, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
