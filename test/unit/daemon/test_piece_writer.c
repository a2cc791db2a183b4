/*
 * Tests for daemon/p2p/piece_writer.c on a real replica in a temp dir: pieces put chunk by
 * chunk from several threads through a pool smaller than the threads' appetite land intact;
 * a write error is the job's alone and skips its later chunks; buffers come back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "dfc/units.h"
#include "p2p/piece_writer.h"
#include "storage/storage.h"
#include "storage_fixture.h"

#define MiB     ((uint64_t)1 << 20)
#define SEC     DFC_NS_PER_SEC
#define T0      (INT64_C(1700000000) * SEC)
#define PL      (4 * MiB)
#define ID1     "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define CHUNK   ((size_t)64 * 1024 + 7) /* no divisor of a piece */
#define THREADS 4

static int setup(void **state) {
    return fx_setup(state, "piece-writer");
}

static struct dfd_replica *begin(struct fx *f, uint64_t len) {
    struct dfd_replica_params p = {.id = ID1,
                                   .piece_length = PL,
                                   .content_length = len,
                                   .piece_count = dfd_piece_count(len, PL),
                                   .replica_count = 1,
                                   .ttl_ns = 3600 * SEC,
                                   .created_at_ns = T0,
                                   .persistent = true};
    struct dfd_replica *rep;
    struct dfc_error err;
    assert_int_equal(dfd_replica_begin(f->s, &p, &rep, &err), 0);
    return rep;
}

static uint64_t plen(uint64_t len, uint32_t i) {
    uint64_t left = len - (uint64_t)i * PL;
    return left < PL ? left : PL;
}

/* Puts piece i of buf through w in CHUNK pieces, waits, finishes it; the job's result. */
static int put_piece(struct dfd_piece_writer *w, struct dfd_replica *rep, const char *buf,
                     uint64_t len, uint32_t i) {
    struct dfc_error err;
    uint64_t n = plen(len, i);
    const char *p = buf + (uint64_t)i * PL;
    assert_int_equal(dfd_replica_claim_piece(rep, i, n, &err), 0);
    struct dfd_piece_job j;
    dfd_piece_job_init(&j, w, i);
    for (uint64_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        void *b = dfd_piece_writer_buffer(w);
        memcpy(b, p + at, k);
        dfd_piece_writer_put(&j, at, b, k);
    }
    int r = dfd_piece_job_wait(&j, &err);
    dfd_replica_finish_piece(rep, i, r == 0, dfc_crc32_update(0, p, n));
    return r;
}

struct putter {
    struct dfd_piece_writer *w;
    struct dfd_replica *rep;
    const char *buf;
    uint64_t len;
    uint32_t first, step;
    int failures;
};

static void *putter_main(void *arg) {
    struct putter *pt = arg;
    uint32_t count = dfd_piece_count(pt->len, PL);
    for (uint32_t i = pt->first; i < count; i += pt->step) {
        pt->failures += put_piece(pt->w, pt->rep, pt->buf, pt->len, i) != 0;
    }
    return NULL;
}

/* Eleven pieces (the last one short) from four threads through three buffers: every thread
 * waits for buffers, the writer alone writes, and the committed content is the pattern. */
static void test_pieces_from_threads_land_intact(void **state) {
    struct fx *f = *state;
    uint64_t len = 10 * PL + 12345;
    char *buf = pattern(len, 7);
    struct dfd_replica *rep = begin(f, len);
    struct dfd_piece_writer *w;
    struct dfc_error err;
    assert_int_equal(dfd_piece_writer_new(rep, 3, CHUNK, &w, &err), 0);
    pthread_t th[THREADS];
    struct putter pt[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        pt[t] = (struct putter){
            .w = w, .rep = rep, .buf = buf, .len = len, .first = t, .step = THREADS};
        assert_int_equal(pthread_create(&th[t], NULL, putter_main, &pt[t]), 0);
    }
    for (uint32_t t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(pt[t].failures, 0);
    }
    dfd_piece_writer_free(w);
    struct dfd_task_meta t;
    assert_int_equal(dfd_replica_commit(rep, T0, &t, &err), 0);
    dfd_task_meta_done(&t);
    int fd;
    assert_int_equal(dfd_storage_open_content(f->s, ID1, &fd, &err), 0);
    char *got = malloc(len);
    assert_int_equal(pread(fd, got, len, 0), (ssize_t)len);
    assert_memory_equal(got, buf, len);
    close(fd);
    free(got);
    free(buf);
}

/* A chunk the replica refuses (its piece was never claimed) fails that job with the
 * replica's message and skips its later chunks; another job in the same writer is fine; a
 * chunk larger than a buffer is refused before anything is written. */
static void test_a_write_error_is_the_jobs(void **state) {
    struct fx *f = *state;
    uint64_t len = 2 * PL;
    char *buf = pattern(len, 3);
    struct dfd_replica *rep = begin(f, len);
    struct dfd_piece_writer *w;
    struct dfc_error err = {0};
    assert_int_equal(dfd_piece_writer_new(rep, 2, CHUNK, &w, &err), 0);
    struct dfd_piece_job bad;
    dfd_piece_job_init(&bad, w, 1); /* piece 1 is not claimed */
    for (int k = 0; k < 3; k++) {
        void *b = dfd_piece_writer_buffer(w);
        memset(b, 'x', CHUNK);
        dfd_piece_writer_put(&bad, (uint64_t)k * CHUNK, b, CHUNK);
    }
    assert_int_equal(dfd_piece_job_wait(&bad, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "piece 1 is not claimed"));
    assert_int_equal(put_piece(w, rep, buf, len, 0), 0);
    assert_true(dfd_replica_has_piece(rep, 0));
    assert_false(dfd_replica_has_piece(rep, 1));

    assert_int_equal(dfd_replica_claim_piece(rep, 1, PL, &err), 0);
    struct dfd_piece_job big;
    dfd_piece_job_init(&big, w, 1);
    dfd_piece_writer_put(&big, 0, dfd_piece_writer_buffer(w), CHUNK + 1);
    assert_int_equal(dfd_piece_job_wait(&big, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "in a buffer of"));
    dfd_replica_finish_piece(rep, 1, false, 0);
    assert_false(dfd_replica_has_piece(rep, 1));
    dfd_piece_writer_free(w);
    dfd_replica_abort(rep);
    free(buf);
}

/* Buffers taken and given back without a write are free again (the pool would block here
 * otherwise); the arguments are checked. */
static void test_released_buffers_come_back(void **state) {
    struct fx *f = *state;
    struct dfd_replica *rep = begin(f, PL);
    struct dfd_piece_writer *w;
    struct dfc_error err;
    assert_int_equal(dfd_piece_writer_new(rep, 2, 16, &w, &err), 0);
    for (int round = 0; round < 3; round++) {
        void *a = dfd_piece_writer_buffer(w);
        void *b = dfd_piece_writer_buffer(w);
        assert_ptr_not_equal(a, b);
        dfd_piece_writer_release(w, a);
        dfd_piece_writer_release(w, b);
    }
    dfd_piece_writer_free(w);
    assert_int_equal(dfd_piece_writer_new(rep, 0, 16, &w, &err), -EINVAL);
    assert_int_equal(dfd_piece_writer_new(rep, 2, 0, &w, &err), -EINVAL);
    assert_int_equal(dfd_piece_writer_new(NULL, 2, 16, &w, &err), -EINVAL);
    assert_int_equal(dfd_piece_writer_new(rep, SIZE_MAX, 16, &w, &err), -EINVAL);
    dfd_piece_writer_free(NULL);
    dfd_replica_abort(rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pieces_from_threads_land_intact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_write_error_is_the_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_released_buffers_come_back, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
