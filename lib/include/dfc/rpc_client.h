/*
 * rpc_client.h - gRPC client calls of all four kinds, with deadlines: blocking, and unary
 * calls driven from one thread.
 *
 * A client holds one channel to a target ("unix:/path", "unix:///path", "host:port"). The
 * blocking calls are thread-safe: each has its own completion queue, driven by the thread that
 * waits on it. A stream may be sent on by one thread while another receives.
 *
 *   unary             dfc_rpc_unary()
 *   server streaming  open, send(req), close_send, recv until 0
 *   client streaming  open, send..., close_send, recv(resp), finish
 *   bidi streaming    open, send/recv in any order, close_send, recv until 0
 *
 * A call names its method by a struct dfc_rpc_client_method, resolved once from the protobuf-c
 * service descriptor (path, request and response types come from there), so no method path is
 * typed by hand. A binary lists the methods it calls in a table of DFC_RPC_CLIENT_METHOD rows
 * and resolves it at start-up with dfc_rpc_client_resolve(): a name that is not in the .proto
 * fails there, not at call time.
 *
 * Unary calls can also be driven from one thread without blocking on each: a dfc_rpc_async is
 * one completion queue; dfc_rpc_async_unary() starts a call on it and returns at once, and
 * dfc_rpc_async_next() hands back the next call to end. A load generator keeps many calls in
 * flight that way without a thread, and its wake-ups, per call (hack/bench/sched_upload.c).
 *
 * Errors are negative codes mapped back from the gRPC status through DFC_ERRNO_MAP (NOT_FOUND
 * -> -ENOENT, ...), with the server's status message in err->msg.
 * Messages returned to the caller are owned by it: free them with dfc_rpc_msg_free().
 */
#ifndef DFC_RPC_CLIENT_H
#define DFC_RPC_CLIENT_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/tls.h"

struct dfc_rpc_bulk;
struct dfc_rpc_bulk_in;
struct dfc_rpc_client;
struct dfc_rpc_stream;

/* The number of elements of an array (a method table); also defined in rpc_server.h. */
#ifndef DFC_RPC_N
#define DFC_RPC_N(array) (sizeof(array) / sizeof((array)[0]))
#endif

/* Longest "/package.Service/Method" path, NUL included. */
#define DFC_RPC_PATH_MAX 128

/* A method as a client calls it; filled by dfc_rpc_method_lookup(), owns nothing. */
struct dfc_rpc_client_method {
    char path[DFC_RPC_PATH_MAX];            /* "/package.Service/Method" */
    const ProtobufCMessageDescriptor *req;  /* the request type, from the descriptor */
    const ProtobufCMessageDescriptor *resp; /* the response type, from the descriptor */
};

/* Looks name ("UploadPersistentCacheTask") up in svc and fills *ret. -EINVAL naming the service
 * and the method when svc has no such method; -ENAMETOOLONG when the path does not fit. */
int dfc_rpc_method_lookup(const ProtobufCServiceDescriptor *svc, const char *name,
                          struct dfc_rpc_client_method *ret, struct dfc_error *err);

/* One row of a client's method table: resolve svc's method name into *ret. */
struct dfc_rpc_client_row {
    const ProtobufCServiceDescriptor *svc;
    const char *name;
    struct dfc_rpc_client_method *ret;
};

/* A row: svc is the protobuf-c service prefix (dfdaemon__v2__dfdaemon_download). */
#define DFC_RPC_CLIENT_METHOD(svc, name, ret)                                                      \
    { &svc##__descriptor, name, ret }

/* Resolves every row with dfc_rpc_method_lookup(); stops at the first failure (err names it). */
int dfc_rpc_client_resolve(const struct dfc_rpc_client_row *rows, size_t n_rows,
                           struct dfc_error *err);

struct dfc_rpc_client_opts {
    size_t max_recv_msg; /* 0 = DFC_RPC_DEFAULT_MAX_MSG */
    bool wait_for_ready; /* queue calls until the server is up instead of failing UNAVAILABLE */
    /* > 0: a call on a channel in TRANSIENT_FAILURE first resets gRPC's connect back-off and
     * waits up to this long (within its own deadline) for the channel to come back, so a
     * server that restarted is used at once instead of after the back-off (up to
     * DFC_RPC_MAX_RECONNECT_BACKOFF_MS). 0: such calls fail fast with UNAVAILABLE. */
    int reconnect_wait_ms;
    /* TLS to the server (rpc_tls.c). DFC_TLS_OFF (the zero value): plaintext. Else the server's
     * certificate must chain to tls_files.ca_cert and name the dialled host (its IP in the SAN
     * for an IP target); under DFC_TLS_MUTUAL the client presents tls_files.cert and key. The
     * files are re-read every tls_refresh_s (0 = DFC_RPC_TLS_REFRESH_S, rpc_server.h) for new
     * connections. Clients with the same policy and files share one set of credentials (and so
     * gRPC core's subchannels). The paths are copied. */
    enum dfc_tls_policy tls;
    struct dfc_tls_files tls_files;
    unsigned tls_refresh_s;
};

/* The longest pause between two connection attempts of a client's channel. */
#define DFC_RPC_MAX_RECONNECT_BACKOFF_MS 5000

/* Creates a client for target (copied). opts may be NULL. Free with dfc_rpc_client_free(). */
int dfc_rpc_client_new(const char *target, const struct dfc_rpc_client_opts *opts,
                       struct dfc_rpc_client **ret, struct dfc_error *err);

/* Frees the client; every stream opened on it must be freed first. NULL is fine. */
void dfc_rpc_client_free(struct dfc_rpc_client *c);

/* One request, one response of type m->resp. m is borrowed for the call. timeout_ms <= 0:
 * none. */
int dfc_rpc_unary(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                  const ProtobufCMessage *req, int64_t timeout_ms, ProtobufCMessage **ret_resp,
                  struct dfc_error *err);

/* A request metadata entry; key lowercase ASCII (a "-bin" suffix for binary values). */
struct dfc_rpc_md {
    const char *key;
    const char *value;
};

/* dfc_rpc_unary() with request metadata (borrowed for the call). */
int dfc_rpc_unary_md(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                     const ProtobufCMessage *req, int64_t timeout_ms, const struct dfc_rpc_md *md,
                     size_t n_md, ProtobufCMessage **ret_resp, struct dfc_error *err);

/* dfc_rpc_stream_open() with request metadata (borrowed for the call). */
int dfc_rpc_stream_open_md(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                           int64_t timeout_ms, const struct dfc_rpc_md *md, size_t n_md,
                           struct dfc_rpc_stream **ret, struct dfc_error *err);

/* Opens a call of m (borrowed for this call only); the deadline covers the whole stream.
 * Free with dfc_rpc_stream_free(). */
int dfc_rpc_stream_open(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                        int64_t timeout_ms, struct dfc_rpc_stream **ret, struct dfc_error *err);

/* Sends one message, pipelined one deep (returns once the previous one has gone). */
int dfc_rpc_stream_send(struct dfc_rpc_stream *st, const ProtobufCMessage *msg,
                        struct dfc_error *err);

/* Like dfc_rpc_stream_send(), but bytes fields of msg that point into bulk are sent without
 * copying (rpc_bulk.h). bulk is borrowed; its bytes must not change after this call. */
int dfc_rpc_stream_send_bulk(struct dfc_rpc_stream *st, const ProtobufCMessage *msg,
                             struct dfc_rpc_bulk *bulk, struct dfc_error *err);

/* Half-closes: tells the server no more messages follow. Idempotent. */
int dfc_rpc_stream_close_send(struct dfc_rpc_stream *st, struct dfc_error *err);

/* Receives the next message: 1 with *ret_msg set, 0 when the server ended the stream with OK,
 * or the negative code of the server's status (or of a local failure). */
int dfc_rpc_stream_recv(struct dfc_rpc_stream *st, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **ret_msg, struct dfc_error *err);

/* Like dfc_rpc_stream_recv(), but the large bytes field of a large message may stay in gRPC's
 * slices: then *ret_in (the caller's, free it with dfc_rpc_bulk_in_free) holds its bytes, else
 * *ret_in is NULL (rpc_bulk.h). */
int dfc_rpc_stream_recv_bulk(struct dfc_rpc_stream *st, const ProtobufCMessageDescriptor *desc,
                             ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                             struct dfc_error *err);

/* Half-closes if needed and waits for the call's status; returns 0 or its negative code.
 * Messages the server still had in flight are discarded. */
int dfc_rpc_stream_finish(struct dfc_rpc_stream *st, struct dfc_error *err);

/* Once the call's status is in (a recv or finish returned 0 or the status's code), copies the
 * value of trailing metadata key (lowercase) the server sent with it into buf, NUL-terminated:
 * a typed reason beside the status message (dfc_rpc_call_set_trailer). Returns its length,
 * -ENOENT when absent or while the status is not in, -ENAMETOOLONG when it does not fit. */
int dfc_rpc_stream_trailer(const struct dfc_rpc_stream *st, const char *key, char *buf,
                           size_t size);

/* Frees a message returned by the calls above (also declared in rpc_server.h). NULL is fine. */
void dfc_rpc_msg_free(ProtobufCMessage *msg);

/* Cancels the call (thread-safe; any thread may call it while another is blocked on it). */
void dfc_rpc_stream_cancel(struct dfc_rpc_stream *st);

/* Cancels the call if it is still running and frees it. NULL is fine. */
void dfc_rpc_stream_free(struct dfc_rpc_stream *st);

/* ---- unary calls driven by one thread ---- */

struct dfc_rpc_async;

/* A call that ended, from dfc_rpc_async_next(). */
struct dfc_rpc_async_done {
    void *tag;              /* as given to dfc_rpc_async_unary() */
    int code;               /* 0, or the negative code of the status (or a local failure) */
    ProtobufCMessage *resp; /* when code is 0: the response, the caller's (dfc_rpc_msg_free) */
    struct dfc_error err;   /* when code < 0: what failed */
};

/* Creates a queue for asynchronous unary calls. Free with dfc_rpc_async_free(). */
int dfc_rpc_async_new(struct dfc_rpc_async **ret, struct dfc_error *err);

/* Starts a unary call of m on c and returns at once; it ends in dfc_rpc_async_next(). req is
 * packed before this returns (borrowed for this call only); m and c must outlive the call.
 * timeout_ms <= 0: none. It never blocks the caller: unlike dfc_rpc_unary() it does not reset
 * a failed channel's connect back-off (such calls fail fast with UNAVAILABLE), while a
 * client's wait_for_ready still holds the call itself until the channel is ready (with no
 * deadline, for as long as that takes). */
int dfc_rpc_async_unary(struct dfc_rpc_async *q, struct dfc_rpc_client *c,
                        const struct dfc_rpc_client_method *m, const ProtobufCMessage *req,
                        int64_t timeout_ms, void *tag, struct dfc_error *err);

/* Waits up to timeout_ms (< 0: as long as it takes; 0: only looks) for one of q's calls to
 * end: 1 with *ret filled, 0 when none ended in time or none is in flight. */
int dfc_rpc_async_next(struct dfc_rpc_async *q, int64_t timeout_ms, struct dfc_rpc_async_done *ret);

/* Cancels the calls still in flight, waits for them to end and frees q. NULL is fine. A queue
 * is driven by one thread at a time: no call on q may run concurrently with another. */
void dfc_rpc_async_free(struct dfc_rpc_async *q);

#endif /* DFC_RPC_CLIENT_H */
