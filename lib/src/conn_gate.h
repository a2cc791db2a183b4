/*
 * conn_gate.h - the accept side's waiting room (private to lib/): connections accepted by an
 * accept thread wait here, in the thread's own poll set, until their first bytes have arrived,
 * and only then are handed to the server that parses them (gRPC core: rpc_listen.c;
 * libmicrohttpd: http.c). One that stays silent past its deadline is closed, so a connection
 * that sends nothing holds a slot for seconds, not for the server's idle timeout.
 *
 * "Arrived" is the kernel's receive low-water mark (SO_RCVLOWAT): poll() reports a waiting fd
 * readable once lowat bytes are queued (or the peer closed, or an error), so waiting for more
 * costs nothing; the bytes are never read here, so the server sees the connection from its
 * first byte. A caller that peeks and wants more raises the mark (conn_gate_want).
 *
 * An entry added with a mark of 0 only watches: it waits for its deadline, or for its socket
 * to be shut down or reset (POLLHUP, POLLERR), and its receive mark is never touched, so a
 * connection that another reader owns (gRPC core) can be watched through a duplicate of its fd.
 *
 * The pollfd array holds the fixed fds first (the listener, the stop pipe), then one per
 * waiting connection. Not thread-safe: one accept thread owns a gate.
 */
#ifndef DFC_CONN_GATE_H
#define DFC_CONN_GATE_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define CONN_GATE_FIXED 2

struct conn_gate_wait {
    int64_t deadline_ms; /* dfc_mono_ms() */
    int64_t since_ms;    /* when it arrived: the oldest is evicted first */
    unsigned lowat;      /* its receive mark; 0: a watch-only entry */
    void *arg;           /* the caller's (a copy of the peer address, say) */
};

struct conn_gate {
    struct pollfd *pfd;          /* [0] listener, [1] stop fd, then the waiting ones */
    struct conn_gate_wait *wait; /* wait[i] belongs to pfd[CONN_GATE_FIXED + i] */
    size_t n, cap;               /* waiting connections; cap: the most it grows to */
};

/* Sets g up for the listener lfd and the stop fd; 0 or -ENOMEM. */
int conn_gate_init(struct conn_gate *g, int lfd, int stop_fd);

/* Adds fd to wait until lowat bytes are queued (0: watch only, see above), until deadline_ms;
 * -ENOMEM (fd untouched). */
int conn_gate_add(struct conn_gate *g, int fd, unsigned lowat, int64_t deadline_ms, void *arg);

/* Raises waiting connection i's mark to lowat (more bytes wanted before it is ready). */
void conn_gate_want(struct conn_gate *g, size_t i, unsigned lowat);

/* Polls until a fixed fd or a waiting one is ready or the nearest deadline passes; poll()'s
 * result (-1 with errno on failure). */
int conn_gate_poll(struct conn_gate *g);

/* Removes waiting connection i (the last one takes its place) and returns its fd, its mark
 * set back to 1 byte (a watch-only one's left alone); the caller hands it on or closes it. */
int conn_gate_take(struct conn_gate *g, size_t i, void **ret_arg);

/* The index of the waiting connection that arrived first; g->n must be above 0. */
size_t conn_gate_oldest(const struct conn_gate *g);

/* Frees the arrays; the waiting fds must have been taken. */
void conn_gate_free(struct conn_gate *g);

#endif /* DFC_CONN_GATE_H */
