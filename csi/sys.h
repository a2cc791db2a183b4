/*
 * sys.h - the Linux calls the node service needs that glibc 2.36 (Debian 12) does not wrap, or
 * wraps in headers that conflict with <linux/mount.h>: openat2 (5.6), open_tree and move_mount
 * (5.2), mount_setattr (5.12), and statx's mount id (5.8). Nothing here is newer than Linux 6.1.
 * Every function returns a negative errno on failure; descriptors returned are O_CLOEXEC and
 * owned by the caller.
 */
#ifndef CSI_SYS_H
#define CSI_SYS_H

#include <stdint.h>

/* Opens path relative to dirfd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS): every component must be a real directory entry beneath dirfd; a
 * symlink anywhere, the last component included, gives -ELOOP, a way out -EXDEV. flags are
 * open(2) flags (O_CLOEXEC is added). Mounts on the way are crossed, so the result is the top
 * mount. */
int csi_openat_beneath(int dirfd, const char *path, int flags);

/* The id of the mount fd lies on, as /proc/self/mountinfo's first field shows it. */
int csi_mount_id(int fd, uint64_t *ret);

/* open_tree(source, OPEN_TREE_CLONE): a detached, non-recursive bind of source. */
int csi_open_tree_clone(const char *source);

/* mount_setattr(tree, MOUNT_ATTR_RDONLY) on the mount tree refers to. */
int csi_mount_set_readonly(int tree);

/* open_tree(source, OPEN_TREE_CLONE | AT_SYMLINK_NOFOLLOW): a detached, non-recursive bind of
 * source, whose last component must not be a symlink. */
int csi_open_tree_clone_nofollow(const char *source);

/* mount_setattr(tree, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV). */
int csi_mount_seal(int tree);

/* move_mount(tree -> target_fd): attaches the detached tree on the directory target_fd
 * refers to, with no path resolved. */
int csi_move_mount(int tree, int target_fd);

#endif /* CSI_SYS_H */
