/*
 * http.c - the /metrics, /healthz and /readyz endpoint on libmicrohttpd (dfc/http.h).
 *
 * libmicrohttpd parses HTTP; this file only routes. The daemon runs one internal polling thread
 * (poll(), so descriptor numbers above FD_SETSIZE are fine) that answers every request itself:
 * the answers are small and computed from atomics or a bounded callback, so a thread per
 * connection would buy nothing. MHD_OPTION_CONNECTION_LIMIT bounds the connections (at the
 * limit it stops accepting: further clients wait in the listen backlog),
 * MHD_OPTION_PER_IP_CONNECTION_LIMIT bounds one address's share (the idle timeout alone does
 * not free a slot whose client sends a byte now and then) and MHD_OPTION_CONNECTION_TIMEOUT
 * closes idle ones, which frees their slots.
 */
#include "dfc/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dfc/addr.h"
#include "dfc/log.h"
#include "dfc/metrics.h"

struct dfc_http {
    struct MHD_Daemon *mhd;
    struct dfc_metrics *metrics;
    dfc_http_ready_fn ready;
    void *ready_arg;
    char name[48];
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (sa.ss.ss_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    struct dfc_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return dfc_error_set(err, -ENOMEM, "%s: out of memory", name);
    }
    h->metrics = opts->metrics;
    h->ready = opts->ready;
    h->ready_arg = opts->ready_arg;
    snprintf(h->name, sizeof(h->name), "%s", name);
    unsigned max_conns = opts->max_conns != 0 ? opts->max_conns : DFC_HTTP_DEFAULT_MAX_CONNS;
    unsigned per_ip = opts->max_conns_per_ip != 0 ? opts->max_conns_per_ip
                                                  : max_conns / DFC_HTTP_DEFAULT_PER_IP_DIVISOR;
    per_ip = per_ip == 0 ? 1 : per_ip > max_conns ? max_conns : per_ip;
    unsigned timeout = opts->timeout_s != 0 ? opts->timeout_s : DFC_HTTP_DEFAULT_TIMEOUT_S;
    /* MHD reports a failed bind only as a NULL daemon; errno holds the cause. */
    errno = 0;
    h->mhd = MHD_start_daemon(flags, (uint16_t)opts->port, NULL, NULL, on_request, h,
                              /* first, or MHD logs a complaint about it through its own logger */
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h->name, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&sa.ss, MHD_OPTION_CONNECTION_LIMIT, max_conns,
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                              MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_END);
    if (h->mhd == NULL) {
        int e = errno != 0 ? -errno : -EADDRNOTAVAIL;
        free(h);
        char where[DFC_ADDR_STR_MAX];
        dfc_addr_format(ip, opts->port, where, sizeof(where));
        return dfc_error_errno(err, e, "%s: cannot listen on %s", name, where);
    }
    *ret = h;
    return 0;
}

void dfc_http_stop(struct dfc_http *h) {
    if (h == NULL) {
        return;
    }
    MHD_stop_daemon(h->mhd);
    free(h);
}
