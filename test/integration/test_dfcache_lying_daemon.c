/*
 * dfcache export against a daemon that answers wrongly: a fake dfdaemon.v2.DfdaemonDownload on
 * a real Unix socket (lib's RPC server) whose DownloadPersistentCacheTask plays a script chosen
 * by the task id, and the real dfcache binary. The pieces a daemon streams are untrusted input
 * to dfcache as much as to the daemon: a piece before the task started, one without its bytes,
 * one whose offset wraps past 2^64 or lies past the length, a length past what an off_t holds,
 * a stream that ends short. Each must fail the export with a message naming the fault, and
 * leave no output file and no temporary file beside it; to standard output, nothing beyond the
 * bytes in order before the fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dfc/rpc_server.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "test_support.h"

typedef Dfdaemon__V2__DownloadPersistentCacheTaskResponse Resp;

#define LEN 100 /* the task's content length in every script */

/* Scripts, by the first character of the task id. */
enum {
    EARLY = 'a',
    NO_BYTES = 'b',
    WRAPS = 'c',
    PAST_END = 'd',
    SHORT = 'e',
    HUGE = '1',
    GOOD = 'f'
};

static uint8_t content[LEN];

/* Sends r with the ids every answer carries. */
static int send_resp(struct dfc_rpc_call *call, Resp *r, struct dfc_error *err) {
    r->host_id = "fake-host";
    r->task_id = "fake-task";
    r->peer_id = "fake-peer";
    return dfc_rpc_call_send(call, &r->base, err);
}

static int send_started(struct dfc_rpc_call *call, uint64_t length, struct dfc_error *err) {
    Dfdaemon__V2__DownloadPersistentCacheTaskStartedResponse st =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE__INIT;
    st.content_length = length;
    Resp r = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
    r.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE;
    r.download_persistent_cache_task_started_response = &st;
    return send_resp(call, &r, err);
}

/* A piece of length bytes at offset; with_bytes false leaves its content out. */
static int send_piece(struct dfc_rpc_call *call, uint32_t number, uint64_t offset, uint64_t length,
                      bool with_bytes, struct dfc_error *err) {
    Common__V2__Piece p = COMMON__V2__PIECE__INIT;
    p.number = number;
    p.offset = offset;
    p.length = length;
    p.digest = "crc32:00000000";
    if (with_bytes) {
        p.opt_content_case = COMMON__V2__PIECE__OPT_CONTENT_CONTENT;
        /* Bytes from the right place when the piece lies inside the content (checked without
         * wrapping), else from the start: the lie is in the header, not in the bytes. */
        size_t from = offset <= LEN && length <= LEN - offset ? (size_t)offset : 0;
        p.content = (ProtobufCBinaryData){length, content + from};
    }
    Dfdaemon__V2__DownloadPieceFinishedResponse fin =
        DFDAEMON__V2__DOWNLOAD_PIECE_FINISHED_RESPONSE__INIT;
    fin.piece = &p;
    Resp r = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
    r.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PIECE_FINISHED_RESPONSE;
    r.download_piece_finished_response = &fin;
    return send_resp(call, &r, err);
}

static int download(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                    ProtobufCMessage *resp, struct dfc_error *err) {
    (void)svc;
    (void)resp;
    const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req = (const void *)req_;
    int r = 0;
    switch (req->task_id[0]) {
    case EARLY:
        r = send_piece(call, 0, 0, LEN, true, err);
        break;
    case NO_BYTES:
        (void)((r = send_started(call, LEN, err)) || (r = send_piece(call, 0, 0, LEN, false, err)));
        break;
    case WRAPS: /* offset + length wraps around to 49: below the content length */
        (void)((r = send_started(call, LEN, err)) ||
               (r = send_piece(call, 0, UINT64_MAX - 50, LEN, true, err)));
        break;
    case PAST_END:
        (void)((r = send_started(call, LEN, err)) || (r = send_piece(call, 0, 1, LEN, true, err)));
        break;
    case HUGE: /* a length past what an off_t holds, and a piece inside it */
        (void)((r = send_started(call, UINT64_MAX, err)) ||
               (r = send_piece(call, 0, (uint64_t)INT64_MAX + 1, LEN, true, err)));
        break;
    case SHORT: /* two pieces of 50 announced, one sent */
        (void)((r = send_started(call, LEN, err)) || (r = send_piece(call, 0, 0, 50, true, err)));
        break;
    default: /* GOOD: two pieces, the second first */
        (void)((r = send_started(call, LEN, err)) || (r = send_piece(call, 1, 50, 50, true, err)) ||
               (r = send_piece(call, 0, 0, 50, true, err)));
    }
    return r;
}

static const struct dfc_rpc_method methods[] = {
    DFC_RPC_METHOD("DownloadPersistentCacheTask", DFC_RPC_SERVER_STREAM,
                   dfdaemon__v2__download_persistent_cache_task_request,
                   dfdaemon__v2__download_persistent_cache_task_response, download),
};

struct fx {
    char dir[256], sock[300], out[300], err_path[300];
    struct dfc_rpc_server *server;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "lying-daemon");
    snprintf(f->sock, sizeof(f->sock), "%s/dfdaemon.sock", f->dir);
    snprintf(f->out, sizeof(f->out), "%s/out.bin", f->dir);
    snprintf(f->err_path, sizeof(f->err_path), "%s/dfcache.err", f->dir);
    for (size_t i = 0; i < LEN; i++) {
        content[i] = (uint8_t)(i * 7 + 1);
    }
    struct dfc_error err;
    char addr[320];
    snprintf(addr, sizeof(addr), "unix:%s", f->sock);
    assert_int_equal(dfc_rpc_server_new(NULL, &f->server, &err), 0);
    assert_int_equal(dfc_rpc_server_add_service(f->server,
                                                &dfdaemon__v2__dfdaemon_download__descriptor,
                                                methods, DFC_RPC_N(methods), NULL, &err),
                     0);
    assert_int_equal(dfc_rpc_server_listen(f->server, addr, &err), 0);
    assert_int_equal(dfc_rpc_server_start(f->server, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_rpc_server_free(f->server);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Runs dfcache export of the task named by script (a 64-character id) to out ("-": standard
 * output, into <dir>/stdout.bin); returns its exit status, its stderr in errbuf. */
static int export(struct fx *f, char script, const char *out, bool from_daemon, char *errbuf,
                  size_t size) {
    char id[65], stdout_path[320];
    memset(id, script, 64);
    id[64] = '\0';
    snprintf(stdout_path, sizeof(stdout_path), "%s/stdout.bin", f->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int e = open(f->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int o = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (e < 0 || o < 0 || dup2(e, 2) < 0 || dup2(o, 1) < 0) {
            _exit(126);
        }
        const char *argv[] = {"dfcache",
                              "export",
                              "--no-progress",
                              "-e",
                              f->sock,
                              "-O",
                              out,
                              from_daemon ? "--transfer-from-dfdaemon" : id,
                              from_daemon ? id : NULL,
                              NULL};
        execv(DFCACHE_BIN, (char *const *)argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    FILE *fp = fopen(f->err_path, "r");
    size_t n = fp != NULL ? fread(errbuf, 1, size - 1, fp) : 0;
    errbuf[n] = '\0';
    if (fp != NULL) {
        fclose(fp);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Nothing but the socket and dfcache's own stderr/stdout capture files in the directory, and
 * stdout_bytes on standard output (a pipe gets what was in order before the fault showed). */
static void assert_nothing_written(struct fx *f, off_t stdout_bytes) {
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        static const char *const ours[] = {".", "..", "dfdaemon.sock", "dfcache.err", "stdout.bin"};
        bool known = false;
        for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++) {
            known = known || strcmp(n, ours[k]) == 0;
        }
        if (!known) {
            fail_msg("left behind: %s", n);
        }
    }
    closedir(d);
    char p[320];
    struct stat st;
    snprintf(p, sizeof(p), "%s/stdout.bin", f->dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, stdout_bytes);
}

static void refused(struct fx *f, char script, const char *want, off_t stdout_bytes) {
    char errbuf[2048];
    for (int to_stdout = 0; to_stdout < 2; to_stdout++) {
        int code = export(f, script, to_stdout ? "-" : f->out, !to_stdout, errbuf, sizeof(errbuf));
        assert_int_equal(code, 1);
        if (strstr(errbuf, want) == NULL) {
            fail_msg("script %c: want \"%s\" in: %s", script, want, errbuf);
        }
        assert_nothing_written(f, to_stdout ? stdout_bytes : 0);
    }
}

static void test_a_lying_daemon_is_refused(void **state) {
    struct fx *f = *state;
    refused(f, EARLY, "a piece arrived before the task started", 0);
    refused(f, NO_BYTES, "piece 0 came without its bytes", 0);
    refused(f, WRAPS, "piece 0 lies past the content length", 0);
    refused(f, PAST_END, "piece 0 lies past the content length", 0);
    refused(f, SHORT, "received 50 of 100 bytes", 50);
    refused(f, HUGE, "the task's content length 18446744073709551615 is too large", 0);
}

/* The control: the same fake telling the truth (pieces out of order) is exported exactly. */
static void test_an_honest_answer_is_exported(void **state) {
    struct fx *f = *state;
    char errbuf[2048], back[LEN + 1];
    assert_int_equal(export(f, GOOD, f->out, true, errbuf, sizeof(errbuf)), 0);
    int fd = open(f->out, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, back, sizeof(back)), LEN);
    close(fd);
    assert_memory_equal(back, content, LEN);
    unlink(f->out);
    assert_int_equal(export(f, GOOD, "-", false, errbuf, sizeof(errbuf)), 0);
    char p[320];
    snprintf(p, sizeof(p), "%s/stdout.bin", f->dir);
    fd = open(p, O_RDONLY);
    assert_int_equal(read(fd, back, sizeof(back)), LEN);
    close(fd);
    assert_memory_equal(back, content, LEN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_lying_daemon_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_honest_answer_is_exported, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
