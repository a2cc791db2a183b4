/*
 * daemon.h - dfdaemon's start and stop order, in one place.
 */
#ifndef DFD_DAEMON_H
#define DFD_DAEMON_H

#include "config.h"

/* Blocks SIGINT, SIGTERM (to be taken by sigwait) and ignores SIGPIPE. Call first in main(),
 * before any thread exists, so that every thread inherits the mask. */
void dfd_daemon_block_signals(void);

/* Runs until SIGINT or SIGTERM: opens storage (recovering it), starts GC, serves the Unix
 * socket; then stops in reverse order. Returns 0 after a clean stop, or a negative code with
 * err set when start-up fails. */
int dfd_daemon_run(const struct dfd_config *cfg, struct dfc_error *err);

#endif /* DFD_DAEMON_H */
