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

static void test_an_overlong_line_does_not_hide_the_next(void **state) {
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

/* A table in memory with a 64 KiB line: mount point "/" plus 16000 spaces, "\040" each. */
static FILE *table_with_long_line(char **ret_buf, char *ret_path) {
    size_t cap = 128 * 1024, n = 0;
    char *buf = malloc(cap);
    n += (size_t)snprintf(buf + n, cap - n, "1 0 0:1 / / rw - tmpfs tmpfs rw\n");
    n += (size_t)snprintf(buf + n, cap - n, "7 1 0:2 / /");
    ret_path[0] = '/';
    for (int i = 0; i < 16000; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "\\040");
        ret_path[1 + i] = ' ';
    }
    ret_path[16001] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, " ro,nosuid shared:5 - tmpfs tmpfs rw\n");
    n += (size_t)snprintf(buf + n, cap - n, "8 7 0:2 / /after rw - tmpfs tmpfs rw\n");
    assert_true(n > 64000);
    *ret_buf = buf;
    FILE *f = fmemopen(buf, n, "r");
    assert_non_null(f);
    return f;
}

static void test_scan_reads_a_64k_line(void **state) {
    static char path[16002];
    char *buf;
    FILE *f = table_with_long_line(&buf, path);
    struct csi_mount_state st;
    assert_int_equal(csi_mountinfo_scan(f, path, &st), 0);
    assert_int_equal(st.count, 1);
    assert_true(st.read_only);
    rewind(f);
    assert_int_equal(csi_mountinfo_scan(f, "/after", &st), 0); /* the next line is intact */
    assert_int_equal(st.count, 1);
    assert_false(st.read_only);
    fclose(f);
    free(buf);
}

static struct csi_mount_state stack(uint64_t top, uint64_t under) {
    FILE *f = fopen(TESTDATA "/mountinfo", "r");
    assert_non_null(f);
    struct csi_mount_state st;
    assert_int_equal(csi_mountinfo_stack(f, top, under, &st), 0);
    fclose(f);
    return st;
}

static void test_stack_by_mount_ids(void **state) {
    struct csi_mount_state st = stack(416, 28); /* 416 on 415 on 414, on a dir of mount 28 */
    assert_int_equal(st.count, 3);
    assert_true(st.read_only);
    st = stack(415, 28);
    assert_int_equal(st.count, 2);
    assert_false(st.read_only);
    st = stack(412, 28);
    assert_int_equal(st.count, 1);
    assert_true(st.read_only);
    assert_int_equal(stack(28, 28).count, 0);  /* the target is on its parent's mount */
    assert_int_equal(stack(999, 28).count, 0); /* gone from the table */
    /* Down to the root's parent: the chain ends where the table does. */
    assert_int_equal(stack(416, 0).count, 4);
}

static void test_stack_reads_a_64k_line(void **state) {
    static char path[16002];
    char *buf;
    FILE *f = table_with_long_line(&buf, path);
    struct csi_mount_state st;
    assert_int_equal(csi_mountinfo_stack(f, 8, 1, &st), 0);
    assert_int_equal(st.count, 2); /* 8 on 7, and 7 is the 64 KiB line */
    assert_false(st.read_only);
    rewind(f);
    assert_int_equal(csi_mountinfo_stack(f, 7, 1, &st), 0);
    assert_int_equal(st.count, 1);
    assert_true(st.read_only);
    fclose(f);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_stacked_mounts_are_counted),
        cmocka_unit_test(test_unescape),
        cmocka_unit_test(test_an_overlong_line_does_not_hide_the_next),
        cmocka_unit_test(test_scan_reads_a_64k_line),
        cmocka_unit_test(test_stack_by_mount_ids),
        cmocka_unit_test(test_stack_reads_a_64k_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
