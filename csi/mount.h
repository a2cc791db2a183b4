/*
 * mount.h - bind mounts and /proc/self/mountinfo, behind an ops table so that the driver's
 * logic can be tested with fakes and the real calls stay in one place.
 *
 * Every op works on descriptors the caller resolved (beneath the kubelet root, with no
 * symlinks: paths.h) and keeps; none resolves a request string. Descriptors stay the
 * caller's.
 */
#ifndef CSI_MOUNT_H
#define CSI_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the mount table says about one mount point. */
struct csi_mount_state {
    unsigned count; /* mounts stacked on the path (0: not a mount point) */
    bool read_only; /* of the top one */
};

struct csi_mount_ops {
    /* Non-recursive bind of source (configuration, not a request string) onto the directory
     * target_fd refers to. A read-only one is made read-only while still detached, so it is
     * never visible read-write. Leaves nothing mounted on failure. Negative errno. */
    int (*bind)(const char *source, int target_fd, bool read_only);
    /* Unmounts the mount whose root target_fd is (lazily when busy). Negative errno. */
    int (*unmount)(int target_fd);
    /* Fills *ret for target_fd, a directory opened by name beneath parent_fd (so at the top of
     * whatever is mounted there): the mounts stacked between the two. Negative errno. */
    int (*state)(int parent_fd, int target_fd, struct csi_mount_state *ret);
    /* A content volume's bind: like bind, always read-only, nosuid and nodev, and source's
     * last component is not followed when it is a symlink. */
    int (*bind_content)(const char *source, int target_fd);
};

/* The real thing: open_tree + mount_setattr + move_mount, umount2 through /proc/self/fd,
 * statx mount ids and /proc/self/mountinfo. */
extern const struct csi_mount_ops csi_mount_ops_linux;

/* The scanners below are pure (no syscalls besides reading f) and read lines of any length. */

/* Fills *ret for mount point path (as mountinfo spells it, unescaped): every mount on it. For
 * tests and tools that look by path; the plugin itself asks csi_mountinfo_stack(). */
int csi_mountinfo_scan(FILE *f, const char *path, struct csi_mount_state *ret);

/* Fills *ret for the stack of mounts from mount top_id down to, not including, mount
 * under_id: top_id, its parent, and so on (stacked mounts are each other's parents). Mount
 * ids, not paths: a renamed or oddly named mount point cannot mislead it. -E2BIG for a table
 * of more than CSI_MOUNTINFO_MAX_LINES lines. */
#define CSI_MOUNTINFO_MAX_LINES 1000000
int csi_mountinfo_stack(FILE *f, uint64_t top_id, uint64_t under_id, struct csi_mount_state *ret);

/* Decodes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash) from
 * in into out (size bytes). Returns -ENAMETOOLONG when it does not fit. */
int csi_mountinfo_unescape(const char *in, size_t len, char *out, size_t size);

#endif /* CSI_MOUNT_H */
