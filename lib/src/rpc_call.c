/*
 * rpc_call.c - what a handler calls on its call (dfc/rpc_server.h, "inside a handler"): receive
 * and send stream messages, check for cancellation and the deadline, read metadata and the
 * peer's credentials or address, add log fields, allocate from the call's arena.
 *
 * DESIGN
 *
 * Handlers run on worker threads (rpc_pool.c). A blocking helper starts a batch with a waiter
 * as its tag and waits on the waiter's condition variable, which the CQ thread signals when the
 * batch completes (rpc_server.c). Sends are pipelined one deep: dfc_rpc_call_send() packs the
 * message, waits for the previous send, and starts this one. Every wait on the client is bounded
 * by the idle timeout: a client that sends nothing or reads nothing for that long has its call
 * ended DEADLINE_EXCEEDED (expire_idle), and the handler sees -ETIMEDOUT.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/support/alloc.h>

#include "dfc/pbtime.h"
#include "dfc/rpc_server.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "rpc_internal.h"
#include "rpc_server_internal.h"
#include "rpc_tls.h"

/* ---- waiters ---- */

static void waiter_done(struct tag *t, bool ok) {
    struct waiter *w = container_of(t, struct waiter, tag);
    pthread_mutex_lock(&w->mu);
    w->pending = false;
    w->ok = ok;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void dfc__waiter_init(struct waiter *w) {
    w->tag.fn = waiter_done;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* idle timeouts ignore clock steps */
    pthread_cond_init(&w->cv, &attr);
    pthread_condattr_destroy(&attr);
    w->pending = false;
    w->ok = false;
}

void dfc__waiter_destroy(struct waiter *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

bool dfc__waiter_start(struct waiter *w, grpc_call *call, const grpc_op *ops, size_t n) {
    /* Under the lock, so the CQ thread's completion is ordered after it in every tool's eyes,
     * not only through gRPC's own (uninstrumented) synchronization. */
    pthread_mutex_lock(&w->mu);
    w->pending = true;
    pthread_mutex_unlock(&w->mu);
    grpc_call_error e = grpc_call_start_batch(call, ops, n, &w->tag, NULL);
    if (e != GRPC_CALL_OK) {
        pthread_mutex_lock(&w->mu);
        w->pending = false;
        w->ok = false;
        pthread_mutex_unlock(&w->mu);
        return false;
    }
    return true;
}

static bool waiter_wait(struct waiter *w) {
    pthread_mutex_lock(&w->mu);
    while (w->pending) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    bool ok = w->ok;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* Like waiter_wait(), for at most timeout_ms (< 0: no limit). Returns 1 when the batch
 * succeeded, 0 when it failed, -ETIMEDOUT when it is still pending. */
static int waiter_wait_for(struct waiter *w, int64_t timeout_ms) {
    if (timeout_ms < 0) {
        return waiter_wait(w) ? 1 : 0;
    }
    struct timespec until = dfc_deadline_after(dfc__ms_to_ns(timeout_ms)); /* w->cv is monotonic */
    pthread_mutex_lock(&w->mu);
    while (w->pending) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    int r = w->pending ? -ETIMEDOUT : w->ok ? 1 : 0;
    pthread_mutex_unlock(&w->mu);
    return r;
}

/* ---- per-call arena ---- */

static void *arena_alloc(struct arena_block **head, size_t size) {
    size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    struct arena_block *b = *head;
    if (b == NULL || b->cap - b->used < size) {
        size_t cap = size > 4096 ? size : 4096;
        b = calloc(1, sizeof(*b) + cap);
        if (b == NULL) {
            return NULL;
        }
        b->cap = cap;
        b->next = *head;
        *head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

void dfc__arena_free(struct arena_block *b) {
    while (b != NULL) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
}

/* ---- handler-side operations (worker threads) ---- */

/* Ends c DEADLINE_EXCEEDED because the peer went quiet for the idle timeout; the worker then
 * waits for its pending batch, which core completes (failed) promptly. */
static void expire_idle(struct dfc_rpc_call *c, const char *what) {
    char msg[160], d[32];
    dfc_format_duration(c->server->idle_timeout_ms * 1000000, d, sizeof(d));
    snprintf(msg, sizeof(msg), "%s for %s (%sidleTimeout)", what, d, c->server->prefix);
    c->idled = true;
    atomic_store(&c->cancelled, true);
    grpc_call_cancel_with_status(c->call, GRPC_STATUS_DEADLINE_EXCEEDED, msg, NULL);
}

/* Waits for w's batch, for at most the idle timeout: then the call is ended (expire_idle)
 * and the batch waited for. Returns whether the batch succeeded. */
static bool wait_idle(struct dfc_rpc_call *c, struct waiter *w, const char *what) {
    int r = waiter_wait_for(w, c->server->idle_timeout_ms);
    if (r == -ETIMEDOUT) {
        expire_idle(c, what);
        (void)waiter_wait(w);
        return false;
    }
    return r == 1;
}

static int idle_error(struct dfc_rpc_call *c, struct dfc_error *err, const char *what) {
    char d[32];
    dfc_format_duration(c->server->idle_timeout_ms * 1000000, d, sizeof(d));
    return dfc_error_set(err, -ETIMEDOUT, "%s for %s (%sidleTimeout)", what, d, c->server->prefix);
}

#define IDLE_SEND "the client read nothing"
#define IDLE_RECV "no message"

/* Waits for the previous pipelined send; reports whether the call is still writable. A
 * client that stops reading holds the send at most for the idle timeout. */
int dfc__call_send_drain(struct dfc_rpc_call *c) {
    if (c->send_pending) {
        if (!wait_idle(c, &c->send_w, IDLE_SEND)) {
            c->send_failed = true;
        }
        grpc_byte_buffer_destroy(c->send_bb);
        c->send_bb = NULL;
        c->send_pending = false;
    }
    return c->idled ? -ETIMEDOUT : c->send_failed ? -ECANCELED : 0;
}

bool dfc__call_wait_send(struct dfc_rpc_call *c, struct waiter *w) {
    return wait_idle(c, w, IDLE_SEND);
}

/* Sends bb (taking it over) after the previous pipelined send has gone. */
static int send_bb(struct dfc_rpc_call *c, grpc_byte_buffer *bb, struct dfc_error *err) {
    if (bb == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory packing a message");
    }
    int r = dfc__call_send_drain(c);
    if (r < 0) {
        grpc_byte_buffer_destroy(bb);
        return r == -ETIMEDOUT ? idle_error(c, err, IDLE_SEND)
                               : dfc_error_set(err, -ECANCELED, "the client went away");
    }
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!c->sent_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->sent_md = true;
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = bb;
    c->send_bb = bb;
    c->send_pending = dfc__waiter_start(&c->send_w, c->call, ops, n);
    if (!c->send_pending) {
        grpc_byte_buffer_destroy(bb);
        c->send_bb = NULL;
        c->send_failed = true;
        return dfc_error_set(err, -ECANCELED, "the call is closed");
    }
    return 0;
}

int dfc_rpc_call_send(struct dfc_rpc_call *c, const ProtobufCMessage *msg, struct dfc_error *err) {
    return send_bb(c, dfc__rpc_pack(msg), err);
}

int dfc_rpc_call_send_bulk(struct dfc_rpc_call *c, const ProtobufCMessage *msg,
                           struct dfc_rpc_bulk *bulk, struct dfc_error *err) {
    return send_bb(c, dfc__rpc_pack_bulk(msg, bulk), err);
}

static int call_recv(struct dfc_rpc_call *c, ProtobufCMessage **ret_msg,
                     struct dfc_rpc_bulk_in **ret_in, struct dfc_error *err) {
    if (c->recv_eos) {
        return c->idled ? idle_error(c, err, IDLE_RECV) : 0;
    }
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    /* A message trickled a byte at a time counts as no message: the bound is on whole ones. */
    bool ok = dfc__waiter_start(&c->recv_w, c->call, &op, 1) && wait_idle(c, &c->recv_w, IDLE_RECV);
    if (!ok || bb == NULL || c->idled) {
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        c->recv_eos = true;
        if (c->idled) {
            return idle_error(c, err, c->send_failed ? IDLE_SEND : IDLE_RECV);
        }
        if (dfc__rpc_remaining_ms(c->deadline) <= 0) {
            return dfc_error_set(err, -ETIMEDOUT, "deadline exceeded");
        }
        if (!ok || atomic_load(&c->cancelled)) {
            return dfc_error_set(err, -ECANCELED, "the client cancelled the call");
        }
        return 0;
    }
    int r;
    if (ret_in != NULL) {
        r = dfc__rpc_unpack_in(bb, c->method->row.req, ret_msg, ret_in, err); /* takes bb */
    } else {
        r = dfc__rpc_unpack(bb, c->method->row.req, ret_msg, err);
        grpc_byte_buffer_destroy(bb);
    }
    if (r == -EBADMSG) {
        dfc_error_prefix(err, "malformed message");
    }
    return r < 0 ? r : 1;
}

int dfc_rpc_call_recv(struct dfc_rpc_call *c, ProtobufCMessage **ret_msg, struct dfc_error *err) {
    return call_recv(c, ret_msg, NULL, err);
}

int dfc_rpc_call_recv_bulk(struct dfc_rpc_call *c, ProtobufCMessage **ret_msg,
                           struct dfc_rpc_bulk_in **ret_in, struct dfc_error *err) {
    *ret_in = NULL;
    return call_recv(c, ret_msg, ret_in, err);
}

bool dfc_rpc_call_cancelled(struct dfc_rpc_call *c) {
    return atomic_load(&c->cancelled) || dfc__rpc_remaining_ms(c->deadline) <= 0;
}

int64_t dfc_rpc_call_remaining_ms(struct dfc_rpc_call *c) {
    return dfc__rpc_remaining_ms(c->deadline);
}

const char *dfc_rpc_call_method(struct dfc_rpc_call *c) {
    return c->method->path;
}

void dfc_rpc_call_log_field(struct dfc_rpc_call *c, const char *key, const char *value) {
    bool quote = value[0] == '\0' || strpbrk(value, " \"=") != NULL;
    size_t room = sizeof(c->log_fields) - c->log_fields_len;
    int n = snprintf(c->log_fields + c->log_fields_len, room, quote ? " %s=\"%s\"" : " %s=%s", key,
                     value);
    if (n > 0 && (size_t)n < room) {
        c->log_fields_len += (size_t)n;
    } else {
        c->log_fields[c->log_fields_len] = '\0'; /* does not fit: drop it whole */
    }
}

void *dfc_rpc_call_alloc(struct dfc_rpc_call *c, size_t size) {
    return arena_alloc(&c->arena, size);
}

/* A copy of the size bytes at msg in c's arena; NULL only when out of memory. */
static void *arena_copy(struct dfc_rpc_call *c, const void *msg, size_t size) {
    void *m = arena_alloc(&c->arena, size);
    if (m != NULL) {
        memcpy(m, msg, size);
    }
    return m;
}

char *dfc_rpc_call_strdup(struct dfc_rpc_call *c, const char *s) {
    return arena_copy(c, s, strlen(s) + 1);
}

ProtobufCMessage *dfc_rpc_call_new_msg(struct dfc_rpc_call *c,
                                       const ProtobufCMessageDescriptor *desc) {
    ProtobufCMessage *m = arena_alloc(&c->arena, desc->sizeof_message);
    if (m != NULL) {
        desc->message_init(m);
    }
    return m;
}

Google__Protobuf__Timestamp *dfc_rpc_call_new_timestamp(struct dfc_rpc_call *c, int64_t unix_ns) {
    Google__Protobuf__Timestamp t = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    dfc_pb_timestamp_from_ns(unix_ns, &t);
    return arena_copy(c, &t, sizeof(t));
}

Google__Protobuf__Duration *dfc_rpc_call_new_duration(struct dfc_rpc_call *c, int64_t ns) {
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    dfc_pb_duration_from_ns(ns, &d);
    return arena_copy(c, &d, sizeof(d));
}

void dfc_rpc_msg_free(ProtobufCMessage *msg) {
    if (msg != NULL) {
        protobuf_c_message_free_unpacked(msg, NULL);
    }
}

/* The fd of the connection c came in on when one of our listeners accepted it (core names its
 * peer "fd:<n>"), else -1. */
static int call_fd(struct dfc_rpc_call *c) {
    char *peer = grpc_call_get_peer(c->call);
    int64_t fd = -1;
    bool ok = peer != NULL && strncmp(peer, "fd:", 3) == 0 && dfc_parse_i64(peer + 3, &fd) == 0 &&
              fd >= 0 && fd <= INT_MAX;
    gpr_free(peer);
    return ok ? (int)fd : -1;
}

int dfc_rpc_call_peer_cred(struct dfc_rpc_call *c, struct ucred *ret_cred) {
    int fd = call_fd(c);
    return fd >= 0 ? dfc__listener_cred(c->server, fd, ret_cred) : -ENOENT;
}

int dfc_rpc_call_peer_ip(struct dfc_rpc_call *c, char *buf, size_t size) {
    int fd = call_fd(c);
    if (fd >= 0) {
        return dfc__listener_peer_ip(c->server, fd, buf, size);
    }
    /* A TLS port is core's listener: its calls' peers are "ipv4:..." or "ipv6:..." */
    return c->server->tls_creds != NULL ? dfc__tls_peer_ip(c->call, buf, size) : -ENOENT;
}

int dfc_rpc_call_peer_identity(struct dfc_rpc_call *c, struct dfc_peer_identity *ret) {
    dfc__tls_peer_identity(c->call, ret);
    return 0;
}

int dfc_rpc_call_remote(struct dfc_rpc_call *c, char *buf, size_t size) {
    struct ucred cred;
    struct dfc_peer_identity id;
    int r;
    if (dfc_rpc_call_peer_identity(c, &id) == 0 && id.authenticated) {
        /* The certificate, not the address: nodes behind one address keep their own share. */
        const char *who = id.n_uris > 0 ? id.uris[0] : id.n_ips > 0 ? id.ips[0] : id.common_name;
        r = snprintf(buf, size, "cert:%s", who);
        return r < 0 || (size_t)r >= size ? -ENAMETOOLONG : 0;
    }
    r = dfc_rpc_call_peer_ip(c, buf, size);
    if (r != -ENOENT) {
        return r;
    }
    if (dfc_rpc_call_peer_cred(c, &cred) == 0) {
        r = snprintf(buf, size, "uid:%u", (unsigned)cred.uid);
    } else {
        r = snprintf(buf, size, "%s", "");
    }
    return r < 0 || (size_t)r >= size ? -ENAMETOOLONG : 0;
}

int dfc_rpc_call_metadata(struct dfc_rpc_call *c, const char *key, char *buf, size_t size) {
    return dfc__rpc_md_get(&c->md, key, buf, size);
}

int dfc_rpc_call_set_trailer(struct dfc_rpc_call *c, const char *key, const char *value) {
    if (key[0] == '\0') {
        return -EINVAL;
    }
    if (c->n_trailers >= DFC_RPC_TRAILERS_MAX) {
        return -E2BIG;
    }
    grpc_metadata *m = &c->trailers[c->n_trailers++];
    memset(m, 0, sizeof(*m));
    m->key = grpc_slice_from_copied_string(key);
    m->value = grpc_slice_from_copied_string(value);
    return 0;
}
