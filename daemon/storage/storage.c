/*
 * storage.c - the persistent-cache storage engine (see storage.h for the contract).
 *
 * The import engine is in import.c.
 *
 * DESIGN
 *
 * One read pass. Every import, by path or by stream, feeds its bytes once through a
 * dfd_digester (SHA-256 task id + CRC-32 per piece). The SHA runs on the calling thread while
 * a per-import helper thread runs the CRC and the spool write over the same buffer, so an
 * import costs about one SHA-256 pass; the two halves touch disjoint digester state.
 *
 * Commit. Spool in tmp/ -> fsync -> rename into content/ -> fsync the directory -> insert
 * the metadata row. Under commit_mu an existing row with the same id wins: the new spool is
 * dropped and the existing task returned, if it holds the same bytes (import.c,
 * check_same_content); else the import fails with -EEXIST.
 *
 * Modes. The cache is shared by every socket caller, but only through the daemon: content
 * files are 0600 and the content directories 0700, so nobody reads or links them behind the
 * daemon's back (the socket's mode and group decide who is a caller). Stores made by older
 * versions (0755 directories, 0644 files) are fixed at open; hard-linked content keeps its
 * mode (it is the importer's own, daemon-owned, read-only inode).
 *
 * Never destroy what cannot be read. Recovery deletes content only on a definite answer: a
 * content file goes when the database, checked healthy, says "no such row"; a row goes when its
 * content is missing or of the wrong size. Before anything is deleted, open checks the database
 * (check_store): missing, empty (0 bytes with no WAL), without the schema, or failing PRAGMA
 * quick_check, while content files are present, open refuses and changes nothing; a corrupt
 * database refuses even with no content. Any other metadata error during recovery aborts the
 * open the same way. Only opts->discard_broken (dfdaemon --discard-broken-store) lets open
 * move the database aside (metadata/pcache.db.broken, with its WAL as pcache.db.broken-wal),
 * delete the content and start empty, reporting counts in struct dfd_recovery. A database
 * that is healthy but holds no rows is not broken: its content files are orphans of imports
 * that crashed before their commit, and are swept.
 *
 * Deleting on a full disk. A DELETE appends to the WAL, which needs free blocks. The store
 * keeps a RESERVE_BYTES file, metadata/reserve, fallocated whenever at least twice that is
 * free (at open, after every delete, at every GC pass). A delete that fails with -ENOSPC
 * unlinks the reserve and retries; if that is still not enough, it checkpoints and truncates
 * the WAL and retries once more. The order stays row first, content second, so a crash
 * mid-delete leaves the whole task or nothing, as before.
 */
#include "storage.h"
#include "storage_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/fs.h"

#define CONTENT_SUBDIR "content/persistent-cache-tasks"

/* Released when a delete finds the disk full; see DESIGN. */
#define RESERVE_BYTES ((off_t)1 << 20)

/* ---- small file helpers ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag == FTW_DP) {
        return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
    }
    return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Removes path and everything below it; fine when absent. */
static int rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

/* ---- open and recovery ---- */

/* Deletes content files that have no row (a crash between rename and insert). */
static int sweep_orphans(struct dfd_storage *s, struct dfd_recovery *rec, struct dfc_error *err) {
    _cleanup_close_ int top_fd = open(s->content_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *top = top_fd >= 0 ? fdopendir(top_fd) : NULL;
    if (top == NULL) {
        return dfc_error_errno(err, -errno, "open `%s`", s->content_dir);
    }
    (void)dfc_steal_fd(&top_fd); /* owned by top now */
    struct dirent *de;
    while ((de = readdir(top)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char shard[PATH_MAX];
        (void)dfd__pathf(shard, sizeof(shard), "%s/%s", s->content_dir, de->d_name);
        (void)chmod(shard, 0700); /* older versions made them 0755 */
        DIR *d = opendir(shard);
        if (d == NULL) {
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(d)) != NULL) {
            if (fe->d_name[0] == '.') {
                continue;
            }
            char path[PATH_MAX];
            (void)dfd__pathf(path, sizeof(path), "%s/%s", shard, fe->d_name);
            if (dfd_task_id_valid(fe->d_name)) {
                struct dfd_task_meta t;
                struct dfc_error e;
                int r = dfd_metadata_get(s->md, fe->d_name, &t, &e);
                if (r == 0) {
                    dfd_task_meta_done(&t);
                    continue;
                }
                if (r != -ENOENT) {
                    /* Only a definite "no such row" makes content an orphan. */
                    closedir(d);
                    closedir(top);
                    return dfc_error_set(err, r,
                                         "storage recovery cannot tell whether `%s` has a "
                                         "metadata row (%s); nothing more was deleted",
                                         path, e.msg);
                }
            }
            if (rm_rf(path) == 0) {
                rec->orphan_files++;
            }
        }
        closedir(d);
        (void)rmdir(shard); /* only succeeds when empty */
    }
    closedir(top);
    return 0;
}

/* Deletes rows whose content is missing or of the wrong size. */
static int check_rows(struct dfd_storage *s, struct dfd_recovery *rec, struct dfc_error *err) {
    struct dfd_task_meta *tasks;
    size_t n;
    int r = dfd_metadata_list(s->md, &tasks, &n, err);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        char path[PATH_MAX];
        struct stat st;
        dfd__task_path(s, tasks[i].id, path, sizeof(path));
        int sr = stat(path, &st);
        if (sr == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == tasks[i].content_length) {
            /* 0444: a pinned task's (pins.h); nothing older made that mode. */
            if (!tasks[i].hard_linked && (st.st_mode & 07177) != 0 &&
                (st.st_mode & 07777) != 0444) {
                (void)chmod(path, 0600); /* made by an older version, 0644 */
            }
            rec->tasks++;
            continue;
        }
        if (sr < 0 && errno != ENOENT) {
            r = dfc_error_errno(
                err, -errno, "storage recovery cannot stat `%s`; nothing more was deleted", path);
            break;
        }
        if ((r = dfd_metadata_delete(s->md, tasks[i].id, err)) < 0) {
            break; /* the row stays, and so does whatever content there is */
        }
        (void)unlink(path);
        rec->broken_rows++;
    }
    dfd_task_meta_list_free(tasks, n);
    return r;
}

static int empty_tmp(struct dfd_storage *s, struct dfd_recovery *rec) {
    DIR *d = opendir(s->tmp_dir);
    if (d == NULL) {
        return -errno;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        char path[PATH_MAX];
        (void)dfd__pathf(path, sizeof(path), "%s/%s", s->tmp_dir, de->d_name);
        if (rm_rf(path) == 0) {
            rec->temp_files++;
        }
    }
    closedir(d);
    return 0;
}

/* Files below the content directory, counted by count_entry (nftw has no user pointer). */
static _Thread_local unsigned count_files;
static _Thread_local uint64_t count_bytes;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)path;
    (void)ftw;
    if (flag != FTW_D && flag != FTW_DP && flag != FTW_DNR) {
        count_files++;
        count_bytes += (uint64_t)st->st_size;
    }
    return 0;
}

static int count_content(const char *dir, unsigned *ret_files, uint64_t *ret_bytes) {
    count_files = 0;
    count_bytes = 0;
    if (nftw(dir, count_entry, 16, FTW_PHYS) < 0) {
        return -errno;
    }
    *ret_files = count_files;
    *ret_bytes = count_bytes;
    return 0;
}

static bool file_has_bytes(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

/* Moves <meta_dir>/pcache.db and its WAL aside as pcache.db.broken(-wal); drops the -shm. */
static int move_db_aside(const char *meta_dir) {
    static const char *const from[] = {"pcache.db", "pcache.db-wal"};
    static const char *const to[] = {"pcache.db.broken", "pcache.db.broken-wal"};
    char a[PATH_MAX], b[PATH_MAX];
    bool moved_db = false;
    for (size_t i = 0; i < 2; i++) {
        (void)dfd__pathf(a, sizeof(a), "%s/%s", meta_dir, from[i]);
        (void)dfd__pathf(b, sizeof(b), "%s/%s", meta_dir, to[i]);
        if (rename(a, b) == 0) {
            moved_db = moved_db || i == 0;
            continue;
        }
        if (errno != ENOENT) {
            return -errno;
        }
        /* No WAL: none may stay beside the new copy; no database: an earlier copy stays. */
        if (i == 1 && moved_db && unlink(b) < 0 && errno != ENOENT) {
            return -errno;
        }
    }
    (void)dfd__pathf(a, sizeof(a), "%s/pcache.db-shm", meta_dir);
    if (unlink(a) < 0 && errno != ENOENT) {
        return -errno;
    }
    return dfd__fsync_dir(meta_dir);
}

/* Decides, before anything is deleted, whether the database can be trusted (see DESIGN). */
static int check_store(struct dfd_storage *s, const char *meta_dir, bool discard,
                       struct dfd_recovery *rec, struct dfc_error *err) {
    char db[PATH_MAX], wal[PATH_MAX];
    (void)dfd__pathf(db, sizeof(db), "%s/pcache.db", meta_dir);
    (void)dfd__pathf(wal, sizeof(wal), "%s/pcache.db-wal", meta_dir);
    struct dfd_metadata_health h = {.state = DFD_METADATA_OK};
    const char *reason = NULL;
    char what[256];
    struct stat st;
    int r;
    if (stat(db, &st) < 0) {
        if (errno != ENOENT) {
            return dfc_error_errno(err, -errno, "storage: stat `%s`", db);
        }
        reason = "missing";
        snprintf(what, sizeof(what), "is missing");
    } else if (st.st_size == 0 && !file_has_bytes(wal)) {
        reason = "empty";
        snprintf(what, sizeof(what), "is empty (0 bytes)");
    } else {
        if ((r = dfd_metadata_check(meta_dir, &h, err)) < 0) {
            return r;
        }
        if (h.state == DFD_METADATA_CORRUPT) {
            reason = "corrupt";
            snprintf(what, sizeof(what), "is corrupt (%s)", h.detail);
        } else if (h.state == DFD_METADATA_NO_SCHEMA) {
            reason = "no-schema";
            snprintf(what, sizeof(what), "has no schema (%s)", h.detail);
        }
    }
    if (reason == NULL) {
        return 0;
    }
    unsigned files = 0;
    uint64_t bytes = 0;
    if ((r = count_content(s->content_dir, &files, &bytes)) < 0) {
        return dfc_error_errno(err, r, "storage: count the files in `%s`", s->content_dir);
    }
    if (files == 0 && h.state != DFD_METADATA_CORRUPT) {
        /* Nothing to lose: a first start. A WAL left without its database must not be
         * replayed into the new one. */
        char shm[PATH_MAX];
        (void)dfd__pathf(shm, sizeof(shm), "%s/pcache.db-shm", meta_dir);
        if (h.state == DFD_METADATA_OK &&
            ((unlink(wal) < 0 && errno != ENOENT) || (unlink(shm) < 0 && errno != ENOENT))) {
            return dfc_error_errno(err, -errno, "storage: remove the stale WAL in `%s`", meta_dir);
        }
        return 0;
    }
    if (!discard) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "storage: the metadata database `%s` %s, and %u content files "
                             "(%llu bytes) are in `%s`; nothing was changed. Start dfdaemon "
                             "with --discard-broken-store to move the database aside, delete "
                             "that content and start empty",
                             db, what, files, (unsigned long long)bytes, s->content_dir);
    }
    if ((r = move_db_aside(meta_dir)) < 0) {
        return dfc_error_errno(err, r, "storage: move the broken database `%s` aside", db);
    }
    if ((r = rm_rf(s->content_dir)) < 0 || (r = dfc_mkdir_p(s->content_dir, 0700)) < 0) {
        return dfc_error_errno(err, r, "storage: discard the content in `%s`", s->content_dir);
    }
    rec->discarded_reason = reason;
    rec->discarded_files = files;
    rec->discarded_bytes = bytes;
    return 0;
}

/* ---- the space reserve ---- */

void dfd_storage_ensure_reserve(struct dfd_storage *s) {
    pthread_mutex_lock(&s->reserve_mu);
    struct stat st;
    struct statvfs v;
    if (stat(s->reserve_path, &st) == 0 && st.st_size == RESERVE_BYTES) {
        goto out; /* in place */
    }
    if (statvfs(s->meta_dir, &v) < 0 || (uint64_t)v.f_bavail * v.f_frsize < 2 * RESERVE_BYTES) {
        goto out; /* no room yet; tried again later */
    }
    int fd = open(s->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        goto out;
    }
    int e = posix_fallocate(fd, 0, RESERVE_BYTES);
    if (e == 0 && fsync(fd) < 0) {
        e = errno;
    }
    close(fd);
    if (e != 0) {
        (void)unlink(s->reserve_path);
    }
out:
    pthread_mutex_unlock(&s->reserve_mu);
}

static void release_reserve(struct dfd_storage *s) {
    pthread_mutex_lock(&s->reserve_mu);
    (void)unlink(s->reserve_path);
    pthread_mutex_unlock(&s->reserve_mu);
}

/* The registry of shared replicas (sharing.c): its lock and its CLOCK_MONOTONIC condition. */
static void share_init(struct dfd_storage *s) {
    pthread_mutex_init(&s->share_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->share_cv, &ca);
    pthread_condattr_destroy(&ca);
}

int dfd_storage_open(const struct dfd_storage_opts *opts, struct dfd_storage **ret,
                     struct dfd_recovery *ret_recovery, struct dfc_error *err) {
    struct dfd_recovery rec = {0};
    if (opts->dir == NULL || opts->dir[0] != '/') {
        return dfc_error_set(err, -EINVAL, "storage.dir must be an absolute path");
    }
    if (strlen(opts->dir) > PATH_MAX - 256) {
        return dfc_error_set(err, -ENAMETOOLONG, "storage.dir is longer than %d bytes",
                             PATH_MAX - 256);
    }
    struct dfd_storage *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->dir = strdup(opts->dir)) == NULL) {
        free(s);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->commit_mu, NULL);
    pthread_mutex_init(&s->reserve_mu, NULL);
    pthread_mutex_init(&s->pin_mu, NULL);
    share_init(s);
    s->unsafe_shared_inode_imports = opts->unsafe_shared_inode_imports;
    s->max_tasks = opts->max_tasks != 0 ? opts->max_tasks : DFD_STORAGE_MAX_TASKS_DEFAULT;
    (void)dfd__pathf(s->content_dir, sizeof(s->content_dir), "%s/" CONTENT_SUBDIR, s->dir);
    (void)dfd__pathf(s->tmp_dir, sizeof(s->tmp_dir), "%s/tmp", s->dir);
    (void)dfd__pathf(s->meta_dir, sizeof(s->meta_dir), "%s/metadata", s->dir);
    (void)dfd__pathf(s->volumes_dir, sizeof(s->volumes_dir), "%s/volumes", s->dir);
    (void)dfd__pathf(s->reserve_path, sizeof(s->reserve_path), "%s/metadata/reserve", s->dir);
    const char *meta_dir = s->meta_dir;
    char content_root[PATH_MAX];
    (void)dfd__pathf(content_root, sizeof(content_root), "%s/content", s->dir);
    int r = 0;
    if (!opts->keep) {
        /* Dragonfly's storage.keep=false: start from nothing. */
        if ((r = rm_rf(content_root)) < 0 || (r = rm_rf(meta_dir)) < 0) {
            dfc_error_errno(err, r, "clear `%s`", s->dir);
            goto fail;
        }
    }
    if ((r = dfc_mkdir_p(s->content_dir, 0700)) < 0 || (r = dfc_mkdir_p(s->tmp_dir, 0700)) < 0 ||
        (r = dfc_mkdir_p(meta_dir, 0700)) < 0) {
        dfc_error_errno(err, r, "create the storage directories under `%s`", s->dir);
        goto fail;
    }
    /* Stores made by older versions have 0755 content directories (the shards: below). */
    if (chmod(content_root, 0700) < 0 || chmod(s->content_dir, 0700) < 0) {
        r = dfc_error_errno(err, -errno, "chmod the content directories under `%s`", s->dir);
        goto fail;
    }
    if ((r = check_store(s, meta_dir, opts->discard_broken, &rec, err)) < 0 ||
        (r = dfd_metadata_open(meta_dir, &s->md, err)) < 0) {
        goto fail;
    }
    if ((r = empty_tmp(s, &rec)) < 0) {
        dfc_error_errno(err, r, "empty `%s`", s->tmp_dir);
        goto fail;
    }
    if ((r = sweep_orphans(s, &rec, err)) < 0 || (r = check_rows(s, &rec, err)) < 0 ||
        (r = dfd__pins_recover(s, &rec, err)) < 0) {
        goto fail;
    }
    dfd_storage_ensure_reserve(s);
    if (ret_recovery != NULL) {
        *ret_recovery = rec;
    }
    *ret = s;
    return 0;
fail:
    dfd_storage_close(s);
    return r;
}

void dfd_storage_close(struct dfd_storage *s) {
    if (s == NULL) {
        return;
    }
    dfd_metadata_close(s->md);
    pthread_mutex_destroy(&s->commit_mu);
    pthread_mutex_destroy(&s->reserve_mu);
    pthread_mutex_destroy(&s->pin_mu);
    pthread_cond_destroy(&s->share_cv);
    pthread_mutex_destroy(&s->share_mu);
    free(s->dir);
    free(s);
}

const char *dfd_storage_dir(const struct dfd_storage *s) {
    return s->dir;
}

/* ---- lookups, delete ---- */

int dfd_storage_get(struct dfd_storage *s, const char *id, struct dfd_task_meta *ret,
                    struct dfc_error *err) {
    return dfd_metadata_get(s->md, id, ret, err);
}

int dfd_storage_list(struct dfd_storage *s, struct dfd_task_meta **ret, size_t *ret_n,
                     struct dfc_error *err) {
    return dfd_metadata_list(s->md, ret, ret_n, err);
}

int dfd_storage_pieces(struct dfd_storage *s, const char *id, struct dfd_piece_meta **ret,
                       size_t *ret_n, struct dfc_error *err) {
    return dfd_metadata_pieces(s->md, id, ret, ret_n, err);
}

int dfd_storage_touch(struct dfd_storage *s, const char *id, int64_t now_ns,
                      struct dfc_error *err) {
    return dfd_metadata_touch(s->md, id, now_ns, err);
}

int dfd_storage_set_persistent(struct dfd_storage *s, const char *id, bool persistent,
                               int64_t now_ns, struct dfc_error *err) {
    return dfd_metadata_set_persistent(s->md, id, persistent, now_ns, err);
}

int dfd_storage_set_registration(struct dfd_storage *s, const struct dfd_task_meta *t,
                                 const char *expect, const char *peer_id, bool later,
                                 struct dfc_error *err) {
    return dfd_metadata_set_registration(s->md, t->id, t->created_at_ns, expect, peer_id, later,
                                         err);
}

/* The row (all of it, or only while it is still *expect), then the content; under commit_mu,
 * which every import commit holds from its existence check to its insert. */
static int delete_locked(struct dfd_storage *s, const char *id, struct dfd_task_meta *expect,
                         bool same_use, bool *ret_deleted, struct dfc_error *err) {
    int64_t created = expect != NULL ? expect->created_at_ns : 0;
    int64_t updated = expect != NULL && same_use ? expect->updated_at_ns : -1;
    int r = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        r = expect != NULL ? dfd_metadata_delete_if(s->md, id, created, updated, expect->peer_id,
                                                    sizeof(expect->peer_id), err)
                           : dfd_metadata_delete(s->md, id, err);
        if (r != -ENOSPC) {
            break;
        }
        /* The disk is full and the WAL cannot grow: give it the reserve, then the blocks of
         * the WAL itself, folded into the database. */
        if (attempt == 0) {
            release_reserve(s);
        } else if (dfd_metadata_checkpoint(s->md, NULL) < 0) {
            break;
        }
    }
    if (r < 0) {
        return r;
    }
    *ret_deleted = expect == NULL || r > 0;
    if (!*ret_deleted) {
        return 0; /* gone already, or another import's row now: its content stays */
    }
    char path[PATH_MAX];
    dfd__task_path(s, id, path, sizeof(path));
    if (unlink(path) < 0 && errno != ENOENT) {
        return dfc_error_errno(err, -errno, "remove `%s`", path);
    }
    return 0;
}

int dfd_storage_delete(struct dfd_storage *s, const char *id, struct dfc_error *err) {
    bool deleted;
    pthread_mutex_lock(&s->commit_mu);
    int r = delete_locked(s, id, NULL, false, &deleted, err);
    pthread_mutex_unlock(&s->commit_mu);
    if (r == 0) {
        dfd_storage_ensure_reserve(s);
    }
    return r;
}

int dfd_storage_delete_task(struct dfd_storage *s, struct dfd_task_meta *t, bool same_use,
                            bool *ret_deleted, struct dfc_error *err) {
    pthread_mutex_lock(&s->commit_mu);
    int r = delete_locked(s, t->id, t, same_use, ret_deleted, err);
    pthread_mutex_unlock(&s->commit_mu);
    if (r == 0) {
        dfd_storage_ensure_reserve(s);
    }
    return r;
}

int dfd_storage_evict_task(struct dfd_storage *s, struct dfd_task_meta *t, bool same_use,
                           bool *ret_deleted, struct dfc_error *err) {
    pthread_mutex_lock(&s->commit_mu);
    int r = dfd__task_pinned(s, t->id, err);
    if (r > 0) {
        *ret_deleted = false;
        r = 0;
    } else if (r == 0) {
        r = delete_locked(s, t->id, t, same_use, ret_deleted, err);
    }
    pthread_mutex_unlock(&s->commit_mu);
    if (r == 0 && *ret_deleted) {
        dfd_storage_ensure_reserve(s);
    }
    return r;
}

int dfd_storage_check_writable(struct dfd_storage *s, struct dfc_error *err) {
    const char *dirs[] = {s->dir, s->content_dir, s->tmp_dir, s->meta_dir};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (faccessat(AT_FDCWD, dirs[i], W_OK | X_OK, AT_EACCESS) < 0) {
            return dfc_error_errno(err, -errno, "store directory `%s` is not writable", dirs[i]);
        }
    }
    return 0;
}

int dfd_storage_totals(struct dfd_storage *s, struct dfd_storage_totals *ret,
                       struct dfc_error *err) {
    return dfd_metadata_totals(s->md, ret->tasks, ret->bytes, err);
}

int dfd_storage_content_bytes(struct dfd_storage *s, uint64_t *ret, struct dfc_error *err) {
    struct dfd_task_meta *tasks;
    size_t n;
    int r = dfd_metadata_list(s->md, &tasks, &n, err);
    if (r < 0) {
        return r;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += tasks[i].content_length;
    }
    dfd_task_meta_list_free(tasks, n);
    *ret = sum;
    return 0;
}
