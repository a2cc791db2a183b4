/*
 * authz_store.c - the host bindings and the task importer sets in Redis (authz_store.h,
 * docs/trust-model.md).
 */
#include "authz_store.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/cleanup.h"
#include "store_internal.h"

/* KEYS[1] the binding; ARGV: kind ("node", "shared"), ttl. 1 recorded, 0 refused. */
static const char lua_bind[] =
    "if ARGV[1] == 'shared' and redis.call('GET', KEYS[1]) == 'node' then return 0 end\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])\n"
    "return 1\n";

/* KEYS[1] the importer set; ARGV: host id, ttl, max members, reset ("1"). 1 member, 0 full. */
static const char lua_importer[] =
    "if ARGV[4] == '1' then redis.call('DEL', KEYS[1]) end\n"
    "if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 and\n"
    "   redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end\n"
    "redis.call('SADD', KEYS[1], ARGV[1])\n"
    "local ttl = tonumber(ARGV[2])\n"
    "if redis.call('TTL', KEYS[1]) < ttl then redis.call('EXPIRE', KEYS[1], ttl) end\n"
    "return 1\n";

static struct sched_redis_script bind_script = {.name = "bind_host", .lua = lua_bind};
static struct sched_redis_script importer_script = {.name = "add_importer", .lua = lua_importer};
static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void scripts_init(void) {
    sched_redis_script_init(&bind_script);
    sched_redis_script_init(&importer_script);
}

static char *binding_key(const struct sched_store *s, const char *host_id) {
    char *k = NULL;
    return asprintf(&k, "%s:persistent-cache-host-binding:%s", s->prefix, host_id) < 0 ? NULL : k;
}

static char *importers_key(const struct sched_store *s, const char *task_id) {
    char *k = NULL;
    return asprintf(&k, "%s:persistent-cache-task-importers:%s", s->prefix, task_id) < 0 ? NULL : k;
}

/* The integer a script answered, with rep freed; r is sched__eval's result. */
static int script_result(int r, redisReply *rep, long long *v, struct dfc_error *err) {
    if (r == 0 && (rep == NULL || rep->type != REDIS_REPLY_INTEGER)) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "redis: unexpected reply");
    }
    if (r == 0) {
        *v = rep->integer;
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    return r;
}

int sched_binding_set(struct sched_store *s, int64_t dl, const char *host_id,
                      enum sched_binding kind, struct dfc_error *err) {
    int r = sched__check_id("host id", host_id, err);
    if (r < 0) {
        return r;
    }
    pthread_once(&scripts_once, scripts_init);
    _cleanup_free_ char *k = binding_key(s, host_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%d", SCHED_BINDING_TTL_S);
    const char *keys[] = {k};
    const char *args[] = {kind == SCHED_BINDING_NODE ? "node" : "shared", ttl};
    size_t lens[] = {strlen(args[0]), strlen(ttl)};
    redisReply *rep = NULL;
    long long v = 0;
    r = sched__eval(s, dl, &bind_script, 1, keys, 2, args, lens, &rep, err);
    r = script_result(r, rep, &v, err);
    return r < 0 ? dfc_error_prefix(err, "bind host %s", host_id) : (int)v;
}

int sched_binding_get(struct sched_store *s, int64_t dl, const char *host_id,
                      enum sched_binding *ret, struct dfc_error *err) {
    *ret = SCHED_BINDING_NONE;
    int r = sched__check_id("host id", host_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = binding_key(s, host_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    const char *argv[] = {"GET", k};
    redisReply *rep = NULL;
    if (sched__cmd(s, dl, &rep, err, 2, argv) < 0) {
        return dfc_error_prefix(err, "load the binding of host %s", host_id);
    }
    if (rep->type == REDIS_REPLY_STRING) {
        *ret = strcmp(rep->str, "node") == 0     ? SCHED_BINDING_NODE
               : strcmp(rep->str, "shared") == 0 ? SCHED_BINDING_SHARED
                                                 : SCHED_BINDING_NONE;
    }
    freeReplyObject(rep);
    return 0;
}

int sched_importer_add(struct sched_store *s, int64_t dl, const char *task_id, const char *host_id,
                       bool reset, int64_t ttl_s, struct dfc_error *err) {
    int r = sched__check_id("task id", task_id, err);
    if (r < 0 || (r = sched__check_id("host id", host_id, err)) < 0) {
        return r;
    }
    pthread_once(&scripts_once, scripts_init);
    _cleanup_free_ char *k = importers_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    char ttl[24], max[8];
    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_s);
    snprintf(max, sizeof(max), "%d", SCHED_IMPORTERS_MAX);
    const char *keys[] = {k};
    const char *args[] = {host_id, ttl, max, reset ? "1" : "0"};
    size_t lens[] = {strlen(host_id), strlen(ttl), strlen(max), 1};
    redisReply *rep = NULL;
    long long v = 0;
    r = sched__eval(s, dl, &importer_script, 1, keys, 4, args, lens, &rep, err);
    r = script_result(r, rep, &v, err);
    return r < 0
               ? dfc_error_prefix(err, "record host %s as an importer of task %s", host_id, task_id)
               : (int)v;
}

int sched_importers(struct sched_store *s, int64_t dl, const char *task_id, struct sched_ids *out,
                    struct dfc_error *err) {
    *out = (struct sched_ids){0};
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = importers_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return sched__smembers(s, dl, k, out, err);
}

int sched_importers_delete(struct sched_store *s, int64_t dl, const char *task_id,
                           struct dfc_error *err) {
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = importers_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    const char *argv[] = {"DEL", k};
    r = sched__cmd(s, dl, NULL, err, 2, argv);
    return r < 0 ? dfc_error_prefix(err, "delete the importers of task %s", task_id) : 0;
}

int sched_peer_owner(struct sched_store *s, int64_t dl, const char *peer_id, char **ret,
                     struct dfc_error *err) {
    *ret = NULL;
    int r = sched__check_id("peer id", peer_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__peer_key(s, peer_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    const char *argv[] = {"HGET", k, "host_id"};
    redisReply *rep = NULL;
    if (sched__cmd(s, dl, &rep, err, 3, argv) < 0) {
        return dfc_error_prefix(err, "load the host of peer %s", peer_id);
    }
    if (rep->type == REDIS_REPLY_STRING && rep->len > 0) {
        *ret = strndup(rep->str, rep->len);
        r = *ret == NULL ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
    } else {
        r = dfc_error_set(err, -ENOENT, "persistent cache peer %s not found", peer_id);
    }
    freeReplyObject(rep);
    return r;
}
