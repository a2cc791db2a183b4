/*
 * ratelimit.c - a token bucket of bytes per second shared by many threads (dfc/ratelimit.h).
 *
 * A take reserves its bytes at once (the tokens may go negative: a debt) and sleeps until the
 * refill has paid the debt up to its bytes, so the lock is never held while sleeping and the
 * takes of one bucket are served in the order they came. Tokens are a double: a rate of
 * 10 GiB/s times a long idle time would overflow an integer product, and a double's 53 bits
 * hold byte counts far beyond a burst.
 */
#include "dfc/ratelimit.h"

#include <errno.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"

void dfc_ratelimit_init(struct dfc_ratelimit *rl, uint64_t rate, uint64_t burst) {
    if (burst == 0) {
        burst = rate / 8 > DFC_RATELIMIT_MIN_BURST ? rate / 8 : DFC_RATELIMIT_MIN_BURST;
    }
    rl->rate = rate;
    rl->burst = (double)burst;
    rl->tokens = rl->burst;
    rl->last_ns = dfc_mono_ns();
    pthread_mutex_init(&rl->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rl->cv, &attr);
    pthread_condattr_destroy(&attr);
}

void dfc_ratelimit_destroy(struct dfc_ratelimit *rl) {
    pthread_cond_destroy(&rl->cv);
    pthread_mutex_destroy(&rl->mu);
}

/* With rl->mu held: adds what the time since the last refill earned, up to burst. */
static void refill_locked(struct dfc_ratelimit *rl, int64_t now) {
    if (now <= rl->last_ns) {
        return;
    }
    rl->tokens += (double)(now - rl->last_ns) * (double)rl->rate / (double)DFC_NS_PER_SEC;
    if (rl->tokens > rl->burst) {
        rl->tokens = rl->burst;
    }
    rl->last_ns = now;
}

static bool stopped(const atomic_bool *stop) {
    return stop != NULL && atomic_load(stop);
}

int dfc_ratelimit_take(struct dfc_ratelimit *rl, uint64_t n, int64_t deadline_ns,
                       const atomic_bool *stop) {
    if (!dfc_ratelimit_on(rl) || n == 0) {
        return 0;
    }
    pthread_mutex_lock(&rl->mu);
    int64_t now = dfc_mono_ns();
    refill_locked(rl, now);
    double after = rl->tokens - (double)n;
    int64_t until = now;
    if (after < 0) {
        double wait = -after * (double)DFC_NS_PER_SEC / (double)rl->rate;
        double left = deadline_ns > now ? (double)deadline_ns - (double)now : 0;
        if (wait > left) {
            pthread_mutex_unlock(&rl->mu);
            return -ETIMEDOUT;
        }
        until = now + (int64_t)wait + 1;
    }
    if (stopped(stop)) {
        pthread_mutex_unlock(&rl->mu);
        return -ECANCELED;
    }
    rl->tokens = after;
    int r = 0;
    struct timespec ts = dfc_timespec_from_ns(until);
    while (dfc_mono_ns() < until) {
        if (stopped(stop)) {
            /* Give back what was taken; the takes queued behind keep their times. */
            rl->tokens += (double)n;
            if (rl->tokens > rl->burst) {
                rl->tokens = rl->burst;
            }
            r = -ECANCELED;
            break;
        }
        (void)pthread_cond_timedwait(&rl->cv, &rl->mu, &ts);
    }
    pthread_mutex_unlock(&rl->mu);
    return r;
}

void dfc_ratelimit_wake(struct dfc_ratelimit *rl) {
    if (!dfc_ratelimit_on(rl)) {
        return;
    }
    pthread_mutex_lock(&rl->mu);
    pthread_cond_broadcast(&rl->cv);
    pthread_mutex_unlock(&rl->mu);
}
