/*
 * config.h - the scheduler's configuration: Dragonfly's camelCase keys where they overlap
 * (server.*, database.redis.*, manager.schedulerClusterID, scheduler.*), plus the RPC server
 * limits dfdaemon has.
 *
 * Loaded by dfc_cli_main() (dfc/options.h) as defaults -> YAML file (--config) -> environment
 * -> flags (--set, --port, --log-level), then checked and completed by sched_config_finish().
 * Ownership: string and list fields belong to the struct; release with sched_config_free().
 */
#ifndef SCHED_CONFIG_H
#define SCHED_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/config.h"
#include "dfc/error.h"
#include "dfc/tls.h"

struct sched_config {
    char *listen_ip;           /* server.listenIP */
    uint64_t port;             /* server.port */
    char *metrics_ip;          /* metrics.server.ip: /metrics, /healthz, /readyz */
    uint64_t metrics_port;     /* metrics.server.port; 0 = no endpoint, no metrics */
    char *advertise_ip;        /* server.advertiseIP; "" = the first non-loopback IPv4 (else IPv6),
                                  else 127.0.0.1, resolved by sched_config_finish() */
    uint64_t max_workers;      /* server.maxWorkers: handler threads (a bidi stream holds one) */
    uint64_t reserved_workers; /* server.reservedWorkers (0 = maxWorkers / 8, at least 1) */
    int64_t idle_timeout;      /* server.idleTimeout (ns) */
    uint64_t max_calls;        /* server.maxCalls: calls in flight */
    uint64_t max_conns;        /* server.maxConnections: open TCP connections */
    uint64_t max_conns_per_ip; /* server.maxConnectionsPerIP: of them from one address */
    int64_t first_bytes_timeout;            /* server.firstBytesTimeout (ns) */
    int64_t first_call_timeout;             /* server.firstCallTimeout (ns) */
    uint64_t max_announce_streams_per_host; /* server.maxAnnounceStreamsPerHost */
    uint64_t max_message_size;              /* server.maxMessageSize (bytes) */
    int64_t shutdown_grace;                 /* server.shutdownGrace (ns): drain time on SIGTERM */

    struct dfc_config_list redis_addrs;  /* database.redis.addrs; empty = Redis not enabled */
    char *redis_master_name;             /* database.redis.masterName (Sentinel) */
    char *redis_username;                /* database.redis.username */
    char *redis_password;                /* database.redis.password */
    char *redis_sentinel_username;       /* database.redis.sentinelUsername */
    char *redis_sentinel_password;       /* database.redis.sentinelPassword */
    char *redis_tls_ca_cert;             /* database.redis.tls.caCert (PEM file) */
    char *redis_tls_cert;                /* database.redis.tls.cert */
    char *redis_tls_key;                 /* database.redis.tls.key */
    bool redis_tls_insecure_skip_verify; /* database.redis.tls.insecureSkipVerify */
    int64_t redis_db;                    /* database.redis.db */
    uint64_t redis_pool_size;            /* database.redis.poolSize */
    int64_t redis_timeout;               /* database.redis.timeout (ns): longest Redis wait of
                                            one RPC, within the call's own deadline */

    uint64_t cluster_id;             /* manager.schedulerClusterID */
    int64_t host_gc_interval;        /* scheduler.gc.hostGCInterval (ns) */
    uint64_t candidate_parent_limit; /* scheduler.candidateParentLimit */
    uint64_t max_peers_per_task;     /* scheduler.maxPeersPerTask */
    int64_t repair_interval;         /* scheduler.replicaRepairInterval (ns) */
    uint64_t repair_concurrency;     /* scheduler.replicaRepairConcurrency */
    int64_t probe_interval;          /* scheduler.probeInterval (ns): copies' probes; 0 = off */
    const char *log_level;           /* log.level (one of dfc_log_level_choices) */

    /* TLS on the gRPC port and to the nodes (docs/trust-model.md); upstream's key names. */
    const char *tls_policy;  /* security.tlsPolicy: one of dfc_tls_policy_choices */
    enum dfc_tls_policy tls; /* the policy resolved by sched_config_finish() */
    char *server_tls_ca;     /* server.tls.caCert: verifies the nodes that call */
    char *server_tls_cert;   /* server.tls.cert: the scheduler's identity as a server */
    char *server_tls_key;    /* server.tls.key */
    char *peer_tls_ca;       /* peer.tls.caCert: verifies the nodes the scheduler calls */
    char *peer_tls_cert;     /* peer.tls.cert: the scheduler's identity as their client */
    char *peer_tls_key;      /* peer.tls.key */
    char *peer_tls_name;     /* peer.tls.serverName: "" = the dialled node's IP */
    /* security.operatorIdentities: SAN URIs, SAN DNS names or CNs of operators (authz.h) */
    struct dfc_config_list operator_identities;
};

/* The TLS files of each side (borrowed from cfg). */
static inline struct dfc_tls_files sched_tls_server(const struct sched_config *cfg) {
    return (struct dfc_tls_files){cfg->server_tls_ca, cfg->server_tls_cert, cfg->server_tls_key,
                                  NULL};
}
static inline struct dfc_tls_files sched_tls_peer(const struct sched_config *cfg) {
    return (struct dfc_tls_files){cfg->peer_tls_ca, cfg->peer_tls_cert, cfg->peer_tls_key,
                                  cfg->peer_tls_name};
}

extern const struct dfc_config_schema sched_config_schema;

/* The rules across settings; resolves an empty server.advertiseIP. */
int sched_config_finish(struct sched_config *cfg, struct dfc_error *err);

/* Reads the TLS files the settings name (dfc_tls_files_read), at start; -EINVAL naming the
 * key. */
int sched_config_check_files(const struct sched_config *cfg, struct dfc_error *err);

void sched_config_free(struct sched_config *cfg);

#endif /* SCHED_CONFIG_H */
