/*
 * placement_probe.c - which persistent copies of a task count (sched_copies_count,
 * placement_engine.h): a copy counts only while its host is there and its dfdaemon serves it,
 * so peers that announced a copy they do not hold ("ghosts") are dropped and repaired around
 * instead of filling the replica count (docs/trust-model.md).
 *
 * The probe is DfdaemonUpload.StatPersistentCacheTask on host.ip:host.download_port, the port
 * and TLS the scheduler already uses for replication: every dfdaemon serves it there (upstream's
 * too), it answers from the node's own store (NOT_FOUND unless a committed copy is there) and
 * reads nothing but metadata, so it is cheap for the node. The answer must name the task with
 * its content length and piece count.
 *
 * Verdicts are kept in Redis, one key per peer outside upstream's namespaces,
 * `<prefix>:dfc-replica-probes:<peerID>`: "0" (answered) with PX = probeInterval, so the peer
 * is not probed again until it expires; "<n>" (n probes failed in a row) with PX = 3 x
 * probeInterval, probed again once probeInterval has passed (PTTL <= 2 x probeInterval).
 * Several schedulers on one Redis share them, and the scheduler keeps nothing in memory.
 *
 * The rule: NOT_FOUND (or another task's answer) is an answer, so the peer goes at once; a
 * peer whose host hash is gone goes at once; any other failure (refused, unreachable, timed
 * out, an error status) only counts against it: the copy stops counting (so repair may place
 * another) but its peer stays, and only SCHED_PROBE_FAILURES failures in a row, at least
 * probeInterval apart, remove it. A transient error never deletes a real copy's record.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/log.h"
#include "placement_engine.h"

/* KEYS: probe keys. Returns GET, PTTL of each, flattened (GET nil when missing). */
static const char PROBE_READ_LUA[] = "local out = {}\n"
                                     "for i, k in ipairs(KEYS) do\n"
                                     "  out[2 * i - 1] = redis.call('GET', k)\n"
                                     "  out[2 * i] = redis.call('PTTL', k)\n"
                                     "end\n"
                                     "return out\n";

void sched_probe_scripts_init(struct sched_placement *p) {
    p->probe_read = (struct sched_redis_script){.name = "probe_read", .lua = PROBE_READ_LUA};
    sched_redis_script_init(&p->probe_read);
}

static int64_t redis_deadline(void) {
    return sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS);
}

static char *probe_key(const struct sched_placement *p, const char *peer_id) {
    size_t n = strlen(sched_store_prefix(p->store)) + strlen(peer_id) + 32;
    char *k = malloc(n);
    if (k != NULL) {
        snprintf(k, n, "%s:dfc-replica-probes:%s", sched_store_prefix(p->store), peer_id);
    }
    return k;
}

/* What the stored verdict of one peer says. */
enum verdict {
    V_DUE,      /* no verdict, or a failure older than the probe interval: probe it */
    V_COUNTED,  /* answered within the probe interval */
    V_DOUBTFUL, /* failed within the probe interval: not counted, not probed yet */
};

static enum verdict read_verdict(const struct sched_placement *p, const redisReply *val,
                                 const redisReply *pttl, unsigned *failures) {
    *failures = 0;
    if (val->type != REDIS_REPLY_STRING) {
        return V_DUE;
    }
    unsigned long n = strtoul(val->str, NULL, 10);
    if (n == 0) {
        return V_COUNTED;
    }
    *failures = n > SCHED_PROBE_FAILURES ? SCHED_PROBE_FAILURES : (unsigned)n;
    long long left = pttl->type == REDIS_REPLY_INTEGER ? pttl->integer : -2;
    return left > 2 * p->probe_interval_ms ? V_DOUBTFUL : V_DUE;
}

static void write_verdict(struct sched_placement *p, const char *key, unsigned failures) {
    char val[16], px[24];
    snprintf(val, sizeof(val), "%u", failures);
    snprintf(px, sizeof(px), "%lld",
             (long long)(failures == 0 ? p->probe_interval_ms : 3 * p->probe_interval_ms));
    const char *argv[] = {"SET", key, val, "PX", px};
    size_t lens[] = {3, strlen(key), strlen(val), 2, strlen(px)};
    struct redisReply *reply = NULL;
    struct dfc_error err = {0};
    if (sched_redis_argv(sched_store_redis(p->store), redis_deadline(), 5, argv, lens, &reply,
                         &err) < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.probe_record_failed", "key=%s error=\"%s\", ignoring", key,
                dfc_error_msg(&err));
        return; /* the peer is probed again sooner: harmless */
    }
    freeReplyObject(reply);
}

/* Removes a ghost peer as DeletePersistentCachePeer does (gone already is fine). */
static void drop_ghost(struct sched_placement *p, const struct sched_task *task,
                       const char *peer_id, const char *host_id, const char *why) {
    struct dfc_error err = {0};
    int r = sched_peer_delete(p->store, redis_deadline(), peer_id, &err);
    if (r == -ENOENT) {
        return; /* removed meanwhile, or only a set member left (it expires with the task) */
    }
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.ghost_remove_failed", "task_id=%s peer_id=%s error=\"%s\"",
                task->id, peer_id, dfc_error_msg(&err));
        return;
    }
    DFC_LOG(DFC_LOG_WARN, "placement.ghost_removed",
            "task_id=%s peer_id=%s host_id=%s reason=\"%s\"", task->id, peer_id,
            host_id != NULL ? host_id : "", why);
}

/* Probes one due peer; true when it counts. */
static bool probe_peer(struct sched_placement *p, const struct sched_task *task,
                       const char *peer_id, const char *key, unsigned failures) {
    struct sched_peer peer = {0};
    struct sched_host host = {0};
    struct dfc_error err = {0};
    int r = sched_peer_load(p->store, redis_deadline(), peer_id, &peer, &err);
    if (r == -ENOENT) {
        /* Its hash is gone (nothing to remove but a set member that expires with the task),
         * or its host is: then it is removed, as host GC would. */
        drop_ghost(p, task, peer_id, NULL, "its host or record is gone");
        return false;
    }
    if (r < 0 || peer.state != SCHED_PEER_SUCCEEDED) {
        sched_peer_done(&peer); /* Redis failed, or a copy still being made: not counted */
        return false;
    }
    r = sched_host_load(p->store, redis_deadline(), peer.host_id, &host, &err);
    if (r == -ENOENT) {
        drop_ghost(p, task, peer_id, peer.host_id, "its host is gone");
        sched_peer_done(&peer);
        return false;
    }
    bool counted = false;
    if (r == 0) {
        uint64_t length = 0;
        uint32_t pieces = 0;
        int64_t timeout =
            p->timeout_ms < SCHED_PROBE_TIMEOUT_MS ? p->timeout_ms : SCHED_PROBE_TIMEOUT_MS;
        r = sched_dfdaemon_stat(&p->m, &host, task->id, p->advertise_ip, timeout, &length, &pieces,
                                &err);
        if (r == 0 && (length != task->content_length || pieces != task->total_piece_count)) {
            r = dfc_error_set(
                &err, -ENOENT, "its copy has %llu bytes in %u pieces, the task %llu in %u",
                (unsigned long long)length, (unsigned)pieces,
                (unsigned long long)task->content_length, (unsigned)task->total_piece_count);
        }
        if (r == 0) {
            write_verdict(p, key, 0);
            counted = true;
        } else if (r == -ENOENT) {
            drop_ghost(p, task, peer_id, host.id, dfc_error_msg(&err));
        } else if (failures + 1 >= SCHED_PROBE_FAILURES) {
            char why[320];
            snprintf(why, sizeof(why), "%u probes in a row failed, the last: %s", failures + 1,
                     dfc_error_msg(&err));
            drop_ghost(p, task, peer_id, host.id, why);
        } else {
            DFC_LOG(DFC_LOG_WARN, "placement.probe_failed",
                    "task_id=%s peer_id=%s host_id=%s failures=%u error=\"%s\": not counted "
                    "until it answers",
                    task->id, peer_id, host.id, failures + 1, dfc_error_msg(&err));
            write_verdict(p, key, failures + 1);
        }
    }
    sched_host_done(&host);
    sched_peer_done(&peer);
    return counted;
}

int sched_copies_count(struct sched_placement *p, const struct sched_task *task, uint64_t *counted,
                       struct dfc_error *err) {
    *counted = 0;
    struct sched_ids ids = {0};
    int r = sched_peer_ids_by_task(p->store, redis_deadline(), task->id, true, &ids, err);
    if (r < 0 || ids.n == 0) {
        return r;
    }
    char **keys = calloc(ids.n, sizeof(*keys));
    size_t *lens = calloc(ids.n, sizeof(*lens));
    r = keys == NULL || lens == NULL ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
    for (size_t i = 0; r == 0 && i < ids.n; i++) {
        if ((keys[i] = probe_key(p, ids.ids[i])) == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            lens[i] = strlen(keys[i]);
        }
    }
    struct redisReply *reply = NULL;
    if (r == 0) {
        r = sched_redis_eval(sched_store_redis(p->store), redis_deadline(), &p->probe_read,
                             (int)ids.n, (const char **)keys, lens, 0, NULL, NULL, &reply, err);
    }
    if (r == 0 && (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 * ids.n)) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "probe verdicts of task %s: unexpected reply",
                          task->id);
    }
    unsigned probes = 0;
    for (size_t i = 0; r == 0 && i < ids.n; i++) {
        unsigned failures = 0;
        enum verdict v =
            read_verdict(p, reply->element[2 * i], reply->element[2 * i + 1], &failures);
        if (v == V_COUNTED) {
            (*counted)++;
        } else if (v == V_DUE && probes < SCHED_PROBE_MAX_PER_JOB) {
            probes++;
            *counted += probe_peer(p, task, ids.ids[i], keys[i], failures);
        }
    }
    if (reply != NULL) {
        freeReplyObject(reply);
    }
    for (size_t i = 0; keys != NULL && i < ids.n; i++) {
        free(keys[i]);
    }
    free(keys);
    free(lens);
    sched_ids_free(&ids);
    return r;
}
