/*
 * Integration tests of identity as authority at the scheduler (scheduler/authz.h,
 * docs/trust-model.md): a real scheduler under mutual TLS, a real redis-server, and lib's RPC
 * client over loopback TCP with certificates from test/support/make-certs.sh: per-node
 * certificates for hosts A, B and C (SAN IP 127.0.0.41..43), the shared node certificate (URI
 * dragonfly://node, CN dfc-node) and an operator's (DNS ops.test, named in
 * security.operatorIdentities).
 *
 * A stranger's DeletePersistentCacheTask is refused, the importer's and the operator's are
 * taken; a peer is deleted only by its host; a peer stream acts only for its certificate's host
 * and its peers; digests are recorded only for the caller's host; a parent is excluded only on
 * the report of the downloading peer's own host; the shared certificate cannot act for a host a
 * per-node certificate announced; with TLS off any caller still does all of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/digest.h"
#include "dfc/error.h"
#include "dfc/integrity.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define P       "scheduler:scheduler-clusters:1"
#define MiB     ((uint64_t)1 << 20)
#define TIMEOUT 20000

static struct dfc_rpc_client_method announce_host_m, delete_host_m, started_m, finished_m,
    stat_task_m, delete_task_m, delete_peer_m, announce_peer_m, record_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &announce_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeleteHost", &delete_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskStarted", &started_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskFinished",
                          &finished_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "StatPersistentCacheTask", &stat_task_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeletePersistentCacheTask", &delete_task_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeletePersistentCachePeer", &delete_peer_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnouncePersistentCachePeer",
                          &announce_peer_m),
    DFC_RPC_CLIENT_METHOD(dfc__scheduler__v1__persistent_cache_integrity,
                          "RecordPersistentCacheTaskDigests", &record_m),
};

/* ---- hosts ---- */

struct host_msg {
    Common__V2__Host host;
    Common__V2__CPU cpu;
    Common__V2__Memory memory;
    Common__V2__Network network;
    Common__V2__Disk disk;
    Common__V2__Build build;
    char id[128], hostname[64], ip[64];
};

static void host_init(struct host_msg *m, const char *name, const char *ip) {
    common__v2__host__init(&m->host);
    common__v2__cpu__init(&m->cpu);
    common__v2__memory__init(&m->memory);
    common__v2__network__init(&m->network);
    common__v2__disk__init(&m->disk);
    common__v2__build__init(&m->build);
    snprintf(m->hostname, sizeof(m->hostname), "%s", name);
    snprintf(m->ip, sizeof(m->ip), "%s", ip);
    snprintf(m->id, sizeof(m->id), "%s-%s", ip, name);
    m->host.id = m->id;
    m->host.hostname = m->hostname;
    m->host.ip = m->ip;
    m->host.name = m->hostname;
    m->host.port = 1029;
    m->host.download_port = 1029;
    m->host.os = "linux";
    m->cpu.logical_count = 2;
    m->memory.total = 8 * 1024 * MiB;
    m->disk.free = 100 * 1024 * MiB;
    m->build.git_version = "v1.5.1";
    m->host.cpu = &m->cpu;
    m->host.memory = &m->memory;
    m->host.network = &m->network;
    m->host.disk = &m->disk;
    m->host.build = &m->build;
}

/* ---- the cluster: Redis, a mutual-TLS scheduler, certificates ---- */

static struct {
    bool up;
    struct redis_server redis;
    struct sched_harness sched;
    char dir[256];
    struct dfc_rpc_client *a, *b, *c, *shared, *ops;
    struct host_msg ha, hb, hc;
} cl;

static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "`%s` failed\n", cmd);
        abort();
    }
}

/* A client of the scheduler with dir/<name>'s certificate. */
static struct dfc_rpc_client *client_as(const char *name) {
    char ca[300], cert[300], key[300];
    snprintf(ca, sizeof(ca), "%s/%s/ca.crt", cl.dir, name);
    snprintf(cert, sizeof(cert), "%s/%s/tls.crt", cl.dir, name);
    snprintf(key, sizeof(key), "%s/%s/tls.key", cl.dir, name);
    struct dfc_rpc_client_opts o = {.tls = DFC_TLS_MUTUAL, .tls_files = {ca, cert, key}};
    struct dfc_rpc_client *c;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(cl.sched.target, &o, &c, &err), 0);
    return c;
}

static int announce(struct dfc_rpc_client *c, struct host_msg *m, struct dfc_error *err) {
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    Google__Protobuf__Duration interval = GOOGLE__PROTOBUF__DURATION__INIT;
    interval.seconds = 300;
    r.host = &m->host;
    r.interval = &interval;
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &announce_host_m, &r.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return rc;
}

static int cluster_up(void **state) {
    (void)state;
    if (!redis_harness_available()) {
        return 0;
    }
    test_mkdtemp(cl.dir, sizeof(cl.dir), "sched-authz");
    sh("bash %s ca %s/ca", MAKE_CERTS, cl.dir);
    sh("bash %s leaf %s/ca %s/scheduler IP:127.0.0.1", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/a IP:127.0.0.41 --cn node-a", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/b IP:127.0.0.42 --cn node-b", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/c IP:127.0.0.43 --cn node-c", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/shared DNS:dfc-node,URI:dragonfly://node --cn dfc-node", MAKE_CERTS,
       cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/ops DNS:ops.test --cn dfc-ops", MAKE_CERTS, cl.dir, cl.dir);
    redis_server_start(&cl.redis, NULL);
    char d[300];
    snprintf(d, sizeof(d), "%s/scheduler", cl.dir);
    sched_harness_start_tls_with(&cl.sched, cl.redis.addr, d, "",
                                 "  operatorIdentities: [dragonfly://operator, ops.test]\n");
    cl.a = client_as("a");
    cl.b = client_as("b");
    cl.c = client_as("c");
    cl.shared = client_as("shared");
    cl.ops = client_as("ops");
    host_init(&cl.ha, "node-a", "127.0.0.41");
    host_init(&cl.hb, "node-b", "127.0.0.42");
    host_init(&cl.hc, "node-c", "127.0.0.43");
    struct dfc_error err;
    struct dfc_rpc_client *own[] = {cl.a, cl.b, cl.c};
    struct host_msg *hosts[] = {&cl.ha, &cl.hb, &cl.hc};
    for (int i = 0; i < 3; i++) {
        if (announce(own[i], hosts[i], &err) != 0) {
            fail_msg("announce %s: %s", hosts[i]->id, err.msg);
        }
    }
    cl.up = true;
    return 0;
}

static int cluster_down(void **state) {
    (void)state;
    if (!cl.up) {
        return 0;
    }
    struct dfc_rpc_client *cs[] = {cl.a, cl.b, cl.c, cl.shared, cl.ops};
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        dfc_rpc_client_free(cs[i]);
    }
    int bad = sched_harness_destroy(&cl.sched) != 0;
    redis_server_destroy(&cl.redis);
    test_rmtree(cl.dir);
    return bad;
}

#define REQUIRE_CLUSTER()                                                                          \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_true(cl.up);                                                                        \
    } while (0)

/* ---- calls ---- */

/* Started then Finished of task (len bytes in 4 MiB pieces) by host under peer. */
static int upload(struct dfc_rpc_client *c, const char *host, const char *task, const char *peer,
                  uint64_t len, struct dfc_error *err) {
    Scheduler__V2__UploadPersistentCacheTaskStartedRequest r =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_STARTED_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    r.host_id = (char *)host;
    r.task_id = (char *)task;
    r.peer_id = (char *)peer;
    r.persistent_replica_count = 1;
    r.piece_length = 4 * MiB;
    r.content_length = len;
    r.piece_count = (uint32_t)((len + 4 * MiB - 1) / (4 * MiB));
    r.ttl = &ttl;
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &started_m, &r.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    if (rc < 0) {
        return rc;
    }
    Scheduler__V2__UploadPersistentCacheTaskFinishedRequest fr =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FINISHED_REQUEST__INIT;
    fr.host_id = (char *)host;
    fr.task_id = (char *)task;
    fr.peer_id = (char *)peer;
    out = NULL;
    rc = dfc_rpc_unary(c, &finished_m, &fr.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return rc;
}

/* The gRPC code of DeletePersistentCacheTask(task) naming host. */
static int delete_task(struct dfc_rpc_client *c, const char *host, const char *task,
                       struct dfc_error *err) {
    Scheduler__V2__DeletePersistentCacheTaskRequest r =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    r.host_id = (char *)host;
    r.task_id = (char *)task;
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &delete_task_m, &r.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return dfc_error_to_grpc(rc);
}

static int delete_peer(struct dfc_rpc_client *c, const char *host, const char *task,
                       const char *peer, struct dfc_error *err) {
    Scheduler__V2__DeletePersistentCachePeerRequest r =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    r.host_id = (char *)host;
    r.task_id = (char *)task;
    r.peer_id = (char *)peer;
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &delete_peer_m, &r.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return dfc_error_to_grpc(rc);
}

static int stat_task(struct dfc_rpc_client *c, const char *host, const char *task) {
    Scheduler__V2__StatPersistentCacheTaskRequest r =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    r.host_id = (char *)host;
    r.task_id = (char *)task;
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    int rc = dfc_rpc_unary(c, &stat_task_m, &r.base, TIMEOUT, &out, &err);
    dfc_rpc_msg_free(out);
    return dfc_error_to_grpc(rc);
}

/* A well-formed digest record of task (len bytes, 4 MiB pieces, at most 4) by host. */
struct rec {
    Dfc__Scheduler__V1__RecordPersistentCacheTaskDigestsRequest req;
    uint8_t shas[4][DFC_SHA256_LEN];
    ProtobufCBinaryData pieces[4];
};

static int record(struct dfc_rpc_client *c, struct rec *r, const char *host, const char *task,
                  uint64_t len, struct dfc_error *err) {
    dfc__scheduler__v1__record_persistent_cache_task_digests_request__init(&r->req);
    size_t n = (size_t)((len + 4 * MiB - 1) / (4 * MiB));
    assert_true(n > 0 && n <= 4);
    for (size_t i = 0; i < n; i++) {
        memset(r->shas[i], (int)(i + 1), DFC_SHA256_LEN);
        r->pieces[i].data = r->shas[i];
        r->pieces[i].len = DFC_SHA256_LEN;
    }
    r->req.host_id = (char *)host;
    r->req.task_id = (char *)task;
    r->req.content_sha256 = r->pieces[n - 1]; /* the last piece's digest is the content's */
    r->req.id_basis = "";
    r->req.piece_length = 4 * MiB;
    r->req.content_length = len;
    r->req.piece_sha256 = r->pieces;
    r->req.n_piece_sha256 = n;
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &record_m, &r->req.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return dfc_error_to_grpc(rc);
}

static void task_id(char out[65], unsigned n) {
    snprintf(out, 65, "%064x", n + 0x3100);
}

static long long redis_int(const char *fmt, const char *a, const char *b) {
    redisReply *rep = redis_server_command(&cl.redis, fmt, a, b);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static bool peer_exists(const char *peer) {
    return redis_int("EXISTS " P ":persistent-cache-peers-for-persistent-cache-task:%s%s", peer,
                     "") == 1;
}

/* The message must contain want. */
static void expect_msg(const struct dfc_error *err, const char *want) {
    print_message("%s\n", err->msg);
    if (strstr(err->msg, want) == NULL) {
        fail_msg("want a message containing \"%s\", got \"%s\"", want, err->msg);
    }
}

/* ---- a peer's stream ---- */

typedef Scheduler__V2__AnnouncePersistentCachePeerRequest announce_req;
#define REQ(x) SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_##x

static int send_on(struct dfc_rpc_stream *st, announce_req *m, const char *host, const char *task,
                   const char *peer, struct dfc_error *err) {
    m->host_id = (char *)host;
    m->task_id = (char *)task;
    m->peer_id = (char *)peer;
    return dfc_rpc_stream_send(st, &m->base, err);
}

static int send_register(struct dfc_rpc_stream *st, const char *host, const char *task,
                         const char *peer, struct dfc_error *err) {
    announce_req m = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__RegisterPersistentCachePeerRequest reg =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    reg.piece_length = 4 * MiB;
    reg.piece_count = 2;
    m.request_case = REQ(REGISTER_PERSISTENT_CACHE_PEER_REQUEST);
    m.register_persistent_cache_peer_request = &reg;
    return send_on(st, &m, host, task, peer, err);
}

static int send_piece_failed(struct dfc_rpc_stream *st, const char *host, const char *task,
                             const char *peer, const char *parent, struct dfc_error *err) {
    announce_req m = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFailedRequest pf =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    pf.opt_piece_number_case =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__OPT_PIECE_NUMBER_PIECE_NUMBER;
    pf.piece_number = 0;
    pf.parent_id = (char *)parent;
    pf.temporary = false;
    m.request_case = REQ(DOWNLOAD_PIECE_FAILED_REQUEST);
    m.download_piece_failed_request = &pf;
    return send_on(st, &m, host, task, peer, err);
}

static int send_reschedule(struct dfc_rpc_stream *st, const char *host, const char *task,
                           const char *peer, struct dfc_error *err) {
    announce_req m = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__ReschedulePersistentCachePeerRequest rs =
        SCHEDULER__V2__RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    m.request_case = REQ(RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST);
    m.reschedule_persistent_cache_peer_request = &rs;
    return send_on(st, &m, host, task, peer, err);
}

/* The stream's next answer: its gRPC code (OK with an answer), the message in err. */
static int next(struct dfc_rpc_stream *st, struct dfc_error *err) {
    ProtobufCMessage *msg = NULL;
    int r = dfc_rpc_stream_recv(
        st, &scheduler__v2__announce_persistent_cache_peer_response__descriptor, &msg, err);
    dfc_rpc_msg_free(msg);
    if (r == 0) { /* ended OK without an answer */
        dfc_error_set(err, -EPIPE, "the stream ended without an answer");
        return -1;
    }
    return r > 0 ? DFC_GRPC_OK : dfc_error_to_grpc(r);
}

/* A stream of client c that registers peer of host for task and gets its parents. */
static struct dfc_rpc_stream *downloader(struct dfc_rpc_client *c, const char *host,
                                         const char *task, const char *peer) {
    struct dfc_rpc_stream *st = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_stream_open(c, &announce_peer_m, TIMEOUT, &st, &err), 0);
    assert_int_equal(send_register(st, host, task, peer, &err), 0);
    assert_int_equal(next(st, &err), DFC_GRPC_OK);
    return st;
}

/* ---- tests ---- */

/* A task is deleted only by its importing host or an operator identity: B's delete is refused
 * naming A's host (whatever host B names), A's and the operator's are taken. */
static void test_task_delete_by_importer_or_operator(void **state) {
    REQUIRE_CLUSTER();
    char t1[65], t2[65];
    task_id(t1, 1);
    task_id(t2, 2);
    struct dfc_error err;
    assert_int_equal(upload(cl.a, cl.ha.id, t1, "authz-pa1", 5 * MiB, &err), 0);
    assert_int_equal(
        redis_int("SISMEMBER " P ":persistent-cache-task-importers:%s %s", t1, cl.ha.id), 1);
    assert_int_equal(delete_task(cl.b, cl.hb.id, t1, &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "was imported by host 127.0.0.41-node-a");
    assert_int_equal(delete_task(cl.b, cl.ha.id, t1, &err), DFC_GRPC_PERMISSION_DENIED);
    assert_int_equal(delete_task(cl.shared, cl.ha.id, t1, &err), DFC_GRPC_PERMISSION_DENIED);
    assert_int_equal(stat_task(cl.b, cl.hb.id, t1), DFC_GRPC_OK);
    assert_true(peer_exists("authz-pa1"));

    assert_int_equal(delete_task(cl.a, cl.ha.id, t1, &err), DFC_GRPC_OK);
    assert_int_equal(stat_task(cl.a, cl.ha.id, t1), DFC_GRPC_NOT_FOUND);
    assert_false(peer_exists("authz-pa1"));

    assert_int_equal(upload(cl.a, cl.ha.id, t2, "authz-pa2", 5 * MiB, &err), 0);
    assert_int_equal(delete_task(cl.ops, cl.hb.id, t2, &err), DFC_GRPC_OK);
    assert_int_equal(stat_task(cl.a, cl.ha.id, t2), DFC_GRPC_NOT_FOUND);
    assert_true(sched_harness_log_has(&cl.sched, "event=scheduler.operator_delete"));
}

/* A peer is deleted only by its own host, whichever host the request names. */
static void test_peer_delete_by_its_host(void **state) {
    REQUIRE_CLUSTER();
    char t[65];
    task_id(t, 3);
    struct dfc_error err;
    assert_int_equal(upload(cl.a, cl.ha.id, t, "authz-pa3", 5 * MiB, &err), 0);
    assert_int_equal(delete_peer(cl.b, cl.hb.id, t, "authz-pa3", &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "may not delete a peer of host 127.0.0.41-node-a");
    assert_int_equal(delete_peer(cl.b, cl.ha.id, t, "authz-pa3", &err), DFC_GRPC_PERMISSION_DENIED);
    assert_true(peer_exists("authz-pa3"));
    assert_int_equal(delete_peer(cl.a, cl.ha.id, t, "authz-pa3", &err), DFC_GRPC_OK);
    assert_false(peer_exists("authz-pa3"));
}

/* A peer stream acts only for its certificate's host: B may not register a peer for A, nor
 * take A's peer id for itself; uploads for another host are refused too. */
static void test_peer_announce_for_another_host(void **state) {
    REQUIRE_CLUSTER();
    char t[65];
    task_id(t, 4);
    struct dfc_error err;
    assert_int_equal(upload(cl.a, cl.ha.id, t, "authz-pa4", 5 * MiB, &err), 0);

    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(cl.b, &announce_peer_m, TIMEOUT, &st, &err), 0);
    assert_int_equal(send_register(st, cl.ha.id, t, "authz-b-as-a", &err), 0);
    assert_int_equal(next(st, &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "may not announce a peer for host 127.0.0.41-node-a");
    dfc_rpc_stream_free(st);
    assert_false(peer_exists("authz-b-as-a"));

    st = NULL;
    assert_int_equal(dfc_rpc_stream_open(cl.b, &announce_peer_m, TIMEOUT, &st, &err), 0);
    assert_int_equal(send_register(st, cl.hb.id, t, "authz-pa4", &err), 0); /* A's peer id */
    assert_int_equal(next(st, &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "peer authz-pa4 belongs to host 127.0.0.41-node-a");
    dfc_rpc_stream_free(st);
    redisReply *rep =
        redis_server_command(&cl.redis, "HMGET %s host_id state",
                             P ":persistent-cache-peers-for-persistent-cache-task:authz-pa4");
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    assert_string_equal(rep->element[0]->str, cl.ha.id); /* still A's, and not failed */
    assert_string_equal(rep->element[1]->str, "Succeeded");
    freeReplyObject(rep);

    char t5[65];
    task_id(t5, 5);
    assert_int_equal(dfc_error_to_grpc(upload(cl.b, cl.ha.id, t5, "authz-b5", 5 * MiB, &err)),
                     DFC_GRPC_PERMISSION_DENIED);
    assert_int_equal(stat_task(cl.a, cl.ha.id, t5), DFC_GRPC_NOT_FOUND);
}

/* Digests are recorded only for the caller's own host. */
static void test_digest_record_for_another_host(void **state) {
    REQUIRE_CLUSTER();
    char t[65];
    task_id(t, 6);
    struct dfc_error err;
    struct rec r;
    assert_int_equal(upload(cl.a, cl.ha.id, t, "authz-pa6", 5 * MiB, &err), 0);
    assert_int_equal(record(cl.b, &r, cl.ha.id, t, 5 * MiB, &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "may not record digests for host 127.0.0.41-node-a");
    assert_int_equal(redis_int("EXISTS " P ":persistent-cache-task-digests:%s%s", t, ""), 0);
    assert_int_equal(record(cl.a, &r, cl.ha.id, t, 5 * MiB, &err), DFC_GRPC_OK);
}

/* A parent is excluded only on the downloading peer's own host's report: B reporting on C's
 * downloading peer (from its own stream, or naming C's host) is refused and A stays a parent;
 * C's own report excludes A. */
static void test_exclusion_only_by_the_downloader(void **state) {
    REQUIRE_CLUSTER();
    char t[65];
    task_id(t, 7);
    struct dfc_error err;
    assert_int_equal(upload(cl.a, cl.ha.id, t, "authz-pa7", 5 * MiB, &err), 0);
    assert_int_equal(upload(cl.b, cl.hb.id, t, "authz-pb7", 5 * MiB, &err), 0);
    struct dfc_rpc_stream *dc = downloader(cl.c, cl.hc.id, t, "authz-pc7");

    struct dfc_rpc_stream *st = downloader(cl.b, cl.hb.id, t, "authz-pb7x");
    assert_int_equal(send_piece_failed(st, cl.hb.id, t, "authz-pc7", "authz-pa7", &err), 0);
    assert_int_equal(next(st, &err), DFC_GRPC_PERMISSION_DENIED);
    expect_msg(&err, "peer authz-pc7 belongs to host 127.0.0.43-node-c");
    dfc_rpc_stream_free(st);
    st = NULL;
    assert_int_equal(dfc_rpc_stream_open(cl.b, &announce_peer_m, TIMEOUT, &st, &err), 0);
    assert_int_equal(send_piece_failed(st, cl.hc.id, t, "authz-pc7", "authz-pa7", &err), 0);
    assert_int_equal(next(st, &err), DFC_GRPC_PERMISSION_DENIED);
    dfc_rpc_stream_free(st);
    char key[256];
    snprintf(key, sizeof(key), P ":persistent-cache-task-excluded-parents:%s", t);
    assert_int_equal(redis_int("EXISTS %s%s", key, ""), 0);
    assert_true(peer_exists("authz-pa7"));

    assert_int_equal(send_piece_failed(dc, cl.hc.id, t, "authz-pc7", "authz-pa7", &err), 0);
    assert_int_equal(send_reschedule(dc, cl.hc.id, t, "authz-pc7", &err), 0);
    assert_int_equal(next(dc, &err), DFC_GRPC_OK); /* the stream went on */
    dfc_rpc_stream_free(dc);
    assert_int_equal(redis_int("SISMEMBER %s %s", key, cl.ha.id), 1);
    assert_false(peer_exists("authz-pa7"));
}

/* The shared node certificate acts for a host it announced, not for one a per-node certificate
 * announced: it can neither re-announce A (at A's own address), nor delete it, nor register a
 * peer for it. */
static void test_shared_cannot_take_a_per_node_host(void **state) {
    REQUIRE_CLUSTER();
    struct dfc_error err;
    redisReply *rep = redis_server_command(&cl.redis, "GET %s",
                                           P ":persistent-cache-host-binding:127.0.0.41-node-a");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "node");
    freeReplyObject(rep);

    assert_int_equal(announce(cl.shared, &cl.ha, &err), -EACCES);
    expect_msg(&err, "the shared node certificate may not announce host 127.0.0.41-node-a");
    assert_true(sched_harness_log_has(&cl.sched, "event=scheduler.host_bound_refused"));
    Scheduler__V2__DeleteHostRequest d = SCHEDULER__V2__DELETE_HOST_REQUEST__INIT;
    d.host_id = cl.ha.id;
    ProtobufCMessage *out = NULL;
    assert_int_equal(dfc_rpc_unary(cl.shared, &delete_host_m, &d.base, TIMEOUT, &out, &err),
                     -EACCES);
    assert_int_equal(redis_int("EXISTS " P ":persistent-cache-hosts:%s%s", cl.ha.id, ""), 1);

    char t[65];
    task_id(t, 8);
    assert_int_equal(upload(cl.b, cl.hb.id, t, "authz-pb8", 5 * MiB, &err), 0);
    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(cl.shared, &announce_peer_m, TIMEOUT, &st, &err), 0);
    assert_int_equal(send_register(st, cl.ha.id, t, "authz-shared-as-a", &err), 0);
    assert_int_equal(next(st, &err), DFC_GRPC_PERMISSION_DENIED);
    dfc_rpc_stream_free(st);

    /* A host it announced itself: it acts for it (the chart's shared mode). */
    struct host_msg s;
    host_init(&s, "node-s", "127.0.0.44");
    assert_int_equal(announce(cl.shared, &s, &err), 0);
    assert_int_equal(upload(cl.shared, s.id, t, "authz-ps8", 5 * MiB, &err), 0);
    st = downloader(cl.shared, s.id, t, "authz-ps8x");
    dfc_rpc_stream_free(st);
}

/* With TLS off any caller still acts for any host, as before. */
static void test_tls_off_still_works(void **state) {
    REQUIRE_CLUSTER();
    struct sched_harness plain;
    memset(&plain, 0, sizeof(plain));
    sched_harness_start(&plain, cl.redis.addr, NULL);
    struct dfc_rpc_client *c;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(plain.target, NULL, &c, &err), 0);
    char t[65], t2[65];
    task_id(t, 9);
    task_id(t2, 10);
    assert_int_equal(upload(c, cl.ha.id, t, "authz-plain-a", 5 * MiB, &err), 0);
    assert_int_equal(upload(c, cl.hb.id, t2, "authz-plain-b", 5 * MiB, &err), 0);
    struct rec r;
    assert_int_equal(record(c, &r, cl.ha.id, t, 5 * MiB, &err), DFC_GRPC_OK);
    assert_int_equal(delete_peer(c, cl.hb.id, t2, "authz-plain-b", &err), DFC_GRPC_OK);
    assert_int_equal(delete_task(c, cl.hb.id, t, &err), DFC_GRPC_OK);
    assert_int_equal(stat_task(c, cl.ha.id, t), DFC_GRPC_NOT_FOUND);
    assert_int_equal(announce(c, &cl.ha, &err), 0);
    assert_true(sched_harness_log_has(&plain, "scheduler.tls_off"));
    dfc_rpc_client_free(c);
    assert_int_equal(sched_harness_destroy(&plain), 0);
}

int main(void) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(client_methods, DFC_RPC_N(client_methods), &err) < 0) {
        fprintf(stderr, "%s\n", dfc_error_msg(&err));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_delete_by_importer_or_operator),
        cmocka_unit_test(test_peer_delete_by_its_host),
        cmocka_unit_test(test_peer_announce_for_another_host),
        cmocka_unit_test(test_digest_record_for_another_host),
        cmocka_unit_test(test_exclusion_only_by_the_downloader),
        cmocka_unit_test(test_shared_cannot_take_a_per_node_host),
        cmocka_unit_test(test_tls_off_still_works),
    };
    return test_run_group(tests, cluster_up, cluster_down);
}
