/*
 * rpc_volume.c - dfc.dfdaemon.v1.DfdaemonVolume (proto/dfc/volume.proto): the pins of content
 * volumes the CSI plugin asks for (docs/content-volumes.md). Thin: validate, then the storage
 * engine's pins (storage/pins.h); tasks this node lacks are downloaded in the background
 * (volume_fetch.h) and waited for up to fetch_timeout.
 *
 * Who may call: Publish and Unpublish change what pods see and are for root or the daemon's
 * own uid (the CSI plugin); List is open to every caller of the socket, as stat is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/volume.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "service.h"
#include "storage/pins.h"
#include "storage/storage.h"
#include "validate.h"
#include "volume_fetch.h"

typedef Dfc__Dfdaemon__V1__PublishContentVolumeRequest PublishRequest;
typedef Dfc__Dfdaemon__V1__PublishContentVolumeResponse PublishResponse;
typedef Dfc__Dfdaemon__V1__UnpublishContentVolumeRequest UnpublishRequest;
typedef Dfc__Dfdaemon__V1__ListContentVolumesResponse ListResponse;
typedef Dfc__Dfdaemon__V1__ContentVolume ContentVolume;
typedef Dfc__Dfdaemon__V1__ContentVolumeFile ContentVolumeFile;

static int check_caller(struct dfc_rpc_call *call, const char *verb, struct dfc_error *err) {
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(call, &cred) < 0) {
        return dfc_error_set(err, -EACCES, "permission denied: only Unix-socket callers may %s",
                             verb);
    }
    if (cred.uid == 0 || cred.uid == geteuid()) {
        return 0;
    }
    return dfc_error_set(err, -EACCES, "permission denied: uid %u may not %s (root or uid %u)",
                         (unsigned)cred.uid, verb, (unsigned)geteuid());
}

/* Every field checked before anything is done, into want (files borrowed into want->files,
 * which the caller frees). */
static int check_publish(const PublishRequest *req, struct dfd_pin *want, int64_t *ret_timeout_ns,
                         int64_t default_timeout_ns, struct dfc_error *err) {
    int r = dfd_pin_check_id("pin_id", req->pin_id, err);
    if (r < 0) {
        return r;
    }
    if (req->n_files < 1 || req->n_files > DFD_PIN_FILES_MAX) {
        return dfc_error_set(err, -EINVAL, "files must hold 1 to %d files, got %zu",
                             DFD_PIN_FILES_MAX, req->n_files);
    }
    if ((r = dfd_validate_path("target_path", req->target_path, err)) < 0) {
        return r;
    }
    *ret_timeout_ns = default_timeout_ns;
    if (req->fetch_timeout != NULL) {
        int64_t s = req->fetch_timeout->seconds, ns = req->fetch_timeout->nanos;
        if (s < 0 || ns < 0 || ns >= 1000000000 || s > 3600 || (s == 0 && ns == 0)) {
            return dfc_error_set(err, -EINVAL,
                                 "fetch_timeout must be positive and at most 1h, got seconds=%lld "
                                 "nanos=%lld",
                                 (long long)s, (long long)ns);
        }
        *ret_timeout_ns = s * 1000000000 + ns;
    }
    memset(want, 0, sizeof(*want));
    snprintf(want->pin_id, sizeof(want->pin_id), "%s", req->pin_id);
    want->target_path = req->target_path;
    want->files = calloc(req->n_files, sizeof(*want->files));
    if (want->files == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    want->n_files = req->n_files;
    for (size_t i = 0; i < req->n_files; i++) {
        const ContentVolumeFile *f = req->files[i];
        char field[48];
        snprintf(field, sizeof(field), "files[%zu].name", i);
        if ((r = dfd_pin_check_name(field, f->name, err)) < 0) {
            return r;
        }
        if (!dfd_task_id_valid(f->task_id)) {
            return dfc_error_set(err, -EINVAL,
                                 "files[%zu].task_id must be 64 lowercase hex characters (a "
                                 "SHA-256), got `%.80s`",
                                 i, f->task_id);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(req->files[j]->name, f->name) == 0) {
                return dfc_error_set(err, -EINVAL, "files[%zu].name `%s` is also files[%zu].name",
                                     i, f->name, j);
            }
        }
        snprintf(want->files[i].name, sizeof(want->files[i].name), "%s", f->name);
        snprintf(want->files[i].task_id, sizeof(want->files[i].task_id), "%s", f->task_id);
    }
    return 0;
}

/* The distinct task ids of want that are not stored here, into ids (want->n_files slots). */
static int missing_tasks(struct dfd_service *svc, const struct dfd_pin *want, const char **ids,
                         size_t *ret_n, struct dfc_error *err) {
    size_t n = 0;
    for (size_t i = 0; i < want->n_files; i++) {
        const char *id = want->files[i].task_id;
        bool seen = false;
        for (size_t j = 0; j < n && !seen; j++) {
            seen = strcmp(ids[j], id) == 0;
        }
        struct dfd_task_meta t;
        int r = seen ? 0 : dfd_storage_get(svc->storage, id, &t, err);
        if (r == 0 && !seen) {
            dfd_task_meta_done(&t);
        } else if (r == -ENOENT) {
            ids[n++] = id;
        } else if (r < 0) {
            return r;
        }
    }
    *ret_n = n;
    return 0;
}

static int publish(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                   ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const PublishRequest *req = (const void *)req_;
    PublishResponse *resp = (void *)resp_;
    struct dfd_pin want = {0};
    int64_t timeout_ns = 0;
    int r = check_publish(req, &want, &timeout_ns, svc->cfg->volume_fetch_timeout, err);
    if (r == 0) {
        r = check_caller(call, "publish a content volume", err);
    }
    int64_t deadline = dfc_mono_ns() + timeout_ns;
    char path[PATH_MAX], missing[DFD_TASK_ID_LEN + 1];
    bool verity = false;
    /* A task deleted between its download and the pin is downloaded again, a few times. */
    for (int attempt = 0; r == 0 && attempt < 4; attempt++) {
        missing[0] = '\0';
        r = dfd_storage_pin(svc->storage, &want, dfd__now(svc), path, &verity, missing, err);
        if (r != -ENOENT || missing[0] == '\0') {
            break;
        }
        if (svc->vfetch == NULL) {
            r = dfc_error_set(err, -ENOENT,
                              "task %s is not stored on this node, and without a scheduler "
                              "it cannot be fetched from peers",
                              missing);
            break;
        }
        const char *ids[DFD_PIN_FILES_MAX];
        size_t n = 0;
        r = missing_tasks(svc, &want, ids, &n, err);
        if (r == 0 && n > 0) {
            DFC_LOG(DFC_LOG_INFO, "volume.fetching", "pin_id=%s tasks=%zu first=%s", want.pin_id, n,
                    ids[0]);
            r = dfd_vfetch_wait(svc->vfetch, ids, n, deadline, err);
        }
    }
    want.target_path = NULL; /* the request's */
    dfd_pin_done(&want);
    if (r < 0) {
        return r;
    }
    resp->path = dfc_rpc_call_strdup(call, path);
    resp->verity = verity;
    if (resp->path == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    DFC_LOG(DFC_LOG_INFO, "volume.published", "pin_id=%s files=%zu path=%s verity=%s", req->pin_id,
            req->n_files, path, verity ? "true" : "false");
    return 0;
}

static int unpublish(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                     ProtobufCMessage *resp_, struct dfc_error *err) {
    (void)resp_;
    struct dfd_service *svc = svc_;
    const UnpublishRequest *req = (const void *)req_;
    int r = dfd_pin_check_id("pin_id", req->pin_id, err);
    if (r == 0) {
        r = check_caller(call, "unpublish a content volume", err);
    }
    bool existed = false;
    if (r == 0) {
        r = dfd_storage_unpin(svc->storage, req->pin_id, &existed, err);
    }
    if (r == 0 && existed) {
        DFC_LOG(DFC_LOG_INFO, "volume.unpublished", "pin_id=%s", req->pin_id);
    }
    return r;
}

static int list(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                ProtobufCMessage *resp_, struct dfc_error *err) {
    (void)req_;
    struct dfd_service *svc = svc_;
    ListResponse *resp = (void *)resp_;
    struct dfd_pin *pins;
    size_t n;
    int r = dfd_storage_pins(svc->storage, &pins, &n, err);
    if (r < 0) {
        return r;
    }
    resp->volumes = dfc_rpc_call_alloc(call, (n ? n : 1) * sizeof(ContentVolume *));
    r = resp->volumes == NULL ? -ENOMEM : 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        ContentVolume *v =
            (void *)dfc_rpc_call_new_msg(call, &dfc__dfdaemon__v1__content_volume__descriptor);
        char path[PATH_MAX];
        (void)dfd_storage_volume_path(svc->storage, pins[i].pin_id, path, sizeof(path));
        if (v == NULL || (v->files = dfc_rpc_call_alloc(
                              call, pins[i].n_files * sizeof(ContentVolumeFile *) + 1)) == NULL) {
            r = -ENOMEM;
            break;
        }
        v->pin_id = dfc_rpc_call_strdup(call, pins[i].pin_id);
        v->target_path = dfc_rpc_call_strdup(call, pins[i].target_path);
        v->path = dfc_rpc_call_strdup(call, path);
        r = v->pin_id && v->target_path && v->path ? 0 : -ENOMEM;
        for (size_t k = 0; k < pins[i].n_files && r == 0; k++) {
            ContentVolumeFile *f = (void *)dfc_rpc_call_new_msg(
                call, &dfc__dfdaemon__v1__content_volume_file__descriptor);
            if (f == NULL || (f->name = dfc_rpc_call_strdup(call, pins[i].files[k].name)) == NULL ||
                (f->task_id = dfc_rpc_call_strdup(call, pins[i].files[k].task_id)) == NULL) {
                r = -ENOMEM;
                break;
            }
            v->files[v->n_files++] = f;
        }
        resp->volumes[resp->n_volumes++] = v;
    }
    dfd_pin_list_free(pins, n);
    return r < 0 ? dfc_error_set(err, r, "out of memory") : 0;
}

const struct dfc_rpc_method dfd__volume_methods[] = {
    DFC_RPC_METHOD("PublishContentVolume", DFC_RPC_UNARY,
                   dfc__dfdaemon__v1__publish_content_volume_request,
                   dfc__dfdaemon__v1__publish_content_volume_response, publish),
    DFC_RPC_METHOD("UnpublishContentVolume", DFC_RPC_UNARY,
                   dfc__dfdaemon__v1__unpublish_content_volume_request, google__protobuf__empty,
                   unpublish),
    DFC_RPC_METHOD("ListContentVolumes", DFC_RPC_UNARY,
                   dfc__dfdaemon__v1__list_content_volumes_request,
                   dfc__dfdaemon__v1__list_content_volumes_response, list),
};
const size_t dfd__n_volume_methods = DFC_RPC_N(dfd__volume_methods);
