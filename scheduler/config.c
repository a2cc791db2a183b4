/*
 * config.c - the scheduler configuration table. Each row's environment variable is the
 * upstream (viper) spelling of its key: SCHEDULER_ + the key upper-cased with '.' -> '_'.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/units.h"

static int validate_ip(const struct dfc_config_row *row, const void *field, struct dfc_error *err) {
    const char *v = *(char *const *)field;
    unsigned char buf[16];
    if (v[0] == '\0' && strcmp(row->key, "server.advertiseIP") == 0) {
        return 0; /* detected by sched_config_finish() */
    }
    if (inet_pton(AF_INET, v, buf) != 1 && inet_pton(AF_INET6, v, buf) != 1) {
        return dfc_error_set(err, -EINVAL, "%s: `%s` is not an IP address", row->key, v);
    }
    return 0;
}

/* 0 asks for any free port (the bound one is logged when ready). */
static int validate_port(const struct dfc_config_row *row, const void *field,
                         struct dfc_error *err) {
    uint64_t v = *(const uint64_t *)field;
    if (v > 65535) {
        return dfc_error_set(err, -EINVAL, "%s must be between 0 and 65535, got %llu", row->key,
                             (unsigned long long)v);
    }
    return 0;
}

/* host:port with a non-empty host and a port in 1..65535 (IPv6 as [addr]:port). */
static int validate_addrs(const struct dfc_config_row *row, const void *field,
                          struct dfc_error *err) {
    const struct dfc_config_list *l = field;
    for (size_t i = 0; i < l->n; i++) {
        const char *a = l->items[i];
        const char *colon = strrchr(a, ':');
        uint64_t port;
        bool bad = colon == NULL || colon == a || dfc_parse_u64(colon + 1, &port) < 0 || port < 1 ||
                   port > 65535;
        if (!bad && a[0] == '[' && colon[-1] != ']') {
            bad = true;
        }
        if (bad) {
            return dfc_error_set(err, -EINVAL, "%s[%zu]: `%s` is not host:port", row->key, i, a);
        }
    }
    return 0;
}

static int validate_range(const struct dfc_config_row *row, uint64_t v, uint64_t lo, uint64_t hi,
                          struct dfc_error *err) {
    if (v < lo || v > hi) {
        return dfc_error_set(err, -EINVAL, "%s must be between %llu and %llu, got %llu", row->key,
                             (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)v);
    }
    return 0;
}

static int validate_workers(const struct dfc_config_row *row, const void *field,
                            struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 1, 1024, err);
}

static int validate_limit(const struct dfc_config_row *row, const void *field,
                          struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 1, 1000000, err);
}

static int validate_parent_limit(const struct dfc_config_row *row, const void *field,
                                 struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 1, 20, err);
}

static int validate_concurrency(const struct dfc_config_row *row, const void *field,
                                struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 1, 64, err);
}

static int validate_pool(const struct dfc_config_row *row, const void *field,
                         struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 1, 1024, err);
}

static int validate_message_size(const struct dfc_config_row *row, const void *field,
                                 struct dfc_error *err) {
    return validate_range(row, *(const uint64_t *)field, 64 << 10, (uint64_t)1 << 30, err);
}

static int validate_db(const struct dfc_config_row *row, const void *field, struct dfc_error *err) {
    int64_t v = *(const int64_t *)field;
    if (v < 0 || v > 65535) {
        return dfc_error_set(err, -EINVAL, "%s must be between 0 and 65535, got %lld", row->key,
                             (long long)v);
    }
    return 0;
}

/* 1ms .. 24h: a timer or timeout that is never zero, negative or absurd. */
static int validate_interval(const struct dfc_config_row *row, const void *field,
                             struct dfc_error *err) {
    int64_t v = *(const int64_t *)field;
    if (v < DFC_NS_PER_MS || v > (int64_t)24 * 3600 * DFC_NS_PER_SEC) {
        return dfc_error_set(err, -EINVAL, "%s must be between 1ms and 24h", row->key);
    }
    return 0;
}

static int validate_log_level(const struct dfc_config_row *row, const void *field,
                              struct dfc_error *err) {
    int level;
    if (dfc_log_parse_level(*(char *const *)field, &level) < 0) {
        return dfc_error_set(err, -EINVAL, "%s: `%s` is not debug, info, warn or error", row->key,
                             *(char *const *)field);
    }
    return 0;
}

#define F(member) offsetof(struct sched_config, member)

static const struct dfc_config_row rows[] = {
    {"server.listenIP", DFC_CFG_STRING, F(listen_ip), "0.0.0.0", "SCHEDULER_SERVER_LISTENIP",
     validate_ip},
    {"server.port", DFC_CFG_UINT, F(port), "8002", "SCHEDULER_SERVER_PORT", validate_port},
    {"server.advertiseIP", DFC_CFG_STRING, F(advertise_ip), "", "SCHEDULER_SERVER_ADVERTISEIP",
     validate_ip},
    {"server.maxWorkers", DFC_CFG_UINT, F(max_workers), "128", "SCHEDULER_SERVER_MAXWORKERS",
     validate_workers},
    {"server.reservedWorkers", DFC_CFG_UINT, F(reserved_workers), "0",
     "SCHEDULER_SERVER_RESERVEDWORKERS", NULL},
    {"server.idleTimeout", DFC_CFG_DURATION, F(idle_timeout), "10m", "SCHEDULER_SERVER_IDLETIMEOUT",
     validate_interval},
    {"server.maxCalls", DFC_CFG_UINT, F(max_calls), "1024", "SCHEDULER_SERVER_MAXCALLS",
     validate_limit},
    {"server.maxMessageSize", DFC_CFG_SIZE, F(max_message_size), "4MiB",
     "SCHEDULER_SERVER_MAXMESSAGESIZE", validate_message_size},
    {"server.shutdownGrace", DFC_CFG_DURATION, F(shutdown_grace), "10s",
     "SCHEDULER_SERVER_SHUTDOWNGRACE", validate_interval},
    {"database.redis.addrs", DFC_CFG_STRING_LIST, F(redis_addrs), "",
     "SCHEDULER_DATABASE_REDIS_ADDRS", validate_addrs},
    {"database.redis.masterName", DFC_CFG_STRING, F(redis_master_name), "",
     "SCHEDULER_DATABASE_REDIS_MASTERNAME", NULL},
    {"database.redis.username", DFC_CFG_STRING, F(redis_username), "",
     "SCHEDULER_DATABASE_REDIS_USERNAME", NULL},
    {"database.redis.password", DFC_CFG_STRING, F(redis_password), "",
     "SCHEDULER_DATABASE_REDIS_PASSWORD", NULL},
    {"database.redis.db", DFC_CFG_INT, F(redis_db), "0", "SCHEDULER_DATABASE_REDIS_DB",
     validate_db},
    {"database.redis.poolSize", DFC_CFG_UINT, F(redis_pool_size), "20",
     "SCHEDULER_DATABASE_REDIS_POOLSIZE", validate_pool},
    {"database.redis.timeout", DFC_CFG_DURATION, F(redis_timeout), "10s",
     "SCHEDULER_DATABASE_REDIS_TIMEOUT", validate_interval},
    {"manager.schedulerClusterID", DFC_CFG_UINT, F(cluster_id), "1",
     "SCHEDULER_MANAGER_SCHEDULERCLUSTERID", NULL},
    {"scheduler.gc.hostGCInterval", DFC_CFG_DURATION, F(host_gc_interval), "5m",
     "SCHEDULER_SCHEDULER_GC_HOSTGCINTERVAL", validate_interval},
    {"scheduler.candidateParentLimit", DFC_CFG_UINT, F(candidate_parent_limit), "3",
     "SCHEDULER_SCHEDULER_CANDIDATEPARENTLIMIT", validate_parent_limit},
    {"scheduler.replicaRepairInterval", DFC_CFG_DURATION, F(repair_interval), "1m",
     "SCHEDULER_SCHEDULER_REPLICAREPAIRINTERVAL", validate_interval},
    {"scheduler.replicaRepairConcurrency", DFC_CFG_UINT, F(repair_concurrency), "4",
     "SCHEDULER_SCHEDULER_REPLICAREPAIRCONCURRENCY", validate_concurrency},
    {"log.level", DFC_CFG_STRING, F(log_level), "info", "SCHEDULER_LOG_LEVEL", validate_log_level},
};

const struct dfc_config_schema sched_config_schema = {"scheduler", rows,
                                                      sizeof(rows) / sizeof(rows[0])};

int sched_config_init(struct sched_config *cfg, struct dfc_error *err) {
    return dfc_config_defaults(&sched_config_schema, cfg, err);
}

int sched_config_load(struct sched_config *cfg, const char *path, struct dfc_error *err) {
    int r = 0;
    if (path != NULL) {
        r = dfc_config_load_file(&sched_config_schema, cfg, path, err);
    }
    if (r == 0) {
        r = dfc_config_load_env(&sched_config_schema, cfg, err);
    }
    return r;
}

int sched_config_finish(struct sched_config *cfg, struct dfc_error *err) {
    int r = dfc_config_validate(&sched_config_schema, cfg, err);
    if (r < 0) {
        return r;
    }
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
    if (cfg->advertise_ip[0] == '\0') {
        char ip[DFC_IP_STR_MAX];
        dfc_local_ip(ip);
        r = dfc_config_set(&sched_config_schema, cfg, "server.advertiseIP", ip, err);
    }
    return r;
}

void sched_config_free(struct sched_config *cfg) {
    dfc_config_free(&sched_config_schema, cfg);
}
