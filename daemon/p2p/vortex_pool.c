/*
 * vortex_pool.c - idle Vortex client connections (vortex_pool.h).
 *
 * A fixed array of DFD_VORTEX_POOL_MAX entries under one mutex; take scans it for the newest
 * entry of its key (the most recently used connection is the likeliest still open), put
 * appends. A connection is closed outside the lock. The reaper thread (detached, started once
 * by the first put) sleeps on a condition variable (CLOCK_MONOTONIC) until the oldest entry's
 * idle limit, or for good while the pool is empty, and closes what expired.
 */
#include "p2p/vortex_pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/tls_ssl.h"
#include "dfc/units.h"

#define IP_MAX 46 /* INET6_ADDRSTRLEN */

struct entry {
    char ip[IP_MAX];
    uint16_t port;
    uint64_t serial, gen; /* 0, 0: plain TCP */
    int64_t expires_ns;
    struct dfd_conn c;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;                         /* signalled when an entry is added */
static struct entry entries[DFD_VORTEX_POOL_MAX]; /* under mu: the first n are in use */
static size_t n;
static pthread_once_t reaper_once = PTHREAD_ONCE_INIT;
static bool reaper_ok; /* set once: the reaper runs (else put keeps nothing) */

static bool same_key(const struct entry *e, const char *ip, uint16_t port, uint64_t serial,
                     uint64_t gen) {
    return e->port == port && e->serial == serial && e->gen == gen && strcmp(e->ip, ip) == 0;
}

/* With mu held: removes entry i (the last one takes its place; order does not matter for
 * expiry, and take prefers the newest by expires_ns). */
static struct dfd_conn remove_at(size_t i) {
    struct dfd_conn c = entries[i].c;
    entries[i] = entries[n - 1];
    n--;
    return c;
}

static void *reaper_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        struct dfd_conn expired[DFD_VORTEX_POOL_MAX];
        size_t k = 0;
        int64_t now = dfc_mono_ns();
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < n;) {
            if (entries[i].expires_ns <= now) {
                expired[k++] = remove_at(i);
                continue;
            }
            if (entries[i].expires_ns < next) {
                next = entries[i].expires_ns;
            }
            i++;
        }
        if (k > 0) {
            pthread_mutex_unlock(&mu);
            for (size_t i = 0; i < k; i++) {
                dfd_conn_close(&expired[i]);
            }
            pthread_mutex_lock(&mu);
            continue; /* look again: the pool may have changed meanwhile */
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&cv, &mu);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(next / DFC_NS_PER_SEC),
                                  .tv_nsec = (long)(next % DFC_NS_PER_SEC)};
            (void)pthread_cond_timedwait(&cv, &mu, &ts);
        }
    }
    return NULL;
}

static void reaper_start(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&a, (size_t)256 * 1024);
    pthread_t th;
    reaper_ok = pthread_create(&th, &a, reaper_main, NULL) == 0;
    pthread_attr_destroy(&a);
}

uint64_t dfd_vortex_pool_generation(struct dfc_tls_ctx *tls) {
    return tls != NULL ? dfc_tls_ctx_refresh(tls) : 0;
}

/* An idle connection the parent closed (or sent anything on, which it must not) reads as
 * ready at once. */
static bool still_open(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int k;
    while ((k = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    return k == 0;
}

bool dfd_vortex_pool_take(struct dfc_tls_ctx *tls, const char *ip, uint16_t port,
                          struct dfd_conn *ret, uint64_t *ret_gen) {
    uint64_t serial = tls != NULL ? dfc_tls_ctx_serial(tls) : 0;
    uint64_t gen = dfd_vortex_pool_generation(tls);
    *ret_gen = gen;
    for (;;) {
        pthread_mutex_lock(&mu);
        size_t best = SIZE_MAX;
        int64_t now = dfc_mono_ns();
        for (size_t i = 0; i < n; i++) {
            if (same_key(&entries[i], ip, port, serial, gen) && entries[i].expires_ns > now &&
                (best == SIZE_MAX || entries[i].expires_ns > entries[best].expires_ns)) {
                best = i;
            }
        }
        if (best == SIZE_MAX) {
            pthread_mutex_unlock(&mu);
            return false;
        }
        struct dfd_conn c = remove_at(best);
        pthread_mutex_unlock(&mu);
        if (still_open(c.fd)) {
            *ret = c;
            return true;
        }
        dfd_conn_close(&c);
    }
}

void dfd_vortex_pool_put(struct dfc_tls_ctx *tls, uint64_t gen, const char *ip, uint16_t port,
                         struct dfd_conn *c) {
    uint64_t serial = tls != NULL ? dfc_tls_ctx_serial(tls) : 0;
    (void)pthread_once(&reaper_once, reaper_start);
    bool kept = false;
    pthread_mutex_lock(&mu);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) {
        same += same_key(&entries[i], ip, port, serial, gen) ? 1 : 0;
    }
    if (reaper_ok && strlen(ip) < IP_MAX && n < DFD_VORTEX_POOL_MAX &&
        same < DFD_VORTEX_POOL_PER_PARENT) {
        struct entry *e = &entries[n++];
        memcpy(e->ip, ip, strlen(ip) + 1);
        e->port = port;
        e->serial = serial;
        e->gen = gen;
        e->expires_ns = dfc_mono_ns() + DFD_VORTEX_POOL_IDLE_NS;
        e->c = *c;
        kept = true;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (!kept) {
        dfd_conn_close(c);
    }
    c->fd = -1;
    c->tls = NULL;
}

size_t dfd_vortex_pool_idle(void) {
    pthread_mutex_lock(&mu);
    size_t k = n;
    pthread_mutex_unlock(&mu);
    return k;
}

void dfd_vortex_pool_flush(void) {
    struct dfd_conn all[DFD_VORTEX_POOL_MAX];
    pthread_mutex_lock(&mu);
    size_t k = n;
    for (size_t i = 0; i < k; i++) {
        all[i] = entries[i].c;
    }
    n = 0;
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < k; i++) {
        dfd_conn_close(&all[i]);
    }
}
