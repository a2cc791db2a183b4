/*
 * peer_role.c - the scheduler role and a certificate's authority over a host, from a verified
 * peer identity (dfc/peer_role.h).
 */
#include "dfc/peer_role.h"

#include <string.h>

static bool has_uri(const struct dfc_peer_identity *id, const char *uri) {
    for (unsigned i = 0; i < id->n_uris && i < DFC_PEER_SAN_MAX; i++) {
        if (strcmp(id->uris[i], uri) == 0) {
            return true;
        }
    }
    return false;
}

bool dfc_peer_is_scheduler(const struct dfc_peer_identity *id) {
    return id->authenticated && (has_uri(id, DFC_ROLE_SCHEDULER_URI) ||
                                 strcmp(id->common_name, DFC_ROLE_SCHEDULER_CN) == 0);
}

enum dfc_host_authority dfc_peer_host_authority(const struct dfc_peer_identity *id,
                                                const char *host_id, const char *ip) {
    if (!id->authenticated) {
        return DFC_HOST_NONE;
    }
    size_t plen = strlen(DFC_ROLE_HOST_URI);
    for (unsigned i = 0; host_id != NULL && host_id[0] != '\0' && i < id->n_uris; i++) {
        if (strncmp(id->uris[i], DFC_ROLE_HOST_URI, plen) == 0 &&
            strcmp(id->uris[i] + plen, host_id) == 0) {
            return DFC_HOST_OWN;
        }
    }
    for (unsigned i = 0; ip != NULL && i < id->n_ips && i < DFC_PEER_SAN_MAX; i++) {
        if (strcmp(id->ips[i], ip) == 0) {
            return DFC_HOST_OWN;
        }
    }
    if (has_uri(id, DFC_ROLE_NODE_URI) || strcmp(id->common_name, DFC_ROLE_NODE_CN) == 0) {
        return DFC_HOST_SHARED;
    }
    return DFC_HOST_NONE;
}
