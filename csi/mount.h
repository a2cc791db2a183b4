/*
 * mount.h - bind mounts and /proc/self/mountinfo, behind an ops table so that the driver's
 * logic can be tested with fakes and the real calls stay in one place.
 */
#ifndef CSI_MOUNT_H
#define CSI_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

/* What mountinfo says about one mount point. */
struct csi_mount_state {
    unsigned count; /* mounts stacked on the path (0: not a mount point) */
    bool read_only; /* of the top one */
};

struct csi_mount_ops {
    /* Non-recursive bind of source onto target; read-only when asked (a bind, then a
     * MS_REMOUNT|MS_BIND|MS_RDONLY). Leaves nothing mounted on failure. Negative errno. */
    int (*bind)(const char *source, const char *target, bool read_only);
    /* Unmounts the top mount at target (lazily when busy). Negative errno. */
    int (*unmount)(const char *target);
    /* Fills *ret for path from the mount table. Negative errno. */
    int (*state)(const char *path, struct csi_mount_state *ret);
};

/* The real thing: mount(2), umount2(2), /proc/self/mountinfo. */
extern const struct csi_mount_ops csi_mount_ops_linux;

/* Scans mountinfo text (a stream) for mount point path. Pure: no syscalls besides reading f.
 * Lines longer than the internal buffer are skipped, not misparsed. */
#include <stdio.h>
int csi_mountinfo_scan(FILE *f, const char *path, struct csi_mount_state *ret);

/* Decodes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash) from
 * in into out (size bytes). Returns -ENAMETOOLONG when it does not fit. */
int csi_mountinfo_unescape(const char *in, size_t len, char *out, size_t size);

#endif /* CSI_MOUNT_H */
