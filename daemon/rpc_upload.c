/*
 * rpc_upload.c - dfdaemon.v2.DfdaemonUpload as served on TCP (upload.server.ip:port) to other
 * peers and the scheduler, as a method table with thin handlers.
 *
 * A TCP caller has no SO_PEERCRED and is trusted no further than its identity: nothing here
 * reads or writes a path a caller names (output_path and need_piece_content are refused: they
 * stay on the Unix socket), and what changes the store is accepted only from a scheduler
 * (from_scheduler: under mutual TLS a certificate naming a scheduler's address, else a
 * connection from one, dfd_sched_is_scheduler_ip): UpdatePersistentCacheTask,
 * DeletePersistentCacheTask, and the persistent flag of a DownloadPersistentCacheTask (the
 * scheduler's replication pull; anyone else's pull makes an ordinary, evictable copy). Without
 * mutual TLS the ports belong on a trusted network, as upstream's do.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/peer_role.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "hostinfo.h"
#include "rpc_fetch.h"
#include "scheduler_client.h"
#include "service.h"
#include "validate.h"

/* How often SyncHost sends this host's figures. */
#define SYNC_HOST_INTERVAL_NS (1000 * DFC_NS_PER_MS)
#define SYNC_HOST_TICK_NS     (100 * DFC_NS_PER_MS)
/* How long a SyncPersistentCachePieces stream waits for a piece before it looks at its call. */
#define SYNC_PIECES_SLICE_NS (200 * DFC_NS_PER_MS)

#define OPT(msg, field) ((msg)->opt_##field##_case != 0 ? (msg)->field : NULL)

/* Whether the caller is one of the schedulers; who receives who it is, for messages. A caller
 * with a verified client certificate (mutual TLS) is a scheduler when its certificate holds the
 * scheduler role (dfc/peer_role.h: URI dragonfly://scheduler or CN dfc-scheduler) or names a
 * scheduler's address (a SAN IP among those of scheduler.addrs), whatever address it connects
 * from; a caller without one (TLS off, or server-auth) when it connects from such an address,
 * as before TLS (docs/trust-model.md). */
static bool from_scheduler(const struct dfd_service *svc, struct dfc_rpc_call *call, char *who,
                           size_t size) {
    char ip[INET6_ADDRSTRLEN];
    if (dfc_rpc_call_peer_ip(call, ip, sizeof(ip)) < 0) {
        snprintf(ip, sizeof(ip), "an unknown address");
    }
    struct dfc_peer_identity id;
    dfc_rpc_call_peer_identity(call, &id);
    if (id.authenticated) {
        int n = snprintf(who, size, "%s with a certificate naming", ip);
        bool yes = dfc_peer_is_scheduler(&id);
        for (unsigned i = 0; i < id.n_ips; i++) {
            yes = yes || (svc->sched != NULL && dfd_sched_is_scheduler_ip(svc->sched, id.ips[i]));
            if (n > 0 && (size_t)n < size) {
                n += snprintf(who + n, size - (size_t)n, " %s", id.ips[i]);
            }
        }
        if (id.n_ips == 0 && n > 0 && (size_t)n < size) {
            snprintf(who + n, size - (size_t)n, yes ? " the scheduler role" : " no IP");
        }
        return yes;
    }
    snprintf(who, size, "%s", ip);
    return svc->sched != NULL && strcmp(ip, "an unknown address") != 0 &&
           dfd_sched_is_scheduler_ip(svc->sched, ip);
}

static int need_scheduler(const struct dfd_service *svc, struct dfc_rpc_call *call,
                          const char *verb, struct dfc_error *err) {
    char ip[512];
    if (from_scheduler(svc, call, ip, sizeof(ip))) {
        return 0;
    }
    return dfc_error_set(err, -EACCES,
                         "permission denied: %s came from %s, which is not a scheduler's address "
                         "(scheduler.addrs); only the scheduler may %s over TCP",
                         dfc_rpc_call_method(call), ip, verb);
}

/* ---- DownloadPersistentCacheTask: the scheduler's replication pull ---- */

static int download_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                         ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req = (const void *)req_;
    int r = dfd_validate_task_id(req->task_id, err);
    if (r == 0 && req->opt_output_path_case != 0) {
        r = dfc_error_set(err, -EINVAL,
                          "output_path: not on TCP (exports to a path are served on the Unix "
                          "socket only)");
    }
    if (r == 0 && req->need_piece_content) {
        r = dfc_error_set(err, -EINVAL,
                          "need_piece_content: not on TCP (pieces travel over Vortex, "
                          "storage.server.tcpPort)");
    }
    if (r == 0 && req->force_hard_link) {
        r = dfc_error_set(err, -EINVAL, "force_hard_link: not on TCP (it needs an output_path)");
    }
    if (r == 0 && req->opt_remote_ip_case != 0) {
        r = dfd_validate_ip("remote_ip", req->remote_ip, err);
    }
    if (r < 0) {
        return r;
    }
    char ip[512];
    bool persistent = req->persistent && from_scheduler(svc, call, ip, sizeof(ip));
    dfc_rpc_call_log_field(call, "task_id", req->task_id);
    struct dfd_fetch f;
    if ((r = dfd__fetch_init(&f, svc, call, req->task_id, false, err)) < 0) {
        return r;
    }
    struct dfd_task_meta t;
    r = dfd__fetch_remote(&f, persistent, OPT(req, tag), OPT(req, application), &t, err);
    if (r < 0) {
        dfd__fetch_done(&f);
        return r;
    }
    if ((r = dfd__fetch_started(&f, t.content_length, err)) == 0) {
        r = dfd__fetch_send_stored(&f, -1, &t, err); /* metadata only: no content fd needed */
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "replica.done", "task_id=%s persistent=%d pieces=%u", t.id,
                t.persistent, t.piece_count);
    }
    dfd__fetch_done(&f);
    dfd_task_meta_done(&t);
    return r;
}

/* ---- the scheduler's destructive calls ---- */

static int update_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__UpdatePersistentCacheTaskRequest *req = (const void *)req_;
    int r = dfd_validate_task_id(req->task_id, err);
    if (r == 0) {
        r = need_scheduler(svc, call, "update a task", err);
    }
    if (r < 0 || !req->persistent) {
        return r; /* persistent=false is a no-op, as upstream */
    }
    r = dfd_storage_set_persistent(svc->storage, req->task_id, true, dfd__now(svc), err);
    if (r == -ENOENT) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id);
    }
    return r;
}

static int delete_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__DeletePersistentCacheTaskRequest *req = (const void *)req_;
    int r = dfd_validate_task_id(req->task_id, err);
    if (r == 0) {
        r = need_scheduler(svc, call, "delete a task", err);
    }
    if (r == 0) {
        r = dfd_storage_delete(svc->storage, req->task_id, err); /* absent: OK, as upstream */
    }
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "delete.done", "task_id=%s by=scheduler", req->task_id);
    }
    return r;
}

/* ---- read-only calls (StatPersistentCacheTask: dfd__stat_task, as on the Unix socket) ---- */

/* ---- SyncPersistentCachePieces: the pieces this node holds, as they land ---- */

/* Sends piece k of st's geometry with this host's Vortex address. */
static int send_piece(const struct dfd_service *svc, struct dfc_rpc_call *call,
                      const struct dfd_piece_state *st, uint32_t k, struct dfc_error *err) {
    Dfdaemon__V2__SyncPersistentCachePiecesResponse m =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_RESPONSE__INIT;
    m.number = k;
    m.offset = (uint64_t)k * st->piece_length;
    uint64_t left = st->content_length - m.offset;
    m.length = left < st->piece_length ? left : st->piece_length;
    m.ip = svc->cfg->host_ip;
    m.opt_tcp_port_case =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_RESPONSE__OPT_TCP_PORT_TCP_PORT;
    m.tcp_port = (int32_t)svc->cfg->vortex_port;
    return dfc_rpc_call_send(call, &m.base, err);
}

static bool has_bit(const uint8_t *map, uint32_t k) {
    return (map[k / 8] & (1u << (k % 8))) != 0;
}

/* The wanted pieces of st not yet sent (sent: a bitmap of the task's pieces, the wanted ones
 * already sent or repeated), each once; *left counts the wanted pieces still to send. */
static int send_landed(const struct dfd_service *svc, struct dfc_rpc_call *call,
                       const Dfdaemon__V2__SyncPersistentCachePiecesRequest *req,
                       const struct dfd_piece_state *st, uint8_t *sent, size_t *left,
                       struct dfc_error *err) {
    int r = 0;
    for (size_t i = 0; r == 0 && *left > 0 && i < req->n_interested_piece_numbers; i++) {
        uint32_t k = req->interested_piece_numbers[i];
        if (has_bit(sent, k) || !has_bit(st->written, k)) {
            continue; /* a repeated number is answered once */
        }
        sent[k / 8] |= (uint8_t)(1u << (k % 8));
        (*left)--;
        r = send_piece(svc, call, st, k, err);
    }
    return r;
}

/* The distinct wanted numbers, checked against the task's piece count. */
static int count_wanted(const Dfdaemon__V2__SyncPersistentCachePiecesRequest *req, uint32_t count,
                        size_t *ret, struct dfc_error *err) {
    if (req->n_interested_piece_numbers > count) {
        return dfc_error_set(err, -EINVAL,
                             "interested_piece_numbers: %zu numbers, the task has %u pieces",
                             req->n_interested_piece_numbers, (unsigned)count);
    }
    uint8_t *seen = calloc((size_t)count / 8 + 1, 1);
    if (seen == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < req->n_interested_piece_numbers; i++) {
        uint32_t k = req->interested_piece_numbers[i];
        if (k >= count) {
            free(seen);
            return dfc_error_set(err, -EINVAL,
                                 "interested_piece_numbers[%zu]: %u is beyond the task's %u "
                                 "pieces",
                                 i, (unsigned)k, (unsigned)count);
        }
        n += has_bit(seen, k) ? 0 : 1;
        seen[k / 8] |= (uint8_t)(1u << (k % 8));
    }
    free(seen);
    *ret = n;
    return 0;
}

static int not_found(const char *id, struct dfc_error *err) {
    return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", id);
}

/* Takes a place among the streams that wait for pieces: per remote (the cap, refused
 * RESOURCE_EXHAUSTED) and over all remotes (sync_pieces_max_waiting: beyond it the stream
 * answers what is held and ends, as for a committed task). 1 when it may wait (leave with
 * leave_waiting), 0 when it may not, or negative. */
static int enter_waiting(struct dfd_service *svc, struct dfc_rpc_call *call,
                         char remote[DFC_RPC_REMOTE_MAX], struct dfc_error *err) {
    remote[0] = '\0';
    if (svc->sync_pieces_cap != NULL) {
        int r = dfc_stream_cap_enter(svc->sync_pieces_cap, call, remote, err);
        if (r < 0) {
            return r;
        }
    }
    unsigned was = atomic_fetch_add(&svc->sync_pieces_waiting, 1);
    if (svc->sync_pieces_max_waiting == 0 || was < svc->sync_pieces_max_waiting) {
        return 1;
    }
    atomic_fetch_sub(&svc->sync_pieces_waiting, 1);
    if (svc->sync_pieces_cap != NULL) {
        dfc_stream_cap_leave(svc->sync_pieces_cap, remote);
    }
    return 0;
}

static void leave_waiting(struct dfd_service *svc, const char *remote) {
    atomic_fetch_sub(&svc->sync_pieces_waiting, 1);
    if (svc->sync_pieces_cap != NULL) {
        dfc_stream_cap_leave(svc->sync_pieces_cap, remote);
    }
}

/* Sends what st holds, then, while the task downloads in a shared replica, each wanted piece
 * as it lands (waiting SYNC_PIECES_SLICE_NS at a time, watching the call), until every wanted
 * piece was sent: OK. The download gone without a copy: NOT_FOUND naming the task. */
static int sync_pieces_follow(struct dfd_service *svc, struct dfc_rpc_call *call,
                              const Dfdaemon__V2__SyncPersistentCachePiecesRequest *req,
                              struct dfd_piece_state *st, size_t left, bool may_wait,
                              struct dfc_error *err) {
    uint32_t count = st->piece_count;
    uint8_t *sent = calloc((size_t)count / 8 + 1, 1);
    if (sent == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = 0;
    for (;;) {
        if ((r = send_landed(svc, call, req, st, sent, &left, err)) < 0 || left == 0 || !may_wait ||
            st->source == DFD_PIECES_COMMITTED) {
            break;
        }
        int64_t slice = dfc_mono_ns() + SYNC_PIECES_SLICE_NS;
        while (!dfc_rpc_call_cancelled(call) &&
               dfd_storage_wait_pieces(svc->storage, st->gen, slice) == -ETIMEDOUT) {
            slice = dfc_mono_ns() + SYNC_PIECES_SLICE_NS;
        }
        if (dfc_rpc_call_cancelled(call)) {
            r = dfc_error_set(err, -ECANCELED, "cancelled while waiting for pieces");
            break;
        }
        dfd_piece_state_done(st);
        if ((r = dfd_storage_piece_state(svc->storage, req->task_id, st, err)) < 0) {
            break;
        }
        if (st->source == DFD_PIECES_ABSENT || st->piece_count != count) {
            r = not_found(req->task_id, err); /* the download failed: nothing left to serve */
            break;
        }
    }
    free(sent);
    return r;
}

/* The wanted pieces this node holds, with this host's Vortex address: for a stored task in one
 * pass; for a task it is downloading in a shared replica (dfd_replica_share) those written so
 * far, then each as it lands, switching to the stored rows at the commit, until every wanted
 * piece was sent (OK), the download failed (NOT_FOUND, as for an absent task) or the call's
 * deadline or cancellation. Bounds: a stream that waits holds a worker of the TCP server, whose
 * streams may hold upload.server.maxWorkers less the reserved ones (rpc_server.h); at most
 * upload.server.maxSyncPiecesStreamsPerHost of them per remote (refused RESOURCE_EXHAUSTED)
 * and sync_pieces_max_waiting in all (half the stream workers: daemon.c), beyond which a
 * stream answers what is held and ends, as upstream's does with nothing new. */
static int sync_pieces(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__SyncPersistentCachePiecesRequest *req = (const void *)req_;
    int r = dfd_validate_task_id(req->task_id, err);
    struct dfd_piece_state st;
    if (r < 0 || (r = dfd_storage_piece_state(svc->storage, req->task_id, &st, err)) < 0) {
        return r;
    }
    size_t left = 0;
    if (st.source == DFD_PIECES_ABSENT) {
        r = not_found(req->task_id, err);
    } else {
        r = count_wanted(req, st.piece_count, &left, err);
    }
    char remote[DFC_RPC_REMOTE_MAX];
    int wait = 0;
    if (r == 0 && st.source == DFD_PIECES_IN_PROGRESS && left > 0) {
        r = wait = enter_waiting(svc, call, remote, err);
    }
    if (r >= 0) {
        r = sync_pieces_follow(svc, call, req, &st, left, wait > 0, err);
    }
    if (wait > 0) {
        leave_waiting(svc, remote);
    }
    dfd_piece_state_done(&st);
    return r;
}

/* This host's figures, every SYNC_HOST_INTERVAL_NS until the caller ends the stream (or takes
 * nothing for the idle timeout, which ends the send). */
static int sync_host_loop(struct dfd_service *svc, struct dfc_rpc_call *call,
                          struct dfc_error *err) {
    int r = 0;
    while (r == 0 && !dfc_rpc_call_cancelled(call)) {
        Common__V2__Host *h = NULL;
        if ((r = dfd_hostinfo_fill(svc->cfg, svc->host_id, &h, err)) < 0) {
            break;
        }
        r = dfc_rpc_call_send(call, &h->base, err);
        dfd_hostinfo_free(h);
        for (int64_t slept = 0; r == 0 && slept < SYNC_HOST_INTERVAL_NS;
             slept += SYNC_HOST_TICK_NS) {
            if (dfc_rpc_call_cancelled(call)) {
                break;
            }
            struct timespec ts = {0, SYNC_HOST_TICK_NS};
            nanosleep(&ts, NULL);
        }
    }
    return r == -ECANCELED ? 0 : r;
}

/* At most upload.server.maxSyncHostStreamsPerHost streams per remote: each holds a worker for
 * its life, so one remote's streams would otherwise take every worker streams may use and stop
 * this node serving as a parent (RESOURCE_EXHAUSTED beyond it). */
static int sync_host(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                     ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    char remote[DFC_RPC_REMOTE_MAX];
    if (svc->sync_host_cap == NULL) {
        return sync_host_loop(svc, call, err);
    }
    int r = dfc_stream_cap_enter(svc->sync_host_cap, call, remote, err);
    if (r == 0) {
        r = sync_host_loop(svc, call, err);
        dfc_stream_cap_leave(svc->sync_host_cap, remote);
    }
    return r;
}

const struct dfc_rpc_method dfd__tcp_upload_methods[] = {
    DFD_METHOD_DOWNLOAD_TASK(download_task),
    DFD_METHOD_UPDATE_TASK(update_task),
    DFD_METHOD_STAT_TASK(dfd__stat_task),
    DFD_METHOD_DELETE_TASK(delete_task),
    DFC_RPC_METHOD("SyncPersistentCachePieces", DFC_RPC_SERVER_STREAM,
                   dfdaemon__v2__sync_persistent_cache_pieces_request,
                   dfdaemon__v2__sync_persistent_cache_pieces_response, sync_pieces),
    DFC_RPC_METHOD("SyncHost", DFC_RPC_SERVER_STREAM, dfdaemon__v2__sync_host_request,
                   common__v2__host, sync_host),
};
const size_t dfd__n_tcp_upload_methods = DFC_RPC_N(dfd__tcp_upload_methods);
