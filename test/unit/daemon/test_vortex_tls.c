/*
 * Tests for Vortex over TLS (vortex_server.c and vortex_client.c with dfc/tls_ssl.h): a real
 * store, a real server on 127.0.0.1:0 and the real client, with certificates made by
 * test/support/make-certs.sh (openssl). Mutual TLS serves every piece byte-identical; a client
 * without a certificate is refused under mutual (and served under server-auth), so is a plain
 * TCP read; a certificate from another CA, an expired one, and a server certificate that does
 * not name the address dialled are refused on either side, with an error (client) or a log line
 * (server) that names the peer and OpenSSL's reason; the server's files replaced during a
 * transfer: the piece in flight completes, and a connection after the change gets the new
 * certificate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/tls_ssl.h"
#include "p2p/vortex_client.h"
#include "p2p/vortex_server.h"
#include "storage/storage.h"
#include "test_support.h"

#define MiB     ((uint64_t)1 << 20)
#define SEC     INT64_C(1000000000)
#define TIMEOUT (20 * SEC)
#define CONTENT (2 * 4 * MiB + 12345) /* three pieces of 4 MiB, the last one short */

/* Certificates, made once for the whole run under certs/ of a temp dir. */
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

/* A leaf named name signed by CA ca ("ca" or "ca2"), SAN san, more options. */
static void leaf(const char *ca, const char *name, const char *san, const char *opts) {
    sh("bash %s leaf %s/%s %s/%s '%s' %s", MAKE_CERTS, certs, ca, certs, name, san, opts);
}

static int group_setup(void **state) {
    (void)state;
    test_mkdtemp(certs, sizeof(certs), "vortex-tls-certs");
    sh("bash %s ca %s/ca && bash %s ca %s/ca2", MAKE_CERTS, certs, MAKE_CERTS, certs);
    leaf("ca", "server", "IP:127.0.0.1,URI:dragonfly://server-1", "");
    leaf("ca", "server2", "IP:127.0.0.1,URI:dragonfly://server-2", "");
    leaf("ca", "client", "IP:127.0.0.1,URI:dragonfly://client-1", "");
    leaf("ca", "server-expired", "IP:127.0.0.1", "--expired");
    leaf("ca", "client-expired", "IP:127.0.0.1", "--expired");
    leaf("ca", "server-other-ip", "IP:127.0.0.9", "");
    leaf("ca2", "server-foreign", "IP:127.0.0.1", "");
    leaf("ca2", "client-foreign", "IP:127.0.0.1", "");
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    test_rmtree(certs);
    return 0;
}

/* ---- captured log lines ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[65536];
static size_t log_len;

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

static bool logged(void *needle) {
    pthread_mutex_lock(&log_mu);
    bool r = strstr(log_buf, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return r;
}

/* ---- fixture: a store with one task, a TLS server ---- */

struct fx {
    char dir[256];
    char store[300];
    struct dfd_storage *s;
    uint8_t *content;
    struct dfd_task_meta task;
    struct dfd_piece_meta *pieces;
    size_t npieces;
    struct dfc_tls_ctx *stls, *ctls;
    struct dfd_vortex_server *v;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "vortex-tls");
    snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    f->content = malloc(CONTENT);
    uint32_t x = 4242;
    for (uint64_t i = 0; i < CONTENT; i++) {
        x = x * 1103515245 + 12345;
        f->content[i] = (uint8_t)(x >> 16);
    }
    char src[400];
    snprintf(src, sizeof(src), "%s/src", f->dir);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->content, CONTENT), (ssize_t)CONTENT);
    struct dfd_import_params p = {.piece_length = 4 * MiB,
                                  .replica_count = 1,
                                  .ttl_ns = 3600 * SEC,
                                  .persistent = true,
                                  .expected_length = -1};
    bool existed = false;
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, INT64_C(1700000000) * SEC, NULL, NULL,
                                           &f->task, &existed, NULL, &err),
                     0);
    close(fd);
    assert_int_equal(dfd_storage_pieces(f->s, f->task.id, &f->pieces, &f->npieces, &err), 0);
    assert_int_equal(f->npieces, 3);
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_buf[0] = '\0';
    pthread_mutex_unlock(&log_mu);
    dfc_log_set_sink(log_sink, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfd_vortex_server_stop(f->v);
    dfc_tls_ctx_free(f->stls);
    dfc_tls_ctx_free(f->ctls);
    dfc_log_set_sink(NULL, NULL);
    free(f->pieces);
    dfd_task_meta_done(&f->task);
    dfd_storage_close(f->s);
    free(f->content);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A context from the files in dir (ca.crt; tls.crt and tls.key for a server or under mutual). */
static struct dfc_tls_ctx *ctx_dir(const char *dir, enum dfc_tls_policy p, bool server,
                                   int64_t recheck_ns) {
    char ca[512], crt[512], key[512];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
    snprintf(key, sizeof(key), "%s/tls.key", dir);
    bool own = server || p == DFC_TLS_MUTUAL;
    struct dfc_tls_files files = {.ca_cert = ca, .cert = own ? crt : "", .key = own ? key : ""};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    int r = dfc_tls_ctx_new(p, &files, server, recheck_ns, &c, &err);
    if (r != 0) {
        fail_msg("dfc_tls_ctx_new(%s): %s", dir, err.msg);
    }
    return c;
}

static struct dfc_tls_ctx *ctx(const char *name, enum dfc_tls_policy p, bool server) {
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/%s", certs, name);
    return ctx_dir(dir, p, server, DFC_TLS_RECHECK_NS);
}

static void start_timeout(struct fx *f, struct dfc_tls_ctx *stls, int64_t request_timeout) {
    f->stls = stls;
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .port = 0,
                                       .max_conns = 16,
                                       .request_timeout_ns = request_timeout,
                                       .answer_timeout_ns = TIMEOUT,
                                       .parent_id = "host-1",
                                       .tls = stls};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &f->v, &err), 0);
}

static void start_with(struct fx *f, struct dfc_tls_ctx *stls) {
    start_timeout(f, stls, 5 * SEC);
}

static int fetch(struct fx *f, struct dfc_tls_ctx *ctls, uint32_t n, uint8_t *buf,
                 struct dfc_error *err) {
    const struct dfd_piece_meta *pm = &f->pieces[n];
    return dfd_vortex_fetch(ctls, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id, n,
                            pm->offset, pm->length, buf, TIMEOUT, NULL, err);
}

/* Every piece through ctls, byte-identical. */
static void fetch_all(struct fx *f, struct dfc_tls_ctx *ctls) {
    uint8_t *buf = malloc(4 * MiB);
    for (uint32_t n = 0; n < f->npieces; n++) {
        struct dfc_error err = {0};
        int r = fetch(f, ctls, n, buf, &err);
        if (r != 0) {
            fail_msg("piece %u: %d %s", n, r, err.msg);
        }
        assert_memory_equal(buf, f->content + f->pieces[n].offset, f->pieces[n].length);
    }
    free(buf);
}

/* The fetch of piece 0 through ctls fails; its message holds want (and the peer's address). */
static void refused(struct fx *f, struct dfc_tls_ctx *ctls, const char *want) {
    uint8_t *buf = malloc(4 * MiB);
    struct dfc_error err = {0};
    int r = fetch(f, ctls, 0, buf, &err);
    free(buf);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", dfd_vortex_server_port(f->v));
    if (r >= 0 || strstr(err.msg, want) == NULL || strstr(err.msg, addr) == NULL) {
        fail_msg("want a failure naming `%s` and %s, got %d: %s", want, addr, r, err.msg);
    }
}

/* The server logged a refused handshake with the reason want, naming the client's address. */
static void server_refused(const char *want) {
    assert_true(test_wait_for(logged, "event=vortex.tls_refused", 5000));
    if (!test_wait_for(logged, (void *)want, 5000)) {
        fail_msg("no `%s` in the log:\n%s", want, log_buf);
    }
    assert_true(logged("TLS handshake with 127.0.0.1:"));
}

/* ---- tests ---- */

static int copy_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    (void)err;
    memcpy((uint8_t *)arg + at, data, n);
    return 0;
}

static void test_mutual_serves_every_piece(void **state) {
    struct fx *f = *state;
    start_with(f, ctx("server", DFC_TLS_MUTUAL, true));
    f->ctls = ctx("client", DFC_TLS_MUTUAL, false);
    fetch_all(f, f->ctls);
    /* And through a sink, in chunks that divide no piece. */
    uint8_t chunk[1000];
    uint8_t *got = malloc(4 * MiB);
    for (uint32_t n = 0; n < f->npieces; n++) {
        struct dfd_vortex_sink sink = {.arg = got, .write = copy_write};
        struct dfc_error err = {0};
        int r = dfd_vortex_fetch_to(f->ctls, NULL, "127.0.0.1", dfd_vortex_server_port(f->v),
                                    f->task.id, n, f->pieces[n].offset, f->pieces[n].length, &sink,
                                    chunk, sizeof(chunk), TIMEOUT, NULL, &err);
        if (r != 0) {
            fail_msg("piece %u through a sink: %s", n, err.msg);
        }
        assert_memory_equal(got, f->content + f->pieces[n].offset, f->pieces[n].length);
    }
    free(got);
}

static void test_mutual_refuses_a_client_without_a_certificate(void **state) {
    struct fx *f = *state;
    start_with(f, ctx("server", DFC_TLS_MUTUAL, true));
    f->ctls = ctx("client", DFC_TLS_SERVER_AUTH, false); /* the CA only */
    refused(f, f->ctls, "certificate required");
    server_refused("peer did not return a certificate");
    /* A plain TCP read of the TLS port gets nothing either. */
    uint8_t buf[64];
    struct dfc_error err = {0};
    int r = dfd_vortex_fetch(NULL, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id, 0,
                             0, f->pieces[0].length, buf, TIMEOUT, NULL, &err);
    assert_true(r < 0);
}

static void test_server_auth_serves_a_client_without_a_certificate(void **state) {
    struct fx *f = *state;
    start_with(f, ctx("server", DFC_TLS_SERVER_AUTH, true));
    f->ctls = ctx("client", DFC_TLS_SERVER_AUTH, false);
    fetch_all(f, f->ctls);
    /* A client that shows a certificate anyway is served too (none was asked for). */
    struct dfc_tls_ctx *mutual = ctx("client", DFC_TLS_MUTUAL, false);
    fetch_all(f, mutual);
    dfc_tls_ctx_free(mutual);
}

static void test_server_refuses_foreign_and_expired_clients(void **state) {
    struct fx *f = *state;
    start_with(f, ctx("server", DFC_TLS_MUTUAL, true));
    f->ctls = ctx("client-foreign", DFC_TLS_MUTUAL, false);
    /* client-foreign's ca.crt is ca2's: it could not verify our server either; use ca's. */
    dfc_tls_ctx_free(f->ctls);
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/mix", certs);
    sh("mkdir -p %s && cp %s/ca/ca.crt %s/ca.crt && cp %s/client-foreign/tls.* %s/", dir, certs,
       dir, certs, dir);
    f->ctls = ctx_dir(dir, DFC_TLS_MUTUAL, false, DFC_TLS_RECHECK_NS);
    refused(f, f->ctls, "unknown ca");
    server_refused("unable to get local issuer certificate");
    /* A new server: its refusals are logged once per 10 s. */
    dfd_vortex_server_stop(f->v);
    f->v = NULL;
    struct dfc_tls_ctx *stls = f->stls;
    start_with(f, stls);
    dfc_tls_ctx_free(f->ctls);
    f->ctls = ctx("client-expired", DFC_TLS_MUTUAL, false);
    refused(f, f->ctls, "certificate expired");
    server_refused("certificate has expired");
}

static void test_client_refuses_foreign_expired_and_misnamed_servers(void **state) {
    struct fx *f = *state;
    f->ctls = ctx("client", DFC_TLS_MUTUAL, false);
    const char *servers[] = {"server-foreign", "server-expired", "server-other-ip"};
    const char *want[] = {"unable to get local issuer certificate", "certificate has expired",
                          "IP address mismatch"};
    for (int i = 0; i < 3; i++) {
        start_with(f, ctx(servers[i], DFC_TLS_SERVER_AUTH, true));
        char h[128];
        snprintf(h, sizeof(h), "TLS handshake with 127.0.0.1:%u failed",
                 dfd_vortex_server_port(f->v));
        refused(f, f->ctls, h);
        refused(f, f->ctls, want[i]);
        dfd_vortex_server_stop(f->v);
        f->v = NULL;
        dfc_tls_ctx_free(f->stls);
        f->stls = NULL;
    }
}

static bool closed(void *fdp) {
    return test_closed_by_peer(*(int *)fdp);
}

/* A connection that never finishes its handshake (nothing sent, or half a ClientHello) is
 * closed once request_timeout has passed, without a byte of the framing. */
static void test_unfinished_handshake_closed(void **state) {
    struct fx *f = *state;
    start_timeout(f, ctx("server", DFC_TLS_MUTUAL, true), SEC / 2);
    for (int half = 0; half < 2; half++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(dfd_vortex_server_port(f->v)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        if (half) {
            const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc};
            assert_int_equal(send(fd, hello, sizeof(hello), MSG_NOSIGNAL), (ssize_t)sizeof(hello));
        }
        int64_t t0 = dfc_mono_ns();
        assert_true(test_wait_for(closed, &fd, 10000));
        assert_true(dfc_mono_ns() - t0 >= SEC / 2 - SEC / 10);
        close(fd);
    }
    assert_true(test_wait_for(logged, "timed out", 5000));
}

/* ---- rotation ---- */

struct slow {
    struct fx *f;
    uint8_t *got;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, go;
    int r;
    struct dfc_error err;
};

/* Takes the first chunk, then waits for go: the piece stays in flight meanwhile. */
static int slow_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    (void)err;
    struct slow *s = arg;
    memcpy(s->got + at, data, n);
    pthread_mutex_lock(&s->mu);
    s->started = true;
    pthread_cond_broadcast(&s->cv);
    while (!s->go) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void *slow_fetch(void *arg) {
    struct slow *s = arg;
    struct fx *f = s->f;
    struct dfd_vortex_sink sink = {.arg = s, .write = slow_write};
    uint8_t *chunk = malloc(64 * 1024);
    s->r = dfd_vortex_fetch_to(f->ctls, NULL, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id,
                               0, f->pieces[0].offset, f->pieces[0].length, &sink, chunk, 64 * 1024,
                               TIMEOUT, NULL, &s->err);
    free(chunk);
    return NULL;
}

/* The URIs of the certificate the server shows a new connection. */
static void server_uri(struct fx *f, char *out, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(dfd_vortex_server_port(f->v)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
    assert_true(r == 0 || errno == EINPROGRESS);
    struct dfc_tls_conn *t = NULL;
    struct dfc_error err = {0};
    r = dfc_tls_connect(f->ctls, fd, "127.0.0.1", dfd_vortex_server_port(f->v),
                        dfc_mono_ns() + TIMEOUT, &t, &err);
    if (r != 0) {
        fail_msg("connect: %s", err.msg);
    }
    struct dfc_tls_identity id;
    dfc_tls_conn_identity(t, &id);
    assert_true(id.has_cert);
    assert_int_equal(id.n_ips, 1);
    assert_string_equal(id.ips[0], "127.0.0.1");
    assert_int_equal(id.n_uris, 1);
    snprintf(out, size, "%s", id.uris[0]);
    dfc_tls_conn_free(t);
    close(fd);
}

static void test_rotation_mid_transfer(void **state) {
    struct fx *f = *state;
    char live[400];
    snprintf(live, sizeof(live), "%s/live", f->dir);
    sh("mkdir -p %s && cp %s/server/* %s/", live, certs, live);
    /* recheck 0: the files are looked at on every handshake. */
    start_with(f, ctx_dir(live, DFC_TLS_MUTUAL, true, 0));
    f->ctls = ctx("client", DFC_TLS_MUTUAL, false);
    char uri[DFC_TLS_URI_MAX];
    server_uri(f, uri, sizeof(uri));
    assert_string_equal(uri, "dragonfly://server-1");

    struct slow s = {.f = f, .got = malloc(4 * MiB)};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_fetch, &s), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.started) {
        pthread_cond_wait(&s.cv, &s.mu);
    }
    pthread_mutex_unlock(&s.mu);

    /* Rotate as a Secret update does: new files renamed over the old, key then certificate
     * (a handshake in between sees a key that does not match and keeps the old pair). */
    sh("cp %s/server2/tls.key %s/tls.key.new && mv %s/tls.key.new %s/tls.key", certs, live, live,
       live);
    sh("cp %s/server2/tls.crt %s/tls.crt.new && mv %s/tls.crt.new %s/tls.crt", certs, live, live,
       live);
    server_uri(f, uri, sizeof(uri));
    assert_string_equal(uri, "dragonfly://server-2");
    assert_int_equal(dfc_tls_ctx_generation(f->stls), 2);
    /* The rest of the transfer, on new connections, under the new certificate. */
    uint8_t *buf = malloc(4 * MiB);
    for (uint32_t n = 1; n < f->npieces; n++) {
        struct dfc_error err = {0};
        if (fetch(f, f->ctls, n, buf, &err) != 0) {
            fail_msg("piece %u after the rotation: %s", n, err.msg);
        }
        assert_memory_equal(buf, f->content + f->pieces[n].offset, f->pieces[n].length);
    }
    free(buf);

    /* The piece in flight since before the rotation completes. */
    pthread_mutex_lock(&s.mu);
    s.go = true;
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    pthread_join(th, NULL);
    if (s.r != 0) {
        fail_msg("the piece in flight: %s", s.err.msg);
    }
    assert_memory_equal(s.got, f->content, f->pieces[0].length);
    free(s.got);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

/* Files that do not load are refused at start, naming the file. */
static void test_bad_files(void **state) {
    (void)state;
    char ca[400], crt[400], key[400];
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", certs);
    snprintf(crt, sizeof(crt), "%s/server/tls.crt", certs);
    snprintf(key, sizeof(key), "%s/client/tls.key", certs); /* not the certificate's key */
    struct dfc_tls_files files = {.ca_cert = ca, .cert = crt, .key = key};
    struct dfc_tls_ctx *c = NULL;
    struct dfc_error err = {0};
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &files, true, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, key));
    files.key = "/nonexistent/tls.key";
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &files, true, 0, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "/nonexistent/tls.key"));
    files.key = "";
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_MUTUAL, &files, true, 0, &c, &err), -EINVAL);
    assert_int_equal(dfc_tls_ctx_new(DFC_TLS_OFF, &files, true, 0, &c, &err), -EINVAL);
}

/* upload.rateLimit under TLS (records from a buffer, not sendfile): 8 MiB/s with a burst of
 * 1 MiB cannot deliver the content, 8 MiB and 12345 bytes, in less than 875 ms. */
static void test_rate_limit_over_tls(void **state) {
    struct fx *f = *state;
    f->stls = ctx("server", DFC_TLS_MUTUAL, true);
    f->ctls = ctx("client", DFC_TLS_MUTUAL, false);
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .max_conns = 16,
                                       .request_timeout_ns = 5 * SEC,
                                       .answer_timeout_ns = TIMEOUT,
                                       .parent_id = "host-1",
                                       .tls = f->stls,
                                       .rate_limit = 8 * MiB};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &f->v, &err), 0);
    int64_t t0 = dfc_mono_ns();
    fetch_all(f, f->ctls);
    int64_t took = dfc_mono_ns() - t0;
    if (took < 875 * (SEC / 1000)) {
        fail_msg("8 MiB at 8 MiB/s over TLS took %lld ms", (long long)(took / (SEC / 1000)));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mutual_serves_every_piece, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mutual_refuses_a_client_without_a_certificate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_server_auth_serves_a_client_without_a_certificate,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_foreign_and_expired_clients, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_client_refuses_foreign_expired_and_misnamed_servers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_handshake_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_mid_transfer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit_over_tls, setup, teardown),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
