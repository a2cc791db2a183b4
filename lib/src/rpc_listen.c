/*
 * rpc_listen.c - Unix sockets that the RPC layer accepts itself, so that each connection's
 * SO_PEERCRED is known: an accept thread per socket records the credentials by fd and hands
 * the fd to gRPC core with grpc_server_add_channel_from_fd(). Core names such a call's peer
 * "fd:<n>", which maps it back to its connection; a closed connection's entry stays until a
 * new connection reuses the fd number and overwrites it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "dfc/log.h"
#include "rpc_server_internal.h"

static void record_cred(struct dfc_rpc_server *s, int fd, const struct ucred *cred) {
    pthread_mutex_lock(&s->cred_mu);
    if ((size_t)fd >= s->n_creds) {
        size_t n = (size_t)fd * 2 + 16;
        struct ucred *c = realloc(s->creds, n * sizeof(*c));
        bool *v = c != NULL ? realloc(s->cred_valid, n * sizeof(*v)) : NULL;
        if (c != NULL) {
            s->creds = c;
        }
        if (v == NULL) {
            pthread_mutex_unlock(&s->cred_mu);
            return; /* unknown credentials: calls on fd are treated as unauthenticated */
        }
        memset(v + s->n_creds, 0, (n - s->n_creds) * sizeof(*v));
        s->cred_valid = v;
        s->n_creds = n;
    }
    s->creds[fd] = *cred;
    s->cred_valid[fd] = true;
    pthread_mutex_unlock(&s->cred_mu);
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
                DFC_LOG(DFC_LOG_WARN, "rpc.accept_failed", "server=%s errno=%d", s->name, errno);
                usleep(100000); /* out of descriptors: back off instead of spinning */
            }
            continue;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            (void)close(fd);
            continue;
        }
        record_cred(s, fd, &cred);
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
    if (fd >= 0 && (size_t)fd < s->n_creds && s->cred_valid[fd]) {
        *ret = s->creds[fd];
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
