/*
 * service.h - the dfdaemon RPC services on the Unix socket: dfdaemon.v2.DfdaemonDownload, the
 * persistent-cache methods of dfdaemon.v2.DfdaemonUpload (so `dfcache rm` can delete over the
 * socket), and this project's dfc.dfdaemon.v1.DfdaemonImport (streamed import),
 * dfc.dfdaemon.v1.DfdaemonInspect (what `dfcache stat` shows) and dfc.dfdaemon.v1.DfdaemonVolume
 * (the pins of content volumes, rpc_volume.c).
 *
 * Handlers are thin: validate (validate.h), act as the caller on the paths it names (caller.h,
 * pathfd.h, export.h), call the storage engine, convert the result. Borrowed: storage, config; they
 * must outlive the service.
 */
#ifndef DFD_SERVICE_H
#define DFD_SERVICE_H

#include <stdatomic.h>

#include "config.h"
#include "dfc/clock.h"
#include "dfc/rpc_server.h"
#include "dfc/stream_cap.h"
#include "storage/storage.h"

struct dfd_fdpass;
struct dfd_p2p;
struct dfd_sched;
struct dfd_vfetch;

struct dfd_service {
    struct dfd_storage *storage;
    const struct dfd_config *cfg;
    struct dfc_clock clock;
    char host_id[320];
    /* Peer to peer (NULL when standalone), borrowed, set by daemon.c before serving: the
     * scheduler client and the download engine an export of a non-local task uses. */
    struct dfd_sched *sched;
    struct dfd_p2p *p2p;
    /* The background downloads of content-volume publishes (volume_fetch.h), borrowed, set by
     * daemon.c with p2p; NULL when standalone (a missing task is then NOT_FOUND). */
    struct dfd_vfetch *vfetch;
    /* The sibling socket's token table (fdpass.h), borrowed, set by daemon.c before serving;
     * NULL: fd imports are refused. */
    struct dfd_fdpass *fdpass;
    /* The daemon's metrics (metrics.h), borrowed, set by daemon.c before serving; NULL: off. */
    struct dfd_metrics *metrics;
    /* SyncHost streams per remote on TCP (upload.server.maxSyncHostStreamsPerHost), borrowed,
     * set by daemon.c before serving; NULL: not capped. */
    struct dfc_stream_cap *sync_host_cap;
    /* SyncPersistentCachePieces streams that wait for pieces of a download (rpc_upload.c): per
     * remote (upload.server.maxSyncPiecesStreamsPerHost), borrowed, set by daemon.c before
     * serving, NULL: not capped; and in all, at most sync_pieces_max_waiting (0: no bound),
     * counted in sync_pieces_waiting. */
    struct dfc_stream_cap *sync_pieces_cap;
    unsigned sync_pieces_max_waiting;
    atomic_uint sync_pieces_waiting;
};

int dfd_service_init(struct dfd_service *svc, struct dfd_storage *storage,
                     const struct dfd_config *cfg, const struct dfc_clock *clock,
                     struct dfc_error *err);

/* Registers the five services on server. */
int dfd_service_register(struct dfd_service *svc, struct dfc_rpc_server *server,
                         struct dfc_error *err);

/* Registers dfdaemon.v2.DfdaemonUpload as served on TCP to other peers and the scheduler
 * (rpc_upload.c) on server; svc->sched and svc->p2p must be set. */
int dfd_service_register_tcp(struct dfd_service *svc, struct dfc_rpc_server *server,
                             struct dfc_error *err);

/* ---- shared by the handler files ---- */

struct dfd_import_params;
struct dfd_task_meta;
typedef struct Common__V2__PersistentCacheTask Common__V2__PersistentCacheTask;
typedef struct Google__Protobuf__Duration Google__Protobuf__Duration;

/* Validates the import fields common to the path and stream imports into *ret (strings
 * borrowed from the request). ttl may be NULL (the configured default applies). */
int dfd__import_params(const struct dfd_service *svc, const char *content_for_id,
                       uint64_t replica_count, const char *tag, const char *application,
                       bool has_piece_length, uint64_t piece_length,
                       const Google__Protobuf__Duration *ttl, struct dfd_import_params *ret,
                       struct dfc_error *err);

/* Fills a PersistentCacheTask from a stored task (memory from the call's arena). */
int dfd__task_to_proto(struct dfc_rpc_call *call, const struct dfd_task_meta *t,
                       Common__V2__PersistentCacheTask *out, struct dfc_error *err);

/* Copies the scheduler's answer st into out, strings and messages in the call's arena. */
int dfd__sched_task_to_proto(struct dfc_rpc_call *call, const Common__V2__PersistentCacheTask *st,
                             Common__V2__PersistentCacheTask *out, struct dfc_error *err);

/* Same for a StatLocalPersistentCacheTaskResponse. */
typedef struct Dfdaemon__V2__StatLocalPersistentCacheTaskResponse
    Dfdaemon__V2__StatLocalPersistentCacheTaskResponse;
int dfd__task_to_local(struct dfc_rpc_call *call, const struct dfd_task_meta *t,
                       Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *out,
                       struct dfc_error *err);

/* Validates a request's task_id and loads the task (-ENOENT when absent, with the message
 * "persistent cache task ID not found"); free the result with dfd_task_meta_done(). */
int dfd__load_task(const struct dfd_service *svc, const char *task_id, struct dfd_task_meta *ret,
                   struct dfc_error *err);

int64_t dfd__now(const struct dfd_service *svc);

/* StatPersistentCacheTask from the local store (rpc_download.c): the handler of both
 * DfdaemonUpload tables (Unix socket and TCP), and DfdaemonDownload's without a scheduler. */
int dfd__stat_task(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                   ProtobufCMessage *resp, struct dfc_error *err);

/* Rows of the persistent-cache methods more than one table serves (DfdaemonDownload and both
 * DfdaemonUpload tables, Unix socket and TCP), with the handler fn; the descriptors come from
 * dragonfly/dfdaemon.pb-c.h, common.pb-c.h and google/protobuf/empty.pb-c.h. */
#define DFD_METHOD_DOWNLOAD_TASK(fn)                                                               \
    DFC_RPC_METHOD("DownloadPersistentCacheTask", DFC_RPC_SERVER_STREAM,                           \
                   dfdaemon__v2__download_persistent_cache_task_request,                           \
                   dfdaemon__v2__download_persistent_cache_task_response, fn)
#define DFD_METHOD_STAT_TASK(fn)                                                                   \
    DFC_RPC_METHOD("StatPersistentCacheTask", DFC_RPC_UNARY,                                       \
                   dfdaemon__v2__stat_persistent_cache_task_request,                               \
                   common__v2__persistent_cache_task, fn)
#define DFD_METHOD_UPDATE_TASK(fn)                                                                 \
    DFC_RPC_METHOD("UpdatePersistentCacheTask", DFC_RPC_UNARY,                                     \
                   dfdaemon__v2__update_persistent_cache_task_request, google__protobuf__empty,    \
                   fn)
#define DFD_METHOD_DELETE_TASK(fn)                                                                 \
    DFC_RPC_METHOD("DeletePersistentCacheTask", DFC_RPC_UNARY,                                     \
                   dfdaemon__v2__delete_persistent_cache_task_request, google__protobuf__empty,    \
                   fn)

/* The method tables of each file. */
extern const struct dfc_rpc_method dfd__download_methods[];
extern const size_t dfd__n_download_methods;
extern const struct dfc_rpc_method dfd__upload_methods[];
extern const size_t dfd__n_upload_methods;
extern const struct dfc_rpc_method dfd__import_methods[];
extern const size_t dfd__n_import_methods;
extern const struct dfc_rpc_method dfd__inspect_methods[];
extern const size_t dfd__n_inspect_methods;
extern const struct dfc_rpc_method dfd__volume_methods[];
extern const size_t dfd__n_volume_methods;
extern const struct dfc_rpc_method dfd__tcp_upload_methods[];
extern const size_t dfd__n_tcp_upload_methods;

#endif /* DFD_SERVICE_H */
