/*
 * Tests for csi/node.c failure paths with fake mount operations (no root needed): a real
 * csi.v1 server on a temp socket, real directories, and a mount table that the test controls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csi/csi.pb-c.h"
#include "dfc/rpc_client.h"
#include "driver.h"
#include "test_support.h"

/* ---- the fake mount table: one target, a stack depth, and injected failures ---- */

/* Atomics: the handlers run on the server's threads, ordered after the test's writes only
 * through gRPC, which ThreadSanitizer cannot see into. */
static _Atomic unsigned fake_count;
static _Atomic int fake_bind_error, fake_unmount_error, fake_state_error;
static _Atomic unsigned binds, unmounts;

static int fake_bind(const char *source, int target_fd, bool ro) {
    binds++;
    if (fake_bind_error) {
        return fake_bind_error;
    }
    fake_count++;
    return 0;
}

static int fake_unmount(int target_fd) {
    unmounts++;
    if (fake_unmount_error) {
        return fake_unmount_error;
    }
    fake_count--;
    return 0;
}

static int fake_state(int parent_fd, int target_fd, struct csi_mount_state *ret) {
    if (fake_state_error) {
        return fake_state_error;
    }
    ret->count = fake_count;
    ret->read_only = true;
    return 0;
}

static int fake_bind_content(const char *source, int target_fd) {
    return fake_bind(source, target_fd, true);
}

static const struct csi_mount_ops fake_ops = {fake_bind, fake_unmount, fake_state,
                                              fake_bind_content};

struct fx {
    char dir[256], sock[320], run[320], kubelet[320], pod[400], target[420], state[320];
    struct csi_driver d;
    struct dfc_rpc_server *server;
    struct dfc_rpc_client *client;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    struct dfc_error err;
    fake_count = binds = unmounts = 0;
    fake_bind_error = fake_unmount_error = fake_state_error = 0;
    test_mkdtemp(f->dir, sizeof(f->dir), "csi-driver");
    snprintf(f->sock, sizeof(f->sock), "%s/csi.sock", f->dir);
    snprintf(f->run, sizeof(f->run), "%s/run", f->dir);
    snprintf(f->kubelet, sizeof(f->kubelet), "%s/kubelet", f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
    snprintf(f->pod, sizeof(f->pod), "%s/pod", f->kubelet);
    snprintf(f->target, sizeof(f->target), "%s/mount", f->pod);
    mkdir(f->run, 0755);
    mkdir(f->kubelet, 0755);
    mkdir(f->pod, 0755);
    struct csi_config cfg = {.driver_name = CSI_DEFAULT_DRIVER_NAME,
                             .version = "test",
                             .node_id = "n",
                             .socket_dir = f->run,
                             .kubelet_dir = f->kubelet,
                             .state_dir = f->state};
    assert_int_equal(csi_driver_init(&f->d, &cfg, &fake_ops, &err), 0);
    assert_int_equal(dfc_rpc_server_new(NULL, &f->server, &err), 0);
    assert_int_equal(csi_driver_register(&f->d, f->server, &err), 0);
    assert_int_equal(dfc_rpc_server_listen_unix(f->server, f->sock, 0600, -1, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    char target[340];
    snprintf(target, sizeof(target), "unix:%s", f->sock);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &f->client, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_rpc_client_free(f->client);
    dfc_rpc_server_free(f->server);
    csi_driver_done(&f->d);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

/* The methods the tests call, resolved in main() before any test runs. */
static struct dfc_rpc_client_method publish_m, unpublish_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodePublishVolume", &publish_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeUnpublishVolume", &unpublish_m),
};

static int publish(struct fx *f, struct dfc_error *err) {
    Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
    Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
    Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
    mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
    cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
    cap.mount = &mount;
    cap.access_mode = &mode;
    r.volume_id = "v";
    r.target_path = f->target;
    r.volume_capability = &cap;
    r.readonly = 1;
    ProtobufCMessage *m = NULL;
    int rc = dfc_rpc_unary(f->client, &publish_m, &r.base, 5000, &m, err);
    dfc_rpc_msg_free(m);
    return rc < 0 ? dfc_error_to_grpc(rc) : 0;
}

static int unpublish(struct fx *f, struct dfc_error *err) {
    Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
    r.volume_id = "v";
    r.target_path = f->target;
    ProtobufCMessage *m = NULL;
    int rc = dfc_rpc_unary(f->client, &unpublish_m, &r.base, 5000, &m, err);
    dfc_rpc_msg_free(m);
    return rc < 0 ? dfc_error_to_grpc(rc) : 0;
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_failed_bind_leaves_nothing(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    fake_bind_error = -EIO;
    assert_int_equal(publish(f, &err), 13);
    assert_non_null(strstr(err.msg, "bind-mount"));
    assert_int_equal(fake_count, 0);
    assert_false(exists(f->target)); /* the directory it made is gone again */
    /* A target that was there before is not ours to remove. */
    mkdir(f->target, 0750);
    assert_int_equal(publish(f, &err), 13);
    assert_true(exists(f->target));
}

static void test_mount_table_errors_are_internal(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    fake_state_error = -EIO;
    assert_int_equal(publish(f, &err), 13);
    assert_int_equal(binds, 0); /* never mounts blind */
    assert_int_equal(unpublish(f, &err), 13);
}

static void test_something_else_mounted_is_already_exists(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    mkdir(f->target, 0750);
    fake_count = 1; /* mounted, but the target is not the socket directory */
    assert_int_equal(publish(f, &err), 6);
    assert_non_null(strstr(err.msg, "mount of something else"));
    assert_int_equal(binds, 0);
}

static void test_unpublish_unstacks_and_reports_failures(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    mkdir(f->target, 0750);
    fake_count = 5;
    assert_int_equal(unpublish(f, &err), 0);
    assert_int_equal(unmounts, 5);
    assert_int_equal(fake_count, 0);
    assert_false(exists(f->target));
    /* An unmount that fails is INTERNAL and the target stays for the retry. */
    mkdir(f->target, 0750);
    fake_count = 1;
    fake_unmount_error = -EBUSY;
    assert_int_equal(unpublish(f, &err), 13);
    assert_true(exists(f->target));
}

static void test_unpublish_leaves_a_foreign_file_but_succeeds(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    mkdir(f->target, 0750);
    char file[500];
    snprintf(file, sizeof(file), "%s/not-ours", f->target);
    FILE *fp = fopen(file, "w");
    fclose(fp);
    assert_int_equal(unpublish(f, &err), 0); /* never keep a pod Terminating over it */
    assert_true(exists(file));
}

static void test_missing_socket_dir_is_failed_precondition(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    rmdir(f->run);
    assert_int_equal(publish(f, &err), 9);
    assert_non_null(strstr(err.msg, "does not exist on this node"));
    assert_false(exists(f->target));
}

static void test_ids_and_names(void **state) {
    char id[CSI_VOLUME_ID_LEN + 1], id2[CSI_VOLUME_ID_LEN + 1];
    csi_volume_id("pvc-1", id);
    csi_volume_id("pvc-1", id2);
    assert_string_equal(id, id2);
    assert_int_equal(strlen(id), CSI_VOLUME_ID_LEN);
    assert_true(csi_volume_id_valid(id));
    id[10] = id[10] == 'a' ? 'b' : 'a'; /* one changed digit fails the check */
    assert_false(csi_volume_id_valid(id));
    assert_false(csi_volume_id_valid("some-id"));
    assert_true(csi_valid_driver_name("uds.csi.dragonflyoss.io"));
    assert_false(csi_valid_driver_name("1abc"));
    assert_false(csi_valid_driver_name("abc-"));
    assert_false(csi_valid_driver_name("a/b"));
    assert_false(csi_valid_driver_name(""));
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_failed_bind_leaves_nothing),
        T(test_mount_table_errors_are_internal),
        T(test_something_else_mounted_is_already_exists),
        T(test_unpublish_unstacks_and_reports_failures),
        T(test_unpublish_leaves_a_foreign_file_but_succeeds),
        T(test_missing_socket_dir_is_failed_precondition),
        cmocka_unit_test(test_ids_and_names),
    };
    struct dfc_error err;
    if (dfc_rpc_client_resolve(client_methods, DFC_RPC_N(client_methods), &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
