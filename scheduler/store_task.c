/*
 * store_task.c - the task manager: P:persistent-cache-tasks:<id> hashes, EXPIREd to the
 * task's remaining TTL on every store, and the replica counts from the task's two peer sets,
 * as upstream's TaskManager (docs/dragonfly-compat.md, "Scheduler on Redis").
 */
#include "store.h"
#include "store_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dfc/cleanup.h"

int sched_task_load(struct sched_store *s, int64_t dl, const char *id, struct sched_task *out,
                    struct dfc_error *err) {
    memset(out, 0, sizeof(*out));
    int r = sched__check_id("task id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__task_key(s, id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "load task: out of memory");
    }
    struct sched__kv kv;
    r = sched__hgetall(s, dl, k, &kv, err);
    return sched__task_from_kv(id, r, &kv, out, err);
}

static int decode_task(const char *const *kv, const size_t *lens, size_t n_kv, void *rec,
                       struct dfc_error *err) {
    return sched_task_decode(kv, lens, n_kv, rec, err);
}

static const struct sched__record_type task_type = {
    .noun = "task",
    .size = sizeof(struct sched_task),
    .decode = decode_task,
};

int sched__task_from_kv(const char *id, int r, struct sched__kv *kv, struct sched_task *out,
                        struct dfc_error *err) {
    return sched__record_from_kv(&task_type, id, r, kv, out, err);
}

int sched_task_store(struct sched_store *s, int64_t dl, const struct sched_task *t,
                     struct dfc_error *err) {
    int r = sched__check_id("task id", t->id, err);
    if (r < 0) {
        return r;
    }
    struct sched_fields f;
    r = sched_task_encode(t, &f);
    if (r < 0) {
        return dfc_error_set(err, r, "store task %s: cannot encode", t->id);
    }
    _cleanup_free_ char *k = sched__task_key(s, t->id);
    if (k == NULL) {
        sched_fields_done(&f);
        return dfc_error_set(err, -ENOMEM, "store task: out of memory");
    }
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%" PRId64, sched__remaining_ttl(t));
    const char *keys[] = {k};
    const char *args[1 + 2 * 64];
    size_t lens[1 + 2 * 64];
    args[0] = ttl;
    lens[0] = strlen(ttl);
    int n = sched__append_fields(&f, args, lens, 1);
    r = sched__eval(s, dl, &s->store_task, 1, keys, n, args, lens, NULL, err);
    sched_fields_done(&f);
    return r < 0 ? dfc_error_prefix(err, "store task %s", t->id) : 0;
}

int sched_task_delete(struct sched_store *s, int64_t dl, const char *id, struct dfc_error *err) {
    int r = sched__check_id("task id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__task_key(s, id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "delete task: out of memory");
    }
    const char *argv[] = {"DEL", k};
    r = sched__cmd(s, dl, NULL, err, 2, argv); /* the hash only, as upstream */
    return r < 0 ? dfc_error_prefix(err, "delete task %s", id) : 0;
}

int sched_task_replica_counts(struct sched_store *s, int64_t dl, const char *id, uint64_t *all,
                              uint64_t *persistent, struct dfc_error *err) {
    int r = sched__check_id("task id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k1 = sched__task_peers_key(s, id);
    _cleanup_free_ char *k2 = sched__task_persistent_peers_key(s, id);
    if (k1 == NULL || k2 == NULL) {
        return dfc_error_set(err, -ENOMEM, "replica counts: out of memory");
    }
    const char *keys[] = {k1, k2};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &s->scard2, 2, keys, 0, NULL, NULL, &rep, err);
    if (r < 0) {
        return dfc_error_prefix(err, "replica counts of task %s", id);
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return dfc_error_set(err, DFC_E_INTERNAL, "replica counts of task %s: unexpected reply",
                             id);
    }
    *all = (uint64_t)rep->element[0]->integer;
    *persistent = (uint64_t)rep->element[1]->integer;
    freeReplyObject(rep);
    return 0;
}

int sched_task_ids(struct sched_store *s, int64_t dl, struct sched_ids *out,
                   struct dfc_error *err) {
    char prefix[128], match[136];
    snprintf(prefix, sizeof(prefix), "%s:persistent-cache-tasks:", s->prefix);
    snprintf(match, sizeof(match), "%s*", prefix);
    int r = sched__scan(s, dl, NULL, match, prefix, out, err);
    return r < 0 ? dfc_error_prefix(err, "list tasks") : 0;
}

int sched_store_load_task_counts(struct sched_store *s, int64_t dl, const char *id,
                                 struct sched_task *task, uint64_t *all, uint64_t *persistent,
                                 struct dfc_error *err) {
    memset(task, 0, sizeof(*task));
    *all = 0;
    *persistent = 0;
    int r = sched__check_id("task id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__task_key(s, id);
    _cleanup_free_ char *k1 = sched__task_peers_key(s, id);
    _cleanup_free_ char *k2 = sched__task_persistent_peers_key(s, id);
    if (k == NULL || k1 == NULL || k2 == NULL) {
        return dfc_error_set(err, -ENOMEM, "load task: out of memory");
    }
    const char *const words[3][2] = {{"HGETALL", k}, {"SCARD", k1}, {"SCARD", k2}};
    redisReply *reps[3] = {NULL, NULL, NULL};
    r = sched__pipeline2(s, dl, 3, words, reps, err);
    if (r < 0) {
        return dfc_error_prefix(err, "load task %s", id);
    }
    bool counted = reps[1]->type == REDIS_REPLY_INTEGER && reps[2]->type == REDIS_REPLY_INTEGER;
    struct dfc_error count_err = {0};
    if (counted) {
        *all = (uint64_t)reps[1]->integer;
        *persistent = (uint64_t)reps[2]->integer;
    } else {
        /* A set key holding another type, as sched_task_replica_counts refuses it. */
        const redisReply *e = reps[1]->type == REDIS_REPLY_ERROR ? reps[1] : reps[2];
        dfc_error_set(&count_err, DFC_E_INTERNAL, "replica counts of task %s: %s", id,
                      e->type == REDIS_REPLY_ERROR && e->str != NULL ? e->str : "unexpected reply");
    }
    freeReplyObject(reps[1]);
    freeReplyObject(reps[2]);
    struct sched__kv kv;
    r = sched__hgetall_reply(k, reps[0], &kv, err);
    r = sched__task_from_kv(id, r, &kv, task, err);
    if (r == 0 && !counted) {
        sched_task_done(task);
        *all = 0;
        *persistent = 0;
        if (err != NULL) {
            *err = count_err;
        }
        return DFC_E_INTERNAL;
    }
    if (r < 0) {
        *all = 0;
        *persistent = 0;
    }
    return r;
}
