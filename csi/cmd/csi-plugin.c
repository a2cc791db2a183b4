/*
 * csi-plugin - the Dragonfly CSI driver: publishes the node's dfdaemon socket directory into
 * pods. main() reads flags and environment (dfc/options.h), then serves csi.v1 until
 * SIGTERM/SIGINT.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "dfc/log.h"
#include "dfc/options.h"
#include "dfc/rpc_server.h"
#include "dfc/server_main.h"
#include "dfc/signals.h"
#include "driver.h"
#include "endpoints.h"
#include "registration.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

/* What the command line sets; strings belong to it (dfc_config_free). */
struct csi_opts {
    char *endpoint;
    char *driver_name;
    char *node_id; /* NULL: the hostname */
    char *socket_dir;
    char *kubelet_dir;
    char *state_dir;
    bool require_readonly;
    bool probe_dfdaemon;
    char *metrics_address;
    char *health_address;
    char *registration_dir;  /* NULL: no kubelet registration (node-driver-registrar does it) */
    char *registration_path; /* NULL: the endpoint's path */
    const char *log_level;
};

#define O(member) offsetof(struct csi_opts, member)

static const struct dfc_config_row rows[] = {
    {.type = DFC_CFG_STRING,
     .offset = O(endpoint),
     .env = "CSI_ENDPOINT",
     .flag = "endpoint",
     .metavar = "ADDR",
     .help = "unix:///path/csi.sock or a path",
     .flags = DFC_OPT_REQUIRED},
    {.type = DFC_CFG_STRING,
     .offset = O(driver_name),
     .def = CSI_DEFAULT_DRIVER_NAME,
     .env = "CSI_DRIVER_NAME",
     .flag = "driver-name",
     .metavar = "NAME"},
    {.type = DFC_CFG_STRING,
     .offset = O(node_id),
     .env = "CSI_NODE_ID",
     .env_alt = "NODE_NAME",
     .flag = "node-id",
     .metavar = "ID",
     .help = "the node's id, else the hostname",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING,
     .offset = O(socket_dir),
     .def = "/var/run/dragonfly",
     .env = "CSI_SOCKET_DIR",
     .flag = "socket-dir",
     .metavar = "DIR",
     .help = "the directory to publish"},
    {.type = DFC_CFG_STRING,
     .offset = O(kubelet_dir),
     .def = "/var/lib/kubelet",
     .env = "CSI_KUBELET_DIR",
     .flag = "kubelet-dir",
     .metavar = "DIR",
     .help = "target paths must lie below it"},
    {.type = DFC_CFG_STRING,
     .offset = O(state_dir),
     .def = "/var/lib/dragonfly-csi",
     .env = "CSI_STATE_DIR",
     .flag = "state-dir",
     .metavar = "DIR",
     .help = "controller volume records"},
    {.type = DFC_CFG_BOOL,
     .offset = O(require_readonly),
     .env = "CSI_REQUIRE_READONLY",
     .flag = "require-readonly",
     .help = "refuse read-write publishes"},
    {.type = DFC_CFG_BOOL,
     .offset = O(probe_dfdaemon),
     .env = "CSI_PROBE_DFDAEMON",
     .flag = "probe-dfdaemon",
     .help = "Probe is ready only while dfdaemon accepts connections"},
    {.type = DFC_CFG_ADDR,
     .offset = O(metrics_address),
     .env = "CSI_METRICS_ADDRESS",
     .flag = "metrics-address",
     .help = "serve GET /metrics (and /healthz, /readyz) there; empty = off",
     .flags = DFC_OPT_IP},
    {.type = DFC_CFG_ADDR,
     .offset = O(health_address),
     .env = "CSI_HEALTH_ADDRESS",
     .flag = "health-address",
     .help = "serve GET /healthz and /readyz (the socket dir exists) there; empty = off",
     .flags = DFC_OPT_IP},
    {.type = DFC_CFG_STRING,
     .offset = O(registration_dir),
     .env = "CSI_KUBELET_REGISTRATION_DIR",
     .flag = "kubelet-registration-dir",
     .metavar = "DIR",
     .help = "register with kubelet itself: serve its plugin registration on\n"
             "DIR/<driver-name>-reg.sock (kubelet's plugins_registry); off by default",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING,
     .offset = O(registration_path),
     .env = "CSI_KUBELET_REGISTRATION_PATH",
     .flag = "kubelet-registration-path",
     .metavar = "PATH",
     .help = "the CSI socket's path as kubelet sees it, else the endpoint's",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_ENUM,
     .offset = O(log_level),
     .def = "info",
     .env = "CSI_LOG_LEVEL",
     .flag = "log-level",
     .short_flag = 'l',
     .metavar = "LEVEL",
     .help = "debug, info, warn, error",
     .choices = dfc_log_level_choices},
};

static const struct dfc_config_schema schema = {"csi-plugin", rows, sizeof(rows) / sizeof(rows[0])};

static const struct dfc_cli cli = {
    .prog = "csi-plugin",
    .usage = "[options]",
    .about = "Serves CSI (csi.v1 Identity, Node, Controller) and publishes the dfdaemon socket\n"
             "directory into pods. Every option also reads the environment variable shown.",
    .schema = &schema,
    .version = DFC_VERSION,
};

/* unix:///abs, unix://rel, unix:/abs, or a plain path -> the path. */
static const char *endpoint_path(const char *ep) {
    if (strncmp(ep, "unix://", 7) == 0) {
        return ep + 7;
    }
    if (strncmp(ep, "unix:", 5) == 0) {
        return ep + 5;
    }
    return ep;
}

static int serve(void *opts, const sigset_t *signals, struct dfc_error *err);

static const struct dfc_server_main server_main = {
    .cli = &cli,
    .log_level_offset = O(log_level),
    .run = serve,
    .failed_event = "csi.failed",
};

int main(int argc, char **argv) {
    struct csi_opts o = {0};
    return dfc_server_main(&server_main, &o, argc, argv);
}

static int serve(void *opts, const sigset_t *signals, struct dfc_error *err) {
    const struct csi_opts *o = opts;
    char hostname[256] = "";
    gethostname(hostname, sizeof(hostname) - 1);
    struct csi_config cfg = {
        .driver_name = o->driver_name,
        .version = DFC_VERSION,
        .node_id = o->node_id != NULL ? o->node_id : hostname,
        .socket_dir = o->socket_dir,
        .kubelet_dir = o->kubelet_dir,
        .state_dir = o->state_dir,
        .require_readonly = o->require_readonly,
        .probe_dfdaemon = o->probe_dfdaemon,
    };
    if (cfg.node_id[0] == '\0') {
        cfg.node_id = "unknown-node"; /* NodeGetInfo must never fail */
    }
    struct csi_driver d;
    struct dfc_rpc_server *server = NULL;
    struct csi_endpoints *ep = NULL;
    const char *sock = endpoint_path(o->endpoint);
    int r = csi_endpoints_new(o->metrics_address, o->health_address, cfg.socket_dir,
                              cfg.kubelet_dir, &ep, err);
    if (r < 0) {
        fprintf(stderr, "csi-plugin: %s\n", dfc_error_msg(err));
        return 2;
    }
    /* CSI messages are small: a 1 MiB limit is plenty and bounds what a caller can send. */
    struct dfc_rpc_server_opts so = {.log_level_ok = DFC_LOG_INFO,
                                     .name = "csi",
                                     .max_workers = 16,
                                     .max_recv_msg = (size_t)1 << 20,
                                     .metrics = csi_endpoints_registry(ep),
                                     .metrics_prefix = CSI_METRICS_PREFIX};
    r = csi_driver_init(&d, &cfg, &csi_mount_ops_linux, err);
    if (r == 0 && (r = dfc_mkdir_parent(sock, 0755)) < 0) {
        dfc_error_errno(err, r, "create the directory of `%s`", sock);
    }
    if (r == 0) {
        r = dfc_rpc_server_new(&so, &server, err);
    }
    if (r == 0) {
        r = csi_driver_register(&d, server, err);
    }
    if (r == 0) { /* before the socket appears: whoever sees it finds the endpoints up */
        r = csi_endpoints_start(ep, server, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_listen_unix(server, sock, 0660, -1, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_start(server, err);
    }
    /* Registration last: kubelet calls the CSI socket as soon as it learns of it. */
    struct csi_registration reg = {0};
    if (r == 0 && o->registration_dir != NULL) {
        struct csi_registration_config rc = {
            .dir = o->registration_dir,
            .driver_name = cfg.driver_name,
            .endpoint = o->registration_path != NULL ? o->registration_path : sock,
        };
        r = csi_registration_start(&reg, &rc, err);
    }
    if (r < 0) {
        csi_endpoints_free(ep);
        dfc_rpc_server_free(server);
        return r; /* logged as csi.failed */
    }
    DFC_LOG(DFC_LOG_INFO, "csi.ready",
            "endpoint=%s driver=%s node_id=%s socket_dir=%s kubelet_dir=%s require_readonly=%d",
            sock, cfg.driver_name, cfg.node_id, cfg.socket_dir, cfg.kubelet_dir,
            cfg.require_readonly);
    int sig = dfc_signals_wait(signals);
    DFC_LOG(DFC_LOG_INFO, "csi.stopping", "signal=%d", sig);
    csi_registration_stop(&reg); /* first: kubelet deregisters before the CSI socket goes */
    csi_endpoints_stop_http(ep); /* its readiness check reads the server */
    dfc_rpc_server_free(server);
    csi_endpoints_free(ep);
    csi_driver_done(&d);
    return 0;
}
