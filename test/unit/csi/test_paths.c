/* Tests for csi/paths.c: target paths stay below the kubelet root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "test_support.h"

static char dir[256], root[300], pod[400];

static int setup(void **state) {
    test_mkdtemp(dir, sizeof(dir), "paths");
    snprintf(root, sizeof(root), "%s/kubelet", dir);
    snprintf(pod, sizeof(pod), "%s/pods/uid/volumes/kubernetes.io~csi/v", root);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' '%s/outside'", pod, dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* csi_check_target with the canonical path copied out and the descriptor closed. */
static int check(const char *kubelet_root, const char *target, char *ret_canonical,
                 struct dfc_error *err) {
    struct csi_target t;
    int r = csi_check_target(kubelet_root, target, &t, err);
    if (r == 0) {
        assert_true(t.parent_fd >= 0);
        snprintf(ret_canonical, PATH_MAX, "%s", t.path);
        csi_target_close(&t);
    } else {
        assert_int_equal(t.parent_fd, -1);
    }
    return r;
}

static int teardown(void **state) {
    test_rmtree(dir);
    return 0;
}

static void test_accepts_kubelet_targets(void **state) {
    struct dfc_error err;
    char t[500], canon[PATH_MAX], want[PATH_MAX];
    snprintf(t, sizeof(t), "%s/mount", pod);
    assert_int_equal(check(root, t, canon, &err), 0);
    assert_string_equal(canon, t);
    /* A trailing slash on the root does not matter. */
    char root_slash[320];
    snprintf(root_slash, sizeof(root_slash), "%s/", root);
    assert_int_equal(check(root_slash, t, canon, &err), 0);
    /* Sloppy spellings of the same target meet the same canonical path. */
    snprintf(want, sizeof(want), "%s", t);
    char *slash = strrchr(t, '/');
    snprintf(t + (slash - t), sizeof(t) - (size_t)(slash - t), "//mount/");
    assert_int_equal(check(root, t, canon, &err), 0);
    assert_string_equal(canon, want);
}

static void test_refuses_escapes(void **state) {
    struct dfc_error err;
    char t[600], canon[PATH_MAX];
    assert_int_equal(check(root, "relative/mount", canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must be absolute"));
    snprintf(t, sizeof(t), "%s/../outside/mount", pod);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must not contain . or .."));
    snprintf(t, sizeof(t), "%s/outside/mount", dir);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is not under the kubelet root"));
    /* A sibling whose name starts like the root is not under it. */
    snprintf(t, sizeof(t), "%s-evil/mount", root);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    /* A symlinked directory inside the root that points outside. */
    char link[500], target[500];
    snprintf(link, sizeof(link), "%s/pods/escape", root);
    snprintf(target, sizeof(target), "%s/outside", dir);
    assert_int_equal(symlink(target, link), 0);
    snprintf(t, sizeof(t), "%s/mount", link);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "resolves outside the kubelet root"));
    /* The target itself a symlink. */
    snprintf(t, sizeof(t), "%s/mount", pod);
    assert_int_equal(symlink(target, t), 0);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is a symlink"));
    /* A missing parent is reported as such. */
    snprintf(t, sizeof(t), "%s/pods/nope/mount", root);
    assert_int_equal(check(root, t, canon, &err), -ENOENT);
}

/* Symlinks below the root are refused even when they stay inside it (they could be swapped
 * for one that does not), and the descriptor handed back is the real parent. */
static void test_resolves_once_without_symlinks(void **state) {
    struct dfc_error err;
    char link[500], t[600], canon[PATH_MAX];
    snprintf(link, sizeof(link), "%s/pods/alias", root);
    assert_int_equal(symlink("uid", link), 0);
    snprintf(t, sizeof(t), "%s/volumes/kubernetes.io~csi/v/mount", link);
    assert_int_equal(check(root, t, canon, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "goes through a symlink"));
    snprintf(t, sizeof(t), "%s/mount", pod);
    struct csi_target target;
    assert_int_equal(csi_check_target(root, t, &target, &err), 0);
    assert_string_equal(target.base, "mount");
    struct stat a, b;
    assert_int_equal(fstat(target.parent_fd, &a), 0);
    assert_int_equal(stat(pod, &b), 0);
    assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    csi_target_close(&target);
    assert_int_equal(target.parent_fd, -1);
    /* A component that is a file, and a target right below the root. */
    snprintf(t, sizeof(t), "%s/file", root);
    FILE *fp = fopen(t, "w");
    fclose(fp);
    snprintf(t, sizeof(t), "%s/file/mount", root);
    assert_int_equal(check(root, t, canon, &err), -ENOTDIR);
    snprintf(t, sizeof(t), "%s/mount", root);
    assert_int_equal(check(root, t, canon, &err), 0);
    assert_string_equal(canon, t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accepts_kubelet_targets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolves_once_without_symlinks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
