/*
 * server_main.h - the start-up every server binary shares (dfdaemon, scheduler, csi-plugin),
 * written once for their main():
 *
 *   1. malloc tuning for gRPC (dfc_rpc_tune_process) and the termination signals blocked
 *      (dfc_signals_block), before any thread exists;
 *   2. the command line, file and environment (dfc_cli_main: --help, --version, errors and
 *      --print-config end here with its exit code);
 *   3. the log threshold from the configuration's log level;
 *   4. the binary's run(); a start-up failure is logged once as `<failed_event>` with the
 *      error's message, and the process exits 1.
 *
 * Ownership: cfg is the caller's (zero-initialized); dfc_server_main() releases what the
 * configuration holds with dfc_config_free(cli->schema, cfg) in every case, after run() has
 * returned. The struct and its strings are borrowed.
 */
#ifndef DFC_SERVER_MAIN_H
#define DFC_SERVER_MAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "dfc/error.h"
#include "dfc/options.h"

struct dfc_server_main {
    const struct dfc_cli *cli; /* its schema fills cfg */
    /* offsetof() the configuration's `const char *` log level (a dfc_log_level_choices row) */
    size_t log_level_offset;
    /* Runs the binary until it stops. signals: the set dfc_signals_block() filled, for
     * dfc_signals_wait(). Returns a negative code with err set when start-up failed (logged
     * as failed_event, exit 1), else the exit status. */
    int (*run)(void *cfg, const sigset_t *signals, struct dfc_error *err);
    const char *failed_event; /* "dfdaemon.failed" */
    /* The binary's calls carry small messages only (the scheduler): malloc keeps its
     * per-thread arenas (dfc_rpc_tune_process, DFC_RPC_TRAFFIC_SMALL). */
    bool small_messages;
};

/* Steps 1 to 4 above; returns main()'s exit status. */
int dfc_server_main(const struct dfc_server_main *m, void *cfg, int argc, char **argv);

#endif /* DFC_SERVER_MAIN_H */
