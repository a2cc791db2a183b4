/*
 * rpc_client.c - the client half of the RPC layer: blocking calls of all four kinds, and unary
 * calls many of which one thread drives at once (dfc_rpc_async).
 *
 * DESIGN: each blocking call gets its own pluck completion queue, so the thread that waits
 * for an operation also drives that call's I/O and no client-side thread is needed. Operations
 * are posted as separate batches with their own tags so a send and a receive can be
 * outstanding at once (on different threads): initial metadata is received in a batch of its
 * own, apart from RECV_MESSAGE (with both in one batch, neither completed after a cancel on
 * 1.51), and RECV_STATUS_ON_CLIENT is posted when the call opens so a server abort is always
 * seen. Every posted tag is plucked before the queue is destroyed. A unary call is the
 * exception: all its operations go in one batch, so it costs one wake-up and one write. The
 * calls of a dfc_rpc_async share one next-queue instead, reaped by the thread that drives it
 * (below). (The gRPC core pitfalls behind this: docs/dragonfly-compat.md, "gRPC core".)
 */
#include "dfc/rpc_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "dfc/rpc_server.h" /* DFC_RPC_DEFAULT_MAX_MSG, dfc_rpc_msg_free */
#include "rpc_internal.h"
#include "rpc_tls.h"

struct dfc_rpc_client {
    grpc_channel *channel;
    struct dfc__tls_client *tls; /* shared TLS credentials; NULL without TLS */
    bool wait_for_ready;
    int reconnect_wait_ms;
};

/* Tags are just distinct addresses inside the stream. */
struct dfc_rpc_stream {
    grpc_completion_queue *cq;
    grpc_call *call;

    char tag_md, tag_send, tag_recv, tag_status, tag_close;
    bool md_pending, send_pending, status_pending, close_pending;
    bool send_failed, closed_send, status_done, got_eos;

    grpc_metadata_array md;
    grpc_metadata_array trailing;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    grpc_byte_buffer *send_bb;
};

int dfc_rpc_client_new(const char *target, const struct dfc_rpc_client_opts *opts,
                       struct dfc_rpc_client **ret, struct dfc_error *err) {
    struct dfc_rpc_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    size_t max = opts != NULL && opts->max_recv_msg ? opts->max_recv_msg : DFC_RPC_DEFAULT_MAX_MSG;
    c->wait_for_ready = opts != NULL && opts->wait_for_ready;
    c->reconnect_wait_ms =
        opts != NULL && opts->reconnect_wait_ms > 0 ? opts->reconnect_wait_ms : 0;
    dfc__rpc_init();
    grpc_arg args[3];
    memset(args, 0, sizeof(args));
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = max > INT32_MAX ? INT32_MAX : (int)max;
    /* gRPC's default cap is 120 s: a server back from a restart would sit unused that long. */
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[1].value.integer = DFC_RPC_MAX_RECONNECT_BACKOFF_MS;
    grpc_channel_args chargs = {2, args};
    if (opts != NULL && opts->tls != DFC_TLS_OFF && opts->tls_files.server_name != NULL &&
        opts->tls_files.server_name[0] != '\0') {
        /* the server's certificate must name this instead of the dialled address */
        args[2].type = GRPC_ARG_STRING;
        args[2].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[2].value.string = (char *)opts->tls_files.server_name;
        chargs.num_args = 3;
    }
    if (opts != NULL && opts->tls != DFC_TLS_OFF) {
        int r = dfc__tls_client_get(
            opts->tls, &opts->tls_files,
            opts->tls_refresh_s ? opts->tls_refresh_s : DFC_RPC_TLS_REFRESH_S, &c->tls, err);
        if (r < 0) {
            free(c);
            grpc_shutdown();
            return r;
        }
        c->channel = grpc_channel_create(target, dfc__tls_client_creds(c->tls), &chargs);
    } else {
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        c->channel = grpc_channel_create(target, creds, &chargs);
        grpc_channel_credentials_release(creds);
    }
    if (c->channel == NULL) {
        dfc__tls_client_put(c->tls);
        free(c);
        grpc_shutdown();
        return dfc_error_set(err, -EINVAL, "cannot create a channel to %s", target);
    }
    *ret = c;
    return 0;
}

void dfc_rpc_client_free(struct dfc_rpc_client *c) {
    if (c == NULL) {
        return;
    }
    grpc_channel_destroy(c->channel);
    dfc__tls_client_put(c->tls);
    free(c);
    grpc_shutdown();
}

/* A channel in TRANSIENT_FAILURE stays there (sticky) through the back-off even when the
 * server is back: reset the back-off, which connects at once, and wait for READY up to
 * reconnect_wait_ms or the call's deadline. A server still away costs the wait; after it the
 * call fails fast as before. */
static void reconnect(struct dfc_rpc_client *c, gpr_timespec call_deadline) {
    if (c->reconnect_wait_ms <= 0 ||
        grpc_channel_check_connectivity_state(c->channel, 1) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
        return;
    }
    gpr_timespec deadline = dfc__rpc_deadline(c->reconnect_wait_ms);
    if (gpr_time_cmp(call_deadline, deadline) < 0) {
        deadline = call_deadline;
    }
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_channel_reset_connect_backoff(c->channel);
    grpc_connectivity_state s = GRPC_CHANNEL_TRANSIENT_FAILURE;
    char tag;
    while (s != GRPC_CHANNEL_READY && s != GRPC_CHANNEL_SHUTDOWN) {
        grpc_channel_watch_connectivity_state(c->channel, s, deadline, cq, &tag);
        grpc_event ev =
            grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
            break; /* the wait ran out */
        }
        s = grpc_channel_check_connectivity_state(c->channel, 0);
    }
    grpc_completion_queue_shutdown(cq); /* its one tag is plucked */
    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_completion_queue_destroy(cq);
}

static bool pluck(struct dfc_rpc_stream *st, void *tag) {
    grpc_event ev =
        grpc_completion_queue_pluck(st->cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static bool start(struct dfc_rpc_stream *st, const grpc_op *ops, size_t n, void *tag) {
    return grpc_call_start_batch(st->call, ops, n, tag, NULL) == GRPC_CALL_OK;
}

/* Waits for the final status and turns it into a code and message. */
static int wait_status(struct dfc_rpc_stream *st, struct dfc_error *err) {
    if (st->status_pending) {
        (void)pluck(st, &st->tag_status);
        st->status_pending = false;
        st->status_done = true;
    }
    if (st->status == GRPC_STATUS_OK) {
        return 0;
    }
    int code = dfc_error_from_grpc((int)st->status);
    size_t n = GRPC_SLICE_LENGTH(st->details);
    if (n > 0) {
        return dfc_error_set(err, code, "%.*s", (int)(n > 400 ? 400 : n),
                             (const char *)GRPC_SLICE_START_PTR(st->details));
    }
    return dfc_error_set(err, code, "%s", dfc_strerror(code));
}

int dfc_rpc_method_lookup(const ProtobufCServiceDescriptor *svc, const char *name,
                          struct dfc_rpc_client_method *ret, struct dfc_error *err) {
    for (unsigned i = 0; i < svc->n_methods; i++) {
        const ProtobufCMethodDescriptor *md = &svc->methods[i];
        if (strcmp(md->name, name) != 0) {
            continue;
        }
        int n = snprintf(ret->path, sizeof(ret->path), "/%s/%s", svc->name, md->name);
        if (n < 0 || (size_t)n >= sizeof(ret->path)) {
            return dfc_error_set(err, -ENAMETOOLONG, "%s/%s: the method path is over %d bytes",
                                 svc->name, name, DFC_RPC_PATH_MAX - 1);
        }
        ret->req = md->input;
        ret->resp = md->output;
        return 0;
    }
    return dfc_error_set(err, -EINVAL, "%s has no method `%s`", svc->name, name);
}

int dfc_rpc_client_resolve(const struct dfc_rpc_client_row *rows, size_t n_rows,
                           struct dfc_error *err) {
    for (size_t i = 0; i < n_rows; i++) {
        int r = dfc_rpc_method_lookup(rows[i].svc, rows[i].name, rows[i].ret, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int dfc_rpc_stream_open(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                        int64_t timeout_ms, struct dfc_rpc_stream **ret, struct dfc_error *err) {
    return dfc_rpc_stream_open_md(c, m, timeout_ms, NULL, 0, ret, err);
}

#define MAX_MD 8

/* Fills st (zeroed by the caller) with a call of m on cq; no operation is started. Every
 * member release_call() frees is valid afterwards, whatever the result. */
static int init_call(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                     gpr_timespec deadline, grpc_completion_queue *cq, struct dfc_rpc_stream *st,
                     struct dfc_error *err) {
    st->cq = cq;
    grpc_metadata_array_init(&st->md);
    grpc_metadata_array_init(&st->trailing);
    st->details = grpc_empty_slice();
    grpc_slice path = grpc_slice_from_copied_string(m->path); /* m need not outlive the call */
    st->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, st->cq, path,
                                        NULL, deadline, NULL);
    grpc_slice_unref(path);
    if (st->call == NULL) {
        return dfc_error_set(err, -ENOMEM, "cannot create a call to %s", m->path);
    }
    return 0;
}

/* Creates st with its own pluck queue and call; no operation is started. */
static int open_call(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                     int64_t timeout_ms, struct dfc_rpc_stream **ret, struct dfc_error *err) {
    struct dfc_rpc_stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    gpr_timespec deadline = dfc__rpc_deadline(timeout_ms);
    reconnect(c, deadline);
    int r = init_call(c, m, deadline, grpc_completion_queue_create_for_pluck(NULL), st, err);
    if (r < 0) {
        dfc_rpc_stream_free(st);
        return r;
    }
    *ret = st;
    return 0;
}

/* Fills op with SEND_INITIAL_METADATA of md (n_md <= MAX_MD) in mds. Core copies the
 * metadata into the call when the batch starts. */
static void fill_send_md(const struct dfc_rpc_client *c, grpc_op *op, grpc_metadata *mds,
                         const struct dfc_rpc_md *md, size_t n_md) {
    n_md = n_md > MAX_MD ? 0 : n_md;
    for (size_t i = 0; i < n_md; i++) {
        memset(&mds[i], 0, sizeof(mds[i]));
        mds[i].key = grpc_slice_from_static_string(md[i].key);
        mds[i].value = grpc_slice_from_static_string(md[i].value);
    }
    op->op = GRPC_OP_SEND_INITIAL_METADATA;
    op->flags = c->wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
    op->data.send_initial_metadata.count = n_md;
    op->data.send_initial_metadata.metadata = n_md ? mds : NULL;
}

static void fill_recv_status(struct dfc_rpc_stream *st, grpc_op *op) {
    op->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op->data.recv_status_on_client.trailing_metadata = &st->trailing;
    op->data.recv_status_on_client.status = &st->status;
    op->data.recv_status_on_client.status_details = &st->details;
    op->data.recv_status_on_client.error_string = &st->error_string;
}

int dfc_rpc_stream_open_md(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                           int64_t timeout_ms, const struct dfc_rpc_md *md, size_t n_md,
                           struct dfc_rpc_stream **ret, struct dfc_error *err) {
    if (n_md > MAX_MD) {
        return dfc_error_set(err, -E2BIG, "at most %d metadata entries", MAX_MD);
    }
    struct dfc_rpc_stream *st = NULL;
    int r = open_call(c, m, timeout_ms, &st, err);
    if (r < 0) {
        return r;
    }
    grpc_metadata mds[MAX_MD];
    grpc_op op;
    memset(&op, 0, sizeof(op));
    fill_send_md(c, &op, mds, md, n_md);
    st->send_pending = start(st, &op, 1, &st->tag_send);

    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_INITIAL_METADATA;
    op.data.recv_initial_metadata.recv_initial_metadata = &st->md;
    st->md_pending = start(st, &op, 1, &st->tag_md);

    memset(&op, 0, sizeof(op));
    fill_recv_status(st, &op);
    st->status_pending = start(st, &op, 1, &st->tag_status);
    if (!st->send_pending || !st->md_pending || !st->status_pending) {
        dfc_rpc_stream_free(st);
        return dfc_error_set(err, -EIO, "cannot start a call to %s", m->path);
    }
    *ret = st;
    return 0;
}

/* Waits for the previous send; false once the call can take no more messages. */
static bool send_drain(struct dfc_rpc_stream *st) {
    if (st->send_pending) {
        if (!pluck(st, &st->tag_send)) {
            st->send_failed = true;
        }
        st->send_pending = false;
        if (st->send_bb != NULL) {
            grpc_byte_buffer_destroy(st->send_bb);
            st->send_bb = NULL;
        }
    }
    return !st->send_failed;
}

/* Sends bb (taking it over) after the previous pipelined send has gone. */
static int send_bb(struct dfc_rpc_stream *st, grpc_byte_buffer *bb, struct dfc_error *err) {
    if (bb == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory packing a message");
    }
    if (st->closed_send) {
        grpc_byte_buffer_destroy(bb);
        return dfc_error_set(err, -EPIPE, "send after close_send");
    }
    if (!send_drain(st)) {
        grpc_byte_buffer_destroy(bb);
        /* The server ended the call: its status says why. */
        int r = wait_status(st, err);
        return r < 0 ? r : dfc_error_set(err, -EPIPE, "the server closed the stream");
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = bb;
    st->send_bb = bb;
    st->send_pending = start(st, &op, 1, &st->tag_send);
    if (!st->send_pending) {
        grpc_byte_buffer_destroy(bb);
        st->send_bb = NULL;
        st->send_failed = true;
        return dfc_error_set(err, -EIO, "cannot start a send");
    }
    return 0;
}

int dfc_rpc_stream_send(struct dfc_rpc_stream *st, const ProtobufCMessage *msg,
                        struct dfc_error *err) {
    return send_bb(st, dfc__rpc_pack(msg), err);
}

int dfc_rpc_stream_send_bulk(struct dfc_rpc_stream *st, const ProtobufCMessage *msg,
                             struct dfc_rpc_bulk *bulk, struct dfc_error *err) {
    return send_bb(st, dfc__rpc_pack_bulk(msg, bulk), err);
}

int dfc_rpc_stream_close_send(struct dfc_rpc_stream *st, struct dfc_error *err) {
    if (st->closed_send) {
        return 0;
    }
    st->closed_send = true;
    if (!send_drain(st)) {
        return 0; /* the call is over; its status will tell */
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    st->close_pending = start(st, &op, 1, &st->tag_close);
    if (!st->close_pending) {
        return dfc_error_set(err, -EIO, "cannot half-close the call");
    }
    return 0;
}

/* Receives one message into *ret_msg (and, with ret_in, its bytes left in gRPC's slices). */
static int stream_recv(struct dfc_rpc_stream *st, const ProtobufCMessageDescriptor *desc,
                       ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                       struct dfc_error *err) {
    if (st->got_eos) {
        return wait_status(st, err);
    }
    if (st->md_pending) {
        (void)pluck(st, &st->tag_md);
        st->md_pending = false;
    }
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    bool ok = start(st, &op, 1, &st->tag_recv) && pluck(st, &st->tag_recv);
    if (!ok || bb == NULL) {
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        st->got_eos = true;
        return wait_status(st, err);
    }
    int r;
    if (ret_in != NULL) {
        r = dfc__rpc_unpack_in(bb, desc, ret_msg, ret_in, err); /* takes bb over */
    } else {
        r = dfc__rpc_unpack(bb, desc, ret_msg, err);
        grpc_byte_buffer_destroy(bb);
    }
    if (r < 0) {
        dfc_rpc_stream_cancel(st);
        return dfc_error_prefix(err, "malformed response");
    }
    return 1;
}

int dfc_rpc_stream_recv(struct dfc_rpc_stream *st, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **ret_msg, struct dfc_error *err) {
    return stream_recv(st, desc, ret_msg, NULL, err);
}

int dfc_rpc_stream_recv_bulk(struct dfc_rpc_stream *st, const ProtobufCMessageDescriptor *desc,
                             ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                             struct dfc_error *err) {
    *ret_in = NULL;
    return stream_recv(st, desc, ret_msg, ret_in, err);
}

int dfc_rpc_stream_trailer(const struct dfc_rpc_stream *st, const char *key, char *buf,
                           size_t size) {
    /* trailing is written by core when the status batch completes: read it only after. */
    if (!st->status_done) {
        return -ENOENT;
    }
    return dfc__rpc_md_get(&st->trailing, key, buf, size);
}

int dfc_rpc_stream_finish(struct dfc_rpc_stream *st, struct dfc_error *err) {
    int r = dfc_rpc_stream_close_send(st, err);
    if (r < 0) {
        return r;
    }
    return wait_status(st, err);
}

void dfc_rpc_stream_cancel(struct dfc_rpc_stream *st) {
    grpc_call_cancel(st->call, NULL);
}

static void release_call(struct dfc_rpc_stream *st);

void dfc_rpc_stream_free(struct dfc_rpc_stream *st) {
    if (st == NULL) {
        return;
    }
    if (st->call != NULL) {
        if (!st->status_done) {
            grpc_call_cancel(st->call, NULL);
        }
        if (st->send_pending) {
            (void)pluck(st, &st->tag_send);
        }
        if (st->close_pending) {
            (void)pluck(st, &st->tag_close);
        }
        if (st->md_pending) {
            (void)pluck(st, &st->tag_md);
        }
        if (st->status_pending) {
            (void)pluck(st, &st->tag_status);
        }
    }
    release_call(st);
    grpc_completion_queue_shutdown(st->cq);
    grpc_completion_queue_pluck(st->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_completion_queue_destroy(st->cq);
    free(st);
}

/* Frees what init_call() made, the queue aside; every posted operation has completed. */
static void release_call(struct dfc_rpc_stream *st) {
    if (st->call != NULL) {
        grpc_call_unref(st->call);
    }
    if (st->send_bb != NULL) {
        grpc_byte_buffer_destroy(st->send_bb);
    }
    grpc_metadata_array_destroy(&st->md);
    grpc_metadata_array_destroy(&st->trailing);
    grpc_slice_unref(st->details);
    if (st->error_string != NULL) {
        gpr_free((void *)st->error_string);
    }
}

int dfc_rpc_unary(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                  const ProtobufCMessage *req, int64_t timeout_ms, ProtobufCMessage **ret_resp,
                  struct dfc_error *err) {
    return dfc_rpc_unary_md(c, m, req, timeout_ms, NULL, 0, ret_resp, err);
}

/* The six operations of a unary call in one batch, tagged tag: the request, its half-close and
 * END_STREAM go out in one write, and the batch ends with the status. On success *send and
 * *recv belong to the batch until it completes (then to the caller, to destroy). */
static int unary_start(struct dfc_rpc_client *c, struct dfc_rpc_stream *st,
                       const struct dfc_rpc_client_method *m, const ProtobufCMessage *req,
                       const struct dfc_rpc_md *md, size_t n_md, void *tag, grpc_byte_buffer **send,
                       grpc_byte_buffer **recv, struct dfc_error *err) {
    *send = dfc__rpc_pack(req);
    *recv = NULL;
    if (*send == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory packing a message");
    }
    grpc_metadata mds[MAX_MD];
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    fill_send_md(c, ops, mds, md, n_md);
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = *send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &st->md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = recv;
    fill_recv_status(st, &ops[5]);
    if (!start(st, ops, DFC_RPC_N(ops), tag)) {
        grpc_byte_buffer_destroy(*send);
        *send = NULL;
        return dfc_error_set(err, -EIO, "cannot start a call to %s", m->path);
    }
    return 0;
}

/* A finished unary batch: its status, then its response decoded as m->resp into *ret_resp.
 * Destroys send and recv. */
static int unary_result(struct dfc_rpc_stream *st, const struct dfc_rpc_client_method *m,
                        grpc_byte_buffer *send, grpc_byte_buffer *recv, ProtobufCMessage **ret_resp,
                        struct dfc_error *err) {
    st->status_done = true;
    int r = wait_status(st, err);
    ProtobufCMessage *resp = NULL;
    if (r == 0 && recv == NULL) {
        r = dfc_error_set(err, -EBADMSG, "%s returned no response message", m->path);
    } else if (r == 0 && dfc__rpc_unpack(recv, m->resp, &resp, err) < 0) {
        r = dfc_error_prefix(err, "malformed response");
    }
    if (send != NULL) {
        grpc_byte_buffer_destroy(send);
    }
    if (recv != NULL) {
        grpc_byte_buffer_destroy(recv);
    }
    if (r == 0) {
        *ret_resp = resp;
    }
    return r;
}

/* A unary call is one batch and one pluck (as gRPC's own sync unary does): the caller's thread
 * wakes once, when the status is in. */
int dfc_rpc_unary_md(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                     const ProtobufCMessage *req, int64_t timeout_ms, const struct dfc_rpc_md *md,
                     size_t n_md, ProtobufCMessage **ret_resp, struct dfc_error *err) {
    if (n_md > MAX_MD) { /* before open_call, which may wait to reconnect */
        return dfc_error_set(err, -E2BIG, "at most %d metadata entries", MAX_MD);
    }
    struct dfc_rpc_stream *st = NULL;
    int r = open_call(c, m, timeout_ms, &st, err);
    if (r < 0) {
        return r;
    }
    grpc_byte_buffer *send = NULL, *recv = NULL;
    r = unary_start(c, st, m, req, md, n_md, &st->tag_status, &send, &recv, err);
    if (r == 0) {
        (void)pluck(st, &st->tag_status); /* the batch ends with the status, whatever it is */
        r = unary_result(st, m, send, recv, ret_resp, err);
    }
    dfc_rpc_stream_free(st);
    return r;
}

/* ---- unary calls driven by one thread ----
 *
 * Every call of a dfc_rpc_async shares its next-queue; a call is a dfc_rpc_stream (its
 * metadata, status and details) whose one batch is tagged with the call itself. The calls in
 * flight are linked so dfc_rpc_async_free() can cancel and reap them. */

struct async_call {
    struct dfc_rpc_stream st;
    const struct dfc_rpc_client_method *m;
    grpc_byte_buffer *send, *recv;
    void *tag;
    struct async_call *prev, *next;
};

struct dfc_rpc_async {
    grpc_completion_queue *cq;
    struct async_call *head;
};

int dfc_rpc_async_new(struct dfc_rpc_async **ret, struct dfc_error *err) {
    struct dfc_rpc_async *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    dfc__rpc_init();
    q->cq = grpc_completion_queue_create_for_next(NULL);
    *ret = q;
    return 0;
}

static void async_unlink(struct dfc_rpc_async *q, struct async_call *a) {
    *(a->prev != NULL ? &a->prev->next : &q->head) = a->next;
    if (a->next != NULL) {
        a->next->prev = a->prev;
    }
}

int dfc_rpc_async_unary(struct dfc_rpc_async *q, struct dfc_rpc_client *c,
                        const struct dfc_rpc_client_method *m, const ProtobufCMessage *req,
                        int64_t timeout_ms, void *tag, struct dfc_error *err) {
    struct async_call *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    a->m = m;
    a->tag = tag;
    int r = init_call(c, m, dfc__rpc_deadline(timeout_ms), q->cq, &a->st, err);
    if (r == 0) {
        r = unary_start(c, &a->st, m, req, NULL, 0, a, &a->send, &a->recv, err);
    }
    if (r < 0) {
        release_call(&a->st);
        free(a);
        return r;
    }
    a->next = q->head;
    if (q->head != NULL) {
        q->head->prev = a;
    }
    q->head = a;
    return 0;
}

int dfc_rpc_async_next(struct dfc_rpc_async *q, int64_t timeout_ms,
                       struct dfc_rpc_async_done *ret) {
    if (q->head == NULL) {
        return 0;
    }
    gpr_timespec deadline = timeout_ms < 0    ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                            : timeout_ms == 0 ? gpr_inf_past(GPR_CLOCK_MONOTONIC) /* a poll */
                                              : dfc__rpc_deadline(timeout_ms);
    grpc_event ev = grpc_completion_queue_next(q->cq, deadline, NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        return 0; /* GRPC_QUEUE_TIMEOUT: the queue is shut down only by dfc_rpc_async_free */
    }
    struct async_call *a = ev.tag;
    async_unlink(q, a);
    ret->tag = a->tag;
    ret->resp = NULL;
    dfc_error_clear(&ret->err);
    /* A batch that failed as a whole (ok false) still set the status it could. */
    ret->code = unary_result(&a->st, a->m, a->send, a->recv, &ret->resp, &ret->err);
    a->send = a->recv = NULL;
    release_call(&a->st);
    free(a);
    return 1;
}

void dfc_rpc_async_free(struct dfc_rpc_async *q) {
    if (q == NULL) {
        return;
    }
    for (struct async_call *a = q->head; a != NULL; a = a->next) {
        grpc_call_cancel(a->st.call, NULL);
    }
    struct dfc_rpc_async_done done;
    while (dfc_rpc_async_next(q, -1, &done) == 1) {
        dfc_rpc_msg_free(done.resp);
    }
    grpc_completion_queue_shutdown(q->cq);
    while (grpc_completion_queue_next(q->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(q->cq);
    free(q);
    grpc_shutdown();
}
