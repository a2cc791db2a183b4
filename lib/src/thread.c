/*
 * thread.c - a helper thread with a stop flag and a monotonic condition variable.
 */
#include "dfc/thread.h"

#include <errno.h>

#include "dfc/pbtime.h"

int dfc_thread_start(struct dfc_thread *t, void *(*fn)(void *), void *arg) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&t->mu, NULL);
    t->stop = false;
    if (pthread_create(&t->id, NULL, fn, arg) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -EAGAIN;
    }
    return 0;
}

int dfc_thread_wait_locked(struct dfc_thread *t, const struct timespec *deadline) {
    if (deadline == NULL) {
        pthread_cond_wait(&t->cv, &t->mu);
        return 0;
    }
    return pthread_cond_timedwait(&t->cv, &t->mu, deadline) == ETIMEDOUT ? -ETIMEDOUT : 0;
}

void dfc_thread_wake_locked(struct dfc_thread *t) {
    pthread_cond_broadcast(&t->cv);
}

struct timespec dfc_deadline_after(int64_t ns) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return dfc_timespec_add_ns(now, ns);
}

bool dfc_thread_sleep(struct dfc_thread *t, int64_t ns) {
    struct timespec until = dfc_deadline_after(ns);
    pthread_mutex_lock(&t->mu);
    while (!t->stop && dfc_thread_wait_locked(t, &until) == 0) {
    }
    bool go_on = !t->stop;
    pthread_mutex_unlock(&t->mu);
    return go_on;
}

void dfc_thread_stop(struct dfc_thread *t) {
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->id, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}
