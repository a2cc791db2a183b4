/*
 * registration.c - imports registered at the scheduler, and copies unregistered when deleted
 * (see registration.h).
 *
 * Started answering ALREADY_EXISTS. The scheduler's Started (scheduler/rpc_task.c) refuses a
 * task that cannot take the Upload event, i.e. one that is Uploading or Succeeded, and a peer
 * id that exists (never ours: each is a fresh uuid). There is no call that adds an uploaded
 * copy to a task that exists (a peer joins one only through the AnnouncePersistentCachePeer
 * download), and for a content-derived id the task at the scheduler holds these very bytes.
 * So when StatPersistentCacheTask shows the task Succeeded with the same length, piece length
 * and piece count, the import returns that existing task: the content is committed locally,
 * without a peer id (the hook returns 1; the cluster's copies stay the scheduler's replicas),
 * and the caller gets the task as for any identical import. The same holds for a task still
 * Uploading when its id comes from its content (another import of these bytes, on this node or
 * another, is registering it; standalone, the store answers a concurrent identical import the
 * same way). A task Uploading under a content_for_calculating_task_id id, or whose geometry
 * differs, stays ALREADY_EXISTS for the caller, with the scheduler's message. A Succeeded task
 * with copies on other hosts and the same geometry no longer answers ALREADY_EXISTS: the
 * scheduler adds this copy as another persistent peer (scheduler/rpc_task.c, may_join), so an
 * id claimed first by wrong bytes cannot keep the honest copy from being offered.
 */
#include "registration.h"

#include <errno.h>
#include <string.h>

#include "dfc/id.h"
#include "dfc/log.h"
#include "dragonfly/common.pb-c.h"
#include "integrity_client.h"
#include "scheduler_client.h"

/* Whether the scheduler already has t with the same geometry: Succeeded, or being uploaded
 * by another import when t's id comes from its content (the same bytes, then). */
static bool exists_elsewhere(struct dfd_registration *g, const struct dfd_task_meta *t) {
    Common__V2__PersistentCacheTask *st = NULL;
    struct dfc_error e;
    if (dfd_sched_stat_task(g->sched, t->id, &st, &e) < 0) {
        return false;
    }
    bool state = strcmp(st->state, "Succeeded") == 0 ||
                 (strcmp(st->state, "Uploading") == 0 && t->id_origin == DFD_ID_ORIGIN_CONTENT);
    bool same = state && dfd_sched_same_geometry(st, t);
    dfc_rpc_msg_free(&st->base);
    return same;
}

/* The content is kept locally without a peer id: 1 tells the storage engine so, 2 also marks
 * it register_later (no scheduler took it; the next rejoin pass registers it, rejoin.h). */
static int unregister(struct dfd_registration *g, bool later) {
    g->peer_id[0] = '\0';
    return later ? 2 : 1;
}

static int before_commit(void *arg, const struct dfd_task_meta *pending, struct dfc_error *err) {
    struct dfd_registration *g = arg;
    memcpy(g->task_id, pending->id, sizeof(g->task_id));
    int r = dfd_sched_upload_started(g->sched, pending, g->peer_id, err);
    if (r < 0) {
        int code = dfc_error_to_grpc(r);
        bool timed_out = false;
        if (dfd_sched_unreachable(r, &timed_out) || code == DFC_GRPC_NOT_FOUND) {
            DFC_LOG(DFC_LOG_WARN, "import.unregistered",
                    "task_id=%s error=\"%s\": imported locally without a scheduler peer, ignoring",
                    pending->id, dfc_error_msg(err));
            if (timed_out) {
                /* Started may have been stored after all: do not leave it Uploading. */
                dfd_sched_upload_failed(g->sched, pending->id, g->peer_id,
                                        "the upload's registration timed out");
            }
            return unregister(g, true);
        }
        if (code == DFC_GRPC_ALREADY_EXISTS && exists_elsewhere(g, pending)) {
            DFC_LOG(DFC_LOG_INFO, "import.exists_in_cluster",
                    "task_id=%s: the scheduler already has it; kept locally without a peer",
                    pending->id);
            return unregister(g, false);
        }
        return r;
    }
    g->started = true; /* Finished follows the commit: dfd_registration_end() */
    return 0;
}

int dfd_registration_prepare(struct dfd_registration *g, struct dfd_sched *sched,
                             const struct dfd_config *cfg, struct dfd_import_params *p,
                             struct dfc_error *err) {
    memset(g, 0, sizeof(*g));
    g->sched = sched;
    if (sched == NULL) {
        return 0;
    }
    int r = dfc_peer_id(cfg->host_ip, cfg->hostname, g->peer_id, sizeof(g->peer_id));
    if (r < 0) {
        return dfc_error_set(err, r, "host.ip and host.hostname make a peer id that is too long");
    }
    p->peer_id = g->peer_id;
    p->before_commit = before_commit;
    p->before_commit_arg = g;
    return 0;
}

/* Finished failed after the commit (err says why): the scheduler must not keep an Uploading
 * peer, and the local copy goes unless the scheduler was only out of reach. */
static int finished_failed(struct dfd_registration *g, struct dfd_storage *s,
                           struct dfd_task_meta *t, int r, struct dfc_error *err) {
    dfd_sched_upload_failed(g->sched, t->id, g->peer_id, dfc_error_msg(err));
    if (dfd_sched_unreachable(r, NULL)) {
        /* The row keeps its peer id (the storage facade cannot clear it): withdraw the peer
         * at the scheduler instead, so it never offers this copy; a later forget repeats the
         * delete harmlessly. */
        DFC_LOG(DFC_LOG_WARN, "import.unregistered",
                "task_id=%s error=\"%s\": Finished did not reach the scheduler; kept locally "
                "without a scheduler peer",
                t->id, dfc_error_msg(err));
        dfd_sched_delete_peer(g->sched, t->id, g->peer_id);
        dfd_sched_note_unregistered(g->sched); /* uploaded again by the next rejoin pass */
        return 0;
    }
    struct dfc_error e;
    bool deleted = false;
    if (dfd_storage_delete_task(s, t, false, &deleted, &e) < 0) {
        DFC_LOG(DFC_LOG_WARN, "import.rollback_failed", "task_id=%s error=\"%s\"", t->id,
                dfc_error_msg(&e));
    }
    dfd_task_meta_done(t);
    return r;
}

int dfd_registration_end(struct dfd_registration *g, struct dfd_storage *s, int r,
                         struct dfd_task_meta *t, bool existed, struct dfc_error *err) {
    if (g->sched != NULL && r >= 0 && !existed && t->register_later) {
        dfd_sched_note_unregistered(g->sched); /* committed: the next pass will see its row */
    }
    if (g->sched == NULL || !g->started) {
        return r;
    }
    if (r < 0 || existed || strcmp(t->peer_id, g->peer_id) != 0) {
        /* Started went through but this import's row was not committed (failed, or an
         * identical task landed first): the scheduler must not keep our peer Uploading. */
        dfd_sched_upload_failed(g->sched, g->task_id, g->peer_id,
                                r < 0 ? dfc_error_msg(err) : "an identical task was stored first");
        return r;
    }
    /* Committed and visible locally: only now may the scheduler offer this copy (as upstream:
     * the task is marked finished locally, then Finished). */
    if ((r = dfd_sched_upload_finished(g->sched, t->id, g->peer_id, NULL, err)) < 0) {
        return finished_failed(g, s, t, r, err);
    }
    /* The scheduler holds the copy: now its digests, which downloads check every piece and
     * the content against (docs/integrity.md). */
    dfd_record_task_digests(g->sched, s, t);
    return 0;
}

void dfd_registration_forget(struct dfd_sched *sched, const struct dfd_task_meta *t) {
    if (sched != NULL && t->peer_id[0] != '\0') {
        dfd_sched_delete_peer(sched, t->id, t->peer_id);
    }
}
