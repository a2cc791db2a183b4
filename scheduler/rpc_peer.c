/*
 * rpc_peer.c - a downloading peer's side: AnnouncePersistentCachePeer (the bidi scheduling
 * stream), StatPersistentCachePeer, DeletePersistentCachePeer.
 *
 * The stream follows upstream's loop message by message (docs/dragonfly-compat.md, "Scheduler
 * on Redis"). Fixed on purpose: a failed register ends the stream with its real cause (host
 * not found, task not found, no candidate parents found) where upstream masks it as "peer not
 * found"; a repeated "download started" while Running is accepted (the FSM allows Running ->
 * Running), so the Started that dfdaemon sends after every reschedule no longer fails the peer.
 *
 * Under mutual TLS a stream acts only for its certificate's host, every message on an existing
 * peer only for that host's peer, and a peer is deleted only by its own host (authz.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "authz_store.h"
#include "dfc/log.h"
#include "dfc/stream_cap.h"
#include "dfc/units.h"
#include "integrity_store.h"
#include "service.h"
#include "validate.h"

typedef Scheduler__V2__AnnouncePersistentCachePeerRequest announce_req;

/* Loads a peer with the task its record names (needed to store it: the TTL comes from the
 * task); -ENOENT "peer <id> not found" when either is gone; -EACCES when owner (the host the
 * stream's certificate acts for; NULL without one) is not the peer's host. */
static int load_peer(struct sched_service *svc, int64_t dl, const char *id, const char *owner,
                     struct sched_peer *p, struct sched_task *t, struct dfc_error *err) {
    int r = sched_peer_load(svc->store, dl, id, p, err);
    if (r == 0) {
        r = sched_authz_peer_owner(id, p->host_id, owner, err);
    }
    if (r == 0) {
        r = sched_task_load(svc->store, dl, p->task_id, t, err);
    }
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "peer %s not found", id);
    }
    return r;
}

/* Marks the peer Failed if it exists (what upstream does after a failed step); errors are the
 * caller's to ignore. */
static int mark_failed(struct sched_service *svc, struct dfc_rpc_call *call, const char *id,
                       const char *owner, struct dfc_error *err) {
    int64_t dl = sched__deadline(svc, call);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    int r = load_peer(svc, dl, id, owner, &p, &t, err);
    if (r == 0 && (r = sched_peer_fire(&p.state, SCHED_PEER_EV_FAILED, err)) == 0) {
        p.updated_at = sched__now_s(svc);
        r = sched_peer_store(svc->store, dl, &p, &t, err);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    return r;
}

/* ---- candidate parents ---- */

/* Finds candidate parents for p (blocklist: peer ids) and sends them as a Normal response, or
 * FAILED_PRECONDITION "no candidate parents found". The peer is stored before the send, as
 * upstream (with the task first when store_task). */
static int send_parents(struct sched_service *svc, struct dfc_rpc_call *call, int64_t dl,
                        struct sched_peer *p, struct sched_task *t, const struct sched_host *asking,
                        const char *const *block, size_t n_block, bool store_task,
                        struct dfc_error *err) {
    struct sched_candidate *c = NULL;
    size_t n = 0;
    uint64_t all = 0, persistent = 0;
    int r = sched_find_parents(svc->store, dl, t->id, asking, block, n_block,
                               svc->cfg->candidate_parent_limit, &c, &n, err);
    if (r == 0 && n == 0) {
        r = dfc_error_set(err, DFC_E_FAILED_PRECONDITION, "no candidate parents found");
    }
    if (r == 0) {
        r = sched_task_replica_counts(svc->store, dl, t->id, &all, &persistent, err);
    }
    Scheduler__V2__AnnouncePersistentCachePeerResponse *resp =
        (Scheduler__V2__AnnouncePersistentCachePeerResponse *)dfc_rpc_call_new_msg(
            call, &scheduler__v2__announce_persistent_cache_peer_response__descriptor);
    Scheduler__V2__NormalPersistentCacheTaskResponse *normal =
        (Scheduler__V2__NormalPersistentCacheTaskResponse *)dfc_rpc_call_new_msg(
            call, &scheduler__v2__normal_persistent_cache_task_response__descriptor);
    Common__V2__PersistentCachePeer **list =
        dfc_rpc_call_alloc(call, (n + 1) * sizeof(Common__V2__PersistentCachePeer *));
    if (r == 0 && (resp == NULL || normal == NULL || list == NULL)) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        list[i] = (Common__V2__PersistentCachePeer *)dfc_rpc_call_new_msg(
            call, &common__v2__persistent_cache_peer__descriptor);
        if (list[i] == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        /* Each parent's own task record, with the live counts of the task asked for. */
        r = sched__peer_to_proto(call, &c[i].peer, t, all, persistent, &c[i].host,
                                 c[i].host.scheduler_cluster_id, list[i], err);
    }
    if (r == 0 && store_task) {
        r = sched_task_store(svc->store, dl, t, err);
    }
    if (r == 0) {
        r = sched_peer_store(svc->store, dl, p, t, err);
    }
    if (r == 0) {
        normal->n_candidate_cache_parents = n;
        normal->candidate_cache_parents = list;
        resp->response_case =
            SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_NORMAL_PERSISTENT_CACHE_TASK_RESPONSE;
        resp->normal_persistent_cache_task_response = normal;
        r = dfc_rpc_call_send(call, &resp->base, err);
    }
    sched_candidates_free(c, n);
    return r;
}

/* ---- the stream's steps ---- */

/* At most scheduler.maxPeersPerTask peers per task (beyond upstream): a register beyond it is
 * refused RESOURCE_EXHAUSTED, and a peer already in the task's set may register again. Failed
 * peers leave the set, so only live ones count. Checked before the store, so registers in
 * flight at once may pass it by their number. */
static int check_task_room(struct sched_service *svc, int64_t dl, const char *task_id,
                           const char *peer_id, struct dfc_error *err) {
    uint64_t all = 0, persistent = 0;
    int r = sched_task_replica_counts(svc->store, dl, task_id, &all, &persistent, err);
    if (r < 0 || all < svc->cfg->max_peers_per_task) {
        return r;
    }
    r = sched_peer_in_task(svc->store, dl, task_id, peer_id, err);
    if (r != 0) {
        return r < 0 ? r : 0;
    }
    return dfc_error_set(err, -EUSERS, "task %s already has %llu peers (scheduler.maxPeersPerTask)",
                         task_id, (unsigned long long)all);
}

/* Under mutual TLS (owner: the stream's host), a peer id another host holds is not taken. */
static int check_peer_free(struct sched_service *svc, int64_t dl, const char *peer_id,
                           const char *owner, struct dfc_error *err) {
    char *held = NULL;
    if (owner == NULL) {
        return 0;
    }
    int r = sched_peer_owner(svc->store, dl, peer_id, &held, err);
    if (r == 0) {
        r = sched_authz_peer_owner(peer_id, held, owner, err);
    }
    free(held);
    return r == -ENOENT ? 0 : r;
}

static int on_register(struct sched_service *svc, struct dfc_rpc_call *call, const announce_req *m,
                       const char *owner, struct dfc_error *err) {
    const Scheduler__V2__RegisterPersistentCachePeerRequest *g =
        m->register_persistent_cache_peer_request;
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);
    struct sched_host host = {0};
    struct sched_task task = {0};
    int r = sched_host_load(svc->store, dl, m->host_id, &host, err);
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "host %s not found", m->host_id);
    }
    if (r == 0) {
        r = sched_task_load(svc->store, dl, m->task_id, &task, err);
        if (r == -ENOENT) {
            r = dfc_error_set(err, -ENOENT, "task %s not found", m->task_id);
        }
    }
    if (r == 0) {
        r = check_peer_free(svc, dl, m->peer_id, owner, err);
    }
    if (r == 0) {
        r = check_task_room(svc, dl, m->task_id, m->peer_id, err);
    }
    struct sched_peer peer = {
        .id = m->peer_id,
        .persistent = g->persistent,
        .state = SCHED_PEER_PENDING,
        .task_id = m->task_id,
        .host_id = m->host_id,
        .created_at = now,
        .updated_at = now,
        .concurrent_piece_count =
            g->opt_concurrent_piece_count_case != 0 ? g->concurrent_piece_count : 8,
    };
    if (r == 0 && sched_task_size_scope(&task) == COMMON__V2__SIZE_SCOPE__EMPTY) {
        if ((r = sched_peer_fire(&peer.state, SCHED_PEER_EV_REGISTER_EMPTY, err)) == 0 &&
            (r = sched_task_store(svc->store, dl, &task, err)) == 0 &&
            (r = sched_peer_store(svc->store, dl, &peer, &task, err)) == 0) {
            Scheduler__V2__AnnouncePersistentCachePeerResponse resp =
                SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__INIT;
            Scheduler__V2__EmptyPersistentCacheTaskResponse empty =
                SCHEDULER__V2__EMPTY_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
            resp.response_case =
                SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_EMPTY_PERSISTENT_CACHE_TASK_RESPONSE;
            resp.empty_persistent_cache_task_response = &empty;
            r = dfc_rpc_call_send(call, &resp.base, err);
        }
    } else if (r == 0) {
        const char *block[] = {m->peer_id};
        r = sched_peer_fire(&peer.state, SCHED_PEER_EV_REGISTER_NORMAL, err);
        if (r == 0) {
            r = send_parents(svc, call, dl, &peer, &task, &host, block, 1, true, err);
        }
    }
    sched_host_done(&host);
    sched_task_done(&task);
    return r;
}

static int on_started(struct sched_service *svc, struct dfc_rpc_call *call, const announce_req *m,
                      const char *owner, struct dfc_error *err) {
    int64_t dl = sched__deadline(svc, call);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    int r = load_peer(svc, dl, m->peer_id, owner, &p, &t, err);
    /* Running -> Running is allowed (fsm.h): dfdaemon sends Started again after a reschedule. */
    if (r == 0 && (r = sched_peer_fire(&p.state, SCHED_PEER_EV_DOWNLOAD, err)) < 0) {
        err->code = r = DFC_E_INTERNAL; /* upstream's code for an FSM refusal */
    }
    if (r == 0) {
        r = sched_peer_store(svc->store, dl, &p, &t, err);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    return r;
}

/* Adds id to the list unless it is there; the list's strings are borrowed. */
static void add_unique(const char **list, size_t *n, const char *id) {
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(list[i], id) == 0) {
            return;
        }
    }
    list[(*n)++] = id;
}

static int on_reschedule(struct sched_service *svc, struct dfc_rpc_call *call,
                         const announce_req *m, const char *owner, struct dfc_error *err) {
    const Scheduler__V2__ReschedulePersistentCachePeerRequest *rs =
        m->reschedule_persistent_cache_peer_request;
    int64_t dl = sched__deadline(svc, call);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    struct sched_host host = {0};
    int r = load_peer(svc, dl, m->peer_id, owner, &p, &t, err);
    if (r == 0) {
        r = sched_host_load(svc->store, dl, p.host_id, &host, err);
        if (r == -ENOENT) {
            r = dfc_error_set(err, -ENOENT, "peer %s not found", m->peer_id);
        }
    }
    if (r < 0) {
        goto out;
    }
    /* blocklist = the peer itself + its stored block_parents + the parents it reports */
    size_t cap = 1 + p.n_block_parents + rs->n_candidate_parents;
    const char **block = calloc(cap, sizeof(*block));
    size_t n = 0;
    if (block == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    add_unique(block, &n, p.id);
    for (size_t i = 0; i < p.n_block_parents; i++) {
        add_unique(block, &n, p.block_parents[i]);
    }
    for (size_t i = 0; i < rs->n_candidate_parents; i++) {
        add_unique(block, &n, rs->candidate_parents[i]->id);
    }
    char **stored = calloc(n, sizeof(*stored));
    size_t n_stored = 0;
    for (size_t i = 0; stored != NULL && i < n; i++) {
        if ((stored[i] = strdup(block[i])) == NULL) {
            break;
        }
        n_stored++;
    }
    if (stored == NULL || n_stored != n) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    } else {
        /* The record keeps the new list (persisted only when parents are found, as upstream). */
        for (size_t i = 0; i < p.n_block_parents; i++) {
            free(p.block_parents[i]);
        }
        free(p.block_parents);
        p.block_parents = stored;
        p.n_block_parents = n;
        p.block_parents_null = false;
        stored = NULL;
        r = send_parents(svc, call, dl, &p, &t, &host, (const char *const *)p.block_parents,
                         p.n_block_parents, false, err);
    }
    for (size_t i = 0; stored != NULL && i < n_stored; i++) {
        free(stored[i]);
    }
    free(stored);
    free(block);
out:
    sched_peer_done(&p);
    sched_task_done(&t);
    sched_host_done(&host);
    return r;
}

/* Finished (cost, Succeeded) or Failed, stored; the stream then ends OK. */
static int on_end(struct sched_service *svc, struct dfc_rpc_call *call, const char *id,
                  const char *owner, bool succeeded, struct dfc_error *err) {
    int64_t dl = sched__deadline(svc, call), now_ns = svc->now_ns();
    struct sched_peer p = {0};
    struct sched_task t = {0};
    int r = load_peer(svc, dl, id, owner, &p, &t, err);
    if (r == 0 && succeeded) {
        p.cost_ns = now_ns - p.created_at * DFC_NS_PER_SEC;
    }
    if (r == 0 &&
        (r = sched_peer_fire(&p.state, succeeded ? SCHED_PEER_EV_SUCCEEDED : SCHED_PEER_EV_FAILED,
                             err)) < 0) {
        err->code = r = DFC_E_INTERNAL;
    }
    if (r == 0) {
        r = sched_peer_store(svc->store, dl, &p, &t, err);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    return r;
}

static int on_piece_finished(struct sched_service *svc, struct dfc_rpc_call *call,
                             const announce_req *m, const char *owner, struct dfc_error *err) {
    const Common__V2__Piece *piece = m->download_piece_finished_request->piece;
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    /* One round trip for the peer, its task and its host (the request names them), as
     * StatPersistentCachePeer reads; a peer naming others is read the long way. */
    int r =
        sched_store_load_peer_task(svc->store, dl, m->peer_id, m->host_id, m->task_id, &p, &t, err);
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "peer %s not found", m->peer_id);
    }
    if (r == 0) {
        r = sched_authz_peer_owner(m->peer_id, p.host_id, owner, err);
    }
    /* Ours: a piece beyond the task's pieces would grow the bitset without bound. */
    if (r == 0 && piece->number >= t.total_piece_count) {
        r = dfc_error_set(err, -EINVAL, "piece.number %u is beyond the task's %u pieces",
                          (unsigned)piece->number, (unsigned)t.total_piece_count);
    }
    if (r == 0 && sched_bitset_set(&p.finished_pieces, piece->number) < 0) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if (r == 0) {
        p.updated_at = now;
        r = sched_peer_store(svc->store, dl, &p, &t, err);
    }
    /* The parent: as upstream, it must load (its host and task still there), and only its
     * updated_at changes, so only that field is written, the check and the write in one
     * round trip (upstream loads and stores the whole peer; the hash ends up the same,
     * without bringing back a parent deleted meanwhile). */
    const char *parent_id = piece->opt_parent_id_case != 0 ? piece->parent_id : "";
    if (r == 0 && (r = sched_peer_touch(svc->store, dl, parent_id, now, err)) == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "parent peer %s not found", parent_id);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    return r;
}

/* A piece from parent_id failed verification (temporary = false, docs/integrity.md): its host
 * joins the task's exclusion set, so no peer of the task is offered it again, and its peer
 * record goes, so it no longer counts as a copy, and the task is queued for repair (the host
 * blocked). Not as upstream, which ends the stream with
 * FAILED_PRECONDITION "download piece failed": the download goes on from other parents. */
static int exclude_parent(struct sched_service *svc, int64_t dl, const struct sched_task *t,
                          const char *parent_id, struct dfc_error *err) {
    struct sched_peer parent = {0};
    struct dfc_error e;
    int r = sched_peer_load(svc->store, dl, parent_id, &parent, &e);
    if (r == -ENOENT) {
        return 0; /* gone already: nothing to offer */
    }
    if (r < 0) {
        *err = e;
        return r;
    }
    if (strcmp(parent.task_id, t->id) != 0) {
        sched_peer_done(&parent);
        return 0; /* another task's peer: nothing of this task to exclude */
    }
    int64_t ttl = t->ttl_ns / DFC_NS_PER_SEC - (sched__now_s(svc) - t->created_at);
    r = ttl > 0 ? sched_parent_exclude(svc->store, dl, t->id, parent.host_id, ttl, err) : 0;
    if (r >= 0) {
        DFC_LOG(DFC_LOG_WARN, "task.parent_excluded",
                "task_id=%s parent_id=%s host_id=%s: a piece it served failed verification", t->id,
                parent_id, parent.host_id);
        r = sched_peer_delete(svc->store, dl, parent_id, err);
        r = r == -ENOENT ? 0 : r;
    }
    if (r == 0 && svc->placement != NULL) { /* its copy no longer counts: place another now */
        const char *block[] = {parent.host_id};
        sched_placement_replicate(svc->placement, t->id, block, 1);
    }
    sched_peer_done(&parent);
    return r;
}

/* Under mutual TLS only the downloading peer's own host reports its parents (owner). */
static int on_piece_failed(struct sched_service *svc, struct dfc_rpc_call *call,
                           const announce_req *m, const char *owner, struct dfc_error *err) {
    const Scheduler__V2__DownloadPieceFailedRequest *f = m->download_piece_failed_request;
    int64_t dl = sched__deadline(svc, call);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    int r = load_peer(svc, dl, m->peer_id, owner, &p, &t, err);
    if (r == 0 && !f->temporary) {
        r = exclude_parent(svc, dl, &t, f->parent_id, err);
    }
    if (r == 0) {
        /* block_parents = its list + itself + the failed parent, as upstream */
        const char *add[2] = {p.id, f->parent_id};
        char **grown = realloc(p.block_parents, (p.n_block_parents + 2) * sizeof(*grown));
        if (grown == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            p.block_parents = grown;
            p.block_parents_null = false;
            for (size_t k = 0; r == 0 && k < 2; k++) {
                bool seen = false;
                for (size_t i = 0; i < p.n_block_parents; i++) {
                    seen = seen || strcmp(p.block_parents[i], add[k]) == 0;
                }
                if (!seen) {
                    char *c = strdup(add[k]);
                    if (c == NULL) {
                        r = dfc_error_set(err, -ENOMEM, "out of memory");
                    } else {
                        p.block_parents[p.n_block_parents++] = c;
                    }
                }
            }
        }
    }
    if (r == 0) {
        p.updated_at = sched__now_s(svc);
        r = sched_peer_store(svc->store, dl, &p, &t, err);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    return r;
}

/* Under mutual TLS, whether the stream may act for m's host: checked once per host id (the
 * host the stream acted for last is kept in *ok, malloc'd). */
static int authorize(struct sched_service *svc, struct dfc_rpc_call *call, const announce_req *m,
                     char **ok, struct dfc_error *err) {
    if (*ok != NULL && strcmp(*ok, m->host_id) == 0) {
        return 0;
    }
    int r = sched_authz_stored_host(svc->store, sched__deadline(svc, call), call,
                                    "announce a peer for", m->host_id, err);
    if (r == 0) {
        free(*ok);
        if ((*ok = strdup(m->host_id)) == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    return r;
}

static int announce_loop(struct sched_service *svc, struct dfc_rpc_call *call,
                         struct dfc_error *err) {
    int r = sched__need_redis(svc, err); /* before any message, as upstream */
    bool logged = false, authn = sched_authz_on(call);
    char *ok = NULL; /* the host this stream was authorized for (mutual TLS) */
    while (r == 0) {
        ProtobufCMessage *msg = NULL;
        r = dfc_rpc_call_recv(call, &msg, err);
        if (r <= 0) {
            break; /* 0: the client closed its side, OK */
        }
        const announce_req *m = (const announce_req *)msg;
        /* A message failing validation ends the stream INVALID_ARGUMENT, the peer untouched. */
        r = sched_validate_announce_peer(m, err);
        if (r == 0 && authn) {
            r = authorize(svc, call, m, &ok, err);
        }
        /* Every step on an existing peer checks that it is this host's (mutual TLS). */
        const char *owner = authn ? m->host_id : NULL;
        if (r == 0 && !logged) {
            dfc_rpc_call_log_field(call, "host_id", m->host_id);
            dfc_rpc_call_log_field(call, "task_id", m->task_id);
            dfc_rpc_call_log_field(call, "peer_id", m->peer_id);
            logged = true;
        }
        struct dfc_error step;
        bool done = false;
        switch (r == 0 ? (int)m->request_case : 0) {
        case 0:
            break;
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_REGISTER_PERSISTENT_CACHE_PEER_REQUEST:
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST:
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST:
            if (m->request_case ==
                SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_REGISTER_PERSISTENT_CACHE_PEER_REQUEST) {
                r = on_register(svc, call, m, owner, err);
            } else if (
                m->request_case ==
                SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST) {
                r = on_started(svc, call, m, owner, err);
            } else {
                r = on_reschedule(svc, call, m, owner, err);
            }
            /* A failed step fails the peer if it exists; the stream ends with the step's own
             * error (upstream ends a failed register with "peer not found" instead). */
            if (r < 0 && mark_failed(svc, call, m->peer_id, owner, &step) < 0) {
                DFC_LOG(DFC_LOG_DEBUG, "scheduler.mark_failed", "peer_id=%s error=\"%s\"",
                        m->peer_id, dfc_error_msg(&step));
            }
            break;
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST:
            r = on_end(svc, call, m->peer_id, owner, true, err);
            if (r < 0 && mark_failed(svc, call, m->peer_id, owner, &step) < 0) {
                DFC_LOG(DFC_LOG_DEBUG, "scheduler.mark_failed", "peer_id=%s error=\"%s\"",
                        m->peer_id, dfc_error_msg(&step));
            }
            done = true;
            break;
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST:
            r = on_end(svc, call, m->peer_id, owner, false, err);
            done = true;
            break;
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FINISHED_REQUEST:
        case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FAILED_REQUEST:
            /* Piece reports are best effort: an error is logged and the stream goes on; a
             * report on another host's peer ends it PERMISSION_DENIED. */
            r = m->request_case ==
                        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FINISHED_REQUEST
                    ? on_piece_finished(svc, call, m, owner, &step)
                    : on_piece_failed(svc, call, m, owner, &step);
            if (r == -EACCES) {
                *err = step;
            } else if (r < 0) {
                DFC_LOG(DFC_LOG_WARN, "scheduler.piece_report_failed",
                        "peer_id=%s error=\"%s\", ignoring", m->peer_id, dfc_error_msg(&step));
                r = 0;
            }
            break;
        }
        dfc_rpc_msg_free(msg);
        if (done) {
            break;
        }
    }
    free(ok);
    return r;
}

/* At most server.maxAnnounceStreamsPerHost streams per remote: each holds a worker for its
 * life, so one host's idle streams would otherwise take every worker streams may use and block
 * every other host's downloads (RESOURCE_EXHAUSTED beyond it). */
int sched__announce_peer(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                         ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    char remote[DFC_RPC_REMOTE_MAX];
    int r = dfc_stream_cap_enter(&svc->announce_cap, call, remote, err);
    if (r == 0) {
        r = announce_loop(svc, call, err);
        dfc_stream_cap_leave(&svc->announce_cap, remote);
    }
    return r;
}

/* ---- unary ---- */

int sched__stat_peer(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                     ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__StatPersistentCachePeerRequest *req =
        (const Scheduler__V2__StatPersistentCachePeerRequest *)reqp;
    int r = sched_validate_stat_peer(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "peer_id", req->peer_id);
    int64_t dl = sched__deadline(svc, call);
    struct sched_peer p = {0};
    struct sched_task t = {0};
    struct sched_host h = {0};
    uint64_t all = 0, persistent = 0;
    r = sched_peer_load(svc->store, dl, req->peer_id, &p, err);
    if (r == 0) {
        r = sched_task_load(svc->store, dl, p.task_id, &t, err);
    }
    if (r == 0) {
        r = sched_host_load(svc->store, dl, p.host_id, &h, err);
    }
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "persistent cache peer %s not found", req->peer_id);
    }
    if (r == 0) {
        r = sched_task_replica_counts(svc->store, dl, t.id, &all, &persistent, err);
    }
    if (r == 0) {
        /* The host's cluster id is the scheduler's own here, as upstream. */
        r = sched__peer_to_proto(call, &p, &t, all, persistent, &h, svc->cfg->cluster_id,
                                 (Common__V2__PersistentCachePeer *)resp, err);
    }
    sched_peer_done(&p);
    sched_task_done(&t);
    sched_host_done(&h);
    return r;
}

int sched__delete_peer(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                       ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__DeletePersistentCachePeerRequest *req =
        (const Scheduler__V2__DeletePersistentCachePeerRequest *)reqp;
    int r = sched_validate_delete_peer(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "peer_id", req->peer_id);
    int64_t dl = sched__deadline(svc, NULL); /* not cut short by the client, as upstream */
    struct sched_peer p = {0};
    struct sched_host h = {0};
    bool have_host = false;
    if (sched_authz_on(call)) {
        /* Only by its own host: the one its record names (else the one the request names). */
        char *owner = NULL;
        r = sched_peer_owner(svc->store, dl, req->peer_id, &owner, err);
        if (r == 0 || r == -ENOENT) {
            r = sched_authz_stored_host(svc->store, dl, call, "delete a peer of",
                                        owner != NULL ? owner : req->host_id, err);
        }
        free(owner);
        if (r < 0) {
            return r;
        }
    }
    /* Unlike upstream, a peer whose task or host hash is gone is still deleted (the store reads
     * its task and host ids from the peer hash itself). */
    r = sched_peer_load(svc->store, dl, req->peer_id, &p, err);
    if (r == 0) {
        have_host = sched_host_load(svc->store, dl, p.host_id, &h, err) == 0;
    }
    if (r == 0 || r == -ENOENT) {
        r = sched_peer_delete(svc->store, dl, req->peer_id, err);
        if (r == -ENOENT) {
            r = dfc_error_set(err, -ENOENT, "persistent cache peer %s not found", req->peer_id);
        }
    }
    if (r == 0 && have_host && svc->placement != NULL) {
        struct dfc_error ignored;
        if (sched_placement_delete_copy(svc->placement, &h, req->task_id, &ignored) < 0) {
            DFC_LOG(DFC_LOG_WARN, "scheduler.delete_copy_failed",
                    "task_id=%s host_id=%s error=\"%s\", ignoring", req->task_id, h.id,
                    dfc_error_msg(&ignored));
        }
    }
    if (r == 0 && svc->placement != NULL) {
        const char *block[] = {req->host_id};
        sched_placement_replicate(svc->placement, p.task_id != NULL ? p.task_id : req->task_id,
                                  block, 1);
    }
    sched_peer_done(&p);
    sched_host_done(&h);
    return r;
}
