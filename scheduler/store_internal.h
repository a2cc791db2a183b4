/*
 * store_internal.h - what the three managers (store_host.c, store_task.c, store_peer.c) and
 * the upload path (store_upload.c) share with store.c: the store struct with its Lua scripts,
 * upstream's key builders, and reply helpers. Private to scheduler/store*.c.
 */
#ifndef SCHED_STORE_INTERNAL_H
#define SCHED_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct redisReply;

/* Ids longer than this are refused before any key is built (upstream ids are at most a few
 * hundred bytes: "<ip>-<hostname>[-<uuid>]", 64 hex digits for tasks). */
#define SCHED_ID_MAX 1024
/* The most ids one listing returns; a larger set is refused rather than held in memory. */
#define SCHED_IDS_MAX (1u << 22)

struct sched_store {
    struct sched_redis *r; /* borrowed */
    uint64_t cluster_id;
    char prefix[64]; /* "scheduler:scheduler-clusters:<id>" */
    struct sched_redis_script store_host, delete_host, store_task, store_peer, store_task_peer,
        touch_peer, delete_peer, exists2, scard2;
};

/* Upstream's keys (see store.h), as heap strings; NULL only when out of memory. */
char *sched__task_key(const struct sched_store *s, const char *task_id);
char *sched__task_peers_key(const struct sched_store *s, const char *task_id);
char *sched__task_persistent_peers_key(const struct sched_store *s, const char *task_id);
char *sched__peer_key(const struct sched_store *s, const char *peer_id);
char *sched__host_key(const struct sched_store *s, const char *host_id);
char *sched__hosts_key(const struct sched_store *s);
char *sched__host_peers_key(const struct sched_store *s, const char *host_id);

/* -EINVAL naming what ("task id") unless id is a non-empty string of at most SCHED_ID_MAX. */
int sched__check_id(const char *what, const char *id, struct dfc_error *err);
/* -EINVAL unless p's ids pass sched__check_id and p belongs to the task task_id (NULL: none). */
int sched__check_peer(const struct sched_peer *p, const char *task_id, struct dfc_error *err);

/* One command of NUL-terminated words (no binary data). */
int sched__cmd(struct sched_store *s, int64_t dl, struct redisReply **rep, struct dfc_error *err,
               int argc, const char **argv);

/* Appends up to n distinct random members of set k to out (SRANDMEMBER k n: O(n) in Redis,
 * whatever the set holds). */
int sched__srandmember(struct sched_store *s, int64_t dl, const char *k, size_t n,
                       struct sched_ids *out, struct dfc_error *err);

/* Runs a script with NUL-terminated keys and fields-style binary args. */
int sched__eval(struct sched_store *s, int64_t dl, struct sched_redis_script *script, int n_keys,
                const char **keys, int n_args, const char **args, const size_t *arg_lens,
                struct redisReply **rep, struct dfc_error *err);

/* Appends a record's fields to args/lens (name, value, ...) from index at; returns the new
 * count. args must have room for 2 * f->n more. */
int sched__append_fields(const struct sched_fields *f, const char **args, size_t *lens, int at);

/* An HGETALL reply as the flat name/value arrays the model decoders take. */
struct sched__kv {
    struct redisReply *rep;
    const char **kv;
    size_t *lens;
    size_t n;
};
/* HGETALL key. An empty (missing) hash gives n == 0, which the decoders report as -ENOENT. */
int sched__hgetall(struct sched_store *s, int64_t dl, const char *key, struct sched__kv *out,
                   struct dfc_error *err);
void sched__kv_done(struct sched__kv *kv);
/* n two-word commands (words[i][0] words[i][1], NUL-terminated; n <= SCHED_PIPELINE2_MAX) in
 * one round trip; reps as sched_redis_pipeline. */
#define SCHED_PIPELINE2_MAX 16
int sched__pipeline2(struct sched_store *s, int64_t dl, size_t n, const char *const (*words)[2],
                     struct redisReply **reps, struct dfc_error *err);
/* HGETALL of n keys in one round trip. < 0: the round trip failed (err), nothing to free;
 * else rs[i] and errs[i] are what sched__hgetall would have returned for keys[i], and out[i]
 * is set (sched__kv_done each). */
int sched__hgetall_n(struct sched_store *s, int64_t dl, size_t n, const char *const *keys,
                     struct sched__kv *out, int *rs, struct dfc_error *errs, struct dfc_error *err);
/* One HGETALL reply (taken: freed here or kept in out) as sched__hgetall returns it. */
int sched__hgetall_reply(const char *key, struct redisReply *rep, struct sched__kv *out,
                         struct dfc_error *err);
/* The rest of sched_{host,task,peer}_load from their HGETALL's result (r, kv; kv is freed). */
int sched__host_from_kv(const char *id, int r, struct sched__kv *kv, struct sched_host *out,
                        struct dfc_error *err);
int sched__task_from_kv(const char *id, int r, struct sched__kv *kv, struct sched_task *out,
                        struct dfc_error *err);
int sched__peer_from_kv(struct sched_store *s, int64_t dl, const char *id, int r,
                        struct sched__kv *kv, struct sched_peer *out, struct dfc_error *err);
/* The first half of sched__peer_from_kv: the peer hash decoded, its host and task not
 * checked yet. */
int sched__peer_decode_kv(const char *id, int r, struct sched__kv *kv, struct sched_peer *out,
                          struct dfc_error *err);
/* The peer out (loaded as id) is missing when its host (host false) or task is: -ENOENT
 * naming which, and out released. */
int sched__peer_gone(const char *id, bool host, bool task, struct sched_peer *out,
                     struct dfc_error *err);

/* What the managers' loaders share about one record type (host, task, peer). */
struct sched__record_type {
    const char *noun; /* "host": in messages */
    size_t size;      /* sizeof the record */
    /* The model's decoder (sched_host_decode, ...) for a zeroed record. */
    int (*decode)(const char *const *kv, const size_t *lens, size_t n_kv, void *rec,
                  struct dfc_error *err);
    /* sched_host_load, ...; NULL where no list of them is loaded. */
    int (*load)(struct sched_store *s, int64_t dl, const char *id, void *rec,
                struct dfc_error *err);
    void (*done)(void *rec); /* sched_host_done, ... */
};

/* The rest of a load from its HGETALL's result (r, kv; kv is freed): r < 0 prefixed "load
 * <noun> <id>", an empty hash -ENOENT "<noun> <id> not found", a record that does not decode
 * prefixed "<noun> <id>". */
int sched__record_from_kv(const struct sched__record_type *t, const char *id, int r,
                          struct sched__kv *kv, void *rec, struct dfc_error *err);

/* Loads the records of ids in their order, at most max: ids in blocklist (n_block entries,
 * NULL ones ignored) are passed over, and records gone or unloadable (-ENOENT, -EINVAL)
 * skipped, as upstream; skipping is not an error (err cleared). *out is an array of *n_out
 * records, NULL when there is none (sched__records_free). A failed load is returned as it is;
 * -ENOMEM says "<what>[ <what_id>]: out of memory". */
int sched__load_records(struct sched_store *s, int64_t dl, const struct sched__record_type *t,
                        const struct sched_ids *ids, size_t max, const char *const *blocklist,
                        size_t n_block, const char *what, const char *what_id, void **out,
                        size_t *n_out, struct dfc_error *err);
/* Releases n records of type t (each with t->done) and the array. list may be NULL. */
void sched__records_free(const struct sched__record_type *t, void *list, size_t n);

/* The members of a set (SMEMBERS), bounded by SCHED_IDS_MAX. */
int sched__smembers(struct sched_store *s, int64_t dl, const char *key, struct sched_ids *out,
                    struct dfc_error *err);

/* SCAN (set_key NULL) or SSCAN set_key with MATCH match, COUNT 100, to the end. Elements are
 * taken whole, or with strip: only those starting with strip, as the segment after it up to
 * the next ':'. Sorted and de-duplicated. */
int sched__scan(struct sched_store *s, int64_t dl, const char *set_key, const char *match,
                const char *strip, struct sched_ids *out, struct dfc_error *err);

/* Appends a copy of id (len bytes) to ids. 0, -ENOMEM or -E2BIG past SCHED_IDS_MAX. */
int sched__ids_push(struct sched_ids *ids, const char *id, size_t len);
/* Sorts ids and drops duplicates (SCAN and SSCAN may return an element twice). */
void sched__ids_unique(struct sched_ids *ids);

/* Remaining TTL of a task now, in whole seconds truncated toward zero, as upstream computes
 * int64((ttl - time.Since(created_at)).Seconds()); clamped to +-2^31. */
int64_t sched__remaining_ttl(const struct sched_task *t);

#endif /* SCHED_STORE_INTERNAL_H */
