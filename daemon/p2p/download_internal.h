/*
 * download_internal.h - what download.c (the table of downloads in progress and one download's
 * course: stat, replica, register, the swarm, commit) and download_round.c (the swarm: the
 * parents' piece lists, the piece workers, each piece's choice), download_piece.c (one piece's
 * fetch, check, write and report) and download_watch.c (the leader's watch: the scheduler
 * asked for more parents) share. Private to daemon/p2p.
 *
 * Ownership
 *   struct dfd_p2p: dfd_p2p_new's, freed by dfd_p2p_free. struct active: made by the caller
 *   that leads the download (dfd_p2p_fetch), linked in p->active until the download ends,
 *   counted (the leader and the waiters, refs) and freed by the last to let go. struct run: the
 *   leader's, for one download (lead); it owns answers, state, have, missing, rep and st
 *   (download frees them); parents[] are copies (their strings live in the struct; pe points
 *   into answers); writer is the swarm's (made and freed within dfd__swarm). a->st is a
 *   borrowed copy of rd->st, for dfd_p2p_free to cancel.
 *
 * Threads
 *   The leader is the thread that called dfd_p2p_fetch; it runs the download and its swarm.
 *   Later callers of the same task wait on p->cv. Within the swarm (dfd__swarm): one thread
 *   per parent reads its piece list as it grows (sync), min(concurrent_piece_count, pieces)
 *   workers fetch, the piece writer has one thread (piece_writer.h), and the leader watches
 *   and asks the scheduler for more parents (it alone receives on the scheduler stream); all
 *   of them are joined before dfd__swarm returns. When a thread cannot be made, the leader
 *   does that thread's work itself.
 *
 * Locks
 *   p->mu guards p->active and every struct active's fields, p->running and p->stopping; p->cv
 *   (on p->mu) is broadcast when a download ends, when a fetch leaves the engine and when the
 *   engine stops.
 *   rd->mu guards, while swarm threads run, struct run's fields from answers on and the
 *   parents' fields from sync_st on; and it is held for every progress callback (should_stop
 *   included) and every send on the scheduler stream while workers run, so they are
 *   serialised as download.h promises. rd->synced (on rd->mu) is broadcast on every change a
 *   worker may wait for. The fields above mu are the leader's, set before any swarm thread
 *   starts; a parent's strings are written before n_parents counts it and never change.
 *   Order: p->mu and rd->mu are never held together (stopped takes one, then the other).
 *   Under rd->mu a piece is reported to the caller (progress->piece, which may lock the
 *   caller's stream) and then to the scheduler (its stream's send); under p->mu only a
 *   download's scheduler stream is cancelled. A piece's bytes are fetched and written, and the
 *   scheduler's answers received, with no lock of ours held.
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
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download.h"
#include "p2p/piece_choice.h"
#include "p2p/verify.h"
#include "p2p/vortex_client.h"
#include "storage/storage.h"

/* Parents one download uses at most (each answer of the scheduler adds up to
 * scheduler.candidateParentLimit, 3 by default). */
#define DFD_P2P_MAX_PARENTS 16
_Static_assert(DFD_P2P_MAX_PARENTS <= DFD_CHOICE_MAX_PARENTS, "a bit per parent in rd->have");
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

/* A parent of this download: copied out of the scheduler's answers (which are freed as the
 * next one comes), kept for the whole download and never moved (workers index rd->parents). */
struct parent {
    char id[DFD_PEER_ID_MAX];
    char host_id[DFD_PEER_ID_MAX]; /* its host's id, or its peer id when the host has none */
    char host_ip[IP_MAX];          /* its DfdaemonUpload */
    uint16_t host_port;
    char vortex_ip[IP_MAX]; /* from its SyncPersistentCachePieces answers */
    uint16_t vortex_port;
    /* As the scheduler sent it (in one of rd->answers): named whole when we ask the scheduler
     * to block it (a Reschedule's candidate_parents must be whole peers). */
    Common__V2__PersistentCachePeer *pe;
    struct run *rd; /* the download (sync_main's argument) */
    /* The fields below are under rd->mu once its sync thread runs. */
    struct dfc_rpc_stream *sync_st; /* its SyncPersistentCachePieces stream, for cancelling */
    pthread_t sync_th;
    bool sync_started;      /* sync_th was made (joined before another or by dfd__swarm) */
    bool syncing;           /* its SyncPersistentCachePieces stream still runs */
    unsigned sync_failures; /* syncs that failed: past SYNC_TRIES it is given up */
    unsigned failures;      /* pieces that failed on it in a row */
    int64_t cooldown_until; /* after a failure: no piece goes to it before (monotonic ns) */
    bool excluded;          /* it served bytes that failed verification: never tried again */
    unsigned inflight;      /* pieces being fetched from it */
    unsigned fetched;       /* pieces taken from it */
    uint32_t n_have;        /* pieces it reported */
    double rate;            /* bytes per second of its pieces (EWMA); 0: none fetched yet */
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
    struct dfd_piece_writer *writer; /* the swarm's, when the pieces stream into rep */
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

    pthread_mutex_t mu; /* progress callbacks, stream sends, the fields below */
    /* The scheduler's answers that brought parents (each parent's pe points into one; at most
     * one per parent), the leader's: freed with dfd__drop_answers. */
    ProtobufCMessage *answers[DFD_P2P_MAX_PARENTS];
    size_t n_answers;
    struct parent parents[DFD_P2P_MAX_PARENTS];
    size_t n_parents;       /* grows as answers add parents; a parent is never removed */
    uint8_t *state;         /* per piece, enum piece_state (piece_choice.h) */
    struct avoid *avoid;    /* per piece: a parent not to ask it from (piece_choice.h) */
    struct worker_buf *wbs; /* the workers' (n_wbs), for the endgame */
    size_t n_wbs;
    uint32_t *have;    /* per piece: a bit per parent that reported it */
    uint32_t *missing; /* scratch for dfd_replica_missing (the leader's) */
    uint32_t n_written, n_inflight;
    pthread_cond_t synced; /* the idle workers': signalled when a parent reports a piece (one
                              worker can take it), broadcast when a sync ends, parents are
                              added or the swarm is over */
    pthread_cond_t watch;  /* the leader's: broadcast when the swarm is over */
    bool over;             /* every piece written, a fatal error, or the swarm gave up */
    int fatal;             /* a fatal error (storage, caller gone), with fatal_err */
    struct dfc_error fatal_err;
    bool sched_lost;     /* a send on the scheduler stream failed: no more reports */
    int64_t progress_ns; /* when the last piece was written or reported by a parent */
    int64_t opened_ns;   /* when the swarm started */
    uint64_t rng;        /* xorshift state: random piece among equals */
    uint64_t rounds;     /* scheduler answers needed because no parent could go on */
    /* Under mu (read by the leader between attempts): the hosts whose bytes failed
     * verification, never taken as parents again in this download. */
    char excluded[DFD_P2P_MAX_EXCLUDED][DFD_PEER_ID_MAX];
    size_t n_excluded;
};

/* A parent silent this long mid-piece is left (vortex_client.h, idle_ns). */
#define PARENT_IDLE_NS (5 * DFC_NS_PER_SEC)

/* A worker's buffer: a whole piece when the caller wants each piece's bytes; else the bytes
 * stream through the round's piece writer, in chunks of STREAM_CHUNK, WRITER_BUFS_PER_WORKER
 * of its buffers per worker (one being received into while another waits to be written).
 * 1 MiB rather than 256 KiB: a quarter of the hand-offs to the writer, and in
 * hack/bench/p2p.sh's fetch (alternating builds, five medians of 5 runs each) 0.635 s
 * against 0.683 s; 2 MiB was no faster. The pool is 16 MiB with the default 8 workers. */
#define STREAM_CHUNK           ((size_t)1024 * 1024)
#define WRITER_BUFS_PER_WORKER 2

struct worker_buf {
    struct run *rd;
    void *buf;
    size_t len;
    bool whole;
    struct dfc_sha256c sha; /* each piece's hash, resumed from the record, as its bytes pass */
    /* The piece in flight, for the endgame (rd->mu): its number, parent and start. */
    bool busy;
    uint32_t number;
    size_t k;
    int64_t started_ns;
    /* Atomics, read by the endgame and written by the worker's sink as chunks pass: bytes of
     * the piece received so far, and a request to give the piece up. */
    uint64_t done;
    int cancel;
};

/* What a piece's bytes are, judged against the records (docs/integrity.md). */
enum piece_verdict {
    PIECE_OK,           /* the record in use has them */
    PIECE_OTHER_RECORD, /* another usable record not known bad has them: not a lie per se */
    PIECE_LIE,          /* no record (but known bad ones) has them */
};

static inline uint64_t dfd__piece_offset(const struct run *rd, uint32_t number) {
    return (uint64_t)number * rd->piece_length;
}

static inline uint64_t dfd__piece_len(const struct run *rd, uint32_t number) {
    uint64_t left = rd->content_length - dfd__piece_offset(rd, number);
    return left < rd->piece_length ? left : rd->piece_length;
}

/* download_piece.c. rd->mu held: the scheduler stream is lost (a send failed): logged once,
 * nothing more is sent on it. */
void dfd__sched_lost(struct run *rd, const struct dfc_error *e);

/* rd->mu held: reports a written piece to the caller (its error is returned: the download
 * fails) and the scheduler (a failed send only loses the scheduler). */
int dfd__report_piece(struct run *rd, uint32_t number, const void *buf, uint32_t crc,
                      const struct parent *pa, uint64_t cost_ns, struct dfc_error *err);

/* rd->mu held: DownloadPieceFailed for piece number from parent_id. */
void dfd__report_piece_failed(struct run *rd, uint32_t number, const char *parent_id,
                              bool temporary);

/* rd->mu held: records a fatal error (the first one wins) and ends the swarm. */
void dfd__set_fatal(struct run *rd, int r, const struct dfc_error *err);

/* One attempt at piece number from pa, no lock held: verified (with a record) and written, or
 * nothing of it kept. *ret_ours tells our failure (storage: fatal) from the parent's, and
 * *ret_verdict a lie from other failures. */
int dfd__fetch_from(struct run *rd, const struct parent *pa, uint32_t number, struct worker_buf *wb,
                    struct dfd_vortex_fetched *got, bool *ret_ours, enum piece_verdict *ret_verdict,
                    struct dfc_error *err);

/* download_parents.c. Takes the usable parents of a Normal response into rd->parents (appended: an
 * id, a host with a valid IP and port, not ourselves, not excluded, not already a parent, at most
 * DFD_P2P_MAX_PARENTS in all); rd->mu held once the swarm runs. Returns how many were added. */
size_t dfd__take_parents(struct run *rd, const Scheduler__V2__NormalPersistentCacheTaskResponse *n);

/* download_parents.c. Keeps msg, an answer of the scheduler, when it brought parents (added > 0:
 * their pe point into it), else frees it; rd->mu held once the swarm runs. */
void dfd__keep_answer(struct run *rd, ProtobufCMessage *msg, size_t added);

/* download_parents.c. Forgets every parent and frees the answers they came from (a new attempt,
 * or the download's end); the leader's, with no swarm thread running. */
void dfd__drop_answers(struct run *rd);

/* A parent's cool-downs after a failure (1 s, doubling up to 8 s), and the failed syncs in a
 * row after which it is given up. */
#define COOLDOWN_NS     (1 * DFC_NS_PER_SEC) /* after a failure, doubling per failure */
#define COOLDOWN_MAX_NS (8 * DFC_NS_PER_SEC)
#define SYNC_TRIES      5 /* failed syncs in a row: the parent given up */

/* Whether parent pa is given up for this download: it lied, or it could not be reached for its
 * piece list SYNC_TRIES times in a row (1 + 2 + 4 + 8 + 8 s of cool-downs). A parent whose
 * pieces fail only cools down: a partition or an overloaded parent heals. */
static inline bool dfd__given_up(const struct parent *pa) {
    return pa->excluded || pa->sync_failures >= SYNC_TRIES;
}

/* download_parents.c. Whether host_id served bytes that failed verification in this download
 * (rd->excluded); rd->mu held once the swarm runs. */
bool dfd__excluded_host(const struct run *rd, const char *host_id);

/* download_parents.c. Parent pa failed for the n-th time in a row: no new piece goes to it
 * for a while (pa->cooldown_until); rd->mu held. */
void dfd__cool_down(struct parent *pa, unsigned n, int64_t now);

/* download_parents.c. Starts parent k's sync on a thread (joining its last one first); rd->mu
 * held. */
void dfd__start_sync(struct run *rd, size_t k);

/* download_piece.c. Whether the engine stops or the caller went away; called without rd->mu
 * (it takes p->mu, then rd->mu). */
bool dfd__stopped(struct run *rd);

/* download_watch.c. The leader's watch until the swarm is over (rd->over): more parents,
 * stuck swarms, resyncs. Takes rd->mu itself. */
void dfd__watch(struct run *rd);

/* The swarm of one download attempt, on the leader, from the parents of the first answer
 * until every piece is written: the parents' piece lists (long-lived syncs), the workers, and
 * the scheduler asked for more parents as needed. Every thread is joined before it returns.
 * Returns 0 (every piece written) or an error: fatal (storage, the caller gone, a progress
 * callback's), or DFC_E_ABORTED when scheduler.maxScheduleCount answers in a row brought no
 * parent able to go on. */
int dfd__swarm(struct run *rd, struct dfc_error *err);

#endif /* DFD_P2P_DOWNLOAD_INTERNAL_H */
