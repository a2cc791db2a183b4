/*
 * vortex_server.c - the Vortex TCP piece server (docs/dragonfly-compat.md, "Vortex").
 *
 * DESIGN. One accept thread polls the listener and an eventfd (the stop signal). Each
 * accepted connection gets a thread of its own in one of max_conns slots; with every slot
 * busy, or max_conns_per_ip slots held by its peer address, the connection is closed at once
 * (a rate-limited warning counts them). A slot's thread serves the connection's requests one
 * after the other (keep-alive, below), closes its socket under the server's lock and marks the
 * slot done; the
 * accept thread joins done slots before reusing them, and stop joins them all. Stop shuts
 * every open socket down under the same lock, so a handler blocked in poll() wakes at once
 * and a socket number is never shut down after its handler closed it.
 *
 * A connection: the 6 header bytes are read under request_timeout; a tag other than 4 or a
 * length other than 68 is answered with Error InvalidArgument before anything else is read
 * (length is never allocated); then the 68 bytes under the same deadline, the piece and its
 * file through the storage facade (dfd_storage_open_piece: a committed task's row and content,
 * or a verified piece of a replica this node is still downloading, read from its spool), the
 * content packet, and the bytes with sendfile, each write waiting at most request_timeout and
 * the whole answer done within answer_timeout (else the connection is reset: a peer that drips
 * its reads cannot keep a slot).
 *
 * Keep-alive (beyond upstream, compatible both ways): after a piece was sent whole the handler
 * waits for the next request on the same connection, at most KEEPALIVE_NS (or request_timeout
 * if shorter) for the whole of it, and serves at most MAX_REQUESTS per connection; an upstream
 * client, which closes after one answer, ends the loop with its close. After an Error, a
 * failed answer or the idle wait the connection closes, as before.
 *
 * Busy (beyond upstream): a request for a piece this server is already sending to another
 * connection, begun less than BUSY_WINDOW_NS ago, is answered Error Busy (code 4, a code
 * upstream reserves) and the connection stays for the next request. In a flash crowd the
 * requesters would otherwise share this uplink to receive the same bytes, while the peer
 * receiving them will serve them as soon as they are verified (docs/swarm.md); this way the
 * uplink goes to pieces nobody else has. The slots keep what each sent last (under mu), and a
 * piece counts as being sent while its socket holds bytes the peer has not acknowledged.
 *
 * TLS (opts.tls set): the same port speaks TLS only. The handshake comes first, within the
 * request's request_timeout (a refused or failed one is logged, rate-limited, naming the peer
 * and OpenSSL's reason, and the connection closed); then the same framing over the session, and
 * the bytes read from the content with pread, TLS_CHUNK at a time, into a buffer of the
 * connection's and written as records (no sendfile: the kernel here has no kTLS). When the
 * connection ends, close_notify.
 *
 * Limits (ours, upload_limits.h): with a rate limit the bytes go PACE_CHUNK at a time, each
 * paid for in the server's token bucket (shared by every connection) before it is sent, within
 * the answer's deadline; unlimited, one sendfile as before. At most max_uploads answers send at
 * once: a request beyond waits for one to end, at most request_timeout, then gets Error
 * Internal naming storage.server.maxConcurrentUploads. Stop ends both waits at once.
 */
#include "p2p/vortex_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dfc/addr.h"
#include "dfc/keycount.h"
#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/tls_ssl.h"
#include "p2p/sockio.h"
#include "p2p/upload_limits.h"
#include "p2p/vortex.h"
#include "storage/storage.h"

#define LISTEN_BACKLOG   1024
#define SENDFILE_CHUNK   ((size_t)1 << 30)
#define WARN_INTERVAL_NS ((int64_t)10 * 1000 * 1000 * 1000)
#define DRAIN_MAX        65536 /* after an Error: what a client may still have in flight */
#define TRAFFIC_REMOTE   1     /* common.v2.TrafficType REMOTE_PEER */
#define CONN_STACK       ((size_t)512 * 1024)
#define TLS_CHUNK        ((size_t)256 * 1024)   /* pread size under TLS (a heap buffer) */
#define PACE_CHUNK       ((uint64_t)256 * 1024) /* paid for at once under a rate limit */
/* Keep-alive (beyond upstream): after an answer the next request is awaited this long at most
 * (or request_timeout if shorter), and a connection serves at most this many requests. */
#define KEEPALIVE_NS ((int64_t)5 * 1000 * 1000 * 1000)
#define MAX_REQUESTS 1024
/* A piece already being sent to another peer, for less than this, is answered Error Busy
 * (beyond upstream): in a crowd the other peer will soon serve it, and this node's uplink goes
 * to pieces nobody has yet. Past it (a slow receiver) a second copy may go. */
#define BUSY_WINDOW_NS ((int64_t)10 * 1000 * 1000 * 1000)

enum slot_state { SLOT_FREE, SLOT_RUNNING, SLOT_DONE };

struct slot {
    struct dfd_vortex_server *v;
    enum slot_state state; /* under v->mu */
    int fd;                /* under v->mu: -1 once the handler closed it */
    pthread_t th;
    char ip[INET6_ADDRSTRLEN]; /* the peer's address, counted in v->ips while RUNNING */
    /* under v->mu: the piece sent last and when its answer began (0: none), for Busy */
    char task[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t piece;
    int64_t sending_since;
};

struct dfd_vortex_server {
    struct dfc_metric *served_pieces, *served_bytes, *busy_answers; /* borrowed; NULL: none */
    struct dfd_storage *storage;
    struct dfc_tls_ctx *tls; /* borrowed; NULL: plain TCP */
    const char *parent_id;
    int64_t request_timeout_ns;
    int64_t answer_timeout_ns;
    int lfd;
    int stop_fd; /* eventfd: readable once stop began */
    uint16_t port;
    pthread_t accept_th;
    pthread_mutex_t mu;
    pthread_attr_t conn_attr; /* a small stack: a handler needs a few KiB, and there may be
                               * tens of thousands of them */
    unsigned nslots;
    struct slot *slots;
    unsigned max_per_ip;
    struct dfc_keycount ips; /* under mu: running connections by peer address */
    /* accept thread only: the rate-limited over-the-limit warning */
    uint64_t dropped;
    int64_t last_warn_ns;
    /* under mu: the rate-limited warning of refused TLS handshakes */
    uint64_t tls_refused;
    int64_t tls_warn_ns;
    uint64_t accepted; /* under mu: connections handed to a handler */
    int64_t keepalive_ns;
    struct dfd_upload_limits lim; /* upload.rateLimit, maxConcurrentUploads: every connection's */
};

/* Sends length bytes of content_fd from offset with sendfile, each wait at most timeout_ns and
 * the whole of it done by deadline (-ETIMEDOUT otherwise: a peer that reads a little now and
 * then must not hold a connection slot for good). -EPROTO when the file ends first (the client
 * then sees the answer cut short). Under v's rate limit PACE_CHUNK at a time, each paid for
 * first (-ETIMEDOUT when it cannot be by deadline, -ECANCELED at stop). */
static int send_file(struct dfd_vortex_server *v, int fd, int content_fd, uint64_t offset,
                     uint64_t length, int64_t timeout_ns, int64_t deadline) {
    off_t off = (off_t)offset;
    uint64_t left = length;
    bool paced = dfd_upload_limits_paced(&v->lim);
    uint64_t paid = 0; /* paced: bytes paid for and not yet sent */
    while (left > 0) {
        if (paced && paid == 0) {
            paid = left < PACE_CHUNK ? left : PACE_CHUNK;
            int r = dfd_upload_limits_pay(&v->lim, paid, deadline);
            if (r < 0) {
                return r;
            }
        }
        size_t chunk = paced ? (size_t)paid : left < SENDFILE_CHUNK ? (size_t)left : SENDFILE_CHUNK;
        ssize_t k = sendfile(fd, content_fd, &off, chunk);
        if (k > 0) {
            left -= (uint64_t)k;
            paid -= paced ? (uint64_t)k : 0;
            continue;
        }
        if (k == 0) {
            return -EPROTO;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return -errno;
        }
        int64_t wait = dfd_deadline_after(timeout_ns);
        int r = dfd_wait_fd(fd, POLLOUT, wait < deadline ? wait : deadline);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* send_file under TLS: pread into a buffer, written as TLS records; the same deadlines and
 * rate limit (TLS_CHUNK is PACE_CHUNK). */
static int send_file_tls(struct dfd_vortex_server *v, const struct dfd_conn *c, int content_fd,
                         uint64_t offset, uint64_t length, int64_t timeout_ns, int64_t deadline,
                         struct dfc_error *err) {
    size_t cap = length < TLS_CHUNK ? (size_t)length : TLS_CHUNK;
    uint8_t *buf = malloc(cap > 0 ? cap : 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    uint64_t done = 0;
    int r = 0;
    while (done < length && r == 0) {
        size_t n = length - done < cap ? (size_t)(length - done) : cap;
        ssize_t k = pread(content_fd, buf, n, (off_t)(offset + done));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            r = k == 0 ? -EPROTO : -errno;
            break;
        }
        r = dfd_upload_limits_pay(&v->lim, (uint64_t)k, deadline);
        if (r < 0) {
            break;
        }
        int64_t wait = dfd_deadline_after(timeout_ns);
        r = dfd_conn_send_all(c, buf, (size_t)k, wait < deadline ? wait : deadline, err);
        done += (uint64_t)k;
    }
    free(buf);
    return r;
}

/* Ends a connection whose answer ran out of time with a reset: a graceful close would leave the
 * kernel trickling the rest of the send buffer to the same slow peer. */
static void reset_on_close(int fd) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

static void drain(struct dfd_vortex_server *v, int fd);

/* Sends an Error packet, then stops writing and drains (drain()). */
static void send_error(struct dfd_vortex_server *v, const struct dfd_conn *c, uint8_t code,
                       const char *msg) {
    uint8_t out[DFD_VORTEX_HEADER_LEN + 1 + DFC_ERROR_MSG_MAX + 160];
    size_t len = 0;
    int fd = c->fd;
    if (dfd_vortex_error_encode(0, code, msg, out, sizeof(out), &len, NULL) < 0) {
        return;
    }
    if (dfd_conn_send_all(c, out, len, dfd_deadline_after(v->request_timeout_ns), NULL) < 0) {
        return;
    }
    if (c->tls != NULL) {
        dfc_tls_shutdown(c->tls); /* the client's TLS layer may still send: drained raw below */
    }
    drain(v, fd);
}

/* Stops writing and drains what the client may still send (at most DRAIN_MAX bytes, until
 * request_timeout), so that closing does not reset the connection and destroy what was sent
 * last (an Error frame, a TLS alert) before the client reads it. */
static void drain(struct dfd_vortex_server *v, int fd) {
    shutdown(fd, SHUT_WR);
    int64_t deadline = dfd_deadline_after(v->request_timeout_ns);
    size_t drained = 0;
    uint8_t sink[4096];
    while (drained < DRAIN_MAX) {
        ssize_t k = recv(fd, sink, sizeof(sink), 0);
        if (k > 0) {
            drained += (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
            dfd_wait_fd(fd, POLLIN, deadline) < 0) {
            break;
        }
    }
}

/* Takes an upload slot by deadline (dfd_upload_limits_begin): 0, -ECANCELED at stop, or -EBUSY
 * after answering Error Internal naming the limit. */
static int upload_begin(struct dfd_vortex_server *v, const struct dfd_conn *c, int64_t deadline,
                        const char *id, uint32_t number) {
    int r = dfd_upload_limits_begin(&v->lim, deadline);
    if (r == -EBUSY) {
        char msg[DFC_ERROR_MSG_MAX + 160];
        snprintf(msg, sizeof(msg),
                 "piece %s-%u: busy, already uploading %u pieces at once "
                 "(storage.server.maxConcurrentUploads)",
                 id, number, v->lim.max);
        send_error(v, c, DFD_VORTEX_ERR_INTERNAL, msg);
    }
    return r;
}

/* Whether slot o (v->mu held) is still delivering the piece it claimed: begun less than
 * BUSY_WINDOW_NS ago and its socket still holding bytes the peer has not acknowledged (the
 * send buffer holds a whole piece, so the send itself ends long before the peer has it). */
static bool delivering(const struct slot *o, int64_t now) {
    int unacked = 0;
    return o->state == SLOT_RUNNING && o->fd >= 0 && o->sending_since != 0 &&
           now - o->sending_since < BUSY_WINDOW_NS && ioctl(o->fd, SIOCOUTQ, &unacked) == 0 &&
           unacked > 0;
}

/* Marks piece number of task id as being sent by slot sl: false (nothing marked) when another
 * connection is still delivering it (delivering()). */
static bool claim_piece(struct dfd_vortex_server *v, struct slot *sl, const char *id,
                        uint32_t number) {
    int64_t now = dfc_mono_ns();
    pthread_mutex_lock(&v->mu);
    for (unsigned i = 0; i < v->nslots; i++) {
        const struct slot *o = &v->slots[i];
        if (o != sl && o->piece == number && delivering(o, now) && strcmp(o->task, id) == 0) {
            pthread_mutex_unlock(&v->mu);
            return false;
        }
    }
    memcpy(sl->task, id, sizeof(sl->task));
    sl->piece = number;
    sl->sending_since = now;
    pthread_mutex_unlock(&v->mu);
    return true;
}

static void release_piece(struct dfd_vortex_server *v, struct slot *sl) {
    pthread_mutex_lock(&v->mu);
    sl->sending_since = 0;
    pthread_mutex_unlock(&v->mu);
}

/* Answers Error Busy and keeps the connection: true when the whole packet went out. */
static bool send_busy(struct dfd_vortex_server *v, const struct dfd_conn *c, const char *id,
                      uint32_t number) {
    char msg[DFD_VORTEX_TASK_ID_LEN + 96];
    snprintf(msg, sizeof(msg), "piece %s-%u is being sent to another peer, try later", id, number);
    uint8_t out[DFD_VORTEX_HEADER_LEN + 1 + sizeof(msg)];
    size_t len = 0;
    if (dfd_vortex_error_encode(0, DFD_VORTEX_ERR_BUSY, msg, out, sizeof(out), &len, NULL) < 0) {
        return false;
    }
    dfc_metric_inc(v->busy_answers, 0, 1);
    return dfd_conn_send_all(c, out, len, dfd_deadline_after(v->request_timeout_ns), NULL) == 0;
}

/* Answers the request for piece number of task id on c: true when the piece was sent whole
 * (else an Error was sent and drained, or the answer failed). */
static bool answer(struct dfd_vortex_server *v, const struct dfd_conn *c, const char *id,
                   uint32_t number) {
    int fd = c->fd;
    char msg[DFC_ERROR_MSG_MAX + 160];
    struct dfc_error err = {0};
    struct dfd_piece_meta pm;
    int content_fd = -1;
    /* A committed task's piece, or a verified one of a replica downloading (storage.h). */
    int r = dfd_storage_open_piece(v->storage, id, number, &content_fd, &pm, &err);
    if (r == -ENOENT) {
        snprintf(msg, sizeof(msg), "piece %s-%u not found", id, number);
        send_error(v, c, DFD_VORTEX_ERR_NOT_FOUND, msg);
        return false;
    }
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "vortex.piece_failed", "task=%s piece=%u err=\"%s\"", id, number,
                dfc_error_msg(&err));
        snprintf(msg, sizeof(msg), "failed to get piece %s-%u: %s", id, number,
                 dfc_error_msg(&err));
        send_error(v, c, DFD_VORTEX_ERR_INTERNAL, msg);
        return false;
    }
    struct dfd_vortex_piece p = {
        .number = pm.number,
        .offset = pm.offset,
        .length = pm.length,
        .digest = pm.digest,
        .digest_len = (uint32_t)strnlen(pm.digest, sizeof(pm.digest)),
        .parent_id = v->parent_id,
        .parent_id_len = (uint32_t)strlen(v->parent_id),
        .traffic_type = TRAFFIC_REMOTE,
        .cost_secs = 0,
        .created_at = (int64_t)time(NULL),
    };
    uint8_t out[DFD_VORTEX_HEADER_LEN + 4 + DFD_VORTEX_METADATA_MAX];
    size_t len = 0;
    r = dfd_vortex_content_encode(0, &p, out, sizeof(out), &len, &err);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "failed to get piece %s-%u: %s", id, number, err.msg);
        send_error(v, c, DFD_VORTEX_ERR_INTERNAL, msg);
    } else {
        int64_t answer = dfd_deadline_after(v->answer_timeout_ns);
        int64_t first = dfd_deadline_after(v->request_timeout_ns);
        r = upload_begin(v, c, first < answer ? first : answer, id, number);
        bool began = r == 0;
        first = dfd_deadline_after(v->request_timeout_ns);
        if (r == 0) {
            r = dfd_conn_send_all(c, out, len, first < answer ? first : answer, NULL);
        }
        if (r == 0 && c->tls == NULL) {
            r = send_file(v, fd, content_fd, pm.offset, pm.length, v->request_timeout_ns, answer);
        } else if (r == 0) {
            r = send_file_tls(v, c, content_fd, pm.offset, pm.length, v->request_timeout_ns, answer,
                              NULL);
        }
        if (began) {
            dfd_upload_limits_end(&v->lim);
        }
        if (r == 0) {
            dfc_metric_inc(v->served_pieces, 0, 1);
            dfc_metric_inc(v->served_bytes, 0, pm.length);
        } else if (r == -ETIMEDOUT) {
            DFC_LOG(DFC_LOG_WARN, "vortex.answer_timeout",
                    "task=%s piece=%u the peer did not take the piece in time, resetting", id,
                    number);
            reset_on_close(fd);
        }
    }
    close(content_fd);
    return r == 0;
}

/* Serves one request of connection c (slot sl), read by deadline. True when the piece was sent
 * whole, or answered Busy (claim_piece), and the connection may take the next request; false when
 * it must close (an Error was sent and drained, the peer closed or stalled, the answer failed). */
static bool serve(struct dfd_vortex_server *v, struct slot *sl, const struct dfd_conn *c,
                  int64_t deadline) {
    uint8_t hb[DFD_VORTEX_HEADER_LEN];
    if (dfd_conn_recv_all(c, hb, sizeof(hb), deadline, NULL, NULL) < 0) {
        return false; /* closed, stalled or reset before a whole header: nothing to answer */
    }
    struct dfd_vortex_header h;
    dfd_vortex_header_decode(hb, &h);
    char msg[DFC_ERROR_MSG_MAX + 160];
    if (h.tag != DFD_VORTEX_TAG_DOWNLOAD_PERSISTENT_CACHE_PIECE ||
        h.length != DFD_VORTEX_REQUEST_LEN) {
        snprintf(msg, sizeof(msg), "unsupported packet: tag %u length %u (want tag %d length %d)",
                 h.tag, h.length, DFD_VORTEX_TAG_DOWNLOAD_PERSISTENT_CACHE_PIECE,
                 DFD_VORTEX_REQUEST_LEN);
        send_error(v, c, DFD_VORTEX_ERR_INVALID_ARGUMENT, msg);
        return false;
    }
    uint8_t value[DFD_VORTEX_REQUEST_LEN];
    if (dfd_conn_recv_all(c, value, sizeof(value), deadline, NULL, NULL) < 0) {
        return false;
    }
    char id[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t number = 0;
    struct dfc_error err = {0};
    if (dfd_vortex_request_decode(value, sizeof(value), id, &number, &err) < 0) {
        send_error(v, c, DFD_VORTEX_ERR_INVALID_ARGUMENT, err.msg);
        return false;
    }
    if (!claim_piece(v, sl, id, number)) {
        return send_busy(v, c, id, number);
    }
    bool sent = answer(v, c, id, number);
    if (!sent) {
        release_piece(v, sl); /* else claimed while the peer takes the bytes (delivering()) */
    }
    return sent;
}

/* Logs a refused handshake, at most once per WARN_INTERVAL_NS with the count of the others. */
static void tls_refused(struct dfd_vortex_server *v, const struct dfc_error *err) {
    int64_t now = dfc_mono_ns();
    pthread_mutex_lock(&v->mu);
    uint64_t others = v->tls_refused;
    bool log = v->tls_warn_ns == 0 || now - v->tls_warn_ns >= WARN_INTERVAL_NS;
    if (log) {
        v->tls_refused = 0;
        v->tls_warn_ns = now;
    } else {
        v->tls_refused++;
    }
    pthread_mutex_unlock(&v->mu);
    if (log) {
        DFC_LOG(DFC_LOG_WARN, "vortex.tls_refused", "err=\"%s\" refused_since_last_warning=%llu",
                dfc_error_msg(err), (unsigned long long)others);
    }
}

/* The TLS handshake of an accepted connection by deadline; NULL when it failed (logged). */
static struct dfc_tls_conn *tls_accept(struct dfd_vortex_server *v, int fd, int64_t deadline) {
    struct dfc_sockaddr sa = {.len = sizeof(sa.ss)};
    char ip[DFC_TLS_IP_MAX] = "?";
    char peer[DFC_ADDR_STR_MAX];
    unsigned port = 0;
    if (getpeername(fd, (struct sockaddr *)&sa.ss, &sa.len) == 0) {
        (void)dfc_addr_ip((struct sockaddr *)&sa.ss, ip, sizeof(ip));
        port = dfc_addr_port(&sa.ss);
    }
    dfc_addr_format(ip, port, peer, sizeof(peer));
    struct dfc_tls_conn *t = NULL;
    struct dfc_error err = {0};
    if (dfc_tls_accept(v->tls, fd, peer, deadline, &t, &err) < 0) {
        tls_refused(v, &err);
        drain(v, fd); /* so the client reads the alert that says why */
        return NULL;
    }
    return t;
}

static void *conn_main(void *arg) {
    struct slot *sl = arg;
    struct dfd_vortex_server *v = sl->v;
    pthread_mutex_lock(&v->mu);
    int fd = sl->fd;
    pthread_mutex_unlock(&v->mu);
    /* The handshake and the first request together within request_timeout; each later request
     * within the keep-alive of the answer before it. */
    int64_t deadline = dfd_deadline_after(v->request_timeout_ns);
    struct dfd_conn c = {.fd = fd, .tls = NULL};
    /* A rotation of the server's files ends kept connections, so that peers see the new
     * certificate at their next connection. */
    uint64_t gen = v->tls != NULL ? dfc_tls_ctx_generation(v->tls) : 0;
    if (v->tls == NULL || (c.tls = tls_accept(v, fd, deadline)) != NULL) {
        for (unsigned n = 0; n < MAX_REQUESTS && serve(v, sl, &c, deadline) &&
                             (v->tls == NULL || dfc_tls_ctx_refresh(v->tls) == gen);
             n++) {
            deadline = dfd_deadline_after(v->keepalive_ns);
        }
        if (c.tls != NULL) {
            dfc_tls_shutdown(c.tls);
            dfc_tls_conn_free(c.tls);
        }
    }
    pthread_mutex_lock(&v->mu);
    close(fd);
    sl->fd = -1;
    sl->state = SLOT_DONE;
    dfc_keycount_put(&v->ips, sl->ip);
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

/* With v->mu held: joins finished handlers, returns a free slot or NULL. */
static struct slot *reap_and_find(struct dfd_vortex_server *v) {
    struct slot *free_slot = NULL;
    for (unsigned i = 0; i < v->nslots; i++) {
        struct slot *sl = &v->slots[i];
        if (sl->state == SLOT_DONE) {
            pthread_join(sl->th, NULL); /* it returns right after marking itself done */
            sl->state = SLOT_FREE;
        }
        if (sl->state == SLOT_FREE && free_slot == NULL) {
            free_slot = sl;
        }
    }
    return free_slot;
}

static void refuse(struct dfd_vortex_server *v, int fd, const char *ip) {
    close(fd);
    v->dropped++;
    int64_t now = dfc_mono_ns();
    if (v->last_warn_ns == 0 || now - v->last_warn_ns >= WARN_INTERVAL_NS) {
        DFC_LOG(DFC_LOG_WARN, "vortex.conn_limit",
                "max_conns=%u max_conns_per_ip=%u last_peer=%s dropped=%llu (connections closed "
                "at accept since the last warning)",
                v->nslots, v->max_per_ip, ip, (unsigned long long)v->dropped);
        v->dropped = 0;
        v->last_warn_ns = now;
    }
}

/* As upstream on both sides: TCP_NODELAY, keepalive 5 s idle, 3 s interval, 3 probes; and our
 * send buffer of one piece (vortex.h). */
static void set_conn_opts(int fd) {
    int one = 1;
    int buf = DFD_VORTEX_SOCKBUF;
    int idle = 5;
    int intvl = 3;
    int cnt = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
}

static void *accept_main(void *arg) {
    struct dfd_vortex_server *v = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = v->lfd, .events = POLLIN},
                              {.fd = v->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            DFC_LOG(DFC_LOG_ERROR, "vortex.poll_failed", "errno=%d", errno);
            return NULL;
        }
        if (p[1].revents != 0) {
            return NULL;
        }
        if ((p[0].revents & POLLIN) == 0) {
            continue;
        }
        struct sockaddr_storage sa = {0};
        socklen_t sa_len = sizeof(sa);
        int fd = accept4(v->lfd, (struct sockaddr *)&sa, &sa_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED) {
                DFC_LOG(DFC_LOG_WARN, "vortex.accept_failed", "errno=%d", errno);
                /* EMFILE and the like: do not spin; the stop fd still ends the wait */
                struct pollfd s = {.fd = v->stop_fd, .events = POLLIN};
                (void)poll(&s, 1, 100);
            }
            continue;
        }
        char ip[INET6_ADDRSTRLEN] = "";
        (void)dfc_addr_ip((const struct sockaddr *)&sa, ip, sizeof(ip));
        set_conn_opts(fd);
        pthread_mutex_lock(&v->mu);
        struct slot *sl = reap_and_find(v);
        if (sl == NULL || dfc_keycount_take(&v->ips, ip, v->max_per_ip) < 0) {
            pthread_mutex_unlock(&v->mu);
            refuse(v, fd, ip);
            continue;
        }
        sl->fd = fd;
        sl->state = SLOT_RUNNING;
        v->accepted++;
        memcpy(sl->ip, ip, sizeof(ip));
        if (pthread_create(&sl->th, &v->conn_attr, conn_main, sl) != 0) {
            sl->fd = -1;
            sl->state = SLOT_FREE;
            dfc_keycount_put(&v->ips, ip);
            pthread_mutex_unlock(&v->mu);
            refuse(v, fd, ip);
            continue;
        }
        pthread_mutex_unlock(&v->mu);
    }
}

static int listen_on(const char *ip, uint16_t port, int *ret_fd, uint16_t *ret_port,
                     struct dfc_error *err) {
    struct dfc_sockaddr sa;
    const char *shown = ip != NULL && ip[0] != '\0' ? ip : "0.0.0.0";
    if (dfc_addr_sockaddr(shown, port, &sa) < 0) {
        return dfc_error_set(err, -EINVAL, "vortex server: ip `%s` is not an IPv4 or IPv6 address",
                             shown);
    }
    int fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "vortex server: socket");
    }
    int one = 1;
    int r = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
        r = dfc_error_errno(err, -errno, "vortex server: SO_REUSEADDR");
    } else if (bind(fd, (struct sockaddr *)&sa.ss, sa.len) < 0) {
        r = dfc_error_errno(err, -errno, "vortex server: bind %s port %u", shown, port);
    } else if (listen(fd, LISTEN_BACKLOG) < 0) {
        r = dfc_error_errno(err, -errno, "vortex server: listen");
    } else if (getsockname(fd, (struct sockaddr *)&sa.ss, &sa.len) < 0) {
        r = dfc_error_errno(err, -errno, "vortex server: getsockname");
    }
    if (r < 0) {
        close(fd);
        return r;
    }
    *ret_port = (uint16_t)dfc_addr_port(&sa.ss);
    *ret_fd = fd;
    return 0;
}

int dfd_vortex_server_start(struct dfd_storage *storage, const struct dfd_vortex_server_opts *o,
                            struct dfd_vortex_server **ret, struct dfc_error *err) {
    if (storage == NULL || o == NULL) {
        return dfc_error_set(err, -EINVAL, "vortex server: storage and options are needed");
    }
    if (o->max_conns == 0) {
        return dfc_error_set(err, -EINVAL, "vortex server: max_conns must be at least 1");
    }
    if (o->request_timeout_ns <= 0 || o->answer_timeout_ns <= 0) {
        return dfc_error_set(err, -EINVAL,
                             "vortex server: request_timeout and answer_timeout must be positive");
    }
    const char *parent_id = o->parent_id != NULL ? o->parent_id : "";
    if (strlen(parent_id) > 1024) {
        return dfc_error_set(err, -EINVAL, "vortex server: parent_id longer than 1024 bytes");
    }
    struct dfd_vortex_server *v = calloc(1, sizeof(*v));
    struct slot *slots = calloc(o->max_conns, sizeof(*slots));
    if (v == NULL || slots == NULL) {
        free(v);
        free(slots);
        return dfc_error_set(err, -ENOMEM, "vortex server: out of memory");
    }
    v->storage = storage;
    v->tls = o->tls;
    v->parent_id = parent_id;
    v->served_pieces = o->served_pieces;
    v->busy_answers = o->busy_answers;
    v->served_bytes = o->served_bytes;
    v->request_timeout_ns = o->request_timeout_ns;
    v->answer_timeout_ns = o->answer_timeout_ns;
    v->keepalive_ns = o->request_timeout_ns < KEEPALIVE_NS ? o->request_timeout_ns : KEEPALIVE_NS;
    v->nslots = o->max_conns;
    v->max_per_ip = o->max_conns_per_ip != 0 && o->max_conns_per_ip < o->max_conns
                        ? o->max_conns_per_ip
                        : o->max_conns;
    v->slots = slots;
    v->lfd = -1;
    for (unsigned i = 0; i < v->nslots; i++) {
        slots[i].v = v;
        slots[i].fd = -1;
    }
    pthread_mutex_init(&v->mu, NULL);
    dfd_upload_limits_init(&v->lim, o->rate_limit,
                           o->max_uploads != 0 && o->max_uploads < o->max_conns ? o->max_uploads
                                                                                : o->max_conns);
    pthread_attr_init(&v->conn_attr);
    (void)pthread_attr_setstacksize(&v->conn_attr, CONN_STACK);
    int r = listen_on(o->ip, o->port, &v->lfd, &v->port, err);
    if (r == 0) {
        v->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (v->stop_fd < 0) {
            r = dfc_error_errno(err, -errno, "vortex server: eventfd");
        } else if (pthread_create(&v->accept_th, NULL, accept_main, v) != 0) {
            r = dfc_error_set(err, -EAGAIN, "vortex server: cannot start the accept thread");
            close(v->stop_fd);
        }
    }
    if (r < 0) {
        if (v->lfd >= 0) {
            close(v->lfd);
        }
        pthread_attr_destroy(&v->conn_attr);
        dfd_upload_limits_destroy(&v->lim);
        pthread_mutex_destroy(&v->mu);
        free(slots);
        free(v);
        return r;
    }
    *ret = v;
    return 0;
}

uint16_t dfd_vortex_server_port(const struct dfd_vortex_server *v) {
    return v->port;
}

uint64_t dfd_vortex_server_accepted(struct dfd_vortex_server *v) {
    pthread_mutex_lock(&v->mu);
    uint64_t n = v->accepted;
    pthread_mutex_unlock(&v->mu);
    return n;
}

void dfd_vortex_server_stop(struct dfd_vortex_server *v) {
    if (v == NULL) {
        return;
    }
    uint64_t one = 1;
    while (write(v->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    pthread_join(v->accept_th, NULL);
    close(v->lfd);
    dfd_upload_limits_stop(&v->lim);
    pthread_mutex_lock(&v->mu);
    for (unsigned i = 0; i < v->nslots; i++) {
        if (v->slots[i].state == SLOT_RUNNING && v->slots[i].fd >= 0) {
            shutdown(v->slots[i].fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&v->mu);
    for (unsigned i = 0; i < v->nslots; i++) {
        /* No new handler can start (the accept thread is gone); state is read once each has
         * been joined or was never started. */
        pthread_mutex_lock(&v->mu);
        enum slot_state st = v->slots[i].state;
        pthread_mutex_unlock(&v->mu);
        if (st != SLOT_FREE) {
            pthread_join(v->slots[i].th, NULL);
        }
    }
    close(v->stop_fd);
    pthread_attr_destroy(&v->conn_attr);
    dfd_upload_limits_destroy(&v->lim);
    pthread_mutex_destroy(&v->mu);
    dfc_keycount_free(&v->ips);
    free(v->slots);
    free(v);
}
