/*
 * rpc_server.h - a gRPC server whose services are tables of methods with thin handlers.
 *
 * Every gRPC core call of the project lives in the rpc_*.c files of lib/src (rpc_server.c,
 * rpc_listen.c, rpc_client.c, rpc_common.c, rpc_tls.c, ...; private headers rpc_internal.h,
 * rpc_server_internal.h and rpc_tls.h). The core C API changes between minor versions, so nothing
 * else includes <grpc/grpc.h> (docs/dragonfly-compat.md, "gRPC core").
 *
 * A service is a table of struct dfc_rpc_method rows. dfc_rpc_server_add_service() checks each
 * row against the protobuf-c service descriptor (method name, request and response types), so
 * a table that drifts from the .proto fails at start-up, not on the wire.
 *
 * Handlers run on a worker pool, never on the completion-queue thread, so they may block on
 * file I/O. They have one signature for all four call kinds:
 *
 *   kind            req                          resp                        stream ops
 *   UNARY           the request (borrowed)       to fill                     -
 *   SERVER_STREAM   the request (borrowed)       NULL                        dfc_rpc_call_send
 *   CLIENT_STREAM   NULL                         to fill                     dfc_rpc_call_recv
 *   BIDI_STREAM     NULL                         NULL                        recv and send
 *
 * A handler returns 0 for OK or a negative code (error.h) with err->msg set; the code is mapped
 * to a gRPC status through DFC_ERRNO_MAP and err->msg becomes the status message.
 *
 * Memory: the response struct and anything a handler hangs off it should come from the call's
 * arena (dfc_rpc_call_alloc / dfc_rpc_call_strdup), which is freed when the call ends; static
 * data is fine too. Messages returned by dfc_rpc_call_recv are the handler's to free with
 * dfc_rpc_msg_free(). Messages passed to dfc_rpc_call_send are borrowed for the call only.
 */
#ifndef DFC_RPC_SERVER_H
#define DFC_RPC_SERVER_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/tls.h"
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"

/* 64 MiB (the largest piece) plus room for the message around it. */
#define DFC_RPC_DEFAULT_MAX_MSG ((size_t)(64 + 1) << 20)
#define DFC_RPC_DEFAULT_WINDOW  ((size_t)4 << 20)

/* What a process's calls carry, for dfc_rpc_tune_process(). */
enum dfc_rpc_traffic {
    DFC_RPC_TRAFFIC_BULK,  /* MiB-sized messages between threads (dfdaemon, dfcache) */
    DFC_RPC_TRAFFIC_SMALL, /* small messages only, many threads at once (the scheduler) */
};

/* Tunes glibc malloc for the process's traffic; the first call wins. Call it first in main(),
 * before threads start; servers and clients also call it (BULK) on creation.
 * glibc's default mmap threshold makes every MiB-sized slice an mmap/munmap pair (~100k page
 * faults per GiB streamed); raised mmap and trim thresholds keep them in the heap (+15-30%,
 * measured on this project's VM). BULK also keeps one arena, which stops freed buffers from
 * piling up in per-thread arenas (see rpc_common.c for the figures); SMALL keeps glibc's
 * per-thread arenas, so many handler threads allocating at once do not queue on one lock. */
void dfc_rpc_tune_process(enum dfc_rpc_traffic traffic);

enum dfc_rpc_kind {
    DFC_RPC_UNARY,
    DFC_RPC_CLIENT_STREAM,
    DFC_RPC_SERVER_STREAM,
    DFC_RPC_BIDI_STREAM,
};

struct dfc_rpc_bulk;
struct dfc_rpc_bulk_in;
struct dfc_rpc_call;
struct dfc_rpc_server;

typedef int (*dfc_rpc_handler_fn)(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                                  ProtobufCMessage *resp, struct dfc_error *err);

struct dfc_rpc_method {
    const char *name; /* as in the .proto: "UploadPersistentCacheTask" */
    enum dfc_rpc_kind kind;
    const ProtobufCMessageDescriptor *req;
    const ProtobufCMessageDescriptor *resp;
    dfc_rpc_handler_fn handler;
};

/* A row of a method table: name as in the .proto, req and resp the protobuf-c message prefixes
 * (dfdaemon__v2__stat_persistent_cache_task_request), fn the handler. */
#define DFC_RPC_METHOD(name, kind, req, resp, fn)                                                  \
    { name, kind, &req##__descriptor, &resp##__descriptor, fn }

/* The number of elements of an array (a method table); also defined in rpc_client.h. */
#ifndef DFC_RPC_N
#define DFC_RPC_N(array) (sizeof(array) / sizeof((array)[0]))
#endif

struct dfc_rpc_server_opts {
    size_t max_recv_msg;  /* largest accepted message; 0 = DFC_RPC_DEFAULT_MAX_MSG */
    unsigned max_workers; /* handler threads, started on demand; 0 = 32 */
    unsigned max_calls;   /* calls in flight; more get RESOURCE_EXHAUSTED; 0 = 1024 */
    size_t window;        /* HTTP/2 receive window per stream, fixed (no BDP probing); it
                             bounds what a slow handler lets pile up; 0 = 4 MiB */
    int log_level_ok;     /* level of the per-call log line for OK calls (DFC_LOG_DEBUG) */
    const char *name;     /* server name in log lines; borrowed; NULL = "rpc" */

    /* Limits that keep one caller from starving the others (0 = the default given). */
    int64_t idle_timeout_ms;        /* a stream's longest wait for the client's next message, or
                                       for the client to take the last one sent; on expiry the call
                                       ends DEADLINE_EXCEEDED; a connection with no call for as long
                                       is closed (GOAWAY); 0 = 30 s, < 0 = none */
    unsigned reserved_workers;      /* workers that only unary calls may use, so they are served
                                       while streams hold the rest; 0 = max_workers / 8, at least 1
                                       (none when max_workers is 1); at most max_workers - 1 */
    unsigned max_calls_per_uid;     /* calls in flight per peer uid on listen_unix sockets, uid 0
                                       included; more get RESOURCE_EXHAUSTED; 0 = 64 */
    unsigned max_workers_per_uid;   /* workers that one peer uid's calls (unary and streams, uid
                                       0 included) may occupy at once; its further calls wait
                                       queued, not refused, so no uid holds every worker; calls
                                       from other listeners are exempt; 0 = max_workers / 4, at
                                       least 1; at most max_workers */
    unsigned max_unary_running;     /* unary calls that run at once; the rest wait queued, taking
                                       no thread, until one ends (a server whose unary handlers
                                       share a pool of N backend connections sets N, so no more
                                       threads run than can progress); 0 = no limit but
                                       max_workers */
    unsigned max_conns;             /* open connections over all listen_unix sockets; more are
                                       closed as they are accepted; 0 = 1024 */
    unsigned max_conns_per_uid;     /* the same per peer uid; 0 = 128 */
    unsigned max_conns_per_ip;      /* open connections per peer address over all listen_tcp
                                       sockets; more are closed as they are accepted; 0 = 64 */
    int64_t first_bytes_timeout_ms; /* a listen_tcp connection is handed to gRPC once its first
                                       bytes (the HTTP/2 preface) have arrived; one silent for
                                       this long is closed; 0 = 5 s, < 0 = none */
    int64_t first_call_timeout_ms;  /* a listen_tcp connection that has started no call (sent no
                                       HEADERS) this long after it was handed to gRPC (its first
                                       bytes arrived; with TLS, the handshake comes within it) is
                                       closed, so a peer cannot hold a slot of the caps with a
                                       preface, SETTINGS or a handshake alone; connections that
                                       started a call are left to idle_timeout_ms; 0 = 10 s,
                                       < 0 = none */
    const char *option_prefix;      /* prepended to the limits' names in messages (the config keys:
                                       "download.server."); borrowed; NULL = "" */

    /* Per-call metrics, counted by the layer once per call (never by a handler), declared in
     * metrics by dfc_rpc_server_start() with labels server (name), method (the path of every
     * registered method) and code (the gRPC code name):
     *   <prefix>grpc_server_handled_total          counter   {server,method,code}
     *   <prefix>grpc_server_handling_seconds       histogram {server,method}
     * A call is counted just before its status is sent, so a client holding the answer sees
     * it counted. Calls refused before a handler ran (server busy) count in handled_total
     * only; calls of
     * unknown methods are not counted (their path is the caller's text). Borrowed; must outlive
     * the server. NULL = no metrics. */
    struct dfc_metrics *metrics;
    const char *metrics_prefix; /* "dragonfly_dfdaemon_"; borrowed; NULL = "" */

    /* TLS on the TCP listeners of dfc_rpc_server_listen_tcp() (Unix sockets never use it).
     * DFC_TLS_OFF (the zero value): plaintext. Else this layer still accepts (and caps) the
     * TCP connections but hands them to gRPC core's TLS listener (rpc_tls.c): the files are
     * re-read every tls_refresh_s, so rotated files serve new handshakes without a restart
     * (connections and calls in flight keep theirs); a connection that has not finished its
     * handshake after tls_handshake_timeout_ms is closed; under DFC_TLS_MUTUAL a client must
     * present a certificate that chains to tls_files.ca_cert (dfc_rpc_call_peer_identity).
     * A refused handshake is logged (rpc.tls_handshake_refused) naming the peer. The files
     * must be readable when the server is created; their paths are copied. */
    enum dfc_tls_policy tls;
    struct dfc_tls_files tls_files;
    unsigned tls_refresh_s;           /* 0 = DFC_RPC_TLS_REFRESH_S */
    int64_t tls_handshake_timeout_ms; /* 0 = DFC_RPC_TLS_HANDSHAKE_TIMEOUT_MS */
};

/* How often TLS certificate files are re-read (seconds), and how long a TLS handshake may take
 * before the connection is closed (ms). */
#define DFC_RPC_TLS_REFRESH_S            10
#define DFC_RPC_TLS_HANDSHAKE_TIMEOUT_MS 5000

#define DFC_RPC_DEFAULT_IDLE_TIMEOUT_MS   30000
#define DFC_RPC_DEFAULT_MAX_CALLS_PER_UID 64
#define DFC_RPC_DEFAULT_MAX_CONNS         1024
#define DFC_RPC_DEFAULT_MAX_CONNS_PER_UID 128
#define DFC_RPC_DEFAULT_MAX_CONNS_PER_IP  64
#define DFC_RPC_DEFAULT_FIRST_BYTES_MS    5000
#define DFC_RPC_DEFAULT_FIRST_CALL_MS     10000

/* Creates a server (calls grpc_init). opts may be NULL. Free with dfc_rpc_server_free(). */
int dfc_rpc_server_new(const struct dfc_rpc_server_opts *opts, struct dfc_rpc_server **ret,
                       struct dfc_error *err);

/* Registers every row of methods under desc's service name. Before dfc_rpc_server_start().
 * methods and svc are borrowed and must outlive the server. -EINVAL when a row does not match
 * the descriptor (err names the row). */
int dfc_rpc_server_add_service(struct dfc_rpc_server *s, const ProtobufCServiceDescriptor *desc,
                               const struct dfc_rpc_method *methods, size_t n_methods, void *svc,
                               struct dfc_error *err);

/* Adds a listening address: "unix:/abs/path", "unix:///abs/path", "host:port". For unix
 * addresses a stale socket file is unlinked first. Before dfc_rpc_server_start(). */
int dfc_rpc_server_listen(struct dfc_rpc_server *s, const char *addr, struct dfc_error *err);

/* Listens on TCP ip:port (ip "" = 0.0.0.0) with connections this layer accepts itself, like
 * dfc_rpc_server_listen_unix(): at most max_conns are open at once over all listen_tcp sockets
 * (more are closed as they are accepted, with a rate-limited warning), and each call's peer
 * address is known (dfc_rpc_call_peer_ip). Port 0 binds an ephemeral port, returned in
 * *ret_port (may be NULL). Before dfc_rpc_server_start(). */
int dfc_rpc_server_listen_tcp(struct dfc_rpc_server *s, const char *ip, unsigned port,
                              unsigned *ret_port, struct dfc_error *err);

/* Listens on a Unix socket that this layer accepts itself, so each connection's SO_PEERCRED is
 * known (dfc_rpc_call_peer_cred). The socket gets mode and, when gid >= 0, group gid, and
 * appears at path (replacing a stale one) only once it listens. The parent directory must
 * exist. Before dfc_rpc_server_start(); the socket is removed when the server is freed. */
int dfc_rpc_server_listen_unix(struct dfc_rpc_server *s, const char *path, unsigned mode, int gid,
                               struct dfc_error *err);

/* Starts serving (spawns the completion-queue thread). With opts.metrics, declares the per-call
 * metrics first (-EINVAL when they clash with a declaration already in the registry). */
int dfc_rpc_server_start(struct dfc_rpc_server *s, struct dfc_error *err);

/* True between a successful dfc_rpc_server_start() and the start of dfc_rpc_server_shutdown():
 * the server accepts calls. Thread-safe (a readiness probe reads it). */
bool dfc_rpc_server_serving(const struct dfc_rpc_server *s);

/* The number of calls waiting in the queue for a worker, and in *ret_held whether every one of
 * them is held back by a limit (max_workers_per_uid, max_unary_running, the workers streams may
 * hold) rather than about to be taken by a worker. Thread-safe. For tests: the event that a
 * call arrived and is held, in place of a sleep after which it "would have started". */
unsigned dfc_rpc_server_queued(struct dfc_rpc_server *s, bool *ret_held);

/* Stops accepting calls, lets calls in flight finish for up to grace_ms, then cancels the rest
 * and waits for their handlers to return. Idempotent. */
void dfc_rpc_server_shutdown(struct dfc_rpc_server *s, int64_t grace_ms);

/* Shuts down (with a 5 s grace) if needed, frees everything and calls grpc_shutdown. */
void dfc_rpc_server_free(struct dfc_rpc_server *s);

/* ---- inside a handler ---- */

/* Receives the next message of a client or bidi stream. Returns 1 with *ret_msg set (free it
 * with dfc_rpc_msg_free), 0 at the end of the stream, or a negative code: -ECANCELED when the
 * client cancelled, -ETIMEDOUT past the deadline or when no message came for the idle timeout
 * (the call is then already ended DEADLINE_EXCEEDED), -EBADMSG for an undecodable message,
 * -EINVAL for a string field holding a NUL byte (err names the field).
 * CAUTION: gRPC core reports a client that vanishes mid-stream as a clean end of stream, and
 * the cancellation may only be known later. A stream that commits work must carry its own
 * completion proof (a length or digest in the first message, or a final message) and commit
 * only when it matches. */
int dfc_rpc_call_recv(struct dfc_rpc_call *call, ProtobufCMessage **ret_msg, struct dfc_error *err);

/* Like dfc_rpc_call_recv(), but the large bytes field of a large message may stay in gRPC's
 * slices: then *ret_in (the handler's, free it with dfc_rpc_bulk_in_free) holds its bytes,
 * else *ret_in is NULL (rpc_bulk.h). */
int dfc_rpc_call_recv_bulk(struct dfc_rpc_call *call, ProtobufCMessage **ret_msg,
                           struct dfc_rpc_bulk_in **ret_in, struct dfc_error *err);

/* Sends one message of a server or bidi stream. The message is packed before this returns,
 * and the send is pipelined one deep: it returns once the previous message has gone, so the
 * handler prepares the next one while this one is on the wire. -ECANCELED when the client is
 * gone, -ETIMEDOUT when it took nothing for the idle timeout (the call is then ended
 * DEADLINE_EXCEEDED). */
int dfc_rpc_call_send(struct dfc_rpc_call *call, const ProtobufCMessage *msg,
                      struct dfc_error *err);

/* Like dfc_rpc_call_send(), but bytes fields of msg that point into bulk are sent without
 * copying (rpc_bulk.h). bulk is borrowed; its bytes must not change after this call. */
int dfc_rpc_call_send_bulk(struct dfc_rpc_call *call, const ProtobufCMessage *msg,
                           struct dfc_rpc_bulk *bulk, struct dfc_error *err);

/* True once the client cancelled, the deadline passed, or a shutdown's grace period ran out
 * (calls in flight during the grace period are left to finish). Long handlers poll it between
 * units of work. */
bool dfc_rpc_call_cancelled(struct dfc_rpc_call *call);

/* Milliseconds left before the call's deadline, or INT64_MAX without one. */
int64_t dfc_rpc_call_remaining_ms(struct dfc_rpc_call *call);

/* The connecting process's credentials, for calls that came through
 * dfc_rpc_server_listen_unix(). -ENOENT for other listeners. */
struct ucred;
int dfc_rpc_call_peer_cred(struct dfc_rpc_call *call, struct ucred *ret_cred);

/* The connecting peer's IP address as text ("127.0.0.12", "::1"; an IPv4-mapped IPv6 address
 * as IPv4), for calls that came through dfc_rpc_server_listen_tcp() (with TLS or without).
 * -ENOENT for other listeners, -ENAMETOOLONG when size is too small (INET6_ADDRSTRLEN is
 * enough). */
int dfc_rpc_call_peer_ip(struct dfc_rpc_call *call, char *buf, size_t size);

/* Who the caller is, as a key for per-remote limits (dfc/stream_cap.h): "cert:<first SAN URI,
 * else first SAN IP, else CN>" for a peer with a verified certificate (mutual TLS), else the
 * peer IP address for calls through dfc_rpc_server_listen_tcp(), "uid:<n>" for
 * dfc_rpc_server_listen_unix(), "" when unknown (one key shared by every such caller). The one
 * place that decides it. Returns 0 or -ENAMETOOLONG (size too small; DFC_RPC_REMOTE_MAX is
 * enough). */
#define DFC_RPC_REMOTE_MAX (DFC_PEER_URI_MAX + 8)
int dfc_rpc_call_remote(struct dfc_rpc_call *call, char *buf, size_t size);
#define DFC_PEER_SAN_MAX 8   /* SAN entries of each kind kept; more are ignored */
#define DFC_PEER_URI_MAX 256 /* a SAN URI with its NUL; longer ones are ignored */

/* What the TLS handshake established about a call's peer. A plain value: the caller owns it,
 * it borrows nothing. */
struct dfc_peer_identity {
    bool tls;           /* the call came over TLS */
    bool authenticated; /* the peer presented a certificate that chains to the CA */
    unsigned n_ips, n_uris, n_dns;
    char ips[DFC_PEER_SAN_MAX][46];                /* SAN IP addresses, as text */
    char uris[DFC_PEER_SAN_MAX][DFC_PEER_URI_MAX]; /* SAN URIs ("spiffe://...", ...) */
    char dns[DFC_PEER_SAN_MAX][DFC_PEER_URI_MAX];  /* SAN DNS names */
    char common_name[DFC_PEER_URI_MAX];            /* the subject's CN, "" without */
};

/* Fills *ret with the identity the peer's certificate proves. Always 0: a call without TLS, or
 * a TLS call without a client certificate (DFC_TLS_SERVER_AUTH), gets authenticated false and
 * no SAN entries. */
int dfc_rpc_call_peer_identity(struct dfc_rpc_call *call, struct dfc_peer_identity *ret);

/* Copies the value of request metadata key (lowercase) into buf, NUL-terminated. Returns its
 * length, -ENOENT when absent, -ENAMETOOLONG when it does not fit. */
int dfc_rpc_call_metadata(struct dfc_rpc_call *call, const char *key, char *buf, size_t size);

/* Adds key=value (lowercase ASCII key, both copied) to the trailing metadata of the status the
 * call ends with, OK or not: a typed signal for the client (dfc_rpc_stream_trailer) beside the
 * status message, which is for people. -E2BIG past DFC_RPC_TRAILERS_MAX entries, -EINVAL for
 * an empty key. */
#define DFC_RPC_TRAILERS_MAX 4
int dfc_rpc_call_set_trailer(struct dfc_rpc_call *call, const char *key, const char *value);

/* Adds key=value to the one log line the layer writes when the call ends (a handler's domain
 * fields: volume_id, target_path, ...). The value is quoted when it holds a space or a quote.
 * Fields beyond DFC_RPC_LOG_FIELDS_MAX bytes are dropped. */
#define DFC_RPC_LOG_FIELDS_MAX 768
void dfc_rpc_call_log_field(struct dfc_rpc_call *call, const char *key, const char *value);

/* "/package.Service/Method"; borrowed for the call's lifetime. */
const char *dfc_rpc_call_method(struct dfc_rpc_call *call);

/* Zeroed memory that lives until the call ends. NULL only when out of memory. */
void *dfc_rpc_call_alloc(struct dfc_rpc_call *call, size_t size);

/* A copy of s in the call's arena. */
char *dfc_rpc_call_strdup(struct dfc_rpc_call *call, const char *s);

/* Allocates and initializes a message of type desc in the call's arena. */
ProtobufCMessage *dfc_rpc_call_new_msg(struct dfc_rpc_call *call,
                                       const ProtobufCMessageDescriptor *desc);

/* A Timestamp of unix_ns nanoseconds since the epoch / a Duration of ns, in the call's arena
 * (dfc_pb_timestamp_from_ns, dfc_pb_duration_from_ns). NULL only when out of memory. */
Google__Protobuf__Timestamp *dfc_rpc_call_new_timestamp(struct dfc_rpc_call *call, int64_t unix_ns);
Google__Protobuf__Duration *dfc_rpc_call_new_duration(struct dfc_rpc_call *call, int64_t ns);

/* Frees a message returned by dfc_rpc_call_recv or the client calls. NULL is fine. */
void dfc_rpc_msg_free(ProtobufCMessage *msg);

#endif /* DFC_RPC_SERVER_H */
