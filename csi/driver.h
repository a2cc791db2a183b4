/*
 * driver.h - the CSI driver: Identity, Node and a minimal Controller (csi.v1), publishing the
 * dfdaemon socket directory into pods by bind mount (socket volumes), or cached tasks as a
 * read-only directory the node's dfdaemon lays out and pins (content volumes,
 * docs/content-volumes.md).
 *
 * Borrowed: the config strings, the allow rules and the mount ops must outlive the driver.
 * Owned: the dfdaemon client and the reconciler thread (csi_driver_done).
 */
#ifndef CSI_DRIVER_H
#define CSI_DRIVER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "content.h"
#include "dfc/error.h"
#include "dfc/rpc_server.h"
#include "mount.h"

#define CSI_DEFAULT_DRIVER_NAME "uds.csi.dragonflyoss.io"
#define CSI_LOCK_STRIPES        64

struct csi_config {
    const char *driver_name;
    const char *version;
    const char *node_id;
    const char *socket_dir;  /* the directory published into pods (config only) */
    const char *kubelet_dir; /* target paths must lie below it */
    const char *state_dir;   /* the controller's name -> capacity records */
    bool require_readonly;
    bool probe_dfdaemon;                    /* Probe also connects to <socket_dir>/dfdaemon.sock */
    const char *dfdaemon_socket;            /* NULL or "": <socket_dir>/dfdaemon.sock */
    struct csi_content_rules content_allow; /* who may mount content volumes (content.h) */
    int64_t content_fetch_timeout_ms;       /* how long a publish waits for a fetch; 0: 60 s */
};

struct dfc_rpc_client;

struct csi_driver {
    struct csi_config cfg;
    const struct csi_mount_ops *mount;
    /* Publishes and unpublishes of one target are serialized: a stripe per path hash. */
    pthread_mutex_t locks[CSI_LOCK_STRIPES];
    pthread_mutex_t records_mu;    /* the controller's volume records */
    char daemon_socket[PATH_MAX];  /* dfdaemon's socket (content volumes) */
    char pins_dir[PATH_MAX];       /* <state_dir>/content: one record per content pin */
    struct dfc_rpc_client *daemon; /* its client; thread-safe */
    /* The reconciler (content_node.c): releases pins whose mount is gone, once, at start. */
    pthread_t reconciler;
    bool reconciler_started;
    bool reconciler_stop; /* under reconciler_mu */
    pthread_mutex_t reconciler_mu;
    pthread_cond_t reconciler_cv;
};

/* Validates the config (driver name rules, absolute dirs) and prepares the state dir. */
int csi_driver_init(struct csi_driver *d, const struct csi_config *cfg,
                    const struct csi_mount_ops *mount, struct dfc_error *err);
void csi_driver_done(struct csi_driver *d);

/* Starts the thread that lists dfdaemon's content pins and releases those whose target no
 * longer carries the mount (kubelet lost the volume while the plugin was away): it retries
 * every 2 s until dfdaemon answers once, then ends. csi_driver_done() stops it. */
int csi_driver_start_reconciler(struct csi_driver *d, struct dfc_error *err);

/* One reconciling pass (what the thread does): releases stale pins, sets *ret_released to how
 * many. Negative code when dfdaemon cannot be asked. */
int csi_content_reconcile(struct csi_driver *d, unsigned *ret_released, struct dfc_error *err);

/* Registers Identity, Node and Controller on server. */
int csi_driver_register(struct csi_driver *d, struct dfc_rpc_server *server, struct dfc_error *err);

/* The driver name rule csi-sanity applies: 1-63 chars, [A-Za-z0-9.-_], starting and ending
 * with a letter. */
bool csi_valid_driver_name(const char *name);

/* Volume ids are "dfc-" + 32 hex of SHA-256(name) + 8 hex of a check over those: an id this
 * driver never made is recognizable without any state. */
#define CSI_VOLUME_ID_LEN 44
void csi_volume_id(const char *name, char out[CSI_VOLUME_ID_LEN + 1]);
bool csi_volume_id_valid(const char *id);

#endif /* CSI_DRIVER_H */
