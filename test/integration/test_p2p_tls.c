/*
 * Integration test of mutual TLS between the cluster's processes: a real redis-server, the real
 * scheduler and two real dfdaemons (127.0.0.31, .32; p2p_harness.h), each with a certificate
 * from one CA made by test/support/make-certs.sh naming its IP. The nodes register with the
 * scheduler over TLS, a task imported on A is exported on B (B asks A's DfdaemonUpload for its
 * pieces over TLS) and placed by the scheduler as a persistent replica (its pull on B's
 * DfdaemonUpload over TLS); a plaintext client, and a client with a certificate from another
 * CA, get nothing from a node's port, which logs the refused peer; a node takes a delete only
 * from the scheduler's certificate, not from another node's connecting from the scheduler's
 * address; the scheduler takes AnnounceHost and DeleteHost for a host only from a certificate
 * naming its address. Every client dialling a node verifies the name dfc-node (serverName), as
 * the chart's shared mode does: A and B's certificates name their IP and dfc-node, C's is the
 * shared node certificate (CN and DNS dfc-node, URI dragonfly://node, no IP); C registers,
 * serves A as a parent and downloads from A, but may not take over A's host. A scheduler
 * certificate with no IP (DNS and URI dragonfly://scheduler) deletes on a node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p_harness.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define MiB              ((size_t)1 << 20)
#define REPLICA_BOUND_MS 30000
#define TIMEOUT_MS       60000

static struct dfc_rpc_client_method sync_host_m, announce_m, delete_host_m, list_hosts_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "SyncHost", &sync_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &announce_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeleteHost", &delete_host_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "ListHosts", &list_hosts_m),
};

static struct {
    bool up;
    struct redis_server redis;
    struct sched_harness sched;
    struct p2p_node node[3];
    char dir[256]; /* certificates and files */
} cl;

#define A         (&cl.node[0])
#define B         (&cl.node[1])
#define C         (&cl.node[2])
#define NODE_NAME "dfc-node"

static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "`%s` failed\n", cmd);
        abort();
    }
}

static int cluster_up(void **state) {
    (void)state;
    if (!redis_harness_available()) {
        return 0;
    }
    test_mkdtemp(cl.dir, sizeof(cl.dir), "p2p-tls");
    sh("bash %s ca %s/ca && bash %s ca %s/other", MAKE_CERTS, cl.dir, MAKE_CERTS, cl.dir);
    sh("bash %s leaf %s/ca %s/scheduler IP:127.0.0.1", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/sched-uri DNS:scheduler.test,URI:dragonfly://scheduler", MAKE_CERTS,
       cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/a IP:127.0.0.31,DNS:dfc-node", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/b IP:127.0.0.32,DNS:dfc-node", MAKE_CERTS, cl.dir, cl.dir);
    sh("bash %s leaf %s/ca %s/shared DNS:dfc-node,URI:dragonfly://node --cn dfc-node", MAKE_CERTS,
       cl.dir, cl.dir);
    sh("bash %s leaf %s/other %s/stranger IP:127.0.0.1", MAKE_CERTS, cl.dir, cl.dir);
    char d[300];
    redis_server_start(&cl.redis, NULL);
    memset(&cl.sched, 0, sizeof(cl.sched));
    snprintf(d, sizeof(d), "%s/scheduler", cl.dir);
    sched_harness_start_tls_named(&cl.sched, cl.redis.addr, d, NODE_NAME);
    snprintf(d, sizeof(d), "%s/a", cl.dir);
    p2p_node_start_tls(A, "127.0.0.31", "node-tls-a", cl.sched.target, &cl.redis, d, NODE_NAME);
    snprintf(d, sizeof(d), "%s/b", cl.dir);
    p2p_node_start_tls(B, "127.0.0.32", "node-tls-b", cl.sched.target, &cl.redis, d, NODE_NAME);
    cl.up = true;
    return 0;
}

static int cluster_down(void **state) {
    (void)state;
    if (!cl.up) {
        return 0;
    }
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        bad += p2p_node_destroy(&cl.node[i]) != 0;
    }
    if (C->h.pid > 0) {
        bad += p2p_node_destroy(C) != 0;
    }
    bad += sched_harness_destroy(&cl.sched) != 0;
    redis_server_destroy(&cl.redis);
    test_rmtree(cl.dir);
    return bad;
}

#define REQUIRE_CLUSTER()                                                                          \
    do {                                                                                           \
        REDIS_HARNESS_REQUIRE();                                                                   \
        assert_true(cl.up);                                                                        \
    } while (0)

static void import_on(struct p2p_node *n, size_t len, unsigned seed, unsigned replicas, char *path,
                      size_t path_size, char id[65]) {
    snprintf(path, path_size, "%s/src-%u", cl.dir, seed);
    harness_write_file(path, len, seed);
    char count[16], out[512], errb[2048];
    snprintf(count, sizeof(count), "%u", replicas);
    const char *argv[] = {"import", path, "--persistent-replica-count", count, NULL};
    int code = harness_dfcache(&n->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache import: %s%s\n", out, errb);
    }
    assert_int_equal(code, 0);
    harness_done_id(out, id);
}

static int export_on(struct p2p_node *n, const char *id, const char *out_path) {
    char out[512], errb[2048];
    const char *argv[] = {"export", "-O", out_path, id, "--no-progress", NULL};
    int code = harness_dfcache(&n->h, -1, out, sizeof(out), errb, sizeof(errb), argv);
    if (code != 0) {
        fprintf(stderr, "dfcache export on %s: %s%s\n", n->ip, out, errb);
    }
    return code;
}

/* Both nodes registered over TLS (p2p_node_start_tls waited for it); no process says TLS is
 * off. */
static void test_registered_over_tls(void **state) {
    REQUIRE_CLUSTER();
    assert_true(p2p_host_announced(&cl.redis, A->host_id));
    assert_true(p2p_host_announced(&cl.redis, B->host_id));
    assert_false(sched_harness_log_has(&cl.sched, "scheduler.tls_off"));
    assert_false(harness_log_has(&A->h, "dfdaemon.tls_off"));
}

/* B exports a task imported on A: the scheduler names A as parent and B asks A's
 * DfdaemonUpload for the pieces, all over mutual TLS. */
static void test_export_of_a_remote_task(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], out[600];
    import_on(A, 6 * MiB + 17, 31, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-b-31", cl.dir);
    assert_int_equal(export_on(B, id, out), 0);
    assert_true(harness_same_file(src, out));
    assert_true(harness_log_has(&B->h, "p2p.download_done"));
}

struct replica_probe {
    const char *id;
};

static bool placed_on_b(void *arg) {
    const struct replica_probe *p = arg;
    char path[600];
    p2p_content_path(B, p->id, path, sizeof(path));
    bool yes = access(path, F_OK) == 0;
    if (!yes) {
        usleep(50000);
    }
    return yes;
}

/* The scheduler places a persistent replica on B: its pull (DownloadPersistentCacheTask on B's
 * DfdaemonUpload) goes over mutual TLS and B takes it as the scheduler's. */
static void test_persistent_replica_placed(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], path[600];
    import_on(A, 5 * MiB, 32, 2, src, sizeof(src), id);
    struct replica_probe p = {id};
    assert_true(test_wait_for(placed_on_b, &p, REPLICA_BOUND_MS));
    p2p_content_path(B, id, path, sizeof(path));
    double until = test_now_ms() + REPLICA_BOUND_MS;
    while (!harness_same_file(src, path) && test_now_ms() < until) {
        usleep(50000);
    }
    assert_true(harness_same_file(src, path));
}

/* SyncHost on A's TCP port with the given client options: the RPC's result. */
static int sync_host(const struct dfc_rpc_client_opts *o, struct dfc_error *err) {
    struct dfc_rpc_client *c;
    int r = dfc_rpc_client_new(A->upload_target, o, &c, err);
    if (r < 0) {
        return r;
    }
    struct dfc_rpc_stream *st = NULL;
    r = dfc_rpc_stream_open(c, &sync_host_m, 5000, &st, err);
    Dfdaemon__V2__SyncHostRequest req = DFDAEMON__V2__SYNC_HOST_REQUEST__INIT;
    req.host_id = "test";
    req.peer_id = "test";
    if (r == 0) {
        r = dfc_rpc_stream_send(st, &req.base, err);
    }
    ProtobufCMessage *m = NULL;
    if (r == 0) {
        r = dfc_rpc_stream_recv(st, sync_host_m.resp, &m, err);
    }
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    return r;
}

static bool refused_logged(void *arg) {
    (void)arg;
    return harness_log_has(&A->h, "event=rpc.tls_handshake_refused server=dfdaemon-upload "
                                  "peer=127.0.0.1:");
}

/* A node's port serves a client with a certificate from the cluster's CA, and nothing to a
 * plaintext client or one from another CA (the node logs the refused peer). */
static void test_strangers_are_refused(void **state) {
    REQUIRE_CLUSTER();
    struct dfc_error err;
    char ca[300], cert[300], key[300];
    snprintf(ca, sizeof(ca), "%s/scheduler/ca.crt", cl.dir);
    snprintf(cert, sizeof(cert), "%s/scheduler/tls.crt", cl.dir);
    snprintf(key, sizeof(key), "%s/scheduler/tls.key", cl.dir);
    struct dfc_rpc_client_opts member = {.tls = DFC_TLS_MUTUAL, .tls_files = {ca, cert, key}};
    assert_int_equal(sync_host(&member, &err), 1);

    struct dfc_rpc_client_opts plain = {0};
    assert_true(sync_host(&plain, &err) < 0);

    char cert2[300], key2[300];
    snprintf(cert2, sizeof(cert2), "%s/stranger/tls.crt", cl.dir);
    snprintf(key2, sizeof(key2), "%s/stranger/tls.key", cl.dir);
    struct dfc_rpc_client_opts stranger = {.tls = DFC_TLS_MUTUAL, .tls_files = {ca, cert2, key2}};
    assert_true(sync_host(&stranger, &err) < 0);
    assert_true(test_wait_for(refused_logged, NULL, 5000));
}

/* DeletePersistentCacheTask on A's TCP port from a client with dir/<name>'s certificate: the
 * gRPC code, the message in err. */
static int tcp_delete_as(const char *name, const char *id, struct dfc_error *err) {
    char ca[300], cert[300], key[300];
    snprintf(ca, sizeof(ca), "%s/%s/ca.crt", cl.dir, name);
    snprintf(cert, sizeof(cert), "%s/%s/tls.crt", cl.dir, name);
    snprintf(key, sizeof(key), "%s/%s/tls.key", cl.dir, name);
    struct dfc_rpc_client_opts o = {.tls = DFC_TLS_MUTUAL, .tls_files = {ca, cert, key}};
    struct dfc_rpc_client *c;
    int r = dfc_rpc_client_new(A->upload_target, &o, &c, err);
    if (r < 0) {
        return dfc_error_to_grpc(r);
    }
    Dfdaemon__V2__DeletePersistentCacheTaskRequest req =
        DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *resp = NULL;
    r = dfc_rpc_unary(c, &hm.delete_task, &req.base, TIMEOUT_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return dfc_error_to_grpc(r);
}

/* Identity is authority: B's certificate cannot delete A's copy although B's call comes from
 * 127.0.0.1, the scheduler's address (every loopback connection does); the scheduler's
 * certificate can. */
static void test_delete_only_with_the_schedulers_certificate(void **state) {
    REQUIRE_CLUSTER();
    char src[512], id[65], path[600];
    import_on(A, 1 * MiB, 33, 1, src, sizeof(src), id);
    p2p_content_path(A, id, path, sizeof(path));
    struct dfc_error err;
    assert_int_equal(tcp_delete_as("b", id, &err), DFC_GRPC_PERMISSION_DENIED);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "with a certificate naming 127.0.0.32"));
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(tcp_delete_as("scheduler", id, &err), DFC_GRPC_OK);
    assert_int_not_equal(access(path, F_OK), 0);

    /* the chart's scheduler certificate: no IP, the role in its URI */
    import_on(A, 1 * MiB, 34, 1, src, sizeof(src), id);
    p2p_content_path(A, id, path, sizeof(path));
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(tcp_delete_as("sched-uri", id, &err), DFC_GRPC_OK);
    assert_int_not_equal(access(path, F_OK), 0);
}

/* A client of the scheduler with dir/<name>'s certificate. */
static struct dfc_rpc_client *sched_client_as(const char *name) {
    static char paths[3][300];
    snprintf(paths[0], sizeof(paths[0]), "%s/%s/ca.crt", cl.dir, name);
    snprintf(paths[1], sizeof(paths[1]), "%s/%s/tls.crt", cl.dir, name);
    snprintf(paths[2], sizeof(paths[2]), "%s/%s/tls.key", cl.dir, name);
    struct dfc_rpc_client_opts o = {.tls = DFC_TLS_MUTUAL,
                                    .tls_files = {paths[0], paths[1], paths[2]}};
    struct dfc_rpc_client *c;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(cl.sched.target, &o, &c, &err), 0);
    return c;
}

/* Identity is authority at the scheduler: B's certificate may not announce a host at A's
 * address, re-announce A's host id with its own address, nor delete A's host; A's own
 * certificate may re-announce it. */
static void test_host_only_by_its_identity(void **state) {
    REQUIRE_CLUSTER();
    struct dfc_error err;
    struct dfc_rpc_client *b = sched_client_as("b");
    Scheduler__V2__ListHostsRequest lreq = SCHEDULER__V2__LIST_HOSTS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(dfc_rpc_unary(b, &list_hosts_m, &lreq.base, TIMEOUT_MS, &resp, &err), 0);
    const Scheduler__V2__ListHostsResponse *list = (const void *)resp;
    Common__V2__Host *ha = NULL;
    for (size_t i = 0; i < list->n_hosts; i++) {
        if (strcmp(list->hosts[i]->id, A->host_id) == 0) {
            ha = list->hosts[i];
        }
    }
    if (ha == NULL) {
        fail_msg("the scheduler does not list A's host %s", A->host_id);
        return;
    }

    Scheduler__V2__AnnounceHostRequest areq = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    areq.host = ha;
    ProtobufCMessage *empty = NULL;
    assert_int_equal(dfc_rpc_unary(b, &announce_m, &areq.base, TIMEOUT_MS, &empty, &err), -EACCES);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "a certificate naming 127.0.0.32 may not announce host"));

    char *a_ip = ha->ip;
    ha->ip = B->ip; /* A's id with B's own address: a take-over */
    assert_int_equal(dfc_rpc_unary(b, &announce_m, &areq.base, TIMEOUT_MS, &empty, &err), -EACCES);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "may not take over host"));
    ha->ip = a_ip;

    Scheduler__V2__DeleteHostRequest dreq = SCHEDULER__V2__DELETE_HOST_REQUEST__INIT;
    dreq.host_id = A->host_id;
    assert_int_equal(dfc_rpc_unary(b, &delete_host_m, &dreq.base, TIMEOUT_MS, &empty, &err),
                     -EACCES);
    assert_true(p2p_host_announced(&cl.redis, A->host_id));

    struct dfc_rpc_client *a = sched_client_as("a");
    assert_int_equal(dfc_rpc_unary(a, &announce_m, &areq.base, TIMEOUT_MS, &empty, &err), 0);
    dfc_rpc_msg_free(empty);
    dfc_rpc_client_free(a);
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(b);
}

/* The chart's shared node certificate (no IP): C registers with it, serves A as a parent and
 * downloads from A, every dial verifying the name dfc-node; it may not take over A's host. */
static void test_shared_node_certificate(void **state) {
    REQUIRE_CLUSTER();
    char d[300], src[512], id[65], out[600];
    snprintf(d, sizeof(d), "%s/shared", cl.dir);
    p2p_node_start_tls(C, "127.0.0.33", "node-tls-c", cl.sched.target, &cl.redis, d, NODE_NAME);
    assert_true(p2p_host_announced(&cl.redis, C->host_id));

    import_on(C, 3 * MiB + 5, 35, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-a-35", cl.dir);
    assert_int_equal(export_on(A, id, out), 0);
    assert_true(harness_same_file(src, out));

    import_on(A, 2 * MiB + 3, 36, 1, src, sizeof(src), id);
    snprintf(out, sizeof(out), "%s/out-c-36", cl.dir);
    assert_int_equal(export_on(C, id, out), 0);
    assert_true(harness_same_file(src, out));

    /* A's host id with C's address: the shared role never moves a host */
    struct dfc_rpc_client *c = sched_client_as("shared");
    Scheduler__V2__ListHostsRequest lreq = SCHEDULER__V2__LIST_HOSTS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL, *empty = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(c, &list_hosts_m, &lreq.base, TIMEOUT_MS, &resp, &err), 0);
    const Scheduler__V2__ListHostsResponse *list = (const void *)resp;
    Common__V2__Host *ha = NULL;
    for (size_t i = 0; i < list->n_hosts; i++) {
        if (strcmp(list->hosts[i]->id, A->host_id) == 0) {
            ha = list->hosts[i];
        }
    }
    if (ha == NULL) {
        fail_msg("the scheduler does not list A's host %s", A->host_id);
        return;
    }
    Scheduler__V2__AnnounceHostRequest areq = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    areq.host = ha;
    char *a_ip = ha->ip;
    ha->ip = C->ip;
    assert_int_equal(dfc_rpc_unary(c, &announce_m, &areq.base, TIMEOUT_MS, &empty, &err), -EACCES);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "shared node certificate may not take over host"));
    ha->ip = a_ip;
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
}

int main(void) {
    if (harness_resolve_methods(client_methods, DFC_RPC_N(client_methods)) < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered_over_tls),
        cmocka_unit_test(test_export_of_a_remote_task),
        cmocka_unit_test(test_persistent_replica_placed),
        cmocka_unit_test(test_strangers_are_refused),
        cmocka_unit_test(test_delete_only_with_the_schedulers_certificate),
        cmocka_unit_test(test_host_only_by_its_identity),
        cmocka_unit_test(test_shared_node_certificate),
    };
    return test_run_group(tests, cluster_up, cluster_down);
}
