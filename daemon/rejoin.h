/*
 * rejoin.h - puts this node's copies back at the scheduler once it has forgotten them.
 *
 * A scheduler drops every peer of a host on DeleteHost (sent at each clean stop, as upstream)
 * and when its host GC collects a host that stayed silent, but storage.keep keeps the content
 * across the restart. Upstream never tells the scheduler again, so after a restart or a long
 * outage the node's copies serve only local exports, the repair loop copies them elsewhere,
 * and a task whose every node restarted has no parent left though its bytes are on disk.
 *
 * After the first announce a scheduler takes, after each one that ends an outage, and after
 * the next one when an import was kept local because no scheduler took its Started (the
 * announcer kicks this thread), one pass goes over the local tasks that are not expired and
 * carry a peer id:
 *   StatPersistentCachePeer finds the peer      nothing to do (present)
 *   StatPersistentCacheTask: task not found    left alone: it was deleted or expired at the
 *                                               scheduler (absent); GC keeps the local TTL
 *   the task Succeeded with the same geometry  AnnouncePersistentCachePeer under the same peer
 *                                               id and persistent flag: register, Started,
 *                                               Finished, with no piece moved (joined)
 *   register: "no candidate parents found"     no copy is left anywhere: the upload again,
 *                                               Started (TTL = what is left of the local one,
 *                                               so both expire together) then Finished; our
 *                                               scheduler accepts Started for a Succeeded task
 *                                               with no copy (uploaded)
 * Tasks marked register_later (an import no scheduler took: storage/task.h) are registered
 * under a fresh peer id: uploaded (Started, Finished, the TTL left) when the scheduler has no
 * such task or a Failed one, and the row then records the peer id; when the task is Succeeded
 * there (someone registered the bytes meanwhile), the copy stays local, as an import of bytes
 * the cluster has does, and the mark goes. Tasks with neither (standalone imports, copies of
 * bytes the cluster had) are not looked at.
 * Anything else (another state, another geometry, less than 5 minutes of TTL left, an error)
 * is logged and left for the next pass. A copy deleted here while it was being registered is
 * withdrawn again (DeletePersistentCachePeer). UNAVAILABLE or DEADLINE_EXCEEDED ends the pass:
 * the scheduler is away, and the announcer kicks again when it is back. One summary line per
 * pass: event=scheduler.rejoined.
 *
 * Ownership: sched, storage and cfg are borrowed and must outlive the rejoiner.
 */
#ifndef DFD_REJOIN_H
#define DFD_REJOIN_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "dfc/error.h"
#include "storage/storage.h"

struct dfd_sched;
struct dfd_rejoin;

struct dfd_rejoin_counts {
    size_t present, joined, uploaded, absent, skipped, failed;
};

/* Starts the thread (idle until kicked). -EAGAIN / -ENOMEM. */
int dfd_rejoin_start(struct dfd_sched *sched, struct dfd_storage *storage,
                     const struct dfd_config *cfg, struct dfd_rejoin **ret, struct dfc_error *err);

/* Asks for a pass (one more after the running one, when kicked during it). Never blocks on
 * the network. NULL is fine. */
void dfd_rejoin_kick(struct dfd_rejoin *j);

/* Stops the thread (a pass in flight ends after its current task: at most a few request
 * timeouts) and frees. NULL is fine. */
void dfd_rejoin_stop(struct dfd_rejoin *j);

/* One pass on the calling thread (what the thread runs); should_stop (may be NULL) is polled
 * between tasks. 0, or the error that ended it early (the scheduler away). */
int dfd_rejoin_pass(struct dfd_sched *sched, struct dfd_storage *storage,
                    const struct dfd_config *cfg, bool (*should_stop)(void *), void *arg,
                    struct dfd_rejoin_counts *ret, struct dfc_error *err);

#endif /* DFD_REJOIN_H */
