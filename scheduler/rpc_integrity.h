/*
 * rpc_integrity.h - dfc.scheduler.v1.PersistentCacheIntegrity (proto/dfc/integrity.proto), this
 * project's addition served next to scheduler.v2.Scheduler on the scheduler's port: the
 * importers' digest records (integrity_store.h, docs/integrity.md).
 *
 * Record: validated first (INVALID_ARGUMENT naming the field: host_id, task_id (64 lowercase
 * hex digits), content_sha256 (32 bytes), id_basis (at most SCHED_ID_BASIS_MAX bytes, and
 * hashing to task_id when given), piece_length, content_length, piece_sha256 (exactly
 * ceil(content_length / piece_length) of 32 bytes, at most SCHED_DIGEST_PIECES_MAX, the last
 * one content_sha256)); then,
 * without Redis, FAILED_PRECONDITION; NOT_FOUND for a task or host the scheduler does not
 * know; FAILED_PRECONDITION when the host holds no Succeeded peer of the task or the geometry
 * is not the task's; then integrity_store.h's answers (ALREADY_EXISTS, RESOURCE_EXHAUSTED).
 * Borrowed: svc outlives the server.
 */
#ifndef SCHED_RPC_INTEGRITY_H
#define SCHED_RPC_INTEGRITY_H

#include "dfc/error.h"
#include "dfc/integrity.pb-c.h"
#include "service.h"

#define SCHED_ID_BASIS_MAX      4096
#define SCHED_DIGEST_PIECES_MAX 65536

/* Registers dfc.scheduler.v1.PersistentCacheIntegrity on server. */
int sched_integrity_register(struct sched_service *svc, struct dfc_rpc_server *server,
                             struct dfc_error *err);

/* The request's field checks (above); -EINVAL with err naming the first bad field. */
int sched_validate_record_digests(
    const Dfc__Scheduler__V1__RecordPersistentCacheTaskDigestsRequest *r, struct dfc_error *err);

#endif /* SCHED_RPC_INTEGRITY_H */
