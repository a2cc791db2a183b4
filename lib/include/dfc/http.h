/*
 * http.h - the HTTP endpoint of a long-running binary: GET /metrics (Prometheus text format),
 * GET /healthz (liveness: the process serves HTTP) and GET /readyz (readiness, from a callback
 * the binary supplies). Other paths answer 404, other methods on these paths 405 (HEAD is
 * allowed, as GET).
 *
 * Built on libmicrohttpd with its own internal polling thread (never a gRPC completion-queue
 * thread). A connection reaches it only once its whole request head has arrived, within
 * header_timeout_ms of its accept (else it is closed: a slowloris client cannot hold a slot by
 * trickling bytes); until then it waits in a bounded room where a new connection displaces
 * the oldest waiting one of its address (beyond max_conns_per_ip) or of all (beyond
 * max_conns), so the kubelet's probes are answered however many slow clients there are. Every
 * answer closes its connection; a client that does not read it is closed after the idle
 * timeout. The handlers never take a storage lock: /metrics renders the registry's atomics and
 * the cheap callbacks of scrape-time gauges; /readyz runs the ready callback, which must be
 * bounded too.
 *
 * Ownership: opts and what it points to are borrowed; metrics and the ready callback's argument
 * must outlive the endpoint (stop it first).
 */
#ifndef DFC_HTTP_H
#define DFC_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

struct dfc_metrics;

#define DFC_HTTP_DEFAULT_MAX_CONNS 32
#define DFC_HTTP_DEFAULT_TIMEOUT_S 10
/* How long a connection may take to send its request head (slowloris): 5 s. */
#define DFC_HTTP_DEFAULT_HEADER_TIMEOUT_MS 5000
/* The default share of max_conns one IP address may hold: a quarter (at least 1). */
#define DFC_HTTP_DEFAULT_PER_IP_DIVISOR 4

/* Readiness: 0 when ready; else a negative code with a one-line reason in why (answered as
 * the 503 body). Runs on the HTTP thread. */
typedef int (*dfc_http_ready_fn)(void *arg, char *why, size_t size);

struct dfc_http_opts {
    const char *ip;              /* IPv4 or IPv6 literal; NULL or "" = 127.0.0.1 */
    unsigned port;               /* 0 = no endpoint (dfc_http_start() returns 0, *ret NULL) */
    unsigned max_conns;          /* connections waiting for their request head, and connections
                                    being answered, at once; 0 = 32 */
    unsigned max_conns_per_ip;   /* the same per client IP address; 0 = max_conns / 4 (at
                                    least 1) */
    unsigned timeout_s;          /* an idle connection is closed after this; 0 = 10 s */
    int64_t header_timeout_ms;   /* a connection whose request head is not all there this long
                                    after it was accepted is closed; 0 = 5 s */
    struct dfc_metrics *metrics; /* GET /metrics; NULL = 404 */
    dfc_http_ready_fn ready;     /* GET /readyz; NULL = always ready */
    void *ready_arg;
    const char *name; /* in messages and log lines ("metrics.server"); NULL = "http" */
};

struct dfc_http;

/* Binds ip:port and starts serving on the endpoint's own thread. With port 0, does nothing and
 * sets *ret to NULL. -EINVAL for a bad ip, -EADDRINUSE and the like when the bind fails (err
 * names opts->name and the address). Stop with dfc_http_stop(). */
int dfc_http_start(const struct dfc_http_opts *opts, struct dfc_http **ret, struct dfc_error *err);

/* Stops the thread, closes connections and frees the endpoint. NULL is fine. */
void dfc_http_stop(struct dfc_http *h);

#endif /* DFC_HTTP_H */
