/*
 * mount_ns.h - a private mount namespace for one test, left again by the fixture's teardown, so
 * no test changes the namespaces of the whole test process for the tests after it.
 *
 * test_mount_ns_enter() gives the calling thread (the test's) a mount namespace of its own with
 * / made private, so what the test mounts is seen nowhere else; test_mount_ns_leave() (in the
 * teardown: it runs when the test fails too) returns to the namespace the thread was in and
 * drops the private one with its mounts. Threads the test started must have ended by then:
 * setns(2) refuses a thread whose filesystem attributes are shared (it then says so and the
 * process stays in the private namespace). Needs root (CAP_SYS_ADMIN).
 */
#ifndef DFC_TEST_MOUNT_NS_H
#define DFC_TEST_MOUNT_NS_H

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

#include "test_support.h" /* cmocka.h */

/* The namespace to return to, -1 when none was entered, and the thread's root and working
 * directories then (one each for the executable: weak). setns(2) into a mount namespace moves
 * the thread's root and working directory to that namespace's root, which in a chroot (the
 * clean root of hack/fresh-check.sh) is outside it: leaving restores both. */
__attribute__((weak)) int test_mount_ns_saved = -1;
__attribute__((weak)) int test_mount_ns_root = -1;
__attribute__((weak)) int test_mount_ns_cwd = -1;

static inline void test_mount_ns_enter(void) {
    int fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    test_mount_ns_saved = fd;
    test_mount_ns_root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    test_mount_ns_cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(test_mount_ns_root >= 0 && test_mount_ns_cwd >= 0);
    assert_int_equal(unshare(CLONE_NEWNS), 0);
    assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

static inline void test_mount_ns_leave(void) {
    if (test_mount_ns_saved < 0) {
        return;
    }
    if (setns(test_mount_ns_saved, CLONE_NEWNS) != 0) {
        fprintf(stderr, "warning: cannot return to the test process's mount namespace: %m\n");
    } else if (fchdir(test_mount_ns_root) != 0 || chroot(".") != 0 ||
               fchdir(test_mount_ns_cwd) != 0) {
        fprintf(stderr, "warning: cannot restore the root and working directory: %m\n");
    }
    close(test_mount_ns_saved);
    close(test_mount_ns_root);
    close(test_mount_ns_cwd);
    test_mount_ns_saved = test_mount_ns_root = test_mount_ns_cwd = -1;
}

#endif /* DFC_TEST_MOUNT_NS_H */
