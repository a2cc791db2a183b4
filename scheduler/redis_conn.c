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
 *   insecureSkipVerify turns both checks off (redis.c warns at start).
 */
#include "redis_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/log.h"

#define READ_CHUNK 16384

struct sched_redis_tls {
    SSL_CTX *ctx;
    bool verify;
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

static int load_failed(struct sched_redis_tls *t, const char *key, const char *path,
                       struct dfc_error *err) {
    char e[256];
    int rc = dfc_error_set(err, -EINVAL, "database.redis.tls.%s `%s`: %s", key, path,
                           ssl_error(e, sizeof(e)));
    sched__redis_tls_free(t);
    return rc;
}

int sched__redis_tls_new(const struct sched_redis_opts *opts, struct sched_redis_tls **ret,
                         struct dfc_error *err) {
    *ret = NULL;
    if (!set(opts->tls_ca_cert) && !set(opts->tls_cert) && !set(opts->tls_key) &&
        !opts->tls_insecure_skip_verify) {
        return 0;
    }
    if (set(opts->tls_cert) != set(opts->tls_key)) {
        return dfc_error_set(err, -EINVAL,
                             "database.redis.tls.cert and database.redis.tls.key: both or neither");
    }
    struct sched_redis_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis TLS: out of memory");
    }
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL) {
        return load_failed(t, "caCert", "", err);
    }
    t->verify = !opts->tls_insecure_skip_verify;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (set(opts->tls_ca_cert)) {
        if (SSL_CTX_load_verify_locations(t->ctx, opts->tls_ca_cert, NULL) != 1) {
            return load_failed(t, "caCert", opts->tls_ca_cert, err);
        }
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        return load_failed(t, "caCert", "(system roots)", err);
    }
    if (set(opts->tls_cert)) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, opts->tls_cert) != 1) {
            return load_failed(t, "cert", opts->tls_cert, err);
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, opts->tls_key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(t->ctx) != 1) {
            return load_failed(t, "key", opts->tls_key, err);
        }
    }
    *ret = t;
    return 0;
}

void sched__redis_tls_free(struct sched_redis_tls *t) {
    if (t != NULL) {
        SSL_CTX_free(t->ctx);
        free(t);
    }
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
static int handshake(struct sched_redis_conn *c, const struct sched_redis_tls *tls,
                     const char *host, const char *a, int64_t deadline_ms, struct dfc_error *err) {
    ERR_clear_error();
    c->ssl = SSL_new(tls->ctx);
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

int sched__redis_conn_dial(const struct dfc_hostport *hp, const struct sched_redis_tls *tls,
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
