/*
 * metrics.c - the scheduler's metric declarations, its endpoint and readiness (metrics.h).
 */
#include "metrics.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "dfc/clock.h"
#include "dfc/http.h"
#include "dfc/rpc_server.h"
#include "placement.h"
#include "redis.h"

/* Seconds, from 0.1 ms (a local Redis) to the 10 s of a slow Sentinel failover. */
static const double redis_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                       0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

int sched_metrics_init(struct sched_metrics *m, struct dfc_error *err) {
    memset(m, 0, sizeof(*m));
    if (dfc_metrics_new(&m->registry) < 0) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    static const char *const kinds[] = SCHED_REDIS_KINDS;
    static const char *const outcomes[] = SCHED_REPAIR_OUTCOMES;
    static const struct dfc_metric_label l_kind[] = {{"kind", kinds, 3}};
    static const struct dfc_metric_label l_outcome[] = {{"outcome", outcomes, 4}};
    static const char *const states[] = SCHED_TASK_STATES;
    static const struct dfc_metric_label l_state[] = {{"state", states, 4}};
    const struct {
        struct dfc_metric_desc d;
        struct dfc_metric **ret;
    } rows[] = {
        {{.name = SCHED_METRICS_PREFIX "redis_command_duration_seconds",
          .help = "Redis calls from the call to the reply, a wait for a free connection "
                  "included, by kind.",
          .type = DFC_METRIC_HISTOGRAM,
          .labels = l_kind,
          .n_labels = 1,
          .buckets = redis_buckets,
          .n_buckets = sizeof(redis_buckets) / sizeof(redis_buckets[0])},
         &m->redis_latency},
        {{.name = SCHED_METRICS_PREFIX "redis_errors_total",
          .help = "Redis calls that failed (I/O, timeout or an error reply), by kind.",
          .type = DFC_METRIC_COUNTER,
          .labels = l_kind,
          .n_labels = 1},
         &m->redis_errors},
        {{.name = SCHED_METRICS_PREFIX "repairs_total",
          .help = "Repair jobs queued by the repair loop (started) and how they ended.",
          .type = DFC_METRIC_COUNTER,
          .labels = l_outcome,
          .n_labels = 1},
         &m->repairs},
        {{.name = SCHED_METRICS_PREFIX "under_replicated_tasks",
          .help = "Tasks the last repair pass found short of persistent copies.",
          .type = DFC_METRIC_GAUGE},
         &m->under_replicated},
        {{.name = SCHED_METRICS_PREFIX "tasks",
          .help = "Persistent cache tasks by state, as of the last repair pass.",
          .type = DFC_METRIC_GAUGE,
          .labels = l_state,
          .n_labels = 1},
         &m->tasks},
        {{.name = SCHED_METRICS_PREFIX "hosts",
          .help = "Hosts the last host-GC pass kept (announced recently enough).",
          .type = DFC_METRIC_GAUGE},
         &m->hosts},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int r = dfc_metrics_add(m->registry, &rows[i].d, rows[i].ret, err);
        if (r < 0) {
            sched_metrics_done(m);
            return r;
        }
    }
    return 0;
}

/* Pings Redis now and then; ready() reads the result. */
static void *check_main(void *arg) {
    struct sched_metrics *m = arg;
    do {
        const char *argv[] = {"PING"};
        const size_t lens[] = {4};
        struct dfc_error err;
        struct redisReply *rep = NULL;
        int r = sched_redis_argv(m->redis, sched_redis_deadline(SCHED_READY_PING_MS), 1, argv, lens,
                                 &rep, &err);
        if (r == 0) {
            freeReplyObject(rep);
        }
        pthread_mutex_lock(&m->check.mu);
        m->redis_code = r;
        snprintf(m->redis_why, sizeof(m->redis_why), "redis does not answer PING: %s",
                 r < 0 ? dfc_error_msg(&err) : "");
        m->checked_ns = dfc_mono_ns();
        pthread_mutex_unlock(&m->check.mu);
    } while (dfc_thread_sleep(&m->check, (int64_t)SCHED_READY_CHECK_MS * 1000000));
    return NULL;
}

static int ready(void *arg, char *why, size_t size) {
    struct sched_metrics *m = arg;
    if (!dfc_rpc_server_serving(m->server)) {
        snprintf(why, size, "the RPC server is not serving");
        return -EAGAIN;
    }
    if (m->redis == NULL) {
        return 0;
    }
    pthread_mutex_lock(&m->check.mu);
    int64_t age_ms = m->checked_ns != 0 ? (dfc_mono_ns() - m->checked_ns) / 1000000 : -1;
    int r = m->redis_code;
    if (age_ms < 0) {
        r = -EAGAIN;
        snprintf(why, size, "redis has not been checked yet");
    } else if (age_ms > SCHED_READY_STALE_MS) {
        r = -ETIMEDOUT;
        snprintf(why, size, "the redis check has not finished for %lld ms", (long long)age_ms);
    } else if (r < 0) {
        snprintf(why, size, "%s", m->redis_why);
    }
    pthread_mutex_unlock(&m->check.mu);
    return r;
}

int sched_metrics_start_http(struct sched_metrics *m, const char *ip, unsigned port,
                             struct dfc_rpc_server *server, struct sched_redis *redis,
                             struct dfc_error *err) {
    m->server = server;
    m->redis = redis;
    if (redis != NULL && port != 0) {
        if (dfc_thread_start(&m->check, check_main, m) < 0) {
            return dfc_error_set(err, -EAGAIN, "metrics.server: cannot start the redis check");
        }
        m->checking = true;
    }
    struct dfc_http_opts o = {.ip = ip,
                              .port = port,
                              .metrics = m->registry,
                              .ready = ready,
                              .ready_arg = m,
                              .name = "metrics.server"};
    int r = dfc_http_start(&o, &m->http, err);
    if (r < 0) {
        sched_metrics_stop_http(m);
    }
    return r;
}

void sched_metrics_stop_http(struct sched_metrics *m) {
    dfc_http_stop(m->http);
    m->http = NULL;
    if (m->checking) {
        dfc_thread_stop(&m->check);
        m->checking = false;
    }
}

void sched_metrics_done(struct sched_metrics *m) {
    sched_metrics_stop_http(m);
    dfc_metrics_free(m->registry);
    memset(m, 0, sizeof(*m));
}
