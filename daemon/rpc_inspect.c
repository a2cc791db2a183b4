/*
 * rpc_inspect.c - dfc.dfdaemon.v1.DfdaemonInspect: one task as `dfcache stat` shows it, the
 * scheduler's view (when a scheduler answers) and this node's copy (when stored here) side by
 * side, with where each came from (proto/dfc/inspect.proto).
 *
 * A task the scheduler does not know or cannot be asked about is still shown from this node's
 * copy, with the scheduler's error; a task that is neither stored here nor known to the
 * scheduler gets the scheduler's error (NOT_FOUND standalone). Open to every caller of the
 * socket, as StatPersistentCacheTask is. The answer also names the content volumes that pin
 * the task here (storage/pins.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "dfc/inspect.pb-c.h"
#include "dfc/log.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "scheduler_client.h"
#include "service.h"
#include "storage/pins.h"
#include "storage/storage.h"
#include "validate.h"

typedef Dfc__Dfdaemon__V1__InspectPersistentCacheTaskRequest InspectRequest;
typedef Dfc__Dfdaemon__V1__InspectPersistentCacheTaskResponse InspectResponse;

static ProtobufCMessage *new_msg(struct dfc_rpc_call *call, const ProtobufCMessageDescriptor *d,
                                 struct dfc_error *err) {
    ProtobufCMessage *m = dfc_rpc_call_new_msg(call, d);
    if (m == NULL) {
        dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return m;
}

/* The pin ids of the content volumes holding task_id. */
static int add_pins(struct dfd_service *svc, struct dfc_rpc_call *call, const char *task_id,
                    InspectResponse *resp, struct dfc_error *err) {
    char(*ids)[DFD_PIN_ID_MAX + 1] = NULL;
    size_t n = 0;
    int r = dfd_storage_task_pins(svc->storage, task_id, &ids, &n, err);
    if (r < 0) {
        return r;
    }
    resp->pin_ids = dfc_rpc_call_alloc(call, (n ? n : 1) * sizeof(*resp->pin_ids));
    for (size_t i = 0; resp->pin_ids != NULL && i < n; i++) {
        if ((resp->pin_ids[i] = dfc_rpc_call_strdup(call, ids[i])) == NULL) {
            break;
        }
        resp->n_pin_ids++;
    }
    free(ids);
    return resp->n_pin_ids == n ? 0 : dfc_error_set(err, -ENOMEM, "out of memory");
}

static int inspect_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                        ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const InspectRequest *req = (const void *)req_;
    InspectResponse *resp = (void *)resp_;
    int r = dfd_validate_task_id(req->task_id, err);
    if (r < 0) {
        return r;
    }
    struct dfd_task_meta t;
    int local = dfd_storage_get(svc->storage, req->task_id, &t, err); /* err kept for -ENOENT */
    if (local < 0 && local != -ENOENT) {
        return local;
    }
    bool stored = local == 0;
    resp->has_scheduler = svc->sched != NULL;
    resp->scheduler_error = "";
    resp->task = (void *)new_msg(call, &common__v2__persistent_cache_task__descriptor, err);
    r = resp->task == NULL ? -ENOMEM : 0;
    if (r == 0 && stored) {
        resp->local = (void *)new_msg(
            call, &dfdaemon__v2__stat_local_persistent_cache_task_response__descriptor, err);
        r = resp->local == NULL ? -ENOMEM : dfd__task_to_local(call, &t, resp->local, err);
    }
    if (r == 0 && svc->sched != NULL) {
        Common__V2__PersistentCacheTask *st = NULL;
        struct dfc_error e;
        int sr = dfd_sched_stat_task(svc->sched, req->task_id, &st, &e);
        if (sr == 0) {
            r = dfd__sched_task_to_proto(call, st, resp->task, err);
            dfc_rpc_msg_free(&st->base);
            resp->scheduler_answered = r == 0;
        } else if (!stored) {
            *err = e; /* neither here nor at the scheduler: the scheduler's code and message */
            r = sr;
        } else {
            resp->scheduler_error = dfc_rpc_call_strdup(call, dfc_error_msg(&e));
            r = resp->scheduler_error == NULL ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
            DFC_LOG(DFC_LOG_DEBUG, "inspect.local_only", "task_id=%s error=\"%s\"", req->task_id,
                    dfc_error_msg(&e));
        }
    } else if (r == 0 && !stored) {
        r = local; /* standalone and not stored here: the store's NOT_FOUND, err as it set it */
    }
    if (r == 0 && !resp->scheduler_answered) {
        r = dfd__task_to_proto(call, &t, resp->task, err);
    }
    if (r == 0) {
        r = add_pins(svc, call, req->task_id, resp, err);
    }
    if (stored) {
        dfd_task_meta_done(&t);
    }
    return r;
}

const struct dfc_rpc_method dfd__inspect_methods[] = {
    DFC_RPC_METHOD("InspectPersistentCacheTask", DFC_RPC_UNARY,
                   dfc__dfdaemon__v1__inspect_persistent_cache_task_request,
                   dfc__dfdaemon__v1__inspect_persistent_cache_task_response, inspect_task),
};
const size_t dfd__n_inspect_methods = DFC_RPC_N(dfd__inspect_methods);
