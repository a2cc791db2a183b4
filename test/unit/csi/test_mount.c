/* Tests for csi/mount.c: the mountinfo scan and its unescaping, on a recorded table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount.h"

static struct csi_mount_state scan(const char *path) {
    FILE *f = fopen(TESTDATA "/mountinfo", "r");
    assert_non_null(f);
    struct csi_mount_state st;
    assert_int_equal(csi_mountinfo_scan(f, path, &st), 0);
    fclose(f);
    return st;
}

static void test_scan(void **state) {
    struct csi_mount_state st =
        scan("/var/lib/kubelet/pods/1a2b/volumes/kubernetes.io~csi/dfcache/mount");
    assert_int_equal(st.count, 1);
    assert_true(st.read_only);
    st = scan("/var/run/dragonfly");
    assert_int_equal(st.count, 1);
    assert_false(st.read_only);
    /* Not a mount point, nor a prefix match. */
    assert_int_equal(scan("/var/lib/kubelet").count, 0);
    assert_int_equal(scan("/var/run/dragon").count, 0);
}

static void test_escapes(void **state) {
    assert_int_equal(
        scan("/var/lib/kubelet/pods/with space/volumes/kubernetes.io~csi/v/mount").count, 1);
    assert_int_equal(
        scan("/var/lib/kubelet/pods/with\\040space/volumes/kubernetes.io~csi/v/mount").count, 0);
    struct csi_mount_state st = scan("/var/lib/kubelet/pods/back\\slash/mount");
    assert_int_equal(st.count, 1);
    assert_false(st.read_only); /* "robust" is not "ro" */
}

static void test_stacked_mounts_are_counted(void **state) {
    struct csi_mount_state st = scan("/var/lib/kubelet/pods/dup/mount");
    assert_int_equal(st.count, 3);
    assert_true(st.read_only); /* the top one */
}

static void test_unescape(void **state) {
    char out[32];
    assert_int_equal(csi_mountinfo_unescape("a\\011b\\012c", 11, out, sizeof(out)), 0);
    assert_string_equal(out, "a\tb\nc");
    assert_int_equal(csi_mountinfo_unescape("\\9xx", 4, out, sizeof(out)), 0);
    assert_string_equal(out, "\\9xx"); /* not an octal escape: kept */
    assert_int_equal(csi_mountinfo_unescape("trail\\04", 8, out, sizeof(out)), 0);
    assert_string_equal(out, "trail\\04");
    assert_int_equal(csi_mountinfo_unescape("0123456789", 10, out, 5), -ENAMETOOLONG);
}

static void test_overlong_lines_are_skipped(void **state) {
    char path[] = "/tmp/dfc-mountinfo-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w+");
    fputs("1 1 0:1 / /", f);
    for (int i = 0; i < 20000; i++) {
        fputc('x', f);
    }
    fputs(" rw - tmpfs tmpfs rw\n", f);
    fputs("2 1 0:1 / /target rw - tmpfs tmpfs rw\n", f);
    rewind(f);
    struct csi_mount_state st;
    assert_int_equal(csi_mountinfo_scan(f, "/target", &st), 0);
    assert_int_equal(st.count, 1);
    fclose(f);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_stacked_mounts_are_counted),
        cmocka_unit_test(test_unescape),
        cmocka_unit_test(test_overlong_lines_are_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
