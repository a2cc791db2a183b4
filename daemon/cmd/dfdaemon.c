/*
 * dfdaemon - the node daemon of the Dragonfly-compatible persistent cache.
 * main() parses flags, loads the configuration and hands over to dfd_daemon_run().
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "dfc/signals.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

/* Frees the keys that --set copied; returns rc, so early exits free them too. */
static int free_owned(char **owned, int n_owned, int rc) {
    for (int i = 0; i < n_owned; i++) {
        free(owned[i]);
    }
    return rc;
}

static void usage(FILE *out) {
    fprintf(out, "Usage: dfdaemon [options]\n"
                 "\n"
                 "Serves the Dragonfly dfdaemon.v2 persistent-cache API on a Unix socket.\n"
                 "\n"
                 "Options:\n"
                 "  -c, --config FILE        YAML configuration (Dragonfly's camelCase keys)\n"
                 "      --socket-path PATH   download.server.socketPath\n"
                 "      --storage-dir DIR    storage.dir\n"
                 "  -l, --log-level LEVEL    log.level: debug, info, warn, error\n"
                 "      --set KEY=VALUE      set any configuration key (repeatable)\n"
                 "      --print-config       print the effective configuration and exit\n"
                 "      --discard-broken-store  when the metadata database is corrupt or\n"
                 "                           missing, move it aside, delete the cached content\n"
                 "                           and start empty (otherwise dfdaemon refuses)\n"
                 "  -V, --version            print the version and exit\n"
                 "  -h, --help               print this help and exit\n"
                 "\n"
                 "Environment: DFDAEMON_SOCKET_PATH, DFDAEMON_STORAGE_DIR, DFDAEMON_LOG_LEVEL,\n"
                 "DFDAEMON_HOST_IP, DFDAEMON_HOSTNAME. Precedence: flags > environment > file >\n"
                 "defaults.\n");
}

enum { OPT_SOCKET = 256, OPT_STORAGE, OPT_SET, OPT_PRINT, OPT_DISCARD };

#define MAX_SETS 64

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket-path", required_argument, NULL, OPT_SOCKET},
        {"storage-dir", required_argument, NULL, OPT_STORAGE},
        {"log-level", required_argument, NULL, 'l'},
        {"set", required_argument, NULL, OPT_SET},
        {"print-config", no_argument, NULL, OPT_PRINT},
        {"discard-broken-store", no_argument, NULL, OPT_DISCARD},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    const char *keys[MAX_SETS], *values[MAX_SETS];
    char *owned[MAX_SETS];
    int n_sets = 0, n_owned = 0, opt;
    bool print = false, discard = false;

    sigset_t signals;
    dfc_rpc_tune_process();
    dfc_signals_block(&signals);
    while ((opt = getopt_long(argc, argv, "c:l:Vh", longopts, NULL)) != -1) {
        if (n_sets >= MAX_SETS) {
            fprintf(stderr, "dfdaemon: too many settings\n");
            return free_owned(owned, n_owned, 2);
        }
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case OPT_SOCKET:
            keys[n_sets] = "download.server.socketPath";
            values[n_sets++] = optarg;
            break;
        case OPT_STORAGE:
            keys[n_sets] = "storage.dir";
            values[n_sets++] = optarg;
            break;
        case 'l':
            keys[n_sets] = "log.level";
            values[n_sets++] = optarg;
            break;
        case OPT_SET: {
            char *eq = strchr(optarg, '=');
            if (eq == NULL) {
                fprintf(stderr, "dfdaemon: --set wants KEY=VALUE, got `%s`\n", optarg);
                return free_owned(owned, n_owned, 2);
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            if (key == NULL) {
                fprintf(stderr, "dfdaemon: out of memory\n");
                return free_owned(owned, n_owned, 1);
            }
            owned[n_owned++] = key;
            keys[n_sets] = key;
            values[n_sets++] = eq + 1;
            break;
        }
        case OPT_PRINT:
            print = true;
            break;
        case OPT_DISCARD:
            discard = true;
            break;
        case 'V':
            printf("dfdaemon %s\n", DFC_VERSION);
            return free_owned(owned, n_owned, 0);
        case 'h':
            usage(stdout);
            return free_owned(owned, n_owned, 0);
        default:
            usage(stderr);
            return free_owned(owned, n_owned, 2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dfdaemon: unexpected argument `%s`\n", argv[optind]);
        return free_owned(owned, n_owned, 2);
    }

    struct dfd_config cfg = {0};
    struct dfc_error err;
    int r = dfd_config_init(&cfg, &err);
    if (r == 0) {
        r = dfd_config_load(&cfg, config_path, &err);
    }
    for (int i = 0; i < n_sets && r == 0; i++) {
        r = dfc_config_set(&dfd_config_schema, &cfg, keys[i], values[i], &err);
    }
    if (r == 0) {
        r = dfd_config_finish(&cfg, &err);
    }
    free_owned(owned, n_owned, 0);
    if (r < 0) {
        fprintf(stderr, "dfdaemon: %s\n", dfc_error_msg(&err));
        dfd_config_free(&cfg);
        return 2;
    }
    if (print) {
        dfc_config_print(&dfd_config_schema, &cfg, stdout);
        dfd_config_free(&cfg);
        return 0;
    }
    int level;
    dfc_log_parse_level(cfg.log_level, &level);
    dfc_log_set_level(level);
    cfg.discard_broken = discard;
    r = dfd_daemon_run(&cfg, &err);
    if (r < 0) {
        DFC_LOG(DFC_LOG_ERROR, "dfdaemon.failed", "error=\"%s\"", dfc_error_msg(&err));
    }
    dfd_config_free(&cfg);
    return r < 0 ? 1 : 0;
}
