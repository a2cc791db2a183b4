/*
 * authz.c - who may act for a host or delete a task at the scheduler (authz.h). A caller's
 * certificate is weighed against the host's id and address by the roles of dfc/peer_role.h and
 * the bindings of authz_store.h; a task delete against its importers and the operator
 * identities.
 */
#include "authz.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "authz_store.h"
#include "dfc/log.h"
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

bool sched_authz_on(struct dfc_rpc_call *call) {
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    return id.authenticated;
}

/* "URI a, IP b, DNS c, CN d" of the certificate, for messages (truncated to size). */
static const char *describe(const struct dfc_peer_identity *id, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
#define ADD(kind, v)                                                                               \
    do {                                                                                           \
        int n_ = snprintf(buf + len, size - len, "%s%s %s", len ? ", " : "", kind, v);             \
        len += n_ > 0 && (size_t)n_ < size - len ? (size_t)n_ : 0;                                 \
    } while (0)
    for (unsigned i = 0; i < id->n_uris && i < DFC_PEER_SAN_MAX; i++) {
        ADD("URI", id->uris[i]);
    }
    for (unsigned i = 0; i < id->n_ips && i < DFC_PEER_SAN_MAX; i++) {
        ADD("IP", id->ips[i]);
    }
    for (unsigned i = 0; i < id->n_dns && i < DFC_PEER_SAN_MAX; i++) {
        ADD("DNS", id->dns[i]);
    }
    if (id->common_name[0] != '\0') {
        ADD("CN", id->common_name);
    }
#undef ADD
    return buf;
}

/* What id may do for host_id: its authority, with the stored host's IP and binding read only
 * when the id or the role do not decide it. -ENOENT when the host is not stored. */
static int authority(struct sched_store *s, int64_t dl, const struct dfc_peer_identity *id,
                     const char *host_id, enum dfc_host_authority *a, enum sched_binding *b,
                     struct dfc_error *err) {
    *b = SCHED_BINDING_NONE;
    *a = dfc_peer_host_authority(id, host_id, NULL);
    if (*a == DFC_HOST_OWN) {
        return 0;
    }
    struct sched_host h = {0};
    int r = sched_host_load(s, dl, host_id, &h, err);
    if (r == 0) {
        *a = dfc_peer_host_authority(id, host_id, h.ip);
    }
    sched_host_done(&h);
    if (r < 0) {
        return r;
    }
    if (*a == DFC_HOST_SHARED) {
        r = sched_binding_get(s, dl, host_id, b, err);
    }
    return r;
}

static int refuse_shared(const char *what, const char *host_id, struct dfc_error *err) {
    return dfc_error_set(err, -EACCES,
                         "permission denied: the shared node certificate may not %s host %s "
                         "(a per-node certificate announced it; only that node acts for it)",
                         what, host_id);
}

int sched_authz_bind(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call, const char *what,
                     const char *host_id, const char *ip, bool bind, struct dfc_error *err) {
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    if (!id.authenticated) {
        return 0;
    }
    enum dfc_host_authority a = dfc_peer_host_authority(&id, host_id, ip);
    enum sched_binding kind = a == DFC_HOST_OWN ? SCHED_BINDING_NODE : SCHED_BINDING_SHARED;
    int r;
    if (bind) {
        r = sched_binding_set(s, dl, host_id, kind, err);
    } else {
        enum sched_binding b = SCHED_BINDING_NONE;
        r = kind == SCHED_BINDING_NODE ? 1 : sched_binding_get(s, dl, host_id, &b, err);
        r = r < 0 ? r : b != SCHED_BINDING_NODE;
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_WARN, "scheduler.host_bound_refused",
                "host_id=%s: the shared node certificate may not %s a host a per-node "
                "certificate announced",
                host_id, what);
        return refuse_shared(what, host_id, err);
    }
    return r < 0 ? r : 0;
}

int sched_authz_stored_host(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call,
                            const char *what, const char *host_id, struct dfc_error *err) {
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    if (!id.authenticated) {
        return 0;
    }
    enum dfc_host_authority a;
    enum sched_binding b;
    int r = authority(s, dl, &id, host_id, &a, &b, err);
    if (r == -ENOENT) {
        return dfc_error_set(err, -ENOENT, "host %s not found", host_id);
    }
    if (r < 0 || a == DFC_HOST_OWN || (a == DFC_HOST_SHARED && b != SCHED_BINDING_NODE)) {
        return r;
    }
    if (a == DFC_HOST_SHARED) {
        return refuse_shared(what, host_id, err);
    }
    char who[512];
    return dfc_error_set(err, -EACCES,
                         "permission denied: a certificate naming %s may not %s host %s (a node "
                         "acts only for its own host)",
                         describe(&id, who, sizeof(who)), what, host_id);
}

int sched_authz_peer_owner(const char *peer_id, const char *owner, const char *host_id,
                           struct dfc_error *err) {
    if (owner == NULL || host_id == NULL || strcmp(owner, host_id) == 0) {
        return 0;
    }
    return dfc_error_set(err, -EACCES, "permission denied: peer %s belongs to host %s, not %s",
                         peer_id, owner, host_id);
}

static bool is_operator(const struct dfc_peer_identity *id, const struct dfc_config_list *ops) {
    for (size_t k = 0; ops != NULL && k < ops->n; k++) {
        const char *o = ops->items[k];
        if (o[0] == '\0') {
            continue;
        }
        bool match = strcmp(id->common_name, o) == 0;
        for (unsigned i = 0; !match && i < id->n_uris && i < DFC_PEER_SAN_MAX; i++) {
            match = strcmp(id->uris[i], o) == 0;
        }
        for (unsigned i = 0; !match && i < id->n_dns && i < DFC_PEER_SAN_MAX; i++) {
            match = strcmp(id->dns[i], o) == 0;
        }
        if (match) {
            return true;
        }
    }
    return false;
}

int sched_authz_task_delete(struct sched_store *s, int64_t dl, struct dfc_rpc_call *call,
                            const struct dfc_config_list *ops, const char *task_id,
                            struct dfc_error *err) {
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    char who[512];
    if (!id.authenticated) {
        return 0;
    }
    if (is_operator(&id, ops)) {
        DFC_LOG(DFC_LOG_INFO, "scheduler.operator_delete",
                "task_id=%s: deleted by the operator identity %s", task_id,
                describe(&id, who, sizeof(who)));
        return 0;
    }
    struct sched_ids imp = {0};
    int r = sched_importers(s, dl, task_id, &imp, err);
    if (r < 0) {
        return r;
    }
    char names[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < imp.n; i++) {
        enum dfc_host_authority a;
        enum sched_binding b;
        struct dfc_error e;
        int ar = authority(s, dl, &id, imp.ids[i], &a, &b, &e);
        if (ar < 0 && ar != -ENOENT) {
            *err = e;
            sched_ids_free(&imp);
            return ar;
        }
        if (ar == 0 && (a == DFC_HOST_OWN || (a == DFC_HOST_SHARED && b != SCHED_BINDING_NODE))) {
            sched_ids_free(&imp);
            return 0;
        }
        int n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", imp.ids[i]);
        len += n > 0 && (size_t)n < sizeof(names) - len ? (size_t)n : 0;
    }
    size_t n_imp = imp.n;
    sched_ids_free(&imp);
    if (n_imp == 0) {
        /* No importer recorded: nothing to delete when the scheduler holds nothing of it. */
        uint64_t all = 0, persistent = 0;
        struct sched_task t = {0};
        int tr = sched_task_load(s, dl, task_id, &t, err);
        sched_task_done(&t);
        if (tr < 0 && tr != -ENOENT) {
            return tr;
        }
        if ((r = sched_task_replica_counts(s, dl, task_id, &all, &persistent, err)) < 0) {
            return r;
        }
        if (tr == -ENOENT && all == 0) {
            return 0;
        }
        return dfc_error_set(err, -EACCES,
                             "permission denied: persistent cache task %s has no recorded "
                             "importing host; only an operator identity "
                             "(security.operatorIdentities) may delete it, not a certificate "
                             "naming %s",
                             task_id, describe(&id, who, sizeof(who)));
    }
    return dfc_error_set(err, -EACCES,
                         "permission denied: persistent cache task %s was imported by host %s; "
                         "a certificate naming %s is neither that host's nor an operator "
                         "identity (security.operatorIdentities)",
                         task_id, names, describe(&id, who, sizeof(who)));
}
