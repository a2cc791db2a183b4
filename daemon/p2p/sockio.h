/*
 * sockio.h - deadline-bounded I/O on a non-blocking socket, shared by the Vortex client and
 * server: every wait is a poll() for at most what is left of a monotonic deadline.
 *
 * Deadlines are CLOCK_MONOTONIC nanoseconds (dfc_mono_ns). Returns are 0, -ETIMEDOUT, -EPROTO
 * (the peer closed before n bytes) or a negative errno; nothing is logged or allocated.
 */
#ifndef DFD_P2P_SOCKIO_H
#define DFD_P2P_SOCKIO_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/clock.h"

/* now + ns, saturating at INT64_MAX. */
int64_t dfd_deadline_after(int64_t ns);

/* Waits until fd has one of events (POLLIN, POLLOUT), or an error or hang-up that the next
 * call reports. */
int dfd_wait_fd(int fd, short events, int64_t deadline);

/* Reads exactly n bytes; *ret_got (may be NULL) says how many arrived, also on failure. */
int dfd_recv_all(int fd, void *buf, size_t n, int64_t deadline, size_t *ret_got);

/* Writes n bytes (MSG_NOSIGNAL). */
int dfd_send_all(int fd, const void *buf, size_t n, int64_t deadline);

#endif /* DFD_P2P_SOCKIO_H */
