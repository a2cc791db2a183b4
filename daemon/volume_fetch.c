/*
 * volume_fetch.c - background downloads for content-volume publishes (volume_fetch.h).
 */
#include "volume_fetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "p2p/download.h"

struct job {
    struct job *next;
    struct dfd_vfetch *v;
    char id[DFD_TASK_ID_LEN + 1];
    unsigned waiters; /* publishes looking at it: the thread frees it once none is left */
    bool done;
    int r;
    struct dfc_error err;
    uint64_t content_length, piece_length;
    uint32_t pieces; /* written so far */
};

struct dfd_vfetch {
    struct dfd_p2p *p2p;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a download ended, or stop */
    bool stop;
    unsigned running;
    struct job *jobs;
};

int dfd_vfetch_new(struct dfd_p2p *p2p, struct dfd_vfetch **ret, struct dfc_error *err) {
    struct dfd_vfetch *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    v->p2p = p2p;
    pthread_mutex_init(&v->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&v->cv, &ca);
    pthread_condattr_destroy(&ca);
    *ret = v;
    return 0;
}

void dfd_vfetch_free(struct dfd_vfetch *v) {
    if (v == NULL) {
        return;
    }
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    pthread_cond_broadcast(&v->cv);
    while (v->running > 0) {
        pthread_cond_wait(&v->cv, &v->mu);
    }
    pthread_mutex_unlock(&v->mu);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

static int on_started(void *arg, uint64_t content_length, struct dfc_error *err) {
    (void)err;
    struct job *j = arg;
    pthread_mutex_lock(&j->v->mu);
    j->content_length = content_length;
    pthread_mutex_unlock(&j->v->mu);
    return 0;
}

static int on_piece(void *arg, const struct dfd_piece_meta *pm, const void *data,
                    const char *parent_id, uint64_t cost_ns, struct dfc_error *err) {
    (void)data, (void)parent_id, (void)cost_ns, (void)err;
    struct job *j = arg;
    pthread_mutex_lock(&j->v->mu);
    j->pieces++;
    /* The geometry from any piece: piece n starts at n x piece_length; piece 0 shorter than
     * the content is one piece_length. */
    if (pm->number > 0) {
        j->piece_length = pm->offset / pm->number;
    } else if (pm->length < j->content_length || j->piece_length == 0) {
        j->piece_length = pm->length;
    }
    pthread_mutex_unlock(&j->v->mu);
    return 0;
}

static bool on_should_stop(void *arg) {
    struct job *j = arg;
    pthread_mutex_lock(&j->v->mu);
    bool stop = j->v->stop;
    pthread_mutex_unlock(&j->v->mu);
    return stop;
}

static void *job_main(void *arg) {
    struct job *j = arg;
    struct dfd_vfetch *v = j->v;
    struct dfd_p2p_request req = {.task_id = j->id};
    struct dfd_p2p_progress prog = {
        .arg = j, .started = on_started, .piece = on_piece, .should_stop = on_should_stop};
    struct dfd_task_meta t;
    struct dfc_error e;
    int r = dfd_p2p_fetch(v->p2p, &req, &prog, &t, &e);
    if (r == 0) {
        dfd_task_meta_done(&t);
        DFC_LOG(DFC_LOG_INFO, "volume.fetched", "task_id=%s", j->id);
    } else {
        DFC_LOG(DFC_LOG_WARN, "volume.fetch_failed", "task_id=%s error=\"%s\"", j->id,
                dfc_error_msg(&e));
    }
    pthread_mutex_lock(&v->mu);
    j->done = true;
    j->r = r;
    j->err = e;
    pthread_cond_broadcast(&v->cv);
    while (j->waiters > 0) { /* they read the result; a new one may still join meanwhile */
        pthread_cond_wait(&v->cv, &v->mu);
    }
    for (struct job **p = &v->jobs; *p != NULL; p = &(*p)->next) {
        if (*p == j) {
            *p = j->next;
            break;
        }
    }
    free(j);
    v->running--;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

/* With v->mu held: the download of id, started when there is none, with the caller counted
 * among its waiters. */
static int get_job(struct dfd_vfetch *v, const char *id, struct job **ret, struct dfc_error *err) {
    for (struct job *j = v->jobs; j != NULL; j = j->next) {
        if (strcmp(j->id, id) == 0) {
            j->waiters++;
            *ret = j;
            return 0;
        }
    }
    if (v->stop) {
        return dfc_error_set(err, -ECANCELED, "the daemon is stopping");
    }
    if (v->running >= DFD_VFETCH_MAX) {
        return dfc_error_set(err, -EAGAIN, "%d downloads for content volumes are running already",
                             DFD_VFETCH_MAX);
    }
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    j->v = v;
    snprintf(j->id, sizeof(j->id), "%s", id);
    j->waiters = 1;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &a, job_main, j);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        free(j);
        return dfc_error_set(err, -EAGAIN, "cannot start a download thread");
    }
    j->next = v->jobs;
    v->jobs = j;
    v->running++;
    *ret = j;
    return 0;
}

/* With v->mu held: "task <id>: 37% (12 of 32 pieces)" of each job not done, into err. */
static int progress(struct job **jobs, size_t n, struct dfc_error *err) {
    char msg[sizeof(err->msg)];
    size_t at = 0;
    for (size_t i = 0; i < n && at < sizeof(msg); i++) {
        const struct job *j = jobs[i];
        if (j->done) {
            continue;
        }
        uint64_t total =
            j->piece_length > 0 ? (j->content_length + j->piece_length - 1) / j->piece_length : 0;
        unsigned pct = total > 0 ? (unsigned)(j->pieces * 100 / total) : 0;
        int w =
            total > 0
                ? snprintf(msg + at, sizeof(msg) - at, "%stask %s: %u%% (%u of %llu pieces)",
                           at ? "; " : "", j->id, pct, j->pieces, (unsigned long long)total)
                : snprintf(msg + at, sizeof(msg) - at,
                           "%stask %s: 0%% (waiting for its first piece)", at ? "; " : "", j->id);
        at += w > 0 ? (size_t)w : 0;
    }
    return dfc_error_set(err, -ETIMEDOUT,
                         "the tasks are still downloading from peers (retry later): %s", msg);
}

int dfd_vfetch_wait(struct dfd_vfetch *v, const char *const *ids, size_t n, int64_t deadline_ns,
                    struct dfc_error *err) {
    struct job **jobs = calloc(n ? n : 1, sizeof(struct job *));
    if (jobs == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = 0;
    size_t got = 0;
    pthread_mutex_lock(&v->mu);
    for (; got < n && r == 0; got++) {
        r = get_job(v, ids[got], &jobs[got], err);
    }
    got -= r < 0 ? 1 : 0;
    struct timespec dl = {.tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000};
    while (r == 0) {
        bool all = true;
        for (size_t i = 0; i < got && r == 0; i++) {
            if (jobs[i]->done && jobs[i]->r < 0) {
                *err = jobs[i]->err;
                r = jobs[i]->r;
            }
            all = all && jobs[i]->done;
        }
        if (r < 0 || all) {
            break;
        }
        if (v->stop) {
            r = dfc_error_set(err, -ECANCELED, "the daemon is stopping");
        } else if (dfc_mono_ns() >= deadline_ns ||
                   pthread_cond_timedwait(&v->cv, &v->mu, &dl) == ETIMEDOUT) {
            r = progress(jobs, got, err);
        }
    }
    for (size_t i = 0; i < got; i++) {
        jobs[i]->waiters--;
    }
    pthread_cond_broadcast(&v->cv); /* a download done may go now */
    pthread_mutex_unlock(&v->mu);
    free(jobs);
    return r;
}
