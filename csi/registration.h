/*
 * registration.h - the plugin registering itself with kubelet, without node-driver-registrar:
 * kubelet's plugin watcher finds a Unix socket in its plugins_registry directory and calls
 * pluginregistration.Registration on it (GetInfo, then NotifyRegistrationStatus). Optional and
 * off by default (csi-plugin --kubelet-registration-dir); docs/k8s-e2e.md has the protocol.
 *
 * Borrowed: cfg's strings must outlive the registration. The socket
 * <dir>/<driver_name>-reg.sock is the registration's: made by csi_registration_start(),
 * removed by csi_registration_stop().
 */
#ifndef CSI_REGISTRATION_H
#define CSI_REGISTRATION_H

#include <stdatomic.h>

#include "dfc/error.h"
#include "dfc/rpc_server.h"

/* The only registration API version kubelet 1.20 and later speak for CSI plugins. */
#define CSI_REGISTRATION_VERSION "1.0.0"
/* PluginInfo.type kubelet expects from a CSI plugin. */
#define CSI_REGISTRATION_TYPE "CSIPlugin"

struct csi_registration_config {
    const char *dir;         /* kubelet's plugins_registry as this process sees it */
    const char *driver_name; /* PluginInfo.name */
    const char *endpoint;    /* the CSI socket's path as kubelet sees it: PluginInfo.endpoint */
};

struct csi_registration {
    struct csi_registration_config cfg;
    struct dfc_rpc_server *server;
    /* kubelet's last verdict: 0 none yet, 1 registered, -1 refused (logged with its error) */
    atomic_int status;
};

/* Checks cfg (absolute paths, a socket path that fits), then serves Registration on
 * <dir>/<driver_name>-reg.sock (mode 0600: only kubelet, as root, calls it). On failure
 * nothing is left behind. */
int csi_registration_start(struct csi_registration *r, const struct csi_registration_config *cfg,
                           struct dfc_error *err);

/* Stops serving and removes the socket (kubelet then deregisters the plugin). Idempotent;
 * fine on a zeroed struct. */
void csi_registration_stop(struct csi_registration *r);

#endif /* CSI_REGISTRATION_H */
