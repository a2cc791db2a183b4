/*
 * registration.c - pluginregistration.Registration for kubelet's plugin watcher (see
 * registration.h): a second, small server on its own socket, so the CSI socket serves only
 * csi.v1.
 */
#include "registration.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dfc/log.h"
#include "kubelet/pluginregistration.pb-c.h"

static int get_info(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                    ProtobufCMessage *resp_, struct dfc_error *err) {
    static char *versions[] = {CSI_REGISTRATION_VERSION};
    struct csi_registration *r = svc;
    Pluginregistration__PluginInfo *resp = (void *)resp_;
    resp->type = CSI_REGISTRATION_TYPE;
    resp->name = (char *)r->cfg.driver_name;
    resp->endpoint = (char *)r->cfg.endpoint;
    resp->n_supported_versions = 1;
    resp->supported_versions = versions;
    dfc_rpc_call_log_field(call, "endpoint", r->cfg.endpoint);
    return 0;
}

static int notify_registration_status(void *svc, struct dfc_rpc_call *call,
                                      const ProtobufCMessage *req_, ProtobufCMessage *resp,
                                      struct dfc_error *err) {
    struct csi_registration *r = svc;
    const Pluginregistration__RegistrationStatus *req = (const void *)req_;
    atomic_store(&r->status, req->plugin_registered ? 1 : -1);
    if (req->plugin_registered) {
        DFC_LOG(DFC_LOG_INFO, "csi.registered", "driver=%s endpoint=%s", r->cfg.driver_name,
                r->cfg.endpoint);
    } else {
        DFC_LOG(DFC_LOG_ERROR, "csi.registration_refused", "driver=%s error=\"%s\"",
                r->cfg.driver_name, req->error);
    }
    return 0;
}

static const struct dfc_rpc_method registration_methods[] = {
    DFC_RPC_METHOD("GetInfo", DFC_RPC_UNARY, pluginregistration__info_request,
                   pluginregistration__plugin_info, get_info),
    DFC_RPC_METHOD("NotifyRegistrationStatus", DFC_RPC_UNARY,
                   pluginregistration__registration_status,
                   pluginregistration__registration_status_response, notify_registration_status),
};

int csi_registration_start(struct csi_registration *r, const struct csi_registration_config *cfg,
                           struct dfc_error *err) {
    memset(r, 0, sizeof(*r));
    r->cfg = *cfg;
    if (cfg->dir == NULL || cfg->dir[0] != '/') {
        return dfc_error_set(err, -EINVAL, "kubelet-registration-dir must be an absolute path");
    }
    if (cfg->endpoint == NULL || cfg->endpoint[0] != '/') {
        return dfc_error_set(err, -EINVAL,
                             "kubelet-registration-path `%s` must be an absolute path (the CSI "
                             "socket as kubelet sees it)",
                             cfg->endpoint != NULL ? cfg->endpoint : "");
    }
    char sock[PATH_MAX];
    if ((size_t)snprintf(sock, sizeof(sock), "%s/%s-reg.sock", cfg->dir, cfg->driver_name) >=
        sizeof(sock)) {
        return dfc_error_set(err, -ENAMETOOLONG, "kubelet-registration-dir `%s` is too long",
                             cfg->dir);
    }
    /* Two workers: kubelet makes one call at a time. Small messages. */
    struct dfc_rpc_server_opts so = {.log_level_ok = DFC_LOG_INFO,
                                     .name = "registration",
                                     .max_workers = 2,
                                     .max_recv_msg = (size_t)64 << 10};
    int rc = dfc_rpc_server_new(&so, &r->server, err);
    if (rc == 0) {
        rc = dfc_rpc_server_add_service(r->server, &pluginregistration__registration__descriptor,
                                        registration_methods, DFC_RPC_N(registration_methods), r,
                                        err);
    }
    if (rc == 0) {
        rc = dfc_rpc_server_listen_unix(r->server, sock, 0600, -1, err);
        if (rc < 0) {
            dfc_error_prefix(err, "kubelet-registration-dir");
        }
    }
    if (rc == 0) {
        rc = dfc_rpc_server_start(r->server, err);
    }
    if (rc < 0) {
        csi_registration_stop(r);
        return rc;
    }
    DFC_LOG(DFC_LOG_INFO, "csi.registration_ready", "socket=%s endpoint=%s", sock, cfg->endpoint);
    return 0;
}

void csi_registration_stop(struct csi_registration *r) {
    dfc_rpc_server_free(r->server); /* removes the socket */
    r->server = NULL;
}
