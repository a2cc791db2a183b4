/*
 * hostinfo.h - this host as the scheduler sees it (common.v2.Host): real figures from /proc
 * (CPU counts and percent, memory), statvfs of the storage dir (disk), /proc/net/dev (network
 * counters), build info; idc and location from the config. `cpu` is always present, as the
 * scheduler's validator requires.
 *
 * Ownership: dfd_hostinfo_fill() allocates the message and every string in it; free with
 * dfd_hostinfo_free(). Thread-safe (keeps the previous CPU sample under a lock for percents).
 */
#ifndef DFD_HOSTINFO_H
#define DFD_HOSTINFO_H

#include "config.h"
#include "dfc/error.h"

typedef struct Common__V2__Host Common__V2__Host;

/* Fills a Host for host_id: ip = host.ip, hostname, port = download_port =
 * upload.server.port, type 0 (normal), os/platform "linux", disable_shared, ... */
int dfd_hostinfo_fill(const struct dfd_config *cfg, const char *host_id, Common__V2__Host **ret,
                      struct dfc_error *err);

void dfd_hostinfo_free(Common__V2__Host *host);

#endif /* DFD_HOSTINFO_H */
