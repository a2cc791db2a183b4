/*
 * rpc_fetch.c - the DownloadPersistentCacheTask stream (rpc_fetch.h): Started, then each piece
 * once, from the P2P engine's progress callbacks or from the store.
 */
#include "rpc_fetch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/id.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_bulk.h"
#include "dfc/rpc_server.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "p2p/download.h"
#include "service.h"

int dfd__fetch_init(struct dfd_fetch *f, struct dfd_service *svc, struct dfc_rpc_call *call,
                    const char *task_id, bool with_content, struct dfc_error *err) {
    memset(f, 0, sizeof(*f));
    f->svc = svc;
    f->call = call;
    f->task_id = task_id;
    f->with_content = with_content;
    int r = dfc_peer_id(svc->cfg->host_ip, svc->cfg->hostname, f->peer_id, sizeof(f->peer_id));
    return r < 0 ? dfc_error_set(err, r, "peer id too long") : 0;
}

void dfd__fetch_done(struct dfd_fetch *f) {
    free(f->sent);
    f->sent = NULL;
}

static void init_response(struct dfd_fetch *f,
                          Dfdaemon__V2__DownloadPersistentCacheTaskResponse *m) {
    dfdaemon__v2__download_persistent_cache_task_response__init(m);
    m->host_id = f->svc->host_id;
    m->task_id = (char *)f->task_id;
    m->peer_id = f->peer_id;
}

int dfd__fetch_started(struct dfd_fetch *f, uint64_t content_length, struct dfc_error *err) {
    if (f->started) {
        return 0;
    }
    Dfdaemon__V2__DownloadPersistentCacheTaskStartedResponse started =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE__INIT;
    Dfdaemon__V2__DownloadPersistentCacheTaskResponse m;
    init_response(f, &m);
    started.content_length = content_length;
    m.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE;
    m.download_persistent_cache_task_started_response = &started;
    int r = dfc_rpc_call_send(f->call, &m.base, err);
    f->started = r == 0;
    return r;
}

static bool was_sent(const struct dfd_fetch *f, uint32_t number) {
    size_t byte = number / 8;
    return byte < f->sent_bytes && (f->sent[byte] & (1u << (number % 8))) != 0;
}

static int mark_sent(struct dfd_fetch *f, uint32_t number, struct dfc_error *err) {
    size_t byte = number / 8;
    if (byte >= f->sent_bytes) {
        size_t n = f->sent_bytes ? f->sent_bytes : 64;
        while (n <= byte) {
            n *= 2;
        }
        uint8_t *grown = realloc(f->sent, n);
        if (grown == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        memset(grown + f->sent_bytes, 0, n - f->sent_bytes);
        f->sent = grown;
        f->sent_bytes = n;
    }
    f->sent[byte] |= (uint8_t)(1u << (number % 8));
    f->n_sent++;
    return 0;
}

/* One DownloadPieceFinishedResponse; data (pm->length bytes) is copied into bulk unless it
 * already lies in it, and sent only with_content. */
static int send_piece(struct dfd_fetch *f, const struct dfd_piece_meta *pm, const void *data,
                      struct dfc_rpc_bulk *bulk, const char *parent_id, int traffic,
                      int64_t cost_ns, int64_t created_ns, struct dfc_error *err) {
    Common__V2__Piece piece = COMMON__V2__PIECE__INIT;
    Google__Protobuf__Duration cost = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    dfc_pb_duration_from_ns(cost_ns, &cost);
    dfc_pb_timestamp_from_ns(created_ns, &created);
    piece.number = pm->number;
    piece.offset = pm->offset;
    piece.length = pm->length;
    piece.digest = (char *)pm->digest;
    if (parent_id != NULL) {
        piece.opt_parent_id_case = COMMON__V2__PIECE__OPT_PARENT_ID_PARENT_ID;
        piece.parent_id = (char *)parent_id;
    }
    piece.opt_traffic_type_case = COMMON__V2__PIECE__OPT_TRAFFIC_TYPE_TRAFFIC_TYPE;
    piece.traffic_type = traffic;
    piece.cost = &cost;
    piece.created_at = &created;
    if (bulk != NULL) {
        piece.opt_content_case = COMMON__V2__PIECE__OPT_CONTENT_CONTENT;
        piece.content.data = (uint8_t *)data;
        piece.content.len = pm->length;
    }
    Dfdaemon__V2__DownloadPieceFinishedResponse fin =
        DFDAEMON__V2__DOWNLOAD_PIECE_FINISHED_RESPONSE__INIT;
    Dfdaemon__V2__DownloadPersistentCacheTaskResponse m;
    init_response(f, &m);
    fin.piece = &piece;
    m.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PIECE_FINISHED_RESPONSE;
    m.download_piece_finished_response = &fin;
    int r = bulk != NULL ? dfc_rpc_call_send_bulk(f->call, &m.base, bulk, err)
                         : dfc_rpc_call_send(f->call, &m.base, err);
    return r < 0 ? r : mark_sent(f, pm->number, err);
}

/* ---- from the P2P engine ---- */

static int on_started(void *arg, uint64_t content_length, struct dfc_error *err) {
    return dfd__fetch_started(arg, content_length, err);
}

static int on_piece(void *arg, const struct dfd_piece_meta *pm, const void *data,
                    const char *parent_id, uint64_t cost_ns, struct dfc_error *err) {
    struct dfd_fetch *f = arg;
    if (was_sent(f, pm->number)) {
        return 0;
    }
    struct dfc_rpc_bulk *bulk = NULL;
    if (f->with_content) {
        /* The engine reuses its buffer for the next piece; the bulk's bytes must not change
         * once sent, so each piece gets its own copy. */
        if ((bulk = dfc_rpc_bulk_new(pm->length)) == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        memcpy(dfc_rpc_bulk_data(bulk), data, pm->length);
        data = dfc_rpc_bulk_data(bulk);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int r = send_piece(f, pm, data, bulk, parent_id, COMMON__V2__TRAFFIC_TYPE__REMOTE_PEER,
                       (int64_t)cost_ns, dfc_timespec_to_ns(&now), err);
    dfc_rpc_bulk_free(bulk);
    return r;
}

static bool on_should_stop(void *arg) {
    struct dfd_fetch *f = arg;
    return dfc_rpc_call_cancelled(f->call);
}

int dfd__fetch_remote(struct dfd_fetch *f, bool persistent, const char *tag,
                      const char *application, struct dfd_task_meta *ret, struct dfc_error *err) {
    struct dfd_p2p_request req = {
        .task_id = f->task_id,
        .persistent = persistent,
        .tag = tag,
        .application = application,
    };
    struct dfd_p2p_progress prog = {
        .arg = f,
        .started = on_started,
        .piece = on_piece,
        .piece_data = f->with_content,
        .should_stop = on_should_stop,
    };
    return dfd_p2p_fetch(f->svc->p2p, &req, &prog, ret, err);
}

/* ---- from the store ---- */

int dfd__fetch_send_stored(struct dfd_fetch *f, int content_fd, const struct dfd_task_meta *t,
                           struct dfc_error *err) {
    if (f->n_sent == t->piece_count) {
        return 0; /* every piece went out as it arrived from peers */
    }
    struct dfd_piece_meta *pieces;
    size_t n;
    int r = dfd_storage_pieces(f->svc->storage, t->id, &pieces, &n, err);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        struct dfd_piece_meta *pm = &pieces[i];
        if (was_sent(f, pm->number)) {
            continue;
        }
        if (dfc_rpc_call_cancelled(f->call)) {
            r = dfc_error_set(err, -ECANCELED, "the export was cancelled");
            break;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        struct dfc_rpc_bulk *bulk = NULL;
        uint8_t *data = NULL;
        if (f->with_content) {
            if ((bulk = dfc_rpc_bulk_new(pm->length)) == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                break;
            }
            data = dfc_rpc_bulk_data(bulk);
            r = dfd_storage_read_piece(content_fd, t->id, pm, data, err);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r == 0) {
            r = send_piece(f, pm, data, bulk, NULL, COMMON__V2__TRAFFIC_TYPE__LOCAL_PEER,
                           dfc_timespec_to_ns(&t1) - dfc_timespec_to_ns(&t0), t->finished_at_ns,
                           err);
        }
        dfc_rpc_bulk_free(bulk);
    }
    free(pieces);
    return r;
}
