/*
 * Tests for scheduler/placement (parents_rank.c, parents.c, backoff.c, dfdaemon_client.c,
 * replicate.c, placement.c): upstream's parent scoring and filter on plain records, the repair
 * back-off, and, against a real redis-server and fake DfdaemonUpload servers on loopback TCP
 * (test/support/fake_dfdaemon.c), replication, the repair loop, leases and host GC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "placement_internal.h"

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
    };
    struct sched_host hosts[] = {
        host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"),
        host_at("h1", "idc", "cn|bj"), host_at("h1", "idc", "cn|bj"), host_at("h2", "other", "us"),
        host_at("h3", "IDC", ""),      host_at("h3", "IDC", ""),      host_at("me", "idc", "cn|bj"),
        host_at("h4", "", "cn|bj|x"),  host_at("h5", "", ""),
    };
    size_t n = sizeof(peers) / sizeof(peers[0]);
    struct sched_host asking = host_at("me", "idc", "cn|bj|y");
    const char *block[] = {"p-ok-blocked"};
    size_t idx[16];
    double sc[16];

    size_t k = sched_parents_rank(peers, hosts, n, &asking, block, 1, 10, idx, sc);
    assert_int_equal(k, 4);
    assert_string_equal(peers[idx[0]].id, "p-ok-idc");
    assert_true(close_to(sc[0], 0.7));
    assert_string_equal(peers[idx[1]].id, "p-run-loc");
    assert_true(close_to(sc[1], 0.3 * 2 / 5));
    assert_string_equal(peers[idx[2]].id, "p-run-far"); /* ties keep their order */
    assert_string_equal(peers[idx[3]].id, "p-run-far2");

    /* The limit truncates after sorting. */
    k = sched_parents_rank(peers, hosts, n, &asking, block, 1, 1, idx, NULL);
    assert_int_equal(k, 1);
    assert_string_equal(peers[idx[0]].id, "p-ok-idc");

    /* Without a block list the blocked peer is back. */
    k = sched_parents_rank(peers, hosts, n, &asking, NULL, 0, 10, idx, NULL);
    assert_int_equal(k, 5);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_upstream_rules),
        cmocka_unit_test(test_rank_filter_and_order),
        cmocka_unit_test(test_backoff_grows_and_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
