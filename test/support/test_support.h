/*
 * test_support.h - small helpers shared by the cmocka tests: temp directories and waiting.
 */
#ifndef DFC_TEST_SUPPORT_H
#define DFC_TEST_SUPPORT_H

#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/config.h"

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
