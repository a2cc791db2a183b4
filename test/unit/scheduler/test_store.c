/*
 * Tests for scheduler/store*.c against a real redis-server (test/support/redis_harness): the
 * keys, hash fields and bytes an upload leaves, read back with a plain hiredis client and
 * compared with hand-written expected bytes; TTLs and their expiry; the upstream fixes (peer
 * delete without its task or host, sets that keep the longest-lived member's expiry, a Failed
 * peer left out of the task's sets and counts); peers
 * whose host or task is gone; listings; and a Redis that is down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "store.h"
#include "test_support.h"

#define P         "scheduler:scheduler-clusters:1"
#define TASK_ID   "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"
#define HOST_ID   "127.0.0.1-node-a"
#define PEER_ID   "127.0.0.1-node-a-0b6ad1f4-0b3a-4bd0-9f52-5d3cf4a3e0f7"
#define T0        INT64_C(1764595200) /* 2025-12-01T13:20:00Z */
#define TEN_YEARS INT64_C(315360000000000000)

static struct redis_server srv;

struct fixture {
    struct sched_redis *r;
    struct sched_store *s;
};

static int start_server(void **state) {
    setenv("TZ", "UTC", 1);
    tzset();
    if (redis_harness_available()) {
        redis_server_start(&srv, NULL);
    }
    return 0;
}

static int stop_server(void **state) {
    redis_server_destroy(&srv);
    return 0;
}

static int setup(void **state) {
    static struct fixture fx;
    memset(&fx, 0, sizeof(fx));
    *state = &fx;
    if (!redis_harness_available()) {
        return 0;
    }
    if (srv.pid == 0) {
        redis_server_restart(&srv);
    }
    freeReplyObject(redis_server_command(&srv, "FLUSHALL"));
    const char *addrs[] = {srv.addr};
    struct sched_redis_opts o = {
        .addrs = addrs, .n_addrs = 1, .pool_size = 2, .backoff_min_ms = 10, .backoff_max_ms = 50};
    struct dfc_error err = {0};
    if (sched_redis_new(&o, &fx.r, &err) != 0 || sched_store_new(fx.r, 1, &fx.s, &err) != 0) {
        fail_msg("store: %s", err.msg);
    }
    return 0;
}

static int teardown(void **state) {
    struct fixture *fx = *state;
    sched_store_free(fx->s);
    sched_redis_free(fx->r);
    return 0;
}

static int64_t dl(void) {
    return sched_redis_deadline(5000);
}

static int64_t now_s(void) {
    return (int64_t)time(NULL);
}

/* ---- records as the service builds them on an upload ---- */

static void make_host(struct sched_host *h, const char *id) {
    *h = (struct sched_host){
        .id = strdup(id),
        .name = strdup("node-a"),
        .hostname = strdup("node-a"),
        .ip = strdup("127.0.0.1"),
        .type = SCHED_HOST_NORMAL,
        .port = 4000,
        .download_port = 4001,
        .os = strdup("linux"),
        .platform = strdup(""),
        .platform_family = strdup(""),
        .platform_version = strdup(""),
        .kernel_version = strdup(""),
        .cpu = {.logical_count = 2, .percent = 0.5},
        .memory = {.total = 1024, .used_percent = 12},
        .network = {.location = strdup(""), .idc = strdup("")},
        .disk = {.free = 1 << 20, .used_percent = 99.5},
        .build = {.git_version = strdup("v0.1.0"),
                  .git_commit = strdup(""),
                  .go_version = strdup(""),
                  .platform = strdup("")},
        .scheduler_cluster_id = 1,
        .announce_interval_ns = INT64_C(300000000000),
        .created_at = T0,
        .updated_at = T0,
    };
}

static void make_task(struct sched_task *t, const char *id, int64_t created_at, int64_t ttl_ns) {
    *t = (struct sched_task){
        .id = strdup(id),
        .persistent_replica_count = 1,
        .tag = strdup("tag"),
        .application = strdup(""),
        .piece_length = 4194304,
        .content_length = 10485760,
        .total_piece_count = 3,
        .state = SCHED_TASK_PENDING,
        .ttl_ns = ttl_ns,
        .created_at = created_at,
        .updated_at = created_at,
    };
}

/* The uploader's peer of UploadPersistentCacheTaskStarted. */
static void make_peer(struct sched_peer *p, const char *id, const char *task_id,
                      const char *host_id, bool persistent, int64_t created_at) {
    *p = (struct sched_peer){
        .id = strdup(id),
        .persistent = persistent,
        .state = SCHED_PEER_PENDING,
        .block_parents_null = true,
        .task_id = strdup(task_id),
        .host_id = strdup(host_id),
        .created_at = created_at,
        .updated_at = created_at,
        .concurrent_piece_count = 8,
    };
    assert_int_equal(sched_bitset_init(&p->finished_pieces, 3), 0);
}

/* ---- plain-client checks ---- */

struct kv {
    const char *name, *value;
    size_t len; /* 0: strlen(value) */
};

/* HGETALL with a plain client equals want, in order (small hashes are listpacks, which keep
 * HSET order). */
static void expect_hash(const char *key, const struct kv *want, size_t n) {
    redisReply *rep = redis_server_command(&srv, "HGETALL %s", key);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    if (rep->elements != 2 * n) {
        fail_msg("%s: %zu fields, want %zu", key, rep->elements / 2, n);
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = want[i].len ? want[i].len : strlen(want[i].value);
        const redisReply *k = rep->element[2 * i], *v = rep->element[2 * i + 1];
        if (strcmp(k->str, want[i].name) != 0 || v->len != len ||
            memcmp(v->str, want[i].value, len) != 0) {
            fail_msg("%s field %zu: got %s=%.*s, want %s=%s", key, i, k->str, (int)v->len, v->str,
                     want[i].name, want[i].value);
        }
    }
    freeReplyObject(rep);
}

static long long integer(const char *fmt, const char *key) {
    redisReply *rep = redis_server_command(&srv, fmt, key);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static void expect_members(const char *key, const char *only) {
    redisReply *rep = redis_server_command(&srv, "SMEMBERS %s", key);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    if (only == NULL) {
        assert_int_equal(rep->elements, 0);
    } else {
        assert_int_equal(rep->elements, 1);
        assert_string_equal(rep->element[0]->str, only);
    }
    freeReplyObject(rep);
}

static void expect_ttl_near(const char *key, long long want) {
    long long ttl = integer("TTL %s", key);
    if (ttl > want || ttl < want - 3) {
        fail_msg("TTL %s = %lld, want about %lld", key, ttl, want);
    }
}

static const struct kv host_bytes[] = {
    {"id", HOST_ID, 0},
    {"type", "normal", 0},
    {"name", "node-a", 0},
    {"hostname", "node-a", 0},
    {"ip", "127.0.0.1", 0},
    {"port", "4000", 0},
    {"download_port", "4001", 0},
    {"proxy_port", "0", 0},
    {"disable_shared", "0", 0},
    {"os", "linux", 0},
    {"platform", "", 0},
    {"platform_family", "", 0},
    {"platform_version", "", 0},
    {"kernel_version", "", 0},
    {"cpu_logical_count", "2", 0},
    {"cpu_physical_count", "0", 0},
    {"cpu_percent", "0.5", 0},
    {"cpu_process_percent", "0", 0},
    {"cpu_times_user", "0", 0},
    {"cpu_times_system", "0", 0},
    {"cpu_times_idle", "0", 0},
    {"cpu_times_nice", "0", 0},
    {"cpu_times_iowait", "0", 0},
    {"cpu_times_irq", "0", 0},
    {"cpu_times_softirq", "0", 0},
    {"cpu_times_steal", "0", 0},
    {"cpu_times_guest", "0", 0},
    {"cpu_times_guest_nice", "0", 0},
    {"memory_total", "1024", 0},
    {"memory_available", "0", 0},
    {"memory_used", "0", 0},
    {"memory_used_percent", "12", 0},
    {"memory_process_used_percent", "0", 0},
    {"memory_free", "0", 0},
    {"network_tcp_connection_count", "0", 0},
    {"network_upload_tcp_connection_count", "0", 0},
    {"network_location", "", 0},
    {"network_idc", "", 0},
    {"network_rx_bandwidth", "0", 0},
    {"network_max_rx_bandwidth", "0", 0},
    {"network_tx_bandwidth", "0", 0},
    {"network_max_tx_bandwidth", "0", 0},
    {"disk_total", "0", 0},
    {"disk_free", "1048576", 0},
    {"disk_used", "0", 0},
    {"disk_used_percent", "99.5", 0},
    {"disk_inodes_total", "0", 0},
    {"disk_inodes_used", "0", 0},
    {"disk_inodes_free", "0", 0},
    {"disk_inodes_used_percent", "0", 0},
    {"disk_write_bandwidth", "0", 0},
    {"disk_read_bandwidth", "0", 0},
    {"build_git_version", "v0.1.0", 0},
    {"build_git_commit", "", 0},
    {"build_go_version", "", 0},
    {"build_platform", "", 0},
    {"scheduler_cluster_id", "1", 0},
    {"announce_interval", "300000000000", 0},
    {"created_at", "2025-12-01T13:20:00Z", 0},
    {"updated_at", "2025-12-01T13:20:00Z", 0},
};

/* Every key an upload (Started, then Finished at T0 + 3 s, cost 2.5 s) leaves, byte for byte,
 * with its TTL, and nothing else. */
static void expect_uploaded(void) {
    expect_hash(P ":persistent-cache-hosts:" HOST_ID, host_bytes,
                sizeof(host_bytes) / sizeof(host_bytes[0]));
    expect_hash(P ":persistent-cache-tasks:" TASK_ID,
                (const struct kv[]){{"id", TASK_ID, 0},
                                    {"persistent_replica_count", "1", 0},
                                    {"tag", "tag", 0},
                                    {"application", "", 0},
                                    {"piece_length", "4194304", 0},
                                    {"content_length", "10485760", 0},
                                    {"total_piece_count", "3", 0},
                                    {"state", "Succeeded", 0},
                                    {"ttl", "315360000000000000", 0},
                                    {"created_at", "2025-12-01T13:20:00Z", 0},
                                    {"updated_at", "2025-12-01T13:20:03Z", 0}},
                11);
    expect_hash(P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID,
                (const struct kv[]){{"id", PEER_ID, 0},
                                    {"persistent", "1", 0},
                                    {"finished_pieces", "\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0\7", 16},
                                    {"state", "Succeeded", 0},
                                    {"block_parents", "null", 0},
                                    {"task_id", TASK_ID, 0},
                                    {"host_id", HOST_ID, 0},
                                    {"cost", "2500000000", 0},
                                    {"created_at", "2025-12-01T13:20:00Z", 0},
                                    {"updated_at", "2025-12-01T13:20:03Z", 0},
                                    {"concurrent_piece_count", "8", 0}},
                11);
    expect_members(P ":persistent-cache-hosts", HOST_ID);
    expect_members(P ":persistent-cache-tasks:" TASK_ID
                     ":persistent-cache-peers-for-persistent-cache-task",
                   PEER_ID);
    expect_members(P ":persistent-cache-tasks:" TASK_ID
                     ":persistent-peers-for-persistent-cache-task",
                   PEER_ID);
    expect_members(P ":persistent-cache-hosts:" HOST_ID
                     ":persistent-cache-peers-for-persistent-cache-task",
                   PEER_ID);

    /* TTL: the task's ttl counted from its created_at, on every key but the host's. */
    long long remaining = (TEN_YEARS / 1000000000) - (now_s() - T0);
    expect_ttl_near(P ":persistent-cache-tasks:" TASK_ID, remaining);
    expect_ttl_near(P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID, remaining);
    expect_ttl_near(P ":persistent-cache-tasks:" TASK_ID
                      ":persistent-cache-peers-for-persistent-cache-task",
                    remaining);
    expect_ttl_near(P ":persistent-cache-tasks:" TASK_ID
                      ":persistent-peers-for-persistent-cache-task",
                    remaining);
    expect_ttl_near(P ":persistent-cache-hosts:" HOST_ID
                      ":persistent-cache-peers-for-persistent-cache-task",
                    remaining);
    assert_int_equal(integer("TTL %s", P ":persistent-cache-hosts:" HOST_ID), -1);
    assert_int_equal(integer("TTL %s", P ":persistent-cache-hosts"), -1);
    /* Nothing else was written. */
    assert_int_equal(integer("DBSIZE%s", ""), 7);
}

/* Started then Finished, as the service runs them, then every key read back byte for byte. */
static void test_upload_leaves_upstreams_bytes(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, T0, TEN_YEARS);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, T0);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    /* Started */
    assert_int_equal(sched_task_fire(&t.state, SCHED_TASK_EV_UPLOAD, &err), 0);
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
    assert_int_equal(sched_peer_fire(&p.state, SCHED_PEER_EV_UPLOAD, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
    expect_hash(P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID,
                (const struct kv[]){{"id", PEER_ID, 0},
                                    {"persistent", "1", 0},
                                    {"finished_pieces", "\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0\0", 16},
                                    {"state", "Uploading", 0},
                                    {"block_parents", "null", 0},
                                    {"task_id", TASK_ID, 0},
                                    {"host_id", HOST_ID, 0},
                                    {"cost", "0", 0},
                                    {"created_at", "2025-12-01T13:20:00Z", 0},
                                    {"updated_at", "2025-12-01T13:20:00Z", 0},
                                    {"concurrent_piece_count", "8", 0}},
                11);
    /* Finished */
    sched_bitset_set_all(&p.finished_pieces);
    assert_int_equal(sched_peer_fire(&p.state, SCHED_PEER_EV_SUCCEEDED, &err), 0);
    p.cost_ns = 2500000000;
    p.updated_at = T0 + 3;
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
    assert_int_equal(sched_task_fire(&t.state, SCHED_TASK_EV_SUCCEEDED, &err), 0);
    t.updated_at = T0 + 3;
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);

    expect_uploaded();

    /* And the managers read it all back. */
    struct sched_host hb;
    struct sched_task tb;
    struct sched_peer pb;
    assert_int_equal(sched_host_load(fx->s, dl(), HOST_ID, &hb, &err), 0);
    assert_string_equal(hb.name, "node-a");
    assert_true(hb.disk.used_percent == 99.5);
    assert_int_equal(sched_task_load(fx->s, dl(), TASK_ID, &tb, &err), 0);
    assert_int_equal(tb.state, SCHED_TASK_SUCCEEDED);
    assert_int_equal(tb.updated_at, T0 + 3);
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), 0);
    assert_int_equal(pb.state, SCHED_PEER_SUCCEEDED);
    assert_true(pb.block_parents_null);
    assert_int_equal(sched_bitset_count(&pb.finished_pieces), 3);
    {
        struct sched_host h3;
        struct sched_task t3;
        struct sched_peer p3;
        int rs[3];
        struct dfc_error errs[3];
        assert_int_equal(sched_store_load_upload(fx->s, dl(), HOST_ID, &h3, TASK_ID, &t3, PEER_ID,
                                                 &p3, rs, errs, &err),
                         0);
        assert_int_equal(rs[0], 0);
        assert_int_equal(rs[1], 0);
        assert_int_equal(rs[2], 0);
        assert_string_equal(h3.name, "node-a");
        assert_int_equal(t3.updated_at, T0 + 3);
        assert_int_equal(p3.state, SCHED_PEER_SUCCEEDED);
        assert_int_equal(sched_bitset_count(&p3.finished_pieces), 3);
        sched_host_done(&h3);
        sched_task_done(&t3);
        sched_peer_done(&p3);
    }
    assert_int_equal(pb.cost_ns, 2500000000);
    uint64_t all = 9, pers = 9;
    assert_int_equal(sched_task_replica_counts(fx->s, dl(), TASK_ID, &all, &pers, &err), 0);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    sched_host_done(&hb);
    sched_task_done(&tb);
    sched_peer_done(&pb);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* The same upload through the few-round-trip calls the service uses: Started's task and peer
 * in one script, Finished's reads in one pipeline and its writes in one script. The bytes,
 * TTLs and key count must be exactly those of the one-record-at-a-time calls above. */
static void test_upload_in_one_script_per_call_leaves_the_same_bytes(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, T0, TEN_YEARS);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, T0);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    /* Started */
    assert_int_equal(sched_task_fire(&t.state, SCHED_TASK_EV_UPLOAD, &err), 0);
    assert_int_equal(sched_peer_fire(&p.state, SCHED_PEER_EV_UPLOAD, &err), 0);
    uint64_t all = 9, pers = 9;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &p, &all, &pers, &err), 0);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    /* Finished, on the records as read back */
    struct sched_peer pl;
    struct sched_task tl;
    assert_int_equal(
        sched_store_load_peer_task(fx->s, dl(), PEER_ID, HOST_ID, TASK_ID, &pl, &tl, &err), 0);
    assert_int_equal(pl.state, SCHED_PEER_UPLOADING);
    assert_string_equal(pl.task_id, TASK_ID);
    assert_int_equal(tl.state, SCHED_TASK_UPLOADING);
    assert_string_equal(tl.id, TASK_ID);
    assert_int_equal(tl.created_at, T0);
    sched_bitset_set_all(&pl.finished_pieces);
    assert_int_equal(sched_peer_fire(&pl.state, SCHED_PEER_EV_SUCCEEDED, &err), 0);
    pl.cost_ns = 2500000000;
    pl.updated_at = T0 + 3;
    assert_int_equal(sched_task_fire(&tl.state, SCHED_TASK_EV_SUCCEEDED, &err), 0);
    tl.updated_at = T0 + 3;
    all = pers = 9;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &tl, &pl, &all, &pers, &err), 0);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    expect_uploaded();
    /* The task with its counts in one round trip, as a Stat reads it. */
    struct sched_task tc;
    all = pers = 9;
    assert_int_equal(sched_store_load_task_counts(fx->s, dl(), TASK_ID, &tc, &all, &pers, &err), 0);
    assert_int_equal(tc.state, SCHED_TASK_SUCCEEDED);
    assert_int_equal(tc.updated_at, T0 + 3);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    sched_task_done(&tc);
    assert_int_equal(
        sched_store_load_task_counts(fx->s, dl(), "no-such-task", &tc, &all, &pers, &err), -ENOENT);
    assert_int_equal(all, 0);
    sched_task_done(&tc);
    sched_task_done(&tl);
    sched_peer_done(&pl);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* sched_store_load_peer_task(id, host_hint, task_hint) answers exactly as sched_peer_load
 * then sched_task_load of the peer's task: same code, same message, same task. */
static void expect_as_the_loads(struct fixture *fx, const char *id, const char *host_hint,
                                const char *task_hint, int want) {
    struct dfc_error e1 = {0}, e2 = {0};
    struct sched_peer p1, p2;
    struct sched_task t1 = {0}, t2;
    int r1 = sched_peer_load(fx->s, dl(), id, &p1, &e1);
    if (r1 == 0) {
        r1 = sched_task_load(fx->s, dl(), p1.task_id, &t1, &e1);
    }
    int r2 = sched_store_load_peer_task(fx->s, dl(), id, host_hint, task_hint, &p2, &t2, &e2);
    if (r1 != want || r2 != want) {
        fail_msg("peer %s (hints %s, %s): loads %d (%s), one trip %d (%s), want %d", id, host_hint,
                 task_hint, r1, e1.msg, r2, e2.msg, want);
    }
    if (r1 < 0) {
        assert_string_equal(e2.msg, e1.msg);
        assert_null(p2.id);
        assert_null(t2.id);
    } else {
        assert_string_equal(p2.id, p1.id);
        assert_string_equal(t2.id, t1.id);
        assert_int_equal(t2.state, t1.state);
        assert_int_equal(t2.created_at, t1.created_at);
    }
    sched_peer_done(&p1);
    sched_task_done(&t1);
    sched_peer_done(&p2);
    sched_task_done(&t2);
}

static void test_load_peer_task_answers_as_the_loads(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, now_s(), TEN_YEARS);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &p, NULL, NULL, &err), 0);
    expect_as_the_loads(fx, PEER_ID, HOST_ID, TASK_ID, 0);
    /* Hints that are not the peer's (or not ids at all): its own task and host are checked. */
    expect_as_the_loads(fx, PEER_ID, HOST_ID, "another-task", 0);
    expect_as_the_loads(fx, PEER_ID, "another-host", TASK_ID, 0);
    expect_as_the_loads(fx, PEER_ID, "", "", 0);
    expect_as_the_loads(fx, "no-such-peer", HOST_ID, TASK_ID, -ENOENT);
    expect_as_the_loads(fx, "", HOST_ID, TASK_ID, -EINVAL);
    /* A task key of another type exists: the peer is found, then its task is not. */
    freeReplyObject(
        redis_server_command(&srv, "RENAME %s saved-task", P ":persistent-cache-tasks:" TASK_ID));
    freeReplyObject(redis_server_command(&srv, "SET %s x", P ":persistent-cache-tasks:" TASK_ID));
    expect_as_the_loads(fx, PEER_ID, HOST_ID, TASK_ID, -ENOENT);
    /* Task gone, then host gone (and task back). */
    freeReplyObject(redis_server_command(&srv, "DEL %s", P ":persistent-cache-tasks:" TASK_ID));
    expect_as_the_loads(fx, PEER_ID, HOST_ID, TASK_ID, -ENOENT);
    expect_as_the_loads(fx, PEER_ID, HOST_ID, "another-task", -ENOENT);
    freeReplyObject(
        redis_server_command(&srv, "RENAME saved-task %s", P ":persistent-cache-tasks:" TASK_ID));
    expect_as_the_loads(fx, PEER_ID, HOST_ID, TASK_ID, 0);
    freeReplyObject(redis_server_command(&srv, "DEL %s", P ":persistent-cache-hosts:" HOST_ID));
    expect_as_the_loads(fx, PEER_ID, HOST_ID, TASK_ID, -ENOENT);
    expect_as_the_loads(fx, PEER_ID, "another-host", TASK_ID, -ENOENT);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* One script for the task and its peer: a refused peer writes neither record, and a task
 * past its TTL deletes both and takes only this peer out of the sets. */
static void test_store_task_peer_refusal_and_expiry(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_task t;
    struct sched_peer p, other, q;
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    make_peer(&other, "peer-other", "task-other", HOST_ID, true, t.created_at);
    make_peer(&q, "peer-q", TASK_ID, HOST_ID, true, t.created_at);
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &other, NULL, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "peer-other"));
    assert_int_equal(integer("DBSIZE%s", ""), 0);
    uint64_t all = 0, pers = 0;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &p, &all, &pers, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &q, &t, &err), 0);
    assert_int_equal(integer("DBSIZE%s", ""), 6); /* task, 2 peers, 3 sets */
    expect_ttl_near(P ":persistent-cache-tasks:" TASK_ID, 3600);
    t.created_at = now_s() - 4000; /* now past its TTL */
    all = pers = 9;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &p, &all, &pers, &err), 0);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-tasks:" TASK_ID), 0);
    assert_int_equal(
        integer("EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID), 0);
    expect_members(P ":persistent-cache-tasks:" TASK_ID
                     ":persistent-cache-peers-for-persistent-cache-task",
                   "peer-q");
    expect_members(P ":persistent-cache-tasks:" TASK_ID
                     ":persistent-peers-for-persistent-cache-task",
                   "peer-q");
    expect_members(P ":persistent-cache-hosts:" HOST_ID
                     ":persistent-cache-peers-for-persistent-cache-task",
                   "peer-q");
    sched_task_done(&t);
    sched_peer_done(&p);
    sched_peer_done(&other);
    sched_peer_done(&q);
}

static bool all_gone(void *arg) {
    const char *const *keys = arg;
    for (size_t i = 0; keys[i] != NULL; i++) {
        if (integer("EXISTS %s", keys[i]) != 0) {
            return false;
        }
    }
    return true;
}

/* A task created ttl - 3 s ago: everything of it expires within about 3 s. */
static void test_ttl_expiry_removes_task_peers_and_sets(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    int64_t ttl_ns = INT64_C(300) * 1000000000;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, now_s() - 297, ttl_ns);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
    const char *keys[] = {
        P ":persistent-cache-tasks:" TASK_ID,
        P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID,
        P ":persistent-cache-tasks:" TASK_ID ":persistent-cache-peers-for-persistent-cache-task",
        P ":persistent-cache-tasks:" TASK_ID ":persistent-peers-for-persistent-cache-task",
        P ":persistent-cache-hosts:" HOST_ID ":persistent-cache-peers-for-persistent-cache-task",
        NULL};
    for (size_t i = 0; keys[i] != NULL; i++) {
        /* each key expires with the task (-2: already gone on a slow run; never -1) */
        long long ttl = integer("TTL %s", keys[i]);
        if (ttl != -2 && (ttl < 0 || ttl > 3)) {
            fail_msg("TTL %s = %lld, want 0..3", keys[i], ttl);
        }
    }
    /* Generous deadline; the point is that they go, not how fast. */
    assert_true(test_wait_for(all_gone, keys, 10000));
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-hosts:" HOST_ID), 1);
    struct sched_task tb;
    assert_int_equal(sched_task_load(fx->s, dl(), TASK_ID, &tb, &err), -ENOENT);
    assert_string_equal(err.msg, "task " TASK_ID " not found");
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), -ENOENT);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* Remaining TTL <= 0 deletes the record at once; other tasks' peers on the host keep their
 * membership (upstream's EXPIRE 0 deleted the whole host set). */
static void test_fix_expired_store_removes_only_its_own_membership(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_task live, dead;
    struct sched_peer a, b;
    make_task(&live, "task-live", now_s(), INT64_C(3600) * 1000000000);
    make_task(&dead, "task-dead", now_s() - 400, INT64_C(300) * 1000000000);
    make_peer(&a, "peer-a", "task-live", HOST_ID, true, live.created_at);
    make_peer(&b, "peer-b", "task-dead", HOST_ID, true, dead.created_at);
    assert_int_equal(sched_task_store(fx->s, dl(), &live, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &a, &live, &err), 0);
    /* an earlier copy of the dead task's records, as if stored while it was alive */
    freeReplyObject(
        redis_server_command(&srv, "HSET %s id task-dead", P ":persistent-cache-tasks:task-dead"));
    freeReplyObject(redis_server_command(&srv, "SADD %s peer-b",
                                         P ":persistent-cache-hosts:" HOST_ID
                                           ":persistent-cache-peers-for-persistent-cache-task"));
    assert_int_equal(sched_task_store(fx->s, dl(), &dead, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &b, &dead, &err), 0);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-tasks:task-dead"), 0);
    assert_int_equal(
        integer("EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:peer-b"), 0);
    expect_members(P ":persistent-cache-hosts:" HOST_ID
                     ":persistent-cache-peers-for-persistent-cache-task",
                   "peer-a");
    expect_ttl_near(P ":persistent-cache-hosts:" HOST_ID
                      ":persistent-cache-peers-for-persistent-cache-task",
                    3600);
    sched_task_done(&live);
    sched_task_done(&dead);
    sched_peer_done(&a);
    sched_peer_done(&b);
}

/* A short-TTL peer stored last on a host does not cut the host set's expiry short. */
static void test_fix_set_expiry_only_extends(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_task longer, shorter;
    struct sched_peer a, b;
    make_task(&longer, "task-long", now_s(), INT64_C(7200) * 1000000000);
    make_task(&shorter, "task-short", now_s(), INT64_C(600) * 1000000000);
    make_peer(&a, "peer-a", "task-long", HOST_ID, false, longer.created_at);
    make_peer(&b, "peer-b", "task-short", HOST_ID, false, shorter.created_at);
    assert_int_equal(sched_peer_store(fx->s, dl(), &a, &longer, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &b, &shorter, &err), 0);
    const char *hs =
        P ":persistent-cache-hosts:" HOST_ID ":persistent-cache-peers-for-persistent-cache-task";
    expect_ttl_near(hs, 7200);
    expect_ttl_near(P ":persistent-cache-peers-for-persistent-cache-task:peer-b", 600);
    assert_int_equal(integer("SCARD %s", hs), 2);
    /* not persistent: never in the persistent set */
    assert_int_equal(
        integer("EXISTS %s",
                P ":persistent-cache-tasks:task-long:persistent-peers-for-persistent-cache-task"),
        0);
    /* promoted, then (a store with persistent = 0) out of the persistent set again */
    a.persistent = true;
    assert_int_equal(sched_peer_store(fx->s, dl(), &a, &longer, &err), 0);
    expect_members(P ":persistent-cache-tasks:task-long:persistent-peers-for-persistent-cache-task",
                   "peer-a");
    a.persistent = false;
    assert_int_equal(sched_peer_store(fx->s, dl(), &a, &longer, &err), 0);
    expect_members(P ":persistent-cache-tasks:task-long:persistent-peers-for-persistent-cache-task",
                   NULL);
    sched_task_done(&longer);
    sched_task_done(&shorter);
    sched_peer_done(&a);
    sched_peer_done(&b);
}

static void store_all(struct fixture *fx, bool with_host) {
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    if (with_host) {
        assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    }
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

static void expect_peer_fully_gone(void) {
    assert_int_equal(
        integer("EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID), 0);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-tasks:" TASK_ID
                                            ":persistent-cache-peers-for-persistent-cache-task"),
                     0);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-tasks:" TASK_ID
                                            ":persistent-peers-for-persistent-cache-task"),
                     0);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-hosts:" HOST_ID
                                            ":persistent-cache-peers-for-persistent-cache-task"),
                     0);
}

/* Fix: upstream's Delete loads the peer first, which fails once its task hash is gone, and
 * leaves the peer hash and its memberships until TTL. */
static void test_fix_peer_delete_when_task_is_gone(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    store_all(fx, true);
    assert_int_equal(sched_task_delete(fx->s, dl(), TASK_ID, &err), 0);
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), -ENOENT);
    assert_string_equal(err.msg, "peer " PEER_ID " not found: its task " TASK_ID " is gone");
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), 0);
    expect_peer_fully_gone();
    /* deleting again: not found */
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), -ENOENT);
    assert_string_equal(err.msg, "peer " PEER_ID " not found");
}

static void test_fix_peer_delete_when_host_is_gone(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    store_all(fx, true);
    assert_int_equal(sched_host_delete(fx->s, dl(), HOST_ID, &err), 0);
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-hosts:" HOST_ID), 0);
    expect_members(P ":persistent-cache-hosts", NULL);
    assert_int_equal(sched_host_delete(fx->s, dl(), HOST_ID, &err), -ENOENT);
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), 0);
    expect_peer_fully_gone();
    assert_int_equal(integer("EXISTS %s", P ":persistent-cache-tasks:" TASK_ID), 1);
}

#define TS_ALL                                                                                     \
    P ":persistent-cache-tasks:" TASK_ID ":persistent-cache-peers-for-persistent-cache-task"
#define TS_PERSISTENT                                                                              \
    P ":persistent-cache-tasks:" TASK_ID ":persistent-peers-for-persistent-cache-task"
#define HS_PEERS                                                                                   \
    P ":persistent-cache-hosts:" HOST_ID ":persistent-cache-peers-for-persistent-cache-task"

/* Fix: upstream leaves a peer stored Failed (a pull that failed) in the task's peer sets, so
 * every count (SCARD) takes it for a replica that is not there and nothing repairs it. A
 * Failed store leaves both task sets but keeps the hash and the host-set membership. */
static void test_fix_failed_peer_not_counted(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_host h;
    struct sched_task t;
    struct sched_peer up, pull;
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    t.state = SCHED_TASK_SUCCEEDED;
    make_peer(&up, "peer-up", TASK_ID, HOST_ID, true, t.created_at);
    up.state = SCHED_PEER_SUCCEEDED;
    make_peer(&pull, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    pull.state = SCHED_PEER_RUNNING;
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &up, &t, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &pull, &t, &err), 0);
    uint64_t all = 0, pers = 0;
    assert_int_equal(sched_task_replica_counts(fx->s, dl(), TASK_ID, &all, &pers, &err), 0);
    assert_int_equal(all, 2); /* a running pull is a peer of the task */

    /* the pull fails (DownloadPersistentCachePeerFailed) */
    pull.state = SCHED_PEER_FAILED;
    assert_int_equal(sched_peer_store(fx->s, dl(), &pull, &t, &err), 0);
    assert_int_equal(sched_task_replica_counts(fx->s, dl(), TASK_ID, &all, &pers, &err), 0);
    assert_int_equal(pers, 1);
    assert_int_equal(all, 1);
    struct sched_task tb;
    assert_int_equal(sched_store_load_task_counts(fx->s, dl(), TASK_ID, &tb, &all, &pers, &err), 0);
    sched_task_done(&tb);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);
    expect_members(TS_ALL, "peer-up");
    expect_members(TS_PERSISTENT, "peer-up");
    /* its hash stays (to its TTL), loadable, and its host still lists it for host deletion */
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), 0);
    assert_int_equal(pb.state, SCHED_PEER_FAILED);
    sched_peer_done(&pb);
    expect_ttl_near(P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID, 3600);
    assert_int_equal(integer("SISMEMBER " HS_PEERS " %s", PEER_ID), 1);
    struct sched_peer *list;
    size_t n;
    assert_int_equal(sched_peer_load_by_task(fx->s, dl(), TASK_ID, &list, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, "peer-up");
    sched_peer_list_free(list, n);

    /* the one-script path (an upload's Finished or Failed) returns the same counts */
    up.state = SCHED_PEER_FAILED;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &up, &all, &pers, &err), 0);
    assert_int_equal(all, 0);
    assert_int_equal(pers, 0);
    expect_members(TS_ALL, NULL);
    /* stored again as live (a retry under the same id), it is counted again */
    up.state = SCHED_PEER_SUCCEEDED;
    assert_int_equal(sched_store_task_peer(fx->s, dl(), &t, &up, &all, &pers, &err), 0);
    assert_int_equal(all, 1);
    assert_int_equal(pers, 1);

    /* DeletePersistentCachePeer of the Failed peer removes its hash and host membership */
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), 0);
    assert_int_equal(
        integer("EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID), 0);
    expect_members(HS_PEERS, "peer-up");
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&up);
    sched_peer_done(&pull);
}

/* A peer whose host was never stored (or was collected) does not load, and is skipped by the
 * task's listing. */
static void test_peer_with_missing_host_is_not_found(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    store_all(fx, false);
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), -ENOENT);
    assert_string_equal(err.msg, "peer " PEER_ID " not found: its host " HOST_ID " is gone");
    assert_null(pb.id);
    struct sched_peer *list = (struct sched_peer *)0x1;
    size_t n = 9;
    assert_int_equal(sched_peer_load_by_task(fx->s, dl(), TASK_ID, &list, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_null(list);
    struct sched_ids ids;
    assert_int_equal(sched_peer_ids_by_task(fx->s, dl(), TASK_ID, false, &ids, &err), 0);
    assert_int_equal(ids.n, 1); /* the id is still listed; only loading refuses it */
    sched_ids_free(&ids);
    /* with the host back, it loads */
    struct sched_host h;
    make_host(&h, HOST_ID);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    assert_int_equal(sched_peer_load_by_task(fx->s, dl(), TASK_ID, &list, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, PEER_ID);
    sched_peer_list_free(list, n);
    assert_int_equal(sched_peer_ids_by_host(fx->s, dl(), HOST_ID, &ids, &err), 0);
    assert_int_equal(ids.n, 1);
    assert_string_equal(ids.ids[0], PEER_ID);
    sched_ids_free(&ids);
    assert_int_equal(sched_peer_ids_by_task(fx->s, dl(), TASK_ID, true, &ids, &err), 0);
    assert_int_equal(ids.n, 1);
    sched_ids_free(&ids);
    sched_host_done(&h);
}

/* A peer's updated_at as stored (HGET with a plain client), "" when the field is missing. */
static void peer_updated_at(char *out, size_t size) {
    redisReply *rep = redis_server_command(
        &srv, "HGET %s updated_at", P ":persistent-cache-peers-for-persistent-cache-task:" PEER_ID);
    assert_true(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL);
    snprintf(out, size, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

/* Touch (a parent's DownloadPieceFinished): updated_at only, and only while the peer would
 * load: with its host gone, its task gone, or its hash gone it writes nothing. */
static void test_touch_only_a_peer_that_loads(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    char before[64], after[64];
    int64_t later = now_s() + 60;

    store_all(fx, false); /* no host */
    peer_updated_at(before, sizeof(before));
    assert_int_equal(sched_peer_touch(fx->s, dl(), PEER_ID, later, &err), -ENOENT);
    assert_string_equal(err.msg, "peer " PEER_ID " not found");
    peer_updated_at(after, sizeof(after));
    assert_string_equal(after, before);

    struct sched_host h;
    make_host(&h, HOST_ID);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
    sched_host_done(&h);
    assert_int_equal(sched_peer_touch(fx->s, dl(), PEER_ID, later, &err), 0);
    peer_updated_at(after, sizeof(after));
    assert_string_not_equal(after, before);
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), 0);
    assert_int_equal(pb.updated_at, later);
    sched_peer_done(&pb);

    assert_int_equal(sched_task_delete(fx->s, dl(), TASK_ID, &err), 0);
    peer_updated_at(before, sizeof(before));
    assert_int_equal(sched_peer_touch(fx->s, dl(), PEER_ID, later + 60, &err), -ENOENT);
    peer_updated_at(after, sizeof(after));
    assert_string_equal(after, before);

    assert_int_equal(sched_peer_touch(fx->s, dl(), "nobody", later, &err), -ENOENT);
    assert_int_equal(
        integer("EXISTS %s", P ":persistent-cache-peers-for-persistent-cache-task:nobody"), 0);
}

/* Upstream's LoadAll: the segment after the prefix up to the next ':', de-duplicated. */
static void test_task_ids_scan(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    char id[8];
    for (int i = 0; i < 30; i++) {
        struct sched_task t;
        struct sched_peer p;
        snprintf(id, sizeof(id), "t%02d", i);
        make_task(&t, id, now_s(), INT64_C(3600) * 1000000000);
        make_peer(&p, id, id, HOST_ID, i % 2 == 0, t.created_at);
        assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
        assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
        sched_task_done(&t);
        sched_peer_done(&p);
    }
    /* sets only (a task hash that is gone) still name the task; strays do not */
    freeReplyObject(redis_server_command(
        &srv, "SADD %s x",
        P ":persistent-cache-tasks:orphan:persistent-cache-peers-for-persistent-cache-task"));
    freeReplyObject(redis_server_command(&srv, "SET %s x", P ":persistent-cache-tasks:"));
    freeReplyObject(redis_server_command(&srv, "SET %s x", P ":persistent-cache-tasks::x"));
    freeReplyObject(redis_server_command(
        &srv, "SET %s x", "scheduler:scheduler-clusters:2:persistent-cache-tasks:other"));
    freeReplyObject(redis_server_command(&srv, "SET %s x", P ":persistent-tasks:parallel"));
    struct sched_ids ids;
    assert_int_equal(sched_task_ids(fx->s, dl(), &ids, &err), 0);
    assert_int_equal(ids.n, 31);
    assert_string_equal(ids.ids[0], "orphan"); /* sorted */
    for (int i = 0; i < 30; i++) {
        snprintf(id, sizeof(id), "t%02d", i);
        assert_string_equal(ids.ids[i + 1], id);
    }
    sched_ids_free(&ids);
}

static void test_hosts_listing_and_random(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    const char *names[] = {"h0", "h1", "h2", "h3", "h4"};
    for (size_t i = 0; i < 5; i++) {
        struct sched_host h;
        make_host(&h, names[i]);
        assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), 0);
        sched_host_done(&h);
    }
    /* an id in the set whose hash is gone, and one whose hash does not parse */
    freeReplyObject(
        redis_server_command(&srv, "SADD %s ghost broken", P ":persistent-cache-hosts"));
    freeReplyObject(
        redis_server_command(&srv, "HSET %s id broken port x", P ":persistent-cache-hosts:broken"));
    freeReplyObject(redis_server_command(&srv, "SADD %s string", P ":persistent-cache-hosts"));
    freeReplyObject(redis_server_command(&srv, "SET %s x", P ":persistent-cache-hosts:string"));
    struct sched_ids ids;
    assert_int_equal(sched_host_ids(fx->s, dl(), &ids, &err), 0);
    assert_int_equal(ids.n, 8);
    sched_ids_free(&ids);
    struct sched_host bad;
    assert_int_equal(sched_host_load(fx->s, dl(), "broken", &bad, &err), -ENOENT);
    assert_string_equal(err.msg, "host broken: host field `port` is not parsable");
    assert_int_equal(sched_host_load(fx->s, dl(), "ghost", &bad, &err), -ENOENT);
    assert_string_equal(err.msg, "host ghost not found");
    assert_int_equal(sched_host_load(fx->s, dl(), "string", &bad, &err), -ENOENT);
    assert_string_equal(err.msg,
                        "load host string: " P ":persistent-cache-hosts:string is not a hash");
    /* The same answers from the three reads in one round trip. */
    struct sched_task no_task;
    struct sched_peer no_peer;
    int rs[3];
    struct dfc_error errs[3];
    assert_int_equal(sched_store_load_upload(fx->s, dl(), "string", &bad, "no-task", &no_task,
                                             "no-peer", &no_peer, rs, errs, &err),
                     0);
    assert_int_equal(rs[0], -ENOENT);
    assert_string_equal(errs[0].msg,
                        "load host string: " P ":persistent-cache-hosts:string is not a hash");
    assert_int_equal(rs[1], -ENOENT);
    assert_string_equal(errs[1].msg, "task no-task not found");
    assert_int_equal(rs[2], -ENOENT);
    assert_string_equal(errs[2].msg, "peer no-peer not found");
    assert_int_equal(sched_store_load_upload(fx->s, dl(), "broken", &bad, "no-task", &no_task,
                                             "no-peer", &no_peer, rs, errs, &err),
                     0);
    assert_int_equal(rs[0], -ENOENT);
    assert_string_equal(errs[0].msg, "host broken: host field `port` is not parsable");

    const char *block[] = {"h1", "h3"};
    for (int round = 0; round < 20; round++) {
        struct sched_host *list;
        size_t n;
        assert_int_equal(sched_host_load_random(fx->s, dl(), 10, block, 2, &list, &n, &err), 0);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++) {
            assert_true(strcmp(list[i].id, "h0") == 0 || strcmp(list[i].id, "h2") == 0 ||
                        strcmp(list[i].id, "h4") == 0);
            for (size_t j = 0; j < i; j++) {
                assert_string_not_equal(list[i].id, list[j].id);
            }
        }
        sched_host_list_free(list, n);
        assert_int_equal(sched_host_load_random(fx->s, dl(), 2, block, 2, &list, &n, &err), 0);
        assert_int_equal(n, 2);
        sched_host_list_free(list, n);
    }
    /* every non-blocked host comes up first sometimes: the order is shuffled */
    bool seen[5] = {false};
    for (int round = 0; round < 200; round++) {
        struct sched_host *list;
        size_t n;
        assert_int_equal(sched_host_load_random(fx->s, dl(), 1, NULL, 0, &list, &n, &err), 0);
        assert_int_equal(n, 1);
        seen[list[0].id[1] - '0'] = true;
        sched_host_list_free(list, n);
    }
    for (int i = 0; i < 5; i++) {
        assert_true(seen[i]);
    }
}

/* Hashes written by another scheduler: more fields, other order, no `name` (before upstream
 * v2.4.1) still load. */
static void test_reads_hashes_written_by_others(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    redisContext *c = redis_server_connect(&srv);
    redisReply *rep;
    /* every host field but `name`, in reverse order, plus an old misspelled one */
    size_t n = sizeof(host_bytes) / sizeof(host_bytes[0]);
    const char *argv[2 + 2 * 64];
    size_t lens[2 + 2 * 64];
    int argc = 0;
    argv[argc] = "HSET", lens[argc++] = 4;
    argv[argc] = P ":persistent-cache-hosts:old", lens[argc++] = strlen(argv[1]);
    argv[argc] = "cpu_processe_percent", lens[argc++] = 20;
    argv[argc] = "7", lens[argc++] = 1;
    for (size_t i = n; i-- > 0;) {
        if (strcmp(host_bytes[i].name, "name") == 0) {
            continue;
        }
        argv[argc] = host_bytes[i].name, lens[argc++] = strlen(host_bytes[i].name);
        argv[argc] = host_bytes[i].value, lens[argc++] = strlen(host_bytes[i].value);
    }
    rep = redisCommandArgv(c, argc, argv, lens);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    freeReplyObject(rep);
    redisFree(c);
    struct sched_host h;
    assert_int_equal(sched_host_load(fx->s, dl(), "old", &h, &err), 0);
    assert_string_equal(h.name, "");
    assert_string_equal(h.id, HOST_ID); /* the id field as stored */
    assert_int_equal(h.download_port, 4001);
    sched_host_done(&h);
}

static void test_bad_arguments(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    struct sched_task t;
    struct sched_peer p;
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    make_peer(&p, PEER_ID, "another-task", HOST_ID, true, t.created_at);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "store peer " PEER_ID ": it belongs to task another-task, not " TASK_ID);
    struct sched_host h;
    assert_int_equal(sched_host_load(fx->s, dl(), "", &h, &err), -EINVAL);
    assert_string_equal(err.msg, "host id is empty");
    char long_id[1100];
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_int_equal(sched_peer_delete(fx->s, dl(), long_id, &err), -EINVAL);
    assert_string_equal(err.msg, "peer id is longer than 1024 bytes");
    assert_int_equal(integer("DBSIZE%s", ""), 0);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* Redis down: every manager call returns redis.h's UNAVAILABLE naming the address, none
 * crashes or hangs; after a restart the same store works again. */
static void test_redis_down_is_unavailable(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    store_all(fx, true);
    redis_server_stop(&srv, SIGKILL);
    struct sched_host h;
    struct sched_task t;
    struct sched_peer p;
    struct sched_ids ids;
    uint64_t a, b;
    int rc = sched_task_load(fx->s, dl(), TASK_ID, &t, &err);
    assert_int_equal(rc, -ECONNREFUSED);
    assert_int_equal(dfc_error_to_grpc(rc), DFC_GRPC_UNAVAILABLE);
    assert_non_null(strstr(err.msg, srv.addr));
    assert_non_null(strstr(err.msg, "load task " TASK_ID));
    assert_int_equal(sched_host_load(fx->s, dl(), HOST_ID, &h, &err), -ECONNREFUSED);
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &p, &err), -ECONNREFUSED);
    assert_null(p.id);
    make_host(&h, HOST_ID);
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    make_peer(&p, PEER_ID, TASK_ID, HOST_ID, true, t.created_at);
    assert_int_equal(sched_host_store(fx->s, dl(), &h, &err), -ECONNREFUSED);
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), -ECONNREFUSED);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), -ECONNREFUSED);
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), -ECONNREFUSED);
    assert_int_equal(sched_task_delete(fx->s, dl(), TASK_ID, &err), -ECONNREFUSED);
    assert_int_equal(sched_host_delete(fx->s, dl(), HOST_ID, &err), -ECONNREFUSED);
    assert_int_equal(sched_task_ids(fx->s, dl(), &ids, &err), -ECONNREFUSED);
    assert_null(ids.ids);
    assert_int_equal(sched_host_ids(fx->s, dl(), &ids, &err), -ECONNREFUSED);
    assert_int_equal(sched_task_replica_counts(fx->s, dl(), TASK_ID, &a, &b, &err), -ECONNREFUSED);
    struct sched_host *hl;
    size_t n;
    assert_int_equal(sched_host_load_random(fx->s, dl(), 3, NULL, 0, &hl, &n, &err), -ECONNREFUSED);
    struct sched_peer *pl;
    assert_int_equal(sched_peer_load_by_task(fx->s, dl(), TASK_ID, &pl, &n, &err), -ECONNREFUSED);

    /* back (empty: no persistence); the store recovers by itself */
    redis_server_restart(&srv);
    double until = test_now_ms() + 15000;
    do {
        rc = sched_host_store(fx->s, dl(), &h, &err);
        if (rc != 0) {
            usleep(20000);
        }
    } while (rc != 0 && test_now_ms() < until);
    assert_int_equal(rc, 0);
    assert_int_equal(sched_task_store(fx->s, dl(), &t, &err), 0);
    assert_int_equal(sched_peer_store(fx->s, dl(), &p, &t, &err), 0);
    struct sched_peer pb;
    assert_int_equal(sched_peer_load(fx->s, dl(), PEER_ID, &pb, &err), 0);
    sched_peer_done(&pb);
    sched_host_done(&h);
    sched_task_done(&t);
    sched_peer_done(&p);
}

/* Four threads store and delete peers of one task at once: every script is atomic, so the
 * sets end up holding exactly the peers whose hashes exist. */
struct writer {
    struct sched_store *s;
    int no;
    int failures;
};

static void *write_peers(void *arg) {
    struct writer *w = arg;
    struct sched_task t;
    make_task(&t, TASK_ID, now_s(), INT64_C(3600) * 1000000000);
    for (int i = 0; i < 50; i++) {
        char id[32];
        struct dfc_error err = {0};
        struct sched_peer p;
        snprintf(id, sizeof(id), "peer-%d-%02d", w->no, i);
        make_peer(&p, id, TASK_ID, HOST_ID, i % 2 == 0, t.created_at);
        if (sched_peer_store(w->s, sched_redis_deadline(5000), &p, &t, &err) != 0) {
            w->failures++;
        }
        /* every fifth one is deleted again */
        if (i % 5 == 4 && sched_peer_delete(w->s, sched_redis_deadline(5000), id, &err) != 0) {
            w->failures++;
        }
        sched_peer_done(&p);
    }
    sched_task_done(&t);
    return NULL;
}

static void test_concurrent_writers(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fixture *fx = *state;
    struct dfc_error err = {0};
    store_all(fx, true);
    assert_int_equal(sched_peer_delete(fx->s, dl(), PEER_ID, &err), 0);
    pthread_t th[4];
    struct writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){.s = fx->s, .no = i};
        assert_int_equal(pthread_create(&th[i], NULL, write_peers, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    uint64_t all = 0, pers = 0;
    assert_int_equal(sched_task_replica_counts(fx->s, dl(), TASK_ID, &all, &pers, &err), 0);
    assert_int_equal(all, 4 * 40);
    assert_int_equal(pers, 4 * 20); /* even i are persistent; deleted i (4, 9, ...) alternate */
    struct sched_peer *list;
    size_t n;
    assert_int_equal(sched_peer_load_by_task(fx->s, dl(), TASK_ID, &list, &n, &err), 0);
    assert_int_equal(n, 4 * 40);
    sched_peer_list_free(list, n);
    assert_int_equal(integer("SCARD %s", P ":persistent-cache-hosts:" HOST_ID
                                           ":persistent-cache-peers-for-persistent-cache-task"),
                     4 * 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upload_leaves_upstreams_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upload_in_one_script_per_call_leaves_the_same_bytes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_peer_task_answers_as_the_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_task_peer_refusal_and_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ttl_expiry_removes_task_peers_and_sets, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fix_expired_store_removes_only_its_own_membership,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fix_set_expiry_only_extends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fix_peer_delete_when_task_is_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fix_peer_delete_when_host_is_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fix_failed_peer_not_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_with_missing_host_is_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_touch_only_a_peer_that_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_ids_scan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hosts_listing_and_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_hashes_written_by_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_down_is_unavailable, setup, teardown),
    };
    return test_run_group(tests, start_server, stop_server);
}
