/*
 * content_node.c - the Node service's content volumes: pins at the node's dfdaemon
 * (dfc.dfdaemon.v1.DfdaemonVolume over its Unix socket), the read-only bind of the directory it
 * answers, the plugin's own record of each pin, and the reconciler that releases pins whose
 * mount is gone (docs/content-volumes.md).
 *
 * DESIGN: a publication is named by its pin id, derived from (volume id, canonical target path),
 * so a retry or a re-publish after a restart asks dfdaemon for the same pin and gets the same
 * directory back. Before asking, the plugin writes a record <state_dir>/content/<pin id>
 * holding the target path: an unpublish (whose request does not say what kind of volume it
 * was) releases the pin only when the record exists, so socket volumes never depend on
 * dfdaemon. The directory is bind-mounted through the target's descriptor exactly as a socket
 * volume is (node.c), sealed read-only, nosuid and nodev while still detached. A publish that
 * fails after the pin was taken gives the pin back, unless the target already shows it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/volume.pb-c.h"
#include "driver.h"
#include "driver_internal.h"
#include "paths.h"

#define DEFAULT_FETCH_TIMEOUT_MS 60000
#define RPC_SLACK_MS             15000 /* beyond the fetch timeout, for the answer to come */
#define SHORT_RPC_MS             10000 /* unpublish, list */
#define RECONCILE_RETRY_MS       2000

static struct dfc_rpc_client_method publish_m, unpublish_m, list_m;
static const struct dfc_rpc_client_row methods[] = {
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "PublishContentVolume", &publish_m),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "UnpublishContentVolume",
                          &unpublish_m),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "ListContentVolumes", &list_m),
};

int csi__content_init(struct csi_driver *d, struct dfc_error *err) {
    const char *sock = d->cfg.dfdaemon_socket;
    int n = sock != NULL && sock[0] != '\0'
                ? snprintf(d->daemon_socket, sizeof(d->daemon_socket), "%s", sock)
                : snprintf(d->daemon_socket, sizeof(d->daemon_socket), "%s/dfdaemon.sock",
                           d->cfg.socket_dir);
    if (n < 0 || (size_t)n >= sizeof(d->daemon_socket) - 8 || d->daemon_socket[0] != '/') {
        return dfc_error_set(err, -EINVAL, "the dfdaemon socket `%s` must be an absolute path",
                             d->daemon_socket);
    }
    int r = csi_content_rules_check(&d->cfg.content_allow, err);
    if (r < 0) {
        return r;
    }
    snprintf(d->pins_dir, sizeof(d->pins_dir), "%s/content", d->cfg.state_dir);
    if (mkdir(d->pins_dir, 0700) < 0 && errno != EEXIST) {
        return dfc_error_errno(err, -errno, "create `%s`", d->pins_dir);
    }
    if ((r = dfc_rpc_client_resolve(methods, DFC_RPC_N(methods), err)) < 0) {
        return r;
    }
    char target[PATH_MAX + 8];
    snprintf(target, sizeof(target), "unix:%s", d->daemon_socket);
    /* A dfdaemon that restarted is used as soon as it is back. */
    struct dfc_rpc_client_opts o = {.reconnect_wait_ms = 2000};
    return dfc_rpc_client_new(target, &o, &d->daemon, err);
}

void csi__content_done(struct csi_driver *d) {
    if (d->reconciler_started) {
        pthread_mutex_lock(&d->reconciler_mu);
        d->reconciler_stop = true;
        pthread_cond_signal(&d->reconciler_cv);
        pthread_mutex_unlock(&d->reconciler_mu);
        pthread_join(d->reconciler, NULL);
        d->reconciler_started = false;
    }
    dfc_rpc_client_free(d->daemon);
    d->daemon = NULL;
}

/* ---- records ---- */

static void record_path(const struct csi_driver *d, const char *pin_id, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", d->pins_dir, pin_id);
}

static int write_record(const struct csi_driver *d, const char *pin_id, const char *target,
                        struct dfc_error *err) {
    char path[PATH_MAX + NAME_MAX + 2];
    record_path(d, pin_id, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "write the record `%s`", path);
    }
    size_t len = strlen(target);
    bool ok = write(fd, target, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
    int e = errno;
    close(fd);
    if (!ok) {
        (void)unlink(path);
        return dfc_error_errno(err, -e, "write the record `%s`", path);
    }
    return 0;
}

static bool has_record(const struct csi_driver *d, const char *pin_id) {
    char path[PATH_MAX + NAME_MAX + 2];
    record_path(d, pin_id, path, sizeof(path));
    return access(path, F_OK) == 0;
}

static void drop_record(const struct csi_driver *d, const char *pin_id) {
    char path[PATH_MAX + NAME_MAX + 2];
    record_path(d, pin_id, path, sizeof(path));
    (void)unlink(path);
}

/* ---- dfdaemon ---- */

static int daemon_unpublish(struct csi_driver *d, const char *pin_id, struct dfc_error *err) {
    Dfc__Dfdaemon__V1__UnpublishContentVolumeRequest req =
        DFC__DFDAEMON__V1__UNPUBLISH_CONTENT_VOLUME_REQUEST__INIT;
    req.pin_id = (char *)pin_id;
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(d->daemon, &unpublish_m, &req.base, SHORT_RPC_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    return r;
}

/* Asks dfdaemon for the pin; *ret_path (the call's arena) is the directory it answers. */
static int daemon_publish(struct csi_driver *d, struct dfc_rpc_call *call, const char *pin_id,
                          const char *target, const struct csi_content_spec *spec, char **ret_path,
                          struct dfc_error *err) {
    Dfc__Dfdaemon__V1__ContentVolumeFile files[CSI_CONTENT_MAX_FILES];
    Dfc__Dfdaemon__V1__ContentVolumeFile *pfiles[CSI_CONTENT_MAX_FILES];
    for (size_t i = 0; i < spec->n; i++) {
        dfc__dfdaemon__v1__content_volume_file__init(&files[i]);
        files[i].name = (char *)spec->files[i].name;
        files[i].task_id = (char *)spec->files[i].task_id;
        pfiles[i] = &files[i];
    }
    int64_t timeout_ms = d->cfg.content_fetch_timeout_ms > 0 ? d->cfg.content_fetch_timeout_ms
                                                             : DEFAULT_FETCH_TIMEOUT_MS;
    Google__Protobuf__Duration fetch = GOOGLE__PROTOBUF__DURATION__INIT;
    fetch.seconds = timeout_ms / 1000;
    fetch.nanos = (int32_t)(timeout_ms % 1000) * 1000000;
    Dfc__Dfdaemon__V1__PublishContentVolumeRequest req =
        DFC__DFDAEMON__V1__PUBLISH_CONTENT_VOLUME_REQUEST__INIT;
    req.pin_id = (char *)pin_id;
    req.n_files = spec->n;
    req.files = pfiles;
    req.target_path = (char *)target;
    req.fetch_timeout = &fetch;
    ProtobufCMessage *resp_ = NULL;
    int r = dfc_rpc_unary(d->daemon, &publish_m, &req.base, timeout_ms + RPC_SLACK_MS, &resp_, err);
    if (r < 0) {
        /* The daemon's code passes through (DEADLINE_EXCEEDED and UNAVAILABLE are the CO's
         * cue to retry), its message prefixed. */
        dfc_error_prefix(err, "dfdaemon (%s): PublishContentVolume", d->daemon_socket);
        return r;
    }
    Dfc__Dfdaemon__V1__PublishContentVolumeResponse *resp = (void *)resp_;
    if (resp->path == NULL || resp->path[0] != '/') {
        r = dfc_error_set(err, DFC_E_INTERNAL,
                          "dfdaemon answered PublishContentVolume with no absolute path");
    } else if ((*ret_path = dfc_rpc_call_strdup(call, resp->path)) == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    } else {
        dfc_rpc_call_log_field(call, "verity", resp->verity ? "true" : "false");
    }
    dfc_rpc_msg_free(resp_);
    return r;
}

/* ---- publish ---- */

/* True when the directory fd refers to shows dir (a bind of it). */
static bool shows(int fd, const struct stat *dir) {
    struct stat a;
    return fstat(fd, &a) == 0 && a.st_dev == dir->st_dev && a.st_ino == dir->st_ino;
}

/* The target's part, the pin taken: mkdir, open, mount or find it mounted. *ret_shown is set
 * when the target shows the pin's directory afterwards. */
static int mount_pin(struct csi_driver *d, const struct csi_target *t, const char *dir,
                     bool *ret_shown, struct dfc_error *err) {
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        return dfc_error_set(err, DFC_E_INTERNAL,
                             "dfdaemon's directory `%s` is not a directory this plugin sees (is "
                             "the store mounted into the plugin at the same path?)",
                             dir);
    }
    bool created = false;
    int fd = csi__make_target(t, &created, err);
    if (fd < 0) {
        return fd;
    }
    struct csi_mount_state ms;
    int r = d->mount->state(t->parent_fd, fd, &ms);
    if (r < 0) {
        r = dfc_error_errno(err, r, "read the mount table");
    } else if (ms.count > 0) {
        if (!shows(fd, &st)) {
            r = dfc_error_set(err, -EEXIST, "target_path `%s` is already a mount of something else",
                              t->path);
        } else if (!ms.read_only) {
            r = dfc_error_set(err, -EEXIST, "target_path `%s` shows the volume read-write",
                              t->path);
        } else {
            *ret_shown = true; /* already done: kubelet re-publishes after restarts */
        }
    } else if ((r = d->mount->bind_content(dir, fd)) < 0) {
        if (created) {
            (void)unlinkat(t->parent_fd, t->base, AT_REMOVEDIR);
        }
        r = dfc_error_set(err, DFC_E_INTERNAL, "bind-mount `%s` read-only onto `%s`: %s", dir,
                          t->path, dfc_strerror(r));
    } else {
        *ret_shown = true;
    }
    close(fd);
    return r;
}

int csi__content_publish(struct csi_driver *d, struct dfc_rpc_call *call, const char *volume_id,
                         const struct csi_target *t, const struct csi_content_spec *spec,
                         struct dfc_error *err) {
    char pin_id[CSI_CONTENT_PIN_ID_LEN + 1];
    csi_content_pin_id(volume_id, t->path, pin_id);
    dfc_rpc_call_log_field(call, "pin_id", pin_id);
    int r = write_record(d, pin_id, t->path, err);
    char *dir = NULL;
    if (r == 0) {
        r = daemon_publish(d, call, pin_id, t->path, spec, &dir, err);
    }
    bool shown = false;
    if (r == 0) {
        r = mount_pin(d, t, dir, &shown, err);
    }
    if (r < 0 && !shown && r != -EEXIST) {
        /* Give the pin back: nothing shows it (a retry takes it again). An ALREADY_EXISTS pin
         * or target is someone's mount: left alone. */
        struct dfc_error ignored;
        if (daemon_unpublish(d, pin_id, &ignored) == 0) {
            drop_record(d, pin_id);
        }
    }
    return r;
}

int csi__content_release(struct csi_driver *d, struct dfc_rpc_call *call, const char *volume_id,
                         const char *target_path, struct dfc_error *err) {
    char pin_id[CSI_CONTENT_PIN_ID_LEN + 1];
    csi_content_pin_id(volume_id, target_path, pin_id);
    if (!has_record(d, pin_id)) {
        return 0; /* a socket volume, or a pin already released */
    }
    dfc_rpc_call_log_field(call, "pin_id", pin_id);
    int r = daemon_unpublish(d, pin_id, err);
    if (r < 0) {
        dfc_error_prefix(err, "dfdaemon (%s): UnpublishContentVolume %s", d->daemon_socket, pin_id);
        return r;
    }
    drop_record(d, pin_id);
    return 0;
}

/* ---- the reconciler ---- */

/* True when target_path (below the kubelet dir) shows dir as a mount (dir NULL: any mount);
 * false when it does not or cannot be read. */
static bool target_shows(struct csi_driver *d, const char *target_path, const char *dir) {
    struct csi_target t;
    struct dfc_error err;
    struct stat st;
    if ((dir != NULL && stat(dir, &st) < 0) ||
        csi_check_target(d->cfg.kubelet_dir, target_path, &t, &err) < 0) {
        return false;
    }
    bool yes = false;
    int fd = csi__open_target(&t, &err);
    if (fd >= 0) {
        struct csi_mount_state ms;
        yes = d->mount->state(t.parent_fd, fd, &ms) == 0 && ms.count > 0 &&
              (dir == NULL || shows(fd, &st));
        close(fd);
    }
    csi_target_close(&t);
    return yes;
}

/* Releases pin_id unless target_path shows dir (NULL: any mount), under the target's lock, so
 * a publish in flight on it is waited for. 1 when released. */
static int release_if_stale(struct csi_driver *d, const char *pin_id, const char *target_path,
                            const char *dir, struct dfc_error *err) {
    pthread_mutex_t *mu = csi__lock_for(d, target_path);
    pthread_mutex_lock(mu);
    int r = 0;
    if (!target_shows(d, target_path, dir)) {
        r = daemon_unpublish(d, pin_id, err);
        if (r == 0) {
            drop_record(d, pin_id);
            r = 1;
        }
    }
    pthread_mutex_unlock(mu);
    if (r == 1) {
        DFC_LOG(DFC_LOG_INFO, "csi.content_pin_released", "pin_id=%s target_path=%s reason=stale",
                pin_id, target_path);
    }
    return r;
}

int csi_content_reconcile(struct csi_driver *d, unsigned *ret_released, struct dfc_error *err) {
    *ret_released = 0;
    Dfc__Dfdaemon__V1__ListContentVolumesRequest req =
        DFC__DFDAEMON__V1__LIST_CONTENT_VOLUMES_REQUEST__INIT;
    ProtobufCMessage *resp_ = NULL;
    int r = dfc_rpc_unary(d->daemon, &list_m, &req.base, SHORT_RPC_MS, &resp_, err);
    if (r < 0) {
        return r;
    }
    Dfc__Dfdaemon__V1__ListContentVolumesResponse *resp = (void *)resp_;
    size_t kl = strlen(d->cfg.kubelet_dir);
    for (size_t i = 0; i < resp->n_volumes && r >= 0; i++) {
        const Dfc__Dfdaemon__V1__ContentVolume *v = resp->volumes[i];
        /* Only this plugin's pins: named as it names them, targets below its kubelet dir. */
        if (strncmp(v->pin_id, "cv-", 3) != 0 ||
            strncmp(v->target_path, d->cfg.kubelet_dir, kl) != 0 || v->target_path[kl] != '/') {
            continue;
        }
        r = release_if_stale(d, v->pin_id, v->target_path, v->path, err);
        *ret_released += r == 1;
    }
    dfc_rpc_msg_free(resp_);
    /* Records whose target carries no mount at all (the pin, if dfdaemon still has one, is
     * stale; unpublish of an unknown pin is OK). */
    DIR *dir = r >= 0 ? opendir(d->pins_dir) : NULL;
    struct dirent *e;
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        char path[PATH_MAX + NAME_MAX + 2], target[PATH_MAX + 2] = "";
        if (strncmp(e->d_name, "cv-", 3) != 0) {
            continue;
        }
        record_path(d, e->d_name, path, sizeof(path));
        FILE *f = fopen(path, "re");
        if (f != NULL && fgets(target, sizeof(target), f) != NULL) {
            target[strcspn(target, "\n")] = '\0';
        }
        if (f != NULL) {
            fclose(f);
        }
        if (target[0] == '/' && release_if_stale(d, e->d_name, target, NULL, err) == 1) {
            (*ret_released)++;
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return r < 0 ? r : 0;
}

static void *reconciler_main(void *arg) {
    struct csi_driver *d = arg;
    pthread_mutex_lock(&d->reconciler_mu);
    while (!d->reconciler_stop) {
        pthread_mutex_unlock(&d->reconciler_mu);
        struct dfc_error err = {0};
        unsigned released = 0;
        int r = csi_content_reconcile(d, &released, &err);
        if (r == 0) {
            DFC_LOG(DFC_LOG_INFO, "csi.content_reconciled", "released=%u", released);
        } else {
            DFC_LOG(DFC_LOG_DEBUG, "csi.content_reconcile_retry", "error=\"%s\"",
                    dfc_error_msg(&err));
        }
        pthread_mutex_lock(&d->reconciler_mu);
        if (r == 0 || r == -ENOSYS) { /* done, or a dfdaemon without content volumes */
            break;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += RECONCILE_RETRY_MS / 1000;
        while (!d->reconciler_stop &&
               pthread_cond_timedwait(&d->reconciler_cv, &d->reconciler_mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&d->reconciler_mu);
    return NULL;
}

int csi_driver_start_reconciler(struct csi_driver *d, struct dfc_error *err) {
    int r = pthread_create(&d->reconciler, NULL, reconciler_main, d);
    if (r != 0) {
        return dfc_error_errno(err, -r, "start the content pin reconciler");
    }
    d->reconciler_started = true;
    return 0;
}
