/*
 * Tests for daemon/storage/replica.c and commit.c on real files and a real SQLite store in a
 * temp dir: replicas written piece by piece from several threads, invisible until committed,
 * a crash mid-replica, the geometry checks; the peer_id column and its migration; the
 * before_commit hook of both import paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "dfc/units.h"
#include "storage/storage.h"
#include "storage_fixture.h"
#include "test_support.h"

#define MiB  ((uint64_t)1 << 20)
#define SEC  DFC_NS_PER_SEC
#define T0   (INT64_C(1700000000) * SEC)
#define PL   (4 * MiB)
#define ID1  "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define PEER "127.0.0.1-node-1-8c1e0f4a-6b1d-4d0e-9d5e-0c2f6a1b3c4d"

static int setup(void **state) {
    return fx_setup(state, "replica");
}

static size_t count_entries(const char *store, const char *sub) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", store, sub);
    return count_found(dir, "-type f");
}

/* Nothing of a failed or aborted replica or import is left: no row, no content, tmp/ empty. */
static void assert_nothing_left(struct fx *f, const char *id) {
    struct dfc_error err;
    struct dfd_task_meta t;
    assert_int_equal(dfd_storage_get(f->s, id, &t, &err), -ENOENT);
    assert_int_equal(count_entries(f->store, "content"), 0);
    assert_int_equal(count_entries(f->store, "tmp"), 0);
}

static struct dfd_replica_params rparams(uint64_t len) {
    struct dfd_replica_params p = {.id = ID1,
                                   .tag = "t",
                                   .application = "app",
                                   .piece_length = PL,
                                   .content_length = len,
                                   .piece_count = dfd_piece_count(len, PL),
                                   .replica_count = 3,
                                   .ttl_ns = 3600 * SEC,
                                   .created_at_ns = T0 - 600 * SEC,
                                   .persistent = true,
                                   .peer_id = PEER};
    return p;
}

static uint64_t plen(uint64_t len, uint32_t i) {
    uint64_t left = len - (uint64_t)i * PL;
    return left < PL ? left : PL;
}

static int write_piece(struct dfd_replica *rep, const char *buf, uint64_t len, uint32_t i) {
    struct dfc_error err;
    const char *p = buf + (uint64_t)i * PL;
    uint64_t n = plen(len, i);
    return dfd_replica_write_piece(rep, i, p, n, dfc_crc32_update(0, p, n), &err);
}

static struct dfd_replica *begin_replica(struct fx *f, uint64_t len) {
    struct dfd_replica_params p = rparams(len);
    struct dfd_replica *rep;
    struct dfc_error err;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    return rep;
}

/* Imports buf (begin and write must succeed); returns what the commit returns. */
static int import_buf(struct fx *f, const struct dfd_import_params *ip, const void *buf,
                      uint64_t len, struct dfd_task_meta *t, bool *existed, struct dfc_error *err) {
    struct dfd_import *imp;
    assert_int_equal(dfd_import_begin(f->s, ip, &imp, err), 0);
    assert_int_equal(dfd_import_write(imp, buf, len, err), 0);
    return dfd_import_commit(imp, T0, t, existed, err);
}

/* Stores buf as a replica under id (every piece, then the commit). */
static void store_replica(struct fx *f, const char *id, const char *buf, uint64_t len) {
    struct dfd_replica_params p = rparams(len);
    struct dfd_replica *rep;
    struct dfc_error err;
    struct dfd_task_meta t;
    p.id = id;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    for (uint32_t i = 0; i < p.piece_count; i++) {
        assert_int_equal(write_piece(rep, buf, len, i), 0);
    }
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    dfd_task_meta_done(&t);
}

/* ---- pieces from several threads ---- */

struct writer {
    struct dfd_replica *rep;
    const char *buf;
    uint64_t len;
    uint32_t n_pieces;
    unsigned k; /* writes pieces i with i % 4 == k, from the last down */
    int result;
};

static void *writer_main(void *arg) {
    struct writer *w = arg;
    for (uint32_t i = w->n_pieces; i-- > 0;) {
        if (i % 4 == w->k && (w->result = write_piece(w->rep, w->buf, w->len, i)) < 0) {
            break;
        }
    }
    return NULL;
}

static void test_pieces_from_four_threads_commit(void **state) {
    struct fx *f = *state;
    const uint64_t len = 9 * PL + 12345;
    char *buf = pattern(len, 7);
    struct dfd_replica *rep = begin_replica(f, len);
    struct dfc_error err;
    assert_int_equal(dfd_piece_count(len, PL), 10);

    struct writer w[4];
    pthread_t th[4];
    for (unsigned k = 0; k < 4; k++) {
        w[k] = (struct writer){rep, buf, len, 10, k, 0};
        assert_int_equal(pthread_create(&th[k], NULL, writer_main, &w[k]), 0);
    }
    for (unsigned k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(w[k].result, 0);
    }
    uint32_t missing[16];
    assert_int_equal(dfd_replica_missing(rep, missing, 16), 0);
    assert_true(dfd_replica_has_piece(rep, 9));
    assert_false(dfd_replica_has_piece(rep, 10));

    /* Invisible until the commit. */
    struct dfd_task_meta t;
    assert_int_equal(dfd_storage_get(f->s, ID1, &t, &err), -ENOENT);
    struct dfd_task_meta *list;
    size_t n;
    assert_int_equal(dfd_storage_list(f->s, &list, &n, &err), 0);
    assert_int_equal(n, 0);
    dfd_task_meta_list_free(list, n);
    assert_int_equal(count_entries(f->store, "content"), 0);

    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    assert_string_equal(t.id, ID1);
    assert_int_equal(t.content_length, len);
    dfd_task_meta_done(&t);

    assert_int_equal(dfd_storage_get(f->s, ID1, &t, &err), 0);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_PEER);
    assert_int_equal(t.owner_uid, geteuid());
    assert_int_equal(t.created_at_ns, T0 - 600 * SEC); /* the scheduler's: TTL anchored there */
    assert_int_equal(t.updated_at_ns, T0);
    assert_int_equal(t.finished_at_ns, T0);
    assert_int_equal(t.piece_length, PL);
    assert_int_equal(t.piece_count, 10);
    assert_int_equal(t.replica_count, 3);
    assert_int_equal(t.ttl_ns, 3600 * SEC);
    assert_true(t.persistent);
    assert_false(t.hard_linked);
    assert_string_equal(t.tag, "t");
    assert_string_equal(t.application, "app");
    assert_string_equal(t.peer_id, PEER);
    dfd_task_meta_done(&t);

    struct dfd_piece_meta *pieces;
    assert_int_equal(dfd_storage_pieces(f->s, ID1, &pieces, &n, &err), 0);
    assert_int_equal(n, 10);
    for (uint32_t i = 0; i < n; i++) {
        char want[DFC_CRC32_DIGEST_MAX];
        dfc_crc32_format(dfc_crc32_update(0, buf + (uint64_t)i * PL, plen(len, i)), want);
        assert_int_equal(pieces[i].number, i);
        assert_int_equal(pieces[i].offset, (uint64_t)i * PL);
        assert_int_equal(pieces[i].length, plen(len, i));
        assert_string_equal(pieces[i].digest, want);
    }
    free(pieces);

    /* Byte-identical content, through the store's own reader. */
    int fd;
    assert_int_equal(dfd_storage_open_content(f->s, ID1, &fd, &err), 0);
    char *back = malloc(len + 1);
    assert_int_equal(pread(fd, back, len + 1, 0), (ssize_t)len);
    assert_memory_equal(back, buf, len);
    close(fd);
    free(back);
    assert_int_equal(count_entries(f->store, "tmp"), 0);

    /* It survives a reopen (recovery keeps it). */
    struct dfd_recovery rec;
    dfd_storage_close(f->s);
    fx_open(f, &rec);
    assert_int_equal(rec.tasks, 1);
    assert_int_equal(rec.broken_rows + rec.orphan_files + rec.temp_files, 0);
    free(buf);
}

static void test_empty_replica(void **state) {
    struct fx *f = *state;
    struct dfd_replica_params p = rparams(0);
    struct dfd_replica *rep;
    struct dfc_error err;
    struct dfd_task_meta t;
    assert_int_equal(p.piece_count, 0);
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    assert_int_equal(t.content_length, 0);
    dfd_task_meta_done(&t);
}

/* ---- failures leave nothing ---- */

static void test_commit_with_a_missing_piece_fails(void **state) {
    struct fx *f = *state;
    const uint64_t len = 3 * PL;
    char *buf = pattern(len, 3);
    struct dfd_replica *rep = begin_replica(f, len);
    struct dfc_error err;
    assert_int_equal(write_piece(rep, buf, len, 2), 0);
    assert_int_equal(write_piece(rep, buf, len, 0), 0);
    uint32_t missing[4];
    assert_int_equal(dfd_replica_missing(rep, missing, 4), 1);
    assert_int_equal(missing[0], 1);
    assert_int_equal(count_entries(f->store, "tmp"), 1);
    struct dfd_task_meta t;
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), -EINVAL);
    assert_string_equal(err.msg, "piece 1 is missing");
    assert_nothing_left(f, ID1);
    free(buf);
}

static void test_abort_leaves_nothing(void **state) {
    struct fx *f = *state;
    const uint64_t len = 2 * PL + 1;
    char *buf = pattern(len, 4);
    struct dfd_replica *rep = begin_replica(f, len);
    assert_int_equal(write_piece(rep, buf, len, 1), 0);
    dfd_replica_abort(rep);
    dfd_replica_abort(NULL);
    assert_nothing_left(f, ID1);
    free(buf);
}

static void test_same_piece_twice_is_eexist(void **state) {
    struct fx *f = *state;
    const uint64_t len = 2 * PL;
    char *buf = pattern(len, 5);
    struct dfd_replica *rep = begin_replica(f, len);
    struct dfc_error err;
    assert_int_equal(write_piece(rep, buf, len, 0), 0);
    assert_int_equal(write_piece(rep, buf, len, 0), -EEXIST);
    assert_false(dfd_replica_has_piece(rep, 1));
    /* A number or length the geometry does not have. */
    assert_int_equal(dfd_replica_write_piece(rep, 2, buf, PL, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_equal(dfd_replica_write_piece(rep, 1, buf, PL - 1, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "length"));
    assert_false(dfd_replica_has_piece(rep, 1));
    dfd_replica_abort(rep);
    free(buf);
}

/* A piece in chunks: claim, pwrites, finish. A failed one (finish !ok) leaves it missing and
 * claimable again; its bytes are overwritten by the next attempt; the commit has the CRCs
 * given at finish and the bytes of the last attempt. */
static void test_a_piece_in_chunks(void **state) {
    struct fx *f = *state;
    const uint64_t len = 2 * PL + 7;
    char *buf = pattern(len, 6);
    struct dfd_replica *rep = begin_replica(f, len);
    struct dfc_error err;
    /* Not claimed: no write. */
    assert_int_equal(dfd_replica_pwrite(rep, 1, 0, buf, 10, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not claimed"));
    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL - 1, &err), -EINVAL); /* length */
    assert_int_equal(dfd_replica_claim_piece(rep, 3, PL, &err), -EINVAL);     /* number */
    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL, &err), 0);
    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL, &err), -EEXIST);
    /* Outside the piece. */
    assert_int_equal(dfd_replica_pwrite(rep, 1, PL - 4, buf, 5, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "outside"));
    assert_int_equal(dfd_replica_pwrite(rep, 1, PL + 1, buf, 0, &err), -EINVAL);
    /* A first attempt with wrong bytes, then dropped (as after a CRC mismatch). */
    char *junk = pattern(PL, 99);
    assert_int_equal(dfd_replica_pwrite(rep, 1, 0, junk, PL, &err), 0);
    dfd_replica_finish_piece(rep, 1, false, 0);
    assert_false(dfd_replica_has_piece(rep, 1));
    struct dfd_task_meta t;
    assert_int_equal(dfd_replica_claim_piece(rep, 0, PL, &err), 0);
    assert_int_equal(dfd_replica_pwrite(rep, 0, 0, buf, PL, &err), 0);
    dfd_replica_finish_piece(rep, 0, true, dfc_crc32_update(0, buf, PL));
    assert_int_equal(write_piece(rep, buf, len, 2), 0);
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), -EINVAL); /* piece 1 is missing */
    assert_non_null(strstr(err.msg, "piece 1 is missing"));
    assert_nothing_left(f, ID1);

    /* Again, piece 1 in uneven chunks after a dropped attempt: committed and byte-exact. */
    rep = begin_replica(f, len);
    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL, &err), 0);
    assert_int_equal(dfd_replica_pwrite(rep, 1, 0, junk, PL, &err), 0);
    dfd_replica_finish_piece(rep, 1, false, 0);
    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL, &err), 0);
    const char *p1 = buf + PL;
    for (uint64_t at = 0; at < PL;) {
        size_t n = at + 300007 < PL ? 300007 : (size_t)(PL - at);
        assert_int_equal(dfd_replica_pwrite(rep, 1, at, p1 + at, n, &err), 0);
        at += n;
    }
    dfd_replica_finish_piece(rep, 1, true, dfc_crc32_update(0, p1, PL));
    dfd_replica_finish_piece(rep, 1, false, 0); /* a written piece stays written */
    assert_true(dfd_replica_has_piece(rep, 1));
    assert_int_equal(dfd_replica_pwrite(rep, 1, 0, junk, 10, &err), -EINVAL);
    assert_int_equal(write_piece(rep, buf, len, 0), 0);
    assert_int_equal(write_piece(rep, buf, len, 2), 0);
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    struct dfd_piece_meta *pieces;
    size_t n;
    assert_int_equal(dfd_storage_pieces(f->s, ID1, &pieces, &n, &err), 0);
    assert_int_equal(n, 3);
    char d[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(dfc_crc32_update(0, p1, PL), d);
    assert_string_equal(pieces[1].digest, d);
    free(pieces);
    int fd = -1;
    assert_int_equal(dfd_storage_open_content(f->s, ID1, &fd, &err), 0);
    char *back = malloc(len);
    assert_int_equal(pread(fd, back, len, 0), (ssize_t)len);
    assert_memory_equal(back, buf, len);
    close(fd);
    free(back);
    dfd_task_meta_done(&t);
    free(junk);
    free(buf);
}

static void test_bad_geometry_names_the_field(void **state) {
    struct fx *f = *state;
    struct dfd_replica *rep = NULL;
    struct dfc_error err;
    static const struct {
        const char *field;
        uint64_t piece_length, content_length;
        int piece_count_delta;
        const char *id;
    } cases[] = {
        {"piece_count", PL, 10 * PL, 1, ID1},
        {"piece_count", PL, 10 * PL + 1, -1, ID1},
        {"piece_length", PL - 1, 10 * PL, 0, ID1},
        {"piece_length", 128 * MiB, 10 * PL, 0, ID1},
        {"piece_length", 0, 10 * PL, 0, ID1},
        {"content_length", PL, UINT64_MAX, 0, ID1},
        {"id", PL, PL, 0, "0A1B"},
        {"id", PL, PL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dfd_replica_params p = rparams(cases[i].content_length);
        p.piece_length = cases[i].piece_length;
        p.id = cases[i].id;
        p.piece_count = (p.piece_length != 0 && cases[i].content_length < UINT64_MAX
                             ? dfd_piece_count(cases[i].content_length, p.piece_length)
                             : 1) +
                        (uint32_t)cases[i].piece_count_delta;
        assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), -EINVAL);
        if (strncmp(err.msg, cases[i].field, strlen(cases[i].field)) != 0) {
            fail_msg("case %zu: `%s` does not name %s", i, err.msg, cases[i].field);
        }
    }
    /* Larger than the free space. */
    struct dfd_replica_params p = rparams((uint64_t)1 << 50); /* 1 PiB */
    p.piece_length = 64 * MiB;
    p.piece_count = dfd_piece_count(p.content_length, p.piece_length);
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), -ENOSPC);
    assert_nothing_left(f, ID1);
}

static void test_begin_on_a_stored_id_is_eexist(void **state) {
    struct fx *f = *state;
    struct dfd_import_params ip = {.ttl_ns = 3600 * SEC, .expected_length = -1};
    struct dfd_import *imp;
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(dfd_import_begin(f->s, &ip, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, "hello", 5, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
    struct dfd_replica_params p = rparams(5);
    p.id = t.id;
    struct dfd_replica *rep;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), -EEXIST);
    assert_int_equal(count_entries(f->store, "tmp"), 0);
    dfd_task_meta_done(&t);
}

/* An import of the same id lands while the replica is being written: the replica's commit
 * returns it when it holds the same pieces, and is -EEXIST when it does not. */
static void test_an_import_lands_first(void **state) {
    struct fx *f = *state;
    const uint64_t len = PL + 99;
    char *buf = pattern(len, 9);
    struct dfd_import_params ip = {.content_for_id = "same-id",
                                   .piece_length = PL,
                                   .ttl_ns = 3600 * SEC,
                                   .expected_length = (int64_t)len,
                                   .owner_uid = 1234};
    char id[DFD_TASK_ID_LEN + 1];
    assert_int_equal(dfd_task_id_from_string("same-id", id), 0);
    struct dfd_replica_params p = rparams(len);
    p.id = id;
    struct dfc_error err;
    struct dfd_replica *a, *b;
    assert_int_equal(dfd_replica_begin(f->s, &p, &a, &err), 0);
    assert_int_equal(dfd_replica_begin(f->s, &p, &b, &err), 0);
    for (uint32_t i = 0; i < 2; i++) {
        assert_int_equal(write_piece(a, buf, len, i), 0);
    }
    assert_int_equal(write_piece(b, buf, len, 0), 0);
    assert_int_equal(dfd_replica_write_piece(b, 1, buf, 99, 42, &err), 0); /* other bytes */

    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), 0);
    dfd_task_meta_done(&t);

    assert_int_equal(dfd_replica_commit(a, T0 + SEC, &t, &err), 0);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_STRING); /* the stored one */
    assert_int_equal(t.owner_uid, 1234);
    dfd_task_meta_done(&t);
    assert_int_equal(dfd_replica_commit(b, T0 + SEC, &t, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "already taken"));
    assert_int_equal(count_entries(f->store, "tmp"), 0);
    assert_int_equal(count_entries(f->store, "content"), 1);
    free(buf);
}

/* A replica answers an import of the same content only for the daemon's own uid: its bytes
 * were checked against piece CRCs, not the SHA-256 of the id. */
static void test_a_replica_answers_imports_of_its_owner_only(void **state) {
    struct fx *f = *state;
    const uint64_t len = PL + 77;
    char *buf = pattern(len, 14);
    struct dfd_import_params ip = {
        .ttl_ns = 3600 * SEC, .expected_length = (int64_t)len, .owner_uid = geteuid() + 1};
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    /* The content's id, as an import computes it. */
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), 0);
    char id[DFD_TASK_ID_LEN + 1];
    memcpy(id, t.id, sizeof(id));
    dfd_task_meta_done(&t);
    assert_int_equal(dfd_storage_delete(f->s, id, &err), 0);

    store_replica(f, id, buf, len);

    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "replica fetched from peers"));
    ip.owner_uid = geteuid();
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), 0);
    assert_true(existed);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_PEER);
    dfd_task_meta_done(&t);
    assert_int_equal(count_entries(f->store, "tmp"), 0);
    free(buf);
}

/* ---- a crash mid-replica ---- */

static void test_a_killed_replica_is_removed_at_open(void **state) {
    struct fx *f = *state;
    dfd_storage_close(f->s);
    f->s = NULL;
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The child: a daemon that dies with a half-written replica. */
        close(pipefd[0]);
        struct dfd_storage *s;
        struct dfd_replica *rep;
        struct dfc_error err;
        struct dfd_storage_opts o = {.dir = f->store, .keep = true};
        const uint64_t len = 3 * PL;
        char *buf = pattern(len, 6);
        struct dfd_replica_params p = rparams(len);
        char ok = 'n';
        if (dfd_storage_open(&o, &s, NULL, &err) == 0 &&
            dfd_replica_begin(s, &p, &rep, &err) == 0 && write_piece(rep, buf, len, 1) == 0) {
            ok = 'y';
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
    assert_int_equal(count_entries(f->store, "tmp"), 1);

    struct dfd_recovery rec;
    fx_open(f, &rec);
    assert_int_equal(rec.temp_files, 1);
    assert_int_equal(rec.tasks, 0);
    assert_nothing_left(f, ID1);
}

/* ---- peer_id ---- */

static void test_peer_id_round_trips(void **state) {
    struct fx *f = *state;
    char peer[DFD_PEER_ID_MAX];
    snprintf(peer, sizeof(peer), "%s", PEER);
    struct dfd_import_params ip = {.ttl_ns = 3600 * SEC, .expected_length = -1, .peer_id = peer};
    struct dfd_import *imp;
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(dfd_import_begin(f->s, &ip, &imp, &err), 0);
    memset(peer, 'x', 8); /* borrowed for the call only */
    assert_int_equal(dfd_import_write(imp, "peer", 4, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
    assert_string_equal(t.peer_id, PEER);
    char id[DFD_TASK_ID_LEN + 1];
    memcpy(id, t.id, sizeof(id));
    dfd_task_meta_done(&t);
    dfd_storage_close(f->s);
    fx_open(f, NULL);
    assert_int_equal(dfd_storage_get(f->s, id, &t, &err), 0);
    assert_string_equal(t.peer_id, PEER);
    dfd_task_meta_done(&t);
    struct dfd_task_meta *list;
    size_t n;
    assert_int_equal(dfd_storage_list(f->s, &list, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].peer_id, PEER);
    dfd_task_meta_list_free(list, n);

    /* None is "", and one too long is refused, naming the field. */
    ip.peer_id = NULL;
    assert_int_equal(dfd_import_begin(f->s, &ip, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, "none", 4, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
    assert_string_equal(t.peer_id, "");
    dfd_task_meta_done(&t);
    char big[DFD_PEER_ID_MAX + 1];
    memset(big, 'p', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ip.peer_id = big;
    assert_int_equal(dfd_import_begin(f->s, &ip, &imp, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "peer_id"));
    struct dfd_replica_params p = rparams(1);
    struct dfd_replica *rep;
    p.peer_id = big;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "peer_id"));
    assert_int_equal(count_entries(f->store, "tmp"), 0);
}

static void test_a_version_1_store_is_migrated(void **state) {
    struct fx *f = *state;
    /* A store as the previous version left it: schema version 1 (owner and origin, no peer). */
    if (!fx_make_old_store(f, ID1, 0700, 0600,
                           "ALTER TABLE tasks ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;"
                           " ALTER TABLE tasks ADD COLUMN id_origin TEXT NOT NULL DEFAULT"
                           " 'unknown';",
                           ", 1000, 'content'", "PRAGMA user_version=1;")) {
        test_skip("needs the sqlite3 command");
    }
    struct dfd_recovery rec;
    fx_open(f, &rec);
    assert_int_equal(rec.tasks, 1);
    struct dfd_task_meta t;
    struct dfc_error err;
    assert_int_equal(dfd_storage_get(f->s, ID1, &t, &err), 0);
    assert_string_equal(t.peer_id, "");
    assert_int_equal(t.owner_uid, 1000);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_CONTENT);
    dfd_task_meta_done(&t);
    /* The migrated store records peer ids: a replica's survives a reopen. */
    const uint64_t len = PL + 1;
    char *buf = pattern(len, 13);
    char id2[DFD_TASK_ID_LEN + 1];
    assert_int_equal(dfd_task_id_from_string("migrated", id2), 0);
    store_replica(f, id2, buf, len);
    reopen(f, &rec); /* again: the version is recorded */
    assert_int_equal(rec.tasks, 2);
    assert_int_equal(dfd_storage_get(f->s, id2, &t, &err), 0);
    assert_string_equal(t.peer_id, PEER);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_PEER);
    dfd_task_meta_done(&t);
    assert_int_equal(dfd_storage_get(f->s, ID1, &t, &err), 0);
    assert_string_equal(t.peer_id, "");
    dfd_task_meta_done(&t);
    free(buf);
}

/* ---- before_commit ---- */

struct hook {
    unsigned calls;
    char id[DFD_TASK_ID_LEN + 1];
    uint64_t content_length;
    uint32_t piece_count;
    char peer_id[DFD_PEER_ID_MAX];
    bool content_in_place; /* the spool was complete when the hook ran */
    int result;
    struct fx *f;
};

static int hook_fn(void *arg, const struct dfd_task_meta *pending, struct dfc_error *err) {
    struct hook *h = arg;
    struct dfd_task_meta t;
    struct dfc_error e;
    h->calls++;
    snprintf(h->id, sizeof(h->id), "%s", pending->id);
    snprintf(h->peer_id, sizeof(h->peer_id), "%s", pending->peer_id);
    h->content_length = pending->content_length;
    h->piece_count = pending->piece_count;
    /* Not visible yet. */
    h->content_in_place = dfd_storage_get(h->f->s, pending->id, &t, &e) == -ENOENT &&
                          count_entries(h->f->store, "tmp") == 1;
    if (h->result < 0) {
        return dfc_error_set(err, h->result, "the scheduler refused %s", pending->id);
    }
    return h->result; /* 0, or 1 / 2: commit without the peer id (2: register_later) */
}

static void test_before_commit_sees_the_id_and_can_abort(void **state) {
    struct fx *f = *state;
    const uint64_t len = PL + 5;
    char *buf = pattern(len, 11);
    struct hook h = {.result = -EPERM, .f = f};
    struct dfd_import_params ip = {.ttl_ns = 3600 * SEC,
                                   .expected_length = (int64_t)len,
                                   .peer_id = PEER,
                                   .before_commit = hook_fn,
                                   .before_commit_arg = &h};
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), -EPERM);
    assert_int_equal(h.calls, 1);
    assert_true(h.content_in_place);
    assert_int_equal(h.content_length, len);
    assert_int_equal(h.piece_count, 2);
    assert_string_equal(h.peer_id, PEER);
    char want[128];
    snprintf(want, sizeof(want), "the scheduler refused %s", h.id);
    assert_string_equal(err.msg, want);
    assert_nothing_left(f, h.id);

    /* Allowed: the task is stored under the id the hook saw. */
    h = (struct hook){.f = f};
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), 0);
    assert_false(existed);
    assert_int_equal(h.calls, 1);
    assert_string_equal(h.id, t.id);
    dfd_task_meta_done(&t);

    /* An identical task exists: returned, no hook. */
    h = (struct hook){.f = f, .result = -EPERM};
    assert_int_equal(import_buf(f, &ip, buf, len, &t, &existed, &err), 0);
    assert_true(existed);
    assert_int_equal(h.calls, 0);
    dfd_task_meta_done(&t);
    assert_int_equal(count_entries(f->store, "tmp"), 0);
    free(buf);
}

static void test_before_commit_in_the_path_import(void **state) {
    struct fx *f = *state;
    const uint64_t len = 3 * MiB;
    char *buf = pattern(len, 12);
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s/src", f->dir);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    struct hook h = {.result = -ECONNREFUSED, .f = f};
    struct dfd_import_params ip = {.ttl_ns = 3600 * SEC,
                                   .expected_length = -1,
                                   .before_commit = hook_fn,
                                   .before_commit_arg = &h};
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(dfd_storage_import_fd(f->s, &ip, fd, T0, NULL, NULL, &t, &existed, NULL, &err),
                     -ECONNREFUSED);
    assert_int_equal(h.calls, 1);
    assert_true(h.content_in_place);
    assert_int_equal(h.content_length, len);
    assert_nothing_left(f, h.id);
    h = (struct hook){.f = f};
    assert_int_equal(dfd_storage_import_fd(f->s, &ip, fd, T0, NULL, NULL, &t, &existed, NULL, &err),
                     0);
    assert_int_equal(h.calls, 1);
    assert_string_equal(h.id, t.id);
    dfd_task_meta_done(&t);
    close(fd);
    free(buf);
}

/* A hook answering 1 commits the task without its peer id; 2 also marks it register_later,
 * which survives a reopen until dfd_storage_set_registration() records its registration. */
static void test_before_commit_keeps_it_local_or_for_later(void **state) {
    struct fx *f = *state;
    const uint64_t len = PL + 9;
    char *one = pattern(len, 14), *two = pattern(len, 15);
    struct hook h = {.result = 1, .f = f};
    struct dfd_import_params ip = {.ttl_ns = 3600 * SEC,
                                   .expected_length = (int64_t)len,
                                   .peer_id = PEER,
                                   .before_commit = hook_fn,
                                   .before_commit_arg = &h};
    struct dfc_error err;
    struct dfd_task_meta t, local, later;
    bool existed;
    assert_int_equal(import_buf(f, &ip, one, len, &local, &existed, &err), 0);
    assert_string_equal(local.peer_id, "");
    assert_false(local.register_later);
    h = (struct hook){.result = 2, .f = f};
    assert_int_equal(import_buf(f, &ip, two, len, &later, &existed, &err), 0);
    assert_string_equal(later.peer_id, "");
    assert_true(later.register_later);
    struct dfd_recovery rec;
    reopen(f, &rec);
    assert_int_equal(dfd_storage_get(f->s, later.id, &t, &err), 0);
    assert_true(t.register_later);
    dfd_task_meta_done(&t);
    /* Only a marked row of this import takes a peer id: recorded (marked still), then
     * confirmed (the mark goes); each step only from the state it expects. */
    assert_int_equal(dfd_storage_set_registration(f->s, &local, "", "p-new", true, &err), 0);
    struct dfd_task_meta other = later;
    other.created_at_ns++; /* another import of the same id */
    assert_int_equal(dfd_storage_set_registration(f->s, &other, "", "p-new", true, &err), 0);
    assert_int_equal(dfd_storage_set_registration(f->s, &later, "", "p-new", true, &err), 1);
    assert_int_equal(dfd_storage_set_registration(f->s, &later, "", "p-other", true, &err), 0);
    assert_int_equal(dfd_storage_get(f->s, later.id, &t, &err), 0);
    assert_string_equal(t.peer_id, "p-new");
    assert_true(t.register_later);
    dfd_task_meta_done(&t);
    assert_int_equal(dfd_storage_set_registration(f->s, &later, "p-new", "p-new", false, &err), 1);
    assert_int_equal(dfd_storage_set_registration(f->s, &later, "p-new", "p-new", false, &err), 0);
    reopen(f, &rec);
    assert_int_equal(dfd_storage_get(f->s, later.id, &t, &err), 0);
    assert_string_equal(t.peer_id, "p-new");
    assert_false(t.register_later);
    dfd_task_meta_done(&t);
    assert_int_equal(dfd_storage_get(f->s, local.id, &t, &err), 0);
    assert_string_equal(t.peer_id, "");
    dfd_task_meta_done(&t);
    /* A delete from a read made before the registration (GC's list, rm's load) hands back
     * the peer id the row had when it went: that is the peer to withdraw. */
    bool deleted = false;
    assert_string_equal(later.peer_id, "");
    assert_int_equal(dfd_storage_delete_task(f->s, &later, false, &deleted, &err), 0);
    assert_true(deleted);
    assert_string_equal(later.peer_id, "p-new");
    dfd_task_meta_done(&local);
    dfd_task_meta_done(&later);
    free(one);
    free(two);
}

/* ---- the spool on tmpfs ---- */

/* The blocks (512-byte units) of the one file in store/tmp. */
static long long spool_blocks(const char *store) {
    char dir[PATH_MAX], path[PATH_MAX + 300];
    snprintf(dir, sizeof(dir), "%s/tmp", store);
    DIR *d = opendir(dir);
    assert_non_null(d);
    long long blocks = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            assert_int_equal(blocks, -1); /* exactly one spool */
            blocks = (long long)st.st_blocks;
        }
    }
    closedir(d);
    assert_true(blocks >= 0);
    return blocks;
}

/* On tmpfs the spool is not fallocated (that would allocate and clear every page before the
 * first piece): it stays sparse, each piece's write allocates its own pages, and a write that
 * meets a full filesystem fails with ENOSPC naming the piece, and the abort leaves nothing. */
static void test_a_tmpfs_spool_is_sparse_and_a_full_disk_fails_the_write(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    if (geteuid() != 0) {
        test_skip("needs root to mount a small tmpfs in a private mount namespace");
    }
    test_mount_ns_enter(); /* left by teardown */
    char small[280], filler[300];
    snprintf(small, sizeof(small), "%s/small", f->dir);
    snprintf(filler, sizeof(filler), "%s/filler", small);
    mkdir(small, 0755);
    assert_int_equal(mount("none", small, "tmpfs", 0, "size=32m"), 0);
    struct fx g = {.s = NULL};
    snprintf(g.store, sizeof(g.store), "%s", small);
    struct dfd_storage_opts o = {.dir = small, .keep = true};
    assert_int_equal(dfd_storage_open(&o, &g.s, NULL, &err), 0);

    uint64_t len = 4 * PL; /* 16 MiB of the 32 */
    char *buf = malloc(len);
    assert_non_null(buf);
    for (uint64_t i = 0; i < len; i++) {
        buf[i] = (char)(i * 131 + 7);
    }
    struct dfd_replica *rep = begin_replica(&g, len);
    assert_int_equal(spool_blocks(small), 0);
    assert_int_equal(write_piece(rep, buf, len, 2), 0);
    long long one = spool_blocks(small);
    assert_true(one >= (long long)(PL / 512) && one < (long long)(2 * PL / 512));

    /* Something else takes the rest of the filesystem. */
    int fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    static char chunk[65536];
    for (size_t n = sizeof(chunk); n > 0; n /= 2) {
        while (write(fd, chunk, n) == (ssize_t)n) {
        }
    }
    close(fd);
    const char *p = buf + PL;
    int r = dfd_replica_write_piece(rep, 1, p, PL, dfc_crc32_update(0, p, PL), &err);
    assert_int_equal(r, -ENOSPC);
    if (strstr(err.msg, "no space left") == NULL || strstr(err.msg, "piece 1") == NULL) {
        fail_msg("`%s` does not say no space and name piece 1", err.msg);
    }
    assert_false(dfd_replica_has_piece(rep, 1));
    dfd_replica_abort(rep);
    assert_int_equal(unlink(filler), 0);
    assert_nothing_left(&g, ID1);

    /* With the space back the same replica completes. */
    rep = begin_replica(&g, len);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(write_piece(rep, buf, len, i), 0);
    }
    struct dfd_task_meta t;
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    assert_int_equal(t.content_length, len);
    dfd_task_meta_done(&t);
    dfd_storage_close(g.s);
    assert_int_equal(umount2(small, MNT_DETACH), 0);
    free(buf);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_pieces_from_four_threads_commit),
        T(test_empty_replica),
        T(test_commit_with_a_missing_piece_fails),
        T(test_abort_leaves_nothing),
        T(test_same_piece_twice_is_eexist),
        T(test_a_piece_in_chunks),
        T(test_bad_geometry_names_the_field),
        T(test_begin_on_a_stored_id_is_eexist),
        T(test_an_import_lands_first),
        T(test_a_replica_answers_imports_of_its_owner_only),
        T(test_a_killed_replica_is_removed_at_open),
        T(test_peer_id_round_trips),
        T(test_a_version_1_store_is_migrated),
        T(test_before_commit_sees_the_id_and_can_abort),
        T(test_before_commit_in_the_path_import),
        T(test_before_commit_keeps_it_local_or_for_later),
        T(test_a_tmpfs_spool_is_sparse_and_a_full_disk_fails_the_write),
    };
    return test_run_group(tests, NULL, NULL);
}
