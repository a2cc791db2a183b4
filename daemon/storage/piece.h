/*
 * piece.h - persistent-cache piece geometry, piece digests and the task id, exactly as
 * Dragonfly's dfdaemon (the Rust client) computes them (docs/dragonfly-compat.md, sections
 * "Persistent-cache task id" and "Piece geometry and digests").
 *
 * Pure functions plus one incremental digester that a single read pass feeds: it computes the
 * SHA-256 of the content (and from it the task id), every piece's CRC-32 and every piece's
 * SHA-256 digest (docs/integrity.md) at once, even when the piece length is only known at the
 * end (a stream of unknown length): CRCs are then kept per 4 MiB unit and combined into pieces
 * afterwards, since an automatic piece length is always a power-of-two multiple of 4 MiB.
 *
 * A piece's SHA-256 digest is the content hash's chaining value at the piece's end (struct
 * dfc_sha256c), the last piece's the content's SHA-256 itself: the same pass gives all of
 * them, and a downloader checks a piece alone by resuming from the digest before it. The
 * chaining value is kept at every unit end, so whatever the piece length turns out to be its
 * ends are among them. A piece length that is not a multiple of 64 bytes has no chaining
 * values at its ends: such a task gets no piece digests.
 */
#ifndef DFD_STORAGE_PIECE_H
#define DFD_STORAGE_PIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/digest.h"
#include "dfc/dragonfly.h" /* DFC_PIECE_LENGTH_MIN, DFC_PIECE_LENGTH_MAX */

#define DFD_MAX_PIECE_COUNT 500 /* the automatic length aims at this many pieces */
#define DFD_TASK_ID_LEN     DFC_SHA256_HEX_LEN

/* next_power_of_two(content_length / 500) clamped to [4 MiB, 64 MiB]. */
uint64_t dfd_piece_length_auto(uint64_t content_length);

/* ceil(content_length / piece_length); 0 for empty content. */
uint32_t dfd_piece_count(uint64_t content_length, uint64_t piece_length);

/* The task id when content_for_calculating_task_id is given: SHA-256 hex of the string. */
int dfd_task_id_from_string(const char *content, char out[DFD_TASK_ID_LEN + 1]);

/* True for 64 lowercase hex digits. */
bool dfd_task_id_valid(const char *id);

/* What the digester needs to know up front. */
struct dfd_digest_params {
    bool hash_content; /* false when content_for_calculating_task_id is given: no task id */
    const char *tag;   /* NULL when absent; "" contributes nothing */
    const char *application;
    uint64_t piece_length; /* 0: automatic, fixed at the end from the byte count */
    uint64_t unit;         /* CRC granularity when automatic; 0 = 4 MiB. Must divide every
                              automatic piece length (a power of two up to 4 MiB does), or be
                              the automatic length of the exact content length. */
};

struct dfd_digester {
    struct dfd_digest_params p;
    struct dfc_sha256c sha;            /* the content (the SHA stage) */
    uint64_t sha_total;                /* bytes the SHA stage has seen */
    uint8_t (*states)[DFC_SHA256_LEN]; /* the chaining value at each unit end (SHA stage) */
    size_t n_states, cap_states;
    bool states_bad;     /* a unit end inside a block, or out of memory: no piece digests */
    uint64_t unit;       /* CRC granularity: piece_length, or 4 MiB when automatic */
    uint64_t total;      /* bytes seen */
    uint64_t in_unit;    /* bytes of the current unit seen */
    uint32_t crc;        /* CRC of the current unit */
    uint32_t *unit_crcs; /* one per finished unit */
    size_t n_units, cap_units;
};

/* Result of dfd_digester_finish(); free with dfd_digest_result_done(). */
struct dfd_digest_result {
    char task_id[DFD_TASK_ID_LEN + 1]; /* empty when hash_content was false */
    uint64_t content_length;
    uint64_t piece_length;
    uint32_t piece_count;
    uint32_t *piece_crcs; /* piece_count entries */
    uint8_t content_sha256[DFC_SHA256_LEN];
    /* piece_count entries (see above); NULL when the piece length allows none */
    uint8_t (*piece_shas)[DFC_SHA256_LEN];
};

int dfd_digester_init(struct dfd_digester *d, const struct dfd_digest_params *p);
/* Feeds bytes to both digests. -ENOMEM only. */
int dfd_digester_update(struct dfd_digester *d, const void *buf, size_t len);

/* The two halves of dfd_digester_update(), for running them on two threads over the same
 * bytes at the same time: they touch disjoint state. Each must see every byte once. */
void dfd_digester_update_sha(struct dfd_digester *d, const void *buf, size_t len);
int dfd_digester_update_crc(struct dfd_digester *d, const void *buf, size_t len);
/* Finishes the id and the piece CRCs. The digester must still be released with _done(). */
int dfd_digester_finish(struct dfd_digester *d, struct dfd_digest_result *ret);
void dfd_digester_done(struct dfd_digester *d);

/* Appends the id suffix (tag, application, the requested piece length when not 0,
 * "PERSISTENT_CACHE") to h, a SHA-256 over the content, and finishes it as the task id. */
void dfd_task_id_finish(struct dfc_sha256c *h, const char *tag, const char *application,
                        uint64_t piece_length, char out[DFD_TASK_ID_LEN + 1]);
void dfd_digest_result_done(struct dfd_digest_result *r);

#endif /* DFD_STORAGE_PIECE_H */
