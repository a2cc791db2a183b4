/*
 * test_support.h - small helpers shared by the cmocka tests: temp directories and waiting.
 */
#ifndef DFC_TEST_SUPPORT_H
#define DFC_TEST_SUPPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Creates a fresh directory under $TMPDIR (or /tmp) into buf; aborts on failure. */
static inline void test_mkdtemp(char *buf, size_t size, const char *name) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, size, "%s/dfc-%s-XXXXXX", base && *base ? base : "/tmp", name);
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

#endif /* DFC_TEST_SUPPORT_H */
