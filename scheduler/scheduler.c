/*
 * scheduler.c - wiring of the scheduler binary.
 *
 * Start: Redis pool (connections made on first use, so a Redis that is down at start-up only
 * makes calls UNAVAILABLE until it is back) -> store -> placement (repair and host-GC
 * threads) -> service -> gRPC server on TCP -> ready. Stop (SIGINT/SIGTERM, taken by sigwait
 * on the main thread in dfc_server_wait): the server drains calls in flight for up to
 * server.shutdownGrace, then cancels the rest -> placement (waits for replication calls) -> store
 * -> Redis.
 */
#include "scheduler.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "dfc/units.h"
#include "metrics.h"
#include "placement.h"
#include "redis.h"
#include "rpc_integrity.h"
#include "service.h"
#include "store.h"

static int open_redis(const struct sched_config *cfg, const struct sched_metrics *m,
                      struct sched_redis **ret_redis, struct sched_store **ret_store,
                      struct sched_placement **ret_placement, struct dfc_error *err) {
    struct sched_redis_opts ro = {
        .addrs = (const char *const *)cfg->redis_addrs.items,
        .n_addrs = cfg->redis_addrs.n,
        .master_name = cfg->redis_master_name,
        .username = cfg->redis_username,
        .password = cfg->redis_password,
        .sentinel_username = cfg->redis_sentinel_username,
        .sentinel_password = cfg->redis_sentinel_password,
        .tls_ca_cert = cfg->redis_tls_ca_cert,
        .tls_cert = cfg->redis_tls_cert,
        .tls_key = cfg->redis_tls_key,
        .tls_insecure_skip_verify = cfg->redis_tls_insecure_skip_verify,
        .db = (int)cfg->redis_db,
        .pool_size = (unsigned)cfg->redis_pool_size,
        .latency = m->redis_latency,
        .errors = m->redis_errors,
    };
    struct sched_placement_opts po = {
        .advertise_ip = cfg->advertise_ip,
        .tls = cfg->tls,
        .tls_files = sched_tls_peer(cfg),
        .repair_interval_ns = cfg->repair_interval,
        .repair_concurrency = (unsigned)cfg->repair_concurrency,
        .host_gc_interval_ns = cfg->host_gc_interval,
        .probe_interval_ns = cfg->probe_interval,
        .repairs = m->repairs,
        .under_replicated = m->under_replicated,
        .tasks = m->tasks,
        .hosts = m->hosts,
    };
    int r = sched_redis_new(&ro, ret_redis, err);
    if (r == 0) {
        r = sched_store_new(*ret_redis, cfg->cluster_id, ret_store, err);
    }
    if (r == 0) {
        r = sched_placement_new(*ret_store, &po, ret_placement, err);
    }
    if (r == 0) {
        r = sched_placement_start(*ret_placement, err);
    }
    return r;
}

int sched_run(const struct sched_config *cfg, const struct dfc_server_run *run,
              struct dfc_error *err) {
    struct sched_redis *redis = NULL;
    struct sched_store *store = NULL;
    struct sched_placement *placement = NULL;
    struct dfc_rpc_server *server = NULL;
    struct sched_service svc;
    bool svc_ready = false;
    struct sched_metrics metrics = {0}; /* all NULL with metrics.server.port 0 */
    int r = 0;
    unsigned port = 0;

    if (cfg->metrics_port != 0 && (r = sched_metrics_init(&metrics, err)) < 0) {
        return r;
    }
    if (cfg->redis_addrs.n > 0 &&
        (r = open_redis(cfg, &metrics, &redis, &store, &placement, err)) < 0) {
        goto out;
    }
    if ((r = sched_service_init(&svc, cfg, store, placement, err)) < 0) {
        goto out;
    }
    svc_ready = true;
    struct dfc_rpc_server_opts opts = {
        .max_recv_msg = cfg->max_message_size,
        .max_workers = (unsigned)cfg->max_workers,
        .max_calls = (unsigned)cfg->max_calls,
        .log_level_ok = DFC_LOG_DEBUG,
        .name = "scheduler",
        .idle_timeout_ms = cfg->idle_timeout / DFC_NS_PER_MS,
        .reserved_workers = (unsigned)cfg->reserved_workers,
        /* Each unary handler needs a Redis connection to progress: more running than the pool
         * holds would only wait for one (hack/bench/scheduler.sh: 296-452 against 481-643 us
         * of CPU per pair). Streams are not capped by it. */
        .max_unary_running = (unsigned)cfg->redis_pool_size,
        .max_conns = (unsigned)cfg->max_conns,
        .max_conns_per_ip = (unsigned)cfg->max_conns_per_ip,
        .first_bytes_timeout_ms = cfg->first_bytes_timeout / DFC_NS_PER_MS,
        .first_call_timeout_ms = cfg->first_call_timeout / DFC_NS_PER_MS,
        .option_prefix = "server.",
        .metrics = metrics.registry,
        .metrics_prefix = SCHED_METRICS_PREFIX,
        .tls = cfg->tls,
        .tls_files = sched_tls_server(cfg),
    };
    if (cfg->tls == DFC_TLS_OFF) {
        DFC_LOG(DFC_LOG_WARN, "scheduler.tls_off",
                "msg=\"TLS is off: the gRPC port and the calls to the nodes are plaintext and "
                "unauthenticated (security.tlsPolicy, server.tls.*, peer.tls.*; "
                "docs/trust-model.md)\"");
    }
    if (cfg->tls != DFC_TLS_MUTUAL && cfg->operator_identities.n > 0) {
        DFC_LOG(DFC_LOG_WARN, "scheduler.operators_unused",
                "msg=\"security.operatorIdentities takes effect only under mutual TLS: without "
                "client certificates any caller may delete any task\"");
    }
    /* Accepted by the RPC layer itself, so the connections are capped (max_conns). */
    if ((r = dfc_rpc_server_new(&opts, &server, err)) < 0 ||
        (r = sched_service_register(&svc, server, err)) < 0 ||
        (r = sched_integrity_register(&svc, server, err)) < 0 ||
        (r = dfc_rpc_server_listen_tcp(server, cfg->listen_ip, (unsigned)cfg->port, &port, err)) <
            0 ||
        (r = dfc_rpc_server_start(server, err)) < 0 ||
        (r = sched_metrics_start_http(&metrics, cfg->metrics_ip, (unsigned)cfg->metrics_port,
                                      server, redis, err)) < 0) {
        goto out;
    }
    char first[160] = "";
    if (cfg->redis_addrs.n > 0) {
        snprintf(first, sizeof(first), "%s%s", cfg->redis_addrs.items[0],
                 cfg->redis_addrs.n > 1 ? ",..." : "");
    }
    DFC_LOG(DFC_LOG_INFO, "scheduler.ready",
            "listen=%s port=%u advertise_ip=%s cluster_id=%llu redis=%s master_name=%s",
            cfg->listen_ip, port, cfg->advertise_ip, (unsigned long long)cfg->cluster_id,
            cfg->redis_addrs.n > 0 ? first : "disabled",
            cfg->redis_master_name[0] != '\0' ? cfg->redis_master_name : "-");

    int sig = dfc_server_wait(run);
    DFC_LOG(DFC_LOG_INFO, "scheduler.stopping", "signal=%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
    dfc_rpc_server_shutdown(server, run->grace_ms);
    r = 0;
out:
    sched_metrics_stop_http(&metrics); /* its readiness check uses the server and Redis */
    dfc_rpc_server_free(server);
    sched_placement_free(placement);
    if (svc_ready) {
        sched_service_done(&svc);
    }
    sched_store_free(store);
    sched_redis_free(redis);
    sched_metrics_done(&metrics);
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "scheduler.stopped", "port=%d", port);
    }
    return r;
}
