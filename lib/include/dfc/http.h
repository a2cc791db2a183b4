/*
 * http.h - the HTTP endpoint of a long-running binary: GET /metrics (Prometheus text format),
 * GET /healthz (liveness: the process serves HTTP) and GET /readyz (readiness, from a callback
 * the binary supplies). Other paths answer 404, other methods on these paths 405 (HEAD is
 * allowed, as GET).
 *
 * Built on libmicrohttpd with its own internal polling thread (never a gRPC completion-queue
 * thread), a bounded connection count, a smaller bound per client IP address (so that one
 * peer trickling requests that never end cannot take every slot and starve the kubelet's
 * probes) and a per-connection idle timeout, so a slow or idle client holds one slot for a
 * bounded time and never a storage lock: /metrics renders the registry's
 * atomics and the cheap callbacks of scrape-time gauges; /readyz runs the ready callback, which
 * must be bounded too.
 *
 * Ownership: opts and what it points to are borrowed; metrics and the ready callback's argument
 * must outlive the endpoint (stop it first).
 */
#ifndef DFC_HTTP_H
#define DFC_HTTP_H

#include <stddef.h>

#include "dfc/error.h"

struct dfc_metrics;

#define DFC_HTTP_DEFAULT_MAX_CONNS 32
#define DFC_HTTP_DEFAULT_TIMEOUT_S 10
/* The default share of max_conns one IP address may hold: a quarter (at least 1). */
#define DFC_HTTP_DEFAULT_PER_IP_DIVISOR 4

/* Readiness: 0 when ready; else a negative code with a one-line reason in why (answered as
 * the 503 body). Runs on the HTTP thread. */
typedef int (*dfc_http_ready_fn)(void *arg, char *why, size_t size);

struct dfc_http_opts {
    const char *ip;              /* IPv4 or IPv6 literal; NULL or "" = 127.0.0.1 */
    unsigned port;               /* 0 = no endpoint (dfc_http_start() returns 0, *ret NULL) */
    unsigned max_conns;          /* connections at once; more wait in the listen backlog until a
                                    slot frees (libmicrohttpd stops accepting); 0 = 32 */
    unsigned max_conns_per_ip;   /* connections at once from one IP address; more are closed
                                    at accept; 0 = max_conns / 4 (at least 1) */
    unsigned timeout_s;          /* an idle connection is closed after this; 0 = 10 s */
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
