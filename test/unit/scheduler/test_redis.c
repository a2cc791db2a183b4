/*
 * Tests for scheduler/redis*.c against real redis-server processes (test/support/redis_harness):
 * binary-safe commands, error replies, scripts after SCRIPT FLUSH, AUTH (password and ACL
 * user) and SELECT, the deadline on a hung (SIGSTOPped) server, a killed and restarted
 * server, a Sentinel failover with a -READONLY retry, a re-pointed Sentinel that must
 * authenticate before it is believed, 8 threads at once, and a pool exhausted until the
 * deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redis.h"
#include "redis_harness.h"
#include "test_support.h"

/* Shared by the tests that only need a plain server. */
static struct redis_server plain;

static int start_plain(void **state) {
    if (redis_harness_available()) {
        redis_server_start(&plain, NULL);
    }
    return 0;
}

static int stop_plain(void **state) {
    redis_server_destroy(&plain);
    return 0;
}

static struct sched_redis *open_direct(const struct redis_server *s, unsigned pool) {
    const char *addrs[] = {s->addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .pool_size = pool,
                                 .backoff_min_ms = 20,
                                 .backoff_max_ms = 200};
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    int rc = sched_redis_new(&o, &r, &err);
    if (rc != 0) {
        fail_msg("sched_redis_new: %s", err.msg);
    }
    return r;
}

/* Runs argc NUL-terminated words as one command with a timeout_ms deadline. */
static int cmd(struct sched_redis *r, int64_t timeout_ms, redisReply **rep, struct dfc_error *err,
               int argc, ...) {
    const char *argv[16];
    size_t lens[16];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < 16; i++) {
        argv[i] = va_arg(ap, const char *);
        lens[i] = strlen(argv[i]);
    }
    va_end(ap);
    return sched_redis_argv(r, sched_redis_deadline(timeout_ms), argc, argv, lens, rep, err);
}

/* Retries SET key value until it works (the client recovers by itself) or 15 s pass. */
static void set_eventually(struct sched_redis *r, const char *key, const char *value) {
    struct dfc_error err = {0};
    double until = test_now_ms() + 15000;
    int rc;
    do {
        rc = cmd(r, 1000, NULL, &err, 3, "SET", key, value);
        if (rc != 0) {
            usleep(20000);
        }
    } while (rc != 0 && test_now_ms() < until);
    if (rc != 0) {
        fail_msg("SET %s never recovered: %s", key, err.msg);
    }
}

static void assert_stored(const struct redis_server *s, const char *key, const char *want) {
    redisReply *rep = redis_server_command(s, "GET %s", key);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, want);
    freeReplyObject(rep);
}

/* ---- commands ---- */

/* Junk in Redis cannot make the scheduler build a reply of any size: a set of 300k members
 * (beyond the 256Ki-element bound) and a 9 MiB string (beyond 8 MiB) fail their command
 * -ENOMEM naming the bounds, and the pool (of one connection) goes on with the next command. */
static void test_replies_are_bounded(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 1);
    freeReplyObject(redis_server_command(&plain, "EVAL %s 1 %s",
                                         "for i=1,300000 do redis.call('SADD', KEYS[1], i) end",
                                         "junk-set"));
    freeReplyObject(redis_server_command(&plain, "SETRANGE %s %d x", "junk-str", 9 << 20));
    redisReply *rep = NULL;
    struct dfc_error err = {0};
    assert_int_equal(cmd(r, 10000, &rep, &err, 2, "SMEMBERS", "junk-set"), -ENOMEM);
    assert_null(rep);
    assert_non_null(strstr(err.msg, "a reply beyond the bounds (an array of more than 262144"));
    assert_int_equal(cmd(r, 10000, &rep, &err, 2, "GET", "junk-str"), -ENOMEM);
    assert_null(rep);
    /* Within the bounds: read as always, on a new connection. */
    freeReplyObject(redis_server_command(&plain, "SET %s %s", "small", "ok"));
    set_eventually(r, "small2", "ok");
    assert_int_equal(cmd(r, 10000, &rep, &err, 2, "GET", "small"), 0);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "ok");
    freeReplyObject(rep);
    assert_int_equal(cmd(r, 10000, &rep, &err, 3, "SRANDMEMBER", "junk-set", "1000"), 0);
    freeReplyObject(rep);
    freeReplyObject(redis_server_command(&plain, "DEL junk-set junk-str small small2"));
    sched_redis_free(r);
}

static void test_commands_binary_safe(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 0);
    char buf[64];
    assert_null(sched_redis_current_addr(r, buf, sizeof(buf)));

    static const char key[] = "bin\0key\r\n";
    static const char val[] = "v\0a\r\nl\0";
    const char *argv[] = {"SET", key, val};
    size_t lens[] = {3, sizeof(key) - 1, sizeof(val) - 1};
    struct dfc_error err = {0};
    redisReply *rep = NULL;
    assert_int_equal(sched_redis_argv(r, sched_redis_deadline(5000), 3, argv, lens, &rep, &err), 0);
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    assert_string_equal(rep->str, "OK");
    freeReplyObject(rep);

    const char *gargv[] = {"GET", key};
    size_t glens[] = {3, sizeof(key) - 1};
    assert_int_equal(sched_redis_argv(r, sched_redis_deadline(5000), 2, gargv, glens, &rep, &err),
                     0);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_int_equal(rep->len, sizeof(val) - 1);
    assert_memory_equal(rep->str, val, sizeof(val) - 1);
    freeReplyObject(rep);

    /* The same bytes seen by a plain client: nothing was cut at the NULs. */
    redisContext *c = redis_server_connect(&plain);
    rep = redisCommand(c, "STRLEN %b", key, sizeof(key) - 1);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    assert_int_equal(rep->integer, (long long)sizeof(val) - 1);
    freeReplyObject(rep);
    redisFree(c);

    /* nil is a reply, handed over as such. */
    assert_int_equal(cmd(r, 5000, &rep, &err, 2, "GET", "no-such-key"), 0);
    assert_int_equal(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);

    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), plain.addr);
    sched_redis_free(r);
}

/* A pipeline's replies come back in order, error replies as replies, and the connection (the
 * only one: pool of 1) stays in step for the next command. */
static void test_pipeline_replies_in_order(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 1);
    const char *set[] = {"SET", "pipe-key", "pipe\0val"};
    size_t set_lens[] = {3, 8, 8};
    const char *get[] = {"GET", "pipe-key"};
    size_t get_lens[] = {3, 8};
    const char *wrong[] = {"HGETALL", "pipe-key"};
    size_t wrong_lens[] = {7, 8};
    const char *missing[] = {"HGETALL", "pipe-no-such-key"};
    size_t missing_lens[] = {7, 16};
    struct sched_redis_cmd cmds[] = {
        {3, set, set_lens}, {2, get, get_lens}, {2, wrong, wrong_lens}, {2, missing, missing_lens}};
    redisReply *reps[4] = {0};
    struct dfc_error err = {0};
    assert_int_equal(sched_redis_pipeline(r, sched_redis_deadline(5000), 4, cmds, reps, &err), 0);
    assert_int_equal(reps[0]->type, REDIS_REPLY_STATUS);
    assert_int_equal(reps[1]->type, REDIS_REPLY_STRING);
    assert_int_equal(reps[1]->len, 8);
    assert_memory_equal(reps[1]->str, "pipe\0val", 8);
    assert_int_equal(reps[2]->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(reps[2]->str, "WRONGTYPE"));
    assert_int_equal(reps[3]->type, REDIS_REPLY_ARRAY);
    assert_int_equal(reps[3]->elements, 0);
    for (size_t i = 0; i < 4; i++) {
        freeReplyObject(reps[i]);
    }
    redisReply *rep = NULL;
    assert_int_equal(cmd(r, 5000, &rep, &err, 2, "GET", "pipe-key"), 0);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_int_equal(rep->len, 8);
    freeReplyObject(rep);

    /* An empty command is refused before anything is sent. */
    struct sched_redis_cmd empty[] = {{2, get, get_lens}, {0, NULL, NULL}};
    assert_int_equal(sched_redis_pipeline(r, sched_redis_deadline(5000), 2, empty, reps, &err),
                     -EINVAL);
    sched_redis_free(r);
}

/* An error reply is DFC_E_INTERNAL with Redis's text, a WRONGTYPE one has its own code (for
 * callers to test, INTERNAL on the wire all the same), from a command and in the replies of a
 * pipeline. */
static void test_error_reply_is_internal_with_redis_text(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 0);
    struct dfc_error err = {0};
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "str", "x"), 0);
    redisReply *rep = (redisReply *)0x1;
    int rc = cmd(r, 5000, &rep, &err, 3, "LPUSH", "str", "y");
    assert_int_equal(rc, SCHED_REDIS_E_WRONGTYPE);
    assert_int_equal(dfc_error_to_grpc(rc), DFC_GRPC_INTERNAL);
    assert_ptr_equal(rep, (redisReply *)0x1); /* untouched: the error reply was freed */
    assert_non_null(strstr(err.msg, "WRONGTYPE Operation against a key holding the wrong kind"));
    assert_non_null(strstr(err.msg, plain.addr));
    /* Another error reply stays INTERNAL. */
    rc = cmd(r, 5000, &rep, &err, 2, "INCR", "str");
    assert_int_equal(rc, DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "ERR value is not an integer"));
    /* A pipeline's error replies, mapped by the same rule. */
    const char *hgetall[] = {"HGETALL", "str"};
    size_t hgetall_lens[] = {7, 3};
    const char *incr[] = {"INCR", "str"};
    size_t incr_lens[] = {4, 3};
    struct sched_redis_cmd cmds[] = {{2, hgetall, hgetall_lens}, {2, incr, incr_lens}};
    redisReply *reps[2] = {0};
    assert_int_equal(sched_redis_pipeline(r, sched_redis_deadline(5000), 2, cmds, reps, &err), 0);
    assert_int_equal(sched_redis_reply_error(reps[0], NULL, &err), SCHED_REDIS_E_WRONGTYPE);
    assert_non_null(strstr(err.msg, "redis: WRONGTYPE"));
    assert_int_equal(sched_redis_reply_error(reps[1], "here", &err), DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "redis here: ERR value is not an integer"));
    freeReplyObject(reps[0]);
    freeReplyObject(reps[1]);
    /* The connection stays usable after an error reply. */
    assert_int_equal(cmd(r, 5000, NULL, &err, 2, "GET", "str"), 0);
    sched_redis_free(r);
}

static void test_bad_options(void **state) {
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    const char *bad[] = {"127.0.0.1"};
    struct sched_redis_opts o = {.addrs = bad, .n_addrs = 1};
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.addrs[0]"));
    assert_non_null(strstr(err.msg, "`127.0.0.1`"));
    const char *port0[] = {"127.0.0.1:0"};
    o.addrs = port0;
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    o.n_addrs = 0;
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.addrs"));
    const char *ok[] = {"127.0.0.1:1"};
    struct sched_redis_opts u = {.addrs = ok, .n_addrs = 1, .username = "alice"};
    assert_int_equal(sched_redis_new(&u, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.username"));
    assert_null(r);
}

/* ---- scripts ---- */

static void test_script_survives_script_flush(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 2);
    struct sched_redis_script s = {
        .name = "hset_and_count",
        .lua = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return redis.call('HLEN', KEYS[1])",
    };
    sched_redis_script_init(&s);
    /* Our SHA-1 is Redis's SHA-1 of the body. */
    redisReply *rep = redis_server_command(&plain, "SCRIPT LOAD %s", s.lua);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, s.sha1);
    freeReplyObject(rep);
    rep = redis_server_command(&plain, "SCRIPT FLUSH");
    freeReplyObject(rep);

    static const char field[] = "f\0ield";
    const char *keys[] = {"scripted"};
    const char *args[] = {field, "v1"};
    size_t arg_lens[] = {sizeof(field) - 1, 2};
    struct dfc_error err = {0};
    for (int round = 0; round < 3; round++) {
        /* Round 0: never loaded (NOSCRIPT -> EVAL). Round 1: cached. Round 2: flushed again. */
        if (round == 2) {
            freeReplyObject(redis_server_command(&plain, "SCRIPT FLUSH"));
        }
        rep = NULL;
        assert_int_equal(sched_redis_eval(r, sched_redis_deadline(5000), &s, 1, keys, NULL, 2, args,
                                          arg_lens, &rep, &err),
                         0);
        assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
        assert_int_equal(rep->integer, 1);
        freeReplyObject(rep);
    }
    rep = redis_server_command(&plain, "HGET scripted %b", field, sizeof(field) - 1);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "v1");
    freeReplyObject(rep);

    /* A script error is an error reply: INTERNAL, naming the script, with Redis's text. */
    struct sched_redis_script bad = {.name = "bad", .lua = "return redis.call('NOSUCHCMD')"};
    sched_redis_script_init(&bad);
    assert_int_equal(sched_redis_eval(r, sched_redis_deadline(5000), &bad, 0, NULL, NULL, 0, NULL,
                                      NULL, NULL, &err),
                     DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "script bad"));
    assert_non_null(strstr(err.msg, "Unknown Redis command"));

    /* Never initialised: it still runs, and the (possibly shared) struct is not written. */
    struct sched_redis_script lazy = {.name = "lazy", .lua = "return 7"};
    rep = NULL;
    assert_int_equal(sched_redis_eval(r, sched_redis_deadline(5000), &lazy, 0, NULL, NULL, 0, NULL,
                                      NULL, &rep, &err),
                     0);
    assert_int_equal(rep->integer, 7);
    freeReplyObject(rep);
    assert_string_equal(lazy.sha1, "");
    sched_redis_free(r);
}

/* ---- AUTH and SELECT ---- */

static void test_auth_and_select(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    struct redis_server_opts so = {.password = "s3cret", .acl_user = "alice", .acl_pass = "pw2"};
    redis_server_start(&s, &so);
    const char *addrs[] = {s.addr};
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;

    /* No password: the server refuses the command. */
    struct sched_redis_opts o = {
        .addrs = addrs, .n_addrs = 1, .backoff_min_ms = 1, .backoff_max_ms = 1};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "k", "v"), DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "NOAUTH"));
    sched_redis_free(r);

    /* A wrong password: the handshake fails, naming AUTH and the address. */
    o.password = "wrong";
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "k", "v"), DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "AUTH"));
    assert_non_null(strstr(err.msg, s.addr));
    sched_redis_free(r);

    /* The default user's password, and db 3. */
    o.password = "s3cret";
    o.db = 3;
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "in-db3", "yes"), 0);
    sched_redis_free(r);
    redisContext *c = redis_server_connect(&s);
    redisReply *rep = redisCommand(c, "EXISTS in-db3");
    assert_int_equal(rep->integer, 0); /* not in db 0 */
    freeReplyObject(rep);
    freeReplyObject(redisCommand(c, "SELECT 3"));
    rep = redisCommand(c, "GET in-db3");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "yes");
    freeReplyObject(rep);
    redisFree(c);

    /* An ACL user with its own password. */
    struct sched_redis_opts ou = {
        .addrs = addrs, .n_addrs = 1, .username = "alice", .password = "pw2"};
    assert_int_equal(sched_redis_new(&ou, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, &rep, &err, 2, "ACL", "WHOAMI"), 0);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, "alice");
    freeReplyObject(rep);
    sched_redis_free(r);

    /* SELECT of a db the server does not have: INTERNAL naming SELECT. */
    o.db = 99;
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, NULL, &err, 2, "GET", "x"), DFC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "SELECT 99"));
    sched_redis_free(r);
    redis_server_destroy(&s);
}

/* ---- faults ---- */

/* A hung server (SIGSTOP): the call returns -ETIMEDOUT near its deadline, on an open pooled
 * connection and on a fresh one, and the client works again once the server resumes. */
static void test_deadline_on_hung_server(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    redis_server_start(&s, NULL);
    struct sched_redis *r = open_direct(&s, 2);
    struct dfc_error err = {0};
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "k", "before"), 0);

    redis_server_pause(&s);
    for (int i = 0; i < 3; i++) { /* pooled, then fresh connections (the old ones dropped) */
        double t0 = test_now_ms();
        int rc = cmd(r, 300, NULL, &err, 2, "GET", "k");
        double took = test_now_ms() - t0;
        assert_int_equal(rc, -ETIMEDOUT);
        assert_non_null(strstr(err.msg, s.addr));
        if (took > 300 + 3000) { /* generous: this is a liveness bound, not a speed claim */
            fail_msg("call %d returned after %.0f ms for a 300 ms deadline", i, took);
        }
    }
    /* A deadline already gone: no I/O at all. */
    assert_int_equal(cmd(r, -1, NULL, &err, 2, "GET", "k"), -ETIMEDOUT);
    redis_server_resume(&s);
    set_eventually(r, "k", "after");
    assert_stored(&s, "k", "after");
    sched_redis_free(r);
    redis_server_destroy(&s);
}

/* A connect that never completes is -ETIMEDOUT (DEADLINE_EXCEEDED), not -ECONNREFUSED: a
 * listener on 127.0.0.1 whose accept queue is full (backlog 0, one connection never accepted)
 * has the kernel drop further SYNs, so the handshake hangs until the deadline. */
static void test_connect_that_hangs_times_out(void **state) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 0), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
    int fill = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fill, (struct sockaddr *)&sa, sizeof(sa)), 0); /* fills the queue */
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    const char *addrs[] = {addr};
    struct sched_redis_opts o = {.addrs = addrs, .n_addrs = 1, .pool_size = 1};
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    double t0 = test_now_ms();
    int rc = cmd(r, 300, NULL, &err, 1, "PING");
    double took = test_now_ms() - t0;
    print_message("%.0f ms: %s\n", took, err.msg);
    assert_int_equal(rc, -ETIMEDOUT);
    assert_non_null(strstr(err.msg, addr));
    assert_true(took >= 250);
    if (took > 300 + 3000) { /* a liveness bound, not a speed claim */
        fail_msg("returned after %.0f ms for a 300 ms deadline", took);
    }
    sched_redis_free(r);
    close(fill);
    close(l);
}

/* Redis killed mid-run: -ECONNREFUSED naming the address, never a hang; restarted on the
 * same port: the same client object works again without being re-created. */
static void test_killed_then_restarted(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    redis_server_start(&s, NULL);
    struct sched_redis *r = open_direct(&s, 4);
    struct dfc_error err = {0};
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "k", "v1"), 0);

    redis_server_stop(&s, SIGKILL);
    for (int i = 0; i < 5; i++) { /* the dead pooled connection, then refused connects */
        int rc = cmd(r, 2000, NULL, &err, 2, "GET", "k");
        assert_int_equal(rc, -ECONNREFUSED);
        char want[48];
        snprintf(want, sizeof(want), "redis 127.0.0.1:%d", s.port);
        if (strstr(err.msg, want) == NULL) {
            fail_msg("error does not name %s: %s", want, err.msg);
        }
    }
    redis_server_restart(&s);
    set_eventually(r, "k", "v2");
    assert_stored(&s, "k", "v2");
    /* Every pooled connection is good again (the dead ones are found before use). */
    for (int i = 0; i < 8; i++) {
        assert_int_equal(cmd(r, 5000, NULL, &err, 2, "GET", "k"), 0);
    }
    sched_redis_free(r);
    redis_server_destroy(&s);
}

static long long connections_received(const struct redis_server *s) {
    redisReply *rep = redis_server_command(s, "INFO stats");
    const char *p = strstr(rep->str, "total_connections_received:");
    long long n = p ? strtoll(p + strlen("total_connections_received:"), NULL, 10) : -1;
    freeReplyObject(rep);
    return n;
}

/* A server that refuses every handshake (wrong password) is not hammered: connect attempts
 * are spaced by the back-off (20 ms doubling), and its cap (100 ms) keeps them coming. */
static void test_backoff_spaces_failed_connects(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    struct redis_server_opts so = {.password = "right"};
    redis_server_start(&s, &so);
    const char *addrs[] = {s.addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .password = "wrong",
                                 .backoff_min_ms = 20,
                                 .backoff_max_ms = 100};
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    long long before = connections_received(&s);
    unsigned calls = 0, fast = 0;
    double until = test_now_ms() + 3000;
    while (test_now_ms() < until) {
        int rc = cmd(r, 1000, NULL, &err, 2, "GET", "k");
        assert_true(rc == DFC_E_INTERNAL || rc == -ECONNREFUSED);
        fast += rc == -ECONNREFUSED && strstr(err.msg, "next attempt in") != NULL;
        calls++;
        usleep(1000);
    }
    /* Our own INFO connections count too: one per connections_received call. */
    long long attempts = connections_received(&s) - before - 1;
    printf("%u calls, %lld connect attempts, %u answered from the back-off\n", calls, attempts,
           fast);
    /* Without back-off every call would connect; uncapped doubling would allow 8 in 3 s. */
    if (attempts < 12 || attempts > 60 || attempts >= (long long)calls / 4) {
        fail_msg("%lld connect attempts for %u calls in 3 s", attempts, calls);
    }
    assert_non_null(strstr(err.msg, s.addr));
    sched_redis_free(r);
    redis_server_destroy(&s);
}

/* A pooled connection the server closed (restart, CLIENT KILL, idle timeout) is found dead
 * before use: the next command reconnects and succeeds instead of failing once. */
static void test_closed_connection_costs_no_failed_command(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    redis_server_start(&s, NULL);
    struct sched_redis *r = open_direct(&s, 1);
    struct dfc_error err = {0};
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "k", "v1"), 0);
    freeReplyObject(redis_server_command(&s, "CLIENT KILL TYPE normal"));
    usleep(50000); /* let the FIN arrive */
    if (cmd(r, 5000, NULL, &err, 3, "SET", "k", "v2") != 0) {
        fail_msg("first command after CLIENT KILL: %s", err.msg);
    }
    redis_server_restart(&s);
    usleep(50000);
    redisReply *rep = NULL;
    if (cmd(r, 5000, &rep, &err, 2, "GET", "k") != 0) {
        fail_msg("first command after a restart: %s", err.msg);
    }
    assert_int_equal(rep->type, REDIS_REPLY_NIL); /* no persistence: a fresh server */
    freeReplyObject(rep);
    sched_redis_free(r);
    redis_server_destroy(&s);
}

/* A Sentinel failover mid-run: commands before it reach node[0], after it node[1]; a write
 * on a pooled connection to the old (now read-only) master gets -READONLY, and the client
 * asks the Sentinel again and retries it on the new master. */
static void test_sentinel_failover(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_sentinel_setup t;
    redis_sentinel_start(&t, "mymaster");
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;

    /* No Sentinel answers: UNAVAILABLE naming the master and each address tried. */
    const char *dead[] = {"127.0.0.1:1", "127.0.0.1:2"};
    struct sched_redis_opts od = {.addrs = dead, .n_addrs = 2, .master_name = "mymaster"};
    assert_int_equal(sched_redis_new(&od, &r, &err), 0);
    assert_int_equal(cmd(r, 2000, NULL, &err, 3, "SET", "k", "v"), -ECONNREFUSED);
    assert_non_null(strstr(err.msg, "redis sentinel master mymaster: no sentinel answered"));
    assert_non_null(strstr(err.msg, "127.0.0.1:1"));
    assert_non_null(strstr(err.msg, "127.0.0.1:2"));
    sched_redis_free(r);

    /* A dead Sentinel first in the list, then the real one. The periodic question to the
     * Sentinels is put off for the test: the -READONLY path alone must find the new master. */
    const char *addrs[] = {"127.0.0.1:1", t.sentinel.addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 2,
                                 .master_name = "mymaster",
                                 .pool_size = 3,
                                 .backoff_min_ms = 20,
                                 .backoff_max_ms = 200,
                                 .master_check_ms = 3600 * 1000};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    for (int i = 0; i < 6; i++) { /* fill more than one pooled connection */
        assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "before", "1"), 0);
    }
    char buf[64];
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), t.node[0].addr);
    assert_stored(&t.node[0], "before", "1");

    int now_master = redis_sentinel_failover(&t);
    assert_int_equal(now_master, 1);
    /* Writes to the old master are refused now. */
    redisReply *rep = redis_server_command(&t.node[0], "SET probe x");
    assert_int_equal(rep->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(rep->str, "READONLY"));
    freeReplyObject(rep);
    freeReplyObject(redis_server_command(&t.node[0], "CONFIG RESETSTAT"));

    /* The same client: every command after the failover lands on the new master. */
    for (int i = 0; i < 6; i++) {
        char v[8];
        snprintf(v, sizeof(v), "%d", i);
        int rc = cmd(r, 5000, NULL, &err, 3, "SET", "after", v);
        if (rc != 0) {
            fail_msg("SET after failover, try %d: %s", i, err.msg);
        }
    }
    assert_stored(&t.node[1], "after", "5");
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), t.node[1].addr);

    /* The pooled connections to the old master stayed open: the first write on one got
     * -READONLY there, and was retried on the new master instead of failing. */
    rep = redis_server_command(&t.node[0], "INFO errorstats");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    if (strstr(rep->str, "errorstat_READONLY:count=") == NULL) {
        fail_msg("the old master never answered READONLY: %s", rep->str);
    }
    freeReplyObject(rep);
    sched_redis_free(r);
    redis_sentinel_destroy(&t);
}

/* With the periodic question to the Sentinels (master_check_ms): after a failover the client
 * moves to the new master before its next command, without a single write reaching the old
 * one (which, before the Sentinels demote it, would take the write and later flush it). */
static void test_sentinel_master_rechecked(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_sentinel_setup t;
    redis_sentinel_start(&t, "mymaster");
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;
    const char *addrs[] = {t.sentinel.addr};
    struct sched_redis_opts o = {
        .addrs = addrs, .n_addrs = 1, .master_name = "mymaster", .master_check_ms = 100};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "before", "1"), 0);
    assert_stored(&t.node[0], "before", "1");
    assert_int_equal(redis_sentinel_failover(&t), 1);
    freeReplyObject(redis_server_command(&t.node[0], "CONFIG RESETSTAT"));
    usleep(300 * 1000); /* past master_check_ms */
    assert_int_equal(cmd(r, 5000, NULL, &err, 3, "SET", "after", "1"), 0);
    assert_stored(&t.node[1], "after", "1");
    char buf[64];
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), t.node[1].addr);
    redisReply *rep = redis_server_command(&t.node[0], "INFO errorstats");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_null(strstr(rep->str, "errorstat_READONLY:count="));
    freeReplyObject(rep);
    sched_redis_free(r);
    redis_sentinel_destroy(&t);
}

/* ---- Sentinel trust ---- */

/* A fake master: accepts every connection on a free 127.0.0.1 port and records all it
 * receives, answering nothing. */
struct recorder {
    int listener;
    int port;
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t mu;
    char got[8192];
    size_t len;
    int conns;
};

static void *record(void *arg) {
    struct recorder *f = arg;
    struct pollfd p[17] = {{.fd = f->listener, .events = POLLIN}};
    nfds_t n = 1;
    while (!atomic_load(&f->stop)) {
        if (poll(p, n, 50) <= 0) {
            continue;
        }
        if ((p[0].revents & POLLIN) != 0 && n < 17) {
            int c = accept4(f->listener, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0) {
                p[n++] = (struct pollfd){.fd = c, .events = POLLIN};
                pthread_mutex_lock(&f->mu);
                f->conns++;
                pthread_mutex_unlock(&f->mu);
            }
        }
        for (nfds_t i = 1; i < n; i++) {
            if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                continue;
            }
            char buf[1024];
            ssize_t k = read(p[i].fd, buf, sizeof(buf));
            if (k <= 0) {
                close(p[i].fd);
                p[i--] = p[--n];
                continue;
            }
            pthread_mutex_lock(&f->mu);
            size_t room = sizeof(f->got) - 1 - f->len;
            size_t take = (size_t)k < room ? (size_t)k : room;
            for (size_t j = 0; j < take; j++) { /* keep it a string: a NUL becomes '.' */
                f->got[f->len] = buf[j];
                if (f->got[f->len] == '\0') {
                    f->got[f->len] = '.';
                }
                f->len++;
            }
            f->got[f->len] = '\0';
            pthread_mutex_unlock(&f->mu);
        }
    }
    for (nfds_t i = 1; i < n; i++) {
        close(p[i].fd);
    }
    return NULL;
}

static void recorder_start(struct recorder *f) {
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    f->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->listener >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(f->listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f->listener, 16), 0);
    assert_int_equal(getsockname(f->listener, (struct sockaddr *)&sa, &sl), 0);
    f->port = ntohs(sa.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, record, f), 0);
}

static bool recorder_saw(struct recorder *f, const char *what) {
    pthread_mutex_lock(&f->mu);
    bool saw = strstr(f->got, what) != NULL;
    pthread_mutex_unlock(&f->mu);
    return saw;
}

static void recorder_stop(struct recorder *f) {
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    close(f->listener);
    pthread_mutex_destroy(&f->mu);
}

/* A re-pointed Sentinel: a real redis-sentinel without auth that names a fake master. With a
 * sentinel password set, the client does not believe it (AUTH there fails: it has no
 * password), says so naming it, and asks the next one, a Sentinel that takes the password;
 * the fake master never hears from the client, the Redis password least of all. A wrong
 * sentinel password is refused too. Without a sentinel password (upstream's behaviour, warned
 * at start), the same Sentinel sends the password to the fake master: what the setting
 * closes, and proof that the recorder hears it. */
static void test_sentinel_must_authenticate(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct recorder fake;
    recorder_start(&fake);
    struct redis_server open_sen, auth_sen, m;
    redis_sentinel_alone(&open_sen, "mymaster", fake.port, NULL);
    struct redis_server_opts mo = {.password = "redis-pw-7"};
    redis_server_start(&m, &mo);
    struct redis_server_opts so = {
        .password = "sentinel-pw", .acl_user = "watcher", .acl_pass = "watcher-pw"};
    redis_sentinel_alone(&auth_sen, "mymaster", m.port, &so);
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;

    const char *only_open[] = {open_sen.addr};
    struct sched_redis_opts o = {.addrs = only_open,
                                 .n_addrs = 1,
                                 .master_name = "mymaster",
                                 .password = "redis-pw-7",
                                 .sentinel_password = "sentinel-pw",
                                 .pool_size = 2,
                                 .backoff_min_ms = 1,
                                 .backoff_max_ms = 1};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 2000, NULL, &err, 3, "SET", "k", "v"), -ECONNREFUSED);
    print_message("open Sentinel: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "not trusted"));
    assert_non_null(strstr(err.msg, open_sen.addr));
    sched_redis_free(r);

    /* The open Sentinel first, then the authenticated one: the real master. */
    const char *both[] = {open_sen.addr, auth_sen.addr};
    o.addrs = both;
    o.n_addrs = 2;
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    for (int i = 0; i < 4; i++) {
        if (cmd(r, 3000, NULL, &err, 3, "SET", "k", "trusted") != 0) {
            fail_msg("SET via the authenticated Sentinel: %s", err.msg);
        }
    }
    char buf[64];
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), m.addr);
    assert_stored(&m, "k", "trusted");
    sched_redis_free(r);

    /* The Sentinel's ACL user (sentinelUsername). */
    const char *only_auth[] = {auth_sen.addr};
    o.addrs = only_auth;
    o.n_addrs = 1;
    o.sentinel_username = "watcher";
    o.sentinel_password = "watcher-pw";
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    if (cmd(r, 3000, NULL, &err, 3, "SET", "k", "as-watcher") != 0) {
        fail_msg("SET via the Sentinel's ACL user: %s", err.msg);
    }
    assert_stored(&m, "k", "as-watcher");
    sched_redis_free(r);

    /* A wrong sentinel password: refused by the real Sentinel, so no master at all. */
    o.sentinel_username = NULL;
    o.sentinel_password = "wrong";
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 2000, NULL, &err, 3, "SET", "k", "v"), -ECONNREFUSED);
    assert_non_null(strstr(err.msg, "AUTH"));
    assert_non_null(strstr(err.msg, auth_sen.addr));
    sched_redis_free(r);

    usleep(200000); /* anything on its way to the fake master has arrived */
    assert_false(recorder_saw(&fake, "redis-pw-7"));
    assert_false(recorder_saw(&fake, "sentinel-pw"));
    assert_false(recorder_saw(&fake, "watcher-pw"));

    /* No sentinel password: the open Sentinel is believed, and its master gets the password. */
    o.addrs = only_open;
    o.sentinel_password = NULL;
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_true(cmd(r, 1000, NULL, &err, 3, "SET", "k", "v") < 0);
    sched_redis_free(r);
    double until = test_now_ms() + 3000;
    while (!recorder_saw(&fake, "redis-pw-7") && test_now_ms() < until) {
        usleep(10000);
    }
    assert_true(recorder_saw(&fake, "redis-pw-7"));

    redis_server_destroy(&auth_sen);
    redis_server_destroy(&m);
    redis_server_destroy(&open_sen);
    recorder_stop(&fake);
}

/* ---- concurrency ---- */

struct worker {
    struct sched_redis *r;
    int id;
    int failures;
    char err[DFC_ERROR_MSG_MAX];
};

#define THREADS 8
#define ROUNDS  200

static void *hammer(void *arg) {
    struct worker *w = arg;
    char key[32], val[32];
    snprintf(key, sizeof(key), "thread-%d", w->id);
    for (int i = 0; i < ROUNDS; i++) {
        struct dfc_error err = {0};
        snprintf(val, sizeof(val), "%d-%d", w->id, i);
        redisReply *rep = NULL;
        if (cmd(w->r, 10000, NULL, &err, 2, "INCR", "shared") != 0 ||
            cmd(w->r, 10000, NULL, &err, 3, "SET", key, val) != 0 ||
            cmd(w->r, 10000, &rep, &err, 2, "GET", key) != 0) {
            w->failures++;
            snprintf(w->err, sizeof(w->err), "%s", err.msg);
            continue;
        }
        if (rep->type != REDIS_REPLY_STRING || strcmp(rep->str, val) != 0) {
            w->failures++;
            snprintf(w->err, sizeof(w->err), "GET %s: another thread's reply", key);
        }
        freeReplyObject(rep);
    }
    return NULL;
}

static void test_eight_threads(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 3); /* fewer connections than threads */
    freeReplyObject(redis_server_command(&plain, "DEL shared"));
    pthread_t th[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.r = r, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].failures != 0) {
            fail_msg("thread %d: %d failures, last: %s", i, w[i].failures, w[i].err);
        }
    }
    assert_stored(&plain, "shared", "1600");
    sched_redis_free(r);
}

struct blocker {
    struct sched_redis *r;
    int rc;
};

static void *block_two_seconds(void *arg) {
    struct blocker *b = arg;
    struct dfc_error err = {0};
    redisReply *rep = NULL;
    b->rc = cmd(b->r, 20000, &rep, &err, 3, "BLPOP", "never-pushed", "2");
    if (b->rc == 0) {
        freeReplyObject(rep);
    }
    return NULL;
}

static bool two_blocked(void *arg) {
    redisReply *rep = redis_server_command(&plain, "INFO clients");
    bool ok = strstr(rep->str, "blocked_clients:2") != NULL;
    freeReplyObject(rep);
    return ok;
}

/* Both connections busy: a third caller waits for one until its deadline, then -ETIMEDOUT;
 * once they are free again it gets one. */
static void test_pool_exhausted_waits_until_deadline(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct sched_redis *r = open_direct(&plain, 2);
    struct blocker b[2] = {{.r = r}, {.r = r}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, block_two_seconds, &b[i]), 0);
    }
    assert_true(test_wait_for(two_blocked, NULL, 10000));
    struct dfc_error err = {0};
    double t0 = test_now_ms();
    assert_int_equal(cmd(r, 300, NULL, &err, 1, "PING"), -ETIMEDOUT);
    double took = test_now_ms() - t0;
    assert_non_null(strstr(err.msg, "all 2 pooled connections stayed busy"));
    if (took > 300 + 3000) {
        fail_msg("pool wait returned after %.0f ms for a 300 ms deadline", took);
    }
    /* A caller with a longer deadline than the blockers' gets a connection. */
    assert_int_equal(cmd(r, 10000, NULL, &err, 1, "PING"), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(b[i].rc, 0);
    }
    sched_redis_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands_binary_safe),
        cmocka_unit_test(test_pipeline_replies_in_order),
        cmocka_unit_test(test_replies_are_bounded),
        cmocka_unit_test(test_error_reply_is_internal_with_redis_text),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_script_survives_script_flush),
        cmocka_unit_test(test_auth_and_select),
        cmocka_unit_test(test_deadline_on_hung_server),
        cmocka_unit_test(test_connect_that_hangs_times_out),
        cmocka_unit_test(test_killed_then_restarted),
        cmocka_unit_test(test_backoff_spaces_failed_connects),
        cmocka_unit_test(test_closed_connection_costs_no_failed_command),
        cmocka_unit_test(test_sentinel_failover),
        cmocka_unit_test(test_sentinel_master_rechecked),
        cmocka_unit_test(test_sentinel_must_authenticate),
        cmocka_unit_test(test_eight_threads),
        cmocka_unit_test(test_pool_exhausted_waits_until_deadline),
    };
    (void)signal(SIGPIPE, SIG_IGN);
    return test_run_group(tests, start_plain, stop_plain);
}
