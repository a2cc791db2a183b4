/*
 * redis_conn.h - one connection of the scheduler's Redis client to a Redis server or a
 * Sentinel, over TCP or TLS, with a deadline on every step. Private to scheduler/redis*.c.
 *
 * hiredis 0.14 (Debian's libhiredis-dev) has no TLS, so the client owns its socket and its
 * OpenSSL stream and uses hiredis only for the protocol: redisFormatCommandArgv encodes the
 * commands and a redisReader parses the replies (see redis_conn.c for why).
 *
 * Errors, each naming the address: -ECONNREFUSED for a failed connect, TLS handshake, I/O or
 * protocol error; -ETIMEDOUT when the deadline passed; -ENOMEM; -EINVAL for TLS files that do
 * not load (sched__redis_tls_new). After any error but -EINVAL the connection is unusable:
 * the caller frees it.
 *
 * Ownership: a connection belongs to one thread at a time (a pool slot); a sched_redis_tls is
 * shared by every connection and thread-safe: it swaps in a new SSL_CTX under its own lock when
 * the files are rotated (a connection keeps a reference to the one it was made with). Replies are
 * the caller's to freeReplyObject().
 */
#ifndef SCHED_REDIS_CONN_H
#define SCHED_REDIS_CONN_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/addr.h"
#include "dfc/error.h"
#include "redis.h"

struct sched_redis_conn;
struct sched_redis_tls;

/* The TLS context of opts (CA, client certificate and key, minimum TLS 1.2), loaded again when
 * the files change: *ret stays NULL when opts configure no TLS. -EINVAL naming the key of a
 * file that does not load. */
int sched__redis_tls_new(const struct sched_redis_opts *opts, struct sched_redis_tls **ret,
                         struct dfc_error *err);
void sched__redis_tls_free(struct sched_redis_tls *t);
/* True when the server's certificate is checked (TLS on and insecureSkipVerify off). */
bool sched__redis_tls_verifies(const struct sched_redis_tls *t);

/* Connects to hp (TLS when tls is not NULL: the certificate must name hp's host) within
 * deadline_ms. A TLS handshake that fails is also logged as a warning naming the peer. */
int sched__redis_conn_dial(const struct dfc_hostport *hp, struct sched_redis_tls *tls,
                           int64_t deadline_ms, struct sched_redis_conn **ret,
                           struct dfc_error *err);
void sched__redis_conn_free(struct sched_redis_conn *c);

/* True when an idle connection can be used: no EOF, error or stray reply waits on it (TLS
 * records that carry no data, such as TLS 1.3 session tickets, are consumed). */
bool sched__redis_conn_idle_ok(struct sched_redis_conn *c);

/* Sends the n commands of cmds in one write and reads their n replies into replies (error
 * replies included). On failure no reply is kept. addr names the peer in messages. */
int sched__redis_conn_run(struct sched_redis_conn *c, const char *addr, int64_t deadline_ms,
                          size_t n, const struct sched_redis_cmd *cmds, redisReply **replies,
                          struct dfc_error *err);

#endif /* SCHED_REDIS_CONN_H */
