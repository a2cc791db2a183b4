/*
 * redis.h - the scheduler's Redis client: a small pool of TCP or TLS connections to one Redis
 * server, or to the master that a set of Sentinels names.
 *
 * Every command carries a deadline. A connection error, a timeout or a -READONLY reply (a
 * demoted master after a Sentinel failover) drops that connection; the next command reconnects,
 * asking the Sentinels again when masterName is set, with a capped exponential back-off between
 * failed attempts so a dead Redis is not hammered. Nothing here blocks past the deadline.
 *
 * TLS (database.redis.tls.*) covers the Redis connections and the Sentinel ones alike: the
 * server's certificate is checked against the CA and the address dialled. With Sentinels and a
 * sentinel password, each Sentinel must accept AUTH before it is asked for the master; one that
 * refuses it (or needs none: it answers AUTH with an error) is not trusted, so the Redis
 * password only goes to a master that an authenticated Sentinel named.
 *
 * Errors: -ECONNREFUSED (UNAVAILABLE) when no server answers, with err naming the address
 * ("redis 127.0.0.1:6379: Connection refused", "redis sentinel master mymaster: no sentinel
 * answered (127.0.0.1:26379, ...)"); -ETIMEDOUT (DEADLINE_EXCEEDED) when the deadline passes;
 * DFC_E_INTERNAL for an error reply (err carries Redis's text), but SCHED_REDIS_E_WRONGTYPE for
 * a WRONGTYPE one (sched_redis_reply_error). Thread-safe: any thread may run
 * commands; each takes a pooled connection for the duration of one command (or one script).
 *
 * Ownership: sched_redis_new copies opts; replies returned through `reply` are the caller's to
 * free with freeReplyObject().
 */
#ifndef SCHED_REDIS_H
#define SCHED_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

struct redisReply;
struct sched_redis;

/* The code of a -WRONGTYPE reply (the key holds another type): an errno the error table maps to
 * INTERNAL, as any other error reply, so callers tell it apart by code, not by Redis's text. */
#define SCHED_REDIS_E_WRONGTYPE (-EPROTOTYPE)

struct sched_redis_opts {
    const char *const *addrs; /* "host:port"; the Sentinels when master_name is set */
    size_t n_addrs;
    const char *master_name; /* NULL or "" = talk to addrs[0] directly */
    const char *username;    /* NULL or "" = no AUTH user (AUTH password alone when set) */
    const char *password;    /* NULL or "" = no AUTH */
    int db;                  /* SELECT db after connecting when > 0 */
    /* Sentinels: AUTH [sentinel_username] sentinel_password before asking them anything. */
    const char *sentinel_username; /* NULL or "" = AUTH password alone */
    const char *sentinel_password; /* NULL or "" = no AUTH (Sentinels trusted unauthenticated) */
    /* TLS to Redis and the Sentinels: on when any of these is set. PEM files. */
    const char *tls_ca_cert; /* the CA the servers' certificates chain to; "" = system's */
    const char *tls_cert;    /* a client certificate (with tls_key), or NULL */
    const char *tls_key;
    bool tls_insecure_skip_verify; /* no certificate check at all (warned at start) */
    unsigned pool_size;            /* connections kept open; 0 = 20, as upstream */
    int64_t backoff_min_ms;        /* first reconnect delay; 0 = 100 ms */
    int64_t backoff_max_ms;        /* cap; 0 = 5 s */
    int64_t master_check_ms;       /* with Sentinels: ask them again this often; 0 = 1 s */
    /* Optional metrics (borrowed, outlive the pool; NULL: not counted), series by kind:
     * 0 a command (sched_redis_argv), 1 a script (sched_redis_eval), 2 a pipeline. latency
     * observes seconds from the call to its reply (a wait for a free connection included);
     * errors counts calls that failed (I/O, timeout, an error reply). */
    struct dfc_metric *latency;
    struct dfc_metric *errors;
};

/* The kinds of the metrics' series: "command", "script", "pipeline". */
#define SCHED_REDIS_KINDS                                                                          \
    { "command", "script", "pipeline" }

int sched_redis_new(const struct sched_redis_opts *opts, struct sched_redis **ret,
                    struct dfc_error *err);
void sched_redis_free(struct sched_redis *r);

/* The code of error reply rep (REDIS_REPLY_ERROR): SCHED_REDIS_E_WRONGTYPE for WRONGTYPE, else
 * DFC_E_INTERNAL; err gets "redis <addr>: <Redis's text>" ("redis: ..." when addr is NULL).
 * rep is not freed. */
int sched_redis_reply_error(const struct redisReply *rep, const char *addr, struct dfc_error *err);

/* Runs one command given as argv (binary-safe: lens[i] bytes of argv[i]). deadline_ms is an
 * absolute CLOCK_MONOTONIC time in ms. An error reply is returned as its code
 * (sched_redis_reply_error) with the reply freed; any other reply (nil included) is handed to
 * the caller. */
int sched_redis_argv(struct sched_redis *r, int64_t deadline_ms, int argc, const char **argv,
                     const size_t *lens, struct redisReply **reply, struct dfc_error *err);

/* One command of a pipeline: argc arguments, binary-safe as in sched_redis_argv. */
struct sched_redis_cmd {
    int argc;
    const char **argv;
    const size_t *lens;
};

/* Sends the n commands of cmds on one connection in one write and reads their n replies: one
 * round trip instead of n. For reads (no NOSCRIPT fallback, no -READONLY retry). Every reply,
 * error replies included, goes to replies[i] (the caller frees each); on an I/O error or timeout
 * none is returned and the error is set as in sched_redis_argv. */
int sched_redis_pipeline(struct sched_redis *r, int64_t deadline_ms, size_t n,
                         const struct sched_redis_cmd *cmds, struct redisReply **replies,
                         struct dfc_error *err);

/* A Lua script, loaded once per connection: EVALSHA, falling back to EVAL on NOSCRIPT. */
struct sched_redis_script {
    const char *name; /* for messages: "store_peer" */
    const char *lua;
    char sha1[41]; /* filled by sched_redis_script_init */
};
void sched_redis_script_init(struct sched_redis_script *s);

/* EVALSHA s with keys then args (binary-safe), same error rules as sched_redis_argv. */
int sched_redis_eval(struct sched_redis *r, int64_t deadline_ms, struct sched_redis_script *s,
                     int n_keys, const char **keys, const size_t *key_lens, int n_args,
                     const char **args, const size_t *arg_lens, struct redisReply **reply,
                     struct dfc_error *err);

/* The address currently in use ("127.0.0.1:6379"), for messages and readiness. Borrowed until
 * the next call on r from this thread; NULL before the first successful connection. */
const char *sched_redis_current_addr(struct sched_redis *r, char *buf, size_t len);

/* Milliseconds since CLOCK_MONOTONIC's epoch plus timeout_ms: a deadline for the calls above. */
int64_t sched_redis_deadline(int64_t timeout_ms);

#endif /* SCHED_REDIS_H */
