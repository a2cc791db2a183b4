/*
 * endpoints.c - the CSI plugin's metrics and health endpoints (endpoints.h).
 */
#include "endpoints.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dfc/addr.h"
#include "dfc/http.h"
#include "dfc/metrics.h"
#include "dfc/rpc_server.h"
#include "published.h"

struct csi_endpoints {
    struct dfc_hostport maddr, haddr; /* port 0: off */
    char *socket_dir, *kubelet_dir;
    struct dfc_metrics *registry;
    struct dfc_metric *published;
    struct dfc_http *metrics, *health;
    struct dfc_rpc_server *server;
};

/* "IP:PORT" or "[IPv6]:PORT" into *ret (dfc/addr.h); "" is off. The command line checked it
 * already (an address row with DFC_OPT_IP, csi/cmd/csi-plugin.c). */
static int parse_addr(const char *flag, const char *s, struct dfc_hostport *ret,
                      struct dfc_error *err) {
    memset(ret, 0, sizeof(*ret));
    if (s != NULL && s[0] != '\0' && dfc_addr_parse_ip(s, ret) < 0) {
        memset(ret, 0, sizeof(*ret));
        return dfc_error_set(err, -EINVAL, "--%s: `%s` is not IP:PORT", flag, s);
    }
    return 0;
}

/* published_volumes at scrape time (the HTTP thread): one read of this process's mountinfo. */
static double read_published(void *arg, size_t series) {
    struct csi_endpoints *e = arg;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return NAN;
    }
    uint64_t n = 0;
    int r = csi_published_count(f, e->socket_dir, e->kubelet_dir, &n);
    fclose(f);
    return r < 0 ? NAN : (double)n;
}

/* An absolute path without symlinks, as mountinfo shows it (the path itself when it cannot be
 * resolved now: the socket dir may appear later). */
static char *canonical(const char *path) {
    char *p = realpath(path, NULL);
    return p != NULL ? p : strdup(path);
}

int csi_endpoints_new(const char *metrics_addr, const char *health_addr, const char *socket_dir,
                      const char *kubelet_dir, struct csi_endpoints **ret, struct dfc_error *err) {
    struct csi_endpoints *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = parse_addr("metrics-address", metrics_addr, &e->maddr, err);
    if (r == 0) {
        r = parse_addr("health-address", health_addr, &e->haddr, err);
    }
    if (r == 0 && ((e->socket_dir = canonical(socket_dir)) == NULL ||
                   (e->kubelet_dir = canonical(kubelet_dir)) == NULL)) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if (r == 0 && e->maddr.port != 0) {
        struct dfc_metric_desc d = {
            .name = CSI_METRICS_PREFIX "published_volumes",
            .help = "Bind mounts of the socket dir below the kubelet dir (published volumes), "
                    "from /proc/self/mountinfo.",
            .type = DFC_METRIC_GAUGE,
            .read = read_published,
            .read_arg = e,
        };
        if (dfc_metrics_new(&e->registry) < 0) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            r = dfc_metrics_add(e->registry, &d, &e->published, err);
        }
    }
    if (r < 0) {
        csi_endpoints_free(e);
        return r;
    }
    *ret = e;
    return 0;
}

struct dfc_metrics *csi_endpoints_registry(struct csi_endpoints *e) {
    return e->registry;
}

static int ready(void *arg, char *why, size_t size) {
    struct csi_endpoints *e = arg;
    if (!dfc_rpc_server_serving(e->server)) {
        snprintf(why, size, "the CSI server is not serving");
        return -EAGAIN;
    }
    struct stat st;
    if (stat(e->socket_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, size, "the socket dir `%s` does not exist", e->socket_dir);
        return -ENOENT;
    }
    return 0;
}

int csi_endpoints_start(struct csi_endpoints *e, struct dfc_rpc_server *server,
                        struct dfc_error *err) {
    e->server = server;
    bool shared = e->maddr.port != 0 && e->maddr.port == e->haddr.port &&
                  strcmp(e->maddr.host, e->haddr.host) == 0;
    struct dfc_http_opts mo = {.ip = e->maddr.host,
                               .port = e->maddr.port,
                               .metrics = e->registry,
                               .ready = ready,
                               .ready_arg = e,
                               .name = "--metrics-address"};
    struct dfc_http_opts ho = {.ip = e->haddr.host,
                               .port = shared ? 0 : e->haddr.port,
                               .ready = ready,
                               .ready_arg = e,
                               .name = "--health-address"};
    int r = dfc_http_start(&mo, &e->metrics, err);
    if (r == 0) {
        r = dfc_http_start(&ho, &e->health, err);
    }
    if (r < 0) {
        csi_endpoints_stop_http(e);
    }
    return r;
}

void csi_endpoints_stop_http(struct csi_endpoints *e) {
    dfc_http_stop(e->metrics);
    dfc_http_stop(e->health);
    e->metrics = e->health = NULL;
}

void csi_endpoints_free(struct csi_endpoints *e) {
    if (e == NULL) {
        return;
    }
    csi_endpoints_stop_http(e);
    dfc_metrics_free(e->registry);
    free(e->socket_dir);
    free(e->kubelet_dir);
    free(e);
}
