/*
 * metrics.h - dfdaemon's metrics (prefix dragonfly_dfdaemon_), declared once in a registry
 * (dfc/metrics.h) that the metrics endpoint renders.
 *
 * Names follow the Dragonfly client's where a counterpart exists (upload_task_total for
 * imports, download_task_total for exports, download_traffic, upload_traffic,
 * disk_space_total, disk_usage_space_total); label sets are small enums, never task ids, tags,
 * applications or paths. The per-RPC metrics come from the RPC layer (rpc_server.h).
 *
 * Store figures (tasks and bytes by the persistent flag, disk usage) are gauges that a refresher
 * thread keeps: every 2 s, and soon after dfd_metrics_store_changed(), it runs one aggregate
 * query and a statvfs, so a scrape reads atomics and never waits for the store's lock.
 *
 * Every update function takes a NULL struct dfd_metrics and does nothing (metrics off).
 * Ownership: the struct owns its registry; storage and policy are borrowed by the refresher
 * and must outlive dfd_metrics_free().
 */
#ifndef DFD_METRICS_H
#define DFD_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/metrics.h"
#include "gc.h"
#include "storage/storage.h"

#define DFD_METRICS_PREFIX "dragonfly_dfdaemon_"

/* Where an import's bytes came from (upload_task_total, upload_task_failure_total). */
enum dfd_import_source {
    DFD_SOURCE_PATH,   /* UploadPersistentCacheTask with a path */
    DFD_SOURCE_FD,     /* the same with a descriptor passed on <socketPath>.fd */
    DFD_SOURCE_STREAM, /* ImportPersistentCacheTask: bytes over the socket */
    DFD_SOURCE_N,
};

/* How an import stored its bytes (import_bytes_total): dfd_import_mode, and stream. */
enum dfd_import_how {
    DFD_IMPORT_HOW_COPY,
    DFD_IMPORT_HOW_REFLINK,
    DFD_IMPORT_HOW_HARDLINK,
    DFD_IMPORT_HOW_STREAM,
    DFD_IMPORT_HOW_N,
};

/* How an export handed its bytes out (export_bytes_total). */
enum dfd_export_how {
    DFD_EXPORT_HOW_HARDLINK, /* output_path, a hard link */
    DFD_EXPORT_HOW_COPY,     /* output_path, a copy */
    DFD_EXPORT_HOW_STREAM,   /* need_piece_content: piece bytes in the response stream */
    DFD_EXPORT_HOW_N,
};

struct dfd_metrics;

/* Declares every metric in a new registry and starts the refresher over storage (measuring
 * disk usage as policy does). Free with dfd_metrics_free(). */
int dfd_metrics_new(struct dfd_storage *storage, const struct dfd_gc_policy *policy,
                    struct dfd_metrics **ret, struct dfc_error *err);

/* Stops the refresher and frees everything; nothing may update or scrape it any more. NULL is
 * fine. */
void dfd_metrics_free(struct dfd_metrics *m);

/* The registry, for the RPC servers' per-call metrics and the endpoint; NULL for NULL. */
struct dfc_metrics *dfd_metrics_registry(struct dfd_metrics *m);

/* An import ended: bytes stored as how, or failed (ok false: how and bytes unused). */
void dfd_metrics_import(struct dfd_metrics *m, enum dfd_import_source src, bool ok,
                        enum dfd_import_how how, uint64_t bytes);

/* An export ended: ok with the task's bytes handed out as how (output_path and a stream both
 * count when a call asked for both), remote when its bytes came from peers first. */
void dfd_metrics_export(struct dfd_metrics *m, bool ok, bool remote, bool linked, bool to_path,
                        bool streamed, uint64_t bytes);

/* A GC pass's deletions (a dfd_gc_pass_fn; arg is the struct dfd_metrics). */
void dfd_metrics_gc_pass(void *arg, const struct dfd_gc_report *rep);

/* The download engine's counters (download.h takes them as plain metrics): pieces fetched
 * from parents, their bytes (series 0), pieces refused for their CRC. */
struct dfc_metric *dfd_metrics_fetched_pieces(struct dfd_metrics *m);
struct dfc_metric *dfd_metrics_fetched_bytes(struct dfd_metrics *m);
struct dfc_metric *dfd_metrics_crc_failures(struct dfd_metrics *m);

/* The Vortex server's counters (vortex_server.h takes them as plain metrics). */
struct dfc_metric *dfd_metrics_served_pieces(struct dfd_metrics *m);
struct dfc_metric *dfd_metrics_served_bytes(struct dfd_metrics *m);
struct dfc_metric *dfd_metrics_busy_answers(struct dfd_metrics *m);

/* The store changed (a commit, a delete, a flag): the refresher reads it again soon. */
void dfd_metrics_store_changed(struct dfd_metrics *m);

#endif /* DFD_METRICS_H */
