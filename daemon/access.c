/*
 * access.c - mode-bit checks for a Unix-socket caller.
 */
#include "access.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dfd_caller_init(struct dfd_caller *c, pid_t pid, uid_t uid, gid_t gid) {
    memset(c, 0, sizeof(*c));
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = pid > 0 ? fopen(path, "re") : NULL;
    if (f == NULL) {
        return; /* another pid namespace: the primary group only */
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Groups:", 7) != 0) {
            continue;
        }
        char *p = line + 7, *end;
        while (c->n_groups < DFD_CALLER_MAX_GROUPS) {
            unsigned long g = strtoul(p, &end, 10);
            if (end == p) {
                break;
            }
            c->groups[c->n_groups++] = (gid_t)g;
            p = end;
        }
        break;
    }
    fclose(f);
}

static bool in_groups(const struct dfd_caller *c, gid_t g) {
    if (g == c->gid) {
        return true;
    }
    for (int i = 0; i < c->n_groups; i++) {
        if (c->groups[i] == g) {
            return true;
        }
    }
    return false;
}

/* want: a mask of 4 (read), 2 (write), 1 (execute/search). */
static bool allows(const struct dfd_caller *c, const struct stat *st, unsigned want) {
    if (c->uid == 0) {
        return true;
    }
    unsigned bits;
    if (st->st_uid == c->uid) {
        bits = (st->st_mode >> 6) & 7;
    } else if (in_groups(c, st->st_gid)) {
        bits = (st->st_mode >> 3) & 7;
    } else {
        bits = st->st_mode & 7;
    }
    return (bits & want) == want;
}

/* Every directory from / down to dir (inclusive) must be searchable. */
static int check_search(const struct dfd_caller *c, const char *dir, const char *shown,
                        struct dfc_error *err) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", dir);
    size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') {
            continue;
        }
        char saved = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (stat(buf, &st) < 0) {
            return dfc_error_errno(err, -errno, "stat `%s`", buf);
        }
        if (!allows(c, &st, 1)) {
            return dfc_error_set(err, -EACCES,
                                 "permission denied: uid %d cannot search `%s` on the way to `%s`",
                                 (int)c->uid, buf, shown);
        }
        buf[i] = saved;
    }
    return 0;
}

int dfd_access_read_fd(const struct dfd_caller *c, int fd, const char *shown_path,
                       struct dfc_error *err) {
    if (c->uid == 0) {
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        return dfc_error_errno(err, -errno, "stat `%s`", shown_path);
    }
    if (!allows(c, &st, 4)) {
        return dfc_error_set(err, -EACCES, "permission denied: uid %d cannot read `%s`",
                             (int)c->uid, shown_path);
    }
    /* The directories on the path of the file actually opened (symlinks resolved). */
    char self[64], real[PATH_MAX];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, real, sizeof(real) - 1);
    if (n <= 0) {
        return dfc_error_errno(err, n < 0 ? -errno : -EIO, "resolve `%s`", shown_path);
    }
    real[n] = '\0';
    char *slash = strrchr(real, '/');
    if (slash == NULL) {
        return dfc_error_set(err, -EACCES, "cannot resolve `%s`", shown_path);
    }
    if (slash == real) {
        slash[1] = '\0';
    } else {
        *slash = '\0';
    }
    return check_search(c, real, shown_path, err);
}

int dfd_access_create(const struct dfd_caller *c, const char *path, struct dfc_error *err) {
    if (c->uid == 0) {
        return 0;
    }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        return dfc_error_set(err, -EINVAL, "`%s` is not an absolute path", path);
    }
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (realpath(dir, real) == NULL) {
        return dfc_error_errno(err, -errno, "the directory of `%s`", path);
    }
    int r = check_search(c, real, path, err);
    if (r < 0) {
        return r;
    }
    struct stat st;
    if (stat(real, &st) < 0) {
        return dfc_error_errno(err, -errno, "stat `%s`", real);
    }
    if (!allows(c, &st, 2 | 1)) {
        return dfc_error_set(err, -EACCES, "permission denied: uid %d cannot write in `%s`",
                             (int)c->uid, real);
    }
    /* In a sticky directory only the owner of an existing file may replace it. */
    struct stat ost;
    if ((st.st_mode & S_ISVTX) && lstat(path, &ost) == 0 && ost.st_uid != c->uid &&
        st.st_uid != c->uid) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: `%s` belongs to another user in a sticky "
                             "directory",
                             path);
    }
    return 0;
}
