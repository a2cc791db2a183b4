/*
 * paths.c - target path policy and the one resolution of a target: see paths.h.
 */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

/* True when path equals root or lies below it (both without trailing slashes). */
static bool below(const char *root, const char *path) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') {
        n--;
    }
    return strncmp(path, root, n) == 0 && (path[n] == '/' || (n == 1 && root[0] == '/'));
}

/* Copies in to out (PATH_MAX bytes) with runs of '/' folded into one and trailing ones
 * dropped ("/" stays "/"). */
static void fold_slashes(const char *in, char *out) {
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < PATH_MAX; p++) {
        if (!(p[0] == '/' && (p[1] == '/' || (p[1] == '\0' && o > 0)))) {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

/* The message for a parent that openat2 refused to reach (-ELOOP, -EXDEV): where its symlinks
 * lead. The realpath() calls only word the message; the request is refused either way. */
static int refuse_symlink(const char *kubelet_root, const char *target, const char *parent,
                          struct dfc_error *err) {
    char real_parent[PATH_MAX], real_root[PATH_MAX];
    if (realpath(kubelet_root, real_root) != NULL && realpath(parent, real_parent) != NULL &&
        !below(real_root, real_parent) && strcmp(real_root, real_parent) != 0) {
        return dfc_error_set(err, -EINVAL,
                             "target_path `%s` resolves outside the kubelet root (to `%s`)", target,
                             real_parent);
    }
    return dfc_error_set(err, -EINVAL,
                         "target_path `%s` goes through a symlink (symlinks are not followed "
                         "below the kubelet root)",
                         target);
}

void csi_target_close(struct csi_target *t) {
    if (t->parent_fd >= 0) {
        close(t->parent_fd);
        t->parent_fd = -1;
    }
}

int csi_check_target(const char *kubelet_root, const char *target, struct csi_target *ret,
                     struct dfc_error *err) {
    ret->parent_fd = -1;
    if (target[0] != '/') {
        return dfc_error_set(err, -EINVAL, "target_path `%s` must be absolute", target);
    }
    if (strlen(target) >= PATH_MAX) {
        return dfc_error_set(err, -EINVAL, "target_path is longer than %d bytes", PATH_MAX - 1);
    }
    for (const char *p = target; *p; p++) {
        if (p[0] == '/' && p[1] == '.' &&
            (p[2] == '/' || p[2] == '\0' || (p[2] == '.' && (p[3] == '/' || p[3] == '\0')))) {
            return dfc_error_set(err, -EINVAL, "target_path `%s` must not contain . or ..", target);
        }
    }
    char root[PATH_MAX];
    fold_slashes(kubelet_root, root);
    fold_slashes(target, ret->path);
    if (!below(root, ret->path)) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` is not under the kubelet root `%s`",
                             target, kubelet_root);
    }
    /* The part below the root: "a/b/base", split into the parent's "a/b" (or ".") and base. */
    const char *rel = ret->path + strlen(root) + (strcmp(root, "/") != 0);
    const char *slash = strrchr(rel, '/');
    const char *base = slash ? slash + 1 : rel;
    if (*base == '\0') {
        return dfc_error_set(err, -EINVAL, "target_path `%s` names no directory", target);
    }
    if (strlen(base) > NAME_MAX) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` has a name longer than %d bytes",
                             target, NAME_MAX);
    }
    snprintf(ret->base, sizeof(ret->base), "%s", base);
    char parent_rel[PATH_MAX], parent[PATH_MAX];
    snprintf(parent_rel, sizeof(parent_rel), "%.*s", slash ? (int)(slash - rel) : 1,
             slash ? rel : ".");
    snprintf(parent, sizeof(parent), "%.*s", (int)(base - 1 - ret->path), ret->path);

    /* The root is configuration, trusted: its own symlinks (a relocated /var/lib/kubelet) are
     * followed. Everything below it is the request's and resolved with no symlink at all. */
    int root_fd = open(kubelet_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        return dfc_error_errno(err, -errno, "the kubelet root `%s`", kubelet_root);
    }
    int fd = csi_openat_beneath(root_fd, parent_rel, O_PATH | O_DIRECTORY);
    close(root_fd);
    if (fd == -ELOOP || fd == -EXDEV) {
        return refuse_symlink(kubelet_root, target, parent, err);
    }
    if (fd < 0) {
        return dfc_error_errno(err, fd, "the parent directory of target_path `%s`", target);
    }
    struct stat st;
    if (fstatat(fd, ret->base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        close(fd);
        return dfc_error_set(err, -EINVAL, "target_path `%s` is a symlink", target);
    }
    ret->parent_fd = fd;
    return 0;
}
