/*
 * Tests for the TCP listeners of lib/src/rpc_listen.c (dfc_rpc_server_listen_tcp,
 * dfc_rpc_call_peer_ip): a real server on 127.0.0.1 or 0.0.0.0 with an ephemeral port, real
 * gRPC clients, a connection from 127.0.0.2 (through a relay whose outgoing socket is bound
 * there, since the kernel picks 127.0.0.1 for a plain connect), and raw sockets for the caps
 * (in all, per address), the first-bytes deadline and the first-call deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "dfc/stream_cap.h"
#include "test/rpc_test.pb-c.h"
#include "rpc_test_service.h"
#include "test_support.h"

/* Echo answers what the call knows of its peer: data = the peer IP, seq = 100 + the result of
 * dfc_rpc_call_peer_ip (100: found), total = 100 + the result of dfc_rpc_call_peer_cred. */
static int echo_peer(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                     ProtobufCMessage *resp, struct dfc_error *err) {
    Dfc__Test__V1__Chunk *out = (Dfc__Test__V1__Chunk *)resp;
    char *ip = dfc_rpc_call_alloc(call, INET6_ADDRSTRLEN);
    struct ucred cred;
    if (ip == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    out->seq = (uint64_t)(100 + (int64_t)dfc_rpc_call_peer_ip(call, ip, INET6_ADDRSTRLEN));
    out->total = (uint64_t)(100 + (int64_t)dfc_rpc_call_peer_cred(call, &cred));
    out->data.data = (uint8_t *)ip;
    out->data.len = strlen(ip);
    /* Too small a buffer is refused, not cut. */
    char small[4];
    if (out->seq == 100 && dfc_rpc_call_peer_ip(call, small, sizeof(small)) != -ENAMETOOLONG) {
        return dfc_error_set(err, -EIO, "a 4-byte buffer was not refused");
    }
    return 0;
}

static const struct rpc_test_handlers handlers = {echo_peer, echo_peer, echo_peer, rpc_test_chat};

/* Chat under a per-remote stream cap (dfc/stream_cap.h). */
static struct dfc_stream_cap chat_cap;

static int capped_chat(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                       ProtobufCMessage *resp, struct dfc_error *err) {
    char remote[DFC_RPC_REMOTE_MAX];
    int r = dfc_stream_cap_enter(&chat_cap, call, remote, err);
    if (r == 0) {
        r = rpc_test_chat(svc, call, req, resp, err);
        dfc_stream_cap_leave(&chat_cap, remote);
    }
    return r;
}

static const struct rpc_test_handlers capped_handlers = {echo_peer, echo_peer, echo_peer,
                                                         capped_chat};

struct fx {
    char dir[256];
    char sock[300];
    unsigned port;
    struct dfc_rpc_server *server;
};

static struct fx *fx_start_with(const char *ip, struct dfc_rpc_server_opts o,
                                const struct rpc_test_handlers *h) {
    struct fx *f = calloc(1, sizeof(*f));
    struct dfc_error err;
    test_mkdtemp(f->dir, sizeof(f->dir), "rpc-listen");
    snprintf(f->sock, sizeof(f->sock), "%s/l.sock", f->dir);
    assert_int_equal(dfc_rpc_server_new(&o, &f->server, &err), 0);
    assert_int_equal(rpc_test_add_service(f->server, h, NULL, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_tcp(f->server, ip, 0, &f->port, &err), 0);
    assert_true(f->port > 0);
    assert_int_equal(dfc_rpc_server_listen_unix(f->server, f->sock, 0600, -1, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    return f;
}

static struct fx *fx_start_opts(const char *ip, struct dfc_rpc_server_opts o) {
    return fx_start_with(ip, o, &handlers);
}

static struct fx *fx_start(const char *ip, unsigned max_conns) {
    struct dfc_rpc_server_opts o = {
        .max_conns = max_conns, .idle_timeout_ms = -1, .option_prefix = "test."};
    return fx_start_opts(ip, o);
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_log_set_sink(NULL, NULL);
    dfc_rpc_server_free(f->server);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

struct peer {
    int ip_result, cred_result;
    char ip[INET6_ADDRSTRLEN];
};

/* One Echo call to target; what the server saw of the caller. */
static int ask(const char *target, struct peer *ret) {
    struct dfc_error err;
    *ret = (struct peer){.ip_result = 1, .cred_result = 1};
    struct dfc_rpc_client *c;
    assert_int_equal(dfc_rpc_client_new(target, NULL, &c, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_unary(c, &rt.echo, &in.base, 10000, &out, &err);
    if (r == 0) {
        const Dfc__Test__V1__Chunk *m = (const Dfc__Test__V1__Chunk *)out;
        ret->ip_result = (int)m->seq - 100;
        ret->cred_result = (int)m->total - 100;
        snprintf(ret->ip, sizeof(ret->ip), "%.*s", (int)m->data.len, (const char *)m->data.data);
    } else {
        print_message("call to %s: %s\n", target, err.msg);
    }
    dfc_rpc_msg_free(out);
    dfc_rpc_client_free(c);
    return r;
}

static void tcp_target(const char *ip, unsigned port, char *buf, size_t size) {
    snprintf(buf, size, "%s:%u", ip, port);
}

static void test_a_tcp_call_knows_its_peer_ip(void **state) {
    struct fx *f = fx_start("127.0.0.1", 0);
    *state = f;
    char target[64];
    struct peer p;
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    assert_int_equal(ask(target, &p), 0);
    assert_int_equal(p.ip_result, 0);
    assert_string_equal(p.ip, "127.0.0.1");
    assert_int_equal(p.cred_result, -ENOENT); /* no uid: the per-uid shares do not apply */
}

static void test_a_unix_call_has_no_peer_ip(void **state) {
    struct fx *f = fx_start("127.0.0.1", 0);
    *state = f;
    char target[320];
    struct peer p;
    snprintf(target, sizeof(target), "unix:%s", f->sock);
    assert_int_equal(ask(target, &p), 0);
    assert_int_equal(p.ip_result, -ENOENT);
    assert_int_equal(p.cred_result, 0);
}

/* ---- a caller from 127.0.0.2 ---- */

/* Relays one connection: accepts on lfd, connects to the server from 127.0.0.2, copies both
 * ways until either side closes. */
struct relay {
    int lfd;
    unsigned server_port;
    pthread_t thread;
};

static bool copy_once(int from, int to) {
    char buf[16384];
    ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) {
        return false;
    }
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0) {
            return false;
        }
        off += w;
    }
    return true;
}

static void *relay_main(void *arg) {
    struct relay *rl = arg;
    int in = accept(rl->lfd, NULL, NULL);
    int out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons((uint16_t)rl->server_port);
    if (in >= 0 && out >= 0 && bind(out, (struct sockaddr *)&src, sizeof(src)) == 0 &&
        connect(out, (struct sockaddr *)&dst, sizeof(dst)) == 0) {
        struct pollfd pfd[2] = {{.fd = in, .events = POLLIN}, {.fd = out, .events = POLLIN}};
        while (poll(pfd, 2, 10000) > 0) {
            if ((pfd[0].revents && !copy_once(in, out)) ||
                (pfd[1].revents && !copy_once(out, in))) {
                break;
            }
        }
    }
    if (in >= 0) {
        close(in);
    }
    if (out >= 0) {
        close(out);
    }
    return NULL;
}

static void test_a_call_from_127_0_0_2_sees_it(void **state) {
    struct fx *f = fx_start("", 0); /* 0.0.0.0 */
    *state = f;
    struct relay rl = {.server_port = f->port};
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    inet_pton(AF_INET, "127.0.0.3", &sa.sin_addr);
    rl.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(rl.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(rl.lfd, 4), 0);
    assert_int_equal(getsockname(rl.lfd, (struct sockaddr *)&sa, &len), 0);
    assert_int_equal(pthread_create(&rl.thread, NULL, relay_main, &rl), 0);
    char target[64];
    struct peer p;
    tcp_target("127.0.0.3", ntohs(sa.sin_port), target, sizeof(target));
    assert_int_equal(ask(target, &p), 0);
    assert_int_equal(p.ip_result, 0);
    assert_string_equal(p.ip, "127.0.0.2");
    pthread_join(rl.thread, NULL);
    close(rl.lfd);
    /* And a direct one is 127.0.0.1 on the same listener. */
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    assert_int_equal(ask(target, &p), 0);
    assert_string_equal(p.ip, "127.0.0.1");
}

/* ---- the per-remote stream cap ---- */

/* Opens a Chat stream on c and has one message echoed: 0 once the handler runs, else the
 * stream's error (the stream is then freed and *ret NULL). */
static int chat_open(struct dfc_rpc_client *c, struct dfc_rpc_stream **ret, struct dfc_error *err) {
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    int r = dfc_rpc_stream_open(c, &rt.chat, 10000, ret, err);
    if (r == 0 && (r = dfc_rpc_stream_send(*ret, &in.base, err)) == 0) {
        r = dfc_rpc_stream_recv(*ret, &dfc__test__v1__chunk__descriptor, &out, err);
        dfc_rpc_msg_free(out);
        r = r == 1 ? 0 : r == 0 ? -EPROTO : r;
    }
    if (r < 0 && *ret != NULL) {
        dfc_rpc_stream_free(*ret);
        *ret = NULL;
    }
    return r;
}

static void chat_close(struct dfc_rpc_stream *st) {
    struct dfc_error err;
    assert_int_equal(dfc_rpc_stream_finish(st, &err), 0);
    dfc_rpc_stream_free(st);
}

/* Two idle streams of 127.0.0.1 fill its share: its third is refused RESOURCE_EXHAUSTED
 * naming the limit, while 127.0.0.2 (through the relay) and a local caller (Unix socket, keyed
 * by uid) still open theirs; once one closes, 127.0.0.1 gets one again. */
static void test_streams_are_capped_per_remote(void **state) {
    dfc_stream_cap_init(&chat_cap, 2, "Chat", "test.maxChatStreamsPerHost");
    struct dfc_rpc_server_opts o = {.idle_timeout_ms = -1, .option_prefix = "test."};
    struct fx *f = fx_start_with("", o, &capped_handlers);
    *state = f;
    struct dfc_error err;
    char target[320];
    struct dfc_rpc_client *local, *other, *unix_c;
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    assert_int_equal(dfc_rpc_client_new(target, NULL, &local, &err), 0);
    struct dfc_rpc_stream *held[2], *extra = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(chat_open(local, &held[i], &err), 0);
    }
    assert_true(chat_open(local, &extra, &err) < 0);
    assert_null(extra);
    assert_non_null(strstr(err.msg, "Chat: 2 streams from 127.0.0.1 already open "
                                    "(test.maxChatStreamsPerHost)"));
    /* Another address has its own share. */
    struct relay rl = {.server_port = f->port};
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    inet_pton(AF_INET, "127.0.0.3", &sa.sin_addr);
    rl.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(rl.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(rl.lfd, 4), 0);
    assert_int_equal(getsockname(rl.lfd, (struct sockaddr *)&sa, &len), 0);
    assert_int_equal(pthread_create(&rl.thread, NULL, relay_main, &rl), 0);
    tcp_target("127.0.0.3", ntohs(sa.sin_port), target, sizeof(target));
    assert_int_equal(dfc_rpc_client_new(target, NULL, &other, &err), 0);
    struct dfc_rpc_stream *st;
    assert_int_equal(chat_open(other, &st, &err), 0);
    chat_close(st);
    dfc_rpc_client_free(other);
    pthread_join(rl.thread, NULL);
    close(rl.lfd);
    snprintf(target, sizeof(target), "unix:%s", f->sock);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &unix_c, &err), 0);
    assert_int_equal(chat_open(unix_c, &st, &err), 0);
    chat_close(st);
    dfc_rpc_client_free(unix_c);
    /* A closed stream frees its place. */
    chat_close(held[0]);
    assert_int_equal(chat_open(local, &st, &err), 0);
    chat_close(st);
    chat_close(held[1]);
    dfc_rpc_client_free(local);
    /* Freeing the server joins its handlers: none is still leaving the cap when it goes. */
    dfc_rpc_server_free(f->server);
    f->server = NULL;
    dfc_stream_cap_destroy(&chat_cap);
}

/* ---- the connection cap ---- */

/* A raw connection to 127.0.0.1:port from the local address from. */
static int raw_tcp_from(const char *from, unsigned port) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    inet_pton(AF_INET, from, &src.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static int raw_tcp(unsigned port) {
    return raw_tcp_from("127.0.0.1", port);
}

static bool closed(void *arg) {
    return test_closed_by_peer(*(int *)arg);
}

enum { CAP = 3 };

static void test_tcp_connections_are_capped(void **state) {
    struct fx *f = fx_start("127.0.0.1", CAP);
    *state = f;
    rpc_test_refused_start();
    int fds[CAP + 1];
    for (int i = 0; i < CAP + 1; i++) {
        fds[i] = raw_tcp(f->port);
    }
    /* The one beyond the cap is closed as it is accepted; the others stay open. */
    assert_true(test_wait_for(closed, &fds[CAP], 10000));
    usleep(200000);
    for (int i = 0; i < CAP; i++) {
        assert_false(test_closed_by_peer(fds[i]));
    }
    char line[512];
    assert_int_equal(rpc_test_refused_stop(line, sizeof(line)), 1);
    assert_non_null(strstr(line, "last_peer=127.0.0.1 "));
    assert_non_null(strstr(line, "test.maxConnections=3"));
    /* The Unix socket has its own count: local callers still get in. */
    char target[320];
    struct peer p;
    snprintf(target, sizeof(target), "unix:%s", f->sock);
    assert_int_equal(ask(target, &p), 0);
    /* Once the flood is gone, TCP callers get in again. */
    for (int i = 0; i < CAP + 1; i++) {
        close(fds[i]);
    }
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        ok = ask(target, &p) == 0;
        if (!ok) {
            usleep(100000);
        }
    }
    assert_true(ok);
    assert_string_equal(p.ip, "127.0.0.1");
}

/* One peer address holds at most maxConnectionsPerIP of the TCP connections: the one beyond is
 * closed as it is accepted, with a line naming the limit, while another address still gets in
 * (before the cap, one address could take all of maxConnections). */
static void test_one_address_is_capped(void **state) {
    struct dfc_rpc_server_opts o = {.max_conns = 16,
                                    .max_conns_per_ip = 2,
                                    .first_bytes_timeout_ms = -1,
                                    .idle_timeout_ms = -1,
                                    .option_prefix = "test."};
    struct fx *f = fx_start_opts("127.0.0.1", o);
    *state = f;
    rpc_test_refused_start();
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_tcp_from("127.0.0.2", f->port);
    }
    assert_true(test_wait_for(closed, &fds[2], 10000));
    usleep(200000);
    assert_false(test_closed_by_peer(fds[0]));
    assert_false(test_closed_by_peer(fds[1]));
    char line[512];
    assert_int_equal(rpc_test_refused_stop(line, sizeof(line)), 1);
    assert_non_null(strstr(line, "last_peer=127.0.0.2 "));
    assert_non_null(strstr(line, "open_ip=2 "));
    assert_non_null(strstr(line, "test.maxConnectionsPerIP=2"));
    /* 127.0.0.1 has its own share. */
    char target[64];
    struct peer p;
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    assert_int_equal(ask(target, &p), 0);
    assert_string_equal(p.ip, "127.0.0.1");
    for (int i = 0; i < 3; i++) {
        close(fds[i]);
    }
}

/* The rpc.connection_silent lines; guarded by silent_mu. */
static char silent_line[512];
static int n_silent;
static pthread_mutex_t silent_mu = PTHREAD_MUTEX_INITIALIZER;

static void capture_silent(int level, const char *line, size_t len, void *ud) {
    (void)level;
    (void)ud;
    if (strstr(line, "rpc.connection_silent") != NULL) {
        pthread_mutex_lock(&silent_mu);
        if (n_silent++ == 0) {
            snprintf(silent_line, sizeof(silent_line), "%.*s", (int)len, line);
        }
        pthread_mutex_unlock(&silent_mu);
    }
}

/* A flood of connections that send nothing held every TCP slot until the idle timeout (here:
 * none), locking real callers out. Now each is closed firstBytesTimeout after its accept, and
 * so is one that trickles the HTTP/2 preface a byte at a time (it never completes it in time);
 * then a real call gets in. */
static void test_silent_connections_are_closed(void **state) {
    enum { SLOTS = 4 };
    struct dfc_rpc_server_opts o = {.max_conns = SLOTS,
                                    .first_bytes_timeout_ms = 500,
                                    .idle_timeout_ms = -1,
                                    .option_prefix = "test."};
    struct fx *f = fx_start_opts("127.0.0.1", o);
    *state = f;
    pthread_mutex_lock(&silent_mu);
    n_silent = 0;
    pthread_mutex_unlock(&silent_mu);
    dfc_log_set_sink(capture_silent, NULL);
    double t0 = test_now_ms();
    int fds[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        fds[i] = raw_tcp(f->port);
    }
    /* fds[SLOTS - 1] trickles the preface: one byte per 100 ms (24 bytes would take 2.4 s). */
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    bool all_closed = false;
    for (size_t b = 0; b < sizeof(preface) - 1 && !all_closed; b++) {
        (void)send(fds[SLOTS - 1], preface + b, 1, MSG_NOSIGNAL);
        usleep(100000);
        all_closed = true;
        for (int i = 0; i < SLOTS; i++) {
            all_closed = all_closed && test_closed_by_peer(fds[i]);
        }
    }
    double took = test_now_ms() - t0;
    assert_true(all_closed);
    assert_true(took >= 400 && took < 2300);
    pthread_mutex_lock(&silent_mu);
    assert_true(n_silent >= 1);
    assert_non_null(strstr(silent_line, "last_peer=127.0.0.1 "));
    assert_non_null(strstr(silent_line, "test.firstBytesTimeout=500ms"));
    pthread_mutex_unlock(&silent_mu);
    dfc_log_set_sink(NULL, NULL);
    /* The slots are free: a real call gets in. */
    char target[64];
    struct peer p;
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    assert_int_equal(ask(target, &p), 0);
    for (int i = 0; i < SLOTS; i++) {
        close(fds[i]);
    }
}

/* The rpc.connection_no_call lines; guarded by silent_mu. */
static char no_call_line[512];
static int n_no_call;

static void capture_no_call(int level, const char *line, size_t len, void *ud) {
    (void)level;
    (void)ud;
    if (strstr(line, "rpc.connection_no_call") != NULL) {
        pthread_mutex_lock(&silent_mu);
        if (n_no_call++ == 0) {
            snprintf(no_call_line, sizeof(no_call_line), "%.*s", (int)len, line);
        }
        pthread_mutex_unlock(&silent_mu);
    }
}

/* The HTTP/2 client preface and an empty SETTINGS frame: all a client sends before its first
 * call. */
static const char preface_settings[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                       "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
#define PREFACE_SETTINGS_LEN (sizeof(preface_settings) - 1)

/* A connection that sends the preface and SETTINGS and then nothing passed the first-bytes
 * gate and sat in core, holding a slot, until the idle timeout (here: none). Now it is closed
 * firstCallTimeout after it reached core, with a line naming the limit; a client with a
 * stream open (it started a call) and one idle after a call stay up past it. */
static void test_a_connection_without_a_call_is_closed(void **state) {
    struct dfc_rpc_server_opts o = {
        .first_call_timeout_ms = 1000, .idle_timeout_ms = -1, .option_prefix = "test."};
    struct fx *f = fx_start_opts("127.0.0.1", o);
    *state = f;
    pthread_mutex_lock(&silent_mu);
    n_no_call = 0;
    pthread_mutex_unlock(&silent_mu);
    dfc_log_set_sink(capture_no_call, NULL);
    struct dfc_error err;
    char target[64];
    tcp_target("127.0.0.1", f->port, target, sizeof(target));
    struct dfc_rpc_client *streamer, *asker;
    struct dfc_rpc_stream *st;
    assert_int_equal(dfc_rpc_client_new(target, NULL, &streamer, &err), 0);
    assert_int_equal(chat_open(streamer, &st, &err), 0);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &asker, &err), 0);
    Dfc__Test__V1__Chunk in = DFC__TEST__V1__CHUNK__INIT;
    ProtobufCMessage *out = NULL;
    assert_int_equal(dfc_rpc_unary(asker, &rt.echo, &in.base, 10000, &out, &err), 0);
    dfc_rpc_msg_free(out);

    double t0 = test_now_ms();
    int fd = raw_tcp(f->port);
    assert_int_equal(send(fd, preface_settings, PREFACE_SETTINGS_LEN, MSG_NOSIGNAL),
                     (ssize_t)PREFACE_SETTINGS_LEN);
    assert_true(test_wait_for(closed, &fd, 5000));
    double took = test_now_ms() - t0;
    assert_true(took >= 900 && took < 3000);
    close(fd);

    /* Past the deadline the stream still carries messages, and the other connection's next
     * call needs no new one: neither was touched. */
    usleep(500000);
    out = NULL;
    assert_int_equal(dfc_rpc_stream_send(st, &in.base, &err), 0);
    assert_int_equal(dfc_rpc_stream_recv(st, &dfc__test__v1__chunk__descriptor, &out, &err), 1);
    dfc_rpc_msg_free(out);
    chat_close(st);
    out = NULL;
    assert_int_equal(dfc_rpc_unary(asker, &rt.echo, &in.base, 10000, &out, &err), 0);
    dfc_rpc_msg_free(out);
    pthread_mutex_lock(&silent_mu);
    assert_int_equal(n_no_call, 1);
    assert_non_null(strstr(no_call_line, "closed=1 last_peer=127.0.0.1 "));
    assert_non_null(strstr(no_call_line, "test.firstCallTimeout=1000ms"));
    pthread_mutex_unlock(&silent_mu);
    dfc_log_set_sink(NULL, NULL);
    dfc_rpc_client_free(streamer);
    dfc_rpc_client_free(asker);
}

static void test_bad_addresses_are_refused(void **state) {
    struct dfc_rpc_server *s;
    struct dfc_error err;
    (void)state;
    assert_int_equal(dfc_rpc_server_new(NULL, &s, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_tcp(s, "localhost", 0, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not an IP address"));
    assert_int_equal(dfc_rpc_server_listen_tcp(s, "127.0.0.1", 70000, NULL, &err), -EINVAL);
    unsigned port;
    assert_int_equal(dfc_rpc_server_listen_tcp(s, "127.0.0.1", 0, &port, &err), 0);
    /* The port is taken now. */
    assert_int_equal(dfc_rpc_server_listen_tcp(s, "127.0.0.1", port, NULL, &err), -EADDRINUSE);
    dfc_rpc_server_free(s);
}

int main(void) {
#define T(fn) cmocka_unit_test_teardown(fn, teardown)
    const struct CMUnitTest tests[] = {
        T(test_a_tcp_call_knows_its_peer_ip),
        T(test_a_unix_call_has_no_peer_ip),
        T(test_a_call_from_127_0_0_2_sees_it),
        T(test_tcp_connections_are_capped),
        T(test_one_address_is_capped),
        T(test_silent_connections_are_closed),
        T(test_streams_are_capped_per_remote),
        T(test_a_connection_without_a_call_is_closed),
        cmocka_unit_test(test_bad_addresses_are_refused),
    };
    if (rpc_test_resolve() < 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
