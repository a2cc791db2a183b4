/*
 * driver.c - driver set-up, the Identity service, volume ids, and service registration.
 * The Node service is in node.c, the Controller in controller.c.
 */
#include "driver.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "csi/csi.pb-c.h"
#include "dfc/digest.h"
#include "driver_internal.h"

bool csi_valid_driver_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 63 || !isalpha((unsigned char)name[0]) ||
        !isalpha((unsigned char)name[n - 1])) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)name[i]) && !strchr("-._", name[i])) {
            return false;
        }
    }
    return true;
}

void csi_volume_id(const char *name, char out[CSI_VOLUME_ID_LEN + 1]) {
    char h[DFC_SHA256_HEX_LEN + 1], check[DFC_SHA256_HEX_LEN + 1], salted[64];
    dfc_sha256_hex(name, strlen(name), h);
    snprintf(salted, sizeof(salted), "dfc-csi:%.32s", h);
    dfc_sha256_hex(salted, strlen(salted), check);
    snprintf(out, CSI_VOLUME_ID_LEN + 1, "dfc-%.32s%.8s", h, check);
}

bool csi_volume_id_valid(const char *id) {
    if (strlen(id) != CSI_VOLUME_ID_LEN || strncmp(id, "dfc-", 4) != 0) {
        return false;
    }
    char check[DFC_SHA256_HEX_LEN + 1], salted[64];
    snprintf(salted, sizeof(salted), "dfc-csi:%.32s", id + 4);
    dfc_sha256_hex(salted, strlen(salted), check);
    return strncmp(id + 36, check, 8) == 0;
}

int csi_driver_init(struct csi_driver *d, const struct csi_config *cfg,
                    const struct csi_mount_ops *mount, struct dfc_error *err) {
    memset(d, 0, sizeof(*d));
    d->cfg = *cfg;
    d->mount = mount;
    if (!csi_valid_driver_name(cfg->driver_name)) {
        return dfc_error_set(err, -EINVAL,
                             "driver name `%s` must be 1-63 characters of letters, digits, "
                             "'-', '.', '_', starting and ending with a letter",
                             cfg->driver_name);
    }
    const char *dirs[][2] = {{"socket dir", cfg->socket_dir},
                             {"kubelet dir", cfg->kubelet_dir},
                             {"state dir", cfg->state_dir}};
    for (size_t i = 0; i < 3; i++) {
        if (dirs[i][1] == NULL || dirs[i][1][0] != '/') {
            return dfc_error_set(err, -EINVAL, "the %s must be an absolute path", dirs[i][0]);
        }
    }
    if (mkdir(cfg->state_dir, 0700) < 0 && errno != EEXIST) {
        return dfc_error_errno(err, -errno, "create the state dir `%s`", cfg->state_dir);
    }
    for (int i = 0; i < CSI_LOCK_STRIPES; i++) {
        pthread_mutex_init(&d->locks[i], NULL);
    }
    pthread_mutex_init(&d->records_mu, NULL);
    pthread_mutex_init(&d->reconciler_mu, NULL);
    pthread_cond_init(&d->reconciler_cv, NULL);
    int r = csi__content_init(d, err);
    if (r < 0) {
        csi_driver_done(d);
    }
    return r;
}

void csi_driver_done(struct csi_driver *d) {
    csi__content_done(d);
    for (int i = 0; i < CSI_LOCK_STRIPES; i++) {
        pthread_mutex_destroy(&d->locks[i]);
    }
    pthread_mutex_destroy(&d->records_mu);
    pthread_mutex_destroy(&d->reconciler_mu);
    pthread_cond_destroy(&d->reconciler_cv);
}

/* ---- Identity ---- */

static int get_plugin_info(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                           ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    Csi__V1__GetPluginInfoResponse *resp = (void *)resp_;
    resp->name = (char *)d->cfg.driver_name;
    resp->vendor_version = (char *)d->cfg.version;
    return 0;
}

static int get_plugin_capabilities(void *drv, struct dfc_rpc_call *call,
                                   const ProtobufCMessage *req, ProtobufCMessage *resp_,
                                   struct dfc_error *err) {
    static Csi__V1__PluginCapability__Service service = {
        PROTOBUF_C_MESSAGE_INIT(&csi__v1__plugin_capability__service__descriptor),
        CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE};
    static Csi__V1__PluginCapability cap = {
        PROTOBUF_C_MESSAGE_INIT(&csi__v1__plugin_capability__descriptor),
        CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE,
        {.service = &service}};
    static Csi__V1__PluginCapability *caps[] = {&cap};
    Csi__V1__GetPluginCapabilitiesResponse *resp = (void *)resp_;
    resp->n_capabilities = 1;
    resp->capabilities = caps;
    return 0;
}

/* Ready while the directory to publish exists (and, optionally, dfdaemon answers on it). */
static bool ready(const struct csi_driver *d) {
    struct stat st;
    if (stat(d->cfg.socket_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        return false;
    }
    if (!d->cfg.probe_dfdaemon) {
        return true;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/dfdaemon.sock", d->cfg.socket_dir) >=
        (int)sizeof(sa.sun_path)) {
        return false;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0) {
        close(fd);
    }
    return ok;
}

static int probe(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                 ProtobufCMessage *resp_, struct dfc_error *err) {
    Csi__V1__ProbeResponse *resp = (void *)resp_;
    resp->ready = (Google__Protobuf__BoolValue *)dfc_rpc_call_new_msg(
        call, &google__protobuf__bool_value__descriptor);
    if (resp->ready == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    resp->ready->value = ready(drv);
    return 0;
}

static const struct dfc_rpc_method identity_methods[] = {
    DFC_RPC_METHOD("GetPluginInfo", DFC_RPC_UNARY, csi__v1__get_plugin_info_request,
                   csi__v1__get_plugin_info_response, get_plugin_info),
    DFC_RPC_METHOD("GetPluginCapabilities", DFC_RPC_UNARY, csi__v1__get_plugin_capabilities_request,
                   csi__v1__get_plugin_capabilities_response, get_plugin_capabilities),
    DFC_RPC_METHOD("Probe", DFC_RPC_UNARY, csi__v1__probe_request, csi__v1__probe_response, probe),
};

int csi_driver_register(struct csi_driver *d, struct dfc_rpc_server *server,
                        struct dfc_error *err) {
    int r = dfc_rpc_server_add_service(server, &csi__v1__identity__descriptor, identity_methods,
                                       DFC_RPC_N(identity_methods), d, err);
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &csi__v1__node__descriptor, csi__node_methods,
                                       csi__n_node_methods, d, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &csi__v1__controller__descriptor,
                                       csi__controller_methods, csi__n_controller_methods, d, err);
    }
    return r;
}
