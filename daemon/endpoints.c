/*
 * endpoints.c - dfdaemon's metrics and health endpoints and its readiness checks (endpoints.h).
 */
#include "endpoints.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dfc/http.h"
#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "storage/storage.h"

struct dfd_endpoints {
    struct dfc_http *metrics;
    struct dfc_http *health;
    struct dfc_rpc_server *server;
    struct dfd_storage *storage;
    const char *socket_path;
};

static int ready(void *arg, char *why, size_t size) {
    struct dfd_endpoints *e = arg;
    if (!dfc_rpc_server_serving(e->server)) {
        snprintf(why, size, "the RPC server on `%s` is not serving", e->socket_path);
        return -EAGAIN;
    }
    struct stat st;
    if (stat(e->socket_path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        snprintf(why, size, "download.server.socketPath `%s` is not a socket", e->socket_path);
        return -ENOENT;
    }
    struct dfc_error err;
    int r = dfd_storage_check_writable(e->storage, &err);
    if (r < 0) {
        snprintf(why, size, "%s", dfc_error_msg(&err));
        return r;
    }
    return 0;
}

int dfd_endpoints_start(const struct dfd_config *cfg, struct dfc_metrics *metrics,
                        struct dfc_rpc_server *server, struct dfd_storage *storage,
                        struct dfd_endpoints **ret, struct dfc_error *err) {
    struct dfd_endpoints *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    e->server = server;
    e->storage = storage;
    e->socket_path = cfg->socket_path;
    bool shared = cfg->metrics_port != 0 && cfg->metrics_port == cfg->health_port &&
                  strcmp(cfg->metrics_ip, cfg->health_ip) == 0;
    struct dfc_http_opts mo = {.ip = cfg->metrics_ip,
                               .port = (unsigned)cfg->metrics_port,
                               .metrics = metrics,
                               .ready = ready,
                               .ready_arg = e,
                               .name = "metrics.server"};
    struct dfc_http_opts ho = {.ip = cfg->health_ip,
                               .port = shared ? 0 : (unsigned)cfg->health_port,
                               .ready = ready,
                               .ready_arg = e,
                               .name = "health.server"};
    int r = dfc_http_start(&mo, &e->metrics, err);
    if (r == 0) {
        r = dfc_http_start(&ho, &e->health, err);
    }
    if (r < 0) {
        dfd_endpoints_stop(e);
        return r;
    }
    DFC_LOG(DFC_LOG_INFO, "dfdaemon.endpoints", "metrics=%s:%llu health=%s:%llu", cfg->metrics_ip,
            (unsigned long long)cfg->metrics_port, cfg->health_ip,
            (unsigned long long)cfg->health_port);
    *ret = e;
    return 0;
}

void dfd_endpoints_stop(struct dfd_endpoints *e) {
    if (e == NULL) {
        return;
    }
    dfc_http_stop(e->metrics);
    dfc_http_stop(e->health);
    free(e);
}
