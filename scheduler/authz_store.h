/*
 * authz_store.h - what the scheduler keeps in Redis to decide who may act for a host and who
 * may delete a task (authz.h, docs/trust-model.md): this project's keys, outside upstream's
 * layout (P = "scheduler:scheduler-clusters:<clusterID>"):
 *
 *   P:persistent-cache-host-binding:<hostID>     string "node" or "shared": the kind of
 *                                                certificate that announced the host under
 *                                                mutual TLS; expires SCHED_BINDING_TTL_S after
 *                                                the last announce (each announce renews it)
 *   P:persistent-cache-task-importers:<taskID>   set of the host ids whose upload of the task
 *                                                finished (the importer, then hosts that
 *                                                joined it), at most SCHED_IMPORTERS_MAX;
 *                                                expires with the task
 *
 * A binding only moves from "shared" to "node": once a per-node certificate announced a host,
 * the shared node certificate may no longer act for it. Upstream's host hash is untouched. Every
 * write is one Lua script (atomic).
 *
 * Errors as store.h's. Thread-safe as the store. Ownership: id lists are the caller's
 * (sched_ids_free).
 */
#ifndef SCHED_AUTHZ_STORE_H
#define SCHED_AUTHZ_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"
#include "store.h"

/* A binding outlives its host's hash by this long after the last announce (30 days), so a
 * host collected or deleted cannot be announced again with the shared certificate meanwhile. */
#define SCHED_BINDING_TTL_S (30 * 24 * 3600)
/* Hosts one task's importer set holds; later ones are not added. */
#define SCHED_IMPORTERS_MAX 8

enum sched_binding {
    SCHED_BINDING_NONE,   /* never announced under mutual TLS (or expired) */
    SCHED_BINDING_SHARED, /* announced with the shared node certificate only */
    SCHED_BINDING_NODE,   /* announced with a per-node certificate */
};

/* Records that a certificate of kind (SHARED or NODE) announced host_id, renewing the expiry.
 * 1 when recorded, 0 when refused: kind SHARED for a host bound NODE (nothing written). */
int sched_binding_set(struct sched_store *s, int64_t dl, const char *host_id,
                      enum sched_binding kind, struct dfc_error *err);

/* The binding of host_id into *ret (SCHED_BINDING_NONE when there is none). */
int sched_binding_get(struct sched_store *s, int64_t dl, const char *host_id,
                      enum sched_binding *ret, struct dfc_error *err);

/* Adds host_id to task_id's importers (expiring in ttl_s > 0 seconds); with reset the set
 * becomes {host_id} (a new import of the id). 1 when it is a member after the call, 0 when the
 * set was full. */
int sched_importer_add(struct sched_store *s, int64_t dl, const char *task_id, const char *host_id,
                       bool reset, int64_t ttl_s, struct dfc_error *err);

/* The members of task_id's importer set (none when it is missing). */
int sched_importers(struct sched_store *s, int64_t dl, const char *task_id, struct sched_ids *out,
                    struct dfc_error *err);

/* Removes task_id's importer set (with the task). */
int sched_importers_delete(struct sched_store *s, int64_t dl, const char *task_id,
                           struct dfc_error *err);

/* The host_id field of peer_id's hash (upstream's layout) into *ret (malloc'd), whether or not
 * its host and task are still there; -ENOENT when the peer hash has none. */
int sched_peer_owner(struct sched_store *s, int64_t dl, const char *peer_id, char **ret,
                     struct dfc_error *err);

#endif /* SCHED_AUTHZ_STORE_H */
