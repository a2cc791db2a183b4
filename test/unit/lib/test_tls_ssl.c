/*
 * Tests for lib/src/tls_ssl.c over real TCP sockets on 127.0.0.1 with certificates made by
 * test/support/make-certs.sh: bytes both ways, the peer's SAN identity (IPs and URIs) on both
 * sides, a server checked by DNS name, a handshake with a silent peer ending at its deadline
 * with the peer's address, files that do not load refused at start, and rotation: a half-done
 * one (new key, old certificate) keeps the old pair with a warning, the finished one is taken
 * on the next handshake, and a connection made before it still works after it; the options of
 * a client of an outside service (the system's roots, no verification, reads of what arrived,
 * the idle check, files named by their option).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/tls_ssl.h"
#include "test_support.h"

#define SEC INT64_C(1000000000)

static char certs[256];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fail_msg("command failed: %s", cmd);
    }
}

static int group_setup(void **state) {
    (void)state;
    test_mkdtemp(certs, sizeof(certs), "tls-ssl-certs");
    sh("bash %s ca %s/ca", MAKE_CERTS, certs);
    sh("bash %s leaf %s/ca %s/a 'IP:127.0.0.1,IP:::1,URI:dragonfly://host/a,DNS:node-a.test'",
       MAKE_CERTS, certs, certs);
    sh("bash %s leaf %s/ca %s/b 'IP:127.0.0.1,URI:dragonfly://host/b'", MAKE_CERTS, certs, certs);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    test_rmtree(certs);
    return 0;
}

static char log_buf[16384];
static size_t log_len;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_sink(int level, const char *line, size_t len, void *arg) {
    (void)level;
    (void)arg;
    pthread_mutex_lock(&log_mu);
    if (log_len + len < sizeof(log_buf)) {
        memcpy(log_buf + log_len, line, len);
        log_len += len;
        log_buf[log_len] = '\0';
    }
    pthread_mutex_unlock(&log_mu);
}

/* A context from dir's ca.crt, tls.crt and tls.key. */
static struct dfc_tls_ctx *ctx(const char *dir, bool server, int64_t recheck) {
    char ca[512], crt[512], key[512];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
    snprintf(key, sizeof(key), "%s/tls.key", dir);
    struct dfc_tls_files f = {.ca_cert = ca, .cert = crt, .key = key};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    if (dfc_tls_ctx_new(DFC_TLS_MUTUAL, &f, server, recheck, &c, &err) != 0) {
        fail_msg("%s: %s", dir, err.msg);
    }
    assert_int_equal(dfc_tls_ctx_policy(c), DFC_TLS_MUTUAL);
    return c;
}

static char *cert_dir(const char *name) {
    static char buf[4][400];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 400, "%s/%s", certs, name);
    return b;
}

/* A listener and a connected pair of non-blocking sockets on 127.0.0.1. */
struct pair {
    int lfd, cfd, sfd;
    unsigned port;
};

static void pair_open(struct pair *p, bool accept_it) {
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(p->lfd, 4), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(p->lfd, (struct sockaddr *)&a, &len), 0);
    p->port = ntohs(a.sin_port);
    p->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int r = connect(p->cfd, (struct sockaddr *)&a, sizeof(a));
    assert_true(r == 0 || errno == EINPROGRESS);
    p->sfd = accept_it ? accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) : -1;
    assert_true(!accept_it || p->sfd >= 0);
}

static void pair_close(struct pair *p) {
    close(p->cfd);
    if (p->sfd >= 0) {
        close(p->sfd);
    }
    close(p->lfd);
}

struct server_side {
    struct dfc_tls_ctx *c;
    int fd;
    struct dfc_tls_conn *t;
    int r;
    struct dfc_error err;
};

static void *server_main(void *arg) {
    struct server_side *s = arg;
    s->r =
        dfc_tls_accept(s->c, s->fd, "127.0.0.1:client", dfc_mono_ns() + 10 * SEC, &s->t, &s->err);
    return NULL;
}

/* Handshakes over p: server context sc, client context cc dialling host. */
static int handshake(struct pair *p, struct dfc_tls_ctx *sc, struct dfc_tls_ctx *cc,
                     const char *host, struct dfc_tls_conn **st, struct dfc_tls_conn **ct,
                     struct dfc_error *err) {
    struct server_side s = {.c = sc, .fd = p->sfd};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, server_main, &s), 0);
    int r = dfc_tls_connect(cc, p->cfd, host, p->port, dfc_mono_ns() + 10 * SEC, ct, err);
    pthread_join(th, NULL);
    if (r == 0 && s.r != 0) {
        *err = s.err;
        r = s.r;
        dfc_tls_conn_free(*ct);
    } else if (r != 0) {
        dfc_tls_conn_free(s.t);
    }
    *st = s.t;
    return r;
}

struct writer {
    struct dfc_tls_conn *t;
    const uint8_t *buf;
    size_t n;
    int r;
};

static void *writer_main(void *arg) {
    struct writer *w = arg;
    w->r = dfc_tls_write(w->t, w->buf, w->n, dfc_mono_ns() + 20 * SEC, NULL);
    return NULL;
}

static void test_bytes_and_identities(void **state) {
    (void)state;
    struct dfc_tls_ctx *sc = ctx(cert_dir("a"), true, SEC);
    struct dfc_tls_ctx *cc = ctx(cert_dir("b"), false, SEC);
    struct pair p;
    pair_open(&p, true);
    struct dfc_tls_conn *st = NULL, *ct = NULL;
    struct dfc_error err = {0};
    if (handshake(&p, sc, cc, "127.0.0.1", &st, &ct, &err) != 0) {
        fail_msg("%s", err.msg);
    }
    struct dfc_tls_identity id;
    dfc_tls_conn_identity(ct, &id); /* the server's: a */
    assert_true(id.has_cert);
    assert_int_equal(id.n_ips, 2);
    assert_string_equal(id.ips[0], "127.0.0.1");
    assert_string_equal(id.ips[1], "::1");
    assert_int_equal(id.n_uris, 1);
    assert_string_equal(id.uris[0], "dragonfly://host/a");
    dfc_tls_conn_identity(st, &id); /* the client's: b */
    assert_true(id.has_cert);
    assert_int_equal(id.n_ips, 1);
    assert_string_equal(id.uris[0], "dragonfly://host/b");

    /* 3 MiB one way (more than the socket buffers hold: the writer waits for the reader),
     * then an answer the other way. */
    size_t n = 3 << 20;
    uint8_t *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++) {
        out[i] = (uint8_t)(i * 7 + 3);
    }
    struct writer w = {.t = st, .buf = out, .n = n};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
    size_t got = 0;
    assert_int_equal(dfc_tls_read(ct, in, n, dfc_mono_ns() + 20 * SEC, &got, &err), 0);
    assert_int_equal(got, n);
    assert_memory_equal(in, out, n);
    pthread_join(th, NULL);
    assert_int_equal(w.r, 0);
    free(out);
    free(in);

    /* A read past what was sent times out at its deadline. */
    uint8_t b[4];
    int64_t t0 = dfc_mono_ns();
    assert_int_equal(dfc_tls_read(ct, b, sizeof(b), t0 + SEC / 5, &got, &err), -ETIMEDOUT);
    assert_true(dfc_mono_ns() - t0 >= SEC / 5);
    dfc_tls_conn_free(st);
    dfc_tls_conn_free(ct);
    pair_close(&p);
    dfc_tls_ctx_free(sc);
    dfc_tls_ctx_free(cc);
}

static void test_dns_name(void **state) {
    (void)state;
    struct dfc_tls_ctx *sc = ctx(cert_dir("a"), true, SEC);
    struct dfc_tls_ctx *cc = ctx(cert_dir("b"), false, SEC);
    const char *names[] = {"node-a.test", "node-b.test"};
    for (int i = 0; i < 2; i++) {
        struct pair p;
        pair_open(&p, true);
        struct dfc_tls_conn *st = NULL, *ct = NULL;
        struct dfc_error err = {0};
        int r = handshake(&p, sc, cc, names[i], &st, &ct, &err);
        if (i == 0) {
            assert_int_equal(r, 0);
            dfc_tls_conn_free(st);
            dfc_tls_conn_free(ct);
        } else {
            assert_int_equal(r, -ECONNABORTED);
            if (strstr(err.msg, "(hostname mismatch)") == NULL) {
                fail_msg("%s", err.msg);
            }
        }
        pair_close(&p);
    }
    dfc_tls_ctx_free(sc);
    dfc_tls_ctx_free(cc);
}

/* A server that never answers: the client's handshake ends at its deadline, naming it. */
static void test_silent_server(void **state) {
    (void)state;
    struct dfc_tls_ctx *cc = ctx(cert_dir("b"), false, SEC);
    struct pair p;
    pair_open(&p, false);
    struct dfc_tls_conn *ct = NULL;
    struct dfc_error err = {0};
    int64_t t0 = dfc_mono_ns();
    assert_int_equal(dfc_tls_connect(cc, p.cfd, "127.0.0.1", p.port, t0 + SEC / 4, &ct, &err),
                     -ETIMEDOUT);
    assert_true(dfc_mono_ns() - t0 >= SEC / 4);
    char want[64];
    snprintf(want, sizeof(want), "TLS handshake with 127.0.0.1:%u failed", p.port);
    assert_non_null(strstr(err.msg, want));
    pair_close(&p);
    dfc_tls_ctx_free(cc);
}

static void test_rotation(void **state) {
    (void)state;
    char live[300];
    snprintf(live, sizeof(live), "%s/live", certs);
    sh("rm -rf %s && mkdir -p %s && cp %s/a/* %s/", live, live, certs, live);
    log_len = 0;
    log_buf[0] = '\0';
    dfc_log_set_sink(log_sink, NULL);
    struct dfc_tls_ctx *sc = ctx(live, true, 0);
    struct dfc_tls_ctx *cc = ctx(cert_dir("b"), false, SEC);
    assert_int_equal(dfc_tls_ctx_generation(sc), 1);
    struct pair p0;
    pair_open(&p0, true);
    struct dfc_tls_conn *st0 = NULL, *ct0 = NULL;
    struct dfc_error err = {0};
    assert_int_equal(handshake(&p0, sc, cc, "127.0.0.1", &st0, &ct0, &err), 0);

    /* Half a rotation: b's key with a's certificate. Refused with a warning; a kept. */
    sh("cp %s/b/tls.key %s/tls.key.new && mv %s/tls.key.new %s/tls.key", certs, live, live, live);
    struct pair p1;
    pair_open(&p1, true);
    struct dfc_tls_conn *st = NULL, *ct = NULL;
    assert_int_equal(handshake(&p1, sc, cc, "127.0.0.1", &st, &ct, &err), 0);
    struct dfc_tls_identity id;
    dfc_tls_conn_identity(ct, &id);
    assert_string_equal(id.uris[0], "dragonfly://host/a");
    assert_int_equal(dfc_tls_ctx_generation(sc), 1);
    assert_non_null(strstr(log_buf, "event=tls.reload_failed"));
    dfc_tls_conn_free(st);
    dfc_tls_conn_free(ct);
    pair_close(&p1);

    /* The rest of it: b's certificate. The next handshake shows b. */
    sh("cp %s/b/tls.crt %s/tls.crt.new && mv %s/tls.crt.new %s/tls.crt", certs, live, live, live);
    struct pair p2;
    pair_open(&p2, true);
    assert_int_equal(handshake(&p2, sc, cc, "127.0.0.1", &st, &ct, &err), 0);
    dfc_tls_conn_identity(ct, &id);
    assert_string_equal(id.uris[0], "dragonfly://host/b");
    assert_int_equal(dfc_tls_ctx_generation(sc), 2);
    assert_non_null(strstr(log_buf, "event=tls.reloaded"));
    dfc_tls_conn_free(st);
    dfc_tls_conn_free(ct);
    pair_close(&p2);

    /* The connection from before the rotation still carries bytes, after its context went. */
    dfc_tls_ctx_free(sc);
    const char msg[] = "still here";
    char got[sizeof(msg)];
    assert_int_equal(dfc_tls_write(st0, msg, sizeof(msg), dfc_mono_ns() + 5 * SEC, &err), 0);
    assert_int_equal(dfc_tls_read(ct0, got, sizeof(got), dfc_mono_ns() + 5 * SEC, NULL, &err), 0);
    assert_string_equal(got, msg);
    dfc_tls_shutdown(st0);
    /* The peer's close_notify reads as the end of the stream. */
    assert_int_equal(dfc_tls_read(ct0, got, 1, dfc_mono_ns() + 5 * SEC, NULL, &err), -EPROTO);
    dfc_tls_conn_free(st0);
    dfc_tls_conn_free(ct0);
    pair_close(&p0);
    dfc_tls_ctx_free(cc);
    dfc_log_set_sink(NULL, NULL);
}

static void test_bad_files(void **state) {
    (void)state;
    char ca[400], crt[400], key[400];
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", certs);
    snprintf(crt, sizeof(crt), "%s/a/tls.crt", certs);
    snprintf(key, sizeof(key), "%s/b/tls.key", certs); /* not the certificate's key */
    struct dfc_tls_files f = {.ca_cert = ca, .cert = crt, .key = key};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &f, true, 0, &c, &err), -EINVAL);
    if (strstr(err.msg, "key values mismatch") == NULL) {
        fail_msg("%s", err.msg);
    }
    assert_non_null(strstr(err.msg, key));
    f.key = "/nonexistent/tls.key";
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &f, true, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "/nonexistent/tls.key"));
    f.key = crt; /* a certificate is no key */
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &f, true, 0, &c, &err), -EINVAL);
    f.key = "";
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &f, true, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "key is required"));
    f.ca_cert = "/nonexistent/ca.crt";
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_SERVER_AUTH, &f, false, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "/nonexistent/ca.crt"));
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_OFF, &f, true, 0, &c, &err), -EINVAL);
}

/* A server-auth server with a's files. */
static struct dfc_tls_ctx *server_auth_ctx(void) {
    char crt[512], key[512];
    snprintf(crt, sizeof(crt), "%s/tls.crt", cert_dir("a"));
    snprintf(key, sizeof(key), "%s/tls.key", cert_dir("a"));
    struct dfc_tls_files f = {.cert = crt, .key = key};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    if (dfc_tls_ctx_new(DFC_TLS_SERVER_AUTH, &f, true, SEC, &c, &err) != 0) {
        fail_msg("%s", err.msg);
    }
    return c;
}

/* A client as the scheduler's Redis client makes one (dfc_tls_ctx_opts): no CA file, so the
 * system's roots, which do not know the test CA: refused; with skip_verify it connects. Then
 * reads of what has arrived, and the idle check before and after stray data. A file that does
 * not load is named by its option. */
static void test_options_for_an_outside_service(void **state) {
    (void)state;
    struct dfc_tls_ctx *sc = server_auth_ctx();
    struct dfc_tls_files none = {.ca_cert = ""};
    struct dfc_tls_ctx_opts o = {.tls12 = true, .system_roots = true};
    struct dfc_tls_ctx *strict = NULL, *cc = NULL;
    struct dfc_error err = {0};
    assert_int_equal(
        dfc_tls_ctx_new_opts(DFC_TLS_SERVER_AUTH, &none, false, SEC, &o, &strict, &err), 0);
    o.skip_verify = true;
    assert_int_equal(dfc_tls_ctx_new_opts(DFC_TLS_SERVER_AUTH, &none, false, SEC, &o, &cc, &err),
                     0);
    struct pair p;
    struct dfc_tls_conn *st = NULL, *ct = NULL;
    pair_open(&p, true);
    assert_int_equal(handshake(&p, sc, strict, "127.0.0.1", &st, &ct, &err), -ECONNABORTED);
    assert_non_null(strstr(err.msg, "certificate verify failed"));
    pair_close(&p);
    pair_open(&p, true);
    if (handshake(&p, sc, cc, "127.0.0.1", &st, &ct, &err) != 0) {
        fail_msg("%s", err.msg);
    }
    assert_true(dfc_tls_conn_idle_ok(ct));
    int64_t deadline = dfc_mono_ns() + 10 * SEC;
    assert_int_equal(dfc_tls_write(st, "hello", 5, deadline, &err), 0);
    char b[64];
    size_t got = 0;
    assert_int_equal(dfc_tls_read_some(ct, b, sizeof(b), deadline, &got, &err), 0);
    assert_int_equal(got, 5);
    assert_memory_equal(b, "hello", 5);
    assert_true(dfc_tls_conn_idle_ok(ct));
    assert_int_equal(dfc_tls_write(st, "x", 1, deadline, &err), 0);
    struct pollfd pf = {.fd = p.cfd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 5000), 1);
    assert_false(dfc_tls_conn_idle_ok(ct)); /* data nobody asked for */
    dfc_tls_conn_free(st);
    dfc_tls_conn_free(ct);
    pair_close(&p);

    char crt[512];
    snprintf(crt, sizeof(crt), "%s/tls.crt", cert_dir("b"));
    struct dfc_tls_files bad = {.cert = crt, .key = crt}; /* a certificate is no key */
    struct dfc_tls_ctx *c = NULL;
    o.option_prefix = "test.tls.";
    assert_int_equal(dfc_tls_ctx_new_opts(DFC_TLS_MUTUAL, &bad, false, SEC, &o, &c, &err), -EINVAL);
    char want[600];
    snprintf(want, sizeof(want), "test.tls.key `%s`: ", crt);
    if (strstr(err.msg, want) == NULL) {
        fail_msg("%s", err.msg);
    }
    dfc_tls_ctx_free(strict);
    dfc_tls_ctx_free(cc);
    dfc_tls_ctx_free(sc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_and_identities),
        cmocka_unit_test(test_dns_name),
        cmocka_unit_test(test_silent_server),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_options_for_an_outside_service),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
