/*
 * Tests for scheduler/placement_probe.c: which persistent copies count, against a real
 * redis-server and fake DfdaemonUpload servers on loopback TCP (test/support/fake_dfdaemon.c),
 * one repair pass at a time (sched_placement_repair_once). A ghost answering NOT_FOUND goes at
 * once and repair places a copy; a peer whose host is gone goes; a probe is made at most once
 * per peer per probe interval; a failed probe stops the copy counting but removes its peer only
 * at the second failure in a row, a probe interval later; a copy that answers again counts
 * again; with no probe interval nothing is probed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/units.h"
#include "fake_dfdaemon.h"
#include "placement.h"
#include "redis_harness.h"
#include "store.h"
#include "test_support.h"

#define T1        "1111111111111111111111111111111111111111111111111111111111111111"
#define MAX_FAKES 4
#define STAT      "StatPersistentCacheTask"

static struct redis_server srv;

static struct {
    struct sched_redis *redis;
    struct sched_store *store;
    struct fake_dfdaemon *fake[MAX_FAKES];
    size_t n_fakes;
    struct sched_placement *engine;
} E;

static int start_redis(void **state) {
    (void)state;
    if (redis_harness_available()) {
        redis_server_start(&srv, NULL);
    }
    return 0;
}

static int stop_redis(void **state) {
    (void)state;
    redis_server_destroy(&srv);
    return 0;
}

static int setup(void **state) {
    (void)state;
    memset(&E, 0, sizeof(E));
    if (!redis_harness_available()) {
        return 0;
    }
    freeReplyObject(redis_server_command(&srv, "FLUSHALL"));
    const char *addrs[] = {srv.addr};
    struct sched_redis_opts o = {.addrs = addrs, .n_addrs = 1, .pool_size = 4};
    struct dfc_error err = {0};
    if (sched_redis_new(&o, &E.redis, &err) < 0 ||
        sched_store_new(E.redis, 1, &E.store, &err) < 0) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    sched_placement_free(E.engine);
    for (size_t i = 0; i < E.n_fakes; i++) {
        fake_dfdaemon_stop(E.fake[i]);
    }
    sched_store_free(E.store);
    sched_redis_free(E.redis);
    return 0;
}

static int64_t dl(void) {
    return sched_redis_deadline(5000);
}

static int64_t now_s(void) {
    return (int64_t)time(NULL);
}

/* A host at 127.0.0.1:port (1: nothing listens). */
static void put_host(const char *id, int port) {
    struct sched_host h = {0};
    h.id = (char *)id;
    h.name = h.hostname = (char *)id;
    h.ip = (char *)"127.0.0.1";
    h.port = h.download_port = port;
    h.disk.total = h.disk.free = 1 << 30;
    h.scheduler_cluster_id = 1;
    h.created_at = h.updated_at = now_s();
    struct dfc_error err = {0};
    if (sched_host_store(E.store, dl(), &h, &err) < 0) {
        fail_msg("host store %s: %s", id, err.msg);
    }
}

static struct fake_dfdaemon *add_fake(const char *id) {
    assert_true(E.n_fakes < MAX_FAKES);
    struct fake_dfdaemon *f = NULL;
    assert_int_equal(fake_dfdaemon_start(E.store, id, &f), 0);
    E.fake[E.n_fakes++] = f;
    put_host(id, fake_dfdaemon_port(f));
    return f;
}

static void put_task(const char *id, uint64_t replicas) {
    struct sched_task t = {
        .id = (char *)id,
        .persistent_replica_count = replicas,
        .tag = (char *)"tag-1",
        .application = (char *)"app-1",
        .piece_length = 4 << 20,
        .content_length = 5 << 20,
        .total_piece_count = 2,
        .state = SCHED_TASK_SUCCEEDED,
        .ttl_ns = 3600 * DFC_NS_PER_SEC,
        .created_at = now_s(),
        .updated_at = now_s(),
    };
    struct dfc_error err = {0};
    if (sched_task_store(E.store, dl(), &t, &err) < 0) {
        fail_msg("task store: %s", err.msg);
    }
}

static void put_peer(const char *id, const char *host_id) {
    struct sched_task t = {0};
    struct dfc_error err = {0};
    if (sched_task_load(E.store, dl(), T1, &t, &err) < 0) {
        fail_msg("task load: %s", err.msg);
    }
    struct sched_peer p = {
        .id = (char *)id,
        .persistent = true,
        .state = SCHED_PEER_SUCCEEDED,
        .task_id = (char *)T1,
        .host_id = (char *)host_id,
        .created_at = now_s(),
        .updated_at = now_s(),
        .concurrent_piece_count = 8,
    };
    assert_int_equal(sched_bitset_init(&p.finished_pieces, t.total_piece_count), 0);
    sched_bitset_set_all(&p.finished_pieces);
    if (sched_peer_store(E.store, dl(), &p, &t, &err) < 0) {
        fail_msg("peer store: %s", err.msg);
    }
    sched_bitset_done(&p.finished_pieces);
    sched_task_done(&t);
}

static bool in_persistent_set(const char *peer_id) {
    redisReply *r =
        redis_server_command(&srv,
                             "SISMEMBER scheduler:scheduler-clusters:1:persistent-cache-"
                             "tasks:%s:persistent-peers-for-persistent-cache-task %s",
                             T1, peer_id);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

static uint64_t persistent_count(void) {
    uint64_t all = 0, persistent = 0;
    struct dfc_error err = {0};
    assert_int_equal(sched_task_replica_counts(E.store, dl(), T1, &all, &persistent, &err), 0);
    return persistent;
}

static void start_engine(int64_t probe_interval_ms) {
    struct sched_placement_opts o = {.advertise_ip = "127.0.0.9",
                                     .repair_concurrency = 2,
                                     .dfdaemon_timeout_ms = 2000,
                                     .probe_interval_ns = probe_interval_ms * DFC_NS_PER_MS};
    struct dfc_error err = {0};
    if (sched_placement_new(E.store, &o, &E.engine, &err) < 0) {
        fail_msg("placement: %s", err.msg);
    }
}

static int repair(void) {
    struct dfc_error err = {0};
    int r = sched_placement_repair_once(E.engine, &err);
    if (r < 0) {
        fail_msg("repair: %s", err.msg);
    }
    return r;
}

static size_t stats(struct fake_dfdaemon *f) {
    return fake_dfdaemon_count(f, STAT);
}

static size_t downloads(struct fake_dfdaemon *f) {
    return fake_dfdaemon_count(f, "DownloadPersistentCacheTask");
}

/* Two copies wanted; the count says 3 (a real one on H1, ghosts on H2, which answers NOT_FOUND,
 * and on a host whose record is gone). One pass drops both ghosts and places a copy on H3,
 * which then answers for it. */
static void test_ghosts_dropped_and_repaired(void **state) {
    (void)state;
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *h1 = add_fake("h1"), *h2 = add_fake("h2"), *h3 = add_fake("h3");
    put_host("gone", 1);
    put_task(T1, 2);
    fake_dfdaemon_hold(h1, T1);
    put_peer("h1-p", "h1");
    put_peer("h2-ghost", "h2");
    put_peer("gone-ghost", "gone");
    struct dfc_error err = {0};
    assert_int_equal(sched_host_delete(E.store, dl(), "gone", &err), 0); /* its peer stays */
    assert_int_equal(persistent_count(), 3);
    start_engine(60000);

    assert_int_equal(repair(), 1); /* short once the ghosts were dropped */
    assert_false(in_persistent_set("h2-ghost"));
    assert_false(in_persistent_set("gone-ghost"));
    assert_true(in_persistent_set("h1-p"));
    assert_int_equal(stats(h1), 1);
    assert_int_equal(stats(h2), 1);
    /* The copy went to h2 or h3 (both free of the task now). */
    assert_int_equal(downloads(h2) + downloads(h3), 1);
    assert_int_equal(persistent_count(), 2);
}

/* A verdict lasts a probe interval: passes within it probe no one again. */
static void test_probed_once_per_interval(void **state) {
    (void)state;
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *h1 = add_fake("h1"), *h2 = add_fake("h2");
    put_task(T1, 2);
    fake_dfdaemon_hold(h1, T1);
    fake_dfdaemon_hold(h2, T1);
    put_peer("h1-p", "h1");
    put_peer("h2-p", "h2");
    start_engine(1500);
    assert_int_equal(repair(), 0);
    assert_int_equal(repair(), 0);
    assert_int_equal(repair(), 0);
    assert_int_equal(stats(h1), 1);
    assert_int_equal(stats(h2), 1);
    usleep(1600 * 1000); /* the verdicts expired */
    assert_int_equal(repair(), 0);
    assert_int_equal(stats(h1), 2);
    assert_int_equal(stats(h2), 2);
    assert_int_equal(downloads(h1) + downloads(h2), 0);
}

/* h2 fails a probe: its copy stops counting (repair places one on h3) but its peer stays, and
 * no pass within the interval probes it again. Answering at the next probe, it counts again.
 * Failing twice in a row (h3 here), a probe interval apart, removes the peer. */
static void test_failures_in_a_row(void **state) {
    (void)state;
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *h1 = add_fake("h1"), *h2 = add_fake("h2"), *h3 = add_fake("h3");
    put_task(T1, 2);
    fake_dfdaemon_hold(h1, T1);
    fake_dfdaemon_hold(h2, T1);
    put_peer("h1-p", "h1");
    put_peer("h2-p", "h2");
    start_engine(1000);

    fake_dfdaemon_set_mode(h2, FAKE_DFDAEMON_FAIL);
    assert_int_equal(repair(), 1);
    assert_true(in_persistent_set("h2-p"));
    assert_int_equal(downloads(h3), 1); /* h2's copy did not count */
    assert_int_equal(persistent_count(), 3);
    assert_int_equal(repair(), 0); /* h1 and h3 count: enough, and h2 is not due yet */
    assert_int_equal(stats(h2), 1);

    fake_dfdaemon_set_mode(h2, FAKE_DFDAEMON_OK);
    usleep(1100 * 1000);
    assert_int_equal(repair(), 0);
    assert_int_equal(stats(h2), 2);
    assert_true(in_persistent_set("h2-p")); /* a transient failure: kept */

    /* h3 (holding the copy it pulled) fails twice in a row. */
    fake_dfdaemon_set_mode(h3, FAKE_DFDAEMON_FAIL);
    usleep(1100 * 1000);
    assert_int_equal(repair(), 0);           /* h1 and h2 count */
    assert_int_equal(persistent_count(), 3); /* h3's peer stays after one failure */
    size_t before = stats(h3);
    assert_int_equal(repair(), 0); /* not due again yet */
    assert_int_equal(stats(h3), before);
    usleep(1100 * 1000);
    assert_int_equal(repair(), 0);
    assert_int_equal(stats(h3), before + 1);
    assert_int_equal(persistent_count(), 2); /* h3's peer is gone */
}

/* Without a probe interval every member of the set counts, as upstream: no probe at all. */
static void test_no_interval_no_probe(void **state) {
    (void)state;
    REDIS_HARNESS_REQUIRE();
    struct fake_dfdaemon *h1 = add_fake("h1"), *h2 = add_fake("h2");
    put_task(T1, 2);
    put_peer("h1-p", "h1");
    put_peer("h2-ghost", "h2"); /* holds nothing */
    start_engine(0);
    assert_int_equal(repair(), 0);
    assert_int_equal(stats(h1) + stats(h2), 0);
    assert_true(in_persistent_set("h2-ghost"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ghosts_dropped_and_repaired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probed_once_per_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_in_a_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_interval_no_probe, setup, teardown),
    };
    return test_run_group(tests, start_redis, stop_redis);
}
