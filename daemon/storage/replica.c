/*
 * replica.c - replicas: a task fetched piece by piece from peers under the scheduler's id
 * (storage.h). The spool lives in tmp/, so startup recovery removes a half-written one; the
 * commit is dfd__spool_commit (commit.c), the same as an import's.
 *
 * DESIGN: pieces arrive in any order from several download threads. Each piece is claimed
 * under rep->mu (a second claim is -EEXIST), written with pwrite outside the lock, whole or in
 * chunks as they come off the socket (pieces are
 * disjoint ranges of a file sized at begin: fallocated, sparse on tmpfs), and only then marked
 * written; a failed write drops the claim so the piece can be fetched again. The CRC the caller
 * checked becomes the piece's digest, so the row describes exactly what was written.
 * A shared replica (dfd_replica_share, sharing.c) is served piece by piece while it downloads:
 * marking a piece written wakes the waiters, and abort (so also the end of a commit) leaves
 * the registry before the spool is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "storage.h"
#include "storage_internal.h"
#include "replica_internal.h"

static void set_bit(uint8_t *map, uint32_t i, bool on) {
    if (on) {
        map[i / 8] |= (uint8_t)(1u << (i % 8));
    } else {
        map[i / 8] &= (uint8_t) ~(1u << (i % 8));
    }
}

static uint64_t piece_len(const struct dfd_task_meta *t, uint32_t number) {
    return dfd__replica_piece_len(t, number);
}

/* The geometry checks of dfd_replica_begin(); each error names its field. */
static int check_params(const struct dfd_replica_params *p, struct dfc_error *err) {
    if (p->id == NULL || !dfd_task_id_valid(p->id)) {
        return dfc_error_set(err, -EINVAL, "id: must be 64 lowercase hex digits");
    }
    if (p->piece_length < DFC_PIECE_LENGTH_MIN || p->piece_length > DFC_PIECE_LENGTH_MAX) {
        return dfc_error_set(err, -EINVAL, "piece_length: must be %llu..%llu, not %llu",
                             (unsigned long long)DFC_PIECE_LENGTH_MIN,
                             (unsigned long long)DFC_PIECE_LENGTH_MAX,
                             (unsigned long long)p->piece_length);
    }
    /* An off_t holds it, and its piece count fits in 32 bits. */
    if (p->content_length > (uint64_t)INT64_MAX ||
        p->content_length / p->piece_length >= UINT32_MAX) {
        return dfc_error_set(err, -EINVAL, "content_length: %llu bytes is too large",
                             (unsigned long long)p->content_length);
    }
    uint32_t want = dfd_piece_count(p->content_length, p->piece_length);
    if (p->piece_count != want) {
        return dfc_error_set(err, -EINVAL,
                             "piece_count: %u does not match content_length %llu and "
                             "piece_length %llu (%u pieces)",
                             p->piece_count, (unsigned long long)p->content_length,
                             (unsigned long long)p->piece_length, want);
    }
    if (p->peer_id != NULL && strlen(p->peer_id) >= DFD_PEER_ID_MAX) {
        return dfc_error_set(err, -EINVAL, "peer_id: longer than %d bytes", DFD_PEER_ID_MAX - 1);
    }
    return 0;
}

void dfd_replica_abort(struct dfd_replica *rep) {
    if (rep == NULL) {
        return;
    }
    dfd__replica_unshare(rep); /* no reader may dup the fd once it is closed */
    dfd__spool_remove(rep->tmp_path, &rep->fd);
    pthread_mutex_destroy(&rep->mu);
    dfd_task_meta_done(&rep->task);
    free(rep->claimed);
    free(rep->written);
    free(rep->crcs);
    free(rep->shas);
    free(rep);
}

int dfd_replica_set_digests(struct dfd_replica *rep, const char *content_sha256,
                            const char *id_basis, const uint8_t (*piece_shas)[DFC_SHA256_LEN],
                            struct dfc_error *err) {
    struct dfd_task_meta *t = &rep->task;
    size_t n = t->piece_count ? t->piece_count : 1;
    uint8_t(*shas)[DFC_SHA256_LEN] = calloc(n, DFC_SHA256_LEN);
    char *basis = NULL;
    if (shas == NULL || (id_basis != NULL && (basis = strdup(id_basis)) == NULL)) {
        free(shas);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if (t->piece_count > 0) {
        memcpy(shas, piece_shas, (size_t)t->piece_count * DFC_SHA256_LEN);
    }
    pthread_mutex_lock(&rep->mu); /* a reader of the shared replica may copy them */
    uint8_t(*old)[DFC_SHA256_LEN] = rep->shas;
    rep->shas = shas;
    pthread_mutex_unlock(&rep->mu);
    free(old);
    free(t->id_basis);
    t->id_basis = basis;
    snprintf(t->content_sha256, sizeof(t->content_sha256), "%s", content_sha256);
    return 0;
}

int dfd_replica_pread(struct dfd_replica *rep, uint64_t at, void *buf, size_t n,
                      struct dfc_error *err) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(rep->fd, p, n, (off_t)at);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return dfc_error_errno(err, got < 0 ? -errno : -EIO, "read back `%s`", rep->tmp_path);
        }
        p += got;
        at += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* Whether fd lives on tmpfs (or ramfs), where fallocate buys nothing a write does not. */
static bool on_memory_fs(int fd) {
    struct statfs sf;
    return fstatfs(fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* Sizes the spool: fallocate, or a sparse file where the filesystem cannot or need not. On a
 * disk filesystem fallocate reserves the blocks in one cheap extent operation. On tmpfs it
 * allocates (and clears) every page of the file up front, serially, under the inode lock:
 * 0.3 s per GiB before the first piece may arrive, for pages the piece writes allocate anyway.
 * There the spool stays sparse; dfd__check_space() already refused a replica larger than the
 * free space, and a write that still meets a full filesystem fails with "no space left ...
 * while writing piece N", which fails the download and removes the spool. */
static int size_spool(struct dfd_replica *rep, struct dfc_error *err) {
    off_t len = (off_t)rep->task.content_length;
    if (len == 0) {
        return 0;
    }
    int e = on_memory_fs(rep->fd) ? EOPNOTSUPP : posix_fallocate(rep->fd, 0, len);
    if (e == EOPNOTSUPP || e == EINVAL) {
        e = ftruncate(rep->fd, len) < 0 ? errno : 0;
    }
    if (e == ENOSPC || e == EDQUOT) {
        return dfc_error_set(err, -e, "no space left in `%s` for a replica of %lld bytes",
                             rep->s->dir, (long long)len);
    }
    return e != 0 ? dfc_error_errno(err, -e, "allocate `%s`", rep->tmp_path) : 0;
}

int dfd_replica_begin(struct dfd_storage *s, const struct dfd_replica_params *p,
                      struct dfd_replica **ret, struct dfc_error *err) {
    int r = check_params(p, err);
    if (r < 0 || (r = dfd__check_space(s, p->content_length, err)) < 0) {
        return r;
    }
    struct dfd_task_meta old;
    struct dfc_error e;
    if (dfd_metadata_get(s->md, p->id, &old, &e) == 0) {
        dfd_task_meta_done(&old);
        return dfc_error_set(err, -EEXIST, "task %s is already stored", p->id);
    }
    struct dfd_replica *rep = calloc(1, sizeof(*rep));
    if (rep == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    rep->s = s;
    rep->fd = -1;
    pthread_mutex_init(&rep->mu, NULL);
    struct dfd_task_meta *t = &rep->task;
    snprintf(t->id, sizeof(t->id), "%s", p->id);
    t->persistent = p->persistent;
    t->replica_count = p->replica_count;
    t->piece_length = p->piece_length;
    t->content_length = p->content_length;
    t->piece_count = p->piece_count;
    t->ttl_ns = p->ttl_ns;
    t->created_at_ns = p->created_at_ns;
    t->owner_uid = (uint32_t)geteuid();
    t->id_origin = DFD_ID_ORIGIN_PEER;
    snprintf(t->peer_id, sizeof(t->peer_id), "%s", p->peer_id != NULL ? p->peer_id : "");
    bool oom = false;
    t->tag = dfd__dup_or_null(p->tag, &oom);
    t->application = dfd__dup_or_null(p->application, &oom);
    size_t map = (size_t)p->piece_count / 8 + 1;
    rep->claimed = calloc(map, 1);
    rep->written = calloc(map, 1);
    rep->crcs = calloc((size_t)p->piece_count + 1, sizeof(*rep->crcs));
    if (oom || rep->claimed == NULL || rep->written == NULL || rep->crcs == NULL) {
        dfd_replica_abort(rep);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    dfd__spool_name(s, "replica", rep->tmp_path);
    if ((r = dfd__spool_open(rep->tmp_path, &rep->fd, err)) < 0 || (r = size_spool(rep, err)) < 0) {
        dfd_replica_abort(rep);
        return r;
    }
    *ret = rep;
    return 0;
}

/* The geometry check shared by the writers: number in range, len its length. */
static int check_piece(const struct dfd_task_meta *t, uint32_t number, size_t len,
                       struct dfc_error *err) {
    if (number >= t->piece_count) {
        return dfc_error_set(err, -EINVAL, "piece number %u is out of range (the task has %u)",
                             number, t->piece_count);
    }
    uint64_t want = piece_len(t, number);
    if ((uint64_t)len != want) {
        return dfc_error_set(err, -EINVAL, "piece %u: length %zu, the geometry says %llu", number,
                             len, (unsigned long long)want);
    }
    return 0;
}

int dfd_replica_claim_piece(struct dfd_replica *rep, uint32_t number, size_t len,
                            struct dfc_error *err) {
    int r = check_piece(&rep->task, number, len, err);
    if (r < 0) {
        return r;
    }
    pthread_mutex_lock(&rep->mu);
    bool taken = dfd__bit(rep->claimed, number);
    set_bit(rep->claimed, number, true);
    pthread_mutex_unlock(&rep->mu);
    return taken ? dfc_error_set(err, -EEXIST, "piece %u is already written", number) : 0;
}

int dfd_replica_pwrite(struct dfd_replica *rep, uint32_t number, uint64_t at, const void *buf,
                       size_t n, struct dfc_error *err) {
    const struct dfd_task_meta *t = &rep->task;
    if (number >= t->piece_count) {
        return dfc_error_set(err, -EINVAL, "piece number %u is out of range (the task has %u)",
                             number, t->piece_count);
    }
    uint64_t plen = piece_len(t, number);
    if (at > plen || n > plen - at) {
        return dfc_error_set(err, -EINVAL, "piece %u: bytes %llu..%llu outside its %llu", number,
                             (unsigned long long)at, (unsigned long long)(at + n),
                             (unsigned long long)plen);
    }
    pthread_mutex_lock(&rep->mu);
    bool mine = dfd__bit(rep->claimed, number) && !dfd__bit(rep->written, number);
    pthread_mutex_unlock(&rep->mu);
    if (!mine) {
        return dfc_error_set(err, -EINVAL, "piece %u is not claimed, or already written", number);
    }
    int r = dfc_write_all(rep->fd, buf, n, (off_t)((uint64_t)number * t->piece_length + at));
    if (r == -ENOSPC || r == -EDQUOT) {
        return dfc_error_set(err, r, "no space left in `%s` while writing piece %u", rep->s->dir,
                             number);
    }
    return r < 0 ? dfc_error_errno(err, r, "write piece %u into `%s`", number, rep->tmp_path) : 0;
}

void dfd_replica_finish_piece(struct dfd_replica *rep, uint32_t number, bool ok, uint32_t crc32) {
    if (number >= rep->task.piece_count) {
        return;
    }
    bool notify = false;
    pthread_mutex_lock(&rep->mu);
    if (dfd__bit(rep->claimed, number) && !dfd__bit(rep->written, number)) {
        if (ok) {
            set_bit(rep->written, number, true);
            rep->crcs[number] = crc32;
            rep->n_written++;
            notify = rep->shared;
        } else {
            set_bit(rep->claimed, number, false); /* may be fetched again */
        }
    }
    pthread_mutex_unlock(&rep->mu);
    if (notify) {
        dfd__share_notify(rep->s);
    }
}

int dfd_replica_write_piece(struct dfd_replica *rep, uint32_t number, const void *buf, size_t len,
                            uint32_t crc32, struct dfc_error *err) {
    int r = dfd_replica_claim_piece(rep, number, len, err);
    if (r < 0) {
        return r;
    }
    r = dfd_replica_pwrite(rep, number, 0, buf, len, err);
    dfd_replica_finish_piece(rep, number, r == 0, crc32);
    return r;
}

bool dfd_replica_has_piece(struct dfd_replica *rep, uint32_t number) {
    if (number >= rep->task.piece_count) {
        return false;
    }
    pthread_mutex_lock(&rep->mu);
    bool on = dfd__bit(rep->written, number);
    pthread_mutex_unlock(&rep->mu);
    return on;
}

size_t dfd_replica_missing(struct dfd_replica *rep, uint32_t *out, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&rep->mu);
    for (uint32_t i = 0; i < rep->task.piece_count && n < max; i++) {
        if (!dfd__bit(rep->written, i)) {
            out[n++] = i;
        }
    }
    pthread_mutex_unlock(&rep->mu);
    return n;
}

int dfd_replica_commit(struct dfd_replica *rep, int64_t now_ns, struct dfd_task_meta *ret_task,
                       struct dfc_error *err) {
    struct dfd_task_meta *t = &rep->task;
    struct dfd_piece_meta *pieces = NULL;
    int r;
    pthread_mutex_lock(&rep->mu);
    uint32_t missing = UINT32_MAX;
    for (uint32_t i = 0; i < t->piece_count && missing == UINT32_MAX; i++) {
        if (!dfd__bit(rep->written, i)) {
            missing = i;
        }
    }
    pthread_mutex_unlock(&rep->mu);
    if (missing != UINT32_MAX) {
        r = dfc_error_set(err, -EINVAL, "piece %u is missing", missing);
        goto out;
    }
    if ((pieces = dfd__pieces_new(t, rep->crcs, (const uint8_t(*)[DFC_SHA256_LEN])rep->shas)) ==
        NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    t->updated_at_ns = t->finished_at_ns = now_ns;
    *ret_task = *t; /* the strings move to ret_task */
    t->tag = t->application = t->id_basis = NULL;
    struct dfd__spool sp = {.tmp_path = rep->tmp_path, .fd = rep->fd, .pieces = pieces};
    bool existed;
    r = dfd__spool_commit(rep->s, &sp, ret_task, &existed, err);
out:
    free(pieces);
    dfd_replica_abort(rep); /* removes the spool unless it became the content */
    return r;
}
