/*
 * daemon.h - dfdaemon's start and stop order, in one place.
 */
#ifndef DFD_DAEMON_H
#define DFD_DAEMON_H

#include "config.h"
#include "dfc/server_main.h"

/* Runs until SIGINT or SIGTERM (dfc_server_wait(run)): opens storage (recovering it), starts
 * GC, serves the Unix socket; then drains calls for run->grace_ms (download.server.shutdownGrace)
 * and stops in reverse order. Returns 0 after a clean stop, or a negative code with err set when
 * start-up fails. */
int dfd_daemon_run(const struct dfd_config *cfg, const struct dfc_server_run *run,
                   struct dfc_error *err);

#endif /* DFD_DAEMON_H */
