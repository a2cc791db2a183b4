/*
 * Tests for daemon/scheduler_client.c: the consistent-hash ring (a stable choice, a fail-over
 * order that names every scheduler once, only the removed scheduler's tasks move) and the
 * fail-over of a task call across schedulers that refuse connections (real gRPC channels to
 * closed 127.0.0.1 ports). The calls' happy paths run against the real scheduler in
 * test/integration/test_dfdaemon_sched.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/error.h"
#include "dragonfly/common.pb-c.h"
#include "scheduler_client.h"
#include "test_support.h"

#define N_TASKS 600

struct addrs {
    char buf[8][32];
    char *items[8];
};

static struct dfd_config config_with(struct addrs *a, size_t n, const int *ports) {
    struct dfd_config cfg = {0};
    for (size_t i = 0; i < n; i++) {
        snprintf(a->buf[i], sizeof(a->buf[i]), "127.0.0.%zu:%d", i + 1, ports ? ports[i] : 8002);
        a->items[i] = a->buf[i];
    }
    cfg.scheduler_addrs.items = a->items;
    cfg.scheduler_addrs.n = n;
    return cfg;
}

/* Task ids that differ in their first 5 characters (the ring's key). */
static void task_id(unsigned i, char out[65]) {
    snprintf(out, 65, "%05x%059x", i * 2654435761u % 0xfffff, 0);
}

static void test_ring_stable_and_covering(void **state) {
    struct addrs a;
    struct dfd_config cfg = config_with(&a, 4, NULL);
    struct dfd_sched *s1 = NULL, *s2 = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_sched_new(&cfg, "127.0.0.1-test", &s1, &err), 0);
    assert_int_equal(dfd_sched_new(&cfg, "127.0.0.1-test", &s2, &err), 0);
    unsigned first[4] = {0};
    for (unsigned i = 0; i < N_TASKS; i++) {
        char id[65];
        task_id(i, id);
        bool seen[4] = {false};
        for (unsigned k = 0; k < 4; k++) {
            const char *x = NULL, *y = NULL;
            assert_non_null(dfd_sched_pick(s1, id, k, &x));
            assert_non_null(dfd_sched_pick(s2, id, k, &y));
            assert_string_equal(x, y); /* the same choice in another client, every attempt */
            unsigned which = (unsigned)(x[8] - '1');
            assert_true(which < 4);
            assert_false(seen[which]); /* each scheduler comes once in the fail-over order */
            seen[which] = true;
            if (k == 0) {
                first[which]++;
            }
        }
        assert_null(dfd_sched_pick(s1, id, 4, NULL));
        /* Only the first 5 characters choose. */
        char other[65];
        memcpy(other, id, sizeof(other));
        memset(other + 5, 'f', 59);
        const char *x = NULL, *y = NULL;
        dfd_sched_pick(s1, id, 0, &x);
        dfd_sched_pick(s1, other, 0, &y);
        assert_string_equal(x, y);
    }
    /* Every scheduler owns a real share (a quarter is 150; vnodes keep it near that). */
    for (unsigned k = 0; k < 4; k++) {
        assert_true(first[k] > N_TASKS / 10);
    }
    dfd_sched_free(s1);
    dfd_sched_free(s2);
}

static void test_ring_removal_moves_only_its_tasks(void **state) {
    struct addrs a4, a3;
    struct dfd_config four = config_with(&a4, 4, NULL), three = config_with(&a3, 3, NULL);
    struct dfd_sched *s4 = NULL, *s3 = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_sched_new(&four, "h", &s4, &err), 0);
    assert_int_equal(dfd_sched_new(&three, "h", &s3, &err), 0);
    unsigned moved = 0;
    for (unsigned i = 0; i < N_TASKS; i++) {
        char id[65];
        task_id(i, id);
        const char *x = NULL, *y = NULL, *next = NULL;
        dfd_sched_pick(s4, id, 0, &x);
        dfd_sched_pick(s3, id, 0, &y);
        if (strcmp(x, "127.0.0.4:8002") != 0) {
            assert_string_equal(x, y);
        } else {
            /* The removed scheduler's tasks go where its fail-over order sent them. */
            dfd_sched_pick(s4, id, 1, &next);
            assert_string_equal(next, y);
            moved++;
        }
    }
    assert_true(moved > 0);
    dfd_sched_free(s4);
    dfd_sched_free(s3);
}

static void test_new_refuses_empty_and_dedups(void **state) {
    struct dfd_config cfg = {0};
    struct dfd_sched *s = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_sched_new(&cfg, "h", &s, &err), -EINVAL);
    assert_string_equal(err.msg, "scheduler.addrs: must not be empty");
    assert_null(s);
    char *items[] = {"127.0.0.1:8002", "127.0.0.1:8002"};
    cfg.scheduler_addrs.items = items;
    cfg.scheduler_addrs.n = 2;
    assert_int_equal(dfd_sched_new(&cfg, "h", &s, &err), 0);
    assert_non_null(dfd_sched_pick(s, "abcdef", 0, NULL));
    assert_null(dfd_sched_pick(s, "abcdef", 1, NULL)); /* one scheduler, listed twice */
    dfd_sched_free(s);
}

static void test_scheduler_ips(void **state) {
    char *items[] = {"127.0.0.7:8002", "localhost:8002", "[::1]:8002"};
    struct dfd_config cfg = {.scheduler_addrs = {.n = 3, .items = items}};
    struct dfd_sched *s = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_sched_new(&cfg, "h", &s, &err), 0);
    assert_true(dfd_sched_is_scheduler_ip(s, "127.0.0.7"));
    /* localhost comes from /etc/hosts, which a minimal root (debootstrap minbase) may lack. */
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo("localhost", NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        assert_true(dfd_sched_is_scheduler_ip(s, "127.0.0.1"));
    } else {
        fprintf(stderr, "test_scheduler_ips: `localhost` does not resolve here (no /etc/hosts "
                        "entry): its check is skipped\n");
    }
    assert_true(dfd_sched_is_scheduler_ip(s, "::1"));
    assert_false(dfd_sched_is_scheduler_ip(s, "127.0.0.8"));
    assert_false(dfd_sched_is_scheduler_ip(s, ""));
    dfd_sched_free(s);
}

/* No cmocka assertion: also called on follow_in_own_namespace's thread. */
static bool write_hosts(const char *path, const char *line) {
    FILE *f = fopen(path, "w"); /* in place: the bind mount pins the inode */
    if (f == NULL) {
        return false;
    }
    fprintf(f, "%s\n", line);
    return fclose(f) == 0;
}

/* The body of test_scheduler_ip_follows_its_name, on a thread of its own: unshare(2) gives only
 * the calling thread a private mount namespace, so the test process's stays as it was. No
 * cmocka assertion here (they longjmp on the test's thread): the first failed check is named
 * in failed. The re-resolve interval stands in for the clock: an hour (a miss within it does
 * not re-resolve), then 0 (every miss re-resolves at once). */
struct follow_case {
    const char *hosts;  /* the test's /etc/hosts, bound over the real one */
    const char *failed; /* NULL when every check held */
};

#define FOLLOW_CHECK(fc, cond)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            (fc)->failed = #cond;                                                                  \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static void *follow_in_own_namespace(void *arg) {
    struct follow_case *fc = arg;
    struct dfd_sched *s = NULL;
    bool mounted = false;
    FOLLOW_CHECK(fc, unshare(CLONE_NEWNS) == 0);
    FOLLOW_CHECK(fc, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    FOLLOW_CHECK(fc, mount(fc->hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0);
    mounted = true;

    char *items[] = {"sched.dfc.test:8002"};
    struct dfd_config cfg = {.scheduler_addrs = {.n = 1, .items = items}};
    struct dfc_error err;
    FOLLOW_CHECK(fc, dfd_sched_new(&cfg, "h", &s, &err) == 0);
    dfd_sched_set_reresolve_ms(s, 3600 * 1000);
    FOLLOW_CHECK(fc, dfd_sched_is_scheduler_ip(s, "127.0.0.50"));
    FOLLOW_CHECK(fc, !dfd_sched_is_scheduler_ip(s, "127.0.0.51"));

    FOLLOW_CHECK(fc, write_hosts(fc->hosts, "127.0.0.51 sched.dfc.test"));
    FOLLOW_CHECK(fc, !dfd_sched_is_scheduler_ip(s, "127.0.0.51")); /* within the interval */
    dfd_sched_set_reresolve_ms(s, 0);
    FOLLOW_CHECK(fc, dfd_sched_is_scheduler_ip(s, "127.0.0.51"));
    FOLLOW_CHECK(fc, !dfd_sched_is_scheduler_ip(s, "127.0.0.50")); /* the old pod's IP is gone */

    /* A name that stops resolving keeps the last answer rather than trusting nothing. */
    FOLLOW_CHECK(fc, write_hosts(fc->hosts, "# empty"));
    FOLLOW_CHECK(fc, !dfd_sched_is_scheduler_ip(s, "127.0.0.52")); /* re-resolved: nothing */
    FOLLOW_CHECK(fc, dfd_sched_is_scheduler_ip(s, "127.0.0.51"));
out:
    dfd_sched_free(s);
    if (mounted && umount("/etc/hosts") != 0 && fc->failed == NULL) {
        fc->failed = "umount(\"/etc/hosts\") == 0";
    }
    return NULL;
}

/* A scheduler named by a headless Service: its pod's IP changes, and the next call from the
 * new IP is recognised after a re-resolve (the name comes from an /etc/hosts of the test's
 * own, bind-mounted over the real one in a private mount namespace of one thread). */
static void test_scheduler_ip_follows_its_name(void **state) {
    (void)state;
    if (geteuid() != 0) {
        test_skip("needs root (a private mount namespace for /etc/hosts)");
    }
    if (access("/etc/hosts", F_OK) != 0) {
        test_skip("no /etc/hosts to bind a test copy over");
    }
    char hosts[] = "/tmp/dfc-hosts-XXXXXX";
    int fd = mkstemp(hosts);
    assert_true(fd >= 0);
    close(fd);
    assert_true(write_hosts(hosts, "127.0.0.50 sched.dfc.test"));
    struct stat ns_before, ns_after;
    assert_int_equal(stat("/proc/self/ns/mnt", &ns_before), 0);

    struct follow_case fc = {.hosts = hosts};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, follow_in_own_namespace, &fc), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    unlink(hosts);
    if (fc.failed != NULL) {
        fail_msg("in the thread's own mount namespace: %s", fc.failed);
    }
    /* The test process's namespace is the one it started in. */
    assert_int_equal(stat("/proc/self/ns/mnt", &ns_after), 0);
    assert_true(ns_before.st_ino == ns_after.st_ino && ns_before.st_dev == ns_after.st_dev);
}

/* Every scheduler refuses: a task call tries each once, in the ring's order, and returns
 * UNAVAILABLE naming the last one it tried and the method. */
static void test_failover_tries_each_once(void **state) {
    int held[3];
    int ports[3] = {(int)test_refusing_port(&held[0]), (int)test_refusing_port(&held[1]),
                    (int)test_refusing_port(&held[2])};
    struct addrs a;
    struct dfd_config cfg = config_with(&a, 3, ports);
    struct dfd_sched *s = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_sched_new(&cfg, "127.0.0.1-test", &s, &err), 0);
    const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const char *last = NULL;
    assert_non_null(dfd_sched_pick(s, id, 2, &last));
    Common__V2__PersistentCacheTask *t = NULL;
    int r = dfd_sched_stat_task(s, id, &t, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_UNAVAILABLE);
    bool maybe_arrived = true;
    assert_true(dfd_sched_unreachable(r, &maybe_arrived)); /* a real refusal: away */
    assert_false(maybe_arrived);
    assert_null(t);
    char want[128];
    snprintf(want, sizeof(want), "scheduler %s StatPersistentCacheTask: ", last);
    assert_non_null(strstr(err.msg, want));

    /* Host calls go to every scheduler: all refuse, so the announce fails. */
    Common__V2__Host host = COMMON__V2__HOST__INIT;
    r = dfd_sched_announce_host(s, &host, 1000000000, &err);
    assert_int_equal(dfc_error_to_grpc(r), DFC_GRPC_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "AnnounceHost"));
    dfd_sched_delete_host(s); /* logs, never fails */
    dfd_sched_delete_peer(s, id, "peer");
    dfd_sched_upload_failed(s, id, "peer", "gone");
    dfd_sched_free(s);
    for (int i = 0; i < 3; i++) {
        close(held[i]);
    }
}

/* The one "scheduler unreachable" test: UNAVAILABLE (never got there) and DEADLINE_EXCEEDED
 * (may have got there) are out of reach; answers of a scheduler that was reached are not. */
static void test_unreachable(void **state) {
    (void)state;
    static const struct {
        int err;
        bool unreachable, maybe_arrived;
    } cases[] = {
        {-ECONNREFUSED, true, false},
        {-ECONNRESET, true, false},
        {-EPIPE, true, false},
        {-EAGAIN, true, false},
        {-ETIMEDOUT, true, true},
        {0, false, false},
        {-ENOENT, false, false},
        {-EEXIST, false, false},
        {-EINVAL, false, false},
        {DFC_E_ABORTED, false, false},
        {DFC_E_FAILED_PRECONDITION, false, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool maybe = !cases[i].maybe_arrived;
        assert_int_equal(dfd_sched_unreachable(cases[i].err, &maybe), cases[i].unreachable);
        assert_int_equal(maybe, cases[i].maybe_arrived);
        assert_int_equal(dfd_sched_unreachable(cases[i].err, NULL), cases[i].unreachable);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_stable_and_covering),
        cmocka_unit_test(test_ring_removal_moves_only_its_tasks),
        cmocka_unit_test(test_new_refuses_empty_and_dedups),
        cmocka_unit_test(test_scheduler_ips),
        cmocka_unit_test(test_scheduler_ip_follows_its_name),
        cmocka_unit_test(test_failover_tries_each_once),
        cmocka_unit_test(test_unreachable),
    };
    return test_run_group(tests, NULL, NULL);
}
