/*
 * redis_cmd.c - the scheduler's Redis commands (redis.h): one command, a pipeline of reads, a
 * Lua script by SHA-1 with the EVAL fallback, each on a pooled connection that redis.c makes
 * ready, and the metrics of each call.
 *
 * DESIGN
 *   A call takes an idle slot, has redis.c make its connection usable, runs, and gives the
 *   slot back; an I/O error or a timeout drops that connection (a late reply would
 *   desynchronise the stream) and, except for a timeout, marks the Sentinels' master stale.
 *   A -READONLY reply (a demoted master) is retried at most READONLY_RETRIES times on a
 *   connection to the newly named master: the server refused the write, so sending it again
 *   cannot apply it twice. A -NOSCRIPT reply to EVALSHA is answered with EVAL and the body,
 *   on the same connection.
 */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/digest.h"
#include "dfc/metrics.h"
#include "redis_internal.h"

#define READONLY_RETRIES 2

static bool is_error(const redisReply *rep, const char *prefix) {
    return rep->type == REDIS_REPLY_ERROR && rep->str != NULL &&
           strncmp(rep->str, prefix, strlen(prefix)) == 0;
}

int sched_redis_reply_error(const redisReply *rep, const char *addr, struct dfc_error *err) {
    const char *text = rep->str != NULL ? rep->str : "error reply";
    int code = is_error(rep, "WRONGTYPE") ? SCHED_REDIS_E_WRONGTYPE : DFC_E_INTERNAL;
    return addr != NULL ? dfc_error_set(err, code, "redis %s: %s", addr, text)
                        : dfc_error_set(err, code, "redis: %s", text);
}

/* ---- commands ---- */

/* One command on one slot: NOSCRIPT fallback (lua != NULL: argv[0] is EVALSHA and argv[1]
 * the sha, replaced by EVAL and the body) and -READONLY retries. */
static int run_once(struct sched_redis *r, int64_t deadline_ms, int argc, const char **argv,
                    const size_t *lens, const char *lua, redisReply **reply,
                    struct dfc_error *err) {
    unsigned idx = 0;
    int rc = sched__redis_take_slot(r, deadline_ms, &idx, err);
    if (rc < 0) {
        return rc;
    }
    struct slot *s = &r->slots[idx];
    redisReply *rep = NULL;
    for (int attempt = 0;; attempt++) {
        rc = sched__redis_ready_slot(r, s, deadline_ms, err);
        if (rc < 0) {
            break;
        }
        rc = sched__redis_roundtrip(s->c, s->addr, deadline_ms, argc, argv, lens, &rep, err);
        if (rc == 0 && lua != NULL && is_error(rep, "NOSCRIPT")) {
            freeReplyObject(rep);
            rep = NULL;
            const char *eargv[2] = {"EVAL", lua};
            size_t elens[2] = {4, strlen(lua)};
            const char **av = malloc((size_t)argc * sizeof(*av));
            size_t *al = malloc((size_t)argc * sizeof(*al));
            if (av == NULL || al == NULL) {
                free(av);
                free(al);
                rc = dfc_error_set(err, -ENOMEM, "redis %s: out of memory", s->addr);
                break;
            }
            memcpy(av, argv, (size_t)argc * sizeof(*av));
            memcpy(al, lens, (size_t)argc * sizeof(*al));
            memcpy(av, eargv, sizeof(eargv));
            memcpy(al, elens, sizeof(elens));
            rc = sched__redis_roundtrip(s->c, s->addr, deadline_ms, argc, av, al, &rep, err);
            free(av);
            free(al);
        }
        if (rc < 0) {
            sched__redis_drop(s); /* I/O error or timeout: the stream may hold a late reply */
            if (rc != -ETIMEDOUT) {
                sched__redis_mark_stale(r);
            }
            break;
        }
        if (is_error(rep, "READONLY")) {
            sched__redis_drop(s);
            sched__redis_mark_stale(r);
            int64_t left = deadline_ms - dfc_mono_ms();
            if (r->master_name != NULL && attempt < READONLY_RETRIES && left > 0) {
                freeReplyObject(rep);
                rep = NULL;
                if (attempt > 0) { /* the Sentinels still named the old master: a failover
                                    * is under way, give it a moment */
                    int64_t nap = r->backoff_min_ms < left / 2 ? r->backoff_min_ms : left / 2;
                    struct timespec ts = {.tv_sec = (time_t)(nap / 1000),
                                          .tv_nsec = (long)(nap % 1000) * 1000000};
                    nanosleep(&ts, NULL);
                }
                continue;
            }
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            rc = sched_redis_reply_error(rep, s->addr, err);
            freeReplyObject(rep);
            rep = NULL;
        }
        break;
    }
    sched__redis_give_slot(r, idx);
    if (rc == 0) {
        *reply = rep;
    }
    return rc;
}

/* A call's latency and outcome under kind (SCHED_REDIS_KINDS); started is CLOCK_MONOTONIC. */
static void count(struct sched_redis *r, size_t kind, const struct timespec *started, int rc) {
    if (r->latency == NULL && r->errors == NULL) {
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    dfc_metric_observe(r->latency, kind,
                       (double)(now.tv_sec - started->tv_sec) +
                           (double)(now.tv_nsec - started->tv_nsec) / 1e9);
    if (rc < 0) {
        dfc_metric_inc(r->errors, kind, 1);
    }
}

static int run(struct sched_redis *r, int64_t deadline_ms, int argc, const char **argv,
               const size_t *lens, const char *lua, redisReply **reply, struct dfc_error *err) {
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    int rc = run_once(r, deadline_ms, argc, argv, lens, lua, reply, err);
    count(r, lua != NULL ? 1 : 0, &started, rc);
    return rc;
}

int sched_redis_argv(struct sched_redis *r, int64_t deadline_ms, int argc, const char **argv,
                     const size_t *lens, struct redisReply **reply, struct dfc_error *err) {
    if (argc < 1) {
        return dfc_error_set(err, -EINVAL, "redis: empty command");
    }
    redisReply *rep = NULL;
    int rc = run(r, deadline_ms, argc, argv, lens, NULL, &rep, err);
    if (rc == 0) {
        if (reply != NULL) {
            *reply = rep;
        } else {
            freeReplyObject(rep);
        }
    }
    return rc;
}

int sched_redis_pipeline(struct sched_redis *r, int64_t deadline_ms, size_t n,
                         const struct sched_redis_cmd *cmds, struct redisReply **replies,
                         struct dfc_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (cmds[i].argc < 1) {
            return dfc_error_set(err, -EINVAL, "redis: empty command");
        }
        replies[i] = NULL;
    }
    if (n == 0) {
        return 0;
    }
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    unsigned idx = 0;
    int rc = sched__redis_take_slot(r, deadline_ms, &idx, err);
    if (rc < 0) {
        count(r, 2, &started, rc);
        return rc;
    }
    struct slot *s = &r->slots[idx];
    rc = sched__redis_ready_slot(r, s, deadline_ms, err);
    if (rc == 0) {
        rc = sched__redis_conn_run(s->c, s->addr, deadline_ms, n, cmds, replies, err);
        if (rc < 0) {
            sched__redis_drop(s); /* the stream may hold late replies or half a command */
            if (rc != -ETIMEDOUT) {
                sched__redis_mark_stale(r);
            }
        }
    }
    sched__redis_give_slot(r, idx);
    count(r, 2, &started, rc);
    return rc;
}

void sched_redis_script_init(struct sched_redis_script *s) {
    struct dfc_evp h;
    if (dfc_evp_init(&h, "sha1") < 0) {
        abort(); /* OpenSSL without SHA-1 or out of memory at start-up: nothing sensible left */
    }
    dfc_evp_update(&h, s->lua, strlen(s->lua));
    char hex[DFC_EVP_HEX_MAX];
    dfc_evp_final_hex(&h, hex);
    dfc_evp_done(&h);
    memcpy(s->sha1, hex, 40); /* SHA-1: 40 hex digits */
    s->sha1[40] = '\0';
}

int sched_redis_eval(struct sched_redis *r, int64_t deadline_ms, struct sched_redis_script *s,
                     int n_keys, const char **keys, const size_t *key_lens, int n_args,
                     const char **args, const size_t *arg_lens, struct redisReply **reply,
                     struct dfc_error *err) {
    if (n_keys < 0 || n_args < 0) {
        return dfc_error_set(err, -EINVAL, "redis script %s: negative key or argument count",
                             s->name);
    }
    /* A script nobody initialised gets its SHA-1 computed here, into a local copy: s may be
     * shared by threads, and writing it here would race. */
    struct sched_redis_script local;
    if (s->sha1[0] == '\0') {
        local = *s;
        sched_redis_script_init(&local);
    }
    const char *sha1 = s->sha1[0] != '\0' ? s->sha1 : local.sha1;
    int argc = 3 + n_keys + n_args;
    const char **av = malloc((size_t)argc * sizeof(*av));
    size_t *al = malloc((size_t)argc * sizeof(*al));
    if (av == NULL || al == NULL) {
        free(av);
        free(al);
        return dfc_error_set(err, -ENOMEM, "redis script %s: out of memory", s->name);
    }
    char nk[16];
    snprintf(nk, sizeof(nk), "%d", n_keys);
    av[0] = "EVALSHA";
    al[0] = 7;
    av[1] = sha1;
    al[1] = 40;
    av[2] = nk;
    al[2] = strlen(nk);
    for (int i = 0; i < n_keys; i++) {
        av[3 + i] = keys[i];
        al[3 + i] = key_lens ? key_lens[i] : strlen(keys[i]);
    }
    for (int i = 0; i < n_args; i++) {
        av[3 + n_keys + i] = args[i];
        al[3 + n_keys + i] = arg_lens ? arg_lens[i] : strlen(args[i]);
    }
    redisReply *rep = NULL;
    int rc = run(r, deadline_ms, argc, av, al, s->lua, &rep, err);
    free(av);
    free(al);
    if (rc < 0) {
        dfc_error_prefix(err, "script %s", s->name);
        return rc;
    }
    if (reply != NULL) {
        *reply = rep;
    } else {
        freeReplyObject(rep);
    }
    return 0;
}
