/*
 * sys.c - raw syscalls for the node service: see sys.h.
 *
 * Only <sys/mount.h> is included, never <linux/mount.h> (the two redefine each other's
 * constants on glibc 2.36); the few constants and the one struct needed are defined here under
 * their kernel values, which are ABI.
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dfc/fs.h"

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#endif
#ifndef MOUNT_ATTR_NODEV
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* struct mount_attr of <linux/mount.h> (MOUNT_ATTR_SIZE_VER0), under a name of our own. */
struct csi_mount_attr {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};

int csi_openat_beneath(int dirfd, const char *path, int flags) {
    return dfc_openat2(dirfd, path, flags,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

int csi_mount_id(int fd, uint64_t *ret) {
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0) {
        return -errno;
    }
    if (!(stx.stx_mask & STATX_MNT_ID)) {
        return -EOPNOTSUPP; /* a kernel before 5.8 */
    }
    *ret = stx.stx_mnt_id;
    return 0;
}

int csi_open_tree_clone(const char *source) {
    long fd = syscall(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

int csi_mount_set_readonly(int tree) {
    struct csi_mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
    return syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ? -errno
                                                                                        : 0;
}

int csi_open_tree_clone_nofollow(const char *source) {
    long fd = syscall(SYS_open_tree, AT_FDCWD, source,
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
    return fd < 0 ? -errno : (int)fd;
}

int csi_mount_seal(int tree) {
    struct csi_mount_attr attr = {.attr_set =
                                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    return syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ? -errno
                                                                                        : 0;
}

int csi_move_mount(int tree, int target_fd) {
    return syscall(SYS_move_mount, tree, "", target_fd, "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0
               ? -errno
               : 0;
}
