/*
 * Integration tests: a real dfdaemon process on a temp dir and Unix socket, driven through
 * the dfcache binary and through the RPC client directly (for exact codes and messages).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <poll.h>
#include <grp.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/digest.h"
#include "dfc/dragonfly.h"
#include "dfc/import.pb-c.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)

/* ---- round trips ---- */

static void round_trip(struct harness_fx *f, size_t len, unsigned seed) {
    char src[400], out1[400], out2[400], id[65], id2[65];
    harness_path(&f->h, "src.bin", src, sizeof(src));
    harness_path(&f->h, "out1.bin", out1, sizeof(out1));
    harness_path(&f->h, "out2.bin", out2, sizeof(out2));
    unlink(out1);
    unlink(out2);
    harness_write_file(src, len, seed);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
    /* The daemon writes the file; then dfcache writes what the daemon streams. */
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "-O", out1, id), 0);
    assert_true(harness_same_file(src, out1));
    assert_int_equal(
        DFCACHE(f, "export", "--no-progress", "--transfer-from-dfdaemon", "-O", out2, id), 0);
    assert_true(harness_same_file(src, out2));
    /* Streaming the same bytes yields the same task. */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--transfer", "stream", src), 0);
    harness_done_id(f->out, id2);
    assert_string_equal(id, id2);
}

static void test_round_trips(void **state) {
    struct harness_fx *f = *state;
    round_trip(f, 0, 1);                   /* empty */
    round_trip(f, 1, 2);                   /* one byte */
    round_trip(f, 4 * MiB, 3);             /* exactly one piece */
    round_trip(f, 3 * 4 * MiB + 12345, 4); /* many pieces, a short last one */
}

static void test_import_hard_link_and_copy(void **state) {
    struct harness_fx *f = *state;
    char src[400], id[65];
    harness_path(&f->h, "linked.bin", src, sizeof(src));
    harness_write_file(src, MiB, 5);
    chmod(src, 0444); /* the daemon's and read-only: the only inode the store may share */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    struct stat st;
    assert_int_equal(stat(src, &st), 0);
    assert_int_equal(st.st_nlink, 2); /* the store holds a hard link on the same filesystem */
    assert_true(harness_log_has(&f->h, "mode=hardlink"));

    struct stat shm, store;
    if (stat("/dev/shm", &shm) < 0 || stat(f->h.dir, &store) < 0 || shm.st_dev == store.st_dev) {
        test_skip("the copy case needs /dev/shm on another filesystem");
    }
    char other[] = "/dev/shm/dfc-it-XXXXXX";
    int fd = mkstemp(other);
    close(fd);
    harness_write_file(other, 2 * MiB + 3, 6);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", other), 0);
    harness_done_id(f->out, id);
    assert_int_equal(stat(other, &st), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_true(harness_log_has(&f->h, "mode=copy"));
    char out[400];
    harness_path(&f->h, "copy-out.bin", out, sizeof(out));
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "-O", out, id), 0);
    assert_true(harness_same_file(other, out));
    unlink(other);
}

static void test_upstream_task_ids(void **state) {
    struct harness_fx *f = *state;
    char src[400], id[65];
    harness_path(&f->h, "vector.txt", src, sizeof(src));
    FILE *fp = fopen(src, "w");
    fputs("This is a test file", fp);
    fclose(fp);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--application", "app1", src), 0);
    harness_done_id(f->out, id);
    assert_string_equal(id, "0d0f8536f51227fda07141308f5ae8149b561b51b61c6517125f25dfa27acf5b");
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--tag", "tag1", src), 0);
    harness_done_id(f->out, id);
    assert_string_equal(id, "a98b76813681e30cf83733fe055792b86393bba6f18e3d89fd8c18253922d992");
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--content-for-calculating-task-id",
                             "This is a test file", src),
                     0);
    harness_done_id(f->out, id);
    assert_string_equal(id, "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249");
    /* The same through the stream path. */
    assert_int_equal(
        DFCACHE(f, "import", "--no-progress", "--transfer", "stream", "--tag", "tag1", src), 0);
    harness_done_id(f->out, id);
    assert_string_equal(id, "a98b76813681e30cf83733fe055792b86393bba6f18e3d89fd8c18253922d992");
}

static void test_stat_ls_rm(void **state) {
    struct harness_fx *f = *state;
    char src[400], id[65];
    harness_path(&f->h, "s.bin", src, sizeof(src));
    harness_write_file(src, 5 * MiB, 7);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--ttl", "2h", "--tag", "t1", src), 0);
    harness_done_id(f->out, id);
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    assert_non_null(strstr(f->out, id));
    assert_non_null(strstr(f->out, "State:                Succeeded"));
    assert_non_null(strstr(f->out, "Content length:       5.0 MiB"));
    assert_non_null(strstr(f->out, "Piece count:          2"));
    assert_non_null(strstr(f->out, "Tag:                  t1"));
    assert_non_null(strstr(f->out, "TTL:                  2h (expires in 1h59m)"));
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_non_null(strstr(f->out, id));
    assert_int_equal(DFCACHE(f, "rm", id), 0);
    assert_non_null(strstr(f->out, "Removed"));
    assert_int_equal(DFCACHE(f, "stat", id), 1);
    assert_non_null(strstr(f->err, "not found (NOT_FOUND)"));
    assert_int_equal(DFCACHE(f, "rm", id), 1);
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_null(strstr(f->out, id));
}

static void test_progress_bar_only_on_a_terminal(void **state) {
    struct harness_fx *f = *state;
    if (system("command -v script >/dev/null 2>&1") != 0) {
        test_skip("script(1) from util-linux provides the pseudo-terminal");
    }
    char src[400], cmd[2048], path[400];
    harness_path(&f->h, "bar.bin", src, sizeof(src));
    harness_write_file(src, 24 * MiB, 16);
    /* Piped: results only, no bar. */
    assert_int_equal(DFCACHE(f, "import", "--transfer", "stream", src), 0);
    assert_null(strstr(f->err, "ETA"));
    /* On a terminal: the bar, with bytes, rate and ETA, ending at 100%. */
    harness_path(&f->h, "pty.out", path, sizeof(path));
    int n = snprintf(cmd, sizeof(cmd),
                     "script -qec '%s import --transfer stream --tag bar -e %s %s' "
                     "/dev/null > %s 2>&1",
                     DFCACHE_BIN, f->h.socket, src, path);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    static char out[65536];
    FILE *fp = fopen(path, "r");
    size_t len = fread(out, 1, sizeof(out) - 1, fp);
    out[len] = '\0';
    fclose(fp);
    assert_non_null(strstr(out, "import ["));
    assert_non_null(strstr(out, "100% 24.0MiB/24.0MiB"));
    assert_non_null(strstr(out, "/s ETA "));
    assert_non_null(strstr(out, "Done: "));
    /* --no-progress silences it on a terminal too. */
    n = snprintf(cmd, sizeof(cmd),
                 "script -qec '%s import --no-progress --transfer stream "
                 "--tag quiet -e %s %s' /dev/null > %s 2>&1",
                 DFCACHE_BIN, f->h.socket, src, path);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    fp = fopen(path, "r");
    len = fread(out, 1, sizeof(out) - 1, fp);
    out[len] = '\0';
    fclose(fp);
    assert_null(strstr(out, "ETA"));
}

static void test_cli_usage_errors(void **state) {
    struct harness_fx *f = *state;
    assert_int_equal(DFCACHE(f, "import", "--ttl", "1m", "/etc/hostname"), 2);
    assert_non_null(strstr(f->err, "--ttl must be between 5m and 168h"));
    assert_int_equal(DFCACHE(f, "import", "--piece-length", "1MiB", "/etc/hostname"), 2);
    assert_int_equal(DFCACHE(f, "import", "--persistent-replica-count", "9", "/etc/hostname"), 2);
    assert_int_equal(DFCACHE(f, "import", "--transfer", "carrier-pigeon", "/etc/hostname"), 2);
    assert_int_equal(DFCACHE(f, "import"), 2);
    assert_int_equal(DFCACHE(f, "export", "abc"), 2);
    assert_non_null(strstr(f->err, "-O/--output is required"));
    assert_int_equal(DFCACHE(f, "import", "/no/such/file"), 1);
    assert_non_null(strstr(f->err, "/no/such/file"));
    assert_int_equal(DFCACHE(f, "import", f->h.dir), 1);
    assert_non_null(strstr(f->err, "not a regular file"));
    assert_int_equal(DFCACHE(f, "import", "--help"), 0);
    assert_non_null(strstr(f->out, "--persistent-replica-count"));
}

/* ---- every validation error, exact code and message ---- */

static int upload(struct harness_fx *f, Dfdaemon__V2__UploadPersistentCacheTaskRequest *req,
                  struct dfc_error *err) {
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(f->c, &hm.upload, &req->base, 10000, &resp, err);
    dfc_rpc_msg_free(resp);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static void test_upload_validation(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    char file[400], fifo[400];
    harness_path(&f->h, "v.bin", file, sizeof(file));
    harness_path(&f->h, "v.fifo", fifo, sizeof(fifo));
    harness_write_file(file, 10, 8);
    mkfifo(fifo, 0644);
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
#define REQ()                                                                                      \
    Dfdaemon__V2__UploadPersistentCacheTaskRequest r =                                             \
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;                                  \
    r.path = file;                                                                                 \
    r.persistent_replica_count = 2;                                                                \
    r.ttl = &ttl
    {
        REQ();
        assert_int_equal(upload(f, &r, &err), 0);
    }
    {
        REQ();
        r.path = "";
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "path is required");
    }
    {
        REQ();
        r.path = "relative/file";
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "path `relative/file` must be absolute");
    }
    {
        REQ();
        r.path = "/no/such/file";
        assert_int_equal(upload(f, &r, &err), 5);
        assert_string_equal(err.msg, "path `/no/such/file` does not exist");
    }
    {
        REQ();
        r.path = f->h.dir;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_non_null(strstr(err.msg, "is a directory, not a regular file"));
    }
    {
        REQ();
        r.path = fifo;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_non_null(strstr(err.msg, "is special, not a regular file"));
    }
    {
        REQ();
        r.persistent_replica_count = 0;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "persistent_replica_count must be between 1 and 5, got 0");
        r.persistent_replica_count = 6;
        assert_int_equal(upload(f, &r, &err), 3);
    }
    {
        REQ();
        r.opt_piece_length_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_PIECE_LENGTH_PIECE_LENGTH;
        r.piece_length = MiB;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_non_null(strstr(err.msg, "piece_length must be between"));
        r.piece_length = 65 * MiB;
        assert_int_equal(upload(f, &r, &err), 3);
    }
    {
        REQ();
        Google__Protobuf__Duration bad = GOOGLE__PROTOBUF__DURATION__INIT;
        bad.seconds = 60;
        r.ttl = &bad;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "ttl must be between 5m and 168h, got 1m");
        bad.seconds = 8 * 86400;
        assert_int_equal(upload(f, &r, &err), 3);
    }
    {
        REQ();
        r.opt_remote_ip_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        r.remote_ip = "not-an-ip";
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "remote_ip `not-an-ip` is not an IP address");
    }
    {
        REQ();
        static char big[2000];
        memset(big, 'x', sizeof(big) - 1);
        r.opt_tag_case = DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG;
        r.tag = big;
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "tag is longer than 1024 bytes");
    }
    {
        REQ();
        r.opt_content_for_calculating_task_id_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_CONTENT_FOR_CALCULATING_TASK_ID_CONTENT_FOR_CALCULATING_TASK_ID;
        r.content_for_calculating_task_id = "";
        assert_int_equal(upload(f, &r, &err), 3);
        assert_string_equal(err.msg, "content_for_calculating_task_id must not be empty");
    }
    {
        /* Without a ttl the configured default (24h) applies (new content: no dedupe). */
        REQ();
        harness_write_file(file, 11, 15);
        r.ttl = NULL;
        ProtobufCMessage *resp = NULL;
        assert_int_equal(dfc_rpc_unary(f->c, &hm.upload, &r.base, 10000, &resp, &err), 0);
        Common__V2__PersistentCacheTask *t = (void *)resp;
        assert_true(t->ttl->seconds == 86400);
        assert_int_equal(t->current_persistent_replica_count, 1);
        assert_string_equal(t->state, "Succeeded");
        dfc_rpc_msg_free(resp);
    }
#undef REQ
}

static int download(struct harness_fx *f, Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req,
                    int *ret_messages, struct dfc_error *err) {
    struct dfc_rpc_stream *s;
    int r = dfc_rpc_stream_open(f->c, &hm.download, 10000, &s, err);
    if (r == 0 && (r = dfc_rpc_stream_send(s, &req->base, err)) == 0) {
        r = dfc_rpc_stream_close_send(s, err);
    }
    int n = 0;
    ProtobufCMessage *m;
    while (r == 0 && (r = dfc_rpc_stream_recv(s, hm.download.resp, &m, err)) > 0) {
        dfc_rpc_msg_free(m);
        n++;
        r = 0;
    }
    dfc_rpc_stream_free(s);
    if (ret_messages) {
        *ret_messages = n;
    }
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static void test_download_validation(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    char src[400], out[400], id[65];
    harness_path(&f->h, "d.bin", src, sizeof(src));
    harness_path(&f->h, "d-out.bin", out, sizeof(out));
    harness_write_file(src, 9 * MiB, 9);
    chmod(src, 0444); /* read-only and the daemon's: imported as a hard link (see below) */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
#define REQ()                                                                                      \
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest r =                                           \
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;                                \
    r.task_id = id
    int n;
    {
        REQ();
        assert_int_equal(download(f, &r, &n, &err), 0);
        assert_int_equal(n, 1 + 3); /* started + three pieces */
    }
    {
        REQ();
        r.task_id = "";
        assert_int_equal(download(f, &r, NULL, &err), 3);
        assert_string_equal(err.msg, "task_id is required");
        r.task_id = "zz";
        assert_int_equal(download(f, &r, NULL, &err), 3);
        r.task_id = "0000000000000000000000000000000000000000000000000000000000000000";
        assert_int_equal(download(f, &r, NULL, &err), 5);
        assert_non_null(strstr(err.msg, "not found"));
    }
    {
        REQ();
        r.opt_output_path_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
        r.output_path = "relative.bin";
        assert_int_equal(download(f, &r, NULL, &err), 3);
        assert_string_equal(err.msg, "output_path `relative.bin` must be absolute");
        r.output_path = "/no/such/dir/out.bin";
        assert_int_equal(download(f, &r, NULL, &err), 5);
        r.output_path = src;                              /* exists */
        assert_int_equal(download(f, &r, NULL, &err), 0); /* it is this very content: a no-op */
        harness_write_file(out, 3, 1);
        r.output_path = out;
        assert_int_equal(download(f, &r, NULL, &err), 6);
        assert_non_null(strstr(err.msg, "already exists"));
        r.overwrite = 1;
        assert_int_equal(download(f, &r, NULL, &err), 0);
        assert_true(harness_same_file(src, out));
    }
    {
        REQ();
        r.force_hard_link = 1;
        assert_int_equal(download(f, &r, NULL, &err), 3);
        assert_string_equal(err.msg, "force_hard_link needs an output_path");
    }
    {
        REQ();
        r.opt_digest_case = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_DIGEST_DIGEST;
        r.digest = "md5:abc";
        assert_int_equal(download(f, &r, NULL, &err), 3);
        assert_non_null(strstr(err.msg, "must be crc32:<decimal>"));
        r.digest = "crc32:1";
        assert_int_equal(download(f, &r, NULL, &err), 15);
        assert_non_null(strstr(err.msg, "digest mismatch"));
        /* The right CRC passes, written with leading zeros too. */
        char padded[80];
        uint32_t crc = 0;
        static char chunk[1 << 16];
        FILE *cp = fopen(src, "r");
        for (size_t k; (k = fread(chunk, 1, sizeof(chunk), cp)) > 0;) {
            crc = dfc_crc32_update(crc, chunk, k);
        }
        fclose(cp);
        snprintf(padded, sizeof(padded), "crc32:000%u", crc);
        r.digest = padded;
        assert_int_equal(download(f, &r, NULL, &err), 0);
        /* The right digests pass. */
        char cmd[600], want[200];
        snprintf(cmd, sizeof(cmd), "sha256sum '%s' | cut -c1-64", src);
        FILE *p = popen(cmd, "r");
        assert_non_null(fgets(want + 7, sizeof(want) - 7, p));
        pclose(p);
        memcpy(want, "sha256:", 7);
        want[7 + 64] = '\0';
        r.digest = want;
        assert_int_equal(download(f, &r, NULL, &err), 0);
    }
    {
        REQ();
        r.opt_remote_ip_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_REMOTE_IP_REMOTE_IP;
        r.remote_ip = "300.1.1.1";
        assert_int_equal(download(f, &r, NULL, &err), 3);
    }
    struct stat shm, here;
    if (stat("/dev/shm", &shm) == 0 && stat(f->h.dir, &here) == 0 && shm.st_dev != here.st_dev) {
        REQ();
        r.opt_output_path_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
        r.output_path = "/dev/shm/dfc-it-force.bin";
        unlink(r.output_path);
        r.force_hard_link = 1;
        assert_int_equal(download(f, &r, NULL, &err), 9);
        assert_non_null(strstr(err.msg, "cannot hard link"));
        struct stat st;
        assert_int_equal(stat(r.output_path, &st), -1); /* nothing was left there */
    }
#undef REQ
    /* Stat validation. */
    Dfdaemon__V2__StatPersistentCacheTaskRequest s =
        DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    s.task_id = "nope";
    assert_int_equal(dfc_error_to_grpc(dfc_rpc_unary(f->c, &hm.stat, &s.base, 5000, &m, &err)), 3);
    /* A method of a known service that the daemon does not serve. */
    assert_int_equal(
        dfc_error_to_grpc(dfc_rpc_unary(f->c, &hm.delete_host, &s.base, 5000, &m, &err)), 12);
}

static int unary(struct harness_fx *f, const struct dfc_rpc_client_method *method,
                 const ProtobufCMessage *req, struct dfc_error *err) {
    ProtobufCMessage *m = NULL;
    int r = dfc_rpc_unary(f->c, method, req, 5000, &m, err);
    dfc_rpc_msg_free(m);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static void test_upload_service_and_local_stat_validation(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    char src[400], id[65];
    harness_path(&f->h, "u.bin", src, sizeof(src));
    harness_write_file(src, 1000, 18);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
    const char *unknown = "1111111111111111111111111111111111111111111111111111111111111111";

    Dfdaemon__V2__StatLocalPersistentCacheTaskRequest sl =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    sl.task_id = "bad";
    assert_int_equal(unary(f, &hm.stat_local, &sl.base, &err), 3);
    sl.task_id = (char *)unknown;
    assert_int_equal(unary(f, &hm.stat_local, &sl.base, &err), 5);
    sl.task_id = id;
    assert_int_equal(unary(f, &hm.stat_local, &sl.base, &err), 0);

    Dfdaemon__V2__UpdatePersistentCacheTaskRequest up =
        DFDAEMON__V2__UPDATE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    up.task_id = "";
    up.persistent = 1;
    assert_int_equal(unary(f, &hm.update, &up.base, &err), 3);
    up.task_id = (char *)unknown;
    assert_int_equal(unary(f, &hm.update, &up.base, &err), 5);
    up.task_id = id;
    assert_int_equal(unary(f, &hm.update, &up.base, &err), 0);

    Dfdaemon__V2__StatPersistentCacheTaskRequest st =
        DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    st.task_id = id;
    assert_int_equal(unary(f, &hm.up_stat, &st.base, &err), 0);

    Dfdaemon__V2__DeletePersistentCacheTaskRequest del =
        DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    del.task_id = "../../etc";
    assert_int_equal(unary(f, &hm.delete_task, &del.base, &err), 3);
    del.task_id = (char *)unknown; /* deleting what is not there is fine, as upstream */
    assert_int_equal(unary(f, &hm.delete_task, &del.base, &err), 0);
    del.task_id = id;
    assert_int_equal(unary(f, &hm.delete_task, &del.base, &err), 0);
    assert_int_equal(unary(f, &hm.up_stat, &st.base, &err), 5);
}

static void test_dfdaemon_command_line(void **state) {
    struct harness_fx *f = *state;
    char cmd[1200], out[400], bad[400];
    harness_path(&f->h, "cli.out", out, sizeof(out));
    harness_path(&f->h, "bad.yaml", bad, sizeof(bad));
    FILE *fp = fopen(bad, "w");
    fputs("storage:\n  dir: /tmp/x\n  kepp: true\n", fp);
    fclose(fp);
    struct {
        const char *args;
        int code;
        const char *text;
    } cases[] = {
        {"--config BAD", 2, "bad.yaml:3:3: unknown key `storage.kepp`"},
        {"--set gc.interval=soon", 2, "gc.interval: `soon` is not a duration"},
        {"--set no.such.key=1", 2, "unknown dfdaemon config key `no.such.key`"},
        {"--set gc.policy.diskLowThresholdPercent=90", 2, "must be below"},
        {"--storage-dir relative/dir", 2, "is not an absolute path"},
        {"--bogus", 2, "Usage: dfdaemon"},
        {"--print-config --set gc.interval=90s", 0, "interval: 1m30s"},
        {"--help", 0, "--print-config"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char args[600];
        if (strcmp(cases[i].args, "--config BAD") == 0) {
            snprintf(args, sizeof(args), "--config %s", bad);
        } else {
            snprintf(args, sizeof(args), "%s", cases[i].args);
        }
        snprintf(cmd, sizeof(cmd), "%s %s > %s 2>&1", DFDAEMON_BIN, args, out);
        int status = system(cmd);
        assert_int_equal(WEXITSTATUS(status), cases[i].code);
        static char text[65536];
        fp = fopen(out, "r");
        size_t n = fread(text, 1, sizeof(text) - 1, fp);
        text[n] = '\0';
        fclose(fp);
        if (strstr(text, cases[i].text) == NULL) {
            fprintf(stderr, "case `%s`: got:\n%s\n", args, text);
        }
        assert_non_null(strstr(text, cases[i].text));
    }
}

/* ---- streamed import protocol errors ---- */

static int stream_messages(struct harness_fx *f, const void **msgs, size_t n,
                           struct dfc_error *err) {
    struct dfc_rpc_stream *s;
    int r = dfc_rpc_stream_open(f->c, &hm.import, 10000, &s, err);
    for (size_t i = 0; i < n && r == 0; i++) {
        r = dfc_rpc_stream_send(s, (const ProtobufCMessage *)msgs[i], err);
    }
    ProtobufCMessage *m = NULL;
    if (r == 0 && (r = dfc_rpc_stream_close_send(s, err)) == 0) {
        r = dfc_rpc_stream_recv(s, hm.import.resp, &m, err);
    }
    dfc_rpc_msg_free(m);
    dfc_rpc_stream_free(s);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

static size_t count_lines(const char *text) {
    size_t n = 0;
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++) {
        n++;
    }
    return n;
}

static void test_stream_import_protocol(void **state) {
    struct harness_fx *f = *state;
    struct dfc_error err;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    Dfc__Dfdaemon__V1__ImportStart start = DFC__DFDAEMON__V1__IMPORT_START__INIT;
    start.ttl = &ttl;
    start.persistent_replica_count = 1;
    Dfc__Dfdaemon__V1__ImportFinish fin = DFC__DFDAEMON__V1__IMPORT_FINISH__INIT;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m_start =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m_start.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START;
    m_start.start = &start;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m_data =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m_data.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT;
    m_data.content.data = (uint8_t *)"hello";
    m_data.content.len = 5;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m_fin =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m_fin.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_FINISH;
    m_fin.finish = &fin;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m_empty =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;

    fin.content_length = 5;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start, &m_data, &m_fin}, 3, &err), 0);
    assert_int_equal(stream_messages(f, (const void *[]){&m_data}, 1, &err), 3);
    assert_string_equal(err.msg, "content arrived before start");
    assert_int_equal(stream_messages(f, (const void *[]){&m_start, &m_start}, 2, &err), 3);
    assert_string_equal(err.msg, "start was sent twice");
    assert_int_equal(stream_messages(f, (const void *[]){&m_fin}, 1, &err), 3);
    assert_int_equal(stream_messages(f, (const void *[]){&m_empty}, 1, &err), 3);
    assert_int_equal(stream_messages(f, (const void *[]){&m_start, &m_data}, 2, &err), 3);
    assert_string_equal(err.msg,
                        "the stream ended before its finish message; nothing was imported");
    fin.content_length = 6;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start, &m_data, &m_fin}, 3, &err), 3);
    assert_string_equal(err.msg, "finish.content_length is 6 but 5 bytes arrived");
    /* An announced length is enforced both ways. */
    start.opt_content_length_case =
        DFC__DFDAEMON__V1__IMPORT_START__OPT_CONTENT_LENGTH_CONTENT_LENGTH;
    start.content_length = 4;
    fin.content_length = 5;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start, &m_data, &m_fin}, 3, &err), 3);
    assert_string_equal(err.msg, "more content than the announced 4 bytes");
    start.content_length = 1ULL << 60; /* more than any disk */
    assert_int_equal(stream_messages(f, (const void *[]){&m_start}, 1, &err), 8);
    assert_non_null(strstr(err.msg, "not enough space"));
    start.opt_content_length_case = 0;
    /* Content after finish: refused, and nothing is imported. */
    assert_int_equal(DFCACHE(f, "ls"), 0);
    size_t listed = count_lines(f->out);
    m_data.content.data = (uint8_t *)"after";
    assert_int_equal(
        stream_messages(f, (const void *[]){&m_start, &m_data, &m_fin, &m_data}, 4, &err), 3);
    assert_string_equal(err.msg, "a message arrived after finish; nothing was imported");
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_int_equal(count_lines(f->out), listed);
    m_data.content.data = (uint8_t *)"hello";
    ttl.seconds = 10;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start}, 1, &err), 3);
    ttl.seconds = 3600;
    /* A negative nanos is named as given. */
    ttl.nanos = -1;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start}, 1, &err), 3);
    assert_string_equal(err.msg, "ttl must be between 5m and 168h, got seconds=3600 nanos=-1");
    ttl.nanos = 0;
    start.persistent_replica_count = 0;
    assert_int_equal(stream_messages(f, (const void *[]){&m_start}, 1, &err), 3);
    /* None of the failures left anything. */
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    assert_int_equal(harness_count(tmp), 0);
}

/* ---- lifecycle ---- */

static void test_restart_keeps_tasks(void **state) {
    struct harness_fx *f = *state;
    char src[400], out[400], id[65];
    harness_path(&f->h, "r.bin", src, sizeof(src));
    harness_path(&f->h, "r-out.bin", out, sizeof(out));
    harness_write_file(src, 6 * MiB, 10);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--transfer", "stream", src), 0);
    harness_done_id(f->out, id);
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    struct stat st;
    assert_int_equal(stat(f->h.socket, &st), -1); /* removed on a clean stop */
    assert_true(harness_log_has(&f->h, "event=dfdaemon.stopped"));
    harness_restart(&f->h);
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    assert_int_equal(
        DFCACHE(f, "export", "--no-progress", "--transfer-from-dfdaemon", "-O", out, id), 0);
    assert_true(harness_same_file(src, out));
}

static bool gc_done(void *arg) {
    struct harness_fx *f = arg;
    return harness_log_has(&f->h, "event=gc.done");
}

static void sql(struct harness_fx *f, const char *stmt) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "sqlite3 '%s/metadata/pcache.db' \"%s\"", f->h.store, stmt);
    assert_int_equal(system(cmd), 0);
}

static void test_gc_in_the_daemon(void **state) {
    /* The real daemon's GC thread on its real clock: time "passes" by moving the stored
     * timestamps back while the daemon is stopped, as a clock jump would. */
    struct harness_fx *f = *state;
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell");
    }
    char src[400], ids[4][65];
    for (int i = 0; i < 4; i++) {
        harness_path(&f->h, "gc.bin", src, sizeof(src));
        harness_write_file(src, 4 * MiB, 20 + (unsigned)i);
        assert_int_equal(DFCACHE(f, "import", "--no-progress", "--ttl", i == 0 ? "5m" : "2h", src),
                         0);
        harness_done_id(f->out, ids[i]);
    }
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    /* ids[0]: past its 5 minute TTL. ids[1], ids[2]: cached copies (not persistent), the
     * oldest; ids[3]: a persistent replica. 12 MiB left against a 10 MiB threshold: 120%. */
    char stmt[400];
    snprintf(stmt, sizeof(stmt),
             "UPDATE tasks SET created_at_ns = created_at_ns - 360000000000 WHERE id = '%s'",
             ids[0]);
    sql(f, stmt);
    snprintf(stmt, sizeof(stmt),
             "UPDATE tasks SET persistent = 0, updated_at_ns = updated_at_ns - 60000000000 "
             "WHERE id IN ('%s', '%s')",
             ids[1], ids[2]);
    sql(f, stmt);
    FILE *fp = fopen(f->h.config, "w");
    fprintf(fp,
            "download:\n  server:\n    socketPath: %s\nstorage:\n  dir: %s\n"
            "gc:\n  interval: 1s\n  policy:\n    diskThreshold: 10MiB\n",
            f->h.socket, f->h.store);
    fclose(fp);
    harness_restart(&f->h);
    assert_true(test_wait_for(gc_done, f, 10000));
    assert_true(harness_log_has(&f->h, "expired=1 evicted=2"));
    assert_int_equal(DFCACHE(f, "stat", ids[0]), 1); /* expired */
    assert_int_equal(DFCACHE(f, "stat", ids[1]), 1); /* evicted */
    assert_int_equal(DFCACHE(f, "stat", ids[2]), 1); /* evicted */
    assert_int_equal(DFCACHE(f, "stat", ids[3]), 0); /* a persistent replica is never evicted */
    char shard[600];
    snprintf(shard, sizeof(shard), "%s/content/persistent-cache-tasks/%.3s/%s", f->h.store, ids[1],
             ids[1]);
    struct stat st;
    assert_int_equal(stat(shard, &st), -1); /* its content went with it */
}

static void test_corrupt_store_refuses_then_discards(void **state) {
    /* A damaged metadata database: the daemon refuses to start and deletes nothing, until the
     * operator asks it to discard the store. */
    struct harness_fx *f = *state;
    char src[400], ids[3][65], content[400];
    for (int i = 0; i < 3; i++) {
        harness_path(&f->h, "c.bin", src, sizeof(src));
        harness_write_file(src, MiB, 30 + (unsigned)i);
        assert_int_equal(DFCACHE(f, "import", "--no-progress", "--transfer", "stream", src), 0);
        harness_done_id(f->out, ids[i]);
    }
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    char db[400];
    snprintf(db, sizeof(db), "%s/metadata/pcache.db", f->h.store);
    int fd = open(db, O_RDWR);
    assert_true(fd >= 0);
    unsigned char hdr[18];
    assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
    size_t page_size = (size_t)hdr[16] << 8 | hdr[17];
    page_size = page_size == 1 ? 65536 : page_size;
    char *junk = malloc(page_size);
    memset(junk, 0xa5, page_size);
    assert_int_equal(pwrite(fd, junk, page_size, (off_t)page_size),
                     (ssize_t)page_size); /* page 2 */
    free(junk);
    close(fd);
    snprintf(content, sizeof(content), "%s/content/persistent-cache-tasks", f->h.store);
    size_t before = harness_count(content);

    assert_int_equal(harness_run_daemon(&f->h, NULL), 1);
    assert_int_equal(harness_count(content), before); /* nothing was deleted */
    assert_true(harness_log_has(&f->h, "level=error event=dfdaemon.failed"));
    assert_true(harness_log_has(&f->h, "pcache.db` is corrupt"));
    assert_true(harness_log_has(&f->h, "3 content files (3145728 bytes)"));
    assert_true(harness_log_has(&f->h, "--discard-broken-store"));

    harness_restart_with(&f->h, "--discard-broken-store");
    assert_true(harness_log_has(&f->h, "level=warn event=storage.discarded"));
    assert_true(harness_log_has(&f->h, "reason=corrupt files=3 bytes=3145728"));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(DFCACHE(f, "stat", ids[i]), 1); /* gone */
    }
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--transfer", "stream", src), 0);
}

/* Sends start + some content of a larger announced import, and leaves the stream open. */
static struct dfc_rpc_stream *partial_import(struct harness_fx *f, size_t announced, size_t sent) {
    struct dfc_error err;
    struct dfc_rpc_stream *s;
    assert_int_equal(dfc_rpc_stream_open(f->c, &hm.import, 60000, &s, &err), 0);
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    Dfc__Dfdaemon__V1__ImportStart start = DFC__DFDAEMON__V1__IMPORT_START__INIT;
    start.ttl = &ttl;
    start.persistent_replica_count = 1;
    start.opt_content_length_case =
        DFC__DFDAEMON__V1__IMPORT_START__OPT_CONTENT_LENGTH_CONTENT_LENGTH;
    start.content_length = announced;
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START;
    m.start = &start;
    assert_int_equal(dfc_rpc_stream_send(s, &m.base, &err), 0);
    uint8_t *chunk = calloc(1, MiB);
    for (size_t done = 0; done < sent; done += MiB) {
        Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest d =
            DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        d.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT;
        d.content.data = chunk;
        d.content.len = MiB;
        assert_int_equal(dfc_rpc_stream_send(s, &d.base, &err), 0);
    }
    free(chunk);
    return s;
}

static bool spool_present(void *arg) {
    struct harness_fx *f = arg;
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    return harness_count(tmp) == 1;
}

static bool spool_gone(void *arg) {
    return !spool_present(arg);
}

static void assert_store_empty(struct harness_fx *f) {
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/tmp", f->h.store);
    assert_int_equal(harness_count(dir), 0);
    snprintf(dir, sizeof(dir), "%s/content/persistent-cache-tasks", f->h.store);
    assert_int_equal(harness_count(dir), 0);
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_null(strchr(strchr(f->out, '\n') + 1, '\n')); /* the header line only */
}

static void test_kill9_mid_import_leaves_nothing(void **state) {
    struct harness_fx *f = *state;
    struct dfc_rpc_stream *s = partial_import(f, 64 * MiB, 16 * MiB);
    assert_true(test_wait_for(spool_present, f, 5000));
    harness_stop(&f->h, SIGKILL);
    dfc_rpc_stream_free(s);
    harness_restart(&f->h);
    assert_true(harness_log_has(&f->h, "removed_temp=1"));
    assert_store_empty(f);
}

static void test_cancelled_stream_leaves_nothing(void **state) {
    struct harness_fx *f = *state;
    struct dfc_rpc_stream *s = partial_import(f, 64 * MiB, 8 * MiB);
    assert_true(test_wait_for(spool_present, f, 5000));
    dfc_rpc_stream_cancel(s);
    dfc_rpc_stream_free(s);
    assert_true(test_wait_for(spool_gone, f, 5000));
    assert_store_empty(f);
    /* The daemon goes on serving. */
    char src[400];
    harness_path(&f->h, "after.bin", src, sizeof(src));
    harness_write_file(src, 100, 11);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
}

static void test_peer_credentials_are_checked(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run dfcache as another uid");
    }
    const int nobody = 65534;
    char secret[400], shared[400], locked[400], out[420];
    harness_path(&f->h, "secret.bin", secret, sizeof(secret));
    harness_path(&f->h, "shared.bin", shared, sizeof(shared));
    harness_path(&f->h, "locked", locked, sizeof(locked));
    harness_write_file(secret, 1000, 12);
    chmod(secret, 0600); /* root only */
    harness_write_file(shared, 1000, 13);
    chmod(shared, 0644);
    mkdir(locked, 0700);
    assert_true(snprintf(out, sizeof(out), "%s/out.bin", locked) < (int)sizeof(out));
    const char *argv_secret[] = {"import", "--no-progress", "--transfer", "path", secret, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, nobody, f->out, sizeof(f->out), f->err, sizeof(f->err), argv_secret),
        1);
    assert_non_null(strstr(f->err, "uid 65534 cannot read"));
    assert_non_null(strstr(f->err, "PERMISSION_DENIED"));
    /* Auto mode cannot read it to stream it either: refused before anything is sent. */
    const char *argv_auto[] = {"import", "--no-progress", secret, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, nobody, f->out, sizeof(f->out), f->err, sizeof(f->err), argv_auto),
        1);
    const char *argv_shared[] = {"import", "--no-progress", "--transfer", "path", shared, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, nobody, f->out, sizeof(f->out), f->err, sizeof(f->err), argv_shared),
        0);
    char id[65];
    harness_done_id(f->out, id);
    /* nobody may not make the root daemon write into a directory it cannot write. */
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest r =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    (void)r;
    const char *argv_export[] = {"export", "--no-progress", "-O", out, id, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, nobody, f->out, sizeof(f->out), f->err, sizeof(f->err), argv_export),
        1);
    assert_non_null(strstr(f->err, "PERMISSION_DENIED"));
    struct stat st;
    assert_int_equal(stat(out, &st), -1);
}

static void test_an_acl_lets_the_caller_import_by_path(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0 || system("command -v setfacl >/dev/null 2>&1") != 0) {
        test_skip("needs root (to run as another uid) and setfacl");
    }
    char file[400], cmd[600], id[65];
    harness_path(&f->h, "acl.bin", file, sizeof(file));
    harness_write_file(file, 5000, 17);
    chmod(file, 0600);
    snprintf(cmd, sizeof(cmd), "setfacl -m u:65534:r '%s'", file);
    if (system(cmd) != 0) {
        test_skip("the filesystem has no ACLs");
    }
    /* The daemon acts as the caller, so the kernel applies the ACL: the path import works... */
    const char *path_only[] = {"import", "--no-progress", "--transfer", "path", file, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, 65534, f->out, sizeof(f->out), f->err, sizeof(f->err), path_only),
        0);
    harness_done_id(f->out, id);
    assert_true(harness_log_has(&f->h, "bytes=5000 pieces=1 existed=0 uid=65534"));
    /* ...and so does auto mode, by path too: nothing is streamed. */
    const char *autom[] = {"import", "--no-progress", file, NULL};
    assert_int_equal(
        harness_dfcache(&f->h, 65534, f->out, sizeof(f->out), f->err, sizeof(f->err), autom), 0);
    char id2[65];
    harness_done_id(f->out, id2);
    assert_string_equal(id, id2);
    assert_false(harness_log_has(&f->h, "mode=stream"));
}

/* ---- acting as another uid: attacks on the root daemon ----
 *
 * The calls must come from a process that runs as the attacker (SO_PEERCRED), so the test
 * binary re-executes itself as that uid ("--caller", below main) and prints what the daemon
 * answered: "<grpc code>\t<message>". Races loop there, without a process per try. */

static char self_exe[PATH_MAX];

/* Runs this binary as uid (and gid uid) with args; captures its stdout. Returns its exit code.
 * argv is made before the fork: this process has gRPC's threads, so the child calls only
 * async-signal-safe functions. */
static int run_caller(struct harness_fx *f, int uid, char *out, size_t size,
                      const char *const *args) {
    char uid_s[16];
    snprintf(uid_s, sizeof(uid_s), "%d", uid);
    const char *argv[16] = {self_exe, "--caller", uid_s, f->h.socket};
    int n = 4;
    for (int i = 0; args[i] != NULL && n < 15; i++) {
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
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The gRPC code the caller got for a path import of path (0: OK); its message into msg. */
static int upload_as(struct harness_fx *f, int uid, const char *path, char *msg, size_t size) {
    char out[2048];
    assert_int_equal(
        run_caller(f, uid, out, sizeof(out), (const char *const[]){"upload", path, NULL}), 0);
    char *tab = strchr(out, '\t');
    assert_non_null(tab);
    snprintf(msg, size, "%s", tab + 1);
    return (int)strtol(out, NULL, 10);
}

/* The gRPC code of an export as uid: output, overwrite and force_hard_link. */
static int export_as(struct harness_fx *f, int uid, const char *id, const char *output,
                     bool overwrite, bool force, char *msg, size_t size) {
    char out[2048];
    assert_int_equal(run_caller(f, uid, out, sizeof(out),
                                (const char *const[]){"export", id, output, overwrite ? "1" : "0",
                                                      force ? "1" : "0", NULL}),
                     0);
    char *tab = strchr(out, '\t');
    assert_non_null(tab);
    snprintf(msg, size, "%s", tab + 1);
    return (int)strtol(out, NULL, 10);
}

static void make_dir(const char *path, mode_t mode, uid_t uid) {
    assert_int_equal(mkdir(path, mode), 0);
    assert_int_equal(chown(path, uid, uid), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* Imports a file of len bytes as root by path; its id into id. */
static void import_as_root(struct harness_fx *f, const char *name, size_t len, unsigned seed,
                           char id[65]) {
    char src[400];
    harness_path(&f->h, name, src, sizeof(src));
    harness_write_file(src, len, seed);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
}

static size_t count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, ".dfcache-", 9) == 0;
    }
    closedir(d);
    return n;
}

/* Item 1: the rights check and the export resolved the output path separately, so a
 * directory symlink swapped in between let a stranger replace a root-only file (and leaked
 * temp files where it cannot write). Now the daemon resolves the directory once, as the
 * caller, and the kernel refuses the locked directory whichever way the race goes. */
static void test_export_symlink_race_cannot_write_as_root(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run the attacker as another uid");
    }
    const int nobody = 65534;
    char id[65], d[400], mine[420], locked[400], victim[420], link[420], alt[420], out[440];
    import_as_root(f, "race-src.bin", 8 * MiB, 21, id);
    harness_path(&f->h, "race", d, sizeof(d));
    harness_path(&f->h, "race-locked", locked, sizeof(locked));
    snprintf(mine, sizeof(mine), "%s/mine", d);
    snprintf(link, sizeof(link), "%s/link", d);
    snprintf(alt, sizeof(alt), "%s/alt", d);
    snprintf(victim, sizeof(victim), "%s/victim", locked);
    snprintf(out, sizeof(out), "%s/victim", link);
    make_dir(d, 0755, nobody);
    make_dir(mine, 0755, nobody);
    make_dir(locked, 0700, 0);
    harness_write_file(victim, 100, 22);
    chmod(victim, 0600);
    struct stat before, after;
    assert_int_equal(stat(victim, &before), 0);
    assert_int_equal(symlink(mine, link), 0);
    assert_int_equal(symlink(locked, alt), 0);
    assert_int_equal(lchown(link, nobody, nobody), 0);
    assert_int_equal(lchown(alt, nobody, nobody), 0);
    /* The flipper swaps the two names as fast as it can, as the attacker. */
    pid_t flipper = fork();
    assert_true(flipper >= 0);
    if (flipper == 0) {
        if (setgid(nobody) != 0 || setuid(nobody) != 0) {
            _exit(1);
        }
        for (;;) {
            (void)renameat2(AT_FDCWD, link, AT_FDCWD, alt, RENAME_EXCHANGE);
        }
    }
    /* The digest check sits between the old rights check and the export: a wide window. */
    char src[400], digest[DFC_CRC32_DIGEST_MAX], result[256];
    harness_path(&f->h, "race-src.bin", src, sizeof(src));
    int fd = open(src, O_RDONLY);
    char *buf = malloc(8 * MiB);
    assert_int_equal(read(fd, buf, 8 * MiB), (ssize_t)(8 * MiB));
    close(fd);
    dfc_crc32_format(dfc_crc32_update(0, buf, 8 * MiB), digest);
    free(buf);
    int code =
        run_caller(f, nobody, result, sizeof(result),
                   (const char *const[]){"export-loop", id, out, digest, "2000", "60000", NULL});
    kill(flipper, SIGKILL);
    waitpid(flipper, NULL, 0);
    assert_int_equal(code, 0);
    print_message("export race as uid %d: %s\n", nobody, result);
    int ok = 0, denied = 0, other = 0;
    assert_int_equal(sscanf(result, "ok=%d denied=%d other=%d", &ok, &denied, &other), 3);
    assert_true(ok + denied + other > 0);
    size_t leaked = count_temp_files(locked);
    assert_int_equal(stat(victim, &after), 0);
    print_message("victim %s, %zu temp files leaked beside it\n",
                  after.st_ino != before.st_ino ? "REPLACED" : "untouched", leaked);
    /* The victim is untouched: same inode, owner, mode and bytes; nothing left beside it. */
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(after.st_uid, 0);
    assert_int_equal(after.st_mode & 07777, 0600);
    assert_int_equal(after.st_size, 100);
    assert_int_equal(leaked, 0);
    assert_int_equal(count_temp_files(mine), 0);
    assert_int_equal(other, 0);
}

/* Item 4: the daemon opened the caller's path as root before it checked rights, so a
 * stranger learned what exists in directories it cannot search. */
static void test_no_existence_oracle(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run the caller as another uid");
    }
    char locked[400], there[420], missing[420], m1[512], m2[512];
    harness_path(&f->h, "oracle", locked, sizeof(locked));
    make_dir(locked, 0700, 0);
    snprintf(there, sizeof(there), "%s/there.bin", locked);
    snprintf(missing, sizeof(missing), "%s/missing.bin", locked);
    harness_write_file(there, 100, 23);
    chmod(there, 0644);
    int c1 = upload_as(f, 65534, there, m1, sizeof(m1));
    int c2 = upload_as(f, 65534, missing, m2, sizeof(m2));
    print_message("existing: %d %s; missing: %d %s", c1, m1, c2, m2);
    assert_int_equal(c1, 7); /* PERMISSION_DENIED */
    assert_int_equal(c2, 7);
    assert_non_null(strstr(m1, "uid 65534 cannot read"));
    assert_non_null(strstr(m2, "uid 65534 cannot read"));
}

struct blocked_writer {
    pid_t pid;
    int status_fd; /* becomes readable when the writer's open() returned */
};

static bool readable(void *arg) {
    struct pollfd p = {.fd = *(int *)arg, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void start_writer(const char *fifo, struct blocked_writer *w) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    w->pid = fork();
    assert_true(w->pid >= 0);
    if (w->pid == 0) {
        close(p[0]);
        int fd = open(fifo, O_WRONLY); /* blocks until someone opens it for reading */
        (void)!write(p[1], fd >= 0 ? "o" : "e", 1);
        _exit(0);
    }
    close(p[1]);
    w->status_fd = p[0];
}

/* True when the writer is still blocked after a generous wait; then ends it. */
static bool writer_still_blocked(const char *fifo, struct blocked_writer *w) {
    bool released = test_wait_for(readable, &w->status_fd, 500);
    if (!released) { /* let it go: open the FIFO for reading ourselves */
        int fd = open(fifo, O_RDONLY | O_NONBLOCK);
        (void)test_wait_for(readable, &w->status_fd, 5000);
        close(fd);
    }
    waitpid(w->pid, NULL, 0);
    close(w->status_fd);
    return !released;
}

/* Item 4: the daemon opened FIFOs and devices as root (releasing a blocked writer) before it
 * looked at what they were. Now they are refused before anything opens them for reading. */
static void test_fifos_and_devices_are_never_opened(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run the caller as another uid");
    }
    char fifo[400], msg[512];
    harness_path(&f->h, "root.fifo", fifo, sizeof(fifo));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct blocked_writer w;
    start_writer(fifo, &w);
    int code = upload_as(f, 65534, fifo, msg, sizeof(msg));
    assert_true(writer_still_blocked(fifo, &w));
    assert_int_equal(code, 3); /* INVALID_ARGUMENT */
    assert_non_null(strstr(msg, "is special, not a regular file (a FIFO)"));
    /* Refused before it is opened even for root. */
    start_writer(fifo, &w);
    code = upload_as(f, 0, fifo, msg, sizeof(msg));
    assert_true(writer_still_blocked(fifo, &w));
    assert_int_equal(code, 3);
    assert_int_equal(upload_as(f, 65534, "/dev/null", msg, sizeof(msg)), 3);
    assert_non_null(strstr(msg, "character device"));
}

/* Item 4: /proc/self/fd/N resolved in the daemon names the daemon's own descriptors; its
 * /proc files are readable by the daemon whatever the caller's identity. */
static void test_proc_magic_links_are_refused(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run the caller as another uid");
    }
    char path[64], msg[512];
    /* The daemon's stderr is its log file, a regular file. */
    assert_int_equal(upload_as(f, 65534, "/proc/self/fd/2", msg, sizeof(msg)), 3);
    assert_non_null(strstr(msg, "magic link"));
    snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)f->h.pid);
    assert_int_equal(upload_as(f, 65534, path, msg, sizeof(msg)), 3);
    assert_non_null(strstr(msg, "magic link"));
    snprintf(path, sizeof(path), "/proc/%d/cwd/%s", (int)f->h.pid, f->h.log + 1);
    assert_int_equal(upload_as(f, 65534, path, msg, sizeof(msg)), 3);
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)f->h.pid);
    assert_int_equal(upload_as(f, 65534, path, msg, sizeof(msg)), 3);
    assert_non_null(strstr(msg, "is in /proc"));
    assert_int_equal(upload_as(f, 0, "/proc/self/status", msg, sizeof(msg)), 3);
}

/* Files an export creates belong to the caller; a hard link happens only where the kernel
 * lets the caller make it (fs.protected_hardlinks), else the content is copied. */
static void test_export_acts_as_the_caller(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0) {
        test_skip("needs root to run the caller as another uid");
    }
    const int nobody = 65534;
    char id[65], mine[400], out[420], linked[420], msg[512];
    import_as_root(f, "own-src.bin", 3 * MiB, 24, id);
    harness_path(&f->h, "own", mine, sizeof(mine));
    make_dir(mine, 0755, nobody);
    snprintf(out, sizeof(out), "%s/copy.bin", mine);
    snprintf(linked, sizeof(linked), "%s/linked.bin", mine);
    assert_int_equal(export_as(f, nobody, id, out, false, false, msg, sizeof(msg)), 0);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_uid, nobody);
    assert_int_equal(st.st_gid, nobody);
    assert_int_equal(st.st_nlink, 1); /* a copy, not root's inode */
    char src[400];
    harness_path(&f->h, "own-src.bin", src, sizeof(src));
    assert_true(harness_same_file(src, out));
    /* Root's content is not the caller's to hard-link: refused, and nothing is left. */
    int code = export_as(f, nobody, id, linked, false, true, msg, sizeof(msg));
    print_message("forced hard link as uid %d: %d %s", nobody, code, msg);
    assert_int_equal(code, 7);
    assert_non_null(strstr(msg, "the kernel refused uid 65534 a hard link"));
    assert_int_equal(lstat(linked, &st), -1);
    assert_int_equal(count_temp_files(mine), 0);
}

static void test_auto_passes_fd_from_another_mount_namespace(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0 || system("unshare -m true 2>/dev/null") != 0) {
        test_skip("needs root and unshare(1) for a private mount namespace");
    }
    /* In a private namespace, a tmpfs hides the directory's real contents from the daemon's
     * view: the file at the same path is a different one (or absent) for the daemon. */
    char dir[400], file[420], cmd[4096], id[65];
    harness_path(&f->h, "pod", dir, sizeof(dir));
    mkdir(dir, 0755);
    assert_true(snprintf(file, sizeof(file), "%s/model.bin", dir) < (int)sizeof(file));
    harness_write_file(file, 100, 14); /* what the daemon sees at that path */
    int n = snprintf(
        cmd, sizeof(cmd),
        "unshare -m sh -c 'mount -t tmpfs none %s && "
        "head -c 3000000 /dev/urandom > %s && sha256sum %s | cut -c1-64 > %s/../pod.sum && "
        "%s import --no-progress -e %s %s' > %s/ns.out 2>&1",
        dir, file, file, dir, DFCACHE_BIN, f->h.socket, file, f->h.dir);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    char path[400], line[200];
    snprintf(path, sizeof(path), "%s/ns.out", f->h.dir);
    FILE *p = fopen(path, "r");
    assert_non_null(fgets(line, sizeof(line), p));
    fclose(p);
    harness_done_id(line, id);
    /* The daemon refused its own view (identity mismatch), so dfcache passed the descriptor
     * of the pod's file on the sibling socket (test_fd_import.c has the stream fallback). */
    assert_true(harness_log_has(&f->h, "bytes=3000000 pieces=1 existed=0 uid=0 source=fd"));
    assert_int_equal(DFCACHE(f, "stat", "--bytes", id), 0);
    assert_non_null(strstr(f->out, "Content length:       3000000"));
}

/* A caller in another mount namespace (a pod; root in it, as many pods are) gets no path
 * resolved by the daemon: its path import is refused, and its export is written by dfcache
 * into the pod's own view, never by the daemon into the file of that name in the host's. */
static void test_another_mount_namespace_gets_no_daemon_path(void **state) {
    struct harness_fx *f = *state;
    if (geteuid() != 0 || system("unshare -m true 2>/dev/null") != 0) {
        test_skip("needs root and unshare(1) for a private mount namespace");
    }
    char dir[400], src[420], out[420], cmd[4096], id[65], log[420];
    harness_path(&f->h, "pod2", dir, sizeof(dir));
    mkdir(dir, 0755);
    assert_true(snprintf(src, sizeof(src), "%s/src.bin", f->h.dir) < (int)sizeof(src));
    assert_true(snprintf(out, sizeof(out), "%s/out.bin", dir) < (int)sizeof(out));
    assert_true(snprintf(log, sizeof(log), "%s/ns2.out", f->h.dir) < (int)sizeof(log));
    harness_write_file(src, 300000, 22);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
    /* The export: dfcache learns that the daemon will not write `out` for it, and receives
     * the pieces; the bytes are in the pod's view of `out` and nowhere in the daemon's. */
    int n = snprintf(cmd, sizeof(cmd),
                     "unshare -m sh -c 'mount -t tmpfs none %s && "
                     "%s export --no-progress -e %s -O %s %s && cmp %s %s' > %s 2>&1",
                     dir, DFCACHE_BIN, f->h.socket, out, id, out, src, log);
    assert_true(n < (int)sizeof(cmd));
    int code = system(cmd);
    if (code != 0) {
        char shown[600];
        snprintf(shown, sizeof(shown), "cat %s >&2", log);
        (void)!system(shown);
    }
    assert_int_equal(code, 0);
    struct stat st;
    assert_int_equal(stat(out, &st), -1); /* the daemon's view: nothing was written */
    assert_int_equal(errno, ENOENT);
    /* What dfcache acted on: the daemon's refusal carries the typed reason in its trailer, and
     * the same export from the daemon's own namespace succeeds without one. */
    char reply[200], host_out[420];
    n = snprintf(cmd, sizeof(cmd), "unshare -m %s --caller 0 %s export-reason %s %s > %s 2>&1",
                 self_exe, f->h.socket, id, out, log);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    FILE *rp = fopen(log, "r");
    assert_non_null(rp);
    assert_non_null(fgets(reply, sizeof(reply), rp));
    fclose(rp);
    assert_string_equal(reply, "9\t" DFC_REASON_OTHER_MOUNT_NS "\n");
    assert_true(snprintf(host_out, sizeof(host_out), "%s/host-out.bin", f->h.dir) <
                (int)sizeof(host_out));
    assert_int_equal(run_caller(f, 0, reply, sizeof(reply),
                                (const char *const[]){"export-reason", id, host_out, NULL}),
                     0);
    assert_string_equal(reply, "0\t\n");
    /* The path import, of a file both views share: refused, naming the namespace. */
    n = snprintf(cmd, sizeof(cmd),
                 "unshare -m %s import --transfer path --no-progress -e %s %s > %s 2>&1",
                 DFCACHE_BIN, f->h.socket, src, log);
    assert_true(n < (int)sizeof(cmd));
    code = system(cmd);
    assert_true(WIFEXITED(code) && WEXITSTATUS(code) == 1);
    FILE *p = fopen(log, "r");
    assert_non_null(p);
    char text[2048] = "";
    size_t got = fread(text, 1, sizeof(text) - 1, p);
    fclose(p);
    text[got] = '\0';
    assert_non_null(strstr(text, "runs in another mount namespace than the daemon"));
}

/* ---- --caller: this binary re-executed as another uid (run_caller) ----
 *   --caller UID SOCKET upload PATH
 *   --caller UID SOCKET export TASK_ID OUTPUT OVERWRITE FORCE_HARD_LINK
 *   --caller UID SOCKET export-reason TASK_ID OUTPUT   ("<grpc code>\t<x-dfc-reason>")
 *   --caller UID SOCKET export-loop TASK_ID OUTPUT DIGEST MAX_TRIES MAX_MS
 * print "<grpc code>\t<message>" (the loop: "ok=N denied=N other=N") and exit 0. */

/* An export of id into output by the daemon; with reason, the DFC_REASON_MD trailer of its
 * status into reason ("" when none). */
static int caller_export(struct dfc_rpc_client *c, const char *id, const char *output,
                         bool overwrite, bool force, const char *digest, char reason[32],
                         struct dfc_error *err) {
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest r =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    r.task_id = (char *)id;
    r.opt_output_path_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
    r.output_path = (char *)output;
    r.overwrite = overwrite;
    r.force_hard_link = force;
    if (digest != NULL) {
        r.opt_digest_case = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_DIGEST_DIGEST;
        r.digest = (char *)digest;
    }
    struct dfc_rpc_stream *st = NULL;
    int rc = dfc_rpc_stream_open(c, &hm.download, 30000, &st, err);
    if (rc == 0 && (rc = dfc_rpc_stream_send(st, &r.base, err)) == 0) {
        rc = dfc_rpc_stream_close_send(st, err);
    }
    ProtobufCMessage *m;
    while (rc == 0 && (rc = dfc_rpc_stream_recv(st, hm.download.resp, &m, err)) > 0) {
        dfc_rpc_msg_free(m);
        rc = 0;
    }
    if (reason != NULL &&
        (st == NULL || dfc_rpc_stream_trailer(st, DFC_REASON_MD, reason, 32) < 0)) {
        reason[0] = '\0';
    }
    dfc_rpc_stream_free(st);
    return rc < 0 ? dfc_error_to_grpc(rc) : 0;
}

static int caller_main(int argc, char **argv) {
    if (argc < 5) {
        return 2;
    }
    uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
        perror("caller: drop to uid");
        return 2;
    }
    struct dfc_rpc_client *c;
    struct dfc_error err = {0};
    if (harness_client_new(argv[3], NULL, &c, &err) < 0) {
        return 2;
    }
    const char *op = argv[4];
    int code = 0;
    bool bad = false;
    if (strcmp(op, "upload") == 0 && argc == 6) {
        Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
        ttl.seconds = 3600;
        Dfdaemon__V2__UploadPersistentCacheTaskRequest r =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        r.path = argv[5];
        r.persistent_replica_count = 1;
        r.ttl = &ttl;
        ProtobufCMessage *resp = NULL;
        int rc = dfc_rpc_unary(c, &hm.upload, &r.base, 30000, &resp, &err);
        dfc_rpc_msg_free(resp);
        code = rc < 0 ? dfc_error_to_grpc(rc) : 0;
        printf("%d\t%s\n", code, rc < 0 ? err.msg : "");
    } else if (strcmp(op, "export") == 0 && argc == 9) {
        code = caller_export(c, argv[5], argv[6], argv[7][0] == '1', argv[8][0] == '1', NULL, NULL,
                             &err);
        printf("%d\t%s\n", code, code != 0 ? err.msg : "");
    } else if (strcmp(op, "export-reason") == 0 && argc == 7) {
        char reason[32];
        code = caller_export(c, argv[5], argv[6], true, false, NULL, reason, &err);
        printf("%d\t%s\n", code, reason);
    } else if (strcmp(op, "export-loop") == 0 && argc == 10) {
        long tries = strtol(argv[8], NULL, 10);
        double until = test_now_ms() + (double)strtol(argv[9], NULL, 10);
        int ok = 0, denied = 0, other = 0;
        for (long i = 0; i < tries && test_now_ms() < until; i++) {
            int rc = caller_export(c, argv[5], argv[6], true, false, argv[7], NULL, &err);
            /* OK: into the caller's own directory; PERMISSION_DENIED: the locked one;
             * NOT_FOUND: the directory swapped away mid-resolution. */
            ok += rc == 0;
            denied += rc == 7 || rc == 5;
            if (rc != 0 && rc != 7 && rc != 5) {
                other++;
                fprintf(stderr, "caller: export: %d %s\n", rc, err.msg);
            }
        }
        printf("ok=%d denied=%d other=%d\n", ok, denied, other);
    } else {
        bad = true;
    }
    dfc_rpc_client_free(c);
    return bad ? 2 : 0;
}

int main(int argc, char **argv) {
    if (harness_resolve_methods(NULL, 0) < 0) {
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
        T(test_round_trips),
        T(test_import_hard_link_and_copy),
        T(test_upstream_task_ids),
        T(test_stat_ls_rm),
        T(test_progress_bar_only_on_a_terminal),
        T(test_cli_usage_errors),
        T(test_upload_validation),
        T(test_download_validation),
        T(test_stream_import_protocol),
        T(test_upload_service_and_local_stat_validation),
        T(test_dfdaemon_command_line),
        T(test_restart_keeps_tasks),
        T(test_gc_in_the_daemon),
        T(test_kill9_mid_import_leaves_nothing),
        T(test_corrupt_store_refuses_then_discards),
        T(test_cancelled_stream_leaves_nothing),
        T(test_peer_credentials_are_checked),
        T(test_an_acl_lets_the_caller_import_by_path),
        T(test_export_symlink_race_cannot_write_as_root),
        T(test_no_existence_oracle),
        T(test_fifos_and_devices_are_never_opened),
        T(test_proc_magic_links_are_refused),
        T(test_export_acts_as_the_caller),
        T(test_auto_passes_fd_from_another_mount_namespace),
        T(test_another_mount_namespace_gets_no_daemon_path),
    };
    return test_run_group(tests, NULL, NULL);
}
