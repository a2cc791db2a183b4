/*
 * redis_conn.c - one connection of the scheduler's Redis client, TCP or TLS (redis_conn.h).
 *
 * WHY THIS WAY
 *   Debian's hiredis 0.14 has no TLS (hiredis_ssl came with 1.0), and its redisContext does
 *   its own read(2) and write(2) on the socket, so no TLS layer can be slid under it. Rather
 *   than a second, vendored Redis client or an stunnel-like thread per connection, the client
 *   owns its socket and, with TLS, an OpenSSL stream of lib's TLS layer (the same libssl
 *   Debian's Redis and gRPC use, kept up to date by the distribution), and keeps hiredis for what
 * it is good at and tested for: redisFormatCommandArgv writes the RESP request, a redisReader
 * parses the replies into the same redisReply objects as before. Plaintext takes the same path with
 *   send(2) and recv(2), so both are one code, covered by every test.
 *
 * DESIGN
 *   The socket is non-blocking; each step (connect, handshake, write, read) polls with what is
 *   left of the deadline, so the deadline bounds it all except name resolution (getaddrinfo
 *   blocks, as it did in hiredis: give IP addresses where a hung DNS must not stall a call).
 *   send(2) uses MSG_NOSIGNAL, and so do the TLS layer's writes: a server that went away
 *   costs an error, not SIGPIPE.
 *
 *   TLS is lib's OpenSSL layer (dfc/tls_ssl.h), the one Vortex uses, with what a service
 *   outside the cluster needs (dfc_tls_ctx_opts): TLS 1.2 at least (1.3 offered first), the
 *   server's chain checked against database.redis.tls.caCert (the system's roots when it is
 *   empty) and its certificate against the host dialled (an IP SAN for an IP address, a DNS
 *   name otherwise, which is also sent as SNI), a client certificate when
 *   database.redis.tls.cert is set. insecureSkipVerify turns both checks off (redis.c warns at
 *   start). Rotated files are picked up without a restart: a new connection looks at them (at
 *   most once a second) and loads them again when one changed; connections already open keep
 *   their session.
 *
 * Locks: none of its own; the dfc_tls_ctx's lock guards the current SSL_CTX (tls_ssl.h).
 */
#include "redis_conn.h"
#include "redis_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/tls_ssl.h"
#include "dfc/units.h"

#define READ_CHUNK   16384
#define TLS_CHECK_NS ((int64_t)DFC_NS_PER_SEC) /* how often the TLS files are looked at */

struct sched_redis_tls {
    struct dfc_tls_ctx *ctx;
    bool verify;
};

struct sched_redis_conn {
    int fd;
    struct dfc_tls_conn *tls; /* NULL: plaintext */
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

/* ---- TLS context ---- */

static void tls_reloaded(void *ud, const struct dfc_error *err) {
    (void)ud;
    if (err == NULL) {
        DFC_LOG(DFC_LOG_INFO, "redis.tls_reloaded",
                "msg=\"new connections use the new database.redis.tls files\"");
    } else {
        DFC_LOG(DFC_LOG_WARN, "redis.tls_reload_failed",
                "msg=\"%s; new connections keep the previous files\"", err->msg);
    }
}

void sched__redis_tls_free(struct sched_redis_tls *t) {
    if (t != NULL) {
        dfc_tls_ctx_free(t->ctx);
        free(t);
    }
}

int sched__redis_tls_new(const struct sched_redis_opts *opts, struct sched_redis_tls **ret,
                         struct dfc_error *err) {
    *ret = NULL;
    const struct dfc_tls_files f = {opts->tls_ca_cert, opts->tls_cert, opts->tls_key, NULL};
    if (!set(f.ca_cert) && !set(f.cert) && !set(f.key) && !opts->tls_insecure_skip_verify) {
        return 0;
    }
    if (set(f.cert) != set(f.key)) {
        return dfc_error_set(err, -EINVAL,
                             "database.redis.tls.cert and database.redis.tls.key: both or neither");
    }
    struct sched_redis_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis TLS: out of memory");
    }
    t->verify = !opts->tls_insecure_skip_verify;
    const struct dfc_tls_ctx_opts o = {.tls12 = true,
                                       .system_roots = true,
                                       .skip_verify = !t->verify,
                                       .option_prefix = "database.redis.tls.",
                                       .on_reload = tls_reloaded};
    int rc = dfc_tls_ctx_new_opts(set(f.cert) ? DFC_TLS_MUTUAL : DFC_TLS_SERVER_AUTH, &f, false,
                                  TLS_CHECK_NS, &o, &t->ctx, err);
    if (rc < 0) {
        free(t);
        return rc;
    }
    *ret = t;
    return 0;
}

bool sched__redis_tls_verifies(const struct sched_redis_tls *t) {
    return t != NULL && t->verify;
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
    dfc_tls_conn_free(c->tls); /* no close_notify: the server drops the connection either way */
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

/* The TLS handshake on c: the certificate must name host (unless insecureSkipVerify). */
static int handshake(struct sched_redis_conn *c, struct sched_redis_tls *tls,
                     const struct dfc_hostport *hp, const char *a, int64_t deadline_ms,
                     struct dfc_error *err) {
    struct dfc_error e = {0};
    int rc = dfc_tls_connect(tls->ctx, c->fd, hp->host, hp->port, deadline_ms * DFC_NS_PER_MS,
                             &c->tls, &e);
    if (rc == 0) {
        return 0;
    }
    const char *why = rc == -ETIMEDOUT ? "no TLS handshake within the deadline" : e.msg;
    DFC_LOG(DFC_LOG_WARN, "redis.tls_failed", "peer=%s reason=\"%s\"", a, why);
    return dfc_error_set(err, rc == -ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED, "redis %s: %s", a,
                         why);
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
        rc = handshake(c, tls, hp, a, deadline_ms, err);
        if (rc < 0) {
            sched__redis_conn_free(c);
            return rc;
        }
    }
    *ret = c;
    return 0;
}

/* ---- I/O ---- */

/* The error of a TLS read or write that failed with rc (e from the TLS layer). */
static int tls_failed(int rc, const char *a, const struct dfc_error *e, struct dfc_error *err) {
    if (rc == -ETIMEDOUT) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: no reply within the deadline", a);
    }
    if (rc == -EPROTO || rc == -EPIPE) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: Server closed the connection", a);
    }
    if (rc == -ECONNABORTED) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a, e->msg);
    }
    return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", a, errtext(-rc));
}

static int write_all(struct sched_redis_conn *c, const char *a, const char *p, size_t len,
                     int64_t deadline_ms, struct dfc_error *err) {
    if (c->tls != NULL) {
        struct dfc_error e = {0};
        int rc = dfc_tls_write(c->tls, p, len, deadline_ms * DFC_NS_PER_MS, &e);
        return rc < 0 ? tls_failed(rc, a, &e, err) : 0;
    }
    while (len > 0) {
        size_t chunk = len > (1U << 30) ? (1U << 30) : len;
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
        if (c->tls != NULL) {
            struct dfc_error e = {0};
            size_t k = 0;
            int rc =
                dfc_tls_read_some(c->tls, buf, sizeof(buf), deadline_ms * DFC_NS_PER_MS, &k, &e);
            if (rc < 0) {
                return tls_failed(rc, a, &e, err);
            }
            n = (ssize_t)k;
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
    if (c->tls != NULL) {
        return dfc_tls_conn_idle_ok(c->tls); /* TLS 1.3 session tickets are read, not data */
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0; /* else EOF, an error or a reply nobody asked for */
}
