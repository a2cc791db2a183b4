/*
 * store_peer.c - the peer manager: P:persistent-cache-peers-for-persistent-cache-task:<id>
 * hashes and their memberships in the task's all-peers and persistent-peers sets and the
 * host's peer set, all EXPIREd with the task's remaining TTL, as upstream's PeerManager
 * (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * A peer is loadable only while its host and task hashes exist, as upstream treats it. Unlike
 * upstream, delete needs neither: it reads task_id and host_id from the peer hash itself, so a
 * peer whose task expired or was deleted, or whose host was collected, can still be removed
 * with its set memberships instead of lingering until its TTL.
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

#define DELETE_ATTEMPTS 3

int sched_peer_load(struct sched_store *s, int64_t dl, const char *id, struct sched_peer *out,
                    struct dfc_error *err) {
    memset(out, 0, sizeof(*out));
    int r = sched__check_id("peer id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__peer_key(s, id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "load peer: out of memory");
    }
    struct sched__kv kv;
    r = sched__hgetall(s, dl, k, &kv, err);
    return sched__peer_from_kv(s, dl, id, r, &kv, out, err);
}

static int decode_peer(const char *const *kv, const size_t *lens, size_t n_kv, void *rec,
                       struct dfc_error *err) {
    return sched_peer_decode(kv, lens, n_kv, rec, err);
}

static int load_peer(struct sched_store *s, int64_t dl, const char *id, void *rec,
                     struct dfc_error *err) {
    return sched_peer_load(s, dl, id, rec, err);
}

static void peer_done(void *rec) {
    sched_peer_done(rec);
}

static const struct sched__record_type peer_type = {
    .noun = "peer",
    .size = sizeof(struct sched_peer),
    .decode = decode_peer,
    .load = load_peer,
    .done = peer_done,
};

int sched__peer_decode_kv(const char *id, int r, struct sched__kv *kv, struct sched_peer *out,
                          struct dfc_error *err) {
    return sched__record_from_kv(&peer_type, id, r, kv, out, err);
}

int sched__peer_gone(const char *id, bool host, bool task, struct sched_peer *out,
                     struct dfc_error *err) {
    int r = dfc_error_set(err, -ENOENT, "peer %s not found: its %s %s is gone", id,
                          !host ? "host" : "task", !host ? out->host_id : out->task_id);
    sched_peer_done(out);
    return r;
}

int sched__peer_from_kv(struct sched_store *s, int64_t dl, const char *id, int r,
                        struct sched__kv *kv, struct sched_peer *out, struct dfc_error *err) {
    r = sched__peer_decode_kv(id, r, kv, out, err);
    if (r < 0) {
        return r;
    }

    /* Its host and task must still exist (one round trip for both). */
    _cleanup_free_ char *hk = sched__host_key(s, out->host_id);
    _cleanup_free_ char *tk = sched__task_key(s, out->task_id);
    if (hk == NULL || tk == NULL) {
        sched_peer_done(out);
        return dfc_error_set(err, -ENOMEM, "load peer: out of memory");
    }
    const char *keys[] = {hk, tk};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &s->exists2, 2, keys, 0, NULL, NULL, &rep, err);
    if (r < 0) {
        sched_peer_done(out);
        return dfc_error_prefix(err, "load peer %s", id);
    }
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
              rep->element[0]->type == REDIS_REPLY_INTEGER &&
              rep->element[1]->type == REDIS_REPLY_INTEGER;
    bool host = ok && rep->element[0]->integer > 0, task = ok && rep->element[1]->integer > 0;
    freeReplyObject(rep);
    if (!ok) {
        sched_peer_done(out);
        return dfc_error_set(err, DFC_E_INTERNAL, "load peer %s: unexpected reply", id);
    }
    return !host || !task ? sched__peer_gone(id, host, task, out, err) : 0;
}

int sched__check_peer(const struct sched_peer *p, const char *task_id, struct dfc_error *err) {
    int r = sched__check_id("peer id", p->id, err);
    if (r == 0) {
        r = sched__check_id("peer task_id", p->task_id, err);
    }
    if (r == 0) {
        r = sched__check_id("peer host_id", p->host_id, err);
    }
    if (r == 0 && (task_id == NULL || strcmp(task_id, p->task_id) != 0)) {
        r = dfc_error_set(err, -EINVAL, "store peer %s: it belongs to task %s, not %s", p->id,
                          p->task_id, task_id ? task_id : "(none)");
    }
    return r;
}

int sched_peer_store(struct sched_store *s, int64_t dl, const struct sched_peer *p,
                     const struct sched_task *task, struct dfc_error *err) {
    int r = sched__check_peer(p, task->id, err);
    if (r < 0) {
        return r;
    }
    struct sched_fields f;
    r = sched_peer_encode(p, &f);
    if (r == -EMSGSIZE) {
        return dfc_error_set(err, r, "store peer %s: block_parents holds %zu ids, at most %d",
                             p->id, p->n_block_parents, SCHED_BLOCK_PARENTS_MAX);
    }
    if (r < 0) {
        return dfc_error_set(err, r, "store peer %s: cannot encode", p->id);
    }
    _cleanup_free_ char *k1 = sched__peer_key(s, p->id);
    _cleanup_free_ char *k2 = sched__task_peers_key(s, p->task_id);
    _cleanup_free_ char *k3 = sched__task_persistent_peers_key(s, p->task_id);
    _cleanup_free_ char *k4 = sched__host_peers_key(s, p->host_id);
    if (k1 == NULL || k2 == NULL || k3 == NULL || k4 == NULL) {
        sched_fields_done(&f);
        return dfc_error_set(err, -ENOMEM, "store peer: out of memory");
    }
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%" PRId64, sched__remaining_ttl(task));
    const char *keys[] = {k1, k2, k3, k4};
    const char *args[3 + 2 * 64];
    size_t lens[3 + 2 * 64];
    args[0] = ttl;
    args[1] = p->id;
    args[2] = p->persistent ? "1" : "0";
    for (int i = 0; i < 3; i++) {
        lens[i] = strlen(args[i]);
    }
    int n = sched__append_fields(&f, args, lens, 3);
    r = sched__eval(s, dl, &s->store_peer, 4, keys, n, args, lens, NULL, err);
    sched_fields_done(&f);
    return r < 0 ? dfc_error_prefix(err, "store peer %s", p->id) : 0;
}

int sched_peer_touch(struct sched_store *s, int64_t dl, const char *id, int64_t updated_at,
                     struct dfc_error *err) {
    int r = sched__check_id("peer id", id, err);
    if (r < 0) {
        return r;
    }
    char when[64];
    if (sched_format_time(updated_at, when, sizeof(when)) < 0) {
        return dfc_error_set(err, -EINVAL, "touch peer %s: updated_at %" PRId64 " out of range", id,
                             updated_at);
    }
    _cleanup_free_ char *k = sched__peer_key(s, id);
    /* The keys of host "" and task "": the prefixes the script completes with the ids the
     * peer hash names. */
    _cleanup_free_ char *hosts = sched__host_key(s, "");
    _cleanup_free_ char *tasks = sched__task_key(s, "");
    if (k == NULL || hosts == NULL || tasks == NULL) {
        return dfc_error_set(err, -ENOMEM, "touch peer: out of memory");
    }
    const char *keys[] = {k};
    const char *args[] = {when, hosts, tasks};
    const size_t lens[] = {strlen(when), strlen(hosts), strlen(tasks)};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &s->touch_peer, 1, keys, 3, args, lens, &rep, err);
    if (r < 0) {
        return dfc_error_prefix(err, "touch peer %s", id);
    }
    bool ok = rep->type == REDIS_REPLY_INTEGER;
    long long set = ok ? rep->integer : 0;
    freeReplyObject(rep);
    if (!ok) {
        return dfc_error_set(err, DFC_E_INTERNAL, "touch peer %s: unexpected reply", id);
    }
    return set == 1 ? 0 : dfc_error_set(err, -ENOENT, "peer %s not found", id);
}

/* The reply element as a string, "" when nil. */
static const char *str_or_empty(const redisReply *e) {
    return e->type == REDIS_REPLY_STRING && memchr(e->str, '\0', e->len) == NULL ? e->str : "";
}

int sched_peer_delete(struct sched_store *s, int64_t dl, const char *id, struct dfc_error *err) {
    int r = sched__check_id("peer id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *pk = sched__peer_key(s, id);
    if (pk == NULL) {
        return dfc_error_set(err, -ENOMEM, "delete peer: out of memory");
    }
    for (int attempt = 0; attempt < DELETE_ATTEMPTS; attempt++) {
        const char *argv[] = {"HMGET", pk, "task_id", "host_id"};
        redisReply *owner = NULL;
        r = sched__cmd(s, dl, &owner, err, 4, argv);
        if (r < 0) {
            return dfc_error_prefix(err, "delete peer %s", id);
        }
        if (owner->type != REDIS_REPLY_ARRAY || owner->elements != 2) {
            freeReplyObject(owner);
            return dfc_error_set(err, DFC_E_INTERNAL, "delete peer %s: unexpected reply", id);
        }
        const char *task_id = str_or_empty(owner->element[0]);
        const char *host_id = str_or_empty(owner->element[1]);
        _cleanup_free_ char *k2 = sched__task_peers_key(s, task_id);
        _cleanup_free_ char *k3 = sched__task_persistent_peers_key(s, task_id);
        _cleanup_free_ char *k4 = sched__host_peers_key(s, host_id);
        if (k2 == NULL || k3 == NULL || k4 == NULL) {
            freeReplyObject(owner);
            return dfc_error_set(err, -ENOMEM, "delete peer: out of memory");
        }
        const char *keys[] = {pk, k2, k3, k4};
        const char *args[] = {id, task_id, host_id};
        redisReply *rep = NULL;
        r = sched__eval(s, dl, &s->delete_peer, 4, keys, 3, args, NULL, &rep, err);
        freeReplyObject(owner);
        if (r < 0) {
            return dfc_error_prefix(err, "delete peer %s", id);
        }
        long long n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -2;
        freeReplyObject(rep);
        if (n == -1) {
            continue; /* re-stored under another task or host in between: read again */
        }
        if (n < -1) {
            return dfc_error_set(err, DFC_E_INTERNAL, "delete peer %s: unexpected reply", id);
        }
        return n > 0 ? 0 : dfc_error_set(err, -ENOENT, "peer %s not found", id);
    }
    return dfc_error_set(err, DFC_E_ABORTED, "delete peer %s: it kept changing", id);
}

int sched_peer_ids_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                           bool persistent_only, struct sched_ids *out, struct dfc_error *err) {
    *out = (struct sched_ids){0};
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = persistent_only ? sched__task_persistent_peers_key(s, task_id)
                                             : sched__task_peers_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "peers of task: out of memory");
    }
    r = sched__smembers(s, dl, k, out, err);
    return r < 0 ? dfc_error_prefix(err, "peers of task %s", task_id) : 0;
}

int sched_peer_ids_by_host(struct sched_store *s, int64_t dl, const char *host_id,
                           struct sched_ids *out, struct dfc_error *err) {
    *out = (struct sched_ids){0};
    int r = sched__check_id("host id", host_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__host_peers_key(s, host_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "peers of host: out of memory");
    }
    r = sched__smembers(s, dl, k, out, err);
    return r < 0 ? dfc_error_prefix(err, "peers of host %s", host_id) : 0;
}

void sched_peer_list_free(struct sched_peer *list, size_t n) {
    sched__records_free(&peer_type, list, n);
}

int sched_peer_load_sample_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                                   size_t max, struct sched_peer **out, size_t *n_out,
                                   struct dfc_error *err) {
    *out = NULL;
    *n_out = 0;
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *pk = sched__task_persistent_peers_key(s, task_id);
    _cleanup_free_ char *ak = sched__task_peers_key(s, task_id);
    if (pk == NULL || ak == NULL) {
        return dfc_error_set(err, -ENOMEM, "peers of task: out of memory");
    }
    struct sched_ids ids = {0};
    if (sched__srandmember(s, dl, pk, max, &ids, err) < 0 ||
        sched__srandmember(s, dl, ak, max, &ids, err) < 0) {
        sched_ids_free(&ids);
        return dfc_error_prefix(err, "peers of task %s", task_id);
    }
    sched__ids_unique(&ids);
    void *list;
    r = sched__load_records(s, dl, &peer_type, &ids, 2 * max, NULL, 0, "peers of task", task_id,
                            &list, n_out, err);
    sched_ids_free(&ids);
    *out = list;
    return r;
}

int sched_peer_in_task(struct sched_store *s, int64_t dl, const char *task_id, const char *peer_id,
                       struct dfc_error *err) {
    _cleanup_free_ char *k = sched__task_peers_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "peers of task: out of memory");
    }
    const char *argv[] = {"SISMEMBER", k, peer_id};
    redisReply *rep = NULL;
    int r = sched__cmd(s, dl, &rep, err, 3, argv);
    if (r < 0) {
        return dfc_error_prefix(err, "peers of task %s", task_id);
    }
    r = rep->type == REDIS_REPLY_INTEGER
            ? rep->integer != 0
            : dfc_error_set(err, DFC_E_INTERNAL, "redis: SISMEMBER %s: unexpected reply", k);
    freeReplyObject(rep);
    return r;
}

int sched_peer_load_by_task(struct sched_store *s, int64_t dl, const char *task_id,
                            struct sched_peer **out, size_t *n_out, struct dfc_error *err) {
    *out = NULL;
    *n_out = 0;
    struct sched_ids ids;
    int r = sched_peer_ids_by_task(s, dl, task_id, false, &ids, err);
    if (r < 0) {
        return r;
    }
    void *list;
    r = sched__load_records(s, dl, &peer_type, &ids, SIZE_MAX, NULL, 0, "peers of task", task_id,
                            &list, n_out, err);
    sched_ids_free(&ids);
    *out = list;
    return r;
}
