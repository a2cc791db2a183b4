/*
 * sched_ops.h - the scheduler calls the P2P download engine (download.h) makes, injected by
 * dfdaemon: StatPersistentCacheTask and the AnnouncePersistentCachePeer stream of one download
 * (docs/dragonfly-compat.md, "Export / replica download"). dfdaemon passes its scheduler
 * client's functions (scheduler_client.h, which declares them with these types), so the engine,
 * in dfd_p2p, needs no daemon header: struct dfd_sched stays opaque here.
 *
 * Errors as the scheduler client's (negative errno, err naming the scheduler and the method).
 * Thread-safe; the engine serialises the sends on one stream itself. Messages returned belong to
 * the caller (dfc_rpc_msg_free); those passed in are borrowed for the call.
 */
#ifndef DFD_P2P_SCHED_OPS_H
#define DFD_P2P_SCHED_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/rpc_client.h"

struct dfd_sched;
typedef struct Common__V2__PersistentCacheTask Common__V2__PersistentCacheTask;
typedef struct Common__V2__PersistentCachePeer Common__V2__PersistentCachePeer;
typedef struct Common__V2__Piece Common__V2__Piece;
typedef struct Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse;

/* RegisterPersistentCachePeerRequest's fields (this host's id is added by the sender). */
struct dfd_sched_register {
    const char *task_id, *peer_id;
    const char *tag, *application; /* NULL: absent */
    bool persistent;
    uint64_t piece_length;
    uint32_t piece_count, concurrent_piece_count;
};

enum dfd_sched_peer_event {
    DFD_SCHED_PEER_STARTED,  /* DownloadPersistentCachePeerStartedRequest */
    DFD_SCHED_PEER_FINISHED, /* DownloadPersistentCachePeerFinishedRequest */
    DFD_SCHED_PEER_FAILED,   /* DownloadPersistentCachePeerFailedRequest (description) */
};

/* The calls, each given s (borrowed, outlives the engine). Every one is required. */
struct dfd_p2p_sched {
    struct dfd_sched *s;
    /* StatPersistentCacheTask: -ENOENT when the scheduler does not know the task. */
    int (*stat_task)(struct dfd_sched *s, const char *task_id,
                     Common__V2__PersistentCacheTask **ret, struct dfc_error *err);
    /* Opens the AnnouncePersistentCachePeer stream on task_id's scheduler (its answers are
     * scheduler.v2.AnnouncePersistentCachePeerResponse). Free with dfc_rpc_stream_free(). */
    int (*announce_open)(struct dfd_sched *s, const char *task_id, int64_t timeout_ms,
                         struct dfc_rpc_stream **ret, struct dfc_error *err);
    /* The messages on that stream. */
    int (*peer_register)(struct dfd_sched *s, struct dfc_rpc_stream *st,
                         const struct dfd_sched_register *g, struct dfc_error *err);
    int (*peer_event)(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                      const char *peer_id, enum dfd_sched_peer_event ev, const char *description,
                      struct dfc_error *err);
    int (*peer_reschedule)(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                           const char *peer_id, Common__V2__PersistentCachePeer *const *parents,
                           size_t n, const char *description, struct dfc_error *err);
    int (*peer_piece_finished)(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                               const char *peer_id, const Common__V2__Piece *piece,
                               struct dfc_error *err);
    int (*peer_piece_failed)(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                             const char *peer_id, uint32_t number, const char *parent_id,
                             bool temporary, struct dfc_error *err);
    /* dfc.scheduler.v1 GetPersistentCacheTaskDigests: the importers' records, oldest first
     * (none from a scheduler that does not serve it). */
    int (*get_digests)(struct dfd_sched *s, const char *task_id,
                       Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse **ret,
                       struct dfc_error *err);
};

#endif /* DFD_P2P_SCHED_OPS_H */
