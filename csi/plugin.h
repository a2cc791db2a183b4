/*
 * plugin.h - the csi-plugin binary's wiring: its options as the command line sets them, and
 * csi_run(), which starts the driver, its RPC server, the HTTP endpoints and the optional
 * kubelet registration, serves until SIGINT/SIGTERM (dfc_server_wait) and stops them in
 * reverse order. csi/cmd/csi-plugin.c holds the option table and main().
 *
 * Ownership: struct csi_opts is the command line's: its strings belong to the configuration
 * (dfc_config_free, by dfc_server_main); csi_run() borrows it and everything in it.
 */
#ifndef CSI_PLUGIN_H
#define CSI_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/config.h"
#include "dfc/error.h"
#include "dfc/server_main.h"

/* What the command line sets. */
struct csi_opts {
    char *endpoint;
    char *driver_name;
    char *node_id; /* NULL: the hostname */
    char *socket_dir;
    char *kubelet_dir;
    char *state_dir;
    bool require_readonly;
    bool probe_dfdaemon;
    char *dfdaemon_socket;                /* NULL or "": <socket_dir>/dfdaemon.sock */
    struct dfc_config_list content_allow; /* --content-allow rules (content.h) */
    int64_t content_fetch_timeout;        /* --content-fetch-timeout (ns) */
    char *metrics_address;
    char *health_address;
    char *registration_dir;  /* NULL: no kubelet registration (node-driver-registrar does it) */
    char *registration_path; /* NULL: the endpoint's path */
    int64_t shutdown_grace;  /* --shutdown-grace (ns): drain time on SIGTERM */
    const char *log_level;
};

/* Serves until SIGINT or SIGTERM, then drains calls for run->grace_ms and stops. version is
 * the plugin's (GetPluginInfo). Returns 0 after a clean stop, 2 after a bad --metrics-address
 * or --health-address (the message already on stderr), or a negative code with err set when
 * start-up fails. */
int csi_run(const struct csi_opts *o, const char *version, const struct dfc_server_run *run,
            struct dfc_error *err);

#endif /* CSI_PLUGIN_H */
