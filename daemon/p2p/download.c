/*
 * download.c - the P2P download engine (download.h): a task that is not stored here is
 * fetched piece by piece from the parents the scheduler names, into a replica that becomes
 * visible only once complete and durable. This file holds the table of downloads in progress
 * and one download's course (stat, replica, register, the swarm, commit); the swarm is in
 * download_round.c, one piece's fetch in download_piece.c, and download_internal.h holds what
 * they share, with the threads and the locks.
 *
 * DESIGN
 *   One download per task id at a time: a table of downloads in progress (under p->mu). The
 *   first caller runs the download on its own thread (the leader); later callers wait on
 *   p->cv and then read the committed task. When the leader's own caller went away (-ECANCELED
 *   while the engine is not stopping) a waiter takes over as the next leader instead of
 *   failing with someone else's cancellation.
 *
 *   The first answer of the scheduler (Normal{parents}) starts the swarm (dfd__swarm), which
 *   asks for more parents itself; "rounds" in the log counts the answers needed because no
 *   parent could go on, plus the first.
 */
#include "p2p/download.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_client.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download_internal.h"
#include "p2p/verify.h"

/* How often a waiting caller polls its should_stop. */
#define WAIT_TICK_NS (200 * DFC_NS_PER_MS)

int dfd_p2p_new(struct dfd_storage *storage, const struct dfd_p2p_opts *o, struct dfd_p2p **ret,
                struct dfc_error *err) {
    struct dfd_p2p *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    p->storage = storage;
    p->o = *o;
    snprintf(p->host_id, sizeof(p->host_id), "%s", o->host_id);
    const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncPersistentCachePieces",
                              &p->sync_pieces),
    };
    int r = dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), err);
    if (r < 0) {
        free(p);
        return r;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    *ret = p;
    return 0;
}

void dfd_p2p_free(struct dfd_p2p *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    for (struct active *a = p->active; a != NULL; a = a->next) {
        if (a->st != NULL) {
            dfc_rpc_stream_cancel(a->st);
        }
    }
    pthread_cond_broadcast(&p->cv);
    while (p->running > 0) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---- one download ---- */

/* The senders below put one message on the scheduler stream; rd->mu must be held when workers
 * run (one sender at a time). */
static int send_simple(struct run *rd, enum dfd_sched_peer_event ev, const char *description,
                       struct dfc_error *err) {
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_event(sc->s, rd->st, rd->req->task_id, rd->peer_id, ev, description, err);
}

static int send_register(struct run *rd, const char *tag, const char *application,
                         struct dfc_error *err) {
    struct dfd_sched_register g = {
        .task_id = rd->req->task_id,
        .peer_id = rd->peer_id,
        .tag = tag,
        .application = application,
        .persistent = rd->req->persistent,
        .piece_length = rd->piece_length,
        .piece_count = rd->piece_count,
        .concurrent_piece_count = (uint32_t)rd->p->o.concurrent_piece_count,
    };
    return rd->p->o.sched.peer_register(rd->p->o.sched.s, rd->st, &g, err);
}

/* Receives the scheduler's next answer, the parents of a new attempt: 1 Normal (parents taken,
 * the answer kept in rd->answers), 0 Empty. */
static int recv_answer(struct run *rd, struct dfc_error *err) {
    ProtobufCMessage *msg = NULL;
    int r = dfc_rpc_stream_recv(
        rd->st, &scheduler__v2__announce_persistent_cache_peer_response__descriptor, &msg, err);
    if (r == 0) {
        return dfc_error_set(err, DFC_E_ABORTED,
                             "scheduler AnnouncePersistentCachePeer ended without an answer");
    }
    if (r < 0) {
        return dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer");
    }
    dfd__drop_answers(rd); /* a new attempt: the parents of this answer only */
    const Scheduler__V2__AnnouncePersistentCachePeerResponse *m = (const void *)msg;
    size_t added = 0;
    switch (m->response_case) {
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_EMPTY_PERSISTENT_CACHE_TASK_RESPONSE:
        r = 0;
        break;
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_NORMAL_PERSISTENT_CACHE_TASK_RESPONSE:
        added = dfd__take_parents(rd, m->normal_persistent_cache_task_response);
        r = 1;
        break;
    default:
        r = dfc_error_set(err, -EPROTO,
                          "scheduler AnnouncePersistentCachePeer: an answer "
                          "that is neither empty nor normal");
    }
    dfd__keep_answer(rd, msg, added);
    return r;
}

/* The first answer, then the swarm until every piece is written; 0 or an error (the caller
 * tells the scheduler). */
static int run_swarm(struct run *rd, struct dfc_error *err) {
    int normal = recv_answer(rd, err);
    if (normal < 0) {
        return normal;
    }
    int r = send_simple(rd, DFD_SCHED_PEER_STARTED, NULL, err);
    if (r < 0) {
        return r;
    }
    rd->sent_started = true;
    if (normal == 0 || rd->piece_count == 0) {
        if (rd->piece_count != 0) {
            return dfc_error_set(err, -EPROTO,
                                 "the scheduler says task %s is empty, it has %u pieces",
                                 rd->req->task_id, (unsigned)rd->piece_count);
        }
        return 0;
    }
    rd->rounds = 0;
    if ((r = dfd__swarm(rd, err)) < 0) {
        return r;
    }
    char from[DFD_P2P_MAX_PARENTS * 24] = "";
    size_t used = 0;
    for (size_t k = 0; k < rd->n_parents && used < sizeof(from); k++) {
        int w = snprintf(from + used, sizeof(from) - used, "%s%s:%u", k ? "," : "",
                         rd->parents[k].host_ip, rd->parents[k].fetched);
        used += w > 0 ? (size_t)w : 0;
    }
    DFC_LOG(DFC_LOG_INFO, "p2p.download_done",
            "task_id=%s pieces=%u bytes=%" PRIu64 " rounds=%" PRIu64 " pieces_by_parent=%s",
            rd->req->task_id, (unsigned)rd->piece_count, rd->content_length, rd->rounds + 1, from);
    return 0;
}

/* The record this attempt checks against: the oldest usable one not yet failed (rd->rec;
 * n_records when none is usable: the id rule alone decides). An earlier attempt that used a
 * record and failed its end check with none left: that failure stands. */
static int pick_record(struct run *rd, struct dfc_error *err) {
    bool tried = false;
    for (size_t i = 0; i < rd->n_records; i++) {
        tried = tried || rd->bad_record[i];
        if (!rd->bad_record[i] &&
            dfd_verify_usable(rd->records[i], rd->piece_length, rd->content_length)) {
            rd->rec = i;
            return 0;
        }
    }
    rd->rec = rd->n_records;
    if (tried) {
        return dfc_error_set(err, DFC_E_DATA_LOSS,
                             "task %s: no importer's record matches the content its parents "
                             "serve",
                             rd->req->task_id);
    }
    return 0;
}

/* Every piece written and checked: the content's end check (verify.h), then its digests into
 * the replica's row. DFC_E_DATA_LOSS with rd->content_failed when the bytes are not the
 * task's: the next record may be tried. */
static int check_content(struct run *rd, struct dfc_error *err) {
    struct dfc_sha256c content = {0};
    const dfd_digest_record *rec = rd->rec < rd->n_records ? rd->records[rd->rec] : NULL;
    int r = 0;
    if (rec == NULL) {
        r = dfd_prefix_hash_finish(rd->ph, &content, err);
    } else if (rd->piece_count == 0) {
        r = dfc_sha256c_init(&content) < 0 ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
    } else {
        /* Every piece checked against the record's chain, the last one's hash kept: the
         * content is the record's, and its hash continues from there. */
        content = rd->tail;
        rd->tail = (struct dfc_sha256c){0};
        r = content.ctx != NULL ? 0 : dfc_error_set(err, -EINVAL, "the last piece is unchecked");
        for (uint32_t i = 0; r == 0 && i < rd->piece_count; i++) {
            memcpy(rd->got[i], rec->piece_sha256[i].data, DFC_SHA256_LEN);
        }
    }
    if (r < 0) {
        dfc_sha256c_done(&content);
        return r;
    }
    char hex[DFC_SHA256_HEX_LEN + 1];
    const char *basis = NULL;
    r = dfd_verify_content(&content, rd->req->task_id, rd->id_tag, rd->id_app, rd->piece_length,
                           rec, hex, &basis, err);
    dfc_sha256c_done(&content);
    if (r == DFC_E_DATA_LOSS) {
        rd->content_failed = true;
        DFC_LOG(DFC_LOG_WARN, "p2p.content_refused", "task_id=%s record_host=%s error=\"%s\"",
                rd->req->task_id, rec != NULL && rec->host_id != NULL ? rec->host_id : "-",
                dfc_error_msg(err));
    }
    if (r == 0 && rd->piece_count > 0 && rec == NULL) {
        (void)dfc_sha256_from_hex(hex, rd->got[rd->piece_count - 1]); /* the content's */
    }
    if (r == 0) {
        r = dfd_replica_set_digests(rd->rep, hex, basis, (const uint8_t(*)[DFC_SHA256_LEN])rd->got,
                                    err);
    }
    return r;
}

/* Stat, begin the replica, register, rounds, commit. */
static int download(struct run *rd, struct dfd_task_meta *ret, struct dfc_error *err) {
    struct dfd_p2p *p = rd->p;
    const struct dfd_p2p_request *req = rd->req;
    Common__V2__PersistentCacheTask *task = NULL;
    rd->sent_started = false; /* each attempt (lead) registers and starts again */
    rd->fatal = 0;
    rd->n_parents = 0;
    rd->n_written = 0;
    int r = p->o.sched.stat_task(p->o.sched.s, req->task_id, &task, err);
    if (r == -ENOENT) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id);
    }
    if (r < 0) {
        return r;
    }
    int64_t ttl_ns = 0, created_ns = 0;
    if (task->ttl == NULL || dfc_pb_duration_to_ns(task->ttl, &ttl_ns) < 0 ||
        task->created_at == NULL || dfc_pb_timestamp_to_ns(task->created_at, &created_ns) < 0) {
        dfc_rpc_msg_free(&task->base);
        return dfc_error_set(err, -EPROTO, "the scheduler's task %s has no valid ttl or created_at",
                             req->task_id);
    }
    const char *tag = req->tag != NULL ? req->tag : (task->opt_tag_case ? task->tag : NULL);
    const char *app = req->application != NULL
                          ? req->application
                          : (task->opt_application_case ? task->application : NULL);
    rd->piece_length = task->piece_length;
    rd->content_length = task->content_length;
    rd->piece_count = task->piece_count;
    /* The id rule takes the importer's tag and application: the scheduler's, not the
     * caller's override. */
    rd->id_tag = task->opt_tag_case ? task->tag : NULL;
    rd->id_app = task->opt_application_case ? task->application : NULL;
    if ((r = pick_record(rd, err)) < 0) {
        dfc_rpc_msg_free(&task->base);
        return r;
    }
    struct dfd_replica_params rp = {
        .id = req->task_id,
        .tag = tag,
        .application = app,
        .piece_length = task->piece_length,
        .content_length = task->content_length,
        .piece_count = task->piece_count,
        .replica_count = task->persistent_replica_count,
        .ttl_ns = ttl_ns,
        .created_at_ns = created_ns,
        .persistent = req->persistent,
        .peer_id = rd->peer_id,
    };
    /* replica_begin checks the geometry (piece_count against content and piece length) and
     * the space, so nothing below trusts the scheduler's numbers unchecked. */
    r = dfd_replica_begin(p->storage, &rp, &rd->rep, err);
    if (r == 0 && rd->prog != NULL && rd->prog->started != NULL) {
        r = rd->prog->started(rd->prog->arg, rd->content_length, err);
    }
    if (r == 0) {
        rd->missing = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->missing));
        rd->state = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->state));
        rd->avoid = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->avoid));
        rd->have = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->have));
        rd->got = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->got));
        if (rd->missing == NULL || rd->state == NULL || rd->avoid == NULL || rd->have == NULL ||
            rd->got == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    if (r == 0 && rd->rec < rd->n_records) {
        /* Each piece is checked against the record before it counts as written: from now on
         * this node serves the pieces it holds (docs/swarm.md). */
        dfd_replica_share(rd->rep);
    }
    if (r == 0 && rd->rec == rd->n_records) {
        /* No record: the content is hashed in order as it lands (verify.h). */
        r = dfd_prefix_hash_new(rd->rep, rd->piece_length, rd->content_length, rd->got, &rd->ph,
                                err);
    }
    if (r == 0) {
        r = p->o.sched.announce_open(p->o.sched.s, req->task_id,
                                     p->o.schedule_timeout_ns / DFC_NS_PER_MS, &rd->st, err);
    }
    if (r == 0) {
        pthread_mutex_lock(&p->mu);
        rd->a->st = rd->st;
        if (p->stopping) {
            dfc_rpc_stream_cancel(rd->st);
        }
        pthread_mutex_unlock(&p->mu);
        r = send_register(rd, tag, app, err);
        if (r == 0) {
            r = run_swarm(rd, err);
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (r == 0) {
            r = check_content(rd, err); /* nothing unverified is ever committed */
        }
        dfd_prefix_hash_free(rd->ph); /* before the spool it reads is committed or removed */
        rd->ph = NULL;
        if (r == 0) {
            r = dfd_replica_commit(rd->rep, dfc_timespec_to_ns(&now), ret, err);
            rd->rep = NULL;
        }
        struct dfc_error e;
        if (r == 0) {
            if (rd->sched_lost) {
                dfc_error_set(&e, -ENOTCONN, "the scheduler stream was lost mid-download");
            }
            if (rd->sched_lost || send_simple(rd, DFD_SCHED_PEER_FINISHED, NULL, &e) < 0 ||
                dfc_rpc_stream_finish(rd->st, &e) < 0) {
                DFC_LOG(DFC_LOG_WARN, "p2p.finished_not_told",
                        "task_id=%s error=\"%s\", ignoring (the copy is committed; it joins the "
                        "scheduler later)",
                        req->task_id, dfc_error_msg(&e));
                if (p->o.untold != NULL) {
                    p->o.untold(p->o.untold_arg);
                }
            }
        } else if (send_simple(rd, DFD_SCHED_PEER_FAILED, dfc_error_msg(err), &e) == 0) {
            (void)dfc_rpc_stream_finish(rd->st, &e);
        }
        pthread_mutex_lock(&p->mu);
        rd->a->st = NULL;
        pthread_mutex_unlock(&p->mu);
    }
    dfc_rpc_stream_free(rd->st);
    rd->st = NULL;
    dfd_prefix_hash_free(rd->ph);
    rd->ph = NULL;
    dfc_sha256c_done(&rd->tail);
    dfd_replica_abort(rd->rep);
    rd->rep = NULL;
    dfd__drop_answers(rd);
    free(rd->missing);
    free(rd->state);
    free(rd->avoid);
    free(rd->have);
    free(rd->got);
    rd->missing = NULL;
    rd->state = NULL;
    rd->avoid = NULL;
    rd->have = NULL;
    rd->got = NULL;
    dfc_rpc_msg_free(&task->base);
    return r;
}

/* ---- the table of downloads in progress ---- */

static struct active *find_active(struct dfd_p2p *p, const char *id) {
    for (struct active *a = p->active; a != NULL; a = a->next) {
        if (strcmp(a->id, id) == 0) {
            return a;
        }
    }
    return NULL;
}

static void unlink_active(struct dfd_p2p *p, struct active *a) {
    for (struct active **pp = &p->active; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            return;
        }
    }
}

/* p->mu held: drops a reference; the last one frees. */
static void put_active(struct active *a) {
    if (--a->refs == 0) {
        free(a);
    }
}

/* Waits for a (p->mu held) to finish; -ECANCELED when our own caller goes away meanwhile. */
static int wait_active(struct dfd_p2p *p, struct active *a, const struct dfd_p2p_progress *prog,
                       struct dfc_error *err) {
    while (!a->done) {
        if (p->stopping) {
            return dfc_error_set(err, -ECANCELED, "dfdaemon is stopping");
        }
        if (prog != NULL && prog->should_stop != NULL) {
            pthread_mutex_unlock(&p->mu);
            bool stop = prog->should_stop(prog->arg);
            pthread_mutex_lock(&p->mu);
            if (stop) {
                return dfc_error_set(err, -ECANCELED, "the download was cancelled");
            }
        }
        struct timespec dl = dfc_deadline_after(WAIT_TICK_NS);
        pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    }
    return 0;
}

/* A stored task is returned at once; with persistent asked for, it is made persistent. */
static int get_local(struct dfd_p2p *p, const struct dfd_p2p_request *req,
                     struct dfd_task_meta *ret, struct dfc_error *err) {
    int r = dfd_storage_get(p->storage, req->task_id, ret, err);
    if (r == 0 && req->persistent && !ret->persistent) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        r = dfd_storage_set_persistent(p->storage, req->task_id, true, dfc_timespec_to_ns(&now),
                                       err);
        if (r == 0) {
            ret->persistent = true;
        } else {
            dfd_task_meta_done(ret);
        }
    }
    return r;
}

static int lead(struct dfd_p2p *p, struct active *a, const struct dfd_p2p_request *req,
                const struct dfd_p2p_progress *prog, struct dfd_task_meta *ret,
                struct dfc_error *err) {
    struct run *rd = calloc(1, sizeof(*rd));
    if (rd == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    rd->p = p;
    rd->req = req;
    rd->prog = prog;
    rd->a = a;
    pthread_mutex_init(&rd->mu, NULL);
    /* The swarm's waits take monotonic deadlines (dfc_deadline_after). */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rd->synced, &ca);
    pthread_cond_init(&rd->watch, &ca);
    pthread_condattr_destroy(&ca);
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *digests = NULL;
    int r = dfc_peer_id(p->o.host_ip, p->o.hostname, rd->peer_id, sizeof(rd->peer_id));
    if (r < 0) {
        dfc_error_set(err, r, "host.ip and host.hostname make a peer id that is too long");
    } else {
        r = p->o.sched.get_digests(p->o.sched.s, req->task_id, &digests, err);
    }
    if (r == 0) {
        rd->records = (const dfd_digest_record *const *)digests->records;
        rd->n_records = digests->n_records;
        rd->bad_record = calloc(rd->n_records ? rd->n_records : 1, sizeof(*rd->bad_record));
        if (rd->bad_record == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    /* An attempt per record while the content fails its end check (bounded by the records,
     * SCHED_DIGEST_HOSTS_MAX at most): the bytes are fetched again, checked against the next
     * one. */
    for (size_t attempt = 0; r == 0 && attempt <= rd->n_records; attempt++) {
        rd->content_failed = false;
        r = download(rd, ret, err);
        if (r < 0 && rd->content_failed && rd->rec < rd->n_records) {
            rd->bad_record[rd->rec] = true;
            struct dfc_error next;
            size_t was = rd->rec;
            if (pick_record(rd, &next) == 0 && rd->rec != rd->n_records) {
                DFC_LOG(DFC_LOG_INFO, "p2p.next_record",
                        "task_id=%s: the record of host %s failed, trying host %s's", req->task_id,
                        rd->records[was]->host_id, rd->records[rd->rec]->host_id);
                r = 0;
                continue;
            }
            r = DFC_E_DATA_LOSS;
        }
        break;
    }
    free(rd->bad_record);
    dfc_rpc_msg_free(digests ? &digests->base : NULL);
    if (r == -EEXIST && dfd_storage_get(p->storage, req->task_id, ret, err) == 0) {
        r = 0; /* it appeared meanwhile (an import of the same id) */
    }
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "p2p.download_failed", "task_id=%s code=%s error=\"%s\"",
                req->task_id, dfc_error_name(r), dfc_error_msg(err));
    }
    pthread_cond_destroy(&rd->synced);
    pthread_cond_destroy(&rd->watch);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
    return r;
}

int dfd_p2p_fetch(struct dfd_p2p *p, const struct dfd_p2p_request *req,
                  const struct dfd_p2p_progress *prog, struct dfd_task_meta *ret,
                  struct dfc_error *err) {
    if (!dfd_task_id_valid(req->task_id)) {
        return dfc_error_set(err, -EINVAL, "task_id: must be 64 lowercase hex digits");
    }
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return dfc_error_set(err, -ECANCELED, "dfdaemon is stopping");
    }
    p->running++;
    int r;
    for (;;) {
        pthread_mutex_unlock(&p->mu);
        r = get_local(p, req, ret, err);
        pthread_mutex_lock(&p->mu);
        if (r != -ENOENT) {
            break;
        }
        struct active *a = find_active(p, req->task_id);
        if (a != NULL) {
            a->refs++;
            r = wait_active(p, a, prog, err);
            bool retry = r == 0 && a->result < 0 && a->leader_cancelled && !p->stopping;
            if (r == 0 && a->result < 0 && !retry) {
                r = a->result;
                *err = a->err;
            }
            put_active(a);
            if (r < 0) {
                break;
            }
            continue; /* done: read it back, or lead a new download */
        }
        a = calloc(1, sizeof(*a));
        if (a == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        snprintf(a->id, sizeof(a->id), "%s", req->task_id);
        a->refs = 1;
        a->next = p->active;
        p->active = a;
        pthread_mutex_unlock(&p->mu);
        r = lead(p, a, req, prog, ret, err);
        pthread_mutex_lock(&p->mu);
        a->done = true;
        a->result = r;
        if (r < 0) {
            a->err = *err;
        }
        a->leader_cancelled = r == -ECANCELED;
        unlink_active(p, a);
        put_active(a);
        pthread_cond_broadcast(&p->cv);
        break;
    }
    p->running--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return r;
}
