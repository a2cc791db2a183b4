/* Tests for lib/src/http.c against a real endpoint on 127.0.0.1: the three routes, 404 and 405,
 * readiness from the callback, port 0 (off), bad addresses, a taken port, the connection limit
 * and the idle timeout, the per-address limit. */
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

static bool fd_closed(void *arg) {
    return test_closed_by_peer(*(int *)arg);
}

static int connect_port(unsigned port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* max_conns idle connections hold every slot: a further request waits (libmicrohttpd stops
 * accepting at the limit) and is answered only once the idle ones are closed by the timeout. */
static void test_limits(void **state) {
    struct dfc_error err;
    unsigned port = test_free_port();
    struct dfc_http_opts o = {.port = port, .max_conns = 2, .max_conns_per_ip = 2, .timeout_s = 2};
    struct dfc_http *h;
    assert_int_equal(dfc_http_start(&o, &h, &err), 0);
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = connect_port(port);
        assert_int_equal(write(fds[i], "GET", 3), 3); /* a request that never ends */
    }
    usleep(100000); /* let the daemon accept both */
    int third = connect_port(port);
    const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    assert_int_equal(write(third, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
    struct pollfd p = {.fd = third, .events = POLLIN};
    int ready = poll(&p, 1, 300);
    /* Conclusive only while both idle connections are still open (they hold the slots). */
    if (!test_closed_by_peer(fds[0]) && !test_closed_by_peer(fds[1])) {
        assert_int_equal(ready, 0);
    }
    /* The idle ones are closed by the timeout (a generous deadline, not a duration), and the
     * waiting request is answered. */
    assert_true(test_wait_for(fd_closed, &fds[0], 20000));
    assert_true(test_wait_for(fd_closed, &fds[1], 20000));
    p.revents = 0;
    assert_int_equal(poll(&p, 1, 20000), 1);
    char buf[256];
    ssize_t n = read(third, buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, " 200 "));
    close(third);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_health_only),
        cmocka_unit_test(test_off_and_bad),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_one_address_cannot_take_every_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
