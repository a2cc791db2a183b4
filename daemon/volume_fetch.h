/*
 * volume_fetch.h - the downloads a content-volume publish starts for tasks this node lacks
 * (docs/content-volumes.md): each runs on its own thread through the P2P engine
 * (p2p/download.h) and outlives the call that started it, so a publish that gives up at its
 * deadline leaves the download going and its retry finds it further on (or done).
 *
 * One download per task id at a time: a publish that names a task already downloading waits
 * for that one. A download that ended stays listed while publishes are reading its result,
 * then unlinks and frees itself; a failed one is started afresh by the next publish. At most
 * DFD_VFETCH_MAX run at once (more: -EAGAIN, RESOURCE_EXHAUSTED).
 *
 * Threads and locks: one detached thread per download; one mutex and a CLOCK_MONOTONIC
 * condvar guard the list, each download's progress and the running count.
 *
 * Ownership: p2p is borrowed and must outlive dfd_vfetch_free(), which stops the downloads
 * (the engine's should_stop) and waits for their threads.
 */
#ifndef DFD_VOLUME_FETCH_H
#define DFD_VOLUME_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

struct dfd_p2p;
struct dfd_vfetch;

#define DFD_VFETCH_MAX 64

int dfd_vfetch_new(struct dfd_p2p *p2p, struct dfd_vfetch **ret, struct dfc_error *err);
void dfd_vfetch_free(struct dfd_vfetch *v);

/* Starts (or joins) the download of each of the n task ids and waits until all have ended or
 * the monotonic deadline (ns) passes. 0 when every one is stored now; the first failure's code
 * and message (NOT_FOUND when the scheduler does not know a task); -ETIMEDOUT with the
 * progress of each one still going in err ("task <id>: 37% (12 of 32 pieces)"), which goes on. */
int dfd_vfetch_wait(struct dfd_vfetch *v, const char *const *ids, size_t n, int64_t deadline_ns,
                    struct dfc_error *err);

#endif /* DFD_VOLUME_FETCH_H */
