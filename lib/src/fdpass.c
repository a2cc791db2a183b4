/*
 * fdpass.c - the client side of descriptor passing to dfdaemon (dfc/fdpass.h).
 */
#include "dfc/fdpass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "dfc/cleanup.h"

#define REPLY_MAX    512
#define IO_TIMEOUT_S 30

int dfc_fdpass_path(const char *socket_path, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s%s", socket_path, DFC_FDPASS_SUFFIX);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int connect_to(const char *path, int *ret_fd, struct dfc_error *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return dfc_error_set(err, -ENAMETOOLONG, "socket path `%s` is too long", path);
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "socket");
    }
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return dfc_error_errno(err, -e, "connect to the descriptor socket `%s`", path);
    }
    *ret_fd = fd;
    return 0;
}

static int send_fd(int sock, int fd, const char *path, struct dfc_error *err) {
    char byte = 'F';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == 1
               ? 0
               : dfc_error_errno(err, n < 0 ? -errno : -EIO, "send the descriptor on `%s`", path);
}

/* Reads the daemon's line (until EOF or '\n'). */
static int read_reply(int sock, char *buf, size_t size, const char *path, struct dfc_error *err) {
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(sock, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return dfc_error_errno(err, -errno, "read the answer on `%s`", path);
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
        if (memchr(buf, '\n', len) != NULL) {
            break;
        }
    }
    buf[len] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl == NULL) {
        return dfc_error_set(err, -EBADMSG, "the daemon's answer on `%s` is incomplete", path);
    }
    *nl = '\0';
    return 0;
}

int dfc_fdpass_send(const char *path, int fd, char token[DFC_FDPASS_TOKEN_HEX + 1],
                    struct dfc_error *err) {
    _cleanup_close_ int sock = -1;
    char reply[REPLY_MAX];
    int r = connect_to(path, &sock, err);
    if (r == 0) {
        r = send_fd(sock, fd, path, err);
    }
    if (r == 0) {
        r = read_reply(sock, reply, sizeof(reply), path, err);
    }
    if (r < 0) {
        return r;
    }
    if (strncmp(reply, "ok ", 3) == 0 && strlen(reply + 3) == DFC_FDPASS_TOKEN_HEX &&
        strspn(reply + 3, "0123456789abcdef") == DFC_FDPASS_TOKEN_HEX) {
        memcpy(token, reply + 3, DFC_FDPASS_TOKEN_HEX + 1);
        return 0;
    }
    char *end;
    if (strncmp(reply, "error ", 6) == 0) {
        long code = strtol(reply + 6, &end, 10);
        if (end != reply + 6 && *end == ' ' && code > 0 && code <= 16) {
            return dfc_error_set(err, dfc_error_from_grpc((int)code),
                                 "the daemon refused the descriptor: %s", end + 1);
        }
    }
    return dfc_error_set(err, -EBADMSG, "the daemon's answer on `%s` is malformed", path);
}
