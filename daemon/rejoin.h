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
 * the next one once an import was kept local because no scheduler took its Started (the
 * announcer kicks this thread), one pass goes over the local tasks that are not expired and
 * carry a peer id or the register_later mark (an import no scheduler took: storage/task.h;
 * such a row first gets a fresh peer id recorded, mark kept, so a delete meanwhile withdraws
 * it and a crash leaves a state the next pass redoes). Rows with neither (standalone imports,
 * copies of bytes the cluster had) are not looked at. For each:
 *   StatPersistentCachePeer: Succeeded         nothing to do (present; a mark goes)
 *     found in another state                   a registration may be under way when the row
 *                                               is under a minute old (waiting); else it broke
 *                                               off: an Uploading peer is failed first (so its
 *                                               task can be uploaded again), then deleted, and
 *                                               the steps below redo it
 *   StatPersistentCacheTask: not found         a registered copy: deleted or expired at the
 *                                               scheduler, left alone (absent); a marked one:
 *                                               uploaded
 *     Uploading                                another upload of it is under way (waiting)
 *     Succeeded with the same geometry         AnnouncePersistentCachePeer under the peer id
 *                                               and persistent flag: register, Started,
 *                                               Finished, no piece moved (joined); a stream
 *                                               that breaks after the register withdraws it
 *       register: "no candidate parents found" no copy is left anywhere: uploaded
 *     Failed                                   uploaded
 *   uploaded = Started (TTL = what is left of the local one, so both expire together) then
 *   Finished; Failed after a failure once Started may have been stored; our scheduler takes
 *   Started for a Succeeded task with no peer left. An uploaded copy that was not persistent
 *   becomes persistent here too (the scheduler counts an uploader's copy as one).
 * Then the row keeps the peer (a mark goes), or, deleted or imported again meanwhile, the peer
 * is withdrawn (DeletePersistentCachePeer); a delete that raced the registration withdraws
 * the peer id the row had when it went (dfd_storage_delete_task). Another geometry or less
 * than 5 minutes of TTL left: skipped. UNAVAILABLE or DEADLINE_EXCEEDED ends the pass. A pass
 * that ended early or left tasks waiting or failed runs again after 5 s, doubling up to the
 * announce interval, until one leaves none. One summary line per pass:
 * event=scheduler.rejoined. A task in flight when the daemon stops finishes first (a few
 * request timeouts at most).
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
    size_t present, joined, uploaded, absent, skipped, waiting, failed;
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
