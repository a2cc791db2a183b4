/*
 * endpoints.h - the CSI plugin's HTTP endpoints (dfc/http.h): --metrics-address (GET /metrics,
 * plus /healthz and /readyz) and --health-address (/healthz, /readyz), each IP:PORT or empty
 * (off); one endpoint when both are the same address.
 *
 * Metrics (prefix dragonfly_csi_): the RPC layer's per-call ones (grpc_server_handled_total
 * by method and code: NodePublishVolume and NodeUnpublishVolume among them) and
 * published_volumes, the bind mounts of the socket dir below the kubelet dir, read from
 * /proc/self/mountinfo at scrape time (published.h).
 *
 * Readiness: the RPC server is serving and the socket dir exists (a directory).
 *
 * Ownership: the struct owns the registry and the endpoints; the strings are copied; server
 * is borrowed and must outlive csi_endpoints_stop_http().
 */
#ifndef CSI_ENDPOINTS_H
#define CSI_ENDPOINTS_H

#include <stdbool.h>

#include "dfc/error.h"

#define CSI_METRICS_PREFIX "dragonfly_csi_"

struct dfc_metrics;
struct dfc_rpc_server;
struct csi_endpoints;

/* Takes both addresses ("IP:PORT", "[IPv6]:PORT", "" = off; the command line's address rows
 * checked them, err names the flag) and, with a metrics address, declares the metrics. */
int csi_endpoints_new(const char *metrics_addr, const char *health_addr, const char *socket_dir,
                      const char *kubelet_dir, struct csi_endpoints **ret, struct dfc_error *err);

/* The registry for the RPC server's per-call metrics; NULL without a metrics address. */
struct dfc_metrics *csi_endpoints_registry(struct csi_endpoints *e);

/* Starts the endpoints; readiness reads server. */
int csi_endpoints_start(struct csi_endpoints *e, struct dfc_rpc_server *server,
                        struct dfc_error *err);

/* Stops the endpoints (before the server goes). Idempotent. */
void csi_endpoints_stop_http(struct csi_endpoints *e);

/* Stops and frees everything. NULL is fine. */
void csi_endpoints_free(struct csi_endpoints *e);

#endif /* CSI_ENDPOINTS_H */
