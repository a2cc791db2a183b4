/*
 * Integration tests of dfc.dfdaemon.v1.DfdaemonVolume (daemon/rpc_volume.c, storage/pins.c)
 * against a real dfdaemon process on a real Unix socket: publish and unpublish idempotent; the
 * volume's file is the store's content inode (no copy), world-readable and not writable; bad
 * input per field; pins against TTL expiry, eviction and `dfcache rm` (hidden, space freed at
 * the last unpublish); pins across restarts (a clean stop and a crash); a stale volume
 * directory removed and a missing one rebuilt or dropped at start; `dfcache stat` naming pins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "dfc/volume.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "test_support.h"

static struct dfc_rpc_client_method publish_m, unpublish_m, list_m;
static const struct dfc_rpc_client_row rows[] = {
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "PublishContentVolume", &publish_m),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "UnpublishContentVolume",
                          &unpublish_m),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_volume, "ListContentVolumes", &list_m),
};

typedef Dfc__Dfdaemon__V1__PublishContentVolumeResponse PublishResponse;
typedef Dfc__Dfdaemon__V1__ListContentVolumesResponse ListResponse;

/* PublishContentVolume of pin with n files "name=id" pairs: the gRPC code (0: OK), the
 * answer's path into path (may be NULL), the error message into err. */
static int publish(struct harness_fx *f, const char *pin, const char *const *names,
                   const char *const *ids, size_t n, char *path, struct dfc_error *err) {
    Dfc__Dfdaemon__V1__PublishContentVolumeRequest req =
        DFC__DFDAEMON__V1__PUBLISH_CONTENT_VOLUME_REQUEST__INIT;
    Dfc__Dfdaemon__V1__ContentVolumeFile files[70], *fp[70];
    for (size_t i = 0; i < n; i++) {
        dfc__dfdaemon__v1__content_volume_file__init(&files[i]);
        files[i].name = (char *)names[i];
        files[i].task_id = (char *)ids[i];
        fp[i] = &files[i];
    }
    req.pin_id = (char *)pin;
    req.files = fp;
    req.n_files = n;
    req.target_path = "/var/lib/kubelet/pods/x/volumes/v/mount";
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_unary(f->c, &publish_m, &req.base, 30000, &m, err);
    if (r == 0 && path != NULL) {
        snprintf(path, 512, "%s", ((PublishResponse *)m)->path);
    }
    dfc_rpc_msg_free(m);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static int publish1(struct harness_fx *f, const char *pin, const char *name, const char *id,
                    char *path, struct dfc_error *err) {
    return publish(f, pin, &name, &id, 1, path, err);
}

static int unpublish(struct harness_fx *f, const char *pin, struct dfc_error *err) {
    Dfc__Dfdaemon__V1__UnpublishContentVolumeRequest req =
        DFC__DFDAEMON__V1__UNPUBLISH_CONTENT_VOLUME_REQUEST__INIT;
    req.pin_id = (char *)pin;
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_unary(f->c, &unpublish_m, &req.base, 30000, &m, err);
    dfc_rpc_msg_free(m);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* Restarts the daemon (stopped with sig) and reconnects f's client. */
static void restart(struct harness_fx *f, int sig) {
    assert_int_not_equal(harness_stop(&f->h, sig), -1);
    harness_restart(&f->h);
    dfc_rpc_client_free(f->c);
    f->c = harness_client(&f->h);
}

/* ListContentVolumes: the answer (free it). */
static ListResponse *list(struct harness_fx *f) {
    Dfc__Dfdaemon__V1__ListContentVolumesRequest req =
        DFC__DFDAEMON__V1__LIST_CONTENT_VOLUMES_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(f->c, &list_m, &req.base, 30000, &m, &err), 0);
    return (ListResponse *)m;
}

static void import(struct harness_fx *f, const char *name, size_t len, unsigned seed, char id[65]) {
    char src[400];
    harness_path(&f->h, name, src, sizeof(src));
    harness_write_file(src, len, seed);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
}

static void content_path(struct harness_fx *f, const char *id, char *buf, size_t size) {
    snprintf(buf, size, "%s/content/persistent-cache-tasks/%.3s/%s", f->h.store, id, id);
}

static void volume_path(struct harness_fx *f, const char *pin, const char *name, char *buf,
                        size_t size) {
    snprintf(buf, size, "%s/volumes/%s%s%s", f->h.store, pin, name ? "/" : "", name ? name : "");
}

static ino_t inode(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_ino;
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_publish_unpublish_idempotent(void **state) {
    struct harness_fx *f = *state;
    char a[65], b[65], path[512], again[512], file[600], content[600];
    struct dfc_error err;
    import(f, "a.bin", 3 * 1024 * 1024 + 5, 1, a);
    import(f, "b.bin", 4096, 2, b);
    const char *names[] = {"weights.bin", "config.json"}, *ids[] = {a, b};
    assert_int_equal(publish(f, "pin-1", names, ids, 2, path, &err), 0);
    char want[512];
    volume_path(f, "pin-1", NULL, want, sizeof(want));
    assert_string_equal(path, want);
    /* Again, files in another order: the same answer. */
    const char *names2[] = {"config.json", "weights.bin"}, *ids2[] = {b, a};
    assert_int_equal(publish(f, "pin-1", names2, ids2, 2, again, &err), 0);
    assert_string_equal(again, path);
    /* The same pin id with other files. */
    assert_int_equal(publish(f, "pin-1", names, ids, 1, NULL, &err), DFC_GRPC_ALREADY_EXISTS);
    assert_non_null(strstr(err.msg, "pin-1"));
    /* The store's own inodes: no copy; read-only modes. */
    volume_path(f, "pin-1", "weights.bin", file, sizeof(file));
    content_path(f, a, content, sizeof(content));
    assert_true(inode(file) == inode(content));
    assert_true(harness_same_file(file, "/dev/null") == false);
    char src[400];
    harness_path(&f->h, "a.bin", src, sizeof(src));
    assert_true(harness_same_file(file, src));
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    volume_path(f, "", NULL, want, sizeof(want));
    assert_int_equal(stat(want, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    /* Listed, and shown by stat. */
    ListResponse *l = list(f);
    assert_int_equal(l->n_volumes, 1);
    assert_string_equal(l->volumes[0]->pin_id, "pin-1");
    assert_string_equal(l->volumes[0]->path, path);
    assert_string_equal(l->volumes[0]->target_path, "/var/lib/kubelet/pods/x/volumes/v/mount");
    assert_int_equal(l->volumes[0]->n_files, 2);
    dfc_rpc_msg_free(&l->base);
    assert_int_equal(DFCACHE(f, "stat", a), 0);
    assert_non_null(strstr(f->out, "\nPins:                 1 (pin-1)\n"));
    assert_int_equal(DFCACHE(f, "stat", "--json", a), 0);
    assert_non_null(strstr(f->out, "\"pins\": [\n    \"pin-1\"\n  ],"));
    /* Unpublish: gone; again, and an unknown pin: fine. */
    assert_int_equal(unpublish(f, "pin-1", &err), 0);
    assert_false(exists(path));
    assert_true(exists(content)); /* the task stays */
    assert_int_equal(unpublish(f, "pin-1", &err), 0);
    assert_int_equal(unpublish(f, "never-published", &err), 0);
    l = list(f);
    assert_int_equal(l->n_volumes, 0);
    dfc_rpc_msg_free(&l->base);
    assert_int_equal(DFCACHE(f, "stat", a), 0);
    assert_non_null(strstr(f->out, "\nPins:                 none\n"));
    assert_true(harness_log_has(&f->h, "event=volume.published"));
}

/* In a child as uid 65534: opening the volume's file (through /proc/self/fd, past the store's
 * 0700 directories) for writing fails, for reading works. */
static void test_volume_file_not_writable(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to switch to another uid");
    }
    char id[65], file[600];
    struct dfc_error err;
    import(f, "w.bin", 10000, 3, id);
    assert_int_equal(publish1(f, "w", "data", id, NULL, &err), 0);
    volume_path(f, "w", "data", file, sizeof(file));
    int fd = open(file, O_PATH | O_CLOEXEC);
    assert_true(fd >= 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0) {
            _exit(10);
        }
        (void)prctl(PR_SET_DUMPABLE, 1);
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        int w = open(proc, O_WRONLY);
        if (w >= 0 || (errno != EACCES && errno != EROFS && errno != EPERM)) {
            _exit(11);
        }
        int rd = open(proc, O_RDONLY);
        _exit(rd >= 0 ? 0 : 12);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(fd);
    /* Even root cannot add a file to the volume's directory without changing its mode first
     * (0555): checked as the other uid would see it. */
    char dir[600];
    volume_path(f, "w", NULL, dir, sizeof(dir));
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0222, 0);
}

static void test_bad_input(void **state) {
    struct harness_fx *f = *state;
    char id[65];
    struct dfc_error err;
    import(f, "x.bin", 5000, 4, id);
    char long_id[200];
    memset(long_id, 'a', 129);
    long_id[129] = '\0';
    struct {
        const char *pin, *name, *task, *msg;
    } cases[] = {
        {"", "f", id, "pin_id must be 1 to 128 characters"},
        {long_id, "f", id, "pin_id must be 1 to 128 characters, got 129"},
        {".hidden", "f", id, "pin_id must not start with '.'"},
        {"a/b", "f", id, "pin_id may hold only [A-Za-z0-9._-]"},
        {"p", "", id, "files[0].name must be 1 to 255 bytes"},
        {"p", ".", id, "files[0].name must not be \".\""},
        {"p", "..", id, "files[0].name must not be \"..\""},
        {"p", "a/b", id, "files[0].name must be one path component"},
        {"p", "f", "abc", "files[0].task_id must be 64 lowercase hex"},
        {"p", "f", "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789",
         "files[0].task_id must be 64 lowercase hex"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(publish1(f, cases[i].pin, cases[i].name, cases[i].task, NULL, &err),
                         DFC_GRPC_INVALID_ARGUMENT);
        if (strstr(err.msg, cases[i].msg) == NULL) {
            fail_msg("case %zu: `%s` lacks `%s`", i, err.msg, cases[i].msg);
        }
    }
    /* Files: none, too many, duplicate names. */
    assert_int_equal(publish(f, "p", NULL, NULL, 0, NULL, &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "files must hold 1 to 64 files, got 0"));
    const char *names[65], *ids[65];
    char nb[65][8];
    for (int i = 0; i < 65; i++) {
        snprintf(nb[i], sizeof(nb[i]), "f%d", i);
        names[i] = nb[i];
        ids[i] = id;
    }
    assert_int_equal(publish(f, "p", names, ids, 65, NULL, &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "files must hold 1 to 64 files, got 65"));
    names[1] = "f0";
    assert_int_equal(publish(f, "p", names, ids, 2, NULL, &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "files[1].name `f0` is also files[0].name"));
    assert_int_equal(unpublish(f, "../x", &err), DFC_GRPC_INVALID_ARGUMENT);
    if (strstr(err.msg, "pin_id must not start with '.'") == NULL) {
        fail_msg("%s", err.msg);
    }
    assert_int_equal(unpublish(f, "a/x", &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "pin_id may hold only"));
    /* One task used twice under two names is fine; 64 files are fine. */
    assert_int_equal(publish(f, "p64", (const char *const[]){"f0", "f1"}, ids, 2, NULL, &err), 0);
    names[1] = "f1";
    assert_int_equal(publish(f, "p65", names, ids, 64, NULL, &err), 0);
    /* Nothing was made for the refused ones. */
    ListResponse *l = list(f);
    assert_int_equal(l->n_volumes, 2);
    dfc_rpc_msg_free(&l->base);
    char v[600];
    volume_path(f, "p", NULL, v, sizeof(v));
    assert_false(exists(v));
    /* Standalone: a task this node lacks is NOT_FOUND, naming it. */
    const char *absent = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_int_equal(publish1(f, "q", "f", absent, NULL, &err), DFC_GRPC_NOT_FOUND);
    assert_non_null(strstr(err.msg, absent));
    volume_path(f, "q", NULL, v, sizeof(v));
    assert_false(exists(v));
}

static void sql(struct harness_fx *f, const char *stmt) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "sqlite3 '%s/metadata/pcache.db' \"%s\"", f->h.store, stmt);
    assert_int_equal(system(cmd), 0);
}

static bool gc_ran(void *arg) {
    struct harness_fx *f = arg;
    return harness_log_has(&f->h, "event=gc.done");
}

static void test_pins_survive_ttl_and_eviction(void **state) {
    struct harness_fx *f = *state;
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell");
    }
    char ids[4][65];
    struct dfc_error err;
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof(name), "g%d.bin", i);
        import(f, name, 4 * 1024 * 1024, 40 + (unsigned)i, ids[i]);
    }
    /* ids[0] (expired) and ids[1] (an old cached copy) pinned; ids[2] expired and ids[3] an
     * old cached copy, not pinned. */
    assert_int_equal(publish1(f, "ttl", "m", ids[0], NULL, &err), 0);
    assert_int_equal(publish1(f, "lru", "m", ids[1], NULL, &err), 0);
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    char stmt[600];
    snprintf(stmt, sizeof(stmt),
             "UPDATE tasks SET created_at_ns = created_at_ns - 360000000000000 WHERE id IN "
             "('%s', '%s')",
             ids[0], ids[2]);
    sql(f, stmt);
    snprintf(stmt, sizeof(stmt),
             "UPDATE tasks SET persistent = 0, updated_at_ns = updated_at_ns - 60000000000 "
             "WHERE id IN ('%s', '%s')",
             ids[1], ids[3]);
    sql(f, stmt);
    FILE *fp = fopen(f->h.config, "w");
    fprintf(fp,
            "download:\n  server:\n    socketPath: %s\nstorage:\n  dir: %s\n"
            "gc:\n  interval: 1s\n  policy:\n    diskThreshold: 5MiB\n",
            f->h.socket, f->h.store);
    fclose(fp);
    harness_restart(&f->h);
    dfc_rpc_client_free(f->c);
    f->c = harness_client(&f->h);
    assert_true(test_wait_for(gc_ran, f, 10000));
    assert_true(harness_log_has(&f->h, "expired=1 evicted=1"));
    assert_int_equal(DFCACHE(f, "stat", ids[0]), 0); /* pinned: kept past its TTL */
    assert_int_equal(DFCACHE(f, "stat", ids[1]), 0); /* pinned: kept under pressure */
    assert_int_equal(DFCACHE(f, "stat", ids[2]), 1); /* expired */
    assert_int_equal(DFCACHE(f, "stat", ids[3]), 1); /* evicted */
    /* Unpinned, the next pass deletes them. */
    assert_int_equal(unpublish(f, "ttl", &err), 0);
    assert_int_equal(unpublish(f, "lru", &err), 0);
    for (int tries = 0; tries < 100 && DFCACHE(f, "stat", ids[0]) == 0; tries++) {
        usleep(100 * 1000);
    }
    assert_int_equal(DFCACHE(f, "stat", ids[0]), 1);
}

static void test_rm_hides_and_frees_at_last_unpublish(void **state) {
    struct harness_fx *f = *state;
    char id[65], file1[600], file2[600], content[600], src[400];
    struct dfc_error err;
    import(f, "r.bin", 2 * 1024 * 1024, 5, id);
    assert_int_equal(publish1(f, "r1", "data", id, NULL, &err), 0);
    assert_int_equal(publish1(f, "r2", "data", id, NULL, &err), 0);
    volume_path(f, "r1", "data", file1, sizeof(file1));
    volume_path(f, "r2", "data", file2, sizeof(file2));
    content_path(f, id, content, sizeof(content));
    struct stat st;
    assert_int_equal(stat(content, &st), 0);
    assert_int_equal(st.st_nlink, 3); /* content/ and two volumes */
    assert_int_equal(DFCACHE(f, "rm", id), 0);
    assert_true(harness_log_has(&f->h, "event=delete.pinned"));
    /* Hidden: stat, ls and new pins see no task; the volumes still read it. */
    assert_int_equal(DFCACHE(f, "stat", id), 1);
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_null(strstr(f->out, id));
    assert_int_equal(publish1(f, "r3", "data", id, NULL, &err), DFC_GRPC_NOT_FOUND);
    assert_false(exists(content));
    harness_path(&f->h, "r.bin", src, sizeof(src));
    assert_true(harness_same_file(file1, src));
    assert_int_equal(stat(file1, &st), 0);
    assert_int_equal(st.st_nlink, 2);
    /* Publishing r1 again still answers it (idempotent, its links are there). */
    assert_int_equal(publish1(f, "r1", "data", id, NULL, &err), 0);
    assert_int_equal(unpublish(f, "r1", &err), 0);
    assert_int_equal(stat(file2, &st), 0);
    assert_int_equal(st.st_nlink, 1); /* the last link: freed with it */
    assert_int_equal(unpublish(f, "r2", &err), 0);
    assert_false(exists(file2));
}

static void test_pins_survive_restarts(void **state) {
    struct harness_fx *f = *state;
    char id[65], path[512], file[600];
    struct dfc_error err;
    import(f, "s.bin", 100000, 6, id);
    assert_int_equal(publish1(f, "keep", "model", id, path, &err), 0);
    volume_path(f, "keep", "model", file, sizeof(file));
    ino_t ino = inode(file);
    for (int i = 0; i < 2; i++) {
        restart(f, i == 0 ? SIGTERM : SIGKILL);
        assert_true(harness_log_has(&f->h, "event=storage.volumes pins=1 removed_stale=0"));
        ListResponse *l = list(f);
        assert_int_equal(l->n_volumes, 1);
        assert_string_equal(l->volumes[0]->pin_id, "keep");
        dfc_rpc_msg_free(&l->base);
        assert_true(inode(file) == ino);
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0444); /* recovery left the mode alone */
        char again[512];
        assert_int_equal(publish1(f, "keep", "model", id, again, &err), 0);
        assert_string_equal(again, path);
    }
    assert_true(harness_log_has(&f->h, "verity="));
}

static void test_recovery_at_start(void **state) {
    struct harness_fx *f = *state;
    char a[65], b[65], dir[600], file[600];
    struct dfc_error err;
    import(f, "ra.bin", 50000, 7, a);
    import(f, "rb.bin", 60000, 8, b);
    assert_int_equal(publish1(f, "rebuild", "f", a, NULL, &err), 0);
    assert_int_equal(publish1(f, "drop", "f", b, NULL, &err), 0);
    assert_int_equal(DFCACHE(f, "rm", b), 0); /* hidden: only the volume holds it */
    assert_int_equal(harness_stop(&f->h, SIGKILL), 128 + SIGKILL);
    /* A directory without a row (a crash before the row, or after an unpin dropped it). */
    volume_path(f, "stale", NULL, dir, sizeof(dir));
    assert_int_equal(mkdir(dir, 0755), 0);
    volume_path(f, "stale", "x", file, sizeof(file));
    harness_write_file(file, 100, 1);
    assert_int_equal(chmod(dir, 0555), 0);
    /* Rows whose directories are gone: one task still stored, one not. */
    char cmd[1400];
    volume_path(f, "rebuild", NULL, dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "chmod 0755 '%s' && rm -rf '%s'", dir, dir);
    assert_int_equal(system(cmd), 0);
    volume_path(f, "drop", NULL, dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "chmod 0755 '%s' && rm -rf '%s'", dir, dir);
    assert_int_equal(system(cmd), 0);
    harness_restart(&f->h);
    dfc_rpc_client_free(f->c);
    f->c = harness_client(&f->h);
    assert_true(harness_log_has(&f->h, "pins=1 removed_stale=1 rebuilt=1 dropped=1"));
    volume_path(f, "stale", NULL, dir, sizeof(dir));
    assert_false(exists(dir));
    char content[600];
    volume_path(f, "rebuild", "f", file, sizeof(file));
    content_path(f, a, content, sizeof(content));
    assert_true(inode(file) == inode(content));
    volume_path(f, "drop", NULL, dir, sizeof(dir));
    assert_false(exists(dir));
    ListResponse *l = list(f);
    assert_int_equal(l->n_volumes, 1);
    assert_string_equal(l->volumes[0]->pin_id, "rebuild");
    dfc_rpc_msg_free(&l->base);
}

/* ---- --caller: this binary re-executed as another uid ---- */

static char self_exe[PATH_MAX];

/* "--caller <uid> <socket> publish|unpublish <pin> [<task id>]": prints the gRPC code. */
static int caller_main(int argc, char **argv) {
    if (argc < 6) {
        return 2;
    }
    uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
        perror("caller: drop to uid");
        return 2;
    }
    struct harness_fx f = {0};
    struct dfc_error err = {0};
    if (harness_client_new(argv[3], NULL, &f.c, &err) < 0) {
        return 2;
    }
    int code = strcmp(argv[4], "publish") == 0 && argc == 7
                   ? publish1(&f, argv[5], "f", argv[6], NULL, &err)
                   : unpublish(&f, argv[5], &err);
    printf("%d\t%s\n", code, code != 0 ? err.msg : "");
    dfc_rpc_client_free(f.c);
    return 0;
}

/* Runs this binary as uid with args; its stdout into out. argv is made before the fork: this
 * process has gRPC's threads, so the child only execs. */
static void run_caller(struct harness_fx *f, int uid, char *out, size_t size,
                       const char *const *args) {
    char uid_s[16];
    snprintf(uid_s, sizeof(uid_s), "%d", uid);
    const char *argv[10] = {self_exe, "--caller", uid_s, f->h.socket};
    int n = 4;
    for (int i = 0; args[i] != NULL && n < 9; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execv(self_exe, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < size && (k = read(p[0], out + got, size - 1 - got)) > 0) {
        got += (size_t)k;
    }
    out[got] = '\0';
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Publish and Unpublish only from root or the daemon's uid: another uid is PERMISSION_DENIED
 * and changes nothing; List stays open. */
static void test_other_uids_may_not_publish(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run a caller as another uid");
    }
    char id[65], out[1024], dir[600];
    struct dfc_error err;
    import(f, "u.bin", 3000, 9, id);
    run_caller(f, 65534, out, sizeof(out), (const char *const[]){"publish", "u", id, NULL});
    if (strncmp(out, "7\t", 2) != 0 || strstr(out, "uid 65534 may not") == NULL) {
        fail_msg("publish as uid 65534: %s", out);
    }
    volume_path(f, "u", NULL, dir, sizeof(dir));
    assert_false(exists(dir));
    assert_int_equal(publish1(f, "u", "f", id, NULL, &err), 0);
    run_caller(f, 65534, out, sizeof(out), (const char *const[]){"unpublish", "u", NULL});
    assert_int_equal(strncmp(out, "7\t", 2), 0);
    assert_true(exists(dir));
}

int main(int argc, char **argv) {
    if (harness_resolve_methods(rows, DFC_RPC_N(rows)) < 0) {
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "--caller") == 0) {
        return caller_main(argc, argv);
    }
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n <= 0) {
        perror("readlink /proc/self/exe");
        return 1;
    }
    self_exe[n] = '\0';
#define T(fn) cmocka_unit_test_setup_teardown(fn, harness_fx_setup, harness_fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_publish_unpublish_idempotent),
        T(test_volume_file_not_writable),
        T(test_bad_input),
        T(test_other_uids_may_not_publish),
        T(test_pins_survive_ttl_and_eviction),
        T(test_rm_hides_and_frees_at_last_unpublish),
        T(test_pins_survive_restarts),
        T(test_recovery_at_start),
    };
    return test_run_group(tests, NULL, NULL);
}
