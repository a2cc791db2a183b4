/*
 * storage.h - the persistent-cache storage engine: content files plus SQLite metadata.
 *
 * Layout under dir (as Dragonfly's, with SQLite in place of RocksDB; content files 0600, the
 * content directories 0700, fixed at open for stores made by older versions):
 *   content/persistent-cache-tasks/<id[0..3]>/<id>   one file per task, full content
 *   metadata/pcache.db                               task and piece rows (task.h)
 *   tmp/                                             imports in progress
 *   volumes/<pin_id>/<name>                          content volumes: hard links (pins.h)
 *
 * Crash safety: an import spools into tmp/, is fsynced, renamed into content/ (and the
 * directory fsynced), and only then gets its metadata row, in one transaction: the row is the
 * commit point. dfd_storage_open() recovers: it empties tmp/, deletes content that has no row,
 * and rows whose content is missing or of the wrong size. Deleting drops the row first.
 *
 * Never destroying what it cannot read: open first checks the database (PRAGMA quick_check and
 * the schema). When it is corrupt, or missing, empty or without its schema while content files
 * are present, open fails with DFC_E_FAILED_PRECONDITION and a message that names the database,
 * the problem and the content count, and changes nothing; only opts.discard_broken moves the
 * database aside (metadata/pcache.db.broken), deletes the content and starts empty, counted in
 * struct dfd_recovery. Content is deleted as an orphan only on a definite "no such row"; any
 * other metadata error aborts the open.
 *
 * A full disk: metadata/reserve (1 MiB, kept when twice that is free) is released, and the WAL
 * checkpointed and truncated, when a delete cannot write its transaction, so deleting (by an
 * operator or by GC) frees space on a 100% full filesystem.
 *
 * Concurrent imports of the same content compute the same id; the first commit wins and the
 * others discard their spool and return the existing task (so re-importing is idempotent,
 * where upstream answers ALREADY_EXISTS from the scheduler). An id taken by other content,
 * or by another uid's content_for_calculating_task_id import, is -EEXIST.
 *
 * Thread-safe. Logs nothing; reports recovery counts to the caller.
 */
#ifndef DFD_STORAGE_STORAGE_H
#define DFD_STORAGE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "dfc/error.h"
#include "task.h"

struct dfd_storage;
struct dfd_import;

struct dfd_storage_opts {
    const char *dir;     /* absolute; created when missing */
    bool keep;           /* false: start empty, as Dragonfly's storage.keep=false */
    bool discard_broken; /* a broken database: discard it and the content instead of failing */
    /* storage.unsafeSharedInodeImports: hard-link any path import the filesystem allows, even
     * a file its owner (or anyone) can still write, which then changes the cache under every
     * later reader. Off: see dfd_storage_import_fd(). */
    bool unsafe_shared_inode_imports;
    /* storage.maxTasks: the most tasks the store holds; a commit that would make one more is
     * refused with -EDQUOT (RESOURCE_EXHAUSTED) and leaves nothing. 0 = the default. */
    uint64_t max_tasks;
};

#define DFD_STORAGE_MAX_TASKS_DEFAULT 65536

struct dfd_recovery {
    unsigned temp_files;   /* removed from tmp/ */
    unsigned orphan_files; /* content without a row */
    unsigned broken_rows;  /* rows without (complete) content */
    unsigned tasks;        /* tasks kept */
    /* Content volumes (pins.h): pins kept (rebuilt ones included), directories of volumes/
     * without a row removed, rows rebuilt (their directory was missing or incomplete) and
     * rows dropped (a task of theirs is gone). */
    unsigned pins, stale_volumes, rebuilt_pins, dropped_pins;
    /* With discard_broken: why the store was discarded ("corrupt", "missing", "empty",
     * "no-schema"; a static string), or NULL when it was not; and what was deleted. */
    const char *discarded_reason;
    unsigned discarded_files;
    uint64_t discarded_bytes;
};

int dfd_storage_open(const struct dfd_storage_opts *opts, struct dfd_storage **ret,
                     struct dfd_recovery *ret_recovery, struct dfc_error *err);
void dfd_storage_close(struct dfd_storage *s);

const char *dfd_storage_dir(const struct dfd_storage *s);

/* What an import is asked to do; strings are borrowed for the call. */
struct dfd_import_params {
    const char *content_for_id; /* NULL: the id hashes the content */
    const char *tag;            /* NULL when absent */
    const char *application;    /* NULL when absent */
    uint64_t piece_length;      /* 0: automatic */
    uint64_t replica_count;
    int64_t ttl_ns;
    bool persistent;
    int64_t expected_length; /* -1 when unknown; else more or fewer bytes fail the import */
    uid_t owner_uid;         /* the importing caller (SO_PEERCRED), recorded in the task */
    const char *peer_id;     /* recorded in the task (task.h); NULL or "" = none */
    /* Called once the content is complete and durable in the spool and its id is known, before
     * the task becomes visible (the commit): the scheduler's Started goes here (Finished
     * only after the commit, once the task is visible: daemon/registration.h).
     * pending is the row about to be committed (borrowed for the call). Not called when an
     * identical task already exists (the existing one is returned). A negative return aborts
     * the import, leaving nothing, and is returned by the import with err as set by it; 1
     * commits the task without its peer id (the hook kept it unregistered: local only); 2
     * does the same and marks it register_later (no scheduler took it; task.h); 0 commits it
     * as it is. NULL: no hook. */
    int (*before_commit)(void *arg, const struct dfd_task_meta *pending, struct dfc_error *err);
    void *before_commit_arg;
};

/* How a path import stored its content. */
enum dfd_import_mode {
    DFD_IMPORT_COPY,     /* read, hashed and written into a private spool */
    DFD_IMPORT_REFLINK,  /* FICLONE: a private copy-on-write clone, hashed as stored */
    DFD_IMPORT_HARDLINK, /* the source inode itself (nobody but the daemon can change it) */
};

const char *dfd_import_mode_name(enum dfd_import_mode m);

/* Starts a streamed import: spools into tmp/. -ENOSPC when expected_length does not fit; an
 * import of unknown length may write at most what is free in the store when it begins. */
int dfd_import_begin(struct dfd_storage *s, const struct dfd_import_params *p,
                     struct dfd_import **ret, struct dfc_error *err);

/* Appends bytes; -ENOSPC when the disk fills, -EINVAL past expected_length. buf is the
 * caller's again when it returns (the SHA-256 and the CRC + spool write of it overlap on two
 * threads, and this waits for both). */
int dfd_import_write(struct dfd_import *imp, const void *buf, size_t len, struct dfc_error *err);

/* Appends the bytes of n buffers (e.g. a received message's, left in gRPC's slices) without
 * waiting for them: ownership of the buffers, and of the array iov when n > 1, passes to the
 * import, which calls release(arg) (NULL: none) exactly once when it is done with them: once
 * hashed, CRC'd and written, or at once when they are refused, or at commit or abort. The
 * caller may go on receiving the next bytes while these are processed (a bounded queue: this
 * blocks while 12 MiB or 8 slices are queued). A failure of the spool write or the digests
 * surfaces on a later write or at commit (with the same codes as dfd_import_write()); the
 * import is then to be aborted. release may run on another thread. */
int dfd_import_writev_owned(struct dfd_import *imp, const struct iovec *iov, int n,
                            void (*release)(void *arg), void *arg, struct dfc_error *err);

/* Bytes accepted so far (queued by dfd_import_writev_owned() or written). */
uint64_t dfd_import_written(const struct dfd_import *imp);

/* Makes the task durable and visible, then frees imp (also on failure, leaving nothing).
 * *ret_task is filled (free with dfd_task_meta_done); *ret_existed tells whether an identical
 * task already existed. A task with the same id is returned only when it holds the same bytes
 * (same length, piece length and piece digests) and either both ids are content-derived or
 * both imports are by the same uid; otherwise -EEXIST ("task id ... is already taken"). */
int dfd_import_commit(struct dfd_import *imp, int64_t now_ns, struct dfd_task_meta *ret_task,
                      bool *ret_existed, struct dfc_error *err);

/* Discards an import and frees it. NULL is fine. */
void dfd_import_abort(struct dfd_import *imp);

/* Imports an open regular file in one read pass, computing the id and every piece's CRC. The
 * store never shares an inode that anyone outside the daemon can change: the content is a
 * FICLONE reflink (hashed by reading the clone, so what is hashed is what is stored) where
 * the filesystem can, else a copy. A hard link is made only when the source is owned by the
 * daemon's euid, has no write bit and no setuid/setgid bit, or with
 * unsafe_shared_inode_imports (still never a setuid/setgid file). should_stop(arg), when
 * given, is polled between reads (a cancelled call). *ret_mode (may be NULL) tells how. */
int dfd_storage_import_fd(struct dfd_storage *s, const struct dfd_import_params *p, int fd,
                          int64_t now_ns, bool (*should_stop)(void *), void *arg,
                          struct dfd_task_meta *ret_task, bool *ret_existed,
                          enum dfd_import_mode *ret_mode, struct dfc_error *err);

/* ---- replicas: a task fetched piece by piece from peers under a known id ---- */

struct dfd_replica;

/* What the scheduler says about the task (StatPersistentCacheTask); strings borrowed. */
struct dfd_replica_params {
    const char *id; /* 64 hex digits */
    const char *tag;
    const char *application;
    uint64_t piece_length;
    uint64_t content_length;
    uint32_t piece_count; /* must equal dfd_piece_count(content_length, piece_length) */
    uint64_t replica_count;
    int64_t ttl_ns;
    int64_t created_at_ns; /* the scheduler's created_at: every copy expires at the same moment */
    bool persistent;
    const char *peer_id; /* this copy's peer id at the scheduler */
};

/* Starts a replica: checks the geometry (-EINVAL naming the field), that it fits the free
 * space (-ENOSPC) and that the task is not stored (-EEXIST), and makes a spool file in tmp/ of
 * content_length bytes (fallocated; sparse on tmpfs, replica.c). Nothing is visible until
 * dfd_replica_commit(). */
int dfd_replica_begin(struct dfd_storage *s, const struct dfd_replica_params *p,
                      struct dfd_replica **ret, struct dfc_error *err);

/* Writes piece number (its bytes, len = its length by the geometry) at its offset, recording
 * crc32 (the CRC-32 of buf, which the caller has already checked against the parent's digest)
 * as its digest. Thread-safe: pieces may arrive in any order from several threads. -EINVAL for
 * a number or length that does not fit the geometry; writing a piece twice is -EEXIST. */
int dfd_replica_write_piece(struct dfd_replica *rep, uint32_t number, const void *buf, size_t len,
                            uint32_t crc32, struct dfc_error *err);

/* The same in steps, for bytes that arrive in chunks and are verified only at the end:
 * claim (the checks of dfd_replica_write_piece, -EEXIST for a piece claimed or written), then
 * any number of pwrites of bytes at..at+n of the piece (-EINVAL outside it or when not claimed;
 * -ENOSPC naming the piece), then finish: ok marks it written with crc32 as its digest, !ok
 * drops the claim so it may be fetched again. */
int dfd_replica_claim_piece(struct dfd_replica *rep, uint32_t number, size_t len,
                            struct dfc_error *err);
int dfd_replica_pwrite(struct dfd_replica *rep, uint32_t number, uint64_t at, const void *buf,
                       size_t n, struct dfc_error *err);
void dfd_replica_finish_piece(struct dfd_replica *rep, uint32_t number, bool ok, uint32_t crc32);

/* What the download verified the replica against (docs/integrity.md), recorded in its row:
 * the content's SHA-256 (hex), content_for_calculating_task_id (NULL: none) and piece_count
 * piece digests (task.h). Call before the commit, from one thread. -ENOMEM. */
int dfd_replica_set_digests(struct dfd_replica *rep, const char *content_sha256,
                            const char *id_basis, const uint8_t (*piece_shas)[DFC_SHA256_LEN],
                            struct dfc_error *err);

/* Reads back n bytes at at of the spool (pieces already written). Thread-safe. */
int dfd_replica_pread(struct dfd_replica *rep, uint64_t at, void *buf, size_t n,
                      struct dfc_error *err);

/* Whether piece number is written. Thread-safe. */
bool dfd_replica_has_piece(struct dfd_replica *rep, uint32_t number);

/* The pieces still missing, ascending, into out (at most max); returns their count. */
size_t dfd_replica_missing(struct dfd_replica *rep, uint32_t *out, size_t max);

/* Commits: every piece written (else -EINVAL "piece N is missing"), fsync, rename into
 * content/, then the row (id_origin PEER, owner the daemon's euid, finished now) in one
 * transaction. Frees rep, also on failure (leaving nothing). *ret_task as dfd_import_commit().
 * When the task appeared meanwhile (an import of the same id), the stored one is returned if
 * its geometry and piece digests are the same, else -EEXIST. */
int dfd_replica_commit(struct dfd_replica *rep, int64_t now_ns, struct dfd_task_meta *ret_task,
                       struct dfc_error *err);

/* Discards a replica and frees it. NULL is fine. */
void dfd_replica_abort(struct dfd_replica *rep);

/* ---- sharing: serving a replica's verified pieces while it downloads (sharing.c) ----
 *
 * Ownership and locks: the storage keeps a registry (in memory only) of shared replicas under
 * a lock of its own, taken before a replica's lock. Readers (dfd_storage_open_piece,
 * dfd_storage_piece_state) copy what they need under it and hold no pointer to a replica, so
 * one may be committed or aborted at any moment. A replica leaves the registry at commit only
 * after its row is visible (a reader finds the task in one or the other, never neither) and at
 * abort before its spool is closed. Nothing survives a restart: open empties tmp/, so a
 * half-written spool is never served. */

/* From now on rep's written pieces may be served (dfd_storage_open_piece) and reported
 * (dfd_storage_piece_state). The caller promises that every piece it marks written
 * (dfd_replica_write_piece, dfd_replica_finish_piece with ok) was verified before: against the
 * importer's record (docs/integrity.md), never only by a CRC the parent sent. Idempotent. */
void dfd_replica_share(struct dfd_replica *rep);

/* The one lookup of the Vortex server: piece number of task id, from a shared replica when one
 * is downloading id (only a piece marked written; its offset and length by the geometry, its
 * CRC as digest "crc32:<decimal>" as in the rows), else from the committed task's row. *ret_fd
 * is the caller's to close: the content file, or a dup of the spool's fd (readable even once
 * the spool is renamed or unlinked). -ENOENT "piece <id>-<n> not found" when neither holds it. */
int dfd_storage_open_piece(struct dfd_storage *s, const char *id, uint32_t number, int *ret_fd,
                           struct dfd_piece_meta *ret_pm, struct dfc_error *err);

enum dfd_piece_source {
    DFD_PIECES_ABSENT = 0,  /* neither stored nor downloading in a shared replica */
    DFD_PIECES_IN_PROGRESS, /* a shared replica: written holds its written pieces */
    DFD_PIECES_COMMITTED,   /* a stored task: every piece */
};

/* What a SyncPersistentCachePieces stream reports of a task. written (piece_count bits, bit i
 * in byte i / 8) is owned: free with dfd_piece_state_done(); NULL when ABSENT. */
struct dfd_piece_state {
    enum dfd_piece_source source;
    uint64_t gen; /* the registry's generation before the look: dfd_storage_wait_pieces() */
    uint64_t piece_length;
    uint64_t content_length;
    uint32_t piece_count;
    uint8_t *written;
};

/* Fills *ret for task id (a shared replica first, then the rows, as dfd_storage_open_piece).
 * An absent task is 0 with source ABSENT. -ENOMEM, or a metadata error. */
int dfd_storage_piece_state(struct dfd_storage *s, const char *id, struct dfd_piece_state *ret,
                            struct dfc_error *err);
void dfd_piece_state_done(struct dfd_piece_state *st);

/* Waits until the registry's generation moves past gen (ret->gen of dfd_storage_piece_state):
 * any shared replica was shared, wrote a piece, was committed or went away; then 0. -ETIMEDOUT
 * once deadline_mono_ns (dfc_mono_ns() clock) passes. One generation for the whole store, so a
 * waiter may wake for another task's piece: look again, then wait with the new generation. */
int dfd_storage_wait_pieces(struct dfd_storage *s, uint64_t gen, int64_t deadline_mono_ns);

/* Looks a task up; -ENOENT when absent. *ret is filled; free with dfd_task_meta_done(). */
int dfd_storage_get(struct dfd_storage *s, const char *id, struct dfd_task_meta *ret,
                    struct dfc_error *err);

/* All tasks, least recently used (oldest updated_at) first; *ret_n may be 0. The caller owns
 * the array: free with dfd_task_meta_list_free(). */
int dfd_storage_list(struct dfd_storage *s, struct dfd_task_meta **ret, size_t *ret_n,
                     struct dfc_error *err);

/* The pieces of a task in order; *ret_n may be 0 (an absent task has none). The caller owns
 * the array: free with free(). */
int dfd_storage_pieces(struct dfd_storage *s, const char *id, struct dfd_piece_meta **ret,
                       size_t *ret_n, struct dfc_error *err);

/* Marks a task used now (bumps updated_at, which orders eviction). */
int dfd_storage_touch(struct dfd_storage *s, const char *id, int64_t now_ns, struct dfc_error *err);

/* Sets a task's persistent flag and marks it used now. -ENOENT when absent. */
int dfd_storage_set_persistent(struct dfd_storage *s, const char *id, bool persistent,
                               int64_t now_ns, struct dfc_error *err);

/* The registration of a copy committed with register_later (task.h), in steps: the peer id
 * it will register under recorded with the mark kept (expect ""), then the mark cleared once
 * the scheduler has it (expect = peer_id). Only while the row is still t's import, marked,
 * with the peer id expect (a copy deleted or imported again meanwhile is left alone): 1 when
 * it did, 0 when not. Nothing else of the row changes (not updated_at: no use). */
int dfd_storage_set_registration(struct dfd_storage *s, const struct dfd_task_meta *t,
                                 const char *expect, const char *peer_id, bool later,
                                 struct dfc_error *err);

/* Opens a task's content read-only (the fd stays valid if the task is deleted meanwhile).
 * The caller owns *ret_fd and closes it. */
int dfd_storage_open_content(struct dfd_storage *s, const char *id, int *ret_fd,
                             struct dfc_error *err);

/* Reads piece pm of task id from its content fd (dfd_storage_open_content) into buf, which
 * the caller owns and which holds pm->length bytes, and checks the piece's CRC-32 against
 * the stored digest: DFC_E_DATA_LOSS when the content is cut short or the CRC differs. Every
 * reader of pieces (the export, the P2P piece server) goes through this call. */
int dfd_storage_read_piece(int content_fd, const char *id, const struct dfd_piece_meta *pm,
                           void *buf, struct dfc_error *err);

/* Digests the whole content behind content_fd with algo ("crc32", "sha256", "sha512", as
 * dfd_validate_digest() accepts) and compares it with want (hex, or decimal for crc32):
 * DFC_E_DATA_LOSS on a mismatch, naming both values. */
int dfd_storage_verify_digest(int content_fd, const char *algo, const char *want,
                              struct dfc_error *err);

/* Deletes a task: its row first (it vanishes), then its content. 0 when absent. Works on a
 * full disk (the reserve, then the WAL's own space). Runs under the commit lock, so an import
 * of the same id cannot land between the row and the content. */
int dfd_storage_delete(struct dfd_storage *s, const char *id, struct dfc_error *err);

/* dfd_storage_delete_task() for GC (TTL expiry, eviction): a task a pin holds (pins.h) is
 * left, *ret_deleted false; checked under the commit lock, which pinning holds too. */
int dfd_storage_evict_task(struct dfd_storage *s, struct dfd_task_meta *t, bool same_use,
                           bool *ret_deleted, struct dfc_error *err);

/* Deletes t only while the stored task is still the one t was read from: the same import and,
 * with same_use, not used or changed since (GC decides from a list that may have gone stale).
 * *ret_deleted tells whether it deleted; a task that is gone or was imported again is left.
 * On a delete t->peer_id becomes the deleted row's: the rejoin pass (daemon/rejoin.h) may have
 * registered the copy since t was read, and that is the peer to withdraw. */
int dfd_storage_delete_task(struct dfd_storage *s, struct dfd_task_meta *t, bool same_use,
                            bool *ret_deleted, struct dfc_error *err);

/* Re-creates metadata/reserve when it is missing and twice its size is free (GC calls this on
 * every pass; open and delete do too). */
void dfd_storage_ensure_reserve(struct dfd_storage *s);

/* Bytes used by content files (for disk-pressure accounting with a configured threshold). */
int dfd_storage_content_bytes(struct dfd_storage *s, uint64_t *ret, struct dfc_error *err);

/* 0 when the store's directories (the root, content, tmp and metadata) may be written by
 * the daemon (faccessat W_OK|X_OK: a read-only mount gives -EROFS, an immutable directory
 * -EPERM); else the first refusal, err naming the directory. No lock, no I/O but the checks:
 * a readiness probe calls it. */
int dfd_storage_check_writable(struct dfd_storage *s, struct dfc_error *err);

/* What the store holds, by the persistent flag, in one aggregate query. */
struct dfd_storage_totals {
    uint64_t tasks[2]; /* [0] not persistent, [1] persistent */
    uint64_t bytes[2]; /* their content lengths */
};
int dfd_storage_totals(struct dfd_storage *s, struct dfd_storage_totals *ret,
                       struct dfc_error *err);

#endif /* DFD_STORAGE_STORAGE_H */
