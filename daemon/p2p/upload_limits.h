/*
 * upload_limits.h - what a node's Vortex server may spend on peers, so that a node serving the
 * swarm keeps bandwidth for its own pods: the bytes per second of piece bytes it sends
 * (upload.rateLimit, upstream's key; a token bucket, dfc/ratelimit.h) and the pieces it sends at
 * once (storage.server.maxConcurrentUploads, ours). Shared by every connection thread of one
 * server.
 *
 * An answer takes a slot with dfd_upload_limits_begin (waiting for one to end, up to its
 * deadline), pays for its bytes before sending them with dfd_upload_limits_pay, and gives the
 * slot back with dfd_upload_limits_end. dfd_upload_limits_stop ends every wait at once.
 *
 * Thread-safe: mu guards the slot count and the warning's state, cv (CLOCK_MONOTONIC) is where
 * begin waits; the bucket has its own lock. The struct is its owner's (embedded).
 */
#ifndef DFD_P2P_UPLOAD_LIMITS_H
#define DFD_P2P_UPLOAD_LIMITS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dfc/ratelimit.h"

struct dfd_upload_limits {
    struct dfc_ratelimit rate; /* upload.rateLimit */
    atomic_bool stopping;      /* set by dfd_upload_limits_stop */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* an upload ended, or stop began */
    unsigned max;      /* storage.server.maxConcurrentUploads */
    unsigned busy;     /* under mu: uploads sending now */
    uint64_t refused;  /* under mu: refusals since the last warning */
    int64_t warn_ns;   /* under mu: when the last warning was logged */
};

/* rate in bytes per second, 0 = unlimited; max_uploads at least 1. */
void dfd_upload_limits_init(struct dfd_upload_limits *l, uint64_t rate, unsigned max_uploads);
void dfd_upload_limits_destroy(struct dfd_upload_limits *l);

/* Takes an upload slot, waiting until deadline_ns (monotonic) for one to end: 0; -EBUSY when
 * none did (a warning, at most one per 10 s, names the limit and what it refused); -ECANCELED
 * once stopping. */
int dfd_upload_limits_begin(struct dfd_upload_limits *l, int64_t deadline_ns);

/* Gives back a slot that dfd_upload_limits_begin took. */
void dfd_upload_limits_end(struct dfd_upload_limits *l);

/* Pays for n bytes about to be sent (dfc_ratelimit_take): 0, -ETIMEDOUT when they could not be
 * paid for by deadline_ns, -ECANCELED once stopping. Free when unlimited. */
int dfd_upload_limits_pay(struct dfd_upload_limits *l, uint64_t n, int64_t deadline_ns);

/* True when bytes must be paid for (a rate limit is set). */
static inline bool dfd_upload_limits_paced(const struct dfd_upload_limits *l) {
    return dfc_ratelimit_on(&l->rate);
}

/* Ends every wait (slots and tokens) with -ECANCELED, now and later. */
void dfd_upload_limits_stop(struct dfd_upload_limits *l);

#endif /* DFD_P2P_UPLOAD_LIMITS_H */
