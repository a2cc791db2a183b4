/*
 * Unit tests of the pins of content volumes (daemon/storage/pins.c, pin_meta.c): the id and
 * name checks; a pin's directory of hard links; GC (TTL and eviction, through dfd_gc_run_once)
 * leaving pinned tasks alone while a delete hides them; pins racing evictions; recovery at
 * open; a store of schema version 4 migrated to pins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/units.h"
#include "gc.h"
#include "storage/pins.h"
#include "storage/storage.h"
#include "storage_fixture.h"
#include "test_support.h"

#define SEC DFC_NS_PER_SEC
#define T0  (INT64_C(1700000000) * SEC)

static int setup(void **state) {
    return fx_setup(state, "pins");
}

static void import(struct fx *f, const char *data, bool persistent, struct dfd_task_meta *t) {
    struct dfc_error err;
    struct dfd_import *imp;
    struct dfd_import_params p = {
        .replica_count = 1, .ttl_ns = 3600 * SEC, .persistent = persistent, .expected_length = -1};
    assert_int_equal(dfd_import_begin(f->s, &p, &imp, &err), 0);
    assert_int_equal(dfd_import_write(imp, data, strlen(data), &err), 0);
    bool existed;
    assert_int_equal(dfd_import_commit(imp, T0, t, &existed, &err), 0);
}

static int pin1(struct fx *f, const char *pin_id, const char *name, const char *id, char *path,
                struct dfc_error *err) {
    struct dfd_pin_file file;
    snprintf(file.name, sizeof(file.name), "%s", name);
    snprintf(file.task_id, sizeof(file.task_id), "%s", id);
    struct dfd_pin want = {.target_path = "/t", .n_files = 1, .files = &file};
    snprintf(want.pin_id, sizeof(want.pin_id), "%s", pin_id);
    bool verity;
    char missing[65] = "";
    int r = dfd_storage_pin(f->s, &want, T0, path, &verity, missing, err);
    if (r == -ENOENT) {
        assert_string_equal(missing, id);
    }
    return r;
}

static bool stored(struct fx *f, const char *id) {
    struct dfd_task_meta t;
    struct dfc_error err;
    if (dfd_storage_get(f->s, id, &t, &err) < 0) {
        return false;
    }
    dfd_task_meta_done(&t);
    return true;
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_checks(void **state) {
    (void)state;
    struct dfc_error err;
    assert_int_equal(dfd_pin_check_id("pin_id", "csi-0a1B_2.x", &err), 0);
    const char *bad_ids[] = {"", ".x", "a/b", "a b", "é", ".."};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        assert_int_equal(dfd_pin_check_id("pin_id", bad_ids[i], &err), -EINVAL);
        assert_non_null(strstr(err.msg, "pin_id"));
    }
    char id[200];
    memset(id, 'a', sizeof(id));
    id[128] = '\0';
    assert_int_equal(dfd_pin_check_id("pin_id", id, &err), 0);
    id[128] = 'a';
    id[129] = '\0';
    assert_int_equal(dfd_pin_check_id("pin_id", id, &err), -EINVAL);
    assert_int_equal(dfd_pin_check_name("n", "config.json", &err), 0);
    assert_int_equal(dfd_pin_check_name("n", "..x", &err), 0); /* a name, not a step up */
    const char *bad_names[] = {"", ".", "..", "a/b", "/"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        assert_int_equal(dfd_pin_check_name("files[3].name", bad_names[i], &err), -EINVAL);
        assert_non_null(strstr(err.msg, "files[3].name"));
    }
}

static void test_gc_spares_pins_and_delete_hides(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta a, b;
    import(f, "pinned content", false, &a);
    import(f, "free content", false, &b);
    char path[PATH_MAX], file[PATH_MAX + 8];
    assert_int_equal(pin1(f, "p", "f", a.id, path, &err), 0);
    /* Far past every TTL, with 1 byte allowed: everything unpinned goes, the pin's task stays. */
    struct dfd_gc_policy pol = {.high_percent = 80, .low_percent = 60, .disk_threshold = 1};
    struct dfd_gc_report rep;
    assert_int_equal(dfd_gc_run_once(f->s, &pol, T0 + 7200 * SEC, &rep, &err), 0);
    assert_int_equal(rep.expired, 1);
    assert_true(stored(f, a.id));
    assert_false(stored(f, b.id));
    bool deleted = true;
    assert_int_equal(dfd_storage_evict_task(f->s, &a, false, &deleted, &err), 0);
    assert_false(deleted);
    /* A delete (dfcache rm) hides it; the volume still holds the inode. */
    assert_int_equal(dfd_storage_delete(f->s, a.id, &err), 0);
    assert_false(stored(f, a.id));
    snprintf(file, sizeof(file), "%s/f", path);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(pin1(f, "q", "f", a.id, path, &err), -ENOENT);
    char(*ids)[DFD_PIN_ID_MAX + 1] = NULL;
    size_t n = 0;
    assert_int_equal(dfd_storage_task_pins(f->s, a.id, &ids, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], "p");
    free(ids);
    bool existed = false;
    assert_int_equal(dfd_storage_unpin(f->s, "p", &existed, &err), 0);
    assert_true(existed);
    assert_false(exists(file));
    assert_int_equal(dfd_storage_unpin(f->s, "p", &existed, &err), 0);
    assert_false(existed);
    dfd_task_meta_done(&a);
    dfd_task_meta_done(&b);
}

/* ---- pins racing evictions: never a pin row without its task ---- */

struct race {
    struct fx *f;
    struct dfd_task_meta t;
    atomic_bool stop;
};

static void *evictor(void *arg) {
    struct race *r = arg;
    struct dfc_error err;
    while (!atomic_load(&r->stop)) {
        bool deleted = false;
        struct dfd_task_meta t;
        if (dfd_storage_get(r->f->s, r->t.id, &t, &err) == 0) {
            (void)dfd_storage_evict_task(r->f->s, &t, false, &deleted, &err);
            dfd_task_meta_done(&t);
        }
    }
    return NULL;
}

static void test_pin_races_eviction(void **state) {
    struct fx *f = *state;
    struct race r = {.f = f};
    struct dfc_error err;
    import(f, "raced", false, &r.t);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, evictor, &r), 0);
    for (int i = 0; i < 200; i++) {
        char path[PATH_MAX];
        int rc = pin1(f, "race", "f", r.t.id, path, &err);
        if (rc == 0) {
            /* Pinned: the evictor can no longer take it. */
            usleep(100);
            assert_true(stored(f, r.t.id));
            assert_int_equal(dfd_storage_unpin(f->s, "race", NULL, &err), 0);
        } else {
            assert_int_equal(rc, -ENOENT);
        }
        if (!stored(f, r.t.id)) {
            struct dfd_task_meta again;
            import(f, "raced", false, &again);
            dfd_task_meta_done(&again);
        }
    }
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    dfd_task_meta_done(&r.t);
}

static void test_recovery_at_open(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta a;
    import(f, "recovered", true, &a);
    char path[PATH_MAX], stale[PATH_MAX + 16], cmd[PATH_MAX * 2 + 64];
    assert_int_equal(pin1(f, "gone-dir", "f", a.id, path, &err), 0);
    snprintf(cmd, sizeof(cmd), "chmod 0755 '%s' && rm -rf '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    snprintf(stale, sizeof(stale), "%s/volumes/.tmp", f->store);
    assert_int_equal(mkdir(stale, 0555), 0);
    /* A symbolic link in volumes/ is removed, never followed. */
    char outside[PATH_MAX], outside_file[PATH_MAX + 8], link[PATH_MAX + 16];
    snprintf(outside, sizeof(outside), "%s/outside", f->dir);
    assert_int_equal(mkdir(outside, 0755), 0);
    snprintf(outside_file, sizeof(outside_file), "%s/kept", outside);
    FILE *fp = fopen(outside_file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(link, sizeof(link), "%s/volumes/evil", f->store);
    assert_int_equal(symlink(outside, link), 0);
    struct dfd_recovery rec;
    reopen(f, &rec);
    assert_int_equal(rec.pins, 1);
    assert_int_equal(rec.rebuilt_pins, 1);
    assert_int_equal(rec.stale_volumes, 2);
    assert_int_equal(rec.dropped_pins, 0);
    assert_false(exists(stale));
    assert_false(exists(link));
    assert_true(exists(outside_file));
    struct stat o;
    assert_int_equal(stat(outside, &o), 0);
    assert_int_equal(o.st_mode & 07777, 0755);
    char file[PATH_MAX + 8], content[PATH_MAX];
    snprintf(file, sizeof(file), "%s/f", path);
    snprintf(content, sizeof(content), "%s/content/persistent-cache-tasks/%.3s/%s", f->store, a.id,
             a.id);
    struct stat x, y;
    assert_int_equal(stat(file, &x), 0);
    assert_int_equal(stat(content, &y), 0);
    assert_true(x.st_ino == y.st_ino);
    assert_int_equal(y.st_mode & 07777, 0444); /* not put back to 0600 by the open */
    dfd_task_meta_done(&a);
}

/* A pin whose directory went behind the daemon's back is made again by the next publish. */
static void test_publish_again_remakes_a_lost_directory(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct dfd_task_meta a;
    import(f, "remade", true, &a);
    char path[PATH_MAX], again[PATH_MAX], file[PATH_MAX + 8], cmd[PATH_MAX * 2 + 64];
    assert_int_equal(pin1(f, "lost", "f", a.id, path, &err), 0);
    snprintf(file, sizeof(file), "%s/f", path);
    assert_int_equal(chmod(path, 0755), 0);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(pin1(f, "lost", "f", a.id, again, &err), 0);
    assert_string_equal(again, path);
    assert_true(exists(file));
    snprintf(cmd, sizeof(cmd), "chmod 0755 '%s' && rm -rf '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(pin1(f, "lost", "f", a.id, again, &err), 0);
    assert_true(exists(file));
    /* And refused, the pin dropped, when its task is gone too. */
    assert_int_equal(system(cmd), 0);
    assert_int_equal(dfd_storage_delete(f->s, a.id, &err), 0);
    assert_int_equal(pin1(f, "lost", "f", a.id, again, &err), -ENOENT);
    struct dfd_pin *pins;
    size_t n;
    assert_int_equal(dfd_storage_pins(f->s, &pins, &n, &err), 0);
    assert_int_equal(n, 0);
    dfd_pin_list_free(pins, n);
    dfd_task_meta_done(&a);
}

#define ID1 "1111111111111111111111111111111111111111111111111111111111111111"

static void test_store_of_version_4_takes_pins(void **state) {
    struct fx *f = *state;
    if (!fx_make_old_store(f, ID1, 0700, 0600,
                           "ALTER TABLE tasks ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 0;"
                           " ALTER TABLE tasks ADD COLUMN id_origin TEXT NOT NULL DEFAULT"
                           " 'unknown';"
                           " ALTER TABLE tasks ADD COLUMN peer_id TEXT NOT NULL DEFAULT '';"
                           " ALTER TABLE tasks ADD COLUMN register_later INTEGER NOT NULL DEFAULT"
                           " 0; ALTER TABLE tasks ADD COLUMN content_sha256 TEXT NOT NULL DEFAULT"
                           " ''; ALTER TABLE tasks ADD COLUMN id_basis TEXT;",
                           ", 1000, 'content', '', 0, '', NULL",
                           "ALTER TABLE pieces ADD COLUMN sha256 BLOB; PRAGMA user_version=4;")) {
        test_skip("needs the sqlite3 command");
    }
    struct dfd_recovery rec;
    fx_open(f, &rec);
    assert_int_equal(rec.tasks, 1);
    assert_int_equal(rec.pins, 0);
    char path[PATH_MAX];
    struct dfc_error err;
    assert_int_equal(pin1(f, "old", "f", ID1, path, &err), 0);
    reopen(f, &rec);
    assert_int_equal(rec.pins, 1);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_checks),
        T(test_gc_spares_pins_and_delete_hides),
        T(test_pin_races_eviction),
        T(test_recovery_at_open),
        T(test_publish_again_remakes_a_lost_directory),
        T(test_store_of_version_4_takes_pins),
    };
    return test_run_group(tests, NULL, NULL);
}
