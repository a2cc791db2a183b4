/*
 * sockio.h - deadline-bounded I/O on a non-blocking socket, shared by the Vortex client and
 * server: every wait is a poll() for at most what is left of a monotonic deadline.
 *
 * Deadlines are CLOCK_MONOTONIC nanoseconds (dfc_mono_ns). Returns are 0, -ETIMEDOUT, -EPROTO
 * (the peer closed before n bytes) or a negative errno; nothing is logged or allocated.
 *
 * A struct dfd_conn is one Vortex connection either way: plain TCP (tls NULL: the dfd_recv_all
 * and dfd_send_all path, byte for byte) or TLS over the same socket (dfc/tls_ssl.h), where a
 * TLS failure is -ECONNABORTED with err saying why (OpenSSL's reason, a TLS alert).
 */
#ifndef DFD_P2P_SOCKIO_H
#define DFD_P2P_SOCKIO_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/clock.h"
#include "dfc/error.h"

/* now + ns, saturating at INT64_MAX. */
int64_t dfd_deadline_after(int64_t ns);

/* Waits until fd has one of events (POLLIN, POLLOUT), or an error or hang-up that the next
 * call reports. */
int dfd_wait_fd(int fd, short events, int64_t deadline);

/* Reads exactly n bytes; *ret_got (may be NULL) says how many arrived, also on failure. */
int dfd_recv_all(int fd, void *buf, size_t n, int64_t deadline, size_t *ret_got);

/* Writes n bytes (MSG_NOSIGNAL). */
int dfd_send_all(int fd, const void *buf, size_t n, int64_t deadline);

struct dfc_tls_conn;

/* A connection: the socket and, with TLS, its session (borrowed: the connection's owner frees
 * the session and then closes the socket). */
struct dfd_conn {
    int fd;
    struct dfc_tls_conn *tls; /* NULL: plain TCP */
};

/* Frees c's TLS session, then closes its socket (fd -1: nothing); c is left empty. */
void dfd_conn_close(struct dfd_conn *c);

/* dfd_recv_all over c; err is set only for a TLS failure (may be NULL). */
int dfd_conn_recv_all(const struct dfd_conn *c, void *buf, size_t n, int64_t deadline,
                      size_t *ret_got, struct dfc_error *err);

/* dfd_send_all over c; err is set only for a TLS failure (may be NULL). */
int dfd_conn_send_all(const struct dfd_conn *c, const void *buf, size_t n, int64_t deadline,
                      struct dfc_error *err);

#endif /* DFD_P2P_SOCKIO_H */
