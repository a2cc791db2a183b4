/*
 * integrity_client.c - the digest records at the scheduler (integrity_client.h).
 */
#include "integrity_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/integrity.pb-c.h"
#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "scheduler_client.h"

#define REQUEST_TIMEOUT_MS 10000

/* The task's scheduler, then the next ones while a call never got there. */
static int task_call(struct dfd_sched *s, const char *task_id,
                     const struct dfc_rpc_client_method *m, const char *what,
                     const ProtobufCMessage *req, ProtobufCMessage **ret, struct dfc_error *err) {
    int r = dfc_error_set(err, -ECONNREFUSED, "no scheduler");
    for (unsigned attempt = 0;; attempt++) {
        const char *addr = NULL;
        struct dfc_rpc_client *c = dfd_sched_pick(s, task_id, attempt, &addr);
        if (c == NULL) {
            return r;
        }
        ProtobufCMessage *resp = NULL;
        r = dfc_rpc_unary(c, m, req, REQUEST_TIMEOUT_MS, &resp, err);
        if (r == 0) {
            if (ret != NULL) {
                *ret = resp;
            } else {
                dfc_rpc_msg_free(resp);
            }
            return 0;
        }
        dfc_error_prefix(err, "scheduler %s %s", addr, what);
        bool maybe_arrived = false;
        if (!dfd_sched_unreachable(r, &maybe_arrived) || maybe_arrived) {
            return r;
        }
    }
}

int dfd_sched_record_digests(struct dfd_sched *s, const struct dfd_task_meta *t,
                             const struct dfd_piece_meta *pieces, size_t n, struct dfc_error *err) {
    uint8_t content[DFC_SHA256_LEN];
    if (dfc_sha256_from_hex(t->content_sha256, content) < 0 || n != t->piece_count) {
        return dfc_error_set(err, -EINVAL, "task %s has no content SHA-256 recorded", t->id);
    }
    ProtobufCBinaryData *shas = calloc(n ? n : 1, sizeof(*shas));
    if (shas == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (!pieces[i].has_sha256) {
            free(shas);
            return dfc_error_set(err, -EINVAL, "task %s: piece %zu has no SHA-256 recorded", t->id,
                                 i);
        }
        shas[i].data = (uint8_t *)pieces[i].sha256;
        shas[i].len = DFC_SHA256_LEN;
    }
    Dfc__Scheduler__V1__RecordPersistentCacheTaskDigestsRequest req =
        DFC__SCHEDULER__V1__RECORD_PERSISTENT_CACHE_TASK_DIGESTS_REQUEST__INIT;
    req.host_id = (char *)dfd_sched_host_id(s);
    req.task_id = (char *)t->id;
    req.content_sha256.data = content;
    req.content_sha256.len = DFC_SHA256_LEN;
    req.id_basis = t->id_basis != NULL ? t->id_basis : "";
    req.piece_length = t->piece_length;
    req.content_length = t->content_length;
    req.piece_sha256 = shas;
    req.n_piece_sha256 = n;
    int r = task_call(s, t->id, &dfd_sched_methods(s)->record_digests,
                      "RecordPersistentCacheTaskDigests", &req.base, NULL, err);
    free(shas);
    return r;
}

void dfd_record_task_digests(struct dfd_sched *s, struct dfd_storage *st,
                             const struct dfd_task_meta *t) {
    struct dfd_piece_meta *pieces = NULL;
    size_t n = 0;
    struct dfc_error e;
    int r = dfd_storage_pieces(st, t->id, &pieces, &n, &e);
    if (r == 0) {
        r = dfd_sched_record_digests(s, t, pieces, n, &e);
    }
    free(pieces);
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "import.digests_not_recorded",
                "task_id=%s error=\"%s\": downloads check the task id rule alone, ignoring", t->id,
                dfc_error_msg(&e));
    }
}

int dfd_sched_get_digests(struct dfd_sched *s, const char *task_id,
                          Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse **ret,
                          struct dfc_error *err) {
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsRequest req =
        DFC__SCHEDULER__V1__GET_PERSISTENT_CACHE_TASK_DIGESTS_REQUEST__INIT;
    req.task_id = (char *)task_id;
    ProtobufCMessage *resp = NULL;
    int r = task_call(s, task_id, &dfd_sched_methods(s)->get_digests,
                      "GetPersistentCacheTaskDigests", &req.base, &resp, err);
    if (r < 0 && dfc_error_to_grpc(r) == DFC_GRPC_UNIMPLEMENTED) {
        Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *none = calloc(1, sizeof(*none));
        if (none == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        dfc__scheduler__v1__get_persistent_cache_task_digests_response__init(none);
        *ret = none; /* freed with dfc_rpc_msg_free, as an unpacked message */
        return 0;
    }
    if (r == 0) {
        *ret = (Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *)resp;
    }
    return r;
}
