/*
 * redis_conn.c - one connection of the scheduler's Redis client, TCP or TLS (redis_conn.h).
 *
 * WHY THIS WAY
 *   Debian's hiredis 0.14 has no TLS (hiredis_ssl came with 1.0), and its redisContext does
 *   its own read(2) and write(2) on the socket, so no TLS layer can be slid under it. Rather
 *   than a second, vendored Redis client or an stunnel-like thread per connection, the client
 *   owns its socket and, with TLS, an OpenSSL SSL object (the same libssl Debian's Redis and
 *   gRPC use, kept up to date by the distribution), and keeps hiredis for what it is good at
 *   and tested for: redisFormatCommandArgv writes the RESP request, a redisReader parses the
 *   replies into the same redisReply objects as before. Plaintext takes the same path with
 *   send(2) and recv(2), so both are one code, covered by every test.
 *
 * DESIGN
 *   The socket is non-blocking; each step (connect, handshake, write, read) polls with what is
 *   left of the deadline, so the deadline bounds it all except name resolution (getaddrinfo
 *   blocks, as it did in hiredis: give IP addresses where a hung DNS must not stall a call).
 *   send(2) uses MSG_NOSIGNAL; OpenSSL writes with write(2), so with TLS the process must
 *   ignore SIGPIPE (dfc_signals_block does).
 *
 *   TLS: TLS 1.2 at least (OpenSSL offers 1.3 first), the server's chain checked against
 *   database.redis.tls.caCert (the system's roots when it is empty) and its certificate
 *   against the host dialled (an IP SAN for an IP address, a DNS name otherwise, which is
 *   also sent as SNI), a client certificate when database.redis.tls.cert is set.
 *   insecureSkipVerify turns both checks off (redis.c warns at start). Rotated files are
 *   picked up without a restart: a new connection looks at them (at most once a second) and
 *   loads them again when one changed; connections already open keep their session.
 *
 * Locks: sched_redis_tls.mu guards the current SSL_CTX and the files' stamps; held while the
 * files are read, never across network I/O, and nothing else is locked under it.
 */
#include "redis_conn.h"
#include "redis_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/log.h"

#define READ_CHUNK   16384
#define TLS_CHECK_MS 1000 /* how often the TLS files are looked at for a rotation */

/* What identifies one version of a file: a rotation (a rename over it, Kubernetes's swap of a
 * Secret volume's ..data link, or a rewrite) changes at least one of these. */
struct file_stamp {
    bool ok; /* stat worked */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

struct sched_redis_tls {
    /* Immutable after sched__redis_tls_new. */
    bool verify;
    char *path[3]; /* caCert, cert, key; NULL: not set */

    pthread_mutex_t mu;
    /* Under mu. */
    SSL_CTX *ctx;               /* the newest context that loaded */
    struct file_stamp stamp[3]; /* the files as last looked at */
    int64_t checked_ms;         /* when they were last looked at */
};

struct sched_redis_conn {
    int fd;
    SSL *ssl; /* NULL: plaintext */
    redisReader *reader;
};

static bool set(const char *s) {
    return s != NULL && *s != '\0';
}

/* libc's text for errno e ("Connection refused"), as hiredis worded it. */
static const char *errtext(int e) {
    const char *s = strerrordesc_np(e);
    return s != NULL ? s : "unknown error";
}

/* The newest OpenSSL error of this thread as text ("" when none); clears the queue. */
static const char *ssl_error(char *buf, size_t len) {
    unsigned long e = ERR_peek_last_error();
    buf[0] = '\0';
    if (e != 0) {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

/* ---- TLS context ---- */

static const char *const key_names[3] = {"caCert", "cert", "key"};

/* A new context from the files: -EINVAL naming the key of a file that does not load. */
static int build_ctx(const struct sched_redis_tls *t, SSL_CTX **ret, struct dfc_error *err) {
    char e[256];
    int bad = -1;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis TLS: %s", ssl_error(e, sizeof(e)));
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (t->path[0] != NULL ? SSL_CTX_load_verify_locations(ctx, t->path[0], NULL) != 1
                           : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        bad = 0;
    } else if (t->path[1] != NULL && SSL_CTX_use_certificate_chain_file(ctx, t->path[1]) != 1) {
        bad = 1;
    } else if (t->path[1] != NULL &&
               (SSL_CTX_use_PrivateKey_file(ctx, t->path[2], SSL_FILETYPE_PEM) != 1 ||
                SSL_CTX_check_private_key(ctx) != 1)) {
        bad = 2;
    }
    if (bad >= 0) {
        SSL_CTX_free(ctx);
        return dfc_error_set(err, -EINVAL, "database.redis.tls.%s `%s`: %s", key_names[bad],
                             t->path[bad] != NULL ? t->path[bad] : "(system roots)",
                             ssl_error(e, sizeof(e)));
    }
    *ret = ctx;
    return 0;
}

static void stamp_files(const struct sched_redis_tls *t, struct file_stamp st[3]) {
    for (int i = 0; i < 3; i++) {
        struct stat sb;
        st[i] = (struct file_stamp){0};
        if (t->path[i] != NULL && stat(t->path[i], &sb) == 0) {
            st[i] = (struct file_stamp){.ok = true,
                                        .dev = sb.st_dev,
                                        .ino = sb.st_ino,
                                        .size = sb.st_size,
                                        .mtime = sb.st_mtim};
        }
    }
}

static bool same_stamp(const struct file_stamp *a, const struct file_stamp *b) {
    return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void sched__redis_tls_free(struct sched_redis_tls *t) {
    if (t == NULL) {
        return;
    }
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->mu);
    for (int i = 0; i < 3; i++) {
        free(t->path[i]);
    }
    free(t);
}

int sched__redis_tls_new(const struct sched_redis_opts *opts, struct sched_redis_tls **ret,
                         struct dfc_error *err) {
    *ret = NULL;
    const char *in[3] = {opts->tls_ca_cert, opts->tls_cert, opts->tls_key};
    if (!set(in[0]) && !set(in[1]) && !set(in[2]) && !opts->tls_insecure_skip_verify) {
        return 0;
    }
    if (set(in[1]) != set(in[2])) {
        return dfc_error_set(err, -EINVAL,
                             "database.redis.tls.cert and database.redis.tls.key: both or neither");
    }
    struct sched_redis_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis TLS: out of memory");
    }
    pthread_mutex_init(&t->mu, NULL);
    t->verify = !opts->tls_insecure_skip_verify;
    for (int i = 0; i < 3; i++) {
        if (set(in[i]) && (t->path[i] = strdup(in[i])) == NULL) {
            sched__redis_tls_free(t);
            return dfc_error_set(err, -ENOMEM, "redis TLS: out of memory");
        }
    }
    stamp_files(t, t->stamp);
    t->checked_ms = dfc_mono_ms();
    int rc = build_ctx(t, &t->ctx, err);
    if (rc < 0) {
        sched__redis_tls_free(t);
        return rc;
    }
    *ret = t;
    return 0;
}

bool sched__redis_tls_verifies(const struct sched_redis_tls *t) {
    return t != NULL && t->verify;
}

/* The context for a new connection (a reference the caller SSL_CTX_free()s). At most once per
 * TLS_CHECK_MS, looks whether a file changed, and if so loads them again; files that do not
 * load (a rotation half done) keep the previous context, with a warning, until they change
 * again. */
static SSL_CTX *tls_ctx(struct sched_redis_tls *t) {
    pthread_mutex_lock(&t->mu);
    int64_t now = dfc_mono_ms();
    if (now - t->checked_ms >= TLS_CHECK_MS) {
        t->checked_ms = now;
        struct file_stamp st[3];
        stamp_files(t, st);
        bool changed = false;
        for (int i = 0; i < 3; i++) {
            changed = changed || !same_stamp(&st[i], &t->stamp[i]);
        }
        if (changed) {
            memcpy(t->stamp, st, sizeof(st));
            SSL_CTX *fresh = NULL;
            struct dfc_error e = {0};
            if (build_ctx(t, &fresh, &e) == 0) {
                SSL_CTX_free(t->ctx);
                t->ctx = fresh;
                DFC_LOG(DFC_LOG_INFO, "redis.tls_reloaded",
                        "msg=\"new connections use the new database.redis.tls files\"");
            } else {
                DFC_LOG(DFC_LOG_WARN, "redis.tls_reload_failed",
                        "msg=\"%s; new connections keep the previous files\"", e.msg);
            }
        }
    }
    SSL_CTX *ctx = t->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_mutex_unlock(&t->mu);
    return ctx;
}

/* ---- waiting ---- */

/* Waits until fd is ready for events or deadline_ms: 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        int64_t left = deadline_ms - dfc_mono_ms();
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n > 0) {
            return 0;
        }
        if (n < 0 && errno != EINTR) {
            return -errno;
        }
    }
}

/* ---- connecting ---- */

void sched__redis_conn_free(struct sched_redis_conn *c) {
    if (c == NULL) {
        return;
    }
    if (c->ssl != NULL) {
        SSL_free(c->ssl); /* no close_notify: the server drops the connection either way */
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->reader != NULL) {
        redisReaderFree(c->reader);
    }
    free(c);
}

/* A TCP connection to one resolved address: 0 with *fd, or a negative errno. */
static int tcp_connect(const struct addrinfo *ai, int64_t deadline_ms, int *fd) {
    int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (s < 0) {
        return -errno;
    }
    if (connect(s, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(s);
            return -e;
        }
        int rc = wait_fd(s, POLLOUT, deadline_ms);
        int so = 0;
        socklen_t len = sizeof(so);
        if (rc == 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &len) < 0) {
            so = errno;
        }
        if (rc < 0 || so != 0) {
            close(s);
            return rc < 0 ? rc : -so;
        }
    }
    int one = 1;
    (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *fd = s;
    return 0;
}

/* The TLS handshake on c: the certificate must name host. */
static int handshake(struct sched_redis_conn *c, struct sched_redis_tls *tls, const char *host,
                     const char *a, int64_t deadline_ms, struct dfc_error *err) {
    SSL_CTX *ctx = tls_ctx(tls);
    ERR_clear_error();
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
        return dfc_error_set(err, -ENOMEM, "redis %s: TLS: out of memory", a);
    }
    if (dfc_addr_is_ip(host)) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1) {
            return dfc_error_set(err, -ENOMEM, "redis %s: TLS: out of memory", a);
        }
    } else if (SSL_set_tlsext_host_name(c->ssl, host) != 1 || SSL_set1_host(c->ssl, host) != 1) {
        return dfc_error_set(err, -ENOMEM, "redis %s: TLS: out of memory", a);
    }
    for (;;) {
        ERR_clear_error();
        int rc = SSL_connect(c->ssl);
        if (rc == 1) {
            return 0;
        }
        int e = SSL_get_error(c->ssl, rc);
        int saved = errno;
        int w = 0;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms);
            if (w == 0) {
                continue;
            }
        }
        char why[300], buf[256];
        long vr = SSL_get_verify_result(c->ssl);
        if (w == -ETIMEDOUT) {
            snprintf(why, sizeof(why), "no TLS handshake within the deadline");
        } else if (vr != X509_V_OK) {
            snprintf(why, sizeof(why), "TLS handshake: server certificate refused: %s",
                     X509_verify_cert_error_string(vr));
        } else if (e == SSL_ERROR_SSL) {
            snprintf(why, sizeof(why), "TLS handshake: %s", ssl_error(buf, sizeof(buf)));
        } else {
            snprintf(why, sizeof(why), "TLS handshake: %s",
                     e == SSL_ERROR_SYSCALL && saved != 0 ? errtext(saved)
                                                          : "connection closed by the server");
        }
        ERR_clear_error();
        DFC_LOG(DFC_LOG_WARN, "redis.tls_failed", "peer=%s reason=\"%s\"", a, why);
        return dfc_error_set(err, w == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED, "redis %s: %s", a,
                             why);
    }
}

int sched__redis_conn_dial(const struct dfc_hostport *hp, struct sched_redis_tls *tls,
                           int64_t deadline_ms, struct sched_redis_conn **ret,
                           struct dfc_error *err) {
    char a[DFC_ADDR_STR_MAX];
    dfc_addr_format(hp->host, hp->port, a, sizeof(a));
    if (deadline_ms <= dfc_mono_ms()) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: deadline passed before connecting", a);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ais = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", hp->port);
    int g = getaddrinfo(hp->host, port, &hints, &ais);
    if (g != 0) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a,
                             g == EAI_SYSTEM ? errtext(errno) : gai_strerror(g));
    }
    int fd = -1, rc = -ECONNREFUSED;
    for (const struct addrinfo *ai = ais; ai != NULL && fd < 0; ai = ai->ai_next) {
        rc = tcp_connect(ai, deadline_ms, &fd);
        if (rc == -ETIMEDOUT) {
            break;
        }
    }
    freeaddrinfo(ais);
    if (fd < 0) {
        return dfc_error_set(err, rc == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED, "redis %s: %s", a,
                             rc == -ETIMEDOUT ? "connect timed out" : errtext(-rc));
    }
    struct sched_redis_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return dfc_error_set(err, -ENOMEM, "redis %s: out of memory", a);
    }
    c->fd = fd;
    c->reader = redisReaderCreate();
    if (c->reader == NULL) {
        sched__redis_conn_free(c);
        return dfc_error_set(err, -ENOMEM, "redis %s: out of memory", a);
    }
    sched__redis_bound_replies(c->reader);
    if (tls != NULL) {
        rc = handshake(c, tls, hp->host, a, deadline_ms, err);
        if (rc < 0) {
            sched__redis_conn_free(c);
            return rc;
        }
    }
    *ret = c;
    return 0;
}

/* ---- I/O ---- */

/* What an SSL call that returned rc left to do: 0 after waiting (call again), or an error. */
static int ssl_retry(struct sched_redis_conn *c, int rc, const char *a, int64_t deadline_ms,
                     struct dfc_error *err) {
    int e = SSL_get_error(c->ssl, rc);
    int saved = errno;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        int w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms);
        if (w == 0) {
            return 0;
        }
        return dfc_error_set(err, w == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
                             w == -ETIMEDOUT ? "redis %s: no reply within the deadline"
                                             : "redis %s: poll failed",
                             a);
    }
    char buf[256];
    if (e == SSL_ERROR_SSL) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: TLS: %s", a,
                             ssl_error(buf, sizeof(buf)));
    }
    ERR_clear_error();
    if (e == SSL_ERROR_SYSCALL && saved != 0) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a, errtext(saved));
    }
    return dfc_error_set(err, -ECONNREFUSED, "redis %s: Server closed the connection", a);
}

static int write_all(struct sched_redis_conn *c, const char *a, const char *p, size_t len,
                     int64_t deadline_ms, struct dfc_error *err) {
    while (len > 0) {
        size_t chunk = len > (1U << 30) ? (1U << 30) : len;
        if (c->ssl != NULL) {
            ERR_clear_error();
            int n = SSL_write(c->ssl, p, (int)chunk);
            if (n <= 0) {
                int rc = ssl_retry(c, n, a, deadline_ms, err);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            p += n;
            len -= (size_t)n;
            continue;
        }
        ssize_t n = send(c->fd, p, chunk, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a, errtext(errno));
            }
            int w = wait_fd(c->fd, POLLOUT, deadline_ms);
            if (w < 0) {
                return dfc_error_set(err, w == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
                                     "redis %s: no reply within the deadline", a);
            }
            continue;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads once (waiting until the deadline) and feeds the reader. */
static int read_some(struct sched_redis_conn *c, const char *a, int64_t deadline_ms,
                     struct dfc_error *err) {
    char buf[READ_CHUNK];
    for (;;) {
        ssize_t n;
        if (c->ssl != NULL) {
            ERR_clear_error();
            int k = SSL_read(c->ssl, buf, sizeof(buf));
            if (k <= 0) {
                int rc = ssl_retry(c, k, a, deadline_ms, err);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            n = k;
        } else {
            n = recv(c->fd, buf, sizeof(buf), 0);
            if (n == 0) {
                return dfc_error_set(err, -ECONNREFUSED, "redis %s: Server closed the connection",
                                     a);
            }
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                if (errno != EAGAIN && errno != EWOULDBLOCK) {
                    return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a, errtext(errno));
                }
                int w = wait_fd(c->fd, POLLIN, deadline_ms);
                if (w < 0) {
                    return dfc_error_set(err, w == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
                                         "redis %s: no reply within the deadline", a);
                }
                continue;
            }
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            return dfc_error_set(err, -ENOMEM, "redis %s: out of memory", a);
        }
        return 0;
    }
}

static int read_reply(struct sched_redis_conn *c, const char *a, int64_t deadline_ms,
                      redisReply **reply, struct dfc_error *err) {
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
            if (c->reader->err == REDIS_ERR_OOM) {
                return dfc_error_set(err, -ENOMEM,
                                     "redis %s: out of memory, or a reply beyond the bounds (an "
                                     "array of more than %d elements, a string of more than %zu "
                                     "bytes)",
                                     a, SCHED_REDIS_MAX_ELEMENTS, SCHED_REDIS_MAX_STRING);
            }
            return dfc_error_set(err, -ECONNREFUSED, "redis %s: protocol error: %s", a,
                                 c->reader->errstr);
        }
        if (rep != NULL) {
            *reply = rep;
            return 0;
        }
        int rc = read_some(c, a, deadline_ms, err);
        if (rc < 0) {
            return rc;
        }
    }
}

int sched__redis_conn_run(struct sched_redis_conn *c, const char *addr, int64_t deadline_ms,
                          size_t n, const struct sched_redis_cmd *cmds, redisReply **replies,
                          struct dfc_error *err) {
    if (deadline_ms <= dfc_mono_ms()) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: deadline passed", addr);
    }
    /* One buffer for all n commands: one write, as hiredis's output buffer did. */
    char *out = NULL;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char *one = NULL;
        int k = redisFormatCommandArgv(&one, cmds[i].argc, cmds[i].argv, cmds[i].lens);
        char *grown = k >= 0 ? realloc(out, len + (size_t)k) : NULL;
        if (grown == NULL) {
            if (k >= 0) {
                redisFreeCommand(one);
            }
            free(out);
            return dfc_error_set(err, -ENOMEM, "redis %s: out of memory", addr);
        }
        memcpy(grown + len, one, (size_t)k);
        redisFreeCommand(one);
        out = grown;
        len += (size_t)k;
    }
    int rc = write_all(c, addr, out, len, deadline_ms, err);
    free(out);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = read_reply(c, addr, deadline_ms, &replies[i], err);
        if (rc < 0) {
            for (size_t j = 0; j < i; j++) {
                freeReplyObject(replies[j]);
                replies[j] = NULL;
            }
        }
    }
    return rc;
}

bool sched__redis_conn_idle_ok(struct sched_redis_conn *c) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 0) {
        return true;
    }
    if (c->ssl == NULL) {
        return false; /* EOF, an error or a reply nobody asked for */
    }
    /* Records without data (a TLS 1.3 server sends its session tickets after the handshake)
     * make the socket readable too: read them; only data or the end of the stream is bad. */
    char b[64];
    ERR_clear_error();
    int k = SSL_read(c->ssl, b, sizeof(b));
    bool ok = k <= 0 && SSL_get_error(c->ssl, k) == SSL_ERROR_WANT_READ;
    ERR_clear_error();
    return ok;
}
