/*
 * scheduler - Dragonfly's scheduler.v2 persistent-cache registry on Redis.
 * main() parses flags, loads the configuration and hands over to sched_run().
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "dfc/signals.h"
#include "scheduler.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

static void usage(FILE *out) {
    fprintf(out, "Usage: scheduler [options]\n"
                 "\n"
                 "Serves Dragonfly's scheduler.v2 persistent-cache API over gRPC (TCP), with\n"
                 "its hosts, tasks and peers in Redis under upstream's keys.\n"
                 "\n"
                 "Options:\n"
                 "  -c, --config FILE        YAML configuration (Dragonfly's camelCase keys)\n"
                 "  -p, --port PORT          server.port (0: any free port, logged when ready)\n"
                 "  -l, --log-level LEVEL    log.level: debug, info, warn, error\n"
                 "      --set KEY=VALUE      set any configuration key (repeatable; a list as\n"
                 "                           a,b: --set database.redis.addrs=h1:6379,h2:6379)\n"
                 "      --print-config       print the effective configuration and exit\n"
                 "  -V, --version            print the version and exit\n"
                 "  -h, --help               print this help and exit\n"
                 "\n"
                 "Environment: SCHEDULER_ + the key upper-cased with '.' as '_'\n"
                 "(SCHEDULER_DATABASE_REDIS_ADDRS, SCHEDULER_SERVER_PORT, ...).\n"
                 "Precedence: flags > environment > file > defaults. Bad usage exits 2.\n");
}

enum { OPT_SET = 256, OPT_PRINT };

#define MAX_SETS 64

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"port", required_argument, NULL, 'p'},
        {"log-level", required_argument, NULL, 'l'},
        {"set", required_argument, NULL, OPT_SET},
        {"print-config", no_argument, NULL, OPT_PRINT},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    const char *keys[MAX_SETS], *values[MAX_SETS];
    char *owned[MAX_SETS];
    int n_sets = 0, n_owned = 0, opt, code = 0;
    bool print = false;

    sigset_t signals;
    dfc_rpc_tune_process();
    dfc_signals_block(&signals);
    while ((opt = getopt_long(argc, argv, "c:p:l:Vh", longopts, NULL)) != -1) {
        if (n_sets >= MAX_SETS) {
            fprintf(stderr, "scheduler: too many settings\n");
            code = 2;
            goto out;
        }
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case 'p':
            keys[n_sets] = "server.port";
            values[n_sets++] = optarg;
            break;
        case 'l':
            keys[n_sets] = "log.level";
            values[n_sets++] = optarg;
            break;
        case OPT_SET: {
            char *eq = strchr(optarg, '=');
            if (eq == NULL) {
                fprintf(stderr, "scheduler: --set wants KEY=VALUE, got `%s`\n", optarg);
                code = 2;
                goto out;
            }
            char *key = strndup(optarg, (size_t)(eq - optarg));
            if (key == NULL) {
                fprintf(stderr, "scheduler: out of memory\n");
                code = 2;
                goto out;
            }
            owned[n_owned++] = key;
            keys[n_sets] = key;
            values[n_sets++] = eq + 1;
            break;
        }
        case OPT_PRINT:
            print = true;
            break;
        case 'V':
            printf("scheduler %s\n", DFC_VERSION);
            goto out;
        case 'h':
            usage(stdout);
            goto out;
        default:
            usage(stderr);
            code = 2;
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "scheduler: unexpected argument `%s`\n", argv[optind]);
        code = 2;
        goto out;
    }

    struct sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    struct dfc_error err;
    int r = sched_config_init(&cfg, &err);
    if (r == 0) {
        r = sched_config_load(&cfg, config_path, &err);
    }
    for (int i = 0; i < n_sets && r == 0; i++) {
        r = dfc_config_set(&sched_config_schema, &cfg, keys[i], values[i], &err);
    }
    if (r == 0) {
        r = sched_config_finish(&cfg, &err);
    }
    if (r < 0) {
        fprintf(stderr, "scheduler: %s\n", dfc_error_msg(&err));
        code = 2;
    } else if (print) {
        dfc_config_print(&sched_config_schema, &cfg, stdout);
    } else {
        int level;
        dfc_log_parse_level(cfg.log_level, &level);
        dfc_log_set_level(level);
        r = sched_run(&cfg, &err);
        if (r < 0) {
            DFC_LOG(DFC_LOG_ERROR, "scheduler.failed", "error=\"%s\"", dfc_error_msg(&err));
            code = 1;
        }
    }
    sched_config_free(&cfg);
out:
    for (int i = 0; i < n_owned; i++) {
        free(owned[i]);
    }
    return code;
}
