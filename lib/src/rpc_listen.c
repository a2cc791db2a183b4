/*
 * rpc_listen.c - Unix and TCP sockets that the RPC layer accepts itself, so that each
 * connection's SO_PEERCRED (Unix) or peer address (TCP) is known: an accept thread per socket
 * records them by fd and hands the fd to gRPC core with grpc_server_add_channel_from_fd().
 * Core names such a call's peer "fd:<n>", which maps it back to its connection; a closed
 * connection's entry stays until a new connection reuses the fd number and overwrites it.
 * With TLS on (opts.tls), a TCP connection goes to core's TLS listener instead
 * (dfc__tls_handoff, rpc_tls.c), which handshakes it; the caps below apply all the same, and
 * its calls' peer is "ipv4:<ip>:<port>" (dfc_rpc_call_peer_ip reads it from there).
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
 *
 * TCP connections (peers: other dfdaemons, the scheduler's clients) have no uid: they count
 * against max_conns over all listen_tcp sockets (a count of their own, so a flood on the
 * TCP port cannot lock local pods out of the Unix socket, nor the reverse) and against
 * max_conns_per_ip by peer address (one address cannot take every slot), and their calls
 * have no peer credentials, so the per-uid call and worker shares do not apply to them.
 *
 * DESIGN: silent TCP connections. Core would keep a connection that never sends a byte until
 * its idle timeout (minutes), holding a slot of the caps. So an admitted TCP connection first
 * waits in the accept thread's own poll set (conn_gate.h) until its first 24 bytes (the whole
 * HTTP/2 client preface, or with TLS the start of the ClientHello) have arrived (SO_RCVLOWAT:
 * nothing is read), and only then goes to core; one still short of it after
 * first_bytes_timeout_ms (trickling bytes does not extend it) is closed, with a rate-limited
 * rpc.connection_silent line. A waiting connection counts against the caps like any other.
 *
 * DESIGN: connections that start no call. A peer can send the preface and its SETTINGS (or,
 * with TLS, finish the handshake, within which core also wants the SETTINGS) and then nothing:
 * core keeps such a connection until max_connection_idle (idle_timeout_ms, minutes), and no
 * core setting tells it from one idle between calls (its idle timer starts with the
 * connection and restarts after each call alike). So the accept thread keeps watching each
 * connection it hands to core until its first call: the connection's key
 * (dfc__conn_key_tcp, or "fd:<n>" as core names a plaintext one) goes into s->no_call, each
 * arriving call takes its connection's key out (dfc__listener_call_seen, CQ thread), and a
 * connection whose key is still there first_call_timeout_ms after the hand-over is shut down
 * (rate-limited rpc.connection_no_call line); core then reads EOF and closes it.
 *
 * The accept thread must not touch core's descriptor (core closes it when it likes and the
 * number is reused at once), so the watch holds a duplicate of the fd, taken before the
 * hand-over: shutdown() on it reaches the same socket and nothing else. The duplicate waits in
 * the gate as a watch-only entry (no receive mark: core reads this socket), which reports
 * POLLHUP once core has shut the connection down itself; the watch then ends early. While a
 * duplicate is open, a socket core has closed stays in core's epoll set: core's poller already
 * allows for stale events (ev_epoll1_linux.cc keeps every grpc_fd on a freelist for exactly
 * this), so the cost is at worst a spurious wake-up, for at most the watch's seconds.
 * Keys count, so two live connections with one key (the same peer address and port on two
 * listeners) are each watched; a call then clears one of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "conn_gate.h"
#include "rpc_server_internal.h"
#include "rpc_tls.h"

#define PRUNE_EVERY_MS 50
#define LOG_EVERY_MS   10000
/* The HTTP/2 client preface, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n": a TCP connection waits in the
 * gate until all of it has arrived. */
#define PREFACE_LEN 24

/* Forgets the connection on fd (cred_mu held). */
static void conn_drop(struct dfc_rpc_server *s, int fd) {
    struct conn_entry *e = &s->conns[fd];
    if (e->open && e->tcp) {
        e->open = false;
        s->n_tcp_open--;
        dfc_keycount_put(&s->conn_ips, e->ip);
    } else if (e->open) {
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

/* Whether one more connection like peer (a Unix one's cred, or a TCP one's) passes a cap. */
static bool conn_over(struct dfc_rpc_server *s, const struct conn_entry *peer) {
    if (peer->tcp) {
        return s->n_tcp_open >= s->max_conns ||
               dfc_keycount_get(&s->conn_ips, peer->ip) >= s->max_conns_per_ip;
    }
    return s->n_conns_open >= s->max_conns ||
           dfc__uid_count(&s->conn_uids, peer->cred.uid) >= s->max_conns_per_uid;
}

/* Records the connection peer on fd, or refuses it when it would pass a cap (returns false).
 * A connection whose bookkeeping fails for want of memory is refused too. */
static bool conn_admit(struct dfc_rpc_server *s, int fd, const struct conn_entry *peer,
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
    if (conn_over(s, peer)) {
        int64_t now = dfc_mono_ms();
        if (now - s->last_prune_ms >= PRUNE_EVERY_MS) {
            if (conn_prune(s) == 0) {
                s->last_prune_ms = now;
            }
        }
        if (conn_over(s, peer)) {
            goto out;
        }
    }
    if (peer->tcp ? dfc_keycount_take(&s->conn_ips, peer->ip, 0) < 0
                  : dfc__uid_count_add(&s->conn_uids, peer->cred.uid) < 0) {
        goto out;
    }
    s->conns[fd] = *peer;
    s->conns[fd].dev = st->st_dev;
    s->conns[fd].ino = st->st_ino;
    s->conns[fd].open = true;
    if (peer->tcp) {
        s->n_tcp_open++;
    } else {
        s->n_conns_open++;
    }
    ok = true;
out:
    pthread_mutex_unlock(&s->cred_mu);
    return ok;
}

static void log_refused(struct own_listener *l, const struct conn_entry *peer) {
    struct dfc_rpc_server *s = l->server;
    unsigned n;
    if (!dfc__ratelimit_hit(&l->refused_log, LOG_EVERY_MS, &n)) {
        return;
    }
    pthread_mutex_lock(&s->cred_mu);
    unsigned open = peer->tcp ? s->n_tcp_open : s->n_conns_open;
    unsigned mine = peer->tcp ? dfc_keycount_get(&s->conn_ips, peer->ip)
                              : dfc__uid_count(&s->conn_uids, peer->cred.uid);
    pthread_mutex_unlock(&s->cred_mu);
    if (peer->tcp) {
        DFC_LOG(DFC_LOG_WARN, "rpc.connection_refused",
                "server=%s listener=%s refused=%u last_peer=%s open=%u open_ip=%u "
                "%smaxConnections=%u %smaxConnectionsPerIP=%u",
                s->name, l->path, n, peer->ip, open, mine, s->prefix, s->max_conns, s->prefix,
                s->max_conns_per_ip);
        return;
    }
    DFC_LOG(DFC_LOG_WARN, "rpc.connection_refused",
            "server=%s socket=%s refused=%u last_uid=%u open=%u open_uid=%u "
            "%smaxConnections=%u %smaxConnectionsPerUser=%u",
            s->name, l->path, n, (unsigned)peer->cred.uid, open, mine, s->prefix, s->max_conns,
            s->prefix, s->max_conns_per_uid);
}

/* Who is on the other end of the accepted fd: SO_PEERCRED, or the TCP peer address (and
 * TCP_NODELAY: pieces and small replies should not wait for Nagle). */
static int conn_peer(const struct own_listener *l, int fd, const struct sockaddr_storage *sa,
                     struct conn_entry *ret) {
    memset(ret, 0, sizeof(*ret));
    if (l->tcp) {
        int one = 1;
        ret->tcp = true;
        (void)dfc_addr_ip((const struct sockaddr *)sa, ret->ip, sizeof(ret->ip));
        return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    socklen_t len = sizeof(ret->cred);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &ret->cred, &len);
}

/* Closes a connection still ours (never handed to core) and forgets it. */
static void conn_close(struct dfc_rpc_server *s, int fd, char *ip, size_t ip_size) {
    pthread_mutex_lock(&s->cred_mu);
    if ((size_t)fd < s->n_conn_slots) {
        if (ip != NULL) {
            snprintf(ip, ip_size, "%s", s->conns[fd].ip);
        }
        conn_drop(s, fd);
    }
    pthread_mutex_unlock(&s->cred_mu);
    (void)close(fd);
}

/* Hands fd to core: to its TLS listener when the server has TLS (rpc_tls.c handshakes it there),
 * else as a plaintext channel. Core owns fd from here. */
static void hand_to_core(struct own_listener *l, int fd) {
    struct dfc_rpc_server *s = l->server;
    if (l->tcp && s->tls_handler != NULL) {
        dfc__tls_handoff(s->tls_handler, s->name, l->fd, fd);
        return;
    }
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    grpc_server_add_channel_from_fd(s->server, fd, creds); /* core owns fd from here */
    grpc_server_credentials_release(creds);
}

static void hand_over(struct own_listener *l, struct conn_gate *gate, int fd);

/* Accepts one connection: refused beyond a cap, else into the gate (TCP with a first-bytes
 * timeout) or straight to core. */
static void accept_one(struct own_listener *l, struct conn_gate *gate) {
    struct dfc_rpc_server *s = l->server;
    struct sockaddr_storage sa = {0};
    socklen_t sa_len = sizeof(sa);
    int fd = accept4(l->fd, (struct sockaddr *)&sa, &sa_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
            int e = errno;
            unsigned n;
            if (dfc__ratelimit_hit(&l->accept_log, LOG_EVERY_MS, &n)) {
                DFC_LOG(DFC_LOG_WARN, "rpc.accept_failed", "server=%s socket=%s errno=%d times=%u",
                        s->name, l->path, e, n);
            }
            usleep(100000); /* out of descriptors: back off instead of spinning */
        }
        return;
    }
    struct conn_entry peer;
    struct stat st;
    if (conn_peer(l, fd, &sa, &peer) < 0 || fstat(fd, &st) < 0) {
        (void)close(fd);
        return;
    }
    if (!conn_admit(s, fd, &peer, &st)) {
        (void)close(fd);
        log_refused(l, &peer);
        return;
    }
    if (!l->tcp || s->first_bytes_timeout_ms < 0) {
        hand_over(l, gate, fd);
    } else if (conn_gate_add(gate, fd, PREFACE_LEN, dfc_mono_ms() + s->first_bytes_timeout_ms,
                             NULL) < 0) {
        conn_close(s, fd, NULL, 0);
    }
}

/* A connection in core watched until its first call (see "connections that start no call"). */
struct no_call_watch {
    char key[DFC__CONN_KEY_MAX];
    char ip[INET6_ADDRSTRLEN];
};

/* Hands fd to core and, with a first-call deadline, watches it through a duplicate of fd until
 * its first call. Without memory or a descriptor for the watch, the connection goes
 * unwatched. */
static void hand_over(struct own_listener *l, struct conn_gate *gate, int fd) {
    struct dfc_rpc_server *s = l->server;
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    struct no_call_watch *w = NULL;
    int dup_fd = -1;
    if (!l->tcp || s->first_call_timeout_ms < 0 || (w = calloc(1, sizeof(*w))) == NULL ||
        getpeername(fd, (struct sockaddr *)&sa, &len) < 0 ||
        dfc_addr_ip((const struct sockaddr *)&sa, w->ip, sizeof(w->ip)) < 0 ||
        (s->tls_handler != NULL
             ? dfc__conn_key_tcp(w->ip, dfc_addr_port(&sa), w->key, sizeof(w->key))
             : snprintf(w->key, sizeof(w->key), "fd:%d", fd)) < 0 ||
        (dup_fd = dup(fd)) < 0 || fcntl(dup_fd, F_SETFD, FD_CLOEXEC) < 0) {
        /* dup(), not F_DUPFD_CLOEXEC: ThreadSanitizer sees dup() create the descriptor, and
         * would otherwise take our close of it for a race with whoever had the number before.
         * The daemons never exec, so the moment without FD_CLOEXEC leaks nothing. */
        goto unwatched;
    }
    pthread_mutex_lock(&s->cred_mu);
    int r = dfc_keycount_take(&s->no_call, w->key, 0);
    pthread_mutex_unlock(&s->cred_mu);
    if (r < 0) {
        goto unwatched;
    }
    if (conn_gate_add(gate, dup_fd, 0, dfc_mono_ms() + s->first_call_timeout_ms, w) < 0) {
        pthread_mutex_lock(&s->cred_mu);
        dfc_keycount_put(&s->no_call, w->key);
        pthread_mutex_unlock(&s->cred_mu);
        goto unwatched;
    }
    atomic_fetch_add(&s->n_no_call, 1);
    hand_to_core(l, fd);
    return;
unwatched:
    if (dup_fd >= 0) {
        (void)close(dup_fd);
    }
    free(w);
    hand_to_core(l, fd);
}

/* Ends watch i of the gate. expired: its deadline passed, so the connection is shut down unless
 * a call took its key out; returns whether it was shut down. */
static bool watch_end(struct own_listener *l, struct conn_gate *gate, size_t i, bool expired,
                      struct no_call_watch **ret_w) {
    struct dfc_rpc_server *s = l->server;
    void *arg = NULL;
    int dup_fd = conn_gate_take(gate, i, &arg);
    struct no_call_watch *w = arg;
    pthread_mutex_lock(&s->cred_mu);
    bool no_call = dfc_keycount_get(&s->no_call, w->key) > 0;
    dfc_keycount_put(&s->no_call, w->key);
    pthread_mutex_unlock(&s->cred_mu);
    atomic_fetch_sub(&s->n_no_call, 1);
    bool shut = expired && no_call;
    if (shut) {
        (void)shutdown(dup_fd, SHUT_RDWR); /* the socket, not core's descriptor number */
    }
    (void)close(dup_fd);
    *ret_w = w;
    return shut;
}

void dfc__listener_call_seen(struct dfc_rpc_server *s, grpc_call *call) {
    char key[DFC__CONN_KEY_MAX];
    if (atomic_load(&s->n_no_call) == 0 || dfc__peer_conn_key(call, key, sizeof(key)) < 0) {
        return;
    }
    pthread_mutex_lock(&s->cred_mu);
    dfc_keycount_put(&s->no_call, key);
    pthread_mutex_unlock(&s->cred_mu);
}

/* Ends the watches whose connection core has shut down or whose deadline passed, shutting
 * down those that started no call (a rate-limited log line counts them). */
static void watch_sweep(struct own_listener *l, struct conn_gate *gate, size_t i, int64_t now) {
    struct dfc_rpc_server *s = l->server;
    short ev = gate->pfd[CONN_GATE_FIXED + i].revents;
    bool late = gate->wait[i].deadline_ms <= now;
    if (ev == 0 && !late) {
        return;
    }
    struct no_call_watch *w;
    unsigned n;
    if (watch_end(l, gate, i, ev == 0, &w) &&
        dfc__ratelimit_hit(&l->nocall_log, LOG_EVERY_MS, &n)) {
        DFC_LOG(DFC_LOG_WARN, "rpc.connection_no_call",
                "server=%s listener=%s closed=%u last_peer=%s %sfirstCallTimeout=%lldms", s->name,
                l->path, n, w->ip, s->prefix, (long long)s->first_call_timeout_ms);
    }
    free(w);
}

/* Hands on the waiting connections whose preface arrived, closes those that failed or stayed
 * silent past the first-bytes timeout (a rate-limited log line counts them); sweeps the
 * watches of connections in core too. */
static void gate_sweep(struct own_listener *l, struct conn_gate *gate) {
    struct dfc_rpc_server *s = l->server;
    int64_t now = dfc_mono_ms();
    for (size_t i = gate->n; i-- > 0;) {
        if (gate->wait[i].arg != NULL) {
            watch_sweep(l, gate, i, now);
            continue;
        }
        short ev = gate->pfd[CONN_GATE_FIXED + i].revents;
        bool late = gate->wait[i].deadline_ms <= now;
        if ((ev & POLLIN) != 0) {
            hand_over(l, gate, conn_gate_take(gate, i, NULL));
        } else if (ev != 0 || late) {
            char ip[INET6_ADDRSTRLEN] = "";
            conn_close(s, conn_gate_take(gate, i, NULL), ip, sizeof(ip));
            unsigned n;
            if (ev == 0 && dfc__ratelimit_hit(&l->silent_log, LOG_EVERY_MS, &n)) {
                DFC_LOG(DFC_LOG_WARN, "rpc.connection_silent",
                        "server=%s listener=%s closed=%u last_peer=%s %sfirstBytesTimeout=%lldms",
                        s->name, l->path, n, ip, s->prefix, (long long)s->first_bytes_timeout_ms);
            }
        }
    }
}

static void *accept_main(void *arg) {
    struct own_listener *l = arg;
    struct conn_gate gate;
    if (conn_gate_init(&gate, l->fd, l->wake[0]) < 0) {
        DFC_LOG(DFC_LOG_ERROR, "rpc.accept_stopped", "server=%s socket=%s out of memory",
                l->server->name, l->path);
        return NULL;
    }
    for (;;) {
        if (conn_gate_poll(&gate) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (gate.pfd[1].revents) {
            break;
        }
        gate_sweep(l, &gate);
        if (gate.pfd[0].revents) {
            accept_one(l, &gate);
        }
    }
    while (gate.n > 0) {
        if (gate.wait[gate.n - 1].arg != NULL) {
            struct no_call_watch *w;
            (void)watch_end(l, &gate, gate.n - 1, false, &w);
            free(w);
        } else {
            conn_close(l->server, conn_gate_take(&gate, gate.n - 1, NULL), NULL, 0);
        }
    }
    conn_gate_free(&gate);
    return NULL;
}

void dfc__listener_free(struct own_listener *l) {
    dfc__listener_stop(l);
    for (int i = 0; i < 3; i++) {
        int fd = i == 0 ? l->fd : l->wake[i - 1];
        if (fd >= 0) {
            (void)close(fd);
        }
    }
    if (!l->tcp && l->path != NULL && l->path[0] != '\0') {
        (void)unlink(l->path);
    }
    free(l->path);
    free(l);
}

/* May s get one more listener? */
static int listener_check(struct dfc_rpc_server *s, const char *name, struct dfc_error *err) {
    if (s->started) {
        return dfc_error_set(err, -EBUSY, "listen %s: the server is already started", name);
    }
    if (s->n_own >= MAX_LISTENERS) {
        return dfc_error_set(err, -ERANGE, "listen %s: too many listeners", name);
    }
    return 0;
}

static int listener_new(struct dfc_rpc_server *s, const char *name, bool tcp,
                        struct own_listener **ret, struct dfc_error *err) {
    struct own_listener *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->path = strdup(name)) == NULL) {
        free(l);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    l->server = s;
    l->tcp = tcp;
    l->fd = l->wake[0] = l->wake[1] = -1;
    *ret = l;
    return 0;
}

int dfc_rpc_server_listen_tcp(struct dfc_rpc_server *s, const char *ip, unsigned port,
                              unsigned *ret_port, struct dfc_error *err) {
    char name[DFC_ADDR_STR_MAX];
    const char *host = ip == NULL || ip[0] == '\0' ? "0.0.0.0" : ip;
    dfc_addr_format(host, port, name, sizeof(name));
    struct dfc_sockaddr addr;
    int r = dfc_addr_sockaddr(host, port, &addr);
    if (r == -ERANGE) {
        return dfc_error_set(err, -EINVAL, "listen %s: port must be 0..65535", name);
    }
    if (r < 0) {
        return dfc_error_set(err, -EINVAL, "listen %s: `%s` is not an IP address", name, host);
    }
    struct sockaddr_storage sa = addr.ss;
    socklen_t sa_len = addr.len;
    r = listener_check(s, name, err);
    if (r == 0 && s->tls_creds != NULL) {
        r = dfc__server_listen_tls(s, name, err);
    }
    struct own_listener *l = NULL;
    if (r < 0 || (r = listener_new(s, name, true, &l, err)) < 0) {
        return r;
    }
    int one = 1;
    l->fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        r = dfc_error_errno(err, -errno, "socket for %s", name);
    } else if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
        r = dfc_error_errno(err, -errno, "SO_REUSEADDR on %s", name);
    } else if (bind(l->fd, (struct sockaddr *)&sa, sa_len) < 0) {
        r = dfc_error_errno(err, -errno, "bind %s", name);
    } else if (listen(l->fd, 1024) < 0) {
        r = dfc_error_errno(err, -errno, "listen on %s", name);
    } else if (getsockname(l->fd, (struct sockaddr *)&sa, &sa_len) < 0) {
        r = dfc_error_errno(err, -errno, "getsockname of %s", name);
    } else if (pipe2(l->wake, O_CLOEXEC) < 0) {
        r = dfc_error_errno(err, -errno, "pipe");
    }
    if (r < 0) {
        dfc__listener_free(l);
        return r;
    }
    unsigned bound = dfc_addr_port(&sa);
    dfc_addr_format(host, bound, name, sizeof(name));
    free(l->path);
    if ((l->path = strdup(name)) == NULL) {
        dfc__listener_free(l);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    if (ret_port != NULL) {
        *ret_port = bound;
    }
    s->own[s->n_own++] = l;
    return 0;
}

int dfc_rpc_server_listen_unix(struct dfc_rpc_server *s, const char *path, unsigned mode, int gid,
                               struct dfc_error *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char tmp[sizeof(sa.sun_path)];
    int r = listener_check(s, path, err);
    if (r < 0) {
        return r;
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
    struct own_listener *l = NULL;
    if ((r = listener_new(s, path, false, &l, err)) < 0) {
        return r;
    }
    (void)unlink(tmp);
    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

/* The open entry of fd from a listener of kind tcp, or NULL (cred_mu held). */
static const struct conn_entry *conn_get(struct dfc_rpc_server *s, int fd, bool tcp) {
    if (fd < 0 || (size_t)fd >= s->n_conn_slots || !s->conns[fd].open || s->conns[fd].tcp != tcp) {
        return NULL;
    }
    return &s->conns[fd];
}

int dfc__listener_cred(struct dfc_rpc_server *s, int fd, struct ucred *ret) {
    pthread_mutex_lock(&s->cred_mu);
    const struct conn_entry *e = conn_get(s, fd, false);
    if (e != NULL) {
        *ret = e->cred;
    }
    pthread_mutex_unlock(&s->cred_mu);
    return e != NULL ? 0 : -ENOENT;
}

int dfc__listener_peer_ip(struct dfc_rpc_server *s, int fd, char *buf, size_t size) {
    pthread_mutex_lock(&s->cred_mu);
    const struct conn_entry *e = conn_get(s, fd, true);
    int r = e == NULL               ? -ENOENT
            : strlen(e->ip) >= size ? -ENAMETOOLONG
                                    : snprintf(buf, size, "%s", e->ip);
    pthread_mutex_unlock(&s->cred_mu);
    return r < 0 ? r : 0;
}

int dfc__listener_start(struct own_listener *l) {
    if (pthread_create(&l->thread, NULL, accept_main, l) != 0) {
        return -EAGAIN;
    }
    l->running = true;
    return 0;
}

void dfc__listener_stop(struct own_listener *l) {
    if (l->running) {
        ssize_t n = write(l->wake[1], "x", 1);
        (void)n;
        pthread_join(l->thread, NULL);
        l->running = false;
    }
}
