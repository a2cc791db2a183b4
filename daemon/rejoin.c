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
#include <time.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "scheduler_client.h"

#define STREAM_TIMEOUT_MS 10000
#define MIN_TTL_NS        (300 * DFC_NS_PER_SEC) /* Started's ttl must be at least 5m */

struct dfd_rejoin {
    struct dfc_thread thread;
    bool kicked; /* under thread.mu */
    struct dfd_sched *sched;
    struct dfd_storage *storage;
    const struct dfd_config *cfg;
};

enum outcome { PRESENT, JOINED, UPLOADED, ABSENT, SKIPPED };

/* The scheduler is away: the pass ends, the announcer kicks again once it is back. */
static bool away(int r) {
    int code = dfc_error_to_grpc(r);
    return code == DFC_GRPC_UNAVAILABLE || code == DFC_GRPC_DEADLINE_EXCEEDED;
}

/* Register, Started, Finished on one stream: the copy becomes a Succeeded peer of the task. */
static int join(struct dfd_sched *sched, const struct dfd_config *cfg,
                const struct dfd_task_meta *t, struct dfc_error *err) {
    struct dfc_rpc_stream *st = NULL;
    int r = dfd_sched_announce_peer_open(sched, t->id, STREAM_TIMEOUT_MS, &st, err);
    if (r < 0) {
        return r;
    }
    const struct dfd_sched_register g = {
        .task_id = t->id,
        .peer_id = t->peer_id,
        .tag = t->tag,
        .application = t->application,
        .persistent = t->persistent,
        .piece_length = t->piece_length,
        .piece_count = t->piece_count,
        .concurrent_piece_count = (uint32_t)cfg->concurrent_piece_count,
    };
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
            r = dfd_sched_peer_event(sched, st, t->id, t->peer_id, DFD_SCHED_PEER_STARTED, NULL,
                                     err);
            if (r == 0) {
                r = dfd_sched_peer_event(sched, st, t->id, t->peer_id, DFD_SCHED_PEER_FINISHED,
                                         NULL, err);
            }
            if (r == 0 && (r = dfc_rpc_stream_finish(st, err)) < 0) {
                dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer");
            }
        }
    }
    dfc_rpc_stream_free(st);
    return r;
}

/* Started then Finished under peer_id, with the TTL that is left: 1 when too little is left. */
static int upload_again(struct dfd_sched *sched, const struct dfd_task_meta *t, const char *peer_id,
                        int64_t now_ns, struct dfc_error *err) {
    int64_t left = t->created_at_ns + t->ttl_ns - now_ns;
    if (t->ttl_ns <= 0 || left < MIN_TTL_NS) {
        return 1;
    }
    struct dfd_task_meta m = *t; /* a shallow copy: its strings stay t's */
    m.ttl_ns = left / DFC_NS_PER_SEC * DFC_NS_PER_SEC;
    int r = dfd_sched_upload_started(sched, &m, peer_id, err);
    if (r == 0 && (r = dfd_sched_upload_finished(sched, t->id, peer_id, NULL, err)) < 0) {
        dfd_sched_upload_failed(sched, t->id, peer_id, dfc_error_msg(err));
    }
    return r;
}

/* A register_later copy uploaded under peer_id: the row records it, unless the copy went or
 * changed meanwhile (then the peer is withdrawn). */
static int uploaded_unregistered(struct dfd_sched *sched, struct dfd_storage *storage,
                                 const struct dfd_task_meta *t, const char *peer_id) {
    struct dfc_error e;
    if (dfd_storage_registered(storage, t->id, peer_id, &e) != 1) {
        dfd_sched_delete_peer(sched, t->id, peer_id);
        return SKIPPED;
    }
    return UPLOADED;
}

/* Logs a copy registered again (JOINED or UPLOADED) and returns o. */
static int logged(const struct dfd_task_meta *t, const char *peer_id, int o) {
    DFC_LOG(DFC_LOG_INFO, "scheduler.rejoined_task", "task_id=%s peer_id=%s how=%s%s", t->id,
            peer_id, o == JOINED ? "joined" : "uploaded",
            t->peer_id[0] == '\0' ? " (kept local at its import: no scheduler took it)" : "");
    return o;
}

/* The outcome for t, or a negative error (err set). */
static int rejoin_one(struct dfd_sched *sched, struct dfd_storage *storage,
                      const struct dfd_config *cfg, const struct dfd_task_meta *t, int64_t now_ns,
                      struct dfc_error *err) {
    bool registered = t->peer_id[0] != '\0';
    char fresh[DFD_PEER_ID_MAX];
    const char *peer_id = t->peer_id;
    if (registered) {
        Common__V2__PersistentCachePeer *peer = NULL;
        int r = dfd_sched_stat_peer(sched, t->id, t->peer_id, &peer, err);
        if (r == 0) {
            bool done = strcmp(peer->state, "Succeeded") == 0;
            dfc_rpc_msg_free(&peer->base);
            if (done) {
                return PRESENT;
            }
            /* A join that broke off (or a failed pull under this id): start it over. */
            dfd_sched_delete_peer(sched, t->id, t->peer_id);
        } else if (r != -ENOENT) {
            return r;
        }
    } else {
        int r = dfc_peer_id(cfg->host_ip, cfg->hostname, fresh, sizeof(fresh));
        if (r < 0) {
            return dfc_error_set(err, r,
                                 "host.ip and host.hostname make a peer id that is too long");
        }
        peer_id = fresh;
    }
    Common__V2__PersistentCacheTask *st = NULL;
    int r = dfd_sched_stat_task(sched, t->id, &st, err);
    bool upload = false, succeeded = false;
    if (r == -ENOENT) {
        /* Deleted or expired there since this copy was registered; never registered: new. */
        if (registered) {
            return ABSENT;
        }
        upload = true;
    } else if (r < 0) {
        return r;
    } else {
        succeeded = strcmp(st->state, "Succeeded") == 0 &&
                    st->content_length == t->content_length &&
                    st->piece_length == t->piece_length && st->piece_count == t->piece_count;
        upload = strcmp(st->state, "Failed") == 0;
        dfc_rpc_msg_free(&st->base);
    }
    if (succeeded && registered) {
        r = join(sched, cfg, t, err);
        if (r == 0) {
            return logged(t, peer_id, JOINED);
        }
        if (dfc_error_to_grpc(r) != DFC_GRPC_FAILED_PRECONDITION) {
            return r;
        }
        upload = true; /* "no candidate parents found": this is the only copy left */
    }
    if (succeeded && !registered) {
        /* Someone registered these bytes meanwhile: kept local, as an import does when the
         * cluster already has them (registration.c); no need to look again. */
        struct dfc_error e;
        (void)dfd_storage_registered(storage, t->id, "", &e);
        return SKIPPED;
    }
    if (!upload) {
        return SKIPPED;
    }
    if ((r = upload_again(sched, t, peer_id, now_ns, err)) != 0) {
        /* 1: too little TTL left; ALREADY_EXISTS: another upload of it is under way */
        return r > 0 || dfc_error_to_grpc(r) == DFC_GRPC_ALREADY_EXISTS ? SKIPPED : r;
    }
    int o = registered ? UPLOADED : uploaded_unregistered(sched, storage, t, peer_id);
    return o == UPLOADED ? logged(t, peer_id, o) : o;
}

/* A copy deleted here while it was being registered: withdraw the peer again. */
static void recheck(struct dfd_sched *sched, struct dfd_storage *storage,
                    const struct dfd_task_meta *t) {
    struct dfd_task_meta now = {0};
    struct dfc_error e;
    int r = dfd_storage_get(storage, t->id, &now, &e);
    if (r < 0 || strcmp(now.peer_id, t->peer_id) != 0) {
        dfd_sched_delete_peer(sched, t->id, t->peer_id);
    }
    if (r == 0) {
        dfd_task_meta_done(&now);
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
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ns = dfc_timespec_to_ns(&ts);
    for (size_t i = 0; i < n && r == 0; i++) {
        const struct dfd_task_meta *t = &list[i];
        if (should_stop != NULL && should_stop(arg)) {
            break;
        }
        if ((t->peer_id[0] == '\0' && !t->register_later) ||
            (t->ttl_ns > 0 && t->created_at_ns + t->ttl_ns <= now_ns)) {
            continue; /* local only by design (standalone, or the cluster had it), or GC's */
        }
        struct dfc_error e;
        int o = rejoin_one(sched, storage, cfg, t, now_ns, &e);
        switch (o) {
        case PRESENT:
            ret->present++;
            break;
        case JOINED:
        case UPLOADED:
            *(o == JOINED ? &ret->joined : &ret->uploaded) += 1;
            if (t->peer_id[0] != '\0') {
                recheck(sched, storage, t);
            }
            break;
        case ABSENT:
            ret->absent++;
            DFC_LOG(DFC_LOG_DEBUG, "scheduler.rejoin_absent",
                    "task_id=%s: the scheduler has no such task, kept locally", t->id);
            break;
        case SKIPPED:
            ret->skipped++;
            DFC_LOG(DFC_LOG_DEBUG, "scheduler.rejoin_skipped",
                    "task_id=%s: not Succeeded with this geometry at the scheduler, or too "
                    "little TTL left to upload again",
                    t->id);
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

static void *rejoin_main(void *arg) {
    struct dfd_rejoin *j = arg;
    pthread_mutex_lock(&j->thread.mu);
    for (;;) {
        while (!j->thread.stop && !j->kicked) {
            dfc_thread_wait_locked(&j->thread, NULL);
        }
        if (j->thread.stop) {
            break;
        }
        j->kicked = false;
        pthread_mutex_unlock(&j->thread.mu);
        struct dfd_rejoin_counts c;
        struct dfc_error err;
        int r = dfd_rejoin_pass(j->sched, j->storage, j->cfg, stopping, j, &c, &err);
        DFC_LOG(r < 0 ? DFC_LOG_WARN : DFC_LOG_INFO, "scheduler.rejoined",
                "present=%zu joined=%zu uploaded=%zu absent=%zu skipped=%zu failed=%zu%s%s%s",
                c.present, c.joined, c.uploaded, c.absent, c.skipped, c.failed,
                r < 0 ? " error=\"" : "", r < 0 ? dfc_error_msg(&err) : "",
                r < 0 ? "\": the pass ends, the next announce starts another" : "");
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
