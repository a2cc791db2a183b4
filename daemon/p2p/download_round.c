/*
 * download_round.c - the swarm of one P2P download (download_internal.h): the parents' piece
 * lists, the piece workers, each piece's choice, fetch, check and write, its report to the
 * caller and the scheduler. The leader's watch (more parents, stuck swarms) is
 * download_watch.c's; the table of downloads and a download's course are download.c's.
 *
 * DESIGN
 *   Parents come from the scheduler's answers and stay for the whole download (at most
 *   DFD_P2P_MAX_PARENTS). Each is asked which of our pieces it has (SyncPersistentCachePieces on
 *   its DfdaemonUpload TCP port) on a thread of its own; a parent with the task committed answers
 *   in one pass, one still downloading it keeps its stream open and reports each piece as it
 *   lands and is verified (docs/swarm.md), so the lists grow while we download
 *   (download_parents.c).
 *
 *   concurrent_piece_count workers each take the next (piece, parent) by piece_choice.h's
 *   rules: the rarest missing piece a parent with room holds (at random for the first
 *   OPENING_PIECES), from the holder with the fewest pieces only it holds, then the fastest;
 *   a parent with pieces only it holds (in a flash crowd, the seed) is kept for them.
 *
 *   A parent already sending a piece to another peer answers Busy (vortex_server.c): the piece
 *   is not asked of it again for BUSY_NS, other pieces are taken meanwhile, and by then the
 *   peer that received it may serve it. Not a failure: no cool-down, nothing reported. A piece
 *   whose parent fails (connect, a stall of PARENT_IDLE_NS, a timeout, a CRC) goes back to the
 *   missing ones and the parent cools down (1 s, doubling up to 8 s), reported
 *   DownloadPieceFailed{temporary = true} at its third failure in a row; a parent whose bytes
 *   fail verification is excluded for the download and reported temporary = false. When every
 * missing piece is in flight an idle worker has nothing to take; the pieces in flight come back if
 * their parents stall, so the end is bounded by PARENT_IDLE_NS.
 *
 *   The bytes stream in 1 MiB chunks, CRC'd on the way, into buffers of the swarm's piece writer,
 *   whose one thread writes them into the replica (piece_writer.h: no two threads contend for
 *   the spool's inode lock); when the caller wants each piece's bytes, a worker receives the
 *   whole piece into its own buffer and writes it itself. With a record, each piece is hashed by
 *   its worker as the bytes pass, resumed from the record's digest before it, and judged before
 *   the piece counts as written (verify.h, docs/integrity.md); only then may this node serve it
 *   (dfd_replica_share). Without one, a written piece is handed to the running content hash.
 *
 *   The leader watches (download_watch.c): it asks the scheduler for more parents (Reschedule,
 * blocking only parents that failed for good) while fewer than GROW_TARGET are usable, every
 *   GROW_INTERVAL_NS, doubling up to GROW_INTERVAL_MAX_NS while answers bring none (the crowd
 *   grows and nodes finish: a later answer may bring a new copy); and when no parent
 *   can go on (none usable, or nothing in flight, none holding a missing piece and no parent
 *   reporting a piece for STUCK_NS) it asks too, scheduler.maxScheduleCount times in all before
 *   the download fails. A sync that failed is started again after its parent's cool-down, at
 *   most SYNC_TRIES times. A send on the scheduler stream that fails (the scheduler restarted)
 *   ends the reports, not the download: the parents known go on serving it.
 *
 *   Everything a remote peer sends is bounded here: at most DFD_P2P_MAX_PARENTS parents, each
 *   with a valid IP and port; a reported piece number must be one we asked for, its offset and
 *   length must be our geometry's, and a parent gets at most as many answers read as pieces it
 *   was asked for; a piece's bytes are read into a buffer sized by our geometry
 *   (dfd_vortex_fetch checks the parent's metadata against it, and the CRC).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/digest.h"
#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_client.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download_internal.h"
#include "p2p/piece_writer.h"
#include "p2p/vortex_client.h"

#define OPENING_PIECES  4 /* chosen at random, before rarest-first */
#define REPORT_FAILURES 3 /* failed pieces in a row: told the scheduler */
#define WATCH_TICK_NS   (100 * DFC_NS_PER_MS)
#define OPEN_WAIT_NS    (100 * DFC_NS_PER_MS) /* for the first parents' first answers */
#define RATE_WEIGHT     0.3                   /* of the newest piece in a parent's rate */
/* A parent that answered Busy for a piece is not asked for it again before this. */
#define BUSY_NS (250 * DFC_NS_PER_MS)

/* ---- choosing ---- */

/* rd->mu held: whether parent k may be given a piece now (not counting its load). */
static bool usable(const struct run *rd, size_t k, int64_t now) {
    const struct parent *pa = &rd->parents[k];
    return !dfd__given_up(pa) && now >= pa->cooldown_until && pa->vortex_ip[0] != '\0';
}

/* rd->mu held: the next (piece, parent) for a worker (piece_choice.h); none during the first
 * OPEN_WAIT_NS while a parent's first answer is awaited (as upstream collects for 100 ms), so
 * the first pieces spread over the parents and rarest-first sees them. False: nothing to take
 * now. */
static bool choose(struct run *rd, int64_t now, size_t *ret_k, uint32_t *ret_piece) {
    for (size_t k = 0; now - rd->opened_ns < OPEN_WAIT_NS && k < rd->n_parents; k++) {
        if (rd->parents[k].syncing && rd->parents[k].n_have == 0) {
            return false;
        }
    }
    struct dfd_choice_parent cp[DFD_P2P_MAX_PARENTS];
    for (size_t k = 0; k < rd->n_parents; k++) {
        const struct parent *pa = &rd->parents[k];
        cp[k] = (struct dfd_choice_parent){.live = !dfd__given_up(pa),
                                           .usable = usable(rd, k, now),
                                           .inflight = pa->inflight,
                                           .n_have = pa->n_have,
                                           .rate = pa->rate};
    }
    struct dfd_choice c = {.parents = cp,
                           .n_parents = rd->n_parents,
                           .state = rd->state,
                           .have = rd->have,
                           .avoid = rd->avoid,
                           .piece_count = rd->piece_count,
                           .concurrent_piece_count = rd->p->o.concurrent_piece_count,
                           .opening = rd->n_written < OPENING_PIECES,
                           .now = now,
                           .rng = &rd->rng};
    return dfd_choose_piece(&c, ret_k, ret_piece);
}

/* ---- fetching ---- */

/* rd->mu held: pa served piece number with bytes no record has (a lie, or a corrupt copy):
 * reported to the scheduler with temporary = false (it stops offering pa's host for the task)
 * and never tried again in this download. */
static void exclude(struct run *rd, struct parent *pa, uint32_t number) {
    pa->excluded = true;
    if (!dfd__excluded_host(rd, pa->host_id) && rd->n_excluded < DFD_P2P_MAX_EXCLUDED) {
        memcpy(rd->excluded[rd->n_excluded++], pa->host_id, sizeof(pa->host_id));
    }
    if (pa->sync_st != NULL) {
        dfc_rpc_stream_cancel(pa->sync_st);
    }
    dfd__report_piece_failed(rd, number, pa->id, false);
}

/* Fetches piece number from parent k (the worker marked it in flight): written and reported,
 * or back among the missing ones. */
static void fetch_piece(struct run *rd, size_t k, uint32_t number, struct worker_buf *wb) {
    struct parent *pa = &rd->parents[k];
    struct dfc_error err;
    int r;
    bool ours = true;
    enum piece_verdict verdict = PIECE_OK;
    struct dfd_vortex_fetched got = {0};
    if (dfd__stopped(rd)) {
        r = dfc_error_set(&err, -ECANCELED, "the download was cancelled");
    } else {
        r = dfd__fetch_from(rd, pa, number, wb, &got, &ours, &verdict, &err);
    }
    if (r == DFC_E_DATA_LOSS && verdict == PIECE_OK) {
        dfc_metric_inc(rd->p->o.crc_failures, 0, 1);
    }
    bool given_up = r < 0 && __atomic_load_n(&wb->cancel, __ATOMIC_RELAXED);
    bool busy = r == -EBUSY && !ours; /* the parent is sending it to another peer right now */
    if (r < 0 && !ours && !given_up && !busy) {
        DFC_LOG(DFC_LOG_WARN, "p2p.piece_failed",
                "task_id=%s piece=%u parent=%s code=%s error=\"%s\", trying another parent",
                rd->req->task_id, (unsigned)number, pa->id, dfc_error_name(r), dfc_error_msg(&err));
    }
    int64_t now = dfc_mono_ns();
    pthread_mutex_lock(&rd->mu);
    pa->inflight--;
    rd->n_inflight--;
    if (r == 0) {
        rd->state[number] = PIECE_WRITTEN;
        rd->n_written++;
        rd->progress_ns = now;
        pa->fetched++;
        pa->failures = 0;
        if (got.cost_ns > 0) {
            double rate = (double)dfd__piece_len(rd, number) * 1e9 / (double)got.cost_ns;
            pa->rate = pa->rate > 0 ? (1 - RATE_WEIGHT) * pa->rate + RATE_WEIGHT * rate : rate;
        }
        dfc_metric_inc(rd->p->o.fetched_pieces, 0, 1);
        dfc_metric_inc(rd->p->o.fetched_bytes, 0, dfd__piece_len(rd, number));
        r = dfd__report_piece(rd, number, wb->whole ? wb->buf : NULL, got.crc32, pa, got.cost_ns,
                              &err);
        if (r < 0) {
            dfd__set_fatal(rd, r, &err); /* the caller went away: not the parent's failure */
        } else if (rd->n_written == rd->piece_count) {
            rd->over = true; /* every piece written */
        }
    } else if (ours) {
        rd->state[number] = PIECE_MISSING;
        dfd__set_fatal(rd, r, &err);
    } else if (given_up) {
        rd->state[number] = PIECE_MISSING; /* the endgame took it away: not the parent's fault */
    } else if (busy) {
        /* Not a failure: the peer receiving it will have it soon; until then other pieces. */
        rd->state[number] = PIECE_MISSING;
        rd->avoid[number] = (struct avoid){.parent = (uint8_t)(k + 1), .until_ns = now + BUSY_NS};
    } else {
        rd->state[number] = PIECE_MISSING;
        dfd__cool_down(pa, ++pa->failures, now);
        if (verdict == PIECE_LIE) {
            exclude(rd, pa, number);
        } else if (pa->failures == REPORT_FAILURES) {
            /* Once per run of failures: the scheduler then stops offering it to us (it blocks
             * the parent for this peer); we go on trying it after its cool-downs. */
            dfd__report_piece_failed(rd, number, pa->id, true);
        }
    }
    if (rd->over) { /* else this worker takes the next piece itself */
        pthread_cond_broadcast(&rd->synced);
        pthread_cond_broadcast(&rd->watch);
    }
    pthread_mutex_unlock(&rd->mu);
    if (r == 0 && rd->ph != NULL) {
        dfd_prefix_hash_piece(rd->ph, number); /* written: the prefix may read it */
    }
}

static bool whole_pieces(const struct run *rd) {
    return rd->prog != NULL && rd->prog->piece_data;
}

/* rd->mu held, every missing piece in flight and worker wb idle: the endgame. Finds the
 * piece in flight that another parent with room (it has the piece) would deliver in less than
 * half the time its own parent still needs at the pace seen so far, and asks its worker to give
 * it up (the bytes received so far are dropped; the piece goes back to the missing ones with
 * its parent to avoid, and the next choice takes it from a faster one). Returns whether one was
 * given up. */
static bool endgame(struct run *rd, const struct worker_buf *wb, int64_t now) {
    double fastest = 0;
    for (size_t k = 0; k < rd->n_parents; k++) {
        fastest = rd->parents[k].rate > fastest ? rd->parents[k].rate : fastest;
    }
    if (fastest <= 0) {
        return false; /* nothing measured yet: no basis for a choice */
    }
    struct worker_buf *victim = NULL;
    double best_gain = 0;
    for (size_t w = 0; w < rd->n_wbs; w++) {
        struct worker_buf *o = &rd->wbs[w];
        if (o == wb || !o->busy || o->whole || __atomic_load_n(&o->cancel, __ATOMIC_RELAXED)) {
            continue;
        }
        double len = (double)dfd__piece_len(rd, o->number);
        double done = (double)__atomic_load_n(&o->done, __ATOMIC_RELAXED);
        double elapsed = (double)(now - o->started_ns) / 1e9;
        if (elapsed < 0.2 || done >= len) {
            continue; /* just started, or being written */
        }
        double left = done > 0 ? (len - done) * elapsed / done : (double)PARENT_IDLE_NS / 1e9;
        for (size_t k = 0; k < rd->n_parents; k++) {
            const struct parent *pa = &rd->parents[k];
            if (k == o->k || !usable(rd, k, now) ||
                (rd->have[o->number] & (UINT32_C(1) << k)) == 0) {
                continue;
            }
            double t = len / (pa->rate > 0 ? pa->rate : fastest) * (pa->inflight + 1);
            if (left > 2 * t && left - t > best_gain) {
                best_gain = left - t;
                victim = o;
            }
        }
    }
    if (victim == NULL) {
        return false;
    }
    __atomic_store_n(&victim->cancel, 1, __ATOMIC_RELAXED);
    rd->avoid[victim->number] = (struct avoid){.parent = (uint8_t)(victim->k + 1), .until_ns = 0};
    DFC_LOG(DFC_LOG_DEBUG, "p2p.endgame", "task_id=%s piece=%u parent=%s, asking a faster one",
            rd->req->task_id, (unsigned)victim->number, rd->parents[victim->k].id);
    return true;
}

static void *worker_main(void *arg) {
    struct worker_buf *wb = arg;
    struct run *rd = wb->rd;
    wb->whole = whole_pieces(rd);
    wb->len = wb->whole ? (size_t)rd->piece_length : STREAM_CHUNK;
    wb->buf = wb->whole ? malloc(wb->len) : NULL; /* streamed: the writer's buffers */
    bool sha = dfc_sha256c_init(&wb->sha) == 0;
    pthread_mutex_lock(&rd->mu);
    if ((wb->whole && wb->buf == NULL) || !sha) {
        struct dfc_error e;
        dfc_error_set(&e, -ENOMEM, "out of memory for a piece buffer");
        dfd__set_fatal(rd, -ENOMEM, &e);
    }
    while (!rd->over) {
        size_t k = 0;
        uint32_t number = 0;
        int64_t now = dfc_mono_ns();
        if (!choose(rd, now, &k, &number)) {
            if (rd->n_written + rd->n_inflight == rd->piece_count && rd->n_inflight > 0) {
                (void)endgame(rd, wb, now);
            }
            struct timespec dl = dfc_deadline_after(WATCH_TICK_NS);
            pthread_cond_timedwait(&rd->synced, &rd->mu, &dl);
            continue;
        }
        rd->state[number] = PIECE_INFLIGHT;
        /* should this attempt fail, its old parent is fine again */
        rd->avoid[number] = (struct avoid){0};
        rd->parents[k].inflight++;
        rd->n_inflight++;
        wb->busy = true;
        wb->number = number;
        wb->k = k;
        wb->started_ns = now;
        __atomic_store_n(&wb->done, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&wb->cancel, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&rd->mu);
        fetch_piece(rd, k, number, wb);
        pthread_mutex_lock(&rd->mu);
        wb->busy = false;
    }
    pthread_mutex_unlock(&rd->mu);
    free(wb->buf);
    wb->buf = NULL;
    dfc_sha256c_done(&wb->sha);
    return NULL;
}

/* ---- the swarm ---- */

int dfd__swarm(struct run *rd, struct dfc_error *err) {
    uint32_t count = rd->piece_count;
    size_t n_missing = dfd_replica_missing(rd->rep, rd->missing, count);
    memset(rd->state, PIECE_WRITTEN, count);
    for (size_t i = 0; i < n_missing; i++) {
        rd->state[rd->missing[i]] = PIECE_MISSING;
    }
    memset(rd->have, 0, count * sizeof(*rd->have));
    rd->n_written = count - (uint32_t)n_missing;
    rd->n_inflight = 0;
    rd->over = n_missing == 0;
    rd->progress_ns = rd->opened_ns = dfc_mono_ns();
    rd->rng = (uint64_t)rd->progress_ns | 1;
    if (dfd__stopped(rd)) {
        return dfc_error_set(err, -ECANCELED, "the download was cancelled");
    }
    size_t n = rd->p->o.concurrent_piece_count;
    n = n > n_missing ? n_missing : n;
    pthread_t *tids = calloc(n ? n : 1, sizeof(*tids));
    rd->wbs = calloc(n ? n : 1, sizeof(*rd->wbs));
    rd->n_wbs = n;
    if (tids == NULL || rd->wbs == NULL) {
        free(tids);
        free(rd->wbs);
        rd->wbs = NULL;
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        rd->wbs[i].rd = rd;
    }
    memset(rd->avoid, 0, count * sizeof(*rd->avoid));
    int r = 0;
    if (n > 0 && !whole_pieces(rd)) {
        r = dfd_piece_writer_new(rd->rep, n * WRITER_BUFS_PER_WORKER, STREAM_CHUNK, &rd->writer,
                                 err);
    }
    if (r < 0) {
        free(tids);
        free(rd->wbs);
        rd->wbs = NULL;
        return r;
    }
    pthread_mutex_lock(&rd->mu);
    for (size_t k = 0; k < rd->n_parents && !rd->over; k++) {
        dfd__start_sync(rd, k);
    }
    pthread_mutex_unlock(&rd->mu);
    size_t started = 0;
    for (; started < n; started++) {
        if (pthread_create(&tids[started], NULL, worker_main, &rd->wbs[started]) != 0) {
            break;
        }
    }
    if (started == 0 && n > 0) {
        worker_main(&rd->wbs[0]); /* no thread could be made: fetch on this one */
    } else {
        dfd__watch(rd);
    }
    for (size_t i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
    }
    free(tids);
    pthread_mutex_lock(&rd->mu);
    free(rd->wbs);
    rd->wbs = NULL;
    rd->n_wbs = 0;
    rd->over = true;
    for (size_t k = 0; k < rd->n_parents; k++) {
        if (rd->parents[k].sync_st != NULL) {
            dfc_rpc_stream_cancel(rd->parents[k].sync_st); /* a parent still downloading */
        }
    }
    pthread_mutex_unlock(&rd->mu);
    for (size_t k = 0; k < rd->n_parents; k++) {
        if (rd->parents[k].sync_started) {
            pthread_join(rd->parents[k].sync_th, NULL);
            rd->parents[k].sync_started = false;
        }
    }
    dfd_piece_writer_free(rd->writer); /* every job was waited for by its worker */
    rd->writer = NULL;
    if (rd->fatal < 0) {
        *err = rd->fatal_err;
        return rd->fatal;
    }
    return 0;
}
