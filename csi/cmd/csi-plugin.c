/*
 * csi-plugin - the Dragonfly CSI driver: publishes the node's dfdaemon socket directory into
 * pods. main() reads flags and environment, then serves csi.v1 until SIGTERM/SIGINT.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "dfc/log.h"
#include "dfc/signals.h"
#include "dfc/rpc_server.h"
#include "driver.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

static void usage(FILE *out) {
    fprintf(
        out,
        "Usage: csi-plugin [options]\n"
        "\n"
        "Serves CSI (csi.v1 Identity, Node, Controller) and publishes the dfdaemon socket\n"
        "directory into pods. Every option also reads the environment variable shown.\n"
        "\n"
        "  --endpoint ADDR        unix:///path/csi.sock or a path [CSI_ENDPOINT, required]\n"
        "  --driver-name NAME     [CSI_DRIVER_NAME] (" CSI_DEFAULT_DRIVER_NAME ")\n"
        "  --node-id ID           [CSI_NODE_ID, else NODE_NAME, else the hostname]\n"
        "  --socket-dir DIR       the directory to publish [CSI_SOCKET_DIR] (/var/run/dragonfly)\n"
        "  --kubelet-dir DIR      target paths must lie below it [CSI_KUBELET_DIR]\n"
        "                         (/var/lib/kubelet)\n"
        "  --state-dir DIR        controller volume records [CSI_STATE_DIR]\n"
        "                         (/var/lib/dragonfly-csi)\n"
        "  --require-readonly     refuse read-write publishes [CSI_REQUIRE_READONLY=true]\n"
        "  --probe-dfdaemon       Probe is ready only while dfdaemon accepts connections\n"
        "                         [CSI_PROBE_DFDAEMON=true]\n"
        "  -l, --log-level LEVEL  debug, info, warn, error [CSI_LOG_LEVEL] (info)\n"
        "  -V, --version, -h, --help\n");
}

static const char *env_or(const char *name, const char *def) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : def;
}

static bool env_true(const char *name) {
    const char *v = getenv(name);
    return v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

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

int main(int argc, char **argv) {
    enum { ENDPOINT = 256, NAME, NODE, SOCKET, KUBELET, STATE, RO, PROBE };
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, ENDPOINT},
        {"driver-name", required_argument, NULL, NAME},
        {"node-id", required_argument, NULL, NODE},
        {"socket-dir", required_argument, NULL, SOCKET},
        {"kubelet-dir", required_argument, NULL, KUBELET},
        {"state-dir", required_argument, NULL, STATE},
        {"require-readonly", no_argument, NULL, RO},
        {"probe-dfdaemon", no_argument, NULL, PROBE},
        {"log-level", required_argument, NULL, 'l'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char hostname[256] = "";
    gethostname(hostname, sizeof(hostname) - 1);
    const char *endpoint = env_or("CSI_ENDPOINT", NULL);
    const char *log_level = env_or("CSI_LOG_LEVEL", "info");
    struct csi_config cfg = {
        .driver_name = env_or("CSI_DRIVER_NAME", CSI_DEFAULT_DRIVER_NAME),
        .version = DFC_VERSION,
        .node_id = env_or("CSI_NODE_ID", env_or("NODE_NAME", hostname)),
        .socket_dir = env_or("CSI_SOCKET_DIR", "/var/run/dragonfly"),
        .kubelet_dir = env_or("CSI_KUBELET_DIR", "/var/lib/kubelet"),
        .state_dir = env_or("CSI_STATE_DIR", "/var/lib/dragonfly-csi"),
        .require_readonly = env_true("CSI_REQUIRE_READONLY"),
        .probe_dfdaemon = env_true("CSI_PROBE_DFDAEMON"),
    };
    sigset_t set;
    dfc_rpc_tune_process();
    dfc_signals_block(&set);

    int opt;
    while ((opt = getopt_long(argc, argv, "l:Vh", longopts, NULL)) != -1) {
        switch (opt) {
        case ENDPOINT:
            endpoint = optarg;
            break;
        case NAME:
            cfg.driver_name = optarg;
            break;
        case NODE:
            cfg.node_id = optarg;
            break;
        case SOCKET:
            cfg.socket_dir = optarg;
            break;
        case KUBELET:
            cfg.kubelet_dir = optarg;
            break;
        case STATE:
            cfg.state_dir = optarg;
            break;
        case RO:
            cfg.require_readonly = true;
            break;
        case PROBE:
            cfg.probe_dfdaemon = true;
            break;
        case 'l':
            log_level = optarg;
            break;
        case 'V':
            printf("csi-plugin %s\n", DFC_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    int level;
    if (optind != argc || endpoint == NULL || dfc_log_parse_level(log_level, &level) < 0) {
        fprintf(stderr, "csi-plugin: %s\n",
                optind != argc     ? "unexpected arguments"
                : endpoint == NULL ? "--endpoint or CSI_ENDPOINT is required"
                                   : "bad --log-level");
        return 2;
    }
    if (cfg.node_id[0] == '\0') {
        cfg.node_id = "unknown-node"; /* NodeGetInfo must never fail */
    }
    dfc_log_set_level(level);

    struct csi_driver d;
    struct dfc_rpc_server *server = NULL;
    struct dfc_error err;
    const char *sock = endpoint_path(endpoint);
    /* CSI messages are small: a 1 MiB limit is plenty and bounds what a caller can send. */
    struct dfc_rpc_server_opts o = {.log_level_ok = DFC_LOG_INFO,
                                    .name = "csi",
                                    .max_workers = 16,
                                    .max_recv_msg = (size_t)1 << 20};
    int r = csi_driver_init(&d, &cfg, &csi_mount_ops_linux, &err);
    if (r == 0 && (r = dfc_mkdir_parent(sock, 0755)) < 0) {
        dfc_error_errno(&err, r, "create the directory of `%s`", sock);
    }
    if (r == 0) {
        r = dfc_rpc_server_new(&o, &server, &err);
    }
    if (r == 0) {
        r = csi_driver_register(&d, server, &err);
    }
    if (r == 0) {
        r = dfc_rpc_server_listen_unix(server, sock, 0660, -1, &err);
    }
    if (r == 0) {
        r = dfc_rpc_server_start(server, &err);
    }
    if (r < 0) {
        DFC_LOG(DFC_LOG_ERROR, "csi.failed", "error=\"%s\"", dfc_error_msg(&err));
        dfc_rpc_server_free(server);
        return 1;
    }
    DFC_LOG(DFC_LOG_INFO, "csi.ready",
            "endpoint=%s driver=%s node_id=%s socket_dir=%s kubelet_dir=%s require_readonly=%d",
            sock, cfg.driver_name, cfg.node_id, cfg.socket_dir, cfg.kubelet_dir,
            cfg.require_readonly);
    int sig = dfc_signals_wait(&set);
    DFC_LOG(DFC_LOG_INFO, "csi.stopping", "signal=%d", sig);
    dfc_rpc_server_free(server);
    csi_driver_done(&d);
    return 0;
}
