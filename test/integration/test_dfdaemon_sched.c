/*
 * Integration tests of dfdaemon with a scheduler: a real redis-server (redis_harness), the real
 * scheduler binary (scheduler_harness) and a real dfdaemon and dfcache (daemon_harness), all
 * on 127.0.0.1 free ports. What the daemon tells the scheduler is read back from Redis with a
 * plain client, in upstream's key layout (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * The host announced (real figures) and deleted on SIGTERM; imports registered as Succeeded
 * peers of this host, the local row carrying the same peer id; a cancelled streamed import
 * registering nothing; a commit that fails after Started leaving no live peer; an absent
 * scheduler not holding local imports and exports (kept unregistered), logged once, the host
 * announced again once it is back and those imports registered then; dfcache rm and GC expiry
 * withdrawing the peer; fail-over to a second scheduler; a second node importing content the
 * cluster already has; a restart with the store kept registering the copy again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/error.h"
#include "dfc/import.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "google/protobuf/duration.pb-c.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define P        "scheduler:scheduler-clusters:1"
#define MiB      ((size_t)1 << 20)
#define WAIT_MS  20000
#define HOSTNAME "dfc-sched-it"
#define HOST_ID  "127.0.0.1-" HOSTNAME

struct fx {
    struct redis_server redis;
    struct sched_harness s;
    struct harness h;
    char out[8192], err[8192];
    char immutable[2][600]; /* directories a test made immutable, undone in teardown */
};

/* chattr on path; 0 when it worked. */
static int chattr(const char *flag, const char *path) {
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "chattr %s '%s' 2>/dev/null", flag, path);
    return system(cmd);
}

/* (Re)writes h's config for peer to peer with schedulers addrs ("[a, b]") and restarts it. */
static void daemon_p2p(struct harness *h, const char *hostname, const char *addrs,
                       const char *gc_interval) {
    if (h->pid > 0) {
        assert_int_equal(harness_stop(h, SIGTERM), 0);
    }
    FILE *fp = fopen(h->config, "w");
    assert_non_null(fp);
    fprintf(fp,
            "download:\n  server:\n    socketPath: %s\n"
            "storage:\n  dir: %s\n  server:\n    tcpPort: %d\n"
            "upload:\n  server:\n    port: %d\n"
            "host:\n  ip: 127.0.0.1\n  hostname: %s\n  idc: idc-it\n  location: cn|it\n"
            "scheduler:\n  addrs: %s\n  announceInterval: 1s\n"
            "gc:\n  interval: %s\n"
            "log:\n  level: debug\n",
            h->socket, h->store, (int)test_free_port(), (int)test_free_port(), hostname, addrs,
            gc_interval);
    fclose(fp);
    harness_restart(h);
}

static int setup(void **state) {
    if (!redis_harness_available()) {
        *state = NULL;
        return 0;
    }
    struct fx *f = calloc(1, sizeof(*f));
    redis_server_start(&f->redis, NULL);
    sched_harness_start(&f->s, f->redis.addr, NULL);
    harness_start(&f->h, "gc:\n  interval: 1h\n");
    char addrs[96];
    snprintf(addrs, sizeof(addrs), "[%s]", f->s.target);
    daemon_p2p(&f->h, HOSTNAME, addrs, "1h");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    if (f == NULL) {
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        if (f->immutable[i][0] != '\0') {
            (void)chattr("-i", f->immutable[i]);
        }
    }
    int code = harness_destroy(&f->h);
    int scode = sched_harness_destroy(&f->s);
    redis_server_destroy(&f->redis);
    free(f);
    assert_int_equal(code, 0); /* a clean shutdown, and no leaks under a sanitizer */
    assert_int_equal(scode, 0);
    return 0;
}

#define NEED_REDIS(f)                                                                              \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_non_null(f);                                                                        \
    } while (0)

/* ---- Redis reads ---- */

static char *hget(struct fx *f, const char *key, const char *field, char *buf, size_t size) {
    redisReply *r = redis_server_command(&f->redis, "HGET %s %s", key, field);
    buf[0] = '\0';
    if (r->type == REDIS_REPLY_STRING) {
        snprintf(buf, size, "%.*s", (int)r->len, r->str);
    }
    bool nil = r->type != REDIS_REPLY_STRING;
    freeReplyObject(r);
    return nil ? NULL : buf;
}

static long long hget_ll(struct fx *f, const char *key, const char *field) {
    char buf[64];
    return hget(f, key, field, buf, sizeof(buf)) != NULL ? strtoll(buf, NULL, 10) : -1;
}

static double hget_f(struct fx *f, const char *key, const char *field) {
    char buf[64];
    return hget(f, key, field, buf, sizeof(buf)) != NULL ? strtod(buf, NULL) : -1;
}

static bool key_exists(struct fx *f, const char *key) {
    redisReply *r = redis_server_command(&f->redis, "EXISTS %s", key);
    bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

/* How many keys match pattern. */
static size_t count_keys(struct fx *f, const char *pattern) {
    redisReply *r = redis_server_command(&f->redis, "KEYS %s", pattern);
    size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    freeReplyObject(r);
    return n;
}

/* The peer ids of task_id at the scheduler, into ids (at most max); their count. */
static size_t task_peers(struct fx *f, const char *task_id, char ids[][400], size_t max) {
    redisReply *r = redis_server_command(
        &f->redis,
        "SMEMBERS " P ":persistent-cache-tasks:%s:persistent-cache-peers-for-persistent-cache-task",
        task_id);
    size_t n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && n < max; i++) {
        snprintf(ids[n++], 400, "%.*s", (int)r->element[i]->len, r->element[i]->str);
    }
    freeReplyObject(r);
    return n;
}

static void task_key(const char *id, char *buf, size_t size) {
    snprintf(buf, size, P ":persistent-cache-tasks:%s", id);
}

static void peer_key(const char *peer_id, char *buf, size_t size) {
    snprintf(buf, size, P ":persistent-cache-peers-for-persistent-cache-task:%s", peer_id);
}

/* ---- waits ---- */

static bool host_announced(void *arg) {
    struct fx *f = arg;
    char ip[64];
    return hget(f, P ":persistent-cache-hosts:" HOST_ID, "ip", ip, sizeof(ip)) != NULL;
}

struct peer_wait {
    struct fx *f;
    char key[600];
};

static bool peer_gone(void *arg) {
    struct peer_wait *w = arg;
    return !key_exists(w->f, w->key);
}

/* The local row's peer id (the sqlite3 shell reads the daemon's database); "" when none.
 * Returns false when the shell is not installed. */
static bool local_peer_id(struct fx *f, const char *task_id, char *buf, size_t size) {
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        return false;
    }
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "sqlite3 'file:%s/metadata/pcache.db?mode=ro' \"SELECT peer_id FROM tasks WHERE id = "
             "'%s'\"",
             f->h.store, task_id);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    buf[0] = '\0';
    if (fgets(buf, (int)size, p) == NULL) {
        buf[0] = '\0';
    }
    buf[strcspn(buf, "\n")] = '\0';
    assert_int_equal(pclose(p), 0);
    return true;
}

/* StatLocalPersistentCacheTask on the daemon's socket: the gRPC code (dfcache stat asks the
 * scheduler when there is one, so it cannot tell whether the copy is here). */
static int stat_local_code(struct fx *f, const char *id) {
    struct dfc_rpc_client *c = harness_client(&f->h);
    Dfdaemon__V2__StatLocalPersistentCacheTaskRequest req =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *resp = NULL;
    struct dfc_error err;
    int r = dfc_rpc_unary(c, &hm.stat_local, &req.base, 60000, &resp, &err);
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return dfc_error_to_grpc(r);
}

/* Imports a fresh file of len bytes (seed) with extra dfcache flags; the task id into id. */
static void import_file(struct fx *f, const char *transfer, size_t len, unsigned seed,
                        const char *ttl, char id[65]) {
    char src[400];
    harness_path(&f->h, "src.bin", src, sizeof(src));
    harness_write_file(src, len, seed);
    assert_int_equal(
        DFCACHE(f, "import", "--no-progress", "--transfer", transfer, "--ttl", ttl, src), 0);
    harness_done_id(f->out, id);
}

/* The task is Succeeded at the scheduler with exactly one peer: this host's, Succeeded, whose
 * id is the local row's. The peer id into peer. */
static void assert_registered(struct fx *f, const char *id, char peer[400]) {
    char key[600], buf[400];
    task_key(id, key, sizeof(key));
    assert_non_null(hget(f, key, "state", buf, sizeof(buf)));
    assert_string_equal(buf, "Succeeded");
    char peers[4][400];
    assert_int_equal(task_peers(f, id, peers, 4), 1);
    memcpy(peer, peers[0], 400);
    assert_int_equal(strncmp(peer, HOST_ID "-", strlen(HOST_ID) + 1), 0);
    peer_key(peer, key, sizeof(key));
    assert_non_null(hget(f, key, "host_id", buf, sizeof(buf)));
    assert_string_equal(buf, HOST_ID);
    assert_non_null(hget(f, key, "state", buf, sizeof(buf)));
    assert_string_equal(buf, "Succeeded");
    char local[400];
    if (local_peer_id(f, id, local, sizeof(local))) {
        assert_string_equal(local, peer);
    }
}

/* ---- the host ---- */

static void test_host_announced_then_deleted_on_sigterm(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    const char *k = P ":persistent-cache-hosts:" HOST_ID;
    char buf[128];
    assert_string_equal(hget(f, k, "ip", buf, sizeof(buf)), "127.0.0.1");
    assert_string_equal(hget(f, k, "hostname", buf, sizeof(buf)), HOSTNAME);
    assert_string_equal(hget(f, k, "network_idc", buf, sizeof(buf)), "idc-it");
    assert_string_equal(hget(f, k, "network_location", buf, sizeof(buf)), "cn|it");
    assert_string_equal(hget(f, k, "os", buf, sizeof(buf)), "linux");
    long long port = hget_ll(f, k, "port");
    assert_true(port >= 1024 && port < 65535);
    assert_true(hget_ll(f, k, "download_port") == port);
    assert_true(hget_ll(f, k, "cpu_logical_count") >= 1);
    assert_true(hget_f(f, k, "cpu_times_user") > 0);
    assert_true(hget_ll(f, k, "memory_total") > 0);
    assert_true(hget_ll(f, k, "memory_available") > 0);
    assert_true(hget_f(f, k, "memory_used_percent") > 0);
    assert_true(hget_ll(f, k, "disk_total") > 0);
    assert_true(hget_ll(f, k, "disk_free") > 0);
    assert_true(hget_ll(f, k, "announce_interval") == 1000000000LL);
    /* Announced again every interval: updated_at moves. */
    char first[64], later[64];
    assert_non_null(hget(f, k, "updated_at", first, sizeof(first)));
    double until = test_now_ms() + WAIT_MS;
    do {
        usleep(200 * 1000);
        assert_non_null(hget(f, k, "updated_at", later, sizeof(later)));
    } while (strcmp(first, later) == 0 && test_now_ms() < until);
    assert_string_not_equal(first, later);

    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    assert_false(key_exists(f, k)); /* DeleteHost ran before the daemon exited */
    harness_restart(&f->h);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
}

/* ---- imports ---- */

static void test_imports_register_a_peer(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65], peer[400];
    import_file(f, "path", 3 * 4 * MiB + 5, 1, "2h", id);
    assert_registered(f, id, peer);
    char key[600];
    task_key(id, key, sizeof(key));
    assert_true(hget_ll(f, key, "content_length") == (long long)(3 * 4 * MiB + 5));
    assert_true(hget_ll(f, key, "ttl") == 7200LL * 1000000000LL);

    char sid[65], speer[400];
    import_file(f, "stream", 1000, 2, "1h", sid);
    assert_registered(f, sid, speer);
    assert_string_not_equal(peer, speer); /* a fresh peer id per import */

    /* An identical import: the stored task, no second peer. */
    char src[400], again[65];
    harness_path(&f->h, "src.bin", src, sizeof(src));
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--ttl", "1h", src), 0);
    harness_done_id(f->out, again);
    assert_string_equal(again, sid);
    char peers[4][400];
    assert_int_equal(task_peers(f, sid, peers, 4), 1);
}

static void test_cancelled_stream_registers_nothing(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    struct dfc_rpc_client *c = harness_client(&f->h);
    struct dfc_error err;
    struct dfc_rpc_stream *s = NULL;
    assert_int_equal(dfc_rpc_stream_open(c, &hm.import, 60000, &s, &err), 0);
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    Dfc__Dfdaemon__V1__ImportStart start = DFC__DFDAEMON__V1__IMPORT_START__INIT;
    start.ttl = &ttl;
    start.persistent_replica_count = 1;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START;
    m.start = &start;
    assert_int_equal(dfc_rpc_stream_send(s, &m.base, &err), 0);
    uint8_t *chunk = calloc(1, MiB);
    for (int i = 0; i < 6; i++) {
        Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest d =
            DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        d.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT;
        d.content.data = chunk;
        d.content.len = MiB;
        assert_int_equal(dfc_rpc_stream_send(s, &d.base, &err), 0);
    }
    free(chunk);
    dfc_rpc_stream_cancel(s);
    dfc_rpc_stream_free(s);
    dfc_rpc_client_free(c);
    /* The daemon saw the cancel: its spool is gone; nothing local, nothing at the scheduler. */
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    double until = test_now_ms() + WAIT_MS;
    while (harness_count(tmp) != 0 && test_now_ms() < until) {
        usleep(20 * 1000);
    }
    assert_int_equal(harness_count(tmp), 0);
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_null(strchr(strchr(f->out, '\n') + 1, '\n')); /* the header line only */
    assert_int_equal(count_keys(f, P ":persistent-cache-tasks:*"), 0);
    assert_int_equal(count_keys(f, P ":persistent-cache-peers-for-persistent-cache-task:*"), 0);
}

/* A commit that fails after Started went through (the content directory cannot take the
 * file): the import fails, nothing is local, and Failed reached the scheduler: the task is
 * Failed and this host has no Succeeded (or Uploading) peer, so no parent without data is
 * offered. Finished comes only after the commit, so it was never sent. */
static void test_commit_failure_after_started_leaves_no_live_peer(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    if (geteuid() != 0) {
        test_skip("chattr +i needs root (CAP_LINUX_IMMUTABLE)");
    }
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65], peer[400], src[400];
    import_file(f, "path", 6000, 9, "1h", id);
    assert_registered(f, id, peer);
    assert_int_equal(DFCACHE(f, "rm", id), 0);
    /* The scheduler forgets the task too (else Started answers ALREADY_EXISTS). */
    char key[600];
    task_key(id, key, sizeof(key));
    freeReplyObject(redis_server_command(&f->redis, "DEL %s", key));
    snprintf(f->immutable[0], sizeof(f->immutable[0]), "%s/content/persistent-cache-tasks",
             f->h.store);
    snprintf(f->immutable[1], sizeof(f->immutable[1]), "%s/content/persistent-cache-tasks/%.3s",
             f->h.store, id);
    if (chattr("+i", f->immutable[0]) != 0) {
        f->immutable[0][0] = '\0';
        printf("the filesystem of %s does not take chattr +i\n", f->h.store);
        test_skip("the store's filesystem does not take chattr +i");
    }
    if (access(f->immutable[1], F_OK) != 0 || chattr("+i", f->immutable[1]) != 0) {
        f->immutable[1][0] = '\0'; /* no shard directory: its mkdir fails instead */
    }
    harness_path(&f->h, "src.bin", src, sizeof(src));
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--ttl", "1h", src), 1);
    assert_non_null(strstr(f->err, "persistent-cache-tasks")); /* the storage's own error */
    assert_int_equal(stat_local_code(f, id), DFC_GRPC_NOT_FOUND);
    char st[64];
    assert_non_null(hget(f, key, "state", st, sizeof(st))); /* Started went through */
    assert_string_equal(st, "Failed");
    char peers[4][400];
    size_t n = task_peers(f, id, peers, 4);
    for (size_t i = 0; i < n; i++) {
        char pk[1700];
        peer_key(peers[i], pk, sizeof(pk));
        if (hget(f, pk, "state", st, sizeof(st)) != NULL) {
            assert_string_equal(st, "Failed");
        }
    }
}

/* ---- an absent scheduler ---- */

static bool outage_logged(void *arg) {
    struct fx *f = arg;
    return harness_log_has(&f->h, "event=scheduler.announce_failed");
}

static bool recovery_logged(void *arg) {
    struct fx *f = arg;
    return harness_log_has(&f->h, "after an outage");
}

static bool two_uploaded(void *arg) {
    struct fx *f = arg;
    bool yes = harness_log_has(&f->h, "present=0 joined=0 uploaded=2 ");
    if (!yes) {
        usleep(50000);
    }
    return yes;
}

static void test_scheduler_away_then_back(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    assert_int_equal(sched_harness_stop(&f->s, SIGTERM), 0);
    /* The host record would outlive the scheduler in Redis: drop it, to see it come back. */
    freeReplyObject(redis_server_command(&f->redis, "DEL " P ":persistent-cache-hosts:" HOST_ID));

    char id[65], src[400], out[400];
    import_file(f, "path", 4 * MiB + 1, 3, "1h", id);
    harness_path(&f->h, "src.bin", src, sizeof(src));
    harness_path(&f->h, "out.bin", out, sizeof(out));
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "-O", out, id), 0);
    assert_true(harness_same_file(src, out));
    char sid[65];
    import_file(f, "stream", 777, 4, "1h", sid);
    assert_true(harness_log_has(&f->h, "event=import.unregistered"));
    /* dfcache stat shows the local copy and says the counts are unknown, not 0. */
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    assert_non_null(strstr(f->out, "Persistent:           yes\n"));
    assert_non_null(strstr(f->out, "Persistent replicas:  - of "));
    assert_non_null(strstr(f->out, "Replicas:             -\n"));
    assert_non_null(strstr(f->out, "Scheduler:            no answer: "));
    assert_true(test_wait_for(outage_logged, f, WAIT_MS)); /* the next announce found none */
    assert_int_equal(count_keys(f, P ":persistent-cache-tasks:*"), 0);
    char local[400];
    if (local_peer_id(f, id, local, sizeof(local))) {
        assert_string_equal(local, ""); /* kept locally, unregistered */
    }
    /* The outage is logged once, not once per retry. */
    usleep(2500 * 1000);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "test $(grep -c 'event=scheduler.announce_failed' '%s') -eq 1",
             f->h.log);
    assert_int_equal(system(cmd), 0);

    sched_harness_restart(&f->s);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    assert_true(test_wait_for(recovery_logged, f, WAIT_MS));
    /* The two imports kept local meanwhile are uploaded now, each under a fresh peer id that
     * its row records. */
    assert_true(test_wait_for(two_uploaded, f, WAIT_MS));
    char late[400];
    assert_registered(f, id, late);
    assert_registered(f, sid, late);
    /* And imports register again. */
    char nid[65], peer[400];
    import_file(f, "path", 2000, 5, "1h", nid);
    assert_registered(f, nid, peer);
    /* Now the counts are the scheduler's: this host's persistent peer. */
    assert_int_equal(DFCACHE(f, "stat", nid), 0);
    assert_non_null(strstr(f->out, "Scheduler:            answered\n"));
    assert_non_null(strstr(f->out, "Persistent replicas:  1 of "));
    assert_non_null(strstr(f->out, "Replicas:             1\n"));
}

/* A scheduler back from a restart serves the very next call, not only the one after gRPC's
 * reconnect back-off (which grows with the outage: about 4 s after one of 3 s). */
static void test_restarted_scheduler_serves_the_next_call(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    assert_int_equal(sched_harness_stop(&f->s, SIGTERM), 0);
    char id[65];
    import_file(f, "path", 1000, 6, "1h", id);
    assert_true(harness_log_has(&f->h, "event=import.unregistered"));
    usleep(3000 * 1000);
    sched_harness_restart(&f->s); /* the host record is still in Redis */
    char nid[65], peer[400];
    import_file(f, "path", 2000, 7, "1h", nid);
    assert_registered(f, nid, peer);
}

/* ---- deletes ---- */

static void test_rm_withdraws_the_peer(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65];
    struct peer_wait w = {.f = f};
    char peer[400];
    import_file(f, "path", 5000, 6, "1h", id);
    assert_registered(f, id, peer);
    peer_key(peer, w.key, sizeof(w.key));
    assert_int_equal(DFCACHE(f, "rm", id), 0);
    assert_true(peer_gone(&w)); /* rm returns after the scheduler was told */
    char peers[4][400];
    assert_int_equal(task_peers(f, id, peers, 4), 0);
}

static bool gc_expired_one(void *arg) {
    struct fx *f = arg;
    return harness_log_has(&f->h, "event=gc.done expired=1");
}

static void test_gc_expiry_withdraws_the_peer(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell to move time");
    }
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65], peer[400];
    import_file(f, "path", 5000, 7, "5m", id);
    assert_registered(f, id, peer);
    /* Killed, not stopped: a clean stop's DeleteHost would remove the peer by itself. */
    assert_int_equal(harness_stop(&f->h, SIGKILL), 128 + SIGKILL);
    struct peer_wait w = {.f = f};
    peer_key(peer, w.key, sizeof(w.key));
    assert_false(peer_gone(&w));
    /* Six minutes pass for the daemon: its row is older than its 5 minute TTL. */
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "sqlite3 '%s/metadata/pcache.db' \"UPDATE tasks SET created_at_ns = created_at_ns - "
             "360000000000 WHERE id = '%s'\"",
             f->h.store, id);
    assert_int_equal(system(cmd), 0);
    char addrs[96];
    snprintf(addrs, sizeof(addrs), "[%s]", f->s.target);
    daemon_p2p(&f->h, HOSTNAME, addrs, "1s");
    assert_true(test_wait_for(peer_gone, &w, WAIT_MS));
    assert_true(test_wait_for(gc_expired_one, f, WAIT_MS));       /* logged after the pass */
    assert_int_equal(stat_local_code(f, id), DFC_GRPC_NOT_FOUND); /* expired locally too */
}

/* ---- several schedulers, several nodes ---- */

static void test_failover_to_the_next_scheduler(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    /* The first scheduler is not there: every task call's ring lists the live one too. */
    char addrs[128];
    int held;
    snprintf(addrs, sizeof(addrs), "[127.0.0.1:%u, %s]", test_refusing_port(&held), f->s.target);
    daemon_p2p(&f->h, HOSTNAME, addrs, "1h");
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    /* Until one task's ring put the dead scheduler first (half of them, by the hash), and at
     * least 4: each one is registered at the live scheduler all the same. */
    unsigned i = 0;
    for (; i < 4 || (!harness_log_has(&f->h, "event=scheduler.failover") && i < 32); i++) {
        char id[65], peer[400];
        import_file(f, i % 2 ? "stream" : "path", 1000 + i, 30 + i, "1h", id);
        assert_registered(f, id, peer);
    }
    assert_true(harness_log_has(&f->h, "event=scheduler.failover"));
    close(held);
}

static void test_second_node_imports_what_the_cluster_has(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65], peer[400], src[400];
    import_file(f, "path", 9000, 8, "1h", id);
    assert_registered(f, id, peer);
    harness_path(&f->h, "src.bin", src, sizeof(src));

    struct harness other;
    harness_start(&other, "gc:\n  interval: 1h\n");
    char addrs[96];
    snprintf(addrs, sizeof(addrs), "[%s]", f->s.target);
    daemon_p2p(&other, "dfc-sched-it-2", addrs, "1h");
    char out[8192], errbuf[8192];
    const char *argv[] = {"import", "--no-progress", "--ttl", "1h", src, NULL};
    double until = test_now_ms() + WAIT_MS; /* once the second host is announced */
    while (!key_exists(f, P ":persistent-cache-hosts:127.0.0.1-dfc-sched-it-2") &&
           test_now_ms() < until) {
        usleep(50 * 1000);
    }
    assert_int_equal(harness_dfcache(&other, -1, out, sizeof(out), errbuf, sizeof(errbuf), argv),
                     0);
    assert_non_null(strstr(out, id)); /* the existing task */
    /* The second copy joins the Succeeded task as a persistent peer of its own
     * (docs/integrity.md): it used to be kept locally without a peer. */
    assert_false(harness_log_has(&other, "event=import.exists_in_cluster"));
    char peers[4][400];
    assert_int_equal(task_peers(f, id, peers, 4), 2);
    assert_int_equal(harness_destroy(&other), 0);
}

static bool rejoined_as(struct fx *f, const char *what) {
    bool yes = harness_log_has(&f->h, what);
    if (!yes) {
        usleep(50000);
    }
    return yes;
}

static bool uploaded_again(void *arg) {
    return rejoined_as(arg, "event=scheduler.rejoined present=0 joined=0 uploaded=1");
}

static bool found_present(void *arg) {
    return rejoined_as(arg, "event=scheduler.rejoined present=1 joined=0 uploaded=0");
}

/* The only node restarts with its store: DeleteHost at the stop left the task Succeeded with
 * no copy, so once announced again the node uploads it again under the same peer id, with
 * the TTL it has left (both copies of the record expire together). Killed instead (no
 * DeleteHost), the next start finds the peer still there and changes nothing. */
static void test_restart_registers_the_copy_again(void **state) {
    struct fx *f = *state;
    NEED_REDIS(f);
    assert_true(test_wait_for(host_announced, f, WAIT_MS));
    char id[65], peer[400], again[400], key[600];
    import_file(f, "path", 2 * 4 * MiB + 3, 9, "2h", id);
    assert_registered(f, id, peer);
    task_key(id, key, sizeof(key));

    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    char peers[4][400];
    assert_int_equal(task_peers(f, id, peers, 4), 0); /* DeleteHost took the peer */
    char buf[64];
    assert_string_equal(hget(f, key, "state", buf, sizeof(buf)), "Succeeded");
    harness_restart(&f->h);
    assert_true(test_wait_for(uploaded_again, f, WAIT_MS));
    assert_registered(f, id, again);
    assert_string_equal(again, peer);
    long long ttl = hget_ll(f, key, "ttl");
    assert_true(ttl <= 7200LL * 1000000000LL && ttl > 7080LL * 1000000000LL);
    assert_true(harness_log_has(&f->h, "how=uploaded"));

    assert_int_equal(harness_stop(&f->h, SIGKILL), 128 + SIGKILL);
    harness_restart(&f->h);
    assert_true(test_wait_for(found_present, f, WAIT_MS));
    assert_registered(f, id, again);
    assert_string_equal(again, peer);
}

int main(void) {
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_host_announced_then_deleted_on_sigterm),
        T(test_imports_register_a_peer),
        T(test_cancelled_stream_registers_nothing),
        T(test_commit_failure_after_started_leaves_no_live_peer),
        T(test_scheduler_away_then_back),
        T(test_restarted_scheduler_serves_the_next_call),
        T(test_rm_withdraws_the_peer),
        T(test_gc_expiry_withdraws_the_peer),
        T(test_failover_to_the_next_scheduler),
        T(test_second_node_imports_what_the_cluster_has),
        T(test_restart_registers_the_copy_again),
    };
    return test_run_group(tests, NULL, NULL);
}
