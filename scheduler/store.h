/*
 * store.h - the host, task and peer managers: upstream's persistent-cache records in Redis
 * under upstream's exact keys (P = "scheduler:scheduler-clusters:<clusterID>"):
 *
 *   P:persistent-cache-tasks:<taskID>                                          task hash
 *   P:persistent-cache-tasks:<taskID>:persistent-cache-peers-for-persistent-cache-task  set
 *   P:persistent-cache-tasks:<taskID>:persistent-peers-for-persistent-cache-task        set
 *   P:persistent-cache-peers-for-persistent-cache-task:<peerID>               peer hash
 *   P:persistent-cache-hosts:<hostID>                                          host hash
 *   P:persistent-cache-hosts                                                   set of host ids
 *   P:persistent-cache-hosts:<hostID>:persistent-cache-peers-for-persistent-cache-task  set
 *
 * Every write is one Lua script (atomic). TTL as upstream: remaining = task ttl - (now -
 * task created_at) in whole seconds, truncated; a task store EXPIREs the task hash, a peer
 * store EXPIREs the peer hash, the task's all-peers set, the host's peer set and (persistent
 * peers only) the persistent set; remaining <= 0 deletes the record at once. Host hashes never
 * expire.
 *
 * Unlike upstream (each is invisible to readers of the keys): a peer delete works when its
 * task or host hash is already gone (it reads task_id/host_id from the peer hash itself), so
 * nothing lingers until TTL; a set's expiry is only ever extended (it lives as long as its
 * longest-lived member, where upstream let the last-stored peer's TTL cut it short); an
 * expired store removes only that peer's id from the sets (upstream's EXPIRE 0 deleted the
 * whole sets, other tasks' peers on the host included); a store with persistent = 0 also
 * leaves the persistent set. A key holding another type than expected reads as missing.
 *
 * Errors: -ENOENT when a record is missing (a peer whose host or task is gone is missing),
 * errors of redis.h otherwise. Each call takes an absolute deadline (sched_redis_deadline).
 * Thread-safe: a store is read-only after sched_store_new, so any thread may call any manager
 * function at once (each call takes its own pooled connection).
 *
 * Ownership: records filled here are the caller's (release with *_done / *_list_free); id
 * lists are malloc'd arrays of malloc'd strings freed with sched_ids_free.
 */
#ifndef SCHED_STORE_H
#define SCHED_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "model.h"
#include "redis.h"

struct sched_store; /* borrows a sched_redis; holds the key prefix and the loaded scripts */

int sched_store_new(struct sched_redis *r, uint64_t cluster_id, struct sched_store **ret,
                    struct dfc_error *err);
void sched_store_free(struct sched_store *s);
struct sched_redis *sched_store_redis(struct sched_store *s);
/* "scheduler:scheduler-clusters:1" (borrowed), for keys outside the managers (leases). */
const char *sched_store_prefix(const struct sched_store *s);

struct sched_ids {
    char **ids;
    size_t n;
};
void sched_ids_free(struct sched_ids *ids);

/* UploadPersistentCacheTaskStarted's three reads in one round trip. rs[0..2] and errs[0..2]
 * are what sched_host_load, sched_task_load and sched_peer_load would return for host_id,
 * task_id and peer_id (the caller releases each loaded record, as after those); < 0 when
 * the round trip failed (err), with nothing loaded. */
int sched_store_load_upload(struct sched_store *s, int64_t dl, const char *host_id,
                            struct sched_host *host, const char *task_id, struct sched_task *task,
                            const char *peer_id, struct sched_peer *peer, int rs[3],
                            struct dfc_error errs[3], struct dfc_error *err);

/* An upload's task and its peer in one atomic script (one round trip): what sched_task_store
 * then sched_peer_store(p, t) would write, with one remaining TTL (the task's) for both; a
 * refusal of either (a bad id, a peer of another task, an encoding limit) writes neither.
 * all / persistent (each may be NULL) get the SCARDs of the task's all-peers and
 * persistent-peers sets after the write, as sched_task_replica_counts would. */
int sched_store_task_peer(struct sched_store *s, int64_t dl, const struct sched_task *t,
                          const struct sched_peer *p, uint64_t *all, uint64_t *persistent,
                          struct dfc_error *err);

/* sched_peer_load(peer_id) then sched_task_load of the peer's task, with the same answers,
 * in one round trip when the peer hash names host_hint and task_hint (the uploader's
 * Finished and Failed name them); else in the three round trips of those loads. < 0: peer
 * and task hold nothing. */
int sched_store_load_peer_task(struct sched_store *s, int64_t dl, const char *peer_id,
                               const char *host_hint, const char *task_hint,
                               struct sched_peer *peer, struct sched_task *task,
                               struct dfc_error *err);

/* sched_task_load then sched_task_replica_counts in one round trip (a pipeline of reads);
 * the counts are only valid when 0 is returned. */
int sched_store_load_task_counts(struct sched_store *s, int64_t dl, const char *id,
                                 struct sched_task *task, uint64_t *all, uint64_t *persistent,
                                 struct dfc_error *err);

/* Hosts */
int sched_host_load(struct sched_store *s, int64_t dl, const char *id, struct sched_host *out,
                    struct dfc_error *err);
int sched_host_store(struct sched_store *s, int64_t dl, const struct sched_host *h,
                     struct dfc_error *err); /* HSET + SADD hosts set */
int sched_host_delete(struct sched_store *s, int64_t dl, const char *id,
                      struct dfc_error *err); /* DEL hash + SREM; the host's peers: see below */
int sched_host_ids(struct sched_store *s, int64_t dl, struct sched_ids *out, struct dfc_error *err);
/* Up to n loadable hosts in random order whose ids are not in blocklist. */
int sched_host_load_random(struct sched_store *s, int64_t dl, size_t n,
                           const char *const *blocklist, size_t n_block, struct sched_host **out,
                           size_t *n_out, struct dfc_error *err);
void sched_host_list_free(struct sched_host *list, size_t n);

/* Tasks */
int sched_task_load(struct sched_store *s, int64_t dl, const char *id, struct sched_task *out,
                    struct dfc_error *err);
int sched_task_store(struct sched_store *s, int64_t dl, const struct sched_task *t,
                     struct dfc_error *err);
int sched_task_delete(struct sched_store *s, int64_t dl, const char *id, struct dfc_error *err);
/* SCARD of the all-peers set and of the persistent set. */
int sched_task_replica_counts(struct sched_store *s, int64_t dl, const char *id, uint64_t *all,
                              uint64_t *persistent, struct dfc_error *err);
int sched_task_ids(struct sched_store *s, int64_t dl, struct sched_ids *out,
                   struct dfc_error *err); /* SCAN P:persistent-cache-tasks:* */

/* Peers */
int sched_peer_load(struct sched_store *s, int64_t dl, const char *id, struct sched_peer *out,
                    struct dfc_error *err);
int sched_peer_store(struct sched_store *s, int64_t dl, const struct sched_peer *p,
                     const struct sched_task *task, struct dfc_error *err); /* TTL from task */
/* Sets only the peer's updated_at (its other fields, sets and expiry stay as they are), in one
 * atomic step (one round trip) that does nothing unless the peer would load: its hash, and
 * the host and task it names, all there; else -ENOENT "peer <id> not found". */
int sched_peer_touch(struct sched_store *s, int64_t dl, const char *id, int64_t updated_at,
                     struct dfc_error *err);
int sched_peer_delete(struct sched_store *s, int64_t dl, const char *id, struct dfc_error *err);
/* Members of the task's all-peers set / persistent set, and of a host's peer set. */
int sched_peer_ids_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                           bool persistent_only, struct sched_ids *out, struct dfc_error *err);
int sched_peer_ids_by_host(struct sched_store *s, int64_t dl, const char *host_id,
                           struct sched_ids *out, struct dfc_error *err);
/* The loadable peers of a task (missing ones skipped). */
int sched_peer_load_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                            struct sched_peer **out, size_t *n_out, struct dfc_error *err);
/* At most max random members of the task's persistent set and max of its all-peers set
 * (so the persistent copies are always in the draw), loaded (missing ones skipped): a cost
 * bounded by max whatever the task holds; every peer when the sets are that small. */
int sched_peer_load_sample_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                                   size_t max, struct sched_peer **out, size_t *n_out,
                                   struct dfc_error *err);
/* 1 when peer_id is in the task's all-peers set, 0 when not, or a negative code. */
int sched_peer_in_task(struct sched_store *s, int64_t dl, const char *task_id, const char *peer_id,
                       struct dfc_error *err);
void sched_peer_list_free(struct sched_peer *list, size_t n);

#endif /* SCHED_STORE_H */
