/*
 * download_piece.c - one piece of a P2P download (download_internal.h): its fetch from one
 * parent over Vortex, streamed through the piece writer or received whole, its check against
 * the importer's record as the bytes pass (verify.h, docs/integrity.md), and its report to the
 * caller and the scheduler. Which piece from which parent is download_round.c's choice.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/digest.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dragonfly/common.pb-c.h"
#include "p2p/download_internal.h"
#include "p2p/piece_writer.h"
#include "p2p/vortex_client.h"

/* A streamed piece's sink: its writer job (first: the writer's callbacks take it) and the
 * worker's hash (NULL: no record to check against), fed each chunk before it is handed to the
 * writer. */
struct sink_ctx {
    struct dfd_piece_job job;
    struct dfc_sha256c *sha;
    struct worker_buf *wb; /* its done and cancel (the endgame) */
};

/* rd->mu held: a send on the scheduler stream failed (the scheduler restarted, or went away).
 * The download goes on with the parents it has; nothing more is sent on the stream. */
void dfd__sched_lost(struct run *rd, const struct dfc_error *e) {
    if (!rd->sched_lost) {
        rd->sched_lost = true;
        DFC_LOG(DFC_LOG_WARN, "p2p.scheduler_lost",
                "task_id=%s error=\"%s\", going on with the parents known", rd->req->task_id,
                dfc_error_msg(e));
    }
}

/* Reports a written piece to the caller and the scheduler; rd->mu held. Only the caller's
 * error fails the download. */
int dfd__report_piece(struct run *rd, uint32_t number, const void *buf, uint32_t crc,
                      const struct parent *pa, uint64_t cost_ns, struct dfc_error *err) {
    struct dfd_piece_meta pm = {.number = number,
                                .offset = dfd__piece_offset(rd, number),
                                .length = dfd__piece_len(rd, number)};
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
    struct dfc_error e;
    if (!rd->sched_lost &&
        sc->peer_piece_finished(sc->s, rd->st, rd->req->task_id, rd->peer_id, &piece, &e) < 0) {
        dfd__sched_lost(rd, &e);
    }
    return 0;
}

/* Reports a piece that failed on parent_id; rd->mu held. A failed send is not the
 * download's failure (sched_lost). */
void dfd__report_piece_failed(struct run *rd, uint32_t number, const char *parent_id,
                              bool temporary) {
    const struct dfd_p2p_sched *sc = &rd->p->o.sched;
    struct dfc_error e;
    if (!rd->sched_lost && sc->peer_piece_failed(sc->s, rd->st, rd->req->task_id, rd->peer_id,
                                                 number, parent_id, temporary, &e) < 0) {
        dfd__sched_lost(rd, &e);
    }
}

bool dfd__stopped(struct run *rd) {
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

/* rd->mu held: records a fatal error (the first one wins) and ends the round. */
void dfd__set_fatal(struct run *rd, int r, const struct dfc_error *err) {
    if (rd->fatal == 0) {
        rd->fatal = r;
        rd->fatal_err = *err;
        rd->fatal_err.code = r;
    }
    rd->over = true;
    pthread_cond_broadcast(&rd->synced);
    pthread_cond_broadcast(&rd->watch);
}

/* The sink of a streamed piece: each chunk is received into a buffer of the round's writer
 * and queued to it, to be written at its place in the replica (piece_writer.h). */
static void *sink_buffer(void *arg) {
    struct sink_ctx *c = arg;
    return dfd_piece_writer_buffer(c->job.w);
}

static int sink_write(void *arg, uint64_t at, const void *data, size_t n, struct dfc_error *err) {
    struct sink_ctx *c = arg;
    if (__atomic_load_n(&c->wb->cancel, __ATOMIC_RELAXED)) {
        dfd_piece_writer_release(c->job.w, (void *)data);
        return dfc_error_set(err, -ECANCELED, "given up for a faster parent (endgame)");
    }
    __atomic_store_n(&c->wb->done, at + n, __ATOMIC_RELAXED);
    /* A write error is the job's, seen by dfd_piece_job_wait. */
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
    uint64_t off = dfd__piece_offset(rd, number), len = dfd__piece_len(rd, number);
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
int dfd__fetch_from(struct run *rd, const struct parent *pa, uint32_t number, struct worker_buf *wb,
                    struct dfd_vortex_fetched *got, bool *ret_ours, enum piece_verdict *ret_verdict,
                    struct dfc_error *err) {
    uint64_t off = dfd__piece_offset(rd, number), len = dfd__piece_len(rd, number);
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
    struct sink_ctx ctx = {.sha = check ? &wb->sha : NULL, .wb = wb};
    dfd_piece_job_init(&ctx.job, rd->writer, number);
    struct dfd_vortex_sink sink = {.arg = &ctx,
                                   .idle_ns = PARENT_IDLE_NS,
                                   .write = sink_write,
                                   .buffer = sink_buffer,
                                   .release = sink_release};
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
