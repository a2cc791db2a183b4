/*
 * http.c - the /metrics, /healthz and /readyz endpoint on libmicrohttpd (dfc/http.h).
 *
 * libmicrohttpd parses HTTP; this file accepts and routes. The daemon runs one internal polling
 * thread (poll(), so descriptor numbers above FD_SETSIZE are fine) that answers every request
 * itself: the answers are small and computed from atomics or a bounded callback, so a thread
 * per connection would buy nothing. Every answer closes its connection (Connection: close), so
 * a client holds a slot of libmicrohttpd for one request, not for a keep-alive idle period.
 *
 * DESIGN: slow clients. libmicrohttpd's timeout is an idle timeout, so a client that sends a
 * byte of its request now and then (slowloris) would hold a slot for good, and with every slot
 * held the kubelet's probes wait. So this file accepts the connections itself, on a thread of
 * its own, and keeps each in a waiting room (conn_gate.h) until its request head (through the
 * empty line) is in the socket's receive queue, seen with MSG_PEEK, never read; only then is it
 * handed to libmicrohttpd (MHD_add_connection), which answers at once. A connection whose head
 * is not complete header_timeout_ms after its accept is closed however it trickles. The waiting
 * room holds at most max_conns_per_ip connections of one address and max_conns in all; a new
 * connection beyond either takes the place of the oldest waiting one (of its address, or of
 * all): a probe's head arrives within milliseconds, so it is never the oldest, and a flood of
 * silent connections only displaces itself. libmicrohttpd's own MHD_OPTION_CONNECTION_LIMIT
 * and MHD_OPTION_PER_IP_CONNECTION_LIMIT bound the connections being answered, and
 * MHD_OPTION_CONNECTION_TIMEOUT a client that does not take its answer.
 */
#include "dfc/http.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_gate.h"
#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/keycount.h"
#include "dfc/log.h"
#include "dfc/metrics.h"

/* A request head longer than this is handed on as it is (libmicrohttpd answers it). */
#define HEAD_MAX 4096

struct dfc_http {
    struct MHD_Daemon *mhd;
    struct dfc_metrics *metrics;
    dfc_http_ready_fn ready;
    void *ready_arg;
    char name[48];
    int lfd;
    int wake[2]; /* a byte on wake[1] stops the accept thread */
    pthread_t accept_th;
    bool accepting;
    unsigned max_waiting, max_waiting_per_ip;
    int64_t header_timeout_ms;
    struct dfc_keycount waiting_ips; /* accept thread only */
};

/* A waiting connection's peer (the gate's arg). */
struct waiting {
    struct sockaddr_storage sa;
    socklen_t len;
    char ip[INET6_ADDRSTRLEN];
};

/* Queues resp (destroyed here; NULL: out of memory) with its Content-Type. */
static enum MHD_Result queue(struct MHD_Connection *conn, unsigned status, const char *type,
                             struct MHD_Response *resp, bool allow_get) {
    if (resp == NULL) {
        return MHD_NO;
    }
    (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow_get) {
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
    (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* A static text, copied into the response. */
static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned status, const char *text,
                                   bool allow_get) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    return queue(conn, status, "text/plain; charset=utf-8", resp, allow_get);
}

/* A malloc'ed body the response takes ownership of (freed on every path). */
static enum MHD_Result answer_owned(struct MHD_Connection *conn, unsigned status, const char *type,
                                    char *owned, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, owned, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(owned);
    }
    return queue(conn, status, type, resp, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    struct dfc_http *h = cls;
    /* The first call only announces the request; a body (which GET has none of) would follow
     * in later calls. Answer on the second, once any body is consumed. */
    if (*con_cls == NULL) {
        *con_cls = h;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* discarded: no route takes a body */
        return MHD_YES;
    }
    bool metrics = strcmp(url, "/metrics") == 0 && h->metrics != NULL;
    bool healthz = strcmp(url, "/healthz") == 0;
    bool readyz = strcmp(url, "/readyz") == 0;
    if (!metrics && !healthz && !readyz) {
        return answer_text(conn, MHD_HTTP_NOT_FOUND, "not found\n", false);
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", true);
    }
    if (healthz) {
        return answer_text(conn, MHD_HTTP_OK, "ok\n", false);
    }
    if (readyz) {
        char why[256] = "";
        if (h->ready != NULL && h->ready(h->ready_arg, why, sizeof(why)) < 0) {
            char *body = NULL;
            if (asprintf(&body, "not ready: %s\n", why) < 0) {
                return MHD_NO;
            }
            return answer_owned(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                                body, strlen(body));
        }
        return answer_text(conn, MHD_HTTP_OK, "ok\n", false);
    }
    char *body;
    size_t len;
    if (dfc_metrics_render(h->metrics, &body, &len) < 0) {
        return answer_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", false);
    }
    return answer_owned(conn, MHD_HTTP_OK, DFC_METRICS_CONTENT_TYPE, body, len);
}

/* libmicrohttpd's own errors (a failed accept, a refused connection) as debug lines; fmt is
 * libmicrohttpd's printf format. */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt,
                                                             va_list ap) {
    if (DFC_LOG_DEBUG < dfc_log_threshold) {
        return;
    }
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
        msg[--n] = '\0';
    }
    dfc_log_write(DFC_LOG_DEBUG, "http.error", "server=%s msg=\"%s\"", (const char *)cls, msg);
}

/* Closes waiting connection i of the gate (never handed on). */
static void drop_waiting(struct dfc_http *h, struct conn_gate *g, size_t i) {
    void *arg;
    (void)close(conn_gate_take(g, i, &arg));
    struct waiting *w = arg;
    dfc_keycount_put(&h->waiting_ips, w->ip);
    free(w);
}

/* Hands waiting connection i to libmicrohttpd (which closes it if it cannot take it). */
static void hand_on(struct dfc_http *h, struct conn_gate *g, size_t i) {
    void *arg;
    int fd = conn_gate_take(g, i, &arg);
    struct waiting *w = arg;
    dfc_keycount_put(&h->waiting_ips, w->ip);
    (void)MHD_add_connection(h->mhd, fd, (const struct sockaddr *)&w->sa, w->len);
    free(w);
}

/* The oldest waiting connection from ip; g->n > 0 and one of them is from ip. */
static size_t oldest_of(const struct conn_gate *g, const char *ip) {
    size_t best = g->n;
    for (size_t i = 0; i < g->n; i++) {
        const struct waiting *w = g->wait[i].arg;
        if (strcmp(w->ip, ip) == 0 &&
            (best == g->n || g->wait[i].since_ms < g->wait[best].since_ms)) {
            best = i;
        }
    }
    return best;
}

static void accept_one(struct dfc_http *h, struct conn_gate *g) {
    struct waiting *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return;
    }
    w->len = sizeof(w->sa);
    int fd = accept4(h->lfd, (struct sockaddr *)&w->sa, &w->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        free(w);
        if (errno == EMFILE || errno == ENFILE) {
            usleep(100000); /* out of descriptors: back off instead of spinning */
        }
        return;
    }
    (void)dfc_addr_ip((const struct sockaddr *)&w->sa, w->ip, sizeof(w->ip));
    /* Beyond a bound, the oldest waiting connection (of this address, else of all) gives way. */
    if (dfc_keycount_get(&h->waiting_ips, w->ip) >= h->max_waiting_per_ip) {
        drop_waiting(h, g, oldest_of(g, w->ip));
    } else if (g->n >= h->max_waiting) {
        drop_waiting(h, g, conn_gate_oldest(g));
    }
    if (dfc_keycount_take(&h->waiting_ips, w->ip, 0) < 0) {
        (void)close(fd);
        free(w);
        return;
    }
    if (conn_gate_add(g, fd, 1, dfc_mono_ms() + h->header_timeout_ms, w) < 0) {
        dfc_keycount_put(&h->waiting_ips, w->ip);
        (void)close(fd);
        free(w);
    }
}

/* Waiting connection i is readable: hands it on once its request head is complete, else waits
 * for one more byte than it has. */
static void check_head(struct dfc_http *h, struct conn_gate *g, size_t i) {
    char buf[HEAD_MAX];
    ssize_t n = recv(g->pfd[CONN_GATE_FIXED + i].fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        drop_waiting(h, g, i); /* closed or failed before a request */
    } else if ((size_t)n >= sizeof(buf) || memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL ||
               memmem(buf, (size_t)n, "\n\n", 2) != NULL) {
        hand_on(h, g, i);
    } else {
        conn_gate_want(g, i, (unsigned)n + 1);
    }
}

static void *accept_main(void *arg) {
    struct dfc_http *h = arg;
    struct conn_gate g;
    if (conn_gate_init(&g, h->lfd, h->wake[0]) < 0) {
        DFC_LOG(DFC_LOG_ERROR, "http.accept_stopped", "server=%s out of memory", h->name);
        return NULL;
    }
    for (;;) {
        if (conn_gate_poll(&g) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (g.pfd[1].revents != 0) {
            break;
        }
        int64_t now = dfc_mono_ms();
        for (size_t i = g.n; i-- > 0;) {
            if (g.pfd[CONN_GATE_FIXED + i].revents != 0) {
                check_head(h, &g, i);
            } else if (g.wait[i].deadline_ms <= now) {
                drop_waiting(h, &g, i);
            }
        }
        if (g.pfd[0].revents != 0) {
            accept_one(h, &g);
        }
    }
    while (g.n > 0) {
        drop_waiting(h, &g, g.n - 1);
    }
    conn_gate_free(&g);
    return NULL;
}

/* Binds and listens on sa; the socket or a negative errno. */
static int listen_on(const struct dfc_sockaddr *sa) {
    int one = 1;
    int fd = socket(sa->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (const struct sockaddr *)&sa->ss, sa->len) < 0 || listen(fd, 128) < 0) {
        int e = -errno;
        (void)close(fd);
        return e;
    }
    return fd;
}

/* Stops and frees what start set up; h->mhd and the thread may be absent. */
static void http_free(struct dfc_http *h) {
    if (h->accepting) {
        ssize_t n = write(h->wake[1], "x", 1);
        (void)n;
        pthread_join(h->accept_th, NULL);
    }
    if (h->mhd != NULL) {
        MHD_stop_daemon(h->mhd);
    }
    for (int i = 0; i < 3; i++) {
        int fd = i == 0 ? h->lfd : h->wake[i - 1];
        if (fd >= 0) {
            (void)close(fd);
        }
    }
    dfc_keycount_free(&h->waiting_ips);
    free(h);
}

int dfc_http_start(const struct dfc_http_opts *opts, struct dfc_http **ret, struct dfc_error *err) {
    *ret = NULL;
    if (opts->port == 0) {
        return 0;
    }
    const char *name = opts->name != NULL ? opts->name : "http";
    const char *ip = opts->ip != NULL && opts->ip[0] != '\0' ? opts->ip : "127.0.0.1";
    struct dfc_sockaddr sa;
    int r = dfc_addr_sockaddr(ip, opts->port, &sa);
    if (r == -ERANGE) {
        return dfc_error_set(err, -EINVAL, "%s: port %u is out of range", name, opts->port);
    }
    if (r < 0) {
        return dfc_error_set(err, -EINVAL, "%s: `%s` is not an IP address", name, ip);
    }
    struct dfc_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return dfc_error_set(err, -ENOMEM, "%s: out of memory", name);
    }
    h->lfd = h->wake[0] = h->wake[1] = -1;
    h->metrics = opts->metrics;
    h->ready = opts->ready;
    h->ready_arg = opts->ready_arg;
    snprintf(h->name, sizeof(h->name), "%s", name);
    unsigned max_conns = opts->max_conns != 0 ? opts->max_conns : DFC_HTTP_DEFAULT_MAX_CONNS;
    unsigned per_ip = opts->max_conns_per_ip != 0 ? opts->max_conns_per_ip
                                                  : max_conns / DFC_HTTP_DEFAULT_PER_IP_DIVISOR;
    per_ip = per_ip == 0 ? 1 : per_ip > max_conns ? max_conns : per_ip;
    unsigned timeout = opts->timeout_s != 0 ? opts->timeout_s : DFC_HTTP_DEFAULT_TIMEOUT_S;
    h->max_waiting = max_conns;
    h->max_waiting_per_ip = per_ip;
    h->header_timeout_ms =
        opts->header_timeout_ms != 0 ? opts->header_timeout_ms : DFC_HTTP_DEFAULT_HEADER_TIMEOUT_MS;
    h->lfd = listen_on(&sa);
    if (h->lfd < 0) {
        int e = h->lfd;
        http_free(h);
        char where[DFC_ADDR_STR_MAX];
        dfc_addr_format(ip, opts->port, where, sizeof(where));
        return dfc_error_errno(err, e, "%s: cannot listen on %s", name, where);
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    h->mhd =
        MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                         /* first, or MHD logs a complaint about it through its own logger */
                         MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h->name,
                         MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                         per_ip, MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_END);
    if (h->mhd == NULL) {
        http_free(h);
        return dfc_error_set(err, -ENOMEM, "%s: cannot start libmicrohttpd", name);
    }
    if (pipe2(h->wake, O_CLOEXEC) < 0) {
        r = dfc_error_errno(err, -errno, "%s: pipe", name);
    } else if (pthread_create(&h->accept_th, NULL, accept_main, h) != 0) {
        r = dfc_error_set(err, -EAGAIN, "%s: cannot start the accept thread", name);
    }
    if (r < 0) {
        http_free(h);
        return r;
    }
    h->accepting = true;
    *ret = h;
    return 0;
}

void dfc_http_stop(struct dfc_http *h) {
    if (h == NULL) {
        return;
    }
    http_free(h);
}
