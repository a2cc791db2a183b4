/*
 * vortex_server.h - the Vortex TCP piece server (storage.server.tcpPort): one request per
 * connection as upstream, or more: after a piece sent whole the next request is awaited on the
 * same connection for at most 5 s (request_timeout if shorter), up to 1024 per connection
 * (docs/dragonfly-compat.md, "Vortex"; an upstream client closes after one). Beyond upstream: a
 * request must be exactly 68 bytes (checked from the header, before anything is allocated),
 * malformed or unknown packets get an Error frame, the request read is bounded by request_timeout,
 * the whole answer by answer_timeout (a peer that reads slowly is reset then, so it cannot hold a
 * slot), and at most max_conns connections are served at once, at most max_conns_per_ip of them
 * from one peer address (more are closed at accept, with a rate-limited warning). Ours too: the
 * piece bytes sent may be limited in rate (upload.rateLimit, upstream's key) and in pieces at
 * once (storage.server.maxConcurrentUploads), so that a node serving the swarm keeps bandwidth
 * for its own pods. And a piece still being delivered to one connection is answered Error Busy
 * (4, ours) to another, whose connection stays open (docs/dragonfly-compat.md, "Busy"). The
 * request deadline runs from the accept: a connection that sends nothing, or trickles its 74
 * bytes, is closed after request_timeout.
 *
 * It serves only committed tasks, through the storage facade (dfd_storage_pieces,
 * dfd_storage_open_content): the piece row's offset, length and stored digest go in the
 * metadata and the bytes follow with sendfile. An absent task or piece is Error NotFound
 * "piece <task>-<n> not found". Remote peers are untrusted input.
 *
 * Ownership: storage is borrowed and must outlive the server.
 */
#ifndef DFD_P2P_VORTEX_SERVER_H
#define DFD_P2P_VORTEX_SERVER_H

#include <stdint.h>

#include "dfc/error.h"

struct dfc_metric;
struct dfc_tls_ctx;
struct dfd_storage;
struct dfd_vortex_server;

struct dfd_vortex_server_opts {
    const char *ip;             /* listen address; "" or NULL = 0.0.0.0 */
    uint16_t port;              /* 0: an ephemeral port (tests), see dfd_vortex_server_port() */
    unsigned max_conns;         /* concurrent connections */
    unsigned max_conns_per_ip;  /* of them from one peer address; 0 = max_conns */
    int64_t request_timeout_ns; /* reading the request, and each write of the answer */
    int64_t answer_timeout_ns;  /* the whole answer of one piece, header to last byte */
    const char *parent_id;      /* the host id sent as parent_id (borrowed, outlives) */
    /* Counted once a piece's bytes were all sent: one per piece, and its length (NULL: not
     * counted; borrowed, outlive the server). */
    struct dfc_metric *served_pieces;
    struct dfc_metric *served_bytes;
    /* Counted for each request answered Error Busy (NULL: not counted; borrowed). */
    struct dfc_metric *busy_answers;
    /* TLS on the port (dfc/tls_ssl.h, a server context): every connection must complete a
     * handshake, within request_timeout, before its request is read. NULL: plain TCP. Borrowed,
     * outlives the server. */
    struct dfc_tls_ctx *tls;
    /* upload.rateLimit: bytes per second of piece bytes sent, by all connections together; 0 =
     * unlimited. Sent in chunks of 256 KiB, each paid for first (dfc/ratelimit.h), within the
     * answer's deadline. */
    uint64_t rate_limit;
    /* storage.server.maxConcurrentUploads: pieces sent at once; 0 (or more than max_conns) =
     * max_conns. A request beyond waits up to request_timeout for one to end, then is answered
     * Error Internal (3) naming the limit, and its connection closes. */
    unsigned max_uploads;
};

/* Binds, listens and starts serving on its own threads. */
int dfd_vortex_server_start(struct dfd_storage *storage, const struct dfd_vortex_server_opts *o,
                            struct dfd_vortex_server **ret, struct dfc_error *err);

/* The bound port. */
uint16_t dfd_vortex_server_port(const struct dfd_vortex_server *v);

/* How many connections were accepted and handed to a handler so far (not those refused). */
uint64_t dfd_vortex_server_accepted(struct dfd_vortex_server *v);

/* Stops accepting, closes every connection, joins the threads, frees. NULL is fine. */
void dfd_vortex_server_stop(struct dfd_vortex_server *v);

#endif /* DFD_P2P_VORTEX_SERVER_H */
