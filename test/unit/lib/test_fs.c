/* Tests for lib/src/fs.c: mkdir -p and the parent of a path, full writes, openat2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "test_support.h"

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_mkdir_p(void **state) {
    char dir[256], p[400];
    test_mkdtemp(dir, sizeof(dir), "fs");
    snprintf(p, sizeof(p), "%s/a/b/c", dir);
    assert_int_equal(dfc_mkdir_p(p, 0755), 0);
    assert_true(is_dir(p));
    assert_int_equal(dfc_mkdir_p(p, 0755), 0); /* existing is fine */
    snprintf(p, sizeof(p), "%s/x/y/file.sock", dir);
    assert_int_equal(dfc_mkdir_parent(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/x/y", dir);
    assert_true(is_dir(p));
    assert_int_equal(dfc_mkdir_parent("relative.sock", 0755), 0);
    /* A file in the way is an error, not a silent success. */
    snprintf(p, sizeof(p), "%s/file", dir);
    FILE *f = fopen(p, "w");
    fclose(f);
    snprintf(p, sizeof(p), "%s/file/sub", dir);
    assert_int_equal(dfc_mkdir_p(p, 0755), -ENOTDIR);
    static char longp[PATH_MAX + 10];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    assert_int_equal(dfc_mkdir_p(longp, 0755), -ENAMETOOLONG);
    test_rmtree(dir);
}

#define N_IOV 3000

/* n iovecs over data, of lengths 0..299 (every 50th empty); returns the bytes they cover. */
static size_t make_iov(const uint8_t *data, struct iovec *iov, int n) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t len = i % 50 == 0 ? 0 : (size_t)(i * 37) % 300;
        iov[i] = (struct iovec){(void *)(data + at), len}; /* only read */
        at += len;
    }
    return at;
}

static uint8_t *pattern(size_t n) {
    uint8_t *d = malloc(n);
    for (size_t i = 0; i < n; i++) {
        d[i] = (uint8_t)(i * 31 + i / 251);
    }
    return d;
}

/* More iovecs than one writev takes, empty ones among them, at an offset and at the file
 * position; the file holds exactly the bytes, in order. */
static void test_writev_all_writes_every_iovec(void **state) {
    static struct iovec iov[N_IOV];
    uint8_t *data = pattern((size_t)N_IOV * 300);
    size_t total = make_iov(data, iov, N_IOV);
    char dir[256], path[300];
    test_mkdtemp(dir, sizeof(dir), "fs");
    snprintf(path, sizeof(path), "%s/f", dir);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(dfc_writev_all(fd, iov, N_IOV, 100), 0);
    uint8_t *back = malloc(total + 100);
    assert_int_equal(pread(fd, back, total + 100, 0), (ssize_t)(total + 100));
    assert_memory_equal(back + 100, data, total);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 0); /* pwritev: the position did not move */
    assert_int_equal(dfc_writev_all(fd, iov, N_IOV, -1), 0);
    assert_int_equal(dfc_write_all(fd, "end", 3, -1), 0);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)total + 3);
    assert_int_equal(pread(fd, back, total + 3, 0), (ssize_t)(total + 3));
    assert_memory_equal(back, data, total);
    assert_memory_equal(back + total, "end", 3);
    assert_int_equal(dfc_writev_all(fd, iov, 0, -1), 0); /* nothing to write */
    close(fd);
    free(back);
    free(data);
    test_rmtree(dir);
}

struct reader {
    int fd;
    uint8_t *buf;
    size_t want, got;
};

static void *read_slowly(void *arg) {
    struct reader *rd = arg;
    while (rd->got < rd->want) {
        ssize_t k = read(rd->fd, rd->buf + rd->got, 1000);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        rd->got += (size_t)k;
        usleep(20);
    }
    return NULL;
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

/* A socket with a small buffer and a slow reader, and a timer signal without SA_RESTART:
 * writev returns short counts (and EINTR) many times, and every byte still arrives once, in
 * order. */
static void test_writev_all_resumes_after_short_writes(void **state) {
    static struct iovec iov[N_IOV];
    uint8_t *data = pattern((size_t)N_IOV * 300);
    size_t total = make_iov(data, iov, N_IOV);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    struct reader rd = {.fd = sv[1], .buf = malloc(total), .want = total};
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = {{0, 300}, {0, 300}}, off = {{0, 0}, {0, 0}};
    pthread_t th;
    /* The reader must not take the signals: only the writer's writev is to be cut short. */
    sigset_t alrm, prev;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &prev);
    assert_int_equal(pthread_create(&th, NULL, read_slowly, &rd), 0);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
    int r = dfc_writev_all(sv[0], iov, N_IOV, -1);
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    pthread_join(th, NULL);
    assert_int_equal(r, 0);
    assert_int_equal(rd.got, total);
    assert_memory_equal(rd.buf, data, total);
    assert_true(alarms > 0);
    close(sv[0]);
    close(sv[1]);
    free(rd.buf);
    free(data);
}

/* A file that takes no more bytes (RLIMIT_FSIZE, in a child): the write stops with -EFBIG
 * after the bytes that fitted, which are the right ones. */
static void test_writev_all_reports_a_full_file(void **state) {
    static struct iovec iov[N_IOV];
    uint8_t *data = pattern((size_t)N_IOV * 300);
    make_iov(data, iov, N_IOV);
    char dir[256], path[300];
    test_mkdtemp(dir, sizeof(dir), "fs");
    snprintf(path, sizeof(path), "%s/f", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {10007, 10007};
        setrlimit(RLIMIT_FSIZE, &rl);
        int fd = open(path, O_WRONLY | O_CREAT, 0600);
        _exit(fd >= 0 && dfc_writev_all(fd, iov, N_IOV, -1) == -EFBIG ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    uint8_t back[10008];
    int fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, back, sizeof(back)), 10007);
    assert_memory_equal(back, data, 10007);
    close(fd);
    free(data);
    test_rmtree(dir);
}

/* The resolve flags are the kernel's: a way out, a symlink, a magic link each refuse; what
 * opens is O_CLOEXEC. */
static void test_openat2_resolves_as_asked(void **state) {
    char dir[256], p[400];
    test_mkdtemp(dir, sizeof(dir), "openat2");
    snprintf(p, sizeof(p), "%s/sub", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub/file", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/link", dir);
    assert_int_equal(symlink("sub/file", p), 0);
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd >= 0);
    const uint64_t beneath = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;

    int fd = dfc_openat2(dirfd, "sub/file", O_RDONLY, beneath);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    char c = 0;
    assert_int_equal(read(fd, &c, 1), 1);
    assert_int_equal(c, 'x');
    close(fd);

    assert_int_equal(dfc_openat2(dirfd, "../x", O_RDONLY, beneath), -EXDEV);
    assert_int_equal(dfc_openat2(dirfd, "/etc", O_PATH, beneath), -EXDEV);
    assert_int_equal(dfc_openat2(dirfd, "link", O_RDONLY, beneath), -ELOOP);
    assert_int_equal(dfc_openat2(dirfd, "missing", O_RDONLY, beneath), -ENOENT);
    fd = dfc_openat2(dirfd, "link", O_RDONLY, 0); /* no resolve flags: followed */
    assert_true(fd >= 0);
    close(fd);

    snprintf(p, sizeof(p), "/proc/self/fd/%d", dirfd);
    assert_int_equal(dfc_openat2(AT_FDCWD, p, O_PATH, RESOLVE_NO_MAGICLINKS), -ELOOP);
    fd = dfc_openat2(AT_FDCWD, p, O_PATH, 0);
    assert_true(fd >= 0);
    close(fd);
    close(dirfd);
    test_rmtree(dir);
    (void)state;
}

struct renamer {
    char a[300], b[300];
    atomic_bool stop;
    unsigned long renames;
};

static void *rename_storm(void *arg) {
    struct renamer *r = arg;
    while (!atomic_load(&r->stop)) {
        if (rename(r->a, r->b) == 0 && rename(r->b, r->a) == 0) {
            r->renames += 2;
        }
    }
    return NULL;
}

/* Every rename on the system makes RESOLVE_BENEATH's ".." check ask for a retry (-EAGAIN);
 * under a storm of them each open still succeeds, because dfc_openat2() retries. The raw
 * syscall's EAGAINs are counted to show the storm did what it is for. */
static void test_openat2_retries_eagain(void **state) {
    char dir[256], p[400];
    test_mkdtemp(dir, sizeof(dir), "openat2");
    snprintf(p, sizeof(p), "%s/sub", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub/file", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    static struct renamer r;
    snprintf(r.a, sizeof(r.a), "%s/a", dir);
    snprintf(r.b, sizeof(r.b), "%s/b", dir);
    assert_int_equal(mkdir(r.a, 0755), 0);
    atomic_store(&r.stop, false);
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd >= 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, rename_storm, &r), 0);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
    unsigned long raw_eagain = 0;
    for (int i = 0; i < 20000; i++) {
        int fd = dfc_openat2(dirfd, "sub/../sub/file", O_RDONLY, RESOLVE_BENEATH);
        if (fd < 0) {
            fprintf(stderr, "open %d: %d\n", i, fd);
        }
        assert_true(fd >= 0);
        close(fd);
        long raw = syscall(SYS_openat2, dirfd, "sub/../sub/file", &how, sizeof(how));
        if (raw >= 0) {
            close((int)raw);
        } else {
            assert_int_equal(errno, EAGAIN);
            raw_eagain++;
        }
    }
    atomic_store(&r.stop, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    fprintf(stderr, "test_openat2_retries_eagain: %lu renames, %lu raw EAGAINs\n", r.renames,
            raw_eagain);
    assert_true(r.renames > 0);
    close(dirfd);
    test_rmtree(dir);
    (void)state;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mkdir_p),
                                       cmocka_unit_test(test_writev_all_writes_every_iovec),
                                       cmocka_unit_test(test_writev_all_resumes_after_short_writes),
                                       cmocka_unit_test(test_writev_all_reports_a_full_file),
                                       cmocka_unit_test(test_openat2_resolves_as_asked),
                                       cmocka_unit_test(test_openat2_retries_eagain)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
