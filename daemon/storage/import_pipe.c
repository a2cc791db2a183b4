/*
 * import_pipe.c - the two-stage pipeline of an import (see import_pipe.h).
 *
 * DESIGN: one mutex and one condition variable guard a ring of DFD__PIPE_SLOTS slices. The
 * pusher appends at head; each stage (0: SHA-256, 1: CRC + spool write) has its own count of
 * slices done and takes the next one when it is behind head, working on it unlocked. The
 * stage that passes a slice second releases it, so a slice is released exactly once and in
 * order, and the queue never holds more than its bound of received bytes (the daemon's RSS
 * stays flat whatever the stream's length). The first error of either stage stops both; the
 * pusher sees it on its next push or wait, and dfd__pipe_stop() returns it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "dfc/fs.h"
#include "import_pipe.h"
#include "storage_internal.h"

/* What stage 1 CRCs before writing it in one writev, when a slice is many buffers: the bytes
 * the write copies are still in this core's cache from the CRC. */
#define PIPE_BLOCK ((size_t)256 << 10)

struct slot {
    struct iovec one;        /* the slice, when it is one buffer (iov is then NULL) */
    const struct iovec *iov; /* else its n buffers, borrowed until release */
    int n;
    size_t len;
    void (*release)(void *arg);
    void *arg;
};

struct stage_arg {
    struct dfd__pipe *p;
    int stage;
};

struct dfd__pipe {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change below */
    struct slot slots[DFD__PIPE_SLOTS];
    int64_t head;    /* under mu: slices pushed */
    int64_t done[2]; /* under mu: slices each stage is done with */
    size_t bytes;    /* under mu: bytes of slices pushed and not released */
    int error;       /* under mu: the first stage error */
    bool stop;       /* under mu: the owner asked both stages to return */
    struct dfd_digester *dg;
    int fd;
    pthread_t th[2];
    struct stage_arg args[2];
};

static int64_t min_done(const struct dfd__pipe *p) {
    return p->done[0] < p->done[1] ? p->done[0] : p->done[1];
}

static int run_stage(struct dfd__pipe *p, int stage, const struct slot *s) {
    const struct iovec *iov = s->iov != NULL ? s->iov : &s->one;
    if (stage == 0) {
        for (int i = 0; i < s->n; i++) {
            dfd_digester_update_sha(p->dg, iov[i].iov_base, iov[i].iov_len);
        }
        return 0;
    }
    for (int i = 0; i < s->n;) {
        int j = i;
        for (size_t block = 0; j < s->n && (j == i || block < PIPE_BLOCK); j++) {
            int r = dfd_digester_update_crc(p->dg, iov[j].iov_base, iov[j].iov_len);
            if (r < 0) {
                return r;
            }
            block += iov[j].iov_len;
        }
        int r = p->fd >= 0 ? dfc_writev_all(p->fd, iov + i, j - i, -1) : 0;
        if (r < 0) {
            return r;
        }
        i = j;
    }
    return 0;
}

static void *stage_main(void *arg_) {
    struct stage_arg *a = arg_;
    struct dfd__pipe *p = a->p;
    int me = a->stage;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->error == 0 && p->done[me] == p->head) {
            pthread_cond_wait(&p->cv, &p->mu);
        }
        if (p->stop || p->error != 0) {
            break;
        }
        struct slot s = p->slots[p->done[me] % DFD__PIPE_SLOTS];
        pthread_mutex_unlock(&p->mu);
        int r = run_stage(p, me, &s);
        pthread_mutex_lock(&p->mu);
        if (r < 0 && p->error == 0) {
            p->error = r;
        }
        p->done[me]++;
        bool last = p->done[1 - me] >= p->done[me]; /* the other stage is past it too */
        if (last) {
            p->bytes -= s.len;
        }
        pthread_cond_broadcast(&p->cv);
        if (last && s.release != NULL) {
            pthread_mutex_unlock(&p->mu);
            s.release(s.arg);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int dfd__pipe_start(struct dfd_digester *dg, int fd, struct dfd__pipe **ret) {
    struct dfd__pipe *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    p->dg = dg;
    p->fd = fd;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return -EAGAIN;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return -EAGAIN;
    }
    for (int i = 0; i < 2; i++) {
        p->args[i] = (struct stage_arg){.p = p, .stage = i};
        if (pthread_create(&p->th[i], NULL, stage_main, &p->args[i]) != 0) {
            if (i == 1) { /* stop the first one again */
                pthread_mutex_lock(&p->mu);
                p->stop = true;
                pthread_cond_broadcast(&p->cv);
                pthread_mutex_unlock(&p->mu);
                pthread_join(p->th[0], NULL);
            }
            pthread_cond_destroy(&p->cv);
            pthread_mutex_destroy(&p->mu);
            free(p);
            return -EAGAIN;
        }
    }
    *ret = p;
    return 0;
}

int64_t dfd__pipe_push(struct dfd__pipe *p, const struct iovec *iov, int n, size_t len,
                       void (*release)(void *arg), void *arg) {
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int64_t queued = p->head - min_done(p);
        if (p->error != 0 || queued == 0 ||
            (queued < DFD__PIPE_SLOTS && p->bytes + len <= DFD__PIPE_BYTES)) {
            break;
        }
        pthread_cond_wait(&p->cv, &p->mu);
    }
    int r = p->error;
    if (r < 0) {
        pthread_mutex_unlock(&p->mu);
        if (release != NULL) {
            release(arg);
        }
        return r;
    }
    int64_t seq = p->head;
    p->slots[seq % DFD__PIPE_SLOTS] = (struct slot){.one = n == 1 ? iov[0] : (struct iovec){0},
                                                    .iov = n <= 1 ? NULL : iov,
                                                    .n = n,
                                                    .len = len,
                                                    .release = release,
                                                    .arg = arg};
    p->head++;
    p->bytes += len;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return seq;
}

int dfd__pipe_wait(struct dfd__pipe *p, int64_t seq) {
    pthread_mutex_lock(&p->mu);
    while (p->error == 0 && min_done(p) <= seq) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
    int r = p->error;
    pthread_mutex_unlock(&p->mu);
    return r;
}

int dfd__pipe_stop(struct dfd__pipe *p, bool drain) {
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&p->mu);
    while (drain && p->error == 0 && min_done(p) < p->head) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th[0], NULL);
    pthread_join(p->th[1], NULL);
    /* Both stages are gone: release what neither released. */
    for (int64_t seq = min_done(p); seq < p->head; seq++) {
        struct slot *s = &p->slots[seq % DFD__PIPE_SLOTS];
        if (s->release != NULL) {
            s->release(s->arg);
        }
    }
    int r = p->error;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return r;
}
