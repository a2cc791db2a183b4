/* Tests for csi/published.c: counting the socket dir's bind mounts below the kubelet dir in
 * hand-written mountinfo tables (escapes, a socket dir that is itself a mount point, another
 * filesystem's mounts, stacked mounts, a mount that shadows the socket dir's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "published.h"

static int count(const char *table, const char *sock, const char *kubelet, uint64_t *n) {
    FILE *f = fmemopen((void *)table, strlen(table), "r");
    assert_non_null(f);
    int r = csi_published_count(f, sock, kubelet, n);
    fclose(f);
    return r;
}

/* /run is a tmpfs (0:25); the socket dir /run/dragonfly is bound into two pods, one of them
 * twice (a stacked mount), and a pod has an unrelated tmpfs and a bind of another /run dir. */
static const char table[] =
    "22 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n"
    "25 22 0:25 / /run rw,nosuid - tmpfs tmpfs rw\n"
    "40 22 254:1 /var/lib/kubelet /var/lib/kubelet rw - ext4 /dev/vda1 rw\n"
    "50 40 0:25 /dragonfly /var/lib/kubelet/pods/a/volumes/kubernetes.io~csi/d/mount ro - tmpfs "
    "tmpfs rw\n"
    "51 40 0:25 /dragonfly /var/lib/kubelet/pods/b\\040c/volumes/kubernetes.io~csi/d/mount ro - "
    "tmpfs tmpfs rw\n"
    "52 51 0:25 /dragonfly /var/lib/kubelet/pods/b\\040c/volumes/kubernetes.io~csi/d/mount ro - "
    "tmpfs tmpfs rw\n"
    "53 40 0:31 / /var/lib/kubelet/pods/a/volumes/kubernetes.io~empty-dir/x rw - tmpfs tmpfs rw\n"
    "54 40 0:25 /other /var/lib/kubelet/pods/a/volumes/kubernetes.io~csi/e/mount ro - tmpfs "
    "tmpfs rw\n"
    "55 22 0:25 /dragonfly /mnt/outside ro - tmpfs tmpfs rw\n";

static void test_counts_binds_below_kubelet(void **state) {
    uint64_t n = 99;
    assert_int_equal(count(table, "/run/dragonfly", "/var/lib/kubelet", &n), 0);
    assert_int_equal(n, 3); /* a, and b c twice (stacked); not /other, not /mnt/outside */
    /* The kubelet dir itself is no published volume, nor is a sibling dir with its prefix. */
    assert_int_equal(count(table, "/run/dragonfly", "/var/lib/kube", &n), 0);
    assert_int_equal(n, 0);
}

/* The socket dir is a mount point of its own (a hostPath mount in the plugin's pod): its root
 * is the mount's root. */
static void test_socket_dir_is_a_mount(void **state) {
    static const char t[] =
        "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
        "30 22 0:40 /host/run/dragonfly /var/run/dragonfly rw - tmpfs tmpfs rw\n"
        "41 22 0:40 /host/run/dragonfly /k/pods/p/mount ro - tmpfs tmpfs rw\n"
        "42 22 0:40 /host/run /k/pods/q/mount ro - tmpfs tmpfs rw\n";
    uint64_t n = 0;
    assert_int_equal(count(t, "/var/run/dragonfly", "/k", &n), 0);
    assert_int_equal(n, 1);
    /* On the root filesystem itself: the root joined with the path. */
    static const char t2[] = "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
                             "41 22 254:1 /srv/sock /k/pods/p/mount ro - ext4 /dev/vda1 rw\n"
                             "42 22 254:1 / /k/pods/q/mount ro - ext4 /dev/vda1 rw\n";
    assert_int_equal(count(t2, "/srv/sock", "/k", &n), 0);
    assert_int_equal(n, 1);
}

/* A later mount on the same point shadows the earlier one: the last listed holds the dir. */
static void test_shadowing_mount(void **state) {
    static const char t[] = "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
                            "25 22 0:25 / /run rw - tmpfs tmpfs rw\n"
                            "26 25 0:26 / /run rw - tmpfs tmpfs rw\n"
                            "41 22 0:25 /d /k/p1 ro - tmpfs tmpfs rw\n"
                            "42 22 0:26 /d /k/p2 ro - tmpfs tmpfs rw\n";
    uint64_t n = 0;
    assert_int_equal(count(t, "/run/d", "/k", &n), 0);
    assert_int_equal(n, 1);
}

static void test_malformed_and_empty(void **state) {
    uint64_t n = 0;
    assert_int_equal(count("", "/run/d", "/k", &n), -ENOENT); /* nothing holds the dir */
    static const char t[] = "garbage\n"
                            "22 1\n"
                            "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
                            "41 22 254:1 /run/d /k/p1 ro - ext4 /dev/vda1 rw\n";
    assert_int_equal(count(t, "/run/d", "/k", &n), 0);
    assert_int_equal(n, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_binds_below_kubelet),
        cmocka_unit_test(test_socket_dir_is_a_mount),
        cmocka_unit_test(test_shadowing_mount),
        cmocka_unit_test(test_malformed_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
