/*
 * Integration tests of the trust boundary between socket callers: a real root dfdaemon,
 * dfcache run as uid 65534 (nobody), and RPCs made with nobody's credentials. Each attack is
 * performed the way it works against a store that shares callers' inodes or trusts ids:
 * poisoning the cache by rewriting an imported file, planting a setuid inode, forging a
 * content-derived id with content_for_calculating_task_id, and destroying other users' tasks.
 * Also the stored modes and the small stream rules. Every test needs root (to run as
 * another uid) and skips otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/digest.h"
#include "dfc/import.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "test_support.h"

#define NOBODY 65534

struct fx {
    struct harness h;
    struct dfc_rpc_client *c;
    char mine[400]; /* a directory of nobody's own */
    char out[8192], err[8192];
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    harness_open(&f->h, &f->c);
    snprintf(f->mine, sizeof(f->mine), "%s/nobody", f->h.dir);
    assert_int_equal(mkdir(f->mine, 0755), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(f->mine, NOBODY, NOBODY), 0);
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    int code = harness_close(&f->h, f->c);
    free(f);
    assert_int_equal(code, 0);
    return 0;
}

#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (geteuid() != 0) {                                                                      \
            test_skip("needs root: runs dfcache and RPCs as uid 65534");                           \
        }                                                                                          \
    } while (0)

/* dfcache as uid (-1: as this process, root). */
#define DFCACHE_AS(f, uid, ...)                                                                    \
    harness_dfcache(&(f)->h, uid, (f)->out, sizeof((f)->out), (f)->err, sizeof((f)->err),          \
                    (const char *const[]){__VA_ARGS__, NULL})

static void fill(char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) {
        buf[i] = (char)((i * 2654435761u + seed * 40503u) >> 13);
    }
}

/* Writes len bytes of pattern seed into path as nobody, in place (same inode) when it exists:
 * O_TRUNC keeps the inode, as an editor writing in place or a training job does. */
/* The bytes are made before the fork: this process has gRPC's threads, and a child that calls
 * malloc() may find the allocator's lock held by one of them forever (it hung a CI run under
 * ASan). The child makes only async-signal-safe calls. */
static void nobody_writes(const char *path, size_t len, unsigned seed) {
    char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    fill(buf, len, seed);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0) {
            _exit(126);
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        _exit(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0 ? 0 : 1);
    }
    free(buf);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void root_writes(const char *path, size_t len, unsigned seed) {
    char *buf = malloc(len ? len : 1);
    fill(buf, len, seed);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    free(buf);
}

static void store_path(struct fx *f, const char *id, char *buf, size_t size) {
    assert_true(strlen(f->h.store) + 140 < size);
    (void)!snprintf(buf, size, "%s/content/persistent-cache-tasks/%.3s/%.64s", f->h.store, id, id);
}

static size_t tmp_entries(struct fx *f) {
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    return harness_count(tmp);
}

/* ---- RPCs with nobody's credentials ---- */

/* SO_PEERCRED records the credentials at connect(), so the client is made and used with
 * euid 65534. Its own max_recv_msg keeps gRPC from sharing root's connection with it. */
static int as_nobody(struct fx *f, const struct dfc_rpc_client_method *method,
                     const ProtobufCMessage *req, bool stream, struct dfc_error *err) {
    struct dfc_rpc_client_opts o = {.max_recv_msg = ((size_t)16 << 20) + 1};
    if (setegid(NOBODY) < 0 || seteuid(NOBODY) < 0) {
        fprintf(stderr, "seteuid: %m\n");
        abort();
    }
    struct dfc_rpc_client *c = NULL;
    int r = harness_client_new(f->h.socket, &o, &c, err);
    if (r == 0 && !stream) {
        ProtobufCMessage *m = NULL;
        r = dfc_rpc_unary(c, method, req, 5000, &m, err);
        dfc_rpc_msg_free(m);
    } else if (r == 0) {
        struct dfc_rpc_stream *s;
        r = dfc_rpc_stream_open(c, method, 5000, &s, err);
        if (r == 0 && (r = dfc_rpc_stream_send(s, req, err)) == 0) {
            r = dfc_rpc_stream_close_send(s, err);
        }
        ProtobufCMessage *m;
        while (r == 0 && (r = dfc_rpc_stream_recv(s, method->resp, &m, err)) > 0) {
            dfc_rpc_msg_free(m);
            r = 0;
        }
        dfc_rpc_stream_free(s);
    }
    dfc_rpc_client_free(c);
    if (seteuid(0) < 0 || setegid(0) < 0) {
        abort();
    }
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* ---- item 2: poisoning the cache for other users ---- */

static void test_rewriting_an_imported_file_does_not_change_the_cache(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    const size_t len = (size_t)5 << 20;
    char mine[420], genuine[400], out[400], id[65], id2[65];
    snprintf(mine, sizeof(mine), "%s/f.bin", f->mine);
    snprintf(genuine, sizeof(genuine), "%s/genuine.bin", f->h.dir);
    snprintf(out, sizeof(out), "%s/exported.bin", f->h.dir);
    /* nobody imports its own file F (bytes A) by path, then rewrites F in place (bytes B). */
    nobody_writes(mine, len, 1);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress", "--transfer", "path", mine),
                     0);
    harness_done_id(f->out, id);
    nobody_writes(mine, len, 2);
    /* Root imports the genuine bytes A from its own file: the same content id, the task. */
    root_writes(genuine, len, 1);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", "--transfer", "path", genuine),
                     0);
    harness_done_id(f->out, id2);
    assert_string_equal(id, id2);
    /* A path (hard-link) export must give root bytes A, in an inode nobody cannot write. */
    assert_int_equal(DFCACHE_AS(f, -1, "export", "--no-progress", "-O", out, id), 0);
    assert_true(harness_same_file(genuine, out));
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_not_equal(st.st_uid, NOBODY);
    assert_int_equal(st.st_mode & S_IWOTH, 0);
    assert_false(st.st_gid == NOBODY && (st.st_mode & S_IWGRP) != 0);
}

static void test_many_imports_of_a_file_rewritten_in_place_stay_intact(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    enum { N = 200 };
    char src[400], expect[400], path[600], ids[N][65];
    snprintf(src, sizeof(src), "%s/churn.bin", f->h.dir);
    snprintf(expect, sizeof(expect), "%s/expect.bin", f->h.dir);
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    struct stat first;
    for (int i = 0; i < N; i++) {
        root_writes(src, 4096 + (size_t)i, 100 + (unsigned)i); /* same inode, new length */
        if (i == 0) {
            assert_int_equal(stat(src, &first), 0);
        }
        Dfdaemon__V2__UploadPersistentCacheTaskRequest r =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        r.path = src;
        r.persistent_replica_count = 1;
        r.ttl = &ttl;
        ProtobufCMessage *m = NULL;
        struct dfc_error err;
        assert_int_equal(dfc_rpc_unary(f->c, &hm.upload, &r.base, 10000, &m, &err), 0);
        snprintf(ids[i], sizeof(ids[i]), "%s", ((Common__V2__PersistentCacheTask *)m)->id);
        dfc_rpc_msg_free(m);
    }
    struct stat last;
    assert_int_equal(stat(src, &last), 0);
    assert_true(first.st_ino == last.st_ino); /* really rewritten in place */
    /* Every task still holds the bytes it was imported with... */
    for (int i = 0; i < N; i++) {
        root_writes(expect, 4096 + (size_t)i, 100 + (unsigned)i);
        store_path(f, ids[i], path, sizeof(path));
        assert_true(harness_same_file(expect, path));
    }
    /* ...so a restart finds none broken. */
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    harness_restart(&f->h);
    assert_true(harness_log_has(&f->h, "tasks=200 removed_temp=0 removed_orphans=0 "
                                       "removed_broken=0"));
}

static void test_a_setuid_file_is_never_shared(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    char dir[400], suid[420], out[420], path[600], id[65];
    snprintf(dir, sizeof(dir), "%s/sbin", f->h.dir);
    snprintf(suid, sizeof(suid), "%s/true", dir);
    snprintf(out, sizeof(out), "%s/true.out", f->mine);
    assert_int_equal(mkdir(dir, 0711), 0); /* nobody can pass through, not list */
    char cmd[1000];
    snprintf(cmd, sizeof(cmd), "cp /bin/true '%s' && chmod 04755 '%s'", suid, suid);
    assert_int_equal(system(cmd), 0);
    struct stat src;
    assert_int_equal(stat(suid, &src), 0);
    assert_true((src.st_mode & S_ISUID) != 0 && src.st_uid == 0);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress", "--transfer", "path", suid),
                     0);
    harness_done_id(f->out, id);
    /* The store does not hold the setuid inode... */
    struct stat st;
    store_path(f, id, path, sizeof(path));
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_ino != src.st_ino);
    assert_int_equal(st.st_mode & (S_ISUID | S_ISGID), 0);
    /* ...and an export into nobody's directory gives nobody no setuid file, not that inode. */
    assert_int_equal(DFCACHE_AS(f, NOBODY, "export", "--no-progress", "-O", out, id), 0);
    assert_int_equal(stat(out, &st), 0);
    assert_true(st.st_ino != src.st_ino);
    assert_int_equal(st.st_mode & (S_ISUID | S_ISGID), 0);
    assert_true(harness_same_file(suid, out));
}

/* ---- item 3: forging a task id ---- */

static void test_a_forged_content_id_is_refused(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    /* G: a small file whose bytes nobody knows (a public model card, a config). */
    static const char g_bytes[] = "model: resnet50\nweights: sha256 of the real thing\n";
    char g[400], x[420], id[65], forged[65];
    snprintf(g, sizeof(g), "%s/g.txt", f->h.dir);
    snprintf(x, sizeof(x), "%s/x.bin", f->mine);
    FILE *fp = fopen(g, "w");
    fputs(g_bytes, fp);
    fclose(fp);
    /* G's content-derived id (no tag, application or piece length) is SHA-256 of its bytes
     * followed by "PERSISTENT_CACHE": that string is the pre-image to pass. */
    char preimage[256];
    snprintf(preimage, sizeof(preimage), "%sPERSISTENT_CACHE", g_bytes);
    char g_id[65];
    assert_int_equal(dfc_sha256_hex(preimage, strlen(preimage), g_id), 0);
    nobody_writes(x, 3000, 7); /* other bytes X */
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress", "--transfer", "stream",
                                "--content-for-calculating-task-id", preimage, x),
                     0);
    harness_done_id(f->out, forged);
    assert_string_equal(forged, g_id); /* nobody registered X under G's id */
    /* Root imports the real G by path: the id is taken by other content. */
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", "--transfer", "path", g), 1);
    assert_non_null(strstr(f->err, "ALREADY_EXISTS"));
    assert_non_null(strstr(f->err, "is already taken"));
    assert_int_equal(tmp_entries(f), 0);
    /* Root may remove the forgery; then G imports under its own id. */
    assert_int_equal(DFCACHE_AS(f, -1, "rm", forged), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", "--transfer", "path", g), 0);
    harness_done_id(f->out, id);
    assert_string_equal(id, g_id);
}

/* ---- dedup only identical content ---- */

static void test_dedup_only_identical_content(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    char rootf[400], mine[420], y1[420], y2[420], id[65], id2[65];
    snprintf(rootf, sizeof(rootf), "%s/d.bin", f->h.dir);
    snprintf(mine, sizeof(mine), "%s/d.bin", f->mine);
    snprintf(y1, sizeof(y1), "%s/y1.bin", f->mine);
    snprintf(y2, sizeof(y2), "%s/y2.bin", f->mine);
    /* The same bytes from another uid: content-derived ids, the existing task. */
    root_writes(rootf, 100000, 3);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", rootf), 0);
    harness_done_id(f->out, id);
    nobody_writes(mine, 100000, 3);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress", "--transfer", "path", mine),
                     0);
    harness_done_id(f->out, id2);
    assert_string_equal(id, id2);
    assert_true(harness_log_has(&f->h, "existed=1 uid=65534"));
    /* The same content_for_calculating_task_id with other bytes: the id is taken. */
    nobody_writes(y1, 5000, 4);
    nobody_writes(y2, 5000, 5);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress",
                                "--content-for-calculating-task-id", "my-model-v1", y1),
                     0);
    harness_done_id(f->out, id);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress",
                                "--content-for-calculating-task-id", "my-model-v1", y2),
                     1);
    assert_non_null(strstr(f->err, "ALREADY_EXISTS"));
    assert_non_null(strstr(f->err, "already taken by other content"));
    assert_int_equal(tmp_entries(f), 0);
    /* The same string and bytes again by its importer: the existing task. */
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress",
                                "--content-for-calculating-task-id", "my-model-v1", y1),
                     0);
    harness_done_id(f->out, id2);
    assert_string_equal(id, id2);
}

/* ---- ownership of destructive calls ---- */

static void test_only_the_owner_or_root_may_delete_or_update(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    char rootf[400], mine[420], mine2[420], id_root[65], id_mine[65], id_mine2[65];
    snprintf(rootf, sizeof(rootf), "%s/o.bin", f->h.dir);
    snprintf(mine, sizeof(mine), "%s/o1.bin", f->mine);
    snprintf(mine2, sizeof(mine2), "%s/o2.bin", f->mine);
    root_writes(rootf, 7000, 8);
    nobody_writes(mine, 7000, 9);
    nobody_writes(mine2, 7000, 10);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", rootf), 0);
    harness_done_id(f->out, id_root);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "import", "--no-progress", mine), 0);
    harness_done_id(f->out, id_mine);
    assert_int_equal(
        DFCACHE_AS(f, NOBODY, "import", "--no-progress", "--transfer", "stream", mine2), 0);
    harness_done_id(f->out, id_mine2);
    /* nobody may not delete root's task... */
    assert_int_equal(DFCACHE_AS(f, NOBODY, "rm", id_root), 1);
    assert_non_null(strstr(f->err, "PERMISSION_DENIED"));
    assert_non_null(strstr(f->err, "belongs to uid 0; only its owner or root may delete it"));
    assert_null(strstr(f->err, "it it"));
    assert_int_equal(DFCACHE_AS(f, NOBODY, "stat", id_root), 0); /* stat stays open */
    /* ...nor turn its persistence on or off, by Update or by an export's persistent flag. */
    struct dfc_error err;
    Dfdaemon__V2__UpdatePersistentCacheTaskRequest up =
        DFDAEMON__V2__UPDATE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    up.task_id = id_root;
    up.persistent = 1;
    assert_int_equal(as_nobody(f, &hm.update, &up.base, false, &err), 7);
    assert_non_null(strstr(err.msg, "only its owner or root may update it"));
    assert_null(strstr(err.msg, "it it"));
    up.persistent = 0;
    assert_int_equal(as_nobody(f, &hm.update, &up.base, false, &err), 7);
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest dl =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    dl.task_id = id_root;
    dl.persistent = 1;
    assert_int_equal(as_nobody(f, &hm.download, &dl.base, true, &err), 7);
    assert_non_null(strstr(err.msg, "only its owner or root may make it persistent"));
    dl.persistent = 0; /* a plain export stays open to every caller */
    assert_int_equal(as_nobody(f, &hm.download, &dl.base, true, &err), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "stat", id_root), 0);
    /* nobody may update and delete its own (path and streamed imports alike). */
    up.task_id = id_mine;
    up.persistent = 1;
    assert_int_equal(as_nobody(f, &hm.update, &up.base, false, &err), 0);
    assert_int_equal(DFCACHE_AS(f, NOBODY, "rm", id_mine), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "stat", id_mine), 1);
    /* Root may delete anyone's. */
    assert_int_equal(DFCACHE_AS(f, -1, "rm", id_mine2), 0);
    assert_int_equal(DFCACHE_AS(f, -1, "stat", id_mine2), 1);
    assert_int_equal(DFCACHE_AS(f, -1, "rm", id_root), 0);
}

/* ---- stored modes ---- */

static mode_t mode_of(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static void test_stored_content_is_private(void **state) {
    NEED_ROOT();
    struct fx *f = *state;
    char src[400], file[600], shard[700], tasks[500], content[400], id[65];
    snprintf(src, sizeof(src), "%s/m.bin", f->h.dir);
    root_writes(src, 12345, 11);
    assert_int_equal(DFCACHE_AS(f, -1, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
    store_path(f, id, file, sizeof(file));
    snprintf(content, sizeof(content), "%s/content", f->h.store);
    snprintf(tasks, sizeof(tasks), "%s/persistent-cache-tasks", content);
    snprintf(shard, sizeof(shard), "%s/%.3s", tasks, id);
    assert_int_equal(mode_of(file), 0600);
    assert_int_equal(mode_of(shard), 0700);
    assert_int_equal(mode_of(tasks), 0700);
    assert_int_equal(mode_of(content), 0700);
    /* A store made with the old modes is fixed at open. */
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    chmod(file, 0644);
    chmod(shard, 0755);
    chmod(tasks, 0755);
    chmod(content, 0755);
    harness_restart(&f->h);
    assert_int_equal(mode_of(file), 0600);
    assert_int_equal(mode_of(shard), 0700);
    assert_int_equal(mode_of(tasks), 0700);
    assert_int_equal(mode_of(content), 0700);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_rewriting_an_imported_file_does_not_change_the_cache),
        T(test_many_imports_of_a_file_rewritten_in_place_stay_intact),
        T(test_a_setuid_file_is_never_shared),
        T(test_a_forged_content_id_is_refused),
        T(test_dedup_only_identical_content),
        T(test_only_the_owner_or_root_may_delete_or_update),
        T(test_stored_content_is_private),
    };
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
    return test_run_group(tests, NULL, NULL);
}
