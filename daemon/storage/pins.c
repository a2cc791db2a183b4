/*
 * pins.c - the pins of content volumes (pins.h): the volumes/<pin_id>/ directories of hard links
 * to the store's content inodes, their rows (pin_meta.c), and their recovery at open.
 */
#include "pins.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fsverity.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "metadata.h"
#include "storage.h"
#include "storage_internal.h"

/* ---- checks ---- */

int dfd_pin_check_id(const char *field, const char *pin_id, struct dfc_error *err) {
    size_t n = pin_id != NULL ? strlen(pin_id) : 0;
    if (n == 0 || n > DFD_PIN_ID_MAX) {
        return dfc_error_set(err, -EINVAL, "%s must be 1 to %d characters, got %zu", field,
                             DFD_PIN_ID_MAX, n);
    }
    if (pin_id[0] == '.') {
        return dfc_error_set(err, -EINVAL, "%s must not start with '.'", field);
    }
    for (size_t i = 0; i < n; i++) {
        char c = pin_id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) {
            return dfc_error_set(err, -EINVAL,
                                 "%s may hold only [A-Za-z0-9._-], got a byte 0x%02x at %zu", field,
                                 (unsigned char)c, i);
        }
    }
    return 0;
}

int dfd_pin_check_name(const char *field, const char *name, struct dfc_error *err) {
    size_t n = name != NULL ? strlen(name) : 0;
    if (n == 0 || n > DFD_PIN_NAME_MAX) {
        return dfc_error_set(err, -EINVAL, "%s must be 1 to %d bytes, got %zu", field,
                             DFD_PIN_NAME_MAX, n);
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return dfc_error_set(err, -EINVAL, "%s must not be \"%s\"", field, name);
    }
    if (strchr(name, '/') != NULL) {
        return dfc_error_set(err, -EINVAL, "%s must be one path component, without '/'", field);
    }
    return 0;
}

/* ---- directories ---- */

int dfd_storage_volume_path(const struct dfd_storage *s, const char *pin_id, char *buf,
                            size_t size) {
    return dfd__pathf(buf, size, "%s/%s", s->volumes_dir, pin_id);
}

/* Removes a volume directory (0555: made writable first) and its links; fine when absent.
 * Never follows a symbolic link: anything but a directory is only unlinked. */
static int rm_volume(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        int r = -errno;
        if (fd >= 0) {
            close(fd);
        }
        return r;
    }
    (void)fchmod(fd, 0700);
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT &&
            unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0 && r == 0) {
            r = -errno; /* a directory that is not empty: the volume was never one of ours */
        }
    }
    closedir(d);
    if (r == 0 && rmdir(path) < 0 && errno != ENOENT) {
        r = -errno;
    }
    return r;
}

/* Makes a content file world-readable and tries fs-verity on it (outside the commit lock:
 * enabling reads the whole file). A task deleted meanwhile is found again under the lock. */
static void prepare_content(struct dfd_storage *s, const char *id) {
    int fd;
    if (dfd_storage_open_content(s, id, &fd, NULL) < 0) {
        return;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 07777) != 0444) {
        (void)fchmod(fd, 0444);
        (void)fsync(fd);
    }
    struct fsverity_enable_arg arg = {
        .version = 1, .hash_algorithm = FS_VERITY_HASH_ALG_SHA256, .block_size = 4096};
    /* EEXIST: already on; EOPNOTSUPP, ENOTTY: no fs-verity here; others: left without. */
    (void)ioctl(fd, FS_IOC_ENABLE_VERITY, &arg);
    close(fd);
}

static bool has_verity(int dir_fd, const char *name) {
    struct statx stx;
    return statx(dir_fd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0 &&
           (stx.stx_attributes_mask & STATX_ATTR_VERITY) != 0 &&
           (stx.stx_attributes & STATX_ATTR_VERITY) != 0;
}

/* Under commit_mu: every task still stored, the links, the directory durable and 0555, then
 * the row (the commit point). p->verity is set here. */
static int build_locked(struct dfd_storage *s, struct dfd_pin *p, const char *dir,
                        char *ret_missing, struct dfc_error *err) {
    for (size_t i = 0; i < p->n_files; i++) {
        struct dfd_task_meta t;
        int r = dfd_metadata_get(s->md, p->files[i].task_id, &t, err);
        if (r < 0) {
            if (r == -ENOENT && ret_missing != NULL) {
                snprintf(ret_missing, DFD_TASK_ID_LEN + 1, "%s", p->files[i].task_id);
            }
            return r == -ENOENT ? dfc_error_set(err, r, "task %s is not stored on this node",
                                                p->files[i].task_id)
                                : r;
        }
        dfd_task_meta_done(&t);
    }
    int r = rm_volume(dir); /* a directory left by a failed attempt */
    if (r < 0 || mkdir(dir, 0700) < 0) {
        return dfc_error_errno(err, r < 0 ? r : -errno, "make the volume directory `%s`", dir);
    }
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return dfc_error_errno(err, -errno, "open `%s`", dir);
    }
    p->verity = p->n_files > 0;
    for (size_t i = 0; i < p->n_files; i++) {
        char path[PATH_MAX];
        dfd__task_path(s, p->files[i].task_id, path, sizeof(path));
        if (linkat(AT_FDCWD, path, dfd, p->files[i].name, 0) < 0) {
            r = dfc_error_errno(err, -errno, "link `%s` into `%s`", path, dir);
            goto fail;
        }
        p->verity = p->verity && has_verity(dfd, p->files[i].name);
    }
    if (fsync(dfd) < 0 || fchmod(dfd, 0555) < 0 || fsync(dfd) < 0) {
        r = dfc_error_errno(err, -errno, "make `%s` durable and read-only", dir);
        goto fail;
    }
    if ((r = dfd__fsync_dir(s->volumes_dir)) < 0) {
        dfc_error_errno(err, r, "fsync `%s`", s->volumes_dir);
        goto fail;
    }
    if ((r = dfd_metadata_pin_insert(s->md, p, err)) < 0) {
        goto fail;
    }
    return 0;
fail:
    (void)rm_volume(dir);
    return r;
}

static int build(struct dfd_storage *s, struct dfd_pin *p, char *ret_missing,
                 struct dfc_error *err) {
    char dir[PATH_MAX];
    int r = dfd_storage_volume_path(s, p->pin_id, dir, sizeof(dir));
    if (r < 0) {
        return dfc_error_set(err, r, "the volume path of pin %s is too long", p->pin_id);
    }
    for (size_t i = 0; i < p->n_files; i++) {
        prepare_content(s, p->files[i].task_id);
    }
    pthread_mutex_lock(&s->commit_mu);
    r = build_locked(s, p, dir, ret_missing, err);
    pthread_mutex_unlock(&s->commit_mu);
    return r;
}

/* ---- pin, unpin, list ---- */

/* Whether dir holds every file of p (a missing one means the directory is made again). */
static bool complete(const struct dfd_pin *p, const char *dir) {
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return false;
    }
    for (size_t i = 0; i < p->n_files; i++) {
        struct stat st;
        if (fstatat(dfd, p->files[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
            return false;
        }
    }
    return true;
}

static bool has_file(const struct dfd_pin *p, const struct dfd_pin_file *f) {
    for (size_t i = 0; i < p->n_files; i++) {
        if (strcmp(p->files[i].name, f->name) == 0) {
            return strcmp(p->files[i].task_id, f->task_id) == 0;
        }
    }
    return false;
}

static bool same_files(const struct dfd_pin *a, const struct dfd_pin *b) {
    if (a->n_files != b->n_files) {
        return false;
    }
    for (size_t i = 0; i < a->n_files; i++) {
        if (!has_file(b, &a->files[i])) {
            return false;
        }
    }
    return true;
}

int dfd_storage_pin(struct dfd_storage *s, struct dfd_pin *want, int64_t now_ns, char *ret_path,
                    bool *ret_verity, char *ret_missing, struct dfc_error *err) {
    int r = dfd_storage_volume_path(s, want->pin_id, ret_path, PATH_MAX);
    if (r < 0) {
        return dfc_error_set(err, r, "the volume path of pin %s is too long", want->pin_id);
    }
    pthread_mutex_lock(&s->pin_mu);
    struct dfd_pin old;
    r = dfd_metadata_pin_get(s->md, want->pin_id, &old, err);
    if (r == 0) {
        bool same = same_files(&old, want), whole = same && complete(&old, ret_path);
        *ret_verity = old.verity;
        dfd_pin_done(&old);
        if (!same) {
            r = dfc_error_set(err, -EEXIST, "pin_id %s is already published with other files",
                              want->pin_id);
        } else if (!whole) {
            /* Its directory was removed or changed behind the daemon's back: made again, as
             * recovery at open does (or refused when a task is gone). */
            r = dfd_metadata_pin_delete(s->md, want->pin_id, err);
            r = r < 0 ? r : -ENOENT;
        }
    }
    if (r == -ENOENT) {
        want->created_at_ns = now_ns;
        r = build(s, want, ret_missing, err);
        *ret_verity = want->verity;
    }
    pthread_mutex_unlock(&s->pin_mu);
    return r;
}

int dfd_storage_unpin(struct dfd_storage *s, const char *pin_id, bool *ret_existed,
                      struct dfc_error *err) {
    char dir[PATH_MAX];
    int r = dfd_storage_volume_path(s, pin_id, dir, sizeof(dir));
    if (r < 0) {
        return dfc_error_set(err, r, "the volume path of pin %s is too long", pin_id);
    }
    pthread_mutex_lock(&s->pin_mu);
    r = dfd_metadata_pin_delete(s->md, pin_id, err);
    if (ret_existed != NULL) {
        *ret_existed = r > 0;
    }
    if (r >= 0) {
        int rr = rm_volume(dir);
        r = rr < 0 ? dfc_error_errno(err, rr, "remove the volume directory `%s`", dir) : 0;
        (void)dfd__fsync_dir(s->volumes_dir);
    }
    pthread_mutex_unlock(&s->pin_mu);
    return r;
}

int dfd_storage_pins(struct dfd_storage *s, struct dfd_pin **ret, size_t *ret_n,
                     struct dfc_error *err) {
    return dfd_metadata_pin_list(s->md, ret, ret_n, err);
}

int dfd_storage_task_pins(struct dfd_storage *s, const char *id, char (**ret)[DFD_PIN_ID_MAX + 1],
                          size_t *ret_n, struct dfc_error *err) {
    return dfd_metadata_task_pins(s->md, id, ret, ret_n, err);
}

int dfd__task_pinned(struct dfd_storage *s, const char *id, struct dfc_error *err) {
    char(*ids)[DFD_PIN_ID_MAX + 1] = NULL;
    size_t n = 0;
    int r = dfd_metadata_task_pins(s->md, id, &ids, &n, err);
    free(ids);
    return r < 0 ? r : n > 0;
}

/* ---- fs-verity probe ---- */

int dfd_storage_verity_probe(struct dfd_storage *s, struct dfc_error *err) {
    char path[PATH_MAX];
    dfd__spool_name(s, "verity-probe", path);
    int fd = -1;
    int r = dfd__spool_open(path, &fd, err);
    if (r < 0) {
        return r;
    }
    static const char block[4096];
    if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block) || fsync(fd) < 0) {
        r = dfc_error_errno(err, -errno, "write the fs-verity probe `%s`", path);
    }
    close(fd);
    if (r == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        r = dfc_error_errno(err, -errno, "open the fs-verity probe `%s`", path);
    }
    if (r == 0) {
        struct fsverity_enable_arg arg = {
            .version = 1, .hash_algorithm = FS_VERITY_HASH_ALG_SHA256, .block_size = 4096};
        if (ioctl(fd, FS_IOC_ENABLE_VERITY, &arg) == 0) {
            r = 1;
        } else if (errno == EOPNOTSUPP || errno == ENOTTY) {
            r = 0;
        } else {
            r = dfc_error_errno(err, -errno, "FS_IOC_ENABLE_VERITY on `%s`", path);
        }
        close(fd);
    }
    (void)unlink(path);
    return r;
}

/* ---- recovery at open ---- */

int dfd__pins_recover(struct dfd_storage *s, struct dfd_recovery *rec, struct dfc_error *err) {
    if (mkdir(s->volumes_dir, 0755) < 0 && errno != EEXIST) {
        return dfc_error_errno(err, -errno, "create `%s`", s->volumes_dir);
    }
    (void)chmod(s->volumes_dir, 0755);
    /* Directories without a row: a crash before the row, or after an unpin dropped it. */
    DIR *d = opendir(s->volumes_dir);
    if (d == NULL) {
        return dfc_error_errno(err, -errno, "open `%s`", s->volumes_dir);
    }
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        struct dfd_pin p;
        int g = dfd_pin_check_id("pin_id", de->d_name, NULL) == 0
                    ? dfd_metadata_pin_get(s->md, de->d_name, &p, err)
                    : -ENOENT;
        if (g == 0) {
            dfd_pin_done(&p);
            continue;
        }
        if (g != -ENOENT) {
            r = g; /* only a definite "no such row" makes a directory stale */
            break;
        }
        char path[PATH_MAX];
        if (dfd__pathf(path, sizeof(path), "%s/%s", s->volumes_dir, de->d_name) == 0 &&
            rm_volume(path) == 0) {
            rec->stale_volumes++;
        }
    }
    closedir(d);
    if (r < 0) {
        return r;
    }
    /* Rows whose directory is missing or incomplete: rebuilt from the store, else dropped. */
    struct dfd_pin *pins;
    size_t n;
    if ((r = dfd_metadata_pin_list(s->md, &pins, &n, err)) < 0) {
        return r;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        char dir[PATH_MAX];
        (void)dfd_storage_volume_path(s, pins[i].pin_id, dir, sizeof(dir));
        if (complete(&pins[i], dir)) {
            rec->pins++;
            continue;
        }
        if ((r = dfd_metadata_pin_delete(s->md, pins[i].pin_id, err)) < 0) {
            break;
        }
        r = 0;
        struct dfc_error e;
        if (build(s, &pins[i], NULL, &e) == 0) {
            rec->pins++;
            rec->rebuilt_pins++;
        } else {
            (void)rm_volume(dir);
            rec->dropped_pins++;
        }
    }
    dfd_pin_list_free(pins, n);
    if (r == 0) {
        (void)dfd__fsync_dir(s->volumes_dir);
    }
    return r;
}
