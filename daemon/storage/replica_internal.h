/*
 * replica_internal.h - what replica.c (writing a replica) and sharing.c (serving a shared one
 * while it downloads) share. Private to daemon/storage.
 */
#ifndef DFD_STORAGE_REPLICA_INTERNAL_H
#define DFD_STORAGE_REPLICA_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "task.h"

struct dfd_storage;

struct dfd_replica {
    struct dfd_storage *s;
    struct dfd_task_meta task; /* the pending row (owns tag and application) */
    char tmp_path[PATH_MAX];
    int fd;
    pthread_mutex_t mu; /* guards the bitmaps, crcs, n_written and shared */
    uint8_t *claimed;   /* a write of the piece is under way or done */
    uint8_t *written;   /* the piece is on disk (and verified, once shared) */
    uint32_t *crcs;
    uint32_t n_written;
    uint8_t (*shas)[DFC_SHA256_LEN]; /* the verified pieces' SHA-256s; NULL: none recorded */
    /* In the storage's registry of shared replicas (sharing.c): set under mu and under the
     * registry lock (s->share_mu), so either lock reads it; next is under s->share_mu. */
    bool shared;
    struct dfd_replica *share_next;
};

static inline bool dfd__bit(const uint8_t *map, uint32_t i) {
    return (map[i / 8] >> (i % 8)) & 1u;
}

/* The length of piece number by t's geometry. */
static inline uint64_t dfd__replica_piece_len(const struct dfd_task_meta *t, uint32_t number) {
    uint64_t off = (uint64_t)number * t->piece_length;
    uint64_t left = t->content_length - off;
    return left < t->piece_length ? left : t->piece_length;
}

/* sharing.c: a shared replica wrote a piece: wakes the waiters (dfd_storage_wait_pieces).
 * Called without rep->mu held. */
void dfd__share_notify(struct dfd_storage *s);

/* sharing.c: takes rep out of the registry (when it is in) and wakes the waiters; called by
 * dfd_replica_abort() before the spool is closed (and so at commit, after the row is in).
 * Called without rep->mu held. */
void dfd__replica_unshare(struct dfd_replica *rep);

#endif /* DFD_STORAGE_REPLICA_INTERNAL_H */
