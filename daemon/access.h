/*
 * access.h - may this caller do that? Checks on behalf of the process at the other end of the
 * Unix socket (SO_PEERCRED), beyond upstream, which lets any caller import any file the
 * daemon (usually root) can read and write exports anywhere it can write.
 *
 * The checks evaluate classic mode bits for the caller's uid, primary gid and supplementary
 * groups (read from /proc/<pid>/status): the file must be readable, every directory on its
 * resolved path searchable; an export's directory writable and searchable. uid 0 may do
 * anything. POSIX ACLs and LSMs are not consulted, so the checks may refuse a few accesses
 * the kernel would allow, never the reverse.
 */
#ifndef DFD_ACCESS_H
#define DFD_ACCESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "dfc/error.h"

#define DFD_CALLER_MAX_GROUPS 64

struct dfd_caller {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    gid_t groups[DFD_CALLER_MAX_GROUPS];
    int n_groups;
};

/* Fills a caller from its credentials; reads its supplementary groups when /proc shows them. */
void dfd_caller_init(struct dfd_caller *c, pid_t pid, uid_t uid, gid_t gid);

/* -EACCES unless the caller may read the open file fd (whose path is shown in messages). */
int dfd_access_read_fd(const struct dfd_caller *c, int fd, const char *shown_path,
                       struct dfc_error *err);

/* -EACCES unless the caller may create or replace path's last component. */
int dfd_access_create(const struct dfd_caller *c, const char *path, struct dfc_error *err);

#endif /* DFD_ACCESS_H */
