/*
 * redis_internal.h - the client's state and the slot and connection calls that redis.c (the
 * pool, connecting, Sentinel discovery), redis_cmd.c (the commands) and redis_bounds.c (reply
 * bounds) share. Private to scheduler/redis*.c.
 *
 * Locks: r->mu guards the fields marked "under mu"; a slot taken with sched__redis_take_slot
 * belongs to its taker alone until sched__redis_give_slot, so its connection is used without
 * the lock. No call here holds r->mu across I/O.
 */
#ifndef SCHED_REDIS_INTERNAL_H
#define SCHED_REDIS_INTERNAL_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dfc/addr.h"
#include "dfc/error.h"
#include "redis.h"
#include "redis_conn.h"

struct slot {
    struct sched_redis_conn *c; /* NULL: not connected */
    uint64_t gen;               /* r->gen when c was made */
    char addr[DFC_ADDR_STR_MAX];
};

struct sched_redis {
    /* Immutable after sched_redis_new. */
    struct dfc_hostport *addrs;
    size_t n_addrs;
    char *master_name; /* NULL: direct */
    char *username;
    char *password;
    char *sentinel_username;
    char *sentinel_password;
    struct sched_redis_tls *tls; /* NULL: plaintext */
    int db;
    unsigned pool_size;
    int64_t backoff_min_ms;
    int64_t backoff_max_ms;
    int64_t master_check_ms;
    struct dfc_metric *latency, *errors; /* borrowed; NULL: not counted */

    pthread_mutex_t mu;
    pthread_cond_t idle_cv;
    /* Under mu. */
    struct slot *slots;
    unsigned *idle; /* stack of idle slot indexes */
    unsigned n_idle;
    unsigned n_waiting;         /* callers blocked in take_slot */
    struct dfc_hostport master; /* the direct address, or the last master the Sentinels named */
    bool master_known;
    bool master_stale;
    uint64_t gen;              /* bumped whenever master changes */
    int64_t master_checked_ms; /* when the Sentinels last named the master (monotonic) */
    bool checking;             /* a command is asking the Sentinels on its way */
    size_t sentinel_first;     /* the Sentinel that answered last */
    unsigned fails;            /* connect failures in a row */
    int64_t retry_at_ms;       /* no connect before this */
    struct dfc_error last_fail;
    char current[DFC_ADDR_STR_MAX]; /* last address connected to, "" before */
};

/* An idle slot's index, waiting until deadline_ms for one: -ETIMEDOUT when none came free. */
int sched__redis_take_slot(struct sched_redis *r, int64_t deadline_ms, unsigned *idx,
                           struct dfc_error *err);
void sched__redis_give_slot(struct sched_redis *r, unsigned idx);
/* Closes s's connection (the next use reconnects). */
void sched__redis_drop(struct slot *s);
/* The connection was found broken: in Sentinel mode the master must be asked for again. */
void sched__redis_mark_stale(struct sched_redis *r);
/* Makes sure s holds a usable connection (dropping a stale or dead one first). */
int sched__redis_ready_slot(struct sched_redis *r, struct slot *s, int64_t deadline_ms,
                            struct dfc_error *err);
/* Runs argv on c within deadline_ms. A reply (error replies included) goes to *reply; an I/O
 * failure or timeout returns -ECONNREFUSED or -ETIMEDOUT and leaves c unusable. */
int sched__redis_roundtrip(struct sched_redis_conn *c, const char *addr, int64_t deadline_ms,
                           int argc, const char **argv, const size_t *lens, redisReply **reply,
                           struct dfc_error *err);

/* ---- redis_bounds.c ---- */

/* The largest array (elements) and string (bytes) a reply may hold; a larger one fails its
 * command -ENOMEM and drops the connection. */
#define SCHED_REDIS_MAX_ELEMENTS (256 * 1024)
#define SCHED_REDIS_MAX_STRING   ((size_t)8 << 20)

/* Has reader build replies within the bounds above (at connect). */
void sched__redis_bound_replies(redisReader *reader);

#endif /* SCHED_REDIS_INTERNAL_H */
