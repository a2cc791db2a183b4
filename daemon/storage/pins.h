/*
 * pins.h - the pins of content volumes (docs/content-volumes.md): a pin names tasks of the store
 * and lays them out as a read-only directory of hard links to their content inodes, which the
 * CSI plugin bind-mounts into pods. No copy at any size.
 *
 * Layout (next to storage.h's):
 *   volumes/                 0755
 *   volumes/<pin_id>/        0555 once complete; one hard link per file, to
 *   volumes/<pin_id>/<name>  the task's content inode, made 0444 (pods run as any uid; the
 *                            store's own directories stay 0700, so node users cannot reach
 *                            the content through them)
 * and one metadata row per pin (pin id, target path, created, verity) with a row per file
 * (name, task id).
 *
 * Crash safety: the directory is made, its links made, the directory fsynced and made 0555,
 * volumes/ fsynced, and only then the pin row committed (the commit point), all under the
 * commit lock, so no delete slips between "the task is here" and the link. Unpinning drops the
 * row first, then the directory. dfd_storage_open() recovers: a directory of volumes/ without
 * a row is removed; a row whose directory is missing or lacks a file is rebuilt when every task
 * is still stored, else dropped.
 *
 * Pins and deletes: GC (dfd_storage_evict_task) never deletes a pinned task, for TTL or for
 * space. dfd_storage_delete/_delete_task (`dfcache rm`, the scheduler) still do: the row and the
 * content/ link go, so the task is gone for every new pin, stat and list, while the volumes'
 * links keep its inode, whose space the filesystem frees when the last volume holding it is
 * unpinned.
 *
 * fs-verity: pinning tries FS_IOC_ENABLE_VERITY on each content file (a filesystem without it
 * answers EOPNOTSUPP or ENOTTY, and the pin goes on without); the pin records whether every
 * file has it (statx STATX_ATTR_VERITY).
 *
 * Thread-safe: pins are made and removed one at a time (a pin lock), then under the commit
 * lock (lock order: pin lock, commit lock, metadata).
 *
 * Ownership: struct dfd_pin's target_path and files are heap memory owned by the struct (free
 * with dfd_pin_done); lists are arrays freed with dfd_pin_list_free.
 */
#ifndef DFD_STORAGE_PINS_H
#define DFD_STORAGE_PINS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "piece.h"

struct dfd_storage;

#define DFD_PIN_ID_MAX    128 /* [A-Za-z0-9._-], not starting with '.' */
#define DFD_PIN_FILES_MAX 64
#define DFD_PIN_NAME_MAX  255 /* one path component */

struct dfd_pin_file {
    char name[DFD_PIN_NAME_MAX + 1];
    char task_id[DFD_TASK_ID_LEN + 1];
};

struct dfd_pin {
    char pin_id[DFD_PIN_ID_MAX + 1];
    char *target_path; /* where the plugin mounts it (recorded, never used as a path here) */
    int64_t created_at_ns;
    bool verity; /* every file has fs-verity */
    size_t n_files;
    struct dfd_pin_file *files;
};

void dfd_pin_done(struct dfd_pin *p);
void dfd_pin_list_free(struct dfd_pin *list, size_t n);

/* Checks a pin id: -EINVAL naming field ("pin_id") unless 1..DFD_PIN_ID_MAX characters of
 * [A-Za-z0-9._-] not starting with '.'. Pure. */
int dfd_pin_check_id(const char *field, const char *pin_id, struct dfc_error *err);

/* Checks a file name: -EINVAL naming field unless 1..DFD_PIN_NAME_MAX bytes, not "." or "..",
 * without '/'. Pure. */
int dfd_pin_check_name(const char *field, const char *name, struct dfc_error *err);

/* The directory of pin_id: <dir>/volumes/<pin_id>. */
int dfd_storage_volume_path(const struct dfd_storage *s, const char *pin_id, char *buf,
                            size_t size);

/* Pins want (its pin_id, target_path and files; created_at_ns and verity are set here) and
 * answers the directory in ret_path (PATH_MAX) and whether every file has fs-verity.
 * Idempotent: the same pin id with the same files (in any order) answers the same directory;
 * with other files -EEXIST. A task that is not stored: -ENOENT naming it, its id in
 * ret_missing (DFD_TASK_ID_LEN + 1), nothing made. */
int dfd_storage_pin(struct dfd_storage *s, struct dfd_pin *want, int64_t now_ns, char *ret_path,
                    bool *ret_verity, char *ret_missing, struct dfc_error *err);

/* Drops the pin's row, then its directory. An unknown pin id is fine (*ret_existed false;
 * may be NULL). */
int dfd_storage_unpin(struct dfd_storage *s, const char *pin_id, bool *ret_existed,
                      struct dfc_error *err);

/* Every pin, by pin id. */
int dfd_storage_pins(struct dfd_storage *s, struct dfd_pin **ret, size_t *ret_n,
                     struct dfc_error *err);

/* The ids of the pins holding task id, by pin id, into a heap array of *ret_n ids (free()). */
int dfd_storage_task_pins(struct dfd_storage *s, const char *id, char (**ret)[DFD_PIN_ID_MAX + 1],
                          size_t *ret_n, struct dfc_error *err);

/* Whether the store's filesystem takes fs-verity: 1 yes, 0 no (EOPNOTSUPP, ENOTTY), negative
 * errno when the probe (a small file in tmp/, removed) failed otherwise. */
int dfd_storage_verity_probe(struct dfd_storage *s, struct dfc_error *err);

#endif /* DFD_STORAGE_PINS_H */
