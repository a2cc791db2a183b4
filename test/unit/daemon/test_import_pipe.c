/*
 * Tests for daemon/storage/import_pipe.c through the import facade (storage.h): the pipelined
 * import, whose SHA-256 stage and CRC + spool-write stage run on their own threads over a
 * bounded queue of buffers the caller hands over (dfd_import_writev_owned) or lends
 * (dfd_import_write, dfd_storage_import_fd). On a real store in a temp dir: the bytes and
 * digests match a one-pass digest, a failing spool write (RLIMIT_FSIZE: write(2) -> EFBIG)
 * fails the import with that error and leaves nothing, a commit while slices are still
 * queued commits all of them, and an abort with full queues joins both stages, releases
 * every buffer exactly once and leaves nothing. The cancelled gRPC stream mid-pipeline is
 * test_cancelled_stream_leaves_nothing in test/integration/test_dfdaemon.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dfc/units.h"
#include "storage/piece.h"
#include "storage/storage.h"
#include "storage_fixture.h"
#include "test_support.h"

#define MiB ((uint64_t)1 << 20)
#define T0  (INT64_C(1700000000) * DFC_NS_PER_SEC)

static int setup(void **state) {
    return fx_setup(state, "import-pipe");
}

static struct dfd_import_params params(void) {
    struct dfd_import_params p = {.replica_count = 1,
                                  .ttl_ns = 3600 * DFC_NS_PER_SEC,
                                  .persistent = true,
                                  .expected_length = -1};
    return p;
}

/* Buffers handed to the import: each release is counted; the first one may be held at a
 * gate (its release blocks the stage that runs it, so the queue behind it fills up). */
struct owned {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int released[64];
    bool gated, gate_open;
};

struct buf {
    struct owned *o;
    int index;
    char *bytes;
    struct iovec iov[40]; /* the bytes as the import sees them: many pieces of memory */
    int n;
};

static void release(void *arg) {
    struct buf *b = arg;
    struct owned *o = b->o;
    pthread_mutex_lock(&o->mu);
    while (b->index == 0 && o->gated && !o->gate_open) {
        pthread_cond_wait(&o->cv, &o->mu);
    }
    o->released[b->index]++;
    pthread_mutex_unlock(&o->mu);
    free(b->bytes);
    free(b);
}

static void owned_init(struct owned *o, bool gated) {
    memset(o, 0, sizeof(*o));
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->gated = gated;
}

static void *open_gate_later(void *arg) {
    struct owned *o = arg;
    struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&o->mu);
    o->gate_open = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* Hands bytes[0..len) over as a fresh heap buffer, cut into iovecs as a received message's
 * bytes are (uneven ones, an empty one among them; every other buffer is one iovec, as a
 * message decoded with a copy is); index counts its release. */
static int write_owned_at(struct dfd_import *imp, struct owned *o, const char *bytes, int index,
                          size_t len, struct dfc_error *err) {
    struct buf *b = malloc(sizeof(*b));
    b->o = o;
    b->index = index;
    b->bytes = malloc(len ? len : 1);
    memcpy(b->bytes, bytes, len);
    b->n = 0;
    size_t at = 0;
    while (at < len && b->n < 39 && index % 2 == 1) {
        size_t k = b->n == 3 ? 0 : len / 37 + (size_t)b->n * 101;
        k = k < len - at ? k : len - at;
        b->iov[b->n++] = (struct iovec){b->bytes + at, k};
        at += k;
    }
    if (at < len || b->n == 0) {
        b->iov[b->n++] = (struct iovec){b->bytes + at, len - at};
    }
    return dfd_import_writev_owned(imp, b->iov, b->n, release, b, err);
}

/* write_owned_at() of content[index * len ..][0..len). */
static int write_owned(struct dfd_import *imp, struct owned *o, const char *content, int index,
                       size_t len, struct dfc_error *err) {
    return write_owned_at(imp, o, content + (size_t)index * len, index, len, err);
}

static void assert_released_once(struct owned *o, int n) {
    for (int i = 0; i < n; i++) {
        assert_int_equal(o->released[i], 1);
    }
}

/* The id and piece CRCs of content in one pass of the digester alone. */
static void expected_digest(const char *content, size_t len, struct dfd_digest_result *dr) {
    struct dfd_digester dg;
    struct dfd_digest_params dp = {.hash_content = true};
    assert_int_equal(dfd_digester_init(&dg, &dp), 0);
    assert_int_equal(dfd_digester_update(&dg, content, len), 0);
    assert_int_equal(dfd_digester_finish(&dg, dr), 0);
    dfd_digester_done(&dg);
}

/* t is content: its id, length and stored bytes. */
static void assert_task_is(struct fx *f, const struct dfd_task_meta *t, const char *content,
                           size_t len) {
    struct dfd_digest_result dr;
    expected_digest(content, len, &dr);
    assert_string_equal(t->id, dr.task_id);
    assert_int_equal(t->content_length, len);
    assert_int_equal(t->piece_count, dr.piece_count);
    dfd_digest_result_done(&dr);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/content/persistent-cache-tasks/%.3s/%s", f->store, t->id,
             t->id);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    char *back = malloc(len + 1);
    assert_int_equal(read(fd, back, len + 1), (ssize_t)len);
    close(fd);
    assert_memory_equal(back, content, len);
    free(back);
}

static void assert_nothing_left(struct fx *f) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_found(tmp, ""), 0);
    struct dfd_task_meta *list;
    size_t n;
    struct dfc_error err;
    assert_int_equal(dfd_storage_list(f->s, &list, &n, &err), 0);
    assert_int_equal(n, 0);
    dfd_task_meta_list_free(list, n);
}

/* Owned slices (many iovecs or one; below the inline threshold before the pipeline starts,
 * then through it) and lent ones give the one-pass digest and the same bytes. */
static void test_owned_and_lent_writes_round_trip(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    const size_t slice = 3 * MiB + 7, n = 12;
    char *content = pattern(slice * n, 3);
    struct owned o;
    owned_init(&o, false);
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    /* The first slice in four small ones (8 KiB to 40 KiB: hashed and written inline, the odd
     * ones as many iovecs), then the rest whole. */
    static const size_t small[] = {8192, 20000, 40000, 3 * MiB + 7 - 68192};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(write_owned_at(imp, &o, content + at, 12 + i, small[i], &err), 0);
        at += small[i];
    }
    assert_int_equal(at, slice);
    for (int i = 1; i < (int)n; i++) {
        assert_int_equal(write_owned(imp, &o, content, i, slice, &err), 0);
    }
    assert_int_equal(dfd_import_written(imp), slice * n);
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
    assert_false(existed);
    assert_int_equal(o.released[0], 0); /* slice 0 went as indexes 12..15 */
    o.released[0] = 1;
    assert_released_once(&o, (int)n + 4);
    assert_task_is(f, &t, content, slice * n);
    assert_int_equal(dfd_storage_delete(f->s, t.id, &err), 0);
    dfd_task_meta_done(&t);

    /* Lent buffers, reused by the caller at once: small ones first (inline), then large. */
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    char *reused = malloc(slice);
    size_t off = 0;
    for (size_t len = 1000; off<slice * n; len = len * 4> slice ? slice : len * 4) {
        size_t k = slice * n - off < len ? slice * n - off : len;
        memcpy(reused, content + off, k);
        assert_int_equal(dfd_import_write(imp, reused, k, &err), 0);
        memset(reused, 0xa5, k); /* the import is done with it */
        off += k;
    }
    free(reused);
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
    assert_task_is(f, &t, content, slice * n);
    dfd_task_meta_done(&t);
    free(content);
}

/* RLIMIT_FSIZE makes the writer stage's write(2) fail with EFBIG part way. */
static void limit_file_size(rlim_t bytes, struct rlimit *old) {
    assert_int_equal(getrlimit(RLIMIT_FSIZE, old), 0);
    (void)signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = {.rlim_cur = bytes, .rlim_max = old->rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
}

static void test_writer_error_fails_the_import(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    const size_t slice = MiB, n = 24;
    char *content = pattern(slice * n, 4);
    struct owned o;
    owned_init(&o, false);
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    struct rlimit old;
    limit_file_size(5 * MiB, &old);
    int r = 0, i = 0;
    for (; i < (int)n && r == 0; i++) {
        r = write_owned(imp, &o, content, i, slice, &err);
    }
    if (r == 0) { /* every slice was queued: the error surfaces at commit */
        struct dfd_task_meta t;
        bool existed;
        r = dfd_import_commit(imp, T0, &t, &existed, &err);
        imp = NULL;
    } else { /* it surfaced on a write: the next one fails the same way */
        assert_int_equal(write_owned(imp, &o, content, i++, slice, &err), -EFBIG);
    }
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    (void)signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(r, -EFBIG);
    assert_non_null(strstr(err.msg, "spool an import"));
    dfd_import_abort(imp);
    assert_released_once(&o, i);
    assert_nothing_left(f);
    free(content);
}

/* The same for the copy of a path import (a writable file is copied unless the filesystem
 * can reflink it). */
static void test_writer_error_fails_a_path_import(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s/src.bin", f->dir);
    const size_t len = 24 * MiB;
    char *content = pattern(len, 5);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    fd = open(src, O_RDONLY);
    struct dfd_task_meta t;
    bool existed;
    enum dfd_import_mode mode;
    struct dfd_import_params p = params();
    struct rlimit old;
    limit_file_size(5 * MiB, &old);
    int r = dfd_storage_import_fd(f->s, &p, fd, T0, NULL, NULL, &t, &existed, &mode, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    (void)signal(SIGXFSZ, SIG_DFL);
    close(fd);
    if (r == 0) {
        assert_int_equal(mode, DFD_IMPORT_REFLINK);
        dfd_task_meta_done(&t);
        free(content);
        test_skip("the filesystem reflinked: nothing was written");
        return;
    }
    assert_int_equal(r, -EFBIG);
    assert_non_null(strstr(err.msg, "spool an import"));
    assert_nothing_left(f);
    /* Without the limit the copy is the content. */
    fd = open(src, O_RDONLY);
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, T0, NULL, NULL, &t, &existed, &mode, &err),
                     0);
    close(fd);
    assert_int_equal(mode, DFD_IMPORT_COPY);
    assert_task_is(f, &t, content, len);
    dfd_task_meta_done(&t);
    free(content);
}

/* The first slice's release holds one stage; the caller fills the queue behind it. */
static struct dfd_import *fill_queue(struct fx *f, struct owned *o, const char *content,
                                     size_t slice, int n) {
    struct dfc_error err;
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(write_owned(imp, o, content, i, slice, &err), 0);
    }
    return imp;
}

static void test_commit_while_slices_are_queued(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    const size_t slice = MiB + 3;
    const int n = 8; /* DFD__PIPE_SLOTS: the queue is full while the gate is closed */
    char *content = pattern(slice * n, 6);
    for (int round = 0; round < 5; round++) {
        struct owned o;
        owned_init(&o, true);
        struct dfd_import *imp = fill_queue(f, &o, content, slice, n);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, open_gate_later, &o), 0);
        struct dfd_task_meta t;
        bool existed;
        assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), 0);
        pthread_join(th, NULL);
        assert_released_once(&o, n);
        assert_task_is(f, &t, content, slice * n);
        assert_int_equal(dfd_storage_delete(f->s, t.id, &err), 0);
        dfd_task_meta_done(&t);
    }
    free(content);
}

static void test_abort_with_full_queues(void **state) {
    struct fx *f = *state;
    const size_t slice = MiB;
    const int n = 8;
    char *content = pattern(slice * n, 7);
    for (int round = 0; round < 5; round++) {
        struct owned o;
        owned_init(&o, true);
        struct dfd_import *imp = fill_queue(f, &o, content, slice, n);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, open_gate_later, &o), 0);
        dfd_import_abort(imp); /* joins both stages, releases the queued slices */
        pthread_join(th, NULL);
        assert_released_once(&o, n);
        assert_nothing_left(f);
    }
    /* And with the stages free to run: an abort at any point releases each buffer once. */
    for (int round = 0; round < 20; round++) {
        struct owned o;
        owned_init(&o, false);
        struct dfd_import *imp = fill_queue(f, &o, content, slice, n);
        dfd_import_abort(imp);
        assert_released_once(&o, n);
        assert_nothing_left(f);
    }
    free(content);
}

/* A refused write (past the announced length) releases the buffer at once. */
static void test_refused_owned_write_releases(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char *content = pattern(2 * MiB, 8);
    struct owned o;
    owned_init(&o, false);
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    p.expected_length = (int64_t)MiB;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(write_owned(imp, &o, content, 0, MiB, &err), 0);
    assert_int_equal(write_owned(imp, &o, content, 1, MiB, &err), -EINVAL);
    assert_int_equal(o.released[1], 1);
    dfd_import_abort(imp);
    assert_released_once(&o, 2);
    assert_nothing_left(f);
    free(content);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_owned_and_lent_writes_round_trip), T(test_writer_error_fails_the_import),
        T(test_writer_error_fails_a_path_import), T(test_commit_while_slices_are_queued),
        T(test_abort_with_full_queues),           T(test_refused_owned_write_releases),
    };
    return test_run_group(tests, NULL, NULL);
}
