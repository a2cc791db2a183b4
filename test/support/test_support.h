/*
 * test_support.h - small helpers shared by the cmocka tests: honest skips, temp directories,
 * waiting, free ports and raw Unix-socket connections (for connection floods).
 */
#ifndef DFC_TEST_SUPPORT_H
#define DFC_TEST_SUPPORT_H

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dfc/config.h"

/* ---- Honest skips ----
 * cmocka counts a skip() as a pass in the exit status, so a test that could not run (not root,
 * no redis-server, no sqlite3 shell) looked Passed in ctest. A test that cannot run calls
 * test_skip(why) instead, and main() ends with test_run_group(), which exits
 * TEST_SKIPPED_EXIT when no test failed and at least one skipped: dfc_test() in
 * test/CMakeLists.txt sets it as the test's SKIP_RETURN_CODE, so ctest reports the whole
 * executable Skipped, and its output names each skipped test and why. An executable is
 * reported Passed only when every test in it ran and passed. */
#define TEST_SKIPPED_EXIT 77

/* One counter for the whole executable (a weak definition: every file that includes this
 * header shares it). */
__attribute__((weak)) unsigned test_skipped;

#define test_skip(why)                                                                             \
    do {                                                                                           \
        test_skipped++;                                                                            \
        printf("SKIP: %s: %s\n", __func__, (why));                                                 \
        fflush(stdout);                                                                            \
        skip();                                                                                    \
    } while (0)

/* The exit status of a test executable from cmocka's count of failures: 1 when any failed,
 * TEST_SKIPPED_EXIT when none failed and some skipped, else 0. */
static inline int test_exit_status(int failed, size_t total) {
    if (failed != 0) {
        return 1;
    }
    if (test_skipped > 0) {
        printf("%u of %zu tests skipped: exit %d (ctest reports Skipped)\n", test_skipped, total,
               TEST_SKIPPED_EXIT);
        return TEST_SKIPPED_EXIT;
    }
    return 0;
}

#define test_run_group(tests, setup, teardown)                                                     \
    test_exit_status(cmocka_run_group_tests(tests, setup, teardown),                               \
                     sizeof(tests) / sizeof((tests)[0]))

/* The environment the tests read, through the same option module as every binary (nothing
 * else calls getenv; hack/lint.sh checks): TMPDIR, and DFC_TEST_KEEP (set: keep the harness's
 * directories to inspect). Release with test_env_free(). */
struct test_env {
    char *tmpdir;
    char *keep; /* NULL unless DFC_TEST_KEEP is set */
};

static inline const struct dfc_config_schema *test_env_schema(void) {
    static const struct dfc_config_row rows[] = {
        {.type = DFC_CFG_STRING,
         .offset = offsetof(struct test_env, tmpdir),
         .def = "/tmp",
         .env = "TMPDIR"},
        {.type = DFC_CFG_STRING,
         .offset = offsetof(struct test_env, keep),
         .env = "DFC_TEST_KEEP",
         .flags = DFC_OPT_OPTIONAL},
    };
    static const struct dfc_config_schema schema = {"test", rows, sizeof(rows) / sizeof(rows[0])};
    return &schema;
}

static inline void test_env_load(struct test_env *e) {
    struct dfc_error err;
    *e = (struct test_env){0};
    if (dfc_config_defaults(test_env_schema(), e, &err) < 0 ||
        dfc_config_load_env(test_env_schema(), e, &err) < 0) {
        fprintf(stderr, "test environment: %s\n", err.msg);
        abort();
    }
}

static inline void test_env_free(struct test_env *e) {
    dfc_config_free(test_env_schema(), e);
}

/* Creates a fresh directory under $TMPDIR (or /tmp) into buf; aborts on failure. */
static inline void test_mkdtemp(char *buf, size_t size, const char *name) {
    struct test_env env;
    test_env_load(&env);
    snprintf(buf, size, "%s/dfc-%s-XXXXXX", env.tmpdir, name);
    test_env_free(&env);
    if (mkdtemp(buf) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

/* Removes a directory tree made by a test. */
static inline void test_rmtree(const char *dir) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: cannot remove %s\n", dir);
    }
}

/* For execve() in a child of a process that may have threads (gRPC's), where the child may
 * call only async-signal-safe functions (no setenv): this process's environment with the
 * "NAME=value" entries of set (NULL-terminated) added, or replacing the same names. Made
 * before the fork; the array is malloc'd (free it after), its strings are environ's and set's. */
static inline char **test_environ_with(const char *const *set) {
    size_t n = 0, k = 0;
    while (environ[n] != NULL) {
        n++;
    }
    while (set[k] != NULL) {
        k++;
    }
    char **env = malloc((n + k + 1) * sizeof(*env));
    if (env == NULL) {
        abort();
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < k && !replaced; j++) {
            replaced = strncmp(environ[i], set[j], strcspn(set[j], "=") + 1) == 0;
        }
        if (!replaced) {
            env[m++] = environ[i];
        }
    }
    for (size_t j = 0; j < k; j++) {
        env[m++] = (char *)set[j];
    }
    env[m] = NULL;
    return env;
}

static inline double test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Polls pred(arg) every millisecond until it holds or timeout_ms passes. */
static inline bool test_wait_for(bool (*pred)(void *), void *arg, int timeout_ms) {
    double until = test_now_ms() + timeout_ms;
    while (test_now_ms() < until) {
        if (pred(arg)) {
            return true;
        }
        usleep(1000);
    }
    return pred(arg);
}

/* A raw connection to the Unix socket at path (no gRPC on it); -1 with errno on failure. */
static inline int test_connect_unix(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* True when the server closed fd (what it sent before, if anything, is read and dropped). */
static inline bool test_closed_by_peer(int fd) {
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0) {
            return true;
        }
        if (n < 0 && errno != EINTR) {
            return errno != EAGAIN; /* EAGAIN: open and quiet; ECONNRESET: closed */
        }
    }
}

/* A 127.0.0.1 port that refuses connections for as long as *ret_fd stays open: a socket bound
 * to it that does not listen, so a connect gets a reset and no other socket (another test's
 * server, or a free port picked meanwhile) can have it. A port closed after the pick (as
 * test_free_port's) may be taken by another test running at the same time, and a call meant
 * to find nothing there then reaches that test's server. The caller closes *ret_fd. */
static inline unsigned test_refusing_port(int *ret_fd) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        abort();
    }
    *ret_fd = fd;
    return ntohs(a.sin_port);
}

/* The one port picker of the tests: a TCP port on ip (127.0.0.0/8) nothing is bound to right
 * now, for a server to bind (checked by a bind, then closed; aborts when none is found). It is
 * drawn at random from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), because
 * every outgoing connection of every test (gRPC, Redis clients) takes an ephemeral port: a port
 * bind(0) handed out and released was found taken by such a connection before the daemon it was
 * meant for could bind it. Two tests can still draw the same port at once (about 1 in 10000 per
 * pair of draws); a port that must refuse is test_refusing_port's. */
static inline unsigned test_free_port_on(const char *ip) {
    struct in_addr addr;
    if (inet_pton(AF_INET, ip, &addr) != 1) {
        fprintf(stderr, "test_free_port_on: bad IPv4 address %s\n", ip);
        abort();
    }
    unsigned lo = 32768; /* the kernel's default start of the ephemeral range */
    FILE *fp = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (fp != NULL) {
        if (fscanf(fp, "%u", &lo) != 1) {
            lo = 32768;
        }
        fclose(fp);
    }
    unsigned first = lo > 11024 ? lo - 10000 : 1024, span = lo > first ? lo - first : 1;
    static unsigned seq;
    unsigned seed = (unsigned)getpid() * 2654435761U ^ (unsigned)time(NULL) ^ ++seq * 40503U;
    for (int tries = 0; tries < 1000; tries++) {
        unsigned port = first + (unsigned)rand_r(&seed) % span;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {
            .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = addr};
        bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        if (fd >= 0) {
            close(fd);
        }
        if (ok) {
            return port;
        }
    }
    abort();
}

/* test_free_port_on("127.0.0.1"). */
static inline unsigned test_free_port(void) {
    return test_free_port_on("127.0.0.1");
}

#endif /* DFC_TEST_SUPPORT_H */
