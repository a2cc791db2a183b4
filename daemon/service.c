/*
 * service.c - wiring of the dfdaemon services and what their handlers share: import
 * parameters, the task conversion, the clock.
 */
#include "service.h"

#include <stdio.h>
#include <string.h>

#include "dfc/id.h"
#include "dfc/rpc_server.h"
#include "dfc/import.pb-c.h"
#include "dfc/inspect.pb-c.h"
#include "dfc/volume.pb-c.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "validate.h"

int dfd_service_init(struct dfd_service *svc, struct dfd_storage *storage,
                     const struct dfd_config *cfg, const struct dfc_clock *clock,
                     struct dfc_error *err) {
    memset(svc, 0, sizeof(*svc));
    svc->storage = storage;
    svc->cfg = cfg;
    svc->clock = *clock;
    int r = dfc_host_id(cfg->host_ip, cfg->hostname, svc->host_id, sizeof(svc->host_id));
    if (r < 0) {
        return dfc_error_set(err, r, "host.ip and host.hostname make a host id that is too long");
    }
    return 0;
}

int dfd_service_register(struct dfd_service *svc, struct dfc_rpc_server *server,
                         struct dfc_error *err) {
    int r = dfc_rpc_server_add_service(server, &dfdaemon__v2__dfdaemon_download__descriptor,
                                       dfd__download_methods, dfd__n_download_methods, svc, err);
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &dfdaemon__v2__dfdaemon_upload__descriptor,
                                       dfd__upload_methods, dfd__n_upload_methods, svc, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &dfc__dfdaemon__v1__dfdaemon_import__descriptor,
                                       dfd__import_methods, dfd__n_import_methods, svc, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &dfc__dfdaemon__v1__dfdaemon_inspect__descriptor,
                                       dfd__inspect_methods, dfd__n_inspect_methods, svc, err);
    }
    if (r == 0) {
        r = dfc_rpc_server_add_service(server, &dfc__dfdaemon__v1__dfdaemon_volume__descriptor,
                                       dfd__volume_methods, dfd__n_volume_methods, svc, err);
    }
    return r;
}

int dfd_service_register_tcp(struct dfd_service *svc, struct dfc_rpc_server *server,
                             struct dfc_error *err) {
    return dfc_rpc_server_add_service(server, &dfdaemon__v2__dfdaemon_upload__descriptor,
                                      dfd__tcp_upload_methods, dfd__n_tcp_upload_methods, svc, err);
}

int64_t dfd__now(const struct dfd_service *svc) {
    return dfc_clock_now(&svc->clock);
}

int dfd__import_params(const struct dfd_service *svc, const char *content_for_id,
                       uint64_t replica_count, const char *tag, const char *application,
                       bool has_piece_length, uint64_t piece_length,
                       const Google__Protobuf__Duration *ttl, struct dfd_import_params *ret,
                       struct dfc_error *err) {
    memset(ret, 0, sizeof(*ret));
    int r = dfd_validate_replica_count(replica_count, err);
    if (r == 0 && has_piece_length) {
        r = dfd_validate_piece_length(piece_length, err);
    }
    if (r == 0) {
        r = dfd_validate_label("tag", tag, DFD_LABEL_MAX, err);
    }
    if (r == 0) {
        r = dfd_validate_label("application", application, DFD_LABEL_MAX, err);
    }
    if (r == 0) {
        r = dfd_validate_label("content_for_calculating_task_id", content_for_id,
                               DFD_CONTENT_FOR_ID_MAX, err);
    }
    if (r == 0 && content_for_id != NULL && content_for_id[0] == '\0') {
        r = dfc_error_set(err, -EINVAL, "content_for_calculating_task_id must not be empty");
    }
    ret->ttl_ns = svc->cfg->default_ttl;
    if (r == 0 && ttl != NULL) {
        r = dfd_validate_ttl(ttl->seconds, ttl->nanos, &ret->ttl_ns, err);
    }
    if (r < 0) {
        return r;
    }
    ret->content_for_id = content_for_id;
    ret->tag = tag;
    ret->application = application;
    ret->piece_length = has_piece_length ? piece_length : 0;
    ret->replica_count = replica_count;
    ret->persistent = true; /* an imported copy is the first persistent replica */
    ret->expected_length = -1;
    return 0;
}

int dfd__task_to_proto(struct dfc_rpc_call *call, const struct dfd_task_meta *t,
                       Common__V2__PersistentCacheTask *out, struct dfc_error *err) {
    out->id = dfc_rpc_call_strdup(call, t->id);
    out->persistent_replica_count = t->replica_count;
    out->current_persistent_replica_count = t->persistent ? 1 : 0;
    out->current_replica_count = 1;
    /* As the scheduler answers: tag and application always present, maybe empty. */
    out->opt_tag_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_TAG_TAG;
    out->tag = dfc_rpc_call_strdup(call, t->tag ? t->tag : "");
    out->opt_application_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_APPLICATION_APPLICATION;
    out->application = dfc_rpc_call_strdup(call, t->application ? t->application : "");
    out->piece_length = t->piece_length;
    out->content_length = t->content_length;
    out->piece_count = t->piece_count;
    out->state = "Succeeded";
    out->ttl = dfc_rpc_call_new_duration(call, t->ttl_ns);
    out->created_at = dfc_rpc_call_new_timestamp(call, t->created_at_ns);
    out->updated_at = dfc_rpc_call_new_timestamp(call, t->updated_at_ns);
    if (!out->id || !out->tag || !out->application || !out->ttl || !out->created_at ||
        !out->updated_at) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int dfd__task_to_local(struct dfc_rpc_call *call, const struct dfd_task_meta *t,
                       Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *out,
                       struct dfc_error *err) {
    out->task_id = dfc_rpc_call_strdup(call, t->id);
    out->persistent = t->persistent;
    out->ttl = dfc_rpc_call_new_duration(call, t->ttl_ns);
    out->opt_piece_length_case =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_RESPONSE__OPT_PIECE_LENGTH_PIECE_LENGTH;
    out->piece_length = t->piece_length;
    out->opt_content_length_case =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_RESPONSE__OPT_CONTENT_LENGTH_CONTENT_LENGTH;
    out->content_length = t->content_length;
    out->created_at = dfc_rpc_call_new_timestamp(call, t->created_at_ns);
    out->updated_at = dfc_rpc_call_new_timestamp(call, t->updated_at_ns);
    out->finished_at = dfc_rpc_call_new_timestamp(call, t->finished_at_ns);
    if (!out->task_id || !out->ttl || !out->created_at || !out->updated_at || !out->finished_at) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int dfd__load_task(const struct dfd_service *svc, const char *task_id, struct dfd_task_meta *ret,
                   struct dfc_error *err) {
    int r = dfd_validate_task_id(task_id, err);
    return r < 0 ? r : dfd_storage_get(svc->storage, task_id, ret, err);
}
