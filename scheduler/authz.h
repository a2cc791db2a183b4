/*
 * authz.h - who may act for a host at the scheduler: identity is authority (docs/trust-model.md).
 * Under mutual TLS every caller proves a certificate from the cluster's CA (roles in
 * dfc/peer_role.h): a per-node certificate (SAN IP = the host's IP, or URI
 * dragonfly://host/<id>) acts only for its host, and takes over a host id stored with another
 * address only when it names that id or address; the shared node certificate (URI
 * dragonfly://node or CN dfc-node) announces and deletes any host but never moves a stored host
 * to another address.
 * A caller without a verified certificate (TLS off, or server-auth) may act for any host, as
 * before TLS; the scheduler warns at start that TLS is off.
 *
 * Ownership: nothing is kept; arguments are borrowed for the call.
 */
#ifndef SCHED_AUTHZ_H
#define SCHED_AUTHZ_H

#include <stdbool.h>

#include "dfc/error.h"
#include "dfc/rpc_server.h"

/* 0 when call may act for host_id at ip: it has no verified certificate, or its certificate
 * names host_id or ip, or (shared_ok) it holds the shared node role. -EACCES naming the host,
 * the address and the certificate's addresses otherwise. what ("announce", "delete") is for the
 * message. */
int sched_authz_host(struct dfc_rpc_call *call, const char *what, const char *host_id,
                     const char *ip, bool shared_ok, struct dfc_error *err);

#endif /* SCHED_AUTHZ_H */
