/*
 * verify.h - what a P2P download checks its bytes against (docs/integrity.md): the importers'
 * digest records from the scheduler (never what the parent serving the bytes says), and a
 * running SHA-256 over the content as its pieces land.
 *
 * Records: dfd_verify_usable() tells whether a record fits the task's geometry. A record's
 * piece digests are the content hash's chaining values at the piece ends, the last one the
 * content's SHA-256 (docs/integrity.md): a piece is checked alone by resuming a SHA-256 from
 * the record's digest before it (dfd_verify_resume) and hashing its bytes (dfd_verify_end), the
 * same work as hashing it once, and a chain of pieces checked from the first to the last is the
 * content whose SHA-256 the record holds. dfd_verify_content() is the end check.
 *
 * The prefix hash, for a download without a record: a thread that hashes the content in
 * order, reading each piece back from the replica's spool (page cache) once it is written, so
 * the content's SHA-256 is done when the last piece lands (pieces that arrive ahead wait for
 * the prefix to reach them); it keeps each piece's chaining value for the replica's row.
 * Ownership: the hash borrows the replica and the digest array, which must outlive
 * dfd_prefix_hash_free(). Thread-safe: any worker may mark pieces.
 */
#ifndef DFD_P2P_VERIFY_H
#define DFD_P2P_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/digest.h"
#include "dfc/error.h"
#include "dfc/integrity.pb-c.h"
#include "storage/storage.h"

typedef Dfc__Scheduler__V1__PersistentCacheTaskDigests dfd_digest_record;

/* Whether rec describes content_length bytes in pieces of piece_length (a multiple of 64):
 * the same geometry, a 32-byte content digest, one 32-byte digest per piece, the last one the
 * content's. */
bool dfd_verify_usable(const dfd_digest_record *rec, uint64_t piece_length,
                       uint64_t content_length);

/* Sets c (initialised) to where piece number starts in rec's chain. */
int dfd_verify_resume(struct dfc_sha256c *c, const dfd_digest_record *rec, uint32_t number,
                      uint64_t piece_length);

/* Whether c, resumed for piece number of rec and fed all of its bytes, ends at rec's digest of
 * it. For the last piece c is finished: the caller copies it first when it needs the
 * unfinished content hash. */
bool dfd_verify_end(struct dfc_sha256c *c, const dfd_digest_record *rec, uint32_t number);

/* The end check of content (*content, a SHA-256 over all of it, left untouched): with a
 * record whose id_basis hashes to task_id (and does not end in "PERSISTENT_CACHE", which
 * could be a content-derived id's pre-image), the content's SHA-256 must be the record's;
 * otherwise task_id must be the content-derived id with tag and application (NULL: absent),
 * with or without piece_length in it. 0 with content_hex filled, DFC_E_DATA_LOSS naming what
 * failed, -ENOMEM. *ret_basis (may be NULL) is the record's id_basis when it decided, else
 * NULL. */
int dfd_verify_content(const struct dfc_sha256c *content, const char *task_id, const char *tag,
                       const char *application, uint64_t piece_length, const dfd_digest_record *rec,
                       char content_hex[DFC_SHA256_HEX_LEN + 1], const char **ret_basis,
                       struct dfc_error *err);

struct dfd_prefix_hash;

/* Starts hashing rep's content of content_length bytes in pieces of piece_length, keeping the
 * chaining value at each piece end but the last in states[number] (when piece_length is a
 * multiple of 64). -ENOMEM; without a thread the hashing happens in dfd_prefix_hash_finish(). */
int dfd_prefix_hash_new(struct dfd_replica *rep, uint64_t piece_length, uint64_t content_length,
                        uint8_t (*states)[DFC_SHA256_LEN], struct dfd_prefix_hash **ret,
                        struct dfc_error *err);

/* Piece number is written and checked: the prefix may hash it. */
void dfd_prefix_hash_piece(struct dfd_prefix_hash *h, uint32_t number);

/* Waits until every piece is hashed (all must have been marked) and makes *out (uninitialised;
 * dfc_sha256c_done it) a copy of the content's SHA-256 context. A read error of the spool. */
int dfd_prefix_hash_finish(struct dfd_prefix_hash *h, struct dfc_sha256c *out,
                           struct dfc_error *err);

/* Stops the thread and frees. NULL is fine. */
void dfd_prefix_hash_free(struct dfd_prefix_hash *h);

#endif /* DFD_P2P_VERIFY_H */
