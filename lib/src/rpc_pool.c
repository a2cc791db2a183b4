/*
 * rpc_pool.c - the RPC server's worker pool: the scheduling policy (pure functions over
 * struct rpc_pool, rpc_pool.h) and the threads that run calls.
 *
 * DESIGN
 *
 * Workers start on demand, up to max_workers, and stay until shutdown. The CQ thread queues
 * each arriving call (dfc__pool_enqueue) and, when the call could run now, signals an idle
 * worker or starts one. A worker loops: take the call dfc__next_call() picks, run it
 * (dfc__call_run, without mu), count it ended; with nothing runnable it waits on work_cv. A
 * call that ends may free two limits at once (its kind's and its uid's), so a worker that
 * takes a call wakes another when one more could run.
 *
 * Starting a worker takes three steps, so that no thread is created under mu: with mu held,
 * reserve a slot (n_spawning++, counted against max_workers with n_workers); without mu,
 * pthread_create(); with mu again, record the thread in workers[] (or, when it failed, release
 * the slot). A failed start loses no call: the call stays queued, and every worker that exists
 * is either running a call (it re-scans the queues when that call ends) or idle (it scanned
 * after the call was queued, or is signalled now); only a server with no worker at all keeps
 * the call until the next call arrives and tries again. The failure is logged (rate-limited).
 * Shutdown (dfc__pool_stop) sets stop_workers, so that no slot is reserved any more, waits on
 * spawn_cv until n_spawning is 0, and then joins the n_workers threads recorded: exactly those
 * that were created, a start that raced with it included.
 *
 * Lock: s->mu guards the pool and the thread bookkeeping (workers, n_workers, n_spawning,
 * idle_workers, stop_workers, spawn_log). Nothing under it blocks: no thread is created, joined
 * or logged for with mu held, and no other lock is taken under it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "dfc/log.h"
#include "rpc_server_internal.h"

/* ---- the policy (pure) ---- */

static struct pool_queue *queue_of(struct rpc_pool *p, const struct pool_entry *e) {
    return e->stream ? &p->stream : &p->unary;
}

void dfc__pool_push(struct rpc_pool *p, struct pool_entry *e) {
    struct pool_queue *q = queue_of(p, e);
    e->next = NULL;
    if (q->tail != NULL) {
        q->tail->next = e;
    } else {
        q->head = e;
    }
    q->tail = e;
}

/* True when e's uid is below its share of busy workers. Calls without a uid cannot be told
 * apart: they are exempt. */
static bool uid_may_run(const struct rpc_pool *p, const struct pool_entry *e) {
    return !e->has_uid || dfc__uid_count(&p->busy_uids, e->uid) < p->max_workers_per_uid;
}

static bool kind_may_run(const struct rpc_pool *p, bool stream) {
    return stream ? p->busy_streams < p->stream_workers : p->busy_unary < p->unary_running;
}

bool dfc__pool_may_run(const struct rpc_pool *p, const struct pool_entry *e) {
    return kind_may_run(p, e->stream) && uid_may_run(p, e);
}

/* The first entry of q whose uid is below its share. O(queued) lookups in busy_uids, which
 * holds the few uids running calls. */
static struct pool_pick queue_scan(const struct rpc_pool *p, const struct pool_queue *q) {
    struct pool_pick pick = {NULL, NULL};
    for (struct pool_entry *e = q->head; e != NULL; pick.prev = e, e = e->next) {
        if (uid_may_run(p, e)) {
            pick.entry = e;
            return pick;
        }
    }
    pick.prev = NULL;
    return pick;
}

struct pool_pick dfc__next_call(const struct rpc_pool *p) {
    struct pool_pick none = {NULL, NULL};
    if (kind_may_run(p, false)) {
        struct pool_pick pick = queue_scan(p, &p->unary);
        if (pick.entry != NULL) {
            return pick;
        }
    }
    return kind_may_run(p, true) ? queue_scan(p, &p->stream) : none;
}

struct pool_running dfc__pool_take(struct rpc_pool *p, struct pool_pick pick) {
    struct pool_entry *e = pick.entry;
    struct pool_queue *q = queue_of(p, e);
    *(pick.prev != NULL ? &pick.prev->next : &q->head) = e->next;
    if (q->tail == e) {
        q->tail = pick.prev;
    }
    e->next = NULL;
    struct pool_running r = {.stream = e->stream, .uid = e->uid};
    p->busy_streams += e->stream;
    p->busy_unary += !e->stream;
    r.uid_counted = e->has_uid && dfc__uid_count_add(&p->busy_uids, e->uid) > 0;
    return r;
}

void dfc__pool_end(struct rpc_pool *p, struct pool_running r) {
    p->busy_streams -= r.stream;
    p->busy_unary -= !r.stream;
    if (r.uid_counted) {
        dfc__uid_count_sub(&p->busy_uids, r.uid);
    }
}

void dfc__pool_free(struct rpc_pool *p) {
    dfc__uid_counts_free(&p->busy_uids);
}

/* ---- the threads ---- */

#define SPAWN_LOG_EVERY_MS 10000

static void *worker_main(void *arg);

/* How workers start; a test may set its own (rpc_pool.h). */
static int default_spawn(pthread_t *ret, void *(*fn)(void *), void *arg, pthread_mutex_t *mu) {
    (void)mu;
    return pthread_create(ret, NULL, fn, arg);
}

dfc__pool_spawn_fn dfc__pool_spawn = default_spawn;

/* Gets a worker for a runnable queued call (mu held): signals an idle one, or reserves a slot
 * for a new one while the pool may grow (never once shutdown stops the workers: they are being
 * joined). Returns true when a slot was reserved: the caller then calls start_worker() once,
 * after unlocking mu. */
static bool wake_worker(struct dfc_rpc_server *s) {
    if (s->idle_workers > 0) {
        pthread_cond_signal(&s->work_cv);
        return false;
    }
    if (s->n_workers + s->n_spawning < s->max_workers && !s->stop_workers) {
        s->n_spawning++;
        return true;
    }
    return false;
}

/* Starts the worker whose slot wake_worker() reserved (mu not held), and records it. */
static void start_worker(struct dfc_rpc_server *s) {
    pthread_t id;
    int r = dfc__pool_spawn(&id, worker_main, s, &s->mu);
    unsigned n_log = 0, workers = 0;
    pthread_mutex_lock(&s->mu);
    if (r == 0) {
        s->workers[s->n_workers++] = id;
    } else {
        if (s->idle_workers > 0 && dfc__next_call(&s->pool).entry != NULL) {
            pthread_cond_signal(&s->work_cv); /* insurance: DESIGN argues none is needed */
        }
        if (!dfc__ratelimit_hit(&s->spawn_log, SPAWN_LOG_EVERY_MS, &n_log)) {
            n_log = 0;
        }
        workers = s->n_workers;
    }
    if (--s->n_spawning == 0 && s->stop_workers) {
        pthread_cond_broadcast(&s->spawn_cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (n_log > 0) {
        DFC_LOG(DFC_LOG_ERROR, "rpc.worker_spawn_failed", "server=%s workers=%u count=%u errno=%d",
                s->name, workers, n_log, r);
    }
}

static void *worker_main(void *arg) {
    struct dfc_rpc_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        struct pool_pick pick = dfc__next_call(&s->pool);
        if (pick.entry == NULL) {
            if (s->stop_workers) {
                break;
            }
            s->idle_workers++;
            pthread_cond_wait(&s->work_cv, &s->mu);
            s->idle_workers--;
            continue;
        }
        struct pool_running running = dfc__pool_take(&s->pool, pick);
        /* another call may run too (a call that ended freed two limits) */
        bool start = dfc__next_call(&s->pool).entry != NULL && wake_worker(s);
        pthread_mutex_unlock(&s->mu);
        if (start) {
            start_worker(s);
        }
        dfc__call_run(container_of(pick.entry, struct dfc_rpc_call, queued));
        pthread_mutex_lock(&s->mu);
        /* This worker then re-scans: the calls of uid held back by its share, or a stream
         * waiting for a stream slot, run now. */
        dfc__pool_end(&s->pool, running);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* A stream beyond stream_workers, a unary call beyond unary_running, or a call over its uid's
 * share, waits for a worker running such a call to come free. */
void dfc__pool_enqueue(struct dfc_rpc_server *s, struct dfc_rpc_call *c) {
    c->queued.stream = c->method->row.kind != DFC_RPC_UNARY;
    c->queued.has_uid = c->uid_counted;
    c->queued.uid = c->uid;
    pthread_mutex_lock(&s->mu);
    dfc__pool_push(&s->pool, &c->queued);
    bool start = dfc__pool_may_run(&s->pool, &c->queued) && wake_worker(s);
    pthread_mutex_unlock(&s->mu);
    if (start) {
        start_worker(s);
    }
}

void dfc__pool_stop(struct dfc_rpc_server *s) {
    pthread_mutex_lock(&s->mu);
    s->stop_workers = true;
    pthread_cond_broadcast(&s->work_cv);
    while (s->n_spawning > 0) { /* a start under way records its thread, or gives up */
        pthread_cond_wait(&s->spawn_cv, &s->mu);
    }
    unsigned n = s->n_workers;
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(s->workers[i], NULL);
    }
}

unsigned dfc_rpc_server_queued(struct dfc_rpc_server *s, bool *ret_held) {
    unsigned n = 0;
    pthread_mutex_lock(&s->mu);
    for (const struct pool_entry *e = s->pool.unary.head; e != NULL; e = e->next) {
        n++;
    }
    for (const struct pool_entry *e = s->pool.stream.head; e != NULL; e = e->next) {
        n++;
    }
    *ret_held = dfc__next_call(&s->pool).entry == NULL;
    pthread_mutex_unlock(&s->mu);
    return n;
}
