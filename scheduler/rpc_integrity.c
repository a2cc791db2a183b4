/*
 * rpc_integrity.c - dfc.scheduler.v1.PersistentCacheIntegrity: the digest records an importer
 * makes and a downloader reads (rpc_integrity.h, docs/integrity.md). Under mutual TLS a record
 * is taken only from its host's own identity (authz.h).
 */
#include "rpc_integrity.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "dfc/digest.h"
#include "dfc/dragonfly.h"
#include "dfc/log.h"
#include "google/protobuf/empty.pb-c.h"
#include "integrity_store.h"
#include "validate.h"

typedef Dfc__Scheduler__V1__RecordPersistentCacheTaskDigestsRequest record_req;
typedef Dfc__Scheduler__V1__PersistentCacheTaskDigests digests_msg;

static bool hex_id(const char *s) {
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) {
            return false;
        }
    }
    return n == DFC_SHA256_HEX_LEN;
}

static int check_task_id(const char *id, struct dfc_error *err) {
    if (id == NULL || !hex_id(id)) {
        return dfc_error_set(err, -EINVAL, "task_id: must be 64 lowercase hex digits");
    }
    return 0;
}

int sched_validate_record_digests(const record_req *r, struct dfc_error *err) {
    if (r->host_id == NULL || r->host_id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "host_id: must not be empty");
    }
    if (strlen(r->host_id) > SCHED_STRING_MAX) {
        return dfc_error_set(err, -EINVAL, "host_id: longer than %d bytes", SCHED_STRING_MAX);
    }
    int rc = check_task_id(r->task_id, err);
    if (rc < 0) {
        return rc;
    }
    if (r->content_sha256.len != DFC_SHA256_LEN) {
        return dfc_error_set(err, -EINVAL, "content_sha256: must be %d bytes, not %zu",
                             DFC_SHA256_LEN, r->content_sha256.len);
    }
    size_t basis = r->id_basis != NULL ? strlen(r->id_basis) : 0;
    if (basis > SCHED_ID_BASIS_MAX) {
        return dfc_error_set(err, -EINVAL, "id_basis: longer than %d bytes", SCHED_ID_BASIS_MAX);
    }
    if (basis > 0) {
        char id[DFC_SHA256_HEX_LEN + 1];
        if (dfc_sha256_hex(r->id_basis, basis, id) < 0) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        if (strcmp(id, r->task_id) != 0) {
            return dfc_error_set(err, -EINVAL, "id_basis: its SHA-256 is not task_id");
        }
    }
    if (r->piece_length < DFC_PIECE_LENGTH_MIN || r->piece_length > DFC_PIECE_LENGTH_MAX) {
        return dfc_error_set(err, -EINVAL, "piece_length: must be %llu..%llu, not %llu",
                             (unsigned long long)DFC_PIECE_LENGTH_MIN,
                             (unsigned long long)DFC_PIECE_LENGTH_MAX,
                             (unsigned long long)r->piece_length);
    }
    uint64_t want =
        r->content_length / r->piece_length + (r->content_length % r->piece_length != 0);
    if (want > SCHED_DIGEST_PIECES_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "content_length: %llu bytes make %llu pieces, more than %d",
                             (unsigned long long)r->content_length, (unsigned long long)want,
                             SCHED_DIGEST_PIECES_MAX);
    }
    if (r->n_piece_sha256 != want) {
        return dfc_error_set(err, -EINVAL,
                             "piece_sha256: %zu digests, content_length and piece_length make "
                             "%llu pieces",
                             r->n_piece_sha256, (unsigned long long)want);
    }
    for (size_t i = 0; i < r->n_piece_sha256; i++) {
        if (r->piece_sha256[i].len != DFC_SHA256_LEN) {
            return dfc_error_set(err, -EINVAL, "piece_sha256[%zu]: must be %d bytes, not %zu", i,
                                 DFC_SHA256_LEN, r->piece_sha256[i].len);
        }
    }
    /* The last piece's digest is the content's SHA-256 (docs/integrity.md). */
    size_t n = r->n_piece_sha256;
    if (n > 0 && memcmp(r->piece_sha256[n - 1].data, r->content_sha256.data, DFC_SHA256_LEN) != 0) {
        return dfc_error_set(err, -EINVAL, "piece_sha256[%zu]: the last must be content_sha256",
                             n - 1);
    }
    return 0;
}

/* Whether host_id holds a Succeeded peer of task_id. */
static int host_has_copy(struct sched_service *svc, int64_t dl, const char *task_id,
                         const char *host_id, bool *ret, struct dfc_error *err) {
    struct sched_peer *peers = NULL;
    size_t n = 0;
    int r = sched_peer_load_by_task(svc->store, dl, task_id, &peers, &n, err);
    if (r < 0) {
        return r;
    }
    *ret = false;
    for (size_t i = 0; i < n && !*ret; i++) {
        *ret = peers[i].state == SCHED_PEER_SUCCEEDED && strcmp(peers[i].host_id, host_id) == 0;
    }
    sched_peer_list_free(peers, n);
    return 0;
}

static int record(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
                  ProtobufCMessage *resp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const record_req *req = (const record_req *)reqp;
    (void)resp;
    int r = sched_validate_record_digests(req, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "host_id", req->host_id);
    dfc_rpc_call_log_field(call, "task_id", req->task_id);
    int64_t dl = sched__deadline(svc, call), now = sched__now_s(svc);
    struct sched_task task;
    struct sched_host host;
    bool has = false;
    /* Under mutual TLS only the recording host's own identity records (authz.h). */
    if ((r = sched_authz_stored_host(svc->store, dl, call, "record digests for", req->host_id,
                                     err)) < 0) {
        return r;
    }
    if ((r = sched_task_load(svc->store, dl, req->task_id, &task, err)) < 0) {
        return r == -ENOENT
                   ? dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id)
                   : r;
    }
    int64_t ttl = task.ttl_ns / 1000000000 - (now - task.created_at);
    bool same =
        task.piece_length == req->piece_length && task.content_length == req->content_length;
    sched_task_done(&task);
    if (!same) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "the digests' piece_length and content_length are not those of "
                             "persistent cache task %s",
                             req->task_id);
    }
    if (ttl <= 0) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id);
    }
    if ((r = sched_host_load(svc->store, dl, req->host_id, &host, err)) < 0) {
        return r == -ENOENT ? dfc_error_set(err, -ENOENT, "host %s not found", req->host_id) : r;
    }
    sched_host_done(&host);
    if ((r = host_has_copy(svc, dl, req->task_id, req->host_id, &has, err)) < 0) {
        return r;
    }
    if (!has) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "host %s holds no finished copy of persistent cache task %s",
                             req->host_id, req->task_id);
    }
    digests_msg m = DFC__SCHEDULER__V1__PERSISTENT_CACHE_TASK_DIGESTS__INIT;
    m.content_sha256 = req->content_sha256;
    m.id_basis = req->id_basis;
    m.piece_length = req->piece_length;
    m.content_length = req->content_length;
    m.n_piece_sha256 = req->n_piece_sha256;
    m.piece_sha256 = req->piece_sha256;
    size_t len = dfc__scheduler__v1__persistent_cache_task_digests__get_packed_size(&m);
    uint8_t *packed = malloc(len ? len : 1);
    if (packed == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    dfc__scheduler__v1__persistent_cache_task_digests__pack(&m, packed);
    r = sched_digests_record(svc->store, dl, req->task_id, req->host_id, packed, len, now, ttl,
                             err);
    free(packed);
    return r;
}

static void *arena_alloc(void *call, size_t size) {
    return dfc_rpc_call_alloc(call, size);
}

static void arena_free(void *call, void *p) {
    (void)call;
    (void)p; /* freed with the call */
}

static int get(void *svcp, struct dfc_rpc_call *call, const ProtobufCMessage *reqp,
               ProtobufCMessage *respp, struct dfc_error *err) {
    struct sched_service *svc = svcp;
    const Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsRequest *req =
        (const Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsRequest *)reqp;
    Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *resp =
        (Dfc__Scheduler__V1__GetPersistentCacheTaskDigestsResponse *)respp;
    int r = check_task_id(req->task_id, err);
    if (r < 0 || (r = sched__need_redis(svc, err)) < 0) {
        return r;
    }
    dfc_rpc_call_log_field(call, "task_id", req->task_id);
    struct sched_digest_record *recs = NULL;
    size_t n = 0;
    if ((r = sched_digests_load(svc->store, sched__deadline(svc, call), req->task_id, &recs, &n,
                                err)) < 0) {
        return r;
    }
    ProtobufCAllocator arena = {.alloc = arena_alloc, .free = arena_free, .allocator_data = call};
    resp->records = dfc_rpc_call_alloc(call, (n + 1) * sizeof(digests_msg *));
    if (resp->records == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        digests_msg *m = dfc__scheduler__v1__persistent_cache_task_digests__unpack(
            &arena, recs[i].len, recs[i].packed);
        if (m == NULL) {
            DFC_LOG(DFC_LOG_WARN, "integrity.bad_record", "task_id=%s host_id=%s: skipped",
                    req->task_id, recs[i].host_id);
            continue;
        }
        m->host_id = dfc_rpc_call_strdup(call, recs[i].host_id);
        m->recorded_at = recs[i].recorded_at;
        if (m->host_id == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        } else {
            resp->records[resp->n_records++] = m;
        }
    }
    sched_digest_records_free(recs, n);
    return r;
}

static const struct dfc_rpc_method methods[] = {
    DFC_RPC_METHOD("RecordPersistentCacheTaskDigests", DFC_RPC_UNARY,
                   dfc__scheduler__v1__record_persistent_cache_task_digests_request,
                   google__protobuf__empty, record),
    DFC_RPC_METHOD("GetPersistentCacheTaskDigests", DFC_RPC_UNARY,
                   dfc__scheduler__v1__get_persistent_cache_task_digests_request,
                   dfc__scheduler__v1__get_persistent_cache_task_digests_response, get),
};

int sched_integrity_register(struct sched_service *svc, struct dfc_rpc_server *server,
                             struct dfc_error *err) {
    return dfc_rpc_server_add_service(server,
                                      &dfc__scheduler__v1__persistent_cache_integrity__descriptor,
                                      methods, DFC_RPC_N(methods), svc, err);
}
