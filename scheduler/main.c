/*
 * scheduler - Dragonfly's scheduler.v2 persistent-cache registry on Redis.
 * main() parses flags, loads the configuration and hands over to sched_run().
 */
#include <stddef.h>

#include "config.h"
#include "dfc/options.h"
#include "dfc/server_main.h"
#include "scheduler.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

static int finish(void *cfg, struct dfc_error *err) {
    return sched_config_finish(cfg, err);
}

static int check(void *cfg, struct dfc_error *err) {
    return sched_config_check_files(cfg, err);
}

static const struct dfc_cli cli = {
    .prog = "scheduler",
    .usage = "[options]",
    .about =
        "Serves Dragonfly's scheduler.v2 persistent-cache API over gRPC (TCP), with its "
        "hosts, tasks and peers in Redis under upstream's keys. Environment: SCHEDULER_ + "
        "the key upper-cased with '.' as '_' (SCHEDULER_DATABASE_REDIS_ADDRS=h1:6379,h2:6379).",
    .schema = &sched_config_schema,
    .version = DFC_VERSION,
    .features = DFC_CLI_CONFIG | DFC_CLI_SET | DFC_CLI_PRINT,
    .config_help = "YAML configuration (Dragonfly's camelCase keys)",
    .finish = finish,
};

static int run(void *cfg, const struct dfc_server_run *run, struct dfc_error *err) {
    return sched_run(cfg, run, err);
}

static const struct dfc_server_main server_main = {
    .cli = &cli,
    .check = check,
    .log_level_offset = offsetof(struct sched_config, log_level),
    .grace_offset = offsetof(struct sched_config, shutdown_grace),
    .run = run,
    .failed_event = "scheduler.failed",
    .small_messages = true,
};

int main(int argc, char **argv) {
    struct sched_config cfg = {0};
    return dfc_server_main(&server_main, &cfg, argc, argv);
}
