/*
 * Tests for lib/src/rpc_server.c and rpc_client.c: a real server on a temp Unix socket and a
 * real client, covering the four call kinds, unary calls driven by one thread (dfc_rpc_async),
 * deadlines, client cancellation, an unknown method, an oversized and a malformed message,
 * table validation (server rows and client method lookup) and graceful shutdown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "dfc/log.h"
#include "dfc/rpc_bulk.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "test/rpc_test.pb-c.h"
#include "rpc_test_service.h"
#include "test_support.h"

enum put_outcome { PUT_NONE, PUT_COMPLETE, PUT_TRUNCATED, PUT_CANCELLED };

/* What the handlers observed, for the tests to assert on. */
struct observed {
    atomic_int echo_saw_cancel;
    atomic_int put_outcome;
    atomic_int get_send_failed;
    atomic_int handlers_done;
    atomic_int echo_started; /* Echo handlers that began */
};

static struct observed obs;

/* ---- the test service ---- */

static int echo(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                ProtobufCMessage *resp, struct dfc_error *err) {
    const Dfc__Test__V1__Chunk *in = (const Dfc__Test__V1__Chunk *)req;
    Dfc__Test__V1__Chunk *out = (Dfc__Test__V1__Chunk *)resp;
    atomic_fetch_add(&obs.echo_started, 1);
    for (uint32_t waited = 0; waited < in->sleep_ms; waited += 5) {
        if (dfc_rpc_call_cancelled(call)) {
            atomic_store(&obs.echo_saw_cancel, 1);
            atomic_fetch_add(&obs.handlers_done, 1);
            return dfc_error_set(err, -ECANCELED, "gave up");
        }
        usleep(5000);
    }
    atomic_fetch_add(&obs.handlers_done, 1);
    /* x-dfc-trailer in the request: send it back as trailing metadata x-dfc-reason, with the
     * status whatever it is. */
    char reason[64];
    if (dfc_rpc_call_metadata(call, "x-dfc-trailer", reason, sizeof(reason)) >= 0 &&
        dfc_rpc_call_set_trailer(call, "x-dfc-reason", reason) < 0) {
        return dfc_error_set(err, -EIO, "cannot set the trailer");
    }
    if (in->fail_code != 0) {
        return dfc_error_set(err, dfc_error_from_grpc((int)in->fail_code), "failing as asked (%u)",
                             in->fail_code);
    }
    out->seq = in->seq + 1;
    out->data.data = dfc_rpc_call_alloc(call, in->data.len + 1);
    if (in->data.len > 0) {
        memcpy(out->data.data, in->data.data, in->data.len);
    }
    out->data.len = in->data.len;
    /* Report what the layer knows about the caller: total = pid + 1 (0 when unknown), and the
     * x-dfc-echo metadata in place of the data when present. */
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(call, &cred) == 0) {
        out->total = (uint64_t)cred.pid + 1;
        out->fail_code = cred.uid;
    }
    dfc_rpc_call_log_field(call, "echo_seq", in->seq == 41 ? "forty one" : "other");
    char md[64];
    int n = dfc_rpc_call_metadata(call, "x-dfc-echo", md, sizeof(md));
    if (n >= 0) {
        out->data.data = (uint8_t *)dfc_rpc_call_strdup(call, md);
        out->data.len = (size_t)n;
    }
    return 0;
}

/* Client stream: the first chunk carries the total length; committing needs it to match. */
static int put(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    Dfc__Test__V1__Summary *out = (Dfc__Test__V1__Summary *)resp;
    uint64_t total = 0, bytes = 0, count = 0;
    uint32_t crc = 0;
    ProtobufCMessage *m;
    int r;
    while ((r = dfc_rpc_call_recv(call, &m, err)) > 0) {
        Dfc__Test__V1__Chunk *c = (Dfc__Test__V1__Chunk *)m;
        if (count == 0) {
            total = c->total;
        }
        bytes += c->data.len;
        crc = dfc_crc32_update(crc, c->data.data, c->data.len);
        count++;
        dfc_rpc_msg_free(m);
    }
    if (r < 0) {
        atomic_store(&obs.put_outcome, PUT_CANCELLED);
        return r;
    }
    if (bytes != total) {
        atomic_store(&obs.put_outcome, PUT_TRUNCATED);
        return dfc_error_set(err, -EINVAL, "stream ended after %llu of %llu bytes",
                             (unsigned long long)bytes, (unsigned long long)total);
    }
    atomic_store(&obs.put_outcome, PUT_COMPLETE);
    out->count = count;
    out->bytes = bytes;
    out->crc = crc;
    return 0;
}

/* Server stream: req.seq messages of req.total bytes each. */
static int get(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    const Dfc__Test__V1__Chunk *in = (const Dfc__Test__V1__Chunk *)req;
    /* With in->bulk every message gets a fresh bulk buffer (as a piece read would). */
    uint8_t *buf = malloc(in->total ? in->total : 1);
    for (uint64_t i = 0; i < in->total; i++) {
        buf[i] = (uint8_t)(i * 7);
    }
    int r = 0;
    for (uint64_t i = 0; i < in->seq; i++) {
        Dfc__Test__V1__Chunk out = DFC__TEST__V1__CHUNK__INIT;
        out.seq = i;
        out.data.data = buf;
        out.data.len = in->total;
        if (in->bulk) {
            struct dfc_rpc_bulk *b = dfc_rpc_bulk_new(in->total + 16);
            memcpy(dfc_rpc_bulk_data(b) + 16, buf, in->total);
            dfc_rpc_bulk_data(b)[16] ^= (uint8_t)i; /* each message differs */
            out.data.data = dfc_rpc_bulk_data(b) + 16;
            r = dfc_rpc_call_send_bulk(call, &out.base, b, err);
            dfc_rpc_bulk_free(b); /* gRPC keeps the memory until it is written */
        } else {
            r = dfc_rpc_call_send(call, &out.base, err);
        }
        if (r < 0) {
            atomic_store(&obs.get_send_failed, 1);
            break;
        }
        if (in->sleep_ms) {
            usleep(in->sleep_ms * 1000);
        }
    }
    free(buf);
    return r;
}

/* The test service with this file's handlers (Chat is the shared echo). */
static const struct rpc_test_handlers handlers = {echo, put, get, rpc_test_chat};

/* ---- fixture ---- */

struct fx {
    char dir[256];
    char addr[300];
    struct dfc_rpc_server *server;
    struct dfc_rpc_client *client;
};

static struct fx *fx_start(size_t max_recv) {
    struct fx *f = calloc(1, sizeof(*f));
    struct dfc_error err;
    memset(&obs, 0, sizeof(obs));
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc");
    snprintf(f->addr, sizeof(f->addr), "unix:%s/t.sock", f->dir);
    struct dfc_rpc_server_opts o = {.max_recv_msg = max_recv, .name = "test"};
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, &handlers, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen(f->server, f->addr, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    assert_int_equal(dfc_rpc_client_new(f->addr, NULL, &f->client, &err), 0);
    return f;
}

static int setup(void **state) {
    *state = fx_start(0);
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    char sock[300];
    snprintf(sock, sizeof(sock), "%s/t.sock", f->dir);
    dfc_rpc_client_free(f->client);
    dfc_rpc_server_free(f->server);
    struct stat st;
    assert_int_equal(stat(sock, &st), -1); /* the socket is removed on shutdown */
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static Dfc__Test__V1__Chunk *echo_call(struct fx *f, Dfc__Test__V1__Chunk *in, int64_t timeout,
                                       int *ret, struct dfc_error *err) {
    ProtobufCMessage *out = NULL;
    *ret = dfc_rpc_unary(f->client, &rt.echo, &in->base, timeout, &out, err);
    return (Dfc__Test__V1__Chunk *)out;
}

/* ---- tests ---- */

static char last_log[4096];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void capture_log(int level, const char *line, size_t len, void *ud) {
    pthread_mutex_lock(&log_mu);
    char echo_field[DFC_RPC_PATH_MAX + 8];
    snprintf(echo_field, sizeof(echo_field), "method=%s", rt.echo.path);
    if (strstr(line, echo_field) != NULL) {
        snprintf(last_log, sizeof(last_log), "%.*s", (int)len, line);
    }
    pthread_mutex_unlock(&log_mu);
}

static bool echo_logged(void *arg) {
    pthread_mutex_lock(&log_mu);
    bool ok = strstr(last_log, "echo_seq=\"forty one\" code=OK") != NULL;
    pthread_mutex_unlock(&log_mu);
    return ok;
}

static void test_unary(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    dfc_log_set_level(DFC_LOG_DEBUG);
    dfc_log_set_sink(capture_log, NULL);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = 41;
    in.data.data = (uint8_t *)"hello";
    in.data.len = 5;
    int r;
    Dfc__Test__V1__Chunk *out = echo_call(f, &in, 5000, &r, &err);
    assert_int_equal(r, 0);
    assert_true(out->seq == 42);
    assert_int_equal(out->data.len, 5);
    assert_memory_equal(out->data.data, "hello", 5);
    dfc_rpc_msg_free(&out->base);
    /* One log line per call, with the handler's fields. */
    assert_true(test_wait_for(echo_logged, NULL, 2000));
    dfc_log_set_sink(NULL, NULL);
    dfc_log_set_level(DFC_LOG_INFO);

    /* An empty request message is valid proto3 (all defaults). */
    Dfc__Test__V1__Chunk empty = DFC__TEST__V1__CHUNK__INIT;
    out = echo_call(f, &empty, 5000, &r, &err);
    assert_int_equal(r, 0);
    assert_true(out->seq == 1);
    dfc_rpc_msg_free(&out->base);
}

static void test_handler_error_maps_to_status(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    int r;
    for (uint32_t code = 1; code <= 16; code++) {
        in.fail_code = code;
        assert_null(echo_call(f, &in, 5000, &r, &err));
        assert_int_equal(dfc_error_to_grpc(r), (int)code);
        char want[64];
        snprintf(want, sizeof(want), "failing as asked (%u)", code);
        assert_string_equal(err.msg, want);
    }
}

static void test_client_stream(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    enum { N = 10, SZ = 1 << 20 };
    uint8_t *buf = malloc(SZ);
    uint32_t crc = 0;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, 10000, &st, &err), 0);
    for (int i = 0; i < N; i++) {
        memset(buf, i, SZ);
        crc = dfc_crc32_update(crc, buf, SZ);
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        c.seq = (uint64_t)i;
        c.total = (uint64_t)N * SZ;
        c.data.data = buf;
        c.data.len = SZ;
        assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
    }
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err), 1);
    Dfc__Test__V1__Summary *s = (Dfc__Test__V1__Summary *)m;
    assert_true(s->count == N);
    assert_true(s->bytes == (uint64_t)N * SZ);
    assert_int_equal(s->crc, crc);
    assert_int_equal(dfc_rpc_stream_finish(st, &err), 0);
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st);
    free(buf);
    assert_int_equal(atomic_load(&obs.put_outcome), PUT_COMPLETE);
}

static void test_client_stream_error_status(void **state) {
    /* The handler refuses a stream that ends short of its announced length. */
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, 10000, &st, &err), 0);
    Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
    c.total = 100;
    c.data.data = (uint8_t *)"abc";
    c.data.len = 3;
    assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err),
                     -EINVAL);
    assert_string_equal(err.msg, "stream ended after 3 of 100 bytes");
    dfc_rpc_stream_free(st);
}

static void test_server_stream(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    Dfc__Test__V1__Chunk req = DFC__TEST__V1__CHUNK__INIT;
    req.seq = 6;            /* messages */
    req.total = 300 * 1024; /* bytes each */
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.get, 10000, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m;
    int r;
    uint64_t n = 0;
    while ((r = dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err)) > 0) {
        Dfc__Test__V1__Chunk *c = (Dfc__Test__V1__Chunk *)m;
        assert_true(c->seq == n);
        assert_int_equal(c->data.len, 300 * 1024);
        assert_int_equal(c->data.data[1000], (uint8_t)(1000 * 7));
        n++;
        dfc_rpc_msg_free(m);
    }
    assert_int_equal(r, 0);
    assert_true(n == 6);
    dfc_rpc_stream_free(st);
}

static void test_bidi_stream(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.chat, 10000, &st, &err), 0);
    for (uint64_t i = 0; i < 20; i++) {
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        c.seq = i;
        assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
        ProtobufCMessage *m;
        assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
        assert_true(((Dfc__Test__V1__Chunk *)m)->seq == i + 1000);
        dfc_rpc_msg_free(m);
    }
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 0);
    assert_int_equal(dfc_rpc_stream_finish(st, &err), 0);
    dfc_rpc_stream_free(st);
}

static bool echo_cancel_seen(void *arg) {
    return atomic_load(&obs.echo_saw_cancel) == 1;
}

static void test_deadline_exceeded(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.sleep_ms = 5000;
    int r;
    double t0 = test_now_ms();
    assert_null(echo_call(f, &in, 100, &r, &err));
    assert_int_equal(r, -ETIMEDOUT);
    assert_int_equal(dfc_error_to_grpc(r), 4);
    assert_true(test_now_ms() - t0 < 4000);
    /* The deadline reaches the handler, which stops early. */
    assert_true(test_wait_for(echo_cancel_seen, NULL, 4000));
}

static bool put_finished(void *arg) {
    return atomic_load(&obs.put_outcome) != PUT_NONE;
}

static void test_client_cancels_mid_stream(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    uint8_t buf[4096] = {0};
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, 10000, &st, &err), 0);
    for (int i = 0; i < 3; i++) {
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        c.total = 1 << 20;
        c.data.data = buf;
        c.data.len = sizeof(buf);
        assert_int_equal(dfc_rpc_stream_send(st, &c.base, &err), 0);
    }
    usleep(50000);
    dfc_rpc_stream_cancel(st);
    assert_int_equal(dfc_rpc_stream_finish(st, &err), -ECANCELED);
    dfc_rpc_stream_free(st);
    /* The handler learns the stream did not complete and does not commit it. */
    assert_true(test_wait_for(put_finished, NULL, 5000));
    assert_int_not_equal(atomic_load(&obs.put_outcome), PUT_COMPLETE);
}

static bool get_failed(void *arg) {
    return atomic_load(&obs.get_send_failed) == 1;
}

static void test_client_stops_reading_server_stream(void **state) {
    /* A client that goes away mid-download makes the handler's sends fail. */
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    Dfc__Test__V1__Chunk req = DFC__TEST__V1__CHUNK__INIT;
    req.seq = 100000;
    req.total = 64 * 1024;
    req.sleep_ms = 1;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.get, 10000, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err), 1);
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st); /* cancels */
    assert_true(test_wait_for(get_failed, NULL, 5000));
}

static void test_bulk_client_stream(void **state) {
    /* Zero-copy sends: the data field points into one bulk buffer, at varying offsets, with
     * fields on both sides of it (seq before, total after). */
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    enum { N = 8, SZ = 700 * 1024 };
    struct dfc_rpc_bulk *b = dfc_rpc_bulk_new(SZ + N);
    for (size_t i = 0; i < SZ + N; i++) {
        dfc_rpc_bulk_data(b)[i] = (uint8_t)(i * 13 + 1);
    }
    uint32_t crc = 0;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, 10000, &st, &err), 0);
    for (int i = 0; i < N; i++) {
        Dfc__Test__V1__Chunk c = DFC__TEST__V1__CHUNK__INIT;
        c.seq = (uint64_t)i;
        c.total = (uint64_t)N * SZ;
        c.data.data = dfc_rpc_bulk_data(b) + i;
        c.data.len = SZ;
        crc = dfc_crc32_update(crc, c.data.data, SZ);
        assert_int_equal(dfc_rpc_stream_send_bulk(st, &c.base, b, &err), 0);
    }
    dfc_rpc_bulk_free(b);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err), 1);
    Dfc__Test__V1__Summary *s = (Dfc__Test__V1__Summary *)m;
    assert_true(s->bytes == (uint64_t)N * SZ);
    assert_int_equal(s->crc, crc);
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st);
}

static void test_bulk_server_stream(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    Dfc__Test__V1__Chunk req = DFC__TEST__V1__CHUNK__INIT;
    req.seq = 5;
    req.total = 1 << 20;
    req.bulk = 1;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.get, 10000, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &req.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m;
    int r;
    uint64_t n = 0;
    while ((r = dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &m, &err)) > 0) {
        Dfc__Test__V1__Chunk *c = (Dfc__Test__V1__Chunk *)m;
        assert_true(c->seq == n);
        assert_int_equal(c->data.len, 1 << 20);
        assert_int_equal(c->data.data[0], (uint8_t)n);
        assert_int_equal(c->data.data[12345], (uint8_t)(12345 * 7));
        n++;
        dfc_rpc_msg_free(m);
    }
    assert_int_equal(r, 0);
    assert_true(n == 5);
    dfc_rpc_stream_free(st);
}

/* A method a newer .proto might add to RpcTest, which the test server does not serve. */
static const ProtobufCMethodDescriptor newer_methods[] = {
    {"Nope", &dfc__test__v1__chunk__descriptor, &dfc__test__v1__chunk__descriptor},
};

/* RpcTest as a newer .proto would have it (only "Nope"), and that method resolved. */
static void newer_service(ProtobufCServiceDescriptor *newer, struct dfc_rpc_client_method *nope) {
    struct dfc_error err;
    *newer = dfc__test__v1__rpc_test__descriptor;
    newer->n_methods = 1;
    newer->methods = newer_methods;
    newer->method_indices_by_name = NULL;
    assert_int_equal(dfc_rpc_method_lookup(newer, "Nope", nope, &err), 0);
}

static void test_unknown_method(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    ProtobufCServiceDescriptor newer;
    struct dfc_rpc_client_method nope;
    newer_service(&newer, &nope);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(f->client, &nope, &in.base, 5000, &out, &err);
    assert_int_equal(r, -ENOSYS);
    assert_int_equal(dfc_error_to_grpc(r), 12);
    char want[DFC_RPC_PATH_MAX + 32];
    snprintf(want, sizeof(want), "unknown method %s", nope.path);
    assert_string_equal(err.msg, want);
    /* a service the server does not have at all */
    newer.name = "no.Such";
    assert_int_equal(dfc_rpc_method_lookup(&newer, "Nope", &nope, &err), 0);
    r = dfc_rpc_unary(f->client, &nope, &in.base, 5000, &out, &err);
    assert_int_equal(dfc_error_to_grpc(r), 12);
}

static void test_client_method_lookup(void **state) {
    struct dfc_error err;
    const ProtobufCServiceDescriptor *svc = &dfc__test__v1__rpc_test__descriptor;
    struct dfc_rpc_client_method m;
    memset(&m, 0, sizeof(m));
    assert_int_equal(dfc_rpc_method_lookup(svc, "Put", &m, &err), 0);
    char want[DFC_RPC_PATH_MAX];
    snprintf(want, sizeof(want), "/%s/Put", svc->name); /* the server's spelling */
    assert_string_equal(m.path, want);
    assert_ptr_equal(m.req, &dfc__test__v1__chunk__descriptor);
    assert_ptr_equal(m.resp, &dfc__test__v1__summary__descriptor);
    /* the resolved table of main() agrees */
    assert_string_equal(rt.put.path, want);
    assert_ptr_equal(rt.put.resp, &dfc__test__v1__summary__descriptor);

    /* an unknown name fails, naming the service and the method, and fills nothing */
    struct dfc_rpc_client_method bad;
    memset(&bad, 0, sizeof(bad));
    assert_int_equal(dfc_rpc_method_lookup(svc, "Pub", &bad, &err), -EINVAL);
    assert_string_equal(err.msg, "dfc.test.v1.RpcTest has no method `Pub`");
    assert_null(bad.req);
    assert_string_equal(bad.path, "");
    /* names are exact: no case folding, no prefix match */
    assert_int_equal(dfc_rpc_method_lookup(svc, "put", &bad, &err), -EINVAL);
    assert_int_equal(dfc_rpc_method_lookup(svc, "Pu", &bad, &err), -EINVAL);
    assert_int_equal(dfc_rpc_method_lookup(svc, "", &bad, &err), -EINVAL);

    /* a path that does not fit is refused, not truncated */
    char long_name[DFC_RPC_PATH_MAX + 8];
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    ProtobufCServiceDescriptor long_svc = *svc;
    long_svc.name = long_name;
    assert_int_equal(dfc_rpc_method_lookup(&long_svc, "Echo", &bad, &err), -ENAMETOOLONG);
    assert_non_null(strstr(err.msg, "/Echo: the method path is over 127 bytes"));
}

static void test_client_table_with_bad_name_fails_at_resolve(void **state) {
    struct dfc_error err;
    struct dfc_rpc_client_method echo, pub;
    memset(&pub, 0, sizeof(pub));
    const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Echo", &echo),
        DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Pub", &pub),
    };
    assert_int_equal(dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), &err), -EINVAL);
    assert_string_equal(err.msg, "dfc.test.v1.RpcTest has no method `Pub`");
    assert_null(pub.req);
    /* the good rows alone resolve */
    assert_int_equal(dfc_rpc_client_resolve(rows, 1, &err), 0);
    assert_ptr_equal(echo.resp, &dfc__test__v1__chunk__descriptor);
}

static void test_malformed_request(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    Dfc__Test__V1__WrongShape bad = DFC__TEST__V1__WRONG_SHAPE__INIT;
    bad.seq.data = (uint8_t *)"xyz";
    bad.seq.len = 3;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(f->client, &rt.echo, &bad.base, 5000, &out, &err);
    assert_int_equal(dfc_error_to_grpc(r), 3);
    assert_string_equal(err.msg, "malformed request: cannot decode dfc.test.v1.Chunk");

    /* The same in a stream: the handler's recv reports it. */
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_stream_open(f->client, &rt.put, 5000, &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_send(st, &bad.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(st, &err), 0);
    ProtobufCMessage *m = NULL;
    r = dfc_rpc_stream_recv(st, &dfc__test__v1__summary__descriptor, &m, &err);
    assert_int_equal(dfc_error_to_grpc(r), 3);
    assert_string_equal(err.msg, "malformed message: cannot decode dfc.test.v1.Chunk");
    dfc_rpc_stream_free(st);
}

/* An answer the client cannot decode as the response type it expects: the unary call (one
 * batch) fails with EBADMSG naming the type, and the next call works. */
static void test_malformed_response(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_client_method wrong = rt.echo;
    wrong.resp = &dfc__test__v1__wrong_shape__descriptor; /* seq is bytes there, a varint here */
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = 7;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(f->client, &wrong, &in.base, 5000, &out, &err);
    assert_int_equal(r, -EBADMSG);
    assert_null(out);
    assert_string_equal(err.msg, "malformed response: cannot decode dfc.test.v1.WrongShape");
    Dfc__Test__V1__Chunk *ok = echo_call(f, &in, 5000, &r, &err);
    assert_int_equal(r, 0);
    assert_true(ok->seq == 8);
    dfc_rpc_msg_free(&ok->base);
}

static void test_oversized_message(void **state) {
    struct fx *f = fx_start(1 << 20); /* a 1 MiB limit */
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    uint8_t *big = calloc(1, 2 << 20);
    in.data.data = big;
    in.data.len = 2 << 20;
    int r;
    assert_null(echo_call(f, &in, 5000, &r, &err));
    assert_int_equal(dfc_error_to_grpc(r), 8);
    /* The server still serves normal calls. */
    in.data.len = 1000;
    Dfc__Test__V1__Chunk *out = echo_call(f, &in, 5000, &r, &err);
    assert_int_equal(r, 0);
    dfc_rpc_msg_free(&out->base);
    free(big);
    void *st = f;
    teardown(&st);
}

static void test_unavailable_without_server(void **state) {
    struct dfc_error err;
    struct dfc_rpc_client *c;
    assert_int_equal(dfc_rpc_client_new("unix:/nonexistent/dir/x.sock", NULL, &c, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(c, &rt.echo, &in.base, 5000, &out, &err);
    assert_int_equal(dfc_error_to_grpc(r), 14);
    dfc_rpc_client_free(c);
}

struct md_call {
    struct dfc_rpc_client *c;
    atomic_int done;
    int r;
    char msg[sizeof(((struct dfc_error *)0)->msg)];
};

static void *too_much_md(void *arg) {
    struct md_call *b = arg;
    struct dfc_rpc_md md[9];
    for (size_t i = 0; i < 9; i++) {
        md[i] = (struct dfc_rpc_md){"x-k", "v"};
    }
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    b->r = dfc_rpc_unary_md(b->c, &rt.echo, &in.base, 0, md, 9, &out, &err);
    snprintf(b->msg, sizeof(b->msg), "%s", b->r < 0 ? err.msg : "");
    atomic_store(&b->done, 1);
    return NULL;
}

static bool md_call_done(void *arg) {
    return atomic_load(&((struct md_call *)arg)->done) == 1;
}

/* More metadata than a call takes is refused before the call is set up: not after the
 * reconnect wait a channel in TRANSIENT_FAILURE costs (here up to 10 minutes, as the call has
 * no deadline of its own). */
static void test_unary_refuses_too_much_metadata_at_once(void **state) {
    struct dfc_error err;
    struct dfc_rpc_client_opts o = {.reconnect_wait_ms = 600000};
    struct md_call b = {.r = 1};
    assert_int_equal(dfc_rpc_client_new("unix:/nonexistent/dir/x.sock", &o, &b.c, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    /* a first call fails at once (UNAVAILABLE) and leaves the channel in TRANSIENT_FAILURE */
    assert_int_equal(dfc_error_to_grpc(dfc_rpc_unary(b.c, &rt.echo, &in.base, 5000, &out, &err)),
                     14);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, too_much_md, &b), 0);
    bool done = test_wait_for(md_call_done, &b, 20000);
    if (!done) {
        pthread_detach(th); /* still in the reconnect wait: the client stays with it */
    }
    assert_true(done);
    pthread_join(th, NULL);
    assert_int_equal(b.r, -E2BIG);
    assert_string_equal(b.msg, "at most 8 metadata entries");
    dfc_rpc_client_free(b.c);
}

static int never_called(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                        ProtobufCMessage *resp, struct dfc_error *err) {
    return 0;
}

static void test_table_is_checked_against_descriptor(void **state) {
    struct dfc_error err;
    struct dfc_rpc_server *s;
    assert_int_equal(dfc_rpc_server_new(NULL, &s, &err), 0);
    const struct dfc_rpc_method wrong_type[] = {
        {"Put", DFC_RPC_CLIENT_STREAM, &dfc__test__v1__chunk__descriptor,
         &dfc__test__v1__chunk__descriptor, never_called},
    };
    assert_int_equal(dfc_rpc_server_add_service(s, &dfc__test__v1__rpc_test__descriptor, wrong_type,
                                                1, NULL, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, rt.put.path + 1)); /* "package.Service/Put" */
    const struct dfc_rpc_method wrong_name[] = {
        {"Pub", DFC_RPC_UNARY, &dfc__test__v1__chunk__descriptor, &dfc__test__v1__chunk__descriptor,
         never_called},
    };
    assert_int_equal(dfc_rpc_server_add_service(s, &dfc__test__v1__rpc_test__descriptor, wrong_name,
                                                1, NULL, &err),
                     -EINVAL);
    assert_string_equal(err.msg, "dfc.test.v1.RpcTest has no method `Pub`");
    assert_int_equal(dfc_rpc_server_listen(s, "unix:/proc/nope/x.sock", &err), -EADDRINUSE);
    dfc_rpc_server_free(s);
}

static void test_listen_refuses_non_socket(void **state) {
    struct dfc_error err;
    struct dfc_rpc_server *s;
    char dir[256], addr[320], path[300];
    test_mkdtemp(dir, sizeof(dir), "rpc-file");
    snprintf(path, sizeof(path), "%s/regular", dir);
    snprintf(addr, sizeof(addr), "unix://%s", path);
    FILE *fp = fopen(path, "w");
    fclose(fp);
    assert_int_equal(dfc_rpc_server_new(NULL, &s, &err), 0);
    assert_int_equal(dfc_rpc_server_listen(s, addr, &err), -EEXIST);
    dfc_rpc_server_free(s);
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* not unlinked */
    test_rmtree(dir);
}

/* Echo called as a stream, with x-dfc-trailer set to reason (NULL: none); returns the status
 * code and leaves the stream in *ret for its trailers. */
static int echo_stream(struct fx *f, uint32_t fail_code, const char *reason,
                       struct dfc_rpc_stream **ret, struct dfc_error *err) {
    const struct dfc_rpc_md md[] = {{"x-dfc-trailer", reason}};
    assert_int_equal(
        dfc_rpc_stream_open_md(f->client, &rt.echo, 5000, md, reason ? 1 : 0, ret, err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.fail_code = fail_code;
    assert_int_equal(dfc_rpc_stream_send(*ret, &in.base, err), 0);
    assert_int_equal(dfc_rpc_stream_close_send(*ret, err), 0);
    ProtobufCMessage *out = NULL;
    int r;
    while ((r = dfc_rpc_stream_recv(*ret, &dfc__test__v1__chunk__descriptor, &out, err)) > 0) {
        dfc_rpc_msg_free(out);
    }
    return r;
}

/* A handler's trailing metadata reaches the client with its error status, beside the message
 * (which stays the handler's), and with an OK status too; a call that set none has none. */
static void test_handler_trailer_reaches_client(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *st = NULL;
    char buf[64];
    assert_int_equal(echo_stream(f, 9, "other-mount-ns", &st, &err), DFC_E_FAILED_PRECONDITION);
    assert_string_equal(dfc_error_msg(&err), "failing as asked (9)");
    assert_int_equal(dfc_rpc_stream_trailer(st, "x-dfc-reason", buf, sizeof(buf)), 14);
    assert_string_equal(buf, "other-mount-ns");
    assert_int_equal(dfc_rpc_stream_trailer(st, "x-dfc-reason", buf, 14), -ENAMETOOLONG);
    assert_int_equal(dfc_rpc_stream_trailer(st, "x-dfc-other", buf, sizeof(buf)), -ENOENT);
    dfc_rpc_stream_free(st);

    assert_int_equal(echo_stream(f, 0, "fine", &st, &err), 0);
    assert_int_equal(dfc_rpc_stream_trailer(st, "x-dfc-reason", buf, sizeof(buf)), 4);
    assert_string_equal(buf, "fine");
    dfc_rpc_stream_free(st);

    assert_int_equal(echo_stream(f, 9, NULL, &st, &err), DFC_E_FAILED_PRECONDITION);
    assert_int_equal(dfc_rpc_stream_trailer(st, "x-dfc-reason", buf, sizeof(buf)), -ENOENT);
    dfc_rpc_stream_free(st);
}

static void test_unix_listener_knows_the_caller(void **state) {
    struct dfc_error err;
    struct dfc_rpc_server *s;
    struct dfc_rpc_client *c;
    char dir[256], path[300], addr[320];
    test_mkdtemp(dir, sizeof(dir), "rpc-cred");
    snprintf(path, sizeof(path), "%s/cred.sock", dir);
    snprintf(addr, sizeof(addr), "unix:%s", path);
    assert_int_equal(dfc_rpc_server_new(NULL, &s, &err), 0);
    assert_int_equal(rpc_test_add_service(s, &handlers, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_unix(s, path, 0660, -1, &err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0660);
    assert_int_equal(dfc_rpc_server_start(s, &err), 0);
    assert_int_equal(dfc_rpc_client_new(addr, NULL, &c, &err), 0);

    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    const struct dfc_rpc_md md[] = {{"x-dfc-echo", "from-metadata"}};
    ProtobufCMessage *out = NULL;
    assert_int_equal(dfc_rpc_unary_md(c, &rt.echo, &in.base, 5000, md, 1, &out, &err), 0);
    Dfc__Test__V1__Chunk *o = (Dfc__Test__V1__Chunk *)out;
    assert_true(o->total == (uint64_t)getpid() + 1);
    assert_int_equal(o->fail_code, getuid());
    assert_int_equal(o->data.len, 13);
    assert_memory_equal(o->data.data, "from-metadata", 13);
    dfc_rpc_msg_free(out);

    /* Streams work over the same connection kind. */
    struct dfc_rpc_stream *stream;
    assert_int_equal(dfc_rpc_stream_open(c, &rt.chat, 5000, &stream, &err), 0);
    Dfc__Test__V1__Chunk m = DFC__TEST__V1__CHUNK__INIT;
    assert_int_equal(dfc_rpc_stream_send(stream, &m.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(stream, &dfc__test__v1__chunk__descriptor, &out, &err), 1);
    dfc_rpc_msg_free(out);
    assert_int_equal(dfc_rpc_stream_finish(stream, &err), 0);
    dfc_rpc_stream_free(stream);

    dfc_rpc_client_free(c);
    dfc_rpc_server_free(s);
    assert_int_equal(stat(path, &st), -1); /* removed on shutdown */
    test_rmtree(dir);
}

static void test_tcp_caller_has_no_credentials(void **state) {
    /* Over the core-managed unix listener of the fixture, credentials are unknown. */
    struct fx *f = *state;
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    int r;
    Dfc__Test__V1__Chunk *out = echo_call(f, &in, 5000, &r, &err);
    assert_int_equal(r, 0);
    assert_true(out->total == 0);
    dfc_rpc_msg_free(&out->base);
}

static void test_tcp_listener(void **state) {
    struct dfc_error err;
    struct dfc_rpc_server *s;
    struct dfc_rpc_client *c;
    assert_int_equal(dfc_rpc_server_new(NULL, &s, &err), 0);
    assert_int_equal(rpc_test_add_service(s, &handlers, NULL, &err), 0);
    int port = dfc_rpc_server_listen(s, "127.0.0.1:0", &err);
    assert_true(port > 0);
    assert_int_equal(dfc_rpc_server_start(s, &err), 0);
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &c, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.seq = 9;
    ProtobufCMessage *out = NULL;
    assert_int_equal(dfc_rpc_unary(c, &rt.echo, &in.base, 5000, &out, &err), 0);
    assert_true(((Dfc__Test__V1__Chunk *)out)->seq == 10);
    dfc_rpc_msg_free(out);
    dfc_rpc_client_free(c);
    dfc_rpc_server_free(s);
}

struct bg_call {
    struct fx *f;
    uint32_t sleep_ms;
    int r;
    pthread_t th;
};

static void *bg_echo(void *arg) {
    struct bg_call *b = arg;
    struct dfc_error err;
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.sleep_ms = b->sleep_ms;
    Dfc__Test__V1__Chunk *out = echo_call(b->f, &in, 30000, &b->r, &err);
    dfc_rpc_msg_free(out ? &out->base : NULL);
    return NULL;
}

static bool echo_started(void *arg) {
    (void)arg;
    return atomic_load(&obs.echo_started) > 0;
}

static void test_shutdown_drains_in_flight_calls(void **state) {
    struct fx *f = *state;
    struct bg_call b = {.f = f, .sleep_ms = 300};
    pthread_create(&b.th, NULL, bg_echo, &b);
    assert_true(test_wait_for(echo_started, NULL, 10000)); /* the call is in its handler */
    double t0 = test_now_ms();
    dfc_rpc_server_shutdown(f->server, 10000);
    pthread_join(b.th, NULL);
    assert_int_equal(b.r, 0); /* finished normally within the grace period */
    assert_int_equal(atomic_load(&obs.handlers_done), 1);
    assert_true(test_now_ms() - t0 < 5000);
}

static void test_shutdown_cancels_after_grace(void **state) {
    struct fx *f = *state;
    struct bg_call b = {.f = f, .sleep_ms = 20000};
    pthread_create(&b.th, NULL, bg_echo, &b);
    assert_true(test_wait_for(echo_started, NULL, 10000));
    double t0 = test_now_ms();
    dfc_rpc_server_shutdown(f->server, 200);
    pthread_join(b.th, NULL);
    assert_true(b.r < 0);
    assert_int_equal(atomic_load(&obs.echo_saw_cancel), 1);
    assert_true(test_now_ms() - t0 < 5000);
}

static void test_concurrent_unary_calls(void **state) {
    struct fx *f = *state;
    enum { N = 16 };
    struct bg_call b[N];
    for (int i = 0; i < N; i++) {
        b[i] = (struct bg_call){.f = f, .sleep_ms = 50};
        pthread_create(&b[i].th, NULL, bg_echo, &b[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(b[i].th, NULL);
        assert_int_equal(b[i].r, 0);
    }
    assert_int_equal(atomic_load(&obs.handlers_done), N);
}

/* ---- unary calls driven by one thread (dfc_rpc_async) ---- */

/* Many calls in flight from one thread, answered out of order (the first sleeps longest, by
 * far):
 * each ends once under its own tag with its own answer; a handler's error, an unknown method
 * and a deadline end as their own codes without disturbing the others. */
static void test_async_unary_calls(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    enum { N = 24, FAIL = N, UNKNOWN, LATE, ALL };
    struct dfc_rpc_async *q = NULL;
    assert_int_equal(dfc_rpc_async_new(&q, &err), 0);
    ProtobufCServiceDescriptor newer;
    struct dfc_rpc_client_method nope;
    newer_service(&newer, &nope);
    int tags[ALL], seen[ALL] = {0};
    for (int i = 0; i < ALL; i++) {
        tags[i] = i;
        Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
        in.seq = (uint64_t)i;
        in.sleep_ms = i == 0 ? 600 : i < N ? (uint32_t)(N - i) * 5 : 0;
        in.fail_code = i == FAIL ? 5 : 0; /* NOT_FOUND */
        in.sleep_ms = i == LATE ? 5000 : in.sleep_ms;
        assert_int_equal(dfc_rpc_async_unary(q, f->client, i == UNKNOWN ? &nope : &rt.echo,
                                             &in.base, i == LATE ? 100 : 10000, &tags[i], &err),
                         0);
    }
    struct dfc_rpc_async_done d;
    int last_echo = -1;
    for (int k = 0; k < ALL; k++) {
        assert_int_equal(dfc_rpc_async_next(q, 10000, &d), 1);
        int i = *(int *)d.tag;
        assert_int_equal(seen[i]++, 0);
        if (i < N) {
            assert_int_equal(d.code, 0);
            assert_int_equal(((Dfc__Test__V1__Chunk *)d.resp)->seq, (uint64_t)i + 1);
            last_echo = i;
        } else {
            assert_null(d.resp);
        }
        if (i == FAIL) {
            assert_int_equal(d.code, -ENOENT);
            assert_string_equal(d.err.msg, "failing as asked (5)");
        } else if (i == UNKNOWN) {
            assert_int_equal(dfc_error_to_grpc(d.code), 12);
        } else if (i == LATE) {
            assert_int_equal(d.code, -ETIMEDOUT);
        }
        dfc_rpc_msg_free(d.resp);
    }
    assert_int_equal(last_echo, 0); /* the longest sleeper came last of the echoes */
    assert_int_equal(dfc_rpc_async_next(q, 0, &d), 0); /* none in flight: at once */
    dfc_rpc_async_free(q);
}

/* A wait that runs out returns 0 with the call still in flight; freeing the queue cancels
 * it, the handler sees the cancel, and nothing is left to reap. */
static void test_async_free_cancels_calls_in_flight(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_async *q = NULL;
    assert_int_equal(dfc_rpc_async_new(&q, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    in.sleep_ms = 20000;
    int tag = 7;
    assert_int_equal(dfc_rpc_async_unary(q, f->client, &rt.echo, &in.base, 30000, &tag, &err), 0);
    assert_true(test_wait_for(echo_started, NULL, 10000));
    struct dfc_rpc_async_done d;
    double t0 = test_now_ms();
    assert_int_equal(dfc_rpc_async_next(q, 50, &d), 0);
    assert_true(test_now_ms() - t0 >= 40);
    dfc_rpc_async_free(q);
    assert_true(test_now_ms() - t0 < 5000);
    assert_true(test_wait_for(echo_cancel_seen, NULL, 4000));
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_unary),
        T(test_handler_error_maps_to_status),
        T(test_handler_trailer_reaches_client),
        T(test_client_stream),
        T(test_client_stream_error_status),
        T(test_server_stream),
        T(test_bidi_stream),
        T(test_deadline_exceeded),
        T(test_client_cancels_mid_stream),
        T(test_client_stops_reading_server_stream),
        T(test_bulk_client_stream),
        T(test_bulk_server_stream),
        T(test_unknown_method),
        T(test_malformed_request),
        T(test_malformed_response),
        cmocka_unit_test(test_oversized_message),
        cmocka_unit_test(test_unavailable_without_server),
        cmocka_unit_test(test_unary_refuses_too_much_metadata_at_once),
        cmocka_unit_test(test_table_is_checked_against_descriptor),
        cmocka_unit_test(test_client_method_lookup),
        cmocka_unit_test(test_client_table_with_bad_name_fails_at_resolve),
        cmocka_unit_test(test_listen_refuses_non_socket),
        cmocka_unit_test(test_tcp_listener),
        cmocka_unit_test(test_unix_listener_knows_the_caller),
        T(test_tcp_caller_has_no_credentials),
        T(test_shutdown_drains_in_flight_calls),
        T(test_shutdown_cancels_after_grace),
        T(test_concurrent_unary_calls),
        T(test_async_unary_calls),
        T(test_async_free_cancels_calls_in_flight),
    };
    if (rpc_test_resolve() < 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
