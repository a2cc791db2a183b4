/*
 * daemon.h - dfdaemon's start and stop order, in one place.
 */
#ifndef DFD_DAEMON_H
#define DFD_DAEMON_H

#include "config.h"

/* Runs until SIGINT or SIGTERM (block them first with dfc_signals_block()): opens storage
 * (recovering it), starts GC, serves the Unix socket; then stops in reverse order. Returns 0 after
 * a clean stop, or a negative code with err set when start-up fails. */
int dfd_daemon_run(const struct dfd_config *cfg, struct dfc_error *err);

#endif /* DFD_DAEMON_H */
