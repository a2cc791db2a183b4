/*
 * integrity_store.h - this project's additions to the scheduler's Redis records, outside
 * upstream's key layout (docs/integrity.md; P = "scheduler:scheduler-clusters:<clusterID>"):
 *
 *   P:persistent-cache-task-digests:<taskID>            hash: recording host id -> record
 *   P:persistent-cache-task-excluded-parents:<taskID>   set of host ids not to offer as parents
 *
 * A record value is "<seq>:<recorded_at>:" followed by a packed
 * dfc.scheduler.v1.PersistentCacheTaskDigests without host_id and recorded_at; seq (0..7) is
 * its place in recording order. Both keys expire with the task (its remaining TTL when
 * written; a later write only extends the expiry). Every write is one Lua script (atomic).
 *
 * Errors as store.h's. Thread-safe as the store. Ownership: records filled here are the
 * caller's (sched_digest_records_free).
 */
#ifndef SCHED_INTEGRITY_STORE_H
#define SCHED_INTEGRITY_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "store.h"

/* Hosts that may record digests for one task. */
#define SCHED_DIGEST_HOSTS_MAX 8
/* Hosts one task's exclusion set holds; later ones are not added (logged by the caller). */
#define SCHED_EXCLUDED_MAX 64

struct sched_digest_record {
    char *host_id;
    int64_t recorded_at; /* Unix seconds */
    uint8_t *packed;     /* the record's message, without host_id and recorded_at */
    size_t len;
};

/* Records packed (len bytes) as host_id's record of task_id, expiring in ttl_s (> 0) seconds.
 * 0 when stored or when host_id's stored record is the same bytes; -EEXIST when host_id
 * recorded other bytes; -EDQUOT when SCHED_DIGEST_HOSTS_MAX hosts already recorded. */
int sched_digests_record(struct sched_store *s, int64_t dl, const char *task_id,
                         const char *host_id, const uint8_t *packed, size_t len, int64_t now,
                         int64_t ttl_s, struct dfc_error *err);

/* Every record of task_id, oldest first; *n may be 0. */
int sched_digests_load(struct sched_store *s, int64_t dl, const char *task_id,
                       struct sched_digest_record **out, size_t *n, struct dfc_error *err);
void sched_digest_records_free(struct sched_digest_record *list, size_t n);

/* Adds host_id to task_id's exclusion set (expiring in ttl_s > 0 seconds). 1 when added, 0
 * when it was there or the set is full. */
int sched_parent_exclude(struct sched_store *s, int64_t dl, const char *task_id,
                         const char *host_id, int64_t ttl_s, struct dfc_error *err);

/* The members of task_id's exclusion set (none when it is missing). */
int sched_parents_excluded(struct sched_store *s, int64_t dl, const char *task_id,
                           struct sched_ids *out, struct dfc_error *err);

#endif /* SCHED_INTEGRITY_STORE_H */
