/*
 * driver_internal.h - what driver.c, node.c and controller.c share. Private to csi/.
 */
#ifndef CSI_DRIVER_INTERNAL_H
#define CSI_DRIVER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "dfc/rpc_server.h"

typedef struct Csi__V1__VolumeCapability Csi__V1__VolumeCapability;

extern const struct dfc_rpc_method csi__node_methods[];
extern const size_t csi__n_node_methods;
extern const struct dfc_rpc_method csi__controller_methods[];
extern const size_t csi__n_controller_methods;

struct csi_driver;
struct csi_target;
struct csi_content_spec;

/* The stripe lock of a target's canonical path. */
pthread_mutex_t *csi__lock_for(struct csi_driver *d, const char *path);

/* Opens the target beneath its parent descriptor, at the top of whatever is mounted there:
 * the descriptor, -ENOENT (err untouched), or another negative code with err set. */
int csi__open_target(const struct csi_target *t, struct dfc_error *err);

/* Makes the target directory beneath its parent descriptor (*ret_created: whether this call
 * made it) and opens it as csi__open_target; a parent or target removed meanwhile is
 * FAILED_PRECONDITION. The descriptor, or a negative code with err set. */
int csi__make_target(const struct csi_target *t, bool *ret_created, struct dfc_error *err);

/* content_node.c: the dfdaemon client and the pins dir; its end. */
int csi__content_init(struct csi_driver *d, struct dfc_error *err);
void csi__content_done(struct csi_driver *d);

/* Publishes a content volume on t (its lock held): pins at dfdaemon, bind-mounts the answered
 * directory read-only. */
int csi__content_publish(struct csi_driver *d, struct dfc_rpc_call *call, const char *volume_id,
                         const struct csi_target *t, const struct csi_content_spec *spec,
                         struct dfc_error *err);

/* After an unpublish took the mounts off target_path (canonical; its lock held): releases the
 * content pin of (volume_id, target_path) when this plugin recorded one. 0 when there is none. */
int csi__content_release(struct csi_driver *d, struct dfc_rpc_call *call, const char *volume_id,
                         const char *target_path, struct dfc_error *err);

/* Strings a CO sends are limited to 128 bytes unless the spec says otherwise. */
#define CSI_STRING_MAX 128

/* Checks one volume capability: present, a mount (not block) with an access mode set.
 * field names it in messages ("volume_capability", "volume_capabilities[2]"). */
int csi__check_capability(const Csi__V1__VolumeCapability *cap, const char *field,
                          struct dfc_error *err);

#endif /* CSI_DRIVER_INTERNAL_H */
