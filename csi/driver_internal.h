/*
 * driver_internal.h - what driver.c, node.c and controller.c share. Private to csi/.
 */
#ifndef CSI_DRIVER_INTERNAL_H
#define CSI_DRIVER_INTERNAL_H

#include <stddef.h>

#include "dfc/rpc_server.h"

typedef struct Csi__V1__VolumeCapability Csi__V1__VolumeCapability;

extern const struct dfc_rpc_method csi__node_methods[];
extern const size_t csi__n_node_methods;
extern const struct dfc_rpc_method csi__controller_methods[];
extern const size_t csi__n_controller_methods;

/* Strings a CO sends are limited to 128 bytes unless the spec says otherwise. */
#define CSI_STRING_MAX 128

/* Checks one volume capability: present, a mount (not block) with an access mode set.
 * field names it in messages ("volume_capability", "volume_capabilities[2]"). */
int csi__check_capability(const Csi__V1__VolumeCapability *cap, const char *field,
                          struct dfc_error *err);

#endif /* CSI_DRIVER_INTERNAL_H */
