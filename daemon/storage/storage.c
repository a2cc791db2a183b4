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
 * dropped and the existing task returned.
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
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/fs.h"

#define CONTENT_SUBDIR "content/persistent-cache-tasks"

/* ---- small file helpers ---- */

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. storage.dir is limited at
 * open so that every path built under it fits. */
int dfd__pathf(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dfd__fsync_dir(const char *path) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        return -errno;
    }
    return 0;
}

int dfd__write_all(int fd, const void *buf, size_t len) {
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

void dfd__task_path(const struct dfd_storage *s, const char *id, char *buf, size_t size) {
    (void)dfd__pathf(buf, size, "%s/%.3s/%s", s->content_dir, id, id);
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
        (void)dfd__pathf(shard, sizeof(shard), "%s/%s", s->content_dir, de->d_name);
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
            (void)dfd__pathf(path, sizeof(path), "%s/%s", shard, fe->d_name);
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
        (void)dfd__pathf(path, sizeof(path), "%s/%s", s->tmp_dir, de->d_name);
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
    (void)dfd__pathf(s->content_dir, sizeof(s->content_dir), "%s/" CONTENT_SUBDIR, s->dir);
    (void)dfd__pathf(s->tmp_dir, sizeof(s->tmp_dir), "%s/tmp", s->dir);
    char meta_dir[PATH_MAX];
    (void)dfd__pathf(meta_dir, sizeof(meta_dir), "%s/metadata", s->dir);
    int r = 0;
    if (!opts->keep) {
        /* Dragonfly's storage.keep=false: start from nothing. */
        char content_root[PATH_MAX];
        (void)dfd__pathf(content_root, sizeof(content_root), "%s/content", s->dir);
        if ((r = rm_rf(content_root)) < 0 || (r = rm_rf(meta_dir)) < 0) {
            dfc_error_errno(err, r, "clear `%s`", s->dir);
            goto fail;
        }
    }
    if ((r = dfc_mkdir_p(s->content_dir, 0755)) < 0 || (r = dfc_mkdir_p(s->tmp_dir, 0700)) < 0 ||
        (r = dfc_mkdir_p(meta_dir, 0700)) < 0) {
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

/* ---- lookups, delete ---- */

int dfd_storage_get(struct dfd_storage *s, const char *id, struct dfd_task_meta *ret,
                    struct dfc_error *err) {
    return dfd_metadata_get(s->md, id, ret, err);
}

int dfd_storage_open_content(struct dfd_storage *s, const char *id, int *ret_fd,
                             struct dfc_error *err) {
    char path[PATH_MAX];
    dfd__task_path(s, id, path, sizeof(path));
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
    dfd__task_path(s, id, path, sizeof(path));
    if (unlink(path) < 0 && errno != ENOENT) {
        return dfc_error_errno(err, -errno, "remove `%s`", path);
    }
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
