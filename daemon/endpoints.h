/*
 * endpoints.h - dfdaemon's HTTP endpoints (dfc/http.h): metrics.server (GET /metrics, plus
 * /healthz and /readyz) and health.server (/healthz, /readyz). When both name the same ip:port,
 * one endpoint serves every route; port 0 turns one off.
 *
 * Readiness (/readyz 200) is three checks, each cheap and lock-free: the Unix-socket RPC server
 * is serving (its own state: started and not shutting down; not a call to itself), the socket
 * file at download.server.socketPath exists and is a socket, and the store's directories are
 * writable (dfd_storage_check_writable). Otherwise 503 with the first failing check's reason.
 *
 * Ownership: everything passed is borrowed and must outlive dfd_endpoints_stop().
 */
#ifndef DFD_ENDPOINTS_H
#define DFD_ENDPOINTS_H

#include "config.h"
#include "dfc/error.h"

struct dfc_metrics;
struct dfc_rpc_server;
struct dfd_storage;
struct dfd_endpoints;

/* Starts the endpoints the config asks for (none: *ret is still a valid handle). metrics may
 * be NULL (metrics.server.port 0). Errors name the config key and the address. */
int dfd_endpoints_start(const struct dfd_config *cfg, struct dfc_metrics *metrics,
                        struct dfc_rpc_server *server, struct dfd_storage *storage,
                        struct dfd_endpoints **ret, struct dfc_error *err);

/* Stops and frees them. NULL is fine. */
void dfd_endpoints_stop(struct dfd_endpoints *e);

#endif /* DFD_ENDPOINTS_H */
