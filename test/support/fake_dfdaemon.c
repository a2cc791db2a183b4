/*
 * fake_dfdaemon.c - fake DfdaemonUpload servers for the placement tests (see fake_dfdaemon.h).
 */
#include "fake_dfdaemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/id.h"
#include "dfc/rpc_server.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "model.h"
#include "redis.h"
#include "store.h"

#define MAX_CALLS 512
#define MAX_HELD  64

struct fake_dfdaemon {
    struct dfc_rpc_server *server;
    int port;
    struct sched_store *store;
    char *host_id;
    pthread_mutex_t mu;
    enum fake_dfdaemon_mode mode;
    int delay_ms;
    bool stopping;
    struct fake_dfdaemon_call calls[MAX_CALLS];
    size_t n_calls;
    char held[MAX_HELD][160]; /* tasks it holds a copy of: pulled, or fake_dfdaemon_hold */
    size_t n_held;
};

static void hold(struct fake_dfdaemon *f, const char *task_id) {
    pthread_mutex_lock(&f->mu);
    bool seen = false;
    for (size_t i = 0; i < f->n_held && !seen; i++) {
        seen = strcmp(f->held[i], task_id) == 0;
    }
    if (!seen && f->n_held < MAX_HELD) {
        snprintf(f->held[f->n_held++], sizeof(f->held[0]), "%s", task_id);
    }
    pthread_mutex_unlock(&f->mu);
}

static bool holds(struct fake_dfdaemon *f, const char *task_id) {
    pthread_mutex_lock(&f->mu);
    bool yes = false;
    for (size_t i = 0; i < f->n_held && !yes; i++) {
        yes = strcmp(f->held[i], task_id) == 0;
    }
    pthread_mutex_unlock(&f->mu);
    return yes;
}

static void copy_str(char *dst, size_t size, const char *src) {
    snprintf(dst, size, "%s", src != NULL ? src : "");
}

/* Records a call and returns the mode and delay to act on. */
static enum fake_dfdaemon_mode record(struct fake_dfdaemon *f, const struct fake_dfdaemon_call *c,
                                      int *delay_ms) {
    pthread_mutex_lock(&f->mu);
    if (f->n_calls < MAX_CALLS) {
        f->calls[f->n_calls++] = *c;
    }
    enum fake_dfdaemon_mode m = f->mode;
    *delay_ms = f->delay_ms;
    pthread_mutex_unlock(&f->mu);
    return m;
}

static bool stopping(struct fake_dfdaemon *f) {
    pthread_mutex_lock(&f->mu);
    bool s = f->stopping;
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* Applies the delay and the fault mode; 0 to go on answering. */
static int act(struct fake_dfdaemon *f, struct dfc_rpc_call *call, enum fake_dfdaemon_mode m,
               int delay_ms, struct dfc_error *err) {
    if (delay_ms > 0) {
        usleep((useconds_t)delay_ms * 1000);
    }
    if (m == FAKE_DFDAEMON_FAIL) {
        return dfc_error_set(err, DFC_E_INTERNAL, "fake dfdaemon %s: failing on purpose",
                             f->host_id);
    }
    if (m == FAKE_DFDAEMON_HANG) {
        while (!dfc_rpc_call_cancelled(call) && !stopping(f)) {
            usleep(5000);
        }
        return dfc_error_set(err, -ECANCELED, "fake dfdaemon %s: hung up", f->host_id);
    }
    return 0;
}

static int on_update(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *reqm,
                     ProtobufCMessage *resp, struct dfc_error *err) {
    struct fake_dfdaemon *f = svc;
    const Dfdaemon__V2__UpdatePersistentCacheTaskRequest *req = (const void *)reqm;
    struct fake_dfdaemon_call c = {.persistent = req->persistent};
    copy_str(c.method, sizeof(c.method), "UpdatePersistentCacheTask");
    copy_str(c.task_id, sizeof(c.task_id), req->task_id);
    if (req->opt_remote_ip_case ==
        DFDAEMON__V2__UPDATE_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP) {
        c.has_remote_ip = true;
        copy_str(c.remote_ip, sizeof(c.remote_ip), req->remote_ip);
    }
    int delay = 0;
    enum fake_dfdaemon_mode m = record(f, &c, &delay);
    return act(f, call, m, delay, err);
}

static int on_delete(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *reqm,
                     ProtobufCMessage *resp, struct dfc_error *err) {
    struct fake_dfdaemon *f = svc;
    const Dfdaemon__V2__DeletePersistentCacheTaskRequest *req = (const void *)reqm;
    struct fake_dfdaemon_call c = {0};
    copy_str(c.method, sizeof(c.method), "DeletePersistentCacheTask");
    copy_str(c.task_id, sizeof(c.task_id), req->task_id);
    if (req->opt_remote_ip_case ==
        DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP) {
        c.has_remote_ip = true;
        copy_str(c.remote_ip, sizeof(c.remote_ip), req->remote_ip);
    }
    int delay = 0;
    enum fake_dfdaemon_mode m = record(f, &c, &delay);
    return act(f, call, m, delay, err);
}

/* What the dfdaemon side would leave in Redis after pulling the task: a Succeeded peer of its
 * host, with every piece, persistent as asked. */
static int store_peer(struct fake_dfdaemon *f, const char *task_id, bool persistent,
                      uint64_t *content_length, struct dfc_error *err) {
    int64_t dl = sched_redis_deadline(5000);
    struct sched_task task = {0};
    int r = sched_task_load(f->store, dl, task_id, &task, err);
    if (r < 0) {
        return r;
    }
    *content_length = task.content_length;
    char uuid[DFC_UUID_STR_LEN + 1], id[512];
    dfc_uuid_v4(uuid);
    snprintf(id, sizeof(id), "%s-%s", f->host_id, uuid);
    int64_t now = (int64_t)time(NULL);
    struct sched_peer peer = {
        .id = strdup(id),
        .persistent = persistent,
        .state = SCHED_PEER_SUCCEEDED,
        .task_id = strdup(task_id),
        .host_id = strdup(f->host_id),
        .created_at = now,
        .updated_at = now,
        .concurrent_piece_count = 8,
    };
    if (peer.id == NULL || peer.task_id == NULL || peer.host_id == NULL ||
        sched_bitset_init(&peer.finished_pieces, task.total_piece_count) < 0) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    } else {
        sched_bitset_set_all(&peer.finished_pieces);
        r = sched_peer_store(f->store, dl, &peer, &task, err);
    }
    sched_peer_done(&peer);
    sched_task_done(&task);
    return r;
}

static int on_download(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *reqm,
                       ProtobufCMessage *resp, struct dfc_error *err) {
    struct fake_dfdaemon *f = svc;
    const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req = (const void *)reqm;
    struct fake_dfdaemon_call c = {.persistent = req->persistent};
    copy_str(c.method, sizeof(c.method), "DownloadPersistentCacheTask");
    copy_str(c.task_id, sizeof(c.task_id), req->task_id);
    if (req->opt_remote_ip_case ==
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP) {
        c.has_remote_ip = true;
        copy_str(c.remote_ip, sizeof(c.remote_ip), req->remote_ip);
    }
    if (req->opt_tag_case == DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG) {
        copy_str(c.tag, sizeof(c.tag), req->tag);
    }
    if (req->opt_application_case ==
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_APPLICATION_APPLICATION) {
        copy_str(c.application, sizeof(c.application), req->application);
    }
    int delay = 0;
    enum fake_dfdaemon_mode m = record(f, &c, &delay);
    int r = act(f, call, m, delay, err);
    if (r < 0) {
        return r;
    }
    uint64_t content_length = 0;
    if (f->store != NULL) {
        r = store_peer(f, req->task_id, req->persistent, &content_length, err);
        if (r < 0) {
            return r;
        }
    }
    hold(f, req->task_id);
    Dfdaemon__V2__DownloadPersistentCacheTaskStartedResponse started =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE__INIT;
    started.content_length = content_length;
    Dfdaemon__V2__DownloadPersistentCacheTaskResponse msg =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
    msg.host_id = f->host_id;
    msg.task_id = req->task_id;
    msg.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE;
    msg.download_persistent_cache_task_started_response = &started;
    return dfc_rpc_call_send(call, &msg.base, err);
}

/* The task as a dfdaemon's store would answer it: from the scheduler's record (same id, length
 * and piece count) when the fake holds it, else NOT_FOUND. */
static int on_stat(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *reqm,
                   ProtobufCMessage *resp, struct dfc_error *err) {
    struct fake_dfdaemon *f = svc;
    const Dfdaemon__V2__StatPersistentCacheTaskRequest *req = (const void *)reqm;
    struct fake_dfdaemon_call c = {0};
    copy_str(c.method, sizeof(c.method), "StatPersistentCacheTask");
    copy_str(c.task_id, sizeof(c.task_id), req->task_id);
    int delay = 0;
    enum fake_dfdaemon_mode m = record(f, &c, &delay);
    int r = act(f, call, m, delay, err);
    if (r < 0) {
        return r;
    }
    if (!holds(f, req->task_id)) {
        return dfc_error_set(err, -ENOENT, "task %s not found", req->task_id);
    }
    Common__V2__PersistentCacheTask *out = (Common__V2__PersistentCacheTask *)resp;
    out->id = dfc_rpc_call_strdup(call, req->task_id);
    out->state = "Succeeded";
    if (f->store != NULL) {
        struct sched_task task = {0};
        if ((r = sched_task_load(f->store, sched_redis_deadline(5000), req->task_id, &task, err)) <
            0) {
            return r;
        }
        out->content_length = task.content_length;
        out->piece_length = task.piece_length;
        out->piece_count = task.total_piece_count;
        sched_task_done(&task);
    }
    return out->id == NULL ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
}

static const struct dfc_rpc_method methods[] = {
    DFC_RPC_METHOD("UpdatePersistentCacheTask", DFC_RPC_UNARY,
                   dfdaemon__v2__update_persistent_cache_task_request, google__protobuf__empty,
                   on_update),
    DFC_RPC_METHOD("DeletePersistentCacheTask", DFC_RPC_UNARY,
                   dfdaemon__v2__delete_persistent_cache_task_request, google__protobuf__empty,
                   on_delete),
    DFC_RPC_METHOD("DownloadPersistentCacheTask", DFC_RPC_SERVER_STREAM,
                   dfdaemon__v2__download_persistent_cache_task_request,
                   dfdaemon__v2__download_persistent_cache_task_response, on_download),
    DFC_RPC_METHOD("StatPersistentCacheTask", DFC_RPC_UNARY,
                   dfdaemon__v2__stat_persistent_cache_task_request,
                   common__v2__persistent_cache_task, on_stat),
};

int fake_dfdaemon_start(struct sched_store *store, const char *host_id,
                        struct fake_dfdaemon **ret) {
    *ret = NULL;
    struct fake_dfdaemon *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->host_id = strdup(host_id)) == NULL) {
        free(f);
        return -ENOMEM;
    }
    f->store = store;
    pthread_mutex_init(&f->mu, NULL);
    struct dfc_rpc_server_opts o = {.max_workers = 8, .name = "fake-dfdaemon"};
    struct dfc_error err = {0};
    int r = dfc_rpc_server_new(&o, &f->server, &err);
    if (r == 0) {
        r = dfc_rpc_server_add_service(f->server, &dfdaemon__v2__dfdaemon_upload__descriptor,
                                       methods, DFC_RPC_N(methods), f, &err);
    }
    if (r == 0) {
        /* Port 0: the kernel picks a free one, and the layer returns it. */
        r = dfc_rpc_server_listen(f->server, "127.0.0.1:0", &err);
        if (r > 0) {
            f->port = r;
            r = 0;
        } else if (r == 0) {
            r = -EADDRNOTAVAIL;
        }
    }
    if (r == 0) {
        r = dfc_rpc_server_start(f->server, &err);
    }
    if (r < 0) {
        fprintf(stderr, "fake dfdaemon %s: %s\n", host_id, dfc_error_msg(&err));
        fake_dfdaemon_stop(f);
        return r;
    }
    *ret = f;
    return 0;
}

void fake_dfdaemon_stop(struct fake_dfdaemon *f) {
    if (f == NULL) {
        return;
    }
    pthread_mutex_lock(&f->mu);
    f->stopping = true; /* releases hung calls */
    pthread_mutex_unlock(&f->mu);
    dfc_rpc_server_free(f->server);
    pthread_mutex_destroy(&f->mu);
    free(f->host_id);
    free(f);
}

int fake_dfdaemon_port(const struct fake_dfdaemon *f) {
    return f->port;
}

void fake_dfdaemon_set_mode(struct fake_dfdaemon *f, enum fake_dfdaemon_mode mode) {
    pthread_mutex_lock(&f->mu);
    f->mode = mode;
    pthread_mutex_unlock(&f->mu);
}

void fake_dfdaemon_set_delay_ms(struct fake_dfdaemon *f, int ms) {
    pthread_mutex_lock(&f->mu);
    f->delay_ms = ms;
    pthread_mutex_unlock(&f->mu);
}

size_t fake_dfdaemon_count(struct fake_dfdaemon *f, const char *method) {
    pthread_mutex_lock(&f->mu);
    size_t n = 0;
    for (size_t i = 0; i < f->n_calls; i++) {
        if (method == NULL || strcmp(f->calls[i].method, method) == 0) {
            n++;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool fake_dfdaemon_call(struct fake_dfdaemon *f, size_t i, struct fake_dfdaemon_call *out) {
    pthread_mutex_lock(&f->mu);
    bool ok = i < f->n_calls;
    if (ok) {
        *out = f->calls[i];
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}

void fake_dfdaemon_hold(struct fake_dfdaemon *f, const char *task_id) {
    hold(f, task_id);
}

void fake_dfdaemon_clear(struct fake_dfdaemon *f) {
    pthread_mutex_lock(&f->mu);
    f->n_calls = 0;
    pthread_mutex_unlock(&f->mu);
}
