/*
 * Integration tests of dfcache on pipes: `dfcache import -` reads standard input and
 * `dfcache export -O - ID` writes standard output, against a real dfdaemon process. The test
 * owns both ends of every pipe (so a closed reader is real), and dfcache's stderr goes to a
 * file it reads back.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)

static void slurp(const char *path, char *buf, size_t size) {
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp != NULL) {
        size_t n = fread(buf, 1, size - 1, fp);
        buf[n] = '\0';
        fclose(fp);
    }
}

/* Starts dfcache argv (NULL-terminated, -e added) with stdin and stdout on the given fds
 * (closed in the parent by the caller) and stderr to <dir>/pipe.err. */
static pid_t spawn(struct harness_fx *f, int in, int out, const char *const *argv) {
    char err_path[400];
    harness_path(&f->h, "pipe.err", err_path, sizeof(err_path));
    const char *args[32];
    size_t n = 0;
    args[n++] = "dfcache";
    for (size_t i = 0; argv[i] != NULL && n < 28; i++) {
        args[n++] = argv[i];
    }
    args[n++] = "-e";
    args[n++] = f->h.socket;
    args[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (e < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(e, 2) < 0) {
            _exit(126);
        }
        (void)signal(SIGPIPE, SIG_DFL); /* as a shell would start it */
        execv(DFCACHE_BIN, (char *const *)args);
        _exit(127);
    }
    return pid;
}

/* Exit code; a death by signal is 128 + the signal. Reads stderr into f->err. */
static int wait_for(struct harness_fx *f, pid_t pid) {
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char err_path[400];
    harness_path(&f->h, "pipe.err", err_path, sizeof(err_path));
    slurp(err_path, f->err, sizeof(f->err));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static uint8_t *read_file(const char *path, size_t *len) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return buf;
}

/* `dfcache import -` fed through a pipe by the test; returns the task id in id. */
static void import_from_pipe(struct harness_fx *f, const uint8_t *data, size_t len, const char *tag,
                             char id[65]) {
    char out_path[400];
    harness_path(&f->h, "import.out", out_path, sizeof(out_path));
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int p[2];
    assert_true(out >= 0);
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = spawn(f, p[0], out, (const char *const[]){"import", "--tag", tag, "-", NULL});
    close(p[0]);
    close(out);
    /* Small writes at a time: the reader sees the bytes arrive in dribs and drabs. */
    for (size_t off = 0; off < len;) {
        size_t k = len - off < 100000 ? len - off : 100000;
        ssize_t n = write(p[1], data + off, k);
        assert_true(n > 0);
        off += (size_t)n;
    }
    close(p[1]);
    assert_int_equal(wait_for(f, pid), 0);
    slurp(out_path, f->out, sizeof(f->out));
    assert_int_equal(strncmp(f->out, "Done: ", 6), 0);
    assert_int_equal(strlen(f->out), 6 + 64 + 1);
    memcpy(id, f->out + 6, 64);
    id[64] = '\0';
}

/* `dfcache export -O - id` read through a pipe by the test; returns the bytes (malloc'd). */
static uint8_t *export_to_pipe(struct harness_fx *f, const char *id, const char *tag, size_t *len) {
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid =
        spawn(f, devnull, p[1], (const char *const[]){"export", "--tag", tag, "-O", "-", id, NULL});
    close(p[1]);
    close(devnull);
    size_t cap = 1 << 20, got = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (got == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(p[0], buf + got, cap - got);
        assert_true(n >= 0);
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    close(p[0]);
    assert_int_equal(wait_for(f, pid), 0);
    assert_string_equal(f->err, ""); /* not a terminal: no progress bar, no chatter */
    *len = got;
    return buf;
}

static void pipe_round_trip(struct harness_fx *f, size_t len, unsigned seed) {
    char src[400], id[65], by_path[65], tag[32];
    harness_path(&f->h, "src.bin", src, sizeof(src));
    harness_write_file(src, len, seed);
    size_t n;
    uint8_t *data = read_file(src, &n);
    assert_int_equal(n, len);
    snprintf(tag, sizeof(tag), "pipe%u", seed);
    import_from_pipe(f, data, len, tag, id);
    /* The task id is the content's: the same as importing the file by path. */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--tag", tag, src), 0);
    memcpy(by_path, f->out + 6, 64);
    by_path[64] = '\0';
    assert_string_equal(id, by_path);
    size_t got;
    uint8_t *back = export_to_pipe(f, id, tag, &got);
    assert_int_equal(got, len);
    assert_memory_equal(back, data, len);
    free(back);
    free(data);
}

static void test_round_trips_through_pipes(void **state) {
    struct harness_fx *f = *state;
    pipe_round_trip(f, 0, 1);                   /* empty */
    pipe_round_trip(f, 1, 2);                   /* one byte */
    pipe_round_trip(f, 3 * 4 * MiB + 12345, 3); /* several pieces, a short last one */
}

static void test_stdin_by_path_is_a_usage_error(void **state) {
    struct harness_fx *f = *state;
    size_t before = harness_count(f->h.store);
    assert_int_equal(DFCACHE(f, "import", "--transfer", "path", "-"), 2);
    assert_non_null(strstr(f->err, "dfcache import: --transfer path: standard input (`-`)"));
    assert_string_equal(f->out, "");
    assert_int_equal(harness_count(f->h.store), before); /* nothing left behind */
    /* -O - is no file to hard-link. */
    assert_int_equal(DFCACHE(f, "export", "--force-hard-link", "-O", "-", "abc"), 2);
    assert_non_null(strstr(f->err, "--force-hard-link: standard output (-O -) is no file"));
}

static void test_closed_stdout_fails_cleanly(void **state) {
    struct harness_fx *f = *state;
    char src[400], id[65];
    harness_path(&f->h, "big.bin", src, sizeof(src));
    harness_write_file(src, 24 * MiB, 7); /* far more than a pipe holds */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--tag", "epipe", src), 0);
    memcpy(id, f->out + 6, 64);
    id[64] = '\0';
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = spawn(f, devnull, p[1],
                      (const char *const[]){"export", "--tag", "epipe", "-O", "-", id, NULL});
    close(p[1]);
    close(devnull);
    char one;
    assert_int_equal(read(p[0], &one, 1), 1); /* the export has begun */
    close(p[0]);                              /* the reader goes away */
    /* An error and exit 1, not a death by SIGPIPE. */
    assert_int_equal(wait_for(f, pid), 1);
    assert_non_null(strstr(f->err, "dfcache export: write standard output"));
    assert_non_null(strstr(f->err, "broken pipe"));
    /* The daemon is unharmed: the next export works. */
    char out[400];
    harness_path(&f->h, "after.bin", out, sizeof(out));
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "--tag", "epipe", "-O", out, id), 0);
    assert_true(harness_same_file(src, out));
}

static void test_progress_only_on_a_terminal_stderr(void **state) {
    struct harness_fx *f = *state;
    if (system("command -v script >/dev/null 2>&1") != 0) {
        test_skip("script(1) from util-linux provides the pseudo-terminal");
    }
    char src[400], dst[400], tty[400], cmd[4096], id[65];
    harness_path(&f->h, "bar.bin", src, sizeof(src));
    harness_path(&f->h, "bar.out", dst, sizeof(dst));
    harness_path(&f->h, "pty.out", tty, sizeof(tty));
    harness_write_file(src, 12 * MiB, 9);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--tag", "bar", src), 0);
    memcpy(id, f->out + 6, 64);
    id[64] = '\0';
    /* stderr a terminal, stdout a file: the bar on the terminal, only the bytes in the file. */
    int n = snprintf(cmd, sizeof(cmd),
                     "script -qec '%s export --tag bar -e %s -O - %s > %s' /dev/null > %s 2>&1",
                     DFCACHE_BIN, f->h.socket, id, dst, tty);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    assert_true(harness_same_file(src, dst));
    static char out[65536];
    slurp(tty, out, sizeof(out));
    assert_non_null(strstr(out, "export ["));
    assert_non_null(strstr(out, "100% 12.0MiB/12.0MiB"));
    /* import - on a terminal: the length is unknown, so bytes and rate without a percentage. */
    n = snprintf(cmd, sizeof(cmd),
                 "script -qec '%s import --tag bar2 -e %s - < %s' /dev/null > %s 2>&1", DFCACHE_BIN,
                 f->h.socket, src, tty);
    assert_true(n < (int)sizeof(cmd));
    assert_int_equal(system(cmd), 0);
    slurp(tty, out, sizeof(out));
    assert_non_null(strstr(out, "import 12.0MiB "));
    assert_non_null(strstr(out, "Done: "));
}

int main(void) {
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, harness_fx_setup, harness_fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_round_trips_through_pipes),
        T(test_stdin_by_path_is_a_usage_error),
        T(test_closed_stdout_fails_cleanly),
        T(test_progress_only_on_a_terminal_stderr),
    };
    return test_run_group(tests, NULL, NULL);
}
