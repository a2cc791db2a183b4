/*
 * authz.h - who may act for a host at the scheduler: identity is authority (docs/trust-model.md).
 * Under mutual TLS every caller proves a certificate from the cluster's CA (roles in
 * dfc/peer_role.h): a per-node certificate (SAN IP = the host's IP, or URI
 * dragonfly://host/<id>) acts only for its host, and takes over a host id stored with another
 * address only when it names that id or address; the shared node certificate (URI
 * dragonfly://node or CN dfc-node) acts for any host that no per-node certificate announced
 * (authz_store.h keeps which kind announced a host) but never moves a stored host to another
 * address.
 *
 * What this covers: AnnounceHost and DeleteHost (the host named); every message of
 * AnnouncePersistentCachePeer, DeletePersistentCachePeer and UploadPersistentCacheTask
 * Started / Finished / Failed (the host named, and the peer's stored host must be it);
 * RecordPersistentCacheTaskDigests (its host_id). DeletePersistentCacheTask: one of the task's
 * importing hosts (authz_store.h) or an operator identity (security.operatorIdentities).
 * StatPersistentCachePeer, StatPersistentCacheTask, ListHosts and GetPersistentCacheTaskDigests
 * stay open to every caller that passed the handshake.
 *
 * A caller without a verified certificate (TLS off, or server-auth) may act for any host, as
 * before TLS; the scheduler warns at start that TLS is off.
 *
 * Refusals are -EACCES (PERMISSION_DENIED) naming the host and the certificate.
 * Ownership: nothing is kept; arguments are borrowed for the call.
 */
#ifndef SCHED_AUTHZ_H
#define SCHED_AUTHZ_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/config.h"
#include "dfc/error.h"
#include "dfc/rpc_server.h"
#include "store.h"

/* 0 when call may act for host_id at ip: it has no verified certificate, or its certificate
 * names host_id or ip, or (shared_ok) it holds the shared node role. -EACCES naming the host,
 * the address and the certificate's addresses otherwise. what ("announce", "delete") is for the
 * message. */
int sched_authz_host(struct dfc_rpc_call *call, const char *what, const char *host_id,
                     const char *ip, bool shared_ok, struct dfc_error *err);

/* Whether call came with a verified certificate (mutual TLS): the rules below apply. */
bool sched_authz_on(struct dfc_rpc_call *call);

/* AnnounceHost (bind) and DeleteHost (!bind) for host_id after sched_authz_host passed: with a
 * verified certificate, the shared role is refused (-EACCES) for a host a per-node certificate
 * announced; an announce records which kind of certificate made it. 0 without a certificate. */
int sched_authz_bind(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call, const char *what,
                     const char *host_id, const char *ip, bool bind, struct dfc_error *err);

/* 0 when call may act for the stored host host_id (peer RPCs, uploads, digest records): no
 * verified certificate; a per-node certificate naming host_id or the stored host's IP; the
 * shared node role for a host no per-node certificate announced. -EACCES naming the host and
 * the certificate otherwise, or -ENOENT "host <id> not found" when the host is not stored and
 * the certificate does not name its id. what ("register a peer for") is for the message. */
int sched_authz_stored_host(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call,
                            const char *what, const char *host_id, struct dfc_error *err);

/* -EACCES "permission denied: peer <id> belongs to host <owner>, not <host_id>" when owner (the
 * peer's stored host) is not host_id, the host the caller was authorized for; 0 otherwise. */
int sched_authz_peer_owner(const char *peer_id, const char *owner, const char *host_id,
                           struct dfc_error *err);

/* DeletePersistentCacheTask of task_id: 0 without a verified certificate, for an operator
 * identity (an entry of ops equal to one of the certificate's SAN URIs, SAN DNS names or its
 * CN), or for the identity of one of the task's importing hosts (as sched_authz_stored_host);
 * 0 too when the scheduler holds nothing of the task (nothing to delete). -EACCES naming the
 * importers and the certificate otherwise (also when no importer is recorded). */
int sched_authz_task_delete(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call,
                            const struct dfc_config_list *ops, const char *task_id,
                            struct dfc_error *err);

#endif /* SCHED_AUTHZ_H */
