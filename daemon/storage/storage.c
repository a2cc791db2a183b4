/*
 * storage.c - the persistent-cache storage engine (see storage.h for the contract).
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
 * dropped and the existing task returned.
 */
#include "storage.h"

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
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/id.h"

#define IO_CHUNK       ((size_t)4 << 20)
#define CONTENT_SUBDIR "content/persistent-cache-tasks"

struct dfd_storage {
    char *dir;
    char content_dir[PATH_MAX];
    char tmp_dir[PATH_MAX];
    struct dfd_metadata *md;
    pthread_mutex_t commit_mu;
};

/* ---- small file helpers ---- */

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. storage.dir is limited at
 * open so that every path built under it fits. */
static int pathf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int pathf(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int mkdir_p(const char *path, mode_t mode) {
    char buf[PATH_MAX];
    if (pathf(buf, sizeof(buf), "%s", path) < 0) {
        return -ENAMETOOLONG;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, mode) < 0 && errno != EEXIST) {
                return -errno;
            }
            *p = '/';
        }
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST) {
        return -errno;
    }
    return 0;
}

static int fsync_dir(const char *path) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        return -errno;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

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

static void task_path(const struct dfd_storage *s, const char *id, char *buf, size_t size) {
    (void)pathf(buf, size, "%s/%.3s/%s", s->content_dir, id, id);
}

/* ---- open and recovery ---- */

/* Deletes content files that have no row (a crash between rename and insert). */
static int sweep_orphans(struct dfd_storage *s, struct dfd_recovery *rec, struct dfc_error *err) {
    _cleanup_close_ int top_fd = open(s->content_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *top = top_fd >= 0 ? fdopendir(top_fd) : NULL;
    if (top == NULL) {
        return dfc_error_errno(err, -errno, "open `%s`", s->content_dir);
    }
    top_fd = -1; /* owned by top now */
    struct dirent *de;
    while ((de = readdir(top)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char shard[PATH_MAX];
        (void)pathf(shard, sizeof(shard), "%s/%s", s->content_dir, de->d_name);
        DIR *d = opendir(shard);
        if (d == NULL) {
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(d)) != NULL) {
            if (fe->d_name[0] == '.') {
                continue;
            }
            struct dfd_task_meta t;
            struct dfc_error e;
            if (dfd_task_id_valid(fe->d_name) && dfd_metadata_get(s->md, fe->d_name, &t, &e) == 0) {
                dfd_task_meta_done(&t);
                continue;
            }
            char path[PATH_MAX];
            (void)pathf(path, sizeof(path), "%s/%s", shard, fe->d_name);
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
        task_path(s, tasks[i].id, path, sizeof(path));
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size == tasks[i].content_length) {
            rec->tasks++;
            continue;
        }
        r = dfd_metadata_delete(s->md, tasks[i].id, err);
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
        (void)pathf(path, sizeof(path), "%s/%s", s->tmp_dir, de->d_name);
        if (rm_rf(path) == 0) {
            rec->temp_files++;
        }
    }
    closedir(d);
    return 0;
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
    (void)pathf(s->content_dir, sizeof(s->content_dir), "%s/" CONTENT_SUBDIR, s->dir);
    (void)pathf(s->tmp_dir, sizeof(s->tmp_dir), "%s/tmp", s->dir);
    char meta_dir[PATH_MAX];
    (void)pathf(meta_dir, sizeof(meta_dir), "%s/metadata", s->dir);
    int r = 0;
    if (!opts->keep) {
        /* Dragonfly's storage.keep=false: start from nothing. */
        char content_root[PATH_MAX];
        (void)pathf(content_root, sizeof(content_root), "%s/content", s->dir);
        if ((r = rm_rf(content_root)) < 0 || (r = rm_rf(meta_dir)) < 0) {
            dfc_error_errno(err, r, "clear `%s`", s->dir);
            goto fail;
        }
    }
    if ((r = mkdir_p(s->content_dir, 0755)) < 0 || (r = mkdir_p(s->tmp_dir, 0700)) < 0 ||
        (r = mkdir_p(meta_dir, 0700)) < 0) {
        dfc_error_errno(err, r, "create the storage directories under `%s`", s->dir);
        goto fail;
    }
    if ((r = dfd_metadata_open(meta_dir, &s->md, err)) < 0) {
        goto fail;
    }
    if ((r = empty_tmp(s, &rec)) < 0) {
        dfc_error_errno(err, r, "empty `%s`", s->tmp_dir);
        goto fail;
    }
    if ((r = sweep_orphans(s, &rec, err)) < 0 || (r = check_rows(s, &rec, err)) < 0) {
        goto fail;
    }
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
    free(s->dir);
    free(s);
}

const char *dfd_storage_dir(const struct dfd_storage *s) {
    return s->dir;
}

struct dfd_metadata *dfd_storage_metadata(struct dfd_storage *s) {
    return s->md;
}

/* ---- imports ---- */

/* The helper thread: CRC and spool write of the chunk the caller is SHA-ing. */
struct helper {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const void *buf;
    size_t len;
    bool busy, stop;
    int result;
    struct dfd_import *imp;
};

struct dfd_import {
    struct dfd_storage *s;
    struct dfd_import_params p;
    char *tag, *application, *content_for_id; /* owned copies */
    char tmp_path[PATH_MAX];
    int fd;      /* the spool, or -1 when the content is a hard link */
    bool linked; /* tmp_path is a hard link to the source file */
    struct dfd_digester dg;
    uint64_t written;
    uint64_t limit; /* the most bytes this import may write */
    struct helper *helper;
};

/* CRC plus spool write: the half of a feed that the helper thread may take. */
static int crc_and_write(struct dfd_import *imp, const void *buf, size_t len) {
    int r = dfd_digester_update_crc(&imp->dg, buf, len);
    if (r == 0 && imp->fd >= 0) {
        r = write_all(imp->fd, buf, len);
    }
    return r;
}

static void *helper_main(void *arg) {
    struct helper *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->busy && !h->stop) {
            pthread_cond_wait(&h->cv, &h->mu);
        }
        if (h->stop) {
            break;
        }
        pthread_mutex_unlock(&h->mu);
        int r = crc_and_write(h->imp, h->buf, h->len);
        pthread_mutex_lock(&h->mu);
        h->result = r;
        h->busy = false;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void helper_stop(struct dfd_import *imp) {
    struct helper *h = imp->helper;
    if (h == NULL) {
        return;
    }
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
    imp->helper = NULL;
}

/* Feeds one buffer: SHA here, CRC + write on the helper for large buffers. */
static int feed(struct dfd_import *imp, const void *buf, size_t len) {
    if (len < (64 << 10) || !imp->dg.p.hash_content) {
        dfd_digester_update_sha(&imp->dg, buf, len);
        return crc_and_write(imp, buf, len);
    }
    if (imp->helper == NULL) {
        struct helper *h = calloc(1, sizeof(*h));
        if (h == NULL) {
            return -ENOMEM;
        }
        h->imp = imp;
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->cv, NULL);
        if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
            pthread_mutex_destroy(&h->mu);
            pthread_cond_destroy(&h->cv);
            free(h);
            dfd_digester_update_sha(&imp->dg, buf, len); /* no thread: do both here */
            return crc_and_write(imp, buf, len);
        }
        imp->helper = h;
    }
    struct helper *h = imp->helper;
    pthread_mutex_lock(&h->mu);
    h->buf = buf;
    h->len = len;
    h->busy = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);

    dfd_digester_update_sha(&imp->dg, buf, len);

    pthread_mutex_lock(&h->mu);
    while (h->busy) {
        pthread_cond_wait(&h->cv, &h->mu);
    }
    int r = h->result;
    pthread_mutex_unlock(&h->mu);
    return r;
}

static char *dup_or_null(const char *s, bool *oom) {
    if (s == NULL) {
        return NULL;
    }
    char *d = strdup(s);
    if (d == NULL) {
        *oom = true;
    }
    return d;
}

static void import_free(struct dfd_import *imp) {
    helper_stop(imp);
    if (imp->fd >= 0) {
        (void)close(imp->fd);
    }
    dfd_digester_done(&imp->dg);
    free(imp->tag);
    free(imp->application);
    free(imp->content_for_id);
    free(imp);
}

void dfd_import_abort(struct dfd_import *imp) {
    if (imp == NULL) {
        return;
    }
    if (imp->tmp_path[0]) {
        (void)unlink(imp->tmp_path);
    }
    import_free(imp);
}

static int check_space(struct dfd_storage *s, uint64_t need, struct dfc_error *err) {
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

/* Allocates an import; creates no file yet. */
static int import_new(struct dfd_storage *s, const struct dfd_import_params *p,
                      struct dfd_import **ret, struct dfc_error *err) {
    struct dfd_import *imp = calloc(1, sizeof(*imp));
    if (imp == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    bool oom = false;
    imp->s = s;
    imp->fd = -1;
    imp->p = *p;
    imp->tag = dup_or_null(p->tag, &oom);
    imp->application = dup_or_null(p->application, &oom);
    imp->content_for_id = dup_or_null(p->content_for_id, &oom);
    imp->p.tag = imp->tag;
    imp->p.application = imp->application;
    imp->p.content_for_id = imp->content_for_id;
    struct dfd_digest_params dp = {.hash_content = p->content_for_id == NULL,
                                   .tag = imp->tag,
                                   .application = imp->application,
                                   .piece_length = p->piece_length};
    if (oom || dfd_digester_init(&imp->dg, &dp) < 0) {
        import_free(imp);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    char uuid[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(uuid);
    (void)pathf(imp->tmp_path, sizeof(imp->tmp_path), "%s/import-%s", s->tmp_dir, uuid);
    *ret = imp;
    return 0;
}

static int create_spool(struct dfd_import *imp, struct dfc_error *err) {
    imp->fd = open(imp->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (imp->fd < 0) {
        int r = dfc_error_errno(err, -errno, "create `%s`", imp->tmp_path);
        imp->tmp_path[0] = '\0';
        return r;
    }
    return 0;
}

/* Free bytes in the store now. */
static int free_space(struct dfd_storage *s, uint64_t *ret, struct dfc_error *err) {
    struct statvfs vfs;
    if (statvfs(s->dir, &vfs) < 0) {
        return dfc_error_errno(err, -errno, "statvfs `%s`", s->dir);
    }
    *ret = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 0;
}

int dfd_import_begin(struct dfd_storage *s, const struct dfd_import_params *p,
                     struct dfd_import **ret, struct dfc_error *err) {
    uint64_t avail = 0;
    if (p->expected_length >= 0) {
        int r = check_space(s, (uint64_t)p->expected_length, err);
        if (r < 0) {
            return r;
        }
    } else {
        int r = free_space(s, &avail, err);
        if (r < 0) {
            return r;
        }
    }
    struct dfd_import *imp;
    int r = import_new(s, p, &imp, err);
    if (r < 0) {
        return r;
    }
    /* A stream of unknown length may not outgrow the space that was free when it began. */
    imp->limit = p->expected_length >= 0 ? (uint64_t)p->expected_length : avail;
    if ((r = create_spool(imp, err)) < 0) {
        dfd_import_abort(imp);
        return r;
    }
    *ret = imp;
    return 0;
}

int dfd_import_write(struct dfd_import *imp, const void *buf, size_t len, struct dfc_error *err) {
    if (imp->p.expected_length >= 0 && imp->written + len > (uint64_t)imp->p.expected_length) {
        return dfc_error_set(err, -EFBIG, "more than the announced %lld content bytes",
                             (long long)imp->p.expected_length);
    }
    if (imp->limit > 0 && imp->written + len > imp->limit) {
        return dfc_error_set(err, -ENOSPC,
                             "the import outgrew the %llu bytes that were free in `%s` when it "
                             "began",
                             (unsigned long long)imp->limit, imp->s->dir);
    }
    int r = feed(imp, buf, len);
    if (r < 0) {
        return r == -ENOSPC || r == -EDQUOT
                   ? dfc_error_set(err, r, "no space left in `%s` while importing", imp->s->dir)
                   : dfc_error_errno(err, r, "spool an import into `%s`", imp->tmp_path);
    }
    imp->written += len;
    return 0;
}

uint64_t dfd_import_written(const struct dfd_import *imp) {
    return imp->written;
}

static int fill_task(struct dfd_import *imp, const struct dfd_digest_result *dr, const char *id,
                     int64_t now_ns, struct dfd_task_meta *t, struct dfd_piece_meta **ret_pieces,
                     struct dfc_error *err) {
    memset(t, 0, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", id);
    t->persistent = imp->p.persistent;
    t->replica_count = imp->p.replica_count;
    t->piece_length = dr->piece_length;
    t->content_length = dr->content_length;
    t->piece_count = dr->piece_count;
    t->ttl_ns = imp->p.ttl_ns;
    t->created_at_ns = t->updated_at_ns = t->finished_at_ns = now_ns;
    t->hard_linked = imp->linked;
    struct dfd_piece_meta *pieces = calloc(dr->piece_count ? dr->piece_count : 1, sizeof(*pieces));
    bool oom = pieces == NULL;
    t->tag = dup_or_null(imp->tag, &oom);
    t->application = dup_or_null(imp->application, &oom);
    if (oom) {
        free(pieces);
        dfd_task_meta_done(t);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < dr->piece_count; i++) {
        pieces[i].number = i;
        pieces[i].offset = (uint64_t)i * dr->piece_length;
        uint64_t left = dr->content_length - pieces[i].offset;
        pieces[i].length = left < dr->piece_length ? left : dr->piece_length;
        dfc_crc32_format(dr->piece_crcs[i], pieces[i].digest);
    }
    *ret_pieces = pieces;
    return 0;
}

int dfd_import_commit(struct dfd_import *imp, int64_t now_ns, struct dfd_task_meta *ret_task,
                      bool *ret_existed, struct dfc_error *err) {
    struct dfd_storage *s = imp->s;
    struct dfd_digest_result dr = {0};
    struct dfd_piece_meta *pieces = NULL;
    char id[DFD_TASK_ID_LEN + 1];
    char final[PATH_MAX], shard[PATH_MAX];
    bool locked = false, renamed = false;
    int r;

    helper_stop(imp);
    if (imp->p.expected_length >= 0 && imp->written != (uint64_t)imp->p.expected_length) {
        r = dfc_error_set(err, -EINVAL, "the import ended after %llu of %lld announced bytes",
                          (unsigned long long)imp->written, (long long)imp->p.expected_length);
        goto fail;
    }
    if ((r = dfd_digester_finish(&imp->dg, &dr)) < 0) {
        dfc_error_set(err, r, "out of memory");
        goto fail;
    }
    if (imp->content_for_id != NULL) {
        dfd_task_id_from_string(imp->content_for_id, id);
    } else {
        memcpy(id, dr.task_id, sizeof(id));
    }
    /* Durable content before it becomes reachable. */
    if (imp->fd < 0) {
        imp->fd = open(imp->tmp_path, O_RDONLY | O_CLOEXEC);
    }
    if (imp->fd < 0 || fsync(imp->fd) < 0) {
        r = dfc_error_errno(err, -errno, "fsync `%s`", imp->tmp_path);
        goto fail;
    }
    pthread_mutex_lock(&s->commit_mu);
    locked = true;
    struct dfc_error e;
    if (dfd_metadata_get(s->md, id, ret_task, &e) == 0) {
        *ret_existed = true;
        pthread_mutex_unlock(&s->commit_mu);
        dfd_digest_result_done(&dr);
        dfd_import_abort(imp);
        return 0;
    }
    (void)pathf(shard, sizeof(shard), "%s/%.3s", s->content_dir, id);
    task_path(s, id, final, sizeof(final));
    if (mkdir(shard, 0755) < 0 && errno != EEXIST) {
        r = dfc_error_errno(err, -errno, "create `%s`", shard);
        goto fail;
    }
    if (rename(imp->tmp_path, final) < 0) {
        r = dfc_error_errno(err, -errno, "rename into `%s`", final);
        goto fail;
    }
    renamed = true;
    imp->tmp_path[0] = '\0';
    if ((r = fsync_dir(shard)) < 0 || (r = fsync_dir(s->content_dir)) < 0) {
        dfc_error_errno(err, r, "fsync `%s`", shard);
        goto fail;
    }
    if ((r = fill_task(imp, &dr, id, now_ns, ret_task, &pieces, err)) < 0) {
        goto fail;
    }
    if ((r = dfd_metadata_insert(s->md, ret_task, pieces, err)) < 0) {
        dfd_task_meta_done(ret_task);
        goto fail;
    }
    pthread_mutex_unlock(&s->commit_mu);
    *ret_existed = false;
    free(pieces);
    dfd_digest_result_done(&dr);
    import_free(imp);
    return 0;
fail:
    if (renamed) {
        (void)unlink(final);
    }
    if (locked) {
        pthread_mutex_unlock(&s->commit_mu);
    }
    free(pieces);
    dfd_digest_result_done(&dr);
    dfd_import_abort(imp);
    return r;
}

int dfd_storage_import_fd(struct dfd_storage *s, const struct dfd_import_params *p, int fd,
                          int64_t now_ns, bool (*should_stop)(void *), void *arg,
                          struct dfd_task_meta *ret_task, bool *ret_existed,
                          struct dfc_error *err) {
    struct stat st;
    if (fstat(fd, &st) < 0) {
        return dfc_error_errno(err, -errno, "stat the source");
    }
    if (!S_ISREG(st.st_mode)) {
        return dfc_error_set(err, -EINVAL, "the source is not a regular file");
    }
    struct dfd_import_params q = *p;
    q.expected_length = st.st_size;
    struct dfd_import *imp;
    int r = import_new(s, &q, &imp, err);
    if (r < 0) {
        return r;
    }
    /* Link exactly the file that was opened (not whatever the path names now). */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, self, AT_FDCWD, imp->tmp_path, AT_SYMLINK_FOLLOW) == 0) {
        imp->linked = true;
    } else if ((r = check_space(s, (uint64_t)st.st_size, err)) < 0 ||
               (r = create_spool(imp, err)) < 0) {
        dfd_import_abort(imp);
        return r;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint8_t *buf = malloc(IO_CHUNK);
    if (buf == NULL) {
        dfd_import_abort(imp);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (;;) {
        if (should_stop != NULL && should_stop(arg)) {
            r = dfc_error_set(err, -ECANCELED, "the import was cancelled");
            break;
        }
        ssize_t n = pread(fd, buf, IO_CHUNK, (off_t)imp->written);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            r = dfc_error_errno(err, -errno, "read the source");
            break;
        }
        if (n == 0) {
            break;
        }
        if ((r = dfd_import_write(imp, buf, (size_t)n, err)) < 0) {
            if (r == -EFBIG) {
                dfc_error_set(err, -EAGAIN, "the source grew while it was being imported");
            }
            break;
        }
    }
    free(buf);
    if (r < 0) {
        dfd_import_abort(imp);
        return r;
    }
    if (imp->written != (uint64_t)st.st_size) {
        dfd_import_abort(imp);
        return dfc_error_set(err, -EAGAIN, "the source shrank while it was being imported");
    }
    return dfd_import_commit(imp, now_ns, ret_task, ret_existed, err);
}

/* ---- lookups, delete, export ---- */

int dfd_storage_get(struct dfd_storage *s, const char *id, struct dfd_task_meta *ret,
                    struct dfc_error *err) {
    return dfd_metadata_get(s->md, id, ret, err);
}

int dfd_storage_open_content(struct dfd_storage *s, const char *id, int *ret_fd,
                             struct dfc_error *err) {
    char path[PATH_MAX];
    task_path(s, id, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "open the content of task %s", id);
    }
    *ret_fd = fd;
    return 0;
}

int dfd_storage_delete(struct dfd_storage *s, const char *id, struct dfc_error *err) {
    int r = dfd_metadata_delete(s->md, id, err);
    if (r < 0) {
        return r;
    }
    char path[PATH_MAX];
    task_path(s, id, path, sizeof(path));
    if (unlink(path) < 0 && errno != ENOENT) {
        return dfc_error_errno(err, -errno, "remove `%s`", path);
    }
    return 0;
}

/* Copies all of in_fd to out_fd in the kernel (reflinks where the filesystem can). */
static int copy_fd(int in_fd, int out_fd, uint64_t len) {
    loff_t in_off = 0, out_off = 0;
    while ((uint64_t)in_off < len) {
        ssize_t n = copy_file_range(in_fd, &in_off, out_fd, &out_off, len - (uint64_t)in_off, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS) && in_off == 0) {
            break; /* fall back to read/write below */
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
    }
    if ((uint64_t)in_off == len) {
        return 0;
    }
    uint8_t *buf = malloc(IO_CHUNK);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int r = 0;
    while ((uint64_t)in_off < len && r == 0) {
        ssize_t n = pread(in_fd, buf, IO_CHUNK, in_off);
        if (n <= 0) {
            r = n < 0 ? -errno : -EIO;
            break;
        }
        r = write_all(out_fd, buf, (size_t)n);
        in_off += n;
    }
    free(buf);
    return r;
}

int dfd_storage_export_to_path(struct dfd_storage *s, const char *id,
                               const struct dfd_export_target *t, bool *ret_linked,
                               struct dfc_error *err) {
    char src[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX];
    task_path(s, id, src, sizeof(src));
    const char *out = t->output_path;
    const char *slash = strrchr(out, '/');
    if (slash == NULL || slash[1] == '\0') {
        return dfc_error_set(err, -EINVAL, "output_path `%s` does not name a file", out);
    }
    (void)pathf(dir, sizeof(dir), "%.*s", slash == out ? 1 : (int)(slash - out), out);

    struct stat src_st, out_st;
    if (stat(src, &src_st) < 0) {
        return dfc_error_errno(err, -errno, "stat the content of task %s", id);
    }
    if (lstat(out, &out_st) == 0) {
        if (out_st.st_dev == src_st.st_dev && out_st.st_ino == src_st.st_ino) {
            *ret_linked = true;
            return 0; /* already this very content */
        }
        if (!t->overwrite) {
            return dfc_error_set(err, -EEXIST, "output_path `%s` already exists", out);
        }
        if (S_ISDIR(out_st.st_mode)) {
            return dfc_error_set(err, -EISDIR, "output_path `%s` is a directory", out);
        }
    }
    char uuid[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(uuid);
    if (pathf(tmp, sizeof(tmp), "%s/.dfcache-%s", dir, uuid) < 0) {
        return dfc_error_set(err, -ENAMETOOLONG, "output_path `%s` is too long", out);
    }
    /* A hard link shares the cached inode: read-only for everyone but its owner. */
    if (link(src, tmp) == 0) {
        if (rename(tmp, out) < 0) {
            int r = dfc_error_errno(err, -errno, "rename onto `%s`", out);
            (void)unlink(tmp);
            return r;
        }
        *ret_linked = true;
        return 0;
    }
    if (t->force_hard_link) {
        return dfc_error_errno(err, -errno == -EXDEV ? -EXDEV : -errno,
                               "cannot hard link task %s to `%s` (force_hard_link)", id, out);
    }
    _cleanup_close_ int in_fd = open(src, O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) {
        return dfc_error_errno(err, -errno, "open the content of task %s", id);
    }
    _cleanup_close_ int out_fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out_fd < 0) {
        return dfc_error_errno(err, -errno, "create a file in `%s`", dir);
    }
    int r = copy_fd(in_fd, out_fd, (uint64_t)src_st.st_size);
    if (r == 0 && t->owner_uid != (uid_t)-1 && fchown(out_fd, t->owner_uid, t->owner_gid) < 0) {
        r = -errno;
    }
    if (r == 0 && fsync(out_fd) < 0) {
        r = -errno;
    }
    if (r == 0 && rename(tmp, out) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlink(tmp);
        return r == -ENOSPC || r == -EDQUOT
                   ? dfc_error_set(err, r, "no space left writing `%s`", out)
                   : dfc_error_errno(err, r, "copy task %s to `%s`", id, out);
    }
    *ret_linked = false;
    return 0;
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
