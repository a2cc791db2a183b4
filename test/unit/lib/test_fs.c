/* Tests for lib/src/fs.c: mkdir -p and the parent of a path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mkdir_p)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
