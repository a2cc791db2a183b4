/*
 * rpc_import.c - dfc.dfdaemon.v1.DfdaemonImport: importing bytes streamed over the socket.
 *
 * The stream is start, content..., finish. Bytes are spooled, hashed and CRC'd as they
 * arrive (each content message's bytes are handed, in the slices gRPC received them in, to the
 * import's pipeline, which frees them); the task is
 * committed only after finish, when its byte count matches what arrived. Anything else (a client
 * that vanishes, a cancel, a deadline, a malformed sequence, more bytes than start announced, any
 * message after finish, a full disk) aborts the import and leaves nothing behind. The task records
 * the caller's uid (SO_PEERCRED) as its owner.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/socket.h>

#include "dfc/import.pb-c.h"
#include "dfc/log.h"
#include "dfc/rpc_bulk.h"
#include "dragonfly/common.pb-c.h"
#include "metrics.h"
#include "registration.h"
#include "service.h"

#define OPT(msg, field) ((msg)->opt_##field##_case != 0 ? (msg)->field : NULL)

typedef Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest ImportRequest;

static void release_msg(void *m) {
    dfc_rpc_msg_free(m);
}

static void release_in(void *in) {
    dfc_rpc_bulk_in_free(in);
}

static int begin(struct dfd_service *svc, struct dfc_rpc_call *call,
                 const Dfc__Dfdaemon__V1__ImportStart *s, struct dfd_registration *reg,
                 struct dfd_import **ret, struct dfc_error *err) {
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(call, &cred) < 0) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: the caller's credentials are unknown (only "
                             "Unix-socket callers may import)");
    }
    struct dfd_import_params p;
    int r = dfd__import_params(svc, OPT(s, content_for_calculating_task_id),
                               s->persistent_replica_count, OPT(s, tag), OPT(s, application),
                               s->opt_piece_length_case != 0, s->piece_length, s->ttl, &p, err);
    if (r < 0) {
        return r;
    }
    if (s->opt_content_length_case != 0) {
        if (s->content_length > (uint64_t)INT64_MAX) {
            return dfc_error_set(err, -EINVAL, "start.content_length is too large");
        }
        p.expected_length = (int64_t)s->content_length;
    }
    p.owner_uid = cred.uid;
    if ((r = dfd_registration_prepare(reg, svc->sched, svc->cfg, &p, err)) < 0) {
        return r;
    }
    return dfd_import_begin(svc->storage, &p, ret, err);
}

/* The streamed import; *ret_bytes is the task's length once it is stored. */
static int import_task_run(struct dfd_service *svc, struct dfc_rpc_call *call,
                           ProtobufCMessage *resp_, uint64_t *ret_bytes, struct dfc_error *err) {
    struct dfd_import *imp = NULL;
    struct dfd_registration reg = {0}; /* the commit hook points at it: it outlives imp */
    ProtobufCMessage *m = NULL;
    struct dfc_rpc_bulk_in *in = NULL; /* a content message's bytes, left in gRPC's slices */
    int r;
    for (;;) {
        r = dfc_rpc_call_recv_bulk(call, &m, &in, err);
        if (r <= 0) {
            if (r == 0) {
                r = dfc_error_set(err, -EINVAL,
                                  "the stream ended before its finish message; nothing was "
                                  "imported");
            }
            break;
        }
        ImportRequest *q = (ImportRequest *)m;
        switch (q->request_case) {
        case DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START:
            r = imp != NULL ? dfc_error_set(err, -EINVAL, "start was sent twice")
                            : begin(svc, call, q->start, &reg, &imp, err);
            break;
        case DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT:
            if (imp == NULL) {
                r = dfc_error_set(err, -EINVAL, "content arrived before start");
                break;
            }
            /* The bytes go down the import's pipeline where gRPC received them (no copy),
             * with whatever holds them: the next message is received while this one is
             * hashed and written. */
            struct iovec one;
            const struct iovec *iov;
            int n = dfc_rpc_bulk_in_iov(in, &q->content, &one, &iov);
            if (iov != &one) {
                dfc_rpc_msg_free(m);
                m = NULL;
                r = dfd_import_writev_owned(imp, iov, n, release_in, in, err);
                in = NULL;
            } else {
                r = dfd_import_writev_owned(imp, &one, n, release_msg, m, err);
                m = NULL;
            }
            break;
        case DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_FINISH:
            if (imp == NULL) {
                r = dfc_error_set(err, -EINVAL, "finish arrived before start");
            } else if (q->finish->content_length != dfd_import_written(imp)) {
                r = dfc_error_set(err, -EINVAL,
                                  "finish.content_length is %" PRIu64 " but %" PRIu64
                                  " bytes arrived",
                                  q->finish->content_length, dfd_import_written(imp));
            } else {
                r = 1; /* proven complete */
            }
            break;
        default:
            r = dfc_error_set(err, -EINVAL, "a message with no request set");
        }
        dfc_rpc_bulk_in_free(in);
        in = NULL;
        dfc_rpc_msg_free(m);
        if (r != 0) {
            break;
        }
        if (dfc_rpc_call_cancelled(call)) {
            r = dfc_error_set(err, -ECANCELED, "the import was cancelled");
            break;
        }
    }
    if (r > 0) { /* after finish, the stream must end: nothing may follow it */
        r = dfc_rpc_call_recv(call, &m, err);
        if (r > 0) {
            dfc_rpc_msg_free(m);
            r = dfc_error_set(err, -EINVAL, "a message arrived after finish; nothing was imported");
        }
    }
    if (r < 0) {
        dfd_import_abort(imp);
        return r;
    }
    struct dfd_task_meta t;
    bool existed = false;
    r = dfd_import_commit(imp, dfd__now(svc), &t, &existed, err);
    r = dfd_registration_end(&reg, svc->storage, r, &t, existed, err);
    if (r < 0) {
        return r;
    }
    DFC_LOG(DFC_LOG_INFO, "import.done",
            "task_id=%s mode=stream bytes=%" PRIu64 " pieces=%u existed=%d", t.id, t.content_length,
            t.piece_count, existed);
    *ret_bytes = t.content_length;
    r = dfd__task_to_proto(call, &t, (Common__V2__PersistentCacheTask *)resp_, err);
    dfd_task_meta_done(&t);
    return r;
}

static int import_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *unused,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    uint64_t bytes = 0;
    int r = import_task_run(svc, call, resp_, &bytes, err);
    dfd_metrics_import(svc->metrics, DFD_SOURCE_STREAM, r >= 0, DFD_IMPORT_HOW_STREAM, bytes);
    return r;
}

const struct dfc_rpc_method dfd__import_methods[] = {
    DFC_RPC_METHOD("ImportPersistentCacheTask", DFC_RPC_CLIENT_STREAM,
                   dfc__dfdaemon__v1__import_persistent_cache_task_request,
                   common__v2__persistent_cache_task, import_task),
};
const size_t dfd__n_import_methods = DFC_RPC_N(dfd__import_methods);
