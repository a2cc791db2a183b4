/*
 * Tests for daemon/export.c on real files in a temp dir: hard link, copy, overwrite, the
 * no-op re-export, across filesystems, and (as root) as another uid through caller.c, where
 * the kernel's fs.protected_hardlinks decides the link and the copy belongs to that uid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caller.h"
#include "export.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)

struct fx {
    char dir[256];
    char content[300];
    char *bytes;
    int content_fd;
    int dirfd;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "export");
    chmod(f->dir, 0755);
    snprintf(f->content, sizeof(f->content), "%s/content", f->dir);
    f->bytes = malloc(2 * MiB);
    for (size_t i = 0; i < 2 * MiB; i++) {
        f->bytes[i] = (char)((i + 7) * 2654435761u >> 11);
    }
    int fd = open(f->content, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, f->bytes, 2 * MiB), (ssize_t)(2 * MiB));
    close(fd);
    f->content_fd = open(f->content, O_RDONLY | O_CLOEXEC);
    f->dirfd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->content_fd >= 0 && f->dirfd >= 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    close(f->content_fd);
    close(f->dirfd);
    test_rmtree(f->dir);
    free(f->bytes);
    free(f);
    return 0;
}

static bool has_content(struct fx *f, const char *path) {
    char *back = malloc(2 * MiB + 1);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, back, 2 * MiB + 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    bool same = n == (ssize_t)(2 * MiB) && memcmp(back, f->bytes, 2 * MiB) == 0;
    free(back);
    return same;
}

static size_t temp_files(const char *dir) {
    glob_t g;
    char pat[PATH_MAX + 16];
    snprintf(pat, sizeof(pat), "%s/.dfcache-*", dir);
    if (glob(pat, GLOB_PERIOD, NULL, &g) != 0) {
        return 0;
    }
    size_t n = g.gl_pathc;
    globfree(&g);
    return n;
}

static void test_link_overwrite_and_noop(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char out[PATH_MAX];
    snprintf(out, sizeof(out), "%s/out.bin", f->dir);
    struct dfd_export_opts o = {.shown = out, .uid = 0};
    bool linked = false;
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "out.bin", &o, &linked, &err), 0);
    assert_true(linked);
    struct stat a, b;
    assert_int_equal(stat(out, &a), 0);
    assert_int_equal(stat(f->content, &b), 0);
    assert_true(a.st_ino == b.st_ino);
    /* Exporting again to the same (already linked) file is a no-op. */
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "out.bin", &o, &linked, &err), 0);
    /* Another file there needs overwrite. */
    unlink(out);
    int fd = open(out, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "old", 3), 3);
    close(fd);
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "out.bin", &o, &linked, &err),
                     -EEXIST);
    char want[PATH_MAX + 40];
    snprintf(want, sizeof(want), "output_path `%s` already exists", out);
    assert_string_equal(err.msg, want);
}

static void test_overwrite_and_directory(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char out[PATH_MAX], sub[PATH_MAX];
    snprintf(out, sizeof(out), "%s/out.bin", f->dir);
    snprintf(sub, sizeof(sub), "%s/sub", f->dir);
    int fd = open(out, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "old", 3), 3);
    close(fd);
    struct dfd_export_opts o = {.shown = out, .uid = 0};
    bool linked = false;
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "out.bin", &o, &linked, &err),
                     -EEXIST);
    assert_non_null(strstr(err.msg, "already exists"));
    o.overwrite = true;
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "out.bin", &o, &linked, &err), 0);
    assert_true(has_content(f, out));
    mkdir(sub, 0755);
    o.shown = sub;
    assert_int_equal(dfd_export_into(f->content_fd, f->dirfd, "sub", &o, &linked, &err), -EISDIR);
    assert_int_equal(temp_files(f->dir), 0);
}

/* Across filesystems: a copy (an O_TMPFILE linked into place), or EXDEV when a hard link is
 * demanded. */
static void test_across_filesystems(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct stat shm, here;
    if (stat("/dev/shm", &shm) != 0 || stat(f->dir, &here) != 0 || shm.st_dev == here.st_dev) {
        test_skip("needs /dev/shm on another filesystem");
    }
    char dir[] = "/dev/shm/dfc-export-XXXXXX", out[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct dfd_export_opts o = {.shown = out, .force_hard_link = true};
    bool linked = true;
    assert_int_equal(dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err), -EXDEV);
    assert_int_equal(access(out, F_OK), -1);
    o.force_hard_link = false;
    assert_int_equal(dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err), 0);
    assert_false(linked);
    assert_true(has_content(f, out));
    /* Without overwrite, an existing name stays (the link is atomic), with it is replaced. */
    assert_int_equal(unlink(out), 0);
    int fd = open(out, O_WRONLY | O_CREAT, 0644);
    close(fd);
    assert_int_equal(dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err), -EEXIST);
    o.overwrite = true;
    assert_int_equal(dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err), 0);
    assert_true(has_content(f, out));
    assert_int_equal(temp_files(dir), 0);
    close(dirfd);
    test_rmtree(dir);
}

/* As uid 65534 (root only): root's content may not be hard-linked by a stranger
 * (fs.protected_hardlinks), so it is copied, and the copy belongs to the caller. */
static void test_as_another_uid(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    FILE *p = fopen("/proc/sys/fs/protected_hardlinks", "r");
    int protected = 0;
    if (p != NULL) {
        protected = fgetc(p) == '1';
        fclose(p);
    }
    if (geteuid() != 0 || !protected) {
        test_skip("needs root and fs.protected_hardlinks=1");
    }
    char mine[PATH_MAX], out[PATH_MAX + 16];
    snprintf(mine, sizeof(mine), "%s/mine", f->dir);
    snprintf(out, sizeof(out), "%s/out.bin", mine);
    assert_int_equal(mkdir(mine, 0755), 0);
    assert_int_equal(chown(mine, 65534, 65534), 0);
    int dirfd = open(mine, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct dfd_caller c;
    dfd_caller_init(&c, 0, 65534, 65534);
    c.same_mnt_ns = true; /* a caller of this namespace */
    struct dfd_caller_saved saved;
    struct dfd_export_opts o = {.shown = out, .uid = 65534, .force_hard_link = true};
    bool linked = true;
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), 0);
    int r = dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err);
    dfd_caller_leave(&saved);
    assert_int_equal(r, -EACCES);
    assert_non_null(strstr(err.msg, "the kernel refused uid 65534 a hard link"));
    assert_int_equal(access(out, F_OK), -1);
    o.force_hard_link = false;
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), 0);
    r = dfd_export_into(f->content_fd, dirfd, "out.bin", &o, &linked, &err);
    dfd_caller_leave(&saved);
    assert_int_equal(r, 0);
    assert_false(linked);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_gid, 65534);
    assert_true(has_content(f, out));
    /* Into root's own directory the caller may not write at all. */
    o.shown = f->content;
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), 0);
    r = dfd_export_into(f->content_fd, f->dirfd, "other.bin", &o, &linked, &err);
    dfd_caller_leave(&saved);
    assert_int_equal(r, -EACCES);
    /* In a sticky world-writable directory another user's file is not the caller's to
     * replace: the kernel says so, and the temp link is removed. */
    char sticky[PATH_MAX], theirs[PATH_MAX + 16];
    snprintf(sticky, sizeof(sticky), "%s/sticky", f->dir);
    snprintf(theirs, sizeof(theirs), "%s/theirs.bin", sticky);
    assert_int_equal(mkdir(sticky, 0777), 0);
    assert_int_equal(chmod(sticky, 01777), 0);
    int fd = open(theirs, O_WRONLY | O_CREAT, 0666);
    close(fd);
    int sticky_fd = open(sticky, O_PATH | O_DIRECTORY | O_CLOEXEC);
    o.shown = theirs;
    o.overwrite = true;
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), 0);
    r = dfd_export_into(f->content_fd, sticky_fd, "theirs.bin", &o, &linked, &err);
    dfd_caller_leave(&saved);
    assert_int_equal(r, -EACCES);
    struct stat th;
    assert_int_equal(stat(theirs, &th), 0);
    assert_int_equal(th.st_size, 0);
    assert_int_equal(th.st_uid, 0);
    assert_int_equal(temp_files(sticky), 0);
    close(sticky_fd);
    assert_int_equal(temp_files(f->dir), 0);
    assert_int_equal(temp_files(mine), 0);
    close(dirfd);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_link_overwrite_and_noop),
        T(test_overwrite_and_directory),
        T(test_across_filesystems),
        T(test_as_another_uid),
    };
    return test_run_group(tests, NULL, NULL);
}
