/*
 * sharing.c - serving while downloading (storage.h, "sharing"): the registry of shared
 * replicas, the one piece lookup the Vortex server makes (a committed task's row, else a shared
 * replica's written piece) and the progress a SyncPersistentCachePieces stream waits on.
 *
 * DESIGN. The registry is a list in the storage (s->shared) under s->share_mu, with a
 * generation counter and a CLOCK_MONOTONIC condition: dfd_replica_share() adds a replica,
 * dfd_replica_abort() takes it out before closing the spool (and a commit ends in that abort,
 * after its row is in), and a piece marked written bumps the generation. Readers do all they
 * need of a replica under share_mu (copy the bitmap, dup the spool fd), so no reader ever
 * holds a pointer to one past the lock and no reference count is needed; lock order is
 * share_mu, then the replica's mu. A lookup asks the registry before the rows: a replica
 * leaves the registry only once its row is visible, so a task being committed is always
 * found in one or the other. The registry lives in memory only: after a restart nothing of a
 * half-written spool is served (open empties tmp/).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "replica_internal.h"
#include "storage.h"
#include "storage_internal.h"

/* With share_mu held: something a waiter may care about changed. */
static void bump_locked(struct dfd_storage *s) {
    s->share_gen++;
    pthread_cond_broadcast(&s->share_cv);
}

void dfd__share_notify(struct dfd_storage *s) {
    pthread_mutex_lock(&s->share_mu);
    bump_locked(s);
    pthread_mutex_unlock(&s->share_mu);
}

void dfd_replica_share(struct dfd_replica *rep) {
    struct dfd_storage *s = rep->s;
    pthread_mutex_lock(&s->share_mu);
    pthread_mutex_lock(&rep->mu);
    bool was = rep->shared;
    rep->shared = true;
    pthread_mutex_unlock(&rep->mu);
    if (!was) {
        rep->share_next = s->shared;
        s->shared = rep;
        bump_locked(s);
    }
    pthread_mutex_unlock(&s->share_mu);
}

void dfd__replica_unshare(struct dfd_replica *rep) {
    struct dfd_storage *s = rep->s;
    pthread_mutex_lock(&s->share_mu);
    if (rep->shared) {
        for (struct dfd_replica **p = &s->shared; *p != NULL; p = &(*p)->share_next) {
            if (*p == rep) {
                *p = rep->share_next;
                break;
            }
        }
        pthread_mutex_lock(&rep->mu);
        rep->shared = false;
        pthread_mutex_unlock(&rep->mu);
        rep->share_next = NULL;
        bump_locked(s);
    }
    pthread_mutex_unlock(&s->share_mu);
}

/* With share_mu held: the shared replica of task id, or NULL. */
static struct dfd_replica *find_locked(struct dfd_storage *s, const char *id) {
    for (struct dfd_replica *r = s->shared; r != NULL; r = r->share_next) {
        if (strcmp(r->task.id, id) == 0) {
            return r;
        }
    }
    return NULL;
}

/* With share_mu held: piece number of the shared replica rep, when written, into *pm and a
 * dup of its spool fd into *ret_fd. 1 when it is, 0 when not (unwritten, claimed, out of
 * range), negative when the dup failed. */
static int open_shared_locked(struct dfd_replica *rep, uint32_t number, int *ret_fd,
                              struct dfd_piece_meta *pm, struct dfc_error *err) {
    const struct dfd_task_meta *t = &rep->task;
    if (number >= t->piece_count) {
        return 0;
    }
    *pm = (struct dfd_piece_meta){
        .number = number,
        .offset = (uint64_t)number * t->piece_length,
        .length = dfd__replica_piece_len(t, number),
    };
    pthread_mutex_lock(&rep->mu);
    bool on = dfd__bit(rep->written, number);
    uint32_t crc = rep->crcs[number];
    if (on && rep->shas != NULL) { /* dfd_replica_set_digests swaps them under mu */
        pm->has_sha256 = true;
        memcpy(pm->sha256, rep->shas[number], DFC_SHA256_LEN);
    }
    pthread_mutex_unlock(&rep->mu);
    if (!on) {
        return 0;
    }
    dfc_crc32_format(crc, pm->digest);
    int fd = fcntl(rep->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "dup the spool of task %s", t->id);
    }
    *ret_fd = fd;
    return 1;
}

/* Piece number of the committed task id, and its content fd. -ENOENT when absent. */
static int open_committed(struct dfd_storage *s, const char *id, uint32_t number, int *ret_fd,
                          struct dfd_piece_meta *ret_pm, struct dfc_error *err) {
    struct dfd_piece_meta *pieces = NULL;
    size_t n = 0;
    int r = dfd_metadata_pieces(s->md, id, &pieces, &n, err);
    if (r < 0) {
        return r;
    }
    r = -ENOENT;
    /* The rows come in order, so the piece is at its number; a scan covers any gap. */
    if (number < n && pieces[number].number == number) {
        *ret_pm = pieces[number];
        r = 0;
    }
    for (size_t i = 0; i < n && r < 0; i++) {
        if (pieces[i].number == number) {
            *ret_pm = pieces[i];
            r = 0;
        }
    }
    free(pieces);
    if (r < 0) {
        return dfc_error_set(err, -ENOENT, "piece %s-%u not found", id, number);
    }
    return dfd_storage_open_content(s, id, ret_fd, err);
}

int dfd_storage_open_piece(struct dfd_storage *s, const char *id, uint32_t number, int *ret_fd,
                           struct dfd_piece_meta *ret_pm, struct dfc_error *err) {
    pthread_mutex_lock(&s->share_mu);
    struct dfd_replica *rep = find_locked(s, id);
    int r = rep != NULL ? open_shared_locked(rep, number, ret_fd, ret_pm, err) : 0;
    pthread_mutex_unlock(&s->share_mu);
    if (rep != NULL) {
        if (r == 0) {
            return dfc_error_set(err, -ENOENT, "piece %s-%u not found", id, number);
        }
        return r < 0 ? r : 0;
    }
    return open_committed(s, id, number, ret_fd, ret_pm, err);
}

int dfd_storage_piece_state(struct dfd_storage *s, const char *id, struct dfd_piece_state *ret,
                            struct dfc_error *err) {
    *ret = (struct dfd_piece_state){.source = DFD_PIECES_ABSENT};
    pthread_mutex_lock(&s->share_mu);
    ret->gen = s->share_gen;
    struct dfd_replica *rep = find_locked(s, id);
    if (rep != NULL) {
        const struct dfd_task_meta *t = &rep->task;
        size_t map = (size_t)t->piece_count / 8 + 1;
        if ((ret->written = malloc(map)) == NULL) {
            pthread_mutex_unlock(&s->share_mu);
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        pthread_mutex_lock(&rep->mu);
        memcpy(ret->written, rep->written, map);
        pthread_mutex_unlock(&rep->mu);
        ret->source = DFD_PIECES_IN_PROGRESS;
        ret->piece_length = t->piece_length;
        ret->content_length = t->content_length;
        ret->piece_count = t->piece_count;
    }
    pthread_mutex_unlock(&s->share_mu);
    if (rep != NULL) {
        return 0;
    }
    struct dfd_task_meta t;
    int r = dfd_metadata_get(s->md, id, &t, err);
    if (r == -ENOENT) {
        return 0;
    }
    if (r < 0) {
        return r;
    }
    size_t map = (size_t)t.piece_count / 8 + 1;
    if ((ret->written = malloc(map)) == NULL) {
        dfd_task_meta_done(&t);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    memset(ret->written, 0, map);
    for (uint32_t i = 0; i < t.piece_count; i++) { /* a committed task holds every piece */
        ret->written[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    ret->source = DFD_PIECES_COMMITTED;
    ret->piece_length = t.piece_length;
    ret->content_length = t.content_length;
    ret->piece_count = t.piece_count;
    dfd_task_meta_done(&t);
    return 0;
}

void dfd_piece_state_done(struct dfd_piece_state *st) {
    free(st->written);
    st->written = NULL;
}

int dfd_storage_wait_pieces(struct dfd_storage *s, uint64_t gen, int64_t deadline_mono_ns) {
    struct timespec ts = {.tv_sec = deadline_mono_ns / 1000000000,
                          .tv_nsec = deadline_mono_ns % 1000000000};
    int r = 0;
    pthread_mutex_lock(&s->share_mu);
    while (s->share_gen == gen && r == 0) {
        int e = pthread_cond_timedwait(&s->share_cv, &s->share_mu, &ts);
        if (e != 0) { /* ETIMEDOUT, or EINVAL for a deadline already past */
            r = s->share_gen == gen ? -ETIMEDOUT : 0;
        }
    }
    pthread_mutex_unlock(&s->share_mu);
    return r;
}
