/*
 * Integration tests of dfc.dfdaemon.v1.DfdaemonInspect (daemon/rpc_inspect.c) against a real
 * dfdaemon process: bad input (an empty, short, long, upper-case, non-hex or oversized task id
 * is INVALID_ARGUMENT naming task_id), an unknown id (NOT_FOUND standalone; the scheduler's
 * UNAVAILABLE when the configured scheduler cannot be reached), and what the answer says about
 * where it came from (has_scheduler, scheduler_answered, scheduler_error, local) for a stored
 * task, standalone and with an unreachable scheduler. test_p2p.c has the answer of a scheduler
 * that answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/error.h"
#include "dfc/inspect.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "test_support.h"

static struct dfc_rpc_client_method inspect_m;
static const struct dfc_rpc_client_row rows[] = {
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_inspect, "InspectPersistentCacheTask",
                          &inspect_m),
};

/* The scheduler port: it refuses connections while the fixture runs (test_refusing_port). */
static int refusing_fd = -1;

/* Peer to peer with one scheduler address that refuses connections. */
static void write_unreachable(FILE *fp, const struct harness *h, void *arg) {
    fprintf(fp,
            "download:\n  server:\n    socketPath: %s\n"
            "storage:\n  dir: %s\n  server:\n    tcpPort: %d\n"
            "upload:\n  server:\n    port: %d\n"
            "host:\n  ip: 127.0.0.1\n  hostname: dfc-inspect-it\n"
            "scheduler:\n  addrs: [127.0.0.1:%u]\n  announceInterval: 1h\n"
            "gc:\n  interval: 1h\n",
            h->socket, h->store, (int)test_free_port(), (int)test_free_port(),
            *(const unsigned *)arg);
}

static int setup_unreachable(void **state) {
    struct harness_fx *f = calloc(1, sizeof(*f));
    unsigned port = test_refusing_port(&refusing_fd);
    harness_start_config(&f->h, write_unreachable, &port);
    f->c = harness_client(&f->h);
    *state = f;
    return 0;
}

static int teardown_unreachable(void **state) {
    int r = harness_fx_teardown(state);
    close(refusing_fd);
    refusing_fd = -1;
    return r;
}

/* InspectPersistentCacheTask of id: 0 with *ret (free it), else the gRPC code, err set. */
static int inspect(struct harness_fx *f, const char *id, ProtobufCMessage **ret,
                   struct dfc_error *err) {
    Dfc__Dfdaemon__V1__InspectPersistentCacheTaskRequest req =
        DFC__DFDAEMON__V1__INSPECT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    *ret = NULL;
    int r = dfc_rpc_unary(f->c, &inspect_m, &req.base, 20000, ret, err);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* The gRPC code of an inspect of id that must fail; its message in err. */
static int inspect_fails(struct harness_fx *f, const char *id, struct dfc_error *err) {
    ProtobufCMessage *m = NULL;
    int code = inspect(f, id, &m, err);
    assert_null(m);
    return code;
}

/* Imports a len-byte file with dfcache; the task id into id. */
static void import(struct harness_fx *f, size_t len, unsigned seed, char id[65]) {
    char src[400];
    snprintf(src, sizeof(src), "%s/src-%u.bin", f->h.dir, seed);
    harness_write_file(src, len, seed);
    assert_int_equal(
        harness_dfcache(&f->h, -1, f->out, sizeof(f->out), f->err, sizeof(f->err),
                        (const char *const[]){"import", "--no-progress", "--ttl", "1h", src, NULL}),
        0);
    const char *p = strstr(f->out, "Done: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "Done: %64s", id), 1);
}

/* Every malformed id is INVALID_ARGUMENT naming task_id. */
static void bad_ids(struct harness_fx *f) {
    struct dfc_error err;
    assert_int_equal(inspect_fails(f, "", &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_string_equal(err.msg, "task_id is required");

    char id[200];
    memset(id, 'a', 63);
    id[63] = '\0';
    const char *prefix = "task_id must be 64 lowercase hex characters (a SHA-256), got `";
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* 63 */
    assert_non_null(strstr(err.msg, prefix));
    memset(id, 'a', 65);
    id[65] = '\0';
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* 65 */
    assert_non_null(strstr(err.msg, prefix));
    memset(id, 'A', 64);
    id[64] = '\0';
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* upper case */
    assert_non_null(strstr(err.msg, prefix));
    memset(id, 'a', 64);
    id[10] = 'g';
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* not hex */
    assert_non_null(strstr(err.msg, prefix));
    memcpy(id, "../../../../etc/passwd", 22);
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* a path */
    assert_non_null(strstr(err.msg, prefix));
    memset(id, 'a', 64);
    id[64] = '\n';
    id[65] = '\0';
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_INVALID_ARGUMENT); /* trailing LF */

    /* 256 KiB: refused by the field check, and the message quotes a bounded prefix only. */
    size_t big_len = (size_t)256 << 10;
    char *big = malloc(big_len + 1);
    assert_non_null(big);
    memset(big, 'f', big_len);
    big[big_len] = '\0';
    assert_int_equal(inspect_fails(f, big, &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, prefix));
    assert_true(strlen(err.msg) < strlen(prefix) + 100);
    free(big);
}

static void test_bad_ids_standalone(void **state) {
    struct harness_fx *f = *state;
    bad_ids(f);
}

static void test_unknown_id_not_found_standalone(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_NOT_FOUND);
    char want[200];
    snprintf(want, sizeof(want), "persistent cache task %s not found", id);
    assert_string_equal(err.msg, want);
}

static void test_stored_task_standalone(void **state) {
    struct harness_fx *f = *state;
    char id[65];
    import(f, 5000, 1, id);
    ProtobufCMessage *m = NULL;
    struct dfc_error err;
    assert_int_equal(inspect(f, id, &m, &err), 0);
    Dfc__Dfdaemon__V1__InspectPersistentCacheTaskResponse *resp = (void *)m;
    assert_false(resp->has_scheduler);
    assert_false(resp->scheduler_answered);
    assert_string_equal(resp->scheduler_error, "");
    assert_non_null(resp->task);
    assert_string_equal(resp->task->id, id);
    assert_int_equal(resp->task->content_length, 5000);
    assert_non_null(resp->local);
    dfc_rpc_msg_free(m);
}

static void test_bad_ids_with_scheduler(void **state) {
    struct harness_fx *f = *state;
    bad_ids(f); /* checked before the scheduler is asked */
}

static void test_unknown_id_scheduler_unreachable(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    /* Neither here nor answerable: the scheduler's code, not a made-up NOT_FOUND. */
    assert_int_equal(inspect_fails(f, id, &err), DFC_GRPC_UNAVAILABLE);
}

static void test_stored_task_scheduler_unreachable(void **state) {
    struct harness_fx *f = *state;
    char id[65];
    import(f, 7000, 2, id);
    ProtobufCMessage *m = NULL;
    struct dfc_error err;
    assert_int_equal(inspect(f, id, &m, &err), 0);
    Dfc__Dfdaemon__V1__InspectPersistentCacheTaskResponse *resp = (void *)m;
    assert_true(resp->has_scheduler);
    assert_false(resp->scheduler_answered);
    assert_true(resp->scheduler_error != NULL && resp->scheduler_error[0] != '\0');
    assert_non_null(resp->task);
    assert_string_equal(resp->task->id, id); /* this node's copy */
    assert_int_equal(resp->task->content_length, 7000);
    assert_non_null(resp->local);
    dfc_rpc_msg_free(m);
}

int main(void) {
    if (harness_resolve_methods(rows, DFC_RPC_N(rows)) < 0) {
        return 1;
    }
#define T(fn)  cmocka_unit_test_setup_teardown(fn, harness_fx_setup, harness_fx_teardown)
#define TU(fn) cmocka_unit_test_setup_teardown(fn, setup_unreachable, teardown_unreachable)
    const struct CMUnitTest tests[] = {
        T(test_bad_ids_standalone),
        T(test_unknown_id_not_found_standalone),
        T(test_stored_task_standalone),
        TU(test_bad_ids_with_scheduler),
        TU(test_unknown_id_scheduler_unreachable),
        TU(test_stored_task_scheduler_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
