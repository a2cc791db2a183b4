/*
 * download_watch.c - the leader's watch over a P2P download's swarm (download_internal.h):
 * more parents asked of the scheduler while few are usable, a swarm that no parent can move
 * asked for new ones (scheduler.maxScheduleCount times at most), and parents whose piece list
 * failed synced again after their cool-down. The swarm itself is download_round.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download_internal.h"

#define GROW_TARGET      12                    /* usable parents wanted */
#define GROW_INTERVAL_NS (500 * DFC_NS_PER_MS) /* between two requests for more parents, */
/* Doubling while answers bring none, up to this: a crowd smaller than GROW_TARGET asks for
 * the whole download, a second apart, and gains a peer at the latest a second after the
 * scheduler's random draw offers it (with 4 s, N=8 in hack/bench/swarm.sh: 1.43-1.52x the
 * bound; with 1 s: 1.41-1.47x). */
#define GROW_INTERVAL_MAX_NS (1 * DFC_NS_PER_SEC)
#define STUCK_NS             (3 * DFC_NS_PER_SEC) /* no parent reported a piece: ask */
#define WATCH_TICK_NS        (100 * DFC_NS_PER_MS)

/* Asks the scheduler for parents (Reschedule naming the parents given up on, whole as the
 * scheduler sent them, which it then blocks for this peer) and takes
 * those of its answer; the leader's, without rd->mu. Returns the count added, or an error of
 * the stream (the scheduler is then lost, and the swarm goes on with what it has). */
static int ask_parents(struct run *rd, const char *why, struct dfc_error *err) {
    Common__V2__PersistentCachePeer *list[DFD_P2P_MAX_PARENTS];
    size_t n = 0;
    pthread_mutex_lock(&rd->mu);
    if (rd->sched_lost) {
        pthread_mutex_unlock(&rd->mu);
        return dfc_error_set(err, -ENOTCONN, "the scheduler stream is lost");
    }
    for (size_t k = 0; k < rd->n_parents; k++) {
        struct parent *pa = &rd->parents[k];
        if (dfd__given_up(pa)) {
            list[n++] = pa->pe;
        }
    }
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    int r = sc->peer_reschedule(sc->s, rd->st, rd->req->task_id, rd->peer_id, list, n, why, err);
    if (r < 0) {
        dfd__sched_lost(rd, err);
    }
    pthread_mutex_unlock(&rd->mu);
    if (r < 0) {
        return r;
    }
    ProtobufCMessage *msg = NULL;
    r = dfc_rpc_stream_recv(
        rd->st, &scheduler__v2__announce_persistent_cache_peer_response__descriptor, &msg, err);
    if (r == 0) {
        r = dfc_error_set(err, DFC_E_ABORTED, "the scheduler ended the stream");
    }
    pthread_mutex_lock(&rd->mu);
    if (r < 0) {
        dfd__sched_lost(rd, err);
        pthread_mutex_unlock(&rd->mu);
        return r;
    }
    const Scheduler__V2__AnnouncePersistentCachePeerResponse *m = (const void *)msg;
    size_t before = rd->n_parents, added = 0;
    if (m->response_case ==
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_NORMAL_PERSISTENT_CACHE_TASK_RESPONSE) {
        added = dfd__take_parents(rd, m->normal_persistent_cache_task_response);
    }
    for (size_t k = before; k < rd->n_parents; k++) {
        dfd__start_sync(rd, k);
    }
    dfd__keep_answer(rd, msg, added);
    pthread_cond_broadcast(&rd->synced);
    pthread_mutex_unlock(&rd->mu);
    return (int)added;
}

/* rd->mu held: what the leader should do now. */
enum watch { WATCH_WAIT, WATCH_GROW, WATCH_STUCK };

static enum watch watch_state(struct run *rd, int64_t now, int64_t last_ask, unsigned fruitless) {
    size_t n_usable = 0;
    bool holder = false, syncing = false;
    for (size_t k = 0; k < rd->n_parents; k++) {
        const struct parent *pa = &rd->parents[k];
        if (dfd__given_up(pa)) {
            continue;
        }
        n_usable++;
        syncing = syncing || pa->syncing;
        for (uint32_t i = 0; !holder && pa->n_have > 0 && i < rd->piece_count; i++) {
            holder = rd->state[i] == PIECE_MISSING && (rd->have[i] & (UINT32_C(1) << k)) != 0;
        }
    }
    if (n_usable == 0 ||
        (rd->n_inflight == 0 && !holder && (!syncing || now - rd->progress_ns >= STUCK_NS) &&
         now - last_ask >= STUCK_NS)) {
        return WATCH_STUCK;
    }
    int64_t interval = GROW_INTERVAL_NS;
    for (unsigned i = 0; i < fruitless && interval < GROW_INTERVAL_MAX_NS; i++) {
        interval *= 2;
    }
    if (n_usable < GROW_TARGET && now - last_ask >= interval && !rd->sched_lost) {
        return WATCH_GROW;
    }
    return WATCH_WAIT;
}

/* Resyncs parents whose sync failed, once they cooled down; rd->mu held. */
static void resync(struct run *rd, int64_t now) {
    for (size_t k = 0; k < rd->n_parents; k++) {
        struct parent *pa = &rd->parents[k];
        if (!pa->syncing && pa->sync_failures > 0 && !dfd__given_up(pa) &&
            now >= pa->cooldown_until && pa->n_have < rd->piece_count) {
            dfd__start_sync(rd, k);
        }
    }
}

/* The leader's watch until the swarm is over: more parents, stuck swarms, resyncs. */
void dfd__watch(struct run *rd) {
    uint64_t max = rd->p->o.max_schedule_count;
    int64_t last_ask = dfc_mono_ns();
    unsigned fruitless = 0;
    pthread_mutex_lock(&rd->mu);
    while (!rd->over) {
        if (rd->n_written == rd->piece_count) {
            /* Every piece is written (the commit checks each one again). */
            rd->over = true;
            pthread_cond_broadcast(&rd->synced);
            break;
        }
        /* The engine stops (dfdaemon exits) or the caller went away: the swarm ends now, not
         * when its parents fail (a parent that accepts and never answers holds a piece list
         * for its whole timeout, and a replica pull has no caller to go away). */
        pthread_mutex_unlock(&rd->mu);
        bool stop = dfd__stopped(rd);
        pthread_mutex_lock(&rd->mu);
        if (rd->over) {
            break;
        }
        if (stop) {
            struct dfc_error err;
            dfc_error_set(&err, -ECANCELED, "task %s: the download was cancelled",
                          rd->req->task_id);
            dfd__set_fatal(rd, -ECANCELED, &err);
            break;
        }
        int64_t now = dfc_mono_ns();
        resync(rd, now);
        enum watch w = watch_state(rd, now, last_ask, fruitless);
        if (w == WATCH_WAIT) {
            struct timespec dl = dfc_deadline_after(WATCH_TICK_NS);
            pthread_cond_timedwait(&rd->watch, &rd->mu, &dl);
            continue;
        }
        struct dfc_error err;
        if (w == WATCH_STUCK && (rd->sched_lost || ++rd->rounds >= max)) {
            dfc_error_set(&err, DFC_E_ABORTED,
                          "task %s: max schedule count exceeded (%" PRIu64
                          " answers; %u of %u pieces missing, no parent has them)",
                          rd->req->task_id, rd->rounds, rd->piece_count - rd->n_written,
                          rd->piece_count);
            if (rd->sched_lost) {
                dfc_error_set(&err, DFC_E_ABORTED,
                              "task %s: %u of %u pieces missing, no parent has them and the "
                              "scheduler is lost",
                              rd->req->task_id, rd->piece_count - rd->n_written, rd->piece_count);
            }
            dfd__set_fatal(rd, DFC_E_ABORTED, &err);
            break;
        }
        char why[128];
        snprintf(why, sizeof(why), "%s: %u of %u pieces missing, %zu parents",
                 w == WATCH_STUCK ? "no parent can go on" : "more parents wanted",
                 rd->piece_count - rd->n_written, rd->piece_count, rd->n_parents);
        if (w == WATCH_STUCK) {
            DFC_LOG(DFC_LOG_INFO, "p2p.reschedule", "task_id=%s %s", rd->req->task_id, why);
        }
        pthread_mutex_unlock(&rd->mu);
        int added = ask_parents(rd, why, &err);
        pthread_mutex_lock(&rd->mu);
        last_ask = dfc_mono_ns();
        fruitless = added > 0 ? 0 : fruitless + 1;
    }
    pthread_mutex_unlock(&rd->mu);
}
