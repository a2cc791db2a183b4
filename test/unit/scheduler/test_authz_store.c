/*
 * Tests for scheduler/authz_store.c against a real redis-server (test/support/redis_harness):
 * the host binding (set, renewed, only ever moving from shared to node, its expiry), the task
 * importer set (reset by a new import, joined, bounded, expiring with the task, deleted), and
 * the host id read from a peer hash whose host is gone.
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

#include "authz_store.h"
#include "redis.h"
#include "redis_harness.h"
#include "store.h"
#include "test_support.h"

#define P    "scheduler:scheduler-clusters:1"
#define TASK "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"

static struct redis_server srv;

struct fixture {
    struct sched_redis *r;
    struct sched_store *s;
};

static int start_server(void **state) {
    (void)state;
    if (redis_harness_available()) {
        redis_server_start(&srv, NULL);
    }
    return 0;
}

static int stop_server(void **state) {
    (void)state;
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

static long long ttl_of(const char *key) {
    redisReply *rep = redis_server_command(&srv, "TTL %s", key);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* A binding is set by either kind, renewed, moved from shared to node, never back; a shared
 * bind of a node-bound host writes nothing. */
static void test_binding(void **state) {
    struct fixture *fx = *state;
    REDIS_HARNESS_REQUIRE();
    struct dfc_error err;
    enum sched_binding b = SCHED_BINDING_NODE;
    assert_int_equal(sched_binding_get(fx->s, dl(), "h1", &b, &err), 0);
    assert_int_equal(b, SCHED_BINDING_NONE);
    assert_int_equal(sched_binding_set(fx->s, dl(), "h1", SCHED_BINDING_SHARED, &err), 1);
    assert_int_equal(sched_binding_get(fx->s, dl(), "h1", &b, &err), 0);
    assert_int_equal(b, SCHED_BINDING_SHARED);
    assert_int_equal(sched_binding_set(fx->s, dl(), "h1", SCHED_BINDING_SHARED, &err), 1);
    assert_int_equal(sched_binding_set(fx->s, dl(), "h1", SCHED_BINDING_NODE, &err), 1);
    assert_int_equal(sched_binding_get(fx->s, dl(), "h1", &b, &err), 0);
    assert_int_equal(b, SCHED_BINDING_NODE);

    freeReplyObject(
        redis_server_command(&srv, "EXPIRE %s 100", P ":persistent-cache-host-binding:h1"));
    assert_int_equal(sched_binding_set(fx->s, dl(), "h1", SCHED_BINDING_SHARED, &err), 0);
    assert_true(ttl_of(P ":persistent-cache-host-binding:h1") <= 100); /* not renewed */
    assert_int_equal(sched_binding_get(fx->s, dl(), "h1", &b, &err), 0);
    assert_int_equal(b, SCHED_BINDING_NODE);
    assert_int_equal(sched_binding_set(fx->s, dl(), "h1", SCHED_BINDING_NODE, &err), 1);
    long long ttl = ttl_of(P ":persistent-cache-host-binding:h1");
    assert_true(ttl > SCHED_BINDING_TTL_S - 60 && ttl <= SCHED_BINDING_TTL_S);

    redisReply *rep = redis_server_command(&srv, "GET %s", P ":persistent-cache-host-binding:h1");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "node");
    freeReplyObject(rep);
    assert_int_equal(sched_binding_set(fx->s, dl(), "", SCHED_BINDING_NODE, &err), -EINVAL);
}

static bool is_member(const struct sched_ids *ids, const char *id) {
    for (size_t i = 0; i < ids->n; i++) {
        if (strcmp(ids->ids[i], id) == 0) {
            return true;
        }
    }
    return false;
}

/* A new import resets the set, joins add to it up to the bound, the expiry only grows, and
 * the set goes with the task. */
static void test_importers(void **state) {
    struct fixture *fx = *state;
    REDIS_HARNESS_REQUIRE();
    struct dfc_error err;
    struct sched_ids ids;
    assert_int_equal(sched_importers(fx->s, dl(), TASK, &ids, &err), 0);
    assert_int_equal(ids.n, 0);
    sched_ids_free(&ids);
    assert_int_equal(sched_importer_add(fx->s, dl(), TASK, "old", true, 50, &err), 1);
    assert_int_equal(sched_importer_add(fx->s, dl(), TASK, "a", true, 100, &err), 1);
    assert_int_equal(sched_importer_add(fx->s, dl(), TASK, "b", false, 10, &err), 1);
    assert_int_equal(sched_importers(fx->s, dl(), TASK, &ids, &err), 0);
    assert_int_equal(ids.n, 2);
    assert_true(is_member(&ids, "a") && is_member(&ids, "b") && !is_member(&ids, "old"));
    sched_ids_free(&ids);
    long long ttl = ttl_of(P ":persistent-cache-task-importers:" TASK);
    assert_true(ttl > 90 && ttl <= 100);

    for (int i = 0; i < SCHED_IMPORTERS_MAX; i++) {
        char h[16];
        snprintf(h, sizeof(h), "j%d", i);
        assert_int_equal(sched_importer_add(fx->s, dl(), TASK, h, false, 100, &err),
                         i < SCHED_IMPORTERS_MAX - 2 ? 1 : 0);
    }
    assert_int_equal(sched_importer_add(fx->s, dl(), TASK, "a", false, 100, &err), 1);
    assert_int_equal(sched_importers(fx->s, dl(), TASK, &ids, &err), 0);
    assert_int_equal(ids.n, SCHED_IMPORTERS_MAX);
    sched_ids_free(&ids);

    assert_int_equal(sched_importers_delete(fx->s, dl(), TASK, &err), 0);
    assert_int_equal(sched_importers(fx->s, dl(), TASK, &ids, &err), 0);
    assert_int_equal(ids.n, 0);
    sched_ids_free(&ids);
}

/* The host id of a peer hash, whether or not its host and task are there. */
static void test_peer_owner(void **state) {
    struct fixture *fx = *state;
    REDIS_HARNESS_REQUIRE();
    struct dfc_error err;
    char *owner = NULL;
    assert_int_equal(sched_peer_owner(fx->s, dl(), "p1", &owner, &err), -ENOENT);
    assert_null(owner);
    freeReplyObject(redis_server_command(&srv, "HSET %s host_id h9 task_id %s",
                                         P ":persistent-cache-peers-for-persistent-cache-task:p1",
                                         TASK));
    assert_int_equal(sched_peer_owner(fx->s, dl(), "p1", &owner, &err), 0);
    assert_string_equal(owner, "h9");
    free(owner);
}

int main(void) {
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_binding),
        T(test_importers),
        T(test_peer_owner),
    };
    return test_run_group(tests, start_server, stop_server);
}
