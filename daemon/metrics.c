/*
 * metrics.c - dfdaemon's metric table and the refresher of the store's gauges (metrics.h).
 *
 * One table (ROWS) declares every metric: its index, name, type, help and label. Updates are
 * single atomic adds on the registry's series (dfc/metrics.h), made where the event is known:
 * the import and export handlers, the GC thread's pass report, the P2P engine's piece workers,
 * the Vortex server.
 */
#include "metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/thread.h"

#define REFRESH_NS (2 * (int64_t)1000000000)

static const char *const sources[] = {"path", "fd", "stream"};
static const char *const import_modes[] = {"copy", "reflink", "hard_link", "stream"};
static const char *const export_sources[] = {"local", "peers"};
static const char *const export_modes[] = {"hard_link", "copy", "stream"};
static const char *const flags[] = {"false", "true"};
static const char *const watermarks[] = {"high", "low"};
static const char *const remote_peer[] = {"REMOTE_PEER"};
static const char *const persistent_cache[] = {"PERSISTENT_CACHE"};

static const struct dfc_metric_label l_source[] = {{"source", sources, DFD_SOURCE_N}};
static const struct dfc_metric_label l_import_mode[] = {{"mode", import_modes, DFD_IMPORT_HOW_N}};
static const struct dfc_metric_label l_export_source[] = {{"source", export_sources, 2}};
static const struct dfc_metric_label l_export_mode[] = {{"mode", export_modes, DFD_EXPORT_HOW_N}};
static const struct dfc_metric_label l_persistent[] = {{"persistent", flags, 2}};
static const struct dfc_metric_label l_watermark[] = {{"watermark", watermarks, 2}};
static const struct dfc_metric_label l_traffic[] = {{"type", remote_peer, 1},
                                                    {"task_type", persistent_cache, 1}};
static const struct dfc_metric_label l_task_type[] = {{"task_type", persistent_cache, 1}};

#define C DFC_METRIC_COUNTER
#define G DFC_METRIC_GAUGE
/* ROW(index, name without the prefix, type, labels (NULL: none), n_labels, help) */
#define ROWS(ROW)                                                                                  \
    ROW(M_IMPORTS, "upload_task_total", C, l_source, 1,                                            \
        "Imports (UploadPersistentCacheTask, ImportPersistentCacheTask) that stored a task, by "   \
        "where the bytes came from.")                                                              \
    ROW(M_IMPORT_FAILURES, "upload_task_failure_total", C, l_source, 1,                            \
        "Imports that failed, by where the bytes came from.")                                      \
    ROW(M_IMPORT_BYTES, "import_bytes_total", C, l_import_mode, 1,                                 \
        "Content bytes of successful imports, by how the store took them.")                        \
    ROW(M_EXPORTS, "download_task_total", C, l_export_source, 1,                                   \
        "Exports (DownloadPersistentCacheTask) that succeeded, by where the task was.")            \
    ROW(M_EXPORT_FAILURES, "download_task_failure_total", C, NULL, 0, "Exports that failed.")      \
    ROW(M_EXPORT_BYTES, "export_bytes_total", C, l_export_mode, 1,                                 \
        "Content bytes handed out by successful exports, by transfer mode.")                       \
    ROW(M_GC_EXPIRED, "gc_expired_tasks_total", C, NULL, 0, "Tasks deleted by GC for their TTL.")  \
    ROW(M_GC_EVICTED, "gc_evicted_tasks_total", C, NULL, 0,                                        \
        "Non-persistent tasks evicted by GC for disk pressure.")                                   \
    ROW(M_GC_EVICTED_BYTES, "gc_evicted_bytes_total", C, NULL, 0,                                  \
        "Content bytes of the tasks GC evicted for disk pressure.")                                \
    ROW(M_TASKS, "persistent_cache_tasks", G, l_persistent, 1,                                     \
        "Tasks in the store, by the persistent flag.")                                             \
    ROW(M_TASK_BYTES, "persistent_cache_task_bytes", G, l_persistent, 1,                           \
        "Content bytes of the tasks in the store, by the persistent flag.")                        \
    ROW(M_DISK_TOTAL, "disk_space_total", G, NULL, 0,                                              \
        "Capacity GC measures usage against, in bytes (gc.policy.diskThreshold, or the store's "   \
        "filesystem).")                                                                            \
    ROW(M_DISK_USED, "disk_usage_space_total", G, NULL, 0,                                         \
        "Bytes used, as GC measures them (cached content with gc.policy.diskThreshold, else the "  \
        "filesystem's used bytes).")                                                               \
    ROW(M_DISK_WATERMARK, "disk_threshold_bytes", G, l_watermark, 1,                               \
        "GC's watermarks in bytes: eviction starts at high and stops at low.")                     \
    ROW(M_P2P_BYTES, "download_traffic", C, l_traffic, 2,                                          \
        "Content bytes fetched from other peers over Vortex.")                                     \
    ROW(M_PIECES_FETCHED, "vortex_pieces_fetched_total", C, NULL, 0,                               \
        "Pieces fetched from parents over Vortex and written to a replica.")                       \
    ROW(M_CRC_FAILURES, "vortex_piece_crc_failures_total", C, NULL, 0,                             \
        "Pieces from parents refused for a CRC-32 mismatch or a malformed digest.")                \
    ROW(M_SERVED_BYTES, "upload_traffic", C, l_task_type, 1,                                       \
        "Content bytes served to other peers over Vortex.")                                        \
    ROW(M_SERVED_PIECES, "vortex_pieces_served_total", C, NULL, 0,                                 \
        "Pieces served to other peers over Vortex.")                                               \
    ROW(M_BUSY_ANSWERS, "vortex_pieces_busy_total", C, NULL, 0,                                    \
        "Piece requests answered Busy: the piece was being sent to another peer at the time.")

#define ROW_ENUM(idx, name, type, labels, n, help) idx,
enum { ROWS(ROW_ENUM) M_N };

struct dfd_metrics {
    struct dfc_metrics *registry;
    struct dfc_metric *m[M_N];
    struct dfd_storage *storage;
    struct dfd_gc_policy policy;
    struct dfc_thread thread;
    bool poked; /* under thread.mu */
};

/* Reads the store's totals and disk usage into the gauges (refresher thread). */
static void refresh(struct dfd_metrics *m) {
    struct dfd_storage_totals t;
    memset(&t, 0, sizeof(t));
    struct dfc_error err;
    if (dfd_storage_totals(m->storage, &t, &err) == 0) {
        for (size_t k = 0; k < 2; k++) {
            dfc_metric_gauge_set(m->m[M_TASKS], k, (int64_t)t.tasks[k]);
            dfc_metric_gauge_set(m->m[M_TASK_BYTES], k, (int64_t)t.bytes[k]);
        }
    }
    uint64_t total = 0, used = 0;
    if (m->policy.disk_threshold > 0) {
        total = m->policy.disk_threshold;
        used = t.bytes[0] + t.bytes[1]; /* what dfd_gc_disk_usage() counts, without a list */
    } else if (dfd_gc_disk_usage(m->storage, &m->policy, &total, &used, &err) < 0) {
        return;
    }
    dfc_metric_gauge_set(m->m[M_DISK_TOTAL], 0, (int64_t)total);
    dfc_metric_gauge_set(m->m[M_DISK_USED], 0, (int64_t)used);
    dfc_metric_gauge_set(m->m[M_DISK_WATERMARK], 0,
                         (int64_t)(total / 100 * m->policy.high_percent));
    dfc_metric_gauge_set(m->m[M_DISK_WATERMARK], 1, (int64_t)(total / 100 * m->policy.low_percent));
}

static void *refresher_main(void *arg) {
    struct dfd_metrics *m = arg;
    for (;;) {
        refresh(m);
        pthread_mutex_lock(&m->thread.mu);
        struct timespec until = dfc_deadline_after(REFRESH_NS);
        while (!m->thread.stop && !m->poked &&
               dfc_thread_wait_locked(&m->thread, &until) != -ETIMEDOUT) {
        }
        bool stop = m->thread.stop;
        m->poked = false;
        pthread_mutex_unlock(&m->thread.mu);
        if (stop) {
            return NULL;
        }
    }
}

int dfd_metrics_new(struct dfd_storage *storage, const struct dfd_gc_policy *policy,
                    struct dfd_metrics **ret, struct dfc_error *err) {
    struct dfd_metrics *m = calloc(1, sizeof(*m));
    if (m == NULL || dfc_metrics_new(&m->registry) < 0) {
        free(m);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    m->storage = storage;
    m->policy = *policy;
#define ROW_DESC(idx, nm, ty, lb, n, hl)                                                           \
    {.name = DFD_METRICS_PREFIX nm, .help = (hl), .type = (ty), .labels = (lb), .n_labels = (n)},
    static const struct dfc_metric_desc descs[M_N] = {ROWS(ROW_DESC)};
    for (size_t i = 0; i < M_N; i++) {
        int r = dfc_metrics_add(m->registry, &descs[i], &m->m[i], err);
        if (r < 0) {
            dfc_metrics_free(m->registry);
            free(m);
            return r;
        }
    }
    if (dfc_thread_start(&m->thread, refresher_main, m) < 0) {
        dfc_metrics_free(m->registry);
        free(m);
        return dfc_error_set(err, -EAGAIN, "cannot start the metrics refresher thread");
    }
    *ret = m;
    return 0;
}

void dfd_metrics_free(struct dfd_metrics *m) {
    if (m == NULL) {
        return;
    }
    dfc_thread_stop(&m->thread);
    dfc_metrics_free(m->registry);
    free(m);
}

struct dfc_metrics *dfd_metrics_registry(struct dfd_metrics *m) {
    return m != NULL ? m->registry : NULL;
}

void dfd_metrics_import(struct dfd_metrics *m, enum dfd_import_source src, bool ok,
                        enum dfd_import_how how, uint64_t bytes) {
    if (m == NULL) {
        return;
    }
    if (!ok) {
        dfc_metric_inc(m->m[M_IMPORT_FAILURES], src, 1);
        return;
    }
    dfc_metric_inc(m->m[M_IMPORTS], src, 1);
    dfc_metric_inc(m->m[M_IMPORT_BYTES], how, bytes);
    dfd_metrics_store_changed(m);
}

void dfd_metrics_export(struct dfd_metrics *m, bool ok, bool remote, bool linked, bool to_path,
                        bool streamed, uint64_t bytes) {
    if (m == NULL) {
        return;
    }
    if (!ok) {
        dfc_metric_inc(m->m[M_EXPORT_FAILURES], 0, 1);
        return;
    }
    dfc_metric_inc(m->m[M_EXPORTS], remote ? 1 : 0, 1);
    if (to_path) {
        dfc_metric_inc(m->m[M_EXPORT_BYTES], linked ? DFD_EXPORT_HOW_HARDLINK : DFD_EXPORT_HOW_COPY,
                       bytes);
    }
    if (streamed) {
        dfc_metric_inc(m->m[M_EXPORT_BYTES], DFD_EXPORT_HOW_STREAM, bytes);
    }
    if (remote) {
        dfd_metrics_store_changed(m); /* a replica was committed */
    }
}

void dfd_metrics_gc_pass(void *arg, const struct dfd_gc_report *rep) {
    struct dfd_metrics *m = arg;
    if (m == NULL) {
        return;
    }
    dfc_metric_inc(m->m[M_GC_EXPIRED], 0, rep->expired);
    dfc_metric_inc(m->m[M_GC_EVICTED], 0, rep->evicted);
    dfc_metric_inc(m->m[M_GC_EVICTED_BYTES], 0, rep->evicted_bytes);
    if (rep->expired > 0 || rep->evicted > 0) {
        dfd_metrics_store_changed(m);
    }
}

struct dfc_metric *dfd_metrics_fetched_pieces(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_PIECES_FETCHED] : NULL;
}

struct dfc_metric *dfd_metrics_fetched_bytes(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_P2P_BYTES] : NULL;
}

struct dfc_metric *dfd_metrics_crc_failures(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_CRC_FAILURES] : NULL;
}

struct dfc_metric *dfd_metrics_served_pieces(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_SERVED_PIECES] : NULL;
}

struct dfc_metric *dfd_metrics_busy_answers(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_BUSY_ANSWERS] : NULL;
}

struct dfc_metric *dfd_metrics_served_bytes(struct dfd_metrics *m) {
    return m != NULL ? m->m[M_SERVED_BYTES] : NULL;
}

void dfd_metrics_store_changed(struct dfd_metrics *m) {
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->thread.mu);
    m->poked = true;
    dfc_thread_wake_locked(&m->thread);
    pthread_mutex_unlock(&m->thread.mu);
}
