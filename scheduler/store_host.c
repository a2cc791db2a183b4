/*
 * store_host.c - the host manager: P:persistent-cache-hosts:<id> hashes (never expiring) and
 * the P:persistent-cache-hosts set of ids, as upstream's HostManager (docs/dragonfly-compat.md,
 * "Scheduler on Redis").
 */
#include "store.h"
#include "store_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/cleanup.h"

int sched_host_load(struct sched_store *s, int64_t dl, const char *id, struct sched_host *out,
                    struct dfc_error *err) {
    memset(out, 0, sizeof(*out));
    int r = sched__check_id("host id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__host_key(s, id);
    if (k == NULL) {
        return dfc_error_set(err, -ENOMEM, "load host: out of memory");
    }
    struct sched__kv kv;
    r = sched__hgetall(s, dl, k, &kv, err);
    return sched__host_from_kv(id, r, &kv, out, err);
}

static int decode_host(const char *const *kv, const size_t *lens, size_t n_kv, void *rec,
                       struct dfc_error *err) {
    return sched_host_decode(kv, lens, n_kv, rec, err);
}

static int load_host(struct sched_store *s, int64_t dl, const char *id, void *rec,
                     struct dfc_error *err) {
    return sched_host_load(s, dl, id, rec, err);
}

static void host_done(void *rec) {
    sched_host_done(rec);
}

static const struct sched__record_type host_type = {
    .noun = "host",
    .size = sizeof(struct sched_host),
    .decode = decode_host,
    .load = load_host,
    .done = host_done,
};

int sched__host_from_kv(const char *id, int r, struct sched__kv *kv, struct sched_host *out,
                        struct dfc_error *err) {
    return sched__record_from_kv(&host_type, id, r, kv, out, err);
}

int sched_host_store(struct sched_store *s, int64_t dl, const struct sched_host *h,
                     struct dfc_error *err) {
    int r = sched__check_id("host id", h->id, err);
    if (r < 0) {
        return r;
    }
    struct sched_fields f;
    r = sched_host_encode(h, &f);
    if (r < 0) {
        return dfc_error_set(err, r, "store host %s: cannot encode", h->id);
    }
    _cleanup_free_ char *k = sched__host_key(s, h->id);
    _cleanup_free_ char *set = sched__hosts_key(s);
    if (k == NULL || set == NULL) {
        sched_fields_done(&f);
        return dfc_error_set(err, -ENOMEM, "store host: out of memory");
    }
    const char *keys[] = {k, set};
    const char *args[1 + 2 * 64];
    size_t lens[1 + 2 * 64];
    args[0] = h->id;
    lens[0] = strlen(h->id);
    int n = sched__append_fields(&f, args, lens, 1);
    r = sched__eval(s, dl, &s->store_host, 2, keys, n, args, lens, NULL, err);
    sched_fields_done(&f);
    return r < 0 ? dfc_error_prefix(err, "store host %s", h->id) : 0;
}

int sched_host_delete(struct sched_store *s, int64_t dl, const char *id, struct dfc_error *err) {
    int r = sched__check_id("host id", id, err);
    if (r < 0) {
        return r;
    }
    _cleanup_free_ char *k = sched__host_key(s, id);
    _cleanup_free_ char *set = sched__hosts_key(s);
    if (k == NULL || set == NULL) {
        return dfc_error_set(err, -ENOMEM, "delete host: out of memory");
    }
    const char *keys[] = {k, set};
    const char *args[] = {id};
    redisReply *rep = NULL;
    r = sched__eval(s, dl, &s->delete_host, 2, keys, 1, args, NULL, &rep, err);
    if (r < 0) {
        return dfc_error_prefix(err, "delete host %s", id);
    }
    long long removed = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    return removed > 0 ? 0 : dfc_error_set(err, -ENOENT, "host %s not found", id);
}

int sched_host_ids(struct sched_store *s, int64_t dl, struct sched_ids *out,
                   struct dfc_error *err) {
    _cleanup_free_ char *set = sched__hosts_key(s);
    if (set == NULL) {
        *out = (struct sched_ids){0};
        return dfc_error_set(err, -ENOMEM, "list hosts: out of memory");
    }
    int r = sched__scan(s, dl, set, "*", NULL, out, err);
    return r < 0 ? dfc_error_prefix(err, "list hosts") : 0;
}

void sched_host_list_free(struct sched_host *list, size_t n) {
    sched__records_free(&host_type, list, n);
}

int sched_host_load_random(struct sched_store *s, int64_t dl, size_t n,
                           const char *const *blocklist, size_t n_block, struct sched_host **out,
                           size_t *n_out, struct dfc_error *err) {
    *out = NULL;
    *n_out = 0;
    if (n == 0) {
        return 0;
    }
    _cleanup_free_ char *set = sched__hosts_key(s);
    if (set == NULL) {
        return dfc_error_set(err, -ENOMEM, "load random hosts: out of memory");
    }
    struct sched_ids ids;
    int r = sched__smembers(s, dl, set, &ids, err);
    if (r < 0) {
        return dfc_error_prefix(err, "load random hosts");
    }
    /* Fisher-Yates, as upstream's rand.Shuffle over SMEMBERS. */
    for (size_t i = ids.n; i > 1; i--) {
        size_t j = arc4random_uniform((uint32_t)i);
        char *t = ids.ids[i - 1];
        ids.ids[i - 1] = ids.ids[j];
        ids.ids[j] = t;
    }
    void *list;
    r = sched__load_records(s, dl, &host_type, &ids, n, blocklist, n_block, "load random hosts",
                            NULL, &list, n_out, err);
    sched_ids_free(&ids);
    *out = list;
    return r;
}
