/*
 * store.c - the managers' shared half: the store object, upstream's keys, the Lua scripts
 * every write goes through, and reply helpers (docs/dragonfly-compat.md, "Scheduler on
 * Redis"). The managers themselves are store_host.c, store_task.c and store_peer.c; the
 * upload path's calls are store_upload.c.
 *
 * DESIGN
 *   Every write is one script, so a reader never sees a hash without its set memberships or
 *   a set member whose hash was written without its expiry. Scripts take the records'
 *   field/value pairs in upstream's HSET order from the caller (model.c's tables) and only
 *   add the key bookkeeping, so the bytes stored are exactly the encoder's.
 *
 *   Expiry differs from upstream in two ways, both invisible to readers of the keys:
 *   - a set (task all-peers, task persistent-peers, host peers) only ever has its expiry
 *     extended, to the latest-expiring member's: upstream EXPIREs it to the TTL of whichever
 *     peer was stored last, so storing a short-TTL peer on a host cut the host's set short
 *     and dropped the memberships of longer-lived peers with it;
 *   - a store whose remaining TTL is <= 0 deletes the record's hash and removes only its own
 *     id from the sets (upstream's EXPIRE 0 deleted the whole sets, other tasks' peers on
 *     the same host included).
 *   The upload path's calls, which read or write several records in one round trip, are in
 *   store_upload.c; its script, lua_store_task_peer, is here with the others.
 *
 *   The scripts touch several keys without hash tags, as upstream's do, so Redis Cluster is
 *   not supported (neither is it upstream); a single server or Sentinel is.
 */
#include "store.h"
#include "store_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/units.h"

/* ---- scripts ---- */

/* KEYS[1] host hash, KEYS[2] set of host ids; ARGV[1] host id, ARGV[2..] field/value pairs. */
static const char lua_store_host[] = "redis.call('HSET', KEYS[1], unpack(ARGV, 2))\n"
                                     "redis.call('SADD', KEYS[2], ARGV[1])\n"
                                     "return 1\n";

/* KEYS[1] host hash, KEYS[2] set of host ids; ARGV[1] host id. Returns how much it removed. */
static const char lua_delete_host[] = "local n = redis.call('DEL', KEYS[1])\n"
                                      "return n + redis.call('SREM', KEYS[2], ARGV[1])\n";

/* KEYS[1] task hash; ARGV[1] remaining TTL in seconds, ARGV[2..] field/value pairs. */
static const char lua_store_task[] = "if tonumber(ARGV[1]) <= 0 then\n"
                                     "  redis.call('DEL', KEYS[1])\n"
                                     "  return 0\n"
                                     "end\n"
                                     "redis.call('HSET', KEYS[1], unpack(ARGV, 2))\n"
                                     "redis.call('EXPIRE', KEYS[1], ARGV[1])\n"
                                     "return 1\n";

/* The peer half of a store, shared by the two scripts below: KEYS[1] peer hash, KEYS[2] task
 * all-peers set, KEYS[3] task persistent-peers set, KEYS[4] host peers set; locals ttl
 * (remaining seconds), id (peer id), persistent ("1" when persistent) and the peer's
 * field/value pairs in ARGV[pf..pl]. A set's expiry is only ever extended.
 *
 * A peer stored with state Failed holds no copy: it leaves both task sets (so every SCARD
 * counts only live copies) but keeps its hash and its host-set membership until its TTL, so
 * host deletion still removes it (docs/dragonfly-compat.md 7.10). */
#define LUA_PEER_WRITE                                                                             \
    "if ttl <= 0 then\n"                                                                           \
    "  redis.call('DEL', KEYS[1])\n"                                                               \
    "  for i = 2, 4 do redis.call('SREM', KEYS[i], id) end\n"                                      \
    "else\n"                                                                                       \
    "  redis.call('HSET', KEYS[1], unpack(ARGV, pf, pl))\n"                                        \
    "  redis.call('EXPIRE', KEYS[1], ttl)\n"                                                       \
    "  local failed = false\n"                                                                     \
    "  for i = pf, pl - 1, 2 do\n"                                                                 \
    "    if ARGV[i] == 'state' then failed = ARGV[i + 1] == 'Failed' end\n"                        \
    "  end\n"                                                                                      \
    "  local function add(key)\n"                                                                  \
    "    redis.call('SADD', key, id)\n"                                                            \
    "    if redis.call('TTL', key) < ttl then redis.call('EXPIRE', key, ttl) end\n"                \
    "  end\n"                                                                                      \
    "  if failed then redis.call('SREM', KEYS[2], id) else add(KEYS[2]) end\n"                     \
    "  if persistent == '1' and not failed then add(KEYS[3])\n"                                    \
    "  else redis.call('SREM', KEYS[3], id) end\n"                                                 \
    "  add(KEYS[4])\n"                                                                             \
    "end\n"

/* KEYS[1..4] as LUA_PEER_WRITE; ARGV[1] remaining TTL in seconds, ARGV[2] peer id, ARGV[3]
 * "1" when persistent, ARGV[4..] field/value pairs. */
static const char lua_store_peer[] =
    "local ttl = tonumber(ARGV[1])\n"
    "local id, persistent = ARGV[2], ARGV[3]\n"
    "local pf, pl = 4, #ARGV\n" LUA_PEER_WRITE "return ttl > 0 and 1 or 0\n";

/* A task and one of its peers in one atomic step (an upload's Started and Finished): the task
 * hash as lua_store_task writes it, then the peer as lua_store_peer. KEYS[1..4] as
 * LUA_PEER_WRITE, KEYS[5] task hash; ARGV[1] remaining TTL in seconds (the task's, for both),
 * ARGV[2] peer id, ARGV[3] "1" when persistent, ARGV[4] n, the count of the peer's
 * field/value arguments ARGV[5..4+n], then the task's to the end. Returns the SCARDs of the
 * task's all-peers and persistent-peers sets after it. */
static const char lua_store_task_peer[] =
    "local ttl = tonumber(ARGV[1])\n"
    "local id, persistent = ARGV[2], ARGV[3]\n"
    "local pf, pl = 5, 4 + tonumber(ARGV[4])\n"
    "if ttl <= 0 then\n"
    "  redis.call('DEL', KEYS[5])\n"
    "else\n"
    "  redis.call('HSET', KEYS[5], unpack(ARGV, pl + 1))\n"
    "  redis.call('EXPIRE', KEYS[5], ttl)\n"
    "end\n" LUA_PEER_WRITE "return {redis.call('SCARD', KEYS[2]), redis.call('SCARD', KEYS[3])}\n";

/* KEYS[1] peer hash; ARGV[1] its new updated_at, ARGV[2] and ARGV[3] the key prefixes of a
 * host and of a task. Sets that one field, and only while the peer loads: its hash exists and
 * the host and task it names do (a whole store would bring back a peer deleted since it was
 * read). 1 when set. The host and task keys come from the hash, so they are not in KEYS: the
 * scheduler runs on one Redis (Sentinel for failover), never on Redis Cluster. */
static const char lua_touch_peer[] =
    "local f = redis.call('HMGET', KEYS[1], 'host_id', 'task_id')\n"
    "if not f[1] or not f[2] then return 0 end\n"
    "if redis.call('EXISTS', ARGV[2] .. f[1]) == 0 then return 0 end\n"
    "if redis.call('EXISTS', ARGV[3] .. f[2]) == 0 then return 0 end\n"
    "redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])\n"
    "return 1\n";

/* KEYS[1] peer hash, KEYS[2..4] the sets named by the task_id/host_id the caller read from
 * it; ARGV[1] peer id, ARGV[2] that task_id, ARGV[3] that host_id. -1 when the hash changed
 * owner since it was read (the caller reads again), else how much it removed. */
static const char lua_delete_peer[] =
    "local cur = redis.call('HMGET', KEYS[1], 'task_id', 'host_id')\n"
    "if (cur[1] or '') ~= ARGV[2] or (cur[2] or '') ~= ARGV[3] then return -1 end\n"
    "local n = redis.call('DEL', KEYS[1])\n"
    "for i = 2, 4 do n = n + redis.call('SREM', KEYS[i], ARGV[1]) end\n"
    "return n\n";

/* Read-only pairs, one round trip each. */
static const char lua_exists2[] =
    "return {redis.call('EXISTS', KEYS[1]), redis.call('EXISTS', KEYS[2])}\n";
static const char lua_scard2[] =
    "return {redis.call('SCARD', KEYS[1]), redis.call('SCARD', KEYS[2])}\n";

/* ---- the store ---- */

static void script(struct sched_redis_script *s, const char *name, const char *lua) {
    s->name = name;
    s->lua = lua;
    sched_redis_script_init(s);
}

int sched_store_new(struct sched_redis *r, uint64_t cluster_id, struct sched_store **ret,
                    struct dfc_error *err) {
    struct sched_store *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return dfc_error_set(err, -ENOMEM, "store: out of memory");
    }
    s->r = r;
    s->cluster_id = cluster_id;
    snprintf(s->prefix, sizeof(s->prefix), "scheduler:scheduler-clusters:%" PRIu64, cluster_id);
    script(&s->store_host, "store_host", lua_store_host);
    script(&s->delete_host, "delete_host", lua_delete_host);
    script(&s->store_task, "store_task", lua_store_task);
    script(&s->store_peer, "store_peer", lua_store_peer);
    script(&s->store_task_peer, "store_task_peer", lua_store_task_peer);
    script(&s->touch_peer, "touch_peer", lua_touch_peer);
    script(&s->delete_peer, "delete_peer", lua_delete_peer);
    script(&s->exists2, "exists2", lua_exists2);
    script(&s->scard2, "scard2", lua_scard2);
    *ret = s;
    return 0;
}

void sched_store_free(struct sched_store *s) {
    free(s);
}

struct sched_redis *sched_store_redis(struct sched_store *s) {
    return s->r;
}

const char *sched_store_prefix(const struct sched_store *s) {
    return s->prefix;
}

/* ---- keys (upstream's pkg/redis format strings) ---- */

static char *key(const struct sched_store *s, const char *ns, const char *id, const char *suffix) {
    char *k = NULL;
    int n;
    if (id == NULL) {
        n = asprintf(&k, "%s:%s", s->prefix, ns);
    } else if (suffix == NULL) {
        n = asprintf(&k, "%s:%s:%s", s->prefix, ns, id);
    } else {
        n = asprintf(&k, "%s:%s:%s:%s", s->prefix, ns, id, suffix);
    }
    return n < 0 ? NULL : k;
}

#define NS_TASKS      "persistent-cache-tasks"
#define NS_HOSTS      "persistent-cache-hosts"
#define NS_PEERS      "persistent-cache-peers-for-persistent-cache-task"
#define NS_PERSISTENT "persistent-peers-for-persistent-cache-task"

char *sched__task_key(const struct sched_store *s, const char *task_id) {
    return key(s, NS_TASKS, task_id, NULL);
}

char *sched__task_peers_key(const struct sched_store *s, const char *task_id) {
    return key(s, NS_TASKS, task_id, NS_PEERS);
}

char *sched__task_persistent_peers_key(const struct sched_store *s, const char *task_id) {
    return key(s, NS_TASKS, task_id, NS_PERSISTENT);
}

char *sched__peer_key(const struct sched_store *s, const char *peer_id) {
    return key(s, NS_PEERS, peer_id, NULL);
}

char *sched__host_key(const struct sched_store *s, const char *host_id) {
    return key(s, NS_HOSTS, host_id, NULL);
}

char *sched__hosts_key(const struct sched_store *s) {
    return key(s, NS_HOSTS, NULL, NULL);
}

char *sched__host_peers_key(const struct sched_store *s, const char *host_id) {
    return key(s, NS_HOSTS, host_id, NS_PEERS);
}

int sched__check_id(const char *what, const char *id, struct dfc_error *err) {
    if (id == NULL || id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "%s is empty", what);
    }
    if (strnlen(id, SCHED_ID_MAX + 1) > SCHED_ID_MAX) {
        return dfc_error_set(err, -EINVAL, "%s is longer than %d bytes", what, SCHED_ID_MAX);
    }
    return 0;
}

/* ---- commands ---- */

int sched__cmd(struct sched_store *s, int64_t dl, redisReply **rep, struct dfc_error *err, int argc,
               const char **argv) {
    size_t lens[16];
    if (argc > 16) {
        return dfc_error_set(err, -E2BIG, "store: command too long");
    }
    for (int i = 0; i < argc; i++) {
        lens[i] = strlen(argv[i]);
    }
    return sched_redis_argv(s->r, dl, argc, argv, lens, rep, err);
}

int sched__eval(struct sched_store *s, int64_t dl, struct sched_redis_script *script, int n_keys,
                const char **keys, int n_args, const char **args, const size_t *arg_lens,
                redisReply **rep, struct dfc_error *err) {
    return sched_redis_eval(s->r, dl, script, n_keys, keys, NULL, n_args, args, arg_lens, rep, err);
}

int sched__append_fields(const struct sched_fields *f, const char **args, size_t *lens, int at) {
    for (size_t i = 0; i < f->n; i++) {
        args[at] = f->name[i];
        lens[at++] = strlen(f->name[i]);
        args[at] = f->value[i];
        lens[at++] = f->len[i];
    }
    return at;
}

void sched__kv_done(struct sched__kv *kv) {
    if (kv->rep != NULL) {
        freeReplyObject(kv->rep);
    }
    free(kv->kv);
    free(kv->lens);
    *kv = (struct sched__kv){0};
}

/* HGETALL k's reply rep (already in out->rep) into out. */
static int hgetall_parse(const char *k, struct sched__kv *out, struct dfc_error *err) {
    redisReply *rep = out->rep;
    if (rep->type != REDIS_REPLY_ARRAY) {
        sched__kv_done(out);
        return dfc_error_set(err, DFC_E_INTERNAL, "redis: HGETALL %s: unexpected reply type %d", k,
                             rep->type);
    }
    if (rep->elements == 0) {
        return 0;
    }
    out->kv = calloc(rep->elements, sizeof(*out->kv));
    out->lens = calloc(rep->elements, sizeof(*out->lens));
    if (out->kv == NULL || out->lens == NULL) {
        sched__kv_done(out);
        return dfc_error_set(err, -ENOMEM, "HGETALL %s: out of memory", k);
    }
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_STRING) {
            sched__kv_done(out);
            return dfc_error_set(err, DFC_E_INTERNAL, "redis: HGETALL %s: element of type %d", k,
                                 e->type);
        }
        out->kv[i] = e->str;
        out->lens[i] = e->len;
    }
    out->n = rep->elements;
    return 0;
}

int sched__hgetall(struct sched_store *s, int64_t dl, const char *k, struct sched__kv *out,
                   struct dfc_error *err) {
    const char *argv[] = {"HGETALL", k};
    *out = (struct sched__kv){0};
    int r = sched__cmd(s, dl, &out->rep, err, 2, argv);
    if (r == SCHED_REDIS_E_WRONGTYPE) {
        /* Some other client wrote another type there: no record, as upstream reads it. */
        return dfc_error_set(err, -ENOENT, "%s is not a hash", k);
    }
    if (r < 0) {
        return r;
    }
    return hgetall_parse(k, out, err);
}

#define HGETALL_N_MAX 4

int sched__pipeline2(struct sched_store *s, int64_t dl, size_t n, const char *const (*words)[2],
                     redisReply **reps, struct dfc_error *err) {
    if (n > SCHED_PIPELINE2_MAX) {
        return dfc_error_set(err, -E2BIG, "store: %zu commands in one round trip", n);
    }
    const char *argv[SCHED_PIPELINE2_MAX][2];
    size_t lens[SCHED_PIPELINE2_MAX][2];
    struct sched_redis_cmd cmds[SCHED_PIPELINE2_MAX] = {{0}};
    for (size_t i = 0; i < n; i++) {
        argv[i][0] = words[i][0];
        argv[i][1] = words[i][1];
        lens[i][0] = strlen(words[i][0]);
        lens[i][1] = strlen(words[i][1]);
        cmds[i] = (struct sched_redis_cmd){.argc = 2, .argv = argv[i], .lens = lens[i]};
    }
    return sched_redis_pipeline(s->r, dl, n, cmds, reps, err);
}

int sched__hgetall_n(struct sched_store *s, int64_t dl, size_t n, const char *const *keys,
                     struct sched__kv *out, int *rs, struct dfc_error *errs,
                     struct dfc_error *err) {
    if (n > HGETALL_N_MAX) {
        return dfc_error_set(err, -E2BIG, "store: %zu HGETALLs in one round trip", n);
    }
    const char *words[HGETALL_N_MAX][2];
    redisReply *reps[HGETALL_N_MAX] = {0};
    for (size_t i = 0; i < n; i++) {
        words[i][0] = "HGETALL";
        words[i][1] = keys[i];
    }
    int r = sched__pipeline2(s, dl, n, (const char *const(*)[2])words, reps, err);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        errs[i] = (struct dfc_error){0};
        rs[i] = sched__hgetall_reply(keys[i], reps[i], &out[i], &errs[i]);
    }
    return 0;
}

int sched__hgetall_reply(const char *k, redisReply *rep, struct sched__kv *out,
                         struct dfc_error *err) {
    *out = (struct sched__kv){0};
    if (rep->type == REDIS_REPLY_ERROR) {
        int r = sched_redis_reply_error(rep, NULL, err);
        if (r == SCHED_REDIS_E_WRONGTYPE) { /* as sched__hgetall */
            r = dfc_error_set(err, -ENOENT, "%s is not a hash", k);
        }
        freeReplyObject(rep);
        return r;
    }
    out->rep = rep;
    return hgetall_parse(k, out, err);
}

/* ---- id lists ---- */

void sched_ids_free(struct sched_ids *ids) {
    for (size_t i = 0; ids->ids != NULL && i < ids->n; i++) {
        free(ids->ids[i]);
    }
    free(ids->ids);
    ids->ids = NULL;
    ids->n = 0;
}

int sched__ids_push(struct sched_ids *ids, const char *id, size_t len) {
    if (ids->n >= SCHED_IDS_MAX) {
        return -E2BIG;
    }
    if ((ids->n & (ids->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = ids->n ? ids->n * 2 : 8;
        char **p = realloc(ids->ids, cap * sizeof(char *));
        if (p == NULL) {
            return -ENOMEM;
        }
        ids->ids = p;
    }
    char *c = strndup(id, len);
    if (c == NULL) {
        return -ENOMEM;
    }
    ids->ids[ids->n++] = c;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void sched__ids_unique(struct sched_ids *ids) {
    if (ids->n < 2) {
        return;
    }
    qsort(ids->ids, ids->n, sizeof(char *), cmp_str);
    size_t o = 1;
    for (size_t i = 1; i < ids->n; i++) {
        if (strcmp(ids->ids[i], ids->ids[o - 1]) == 0) {
            free(ids->ids[i]);
        } else {
            ids->ids[o++] = ids->ids[i];
        }
    }
    ids->n = o;
}

/* Appends the string elements of an array reply to ids. */
static int push_elements(struct sched_ids *ids, const redisReply *arr, struct dfc_error *err) {
    for (size_t i = 0; i < arr->elements; i++) {
        const redisReply *e = arr->element[i];
        if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len) != NULL) {
            continue; /* not an id we could name */
        }
        int r = sched__ids_push(ids, e->str, e->len);
        if (r < 0) {
            return dfc_error_set(err, r, "listing ids: %s",
                                 r == -E2BIG ? "more than 4194304" : "out of memory");
        }
    }
    return 0;
}

int sched__smembers(struct sched_store *s, int64_t dl, const char *k, struct sched_ids *out,
                    struct dfc_error *err) {
    const char *argv[] = {"SMEMBERS", k};
    redisReply *rep = NULL;
    *out = (struct sched_ids){0};
    int r = sched__cmd(s, dl, &rep, err, 2, argv);
    if (r < 0) {
        return r;
    }
    if (rep->type != REDIS_REPLY_ARRAY) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "redis: SMEMBERS %s: unexpected reply type %d", k,
                          rep->type);
    } else {
        r = push_elements(out, rep, err);
    }
    freeReplyObject(rep);
    if (r < 0) {
        sched_ids_free(out);
    }
    return r;
}

int sched__srandmember(struct sched_store *s, int64_t dl, const char *k, size_t n,
                       struct sched_ids *out, struct dfc_error *err) {
    char count[24];
    snprintf(count, sizeof(count), "%zu", n);
    const char *argv[] = {"SRANDMEMBER", k, count};
    redisReply *rep = NULL;
    int r = sched__cmd(s, dl, &rep, err, 3, argv);
    if (r < 0) {
        return r;
    }
    if (rep->type != REDIS_REPLY_ARRAY) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "redis: SRANDMEMBER %s: unexpected reply type %d", k,
                          rep->type);
    } else {
        r = push_elements(out, rep, err);
    }
    freeReplyObject(rep);
    return r;
}

/* ---- records ---- */

int sched__record_from_kv(const struct sched__record_type *t, const char *id, int r,
                          struct sched__kv *kv, void *rec, struct dfc_error *err) {
    if (r < 0) {
        return dfc_error_prefix(err, "load %s %s", t->noun, id);
    }
    if (kv->n == 0) {
        sched__kv_done(kv);
        return dfc_error_set(err, -ENOENT, "%s %s not found", t->noun, id);
    }
    r = t->decode(kv->kv, kv->lens, kv->n, rec, err);
    sched__kv_done(kv);
    return r < 0 ? dfc_error_prefix(err, "%s %s", t->noun, id) : 0;
}

void sched__records_free(const struct sched__record_type *t, void *list, size_t n) {
    for (size_t i = 0; list != NULL && i < n; i++) {
        t->done((char *)list + i * t->size);
    }
    free(list);
}

static bool blocked(const char *id, const char *const *blocklist, size_t n_block) {
    for (size_t i = 0; i < n_block; i++) {
        if (blocklist[i] != NULL && strcmp(blocklist[i], id) == 0) {
            return true;
        }
    }
    return false;
}

int sched__load_records(struct sched_store *s, int64_t dl, const struct sched__record_type *t,
                        const struct sched_ids *ids, size_t max, const char *const *blocklist,
                        size_t n_block, const char *what, const char *what_id, void **out,
                        size_t *n_out, struct dfc_error *err) {
    *out = NULL;
    *n_out = 0;
    size_t want = max < ids->n ? max : ids->n;
    if (want == 0) {
        return 0;
    }
    char *list = calloc(want, t->size);
    if (list == NULL) {
        return dfc_error_set(err, -ENOMEM, "%s%s%s: out of memory", what,
                             what_id != NULL ? " " : "", what_id != NULL ? what_id : "");
    }
    size_t got = 0;
    for (size_t i = 0; i < ids->n && got < want; i++) {
        if (blocked(ids->ids[i], blocklist, n_block)) {
            continue;
        }
        int r = t->load(s, dl, ids->ids[i], list + got * t->size, err);
        if (r == -ENOENT || r == -EINVAL) {
            continue; /* gone (expired, its host or task gone) or unloadable: skipped */
        }
        if (r < 0) {
            sched__records_free(t, list, got);
            return r;
        }
        got++;
    }
    if (got == 0) {
        free(list);
        list = NULL;
    }
    if (err != NULL) {
        dfc_error_clear(err); /* skipped records are not an error */
    }
    *out = list;
    *n_out = got;
    return 0;
}

int64_t sched__remaining_ttl(const struct sched_task *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    __int128 now_ns = (__int128)ts.tv_sec * DFC_NS_PER_SEC + ts.tv_nsec;
    __int128 rem = (__int128)t->ttl_ns - (now_ns - (__int128)t->created_at * DFC_NS_PER_SEC);
    __int128 sec = rem / DFC_NS_PER_SEC; /* C division truncates toward zero, as Go's int64() */
    const __int128 lim = (__int128)1 << 31;
    if (sec > lim) {
        sec = lim;
    } else if (sec < -lim) {
        sec = -lim;
    }
    return (int64_t)sec;
}

int sched__scan(struct sched_store *s, int64_t dl, const char *set_key, const char *match,
                const char *strip, struct sched_ids *out, struct dfc_error *err) {
    char cursor[32] = "0";
    size_t strip_len = strip != NULL ? strlen(strip) : 0;
    int r = 0;
    *out = (struct sched_ids){0};
    do {
        /* SSCAN key cursor ... or SCAN cursor ...: the key slot is dropped for SCAN */
        const char *sscan[] = {"SSCAN", set_key, cursor, "MATCH", match, "COUNT", "100"};
        const char *scan[] = {"SCAN", cursor, "MATCH", match, "COUNT", "100"};
        const char **argv = set_key != NULL ? sscan : scan;
        redisReply *rep = NULL;
        r = sched__cmd(s, dl, &rep, err, set_key != NULL ? 7 : 6, argv);
        if (r < 0) {
            break;
        }
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= sizeof(cursor) ||
            rep->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            r = dfc_error_set(err, DFC_E_INTERNAL, "redis: %s %s: unexpected reply", argv[0],
                              match);
            break;
        }
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len);
        cursor[rep->element[0]->len] = '\0';
        const redisReply *arr = rep->element[1];
        for (size_t i = 0; r == 0 && i < arr->elements; i++) {
            const redisReply *e = arr->element[i];
            if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len) != NULL) {
                continue;
            }
            const char *id = e->str;
            size_t len = e->len;
            if (strip != NULL) {
                /* upstream's task LoadAll: the segment after the prefix, up to the next ':' */
                if (len <= strip_len || memcmp(id, strip, strip_len) != 0) {
                    continue;
                }
                id += strip_len;
                len -= strip_len;
                const char *colon = memchr(id, ':', len);
                if (colon != NULL) {
                    len = (size_t)(colon - id);
                }
                if (len == 0) {
                    continue;
                }
            }
            r = sched__ids_push(out, id, len);
            if (r < 0) {
                r = dfc_error_set(err, r, "listing %s: %s", match,
                                  r == -E2BIG ? "more than 4194304 ids" : "out of memory");
            }
        }
        freeReplyObject(rep);
    } while (r == 0 && strcmp(cursor, "0") != 0);
    if (r < 0) {
        sched_ids_free(out);
        return r;
    }
    sched__ids_unique(out);
    return 0;
}
