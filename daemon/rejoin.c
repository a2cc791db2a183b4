/*
 * rejoin.c - this node's copies registered again after the scheduler forgot them (see
 * rejoin.h).
 *
 * Each step is one of the calls a dfdaemon makes anyway (StatPersistentCachePeer, the
 * AnnouncePersistentCachePeer stream, UploadPersistentCacheTaskStarted / Finished), so an
 * upstream scheduler takes the join too; only the upload of a Succeeded task with no copy
 * left needs ours (scheduler/rpc_task.c). A joined peer reports no pieces: the scheduler's
 * finished_pieces bitset stays empty, which nothing reads for a Succeeded parent (parents are
 * chosen by state, and the downloader asks each parent for its pieces).
 */
#include "rejoin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/clock.h"
#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "integrity_client.h"
#include "scheduler_client.h"

#define STREAM_TIMEOUT_MS 10000
#define MIN_TTL_NS        (300 * DFC_NS_PER_SEC) /* Started's ttl must be at least 5m */
#define RECENT_NS         (60 * DFC_NS_PER_SEC)  /* a registration of it may be in flight */
#define RETRY_MIN_NS      (5 * DFC_NS_PER_SEC)   /* a pass with tasks waiting: again after */

struct dfd_rejoin {
    struct dfc_thread thread;
    bool kicked; /* under thread.mu */
    struct dfd_sched *sched;
    struct dfd_storage *storage;
    const struct dfd_config *cfg;
};

enum outcome { PRESENT, JOINED, UPLOADED, ABSENT, SKIPPED, WAITING };

/* The scheduler is away: the pass ends (and is tried again later). */
static bool away(int r) {
    return dfd_sched_unreachable(r, NULL);
}

/* Register, Started, Finished on one stream under peer_id: the copy becomes a Succeeded peer
 * of the task. A stream that breaks after the register withdraws the half-made peer. */
static int join(struct dfd_sched *sched, const struct dfd_config *cfg,
                const struct dfd_task_meta *t, const char *peer_id, struct dfc_error *err) {
    struct dfc_rpc_stream *st = NULL;
    int r = dfd_sched_announce_peer_open(sched, t->id, STREAM_TIMEOUT_MS, &st, err);
    if (r < 0) {
        return r;
    }
    const struct dfd_sched_register g = {
        .task_id = t->id,
        .peer_id = peer_id,
        .tag = t->tag,
        .application = t->application,
        .persistent = t->persistent,
        .piece_length = t->piece_length,
        .piece_count = t->piece_count,
        .concurrent_piece_count = (uint32_t)cfg->concurrent_piece_count,
    };
    bool answered = false;
    r = dfd_sched_peer_register(sched, st, &g, err);
    if (r == 0) {
        ProtobufCMessage *msg = NULL;
        r = dfc_rpc_stream_recv(st, dfd_sched_methods(sched)->announce_peer.resp, &msg, err);
        dfc_rpc_msg_free(msg);
        if (r == 0) {
            r = dfc_error_set(err, DFC_E_ABORTED,
                              "scheduler AnnouncePersistentCachePeer ended without an answer");
        } else if (r < 0) {
            dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer");
        } else {
            answered = true; /* the scheduler stored the peer */
            r = dfd_sched_peer_event(sched, st, t->id, peer_id, DFD_SCHED_PEER_STARTED, NULL, err);
            if (r == 0) {
                r = dfd_sched_peer_event(sched, st, t->id, peer_id, DFD_SCHED_PEER_FINISHED, NULL,
                                         err);
            }
            if (r == 0 && (r = dfc_rpc_stream_finish(st, err)) < 0) {
                dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer");
            }
        }
    }
    dfc_rpc_stream_free(st);
    if (r < 0 && answered) {
        dfd_sched_delete_peer(sched, t->id, peer_id);
    }
    return r;
}

/* Started then Finished under peer_id, with the TTL that is left: 1 when too little is left.
 * A failure once Started may have been stored sends Failed, so the task never stays
 * Uploading. */
static int upload_again(struct dfd_sched *sched, const struct dfd_task_meta *t, const char *peer_id,
                        struct dfc_error *err) {
    int64_t left = t->created_at_ns + t->ttl_ns - dfc_clock_now(&dfc_clock_real);
    if (t->ttl_ns <= 0 || left < MIN_TTL_NS) {
        return 1;
    }
    struct dfd_task_meta m = *t; /* a shallow copy: its strings stay t's */
    m.ttl_ns = left / DFC_NS_PER_SEC * DFC_NS_PER_SEC;
    int r = dfd_sched_upload_started(sched, &m, peer_id, err);
    if (r == 0) {
        r = dfd_sched_upload_finished(sched, t->id, peer_id, NULL, err);
    }
    int code = dfc_error_to_grpc(r);
    if (r < 0 && code != DFC_GRPC_ALREADY_EXISTS && code != DFC_GRPC_NOT_FOUND) {
        dfd_sched_upload_failed(sched, t->id, peer_id, dfc_error_msg(err));
    }
    return r;
}

/* Logs a copy registered again (JOINED or UPLOADED) and returns o. */
static int logged(const struct dfd_task_meta *t, const char *peer_id, int o) {
    DFC_LOG(DFC_LOG_INFO, "scheduler.rejoined_task", "task_id=%s peer_id=%s how=%s%s", t->id,
            peer_id, o == JOINED ? "joined" : "uploaded",
            t->register_later ? " (kept local at its import: no scheduler took it)" : "");
    return o;
}

/* This host's peer_id of t at the scheduler: PRESENT when Succeeded, WAITING when a
 * registration of it may be under way, else -ENOENT once no stale record is left. */
static int own_peer(struct dfd_sched *sched, const struct dfd_task_meta *t, const char *peer_id,
                    int64_t now_ns, struct dfc_error *err) {
    Common__V2__PersistentCachePeer *peer = NULL;
    int r = dfd_sched_stat_peer(sched, t->id, peer_id, &peer, err);
    if (r < 0) {
        return r;
    }
    bool done = strcmp(peer->state, "Succeeded") == 0;
    bool uploading = strcmp(peer->state, "Uploading") == 0;
    dfc_rpc_msg_free(&peer->base);
    if (done) {
        return PRESENT;
    }
    if (now_ns - t->finished_at_ns < RECENT_NS) {
        return WAITING; /* an import's Finished, or a pull's, may still be on its way */
    }
    /* A registration that broke off: an upload whose Finished never came is failed first (a
     * task left Uploading with no uploader could never be uploaded again), then redone. */
    if (uploading) {
        dfd_sched_upload_failed(sched, t->id, peer_id, "the uploader's Finished never came");
    }
    dfd_sched_delete_peer(sched, t->id, peer_id);
    return -ENOENT;
}

/* The outcome for t (peer_id: its row's, chosen before the first call for a register_later
 * copy), or a negative error (err set). */
static int rejoin_one(struct dfd_sched *sched, const struct dfd_config *cfg,
                      const struct dfd_task_meta *t, const char *peer_id, struct dfc_error *err) {
    int r = own_peer(sched, t, peer_id, dfc_clock_now(&dfc_clock_real), err);
    if (r != -ENOENT) {
        return r;
    }
    Common__V2__PersistentCacheTask *st = NULL;
    r = dfd_sched_stat_task(sched, t->id, &st, err);
    bool upload;
    if (r == -ENOENT) {
        /* Deleted there (or expired) since this copy was registered: left alone. Never
         * registered: new there. */
        if (!t->register_later) {
            return ABSENT;
        }
        upload = true;
    } else if (r < 0) {
        return r;
    } else {
        bool succeeded = strcmp(st->state, "Succeeded") == 0 && dfd_sched_same_geometry(st, t);
        upload = strcmp(st->state, "Failed") == 0;
        bool uploading = strcmp(st->state, "Uploading") == 0;
        dfc_rpc_msg_free(&st->base);
        if (uploading) {
            return WAITING; /* another upload of it is under way */
        }
        if (succeeded) {
            r = join(sched, cfg, t, peer_id, err);
            if (r == 0) {
                return logged(t, peer_id, JOINED);
            }
            if (dfc_error_to_grpc(r) != DFC_GRPC_FAILED_PRECONDITION) {
                return r;
            }
            upload = true; /* "no candidate parents found": this is the only copy left */
        }
    }
    if (!upload) {
        return SKIPPED; /* another geometry under this id */
    }
    r = upload_again(sched, t, peer_id, err);
    if (r == 1) {
        return SKIPPED; /* too little TTL left */
    }
    if (r < 0) {
        return dfc_error_to_grpc(r) == DFC_GRPC_ALREADY_EXISTS ? WAITING : r;
    }
    return logged(t, peer_id, UPLOADED);
}

/* After a join or an upload: the row keeps the peer (a register_later row's mark goes, and a
 * copy that was not persistent becomes so: the scheduler counts an uploader's copy as
 * persistent); a copy deleted or imported again meanwhile gets the peer withdrawn. */
static void settle(struct dfd_sched *sched, struct dfd_storage *storage,
                   const struct dfd_task_meta *t, const char *peer_id, int o) {
    struct dfc_error e;
    bool kept;
    if (t->register_later) {
        kept = dfd_storage_set_registration(storage, t, peer_id, peer_id, false, &e) == 1;
    } else {
        struct dfd_task_meta now = {0};
        kept = dfd_storage_get(storage, t->id, &now, &e) == 0 &&
               now.created_at_ns == t->created_at_ns && strcmp(now.peer_id, peer_id) == 0;
        dfd_task_meta_done(&now);
    }
    if (!kept) {
        dfd_sched_delete_peer(sched, t->id, peer_id);
    } else if (o == UPLOADED) {
        if (!t->persistent) {
            (void)dfd_storage_set_persistent(storage, t->id, true, dfc_clock_now(&dfc_clock_real),
                                             &e);
        }
        dfd_record_task_digests(sched, storage, t); /* as after an import (registration.c) */
    }
}

int dfd_rejoin_pass(struct dfd_sched *sched, struct dfd_storage *storage,
                    const struct dfd_config *cfg, bool (*should_stop)(void *), void *arg,
                    struct dfd_rejoin_counts *ret, struct dfc_error *err) {
    memset(ret, 0, sizeof(*ret));
    struct dfd_task_meta *list = NULL;
    size_t n = 0;
    int r = dfd_storage_list(storage, &list, &n, err);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        const struct dfd_task_meta *t = &list[i];
        if (should_stop != NULL && should_stop(arg)) {
            break;
        }
        if ((t->peer_id[0] == '\0' && !t->register_later) ||
            (t->ttl_ns > 0 && t->created_at_ns + t->ttl_ns <= dfc_clock_now(&dfc_clock_real))) {
            continue; /* local only by design (standalone, or the cluster had it), or GC's */
        }
        struct dfc_error e;
        char fresh[DFD_PEER_ID_MAX];
        const char *peer_id = t->peer_id;
        if (peer_id[0] == '\0') {
            /* A register_later copy: its peer id is recorded before any call, so a delete
             * meanwhile withdraws it, and a crash leaves nothing the next pass cannot redo. */
            if (dfc_peer_id(cfg->host_ip, cfg->hostname, fresh, sizeof(fresh)) < 0 ||
                dfd_storage_set_registration(storage, t, "", fresh, true, &e) != 1) {
                continue; /* deleted or imported again since the list was read */
            }
            peer_id = fresh;
        }
        int o = rejoin_one(sched, cfg, t, peer_id, &e);
        switch (o) {
        case PRESENT:
            ret->present++;
            if (t->register_later) { /* registered before a crash: only the mark was left */
                (void)dfd_storage_set_registration(storage, t, peer_id, peer_id, false, &e);
            }
            break;
        case JOINED:
        case UPLOADED:
            *(o == JOINED ? &ret->joined : &ret->uploaded) += 1;
            settle(sched, storage, t, peer_id, o);
            break;
        case ABSENT:
            ret->absent++;
            DFC_LOG(DFC_LOG_DEBUG, "scheduler.rejoin_absent",
                    "task_id=%s: the scheduler has no such task, kept locally", t->id);
            break;
        case SKIPPED:
            ret->skipped++;
            DFC_LOG(DFC_LOG_DEBUG, "scheduler.rejoin_skipped",
                    "task_id=%s: another geometry at the scheduler, or too little TTL left to "
                    "upload again",
                    t->id);
            break;
        case WAITING:
            ret->waiting++;
            DFC_LOG(DFC_LOG_DEBUG, "scheduler.rejoin_waiting",
                    "task_id=%s: a registration of it is under way, looked at again later", t->id);
            break;
        default:
            if (away(o)) {
                *err = e;
                r = o;
                break;
            }
            ret->failed++;
            DFC_LOG(DFC_LOG_WARN, "scheduler.rejoin_failed", "task_id=%s error=\"%s\"", t->id,
                    dfc_error_msg(&e));
            break;
        }
    }
    dfd_task_meta_list_free(list, n);
    return r;
}

/* ---- the thread ---- */

static bool stopping(void *arg) {
    struct dfd_rejoin *j = arg;
    pthread_mutex_lock(&j->thread.mu);
    bool s = j->thread.stop;
    pthread_mutex_unlock(&j->thread.mu);
    return s;
}

/* A pass runs when kicked, and again after a back-off (5 s doubling up to the announce
 * interval) while one ended early or left tasks waiting or failed. */
static void *rejoin_main(void *arg) {
    struct dfd_rejoin *j = arg;
    int64_t retry = 0; /* 0: no pass wanted until a kick */
    pthread_mutex_lock(&j->thread.mu);
    for (;;) {
        struct timespec at = dfc_deadline_after(retry);
        while (!j->thread.stop && !j->kicked) {
            if (dfc_thread_wait_locked(&j->thread, retry > 0 ? &at : NULL) == -ETIMEDOUT) {
                break;
            }
        }
        if (j->thread.stop) {
            break;
        }
        j->kicked = false;
        pthread_mutex_unlock(&j->thread.mu);
        struct dfd_rejoin_counts c;
        struct dfc_error err;
        int r = dfd_rejoin_pass(j->sched, j->storage, j->cfg, stopping, j, &c, &err);
        bool again = r < 0 || c.waiting > 0 || c.failed > 0;
        DFC_LOG(r < 0 ? DFC_LOG_WARN : DFC_LOG_INFO, "scheduler.rejoined",
                "present=%zu joined=%zu uploaded=%zu absent=%zu skipped=%zu waiting=%zu "
                "failed=%zu%s%s%s",
                c.present, c.joined, c.uploaded, c.absent, c.skipped, c.waiting, c.failed,
                r < 0 ? " error=\"" : "", r < 0 ? dfc_error_msg(&err) : "",
                r < 0 ? "\": the pass ended early" : "");
        int64_t cap =
            j->cfg->announce_interval > RETRY_MIN_NS ? j->cfg->announce_interval : RETRY_MIN_NS;
        retry = !again ? 0 : retry == 0 ? RETRY_MIN_NS : retry > cap / 2 ? cap : retry * 2;
        pthread_mutex_lock(&j->thread.mu);
    }
    pthread_mutex_unlock(&j->thread.mu);
    return NULL;
}
int dfd_rejoin_start(struct dfd_sched *sched, struct dfd_storage *storage,
                     const struct dfd_config *cfg, struct dfd_rejoin **ret, struct dfc_error *err) {
    struct dfd_rejoin *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    j->sched = sched;
    j->storage = storage;
    j->cfg = cfg;
    int r = dfc_thread_start(&j->thread, rejoin_main, j);
    if (r < 0) {
        free(j);
        return dfc_error_errno(err, r, "start the scheduler rejoin thread");
    }
    *ret = j;
    return 0;
}

void dfd_rejoin_kick(struct dfd_rejoin *j) {
    if (j == NULL) {
        return;
    }
    pthread_mutex_lock(&j->thread.mu);
    j->kicked = true;
    dfc_thread_wake_locked(&j->thread);
    pthread_mutex_unlock(&j->thread.mu);
}

void dfd_rejoin_stop(struct dfd_rejoin *j) {
    if (j == NULL) {
        return;
    }
    dfc_thread_stop(&j->thread);
    free(j);
}
