/*
 * fs.c - small filesystem helpers.
 */
#include "dfc/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
