/*
 * rpc_host.c - AnnounceHost, DeleteHost, ListHosts.
 *
 * With Redis the host hashes are the truth for every instance: AnnounceHost writes
 * P:persistent-cache-hosts:<id>, ListHosts lists that set, DeleteHost removes a host (and its
 * peers) whichever instance it was announced to. Without Redis an instance keeps the hosts
 * announced to it in memory, as upstream's standard host manager.
 *
 * Under mutual TLS a caller announces or deletes only a host at one of its certificate's
 * addresses, cannot re-announce a stored host id with another address, and the shared node
 * certificate cannot act for a host a per-node certificate announced (authz.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "google/protobuf/duration.pb-c.h"
#include "service.h"
#include "validate.h"

/* ---- without Redis ---- */

static int mem_announce(struct sched_service *svc, const Common__V2__Host *h,
                        struct dfc_error *err) {
    size_t len = protobuf_c_message_get_packed_size(&h->base);
    uint8_t *packed = malloc(len > 0 ? len : 1);
    if (packed == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    protobuf_c_message_pack(&h->base, packed);
    int r = 0;
    pthread_mutex_lock(&svc->lock);
    size_t i = 0;
    while (i < svc->n_hosts && strcmp(svc->hosts[i].id, h->id) != 0) {
        i++;
    }
    if (i == svc->n_hosts) {
        struct sched_mem_host *grown = NULL;
        char *id = NULL;
        if (svc->n_hosts >= SCHED_MEM_HOSTS_MAX) {
            r = dfc_error_set(err, -ENOSPC, "too many hosts (%d) announced without redis",
                              SCHED_MEM_HOSTS_MAX);
        } else if ((id = strdup(h->id)) == NULL ||
                   (grown = realloc(svc->hosts, (svc->n_hosts + 1) * sizeof(*grown))) == NULL) {
            free(id);
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            svc->hosts = grown;
            svc->hosts[i] = (struct sched_mem_host){.id = id};
            svc->n_hosts++;
        }
    }
    if (r == 0) {
        free(svc->hosts[i].packed);
        svc->hosts[i].packed = packed;
        svc->hosts[i].len = len;
        svc->hosts[i].type = h->type;
        packed = NULL;
    }
    pthread_mutex_unlock(&svc->lock);
    free(packed);
    return r;
}

static int mem_delete(struct sched_service *svc, const char *id, struct dfc_error *err) {
    int r = dfc_error_set(err, -ENOENT, "host %s not found", id);
    pthread_mutex_lock(&svc->lock);
    for (size_t i = 0; i < svc->n_hosts; i++) {
        if (strcmp(svc->hosts[i].id, id) == 0) {
            free(svc->hosts[i].id);
            free(svc->hosts[i].packed);
            svc->hosts[i] = svc->hosts[--svc->n_hosts];
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&svc->lock);
    return r;
}

static void *arena_alloc(void *call, size_t size) {
    return dfc_rpc_call_alloc(call, size);
}

static void arena_free(void *call, void *p) {
    (void)call;
    (void)p; /* freed with the call */
}

/* Unpacks the stored hosts (of type *type when given) into the call's arena. */
static int mem_list(struct sched_service *svc, struct dfc_rpc_call *call, const uint32_t *type,
                    Scheduler__V2__ListHostsResponse *out, struct dfc_error *err) {
    ProtobufCAllocator arena = {.alloc = arena_alloc, .free = arena_free, .allocator_data = call};
    int r = 0;
    pthread_mutex_lock(&svc->lock);
    out->hosts = dfc_rpc_call_alloc(call, (svc->n_hosts + 1) * sizeof(Common__V2__Host *));
    if (out->hosts == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < svc->n_hosts; i++) {
        if (type != NULL && svc->hosts[i].type != *type) {
            continue;
        }
        Common__V2__Host *h =
            common__v2__host__unpack(&arena, svc->hosts[i].len, svc->hosts[i].packed);
        if (h == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            out->hosts[out->n_hosts++] = h;
        }
    }
    pthread_mutex_unlock(&svc->lock);
    return r;
}

/* ---- handlers ---- */

int sched__announce_host(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                         ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__AnnounceHostRequest *req =
        (const Scheduler__V2__AnnounceHostRequest *)reqp;
    int r = sched_validate_announce_host(req, err);
    if (r < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "host_id", req->host->id);
    if ((r = sched_authz_host(call, "announce", req->host->id, req->host->ip, true, err)) < 0) {
        return r;
    }
    if (svc->store == NULL) {
        return mem_announce(svc, req->host, err);
    }
    /* Upstream updates an existing record only in part (not its name, hostname or IP): here
     * every announced field replaces the stored one; sub-messages only when present, and
     * created_at stays. */
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);
    struct sched_host h = {0};
    r = sched_host_load(svc->store, dl, req->host->id, &h, err);
    if (r == -ENOENT) {
        memset(&h, 0, sizeof(h));
        h.created_at = now;
    } else if (r < 0) {
        return r;
    } else if (h.ip != NULL && strcmp(h.ip, req->host->ip) != 0 &&
               (r = sched_authz_host(call, "take over", req->host->id, h.ip, false, err)) < 0) {
        sched_host_done(&h); /* stored with another address that the caller does not hold */
        return r;
    }
    r = sched_authz_bind(svc->store, dl, call, "announce", req->host->id, req->host->ip, true, err);
    if (r == 0) {
        r = sched__host_from_proto(req->host, &h, err);
    }
    if (r == 0) {
        if (req->interval != NULL) {
            (void)dfc_pb_duration_to_ns(req->interval, &h.announce_interval_ns); /* validated */
        }
        h.updated_at = now;
        r = sched_host_store(svc->store, dl, &h, err);
    }
    sched_host_done(&h);
    return r;
}

/* Deletes the host's peers (queueing a repair for each persistent Succeeded copy, as upstream)
 * and the host, whether or not this instance ever saw it announced. */
static int redis_delete_host(struct sched_service *svc, struct dfc_rpc_call *call, const char *id,
                             struct dfc_error *err) {
    int64_t dl = sched__deadline(svc, call);
    struct sched_host h = {0};
    int r = sched_host_load(svc->store, dl, id, &h, err);
    bool found = r == 0;
    if (found && h.ip != NULL &&
        ((r = sched_authz_host(call, "delete", id, h.ip, true, err)) < 0 ||
         (r = sched_authz_bind(svc->store, dl, call, "delete", id, h.ip, false, err)) < 0)) {
        sched_host_done(&h);
        return r;
    }
    sched_host_done(&h);
    if (r < 0 && r != -ENOENT) {
        return r;
    }
    struct sched_ids peers = {0};
    if ((r = sched_peer_ids_by_host(svc->store, dl, id, &peers, err)) < 0) {
        return r;
    }
    char **repair = calloc(peers.n + 1, sizeof(*repair));
    size_t n_repair = 0;
    if (repair == NULL) {
        sched_ids_free(&peers);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < peers.n; i++) {
        struct sched_peer p = {0};
        dl = sched__deadline(svc, call);
        int lr = sched_peer_load(svc->store, dl, peers.ids[i], &p, err);
        if (lr == 0 && p.state == SCHED_PEER_SUCCEEDED && p.persistent) {
            repair[n_repair] = strdup(p.task_id);
            n_repair += repair[n_repair] != NULL;
        } else if (lr < 0 && lr != -ENOENT) {
            r = lr;
        }
        sched_peer_done(&p);
        if (r == 0) {
            r = sched_peer_delete(svc->store, dl, peers.ids[i], err);
            r = r == -ENOENT ? 0 : r;
        }
    }
    if (r == 0) {
        r = sched_host_delete(svc->store, dl, id, err);
        r = r == -ENOENT ? 0 : r;
    }
    if (r == 0 && !found && peers.n == 0) {
        r = dfc_error_set(err, -ENOENT, "host %s not found", id);
    }
    for (size_t i = 0; i < n_repair; i++) {
        const char *block[] = {id};
        if (r == 0 && svc->placement != NULL) {
            sched_placement_replicate(svc->placement, repair[i], block, 1);
        }
        free(repair[i]);
    }
    free(repair);
    sched_ids_free(&peers);
    return r;
}

int sched__delete_host(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                       ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__DeleteHostRequest *req = (const Scheduler__V2__DeleteHostRequest *)reqp;
    int r = sched_validate_delete_host(req, err);
    if (r < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "host_id", req->host_id);
    return svc->store == NULL ? mem_delete(svc, req->host_id, err)
                              : redis_delete_host(svc, call, req->host_id, err);
}

static int redis_list_hosts(struct sched_service *svc, struct dfc_rpc_call *call,
                            const uint32_t *type, Scheduler__V2__ListHostsResponse *out,
                            struct dfc_error *err) {
    int64_t dl = sched__deadline(svc, call);
    struct sched_ids ids = {0};
    int r = sched_host_ids(svc->store, dl, &ids, err);
    if (r < 0) {
        return r;
    }
    out->hosts = dfc_rpc_call_alloc(call, (ids.n + 1) * sizeof(Common__V2__Host *));
    if (out->hosts == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < ids.n; i++) {
        struct sched_host h = {0};
        int lr = sched_host_load(svc->store, dl, ids.ids[i], &h, err);
        if (lr == -ENOENT) {
            continue; /* removed meanwhile, or unreadable: upstream skips it too */
        }
        if (lr < 0) {
            r = lr;
        } else if (type == NULL || h.type == *type) {
            Common__V2__Host *m =
                (Common__V2__Host *)dfc_rpc_call_new_msg(call, &common__v2__host__descriptor);
            r = m == NULL ? dfc_error_set(err, -ENOMEM, "out of memory")
                          : sched__host_to_proto(call, &h, svc->cfg->cluster_id, m, err);
            if (r == 0) {
                out->hosts[out->n_hosts++] = m;
            }
        }
        sched_host_done(&h);
    }
    sched_ids_free(&ids);
    return r;
}

int sched__list_hosts(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                      ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Scheduler__V2__ListHostsRequest *req = (const Scheduler__V2__ListHostsRequest *)reqp;
    Scheduler__V2__ListHostsResponse *out = (Scheduler__V2__ListHostsResponse *)resp;
    const uint32_t *type = req->opt_type_case != 0 ? &req->type : NULL;
    return svc->store == NULL ? mem_list(svc, call, type, out, err)
                              : redis_list_hosts(svc, call, type, out, err);
}
