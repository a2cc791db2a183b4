/*
 * config.c - the dfdaemon configuration table: every setting's YAML key, flag, environment
 * variable, default and range in one row (dfc/config.h), and the rules across settings.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/units.h"

#define F(member) offsetof(struct dfd_config, member)

/* The limits that keep one caller from starving the others are 1 .. 1,000,000 (0 would disable
 * the server, and a larger bound than a descriptor table is no bound). */
#define LIMIT DFC_OPT_RANGE(1, 1000000)

/* A rate limit (bytes per second) sends a 4 MiB piece in at most 4 s. */
#define RATE_MIN (1024 * 1024)

static const struct dfc_config_row rows[] = {
    {.key = "download.server.socketPath",
     .type = DFC_CFG_PATH,
     .offset = F(socket_path),
     .def = "/var/run/dragonfly/dfdaemon.sock",
     .env = "DFDAEMON_SOCKET_PATH",
     .flag = "socket-path",
     .flags = DFC_OPT_NONEMPTY},
    {.key = "download.server.socketMode",
     .type = DFC_CFG_MODE,
     .offset = F(socket_mode),
     .def = "0777"},
    {.key = "download.server.socketGroup", .type = DFC_CFG_STRING, .offset = F(socket_group)},
    /* How long a descriptor passed on <socketPath>.fd waits for its import call. */
    {.key = "download.server.fdTokenTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(fd_token_timeout),
     .def = "30s",
     DFC_OPT_RANGE(100 * DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "download.server.maxWorkers",
     .type = DFC_CFG_UINT,
     .offset = F(max_workers),
     .def = "32",
     DFC_OPT_RANGE(1, 1024)},
    {.key = "download.server.reservedWorkers",
     .type = DFC_CFG_UINT,
     .offset = F(reserved_workers),
     .def = "0"},
    {.key = "download.server.maxWorkersPerUser",
     .type = DFC_CFG_UINT,
     .offset = F(max_workers_per_user),
     .def = "0"},
    {.key = "download.server.idleTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(idle_timeout),
     .def = "30s",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 24 * 3600 * DFC_NS_PER_SEC)},
    {.key = "download.server.shutdownGrace",
     .type = DFC_CFG_DURATION,
     .offset = F(shutdown_grace),
     .def = "10s",
     .env = "DFDAEMON_SHUTDOWN_GRACE",
     .help = "on SIGTERM, calls in flight may finish for this long, then are cancelled",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 24 * 3600 * DFC_NS_PER_SEC)},
    {.key = "download.server.maxCallsPerUser",
     .type = DFC_CFG_UINT,
     .offset = F(max_calls_per_user),
     .def = "64",
     LIMIT},
    {.key = "download.server.maxConnections",
     .type = DFC_CFG_UINT,
     .offset = F(max_connections),
     .def = "1024",
     LIMIT},
    {.key = "download.server.maxConnectionsPerUser",
     .type = DFC_CFG_UINT,
     .offset = F(max_conns_per_user),
     .def = "128",
     LIMIT},
    {.key = "download.concurrentPieceCount",
     .type = DFC_CFG_UINT,
     .offset = F(concurrent_piece_count),
     .def = "8",
     DFC_OPT_RANGE(1, 64)},
    /* Upstream's key and default (10GiB: no limit in practice); every piece received over
     * Vortex, all downloads together. At least 1MiB/s, or pieces miss download.pieceTimeout. */
    {.key = "download.rateLimit",
     .type = DFC_CFG_SIZE,
     .offset = F(download_rate_limit),
     .def = "10GiB",
     .help = "bytes per second this node receives from peers (Vortex), all downloads together",
     DFC_OPT_RANGE(RATE_MIN, INT64_MAX)},
    {.key = "download.pieceTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(piece_timeout),
     .def = "360s",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "storage.dir",
     .type = DFC_CFG_PATH,
     .offset = F(storage_dir),
     .def = "/var/lib/dragonfly",
     .env = "DFDAEMON_STORAGE_DIR",
     .flag = "storage-dir",
     .metavar = "DIR",
     .flags = DFC_OPT_NONEMPTY},
    {.key = "storage.keep", .type = DFC_CFG_BOOL, .offset = F(storage_keep), .def = "true"},
    {.key = "storage.unsafeSharedInodeImports",
     .type = DFC_CFG_BOOL,
     .offset = F(unsafe_shared_inode_imports),
     .def = "false"},
    /* Ours: the ceiling keeps ListLocalPersistentCacheTasks (one message) within what dfcache
     * reads (daemon/cmd/dfcache/main.c) even with every tag and application at their limit. */
    {.key = "storage.maxTasks",
     .type = DFC_CFG_UINT,
     .offset = F(max_tasks),
     .def = "65536",
     DFC_OPT_RANGE(1, 65536)},
    /* Ours: how long PublishContentVolume waits for tasks this node lacks to arrive from peers
     * when the call does not say (docs/content-volumes.md). */
    {.key = "storage.volumes.fetchTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(volume_fetch_timeout),
     .def = "30s",
     .help = "how long publishing a content volume waits for missing tasks from peers",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "storage.server.ip",
     .type = DFC_CFG_STRING,
     .offset = F(vortex_ip),
     .validate = dfc_config_check_ip},
    {.key = "storage.server.tcpPort",
     .type = DFC_CFG_UINT,
     .offset = F(vortex_port),
     .def = "4005",
     DFC_OPT_RANGE(1, 65535)},
    {.key = "storage.server.maxConnections",
     .type = DFC_CFG_UINT,
     .offset = F(vortex_max_connections),
     .def = "128",
     DFC_OPT_RANGE(1, 65536)},
    {.key = "storage.server.maxConnectionsPerIP",
     .type = DFC_CFG_UINT,
     .offset = F(vortex_max_connections_per_ip),
     .def = "32",
     .help = "Vortex connections served at once for one peer address (at most maxConnections)",
     DFC_OPT_RANGE(1, 65536)},
    {.key = "storage.server.requestTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(vortex_request_timeout),
     .def = "10s",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    /* Ours: with many peers downloading from this node at once, each piece gets its share of
     * upload.rateLimit; fewer at once finish sooner and leave the node's uplink to its pods. */
    {.key = "storage.server.maxConcurrentUploads",
     .type = DFC_CFG_UINT,
     .offset = F(vortex_max_uploads),
     .def = "0",
     .help = "pieces sent to peers at once (Vortex); a request beyond waits up to requestTimeout "
             "for one to end, then is refused; 0 = maxConnections",
     DFC_OPT_RANGE(0, 65536)},
    {.key = "gc.interval",
     .type = DFC_CFG_DURATION,
     .offset = F(gc_interval),
     .def = "900s",
     DFC_OPT_POSITIVE},
    {.key = "gc.policy.persistentCacheTaskTTL",
     .type = DFC_CFG_DURATION,
     .offset = F(default_ttl),
     .def = "24h",
     DFC_OPT_POSITIVE},
    {.key = "gc.policy.diskThreshold",
     .type = DFC_CFG_SIZE,
     .offset = F(disk_threshold),
     .def = "0"},
    {.key = "gc.policy.diskHighThresholdPercent",
     .type = DFC_CFG_UINT,
     .offset = F(disk_high),
     .def = "80",
     DFC_OPT_RANGE(0, 100)},
    {.key = "gc.policy.diskLowThresholdPercent",
     .type = DFC_CFG_UINT,
     .offset = F(disk_low),
     .def = "60",
     DFC_OPT_RANGE(0, 100)},
    {.key = "host.ip",
     .type = DFC_CFG_STRING,
     .offset = F(host_ip),
     .env = "DFDAEMON_HOST_IP",
     .validate = dfc_config_check_ip},
    {.key = "host.hostname",
     .type = DFC_CFG_STRING,
     .offset = F(hostname),
     .env = "DFDAEMON_HOSTNAME"},
    {.key = "host.idc", .type = DFC_CFG_STRING, .offset = F(idc)},
    {.key = "host.location", .type = DFC_CFG_STRING, .offset = F(location)},
    {.key = "scheduler.addrs",
     .type = DFC_CFG_STRING_LIST,
     .offset = F(scheduler_addrs),
     .env = "DFDAEMON_SCHEDULER_ADDRS",
     .validate = dfc_config_check_hostports,
     .help = "host:port list of schedulers; empty: standalone (no scheduler, no TCP ports)"},
    {.key = "scheduler.announceInterval",
     .type = DFC_CFG_DURATION,
     .offset = F(announce_interval),
     .def = "5m",
     DFC_OPT_RANGE(DFC_NS_PER_SEC, 24 * 3600 * DFC_NS_PER_SEC)},
    {.key = "scheduler.maxScheduleCount",
     .type = DFC_CFG_UINT,
     .offset = F(max_schedule_count),
     .def = "5",
     DFC_OPT_RANGE(1, 100)},
    {.key = "scheduler.scheduleTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(schedule_timeout),
     .def = "3h",
     DFC_OPT_RANGE(DFC_NS_PER_SEC, 7 * 24 * 3600 * DFC_NS_PER_SEC)},
    {.key = "upload.server.ip",
     .type = DFC_CFG_STRING,
     .offset = F(upload_ip),
     .validate = dfc_config_check_ip},
    {.key = "upload.server.port",
     .type = DFC_CFG_UINT,
     .offset = F(upload_port),
     .def = "4000",
     DFC_OPT_RANGE(1, 65535)},
    {.key = "upload.server.maxWorkers",
     .type = DFC_CFG_UINT,
     .offset = F(upload_max_workers),
     .def = "32",
     DFC_OPT_RANGE(2, 1024)},
    {.key = "upload.server.maxConnections",
     .type = DFC_CFG_UINT,
     .offset = F(upload_max_connections),
     .def = "256",
     LIMIT},
    {.key = "upload.server.maxConnectionsPerIP",
     .type = DFC_CFG_UINT,
     .offset = F(upload_max_connections_per_ip),
     .def = "64",
     .help = "open connections to the upload port from one peer address; more are closed",
     LIMIT},
    {.key = "upload.server.maxSyncHostStreamsPerHost",
     .type = DFC_CFG_UINT,
     .offset = F(upload_max_sync_host_streams),
     .def = "4",
     .help = "SyncHost streams open at once from one remote (peer address); more are refused "
             "RESOURCE_EXHAUSTED",
     LIMIT},
    {.key = "upload.server.maxSyncPiecesStreamsPerHost",
     .type = DFC_CFG_UINT,
     .offset = F(upload_max_sync_pieces_streams),
     .def = "16",
     .help = "SyncPersistentCachePieces streams waiting at once, from one remote (peer address), "
             "for pieces of a task this node is still downloading; more are refused "
             "RESOURCE_EXHAUSTED",
     LIMIT},
    {.key = "upload.server.firstBytesTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(upload_first_bytes_timeout),
     .def = "5s",
     .help = "a connection to the upload port that has not sent its first bytes (the HTTP/2 "
             "preface) this long after it was accepted is closed",
     DFC_OPT_RANGE(100 * DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "upload.server.firstCallTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(upload_first_call_timeout),
     .def = "10s",
     .help = "a connection to the upload port that has started no call this long after its "
             "first bytes arrived (a TLS handshake comes within it) is closed",
     DFC_OPT_RANGE(100 * DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "upload.disableShared", .type = DFC_CFG_BOOL, .offset = F(disable_shared)},
    /* Upstream's key and default, as download.rateLimit. */
    {.key = "upload.rateLimit",
     .type = DFC_CFG_SIZE,
     .offset = F(upload_rate_limit),
     .def = "10GiB",
     .help = "bytes per second this node sends to peers (Vortex), all uploads together",
     DFC_OPT_RANGE(RATE_MIN, INT64_MAX)},
    {.key = "security.tlsPolicy",
     .type = DFC_CFG_ENUM,
     .offset = F(tls_policy),
     .def = "auto",
     .env = "DFDAEMON_SECURITY_TLSPOLICY",
     .help = "TLS on the TCP ports and to the schedulers: auto (mutual when certificate files "
             "are given, else off), off, server-auth, mutual",
     .choices = dfc_tls_policy_choices},
    {.key = "upload.server.caCert",
     .type = DFC_CFG_PATH,
     .offset = F(upload_server_ca),
     .help = "CA certificate (PEM, ca.crt) that the peers of this node's upload servers "
             "(DfdaemonUpload, Vortex) must chain to"},
    {.key = "upload.server.cert",
     .type = DFC_CFG_PATH,
     .offset = F(upload_server_cert),
     .help =
         "certificate chain (PEM, tls.crt) of this node's upload servers (DfdaemonUpload, Vortex)"},
    {.key = "upload.server.key",
     .type = DFC_CFG_PATH,
     .offset = F(upload_server_key),
     .help = "private key (PEM, tls.key) of this node's upload servers (DfdaemonUpload, Vortex)"},
    {.key = "upload.client.caCert",
     .type = DFC_CFG_PATH,
     .offset = F(upload_client_ca),
     .help = "CA certificate (PEM, ca.crt) that the peers of this node as a client of other nodes "
             "must chain to"},
    {.key = "upload.client.cert",
     .type = DFC_CFG_PATH,
     .offset = F(upload_client_cert),
     .help = "certificate chain (PEM, tls.crt) of this node as a client of other nodes"},
    {.key = "upload.client.key",
     .type = DFC_CFG_PATH,
     .offset = F(upload_client_key),
     .help = "private key (PEM, tls.key) of this node as a client of other nodes"},
    {.key = "upload.client.serverName",
     .type = DFC_CFG_STRING,
     .offset = F(upload_client_name),
     .help = "name (DNS SAN) the other nodes' certificates must hold instead of their IP, for "
             "nodes sharing one certificate; empty = their IP"},
    {.key = "scheduler.caCert",
     .type = DFC_CFG_PATH,
     .offset = F(sched_ca),
     .help = "CA certificate (PEM, ca.crt) that the peers of this node as a client of the "
             "schedulers must chain to"},
    {.key = "scheduler.cert",
     .type = DFC_CFG_PATH,
     .offset = F(sched_cert),
     .help = "certificate chain (PEM, tls.crt) of this node as a client of the schedulers"},
    {.key = "scheduler.key",
     .type = DFC_CFG_PATH,
     .offset = F(sched_key),
     .help = "private key (PEM, tls.key) of this node as a client of the schedulers"},
    {.key = "metrics.server.ip",
     .type = DFC_CFG_STRING,
     .offset = F(metrics_ip),
     .def = "127.0.0.1",
     .env = "DFDAEMON_METRICS_IP",
     .flags = DFC_OPT_NONEMPTY,
     .validate = dfc_config_check_ip,
     .help = "address of the Prometheus endpoint (GET /metrics; /healthz and /readyz too)"},
    {.key = "metrics.server.port",
     .type = DFC_CFG_UINT,
     .offset = F(metrics_port),
     .def = "4002",
     .env = "DFDAEMON_METRICS_PORT",
     .help = "port of the Prometheus endpoint; 0 = no endpoint and no metrics",
     DFC_OPT_RANGE(0, 65535)},
    {.key = "health.server.ip",
     .type = DFC_CFG_STRING,
     .offset = F(health_ip),
     .def = "127.0.0.1",
     .env = "DFDAEMON_HEALTH_IP",
     .flags = DFC_OPT_NONEMPTY,
     .validate = dfc_config_check_ip,
     .help = "address of the health endpoint (GET /healthz, /readyz)"},
    {.key = "health.server.port",
     .type = DFC_CFG_UINT,
     .offset = F(health_port),
     .def = "4003",
     .env = "DFDAEMON_HEALTH_PORT",
     .help = "port of the health endpoint; 0 = off",
     DFC_OPT_RANGE(0, 65535)},
    {.key = "log.level",
     .type = DFC_CFG_ENUM,
     .offset = F(log_level),
     .def = "info",
     .env = "DFDAEMON_LOG_LEVEL",
     .flag = "log-level",
     .short_flag = 'l',
     .metavar = "LEVEL",
     .help = "debug, info, warn, error",
     .choices = dfc_log_level_choices},
    /* A one-off operator flag, never a config key. */
    {.type = DFC_CFG_BOOL,
     .offset = F(discard_broken),
     .flag = "discard-broken-store",
     .help = "when the metadata database is corrupt or missing, move it aside, delete the "
             "cached content and start empty (otherwise dfdaemon refuses)"},
};

const struct dfc_config_schema dfd_config_schema = {"dfdaemon", rows,
                                                    sizeof(rows) / sizeof(rows[0])};

int dfd_config_check_files(const struct dfd_config *cfg, struct dfc_error *err) {
    if (!dfd_config_p2p(cfg) || cfg->tls == DFC_TLS_OFF) {
        return 0;
    }
    struct dfc_tls_files sides[] = {dfd_tls_upload_server(cfg), dfd_tls_upload_client(cfg),
                                    dfd_tls_scheduler(cfg)};
    const char *prefixes[] = {"upload.server.", "upload.client.", "scheduler."};
    for (size_t i = 0; i < 3; i++) {
        int r = dfc_tls_files_read(&sides[i], prefixes[i], err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int dfd_config_finish(struct dfd_config *cfg, struct dfc_error *err) {
    int r = 0;
    if (cfg->disk_low >= cfg->disk_high) {
        return dfc_error_set(err, -EINVAL,
                             "gc.policy.diskLowThresholdPercent (%llu) must be below "
                             "gc.policy.diskHighThresholdPercent (%llu)",
                             (unsigned long long)cfg->disk_low, (unsigned long long)cfg->disk_high);
    }
    if (cfg->reserved_workers != 0 && cfg->reserved_workers >= cfg->max_workers) {
        return dfc_error_set(err, -EINVAL,
                             "download.server.reservedWorkers (%llu) must be below "
                             "download.server.maxWorkers (%llu): streams need a worker",
                             (unsigned long long)cfg->reserved_workers,
                             (unsigned long long)cfg->max_workers);
    }
    if (cfg->max_workers_per_user != 0 && cfg->max_workers_per_user > cfg->max_workers) {
        return dfc_error_set(err, -EINVAL,
                             "download.server.maxWorkersPerUser (%llu) must be between 1 and "
                             "download.server.maxWorkers (%llu)",
                             (unsigned long long)cfg->max_workers_per_user,
                             (unsigned long long)cfg->max_workers);
    }
    if (cfg->max_conns_per_user > cfg->max_connections) {
        return dfc_error_set(err, -EINVAL,
                             "download.server.maxConnectionsPerUser (%llu) must not exceed "
                             "download.server.maxConnections (%llu)",
                             (unsigned long long)cfg->max_conns_per_user,
                             (unsigned long long)cfg->max_connections);
    }
    if (cfg->vortex_max_uploads > cfg->vortex_max_connections) {
        return dfc_error_set(err, -EINVAL,
                             "storage.server.maxConcurrentUploads (%llu) must not exceed "
                             "storage.server.maxConnections (%llu)",
                             (unsigned long long)cfg->vortex_max_uploads,
                             (unsigned long long)cfg->vortex_max_connections);
    }
    if (dfd_config_p2p(cfg) && cfg->upload_port == cfg->vortex_port) {
        return dfc_error_set(err, -EINVAL,
                             "upload.server.port and storage.server.tcpPort are both %llu",
                             (unsigned long long)cfg->upload_port);
    }
    if (dfd_config_p2p(cfg)) {
        /* The TCP servers bind upload.server.ip / storage.server.ip ("" = every address). */
        const uint64_t http[] = {cfg->metrics_port, cfg->health_port};
        const char *names[] = {"metrics.server.port", "health.server.port"};
        for (size_t i = 0; i < 2; i++) {
            if (http[i] != 0 && (http[i] == cfg->upload_port || http[i] == cfg->vortex_port)) {
                return dfc_error_set(err, -EINVAL,
                                     "%s (%llu) is taken by upload.server.port or "
                                     "storage.server.tcpPort",
                                     names[i], (unsigned long long)http[i]);
            }
        }
    }
    if (dfd_config_p2p(cfg)) {
        struct dfc_tls_files sides[] = {dfd_tls_upload_server(cfg), dfd_tls_upload_client(cfg),
                                        dfd_tls_scheduler(cfg)};
        const char *prefixes[] = {"upload.server.", "upload.client.", "scheduler."};
        bool any = false;
        for (size_t i = 0; i < 3; i++) {
            any = any || dfc_tls_files_any(&sides[i]);
        }
        cfg->tls = dfc_tls_policy_resolve(cfg->tls_policy, any);
        for (size_t i = 0; i < 3; i++) {
            r = dfc_tls_files_check(cfg->tls, &sides[i], i == 0, prefixes[i], err);
            if (r < 0) {
                return r;
            }
        }
    }
    if (cfg->host_ip[0] == '\0') {
        char ip[DFC_IP_STR_MAX];
        dfc_local_ip(ip);
        r = dfc_config_set(&dfd_config_schema, cfg, "host.ip", ip, err);
    }
    if (r == 0 && cfg->hostname[0] == '\0') {
        char name[256] = "localhost";
        if (gethostname(name, sizeof(name) - 1) < 0) {
            snprintf(name, sizeof(name), "localhost");
        }
        r = dfc_config_set(&dfd_config_schema, cfg, "host.hostname", name, err);
    }
    return r;
}

void dfd_config_free(struct dfd_config *cfg) {
    dfc_config_free(&dfd_config_schema, cfg);
}
