/*
 * server_main.c - the shared main() of the server binaries (dfc/server_main.h).
 */
#include "dfc/server_main.h"

#include "dfc/log.h"
#include "dfc/rpc_server.h"
#include "dfc/signals.h"
#include "dfc/units.h"

int dfc_server_wait(const struct dfc_server_run *run) {
    return dfc_signals_wait(&run->signals);
}

int dfc_server_main(const struct dfc_server_main *m, void *cfg, int argc, char **argv) {
    struct dfc_server_run run;
    dfc_rpc_tune_process(m->small_messages ? DFC_RPC_TRAFFIC_SMALL : DFC_RPC_TRAFFIC_BULK);
    dfc_signals_block(&run.signals);

    struct dfc_cli_args args;
    int code = dfc_cli_main(m->cli, cfg, argc, argv, &args);
    if (code != DFC_CLI_RUN) {
        dfc_config_free(m->cli->schema, cfg);
        return code;
    }
    struct dfc_error err;
    if (m->check != NULL && m->check(cfg, &err) < 0) {
        code = dfc_cli_fail(m->cli, &err);
        dfc_config_free(m->cli->schema, cfg);
        return code;
    }
    int level;
    dfc_log_parse_level(*(const char *const *)((const char *)cfg + m->log_level_offset), &level);
    dfc_log_set_level(level);
    run.grace_ms = *(const int64_t *)((const char *)cfg + m->grace_offset) / DFC_NS_PER_MS;
    int r = m->run(cfg, &run, &err);
    if (r < 0) {
        DFC_LOG(DFC_LOG_ERROR, m->failed_event, "error=\"%s\"", dfc_error_msg(&err));
    }
    dfc_config_free(m->cli->schema, cfg);
    return r < 0 ? 1 : r;
}
