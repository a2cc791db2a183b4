/*
 * Integration tests for the scheduler's dfc.scheduler.v1.PersistentCacheIntegrity
 * (scheduler/rpc_integrity.h, docs/integrity.md) and the scheduler side of verification: a real
 * scheduler process, a real redis-server and lib's RPC client over loopback TCP.
 *
 * Every field of RecordPersistentCacheTaskDigests validated (INVALID_ARGUMENT naming it), a
 * record and its read back (oldest first, expiring with the task), set-once per host, at most
 * 8 hosts, a host without a copy refused; an upload of a Succeeded task's id by another host
 * joining it as a persistent peer; a parent reported with temporary = false excluded from the
 * task (not offered again, its peer gone) while the reporting stream goes on.
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

static struct dfc_rpc_client_method announce_host_m, started_m, finished_m, stat_task_m,
    announce_peer_m, record_m, get_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &announce_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskStarted", &started_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskFinished",
                          &finished_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "StatPersistentCacheTask", &stat_task_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnouncePersistentCachePeer",
                          &announce_peer_m),
    DFC_RPC_CLIENT_METHOD(dfc__scheduler__v1__persistent_cache_integrity,
                          "RecordPersistentCacheTaskDigests", &record_m),
    DFC_RPC_CLIENT_METHOD(dfc__scheduler__v1__persistent_cache_integrity,
                          "GetPersistentCacheTaskDigests", &get_m),
};

struct fx {
    struct redis_server redis;
    struct sched_harness s;
    struct dfc_rpc_client *c;
};

static int setup(void **state) {
    if (!redis_harness_available()) {
        *state = NULL;
        return 0;
    }
    struct fx *f = calloc(1, sizeof(*f));
    redis_server_start(&f->redis, NULL);
    sched_harness_start(&f->s, f->redis.addr, NULL);
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(f->s.target, NULL, &f->c, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    if (f == NULL) {
        return 0;
    }
    dfc_rpc_client_free(f->c);
    int code = sched_harness_destroy(&f->s);
    redis_server_destroy(&f->redis);
    free(f);
    assert_int_equal(code, 0);
    return 0;
}

#define NEED_REDIS(f)                                                                              \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_non_null(f);                                                                        \
    } while (0)

/* ---- hosts, uploads ---- */

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

static int announce(struct dfc_rpc_client *c, struct host_msg *m) {
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    Google__Protobuf__Duration interval = GOOGLE__PROTOBUF__DURATION__INIT;
    interval.seconds = 300;
    r.host = &m->host;
    r.interval = &interval;
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    int rc = dfc_rpc_unary(c, &announce_host_m, &r.base, TIMEOUT, &out, &err);
    dfc_rpc_msg_free(out);
    return rc;
}

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

/* ---- records ---- */

#define MAX_PIECES 8

struct rec {
    Dfc__Scheduler__V1__RecordPersistentCacheTaskDigestsRequest req;
    uint8_t content[DFC_SHA256_LEN];
    uint8_t shas[MAX_PIECES][DFC_SHA256_LEN];
    ProtobufCBinaryData pieces[MAX_PIECES];
};

/* A well-formed record of task (len bytes, 4 MiB pieces) by host; seed varies the digests. */
static void rec_init(struct rec *r, const char *host, const char *task, uint64_t len,
                     unsigned seed) {
    dfc__scheduler__v1__record_persistent_cache_task_digests_request__init(&r->req);
    memset(r->content, (int)seed, sizeof(r->content));
    size_t n = (size_t)((len + 4 * MiB - 1) / (4 * MiB));
    assert_true(n <= MAX_PIECES);
    for (size_t i = 0; i < n; i++) {
        memset(r->shas[i], (int)(seed + i + 1), DFC_SHA256_LEN);
        r->pieces[i].data = r->shas[i];
        r->pieces[i].len = DFC_SHA256_LEN;
    }
    if (n > 0) {
        memcpy(r->shas[n - 1], r->content, DFC_SHA256_LEN); /* the last is the content's */
    }
    r->req.host_id = (char *)host;
    r->req.task_id = (char *)task;
    r->req.content_sha256.data = r->content;
    r->req.content_sha256.len = DFC_SHA256_LEN;
    r->req.id_basis = "";
    r->req.piece_length = 4 * MiB;
    r->req.content_length = len;
    r->req.piece_sha256 = r->pieces;
    r->req.n_piece_sha256 = n;
}

static int record(struct dfc_rpc_client *c, const struct rec *r, struct dfc_error *err) {
    ProtobufCMessage *out = NULL;
    int rc = dfc_rpc_unary(c, &record_m, &r->req.base, TIMEOUT, &out, err);
    dfc_rpc_msg_free(out);
    return rc;
}

static Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *get(struct dfc_rpc_client *c,
                                                                      const char *task) {
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsRequest r =
        DFC__SCHEDULER__V1__GET_PERSISTENT_CACHE_TASK_DIGESTS_REQUEST__INIT;
    r.task_id = (char *)task;
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(c, &get_m, &r.base, TIMEOUT, &out, &err), 0);
    return (Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *)out;
}

static void task_id(char out[65], unsigned n) {
    snprintf(out, 65, "%064x", n);
}

/* INVALID_ARGUMENT whose message starts with field. */
static void expect_invalid(struct fx *f, const struct rec *r, const char *field) {
    struct dfc_error err;
    assert_int_equal(dfc_error_to_grpc(record(f->c, r, &err)), DFC_GRPC_INVALID_ARGUMENT);
    if (strncmp(err.msg, field, strlen(field)) != 0) {
        fail_msg("want a message naming %s, got \"%s\"", field, err.msg);
    }
}

/* ---- tests ---- */

/* Each field of the record is checked, the first bad one named. */
static void test_record_fields_validated(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    char t[65];
    task_id(t, 1);
    struct rec r;
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.host_id = "";
    expect_invalid(f, &r, "host_id");
    rec_init(&r, "h", "ABC", 9 * MiB, 1);
    expect_invalid(f, &r, "task_id");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.content_sha256.len = 31;
    expect_invalid(f, &r, "content_sha256");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.id_basis = "not the pre-image of the task id";
    expect_invalid(f, &r, "id_basis");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.piece_length = 0;
    expect_invalid(f, &r, "piece_length");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.n_piece_sha256 = 2; /* 9 MiB in 4 MiB pieces is 3 */
    expect_invalid(f, &r, "piece_sha256");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.req.content_length = (uint64_t)1 << 60; /* far more pieces than may be recorded */
    expect_invalid(f, &r, "content_length");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.pieces[1].len = 31;
    expect_invalid(f, &r, "piece_sha256[1]");
    rec_init(&r, "h", t, 9 * MiB, 1);
    r.shas[2][0] ^= 1; /* the last digest must be the content's */
    expect_invalid(f, &r, "piece_sha256[2]");
    /* An id_basis that does hash to the task id passes validation (then: task unknown). */
    char basis_id[65];
    assert_int_equal(dfc_sha256_hex("my-model-v1", 11, basis_id), 0);
    rec_init(&r, "h", basis_id, 9 * MiB, 1);
    r.req.id_basis = "my-model-v1";
    struct dfc_error err;
    assert_int_equal(dfc_error_to_grpc(record(f->c, &r, &err)), DFC_GRPC_NOT_FOUND);
}

/* A record by the uploader, read back with its host; once per host (the same bytes again are
 * fine, others ALREADY_EXISTS); a host without a finished copy and an unknown task refused;
 * the hash expires with the task. */
static void test_record_and_read_back(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    struct host_msg a, b;
    host_init(&a, "node-a", "127.0.0.1");
    host_init(&b, "node-b", "127.0.0.2");
    assert_int_equal(announce(f->c, &a), 0);
    assert_int_equal(announce(f->c, &b), 0);
    char t[65], ghost[65];
    task_id(t, 2);
    task_id(ghost, 3);
    struct dfc_error err;
    assert_int_equal(upload(f->c, a.id, t, "pa", 9 * MiB, &err), 0);

    struct rec r;
    rec_init(&r, b.id, t, 9 * MiB, 7);
    assert_int_equal(dfc_error_to_grpc(record(f->c, &r, &err)), DFC_GRPC_FAILED_PRECONDITION);
    rec_init(&r, a.id, ghost, 9 * MiB, 7);
    assert_int_equal(dfc_error_to_grpc(record(f->c, &r, &err)), DFC_GRPC_NOT_FOUND);
    rec_init(&r, a.id, t, 13 * MiB, 7); /* not the task's geometry */
    assert_int_equal(dfc_error_to_grpc(record(f->c, &r, &err)), DFC_GRPC_FAILED_PRECONDITION);
    rec_init(&r, a.id, t, 9 * MiB, 7);
    assert_int_equal(record(f->c, &r, &err), 0);
    assert_int_equal(record(f->c, &r, &err), 0); /* the same again */
    struct rec other;
    rec_init(&other, a.id, t, 9 * MiB, 8);
    assert_int_equal(dfc_error_to_grpc(record(f->c, &other, &err)), DFC_GRPC_ALREADY_EXISTS);

    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *g = get(f->c, t);
    assert_int_equal(g->n_records, 1);
    const Dfc__Scheduler__V1__PersistentCacheTaskDigests *d = g->records[0];
    assert_string_equal(d->host_id, a.id);
    assert_int_equal(d->piece_length, 4 * MiB);
    assert_int_equal(d->content_length, 9 * MiB);
    assert_int_equal(d->n_piece_sha256, 3);
    assert_memory_equal(d->content_sha256.data, r.content, DFC_SHA256_LEN);
    assert_memory_equal(d->piece_sha256[2].data, r.shas[2], DFC_SHA256_LEN);
    assert_true(d->recorded_at > 0);
    dfc_rpc_msg_free(&g->base);
    g = get(f->c, ghost);
    assert_int_equal(g->n_records, 0);
    dfc_rpc_msg_free(&g->base);

    char key[256];
    snprintf(key, sizeof(key), P ":persistent-cache-task-digests:%s", t);
    redisReply *ttl = redis_server_command(&f->redis, "TTL %s", key);
    assert_int_equal(ttl->type, REDIS_REPLY_INTEGER);
    assert_true(ttl->integer > 3500 && ttl->integer <= 3600);
    freeReplyObject(ttl);
}

/* Another host's upload of a Succeeded task's id joins it as a persistent peer (the task stays
 * Succeeded); each such host may record, up to 8 hosts, then RESOURCE_EXHAUSTED; records come
 * back oldest first. */
static void test_joined_uploads_record_up_to_eight(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    char t[65];
    task_id(t, 4);
    struct host_msg h[9];
    struct dfc_error err;
    for (int i = 0; i < 9; i++) {
        char name[32], ip[32], peer[32];
        snprintf(name, sizeof(name), "node-%d", i);
        snprintf(ip, sizeof(ip), "127.0.1.%d", i + 1);
        snprintf(peer, sizeof(peer), "peer-%d", i);
        host_init(&h[i], name, ip);
        assert_int_equal(announce(f->c, &h[i]), 0);
        if (upload(f->c, h[i].id, t, peer, 5 * MiB, &err) != 0) {
            fail_msg("upload by %s: %s", h[i].id, err.msg);
        }
    }
    char key[256];
    snprintf(key, sizeof(key),
             P ":persistent-cache-tasks:%s:persistent-peers-for-persistent-cache-task", t);
    redisReply *n = redis_server_command(&f->redis, "SCARD %s", key);
    assert_int_equal(n->integer, 9); /* every copy a persistent peer */
    freeReplyObject(n);
    for (int i = 0; i < 9; i++) {
        struct rec r;
        rec_init(&r, h[i].id, t, 5 * MiB, (unsigned)(10 + i));
        int rc = record(f->c, &r, &err);
        if (i < 8) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(dfc_error_to_grpc(rc), DFC_GRPC_RESOURCE_EXHAUSTED);
        }
    }
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *g = get(f->c, t);
    assert_int_equal(g->n_records, 8);
    for (size_t i = 0; i < g->n_records; i++) {
        assert_string_equal(g->records[i]->host_id, h[i].id);
    }
    dfc_rpc_msg_free(&g->base);
    /* The same host again under another peer id: refused, as before. */
    assert_int_equal(dfc_error_to_grpc(upload(f->c, h[0].id, t, "peer-0b", 5 * MiB, &err)),
                     DFC_GRPC_ALREADY_EXISTS);
}

/* ---- a downloading peer's stream ---- */

typedef Scheduler__V2__AnnouncePersistentCachePeerRequest announce_req;
#define REQ(x) SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_##x

static int send_on(struct dfc_rpc_stream *st, announce_req *m, const char *host, const char *task,
                   const char *peer, struct dfc_error *err) {
    m->host_id = (char *)host;
    m->task_id = (char *)task;
    m->peer_id = (char *)peer;
    return dfc_rpc_stream_send(st, &m->base, err);
}

/* The candidate parents' host ids of the next answer (a Normal one), into ids. */
static size_t recv_parents(struct dfc_rpc_stream *st, char ids[4][128]) {
    ProtobufCMessage *msg = NULL;
    struct dfc_error err;
    int r = dfc_rpc_stream_recv(
        st, &scheduler__v2__announce_persistent_cache_peer_response__descriptor, &msg, &err);
    if (r <= 0) {
        fail_msg("recv: %d %s", r, err.msg);
    }
    const Scheduler__V2__AnnouncePersistentCachePeerResponse *m = (const void *)msg;
    assert_non_null(m->normal_persistent_cache_task_response);
    size_t n = 0;
    const Scheduler__V2__NormalPersistentCacheTaskResponse *nr =
        m->normal_persistent_cache_task_response;
    for (size_t i = 0; i < nr->n_candidate_cache_parents && n < 4; i++) {
        snprintf(ids[n++], 128, "%s", nr->candidate_cache_parents[i]->host->id);
    }
    dfc_rpc_msg_free(msg);
    return n;
}

static bool has(char ids[4][128], size_t n, const char *id) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ids[i], id) == 0) {
            return true;
        }
    }
    return false;
}

/* A parent reported with temporary = false (its piece failed verification): its host joins
 * the task's exclusion set, its peer goes, it is offered to nobody again, and the reporting
 * stream goes on (a reschedule is answered with the other parent). */
static void test_failed_verification_excludes_the_parent(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    struct host_msg a, b, c;
    host_init(&a, "node-a", "127.0.0.1");
    host_init(&b, "node-b", "127.0.0.2");
    host_init(&c, "node-c", "127.0.0.3");
    assert_int_equal(announce(f->c, &a), 0);
    assert_int_equal(announce(f->c, &b), 0);
    assert_int_equal(announce(f->c, &c), 0);
    char t[65];
    task_id(t, 5);
    struct dfc_error err;
    assert_int_equal(upload(f->c, a.id, t, "pa", 5 * MiB, &err), 0);
    assert_int_equal(upload(f->c, b.id, t, "pb", 5 * MiB, &err), 0);

    struct dfc_rpc_stream *st = NULL;
    assert_int_equal(dfc_rpc_stream_open(f->c, &announce_peer_m, TIMEOUT, &st, &err), 0);
    announce_req m = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__RegisterPersistentCachePeerRequest reg =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    reg.piece_length = 4 * MiB;
    reg.piece_count = 2;
    m.request_case = REQ(REGISTER_PERSISTENT_CACHE_PEER_REQUEST);
    m.register_persistent_cache_peer_request = &reg;
    assert_int_equal(send_on(st, &m, c.id, t, "pc", &err), 0);
    char ids[4][128];
    size_t n = recv_parents(st, ids);
    assert_true(has(ids, n, a.id) && has(ids, n, b.id));

    announce_req fm = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFailedRequest pf =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    pf.opt_piece_number_case =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__OPT_PIECE_NUMBER_PIECE_NUMBER;
    pf.piece_number = 0;
    pf.parent_id = "pa";
    pf.temporary = false;
    fm.request_case = REQ(DOWNLOAD_PIECE_FAILED_REQUEST);
    fm.download_piece_failed_request = &pf;
    assert_int_equal(send_on(st, &fm, c.id, t, "pc", &err), 0);

    announce_req rm = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__ReschedulePersistentCachePeerRequest rs =
        SCHEDULER__V2__RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    rm.request_case = REQ(RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST);
    rm.reschedule_persistent_cache_peer_request = &rs;
    assert_int_equal(send_on(st, &rm, c.id, t, "pc", &err), 0);
    n = recv_parents(st, ids); /* the stream went on */
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], b.id);
    dfc_rpc_stream_free(st);

    char key[256];
    snprintf(key, sizeof(key), P ":persistent-cache-task-excluded-parents:%s", t);
    redisReply *mem = redis_server_command(&f->redis, "SISMEMBER %s %s", key, a.id);
    assert_int_equal(mem->integer, 1);
    freeReplyObject(mem);
    redisReply *ttl = redis_server_command(&f->redis, "TTL %s", key);
    assert_true(ttl->integer > 0 && ttl->integer <= 3600);
    freeReplyObject(ttl);
    redisReply *peer = redis_server_command(
        &f->redis, "EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:pa");
    assert_int_equal(peer->integer, 0); /* no longer a copy */
    freeReplyObject(peer);
    /* An excluded host cannot join the task again with a new upload. */
    assert_int_equal(dfc_error_to_grpc(upload(f->c, a.id, t, "pa2", 5 * MiB, &err)),
                     DFC_GRPC_ALREADY_EXISTS);
}

int main(void) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(client_methods, DFC_RPC_N(client_methods), &err) < 0) {
        fprintf(stderr, "%s\n", dfc_error_msg(&err));
        return 1;
    }
#define R(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
    const struct CMUnitTest tests[] = {
        R(test_record_fields_validated),
        R(test_record_and_read_back),
        R(test_joined_uploads_record_up_to_eight),
        R(test_failed_verification_excludes_the_parent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
