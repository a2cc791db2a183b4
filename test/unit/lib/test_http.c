/* Tests for lib/src/http.c against a real endpoint on 127.0.0.1: the three routes, 404 and 405,
 * readiness from the callback, port 0 (off), bad addresses, a taken port, the connection limit
 * and the header deadline, the per-address limit, slow clients against probes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/http.h"
#include "dfc/metrics.h"
#include "http_scrape.h"
#include "test_support.h"

struct ready_state {
    atomic_int ready; /* 1 ready, 0 not */
};

static int ready_cb(void *arg, char *why, size_t size) {
    struct ready_state *r = arg;
    if (atomic_load(&r->ready)) {
        return 0;
    }
    snprintf(why, size, "store dir `/x` is not writable");
    return -EROFS;
}

static void test_routes(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    struct dfc_metric *c;
    assert_int_equal(dfc_metrics_new(&m), 0);
    struct dfc_metric_desc d = {.name = "t_total", .help = "h", .type = DFC_METRIC_COUNTER};
    assert_int_equal(dfc_metrics_add(m, &d, &c, &err), 0);
    dfc_metric_inc(c, 0, 41);

    struct ready_state rs = {1};
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.ip = "127.0.0.1",
                              .port = port,
                              .metrics = m,
                              .ready = ready_cb,
                              .ready_arg = &rs,
                              .name = "metrics.server"};
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    assert_non_null(h);

    char *body;
    assert_int_equal(test_http_get(port, "/metrics", &body), 200);
    char *flat;
    assert_int_equal(test_prom_parse(body, &flat), 0);
    assert_true(test_prom_value(flat, "t_total{}") == 41);
    free(flat);
    free(body);
    dfc_metric_inc(c, 0, 1);
    assert_int_equal(test_http_get(port, "/metrics", &body), 200);
    assert_non_null(strstr(body, "t_total 42\n"));
    free(body);

    assert_int_equal(test_http_get(port, "/healthz", &body), 200);
    assert_string_equal(body, "ok\n");
    free(body);
    assert_int_equal(test_http_get(port, "/readyz", &body), 200);
    free(body);
    atomic_store(&rs.ready, 0);
    assert_int_equal(test_http_get(port, "/readyz", &body), 503);
    assert_string_equal(body, "not ready: store dir `/x` is not writable\n");
    free(body);
    assert_int_equal(test_http_get(port, "/healthz", &body), 200); /* alive all the same */
    free(body);
    atomic_store(&rs.ready, 1);
    assert_int_equal(test_http_get(port, "/readyz", &body), 200);
    free(body);

    assert_int_equal(test_http_get(port, "/nope", &body), 404);
    free(body);
    assert_int_equal(test_http_get(port, "/metrics/", &body), 404);
    free(body);
    assert_int_equal(test_http_request("127.0.0.1", port, "POST", "/metrics", &body), 405);
    free(body);
    assert_int_equal(test_http_request("127.0.0.1", port, "DELETE", "/readyz", &body), 405);
    free(body);
    assert_int_equal(test_http_request("127.0.0.1", port, "HEAD", "/healthz", &body), 200);
    assert_string_equal(body, "");
    free(body);

    /* A second endpoint on the same port cannot bind, and says where. */
    struct dfc_http *h2;
    assert_true(dfc_http_start(&o, &h2, &err) < 0);
    assert_null(h2);
    char want[64];
    snprintf(want, sizeof(want), "metrics.server: cannot listen on 127.0.0.1:%u", port);
    assert_non_null(strstr(err.msg, want));

    dfc_http_stop(h);
    assert_true(test_http_get(port, "/healthz", &body) < 0); /* gone */
    free(body);
    dfc_metrics_free(m);
}

/* Without metrics, /metrics is not a route; without a callback, always ready. */
static void test_health_only(void **state) {
    struct dfc_error err;
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.port = port}; /* ip NULL: 127.0.0.1 */
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    char *body;
    assert_int_equal(test_http_get(port, "/metrics", &body), 404);
    free(body);
    assert_int_equal(test_http_get(port, "/readyz", &body), 200);
    free(body);
    dfc_http_stop(h);
}

static void test_off_and_bad(void **state) {
    struct dfc_error err;
    struct dfc_http *h = (struct dfc_http *)&err; /* must be reset */
    struct dfc_http_opts off = {.port = 0};
    assert_int_equal(dfc_http_start(&off, &h, &err), 0);
    assert_null(h);
    dfc_http_stop(NULL);
    struct dfc_http_opts bad = {.ip = "localhost", .port = 1234, .name = "health.server"};
    assert_int_equal(dfc_http_start(&bad, &h, &err), -EINVAL);
    assert_string_equal(err.msg, "health.server: `localhost` is not an IP address");
    struct dfc_http_opts big = {.port = 70000, .name = "health.server"};
    assert_int_equal(dfc_http_start(&big, &h, &err), -EINVAL);
    assert_string_equal(err.msg, "health.server: port 70000 is out of range");
}

static int connect_port(unsigned port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* Reads an answer from fd within timeout_ms; whether it is a 200. */
static bool answered_200(int fd, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1) {
        return false;
    }
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0) {
        return false;
    }
    buf[n] = '\0';
    return strstr(buf, " 200 ") != NULL && strstr(buf, "Connection: close") != NULL;
}

/* Connections whose request never ends do not hold the slots: a further request is answered at
 * once (before, it waited until the idle ones timed out), and the unfinished ones are closed
 * header_timeout after their accept although they trickle a byte well within the idle
 * timeout. */
static void test_limits(void **state) {
    struct dfc_error err;
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.port = port,
                              .max_conns = 2,
                              .max_conns_per_ip = 2,
                              .timeout_s = 2,
                              .header_timeout_ms = 800};
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = connect_port(port);
        assert_int_equal(write(fds[i], "GET", 3), 3); /* a request that never ends */
    }
    usleep(100000); /* let the endpoint accept both */
    double t0 = test_now_ms();
    int third = connect_port(port);
    const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    assert_int_equal(write(third, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
    assert_true(answered_200(third, 1000));
    close(third);
    /* Trickling a byte every 100 ms does not keep them open past the deadline. */
    bool all_closed = false;
    while (!all_closed && test_now_ms() - t0 < 3000) {
        all_closed = true;
        for (int i = 0; i < 2; i++) {
            if (!test_closed_by_peer(fds[i])) {
                (void)send(fds[i], " ", 1, MSG_NOSIGNAL);
                all_closed = false;
            }
        }
        usleep(100000);
    }
    assert_true(all_closed);
    close(fds[0]);
    close(fds[1]);
    dfc_http_stop(h);
}

/* A connection to 127.0.0.1:port from the local address from (127.0.0.0/8: any works). */
static int connect_from(const char *from, unsigned port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in b = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, from, &b.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* One peer (127.0.0.2) trickling requests that never end, a byte well within the idle timeout
 * each time, on as many connections as the endpoint serves: it holds only its share of them,
 * and a probe from another address (127.0.0.1, the kubelet) is still answered. Before the
 * per-address limit the trickler held every slot for as long as it liked. */
static void test_one_address_cannot_take_every_slot(void **state) {
    struct dfc_error err;
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.port = port, .max_conns = 4, .timeout_s = 3};
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    enum { N = 4 };
    int slow[N];
    for (int i = 0; i < N; i++) {
        slow[i] = connect_from("127.0.0.2", port);
        assert_int_equal(write(slow[i], "G", 1), 1);
    }
    usleep(200000); /* let the endpoint accept them */
    int probe = connect_from("127.0.0.1", port);
    const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    assert_int_equal(write(probe, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
    /* The trickler keeps every connection it still has busy, one byte per 500 ms, while the
     * probe waits (a generous deadline: 20 s, seven idle timeouts). */
    int answered = 0;
    for (int round = 0; round < 40 && answered == 0; round++) {
        for (int i = 0; i < N; i++) {
            if (slow[i] >= 0 && send(slow[i], "E", 1, MSG_NOSIGNAL) != 1) {
                close(slow[i]); /* closed by the endpoint: over the address's share */
                slow[i] = -1;
            }
        }
        struct pollfd p = {.fd = probe, .events = POLLIN};
        answered = poll(&p, 1, 500);
    }
    assert_int_equal(answered, 1);
    char buf[256];
    ssize_t n = read(probe, buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, " 200 "));
    close(probe);
    for (int i = 0; i < N; i++) {
        if (slow[i] >= 0) {
            close(slow[i]);
        }
    }
    dfc_http_stop(h);
}

/* Slowloris: 40 connections from five addresses (eight from the probe's own) send their request
 * a byte at a time and never finish it. Every probe is still answered within a second, and
 * every slow connection is closed within the header deadline. Before, they held all 32 slots
 * (a quarter each for four addresses) and the probes waited in the listen backlog. */
static void test_slow_clients_cannot_starve_probes(void **state) {
    struct dfc_error err;
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.port = port, .header_timeout_ms = 1000};
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    enum { ADDRS = 5, PER = 8, N = ADDRS * PER };
    static const char *const from[ADDRS] = {"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4",
                                            "127.0.0.5"};
    int slow[N];
    for (int i = 0; i < N; i++) {
        slow[i] = connect_from(from[i % ADDRS], port);
        assert_int_equal(write(slow[i], "G", 1), 1);
    }
    usleep(200000);
    const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    for (int probe = 0; probe < 5; probe++) {
        for (int i = 0; i < N; i++) {
            (void)send(slow[i], "E", 1, MSG_NOSIGNAL);
        }
        int fd = connect_from("127.0.0.1", port);
        assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
        assert_true(answered_200(fd, 1000));
        close(fd);
        usleep(200000);
    }
    /* By now (1.2 s and more after they connected) every slow one is closed. */
    usleep(300000);
    for (int i = 0; i < N; i++) {
        assert_true(test_closed_by_peer(slow[i]));
        close(slow[i]);
    }
    dfc_http_stop(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_health_only),
        cmocka_unit_test(test_off_and_bad),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_one_address_cannot_take_every_slot),
        cmocka_unit_test(test_slow_clients_cannot_starve_probes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
