/*
 * rpc_server_internal.h - the server state that rpc_server.c (calls, workers, lifecycle) and
 * rpc_listen.c (Unix sockets accepted by the layer, with SO_PEERCRED) share. Private to lib/.
 */
#ifndef DFC_RPC_SERVER_INTERNAL_H
#define DFC_RPC_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include <grpc/grpc.h>

#include "dfc/rpc_server.h"

#define MAX_LISTENERS 8

struct tag {
    void (*fn)(struct tag *t, bool ok);
};

struct registered;

/* A Unix socket accepted by this layer (for SO_PEERCRED). */
struct unix_listener {
    int fd;
    int wake[2]; /* a pipe: a byte tells the accept thread to stop */
    char *path;
    pthread_t thread;
    bool running;
    struct dfc_rpc_server *server;
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

    struct registered *methods;
    size_t n_methods;

    char *unix_paths[MAX_LISTENERS];
    size_t n_unix_paths;
    struct unix_listener *own[MAX_LISTENERS];
    size_t n_own;

    /* Credentials of accepted connections, indexed by fd; guarded by cred_mu. */
    pthread_mutex_t cred_mu;
    struct ucred *creds;
    bool *cred_valid;
    size_t n_creds;

    atomic_bool shutting_down;
    atomic_uint in_flight;

    struct tag shutdown_tag;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool shutdown_done;

    /* Worker pool, guarded by mu; work_cv wakes idle workers. */
    pthread_cond_t work_cv;
    struct dfc_rpc_call *queue_head, *queue_tail;
    pthread_t *workers;
    unsigned n_workers, idle_workers;
    bool stop_workers;
};

/* The credentials recorded for the connection on fd; -ENOENT when unknown. */
int dfc__listener_cred(struct dfc_rpc_server *s, int fd, struct ucred *ret);

/* Starts the accept thread of l (after dfc_rpc_server_start); negative errno. */
int dfc__listener_start(struct unix_listener *l);

/* Stops l's accept thread, if running. Idempotent. */
void dfc__listener_stop(struct unix_listener *l);

/* Stops, closes, unlinks and frees l. */
void dfc__listener_free(struct unix_listener *l);

#endif /* DFC_RPC_SERVER_INTERNAL_H */
