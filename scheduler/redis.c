/*
 * redis.c - the scheduler's Redis client: a pool of hiredis sync connections with per-command
 * deadlines, capped exponential reconnect back-off and Sentinel master discovery (see redis.h
 * and docs/dragonfly-compat.md, "Scheduler on Redis"). The commands that run on the pool are
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
 *   asks the Sentinels again (starting with the one that answered last). A -READONLY reply is
 *   retried (at most twice) on a connection to the newly named master: the server refused the
 *   write, so sending it again cannot apply it twice.
 *
 *   Limits: the deadline bounds connect, send and receive (connect timeout and SO_RCVTIMEO /
 *   SO_SNDTIMEO from the time left), but not name resolution: hiredis resolves a host name
 *   with a blocking getaddrinfo, so give IP addresses where a hung DNS must not stall a call.
 *   hiredis writes with write(2): the process must ignore SIGPIPE (dfc_signals_block does).
 */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "redis_internal.h"

#define DEFAULT_POOL_SIZE   20
#define DEFAULT_BACKOFF_MIN 100
#define DEFAULT_BACKOFF_MAX 5000
#define SENTINEL_MIN_MS     50 /* the least time one Sentinel gets when several are listed */

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
            redisFree(r->slots[i].c);
        }
    }
    pthread_cond_destroy(&r->idle_cv);
    pthread_mutex_destroy(&r->mu);
    free(r->slots);
    free(r->idle);
    free(r->addrs);
    free(r->master_name);
    free(r->username);
    free(r->password);
    free(r);
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
    if (r->addrs == NULL || r->slots == NULL || r->idle == NULL ||
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
        redisFree(s->c);
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

/* True when an idle connection can be used: no EOF or stray bytes are waiting on it. */
static bool looks_alive(redisContext *c) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    return n == 0;
}

/* ---- talking to one server ---- */

/* Connects to hp within deadline_ms; sets err naming the address. */
static int dial(const struct dfc_hostport *hp, int64_t deadline_ms, redisContext **ret,
                struct dfc_error *err) {
    char a[DFC_ADDR_STR_MAX];
    dfc_addr_format(hp->host, hp->port, a, sizeof(a));
    int64_t left = deadline_ms - dfc_mono_ms();
    if (left <= 0) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: deadline passed before connecting", a);
    }
    errno = 0;
    redisContext *c = redisConnectWithTimeout(hp->host, (int)hp->port, sched__redis_ms_to_tv(left));
    int saved = errno;
    if (c == NULL) {
        return dfc_error_set(err, -ENOMEM, "redis %s: out of memory", a);
    }
    if (c->err != 0) {
        /* hiredis 0.14 has no timeout error of its own: a connect that did not complete in
         * time is REDIS_ERR_IO with errno ETIMEDOUT (its poll ran out, or the kernel gave up). */
        bool timed_out =
            dfc_mono_ms() >= deadline_ms || (c->err == REDIS_ERR_IO && saved == ETIMEDOUT);
        int rc = dfc_error_set(err, timed_out ? -ETIMEDOUT : -ECONNREFUSED, "redis %s: %s", a,
                               c->errstr);
        redisFree(c);
        return rc;
    }
    sched__redis_bound_replies(c);
    *ret = c;
    return 0;
}

int sched__redis_set_deadline(redisContext *c, const char *addr, int64_t deadline_ms,
                              struct dfc_error *err) {
    int64_t left = deadline_ms - dfc_mono_ms();
    if (left <= 0) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: deadline passed", addr);
    }
    if (redisSetTimeout(c, sched__redis_ms_to_tv(left)) != REDIS_OK) {
        return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", addr, c->errstr);
    }
    return 0;
}

/* Runs argv on c within deadline_ms. A reply (error replies included) goes to *reply; an I/O
 * failure or timeout returns -ECONNREFUSED or -ETIMEDOUT and leaves c unusable. */
int sched__redis_roundtrip(redisContext *c, const char *addr, int64_t deadline_ms, int argc,
                           const char **argv, const size_t *lens, redisReply **reply,
                           struct dfc_error *err) {
    int r = sched__redis_set_deadline(c, addr, deadline_ms, err);
    if (r < 0) {
        return r;
    }
    errno = 0;
    redisReply *rep = redisCommandArgv(c, argc, argv, lens);
    int saved = errno;
    if (rep != NULL) {
        *reply = rep;
        return 0;
    }
    int rc = sched__redis_io_failed(c, addr, deadline_ms, saved, err);
    return rc < 0 ? rc : -ECONNREFUSED; /* always < 0: no reply was set */
}

/* The error of a failed hiredis call on c (errno was `saved` right after it). */
int sched__redis_io_failed(redisContext *c, const char *addr, int64_t deadline_ms, int saved,
                           struct dfc_error *err) {
    if (c->err == REDIS_ERR_OOM) {
        return dfc_error_set(err, -ENOMEM,
                             "redis %s: out of memory, or a reply beyond the bounds (an array of "
                             "more than %d elements, a string of more than %zu bytes)",
                             addr, SCHED_REDIS_MAX_ELEMENTS, SCHED_REDIS_MAX_STRING);
    }
    if (c->err == REDIS_ERR_IO && (saved == EAGAIN || saved == EWOULDBLOCK || saved == ETIMEDOUT ||
                                   dfc_mono_ms() >= deadline_ms)) {
        return dfc_error_set(err, -ETIMEDOUT, "redis %s: no reply within the deadline", addr);
    }
    return dfc_error_set(err, -ECONNREFUSED, "redis %s: %s", addr, c->errstr);
}

/* AUTH and SELECT on a fresh connection. */
static int handshake(struct sched_redis *r, redisContext *c, const char *addr, int64_t deadline_ms,
                     struct dfc_error *err) {
    redisReply *rep = NULL;
    int rc;
    if (r->password != NULL) {
        const char *argv[3] = {"AUTH", r->username ? r->username : r->password, r->password};
        size_t lens[3] = {4, strlen(argv[1]), strlen(r->password)};
        rc = sched__redis_roundtrip(c, addr, deadline_ms, r->username ? 3 : 2, argv, lens, &rep,
                                    err);
        if (rc < 0) {
            return rc;
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            rc = dfc_error_set(err, DFC_E_INTERNAL, "redis %s: AUTH%s%s: %s", addr,
                               r->username ? " as " : "", r->username ? r->username : "", rep->str);
            freeReplyObject(rep);
            return rc;
        }
        freeReplyObject(rep);
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
    redisContext *c = NULL;
    int rc = dial(sentinel, deadline_ms, &c, err);
    if (rc < 0) {
        return rc;
    }
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", r->master_name};
    size_t lens[3] = {8, 23, strlen(r->master_name)};
    redisReply *rep = NULL;
    rc = sched__redis_roundtrip(c, a, deadline_ms, 3, argv, lens, &rep, err);
    redisFree(c);
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
            gen = r->gen;
            pthread_mutex_unlock(&r->mu);
        }
    }
    char a[DFC_ADDR_STR_MAX];
    dfc_addr_format(target.host, target.port, a, sizeof(a));
    redisContext *c = NULL;
    if (rc == 0) {
        rc = dial(&target, deadline_ms, &c, &e);
    }
    if (rc == 0) {
        rc = handshake(r, c, a, deadline_ms, &e);
        if (rc < 0) {
            redisFree(c);
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

/* Makes sure s holds a usable connection (dropping a stale or dead one first). */
int sched__redis_ready_slot(struct sched_redis *r, struct slot *s, int64_t deadline_ms,
                            struct dfc_error *err) {
    if (s->c != NULL) {
        pthread_mutex_lock(&r->mu);
        bool current = s->gen == r->gen;
        pthread_mutex_unlock(&r->mu);
        if (!current || !looks_alive(s->c)) {
            sched__redis_drop(s);
        }
    }
    return s->c != NULL ? 0 : connect_slot(r, s, deadline_ms, err);
}
