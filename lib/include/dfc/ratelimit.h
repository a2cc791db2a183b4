/*
 * ratelimit.h - a token bucket of bytes per second, shared by many threads: dfdaemon's
 * upload.rateLimit (the Vortex server's sends) and download.rateLimit (the Vortex client's
 * receives).
 *
 * The bucket holds at most burst bytes and starts full; it refills at rate bytes per second on
 * the monotonic clock. dfc_ratelimit_take(n) takes n bytes' worth at once, going into debt when
 * the bucket holds fewer, and sleeps until the debt is paid: the callers of one bucket are
 * served in the order they asked, and n may exceed burst (it then waits for the rest). A take
 * whose wait would end past its deadline returns -ETIMEDOUT at once without taking anything; a
 * take whose stop flag is set (seen at once when dfc_ratelimit_wake() is called after setting
 * it) returns -ECANCELED and gives back what it took.
 *
 * Unlimited costs nothing: a NULL bucket or one of rate 0 takes no lock and never sleeps.
 *
 * Thread-safe: mu guards the tokens; cv (CLOCK_MONOTONIC) is where takes sleep. The struct is
 * its owner's (embedded, init/destroy); it holds no heap memory and must outlive every take.
 */
#ifndef DFC_RATELIMIT_H
#define DFC_RATELIMIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The default burst: an eighth of a second's worth, at least this many bytes. */
#define DFC_RATELIMIT_MIN_BURST ((uint64_t)64 * 1024)

struct dfc_ratelimit {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* takes sleep here; broadcast by dfc_ratelimit_wake */
    uint64_t rate;     /* bytes per second; 0 = unlimited (set at init, read without mu) */
    double burst;      /* bytes the bucket holds at most */
    double tokens;     /* under mu: bytes in the bucket; negative while takes wait for it */
    int64_t last_ns;   /* under mu: when tokens were last refilled (monotonic) */
};

/* rate in bytes per second (0 = unlimited); burst in bytes, 0 = rate / 8 but at least
 * DFC_RATELIMIT_MIN_BURST. */
void dfc_ratelimit_init(struct dfc_ratelimit *rl, uint64_t rate, uint64_t burst);
void dfc_ratelimit_destroy(struct dfc_ratelimit *rl);

/* True when rl limits anything (not NULL, rate > 0). */
static inline bool dfc_ratelimit_on(const struct dfc_ratelimit *rl) {
    return rl != NULL && rl->rate != 0;
}

/* Takes n bytes' worth, sleeping (monotonic clock) until they are paid for. 0; -ETIMEDOUT at
 * once, nothing taken, when they would be paid for only after deadline_ns (monotonic ns);
 * -ECANCELED when *stop is (or becomes) true, what was taken given back. stop may be NULL. */
int dfc_ratelimit_take(struct dfc_ratelimit *rl, uint64_t n, int64_t deadline_ns,
                       const atomic_bool *stop);

/* Wakes every sleeping take so that it looks at its stop flag again (call after setting one).
 * NULL is fine. */
void dfc_ratelimit_wake(struct dfc_ratelimit *rl);

#endif /* DFC_RATELIMIT_H */
