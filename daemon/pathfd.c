/*
 * pathfd.c - one openat2() per caller path.
 */
#include "pathfd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "dfc/fs.h"

static int open_nomagic(const char *path, int flags) {
    return dfc_openat2(AT_FDCWD, path, flags | O_PATH, RESOLVE_NO_MAGICLINKS);
}

/* The message for a failed resolution of path (what = "read" or "search"). */
static int resolve_error(int r, const char *field, const char *path, uid_t uid,
                         struct dfc_error *err) {
    switch (-r) {
    case ENOENT:
    case ENOTDIR:
        return dfc_error_set(err, -ENOENT, "%s `%s` does not exist", field, path);
    case EACCES:
    case EPERM:
        return dfc_error_set(err, -EACCES, "permission denied: uid %d cannot read `%s`", (int)uid,
                             path);
    case ELOOP:
        return dfc_error_set(err, -EINVAL,
                             "%s `%s` has a loop of symbolic links or goes through a /proc "
                             "magic link",
                             field, path);
    case ENOSYS:
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "this kernel has no openat2 (Linux 5.6); stream the file instead");
    default:
        return dfc_error_errno(err, r, "open %s `%s`", field, path);
    }
}

/* " (a FIFO)" and the like, after "is special, not a regular file". */
static const char *special_kind(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFIFO:
        return " (a FIFO)";
    case S_IFCHR:
        return " (a character device)";
    case S_IFBLK:
        return " (a block device)";
    case S_IFSOCK:
        return " (a socket)";
    default:
        return "";
    }
}

int dfd_pathfd_open_file(const char *path, uid_t uid, int *ret_fd, struct dfc_error *err) {
    int opath = open_nomagic(path, 0);
    if (opath < 0) {
        return resolve_error(opath, "path", path, uid, err);
    }
    struct stat st;
    struct statfs sfs;
    int r = 0;
    if (fstat(opath, &st) < 0 || fstatfs(opath, &sfs) < 0) {
        r = dfc_error_errno(err, -errno, "stat `%s`", path);
    } else if (!S_ISREG(st.st_mode)) {
        r = dfc_error_set(err, -EINVAL, "path `%s` is %s, not a regular file%s", path,
                          S_ISDIR(st.st_mode) ? "a directory" : "special",
                          special_kind(st.st_mode));
    } else if (sfs.f_type == PROC_SUPER_MAGIC) {
        /* The daemon may read its own /proc files whatever the caller's identity. */
        r = dfc_error_set(err, -EINVAL, "path `%s` is in /proc, which is not imported", path);
    }
    if (r == 0) { /* the same inode, opened for reading: the kernel checks the caller's rights */
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", opath);
        int fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
            r = resolve_error(-errno, "path", path, uid, err);
        } else {
            *ret_fd = fd;
        }
    }
    close(opath);
    return r;
}

int dfd_pathfd_open_parent(const char *field, const char *path, uid_t uid, int *ret_dirfd,
                           char *base, size_t size, struct dfc_error *err) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash[1] == '\0') {
        return dfc_error_set(err, -EINVAL, "%s `%s` does not name a file", field, path);
    }
    if (strlen(slash + 1) >= size) {
        return dfc_error_set(err, -ENAMETOOLONG, "%s `%s`: the name is too long", field, path);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open_nomagic(dir, O_DIRECTORY);
    if (fd < 0) {
        if (fd == -EACCES || fd == -EPERM) {
            return dfc_error_set(err, -EACCES,
                                 "permission denied: uid %d cannot search the directory of `%s`",
                                 (int)uid, path);
        }
        return resolve_error(fd, field, path, uid, err);
    }
    snprintf(base, size, "%s", slash + 1);
    *ret_dirfd = fd;
    return 0;
}
