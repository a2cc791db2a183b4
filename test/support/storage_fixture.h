/*
 * storage_fixture.h - what the storage engine's tests share (test_storage.c, test_replica.c):
 * a store in a fresh temp dir as the cmocka state, test content, file counts, and stores as
 * older versions left them (for the migration tests). Include after <cmocka.h>.
 */
#ifndef DFC_STORAGE_FIXTURE_H
#define DFC_STORAGE_FIXTURE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "storage/storage.h"
#include "mount_ns.h"
#include "test_support.h"

struct fx {
    char dir[256];
    char store[300];
    struct dfd_storage *s;
};

/* (Re)opens f->store; rec may be NULL. */
static inline void fx_open(struct fx *f, struct dfd_recovery *rec) {
    struct dfc_error err;
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    assert_int_equal(dfd_storage_open(&o, &f->s, rec, &err), 0);
}

static inline void reopen(struct fx *f, struct dfd_recovery *rec) {
    dfd_storage_close(f->s);
    fx_open(f, rec);
}

static inline int fx_setup(void **state, const char *name) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), name);
    snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
    fx_open(f, NULL);
    *state = f;
    return 0;
}

static inline int teardown(void **state) {
    struct fx *f = *state;
    dfd_storage_close(f->s);
    test_mount_ns_leave(); /* when the test entered one */
    test_rmtree(f->dir);
    free(f);
    return 0;
}

/* len bytes of seeded, incompressible-looking content; the caller frees it. */
static inline char *pattern(uint64_t len, unsigned seed) {
    char *b = malloc(len ? len : 1);
    for (uint64_t i = 0; i < len; i++) {
        b[i] = (char)((i + seed) * 2654435761u >> 11);
    }
    return b;
}

/* What `find dir -mindepth 1 <filter>` lists ("" for everything, "-type f" for files). */
static inline size_t count_found(const char *dir, const char *filter) {
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 %s | wc -l", dir, filter);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    assert_int_equal(fscanf(p, "%zu", &n), 1);
    pclose(p);
    return n;
}

/* Replaces f's store (closed, f->s NULL after) with one as an older version left it: the
 * version-0 tables, then old_sql (its migrations, e.g. "ALTER TABLE ...;"), one task id of
 * 4 bytes "old!" (its row's values after hard_linked: row_tail, e.g. ", 1000, 'content'"),
 * then post_sql ("PRAGMA user_version=N;"); directories dir_mode, the file file_mode. False
 * when the sqlite3 command is missing (the caller skips). */
static inline bool fx_make_old_store(struct fx *f, const char *id, unsigned dir_mode,
                                     unsigned file_mode, const char *old_sql, const char *row_tail,
                                     const char *post_sql) {
    char dir[PATH_MAX], file[PATH_MAX + 80], cmd[PATH_MAX * 4];
    if (system("command -v sqlite3 >/dev/null") != 0) {
        return false;
    }
    dfd_storage_close(f->s);
    f->s = NULL;
    test_rmtree(f->store);
    snprintf(dir, sizeof(dir), "%s/content/persistent-cache-tasks/%.3s", f->store, id);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p -m %o '%s' '%s/metadata' '%s/tmp' && chmod %o '%s/content' "
             "'%s/content/persistent-cache-tasks'",
             dir_mode, dir, f->store, f->store, dir_mode, f->store, f->store);
    assert_int_equal(system(cmd), 0);
    snprintf(file, sizeof(file), "%s/%s", dir, id);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    assert_int_equal(fputs("old!", fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(chmod(file, file_mode), 0);
    snprintf(cmd, sizeof(cmd),
             "sqlite3 '%s/metadata/pcache.db' \"CREATE TABLE tasks (id TEXT PRIMARY KEY,"
             " persistent INTEGER NOT NULL, replica_count INTEGER NOT NULL, tag TEXT,"
             " application TEXT, piece_length INTEGER NOT NULL, content_length INTEGER NOT NULL,"
             " piece_count INTEGER NOT NULL, ttl_ns INTEGER NOT NULL, created_at_ns INTEGER NOT"
             " NULL, updated_at_ns INTEGER NOT NULL, finished_at_ns INTEGER NOT NULL, hard_linked"
             " INTEGER NOT NULL) WITHOUT ROWID; CREATE TABLE pieces (task_id TEXT NOT NULL"
             " REFERENCES tasks(id) ON DELETE CASCADE, number INTEGER NOT NULL, offset INTEGER"
             " NOT NULL, length INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (task_id,"
             " number)) WITHOUT ROWID; %s INSERT INTO tasks VALUES ('%s', 1, 2, NULL, NULL,"
             " 4194304, 4, 1, 3600000000000, 1, 1, 1, 0%s);"
             " INSERT INTO pieces VALUES ('%s', 0, 0, 4, 'crc32:0'); %s\"",
             f->store, old_sql, id, row_tail, id, post_sql);
    assert_int_equal(system(cmd), 0);
    return true;
}

#endif /* DFC_STORAGE_FIXTURE_H */
