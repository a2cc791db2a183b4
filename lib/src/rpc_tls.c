/*
 * rpc_tls.c - TLS for the RPC layer: gRPC core's TLS credentials over watched certificate files,
 * accepted connections handed to core's TLS listener, a call's peer address, identity and
 * connection key, and core's log lines with the peer of a refused handshake. See rpc_tls.h,
 * grpc/grpc_security.h and docs/trust-model.md.
 *
 * DESIGN
 *
 * Files, not bytes. Every credential is built on core's file-watcher certificate provider,
 * which re-reads the key, certificate and CA files every refresh_s (its own thread per
 * provider) and hands changes to the handshakers: a rotated certificate (cert-manager
 * rewrites the Secret's files) serves every new handshake after the next refresh, while
 * connections already up, and the calls on them, keep theirs.
 *
 * TLS version. Core 1.51 negotiates TLS 1.2 or 1.3 and its C API has no setter for the minimum
 * (grpc_tls_credentials_options has none; only the C++ internals do), so both ends of this
 * project's connections speak 1.3 (OpenSSL 3 prefers it) but a peer offering only 1.2 is
 * not refused by version.
 *
 * Shared client credentials. A node opens a client per parent and per round (download_round.c,
 * scheduler/dfdaemon_client.c); a provider per client would be a thread and a file read per
 * round, and distinct credentials keep core from sharing subchannels. So clients with the same
 * policy and files share one reference-counted entry of a small list (cache_mu), freed with
 * its last client.
 *
 * Connections. gRPC core 1.51 takes a TLS connection by fd only from its fd handler (what
 * C++'s ExternalConnectionAcceptor uses): grpc_server_add_channel_from_fd() accepts insecure
 * credentials only. So a TLS server adds core's listener at "external:dfc-tls" with its TLS
 * credentials, core stores that listener's handler into the pointer a server channel arg
 * names, and rpc_listen.c, which still accepts and caps the TCP connections, hands each fd to
 * it (dfc__tls_handoff): core runs the handshake under GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS.
 *
 * Log lines. Once a TLS credential exists, core's lines go through this project's log
 * (gpr_set_log_function: grpc.core, and its failed handshakes as rpc.tls_handshake_refused
 * naming the peer, see "who failed a handshake" below).
 */
#include "rpc_tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/support/alloc.h>
#include <grpc/support/log.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"

/* ---- who failed a handshake ----
 *
 * Core logs a failed handshake without the peer's address, on the thread that ran it, before
 * it closes the connection. The connections that rpc_listen.c hands over are remembered here
 * (recent: fd, its socket's dev and ino, the peer); the log hook notes which of them are still
 * open and queues the failure; the watcher thread then names the ones that closed within
 * WATCH_MS: the refused peer (with any connection that happened to close in the same
 * milliseconds). A failure no accepted connection matches is this process's own client
 * refusing a server, whose error already names the address. */

#define RECENT_MAX 128
#define WATCH_MS   200
#define FAIL_MAX   16

struct recent {
    int fd;
    dev_t dev;
    ino_t ino;
    bool open;
    char peer[DFC_ADDR_STR_MAX];
    char server[32];
};

struct failure {
    char reason[256];
    unsigned char was_open[RECENT_MAX]; /* 1: recent[i] was open at the failure */
};

static pthread_mutex_t recent_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t recent_cv = PTHREAD_COND_INITIALIZER;
static struct recent recent[RECENT_MAX]; /* guarded by recent_mu */
static size_t recent_next;
static struct failure fails[FAIL_MAX]; /* queued for the watcher, guarded by recent_mu */
static size_t n_fails;
static unsigned fails_dropped;
static pthread_once_t watcher_once = PTHREAD_ONCE_INIT;

/* Whether recent[i]'s socket is still open on its fd (recent_mu held). Core owns the fd and
 * closes it when it likes, so the number may already name a newer connection: the socket's
 * inode decides. It is read from /proc/self/fd rather than with fstat(), which would touch a
 * descriptor this thread does not own while the accept thread may be reusing its number. */
static bool recent_alive(const struct recent *e) {
    char path[32], link[64];
    if (!e->open) {
        return false;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", e->fd);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0) {
        return false;
    }
    link[n] = '\0';
    if (strncmp(link, "socket:[", 8) != 0) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long ino = strtoull(link + 8, &end, 10);
    return errno == 0 && end != link + 8 && *end == ']' && ino == (unsigned long long)e->ino;
}

static void name_refused(const struct failure *f) {
    char peers[512] = "";
    char server[32] = "";
    size_t n = 0;
    int64_t until = dfc_mono_ms() + WATCH_MS;
    do {
        usleep(5000);
        pthread_mutex_lock(&recent_mu);
        n = 0;
        peers[0] = '\0';
        for (size_t i = 0; i < RECENT_MAX; i++) {
            if (f->was_open[i] && !recent_alive(&recent[i])) {
                size_t len = strlen(peers);
                snprintf(peers + len, sizeof(peers) - len, "%s%s", n ? "," : "", recent[i].peer);
                snprintf(server, sizeof(server), "%s", recent[i].server);
                n++;
            }
        }
        pthread_mutex_unlock(&recent_mu);
    } while (n == 0 && dfc_mono_ms() < until);
    if (n > 0) {
        DFC_LOG(DFC_LOG_WARN, "rpc.tls_handshake_refused", "server=%s peer=%s reason=\"%s\"",
                server, peers, f->reason);
    } else {
        DFC_LOG(DFC_LOG_WARN, "rpc.tls_handshake_failed", "reason=\"%s\"", f->reason);
    }
}

static void *watcher_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&recent_mu);
    for (;;) {
        while (n_fails == 0) {
            pthread_cond_wait(&recent_cv, &recent_mu);
        }
        struct failure f = fails[0];
        memmove(&fails[0], &fails[1], (n_fails - 1) * sizeof(fails[0]));
        n_fails--;
        unsigned dropped = fails_dropped;
        fails_dropped = 0;
        pthread_mutex_unlock(&recent_mu);
        if (dropped > 0) {
            DFC_LOG(DFC_LOG_WARN, "rpc.tls_handshake_failed", "unnamed=%u", dropped);
        }
        name_refused(&f);
        pthread_mutex_lock(&recent_mu);
    }
    return NULL;
}

static void watcher_start(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, watcher_main, NULL) == 0) {
        pthread_detach(t);
    }
}

/* On core's thread, before it closes the connection: note what is open, queue the rest. */
static void failure_note(const char *reason) {
    pthread_once(&watcher_once, watcher_start);
    pthread_mutex_lock(&recent_mu);
    if (n_fails == FAIL_MAX) {
        fails_dropped++;
    } else {
        struct failure *f = &fails[n_fails++];
        snprintf(f->reason, sizeof(f->reason), "%s", reason);
        for (size_t i = 0; i < RECENT_MAX; i++) {
            recent[i].open = recent_alive(&recent[i]);
            f->was_open[i] = recent[i].open;
        }
        pthread_cond_signal(&recent_cv);
    }
    pthread_mutex_unlock(&recent_mu);
}

static void recent_add(const char *server, int fd) {
    struct stat st;
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    char ip[INET6_ADDRSTRLEN];
    if (fstat(fd, &st) < 0 || getpeername(fd, (struct sockaddr *)&sa, &len) < 0 ||
        dfc_addr_ip((const struct sockaddr *)&sa, ip, sizeof(ip)) < 0) {
        return;
    }
    pthread_mutex_lock(&recent_mu);
    struct recent *e = &recent[recent_next];
    recent_next = (recent_next + 1) % RECENT_MAX;
    e->fd = fd;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->open = true;
    dfc_addr_format(ip, dfc_addr_port(&sa), e->peer, sizeof(e->peer));
    snprintf(e->server, sizeof(e->server), "%s", server);
    pthread_mutex_unlock(&recent_mu);
}

/* ---- core's log lines ---- */

static void core_log(gpr_log_func_args *a) {
    const char *msg = a->message != NULL ? a->message : "";
    const char *hs = strstr(msg, "Handshake failed with fatal error ");
    if (hs != NULL) {
        failure_note(hs + strlen("Handshake failed with fatal error "));
        return;
    }
    int level = a->severity == GPR_LOG_SEVERITY_ERROR  ? DFC_LOG_ERROR
                : a->severity == GPR_LOG_SEVERITY_INFO ? DFC_LOG_INFO
                                                       : DFC_LOG_DEBUG;
    DFC_LOG(level, "grpc.core", "file=%s line=%d msg=\"%s\"", a->file, a->line, msg);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_install(void) {
    gpr_set_log_function(core_log);
}

/* ---- credentials ---- */

static int readable(const char *opt, const char *path, struct dfc_error *err) {
    if (path == NULL || path[0] == '\0') {
        return dfc_error_set(err, -ENOENT, "TLS: no %s file", opt);
    }
    if (access(path, R_OK) < 0) {
        return dfc_error_errno(err, -errno, "TLS: %s file `%s`", opt, path);
    }
    return 0;
}

static bool given(const char *path) {
    return path != NULL && path[0] != '\0';
}

int dfc__tls_server_creds(enum dfc_tls_policy p, const struct dfc_tls_files *f, unsigned refresh_s,
                          grpc_server_credentials **ret, struct dfc_error *err) {
    bool mutual = p == DFC_TLS_MUTUAL;
    int r = readable("certificate", f->cert, err);
    if (r == 0) {
        r = readable("key", f->key, err);
    }
    if (r == 0 && mutual) {
        r = readable("CA certificate", f->ca_cert, err);
    }
    if (r < 0) {
        return r;
    }
    pthread_once(&log_once, log_install);
    grpc_tls_certificate_provider *prov = grpc_tls_certificate_provider_file_watcher_create(
        f->key, f->cert, mutual ? f->ca_cert : NULL, refresh_s);
    grpc_tls_credentials_options *o = grpc_tls_credentials_options_create();
    grpc_tls_credentials_options_set_certificate_provider(o, prov);
    grpc_tls_certificate_provider_release(prov);
    grpc_tls_credentials_options_watch_identity_key_cert_pairs(o);
    if (mutual) {
        grpc_tls_credentials_options_watch_root_certs(o);
        grpc_tls_credentials_options_set_cert_request_type(
            o, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
        grpc_tls_credentials_options_set_cert_request_type(
            o, GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    *ret = grpc_tls_server_credentials_create(o);
    if (*ret == NULL) {
        return dfc_error_set(err, -EINVAL, "TLS: core refused the server credentials");
    }
    return 0;
}

struct dfc__tls_client {
    struct dfc__tls_client *next;
    char *key; /* policy, refresh and paths, one per line */
    unsigned refs;
    grpc_channel_credentials *creds;
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dfc__tls_client *cache; /* guarded by cache_mu */

static grpc_channel_credentials *client_creds_new(bool mutual, const struct dfc_tls_files *f,
                                                  unsigned refresh_s) {
    grpc_tls_certificate_provider *prov = grpc_tls_certificate_provider_file_watcher_create(
        mutual ? f->key : NULL, mutual ? f->cert : NULL, f->ca_cert, refresh_s);
    grpc_tls_credentials_options *o = grpc_tls_credentials_options_create();
    grpc_tls_credentials_options_set_certificate_provider(o, prov);
    grpc_tls_certificate_provider_release(prov);
    grpc_tls_credentials_options_watch_root_certs(o);
    if (mutual) {
        grpc_tls_credentials_options_watch_identity_key_cert_pairs(o);
    }
    grpc_tls_credentials_options_set_verify_server_cert(o, 1);
    return grpc_tls_credentials_create(o);
}

int dfc__tls_client_get(enum dfc_tls_policy p, const struct dfc_tls_files *f, unsigned refresh_s,
                        struct dfc__tls_client **ret, struct dfc_error *err) {
    bool mutual = p == DFC_TLS_MUTUAL;
    int r = readable("CA certificate", f->ca_cert, err);
    if (r == 0 && mutual) {
        r = readable("certificate", f->cert, err);
    }
    if (r == 0 && mutual) {
        r = readable("key", f->key, err);
    }
    if (r < 0) {
        return r;
    }
    char *key = NULL;
    if (asprintf(&key, "%d\n%u\n%s\n%s\n%s", (int)p, refresh_s, f->ca_cert,
                 given(f->cert) ? f->cert : "", given(f->key) ? f->key : "") < 0) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_once(&log_once, log_install);
    pthread_mutex_lock(&cache_mu);
    struct dfc__tls_client *t = cache;
    while (t != NULL && strcmp(t->key, key) != 0) {
        t = t->next;
    }
    if (t != NULL) {
        t->refs++;
        free(key);
    } else if ((t = calloc(1, sizeof(*t))) != NULL) {
        t->key = key;
        t->refs = 1;
        t->creds = client_creds_new(mutual, f, refresh_s);
        t->next = cache;
        cache = t;
    } else {
        free(key);
    }
    pthread_mutex_unlock(&cache_mu);
    if (t == NULL || t->creds == NULL) {
        dfc__tls_client_put(t);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    *ret = t;
    return 0;
}

grpc_channel_credentials *dfc__tls_client_creds(struct dfc__tls_client *t) {
    return t->creds;
}

void dfc__tls_client_put(struct dfc__tls_client *t) {
    if (t == NULL) {
        return;
    }
    pthread_mutex_lock(&cache_mu);
    bool last = --t->refs == 0;
    if (last) {
        struct dfc__tls_client **pp = &cache;
        while (*pp != t) {
            pp = &(*pp)->next;
        }
        *pp = t->next;
    }
    pthread_mutex_unlock(&cache_mu);
    if (last) {
        if (t->creds != NULL) {
            grpc_channel_credentials_release(t->creds);
        }
        free(t->key);
        free(t);
    }
}

/* ---- connections accepted by rpc_listen.c, handshaken by core ---- */

/* grpc_core::TcpServerFdHandler (core's src/core/lib/iomgr/tcp_server.h) is a C++ interface:
 * an object whose first word points to its vtable {~D1, ~D0, Handle}. Handle(listener_fd, fd,
 * pending_read) takes fd over as a connection of the listener that made the handler. */
typedef void (*fd_handle_fn)(void *self, int listener_fd, int fd, grpc_byte_buffer *pending);

void dfc__tls_handoff(void *handler, const char *server, int listener_fd, int fd) {
    recent_add(server, fd);
    void *const *vtbl;
    memcpy(&vtbl, handler, sizeof(vtbl));
    fd_handle_fn handle;
    memcpy(&handle, &vtbl[2], sizeof(handle));
    handle(handler, listener_fd, fd, NULL);
}

static void *arg_copy(void *p) {
    return p;
}

static void arg_destroy(void *p) {
    (void)p;
}

static int arg_cmp(void *a, void *b) {
    return a < b ? -1 : a > b ? 1 : 0;
}

static const grpc_arg_pointer_vtable slot_vtable = {arg_copy, arg_destroy, arg_cmp};

void dfc__tls_handler_arg(void **slot, grpc_arg *ret) {
    memset(ret, 0, sizeof(*ret));
    ret->type = GRPC_ARG_POINTER;
    ret->key = (char *)DFC__TLS_EXTERNAL;
    ret->value.pointer.p = slot;
    ret->value.pointer.vtable = &slot_vtable;
}

/* ---- a call's peer ---- */

/* Normalizes the address text of core's peer string: brackets (plain or %-encoded) removed,
 * an IPv4-mapped IPv6 address as IPv4. */
static int peer_host_ip(const char *p, char *buf, size_t size) {
    char host[DFC_ADDR_HOST_MAX];
    const char *end = strrchr(p, ':');
    if (end == NULL || (size_t)(end - p) >= sizeof(host)) {
        return -ENOENT;
    }
    size_t n = (size_t)(end - p);
    memcpy(host, p, n);
    host[n] = '\0';
    char *h = host;
    if (strncmp(h, "%5B", 3) == 0 && n >= 6 && strcmp(h + n - 3, "%5D") == 0) {
        h[n - 3] = '\0';
        h += 3;
    } else if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h[n - 1] = '\0';
        h++;
    }
    struct dfc_sockaddr sa;
    char ip[INET6_ADDRSTRLEN];
    if (dfc_addr_sockaddr(h, 0, &sa) < 0 ||
        dfc_addr_ip((const struct sockaddr *)&sa.ss, ip, sizeof(ip)) < 0) {
        return -ENOENT;
    }
    if (strlen(ip) >= size) {
        return -ENAMETOOLONG;
    }
    memcpy(buf, ip, strlen(ip) + 1);
    return 0;
}

int dfc__tls_peer_ip(grpc_call *call, char *buf, size_t size) {
    char *peer = grpc_call_get_peer(call);
    int r = -ENOENT;
    if (peer != NULL && (strncmp(peer, "ipv4:", 5) == 0 || strncmp(peer, "ipv6:", 5) == 0)) {
        r = peer_host_ip(peer + 5, buf, size);
    }
    gpr_free(peer);
    return r;
}

int dfc__conn_key_tcp(const char *ip, unsigned port, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s %u", ip, port);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dfc__peer_conn_key(grpc_call *call, char *buf, size_t size) {
    char *peer = grpc_call_get_peer(call);
    int r = -ENOENT;
    if (peer != NULL && strncmp(peer, "fd:", 3) == 0) {
        int n = snprintf(buf, size, "%s", peer);
        r = n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
    } else if (peer != NULL && (strncmp(peer, "ipv4:", 5) == 0 || strncmp(peer, "ipv6:", 5) == 0)) {
        char ip[INET6_ADDRSTRLEN];
        char *end = NULL;
        unsigned long port = strtoul(strrchr(peer, ':') + 1, &end, 10);
        r = peer_host_ip(peer + 5, ip, sizeof(ip));
        if (r == 0 && (*end != '\0' || port > 65535)) {
            r = -ENOENT;
        }
        if (r == 0) {
            r = dfc__conn_key_tcp(ip, (unsigned)port, buf, size);
        }
    }
    gpr_free(peer);
    return r;
}

static void copy_value(char *dst, size_t size, const grpc_auth_property *p) {
    size_t n = p->value_length < size - 1 ? p->value_length : size - 1;
    memcpy(dst, p->value, n);
    dst[n] = '\0';
}

void dfc__tls_peer_identity(grpc_call *call, struct dfc_peer_identity *ret) {
    memset(ret, 0, sizeof(*ret));
    grpc_auth_context *ctx = grpc_call_auth_context(call);
    if (ctx == NULL) {
        return;
    }
    grpc_auth_property_iterator it = grpc_auth_context_property_iterator(ctx);
    const grpc_auth_property *p;
    while ((p = grpc_auth_property_iterator_next(&it)) != NULL) {
        if (strcmp(p->name, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME) == 0) {
            ret->tls = p->value_length == 3 &&
                       (memcmp(p->value, "tls", 3) == 0 || memcmp(p->value, "ssl", 3) == 0);
        } else if (strcmp(p->name, GRPC_X509_CN_PROPERTY_NAME) == 0) {
            copy_value(ret->common_name, sizeof(ret->common_name), p);
        } else if (strcmp(p->name, GRPC_PEER_IP_PROPERTY_NAME) == 0 &&
                   ret->n_ips < DFC_PEER_SAN_MAX && p->value_length < sizeof(ret->ips[0])) {
            copy_value(ret->ips[ret->n_ips++], sizeof(ret->ips[0]), p);
        } else if (strcmp(p->name, GRPC_PEER_URI_PROPERTY_NAME) == 0 &&
                   ret->n_uris < DFC_PEER_SAN_MAX && p->value_length < sizeof(ret->uris[0])) {
            copy_value(ret->uris[ret->n_uris++], sizeof(ret->uris[0]), p);
        } else if (strcmp(p->name, GRPC_PEER_DNS_PROPERTY_NAME) == 0 &&
                   ret->n_dns < DFC_PEER_SAN_MAX && p->value_length < sizeof(ret->dns[0])) {
            copy_value(ret->dns[ret->n_dns++], sizeof(ret->dns[0]), p);
        }
    }
    ret->authenticated = ret->tls && grpc_auth_context_peer_is_authenticated(ctx) != 0;
    grpc_auth_context_release(ctx);
}
