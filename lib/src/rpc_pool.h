/*
 * rpc_pool.h - the RPC server's scheduling policy as data and pure functions (rpc_pool.c), and
 * the counts by uid it and the limits keep (rpc_limits.c). Private to lib/.
 *
 * Nothing here locks, blocks or calls gRPC: the server holds its mu around every call
 * (rpc_server_internal.h), and test/unit/lib/test_rpc_pool.c calls them directly. The one
 * exception, at the end, is the seam through which the pool starts its threads.
 *
 * The policy. Unary calls and streams wait in separate FIFO queues. A free worker takes the
 * first unary call whose uid is below its share of busy workers while fewer than
 * unary_running unary calls run, else the first such stream while streams hold fewer than
 * stream_workers workers; calls over their uid's share stay queued until one of that uid's
 * calls ends. Calls without a uid (not from a listen_unix socket) are exempt from the share.
 */
#ifndef DFC_RPC_POOL_H
#define DFC_RPC_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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
unsigned dfc__uid_count(const struct uid_counts *u, uid_t uid);

/* Adds one to uid's count; returns the new count, or -ENOMEM. */
int dfc__uid_count_add(struct uid_counts *u, uid_t uid);

/* Takes one from uid's count; a uid at zero leaves the table. */
void dfc__uid_count_sub(struct uid_counts *u, uid_t uid);

void dfc__uid_counts_free(struct uid_counts *u);

/* A queued call as the pool sees it (embedded in struct dfc_rpc_call). */
struct pool_entry {
    struct pool_entry *next;
    bool stream;  /* a client, server or bidi stream; else a unary call */
    bool has_uid; /* the caller's uid is known (listen_unix) and counts against its share */
    uid_t uid;
};

struct pool_queue {
    struct pool_entry *head, *tail;
};

struct rpc_pool {
    /* Limits, set at creation. */
    unsigned stream_workers;      /* workers that streams may occupy: max_workers - reserved */
    unsigned unary_running;       /* unary calls that may run at once: 1..max_workers */
    unsigned max_workers_per_uid; /* share of busy workers per uid: 1..max_workers */
    /* State. */
    struct pool_queue unary, stream;
    unsigned busy_unary, busy_streams;
    struct uid_counts busy_uids; /* workers running each uid's calls (has_uid calls only) */
};

/* The call that runs next: entry (NULL: none may run now) and the entry before it in its
 * queue (NULL: entry is the head), for dfc__pool_take(). */
struct pool_pick {
    struct pool_entry *entry, *prev;
};

/* What a running call holds, for dfc__pool_end(). */
struct pool_running {
    bool stream;
    bool uid_counted;
    uid_t uid;
};

/* Appends e to its queue (FIFO). */
void dfc__pool_push(struct rpc_pool *p, struct pool_entry *e);

/* True when e could start now: its kind's limit and its uid's share leave room. */
bool dfc__pool_may_run(const struct rpc_pool *p, const struct pool_entry *e);

/* The policy above: which queued call a free worker runs next. Pure: reads p only. */
struct pool_pick dfc__next_call(const struct rpc_pool *p);

/* Unlinks pick's entry (non-NULL) from its queue and counts it as running. */
struct pool_running dfc__pool_take(struct rpc_pool *p, struct pool_pick pick);

/* Counts a call that dfc__pool_take() returned as ended. */
void dfc__pool_end(struct rpc_pool *p, struct pool_running r);

/* Frees what p holds (not the entries). */
void dfc__pool_free(struct rpc_pool *p);

/* How the pool starts a worker thread: fn(arg) on a new thread, *ret its id; 0 or a positive
 * errno, as pthread_create(). mu is the server's lock, which the caller does not hold. The
 * default is pthread_create(); a test may set its own before any server starts (to check that
 * mu is free, or to make a start fail: test/unit/lib/test_rpc_pool.c). */
typedef int (*dfc__pool_spawn_fn)(pthread_t *ret, void *(*fn)(void *), void *arg,
                                  pthread_mutex_t *mu);
extern dfc__pool_spawn_fn dfc__pool_spawn;

#endif /* DFC_RPC_POOL_H */
