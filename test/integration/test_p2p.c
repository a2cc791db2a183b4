/*
 * Integration tests for peer to peer: a real redis-server, the real scheduler and three real
 * dfdaemons on their own loopback addresses (127.0.0.11, .12, .13; p2p_harness.h), talking
 * gRPC over TCP and Vortex between them, driven through dfcache and lib's RPC client.
 *
 * An export of a task that lives on another node (fetched over Vortex, byte-identical, the copy
 * committed with the scheduler's created_at), the same streamed (need_piece_content),
 * persistent replicas placed by the scheduler (the first pull never racing the importer's
 * commit), dfcache stat answered from the scheduler on a node without a copy, a parent with
 * corrupted content, the TCP DfdaemonUpload's refusals (a destructive call from an address that is
 * not the scheduler's, pieces of an absent task), a node restarted with its store joining its
 * copy to the task again, a parent killed in the middle of a download, a node killed in the
 * middle of one serving nothing of it once restarted, and content verified
 * end to end (a lying parent with forged CRCs; a pre-claimed id and an honest importer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/config.h"
#include "dfc/digest.h"
#include "dfc/error.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_client.h"
#include "dfc/volume.pb-c.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "p2p/vortex_client.h"
#include "p2p_harness.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)
#define PIECE_FINISHED                                                                             \
    DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PIECE_FINISHED_RESPONSE
/* How long the scheduler may take to place a persistent replica after an import. */
#define REPLICA_BOUND_MS 30000
#define TIMEOUT_MS       60000

static struct dfc_rpc_client_method sync_pieces_m, sync_host_m, up_download_m, sched_stat_m;
static struct dfc_rpc_client_method publish_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "PublishContentVolume", &publish_m),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "DownloadPersistentCacheTask",
                          &up_download_m),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncHost", &sync_host_m),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncPersistentCachePieces",
                          &sync_pieces_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "StatPersistentCacheTask", &sched_stat_m),
};

/* ---- the cluster, shared by the tests (started once; the last test kills node A) ---- */

static struct {
    bool up;
    struct redis_server redis;
    struct sched_harness sched;
    struct p2p_node node[5]; /* A .11, B .12, C .13; D .14, E .15 (started by one test each) */
    char dir[256];           /* the test's files */
} cl;

#define A (&cl.node[0])
#define B (&cl.node[1])
#define C (&cl.node[2])

static int cluster_up(void **state) {
    (void)state;
    if (!redis_harness_available()) {
        return 0; /* every test skips */
    }
    redis_server_start(&cl.redis, NULL);
    sched_harness_start(&cl.sched, cl.redis.addr,
                        "scheduler:\n  replicaRepairInterval: 2s\n  gc:\n    hostGCInterval: 1m\n");
    static const char *const ips[] = {"127.0.0.11", "127.0.0.12", "127.0.0.13"};
    static const char *const names[] = {"node-a", "node-b", "node-c"};
    for (int i = 0; i < 3; i++) {
        p2p_node_start(&cl.node[i], ips[i], names[i], cl.sched.target, &cl.redis);
    }
    test_mkdtemp(cl.dir, sizeof(cl.dir), "p2p");
    cl.up = true;
    return 0;
}

static int cluster_down(void **state) {
    (void)state;
    if (!cl.up) {
        return 0;
    }
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        if (cl.node[i].h.pid > 0) {
            bad += p2p_node_destroy(&cl.node[i]) != 0;
        } else if (cl.node[i].h.dir[0] != '\0') {
            test_rmtree(cl.node[i].h.dir); /* killed or stopped by a test */
        }
    }
    if (sched_harness_destroy(&cl.sched) != 0) {
        bad++;
    }
    redis_server_destroy(&cl.redis);
    test_rmtree(cl.dir);
    return bad;
}

#define REQUIRE_CLUSTER()                                                                          \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_true(cl.up);                                                                        \
    } while (0)

/* ---- helpers ---- */

/* Imports a fresh file of len bytes (pattern seed) on n; its id into id. */
static void import_on(struct p2p_node *n, size_t len, unsigned seed, unsigned replicas, char *path,
                      size_t path_size, char id[65]) {
    snprintf(path, path_size, "%s/src-%u", cl.dir, seed);
    harness_write_file(path, len, seed);
    char count[16], out[512], errb[2048];
    snprintf(count, sizeof(count), "%u", replicas);
    const char *argv[] = {"import", path, "--persistent-replica-count", count, NULL};
    int code = harness_dfcache(&n->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache import: %s%s\n", out, errb);
    }
    assert_int_equal(code, 0);
    const char *done = strstr(out, "Done: ");
    assert_non_null(done);
    snprintf(id, 65, "%.64s", done + 6);
    assert_int_equal(strlen(id), 64);
}

/* dfcache export of id on n into out_path; returns the exit code. */
static int export_on(struct p2p_node *n, const char *id, const char *out_path, bool stream) {
    char out[512], errb[2048];
    const char *argv[] = {
        "export", "-O", out_path, id, "--no-progress", stream ? "--transfer-from-dfdaemon" : NULL,
        NULL};
    int code = harness_dfcache(&n->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache export on %s: %s%s\n", n->ip, out, errb);
    }
    return code;
}

/* StatLocalPersistentCacheTask on n's socket: the gRPC code; *ret (may be NULL) the answer. */
static int stat_local(struct p2p_node *n, const char *id,
                      Dfdaemon__V2__StatLocalPersistentCacheTaskResponse **ret) {
    struct dfc_rpc_client *c = harness_client(&n->h);
    Dfdaemon__V2__StatLocalPersistentCacheTaskRequest req =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *resp = NULL;
    struct dfc_error err;
    int r = dfc_rpc_unary(c, &hm.stat_local, &req.base, TIMEOUT_MS, &resp, &err);
    dfc_rpc_client_free(c);
    if (ret != NULL) {
        *ret = (void *)resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return dfc_error_to_grpc(r);
}

/* A client of n's DfdaemonUpload on TCP. */
static struct dfc_rpc_client *tcp_client(const struct p2p_node *n) {
    struct dfc_rpc_client *c;
    struct dfc_error err;
    if (dfc_rpc_client_new(n->upload_target, NULL, &c, &err) < 0) {
        fprintf(stderr, "client of %s: %s\n", n->upload_target, err.msg);
        abort();
    }
    return c;
}

/* DeletePersistentCacheTask on n's TCP port: the gRPC code, the message in err. */
static int tcp_delete(const struct p2p_node *n, const char *id, struct dfc_error *err) {
    struct dfc_rpc_client *c = tcp_client(n);
    Dfdaemon__V2__DeletePersistentCacheTaskRequest req =
        DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(c, &hm.delete_task, &req.base, TIMEOUT_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return dfc_error_to_grpc(r);
}

/* ---- tests ---- */

/* SyncPersistentCachePieces for a task the node does not hold: NOT_FOUND naming it; piece
 * numbers beyond the task's pieces: INVALID_ARGUMENT. */
static void test_sync_pieces_absent_task_and_bounds(void **state) {
    REQUIRE_CLUSTER();
    static const char absent[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct dfc_rpc_client *c = tcp_client(A);
    uint32_t nums[] = {0};
    Dfdaemon__V2__SyncPersistentCachePiecesRequest req =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_REQUEST__INIT;
    req.host_id = "test";
    req.task_id = (char *)absent;
    req.interested_piece_numbers = nums;
    req.n_interested_piece_numbers = 1;
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &sync_pieces_m, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_NOT_FOUND);
    char want[128];
    snprintf(want, sizeof(want), "persistent cache task %s not found", absent);
    assert_non_null(strstr(err.msg, want));
    dfc_rpc_stream_free(st);

    /* A stored task (one piece), asked for piece 5. */
    char path[512], id[65];
    import_on(A, 1000, 101, 1, path, sizeof(path), id);
    nums[0] = 5;
    req.task_id = id;
    assert_int_equal(dfc_rpc_stream_open(c, &sync_pieces_m, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    r = dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "interested_piece_numbers[0]: 5 is beyond"));
    dfc_rpc_stream_free(st);

    /* Piece 0 of it: one answer with this node's Vortex address. */
    nums[0] = 0;
    assert_int_equal(dfc_rpc_stream_open(c, &sync_pieces_m, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, &err), 1);
    const Dfdaemon__V2__SyncPersistentCachePiecesResponse *p = (const void *)m;
    assert_int_equal(p->number, 0);
    assert_int_equal(p->length, 1000);
    assert_string_equal(p->ip, A->ip);
    assert_int_equal(p->tcp_port, A->vortex_port);
    dfc_rpc_msg_free(m);
    assert_int_equal(dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, &err), 0);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
}

/* What TCP callers may not ask for: an output path or the pieces' bytes (those stay on the Unix
 * socket, where the caller's credentials are known). SyncHost streams this host's figures. */
static void test_tcp_refuses_paths_and_content_and_syncs_host(void **state) {
    REQUIRE_CLUSTER();
    /* This cluster runs without TLS, and each process says so at start. */
    assert_true(sched_harness_log_has(&cl.sched, "event=scheduler.tls_off"));
    assert_true(harness_log_has(&B->h, "event=dfdaemon.tls_off"));
    char src[512], id[65];
    import_on(A, 1000, 909, 1, src, sizeof(src), id);
    struct dfc_rpc_client *c = tcp_client(B);
    struct {
        const char *field, *msg;
    } cases[] = {{"output_path", "output_path: not on TCP"},
                 {"need_piece_content", "need_piece_content: not on TCP"}};
    for (size_t i = 0; i < 2; i++) {
        Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        req.task_id = id;
        if (i == 0) {
            req.opt_output_path_case =
                DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
            req.output_path = src;
        } else {
            req.need_piece_content = true;
        }
        struct dfc_error err;
        struct dfc_rpc_stream *st = NULL;
        assert_int_equal(dfc_rpc_stream_open(c, &up_download_m, TIMEOUT_MS, &st, &err), 0);
        assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
        assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
        ProtobufCMessage *m = NULL;
        int r = dfc_rpc_stream_recv(st, up_download_m.resp, &m, &err);
        assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_INVALID_ARGUMENT);
        assert_non_null(strstr(err.msg, cases[i].msg));
        dfc_rpc_stream_free(st);
    }
    assert_int_equal(stat_local(B, id, NULL), DFC_GRPC_NOT_FOUND); /* nothing was fetched */

    Dfdaemon__V2__SyncHostRequest hreq = DFDAEMON__V2__SYNC_HOST_REQUEST__INIT;
    hreq.host_id = "test";
    hreq.peer_id = "test";
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &sync_host_m, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &hreq.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    for (int i = 0; i < 2; i++) { /* the first at once, the next a second later */
        ProtobufCMessage *m = NULL;
        assert_int_equal(dfc_rpc_stream_recv(st, sync_host_m.resp, &m, &err), 1);
        const Common__V2__Host *h = (const void *)m;
        assert_string_equal(h->id, B->host_id);
        assert_string_equal(h->ip, B->ip);
        assert_int_equal(h->port, B->upload_port);
        assert_non_null(h->cpu);
        dfc_rpc_msg_free(m);
    }
    dfc_rpc_stream_free(st); /* cancels: the server's loop ends */
    dfc_rpc_client_free(c);
}

/* Import on A, export on B (which holds nothing): fetched over Vortex, byte-identical, and
 * B's copy is committed with the scheduler's created_at (so it expires with the others). */
static void test_export_of_a_remote_task(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600];
    import_on(A, 10 * MiB + 123, 202, 1, src, sizeof(src), id); /* 3 pieces of 4 MiB */
    assert_int_equal(stat_local(B, id, NULL), DFC_GRPC_NOT_FOUND);
    snprintf(out, sizeof(out), "%s/out-b-202", cl.dir);
    assert_int_equal(export_on(B, id, out, false), 0);
    assert_true(harness_same_file(src, out));

    Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *local = NULL;
    assert_int_equal(stat_local(B, id, &local), DFC_GRPC_OK);
    assert_false(local->persistent); /* a user's export is no persistent replica */
    assert_int_equal(local->content_length, 10 * MiB + 123);

    struct dfc_rpc_client *s = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(cl.sched.target, NULL, &s, &err), 0);
    Scheduler__V2__StatPersistentCacheTaskRequest sreq =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    sreq.host_id = B->host_id;
    sreq.task_id = id;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(dfc_rpc_unary(s, &sched_stat_m, &sreq.base, TIMEOUT_MS, &resp, &err), 0);
    const Common__V2__PersistentCacheTask *t = (const void *)resp;
    assert_non_null(t->created_at);
    assert_non_null(local->created_at);
    assert_int_equal(local->created_at->seconds, t->created_at->seconds);
    assert_int_equal(local->created_at->nanos, t->created_at->nanos);
    assert_int_equal(t->current_replica_count, 2); /* A's and now B's */
    dfc_rpc_msg_free(resp);
    dfc_rpc_msg_free(&local->base);
    dfc_rpc_client_free(s);
    assert_true(harness_log_has(&B->h, "p2p.download_done"));
}

/* PublishContentVolume of one file "model" holding id on n, waiting up to timeout_ns for it to
 * arrive from peers: the gRPC code; the answer's path into path (PATH_MAX), or the message. */
static int publish_on(struct p2p_node *n, const char *pin, const char *id, int64_t timeout_ns,
                      char *path, struct dfc_error *err) {
    struct dfc_rpc_client *c = harness_client(&n->h);
    Dfc__Dfdaemon__V1__ContentVolumeFile file = DFC__DFDAEMON__V1__CONTENT_VOLUME_FILE__INIT;
    Dfc__Dfdaemon__V1__ContentVolumeFile *files[] = {&file};
    Dfc__Dfdaemon__V1__PublishContentVolumeRequest req =
        DFC__DFDAEMON__V1__PUBLISH_CONTENT_VOLUME_REQUEST__INIT;
    Google__Protobuf__Duration timeout = GOOGLE__PROTOBUF__DURATION__INIT;
    dfc_pb_duration_from_ns(timeout_ns, &timeout);
    file.name = "model";
    file.task_id = (char *)id;
    req.pin_id = (char *)pin;
    req.files = files;
    req.n_files = 1;
    req.target_path = "/pods/x/mount";
    req.fetch_timeout = &timeout;
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(c, &publish_m, &req.base, TIMEOUT_MS, &resp, err);
    if (r == 0) {
        snprintf(path, PATH_MAX, "%s",
                 ((Dfc__Dfdaemon__V1__PublishContentVolumeResponse *)resp)->path);
    }
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* A content volume of a task the node lacks: publish starts the download from peers; past its
 * fetch_timeout it answers DEADLINE_EXCEEDED with the progress and the download goes on, and
 * the retry gets the volume, the store's inode holding the importer's bytes. A task no peer
 * has is NOT_FOUND. */
static void test_content_volume_fetched_from_a_peer(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], path[PATH_MAX], file[PATH_MAX + 16], content[PATH_MAX];
    struct dfc_error err;
    import_on(A, 10 * MiB + 77, 231, 1, src, sizeof(src), id); /* 3 pieces of 4 MiB */
    assert_int_equal(stat_local(C, id, NULL), DFC_GRPC_NOT_FOUND);
    assert_int_equal(publish_on(C, "fetch", id, 1, path, &err), DFC_GRPC_DEADLINE_EXCEEDED);
    char want[128];
    snprintf(want, sizeof(want), "task %s: ", id);
    if (strstr(err.msg, want) == NULL || strstr(err.msg, "retry later") == NULL) {
        fail_msg("no progress in `%s`", err.msg);
    }
    assert_int_equal(publish_on(C, "fetch", id, 60 * (int64_t)1000000000, path, &err), 0);
    snprintf(file, sizeof(file), "%s/model", path);
    assert_true(harness_same_file(src, file));
    p2p_content_path(C, id, content, sizeof(content));
    struct stat a, b;
    assert_int_equal(stat(file, &a), 0);
    assert_int_equal(stat(content, &b), 0);
    assert_true(a.st_ino == b.st_ino);
    assert_true(harness_log_has(&C->h, "event=volume.fetched"));
    const char *absent = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    assert_int_equal(publish_on(C, "absent", absent, 5 * (int64_t)1000000000, path, &err),
                     DFC_GRPC_NOT_FOUND);
}

/* SyncHost streams from one remote: before, 32 of them held every upload worker streams may
 * use, and the node stopped serving as a parent (its SyncPersistentCachePieces calls queued).
 * Now only upload.server.maxSyncHostStreamsPerHost (4) run, the rest are refused at once
 * RESOURCE_EXHAUSTED naming the limit, and a download from the node still works meanwhile. */
static void test_sync_host_streams_are_capped(void **state) {
    REQUIRE_CLUSTER();
    enum { HELD = 4, MORE = 32 };
    char src[512], id[65], out[600];
    import_on(B, 4 * MiB + 77, 303, 1, src, sizeof(src), id);
    struct dfc_rpc_client *c = tcp_client(B);
    Dfdaemon__V2__SyncHostRequest hreq = DFDAEMON__V2__SYNC_HOST_REQUEST__INIT;
    hreq.host_id = "test";
    hreq.peer_id = "test";
    struct dfc_error err;
    struct dfc_rpc_stream *held[HELD];
    for (int i = 0; i < HELD; i++) {
        ProtobufCMessage *m = NULL;
        assert_int_equal(dfc_rpc_stream_open(c, &sync_host_m, TIMEOUT_MS, &held[i], &err), 0);
        assert_int_equal(dfc_rpc_stream_send(held[i], &hreq.base, &err), 0);
        assert_int_equal(dfc_rpc_stream_recv(held[i], sync_host_m.resp, &m, &err), 1);
        dfc_rpc_msg_free(m);
    }
    for (int i = 0; i < MORE; i++) {
        struct dfc_rpc_stream *st = NULL;
        ProtobufCMessage *m = NULL;
        assert_int_equal(dfc_rpc_stream_open(c, &sync_host_m, TIMEOUT_MS, &st, &err), 0);
        assert_int_equal(dfc_rpc_stream_send(st, &hreq.base, &err), 0);
        int r = dfc_rpc_stream_recv(st, sync_host_m.resp, &m, &err);
        assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(err.msg, "(upload.server.maxSyncHostStreamsPerHost)"));
        dfc_rpc_stream_free(st);
    }
    /* B still serves as a parent while its share is held. */
    snprintf(out, sizeof(out), "%s/out-a-303", cl.dir);
    assert_int_equal(export_on(A, id, out, false), 0);
    assert_true(harness_same_file(src, out));
    for (int i = 0; i < HELD; i++) {
        dfc_rpc_stream_free(held[i]); /* cancels */
    }
    dfc_rpc_client_free(c);
    assert_true(harness_log_has(&B->h, "event=rpc.stream_refused"));
}

/* Two parents (A imported, B exported): C asks both for their piece lists at once and its
 * workers start on the first answers, each waiting for its own piece to be reported. A
 * worker that went ahead without waiting would skip pieces that no answer had named yet and
 * need a second round; all 9 pieces (more than the 8 workers) come in the first. */
static void test_two_parents_in_one_round(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600], want[160];
    size_t len = 33 * MiB; /* 9 pieces of 4 MiB */
    import_on(A, len, 515, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-b-515", cl.dir);
    assert_int_equal(export_on(B, id, out, false), 0);
    snprintf(out, sizeof(out), "%s/out-c-515", cl.dir);
    assert_int_equal(export_on(C, id, out, false), 0);
    assert_true(harness_same_file(src, out));
    snprintf(want, sizeof(want), "task_id=%s pieces=9 bytes=%zu rounds=1 ", id, len);
    assert_true(harness_log_has(&C->h, want));
}

/* The same with need_piece_content (dfcache --transfer-from-dfdaemon): the pieces reach the
 * caller over the socket as they arrive from the parent, each once. */
static void test_streamed_export_of_a_remote_task(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600];
    import_on(A, 9 * MiB + 7, 303, 1, src, sizeof(src), id);
    assert_int_equal(stat_local(C, id, NULL), DFC_GRPC_NOT_FOUND);
    snprintf(out, sizeof(out), "%s/out-c-303", cl.dir);
    assert_int_equal(export_on(C, id, out, true), 0);
    assert_true(harness_same_file(src, out));
    assert_int_equal(stat_local(C, id, NULL), DFC_GRPC_OK);
    /* A second export is served locally. */
    snprintf(out, sizeof(out), "%s/out-c-303-again", cl.dir);
    assert_int_equal(export_on(C, id, out, true), 0);
    assert_true(harness_same_file(src, out));
}

struct replica_probe {
    const char *id;
    int holder; /* index of the node that holds a persistent copy, or -1 */
};

static bool persistent_copy_placed(void *arg) {
    struct replica_probe *p = arg;
    for (int i = 1; i < 3; i++) {
        Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *t = NULL;
        if (stat_local(&cl.node[i], p->id, &t) == DFC_GRPC_OK && t->persistent) {
            p->holder = i;
        }
        dfc_rpc_msg_free(t != NULL ? &t->base : NULL);
    }
    if (p->holder < 0) {
        usleep(100000);
    }
    return p->holder >= 0;
}

static bool replica_logged(void *arg) {
    struct p2p_node *n = arg;
    bool yes = harness_log_has(&n->h, "event=replica.done");
    if (!yes) {
        usleep(20000);
    }
    return yes;
}

/* persistent_replica_count 2: the scheduler asks B or C for a persistent copy (its
 * DownloadPersistentCacheTask on TCP, persistent=true) within REPLICA_BOUND_MS. */
static void test_persistent_replica_placed(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600];
    import_on(A, 5 * MiB, 404, 2, src, sizeof(src), id);
    struct replica_probe p = {id, -1};
    assert_true(test_wait_for(persistent_copy_placed, &p, REPLICA_BOUND_MS));
    struct p2p_node *n = &cl.node[p.holder];
    /* The copy is visible once committed; the pull's handler logs a moment later. */
    assert_true(test_wait_for(replica_logged, n, REPLICA_BOUND_MS));
    char path[600];
    p2p_content_path(n, id, path, sizeof(path));
    assert_true(harness_same_file(src, path));
    snprintf(out, sizeof(out), "%s/out-404", cl.dir);
    assert_int_equal(export_on(n, id, out, false), 0);
    assert_true(harness_same_file(src, out));
}

/* Whether the scheduler lists a peer of n's host in task id's persistent set, Succeeded. */
static bool persistent_peer_of(const struct p2p_node *n, const char *id) {
    redisReply *r = redis_server_command(&cl.redis,
                                         "SMEMBERS scheduler:scheduler-clusters:1:persistent-cache-"
                                         "tasks:%s:persistent-peers-for-persistent-cache-task",
                                         id);
    bool found = false;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && !found; i++) {
        if (strncmp(r->element[i]->str, n->host_id, strlen(n->host_id)) != 0) {
            continue;
        }
        redisReply *st = redis_server_command(
            &cl.redis,
            "HGET "
            "scheduler:scheduler-clusters:1:persistent-cache-peers-for-persistent-cache-task:%s "
            "state",
            r->element[i]->str);
        found = st->type == REDIS_REPLY_STRING && strcmp(st->str, "Succeeded") == 0;
        freeReplyObject(st);
    }
    freeReplyObject(r);
    return found;
}

struct rejoin_probe {
    struct p2p_node *n;
    const char *id;
};

static bool rejoined(void *arg) {
    struct rejoin_probe *p = arg;
    char text[160];
    snprintf(text, sizeof(text), "event=scheduler.rejoined_task task_id=%s", p->id);
    bool yes = harness_log_has(&p->n->h, text) && persistent_peer_of(p->n, p->id);
    if (!yes) {
        usleep(50000);
    }
    return yes;
}

/* A node restarted with its store: DeleteHost at its stop took its peers, and once it has
 * announced again its copy joins the task again under the same peer id (the scheduler has
 * the uploader's copy, so through the download stream, no piece moved). */
static void test_restarted_node_joins_its_copy_again(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65];
    import_on(A, 3 * MiB, 505, 2, src, sizeof(src), id);
    struct replica_probe p = {id, -1};
    assert_true(test_wait_for(persistent_copy_placed, &p, REPLICA_BOUND_MS));
    struct p2p_node *n = &cl.node[p.holder];
    assert_true(test_wait_for(replica_logged, n, REPLICA_BOUND_MS));
    assert_true(persistent_peer_of(n, id));
    assert_int_equal(harness_stop(&n->h, SIGTERM), 0);
    assert_false(persistent_peer_of(n, id)); /* DeleteHost removed it */
    harness_restart(&n->h);
    struct rejoin_probe rp = {n, id};
    assert_true(test_wait_for(rejoined, &rp, REPLICA_BOUND_MS));
    assert_true(harness_log_has(&n->h, "how=joined"));
    char path[600];
    p2p_content_path(n, id, path, sizeof(path));
    assert_true(harness_same_file(src, path)); /* the copy it had, still in place */
}

/* Whether a failure event naming task id appears in a node's or the scheduler's log. */
static bool pull_failure_logged(const char *id) {
    char text[200];
    snprintf(text, sizeof(text), "event=placement.pull_failed task_id=%s", id);
    if (sched_harness_log_has(&cl.sched, text)) {
        return true;
    }
    snprintf(text, sizeof(text), "event=p2p.download_failed task_id=%s", id);
    for (int i = 1; i < 3; i++) {
        if (harness_log_has(&cl.node[i].h, text)) {
            return true;
        }
    }
    return false;
}

/* Replication starts only once the importer has committed: Finished follows the commit, so
 * the first pull the scheduler asks for finds the task at A (no NOT_FOUND from A's
 * SyncPersistentCachePieces, no "no candidate parents found"). Ten distinct files, so the old
 * order (Finished before the commit) shows its race. */
static void test_replication_waits_for_the_commit(void **state) {
    REQUIRE_CLUSTER();
    for (unsigned i = 0; i < 10; i++) {
        char src[512], id[65];
        import_on(A, 256 * 1024 + i, 900 + i, 2, src, sizeof(src), id);
        struct replica_probe p = {id, -1};
        assert_true(test_wait_for(persistent_copy_placed, &p, REPLICA_BOUND_MS));
        assert_true(test_wait_for(replica_logged, &cl.node[p.holder], REPLICA_BOUND_MS));
        if (pull_failure_logged(id)) {
            fail_msg("import %u (%s): the first pull failed: Finished came before the commit", i,
                     id);
        }
    }
}

/* dfcache stat on a node without a copy asks the scheduler (as upstream): the task is found,
 * with the cluster's counts (A's upload and the placed replica), not NOT_FOUND. */
static void test_stat_answers_from_the_scheduler(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65];
    import_on(A, 300 * 1024, 950, 2, src, sizeof(src), id);
    struct replica_probe p = {id, -1};
    assert_true(test_wait_for(persistent_copy_placed, &p, REPLICA_BOUND_MS));
    struct p2p_node *bare = p.holder == 1 ? C : B;
    assert_int_equal(stat_local(bare, id, NULL), DFC_GRPC_NOT_FOUND);
    char out[2048], errb[2048];
    const char *argv[] = {"stat", id, NULL};
    int code = harness_dfcache(&bare->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache stat on %s: %s%s\n", bare->ip, out, errb);
    }
    assert_int_equal(code, 0);
    assert_non_null(strstr(out, id));
    assert_non_null(strstr(out, "State:                Succeeded"));
    assert_non_null(strstr(out, "Persistent replicas:  2 of 2"));
    assert_non_null(strstr(out, "Persistent:           - (no copy on this node)"));
    assert_non_null(strstr(out, "Scheduler:            answered"));
    assert_int_equal(stat_local(bare, id, NULL), DFC_GRPC_NOT_FOUND); /* nothing was fetched */
}

/* Overwrites 64 bytes at the start of every piece of a content file (a bad disk). */
static void corrupt_pieces(const char *path, size_t len) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char junk[64];
    memset(junk, 0x5a, sizeof(junk));
    for (size_t off = 0; off < len; off += 4 * MiB) {
        assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)off), (ssize_t)sizeof(junk));
    }
    close(fd);
}

/* A parent whose content went bad: its pieces fail the CRC at the receiver, which fetches them
 * from the other parent and still gets the right bytes. */
static void test_corrupt_parent_is_routed_around(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600], path[600];
    size_t len = 32 * MiB + 5; /* 9 pieces: both parents are given some of them */
    import_on(A, len, 505, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-b-505", cl.dir);
    assert_int_equal(export_on(B, id, out, false), 0); /* B holds a good copy */
    p2p_content_path(A, id, path, sizeof(path));
    corrupt_pieces(path, len);
    snprintf(out, sizeof(out), "%s/out-c-505", cl.dir);
    assert_int_equal(export_on(C, id, out, false), 0);
    assert_true(harness_same_file(src, out));
    assert_true(harness_log_has(&C->h, "event=p2p.piece_failed"));
    assert_true(harness_log_has(&C->h, "code=DATA_LOSS"));
    p2p_content_path(C, id, path, sizeof(path));
    assert_true(harness_same_file(src, path));
}

/* Re-forges the CRC-32 of every piece of task id in n's metadata to that of the bytes now in
 * its content file (len bytes, 4 MiB pieces): a parent lying consistently, whose pieces pass
 * every CRC check (its own read path's and the receiver's). */
static void forge_crcs(struct p2p_node *n, const char *id, size_t len) {
    char path[600];
    p2p_content_path(n, id, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint8_t *buf = malloc(4 * MiB);
    assert_non_null(buf);
    for (size_t off = 0, i = 0; off < len; off += 4 * MiB, i++) {
        size_t want = len - off < 4 * MiB ? len - off : 4 * MiB;
        assert_int_equal(pread(fd, buf, want, (off_t)off), (ssize_t)want);
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "sqlite3 '%s/metadata/pcache.db' \"UPDATE pieces SET digest = 'crc32:%u' WHERE "
                 "task_id = '%s' AND number = %zu\"",
                 n->h.store, (unsigned)dfc_crc32_update(0, buf, want), id, i);
        assert_int_equal(system(cmd), 0);
    }
    free(buf);
    close(fd);
}

static bool excluded_at_scheduler(const char *id, const char *host_id) {
    redisReply *r = redis_server_command(
        &cl.redis,
        "SISMEMBER scheduler:scheduler-clusters:1:persistent-cache-task-excluded-parents:%s %s", id,
        host_id);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

/* A task of len bytes imported on A (seed), copied whole to B; then A's copy rewritten on disk
 * and its CRCs re-forged to match: A lies consistently, B is honest. */
static void lying_a_honest_b(size_t len, unsigned seed, char *src, size_t src_size, char id[65]) {
    char out[600], path[600];
    import_on(A, len, seed, 1, src, src_size, id);
    snprintf(out, sizeof(out), "%s/out-b-%u", cl.dir, seed);
    assert_int_equal(export_on(B, id, out, false), 0); /* B holds a good copy */
    p2p_content_path(A, id, path, sizeof(path));
    corrupt_pieces(path, len);
    forge_crcs(A, id, len);
}

/* A lying parent (docs/integrity.md): A's copy is rewritten on disk and its CRCs re-forged to
 * match, so its pieces pass every CRC. C checks each piece's SHA-256 against the digests A
 * recorded at its import: A's pieces are refused before they count, A is reported
 * (temporary = false) and excluded at the scheduler, and C completes from B with the right
 * bytes. Before verification C committed (and would re-serve) A's bytes. */
static void test_lying_parent_with_forged_crcs(void **state) {
    REQUIRE_CLUSTER();
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        skip(); /* needs the sqlite3 shell to forge the CRCs */
    }
    char src[512], id[65], out[600], path[600];
    size_t len = 12 * MiB + 5; /* 4 pieces: both parents come first for some of them */
    lying_a_honest_b(len, 808, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-c-808", cl.dir);
    assert_int_equal(export_on(C, id, out, false), 0);
    assert_true(harness_same_file(src, out));
    p2p_content_path(C, id, path, sizeof(path));
    assert_true(harness_same_file(src, path));
    assert_true(harness_log_has(&C->h, "its SHA-256 is not the recorded one"));
    assert_true(excluded_at_scheduler(id, A->host_id));
    char tmpdir[600];
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", C->h.store);
    assert_int_equal(harness_count(tmpdir), 0);
}

/* A pre-claimed id (docs/integrity.md): A registers G's content-derived id first, with other
 * bytes W of G's length (content_for_calculating_task_id = G's bytes + "PERSISTENT_CACHE",
 * which hashes to that id), and records W's digests. B's honest import of G used to be kept
 * locally without a peer, so every export got W; now it joins the task as a persistent peer
 * and records G's digests. C's export checks against A's record first, finds the content does
 * not hash to the id, tries B's record (where A's bytes are a lie) and commits G. */
static void test_pre_claimed_id_and_honest_importer(void **state) {
    REQUIRE_CLUSTER();
    char g[600], w[600], id[65], out[600], errb[2048], outb[1024];
    static char g_bytes[3001], preimage[3100];
    for (size_t i = 0; i < 3000; i++) {
        g_bytes[i] = (char)('a' + i % 26);
    }
    snprintf(preimage, sizeof(preimage), "%sPERSISTENT_CACHE", g_bytes);
    snprintf(g, sizeof(g), "%s/g-909", cl.dir);
    snprintf(w, sizeof(w), "%s/w-909", cl.dir);
    FILE *fp = fopen(g, "w");
    fputs(g_bytes, fp);
    fclose(fp);
    harness_write_file(w, 3000, 909); /* W: other bytes, the same length */
    /* One replica: no replication pull of the claim may hold a Running persistent peer of
     * the task (counted in the set) while B's join is checked below. */
    const char *claim[] = {"import",
                           "--no-progress",
                           "--persistent-replica-count",
                           "1",
                           "--content-for-calculating-task-id",
                           preimage,
                           w,
                           NULL};
    assert_int_equal(harness_dfcache(&A->h, -1, outb, sizeof(outb), errb, sizeof(errb), claim), 0);
    harness_done_id(outb, id);
    char g_id[65];
    assert_int_equal(dfc_sha256_hex(preimage, strlen(preimage), g_id), 0);
    assert_string_equal(id, g_id);
    const char *honest[] = {"import", "--no-progress", g, NULL};
    int code = harness_dfcache(&B->h, -1, outb, sizeof(outb), errb, sizeof(errb), honest);
    if (code != 0) {
        fprintf(stderr, "dfcache import on B: %s%s\n", outb, errb);
    }
    assert_int_equal(code, 0);
    assert_non_null(strstr(outb, id));
    assert_false(harness_log_has(&B->h, "event=import.exists_in_cluster"));
    /* B's copy is a persistent peer of the task, beside A's. */
    redisReply *peers = redis_server_command(
        &cl.redis,
        "SCARD scheduler:scheduler-clusters:1:persistent-cache-tasks:%s:persistent-peers-for-"
        "persistent-cache-task",
        id);
    assert_int_equal(peers->integer, 2);
    freeReplyObject(peers);

    snprintf(out, sizeof(out), "%s/out-c-909", cl.dir);
    assert_int_equal(export_on(C, id, out, false), 0);
    assert_true(harness_same_file(g, out));
    assert_true(harness_log_has(&C->h, "event=p2p.next_record"));
    p2p_content_path(C, id, out, sizeof(out));
    assert_true(harness_same_file(g, out));
}

/* Without a record (an upstream importer, or the record gone): the content is hashed as it
 * lands and committed only when it hashes to the task id; a task whose id comes from
 * content_for_calculating_task_id then has nothing tying its bytes to the id and is refused,
 * leaving nothing behind. */
static void test_no_record_checks_the_id_rule(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600], tmpdir[600], key[256];
    size_t len = 9 * MiB + 11; /* 3 pieces */
    import_on(A, len, 919, 1, src, sizeof(src), id);
    snprintf(key, sizeof(key), "scheduler:scheduler-clusters:1:persistent-cache-task-digests:%s",
             id);
    redisReply *del = redis_server_command(&cl.redis, "DEL %s", key);
    assert_int_equal(del->integer, 1);
    freeReplyObject(del);
    snprintf(out, sizeof(out), "%s/out-c-919", cl.dir);
    assert_int_equal(export_on(C, id, out, false), 0);
    assert_true(harness_same_file(src, out));

    char named[512], outb[1024], errb[2048], sid[65];
    snprintf(named, sizeof(named), "%s/src-929", cl.dir);
    harness_write_file(named, 5 * MiB, 929);
    /* One replica: no replication pull may fetch it while its record is still there. */
    const char *argv[] = {"import",
                          "--no-progress",
                          "--persistent-replica-count",
                          "1",
                          "--content-for-calculating-task-id",
                          "model-929",
                          named,
                          NULL};
    assert_int_equal(harness_dfcache(&A->h, -1, outb, sizeof(outb), errb, sizeof(errb), argv), 0);
    harness_done_id(outb, sid);
    snprintf(key, sizeof(key), "scheduler:scheduler-clusters:1:persistent-cache-task-digests:%s",
             sid);
    del = redis_server_command(&cl.redis, "DEL %s", key);
    assert_int_equal(del->integer, 1);
    freeReplyObject(del);
    snprintf(out, sizeof(out), "%s/out-c-929", cl.dir);
    assert_int_not_equal(export_on(C, sid, out, false), 0);
    assert_true(harness_log_has(&C->h, "event=p2p.content_refused"));
    assert_int_equal(stat_local(C, sid, NULL), DFC_GRPC_NOT_FOUND);
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", C->h.store);
    assert_int_equal(harness_count(tmpdir), 0);
}

/* DeletePersistentCacheTask on TCP is the scheduler's call only: from an address that is not
 * one of scheduler.addrs it is PERMISSION_DENIED naming the address, and the task stays. Node
 * D's scheduler is at 127.0.0.2 (nobody listens there: D runs standalone-like), so the test,
 * whose connections come from 127.0.0.1, is not it; on A (scheduler at 127.0.0.1) the same
 * call from the same test is accepted. */
static void test_tcp_delete_only_from_the_scheduler(void **state) {
    REQUIRE_CLUSTER();
    struct p2p_node *d = &cl.node[3]; /* stopped by cluster_down if an assertion fails */
    char away[64];
    snprintf(away, sizeof(away), "127.0.0.2:%d", p2p_free_port("127.0.0.2"));
    p2p_node_start(d, "127.0.0.14", "node-d", away, NULL);
    char src[512], id[65];
    import_on(d, 2 * MiB, 606, 1, src, sizeof(src), id);
    struct dfc_error err;
    assert_int_equal(tcp_delete(d, id, &err), DFC_GRPC_PERMISSION_DENIED);
    assert_non_null(strstr(err.msg, "127.0.0.1"));
    assert_non_null(strstr(err.msg, "only the scheduler may delete a task"));
    assert_int_equal(stat_local(d, id, NULL), DFC_GRPC_OK);
    assert_int_equal(harness_stop(&d->h, SIGTERM), 0);

    import_on(A, 1 * MiB, 607, 1, src, sizeof(src), id);
    assert_int_equal(tcp_delete(A, id, &err), DFC_GRPC_OK);
    assert_int_equal(stat_local(A, id, NULL), DFC_GRPC_NOT_FOUND);
}

/* How many lines of n's log hold both text and also. */
static int log_count(struct p2p_node *n, const char *text, const char *also) {
    FILE *f = fopen(n->h.log, "r");
    assert_non_null(f);
    char line[4096];
    int k = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        k += strstr(line, text) != NULL && strstr(line, also) != NULL;
    }
    fclose(f);
    return k;
}

struct drain {
    struct dfc_rpc_stream *st;
    uint64_t bytes;
    int pieces, r;
};

static void *drain_main(void *arg) {
    struct drain *d = arg;
    ProtobufCMessage *m = NULL;
    struct dfc_error err;
    while ((d->r = dfc_rpc_stream_recv(d->st, hm.download.resp, &m, &err)) == 1) {
        const Dfdaemon__V2__DownloadPersistentCacheTaskResponse *resp = (const void *)m;
        if (resp->response_case == PIECE_FINISHED) {
            d->bytes += resp->download_piece_finished_response->piece->content.len;
            d->pieces++;
        }
        dfc_rpc_msg_free(m);
    }
    return NULL;
}

/* Two exports of one remote task at once share one download: one p2p.download_done, and each
 * caller gets every piece exactly once (the second from the committed copy). */
static void test_concurrent_exports_share_one_download(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], path[600];
    size_t len = 24 * MiB + 3; /* 7 pieces */
    import_on(A, len, 808, 1, src, sizeof(src), id);
    struct dfc_rpc_client *c = harness_client(&C->h);
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = id;
    req.need_piece_content = true;
    struct drain d[2] = {{0}};
    pthread_t th[2];
    struct dfc_error err;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dfc_rpc_stream_open(c, &hm.download, TIMEOUT_MS, &d[i].st, &err), 0);
        assert_int_equal(dfc_rpc_stream_send(d[i].st, &req.base, &err), 0);
        assert_int_equal(dfc_rpc_stream_close_send(d[i].st, &err), 0);
        assert_int_equal(pthread_create(&th[i], NULL, drain_main, &d[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        dfc_rpc_stream_free(d[i].st);
        assert_int_equal(d[i].r, 0);
        assert_int_equal(d[i].bytes, len);
        assert_int_equal(d[i].pieces, 7);
    }
    dfc_rpc_client_free(c);
    assert_int_equal(log_count(C, "p2p.download_done", id), 1);
    p2p_content_path(C, id, path, sizeof(path));
    assert_true(harness_same_file(src, path));
}

/* SyncPersistentCachePieces for piece 0 of id on n's TCP port: the gRPC code of its end (OK
 * after the pieces n holds), the message in err. */
static int sync_piece0(const struct p2p_node *n, const char *id, struct dfc_error *err) {
    struct dfc_rpc_client *c = tcp_client(n);
    uint32_t nums[] = {0};
    Dfdaemon__V2__SyncPersistentCachePiecesRequest req =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_REQUEST__INIT;
    req.host_id = "test";
    req.task_id = (char *)id;
    req.interested_piece_numbers = nums;
    req.n_interested_piece_numbers = 1;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &sync_pieces_m, TIMEOUT_MS, &st, err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, err), 0);
    ProtobufCMessage *m = NULL;
    int r;
    while ((r = dfc_rpc_stream_recv(st, sync_pieces_m.resp, &m, err)) == 1) {
        dfc_rpc_msg_free(m);
    }
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    return dfc_error_to_grpc(r);
}

static bool announced(void *arg) {
    const struct p2p_node *n = arg;
    return p2p_host_announced(&cl.redis, n->host_id);
}

/* A node SIGKILLed mid-download (a piece written, its only parent then stopped): restarted, it
 * has no spool left and answers NOT_FOUND for the task's pieces, over Vortex and
 * SyncPersistentCachePieces: nothing of a half-written replica is served after a restart. */
static void test_killed_mid_download_serves_nothing_after_restart(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], tmpdir[600];
    size_t len = 256 * MiB; /* 64 pieces */
    import_on(A, len, 808, 1, src, sizeof(src), id);
    struct dfc_rpc_client *c = harness_client(&C->h);
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = id;
    req.need_piece_content = true;
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &hm.download, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    bool piece = false;
    while (!piece && dfc_rpc_stream_recv(st, hm.download.resp, &m, &err) == 1) {
        piece = ((const Dfdaemon__V2__DownloadPersistentCacheTaskResponse *)m)->response_case ==
                PIECE_FINISHED;
        dfc_rpc_msg_free(m);
    }
    assert_true(piece);
    assert_int_equal(kill(A->h.pid, SIGSTOP), 0); /* C's download stalls mid-way */
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", C->h.store);
    assert_int_equal(harness_count(tmpdir), 1); /* the spool, pieces in it */
    harness_stop(&C->h, SIGKILL);
    assert_int_equal(kill(A->h.pid, SIGCONT), 0);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    assert_int_equal(harness_count(tmpdir), 1); /* left by the killed daemon */

    harness_restart(&C->h);
    assert_int_equal(harness_count(tmpdir), 0);
    assert_int_equal(stat_local(C, id, NULL), DFC_GRPC_NOT_FOUND);
    assert_int_equal(sync_piece0(C, id, &err), DFC_GRPC_NOT_FOUND);
    char want[128];
    snprintf(want, sizeof(want), "persistent cache task %s not found", id);
    assert_non_null(strstr(err.msg, want));
    uint8_t *buf = malloc(4 * MiB);
    assert_int_equal(dfd_vortex_fetch(NULL, NULL, C->ip, (uint16_t)C->vortex_port, id, 0, 0,
                                      4 * MiB, buf, TIMEOUT_MS * (int64_t)1000000, NULL, &err),
                     -ENOENT);
    free(buf);
    assert_int_equal(sync_piece0(A, id, &err), DFC_GRPC_OK); /* the parent serves it on */
    assert_true(test_wait_for(announced, C, REPLICA_BOUND_MS));
}

struct bg_export {
    struct p2p_node *n;
    const char *id, *out;
    int r;
    int done; /* atomic: the export returned */
};

static void *bg_export_main(void *arg) {
    struct bg_export *b = arg;
    b->r = export_on(b->n, b->id, b->out, false);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The pieces C's download of id took from ip, from its p2p.download_done line (-1: none). */
static int pieces_from(struct p2p_node *n, const char *id, const char *ip) {
    FILE *f = fopen(n->h.log, "r");
    assert_non_null(f);
    char line[4096], want[96];
    snprintf(want, sizeof(want), "%s:", ip);
    int k = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *by = strstr(line, "pieces_by_parent=");
        if (strstr(line, "event=p2p.download_done") == NULL || strstr(line, id) == NULL ||
            by == NULL) {
            continue;
        }
        const char *at = strstr(by, want);
        k = at != NULL ? (int)strtol(at + strlen(want), NULL, 10) : 0;
    }
    fclose(f);
    return k;
}

/* The pieces of id that n serves over Vortex right now, each checked against src (-1: a piece
 * whose bytes differ). */
static int vortex_pieces(struct p2p_node *n, const char *id, const char *src, size_t len) {
    uint8_t *buf = malloc(4 * MiB), *want = malloc(4 * MiB);
    assert_non_null(buf);
    assert_non_null(want);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    int got = 0;
    for (uint32_t k = 0; k * 4 * MiB < len && got >= 0; k++) {
        size_t plen = len - k * 4 * MiB < 4 * MiB ? len - k * 4 * MiB : 4 * MiB;
        struct dfc_error err;
        if (dfd_vortex_fetch(NULL, NULL, n->ip, (uint16_t)n->vortex_port, id, k,
                             (uint64_t)k * 4 * MiB, plen, buf, TIMEOUT_MS * DFC_NS_PER_MS, NULL,
                             &err) != 0) {
            continue; /* not held yet: NOT_FOUND */
        }
        assert_int_equal(pread(fd, want, plen, (off_t)k * 4 * MiB), (ssize_t)plen);
        got = memcmp(buf, want, plen) == 0 ? got + 1 : -1;
    }
    close(fd);
    free(buf);
    free(want);
    return got;
}

/* A parent still downloading serves the pieces it holds (docs/swarm.md): E fetches a 64 MiB
 * task from A at 8 MiB/s (download.rateLimit); while it does, its Vortex server hands out the
 * pieces it has (the right bytes, the others NOT_FOUND), and C, exporting the task meanwhile,
 * is offered E (a Running peer) beside A. */
static void test_downloading_parent_serves_its_pieces(void **state) {
    REQUIRE_CLUSTER();
    struct p2p_node *E = &cl.node[4]; /* stopped by cluster_down */
    p2p_node_start_limited(E, "127.0.0.15", "node-e", cl.sched.target, &cl.redis, "8MiB");
    char src[512], id[65], out_e[600], out_c[600];
    size_t len = 64 * MiB; /* 16 pieces: 8 s for E */
    import_on(A, len, 939, 1, src, sizeof(src), id);
    snprintf(out_e, sizeof(out_e), "%s/out-e-939", cl.dir);
    snprintf(out_c, sizeof(out_c), "%s/out-c-939", cl.dir);
    struct bg_export b = {.n = E, .id = id, .out = out_e};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_export_main, &b), 0);
    int served = 0;
    for (int i = 0; i < 50 && served < 2; i++) { /* E holds two pieces within a few seconds */
        usleep(100 * 1000);
        served = vortex_pieces(E, id, src, len);
        assert_true(served >= 0);
    }
    bool e_running = __atomic_load_n(&b.done, __ATOMIC_ACQUIRE) == 0;
    printf("# E served %d of 16 pieces while %s\n", served,
           e_running ? "still downloading" : "done");
    assert_true(served >= 2 && served < 16);
    assert_true(e_running); /* 64 MiB at 8 MiB/s: E cannot be done yet */
    assert_int_equal(export_on(C, id, out_c, false), 0);
    assert_true(harness_same_file(src, out_c));
    printf("# C took %d of 16 pieces from E\n", pieces_from(C, id, E->ip)); /* A is faster */
    pthread_join(th, NULL);
    assert_int_equal(b.r, 0);
    assert_true(harness_same_file(src, out_e));
}

/* A lying parent set aside while the download goes on (E at 8 MiB/s: seconds): E excludes A
 * at its first piece, and every later request for more parents names A, whole as the
 * scheduler sent it (a Reschedule's candidate_parents must be whole peers). The scheduler
 * accepts them: E never loses its scheduler stream, and tells it the download finished.
 * Before, A went by its id alone, the scheduler refused the request INVALID_ARGUMENT
 * ("candidate_parents[0].cost: required") and E finished without telling it. */
static void test_lying_parent_named_in_reschedules(void **state) {
    REQUIRE_CLUSTER();
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        skip(); /* needs the sqlite3 shell to forge the CRCs */
    }
    struct p2p_node *E = &cl.node[4]; /* stopped by cluster_down */
    if (E->h.pid <= 0) {
        p2p_node_start_limited(E, "127.0.0.15", "node-e", cl.sched.target, &cl.redis, "8MiB");
    }
    char src[512], id[65], out[600];
    size_t len = 32 * MiB + 5; /* 9 pieces: 4 s for E */
    lying_a_honest_b(len, 949, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-e-949", cl.dir);
    assert_int_equal(export_on(E, id, out, false), 0);
    assert_true(harness_same_file(src, out));
    assert_true(harness_log_has(&E->h, "its SHA-256 is not the recorded one"));
    assert_true(excluded_at_scheduler(id, A->host_id));
    assert_false(harness_log_has(&E->h, "p2p.scheduler_lost"));
    assert_false(harness_log_has(&E->h, "p2p.finished_not_told"));
}

/* A parent killed (SIGKILL) while a download from it runs: the download finishes from the
 * other parent, or fails cleanly, leaving no task and nothing in tmp/. Runs last: A stays
 * dead. */
static void test_parent_killed_mid_download(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600], tmpdir[600];
    size_t len = 64 * MiB + 1; /* 17 pieces */
    import_on(A, len, 707, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-b-707", cl.dir);
    assert_int_equal(export_on(B, id, out, false), 0);

    struct dfc_rpc_client *c = harness_client(&C->h);
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = id;
    req.need_piece_content = true;
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &hm.download, TIMEOUT_MS, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    /* Started: the replica exists in C's tmp/ and the scheduler is being asked. */
    assert_int_equal(dfc_rpc_stream_recv(st, hm.download.resp, &m, &err), 1);
    dfc_rpc_msg_free(m);
    harness_stop(&A->h, SIGKILL);
    uint64_t got = 0;
    int r;
    while ((r = dfc_rpc_stream_recv(st, hm.download.resp, &m, &err)) == 1) {
        const Dfdaemon__V2__DownloadPersistentCacheTaskResponse *resp = (const void *)m;
        if (resp->response_case == PIECE_FINISHED) {
            got += resp->download_piece_finished_response->piece->content.len;
        }
        dfc_rpc_msg_free(m);
    }
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", C->h.store);
    if (r == 0) {
        printf("# finished from the other parent (%" PRIu64 " bytes)\n", got);
        assert_int_equal(got, len);
        char path[600];
        p2p_content_path(C, id, path, sizeof(path));
        assert_true(harness_same_file(src, path));
    } else {
        printf("# failed cleanly: %s\n", err.msg);
        assert_int_equal(stat_local(C, id, NULL), DFC_GRPC_NOT_FOUND);
    }
    assert_int_equal(harness_count(tmpdir), 0);
}

int main(void) {
    if (harness_resolve_methods(client_methods, DFC_RPC_N(client_methods)) < 0) {
        return 1;
    }
    /* DFC_TEST_FILTER="test_export_*" runs matching cases only (read as every variable is). */
    struct filter_env {
        char *filter;
    } fe = {NULL};
    static const struct dfc_config_row filter_rows[] = {
        {.type = DFC_CFG_STRING,
         .offset = offsetof(struct filter_env, filter),
         .env = "DFC_TEST_FILTER",
         .flags = DFC_OPT_OPTIONAL},
    };
    static const struct dfc_config_schema filter_schema = {"test", filter_rows, 1};
    struct dfc_error err;
    if (dfc_config_defaults(&filter_schema, &fe, &err) == 0 &&
        dfc_config_load_env(&filter_schema, &fe, &err) == 0 && fe.filter != NULL) {
        cmocka_set_test_filter(fe.filter); /* cmocka keeps the pointer: fe lives in main */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_pieces_absent_task_and_bounds),
        cmocka_unit_test(test_tcp_refuses_paths_and_content_and_syncs_host),
        cmocka_unit_test(test_export_of_a_remote_task),
        cmocka_unit_test(test_sync_host_streams_are_capped),
        cmocka_unit_test(test_two_parents_in_one_round),
        cmocka_unit_test(test_streamed_export_of_a_remote_task),
        cmocka_unit_test(test_persistent_replica_placed),
        cmocka_unit_test(test_restarted_node_joins_its_copy_again),
        cmocka_unit_test(test_replication_waits_for_the_commit),
        cmocka_unit_test(test_stat_answers_from_the_scheduler),
        cmocka_unit_test(test_corrupt_parent_is_routed_around),
        cmocka_unit_test(test_lying_parent_with_forged_crcs),
        cmocka_unit_test(test_pre_claimed_id_and_honest_importer),
        cmocka_unit_test(test_no_record_checks_the_id_rule),
        cmocka_unit_test(test_tcp_delete_only_from_the_scheduler),
        cmocka_unit_test(test_concurrent_exports_share_one_download),
        cmocka_unit_test(test_content_volume_fetched_from_a_peer),
        cmocka_unit_test(test_downloading_parent_serves_its_pieces),
        cmocka_unit_test(test_lying_parent_named_in_reschedules),
        cmocka_unit_test(test_killed_mid_download_serves_nothing_after_restart),
        cmocka_unit_test(test_parent_killed_mid_download),
    };
    int status = test_run_group(tests, cluster_up, cluster_down);
    dfc_config_free(&filter_schema, &fe);
    return status;
}
