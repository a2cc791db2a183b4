/*
 * task.h - the task and piece records the storage engine hands out (storage.h). How they are
 * stored (SQLite, metadata.h) is private to daemon/storage.
 *
 * Ownership: dfd_task_meta's tag, application and id_basis are heap strings owned by the struct
 * (free with dfd_task_meta_done); task lists are arrays the caller frees with
 * dfd_task_meta_list_free, piece lists with free().
 */
#ifndef DFD_STORAGE_TASK_H
#define DFD_STORAGE_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/digest.h"
#include "piece.h"

/* Longest peer id kept, NUL included ("<ip>-<hostname>-<uuid>", as dfc_peer_id makes it). */
#define DFD_PEER_ID_MAX 320

/* Where a task id came from. Rows made before this was recorded are UNKNOWN and are treated
 * as not content-derived. Stored as the text 'unknown', 'content', 'string'. */
enum dfd_id_origin {
    DFD_ID_ORIGIN_UNKNOWN = 0,
    DFD_ID_ORIGIN_CONTENT, /* SHA-256 over the content (and tag, application, piece length) */
    DFD_ID_ORIGIN_STRING,  /* SHA-256 of content_for_calculating_task_id */
    DFD_ID_ORIGIN_PEER,    /* a replica fetched from peers under the scheduler's id ('peer') */
};

struct dfd_task_meta {
    char id[DFD_TASK_ID_LEN + 1];
    bool persistent;
    uint64_t replica_count;
    char *tag;         /* NULL when the import had none */
    char *application; /* NULL when the import had none */
    uint64_t piece_length;
    uint64_t content_length;
    uint32_t piece_count;
    int64_t ttl_ns;
    int64_t created_at_ns; /* wall clock, ns since the epoch */
    int64_t updated_at_ns;
    int64_t finished_at_ns;
    bool hard_linked;   /* content shares the importer's inode */
    uint32_t owner_uid; /* the importing uid; 0 for rows made before owners were recorded */
    enum dfd_id_origin id_origin;
    /* The peer id this copy is registered under at the scheduler ("" when standalone or for rows
     * made before it was recorded): DeletePersistentCachePeer names it when GC or `dfcache rm`
     * drops the copy. */
    char peer_id[DFD_PEER_ID_MAX];
    /* Kept local because no scheduler took its registration (away, or this host not yet
     * announced): the rejoin pass (daemon/rejoin.h) registers it and clears the mark. */
    bool register_later;
    /* The SHA-256 of the content, 64 hex digits ("" for rows made before it was recorded) and
     * content_for_calculating_task_id (NULL when the id is not from one, or unknown): what
     * the importer records with the scheduler (docs/integrity.md). Owned like tag. */
    char content_sha256[DFC_SHA256_HEX_LEN + 1];
    char *id_basis;
};

struct dfd_piece_meta {
    uint32_t number;
    uint64_t offset;
    uint64_t length;
    char digest[DFC_CRC32_DIGEST_MAX];
    bool has_sha256; /* false for rows made before piece digests were recorded */
    /* The piece's SHA-256 digest: the content hash's chaining value at its end, the last
     * piece's the content's SHA-256 (piece.h, docs/integrity.md). */
    uint8_t sha256[DFC_SHA256_LEN];
};

void dfd_task_meta_done(struct dfd_task_meta *t);
void dfd_task_meta_list_free(struct dfd_task_meta *list, size_t n);

#endif /* DFD_STORAGE_TASK_H */
