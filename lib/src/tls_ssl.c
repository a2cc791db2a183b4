/*
 * tls_ssl.c - TLS 1.3 over non-blocking sockets with OpenSSL, with certificate files re-read
 * when they change (dfc/tls_ssl.h). It logs only a rotation it could not take.
 */
#include "dfc/tls_ssl.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/units.h"

/* AES-128-GCM first: on this class of CPU it is the fastest AEAD OpenSSL has (AES-NI). */
#define CIPHERSUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define NFILES       3
#define READ_BUFFER  ((size_t)128 * 1024)

/* What a file looked like when it was loaded: a rotation changes one of these. */
struct stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool present;
};

struct dfc_tls_ctx {
    enum dfc_tls_policy policy;
    bool server;
    char *paths[NFILES]; /* ca_cert, cert, key; "" = not given */
    char *server_name;   /* a client's: the name servers' certificates hold; NULL = the address */
    int64_t recheck_ns;
    pthread_mutex_t mu;
    SSL_CTX *cur;                /* under mu: one reference is ours */
    struct stamp stamps[NFILES]; /* under mu: the files cur was built from */
    int64_t next_check_ns;       /* under mu */
    bool checking;               /* under mu: one thread looks at the files at a time */
    uint64_t generation;         /* under mu */
    uint64_t serial;             /* set at creation */
    struct dfc_tls_ctx_opts o;   /* set at creation; its strings borrowed */
};

static _Atomic uint64_t last_serial;

/* Records are coalesced into this much before they go to the socket: a 256 KiB write
 * (vortex_server.c's TLS chunk) is one send() of 16 records instead of 16 sends and 16
 * loopback segments of 16 KiB. In a 1 GiB Vortex fetch from two parents: 2.2k sends per parent
 * instead of 32.9k, and each parent's CPU time 0.52 s -> 0.47 s (the memcpy into this buffer
 * included). Sized above 256 KiB plus the records' overhead, so such a write fits whole. */
#define WRITE_BUFFER ((size_t)272 * 1024)

struct dfc_tls_conn {
    SSL *ssl;
    int fd;
    /* The records OpenSSL wrote and the socket has not taken yet: wbuf[woff, wlen). Allocated
     * on the first write; flushed by every dfc_tls_write before it returns, by OpenSSL's own
     * BIO_flush (handshake flights, alerts) and when full. */
    uint8_t *wbuf;
    size_t wlen, woff;
};

/* OpenSSL's socket BIO with writes that never raise SIGPIPE (send with MSG_NOSIGNAL): a peer
 * that closed first must cost an error, not the process; and with writes buffered in the
 * connection (its data pointer) until flushed. Made once. */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;
static long (*sock_ctrl)(BIO *, int, long, void *);

/* Sends what t holds. 0 when all of it went, -EAGAIN when the socket is full, else -errno. */
static int wflush(struct dfc_tls_conn *t) {
    while (t->woff < t->wlen) {
        ssize_t k = send(t->fd, t->wbuf + t->woff, t->wlen - t->woff, MSG_NOSIGNAL);
        if (k < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
        }
        t->woff += (size_t)k;
    }
    t->woff = t->wlen = 0;
    return 0;
}

static int nosig_write(BIO *b, const char *buf, int len) {
    struct dfc_tls_conn *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (t == NULL) { /* not ours: straight to the socket */
        int fd = -1;
        (void)BIO_get_fd(b, &fd);
        ssize_t k = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            BIO_set_retry_write(b);
        }
        return (int)k;
    }
    if (len <= 0) {
        return 0;
    }
    size_t n = (size_t)len;
    if (t->wbuf == NULL && (t->wbuf = malloc(WRITE_BUFFER)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (n > WRITE_BUFFER - t->wlen) {
        /* no room for the whole record: out with what is held first */
        int r = wflush(t);
        if (r < 0) {
            if (r == -EAGAIN) {
                BIO_set_retry_write(b);
            }
            errno = -r;
            return -1;
        }
        if (n > WRITE_BUFFER) {
            n = WRITE_BUFFER; /* never from OpenSSL (records are ~16 KiB): a partial write */
        }
    }
    memcpy(t->wbuf + t->wlen, buf, n);
    t->wlen += n;
    return (int)n;
}

static long nosig_ctrl(BIO *b, int cmd, long num, void *ptr) {
    struct dfc_tls_conn *t = BIO_get_data(b);
    if (t != NULL && cmd == BIO_CTRL_FLUSH) {
        BIO_clear_retry_flags(b);
        int r = wflush(t);
        if (r == -EAGAIN) {
            BIO_set_retry_write(b);
            return 0;
        }
        if (r < 0) {
            errno = -r;
            return -1;
        }
        return 1;
    }
    if (t != NULL && cmd == BIO_CTRL_WPENDING) {
        return (long)(t->wlen - t->woff);
    }
    return sock_ctrl(b, cmd, num, ptr);
}

static void nosig_init(void) {
    const BIO_METHOD *sock = BIO_s_socket();
    sock_ctrl = BIO_meth_get_ctrl(sock);
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "dfc socket");
    if (m != NULL && (BIO_meth_set_write(m, nosig_write) != 1 ||
                      BIO_meth_set_read(m, BIO_meth_get_read(sock)) != 1 ||
                      BIO_meth_set_ctrl(m, nosig_ctrl) != 1 ||
                      BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
                      BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1)) {
        BIO_meth_free(m);
        m = NULL;
    }
    nosig_method = m;
}

static bool given(const char *p) {
    return p != NULL && p[0] != '\0';
}

/* OpenSSL's reasons queued on this thread, the last one last, into buf; clears the queue. */
static void ssl_reasons(char *buf, size_t size) {
    buf[0] = '\0';
    size_t at = 0;
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        const char *r = ERR_reason_error_string(e);
        char code[32];
        if (r == NULL) {
            snprintf(code, sizeof(code), "error %lx", e);
            r = code;
        }
        int k = snprintf(buf + at, size - at, "%s%s", at > 0 ? ": " : "", r);
        if (k < 0 || (size_t)k >= size - at) {
            break;
        }
        at += (size_t)k;
    }
    if (at == 0) {
        snprintf(buf, size, "unknown TLS error");
    }
}

static void stamp_file(const char *path, struct stamp *st) {
    struct stat sb;
    memset(st, 0, sizeof(*st));
    if (given(path) && stat(path, &sb) == 0) {
        st->dev = sb.st_dev;
        st->ino = sb.st_ino;
        st->size = sb.st_size;
        st->mtime = sb.st_mtim;
        st->present = true;
    }
}

static bool stamp_equal(const struct stamp *a, const struct stamp *b) {
    return a->present == b->present && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* The option names of the files, in paths[] order, for opts.option_prefix. */
static const char *const file_keys[NFILES] = {"caCert", "cert", "key"};

/* A new SSL_CTX from c's files. */
static int build(const struct dfc_tls_ctx *c, SSL_CTX **ret, struct dfc_error *err) {
    const char *ca = c->paths[0], *cert = c->paths[1], *key = c->paths[2];
    bool mutual = c->policy == DFC_TLS_MUTUAL;
    bool roots = !c->server && c->o.system_roots && !given(ca);
    char why[256];
    ERR_clear_error();
    SSL_CTX *x = SSL_CTX_new(c->server ? TLS_server_method() : TLS_client_method());
    if (x == NULL) {
        return dfc_error_set(err, -ENOMEM, "TLS: cannot make a context");
    }
    const char *failed = NULL;
    int bad = -1; /* the file that did not load, as an index of paths[] */
    if (SSL_CTX_set_min_proto_version(x, c->o.tls12 ? TLS1_2_VERSION : TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_ciphersuites(x, CIPHERSUITES) != 1) {
        failed = "set TLS 1.3";
    } else if ((c->server || mutual) && given(cert) &&
               SSL_CTX_use_certificate_chain_file(x, cert) != 1) {
        failed = "load the certificate", bad = 1;
    } else if ((c->server || mutual) && given(key) &&
               SSL_CTX_use_PrivateKey_file(x, key, SSL_FILETYPE_PEM) != 1) {
        failed = "load the key", bad = 2;
    } else if ((c->server || mutual) && SSL_CTX_check_private_key(x) != 1) {
        failed = "match the key to the certificate", bad = 2;
    } else if ((!c->server || mutual) &&
               (roots ? SSL_CTX_set_default_verify_paths(x)
                      : SSL_CTX_load_verify_locations(x, ca, NULL)) != 1) {
        failed = "load the CA", bad = 0;
    }
    if (failed != NULL) {
        ssl_reasons(why, sizeof(why));
        SSL_CTX_free(x);
        const char *file = bad < 0 ? "" : roots && bad == 0 ? "(system roots)" : c->paths[bad];
        if (c->o.option_prefix != NULL && bad >= 0) {
            return dfc_error_set(err, -EINVAL, "%s%s `%s`: %s", c->o.option_prefix, file_keys[bad],
                                 file, why);
        }
        return dfc_error_set(err, -EINVAL, "TLS: cannot %s %s: %s", failed, file, why);
    }
    /* A rotation must reach every new connection: no session tickets and no resumption (each
     * handshake verifies the certificates; Vortex keeps connections instead, vortex_pool.h). */
    SSL_CTX_set_options(x, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(x, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Read many records per recv() rather than two recv() per 16 KiB record. */
    SSL_CTX_set_read_ahead(x, 1);
    SSL_CTX_set_default_read_buffer_len(x, READ_BUFFER);
    if (c->server) {
        (void)SSL_CTX_set_num_tickets(x, 0);
        if (mutual) {
            STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
            if (names != NULL) {
                SSL_CTX_set_client_CA_list(x, names);
            }
            SSL_CTX_set_verify(x, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        } else {
            SSL_CTX_set_verify(x, SSL_VERIFY_NONE, NULL);
        }
    } else {
        SSL_CTX_set_verify(x, c->o.skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    }
    *ret = x;
    return 0;
}

int dfc_tls_ctx_new(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                    int64_t recheck_ns, struct dfc_tls_ctx **ret, struct dfc_error *err) {
    return dfc_tls_ctx_new_opts(p, f, server, recheck_ns, NULL, ret, err);
}

int dfc_tls_ctx_new_opts(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                         int64_t recheck_ns, const struct dfc_tls_ctx_opts *opts,
                         struct dfc_tls_ctx **ret, struct dfc_error *err) {
    if (p == DFC_TLS_OFF || f == NULL) {
        return dfc_error_set(err, -EINVAL, "TLS: no context for the policy off");
    }
    struct dfc_tls_ctx_opts o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    struct dfc_tls_files need = *f;
    if (!server && o.system_roots && !given(need.ca_cert)) {
        need.ca_cert = "(system roots)"; /* a client without a CA file uses those */
    }
    int r = dfc_tls_files_check(p, &need, server,
                                o.option_prefix != NULL ? o.option_prefix
                                : server                ? "server "
                                                        : "client ",
                                err);
    if (r < 0) {
        return r;
    }
    struct dfc_tls_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&c->mu, NULL);
    c->policy = p;
    c->server = server;
    c->o = o;
    c->recheck_ns = recheck_ns < 0 ? 0 : recheck_ns;
    const char *src[NFILES] = {f->ca_cert, f->cert, f->key};
    for (int i = 0; i < NFILES; i++) {
        c->paths[i] = strdup(given(src[i]) ? src[i] : "");
        if (c->paths[i] == NULL) {
            dfc_tls_ctx_free(c);
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        stamp_file(c->paths[i], &c->stamps[i]);
    }
    if (!server && given(f->server_name) && (c->server_name = strdup(f->server_name)) == NULL) {
        dfc_tls_ctx_free(c);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if ((r = build(c, &c->cur, err)) < 0) {
        dfc_tls_ctx_free(c);
        return r;
    }
    c->generation = 1;
    c->serial = ++last_serial;
    c->next_check_ns = dfc_mono_ns() + c->recheck_ns;
    *ret = c;
    return 0;
}

void dfc_tls_ctx_free(struct dfc_tls_ctx *c) {
    if (c == NULL) {
        return;
    }
    SSL_CTX_free(c->cur);
    pthread_mutex_destroy(&c->mu);
    for (int i = 0; i < NFILES; i++) {
        free(c->paths[i]);
    }
    free(c->server_name);
    free(c);
}

enum dfc_tls_policy dfc_tls_ctx_policy(const struct dfc_tls_ctx *c) {
    return c->policy;
}

uint64_t dfc_tls_ctx_generation(struct dfc_tls_ctx *c) {
    pthread_mutex_lock(&c->mu);
    uint64_t g = c->generation;
    pthread_mutex_unlock(&c->mu);
    return g;
}

/* Looks at the files when the interval passed (one thread at a time, outside the lock) and
 * swaps in a new SSL_CTX when they changed and load. */
static void maybe_reload(struct dfc_tls_ctx *c) {
    int64_t now = dfc_mono_ns();
    struct stamp old[NFILES];
    pthread_mutex_lock(&c->mu);
    if (c->checking || now < c->next_check_ns) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->checking = true;
    c->next_check_ns = now + c->recheck_ns;
    memcpy(old, c->stamps, sizeof(old));
    pthread_mutex_unlock(&c->mu);

    struct stamp now_st[NFILES];
    bool changed = false;
    for (int i = 0; i < NFILES; i++) {
        stamp_file(c->paths[i], &now_st[i]);
        changed = changed || !stamp_equal(&old[i], &now_st[i]);
    }
    SSL_CTX *fresh = NULL;
    struct dfc_error err = {0};
    int built = changed ? build(c, &fresh, &err) : 0;
    if (built < 0 && c->o.on_reload != NULL) {
        c->o.on_reload(c->o.ud, &err);
    } else if (built < 0) {
        DFC_LOG(DFC_LOG_WARN, "tls.reload_failed",
                "side=%s err=\"%s\" (keeping the certificates loaded before; trying again in "
                "%lld ms)",
                c->server ? "server" : "client", dfc_error_msg(&err),
                (long long)(c->recheck_ns / DFC_NS_PER_MS));
    }
    SSL_CTX *old_ctx = NULL;
    pthread_mutex_lock(&c->mu);
    if (fresh != NULL) {
        old_ctx = c->cur;
        c->cur = fresh;
        memcpy(c->stamps, now_st, sizeof(now_st));
        c->generation++;
    }
    c->checking = false;
    pthread_mutex_unlock(&c->mu);
    if (old_ctx != NULL && c->o.on_reload != NULL) {
        SSL_CTX_free(old_ctx);
        c->o.on_reload(c->o.ud, NULL);
    } else if (old_ctx != NULL) {
        SSL_CTX_free(old_ctx); /* connections that began on it keep their own references */
        DFC_LOG(DFC_LOG_INFO, "tls.reloaded", "side=%s cert=%s", c->server ? "server" : "client",
                c->paths[1][0] != '\0' ? c->paths[1] : "-");
    }
}

uint64_t dfc_tls_ctx_refresh(struct dfc_tls_ctx *c) {
    maybe_reload(c);
    return dfc_tls_ctx_generation(c);
}

uint64_t dfc_tls_ctx_serial(const struct dfc_tls_ctx *c) {
    return c->serial;
}

/* The current SSL_CTX with a reference for the caller. */
static SSL_CTX *current(struct dfc_tls_ctx *c) {
    maybe_reload(c);
    pthread_mutex_lock(&c->mu);
    SSL_CTX *x = c->cur;
    SSL_CTX_up_ref(x);
    pthread_mutex_unlock(&c->mu);
    return x;
}

/* After an SSL call returned ret <= 0: 1 to wait and retry (after waiting), else a negative
 * code with why set. eof tells a clean or unclean close by the peer. */
static int after(struct dfc_tls_conn *t, int ret, int64_t deadline, bool *eof, char *why,
                 size_t size) {
    int e = SSL_get_error(t->ssl, ret);
    int saved = errno;
    *eof = false;
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: {
        ERR_clear_error();
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        if (ev == POLLIN && t->woff < t->wlen) {
            /* what we wrote may be what the peer waits for before it answers */
            int f = wflush(t);
            if (f < 0 && f != -EAGAIN) {
                snprintf(why, size, "%s", dfc_strerror(f));
                return f;
            }
            ev = f == 0 ? POLLIN : POLLOUT;
        }
        int r = dfc_wait_fd(t->fd, ev, deadline);
        if (r < 0) {
            snprintf(why, size, "%s", r == -ETIMEDOUT ? "timed out" : dfc_strerror(r));
            return r;
        }
        return 1;
    }
    case SSL_ERROR_ZERO_RETURN:
        *eof = true;
        snprintf(why, size, "closed by the peer");
        return -EPROTO;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (saved == 0 || saved == EAGAIN) {
                *eof = true;
                snprintf(why, size, "connection closed by the peer");
                return -EPROTO;
            }
            snprintf(why, size, "%s", dfc_strerror(-saved));
            return -saved;
        }
        break;
    default:
        break;
    }
    long v = SSL_get_verify_result(t->ssl);
    char reasons[256];
    ssl_reasons(reasons, sizeof(reasons));
    if (v != X509_V_OK) {
        snprintf(why, size, "%s (%s)", reasons, X509_verify_cert_error_string(v));
    } else {
        snprintf(why, size, "%s", reasons);
    }
    return -ECONNABORTED;
}

/* A client's check of the server's certificate: it must name host (an IP SAN for a numeric
 * address, else a DNS name, which goes in the SNI too). */
static int expect_name(SSL *s, const char *host, const char *peer, struct dfc_error *err) {
    if (dfc_addr_is_ip(host)) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host) != 1) {
            return dfc_error_set(err, -EINVAL, "TLS handshake with %s: bad address", peer);
        }
    } else if (SSL_set1_host(s, host) != 1 || SSL_set_tlsext_host_name(s, host) != 1) {
        return dfc_error_set(err, -EINVAL, "TLS handshake with %s: bad host name", peer);
    }
    return 0;
}

static int handshake(struct dfc_tls_ctx *c, int fd, const char *host, const char *peer,
                     int64_t deadline, struct dfc_tls_conn **ret, struct dfc_error *err) {
    SSL_CTX *x = current(c);
    struct dfc_tls_conn *t = calloc(1, sizeof(*t));
    SSL *s = SSL_new(x);
    SSL_CTX_free(x); /* the SSL holds its own reference */
    if (t == NULL || s == NULL) {
        free(t);
        SSL_free(s);
        return dfc_error_set(err, -ENOMEM, "TLS handshake with %s: out of memory", peer);
    }
    t->ssl = s;
    t->fd = fd;
    int r = 0;
    (void)pthread_once(&nosig_once, nosig_init);
    BIO *bio = nosig_method != NULL ? BIO_new(nosig_method) : NULL;
    if (bio == NULL) {
        r = dfc_error_set(err, -ENOMEM, "TLS handshake with %s: cannot attach the socket", peer);
    } else {
        BIO_set_fd(bio, fd, BIO_NOCLOSE);
        BIO_set_data(bio, t);     /* its write buffer */
        SSL_set_bio(s, bio, bio); /* s owns it now */
        /* a configured server name replaces the dialled address in the check */
        const char *name = host != NULL && c->server_name != NULL ? c->server_name : host;
        r = name != NULL ? expect_name(s, name, peer, err) : 0;
    }
    char why[400];
    while (r == 0) {
        ERR_clear_error();
        int k = host != NULL ? SSL_connect(s) : SSL_accept(s);
        if (k == 1) {
            break;
        }
        bool eof;
        int w = after(t, k, deadline, &eof, why, sizeof(why));
        if (w < 0) {
            r = dfc_error_set(err, w == -EPROTO ? -ECONNABORTED : w,
                              "TLS handshake with %s failed: %s", peer, why);
        }
    }
    if (r < 0) {
        dfc_tls_conn_free(t);
        return r;
    }
    *ret = t;
    return 0;
}

int dfc_tls_accept(struct dfc_tls_ctx *c, int fd, const char *peer, int64_t deadline,
                   struct dfc_tls_conn **ret, struct dfc_error *err) {
    return handshake(c, fd, NULL, peer != NULL ? peer : "?", deadline, ret, err);
}

int dfc_tls_connect(struct dfc_tls_ctx *c, int fd, const char *host, unsigned port,
                    int64_t deadline, struct dfc_tls_conn **ret, struct dfc_error *err) {
    if (host == NULL || host[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "TLS: no host to verify");
    }
    char peer[DFC_ADDR_STR_MAX];
    dfc_addr_format(host, port, peer, sizeof(peer));
    return handshake(c, fd, host, peer, deadline, ret, err);
}

int dfc_tls_read_some(struct dfc_tls_conn *t, void *buf, size_t n, int64_t deadline,
                      size_t *ret_got, struct dfc_error *err) {
    char why[400];
    *ret_got = 0;
    for (;;) {
        size_t k = 0;
        ERR_clear_error();
        int ok = SSL_read_ex(t->ssl, buf, n, &k);
        if (ok == 1) {
            *ret_got = k;
            return 0;
        }
        bool eof;
        int w = after(t, ok, deadline, &eof, why, sizeof(why));
        if (w < 0) {
            return dfc_error_set(err, w, "TLS: %s", why);
        }
    }
}

int dfc_tls_read(struct dfc_tls_conn *t, void *buf, size_t n, int64_t deadline, size_t *ret_got,
                 struct dfc_error *err) {
    size_t got = 0;
    int r = 0;
    while (got < n && r == 0) {
        size_t k = 0;
        r = dfc_tls_read_some(t, (unsigned char *)buf + got, n - got, deadline, &k, err);
        got += k;
    }
    if (ret_got != NULL) {
        *ret_got = got;
    }
    return r;
}

bool dfc_tls_conn_idle_ok(struct dfc_tls_conn *t) {
    unsigned char b[64];
    size_t k = 0;
    ERR_clear_error();
    int ok = SSL_read_ex(t->ssl, b, sizeof(b), &k);
    bool idle = ok != 1 && SSL_get_error(t->ssl, ok) == SSL_ERROR_WANT_READ;
    ERR_clear_error();
    return idle;
}

int dfc_tls_write(struct dfc_tls_conn *t, const void *buf, size_t n, int64_t deadline,
                  struct dfc_error *err) {
    size_t done = 0;
    char why[400];
    while (done < n) {
        size_t k = 0;
        ERR_clear_error();
        int ok = SSL_write_ex(t->ssl, (const unsigned char *)buf + done, n - done, &k);
        if (ok == 1) {
            done += k;
            continue;
        }
        bool eof;
        int w = after(t, ok, deadline, &eof, why, sizeof(why));
        if (w < 0) {
            return dfc_error_set(err, w == -EPROTO ? -EPIPE : w, "TLS: %s", why);
        }
    }
    /* the records still in the connection's buffer (nosig_write) */
    for (;;) {
        int f = wflush(t);
        if (f == 0) {
            return 0;
        }
        if (f == -EAGAIN) {
            f = dfc_wait_fd(t->fd, POLLOUT, deadline);
        }
        if (f < 0) {
            return dfc_error_set(err, f, "TLS: %s",
                                 f == -ETIMEDOUT ? "timed out" : dfc_strerror(f));
        }
    }
}

void dfc_tls_shutdown(struct dfc_tls_conn *t) {
    if (t != NULL) {
        ERR_clear_error();
        (void)SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
}

void dfc_tls_conn_free(struct dfc_tls_conn *t) {
    if (t != NULL) {
        SSL_free(t->ssl);
        free(t->wbuf);
        free(t);
    }
}

void dfc_tls_conn_identity(const struct dfc_tls_conn *t, struct dfc_tls_identity *ret) {
    memset(ret, 0, sizeof(*ret));
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    if (cert == NULL) {
        return;
    }
    ret->has_cert = true;
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) {
        return;
    }
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == GEN_IPADD && ret->n_ips < DFC_TLS_ID_MAX) {
            const ASN1_OCTET_STRING *o = g->d.iPAddress;
            struct sockaddr_storage ss = {0};
            int len = ASN1_STRING_length(o);
            const unsigned char *d = ASN1_STRING_get0_data(o);
            if (len == 4) {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                a->sin_family = AF_INET;
                memcpy(&a->sin_addr, d, 4);
            } else if (len == 16) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                a->sin6_family = AF_INET6;
                memcpy(&a->sin6_addr, d, 16);
            } else {
                continue;
            }
            if (dfc_addr_ip((struct sockaddr *)&ss, ret->ips[ret->n_ips], DFC_TLS_IP_MAX) == 0) {
                ret->n_ips++;
            }
        } else if (g->type == GEN_URI && ret->n_uris < DFC_TLS_ID_MAX) {
            const ASN1_IA5STRING *u = g->d.uniformResourceIdentifier;
            int len = ASN1_STRING_length(u);
            const unsigned char *d = ASN1_STRING_get0_data(u);
            if (len > 0 && len < DFC_TLS_URI_MAX && memchr(d, '\0', (size_t)len) == NULL) {
                memcpy(ret->uris[ret->n_uris], d, (size_t)len);
                ret->uris[ret->n_uris][len] = '\0';
                ret->n_uris++;
            }
        }
    }
    GENERAL_NAMES_free(names);
}
