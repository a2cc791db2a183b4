/*
 * server_main.h - the start-up every server binary shares (dfdaemon, scheduler, csi-plugin),
 * written once for their main():
 *
 *   1. malloc tuning for gRPC (dfc_rpc_tune_process) and the termination signals (SIGINT,
 *      SIGTERM) blocked (dfc_signals_block), before any thread exists;
 *   2. the command line, file and environment (dfc_cli_main: --help, --version, errors and
 *      --print-config end here with its exit code);
 *   3. the binary's check() of what its settings name (the TLS files), a settings error
 *      printed as "<prog>: <message>" with exit 2 (not run for --print-config, which checks
 *      the settings alone, wherever they are to be used); then the log threshold from the
 *      configuration's log level;
 *   4. the binary's run(), handed a struct dfc_server_run: run() starts its server, waits for
 *      the stop with dfc_server_wait() (the one place a server waits for SIGINT/SIGTERM), then
 *      drains calls for the shutdown grace (the configuration's, at grace_offset) and stops. A
 *      start-up failure is logged once as `<failed_event>` with the error's message, and the
 *      process exits 1.
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
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/options.h"

/* What run() gets from dfc_server_main(). */
struct dfc_server_run {
    sigset_t signals; /* SIGINT and SIGTERM, blocked in every thread: dfc_server_wait() */
    int64_t grace_ms; /* on the stop, calls in flight may finish for this long, then are
                       * cancelled (dfc_rpc_server_shutdown) */
};

struct dfc_server_main {
    const struct dfc_cli *cli; /* its schema fills cfg */
    /* offsetof() the configuration's `const char *` log level (a dfc_log_level_choices row) */
    size_t log_level_offset;
    /* offsetof() the configuration's int64_t shutdown grace in ns (a DFC_CFG_DURATION row:
     * server.shutdownGrace, download.server.shutdownGrace, --shutdown-grace) */
    size_t grace_offset;
    /* Runs the binary until it stops (see step 4). Returns a negative code with err set when
     * start-up failed (logged as failed_event, exit 1), else the exit status. */
    int (*run)(void *cfg, const struct dfc_server_run *run, struct dfc_error *err);
    /* NULL, or step 3: reads what the settings name on this machine; a negative code with
     * err set is a settings error (exit 2). */
    int (*check)(void *cfg, struct dfc_error *err);
    const char *failed_event; /* "dfdaemon.failed" */
    /* The binary's calls carry small messages only (the scheduler): malloc keeps its
     * per-thread arenas (dfc_rpc_tune_process, DFC_RPC_TRAFFIC_SMALL). */
    bool small_messages;
};

/* Waits for SIGINT or SIGTERM (run->signals); returns its number. */
int dfc_server_wait(const struct dfc_server_run *run);

/* Steps 1 to 4 above; returns main()'s exit status. */
int dfc_server_main(const struct dfc_server_main *m, void *cfg, int argc, char **argv);

#endif /* DFC_SERVER_MAIN_H */
