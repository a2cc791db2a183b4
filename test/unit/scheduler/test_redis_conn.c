/*
 * Tests for scheduler/redis_conn.c (TLS to Redis and to Sentinel) against real redis-server and
 * redis-sentinel processes with TLS ports (test/support/redis_harness), with a CA and
 * certificates made by the openssl command in a temp dir: mutual TLS with a password, a
 * connection kept across TLS 1.3 session tickets, a wrong CA and a certificate for another
 * address refused with a log line naming the peer, no client certificate refused,
 * insecureSkipVerify, bad TLS files at start, rotated files picked up without a restart, and
 * TLS through an authenticated Sentinel.
 * TLS off is test_redis.c, on the same code path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/log.h"
#include "redis.h"
#include "redis_harness.h"
#include "test_support.h"

/* The CA, the server's certificate (127.0.0.1), one for 127.0.0.2 only, a client's, and a
 * second CA that signed nothing here. */
static char pki[256], other_ca[256];
static char ca_crt[320], client_crt[320], client_key[320], other_ca_crt[320];

static int make_pki(void **state) {
    if (!redis_harness_available()) {
        return 0;
    }
    test_mkdtemp(pki, sizeof(pki), "redis-pki");
    test_mkdtemp(other_ca, sizeof(other_ca), "redis-pki-other");
    redis_tls_make_ca(pki);
    redis_tls_make_cert(pki, pki, "server", "IP:127.0.0.1");
    redis_tls_make_cert(pki, pki, "elsewhere", "IP:127.0.0.2");
    redis_tls_make_cert(pki, pki, "client", "DNS:scheduler");
    redis_tls_make_ca(other_ca);
    snprintf(ca_crt, sizeof(ca_crt), "%s/ca.crt", pki);
    snprintf(client_crt, sizeof(client_crt), "%s/client.crt", pki);
    snprintf(client_key, sizeof(client_key), "%s/client.key", pki);
    snprintf(other_ca_crt, sizeof(other_ca_crt), "%s/ca.crt", other_ca);
    return 0;
}

static int drop_pki(void **state) {
    if (pki[0] != '\0') {
        test_rmtree(pki);
        test_rmtree(other_ca);
    }
    return 0;
}

/* ---- the log, captured ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[16384];
static size_t log_len;

static void capture(int level, const char *line, size_t len, void *userdata) {
    (void)level;
    (void)userdata;
    pthread_mutex_lock(&log_mu);
    if (log_len + len < sizeof(log_buf)) {
        memcpy(log_buf + log_len, line, len);
        log_len += len;
        log_buf[log_len] = '\0';
    }
    pthread_mutex_unlock(&log_mu);
}

static void log_reset(void) {
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_buf[0] = '\0';
    pthread_mutex_unlock(&log_mu);
}

/* True when one captured line holds both a and b. */
static bool logged(const char *a, const char *b) {
    pthread_mutex_lock(&log_mu);
    bool found = false;
    for (const char *line = log_buf; *line != '\0' && !found;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *pa = strstr(line, a), *pb = strstr(line, b);
        found = pa != NULL && pb != NULL && pa < line + len && pb < line + len;
        line += len + (end ? 1 : 0);
    }
    pthread_mutex_unlock(&log_mu);
    return found;
}

/* ---- helpers ---- */

static int cmd(struct sched_redis *r, int64_t timeout_ms, redisReply **rep, struct dfc_error *err,
               int argc, ...) {
    const char *argv[8];
    size_t lens[8];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < 8; i++) {
        argv[i] = va_arg(ap, const char *);
        lens[i] = strlen(argv[i]);
    }
    va_end(ap);
    return sched_redis_argv(r, sched_redis_deadline(timeout_ms), argc, argv, lens, rep, err);
}

static struct sched_redis *open_tls(const char *addr, const char *ca, bool with_client_cert,
                                    const char *password) {
    const char *addrs[] = {addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .password = password,
                                 .pool_size = 1,
                                 .backoff_min_ms = 1,
                                 .backoff_max_ms = 1,
                                 .tls_ca_cert = ca,
                                 .tls_cert = with_client_cert ? client_crt : NULL,
                                 .tls_key = with_client_cert ? client_key : NULL};
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    if (sched_redis_new(&o, &r, &err) != 0) {
        fail_msg("sched_redis_new: %s", err.msg);
    }
    return r;
}

static long long connections_received(const struct redis_server *s) {
    redisReply *rep = redis_server_command(s, "INFO stats");
    const char *p = strstr(rep->str, "total_connections_received:");
    long long n = p ? strtoll(p + strlen("total_connections_received:"), NULL, 10) : -1;
    freeReplyObject(rep);
    return n;
}

/* ---- direct ---- */

/* Mutual TLS and AUTH: commands, a pipeline and binary data go through and land in the
 * server; one connection serves many commands, and one the server closed while it was idle
 * is found dead before use, so that costs no failed command. */
static void test_mutual_tls_with_password(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    struct redis_server_opts so = {.password = "pw", .tls_dir = pki, .tls_auth_clients = true};
    redis_server_start(&s, &so);
    struct sched_redis *r = open_tls(s.tls_addr, ca_crt, true, "pw");
    struct dfc_error err = {0};
    static const char val[] = "v\0a\r\nl";
    const char *argv[3] = {"SET", "bin", val};
    size_t lens[3] = {3, 3, sizeof(val) - 1};
    if (sched_redis_argv(r, sched_redis_deadline(5000), 3, argv, lens, NULL, &err) != 0) {
        fail_msg("SET over TLS: %s", err.msg);
    }
    long long before = connections_received(&s);
    for (int i = 0; i < 5; i++) {
        usleep(50000);
        redisReply *rep = NULL;
        assert_int_equal(cmd(r, 5000, &rep, &err, 2, "GET", "bin"), 0);
        assert_int_equal(rep->type, REDIS_REPLY_STRING);
        assert_int_equal(rep->len, sizeof(val) - 1);
        assert_memory_equal(rep->str, val, sizeof(val) - 1);
        freeReplyObject(rep);
    }
    /* One more connection: the counting one; the TLS client kept its own. */
    assert_int_equal(connections_received(&s), before + 1);

    const char *a1[] = {"INCR", "n"}, *a2[] = {"INCR", "n"}, *a3[] = {"GET", "n"};
    size_t l1[] = {4, 1};
    struct sched_redis_cmd cmds[3] = {{2, a1, l1}, {2, a2, l1}, {2, a3, (size_t[]){3, 1}}};
    redisReply *reps[3];
    assert_int_equal(sched_redis_pipeline(r, sched_redis_deadline(5000), 3, cmds, reps, &err), 0);
    assert_int_equal(reps[1]->integer, 2);
    assert_string_equal(reps[2]->str, "2");
    for (int i = 0; i < 3; i++) {
        freeReplyObject(reps[i]);
    }
    char buf[64];
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), s.tls_addr);

    redisReply *rep = redis_server_command(&s, "CLIENT KILL TYPE normal"); /* ours, not this */
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);
    usleep(50000);
    if (cmd(r, 5000, NULL, &err, 1, "PING") != 0) {
        fail_msg("first command after CLIENT KILL: %s", err.msg);
    }
    sched_redis_free(r);

    rep = redis_server_command(&s, "GET n");
    assert_string_equal(rep->str, "2");
    freeReplyObject(rep);
    redis_server_destroy(&s);
}

/* A server whose certificate does not chain to caCert, or names another address, is refused
 * before anything is sent (the password included), with an error and a log line naming it. */
static void test_wrong_ca_and_wrong_name_refused(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s, elsewhere;
    /* No requirepass: any AUTH the client sent would show in the servers' commandstats. */
    struct redis_server_opts so = {.tls_dir = pki};
    redis_server_start(&s, &so);
    struct redis_server_opts eo = {.tls_dir = pki, .tls_name = "elsewhere"};
    redis_server_start(&elsewhere, &eo);
    struct dfc_error err = {0};
    char peer[64];

    log_reset();
    struct sched_redis *r = open_tls(s.tls_addr, other_ca_crt, false, "pw");
    assert_int_equal(cmd(r, 3000, NULL, &err, 1, "PING"), -ECONNREFUSED);
    print_message("wrong CA: %s\n", err.msg);
    assert_non_null(strstr(err.msg, s.tls_addr));
    assert_non_null(strstr(err.msg, "certificate"));
    snprintf(peer, sizeof(peer), "peer=%s", s.tls_addr);
    assert_true(logged("event=redis.tls_failed", peer));
    sched_redis_free(r);

    log_reset();
    r = open_tls(elsewhere.tls_addr, ca_crt, false, "pw");
    assert_int_equal(cmd(r, 3000, NULL, &err, 1, "PING"), -ECONNREFUSED);
    print_message("wrong name: %s\n", err.msg);
    assert_non_null(strstr(err.msg, elsewhere.tls_addr));
    assert_non_null(strstr(err.msg, "certificate"));
    snprintf(peer, sizeof(peer), "peer=%s", elsewhere.tls_addr);
    assert_true(logged("event=redis.tls_failed", peer));
    sched_redis_free(r);

    /* Neither server ever saw an AUTH: the handshake failed before it. */
    redisReply *rep = redis_server_command(&s, "INFO commandstats");
    assert_null(strstr(rep->str, "cmdstat_auth:"));
    freeReplyObject(rep);
    rep = redis_server_command(&elsewhere, "INFO commandstats");
    assert_null(strstr(rep->str, "cmdstat_auth:"));
    freeReplyObject(rep);

    /* insecureSkipVerify: the same wrong CA goes through, with a warning at start. */
    log_reset();
    const char *addrs[] = {s.tls_addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .tls_ca_cert = other_ca_crt,
                                 .tls_insecure_skip_verify = true};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_true(logged("event=redis.tls_insecure", "NOT checked"));
    assert_int_equal(cmd(r, 3000, NULL, &err, 1, "PING"), 0);
    sched_redis_free(r);
    redis_server_destroy(&elsewhere);
    redis_server_destroy(&s);
}

/* A server that wants a client certificate refuses a client without one; a plaintext client
 * on the TLS port and a TLS client on the plain port fail within the deadline. */
static void test_missing_client_cert_and_mismatched_ports(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    struct redis_server_opts so = {.tls_dir = pki, .tls_auth_clients = true};
    redis_server_start(&s, &so);
    struct dfc_error err = {0};

    struct sched_redis *r = open_tls(s.tls_addr, ca_crt, false, NULL);
    int rc = cmd(r, 3000, NULL, &err, 1, "PING");
    print_message("no client certificate: %s\n", err.msg);
    assert_int_equal(rc, -ECONNREFUSED);
    assert_non_null(strstr(err.msg, s.tls_addr));
    sched_redis_free(r);

    r = open_tls(s.addr, ca_crt, true, NULL); /* TLS to the plain port */
    assert_true(cmd(r, 3000, NULL, &err, 1, "PING") < 0);
    print_message("TLS to a plain port: %s\n", err.msg);
    assert_non_null(strstr(err.msg, s.addr));
    sched_redis_free(r);

    const char *addrs[] = {s.tls_addr}; /* plaintext to the TLS port */
    struct sched_redis_opts o = {.addrs = addrs, .n_addrs = 1, .pool_size = 1};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    double t0 = test_now_ms();
    assert_true(cmd(r, 1000, NULL, &err, 1, "PING") < 0);
    assert_true(test_now_ms() - t0 < 4000);
    sched_redis_free(r);
    redis_server_destroy(&s);
}

/* TLS files that do not load, and a certificate without its key, fail at start naming the key. */
static void test_bad_tls_options(void **state) {
    REDIS_HARNESS_REQUIRE();
    const char *addrs[] = {"127.0.0.1:1"};
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;
    struct sched_redis_opts o = {.addrs = addrs, .n_addrs = 1, .tls_ca_cert = "/nonexistent"};
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.tls.caCert `/nonexistent`"));
    o.tls_ca_cert = ca_crt;
    o.tls_cert = client_crt;
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.tls.key"));
    o.tls_key = ca_crt; /* not the certificate's key */
    assert_int_equal(sched_redis_new(&o, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "database.redis.tls.key"));
    o.tls_key = client_key;
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    sched_redis_free(r);
}

/* Copies file from to to through a temp file and a rename, as a rotation does. */
static void replace_file(const char *from, const char *to) {
    char line[2048];
    snprintf(line, sizeof(line), "cp '%s' '%s.new' && mv '%s.new' '%s'", from, to, to, to);
    assert_int_equal(system(line), 0);
}

/* Rotated files are picked up by new connections without a new client: a CA file that held
 * the wrong CA, replaced by the right one; then a client certificate the server refuses (from
 * the other CA) put in place of a good one. */
static void test_rotated_files_picked_up(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server s;
    struct redis_server_opts so = {.tls_dir = pki, .tls_auth_clients = true};
    redis_server_start(&s, &so);
    char dir[256], ca[320], crt[320], key[320];
    test_mkdtemp(dir, sizeof(dir), "redis-rotate");
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
    snprintf(key, sizeof(key), "%s/tls.key", dir);
    replace_file(other_ca_crt, ca);
    replace_file(client_crt, crt);
    replace_file(client_key, key);
    const char *addrs[] = {s.tls_addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .pool_size = 1,
                                 .backoff_min_ms = 1,
                                 .backoff_max_ms = 1,
                                 .tls_ca_cert = ca,
                                 .tls_cert = crt,
                                 .tls_key = key};
    struct sched_redis *r = NULL;
    struct dfc_error err = {0};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 3000, NULL, &err, 1, "PING"), -ECONNREFUSED);

    log_reset();
    replace_file(ca_crt, ca);
    usleep(1100 * 1000); /* the files are looked at once a second */
    if (cmd(r, 3000, NULL, &err, 1, "PING") != 0) {
        fail_msg("PING after the CA was rotated: %s", err.msg);
    }
    assert_true(logged("event=redis.tls_reloaded", "new connections"));

    /* A client certificate from another CA: new connections use it, and are refused. */
    char other_dir[320];
    snprintf(other_dir, sizeof(other_dir), "%s/other", dir);
    assert_int_equal(mkdir(other_dir, 0700), 0);
    redis_tls_make_cert(other_ca, other_dir, "client", "DNS:scheduler");
    char ocrt[400], okey[400];
    snprintf(ocrt, sizeof(ocrt), "%s/client.crt", other_dir);
    snprintf(okey, sizeof(okey), "%s/client.key", other_dir);
    replace_file(okey, key);
    replace_file(ocrt, crt);
    usleep(1100 * 1000);
    redisReply *rep = redis_server_command(&s, "CLIENT KILL TYPE normal"); /* a new connection */
    freeReplyObject(rep);
    assert_true(cmd(r, 3000, NULL, &err, 1, "PING") < 0);
    print_message("client certificate from another CA: %s\n", err.msg);
    sched_redis_free(r);
    test_rmtree(dir);
    redis_server_destroy(&s);
}

/* ---- through Sentinel ---- */

/* A Sentinel on TLS with a password names a Redis on TLS: the client authenticates to the
 * Sentinel, then reaches the master it named, both over TLS. */
static void test_tls_through_authenticated_sentinel(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct redis_server m, sen;
    struct redis_server_opts mo = {.password = "redispw", .tls_dir = pki};
    redis_server_start(&m, &mo);
    struct redis_server_opts so = {.password = "sentpw", .tls_dir = pki};
    redis_sentinel_alone(&sen, "tlsmaster", m.tls_port, &so);
    struct dfc_error err = {0};
    struct sched_redis *r = NULL;
    const char *addrs[] = {sen.tls_addr};
    struct sched_redis_opts o = {.addrs = addrs,
                                 .n_addrs = 1,
                                 .master_name = "tlsmaster",
                                 .password = "redispw",
                                 .sentinel_password = "sentpw",
                                 .backoff_min_ms = 1,
                                 .backoff_max_ms = 1,
                                 .tls_ca_cert = ca_crt};
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    if (cmd(r, 5000, NULL, &err, 3, "SET", "via", "sentinel") != 0) {
        fail_msg("SET through the Sentinel over TLS: %s", err.msg);
    }
    char buf[64];
    assert_string_equal(sched_redis_current_addr(r, buf, sizeof(buf)), m.tls_addr);
    sched_redis_free(r);
    redisReply *rep = redis_server_command(&m, "GET via");
    assert_string_equal(rep->str, "sentinel");
    freeReplyObject(rep);

    /* The Sentinel's certificate from another CA: not asked, nothing reaches the master. */
    o.tls_ca_cert = other_ca_crt;
    log_reset();
    assert_int_equal(sched_redis_new(&o, &r, &err), 0);
    assert_int_equal(cmd(r, 3000, NULL, &err, 1, "PING"), -ECONNREFUSED);
    assert_non_null(strstr(err.msg, sen.tls_addr));
    char peer[64];
    snprintf(peer, sizeof(peer), "peer=%s", sen.tls_addr);
    assert_true(logged("event=redis.tls_failed", peer));
    sched_redis_free(r);
    redis_server_destroy(&sen);
    redis_server_destroy(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_tls_with_password),
        cmocka_unit_test(test_wrong_ca_and_wrong_name_refused),
        cmocka_unit_test(test_missing_client_cert_and_mismatched_ports),
        cmocka_unit_test(test_bad_tls_options),
        cmocka_unit_test(test_rotated_files_picked_up),
        cmocka_unit_test(test_tls_through_authenticated_sentinel),
    };
    (void)signal(SIGPIPE, SIG_IGN);
    dfc_log_set_sink(capture, NULL);
    return test_run_group(tests, make_pki, drop_pki);
}
