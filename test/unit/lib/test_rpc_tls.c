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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "test/rpc_test.pb-c.h"
#include "rpc_test_service.h"
#include "test_support.h"

/* Echo answers what the call knows of its peer, as text in data:
 * "ip=<peer ip> tls=<0|1> auth=<0|1> cn=<cn> ips=<a,b> uris=<a,b>". */
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
    char ips[512] = "", uris[2048] = "";
    for (unsigned i = 0; i < id.n_ips; i++) {
        snprintf(ips + strlen(ips), sizeof(ips) - strlen(ips), "%s%s", i ? "," : "", id.ips[i]);
    }
    for (unsigned i = 0; i < id.n_uris; i++) {
        snprintf(uris + strlen(uris), sizeof(uris) - strlen(uris), "%s%s", i ? "," : "",
                 id.uris[i]);
    }
    char *text = dfc_rpc_call_alloc(call, 4096);
    if (text == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    snprintf(text, 4096, "ip=%s tls=%d auth=%d cn=%s ips=%s uris=%s", ip, id.tls,
             id.authenticated, id.common_name, ips, uris);
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

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-tls");
    sh("bash %s ca %s/ca && bash %s ca %s/ca2", MAKE_CERTS, f->dir, MAKE_CERTS, f->dir);
    leaf(f, "ca", "server", "IP:127.0.0.1", "--cn server");
    leaf(f, "ca", "client", "IP:127.0.0.2,URI:dragonfly://host/h1", "--cn node-1");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_log_set_sink(NULL, NULL);
    dfc_rpc_server_free(f->server);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

/* The files of dir/<name> (static buffers per slot). */
static struct dfc_tls_files files(struct fx *f, const char *name, int slot) {
    static char paths[4][3][512];
    snprintf(paths[slot][0], 512, "%s/%s/ca.crt", f->dir, name);
    snprintf(paths[slot][1], 512, "%s/%s/tls.crt", f->dir, name);
    snprintf(paths[slot][2], 512, "%s/%s/tls.key", f->dir, name);
    return (struct dfc_tls_files){paths[slot][0], paths[slot][1], paths[slot][2]};
}

static void start(struct fx *f, enum dfc_tls_policy p, const char *name) {
    struct dfc_error err;
    struct dfc_rpc_server_opts o = {.name = "tls-test",
                                    .idle_timeout_ms = -1,
                                    .tls = p,
                                    .tls_files = files(f, name, 0),
                                    .tls_refresh_s = 1,
                                    .tls_handshake_timeout_ms = 500};
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
    assert_non_null(strstr(text, "uris=dragonfly://host/h1"));
}

/* A client whose certificate a mutual server refuses: the call fails and the server logs a
 * line naming the peer's address. */
static void refused_client(struct fx *f, const char *name) {
    struct dfc_error err;
    log_start();
    assert_int_not_equal(ask(f, DFC_TLS_MUTUAL, name, NULL, 0, &err), 0);
    print_message("client %s: %s\n", name, err.msg);
    struct want w = {"event=rpc.tls_handshake_failed", "peer=127.0.0.1:"};
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

int main(void) {
    dfc_log_set_level(DFC_LOG_DEBUG);
    if (rpc_test_resolve() < 0) {
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_mutual_call_and_identity),
        T(test_wrong_ca_client_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
