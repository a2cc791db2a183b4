/*
 * download_internal.h - what download.c (the table of downloads in progress and one download's
 * course: stat, replica, register, the rounds, commit) and download_round.c (one round: the
 * parents' piece lists, the piece workers, each piece's fetch, check, write and report) share.
 * Private to daemon/p2p.
 *
 * Ownership
 *   struct dfd_p2p: dfd_p2p_new's, freed by dfd_p2p_free. struct active: made by the caller
 *   that leads the download (dfd_p2p_fetch), linked in p->active until the download ends,
 *   counted (the leader and the waiters, refs) and freed by the last to let go. struct run: the
 *   leader's, for one download (lead); it owns normal, missing, have, rep and st (download
 *   frees them); parents[] borrow peer and id from normal (valid until the next answer); writer
 *   is one round's (made and freed within dfd__run_round). a->st is a borrowed copy of rd->st,
 *   for dfd_p2p_free to cancel.
 *
 * Threads
 *   The leader is the thread that called dfd_p2p_fetch; it runs the download and each round.
 *   Later callers of the same task wait on p->cv. Within a round (dfd__run_round): one thread
 *   per parent asks it for its pieces (sync), min(concurrent_piece_count, missing pieces)
 *   workers fetch, and the round's piece writer has one thread (piece_writer.h); all of them
 *   are joined before dfd__run_round returns. When a thread cannot be made, the leader does
 *   that thread's work itself.
 *
 * Locks
 *   p->mu guards p->active and every struct active's fields, p->running and p->stopping; p->cv
 *   (on p->mu) is broadcast when a download ends, when a fetch leaves the engine and when the
 *   engine stops.
 *   rd->mu guards, while round threads run, struct run's fields from normal on and the
 *   parents' syncing, failed, lacked, fetched and vortex_* (written by the sync threads and
 *   the workers); and it is held for
 *   every progress callback (should_stop included) and every send on the scheduler stream
 *   while workers run, so they are serialised as download.h promises. rd->synced (on rd->mu) is
 *   broadcast when a parent reports a piece and when a sync ends. The fields above mu are
 *   the leader's, set before any round thread starts.
 *   Order: p->mu and rd->mu are never held together (stopped takes one, then the other).
 *   Under rd->mu a piece is reported to the caller (progress->piece, which may lock the
 *   caller's stream) and then to the scheduler (its stream's send); under p->mu only a
 *   download's scheduler stream is cancelled. A piece's bytes are fetched and written with no
 *   lock of ours held.
 */
#ifndef DFD_P2P_DOWNLOAD_INTERNAL_H
#define DFD_P2P_DOWNLOAD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/id.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download.h"
#include "p2p/verify.h"
#include "storage/storage.h"

/* Parents used per round (the scheduler's candidateParentLimit defaults to 3). */
#define DFD_P2P_MAX_PARENTS 16
/* Parents one download sets aside for bytes that failed verification. */
#define DFD_P2P_MAX_EXCLUDED 16
#define IP_MAX               64

struct active {
    char id[DFD_TASK_ID_LEN + 1];
    bool done;
    int result;
    struct dfc_error err;
    unsigned refs;             /* the leader and the waiters */
    struct dfc_rpc_stream *st; /* the scheduler stream, for dfd_p2p_free to cancel (p->mu) */
    bool leader_cancelled;     /* the leader's caller went away: a waiter may lead again */
    struct active *next;
};

struct dfd_p2p {
    struct dfd_storage *storage;
    struct dfd_p2p_opts o; /* a copy; its strings, counters and o.sched.s borrowed */
    char host_id[DFD_PEER_ID_MAX];
    struct dfc_rpc_client_method sync_pieces;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast when a download ends and when the engine stops */
    struct active *active;
    unsigned running; /* fetches inside the engine */
    bool stopping;
};

struct parent {
    const Common__V2__PersistentCachePeer *peer; /* in the scheduler's response (rd->normal) */
    const char *id;
    const char *host_id;  /* its host's id, or its peer id when the host has none */
    char host_ip[IP_MAX]; /* its DfdaemonUpload */
    uint16_t host_port;
    char vortex_ip[IP_MAX]; /* from its SyncPersistentCachePieces answers */
    uint16_t vortex_port;
    bool syncing;     /* its SyncPersistentCachePieces still runs (rd->mu) */
    bool failed;      /* a sync or a piece failed on it this round */
    bool lacked;      /* it did not report every missing piece */
    bool excluded;    /* it served bytes that failed verification: never tried again */
    unsigned fetched; /* pieces taken from it this round */
};

struct run {
    struct dfd_p2p *p;
    const struct dfd_p2p_request *req;
    const struct dfd_p2p_progress *prog;
    struct active *a;
    char peer_id[DFD_PEER_ID_MAX];
    uint64_t piece_length, content_length;
    uint32_t piece_count;
    struct dfd_replica *rep;
    struct dfd_piece_writer *writer; /* this round's, when the pieces stream into rep */
    struct dfc_rpc_stream *st;
    bool sent_started; /* DownloadPersistentCachePeerStarted */

    /* Verification (verify.h, docs/integrity.md), the leader's: the importers' records, those
     * that failed the end check in an earlier attempt, the one in use (n_records: none), the
     * scheduler's tag and application (the id rule), and per piece its digest for the replica's
     * row (the record's, or the prefix hash's). */
    const dfd_digest_record *const *records;
    size_t n_records;
    bool *bad_record;
    size_t rec;
    const char *id_tag, *id_app;
    uint8_t (*got)[DFC_SHA256_LEN];
    struct dfd_prefix_hash *ph; /* without a record: the content's running SHA-256 */
    bool content_failed;        /* the end check failed: the next record may be tried */
    struct dfc_sha256c tail;    /* with a record (mu): the content hash of the checked last
                                   piece, unfinished: the end check's start */

    pthread_mutex_t mu;       /* progress callbacks, stream sends, the fields below */
    ProtobufCMessage *normal; /* the current AnnouncePersistentCachePeerResponse */
    struct parent parents[DFD_P2P_MAX_PARENTS];
    size_t n_parents;
    uint32_t *missing; /* the pieces this round asks for, ascending */
    uint64_t *have;    /* per missing piece: a bit per parent that reported it */
    size_t n_missing, next;
    pthread_cond_t synced; /* broadcast when a parent reports a piece, and when a sync ends */
    bool round_over;       /* a piece failed everywhere, or a fatal error: take no new piece */
    int fatal;             /* a fatal error (storage, caller gone), with fatal_err */
    struct dfc_error fatal_err;
    unsigned written;
    /* Under mu (read by the leader between rounds): the hosts whose bytes failed
     * verification, never taken as parents again in this download. */
    char excluded[DFD_P2P_MAX_EXCLUDED][DFD_PEER_ID_MAX];
    size_t n_excluded;
};

/* Takes the usable parents of a Normal response into rd->parents: an id, a host with a valid
 * IP and port, not ourselves, not excluded, at most DFD_P2P_MAX_PARENTS. The leader's,
 * between rounds. */
void dfd__take_parents(struct run *rd, const Scheduler__V2__NormalPersistentCacheTaskResponse *n);

/* One round against rd->parents, on the leader: the syncs and the workers run and are joined.
 * Returns 0 (pieces may still be missing) or a fatal error (storage, the caller gone, a
 * progress callback's or a report's error). */
int dfd__run_round(struct run *rd, struct dfc_error *err);

#endif /* DFD_P2P_DOWNLOAD_INTERNAL_H */
