/*
 * Tests for daemon/caller.c: the caller's groups from /proc, and taking on its identity for
 * one thread only (read back from /proc/self/task/<tid>/status), restored on leave. Most need
 * root (they change ids) and skip without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caller.h"
#include "test_support.h"

/* The fs column of the Uid: (or Gid:) line and the Groups: line of one thread. */
struct ids {
    long fsuid, fsgid;
    char groups[256];
};

static void thread_ids(pid_t tid, struct ids *ret) {
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    memset(ret, 0, sizeof(*ret));
    while (fgets(line, sizeof(line), f) != NULL) {
        long r, e, s, fs;
        if (sscanf(line, "Uid: %ld %ld %ld %ld", &r, &e, &s, &fs) == 4) {
            ret->fsuid = fs;
        } else if (sscanf(line, "Gid: %ld %ld %ld %ld", &r, &e, &s, &fs) == 4) {
            ret->fsgid = fs;
        } else if (strncmp(line, "Groups:", 7) == 0) {
            const char *p = line + 7;
            while (*p == ' ' || *p == '\t') {
                p++;
            }
            snprintf(ret->groups, sizeof(ret->groups), "%.*s", (int)strcspn(p, " \n"), p);
        }
    }
    fclose(f);
}

static pid_t gettid_(void) {
    return (pid_t)syscall(SYS_gettid);
}

static void test_init_reads_groups_of_a_matching_process(void **state) {
    (void)state;
    gid_t mine[DFD_CALLER_MAX_GROUPS];
    int n = getgroups(DFD_CALLER_MAX_GROUPS, mine);
    assert_true(n >= 0);
    struct dfd_caller c;
    dfd_caller_init(&c, getpid(), geteuid(), getegid());
    assert_int_equal(c.n_groups, n);
    assert_false(c.too_many_groups);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c.groups[i], mine[i]);
    }
    /* The pid shows other ids (a reused pid): the primary group only. */
    dfd_caller_init(&c, getpid(), geteuid() + 1, getegid());
    assert_int_equal(c.n_groups, 0);
    assert_int_equal(c.uid, geteuid() + 1);
    dfd_caller_init(&c, 0, 5, 6); /* another pid namespace */
    assert_int_equal(c.n_groups, 0);
    assert_int_equal(c.gid, 6);
}

/* A caller in another mount namespace (a pod) names paths the daemon would resolve in its
 * own: enter refuses it before any identity changes, as it does a caller /proc cannot show. */
static void test_mount_namespace_is_checked(void **state) {
    (void)state;
    struct dfd_caller c;
    struct dfd_caller_saved saved;
    struct dfc_error err;
    dfd_caller_init(&c, getpid(), geteuid(), getegid());
    assert_true(c.same_mnt_ns);
    dfd_caller_init(&c, 0, geteuid(), getegid()); /* not visible here: unknown */
    assert_false(c.same_mnt_ns);
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), DFC_E_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "runs in another mount namespace than the daemon"));
    assert_false(saved.switched);
    if (geteuid() != 0) {
        test_skip("a private mount namespace needs root");
    }
    int ready[2], go[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char ok = unshare(CLONE_NEWNS) == 0 ? '1' : '0';
        (void)!write(ready[1], &ok, 1);
        (void)!read(go[0], &ok, 1);
        _exit(0);
    }
    char b = 0;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_int_equal(b, '1');
    dfd_caller_init(&c, child, geteuid(), getegid()); /* same ids, another namespace */
    (void)!write(go[1], "x", 1);
    waitpid(child, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    assert_false(c.same_mnt_ns);
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), DFC_E_FAILED_PRECONDITION);
}

struct worker {
    const struct dfd_caller *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: entered (or failed), 2: may leave, 3: left */
    int enter_rc;
    pid_t tid;
    int open_as_caller, open_after; /* open() of a root-only file: 0 or -errno */
    const char *secret;
};

static void set_stage(struct worker *w, int stage) {
    pthread_mutex_lock(&w->mu);
    w->stage = stage;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_stage(struct worker *w, int stage) {
    pthread_mutex_lock(&w->mu);
    while (w->stage < stage) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

static int try_open(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    close(fd);
    return 0;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct dfd_caller_saved saved;
    struct dfc_error err;
    w->tid = gettid_();
    w->enter_rc = dfd_caller_enter(w->c, &saved, &err);
    if (w->enter_rc == 0) {
        w->open_as_caller = try_open(w->secret);
    }
    set_stage(w, 1);
    wait_stage(w, 2);
    if (w->enter_rc == 0) {
        dfd_caller_leave(&saved);
        w->open_after = try_open(w->secret);
    }
    set_stage(w, 3);
    wait_stage(w, 4);
    return NULL;
}

static void test_enter_changes_only_this_thread(void **state) {
    (void)state;
    if (geteuid() != 0) {
        test_skip("needs root to take on another uid");
    }
    char dir[256], secret[300];
    test_mkdtemp(dir, sizeof(dir), "caller");
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    int fd = open(secret, O_WRONLY | O_CREAT, 0600);
    close(fd);
    struct dfd_caller c;
    dfd_caller_init(&c, 0, 65534, 65533);
    c.same_mnt_ns = true; /* a caller of this namespace (test_mount_namespace_is_checked) */
    c.groups[0] = 4242;
    c.groups[1] = 4343;
    c.n_groups = 2;
    struct ids before, main_ids, other;
    thread_ids(gettid_(), &before);
    struct worker w = {.c = &c, .secret = secret};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    wait_stage(&w, 1);
    assert_int_equal(w.enter_rc, 0);
    thread_ids(w.tid, &other);
    thread_ids(gettid_(), &main_ids);
    assert_int_equal(other.fsuid, 65534);
    assert_int_equal(other.fsgid, 65533);
    assert_string_equal(other.groups, "4242");
    /* The other threads keep the daemon's identity. */
    assert_int_equal(main_ids.fsuid, before.fsuid);
    assert_int_equal(main_ids.fsgid, before.fsgid);
    assert_string_equal(main_ids.groups, before.groups);
    assert_int_equal(try_open(secret), 0);
    /* As the caller, root's capabilities do not apply to files: its 0600 file is closed. */
    assert_int_equal(w.open_as_caller, -EACCES);
    set_stage(&w, 2);
    wait_stage(&w, 3);
    thread_ids(w.tid, &other);
    assert_int_equal(other.fsuid, before.fsuid);
    assert_int_equal(other.fsgid, before.fsgid);
    assert_string_equal(other.groups, before.groups);
    assert_int_equal(w.open_after, 0);
    set_stage(&w, 4);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    test_rmtree(dir);
}

/* A caller in more groups than the daemon can carry is refused, not truncated. */
static void test_too_many_groups_is_refused(void **state) {
    (void)state;
    if (geteuid() != 0) {
        test_skip("needs root to give a process many groups");
    }
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        static gid_t many[DFD_CALLER_MAX_GROUPS + 10];
        for (int i = 0; i < DFD_CALLER_MAX_GROUPS + 10; i++) {
            many[i] = (gid_t)(10000 + i);
        }
        int ok = setgroups(DFD_CALLER_MAX_GROUPS + 10, many) == 0 && setgid(65534) == 0 &&
                 setuid(65534) == 0;
        (void)!write(ready[1], ok ? "1" : "0", 1);
        pause();
        _exit(0);
    }
    char b = 0;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_int_equal(b, '1');
    struct dfd_caller c;
    dfd_caller_init(&c, child, 65534, 65534);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    assert_true(c.too_many_groups);
    struct dfd_caller_saved saved;
    struct dfc_error err;
    assert_int_equal(dfd_caller_enter(&c, &saved, &err), -EACCES);
    assert_non_null(strstr(err.msg, "more than 256 supplementary groups"));
    struct ids now;
    thread_ids(gettid_(), &now);
    assert_int_equal(now.fsuid, 0);
}

/* A daemon that is not root acts only for its own uid (run in a child that drops root). */
static void test_unprivileged_daemon_acts_only_for_itself(void **state) {
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
            _exit(10);
        }
        struct dfd_caller me, other;
        dfd_caller_init(&me, getpid(), geteuid(), getegid());
        dfd_caller_init(&other, 0, geteuid() + 1, getegid());
        other.same_mnt_ns = true; /* a caller of this namespace: the uid is what is tested */
        struct dfd_caller_saved saved;
        struct dfc_error err;
        if (dfd_caller_enter(&me, &saved, &err) != 0 || saved.switched) {
            _exit(11);
        }
        dfd_caller_leave(&saved);
        if (dfd_caller_enter(&other, &saved, &err) != -EACCES) {
            _exit(12);
        }
        char want[160];
        snprintf(want, sizeof(want), "dfdaemon runs as uid %d and cannot act for uid %d",
                 (int)geteuid(), (int)geteuid() + 1);
        _exit(strstr(err.msg, want) != NULL && strstr(err.msg, "stream the file instead") ? 0 : 13);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_reads_groups_of_a_matching_process),
        cmocka_unit_test(test_mount_namespace_is_checked),
        cmocka_unit_test(test_enter_changes_only_this_thread),
        cmocka_unit_test(test_too_many_groups_is_refused),
        cmocka_unit_test(test_unprivileged_daemon_acts_only_for_itself),
    };
    return test_run_group(tests, NULL, NULL);
}
