/*
 * caller.h - acting with the authority of the process at the other end of the Unix socket.
 *
 * dfdaemon usually runs as root and its socket is open to every pod, so it must never touch
 * a path a caller names with its own authority. Instead the worker thread takes on the
 * caller's identity for the file-system operations on that path: dfd_caller_enter() sets this
 * thread's supplementary groups (the raw setgroups syscall: glibc's wrapper changes every
 * thread), fsgid and fsuid to the caller's, so the kernel decides every access atomically,
 * with ACLs, exactly as it would for the caller itself. A root daemon whose fsuid is not 0
 * loses CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_CHOWN and the other file
 * capabilities until dfd_caller_leave() puts fsuid back (capabilities(7)).
 *
 * Between enter and leave the thread does path operations and nothing else: no SQLite, no
 * store access, no logging. dfd_caller_leave() aborts the process when it cannot restore the
 * identity: a worker with the wrong identity must not serve anything else.
 *
 * A caller in another mount namespace than the daemon's (a pod) is refused before anything
 * changes (FAILED_PRECONDITION): its paths name files of its own view, and the daemon would
 * resolve them in the host's, as root for a pod's root.
 *
 * A daemon that is not root cannot take on another uid: it acts for callers of its own uid
 * (nothing to switch) and refuses the others with -EACCES, naming the stream fallback.
 */
#ifndef DFD_CALLER_H
#define DFD_CALLER_H

#include <stdbool.h>
#include <sys/types.h>

#include "dfc/error.h"

/* More supplementary groups than this is refused, not truncated: dropping a group can grant
 * access (a file mode like 0604 denies its group what it allows everyone else). */
#define DFD_CALLER_MAX_GROUPS 256

struct dfd_caller {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    gid_t groups[DFD_CALLER_MAX_GROUPS];
    int n_groups;
    bool too_many_groups; /* /proc showed more than DFD_CALLER_MAX_GROUPS */
    bool same_mnt_ns;     /* its mount namespace is the daemon's, so its paths name the files
                             the daemon would open; false when /proc does not tell */
};

/* What dfd_caller_enter() replaced on this thread. */
struct dfd_caller_saved {
    bool switched; /* false: the daemon already is the caller, nothing to restore */
    uid_t fsuid;
    gid_t fsgid;
    gid_t groups[DFD_CALLER_MAX_GROUPS];
    int n_groups;
};

/* Fills a caller from its socket credentials (SO_PEERCRED: pid, euid, egid). Its
 * supplementary groups come from /proc/<pid>/status when that file's effective Uid and Gid
 * match the credentials (else the pid is another process now, or in another pid namespace,
 * and only the primary group counts). */
void dfd_caller_init(struct dfd_caller *c, pid_t pid, uid_t uid, gid_t gid);

/* Makes this thread act as the caller for file-system access. 0, or DFC_E_FAILED_PRECONDITION
 * (and only then) when the caller is in another mount namespace than the daemon's, so its
 * paths are not the daemon's to open, or -EACCES when the daemon cannot act for it (a message
 * in err), or another negative errno when a switch did not take (the thread's identity is then
 * restored). On success, dfd_caller_leave() must follow on the
 * same thread before it does anything else. */
int dfd_caller_enter(const struct dfd_caller *c, struct dfd_caller_saved *saved,
                     struct dfc_error *err);

/* Restores what dfd_caller_enter() saved; aborts the process if that fails. */
void dfd_caller_leave(const struct dfd_caller_saved *saved);

#endif /* DFD_CALLER_H */
