/*
 * upload_limits.c - the Vortex server's rate limit and cap on pieces sent at once
 * (p2p/upload_limits.h).
 */
#include "p2p/upload_limits.h"

#include <errno.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"

#define WARN_INTERVAL_NS ((int64_t)10 * 1000 * 1000 * 1000)

void dfd_upload_limits_init(struct dfd_upload_limits *l, uint64_t rate, unsigned max_uploads) {
    dfc_ratelimit_init(&l->rate, rate, 0);
    atomic_init(&l->stopping, false);
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->max = max_uploads > 0 ? max_uploads : 1;
    l->busy = 0;
    l->refused = 0;
    l->warn_ns = 0;
}

void dfd_upload_limits_destroy(struct dfd_upload_limits *l) {
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    dfc_ratelimit_destroy(&l->rate);
}

int dfd_upload_limits_begin(struct dfd_upload_limits *l, int64_t deadline_ns) {
    struct timespec until = dfc_timespec_from_ns(deadline_ns);
    pthread_mutex_lock(&l->mu);
    int r = 0;
    while (l->busy >= l->max && r == 0) {
        if (atomic_load(&l->stopping)) {
            r = -ECANCELED;
        } else if (pthread_cond_timedwait(&l->cv, &l->mu, &until) == ETIMEDOUT &&
                   l->busy >= l->max) {
            r = -EBUSY;
        }
    }
    bool log = false;
    uint64_t others = 0;
    if (r == 0) {
        l->busy++;
    } else if (r == -EBUSY) {
        int64_t now = dfc_mono_ns();
        others = l->refused;
        log = l->warn_ns == 0 || now - l->warn_ns >= WARN_INTERVAL_NS;
        l->refused = log ? 0 : l->refused + 1;
        l->warn_ns = log ? now : l->warn_ns;
    }
    pthread_mutex_unlock(&l->mu);
    if (log) {
        DFC_LOG(DFC_LOG_WARN, "vortex.uploads_busy",
                "storage.server.maxConcurrentUploads=%u refused_since_last_warning=%llu (a "
                "request that waited for an upload slot in vain)",
                l->max, (unsigned long long)others);
    }
    return r;
}

void dfd_upload_limits_end(struct dfd_upload_limits *l) {
    pthread_mutex_lock(&l->mu);
    l->busy--;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int dfd_upload_limits_pay(struct dfd_upload_limits *l, uint64_t n, int64_t deadline_ns) {
    return dfc_ratelimit_take(&l->rate, n, deadline_ns, &l->stopping);
}

void dfd_upload_limits_stop(struct dfd_upload_limits *l) {
    atomic_store(&l->stopping, true);
    pthread_mutex_lock(&l->mu);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    dfc_ratelimit_wake(&l->rate);
}
