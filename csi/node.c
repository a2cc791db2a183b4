/*
 * node.c - the CSI Node service: publish the socket directory onto a pod's target path.
 *
 * DESIGN: NodePublishVolume is a non-recursive bind of the configured socket *directory*
 * (a file bind goes stale when dfdaemon re-creates its socket), read-only when asked. The
 * target path is resolved once, beneath the kubelet root and with no symlinks (paths.h); from
 * then on everything goes through descriptors: mkdirat on the parent, the target opened beneath
 * it, the mount attached to that descriptor, the unmount through a fresh one. A rename or a
 * symlink swapped in on the way can make a request fail, never lead it elsewhere. It is
 * idempotent by the mount table: a target that already carries the socket directory (same
 * device and inode) with the same read-only-ness is left alone, so kubelet's re-publishes after
 * a restart never stack mounts. Unpublish takes off every mount stacked on the target, then
 * removes the directory; a target that is not there is fine. Calls on one target are
 * serialized by a striped lock.
 *
 * A volume whose context names tasks is a content volume (content.h): validated, authorized
 * against the allow rules with the pod identity of podInfoOnMount, then published by
 * content_node.c; its unpublish is the socket volume's, then the pin's release.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "content.h"
#include "csi/csi.pb-c.h"
#include "driver.h"
#include "driver_internal.h"
#include "paths.h"
#include "sys.h"

#define EPHEMERAL_KEY "csi.storage.k8s.io/ephemeral"

int csi__check_capability(const Csi__V1__VolumeCapability *cap, const char *field,
                          struct dfc_error *err) {
    if (cap == NULL) {
        return dfc_error_set(err, -EINVAL, "%s is required", field);
    }
    if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
        return dfc_error_set(
            err, -EINVAL, "%s: block access is not supported (the volume is a directory)", field);
    }
    if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT) {
        return dfc_error_set(err, -EINVAL, "%s.access_type must be mount", field);
    }
    if (cap->access_mode == NULL ||
        cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN) {
        return dfc_error_set(err, -EINVAL, "%s.access_mode is required", field);
    }
    return 0;
}

pthread_mutex_t *csi__lock_for(struct csi_driver *d, const char *path) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = path; *p; p++) {
        h = (h ^ (uint8_t)*p) * 16777619u;
    }
    return &d->locks[h % CSI_LOCK_STRIPES];
}

static int check_ids(const char *volume_id, const char *target, struct dfc_error *err) {
    if (volume_id == NULL || volume_id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "volume_id is required");
    }
    if (strlen(volume_id) > CSI_STRING_MAX) {
        return dfc_error_set(err, -EINVAL, "volume_id is longer than %d bytes", CSI_STRING_MAX);
    }
    if (target == NULL || target[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "target_path is required");
    }
    return 0;
}

/* True when the directory fd refers to shows the socket directory itself (a bind of it). */
static bool shows_socket_dir(const struct csi_driver *d, int fd) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(d->cfg.socket_dir, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int csi__make_target(const struct csi_target *t, bool *ret_created, struct dfc_error *err) {
    *ret_created = false;
    if (mkdirat(t->parent_fd, t->base, 0750) == 0) {
        *ret_created = true;
    } else if (errno == ENOENT) { /* the parent was removed since it was resolved */
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "the parent directory of target_path `%s` is missing", t->path);
    } else if (errno != EEXIST) {
        return dfc_error_errno(err, -errno, "create target_path `%s`", t->path);
    }
    int fd = csi__open_target(t, err);
    if (fd == -ENOENT) {
        fd = dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                           "target_path `%s` was removed while being published", t->path);
    }
    return fd;
}

int csi__open_target(const struct csi_target *t, struct dfc_error *err) {
    int fd = csi_openat_beneath(t->parent_fd, t->base, O_PATH | O_DIRECTORY);
    if (fd == -ELOOP) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` is a symlink", t->path);
    }
    if (fd == -ENOTDIR) {
        return dfc_error_set(err, -EINVAL, "target_path `%s` exists and is not a directory",
                             t->path);
    }
    if (fd < 0 && fd != -ENOENT) {
        return dfc_error_set(err, DFC_E_INTERNAL, "open target_path `%s`: %s", t->path,
                             dfc_strerror(fd));
    }
    return fd;
}

static int publish_on(struct csi_driver *d, const struct csi_target *t, int fd, bool read_only,
                      bool created, struct dfc_error *err) {
    struct csi_mount_state ms;
    int r = d->mount->state(t->parent_fd, fd, &ms);
    if (r < 0) {
        return dfc_error_errno(err, r, "read the mount table");
    }
    if (ms.count > 0) {
        if (!shows_socket_dir(d, fd)) {
            return dfc_error_set(err, -EEXIST,
                                 "target_path `%s` is already a mount of something "
                                 "else",
                                 t->path);
        }
        if (ms.read_only != read_only) {
            return dfc_error_set(err, -EEXIST,
                                 "target_path `%s` is already published %s; this request asks "
                                 "for %s",
                                 t->path, ms.read_only ? "read-only" : "read-write",
                                 read_only ? "read-only" : "read-write");
        }
        return 0; /* already done: kubelet re-publishes after restarts */
    }
    r = d->mount->bind(d->cfg.socket_dir, fd, read_only);
    if (r < 0) {
        if (created) { /* only an empty directory goes, named beneath the parent only */
            (void)unlinkat(t->parent_fd, t->base, AT_REMOVEDIR);
        }
        return dfc_error_set(err, DFC_E_INTERNAL, "bind-mount `%s` onto `%s`: %s",
                             d->cfg.socket_dir, t->path, dfc_strerror(r));
    }
    return 0;
}

static int publish_locked(struct csi_driver *d, const struct csi_target *t, bool read_only,
                          struct dfc_error *err) {
    struct stat st;
    if (stat(d->cfg.socket_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "the socket directory `%s` does not exist on this node (is dfdaemon "
                             "deployed?)",
                             d->cfg.socket_dir);
    }
    bool created = false;
    int fd = csi__make_target(t, &created, err);
    if (fd < 0) {
        return fd;
    }
    int r = publish_on(d, t, fd, read_only, created, err);
    close(fd);
    return r;
}

/* The volume context's values the node service reads (NULL: absent). */
struct context {
    const char *task_id, *file_name, *files, *pod_namespace, *service_account;
};

static void read_context(struct dfc_rpc_call *call, const Csi__V1__NodePublishVolumeRequest *req,
                         struct context *c) {
    memset(c, 0, sizeof(*c));
    const struct {
        const char *key;
        const char **value;
    } keys[] = {
        {CSI_CONTENT_KEY_TASK_ID, &c->task_id},
        {CSI_CONTENT_KEY_FILE_NAME, &c->file_name},
        {CSI_CONTENT_KEY_FILES, &c->files},
        {CSI_POD_NAMESPACE_KEY, &c->pod_namespace},
        {CSI_POD_SERVICE_ACCOUNT_KEY, &c->service_account},
    };
    for (size_t i = 0; i < req->n_volume_context; i++) {
        const char *key = req->volume_context[i]->key, *value = req->volume_context[i]->value;
        if (strcmp(key, EPHEMERAL_KEY) == 0) {
            dfc_rpc_call_log_field(call, "ephemeral", value);
        }
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            if (strcmp(key, keys[k].key) == 0) {
                *keys[k].value = value;
            }
        }
        /* Every other key (pod name and uid, provisioner identity, ...) is ignored. */
    }
}

/* Publishes a content volume (spec) on t: authorized first, then under the target's lock. */
static int publish_content(struct csi_driver *d, struct dfc_rpc_call *call,
                           const Csi__V1__NodePublishVolumeRequest *req, const struct context *c,
                           const struct csi_content_spec *spec, struct dfc_error *err) {
    if (c->pod_namespace != NULL) {
        dfc_rpc_call_log_field(call, "pod_namespace", c->pod_namespace);
    }
    int r = csi_content_authorize(&d->cfg.content_allow, c->pod_namespace, c->service_account, err);
    struct csi_target t = {.parent_fd = -1};
    if (r == 0) {
        r = csi_check_target(d->cfg.kubelet_dir, req->target_path, &t, err);
        if (r == -ENOENT) {
            r = dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                              "the parent directory of target_path `%s` is missing",
                              req->target_path);
        }
    }
    if (r < 0) {
        return r;
    }
    pthread_mutex_t *mu = csi__lock_for(d, t.path);
    pthread_mutex_lock(mu);
    r = csi__content_publish(d, call, req->volume_id, &t, spec, err);
    pthread_mutex_unlock(mu);
    csi_target_close(&t);
    return r;
}

static int node_publish(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                        ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    const Csi__V1__NodePublishVolumeRequest *req = (const void *)req_;
    dfc_rpc_call_log_field(call, "volume_id", req->volume_id);
    dfc_rpc_call_log_field(call, "target_path", req->target_path);
    int r = check_ids(req->volume_id, req->target_path, err);
    if (r == 0) {
        r = csi__check_capability(req->volume_capability, "volume_capability", err);
    }
    struct context c;
    read_context(call, req, &c);
    struct csi_content_spec *spec = NULL;
    if (r == 0 && (c.task_id != NULL || c.files != NULL || c.file_name != NULL)) {
        if ((spec = malloc(sizeof(*spec))) == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        r = csi_content_parse(c.task_id, c.file_name, c.files, spec, err);
        if (r == 1) { /* always read-only, whatever the pod asked: no readonly rule applies */
            dfc_rpc_call_log_field(call, "volume", "content");
            r = publish_content(d, call, req, &c, spec, err);
            free(spec);
            return r;
        }
        free(spec);
    }
    if (r == 0 && d->cfg.require_readonly && !req->readonly) {
        r = dfc_error_set(err, -EINVAL,
                          "readonly must be true: this driver publishes read-only only (set "
                          "readOnly: true on the pod's csi volume)");
    }
    struct csi_target t = {.parent_fd = -1};
    if (r == 0) {
        r = csi_check_target(d->cfg.kubelet_dir, req->target_path, &t, err);
        if (r == -ENOENT) {
            r = dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                              "the parent directory of target_path `%s` is missing",
                              req->target_path);
        }
    }
    if (r < 0) {
        return r;
    }
    pthread_mutex_t *mu = csi__lock_for(d, t.path);
    pthread_mutex_lock(mu);
    r = publish_locked(d, &t, req->readonly, err);
    pthread_mutex_unlock(mu);
    csi_target_close(&t);
    return r;
}

/* Takes off every mount stacked on the target, bounded in case one never goes, then removes
 * the directory: all through the parent descriptor. */
static int unpublish_locked(struct csi_driver *d, struct dfc_rpc_call *call,
                            const struct csi_target *t, struct dfc_error *err) {
    int r = 0;
    for (int i = 0; i < 64 && r == 0; i++) {
        int fd = csi__open_target(t, err);
        if (fd == -ENOENT) {
            return 0; /* gone: already unpublished */
        }
        if (fd < 0) {
            return fd;
        }
        struct csi_mount_state ms;
        if ((r = d->mount->state(t->parent_fd, fd, &ms)) < 0) {
            dfc_error_errno(err, r, "read the mount table");
        } else if (ms.count == 0) {
            close(fd);
            break;
        } else if ((r = d->mount->unmount(fd)) < 0) {
            r = dfc_error_set(err, DFC_E_INTERNAL, "unmount `%s`: %s", t->path, dfc_strerror(r));
        }
        close(fd);
    }
    if (r == 0 && unlinkat(t->parent_fd, t->base, AT_REMOVEDIR) < 0 && errno != ENOENT) {
        if (errno == ENOTEMPTY || errno == EEXIST) {
            /* Unmounted, but holding files this driver never made: leave them to kubelet's
             * clean-up rather than keep the pod Terminating with an error. */
            dfc_rpc_call_log_field(call, "target_left", "not empty");
        } else {
            r = dfc_error_set(err, DFC_E_INTERNAL, "remove target_path `%s`: %s", t->path,
                              dfc_strerror(-errno));
        }
    }
    return r;
}

static int node_unpublish(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                          ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    const Csi__V1__NodeUnpublishVolumeRequest *req = (const void *)req_;
    dfc_rpc_call_log_field(call, "volume_id", req->volume_id);
    dfc_rpc_call_log_field(call, "target_path", req->target_path);
    int r = check_ids(req->volume_id, req->target_path, err);
    if (r < 0) {
        return r;
    }
    struct csi_target t;
    r = csi_check_target(d->cfg.kubelet_dir, req->target_path, &t, err);
    if (r < 0 && r != -ENOENT) {
        return r;
    }
    pthread_mutex_t *mu = csi__lock_for(d, t.path);
    pthread_mutex_lock(mu);
    if (r == 0) {
        r = unpublish_locked(d, call, &t, err);
    } else {
        r = 0; /* nothing there: already unpublished (a reboot, a retry) */
    }
    if (r == 0) { /* the mount is off: a content volume's pin goes too */
        r = csi__content_release(d, call, req->volume_id, t.path, err);
    }
    pthread_mutex_unlock(mu);
    csi_target_close(&t);
    return r;
}

static int node_get_capabilities(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                                 ProtobufCMessage *resp, struct dfc_error *err) {
    return 0; /* none: no staging, no stats */
}

static int node_get_info(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                         ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    Csi__V1__NodeGetInfoResponse *resp = (void *)resp_;
    resp->node_id = (char *)d->cfg.node_id;
    resp->max_volumes_per_node = 0;
    return 0;
}

const struct dfc_rpc_method csi__node_methods[] = {
    DFC_RPC_METHOD("NodePublishVolume", DFC_RPC_UNARY, csi__v1__node_publish_volume_request,
                   csi__v1__node_publish_volume_response, node_publish),
    DFC_RPC_METHOD("NodeUnpublishVolume", DFC_RPC_UNARY, csi__v1__node_unpublish_volume_request,
                   csi__v1__node_unpublish_volume_response, node_unpublish),
    DFC_RPC_METHOD("NodeGetCapabilities", DFC_RPC_UNARY, csi__v1__node_get_capabilities_request,
                   csi__v1__node_get_capabilities_response, node_get_capabilities),
    DFC_RPC_METHOD("NodeGetInfo", DFC_RPC_UNARY, csi__v1__node_get_info_request,
                   csi__v1__node_get_info_response, node_get_info),
};
const size_t csi__n_node_methods = DFC_RPC_N(csi__node_methods);
