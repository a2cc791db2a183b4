/*
 * announcer.h - keeps this host registered at the schedulers: AnnounceHost (with fresh host
 * figures, hostinfo.h) at start and every scheduler.announceInterval, on a helper thread, so
 * start-up never waits for a scheduler. While no scheduler takes the announce it retries with
 * a capped back-off (1 s, doubling, at most the interval) and logs the outage once, and its
 * end once. The first announce a scheduler takes, and each one that ends an outage, kick the
 * rejoin thread (rejoin.h): the scheduler may have dropped this host's peers meanwhile.
 * dfd_announcer_stop() ends the thread, stops the rejoin thread and sends DeleteHost (a clean
 * shutdown).
 *
 * Ownership: sched and cfg are borrowed and must outlive the announcer; host_id is copied;
 * rejoin (may be NULL) becomes the announcer's, also when starting fails.
 */
#ifndef DFD_ANNOUNCER_H
#define DFD_ANNOUNCER_H

#include "config.h"
#include "dfc/error.h"

struct dfd_sched;
struct dfd_announcer;
struct dfd_rejoin;

/* Starts the thread; its first announce happens at once, on the thread. -EAGAIN when no thread
 * can be made, -ENOMEM. */
int dfd_announcer_start(struct dfd_sched *sched, const struct dfd_config *cfg, const char *host_id,
                        struct dfd_rejoin *rejoin, struct dfd_announcer **ret,
                        struct dfc_error *err);

/* Stops the thread (an announce in flight ends first: at most the 10 s request timeout) and the
 * rejoin thread, then DeleteHost to every scheduler (failures logged), and frees. NULL is
 * fine. */
void dfd_announcer_stop(struct dfd_announcer *a);

#endif /* DFD_ANNOUNCER_H */
