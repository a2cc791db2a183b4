/*
 * Tests for the limits in lib/src/rpc_server.c, rpc_listen.c and rpc_limits.c that keep one
 * caller from starving the others: the idle timeout on both directions of a stream, workers
 * reserved for unary calls, the per-uid cap on calls in flight, the per-uid share of busy
 * workers and the caps on connections, with their rate-limited log line. A real server on a temp
 * Unix socket, real clients, and raw sockets for the connection flood.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "test/rpc_test.pb-c.h"
#include "rpc_test_service.h"
#include "test_support.h"

/* What the handlers observed. */
static atomic_int puts_running; /* Put handlers inside their receive loop */
static atomic_int put_result;   /* the last Put handler's return code (1 = none yet) */
static atomic_int get_result;   /* the last Get handler's return code (1 = none yet) */
static char handler_msg[512];   /* the message that came with it */
static pthread_mutex_t handler_mu = PTHREAD_MUTEX_INITIALIZER;

static void record(atomic_int *slot, int r, const struct dfc_error *err) {
    pthread_mutex_lock(&handler_mu);
    snprintf(handler_msg, sizeof(handler_msg), "%s", r < 0 ? err->msg : "");
    pthread_mutex_unlock(&handler_mu);
    atomic_store(slot, r);
}

/* Echo with seq SLOW_SEQ holds its worker until slow_release is set (or 30 s pass, longer
 * than the deadline of the call that has to get through meanwhile). */
#define SLOW_SEQ 1000
static atomic_int slow_running; /* slow Echo handlers holding a worker */
static atomic_bool slow_release;

static int echo(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                ProtobufCMessage *resp, struct dfc_error *err) {
    if (((const Dfc__Test__V1__Chunk *)req)->seq == SLOW_SEQ) {
        atomic_fetch_add(&slow_running, 1);
        for (int i = 0; i < 3000 && !atomic_load(&slow_release) && !dfc_rpc_call_cancelled(call);
             i++) {
            usleep(10000);
        }
        atomic_fetch_sub(&slow_running, 1);
    }
    ((Dfc__Test__V1__Chunk *)resp)->seq = ((const Dfc__Test__V1__Chunk *)req)->seq + 1;
    return 0;
}

/* Receives until the end of the stream. */
static int put(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    ProtobufCMessage *m;
    int r;
    atomic_fetch_add(&puts_running, 1);
    while ((r = dfc_rpc_call_recv(call, &m, err)) > 0) {
        dfc_rpc_msg_free(m);
    }
    atomic_fetch_sub(&puts_running, 1);
    record(&put_result, r, err);
    return r;
}

/* Sends req.seq messages of req.total bytes. */
static int get(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    const Dfc__Test__V1__Chunk *in = (const Dfc__Test__V1__Chunk *)req;
    uint8_t *buf = calloc(1, in->total ? in->total : 1);
    int r = 0;
    for (uint64_t i = 0; i < in->seq && r == 0; i++) {
        Dfc__Test__V1__Chunk out = DFC__TEST__V1__CHUNK__INIT;
        out.seq = i;
        out.data.data = buf;
        out.data.len = in->total;
        r = dfc_rpc_call_send(call, &out.base, err);
    }
    free(buf);
    record(&get_result, r, err);
    return r;
}

/* The test service with this file's handlers (Chat is the shared echo). */
static const struct rpc_test_handlers handlers = {echo, put, get, rpc_test_chat};

/* ---- fixture: a server on a socket this layer accepts (so callers have a uid) ---- */

struct fx {
    char dir[256];
    char path[300];
    char addr[320];
    struct dfc_rpc_server *server;
    struct dfc_rpc_client *client;
};

static struct fx *fx_start(const struct dfc_rpc_server_opts *o) {
    struct fx *f = calloc(1, sizeof(*f));
    struct dfc_error err;
    atomic_store(&puts_running, 0);
    atomic_store(&put_result, 1);
    atomic_store(&get_result, 1);
    atomic_store(&slow_running, 0);
    atomic_store(&slow_release, false);
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-limits");
    snprintf(f->path, sizeof(f->path), "%s/l.sock", f->dir);
    snprintf(f->addr, sizeof(f->addr), "unix:%s", f->path);
    assert_int_equal(dfc_rpc_server_new(o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, &handlers, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_unix(f->server, f->path, 0600, -1, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    assert_int_equal(dfc_rpc_client_new(f->addr, NULL, &f->client, &err), 0);
    return f;
}

static void fx_stop(struct fx *f) {
    dfc_rpc_client_free(f->client);
    dfc_rpc_server_free(f->server);
    test_rmtree(f->dir);
    free(f);
}

/* *state is the test's server options before setup, its struct fx after. */
static int setup(void **state) {
    *state = fx_start(*state);
    return 0;
}

static int teardown(void **state) {
    dfc_log_set_sink(NULL, NULL);
    fx_stop(*state);
    return 0;
}

static int echo_on(struct dfc_rpc_client *c, int64_t timeout_ms, struct dfc_error *err) {
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = 1;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(c, &rt.echo, &in.base, timeout_ms, &out, err);
    if (r == 0) {
        assert_true(((Dfc__Test__V1__Chunk *)out)->seq == 2);
    }
    dfc_rpc_msg_free(out);
    return r;
}

static struct dfc_rpc_stream *open_put(struct fx *f, int64_t timeout_ms) {
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, timeout_ms, &st, &err), 0);
    Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
    c.data.data = (uint8_t *)"x";
    c.data.len = 1;
    assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
    return st;
}

static bool has_result(void *arg) {
    return atomic_load((atomic_int *)arg) != 1;
}

/* ---- the idle timeout ---- */

static struct dfc_rpc_server_opts idle_opts = {.idle_timeout_ms = 300, .option_prefix = "test."};

static void test_idle_client_stream_ends_deadline_exceeded(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    /* One message, then silence, well inside the call's own 20 s deadline. */
    struct dfc_rpc_stream *st = open_put(f, 20000);
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err);
    assert_int_equal(r, -ETIMEDOUT);
    assert_string_equal(err.msg, "no message for 300ms (test.idleTimeout)");
    dfc_rpc_stream_free(st);
    /* The handler was told, with the same words, and so could clean up. */
    assert_true(test_wait_for(has_result, &put_result, 5000));
    assert_int_equal(atomic_load(&put_result), -ETIMEDOUT);
    pthread_mutex_lock(&handler_mu);
    assert_string_equal(handler_msg, "no message for 300ms (test.idleTimeout)");
    pthread_mutex_unlock(&handler_mu);
    /* A stream that keeps talking is not cut, however long it lasts in all. */
    st = open_put(f, 20000);
    for (int i = 0; i < 8; i++) {
        usleep(100000);
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
    }
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err), 1);
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st);
}

static struct dfc_rpc_server_opts idle_no_prefix_opts = {.idle_timeout_ms = 300};

static void test_client_that_stops_reading_frees_the_sender(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    Dfc__Test__V1__Chunk req = DFC__TEST__V1__CHUNK__INIT;
    req.seq = 1000; /* 1 GiB that the client never reads */
    req.total = 1 << 20;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.get, 30000, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    assert_true(test_wait_for(has_result, &get_result, 10000));
    assert_int_equal(atomic_load(&get_result), -ETIMEDOUT);
    pthread_mutex_lock(&handler_mu);
    assert_string_equal(handler_msg, "the client read nothing for 300ms (idleTimeout)");
    pthread_mutex_unlock(&handler_mu);
    /* What was in flight may still arrive, then the status. */
    ProtobufCMessage *m;
    int r;
    while ((r = dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err)) > 0) {
        dfc_rpc_msg_free(m);
    }
    assert_int_equal(r, -ETIMEDOUT);
    dfc_rpc_stream_free(st);
}

/* ---- reserved workers ---- */

/* n calls wait in the server's queue and a limit holds every one of them: the event that
 * proves a call did not start, where a sleep would only suggest it. */
struct held {
    struct fx *f;
    unsigned n;
};

static bool calls_held(void *arg) {
    const struct held *h = arg;
    bool held = false;
    return dfc_rpc_server_queued(h->f->server, &held) == h->n && held;
}

static bool three_puts_running(void *arg) {
    return atomic_load(&puts_running) >= 3;
}

static struct dfc_rpc_server_opts reserved_opts = {
    .max_workers = 4, .reserved_workers = 1, .max_workers_per_uid = 4, .idle_timeout_ms = -1};

static void test_unary_calls_are_served_while_streams_hold_the_workers(void **state) {
    /* 4 workers, 1 reserved: 3 streams run, the other 3 wait, and Echo still gets through. */
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st[6];
    for (int i = 0; i < 6; i++) {
        st[i] = open_put(f, 30000);
    }
    assert_true(test_wait_for(three_puts_running, NULL, 5000));
    /* The other 3 reached the server and a limit holds them: none is about to run. */
    assert_true(test_wait_for(calls_held, &(struct held){f, 3}, 5000));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(echo_on(f->client, 5000, &err), 0);
    }
    assert_int_equal(atomic_load(&puts_running), 3); /* the cap on streams held */
    /* The waiting streams run as the others end. */
    for (int i = 0; i < 3; i++) {
        ProtobufCMessage *m = NULL;
        assert_int_equal(dfc_rpc_stream_close_send(st[i], &err), 0);
        assert_int_equal(dfc_rpc_stream_recv(st[i], &dfc__test__v1__summary__descriptor, &m, &err),
                         1);
        dfc_rpc_msg_free(m);
        dfc_rpc_stream_free(st[i]);
    }
    assert_true(test_wait_for(three_puts_running, NULL, 5000));
    for (int i = 3; i < 6; i++) {
        dfc_rpc_stream_free(st[i]);
    }
}

/* ---- calls per uid ---- */

static bool echo_works(void *arg) {
    struct dfc_error err;
    return echo_on(arg, 5000, &err) == 0;
}

static struct dfc_rpc_server_opts per_uid_opts = {
    .max_calls_per_uid = 2, .idle_timeout_ms = -1, .option_prefix = "test."};

static void test_calls_in_flight_are_capped_per_uid(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dfc_rpc_stream_open(f->client, &rt.chat, 30000, &st[i], &err), 0);
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        ProtobufCMessage *m;
        assert_int_equal(dfc_rpc_stream_send(st[i], &c.base, &err), 0);
        assert_int_equal(dfc_rpc_stream_recv(st[i], &dfc__test__v1__chunk__descriptor, &m, &err),
                         1); /* in its handler */
        dfc_rpc_msg_free(m);
    }
    int r = echo_on(f->client, 5000, &err);
    assert_int_equal(dfc_error_to_grpc(r), 8); /* RESOURCE_EXHAUSTED */
    char want[200];
    snprintf(want, sizeof(want),
             "server busy: uid %u already has 2 calls in flight (test.maxCallsPerUser)",
             (unsigned)getuid());
    assert_string_equal(err.msg, want);
    /* A call that ends gives its slot back. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dfc_rpc_stream_finish(st[i], &err), 0);
        dfc_rpc_stream_free(st[i]);
    }
    assert_true(test_wait_for(echo_works, f->client, 5000));
}

/* ---- workers per uid ---- */

#define NOBODY 65534

#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (geteuid() != 0) {                                                                      \
            test_skip("needs root (calls as uid 65534)");                                          \
        }                                                                                          \
    } while (0)

/* Lets uid 65534 reach the fixture's socket. */
static void open_to_nobody(struct fx *f) {
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(chmod(f->path, 0666), 0);
}

/* A client whose connection carries uid 65534: SO_PEERCRED records the credentials at
 * connect(), so it is made and used with euid 65534. Its own max_recv_msg keeps gRPC from
 * sharing root's connection with it. */
static struct dfc_rpc_client *nobody_client(struct fx *f) {
    struct dfc_rpc_client_opts o = {.max_recv_msg = ((size_t)16 << 20) + 1};
    struct dfc_rpc_client *c = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(f->addr, &o, &c, &err), 0);
    return c;
}

static void become(uid_t uid) {
    if (seteuid(uid) < 0) {
        fprintf(stderr, "seteuid(%u): %m\n", (unsigned)uid);
        abort();
    }
}

struct slow_call {
    struct fx *f;
    pthread_t thread;
    int r;
};

static void *slow_echo(void *arg) {
    struct slow_call *sc = arg;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = SLOW_SEQ;
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    sc->r = dfc_rpc_unary(sc->f->client, &rt.echo, &in.base, 60000, &out, &err);
    dfc_rpc_msg_free(out);
    return NULL;
}

static bool two_slow_running(void *arg) {
    return atomic_load(&slow_running) >= 2;
}

static bool two_puts_running(void *arg) {
    return atomic_load(&puts_running) >= 2;
}

static struct dfc_rpc_server_opts share_opts = {
    .max_workers = 4, .reserved_workers = 1, .max_workers_per_uid = 2, .idle_timeout_ms = -1};

static void test_one_uid_cannot_hold_every_worker_with_unary_calls(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    open_to_nobody(f);
    /* Root (uid A) sends 4 slow calls, as many as there are workers: 2 run, 2 wait. */
    struct slow_call sc[4];
    for (int i = 0; i < 4; i++) {
        sc[i].f = f;
        sc[i].r = 1;
        assert_int_equal(pthread_create(&sc[i].thread, NULL, slow_echo, &sc[i]), 0);
    }
    assert_true(test_wait_for(two_slow_running, NULL, 5000));
    assert_true(test_wait_for(calls_held, &(struct held){f, 2}, 5000)); /* the other 2 wait */
    /* uid B's call is served while A's slow ones last (30 s, past its 10 s deadline). */
    become(NOBODY);
    struct dfc_rpc_client *c = nobody_client(f);
    int r = echo_on(c, 10000, &err);
    dfc_rpc_client_free(c);
    become(0);
    if (r != 0) {
        fprintf(stderr, "uid 65534's call: %d %s\n", r, err.msg);
    }
    assert_int_equal(r, 0);
    assert_int_equal(atomic_load(&slow_running), 2); /* A's share held */
    /* A's queued calls were held back, not refused: all 4 complete. */
    atomic_store(&slow_release, true);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(sc[i].thread, NULL), 0);
        assert_int_equal(sc[i].r, 0);
    }
}

static struct dfc_rpc_server_opts unary_cap_opts = {.max_workers = 6,
                                                    .reserved_workers = 1,
                                                    .max_workers_per_uid = 6,
                                                    .max_unary_running = 2,
                                                    .idle_timeout_ms = -1};

static bool one_put_running(void *arg) {
    return atomic_load(&puts_running) >= 1;
}

static void test_unary_calls_beyond_their_cap_wait_queued(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    /* 4 slow unary calls with 6 workers and max_unary_running 2: 2 run, 2 wait queued. */
    struct slow_call sc[4];
    for (int i = 0; i < 4; i++) {
        sc[i].f = f;
        sc[i].r = 1;
        assert_int_equal(pthread_create(&sc[i].thread, NULL, slow_echo, &sc[i]), 0);
    }
    assert_true(test_wait_for(two_slow_running, NULL, 5000));
    assert_true(test_wait_for(calls_held, &(struct held){f, 2}, 5000)); /* the other 2 wait */
    assert_int_equal(atomic_load(&slow_running), 2);
    /* The cap is on unary calls only: a stream still gets one of the free workers. */
    struct dfc_rpc_stream *st = open_put(f, 60000);
    assert_true(test_wait_for(one_put_running, NULL, 5000));
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err), 1);
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st);
    assert_int_equal(atomic_load(&slow_running), 2);
    /* The queued ones were held back, not refused: all 4 complete. */
    atomic_store(&slow_release, true);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(sc[i].thread, NULL), 0);
        assert_int_equal(sc[i].r, 0);
    }
}

static void test_one_uid_cannot_hold_every_worker_with_streams(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    open_to_nobody(f);
    /* Root (uid A) opens 6 slow streams: 2 run (its share), 4 wait. */
    struct dfc_rpc_stream *st[6];
    for (int i = 0; i < 6; i++) {
        st[i] = open_put(f, 60000);
    }
    assert_true(test_wait_for(two_puts_running, NULL, 5000));
    /* The other 4 wait, held by the uid's share (streams may hold 3 workers). */
    assert_true(test_wait_for(calls_held, &(struct held){f, 4}, 5000));
    /* uid B's stream gets a worker: its handler answers within 10 s. */
    become(NOBODY);
    struct dfc_rpc_client *c = nobody_client(f);
    struct dfc_rpc_stream *b;
    int r = dfc_rpc_stream_open(c, &rt.chat, 10000, &b, &err);
    ProtobufCMessage *m = NULL;
    if (r == 0) {
        Dfc__Test__V1__Chunk ch = DFC__TEST__V1__CHUNK__INIT;
        ch.seq = 7;
        r = dfc_rpc_stream_send(b, &ch.base, &err);
        if (r == 0) {
            r = dfc_rpc_stream_recv(b, &dfc__test__v1__chunk__descriptor, &m, &err);
        }
        if (r == 1) {
            assert_true(((Dfc__Test__V1__Chunk *)m)->seq == 1007);
            r = dfc_rpc_stream_close_send(b, &err);
        }
        dfc_rpc_msg_free(m);
        dfc_rpc_stream_free(b);
    }
    dfc_rpc_client_free(c);
    become(0);
    if (r != 0) {
        fprintf(stderr, "uid 65534's stream: %d %s\n", r, err.msg);
    }
    assert_int_equal(r, 0);
    assert_int_equal(atomic_load(&puts_running), 2); /* A's share held */
    /* A's queued streams run as its running ones end: all 6 complete. */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(dfc_rpc_stream_close_send(st[i], &err), 0);
    }
    for (int i = 0; i < 6; i++) {
        m = NULL;
        assert_int_equal(dfc_rpc_stream_recv(st[i], &dfc__test__v1__summary__descriptor, &m, &err),
                         1);
        dfc_rpc_msg_free(m);
        dfc_rpc_stream_free(st[i]);
    }
}

/* ---- connections ---- */

static int raw_connect(const char *path) {
    int fd = test_connect_unix(path);
    assert_true(fd >= 0);
    return fd;
}

enum { N_RAW = 60 };

struct flood {
    int fds[N_RAW];
    int want_closed;
};

static bool flood_refused(void *arg) {
    struct flood *fl = arg;
    int closed = 0;
    for (int i = 0; i < N_RAW; i++) {
        closed += test_closed_by_peer(fl->fds[i]);
    }
    return closed >= fl->want_closed;
}

static void connection_flood(struct fx *f, int cap) {
    struct dfc_error err;
    assert_int_equal(echo_on(f->client, 5000, &err), 0); /* the client's own connection */
    rpc_test_refused_start();
    struct flood fl = {.want_closed = N_RAW - (cap - 1)};
    for (int i = 0; i < N_RAW; i++) {
        fl.fds[i] = raw_connect(f->path);
    }
    /* All but cap - 1 (the client holds one) are closed as they are accepted. */
    assert_true(test_wait_for(flood_refused, &fl, 10000));
    /* One line for the whole flood, with its numbers, not one per connection. */
    char line[512];
    assert_int_equal(rpc_test_refused_stop(line, sizeof(line)), 1);
    assert_non_null(strstr(line, "refused=1 "));
    assert_non_null(strstr(line, "test.maxConnections="));
    /* The connection already open still works; once the flood is gone, new ones do too. */
    assert_int_equal(echo_on(f->client, 5000, &err), 0);
    for (int i = 0; i < N_RAW; i++) {
        close(fl.fds[i]);
    }
    struct dfc_rpc_client *c2;
    assert_int_equal(dfc_rpc_client_new(f->addr, NULL, &c2, &err), 0);
    assert_true(test_wait_for(echo_works, c2, 10000));
    dfc_rpc_client_free(c2);
}

static bool raw_closed(void *arg) {
    return test_closed_by_peer(*(int *)arg);
}

static void test_idle_connections_are_closed(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    int raw = raw_connect(f->path); /* never says a word */
    assert_true(test_wait_for(raw_closed, &raw, 10000));
    close(raw);
    /* A client whose connection was closed while idle reconnects for its next call. */
    assert_int_equal(echo_on(f->client, 5000, &err), 0);
    usleep(1000000);
    assert_int_equal(echo_on(f->client, 5000, &err), 0);
}

static struct dfc_rpc_server_opts conns_opts = {.max_conns = 4, .option_prefix = "test."};

static void test_connections_are_capped(void **state) {
    connection_flood(*state, 4);
}

static struct dfc_rpc_server_opts conns_per_uid_opts = {
    .max_conns = 1000, .max_conns_per_uid = 3, .option_prefix = "test."};

static void test_connections_are_capped_per_uid(void **state) {
    connection_flood(*state, 3);
}

int main(void) {
#define T(fn, opts) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, &(opts))
    const struct CMUnitTest tests[] = {
        T(test_idle_client_stream_ends_deadline_exceeded, idle_opts),
        T(test_client_that_stops_reading_frees_the_sender, idle_no_prefix_opts),
        T(test_unary_calls_are_served_while_streams_hold_the_workers, reserved_opts),
        T(test_calls_in_flight_are_capped_per_uid, per_uid_opts),
        T(test_one_uid_cannot_hold_every_worker_with_unary_calls, share_opts),
        T(test_one_uid_cannot_hold_every_worker_with_streams, share_opts),
        T(test_unary_calls_beyond_their_cap_wait_queued, unary_cap_opts),
        T(test_idle_connections_are_closed, idle_opts),
        T(test_connections_are_capped, conns_opts),
        T(test_connections_are_capped_per_uid, conns_per_uid_opts),
    };
    if (rpc_test_resolve() < 0) {
        return 1;
    }
    return test_run_group(tests, NULL, NULL);
}
