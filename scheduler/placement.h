/*
 * placement.h - where a task's copies go: candidate parents for a downloading peer, and the
 * replication that keeps persistent_replica_count persistent copies across hosts.
 *
 * Candidate parents (upstream's FindCandidatePersistentCacheParents): the task's peers in state
 * Running or Succeeded, minus blocklisted peer ids and peers on the asking host, scored
 * 0.7 * IDC affinity + 0.3 * location affinity, best first, at most `limit`.
 *
 * Replication (upstream's replicatePersistentCacheTask, best effort, asynchronous): need =
 * persistent_replica_count - persistent copies; promote Succeeded non-persistent copies on
 * shared hosts first (DfdaemonUpload.UpdatePersistentCacheTask persistent=true), then ask random
 * eligible hosts to pull (DfdaemonUpload.DownloadPersistentCacheTask persistent=true on
 * host.ip:host.download_port). Unlike upstream the blocklist holds host ids only, and a repair
 * loop re-checks Succeeded tasks every replicaRepairInterval with a bounded number in flight, a
 * per-task back-off and a Redis lease per task (SET NX PX) so several schedulers on one Redis
 * never place the same copy twice. With a probe interval a copy counts only while its host is
 * there and its dfdaemon says it holds it (StatPersistentCacheTask, at most once per peer per
 * interval); peers that do not (ghosts) are removed and their copies placed elsewhere.
 *
 * Ownership: the placement engine borrows the store; candidate lists are the caller's.
 */
#ifndef SCHED_PLACEMENT_H
#define SCHED_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/tls.h"
#include "model.h"
#include "store.h"

struct sched_candidate {
    struct sched_peer peer;
    struct sched_host host;
    double score;
};
void sched_candidates_free(struct sched_candidate *c, size_t n);

/* Candidate parents for peer_id of task_id asked by host `asking`; blocklist holds peer ids.
 * -ENOENT-free: an empty result is n_out 0 (the caller answers FailedPrecondition). limit 0 =
 * upstream's default candidateParentLimit, 3. Equal scores keep SMEMBERS order. */
int sched_find_parents(struct sched_store *s, int64_t dl, const char *task_id,
                       const struct sched_host *asking, const char *const *block_peers,
                       size_t n_block, size_t limit, struct sched_candidate **out, size_t *n_out,
                       struct dfc_error *err);

/* IDC/location affinity score of two hosts, as upstream (empty on either side scores 0). */
double sched_parent_score(const struct sched_host *parent, const struct sched_host *child);

struct sched_placement_opts {
    const char *advertise_ip; /* remote_ip sent to dfdaemons; borrowed */
    /* TLS of the calls to the dfdaemons (peer.tls.*): policy and files, borrowed; zero =
     * plaintext. */
    enum dfc_tls_policy tls;
    struct dfc_tls_files tls_files;
    int64_t repair_interval_ns;  /* scheduler.replicaRepairInterval; 0 = no repair loop */
    unsigned repair_concurrency; /* scheduler.replicaRepairConcurrency: replications in flight
                                    (worker threads), whoever queued them; 0 = 4; more than 256
                                    is -EINVAL from sched_placement_new */
    int64_t host_gc_interval_ns; /* scheduler.gc.hostGCInterval; 0 = no host GC */
    int64_t probe_interval_ns;   /* scheduler.probeInterval: a persistent copy counts only while
                                    its dfdaemon answered a probe within it (placement_engine.h);
                                    0 = every member of the persistent set counts, as upstream */
    int64_t dfdaemon_timeout_ms; /* per DfdaemonUpload call; 0 = 2 min, as upstream; a pull
                                    (DownloadPersistentCacheTask) gets 1 s more per 10 MiB of
                                    the task, at most 24 h in all */
    /* Optional metrics (borrowed, outlive the engine; NULL: not counted). repairs: a counter
     * with series SCHED_REPAIR_OUTCOMES (a repair job queued by the repair loop, then how it
     * ended); under_replicated: a gauge, the tasks the last repair pass found short of
     * persistent copies (tasks it skipped for their back-off or a job in flight excluded). */
    struct dfc_metric *repairs;
    struct dfc_metric *under_replicated;
    /* Gauges as of the last pass: tasks by state (series SCHED_TASK_STATES, counted by the
     * repair pass, which loads every task) and hosts (counted by the host-GC pass: the hosts
     * it kept). */
    struct dfc_metric *tasks;
    struct dfc_metric *hosts;
};

/* The series of the tasks metric, in enum sched_task_state order. */
#define SCHED_TASK_STATES                                                                          \
    { "Pending", "Uploading", "Succeeded", "Failed" }

/* The series of the repairs metric: started, then one of succeeded (enough copies), failed
 * (fewer copies than needed, or a Redis error) or busy (another scheduler held the lease). */
#define SCHED_REPAIR_OUTCOMES                                                                      \
    { "started", "succeeded", "failed", "busy" }

struct sched_placement;
int sched_placement_new(struct sched_store *s, const struct sched_placement_opts *opts,
                        struct sched_placement **ret, struct dfc_error *err);
/* The replication workers start in sched_placement_new (so replicate works at once); this
 * starts the repair and host-GC loops (those whose interval is > 0). */
int sched_placement_start(struct sched_placement *p, struct dfc_error *err);
/* Stops the threads and waits for replication calls in flight (bounded by their timeouts);
 * queued jobs are dropped (the repair loop of any scheduler picks them up). Stop the RPC
 * server first: no sched_placement_replicate may run during or after this. NULL is fine. */
void sched_placement_free(struct sched_placement *p);

/* Queues a replication of task_id, never blocking the caller (upstream's detached goroutine);
 * block_hosts are host ids that must not receive a copy (the uploader's). Copied. A job already
 * queued for the task takes the union of the block lists; a full queue (4096) drops the job
 * with a log line, and the repair loop retries it. */
void sched_placement_replicate(struct sched_placement *p, const char *task_id,
                               const char *const *block_hosts, size_t n_block);

/* Asks the dfdaemon of each peer of the task to delete its copy (DeletePersistentCacheTask),
 * errors logged; used by DeletePersistentCacheTask / DeletePersistentCachePeer. Blocking,
 * bounded by dfdaemon_timeout_ms per host; call from a handler thread, never the CQ thread. */
int sched_placement_delete_copy(struct sched_placement *p, const struct sched_host *host,
                                const char *task_id, struct dfc_error *err);

/* One repair pass and one host-GC pass, synchronously: for tests and the loop itself.
 * repair_once returns the number of tasks it started a replication for (tasks backing off,
 * queued or in flight are skipped; with a probe interval, also the tasks whose probes found them
 * short) after those replications ended; host_gc_once returns the
 * number of hosts removed (their tasks' replications are queued, not awaited). */
int sched_placement_repair_once(struct sched_placement *p, struct dfc_error *err);
int sched_placement_host_gc_once(struct sched_placement *p, struct dfc_error *err);

#endif /* SCHED_PLACEMENT_H */
