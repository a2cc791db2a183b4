/*
 * metadata.c - the SQLite side of the storage engine.
 *
 * DESIGN: SQLite replaces Dragonfly's RocksDB. WAL mode with synchronous=FULL makes a committed
 * transaction durable before it returns, which is what the import commit needs: the task row
 * (with its pieces) is inserted only after the content file is fsynced and renamed into place,
 * so a crash either leaves no row (recovery deletes the orphan content) or a complete task.
 *
 * Health. dfd_metadata_check() runs before the store trusts the database: PRAGMA quick_check
 * (page structure, record formats, NOT NULL) plus the presence of the schema, so that a damaged
 * file is reported as such instead of reading as "no such row". A DELETE in WAL mode appends
 * frames to the WAL, so it needs free space; dfd_metadata_checkpoint() folds the WAL back and
 * truncates it, which frees that space for the next write (storage.c uses it on a full disk).
 *
 * Two connections. Every row read and write goes through db under mu. The whole-table reads
 * (the list, the task count before each commit, the metrics' totals) go through rdb, a
 * read-only connection under its own rmu: in WAL mode a reader sees every transaction committed
 * before its own began and never blocks the writer, so a scan of tens of thousands of rows
 * does not hold up the imports, exports and deletes waiting for mu.
 */
#include "metadata.h"

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata_internal.h"

static const char schema_sql[] = "PRAGMA journal_mode=WAL;"
                                 "PRAGMA synchronous=FULL;"
                                 "PRAGMA foreign_keys=ON;"
                                 "CREATE TABLE IF NOT EXISTS tasks ("
                                 "  id TEXT PRIMARY KEY,"
                                 "  persistent INTEGER NOT NULL,"
                                 "  replica_count INTEGER NOT NULL,"
                                 "  tag TEXT,"
                                 "  application TEXT,"
                                 "  piece_length INTEGER NOT NULL,"
                                 "  content_length INTEGER NOT NULL,"
                                 "  piece_count INTEGER NOT NULL,"
                                 "  ttl_ns INTEGER NOT NULL,"
                                 "  created_at_ns INTEGER NOT NULL,"
                                 "  updated_at_ns INTEGER NOT NULL,"
                                 "  finished_at_ns INTEGER NOT NULL,"
                                 "  hard_linked INTEGER NOT NULL"
                                 ") WITHOUT ROWID;"
                                 "CREATE TABLE IF NOT EXISTS pieces ("
                                 "  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,"
                                 "  number INTEGER NOT NULL,"
                                 "  offset INTEGER NOT NULL,"
                                 "  length INTEGER NOT NULL,"
                                 "  digest TEXT NOT NULL,"
                                 "  PRIMARY KEY (task_id, number)"
                                 ") WITHOUT ROWID;";

/* Schema migrations, applied in order; PRAGMA user_version counts the ones applied. Version 0
 * is schema_sql above (every store starts there, so new and old stores take the same path).
 * Version 1 records the importing uid and the id's origin; rows from before get uid 0 and
 * origin 'unknown', which the import dedup treats as not content-derived. Version 2 records the
 * peer id the copy is registered under at the scheduler; rows from before get "". Version 3
 * marks a copy kept local because no scheduler took its registration (register_later); rows
 * from before get 0. Version 4 records the content's SHA-256, content_for_calculating_task_id
 * and each piece's SHA-256 (docs/integrity.md); rows from before get '', NULL and NULL.
 * Version 5 adds the pins of content volumes (pin_meta.c, docs/content-volumes.md): one row
 * per pin and one per file it holds; stores from before have none. */
static const char *const migrations[] = {
    "ALTER TABLE tasks ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN id_origin TEXT NOT NULL DEFAULT 'unknown';",
    "ALTER TABLE tasks ADD COLUMN peer_id TEXT NOT NULL DEFAULT '';",
    "ALTER TABLE tasks ADD COLUMN register_later INTEGER NOT NULL DEFAULT 0;",
    "ALTER TABLE tasks ADD COLUMN content_sha256 TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE tasks ADD COLUMN id_basis TEXT;"
    "ALTER TABLE pieces ADD COLUMN sha256 BLOB;",
    "CREATE TABLE pins ("
    "  pin_id TEXT PRIMARY KEY,"
    "  target_path TEXT NOT NULL,"
    "  created_at_ns INTEGER NOT NULL,"
    "  verity INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE pin_files ("
    "  pin_id TEXT NOT NULL REFERENCES pins(pin_id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  task_id TEXT NOT NULL,"
    "  PRIMARY KEY (pin_id, name)"
    ") WITHOUT ROWID;"
    "CREATE INDEX pin_files_task ON pin_files (task_id);",
};
#define N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

static const char *origin_text(enum dfd_id_origin o) {
    return o == DFD_ID_ORIGIN_CONTENT  ? "content"
           : o == DFD_ID_ORIGIN_STRING ? "string"
           : o == DFD_ID_ORIGIN_PEER   ? "peer"
                                       : "unknown";
}

static enum dfd_id_origin origin_parse(const unsigned char *s) {
    if (s != NULL && strcmp((const char *)s, "content") == 0) {
        return DFD_ID_ORIGIN_CONTENT;
    }
    if (s != NULL && strcmp((const char *)s, "string") == 0) {
        return DFD_ID_ORIGIN_STRING;
    }
    if (s != NULL && strcmp((const char *)s, "peer") == 0) {
        return DFD_ID_ORIGIN_PEER;
    }
    return DFD_ID_ORIGIN_UNKNOWN;
}

static int conn_error(sqlite3 *db, struct dfc_error *err, const char *what) {
    int rc = sqlite3_errcode(db);
    int code = rc == SQLITE_FULL ? -ENOSPC : rc == SQLITE_CONSTRAINT ? -EEXIST : -EIO;
    return dfc_error_set(err, code, "metadata %s: %s", what, sqlite3_errmsg(db));
}

int dfd__md_error(struct dfd_metadata *md, struct dfc_error *err, const char *what) {
    return conn_error(md->db, err, what);
}

/* Applies the migrations the store has not seen, each in one transaction with its version. */
static int migrate(struct dfd_metadata *md, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(md->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return dfd__md_error(md, err, "read the schema version");
    }
    int version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0 || (size_t)version > N_MIGRATIONS) {
        return dfc_error_set(err, -EIO,
                             "metadata schema version %d is newer than this dfdaemon knows (%zu)",
                             version, N_MIGRATIONS);
    }
    for (size_t v = (size_t)version; v < N_MIGRATIONS; v++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version=%zu;", v + 1);
        if (sqlite3_exec(md->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
            return dfd__md_error(md, err, "begin a migration");
        }
        if (sqlite3_exec(md->db, migrations[v], NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(md->db, bump, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(md->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            int r = dfd__md_error(md, err, "migrate the schema");
            (void)sqlite3_exec(md->db, "ROLLBACK", NULL, NULL, NULL);
            return r;
        }
    }
    return 0;
}

int dfd_metadata_open(const char *dir, struct dfd_metadata **ret, struct dfc_error *err) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/pcache.db", dir) >= (int)sizeof(path)) {
        return dfc_error_set(err, -ENAMETOOLONG, "metadata path under `%s` is too long", dir);
    }
    struct dfd_metadata *md = calloc(1, sizeof(*md));
    if (md == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&md->mu, NULL);
    pthread_mutex_init(&md->rmu, NULL);
    int rc = sqlite3_open_v2(
        path, &md->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int r = dfc_error_set(err, -EIO, "open metadata `%s`: %s", path,
                              md->db ? sqlite3_errmsg(md->db) : sqlite3_errstr(rc));
        dfd_metadata_close(md);
        return r;
    }
    sqlite3_busy_timeout(md->db, 5000);
    int r;
    if (sqlite3_exec(md->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "schema");
        dfd_metadata_close(md);
        return r;
    }
    if ((r = migrate(md, err)) < 0) {
        dfd_metadata_close(md);
        return r;
    }
    rc = sqlite3_open_v2(path, &md->rdb, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        r = dfc_error_set(err, -EIO, "open metadata `%s` for reading: %s", path,
                          md->rdb ? sqlite3_errmsg(md->rdb) : sqlite3_errstr(rc));
        dfd_metadata_close(md);
        return r;
    }
    sqlite3_busy_timeout(md->rdb, 5000);
    *ret = md;
    return 0;
}

int dfd_metadata_check(const char *dir, struct dfd_metadata_health *ret, struct dfc_error *err) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/pcache.db", dir) >= (int)sizeof(path)) {
        return dfc_error_set(err, -ENAMETOOLONG, "metadata path under `%s` is too long", dir);
    }
    memset(ret, 0, sizeof(*ret));
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    /* Read-write but never create: the caller has seen the file. Reads change nothing. */
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        /* Leave the WAL as found: no checkpoint when this connection closes. */
        (void)sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        const unsigned char *row = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
        if (row != NULL) {
            snprintf(ret->detail, sizeof(ret->detail), "%s", (const char *)row);
            ret->state =
                strcmp((const char *)row, "ok") == 0 ? DFD_METADATA_OK : DFD_METADATA_CORRUPT;
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_CORRUPT; /* quick_check always answers a row */
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (rc == SQLITE_OK && ret->state == DFD_METADATA_OK) {
        rc = sqlite3_prepare_v2(db,
                                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                " AND name IN ('tasks', 'pieces')",
                                -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (sqlite3_column_int(st, 0) != 2) {
                ret->state = DFD_METADATA_NO_SCHEMA;
                snprintf(ret->detail, sizeof(ret->detail), "no tasks and pieces tables");
            }
            rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
    }
    int r = 0;
    if (rc != SQLITE_OK) {
        int primary = rc & 0xff;
        const char *msg = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
            ret->state = DFD_METADATA_CORRUPT;
            snprintf(ret->detail, sizeof(ret->detail), "%s", msg);
        } else {
            r = dfc_error_set(err, primary == SQLITE_FULL ? -ENOSPC : -EIO,
                              "check metadata `%s`: %s", path, msg);
        }
    }
    sqlite3_close(db);
    return r;
}

int dfd_metadata_checkpoint(struct dfd_metadata *md, struct dfc_error *err) {
    pthread_mutex_lock(&md->mu);
    int rc = sqlite3_wal_checkpoint_v2(md->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    int r = rc == SQLITE_OK ? 0 : dfd__md_error(md, err, "checkpoint");
    pthread_mutex_unlock(&md->mu);
    return r;
}

void dfd_metadata_close(struct dfd_metadata *md) {
    if (md == NULL) {
        return;
    }
    sqlite3_close(md->rdb);
    sqlite3_close(md->db);
    pthread_mutex_destroy(&md->rmu);
    pthread_mutex_destroy(&md->mu);
    free(md);
}

static int bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
    return s != NULL ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

int dfd_metadata_insert(struct dfd_metadata *md, const struct dfd_task_meta *t,
                        const struct dfd_piece_meta *pieces, struct dfc_error *err) {
    static const char task_sql[] =
        "INSERT INTO tasks (id, persistent, replica_count, tag, application, piece_length,"
        " content_length, piece_count, ttl_ns, created_at_ns, updated_at_ns, finished_at_ns,"
        " hard_linked, owner_uid, id_origin, peer_id, register_later, content_sha256, id_basis)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    static const char piece_sql[] = "INSERT INTO pieces (task_id, number, offset, length, digest,"
                                    " sha256) VALUES (?,?,?,?,?,?)";
    sqlite3_stmt *ts = NULL, *ps = NULL;
    int r = 0;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_exec(md->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "begin");
        goto out;
    }
    if (sqlite3_prepare_v2(md->db, task_sql, -1, &ts, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(md->db, piece_sql, -1, &ps, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto rollback;
    }
    sqlite3_bind_text(ts, 1, t->id, -1, SQLITE_STATIC);
    sqlite3_bind_int(ts, 2, t->persistent);
    sqlite3_bind_int64(ts, 3, (sqlite3_int64)t->replica_count);
    bind_text_or_null(ts, 4, t->tag);
    bind_text_or_null(ts, 5, t->application);
    sqlite3_bind_int64(ts, 6, (sqlite3_int64)t->piece_length);
    sqlite3_bind_int64(ts, 7, (sqlite3_int64)t->content_length);
    sqlite3_bind_int64(ts, 8, t->piece_count);
    sqlite3_bind_int64(ts, 9, t->ttl_ns);
    sqlite3_bind_int64(ts, 10, t->created_at_ns);
    sqlite3_bind_int64(ts, 11, t->updated_at_ns);
    sqlite3_bind_int64(ts, 12, t->finished_at_ns);
    sqlite3_bind_int(ts, 13, t->hard_linked);
    sqlite3_bind_int64(ts, 14, t->owner_uid);
    sqlite3_bind_text(ts, 15, origin_text(t->id_origin), -1, SQLITE_STATIC);
    sqlite3_bind_text(ts, 16, t->peer_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(ts, 17, t->register_later);
    sqlite3_bind_text(ts, 18, t->content_sha256, -1, SQLITE_STATIC);
    bind_text_or_null(ts, 19, t->id_basis);
    if (sqlite3_step(ts) != SQLITE_DONE) {
        r = sqlite3_extended_errcode(md->db) == SQLITE_CONSTRAINT_PRIMARYKEY
                ? dfc_error_set(err, -EEXIST, "task %s already exists", t->id)
                : dfd__md_error(md, err, "insert task");
        goto rollback;
    }
    for (uint32_t i = 0; i < t->piece_count; i++) {
        sqlite3_reset(ps);
        sqlite3_bind_text(ps, 1, t->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(ps, 2, pieces[i].number);
        sqlite3_bind_int64(ps, 3, (sqlite3_int64)pieces[i].offset);
        sqlite3_bind_int64(ps, 4, (sqlite3_int64)pieces[i].length);
        sqlite3_bind_text(ps, 5, pieces[i].digest, -1, SQLITE_STATIC);
        if (pieces[i].has_sha256) {
            sqlite3_bind_blob(ps, 6, pieces[i].sha256, DFC_SHA256_LEN, SQLITE_STATIC);
        } else {
            sqlite3_bind_null(ps, 6);
        }
        if (sqlite3_step(ps) != SQLITE_DONE) {
            r = dfd__md_error(md, err, "insert piece");
            goto rollback;
        }
    }
    if (sqlite3_exec(md->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "commit");
        goto rollback;
    }
    goto out;
rollback:
    (void)sqlite3_exec(md->db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_finalize(ts);
    sqlite3_finalize(ps);
    pthread_mutex_unlock(&md->mu);
    return r;
}

static char *dup_column(sqlite3_stmt *st, int i) {
    const unsigned char *s = sqlite3_column_text(st, i);
    return s != NULL ? strdup((const char *)s) : NULL;
}

static void read_task(sqlite3_stmt *st, struct dfd_task_meta *t) {
    memset(t, 0, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", (const char *)sqlite3_column_text(st, 0));
    t->persistent = sqlite3_column_int(st, 1) != 0;
    t->replica_count = (uint64_t)sqlite3_column_int64(st, 2);
    t->tag = dup_column(st, 3);
    t->application = dup_column(st, 4);
    t->piece_length = (uint64_t)sqlite3_column_int64(st, 5);
    t->content_length = (uint64_t)sqlite3_column_int64(st, 6);
    t->piece_count = (uint32_t)sqlite3_column_int64(st, 7);
    t->ttl_ns = sqlite3_column_int64(st, 8);
    t->created_at_ns = sqlite3_column_int64(st, 9);
    t->updated_at_ns = sqlite3_column_int64(st, 10);
    t->finished_at_ns = sqlite3_column_int64(st, 11);
    t->hard_linked = sqlite3_column_int(st, 12) != 0;
    t->owner_uid = (uint32_t)sqlite3_column_int64(st, 13);
    t->id_origin = origin_parse(sqlite3_column_text(st, 14));
    const unsigned char *peer = sqlite3_column_text(st, 15);
    snprintf(t->peer_id, sizeof(t->peer_id), "%s", peer != NULL ? (const char *)peer : "");
    t->register_later = sqlite3_column_int(st, 16) != 0;
    const unsigned char *sha = sqlite3_column_text(st, 17);
    snprintf(t->content_sha256, sizeof(t->content_sha256), "%s",
             sha != NULL ? (const char *)sha : "");
    t->id_basis = dup_column(st, 18);
}

#define TASK_COLUMNS                                                                               \
    "id, persistent, replica_count, tag, application, piece_length, content_length,"               \
    " piece_count, ttl_ns, created_at_ns, updated_at_ns, finished_at_ns, hard_linked,"             \
    " owner_uid, id_origin, peer_id, register_later, content_sha256, id_basis"

int dfd_metadata_get(struct dfd_metadata *md, const char *id, struct dfd_task_meta *ret,
                     struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        read_task(st, ret);
        r = 0;
    } else if (rc == SQLITE_DONE) {
        r = dfc_error_set(err, -ENOENT, "persistent cache task %s not found", id);
    } else {
        r = dfd__md_error(md, err, "select task");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_pieces(struct dfd_metadata *md, const char *id, struct dfd_piece_meta **ret,
                        size_t *ret_n, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    struct dfd_piece_meta *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(
            md->db,
            "SELECT number, offset, length, digest, sha256 FROM pieces WHERE task_id = ?"
            " ORDER BY number",
            -1, &st, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct dfd_piece_meta *g = realloc(v, cap * sizeof(*v));
            if (g == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
            v = g;
        }
        struct dfd_piece_meta *p = &v[n++];
        p->number = (uint32_t)sqlite3_column_int64(st, 0);
        p->offset = (uint64_t)sqlite3_column_int64(st, 1);
        p->length = (uint64_t)sqlite3_column_int64(st, 2);
        snprintf(p->digest, sizeof(p->digest), "%s", (const char *)sqlite3_column_text(st, 3));
        const void *sha = sqlite3_column_blob(st, 4);
        p->has_sha256 = sha != NULL && sqlite3_column_bytes(st, 4) == DFC_SHA256_LEN;
        if (p->has_sha256) {
            memcpy(p->sha256, sha, DFC_SHA256_LEN);
        }
    }
    if (rc != SQLITE_DONE) {
        r = dfd__md_error(md, err, "select pieces");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    if (r < 0) {
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int dfd_metadata_totals(struct dfd_metadata *md, uint64_t ret_tasks[2], uint64_t ret_bytes[2],
                        struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r = 0, rc;
    ret_tasks[0] = ret_tasks[1] = ret_bytes[0] = ret_bytes[1] = 0;
    pthread_mutex_lock(&md->rmu);
    if (sqlite3_prepare_v2(md->rdb,
                           "SELECT persistent != 0, COUNT(*), COALESCE(SUM(content_length), 0)"
                           " FROM tasks GROUP BY persistent != 0",
                           -1, &st, NULL) != SQLITE_OK) {
        r = conn_error(md->rdb, err, "prepare");
        goto out;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int k = sqlite3_column_int(st, 0) != 0;
        ret_tasks[k] = (uint64_t)sqlite3_column_int64(st, 1);
        ret_bytes[k] = (uint64_t)sqlite3_column_int64(st, 2);
    }
    if (rc != SQLITE_DONE) {
        r = conn_error(md->rdb, err, "count tasks");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->rmu);
    return r;
}

int dfd_metadata_list(struct dfd_metadata *md, struct dfd_task_meta **ret, size_t *ret_n,
                      struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    struct dfd_task_meta *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;
    pthread_mutex_lock(&md->rmu);
    if (sqlite3_prepare_v2(md->rdb, "SELECT " TASK_COLUMNS " FROM tasks ORDER BY updated_at_ns", -1,
                           &st, NULL) != SQLITE_OK) {
        r = conn_error(md->rdb, err, "prepare");
        goto out;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct dfd_task_meta *g = realloc(v, cap * sizeof(*v));
            if (g == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
            v = g;
        }
        read_task(st, &v[n++]);
    }
    if (rc != SQLITE_DONE) {
        r = conn_error(md->rdb, err, "select tasks");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->rmu);
    if (r < 0) {
        dfd_task_meta_list_free(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Runs one statement with a text id and up to two int64 parameters; returns changes(). */
static int exec_id(struct dfd_metadata *md, const char *sql, const char *id, int64_t a, int64_t b,
                   int n_ints, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, sql, -1, &st, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (n_ints > 0) {
        sqlite3_bind_int64(st, 2, a);
    }
    if (n_ints > 1) {
        sqlite3_bind_int64(st, 3, b);
    }
    r = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(md->db)
                                        : dfd__md_error(md, err, "update");
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_delete(struct dfd_metadata *md, const char *id, struct dfc_error *err) {
    int r = exec_id(md, "DELETE FROM tasks WHERE id = ?", id, 0, 0, 0, err);
    return r < 0 ? r : 0;
}

int dfd_metadata_delete_if(struct dfd_metadata *md, const char *id, int64_t created_at_ns,
                           int64_t updated_at_ns, char *ret_peer_id, size_t peer_size,
                           struct dfc_error *err) {
    const char *sql =
        updated_at_ns < 0
            ? "DELETE FROM tasks WHERE id = ?1 AND created_at_ns = ?2 RETURNING peer_id"
            : "DELETE FROM tasks WHERE id = ?1 AND created_at_ns = ?2 AND updated_at_ns = ?3"
              " RETURNING peer_id";
    sqlite3_stmt *st = NULL;
    int r = 0;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, sql, -1, &st, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, created_at_ns);
    if (updated_at_ns >= 0) {
        sqlite3_bind_int64(st, 3, updated_at_ns);
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *peer = sqlite3_column_text(st, 0);
        snprintf(ret_peer_id, peer_size, "%s", peer != NULL ? (const char *)peer : "");
        r = 1;
    }
    if (rc != SQLITE_DONE) {
        r = dfd__md_error(md, err, "delete");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_set_persistent(struct dfd_metadata *md, const char *id, bool persistent,
                                int64_t now_ns, struct dfc_error *err) {
    int r = exec_id(md, "UPDATE tasks SET persistent = ?2, updated_at_ns = ?3 WHERE id = ?1", id,
                    persistent, now_ns, 2, err);
    if (r == 0) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", id);
    }
    return r < 0 ? r : 0;
}

int dfd_metadata_set_registration(struct dfd_metadata *md, const char *id, int64_t created_at_ns,
                                  const char *expect, const char *peer_id, bool later,
                                  struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db,
                           "UPDATE tasks SET peer_id = ?3, register_later = ?4 WHERE id = ?1"
                           " AND created_at_ns = ?2 AND register_later = 1 AND peer_id = ?5",
                           -1, &st, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, created_at_ns);
    sqlite3_bind_text(st, 3, peer_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, later);
    sqlite3_bind_text(st, 5, expect, -1, SQLITE_STATIC);
    r = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(md->db)
                                        : dfd__md_error(md, err, "update");
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_touch(struct dfd_metadata *md, const char *id, int64_t now_ns,
                       struct dfc_error *err) {
    int r = exec_id(md, "UPDATE tasks SET updated_at_ns = ?2 WHERE id = ?1", id, now_ns, 0, 1, err);
    return r < 0 ? r : 0;
}

void dfd_task_meta_done(struct dfd_task_meta *t) {
    free(t->tag);
    free(t->application);
    free(t->id_basis);
    t->tag = t->application = t->id_basis = NULL;
}

void dfd_task_meta_list_free(struct dfd_task_meta *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dfd_task_meta_done(&list[i]);
    }
    free(list);
}
