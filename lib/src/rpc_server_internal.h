/*
 * rpc_server_internal.h - the server and call state that the files of the RPC server share.
 * Private to lib/:
 *
 *   rpc_server.c       lifecycle (new, add_service, listen, start, shutdown, free), CQ thread
 *   rpc_server_call.c  a call's state machine: arrival on the CQ thread, run on a worker,
 *                      the answer, the end; calls to unknown methods; per-call metrics
 *   rpc_pool.c         the worker pool: threads, queues, the pure next_call() policy
 *   rpc_call.c         what handlers call: recv, send, cancellation, metadata, the arena
 *   rpc_listen.c       Unix and TCP sockets accepted by the layer (SO_PEERCRED, peer address)
 *   rpc_limits.c       counts by uid, rate-limited log lines
 *   rpc_tls.c          TLS credentials, a call's peer address and identity over TLS
 */
#ifndef DFC_RPC_SERVER_INTERNAL_H
#define DFC_RPC_SERVER_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "dfc/keycount.h"
#include "dfc/rpc_server.h"
#include "dfc/units.h"
#include "rpc_pool.h"

#define MAX_LISTENERS 8

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* A completion-queue tag: fn runs on the CQ thread and never blocks. */
struct tag {
    void (*fn)(struct tag *t, bool ok);
};

/* One outstanding batch that a worker waits for (rpc_call.c). */
struct waiter {
    struct tag tag;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pending;
    bool ok;
};

void dfc__waiter_init(struct waiter *w);
void dfc__waiter_destroy(struct waiter *w);

/* Starts ops on call with w as the tag. Returns false when core refused the batch. */
bool dfc__waiter_start(struct waiter *w, grpc_call *call, const grpc_op *ops, size_t n);

/* A call's arena: blocks freed when the call ends (rpc_call.c). */
struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
};

void dfc__arena_free(struct arena_block *b);

/* A registered method. */
struct registered {
    struct dfc_rpc_method row;
    void *svc;
    char *path;
    void *handle;
    struct dfc_rpc_server *server;
};

struct dfc_rpc_call {
    struct dfc_rpc_server *server;
    struct registered *method;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;

    struct tag new_tag;         /* the call arrived */
    struct tag close_tag;       /* RECV_CLOSE_ON_SERVER completed */
    struct tag aux_tag;         /* the busy-rejection batch completed */
    struct tag final_tag;       /* a unary call's answer batch completed (holds a ref) */
    grpc_byte_buffer *final_bb; /* that batch's message, freed on its completion */
    int close_cancelled;        /* written by core for the close batch */
    atomic_bool cancelled;
    atomic_int refs;
    bool uid_counted; /* counted in server->call_uids under uid */
    uid_t uid;
    bool idled; /* ended by the idle timeout */

    struct waiter send_w;
    struct waiter recv_w;
    grpc_byte_buffer *send_bb; /* in flight while send_w is pending */
    bool send_pending;
    bool send_failed;
    bool sent_md;
    bool recv_eos;
    grpc_slice status_details;
    bool has_status_details;
    grpc_metadata trailers[DFC_RPC_TRAILERS_MAX]; /* dfc_rpc_call_set_trailer, sent with the
                                                     status; their slices freed with the call */
    size_t n_trailers;

    struct arena_block *arena;
    struct timespec started;
    char log_fields[DFC_RPC_LOG_FIELDS_MAX]; /* " key=value" pairs for the final log line */
    size_t log_fields_len;
    struct pool_entry queued; /* in the worker pool's queue (rpc_pool.c) */
};

/* ms as ns, saturating: a huge timeout stays huge. */
static inline int64_t dfc__ms_to_ns(int64_t ms) {
    if (ms > INT64_MAX / DFC_NS_PER_MS) {
        return INT64_MAX;
    }
    return ms < INT64_MIN / DFC_NS_PER_MS ? INT64_MIN : ms * DFC_NS_PER_MS;
}

/* One log line per interval for a repeated event (rpc_limits.c); the owner's lock guards it. */
struct ratelimit {
    int64_t last_ms; /* CLOCK_MONOTONIC of the last line */
    unsigned count;  /* events since the last line */
    bool logged;
};

/* Counts an event. True when a line may be written now; *ret_count is then the number of
 * events it stands for (this one included). */
bool dfc__ratelimit_hit(struct ratelimit *rl, int64_t interval_ms, unsigned *ret_count);

/* A connection accepted by rpc_listen.c and handed to core, recorded by fd. Core closes the
 * fd without telling us; the entry is known to be stale when fstat(fd) fails or shows another
 * socket (dev, ino): the number was reused. */
struct conn_entry {
    struct ucred cred; /* a Unix connection's peer */
    dev_t dev;
    ino_t ino;
    bool open;
    bool tcp;                  /* from a listen_tcp socket: ip is set, cred is not */
    char ip[INET6_ADDRSTRLEN]; /* a TCP connection's peer address as text */
};

/* A socket accepted by this layer: Unix (for SO_PEERCRED) or TCP (for the peer address). */
struct own_listener {
    int fd;
    int wake[2]; /* a pipe: a byte tells the accept thread to stop */
    bool tcp;
    char *path; /* a Unix socket's path (removed at free); for TCP "ip:port", for log lines */
    pthread_t thread;
    bool running;
    struct dfc_rpc_server *server;
    struct ratelimit refused_log; /* rpc.connection_refused lines (accept thread only) */
    struct ratelimit accept_log;  /* rpc.accept_failed lines (accept thread only) */
    struct ratelimit silent_log;  /* rpc.connection_silent lines (accept thread only) */
    struct ratelimit nocall_log;  /* rpc.connection_no_call lines (accept thread only) */
};

struct dfc_rpc_server {
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t cq_thread;
    bool cq_running;
    bool started;
    bool shut;

    size_t max_recv_msg;
    unsigned max_workers;
    unsigned max_calls;
    size_t window;
    int log_level_ok;
    char name[32];
    char prefix[64];         /* option names in messages: "download.server." */
    int64_t idle_timeout_ms; /* < 0: none */
    unsigned max_calls_per_uid;
    unsigned max_conns, max_conns_per_uid;
    unsigned max_conns_per_ip;      /* TCP connections per peer address */
    int64_t first_bytes_timeout_ms; /* a TCP connection's wait for its first bytes; < 0: none */
    int64_t first_call_timeout_ms;  /* its wait for its first call once in core; < 0: none */

    struct registered *methods;
    size_t n_methods;

    /* TLS on listen_tcp ports (opts.tls); NULL when off. Set at creation, then read-only.
     * tls_handler: core's fd handler of its TLS listener, set by the first listen_tcp
     * (rpc_tls.h); rpc_listen.c hands accepted TCP connections to it. */
    grpc_server_credentials *tls_creds;
    void *tls_handler;

    char *unix_paths[MAX_LISTENERS];
    size_t n_unix_paths;
    struct own_listener *own[MAX_LISTENERS];
    size_t n_own;

    /* Connections accepted by our listeners, indexed by fd, with their counts (upper bounds
     * until the next prune); guarded by cred_mu. */
    pthread_mutex_t cred_mu;
    struct conn_entry *conns;
    size_t n_conn_slots;
    unsigned n_conns_open; /* over the listen_unix sockets */
    unsigned n_tcp_open;   /* over the listen_tcp sockets (capped by max_conns too) */
    struct uid_counts conn_uids;
    struct dfc_keycount conn_ips; /* open TCP connections by peer address */
    int64_t last_prune_ms;
    /* TCP connections in core that have started no call yet, by dfc__peer_conn_key(); a call's
     * arrival removes its connection's key (rpc_listen.c). n_no_call counts the accept
     * threads' watches, so calls skip the lookup while there are none. */
    struct dfc_keycount no_call;
    atomic_uint n_no_call;

    /* Calls in flight by the caller's uid (listen_unix connections only); guarded by uid_mu. */
    pthread_mutex_t uid_mu;
    struct uid_counts call_uids;

    atomic_bool shutting_down;
    atomic_bool serving; /* started and not shutting down (dfc_rpc_server_serving) */
    atomic_uint in_flight;

    /* Per-call metrics (opts.metrics), NULL without; declared at start. */
    struct dfc_metrics *metrics;
    char metrics_prefix[64];
    struct dfc_metric *m_handled; /* {server, method, code}: method index + n_methods * code */
    struct dfc_metric *m_seconds; /* {server, method} */

    struct tag shutdown_tag;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool shutdown_done;

    /* Worker pool (rpc_pool.c), guarded by mu; work_cv wakes idle workers. Threads start on
     * demand, never under mu: a slot is reserved (n_spawning), the thread created without mu,
     * then recorded in workers[n_workers]; spawn_cv tells shutdown that n_spawning fell to 0. */
    pthread_cond_t work_cv;
    pthread_cond_t spawn_cv;
    struct rpc_pool pool;
    pthread_t *workers;
    unsigned n_workers, n_spawning, idle_workers;
    bool stop_workers;
    struct ratelimit spawn_log; /* rpc.worker_spawn_failed lines */
};

/* ---- rpc_server_call.c ---- */

/* Requests the next call of m from core (CQ thread, or start). */
int dfc__call_post(struct registered *m);

/* Requests the next call of a method no table declares. */
int dfc__call_post_unknown(struct dfc_rpc_server *s);

/* Declares the per-call metrics (opts.metrics) at start. */
int dfc__call_declare_metrics(struct dfc_rpc_server *s, struct dfc_error *err);

/* Runs c's handler and answers (a worker), then drops the worker's reference. */
void dfc__call_run(struct dfc_rpc_call *c);

/* ---- rpc_call.c ---- */

/* Waits for the previous pipelined send; 0 while the call is writable, -ETIMEDOUT after the
 * idle timeout, -ECANCELED when the client is gone. */
int dfc__call_send_drain(struct dfc_rpc_call *c);

/* Waits for w's batch for at most the idle timeout (then ends the call, send side); returns
 * whether the batch succeeded. */
bool dfc__call_wait_send(struct dfc_rpc_call *c, struct waiter *w);

/* ---- rpc_pool.c ---- */

/* Queues c for a worker, starting one when c could run now (the thread is created after mu
 * is released). Never waits for another thread (CQ thread). */
void dfc__pool_enqueue(struct dfc_rpc_server *s, struct dfc_rpc_call *c);

/* Stops the workers once their calls are done and joins them (shutdown). */
void dfc__pool_stop(struct dfc_rpc_server *s);

/* ---- rpc_server.c ---- */

/* Makes core's TLS listener (once per server) whose fd handler takes the connections of
 * s's listen_tcp sockets (TLS on). */
int dfc__server_listen_tls(struct dfc_rpc_server *s, const char *name, struct dfc_error *err);

/* ---- rpc_listen.c ---- */

/* The credentials recorded for the connection on fd; -ENOENT when unknown. */
int dfc__listener_cred(struct dfc_rpc_server *s, int fd, struct ucred *ret);

/* The peer address recorded for the TCP connection on fd, as dfc_rpc_call_peer_ip(). */
int dfc__listener_peer_ip(struct dfc_rpc_server *s, int fd, char *buf, size_t size);

/* Notes that call arrived (CQ thread): its connection has started a call, so the first-call
 * deadline no longer applies to it. */
void dfc__listener_call_seen(struct dfc_rpc_server *s, grpc_call *call);

/* Starts the accept thread of l (after dfc_rpc_server_start); negative errno. */
int dfc__listener_start(struct own_listener *l);

/* Stops l's accept thread, if running. Idempotent. */
void dfc__listener_stop(struct own_listener *l);

/* Stops, closes, unlinks (a Unix socket) and frees l. */
void dfc__listener_free(struct own_listener *l);

#endif /* DFC_RPC_SERVER_INTERNAL_H */
