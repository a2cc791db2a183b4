/*
 * scheduler.h - the scheduler's start and stop order, in one place.
 */
#ifndef SCHED_SCHEDULER_H
#define SCHED_SCHEDULER_H

#include "config.h"

/* Runs until SIGINT or SIGTERM (block them first with dfc_signals_block()): the Redis pool,
 * store and placement (repair and host-GC threads) when database.redis.addrs is set, then the
 * gRPC server on server.listenIP:server.port; on a signal it drains calls for up to
 * server.shutdownGrace and stops in reverse order. Returns 0 after a clean stop, or a negative
 * code with err set when start-up fails. */
int sched_run(const struct sched_config *cfg, struct dfc_error *err);

#endif /* SCHED_SCHEDULER_H */
