/*
 * commit.c - the commit point shared by imports (import.c) and replicas (replica.c): a
 * complete spool in tmp/ becomes a task. See storage.h for the crash-safety rules.
 *
 * DESIGN: the before_commit hook (the scheduler's Started) runs outside
 * commit_mu, since it may wait on the network and commit_mu serialises every commit and
 * delete of the store. So the "identical task exists" check runs twice: once before the hook
 * (an identical task skips it) and again under the lock (a task that landed meanwhile still
 * wins, as before).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dfc/id.h"
#include "storage.h"
#include "storage_internal.h"

char *dfd__dup_or_null(const char *s, bool *oom) {
    if (s == NULL) {
        return NULL;
    }
    char *d = strdup(s);
    if (d == NULL) {
        *oom = true;
    }
    return d;
}

int dfd__check_space(struct dfd_storage *s, uint64_t need, struct dfc_error *err) {
    struct statvfs vfs;
    if (statvfs(s->dir, &vfs) < 0) {
        return dfc_error_errno(err, -errno, "statvfs `%s`", s->dir);
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (need > avail) {
        return dfc_error_set(err, -ENOSPC,
                             "not enough space in `%s`: %llu bytes needed, %llu available", s->dir,
                             (unsigned long long)need, (unsigned long long)avail);
    }
    return 0;
}

/* Whether the store may hold one task more (storage.maxTasks): 0, or -EDQUOT with err set. */
static int check_room(struct dfd_storage *s, struct dfc_error *err) {
    uint64_t tasks[2], bytes[2];
    int r = dfd_metadata_totals(s->md, tasks, bytes, err);
    if (r < 0) {
        return r;
    }
    uint64_t n = tasks[0] + tasks[1];
    if (n >= s->max_tasks) {
        return dfc_error_set(err, -EDQUOT,
                             "the store in `%s` holds %llu tasks, storage.maxTasks is %llu: "
                             "remove some, or raise it",
                             s->dir, (unsigned long long)n, (unsigned long long)s->max_tasks);
    }
    return 0;
}

struct dfd_piece_meta *dfd__pieces_new(const struct dfd_task_meta *t, const uint32_t *crcs,
                                       const uint8_t (*shas)[DFC_SHA256_LEN]) {
    struct dfd_piece_meta *pieces = calloc(t->piece_count ? t->piece_count : 1, sizeof(*pieces));
    for (uint32_t i = 0; pieces != NULL && i < t->piece_count; i++) {
        pieces[i].number = i;
        pieces[i].offset = (uint64_t)i * t->piece_length;
        uint64_t left = t->content_length - pieces[i].offset;
        pieces[i].length = left < t->piece_length ? left : t->piece_length;
        dfc_crc32_format(crcs[i], pieces[i].digest);
        if (shas != NULL) {
            pieces[i].has_sha256 = true;
            memcpy(pieces[i].sha256, shas[i], DFC_SHA256_LEN);
        }
    }
    return pieces;
}

void dfd__spool_name(const struct dfd_storage *s, const char *kind, char tmp_path[PATH_MAX]) {
    char uuid[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(uuid);
    (void)dfd__pathf(tmp_path, PATH_MAX, "%s/%s-%s", s->tmp_dir, kind, uuid);
}

/* The spool is private to the daemon (0600); read-write, since a reflinked clone is read
 * back for hashing. */
int dfd__spool_open(char tmp_path[PATH_MAX], int *fd, struct dfc_error *err) {
    *fd = open(tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (*fd < 0) {
        int r = dfc_error_errno(err, -errno, "create `%s`", tmp_path);
        tmp_path[0] = '\0';
        return r;
    }
    return 0;
}

void dfd__spool_remove(char *tmp_path, int *fd) {
    if (*fd >= 0) {
        (void)close(*fd);
        *fd = -1;
    }
    if (tmp_path[0] != '\0') {
        (void)unlink(tmp_path);
        tmp_path[0] = '\0';
    }
}

/* Whether old holds the bytes the pending task t describes: the same geometry and piece
 * digests. 1 yes, 0 no, negative on a metadata error. */
static int same_pieces(struct dfd_storage *s, const struct dfd_task_meta *old,
                       const struct dfd_task_meta *t, const struct dfd_piece_meta *pieces,
                       struct dfc_error *err) {
    if (old->content_length != t->content_length || old->piece_length != t->piece_length ||
        old->piece_count != t->piece_count) {
        return 0;
    }
    struct dfd_piece_meta *stored;
    size_t n;
    int r = dfd_metadata_pieces(s->md, old->id, &stored, &n, err);
    if (r < 0) {
        return r;
    }
    int same = n == t->piece_count;
    for (size_t i = 0; i < n && same; i++) {
        same = stored[i].offset == pieces[i].offset && stored[i].length == pieces[i].length &&
               strcmp(stored[i].digest, pieces[i].digest) == 0 &&
               (!stored[i].has_sha256 || !pieces[i].has_sha256 ||
                memcmp(stored[i].sha256, pieces[i].sha256, DFC_SHA256_LEN) == 0);
    }
    free(stored);
    return same;
}

/* Looks for a task with t's id. 0: none. 1: it exists and may answer the commit; *t is now
 * that task. Negative: it exists and may not (or the check failed); *t is untouched. */
static int find_existing(struct dfd_storage *s, struct dfd__spool *sp, struct dfd_task_meta *t,
                         struct dfc_error *err) {
    struct dfd_task_meta old;
    struct dfc_error e;
    if (dfd_metadata_get(s->md, t->id, &old, &e) < 0) {
        return 0;
    }
    int r = same_pieces(s, &old, t, sp->pieces, err);
    if (r == 0) {
        r = dfc_error_set(err, -EEXIST, "task id %s is already taken by other content", old.id);
    }
    if (r > 0 && sp->may_share != NULL) {
        int m = sp->may_share(sp->may_share_arg, &old, err);
        r = m < 0 ? m : 1;
    }
    if (r < 0) {
        dfd_task_meta_done(&old);
        return r;
    }
    dfd_task_meta_done(t);
    *t = old;
    return 1;
}

int dfd__spool_commit(struct dfd_storage *s, struct dfd__spool *sp, struct dfd_task_meta *task,
                      bool *ret_existed, struct dfc_error *err) {
    char final[PATH_MAX], shard[PATH_MAX];
    bool renamed = false;
    int r;

    /* Durable content before it becomes reachable. */
    if (sp->fd < 0 || fsync(sp->fd) < 0) {
        r = dfc_error_errno(err, -errno, "fsync `%s`", sp->tmp_path); /* or open, before */
        goto fail;
    }
    if ((r = find_existing(s, sp, task, err)) != 0) {
        goto existing;
    }
    /* A full store refuses before the scheduler hears of the task; checked again below, under
     * commit_mu, where no other commit can take the last place meanwhile. */
    if ((r = check_room(s, err)) < 0) {
        goto fail;
    }
    if (sp->before_commit != NULL) {
        if ((r = sp->before_commit(sp->before_commit_arg, task, err)) < 0) {
            goto fail;
        }
        if (r > 0) {
            task->peer_id[0] = '\0'; /* kept unregistered: no peer to withdraw later */
            task->register_later = r == 2;
        }
    }
    pthread_mutex_lock(&s->commit_mu);
    if ((r = find_existing(s, sp, task, err)) != 0) {
        pthread_mutex_unlock(&s->commit_mu);
        goto existing;
    }
    if ((r = check_room(s, err)) < 0) {
        goto fail_locked;
    }
    (void)dfd__pathf(shard, sizeof(shard), "%s/%.3s", s->content_dir, task->id);
    dfd__task_path(s, task->id, final, sizeof(final));
    if (mkdir(shard, 0700) < 0 && errno != EEXIST) {
        r = dfc_error_errno(err, -errno, "create `%s`", shard);
        goto fail_locked;
    }
    if (rename(sp->tmp_path, final) < 0) {
        r = dfc_error_errno(err, -errno, "rename into `%s`", final);
        goto fail_locked;
    }
    renamed = true;
    sp->tmp_path[0] = '\0';
    if ((r = dfd__fsync_dir(shard)) < 0 || (r = dfd__fsync_dir(s->content_dir)) < 0) {
        dfc_error_errno(err, r, "fsync `%s`", shard);
        goto fail_locked;
    }
    if ((r = dfd_metadata_insert(s->md, task, sp->pieces, err)) < 0) {
        goto fail_locked;
    }
    pthread_mutex_unlock(&s->commit_mu);
    *ret_existed = false;
    return 0;
existing:
    if (r < 0) {
        goto fail;
    }
    *ret_existed = true;
    return 0;
fail_locked:
    if (renamed) {
        (void)unlink(final);
    }
    pthread_mutex_unlock(&s->commit_mu);
fail:
    dfd_task_meta_done(task);
    return r;
}
