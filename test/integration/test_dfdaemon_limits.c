/*
 * Integration tests for dfdaemon's limits against callers that try to starve the others (the
 * socket is shared by every pod): streams that hold workers, a stream that goes quiet, one uid
 * with many calls, a connection flood, a NUL byte smuggled into a path, and the limit keys'
 * validation. A real daemon (daemon_harness), real gRPC clients and raw Unix sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/import.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "test_support.h"

typedef Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest ImportRequest;

struct fx {
    struct harness h;
    struct dfc_rpc_client *c;
    char out[8192], err[8192];
};

/* Starts the daemon with server_yaml (lines under download.server, 4-space indented) added to
 * the harness's config. The harness writes its own download.server block, so the daemon is
 * started once on that, then again on the completed file. */
static struct fx *start(const char *server_yaml) {
    struct fx *f = calloc(1, sizeof(*f));
    harness_start(&f->h, NULL);
    if (server_yaml != NULL) {
        harness_stop(&f->h, SIGTERM);
        FILE *cf = fopen(f->h.config, "w");
        assert_non_null(cf);
        fprintf(cf,
                "download:\n  server:\n    socketPath: %s\n%s"
                "storage:\n  dir: %s\n"
                "log:\n  level: info\n"
                "gc:\n  interval: 1h\n",
                f->h.socket, server_yaml, f->h.store);
        fclose(cf);
        harness_restart(&f->h);
    }
    f->c = harness_client(&f->h);
    return f;
}

/* The fixture: *state is the server_yaml (or NULL) before setup, the struct fx after. */
static int setup(void **state) {
    *state = start(*state);
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    int code = harness_close(&f->h, f->c);
    free(f);
    assert_int_equal(code, 0); /* a clean shutdown, and no leaks under a sanitizer */
    return 0;
}

/* A Stat of a task that does not exist, on client c: NOT_FOUND (5) when the daemon serves it. */
static int stat_code(struct dfc_rpc_client *c, int64_t timeout_ms, struct dfc_error *err) {
    Dfdaemon__V2__StatPersistentCacheTaskRequest s =
        DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    s.task_id = "0000000000000000000000000000000000000000000000000000000000000000";
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_unary(c, &hm.stat, &s.base, timeout_ms, &m, err);
    dfc_rpc_msg_free(m);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* Opens an import and sends its start; the stream is left open. */
static struct dfc_rpc_stream *import_start(struct dfc_rpc_client *c, int64_t timeout_ms) {
    struct dfc_error err;
    struct dfc_rpc_stream *s;
    assert_int_equal(dfc_rpc_stream_open(c, &hm.import, timeout_ms, &s, &err), 0);
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    Dfc__Dfdaemon__V1__ImportStart st = DFC__DFDAEMON__V1__IMPORT_START__INIT;
    st.ttl = &ttl;
    st.persistent_replica_count = 1;
    ImportRequest m = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START;
    m.start = &st;
    assert_int_equal(dfc_rpc_stream_send(s, &m.base, &err), 0);
    return s;
}

static int send_byte(struct dfc_rpc_stream *s) {
    struct dfc_error err;
    ImportRequest d = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    d.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT;
    d.content.data = (uint8_t *)"x";
    d.content.len = 1;
    return dfc_rpc_stream_send(s, &d.base, &err);
}

struct spool_wait {
    struct fx *f;
    size_t n;
};

static bool spools_at_least(void *arg) {
    struct spool_wait *w = arg;
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", w->f->h.store);
    size_t n = harness_count(tmp);
    return n != (size_t)-1 && n >= w->n;
}

static bool spools_none(void *arg) {
    struct spool_wait *w = arg;
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", w->f->h.store);
    return harness_count(tmp) == 0;
}

/* ---- 32 streams (the worker count) must not starve List/Stat ---- */

enum { N_IDLE = 16, N_SLOW = 16 };

struct slow {
    struct dfc_rpc_stream *s[N_SLOW];
    atomic_bool stop;
};

/* One byte a second on each slow stream: alive, so no idle timeout ends them. */
static void *trickle(void *arg) {
    struct slow *sl = arg;
    while (!atomic_load(&sl->stop)) {
        for (int i = 0; i < N_SLOW; i++) {
            (void)send_byte(sl->s[i]);
        }
        for (int t = 0; t < 10 && !atomic_load(&sl->stop); t++) {
            usleep(100000);
        }
    }
    return NULL;
}

static void test_busy_streams_do_not_starve_unary_calls(void **state) {
    struct fx *f = *state; /* 32 workers, 30 s idle timeout; one uid may take them all */
    struct dfc_rpc_stream *idle[N_IDLE];
    struct slow sl = {.stop = false};
    for (int i = 0; i < N_IDLE; i++) {
        idle[i] = import_start(f->c, 60000);
    }
    for (int i = 0; i < N_SLOW; i++) {
        sl.s[i] = import_start(f->c, 60000);
    }
    pthread_t th;
    pthread_create(&th, NULL, trickle, &sl);
    /* Streams hold every worker they may: 28 of 32 (4 are reserved for unary calls). */
    struct spool_wait w = {f, 28};
    bool held = test_wait_for(spools_at_least, &w, 10000);
    usleep(300000);
    /* Another client's Stat is served, not queued behind the streams. */
    struct dfc_rpc_client *other = harness_client(&f->h);
    struct dfc_error err;
    int codes[3];
    for (int i = 0; i < 3; i++) {
        codes[i] = stat_code(other, 10000, &err);
        if (codes[i] != 5) {
            fprintf(stderr, "stat: code %d: %s\n", codes[i], err.msg);
        }
    }
    dfc_rpc_client_free(other);
    atomic_store(&sl.stop, true);
    pthread_join(th, NULL);
    for (int i = 0; i < N_IDLE; i++) {
        dfc_rpc_stream_free(idle[i]);
    }
    for (int i = 0; i < N_SLOW; i++) {
        dfc_rpc_stream_free(sl.s[i]);
    }
    assert_true(held);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(codes[i], 5);
    }
    struct spool_wait none = {f, 0};
    assert_true(test_wait_for(spools_none, &none, 10000)); /* every cancelled import cleaned up */
}

/* ---- a stream that goes quiet ---- */

static void test_quiet_import_is_ended_and_its_spool_removed(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *s = import_start(f->c, 30000);
    assert_int_equal(send_byte(s), 0);
    struct spool_wait w = {f, 1};
    assert_true(test_wait_for(spools_at_least, &w, 5000));
    /* Then nothing: the daemon ends the call long before the client's 30 s deadline. */
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_stream_recv(s, hm.import.resp, &m, &err);
    assert_int_equal(dfc_error_to_grpc(r), 4); /* DEADLINE_EXCEEDED */
    if (strstr(err.msg, "download.server.idleTimeout") == NULL) {
        fprintf(stderr, "status message: %s\n", err.msg);
    }
    assert_non_null(strstr(err.msg, "no message for 1s (download.server.idleTimeout)"));
    dfc_rpc_stream_free(s);
    struct spool_wait none = {f, 0};
    assert_true(test_wait_for(spools_none, &none, 5000)); /* the import was aborted */
    assert_int_equal(stat_code(f->c, 5000, &err), 5);     /* and the daemon serves on */
}

/* ---- calls per uid ---- */

#define DFCACHE_AS(f, uid, ...)                                                                    \
    harness_dfcache(&(f)->h, uid, (f)->out, sizeof((f)->out), (f)->err, sizeof((f)->err),          \
                    (const char *const[]){__VA_ARGS__, NULL})

static void test_one_uid_cannot_take_every_call(void **state) {
    if (geteuid() != 0) {
        test_skip("needs root to run dfcache as another uid");
    }
    struct fx *f = *state;
    struct dfc_error err;
    struct dfc_rpc_stream *s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = import_start(f->c, 60000);
    }
    struct spool_wait w = {f, 4};
    assert_true(test_wait_for(spools_at_least, &w, 5000));
    /* This uid (root) has its 4: a fifth call is refused at once, saying why. */
    assert_int_equal(stat_code(f->c, 5000, &err), 8); /* RESOURCE_EXHAUSTED */
    assert_string_equal(err.msg, "server busy: uid 0 already has 4 calls in flight "
                                 "(download.server.maxCallsPerUser)");
    /* Another uid is not affected. */
    assert_int_equal(DFCACHE_AS(f, 65534, "ls"), 0);
    /* The slots come back when the calls end. */
    for (int i = 0; i < 4; i++) {
        dfc_rpc_stream_free(s[i]);
    }
    struct spool_wait none = {f, 0};
    assert_true(test_wait_for(spools_none, &none, 5000));
    assert_int_equal(stat_code(f->c, 5000, &err), 5);
}

/* ---- a connection flood ---- */

static size_t daemon_fds(struct fx *f) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)f->h.pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static size_t log_count(struct fx *f, const char *text) {
    FILE *p = fopen(f->h.log, "r");
    assert_non_null(p);
    char line[4096];
    size_t n = 0;
    while (fgets(line, sizeof(line), p) != NULL) {
        n += strstr(line, text) != NULL;
    }
    fclose(p);
    return n;
}

enum { N_FLOOD = 200, CAP = 16 };

struct flood {
    int fds[N_FLOOD];
};

static bool flood_refused(void *arg) {
    struct flood *fl = arg;
    int closed = 0;
    for (int i = 0; i < N_FLOOD; i++) {
        closed += test_closed_by_peer(fl->fds[i]);
    }
    return closed >= N_FLOOD - CAP;
}

static bool stat_served(void *arg) {
    struct dfc_error err;
    return stat_code(arg, 5000, &err) == 5;
}

static void test_connection_flood_is_capped(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(stat_code(f->c, 5000, &err), 5); /* the client's connection is open */
    size_t base = daemon_fds(f);
    struct flood fl;
    for (int i = 0; i < N_FLOOD; i++) {
        fl.fds[i] = test_connect_unix(f->h.socket);
        assert_true(fl.fds[i] >= 0);
    }
    /* All but 15 are closed as they are accepted (the old daemon kept every one). */
    bool refused = test_wait_for(flood_refused, &fl, 10000);
    size_t during = daemon_fds(f);
    fprintf(stderr, "daemon fds: %zu before the flood, %zu during it\n", base, during);
    assert_true(refused);
    assert_true(during <= base + CAP + 4);
    /* One log line for the flood, not one per refusal. */
    size_t lines = log_count(f, "rpc.connection_refused");
    assert_true(lines >= 1 && lines <= 2);
    /* The open connection still works; after the flood, new clients do too. */
    assert_int_equal(stat_code(f->c, 5000, &err), 5);
    for (int i = 0; i < N_FLOOD; i++) {
        close(fl.fds[i]);
    }
    struct dfc_rpc_client *other = harness_client(&f->h);
    assert_true(test_wait_for(stat_served, other, 10000));
    dfc_rpc_client_free(other);
}

/* ---- a NUL byte in a path ---- */

static void test_nul_in_a_path_is_invalid_argument(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char file[400];
    snprintf(file, sizeof(file), "%s/a", f->h.dir);
    harness_write_file(file, 100, 3);
    /* protobuf-c packs a C string up to its NUL, so the path goes as raw field 2 bytes: the
     * daemon once read it as "<dir>/a" and imported that file. */
    uint8_t path[500]; /* an unknown field's bytes are what follows its key: length, data */
    int n = snprintf((char *)path + 1, sizeof(path) - 1, "%s", file);
    static const uint8_t tail[12] = "\0/etc/shadow"; /* bytes, not a C string */
    memcpy(path + 1 + n, tail, sizeof(tail));
    assert_true(n + 12 < 128);
    path[0] = (uint8_t)(n + 12); /* a one-byte varint */
    Dfdaemon__V2__UploadPersistentCacheTaskRequest req =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    req.ttl = &ttl;
    req.persistent_replica_count = 1;
    ProtobufCMessageUnknownField raw = {.tag = 2,
                                        .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
                                        .len = (size_t)n + 13,
                                        .data = path};
    req.base.n_unknown_fields = 1;
    req.base.unknown_fields = &raw;
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(f->c, &hm.upload, &req.base, 10000, &resp, &err);
    dfc_rpc_msg_free(resp);
    if (r == 0) {
        fprintf(stderr, "the upload succeeded: the path was cut at its NUL\n");
    }
    assert_int_equal(dfc_error_to_grpc(r), 3); /* INVALID_ARGUMENT */
    assert_string_equal(err.msg, "field `path` contains a NUL byte");
    assert_int_equal(DFCACHE_AS(f, -1, "ls"), 0);
    assert_null(strchr(strchr(f->out, '\n') + 1, '\n')); /* nothing was imported */
}

/* storage.maxTasks: once the store holds that many tasks, an import (streamed or by path) is
 * RESOURCE_EXHAUSTED naming the setting, and keeps nothing; `dfcache rm` makes room. */
static void test_a_full_store_refuses_imports(void **state) {
    struct fx *f = *state;
    harness_stop(&f->h, SIGTERM);
    harness_restart_with(&f->h, "--set=storage.maxTasks=1");
    char a[400], b[400];
    snprintf(a, sizeof(a), "%s/a", f->h.dir);
    snprintf(b, sizeof(b), "%s/b", f->h.dir);
    harness_write_file(a, 1000, 1);
    harness_write_file(b, 1000, 2);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", a), 0);
    char id[80];
    assert_int_equal(sscanf(f->out, "Done: %79s", id), 1);
    const char *transfers[] = {"stream", "path"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(
            DFCACHE_AS(f, -1, "import", "--no-progress", "--transfer", transfers[i], b), 1);
        assert_non_null(strstr(f->err, "storage.maxTasks is 1"));
        assert_non_null(strstr(f->err, "(RESOURCE_EXHAUSTED)"));
    }
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    assert_int_equal(harness_count(tmp), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "rm", id), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", b), 0);
}

/* ---- the keys ---- */

static void test_limit_keys_are_validated(void **state) {
    struct {
        const char *set;
        const char *text;
    } cases[] = {
        {"download.server.reservedWorkers=32",
         "download.server.reservedWorkers (32) must be below download.server.maxWorkers (32)"},
        {"download.server.maxWorkersPerUser=33",
         "download.server.maxWorkersPerUser (33) must be between 1 and download.server.maxWorkers "
         "(32)"},
        {"download.server.idleTimeout=0s",
         "download.server.idleTimeout must be between 1ms and 24h"},
        {"download.server.maxCallsPerUser=0",
         "download.server.maxCallsPerUser must be between 1 and 1000000"},
        {"storage.maxTasks=65537", "storage.maxTasks must be between 1 and 65536"},
        {"download.server.maxConnections=0",
         "download.server.maxConnections must be between 1 and 1000000"},
        {"download.server.maxConnectionsPerUser=2000",
         "download.server.maxConnectionsPerUser (2000) must not exceed "
         "download.server.maxConnections (1024)"},
    };
    char dir[256], out[300], cmd[1024];
    test_mkdtemp(dir, sizeof(dir), "limits-keys");
    snprintf(out, sizeof(out), "%s/out", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(cmd, sizeof(cmd), "%s --set %s --print-config > %s 2>&1", DFDAEMON_BIN,
                 cases[i].set, out);
        int status = system(cmd);
        assert_int_equal(WEXITSTATUS(status), 2);
        char text[4096] = "";
        FILE *fp = fopen(out, "r");
        size_t n = fread(text, 1, sizeof(text) - 1, fp);
        text[n] = '\0';
        fclose(fp);
        if (strstr(text, cases[i].text) == NULL) {
            fprintf(stderr, "--set %s: got:\n%s\n", cases[i].set, text);
        }
        assert_non_null(strstr(text, cases[i].text));
    }
    test_rmtree(dir);
}

int main(void) {
#define T(fn, yaml) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, (void *)(yaml))
    const struct CMUnitTest tests[] = {
        T(test_busy_streams_do_not_starve_unary_calls, "    maxWorkersPerUser: 32\n"),
        T(test_quiet_import_is_ended_and_its_spool_removed, "    idleTimeout: 1s\n"),
        T(test_one_uid_cannot_take_every_call, "    maxCallsPerUser: 4\n    idleTimeout: 1m\n"),
        T(test_connection_flood_is_capped,
          "    maxConnections: 16\n    maxConnectionsPerUser: 16\n"),
        T(test_nul_in_a_path_is_invalid_argument, NULL),
        T(test_a_full_store_refuses_imports, NULL),
        cmocka_unit_test(test_limit_keys_are_validated),
    };
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
    return test_run_group(tests, NULL, NULL);
}
