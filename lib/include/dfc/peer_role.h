/*
 * peer_role.h - what a verified certificate may do in the cluster: the one place that maps a
 * peer's identity (its SAN URIs, SAN IPs and CN) to the scheduler role and to authority over a
 * host (docs/trust-model.md).
 *
 * Scheduler: SAN URI "dragonfly://scheduler" or CN "dfc-scheduler" (the chart's certificates,
 * which carry no IP); a SAN IP among the scheduler addresses is the caller's own, older rule.
 * Node: SAN URI "dragonfly://host/<host id>" or a SAN IP equal to the host's IP is a per-node
 * identity with full authority over that host only; SAN URI "dragonfly://node" or CN "dfc-node"
 * is the shared node role (one certificate for every node), which proves only "a node of this
 * cluster".
 *
 * Ownership: nothing is kept; arguments are borrowed for the call.
 */
#ifndef DFC_PEER_ROLE_H
#define DFC_PEER_ROLE_H

#include <stdbool.h>

#include "dfc/rpc_server.h"

#define DFC_ROLE_SCHEDULER_URI "dragonfly://scheduler"
#define DFC_ROLE_SCHEDULER_CN  "dfc-scheduler"
#define DFC_ROLE_NODE_URI      "dragonfly://node"
#define DFC_ROLE_NODE_CN       "dfc-node"
#define DFC_ROLE_HOST_URI      "dragonfly://host/" /* followed by the host id */

/* Whether an authenticated identity holds the scheduler role by URI or CN. */
bool dfc_peer_is_scheduler(const struct dfc_peer_identity *id);

enum dfc_host_authority {
    DFC_HOST_NONE,   /* not authenticated, or neither this host's nor the shared role */
    DFC_HOST_SHARED, /* the shared node role: some node of the cluster */
    DFC_HOST_OWN,    /* a per-node identity naming host_id (URI) or ip (SAN IP) */
};

/* What an authenticated identity may do for the host host_id at ip (either may be NULL). A
 * per-node identity that names the host wins over the shared role held by the same
 * certificate. */
enum dfc_host_authority dfc_peer_host_authority(const struct dfc_peer_identity *id,
                                                const char *host_id, const char *ip);

#endif /* DFC_PEER_ROLE_H */
