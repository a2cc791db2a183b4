/*
 * dragonfly.h - the fixed numbers of the Dragonfly persistent-cache contract that more than
 * one binary checks, and this project's one metadata key. dfdaemon's request validation
 * (daemon/validate.c), dfcache's flag checks and the piece geometry use these, so a value
 * dfcache accepts is one the daemon accepts. Where the numbers come from:
 * docs/dragonfly-compat.md, "Limits".
 *
 * Constants only; no functions, nothing to own.
 */
#ifndef DFC_DRAGONFLY_H
#define DFC_DRAGONFLY_H

#include <stdint.h>

#include "dfc/units.h" /* DFC_NS_PER_SEC */

/* ttl of an import: dfcache's and the scheduler's rule (5m..168h); upstream dfdaemon's own
 * proto rule says 60 s, but the scheduler refuses less than 300 s. */
#define DFC_TTL_MIN_NS (INT64_C(300) * DFC_NS_PER_SEC)
#define DFC_TTL_MAX_NS (INT64_C(7 * 86400) * DFC_NS_PER_SEC)

/* piece_length: the scheduler's PersistentCacheTask rule, and the automatic clamp. */
#define DFC_PIECE_LENGTH_MIN ((uint64_t)4 << 20)
#define DFC_PIECE_LENGTH_MAX ((uint64_t)64 << 20)

/* persistent_replica_count of an import (UploadPersistentCacheTaskRequest). */
#define DFC_REPLICA_COUNT_MIN 1
#define DFC_REPLICA_COUNT_MAX 5

/* Our extension: gRPC metadata "dev:ino" (decimal) of the file dfcache stat()ed, sent with a
 * path import; the daemon imports only when the file it opened is that very inode. */
#define DFC_FILE_IDENTITY_MD "x-dfc-file-identity"

/* Our extension: gRPC metadata naming a descriptor passed on the sibling socket
 * (<socketPath>.fd, dfc/fdpass.h): 32 hex digits, the one-time token the daemon answered. With
 * it, an import reads that descriptor; `path` is validated and logged, never opened. */
#define DFC_FD_TOKEN_MD "x-dfc-fd-token"

/* Our extension: gRPC trailing metadata naming, as a fixed token, why a call failed, beside
 * the status message (which is for people and may change). */
#define DFC_REASON_MD "x-dfc-reason"

/* DFC_REASON_MD of the FAILED_PRECONDITION of a path import or an output_path export from a
 * caller in another mount namespace than the daemon's (a pod): the daemon resolves no path of
 * such a caller. dfcache then passes the descriptor, or writes the export itself. */
#define DFC_REASON_OTHER_MOUNT_NS "other-mount-ns"

/* Part of that status's message, for people. */
#define DFC_OTHER_MOUNT_NS_MSG "runs in another mount namespace than the daemon"

#endif /* DFC_DRAGONFLY_H */
