/*
 * rpc_server.c - the server half of the RPC layer: its lifecycle (create, register method
 * tables, listen, start, shut down, free) and the completion-queue thread. The other parts:
 * rpc_server_call.c (a call's state machine), rpc_pool.c (the worker pool), rpc_call.c (what
 * handlers call), rpc_listen.c (sockets accepted by the layer); see rpc_server_internal.h.
 *
 * DESIGN
 *
 * Threads. One completion-queue (CQ) thread runs grpc_completion_queue_next() and nothing
 * else: every tag is a struct tag whose fn runs on that thread and only flips state, signals
 * or starts non-blocking batches. Handlers run on worker threads (started on demand up to
 * max_workers, rpc_pool.c), so they may block on disk I/O without stalling the server. A
 * handler talks to its call through blocking helpers (recv, send: rpc_call.c) that start a
 * batch and wait on a per-call condition variable that the CQ thread signals.
 *
 * Peer credentials and addresses. gRPC core does not expose SO_PEERCRED, nor the address of a
 * connection handed to it by fd: rpc_listen.c accepts Unix and TCP sockets itself and hands
 * each connection's fd to core (see there), to its TLS listener when TLS is on (rpc_tls.c).
 *
 * No caller starves the others. The socket is shared by every pod, so each scarce thing has
 * a bound: a stream that sends nothing (or takes nothing) for idle_timeout_ms is ended
 * DEADLINE_EXCEEDED, which the handler sees as -ETIMEDOUT and aborts on; streams may hold at
 * most max_workers - reserved_workers workers, so unary calls (List, Stat) always find one;
 * the calls of one peer uid (unary and streams) may hold at most max_workers_per_uid workers
 * at once: a free worker takes the first queued call whose uid is below that share, the rest
 * stay queued (not refused) and run as that uid's own calls end, so no uid, root included,
 * can occupy every worker (calls from other listeners have no uid and are exempt); unary
 * calls may be capped too (max_unary_running: the scheduler's handlers share its Redis pool,
 * and threads beyond the pool would only queue for a connection, each costing switches)
 * (rpc_pool.h); calls in flight are capped per peer uid at arrival on the CQ thread
 * (RESOURCE_EXHAUSTED, naming the limit: rpc_server_call.c); connections are capped at accept
 * (rpc_listen.c), one that starts no call within first_call_timeout_ms is shut down there too,
 * and one without a call for the idle timeout is closed by core (max_connection_idle), so idle
 * connections cannot hold the caps.
 *
 * Shutdown: stop accepting on our own listeners, stop re-posting,
 * grpc_server_shutdown_and_notify(), wait up to the grace period, then
 * grpc_server_cancel_all_calls() and wait for the rest; join workers; destroy the server; shut the
 * CQ down and let the CQ thread drain it; grpc_shutdown().
 */
#include "dfc/rpc_server.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "dfc/log.h"
#include "dfc/metrics.h"
#include "dfc/pbtime.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "rpc_internal.h"
#include "rpc_server_internal.h"
#include "rpc_tls.h"

#define DEFAULT_MAX_WORKERS  32
#define DEFAULT_MAX_CALLS    1024
#define KEEPALIVE_TIME_MS    300000
#define KEEPALIVE_TIMEOUT_MS 20000

/* ---- CQ thread ---- */

static void *cq_main(void *arg) {
    struct dfc_rpc_server *s = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type == GRPC_OP_COMPLETE) {
            struct tag *t = ev.tag;
            t->fn(t, ev.success != 0);
        }
    }
    return NULL;
}

static void on_shutdown(struct tag *t, bool ok) {
    struct dfc_rpc_server *s = container_of(t, struct dfc_rpc_server, shutdown_tag);
    pthread_mutex_lock(&s->mu);
    s->shutdown_done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- public server API ---- */

int dfc_rpc_server_new(const struct dfc_rpc_server_opts *opts, struct dfc_rpc_server **ret,
                       struct dfc_error *err) {
    struct dfc_rpc_server_opts o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    struct dfc_rpc_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    snprintf(s->name, sizeof(s->name), "%s", o.name ? o.name : "rpc");
    snprintf(s->prefix, sizeof(s->prefix), "%s", o.option_prefix ? o.option_prefix : "");
    s->metrics = o.metrics;
    snprintf(s->metrics_prefix, sizeof(s->metrics_prefix), "%s",
             o.metrics_prefix ? o.metrics_prefix : "");
    s->max_recv_msg = o.max_recv_msg ? o.max_recv_msg : DFC_RPC_DEFAULT_MAX_MSG;
    s->max_workers = o.max_workers ? o.max_workers : DEFAULT_MAX_WORKERS;
    s->max_calls = o.max_calls ? o.max_calls : DEFAULT_MAX_CALLS;
    s->window = o.window ? o.window : DFC_RPC_DEFAULT_WINDOW;
    s->log_level_ok = opts != NULL ? o.log_level_ok : DFC_LOG_DEBUG;
    s->idle_timeout_ms = o.idle_timeout_ms ? o.idle_timeout_ms : DFC_RPC_DEFAULT_IDLE_TIMEOUT_MS;
    unsigned reserved = o.reserved_workers ? o.reserved_workers : s->max_workers / 8;
    if (reserved == 0) {
        reserved = 1;
    }
    if (reserved >= s->max_workers) {
        reserved = s->max_workers - 1; /* streams keep one worker: none reserved with one */
    }
    s->pool.stream_workers = s->max_workers - reserved;
    s->pool.unary_running = o.max_unary_running != 0 && o.max_unary_running < s->max_workers
                                ? o.max_unary_running
                                : s->max_workers;
    s->max_calls_per_uid =
        o.max_calls_per_uid ? o.max_calls_per_uid : DFC_RPC_DEFAULT_MAX_CALLS_PER_UID;
    unsigned per_uid = o.max_workers_per_uid ? o.max_workers_per_uid : s->max_workers / 4;
    if (per_uid == 0) {
        per_uid = 1;
    }
    s->pool.max_workers_per_uid = per_uid > s->max_workers ? s->max_workers : per_uid;
    s->max_conns = o.max_conns ? o.max_conns : DFC_RPC_DEFAULT_MAX_CONNS;
    s->max_conns_per_uid =
        o.max_conns_per_uid ? o.max_conns_per_uid : DFC_RPC_DEFAULT_MAX_CONNS_PER_UID;
    s->max_conns_per_ip =
        o.max_conns_per_ip ? o.max_conns_per_ip : DFC_RPC_DEFAULT_MAX_CONNS_PER_IP;
    s->first_bytes_timeout_ms =
        o.first_bytes_timeout_ms ? o.first_bytes_timeout_ms : DFC_RPC_DEFAULT_FIRST_BYTES_MS;
    s->first_call_timeout_ms =
        o.first_call_timeout_ms ? o.first_call_timeout_ms : DFC_RPC_DEFAULT_FIRST_CALL_MS;
    s->workers = calloc(s->max_workers, sizeof(*s->workers));
    if (s->workers == NULL) {
        free(s);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->spawn_cv, NULL);
    pthread_mutex_init(&s->cred_mu, NULL);
    pthread_mutex_init(&s->uid_mu, NULL);
    s->shutdown_tag.fn = on_shutdown;

    dfc__rpc_init();
    if (o.tls != DFC_TLS_OFF) {
        int r = dfc__tls_server_creds(o.tls, &o.tls_files,
                                      o.tls_refresh_s ? o.tls_refresh_s : DFC_RPC_TLS_REFRESH_S,
                                      &s->tls_creds, err);
        if (r < 0) {
            s->server = grpc_server_create(NULL, NULL);
            s->cq = grpc_completion_queue_create_for_next(NULL);
            grpc_server_register_completion_queue(s->server, s->cq, NULL);
            dfc_rpc_server_free(s);
            return r;
        }
    }
    /* A fixed receive window instead of BDP probing: a handler slower than the socket (an
     * import bound by SHA-256) otherwise lets the window, and the bytes buffered in it, grow;
     * measured on a 3 GiB import: peak RSS 63 -> 30 MB at the same throughput. */
    grpc_arg args[9];
    memset(args, 0, sizeof(args));
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
    args[2].value.integer = 0;
    args[3].type = GRPC_ARG_INTEGER;
    args[3].key = (char *)GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES;
    args[3].value.integer = (int)s->window;
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = s->max_recv_msg > INT32_MAX ? INT32_MAX : (int)s->max_recv_msg;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[1].value.integer = 0;
    /* A connection with no call for the idle timeout is sent GOAWAY and closed, so idle
     * connections cannot sit on the connection caps (clients reconnect on their next call). */
    args[4].type = GRPC_ARG_INTEGER;
    args[4].key = (char *)GRPC_ARG_MAX_CONNECTION_IDLE_MS;
    args[4].value.integer = s->idle_timeout_ms > 0 && s->idle_timeout_ms < INT32_MAX
                                ? (int)s->idle_timeout_ms
                                : INT32_MAX;
    /* HTTP/2 keepalive as upstream's servers (300 s, 20 s to answer): a peer that stops
     * reading its socket cannot answer a ping either, so its connection and the calls on it
     * (a unary answer nobody reads: finish_call) end within 320 s. */
    args[5].type = GRPC_ARG_INTEGER;
    args[5].key = (char *)GRPC_ARG_KEEPALIVE_TIME_MS;
    args[5].value.integer = KEEPALIVE_TIME_MS;
    args[6].type = GRPC_ARG_INTEGER;
    args[6].key = (char *)GRPC_ARG_KEEPALIVE_TIMEOUT_MS;
    args[6].value.integer = KEEPALIVE_TIMEOUT_MS;
    /* A TLS connection must finish its handshake within seconds (core's default: 120 s), so
     * connections that never do cannot pile up. */
    args[7].type = GRPC_ARG_INTEGER;
    args[7].key = (char *)GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
    args[7].value.integer = o.tls_handshake_timeout_ms > 0 && o.tls_handshake_timeout_ms < INT32_MAX
                                ? (int)o.tls_handshake_timeout_ms
                                : DFC_RPC_TLS_HANDSHAKE_TIMEOUT_MS;
    dfc__tls_handler_arg(&s->tls_handler, &args[8]);
    grpc_channel_args chargs = {s->tls_creds != NULL ? 9 : 7, args};
    s->server = grpc_server_create(&chargs, NULL);
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    *ret = s;
    return 0;
}

static const char *msg_name(const ProtobufCMessageDescriptor *d) {
    return d != NULL ? d->name : "NULL";
}

int dfc_rpc_server_add_service(struct dfc_rpc_server *s, const ProtobufCServiceDescriptor *desc,
                               const struct dfc_rpc_method *methods, size_t n_methods, void *svc,
                               struct dfc_error *err) {
    if (s->started) {
        return dfc_error_set(err, -EBUSY, "%s: the server is already started", desc->name);
    }
    for (size_t i = 0; i < n_methods; i++) {
        const struct dfc_rpc_method *row = &methods[i];
        const ProtobufCMethodDescriptor *md =
            protobuf_c_service_descriptor_get_method_by_name(desc, row->name);
        if (md == NULL) {
            return dfc_error_set(err, -EINVAL, "%s has no method `%s`", desc->name, row->name);
        }
        if (md->input != row->req || md->output != row->resp) {
            return dfc_error_set(err, -EINVAL,
                                 "%s/%s: table row types (%s -> %s) differ from the .proto "
                                 "(%s -> %s)",
                                 desc->name, row->name, msg_name(row->req), msg_name(row->resp),
                                 msg_name(md->input), msg_name(md->output));
        }
        if (row->handler == NULL) {
            return dfc_error_set(err, -EINVAL, "%s/%s: no handler", desc->name, row->name);
        }
    }
    struct registered *grown =
        realloc(s->methods, (s->n_methods + n_methods) * sizeof(*s->methods));
    if (grown == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    s->methods = grown;
    for (size_t i = 0; i < n_methods; i++) {
        struct registered *m = &s->methods[s->n_methods];
        memset(m, 0, sizeof(*m));
        m->row = methods[i];
        m->svc = svc;
        m->server = s;
        size_t len = strlen(desc->name) + strlen(methods[i].name) + 3;
        m->path = malloc(len);
        if (m->path == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        snprintf(m->path, len, "/%s/%s", desc->name, methods[i].name);
        bool payload = m->row.kind == DFC_RPC_UNARY || m->row.kind == DFC_RPC_SERVER_STREAM;
        m->handle = grpc_server_register_method(
            s->server, m->path, NULL,
            payload ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER : GRPC_SRM_PAYLOAD_NONE, 0);
        if (m->handle == NULL) {
            int r = dfc_error_set(err, -EEXIST, "method %s is registered twice", m->path);
            free(m->path);
            return r;
        }
        s->n_methods++;
    }
    return 0;
}

int dfc_rpc_server_listen(struct dfc_rpc_server *s, const char *addr, struct dfc_error *err) {
    if (s->started) {
        return dfc_error_set(err, -EBUSY, "listen %s: the server is already started", addr);
    }
    if (s->n_unix_paths >= MAX_LISTENERS) {
        return dfc_error_set(err, -ERANGE, "listen %s: too many listeners", addr);
    }
    char *unix_path = NULL;
    if (strncmp(addr, "unix:", 5) == 0) {
        const char *p = addr + 5;
        if (strncmp(p, "//", 2) == 0) {
            p += 2;
        }
        struct stat st;
        if (lstat(p, &st) == 0) {
            if (!S_ISSOCK(st.st_mode)) {
                return dfc_error_set(err, -EEXIST, "listen %s: `%s` exists and is not a socket",
                                     addr, p);
            }
            (void)unlink(p); /* a stale socket left by an earlier run */
        }
        unix_path = strdup(p);
        if (unix_path == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(s->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (port <= 0) {
        free(unix_path);
        return dfc_error_set(err, -EADDRINUSE, "cannot listen on %s", addr);
    }
    if (unix_path != NULL) {
        s->unix_paths[s->n_unix_paths++] = unix_path;
        return 0;
    }
    return port;
}

int dfc__server_listen_tls(struct dfc_rpc_server *s, const char *name, struct dfc_error *err) {
    if (s->tls_handler != NULL) {
        return 0;
    }
    (void)grpc_server_add_http2_port(s->server, DFC__TLS_EXTERNAL, s->tls_creds);
    if (s->tls_handler == NULL) {
        return dfc_error_set(err, -EIO, "listen %s: gRPC core made no TLS listener", name);
    }
    return 0;
}

int dfc_rpc_server_start(struct dfc_rpc_server *s, struct dfc_error *err) {
    if (s->started) {
        return dfc_error_set(err, -EBUSY, "the server is already started");
    }
    int r = dfc__call_declare_metrics(s, err);
    if (r < 0) {
        return r;
    }
    grpc_server_start(s->server);
    s->started = true;
    for (size_t i = 0; i < s->n_methods; i++) {
        if (dfc__call_post(&s->methods[i]) < 0) {
            return dfc_error_set(err, -EIO, "cannot request calls for %s", s->methods[i].path);
        }
    }
    if (dfc__call_post_unknown(s) < 0) {
        return dfc_error_set(err, -EIO, "cannot request calls for unknown methods");
    }
    if (pthread_create(&s->cq_thread, NULL, cq_main, s) != 0) {
        return dfc_error_set(err, -EAGAIN, "cannot start the completion-queue thread");
    }
    s->cq_running = true;
    for (size_t i = 0; i < s->n_own; i++) {
        if (dfc__listener_start(s->own[i]) < 0) {
            return dfc_error_set(err, -EAGAIN, "cannot start the accept thread for %s",
                                 s->own[i]->path);
        }
    }
    atomic_store(&s->serving, true);
    return 0;
}

bool dfc_rpc_server_serving(const struct dfc_rpc_server *s) {
    return atomic_load(&s->serving);
}

void dfc_rpc_server_shutdown(struct dfc_rpc_server *s, int64_t grace_ms) {
    if (!s->started || s->shut) {
        return;
    }
    s->shut = true;
    atomic_store(&s->serving, false);
    for (size_t i = 0; i < s->n_own; i++) { /* no new connections, no new fds for core */
        dfc__listener_stop(s->own[i]);
    }
    atomic_store(&s->shutting_down, true);
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);

    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* s->cv uses the default clock */
    struct timespec until = dfc_timespec_add_ns(now, dfc__ms_to_ns(grace_ms));
    pthread_mutex_lock(&s->mu);
    while (!s->shutdown_done) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0) {
            break;
        }
    }
    bool done = s->shutdown_done;
    pthread_mutex_unlock(&s->mu);
    if (!done) {
        DFC_LOG(DFC_LOG_WARN, "rpc.shutdown_cancel", "server=%s in_flight=%u", s->name,
                atomic_load(&s->in_flight));
        grpc_server_cancel_all_calls(s->server);
        pthread_mutex_lock(&s->mu);
        while (!s->shutdown_done) {
            pthread_cond_wait(&s->cv, &s->mu);
        }
        pthread_mutex_unlock(&s->mu);
    }

    dfc__pool_stop(s);
}

void dfc_rpc_server_free(struct dfc_rpc_server *s) {
    if (s == NULL) {
        return;
    }
    dfc_rpc_server_shutdown(s, 5000);
    if (!s->started) {
        /* A start-up that failed after a listener was added (the TLS one, then a bind
         * failure): core destroys a server with listeners only once it was shut down. Nothing
         * was started, so the notification comes at once; the drain below takes it. */
        grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
    }
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->cq);
    if (s->cq_running) {
        pthread_join(s->cq_thread, NULL);
    } else {
        cq_main(s); /* never started: drain the queue here */
    }
    grpc_completion_queue_destroy(s->cq);
    for (size_t i = 0; i < s->n_unix_paths; i++) {
        (void)unlink(s->unix_paths[i]);
        free(s->unix_paths[i]);
    }
    for (size_t i = 0; i < s->n_own; i++) {
        dfc__listener_free(s->own[i]);
    }
    free(s->conns);
    dfc__uid_counts_free(&s->conn_uids);
    dfc_keycount_free(&s->conn_ips);
    dfc_keycount_free(&s->no_call);
    dfc__uid_counts_free(&s->call_uids);
    dfc__pool_free(&s->pool);
    pthread_mutex_destroy(&s->cred_mu);
    pthread_mutex_destroy(&s->uid_mu);
    for (size_t i = 0; i < s->n_methods; i++) {
        free(s->methods[i].path);
    }
    free(s->methods);
    free(s->workers);
    if (s->tls_creds != NULL) {
        grpc_server_credentials_release(s->tls_creds);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->spawn_cv);
    free(s);
    grpc_shutdown();
}
