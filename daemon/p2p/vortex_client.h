/*
 * vortex_client.h - fetching one piece from a parent's Vortex TCP server, on an idle
 * connection to that parent kept from an earlier piece or on a new one. The kept ones are
 * vortex_pool.h's; a new one as upstream (connect timeout 2 s, TCP_NODELAY, keepalive
 * 5 s / 3 s x 3), the whole exchange bounded by timeout_ns. A kept connection the parent closed
 * before answering (an upstream parent serves one request per connection) is replaced by a new
 * one, once, transparently.
 *
 * The parent is untrusted: the header's tag and length are checked before anything is read
 * (a content packet's metadata at most DFD_VORTEX_METADATA_MAX, an error's message at most
 * DFD_VORTEX_ERROR_MAX), the metadata must name the piece asked for with the length expected,
 * and the bytes must have the CRC-32 of the advertised digest ("crc32:<decimal>"). Unlike
 * upstream, an empty advertised digest is refused, not accepted with a warning.
 */
#ifndef DFD_P2P_VORTEX_CLIENT_H
#define DFD_P2P_VORTEX_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

/* What the parent sent besides the bytes. */
struct dfd_vortex_fetched {
    uint32_t crc32;   /* of the bytes received (equal to the advertised digest) */
    uint64_t cost_ns; /* the whole exchange, measured here */
};

struct dfc_ratelimit;
struct dfc_tls_ctx;

/* Fetches piece number of task_id (64 hex digits) from ip:port into buf, which holds length
 * bytes (the piece's length from the geometry). Returns 0; -ENOENT when the parent answers
 * Error NotFound; -EBUSY when it answers Error Busy (it is sending the piece to another peer:
 * ask another, or it later; the connection is kept); DFC_E_DATA_LOSS when the CRC differs or the
 * digest is empty or malformed; -EPROTO for a malformed or unexpected answer (wrong tag, number,
 * offset or length); -ETIMEDOUT; -ECONNREFUSED and other connect errors as negative errno. err
 * names the parent ("vortex 127.0.0.12:4005 piece <task>-<n>: ..."). Thread-safe.
 * tls: NULL for plain TCP, else a client context (dfc/tls_ssl.h; borrowed): the parent must
 * prove with a certificate that names ip, and is shown ours under mutual TLS; a failed
 * handshake or a TLS alert is -ECONNABORTED, err giving OpenSSL's reason.
 * rate: NULL for no limit, else a token bucket (dfc/ratelimit.h; borrowed, shared) that each
 * chunk of the bytes is paid from before it is read; -ETIMEDOUT when the rest of the piece
 * could not be paid for within timeout_ns. */
int dfd_vortex_fetch(struct dfc_tls_ctx *tls, struct dfc_ratelimit *rate, const char *ip,
                     uint16_t port, const char *task_id, uint32_t number, uint64_t offset,
                     uint64_t length, void *buf, int64_t timeout_ns, struct dfd_vortex_fetched *ret,
                     struct dfc_error *err);

/* Where dfd_vortex_fetch_to hands the bytes: write(arg, at, data, n) for each chunk in order,
 * at = its offset within the piece; a negative return ends the fetch with that error. The
 * bytes are not yet verified: only a 0 return of the fetch says the whole piece had the
 * advertised CRC, so the sink must not treat them as the piece's until then.
 *
 * With buffer set, the sink supplies the buffers too: buffer(arg) gives the one the next chunk
 * (at most buf_len bytes) is received into, and write() takes it back whatever it returns, so
 * the sink may keep it (queue it to a writer) past the call; a buffer whose chunk failed to
 * arrive goes back through release(arg, buf), which must then be set as well.
 *
 * idle_ns > 0 bounds the parent's silence: the answer's header and each chunk must arrive
 * within idle_ns of asking for them (else -ETIMEDOUT), so a stalled parent is left quickly
 * while a slow but steady one may use the whole timeout. */
struct dfd_vortex_sink {
    void *arg;
    int64_t idle_ns;
    int (*write)(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err);
    void *(*buffer)(void *arg);
    void (*release)(void *arg, void *buf);
};

/* As dfd_vortex_fetch, but the bytes go to sink a chunk of at most buf_len (> 0) bytes at a
 * time, CRC'd as they pass, through buf or (sink->buffer set, buf NULL) the sink's buffers;
 * the same checks and errors, and the sink's errors. */
int dfd_vortex_fetch_to(struct dfc_tls_ctx *tls, struct dfc_ratelimit *rate, const char *ip,
                        uint16_t port, const char *task_id, uint32_t number, uint64_t offset,
                        uint64_t length, const struct dfd_vortex_sink *sink, void *buf,
                        size_t buf_len, int64_t timeout_ns, struct dfd_vortex_fetched *ret,
                        struct dfc_error *err);

#endif /* DFD_P2P_VORTEX_CLIENT_H */
