/*
 * rpc_server_internal.h - the server state that rpc_server.c (calls, workers, lifecycle) and
 * rpc_listen.c (Unix and TCP sockets accepted by the layer, with SO_PEERCRED or the peer
 * address) share. Private to lib/.
 */
#ifndef DFC_RPC_SERVER_INTERNAL_H
#define DFC_RPC_SERVER_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <grpc/grpc.h>

#include "dfc/rpc_server.h"

#define MAX_LISTENERS 8

struct tag {
    void (*fn)(struct tag *t, bool ok);
};

struct registered;

/* Counts by uid (rpc_limits.c); the owner's lock guards it. */
struct uid_count {
    uid_t uid;
    unsigned n;
};

struct uid_counts {
    struct uid_count *v;
    size_t n, cap;
};

/* The count of uid (0 when absent). */
unsigned dfc__uid_count(struct uid_counts *u, uid_t uid);

/* Adds one to uid's count; returns the new count, or -ENOMEM. */
int dfc__uid_count_add(struct uid_counts *u, uid_t uid);

/* Takes one from uid's count; a uid at zero leaves the table. */
void dfc__uid_count_sub(struct uid_counts *u, uid_t uid);

void dfc__uid_counts_free(struct uid_counts *u);

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
    unsigned stream_workers; /* workers that streams may occupy: max_workers - reserved */
    unsigned unary_running;  /* unary calls that may run at once: 1..max_workers */
    unsigned max_calls_per_uid;
    unsigned max_workers_per_uid; /* share of busy workers per uid: 1..max_workers */
    unsigned max_conns, max_conns_per_uid;

    struct registered *methods;
    size_t n_methods;

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
    int64_t last_prune_ms;

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

    /* Worker pool, guarded by mu; work_cv wakes idle workers. Unary calls and streams wait in
     * separate queues: streams may hold at most stream_workers workers, so the rest are always
     * there for unary calls, and a stream waiting for a stream slot never holds up a unary
     * call queued after it. */
    pthread_cond_t work_cv;
    struct dfc_rpc_call *unary_head, *unary_tail;
    struct dfc_rpc_call *stream_head, *stream_tail;
    pthread_t *workers;
    unsigned n_workers, idle_workers, busy_streams, busy_unary;
    struct uid_counts busy_uids; /* workers running each uid's calls (listen_unix calls) */
    bool stop_workers;
};

/* The credentials recorded for the connection on fd; -ENOENT when unknown. */
int dfc__listener_cred(struct dfc_rpc_server *s, int fd, struct ucred *ret);

/* The peer address recorded for the TCP connection on fd, as dfc_rpc_call_peer_ip(). */
int dfc__listener_peer_ip(struct dfc_rpc_server *s, int fd, char *buf, size_t size);

/* Starts the accept thread of l (after dfc_rpc_server_start); negative errno. */
int dfc__listener_start(struct own_listener *l);

/* Stops l's accept thread, if running. Idempotent. */
void dfc__listener_stop(struct own_listener *l);

/* Stops, closes, unlinks (a Unix socket) and frees l. */
void dfc__listener_free(struct own_listener *l);

#endif /* DFC_RPC_SERVER_INTERNAL_H */
