/*
 * published.h - how many volumes this node has published: the bind mounts of the socket dir
 * below the kubelet dir, counted from /proc/self/mountinfo (so the count survives a restart
 * of the plugin, and a mount someone else took off is not counted).
 */
#ifndef CSI_PUBLISHED_H
#define CSI_PUBLISHED_H

#include <stdint.h>
#include <stdio.h>

/* Counts the mounts in the mountinfo table f whose mount point lies below kubelet_dir and
 * which show socket_dir: the same device (MAJ:MIN) and root as socket_dir has in the mount
 * that holds it. Both paths are absolute and canonical (no symlinks, no trailing slash but
 * "/"). Pure: reads f twice (rewinds it), lines of any length. -ENOENT when no mount holds
 * socket_dir, -E2BIG past CSI_MOUNTINFO_MAX_LINES lines, -ENOMEM. */
int csi_published_count(FILE *f, const char *socket_dir, const char *kubelet_dir, uint64_t *ret);

#endif /* CSI_PUBLISHED_H */
