/*
 * dfdaemon_client.h - the scheduler's calls to a dfdaemon's DfdaemonUpload service, as upstream
 * makes them for replica placement and deletes (docs/dragonfly-compat.md, "Scheduler on
 * Redis"): plain TCP to host.ip:host.download_port, one channel per call, every call bounded by
 * a deadline.
 *
 *   UpdatePersistentCacheTask   {task_id, persistent = true, remote_ip}   promote a cached copy
 *   DownloadPersistentCacheTask {task_id, persistent = true, tag, application, remote_ip}
 *                               pull a new persistent copy; the stream is drained to its end
 *   DeletePersistentCacheTask   {task_id, remote_ip}                      drop a copy
 *   StatPersistentCacheTask     {task_id, remote_ip}                      is the copy there
 *
 * The methods are DFC_RPC_CLIENT_METHOD rows resolved once, at start-up
 * (sched_dfdaemon_methods_resolve from sched_placement_new), so a name missing from the .proto
 * fails there. remote_ip is the scheduler's advertise IP; NULL or "" leaves it unset.
 *
 * Errors: the dfdaemon's status mapped back through DFC_ERRNO_MAP, err naming the address and
 * the method ("dfdaemon 10.0.0.7:4000 DownloadPersistentCacheTask: ..."). Thread-safe.
 */
#ifndef SCHED_DFDAEMON_CLIENT_H
#define SCHED_DFDAEMON_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "model.h"

struct sched_dfdaemon_methods {
    struct dfc_rpc_client_method update, download, delete_task, stat_task;
    /* How calls reach the nodes: TLS policy and files (peer.tls.*); zero = plaintext. Set by
     * the owner after sched_dfdaemon_methods_resolve(); the paths are borrowed. */
    struct dfc_rpc_client_opts client;
};

int sched_dfdaemon_methods_resolve(struct sched_dfdaemon_methods *m, struct dfc_error *err);

/* "ip:port", "[v6]:port" for host's download port; -EINVAL for an empty ip or a port outside
 * 1..65535, -ENAMETOOLONG when buf is too small. */
int sched_dfdaemon_target(const struct sched_host *host, char *buf, size_t size,
                          struct dfc_error *err);

int sched_dfdaemon_update(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                          const char *task_id, bool persistent, const char *remote_ip,
                          int64_t timeout_ms, struct dfc_error *err);

/* A handle that lets another thread cut a pull short (engine shutdown). */
struct sched_dfdaemon_cancel {
    pthread_mutex_t mu;
    struct dfc_rpc_stream *st; /* the pull in progress, or NULL */
    bool cancelled;            /* sticky: later pulls end at once */
};
void sched_dfdaemon_cancel_init(struct sched_dfdaemon_cancel *c);
void sched_dfdaemon_cancel_fire(struct sched_dfdaemon_cancel *c);
void sched_dfdaemon_cancel_done(struct sched_dfdaemon_cancel *c);

/* Returns once the dfdaemon ended the stream: 0 when it ended OK; -ECANCELED once cancel (may
 * be NULL) fired. */
int sched_dfdaemon_download(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                            const struct sched_task *task, const char *remote_ip,
                            int64_t timeout_ms, struct sched_dfdaemon_cancel *cancel,
                            struct dfc_error *err);

int sched_dfdaemon_delete(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                          const char *task_id, const char *remote_ip, int64_t timeout_ms,
                          struct dfc_error *err);

/* The dfdaemon's own view of its copy of task_id (its local store, not the cluster's: the
 * upload port's StatPersistentCacheTask answers from the store): 0 with *content_length and
 * *piece_count of the stored task; -ENOENT when the host holds no committed copy; any other
 * error when the call failed (unreachable, timed out, refused). */
int sched_dfdaemon_stat(const struct sched_dfdaemon_methods *m, const struct sched_host *host,
                        const char *task_id, const char *remote_ip, int64_t timeout_ms,
                        uint64_t *content_length, uint32_t *piece_count, struct dfc_error *err);

#endif /* SCHED_DFDAEMON_CLIENT_H */
