/*
 * signals.h - how the daemons stop: SIGINT and SIGTERM are blocked in every thread and taken
 * by sigwait() on the main thread (never a handler that could call into gRPC); SIGPIPE is
 * ignored.
 */
#ifndef DFC_SIGNALS_H
#define DFC_SIGNALS_H

#include <signal.h>

/* Blocks SIGINT and SIGTERM and ignores SIGPIPE. Call first in main(), before any thread
 * exists, so that every thread inherits the mask. Fills *ret_set for dfc_signals_wait(). */
void dfc_signals_block(sigset_t *ret_set);

/* Waits for one of the signals in set; returns its number. */
int dfc_signals_wait(const sigset_t *set);

#endif /* DFC_SIGNALS_H */
