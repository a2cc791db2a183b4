/*
 * config.c - the dfdaemon configuration table.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/units.h"

static int validate_percent(const struct dfc_config_row *row, const void *field,
                            struct dfc_error *err) {
    uint64_t v = *(const uint64_t *)field;
    if (v > 100) {
        return dfc_error_set(err, -EINVAL, "%s: %llu is not a percentage", row->key,
                             (unsigned long long)v);
    }
    return 0;
}

static int validate_positive_duration(const struct dfc_config_row *row, const void *field,
                                      struct dfc_error *err) {
    if (*(const int64_t *)field <= 0) {
        return dfc_error_set(err, -EINVAL, "%s must be positive", row->key);
    }
    return 0;
}

static int validate_nonempty_path(const struct dfc_config_row *row, const void *field,
                                  struct dfc_error *err) {
    const char *v = *(char *const *)field;
    if (v == NULL || v[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "%s must be set", row->key);
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

static int validate_workers(const struct dfc_config_row *row, const void *field,
                            struct dfc_error *err) {
    uint64_t v = *(const uint64_t *)field;
    if (v < 1 || v > 1024) {
        return dfc_error_set(err, -EINVAL, "%s must be between 1 and 1024", row->key);
    }
    return 0;
}

/* 1 .. 1,000,000: the limits that keep one caller from starving the others (0 would disable
 * the server, and a larger bound than a descriptor table is no bound). */
static int validate_limit(const struct dfc_config_row *row, const void *field,
                          struct dfc_error *err) {
    uint64_t v = *(const uint64_t *)field;
    if (v < 1 || v > 1000000) {
        return dfc_error_set(err, -EINVAL, "%s must be between 1 and 1000000", row->key);
    }
    return 0;
}

static int validate_idle_timeout(const struct dfc_config_row *row, const void *field,
                                 struct dfc_error *err) {
    int64_t v = *(const int64_t *)field;
    if (v < 1000000 || v > (int64_t)24 * 3600 * 1000000000) {
        return dfc_error_set(err, -EINVAL, "%s must be between 1ms and 24h", row->key);
    }
    return 0;
}

#define F(member) offsetof(struct dfd_config, member)

static const struct dfc_config_row rows[] = {
    {"download.server.socketPath", DFC_CFG_PATH, F(socket_path), "/var/run/dragonfly/dfdaemon.sock",
     "DFDAEMON_SOCKET_PATH", validate_nonempty_path},
    {"download.server.socketMode", DFC_CFG_MODE, F(socket_mode), "0777", NULL, NULL},
    {"download.server.socketGroup", DFC_CFG_STRING, F(socket_group), "", NULL, NULL},
    {"download.server.maxWorkers", DFC_CFG_UINT, F(max_workers), "32", NULL, validate_workers},
    {"download.server.reservedWorkers", DFC_CFG_UINT, F(reserved_workers), "0", NULL, NULL},
    {"download.server.maxWorkersPerUser", DFC_CFG_UINT, F(max_workers_per_user), "0", NULL, NULL},
    {"download.server.idleTimeout", DFC_CFG_DURATION, F(idle_timeout), "30s", NULL,
     validate_idle_timeout},
    {"download.server.maxCallsPerUser", DFC_CFG_UINT, F(max_calls_per_user), "64", NULL,
     validate_limit},
    {"download.server.maxConnections", DFC_CFG_UINT, F(max_connections), "1024", NULL,
     validate_limit},
    {"download.server.maxConnectionsPerUser", DFC_CFG_UINT, F(max_conns_per_user), "128", NULL,
     validate_limit},
    {"storage.dir", DFC_CFG_PATH, F(storage_dir), "/var/lib/dragonfly", "DFDAEMON_STORAGE_DIR",
     validate_nonempty_path},
    {"storage.keep", DFC_CFG_BOOL, F(storage_keep), "true", NULL, NULL},
    {"storage.unsafeSharedInodeImports", DFC_CFG_BOOL, F(unsafe_shared_inode_imports), "false",
     NULL, NULL},
    {"gc.interval", DFC_CFG_DURATION, F(gc_interval), "900s", NULL, validate_positive_duration},
    {"gc.policy.persistentCacheTaskTTL", DFC_CFG_DURATION, F(default_ttl), "24h", NULL,
     validate_positive_duration},
    {"gc.policy.diskThreshold", DFC_CFG_SIZE, F(disk_threshold), "0", NULL, NULL},
    {"gc.policy.diskHighThresholdPercent", DFC_CFG_UINT, F(disk_high), "80", NULL,
     validate_percent},
    {"gc.policy.diskLowThresholdPercent", DFC_CFG_UINT, F(disk_low), "60", NULL, validate_percent},
    {"host.ip", DFC_CFG_STRING, F(host_ip), "", "DFDAEMON_HOST_IP", NULL},
    {"host.hostname", DFC_CFG_STRING, F(hostname), "", "DFDAEMON_HOSTNAME", NULL},
    {"log.level", DFC_CFG_STRING, F(log_level), "info", "DFDAEMON_LOG_LEVEL", validate_log_level},
};

const struct dfc_config_schema dfd_config_schema = {"dfdaemon", rows,
                                                    sizeof(rows) / sizeof(rows[0])};

int dfd_config_init(struct dfd_config *cfg, struct dfc_error *err) {
    return dfc_config_defaults(&dfd_config_schema, cfg, err);
}

int dfd_config_load(struct dfd_config *cfg, const char *path, struct dfc_error *err) {
    int r = 0;
    if (path != NULL) {
        r = dfc_config_load_file(&dfd_config_schema, cfg, path, err);
    }
    if (r == 0) {
        r = dfc_config_load_env(&dfd_config_schema, cfg, err);
    }
    return r;
}

int dfd_config_finish(struct dfd_config *cfg, struct dfc_error *err) {
    int r = dfc_config_validate(&dfd_config_schema, cfg, err);
    if (r < 0) {
        return r;
    }
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
