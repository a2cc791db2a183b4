/*
 * storage_internal.h - what storage.c (layout, recovery, lookups, export) and import.c (the
 * import engine) share. Private to daemon/storage.
 */
#ifndef DFD_STORAGE_INTERNAL_H
#define DFD_STORAGE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>

#include "metadata.h"

/* The read and write unit of imports and copies. */
#define DFD_IO_CHUNK ((size_t)4 << 20)

struct dfd_storage {
    char *dir;
    char content_dir[PATH_MAX];
    char tmp_dir[PATH_MAX];
    char meta_dir[PATH_MAX];
    char reserve_path[PATH_MAX]; /* metadata/reserve: space a delete can free on a full disk */
    struct dfd_metadata *md;
    pthread_mutex_t commit_mu;
    pthread_mutex_t reserve_mu; /* creating or releasing the reserve */
};

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
int dfd__pathf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* write(2) until done; negative errno. */
int dfd__write_all(int fd, const void *buf, size_t len);

/* fsync(2) a directory; negative errno. */
int dfd__fsync_dir(const char *path);

/* <content_dir>/<id[0..3]>/<id> */
void dfd__task_path(const struct dfd_storage *s, const char *id, char *buf, size_t size);

#endif /* DFD_STORAGE_INTERNAL_H */
