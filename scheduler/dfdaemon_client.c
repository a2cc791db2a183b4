/*
 * dfdaemon_client.c - DfdaemonUpload calls from the scheduler to a host's dfdaemon (see
 * dfdaemon_client.h). One channel per call: placement and deletes are rare next to the RPCs the
 * scheduler serves, and a fresh channel never carries a stale connection to a host that
 * re-announced on another address.
 */
#include "dfdaemon_client.h"

#include <stdio.h>
#include <string.h>

#include "dfc/addr.h"
#include "dragonfly/dfdaemon.pb-c.h"

int sched_dfdaemon_methods_resolve(struct sched_dfdaemon_methods *m, struct dfc_error *err) {
    const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "UpdatePersistentCacheTask",
                              &m->update),
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "DownloadPersistentCacheTask",
                              &m->download),
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "DeletePersistentCacheTask",
                              &m->delete_task),
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "StatPersistentCacheTask",
                              &m->stat_task),
    };
    return dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), err);
}

int sched_dfdaemon_target(const struct sched_host *host, char *buf, size_t size,
                          struct dfc_error *err) {
    if (host->ip == NULL || host->ip[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "host %s: no ip to reach its dfdaemon", host->id);
    }
    if (host->download_port <= 0 || host->download_port > 65535) {
        return dfc_error_set(err, -EINVAL, "host %s: download_port %d is not a TCP port", host->id,
                             (int)host->download_port);
    }
    char t[DFC_ADDR_STR_MAX];
    dfc_addr_format(host->ip, (unsigned)host->download_port, t, sizeof(t));
    size_t n = strlen(t);
    if (n >= size || n >= sizeof(t) - 1) {
        return dfc_error_set(err, -ENAMETOOLONG, "host %s: address too long", host->id);
    }
    memcpy(buf, t, n + 1);
    return 0;
}

/* Opens a client to host's dfdaemon; target receives the address for messages. */
static int connect_host(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                        char *target, size_t size, struct dfc_rpc_client **ret,
                        struct dfc_error *err) {
    int r = sched_dfdaemon_target(host, target, size, err);
    if (r < 0) {
        return r;
    }
    r = dfc_rpc_client_new(target, &m->client, ret, err);
    if (r < 0) {
        return dfc_error_prefix(err, "dfdaemon %s", target);
    }
    return 0;
}

/* One unary call; *ret_resp (may be NULL: dropped) receives the answer, the caller's to free. */
static int unary(const struct sched_dfdaemon_methods *ms, const struct dfc_rpc_client_method *m,
                 const struct sched_host *host, const char *what, const ProtobufCMessage *req,
                 int64_t timeout_ms, ProtobufCMessage **ret_resp, struct dfc_error *err) {
    char target[128];
    struct dfc_rpc_client *c = NULL;
    int r = connect_host(ms, host, target, sizeof(target), &c, err);
    if (r < 0) {
        return r;
    }
    ProtobufCMessage *resp = NULL;
    r = dfc_rpc_unary(c, m, req, timeout_ms, &resp, err);
    if (ret_resp != NULL && r == 0) {
        *ret_resp = resp;
        resp = NULL;
    }
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    if (r < 0) {
        return dfc_error_prefix(err, "dfdaemon %s %s", target, what);
    }
    return 0;
}

int sched_dfdaemon_update(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                          const char *task_id, bool persistent, const char *remote_ip,
                          int64_t timeout_ms, struct dfc_error *err) {
    Dfdaemon__V2__UpdatePersistentCacheTaskRequest req =
        DFDAEMON__V2__UPDATE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)task_id;
    req.persistent = persistent;
    if (remote_ip != NULL && remote_ip[0] != '\0') {
        req.opt_remote_ip_case =
            DFDAEMON__V2__UPDATE_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        req.remote_ip = (char *)remote_ip;
    }
    return unary(m, &m->update, host, "UpdatePersistentCacheTask", &req.base, timeout_ms, NULL,
                 err);
}

int sched_dfdaemon_delete(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                          const char *task_id, const char *remote_ip, int64_t timeout_ms,
                          struct dfc_error *err) {
    Dfdaemon__V2__DeletePersistentCacheTaskRequest req =
        DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)task_id;
    if (remote_ip != NULL && remote_ip[0] != '\0') {
        req.opt_remote_ip_case =
            DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        req.remote_ip = (char *)remote_ip;
    }
    return unary(m, &m->delete_task, host, "DeletePersistentCacheTask", &req.base, timeout_ms, NULL,
                 err);
}

int sched_dfdaemon_stat(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                        const char *task_id, const char *remote_ip, int64_t timeout_ms,
                        uint64_t *content_length, uint32_t *piece_count, struct dfc_error *err) {
    Dfdaemon__V2__StatPersistentCacheTaskRequest req =
        DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)task_id;
    if (remote_ip != NULL && remote_ip[0] != '\0') {
        req.opt_remote_ip_case =
            DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        req.remote_ip = (char *)remote_ip;
    }
    ProtobufCMessage *resp = NULL;
    int r =
        unary(m, &m->stat_task, host, "StatPersistentCacheTask", &req.base, timeout_ms, &resp, err);
    if (r == 0 && resp == NULL) {
        r = dfc_error_set(err, DFC_E_INTERNAL, "host %s: no answer", host->id);
    } else if (r == 0) {
        const Common__V2__PersistentCacheTask *t = (const Common__V2__PersistentCacheTask *)resp;
        if (t->id == NULL || strcmp(t->id, task_id) != 0) {
            r = dfc_error_set(err, -ENOENT, "host %s answered for task %s, not %s", host->id,
                              t->id != NULL ? t->id : "(none)", task_id);
        } else {
            *content_length = t->content_length;
            *piece_count = t->piece_count;
        }
    }
    dfc_rpc_msg_free(resp);
    return r;
}

void sched_dfdaemon_cancel_init(struct sched_dfdaemon_cancel *c) {
    pthread_mutex_init(&c->mu, NULL);
    c->st = NULL;
    c->cancelled = false;
}

void sched_dfdaemon_cancel_fire(struct sched_dfdaemon_cancel *c) {
    pthread_mutex_lock(&c->mu);
    c->cancelled = true;
    if (c->st != NULL) {
        dfc_rpc_stream_cancel(c->st);
    }
    pthread_mutex_unlock(&c->mu);
}

void sched_dfdaemon_cancel_done(struct sched_dfdaemon_cancel *c) {
    pthread_mutex_destroy(&c->mu);
}

/* Publishes st in c (false when c already fired), or withdraws it (st NULL). */
static bool cancel_track(struct sched_dfdaemon_cancel *c, struct dfc_rpc_stream *st) {
    if (c == NULL) {
        return true;
    }
    pthread_mutex_lock(&c->mu);
    bool ok = !c->cancelled;
    c->st = ok ? st : NULL;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

int sched_dfdaemon_download(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                            const struct sched_task *task, const char *remote_ip,
                            int64_t timeout_ms, struct sched_dfdaemon_cancel *cancel,
                            struct dfc_error *err) {
    /* As upstream's replica request: no output path, the task's tag and application. */
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = task->id;
    req.persistent = true;
    req.opt_tag_case = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG;
    req.tag = task->tag != NULL ? task->tag : "";
    req.opt_application_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_APPLICATION_APPLICATION;
    req.application = task->application != NULL ? task->application : "";
    if (remote_ip != NULL && remote_ip[0] != '\0') {
        req.opt_remote_ip_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        req.remote_ip = (char *)remote_ip;
    }

    char target[128];
    struct dfc_rpc_client *c = NULL;
    int r = connect_host(m, host, target, sizeof(target), &c, err);
    if (r < 0) {
        return r;
    }
    struct dfc_rpc_stream *st = NULL;
    r = dfc_rpc_stream_open(c, &m->download, timeout_ms, &st, err);
    if (r == 0 && !cancel_track(cancel, st)) {
        r = dfc_error_set(err, -ECANCELED, "the scheduler is stopping");
    }
    if (r == 0) {
        r = dfc_rpc_stream_send(st, &req.base, err);
    }
    if (r == 0) {
        r = dfc_rpc_stream_close_send(st, err);
    }
    /* Drain: the dfdaemon reports started and each piece; only the final status matters. */
    while (r == 0) {
        ProtobufCMessage *msg = NULL;
        r = dfc_rpc_stream_recv(st, m->download.resp, &msg, err);
        dfc_rpc_msg_free(msg);
        if (r != 1) {
            break; /* 0: ended OK; < 0: its status */
        }
        r = 0;
    }
    (void)cancel_track(cancel, NULL);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    if (r < 0) {
        return dfc_error_prefix(err, "dfdaemon %s DownloadPersistentCacheTask", target);
    }
    return 0;
}
