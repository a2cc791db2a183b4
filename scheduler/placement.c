/*
 * placement.c - the placement engine: the job queue and its workers, the repair loop, host GC
 * and dfdaemon deletes (placement.h; design in placement_engine.h; a job itself is in
 * placement_replicate.c, candidate parents in placement_parents.c).
 *
 * Repair (not in upstream, which replicates only after an upload, a peer delete or a host
 * delete): every replicaRepairInterval, every Succeeded task with fewer persistent replicas
 * than persistent_replica_count gets a job, unless it is backing off; with
 * scheduler.probeInterval every other Succeeded task with persistent copies gets a verify job,
 * whose probes may find ghosts and so copies to place (placement_probe.c). Host GC: every
 * hostGCInterval, hosts silent for more than 2 x their announce interval (interval > 0) are
 * removed as upstream, and unlike upstream their peers go too and their tasks get a job, so
 * the lost copies are placed elsewhere at once instead of lingering as unloadable peers.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/cleanup.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/units.h"
#include "placement_engine.h"

/* ---- helpers (p->mu held where noted) ---- */

static void job_free(struct sched_job *j) {
    if (j == NULL) {
        return;
    }
    for (size_t i = 0; i < j->n_block; i++) {
        free(j->block_hosts[i]);
    }
    free(j->block_hosts);
    free(j->task_id);
    free(j);
}

/* Adds the ids of block not yet in j; false when out of memory. */
static bool job_add_blocks(struct sched_job *j, const char *const *block, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (block[i] == NULL ||
            sched_str_in(block[i], (const char *const *)j->block_hosts, j->n_block)) {
            continue;
        }
        char **grown = realloc(j->block_hosts, (j->n_block + 1) * sizeof(*grown));
        if (grown == NULL) {
            return false;
        }
        j->block_hosts = grown;
        if ((j->block_hosts[j->n_block] = strdup(block[i])) == NULL) {
            return false;
        }
        j->n_block++;
    }
    return true;
}

/* FNV-1a: a queue lookup is one bucket's scan, not the whole queue's (one per Finished). */
static uint32_t id_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * 16777619u;
    }
    return h;
}

static struct sched_job *find_queued(struct sched_placement *p, const char *task_id) {
    uint32_t h = id_hash(task_id);
    for (struct sched_job *j = p->by_id[h % SCHED_PLACEMENT_QUEUE_BUCKETS]; j != NULL;
         j = j->hnext) {
        if (j->hash == h && strcmp(j->task_id, task_id) == 0) {
            return j;
        }
    }
    return NULL;
}

static void unindex(struct sched_placement *p, const struct sched_job *j) {
    struct sched_job **pj = &p->by_id[j->hash % SCHED_PLACEMENT_QUEUE_BUCKETS];
    while (*pj != j) {
        pj = &(*pj)->hnext;
    }
    *pj = j->hnext;
}

static bool is_in_flight(const struct sched_placement *p, const char *task_id) {
    for (unsigned i = 0; i < p->n_workers; i++) {
        if (p->in_flight[i] != NULL && strcmp(p->in_flight[i], task_id) == 0) {
            return true;
        }
    }
    return false;
}

static struct sched_backoff_entry *find_backoff(struct sched_placement *p, const char *task_id) {
    for (size_t i = 0; i < p->n_backoff; i++) {
        if (strcmp(p->backoff[i].task_id, task_id) == 0) {
            return &p->backoff[i];
        }
    }
    return NULL;
}

static void drop_backoff(struct sched_placement *p, struct sched_backoff_entry *e) {
    free(e->task_id);
    *e = p->backoff[--p->n_backoff];
}

/* Records a job's outcome in the task's back-off entry. */
static void note_outcome(struct sched_placement *p, const char *task_id,
                         enum sched_job_outcome out) {
    struct sched_backoff_entry *e = find_backoff(p, task_id);
    if (out == SCHED_JOB_DONE) {
        if (e != NULL) {
            drop_backoff(p, e);
        }
        return;
    }
    if (out == SCHED_JOB_BUSY) {
        return;
    }
    if (e == NULL) {
        if (p->n_backoff == p->cap_backoff) {
            size_t cap = p->cap_backoff ? p->cap_backoff * 2 : 16;
            struct sched_backoff_entry *grown = realloc(p->backoff, cap * sizeof(*grown));
            if (grown == NULL) {
                return;
            }
            p->backoff = grown;
            p->cap_backoff = cap;
        }
        char *id = strdup(task_id);
        if (id == NULL) {
            return;
        }
        e = &p->backoff[p->n_backoff++];
        *e = (struct sched_backoff_entry){.task_id = id, .seen = true};
    }
    sched_backoff_failed(&e->b, p->pass);
}

/* Queues a job (p->mu held). Merges into a queued job of the same task. */
static int enqueue(struct sched_placement *p, const char *task_id, const char *const *block,
                   size_t n_block, bool repair, bool verify) {
    if (p->stopping) {
        return -ECANCELED;
    }
    struct sched_job *q = find_queued(p, task_id);
    if (q != NULL) {
        (void)job_add_blocks(q, block, n_block);
        return 0;
    }
    if (p->queued >= SCHED_PLACEMENT_QUEUE_MAX) {
        return -EAGAIN;
    }
    struct sched_job *j = calloc(1, sizeof(*j));
    if (j == NULL || (j->task_id = strdup(task_id)) == NULL || !job_add_blocks(j, block, n_block)) {
        job_free(j);
        return -ENOMEM;
    }
    j->repair = repair;
    j->verify = verify;
    j->hash = id_hash(task_id);
    struct sched_job **bucket = &p->by_id[j->hash % SCHED_PLACEMENT_QUEUE_BUCKETS];
    j->hnext = *bucket;
    *bucket = j;
    *p->tail = j;
    p->tail = &j->next;
    p->queued++;
    pthread_cond_signal(&p->work);
    return 1;
}

/* Takes the first queued job whose task no worker runs (p->mu held). */
static struct sched_job *dequeue(struct sched_placement *p) {
    for (struct sched_job **pj = &p->head; *pj != NULL; pj = &(*pj)->next) {
        if (!is_in_flight(p, (*pj)->task_id)) {
            struct sched_job *j = *pj;
            *pj = j->next;
            if (p->tail == &j->next) {
                p->tail = pj;
            }
            j->next = NULL;
            unindex(p, j);
            p->queued--;
            return j;
        }
    }
    return NULL;
}

static void *worker_main(void *arg) {
    struct sched_placement *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct sched_job *j = NULL;
        while (!p->stopping && (j = dequeue(p)) == NULL) {
            pthread_cond_wait(&p->work, &p->mu);
        }
        if (j == NULL) {
            break; /* stopping */
        }
        unsigned slot = 0;
        while (p->in_flight[slot] != NULL) {
            slot++; /* one free slot per worker always exists */
        }
        p->in_flight[slot] = j->task_id;
        pthread_mutex_unlock(&p->mu);

        bool was_short = false;
        enum sched_job_outcome out = sched_job_run(p, j, slot, &was_short);

        pthread_mutex_lock(&p->mu);
        p->in_flight[slot] = NULL;
        note_outcome(p, j->task_id, out);
        if (j->repair) {
            p->repair_pending--;
        }
        /* A verify job counts as a repair only when its probes found the task short. */
        if (j->repair && j->verify && was_short) {
            p->verify_short++;
            dfc_metric_inc(p->repairs, 0, 1);
        }
        if (j->repair && (!j->verify || was_short)) {
            dfc_metric_inc(p->repairs,
                           out == SCHED_JOB_DONE   ? 1
                           : out == SCHED_JOB_BUSY ? 3
                                                   : 2,
                           1);
        }
        pthread_cond_broadcast(&p->done);
        pthread_cond_broadcast(&p->work); /* a job of the same task may wait */
        pthread_mutex_unlock(&p->mu);
        job_free(j);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- public ---- */

int sched_placement_new(struct sched_store *s, const struct sched_placement_opts *opts,
                        struct sched_placement **ret, struct dfc_error *err) {
    *ret = NULL;
    if (opts->repair_concurrency > SCHED_PLACEMENT_MAX_CONCURRENCY) {
        return dfc_error_set(err, -EINVAL,
                             "scheduler.replicaRepairConcurrency %u: at most %u replications in "
                             "flight",
                             opts->repair_concurrency, SCHED_PLACEMENT_MAX_CONCURRENCY);
    }
    struct sched_placement *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = sched_dfdaemon_methods_resolve(&p->m, err);
    if (r < 0) {
        free(p);
        return r;
    }
    p->m.client.tls = opts->tls;
    p->m.client.tls_files = opts->tls_files;
    p->store = s;
    p->tail = &p->head;
    p->repair_interval_ns = opts->repair_interval_ns > 0 ? opts->repair_interval_ns : 0;
    p->host_gc_interval_ns = opts->host_gc_interval_ns > 0 ? opts->host_gc_interval_ns : 0;
    p->repairs = opts->repairs;
    p->under_replicated = opts->under_replicated;
    p->tasks = opts->tasks;
    p->hosts = opts->hosts;
    p->probe_interval_ms =
        opts->probe_interval_ns > 0 ? (opts->probe_interval_ns + 999999) / 1000000 : 0;
    p->timeout_ms = opts->dfdaemon_timeout_ms > 0 ? opts->dfdaemon_timeout_ms
                                                  : SCHED_PLACEMENT_DEFAULT_TIMEOUT_MS;
    p->n_workers = opts->repair_concurrency > 0 ? opts->repair_concurrency
                                                : SCHED_PLACEMENT_DEFAULT_CONCURRENCY;
    dfc_uuid_v4(p->owner);
    sched_lease_scripts_init(p);
    sched_probe_scripts_init(p);
    p->advertise_ip = strdup(opts->advertise_ip != NULL ? opts->advertise_ip : "");
    p->in_flight = calloc(p->n_workers, sizeof(*p->in_flight));
    p->workers = calloc(p->n_workers, sizeof(*p->workers));
    p->cancels = calloc(p->n_workers, sizeof(*p->cancels));
    if (p->advertise_ip == NULL || p->in_flight == NULL || p->workers == NULL ||
        p->cancels == NULL) {
        free(p->advertise_ip);
        free(p->in_flight);
        free(p->workers);
        free(p->cancels);
        free(p);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (unsigned i = 0; i < p->n_workers; i++) {
        sched_dfdaemon_cancel_init(&p->cancels[i]);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->pass_mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    /* Workers start here, so sched_placement_replicate works before sched_placement_start. */
    for (unsigned i = 0; i < p->n_workers; i++) {
        r = -pthread_create(&p->workers[i], NULL, worker_main, p);
        if (r < 0) {
            sched_placement_free(p);
            return dfc_error_errno(err, r, "placement: starting worker %u", i);
        }
        p->n_started++;
    }
    *ret = p;
    return 0;
}

static void *repair_main(void *arg) {
    struct sched_placement *p = arg;
    while (dfc_thread_sleep(&p->repair_thread, p->repair_interval_ns)) {
        struct dfc_error err = {0};
        int r = sched_placement_repair_once(p, &err);
        if (r < 0) {
            DFC_LOG(DFC_LOG_WARN, "placement.repair_failed", "error=\"%s\"", dfc_error_msg(&err));
        } else if (r > 0) {
            DFC_LOG(DFC_LOG_INFO, "placement.repair", "tasks=%d", r);
        }
    }
    return NULL;
}

static void *gc_main(void *arg) {
    struct sched_placement *p = arg;
    while (dfc_thread_sleep(&p->gc_thread, p->host_gc_interval_ns)) {
        struct dfc_error err = {0};
        int r = sched_placement_host_gc_once(p, &err);
        if (r < 0) {
            DFC_LOG(DFC_LOG_WARN, "placement.host_gc_failed", "error=\"%s\"", dfc_error_msg(&err));
        }
    }
    return NULL;
}

int sched_placement_start(struct sched_placement *p, struct dfc_error *err) {
    int r;
    if (p->repair_interval_ns > 0 && !p->repair_started) {
        if ((r = dfc_thread_start(&p->repair_thread, repair_main, p)) < 0) {
            return dfc_error_errno(err, r, "placement: starting the repair loop");
        }
        p->repair_started = true;
    }
    if (p->host_gc_interval_ns > 0 && !p->gc_started) {
        if ((r = dfc_thread_start(&p->gc_thread, gc_main, p)) < 0) {
            return dfc_error_errno(err, r, "placement: starting host GC");
        }
        p->gc_started = true;
    }
    return 0;
}

void sched_placement_free(struct sched_placement *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stopping = true; /* ends a repair pass under way and the workers' waits */
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
    if (p->repair_started) {
        dfc_thread_stop(&p->repair_thread);
    }
    if (p->gc_started) {
        dfc_thread_stop(&p->gc_thread);
    }
    /* Pulls may run for long (their deadline grows with the task): cut them short. Unary
     * calls end by their own deadline. */
    for (unsigned i = 0; i < p->n_workers; i++) {
        sched_dfdaemon_cancel_fire(&p->cancels[i]);
    }
    for (size_t i = 0; i < p->n_started; i++) {
        pthread_join(p->workers[i], NULL); /* each ends the job it runs */
    }
    for (unsigned i = 0; i < p->n_workers; i++) {
        sched_dfdaemon_cancel_done(&p->cancels[i]);
    }
    while (p->head != NULL) {
        struct sched_job *j = p->head;
        p->head = j->next;
        job_free(j);
    }
    for (size_t i = 0; i < p->n_backoff; i++) {
        free(p->backoff[i].task_id);
    }
    free(p->backoff);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->pass_mu);
    pthread_mutex_destroy(&p->mu);
    free(p->in_flight);
    free(p->workers);
    free(p->cancels);
    free(p->advertise_ip);
    free(p);
}

void sched_placement_wait_idle(struct sched_placement *p) {
    pthread_mutex_lock(&p->mu);
    for (;;) {
        bool busy = p->head != NULL;
        for (unsigned i = 0; i < p->n_workers && !busy; i++) {
            busy = p->in_flight[i] != NULL;
        }
        if (!busy || p->stopping) {
            break;
        }
        pthread_cond_wait(&p->done, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

void sched_placement_replicate(struct sched_placement *p, const char *task_id,
                               const char *const *block_hosts, size_t n_block) {
    pthread_mutex_lock(&p->mu);
    int r = enqueue(p, task_id, block_hosts, n_block, false, false);
    /* Under a burst the queue may stay full: one line a second, with the count. */
    uint64_t dropped = 0;
    if (r < 0 && r != -ECANCELED) {
        p->dropped++;
        int64_t now = dfc_mono_ms();
        if (now - p->dropped_logged_ms >= 1000) {
            dropped = p->dropped;
            p->dropped = 0;
            p->dropped_logged_ms = now;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (dropped > 0) {
        DFC_LOG(DFC_LOG_WARN, "placement.dropped",
                "task_id=%s jobs=%llu error=\"%s\", ignoring (the repair loop retries them)",
                task_id, (unsigned long long)dropped,
                r == -EAGAIN ? "queue full" : dfc_strerror(r));
    }
}

int sched_placement_delete_copy(struct sched_placement *p, const struct sched_host *host,
                                const char *task_id, struct dfc_error *err) {
    return sched_dfdaemon_delete(&p->m, host, task_id, p->advertise_ip, p->timeout_ms, err);
}

/* ---- repair pass ---- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether task_id needs a job now: 1 when Succeeded and short of persistent copies by the
 * size of its persistent set, 2 when not short by it but its copies are to be probed (a probe
 * interval, and Succeeded with persistent copies), else 0. *ret_state is its state, or -1
 * when it is gone. */
static int needs_copies(struct sched_placement *p, const char *task_id, int *ret_state,
                        struct dfc_error *err) {
    struct sched_task task = {0};
    uint64_t persistent = 0, need = 0;
    int r = sched_task_need(p, task_id, false, &task, &persistent, &need, err);
    *ret_state = r == 0 && task.id != NULL ? (int)task.state : -1;
    sched_task_done(&task);
    if (r < 0 || need > 0) {
        return r < 0 ? r : 1;
    }
    return p->probe_interval_ms > 0 && persistent > 0 ? 2 : 0;
}

#define N_TASK_STATES 4

int sched_placement_repair_once(struct sched_placement *p, struct dfc_error *err) {
    pthread_mutex_lock(&p->pass_mu);
    struct sched_ids ids = {0};
    int r =
        sched_task_ids(p->store, sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS), &ids, err);
    if (r < 0) {
        pthread_mutex_unlock(&p->pass_mu);
        return r;
    }
    qsort(ids.ids, ids.n, sizeof(*ids.ids), cmp_str); /* SCAN may repeat a key */

    pthread_mutex_lock(&p->mu);
    uint64_t pass = ++p->pass;
    p->verify_short = 0;
    for (size_t i = 0; i < p->n_backoff; i++) {
        p->backoff[i].seen = false;
    }
    pthread_mutex_unlock(&p->mu);

    int started = 0;
    int64_t short_of_copies = 0;
    int64_t by_state[N_TASK_STATES] = {0};
    for (size_t i = 0; i < ids.n; i++) {
        if (i > 0 && strcmp(ids.ids[i], ids.ids[i - 1]) == 0) {
            continue;
        }
        const char *id = ids.ids[i];
        pthread_mutex_lock(&p->mu);
        struct sched_backoff_entry *e = find_backoff(p, id);
        bool skip = p->stopping || is_in_flight(p, id) || find_queued(p, id) != NULL;
        if (e != NULL) {
            e->seen = true;
            skip = skip || !sched_backoff_ready(&e->b, pass);
        }
        bool stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);
        if (stopping) {
            break;
        }
        /* Loaded even when skipped, so that every task is counted by its state. */
        struct dfc_error terr = {0};
        int state = -1;
        int need = needs_copies(p, id, &state, &terr);
        if (state >= 0 && state < N_TASK_STATES) {
            by_state[state]++;
        }
        if (skip) {
            continue;
        }
        if (need < 0) {
            DFC_LOG(DFC_LOG_WARN, "placement.repair_check_failed", "task_id=%s error=\"%s\"", id,
                    dfc_error_msg(&terr));
            continue;
        }
        if (need == 0) {
            continue;
        }
        bool verify = need == 2; /* counted enough: its probes decide */
        short_of_copies += !verify;
        pthread_mutex_lock(&p->mu);
        /* No more of this pass in flight than there are workers. */
        while (!p->stopping && p->repair_pending >= p->n_workers) {
            pthread_cond_wait(&p->done, &p->mu);
        }
        r = enqueue(p, id, NULL, 0, true, verify);
        if (r == 1) {
            p->repair_pending++;
            if (!verify) {
                started++;
                dfc_metric_inc(p->repairs, 0, 1);
            }
        }
        pthread_mutex_unlock(&p->mu);
    }

    pthread_mutex_lock(&p->mu);
    while (!p->stopping && p->repair_pending > 0) {
        pthread_cond_wait(&p->done, &p->mu);
    }
    started += (int)p->verify_short; /* short once the ghosts were dropped */
    short_of_copies += (int64_t)p->verify_short;
    /* Tasks no longer listed are gone: forget their back-off. */
    for (size_t i = 0; i < p->n_backoff;) {
        if (!p->backoff[i].seen) {
            drop_backoff(p, &p->backoff[i]);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&p->mu);
    sched_ids_free(&ids);
    dfc_metric_gauge_set(p->under_replicated, 0, short_of_copies);
    for (size_t k = 0; k < N_TASK_STATES; k++) {
        dfc_metric_gauge_set(p->tasks, k, by_state[k]);
    }
    pthread_mutex_unlock(&p->pass_mu);
    return started;
}

/* ---- host GC ---- */

/* Removes host h with its peers and queues a job for each task that lost one. */
static int remove_host(struct sched_placement *p, const struct sched_host *h,
                       struct dfc_error *err) {
    int64_t dl = sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS);
    struct sched_ids peers = {0};
    int r = sched_peer_ids_by_host(p->store, dl, h->id, &peers, err);
    if (r < 0) {
        return r;
    }
    char **tasks = calloc(peers.n ? peers.n : 1, sizeof(*tasks));
    size_t n_tasks = 0;
    if (tasks == NULL) {
        sched_ids_free(&peers);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < peers.n && r == 0; i++) {
        struct sched_peer peer = {0};
        struct dfc_error perr = {0};
        dl = sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS);
        /* A peer whose task is gone does not load: nothing to repair for it. */
        if (sched_peer_load(p->store, dl, peers.ids[i], &peer, &perr) == 0) {
            if (!sched_str_in(peer.task_id, (const char *const *)tasks, n_tasks)) {
                tasks[n_tasks++] = dfc_steal_ptr(&peer.task_id);
            }
            sched_peer_done(&peer);
        }
        r = sched_peer_delete(p->store, dl, peers.ids[i], err);
        if (r == -ENOENT) {
            r = 0; /* deleted meanwhile (another scheduler's GC) */
        }
    }
    if (r == 0) {
        r = sched_host_delete(p->store, sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS),
                              h->id, err);
        if (r == -ENOENT) {
            r = 0;
        }
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "placement.host_gc", "host_id=%s peers=%zu tasks=%zu", h->id, peers.n,
                n_tasks);
        const char *block[] = {h->id};
        for (size_t i = 0; i < n_tasks; i++) {
            sched_placement_replicate(p, tasks[i], block, 1);
        }
    }
    for (size_t i = 0; i < n_tasks; i++) {
        free(tasks[i]);
    }
    free(tasks);
    sched_ids_free(&peers);
    return r;
}

/* Upstream's rule: announce interval > 0 and more than 2 x interval since updated_at. */
static bool host_is_stale(const struct sched_host *h, int64_t now) {
    if (h->announce_interval_ns <= 0) {
        return false;
    }
    int64_t silent_s = now - h->updated_at;
    if (silent_s <= 0) {
        return false;
    }
    if (silent_s > INT64_MAX / DFC_NS_PER_SEC) {
        return true;
    }
    return silent_s * DFC_NS_PER_SEC >
           2 * (h->announce_interval_ns > INT64_MAX / 2 ? INT64_MAX / 2 : h->announce_interval_ns);
}

int sched_placement_host_gc_once(struct sched_placement *p, struct dfc_error *err) {
    struct sched_ids ids = {0};
    int r =
        sched_host_ids(p->store, sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS), &ids, err);
    if (r < 0) {
        return r;
    }
    int64_t now = (int64_t)time(NULL);
    int removed = 0;
    int64_t kept = 0;
    for (size_t i = 0; i < ids.n; i++) {
        struct sched_host h = {0};
        struct dfc_error herr = {0};
        int64_t dl = sched_redis_deadline(SCHED_PLACEMENT_REDIS_TIMEOUT_MS);
        if (sched_host_load(p->store, dl, ids.ids[i], &h, &herr) < 0) {
            continue; /* gone, or unreadable: upstream treats both as missing */
        }
        bool stale = host_is_stale(&h, now);
        if (stale) {
            r = remove_host(p, &h, &herr);
            if (r < 0) {
                DFC_LOG(DFC_LOG_WARN, "placement.host_gc_failed", "host_id=%s error=\"%s\"", h.id,
                        dfc_error_msg(&herr));
            } else {
                removed++;
            }
        } else {
            kept++;
        }
        sched_host_done(&h);
    }
    sched_ids_free(&ids);
    dfc_metric_gauge_set(p->hosts, 0, kept);
    return removed;
}
