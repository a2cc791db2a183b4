/*
 * sockio.c - deadline-bounded socket I/O (sockio.h).
 */
#include "p2p/sockio.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/tls_ssl.h"
#include "dfc/units.h"

int64_t dfd_deadline_after(int64_t ns) {
    int64_t now = dfc_mono_ns();
    return ns < INT64_MAX - now ? now + ns : INT64_MAX;
}

int dfd_wait_fd(int fd, short events, int64_t deadline) {
    return dfc_wait_fd(fd, events, deadline);
}

int dfd_recv_all(int fd, void *buf, size_t n, int64_t deadline, size_t *ret_got) {
    unsigned char *p = buf;
    size_t got = 0;
    int r = 0;
    while (got < n) {
        ssize_t k = recv(fd, p + got, n - got, 0);
        if (k > 0) {
            got += (size_t)k;
            continue;
        }
        if (k == 0) {
            r = -EPROTO;
            break;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            r = -errno;
            break;
        }
        if ((r = dfd_wait_fd(fd, POLLIN, deadline)) < 0) {
            break;
        }
    }
    if (ret_got != NULL) {
        *ret_got = got;
    }
    return r;
}

int dfd_send_all(int fd, const void *buf, size_t n, int64_t deadline) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return -errno;
        }
        int r = dfd_wait_fd(fd, POLLOUT, deadline);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int dfd_conn_recv_all(const struct dfd_conn *c, void *buf, size_t n, int64_t deadline,
                      size_t *ret_got, struct dfc_error *err) {
    if (c->tls == NULL) {
        return dfd_recv_all(c->fd, buf, n, deadline, ret_got);
    }
    return dfc_tls_read(c->tls, buf, n, deadline, ret_got, err);
}

int dfd_conn_send_all(const struct dfd_conn *c, const void *buf, size_t n, int64_t deadline,
                      struct dfc_error *err) {
    if (c->tls == NULL) {
        return dfd_send_all(c->fd, buf, n, deadline);
    }
    return dfc_tls_write(c->tls, buf, n, deadline, err);
}

void dfd_conn_close(struct dfd_conn *c) {
    dfc_tls_conn_free(c->tls);
    if (c->fd >= 0) {
        close(c->fd);
    }
    c->tls = NULL;
    c->fd = -1;
}
