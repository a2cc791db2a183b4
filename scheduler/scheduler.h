/*
 * scheduler.h - the scheduler's start and stop order, in one place.
 */
#ifndef SCHED_SCHEDULER_H
#define SCHED_SCHEDULER_H

#include "config.h"
#include "dfc/server_main.h"

/* Runs until SIGINT or SIGTERM (dfc_server_wait(run)): the Redis pool, store and placement
 * (repair and host-GC threads) when database.redis.addrs is set, then the gRPC server on
 * server.listenIP:server.port; on a signal it drains calls for up to run->grace_ms
 * (server.shutdownGrace) and stops in reverse order. Returns 0 after a clean stop, or a negative
 * code with err set when start-up fails. */
int sched_run(const struct sched_config *cfg, const struct dfc_server_run *run,
              struct dfc_error *err);

#endif /* SCHED_SCHEDULER_H */
