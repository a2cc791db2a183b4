/*
 * redis.c - the scheduler's Redis client: a pool of connections (redis_conn.c: TCP or TLS,
 * hiredis for the protocol) with per-command deadlines, capped exponential reconnect back-off
 * and Sentinel master discovery from authenticated Sentinels (see redis.h and
 * docs/dragonfly-compat.md, "Scheduler on Redis"). The commands that run on the pool are
 * redis_cmd.c.
 *
 * DESIGN
 *   A command takes an idle pool slot (waiting on a condition variable until its deadline),
 *   makes sure the slot's connection is usable, runs, and gives the slot back. All network I/O
 *   happens outside the pool mutex, so one slow Redis call never holds up another thread's.
 *
 *   A slot's connection is dropped (and made again by the next command on that slot) when:
 *   an I/O error or a timeout hit it (a late reply would desynchronise the stream), the
 *   server answered -READONLY (a demoted master), the master address changed since it was
 *   made (generation counter), or it is found dead before use (a poll shows EOF: the server
 *   restarted or closed it). The pre-use check means a restarted Redis costs no failed
 *   command, and no command is ever sent twice after an ambiguous I/O error.
 *
 *   Connect failures (refused, timed out, AUTH or SELECT refused) are counted: after the n-th
 *   in a row, no new connect is tried for min(backoff_min * 2^(n-1), backoff_max) ms, and
 *   commands that need one fail at once with UNAVAILABLE and the last failure's text. The
 *   first success resets the count.
 *
 *   With a master name, the address list is the Sentinels. The master address is cached; an
 *   I/O error, a connect failure or a -READONLY reply marks it stale, and the next connect
 *   asks the Sentinels again (starting with the one that answered last); and at most once a
 *   second a command asks them anyway (recheck_master: the old master of a failover takes
 *   writes until it is demoted, and loses them then). A -READONLY reply is
 *   retried (at most twice) on a connection to the newly named master: the server refused the
 *   write, so sending it again cannot apply it twice.
 *
 *   Sentinel trust: with database.redis.sentinelPassword set, each Sentinel gets AUTH
 *   ([sentinelUsername] sentinelPassword) on a fresh connection before the question; an error
 *   reply (a wrong password, or a Sentinel that needs none: Redis answers AUTH there with an
 *   error too) or no reply makes it untrusted and the next one is asked, so the master address
 *   and hence the Redis password's destination come only from an authenticated Sentinel.
 *   Without a sentinel password the Sentinels are trusted as they are (upstream's behaviour),
 *   and sched_redis_new warns that a re-pointed Sentinel would receive the Redis password's
 *   next connection.
 *
 *   Connections are redis_conn.c's (TCP or TLS, hiredis only for the protocol): the deadline
 *   bounds connect, the TLS handshake, send and receive, but not name resolution (a blocking
 *   getaddrinfo): give IP addresses where a hung DNS must not stall a call.
 */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "redis_internal.h"

#define DEFAULT_POOL_SIZE   20
#define DEFAULT_BACKOFF_MIN 100
#define DEFAULT_BACKOFF_MAX 5000
#define SENTINEL_MIN_MS     50 /* the least time one Sentinel gets when several are listed */
/* With Sentinels, how often the master is asked for again while nothing failed: a failover
 * promotes a replica while the old master may keep taking writes for seconds until the
 * Sentinels demote it (then flushes them), so waiting for -READONLY loses those writes. */
#define DEFAULT_MASTER_CHECK_MS 1000

int64_t sched_redis_deadline(int64_t timeout_ms) {
    return dfc_mono_ms() + timeout_ms;
}

/* Parses "host:port" or "[v6]:port" (dfc/addr.h). */
static int parse_addr(const char *s, struct dfc_hostport *hp, struct dfc_error *err) {
    if (dfc_addr_parse(s, hp) < 0) {
        return dfc_error_set(err, -EINVAL, "redis address `%s`: want host:port", s ? s : "");
    }
    return 0;
}

static char *dup_opt(const char *s) {
    return s != NULL && *s != '\0' ? strdup(s) : NULL;
}

void sched_redis_free(struct sched_redis *r) {
    if (r == NULL) {
        return;
    }
    for (unsigned i = 0; r->slots != NULL && i < r->pool_size; i++) {
        if (r->slots[i].c != NULL) {
            sched__redis_conn_free(r->slots[i].c);
        }
    }
    sched__redis_tls_free(r->tls);
    pthread_cond_destroy(&r->idle_cv);
    pthread_mutex_destroy(&r->mu);
    free(r->slots);
    free(r->idle);
    free(r->addrs);
    free(r->master_name);
    free(r->username);
    free(r->password);
    free(r->sentinel_username);
    free(r->sentinel_password);
    free(r);
}

/* The settings that leave Redis open to the network, said once at start. */
static void warn_at_start(const struct sched_redis *r) {
    if (r->tls == NULL) {
        DFC_LOG(DFC_LOG_WARN, "redis.tls_off",
                "msg=\"database.redis.tls is not configured: Redis%s traffic, the password "
                "included, is plaintext\"",
                r->master_name != NULL ? " and Sentinel" : "");
    } else if (!sched__redis_tls_verifies(r->tls)) {
        DFC_LOG(DFC_LOG_WARN, "redis.tls_insecure",
                "msg=\"database.redis.tls.insecureSkipVerify is true: Redis%s server "
                "certificates are NOT checked; anyone on the path can pose as Redis and read the "
                "password\"",
                r->master_name != NULL ? " and Sentinel" : "");
    }
    if (r->master_name != NULL && r->sentinel_password == NULL && r->password != NULL) {
        DFC_LOG(DFC_LOG_WARN, "redis.sentinel_unauthenticated",
                "msg=\"database.redis.sentinelPassword is not set: the Sentinels are not "
                "authenticated, and the Redis password goes to whatever master they name\"");
    }
}

int sched_redis_new(const struct sched_redis_opts *opts, struct sched_redis **ret,
                    struct dfc_error *err) {
    if (opts == NULL || opts->n_addrs == 0 || opts->addrs == NULL) {
        return dfc_error_set(err, -EINVAL, "database.redis.addrs: at least one host:port");
    }
    if (opts->db < 0) {
        return dfc_error_set(err, -EINVAL, "database.redis.db: %d is negative", opts->db);
    }
    if (opts->backoff_min_ms < 0 || opts->backoff_max_ms < 0) {
        return dfc_error_set(err, -EINVAL, "redis back-off: negative");
    }
    struct sched_redis *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis client: out of memory");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->mu, NULL);

    r->n_addrs = opts->n_addrs;
    r->pool_size = opts->pool_size ? opts->pool_size : DEFAULT_POOL_SIZE;
    r->backoff_min_ms = opts->backoff_min_ms ? opts->backoff_min_ms : DEFAULT_BACKOFF_MIN;
    r->backoff_max_ms = opts->backoff_max_ms ? opts->backoff_max_ms : DEFAULT_BACKOFF_MAX;
    r->master_check_ms =
        opts->master_check_ms > 0 ? opts->master_check_ms : DEFAULT_MASTER_CHECK_MS;
    r->latency = opts->latency;
    r->errors = opts->errors;
    if (r->backoff_max_ms < r->backoff_min_ms) {
        r->backoff_max_ms = r->backoff_min_ms;
    }
    r->db = opts->db;
    r->addrs = calloc(r->n_addrs, sizeof(*r->addrs));
    r->slots = calloc(r->pool_size, sizeof(*r->slots));
    r->idle = calloc(r->pool_size, sizeof(*r->idle));
    r->master_name = dup_opt(opts->master_name);
    r->username = dup_opt(opts->username);
    r->password = dup_opt(opts->password);
    r->sentinel_username = dup_opt(opts->sentinel_username);
    r->sentinel_password = dup_opt(opts->sentinel_password);
    if (r->addrs == NULL || r->slots == NULL || r->idle == NULL ||
        (opts->sentinel_username && *opts->sentinel_username && !r->sentinel_username) ||
        (opts->sentinel_password && *opts->sentinel_password && !r->sentinel_password) ||
        (opts->master_name && *opts->master_name && !r->master_name) ||
        (opts->username && *opts->username && !r->username) ||
        (opts->password && *opts->password && !r->password)) {
        sched_redis_free(r);
        return dfc_error_set(err, -ENOMEM, "redis client: out of memory");
    }
    for (size_t i = 0; i < r->n_addrs; i++) {
        int rc = parse_addr(opts->addrs[i], &r->addrs[i], err);
        if (rc < 0) {
            sched_redis_free(r);
            dfc_error_prefix(err, "database.redis.addrs[%zu]", i);
            return rc;
        }
    }
    if (r->username != NULL && r->password == NULL) {
        sched_redis_free(r);
        return dfc_error_set(err, -EINVAL, "database.redis.username: set without a password");
    }
    if (r->sentinel_username != NULL && r->sentinel_password == NULL) {
        sched_redis_free(r);
        return dfc_error_set(err, -EINVAL,
                             "database.redis.sentinelUsername: set without a sentinelPassword");
    }
    int trc = sched__redis_tls_new(opts, &r->tls, err);
    if (trc < 0) {
        sched_redis_free(r);
        return trc;
    }
    warn_at_start(r);
    for (unsigned i = 0; i < r->pool_size; i++) {
        r->idle[i] = r->pool_size - 1 - i;
    }
    r->n_idle = r->pool_size;
    if (r->master_name == NULL) {
        r->master = r->addrs[0];
        r->master_known = true;
    }
    *ret = r;
    return 0;
}

const char *sched_redis_current_addr(struct sched_redis *r, char *buf, size_t len) {
    pthread_mutex_lock(&r->mu);
    bool have = r->current[0] != '\0';
    if (have) {
        snprintf(buf, len, "%s", r->current);
    }
    pthread_mutex_unlock(&r->mu);
    return have ? buf : NULL;
}

/* ---- the pool ---- */

int sched__redis_take_slot(struct sched_redis *r, int64_t deadline_ms, unsigned *idx,
                           struct dfc_error *err) {
    struct timespec until = {.tv_sec = (time_t)(deadline_ms / 1000),
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000};
    pthread_mutex_lock(&r->mu);
    while (r->n_idle == 0) {
        r->n_waiting++;
        int rc = pthread_cond_timedwait(&r->idle_cv, &r->mu, &until);
        r->n_waiting--;
        if (rc == ETIMEDOUT && r->n_idle == 0) {
            pthread_mutex_unlock(&r->mu);
            return dfc_error_set(err, -ETIMEDOUT,
                                 "redis: all %u pooled connections stayed busy until the deadline",
                                 r->pool_size);
        }
    }
    *idx = r->idle[--r->n_idle];
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void sched__redis_give_slot(struct sched_redis *r, unsigned idx) {
    pthread_mutex_lock(&r->mu);
    r->idle[r->n_idle++] = idx;
    bool wake = r->n_waiting > 0;
    pthread_mutex_unlock(&r->mu);
    /* Signalled after unlocking, so the waiter does not wake up only to block on mu. */
    if (wake) {
        pthread_cond_signal(&r->idle_cv);
    }
}

void sched__redis_drop(struct slot *s) {
    if (s->c != NULL) {
        sched__redis_conn_free(s->c);
        s->c = NULL;
    }
}

/* The connection was found broken: in Sentinel mode the master must be asked for again. */
void sched__redis_mark_stale(struct sched_redis *r) {
    if (r->master_name != NULL) {
        pthread_mutex_lock(&r->mu);
        r->master_stale = true;
        pthread_mutex_unlock(&r->mu);
    }
}

/* ---- talking to one server ---- */

/* Connects to hp (TLS when configured) within deadline_ms; sets err naming the address. */
static int dial(struct sched_redis *r, const struct dfc_hostport *hp, int64_t deadline_ms,
                struct sched_redis_conn **ret, struct dfc_error *err) {
    return sched__redis_conn_dial(hp, r->tls, deadline_ms, ret, err);
}

int sched__redis_roundtrip(struct sched_redis_conn *c, const char *addr, int64_t deadline_ms,
                           int argc, const char **argv, const size_t *lens, redisReply **reply,
                           struct dfc_error *err) {
    struct sched_redis_cmd one = {.argc = argc, .argv = argv, .lens = lens};
    return sched__redis_conn_run(c, addr, deadline_ms, 1, &one, reply, err);
}

/* AUTH [user] password on c: 0, or an error naming what (e.g. "redis sentinel X: AUTH"). */
static int auth(struct sched_redis_conn *c, const char *what, const char *a, const char *user,
                const char *password, int64_t deadline_ms, struct dfc_error *err) {
    const char *argv[3] = {"AUTH", user ? user : password, password};
    size_t lens[3] = {4, strlen(argv[1]), strlen(password)};
    redisReply *rep = NULL;
    int rc = sched__redis_roundtrip(c, a, deadline_ms, user ? 3 : 2, argv, lens, &rep, err);
    if (rc < 0) {
        return rc;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        rc = dfc_error_set(err, DFC_E_INTERNAL, "%s %s: AUTH%s%s: %s", what, a, user ? " as " : "",
                           user ? user : "", rep->str);
    } else if (rep->type != REDIS_REPLY_STATUS || strcmp(rep->str, "OK") != 0) {
        rc = dfc_error_set(err, DFC_E_INTERNAL, "%s %s: AUTH%s%s: unexpected reply", what, a,
                           user ? " as " : "", user ? user : "");
    }
    freeReplyObject(rep);
    return rc;
}

/* AUTH and SELECT on a fresh connection. */
static int handshake(struct sched_redis *r, struct sched_redis_conn *c, const char *addr,
                     int64_t deadline_ms, struct dfc_error *err) {
    redisReply *rep = NULL;
    int rc;
    if (r->password != NULL) {
        rc = auth(c, "redis", addr, r->username, r->password, deadline_ms, err);
        if (rc < 0) {
            return rc;
        }
    }
    if (r->db > 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", r->db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, strlen(db)};
        rc = sched__redis_roundtrip(c, addr, deadline_ms, 2, argv, lens, &rep, err);
        if (rc < 0) {
            return rc;
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            rc = dfc_error_set(err, DFC_E_INTERNAL, "redis %s: SELECT %d: %s", addr, r->db,
                               rep->str);
            freeReplyObject(rep);
            return rc;
        }
        freeReplyObject(rep);
    }
    return 0;
}

/* ---- Sentinel ---- */

/* Asks one Sentinel for the master's address. 0 with *hp, or an error naming the Sentinel. */
static int ask_sentinel(struct sched_redis *r, const struct dfc_hostport *sentinel,
                        int64_t deadline_ms, struct dfc_hostport *hp, struct dfc_error *err) {
    char a[DFC_ADDR_STR_MAX];
    dfc_addr_format(sentinel->host, sentinel->port, a, sizeof(a));
    struct sched_redis_conn *c = NULL;
    int rc = dial(r, sentinel, deadline_ms, &c, err);
    if (rc < 0) {
        return rc;
    }
    /* An unauthenticated or refusing Sentinel is not asked: its answer could send the Redis
     * password anywhere. */
    if (r->sentinel_password != NULL) {
        rc = auth(c, "redis sentinel", a, r->sentinel_username, r->sentinel_password, deadline_ms,
                  err);
        if (rc < 0) {
            sched__redis_conn_free(c);
            if (rc == DFC_E_INTERNAL) {
                dfc_error_prefix(err, "not trusted");
                rc = -ECONNREFUSED;
            }
            return rc;
        }
    }
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", r->master_name};
    size_t lens[3] = {8, 23, strlen(r->master_name)};
    redisReply *rep = NULL;
    rc = sched__redis_roundtrip(c, a, deadline_ms, 3, argv, lens, &rep, err);
    sched__redis_conn_free(c);
    if (rc < 0) {
        return rc;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        rc = dfc_error_set(err, DFC_E_INTERNAL, "redis sentinel %s: %s", a, rep->str);
    } else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
               rep->element[0]->type != REDIS_REPLY_STRING ||
               rep->element[1]->type != REDIS_REPLY_STRING) {
        rc = dfc_error_set(err, -ECONNREFUSED, "redis sentinel %s: master %s unknown", a,
                           r->master_name);
    } else {
        /* The reply's host and port, joined for the one parser: its last colon splits them,
         * so an IPv6 host needs no brackets; a host that does not come back whole (a colon
         * in the port) is refused. */
        char buf[DFC_ADDR_STR_MAX + 8];
        snprintf(buf, sizeof(buf), "%s:%s", rep->element[0]->str, rep->element[1]->str);
        struct dfc_hostport got;
        rc = parse_addr(buf, &got, err);
        if (rc == 0 && strcmp(got.host, rep->element[0]->str) != 0) {
            rc = dfc_error_set(err, -EINVAL, "redis address `%s`: want host:port", buf);
        }
        if (rc < 0) {
            dfc_error_prefix(err, "redis sentinel %s", a);
        } else {
            *hp = got;
        }
    }
    freeReplyObject(rep);
    return rc;
}

/* Asks the Sentinels in turn (the last one that answered first); each gets an equal share
 * of the time left, at least SENTINEL_MIN_MS, so one hung Sentinel does not eat it all. */
static int resolve_master(struct sched_redis *r, int64_t deadline_ms, struct dfc_hostport *hp,
                          struct dfc_error *err) {
    pthread_mutex_lock(&r->mu);
    size_t first = r->sentinel_first;
    pthread_mutex_unlock(&r->mu);
    char tried[DFC_ERROR_MSG_MAX] = "";
    size_t used = 0;
    int last = -ECONNREFUSED;
    for (size_t k = 0; k < r->n_addrs; k++) {
        size_t i = (first + k) % r->n_addrs;
        int64_t left = deadline_ms - dfc_mono_ms();
        if (left <= 0) {
            last = -ETIMEDOUT;
            break;
        }
        int64_t share = left / (int64_t)(r->n_addrs - k);
        if (share < SENTINEL_MIN_MS) {
            share = left < SENTINEL_MIN_MS ? left : SENTINEL_MIN_MS;
        }
        struct dfc_error e = {0};
        int rc = ask_sentinel(r, &r->addrs[i], dfc_mono_ms() + share, hp, &e);
        if (rc == 0) {
            pthread_mutex_lock(&r->mu);
            r->sentinel_first = i;
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
        last = rc;
        if (used < sizeof(tried)) {
            used += (size_t)snprintf(tried + used, sizeof(tried) - used, "%s%s", k ? "; " : "",
                                     dfc_error_msg(&e));
        }
    }
    if (last == -ETIMEDOUT && dfc_mono_ms() >= deadline_ms) {
        return dfc_error_set(err, -ETIMEDOUT,
                             "redis sentinel master %s: no answer before the "
                             "deadline (%s)",
                             r->master_name, tried[0] ? tried : "none asked");
    }
    return dfc_error_set(err, -ECONNREFUSED, "redis sentinel master %s: no sentinel answered (%s)",
                         r->master_name, tried);
}

/* ---- connecting a slot ---- */

static void connect_failed(struct sched_redis *r, const struct dfc_error *e) {
    pthread_mutex_lock(&r->mu);
    r->fails++;
    int64_t delay = r->backoff_min_ms;
    for (unsigned i = 1; i < r->fails && delay < r->backoff_max_ms; i++) {
        delay *= 2;
    }
    if (delay > r->backoff_max_ms) {
        delay = r->backoff_max_ms;
    }
    r->retry_at_ms = dfc_mono_ms() + delay;
    r->last_fail = *e;
    if (r->master_name != NULL) {
        r->master_stale = true;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Gives slot s a working, authenticated connection to the current master. */
static int connect_slot(struct sched_redis *r, struct slot *s, int64_t deadline_ms,
                        struct dfc_error *err) {
    if (deadline_ms <= dfc_mono_ms()) {
        return dfc_error_set(err, -ETIMEDOUT, "redis: deadline passed before connecting");
    }
    pthread_mutex_lock(&r->mu);
    int64_t wait = r->retry_at_ms - dfc_mono_ms();
    if (wait > 0) {
        int rc = dfc_error_set(err, -ECONNREFUSED, "%s (next attempt in %lld ms)",
                               dfc_error_msg(&r->last_fail), (long long)wait);
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    bool need_resolve = !r->master_known || r->master_stale;
    struct dfc_hostport target = r->master;
    uint64_t gen = r->gen;
    pthread_mutex_unlock(&r->mu);

    struct dfc_error e = {0};
    int rc = 0;
    if (need_resolve) {
        rc = resolve_master(r, deadline_ms, &target, &e);
        if (rc == 0) {
            pthread_mutex_lock(&r->mu);
            if (!r->master_known || strcmp(r->master.host, target.host) != 0 ||
                r->master.port != target.port) {
                r->master = target;
                r->master_known = true;
                r->gen++;
            }
            r->master_stale = false;
            r->master_checked_ms = dfc_mono_ms();
            gen = r->gen;
            pthread_mutex_unlock(&r->mu);
        }
    }
    char a[DFC_ADDR_STR_MAX];
    dfc_addr_format(target.host, target.port, a, sizeof(a));
    struct sched_redis_conn *c = NULL;
    if (rc == 0) {
        rc = dial(r, &target, deadline_ms, &c, &e);
    }
    if (rc == 0) {
        rc = handshake(r, c, a, deadline_ms, &e);
        if (rc < 0) {
            sched__redis_conn_free(c);
        }
    }
    if (rc < 0) {
        connect_failed(r, &e);
        if (err != NULL) {
            *err = e;
        }
        return rc;
    }
    pthread_mutex_lock(&r->mu);
    r->fails = 0;
    r->retry_at_ms = 0;
    snprintf(r->current, sizeof(r->current), "%s", a);
    pthread_mutex_unlock(&r->mu);
    s->c = c;
    s->gen = gen;
    snprintf(s->addr, sizeof(s->addr), "%s", a);
    return 0;
}

/* With Sentinels, at most every master_check_ms and by one command at a time: asks them for
 * the master again; a new address bumps the generation, so every slot reconnects to it before
 * its next command. A Sentinel that does not answer in time changes nothing. */
static void recheck_master(struct sched_redis *r, int64_t deadline_ms) {
    if (r->master_name == NULL) {
        return;
    }
    int64_t now = dfc_mono_ms();
    pthread_mutex_lock(&r->mu);
    bool due = r->master_known && !r->master_stale && !r->checking &&
               now - r->master_checked_ms >= r->master_check_ms;
    r->checking = r->checking || due;
    pthread_mutex_unlock(&r->mu);
    if (!due) {
        return;
    }
    struct dfc_hostport hp;
    struct dfc_error e;
    int64_t until =
        now + DEFAULT_MASTER_CHECK_MS < deadline_ms ? now + DEFAULT_MASTER_CHECK_MS : deadline_ms;
    int rc = resolve_master(r, until, &hp, &e);
    pthread_mutex_lock(&r->mu);
    r->checking = false;
    r->master_checked_ms = dfc_mono_ms();
    if (rc == 0 && (strcmp(r->master.host, hp.host) != 0 || r->master.port != hp.port)) {
        DFC_LOG(DFC_LOG_WARN, "redis.master_moved", "from=%s:%u to=%s:%u", r->master.host,
                (unsigned)r->master.port, hp.host, (unsigned)hp.port);
        r->master = hp;
        r->gen++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Makes sure s holds a usable connection (dropping a stale or dead one first). */
int sched__redis_ready_slot(struct sched_redis *r, struct slot *s, int64_t deadline_ms,
                            struct dfc_error *err) {
    recheck_master(r, deadline_ms);
    if (s->c != NULL) {
        pthread_mutex_lock(&r->mu);
        bool current = s->gen == r->gen;
        pthread_mutex_unlock(&r->mu);
        if (!current || !sched__redis_conn_idle_ok(s->c)) {
            sched__redis_drop(s);
        }
    }
    return s->c != NULL ? 0 : connect_slot(r, s, deadline_ms, err);
}
