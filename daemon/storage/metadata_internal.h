/*
 * metadata_internal.h - what metadata.c (tasks and pieces) and pin_meta.c (the pins of content
 * volumes) share: the connections and their locks. Private to daemon/storage.
 */
#ifndef DFD_STORAGE_METADATA_INTERNAL_H
#define DFD_STORAGE_METADATA_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "dfc/error.h"

struct dfd_metadata {
    sqlite3 *db;
    pthread_mutex_t mu;
    sqlite3 *rdb;        /* read-only: the whole-table reads */
    pthread_mutex_t rmu; /* guards rdb */
};

/* err from db's last error: -ENOSPC (SQLITE_FULL), -EEXIST (a constraint), else -EIO. */
int dfd__md_error(struct dfd_metadata *md, struct dfc_error *err, const char *what);

#endif /* DFD_STORAGE_METADATA_INTERNAL_H */
