/*
 * caller.c - the Unix-socket caller's identity, and taking it on for one thread.
 */
#include "caller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dfc/dragonfly.h"

/* "Uid:\t<real>\t<effective>\t<saved>\t<fs>": the effective (second) value. */
static bool parse_effective(const char *line, unsigned long *ret) {
    char *end;
    (void)strtoul(line, &end, 10);
    if (end == line) {
        return false;
    }
    const char *p = end;
    *ret = strtoul(p, &end, 10);
    return end != p;
}

static void parse_groups(struct dfd_caller *c, const char *p) {
    char *end;
    for (;;) {
        unsigned long g = strtoul(p, &end, 10);
        if (end == p) {
            return;
        }
        p = end;
        if (c->n_groups == DFD_CALLER_MAX_GROUPS) {
            c->too_many_groups = true;
            return;
        }
        c->groups[c->n_groups++] = (gid_t)g;
    }
}

void dfd_caller_init(struct dfd_caller *c, pid_t pid, uid_t uid, gid_t gid) {
    memset(c, 0, sizeof(*c));
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = pid > 0 ? fopen(path, "re") : NULL;
    if (f == NULL) {
        return; /* another pid namespace: the primary group only */
    }
    struct dfd_caller found = *c;
    /* Read before the status check below, so that a pid taken over meanwhile by a process of
     * another uid or gid is caught by it, as for the groups. */
    struct stat mine, theirs;
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
    found.same_mnt_ns = stat("/proc/self/ns/mnt", &mine) == 0 && stat(path, &theirs) == 0 &&
                        mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
    bool uid_ok = false, gid_ok = false;
    unsigned long v;
    char *line = NULL; /* a Groups line may be long: getline grows the buffer */
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "Uid:", 4) == 0) {
            uid_ok = parse_effective(line + 4, &v) && v == (unsigned long)uid;
        } else if (strncmp(line, "Gid:", 4) == 0) {
            gid_ok = parse_effective(line + 4, &v) && v == (unsigned long)gid;
        } else if (strncmp(line, "Groups:", 7) == 0) {
            parse_groups(&found, line + 7);
        }
    }
    free(line);
    fclose(f);
    if (uid_ok && gid_ok) { /* still the process that connected, as far as it shows */
        *c = found;
    }
}

/* The raw syscalls: per thread, where glibc's setgroups() changes every thread. 32-bit
 * architectures name the 32-bit-id versions *32. */
#ifdef SYS_setfsuid32
#define SYS_SETFSUID  SYS_setfsuid32
#define SYS_SETFSGID  SYS_setfsgid32
#define SYS_SETGROUPS SYS_setgroups32
#define SYS_GETGROUPS SYS_getgroups32
#else
#define SYS_SETFSUID  SYS_setfsuid
#define SYS_SETFSGID  SYS_setfsgid
#define SYS_SETGROUPS SYS_setgroups
#define SYS_GETGROUPS SYS_getgroups
#endif

static int thread_setgroups(int n, const gid_t *groups) {
    return syscall(SYS_SETGROUPS, (size_t)n, groups) < 0 ? -errno : 0;
}

static uid_t thread_fsuid(uid_t uid) {
    return (uid_t)syscall(SYS_SETFSUID, uid);
}

static gid_t thread_fsgid(gid_t gid) {
    return (gid_t)syscall(SYS_SETFSGID, gid);
}

/* setfsuid() cannot report failure; asking with an invalid id returns the current one. */
static bool fsuid_is(uid_t uid) {
    return thread_fsuid((uid_t)-1) == uid;
}

static bool fsgid_is(gid_t gid) {
    return thread_fsgid((gid_t)-1) == gid;
}

static int restore(const struct dfd_caller_saved *s) {
    thread_fsuid(s->fsuid);
    if (!fsuid_is(s->fsuid)) {
        return -EPERM;
    }
    thread_fsgid(s->fsgid);
    if (!fsgid_is(s->fsgid)) {
        return -EPERM;
    }
    return thread_setgroups(s->n_groups, s->groups);
}

int dfd_caller_enter(const struct dfd_caller *c, struct dfd_caller_saved *saved,
                     struct dfc_error *err) {
    memset(saved, 0, sizeof(*saved));
    if (!c->same_mnt_ns) {
        /* A pod's root is not the host's: a path it names means a file in its own mount
         * namespace, and the daemon would open or write the host's file of that name. */
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "the caller (pid %d, uid %d) " DFC_OTHER_MOUNT_NS_MSG
                             ", which resolves none of its paths: pass the file's descriptor "
                             "(--transfer fd) or stream it, and export with "
                             "--transfer-from-dfdaemon",
                             (int)c->pid, (int)c->uid);
    }
    uid_t self = geteuid();
    if (self != 0) {
        if (c->uid == self) {
            return 0; /* the daemon is the caller already */
        }
        return dfc_error_set(err, -EACCES,
                             "permission denied: dfdaemon runs as uid %d and cannot act for uid "
                             "%d; stream the file instead",
                             (int)self, (int)c->uid);
    }
    if (c->too_many_groups) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: uid %d is in more than %d supplementary groups, "
                             "too many for the daemon to act for it; stream the file instead",
                             (int)c->uid, DFD_CALLER_MAX_GROUPS);
    }
    long n = syscall(SYS_GETGROUPS, DFD_CALLER_MAX_GROUPS, saved->groups);
    if (n < 0) {
        return dfc_error_errno(err, -errno, "read the daemon's supplementary groups");
    }
    saved->n_groups = (int)n;
    saved->fsuid = thread_fsuid((uid_t)-1);
    saved->fsgid = thread_fsgid((gid_t)-1);
    int r = thread_setgroups(c->n_groups, c->groups);
    if (r < 0) {
        return dfc_error_errno(err, r, "take on the groups of uid %d", (int)c->uid);
    }
    saved->switched = true;
    thread_fsgid(c->gid);
    thread_fsuid(c->uid);
    if (!fsgid_is(c->gid) || !fsuid_is(c->uid)) {
        dfd_caller_leave(saved);
        return dfc_error_set(err, -EPERM, "cannot act as uid %d gid %d", (int)c->uid, (int)c->gid);
    }
    return 0;
}

void dfd_caller_leave(const struct dfd_caller_saved *saved) {
    if (!saved->switched) {
        return;
    }
    int r = restore(saved);
    if (r < 0) {
        /* Nothing else may run with a caller's identity: stop here, loudly. */
        fprintf(stderr, "dfdaemon: cannot restore the worker's identity (errno %d); aborting\n",
                -r);
        abort();
    }
}
