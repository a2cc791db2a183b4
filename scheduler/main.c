/*
 * scheduler - Dragonfly's scheduler.v2 persistent-cache registry on Redis.
 * main() parses flags, loads the configuration and hands over to sched_run().
 */
#include <stdio.h>

#include "config.h"
#include "dfc/log.h"
#include "dfc/options.h"
#include "dfc/rpc_server.h"
#include "dfc/signals.h"
#include "scheduler.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

static int finish(void *cfg, struct dfc_error *err) {
    return sched_config_finish(cfg, err);
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

int main(int argc, char **argv) {
    sigset_t signals;
    dfc_rpc_tune_process();
    dfc_signals_block(&signals);

    struct sched_config cfg = {0};
    struct dfc_cli_args args;
    int code = dfc_cli_main(&cli, &cfg, argc, argv, &args);
    if (code != DFC_CLI_RUN) {
        sched_config_free(&cfg);
        return code;
    }
    int level;
    dfc_log_parse_level(cfg.log_level, &level);
    dfc_log_set_level(level);
    struct dfc_error err;
    int r = sched_run(&cfg, &err);
    if (r < 0) {
        DFC_LOG(DFC_LOG_ERROR, "scheduler.failed", "error=\"%s\"", dfc_error_msg(&err));
    }
    sched_config_free(&cfg);
    return r < 0 ? 1 : 0;
}
