/*
 * export.h - putting a task's content into a directory, on descriptors only.
 *
 * The handler opens the content (as the daemon) and the output's directory (as the caller,
 * pathfd.h), then calls dfd_export_into() still acting as the caller (caller.h): the kernel
 * decides every link, create and rename with the caller's identity, so fs.protected_hardlinks
 * applies to the hard link, sticky directories protect other users' files, and a copy belongs
 * to the caller. Nothing resolves the output path again: every step is an *at() call on dirfd.
 * Knows nothing of callers or the store; only makes syscalls.
 *
 *   hard link   linkat(/proc/self/fd/<content>) into dirfd; without overwrite straight to
 *               base (EEXIST is atomic), with overwrite to a temp name renamed onto base.
 *   copy        an O_TMPFILE in dirfd, copy_file_range (reflinks where the filesystem can),
 *               fsync, then linked to base (or to a temp name renamed onto base): no name
 *               exists until the bytes are complete. Where O_TMPFILE is unsupported, a named
 *               .dfcache-<uuid> temp created with O_EXCL, removed on every failure.
 */
#ifndef DFD_EXPORT_H
#define DFD_EXPORT_H

#include <stdbool.h>
#include <sys/types.h>

#include "dfc/error.h"

struct dfd_export_opts {
    bool overwrite;       /* replace an existing base */
    bool force_hard_link; /* fail rather than copy */
    const char *shown;    /* the output path, for messages */
    uid_t uid;            /* the caller, for messages */
};

/* Puts content_fd's file at dirfd/base; sets *ret_linked. -EEXIST when base exists and
 * overwrite is false (0 when it already is this very inode), -EISDIR when it is a directory,
 * -EACCES when the kernel refuses, -EXDEV with force_hard_link across filesystems. */
int dfd_export_into(int content_fd, int dirfd, const char *base, const struct dfd_export_opts *o,
                    bool *ret_linked, struct dfc_error *err);

#endif /* DFD_EXPORT_H */
