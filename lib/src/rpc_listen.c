/*
 * rpc_listen.c - Unix sockets that the RPC layer accepts itself, so that each connection's
 * SO_PEERCRED is known: an accept thread per socket records the credentials by fd and hands
 * the fd to gRPC core with grpc_server_add_channel_from_fd(). Core names such a call's peer
 * "fd:<n>", which maps it back to its connection; a closed connection's entry stays until a
 * new connection reuses the fd number and overwrites it.
 *
 * DESIGN: the connection caps. Every pod can connect, and each connection costs the daemon a
 * descriptor, so the accept thread caps open connections (max_conns) and open connections per
 * peer uid (max_conns_per_uid) and closes the ones beyond, right after accept. Core closes a
 * connection's fd without telling us, so the counts are upper bounds: each entry remembers its
 * socket's (dev, ino), and when a cap is reached the table is pruned of entries whose fd no
 * longer holds that socket (fstat fails, or the number now names another file). A prune that
 * freed nothing is not repeated for PRUNE_EVERY_MS, so a flood at the cap costs one scan per
 * interval, not one per attempt. Refusals, and accept failures for want of descriptors, write
 * at most one log line per LOG_EVERY_MS per listener, counting the ones in between.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "dfc/log.h"
#include "rpc_server_internal.h"

#define PRUNE_EVERY_MS 50
#define LOG_EVERY_MS   10000

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Forgets the connection on fd (cred_mu held). */
static void conn_drop(struct dfc_rpc_server *s, int fd) {
    struct conn_entry *e = &s->conns[fd];
    if (e->open) {
        e->open = false;
        s->n_conns_open--;
        dfc__uid_count_sub(&s->conn_uids, e->cred.uid);
    }
}

/* Drops the entries whose fd core has closed (cred_mu held); returns how many. */
static unsigned conn_prune(struct dfc_rpc_server *s) {
    unsigned freed = 0;
    for (size_t fd = 0; fd < s->n_conn_slots; fd++) {
        struct conn_entry *e = &s->conns[fd];
        struct stat st;
        if (e->open && (fstat((int)fd, &st) < 0 || st.st_dev != e->dev || st.st_ino != e->ino)) {
            conn_drop(s, (int)fd);
            freed++;
        }
    }
    return freed;
}

static bool conn_over(struct dfc_rpc_server *s, uid_t uid) {
    return s->n_conns_open >= s->max_conns ||
           dfc__uid_count(&s->conn_uids, uid) >= s->max_conns_per_uid;
}

/* Records the connection on fd, or refuses it when it would pass a cap (returns false). A
 * connection whose bookkeeping fails for want of memory is refused too. */
static bool conn_admit(struct dfc_rpc_server *s, int fd, const struct ucred *cred,
                       const struct stat *st) {
    pthread_mutex_lock(&s->cred_mu);
    bool ok = false;
    if ((size_t)fd >= s->n_conn_slots) {
        size_t n = (size_t)fd * 2 + 16;
        struct conn_entry *c = realloc(s->conns, n * sizeof(*c));
        if (c == NULL) {
            goto out;
        }
        memset(c + s->n_conn_slots, 0, (n - s->n_conn_slots) * sizeof(*c));
        s->conns = c;
        s->n_conn_slots = n;
    }
    conn_drop(s, fd); /* the kernel gave us this number again: its old connection is gone */
    if (conn_over(s, cred->uid)) {
        int64_t now = now_ms();
        if (now - s->last_prune_ms >= PRUNE_EVERY_MS) {
            if (conn_prune(s) == 0) {
                s->last_prune_ms = now;
            }
        }
        if (conn_over(s, cred->uid)) {
            goto out;
        }
    }
    if (dfc__uid_count_add(&s->conn_uids, cred->uid) < 0) {
        goto out;
    }
    s->conns[fd] =
        (struct conn_entry){.cred = *cred, .dev = st->st_dev, .ino = st->st_ino, .open = true};
    s->n_conns_open++;
    ok = true;
out:
    pthread_mutex_unlock(&s->cred_mu);
    return ok;
}

static void log_refused(struct unix_listener *l, const struct ucred *cred) {
    struct dfc_rpc_server *s = l->server;
    unsigned n;
    if (dfc__ratelimit_hit(&l->refused_log, LOG_EVERY_MS, &n)) {
        pthread_mutex_lock(&s->cred_mu);
        unsigned open = s->n_conns_open, mine = dfc__uid_count(&s->conn_uids, cred->uid);
        pthread_mutex_unlock(&s->cred_mu);
        DFC_LOG(DFC_LOG_WARN, "rpc.connection_refused",
                "server=%s socket=%s refused=%u last_uid=%u open=%u open_uid=%u "
                "%smaxConnections=%u %smaxConnectionsPerUser=%u",
                s->name, l->path, n, (unsigned)cred->uid, open, mine, s->prefix, s->max_conns,
                s->prefix, s->max_conns_per_uid);
    }
}

static void *accept_main(void *arg) {
    struct unix_listener *l = arg;
    struct dfc_rpc_server *s = l->server;
    struct pollfd pfd[2] = {{.fd = l->fd, .events = POLLIN}, {.fd = l->wake[0], .events = POLLIN}};
    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (pfd[1].revents) {
            break;
        }
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                int e = errno;
                unsigned n;
                if (dfc__ratelimit_hit(&l->accept_log, LOG_EVERY_MS, &n)) {
                    DFC_LOG(DFC_LOG_WARN, "rpc.accept_failed",
                            "server=%s socket=%s errno=%d times=%u", s->name, l->path, e, n);
                }
                usleep(100000); /* out of descriptors: back off instead of spinning */
            }
            continue;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        struct stat st;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || fstat(fd, &st) < 0) {
            (void)close(fd);
            continue;
        }
        if (!conn_admit(s, fd, &cred, &st)) {
            (void)close(fd);
            log_refused(l, &cred);
            continue;
        }
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        grpc_server_add_channel_from_fd(s->server, fd, creds); /* core owns fd from here */
        grpc_server_credentials_release(creds);
    }
    return NULL;
}

void dfc__listener_free(struct unix_listener *l) {
    dfc__listener_stop(l);
    (void)close(l->fd);
    (void)close(l->wake[0]);
    (void)close(l->wake[1]);
    if (l->path[0] != '\0') {
        (void)unlink(l->path);
    }
    free(l->path);
    free(l);
}

int dfc_rpc_server_listen_unix(struct dfc_rpc_server *s, const char *path, unsigned mode, int gid,
                               struct dfc_error *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char tmp[sizeof(sa.sun_path)];
    if (s->started) {
        return dfc_error_set(err, -EBUSY, "listen %s: the server is already started", path);
    }
    if (s->n_own >= MAX_LISTENERS) {
        return dfc_error_set(err, -ERANGE, "listen %s: too many listeners", path);
    }
    /* Bound under a temporary name and renamed into place once it listens, so the socket
     * never exists in a state that refuses connections. */
    if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp)) {
        return dfc_error_set(err, -ENAMETOOLONG, "socket path `%s` is longer than %zu bytes", path,
                             sizeof(sa.sun_path) - 16);
    }
    memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        return dfc_error_set(err, -EEXIST, "`%s` exists and is not a socket", path);
    }
    struct unix_listener *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->path = strdup(path)) == NULL) {
        free(l);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    l->server = s;
    l->wake[0] = l->wake[1] = -1;
    (void)unlink(tmp);
    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int r = 0;
    if (l->fd < 0) {
        r = dfc_error_errno(err, -errno, "socket for `%s`", path);
    } else if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = dfc_error_errno(err, -errno, "bind `%s`", tmp);
    } else if (chmod(tmp, mode) < 0) {
        r = dfc_error_errno(err, -errno, "chmod `%s` to %04o", tmp, mode);
    } else if (gid >= 0 && chown(tmp, (uid_t)-1, (gid_t)gid) < 0) {
        r = dfc_error_errno(err, -errno, "chown `%s` to group %d", tmp, gid);
    } else if (listen(l->fd, 128) < 0) {
        r = dfc_error_errno(err, -errno, "listen on `%s`", tmp);
    } else if (pipe2(l->wake, O_CLOEXEC) < 0) {
        r = dfc_error_errno(err, -errno, "pipe");
    } else if (rename(tmp, path) < 0) { /* replaces a stale socket left by an earlier run */
        r = dfc_error_errno(err, -errno, "rename `%s` to `%s`", tmp, path);
    }
    if (r < 0) {
        (void)unlink(tmp);
        l->path[0] = '\0'; /* nothing of ours at path to remove */
        dfc__listener_free(l);
        return r;
    }
    s->own[s->n_own++] = l;
    return 0;
}

int dfc__listener_cred(struct dfc_rpc_server *s, int fd, struct ucred *ret) {
    int r = -ENOENT;
    pthread_mutex_lock(&s->cred_mu);
    if (fd >= 0 && (size_t)fd < s->n_conn_slots && s->conns[fd].open) {
        *ret = s->conns[fd].cred;
        r = 0;
    }
    pthread_mutex_unlock(&s->cred_mu);
    return r;
}

int dfc__listener_start(struct unix_listener *l) {
    if (pthread_create(&l->thread, NULL, accept_main, l) != 0) {
        return -EAGAIN;
    }
    l->running = true;
    return 0;
}

void dfc__listener_stop(struct unix_listener *l) {
    if (l->running) {
        ssize_t n = write(l->wake[1], "x", 1);
        (void)n;
        pthread_join(l->thread, NULL);
        l->running = false;
    }
}
