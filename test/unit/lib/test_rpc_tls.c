/*
 * Tests for TLS in the RPC layer (lib/src/rpc_tls.c): a real server on 127.0.0.1 with an
 * ephemeral port and real gRPC clients, certificates made per test by
 * test/support/make-certs.sh in a temporary directory (a CA, a second CA, expired leaves).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "test/rpc_test.pb-c.h"
#include "rpc_test_service.h"
#include "test_support.h"

/* Echo answers what the call knows of its peer, as text in data:
 * "ip=<peer ip> tls=<0|1> auth=<0|1> cn=<cn> ips=<a,b> uris=<a,b> dns=<a,b>". */
static int echo_identity(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                         ProtobufCMessage *resp, struct dfc_error *err) {
    (void)svc;
    (void)req;
    Dfc__Test__V1__Chunk *out = (Dfc__Test__V1__Chunk *)resp;
    struct dfc_peer_identity id;
    char ip[INET6_ADDRSTRLEN] = "";
    if (dfc_rpc_call_peer_ip(call, ip, sizeof(ip)) < 0) {
        snprintf(ip, sizeof(ip), "none");
    }
    dfc_rpc_call_peer_identity(call, &id);
    char ips[512] = "", uris[2048] = "", dns[2048] = "";
    for (unsigned i = 0; i < id.n_ips; i++) {
        snprintf(ips + strlen(ips), sizeof(ips) - strlen(ips), "%s%s", i ? "," : "", id.ips[i]);
    }
    for (unsigned i = 0; i < id.n_uris; i++) {
        snprintf(uris + strlen(uris), sizeof(uris) - strlen(uris), "%s%s", i ? "," : "",
                 id.uris[i]);
    }
    for (unsigned i = 0; i < id.n_dns; i++) {
        snprintf(dns + strlen(dns), sizeof(dns) - strlen(dns), "%s%s", i ? "," : "", id.dns[i]);
    }
    char *text = dfc_rpc_call_alloc(call, 8192);
    if (text == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    snprintf(text, 8192, "ip=%s tls=%d auth=%d cn=%s ips=%s uris=%s dns=%s", ip, id.tls,
             id.authenticated, id.common_name, ips, uris, dns);
    out->data.data = (uint8_t *)text;
    out->data.len = strlen(text);
    return 0;
}

static const struct rpc_test_handlers handlers = {echo_identity, echo_identity, echo_identity,
                                                  rpc_test_chat};

struct fx {
    char dir[256];
    unsigned port;
    struct dfc_rpc_server *server;
    int64_t first_call_ms; /* the server's first_call_timeout_ms (0: the default) */
};

static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int r = system(cmd);
    if (r != 0) {
        fail_msg("`%s` exited %d", cmd, r);
    }
}

/* dir/<leaf>/{ca.crt,tls.crt,tls.key} signed by dir/<ca>. */
static void leaf(struct fx *f, const char *ca, const char *name, const char *san,
                 const char *more) {
    sh("bash %s leaf %s/%s %s/%s '%s' %s", MAKE_CERTS, f->dir, ca, f->dir, name, san, more);
}

/* One directory of certificates for the whole run (making them is the slow part): a CA, a
 * second CA, the server's (naming 127.0.0.1) and a client's; tests add their own leaves. */
static struct fx shared;

static int group_setup(void **state) {
    (void)state;
    struct fx *f = &shared;
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-tls");
    sh("bash %s ca %s/ca && bash %s ca %s/ca2", MAKE_CERTS, f->dir, MAKE_CERTS, f->dir);
    leaf(f, "ca", "server", "IP:127.0.0.1", "--cn server");
    leaf(f, "ca", "client", "IP:127.0.0.2,URI:dragonfly://host/h1,DNS:ops.test", "--cn node-1");
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    test_rmtree(shared.dir);
    return 0;
}

static int setup(void **state) {
    shared.server = NULL;
    shared.port = 0;
    shared.first_call_ms = 0;
    *state = &shared;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_log_set_sink(NULL, NULL);
    dfc_rpc_server_free(f->server);
    f->server = NULL;
    return 0;
}

/* The files of dir/<name> (static buffers per slot). */
static struct dfc_tls_files files(struct fx *f, const char *name, int slot) {
    static char paths[4][3][512];
    snprintf(paths[slot][0], 512, "%s/%s/ca.crt", f->dir, name);
    snprintf(paths[slot][1], 512, "%s/%s/tls.crt", f->dir, name);
    snprintf(paths[slot][2], 512, "%s/%s/tls.key", f->dir, name);
    return (struct dfc_tls_files){paths[slot][0], paths[slot][1], paths[slot][2], NULL};
}

static void start(struct fx *f, enum dfc_tls_policy p, const char *name) {
    struct dfc_error err;
    struct dfc_rpc_server_opts o = {.name = "tls-test",
                                    .idle_timeout_ms = -1,
                                    .tls = p,
                                    .tls_files = files(f, name, 0),
                                    .tls_refresh_s = 1,
                                    .tls_handshake_timeout_ms = 500,
                                    .first_call_timeout_ms = f->first_call_ms};
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, &handlers, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_tcp(f->server, "127.0.0.1", 0, &f->port, &err), 0);
    assert_true(f->port > 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
}

/* One Echo call with policy p and dir/<name>'s files; the server's text in out. */
static int ask(struct fx *f, enum dfc_tls_policy p, const char *name, char *out, size_t size,
               struct dfc_error *err) {
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%u", f->port);
    struct dfc_rpc_client_opts o = {.tls = p, .tls_files = files(f, name, 1), .tls_refresh_s = 1};
    struct dfc_rpc_client *c;
    int r = dfc_rpc_client_new(target, &o, &c, err);
    if (r < 0) {
        return r;
    }
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *resp = NULL;
    r = dfc_rpc_unary(c, &rt.echo, &in.base, 5000, &resp, err);
    if (r == 0 && out != NULL) {
        const Dfc__Test__V1__Chunk *m = (const void *)resp;
        snprintf(out, size, "%.*s", (int)m->data.len, (const char *)m->data.data);
    }
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return r;
}

/* ---- log lines ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];

static void sink(int level, const char *line, size_t len, void *ud) {
    (void)level;
    (void)ud;
    pthread_mutex_lock(&log_mu);
    size_t have = strlen(log_text);
    if (have + len < sizeof(log_text)) {
        memcpy(log_text + have, line, len);
        log_text[have + len] = '\0';
    }
    pthread_mutex_unlock(&log_mu);
}

static void log_start(void) {
    pthread_mutex_lock(&log_mu);
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_mu);
    dfc_log_set_sink(sink, NULL);
}

struct want {
    const char *a, *b;
};

static bool logged(void *arg) {
    const struct want *w = arg;
    pthread_mutex_lock(&log_mu);
    const char *p = strstr(log_text, w->a);
    bool ok = false;
    while (p != NULL && !ok) {
        const char *eol = strchr(p, '\n');
        const char *q = strstr(p, w->b);
        ok = q != NULL && (eol == NULL || q < eol);
        p = strstr(p + 1, w->a);
    }
    pthread_mutex_unlock(&log_mu);
    return ok;
}

/* ---- tests ---- */

static void test_mutual_call_and_identity(void **state) {
    struct fx *f = *state;
    start(f, DFC_TLS_MUTUAL, "server");
    char text[4096];
    struct dfc_error err;
    assert_int_equal(ask(f, DFC_TLS_MUTUAL, "client", text, sizeof(text), &err), 0);
    print_message("%s\n", text);
    assert_non_null(strstr(text, "ip=127.0.0.1 "));
    assert_non_null(strstr(text, "tls=1 auth=1 cn=node-1 "));
    assert_non_null(strstr(text, "ips=127.0.0.2 "));
    assert_non_null(strstr(text, "uris=dragonfly://host/h1 "));
    assert_non_null(strstr(text, "dns=ops.test"));
}

/* A client whose certificate a mutual server refuses: the call fails and the server logs a
 * line naming the peer's address. */
static void refused_client(struct fx *f, const char *name) {
    struct dfc_error err;
    log_start();
    assert_int_not_equal(ask(f, DFC_TLS_MUTUAL, name, NULL, 0, &err), 0);
    print_message("client %s: %s\n", name, err.msg);
    struct want w = {"event=rpc.tls_handshake_refused", "peer=127.0.0.1:"};
    bool ok = test_wait_for(logged, &w, 5000);
    if (!ok) {
        print_message("%s", log_text);
    }
    assert_true(ok);
}

static void test_wrong_ca_client_is_refused(void **state) {
    struct fx *f = *state;
    leaf(f, "ca2", "client2", "IP:127.0.0.2", "");
    start(f, DFC_TLS_MUTUAL, "server");
    refused_client(f, "client2");
}

static void test_expired_client_is_refused(void **state) {
    struct fx *f = *state;
    leaf(f, "ca", "old", "IP:127.0.0.2", "--expired");
    start(f, DFC_TLS_MUTUAL, "server");
    refused_client(f, "old");
}

/* A client without a certificate: refused by a mutual server, served by a server-auth one
 * (unauthenticated). */
static void test_no_client_cert(void **state) {
    struct fx *f = *state;
    char text[4096];
    struct dfc_error err;
    start(f, DFC_TLS_MUTUAL, "server");
    assert_int_not_equal(ask(f, DFC_TLS_SERVER_AUTH, "client", NULL, 0, &err), 0);
    dfc_rpc_server_free(f->server);
    f->server = NULL;
    start(f, DFC_TLS_SERVER_AUTH, "server");
    assert_int_equal(ask(f, DFC_TLS_SERVER_AUTH, "client", text, sizeof(text), &err), 0);
    assert_non_null(strstr(text, "ip=127.0.0.1 tls=1 auth=0 cn= ips= uris="));
    /* a client that offers a certificate anyway is not asked for it */
    assert_int_equal(ask(f, DFC_TLS_MUTUAL, "client", text, sizeof(text), &err), 0);
    assert_non_null(strstr(text, "auth=0"));
}

/* The client refuses a server whose certificate does not chain to its CA, has expired or does
 * not name the dialled IP; its error names the server's address. */
static void refused_server(struct fx *f, const char *name) {
    struct dfc_error err;
    char addr[64];
    start(f, DFC_TLS_MUTUAL, name);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", f->port);
    assert_int_not_equal(ask(f, DFC_TLS_MUTUAL, "client", NULL, 0, &err), 0);
    print_message("server %s: %s\n", name, err.msg);
    assert_non_null(strstr(err.msg, addr));
}

static void test_wrong_ca_server_is_refused(void **state) {
    struct fx *f = *state;
    leaf(f, "ca2", "server2", "IP:127.0.0.1", "");
    sh("cp %s/ca/ca.crt %s/server2/ca.crt", f->dir, f->dir); /* it trusts our clients */
    refused_server(f, "server2");
}

static void test_expired_server_is_refused(void **state) {
    struct fx *f = *state;
    leaf(f, "ca", "oldserver", "IP:127.0.0.1", "--expired");
    refused_server(f, "oldserver");
}

static void test_server_naming_another_ip_is_refused(void **state) {
    struct fx *f = *state;
    leaf(f, "ca", "elsewhere", "IP:127.0.0.9", "");
    refused_server(f, "elsewhere");
}

/* A plaintext client gets nothing from a TLS port; TLS off still serves plaintext. */
static void test_plaintext(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char text[4096];
    start(f, DFC_TLS_MUTUAL, "server");
    assert_int_not_equal(ask(f, DFC_TLS_OFF, "client", NULL, 0, &err), 0);
    dfc_rpc_server_free(f->server);
    f->server = NULL;
    start(f, DFC_TLS_OFF, "server");
    assert_int_equal(ask(f, DFC_TLS_OFF, "client", text, sizeof(text), &err), 0);
    assert_non_null(strstr(text, "ip=127.0.0.1 tls=0 auth=0"));
    assert_int_not_equal(ask(f, DFC_TLS_MUTUAL, "client", NULL, 0, &err), 0);
}

struct closed_arg {
    int fd;
};

static bool closed(void *arg) {
    return test_closed_by_peer(((struct closed_arg *)arg)->fd);
}

/* A connection that starts a handshake and never finishes it is closed after the handshake
 * timeout. It sends the start of a ClientHello record (enough bytes to pass the accept thread's
 * first-bytes gate, which closes a connection sending nothing at all) and then nothing. */
static void test_silent_connection_is_closed(void **state) {
    struct fx *f = *state;
    start(f, DFC_TLS_MUTUAL, "server");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    struct closed_arg a = {socket(AF_INET, SOCK_STREAM, 0)};
    assert_int_equal(connect(a.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    uint8_t start_of_hello[32] = {0x16, 0x03, 0x01, 0x02, 0x00}; /* a 512-byte record, 27 sent */
    assert_int_equal(send(a.fd, start_of_hello, sizeof(start_of_hello), 0), 32);
    double t0 = test_now_ms();
    assert_false(closed(&a));
    assert_true(test_wait_for(closed, &a, 5000));
    double ms = test_now_ms() - t0;
    print_message("closed after %.0f ms\n", ms);
    assert_true(ms >= 300 && ms < 3000); /* tls_handshake_timeout_ms is 500 */
    close(a.fd);
}

/* A client that finishes the handshake (with a valid certificate), sends the HTTP/2 preface
 * and SETTINGS and then nothing sat in core until the idle timeout (here: none), holding a
 * slot. Now it is closed the first-call timeout after it reached core; a client with a stream
 * open is not. */
static void test_connection_without_a_call_is_closed(void **state) {
    struct fx *f = *state;
    f->first_call_ms = 1500;
    start(f, DFC_TLS_MUTUAL, "server");
    struct dfc_error err;
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%u", f->port);
    struct dfc_rpc_client_opts co = {
        .tls = DFC_TLS_MUTUAL, .tls_files = files(f, "client", 1), .tls_refresh_s = 1};
    struct dfc_rpc_client *c;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_client_new(target, &co, &c, &err), 0);
    assert_int_equal(dfc_rpc_stream_open(c, &rt.chat, 30000, &st, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_stream_send(st, &in.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
    dfc_rpc_msg_free(m);

    /* A raw TLS client (OpenSSL, blocking, ALPN h2 as gRPC's) with the client's certificate. */
    char ca[512], crt[512], key[512];
    snprintf(ca, sizeof(ca), "%s/client/ca.crt", f->dir);
    snprintf(crt, sizeof(crt), "%s/client/tls.crt", f->dir);
    snprintf(key, sizeof(key), "%s/client/tls.key", f->dir);
    SSL_CTX *x = SSL_CTX_new(TLS_client_method());
    assert_non_null(x);
    assert_int_equal(SSL_CTX_load_verify_locations(x, ca, NULL), 1);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(x, crt), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(x, key, SSL_FILETYPE_PEM), 1);
    SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
    static const unsigned char alpn[] = "\x02h2";
    assert_int_equal(SSL_CTX_set_alpn_protos(x, alpn, sizeof(alpn) - 1), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 10};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    SSL *ssl = SSL_new(x);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    double t0 = test_now_ms();
    assert_int_equal(SSL_connect(ssl), 1);
    static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    assert_int_equal(SSL_write(ssl, hello, (int)sizeof(hello) - 1), (int)sizeof(hello) - 1);
    char buf[256];
    int n;
    size_t got = 0;
    while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) {
        got += (size_t)n; /* the server's SETTINGS and their ACK */
    }
    double ms = test_now_ms() - t0;
    int e = SSL_get_error(ssl, n);
    print_message("read %zu bytes, then SSL error %d after %.0f ms\n", got, e, ms);
    assert_true(got > 0); /* the handshake held: core spoke HTTP/2 on it */
    assert_true(e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL || e == SSL_ERROR_SSL);
    assert_true(ms >= 1300 && ms < 4000);
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(x);

    /* the stream, which started a call, is still up past the deadline */
    in.seq = 7;
    assert_int_equal(dfc_rpc_stream_send(st, &in.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
    assert_int_equal(((Dfc__Test__V1__Chunk *)m)->seq, 1007);
    dfc_rpc_msg_free(m);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    assert_int_equal(dfc_rpc_stream_finish(st, &err), 0);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
}

/* Files the options name that cannot be read fail the server's creation. */
static void test_missing_file(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_tls_files tf = files(f, "server", 0);
    tf.key = "/nonexistent/tls.key";
    struct dfc_rpc_server_opts o = {.tls = DFC_TLS_MUTUAL, .tls_files = tf};
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/tls.key"));
    struct dfc_rpc_client *c = NULL;
    struct dfc_rpc_client_opts co = {.tls = DFC_TLS_MUTUAL, .tls_files = tf};
    assert_int_equal(dfc_rpc_client_new("127.0.0.1:1", &co, &c, &err), -ENOENT);
}

/* A TLS server whose listen fails (an address no interface has) is freed without being
 * started: core's TLS listener was added, and core aborts on destroying a server with a
 * listener that was never shut down. */
static void test_failed_listen_is_freed(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_server_opts o = {.name = "tls-test",
                                    .tls = DFC_TLS_MUTUAL,
                                    .tls_files = files(f, "server", 0),
                                    .tls_refresh_s = 1};
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, &handlers, NULL, &err), 0);
    unsigned port = 0;
    assert_int_equal(dfc_rpc_server_listen_tcp(f->server, "192.0.2.1", 1, &port, &err),
                     -EADDRNOTAVAIL);
    dfc_rpc_server_free(f->server);
    f->server = NULL;
}

/* The serial of the certificate the server at port presents to a new connection. */
static void served_serial(struct fx *f, char *buf, size_t size) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "openssl s_client -connect 127.0.0.1:%u -CAfile %s/ca/ca.crt -cert %s/client/tls.crt "
             "-key %s/client/tls.key </dev/null 2>/dev/null | openssl x509 -noout -serial",
             f->port, f->dir, f->dir, f->dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (fgets(buf, (int)size, p) == NULL) {
        buf[0] = '\0';
    }
    pclose(p);
}

static void file_serial(const char *path, char *buf, size_t size) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "openssl x509 -noout -serial -in %s", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (fgets(buf, (int)size, p) == NULL) {
        buf[0] = '\0';
    }
    pclose(p);
}

static bool serial_is_new(void *arg) {
    struct fx *f = arg;
    char want[256], got[256];
    char path[512];
    snprintf(path, sizeof(path), "%s/rot/tls.crt", f->dir);
    file_serial(path, want, sizeof(want));
    served_serial(f, got, sizeof(got));
    return got[0] != '\0' && strcmp(want, got) == 0;
}

/* Rotation: the server's files are replaced (a new certificate from the same CA) while a
 * stream is open; the stream goes on and ends OK, and a new connection gets the new
 * certificate after the refresh. */
static void test_rotation(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    leaf(f, "ca", "rot", "IP:127.0.0.1", "--cn rot");
    start(f, DFC_TLS_MUTUAL, "rot");
    char target[64], before[256], after[256];
    snprintf(target, sizeof(target), "127.0.0.1:%u", f->port);
    served_serial(f, before, sizeof(before));
    assert_true(before[0] != '\0');

    struct dfc_rpc_client_opts o = {
        .tls = DFC_TLS_MUTUAL, .tls_files = files(f, "client", 1), .tls_refresh_s = 1};
    struct dfc_rpc_client *c;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_client_new(target, &o, &c, &err), 0);
    assert_int_equal(dfc_rpc_stream_open(c, &rt.chat, 30000, &st, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *m = NULL;
    in.seq = 1;
    assert_int_equal(dfc_rpc_stream_send(st, &in.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
    dfc_rpc_msg_free(m);

    leaf(f, "ca", "server-new", "IP:127.0.0.1", "--cn server-new");
    sh("cd %s && cp server-new/tls.key rot/tls.key.tmp && cp server-new/tls.crt rot/tls.crt.tmp "
       "&& mv rot/tls.key.tmp rot/tls.key && mv rot/tls.crt.tmp rot/tls.crt",
       f->dir);
    assert_true(test_wait_for(serial_is_new, f, 10000));
    served_serial(f, after, sizeof(after));
    assert_string_not_equal(before, after);

    in.seq = 2; /* the stream opened before the rotation goes on */
    assert_int_equal(dfc_rpc_stream_send(st, &in.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
    assert_int_equal(((Dfc__Test__V1__Chunk *)m)->seq, 1002);
    dfc_rpc_msg_free(m);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    assert_int_equal(dfc_rpc_stream_finish(st, &err), 0);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    char text[4096]; /* and new calls work */
    assert_int_equal(ask(f, DFC_TLS_MUTUAL, "client", text, sizeof(text), &err), 0);
}

int main(void) {
    if (rpc_test_resolve() < 0) {
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_failed_listen_is_freed),
        T(test_mutual_call_and_identity),
        T(test_wrong_ca_client_is_refused),
        T(test_expired_client_is_refused),
        T(test_no_client_cert),
        T(test_wrong_ca_server_is_refused),
        T(test_expired_server_is_refused),
        T(test_server_naming_another_ip_is_refused),
        T(test_plaintext),
        T(test_silent_connection_is_closed),
        T(test_connection_without_a_call_is_closed),
        T(test_missing_file),
        T(test_rotation),
    };
    return test_run_group(tests, group_setup, group_teardown);
}
