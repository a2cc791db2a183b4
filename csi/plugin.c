/*
 * plugin.c - the csi-plugin binary's run: start, serve until SIGINT/SIGTERM, stop (plugin.h).
 *
 * Start: HTTP endpoints checked -> driver (state dir) -> RPC server with Identity, Node and
 * Controller -> endpoints up -> the CSI socket -> serving -> kubelet registration (last: kubelet
 * calls the CSI socket as soon as it learns of it). Stop: registration (kubelet deregisters
 * before the CSI socket goes) -> endpoints -> the RPC server drains calls for the shutdown
 * grace, then cancels the rest -> driver.
 */
#include "plugin.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "dfc/units.h"
#include "driver.h"
#include "endpoints.h"
#include "registration.h"

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

int csi_run(const struct csi_opts *o, const char *version, const struct dfc_server_run *run,
            struct dfc_error *err) {
    char hostname[256] = "";
    gethostname(hostname, sizeof(hostname) - 1);
    struct csi_config cfg = {
        .driver_name = o->driver_name,
        .version = version,
        .node_id = o->node_id != NULL ? o->node_id : hostname,
        .socket_dir = o->socket_dir,
        .kubelet_dir = o->kubelet_dir,
        .state_dir = o->state_dir,
        .require_readonly = o->require_readonly,
        .probe_dfdaemon = o->probe_dfdaemon,
        .dfdaemon_socket = o->dfdaemon_socket,
        .content_allow = {o->content_allow.n, o->content_allow.items},
        .content_fetch_timeout_ms = o->content_fetch_timeout / DFC_NS_PER_MS,
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
    bool driver_up = r == 0;
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
    if (r == 0) { /* content pins whose mount went while the plugin was away */
        r = csi_driver_start_reconciler(&d, err);
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
        if (driver_up) {
            csi_driver_done(&d);
        }
        return r; /* logged as csi.failed */
    }
    DFC_LOG(DFC_LOG_INFO, "csi.ready",
            "endpoint=%s driver=%s node_id=%s socket_dir=%s kubelet_dir=%s require_readonly=%d",
            sock, cfg.driver_name, cfg.node_id, cfg.socket_dir, cfg.kubelet_dir,
            cfg.require_readonly);
    int sig = dfc_server_wait(run);
    DFC_LOG(DFC_LOG_INFO, "csi.stopping", "signal=%d", sig);
    csi_registration_stop(&reg); /* first: kubelet deregisters before the CSI socket goes */
    csi_endpoints_stop_http(ep); /* its readiness check reads the server */
    dfc_rpc_server_shutdown(server, run->grace_ms);
    dfc_rpc_server_free(server);
    csi_endpoints_free(ep);
    csi_driver_done(&d);
    return 0;
}
