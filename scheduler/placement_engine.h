/*
 * placement_engine.h - the placement engine's state, shared by placement.c (queue, workers,
 * loops, repair pass, host GC) and placement_replicate.c (one replication job and its Redis
 * lease). Private to scheduler/placement*.c.
 *
 * DESIGN
 *   Jobs: one per task, queued by sched_placement_replicate (handlers, host GC) or by a repair
 *   pass; a job queued for a task that already has one merges its block list into it. Workers:
 *   repair_concurrency threads, so at most that many replications are in flight, whoever
 *   queued them; a task is never run by two workers at once (in_flight). A repair pass waits
 *   for its own jobs before it returns, and queues no more than there are workers.
 *   Back-off: per task, counted in repair passes (placement_internal.h), kept only for tasks
 *   whose last job fell short; an entry is dropped when a job succeeds or the task is gone.
 *   Lease: a job runs only while it holds `<prefix>:dfc-replica-leases:<taskID>` (SET NX PX),
 *   extended before each dfdaemon call to cover that call's deadline, and deleted at the end
 *   only by its owner (Lua compare-and-delete), so two schedulers on one Redis never work on
 *   the same task at once and each sees the other's copies before it counts.
 *   Counting (placement_probe.c, with scheduler.probeInterval > 0): a job counts only the
 *   persistent copies whose host's dfdaemon answered StatPersistentCacheTask for the task
 *   within the last probe interval; a peer whose host is gone or that answers NOT_FOUND is
 *   removed, one unreachable twice in a row too. The verdicts live in Redis
 *   (`<prefix>:dfc-replica-probes:<peerID>`, PX), shared by the schedulers on one Redis. Probes
 *   run in the workers, one at a time per job, so at most repair_concurrency are in flight; a
 *   repair pass queues a verify job for every Succeeded task with persistent copies (probe
 *   verdicts still fresh make it a few Redis reads).
 */
#ifndef SCHED_PLACEMENT_ENGINE_H
#define SCHED_PLACEMENT_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/id.h"
#include "dfc/thread.h"
#include "dfdaemon_client.h"
#include "placement.h"
#include "placement_internal.h"
#include "redis.h"

#define SCHED_PLACEMENT_DEFAULT_CONCURRENCY 4
#define SCHED_PLACEMENT_MAX_CONCURRENCY     256             /* worker threads */
#define SCHED_PLACEMENT_DEFAULT_TIMEOUT_MS  (2 * 60 * 1000) /* upstream's dfdaemon client */
#define SCHED_PLACEMENT_REDIS_TIMEOUT_MS    5000            /* per Redis command */
#define SCHED_PLACEMENT_QUEUE_MAX           4096            /* queued jobs; more are dropped */
#define SCHED_PLACEMENT_QUEUE_BUCKETS       8192  /* task id hash of the queue (a power of 2) */
#define SCHED_PLACEMENT_LEASE_MARGIN_MS     10000 /* lease beyond a call's deadline */
#define SCHED_PLACEMENT_EXTRA_HOSTS         16    /* random candidates beyond the copies needed */
/* A pull's deadline grows with the task: dfdaemon_timeout_ms plus 1 s per this many bytes (a
 * floor of 10 MiB/s), at most SCHED_PLACEMENT_PULL_MAX_MS, so a big replica is not cut off at
 * two minutes (upstream drains the stream with no deadline at all). */
#define SCHED_PLACEMENT_PULL_BYTES_PER_S ((uint64_t)10 << 20)
#define SCHED_PLACEMENT_PULL_MAX_MS      ((int64_t)24 * 3600 * 1000)
/* Copies' probes: the longest wait for one answer (within dfdaemon_timeout_ms), the probes one
 * job makes at most (a task with more copies due is checked further by the next jobs; the
 * unchecked ones do not count meanwhile), and the failed probes in a row that remove a peer. */
#define SCHED_PROBE_TIMEOUT_MS  5000
#define SCHED_PROBE_MAX_PER_JOB 16
#define SCHED_PROBE_FAILURES    2

struct sched_job {
    struct sched_job *next;
    struct sched_job *hnext; /* the next queued job in the same by_id bucket */
    uint32_t hash;           /* of task_id */
    char *task_id;
    char **block_hosts;
    size_t n_block;
    bool repair; /* queued by a repair pass, which waits for it */
    bool verify; /* queued by a repair pass only to check its copies (not short by count) */
};

/* What a job came to; decides the task's back-off. */
enum sched_job_outcome {
    SCHED_JOB_DONE,  /* enough persistent copies (or nothing to do): back-off cleared */
    SCHED_JOB_SHORT, /* fewer copies placed than needed: back-off grows */
    SCHED_JOB_BUSY,  /* another scheduler holds the task's lease: back-off unchanged */
    SCHED_JOB_ERROR, /* Redis failed: back-off grows */
};

struct sched_backoff_entry {
    char *task_id;
    struct sched_backoff b;
    bool seen; /* listed by the current repair pass */
};

struct sched_placement {
    struct sched_store *store;
    struct dfc_metric *repairs, *under_replicated; /* borrowed; NULL: not counted */
    struct dfc_metric *tasks, *hosts;
    char *advertise_ip;
    int64_t repair_interval_ns, host_gc_interval_ns, timeout_ms;
    int64_t probe_interval_ms;            /* scheduler.probeInterval; 0 = copies counted unprobed */
    struct sched_redis_script probe_read; /* GET and PTTL of each probe key */
    unsigned n_workers;
    struct sched_dfdaemon_methods m;
    char owner[DFC_UUID_STR_LEN + 1]; /* this engine's lease value */
    struct sched_redis_script lease_extend, lease_release;

    pthread_mutex_t mu;
    pthread_cond_t work;     /* a job was queued, a task left in_flight, or stopping */
    pthread_cond_t done;     /* a job finished, or stopping */
    struct sched_job *head;  /* queue */
    struct sched_job **tail; /* the last queued job's next, or &head */
    size_t queued;
    struct sched_job *by_id[SCHED_PLACEMENT_QUEUE_BUCKETS]; /* the queued jobs by task id */
    uint64_t dropped;                      /* jobs refused since the last placement.dropped line */
    int64_t dropped_logged_ms;             /* CLOCK_MONOTONIC of that line */
    char **in_flight;                      /* n_workers slots, NULL when free */
    struct sched_dfdaemon_cancel *cancels; /* per slot: cuts a pull short at shutdown */
    bool stopping;
    size_t repair_pending; /* jobs of the running repair pass not yet finished */
    size_t verify_short;   /* verify jobs of the running pass that found the task short */
    uint64_t pass;         /* repair passes started */
    struct sched_backoff_entry *backoff;
    size_t n_backoff, cap_backoff;

    pthread_mutex_t pass_mu; /* one repair pass at a time (loop or caller) */
    pthread_t *workers;
    size_t n_started;
    struct dfc_thread repair_thread, gc_thread; /* the loops */
    bool repair_started, gc_started;
};

/* Runs one job on worker slot `slot`: lease, count, promote cached copies, pull the rest,
 * release. *was_short: the task lacked copies when the job counted them. */
enum sched_job_outcome sched_job_run(struct sched_placement *p, const struct sched_job *job,
                                     unsigned slot, bool *was_short);
/* The persistent copies task_id lacks (*need; 0 when it is gone, not Succeeded or has
 * enough), with the task loaded into *task (the caller's to release) and its persistent count;
 * < 0 on a Redis error. verify (and a probe interval): the count is sched_copies_count's,
 * probes included; else the size of the task's persistent set. */
int sched_task_need(struct sched_placement *p, const char *task_id, bool verify,
                    struct sched_task *task, uint64_t *persistent, uint64_t *need,
                    struct dfc_error *err);

/* The persistent copies of the Succeeded task that count (placement_probe.c): peers of its
 * persistent set that are Succeeded, whose host is there and whose dfdaemon answered
 * StatPersistentCacheTask for it (same id and length) within the last probe interval. Probes
 * the peers due (at most SCHED_PROBE_MAX_PER_JOB), and removes as DeletePersistentCachePeer
 * does (peer hash and set memberships) a peer whose host is gone, whose dfdaemon answers
 * NOT_FOUND or another task, or whose probes failed SCHED_PROBE_FAILURES times in a row. A
 * peer whose last probe failed (fewer times) stays but does not count. < 0 on a Redis error. */
int sched_copies_count(struct sched_placement *p, const struct sched_task *task, uint64_t *counted,
                       struct dfc_error *err);
void sched_probe_scripts_init(struct sched_placement *p);
/* Waits until no job is queued or running (for tests: the state after every job ended). */
void sched_placement_wait_idle(struct sched_placement *p);
/* The deadline of a pull of task (see SCHED_PLACEMENT_PULL_BYTES_PER_S). */
int64_t sched_pull_timeout_ms(const struct sched_placement *p, const struct sched_task *task);

/* Lease key and calls (placement_replicate.c). acquire: 1 taken, 0 held by another owner,
 * < 0 error. */
int sched_lease_key(const struct sched_placement *p, const char *task_id, char *buf, size_t size);
int sched_lease_acquire(struct sched_placement *p, const char *task_id, int64_t ttl_ms,
                        struct dfc_error *err);
int sched_lease_extend(struct sched_placement *p, const char *task_id, int64_t ttl_ms,
                       struct dfc_error *err); /* 1 extended, 0 lost, < 0 error */
int sched_lease_release(struct sched_placement *p, const char *task_id, struct dfc_error *err);
void sched_lease_scripts_init(struct sched_placement *p);

#endif /* SCHED_PLACEMENT_ENGINE_H */
