/*
 * Tests for daemon/storage/storage.c and daemon/gc.c on real files and a real SQLite store in
 * a temp dir: imports (stream, hard link, copy), dedupe, delete, crash recovery, a
 * damaged or missing database (refused, or discarded on request), deleting on a full disk, and
 * GC with an injected clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "dfc/units.h"
#include "gc.h"
#include "storage/storage.h"
#include "storage_fixture.h"
#include "test_support.h"

#define MiB ((uint64_t)1 << 20)
#define SEC DFC_NS_PER_SEC
#define T0  (INT64_C(1700000000) * SEC)

static int setup(void **state) {
    return fx_setup(state, "storage");
}

static struct dfd_import_params params(void) {
    struct dfd_import_params p = {
        .replica_count = 2, .ttl_ns = 3600 * SEC, .persistent = true, .expected_length = -1};
    return p;
}

static void write_file(const char *path, const char *buf, uint64_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

static void stream_import(struct fx *f, const char *buf, uint64_t len, struct dfd_import_params p,
                          struct dfd_task_meta *t, bool *existed) {
    struct dfc_error err;
    struct dfd_import *imp;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    for (uint64_t off = 0; off < len; off += 1000003) {
        uint64_t n = len - off < 1000003 ? len - off : 1000003;
        assert_int_equal(dfd_import_write(imp, buf + off, n, &err), 0);
    }
    assert_int_equal(dfd_import_commit(imp, T0, t, existed, &err), 0);
}

static size_t count_entries(const char *dir) {
    return count_found(dir, "");
}

static void content_path(struct fx *f, const char *id, char *buf, size_t size) {
    snprintf(buf, size, "%s/content/persistent-cache-tasks/%.3s/%s", f->store, id, id);
}

/* ---- imports ---- */

static void test_stream_import_round_trip(void **state) {
    struct fx *f = *state;
    const uint64_t len = 9 * MiB + 7;
    char *buf = pattern(len, 1);
    struct dfd_task_meta t;
    bool existed;
    stream_import(f, buf, len, params(), &t, &existed);
    assert_false(existed);
    assert_true(t.content_length == len);
    assert_true(t.piece_length == 4 * MiB);
    assert_int_equal(t.piece_count, 3);
    char path[PATH_MAX];
    content_path(f, t.id, path, sizeof(path));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true((uint64_t)st.st_size == len);
    /* The pieces carry crc32 digests of exactly their bytes. */
    struct dfd_piece_meta *pieces;
    size_t n;
    struct dfc_error err;
    assert_int_equal(dfd_storage_pieces(f->s, t.id, &pieces, &n, &err), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        char want[DFC_CRC32_DIGEST_MAX];
        dfc_crc32_format(dfc_crc32_update(0, buf + pieces[i].offset, pieces[i].length), want);
        assert_string_equal(pieces[i].digest, want);
        /* ... and their SHA-256 digests (docs/integrity.md): the chaining value at the piece's
         * end, resumed from the one before it; the last the content's SHA-256. */
        struct dfc_sha256c c;
        uint8_t md[DFC_SHA256_LEN];
        assert_int_equal(dfc_sha256c_init(&c), 0);
        assert_int_equal(dfc_sha256c_resume(&c, i ? pieces[i - 1].sha256 : NULL, pieces[i].offset),
                         0);
        dfc_sha256c_update(&c, buf + pieces[i].offset, pieces[i].length);
        if (i + 1 < n) {
            assert_int_equal(dfc_sha256c_state(&c, md), 0);
        } else {
            dfc_sha256c_final(&c, md);
        }
        dfc_sha256c_done(&c);
        assert_true(pieces[i].has_sha256);
        assert_memory_equal(pieces[i].sha256, md, DFC_SHA256_LEN);
    }
    assert_true(pieces[2].length == MiB + 7);
    free(pieces);
    /* The task keeps the content's SHA-256; no id basis for a content-derived id. */
    char hex[DFC_SHA256_HEX_LEN + 1];
    assert_int_equal(dfc_sha256_hex(buf, len, hex), 0);
    assert_string_equal(t.content_sha256, hex);
    assert_null(t.id_basis);
    struct dfd_task_meta back;
    assert_int_equal(dfd_storage_get(f->s, t.id, &back, &err), 0);
    assert_string_equal(back.content_sha256, hex);
    dfd_task_meta_done(&back);
    /* Nothing is left in tmp/. */
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_entries(tmp), 0);
    dfd_task_meta_done(&t);
    free(buf);
}

static void test_same_content_dedupes(void **state) {
    struct fx *f = *state;
    char *buf = pattern(MiB, 2);
    struct dfd_task_meta a, b;
    bool existed;
    stream_import(f, buf, MiB, params(), &a, &existed);
    assert_false(existed);
    stream_import(f, buf, MiB, params(), &b, &existed);
    assert_true(existed);
    assert_string_equal(a.id, b.id);
    /* A different tag is a different task. */
    struct dfd_import_params p = params();
    p.tag = "v2";
    struct dfd_task_meta c;
    stream_import(f, buf, MiB, p, &c, &existed);
    assert_false(existed);
    assert_string_not_equal(a.id, c.id);
    assert_string_equal(c.tag, "v2");
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    dfd_task_meta_done(&c);
    free(buf);
}

static void test_empty_and_one_byte(void **state) {
    struct fx *f = *state;
    struct dfd_task_meta t;
    bool existed;
    stream_import(f, "", 0, params(), &t, &existed);
    assert_true(t.content_length == 0);
    assert_int_equal(t.piece_count, 0);
    dfd_task_meta_done(&t);
    stream_import(f, "x", 1, params(), &t, &existed);
    assert_true(t.content_length == 1);
    assert_int_equal(t.piece_count, 1);
    dfd_task_meta_done(&t);
}

static void test_expected_length_is_enforced(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    p.expected_length = 10;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, "0123456789A", 11, &err), -EINVAL);
    assert_string_equal(err.msg, "more content than the announced 10 bytes");
    dfd_import_abort(imp);
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, "01234", 5, &err), 0);
    struct dfd_task_meta t;
    bool existed;
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "5 of 10"));
    /* Absurd sizes are refused before anything is written. */
    p.expected_length = INT64_MAX;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), -ENOSPC);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_entries(tmp), 0);
}

static void test_import_fd_hard_links_on_the_same_fs(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s/src.bin", f->dir);
    char *buf = pattern(5 * MiB, 3);
    write_file(src, buf, 5 * MiB);
    chmod(src, 0444); /* ours and read-only: nobody outside the daemon can change it */
    int fd = open(src, O_RDONLY);
    struct dfd_task_meta t;
    bool existed;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, T0, NULL, NULL, &t, &existed, NULL, &err),
                     0);
    close(fd);
    assert_true(t.hard_linked);
    char path[PATH_MAX];
    content_path(f, t.id, path, sizeof(path));
    struct stat a, b;
    assert_int_equal(stat(src, &a), 0);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_ino == b.st_ino); /* the same inode */
    /* The id is the same as a streamed import of the same bytes. */
    struct dfd_task_meta s;
    stream_import(f, buf, 5 * MiB, params(), &s, &existed);
    assert_true(existed);
    assert_string_equal(s.id, t.id);
    dfd_task_meta_done(&s);
    dfd_task_meta_done(&t);
    free(buf);
}

static void test_import_fd_copies_across_filesystems(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct stat shm, store;
    if (stat("/dev/shm", &shm) < 0 || stat(f->store, &store) < 0 || shm.st_dev == store.st_dev) {
        test_skip("needs /dev/shm on another filesystem than the temp dir");
    }
    char src[] = "/dev/shm/dfc-test-src-XXXXXX";
    int fd = mkstemp(src);
    char *buf = pattern(3 * MiB + 1, 4);
    assert_int_equal(write(fd, buf, 3 * MiB + 1), (ssize_t)(3 * MiB + 1));
    struct dfd_task_meta t;
    bool existed;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, T0, NULL, NULL, &t, &existed, NULL, &err),
                     0);
    close(fd);
    unlink(src);
    assert_false(t.hard_linked);
    char path[PATH_MAX];
    content_path(f, t.id, path, sizeof(path));
    int cfd = open(path, O_RDONLY);
    char *back = malloc(3 * MiB + 1);
    assert_int_equal(read(cfd, back, 3 * MiB + 1), (ssize_t)(3 * MiB + 1));
    close(cfd);
    assert_memory_equal(back, buf, 3 * MiB + 1);
    free(back);
    free(buf);
    dfd_task_meta_done(&t);
}

static bool stop_now(void *arg) {
    return true;
}

static void test_cancelled_import_leaves_nothing(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct stat shm, store;
    char src[PATH_MAX];
    /* Copy mode (another filesystem) spools a file that must vanish; link mode a link. */
    bool other_fs =
        stat("/dev/shm", &shm) == 0 && stat(f->dir, &store) == 0 && shm.st_dev != store.st_dev;
    snprintf(src, sizeof(src), "%s/cancel.bin", other_fs ? "/dev/shm" : f->dir);
    char *buf = pattern(MiB, 5);
    write_file(src, buf, MiB);
    int fd = open(src, O_RDONLY);
    struct dfd_task_meta t;
    bool existed;
    struct dfd_import_params p = params();
    assert_int_equal(
        dfd_storage_import_fd(f->s, &p, fd, T0, stop_now, NULL, &t, &existed, NULL, &err),
        -ECANCELED);
    close(fd);
    unlink(src);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_entries(tmp), 0);
    struct dfd_task_meta *list;
    size_t n;
    assert_int_equal(dfd_storage_list(f->s, &list, &n, &err), 0);
    assert_int_equal(n, 0);
    dfd_task_meta_list_free(list, n);
    free(buf);
}

static void test_disk_full_leaves_nothing(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    if (geteuid() != 0) {
        test_skip("needs root to mount a small tmpfs in a private mount namespace");
    }
    /* A 2 MiB filesystem under the store: a 3 MiB import of unannounced length must fail
     * with ENOSPC part way and leave nothing behind. */
    test_mount_ns_enter(); /* left by teardown */
    char small[PATH_MAX];
    snprintf(small, sizeof(small), "%s/small", f->dir);
    mkdir(small, 0755);
    assert_int_equal(mount("none", small, "tmpfs", 0, "size=2m"), 0);
    struct dfd_storage *s;
    struct dfd_storage_opts o = {.dir = small, .keep = true};
    assert_int_equal(dfd_storage_open(&o, &s, NULL, &err), 0);
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    char *buf = pattern(MiB, 9);
    /* The disk fills up under a running import: write(2) itself fails with ENOSPC. */
    assert_int_equal(dfd_import_begin(s, &p, &imp, &err), 0);
    char filler[PATH_MAX + 16];
    snprintf(filler, sizeof(filler), "%s/filler", small);
    FILE *fp = fopen(filler, "w");
    for (int i = 0; i < 4 && fwrite(buf, 1, MiB, fp) == MiB; i++) {
    }
    fclose(fp); /* the tmpfs is now full */
    int r = dfd_import_write(imp, buf, MiB, &err);
    assert_int_equal(r, -ENOSPC);
    assert_non_null(strstr(err.msg, "no space left"));
    dfd_import_abort(imp);
    unlink(filler);
    /* A stream of unknown length may not outgrow what was free when it began. */
    assert_int_equal(dfd_import_begin(s, &p, &imp, &err), 0);
    r = 0;
    for (int i = 0; i < 3 && r == 0; i++) {
        r = dfd_import_write(imp, buf, MiB, &err);
    }
    assert_int_equal(r, -ENOSPC);
    assert_non_null(strstr(err.msg, "outgrew"));
    dfd_import_abort(imp);
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s/tmp", small);
    assert_int_equal(count_entries(tmp), 0);
    /* Announced up front, the same import is refused before a byte is written. */
    p.expected_length = 3 * MiB;
    assert_int_equal(dfd_import_begin(s, &p, &imp, &err), -ENOSPC);
    dfd_storage_close(s);
    assert_int_equal(umount(small), 0);
    free(buf);
}

struct racer {
    struct dfd_storage *s;
    const char *buf;
    uint64_t len;
    struct dfd_task_meta t;
    bool existed;
    int r;
};

static void *race_import(void *arg) {
    struct racer *x = arg;
    struct dfc_error err;
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    x->r = dfd_import_begin(x->s, &p, &imp, &err);
    for (uint64_t off = 0; x->r == 0 && off < x->len; off += 65536) {
        x->r =
            dfd_import_write(imp, x->buf + off, x->len - off < 65536 ? x->len - off : 65536, &err);
    }
    if (x->r == 0) {
        x->r = dfd_import_commit(imp, T0, &x->t, &x->existed, &err);
    }
    return NULL;
}

static void test_concurrent_imports_of_the_same_content(void **state) {
    /* One wins and creates the task; the others get that same task back. */
    struct fx *f = *state;
    enum { N = 4 };
    char *buf = pattern(3 * MiB, 10);
    struct racer x[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        x[i] = (struct racer){.s = f->s, .buf = buf, .len = 3 * MiB};
        pthread_create(&th[i], NULL, race_import, &x[i]);
    }
    int created = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(x[i].r, 0);
        created += !x[i].existed;
        assert_string_equal(x[i].t.id, x[0].t.id);
    }
    assert_int_equal(created, 1);
    for (int i = 0; i < N; i++) {
        dfd_task_meta_done(&x[i].t);
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    assert_int_equal(count_entries(tmp), 0);
    free(buf);
}

/* ---- delete ---- */

static void test_delete(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta t, got;
    bool existed;
    stream_import(f, "abc", 3, params(), &t, &existed);
    assert_int_equal(dfd_storage_delete(f->s, t.id, &err), 0);
    assert_int_equal(dfd_storage_get(f->s, t.id, &got, &err), -ENOENT);
    char path[PATH_MAX];
    content_path(f, t.id, path, sizeof(path));
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(dfd_storage_delete(f->s, t.id, &err), 0); /* idempotent */
    dfd_task_meta_done(&t);
}

/* storage.maxTasks: a commit that would make one task more is refused with -EDQUOT
 * (RESOURCE_EXHAUSTED) naming the setting, and leaves no spool and no content; the same content
 * again still answers with the task it already is; a delete makes room. */
static void test_max_tasks(void **state) {
    struct fx *f = *state;
    dfd_storage_close(f->s);
    struct dfd_storage_opts o = {.dir = f->store, .keep = true, .max_tasks = 2};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    struct dfd_task_meta a, b, c;
    bool existed;
    stream_import(f, "first", 5, params(), &a, &existed);
    stream_import(f, "second", 6, params(), &b, &existed);

    struct dfd_import *imp;
    struct dfd_import_params p = params();
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, "third", 5, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &c, &existed, &err), -EDQUOT);
    assert_non_null(strstr(err.msg, "storage.maxTasks is 2"));
    char tmp[PATH_MAX], content[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    snprintf(content, sizeof(content), "%s/content", f->store);
    assert_int_equal(count_entries(tmp), 0);
    assert_int_equal(count_found(content, "-type f"), 2);

    stream_import(f, "first", 5, params(), &c, &existed); /* already there: no new task */
    assert_true(existed);
    assert_string_equal(c.id, a.id);
    dfd_task_meta_done(&c);

    assert_int_equal(dfd_storage_delete(f->s, b.id, &err), 0);
    stream_import(f, "third", 5, params(), &c, &existed);
    assert_false(existed);
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    dfd_task_meta_done(&c);
}

/* ---- reading content back ---- */

/* Every piece reads back as imported; a flipped byte or a cut file is DATA_LOSS naming the
 * task and the piece, and the bytes read so far are never passed off as the piece. */
static void test_read_piece_checks_its_crc(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    const uint64_t len = 9 * MiB + 7;
    char *buf = pattern(len, 3);
    struct dfd_task_meta t;
    bool existed;
    stream_import(f, buf, len, params(), &t, &existed);
    struct dfd_piece_meta *pieces;
    size_t n;
    assert_int_equal(dfd_storage_pieces(f->s, t.id, &pieces, &n, &err), 0);
    assert_int_equal(n, 3);
    int fd;
    assert_int_equal(dfd_storage_open_content(f->s, t.id, &fd, &err), 0);
    char *got = malloc(4 * MiB);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(dfd_storage_read_piece(fd, t.id, &pieces[i], got, &err), 0);
        assert_memory_equal(got, buf + pieces[i].offset, pieces[i].length);
    }
    /* One byte of piece 1 changes on disk (the fd sees the same inode). */
    char path[PATH_MAX];
    content_path(f, t.id, path, sizeof(path));
    int wfd = open(path, O_WRONLY);
    assert_true(wfd >= 0);
    char flipped = (char)~buf[pieces[1].offset + 5];
    assert_int_equal(pwrite(wfd, &flipped, 1, (off_t)pieces[1].offset + 5), 1);
    assert_int_equal(dfd_storage_read_piece(fd, t.id, &pieces[0], got, &err), 0);
    assert_int_equal(dfd_storage_read_piece(fd, t.id, &pieces[1], got, &err), DFC_E_DATA_LOSS);
    char want[200];
    snprintf(want, sizeof(want), "task %s: piece 1 is corrupt on disk (crc32:", t.id);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, pieces[1].digest));
    /* The file loses its last byte: piece 2 is cut short. */
    assert_int_equal(ftruncate(wfd, (off_t)len - 1), 0);
    close(wfd);
    assert_int_equal(dfd_storage_read_piece(fd, t.id, &pieces[2], got, &err), DFC_E_DATA_LOSS);
    snprintf(want, sizeof(want), "task %s: piece 2 is cut short", t.id);
    assert_string_equal(err.msg, want);
    close(fd);
    free(got);
    free(pieces);
    dfd_task_meta_done(&t);
    free(buf);
}

/* The whole-file digest: sha256, sha512 (hex, any case) and crc32 (decimal, leading zeros
 * allowed) match the content; anything else is DATA_LOSS naming both values. */
static void test_verify_digest(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    const uint64_t len = 5 * MiB + 3; /* more than one read unit */
    char *buf = pattern(len, 4);
    struct dfd_task_meta t;
    bool existed;
    stream_import(f, buf, len, params(), &t, &existed);
    int fd;
    assert_int_equal(dfd_storage_open_content(f->s, t.id, &fd, &err), 0);
    char sha[DFC_EVP_HEX_MAX], sha512[DFC_EVP_HEX_MAX], crc[32];
    struct dfc_evp h;
    assert_int_equal(dfc_evp_init(&h, "sha256"), 0);
    dfc_evp_update(&h, buf, len);
    dfc_evp_final_hex(&h, sha);
    dfc_evp_done(&h);
    assert_int_equal(dfc_evp_init(&h, "sha512"), 0);
    dfc_evp_update(&h, buf, len);
    dfc_evp_final_hex(&h, sha512);
    dfc_evp_done(&h);
    snprintf(crc, sizeof(crc), "00%u", dfc_crc32_update(0, buf, len));
    assert_int_equal(dfd_storage_verify_digest(fd, "sha256", sha, &err), 0);
    assert_int_equal(dfd_storage_verify_digest(fd, "sha512", sha512, &err), 0);
    assert_int_equal(dfd_storage_verify_digest(fd, "crc32", crc, &err), 0);
    for (char *c = sha; *c != '\0'; c++) {
        *c = (char)toupper((unsigned char)*c);
    }
    assert_int_equal(dfd_storage_verify_digest(fd, "sha256", sha, &err), 0);
    const char *zero = "0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(dfd_storage_verify_digest(fd, "sha256", zero, &err), DFC_E_DATA_LOSS);
    char want[300];
    for (char *c = sha; *c != '\0'; c++) {
        *c = (char)tolower((unsigned char)*c);
    }
    snprintf(want, sizeof(want), "digest mismatch: want sha256:%s, content has sha256:%s", zero,
             sha);
    assert_string_equal(err.msg, want);
    assert_int_equal(dfd_storage_verify_digest(fd, "crc32", "1", &err), DFC_E_DATA_LOSS);
    snprintf(want, sizeof(want), "digest mismatch: want crc32:1, content has crc32:%u",
             dfc_crc32_update(0, buf, len));
    assert_string_equal(err.msg, want);
    close(fd);
    dfd_task_meta_done(&t);
    free(buf);
}

/* ---- recovery ---- */

static void test_recovery_removes_half_written_state(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta good, broken;
    bool existed;
    stream_import(f, "keep me", 7, params(), &good, &existed);
    stream_import(f, "lose my content", 15, params(), &broken, &existed);
    char path[PATH_MAX];
    /* A crash mid-import: a spool in tmp/. */
    snprintf(path, sizeof(path), "%s/tmp/import-crashed", f->store);
    write_file(path, "partial", 7);
    /* A crash between rename and insert: content without a row. */
    const char *orphan = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    snprintf(path, sizeof(path), "%s/content/persistent-cache-tasks/fff", f->store);
    mkdir(path, 0755);
    content_path(f, orphan, path, sizeof(path));
    write_file(path, "orphan", 6);
    /* Lost content behind a row. */
    content_path(f, broken.id, path, sizeof(path));
    unlink(path);

    struct dfd_recovery rec;
    reopen(f, &rec);
    assert_int_equal(rec.temp_files, 1);
    assert_int_equal(rec.orphan_files, 1);
    assert_int_equal(rec.broken_rows, 1);
    assert_int_equal(rec.tasks, 1);
    struct dfd_task_meta got;
    assert_int_equal(dfd_storage_get(f->s, good.id, &got, &err), 0);
    dfd_task_meta_done(&got);
    assert_int_equal(dfd_storage_get(f->s, broken.id, &got, &err), -ENOENT);
    dfd_task_meta_done(&good);
    dfd_task_meta_done(&broken);
}

static void test_keep_false_starts_empty(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta t;
    bool existed;
    stream_import(f, "gone", 4, params(), &t, &existed);
    dfd_storage_close(f->s);
    struct dfd_storage_opts o = {.dir = f->store, .keep = false};
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    struct dfd_task_meta got;
    assert_int_equal(dfd_storage_get(f->s, t.id, &got, &err), -ENOENT);
    dfd_task_meta_done(&t);
}

/* ---- GC ---- */

static void import_at(struct fx *f, const char *data, uint64_t len, bool persistent, int64_t ttl,
                      int64_t now, struct dfd_task_meta *t) {
    struct dfc_error err;
    struct dfd_import *imp;
    struct dfd_import_params p = params();
    p.persistent = persistent;
    p.ttl_ns = ttl;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, data, len, &err), 0);
    bool existed;
    assert_int_equal(dfd_import_commit(imp, now, t, &existed, &err), 0);
}

static bool exists(struct fx *f, const char *id) {
    struct dfc_error err;
    struct dfd_task_meta t;
    if (dfd_storage_get(f->s, id, &t, &err) < 0) {
        return false;
    }
    dfd_task_meta_done(&t);
    return true;
}

/* A delete decided on a row read earlier removes only that task: not a later import of the
 * same id (whose fresh content an unconditional unlink would remove under its new row), and,
 * for eviction, not a task used since the list was read. */
static void test_delete_task_spares_a_newer_import(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta old, fresh;
    bool deleted;
    import_at(f, "stale", 5, false, 3600 * SEC, T0, &old);
    assert_int_equal(dfd_storage_delete(f->s, old.id, &err), 0);
    import_at(f, "stale", 5, false, 3600 * SEC, T0 + SEC, &fresh);
    assert_string_equal(fresh.id, old.id);
    assert_int_equal(dfd_storage_delete_task(f->s, &old, false, &deleted, &err), 0);
    assert_false(deleted);
    assert_true(exists(f, fresh.id));
    char path[PATH_MAX];
    struct stat st;
    content_path(f, fresh.id, path, sizeof(path));
    assert_int_equal(stat(path, &st), 0);
    /* Used since it was listed: eviction leaves it; expiry (the same import) deletes it. */
    assert_int_equal(dfd_storage_touch(f->s, fresh.id, T0 + 2 * SEC, &err), 0);
    assert_int_equal(dfd_storage_delete_task(f->s, &fresh, true, &deleted, &err), 0);
    assert_false(deleted);
    assert_true(exists(f, fresh.id));
    assert_int_equal(dfd_storage_delete_task(f->s, &fresh, false, &deleted, &err), 0);
    assert_true(deleted);
    assert_false(exists(f, fresh.id));
    assert_int_equal(stat(path, &st), -1);
    dfd_task_meta_done(&old);
    dfd_task_meta_done(&fresh);
}

static void test_gc_expires_by_ttl(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta short_lived, long_lived;
    import_at(f, "short", 5, true, 300 * SEC, T0, &short_lived);
    import_at(f, "long", 4, true, 3600 * SEC, T0, &long_lived);
    struct dfd_gc_policy p = {
        .interval_ns = SEC, .high_percent = 100, .low_percent = 90, .disk_threshold = 1ULL << 40};
    struct dfd_gc_report rep;
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 300 * SEC, &rep, &err), 0);
    assert_int_equal(rep.expired, 0); /* created_at + ttl is not yet in the past */
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 301 * SEC, &rep, &err), 0);
    assert_int_equal(rep.expired, 1);
    assert_false(exists(f, short_lived.id));
    assert_true(exists(f, long_lived.id)); /* persistent or not, TTL applies */
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 3601 * SEC, &rep, &err), 0);
    assert_false(exists(f, long_lived.id));
    dfd_task_meta_done(&short_lived);
    dfd_task_meta_done(&long_lived);
}

static void test_gc_evicts_under_pressure_sparing_persistent(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char *buf = pattern(MiB, 7);
    struct dfd_task_meta old_cached, new_cached, persistent;
    /* Distinct contents; the cached ones are least recently used first. */
    import_at(f, buf, MiB / 2, false, 3600 * SEC, T0, &old_cached);
    import_at(f, buf + 1, MiB / 2, true, 3600 * SEC, T0 + SEC, &persistent);
    import_at(f, buf + 2, MiB / 2, false, 3600 * SEC, T0 + 2 * SEC, &new_cached);
    /* 1.5 MiB cached of a 1.6 MiB threshold: 93% >= 80% high; down to 60% = 0.96 MiB. */
    struct dfd_gc_policy p = {
        .interval_ns = SEC, .high_percent = 80, .low_percent = 60, .disk_threshold = 16 * MiB / 10};
    struct dfd_gc_report rep;
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 10 * SEC, &rep, &err), 0);
    assert_int_equal(rep.usage_percent, 93);
    assert_int_equal(rep.evicted, 2); /* both cached ones go; the persistent one stays */
    assert_false(exists(f, old_cached.id));
    assert_false(exists(f, new_cached.id));
    assert_true(exists(f, persistent.id));
    /* Still over the low mark with only a persistent task left: it is never evicted. */
    p.disk_threshold = MiB / 2;
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 11 * SEC, &rep, &err), 0);
    assert_int_equal(rep.evicted, 0);
    assert_true(exists(f, persistent.id));
    dfd_task_meta_done(&old_cached);
    dfd_task_meta_done(&new_cached);
    dfd_task_meta_done(&persistent);
    free(buf);
}

static void test_gc_evicts_only_what_is_needed(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char *buf = pattern(MiB, 8);
    struct dfd_task_meta a, b;
    import_at(f, buf, MiB / 2, false, 3600 * SEC, T0, &a);
    import_at(f, buf + 1, MiB / 2, false, 3600 * SEC, T0 + SEC, &b);
    /* 1 MiB of 1.2 MiB: 83% >= 80%; the low mark 60% = 0.72 MiB needs one eviction. */
    struct dfd_gc_policy p = {
        .interval_ns = SEC, .high_percent = 80, .low_percent = 60, .disk_threshold = 12 * MiB / 10};
    struct dfd_gc_report rep;
    assert_int_equal(dfd_gc_run_once(f->s, &p, T0 + 10 * SEC, &rep, &err), 0);
    assert_int_equal(rep.evicted, 1);
    assert_false(exists(f, a.id)); /* the least recently used */
    assert_true(exists(f, b.id));
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    free(buf);
}

static int64_t fake_now;
static int64_t fake_clock(void *ud) {
    return fake_now;
}

static bool gone(void *arg) {
    void **a = arg;
    return !exists(a[0], a[1]);
}

static void test_gc_thread_uses_the_injected_clock(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta t;
    import_at(f, "tick", 4, true, 300 * SEC, T0, &t);
    fake_now = T0 + 400 * SEC; /* past its TTL at once, by the clock the thread reads */
    struct dfc_clock clock = {fake_clock, NULL};
    struct dfd_gc_policy p = {.interval_ns = 20 * 1000000,
                              .high_percent = 100,
                              .low_percent = 90,
                              .disk_threshold = 1ULL << 40};
    struct dfd_gc *g;
    assert_int_equal(dfd_gc_start(f->s, &p, &clock, NULL, NULL, &g, &err), 0);
    void *arg[2] = {f, t.id};
    assert_true(test_wait_for(gone, arg, 5000));
    dfd_gc_stop(g);
    dfd_task_meta_done(&t);
}

/* ---- trust: private inodes, dedup rule, owners, migration ---- */

static void import_path(struct fx *f, struct dfd_storage *s, const char *src,
                        struct dfd_task_meta *t, enum dfd_import_mode *mode) {
    struct dfc_error err;
    bool existed;
    int fd = open(src, O_RDONLY);
    assert_true(fd >= 0);
    struct dfd_import_params p = params();
    assert_int_equal(dfd_storage_import_fd(s, &p, fd, T0, NULL, NULL, t, &existed, mode, &err), 0);
    close(fd);
}

static void test_import_fd_never_shares_a_writable_inode(void **state) {
    struct fx *f = *state;
    char src[PATH_MAX], path[PATH_MAX];
    snprintf(src, sizeof(src), "%s/writable.bin", f->dir);
    char *buf = pattern(MiB, 21);
    write_file(src, buf, MiB); /* 0644: its owner can still write it */
    struct dfd_task_meta t;
    enum dfd_import_mode mode;
    import_path(f, f->s, src, &t, &mode);
    assert_false(t.hard_linked);
    assert_true(mode == DFD_IMPORT_COPY || mode == DFD_IMPORT_REFLINK);
    content_path(f, t.id, path, sizeof(path));
    struct stat a, b;
    assert_int_equal(stat(src, &a), 0);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_ino != b.st_ino);
    assert_int_equal(b.st_mode & 07777, 0600);
    /* Rewriting the source does not reach the store. */
    char *other = pattern(MiB, 22);
    write_file(src, other, MiB);
    int cfd = open(path, O_RDONLY);
    char *back = malloc(MiB);
    assert_int_equal(read(cfd, back, MiB), (ssize_t)MiB);
    close(cfd);
    assert_memory_equal(back, buf, MiB);
    free(back);
    free(other);
    free(buf);
    dfd_task_meta_done(&t);
}

static void test_unsafe_shared_inode_imports_opt_in(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char store[PATH_MAX], src[PATH_MAX], suid[PATH_MAX];
    snprintf(store, sizeof(store), "%s/unsafe", f->dir);
    snprintf(src, sizeof(src), "%s/shared.bin", f->dir);
    snprintf(suid, sizeof(suid), "%s/suid.bin", f->dir);
    struct dfd_storage *s;
    struct dfd_storage_opts o = {.dir = store, .keep = true, .unsafe_shared_inode_imports = true};
    assert_int_equal(dfd_storage_open(&o, &s, NULL, &err), 0);
    char *buf = pattern(MiB, 23);
    write_file(src, buf, MiB);
    struct dfd_task_meta t;
    enum dfd_import_mode mode;
    import_path(f, s, src, &t, &mode); /* writable, but the operator opted in */
    assert_true(t.hard_linked);
    assert_int_equal(mode, DFD_IMPORT_HARDLINK);
    dfd_task_meta_done(&t);
    /* Never a set-id inode, even then. */
    write_file(suid, buf + 1, MiB - 1);
    chmod(suid, 04755);
    import_path(f, s, suid, &t, &mode);
    assert_false(t.hard_linked);
    assert_int_not_equal(mode, DFD_IMPORT_HARDLINK);
    dfd_task_meta_done(&t);
    dfd_storage_close(s);
    /* Without the opt-in, a hard link to a still writable inode (as older versions made) is
     * never served to a re-import: its bytes may have changed under its digests. */
    o.unsafe_shared_inode_imports = false;
    assert_int_equal(dfd_storage_open(&o, &s, NULL, &err), 0);
    struct dfd_import_params p = params();
    struct dfd_import *imp;
    bool existed;
    assert_int_equal(dfd_import_begin(s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, buf, MiB, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &t, &existed, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "a hard link to a file its owner can still change"));
    dfd_storage_close(s);
    free(buf);
}

static void test_dedup_needs_the_same_bytes_and_origin(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", f->store);
    char *x = pattern(MiB, 31), *y = pattern(MiB, 32);
    struct dfd_task_meta a, b;
    bool existed;
    /* Content-derived ids: another uid gets the existing task. */
    struct dfd_import_params p = params();
    p.owner_uid = 1000;
    stream_import(f, x, MiB, p, &a, &existed);
    assert_int_equal(a.owner_uid, 1000);
    assert_int_equal(a.id_origin, DFD_ID_ORIGIN_CONTENT);
    p.owner_uid = 2000;
    stream_import(f, x, MiB, p, &b, &existed);
    assert_true(existed);
    assert_int_equal(b.owner_uid, 1000); /* still its first importer's */
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    /* content_for_calculating_task_id: other bytes under the same id are refused... */
    p = params();
    p.content_for_id = "name";
    p.owner_uid = 1000;
    stream_import(f, x, MiB, p, &a, &existed);
    assert_false(existed);
    assert_int_equal(a.id_origin, DFD_ID_ORIGIN_STRING);
    struct dfd_import *imp;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, y, MiB, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &b, &existed, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "is already taken by other content"));
    assert_int_equal(count_entries(tmp), 0);
    /* ...and so are the same bytes from another uid (CRCs can be forged; the string says
     * nothing about the bytes). */
    p.owner_uid = 2000;
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, x, MiB, &err), 0);
    assert_int_equal(dfd_import_commit(imp, T0, &b, &existed, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "another user's import"));
    assert_int_equal(count_entries(tmp), 0);
    /* Its own importer gets it back. */
    p.owner_uid = 1000;
    stream_import(f, x, MiB, p, &b, &existed);
    assert_true(existed);
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    free(x);
    free(y);
}

static void test_an_old_store_is_migrated_and_fixed(void **state) {
    struct fx *f = *state;
    char dir[PATH_MAX], file[PATH_MAX + 80], cmd[PATH_MAX * 2];
    /* A store as the first version left it: schema version 0, 0755 dirs, a 0644 file. */
    const char *id = "1f2e3d4c5b6a79880f1e2d3c4b5a69780f1e2d3c4b5a69780f1e2d3c4b5a6978";
    if (!fx_make_old_store(f, id, 0755, 0644, "", "", "")) {
        test_skip("needs the sqlite3 command");
    }
    snprintf(dir, sizeof(dir), "%s/content/persistent-cache-tasks/1f2", f->store);
    snprintf(file, sizeof(file), "%s/%s", dir, id);
    struct dfd_recovery rec;
    struct dfc_error err;
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    assert_int_equal(dfd_storage_open(&o, &f->s, &rec, &err), 0);
    assert_int_equal(rec.tasks, 1);
    struct dfd_task_meta t;
    assert_int_equal(dfd_storage_get(f->s, id, &t, &err), 0);
    assert_int_equal(t.owner_uid, 0);
    assert_int_equal(t.id_origin, DFD_ID_ORIGIN_UNKNOWN);
    assert_string_equal(t.content_sha256, ""); /* not recorded then */
    assert_null(t.id_basis);
    dfd_task_meta_done(&t);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    snprintf(cmd, sizeof(cmd), "%s/content", f->store);
    assert_int_equal(stat(cmd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* Opening again is a no-op (the version is recorded). */
    reopen(f, &rec);
    assert_int_equal(rec.tasks, 1);
}

/* ---- a damaged database is never read as "no rows" ---- */

static size_t count_files(const char *dir) {
    return count_found(dir, "-type f");
}

static size_t content_files(struct fx *f) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/content", f->store);
    return count_files(dir);
}

static void db_path(struct fx *f, const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s/metadata/%s", f->store, name);
}

/* Imports n distinct tasks of len bytes each; returns their total size. */
static uint64_t import_some(struct fx *f, unsigned n, uint64_t len, uint64_t piece_length) {
    char *buf = pattern(len + n, 40);
    for (unsigned i = 0; i < n; i++) {
        struct dfd_task_meta t;
        bool existed;
        struct dfd_import_params p = params();
        p.piece_length = piece_length;
        stream_import(f, buf + i, len, p, &t, &existed);
        assert_false(existed);
        dfd_task_meta_done(&t);
    }
    free(buf);
    return n * len;
}

/* Writes garbage over page number pgno (1-based) of the closed database. */
static void corrupt_page(struct fx *f, unsigned pgno) {
    char db[PATH_MAX];
    db_path(f, "pcache.db", db, sizeof(db));
    int fd = open(db, O_RDWR);
    assert_true(fd >= 0);
    unsigned char hdr[18];
    assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
    size_t page_size = (size_t)hdr[16] << 8 | hdr[17];
    page_size = page_size == 1 ? 65536 : page_size;
    char *junk = pattern(page_size, 77);
    assert_int_equal(pwrite(fd, junk, page_size, (off_t)(pgno - 1) * (off_t)page_size),
                     (ssize_t)page_size);
    close(fd);
    free(junk);
}

static int open_store(struct fx *f, bool discard, struct dfd_recovery *rec, struct dfc_error *err) {
    struct dfd_storage_opts o = {.dir = f->store, .keep = true, .discard_broken = discard};
    return dfd_storage_open(&o, &f->s, rec, err);
}

static void close_store(struct fx *f) {
    dfd_storage_close(f->s);
    f->s = NULL;
}

static void test_corrupt_db_refuses_and_keeps_content(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_recovery rec;
    uint64_t bytes = import_some(f, 5, 1000, 0);
    close_store(f);
    corrupt_page(f, 2); /* the first page after the header page: the tasks table */
    int r = open_store(f, false, &rec, &err);
    assert_int_equal(content_files(f), 5); /* before: all 5 deleted as "orphans" */
    assert_int_equal(r, DFC_E_FAILED_PRECONDITION);
    assert_null(f->s);
    assert_non_null(strstr(err.msg, "/metadata/pcache.db` is corrupt"));
    assert_non_null(strstr(err.msg, "5 content files (5000 bytes)"));
    assert_non_null(strstr(err.msg, "nothing was changed"));
    assert_non_null(strstr(err.msg, "--discard-broken-store"));
    /* Refusing changed nothing: it refuses the same way again. */
    assert_int_equal(open_store(f, false, &rec, &err), DFC_E_FAILED_PRECONDITION);
    assert_int_equal(content_files(f), 5);
    /* Asked to, it discards: the database moves aside and the store starts empty. */
    assert_int_equal(open_store(f, true, &rec, &err), 0);
    assert_string_equal(rec.discarded_reason, "corrupt");
    assert_int_equal(rec.discarded_files, 5);
    assert_true(rec.discarded_bytes == bytes);
    assert_int_equal(rec.tasks, 0);
    assert_int_equal(content_files(f), 0);
    char broken[PATH_MAX];
    db_path(f, "pcache.db.broken", broken, sizeof(broken));
    struct stat st;
    assert_int_equal(stat(broken, &st), 0);
    import_some(f, 1, 10, 0); /* and works */
    reopen(f, &rec);
    assert_int_equal(rec.tasks, 1);
    assert_null(rec.discarded_reason);
}

static void test_missing_or_empty_db_refuses(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_recovery rec;
    import_some(f, 3, 100, 0);
    close_store(f);
    char db[PATH_MAX];
    db_path(f, "pcache.db", db, sizeof(db));
    assert_int_equal(unlink(db), 0);
    int r = open_store(f, false, &rec, &err);
    assert_int_equal(content_files(f), 3); /* before: all deleted, at info level */
    assert_int_equal(r, DFC_E_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "pcache.db` is missing, and 3 content files (300 bytes)"));
    write_file(db, "", 0);
    assert_int_equal(open_store(f, false, &rec, &err), DFC_E_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "pcache.db` is empty (0 bytes), and 3 content files"));
    assert_int_equal(content_files(f), 3);
    assert_int_equal(open_store(f, true, &rec, &err), 0);
    assert_string_equal(rec.discarded_reason, "empty");
    assert_int_equal(rec.discarded_files, 3);
    assert_int_equal(content_files(f), 0);
    /* With no content, a missing database is a first start. */
    close_store(f);
    unlink(db);
    assert_int_equal(open_store(f, false, &rec, &err), 0);
    assert_null(rec.discarded_reason);
}

static void test_db_without_schema_refuses(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_recovery rec;
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell");
    }
    import_some(f, 2, 100, 0);
    close_store(f);
    char db[PATH_MAX], cmd[PATH_MAX + 64];
    db_path(f, "pcache.db", db, sizeof(db));
    unlink(db);
    snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'CREATE TABLE other (x)'", db);
    assert_int_equal(system(cmd), 0); /* a valid SQLite file, but not ours */
    assert_int_equal(open_store(f, false, &rec, &err), DFC_E_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "has no schema"));
    assert_int_equal(content_files(f), 2);
}

static void test_corrupt_pieces_page_refuses(void **state) {
    /* Before, the store opened and every export of an affected task failed. */
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_recovery rec;
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell (its dbstat table finds the page)");
    }
    import_some(f, 2, 400 * 1024, 1024); /* 800 piece rows: many pages */
    close_store(f);
    char db[PATH_MAX], cmd[PATH_MAX + 200];
    db_path(f, "pcache.db", db, sizeof(db));
    snprintf(cmd, sizeof(cmd),
             "sqlite3 '%s' \"SELECT pageno FROM dbstat WHERE name = 'pieces' AND"
             " pagetype = 'leaf' ORDER BY pageno LIMIT 1 OFFSET 3\"",
             db);
    FILE *p = popen(cmd, "r");
    unsigned pgno = 0;
    assert_int_equal(fscanf(p, "%u", &pgno), 1);
    pclose(p);
    assert_true(pgno > 2);
    corrupt_page(f, pgno);
    assert_int_equal(open_store(f, false, &rec, &err), DFC_E_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "is corrupt"));
    assert_int_equal(content_files(f), 2);
}

/* ---- deleting on a full disk ---- */

static void fill_disk(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    static char chunk[65536];
    for (size_t n = sizeof(chunk); n > 0; n /= 2) {
        while (write(fd, chunk, n) == (ssize_t)n) {
        }
    }
    close(fd);
}

static uint64_t free_bytes(const char *dir) {
    struct statvfs v;
    assert_int_equal(statvfs(dir, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

static bool has_reserve(const char *store) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/metadata/reserve", store);
    struct stat st;
    return stat(path, &st) == 0 && st.st_size == (off_t)MiB;
}

static void test_delete_on_a_full_disk(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    if (geteuid() != 0) {
        test_skip("needs root to mount a small tmpfs in a private mount namespace");
    }
    test_mount_ns_enter(); /* left by teardown */
    char small[280], filler[300];
    snprintf(small, sizeof(small), "%s/full", f->dir);
    snprintf(filler, sizeof(filler), "%s/filler", small);
    mkdir(small, 0755);
    assert_int_equal(mount("none", small, "tmpfs", 0, "size=8m"), 0);
    struct fx g = {.s = NULL};
    snprintf(g.store, sizeof(g.store), "%s", small);
    struct dfd_storage_opts o = {.dir = small, .keep = true};
    assert_int_equal(dfd_storage_open(&o, &g.s, NULL, &err), 0);
    char *buf = pattern(MiB + 3, 50);
    struct dfd_task_meta a, b, c;
    import_at(&g, buf, MiB, false, 3600 * SEC, T0, &a);
    import_at(&g, buf + 1, MiB, false, 300 * SEC, T0, &b);
    import_at(&g, buf + 2, MiB, false, 3600 * SEC, T0, &c);

    /* 100% full: an operator's delete still goes through and frees the space. */
    fill_disk(filler);
    assert_true(free_bytes(small) == 0);
    int r = dfd_storage_delete(g.s, a.id, &err);
    if (r < 0) {
        fprintf(stderr, "delete on a full disk: %s\n", err.msg);
    }
    assert_int_equal(r, 0);
    assert_false(exists(&g, a.id));
    assert_true(free_bytes(small) >= MiB);

    /* With room again the reserve comes back (here at the next GC pass); then GC's TTL path
     * deletes on a full disk. */
    struct dfd_gc_policy ttl_only = {
        .interval_ns = SEC, .high_percent = 100, .low_percent = 90, .disk_threshold = 1ULL << 40};
    struct dfd_gc_report rep;
    unlink(filler);
    assert_int_equal(dfd_gc_run_once(g.s, &ttl_only, T0, &rep, &err), 0);
    assert_true(has_reserve(small));
    fill_disk(filler);
    assert_int_equal(dfd_gc_run_once(g.s, &ttl_only, T0 + 301 * SEC, &rep, &err), 0);
    assert_int_equal(rep.expired, 1);
    assert_false(exists(&g, b.id));

    /* And its disk-pressure path (the filesystem's own usage). */
    unlink(filler);
    assert_int_equal(dfd_gc_run_once(g.s, &ttl_only, T0, &rep, &err), 0);
    fill_disk(filler);
    struct dfd_gc_policy pressure = {.interval_ns = SEC, .high_percent = 90, .low_percent = 50};
    assert_int_equal(dfd_gc_run_once(g.s, &pressure, T0, &rep, &err), 0);
    assert_int_equal(rep.usage_percent, 100);
    assert_int_equal(rep.evicted, 1);
    assert_false(exists(&g, c.id));

    /* Once there is space, imports work again and the reserve is back. */
    unlink(filler);
    struct dfd_task_meta d;
    import_at(&g, buf + 3, MiB, false, 3600 * SEC, T0, &d);
    assert_true(exists(&g, d.id));
    assert_int_equal(dfd_storage_delete(g.s, d.id, &err), 0);
    assert_true(has_reserve(small));
    dfd_storage_close(g.s);
    assert_int_equal(umount(small), 0);
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
    dfd_task_meta_done(&c);
    dfd_task_meta_done(&d);
    free(buf);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_stream_import_round_trip),
        T(test_same_content_dedupes),
        T(test_empty_and_one_byte),
        T(test_expected_length_is_enforced),
        T(test_import_fd_hard_links_on_the_same_fs),
        T(test_import_fd_copies_across_filesystems),
        T(test_cancelled_import_leaves_nothing),
        T(test_disk_full_leaves_nothing),
        T(test_concurrent_imports_of_the_same_content),
        T(test_delete),
        T(test_max_tasks),
        T(test_delete_task_spares_a_newer_import),
        T(test_read_piece_checks_its_crc),
        T(test_verify_digest),
        T(test_recovery_removes_half_written_state),
        T(test_keep_false_starts_empty),
        T(test_gc_expires_by_ttl),
        T(test_gc_evicts_under_pressure_sparing_persistent),
        T(test_gc_evicts_only_what_is_needed),
        T(test_gc_thread_uses_the_injected_clock),
        T(test_import_fd_never_shares_a_writable_inode),
        T(test_unsafe_shared_inode_imports_opt_in),
        T(test_dedup_needs_the_same_bytes_and_origin),
        T(test_an_old_store_is_migrated_and_fixed),
        T(test_corrupt_db_refuses_and_keeps_content),
        T(test_missing_or_empty_db_refuses),
        T(test_db_without_schema_refuses),
        T(test_corrupt_pieces_page_refuses),
        T(test_delete_on_a_full_disk),
    };
    return test_run_group(tests, NULL, NULL);
}
