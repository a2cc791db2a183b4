/*
 * download_round.c - one round of a P2P download (download_internal.h): the parents' piece
 * lists, the piece workers, each piece's fetch, check and write, and its report to the caller
 * and the scheduler. The table of downloads and the rounds' loop are download.c's.
 *
 * DESIGN
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
 *   next of them is tried. With a record, each piece is hashed by its worker as the bytes pass,
 *   resumed from the record's digest before it, and judged before the piece counts as written
 *   (verify.h, docs/integrity.md): bytes no record has exclude their parent for the rest of the
 *   download and are reported DownloadPieceFailed{temporary = false}. Without one, a written
 *   piece is handed to the running content hash instead. A piece that failed on every parent that
 * had it is reported DownloadPieceFailed{temporary} and ends the round: the workers take no new
 * piece.
 *
 *   Everything a remote peer sends is bounded here: at most DFD_P2P_MAX_PARENTS parents, each
 *   with a valid IP and port; a reported piece number must be one we asked for, its offset and
 *   length must be our geometry's, and a parent gets at most as many answers read as pieces it
 *   was asked for; a piece's bytes are read into a buffer sized by our geometry
 *   (dfd_vortex_fetch checks the parent's metadata against it, and the CRC).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/addr.h"
#include "dfc/digest.h"
#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_client.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download_internal.h"
#include "p2p/piece_writer.h"
#include "p2p/vortex_client.h"

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

/* ---- parents ---- */

static bool valid_ip(const char *ip) {
    return ip != NULL && strlen(ip) < IP_MAX && dfc_addr_is_ip(ip);
}

void dfd__take_parents(struct run *rd, const Scheduler__V2__NormalPersistentCacheTaskResponse *n) {
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
        const char *hid = h->id != NULL && h->id[0] != '\0' ? h->id : pe->id;
        bool excluded = false;
        for (size_t x = 0; x < rd->n_excluded && !excluded; x++) {
            excluded = strcmp(rd->excluded[x], hid) == 0;
        }
        if (excluded) {
            continue; /* it served bytes that failed verification in this download */
        }
        struct parent *pa = &rd->parents[rd->n_parents++];
        memset(pa, 0, sizeof(*pa));
        pa->peer = pe;
        pa->id = pe->id;
        pa->host_id = hid;
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
    struct dfc_rpc_client_opts co = {.tls = rd->p->o.tls, .tls_files = rd->p->o.tls_files};
    int r = dfc_rpc_client_new(target, &co, &c, &err);
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
    struct dfc_sha256c sha; /* each piece's hash, resumed from the record, as its bytes pass */
};

/* A streamed piece's sink: its writer job (first: the writer's callbacks take it) and the
 * worker's hash (NULL: no record to check against), fed each chunk before it is handed to the
 * writer. */
struct sink_ctx {
    struct dfd_piece_job job;
    struct dfc_sha256c *sha;
};

/* What a piece's bytes are, judged against the records (docs/integrity.md). */
enum piece_verdict {
    PIECE_OK,           /* the record in use has them */
    PIECE_OTHER_RECORD, /* another usable record not known bad has them: not a lie per se */
    PIECE_LIE,          /* no record (but known bad ones) has them */
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
                               bool temporary, struct dfc_error *err) {
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    return sc->peer_piece_failed(sc->s, rd->st, rd->req->task_id, rd->peer_id, number, parent_id,
                                 temporary, err);
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
    struct sink_ctx *c = arg;
    return dfd_piece_writer_buffer(c->job.w);
}

static int sink_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    (void)err; /* a write error is the job's, seen by dfd_piece_job_wait */
    struct sink_ctx *c = arg;
    if (c->sha != NULL) {
        dfc_sha256c_update(c->sha, data, n); /* chunks come in order, each once */
    }
    dfd_piece_writer_put(&c->job, at, (void *)data, n);
    return 0;
}

static void sink_release(void *arg, void *buf) {
    struct sink_ctx *c = arg;
    dfd_piece_writer_release(c->job.w, buf);
}

/* Whether piece number's bytes (whole, or read back from the spool when NULL) check out
 * against rec. */
static bool rehash_matches(struct run *rd, uint32_t number, const dfd_digest_record *rec,
                           const void *whole) {
    struct dfc_sha256c c;
    if (dfc_sha256c_init(&c) < 0) {
        return false;
    }
    bool ok = dfd_verify_resume(&c, rec, number, rd->piece_length) == 0;
    uint64_t off = piece_offset(rd, number), len = piece_len(rd, number);
    uint8_t *buf = whole == NULL ? malloc(STREAM_CHUNK) : NULL;
    if (whole != NULL) {
        dfc_sha256c_update(&c, whole, (size_t)len);
    } else {
        ok = ok && buf != NULL;
        for (uint64_t at = 0; ok && at < len; at += STREAM_CHUNK) {
            size_t n = len - at < STREAM_CHUNK ? (size_t)(len - at) : STREAM_CHUNK;
            struct dfc_error e;
            ok = dfd_replica_pread(rd->rep, off + at, buf, n, &e) == 0;
            dfc_sha256c_update(&c, buf, n);
        }
    }
    ok = ok && dfd_verify_end(&c, rec, number);
    free(buf);
    dfc_sha256c_done(&c);
    return ok;
}

/* The verdict on piece number's bytes, which went through wb->sha resumed for the record in
 * use (whole: the bytes, else in the spool); a refusal sets err. The last piece's unfinished
 * content hash goes to rd->tail when it passes: the end check starts from it. */
static enum piece_verdict judge(struct run *rd, struct worker_buf *wb, uint32_t number,
                                const void *whole, struct dfc_error *err) {
    const dfd_digest_record *rec = rd->records[rd->rec];
    struct dfc_sha256c tail = {0};
    bool last = number + 1 == rd->piece_count;
    if (last && dfc_sha256c_copy(&tail, &wb->sha) < 0) {
        dfc_error_set(err, -ENOMEM, "out of memory");
        return PIECE_OTHER_RECORD; /* not the parent's fault */
    }
    if (dfd_verify_end(&wb->sha, rec, number)) {
        if (last) {
            pthread_mutex_lock(&rd->mu);
            dfc_sha256c_done(&rd->tail);
            rd->tail = tail;
            pthread_mutex_unlock(&rd->mu);
        }
        return PIECE_OK;
    }
    dfc_sha256c_done(&tail);
    enum piece_verdict v = PIECE_LIE;
    for (size_t j = 0; j < rd->n_records && v == PIECE_LIE; j++) {
        if (j != rd->rec && !rd->bad_record[j] &&
            dfd_verify_usable(rd->records[j], rd->piece_length, rd->content_length) &&
            rehash_matches(rd, number, rd->records[j], whole)) {
            v = PIECE_OTHER_RECORD;
        }
    }
    dfc_error_set(err, DFC_E_DATA_LOSS, "piece %u: its SHA-256 is not the recorded one (%s)",
                  (unsigned)number,
                  v == PIECE_LIE ? "no importer recorded these bytes"
                                 : "another importer's record has them");
    return v;
}

/* One attempt at piece number from pa. With a whole-piece buffer (the caller wants the bytes)
 * they land there and are written in one go once verified; otherwise they stream through the
 * worker's chunk buffer into the claimed range of the replica, and the piece counts as written
 * only once the CRC checked out (until then a failure drops the claim). *ret_ours tells a
 * storage failure (fatal) from the parent's (try the next). */
static int fetch_from(struct run *rd, const struct parent *pa, uint32_t number,
                      struct worker_buf *wb, struct dfd_vortex_fetched *got, bool *ret_ours,
                      enum piece_verdict *ret_verdict, struct dfc_error *err) {
    uint64_t off = piece_offset(rd, number), len = piece_len(rd, number);
    int64_t timeout = rd->p->o.piece_timeout_ns;
    bool check = rd->rec < rd->n_records; /* else the end check alone decides */
    *ret_ours = false;
    *ret_verdict = PIECE_OK;
    if (check && dfd_verify_resume(&wb->sha, rd->records[rd->rec], number, rd->piece_length) < 0) {
        *ret_ours = true;
        return dfc_error_set(err, -EINVAL, "piece %u: cannot resume its hash", (unsigned)number);
    }
    if (wb->whole) {
        int r = dfd_vortex_fetch(rd->p->o.vortex_tls, rd->p->o.download_rate, pa->vortex_ip,
                                 pa->vortex_port, rd->req->task_id, number, off, len, wb->buf,
                                 timeout, got, err);
        if (r < 0) {
            return r;
        }
        if (check) {
            dfc_sha256c_update(&wb->sha, wb->buf, (size_t)len);
            if ((*ret_verdict = judge(rd, wb, number, wb->buf, err)) != PIECE_OK) {
                return DFC_E_DATA_LOSS; /* checked before anything is written */
            }
        }
        *ret_ours = true;
        return dfd_replica_write_piece(rd->rep, number, wb->buf, (size_t)len, got->crc32, err);
    }
    int r = dfd_replica_claim_piece(rd->rep, number, (size_t)len, err);
    if (r < 0) {
        *ret_ours = true;
        return r;
    }
    struct sink_ctx ctx = {.sha = check ? &wb->sha : NULL};
    dfd_piece_job_init(&ctx.job, rd->writer, number);
    struct dfd_vortex_sink sink = {
        .arg = &ctx, .write = sink_write, .buffer = sink_buffer, .release = sink_release};
    r = dfd_vortex_fetch_to(rd->p->o.vortex_tls, rd->p->o.download_rate, pa->vortex_ip,
                            pa->vortex_port, rd->req->task_id, number, off, len, &sink, NULL,
                            wb->len, timeout, got, err);
    /* The writer may still be writing the piece's chunks: only once they are all written is
     * the claim dropped or the piece marked written. A write error is ours, not the parent's. */
    struct dfc_error werr;
    int wr = dfd_piece_job_wait(&ctx.job, &werr);
    if (wr < 0) {
        *err = werr;
        r = wr;
        *ret_ours = true;
    }
    /* The piece counts only once it checked out against the record: until then it is a
     * claimed range of the spool, dropped (and fetched again) on a mismatch. */
    if (r == 0 && check && (*ret_verdict = judge(rd, wb, number, NULL, err)) != PIECE_OK) {
        r = DFC_E_DATA_LOSS;
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
            if ((tried & bit) != 0 || rd->parents[k].excluded) {
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
/* rd->mu held: pa served piece number with bytes no record has (a lie, or a corrupt copy):
 * reported to the scheduler with temporary = false (it stops offering pa's host for the task)
 * and never tried again in this download. */
static void exclude(struct run *rd, struct parent *pa, uint32_t number) {
    pa->excluded = true;
    pa->failed = true;
    bool known = false;
    for (size_t x = 0; x < rd->n_excluded && !known; x++) {
        known = strcmp(rd->excluded[x], pa->host_id) == 0;
    }
    if (!known && rd->n_excluded < DFD_P2P_MAX_EXCLUDED) {
        snprintf(rd->excluded[rd->n_excluded++], DFD_PEER_ID_MAX, "%s", pa->host_id);
    }
    struct dfc_error e;
    if (report_piece_failed(rd, number, pa->id, false, &e) < 0) {
        DFC_LOG(DFC_LOG_WARN, "p2p.exclusion_not_told", "task_id=%s parent=%s error=\"%s\"",
                rd->req->task_id, pa->id, dfc_error_msg(&e));
    }
}

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
        enum piece_verdict verdict;
        int r = fetch_from(rd, pa, number, wb, &got, &ours, &verdict, &err);
        if (r == DFC_E_DATA_LOSS && verdict == PIECE_OK) {
            dfc_metric_inc(rd->p->o.crc_failures, 0, 1);
        }
        if (r < 0 && !ours) {
            DFC_LOG(DFC_LOG_WARN, "p2p.piece_failed",
                    "task_id=%s piece=%u parent=%s code=%s error=\"%s\", trying the next parent",
                    rd->req->task_id, (unsigned)number, pa->id, dfc_error_name(r),
                    dfc_error_msg(&err));
            pthread_mutex_lock(&rd->mu);
            pa->failed = true;
            if (verdict == PIECE_LIE) {
                exclude(rd, pa, number);
            }
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
        if (r == 0 && rd->ph != NULL) {
            dfd_prefix_hash_piece(rd->ph, number); /* written: the prefix may read it */
        }
        return;
    }
    if (last == NULL) {
        return; /* no parent has it this round: missing, rescheduled */
    }
    pthread_mutex_lock(&rd->mu);
    struct dfc_error err;
    if (!rd->round_over && report_piece_failed(rd, number, last, true, &err) < 0) {
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
    bool sha = dfc_sha256c_init(&wb.sha) == 0;
    pthread_mutex_lock(&rd->mu);
    if ((wb.whole && wb.buf == NULL) || !sha) {
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
    dfc_sha256c_done(&wb.sha);
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

int dfd__run_round(struct run *rd, struct dfc_error *err) {
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
