/*
 * registration.h - what the import and delete paths tell the scheduler
 * (docs/dragonfly-compat.md 7.6, "Handlers and their codes"): an import becomes a peer of its task
 * at the scheduler, and a copy that goes away (dfcache rm, GC) stops being one. Standalone (no
 * scheduler) every function here does nothing.
 *
 * An import with a scheduler:
 *   dfd_registration_prepare()   a fresh peer id (dfc_peer_id) into params.peer_id, and
 *                                params.before_commit = Started, run by the storage engine
 *                                once the content is durable and its id known, before the
 *                                task is visible
 *   the import                   (an identical task already stored: no hook, no call)
 *   dfd_registration_end()       after the commit (the task visible locally): Finished, so the
 *                                scheduler never sends a peer to a copy that is not there yet.
 *                                After a failure once Started went through (or an identical
 *                                task stored first): Failed, so the task never stays Uploading
 * Finished failing after the commit: Failed, then the committed task is deleted here and the
 * import fails with Finished's error; except UNAVAILABLE / DEADLINE_EXCEEDED, where the local
 * copy is kept and its peer deleted at the scheduler (DeletePersistentCachePeer), with a warning.
 * Started answering UNAVAILABLE (every scheduler away), DEADLINE_EXCEEDED, or NOT_FOUND (the
 * scheduler does not know this host yet, before the announcer's next round): the import is
 * kept local and unregistered (committed without a peer id, marked register_later), with a
 * warning; the rejoin pass after the next announce registers it (rejoin.h). Started answering
 * ALREADY_EXISTS: see registration.c.
 *
 * Ownership: the struct is the caller's and must outlive the import (the hook points at it);
 * sched and the store are borrowed.
 */
#ifndef DFD_REGISTRATION_H
#define DFD_REGISTRATION_H

#include <stdbool.h>

#include "config.h"
#include "dfc/error.h"
#include "storage/storage.h"

struct dfd_sched;

struct dfd_registration {
    struct dfd_sched *sched; /* NULL: standalone */
    char peer_id[DFD_PEER_ID_MAX];
    char task_id[DFD_TASK_ID_LEN + 1];
    bool started; /* Started went through: the scheduler holds an Uploading peer */
};

/* Readies g and, with a scheduler, sets p->peer_id, p->before_commit and its arg. -ENAMETOOLONG
 * when host.ip and host.hostname make a peer id that does not fit. */
int dfd_registration_prepare(struct dfd_registration *g, struct dfd_sched *sched,
                             const struct dfd_config *cfg, struct dfd_import_params *p,
                             struct dfc_error *err);

/* After the import: r is its result (err its message when r < 0), t the task it returned and
 * existed whether that was an identical task already stored (t is read only when r >= 0).
 * Sends Finished or Failed as above. Returns r, 0, or Finished's error (err set); on that
 * error the committed task has been deleted and t released (dfd_task_meta_done). s is the
 * store t was committed to. */
int dfd_registration_end(struct dfd_registration *g, struct dfd_storage *s, int r,
                         struct dfd_task_meta *t, bool existed, struct dfc_error *err);

/* A copy of t was deleted here (dfcache rm, GC expiry or eviction): DeletePersistentCachePeer
 * when t has a peer id. Errors are only logged. sched may be NULL. */
void dfd_registration_forget(struct dfd_sched *sched, const struct dfd_task_meta *t);

#endif /* DFD_REGISTRATION_H */
