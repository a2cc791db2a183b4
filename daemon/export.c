/*
 * export.c - hard link or copy into a directory descriptor.
 */
#include "export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/fs.h"
#include "dfc/id.h"

#define COPY_CHUNK ((size_t)1 << 20)

#define TEMP_NAME_MAX (sizeof(".dfcache-") + DFC_UUID_STR_LEN)

static void temp_name(char name[TEMP_NAME_MAX]) {
    char uuid[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(uuid);
    snprintf(name, TEMP_NAME_MAX, ".dfcache-%s", uuid);
}

static void proc_fd(int fd, char buf[32]) {
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
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
    uint8_t *buf = malloc(COPY_CHUNK);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int r = 0;
    while ((uint64_t)in_off < len && r == 0) {
        ssize_t n = pread(in_fd, buf, COPY_CHUNK, in_off);
        if (n <= 0) {
            r = n < 0 ? -errno : -EIO;
            break;
        }
        r = dfc_write_all(out_fd, buf, (size_t)n, -1);
        in_off += n;
    }
    free(buf);
    return r;
}

/* Links the open file fd into dirfd as name (the caller needs the right to make that link). */
static int link_fd(int fd, int dirfd, const char *name) {
    char self[32];
    proc_fd(fd, self);
    return linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

/* Renames the temp name onto base; removes it when that fails. */
static int replace_with(int dirfd, const char *tmp, const char *base) {
    if (renameat(dirfd, tmp, dirfd, base) < 0) {
        int r = -errno;
        (void)unlinkat(dirfd, tmp, 0);
        return r;
    }
    return 0;
}

/* Gives the file at /proc/self/fd/<fd> (or dirfd/named_tmp) the name base: with overwrite
 * through a temp name renamed onto base; without, only if base does not exist (atomically).
 * *ret_link_failed tells that making the first link was refused (nothing was created). */
static int publish(int fd, int dirfd, const char *named_tmp, const char *base, bool overwrite,
                   bool *ret_link_failed) {
    *ret_link_failed = false;
    if (named_tmp != NULL) {
        int r = overwrite ? renameat(dirfd, named_tmp, dirfd, base)
                          : renameat2(dirfd, named_tmp, dirfd, base, RENAME_NOREPLACE);
        return r < 0 ? -errno : 0;
    }
    char tmp[TEMP_NAME_MAX];
    if (overwrite) {
        temp_name(tmp);
    }
    int r = link_fd(fd, dirfd, overwrite ? tmp : base);
    if (r < 0) {
        *ret_link_failed = true;
        return r;
    }
    return overwrite ? replace_with(dirfd, tmp, base) : 0;
}

static int export_error(int r, const struct dfd_export_opts *o, const char *what,
                        struct dfc_error *err) {
    switch (-r) {
    case EEXIST:
        return dfc_error_set(err, -EEXIST, "output_path `%s` already exists", o->shown);
    case EACCES:
    case EPERM:
        return dfc_error_set(err, -EACCES, "permission denied: uid %d cannot write `%s`",
                             (int)o->uid, o->shown);
    case ENOSPC:
    case EDQUOT:
        return dfc_error_set(err, r, "no space left writing `%s`", o->shown);
    default:
        return dfc_error_errno(err, r, "%s `%s`", what, o->shown);
    }
}

static int copy_into(int content_fd, uint64_t len, int dirfd, const char *base,
                     const struct dfd_export_opts *o, struct dfc_error *err) {
    char tmp[TEMP_NAME_MAX];
    const char *named = NULL;
    _cleanup_close_ int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
        temp_name(tmp);
        named = tmp;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        return export_error(-errno, o, "create a file beside", err);
    }
    int r = copy_fd(content_fd, fd, len);
    if (r == 0 && fsync(fd) < 0) {
        r = -errno;
    }
    bool link_failed;
    if (r == 0) {
        r = publish(fd, dirfd, named, base, o->overwrite, &link_failed);
    }
    if (r < 0 && named != NULL) {
        (void)unlinkat(dirfd, named, 0);
    }
    return r < 0 ? export_error(r, o, "copy to", err) : 0;
}

int dfd_export_into(int content_fd, int dirfd, const char *base, const struct dfd_export_opts *o,
                    bool *ret_linked, struct dfc_error *err) {
    struct stat cst, ost;
    if (fstat(content_fd, &cst) < 0) {
        return dfc_error_errno(err, -errno, "stat the content");
    }
    if (fstatat(dirfd, base, &ost, AT_SYMLINK_NOFOLLOW) == 0) {
        if (ost.st_dev == cst.st_dev && ost.st_ino == cst.st_ino) {
            *ret_linked = true;
            return 0; /* already this very content */
        }
        if (!o->overwrite) {
            return export_error(-EEXIST, o, "", err);
        }
        if (S_ISDIR(ost.st_mode)) {
            return dfc_error_set(err, -EISDIR, "output_path `%s` is a directory", o->shown);
        }
    } else if (errno != ENOENT) {
        return export_error(-errno, o, "stat", err);
    }
    /* A hard link shares the cached inode; the kernel allows it only where the caller could
     * make that link itself (fs.protected_hardlinks: owner, or read and write access). */
    bool link_failed;
    int r = publish(content_fd, dirfd, NULL, base, o->overwrite, &link_failed);
    if (r == 0) {
        *ret_linked = true;
        return 0;
    }
    if (!link_failed) { /* linked, but the rename onto base was refused */
        return export_error(r, o, "replace", err);
    }
    bool no_link = r == -EXDEV || r == -EPERM || r == -EMLINK || r == -EOPNOTSUPP;
    if (o->force_hard_link && r == -EPERM) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: the kernel refused uid %d a hard link to the "
                             "content at `%s` (fs.protected_hardlinks; force_hard_link)",
                             (int)o->uid, o->shown);
    }
    if (o->force_hard_link || !no_link) {
        return r == -EXDEV ? dfc_error_set(err, -EXDEV,
                                           "cannot hard link the content to `%s` across "
                                           "filesystems (force_hard_link)",
                                           o->shown)
                           : export_error(r, o, "hard link to", err);
    }
    *ret_linked = false;
    return copy_into(content_fd, (uint64_t)cst.st_size, dirfd, base, o, err);
}
