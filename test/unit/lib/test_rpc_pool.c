/*
 * Tests for lib/src/rpc_pool.c. Its scheduling policy: dfc__next_call() over the two queues, the
 * limits on busy unary calls and streams, and the per-uid share of busy workers; with
 * dfc__pool_take() and dfc__pool_end(), the bookkeeping a worker does around a call (pure
 * functions over plain structs). Its threads, through a real server on a temp Unix socket and
 * the dfc__pool_spawn seam: no worker is started with the server's lock held, and a start that
 * fails loses no call and is logged once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "rpc_pool.h"
#include "rpc_test_service.h"
#include "test/rpc_test.pb-c.h"
#include "test_support.h"

/* A pool with room for 4 unary calls, 2 streams, and 2 busy workers per uid. */
static struct rpc_pool pool(void) {
    struct rpc_pool p;
    memset(&p, 0, sizeof(p));
    p.unary_running = 4;
    p.stream_workers = 2;
    p.max_workers_per_uid = 2;
    return p;
}

static struct pool_entry unary(uid_t uid) {
    return (struct pool_entry){.stream = false, .has_uid = true, .uid = uid};
}

static struct pool_entry stream(uid_t uid) {
    return (struct pool_entry){.stream = true, .has_uid = true, .uid = uid};
}

/* Takes the call next_call() picks; it must be want. */
static struct pool_running take(struct rpc_pool *p, const struct pool_entry *want) {
    struct pool_pick pick = dfc__next_call(p);
    assert_ptr_equal(pick.entry, want);
    return dfc__pool_take(p, pick);
}

static void test_empty(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    assert_null(dfc__next_call(&p).entry);
}

static void test_fifo(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    struct pool_entry a = unary(1), b = unary(2), c = unary(3);
    dfc__pool_push(&p, &a);
    dfc__pool_push(&p, &b);
    take(&p, &a);
    dfc__pool_push(&p, &c); /* behind b, though it came after a was taken */
    take(&p, &b);
    take(&p, &c);
    assert_null(dfc__next_call(&p).entry);
    assert_null(p.unary.head);
    assert_null(p.unary.tail);
    assert_int_equal(p.busy_unary, 3);
    dfc__pool_free(&p);
}

static void test_unary_before_stream(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    struct pool_entry s = stream(1), u = unary(2);
    dfc__pool_push(&p, &s);
    dfc__pool_push(&p, &u);
    take(&p, &u); /* queued after the stream, runs first */
    take(&p, &s);
    dfc__pool_free(&p);
}

static void test_stream_limit(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    struct pool_entry s1 = stream(1), s2 = stream(2), s3 = stream(3), u = unary(4);
    dfc__pool_push(&p, &s1);
    dfc__pool_push(&p, &s2);
    dfc__pool_push(&p, &s3);
    struct pool_running r1 = take(&p, &s1);
    take(&p, &s2);
    /* Streams hold their 2 workers: the third waits, a unary call still runs. */
    assert_false(dfc__pool_may_run(&p, &s3));
    assert_null(dfc__next_call(&p).entry);
    dfc__pool_push(&p, &u);
    take(&p, &u);
    assert_null(dfc__next_call(&p).entry);
    dfc__pool_end(&p, r1);
    assert_int_equal(p.busy_streams, 1);
    take(&p, &s3);
    dfc__pool_free(&p);
}

static void test_unary_limit(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    p.unary_running = 1;
    struct pool_entry u1 = unary(1), u2 = unary(2), s = stream(3);
    dfc__pool_push(&p, &u1);
    dfc__pool_push(&p, &u2);
    dfc__pool_push(&p, &s);
    struct pool_running r1 = take(&p, &u1);
    /* One unary call runs: the second waits, the stream behind it does not. */
    assert_false(dfc__pool_may_run(&p, &u2));
    take(&p, &s);
    assert_null(dfc__next_call(&p).entry);
    dfc__pool_end(&p, r1);
    take(&p, &u2);
    dfc__pool_free(&p);
}

static void test_uid_share(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    struct pool_entry a1 = unary(1000), a2 = unary(1000), a3 = unary(1000), b = unary(2000),
                      a4 = unary(1000);
    dfc__pool_push(&p, &a1);
    dfc__pool_push(&p, &a2);
    dfc__pool_push(&p, &a3);
    dfc__pool_push(&p, &b);
    dfc__pool_push(&p, &a4);
    struct pool_running r1 = take(&p, &a1);
    take(&p, &a2);
    assert_int_equal(dfc__uid_count(&p.busy_uids, 1000), 2);
    /* uid 1000 holds its share: a3 stays queued, b behind it runs. */
    assert_false(dfc__pool_may_run(&p, &a3));
    struct pool_pick pick = dfc__next_call(&p);
    assert_ptr_equal(pick.entry, &b);
    assert_ptr_equal(pick.prev, &a3);
    dfc__pool_take(&p, pick);
    assert_ptr_equal(a3.next, &a4); /* b unlinked from the middle */
    assert_null(dfc__next_call(&p).entry);
    /* One of uid 1000's calls ends: its next call, in order, runs. */
    dfc__pool_end(&p, r1);
    take(&p, &a3);
    assert_null(dfc__next_call(&p).entry);
    assert_ptr_equal(p.unary.head, &a4);
    assert_ptr_equal(p.unary.tail, &a4);
    dfc__pool_free(&p);
}

static void test_uid_share_spans_kinds(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    p.max_workers_per_uid = 1;
    struct pool_entry u = unary(7), s = stream(7);
    dfc__pool_push(&p, &u);
    dfc__pool_push(&p, &s);
    struct pool_running r = take(&p, &u);
    assert_null(dfc__next_call(&p).entry); /* the stream is uid 7's too */
    dfc__pool_end(&p, r);
    assert_int_equal(dfc__uid_count(&p.busy_uids, 7), 0);
    take(&p, &s);
    dfc__pool_free(&p);
}

static void test_no_uid_exempt(void **state) {
    (void)state;
    struct rpc_pool p = pool();
    p.max_workers_per_uid = 1;
    struct pool_entry a = {.uid = 0}, b = {.uid = 0}, c = unary(0), d = unary(0);
    dfc__pool_push(&p, &c);
    dfc__pool_push(&p, &d);
    dfc__pool_push(&p, &a);
    dfc__pool_push(&p, &b);
    take(&p, &c);
    /* uid 0 (root) has a share too; calls without a uid have none. */
    take(&p, &a);
    take(&p, &b);
    assert_int_equal(dfc__uid_count(&p.busy_uids, 0), 1);
    assert_null(dfc__next_call(&p).entry);
    dfc__pool_free(&p);
}

/* ---- the threads ---- */

/* Echo holds its worker for HOLD_MS, so that calls at once need a worker each. */
#define HOLD_MS 200
#define N_CALLS 4

static int echo(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                ProtobufCMessage *resp, struct dfc_error *err) {
    (void)svc;
    (void)call;
    (void)err;
    usleep(HOLD_MS * 1000);
    ((Dfc__Test__V1__Chunk *)resp)->seq = ((const Dfc__Test__V1__Chunk *)req)->seq + 1;
    return 0;
}

static int unused(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                  ProtobufCMessage *resp, struct dfc_error *err) {
    (void)svc;
    (void)call;
    (void)req;
    (void)resp;
    return dfc_error_set(err, -ENOSYS, "unused");
}

static const struct rpc_test_handlers handlers = {echo, unused, unused, rpc_test_chat};

/* What the spawn seams saw. */
static atomic_int spawns;       /* starts asked for */
static atomic_int spawns_held;  /* ... with mu held throughout (by the caller) */
static atomic_int spawn_fails;  /* ... made to fail */
static atomic_int fail_after;   /* failing_spawn: starts that succeed before the rest fail */
static atomic_int failed_lines; /* rpc.worker_spawn_failed lines logged */

/* Checks that mu is free: another thread may hold it for a moment, the caller would hold it
 * for good. Then starts the thread. */
static int checking_spawn(pthread_t *ret, void *(*fn)(void *), void *arg, pthread_mutex_t *mu) {
    atomic_fetch_add(&spawns, 1);
    bool free_seen = false;
    for (int i = 0; i < 2000 && !free_seen; i++) {
        if (pthread_mutex_trylock(mu) == 0) {
            pthread_mutex_unlock(mu);
            free_seen = true;
        } else {
            usleep(1000);
        }
    }
    if (!free_seen) {
        atomic_fetch_add(&spawns_held, 1);
    }
    return pthread_create(ret, NULL, fn, arg);
}

/* The first fail_after starts succeed, the rest fail as a process out of threads would. */
static int failing_spawn(pthread_t *ret, void *(*fn)(void *), void *arg, pthread_mutex_t *mu) {
    (void)mu;
    if (atomic_fetch_add(&spawns, 1) >= atomic_load(&fail_after)) {
        atomic_fetch_add(&spawn_fails, 1);
        return EAGAIN;
    }
    return pthread_create(ret, NULL, fn, arg);
}

static void count_failed_lines(int level, const char *line, size_t len, void *ud) {
    (void)level;
    (void)ud;
    if (memmem(line, len, "rpc.worker_spawn_failed", strlen("rpc.worker_spawn_failed")) != NULL) {
        atomic_fetch_add(&failed_lines, 1);
    }
}

struct server_fx {
    char dir[256];
    char addr[320];
    struct dfc_rpc_server *server;
    struct dfc_rpc_client *client;
};

static void server_start(struct server_fx *f, dfc__pool_spawn_fn spawn) {
    struct dfc_error err;
    atomic_store(&spawns, 0);
    atomic_store(&spawns_held, 0);
    atomic_store(&spawn_fails, 0);
    atomic_store(&failed_lines, 0);
    dfc__pool_spawn = spawn;
    char path[300];
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-pool");
    snprintf(path, sizeof(path), "%s/p.sock", f->dir);
    snprintf(f->addr, sizeof(f->addr), "unix:%s", path);
    struct dfc_rpc_server_opts o = {.max_workers = N_CALLS, .max_workers_per_uid = N_CALLS};
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, &handlers, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_unix(f->server, path, 0600, -1, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    assert_int_equal(dfc_rpc_client_new(f->addr, NULL, &f->client, &err), 0);
}

static void server_stop(struct server_fx *f, dfc__pool_spawn_fn default_spawn) {
    dfc_rpc_client_free(f->client);
    dfc_rpc_server_free(f->server);
    dfc__pool_spawn = default_spawn;
    test_rmtree(f->dir);
}

struct caller {
    pthread_t id;
    struct dfc_rpc_client *client;
    uint64_t seq;
    int r;
};

static void *call_echo(void *arg) {
    struct caller *c = arg;
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = c->seq;
    ProtobufCMessage *out = NULL;
    c->r = dfc_rpc_unary(c->client, &rt.echo, &in.base, 20000, &out, &err);
    if (c->r == 0 && ((Dfc__Test__V1__Chunk *)out)->seq != c->seq + 1) {
        c->r = -EPROTO;
    }
    dfc_rpc_msg_free(out);
    return NULL;
}

/* N_CALLS Echo calls at once; each must succeed. */
static void echo_at_once(struct server_fx *f) {
    struct caller c[N_CALLS];
    for (int i = 0; i < N_CALLS; i++) {
        c[i] = (struct caller){.client = f->client, .seq = (uint64_t)i * 10, .r = 1};
        assert_int_equal(pthread_create(&c[i].id, NULL, call_echo, &c[i]), 0);
    }
    for (int i = 0; i < N_CALLS; i++) {
        pthread_join(c[i].id, NULL);
        assert_int_equal(c[i].r, 0);
    }
}

static void test_workers_start_without_the_lock(void **state) {
    (void)state;
    dfc__pool_spawn_fn saved = dfc__pool_spawn;
    struct server_fx f;
    server_start(&f, checking_spawn);
    echo_at_once(&f);
    server_stop(&f, saved);
    assert_true(atomic_load(&spawns) >= 2); /* calls at once got workers of their own */
    assert_true(atomic_load(&spawns) <= N_CALLS);
    assert_int_equal(atomic_load(&spawns_held), 0);
}

static void test_failed_start_loses_no_call(void **state) {
    (void)state;
    dfc__pool_spawn_fn saved = dfc__pool_spawn;
    dfc_log_set_sink(count_failed_lines, NULL);
    atomic_store(&fail_after, 1); /* one worker, then no more threads */
    struct server_fx f;
    server_start(&f, failing_spawn);
    echo_at_once(&f); /* the one worker runs them one after the other */
    echo_at_once(&f); /* and still does: each call tries to start a worker, and fails */
    server_stop(&f, saved);
    dfc_log_set_sink(NULL, NULL);
    assert_true(atomic_load(&spawn_fails) >= 2);
    assert_int_equal(atomic_load(&failed_lines), 1); /* rate-limited */
}

int main(void) {
    if (rpc_test_resolve() != 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_unary_before_stream),
        cmocka_unit_test(test_stream_limit),
        cmocka_unit_test(test_unary_limit),
        cmocka_unit_test(test_uid_share),
        cmocka_unit_test(test_uid_share_spans_kinds),
        cmocka_unit_test(test_no_uid_exempt),
        cmocka_unit_test(test_workers_start_without_the_lock),
        cmocka_unit_test(test_failed_start_loses_no_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
