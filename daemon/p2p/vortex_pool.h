/*
 * vortex_pool.h - idle Vortex client connections kept for the next piece request to the same
 * parent. Beyond upstream and compatible both ways: docs/dragonfly-compat.md, "Vortex",
 * connection reuse. One pool per process, shared by every fetching thread.
 *
 * A connection is keyed by the parent's address and port and, under TLS, by its client
 * context (dfc_tls_ctx_serial) and that context's generation when the connection was made:
 * once the client's certificate files rotate (dfc_tls_ctx_refresh), older connections are no
 * longer taken and close at their idle limit. Bounded: at most DFD_VORTEX_POOL_PER_PARENT idle
 * connections per key and DFD_VORTEX_POOL_MAX in all (more are closed at once); an idle
 * connection is closed after DFD_VORTEX_POOL_IDLE_NS (less than the server's 5 s keep-alive, so
 * the client lets go first) by a reaper thread started with the first connection kept.
 *
 * Only a connection whose last answer was read whole goes back (dfd_vortex_pool_put); the
 * caller closes one that failed. A connection taken may still have been closed by the parent
 * since (an upstream parent answers one request per connection): the caller retries once on a
 * new connection when nothing of the answer arrived (vortex_client.c).
 *
 * Ownership: put takes the connection (its TLS session and socket); take hands one to the
 * caller, who frees it with dfd_conn_close() or puts it back. Thread-safe (one mutex).
 */
#ifndef DFD_P2P_VORTEX_POOL_H
#define DFD_P2P_VORTEX_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "p2p/sockio.h"

#define DFD_VORTEX_POOL_PER_PARENT 16
#define DFD_VORTEX_POOL_MAX        128
#define DFD_VORTEX_POOL_IDLE_NS    ((int64_t)3 * 1000 * 1000 * 1000)

struct dfc_tls_ctx;

/* The generation a new connection to be made under tls counts as (0 for plain TCP), after
 * looking at the certificate files for a rotation. */
uint64_t dfd_vortex_pool_generation(struct dfc_tls_ctx *tls);

/* Takes the most recently kept idle connection to ip:port under tls (NULL: plain TCP) at its
 * current generation into *ret, skipping (and closing) those the parent closed meanwhile;
 * *ret_gen is that generation. False when there is none: *ret_gen is still set, for a new
 * connection. */
bool dfd_vortex_pool_take(struct dfc_tls_ctx *tls, const char *ip, uint16_t port,
                          struct dfd_conn *ret, uint64_t *ret_gen);

/* Keeps c (made under tls at generation gen) idle for the next request to ip:port, or closes
 * it when the pool is full. */
void dfd_vortex_pool_put(struct dfc_tls_ctx *tls, uint64_t gen, const char *ip, uint16_t port,
                         struct dfd_conn *c);

/* How many idle connections the pool holds. */
size_t dfd_vortex_pool_idle(void);

/* Closes every idle connection. */
void dfd_vortex_pool_flush(void);

#endif /* DFD_P2P_VORTEX_POOL_H */
