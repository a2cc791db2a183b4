/*
 * metrics.h - the scheduler's metrics (prefix dragonfly_scheduler_) and its one HTTP endpoint:
 * metrics.server.ip:port serves GET /metrics, /healthz and /readyz (the chart probes that port).
 *
 * Metrics, besides the per-RPC ones of the RPC layer (rpc_server.h):
 *   redis_command_duration_seconds{kind}  histogram  a Redis call, its wait for a connection
 *                                                    included (kind: command, script, pipeline)
 *   redis_errors_total{kind}              counter    Redis calls that failed
 *   repairs_total{outcome}                counter    repair jobs: started, succeeded, failed, busy
 *   under_replicated_tasks                gauge      tasks the last repair pass found short of
 *                                                    persistent copies
 *   tasks{state}                          gauge      tasks by state, counted by the last repair
 *                                                    pass (every replicaRepairInterval: it
 *                                                    SCANs and loads every task); not a
 *                                                    scrape-time Redis read
 *   hosts                                 gauge      hosts the last host-GC pass kept (every
 *                                                    gc.hostGCInterval)
 *
 * Readiness: the RPC server is serving and, with database.redis.addrs, Redis answered a PING
 * within SCHED_READY_PING_MS at the last check; 503 with the reason otherwise. A thread of its
 * own pings every SCHED_READY_CHECK_MS, so /readyz answers from that result at once and a slow
 * Redis never holds the endpoint's one thread (and /healthz behind it, the liveness probe's);
 * a result older than SCHED_READY_STALE_MS (the check itself hung) is not ready.
 *
 * Ownership: the struct owns its registry and endpoint; server and redis are borrowed by the
 * endpoint and must outlive sched_metrics_stop_http().
 */
#ifndef SCHED_METRICS_H
#define SCHED_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/metrics.h"
#include "dfc/thread.h"

#define SCHED_METRICS_PREFIX "dragonfly_scheduler_"
#define SCHED_READY_PING_MS  1000
#define SCHED_READY_CHECK_MS 1000
#define SCHED_READY_STALE_MS 5000

struct dfc_rpc_server;
struct sched_redis;

struct sched_metrics {
    struct dfc_metrics *registry;
    struct dfc_metric *redis_latency, *redis_errors, *repairs, *under_replicated, *tasks, *hosts;
    struct dfc_http *http;
    struct dfc_rpc_server *server; /* for readiness; borrowed */
    struct sched_redis *redis;     /* NULL without Redis; borrowed */
    /* The Redis check (with redis only): its thread and last result, under check.mu. */
    struct dfc_thread check;
    bool checking;
    int redis_code;      /* 0, or the PING's error */
    char redis_why[160]; /* the reason when redis_code != 0 */
    int64_t checked_ns;  /* CLOCK_MONOTONIC of the last result; 0: none yet */
};

/* Declares the metrics in a new registry (before Redis and placement are made, which take
 * the handles). */
int sched_metrics_init(struct sched_metrics *m, struct dfc_error *err);

/* Starts the endpoint on ip:port (port 0: none); metrics NULL serves the probes alone. */
int sched_metrics_start_http(struct sched_metrics *m, const char *ip, unsigned port,
                             struct dfc_rpc_server *server, struct sched_redis *redis,
                             struct dfc_error *err);

/* Stops the endpoint (first, before the server and Redis go). Idempotent. */
void sched_metrics_stop_http(struct sched_metrics *m);

/* Stops the endpoint and frees the registry. */
void sched_metrics_done(struct sched_metrics *m);

#endif /* SCHED_METRICS_H */
