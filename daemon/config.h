/*
 * config.h - dfdaemon's configuration: Dragonfly's camelCase keys where they overlap.
 *
 * Loaded by dfc_cli_parse() (dfc/options.h) as defaults -> YAML file (--config) -> environment
 * -> flags, then checked across settings by dfd_config_finish().
 * Ownership: string fields belong to the struct; release with dfd_config_free().
 */
#ifndef DFD_CONFIG_H
#define DFD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dfc/config.h"
#include "dfc/error.h"
#include "dfc/tls.h"

struct dfd_config {
    char *socket_path;                /* download.server.socketPath */
    uint32_t socket_mode;             /* download.server.socketMode */
    char *socket_group;               /* download.server.socketGroup: name or gid, "" = unchanged */
    int64_t fd_token_timeout;         /* download.server.fdTokenTimeout (ns) */
    uint64_t max_workers;             /* download.server.maxWorkers */
    char *storage_dir;                /* storage.dir */
    bool storage_keep;                /* storage.keep */
    bool unsafe_shared_inode_imports; /* storage.unsafeSharedInodeImports */
    uint64_t max_tasks;               /* storage.maxTasks */
    int64_t volume_fetch_timeout;     /* storage.volumes.fetchTimeout (ns) */
    bool discard_broken;              /* --discard-broken-store (a flag only, never a config key) */
    int64_t gc_interval;              /* gc.interval (ns) */
    int64_t default_ttl;              /* gc.policy.persistentCacheTaskTTL (ns) */
    uint64_t disk_threshold; /* gc.policy.diskThreshold (bytes, 0 = the filesystem's size) */
    uint64_t disk_high;      /* gc.policy.diskHighThresholdPercent */
    uint64_t disk_low;       /* gc.policy.diskLowThresholdPercent */
    char *host_ip;           /* host.ip, "" = detect */
    char *hostname;          /* host.hostname, "" = gethostname() */
    const char *log_level;   /* log.level: one of the row's choices (static) */

    /* download.server limits that keep one caller from starving the others. */
    uint64_t reserved_workers;     /* reservedWorkers (0 = maxWorkers / 8, at least 1) */
    uint64_t max_workers_per_user; /* maxWorkersPerUser (0 = maxWorkers / 4, at least 1) */
    int64_t idle_timeout;          /* idleTimeout (ns) */
    int64_t shutdown_grace;        /* shutdownGrace (ns): drain time on SIGTERM */
    uint64_t max_calls_per_user;   /* maxCallsPerUser */
    uint64_t max_connections;      /* maxConnections */
    uint64_t max_conns_per_user;   /* maxConnectionsPerUser */

    /* Peer to peer. With scheduler.addrs empty the daemon is standalone: no scheduler calls and
     * no TCP listener at all. */
    struct dfc_config_list scheduler_addrs; /* scheduler.addrs: host:port list */
    int64_t announce_interval;              /* scheduler.announceInterval (ns) */
    uint64_t max_schedule_count;            /* scheduler.maxScheduleCount: rounds per download */
    int64_t schedule_timeout;               /* scheduler.scheduleTimeout (ns): one download */
    char *upload_ip;                 /* upload.server.ip: DfdaemonUpload on TCP, "" = 0.0.0.0 */
    uint64_t upload_port;            /* upload.server.port */
    uint64_t upload_max_workers;     /* upload.server.maxWorkers */
    uint64_t upload_max_connections; /* upload.server.maxConnections */
    uint64_t upload_max_connections_per_ip;  /* upload.server.maxConnectionsPerIP */
    int64_t upload_first_bytes_timeout;      /* upload.server.firstBytesTimeout (ns) */
    int64_t upload_first_call_timeout;       /* upload.server.firstCallTimeout (ns) */
    uint64_t upload_max_sync_host_streams;   /* upload.server.maxSyncHostStreamsPerHost */
    uint64_t upload_max_sync_pieces_streams; /* upload.server.maxSyncPiecesStreamsPerHost */
    bool disable_shared;             /* upload.disableShared: never a parent or replica target */
    char *vortex_ip;                 /* storage.server.ip: the Vortex piece server, "" = 0.0.0.0 */
    uint64_t vortex_port;            /* storage.server.tcpPort */
    uint64_t vortex_max_connections; /* storage.server.maxConnections */
    uint64_t vortex_max_connections_per_ip; /* storage.server.maxConnectionsPerIP */
    int64_t vortex_request_timeout;  /* storage.server.requestTimeout (ns): reading a request */
    uint64_t vortex_max_uploads;     /* storage.server.maxConcurrentUploads; 0 = maxConnections */
    uint64_t upload_rate_limit;      /* upload.rateLimit: bytes per second sent over Vortex */
    uint64_t download_rate_limit;    /* download.rateLimit: bytes per second received over Vortex */
    uint64_t concurrent_piece_count; /* download.concurrentPieceCount: pieces in flight */
    int64_t piece_timeout;           /* download.pieceTimeout (ns): one piece from one parent */
    char *metrics_ip;                /* metrics.server.ip: GET /metrics (and health) */
    uint64_t metrics_port;           /* metrics.server.port; 0 = off */
    char *health_ip;                 /* health.server.ip: GET /healthz, /readyz */
    uint64_t health_port;            /* health.server.port; 0 = off */
    char *idc;                       /* host.idc */
    char *location;                  /* host.location */

    /* TLS on the cluster's TCP connections (docs/trust-model.md); upstream's key names. */
    const char *tls_policy;   /* security.tlsPolicy: one of dfc_tls_policy_choices */
    enum dfc_tls_policy tls;  /* the policy resolved by dfd_config_finish() */
    char *upload_server_ca;   /* upload.server.caCert: verifies clients of DfdaemonUpload/Vortex */
    char *upload_server_cert; /* upload.server.cert: this node's identity as a server */
    char *upload_server_key;  /* upload.server.key */
    char *upload_client_ca;   /* upload.client.caCert: verifies the nodes this one downloads from */
    char *upload_client_cert; /* upload.client.cert: this node's identity as a client */
    char *upload_client_key;  /* upload.client.key */
    char *upload_client_name; /* upload.client.serverName: "" = the dialled node's IP */
    char *sched_ca;           /* scheduler.caCert: verifies the schedulers */
    char *sched_cert;         /* scheduler.cert: this node's identity to the schedulers */
    char *sched_key;          /* scheduler.key */
};

/* The TLS files of each side (borrowed from cfg). */
static inline struct dfc_tls_files dfd_tls_upload_server(const struct dfd_config *cfg) {
    return (struct dfc_tls_files){cfg->upload_server_ca, cfg->upload_server_cert,
                                  cfg->upload_server_key, NULL};
}
static inline struct dfc_tls_files dfd_tls_upload_client(const struct dfd_config *cfg) {
    return (struct dfc_tls_files){cfg->upload_client_ca, cfg->upload_client_cert,
                                  cfg->upload_client_key, cfg->upload_client_name};
}
static inline struct dfc_tls_files dfd_tls_scheduler(const struct dfd_config *cfg) {
    return (struct dfc_tls_files){cfg->sched_ca, cfg->sched_cert, cfg->sched_key, NULL};
}

/* True when scheduler.addrs names a scheduler (peer to peer on). */
static inline bool dfd_config_p2p(const struct dfd_config *cfg) {
    return cfg->scheduler_addrs.n > 0;
}

extern const struct dfc_config_schema dfd_config_schema;

/* Checks cross-field rules and resolves derived values (host ip and name). */
int dfd_config_finish(struct dfd_config *cfg, struct dfc_error *err);

/* Reads the TLS files the settings name (dfc_tls_files_read) when the node takes part in P2P
 * with TLS on, at start; -EINVAL naming the key. */
int dfd_config_check_files(const struct dfd_config *cfg, struct dfc_error *err);

void dfd_config_free(struct dfd_config *cfg);

#endif /* DFD_CONFIG_H */
