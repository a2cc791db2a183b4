/*
 * Integration tests of replica counts the scheduler can trust (scheduler/placement_probe.c):
 * a real redis-server, the real scheduler and real dfdaemons on their own loopback addresses
 * (p2p_harness.h), with copies counted on disk.
 *
 * Two clusters, one after the other. The first repairs every 2 s and probes each copy at most
 * every second: three ghost hosts announced as persistent peers of a task that has one real
 * copy (the attack that made the scheduler report 4 of 3) are dropped and repair brings the
 * real copies to 3; a node that misses one probe (stopped, then resumed) keeps its copy and its
 * record. The second never runs its repair loop within a test (1 h), so only event-driven
 * repair can place a copy: after a DeletePersistentCachePeer of a replica, and after a parent
 * is excluded for a piece that failed verification.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/error.h"
#include "dfc/id.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "p2p_harness.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define MiB        ((size_t)1 << 20)
#define TIMEOUT_MS 30000
#define BOUND_MS   40000 /* for a copy to be placed, or a ghost dropped */
#define PREFIX     "scheduler:scheduler-clusters:1"
#define N_NODES    4

static struct dfc_rpc_client_method announce_host_m, announce_peer_m, delete_peer_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &announce_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnouncePersistentCachePeer",
                          &announce_peer_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeletePersistentCachePeer", &delete_peer_m),
};

/* ---- the cluster (one per group) ---- */

static struct {
    bool up;
    struct redis_server redis;
    struct sched_harness sched;
    struct p2p_node node[N_NODES]; /* A .11 (the importer), B .12, C .13, D .14 */
    char dir[256];
} cl;

#define A (&cl.node[0])

static const char *const ips[N_NODES] = {"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"};
static const char *const names[N_NODES] = {"node-a", "node-b", "node-c", "node-d"};

static void start_node(int i) {
    p2p_node_start(&cl.node[i], ips[i], names[i], cl.sched.target, &cl.redis);
}

static int up(const char *sched_yaml, int n_nodes) {
    memset(&cl, 0, sizeof(cl));
    if (!redis_harness_available()) {
        return 0; /* every test skips */
    }
    redis_server_start(&cl.redis, NULL);
    sched_harness_start(&cl.sched, cl.redis.addr, sched_yaml);
    for (int i = 0; i < n_nodes; i++) {
        start_node(i);
    }
    test_mkdtemp(cl.dir, sizeof(cl.dir), "replica-probe");
    cl.up = true;
    return 0;
}

/* Probes every second, repairs every 2 s; only A runs at first. Host GC never runs (a stopped
 * node would be collected). */
static int probing_up(void **state) {
    (void)state;
    return up("scheduler:\n  replicaRepairInterval: 2s\n  probeInterval: 1s\n"
              "  gc:\n    hostGCInterval: 1h\n",
              1);
}

/* No repair pass within a test: only events place copies. */
static int events_up(void **state) {
    (void)state;
    return up("scheduler:\n  replicaRepairInterval: 1h\n  probeInterval: 1s\n"
              "  gc:\n    hostGCInterval: 1h\n",
              N_NODES);
}

static int down(void **state) {
    (void)state;
    if (!cl.up) {
        return 0;
    }
    int bad = 0;
    for (int i = 0; i < N_NODES; i++) {
        if (cl.node[i].h.pid > 0) {
            kill(cl.node[i].h.pid, SIGCONT); /* a test that failed may have left it stopped */
            bad += p2p_node_destroy(&cl.node[i]) != 0;
        }
    }
    bad += sched_harness_destroy(&cl.sched) != 0;
    redis_server_destroy(&cl.redis);
    test_rmtree(cl.dir);
    cl.up = false;
    return bad;
}

#define REQUIRE_CLUSTER()                                                                          \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_true(cl.up);                                                                        \
    } while (0)

/* ---- helpers ---- */

static struct dfc_rpc_client *sched_client(void) {
    struct dfc_rpc_client *c;
    struct dfc_error err;
    if (dfc_rpc_client_new(cl.sched.target, NULL, &c, &err) < 0) {
        fprintf(stderr, "client of %s: %s\n", cl.sched.target, err.msg);
        abort();
    }
    return c;
}

/* Imports a fresh file of len bytes (pattern seed) on A with `replicas` copies wanted. */
static void import_on_a(size_t len, unsigned seed, unsigned replicas, char *src, size_t size,
                        char id[65]) {
    snprintf(src, size, "%s/src-%u", cl.dir, seed);
    harness_write_file(src, len, seed);
    char count[16], out[512], errb[2048];
    snprintf(count, sizeof(count), "%u", replicas);
    const char *argv[] = {"import", src, "--persistent-replica-count", count, NULL};
    int code = harness_dfcache(&A->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache import: %s%s\n", out, errb);
    }
    assert_int_equal(code, 0);
    const char *done = strstr(out, "Done: ");
    assert_non_null(done);
    snprintf(id, 65, "%.64s", done + 6);
}

/* Whether node i holds task id's content on disk, byte-identical to src. */
static bool holds(int i, const char *id, const char *src) {
    if (cl.node[i].h.pid <= 0) {
        return false;
    }
    char path[600];
    p2p_content_path(&cl.node[i], id, path, sizeof(path));
    return access(path, F_OK) == 0 && harness_same_file(src, path);
}

static int copies_on_disk(const char *id, const char *src) {
    int n = 0;
    for (int i = 0; i < N_NODES; i++) {
        n += holds(i, id, src);
    }
    return n;
}

static long long persistent_count(const char *id) {
    redisReply *r = redis_server_command(
        &cl.redis,
        "SCARD " PREFIX ":persistent-cache-tasks:%s:persistent-peers-for-persistent-cache-task",
        id);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* The id of a peer of host_id in task id's persistent set into peer ("" when none). */
static void persistent_peer_of(const char *host_id, const char *id, char *peer, size_t size) {
    redisReply *r = redis_server_command(
        &cl.redis,
        "SMEMBERS " PREFIX ":persistent-cache-tasks:%s:persistent-peers-for-persistent-cache-task",
        id);
    peer[0] = '\0';
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *h = redis_server_command(
            &cl.redis,
            "HGET " PREFIX ":persistent-cache-peers-for-persistent-cache-task:%s host_id",
            r->element[i]->str);
        if (h->type == REDIS_REPLY_STRING && strcmp(h->str, host_id) == 0) {
            snprintf(peer, size, "%s", r->element[i]->str);
        }
        freeReplyObject(h);
    }
    freeReplyObject(r);
}

/* A host as a dfdaemon announces it, at ip with download_port `port`. */
struct host_msg {
    Common__V2__Host host;
    Common__V2__CPU cpu;
    Common__V2__Memory memory;
    Common__V2__Network network;
    Common__V2__Disk disk;
    Common__V2__Build build;
};

static int announce_host(const char *id, const char *ip, const char *name, int port) {
    struct host_msg m;
    common__v2__host__init(&m.host);
    common__v2__cpu__init(&m.cpu);
    common__v2__memory__init(&m.memory);
    common__v2__network__init(&m.network);
    common__v2__disk__init(&m.disk);
    common__v2__build__init(&m.build);
    m.host.id = (char *)id;
    m.host.hostname = (char *)name;
    m.host.name = (char *)name;
    m.host.ip = (char *)ip;
    m.host.port = port;
    m.host.download_port = port;
    m.host.os = "linux";
    m.cpu.logical_count = 2;
    m.memory.total = 8 * 1024 * MiB;
    m.disk.free = 100 * 1024 * MiB;
    m.build.git_version = "v1.5.1";
    m.host.cpu = &m.cpu;
    m.host.memory = &m.memory;
    m.host.network = &m.network;
    m.host.disk = &m.disk;
    m.host.build = &m.build;
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    Google__Protobuf__Duration interval = GOOGLE__PROTOBUF__DURATION__INIT;
    interval.seconds = 300;
    r.host = &m.host;
    r.interval = &interval;
    struct dfc_rpc_client *c = sched_client();
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    int rc = dfc_rpc_unary(c, &announce_host_m, &r.base, TIMEOUT_MS, &out, &err);
    if (rc < 0) {
        fprintf(stderr, "AnnounceHost %s: %s\n", id, err.msg);
    }
    dfc_rpc_msg_free(out);
    dfc_rpc_client_free(c);
    return rc;
}

typedef Scheduler__V2__AnnouncePersistentCachePeerRequest peer_req;
#define REQ(x) SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_##x

static int ps_send(struct dfc_rpc_stream *st, peer_req *r, const char *host, const char *task,
                   const char *peer) {
    struct dfc_error err;
    r->host_id = (char *)host;
    r->task_id = (char *)task;
    r->peer_id = (char *)peer;
    int rc = dfc_rpc_stream_send(st, &r->base, &err);
    if (rc < 0) {
        fprintf(stderr, "send: %s\n", err.msg);
    }
    return rc;
}

/* Registers peer of host for task (persistent or not) and takes the candidate parents. */
static struct dfc_rpc_stream *peer_register(struct dfc_rpc_client *c, const char *host,
                                            const char *task, const char *peer, bool persistent) {
    struct dfc_rpc_stream *st = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_stream_open(c, &announce_peer_m, TIMEOUT_MS, &st, &err), 0);
    peer_req r = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__RegisterPersistentCachePeerRequest g =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    g.persistent = persistent;
    g.piece_length = 4 * MiB;
    r.request_case = REQ(REGISTER_PERSISTENT_CACHE_PEER_REQUEST);
    r.register_persistent_cache_peer_request = &g;
    assert_int_equal(ps_send(st, &r, host, task, peer), 0);
    ProtobufCMessage *m = NULL;
    int rc = dfc_rpc_stream_recv(st, announce_peer_m.resp, &m, &err);
    if (rc != 1) {
        fprintf(stderr, "register %s: %s\n", peer, rc < 0 ? err.msg : "the stream ended");
    }
    assert_int_equal(rc, 1);
    dfc_rpc_msg_free(m);
    return st;
}

/* Ends the stream: Finished (succeeded) or just closed, and its OK status. */
static void peer_end(struct dfc_rpc_stream *st, const char *host, const char *task,
                     const char *peer, bool finished) {
    if (finished) {
        peer_req r = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
        Scheduler__V2__DownloadPersistentCachePeerStartedRequest s =
            SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST__INIT;
        r.request_case = REQ(DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST);
        r.download_persistent_cache_peer_started_request = &s;
        assert_int_equal(ps_send(st, &r, host, task, peer), 0);
        peer_req f = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
        Scheduler__V2__DownloadPersistentCachePeerFinishedRequest d =
            SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST__INIT;
        f.request_case = REQ(DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST);
        f.download_persistent_cache_peer_finished_request = &d;
        assert_int_equal(ps_send(st, &f, host, task, peer), 0);
    }
    struct dfc_error err;
    int rc = dfc_rpc_stream_finish(st, &err);
    if (rc < 0) {
        fprintf(stderr, "peer %s: %s\n", peer, err.msg);
    }
    assert_int_equal(rc, 0);
    dfc_rpc_stream_free(st);
}

struct placed {
    const char *id, *src;
    int want;   /* copies on disk */
    int on;     /* node index that must hold one, or -1 */
    int absent; /* node index whose peer must have left the persistent set, or -1 */
};

static bool placed_now(void *arg) {
    const struct placed *p = arg;
    bool yes = copies_on_disk(p->id, p->src) == p->want && persistent_count(p->id) == p->want &&
               (p->on < 0 || holds(p->on, p->id, p->src));
    if (yes && p->absent >= 0) {
        char peer[400];
        persistent_peer_of(cl.node[p->absent].host_id, p->id, peer, sizeof(peer));
        yes = peer[0] == '\0';
    }
    if (!yes) {
        usleep(100000);
    }
    return yes;
}

/* The node (not A) that holds a copy, and the one of B..D that holds none, of task id. */
static void holder_and_free(const char *id, const char *src, int *holder, int *free_node) {
    *holder = *free_node = -1;
    for (int i = 1; i < N_NODES; i++) {
        if (holds(i, id, src)) {
            *holder = i;
        } else {
            *free_node = i;
        }
    }
    assert_true(*holder > 0);
    assert_true(*free_node > 0);
}

/* ---- cluster 1: probes ---- */

struct ghost {
    char host_id[320], peer_id[400], ip[16], name[32];
    int port;
};

/* Three ghost hosts announced as persistent Succeeded peers of a 3-replica task with one real
 * copy (A's; no other node is up when it is imported): two at addresses where nothing
 * listens, and one under the host id node D then announces for real (a live host that claims
 * a copy it does not hold). Before: the persistent set counted 4 of 3 and repair never ran.
 * Now the scheduler probes them, drops all three, and repair brings the real copies to 3 on
 * the nodes started meanwhile, counted on disk. */
static void test_ghost_peers_dropped_and_repaired(void **state) {
    (void)state;
    REQUIRE_CLUSTER();
    char src[512], id[65];
    import_on_a(3 * MiB, 601, 3, src, sizeof(src), id);
    assert_int_equal(copies_on_disk(id, src), 1);

    struct ghost g[3];
    for (int i = 0; i < 3; i++) {
        struct ghost *x = &g[i];
        if (i < 2) {
            snprintf(x->ip, sizeof(x->ip), "127.0.0.%d", 21 + i);
            snprintf(x->name, sizeof(x->name), "ghost-%d", i);
        } else {
            snprintf(x->ip, sizeof(x->ip), "%s", ips[3]); /* D's */
            snprintf(x->name, sizeof(x->name), "%s", names[3]);
        }
        x->port = p2p_free_port(x->ip); /* nothing listens there */
        assert_int_equal(dfc_host_id(x->ip, x->name, x->host_id, sizeof(x->host_id)), 0);
        size_t hn = strnlen(x->host_id, 320); /* no snprintf from a field of x into x */
        memcpy(x->peer_id, x->host_id, hn);
        snprintf(x->peer_id + hn, sizeof(x->peer_id) - hn, "-ghost-peer");
        assert_int_equal(announce_host(x->host_id, x->ip, x->name, x->port), 0);
        struct dfc_rpc_client *c = sched_client();
        struct dfc_rpc_stream *st = peer_register(c, x->host_id, id, x->peer_id, true);
        peer_end(st, x->host_id, id, x->peer_id, true);
        dfc_rpc_client_free(c);
    }
    assert_int_equal(persistent_count(id), 4); /* 4 of 3: the attack as it was */

    for (int i = 1; i < N_NODES; i++) {
        start_node(i); /* D announces over the ghost's host record */
    }
    struct placed p = {id, src, 3, -1, -1};
    assert_true(test_wait_for(placed_now, &p, BOUND_MS));
    for (int i = 0; i < 3; i++) {
        char text[600];
        snprintf(text, sizeof(text), "event=placement.ghost_removed task_id=%s peer_id=%s", id,
                 g[i].peer_id);
        assert_true(sched_harness_log_has(&cl.sched, text));
    }
    /* Stays so: no ghost counts again, no real copy is dropped. */
    sleep(3);
    assert_int_equal(copies_on_disk(id, src), 3);
    assert_int_equal(persistent_count(id), 3);
}

static bool probe_failure_logged(void *arg) {
    const char *text = arg;
    bool yes = sched_harness_log_has(&cl.sched, text);
    if (!yes) {
        usleep(20000);
    }
    return yes;
}

static bool probe_answered(void *arg) {
    const char *peer = arg;
    redisReply *r = redis_server_command(&cl.redis, "GET " PREFIX ":dfc-replica-probes:%s", peer);
    bool yes = r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0;
    freeReplyObject(r);
    if (!yes) {
        usleep(50000);
    }
    return yes;
}

/* A node with a real copy misses one probe (stopped past the probe's 5 s deadline, then
 * resumed): its copy stops counting for a while but is neither deleted nor unregistered, and
 * the next probe counts it again. */
static void test_transient_probe_failure_keeps_the_copy(void **state) {
    (void)state;
    REQUIRE_CLUSTER();
    for (int i = 1; i < N_NODES; i++) {
        assert_true(cl.node[i].h.pid > 0); /* started by the test before */
    }
    char src[512], id[65];
    import_on_a(2 * MiB, 602, 2, src, sizeof(src), id);
    struct placed p = {id, src, 2, -1, -1};
    assert_true(test_wait_for(placed_now, &p, BOUND_MS));
    int x = -1;
    for (int i = 1; i < N_NODES; i++) {
        x = holds(i, id, src) ? i : x;
    }
    assert_true(x > 0);
    char peer[400];
    persistent_peer_of(cl.node[x].host_id, id, peer, sizeof(peer));
    assert_true(peer[0] != '\0');

    char text[600];
    snprintf(text, sizeof(text), "event=placement.probe_failed task_id=%s peer_id=%s", id, peer);
    assert_int_equal(kill(cl.node[x].h.pid, SIGSTOP), 0);
    bool failed = test_wait_for(probe_failure_logged, text, BOUND_MS);
    assert_int_equal(kill(cl.node[x].h.pid, SIGCONT), 0);
    assert_true(failed);

    assert_true(test_wait_for(probe_answered, peer, BOUND_MS));
    char again[400];
    persistent_peer_of(cl.node[x].host_id, id, again, sizeof(again));
    assert_string_equal(again, peer);
    assert_true(holds(x, id, src));
    snprintf(text, sizeof(text), "event=placement.ghost_removed task_id=%s peer_id=%s", id, peer);
    assert_false(sched_harness_log_has(&cl.sched, text));
}

/* ---- cluster 2: events ---- */

/* A 3-replica task on A and two of B..D; waits for the placement the upload triggers. */
static void replicated_task(unsigned seed, char *src, size_t size, char id[65]) {
    import_on_a(2 * MiB, seed, 3, src, size, id);
    struct placed p = {id, src, 3, -1, -1};
    assert_true(test_wait_for(placed_now, &p, BOUND_MS));
}

/* DeletePersistentCachePeer of a replica: the scheduler deletes that copy and places a new
 * one on the node that had none, long before any repair pass. */
static void test_deleted_peer_replaced_at_once(void **state) {
    (void)state;
    REQUIRE_CLUSTER();
    char src[512], id[65], peer[400];
    replicated_task(701, src, sizeof(src), id);
    int holder, free_node;
    holder_and_free(id, src, &holder, &free_node);
    persistent_peer_of(cl.node[holder].host_id, id, peer, sizeof(peer));
    assert_true(peer[0] != '\0');

    Scheduler__V2__DeletePersistentCachePeerRequest r =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    r.host_id = cl.node[holder].host_id;
    r.task_id = id;
    r.peer_id = peer;
    struct dfc_rpc_client *c = sched_client();
    ProtobufCMessage *out = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(c, &delete_peer_m, &r.base, TIMEOUT_MS, &out, &err), 0);
    dfc_rpc_msg_free(out);
    dfc_rpc_client_free(c);

    struct placed p = {id, src, 3, free_node, holder};
    assert_true(test_wait_for(placed_now, &p, BOUND_MS));
    assert_false(holds(holder, id, src)); /* the scheduler deleted that copy */
}

/* A downloading peer reports that a piece from a replica failed verification (temporary =
 * false): the scheduler excludes that parent, so its copy no longer counts, and places a new
 * copy at once on the node that had none. */
static void test_excluded_parent_replaced_at_once(void **state) {
    (void)state;
    REQUIRE_CLUSTER();
    char src[512], id[65], parent[400];
    replicated_task(702, src, sizeof(src), id);
    int holder, free_node;
    holder_and_free(id, src, &holder, &free_node);
    persistent_peer_of(cl.node[holder].host_id, id, parent, sizeof(parent));
    assert_true(parent[0] != '\0');

    /* The reporter: a host of the test's own, at an address where nothing listens. */
    char host_id[320], peer_id[400];
    const char *ip = "127.0.0.31";
    assert_int_equal(dfc_host_id(ip, "reporter", host_id, sizeof(host_id)), 0);
    snprintf(peer_id, sizeof(peer_id), "%.320s-reporter-peer", host_id);
    assert_int_equal(announce_host(host_id, ip, "reporter", p2p_free_port(ip)), 0);
    struct dfc_rpc_client *c = sched_client();
    struct dfc_rpc_stream *st = peer_register(c, host_id, id, peer_id, false);
    peer_req r = SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFailedRequest m =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    m.parent_id = parent;
    m.temporary = false;
    r.request_case = REQ(DOWNLOAD_PIECE_FAILED_REQUEST);
    r.download_piece_failed_request = &m;
    assert_int_equal(ps_send(st, &r, host_id, id, peer_id), 0);
    peer_end(st, host_id, id, peer_id, false);
    dfc_rpc_client_free(c);

    /* Its copy stays on its disk (nobody deleted it) but no longer counts: 3 counted, 4 on
     * disk once the new one is placed. */
    bool ok = false;
    double until = test_now_ms() + BOUND_MS;
    while (!ok && test_now_ms() < until) {
        char gone[400];
        persistent_peer_of(cl.node[holder].host_id, id, gone, sizeof(gone));
        ok = gone[0] == '\0' && holds(free_node, id, src) && persistent_count(id) == 3;
        if (!ok) {
            usleep(100000);
        }
    }
    assert_true(ok);
    assert_int_equal(copies_on_disk(id, src), 4);
}

int main(void) {
    if (harness_resolve_methods(client_methods, DFC_RPC_N(client_methods)) < 0) {
        return 1;
    }
    const struct CMUnitTest probing[] = {
        cmocka_unit_test(test_ghost_peers_dropped_and_repaired),
        cmocka_unit_test(test_transient_probe_failure_keeps_the_copy),
    };
    const struct CMUnitTest events[] = {
        cmocka_unit_test(test_deleted_peer_replaced_at_once),
        cmocka_unit_test(test_excluded_parent_replaced_at_once),
    };
    int a = test_run_group(probing, probing_up, down);
    int b = test_run_group(events, events_up, down);
    return a == 1 || b == 1 ? 1 : a != 0 ? a : b;
}
