/*
 * authz.c - who may act for a host at the scheduler: a caller's certificate against the host's
 * id and address, by the roles of dfc/peer_role.h (authz.h).
 */
#include "authz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dfc/peer_role.h"

int sched_authz_host(struct dfc_rpc_call *call, const char *what, const char *host_id,
                     const char *ip, bool shared_ok, struct dfc_error *err) {
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    if (!id.authenticated) {
        return 0;
    }
    enum dfc_host_authority a = dfc_peer_host_authority(&id, host_id, ip);
    if (a == DFC_HOST_OWN || (a == DFC_HOST_SHARED && shared_ok)) {
        return 0;
    }
    char names[DFC_PEER_SAN_MAX * 48] = "";
    size_t len = 0;
    for (unsigned i = 0; i < id.n_ips; i++) {
        int n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? "," : "", id.ips[i]);
        len += n > 0 && (size_t)n < sizeof(names) - len ? (size_t)n : 0;
    }
    if (a == DFC_HOST_SHARED) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: the shared node certificate may not %s host %s "
                             "at %s (only a per-node certificate moves a host to another address)",
                             what, host_id, ip);
    }
    return dfc_error_set(err, -EACCES,
                         "permission denied: a certificate naming %s may not %s host %s at %s "
                         "(a node acts only for the host at its certificate's addresses)",
                         id.n_ips > 0 ? names : "no IP", what, host_id, ip);
}
