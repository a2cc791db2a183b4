/*
 * CSI integration tests: a real csi-plugin and a real dfdaemon, real bind mounts, all inside a
 * private mount namespace that this test makes for itself (root only; skipped otherwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
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
#include "dragonfly/dfdaemon.pb-c.h"
#include "http_scrape.h"
#include "kubelet/pluginregistration.pb-c.h"
#include "mount.h"
#include "test_support.h"

static bool is_root;

/* The methods the tests call, resolved in main() before any test runs. */
static struct dfc_rpc_client_method controller_get_capabilities_m, create_volume_m, delete_volume_m,
    validate_volume_capabilities_m, get_plugin_capabilities_m, get_plugin_info_m, probe_m,
    node_get_capabilities_m, node_get_info_m, node_publish_volume_m, node_unpublish_volume_m,
    reg_get_info_m, reg_notify_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(csi__v1__controller, "ControllerGetCapabilities",
                          &controller_get_capabilities_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__controller, "CreateVolume", &create_volume_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__controller, "DeleteVolume", &delete_volume_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__controller, "ValidateVolumeCapabilities",
                          &validate_volume_capabilities_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__identity, "GetPluginCapabilities", &get_plugin_capabilities_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__identity, "GetPluginInfo", &get_plugin_info_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__identity, "Probe", &probe_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeGetCapabilities", &node_get_capabilities_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeGetInfo", &node_get_info_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodePublishVolume", &node_publish_volume_m),
    DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeUnpublishVolume", &node_unpublish_volume_m),
    DFC_RPC_CLIENT_METHOD(pluginregistration__registration, "GetInfo", &reg_get_info_m),
    DFC_RPC_CLIENT_METHOD(pluginregistration__registration, "NotifyRegistrationStatus",
                          &reg_notify_m),
};

struct fx {
    struct harness h; /* dfdaemon; its socket dir is h.dir/run */
    char kubelet[400], pod[500], target[600], csi_sock[400], state[400], csi_log[400];
    char run[400];
    char reg_dir[420], reg_sock[480], reg_flag[460]; /* the "registration" fixture only */
    pid_t csi_pid;
    struct dfc_rpc_client *c;
};

/* The endpoint is made before the fork: this process has gRPC's threads, so the child calls
 * only async-signal-safe functions. */
static void start_csi(struct fx *f, const char *extra_flag) {
    char ep[420];
    snprintf(ep, sizeof(ep), "unix://%s", f->csi_sock);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(f->csi_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        execl(CSI_PLUGIN_BIN, "csi-plugin", "--endpoint", ep, "--socket-dir", f->run,
              "--kubelet-dir", f->kubelet, "--state-dir", f->state, "--node-id", "node-a",
              extra_flag, (char *)NULL);
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
}

static int setup_with(void **state, const char *flag) {
    if (!is_root) {
        return 0;
    }
    struct fx *f = calloc(1, sizeof(*f));
    harness_start(&f->h, NULL);
    snprintf(f->run, sizeof(f->run), "%s/run", f->h.dir);
    snprintf(f->kubelet, sizeof(f->kubelet), "%s/kubelet", f->h.dir);
    snprintf(f->pod, sizeof(f->pod), "%s/pods/0b1c/volumes/kubernetes.io~csi/dfcache", f->kubelet);
    snprintf(f->target, sizeof(f->target), "%s/mount", f->pod);
    snprintf(f->csi_sock, sizeof(f->csi_sock), "%s/plugins/csi.sock", f->h.dir);
    snprintf(f->state, sizeof(f->state), "%s/csi-state", f->h.dir);
    snprintf(f->csi_log, sizeof(f->csi_log), "%s/csi.log", f->h.dir);
    if (flag != NULL && strcmp(flag, "registration") == 0) {
        snprintf(f->reg_dir, sizeof(f->reg_dir), "%s/plugins_registry", f->h.dir);
        snprintf(f->reg_sock, sizeof(f->reg_sock), "%s/%s-reg.sock", f->reg_dir,
                 "uds.csi.dragonflyoss.io");
        snprintf(f->reg_flag, sizeof(f->reg_flag), "--kubelet-registration-dir=%s", f->reg_dir);
        assert_int_equal(mkdir(f->reg_dir, 0755), 0);
        flag = f->reg_flag;
    }
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", f->pod); /* kubelet makes the parent */
    assert_int_equal(system(cmd), 0);
    start_csi(f, flag);
    char target[420];
    snprintf(target, sizeof(target), "unix:%s", f->csi_sock);
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(target, NULL, &f->c, &err), 0);
    *state = f;
    return 0;
}

/* With a shutdown grace of its own: the teardown's SIGTERM must still stop it cleanly. */
static int setup(void **state) {
    return setup_with(state, "--shutdown-grace=2s");
}

static int setup_readonly_only(void **state) {
    return setup_with(state, "--require-readonly");
}

static unsigned metrics_port;

/* The plugin with --metrics-address on a free loopback port (metrics_port). */
static int setup_metrics(void **state) {
    static char flag[64];
    metrics_port = test_free_port();
    snprintf(flag, sizeof(flag), "--metrics-address=127.0.0.1:%u", metrics_port);
    return setup_with(state, flag);
}

static int setup_registration(void **state) {
    return setup_with(state, "registration");
}

static int teardown(void **state) {
    struct fx *f = *state;
    if (f == NULL) {
        return 0;
    }
    dfc_rpc_client_free(f->c);
    stop_csi(f);
    /* Whatever a test left mounted goes before the directory does. */
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "umount -R '%s' 2>/dev/null", f->kubelet);
    (void)system(cmd);
    assert_int_equal(harness_destroy(&f->h), 0);
    free(f);
    return 0;
}

#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (!is_root) {                                                                            \
            test_skip("needs root: mounts, and the plugin as root");                               \
        }                                                                                          \
    } while (0)

/* One /proc/self/mountinfo entry as the tests read it: with getline, so no line is too long,
 * independently of the plugin's own scanners. */
struct table_entry {
    const char *point; /* unescaped */
    bool rw;
    size_t line_len;
};

/* Calls fn for every entry of the mount table; stops early when fn returns false. */
static void each_mount(bool (*fn)(void *, const struct table_entry *), void *arg) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    assert_non_null(f);
    char *line = NULL, *point = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        const char *p = line, *fields[6];
        int i = 0;
        for (fields[i++] = p; i < 6 && (p = strchr(p, ' ')) != NULL; fields[i++] = ++p) {
        }
        if (i < 6) {
            continue;
        }
        size_t len = (size_t)(strchr(fields[4], ' ') - fields[4]);
        point = realloc(point, len + 1);
        assert_int_equal(csi_mountinfo_unescape(fields[4], len, point, len + 1), 0);
        struct table_entry e = {point, strncmp(fields[5], "rw", 2) == 0, (size_t)n};
        if (!fn(arg, &e)) {
            break;
        }
    }
    free(point);
    free(line);
    fclose(f);
}

struct on_path {
    const char *path;
    unsigned count;
    size_t line_len; /* the longest line for path */
};

static bool count_on_path(void *arg, const struct table_entry *e) {
    struct on_path *w = arg;
    if (strcmp(e->point, w->path) == 0) {
        w->count++;
        w->line_len = e->line_len > w->line_len ? e->line_len : w->line_len;
    }
    return true;
}

static unsigned mounts_on(const char *path) {
    struct on_path w = {path, 0, 0};
    each_mount(count_on_path, &w);
    return w.count;
}

struct under_dir {
    const char *dir;
    size_t len;
    unsigned count;
};

static bool count_under(void *arg, const struct table_entry *e) {
    struct under_dir *w = arg;
    w->count += strncmp(e->point, w->dir, w->len) == 0 && e->point[w->len] == '/';
    return true;
}

/* Mounts below the test's own dir: other processes on the machine mount and unmount too, so
 * the whole table is no measure. */
static unsigned test_mounts(const struct fx *f) {
    struct under_dir w = {f->h.dir, strlen(f->h.dir), 0};
    each_mount(count_under, &w);
    return w.count;
}

/* ---- request builders ---- */

struct cap {
    Csi__V1__VolumeCapability cap;
    Csi__V1__VolumeCapability__MountVolume mount;
    Csi__V1__VolumeCapability__BlockVolume block;
    Csi__V1__VolumeCapability__AccessMode mode;
};

static void cap_init(struct cap *c, bool block) {
    csi__v1__volume_capability__init(&c->cap);
    csi__v1__volume_capability__mount_volume__init(&c->mount);
    csi__v1__volume_capability__block_volume__init(&c->block);
    csi__v1__volume_capability__access_mode__init(&c->mode);
    c->mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
    c->cap.access_mode = &c->mode;
    if (block) {
        c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
        c->cap.block = &c->block;
    } else {
        c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
        c->cap.mount = &c->mount;
    }
}

static int call(struct fx *f, const struct dfc_rpc_client_method *method,
                const ProtobufCMessage *req, ProtobufCMessage **ret, struct dfc_error *err) {
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(f->c, method, req, 10000, &resp, err);
    if (ret != NULL) {
        *ret = resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static int publish(struct fx *f, const char *volume_id, const char *target, bool readonly,
                   struct cap *c, struct dfc_error *err) {
    Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    struct cap def;
    cap_init(&def, false);
    r.volume_id = (char *)volume_id;
    r.target_path = (char *)target;
    r.volume_capability = c ? &c->cap : &def.cap;
    r.readonly = readonly;
    /* What kubelet adds for an inline volume with podInfoOnMount: ignored keys included. */
    Csi__V1__NodePublishVolumeRequest__VolumeContextEntry e1 =
        CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__VOLUME_CONTEXT_ENTRY__INIT;
    Csi__V1__NodePublishVolumeRequest__VolumeContextEntry e2 =
        CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__VOLUME_CONTEXT_ENTRY__INIT;
    e1.key = "csi.storage.k8s.io/ephemeral";
    e1.value = "true";
    e2.key = "csi.storage.k8s.io/pod.name";
    e2.value = "app-0";
    Csi__V1__NodePublishVolumeRequest__VolumeContextEntry *ctx[] = {&e1, &e2};
    r.volume_context = ctx;
    r.n_volume_context = 2;
    return call(f, &node_publish_volume_m, &r.base, NULL, err);
}

static int unpublish(struct fx *f, const char *volume_id, const char *target,
                     struct dfc_error *err) {
    Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
    r.volume_id = (char *)volume_id;
    r.target_path = (char *)target;
    return call(f, &node_unpublish_volume_m, &r.base, NULL, err);
}

/* A real dfdaemon RPC through the published directory. */
static int dfdaemon_through(const char *target) {
    char addr[700];
    snprintf(addr, sizeof(addr), "unix:%s/dfdaemon.sock", target);
    struct dfc_error err;
    struct dfc_rpc_client *c;
    if (dfc_rpc_client_new(addr, NULL, &c, &err) < 0) {
        return -1;
    }
    Dfdaemon__V2__ListLocalPersistentCacheTasksRequest req =
        DFDAEMON__V2__LIST_LOCAL_PERSISTENT_CACHE_TASKS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(c, &hm.list_local, &req.base, 5000, &resp, &err);
    dfc_rpc_msg_free(resp);
    dfc_rpc_client_free(c);
    return r;
}

/* ---- tests ---- */

static void test_publish_reaches_dfdaemon_and_survives_its_restart(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(publish(f, "csi-vol-1", f->target, false, NULL, &err), 0);
    assert_int_equal(mounts_on(f->target), 1);
    assert_int_equal(dfdaemon_through(f->target), 0);
    /* dfdaemon restarts and re-creates its socket: the directory mount still leads to it. */
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    harness_restart(&f->h);
    assert_int_equal(dfdaemon_through(f->target), 0);
    assert_int_equal(unpublish(f, "csi-vol-1", f->target, &err), 0);
    assert_int_equal(mounts_on(f->target), 0);
    struct stat st;
    assert_int_equal(stat(f->target, &st), -1); /* the target dir is removed */
}

static void test_readonly_publish(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(publish(f, "csi-vol-ro", f->target, true, NULL, &err), 0);
    char file[700];
    snprintf(file, sizeof(file), "%s/written-by-a-pod", f->target);
    assert_int_equal(open(file, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(dfdaemon_through(f->target), 0); /* connect() works on a read-only mount */
    /* The same target asked for read-write now is incompatible. */
    assert_int_equal(publish(f, "csi-vol-ro", f->target, false, NULL, &err), 6);
    assert_non_null(strstr(err.msg, "already published read-only"));
    assert_int_equal(unpublish(f, "csi-vol-ro", f->target, &err), 0);
}

static void test_idempotence(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(publish(f, "v", f->target, true, NULL, &err), 0);
    assert_int_equal(publish(f, "v", f->target, true, NULL, &err), 0);
    char sloppy[700];
    snprintf(sloppy, sizeof(sloppy), "%s//mount/", f->pod);
    assert_int_equal(publish(f, "v", sloppy, true, NULL, &err), 0);
    assert_int_equal(mounts_on(f->target), 1);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    /* A path that was never published, even one whose parent is gone. */
    char never[700];
    snprintf(never, sizeof(never), "%s/pods/never/volumes/kubernetes.io~csi/x/mount", f->kubelet);
    assert_int_equal(unpublish(f, "never", never, &err), 0);
}

static void test_unpublish_takes_off_stacked_mounts(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    /* What a non-idempotent driver once left behind: three binds on one target. */
    mkdir(f->target, 0750);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mount(f->run, f->target, NULL, MS_BIND, NULL), 0);
    }
    assert_int_equal(mounts_on(f->target), 3);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
    assert_int_equal(mounts_on(f->target), 0);
}

static void test_a_thousand_cycles_leave_no_mounts(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    unsigned before = test_mounts(f);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(publish(f, "cycle", f->target, i % 2 == 0, NULL, &err), 0);
        assert_int_equal(unpublish(f, "cycle", f->target, &err), 0);
    }
    assert_int_equal(test_mounts(f), before);
}

struct racer {
    struct fx *f;
    int code;
};

static void *race_publish(void *arg) {
    struct racer *x = arg;
    struct dfc_error err;
    x->code = publish(x->f, "race", x->f->target, true, NULL, &err);
    return NULL;
}

static void test_concurrent_publishes_make_one_mount(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    enum { N = 16 };
    pthread_t th[N];
    struct racer x[N];
    for (int i = 0; i < N; i++) {
        x[i] = (struct racer){f, -1};
        pthread_create(&th[i], NULL, race_publish, &x[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(x[i].code, 0);
    }
    assert_int_equal(mounts_on(f->target), 1);
    struct dfc_error err;
    assert_int_equal(unpublish(f, "race", f->target, &err), 0);
}

/* ---- the trust boundary: whoever can write inside the kubelet tree ---- */

struct swapper {
    char a[600], b[600]; /* exchanged: a directory on the target's way and a symlink */
    atomic_bool stop;
    unsigned long swaps;
};

static void *swap_loop(void *arg) {
    struct swapper *s = arg;
    /* Bounded: the publishing loop ends it much sooner. */
    for (unsigned long i = 0; i < 100000000ul && !atomic_load(&s->stop); i++) {
        if (renameat2(AT_FDCWD, s->a, AT_FDCWD, s->b, RENAME_EXCHANGE) == 0) {
            s->swaps++;
        }
    }
    return NULL;
}

struct escape_check {
    const char *kubelet, *outside;
    unsigned outside_mounts, rw_mounts;
};

static bool below_dir(const char *dir, const char *path) {
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Every mount the test can see under the kubelet dir or the outside dir is one the plugin made
 * for a read-only request; those outside are taken off again here, so that each counts once. */
static bool check_escape(void *arg, const struct table_entry *e) {
    struct escape_check *c = arg;
    bool outside = below_dir(c->outside, e->point);
    if (outside || below_dir(c->kubelet, e->point)) {
        c->rw_mounts += e->rw;
        c->outside_mounts += outside;
        if (outside) {
            assert_int_equal(umount2(e->point, MNT_DETACH), 0);
        }
    }
    return true;
}

static unsigned count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

/* A component of the target's path exchanged with a symlink out of the kubelet dir
 * (renameat2(RENAME_EXCHANGE)) while publishes and unpublishes run: a request may fail, but no
 * mount ever lands outside, none is read-write, and nothing is left behind. */
static void test_symlink_exchange_race_never_escapes(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    enum { CYCLES = 2000 };
    char outside[400], outside_pod[600], cmd[1400];
    snprintf(outside, sizeof(outside), "%s/outside", f->h.dir);
    snprintf(outside_pod, sizeof(outside_pod), "%s/kubernetes.io~csi/dfcache", outside);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", outside_pod);
    assert_int_equal(system(cmd), 0);
    struct swapper sw = {.swaps = 0};
    snprintf(sw.a, sizeof(sw.a), "%s/pods/0b1c/volumes", f->kubelet);
    snprintf(sw.b, sizeof(sw.b), "%s/pods/0b1c/evil", f->kubelet);
    assert_int_equal(symlink(outside, sw.b), 0);
    atomic_init(&sw.stop, false);
    unsigned before = test_mounts(f);
    struct escape_check c = {f->kubelet, outside, 0, 0};
    unsigned ok = 0, invalid = 0, internal = 0, other = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, swap_loop, &sw), 0);
    for (int i = 0; i < CYCLES; i++) {
        struct dfc_error err;
        int code = publish(f, "race", f->target, true, NULL, &err);
        ok += code == 0;
        invalid += code == 3;
        internal += code == 13;
        other += code != 0 && code != 3 && code != 13;
        each_mount(check_escape, &c);
        (void)unpublish(f, "race", f->target, &err);
    }
    atomic_store(&sw.stop, true);
    pthread_join(th, NULL);
    struct stat st;
    if (lstat(sw.a, &st) == 0 && S_ISLNK(st.st_mode)) { /* put the real directory back */
        assert_int_equal(renameat2(AT_FDCWD, sw.a, AT_FDCWD, sw.b, RENAME_EXCHANGE), 0);
    }
    struct dfc_error err;
    assert_int_equal(unpublish(f, "race", f->target, &err), 0);
    each_mount(check_escape, &c);
    unsigned leaked = count_entries(outside_pod);
    unsigned after = test_mounts(f);
    bool target_left = stat(f->target, &st) == 0;
    fprintf(stderr,
            "symlink exchange race: %lu swaps, %d publishes: %u OK, %u INVALID_ARGUMENT, %u "
            "INTERNAL, %u other; %u mounts outside, %u read-write, %u leaked outside, %u more "
            "mounts at the end%s\n",
            sw.swaps, CYCLES, ok, invalid, internal, other, c.outside_mounts, c.rw_mounts, leaked,
            after - before, target_left ? ", target left" : "");
    snprintf(cmd, sizeof(cmd), "umount -R '%s' 2>/dev/null; rm -rf '%s'", outside, outside_pod);
    (void)system(cmd);
    assert_int_equal(c.outside_mounts, 0);
    assert_int_equal(c.rw_mounts, 0);
    assert_int_equal(leaked, 0);
    assert_int_equal(after, before);
    assert_false(target_left);
    assert_int_equal(internal + other, 0);
    /* The race was real: both sides of the swap were met. */
    assert_true(sw.swaps > 0);
    assert_true(ok > 0);
    assert_true(invalid > 0);
}

/* A target whose mountinfo line is longer than 8 KiB (each space is "\040" there): still one
 * mount after three publishes, and none after the unpublish. */
static void test_overlong_mountinfo_line(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    static char target[PATH_MAX];
    int n = snprintf(target, sizeof(target), "%s/pods", f->kubelet);
    for (int level = 0; level < 10; level++) {
        target[n++] = '/';
        memset(target + n, ' ', 250);
        n += 250;
        target[n] = '\0';
        assert_int_equal(mkdir(target, 0755), 0);
    }
    snprintf(target + n, sizeof(target) - (size_t)n, "/mount");
    struct dfc_error err;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(publish(f, "spaces", target, true, NULL, &err), 0);
    }
    struct on_path w = {target, 0, 0};
    each_mount(count_on_path, &w);
    assert_true(w.line_len > 8192);
    assert_int_equal(w.count, 1);
    assert_int_equal(unpublish(f, "spaces", target, &err), 0);
    assert_int_equal(mounts_on(target), 0);
    struct stat st;
    assert_int_equal(stat(target, &st), -1);
}

/* kubelet's pods dir is rshared (Bidirectional propagation in real clusters): a publish shows
 * at a peer of the kubelet dir too, read-only there as well, and the unpublish takes it off
 * both. */
static void test_publish_propagates_to_a_shared_peer(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    char peer[400], peer_target[800];
    snprintf(peer, sizeof(peer), "%s/host-view", f->h.dir);
    assert_int_equal(mkdir(peer, 0755), 0);
    assert_int_equal(mount(f->kubelet, f->kubelet, NULL, MS_BIND, NULL), 0);
    assert_int_equal(mount(NULL, f->kubelet, NULL, MS_SHARED, NULL), 0);
    assert_int_equal(mount(f->kubelet, peer, NULL, MS_BIND, NULL), 0);
    snprintf(peer_target, sizeof(peer_target), "%s%s", peer, f->target + strlen(f->kubelet));
    struct dfc_error err;
    assert_int_equal(publish(f, "shared", f->target, true, NULL, &err), 0);
    assert_int_equal(publish(f, "shared", f->target, true, NULL, &err), 0);
    assert_int_equal(mounts_on(f->target), 1);
    assert_int_equal(mounts_on(peer_target), 1);
    assert_int_equal(dfdaemon_through(peer_target), 0);
    char file[900];
    snprintf(file, sizeof(file), "%s/written-through-the-peer", peer_target);
    assert_int_equal(open(file, O_WRONLY | O_CREAT, 0644), -1);
    assert_int_equal(errno, EROFS);
    assert_int_equal(unpublish(f, "shared", f->target, &err), 0);
    assert_int_equal(mounts_on(f->target), 0);
    assert_int_equal(mounts_on(peer_target), 0);
    assert_int_equal(umount2(peer, 0), 0);
    assert_int_equal(umount2(f->kubelet, 0), 0);
}

static void test_node_invalid_arguments(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    unsigned before = test_mounts(f);
    assert_int_equal(publish(f, "", f->target, true, NULL, &err), 3);
    assert_string_equal(err.msg, "volume_id is required");
    assert_int_equal(publish(f, "v", "", true, NULL, &err), 3);
    assert_string_equal(err.msg, "target_path is required");
    char long_id[200];
    memset(long_id, 'i', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_int_equal(publish(f, long_id, f->target, true, NULL, &err), 3);
    /* No capability at all. */
    Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    r.volume_id = "v";
    r.target_path = f->target;
    assert_int_equal(call(f, &node_publish_volume_m, &r.base, NULL, &err), 3);
    assert_string_equal(err.msg, "volume_capability is required");
    struct cap c;
    cap_init(&c, true);
    assert_int_equal(publish(f, "v", f->target, true, &c, &err), 3);
    assert_non_null(strstr(err.msg, "block access is not supported"));
    cap_init(&c, false);
    c.cap.access_mode = NULL;
    assert_int_equal(publish(f, "v", f->target, true, &c, &err), 3);
    assert_string_equal(err.msg, "volume_capability.access_mode is required");
    cap_init(&c, false);
    c.cap.access_type_case = 0;
    assert_int_equal(publish(f, "v", f->target, true, &c, &err), 3);
    assert_int_equal(unpublish(f, "", f->target, &err), 3);
    assert_int_equal(unpublish(f, "v", "", &err), 3);
    /* Escapes from the kubelet root. */
    char t[800];
    snprintf(t, sizeof(t), "%s/../../escape", f->pod);
    assert_int_equal(publish(f, "v", t, true, NULL, &err), 3);
    assert_int_equal(publish(f, "v", "/etc/escape", true, NULL, &err), 3);
    assert_non_null(strstr(err.msg, "is not under the kubelet root"));
    assert_int_equal(publish(f, "v", "relative/mount", true, NULL, &err), 3);
    char link[700];
    snprintf(link, sizeof(link), "%s/pods/link", f->kubelet);
    assert_int_equal(symlink("/etc", link), 0);
    snprintf(t, sizeof(t), "%s/mount", link);
    assert_int_equal(publish(f, "v", t, true, NULL, &err), 3);
    assert_non_null(strstr(err.msg, "resolves outside the kubelet root"));
    assert_int_equal(unpublish(f, "v", "/etc/escape", &err), 3);
    struct stat st;
    assert_int_equal(stat("/etc/escape", &st), -1);
    /* None of it mounted anything. */
    assert_int_equal(test_mounts(f), before);
}

static void test_require_readonly(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(publish(f, "v", f->target, false, NULL, &err), 3);
    assert_non_null(strstr(err.msg, "readonly must be true"));
    assert_int_equal(mounts_on(f->target), 0);
    assert_int_equal(publish(f, "v", f->target, true, NULL, &err), 0);
    assert_int_equal(unpublish(f, "v", f->target, &err), 0);
}

/* Methods of the full CSI spec that the trimmed proto/csi/csi.proto leaves out (Node, then
 * Controller): a client built from the full spec may still call them. */
static const ProtobufCMethodDescriptor unserved[] = {
    {"NodeStageVolume", &csi__v1__node_get_capabilities_request__descriptor,
     &csi__v1__node_get_info_response__descriptor},
    {"ListVolumes", &csi__v1__node_get_capabilities_request__descriptor,
     &csi__v1__node_get_info_response__descriptor},
};

static void test_identity_and_node_info(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    ProtobufCMessage *m;
    Csi__V1__GetPluginInfoRequest info = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
    assert_int_equal(call(f, &get_plugin_info_m, &info.base, &m, &err), 0);
    assert_string_equal(((Csi__V1__GetPluginInfoResponse *)m)->name, "uds.csi.dragonflyoss.io");
    assert_true(((Csi__V1__GetPluginInfoResponse *)m)->vendor_version[0] != '\0');
    dfc_rpc_msg_free(m);
    Csi__V1__GetPluginCapabilitiesRequest caps = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
    assert_int_equal(call(f, &get_plugin_capabilities_m, &caps.base, &m, &err), 0);
    Csi__V1__GetPluginCapabilitiesResponse *pc = (void *)m;
    assert_int_equal(pc->n_capabilities, 1);
    assert_int_equal(pc->capabilities[0]->service->type,
                     CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
    dfc_rpc_msg_free(m);
    Csi__V1__ProbeRequest probe = CSI__V1__PROBE_REQUEST__INIT;
    assert_int_equal(call(f, &probe_m, &probe.base, &m, &err), 0);
    assert_true(((Csi__V1__ProbeResponse *)m)->ready->value);
    dfc_rpc_msg_free(m);
    Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
    assert_int_equal(call(f, &node_get_info_m, &ni.base, &m, &err), 0);
    assert_string_equal(((Csi__V1__NodeGetInfoResponse *)m)->node_id, "node-a");
    dfc_rpc_msg_free(m);
    Csi__V1__NodeGetCapabilitiesRequest nc = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
    assert_int_equal(call(f, &node_get_capabilities_m, &nc.base, &m, &err), 0);
    assert_int_equal(((Csi__V1__NodeGetCapabilitiesResponse *)m)->n_capabilities, 0);
    dfc_rpc_msg_free(m);
    /* What this driver does not serve. */
    ProtobufCServiceDescriptor full_node = csi__v1__node__descriptor;
    full_node.n_methods = 1;
    full_node.methods = &unserved[0];
    full_node.method_indices_by_name = NULL;
    struct dfc_rpc_client_method stage, list;
    assert_int_equal(dfc_rpc_method_lookup(&full_node, "NodeStageVolume", &stage, &err), 0);
    assert_int_equal(call(f, &stage, &nc.base, NULL, &err), 12);
    ProtobufCServiceDescriptor full_controller = csi__v1__controller__descriptor;
    full_controller.n_methods = 1;
    full_controller.methods = &unserved[1];
    full_controller.method_indices_by_name = NULL;
    assert_int_equal(dfc_rpc_method_lookup(&full_controller, "ListVolumes", &list, &err), 0);
    assert_int_equal(call(f, &list, &nc.base, NULL, &err), 12);
}

static int create(struct fx *f, const char *name, int64_t bytes, struct cap *c, int n_caps,
                  char *ret_id, struct dfc_error *err) {
    Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
    Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
    range.required_bytes = bytes;
    r.name = (char *)name;
    r.capacity_range = &range;
    Csi__V1__VolumeCapability *caps[] = {c ? &c->cap : NULL};
    r.volume_capabilities = caps;
    r.n_volume_capabilities = (size_t)n_caps;
    ProtobufCMessage *m = NULL;
    int code = call(f, &create_volume_m, &r.base, &m, err);
    if (code == 0) {
        Csi__V1__CreateVolumeResponse *resp = (void *)m;
        snprintf(ret_id, 64, "%s", resp->volume->volume_id);
        assert_true(resp->volume->capacity_bytes == bytes);
    }
    dfc_rpc_msg_free(m);
    return code;
}

static int validate(struct fx *f, const char *id, struct cap *c, bool *ret_confirmed,
                    struct dfc_error *err) {
    Csi__V1__ValidateVolumeCapabilitiesRequest r =
        CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
    r.volume_id = (char *)id;
    Csi__V1__VolumeCapability *caps[] = {c ? &c->cap : NULL};
    r.volume_capabilities = caps;
    r.n_volume_capabilities = c ? 1 : 0;
    ProtobufCMessage *m = NULL;
    int code = call(f, &validate_volume_capabilities_m, &r.base, &m, err);
    if (code == 0) {
        *ret_confirmed = ((Csi__V1__ValidateVolumeCapabilitiesResponse *)m)->confirmed != NULL;
    }
    dfc_rpc_msg_free(m);
    return code;
}

static int delete (struct fx *f, const char *id, struct dfc_error *err) {
    Csi__V1__DeleteVolumeRequest r = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
    r.volume_id = (char *)id;
    return call(f, &delete_volume_m, &r.base, NULL, err);
}

static void test_controller(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    struct cap mount, block;
    cap_init(&mount, false);
    cap_init(&block, true);
    char id[64], id2[64];
    assert_int_equal(create(f, "pvc-1234", 1 << 20, &mount, 1, id, &err), 0);
    assert_int_equal(create(f, "pvc-1234", 1 << 20, &mount, 1, id2, &err), 0); /* idempotent */
    assert_string_equal(id, id2);
    assert_int_equal(create(f, "pvc-1234", 2 << 20, &mount, 1, id2, &err), 6);
    assert_non_null(strstr(err.msg, "exists with capacity 1048576, not 2097152"));
    assert_int_equal(create(f, "", 0, &mount, 1, id2, &err), 3);
    assert_string_equal(err.msg, "name is required");
    assert_int_equal(create(f, "pvc-x", 0, NULL, 0, id2, &err), 3);
    assert_string_equal(err.msg, "volume_capabilities is required");
    assert_int_equal(create(f, "pvc-x", 0, &block, 1, id2, &err), 3);
    char long_name[200];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(create(f, long_name, 0, &mount, 1, id2, &err), 3);
    assert_int_equal(create(f, "pvc-neg", -1, &mount, 1, id2, &err), 11);

    bool confirmed = false;
    assert_int_equal(validate(f, id, &mount, &confirmed, &err), 0);
    assert_true(confirmed);
    assert_int_equal(validate(f, id, &block, &confirmed, &err), 0);
    assert_false(confirmed);
    assert_int_equal(validate(f, "some-random-volume-id", &mount, &confirmed, &err), 5);
    assert_int_equal(validate(f, "", &mount, &confirmed, &err), 3);
    assert_int_equal(validate(f, id, NULL, &confirmed, &err), 3);

    assert_int_equal(delete (f, id, &err), 0);
    assert_int_equal(delete (f, id, &err), 0); /* idempotent */
    assert_int_equal(delete (f, "some-random-volume-id", &err), 0);
    assert_int_equal(delete (f, "", &err), 3);
    assert_int_equal(validate(f, id, &mount, &confirmed, &err), 5); /* gone */
    /* The same name can come back with another capacity once deleted. */
    assert_int_equal(create(f, "pvc-1234", 2 << 20, &mount, 1, id2, &err), 0);

    Csi__V1__ControllerGetCapabilitiesRequest cr =
        CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
    ProtobufCMessage *m;
    assert_int_equal(call(f, &controller_get_capabilities_m, &cr.base, &m, &err), 0);
    Csi__V1__ControllerGetCapabilitiesResponse *cc = (void *)m;
    assert_int_equal(cc->n_capabilities, 1);
    assert_int_equal(cc->capabilities[0]->rpc->type,
                     CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME);
    dfc_rpc_msg_free(m);
}

static bool log_has(struct fx *f, const char *text) {
    static char buf[1 << 20];
    FILE *fp = fopen(f->csi_log, "r");
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return strstr(buf, text) != NULL;
}

struct log_want {
    struct fx *f;
    const char *text;
};

static bool log_eventually(void *arg) {
    struct log_want *w = arg;
    return log_has(w->f, w->text);
}

/* The layer logs after the response has gone, so wait a moment for the line. */
static void assert_logged(struct fx *f, const char *text) {
    struct log_want w = {f, text};
    assert_true(test_wait_for(log_eventually, &w, 3000));
}

static void test_one_log_line_per_rpc(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    assert_int_equal(publish(f, "logged-vol", f->target, true, NULL, &err), 0);
    assert_int_equal(unpublish(f, "logged-vol", f->target, &err), 0);
    char want[800];
    snprintf(want, sizeof(want), "method=%s volume_id=logged-vol target_path=%s",
             node_publish_volume_m.path, f->target);
    assert_logged(f, want);
    assert_logged(f, "ephemeral=true code=OK ms=");
    snprintf(want, sizeof(want), "method=%s volume_id=logged-vol", node_unpublish_volume_m.path);
    assert_logged(f, want);
}

static bool path_exists(void *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* --kubelet-registration-dir: the plugin serves kubelet's Registration next to its CSI socket
 * (GetInfo names it and the CSI socket it listens on), takes kubelet's verdict, and removes the
 * socket when it stops, so kubelet deregisters it. */
static void test_kubelet_registration(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    assert_true(test_wait_for(path_exists, f->reg_sock, 10000));
    char target[500];
    snprintf(target, sizeof(target), "unix:%s", f->reg_sock);
    struct dfc_rpc_client *c;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(target, NULL, &c, &err), 0);
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    assert_int_equal(dfc_rpc_unary(c, &reg_get_info_m, &req.base, 5000, &m, &err), 0);
    Pluginregistration__PluginInfo *info = (void *)m;
    assert_string_equal(info->type, "CSIPlugin");
    assert_string_equal(info->name, "uds.csi.dragonflyoss.io");
    assert_string_equal(info->endpoint, f->csi_sock);
    assert_int_equal(info->n_supported_versions, 1);
    assert_string_equal(info->supported_versions[0], "1.0.0");
    dfc_rpc_msg_free(m);
    Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    st.plugin_registered = true;
    st.error = "";
    m = NULL;
    assert_int_equal(dfc_rpc_unary(c, &reg_notify_m, &st.base, 5000, &m, &err), 0);
    dfc_rpc_msg_free(m);
    dfc_rpc_client_free(c);

    stop_csi(f);
    assert_false(path_exists(f->reg_sock));
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "grep -q 'csi.registered' '%s'", f->csi_log);
    assert_int_equal(system(cmd), 0);
    start_csi(f, NULL); /* for the teardown */
}

static void test_plugin_command_line(void **state) {
    char dir[256], cmd[1200], out[400];
    test_mkdtemp(dir, sizeof(dir), "csi-cli");
    snprintf(out, sizeof(out), "%s/out", dir);
    struct {
        const char *args;
        int code;
        const char *text;
    } cases[] = {
        {"", 2, "--endpoint or CSI_ENDPOINT is required"},
        {"--endpoint unix:///tmp/x.sock --driver-name 9bad", 1, "driver name `9bad` must be"},
        {"--endpoint unix:///tmp/x.sock --kubelet-dir relative", 1, "must be an absolute path"},
        {"--endpoint unix:///tmp/x.sock -l loud", 2, "bad --log-level"},
        {"--endpoint unix:///tmp/x.sock --kubelet-registration-dir relative", 1,
         "kubelet-registration-dir must be an absolute path"},
        {"--help", 0, "--require-readonly"},
        {"--help", 0, "--kubelet-registration-dir"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(cmd, sizeof(cmd), "env -u CSI_ENDPOINT %s %s > %s 2>&1", CSI_PLUGIN_BIN,
                 cases[i].args, out);
        int status = system(cmd);
        assert_int_equal(WEXITSTATUS(status), cases[i].code);
        static char text[8192];
        FILE *fp = fopen(out, "r");
        size_t n = fread(text, 1, sizeof(text) - 1, fp);
        text[n] = '\0';
        fclose(fp);
        assert_non_null(strstr(text, cases[i].text));
    }
    test_rmtree(dir);
}

/* One scrape, parsed by the real Prometheus parser; the flattened samples. */
static char *scrape_csi(void) {
    return test_prom_scrape(metrics_port);
}

#define CSI_HANDLED(m, code)                                                                       \
    "dragonfly_csi_grpc_server_handled_total{code=\"" code "\",method=\"/csi.v1.Node/" m           \
    "\",server=\"csi\"}"
#define CSI_PUBLISHED "dragonfly_csi_published_volumes{}"

static double csi_value(const char *flat, const char *series) {
    double v = test_prom_value(flat, series);
    return v < 0 ? 0 : v;
}

/* Publishes and unpublishes counted by code, the published-volume gauge from the mount table,
 * and /readyz following the socket dir. */
static void test_metrics_and_readiness(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    struct dfc_error err;
    char *s0 = scrape_csi();
    assert_true(csi_value(s0, CSI_PUBLISHED) == 0);
    assert_int_equal(publish(f, "csi-vol-m", f->target, true, NULL, &err), 0);
    assert_int_equal(publish(f, "csi-vol-m", f->target, true, NULL, &err), 0); /* idempotent */
    assert_int_equal(publish(f, "", f->target, true, NULL, &err), 3);          /* no volume_id */
    char *s1 = scrape_csi();
    assert_true(csi_value(s1, CSI_HANDLED("NodePublishVolume", "OK")) -
                    csi_value(s0, CSI_HANDLED("NodePublishVolume", "OK")) ==
                2);
    assert_true(csi_value(s1, CSI_HANDLED("NodePublishVolume", "INVALID_ARGUMENT")) -
                    csi_value(s0, CSI_HANDLED("NodePublishVolume", "INVALID_ARGUMENT")) ==
                1);
    assert_true(csi_value(s1, CSI_PUBLISHED) == 1); /* one mount, whatever the retries */
    assert_int_equal(unpublish(f, "csi-vol-m", f->target, &err), 0);
    char *s2 = scrape_csi();
    assert_true(csi_value(s2, CSI_HANDLED("NodeUnpublishVolume", "OK")) -
                    csi_value(s1, CSI_HANDLED("NodeUnpublishVolume", "OK")) ==
                1);
    assert_true(csi_value(s2, CSI_PUBLISHED) == 0);

    char *body;
    assert_int_equal(test_http_get(metrics_port, "/readyz", &body), 200);
    free(body);
    char moved[500];
    snprintf(moved, sizeof(moved), "%s.away", f->run);
    assert_int_equal(rename(f->run, moved), 0);
    int code = test_http_get(metrics_port, "/readyz", &body);
    assert_int_equal(rename(moved, f->run), 0);
    assert_int_equal(code, 503);
    assert_non_null(strstr(body, "does not exist"));
    free(body);
    assert_int_equal(test_http_get(metrics_port, "/healthz", &body), 200);
    free(body);
    assert_int_equal(test_http_get(metrics_port, "/readyz", &body), 200);
    free(body);
    free(s0);
    free(s1);
    free(s2);
}

/* True when this process has a mount namespace of its own: ctest starts this test under
 * test/support/private_mount_ns.sh (unshare -m, propagation private), so nothing it mounts is
 * seen outside and the test never changes the namespaces of its own process. */
static bool private_mount_ns(void) {
    char self[64] = "", parent[64] = "", path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)getppid());
    if (readlink("/proc/self/ns/mnt", self, sizeof(self) - 1) < 0 ||
        readlink(path, parent, sizeof(parent) - 1) < 0) {
        return false;
    }
    return strcmp(self, parent) != 0; /* unshare(1) exec'd us: our parent is ctest, outside */
}

int main(void) {
    is_root = geteuid() == 0;
    if (!is_root) {
        fprintf(stderr, "test_csi: needs root for bind mounts; every test skips\n");
    } else if (!private_mount_ns()) {
        fprintf(stderr, "test_csi: not in a private mount namespace (ctest runs it under "
                        "test/support/private_mount_ns.sh); every test skips\n");
        is_root = false;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_publish_reaches_dfdaemon_and_survives_its_restart),
        T(test_readonly_publish),
        T(test_idempotence),
        T(test_unpublish_takes_off_stacked_mounts),
        T(test_a_thousand_cycles_leave_no_mounts),
        T(test_concurrent_publishes_make_one_mount),
        T(test_node_invalid_arguments),
        T(test_symlink_exchange_race_never_escapes),
        T(test_overlong_mountinfo_line),
        T(test_publish_propagates_to_a_shared_peer),
        cmocka_unit_test_setup_teardown(test_require_readonly, setup_readonly_only, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_and_readiness, setup_metrics, teardown),
        T(test_identity_and_node_info),
        T(test_controller),
        T(test_one_log_line_per_rpc),
        cmocka_unit_test_setup_teardown(test_kubelet_registration, setup_registration, teardown),
        cmocka_unit_test(test_plugin_command_line),
    };
    if (harness_resolve_methods(client_methods, DFC_RPC_N(client_methods)) < 0) {
        return 1;
    }
    return test_run_group(tests, NULL, NULL);
}
