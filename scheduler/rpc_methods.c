/*
 * rpc_methods.c - the scheduler.v2.Scheduler method table: which handler (rpc_host.c,
 * rpc_task.c, rpc_peer.c) answers which method, registered on the server (service.h). Apart
 * from service.c so that the handlers, which use service.c's helpers, are never called back
 * from it.
 */
#include "service.h"

#include "google/protobuf/empty.pb-c.h"

#define U DFC_RPC_UNARY

static const struct dfc_rpc_method methods[] = {
    DFC_RPC_METHOD("AnnounceHost", U, scheduler__v2__announce_host_request, google__protobuf__empty,
                   sched__announce_host),
    DFC_RPC_METHOD("DeleteHost", U, scheduler__v2__delete_host_request, google__protobuf__empty,
                   sched__delete_host),
    DFC_RPC_METHOD("ListHosts", U, scheduler__v2__list_hosts_request,
                   scheduler__v2__list_hosts_response, sched__list_hosts),
    DFC_RPC_METHOD("UploadPersistentCacheTaskStarted", U,
                   scheduler__v2__upload_persistent_cache_task_started_request,
                   google__protobuf__empty, sched__upload_started),
    DFC_RPC_METHOD("UploadPersistentCacheTaskFinished", U,
                   scheduler__v2__upload_persistent_cache_task_finished_request,
                   common__v2__persistent_cache_task, sched__upload_finished),
    DFC_RPC_METHOD("UploadPersistentCacheTaskFailed", U,
                   scheduler__v2__upload_persistent_cache_task_failed_request,
                   google__protobuf__empty, sched__upload_failed),
    DFC_RPC_METHOD("StatPersistentCacheTask", U, scheduler__v2__stat_persistent_cache_task_request,
                   common__v2__persistent_cache_task, sched__stat_task),
    DFC_RPC_METHOD("DeletePersistentCacheTask", U,
                   scheduler__v2__delete_persistent_cache_task_request, google__protobuf__empty,
                   sched__delete_task),
    DFC_RPC_METHOD("StatPersistentCachePeer", U, scheduler__v2__stat_persistent_cache_peer_request,
                   common__v2__persistent_cache_peer, sched__stat_peer),
    DFC_RPC_METHOD("DeletePersistentCachePeer", U,
                   scheduler__v2__delete_persistent_cache_peer_request, google__protobuf__empty,
                   sched__delete_peer),
    DFC_RPC_METHOD("AnnouncePersistentCachePeer", DFC_RPC_BIDI_STREAM,
                   scheduler__v2__announce_persistent_cache_peer_request,
                   scheduler__v2__announce_persistent_cache_peer_response, sched__announce_peer),
};

int sched_service_register(struct sched_service *svc, struct dfc_rpc_server *server,
                           struct dfc_error *err) {
    return dfc_rpc_server_add_service(server, &scheduler__v2__scheduler__descriptor, methods,
                                      DFC_RPC_N(methods), svc, err);
}
