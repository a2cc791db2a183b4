/*
 * paths.h - which target paths the plugin will mount on, and resolving them once: only below
 * the kubelet root, never through "..", and never through a symlink. Callers pass request
 * strings; nothing here trusts them, and nothing after csi_check_target() resolves them again:
 * the node service works on the parent descriptor it returns.
 */
#ifndef CSI_PATHS_H
#define CSI_PATHS_H

#include <limits.h>
#include <stddef.h>

#include "dfc/error.h"

/* A target resolved beneath the kubelet root. Owns parent_fd (csi_target_close). */
struct csi_target {
    int parent_fd;           /* O_PATH|O_DIRECTORY of the target's parent, or -1 */
    char base[NAME_MAX + 1]; /* the target's last component, to use with parent_fd only */
    char path[PATH_MAX];     /* the canonical spelling ("//" and a trailing "/" folded), for
                              * the per-target lock and messages; never resolved again */
};

/* First the string policy, the fast path of clear -EINVAL errors: target must be absolute,
 * without "." or ".." components, below kubelet_root, shorter than PATH_MAX. Then the parent
 * is opened beneath the kubelet root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so a
 * symlink on the way, wherever it leads and whenever it was swapped in, is -EINVAL (the message
 * says where it leads); a missing parent is -ENOENT. A target that exists as a symlink is
 * -EINVAL too. On success *ret holds the parent descriptor and the last component; on failure
 * ret->parent_fd is -1. */
int csi_check_target(const char *kubelet_root, const char *target, struct csi_target *ret,
                     struct dfc_error *err);

/* Closes ret->parent_fd (when open). */
void csi_target_close(struct csi_target *t);

#endif /* CSI_PATHS_H */
