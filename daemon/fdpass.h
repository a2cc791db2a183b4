/*
 * fdpass.h - the sibling socket `<download.server.socketPath>.fd`: callers pass an open file
 * descriptor (SCM_RIGHTS, protocol in dfc/fdpass.h) and get a one-time token; an
 * UploadPersistentCacheTask with that token (DFC_FD_TOKEN_MD) imports from the descriptor, so
 * a caller in another mount namespace (a pod) imports exactly what it could open itself, and
 * the daemon resolves no path.
 *
 * Its own accept thread (never the gRPC completion queue) reads the passer's SO_PEERCRED, lets
 * each connection wait (non-blocking, a few per uid, 2 s at most) for its message so that a
 * client that never sends holds up no other passer, checks the descriptor's open flags (opened
 * for reading, not O_PATH; one descriptor only) and keeps {token, fd, uid, pid, expiry} in a
 * bounded table: at most DFD_FDPASS_PER_UID waiting descriptors per uid and
 * DFD_FDPASS_MAX in all. The thread closes expired descriptors (a timed poll), and
 * dfd_fdpass_stop() closes every one left.
 *
 * Ownership: the table owns each waiting descriptor; dfd_fdpass_take() hands it to the caller,
 * who closes it.
 */
#ifndef DFD_FDPASS_H
#define DFD_FDPASS_H

#include <stdint.h>
#include <sys/types.h>

#include "dfc/error.h"

#define DFD_FDPASS_PER_UID 16
#define DFD_FDPASS_MAX     1024

struct dfd_fdpass;

/* Binds path (mode, group gid; -1: unchanged), as the main socket is bound, and starts the
 * thread. ttl_ns: how long a token waits for its call. */
int dfd_fdpass_start(const char *path, unsigned mode, int gid, int64_t ttl_ns,
                     struct dfd_fdpass **ret, struct dfc_error *err);

/* Stops the thread, closes every waiting descriptor, removes the socket file. NULL is fine. */
void dfd_fdpass_stop(struct dfd_fdpass *p);

/* Takes the descriptor of token (one use) for the gRPC caller pid/uid into *ret_fd.
 * DFC_E_PERMISSION_DENIED-like -EACCES naming why: unknown, already used, expired, or passed
 * by another process; -EINVAL when token is malformed, or when the descriptor is not a
 * regular file or is on procfs (checked here, on the caller's thread: fstat of a file on a
 * hung FUSE or NFS server waits, and must not wait on the passing thread; the token is used
 * up and the descriptor closed then). */
int dfd_fdpass_take(struct dfd_fdpass *p, const char *token, pid_t pid, uid_t uid, int *ret_fd,
                    struct dfc_error *err);

/* Descriptors waiting in the table (for logs and tests). */
unsigned dfd_fdpass_waiting(struct dfd_fdpass *p);

#endif /* DFD_FDPASS_H */
