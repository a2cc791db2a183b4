/*
 * store_upload.c - the upload path's calls (store.h): each answers what several manager calls
 * would, in fewer round trips (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * DESIGN
 *   Round trips are what a call costs (each one a blocking read on a handler thread), so the
 *   upload path takes few: Started reads its host, task and peer in one pipeline
 *   (sched_store_load_upload) and writes the task and the uploader's peer in one script
 *   (store.c's lua_store_task_peer, which runs the same steps as lua_store_task and
 *   lua_store_peer); Finished and Failed read the peer with the task and host it most likely
 *   names in one pipeline (sched_store_load_peer_task) and write both in that script, which
 *   also returns the replica counts; a task with its counts is one pipeline (store_task.c).
 *   Reads in a pipeline are not atomic together, as the separate reads were not; every write
 *   still is one script.
 */
#include "store.h"
#include "store_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/cleanup.h"

int sched_store_load_upload(struct sched_store *s, int64_t dl, const char *host_id,
                            struct sched_host *host, const char *task_id, struct sched_task *task,
                            const char *peer_id, struct sched_peer *peer, int rs[3],
                            struct dfc_error errs[3], struct dfc_error *err) {
    memset(host, 0, sizeof(*host));
    memset(task, 0, sizeof(*task));
    memset(peer, 0, sizeof(*peer));
    const char *what[3] = {"host id", "task id", "peer id"};
    const char *ids[3] = {host_id, task_id, peer_id};
    char *keys[3] = {NULL, NULL, NULL};
    const char *send[3];
    size_t slot[3], n = 0;
    int r = 0;
    for (size_t i = 0; i < 3; i++) {
        errs[i] = (struct dfc_error){0};
        rs[i] = sched__check_id(what[i], ids[i], &errs[i]);
        if (rs[i] < 0) {
            continue; /* refused as the single load refuses it, and not sent */
        }
        keys[i] = i == 0   ? sched__host_key(s, host_id)
                  : i == 1 ? sched__task_key(s, task_id)
                           : sched__peer_key(s, peer_id);
        if (keys[i] == NULL) {
            r = dfc_error_set(err, -ENOMEM, "load upload records: out of memory");
            goto out;
        }
        slot[n] = i;
        send[n++] = keys[i];
    }
    struct sched__kv kv[3];
    int got[3];
    struct dfc_error got_err[3];
    r = sched__hgetall_n(s, dl, n, send, kv, got, got_err, err);
    if (r < 0) {
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        size_t i = slot[j];
        errs[i] = got_err[j];
        rs[i] = i == 0   ? sched__host_from_kv(host_id, got[j], &kv[j], host, &errs[i])
                : i == 1 ? sched__task_from_kv(task_id, got[j], &kv[j], task, &errs[i])
                         : sched__peer_from_kv(s, dl, peer_id, got[j], &kv[j], peer, &errs[i]);
    }
out:
    for (size_t i = 0; i < 3; i++) {
        free(keys[i]);
    }
    return r;
}

int sched_store_task_peer(struct sched_store *s, int64_t dl, const struct sched_task *t,
                          const struct sched_peer *p, uint64_t *all, uint64_t *persistent,
                          struct dfc_error *err) {
    int r = sched__check_id("task id", t->id, err);
    if (r == 0) {
        r = sched__check_peer(p, t->id, err);
    }
    if (r < 0) {
        return r;
    }
    struct sched_fields tf, pf;
    r = sched_task_encode(t, &tf);
    if (r < 0) {
        return dfc_error_set(err, r, "store task %s: cannot encode", t->id);
    }
    r = sched_peer_encode(p, &pf);
    if (r < 0) {
        sched_fields_done(&tf);
        return r == -EMSGSIZE ? dfc_error_set(err, r,
                                              "store peer %s: block_parents holds %zu ids, at "
                                              "most %d",
                                              p->id, p->n_block_parents, SCHED_BLOCK_PARENTS_MAX)
                              : dfc_error_set(err, r, "store peer %s: cannot encode", p->id);
    }
    char *k[5] = {sched__peer_key(s, p->id), sched__task_peers_key(s, p->task_id),
                  sched__task_persistent_peers_key(s, p->task_id),
                  sched__host_peers_key(s, p->host_id), sched__task_key(s, t->id)};
    char ttl[24], n_peer[16];
    const char *args[4 + 2 * 64 + 2 * 64];
    size_t lens[4 + 2 * 64 + 2 * 64];
    redisReply *rep = NULL;
    if (k[0] == NULL || k[1] == NULL || k[2] == NULL || k[3] == NULL || k[4] == NULL) {
        r = dfc_error_set(err, -ENOMEM, "store task %s and peer %s: out of memory", t->id, p->id);
        goto out;
    }
    snprintf(ttl, sizeof(ttl), "%" PRId64, sched__remaining_ttl(t));
    snprintf(n_peer, sizeof(n_peer), "%zu", 2 * pf.n);
    args[0] = ttl;
    args[1] = p->id;
    args[2] = p->persistent ? "1" : "0";
    args[3] = n_peer;
    for (int i = 0; i < 4; i++) {
        lens[i] = strlen(args[i]);
    }
    int n = sched__append_fields(&pf, args, lens, 4);
    n = sched__append_fields(&tf, args, lens, n);
    r = sched__eval(s, dl, &s->store_task_peer, 5, (const char **)k, n, args, lens, &rep, err);
    if (r < 0) {
        dfc_error_prefix(err, "store task %s and peer %s", t->id, p->id);
        goto out;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "store task %s and peer %s: unexpected reply", t->id,
                          p->id);
        goto out;
    }
    if (all != NULL) {
        *all = (uint64_t)rep->element[0]->integer;
    }
    if (persistent != NULL) {
        *persistent = (uint64_t)rep->element[1]->integer;
    }
out:
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    for (size_t i = 0; i < 5; i++) {
        free(k[i]);
    }
    sched_fields_done(&tf);
    sched_fields_done(&pf);
    return r;
}

/* sched_peer_load's answer and then sched_task_load's for the peer's task, the slow way:
 * three round trips. */
static int load_peer_then_task(struct sched_store *s, int64_t dl, const char *peer_id,
                               struct sched_peer *peer, struct sched_task *task,
                               struct dfc_error *err) {
    int r = sched_peer_load(s, dl, peer_id, peer, err);
    if (r == 0) {
        r = sched_task_load(s, dl, peer->task_id, task, err);
    }
    if (r < 0) {
        sched_peer_done(peer);
    }
    return r;
}

int sched_store_load_peer_task(struct sched_store *s, int64_t dl, const char *peer_id,
                               const char *host_hint, const char *task_hint,
                               struct sched_peer *peer, struct sched_task *task,
                               struct dfc_error *err) {
    memset(peer, 0, sizeof(*peer));
    memset(task, 0, sizeof(*task));
    int r = sched__check_id("peer id", peer_id, err);
    if (r < 0) {
        return r;
    }
    struct dfc_error ignored;
    if (sched__check_id("host id", host_hint, &ignored) < 0 ||
        sched__check_id("task id", task_hint, &ignored) < 0) {
        return load_peer_then_task(s, dl, peer_id, peer, task, err);
    }
    _cleanup_free_ char *pk = sched__peer_key(s, peer_id);
    _cleanup_free_ char *tk = sched__task_key(s, task_hint);
    _cleanup_free_ char *hk = sched__host_key(s, host_hint);
    if (pk == NULL || tk == NULL || hk == NULL) {
        return dfc_error_set(err, -ENOMEM, "load peer: out of memory");
    }
    /* The peer hash, and the task hash and host existence it most likely names: one trip. */
    const char *const words[3][2] = {{"HGETALL", pk}, {"HGETALL", tk}, {"EXISTS", hk}};
    redisReply *reps[3] = {NULL, NULL, NULL};
    r = sched__pipeline2(s, dl, 3, words, reps, err);
    if (r < 0) {
        return dfc_error_prefix(err, "load peer %s", peer_id);
    }
    struct sched__kv pkv, tkv;
    r = sched__hgetall_reply(pk, reps[0], &pkv, err);
    r = sched__peer_decode_kv(peer_id, r, &pkv, peer, err);
    if (r == 0 &&
        (strcmp(peer->task_id, task_hint) != 0 || strcmp(peer->host_id, host_hint) != 0)) {
        /* It names another task or host than the caller's: check those, as a load does. */
        sched_peer_done(peer);
        freeReplyObject(reps[1]);
        freeReplyObject(reps[2]);
        return load_peer_then_task(s, dl, peer_id, peer, task, err);
    }
    if (r < 0) {
        freeReplyObject(reps[1]);
        freeReplyObject(reps[2]);
        return r;
    }
    if (reps[2]->type != REDIS_REPLY_INTEGER) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "load peer %s: unexpected reply", peer_id);
        freeReplyObject(reps[1]);
        freeReplyObject(reps[2]);
        sched_peer_done(peer);
        return r;
    }
    bool host = reps[2]->integer > 0;
    freeReplyObject(reps[2]);
    struct dfc_error terr = {0};
    int tr = sched__hgetall_reply(tk, reps[1], &tkv, &terr);
    /* A key that HGETALL fails on EXISTS: the peer is found, then its task load fails. */
    bool task_there = tr < 0 || tkv.n > 0;
    if (!host || !task_there) {
        if (tr == 0) {
            sched__kv_done(&tkv);
        }
        return sched__peer_gone(peer_id, host, task_there, peer, err);
    }
    if (tr < 0 && err != NULL) {
        *err = terr;
    }
    r = sched__task_from_kv(task_hint, tr, &tkv, task, err);
    if (r < 0) {
        sched_peer_done(peer);
    }
    return r;
}
