/*
 * download.c - the P2P download engine (download.h): a task that is not stored here is
 * fetched piece by piece from the parents the scheduler names, into a replica that becomes
 * visible only once complete and durable.
 *
 * DESIGN
 *   One download per task id at a time: a table of downloads in progress (under p->mu). The
 *   first caller runs the download on its own thread (the leader); later callers wait on
 *   p->cv and then read the committed task. When the leader's own caller went away (-ECANCELED
 *   while the engine is not stopping) a waiter takes over as the next leader instead of
 *   failing with someone else's cancellation.
 *
 *   A round = one answer of the scheduler (Normal{parents}). Each parent is asked once which
 *   of the missing pieces it has (SyncPersistentCachePieces on its DfdaemonUpload TCP port: a
 *   committed task answers in one pass and ends the stream), all parents at once, each on a
 *   thread of its own; meanwhile concurrent_piece_count workers take the missing pieces in
 *   order, each waiting only until the parent its piece goes to has reported it (a parent
 *   streams a few hundred answers in ~10 ms: asked one after another, they were most of a
 *   1 GiB fetch's start). The bytes stream in 1 MiB chunks, CRC'd on the way, into buffers of
 *   the round's piece writer, whose one thread writes them into the replica (piece_writer.h:
 *   no two threads contend for the spool's inode lock); when the caller wants each piece's
 *   bytes, a worker receives the whole piece into its own buffer and writes it itself. A
 *   piece goes to the parents that reported it, round-robin from piece number modulo the
 *   parent count (no weighting by idle bandwidth); on a failure (connect, timeout, CRC) the
 *   next of them is tried. A piece that failed on every parent that had it is reported
 *   DownloadPieceFailed{temporary} and ends the round: the workers take no new piece. Missing
 *   pieces then mean Reschedule{candidate_parents = the parents that failed or lacked a
 *   piece}, at most scheduler.maxScheduleCount rounds in all.
 *
 *   Everything a remote peer sends is bounded here: at most DFD_P2P_MAX_PARENTS parents, each
 *   with a valid IP and port; a reported piece number must be one we asked for, its offset and
 *   length must be our geometry's, and a parent gets at most as many answers read as pieces it
 *   was asked for; a piece's bytes are read into a buffer sized by our geometry
 *   (dfd_vortex_fetch checks the parent's metadata against it, and the CRC).
 *
 *   The progress callbacks and every send on the scheduler stream run under one mutex per
 *   download (rd->mu), so they are serialised as download.h promises.
 */
#include "p2p/download.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/addr.h"
#include "dfc/digest.h"
#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_client.h"
#include "dfc/thread.h"
#include "dfc/metrics.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/piece_writer.h"
#include "p2p/vortex_client.h"

/* Parents used per round (the scheduler's candidateParentLimit defaults to 3). */
#define DFD_P2P_MAX_PARENTS 16
/* How often a waiting caller polls its should_stop. */
#define WAIT_TICK_NS (200 * DFC_NS_PER_MS)
#define IP_MAX       64

struct active {
    char id[DFD_TASK_ID_LEN + 1];
    bool done;
    int result;
    struct dfc_error err;
    unsigned refs;             /* the leader and the waiters */
    struct dfc_rpc_stream *st; /* the scheduler stream, for dfd_p2p_free to cancel (p->mu) */
    bool leader_cancelled;     /* the leader's caller went away: a waiter may lead again */
    struct active *next;
};

struct dfd_p2p {
    struct dfd_storage *storage;
    struct dfd_p2p_opts o; /* a copy; its strings, counters and o.sched.s borrowed */
    char host_id[DFD_PEER_ID_MAX];
    struct dfc_rpc_client_method sync_pieces;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast when a download ends and when the engine stops */
    struct active *active;
    unsigned running; /* fetches inside the engine */
    bool stopping;
};

int dfd_p2p_new(struct dfd_storage *storage, const struct dfd_p2p_opts *o, struct dfd_p2p **ret,
                struct dfc_error *err) {
    struct dfd_p2p *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    p->storage = storage;
    p->o = *o;
    snprintf(p->host_id, sizeof(p->host_id), "%s", o->host_id);
    const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncPersistentCachePieces",
                              &p->sync_pieces),
    };
    int r = dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), err);
    if (r < 0) {
        free(p);
        return r;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    *ret = p;
    return 0;
}

void dfd_p2p_free(struct dfd_p2p *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    for (struct active *a = p->active; a != NULL; a = a->next) {
        if (a->st != NULL) {
            dfc_rpc_stream_cancel(a->st);
        }
    }
    pthread_cond_broadcast(&p->cv);
    while (p->running > 0) {
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---- one download ---- */

struct parent {
    const Common__V2__PersistentCachePeer *peer; /* in the scheduler's response (rd->normal) */
    const char *id;
    char host_ip[IP_MAX]; /* its DfdaemonUpload */
    uint16_t host_port;
    char vortex_ip[IP_MAX]; /* from its SyncPersistentCachePieces answers */
    uint16_t vortex_port;
    bool syncing;     /* its SyncPersistentCachePieces still runs (rd->mu) */
    bool failed;      /* a sync or a piece failed on it this round */
    bool lacked;      /* it did not report every missing piece */
    unsigned fetched; /* pieces taken from it this round */
};

struct run {
    struct dfd_p2p *p;
    const struct dfd_p2p_request *req;
    const struct dfd_p2p_progress *prog;
    struct active *a;
    char peer_id[DFD_PEER_ID_MAX];
    uint64_t piece_length, content_length;
    uint32_t piece_count;
    struct dfd_replica *rep;
    struct dfd_piece_writer *writer; /* this round's, when the pieces stream into rep */
    struct dfc_rpc_stream *st;
    bool sent_started; /* DownloadPersistentCachePeerStarted */

    pthread_mutex_t mu;       /* progress callbacks, stream sends, the fields below */
    ProtobufCMessage *normal; /* the current AnnouncePersistentCachePeerResponse */
    struct parent parents[DFD_P2P_MAX_PARENTS];
    size_t n_parents;
    uint32_t *missing; /* the pieces this round asks for, ascending */
    uint64_t *have;    /* per missing piece: a bit per parent that reported it */
    size_t n_missing, next;
    pthread_cond_t synced; /* broadcast when a parent reports a piece, and when a sync ends */
    bool round_over;       /* a piece failed everywhere, or a fatal error: take no new piece */
    int fatal;             /* a fatal error (storage, caller gone), with fatal_err */
    struct dfc_error fatal_err;
    unsigned written;
};

/* Whether the engine stops or the caller went away; called without rd->mu. */
static bool stopped(struct run *rd) {
    pthread_mutex_lock(&rd->p->mu);
    bool s = rd->p->stopping;
    pthread_mutex_unlock(&rd->p->mu);
    if (!s && rd->prog != NULL && rd->prog->should_stop != NULL) {
        pthread_mutex_lock(&rd->mu);
        s = rd->prog->should_stop(rd->prog->arg);
        pthread_mutex_unlock(&rd->mu);
    }
    return s;
}

/* The senders below put one message on the scheduler stream; rd->mu must be held when workers
 * run (one sender at a time). */
static int send_simple(struct run *rd, enum dfd_sched_peer_event ev, const char *description,
                       struct dfc_error *err) {
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_event(sc->s, rd->st, rd->req->task_id, rd->peer_id, ev, description, err);
}

static int send_register(struct run *rd, const char *tag, const char *application,
                         struct dfc_error *err) {
    struct dfd_sched_register g = {
        .task_id = rd->req->task_id,
        .peer_id = rd->peer_id,
        .tag = tag,
        .application = application,
        .persistent = rd->req->persistent,
        .piece_length = rd->piece_length,
        .piece_count = rd->piece_count,
        .concurrent_piece_count = (uint32_t)rd->p->o.concurrent_piece_count,
    };
    return rd->p->o.sched.peer_register(rd->p->o.sched.s, rd->st, &g, err);
}

/* Reschedule with the parents that failed or lacked pieces this round (all of them when none
 * is marked: the scheduler then offers others). */
static int send_reschedule(struct run *rd, const char *description, struct dfc_error *err) {
    Common__V2__PersistentCachePeer *list[DFD_P2P_MAX_PARENTS];
    size_t n = 0;
    for (size_t i = 0; i < rd->n_parents; i++) {
        if (rd->parents[i].failed || rd->parents[i].lacked) {
            list[n++] = (Common__V2__PersistentCachePeer *)rd->parents[i].peer;
        }
    }
    for (size_t i = 0; n == 0 && i < rd->n_parents; i++) {
        list[i] = (Common__V2__PersistentCachePeer *)rd->parents[i].peer;
        if (i + 1 == rd->n_parents) {
            n = rd->n_parents;
        }
    }
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_reschedule(sc->s, rd->st, rd->req->task_id, rd->peer_id, list, n, description,
                               err);
}

/* ---- parents ---- */

static bool valid_ip(const char *ip) {
    unsigned char buf[16];
    return ip != NULL && ip[0] != '\0' && strlen(ip) < IP_MAX &&
           (inet_pton(AF_INET, ip, buf) == 1 || inet_pton(AF_INET6, ip, buf) == 1);
}

/* Takes the usable parents of a Normal response: an id, a host with a valid IP and port, not
 * ourselves, at most DFD_P2P_MAX_PARENTS. */
static void take_parents(struct run *rd,
                         const Scheduler__V2__NormalPersistentCacheTaskResponse *n) {
    rd->n_parents = 0;
    for (size_t i = 0; i < n->n_candidate_cache_parents && rd->n_parents < DFD_P2P_MAX_PARENTS;
         i++) {
        const Common__V2__PersistentCachePeer *pe = n->candidate_cache_parents[i];
        const Common__V2__Host *h = pe != NULL ? pe->host : NULL;
        if (h == NULL || pe->id == NULL || pe->id[0] == '\0' || strlen(pe->id) >= DFD_PEER_ID_MAX ||
            !valid_ip(h->ip) || h->port <= 0 || h->port > 65535 ||
            (h->id != NULL && strcmp(h->id, rd->p->host_id) == 0)) {
            DFC_LOG(DFC_LOG_WARN, "p2p.parent_skipped", "task_id=%s parent=%s, ignoring",
                    rd->req->task_id, pe != NULL && pe->id != NULL ? pe->id : "-");
            continue;
        }
        struct parent *pa = &rd->parents[rd->n_parents++];
        memset(pa, 0, sizeof(*pa));
        pa->peer = pe;
        pa->id = pe->id;
        snprintf(pa->host_ip, sizeof(pa->host_ip), "%s", h->ip);
        pa->host_port = (uint16_t)h->port;
    }
}

static size_t find_missing(const struct run *rd, uint32_t number) {
    size_t lo = 0, hi = rd->n_missing;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd->missing[mid] < number) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < rd->n_missing && rd->missing[lo] == number ? lo : SIZE_MAX;
}

static uint64_t piece_offset(const struct run *rd, uint32_t number) {
    return (uint64_t)number * rd->piece_length;
}

static uint64_t piece_len(const struct run *rd, uint32_t number) {
    uint64_t off = piece_offset(rd, number);
    uint64_t left = rd->content_length - off;
    return left < rd->piece_length ? left : rd->piece_length;
}

/* Asks parent k which missing pieces it has; marks them in rd->have as they come, under
 * rd->mu (with pa->vortex_*, which are set before the first bit and never change after).
 * Errors mark it failed. Ends with pa->syncing false. */
static void sync_parent(struct run *rd, size_t k) {
    struct parent *pa = &rd->parents[k];
    char target[IP_MAX + 16];
    dfc_addr_format(pa->host_ip, pa->host_port, target, sizeof(target));
    struct dfc_error err;
    struct dfc_rpc_client *c = NULL;
    struct dfc_rpc_stream *st = NULL;
    Dfdaemon__V2__SyncPersistentCachePiecesRequest req =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_REQUEST__INIT;
    req.host_id = rd->p->host_id;
    req.task_id = (char *)rd->req->task_id;
    req.interested_piece_numbers = rd->missing;
    req.n_interested_piece_numbers = rd->n_missing;
    size_t reported = 0;
    int r = dfc_rpc_client_new(target, NULL, &c, &err);
    if (r == 0) {
        r = dfc_rpc_stream_open(c, &rd->p->sync_pieces, rd->p->o.piece_timeout_ns / DFC_NS_PER_MS,
                                &st, &err);
    }
    if (r == 0 && (r = dfc_rpc_stream_send(st, &req.base, &err)) == 0) {
        r = dfc_rpc_stream_close_send(st, &err);
    }
    /* At most one answer per piece asked for: a parent cannot keep us reading. */
    for (size_t got = 0; r == 0 && got < rd->n_missing; got++) {
        ProtobufCMessage *msg = NULL;
        r = dfc_rpc_stream_recv(st, rd->p->sync_pieces.resp, &msg, &err);
        if (r <= 0) {
            break;
        }
        r = 0;
        const Dfdaemon__V2__SyncPersistentCachePiecesResponse *m = (const void *)msg;
        size_t i = find_missing(rd, m->number);
        if (i == SIZE_MAX || m->offset != piece_offset(rd, m->number) ||
            m->length != piece_len(rd, m->number) || !valid_ip(m->ip) ||
            m->opt_tcp_port_case == 0 || m->tcp_port <= 0 || m->tcp_port > 65535) {
            DFC_LOG(DFC_LOG_WARN, "p2p.sync_bad_piece",
                    "task_id=%s parent=%s piece=%u offset=%" PRIu64 " length=%" PRIu64 ", ignoring",
                    rd->req->task_id, pa->id, (unsigned)m->number, m->offset, m->length);
            dfc_rpc_msg_free(msg);
            continue;
        }
        pthread_mutex_lock(&rd->mu);
        if (pa->vortex_ip[0] == '\0') {
            snprintf(pa->vortex_ip, sizeof(pa->vortex_ip), "%s", m->ip);
            pa->vortex_port = (uint16_t)m->tcp_port;
        }
        if (strcmp(pa->vortex_ip, m->ip) == 0 && pa->vortex_port == m->tcp_port &&
            (rd->have[i] & (UINT64_C(1) << k)) == 0) {
            rd->have[i] |= UINT64_C(1) << k;
            reported++;
            pthread_cond_broadcast(&rd->synced);
        }
        pthread_mutex_unlock(&rd->mu);
        dfc_rpc_msg_free(msg);
    }
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "p2p.sync_failed", "task_id=%s parent=%s addr=%s error=\"%s\"",
                rd->req->task_id, pa->id, target, dfc_error_msg(&err));
    }
    pthread_mutex_lock(&rd->mu);
    if (r < 0) {
        pa->failed = true;
    }
    pa->lacked = reported < rd->n_missing;
    pa->syncing = false;
    pthread_cond_broadcast(&rd->synced);
    pthread_mutex_unlock(&rd->mu);
}

struct sync_job {
    struct run *rd;
    size_t k;
};

static void *sync_main(void *arg) {
    struct sync_job *j = arg;
    sync_parent(j->rd, j->k);
    return NULL;
}

/* ---- pieces ---- */

/* A worker's buffer: a whole piece when the caller wants each piece's bytes; else the bytes
 * stream through the round's piece writer, in chunks of STREAM_CHUNK, WRITER_BUFS_PER_WORKER
 * of its buffers per worker (one being received into while another waits to be written).
 * 1 MiB rather than 256 KiB: a quarter of the hand-offs to the writer, and in
 * hack/bench/p2p.sh's fetch (alternating builds, five medians of 5 runs each) 0.635 s
 * against 0.683 s; 2 MiB was no faster. The pool is 16 MiB with the default 8 workers. */
#define STREAM_CHUNK           ((size_t)1024 * 1024)
#define WRITER_BUFS_PER_WORKER 2

struct worker_buf {
    void *buf;
    size_t len;
    bool whole;
};

/* Reports a written piece to the caller and the scheduler; rd->mu held. */
static int report_piece(struct run *rd, uint32_t number, const void *buf, uint32_t crc,
                        const struct parent *pa, uint64_t cost_ns, struct dfc_error *err) {
    struct dfd_piece_meta pm = {
        .number = number, .offset = piece_offset(rd, number), .length = piece_len(rd, number)};
    dfc_crc32_format(crc, pm.digest);
    int r = 0;
    if (rd->prog != NULL && rd->prog->piece != NULL) {
        r = rd->prog->piece(rd->prog->arg, &pm, buf, pa->id, cost_ns, err);
    }
    if (r < 0) {
        return r;
    }
    Common__V2__Piece piece = COMMON__V2__PIECE__INIT;
    Google__Protobuf__Duration cost = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Protobuf__Timestamp created = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    dfc_pb_duration_from_ns((int64_t)cost_ns, &cost);
    dfc_pb_timestamp_from_ns(dfc_timespec_to_ns(&now), &created);
    piece.number = number;
    piece.opt_parent_id_case = COMMON__V2__PIECE__OPT_PARENT_ID_PARENT_ID;
    piece.parent_id = (char *)pa->id;
    piece.offset = pm.offset;
    piece.length = pm.length;
    piece.digest = pm.digest;
    piece.opt_traffic_type_case = COMMON__V2__PIECE__OPT_TRAFFIC_TYPE_TRAFFIC_TYPE;
    piece.traffic_type = COMMON__V2__TRAFFIC_TYPE__REMOTE_PEER;
    piece.cost = &cost;
    piece.created_at = &created;
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_piece_finished(sc->s, rd->st, rd->req->task_id, rd->peer_id, &piece, err);
}

static int report_piece_failed(struct run *rd, uint32_t number, const char *parent_id,
                               struct dfc_error *err) {
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_piece_failed(sc->s, rd->st, rd->req->task_id, rd->peer_id, number, parent_id,
                                 err);
}

/* rd->mu held: records a fatal error (the first one wins) and ends the round. */
static void set_fatal(struct run *rd, int r, const struct dfc_error *err) {
    if (rd->fatal == 0) {
        rd->fatal = r;
        rd->fatal_err = *err;
        rd->fatal_err.code = r;
    }
    rd->round_over = true;
}

/* The sink of a streamed piece: each chunk is received into a buffer of the round's writer
 * and queued to it, to be written at its place in the replica (piece_writer.h). */
static void *sink_buffer(void *arg) {
    struct dfd_piece_job *j = arg;
    return dfd_piece_writer_buffer(j->w);
}

static int sink_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    (void)err; /* a write error is the job's, seen by dfd_piece_job_wait */
    struct dfd_piece_job *j = arg;
    dfd_piece_writer_put(j, at, (void *)data, n);
    return 0;
}

static void sink_release(void *arg, void *buf) {
    struct dfd_piece_job *j = arg;
    dfd_piece_writer_release(j->w, buf);
}

/* One attempt at piece number from pa. With a whole-piece buffer (the caller wants the bytes)
 * they land there and are written in one go once verified; otherwise they stream through the
 * worker's chunk buffer into the claimed range of the replica, and the piece counts as written
 * only once the CRC checked out (until then a failure drops the claim). *ret_ours tells a
 * storage failure (fatal) from the parent's (try the next). */
static int fetch_from(struct run *rd, const struct parent *pa, uint32_t number,
                      const struct worker_buf *wb, struct dfd_vortex_fetched *got, bool *ret_ours,
                      struct dfc_error *err) {
    uint64_t off = piece_offset(rd, number), len = piece_len(rd, number);
    int64_t timeout = rd->p->o.piece_timeout_ns;
    *ret_ours = false;
    if (wb->whole) {
        int r = dfd_vortex_fetch(pa->vortex_ip, pa->vortex_port, rd->req->task_id, number, off, len,
                                 wb->buf, timeout, got, err);
        if (r < 0) {
            return r;
        }
        *ret_ours = true;
        return dfd_replica_write_piece(rd->rep, number, wb->buf, (size_t)len, got->crc32, err);
    }
    int r = dfd_replica_claim_piece(rd->rep, number, (size_t)len, err);
    if (r < 0) {
        *ret_ours = true;
        return r;
    }
    struct dfd_piece_job job;
    dfd_piece_job_init(&job, rd->writer, number);
    struct dfd_vortex_sink sink = {
        .arg = &job, .write = sink_write, .buffer = sink_buffer, .release = sink_release};
    r = dfd_vortex_fetch_to(pa->vortex_ip, pa->vortex_port, rd->req->task_id, number, off, len,
                            &sink, NULL, wb->len, timeout, got, err);
    /* The writer may still be writing the piece's chunks: only once they are all written is
     * the claim dropped or the piece marked written. A write error is ours, not the parent's. */
    struct dfc_error werr;
    int wr = dfd_piece_job_wait(&job, &werr);
    if (wr < 0) {
        *err = werr;
        r = wr;
        *ret_ours = true;
    }
    dfd_replica_finish_piece(rd->rep, number, r == 0, r == 0 ? got->crc32 : 0);
    return r;
}

/* rd->mu held: the parent to try piece i on next, k in round-robin order from the piece's
 * number modulo the parent count, skipping those in tried: the first that reported the
 * piece. A parent still syncing that has not reported it yet is waited for (its answers come
 * in piece order, tens of microseconds apart), so the pieces spread over the parents as if
 * every list had been in before the first fetch; one whose sync ended without the piece is
 * passed over. SIZE_MAX: no parent left to try, or the round is over. */
static size_t next_parent(struct run *rd, size_t i, uint64_t tried) {
    uint32_t number = rd->missing[i];
    for (;;) {
        size_t wait_for = SIZE_MAX;
        for (size_t t = 0; !rd->round_over && t < rd->n_parents; t++) {
            size_t k = (number + t) % rd->n_parents;
            uint64_t bit = UINT64_C(1) << k;
            if ((tried & bit) != 0) {
                continue;
            }
            if ((rd->have[i] & bit) != 0) {
                return k;
            }
            if (rd->parents[k].syncing) {
                wait_for = k;
                break;
            }
        }
        if (wait_for == SIZE_MAX) {
            return SIZE_MAX;
        }
        pthread_cond_wait(&rd->synced, &rd->mu);
    }
}

/* Fetches missing piece i from its parents; written and reported, or reported failed. */
static void fetch_piece(struct run *rd, size_t i, struct worker_buf *wb) {
    uint32_t number = rd->missing[i];
    const char *last = NULL;
    uint64_t tried = 0;
    for (;;) {
        pthread_mutex_lock(&rd->mu);
        size_t k = next_parent(rd, i, tried);
        pthread_mutex_unlock(&rd->mu);
        if (k == SIZE_MAX) {
            break;
        }
        tried |= UINT64_C(1) << k;
        struct parent *pa = &rd->parents[k];
        if (stopped(rd)) {
            struct dfc_error e;
            dfc_error_set(&e, -ECANCELED, "the download was cancelled");
            pthread_mutex_lock(&rd->mu);
            set_fatal(rd, -ECANCELED, &e);
            pthread_mutex_unlock(&rd->mu);
            return;
        }
        last = pa->id;
        struct dfd_vortex_fetched got;
        struct dfc_error err;
        bool ours = false;
        int r = fetch_from(rd, pa, number, wb, &got, &ours, &err);
        if (r == DFC_E_DATA_LOSS) {
            dfc_metric_inc(rd->p->o.crc_failures, 0, 1);
        }
        if (r < 0 && !ours) {
            DFC_LOG(DFC_LOG_WARN, "p2p.piece_failed",
                    "task_id=%s piece=%u parent=%s code=%s error=\"%s\", trying the next parent",
                    rd->req->task_id, (unsigned)number, pa->id, dfc_error_name(r),
                    dfc_error_msg(&err));
            pthread_mutex_lock(&rd->mu);
            pa->failed = true;
            pthread_mutex_unlock(&rd->mu);
            continue;
        }
        pthread_mutex_lock(&rd->mu);
        if (r == 0) {
            dfc_metric_inc(rd->p->o.fetched_pieces, 0, 1);
            dfc_metric_inc(rd->p->o.fetched_bytes, 0, piece_len(rd, number));
            r = report_piece(rd, number, wb->whole ? wb->buf : NULL, got.crc32, pa, got.cost_ns,
                             &err);
            rd->written++;
            pa->fetched++;
        }
        if (r < 0) {
            set_fatal(rd, r, &err);
        }
        pthread_mutex_unlock(&rd->mu);
        return;
    }
    if (last == NULL) {
        return; /* no parent has it this round: missing, rescheduled */
    }
    pthread_mutex_lock(&rd->mu);
    struct dfc_error err;
    if (!rd->round_over && report_piece_failed(rd, number, last, &err) < 0) {
        set_fatal(rd, err.code, &err);
    }
    rd->round_over = true;
    pthread_mutex_unlock(&rd->mu);
}

static bool whole_pieces(const struct run *rd) {
    return rd->prog != NULL && rd->prog->piece_data;
}

static void *worker_main(void *arg) {
    struct run *rd = arg;
    struct worker_buf wb = {.whole = whole_pieces(rd)};
    wb.len = wb.whole ? (size_t)rd->piece_length : STREAM_CHUNK;
    wb.buf = wb.whole ? malloc(wb.len) : NULL; /* streamed: the writer's buffers */
    pthread_mutex_lock(&rd->mu);
    if (wb.whole && wb.buf == NULL) {
        struct dfc_error e;
        dfc_error_set(&e, -ENOMEM, "out of memory for a piece buffer");
        set_fatal(rd, -ENOMEM, &e);
    }
    while (!rd->round_over && rd->next < rd->n_missing) {
        size_t i = rd->next++;
        pthread_mutex_unlock(&rd->mu);
        fetch_piece(rd, i, &wb);
        pthread_mutex_lock(&rd->mu);
    }
    pthread_mutex_unlock(&rd->mu);
    free(wb.buf);
    return NULL;
}

/* Runs this round's workers (and its piece writer) until they are all done. 0, or an error
 * starting the writer. */
static int round_workers(struct run *rd, struct dfc_error *err) {
    size_t n = rd->p->o.concurrent_piece_count;
    if (n > rd->n_missing) {
        n = rd->n_missing;
    }
    pthread_t *tids = calloc(n ? n : 1, sizeof(*tids));
    if (tids == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = 0;
    if (n > 0 && !whole_pieces(rd)) {
        r = dfd_piece_writer_new(rd->rep, n * WRITER_BUFS_PER_WORKER, STREAM_CHUNK, &rd->writer,
                                 err);
    }
    if (r < 0) {
        free(tids);
        return r;
    }
    size_t started = 0;
    for (; started < n; started++) {
        if (pthread_create(&tids[started], NULL, worker_main, rd) != 0) {
            break;
        }
    }
    if (started == 0 && n > 0) {
        worker_main(rd); /* no thread could be made: fetch on this one */
    }
    for (size_t i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
    }
    free(tids);
    dfd_piece_writer_free(rd->writer); /* every job was waited for by its worker */
    rd->writer = NULL;
    return 0;
}

/* One round against rd->parents. Returns 0 (pieces may still be missing) or a fatal error. */
static int run_round(struct run *rd, struct dfc_error *err) {
    rd->n_missing = dfd_replica_missing(rd->rep, rd->missing, rd->piece_count);
    memset(rd->have, 0, rd->n_missing * sizeof(*rd->have));
    rd->next = 0;
    rd->round_over = false;
    if (stopped(rd)) {
        return dfc_error_set(err, -ECANCELED, "the download was cancelled");
    }
    struct sync_job jobs[DFD_P2P_MAX_PARENTS];
    pthread_t sync_tids[DFD_P2P_MAX_PARENTS];
    bool sync_started[DFD_P2P_MAX_PARENTS] = {false};
    size_t n_parents = rd->n_parents;
    for (size_t k = 0; k < n_parents; k++) {
        rd->parents[k].syncing = true; /* before any sync thread or worker runs */
    }
    for (size_t k = 0; k < n_parents; k++) {
        jobs[k] = (struct sync_job){.rd = rd, .k = k};
        sync_started[k] = pthread_create(&sync_tids[k], NULL, sync_main, &jobs[k]) == 0;
        if (!sync_started[k]) {
            sync_parent(rd, k); /* no thread: ask it here */
        }
    }
    int r = round_workers(rd, err);
    for (size_t k = 0; k < n_parents; k++) {
        if (sync_started[k]) {
            pthread_join(sync_tids[k], NULL);
        }
    }
    if (r < 0) {
        return r;
    }
    if (rd->fatal < 0) {
        *err = rd->fatal_err;
        return rd->fatal;
    }
    return 0;
}

/* Receives the scheduler's next answer into rd->normal: 1 Normal (parents taken), 0 Empty. */
static int recv_answer(struct run *rd, struct dfc_error *err) {
    ProtobufCMessage *msg = NULL;
    int r = dfc_rpc_stream_recv(
        rd->st, &scheduler__v2__announce_persistent_cache_peer_response__descriptor, &msg, err);
    if (r == 0) {
        return dfc_error_set(err, DFC_E_ABORTED,
                             "scheduler AnnouncePersistentCachePeer ended without an answer");
    }
    if (r < 0) {
        return dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer");
    }
    dfc_rpc_msg_free(rd->normal);
    rd->normal = msg;
    rd->n_parents = 0;
    const Scheduler__V2__AnnouncePersistentCachePeerResponse *m = (const void *)msg;
    switch (m->response_case) {
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_EMPTY_PERSISTENT_CACHE_TASK_RESPONSE:
        return 0;
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_RESPONSE__RESPONSE_NORMAL_PERSISTENT_CACHE_TASK_RESPONSE:
        take_parents(rd, m->normal_persistent_cache_task_response);
        return 1;
    default:
        return dfc_error_set(err, -EPROTO,
                             "scheduler AnnouncePersistentCachePeer: an answer "
                             "that is neither empty nor normal");
    }
}

/* The rounds, until every piece is written; 0 or an error (the caller tells the scheduler). */
static int rounds(struct run *rd, struct dfc_error *err) {
    uint64_t max = rd->p->o.max_schedule_count;
    for (uint64_t round = 1;; round++) {
        int normal = recv_answer(rd, err);
        if (normal < 0) {
            return normal;
        }
        int r;
        if (!rd->sent_started) {
            r = send_simple(rd, DFD_SCHED_PEER_STARTED, NULL, err);
            if (r < 0) {
                return r;
            }
            rd->sent_started = true;
        }
        if (normal == 0 || rd->piece_count == 0) {
            if (rd->piece_count != 0) {
                return dfc_error_set(err, -EPROTO,
                                     "the scheduler says task %s is empty, it has %u pieces",
                                     rd->req->task_id, (unsigned)rd->piece_count);
            }
            return 0;
        }
        if ((r = run_round(rd, err)) < 0) {
            return r;
        }
        if (dfd_replica_missing(rd->rep, rd->missing, 1) == 0) {
            char from[DFD_P2P_MAX_PARENTS * 24] = "";
            size_t used = 0;
            for (size_t k = 0; k < rd->n_parents && used < sizeof(from); k++) {
                int w = snprintf(from + used, sizeof(from) - used, "%s%s:%u", k ? "," : "",
                                 rd->parents[k].host_ip, rd->parents[k].fetched);
                used += w > 0 ? (size_t)w : 0;
            }
            DFC_LOG(DFC_LOG_INFO, "p2p.download_done",
                    "task_id=%s pieces=%u bytes=%" PRIu64 " rounds=%" PRIu64
                    " last_round_pieces_by_parent=%s",
                    rd->req->task_id, (unsigned)rd->piece_count, rd->content_length, round, from);
            return 0;
        }
        char why[96];
        snprintf(why, sizeof(why), "round %" PRIu64 ": %zu of %u pieces missing", round,
                 dfd_replica_missing(rd->rep, rd->missing, rd->piece_count),
                 (unsigned)rd->piece_count);
        if (round >= max) {
            return dfc_error_set(err, DFC_E_ABORTED,
                                 "task %s: max schedule count exceeded (%" PRIu64 " rounds; %s)",
                                 rd->req->task_id, max, why);
        }
        DFC_LOG(DFC_LOG_INFO, "p2p.reschedule", "task_id=%s %s", rd->req->task_id, why);
        if ((r = send_reschedule(rd, why, err)) < 0) {
            return r;
        }
    }
}

/* Stat, begin the replica, register, rounds, commit. */
static int download(struct run *rd, struct dfd_task_meta *ret, struct dfc_error *err) {
    struct dfd_p2p *p = rd->p;
    const struct dfd_p2p_request *req = rd->req;
    Common__V2__PersistentCacheTask *task = NULL;
    int r = p->o.sched.stat_task(p->o.sched.s, req->task_id, &task, err);
    if (r == -ENOENT) {
        return dfc_error_set(err, -ENOENT, "persistent cache task %s not found", req->task_id);
    }
    if (r < 0) {
        return r;
    }
    int64_t ttl_ns = 0, created_ns = 0;
    if (task->ttl == NULL || dfc_pb_duration_to_ns(task->ttl, &ttl_ns) < 0 ||
        task->created_at == NULL || dfc_pb_timestamp_to_ns(task->created_at, &created_ns) < 0) {
        dfc_rpc_msg_free(&task->base);
        return dfc_error_set(err, -EPROTO, "the scheduler's task %s has no valid ttl or created_at",
                             req->task_id);
    }
    const char *tag = req->tag != NULL ? req->tag : (task->opt_tag_case ? task->tag : NULL);
    const char *app = req->application != NULL
                          ? req->application
                          : (task->opt_application_case ? task->application : NULL);
    rd->piece_length = task->piece_length;
    rd->content_length = task->content_length;
    rd->piece_count = task->piece_count;
    struct dfd_replica_params rp = {
        .id = req->task_id,
        .tag = tag,
        .application = app,
        .piece_length = task->piece_length,
        .content_length = task->content_length,
        .piece_count = task->piece_count,
        .replica_count = task->persistent_replica_count,
        .ttl_ns = ttl_ns,
        .created_at_ns = created_ns,
        .persistent = req->persistent,
        .peer_id = rd->peer_id,
    };
    /* replica_begin checks the geometry (piece_count against content and piece length) and
     * the space, so nothing below trusts the scheduler's numbers unchecked. */
    r = dfd_replica_begin(p->storage, &rp, &rd->rep, err);
    if (r == 0 && rd->prog != NULL && rd->prog->started != NULL) {
        r = rd->prog->started(rd->prog->arg, rd->content_length, err);
    }
    if (r == 0) {
        rd->missing = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->missing));
        rd->have = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*rd->have));
        if (rd->missing == NULL || rd->have == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    if (r == 0) {
        r = p->o.sched.announce_open(p->o.sched.s, req->task_id,
                                     p->o.schedule_timeout_ns / DFC_NS_PER_MS, &rd->st, err);
    }
    if (r == 0) {
        pthread_mutex_lock(&p->mu);
        rd->a->st = rd->st;
        if (p->stopping) {
            dfc_rpc_stream_cancel(rd->st);
        }
        pthread_mutex_unlock(&p->mu);
        r = send_register(rd, tag, app, err);
        if (r == 0) {
            r = rounds(rd, err);
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (r == 0) {
            r = dfd_replica_commit(rd->rep, dfc_timespec_to_ns(&now), ret, err);
            rd->rep = NULL;
        }
        struct dfc_error e;
        if (r == 0) {
            if (send_simple(rd, DFD_SCHED_PEER_FINISHED, NULL, &e) < 0 ||
                dfc_rpc_stream_finish(rd->st, &e) < 0) {
                DFC_LOG(DFC_LOG_WARN, "p2p.finished_not_told",
                        "task_id=%s error=\"%s\", ignoring (the copy is committed)", req->task_id,
                        dfc_error_msg(&e));
            }
        } else if (send_simple(rd, DFD_SCHED_PEER_FAILED, dfc_error_msg(err), &e) == 0) {
            (void)dfc_rpc_stream_finish(rd->st, &e);
        }
        pthread_mutex_lock(&p->mu);
        rd->a->st = NULL;
        pthread_mutex_unlock(&p->mu);
    }
    dfc_rpc_stream_free(rd->st);
    rd->st = NULL;
    dfd_replica_abort(rd->rep);
    rd->rep = NULL;
    dfc_rpc_msg_free(rd->normal);
    rd->normal = NULL;
    free(rd->missing);
    free(rd->have);
    dfc_rpc_msg_free(&task->base);
    return r;
}

/* ---- the table of downloads in progress ---- */

static struct active *find_active(struct dfd_p2p *p, const char *id) {
    for (struct active *a = p->active; a != NULL; a = a->next) {
        if (strcmp(a->id, id) == 0) {
            return a;
        }
    }
    return NULL;
}

static void unlink_active(struct dfd_p2p *p, struct active *a) {
    for (struct active **pp = &p->active; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            return;
        }
    }
}

/* p->mu held: drops a reference; the last one frees. */
static void put_active(struct active *a) {
    if (--a->refs == 0) {
        free(a);
    }
}

/* Waits for a (p->mu held) to finish; -ECANCELED when our own caller goes away meanwhile. */
static int wait_active(struct dfd_p2p *p, struct active *a, const struct dfd_p2p_progress *prog,
                       struct dfc_error *err) {
    while (!a->done) {
        if (p->stopping) {
            return dfc_error_set(err, -ECANCELED, "dfdaemon is stopping");
        }
        if (prog != NULL && prog->should_stop != NULL) {
            pthread_mutex_unlock(&p->mu);
            bool stop = prog->should_stop(prog->arg);
            pthread_mutex_lock(&p->mu);
            if (stop) {
                return dfc_error_set(err, -ECANCELED, "the download was cancelled");
            }
        }
        struct timespec dl = dfc_deadline_after(WAIT_TICK_NS);
        pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    }
    return 0;
}

/* A stored task is returned at once; with persistent asked for, it is made persistent. */
static int get_local(struct dfd_p2p *p, const struct dfd_p2p_request *req,
                     struct dfd_task_meta *ret, struct dfc_error *err) {
    int r = dfd_storage_get(p->storage, req->task_id, ret, err);
    if (r == 0 && req->persistent && !ret->persistent) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        r = dfd_storage_set_persistent(p->storage, req->task_id, true, dfc_timespec_to_ns(&now),
                                       err);
        if (r == 0) {
            ret->persistent = true;
        } else {
            dfd_task_meta_done(ret);
        }
    }
    return r;
}

static int lead(struct dfd_p2p *p, struct active *a, const struct dfd_p2p_request *req,
                const struct dfd_p2p_progress *prog, struct dfd_task_meta *ret,
                struct dfc_error *err) {
    struct run *rd = calloc(1, sizeof(*rd));
    if (rd == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    rd->p = p;
    rd->req = req;
    rd->prog = prog;
    rd->a = a;
    pthread_mutex_init(&rd->mu, NULL);
    pthread_cond_init(&rd->synced, NULL);
    int r = dfc_peer_id(p->o.host_ip, p->o.hostname, rd->peer_id, sizeof(rd->peer_id));
    if (r < 0) {
        dfc_error_set(err, r, "host.ip and host.hostname make a peer id that is too long");
    } else {
        r = download(rd, ret, err);
    }
    if (r == -EEXIST && dfd_storage_get(p->storage, req->task_id, ret, err) == 0) {
        r = 0; /* it appeared meanwhile (an import of the same id) */
    }
    if (r < 0) {
        DFC_LOG(DFC_LOG_WARN, "p2p.download_failed", "task_id=%s code=%s error=\"%s\"",
                req->task_id, dfc_error_name(r), dfc_error_msg(err));
    }
    pthread_cond_destroy(&rd->synced);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
    return r;
}

int dfd_p2p_fetch(struct dfd_p2p *p, const struct dfd_p2p_request *req,
                  const struct dfd_p2p_progress *prog, struct dfd_task_meta *ret,
                  struct dfc_error *err) {
    if (!dfd_task_id_valid(req->task_id)) {
        return dfc_error_set(err, -EINVAL, "task_id: must be 64 lowercase hex digits");
    }
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return dfc_error_set(err, -ECANCELED, "dfdaemon is stopping");
    }
    p->running++;
    int r;
    for (;;) {
        pthread_mutex_unlock(&p->mu);
        r = get_local(p, req, ret, err);
        pthread_mutex_lock(&p->mu);
        if (r != -ENOENT) {
            break;
        }
        struct active *a = find_active(p, req->task_id);
        if (a != NULL) {
            a->refs++;
            r = wait_active(p, a, prog, err);
            bool retry = r == 0 && a->result < 0 && a->leader_cancelled && !p->stopping;
            if (r == 0 && a->result < 0 && !retry) {
                r = a->result;
                *err = a->err;
            }
            put_active(a);
            if (r < 0) {
                break;
            }
            continue; /* done: read it back, or lead a new download */
        }
        a = calloc(1, sizeof(*a));
        if (a == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        snprintf(a->id, sizeof(a->id), "%s", req->task_id);
        a->refs = 1;
        a->next = p->active;
        p->active = a;
        pthread_mutex_unlock(&p->mu);
        r = lead(p, a, req, prog, ret, err);
        pthread_mutex_lock(&p->mu);
        a->done = true;
        a->result = r;
        if (r < 0) {
            a->err = *err;
        }
        a->leader_cancelled = r == -ECANCELED;
        unlink_active(p, a);
        put_active(a);
        pthread_cond_broadcast(&p->cv);
        break;
    }
    p->running--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return r;
}
