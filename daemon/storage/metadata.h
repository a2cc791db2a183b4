/*
 * metadata.h - task and piece records in SQLite (WAL, synchronous=FULL).
 *
 * A task row exists only for a task whose content is complete and durable: inserting the row
 * (one transaction with its pieces) is the commit point of an import. Thread-safe: one
 * connection behind a mutex.
 *
 * Private to daemon/storage: everything else reaches tasks through storage.h. The records
 * and their ownership are in task.h.
 */
#ifndef DFD_STORAGE_METADATA_H
#define DFD_STORAGE_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "pins.h"
#include "task.h"

struct dfd_metadata;

enum dfd_metadata_state {
    DFD_METADATA_OK,
    DFD_METADATA_CORRUPT,   /* quick_check failed, or SQLite calls it corrupt / not a database */
    DFD_METADATA_NO_SCHEMA, /* a readable SQLite file without the tasks and pieces tables */
};

struct dfd_metadata_health {
    enum dfd_metadata_state state;
    char detail[160]; /* quick_check's first line or SQLite's message; "ok" when healthy */
};

/* Checks an existing, non-empty <dir>/pcache.db without changing its contents (never creates
 * it): PRAGMA quick_check and the schema. Corruption is a result in *ret, not an error;
 * errors are what keeps the check from running (permissions, I/O, a lock). */
int dfd_metadata_check(const char *dir, struct dfd_metadata_health *ret, struct dfc_error *err);

/* Opens (creating) <dir>/pcache.db and migrates its schema to the current version. */
int dfd_metadata_open(const char *dir, struct dfd_metadata **ret, struct dfc_error *err);
void dfd_metadata_close(struct dfd_metadata *md);

/* Inserts a task and its pieces atomically. -EEXIST when the id is already there. */
int dfd_metadata_insert(struct dfd_metadata *md, const struct dfd_task_meta *t,
                        const struct dfd_piece_meta *pieces, struct dfc_error *err);

/* -ENOENT when absent. */
int dfd_metadata_get(struct dfd_metadata *md, const char *id, struct dfd_task_meta *ret,
                     struct dfc_error *err);

/* All pieces of id in order; *ret_n may be 0. Free with free(). */
int dfd_metadata_pieces(struct dfd_metadata *md, const char *id, struct dfd_piece_meta **ret,
                        size_t *ret_n, struct dfc_error *err);

/* All tasks, oldest updated_at first. Free with dfd_task_meta_list_free(). */
int dfd_metadata_list(struct dfd_metadata *md, struct dfd_task_meta **ret, size_t *ret_n,
                      struct dfc_error *err);

/* Task counts and content bytes, [0] not persistent, [1] persistent (one aggregate query). */
int dfd_metadata_totals(struct dfd_metadata *md, uint64_t ret_tasks[2], uint64_t ret_bytes[2],
                        struct dfc_error *err);

/* Deletes the task and its pieces; 0 even when absent. -ENOSPC when the WAL cannot grow. */
int dfd_metadata_delete(struct dfd_metadata *md, const char *id, struct dfc_error *err);

/* Deletes the task only while its row is the one read earlier: the same import (created_at_ns)
 * and, when updated_at_ns >= 0, not used or changed since. Returns 1 when it deleted (the
 * deleted row's peer id, which may have been set since the read, into ret_peer_id), 0 when
 * the row is gone or is another one now. One statement, so nothing slips in between. */
int dfd_metadata_delete_if(struct dfd_metadata *md, const char *id, int64_t created_at_ns,
                           int64_t updated_at_ns, char *ret_peer_id, size_t peer_size,
                           struct dfc_error *err);

/* Checkpoints the WAL into the database and truncates it (frees the WAL's disk space). */
int dfd_metadata_checkpoint(struct dfd_metadata *md, struct dfc_error *err);

/* Sets persistent and bumps updated_at. -ENOENT when absent. */
int dfd_metadata_set_persistent(struct dfd_metadata *md, const char *id, bool persistent,
                                int64_t now_ns, struct dfc_error *err);

/* On a register_later row of this import (created_at_ns) whose peer id is expect: sets the
 * peer id and the mark. 1 when it did, 0 when the row is gone, another one, or not so. */
int dfd_metadata_set_registration(struct dfd_metadata *md, const char *id, int64_t created_at_ns,
                                  const char *expect, const char *peer_id, bool later,
                                  struct dfc_error *err);

/* Bumps updated_at (an export uses the task). */
int dfd_metadata_touch(struct dfd_metadata *md, const char *id, int64_t now_ns,
                       struct dfc_error *err);

/* ---- the pins of content volumes (pin_meta.c) ---- */

/* Inserts a pin and its files atomically. -EEXIST when the pin id is there. */
int dfd_metadata_pin_insert(struct dfd_metadata *md, const struct dfd_pin *p,
                            struct dfc_error *err);

/* -ENOENT when absent. Free *ret with dfd_pin_done(). */
int dfd_metadata_pin_get(struct dfd_metadata *md, const char *pin_id, struct dfd_pin *ret,
                         struct dfc_error *err);

/* Deletes a pin and its files: 1 when it did, 0 when absent. */
int dfd_metadata_pin_delete(struct dfd_metadata *md, const char *pin_id, struct dfc_error *err);

/* Every pin by pin id. Free with dfd_pin_list_free(). */
int dfd_metadata_pin_list(struct dfd_metadata *md, struct dfd_pin **ret, size_t *ret_n,
                          struct dfc_error *err);

/* The pin ids holding task id, by pin id (free()). */
int dfd_metadata_task_pins(struct dfd_metadata *md, const char *id,
                           char (**ret)[DFD_PIN_ID_MAX + 1], size_t *ret_n, struct dfc_error *err);

#endif /* DFD_STORAGE_METADATA_H */
