/*
 * Tests for scheduler/validate.c: upstream's PGV rules for each scheduler.v2 request, nested
 * messages included, with the field path each message names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "validate.h"

#define HOST_ID "127.0.0.1-node-a"
#define TASK_ID "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"
#define PEER_ID "127.0.0.1-node-a-6f1c0f3e-2a4b-4c9e-8d7a-0f5e4b3c2a19"

/* A Host that passes every rule; tests break one field at a time. */
struct host_fx {
    Common__V2__Host host;
    Common__V2__CPU cpu;
    Common__V2__CPUTimes times;
    Common__V2__Memory memory;
    Common__V2__Network network;
    Common__V2__Disk disk;
    Common__V2__Build build;
};

static void host_init(struct host_fx *f) {
    common__v2__host__init(&f->host);
    common__v2__cpu__init(&f->cpu);
    common__v2__cputimes__init(&f->times);
    common__v2__memory__init(&f->memory);
    common__v2__network__init(&f->network);
    common__v2__disk__init(&f->disk);
    common__v2__build__init(&f->build);
    f->host.id = HOST_ID;
    f->host.hostname = "node-a";
    f->host.ip = "127.0.0.1";
    f->host.port = 4000;
    f->host.download_port = 4000;
    f->cpu.percent = 12.5;
    f->cpu.times = &f->times;
    f->memory.used_percent = 40;
    f->disk.used_percent = 100;
    f->host.cpu = &f->cpu;
    f->host.memory = &f->memory;
    f->host.network = &f->network;
    f->host.disk = &f->disk;
    f->host.build = &f->build;
}

static int announce(struct host_fx *f, struct dfc_error *err) {
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    r.host = &f->host;
    return sched_validate_announce_host(&r, err);
}

static void test_announce_host(void **state) {
    struct host_fx f;
    struct dfc_error err;
    host_init(&f);
    assert_int_equal(announce(&f, &err), 0);

    Scheduler__V2__AnnounceHostRequest none = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    assert_int_equal(sched_validate_announce_host(&none, &err), -EINVAL);
    assert_string_equal(err.msg, "host: required");

    f.host.id = "";
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.id: must not be empty");
    host_init(&f);
    f.host.type = 4;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.type: must be at most 3, got 4");
    f.host.type = 3;
    assert_int_equal(announce(&f, &err), 0);
    f.host.hostname = "";
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.hostname: must not be empty");
    host_init(&f);
    f.host.ip = "10.0.0";
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.ip: `10.0.0` is not an IP address");
    f.host.ip = "fe80::1";
    assert_int_equal(announce(&f, &err), 0);
    f.host.ip = "";
    assert_int_equal(announce(&f, &err), -EINVAL);
    host_init(&f);
    f.host.port = 1023;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.port: must be at least 1024 and below 65535, got 1023");
    f.host.port = 65535;
    assert_int_equal(announce(&f, &err), -EINVAL);
    f.host.port = 65534;
    assert_int_equal(announce(&f, &err), 0);
    f.host.download_port = 0;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "host.download_port: must be at least 1024 and below 65535, got 0");
    host_init(&f);

    /* A missing cpu is INVALID_ARGUMENT (upstream: a nil dereference, INTERNAL). */
    f.host.cpu = NULL;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.cpu: required");
    /* ... but inside a candidate parent the Host rules are upstream's, cpu optional. */
    assert_int_equal(sched_validate_host("p.host", &f.host, &err), 0);
    host_init(&f);
    f.cpu.percent = -0.5;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.cpu.percent: must be at least 0, got -0.5");
    host_init(&f);
    f.cpu.process_percent = NAN;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "host.cpu.process_percent: must be at least 0"));
    host_init(&f);
    f.times.guest_nice = -1;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.cpu.times.guest_nice: must be at least 0, got -1");
    host_init(&f);
    f.memory.process_used_percent = 100.5;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "host.memory.process_used_percent: must be between 0 and 100, got 100.5");
    host_init(&f);
    f.disk.inodes_used_percent = -1;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "host.disk.inodes_used_percent: must be between 0 and 100, got -1");
    /* Absent optional sub-messages are not checked. */
    host_init(&f);
    f.host.memory = NULL;
    f.host.disk = NULL;
    f.host.network = NULL;
    f.host.build = NULL;
    f.cpu.times = NULL;
    assert_int_equal(announce(&f, &err), 0);

    /* Our length limit on stored strings. */
    static char big[SCHED_STRING_MAX + 2];
    memset(big, 'x', sizeof(big) - 1);
    host_init(&f);
    f.host.name = big;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.name: longer than 1024 bytes");
    host_init(&f);
    f.network.opt_idc_case = COMMON__V2__NETWORK__OPT_IDC_IDC;
    f.network.idc = big;
    assert_int_equal(announce(&f, &err), -EINVAL);
    assert_string_equal(err.msg, "host.network.idc: longer than 1024 bytes");

    /* interval must be a valid duration when present. */
    host_init(&f);
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    d.seconds = 300;
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    r.host = &f.host;
    r.interval = &d;
    assert_int_equal(sched_validate_announce_host(&r, &err), 0);
    d.nanos = -1;
    assert_int_equal(sched_validate_announce_host(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "interval: not a valid duration");
}

static void test_ids(void **state) {
    struct dfc_error err;
    Scheduler__V2__DeleteHostRequest dh = SCHEDULER__V2__DELETE_HOST_REQUEST__INIT;
    assert_int_equal(sched_validate_delete_host(&dh, &err), -EINVAL);
    assert_string_equal(err.msg, "host_id: must not be empty");
    dh.host_id = HOST_ID;
    assert_int_equal(sched_validate_delete_host(&dh, &err), 0);

    Scheduler__V2__UploadPersistentCacheTaskFinishedRequest fin =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FINISHED_REQUEST__INIT;
    fin.host_id = HOST_ID;
    fin.task_id = TASK_ID;
    assert_int_equal(sched_validate_upload_finished(&fin, &err), -EINVAL);
    assert_string_equal(err.msg, "peer_id: must not be empty");
    fin.peer_id = PEER_ID;
    assert_int_equal(sched_validate_upload_finished(&fin, &err), 0);

    Scheduler__V2__UploadPersistentCacheTaskFailedRequest fail =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FAILED_REQUEST__INIT;
    fail.host_id = HOST_ID;
    fail.peer_id = PEER_ID;
    assert_int_equal(sched_validate_upload_failed(&fail, &err), -EINVAL);
    assert_string_equal(err.msg, "task_id: must not be empty");
    fail.task_id = TASK_ID;
    /* description: min_len 1 with ignore_empty, so "" passes */
    fail.opt_description_case =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FAILED_REQUEST__OPT_DESCRIPTION_DESCRIPTION;
    fail.description = "";
    assert_int_equal(sched_validate_upload_failed(&fail, &err), 0);

    Scheduler__V2__StatPersistentCacheTaskRequest st =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    st.task_id = TASK_ID;
    assert_int_equal(sched_validate_stat_task(&st, &err), -EINVAL);
    assert_string_equal(err.msg, "host_id: must not be empty");
    st.host_id = HOST_ID;
    assert_int_equal(sched_validate_stat_task(&st, &err), 0);

    Scheduler__V2__DeletePersistentCacheTaskRequest dt =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    dt.host_id = HOST_ID;
    assert_int_equal(sched_validate_delete_task(&dt, &err), -EINVAL);
    assert_string_equal(err.msg, "task_id: must not be empty");

    Scheduler__V2__StatPersistentCachePeerRequest sp =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    sp.host_id = HOST_ID;
    sp.task_id = TASK_ID;
    assert_int_equal(sched_validate_stat_peer(&sp, &err), -EINVAL);
    assert_string_equal(err.msg, "peer_id: must not be empty");

    Scheduler__V2__DeletePersistentCachePeerRequest dp =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    dp.host_id = HOST_ID;
    dp.task_id = TASK_ID;
    dp.peer_id = PEER_ID;
    assert_int_equal(sched_validate_delete_peer(&dp, &err), 0);
    static char big[SCHED_STRING_MAX + 2];
    memset(big, 'p', sizeof(big) - 1);
    dp.peer_id = big;
    assert_int_equal(sched_validate_delete_peer(&dp, &err), -EINVAL);
    assert_string_equal(err.msg, "peer_id: longer than 1024 bytes");
}

static void started_init(Scheduler__V2__UploadPersistentCacheTaskStartedRequest *r,
                         Google__Protobuf__Duration *ttl) {
    scheduler__v2__upload_persistent_cache_task_started_request__init(r);
    google__protobuf__duration__init(ttl);
    r->host_id = HOST_ID;
    r->task_id = TASK_ID;
    r->peer_id = PEER_ID;
    r->persistent_replica_count = 1;
    r->piece_length = 4 << 20;
    r->content_length = (8 << 20) + 1;
    r->piece_count = 3;
    ttl->seconds = 3600;
    r->ttl = ttl;
}

static void test_upload_started(void **state) {
    struct dfc_error err;
    Scheduler__V2__UploadPersistentCacheTaskStartedRequest r;
    Google__Protobuf__Duration ttl;
    started_init(&r, &ttl);
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);

    r.persistent_replica_count = 0;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "persistent_replica_count: must be at least 1, got 0");
    started_init(&r, &ttl);
    r.piece_length = (4 << 20) - 1;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "piece_length: must be at least 4194304 (4MiB), got 4194303");
    /* No upper bound here, as upstream (dfdaemon takes an explicit piece length as is). */
    started_init(&r, &ttl);
    r.piece_length = (uint64_t)128 << 20;
    r.piece_count = 1;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);

    /* piece_count must match content_length / piece_length, rounded up (ours). */
    started_init(&r, &ttl);
    r.piece_count = 4000000000u;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "piece_count: must be ceil(content_length / piece_length) = 3, got "
                        "4000000000");
    r.content_length = 0;
    r.piece_count = 0;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);
    /* A remote Started may not make the scheduler allocate a huge bitset (ours). */
    started_init(&r, &ttl);
    r.piece_length = (uint64_t)4 << 20;
    r.content_length = (uint64_t)SCHED_PIECE_COUNT_MAX * r.piece_length;
    r.piece_count = SCHED_PIECE_COUNT_MAX;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);
    r.content_length += 1;
    r.piece_count = SCHED_PIECE_COUNT_MAX + 1;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "content_length: at most 16777216 pieces of piece_length "
                                 "4194304, got 16777217");

    /* ttl 300 s .. 604800 s, inclusive, but not required. */
    started_init(&r, &ttl);
    ttl.seconds = 299;
    ttl.nanos = 999999999;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "ttl: must be between 5m and 168h, got 4m59s");
    ttl.seconds = 300;
    ttl.nanos = 0;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);
    ttl.seconds = 604800;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);
    ttl.nanos = 1;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    ttl.nanos = 1000000000;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "ttl: not a valid duration");
    r.ttl = NULL;
    assert_int_equal(sched_validate_upload_started(&r, &err), 0);

    started_init(&r, &ttl);
    r.host_id = "";
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "host_id: must not be empty");
    started_init(&r, &ttl);
    static char big[SCHED_STRING_MAX + 2];
    memset(big, 't', sizeof(big) - 1);
    r.opt_tag_case = SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_STARTED_REQUEST__OPT_TAG_TAG;
    r.tag = big;
    assert_int_equal(sched_validate_upload_started(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "tag: longer than 1024 bytes");
}

/* A candidate parent that passes every rule. */
struct peer_fx {
    Common__V2__PersistentCachePeer peer;
    Common__V2__PersistentCacheTask task;
    Google__Protobuf__Duration cost, ttl;
    Google__Protobuf__Timestamp ts;
    struct host_fx host;
};

static void peer_init(struct peer_fx *f) {
    common__v2__persistent_cache_peer__init(&f->peer);
    common__v2__persistent_cache_task__init(&f->task);
    google__protobuf__duration__init(&f->cost);
    google__protobuf__duration__init(&f->ttl);
    google__protobuf__timestamp__init(&f->ts);
    host_init(&f->host);
    f->host.host.cpu = NULL; /* optional here */
    f->task.id = TASK_ID;
    f->task.persistent_replica_count = 1;
    f->task.piece_length = 4 << 20;
    f->task.state = "Succeeded";
    f->task.ttl = &f->ttl;
    f->task.created_at = &f->ts;
    f->task.updated_at = &f->ts;
    f->peer.id = PEER_ID;
    f->peer.cost = &f->cost;
    f->peer.state = "Succeeded";
    f->peer.task = &f->task;
    f->peer.host = &f->host.host;
    f->peer.created_at = &f->ts;
    f->peer.updated_at = &f->ts;
}

static int reschedule(struct peer_fx *fx, size_t n, struct dfc_error *err) {
    Common__V2__PersistentCachePeer *parents[4];
    for (size_t i = 0; i < n; i++) {
        parents[i] = &fx[i].peer;
    }
    Scheduler__V2__ReschedulePersistentCachePeerRequest rs =
        SCHEDULER__V2__RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    rs.n_candidate_parents = n;
    rs.candidate_parents = parents;
    Scheduler__V2__AnnouncePersistentCachePeerRequest r =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    r.host_id = HOST_ID;
    r.task_id = TASK_ID;
    r.peer_id = PEER_ID;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST;
    r.reschedule_persistent_cache_peer_request = &rs;
    return sched_validate_announce_peer(&r, err);
}

static void test_reschedule_candidate_parents(void **state) {
    struct dfc_error err;
    struct peer_fx fx[2];
    peer_init(&fx[0]);
    peer_init(&fx[1]);
    assert_int_equal(reschedule(fx, 2, &err), 0);
    assert_int_equal(reschedule(fx, 0, &err), 0);

    /* A parent sent back with only its id (what a minimal client does) dies on cost. */
    Common__V2__PersistentCachePeer bare = COMMON__V2__PERSISTENT_CACHE_PEER__INIT;
    bare.id = "parent";
    assert_int_equal(sched_validate_peer("candidate_parents[0]", &bare, &err), -EINVAL);
    assert_string_equal(err.msg, "candidate_parents[0].cost: required");

    fx[1].task.piece_length = (64 << 20) + 1;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "reschedule_persistent_cache_peer_request.candidate_parents[1].task."
                        "piece_length: must be between 4194304 (4MiB) and 67108864 (64MiB), got "
                        "67108865");
    peer_init(&fx[1]);
    fx[1].task.persistent_replica_count = 0;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[1].task.persistent_replica_count: must be"));
    peer_init(&fx[1]);
    fx[1].task.ttl = NULL;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[1].task.ttl: required"));
    peer_init(&fx[1]);
    fx[1].task.state = "";
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[1].task.state: must not be empty"));
    peer_init(&fx[0]);
    peer_init(&fx[1]);
    fx[0].host.host.ip = "nope";
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_string_equal(err.msg, "reschedule_persistent_cache_peer_request.candidate_parents[0]."
                                 "host.ip: `nope` is not an IP address");
    peer_init(&fx[0]);
    fx[0].host.memory.used_percent = 101;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[0].host.memory.used_percent"));
    peer_init(&fx[0]);
    fx[0].peer.host = NULL;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[0].host: required"));
    peer_init(&fx[0]);
    fx[0].peer.updated_at = NULL;
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[0].updated_at: required"));
    peer_init(&fx[0]);
    fx[0].peer.state = "";
    assert_int_equal(reschedule(fx, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "candidate_parents[0].state: must not be empty"));
}

static int announce_peer(Scheduler__V2__AnnouncePersistentCachePeerRequest *r,
                         struct dfc_error *err) {
    r->host_id = HOST_ID;
    r->task_id = TASK_ID;
    r->peer_id = PEER_ID;
    return sched_validate_announce_peer(r, err);
}

static void test_announce_peer_messages(void **state) {
    struct dfc_error err;
    Scheduler__V2__AnnouncePersistentCachePeerRequest r =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    /* The oneof is required. */
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "request: required (one of its fields must be set)");
    r.peer_id = "";
    assert_int_equal(sched_validate_announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "peer_id: must not be empty");

    Scheduler__V2__RegisterPersistentCachePeerRequest reg =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_REGISTER_PERSISTENT_CACHE_PEER_REQUEST;
    r.register_persistent_cache_peer_request = &reg;
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "register_persistent_cache_peer_request.piece_length: must be at "
                                 "least 4194304 (4MiB), got 0");
    reg.piece_length = 4 << 20;
    reg.opt_output_path_case =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
    reg.output_path = ""; /* min_len 1 with ignore_empty */
    assert_int_equal(announce_peer(&r, &err), 0);

    Scheduler__V2__DownloadPersistentCachePeerStartedRequest started =
        SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST__INIT;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST;
    r.download_persistent_cache_peer_started_request = &started;
    assert_int_equal(announce_peer(&r, &err), 0);

    /* DownloadPieceFinished: piece required, with cost and created_at. */
    Scheduler__V2__DownloadPieceFinishedRequest pf =
        SCHEDULER__V2__DOWNLOAD_PIECE_FINISHED_REQUEST__INIT;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FINISHED_REQUEST;
    r.download_piece_finished_request = &pf;
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "download_piece_finished_request.piece: required");
    Common__V2__Piece piece = COMMON__V2__PIECE__INIT;
    Google__Protobuf__Duration cost = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Protobuf__Timestamp at = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    pf.piece = &piece;
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "download_piece_finished_request.piece.cost: required");
    piece.cost = &cost;
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "download_piece_finished_request.piece.created_at: required");
    piece.created_at = &at;
    assert_int_equal(announce_peer(&r, &err), 0);
    piece.digest = "crc32:907060870";
    assert_int_equal(announce_peer(&r, &err), 0);
    piece.digest = "sha256:" TASK_ID;
    assert_int_equal(announce_peer(&r, &err), 0);
    piece.digest = "sha256:abc";
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "download_piece_finished_request.piece.digest: `sha256:abc`"));
    piece.digest = "crc32:";
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    piece.digest = "crc64:12";
    assert_int_equal(announce_peer(&r, &err), -EINVAL);

    /* DownloadPieceFailed: parent_id min_len 1. */
    Scheduler__V2__DownloadPieceFailedRequest pfail =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FAILED_REQUEST;
    r.download_piece_failed_request = &pfail;
    assert_int_equal(announce_peer(&r, &err), -EINVAL);
    assert_string_equal(err.msg, "download_piece_failed_request.parent_id: must not be empty");
    pfail.parent_id = "parent";
    assert_int_equal(announce_peer(&r, &err), 0);

    Scheduler__V2__DownloadPersistentCachePeerFailedRequest dfail =
        SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST__INIT;
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST;
    r.download_persistent_cache_peer_failed_request = &dfail;
    assert_int_equal(announce_peer(&r, &err), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_announce_host),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_upload_started),
        cmocka_unit_test(test_reschedule_candidate_parents),
        cmocka_unit_test(test_announce_peer_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
