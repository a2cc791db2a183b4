/*
 * storage_internal.h - what storage.c (layout, recovery, lookups, export) and import.c (the
 * import engine) share. Private to daemon/storage.
 */
#ifndef DFD_STORAGE_INTERNAL_H
#define DFD_STORAGE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dfc/error.h"
#include "metadata.h"

/* The read and write unit of imports and copies. */
#define DFD_IO_CHUNK ((size_t)4 << 20)

struct dfd_storage {
    char *dir;
    char content_dir[PATH_MAX];
    char tmp_dir[PATH_MAX];
    char meta_dir[PATH_MAX];
    char volumes_dir[PATH_MAX];  /* volumes/: the pins' directories (pins.h) */
    char reserve_path[PATH_MAX]; /* metadata/reserve: space a delete can free on a full disk */
    struct dfd_metadata *md;
    pthread_mutex_t commit_mu;
    pthread_mutex_t reserve_mu; /* creating or releasing the reserve */
    pthread_mutex_t pin_mu;     /* pins are made and removed one at a time; before commit_mu */
    bool unsafe_shared_inode_imports;
    uint64_t max_tasks; /* storage.maxTasks */
    /* The registry of shared replicas (sharing.c): a list through dfd_replica.share_next and a
     * generation bumped, with share_cv broadcast, whenever one of them wrote a piece, was
     * shared or left (committed or aborted). All under share_mu, which is taken before a
     * replica's own mu, with no other storage lock taken inside it (a commit leaves the
     * registry after it released commit_mu). */
    pthread_mutex_t share_mu;
    pthread_cond_t share_cv; /* CLOCK_MONOTONIC */
    uint64_t share_gen;
    struct dfd_replica *shared;
};

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
int dfd__pathf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* fsync(2) a directory; negative errno. */
int dfd__fsync_dir(const char *path);

/* <content_dir>/<id[0..3]>/<id> */
void dfd__task_path(const struct dfd_storage *s, const char *id, char *buf, size_t size);

/* A complete spool about to become a task (commit.c): imports and replicas share the commit. */
struct dfd__spool {
    char *tmp_path; /* the spool in tmp/ (PATH_MAX); emptied once it is renamed into content/ */
    int fd;         /* open on the spool: fsynced before anything else */
    const struct dfd_piece_meta *pieces; /* the pending task's pieces, piece_count of them */
    /* Whether an existing task old with the same id, already known to hold the same geometry
     * and piece digests, may answer this commit: 0, or negative with err set (-EEXIST). NULL:
     * it may. */
    int (*may_share)(void *arg, const struct dfd_task_meta *old, struct dfc_error *err);
    void *may_share_arg;
    /* dfd_import_params.before_commit: NULL for none. */
    int (*before_commit)(void *arg, const struct dfd_task_meta *pending, struct dfc_error *err);
    void *before_commit_arg;
};

/* Commits sp as the task *task (the pending row, filled by the caller): fsync -> [an identical
 * task exists: *task becomes it, *ret_existed] -> before_commit -> under commit_mu: the same
 * check again, mkdir the shard, rename into content/, fsync the shard and content/, insert
 * the row and pieces (the commit point). On failure *task is released (dfd_task_meta_done)
 * and the content file is unlinked if it was renamed; the caller still removes the spool
 * (sp->tmp_path, when not empty) and closes sp->fd. */
int dfd__spool_commit(struct dfd_storage *s, struct dfd__spool *sp, struct dfd_task_meta *task,
                      bool *ret_existed, struct dfc_error *err);

/* The piece rows of t's geometry with digests "crc32:<crcs[i]>" and SHA-256s shas[i] (NULL:
 * none); NULL when out of memory. Free with free(). */
struct dfd_piece_meta *dfd__pieces_new(const struct dfd_task_meta *t, const uint32_t *crcs,
                                       const uint8_t (*shas)[DFC_SHA256_LEN]);

/* A fresh spool path in tmp/: <tmp_dir>/<kind>-<uuid>. */
void dfd__spool_name(const struct dfd_storage *s, const char *kind, char tmp_path[PATH_MAX]);

/* Creates the spool tmp_path (0600, O_EXCL) into *fd; on failure tmp_path is emptied. */
int dfd__spool_open(char tmp_path[PATH_MAX], int *fd, struct dfc_error *err);

/* Closes *fd (when >= 0) and unlinks tmp_path (when not empty), leaving both unset. */
void dfd__spool_remove(char *tmp_path, int *fd);

/* -ENOSPC (naming the store, the need and what is free) unless need bytes are free. */
int dfd__check_space(struct dfd_storage *s, uint64_t need, struct dfc_error *err);

/* strdup that records a failure in *oom; NULL stays NULL. */
char *dfd__dup_or_null(const char *s, bool *oom);

struct dfd_recovery;

/* The pins' recovery at open (pins.c): volumes/ made; its directories without a row removed;
 * rows whose directory is missing or incomplete rebuilt, or dropped when a task is gone. */
int dfd__pins_recover(struct dfd_storage *s, struct dfd_recovery *rec, struct dfc_error *err);

/* 1 when a pin holds task id, 0 when none, or negative. */
int dfd__task_pinned(struct dfd_storage *s, const char *id, struct dfc_error *err);

#endif /* DFD_STORAGE_INTERNAL_H */
