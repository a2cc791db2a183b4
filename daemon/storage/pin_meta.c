/*
 * pin_meta.c - the SQLite side of the pins of content volumes (pins.h): tables pins and
 * pin_files (schema version 5, metadata.c), read and written through the main connection
 * under its lock. Pins are few (one per published volume), so whole-table reads stay there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"
#include "metadata_internal.h"

void dfd_pin_done(struct dfd_pin *p) {
    free(p->target_path);
    free(p->files);
    p->target_path = NULL;
    p->files = NULL;
    p->n_files = 0;
}

void dfd_pin_list_free(struct dfd_pin *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dfd_pin_done(&list[i]);
    }
    free(list);
}

int dfd_metadata_pin_insert(struct dfd_metadata *md, const struct dfd_pin *p,
                            struct dfc_error *err) {
    sqlite3_stmt *ps = NULL, *fs = NULL;
    int r = 0;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_exec(md->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "begin");
        goto out;
    }
    if (sqlite3_prepare_v2(md->db,
                           "INSERT INTO pins (pin_id, target_path, created_at_ns, verity)"
                           " VALUES (?,?,?,?)",
                           -1, &ps, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(md->db, "INSERT INTO pin_files (pin_id, name, task_id) VALUES (?,?,?)",
                           -1, &fs, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto rollback;
    }
    sqlite3_bind_text(ps, 1, p->pin_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(ps, 2, p->target_path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ps, 3, p->created_at_ns);
    sqlite3_bind_int(ps, 4, p->verity);
    if (sqlite3_step(ps) != SQLITE_DONE) {
        r = sqlite3_extended_errcode(md->db) == SQLITE_CONSTRAINT_PRIMARYKEY
                ? dfc_error_set(err, -EEXIST, "pin %s already exists", p->pin_id)
                : dfd__md_error(md, err, "insert pin");
        goto rollback;
    }
    for (size_t i = 0; i < p->n_files; i++) {
        sqlite3_reset(fs);
        sqlite3_bind_text(fs, 1, p->pin_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(fs, 2, p->files[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(fs, 3, p->files[i].task_id, -1, SQLITE_STATIC);
        if (sqlite3_step(fs) != SQLITE_DONE) {
            r = dfd__md_error(md, err, "insert pin file");
            goto rollback;
        }
    }
    if (sqlite3_exec(md->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "commit");
        goto rollback;
    }
    goto out;
rollback:
    (void)sqlite3_exec(md->db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_finalize(ps);
    sqlite3_finalize(fs);
    pthread_mutex_unlock(&md->mu);
    return r;
}

/* The files of p->pin_id into p (md->mu held). */
static int read_files(struct dfd_metadata *md, struct dfd_pin *p, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(md->db,
                           "SELECT name, task_id FROM pin_files WHERE pin_id = ? ORDER BY name", -1,
                           &st, NULL) != SQLITE_OK) {
        return dfd__md_error(md, err, "prepare");
    }
    sqlite3_bind_text(st, 1, p->pin_id, -1, SQLITE_STATIC);
    size_t cap = 0;
    int rc, r = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (p->n_files == cap) {
            cap = cap ? cap * 2 : 4;
            struct dfd_pin_file *grown = realloc(p->files, cap * sizeof(*grown));
            if (grown == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                break;
            }
            p->files = grown;
        }
        struct dfd_pin_file *f = &p->files[p->n_files++];
        snprintf(f->name, sizeof(f->name), "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(f->task_id, sizeof(f->task_id), "%s", (const char *)sqlite3_column_text(st, 1));
    }
    if (r == 0 && rc != SQLITE_DONE) {
        r = dfd__md_error(md, err, "select pin files");
    }
    sqlite3_finalize(st);
    return r;
}

/* One row of SELECT pin_id, target_path, created_at_ns, verity into p, files included. */
static int read_pin(struct dfd_metadata *md, sqlite3_stmt *st, struct dfd_pin *p,
                    struct dfc_error *err) {
    memset(p, 0, sizeof(*p));
    snprintf(p->pin_id, sizeof(p->pin_id), "%s", (const char *)sqlite3_column_text(st, 0));
    const unsigned char *target = sqlite3_column_text(st, 1);
    p->target_path = strdup(target != NULL ? (const char *)target : "");
    p->created_at_ns = sqlite3_column_int64(st, 2);
    p->verity = sqlite3_column_int(st, 3) != 0;
    if (p->target_path == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return read_files(md, p, err);
}

#define PIN_COLUMNS "pin_id, target_path, created_at_ns, verity"

int dfd_metadata_pin_get(struct dfd_metadata *md, const char *pin_id, struct dfd_pin *ret,
                         struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, "SELECT " PIN_COLUMNS " FROM pins WHERE pin_id = ?", -1, &st,
                           NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, pin_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r = read_pin(md, st, ret, err);
        if (r < 0) {
            dfd_pin_done(ret);
        }
    } else if (rc == SQLITE_DONE) {
        r = dfc_error_set(err, -ENOENT, "pin %s not found", pin_id);
    } else {
        r = dfd__md_error(md, err, "select pin");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_pin_delete(struct dfd_metadata *md, const char *pin_id, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    int r;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, "DELETE FROM pins WHERE pin_id = ?", -1, &st, NULL) !=
        SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
    } else {
        sqlite3_bind_text(st, 1, pin_id, -1, SQLITE_STATIC);
        r = sqlite3_step(st) == SQLITE_DONE ? sqlite3_changes(md->db) > 0
                                            : dfd__md_error(md, err, "delete pin");
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    return r;
}

int dfd_metadata_pin_list(struct dfd_metadata *md, struct dfd_pin **ret, size_t *ret_n,
                          struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    struct dfd_pin *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(md->db, "SELECT " PIN_COLUMNS " FROM pins ORDER BY pin_id", -1, &st,
                           NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            struct dfd_pin *grown = realloc(v, cap * sizeof(*grown));
            if (grown == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
            v = grown;
        }
        r = read_pin(md, st, &v[n], err);
        n++; /* freed below on failure, with what it holds */
        if (r < 0) {
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        r = dfd__md_error(md, err, "select pins");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    if (r < 0) {
        dfd_pin_list_free(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int dfd_metadata_task_pins(struct dfd_metadata *md, const char *id,
                           char (**ret)[DFD_PIN_ID_MAX + 1], size_t *ret_n, struct dfc_error *err) {
    sqlite3_stmt *st = NULL;
    char(*v)[DFD_PIN_ID_MAX + 1] = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;
    pthread_mutex_lock(&md->mu);
    if (sqlite3_prepare_v2(
            md->db, "SELECT DISTINCT pin_id FROM pin_files WHERE task_id = ? ORDER BY pin_id", -1,
            &st, NULL) != SQLITE_OK) {
        r = dfd__md_error(md, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            char(*grown)[DFD_PIN_ID_MAX + 1] = realloc(v, cap * sizeof(*grown));
            if (grown == NULL) {
                r = dfc_error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
            v = grown;
        }
        snprintf(v[n++], sizeof(v[0]), "%s", (const char *)sqlite3_column_text(st, 0));
    }
    if (rc != SQLITE_DONE) {
        r = dfd__md_error(md, err, "select task pins");
    }
out:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&md->mu);
    if (r < 0) {
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}
