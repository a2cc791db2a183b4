/*
 * placement_replicate.c - one replication job (upstream's replicatePersistentCacheTask, best
 * effort) and the Redis lease that keeps two schedulers on one Redis from running it for the
 * same task at once (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * need = persistent_replica_count - persistent copies. First promote cached copies (Succeeded,
 * not persistent, host not disable_shared and not blocklisted) with UpdatePersistentCacheTask
 * and store them persistent; then ask random eligible hosts (not blocklisted, holding no peer
 * of the task, not disable_shared, disk.free >= content_length) to pull the task with
 * DownloadPersistentCacheTask persistent=true. Unlike upstream, the blocklist is compared with
 * host ids (upstream compared peer ids with it, so a blocklisted uploader's host could still be
 * promoted), a copy that fails is replaced by the next eligible candidate, and the job reports
 * whether it fell short so the repair loop can retry it with a back-off. Hosts excluded from
 * the task for a piece that failed verification are blocked too.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/log.h"
#include "integrity_store.h"
#include "placement_engine.h"

/* ---- lease ---- */

static const char LEASE_EXTEND_LUA[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                                       "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
                                       "end\n"
                                       "return 0\n";

static const char LEASE_RELEASE_LUA[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
                                        "  return redis.call('DEL', KEYS[1])\n"
                                        "end\n"
                                        "return 0\n";

void sched_lease_scripts_init(struct sched_placement *p) {
    p->lease_extend = (struct sched_redis_script){.name = "lease_extend", .lua = LEASE_EXTEND_LUA};
    p->lease_release =
        (struct sched_redis_script){.name = "lease_release", .lua = LEASE_RELEASE_LUA};
    sched_redis_script_init(&p->lease_extend);
    sched_redis_script_init(&p->lease_release);
}

/* Outside upstream's scanned namespaces (persistent-cache-tasks:*, persistent-cache-peers-...),
 * so its tools and the task listing never see it. */
int sched_lease_key(const struct sched_placement *p, const char *task_id, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s:dfc-replica-leases:%s", sched_store_prefix(p->store), task_id);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int64_t redis_deadline(void) {
    return sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS);
}

int sched_lease_acquire(struct sched_placement *p, const char *task_id, int64_t ttl_ms,
                        struct dfc_error *err) {
    char key[512], ttl[24];
    if (sched_lease_key(p, task_id, key, sizeof(key)) < 0) {
        return dfc_error_set(err, -ENAMETOOLONG, "task id too long for a lease key");
    }
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    const char *argv[] = {"SET", key, p->owner, "NX", "PX", ttl};
    size_t lens[] = {3, strlen(key), strlen(p->owner), 2, 2, strlen(ttl)};
    struct redisReply *reply = NULL;
    int r =
        sched_redis_argv(sched_store_redis(p->store), redis_deadline(), 6, argv, lens, &reply, err);
    if (r < 0) {
        return r;
    }
    r = reply->type == REDIS_REPLY_STATUS ? 1 : 0; /* nil: another owner holds it */
    freeReplyObject(reply);
    return r;
}

static int lease_eval(struct sched_placement *p, struct sched_redis_script *script,
                      const char *task_id, const char *ttl, struct dfc_error *err) {
    char key[512];
    if (sched_lease_key(p, task_id, key, sizeof(key)) < 0) {
        return dfc_error_set(err, -ENAMETOOLONG, "task id too long for a lease key");
    }
    const char *keys[] = {key};
    size_t key_lens[] = {strlen(key)};
    const char *args[] = {p->owner, ttl};
    size_t arg_lens[] = {strlen(p->owner), ttl != NULL ? strlen(ttl) : 0};
    struct redisReply *reply = NULL;
    int r = sched_redis_eval(sched_store_redis(p->store), redis_deadline(), script, 1, keys,
                             key_lens, ttl != NULL ? 2 : 1, args, arg_lens, &reply, err);
    if (r < 0) {
        return r;
    }
    r = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1 ? 1 : 0;
    freeReplyObject(reply);
    return r;
}

int sched_lease_extend(struct sched_placement *p, const char *task_id, int64_t ttl_ms,
                       struct dfc_error *err) {
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    return lease_eval(p, &p->lease_extend, task_id, ttl, err);
}

int sched_lease_release(struct sched_placement *p, const char *task_id, struct dfc_error *err) {
    return lease_eval(p, &p->lease_release, task_id, NULL, err);
}

/* ---- the job ---- */

static int64_t call_lease_ms(int64_t call_timeout_ms) {
    return call_timeout_ms + SCHED_PLACEMENT_LEASE_MARGIN_MS;
}

int64_t sched_pull_timeout_ms(const struct sched_placement *p, const struct sched_task *task) {
    uint64_t s = task->content_length / SCHED_PLACEMENT_PULL_BYTES_PER_S +
                 (task->content_length % SCHED_PLACEMENT_PULL_BYTES_PER_S != 0);
    if (s > (uint64_t)SCHED_PLACEMENT_PULL_MAX_MS / 1000) {
        return SCHED_PLACEMENT_PULL_MAX_MS;
    }
    int64_t ms = p->timeout_ms + (int64_t)s * 1000;
    return ms > SCHED_PLACEMENT_PULL_MAX_MS ? SCHED_PLACEMENT_PULL_MAX_MS : ms;
}

/* Extends the lease over the next call (call_timeout_ms); false (logged) when the engine is
 * stopping, the lease was lost or Redis failed. */
/* Whether the engine is stopping (takes p->mu). */
static bool stopping(struct sched_placement *p) {
    pthread_mutex_lock(&p->mu);
    bool s = p->stopping;
    pthread_mutex_unlock(&p->mu);
    return s;
}

static bool keep_lease(struct sched_placement *p, const char *task_id, int64_t call_timeout_ms) {
    if (stopping(p)) {
        return false;
    }
    struct dfc_error err = {0};
    int r = sched_lease_extend(p, task_id, call_lease_ms(call_timeout_ms), &err);
    if (r == 1) {
        return true;
    }
    DFC_LOG(DFC_LOG_WARN, "placement.lease_lost", "task_id=%s error=\"%s\"", task_id,
            r < 0 ? dfc_error_msg(&err) : "the lease expired or another scheduler holds it");
    return false;
}

/* Promotes cached copies; returns how many became persistent, or -1 when the lease was lost. */
static long promote_cached(struct sched_placement *p, const char *const *blocked, size_t n_blocked,
                           struct sched_task *task, struct sched_peer *peers, size_t n_peers,
                           uint64_t need) {
    uint64_t placed = 0;
    for (size_t i = 0; i < n_peers && placed < need; i++) {
        struct sched_peer *peer = &peers[i];
        if (peer->persistent || peer->state != SCHED_PEER_SUCCEEDED ||
            sched_str_in(peer->host_id, blocked, n_blocked)) {
            continue;
        }
        struct sched_host host = {0};
        struct dfc_error err = {0};
        if (sched_host_load(p->store, redis_deadline(), peer->host_id, &host, &err) < 0) {
            continue; /* gone since the peer was loaded */
        }
        if (host.disable_shared) {
            sched_host_done(&host);
            continue;
        }
        if (!keep_lease(p, task->id, p->timeout_ms)) {
            sched_host_done(&host);
            return -1;
        }
        int r = sched_dfdaemon_update(&p->m, &host, task->id, true, p->advertise_ip, p->timeout_ms,
                                      &err);
        if (r == 0) {
            peer->persistent = true;
            r = sched_peer_store(p->store, redis_deadline(), peer, task, &err);
        }
        if (r < 0) {
            DFC_LOG(DFC_LOG_WARN, "placement.promote_failed",
                    "task_id=%s peer_id=%s host_id=%s error=\"%s\"", task->id, peer->id, host.id,
                    dfc_error_msg(&err));
        } else {
            DFC_LOG(DFC_LOG_INFO, "placement.promoted", "task_id=%s peer_id=%s host_id=%s",
                    task->id, peer->id, host.id);
            placed++;
        }
        sched_host_done(&host);
    }
    return (long)placed;
}

static bool eligible_for_pull(const struct sched_host *h, const struct sched_task *task) {
    return !h->disable_shared && h->disk.free >= task->content_length;
}

/* Asks random eligible hosts to pull; returns the copies made, or -1 when the lease was lost. */
static long pull_copies(struct sched_placement *p, const char *const *blocked, size_t n_blocked,
                        unsigned slot, const struct sched_task *task,
                        const struct sched_peer *peers, size_t n_peers, uint64_t need) {
    /* Blocklist: the job's hosts and every host that already holds a peer of the task. */
    size_t n_block = n_blocked + n_peers;
    const char **block = calloc(n_block ? n_block : 1, sizeof(*block));
    if (block == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n_blocked; i++) {
        block[i] = blocked[i];
    }
    for (size_t i = 0; i < n_peers; i++) {
        block[n_blocked + i] = peers[i].host_id;
    }
    struct sched_host *hosts = NULL;
    size_t n_hosts = 0;
    struct dfc_error err = {0};
    /* A few candidates beyond `need`, so one full or unshared host does not leave a copy out. */
    int r = sched_host_load_random(p->store, redis_deadline(), need + SCHED_PLACEMENT_EXTRA_HOSTS,
                                   block, n_block, &hosts, &n_hosts, &err);
    free(block);
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.hosts_failed", "task_id=%s error=\"%s\"", task->id,
                dfc_error_msg(&err));
        return 0;
    }
    uint64_t placed = 0;
    long ret = 0;
    for (size_t i = 0; i < n_hosts && placed < need; i++) {
        const struct sched_host *h = &hosts[i];
        if (!eligible_for_pull(h, task)) {
            continue;
        }
        int64_t timeout_ms = sched_pull_timeout_ms(p, task);
        if (!keep_lease(p, task->id, timeout_ms)) {
            ret = -1;
            break;
        }
        r = sched_dfdaemon_download(&p->m, h, task, p->advertise_ip, timeout_ms, &p->cancels[slot],
                                    &err);
        if (r < 0) {
            DFC_LOG(DFC_LOG_WARN, "placement.pull_failed", "task_id=%s host_id=%s error=\"%s\"",
                    task->id, h->id, dfc_error_msg(&err));
            continue;
        }
        DFC_LOG(DFC_LOG_INFO, "placement.pulled", "task_id=%s host_id=%s", task->id, h->id);
        placed++;
    }
    sched_host_list_free(hosts, n_hosts);
    return ret < 0 ? ret : (long)placed;
}

int sched_task_need(struct sched_placement *p, const char *task_id, bool verify,
                    struct sched_task *task, uint64_t *persistent, uint64_t *need,
                    struct dfc_error *err) {
    *need = 0;
    *persistent = 0;
    uint64_t all = 0;
    /* The task and its counts in one round trip (most tasks asked about are Succeeded). */
    int r = sched_store_load_task_counts(p->store, redis_deadline(), task_id, task, &all,
                                         persistent, err);
    if (r == -ENOENT) {
        return 0; /* expired or deleted: nothing to keep */
    }
    if (r < 0) {
        return r;
    }
    if (task->state != SCHED_TASK_SUCCEEDED) {
        *persistent = 0;
        return 0; /* only finished uploads are replicated */
    }
    /* The set's size counts every peer that said it holds a copy; the probed count only those
     * that are there. */
    if (verify && p->probe_interval_ms > 0 &&
        (r = sched_copies_count(p, task, persistent, err)) < 0) {
        return r;
    }
    if (*persistent < task->persistent_replica_count) {
        *need = task->persistent_replica_count - *persistent;
    }
    return 0;
}

enum sched_job_outcome sched_job_run(struct sched_placement *p, const struct sched_job *job,
                                     unsigned slot, bool *was_short) {
    struct dfc_error err = {0};
    struct sched_task task = {0};
    uint64_t persistent = 0, need = 0;
    *was_short = false;
    /* Most jobs (one per finished upload) find enough copies: check before taking a lease.
     * The probes (if any are due) are made here, so those under the lease find fresh
     * verdicts. */
    int r = sched_task_need(p, job->task_id, true, &task, &persistent, &need, &err);
    sched_task_done(&task);
    *was_short = r == 0 && need > 0;
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.failed", "task_id=%s error=\"%s\"", job->task_id,
                dfc_error_msg(&err));
        return SCHED_JOB_ERROR;
    }
    if (need == 0) {
        return SCHED_JOB_DONE;
    }
    r = sched_lease_acquire(p, job->task_id, call_lease_ms(p->timeout_ms), &err);
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.failed", "task_id=%s error=\"%s\"", job->task_id,
                dfc_error_msg(&err));
        return SCHED_JOB_ERROR;
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_DEBUG, "placement.busy", "task_id=%s", job->task_id);
        return SCHED_JOB_BUSY;
    }

    enum sched_job_outcome out = SCHED_JOB_DONE;
    struct sched_peer *peers = NULL;
    size_t n_peers = 0;
    struct sched_ids excluded = {0};
    const char **blocked = NULL;
    size_t n_blocked = 0;
    /* Again under the lease: another scheduler may have placed copies meanwhile. */
    r = sched_task_need(p, job->task_id, true, &task, &persistent, &need, &err);
    if (r < 0) {
        goto failed;
    }
    if (need == 0) {
        goto release;
    }
    r = sched_peer_load_by_task(p->store, redis_deadline(), task.id, &peers, &n_peers, &err);
    if (r < 0) {
        goto failed;
    }
    /* Hosts excluded from the task (a piece they served failed verification, rpc_peer.c)
     * neither keep nor receive a copy of it, whoever queued the job. */
    r = sched_parents_excluded(p->store, redis_deadline(), task.id, &excluded, &err);
    if (r < 0) {
        goto failed;
    }
    n_blocked = job->n_block + excluded.n;
    blocked = calloc(n_blocked ? n_blocked : 1, sizeof(*blocked));
    if (blocked == NULL) {
        (void)dfc_error_set(&err, -ENOMEM, "out of memory");
        goto failed;
    }
    for (size_t i = 0; i < n_blocked; i++) {
        blocked[i] = i < job->n_block ? job->block_hosts[i] : excluded.ids[i - job->n_block];
    }
    long promoted = promote_cached(p, blocked, n_blocked, &task, peers, n_peers, need);
    long pulled = 0;
    if (promoted >= 0 && (uint64_t)promoted < need) {
        pulled = pull_copies(p, blocked, n_blocked, slot, &task, peers, n_peers,
                             need - (uint64_t)promoted);
    }
    if (promoted < 0 || pulled < 0) {
        out = SCHED_JOB_SHORT; /* stopping, or the lease is gone: its holder carries on */
        goto release;
    }
    if ((uint64_t)(promoted + pulled) < need) {
        DFC_LOG(DFC_LOG_WARN, "placement.short",
                "task_id=%s wanted=%llu persistent=%llu promoted=%ld pulled=%ld", task.id,
                (unsigned long long)task.persistent_replica_count, (unsigned long long)persistent,
                promoted, pulled);
        out = SCHED_JOB_SHORT;
    }
    goto release;

failed:
    DFC_LOG(DFC_LOG_WARN, "placement.failed", "task_id=%s error=\"%s\"", job->task_id,
            dfc_error_msg(&err));
    out = SCHED_JOB_ERROR;
release:
    if (sched_lease_release(p, job->task_id, &err) < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.lease_release_failed",
                "task_id=%s error=\"%s\", ignoring (it expires)", job->task_id,
                dfc_error_msg(&err));
    }
    free(blocked);
    sched_ids_free(&excluded);
    sched_peer_list_free(peers, n_peers);
    sched_task_done(&task);
    return out;
}
