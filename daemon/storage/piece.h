/*
 * piece.h - persistent-cache piece geometry, piece digests and the task id, exactly as
 * Dragonfly's dfdaemon (the Rust client) computes them (docs/dragonfly-compat.md, sections
 * "Persistent-cache task id" and "Piece geometry and digests").
 *
 * Pure functions plus one incremental digester that a single read pass feeds: it computes the
 * SHA-256 task id and every piece's CRC-32 at once, even when the piece length is only known
 * at the end (a stream of unknown length): CRCs are then kept per 4 MiB unit and combined
 * into pieces afterwards, since an automatic piece length is always a power-of-two multiple
 * of 4 MiB.
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
    bool hash_content; /* false when content_for_calculating_task_id is given */
    const char *tag;   /* NULL when absent; "" contributes nothing */
    const char *application;
    uint64_t piece_length; /* 0: automatic, fixed at the end from the byte count */
    uint64_t unit;         /* CRC granularity when automatic; 0 = 4 MiB. Must divide every
                              automatic piece length (a power of two up to 4 MiB does). */
};

struct dfd_digester {
    struct dfd_digest_params p;
    struct dfc_sha256 sha;
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
void dfd_digest_result_done(struct dfd_digest_result *r);

#endif /* DFD_STORAGE_PIECE_H */
