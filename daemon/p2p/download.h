/*
 * download.h - the P2P download engine: makes a task that is not stored here local by fetching
 * its pieces from peers the scheduler names (docs/dragonfly-compat.md, "Export / replica
 * download"). Used by DfdaemonDownload.DownloadPersistentCacheTask (an export of a task that is
 * not local) and DfdaemonUpload.DownloadPersistentCacheTask (the scheduler's replication pull).
 *
 *   StatPersistentCacheTask -> dfd_replica_begin (created_at = the scheduler's)
 *   -> AnnouncePersistentCachePeer: Register{persistent, tag, application, piece_length,
 *      concurrent_piece_count, piece_count}
 *   -> Empty: Started, Finished.  Normal{parents}: Started, then the swarm
 *      (download_internal.h, docs/swarm.md): every parent's SyncPersistentCachePieces (at
 *      host.ip:host.port, all at once, read as long as the parent reports pieces: one still
 *      downloading the task reports each as it lands), concurrent_piece_count workers each
 *      taking a parent by throughput and from it the rarest missing piece, fetched over Vortex
 *      (vortex_client.h), CRC-checked as it streams into the replica in 1 MiB chunks
 *      (dfd_replica_claim_piece/pwrite/finish_piece; whole, with dfd_replica_write_piece,
 *      when the caller wants each piece's bytes), verified against the importer's record,
 *      reported to the caller (progress) and to the scheduler (DownloadPieceFinished); a
 *      failed piece goes back to the missing ones (DownloadPieceFailed{temporary = true}).
 *      Reschedule for more parents while fewer than 8 are usable, and when none can go on (at
 *      most scheduler.maxScheduleCount times, then DownloadPersistentCachePeerFailed).
 *   -> all pieces: dfd_replica_commit (visible only now, durable), then
 *      DownloadPersistentCachePeerFinished.
 * Any failure aborts the replica (nothing remains) and tells the scheduler (PeerFailed).
 *
 * Concurrent fetches of one task share one download: the later callers wait for it and get the
 * committed task (their progress sees no pieces). Memory: 2 x concurrent_piece_count buffers per
 * download, of 1 MiB each (mapped for the download only), or one of a piece per worker when
 * the caller wants the bytes.
 *
 * What the engine needs from dfdaemon comes in struct dfd_p2p_opts: the scheduler calls
 * (struct dfd_p2p_sched: dfdaemon passes its scheduler client's, scheduler_client.h), the
 * configuration values and the metrics counters, so that dfd_p2p includes no daemon header.
 *
 * Ownership: storage, the opts' strings, counters and scheduler client are borrowed and outlive
 * the engine; the opts struct itself is copied.
 */
#ifndef DFD_P2P_DOWNLOAD_H
#define DFD_P2P_DOWNLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/tls.h"
#include "p2p/sched_ops.h"
#include "storage/storage.h"

struct dfc_metric;
struct dfc_ratelimit;
struct dfc_tls_ctx;
struct dfd_p2p;

struct dfd_p2p_opts {
    const char *host_id;             /* this host's id: sent to parents, never taken as a parent */
    const char *host_ip;             /* host.ip and host.hostname: each download's peer id */
    const char *hostname;            /* (dfc_peer_id) */
    uint64_t max_schedule_count;     /* scheduler.maxScheduleCount: answers when stuck */
    int64_t schedule_timeout_ns;     /* scheduler.scheduleTimeout: one download's stream */
    int64_t piece_timeout_ns;        /* download.pieceTimeout: one piece from one parent */
    uint64_t concurrent_piece_count; /* download.concurrentPieceCount: pieces in flight */
    /* Counted per piece fetched and written: one, and its length in series 0; and per piece
     * refused for its CRC (NULL: not counted). */
    struct dfc_metric *fetched_pieces, *fetched_bytes, *crc_failures;
    struct dfd_p2p_sched sched; /* the scheduler calls (sched.s must not be NULL) */
    /* Called (may be NULL) when a copy was committed but the scheduler could not be told (its
     * stream was lost mid-download): dfdaemon kicks its rejoin pass (rejoin.h), which puts the
     * copy back at the scheduler. Must not block. */
    void (*untold)(void *arg);
    void *untold_arg;
    /* TLS to the parents' Vortex servers: a client context (dfc/tls_ssl.h), or NULL for plain
     * TCP. */
    struct dfc_tls_ctx *vortex_tls;
    /* download.rateLimit: the token bucket every piece's bytes are paid from as they are read
     * (dfc/ratelimit.h; shared by all downloads), or NULL for no limit. */
    struct dfc_ratelimit *download_rate;
    /* TLS of the calls to parents' DfdaemonUpload (upload.client.*): policy and files, the
     * paths borrowed for the engine's life; zero = plaintext. */
    enum dfc_tls_policy tls;
    struct dfc_tls_files tls_files;
};

int dfd_p2p_new(struct dfd_storage *storage, const struct dfd_p2p_opts *o, struct dfd_p2p **ret,
                struct dfc_error *err);

/* Cancels downloads in progress and frees. NULL is fine. */
void dfd_p2p_free(struct dfd_p2p *p);

struct dfd_p2p_request {
    const char *task_id;
    bool persistent;         /* the copy is persistent (a replication pull) */
    const char *tag;         /* NULL = the scheduler's */
    const char *application; /* NULL = the scheduler's */
};

/* Told about the download as it goes; every callback optional, all called on the caller's
 * thread or on engine threads (serialised: never two at once). A negative return from any of
 * them ends the download with that error (a caller that went away). */
struct dfd_p2p_progress {
    void *arg;
    /* Once, before any piece: the content length. */
    int (*started)(void *arg, uint64_t content_length, struct dfc_error *err);
    /* Each piece once, as it is written; data is its bytes (borrowed for the call) when
     * piece_data is set, else NULL (the bytes then stream from the socket into the store in
     * small chunks, never whole in memory). */
    int (*piece)(void *arg, const struct dfd_piece_meta *pm, const void *data,
                 const char *parent_id, uint64_t cost_ns, struct dfc_error *err);
    bool piece_data;
    /* Polled: true ends the download with -ECANCELED. */
    bool (*should_stop)(void *arg);
};

/* Makes task req->task_id local and fills *ret (free with dfd_task_meta_done). Returns -ENOENT
 * when the scheduler does not know it, -EUNAVAILABLE-like codes as the scheduler's, DFC_E_ABORTED
 * when no parent could go on after scheduler.maxScheduleCount answers, or the storage's error. A
 * task already stored returns at once. */
int dfd_p2p_fetch(struct dfd_p2p *p, const struct dfd_p2p_request *req,
                  const struct dfd_p2p_progress *prog, struct dfd_task_meta *ret,
                  struct dfc_error *err);

#endif /* DFD_P2P_DOWNLOAD_H */
