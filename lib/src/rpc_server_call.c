/*
 * rpc_server_call.c - one generic state machine for every call of the server, and the answer
 * to calls of methods no table declares.
 *
 * DESIGN
 *
 * Each registered method keeps one grpc_server_request_registered_call() outstanding; unary
 * and server-streaming methods have the request payload read by core. When a call arrives the
 * CQ thread re-posts the request, posts RECV_CLOSE_ON_SERVER (whose completion tells us about
 * cancellation), checks the caps on calls in flight (RESOURCE_EXHAUSTED, naming the limit) and
 * queues the call for a worker (rpc_pool.c). The worker decodes the request, runs the handler,
 * and sends response + status in one batch; for a unary call with a small answer it does not
 * wait for that batch (its completion, on the CQ thread, frees the message). The call is freed
 * when the worker, the close batch and such an answer batch are all done (refcount 2, 3 while
 * that batch is in flight).
 *
 * Calls to methods no table declares arrive through grpc_server_request_call() and are
 * answered UNIMPLEMENTED on the CQ thread (a non-blocking batch).
 *
 * Every function here but dfc__call_run() (and what it calls) runs on the CQ thread and never
 * blocks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>

#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/rpc_server.h"
#include "rpc_internal.h"
#include "rpc_server_internal.h"

/* A unary answer at most this long is sent without the worker waiting (finish_call): far
 * inside the 64 KiB first flow-control window of a stream. */
#define UNARY_NOWAIT_MAX (16 * 1024)

struct unknown_call {
    struct tag new_tag;
    struct tag done_tag;
    struct dfc_rpc_server *server;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_slice status_details;
    int cancelled;
};

static void call_unref(struct dfc_rpc_call *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1) {
        return;
    }
    struct dfc_rpc_server *s = c->server;
    if (c->uid_counted) {
        pthread_mutex_lock(&s->uid_mu);
        dfc__uid_count_sub(&s->call_uids, c->uid);
        pthread_mutex_unlock(&s->uid_mu);
    }
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    if (c->payload != NULL) {
        grpc_byte_buffer_destroy(c->payload);
    }
    if (c->has_status_details) {
        grpc_slice_unref(c->status_details);
    }
    for (size_t i = 0; i < c->n_trailers; i++) {
        grpc_slice_unref(c->trailers[i].key);
        grpc_slice_unref(c->trailers[i].value);
    }
    grpc_metadata_array_destroy(&c->md);
    dfc__waiter_destroy(&c->send_w);
    dfc__waiter_destroy(&c->recv_w);
    dfc__arena_free(c->arena);
    free(c);
    atomic_fetch_sub(&s->in_flight, 1);
}

/* ---- call arrival (CQ thread) ---- */

static void on_new_call(struct tag *t, bool ok);
static void on_close(struct tag *t, bool ok);
static void on_final(struct tag *t, bool ok);

int dfc__call_post(struct registered *m) {
    struct dfc_rpc_server *s = m->server;
    struct dfc_rpc_call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    c->server = s;
    c->method = m;
    c->new_tag.fn = on_new_call;
    c->close_tag.fn = on_close;
    c->final_tag.fn = on_final;
    dfc__waiter_init(&c->send_w);
    dfc__waiter_init(&c->recv_w);
    grpc_metadata_array_init(&c->md);
    bool payload = m->row.kind == DFC_RPC_UNARY || m->row.kind == DFC_RPC_SERVER_STREAM;
    grpc_call_error e = grpc_server_request_registered_call(
        s->server, m->handle, &c->call, &c->deadline, &c->md, payload ? &c->payload : NULL, s->cq,
        s->cq, &c->new_tag);
    if (e != GRPC_CALL_OK) {
        grpc_metadata_array_destroy(&c->md);
        dfc__waiter_destroy(&c->send_w);
        dfc__waiter_destroy(&c->recv_w);
        free(c);
        return -EIO;
    }
    return 0;
}

/* ---- per-call metrics ---- */

#define N_GRPC_CODES 17

/* Seconds, from 1 ms (a Stat) to 10 min (a multi-GiB import). */
static const double call_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,    5,     10,   30,    60,   120, 300,  600};

int dfc__call_declare_metrics(struct dfc_rpc_server *s, struct dfc_error *err) {
    if (s->metrics == NULL || s->n_methods == 0) {
        return 0;
    }
    const char **paths = calloc(s->n_methods, sizeof(*paths));
    if (paths == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n_methods; i++) {
        paths[i] = s->methods[i].path;
    }
    const char *codes[N_GRPC_CODES];
    for (int i = 0; i < N_GRPC_CODES; i++) {
        codes[i] = dfc_grpc_code_name(i);
    }
    const char *server[] = {s->name};
    struct dfc_metric_label labels[] = {
        {"server", server, 1}, {"method", paths, s->n_methods}, {"code", codes, N_GRPC_CODES}};
    char handled[128], seconds[128];
    snprintf(handled, sizeof(handled), "%sgrpc_server_handled_total", s->metrics_prefix);
    snprintf(seconds, sizeof(seconds), "%sgrpc_server_handling_seconds", s->metrics_prefix);
    struct dfc_metric_desc dh = {
        .name = handled,
        .help = "RPCs completed on the server, by method and gRPC status code.",
        .type = DFC_METRIC_COUNTER,
        .labels = labels,
        .n_labels = 3,
    };
    struct dfc_metric_desc ds = {
        .name = seconds,
        .help = "Time from an RPC's arrival until its status is sent, in seconds.",
        .type = DFC_METRIC_HISTOGRAM,
        .labels = labels,
        .n_labels = 2,
        .buckets = call_buckets,
        .n_buckets = DFC_RPC_N(call_buckets),
    };
    int r = dfc_metrics_add(s->metrics, &dh, &s->m_handled, err);
    if (r == 0) {
        r = dfc_metrics_add(s->metrics, &ds, &s->m_seconds, err);
    }
    free(paths);
    return r;
}

/* Counts a finished call under its method and gRPC code g (and its latency when it ran). */
static void count_call(struct dfc_rpc_call *c, int g, bool ran) {
    struct dfc_rpc_server *s = c->server;
    if (s->m_handled == NULL) {
        return;
    }
    size_t method = (size_t)(c->method - s->methods);
    if (g < 0 || g >= N_GRPC_CODES) {
        g = 2; /* UNKNOWN */
    }
    dfc_metric_inc(s->m_handled, method + s->n_methods * (size_t)g, 1);
    if (ran) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double sec = (double)(now.tv_sec - c->started.tv_sec) +
                     (double)(now.tv_nsec - c->started.tv_nsec) / 1e9;
        dfc_metric_observe(s->m_seconds, method, sec);
    }
}

static void on_rejected(struct tag *t, bool ok) {
    call_unref(container_of(t, struct dfc_rpc_call, aux_tag));
}

/* Answers RESOURCE_EXHAUSTED with msg without running a handler (CQ thread, non-blocking). */
static void reject_busy(struct dfc_rpc_call *c, const char *msg) {
    c->status_details = grpc_slice_from_copied_string(msg);
    c->has_status_details = true;
    c->aux_tag.fn = on_rejected;
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = GRPC_STATUS_RESOURCE_EXHAUSTED;
    ops[1].data.send_status_from_server.status_details = &c->status_details;
    count_call(c, GRPC_STATUS_RESOURCE_EXHAUSTED, false);
    if (grpc_call_start_batch(c->call, ops, 2, &c->aux_tag, NULL) != GRPC_CALL_OK) {
        call_unref(c);
    }
}

static void on_new_call(struct tag *t, bool ok) {
    struct dfc_rpc_call *c = container_of(t, struct dfc_rpc_call, new_tag);
    struct dfc_rpc_server *s = c->server;
    if (!ok) { /* the server is shutting down: the request was never matched */
        grpc_metadata_array_destroy(&c->md);
        dfc__waiter_destroy(&c->send_w);
        dfc__waiter_destroy(&c->recv_w);
        free(c);
        return;
    }
    if (!atomic_load(&s->shutting_down) && dfc__call_post(c->method) < 0) {
        DFC_LOG(DFC_LOG_ERROR, "rpc.request_failed", "server=%s method=%s", s->name,
                c->method->path);
    }
    dfc__listener_call_seen(s, c->call);
    clock_gettime(CLOCK_MONOTONIC, &c->started);
    unsigned n = atomic_fetch_add(&s->in_flight, 1) + 1;
    atomic_store(&c->refs, 2);

    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->close_cancelled;
    if (grpc_call_start_batch(c->call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK) {
        atomic_store(&c->cancelled, true);
        /* the close ref: no completion will come. refs was 2, so c lives on (a call_unref()
         * here would leave the analyzer unsure of that). */
        atomic_fetch_sub(&c->refs, 1);
    }
    if (n > s->max_calls) {
        reject_busy(c, "server busy: too many calls in flight");
        return;
    }
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(c, &cred) == 0) {
        pthread_mutex_lock(&s->uid_mu);
        int k = dfc__uid_count_add(&s->call_uids, cred.uid);
        pthread_mutex_unlock(&s->uid_mu);
        c->uid_counted = k > 0;
        c->uid = cred.uid;
        if (k < 0 || (unsigned)k > s->max_calls_per_uid) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "server busy: uid %u already has %u calls in flight (%smaxCallsPerUser)",
                     (unsigned)cred.uid, s->max_calls_per_uid, s->prefix);
            reject_busy(c, msg);
            return;
        }
    }
    dfc__pool_enqueue(s, c);
}

static void on_close(struct tag *t, bool ok) {
    struct dfc_rpc_call *c = container_of(t, struct dfc_rpc_call, close_tag);
    if (c->close_cancelled) {
        atomic_store(&c->cancelled, true);
    }
    call_unref(c);
}

/* ---- unknown methods (CQ thread) ---- */

static void on_unknown_call(struct tag *t, bool ok);

static void unknown_free(struct unknown_call *u) {
    if (u->call != NULL) {
        grpc_call_unref(u->call);
    }
    grpc_call_details_destroy(&u->details);
    grpc_metadata_array_destroy(&u->md);
    grpc_slice_unref(u->status_details);
    free(u);
}

static void on_unknown_done(struct tag *t, bool ok) {
    unknown_free(container_of(t, struct unknown_call, done_tag));
}

int dfc__call_post_unknown(struct dfc_rpc_server *s) {
    struct unknown_call *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return -ENOMEM;
    }
    u->server = s;
    u->new_tag.fn = on_unknown_call;
    u->done_tag.fn = on_unknown_done;
    u->status_details = grpc_empty_slice();
    grpc_call_details_init(&u->details);
    grpc_metadata_array_init(&u->md);
    if (grpc_server_request_call(s->server, &u->call, &u->details, &u->md, s->cq, s->cq,
                                 &u->new_tag) != GRPC_CALL_OK) {
        unknown_free(u);
        return -EIO;
    }
    return 0;
}

static void on_unknown_call(struct tag *t, bool ok) {
    struct unknown_call *u = container_of(t, struct unknown_call, new_tag);
    struct dfc_rpc_server *s = u->server;
    if (!ok) {
        unknown_free(u);
        return;
    }
    if (!atomic_load(&s->shutting_down)) {
        (void)dfc__call_post_unknown(s);
    }
    dfc__listener_call_seen(s, u->call);
    char msg[300];
    int len = (int)GRPC_SLICE_LENGTH(u->details.method);
    snprintf(msg, sizeof(msg), "unknown method %.*s", len > 256 ? 256 : len,
             (const char *)GRPC_SLICE_START_PTR(u->details.method));
    DFC_LOG(DFC_LOG_WARN, "rpc.unimplemented", "server=%s method=%.*s", s->name,
            len > 256 ? 256 : len, (const char *)GRPC_SLICE_START_PTR(u->details.method));
    u->status_details = grpc_slice_from_copied_string(msg);
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
    ops[1].data.send_status_from_server.status_details = &u->status_details;
    ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[2].data.recv_close_on_server.cancelled = &u->cancelled;
    if (grpc_call_start_batch(u->call, ops, 3, &u->done_tag, NULL) != GRPC_CALL_OK) {
        unknown_free(u);
    }
}

/* ---- running a call (worker threads) ---- */

/* Sends the response (when OK and there is one) and the status in one batch, then waits. */
static void finish_call(struct dfc_rpc_call *c, int code, ProtobufCMessage *resp,
                        const struct dfc_error *err) {
    (void)dfc__call_send_drain(c);
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    grpc_byte_buffer *bb = NULL;
    if (!c->sent_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->sent_md = true;
    }
    if (code == 0 && resp != NULL) {
        bb = dfc__rpc_pack(resp);
        if (bb == NULL) {
            code = -ENOMEM;
        } else {
            ops[n].op = GRPC_OP_SEND_MESSAGE;
            ops[n++].data.send_message.send_message = bb;
        }
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)dfc_error_to_grpc(code);
    if (code < 0) {
        c->status_details = grpc_slice_from_copied_string(err->code == code ? dfc_error_msg(err)
                                                                            : dfc_strerror(code));
        c->has_status_details = true;
        ops[n].data.send_status_from_server.status_details = &c->status_details;
    }
    ops[n].data.send_status_from_server.trailing_metadata_count = c->n_trailers;
    ops[n].data.send_status_from_server.trailing_metadata = c->n_trailers ? c->trailers : NULL;
    n++;
    /* Counted before the status goes, so a client that has its answer sees the call counted. */
    count_call(c, dfc_error_to_grpc(code), true);
    if (c->method->row.kind == DFC_RPC_UNARY &&
        (bb == NULL || grpc_byte_buffer_length(bb) <= UNARY_NOWAIT_MAX)) {
        /* The worker does not wait for a small unary answer: it fits the stream's first
         * flow-control window, so the batch completes without the client reading (a peer
         * that stops reading its socket altogether loses the connection to keepalive), and
         * the wait would cost two thread switches per call. A larger answer is waited for
         * with the idle timeout, as a stream's sends. The batch holds a ref until on_final. */
        /* Under send_w's lock, so on_final on the CQ thread is ordered after everything
         * written here in every tool's eyes (as waiter_start). */
        pthread_mutex_lock(&c->send_w.mu);
        c->final_bb = bb;
        pthread_mutex_unlock(&c->send_w.mu);
        atomic_fetch_add(&c->refs, 1);
        if (grpc_call_start_batch(c->call, ops, n, &c->final_tag, NULL) != GRPC_CALL_OK) {
            pthread_mutex_lock(&c->send_w.mu);
            c->final_bb = NULL;
            pthread_mutex_unlock(&c->send_w.mu);
            atomic_fetch_sub(&c->refs, 1);
            if (bb != NULL) {
                grpc_byte_buffer_destroy(bb);
            }
        }
        return;
    }
    if (dfc__waiter_start(&c->send_w, c->call, ops, n)) {
        (void)dfc__call_wait_send(c, &c->send_w);
    }
    if (bb != NULL) {
        grpc_byte_buffer_destroy(bb);
    }
}

/* CQ thread: a unary answer batch is done (sent or not: the call is over either way). */
static void on_final(struct tag *t, bool ok) {
    (void)ok;
    struct dfc_rpc_call *c = container_of(t, struct dfc_rpc_call, final_tag);
    pthread_mutex_lock(&c->send_w.mu);
    grpc_byte_buffer *bb = c->final_bb;
    c->final_bb = NULL;
    pthread_mutex_unlock(&c->send_w.mu);
    if (bb != NULL) {
        grpc_byte_buffer_destroy(bb);
    }
    call_unref(c);
}

static void log_call(struct dfc_rpc_call *c, int code, const struct dfc_error *err) {
    struct dfc_rpc_server *s = c->server;
    int level = code == 0 ? s->log_level_ok : DFC_LOG_WARN;
    if (level < dfc_log_threshold) {
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - c->started.tv_sec) * 1e3 +
                (double)(now.tv_nsec - c->started.tv_nsec) / 1e6;
    if (code == 0) {
        dfc_log_write(level, "rpc.done", "server=%s method=%s%s code=OK ms=%.3f", s->name,
                      c->method->path, c->log_fields, ms);
    } else {
        dfc_log_write(level, "rpc.done", "server=%s method=%s%s code=%s ms=%.3f msg=\"%s\"",
                      s->name, c->method->path, c->log_fields,
                      dfc_grpc_code_name(dfc_error_to_grpc(code)), ms,
                      err->code == code ? dfc_error_msg(err) : dfc_strerror(code));
    }
}

void dfc__call_run(struct dfc_rpc_call *c) {
    const struct dfc_rpc_method *row = &c->method->row;
    struct dfc_error err;
    ProtobufCMessage *req = NULL, *resp = NULL;
    int r = 0;
    dfc_error_clear(&err);

    if (row->kind == DFC_RPC_UNARY || row->kind == DFC_RPC_SERVER_STREAM) {
        if (c->payload == NULL) {
            r = dfc_error_set(&err, -EINVAL, "missing request message");
        } else if ((r = dfc__rpc_unpack(c->payload, row->req, &req, &err)) == -EBADMSG) {
            dfc_error_prefix(&err, "malformed request");
        }
        if (c->payload != NULL) {
            grpc_byte_buffer_destroy(c->payload);
            c->payload = NULL;
        }
    }
    if (r == 0 && (row->kind == DFC_RPC_UNARY || row->kind == DFC_RPC_CLIENT_STREAM)) {
        resp = dfc_rpc_call_new_msg(c, row->resp);
        if (resp == NULL) {
            r = dfc_error_set(&err, -ENOMEM, "out of memory");
        }
    }
    if (r == 0) {
        r = row->handler(c->method->svc, c, req, resp, &err);
        if (r > 0) {
            r = 0;
        }
        if (r < 0 && err.code != r) {
            dfc_error_set(&err, r, "%s", dfc_strerror(r));
        }
    }
    if (r < 0 && r != -ETIMEDOUT && dfc__rpc_remaining_ms(c->deadline) <= 0) {
        /* Whatever the handler saw (a cancelled call, a failed send), the cause was the
         * deadline: say so, as the client's own timer would. */
        dfc_error_prefix(&err, "deadline exceeded");
        r = err.code = -ETIMEDOUT;
    }
    finish_call(c, r, resp, &err);
    log_call(c, r, &err);
    dfc_rpc_msg_free(req);
    call_unref(c);
}
