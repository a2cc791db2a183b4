/*
 * dfdaemon - the node daemon of the Dragonfly-compatible persistent cache.
 * main() parses flags, loads the configuration and hands over to dfd_daemon_run().
 */
#include <stddef.h>

#include "daemon.h"
#include "dfc/options.h"
#include "dfc/server_main.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

static int finish(void *cfg, struct dfc_error *err) {
    return dfd_config_finish(cfg, err);
}

static int check(void *cfg, struct dfc_error *err) {
    return dfd_config_check_files(cfg, err);
}

static const struct dfc_cli cli = {
    .prog = "dfdaemon",
    .usage = "[options]",
    .about = "Serves the Dragonfly dfdaemon.v2 persistent-cache API on a Unix socket.",
    .schema = &dfd_config_schema,
    .version = DFC_VERSION,
    .features = DFC_CLI_CONFIG | DFC_CLI_SET | DFC_CLI_PRINT,
    .config_help = "YAML configuration (Dragonfly's camelCase keys)",
    .finish = finish,
};

static int run(void *cfg, const struct dfc_server_run *run, struct dfc_error *err) {
    return dfd_daemon_run(cfg, run, err);
}

static const struct dfc_server_main server_main = {
    .cli = &cli,
    .check = check,
    .log_level_offset = offsetof(struct dfd_config, log_level),
    .grace_offset = offsetof(struct dfd_config, shutdown_grace),
    .run = run,
    .failed_event = "dfdaemon.failed",
};

int main(int argc, char **argv) {
    struct dfd_config cfg = {0};
    return dfc_server_main(&server_main, &cfg, argc, argv);
}
