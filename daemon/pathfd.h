/*
 * pathfd.h - resolving a path a caller names exactly once, into a descriptor.
 *
 * Call these between dfd_caller_enter() and dfd_caller_leave() (caller.h): the kernel then
 * checks every step with the caller's identity. Each resolves with openat2() and
 * RESOLVE_NO_MAGICLINKS, so /proc/<pid>/fd/N, .../cwd and .../root (the daemon's own
 * descriptors and views) are refused, and returns a descriptor that every later step uses
 * with *at() calls: nothing re-resolves the string, so swapping a symlink on the path
 * afterwards changes nothing. They only make syscalls (no logging, no allocation beyond the
 * error message in err). uid is shown in messages.
 */
#ifndef DFD_PATHFD_H
#define DFD_PATHFD_H

#include <stddef.h>
#include <sys/types.h>

#include "dfc/error.h"

/* Opens the regular file at path for reading. Anything else (FIFO, device, socket,
 * directory, a file in /proc) is refused with -EINVAL before it is opened for reading, so
 * nothing blocks and no device sees an open. -ENOENT when the caller cannot find it, -EACCES
 * when it may not read it (or search a directory on the way). */
int dfd_pathfd_open_file(const char *path, uid_t uid, int *ret_fd, struct dfc_error *err);

/* Opens the directory that will hold path's last component (an O_PATH descriptor) and copies
 * that component into base (size bytes). field names the request field in messages. */
int dfd_pathfd_open_parent(const char *field, const char *path, uid_t uid, int *ret_dirfd,
                           char *base, size_t size, struct dfc_error *err);

#endif /* DFD_PATHFD_H */
