/*
 * validate.h - upstream's protoc-gen-validate rules for every scheduler.v2 request this
 * service takes (docs/dragonfly-compat.md, "Scheduler on Redis"), enforced before a handler
 * runs, as upstream's validator interceptor does, nested messages included.
 *
 * Each function returns 0 or -EINVAL (INVALID_ARGUMENT) with a message that names the field
 * path from the request's root: "host.cpu: required",
 * "reschedule_persistent_cache_peer_request.candidate_parents[0].task.piece_length: ...".
 *
 * On purpose beyond upstream's rules (each is INVALID_ARGUMENT too):
 *   - AnnounceHost's host.cpu is required (upstream dereferences it and answers INTERNAL);
 *   - doubles must be numbers (PGV lets NaN through every comparison);
 *   - ids, tag, application and the host's strings are at most SCHED_STRING_MAX bytes;
 *   - UploadPersistentCacheTaskStarted's piece_count must be ceil(content_length /
 *     piece_length), as dfdaemon computes it, so a request cannot make a 2^32-bit bitset.
 * Pure: no I/O; the request is borrowed.
 */
#ifndef SCHED_VALIDATE_H
#define SCHED_VALIDATE_H

#include <stdbool.h>

#include "dfc/error.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"

/* Most pieces a task may have (ours; upstream has no limit): 2^24, a 2 MiB bitset. */
#define SCHED_PIECE_COUNT_MAX (1u << 24)

/* Our limit on ids and the strings we store; the numeric limits (piece length, ttl) are the
 * shared ones of dfc/dragonfly.h. */
#define SCHED_STRING_MAX 1024

int sched_validate_announce_host(const Scheduler__V2__AnnounceHostRequest *r,
                                 struct dfc_error *err);
int sched_validate_delete_host(const Scheduler__V2__DeleteHostRequest *r, struct dfc_error *err);
int sched_validate_upload_started(const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *r,
                                  struct dfc_error *err);
int sched_validate_upload_finished(const Scheduler__V2__UploadPersistentCacheTaskFinishedRequest *r,
                                   struct dfc_error *err);
int sched_validate_upload_failed(const Scheduler__V2__UploadPersistentCacheTaskFailedRequest *r,
                                 struct dfc_error *err);
int sched_validate_stat_task(const Scheduler__V2__StatPersistentCacheTaskRequest *r,
                             struct dfc_error *err);
int sched_validate_delete_task(const Scheduler__V2__DeletePersistentCacheTaskRequest *r,
                               struct dfc_error *err);
int sched_validate_stat_peer(const Scheduler__V2__StatPersistentCachePeerRequest *r,
                             struct dfc_error *err);
int sched_validate_delete_peer(const Scheduler__V2__DeletePersistentCachePeerRequest *r,
                               struct dfc_error *err);
/* One message of the AnnouncePersistentCachePeer stream; its oneof is required. */
int sched_validate_announce_peer(const Scheduler__V2__AnnouncePersistentCachePeerRequest *r,
                                 struct dfc_error *err);

/* The embedded messages' rules, path being the field's path ("host", "candidate_parents[2]"). */
int sched_validate_host(const char *path, const Common__V2__Host *h, struct dfc_error *err);
int sched_validate_task(const char *path, const Common__V2__PersistentCacheTask *t,
                        struct dfc_error *err);
int sched_validate_peer(const char *path, const Common__V2__PersistentCachePeer *p,
                        struct dfc_error *err);
int sched_validate_piece(const char *path, const Common__V2__Piece *p, struct dfc_error *err);

#endif /* SCHED_VALIDATE_H */
