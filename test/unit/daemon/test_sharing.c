/*
 * Tests for daemon/storage/sharing.c on real files and a real SQLite store in a temp dir: a
 * shared replica's written pieces are readable while it downloads (and only those, and only
 * once shared), through the commit and not after an abort; waiters wake on a written piece, a
 * commit and an abort; a daemon killed mid-download serves nothing of it after the restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/digest.h"
#include "dfc/units.h"
#include "storage/storage.h"
#include "storage_fixture.h"
#include "test_support.h"

#define MiB  ((uint64_t)1 << 20)
#define SEC  DFC_NS_PER_SEC
#define T0   (INT64_C(1700000000) * SEC)
#define PL   (4 * MiB)
#define LEN  (3 * PL - 1000)
#define ID1  "5a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define PEER "127.0.0.1-node-1-8c1e0f4a-6b1d-4d0e-9d5e-0c2f6a1b3c4d"

static int setup(void **state) {
    return fx_setup(state, "sharing");
}

static uint64_t plen(uint32_t i) {
    uint64_t left = LEN - (uint64_t)i * PL;
    return left < PL ? left : PL;
}

static struct dfd_replica *begin(struct fx *f) {
    struct dfd_replica_params p = {.id = ID1,
                                   .piece_length = PL,
                                   .content_length = LEN,
                                   .piece_count = dfd_piece_count(LEN, PL),
                                   .replica_count = 1,
                                   .ttl_ns = 3600 * SEC,
                                   .created_at_ns = T0,
                                   .peer_id = PEER};
    struct dfd_replica *rep;
    struct dfc_error err;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    return rep;
}

static void write_piece(struct dfd_replica *rep, const char *buf, uint32_t i) {
    struct dfc_error err;
    const char *p = buf + (uint64_t)i * PL;
    assert_int_equal(
        dfd_replica_write_piece(rep, i, p, plen(i), dfc_crc32_update(0, p, plen(i)), &err), 0);
}

/* Piece i read through dfd_storage_open_piece: its row as the rows have it, its bytes. */
static void assert_piece(struct fx *f, const char *buf, uint32_t i) {
    int fd = -1;
    struct dfd_piece_meta pm;
    struct dfc_error err;
    assert_int_equal(dfd_storage_open_piece(f->s, ID1, i, &fd, &pm, &err), 0);
    assert_int_equal(pm.number, i);
    assert_int_equal(pm.offset, (uint64_t)i * PL);
    assert_int_equal(pm.length, plen(i));
    char want[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(dfc_crc32_update(0, buf + pm.offset, pm.length), want);
    assert_string_equal(pm.digest, want);
    char *got = malloc(pm.length);
    assert_int_equal(dfd_storage_read_piece(fd, ID1, &pm, got, &err), 0); /* checks the CRC */
    assert_memory_equal(got, buf + pm.offset, pm.length);
    free(got);
    close(fd);
}

static void assert_absent(struct fx *f, uint32_t i) {
    int fd = -1;
    struct dfd_piece_meta pm;
    struct dfc_error err = {0};
    assert_int_equal(dfd_storage_open_piece(f->s, ID1, i, &fd, &pm, &err), -ENOENT);
    assert_int_equal(fd, -1);
    char want[128];
    snprintf(want, sizeof(want), "piece %s-%u not found", ID1, i);
    assert_string_equal(err.msg, want);
}

static enum dfd_piece_source state_of(struct fx *f, uint8_t *bits) {
    struct dfd_piece_state st;
    struct dfc_error err;
    assert_int_equal(dfd_storage_piece_state(f->s, ID1, &st, &err), 0);
    if (bits != NULL) {
        *bits = st.written != NULL ? st.written[0] : 0;
    }
    enum dfd_piece_source src = st.source;
    if (src != DFD_PIECES_ABSENT) {
        assert_int_equal(st.piece_count, 3);
        assert_int_equal(st.piece_length, PL);
        assert_int_equal(st.content_length, LEN);
    }
    dfd_piece_state_done(&st);
    return src;
}

static void test_written_pieces_only_once_shared(void **state) {
    struct fx *f = *state;
    char *buf = pattern(LEN, 3);
    struct dfd_replica *rep = begin(f);
    write_piece(rep, buf, 1);
    assert_absent(f, 1); /* not shared: never */
    assert_int_equal(state_of(f, NULL), DFD_PIECES_ABSENT);

    dfd_replica_share(rep);
    dfd_replica_share(rep); /* idempotent */
    assert_piece(f, buf, 1);
    assert_absent(f, 0); /* not written */
    assert_absent(f, 3); /* beyond the task */
    struct dfc_error err;
    assert_int_equal(dfd_replica_claim_piece(rep, 2, plen(2), &err), 0);
    assert_int_equal(dfd_replica_pwrite(rep, 2, 0, buf + 2 * PL, plen(2), &err), 0);
    assert_absent(f, 2); /* claimed and its bytes written, but not finished: not yet */
    uint8_t bits = 0;
    assert_int_equal(state_of(f, &bits), DFD_PIECES_IN_PROGRESS);
    assert_int_equal(bits, 0x2);
    dfd_replica_finish_piece(rep, 2, true, dfc_crc32_update(0, buf + 2 * PL, plen(2)));
    assert_piece(f, buf, 2);
    assert_int_equal(state_of(f, &bits), DFD_PIECES_IN_PROGRESS);
    assert_int_equal(bits, 0x6);

    /* A piece that failed its check is dropped, and stays unserved. */
    assert_int_equal(dfd_replica_claim_piece(rep, 0, plen(0), &err), 0);
    dfd_replica_finish_piece(rep, 0, false, 0);
    assert_absent(f, 0);
    write_piece(rep, buf, 0);
    assert_piece(f, buf, 0);

    /* An fd taken before the commit reads on after the spool was renamed. */
    int fd = -1;
    struct dfd_piece_meta pm;
    assert_int_equal(dfd_storage_open_piece(f->s, ID1, 1, &fd, &pm, &err), 0);
    struct dfd_task_meta t;
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    dfd_task_meta_done(&t);
    char *got = malloc(pm.length);
    assert_int_equal(dfd_storage_read_piece(fd, ID1, &pm, got, &err), 0);
    assert_memory_equal(got, buf + PL, pm.length);
    free(got);
    close(fd);
    for (uint32_t i = 0; i < 3; i++) {
        assert_piece(f, buf, i); /* from the rows now */
    }
    assert_int_equal(state_of(f, &bits), DFD_PIECES_COMMITTED);
    assert_int_equal(bits, 0x7);
    free(buf);
}

static void test_abort_makes_it_absent(void **state) {
    struct fx *f = *state;
    char *buf = pattern(LEN, 4);
    struct dfd_replica *rep = begin(f);
    dfd_replica_share(rep);
    write_piece(rep, buf, 0);
    int fd = -1;
    struct dfd_piece_meta pm;
    struct dfc_error err;
    assert_int_equal(dfd_storage_open_piece(f->s, ID1, 0, &fd, &pm, &err), 0);
    dfd_replica_abort(rep);
    assert_absent(f, 0);
    assert_int_equal(state_of(f, NULL), DFD_PIECES_ABSENT);
    /* What was handed out before stays readable (the bytes were verified when served). */
    char *got = malloc(pm.length);
    assert_int_equal(dfd_storage_read_piece(fd, ID1, &pm, got, &err), 0);
    free(got);
    close(fd);
    free(buf);
}

/* ---- waiters ---- */

struct waiter {
    struct fx *f;
    uint64_t gen;
    int r;
    int64_t waited_ns;
};

static void *wait_main(void *arg) {
    struct waiter *w = arg;
    int64_t t0 = dfc_mono_ns();
    w->r = dfd_storage_wait_pieces(w->f->s, w->gen, t0 + 20 * SEC);
    w->waited_ns = dfc_mono_ns() - t0;
    return NULL;
}

static uint64_t gen_now(struct fx *f) {
    struct dfd_piece_state st;
    struct dfc_error err;
    assert_int_equal(dfd_storage_piece_state(f->s, ID1, &st, &err), 0);
    uint64_t g = st.gen;
    dfd_piece_state_done(&st);
    return g;
}

/* Starts a waiter on the current generation, lets it block, runs act, and checks it woke. */
static void assert_wakes(struct fx *f, void (*act)(void *), void *arg) {
    struct waiter w = {.f = f, .gen = gen_now(f), .r = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    act(arg);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.r, 0);
    assert_true(w.waited_ns < 10 * SEC);
}

struct act {
    struct dfd_replica *rep;
    const char *buf;
    uint32_t piece;
};

static void act_write(void *arg) {
    struct act *a = arg;
    write_piece(a->rep, a->buf, a->piece);
}

static void act_commit(void *arg) {
    struct act *a = arg;
    struct dfd_task_meta t;
    struct dfc_error err;
    assert_int_equal(dfd_replica_commit(a->rep, T0, &t, &err), 0);
    dfd_task_meta_done(&t);
}

static void act_abort(void *arg) {
    struct act *a = arg;
    dfd_replica_abort(a->rep);
}

static void test_waiters_wake_on_write_commit_and_abort(void **state) {
    struct fx *f = *state;
    char *buf = pattern(LEN, 5);
    /* Nothing changes: the deadline. */
    uint64_t g = gen_now(f);
    int64_t t0 = dfc_mono_ns();
    assert_int_equal(dfd_storage_wait_pieces(f->s, g, t0 + 150 * DFC_NS_PER_MS), -ETIMEDOUT);
    assert_true(dfc_mono_ns() - t0 >= 150 * DFC_NS_PER_MS);
    assert_int_equal(dfd_storage_wait_pieces(f->s, g, t0 - SEC), -ETIMEDOUT); /* already past */

    struct act a = {.rep = begin(f), .buf = buf};
    dfd_replica_share(a.rep);
    assert_int_equal(dfd_storage_wait_pieces(f->s, g, t0 + SEC), 0); /* sharing moved it */
    for (a.piece = 0; a.piece < 3; a.piece++) {
        assert_wakes(f, act_write, &a);
    }
    assert_wakes(f, act_commit, &a);
    assert_int_equal(state_of(f, NULL), DFD_PIECES_COMMITTED);

    struct dfc_error err;
    assert_int_equal(dfd_storage_delete(f->s, ID1, &err), 0);
    a.rep = begin(f);
    dfd_replica_share(a.rep);
    assert_wakes(f, act_abort, &a);
    assert_int_equal(state_of(f, NULL), DFD_PIECES_ABSENT);
    free(buf);
}

/* Readers race writers, a commit and aborts (for TSan): every piece a reader gets is whole. */
struct racer {
    struct fx *f;
    const char *buf;
    int stop;
    unsigned served;
};

static void *reader_main(void *arg) {
    struct racer *rc = arg;
    while (!__atomic_load_n(&rc->stop, __ATOMIC_RELAXED)) {
        for (uint32_t i = 0; i < 3; i++) {
            int fd = -1;
            struct dfd_piece_meta pm;
            struct dfc_error err;
            if (dfd_storage_open_piece(rc->f->s, ID1, i, &fd, &pm, &err) == 0) {
                char *got = malloc(pm.length);
                assert_int_equal(dfd_storage_read_piece(fd, ID1, &pm, got, &err), 0);
                free(got);
                close(fd);
                __atomic_add_fetch(&rc->served, 1, __ATOMIC_RELAXED);
            }
        }
        struct dfd_piece_state st;
        struct dfc_error err;
        assert_int_equal(dfd_storage_piece_state(rc->f->s, ID1, &st, &err), 0);
        dfd_piece_state_done(&st);
    }
    return NULL;
}

static void test_readers_race_writers(void **state) {
    struct fx *f = *state;
    char *buf = pattern(LEN, 6);
    struct racer rc = {.f = f, .buf = buf};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rc), 0);
    }
    struct dfc_error err;
    for (int round = 0; round < 20; round++) {
        struct dfd_replica *rep = begin(f);
        dfd_replica_share(rep);
        for (uint32_t i = 0; i < 3; i++) {
            write_piece(rep, buf, i);
        }
        if (round % 2 == 0) {
            dfd_replica_abort(rep);
        } else {
            struct dfd_task_meta t;
            assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
            dfd_task_meta_done(&t);
            assert_int_equal(dfd_storage_delete(f->s, ID1, &err), 0);
        }
    }
    __atomic_store_n(&rc.stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    free(buf);
}

/* A daemon SIGKILLed mid-download, with a shared replica holding verified pieces: after the
 * restart the spool is gone and nothing of the task is served. */
static void test_killed_mid_download_serves_nothing_after_restart(void **state) {
    struct fx *f = *state;
    dfd_storage_close(f->s);
    f->s = NULL;
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        struct dfd_storage *s;
        struct dfd_replica *rep;
        struct dfc_error err;
        struct dfd_storage_opts o = {.dir = f->store, .keep = true};
        char *buf = pattern(LEN, 7);
        struct dfd_replica_params p = {.id = ID1,
                                       .piece_length = PL,
                                       .content_length = LEN,
                                       .piece_count = 3,
                                       .replica_count = 1,
                                       .ttl_ns = 3600 * SEC,
                                       .created_at_ns = T0};
        char ok = 'n';
        int fd = -1;
        struct dfd_piece_meta pm;
        if (dfd_storage_open(&o, &s, NULL, &err) == 0 &&
            dfd_replica_begin(s, &p, &rep, &err) == 0) {
            dfd_replica_share(rep);
            if (dfd_replica_write_piece(rep, 1, buf + PL, PL, dfc_crc32_update(0, buf + PL, PL),
                                        &err) == 0 &&
                dfd_storage_open_piece(s, ID1, 1, &fd, &pm, &err) == 0) {
                ok = 'y'; /* served while it downloads */
            }
        }
        (void)write(pipefd[1], &ok, 1);
        for (;;) {
            pause();
        }
    }
    close(pipefd[1]);
    char ok = 0;
    assert_int_equal(read(pipefd[0], &ok, 1), 1);
    close(pipefd[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(ok, 'y');
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_found(tmp, "-type f"), 1);

    struct dfd_recovery rec;
    fx_open(f, &rec);
    assert_int_equal(rec.temp_files, 1);
    assert_int_equal(count_found(tmp, "-type f"), 0);
    for (uint32_t i = 0; i < 3; i++) {
        assert_absent(f, i);
    }
    assert_int_equal(state_of(f, NULL), DFD_PIECES_ABSENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_written_pieces_only_once_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_makes_it_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiters_wake_on_write_commit_and_abort, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_readers_race_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_mid_download_serves_nothing_after_restart,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
