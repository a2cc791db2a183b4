/*
 * Integration tests of the fd import (docs/architecture.md, issue 10): a real dfdaemon, the
 * dfcache binary in a private mount namespace, and raw clients of the sibling socket
 * `<socketPath>.fd` (dfc/fdpass.h) for the descriptors and tokens dfcache never sends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/dragonfly.h"
#include "dfc/fdpass.h"
#include "dfc/rpc_client.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "test_support.h"

struct fx {
    struct harness h;
    struct dfc_rpc_client *c;
    char fdsock[400];
    char out[8192], err[8192];
};

static void write_config(FILE *f, const struct harness *h, void *arg) {
    fprintf(f,
            "download:\n  server:\n    socketPath: %s\n    socketMode: \"0770\"\n"
            "    fdTokenTimeout: %s\n"
            "storage:\n  dir: %s\n"
            "log:\n  level: debug\n"
            "gc:\n  interval: 1h\n",
            h->socket, (const char *)arg, h->store);
}

static bool fdsock_exists(void *arg) {
    return access(((struct fx *)arg)->fdsock, F_OK) == 0;
}

static int setup_with(void **state, const char *token_timeout) {
    struct fx *f = calloc(1, sizeof(*f));
    harness_start_config(&f->h, write_config, (void *)token_timeout);
    f->c = harness_client(&f->h);
    assert_int_equal(dfc_fdpass_path(f->h.socket, f->fdsock, sizeof(f->fdsock)), 0);
    /* The harness waits for the main socket; the sibling is bound just after it. */
    assert_true(test_wait_for(fdsock_exists, f, 10000));
    *state = f;
    return 0;
}

static int setup(void **state) {
    return setup_with(state, "30s");
}

static int setup_short(void **state) {
    return setup_with(state, "1s");
}

static int teardown(void **state) {
    struct fx *f = *state;
    int code = harness_close(&f->h, f->c);
    free(f);
    assert_int_equal(code, 0); /* a clean shutdown, and no leaks under a sanitizer */
    return 0;
}

static bool have_unshare(void) {
    return geteuid() == 0 && system("unshare -m true 2>/dev/null") == 0;
}

/* UploadPersistentCacheTask of path with the token; the gRPC code (0: imported). */
static int upload_token(struct dfc_rpc_client *c, const char *path, const char *token,
                        struct dfc_error *err) {
    Dfdaemon__V2__UploadPersistentCacheTaskRequest r =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    r.path = (char *)path;
    r.persistent_replica_count = 1;
    r.ttl = &ttl;
    const struct dfc_rpc_md md[] = {{DFC_FD_TOKEN_MD, token}};
    ProtobufCMessage *resp = NULL;
    int rc = dfc_rpc_unary_md(c, &hm.upload, &r.base, 30000, md, 1, &resp, err);
    dfc_rpc_msg_free(resp);
    return rc < 0 ? dfc_error_to_grpc(rc) : 0;
}

static void path_in(struct fx *f, const char *name, char *buf, size_t size) {
    assert_true(snprintf(buf, size, "%s/%s", f->h.dir, name) < (int)size);
}

static void read_line(const char *path, char *buf, size_t size) {
    FILE *p = fopen(path, "r");
    assert_non_null(p);
    buf[0] = '\0';
    assert_non_null(fgets(buf, (int)size, p));
    fclose(p);
    buf[strcspn(buf, "\n")] = '\0';
}

static void read_all(const char *path, char *buf, size_t size) {
    FILE *p = fopen(path, "r");
    assert_non_null(p);
    size_t n = fread(buf, 1, size - 1, p);
    buf[n] = '\0';
    fclose(p);
}

/* ---- the sibling socket ---- */

static void test_sibling_socket_follows_the_main_one(void **state) {
    struct fx *f = *state;
    struct stat main_st, fd_st;
    assert_int_equal(stat(f->h.socket, &main_st), 0);
    assert_int_equal(stat(f->fdsock, &fd_st), 0);
    assert_true(S_ISSOCK(fd_st.st_mode));
    assert_int_equal(fd_st.st_mode & 07777, 0770);
    assert_int_equal(fd_st.st_mode & 07777, main_st.st_mode & 07777);
    assert_int_equal(fd_st.st_gid, main_st.st_gid);
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    assert_int_equal(access(f->fdsock, F_OK), -1); /* removed with the main socket */
    assert_int_equal(access(f->h.socket, F_OK), -1);
    harness_restart(&f->h);
    assert_true(test_wait_for(fdsock_exists, f, 10000));
}

/* ---- round trips from a pod-like mount namespace ---- */

/* dfcache imports a file of len bytes that only its private mount namespace has (a tmpfs over
 * a directory the daemon sees empty); returns the task id, checks the content. */
static void fd_round_trip(struct fx *f, const char *transfer, size_t len, const char *extra,
                          char id[65], char *errbuf, size_t err_size) {
    char dir[400], file[420], cmd[4096], outp[420], errp[420], sum[420], line[200];
    path_in(f, "pod", dir, sizeof(dir));
    mkdir(dir, 0755);
    assert_true(snprintf(file, sizeof(file), "%s/model.bin", dir) < (int)sizeof(file));
    path_in(f, "ns.out", outp, sizeof(outp));
    path_in(f, "ns.err", errp, sizeof(errp));
    path_in(f, "pod.sum", sum, sizeof(sum));
    int n = snprintf(cmd, sizeof(cmd),
                     "unshare -m sh -c 'mount -t tmpfs none %s && "
                     "head -c %zu /dev/urandom > %s && sha256sum %s | cut -c1-64 > %s && "
                     "%s import --no-progress --log-level debug --transfer %s %s -e %s %s' "
                     "> %s 2> %s",
                     dir, len, file, file, sum, DFCACHE_BIN, transfer, extra, f->h.socket, file,
                     outp, errp);
    assert_true(n < (int)sizeof(cmd));
    int rc = system(cmd);
    read_all(errp, errbuf, err_size);
    print_message("dfcache --transfer %s (%zu B): %d %s", transfer, len, rc, errbuf);
    assert_int_equal(rc, 0);
    read_line(outp, line, sizeof(line));
    assert_int_equal(strncmp(line, "Done: ", 6), 0);
    memcpy(id, line + 6, 64);
    id[64] = '\0';
    /* The daemon never saw the file: what it stored must be the pod's bytes. */
    char exported[420], want[80], have[80], sumf[440];
    path_in(f, "exported.bin", exported, sizeof(exported));
    unlink(exported);
    assert_int_equal(
        harness_dfcache(&f->h, -1, f->out, sizeof(f->out), f->err, sizeof(f->err),
                        (const char *const[]){"export", "--no-progress", "-O", exported, id, NULL}),
        0);
    read_line(sum, want, sizeof(want));
    snprintf(cmd, sizeof(cmd), "sha256sum %s | cut -c1-64 > %s.sum", exported, exported);
    assert_int_equal(system(cmd), 0);
    snprintf(sumf, sizeof(sumf), "%s.sum", exported);
    read_line(sumf, have, sizeof(have));
    assert_string_equal(have, want);
}

static void test_fd_round_trips_from_a_private_namespace(void **state) {
    struct fx *f = *state;
    if (!have_unshare()) {
        test_skip("needs root and unshare(1) for a private mount namespace");
    }
    static const size_t sizes[] = {0, 1, (size_t)(4 << 20) * 3 + 12345}; /* 4 pieces of 4 MiB */
    char id[65], errbuf[4096], want[200];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        fd_round_trip(f, "fd", sizes[i], "--piece-length 4MiB", id, errbuf, sizeof(errbuf));
        snprintf(want, sizeof(want), "task_id=%s mode=", id);
        assert_true(harness_log_has(&f->h, want));
        snprintf(want, sizeof(want), "bytes=%zu", sizes[i]);
        assert_true(harness_log_has(&f->h, want));
    }
    assert_true(harness_log_has(&f->h, "pieces=4 existed=0"));
    assert_true(harness_log_has(&f->h, "source=fd"));
    assert_false(harness_log_has(&f->h, "source=path"));
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    assert_int_equal(harness_count(tmp), 0);
}

static void test_auto_picks_fd_then_stream(void **state) {
    struct fx *f = *state;
    if (!have_unshare()) {
        test_skip("needs root and unshare(1) for a private mount namespace");
    }
    char id[65], errbuf[4096], aside[420];
    fd_round_trip(f, "auto", 100000, "", id, errbuf, sizeof(errbuf));
    assert_non_null(strstr(errbuf, "path import refused"));
    assert_non_null(strstr(errbuf, "trying fd"));
    assert_non_null(strstr(errbuf, "passed the descriptor"));
    assert_null(strstr(errbuf, "streaming"));
    assert_true(harness_log_has(&f->h, "bytes=100000 pieces=1 existed=0 uid=0 source=fd"));
    /* Without the sibling socket (a daemon that has none): auto streams. */
    snprintf(aside, sizeof(aside), "%s.aside", f->fdsock);
    assert_int_equal(rename(f->fdsock, aside), 0);
    fd_round_trip(f, "auto", 100001, "", id, errbuf, sizeof(errbuf));
    assert_int_equal(rename(aside, f->fdsock), 0);
    assert_non_null(strstr(errbuf, "trying fd"));
    assert_non_null(strstr(errbuf, "fd import not possible"));
    assert_non_null(strstr(errbuf, "trying stream"));
    assert_true(harness_log_has(&f->h, "mode=stream bytes=100001"));
}

struct held {
    struct fx *f;
    const char *file;
};

/* True when the daemon has file open (a link in /proc/<pid>/fd names it). */
static bool daemon_holds(struct fx *f, const char *file) {
    char dir[64], link[400], target[512];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)f->h.pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    for (struct dirent *e; (e = readdir(d)) != NULL && !found;) {
        snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strcmp(target, file) == 0;
        }
    }
    closedir(d);
    return found;
}

static bool released(void *arg) {
    struct held *h = arg;
    return !daemon_holds(h->f, h->file);
}

/* ---- descriptors the daemon refuses ---- */

/* Passes fd raw; the gRPC code of the refusal (0: a token) with its message in msg. */
static int pass(struct fx *f, int fd, char *msg, size_t size, char token[33]) {
    struct dfc_error err;
    char self[64], target[512];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    bool held = daemon_holds(f, target);
    int r = dfc_fdpass_send(f->fdsock, fd, token, &err);
    snprintf(msg, size, "%s", r < 0 ? dfc_error_msg(&err) : "");
    /* A refused descriptor is closed before the answer; an accepted one waits in the table. */
    assert_int_equal(daemon_holds(f, target), held || r == 0);
    return r < 0 ? dfc_error_to_grpc(r) : 0;
}

/* Sends n descriptors of fd in one message and returns the answer line. */
static void pass_many(struct fx *f, int fd, int n, char *line, size_t size) {
    int s = test_connect_unix(f->fdsock);
    assert_true(s >= 0);
    int fds[4] = {fd, fd, fd, fd};
    char byte = 'F';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    assert_int_equal(sendmsg(s, &m, 0), 1);
    ssize_t got = read(s, line, size - 1);
    assert_true(got > 0);
    line[got] = '\0';
    close(s);
}

/* Passes fd (accepted: a token), then the import with it fails INVALID_ARGUMENT with want in
 * its message; the daemon holds the descriptor no longer and the token is used up. */
static void refused_at_call(struct fx *f, int fd, const char *want) {
    char msg[512], token[33], self[64], target[512];
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    struct dfc_error err;
    assert_int_equal(upload_token(f->c, "/x", token, &err), DFC_GRPC_INVALID_ARGUMENT);
    print_message("%s: %s", want, err.msg);
    assert_non_null(strstr(err.msg, want));
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_false(daemon_holds(f, target));
    assert_int_equal(upload_token(f->c, "/x", token, &err), DFC_GRPC_PERMISSION_DENIED);
    assert_non_null(strstr(err.msg, "already used"));
}

static void test_refused_descriptors(void **state) {
    struct fx *f = *state;
    char file[400], msg[512], token[33];
    path_in(f, "w.bin", file, sizeof(file));
    harness_write_file(file, 1000, 3);

    int wo = open(file, O_WRONLY | O_CLOEXEC);
    assert_int_equal(pass(f, wo, msg, sizeof(msg), token), DFC_GRPC_PERMISSION_DENIED);
    print_message("write-only: %s", msg);
    assert_non_null(strstr(msg, "opened write-only, not for reading"));
    close(wo);

    int op = open(file, O_PATH | O_CLOEXEC);
    assert_int_equal(pass(f, op, msg, sizeof(msg), token), DFC_GRPC_PERMISSION_DENIED);
    assert_non_null(strstr(msg, "O_PATH"));
    close(op);

    /* What the file is takes fstat, which may wait on a hung filesystem: checked when the
     * token is taken, on the caller's call, which fails with the reason (the token is used). */
    int dir = open(f->h.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    refused_at_call(f, dir, "is a directory, not a regular file");
    close(dir);

    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    refused_at_call(f, p[0], "is a pipe");
    close(p[0]);
    close(p[1]);

    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    refused_at_call(f, sp[0], "is a socket");
    close(sp[0]);
    close(sp[1]);

    int proc = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    refused_at_call(f, proc, "procfs");
    close(proc);

    /* More than one descriptor: refused, and the extras are closed too. */
    int rd = open(file, O_RDONLY | O_CLOEXEC);
    char line[512];
    pass_many(f, rd, 3, line, sizeof(line));
    assert_false(daemon_holds(f, file)); /* the extras are closed too */
    print_message("three descriptors: %s", line);
    assert_non_null(strstr(line, "error 3 3 descriptors passed; pass exactly one"));
    close(rd);
    assert_true(harness_log_has(&f->h, "fdpass.refused"));
}

static void test_per_uid_limit(void **state) {
    struct fx *f = *state;
    char file[400], msg[512], token[33];
    path_in(f, "l.bin", file, sizeof(file));
    harness_write_file(file, 10, 9);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    }
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), DFC_GRPC_RESOURCE_EXHAUSTED);
    print_message("17th: %s", msg);
    assert_non_null(strstr(msg, "uid 0 already has 16 descriptors waiting"));
    close(fd);
}

/* Reads the daemon's whole answer on s (until it closes, at most 20 s) into line. */
static void read_answer(int s, char *line, size_t size) {
    struct timeval tv = {.tv_sec = 20};
    assert_int_equal(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(s, line + len, size - 1 - len);
        assert_true(n >= 0); /* not the receive timeout: the daemon closes it */
        if (n == 0) {
            break;
        }
        len += (size_t)n;
        assert_true(len < size - 1);
    }
    line[len] = '\0';
}

/* Clients that connect to the sibling socket and never send do not hold up the passers behind
 * them: each waits at most its own receive timeout, not one after another (the old serial
 * accept loop answered the passer after 32 timeouts of 2 s, past its client's 30 s). */
static void test_silent_clients_do_not_block_passers(void **state) {
    struct fx *f = *state;
    char file[400], msg[512], token[33];
    path_in(f, "s.bin", file, sizeof(file));
    harness_write_file(file, 10, 5);
    enum { SILENT = 32 };
    int silent[SILENT];
    for (int i = 0; i < SILENT; i++) {
        silent[i] = test_connect_unix(f->fdsock);
        assert_true(silent[i] >= 0);
    }
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    close(fd);
    /* Every silent connection is answered with an error and closed: pushed out by newer
     * connections of its uid, or timed out. */
    unsigned evicted = 0, timed_out = 0;
    for (int i = 0; i < SILENT; i++) {
        char line[512];
        read_answer(silent[i], line, sizeof(line));
        close(silent[i]);
        evicted += strncmp(line, "error 8 ", 8) == 0;
        timed_out += strncmp(line, "error 4 ", 8) == 0;
        if (i == 0 || i == SILENT - 1) {
            print_message("silent %d: %s", i, line);
        }
    }
    assert_int_equal(evicted + timed_out, SILENT);
    assert_true(timed_out > 0);
    /* And the socket still serves. */
    fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    close(fd);
}

static void test_import_help_explains_fd(void **state) {
    struct fx *f = *state;
    assert_int_equal(harness_dfcache(&f->h, -1, f->out, sizeof(f->out), f->err, sizeof(f->err),
                                     (const char *const[]){"import", "--help", NULL}),
                     0);
    assert_non_null(strstr(f->out, "pass the open descriptor"));
    assert_non_null(strstr(f->out, "--log-level debug"));
}

/* ---- tokens ---- */

static void test_token_reused_unknown_or_malformed(void **state) {
    struct fx *f = *state;
    char file[400], msg[512], token[33];
    struct dfc_error err;
    path_in(f, "t.bin", file, sizeof(file));
    harness_write_file(file, 5000, 4);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    close(fd);
    assert_int_equal(upload_token(f->c, "/nonexistent/where/the/pod/has/it", token, &err), 0);
    assert_true(harness_log_has(&f->h, "bytes=5000 pieces=1 existed=0 uid=0 source=fd"));
    /* One use only. */
    assert_int_equal(upload_token(f->c, file, token, &err), DFC_GRPC_PERMISSION_DENIED);
    print_message("reused: %s", dfc_error_msg(&err));
    assert_non_null(strstr(dfc_error_msg(&err), "the descriptor token was already used"));
    assert_int_equal(upload_token(f->c, file, "0123456789abcdef0123456789abcdef", &err),
                     DFC_GRPC_PERMISSION_DENIED);
    assert_non_null(strstr(dfc_error_msg(&err), "unknown descriptor token"));
    assert_int_equal(upload_token(f->c, file, "../../etc/passwd", &err), DFC_GRPC_INVALID_ARGUMENT);
    assert_non_null(strstr(dfc_error_msg(&err), DFC_FD_TOKEN_MD " must be 32"));
    /* The path stays validated as for a path import. */
    fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    close(fd);
    assert_int_equal(upload_token(f->c, "relative/path", token, &err), DFC_GRPC_INVALID_ARGUMENT);
}

/* A child passes a descriptor, hands the token over a pipe, and waits to be killed. This
 * process has gRPC's threads, so the child calls only async-signal-safe functions: with no
 * dfc_error, dfc_fdpass_send formats nothing and makes only socket calls and string compares. */
static pid_t passing_child(struct fx *f, const char *file, char token[33]) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        char t[33] = {0};
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || dfc_fdpass_send(f->fdsock, fd, t, NULL) < 0) {
            _exit(1);
        }
        if (write(p[1], t, 32) != 32) {
            _exit(1);
        }
        pause();
        _exit(0);
    }
    close(p[1]);
    assert_int_equal(read(p[0], token, 32), 32);
    token[32] = '\0';
    close(p[0]);
    return pid;
}

static void test_token_from_another_process_refused(void **state) {
    struct fx *f = *state;
    char file[400], token[33];
    struct dfc_error err;
    path_in(f, "o.bin", file, sizeof(file));
    harness_write_file(file, 5000, 5);
    pid_t child = passing_child(f, file, token);
    /* Same uid, another process: refused, and the token still belongs to the passer. */
    assert_int_equal(upload_token(f->c, file, token, &err), DFC_GRPC_PERMISSION_DENIED);
    print_message("another caller: %s", dfc_error_msg(&err));
    assert_non_null(strstr(dfc_error_msg(&err), "passed by another process"));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_false(harness_log_has(&f->h, "bytes=5000"));
}

static bool expired_logged(void *arg) {
    return harness_log_has(&((struct fx *)arg)->h, "fdpass.expired");
}

static void test_expired_token_refused(void **state) {
    struct fx *f = *state;
    char file[400], msg[512], token[33];
    struct dfc_error err;
    path_in(f, "e.bin", file, sizeof(file));
    harness_write_file(file, 5000, 6);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_int_equal(pass(f, fd, msg, sizeof(msg), token), 0);
    close(fd);
    assert_true(test_wait_for(expired_logged, f, 30000)); /* fdTokenTimeout is 1 s here */
    assert_int_equal(upload_token(f->c, file, token, &err), DFC_GRPC_PERMISSION_DENIED);
    print_message("expired: %s", dfc_error_msg(&err));
    assert_non_null(strstr(dfc_error_msg(&err), "the descriptor token expired"));
}

static void test_killed_between_pass_and_call_leaves_nothing(void **state) {
    struct fx *f = *state;
    char file[400], token[33], tmp[400];
    assert_true(f->h.pid > 0);
    path_in(f, "k.bin", file, sizeof(file));
    harness_write_file(file, 3 << 20, 7);
    pid_t child = passing_child(f, file, token);
    kill(child, SIGKILL); /* dfcache dies after passing the descriptor, before its call */
    waitpid(child, NULL, 0);
    assert_true(daemon_holds(f, file)); /* the table keeps it until the expiry */
    struct held h = {f, file};
    bool gone = test_wait_for(released, &h, 30000);
    assert_true(gone);
    /* The sweep closes the descriptor, then logs: wait for the line too. */
    assert_true(test_wait_for(expired_logged, f, 30000));
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->h.store);
    assert_int_equal(harness_count(tmp), 0);
    assert_false(harness_log_has(&f->h, "import.done"));
}

int main(void) {
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
#define T(fn)  cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup_short, teardown)
    const struct CMUnitTest tests[] = {
        T(test_sibling_socket_follows_the_main_one),
        T(test_fd_round_trips_from_a_private_namespace),
        T(test_auto_picks_fd_then_stream),
        T(test_refused_descriptors),
        T(test_per_uid_limit),
        T(test_silent_clients_do_not_block_passers),
        T(test_import_help_explains_fd),
        T(test_token_reused_unknown_or_malformed),
        T(test_token_from_another_process_refused),
        TS(test_expired_token_refused),
        TS(test_killed_between_pass_and_call_leaves_nothing),
    };
    return test_run_group(tests, NULL, NULL);
}
