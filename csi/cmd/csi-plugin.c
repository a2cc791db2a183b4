/*
 * csi-plugin - the Dragonfly CSI driver: publishes the node's dfdaemon socket directory into
 * pods. Its option table and main(): main() reads flags and environment (dfc/options.h), then
 * csi_run() (csi/plugin.c) serves csi.v1 until SIGTERM/SIGINT.
 */
#include <stddef.h>

#include "dfc/log.h"
#include "dfc/options.h"
#include "dfc/server_main.h"
#include "dfc/units.h"
#include "driver.h"
#include "plugin.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

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
    {.type = DFC_CFG_PATH,
     .offset = O(dfdaemon_socket),
     .env = "CSI_DFDAEMON_SOCKET",
     .flag = "dfdaemon-socket",
     .metavar = "PATH",
     .help = "dfdaemon's socket, for content volumes; else <socket-dir>/dfdaemon.sock",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING_LIST,
     .offset = O(content_allow),
     .env = "CSI_CONTENT_ALLOW",
     .flag = "content-allow",
     .metavar = "RULES",
     .help = "who may mount content volumes: NAMESPACE[/SERVICEACCOUNT] shell globs,\n"
             "comma-separated; empty = every pod that may mount the driver"},
    {.type = DFC_CFG_DURATION,
     .offset = O(content_fetch_timeout),
     .def = "60s",
     .env = "CSI_CONTENT_FETCH_TIMEOUT",
     .flag = "content-fetch-timeout",
     .metavar = "DURATION",
     .help = "how long a content volume's publish waits for tasks to arrive from peers;\n"
             "past it, a retryable DEADLINE_EXCEEDED with the progress",
     DFC_OPT_RANGE(DFC_NS_PER_SEC, 3600 * DFC_NS_PER_SEC)},
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
    {.type = DFC_CFG_DURATION,
     .offset = O(shutdown_grace),
     .def = "5s",
     .env = "CSI_SHUTDOWN_GRACE",
     .flag = "shutdown-grace",
     .metavar = "DURATION",
     .help = "on SIGTERM, calls in flight may finish for this long, then are cancelled",
     DFC_OPT_RANGE(DFC_NS_PER_MS, 24 * 3600 * DFC_NS_PER_SEC)},
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

static int serve(void *opts, const struct dfc_server_run *run, struct dfc_error *err) {
    return csi_run(opts, DFC_VERSION, run, err);
}

static const struct dfc_server_main server_main = {
    .cli = &cli,
    .log_level_offset = O(log_level),
    .grace_offset = O(shutdown_grace),
    .run = serve,
    .failed_event = "csi.failed",
};

int main(int argc, char **argv) {
    struct csi_opts o = {0};
    return dfc_server_main(&server_main, &o, argc, argv);
}
