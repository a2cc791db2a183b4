/*
 * service.h - the scheduler.v2.Scheduler service: its method table (rpc_methods.c) and what
 * the handler files (rpc_host.c, rpc_task.c, rpc_peer.c) share (service.c).
 *
 * Every request is validated first (validate.h), as upstream's validator interceptor runs
 * before its handlers; then, without Redis, the persistent-cache methods answer
 * FAILED_PRECONDITION "redis is not enabled" (AnnouncePersistentCachePeer before it reads a
 * message, as upstream). Redis errors keep their codes: UNAVAILABLE naming the address when
 * Redis is unreachable, DEADLINE_EXCEEDED past the call's deadline (each Redis wait is bounded
 * by the call's remaining time and database.redis.timeout).
 *
 * Borrowed: cfg, store and placement outlive the service. Methods of scheduler.v2 that are not
 * in the table are answered UNIMPLEMENTED by the RPC layer.
 */
#ifndef SCHED_SERVICE_H
#define SCHED_SERVICE_H

#include <pthread.h>
#include <stdint.h>

#include "config.h"
#include "dfc/rpc_server.h"
#include "dfc/stream_cap.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "model.h"
#include "placement.h"
#include "store.h"

/* Hosts an instance without Redis has seen announced (for ListHosts and DeleteHost, as
 * upstream's in-memory host manager); at most SCHED_MEM_HOSTS_MAX. */
#define SCHED_MEM_HOSTS_MAX 4096

struct sched_mem_host {
    char *id;
    uint32_t type;
    uint8_t *packed; /* the announced common.v2.Host */
    size_t len;
};

struct sched_service {
    const struct sched_config *cfg;
    struct sched_store *store;         /* NULL: Redis not enabled */
    struct sched_placement *placement; /* NULL: no replication (no Redis) */
    int64_t (*now_ns)(void);           /* CLOCK_REALTIME in ns; tests may move it */

    struct dfc_stream_cap announce_cap; /* AnnouncePersistentCachePeer streams per remote */

    pthread_mutex_t lock; /* guards the hosts below */
    struct sched_mem_host *hosts;
    size_t n_hosts;
};

/* store and placement may be NULL (no Redis). */
int sched_service_init(struct sched_service *svc, const struct sched_config *cfg,
                       struct sched_store *store, struct sched_placement *placement,
                       struct dfc_error *err);
void sched_service_done(struct sched_service *svc);

/* Registers scheduler.v2.Scheduler on server (its method table: rpc_methods.c). */
int sched_service_register(struct sched_service *svc, struct dfc_rpc_server *server,
                           struct dfc_error *err);

/* ---- shared by the handler files ---- */

/* FAILED_PRECONDITION "redis is not enabled" when svc has no store. */
int sched__need_redis(const struct sched_service *svc, struct dfc_error *err);

/* An absolute deadline for the Redis work of one step of call: the call's remaining time,
 * capped by database.redis.timeout. */
int64_t sched__deadline(const struct sched_service *svc, struct dfc_rpc_call *call);

int64_t sched__now_s(const struct sched_service *svc);

/* Fills *out (zeroed by the caller; release with sched_host_done) from an announced host. */
int sched__host_from_proto(const Common__V2__Host *in, struct sched_host *out,
                           struct dfc_error *err);

/* Fills out from a record (memory from the call's arena). cluster_id is the value reported. */
int sched__host_to_proto(struct dfc_rpc_call *call, const struct sched_host *h, uint64_t cluster_id,
                         Common__V2__Host *out, struct dfc_error *err);
int sched__task_to_proto(struct dfc_rpc_call *call, const struct sched_task *t, uint64_t all,
                         uint64_t persistent, Common__V2__PersistentCacheTask *out,
                         struct dfc_error *err);
/* The peer with its task (counts as given) and its host (cluster id as given). */
int sched__peer_to_proto(struct dfc_rpc_call *call, const struct sched_peer *p,
                         const struct sched_task *t, uint64_t all, uint64_t persistent,
                         const struct sched_host *h, uint64_t cluster_id,
                         Common__V2__PersistentCachePeer *out, struct dfc_error *err);

/* Handlers, by file. */
int sched__announce_host(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                         ProtobufCMessage *resp, struct dfc_error *err);
int sched__delete_host(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                       ProtobufCMessage *resp, struct dfc_error *err);
int sched__list_hosts(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                      ProtobufCMessage *resp, struct dfc_error *err);
int sched__upload_started(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                          ProtobufCMessage *resp, struct dfc_error *err);
int sched__upload_finished(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                           ProtobufCMessage *resp, struct dfc_error *err);
int sched__upload_failed(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                         ProtobufCMessage *resp, struct dfc_error *err);
int sched__stat_task(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                     ProtobufCMessage *resp, struct dfc_error *err);
int sched__delete_task(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                       ProtobufCMessage *resp, struct dfc_error *err);
int sched__stat_peer(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                     ProtobufCMessage *resp, struct dfc_error *err);
int sched__delete_peer(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                       ProtobufCMessage *resp, struct dfc_error *err);
int sched__announce_peer(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                         ProtobufCMessage *resp, struct dfc_error *err);

#endif /* SCHED_SERVICE_H */
