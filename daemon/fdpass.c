/*
 * fdpass.c - the sibling socket for descriptor passing and its token table (fdpass.h).
 *
 * One thread: poll(listener, wake pipe, the connections waiting for their message) with a
 * timeout at the next expiry. A connection is accepted at once (non-blocking) and waits in a
 * small table until its one message arrives (then it is served: one answer line) or until
 * RECV_TIMEOUT_MS passed (an error line), so a client that connects and never sends holds up
 * nobody but itself: at most PENDING_PER_UID connections of one uid wait at once, and
 * PENDING_MAX in all; a newer connection pushes out the oldest waiting one of its uid, or
 * else the oldest of all (an error line). Used and expired entries stay as tombstones until
 * twice their expiry so that a late call learns "already used" or "expired" instead of
 * "unknown".
 */
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/dragonfly.h"
#include "dfc/fdpass.h"
#include "dfc/log.h"

#define RECV_TIMEOUT_MS 2000
#define MAX_RECV_FDS    16 /* room to receive (and close) extras; more is MSG_CTRUNC */
#define PENDING_MAX     64 /* connections waiting for their message */
#define PENDING_PER_UID 8

enum slot_state { SLOT_FREE, SLOT_WAITING, SLOT_USED, SLOT_EXPIRED };

struct slot {
    enum slot_state state;
    char token[DFC_FDPASS_TOKEN_HEX + 1];
    int fd;
    uid_t uid;
    pid_t pid;
    int64_t expiry_ns; /* CLOCK_MONOTONIC */
};

/* A connection waiting for its message (the thread's own: no lock). */
struct pending {
    int fd; /* -1: free */
    struct ucred cred;
    bool cred_ok;
    int64_t deadline_ns; /* CLOCK_MONOTONIC */
    uint64_t seq;        /* accept order: the oldest is pushed out first */
};

struct dfd_fdpass {
    char path[108];
    int listen_fd;
    int wake[2];
    int64_t ttl_ns;
    pthread_t thread;
    pthread_mutex_t mu;
    struct slot slots[DFD_FDPASS_MAX]; /* under mu */
    struct pending pending[PENDING_MAX];
    uint64_t accepted;
};

/* ---- the table (mu held) ---- */

static void slot_close(struct slot *s, enum slot_state state) {
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->state = state;
}

/* Closes expired descriptors, frees old tombstones; returns the next deadline (or -1). */
static int64_t sweep_locked(struct dfd_fdpass *p, int64_t now, unsigned *ret_closed) {
    int64_t next = -1;
    unsigned closed = 0;
    for (size_t i = 0; i < DFD_FDPASS_MAX; i++) {
        struct slot *s = &p->slots[i];
        int64_t at = s->state == SLOT_WAITING ? s->expiry_ns : s->expiry_ns + p->ttl_ns;
        if (s->state == SLOT_FREE) {
            continue;
        }
        if (now >= at) {
            closed += s->state == SLOT_WAITING;
            slot_close(s, s->state == SLOT_WAITING ? SLOT_EXPIRED : SLOT_FREE);
            at = s->state == SLOT_EXPIRED ? s->expiry_ns + p->ttl_ns : -1;
        }
        if (at >= 0 && (next < 0 || at < next)) {
            next = at;
        }
    }
    *ret_closed = closed;
    return next;
}

/* A slot for a new entry of uid: a free one, else the oldest tombstone; -EMFILE when uid or
 * the whole table is at its limit. */
static int slot_alloc_locked(struct dfd_fdpass *p, uid_t uid, struct slot **ret,
                             struct dfc_error *err) {
    struct slot *free_slot = NULL, *tomb = NULL;
    unsigned mine = 0;
    for (size_t i = 0; i < DFD_FDPASS_MAX; i++) {
        struct slot *s = &p->slots[i];
        if (s->state == SLOT_WAITING) {
            mine += s->uid == uid;
        } else if (s->state == SLOT_FREE) {
            free_slot = free_slot ? free_slot : s;
        } else if (tomb == NULL || s->expiry_ns < tomb->expiry_ns) {
            tomb = s;
        }
    }
    if (mine >= DFD_FDPASS_PER_UID) {
        return dfc_error_set(err, -EMFILE,
                             "uid %u already has %d descriptors waiting for their import call",
                             (unsigned)uid, DFD_FDPASS_PER_UID);
    }
    *ret = free_slot ? free_slot : tomb;
    if (*ret == NULL) {
        return dfc_error_set(err, -EMFILE, "%d descriptors are waiting for their import call",
                             DFD_FDPASS_MAX);
    }
    return 0;
}

static int new_token(char out[DFC_FDPASS_TOKEN_HEX + 1], struct dfc_error *err) {
    unsigned char raw[DFC_FDPASS_TOKEN_HEX / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        return dfc_error_errno(err, -EAGAIN, "no random bytes for a token");
    }
    for (size_t i = 0; i < sizeof(raw); i++) {
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    }
    return 0;
}

/* ---- one connection ---- */

/* The checks of a passed descriptor, in two halves. Its open flags (not O_PATH, opened for
 * reading) are the descriptor's own: fcntl never waits, so the passing thread checks them
 * before it answers. What the file is (regular, not on procfs) takes fstat and fstatfs, which
 * on a FUSE or hard-mounted NFS file wait for that filesystem's server, perhaps the caller's
 * own hung one: that half runs when the token is taken, on the caller's own RPC worker, so a
 * hung filesystem holds one call of its uid, not this thread (every pod's passing). Not
 * covered: this thread still close()s the descriptors it refuses or lets expire, and close()
 * of a FUSE file sends FLUSH and waits for the answer (unkillably once the server has read
 * it), so a passer that serves its own FUSE mount and never answers can still stop it. */
static int check_flags(int fd, struct dfc_error *err) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) {
        return dfc_error_errno(err, -errno, "fcntl(F_GETFL) on the descriptor");
    }
    if ((fl & O_PATH) != 0) {
        return dfc_error_set(err, -EACCES,
                             "the descriptor was opened with O_PATH, not for reading");
    }
    int acc = fl & O_ACCMODE;
    if (acc != O_RDONLY && acc != O_RDWR) {
        return dfc_error_set(err, -EACCES, "the descriptor was opened write-only, not for reading");
    }
    return 0;
}

static int check_file(int fd, struct dfc_error *err) {
    struct stat st;
    struct statfs sf;
    if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0) {
        return dfc_error_errno(err, -errno, "stat the descriptor");
    }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a pipe"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                                                  : "of another kind";
        return dfc_error_set(err, -EINVAL, "the descriptor is %s, not a regular file", kind);
    }
    if (sf.f_type == PROC_SUPER_MAGIC) {
        return dfc_error_set(err, -EINVAL, "the descriptor is a file on procfs");
    }
    return 0;
}

/* Receives exactly one descriptor with a one-byte payload into *ret_fd, without waiting:
 * -EAGAIN (err untouched) when nothing has arrived yet. */
static int recv_one_fd(int conn, int *ret_fd, struct dfc_error *err) {
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_RECV_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    do {
        n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return -EAGAIN; /* nothing yet: the connection keeps waiting */
    }
    if (n < 0) {
        return dfc_error_errno(err, -errno, "receive the descriptor");
    }
    int fds[MAX_RECV_FDS], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfds < MAX_RECV_FDS; i++) {
            memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    }
    int r = 0;
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
        r = dfc_error_set(err, -EINVAL, "too many descriptors (the control message was truncated)");
    } else if (n != 1) {
        r = dfc_error_set(err, -EINVAL, "the message must be one byte with one descriptor");
    } else if (nfds != 1) {
        r = dfc_error_set(err, -EINVAL, "%d descriptors passed; pass exactly one", nfds);
    }
    if (r < 0) {
        for (int i = 0; i < nfds; i++) {
            close(fds[i]);
        }
        return r;
    }
    *ret_fd = fds[0];
    return 0;
}

/* One short line into a fresh connection's empty send buffer: it never has to wait. */
static void reply(int conn, const char *line) {
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t n = send(conn, line + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        off += (size_t)n;
    }
}

/* Answers a connection whose wait ended: r < 0 with err, the refusal to send. */
static void refuse(const struct pending *c, int r, const struct dfc_error *err) {
    char line[400];
    snprintf(line, sizeof(line), "error %d %s\n", dfc_error_to_grpc(r), dfc_error_msg(err));
    DFC_LOG(DFC_LOG_INFO, "fdpass.refused", "pid=%d uid=%u reason=\"%s\"", (int)c->cred.pid,
            (unsigned)c->cred.uid, dfc_error_msg(err));
    reply(c->fd, line);
}

/* Serves a waiting connection that polled readable: false (and nothing done) when its message
 * has not arrived after all. */
static bool serve_conn(struct dfd_fdpass *p, const struct pending *c) {
    struct ucred cred = c->cred;
    int conn = c->fd;
    struct dfc_error err;
    int fd = -1, r;
    char token[DFC_FDPASS_TOKEN_HEX + 1], line[400];
    if (!c->cred_ok) {
        r = dfc_error_set(&err, -EACCES, "the passer's credentials are unknown");
    } else if ((r = recv_one_fd(conn, &fd, &err)) == -EAGAIN) {
        return false;
    }
    if (r == 0) {
        r = check_flags(fd, &err);
    }
    if (r == 0) {
        r = new_token(token, &err);
    }
    if (r == 0) {
        pthread_mutex_lock(&p->mu);
        struct slot *s;
        r = slot_alloc_locked(p, cred.uid, &s, &err);
        if (r == 0) {
            slot_close(s, SLOT_FREE); /* a reused tombstone has no descriptor */
            *s = (struct slot){.state = SLOT_WAITING,
                               .fd = fd,
                               .uid = cred.uid,
                               .pid = cred.pid,
                               .expiry_ns = dfc_mono_ns() + p->ttl_ns};
            memcpy(s->token, token, sizeof(token));
            fd = -1;
        }
        pthread_mutex_unlock(&p->mu);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (r < 0) {
        refuse(c, r, &err);
        return true;
    }
    snprintf(line, sizeof(line), "ok %s\n", token);
    DFC_LOG(DFC_LOG_DEBUG, "fdpass.accepted", "pid=%d uid=%u", (int)cred.pid, (unsigned)cred.uid);
    reply(conn, line);
    return true;
}

static void pending_close(struct pending *c) {
    close(c->fd);
    c->fd = -1;
}

/* Where a new connection of uid waits: a free entry, after pushing out (answered, closed) the
 * oldest waiting connection of uid when it has PENDING_PER_UID, else the oldest of all when
 * none is free. */
static struct pending *pending_slot(struct dfd_fdpass *p, uid_t uid) {
    struct pending *free_c = NULL, *oldest = NULL, *oldest_mine = NULL;
    unsigned mine = 0;
    for (size_t i = 0; i < PENDING_MAX; i++) {
        struct pending *c = &p->pending[i];
        if (c->fd < 0) {
            free_c = free_c ? free_c : c;
            continue;
        }
        if (oldest == NULL || c->seq < oldest->seq) {
            oldest = c;
        }
        if (c->cred.uid == uid) {
            mine++;
            if (oldest_mine == NULL || c->seq < oldest_mine->seq) {
                oldest_mine = c;
            }
        }
    }
    struct pending *out = mine >= PENDING_PER_UID ? oldest_mine : free_c ? NULL : oldest;
    if (out != NULL) {
        struct dfc_error err;
        int r = dfc_error_set(&err, -EMFILE,
                              "too many connections wait to pass a descriptor (%s); pass it "
                              "right after connecting",
                              out == oldest_mine ? "of this uid" : "in all");
        refuse(out, r, &err);
        pending_close(out);
        free_c = out;
    }
    return free_c;
}

/* Accepts what the listener has queued (non-blocking) into the waiting table. */
static void accept_all(struct dfd_fdpass *p, int64_t now) {
    for (unsigned k = 0; k < PENDING_MAX; k++) {
        int conn = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) {
            return; /* EAGAIN: nothing more; anything else: try again on the next poll */
        }
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        bool ok = getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid > 0;
        if (!ok) {
            cred = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
        }
        struct pending *c = pending_slot(p, cred.uid);
        *c = (struct pending){.fd = conn,
                              .cred = cred,
                              .cred_ok = ok,
                              .deadline_ns = now + (int64_t)RECV_TIMEOUT_MS * 1000000,
                              .seq = p->accepted++};
    }
}

static void *fdpass_thread(void *arg) {
    struct dfd_fdpass *p = arg;
    for (;;) {
        unsigned closed;
        pthread_mutex_lock(&p->mu);
        int64_t now = dfc_mono_ns(), next = sweep_locked(p, now, &closed);
        pthread_mutex_unlock(&p->mu);
        if (closed > 0) {
            DFC_LOG(DFC_LOG_INFO, "fdpass.expired", "closed=%u", closed);
        }
        struct pollfd pf[2 + PENDING_MAX] = {{.fd = p->listen_fd, .events = POLLIN},
                                             {.fd = p->wake[0], .events = POLLIN}};
        struct pending *polled[PENDING_MAX];
        nfds_t n_pf = 2;
        for (size_t i = 0; i < PENDING_MAX; i++) {
            struct pending *c = &p->pending[i];
            if (c->fd < 0) {
                continue;
            }
            if (next < 0 || c->deadline_ns < next) {
                next = c->deadline_ns;
            }
            polled[n_pf - 2] = c;
            pf[n_pf++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        }
        int timeout = -1;
        if (next >= 0) {
            int64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
        }
        int n = poll(pf, n_pf, timeout);
        if (n < 0 && errno != EINTR) {
            DFC_LOG(DFC_LOG_ERROR, "fdpass.poll_failed", "errno=%d", errno);
            break;
        }
        if (pf[1].revents != 0) {
            break;
        }
        now = dfc_mono_ns();
        /* The connections whose message arrived (or that hung up), then the ones out of
         * time, then the new ones. */
        for (nfds_t i = 2; n > 0 && i < n_pf; i++) {
            struct pending *c = polled[i - 2];
            if (pf[i].revents != 0 && serve_conn(p, c)) {
                pending_close(c);
            }
        }
        for (size_t i = 0; i < PENDING_MAX; i++) {
            struct pending *c = &p->pending[i];
            if (c->fd >= 0 && now >= c->deadline_ns) {
                struct dfc_error err;
                int r = dfc_error_set(&err, -ETIMEDOUT, "no descriptor arrived within %d ms",
                                      RECV_TIMEOUT_MS);
                refuse(c, r, &err);
                pending_close(c);
            }
        }
        if (n > 0 && (pf[0].revents & POLLIN) != 0) {
            accept_all(p, now);
        }
    }
    return NULL;
}

/* ---- start, stop, take ---- */

static int bind_socket(struct dfd_fdpass *p, unsigned mode, int gid, struct dfc_error *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char tmp[sizeof(sa.sun_path)];
    if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", p->path, (int)getpid()) >= (int)sizeof(tmp)) {
        return dfc_error_set(err, -ENAMETOOLONG, "socket path `%s` is too long", p->path);
    }
    struct stat st;
    if (lstat(p->path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        return dfc_error_set(err, -EEXIST, "`%s` exists and is not a socket", p->path);
    }
    memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
    (void)unlink(tmp);
    int r = 0;
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    /* Bound under a temporary name, given its mode and group, renamed into place. */
    if (p->listen_fd < 0) {
        r = dfc_error_errno(err, -errno, "socket for `%s`", p->path);
    } else if (bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = dfc_error_errno(err, -errno, "bind `%s`", tmp);
    } else if (chmod(tmp, mode) < 0) {
        r = dfc_error_errno(err, -errno, "chmod `%s` to %04o", tmp, mode);
    } else if (gid >= 0 && chown(tmp, (uid_t)-1, (gid_t)gid) < 0) {
        r = dfc_error_errno(err, -errno, "chown `%s` to group %d", tmp, gid);
    } else if (listen(p->listen_fd, 128) < 0) {
        r = dfc_error_errno(err, -errno, "listen on `%s`", tmp);
    } else if (rename(tmp, p->path) < 0) {
        r = dfc_error_errno(err, -errno, "rename `%s` to `%s`", tmp, p->path);
    }
    if (r < 0) {
        (void)unlink(tmp);
    }
    return r;
}

int dfd_fdpass_start(const char *path, unsigned mode, int gid, int64_t ttl_ns,
                     struct dfd_fdpass **ret, struct dfc_error *err) {
    struct dfd_fdpass *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    p->listen_fd = -1;
    p->wake[0] = p->wake[1] = -1;
    p->ttl_ns = ttl_ns;
    for (size_t i = 0; i < DFD_FDPASS_MAX; i++) {
        p->slots[i].fd = -1;
    }
    for (size_t i = 0; i < PENDING_MAX; i++) {
        p->pending[i].fd = -1;
    }
    pthread_mutex_init(&p->mu, NULL);
    int r = 0;
    if (dfc_fdpass_path(path, p->path, sizeof(p->path)) < 0) {
        r = dfc_error_set(err, -ENAMETOOLONG,
                          "download.server.socketPath `%s` is too long for "
                          "its sibling `%s" DFC_FDPASS_SUFFIX "`",
                          path, path);
    } else if ((r = bind_socket(p, mode, gid, err)) < 0) {
        p->path[0] = '\0';
    } else if (pipe2(p->wake, O_CLOEXEC) < 0) {
        r = dfc_error_errno(err, -errno, "pipe");
    } else if ((r = -pthread_create(&p->thread, NULL, fdpass_thread, p)) < 0) {
        r = dfc_error_errno(err, r, "start the descriptor-passing thread");
    }
    if (r < 0) {
        if (p->wake[0] >= 0) {
            close(p->wake[0]);
            close(p->wake[1]);
            p->wake[0] = p->wake[1] = -1;
        }
        p->thread = 0;
        dfd_fdpass_stop(p);
        return r;
    }
    *ret = p;
    return 0;
}

void dfd_fdpass_stop(struct dfd_fdpass *p) {
    if (p == NULL) {
        return;
    }
    if (p->wake[1] >= 0) {
        ssize_t n;
        do {
            n = write(p->wake[1], "x", 1);
        } while (n < 0 && errno == EINTR);
        pthread_join(p->thread, NULL);
        close(p->wake[0]);
        close(p->wake[1]);
    }
    if (p->listen_fd >= 0) {
        close(p->listen_fd);
    }
    if (p->path[0] != '\0') {
        (void)unlink(p->path);
    }
    for (size_t i = 0; i < DFD_FDPASS_MAX; i++) {
        slot_close(&p->slots[i], SLOT_FREE);
    }
    for (size_t i = 0; i < PENDING_MAX; i++) {
        if (p->pending[i].fd >= 0) {
            pending_close(&p->pending[i]);
        }
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int dfd_fdpass_take(struct dfd_fdpass *p, const char *token, pid_t pid, uid_t uid, int *ret_fd,
                    struct dfc_error *err) {
    if (strlen(token) != DFC_FDPASS_TOKEN_HEX ||
        strspn(token, "0123456789abcdef") != DFC_FDPASS_TOKEN_HEX) {
        return dfc_error_set(err, -EINVAL, DFC_FD_TOKEN_MD " must be %d lowercase hex digits",
                             DFC_FDPASS_TOKEN_HEX);
    }
    int r = 0;
    int64_t now = dfc_mono_ns();
    pthread_mutex_lock(&p->mu);
    struct slot *s = NULL;
    for (size_t i = 0; i < DFD_FDPASS_MAX && s == NULL; i++) {
        if (p->slots[i].state != SLOT_FREE && strcmp(p->slots[i].token, token) == 0) {
            s = &p->slots[i];
        }
    }
    if (s == NULL) {
        r = dfc_error_set(err, -EACCES, "permission denied: unknown descriptor token");
    } else if (s->state == SLOT_USED) {
        r = dfc_error_set(err, -EACCES, "permission denied: the descriptor token was already used");
    } else if (s->state == SLOT_EXPIRED || now >= s->expiry_ns) {
        slot_close(s, SLOT_EXPIRED);
        r = dfc_error_set(err, -EACCES, "permission denied: the descriptor token expired");
    } else if (s->uid != uid || s->pid != pid) {
        r = dfc_error_set(err, -EACCES,
                          "permission denied: the descriptor was passed by another process (pid "
                          "%d uid %u), not this caller (pid %d uid %u)",
                          (int)s->pid, (unsigned)s->uid, (int)pid, (unsigned)uid);
    } else {
        *ret_fd = s->fd;
        s->fd = -1;
        s->state = SLOT_USED;
    }
    pthread_mutex_unlock(&p->mu);
    if (r == 0 && (r = check_file(*ret_fd, err)) < 0) { /* unlocked: it may wait (above) */
        close(*ret_fd);
        *ret_fd = -1;
    }
    return r;
}

unsigned dfd_fdpass_waiting(struct dfd_fdpass *p) {
    unsigned n = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < DFD_FDPASS_MAX; i++) {
        n += p->slots[i].state == SLOT_WAITING;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}
