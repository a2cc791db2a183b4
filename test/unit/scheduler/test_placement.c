/*
 * Tests for scheduler/placement*.c and dfdaemon_client.c: upstream's parent scoring and
 * filter on plain records, the repair back-off, and, against a real redis-server and fake
 * DfdaemonUpload servers on loopback TCP (test/support/fake_dfdaemon.c), replication, the
 * repair loop, leases and host GC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/units.h"
#include "fake_dfdaemon.h"
#include "dfc/metrics.h"
#include "placement.h"
#include "placement_engine.h"
#include "placement_internal.h"
#include "redis_harness.h"
#include "store.h"
#include "test_support.h"

static bool close_to(double a, double b) {
    double d = a - b;
    return d < 1e-9 && d > -1e-9;
}

/* ---- scoring and filter (pure) ---- */

static struct sched_host host_at(const char *id, const char *idc, const char *location) {
    struct sched_host h = {0};
    h.id = (char *)id;
    h.network.idc = (char *)idc;
    h.network.location = (char *)location;
    return h;
}

static double score(const char *idc_a, const char *loc_a, const char *idc_b, const char *loc_b) {
    struct sched_host a = host_at("a", idc_a, loc_a), b = host_at("b", idc_b, loc_b);
    return sched_parent_score(&a, &b);
}

static void test_score_upstream_rules(void **state) {
    /* IDC: 0.7 when equal ignoring case; empty on either side (or both) is no match. */
    assert_true(close_to(score("idc-1", "", "IDC-1", ""), 0.7));
    assert_true(close_to(score("idc-1", "", "idc-2", ""), 0));
    assert_true(close_to(score("", "", "", ""), 0));
    assert_true(close_to(score("idc-1", "", "", ""), 0));
    /* Location: equal leading elements over 5, times 0.3. */
    assert_true(close_to(score("", "cn|bj|hd|za|c1", "", "cn|bj|hd|zb|c2"), 0.3 * 3 / 5));
    assert_true(close_to(score("", "cn|bj", "", "cn|sh"), 0.3 * 1 / 5));
    assert_true(close_to(score("", "cn|bj", "", "us|bj"), 0));
    /* An equal whole string is 1 whatever its element count (upstream's EqualFold first). */
    assert_true(close_to(score("", "cn|bj", "", "CN|BJ"), 0.3));
    assert_true(close_to(score("", "cn", "", "cn"), 0.3));
    /* At most 5 elements count. */
    assert_true(close_to(score("", "a|b|c|d|e|f", "", "a|b|c|d|e|g"), 0.3));
    /* Shorter side bounds the count; elements compare whole, not as prefixes. */
    assert_true(close_to(score("", "cn|bj|hd", "", "cn|bj"), 0.3 * 2 / 5));
    assert_true(close_to(score("", "cn|b", "", "cn|bj"), 0.3 * 1 / 5));
    assert_true(close_to(score("", "cn", "", ""), 0));
    assert_true(close_to(score("", "", "", "cn"), 0));
    /* Both. */
    assert_true(close_to(score("X", "cn|bj|hd", "x", "cn|bj|hd"), 1.0));
    assert_true(close_to(score("X", "cn|bj|hd", "x", "CN|bj|sh"), 0.7 + 0.3 * 2 / 5));
}

static struct sched_peer peer_in(const char *id, const char *host_id, enum sched_peer_state st) {
    struct sched_peer p = {0};
    p.id = (char *)id;
    p.host_id = (char *)host_id;
    p.task_id = (char *)"t";
    p.state = st;
    return p;
}

static void test_rank_filter_and_order(void **state) {
    struct sched_peer peers[] = {
        peer_in("p-pending", "h1", SCHED_PEER_PENDING),
        peer_in("p-uploading", "h1", SCHED_PEER_UPLOADING),
        peer_in("p-empty", "h1", SCHED_PEER_RECEIVED_EMPTY),
        peer_in("p-normal", "h1", SCHED_PEER_RECEIVED_NORMAL),
        peer_in("p-failed", "h1", SCHED_PEER_FAILED),
        peer_in("p-run-far", "h2", SCHED_PEER_RUNNING),      /* 5: score 0 */
        peer_in("p-ok-idc", "h3", SCHED_PEER_SUCCEEDED),     /* 6: idc */
        peer_in("p-ok-blocked", "h3", SCHED_PEER_SUCCEEDED), /* 7: blocked */
        peer_in("p-ok-self", "me", SCHED_PEER_SUCCEEDED),    /* 8: on the asking host */
        peer_in("p-run-loc", "h4", SCHED_PEER_RUNNING),      /* 9: location 2/5 */
        peer_in("p-run-far2", "h5", SCHED_PEER_RUNNING),     /* 10: score 0, after 5 */
        peer_in("p-ok-far", "h6", SCHED_PEER_SUCCEEDED),     /* 11: score 0, complete */
    };
    struct sched_host hosts[] = {
        host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"),
        host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"), host_at("h2", "other", "us"),
        host_at("h3", "IDC", ""),      host_at("h3", "IDC", ""),      host_at("me", "idc", "cn|bj"),
        host_at("h4", "", "cn|bj|x"),  host_at("h5", "", ""),         host_at("h6", "", ""),
    };
    size_t n = sizeof(peers) / sizeof(peers[0]);
    struct sched_host asking = host_at("me", "idc", "cn|bj|y");
    const char *block[] = {"p-ok-blocked"};
    size_t idx[16];
    double sc[16];

    size_t k = sched_parents_rank(peers, hosts, n, &asking, block, 1, 10, idx, sc);
    assert_int_equal(k, 5);
    assert_string_equal(peers[idx[0]].id, "p-ok-idc");
    assert_true(close_to(sc[0], 0.7));
    assert_string_equal(peers[idx[1]].id, "p-run-loc");
    assert_true(close_to(sc[1], 0.3 * 2 / 5));
    /* Equal scores: the complete copy first, then the others in a random order. */
    assert_string_equal(peers[idx[2]].id, "p-ok-far");
    assert_true((strcmp(peers[idx[3]].id, "p-run-far") == 0 &&
                 strcmp(peers[idx[4]].id, "p-run-far2") == 0) ||
                (strcmp(peers[idx[3]].id, "p-run-far2") == 0 &&
                 strcmp(peers[idx[4]].id, "p-run-far") == 0));

    /* The limit truncates after sorting. */
    k = sched_parents_rank(peers, hosts, n, &asking, block, 1, 1, idx, NULL);
    assert_int_equal(k, 1);
    assert_string_equal(peers[idx[0]].id, "p-ok-idc");

    /* Without a block list the blocked peer is back. */
    k = sched_parents_rank(peers, hosts, n, &asking, NULL, 0, 10, idx, NULL);
    assert_int_equal(k, 6);
}

/* Equal candidates come in a random order: over 64 draws each of two comes first at least
 * once (the chance that one never does is 2^-63). */
static void test_rank_shuffles_equals(void **state) {
    struct sched_peer peers[] = {
        peer_in("p-a", "h1", SCHED_PEER_RUNNING),
        peer_in("p-b", "h2", SCHED_PEER_RUNNING),
    };
    struct sched_host hosts[] = {host_at("h1", "", ""), host_at("h2", "", "")};
    struct sched_host asking = host_at("me", "", "");
    size_t idx[2];
    int first_a = 0;
    for (int i = 0; i < 64; i++) {
        assert_int_equal(sched_parents_rank(peers, hosts, 2, &asking, NULL, 0, 2, idx, NULL), 2);
        first_a += idx[0] == 0;
    }
    assert_true(first_a > 0 && first_a < 64);
}

static void test_backoff_grows_and_caps(void **state) {
    struct sched_backoff b = {0};
    assert_true(sched_backoff_ready(&b, 1));
    sched_backoff_failed(&b, 1); /* 1st failure: skip one pass */
    assert_false(sched_backoff_ready(&b, 2));
    assert_true(sched_backoff_ready(&b, 3));
    sched_backoff_failed(&b, 3); /* 2nd: four passes */
    assert_false(sched_backoff_ready(&b, 6));
    assert_true(sched_backoff_ready(&b, 7));
    for (int i = 0; i < 20; i++) {
        sched_backoff_failed(&b, 100);
    }
    assert_false(sched_backoff_ready(&b, 100 + SCHED_BACKOFF_MAX_PASSES - 1));
    assert_true(sched_backoff_ready(&b, 100 + SCHED_BACKOFF_MAX_PASSES));
    sched_backoff_reset(&b);
    assert_true(sched_backoff_ready(&b, 0));
}

/* ---- against a real redis-server and fake dfdaemons ---- */

#define T1           "1111111111111111111111111111111111111111111111111111111111111111"
#define T2           "2222222222222222222222222222222222222222222222222222222222222222"
#define ADVERTISE_IP "127.0.0.9"
#define MAX_FAKES    8

static struct redis_server srv;

static int start_redis(void **state) {
    if (redis_harness_available()) {
        redis_server_start(&srv, NULL);
    }
    return 0;
}

static int stop_redis(void **state) {
    redis_server_destroy(&srv);
    return 0;
}

/* Two Redis clients and stores, as two scheduler instances would have, and the fakes. */
static struct env {
    struct sched_redis *redis[2];
    struct sched_store *store[2];
    struct fake_dfdaemon *fake[MAX_FAKES];
    char fake_host[MAX_FAKES][64];
    size_t n_fakes;
    struct sched_placement *engines[4]; /* freed by the teardown when a test failed early */
} E;

static int env_setup(void **state) {
    memset(&E, 0, sizeof(E));
    if (!redis_harness_available()) {
        return 0;
    }
    freeReplyObject(redis_server_command(&srv, "FLUSHALL"));
    for (int i = 0; i < 2; i++) {
        const char *addrs[] = {srv.addr};
        struct sched_redis_opts o = {.addrs = addrs, .n_addrs = 1, .pool_size = 4};
        struct dfc_error err = {0};
        if (sched_redis_new(&o, &E.redis[i], &err) < 0 ||
            sched_store_new(E.redis[i], 1, &E.store[i], &err) < 0) {
            fprintf(stderr, "env: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int env_teardown(void **state) {
    for (size_t i = 0; i < 4; i++) {
        sched_placement_free(E.engines[i]); /* before the stores it borrows */
    }
    for (size_t i = 0; i < E.n_fakes; i++) {
        fake_dfdaemon_stop(E.fake[i]);
    }
    for (int i = 0; i < 2; i++) {
        sched_store_free(E.store[i]);
        sched_redis_free(E.redis[i]);
    }
    return 0;
}

static int64_t dl(void) {
    return sched_redis_deadline(5000);
}

static int64_t now_s(void) {
    return (int64_t)time(NULL);
}

struct host_spec {
    uint64_t disk_free;
    bool disable_shared;
    const char *idc, *location;
    int64_t updated_at;        /* 0: now */
    int64_t announce_interval; /* ns; 0: never GC'd */
    int port;                  /* 0: 1 (nothing listens) */
};

static void put_host(const char *id, const struct host_spec *spec) {
    struct sched_host h = {0};
    h.id = (char *)id;
    h.name = h.hostname = (char *)id;
    h.ip = (char *)"127.0.0.1";
    h.port = h.download_port = spec->port ? spec->port : 1;
    h.disable_shared = spec->disable_shared;
    h.disk.total = h.disk.free = spec->disk_free;
    h.network.idc = (char *)spec->idc;
    h.network.location = (char *)spec->location;
    h.scheduler_cluster_id = 1;
    h.announce_interval_ns = spec->announce_interval;
    h.created_at = now_s() - 1000;
    h.updated_at = spec->updated_at ? spec->updated_at : now_s();
    struct dfc_error err = {0};
    if (sched_host_store(E.store[0], dl(), &h, &err) < 0) {
        fail_msg("host store %s: %s", id, err.msg);
    }
}

/* A host whose dfdaemon is a fake; returns the fake. */
static struct fake_dfdaemon *add_host(const char *id, const struct host_spec *spec) {
    assert_true(E.n_fakes < MAX_FAKES);
    struct fake_dfdaemon *f = NULL;
    assert_int_equal(fake_dfdaemon_start(E.store[0], id, &f), 0);
    E.fake[E.n_fakes] = f;
    snprintf(E.fake_host[E.n_fakes], sizeof(E.fake_host[0]), "%s", id);
    E.n_fakes++;
    struct host_spec s = *spec;
    s.port = fake_dfdaemon_port(f);
    put_host(id, &s);
    return f;
}

static const struct host_spec roomy = {.disk_free = 1 << 30};

static void put_task(const char *id, uint64_t replicas, uint64_t content_length) {
    struct sched_task t = {
        .id = (char *)id,
        .persistent_replica_count = replicas,
        .tag = (char *)"tag-1",
        .application = (char *)"app-1",
        .piece_length = 4 << 20,
        .content_length = content_length,
        .total_piece_count = (uint32_t)((content_length + (4 << 20) - 1) / (4 << 20)),
        .state = SCHED_TASK_SUCCEEDED,
        .ttl_ns = 3600 * DFC_NS_PER_SEC,
        .created_at = now_s(),
        .updated_at = now_s(),
    };
    struct dfc_error err = {0};
    if (sched_task_store(E.store[0], dl(), &t, &err) < 0) {
        fail_msg("task store: %s", err.msg);
    }
}

static void put_peer(const char *id, const char *task_id, const char *host_id, bool persistent,
                     enum sched_peer_state st) {
    struct sched_task t = {0};
    struct dfc_error err = {0};
    if (sched_task_load(E.store[0], dl(), task_id, &t, &err) < 0) {
        fail_msg("task load: %s", err.msg);
    }
    struct sched_peer p = {
        .id = (char *)id,
        .persistent = persistent,
        .state = st,
        .task_id = (char *)task_id,
        .host_id = (char *)host_id,
        .created_at = now_s(),
        .updated_at = now_s(),
        .concurrent_piece_count = 8,
    };
    assert_int_equal(sched_bitset_init(&p.finished_pieces, t.total_piece_count), 0);
    if (st == SCHED_PEER_SUCCEEDED) {
        sched_bitset_set_all(&p.finished_pieces);
    }
    if (sched_peer_store(E.store[0], dl(), &p, &t, &err) < 0) {
        fail_msg("peer store: %s", err.msg);
    }
    sched_bitset_done(&p.finished_pieces);
    sched_task_done(&t);
}

static uint64_t persistent_count(const char *task_id) {
    uint64_t all = 0, persistent = 0;
    struct dfc_error err = {0};
    assert_int_equal(sched_task_replica_counts(E.store[0], dl(), task_id, &all, &persistent, &err),
                     0);
    return persistent;
}

static void keep_engine(struct sched_placement *p) {
    for (size_t i = 0; i < 4; i++) {
        if (E.engines[i] == NULL) {
            E.engines[i] = p;
            return;
        }
    }
    fail_msg("too many engines in one test");
}

/* Frees p now (a test's own end); the teardown no longer does. */
static void engine_free(struct sched_placement *p) {
    for (size_t i = 0; i < 4; i++) {
        if (E.engines[i] == p) {
            E.engines[i] = NULL;
        }
    }
    sched_placement_free(p);
}

static struct sched_placement *engine(int store, unsigned concurrency, int64_t timeout_ms) {
    struct sched_placement_opts o = {.advertise_ip = ADVERTISE_IP,
                                     .repair_concurrency = concurrency,
                                     .dfdaemon_timeout_ms = timeout_ms};
    struct sched_placement *p = NULL;
    struct dfc_error err = {0};
    if (sched_placement_new(E.store[store], &o, &p, &err) < 0) {
        fail_msg("placement: %s", err.msg);
    }
    keep_engine(p);
    return p;
}

static int repair(struct sched_placement *p) {
    struct dfc_error err = {0};
    int r = sched_placement_repair_once(p, &err);
    if (r < 0) {
        fail_msg("repair: %s", err.msg);
    }
    return r;
}

static size_t downloads(struct fake_dfdaemon *f) {
    return fake_dfdaemon_count(f, "DownloadPersistentCacheTask");
}

static size_t updates(struct fake_dfdaemon *f) {
    return fake_dfdaemon_count(f, "UpdatePersistentCacheTask");
}

static size_t all_downloads(void) {
    size_t n = 0;
    for (size_t i = 0; i < E.n_fakes; i++) {
        n += downloads(E.fake[i]);
    }
    return n;
}

static bool has_download(void *arg) {
    return downloads(arg) > 0;
}

struct count_wait {
    const char *task_id;
    uint64_t want;
};

static bool count_reached(void *arg) {
    struct count_wait *w = arg;
    return persistent_count(w->task_id) >= w->want;
}

/* Waits (generously) until task_id has want persistent copies. */
static void wait_count(const char *task_id, uint64_t want) {
    struct count_wait w = {task_id, want};
    if (!test_wait_for(count_reached, &w, 30000)) {
        fail_msg("task %.8s: %llu persistent copies, want %llu", task_id,
                 (unsigned long long)persistent_count(task_id), (unsigned long long)want);
    }
}

static void test_find_parents_from_store(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("me", &(struct host_spec){.idc = "dc1", .location = "cn|bj"});
    put_host("h1", &(struct host_spec){.idc = "DC1", .location = "cn|bj"});
    put_host("h2", &(struct host_spec){.idc = "dc2", .location = "cn|bj|x"});
    put_host("h3", &(struct host_spec){.idc = "dc1"});
    put_task(T1, 1, 10);
    put_peer("p1", T1, "h1", true, SCHED_PEER_SUCCEEDED);
    put_peer("p2", T1, "h2", false, SCHED_PEER_RUNNING);
    put_peer("p3", T1, "h3", false, SCHED_PEER_FAILED);
    put_peer("p4", T1, "me", false, SCHED_PEER_SUCCEEDED);
    put_peer("p5", T1, "h3", false, SCHED_PEER_SUCCEEDED);
    put_peer("p6", T1, "gone", false, SCHED_PEER_SUCCEEDED); /* its host never announced */

    struct sched_host me = {0};
    struct dfc_error err = {0};
    assert_int_equal(sched_host_load(E.store[0], dl(), "me", &me, &err), 0);
    const char *block[] = {"p5"};
    struct sched_candidate *c = NULL;
    size_t n = 0;
    assert_int_equal(sched_find_parents(E.store[0], dl(), T1, &me, block, 1, 3, &c, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].peer.id, "p1");
    assert_string_equal(c[0].host.id, "h1");
    assert_string_equal(c[0].host.ip, "127.0.0.1");
    assert_true(close_to(c[0].score, 1.0));
    assert_string_equal(c[1].peer.id, "p2");
    assert_true(close_to(c[1].score, 0.3 * 2 / 5));
    sched_candidates_free(c, n);

    assert_int_equal(sched_find_parents(E.store[0], dl(), T1, &me, block, 1, 1, &c, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].peer.id, "p1");
    sched_candidates_free(c, n);

    /* Without the block list p5 (h3: IDC only) ranks between p1 and p2. */
    assert_int_equal(sched_find_parents(E.store[0], dl(), T1, &me, NULL, 0, 3, &c, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(c[1].peer.id, "p5");
    sched_candidates_free(c, n);

    /* No task: an empty answer, not an error. */
    assert_int_equal(sched_find_parents(E.store[0], dl(), T2, &me, NULL, 0, 3, &c, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_null(c);
    sched_host_done(&me);
}

static void test_dfdaemon_calls_carry_fields(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *a = add_host("a", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 2, 0);

    /* A pull: DownloadPersistentCacheTask persistent=true with the task's tag, application
     * and the advertise IP as remote_ip; the copy it makes counts. */
    assert_int_equal(repair(p), 1);
    assert_int_equal(persistent_count(T1), 2);
    assert_int_equal(downloads(a), 1);
    struct fake_dfdaemon_call c;
    assert_true(fake_dfdaemon_call(a, 0, &c));
    assert_string_equal(c.task_id, T1);
    assert_true(c.persistent);
    assert_string_equal(c.tag, "tag-1");
    assert_string_equal(c.application, "app-1");
    assert_true(c.has_remote_ip);
    assert_string_equal(c.remote_ip, ADVERTISE_IP);

    /* A delete: DeletePersistentCacheTask {task_id, remote_ip}. */
    struct sched_host h = {0};
    struct dfc_error err = {0};
    assert_int_equal(sched_host_load(E.store[0], dl(), "a", &h, &err), 0);
    assert_int_equal(sched_placement_delete_copy(p, &h, T1, &err), 0);
    assert_int_equal(fake_dfdaemon_count(a, "DeletePersistentCacheTask"), 1);
    assert_true(fake_dfdaemon_call(a, 1, &c));
    assert_string_equal(c.method, "DeletePersistentCacheTask");
    assert_string_equal(c.task_id, T1);
    assert_string_equal(c.remote_ip, ADVERTISE_IP);
    sched_host_done(&h);
    engine_free(p);
}

static void test_dfdaemon_unreachable_and_hung(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *hang = add_host("hang", &roomy);
    fake_dfdaemon_set_mode(hang, FAKE_DFDAEMON_HANG);
    put_host("up", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 2, 300), *patient = engine(0, 1, 30000);
    struct dfc_error err = {0};

    /* Nothing listens on port 1: UNAVAILABLE, the message names the address. (A generous
     * deadline: a loaded machine must not turn the refusal into DEADLINE_EXCEEDED.) */
    struct sched_host h = {0};
    assert_int_equal(sched_host_load(E.store[0], dl(), "up", &h, &err), 0);
    int r = sched_placement_delete_copy(patient, &h, T1, &err);
    engine_free(patient);
    assert_true(r < 0);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "127.0.0.1:1"));
    sched_host_done(&h);

    /* A host without an IP is refused before any call. */
    struct sched_host noip = {.id = (char *)"x", .ip = (char *)"", .download_port = 4000};
    assert_int_equal(sched_placement_delete_copy(p, &noip, T1, &err), -EINVAL);

    /* A hung dfdaemon: the call ends at its deadline, and the job falls short. */
    assert_int_equal(sched_host_load(E.store[0], dl(), "hang", &h, &err), 0);
    assert_int_equal(sched_placement_delete_copy(p, &h, T1, &err), -ETIMEDOUT);
    sched_host_done(&h);
    assert_int_equal(repair(p), 1);
    assert_int_equal(downloads(hang), 1);
    assert_int_equal(persistent_count(T1), 1);
    engine_free(p);
}

static void test_replicate_promotes_cached_first(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *up = add_host("up", &roomy);
    struct fake_dfdaemon *b = add_host("b", &roomy);
    struct fake_dfdaemon *c = add_host("c", &roomy);
    put_task(T1, 3, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-b", T1, "b", false, SCHED_PEER_SUCCEEDED); /* a cached copy */
    struct sched_placement *p = engine(0, 2, 0);

    const char *block[] = {"up"};
    sched_placement_replicate(p, T1, block, 1);
    wait_count(T1, 3);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);

    /* need 2: the cached copy on b was promoted, one copy pulled; nothing asked of up. */
    assert_int_equal(updates(b), 1);
    struct fake_dfdaemon_call call;
    assert_true(fake_dfdaemon_call(b, 0, &call));
    assert_true(call.persistent);
    assert_string_equal(call.task_id, T1);
    assert_string_equal(call.remote_ip, ADVERTISE_IP);
    assert_int_equal(downloads(b), 0);
    assert_int_equal(downloads(c), 1);
    assert_int_equal(fake_dfdaemon_count(up, NULL), 0);
    struct sched_peer pb = {0};
    struct dfc_error err = {0};
    assert_int_equal(sched_peer_load(E.store[0], dl(), "p-b", &pb, &err), 0);
    assert_true(pb.persistent);
    sched_peer_done(&pb);
    assert_int_equal(persistent_count(T1), 3);
}

static void test_pulls_go_only_to_eligible_hosts(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *up = add_host("up", &roomy);
    struct fake_dfdaemon *unshared =
        add_host("unshared", &(struct host_spec){.disk_free = 1 << 30, .disable_shared = true});
    struct fake_dfdaemon *full = add_host("full", &(struct host_spec){.disk_free = 999});
    struct fake_dfdaemon *holder = add_host("holder", &roomy);
    struct fake_dfdaemon *blocked = add_host("blocked", &roomy);
    struct fake_dfdaemon *ok = add_host("ok", &(struct host_spec){.disk_free = 1000});
    put_task(T1, 3, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-holder", T1, "holder", false, SCHED_PEER_RUNNING); /* holds a peer already */
    struct sched_placement *p = engine(0, 2, 0);

    const char *block[] = {"up", "blocked"};
    sched_placement_replicate(p, T1, block, 2);
    wait_count(T1, 2);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);

    /* need 2, but only "ok" (disk.free == content_length) may take a copy. */
    assert_int_equal(downloads(ok), 1);
    assert_int_equal(fake_dfdaemon_count(up, NULL), 0);
    assert_int_equal(fake_dfdaemon_count(unshared, NULL), 0);
    assert_int_equal(fake_dfdaemon_count(full, NULL), 0);
    assert_int_equal(fake_dfdaemon_count(holder, NULL), 0);
    assert_int_equal(fake_dfdaemon_count(blocked, NULL), 0);
    assert_int_equal(persistent_count(T1), 2);
}

/* Upstream counted a pull that failed (a persistent peer stored Failed) as a replica, so the
 * task looked fully replicated and was never repaired; the failed host was blocklisted too.
 * Now the copy is missing from the counts and the host may be asked again. */
static void test_fix_failed_pull_is_repaired(void **state) {
    REDIS_HARNESS_REQUIRE();
    add_host("up", &roomy);
    struct fake_dfdaemon *h = add_host("h", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-h", T1, "h", true, SCHED_PEER_FAILED); /* its pull failed */
    assert_int_equal(persistent_count(T1), 1);
    struct sched_placement *p = engine(0, 2, 0);

    const char *block[] = {"up"};
    sched_placement_replicate(p, T1, block, 1);
    wait_count(T1, 2);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);
    assert_int_equal(downloads(h), 1);
}

/* Upstream filtered cached copies by comparing their *peer* id with a blocklist of *host*
 * ids, so a copy on a blocklisted host was promoted anyway. */
static void test_fix_blocklist_compares_host_ids(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *b = add_host("b", &roomy);
    struct fake_dfdaemon *c = add_host("c", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-b", T1, "b", false, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 2, 0);

    const char *block[] = {"b"}; /* e.g. DeletePersistentCachePeer from host b */
    sched_placement_replicate(p, T1, block, 1);
    wait_count(T1, 2);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);

    assert_int_equal(updates(b), 0);
    assert_int_equal(downloads(c), 1);
}

static void delete_host(const char *host_id) {
    struct sched_ids ids = {0};
    struct dfc_error err = {0};
    assert_int_equal(sched_peer_ids_by_host(E.store[0], dl(), host_id, &ids, &err), 0);
    for (size_t i = 0; i < ids.n; i++) {
        assert_int_equal(sched_peer_delete(E.store[0], dl(), ids.ids[i], &err), 0);
    }
    sched_ids_free(&ids);
    assert_int_equal(sched_host_delete(E.store[0], dl(), host_id, &err), 0);
}

static void test_repair_restores_count_after_host_delete(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *b = add_host("b", &roomy);
    struct fake_dfdaemon *c = add_host("c", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-b", T1, "b", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 2, 0);

    assert_int_equal(repair(p), 0); /* the count is met */
    delete_host("b");
    assert_int_equal(persistent_count(T1), 1);
    assert_int_equal(repair(p), 1);
    assert_int_equal(persistent_count(T1), 2);
    assert_int_equal(downloads(c), 1);
    assert_int_equal(fake_dfdaemon_count(b, NULL), 0);
    assert_int_equal(repair(p), 0);
    assert_int_equal(downloads(c), 1);
    engine_free(p);
}

struct racer {
    struct sched_placement *p;
    pthread_barrier_t *start;
    int started;
};

static void *race_repair(void *arg) {
    struct racer *r = arg;
    pthread_barrier_wait(r->start);
    struct dfc_error err = {0};
    r->started = sched_placement_repair_once(r->p, &err);
    return NULL;
}

static void test_two_engines_never_double_place(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "h%d", i);
        fake_dfdaemon_set_delay_ms(add_host(id, &roomy), 100); /* calls overlap */
    }
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    /* Two schedulers: separate Redis clients and stores, one Redis. */
    struct sched_placement *p0 = engine(0, 2, 0), *p1 = engine(1, 2, 0);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    int both_started = 0;
    for (int round = 0; round < 8; round++) {
        struct racer r0 = {p0, &start, 0}, r1 = {p1, &start, 0};
        pthread_t t0, t1;
        pthread_create(&t0, NULL, race_repair, &r0);
        pthread_create(&t1, NULL, race_repair, &r1);
        pthread_join(t0, NULL);
        pthread_join(t1, NULL);
        assert_true(r0.started >= 0 && r1.started >= 0);
        both_started += r0.started == 1 && r1.started == 1;
        assert_int_equal(all_downloads(), 1);
        assert_int_equal(persistent_count(T1), 2);
        /* Undo the copy for the next round. */
        struct sched_ids ids = {0};
        struct dfc_error err = {0};
        assert_int_equal(sched_peer_ids_by_task(E.store[0], dl(), T1, true, &ids, &err), 0);
        for (size_t i = 0; i < ids.n; i++) {
            if (strcmp(ids.ids[i], "p-up") != 0) {
                assert_int_equal(sched_peer_delete(E.store[0], dl(), ids.ids[i], &err), 0);
            }
        }
        sched_ids_free(&ids);
        for (size_t i = 0; i < E.n_fakes; i++) {
            fake_dfdaemon_clear(E.fake[i]);
        }
    }
    /* Both engines went for the task at once in at least one round, or the test proved
     * nothing. */
    assert_true(both_started > 0);
    pthread_barrier_destroy(&start);
    engine_free(p0);
    engine_free(p1);
}

static void test_backoff_stops_unplaceable_task(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *b = add_host("b", &(struct host_spec){.disk_free = 10000});
    fake_dfdaemon_set_mode(b, FAKE_DFDAEMON_FAIL);
    put_task(T1, 2, 1000);     /* b may take it, but its dfdaemon fails */
    put_task(T2, 2, 1u << 20); /* no host has room: nothing to call at all */
    put_peer("p-up1", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-up2", T2, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 2, 0);

    /* Retried on passes 1, 3, 7, 15 (back-off 2, 4, 8 passes), skipped in between. */
    int expect[] = {0, 2, 0, 2, 0, 0, 0, 2};
    for (int pass = 1; pass <= 7; pass++) {
        assert_int_equal(repair(p), expect[pass]);
    }
    assert_int_equal(downloads(b), 3);
    fake_dfdaemon_set_mode(b, FAKE_DFDAEMON_OK);
    for (int pass = 8; pass <= 14; pass++) {
        assert_int_equal(repair(p), 0);
    }
    assert_int_equal(downloads(b), 3);
    assert_int_equal(repair(p), 2); /* pass 15 */
    assert_int_equal(persistent_count(T1), 2);
    assert_int_equal(persistent_count(T2), 1);
    assert_int_equal(repair(p), 0); /* T1 is done, T2 backs off 16 passes now */
    assert_int_equal(downloads(b), 4);
    engine_free(p);
}

static void test_host_gc_removes_host_peers_and_repairs(void **state) {
    REDIS_HARNESS_REQUIRE();
    const int64_t s = DFC_NS_PER_SEC;
    put_host("up", &(struct host_spec){.disk_free = 1 << 30, .announce_interval = 30 * s});
    struct fake_dfdaemon *stale =
        add_host("stale", &(struct host_spec){.disk_free = 1 << 30,
                                              .announce_interval = 10 * s,
                                              .updated_at = now_s() - 100});
    put_host("quiet", &(struct host_spec){.disk_free = 0, .updated_at = now_s() - 100000});
    put_host("recent", &(struct host_spec){.disk_free = 0,
                                           .announce_interval = 60 * s,
                                           .updated_at = now_s() - 100});
    struct fake_dfdaemon *c = add_host("c", &roomy);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-stale", T1, "stale", true, SCHED_PEER_SUCCEEDED);
    assert_int_equal(persistent_count(T1), 2);
    struct sched_placement *p = engine(0, 2, 0);

    struct dfc_error err = {0};
    assert_int_equal(sched_placement_host_gc_once(p, &err), 1);
    struct sched_host h = {0};
    assert_int_equal(sched_host_load(E.store[0], dl(), "stale", &h, &err), -ENOENT);
    /* Its peer hash is gone too, not left to linger until the TTL. */
    redisReply *r = redis_server_command(
        &srv,
        "EXISTS "
        "scheduler:scheduler-clusters:1:persistent-cache-peers-for-persistent-cache-task:p-stale");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = redis_server_command(
        &srv, "SISMEMBER scheduler:scheduler-clusters:1:persistent-cache-hosts stale");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    /* A host with no interval and one within 2 x its interval stay. */
    assert_int_equal(sched_host_load(E.store[0], dl(), "quiet", &h, &err), 0);
    sched_host_done(&h);
    assert_int_equal(sched_host_load(E.store[0], dl(), "recent", &h, &err), 0);
    sched_host_done(&h);

    /* The task was queued for repair: c gets the lost copy. */
    wait_count(T1, 2);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);
    assert_int_equal(downloads(c), 1);
    assert_int_equal(fake_dfdaemon_count(stale, NULL), 0);
}

/* The engine's metrics: repairs started and how they ended, the under-replicated and by-state
 * task gauges of a repair pass, the hosts a host-GC pass kept. */
static void test_pass_metrics(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct dfc_metrics *reg;
    assert_int_equal(dfc_metrics_new(&reg), 0);
    static const char *const outcomes[] = SCHED_REPAIR_OUTCOMES;
    static const char *const states[] = SCHED_TASK_STATES;
    const struct dfc_metric_label lo[] = {{"outcome", outcomes, 4}};
    const struct dfc_metric_label ls[] = {{"state", states, 4}};
    struct dfc_metric *repairs, *under, *tasks, *hosts;
    struct dfc_error err = {0};
    struct dfc_metric_desc d[] = {
        {.name = "repairs_total",
         .help = "h",
         .type = DFC_METRIC_COUNTER,
         .labels = lo,
         .n_labels = 1},
        {.name = "under", .help = "h", .type = DFC_METRIC_GAUGE},
        {.name = "tasks", .help = "h", .type = DFC_METRIC_GAUGE, .labels = ls, .n_labels = 1},
        {.name = "hosts", .help = "h", .type = DFC_METRIC_GAUGE},
    };
    struct dfc_metric **out[] = {&repairs, &under, &tasks, &hosts};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(dfc_metrics_add(reg, &d[i], out[i], &err), 0);
    }
    put_host("up", &roomy);
    struct fake_dfdaemon *b = add_host("b", &roomy);
    put_host("quiet", &(struct host_spec){.disk_free = 0, .updated_at = now_s() - 100000});
    put_task(T1, 2, 1000); /* Succeeded, one copy of two */
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_task(T2, 1, 1000); /* Succeeded, enough */
    put_peer("p2-up", T2, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement_opts o = {.advertise_ip = ADVERTISE_IP,
                                     .repair_concurrency = 2,
                                     .repairs = repairs,
                                     .under_replicated = under,
                                     .tasks = tasks,
                                     .hosts = hosts};
    struct sched_placement *p = NULL;
    if (sched_placement_new(E.store[0], &o, &p, &err) < 0) {
        fail_msg("placement: %s", err.msg);
    }
    keep_engine(p);
    assert_int_equal(repair(p), 1);
    sched_placement_wait_idle(p);
    assert_int_equal(downloads(b), 1);
    assert_int_equal(dfc_metric_value(repairs, 0), 1); /* started */
    assert_int_equal(dfc_metric_value(repairs, 1), 1); /* succeeded */
    assert_int_equal(dfc_metric_value(repairs, 2), 0); /* failed */
    assert_int_equal(dfc_metric_value(under, 0), 1);
    assert_int_equal(dfc_metric_value(tasks, SCHED_TASK_SUCCEEDED), 2);
    assert_int_equal(dfc_metric_value(tasks, SCHED_TASK_PENDING), 0);
    assert_int_equal(repair(p), 0); /* the count is met now */
    assert_int_equal(dfc_metric_value(under, 0), 0);
    assert_int_equal(dfc_metric_value(repairs, 0), 1);
    assert_int_equal(sched_placement_host_gc_once(p, &err), 0);
    assert_int_equal(dfc_metric_value(hosts, 0), 3); /* up, b and quiet: none is stale */
    engine_free(p);
    dfc_metrics_free(reg);
}

static bool loops_done(void *c) {
    struct sched_host h = {0};
    struct dfc_error err = {0};
    int r = sched_host_load(E.store[0], dl(), "stale", &h, &err);
    sched_host_done(&h);
    return r == -ENOENT && downloads(c) > 0 && persistent_count(T1) == 2;
}

/* The loops on their own (sched_placement_start): short intervals, a generous wait. */
static void test_loops_run_by_themselves(void **state) {
    REDIS_HARNESS_REQUIRE();
    const int64_t ms = 1000000;
    put_host("up", &roomy);
    struct fake_dfdaemon *c = add_host("c", &roomy);
    put_host("stale", &(struct host_spec){.disk_free = 1 << 30,
                                          .announce_interval = 1000 * ms,
                                          .updated_at = now_s() - 100});
    put_task(T1, 3, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    put_peer("p-stale", T1, "stale", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement_opts o = {.advertise_ip = ADVERTISE_IP,
                                     .repair_interval_ns = 50 * ms,
                                     .host_gc_interval_ns = 50 * ms};
    struct sched_placement *p = NULL;
    struct dfc_error err = {0};
    assert_int_equal(sched_placement_new(E.store[0], &o, &p, &err), 0);
    keep_engine(p);
    assert_int_equal(sched_placement_start(p, &err), 0);
    /* GC drops "stale" and its copy; repair (before or after) brings "c" in. 3 wanted, but
     * "up" and "c" are the only hosts left, so the end state is 2 copies and no "stale". */
    assert_true(test_wait_for(loops_done, c, 30000));
    engine_free(p);
    assert_int_equal(downloads(c), 1);
    assert_int_equal(persistent_count(T1), 2);
}

/* Jobs queued for one task while the only worker is busy merge into one job whose block list
 * is the union; sched_placement_replicate never waits for the worker. */
static void test_queued_jobs_merge_block_lists(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *slow = add_host("slow", &(struct host_spec){.disk_free = 2000});
    fake_dfdaemon_set_delay_ms(slow, 1000);
    put_task(T2, 2, 1000);
    put_peer("p-up2", T2, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 1, 0);
    const char *block_up[] = {"up"};
    sched_placement_replicate(p, T2, block_up, 1);
    assert_true(test_wait_for(has_download, slow, 30000)); /* the one worker is in that call */

    struct fake_dfdaemon *b = add_host("b", &roomy);
    struct fake_dfdaemon *c = add_host("c", &roomy);
    struct fake_dfdaemon *d = add_host("d", &roomy);
    put_task(T1, 3, 5000); /* need 2; too big for "slow" */
    put_peer("p-up1", T1, "up", true, SCHED_PEER_SUCCEEDED);
    /* Two jobs would pull onto c and d; the merged one may use d only. */
    const char *block_b[] = {"up", "b"}, *block_c[] = {"c"};
    sched_placement_replicate(p, T1, block_b, 2);
    sched_placement_replicate(p, T1, block_c, 1);
    wait_count(T1, 2);
    wait_count(T2, 2);
    sched_placement_wait_idle(p); /* every job ended: no call is cut short */
    engine_free(p);
    assert_int_equal(downloads(b), 0);
    assert_int_equal(downloads(c), 0);
    assert_int_equal(downloads(d), 1);
    assert_int_equal(downloads(slow), 1);
    assert_int_equal(persistent_count(T1), 2);
}

static void test_concurrency_is_bounded(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_placement_opts o = {.repair_concurrency = 257};
    struct sched_placement *p = NULL;
    struct dfc_error err = {0};
    assert_int_equal(sched_placement_new(E.store[0], &o, &p, &err), -EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "scheduler.replicaRepairConcurrency"));
}

/* A pull may last long (its deadline grows with the task), so stopping the engine cancels it
 * rather than waiting for its deadline: an hour here, so without the cancellation the test
 * binary runs into ctest's timeout. */
static void test_free_cuts_a_hung_pull_short(void **state) {
    REDIS_HARNESS_REQUIRE();
    put_host("up", &roomy);
    struct fake_dfdaemon *hang = add_host("hang", &roomy);
    fake_dfdaemon_set_mode(hang, FAKE_DFDAEMON_HANG);
    put_task(T1, 2, 1000);
    put_peer("p-up", T1, "up", true, SCHED_PEER_SUCCEEDED);
    struct sched_placement *p = engine(0, 1, 3600 * 1000);
    const char *block[] = {"up"};
    sched_placement_replicate(p, T1, block, 1); /* returns at once: the job runs on a worker */
    assert_true(test_wait_for(has_download, hang, 30000));
    engine_free(p); /* returns once the pull is cancelled */
    assert_int_equal(persistent_count(T1), 1);
}

static void test_pull_deadline_grows_with_size(void **state) {
    struct sched_placement p = {.timeout_ms = 120000};
    struct sched_task t = {.content_length = 0};
    assert_int_equal(sched_pull_timeout_ms(&p, &t), 120000);
    t.content_length = 10 << 20;
    assert_int_equal(sched_pull_timeout_ms(&p, &t), 121000);
    t.content_length = (10 << 20) + 1;
    assert_int_equal(sched_pull_timeout_ms(&p, &t), 122000);
    t.content_length = (uint64_t)100 << 30; /* 100 GiB: 10240 s more */
    assert_int_equal(sched_pull_timeout_ms(&p, &t), 120000 + 10240 * 1000);
    t.content_length = UINT64_MAX;
    assert_int_equal(sched_pull_timeout_ms(&p, &t), SCHED_PLACEMENT_PULL_MAX_MS);
}

static void test_lease_key_and_owner(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_placement *p0 = engine(0, 1, 0), *p1 = engine(1, 1, 0);
    struct dfc_error err = {0};
    char key[256];
    assert_int_equal(sched_lease_key(p0, T1, key, sizeof(key)), 0);
    assert_string_equal(key, "scheduler:scheduler-clusters:1:dfc-replica-leases:" T1);

    assert_int_equal(sched_lease_acquire(p0, T1, 60000, &err), 1);
    assert_int_equal(sched_lease_acquire(p1, T1, 60000, &err), 0);
    /* Only the owner extends or releases it. */
    assert_int_equal(sched_lease_extend(p1, T1, 60000, &err), 0);
    assert_int_equal(sched_lease_release(p1, T1, &err), 0);
    redisReply *r = redis_server_command(&srv, "GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, p0->owner);
    freeReplyObject(r);
    r = redis_server_command(&srv, "PTTL %s", key);
    assert_true(r->integer > 0 && r->integer <= 60000);
    freeReplyObject(r);
    assert_int_equal(sched_lease_extend(p0, T1, 60000, &err), 1);
    assert_int_equal(sched_lease_release(p0, T1, &err), 1);
    r = redis_server_command(&srv, "EXISTS %s", key);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    /* Free again: the other engine takes it. */
    assert_int_equal(sched_lease_acquire(p1, T1, 60000, &err), 1);
    assert_int_equal(sched_lease_release(p1, T1, &err), 1);
    engine_free(p0);
    engine_free(p1);
}

int main(void) {
    dfc_log_set_level(DFC_LOG_ERROR); /* the fault tests warn by design */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_upstream_rules),
        cmocka_unit_test(test_rank_filter_and_order),
        cmocka_unit_test(test_rank_shuffles_equals),
        cmocka_unit_test(test_backoff_grows_and_caps),
        cmocka_unit_test(test_pull_deadline_grows_with_size),
        cmocka_unit_test_setup_teardown(test_find_parents_from_store, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_pass_metrics, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_dfdaemon_calls_carry_fields, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_dfdaemon_unreachable_and_hung, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_replicate_promotes_cached_first, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_pulls_go_only_to_eligible_hosts, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_fix_failed_pull_is_repaired, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_fix_blocklist_compares_host_ids, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_repair_restores_count_after_host_delete, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_two_engines_never_double_place, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_backoff_stops_unplaceable_task, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_host_gc_removes_host_peers_and_repairs, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_loops_run_by_themselves, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_queued_jobs_merge_block_lists, env_setup,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_concurrency_is_bounded, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_free_cuts_a_hung_pull_short, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_lease_key_and_owner, env_setup, env_teardown),
    };
    return test_run_group(tests, start_redis, stop_redis);
}
