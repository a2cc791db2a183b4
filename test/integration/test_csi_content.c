/*
 * CSI content volume integration tests: a real csi-plugin and a real dfdaemon, tasks imported
 * with dfcache, real read-only bind mounts, inside the private mount namespace ctest starts the
 * test in (root only; skipped otherwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csi/csi.pb-c.h"
#include "daemon_harness.h"
#include "dfc/rpc_client.h"
#include "dfc/volume.pb-c.h"
#include "mount.h"
#include "test_support.h"

static bool is_root;

static struct dfc_rpc_client_method node_publish_m, node_unpublish_m, create_volume_m, list_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodePublishVolume", &node_publish_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeUnpublishVolume", &node_unpublish_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__controller, "CreateVolume", &create_volume_m),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "ListContentVolumes", &list_m),
};

struct fx {
    struct harness h;
    char out[16384], err[8192]; /* DFCACHE() */
    char kubelet[400], pod[500], target[600], csi_sock[400], state[400], csi_log[400];
    char file_a[400], file_b[400];
    char id_a[65], id_b[65];
    pid_t csi_pid;
    struct dfc_rpc_client *c, *daemon;
};

#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (!is_root) {                                                                            \
            test_skip("needs root: mounts, and the plugin as root");                               \
        }                                                                                          \
    } while (0)

static void start_csi(struct fx *f, const char *extra_flag) {
    char ep[420], sock_flag[400], run[400];
    snprintf(ep, sizeof(ep), "unix://%s", f->csi_sock);
    snprintf(run, sizeof(run), "%s/run", f->h.dir); /* the socket volume's directory */
    snprintf(sock_flag, sizeof(sock_flag), "--dfdaemon-socket=%s", f->h.socket);
    unlink(f->csi_sock);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(f->csi_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        execl(CSI_PLUGIN_BIN, "csi-plugin", "--endpoint", ep, "--socket-dir", run, "--kubelet-dir",
              f->kubelet, "--state-dir", f->state, "--node-id", "node-a",
              "--content-fetch-timeout=2s", "--log-level=debug", sock_flag, extra_flag,
              (char *)NULL);
        _exit(127);
    }
    f->csi_pid = pid;
    double until = test_now_ms() + 10000;
    struct stat st;
    while (stat(f->csi_sock, &st) < 0 && test_now_ms() < until) {
        usleep(5000);
    }
    assert_int_equal(stat(f->csi_sock, &st), 0);
}

static void stop_csi(struct fx *f) {
    kill(f->csi_pid, SIGTERM);
    int status;
    waitpid(f->csi_pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    f->csi_pid = 0;
}

static int setup_with(void **state, const char *flag) {
    if (!is_root) {
        return 0;
    }
    struct fx *f = calloc(1, sizeof(*f));
    harness_start(&f->h, NULL);
    snprintf(f->kubelet, sizeof(f->kubelet), "%s/kubelet", f->h.dir);
    snprintf(f->pod, sizeof(f->pod), "%s/pods/0b1c/volumes/kubernetes.io~csi/model", f->kubelet);
    snprintf(f->target, sizeof(f->target), "%s/mount", f->pod);
    snprintf(f->csi_sock, sizeof(f->csi_sock), "%s/plugins/csi.sock", f->h.dir);
    snprintf(f->state, sizeof(f->state), "%s/csi-state", f->h.dir);
    snprintf(f->csi_log, sizeof(f->csi_log), "%s/csi.log", f->h.dir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s/plugins'", f->pod, f->h.dir);
    assert_int_equal(system(cmd), 0);
    /* Two tasks: a model's config and its weights. */
    harness_path(&f->h, "config.json", f->file_a, sizeof(f->file_a));
    harness_path(&f->h, "weights.bin", f->file_b, sizeof(f->file_b));
    harness_write_file(f->file_a, 4096 + 17, 1);
    harness_write_file(f->file_b, (5 << 20) + 3, 2);
    assert_int_equal(DFCACHE(f, "import", f->file_a), 0);
    harness_done_id(f->out, f->id_a);
    assert_int_equal(DFCACHE(f, "import", f->file_b), 0);
    harness_done_id(f->out, f->id_b);
    start_csi(f, flag);
    char target[420];
    snprintf(target, sizeof(target), "unix:%s", f->csi_sock);
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(target, NULL, &f->c, &err), 0);
    f->daemon = harness_client(&f->h);
    *state = f;
    return 0;
}

static int setup(void **state) {
    return setup_with(state, "--shutdown-grace=2s");
}

static int setup_allow(void **state) {
    return setup_with(state, "--content-allow=models/*,team-*/model-server");
}

static int teardown(void **state) {
    struct fx *f = *state;
    if (f == NULL) {
        return 0;
    }
    dfc_rpc_client_free(f->c);
    dfc_rpc_client_free(f->daemon);
    if (f->csi_pid > 0) {
        stop_csi(f);
    }
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "umount -R '%s' 2>/dev/null", f->kubelet);
    (void)system(cmd);
    assert_int_equal(harness_destroy(&f->h), 0);
    free(f);
    return 0;
}

/* ---- calls ---- */

static int grpc(int r) {
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

typedef Csi__V1__NodePublishVolumeRequest__VolumeContextEntry ctx_entry;

/* NodePublishVolume with the context pairs kv (key, value, ..., NULL). */
static int publish_ctx(struct fx *f, const char *volume_id, const char *target, bool readonly,
                       struct dfc_error *err, const char *const *kv) {
    Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
    Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
    Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
    mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
    cap.access_mode = &mode;
    cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
    cap.mount = &mount;
    ctx_entry entries[16], *ptrs[16];
    size_t n = 0;
    for (; kv[2 * n] != NULL && n < 16; n++) {
        csi__v1__node_publish_volume_request__volume_context_entry__init(&entries[n]);
        entries[n].key = (char *)kv[2 * n];
        entries[n].value = (char *)kv[2 * n + 1];
        ptrs[n] = &entries[n];
    }
    r.volume_id = (char *)volume_id;
    r.target_path = (char *)target;
    r.volume_capability = &cap;
    r.readonly = readonly;
    r.volume_context = ptrs;
    r.n_volume_context = n;
    ProtobufCMessage *resp = NULL;
    int rc = dfc_rpc_unary(f->c, &node_publish_m, &r.base, 30000, &resp, err);
    dfc_rpc_msg_free(resp);
    return grpc(rc);
}

#define PUBLISH(f, vol, target, err, ...)                                                          \
    publish_ctx(f, vol, target, false, err, (const char *const[]){__VA_ARGS__, NULL})

static int unpublish(struct fx *f, const char *volume_id, const char *target,
                     struct dfc_error *err) {
    Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
    r.volume_id = (char *)volume_id;
    r.target_path = (char *)target;
    ProtobufCMessage *resp = NULL;
    int rc = dfc_rpc_unary(f->c, &node_unpublish_m, &r.base, 30000, &resp, err);
    dfc_rpc_msg_free(resp);
    return grpc(rc);
}

/* dfdaemon's pins. */
static size_t pins(struct fx *f) {
    Dfc__Dfdaemon__V1__ListContentVolumesRequest req =
        DFC__DFDAEMON__V1__LIST_CONTENT_VOLUMES_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(f->daemon, &list_m, &req.base, 10000, &resp, &err), 0);
    size_t n = ((Dfc__Dfdaemon__V1__ListContentVolumesResponse *)resp)->n_volumes;
    dfc_rpc_msg_free(resp);
    return n;
}

static unsigned mounts_on(const char *path) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    assert_non_null(f);
    struct csi_mount_state ms;
    assert_int_equal(csi_mountinfo_scan(f, path, &ms), 0);
    fclose(f);
    return ms.count;
}

/* Another pod's target path (its parent made, as kubelet makes it) into buf. */
static void other_target(struct fx *f, const char *pod_uid, char *buf, size_t size) {
    char cmd[800];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/pods/%s/volumes/kubernetes.io~csi/m'", f->kubelet,
             pod_uid);
    assert_int_equal(system(cmd), 0);
    snprintf(buf, size, "%s/pods/%s/volumes/kubernetes.io~csi/m/mount", f->kubelet, pod_uid);
}

static bool same_bytes(const char *a, const char *b) {
    char cmd[2 * PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* The store's file with a given inode, outside any pin directory: found by walking the store. */
static struct stat want_inode;
static char *not_below;
static int found_in_store;

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    if (flag == FTW_F && st->st_dev == want_inode.st_dev && st->st_ino == want_inode.st_ino &&
        (not_below == NULL || strstr(path, not_below) == NULL)) {
        found_in_store++;
    }
    return 0;
}

static int store_links_to(struct fx *f, const char *file, char *pin_dir) {
    assert_int_equal(stat(file, &want_inode), 0);
    not_below = pin_dir;
    found_in_store = 0;
    assert_int_equal(nftw(f->h.store, visit, 16, FTW_PHYS), 0);
    return found_in_store;
}

struct log_want {
    const char *path, *a, *b; /* a line holding both */
};

static bool logged(void *arg) {
    const struct log_want *w = arg;
    FILE *f = fopen(w->path, "re");
    char line[4096];
    bool yes = false;
    while (f != NULL && !yes && fgets(line, sizeof(line), f) != NULL) {
        yes = strstr(line, w->a) != NULL && strstr(line, w->b) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return yes;
}

/* ---- tests ---- */

static void test_two_files_published_read_only_without_copy(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    char files[300];
    snprintf(files, sizeof(files), "config.json=%s, weights.bin=%s", f->id_a, f->id_b);
    assert_int_equal(PUBLISH(f, "vol-1", f->target, &err, "files", files,
                             "csi.storage.k8s.io/ephemeral", "true",
                             "csi.storage.k8s.io/pod.namespace", "models"),
                     0);
    /* Idempotent: the same call again leaves one mount. */
    assert_int_equal(PUBLISH(f, "vol-1", f->target, &err, "files", files,
                             "csi.storage.k8s.io/pod.namespace", "models"),
                     0);
    assert_int_equal(mounts_on(f->target), 1);
    assert_int_equal(pins(f), 1);
    char a[700], b[700];
    snprintf(a, sizeof(a), "%s/config.json", f->target);
    snprintf(b, sizeof(b), "%s/weights.bin", f->target);
    assert_true(same_bytes(a, f->file_a));
    assert_true(same_bytes(b, f->file_b));
    /* No copy: the pod's file is an inode the store holds elsewhere too. */
    assert_true(store_links_to(f, b, NULL) >= 1);
    struct stat st;
    assert_int_equal(stat(b, &st), 0);
    assert_true(st.st_nlink >= 2);
    /* Read-only even though the pod did not ask (readonly false): as root too. */
    errno = 0;
    assert_int_equal(open(b, O_WRONLY), -1);
    assert_int_equal(errno, EROFS);
    char created[700];
    snprintf(created, sizeof(created), "%s/new", f->target);
    assert_int_equal(open(created, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(unlink(a), -1);
    assert_int_equal(errno, EROFS);
    /* Unpublish twice: the mount, the target dir and the pin go; the second is a no-op. */
    assert_int_equal(unpublish(f, "vol-1", f->target, &err), 0);
    assert_int_equal(mounts_on(f->target), 0);
    assert_int_equal(stat(f->target, &st), -1);
    assert_int_equal(pins(f), 0);
    assert_int_equal(unpublish(f, "vol-1", f->target, &err), 0);
    /* One log line per call, naming the pin (the layer logs after answering: wait for it). */
    struct log_want pub = {f->csi_log, "volume=content", "pin_id=cv-"};
    struct log_want unpub = {f->csi_log, "NodeUnpublishVolume", "pin_id=cv-"};
    assert_true(test_wait_for(logged, &pub, 3000));
    assert_true(test_wait_for(logged, &unpub, 3000));
    /* The content is still in the store, its file intact. */
    assert_int_equal(DFCACHE(f, "stat", f->id_b), 0);
}

static void test_one_task_default_name_and_file_name(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(PUBLISH(f, "vol-2", f->target, &err, "taskID", f->id_a), 0);
    char p[700];
    snprintf(p, sizeof(p), "%s/content", f->target);
    assert_true(same_bytes(p, f->file_a));
    /* A second pod's volume of the same task, named: its own pin, the same inode. */
    char target2[700];
    other_target(f, "2222", target2, sizeof(target2));
    assert_int_equal(
        PUBLISH(f, "vol-2", target2, &err, "taskID", f->id_a, "fileName", "config.json"), 0);
    assert_int_equal(pins(f), 2);
    char q[800];
    snprintf(q, sizeof(q), "%s/config.json", target2);
    struct stat s1, s2;
    assert_int_equal(stat(p, &s1), 0);
    assert_int_equal(stat(q, &s2), 0);
    assert_true(s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino);
    assert_int_equal(unpublish(f, "vol-2", f->target, &err), 0);
    assert_int_equal(pins(f), 1);
    assert_true(same_bytes(q, f->file_a)); /* the other volume is untouched */
    assert_int_equal(unpublish(f, "vol-2", target2, &err), 0);
    assert_int_equal(pins(f), 0);
}

static void test_bad_attributes_refused(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    struct {
        const char *k1, *v1, *k2, *v2, *want;
    } cases[] = {
        {"taskID", "abc", NULL, NULL, "taskID"},
        {"taskID", f->id_a, "fileName", "../x", "fileName"},
        {"taskID", f->id_a, "fileName", "..", "fileName"},
        {"files", "a=xyz", NULL, NULL, "files"},
        {"taskID", f->id_a, "files", "a=xyz", "both given"},
    };
    char dup[300];
    snprintf(dup, sizeof(dup), "a=%s,a=%s", f->id_a, f->id_b);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *kv[] = {cases[i].k1, cases[i].v1, cases[i].k2, cases[i].v2, NULL};
        assert_int_equal(publish_ctx(f, "bad", f->target, true, &err, kv), 3);
        if (strstr(err.msg, cases[i].want) == NULL) {
            fail_msg("case %zu: `%s` lacks `%s`", i, err.msg, cases[i].want);
        }
    }
    assert_int_equal(PUBLISH(f, "bad", f->target, &err, "files", dup), 3);
    assert_non_null(strstr(err.msg, "files: file name `a` is given twice"));
    struct stat st;
    assert_int_equal(stat(f->target, &st), -1); /* nothing made */
    assert_int_equal(pins(f), 0);
    /* A well-formed id of a task the node lacks: no mount, no pin left behind. */
    const char *missing = "00000000000000000000000000000000000000000000000000000000000000aa";
    assert_int_equal(PUBLISH(f, "missing", f->target, &err, "taskID", missing), 5); /* NOT_FOUND */
    /* dfdaemon's message, passed through. */
    assert_non_null(strstr(err.msg, "dfdaemon ("));
    assert_non_null(strstr(err.msg, missing));
    assert_int_equal(mounts_on(f->target), 0);
    assert_int_equal(pins(f), 0);
}

static void test_dfdaemon_down(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_a), 0);
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    /* A content publish is UNAVAILABLE (kubelet retries), naming dfdaemon's socket. */
    char target2[700];
    other_target(f, "4444", target2, sizeof(target2));
    assert_int_equal(PUBLISH(f, "v2", target2, &err, "taskID", f->id_a), 14);
    assert_non_null(strstr(err.msg, f->h.socket));
    struct stat st;
    assert_int_equal(stat(target2, &st), -1); /* the target it made is gone again */
    /* The published volume still reads: the mount holds the store's inodes. */
    char p[700];
    snprintf(p, sizeof(p), "%s/content", f->target);
    assert_true(same_bytes(p, f->file_a));
    /* Its unpublish takes the mount off but cannot release the pin: UNAVAILABLE, retried. */
    assert_int_equal(unpublish(f, "v", f->target, &err), 14);
    assert_int_equal(mounts_on(f->target), 0);
    /* Socket volumes never ask dfdaemon: both calls work while it is down. */
    assert_int_equal(PUBLISH(f, "sock", target2, &err, "csi.storage.k8s.io/ephemeral", "true"), 0);
    assert_int_equal(unpublish(f, "sock", target2, &err), 0);
    /* dfdaemon back: the retried unpublish releases the pin. */
    harness_restart(&f->h);
    assert_int_equal(pins(f), 1);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    assert_int_equal(pins(f), 0);
}

static void test_allow_rules(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_a,
                             "csi.storage.k8s.io/pod.namespace", "default",
                             "csi.storage.k8s.io/serviceAccount.name", "model-server"),
                     7);
    assert_non_null(strstr(err.msg, "namespace `default`"));
    assert_non_null(strstr(err.msg, "--content-allow"));
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_a,
                             "csi.storage.k8s.io/pod.namespace", "team-a",
                             "csi.storage.k8s.io/serviceAccount.name", "default"),
                     7);
    /* No pod identity at all (podInfoOnMount off). */
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_a), 7);
    assert_non_null(strstr(err.msg, "podInfoOnMount"));
    assert_int_equal(pins(f), 0);
    assert_int_equal(mounts_on(f->target), 0);
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_a,
                             "csi.storage.k8s.io/pod.namespace", "team-a",
                             "csi.storage.k8s.io/serviceAccount.name", "model-server"),
                     0);
    assert_int_equal(mounts_on(f->target), 1);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    /* Socket volumes are not subject to the rules. */
    assert_int_equal(
        PUBLISH(f, "sock", f->target, &err, "csi.storage.k8s.io/pod.namespace", "default"), 0);
    assert_int_equal(unpublish(f, "sock", f->target, &err), 0);
}

static void test_stale_pin_released_at_start(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(PUBLISH(f, "v", f->target, &err, "taskID", f->id_b), 0);
    char target2[700];
    other_target(f, "3333", target2, sizeof(target2));
    assert_int_equal(PUBLISH(f, "v", target2, &err, "taskID", f->id_b), 0);
    assert_int_equal(pins(f), 2);
    /* While the plugin is away, the first volume's mount goes (a node reboot, kubelet's own
     * clean-up); the second stays. */
    stop_csi(f);
    assert_int_equal(umount2(f->target, 0), 0);
    start_csi(f, "--shutdown-grace=2s");
    double until = test_now_ms() + 15000;
    while (pins(f) != 1 && test_now_ms() < until) {
        usleep(50000);
    }
    assert_int_equal(pins(f), 1);
    assert_int_equal(mounts_on(target2), 1);
    char p[800];
    snprintf(p, sizeof(p), "%s/content", target2);
    assert_true(same_bytes(p, f->file_b));
    /* The released one's unpublish is still fine; the kept one's releases its pin. */
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    assert_int_equal(unpublish(f, "v", target2, &err), 0);
    assert_int_equal(pins(f), 0);
}

static void test_storage_class_parameters_reach_the_context(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
    Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
    Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
    Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
    mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
    cap.access_mode = &mode;
    cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
    cap.mount = &mount;
    Csi__V1__VolumeCapability *caps[] = {&cap};
    Csi__V1__CreateVolumeRequest__ParametersEntry p1 =
        CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
    Csi__V1__CreateVolumeRequest__ParametersEntry p2 =
        CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
    p1.key = "taskID";
    p1.value = f->id_a;
    p2.key = "fileName";
    p2.value = "model.bin";
    Csi__V1__CreateVolumeRequest__ParametersEntry *params[] = {&p1, &p2};
    r.name = "pvc-1";
    r.volume_capabilities = caps;
    r.n_volume_capabilities = 1;
    r.parameters = params;
    r.n_parameters = 2;
    ProtobufCMessage *resp_ = NULL;
    assert_int_equal(dfc_rpc_unary(f->c, &create_volume_m, &r.base, 10000, &resp_, &err), 0);
    Csi__V1__CreateVolumeResponse *resp = (void *)resp_;
    const char *kv[8] = {NULL};
    size_t n = resp->volume->n_volume_context;
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        kv[2 * i] = resp->volume->volume_context[i]->key;
        kv[2 * i + 1] = resp->volume->volume_context[i]->value;
    }
    /* What external-provisioner hands kubelet: the volume's context, as is. */
    assert_int_equal(publish_ctx(f, resp->volume->volume_id, f->target, true, &err, kv), 0);
    char path[700];
    snprintf(path, sizeof(path), "%s/model.bin", f->target);
    assert_true(same_bytes(path, f->file_a));
    assert_int_equal(unpublish(f, resp->volume->volume_id, f->target, &err), 0);
    dfc_rpc_msg_free(resp_);
    /* Bad parameters are refused at CreateVolume already. */
    p1.value = "nothex";
    r.name = "pvc-2";
    assert_int_equal(grpc(dfc_rpc_unary(f->c, &create_volume_m, &r.base, 10000, &resp_, &err)), 3);
    assert_non_null(strstr(err.msg, "parameters: taskID"));
}

/* True when this process has a mount namespace of its own (private_mount_ns.sh). */
static bool private_mount_ns(void) {
    char self[64] = "", parent[64] = "", path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)getppid());
    if (readlink("/proc/self/ns/mnt", self, sizeof(self) - 1) < 0 ||
        readlink(path, parent, sizeof(parent) - 1) < 0) {
        return false;
    }
    return strcmp(self, parent) != 0;
}

int main(void) {
    is_root = geteuid() == 0;
    if (!is_root) {
        fprintf(stderr, "test_csi_content: needs root for bind mounts; every test skips\n");
    } else if (!private_mount_ns()) {
        fprintf(stderr, "test_csi_content: not in a private mount namespace; every test skips\n");
        is_root = false;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_two_files_published_read_only_without_copy),
        T(test_one_task_default_name_and_file_name),
        T(test_bad_attributes_refused),
        cmocka_unit_test_setup_teardown(test_allow_rules, setup_allow, teardown),
        T(test_stale_pin_released_at_start),
        T(test_dfdaemon_down),
        T(test_storage_class_parameters_reach_the_context),
    };
    if (harness_resolve_methods(client_methods, DFC_RPC_N(client_methods)) < 0) {
        return 1;
    }
    return test_run_group(tests, NULL, NULL);
}
