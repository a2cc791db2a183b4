/*
 * vortex_client.c - one piece from a parent's Vortex TCP server (docs/dragonfly-compat.md,
 * "Vortex"). The socket is non-blocking from the start: connect, every write and every read
 * waits in poll() for at most what is left of the caller's deadline, so a silent or slow
 * parent costs at most timeout_ns. Nothing is allocated: the answer's header is checked
 * before its value is read into a bounded stack buffer, and the piece's bytes go straight
 * into the caller's buffer, or through a small one to the caller's sink (dfd_vortex_fetch_to):
 * each chunk is CRC'd and handed on while it is still in the CPU cache, instead of three passes
 * over a 4 MiB piece in memory (receive, CRC, write).
 *
 * With a rate limit (download.rateLimit: one token bucket, dfc/ratelimit.h, shared by every
 * download of the daemon) each chunk of the piece is paid for before it is read, within the
 * exchange's deadline; the parent is slowed by TCP's flow control meanwhile.
 *
 * With a TLS context the connection's handshake follows connect, within the same deadline, and
 * the same exchange runs over the session (sockio.h's struct dfd_conn).
 *
 * Connections are reused (vortex_pool.h): a request goes on an idle connection to the same
 * parent when there is one, and a connection whose answer was read whole goes back; one that
 * failed in any way is closed.
 */
#include "p2p/vortex_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dfc/addr.h"
#include "dfc/digest.h"
#include "dfc/ratelimit.h"
#include "dfc/tls_ssl.h"
#include "p2p/sockio.h"
#include "p2p/vortex.h"
#include "p2p/vortex_pool.h"
#include "storage/piece.h" /* dfd_task_id_valid */

#define CONNECT_TIMEOUT_NS                                                                         \
    ((int64_t)2 * 1000 * 1000 * 1000) /* upstream DEFAULT_CONNECT_TIMEOUT                          \
                                       */
/* Into a whole-piece buffer the bytes are still read and CRC'd this much at a time. */
#define RECV_CHUNK        ((size_t)256 * 1024)
#define KEEPALIVE_IDLE_S  5
#define KEEPALIVE_INTVL_S 3
#define KEEPALIVE_CNT     3

static int connect_to(const char *ip, uint16_t port, int64_t deadline, int *ret_fd,
                      struct dfc_error *err) {
    struct dfc_sockaddr sa;
    if (dfc_addr_sockaddr(ip, port, &sa) < 0) {
        return dfc_error_set(err, -EINVAL, "ip is not an IPv4 or IPv6 address");
    }
    int fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "socket");
    }
    int one = 1;
    int idle = KEEPALIVE_IDLE_S;
    int intvl = KEEPALIVE_INTVL_S;
    int cnt = KEEPALIVE_CNT;
    int buf = DFD_VORTEX_SOCKBUF;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0) {
        int r = dfc_error_errno(err, -errno, "setsockopt");
        close(fd);
        return r;
    }
    int64_t cdl = dfc_mono_ns() + CONNECT_TIMEOUT_NS;
    if (cdl > deadline) {
        cdl = deadline;
    }
    int r = 0;
    if (connect(fd, (struct sockaddr *)&sa.ss, sa.len) < 0) {
        if (errno != EINPROGRESS) {
            r = dfc_error_errno(err, -errno, "connect");
        } else if ((r = dfd_wait_fd(fd, POLLOUT, cdl)) < 0) {
            r = r == -ETIMEDOUT ? dfc_error_set(err, r, "connect timed out")
                                : dfc_error_errno(err, r, "poll");
        } else {
            int soerr = 0;
            socklen_t el = sizeof(soerr);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0) {
                soerr = errno;
            }
            if (soerr != 0) {
                r = dfc_error_errno(err, -soerr, "connect");
            }
        }
    }
    if (r < 0) {
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static int send_all(const struct dfd_conn *c, const uint8_t *p, size_t n, int64_t deadline,
                    struct dfc_error *err) {
    struct dfc_error terr = {0};
    int r = dfd_conn_send_all(c, p, n, deadline, &terr);
    if (r == -ETIMEDOUT) {
        return dfc_error_set(err, r, "timed out sending the request");
    }
    if (r == -ECONNABORTED) {
        return dfc_error_set(err, r, "send the request: %s", terr.msg);
    }
    return r < 0 ? dfc_error_errno(err, r, "send the request") : 0;
}

/* Reads exactly n bytes; what names them in errors. A close before the end is -EPROTO.
 * *ret_got (may be NULL): how many arrived, also on failure. */
static int recv_got(const struct dfd_conn *c, void *buf, size_t n, int64_t deadline,
                    const char *what, size_t *ret_got, struct dfc_error *err) {
    size_t got = 0;
    struct dfc_error terr = {0};
    int r = dfd_conn_recv_all(c, buf, n, deadline, &got, &terr);
    if (ret_got != NULL) {
        *ret_got = got;
    }
    if (r == -ECONNABORTED) {
        return dfc_error_set(err, r, "read %s: %s", what, terr.msg);
    }
    if (r == -EPROTO) {
        return dfc_error_set(err, r, "connection closed after %zu of %zu bytes of %s", got, n,
                             what);
    }
    if (r == -ETIMEDOUT) {
        return dfc_error_set(err, r, "timed out reading %s (%zu of %zu bytes)", what, got, n);
    }
    return r < 0 ? dfc_error_errno(err, r, "read %s", what) : 0;
}

static int recv_all(const struct dfd_conn *c, void *buf, size_t n, int64_t deadline,
                    const char *what, struct dfc_error *err) {
    return recv_got(c, buf, n, deadline, what, NULL, err);
}

/* Copies an untrusted message into dst for a human, with anything but printable ASCII as '?'. */
static void printable(char *dst, size_t size, const char *src, size_t n) {
    size_t i = 0;
    for (; i < n && i + 1 < size; i++) {
        unsigned char ch = (unsigned char)src[i];
        if (ch >= 0x20 && ch < 0x7f) {
            dst[i] = src[i];
        } else {
            dst[i] = '?';
        }
    }
    dst[i] = '\0';
}

static const char *error_code_name(uint8_t code) {
    switch (code) {
    case DFD_VORTEX_ERR_INVALID_ARGUMENT:
        return "InvalidArgument";
    case DFD_VORTEX_ERR_NOT_FOUND:
        return "NotFound";
    case DFD_VORTEX_ERR_INTERNAL:
        return "Internal";
    case DFD_VORTEX_ERR_BUSY:
        return "Busy";
    default:
        return "Unknown";
    }
}

/* The parent's Error packet, header already read: its code as our error. */
static int read_error(const struct dfd_conn *c, uint32_t length, int64_t deadline,
                      struct dfc_error *err) {
    if (length < 1 || length > 1 + DFD_VORTEX_ERROR_MAX) {
        return dfc_error_set(err, -EPROTO, "error packet length %u outside 1..%d", length,
                             1 + DFD_VORTEX_ERROR_MAX);
    }
    uint8_t value[1 + DFD_VORTEX_ERROR_MAX];
    int r = recv_all(c, value, length, deadline, "the error packet", err);
    if (r < 0) {
        return r;
    }
    uint8_t code;
    const char *msg;
    size_t msg_len;
    r = dfd_vortex_error_decode(value, length, &code, &msg, &msg_len, err);
    if (r < 0) {
        return r;
    }
    char text[256];
    printable(text, sizeof(text), msg, msg_len);
    int e = code == DFD_VORTEX_ERR_NOT_FOUND          ? -ENOENT
            : code == DFD_VORTEX_ERR_INVALID_ARGUMENT ? -EINVAL
            : code == DFD_VORTEX_ERR_INTERNAL         ? DFC_E_INTERNAL
            : code == DFD_VORTEX_ERR_BUSY             ? -EBUSY
                                                      : DFC_E_UNKNOWN;
    return dfc_error_set(err, e, "parent answered Error %s (%u): %s", error_code_name(code), code,
                         text);
}

/* Checks the advertised digest before any byte is read: "crc32:<decimal>", never empty. */
static int check_digest(const struct dfd_vortex_piece *p, char want[DFC_CRC32_DIGEST_MAX],
                        struct dfc_error *err) {
    static const char prefix[] = "crc32:";
    const size_t plen = sizeof(prefix) - 1;
    if (p->digest_len == 0) {
        return dfc_error_set(err, DFC_E_DATA_LOSS, "the parent advertised an empty digest");
    }
    char shown[64];
    printable(shown, sizeof(shown), p->digest, p->digest_len);
    if (p->digest_len <= plen || p->digest_len >= DFC_CRC32_DIGEST_MAX ||
        memcmp(p->digest, prefix, plen) != 0) {
        return dfc_error_set(err, DFC_E_DATA_LOSS, "digest `%s` is not crc32:<decimal>", shown);
    }
    memcpy(want, p->digest, p->digest_len);
    want[p->digest_len] = '\0';
    for (size_t i = plen; i < p->digest_len; i++) {
        if (want[i] < '0' || want[i] > '9') {
            return dfc_error_set(err, DFC_E_DATA_LOSS, "digest `%s` is not crc32:<decimal>", shown);
        }
    }
    return 0;
}

/* Where the piece's bytes go: all of them into buf (sink NULL), or chunk by chunk through buf
 * (buf_len bytes), or the sink's own buffers, to sink, each chunk CRC'd while it is still in
 * the cache. */
struct dest {
    void *buf;
    size_t buf_len;
    const struct dfd_vortex_sink *sink;
    struct dfc_ratelimit *rate; /* each chunk paid for before it is read; NULL: unlimited */
};

/* The deadline of the next wait for bytes: the exchange's, or sooner when the sink bounds a
 * parent's silence (idle_ns). */
static int64_t wait_deadline(const struct dest *d, int64_t deadline) {
    int64_t idle = d->sink != NULL ? d->sink->idle_ns : 0;
    if (idle <= 0) {
        return deadline;
    }
    int64_t now = dfc_mono_ns();
    return idle < deadline - now ? now + idle : deadline;
}

/* Reads the piece's length bytes to d, CRC over them as they arrive. */
static int recv_piece(const struct dfd_conn *c, const struct dest *d, uint64_t length,
                      int64_t deadline, uint32_t *ret_crc, struct dfc_error *err) {
    uint32_t crc = 0;
    uint64_t done = 0;
    while (done < length) {
        uint64_t left = length - done;
        size_t n = left < d->buf_len ? (size_t)left : d->buf_len;
        bool supplied = d->sink != NULL && d->sink->buffer != NULL;
        uint8_t *at = supplied          ? d->sink->buffer(d->sink->arg)
                      : d->sink != NULL ? d->buf
                                        : (uint8_t *)d->buf + done;
        int r = dfc_ratelimit_take(d->rate, n, deadline, NULL);
        if (r < 0) {
            r = dfc_error_set(err, r,
                              "download.rateLimit leaves too little time to read the piece");
        } else {
            r = recv_all(c, at, n, wait_deadline(d, deadline), "the piece", err);
        }
        if (r < 0) {
            if (supplied) {
                d->sink->release(d->sink->arg, at);
            }
            return dfc_error_prefix(err, "at byte %llu of %llu", (unsigned long long)done,
                                    (unsigned long long)length);
        }
        crc = dfc_crc32_update(crc, at, n);
        if (d->sink != NULL && (r = d->sink->write(d->sink->arg, done, at, n, err)) < 0) {
            return r;
        }
        done += n;
    }
    *ret_crc = crc;
    return 0;
}

/* One request and its answer on c. *answered: whether any byte of the answer arrived (a
 * connection taken from the pool that fails before is retried on a new one). */
static int exchange(const struct dfd_conn *c, const char *task_id, uint32_t number, uint64_t offset,
                    uint64_t length, const struct dest *d, int64_t deadline,
                    struct dfd_vortex_fetched *ret, bool *answered, struct dfc_error *err) {
    uint8_t packet_id = 0;
    if (getrandom(&packet_id, 1, GRND_NONBLOCK) != 1) {
        packet_id = (uint8_t)dfc_mono_ns(); /* not used for matching: any value will do */
    }
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    int r = dfd_vortex_request_encode(packet_id, task_id, number, req, err);
    if (r < 0) {
        return r;
    }
    if ((r = send_all(c, req, sizeof(req), deadline, err)) < 0) {
        return r;
    }
    uint8_t hb[DFD_VORTEX_HEADER_LEN];
    size_t got = 0;
    r = recv_got(c, hb, sizeof(hb), wait_deadline(d, deadline), "the header", &got, err);
    *answered = got > 0;
    if (r < 0) {
        return r;
    }
    struct dfd_vortex_header h;
    dfd_vortex_header_decode(hb, &h);
    if (h.tag == DFD_VORTEX_TAG_ERROR) {
        return read_error(c, h.length, deadline, err);
    }
    if (h.tag != DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT) {
        return dfc_error_set(err, -EPROTO, "unexpected tag %u (want %d)", h.tag,
                             DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT);
    }
    if (h.length < 4 || h.length > 4 + DFD_VORTEX_METADATA_MAX) {
        return dfc_error_set(err, -EPROTO, "content packet length %u outside 4..%d", h.length,
                             4 + DFD_VORTEX_METADATA_MAX);
    }
    uint8_t value[4 + DFD_VORTEX_METADATA_MAX];
    if ((r = recv_all(c, value, h.length, deadline, "the metadata", err)) < 0) {
        return r;
    }
    struct dfd_vortex_piece p;
    if ((r = dfd_vortex_content_decode(value, h.length, &p, err)) < 0) {
        return r;
    }
    if (p.number != number || p.offset != offset || p.length != length) {
        return dfc_error_set(err, -EPROTO,
                             "metadata names piece %u offset %llu length %llu, asked for piece "
                             "%u offset %llu length %llu",
                             p.number, (unsigned long long)p.offset, (unsigned long long)p.length,
                             number, (unsigned long long)offset, (unsigned long long)length);
    }
    char want[DFC_CRC32_DIGEST_MAX];
    if ((r = check_digest(&p, want, err)) < 0) {
        return r;
    }
    uint32_t crc = 0;
    if ((r = recv_piece(c, d, length, deadline, &crc, err)) < 0) {
        return r;
    }
    char have[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(crc, have);
    if (strcmp(have, want) != 0) {
        return dfc_error_set(err, DFC_E_DATA_LOSS, "digest mismatch: advertised %s, received %s",
                             want, have);
    }
    ret->crc32 = crc;
    return 0;
}

static int fetch(struct dfc_tls_ctx *tls, const char *ip, uint16_t port, const char *task_id,
                 uint32_t number, uint64_t offset, uint64_t length, const struct dest *d,
                 int64_t timeout_ns, struct dfd_vortex_fetched *ret, struct dfc_error *err) {
    int64_t start = dfc_mono_ns();
    const char *shown_ip = ip != NULL ? ip : "(null)";
    const char *shown_id = task_id != NULL && dfd_task_id_valid(task_id) ? task_id : "?";
    int r = 0;
    if (ip == NULL || task_id == NULL || !dfd_task_id_valid(task_id)) {
        r = dfc_error_set(err, -EINVAL, "ip and a task_id of %d lowercase hex digits are needed",
                          DFD_VORTEX_TASK_ID_LEN);
    } else if (d->sink != NULL && (d->buf_len == 0 || d->sink->write == NULL ||
                                   (d->sink->buffer != NULL) == (d->buf != NULL) ||
                                   (d->sink->buffer != NULL && d->sink->release == NULL))) {
        r = dfc_error_set(err, -EINVAL,
                          "a sink needs a write function and a buffer, its own (with a "
                          "release function) or the caller's, not both");
    } else if (d->sink == NULL && d->buf == NULL && length > 0) {
        r = dfc_error_set(err, -EINVAL, "no buffer for %llu bytes", (unsigned long long)length);
    } else if (timeout_ns <= 0) {
        r = dfc_error_set(err, -EINVAL, "timeout_ns must be positive");
    }
    int64_t deadline = timeout_ns < INT64_MAX - start ? start + timeout_ns : INT64_MAX;
    struct dfd_vortex_fetched f = {0};
    /* A pooled connection first; when it fails before any byte of the answer (the parent
     * closed it meanwhile: an upstream parent answers one request per connection), once more on
     * a new one. Only a connection whose answer was read whole (a piece, or Busy) goes back to
     * the pool. */
    for (bool first = true, retry = r == 0; retry; first = false) {
        struct dfd_conn c = {.fd = -1, .tls = NULL};
        uint64_t gen = 0;
        bool reused = false;
        if (first) {
            reused = dfd_vortex_pool_take(tls, ip, port, &c, &gen);
        } else {
            gen = dfd_vortex_pool_generation(tls);
        }
        if (!reused) {
            r = connect_to(ip, port, deadline, &c.fd, err);
            if (r == 0 && tls != NULL) {
                r = dfc_tls_connect(tls, c.fd, ip, port, deadline, &c.tls, err);
            }
        }
        bool answered = false;
        if (r == 0) {
            r = exchange(&c, task_id, number, offset, length, d, deadline, &f, &answered, err);
        }
        retry = false;
        if (r == 0 || r == -EBUSY) { /* Busy: the error was read whole, the connection kept */
            dfd_vortex_pool_put(tls, gen, ip, port, &c);
        } else {
            dfd_conn_close(&c);
            retry = reused && !answered && r != -ETIMEDOUT && dfc_mono_ns() < deadline;
            r = retry ? 0 : r;
        }
    }
    if (r < 0) {
        if (err != NULL) {
            (void)dfc_error_prefix(err, "vortex %s:%u piece %s-%u", shown_ip, port, shown_id,
                                   number);
        }
        return r;
    }
    f.cost_ns = (uint64_t)(dfc_mono_ns() - start);
    if (ret != NULL) {
        *ret = f;
    }
    return 0;
}

int dfd_vortex_fetch(struct dfc_tls_ctx *tls, struct dfc_ratelimit *rate, const char *ip,
                     uint16_t port, const char *task_id, uint32_t number, uint64_t offset,
                     uint64_t length, void *buf, int64_t timeout_ns, struct dfd_vortex_fetched *ret,
                     struct dfc_error *err) {
    struct dest d = {.buf = buf, .buf_len = RECV_CHUNK, .sink = NULL, .rate = rate};
    return fetch(tls, ip, port, task_id, number, offset, length, &d, timeout_ns, ret, err);
}

int dfd_vortex_fetch_to(struct dfc_tls_ctx *tls, struct dfc_ratelimit *rate, const char *ip,
                        uint16_t port, const char *task_id, uint32_t number, uint64_t offset,
                        uint64_t length, const struct dfd_vortex_sink *sink, void *buf,
                        size_t buf_len, int64_t timeout_ns, struct dfd_vortex_fetched *ret,
                        struct dfc_error *err) {
    struct dest d = {.buf = buf, .buf_len = buf_len, .sink = sink, .rate = rate};
    if (sink == NULL) {
        return dfc_error_set(err, -EINVAL, "no sink");
    }
    return fetch(tls, ip, port, task_id, number, offset, length, &d, timeout_ns, ret, err);
}
