/*
 * fs.c - small filesystem helpers (fs.h).
 */
#include "dfc/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int dfc_mkdir_p(const char *path, mode_t mode) {
    char buf[PATH_MAX];
    int n = snprintf(buf, sizeof(buf), "%s", path);
    if (n < 0 || (size_t)n >= sizeof(buf)) {
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

int dfc_mkdir_parent(const char *path, mode_t mode) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) {
        return 0;
    }
    int n = snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= sizeof(dir)) {
        return -ENAMETOOLONG;
    }
    return dfc_mkdir_p(dir, mode);
}

int dfc_write_all(int fd, const void *buf, size_t len, off_t off) {
    struct iovec one = {(void *)buf, len};
    return dfc_writev_all(fd, &one, 1, off);
}

/* How many iovecs one writev gets: a copy on the stack, so that a short write can resume in
 * the middle of one without touching the caller's array. */
#define WRITEV_BATCH 64

int dfc_writev_all(int fd, const struct iovec *iov, int n, off_t off) {
    if (n < 0) {
        return -EINVAL;
    }
    int i = 0;
    size_t skip = 0; /* bytes of iov[i] already written */
    for (;;) {
        while (i < n && iov[i].iov_len == skip) {
            i++;
            skip = 0;
        }
        if (i == n) {
            return 0;
        }
        struct iovec cur[WRITEV_BATCH];
        int k = 0;
        for (; k < WRITEV_BATCH && i + k < n; k++) {
            cur[k] = iov[i + k];
        }
        cur[0].iov_base = (char *)cur[0].iov_base + skip;
        cur[0].iov_len -= skip;
        ssize_t w = off < 0 ? writev(fd, cur, k) : pwritev(fd, cur, k, off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return w < 0 ? -errno : -EIO;
        }
        off = off < 0 ? off : off + w;
        for (size_t left = (size_t)w; left > 0 && i < n;) {
            size_t avail = iov[i].iov_len - skip;
            size_t t = left < avail ? left : avail;
            skip += t;
            left -= t;
            if (skip == iov[i].iov_len) {
                i++;
                skip = 0;
            }
        }
    }
}

int dfc_openat2(int dirfd, const char *path, int flags, uint64_t resolve) {
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve};
    for (int i = 0; i < DFC_OPENAT2_TRIES; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0) {
            return (int)fd;
        }
        if (errno != EAGAIN) {
            return -errno;
        }
    }
    return -EAGAIN;
}
