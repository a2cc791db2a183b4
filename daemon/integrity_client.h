/*
 * integrity_client.h - dfdaemon's calls to the scheduler's dfc.scheduler.v1
 * PersistentCacheIntegrity (proto/dfc/integrity.proto, docs/integrity.md): an importer records
 * the SHA-256 digests of what it imported once the scheduler has its copy (Finished); a
 * download reads them (the P2P engine's get_digests, p2p/sched_ops.h).
 *
 * Calls go to the task's scheduler on the ring (scheduler_client.h), and to the next one on
 * UNAVAILABLE. Errors as the scheduler client's. Thread-safe. Returned messages belong to the
 * caller (dfc_rpc_msg_free).
 */
#ifndef DFD_INTEGRITY_CLIENT_H
#define DFD_INTEGRITY_CLIENT_H

#include <stddef.h>

#include "dfc/error.h"
#include "p2p/sched_ops.h"
#include "storage/storage.h"

struct dfd_sched;

/* RecordPersistentCacheTaskDigests for t with its n pieces (each with its SHA-256). -EINVAL
 * when t has no content SHA-256 or a piece no SHA-256 (a task stored before they were kept). */
int dfd_sched_record_digests(struct dfd_sched *s, const struct dfd_task_meta *t,
                             const struct dfd_piece_meta *pieces, size_t n, struct dfc_error *err);

/* Loads t's pieces from st and records them; failures are only logged (a copy without a
 * record is still served; downloads then check the id rule alone, docs/integrity.md). */
void dfd_record_task_digests(struct dfd_sched *s, struct dfd_storage *st,
                             const struct dfd_task_meta *t);

/* GetPersistentCacheTaskDigests. A scheduler that does not serve it (UNIMPLEMENTED) answers
 * no records. */
int dfd_sched_get_digests(struct dfd_sched *s, const char *task_id,
                          Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse **ret,
                          struct dfc_error *err);

#endif /* DFD_INTEGRITY_CLIENT_H */
