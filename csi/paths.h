/*
 * paths.h - which target paths the plugin will mount on: only below the kubelet root, never
 * through ".." or a symlink that leads out of it. Callers pass request strings; nothing here
 * trusts them.
 */
#ifndef CSI_PATHS_H
#define CSI_PATHS_H

#include <stddef.h>

#include "dfc/error.h"

/* 0 when target (absolute, no "." or ".." components) lies below kubelet_root, lexically and
 * after resolving the symlinks of its parent; else -EINVAL with a message naming target_path
 * (-ENOENT when the parent is missing). The target itself, when it exists, must not be a
 * symlink. On success ret_canonical (PATH_MAX bytes) holds the resolved parent plus the last
 * component: the exact string the kernel shows in mountinfo, so repeated or sloppily written
 * requests ("//", a trailing "/") meet the same mount. */
int csi_check_target(const char *kubelet_root, const char *target, char *ret_canonical,
                     struct dfc_error *err);

#endif /* CSI_PATHS_H */
