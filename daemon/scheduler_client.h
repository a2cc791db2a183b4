/*
 * scheduler_client.h - dfdaemon's calls to the scheduler (scheduler.v2.Scheduler,
 * docs/dragonfly-compat.md "Scheduler registration"), one module for every caller: the
 * announcer, the import hooks, the P2P download engine, GC and delete.
 *
 * scheduler.addrs names one or more schedulers. Per-task calls go to the one a consistent-hash
 * ring over the addresses picks for the first 5 characters of the task id (as upstream's
 * hashring; our hash, FNV-1a + splitmix64 over 160 points per address, is described in
 * scheduler_client.c: every scheduler shares Redis, so only stability matters), and on
 * UNAVAILABLE to the next one on the ring, each at most once. Host calls
 * (AnnounceHost, DeleteHost) go to every scheduler. Channels: one dfc_rpc_client per address,
 * created at start, calls that fail fast while a channel cannot connect, per-request timeout
 * 10 s (upstream: connect timeout 3 s, request timeout 10 s).
 *
 * Errors: the scheduler's status mapped back through DFC_ERRNO_MAP, err naming the address and
 * the method ("scheduler 127.0.0.1:8002 UploadPersistentCacheTaskStarted: ..."). Thread-safe.
 * Ownership: the config is borrowed and must outlive the client; returned messages belong to
 * the caller (dfc_rpc_msg_free).
 */
#ifndef DFD_SCHEDULER_CLIENT_H
#define DFD_SCHEDULER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "p2p/sched_ops.h"

struct dfd_sched;
struct dfd_task_meta;
typedef struct Common__V2__PersistentCacheTask Common__V2__PersistentCacheTask;
typedef struct Common__V2__Host Common__V2__Host;
typedef struct Common__V2__PersistentCachePeer Common__V2__PersistentCachePeer;
typedef struct Common__V2__Piece Common__V2__Piece;

/* The methods dfdaemon calls, resolved once by dfd_sched_new(). */
struct dfd_sched_methods {
    struct dfc_rpc_client_method announce_host, delete_host, announce_peer, delete_peer,
        upload_started, upload_finished, upload_failed, stat_task, stat_peer, record_digests,
        get_digests; /* dfc.scheduler.v1 (integrity_client.h) */
};

/* A client for cfg->scheduler_addrs (must not be empty); host_id is copied. Also resolves
 * the scheduler addresses to IPs (dfd_sched_is_scheduler_ip). */
int dfd_sched_new(const struct dfd_config *cfg, const char *host_id, struct dfd_sched **ret,
                  struct dfc_error *err);
void dfd_sched_free(struct dfd_sched *s);

const struct dfd_sched_methods *dfd_sched_methods(const struct dfd_sched *s);

/* This host's id, as given to dfd_sched_new (borrowed). */
const char *dfd_sched_host_id(const struct dfd_sched *s);

/* The ring: the client for task_id's attempt-th choice (attempt 0 = its own scheduler), NULL
 * once attempt reaches the number of schedulers. *ret_addr (may be NULL) names it. */
struct dfc_rpc_client *dfd_sched_pick(struct dfd_sched *s, const char *task_id, unsigned attempt,
                                      const char **ret_addr);

/* Whether ip (text, as the RPC layer reports a TCP peer) is one of the schedulers'. A miss
 * re-resolves the addresses (at most every 10 s; getaddrinfo may block on DNS, so call it from
 * a worker, never the completion-queue thread). Thread-safe. */
bool dfd_sched_is_scheduler_ip(struct dfd_sched *s, const char *ip);

/* An import was kept locally without a peer (no scheduler answered Started, or none knew this
 * host yet): noted here, taken by the announcer after its next announce to start a rejoin
 * pass (rejoin.h), which registers it. Thread-safe. */
void dfd_sched_note_unregistered(struct dfd_sched *s);
bool dfd_sched_take_unregistered(struct dfd_sched *s);

/* Whether err, a scheduler call's error, says the scheduler was out of reach: the one test
 * for "scheduler unreachable". UNAVAILABLE: the call never got there (refused, reset, no
 * channel); DEADLINE_EXCEEDED: no answer in time, so it may have got there and been applied,
 * which *ret_maybe_arrived (may be NULL) tells. Only the first kind fails over to the next
 * scheduler on the ring. */
bool dfd_sched_unreachable(int err, bool *ret_maybe_arrived);

/* How often a miss may re-resolve (default 10 s); for tests. Call before sharing s. */
void dfd_sched_set_reresolve_ms(struct dfd_sched *s, int64_t ms);

/* ---- host ---- */

/* AnnounceHost to every scheduler with host (dfd_hostinfo_fill); 0 when at least one took it,
 * else the last error. */
int dfd_sched_announce_host(struct dfd_sched *s, const Common__V2__Host *host, int64_t interval_ns,
                            struct dfc_error *err);

/* DeleteHost to every scheduler (on clean shutdown); errors are only logged. */
void dfd_sched_delete_host(struct dfd_sched *s);

/* ---- task (ring + fail-over on UNAVAILABLE) ---- */

/* UploadPersistentCacheTaskStarted with the pending task's fields and peer id. */
int dfd_sched_upload_started(struct dfd_sched *s, const struct dfd_task_meta *t,
                             const char *peer_id, struct dfc_error *err);

/* UploadPersistentCacheTaskFinished; *ret (may be NULL) is the scheduler's task. */
int dfd_sched_upload_finished(struct dfd_sched *s, const char *task_id, const char *peer_id,
                              Common__V2__PersistentCacheTask **ret, struct dfc_error *err);

/* UploadPersistentCacheTaskFailed with description; errors are only logged. */
void dfd_sched_upload_failed(struct dfd_sched *s, const char *task_id, const char *peer_id,
                             const char *description);

/* Whether the scheduler's task st has t's content length, piece length and piece count. */
bool dfd_sched_same_geometry(const Common__V2__PersistentCacheTask *st,
                             const struct dfd_task_meta *t);

/* StatPersistentCacheTask: -ENOENT when the scheduler does not know the task. */
int dfd_sched_stat_task(struct dfd_sched *s, const char *task_id,
                        Common__V2__PersistentCacheTask **ret, struct dfc_error *err);

/* StatPersistentCachePeer of this host's peer_id of task_id: 0 with *ret (may be NULL) the
 * scheduler's peer, -ENOENT when it does not know it. */
int dfd_sched_stat_peer(struct dfd_sched *s, const char *task_id, const char *peer_id,
                        Common__V2__PersistentCachePeer **ret, struct dfc_error *err);

/* DeletePersistentCachePeer for this host's copy (GC expiry, disk eviction, dfcache rm), so
 * the scheduler never offers a parent that lost the data; errors are only logged. */
void dfd_sched_delete_peer(struct dfd_sched *s, const char *task_id, const char *peer_id);

/* Opens the AnnouncePersistentCachePeer bidi stream on task_id's scheduler (fail-over on
 * UNAVAILABLE at open). CAUTION: opening does not wait for the server, so a scheduler that is
 * away usually shows only at the first send or receive; a caller that wants to fail over then
 * uses dfd_sched_pick() with the next attempt. Free with dfc_rpc_stream_free(). */
int dfd_sched_announce_peer_open(struct dfd_sched *s, const char *task_id, int64_t timeout_ms,
                                 struct dfc_rpc_stream **ret, struct dfc_error *err);

/* ---- messages on an AnnouncePersistentCachePeer stream (this host's id in each) ---- */

/* struct dfd_sched_register and enum dfd_sched_peer_event are in p2p/sched_ops.h: the P2P
 * download engine takes the functions below as its struct dfd_p2p_sched. */

/* RegisterPersistentCachePeerRequest. */
int dfd_sched_peer_register(struct dfd_sched *s, struct dfc_rpc_stream *st,
                            const struct dfd_sched_register *g, struct dfc_error *err);

/* One of the events above; description (may be NULL) only for FAILED. Errors are prefixed
 * "scheduler AnnouncePersistentCachePeer". */
int dfd_sched_peer_event(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                         const char *peer_id, enum dfd_sched_peer_event ev, const char *description,
                         struct dfc_error *err);

/* ReschedulePersistentCachePeerRequest naming the parents that failed (borrowed). */
int dfd_sched_peer_reschedule(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                              const char *peer_id, Common__V2__PersistentCachePeer *const *parents,
                              size_t n, const char *description, struct dfc_error *err);

/* DownloadPieceFinishedRequest with piece (borrowed). */
int dfd_sched_peer_piece_finished(struct dfd_sched *s, struct dfc_rpc_stream *st,
                                  const char *task_id, const char *peer_id,
                                  const Common__V2__Piece *piece, struct dfc_error *err);

/* DownloadPieceFailedRequest: piece number failed on parent_id; temporary false when its bytes
 * failed verification (docs/integrity.md). */
int dfd_sched_peer_piece_failed(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                                const char *peer_id, uint32_t number, const char *parent_id,
                                bool temporary, struct dfc_error *err);

#endif /* DFD_SCHEDULER_CLIENT_H */
