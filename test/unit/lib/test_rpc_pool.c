/*
 * Tests for lib/src/rpc_pool.c's scheduling policy: dfc__next_call() over the two queues, the
 * limits on busy unary calls and streams, and the per-uid share of busy workers; with
 * dfc__pool_take() and dfc__pool_end(), the bookkeeping a worker does around a call. Pure
 * functions over plain structs: no threads, no gRPC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "rpc_pool.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_unary_before_stream),
        cmocka_unit_test(test_stream_limit),
        cmocka_unit_test(test_unary_limit),
        cmocka_unit_test(test_uid_share),
        cmocka_unit_test(test_uid_share_spans_kinds),
        cmocka_unit_test(test_no_uid_exempt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
