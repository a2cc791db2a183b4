/*
 * config.c - the scheduler configuration table (dfc/config.h rows: key, type, default,
 * environment, flag, range), and the rules across settings. Each row's environment variable is
 * the upstream (viper) spelling of its key: SCHEDULER_ + the key upper-cased with '.' -> '_'.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/units.h"

#define F(member) offsetof(struct sched_config, member)
#define TIMER     DFC_OPT_RANGE(DFC_NS_PER_MS, 24 * 3600 * DFC_NS_PER_SEC) /* 1ms .. 24h */

static const struct dfc_config_row rows[] = {
    {.key = "server.listenIP",
     .type = DFC_CFG_STRING,
     .offset = F(listen_ip),
     .def = "0.0.0.0",
     .env = "SCHEDULER_SERVER_LISTENIP",
     .validate = dfc_config_check_ip,
     .flags = DFC_OPT_NONEMPTY},
    {.key = "server.port",
     .type = DFC_CFG_UINT,
     .offset = F(port),
     .def = "8002",
     .env = "SCHEDULER_SERVER_PORT",
     .flag = "port",
     .short_flag = 'p',
     .metavar = "PORT",
     .help = "gRPC port; 0: any free port (logged when ready)",
     DFC_OPT_RANGE(0, 65535)},
    {.key = "metrics.server.ip",
     .type = DFC_CFG_STRING,
     .offset = F(metrics_ip),
     .def = "127.0.0.1",
     .env = "SCHEDULER_METRICS_SERVER_IP",
     .validate = dfc_config_check_ip,
     .flags = DFC_OPT_NONEMPTY,
     .help = "address of the HTTP endpoint: GET /metrics, /healthz and /readyz"},
    {.key = "metrics.server.port",
     .type = DFC_CFG_UINT,
     .offset = F(metrics_port),
     .def = "8000",
     .env = "SCHEDULER_METRICS_SERVER_PORT",
     .help = "port of the HTTP endpoint (as upstream); 0 = no endpoint and no metrics",
     DFC_OPT_RANGE(0, 65535)},
    {.key = "server.advertiseIP",
     .type = DFC_CFG_STRING,
     .offset = F(advertise_ip),
     .env = "SCHEDULER_SERVER_ADVERTISEIP",
     .validate = dfc_config_check_ip,
     .help = "sent to dfdaemons as remote_ip; empty: the first non-loopback IPv4 address"},
    {.key = "server.maxWorkers",
     .type = DFC_CFG_UINT,
     .offset = F(max_workers),
     .def = "128",
     .env = "SCHEDULER_SERVER_MAXWORKERS",
     DFC_OPT_RANGE(1, 1024)},
    {.key = "server.reservedWorkers",
     .type = DFC_CFG_UINT,
     .offset = F(reserved_workers),
     .def = "0",
     .env = "SCHEDULER_SERVER_RESERVEDWORKERS"},
    {.key = "server.idleTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(idle_timeout),
     .def = "10m",
     .env = "SCHEDULER_SERVER_IDLETIMEOUT",
     TIMER},
    {.key = "server.maxCalls",
     .type = DFC_CFG_UINT,
     .offset = F(max_calls),
     .def = "1024",
     .env = "SCHEDULER_SERVER_MAXCALLS",
     DFC_OPT_RANGE(1, 1000000)},
    {.key = "server.maxConnections",
     .type = DFC_CFG_UINT,
     .offset = F(max_conns),
     .def = "1024",
     .env = "SCHEDULER_SERVER_MAXCONNECTIONS",
     .help = "open TCP connections at most; more are closed as they are accepted",
     DFC_OPT_RANGE(1, 1000000)},
    {.key = "server.maxConnectionsPerIP",
     .type = DFC_CFG_UINT,
     .offset = F(max_conns_per_ip),
     .def = "64",
     .env = "SCHEDULER_SERVER_MAXCONNECTIONSPERIP",
     .help = "open TCP connections from one peer address; more are closed as they are accepted",
     DFC_OPT_RANGE(1, 1000000)},
    {.key = "server.maxAnnounceStreamsPerHost",
     .type = DFC_CFG_UINT,
     .offset = F(max_announce_streams_per_host),
     .def = "32",
     .env = "SCHEDULER_SERVER_MAXANNOUNCESTREAMSPERHOST",
     .help = "AnnouncePersistentCachePeer streams open at once from one host (peer address); "
             "more are refused RESOURCE_EXHAUSTED",
     DFC_OPT_RANGE(1, 1000000)},
    {.key = "server.firstBytesTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(first_bytes_timeout),
     .def = "5s",
     .env = "SCHEDULER_SERVER_FIRSTBYTESTIMEOUT",
     .help = "a connection that has not sent its first bytes (the HTTP/2 preface) this long "
             "after it was accepted is closed",
     DFC_OPT_RANGE(100 * DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "server.firstCallTimeout",
     .type = DFC_CFG_DURATION,
     .offset = F(first_call_timeout),
     .def = "10s",
     .env = "SCHEDULER_SERVER_FIRSTCALLTIMEOUT",
     .help = "a connection that has started no call this long after its first bytes arrived "
             "(a TLS handshake comes within it) is closed",
     DFC_OPT_RANGE(100 * DFC_NS_PER_MS, 3600 * DFC_NS_PER_SEC)},
    {.key = "server.maxMessageSize",
     .type = DFC_CFG_SIZE,
     .offset = F(max_message_size),
     .def = "4MiB",
     .env = "SCHEDULER_SERVER_MAXMESSAGESIZE",
     DFC_OPT_RANGE(64 << 10, (int64_t)1 << 30)},
    {.key = "server.shutdownGrace",
     .type = DFC_CFG_DURATION,
     .offset = F(shutdown_grace),
     .def = "10s",
     .env = "SCHEDULER_SERVER_SHUTDOWNGRACE",
     TIMER},
    {.key = "database.redis.addrs",
     .type = DFC_CFG_STRING_LIST,
     .offset = F(redis_addrs),
     .env = "SCHEDULER_DATABASE_REDIS_ADDRS",
     .validate = dfc_config_check_hostports,
     .help = "host:port list (the Sentinels with masterName); empty: Redis not enabled"},
    {.key = "database.redis.masterName",
     .type = DFC_CFG_STRING,
     .offset = F(redis_master_name),
     .env = "SCHEDULER_DATABASE_REDIS_MASTERNAME"},
    {.key = "database.redis.username",
     .type = DFC_CFG_STRING,
     .offset = F(redis_username),
     .env = "SCHEDULER_DATABASE_REDIS_USERNAME"},
    {.key = "database.redis.password",
     .type = DFC_CFG_STRING,
     .offset = F(redis_password),
     .env = "SCHEDULER_DATABASE_REDIS_PASSWORD"},
    {.key = "database.redis.sentinelUsername",
     .type = DFC_CFG_STRING,
     .offset = F(redis_sentinel_username),
     .env = "SCHEDULER_DATABASE_REDIS_SENTINELUSERNAME",
     .help = "ACL user for AUTH to the Sentinels (with sentinelPassword)"},
    {.key = "database.redis.sentinelPassword",
     .type = DFC_CFG_STRING,
     .offset = F(redis_sentinel_password),
     .env = "SCHEDULER_DATABASE_REDIS_SENTINELPASSWORD",
     .help = "AUTH to each Sentinel before asking for the master; a Sentinel that refuses it "
             "is not trusted"},
    {.key = "database.redis.tls.caCert",
     .type = DFC_CFG_STRING,
     .offset = F(redis_tls_ca_cert),
     .env = "SCHEDULER_DATABASE_REDIS_TLS_CACERT",
     .help = "PEM CA of the Redis and Sentinel certificates; setting any tls key turns TLS on"},
    {.key = "database.redis.tls.cert",
     .type = DFC_CFG_STRING,
     .offset = F(redis_tls_cert),
     .env = "SCHEDULER_DATABASE_REDIS_TLS_CERT",
     .help = "PEM client certificate for Redis and the Sentinels (with tls.key)"},
    {.key = "database.redis.tls.key",
     .type = DFC_CFG_STRING,
     .offset = F(redis_tls_key),
     .env = "SCHEDULER_DATABASE_REDIS_TLS_KEY"},
    {.key = "database.redis.tls.insecureSkipVerify",
     .type = DFC_CFG_BOOL,
     .offset = F(redis_tls_insecure_skip_verify),
     .def = "false",
     .env = "SCHEDULER_DATABASE_REDIS_TLS_INSECURESKIPVERIFY",
     .help = "TLS without checking the server certificate (warned at start; tests only)"},
    {.key = "database.redis.db",
     .type = DFC_CFG_INT,
     .offset = F(redis_db),
     .def = "0",
     .env = "SCHEDULER_DATABASE_REDIS_DB",
     DFC_OPT_RANGE(0, 65535)},
    {.key = "database.redis.poolSize",
     .type = DFC_CFG_UINT,
     .offset = F(redis_pool_size),
     .def = "20",
     .env = "SCHEDULER_DATABASE_REDIS_POOLSIZE",
     DFC_OPT_RANGE(1, 1024)},
    {.key = "database.redis.timeout",
     .type = DFC_CFG_DURATION,
     .offset = F(redis_timeout),
     .def = "10s",
     .env = "SCHEDULER_DATABASE_REDIS_TIMEOUT",
     TIMER},
    {.key = "manager.schedulerClusterID",
     .type = DFC_CFG_UINT,
     .offset = F(cluster_id),
     .def = "1",
     .env = "SCHEDULER_MANAGER_SCHEDULERCLUSTERID"},
    {.key = "scheduler.gc.hostGCInterval",
     .type = DFC_CFG_DURATION,
     .offset = F(host_gc_interval),
     .def = "5m",
     .env = "SCHEDULER_SCHEDULER_GC_HOSTGCINTERVAL",
     TIMER},
    {.key = "scheduler.candidateParentLimit",
     .type = DFC_CFG_UINT,
     .offset = F(candidate_parent_limit),
     .def = "3",
     .env = "SCHEDULER_SCHEDULER_CANDIDATEPARENTLIMIT",
     DFC_OPT_RANGE(1, 20)},
    {.key = "scheduler.maxPeersPerTask",
     .type = DFC_CFG_UINT,
     .offset = F(max_peers_per_task),
     .def = "1000",
     .env = "SCHEDULER_SCHEDULER_MAXPEERSPERTASK",
     .help = "live peers of one task at most; a register beyond is refused RESOURCE_EXHAUSTED",
     DFC_OPT_RANGE(1, 1000000)},
    {.key = "scheduler.replicaRepairInterval",
     .type = DFC_CFG_DURATION,
     .offset = F(repair_interval),
     .def = "1m",
     .env = "SCHEDULER_SCHEDULER_REPLICAREPAIRINTERVAL",
     TIMER},
    {.key = "scheduler.replicaRepairConcurrency",
     .type = DFC_CFG_UINT,
     .offset = F(repair_concurrency),
     .def = "4",
     .env = "SCHEDULER_SCHEDULER_REPLICAREPAIRCONCURRENCY",
     DFC_OPT_RANGE(1, 256)},
    {.key = "scheduler.probeInterval",
     .type = DFC_CFG_DURATION,
     .offset = F(probe_interval),
     .def = "5m",
     .env = "SCHEDULER_SCHEDULER_PROBEINTERVAL",
     .help = "a persistent copy counts only while its node answered a probe within this; a peer "
             "answering NOT_FOUND, or failing two probes in a row, is removed and repaired "
             "around; 0 = copies counted unprobed",
     DFC_OPT_RANGE(0, 24 * 3600 * DFC_NS_PER_SEC)},
    {.key = "security.tlsPolicy",
     .type = DFC_CFG_ENUM,
     .offset = F(tls_policy),
     .def = "auto",
     .env = "SCHEDULER_SECURITY_TLSPOLICY",
     .help = "TLS on the gRPC port and to the nodes: auto (mutual when certificate files are "
             "given, else off), off, server-auth, mutual",
     .choices = dfc_tls_policy_choices},
    {.key = "security.operatorIdentities",
     .type = DFC_CFG_STRING_LIST,
     .offset = F(operator_identities),
     .env = "SCHEDULER_SECURITY_OPERATORIDENTITIES",
     .help = "under mutual TLS, certificates that may delete any persistent cache task: each "
             "entry is matched against a caller certificate's SAN URIs, SAN DNS names and common "
             "name (docs/trust-model.md)"},
    {.key = "server.tls.caCert",
     .type = DFC_CFG_PATH,
     .offset = F(server_tls_ca),
     .help = "CA certificate (PEM, ca.crt) that the peers of the scheduler's gRPC server must "
             "chain to"},
    {.key = "server.tls.cert",
     .type = DFC_CFG_PATH,
     .offset = F(server_tls_cert),
     .help = "certificate chain (PEM, tls.crt) of the scheduler's gRPC server"},
    {.key = "server.tls.key",
     .type = DFC_CFG_PATH,
     .offset = F(server_tls_key),
     .help = "private key (PEM, tls.key) of the scheduler's gRPC server"},
    {.key = "peer.tls.caCert",
     .type = DFC_CFG_PATH,
     .offset = F(peer_tls_ca),
     .help = "CA certificate (PEM, ca.crt) that the peers of the scheduler as a client of the "
             "nodes must chain to"},
    {.key = "peer.tls.cert",
     .type = DFC_CFG_PATH,
     .offset = F(peer_tls_cert),
     .help = "certificate chain (PEM, tls.crt) of the scheduler as a client of the nodes"},
    {.key = "peer.tls.key",
     .type = DFC_CFG_PATH,
     .offset = F(peer_tls_key),
     .help = "private key (PEM, tls.key) of the scheduler as a client of the nodes"},
    {.key = "peer.tls.serverName",
     .type = DFC_CFG_STRING,
     .offset = F(peer_tls_name),
     .help = "name (DNS SAN) the nodes' certificates must hold instead of their IP, for nodes "
             "sharing one certificate; empty = their IP"},
    {.key = "log.level",
     .type = DFC_CFG_ENUM,
     .offset = F(log_level),
     .def = "info",
     .env = "SCHEDULER_LOG_LEVEL",
     .flag = "log-level",
     .short_flag = 'l',
     .metavar = "LEVEL",
     .help = "debug, info, warn, error",
     .choices = dfc_log_level_choices},
};

const struct dfc_config_schema sched_config_schema = {"scheduler", rows,
                                                      sizeof(rows) / sizeof(rows[0])};

int sched_config_finish(struct sched_config *cfg, struct dfc_error *err) {
    int r = 0;
    if (cfg->reserved_workers != 0 && cfg->reserved_workers >= cfg->max_workers) {
        return dfc_error_set(err, -EINVAL,
                             "server.reservedWorkers (%llu) must be below server.maxWorkers "
                             "(%llu): streams need a worker",
                             (unsigned long long)cfg->reserved_workers,
                             (unsigned long long)cfg->max_workers);
    }
    if (cfg->redis_master_name[0] != '\0' && cfg->redis_addrs.n == 0) {
        return dfc_error_set(err, -EINVAL,
                             "database.redis.masterName is set but database.redis.addrs (the "
                             "Sentinels) is empty");
    }
    struct dfc_tls_files server = sched_tls_server(cfg), peer = sched_tls_peer(cfg);
    cfg->tls = dfc_tls_policy_resolve(cfg->tls_policy,
                                      dfc_tls_files_any(&server) || dfc_tls_files_any(&peer));
    r = dfc_tls_files_check(cfg->tls, &server, true, "server.tls.", err);
    if (r == 0) {
        r = dfc_tls_files_check(cfg->tls, &peer, false, "peer.tls.", err);
    }
    if (r < 0) {
        return r;
    }
    if (cfg->advertise_ip[0] == '\0') {
        char ip[DFC_IP_STR_MAX];
        dfc_local_ip(ip);
        r = dfc_config_set(&sched_config_schema, cfg, "server.advertiseIP", ip, err);
    }
    return r;
}

int sched_config_check_files(const struct sched_config *cfg, struct dfc_error *err) {
    int r = 0;
    if (cfg->tls != DFC_TLS_OFF) {
        struct dfc_tls_files server = sched_tls_server(cfg), peer = sched_tls_peer(cfg);
        r = dfc_tls_files_read(&server, "server.tls.", err);
        if (r == 0) {
            r = dfc_tls_files_read(&peer, "peer.tls.", err);
        }
    }
    if (r == 0) {
        /* Redis TLS has no policy of its own: its files are read whenever they are given. */
        struct dfc_tls_files redis = {cfg->redis_tls_ca_cert, cfg->redis_tls_cert,
                                      cfg->redis_tls_key, NULL};
        r = dfc_tls_files_read(&redis, "database.redis.tls.", err);
    }
    return r;
}

void sched_config_free(struct sched_config *cfg) {
    dfc_config_free(&sched_config_schema, cfg);
}
