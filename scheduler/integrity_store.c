/*
 * integrity_store.c - the digest records and the per-task parent exclusion sets in Redis
 * (integrity_store.h, docs/integrity.md).
 */
#include "integrity_store.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/cleanup.h"
#include "store_internal.h"

/* KEYS[1] the digests hash; ARGV: host id, record, now, ttl, max hosts. 1 stored, 0 the same
 * record again, -1 the host recorded other bytes, -2 the hash is full. */
static const char lua_record[] =
    "local old = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "if old then\n"
    "  local a = string.find(old, ':', 1, true)\n"
    "  local b = a and string.find(old, ':', a + 1, true)\n"
    "  if b and string.sub(old, b + 1) == ARGV[2] then return 0 end\n"
    "  return -1\n"
    "end\n"
    "local n = redis.call('HLEN', KEYS[1])\n"
    "if n >= tonumber(ARGV[5]) then return -2 end\n"
    "redis.call('HSET', KEYS[1], ARGV[1], n .. ':' .. ARGV[3] .. ':' .. ARGV[2])\n"
    "local ttl = tonumber(ARGV[4])\n"
    "if redis.call('TTL', KEYS[1]) < ttl then redis.call('EXPIRE', KEYS[1], ttl) end\n"
    "return 1\n";

/* KEYS[1] the exclusion set; ARGV: host id, ttl, max members. 1 added, 0 not. */
static const char lua_exclude[] =
    "if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end\n"
    "if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end\n"
    "redis.call('SADD', KEYS[1], ARGV[1])\n"
    "local ttl = tonumber(ARGV[2])\n"
    "if redis.call('TTL', KEYS[1]) < ttl then redis.call('EXPIRE', KEYS[1], ttl) end\n"
    "return 1\n";

static struct sched_redis_script record_script = {.name = "record_digests", .lua = lua_record};
static struct sched_redis_script exclude_script = {.name = "exclude_parent", .lua = lua_exclude};
static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void scripts_init(void) {
    sched_redis_script_init(&record_script);
    sched_redis_script_init(&exclude_script);
}

static char *digests_key(const struct sched_store *s, const char *task_id) {
    char *k = NULL;
    return asprintf(&k, "%s:persistent-cache-task-digests:%s", s->prefix, task_id) < 0 ? NULL : k;
}

static char *excluded_key(const struct sched_store *s, const char *task_id) {
    char *k = NULL;
    return asprintf(&k, "%s:persistent-cache-task-excluded-parents:%s", s->prefix, task_id) < 0
               ? NULL
               : k;
}

static int integer_reply(const redisReply *rep, long long *v, const char *what,
                         struct dfc_error *err) {
    if (rep == NULL || rep->type != REDIS_REPLY_INTEGER) {
        return dfc_error_set(err, DFC_E_INTERNAL, "redis: %s: unexpected reply", what);
    }
    *v = rep->integer;
    return 0;
}

int sched_digests_record(struct sched_store *s, int64_t dl, const char *task_id,
                         const char *host_id, const uint8_t *packed, size_t len, int64_t now,
                         int64_t ttl_s, struct dfc_error *err) {
    int r = sched__check_id("task id", task_id, err);
    if (r < 0 || (r = sched__check_id("host id", host_id, err)) < 0) {
        return r;
    }
    pthread_once(&scripts_once, scripts_init);
    _cleanup_free_ char *k = digests_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    char now_s[24], ttl[24], max[8];
    snprintf(now_s, sizeof(now_s), "%" PRId64, now);
    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_s);
    snprintf(max, sizeof(max), "%d", SCHED_DIGEST_HOSTS_MAX);
    const char *keys[] = {k};
    const char *args[] = {host_id, (const char *)packed, now_s, ttl, max};
    size_t lens[] = {strlen(host_id), len, strlen(now_s), strlen(ttl), strlen(max)};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &record_script, 1, keys, 5, args, lens, &rep, err);
    long long v = 0;
    if (r == 0) {
        r = integer_reply(rep, &v, "record digests", err);
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    if (r < 0) {
        return dfc_error_prefix(err, "record digests of task %s", task_id);
    }
    if (v == -1) {
        return dfc_error_set(err, -EEXIST,
                             "host %s already recorded other digests for persistent cache task %s",
                             host_id, task_id);
    }
    if (v == -2) {
        return dfc_error_set(err, -EDQUOT,
                             "persistent cache task %s already has digests from %d hosts", task_id,
                             SCHED_DIGEST_HOSTS_MAX);
    }
    return 0;
}

void sched_digest_records_free(struct sched_digest_record *list, size_t n) {
    for (size_t i = 0; list != NULL && i < n; i++) {
        free(list[i].host_id);
        free(list[i].packed);
    }
    free(list);
}

struct seq_record {
    unsigned seq;
    struct sched_digest_record rec;
};

static int by_seq(const void *a, const void *b) {
    unsigned x = ((const struct seq_record *)a)->seq, y = ((const struct seq_record *)b)->seq;
    return x < y ? -1 : x > y;
}

/* One stored value "<seq>:<recorded_at>:<packed>" into *out (copies); -EINVAL when malformed. */
static int parse_value(const char *host, size_t host_len, const char *v, size_t len,
                       struct seq_record *out) {
    const char *a = memchr(v, ':', len);
    const char *b = a != NULL ? memchr(a + 1, ':', len - (size_t)(a + 1 - v)) : NULL;
    if (b == NULL) {
        return -EINVAL;
    }
    char num[24];
    size_t n1 = (size_t)(a - v), n2 = (size_t)(b - a - 1);
    if (n1 == 0 || n1 >= sizeof(num) || n2 == 0 || n2 >= sizeof(num)) {
        return -EINVAL;
    }
    memcpy(num, v, n1);
    num[n1] = '\0';
    out->seq = (unsigned)strtoul(num, NULL, 10);
    memcpy(num, a + 1, n2);
    num[n2] = '\0';
    out->rec.recorded_at = strtoll(num, NULL, 10);
    out->rec.len = len - (size_t)(b + 1 - v);
    out->rec.packed = malloc(out->rec.len ? out->rec.len : 1);
    out->rec.host_id = strndup(host, host_len);
    if (out->rec.packed == NULL || out->rec.host_id == NULL) {
        free(out->rec.packed);
        free(out->rec.host_id);
        return -ENOMEM;
    }
    memcpy(out->rec.packed, b + 1, out->rec.len);
    return 0;
}

int sched_digests_load(struct sched_store *s, int64_t dl, const char *task_id,
                       struct sched_digest_record **out, size_t *n, struct dfc_error *err) {
    *out = NULL;
    *n = 0;
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = digests_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    struct sched__kv kv;
    if ((r = sched__hgetall(s, dl, k, &kv, err)) < 0) {
        return dfc_error_prefix(err, "load digests of task %s", task_id);
    }
    size_t pairs = kv.n / 2;
    struct seq_record *recs = calloc(pairs ? pairs : 1, sizeof(*recs));
    size_t got = 0;
    if (recs == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < pairs; i++) {
        int pr = parse_value(kv.kv[2 * i], kv.lens[2 * i], kv.kv[2 * i + 1], kv.lens[2 * i + 1],
                             &recs[got]);
        if (pr == -ENOMEM) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else if (pr == 0) {
            got++; /* a malformed value is skipped: a reader takes only what it can check */
        }
    }
    sched__kv_done(&kv);
    struct sched_digest_record *list = NULL;
    if (r == 0 && (list = calloc(got ? got : 1, sizeof(*list))) == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        for (size_t i = 0; i < got; i++) {
            free(recs[i].rec.host_id);
            free(recs[i].rec.packed);
        }
        free(recs);
        return r;
    }
    qsort(recs, got, sizeof(*recs), by_seq);
    for (size_t i = 0; i < got; i++) {
        list[i] = recs[i].rec;
    }
    free(recs);
    *out = list;
    *n = got;
    return 0;
}

int sched_parent_exclude(struct sched_store *s, int64_t dl, const char *task_id,
                         const char *host_id, int64_t ttl_s, struct dfc_error *err) {
    int r = sched__check_id("task id", task_id, err);
    if (r < 0 || (r = sched__check_id("host id", host_id, err)) < 0) {
        return r;
    }
    pthread_once(&scripts_once, scripts_init);
    _cleanup_free_ char *k = excluded_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    char ttl[24], max[8];
    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_s);
    snprintf(max, sizeof(max), "%d", SCHED_EXCLUDED_MAX);
    const char *keys[] = {k};
    const char *args[] = {host_id, ttl, max};
    size_t lens[] = {strlen(host_id), strlen(ttl), strlen(max)};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &exclude_script, 1, keys, 3, args, lens, &rep, err);
    long long v = 0;
    if (r == 0) {
        r = integer_reply(rep, &v, "exclude parent", err);
    }
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    return r < 0 ? dfc_error_prefix(err, "exclude host %s from task %s", host_id, task_id) : (int)v;
}

int sched_parents_excluded(struct sched_store *s, int64_t dl, const char *task_id,
                           struct sched_ids *out, struct dfc_error *err) {
    *out = (struct sched_ids){0};
    int r = sched__check_id("task id", task_id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = excluded_key(s, task_id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return sched__smembers(s, dl, k, out, err);
}
