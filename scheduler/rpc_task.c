/*
 * rpc_task.c - the uploader's side of a persistent cache task: UploadPersistentCacheTask
 * Started / Finished / Failed, and StatPersistentCacheTask, DeletePersistentCacheTask.
 *
 * As upstream (docs/dragonfly-compat.md, "Scheduler on Redis"), except on purpose: a failed
 * upload marks the task Failed (upstream fires Succeeded, so the task could neither be exported
 * nor uploaded again until its TTL); a Succeeded task with no copy left (every peer deleted:
 * its hosts stopped, were collected or removed their copies) may be uploaded again, as a Failed
 * one (upstream answers ALREADY_EXISTS until the TTL, so content still on a node's disk could
 * never be offered again); and a task delete removes every peer record of the task, also
 * those whose host hash is already gone.
 *
 * Under mutual TLS an upload acts only for the certificate's host (its peer too), and a task
 * is deleted only by one of its importing hosts (recorded at each finished upload) or an
 * operator identity (authz.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "authz_store.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "integrity_store.h"
#include "service.h"
#include "validate.h"

/* The log fields every task call carries. */
static void log_ids(struct dfc_rpc_call *call, const char *host_id, const char *task_id,
                    const char *peer_id) {
    dfc_rpc_call_log_field(call, "host_id", host_id);
    dfc_rpc_call_log_field(call, "task_id", task_id);
    if (peer_id != NULL) {
        dfc_rpc_call_log_field(call, "peer_id", peer_id);
    }
}

/* Whether task id still has a peer record in its all-peers set (Failed peers leave it, so
 * these hold or are fetching the content, or were registered by a host not yet collected);
 * one SCARD. Errors count as yes, so a task is never taken over on a failed read. */
static bool has_copy(struct sched_service *svc, int64_t dl, const char *id) {
    uint64_t all = 1, persistent = 0;
    struct dfc_error e;
    if (sched_task_replica_counts(svc->store, dl, id, &all, &persistent, &e) < 0) {
        return true;
    }
    return all > 0;
}

/* An FSM refusal is INTERNAL with the FSM's text, as upstream answers it. */
static int fsm_internal(int r, struct dfc_error *err) {
    if (r == DFC_E_FAILED_PRECONDITION) {
        err->code = DFC_E_INTERNAL;
        return DFC_E_INTERNAL;
    }
    return r;
}

/* Whether an upload of a Succeeded task with copies may add its copy to it instead of being
 * refused ALREADY_EXISTS: the same geometry, and its host not excluded from the task for
 * serving a piece that failed verification. Not as upstream (which refuses it): an id claimed
 * first by wrong bytes must not keep an honest importer's copy from being offered; downloads
 * verify what they get (docs/integrity.md). A host that holds a live peer of the task already
 * is refused, as before. */
static bool may_join(struct sched_service *svc, int64_t dl, const struct sched_task *t,
                     const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *req) {
    if (t->piece_length != req->piece_length || t->content_length != req->content_length ||
        t->total_piece_count != req->piece_count) {
        return false;
    }
    /* Copies there (else it is uploaded again as a new task), none on this host already. */
    struct sched_peer *peers = NULL;
    size_t n = 0;
    struct dfc_error pe;
    if (sched_peer_load_by_task(svc->store, dl, t->id, &peers, &n, &pe) < 0) {
        return false;
    }
    bool mine = false, live = false;
    for (size_t i = 0; i < n; i++) {
        live = live || peers[i].state != SCHED_PEER_FAILED;
        mine = mine ||
               (peers[i].state != SCHED_PEER_FAILED && strcmp(peers[i].host_id, req->host_id) == 0);
    }
    sched_peer_list_free(peers, n);
    if (!live || mine) {
        return false;
    }
    struct sched_ids ex = {0};
    struct dfc_error e;
    if (sched_parents_excluded(svc->store, dl, t->id, &ex, &e) < 0) {
        return false;
    }
    bool excluded = false;
    for (size_t i = 0; i < ex.n && !excluded; i++) {
        excluded = strcmp(ex.ids[i], req->host_id) == 0;
    }
    sched_ids_free(&ex);
    return !excluded;
}

/* The uploader's peer of t (Succeeded, left as it is): Uploading, until its Finished. */
static int join_upload(struct sched_service *svc, int64_t dl, const struct sched_task *t,
                       const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *req,
                       int64_t now, struct dfc_error *err) {
    struct sched_peer peer = {
        .id = req->peer_id,
        .persistent = true,
        .state = SCHED_PEER_PENDING,
        .block_parents_null = true,
        .task_id = req->task_id,
        .host_id = req->host_id,
        .created_at = now,
        .updated_at = now,
        .concurrent_piece_count = 8,
    };
    if (sched_bitset_init(&peer.finished_pieces, req->piece_count) < 0) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = fsm_internal(sched_peer_fire(&peer.state, SCHED_PEER_EV_UPLOAD, err), err);
    if (r == 0) {
        r = sched_peer_store(svc->store, dl, &peer, t, err);
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "task.upload_joined",
                "task_id=%s host_id=%s peer_id=%s: another copy of a Succeeded task", req->task_id,
                req->host_id, req->peer_id);
    }
    sched_bitset_done(&peer.finished_pieces);
    return r;
}

int sched__upload_started(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                          ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *req =
        (const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *)reqp;
    int r = sched_validate_upload_started(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    log_ids(call, req->host_id, req->task_id, req->peer_id);
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);
    bool join = false;
    if ((r = sched_authz_stored_host(svc->store, dl, call, "upload for", req->host_id, err)) < 0) {
        return r;
    }

    /* The host, the task and the peer in one round trip; judged in that order. */
    struct sched_host host;
    struct sched_task old;
    struct sched_peer existing;
    int rs[3];
    struct dfc_error errs[3];
    r = sched_store_load_upload(svc->store, dl, req->host_id, &host, req->task_id, &old,
                                req->peer_id, &existing, rs, errs, err);
    if (r < 0) {
        return r;
    }
    if (rs[0] == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "host %s not found", req->host_id);
    } else if (rs[0] < 0) {
        *err = errs[0];
        r = rs[0];
    } else if (rs[1] == 0) {
        /* A task that exists and cannot take Upload (Uploading, Succeeded) is taken, but for
         * another copy of a Succeeded one (may_join). */
        enum sched_task_state s = old.state;
        struct dfc_error ignored;
        if (old.state == SCHED_TASK_SUCCEEDED && may_join(svc, dl, &old, req)) {
            join = true;
        } else if (sched_task_fire(&s, SCHED_TASK_EV_UPLOAD, &ignored) < 0 &&
                   (old.state != SCHED_TASK_SUCCEEDED || has_copy(svc, dl, req->task_id))) {
            r = dfc_error_set(err, -EEXIST, "persistent cache task %s is %s cannot upload",
                              req->task_id, sched_task_state_name(old.state));
        } else if (old.state == SCHED_TASK_SUCCEEDED) {
            DFC_LOG(DFC_LOG_INFO, "task.upload_again",
                    "task_id=%s host_id=%s: Succeeded with no copy left, uploaded again",
                    req->task_id, req->host_id);
        }
    } else if (rs[1] != -ENOENT) {
        *err = errs[1];
        r = rs[1];
    }
    /* Upstream checks the peer after storing the new task, which leaves a task Uploading with
     * no uploader behind; here a taken peer id changes nothing. */
    if (r == 0 && rs[2] == 0) {
        r = dfc_error_set(err, -EEXIST, "persistent cache peer %s already exists", req->peer_id);
    } else if (r == 0 && rs[2] != -ENOENT) {
        *err = errs[2];
        r = rs[2];
    }
    sched_host_done(&host);
    sched_peer_done(&existing);
    if (r < 0 || join) {
        if (r == 0) {
            r = join_upload(svc, dl, &old, req, now, err);
        }
        sched_task_done(&old);
        return r;
    }
    sched_task_done(&old);
    struct sched_task task = {
        .id = req->task_id,
        .persistent_replica_count = req->persistent_replica_count,
        .tag = req->opt_tag_case != 0 ? req->tag : "",
        .application = req->opt_application_case != 0 ? req->application : "",
        .piece_length = req->piece_length,
        .content_length = req->content_length,
        .total_piece_count = req->piece_count,
        .state = SCHED_TASK_PENDING,
        .ttl_ns = 0, /* an absent ttl passes validation as 0, as upstream */
        .created_at = now,
        .updated_at = now,
    };
    if (req->ttl != NULL) {
        (void)dfc_pb_duration_to_ns(req->ttl, &task.ttl_ns); /* validated */
    }
    if ((r = fsm_internal(sched_task_fire(&task.state, SCHED_TASK_EV_UPLOAD, err), err)) < 0) {
        return r;
    }

    struct sched_peer peer = {
        .id = req->peer_id,
        .persistent = true,
        .state = SCHED_PEER_PENDING,
        .block_parents_null = true, /* upstream's nil list: "null" */
        .task_id = req->task_id,
        .host_id = req->host_id,
        .created_at = now,
        .updated_at = now,
        .concurrent_piece_count = 8,
    };
    if (sched_bitset_init(&peer.finished_pieces, req->piece_count) < 0) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    r = fsm_internal(sched_peer_fire(&peer.state, SCHED_PEER_EV_UPLOAD, err), err);
    if (r == 0) { /* the task, then its uploader's peer: one script */
        r = sched_store_task_peer(svc->store, dl, &task, &peer, NULL, NULL, err);
    }
    sched_bitset_done(&peer.finished_pieces);
    return r;
}

/* Finished's and Failed's write: the peer and its task in one script when the task's event
 * is accepted; when it is refused, the peer alone, then the refusal (as when they were two
 * writes). */
static int store_peer_and_task(struct sched_service *svc, int64_t dl, struct sched_peer *peer,
                               struct sched_task *task, enum sched_task_event ev, int64_t now,
                               uint64_t *all, uint64_t *persistent, struct dfc_error *err) {
    if (task->state == SCHED_TASK_SUCCEEDED) {
        /* A copy joining a Succeeded task (may_join): the task stays as it is. */
        int w = sched_peer_store(svc->store, dl, peer, task, err);
        if (w == 0 && (all != NULL || persistent != NULL)) {
            uint64_t a = 0, p = 0;
            w = sched_task_replica_counts(svc->store, dl, task->id, &a, &p, err);
            if (all != NULL) {
                *all = a;
            }
            if (persistent != NULL) {
                *persistent = p;
            }
        }
        return w;
    }
    struct dfc_error refused = {0};
    int r = fsm_internal(sched_task_fire(&task->state, ev, &refused), &refused);
    if (r < 0) {
        int w = sched_peer_store(svc->store, dl, peer, task, err);
        if (w < 0) {
            return w;
        }
        if (err != NULL) {
            *err = refused;
        }
        return r;
    }
    task->updated_at = now;
    return sched_store_task_peer(svc->store, dl, task, peer, all, persistent, err);
}

/* The host whose upload of t finished is one of its importers (authz.h: who may delete it);
 * a new import (reset) replaces the set. Best effort: a failure is logged. */
static void record_importer(struct sched_service *svc, int64_t dl, const struct sched_task *t,
                            const char *host_id, bool reset, int64_t now) {
    int64_t ttl = t->ttl_ns / DFC_NS_PER_SEC - (now - t->created_at);
    struct dfc_error e;
    int r = ttl > 0 ? sched_importer_add(svc->store, dl, t->id, host_id, reset, ttl, &e) : 1;
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "task.importer_not_recorded", "task_id=%s host_id=%s error=\"%s\"",
                t->id, host_id, dfc_error_msg(&e));
    }
}

int sched__upload_finished(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                           ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__UploadPersistentCacheTaskFinishedRequest *req =
        (const Scheduler__V2__UploadPersistentCacheTaskFinishedRequest *)reqp;
    int r = sched_validate_upload_finished(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    log_ids(call, req->host_id, req->task_id, req->peer_id);
    int64_t dl = sched__deadline(svc, call), now_ns = svc->now_ns();
    int64_t now = now_ns / DFC_NS_PER_SEC;

    struct sched_peer peer = {0};
    struct sched_task task = {0};
    uint64_t all = 0, persistent = 0;
    bool authn = sched_authz_on(call), joined = false;
    if (authn &&
        (r = sched_authz_stored_host(svc->store, dl, call, "upload for", req->host_id, err)) < 0) {
        return r;
    }
    r = sched_store_load_peer_task(svc->store, dl, req->peer_id, req->host_id, req->task_id, &peer,
                                   &task, err);
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "persistent cache peer %s not found", req->peer_id);
        goto out;
    }
    if (r < 0 || (r = sched_authz_peer_owner(req->peer_id, peer.host_id,
                                             authn ? req->host_id : NULL, err)) < 0) {
        goto out;
    }
    joined = task.state == SCHED_TASK_SUCCEEDED;
    sched_bitset_set_all(&peer.finished_pieces);
    if ((r = fsm_internal(sched_peer_fire(&peer.state, SCHED_PEER_EV_SUCCEEDED, err), err)) < 0) {
        goto out;
    }
    peer.cost_ns = now_ns - peer.created_at * DFC_NS_PER_SEC;
    peer.updated_at = now;
    if ((r = store_peer_and_task(svc, dl, &peer, &task, SCHED_TASK_EV_SUCCEEDED, now, &all,
                                 &persistent, err)) < 0 ||
        (r = sched__task_to_proto(call, &task, all, persistent,
                                  (Common__V2__PersistentCacheTask *)resp, err)) < 0) {
        goto out;
    }
    record_importer(svc, dl, &task, peer.host_id, !joined, now);
    if (svc->placement != NULL) {
        const char *block[] = {peer.host_id};
        sched_placement_replicate(svc->placement, task.id, block, 1);
    }
out:
    sched_peer_done(&peer);
    sched_task_done(&task);
    return r;
}

int sched__upload_failed(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                         ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__UploadPersistentCacheTaskFailedRequest *req =
        (const Scheduler__V2__UploadPersistentCacheTaskFailedRequest *)reqp;
    int r = sched_validate_upload_failed(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    log_ids(call, req->host_id, req->task_id, req->peer_id);
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);

    struct sched_peer peer = {0};
    struct sched_task task = {0};
    bool authn = sched_authz_on(call);
    if (authn &&
        (r = sched_authz_stored_host(svc->store, dl, call, "upload for", req->host_id, err)) < 0) {
        return r;
    }
    r = sched_store_load_peer_task(svc->store, dl, req->peer_id, req->host_id, req->task_id, &peer,
                                   &task, err);
    if (r == -ENOENT) {
        r = dfc_error_set(err, -ENOENT, "persistent cache peer %s not found", req->peer_id);
        goto out;
    }
    if (r < 0 ||
        (r = sched_authz_peer_owner(req->peer_id, peer.host_id, authn ? req->host_id : NULL, err)) <
            0 ||
        (r = fsm_internal(sched_peer_fire(&peer.state, SCHED_PEER_EV_FAILED, err), err)) < 0) {
        goto out;
    }
    peer.updated_at = now;
    /* Fixed on purpose: the task fails with its upload (upstream fires Succeeded here), so a
     * new Started may upload it again (Failed -Upload-> Uploading). */
    r = store_peer_and_task(svc, dl, &peer, &task, SCHED_TASK_EV_FAILED, now, NULL, NULL, err);
out:
    sched_peer_done(&peer);
    sched_task_done(&task);
    return r;
}

int sched__stat_task(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                     ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__StatPersistentCacheTaskRequest *req =
        (const Scheduler__V2__StatPersistentCacheTaskRequest *)reqp;
    int r = sched_validate_stat_task(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    log_ids(call, req->host_id, req->task_id, NULL);
    int64_t dl = sched__deadline(svc, call);
    struct sched_task task = {0};
    uint64_t all = 0, persistent = 0;
    r = sched_store_load_task_counts(svc->store, dl, req->task_id, &task, &all, &persistent, err);
    if (r == -ENOENT) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id);
    }
    if (r == 0) {
        r = sched__task_to_proto(call, &task, all, persistent,
                                 (Common__V2__PersistentCacheTask *)resp, err);
    }
    sched_task_done(&task);
    return r;
}

int sched__delete_task(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                       ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__DeletePersistentCacheTaskRequest *req =
        (const Scheduler__V2__DeletePersistentCacheTaskRequest *)reqp;
    int r = sched_validate_delete_task(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    log_ids(call, req->host_id, req->task_id, NULL);
    /* As upstream, the work is not cut short by the client going away; each Redis step is
     * still bounded by database.redis.timeout. */
    int64_t dl = sched__deadline(svc, NULL);
    struct sched_ids ids = {0};
    if ((r = sched_authz_task_delete(svc->store, dl, call, &svc->cfg->operator_identities,
                                     req->task_id, err)) < 0) {
        return r;
    }
    if ((r = sched_peer_ids_by_task(svc->store, dl, req->task_id, false, &ids, err)) < 0) {
        return r;
    }
    /* The hosts holding a copy, asked to delete it once the records are gone. */
    struct sched_host *hosts = calloc(ids.n + 1, sizeof(*hosts));
    size_t n_hosts = 0;
    if (hosts == NULL) {
        sched_ids_free(&ids);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < ids.n; i++) {
        struct sched_peer p = {0};
        dl = sched__deadline(svc, NULL); /* per peer: a task with many peers is not cut short */
        int lr = sched_peer_load(svc->store, dl, ids.ids[i], &p, err);
        if (lr == 0 && sched_host_load(svc->store, dl, p.host_id, &hosts[n_hosts], err) == 0) {
            n_hosts++;
        }
        sched_peer_done(&p);
        if (lr < 0 && lr != -ENOENT) {
            r = lr;
            break;
        }
        /* Unlike upstream, a peer whose task or host hash is gone is deleted too. */
        r = sched_peer_delete(svc->store, dl, ids.ids[i], err);
        r = r == -ENOENT ? 0 : r;
    }
    if (r == 0) {
        r = sched_task_delete(svc->store, sched__deadline(svc, NULL), req->task_id, err);
        r = r == -ENOENT ? 0 : r; /* OK for a task that does not exist, as upstream */
    }
    struct dfc_error ie;
    if (r == 0 &&
        sched_importers_delete(svc->store, sched__deadline(svc, NULL), req->task_id, &ie) < 0) {
        DFC_LOG(DFC_LOG_WARN, "task.importers_not_deleted", "task_id=%s error=\"%s\", ignoring",
                req->task_id, dfc_error_msg(&ie)); /* they expire with the task */
    }
    for (size_t i = 0; i < n_hosts; i++) {
        struct dfc_error ignored;
        if (r == 0 && svc->placement != NULL &&
            sched_placement_delete_copy(svc->placement, &hosts[i], req->task_id, &ignored) < 0) {
            DFC_LOG(DFC_LOG_WARN, "scheduler.delete_copy_failed",
                    "task_id=%s host_id=%s error=\"%s\", ignoring", req->task_id, hosts[i].id,
                    dfc_error_msg(&ignored));
        }
        sched_host_done(&hosts[i]);
    }
    free(hosts);
    sched_ids_free(&ids);
    return r;
}
