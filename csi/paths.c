/*
 * paths.c - target path policy.
 */
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* True when path equals root or lies below it (both without trailing slashes). */
static bool below(const char *root, const char *path) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') {
        n--;
    }
    return strncmp(path, root, n) == 0 && (path[n] == '/' || (n == 1 && root[0] == '/'));
}

int csi_check_target(const char *kubelet_root, const char *target, char *ret_canonical,
                     struct dfc_error *err) {
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
    if (!below(kubelet_root, target)) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` is not under the kubelet root `%s`",
                             target, kubelet_root);
    }
    /* Resolve the parent: a symlink on the way must not lead out of the kubelet root. */
    char trimmed[PATH_MAX], parent[PATH_MAX], real_parent[PATH_MAX], real_root[PATH_MAX];
    snprintf(trimmed, sizeof(trimmed), "%s", target);
    for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--) {
        trimmed[n - 1] = '\0';
    }
    const char *slash = strrchr(trimmed, '/');
    const char *base = slash + 1;
    if (*base == '\0') {
        return dfc_error_set(err, -EINVAL, "target_path `%s` names no directory", target);
    }
    snprintf(parent, sizeof(parent), "%.*s", slash == trimmed ? 1 : (int)(slash - trimmed),
             trimmed);
    if (realpath(kubelet_root, real_root) == NULL) {
        return dfc_error_errno(err, -errno, "the kubelet root `%s`", kubelet_root);
    }
    if (realpath(parent, real_parent) == NULL) {
        return dfc_error_errno(err, errno == ENOENT ? -ENOENT : -errno,
                               "the parent directory of target_path `%s`", target);
    }
    if (!below(real_root, real_parent) && strcmp(real_root, real_parent) != 0) {
        return dfc_error_set(err, -EINVAL,
                             "target_path `%s` resolves outside the kubelet root (to `%s`)", target,
                             real_parent);
    }
    if ((size_t)snprintf(ret_canonical, PATH_MAX, "%s/%s", real_parent, base) >= PATH_MAX) {
        return dfc_error_set(err, -EINVAL, "target_path is longer than %d bytes", PATH_MAX - 1);
    }
    struct stat st;
    if (lstat(ret_canonical, &st) == 0 && S_ISLNK(st.st_mode)) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` is a symlink", target);
    }
    return 0;
}
