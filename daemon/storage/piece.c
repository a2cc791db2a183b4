/*
 * piece.c - piece geometry, CRC-32 piece digests and the SHA-256 task id.
 */
#include "piece.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

uint64_t dfd_piece_length_auto(uint64_t content_length) {
    uint64_t want = content_length / DFD_MAX_PIECE_COUNT;
    uint64_t pl = 1;
    while (pl < want && pl < DFC_PIECE_LENGTH_MAX) {
        pl <<= 1;
    }
    if (pl < DFC_PIECE_LENGTH_MIN) {
        return DFC_PIECE_LENGTH_MIN;
    }
    return pl > DFC_PIECE_LENGTH_MAX ? DFC_PIECE_LENGTH_MAX : pl;
}

uint32_t dfd_piece_count(uint64_t content_length, uint64_t piece_length) {
    return (uint32_t)((content_length + piece_length - 1) / piece_length);
}

int dfd_task_id_from_string(const char *content, char out[DFD_TASK_ID_LEN + 1]) {
    return dfc_sha256_hex(content, strlen(content), out);
}

bool dfd_task_id_valid(const char *id) {
    size_t n = 0;
    for (; id[n]; n++) {
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f'))) {
            return false;
        }
    }
    return n == DFD_TASK_ID_LEN;
}

int dfd_digester_init(struct dfd_digester *d, const struct dfd_digest_params *p) {
    memset(d, 0, sizeof(*d));
    d->p = *p;
    d->unit = p->piece_length ? p->piece_length : p->unit ? p->unit : DFC_PIECE_LENGTH_MIN;
    return dfc_sha256c_init(&d->sha) < 0 ? -ENOMEM : 0;
}

static int push_unit(struct dfd_digester *d) {
    if (d->n_units == d->cap_units) {
        size_t cap = d->cap_units ? d->cap_units * 2 : 64;
        uint32_t *u = realloc(d->unit_crcs, cap * sizeof(*u));
        if (u == NULL) {
            return -ENOMEM;
        }
        d->unit_crcs = u;
        d->cap_units = cap;
    }
    d->unit_crcs[d->n_units++] = d->crc;
    d->crc = 0;
    d->in_unit = 0;
    return 0;
}

/* The SHA stage at a unit end: keeps the chaining value. */
static void push_state(struct dfd_digester *d) {
    if (d->states_bad) {
        return;
    }
    if (d->n_states == d->cap_states) {
        size_t cap = d->cap_states ? d->cap_states * 2 : 64;
        uint8_t(*st)[DFC_SHA256_LEN] = realloc(d->states, cap * sizeof(*st));
        if (st == NULL) {
            d->states_bad = true;
            return;
        }
        d->states = st;
        d->cap_states = cap;
    }
    if (dfc_sha256c_state(&d->sha, d->states[d->n_states]) < 0) {
        d->states_bad = true;
        return;
    }
    d->n_states++;
}

int dfd_digester_update(struct dfd_digester *d, const void *buf, size_t len) {
    dfd_digester_update_sha(d, buf, len);
    return dfd_digester_update_crc(d, buf, len);
}

void dfd_digester_update_sha(struct dfd_digester *d, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        uint64_t room = d->unit - d->sha_total % d->unit;
        size_t k = len < room ? len : (size_t)room;
        dfc_sha256c_update(&d->sha, p, k);
        d->sha_total += k;
        p += k;
        len -= k;
        if (d->sha_total % d->unit == 0) {
            push_state(d);
        }
    }
}

int dfd_digester_update_crc(struct dfd_digester *d, const void *buf, size_t len) {
    const uint8_t *p = buf;
    d->total += len;
    while (len > 0) {
        uint64_t room = d->unit - d->in_unit;
        size_t k = len < room ? len : (size_t)room;
        d->crc = dfc_crc32_update(d->crc, p, k);
        d->in_unit += k;
        p += k;
        len -= k;
        if (d->in_unit == d->unit) {
            int r = push_unit(d);
            if (r < 0) {
                return r;
            }
        }
    }
    return 0;
}

int dfd_digester_finish(struct dfd_digester *d, struct dfd_digest_result *ret) {
    memset(ret, 0, sizeof(*ret));
    if (d->in_unit > 0) {
        int r = push_unit(d);
        if (r < 0) {
            return r;
        }
    }
    ret->content_length = d->total;
    ret->piece_length = d->p.piece_length ? d->p.piece_length : dfd_piece_length_auto(d->total);
    ret->piece_count = dfd_piece_count(d->total, ret->piece_length);
    if (ret->piece_length < d->unit || ret->piece_length % d->unit != 0) {
        return -EINVAL; /* a unit fixed from a length the content did not have */
    }
    ret->piece_crcs = calloc(ret->piece_count ? ret->piece_count : 1, sizeof(uint32_t));
    if (ret->piece_crcs == NULL) {
        return -ENOMEM;
    }
    /* The piece digests: the chaining values at the piece ends (unit ends, per units each),
     * the last piece's the content's SHA-256 (filled below). */
    uint64_t per_unit = ret->piece_length / d->unit;
    if (!d->states_bad && ret->piece_count > 0 &&
        d->n_states >= (uint64_t)(ret->piece_count - 1) * per_unit) {
        ret->piece_shas = calloc(ret->piece_count, DFC_SHA256_LEN);
        if (ret->piece_shas == NULL) {
            return -ENOMEM;
        }
        for (uint32_t i = 0; i + 1 < ret->piece_count; i++) {
            memcpy(ret->piece_shas[i], d->states[(i + 1) * per_unit - 1], DFC_SHA256_LEN);
        }
    }
    /* Fold units into pieces: pieces are whole multiples of units, but for the last. */
    uint64_t per = ret->piece_length / d->unit;
    for (size_t u = 0; u < d->n_units; u++) {
        size_t piece = u / per;
        uint64_t unit_len = d->unit;
        if (u == d->n_units - 1 && d->total % d->unit != 0) {
            unit_len = d->total % d->unit;
        }
        ret->piece_crcs[piece] = u % per == 0
                                     ? d->unit_crcs[u]
                                     : (uint32_t)crc32_combine(ret->piece_crcs[piece],
                                                               d->unit_crcs[u], (z_off_t)unit_len);
    }
    if (d->p.hash_content) {
        struct dfc_sha256c idh;
        if (dfc_sha256c_copy(&idh, &d->sha) < 0) {
            return -ENOMEM;
        }
        dfd_task_id_finish(&idh, d->p.tag, d->p.application, d->p.piece_length, ret->task_id);
        dfc_sha256c_done(&idh);
    }
    dfc_sha256c_final(&d->sha, ret->content_sha256);
    if (ret->piece_shas != NULL) {
        memcpy(ret->piece_shas[ret->piece_count - 1], ret->content_sha256, DFC_SHA256_LEN);
    }
    return 0;
}

void dfd_task_id_finish(struct dfc_sha256c *h, const char *tag, const char *application,
                        uint64_t piece_length, char out[DFD_TASK_ID_LEN + 1]) {
    /* Dragonfly's id: content, tag, application, the requested piece length in decimal (only
     * when the request gave one), then "PERSISTENT_CACHE"; no separators. */
    if (tag != NULL) {
        dfc_sha256c_update(h, tag, strlen(tag));
    }
    if (application != NULL) {
        dfc_sha256c_update(h, application, strlen(application));
    }
    if (piece_length != 0) {
        char pl[24];
        int n = snprintf(pl, sizeof(pl), "%" PRIu64, piece_length);
        dfc_sha256c_update(h, pl, (size_t)n);
    }
    dfc_sha256c_update(h, "PERSISTENT_CACHE", 16);
    uint8_t md[DFC_SHA256_LEN];
    dfc_sha256c_final(h, md);
    dfc_sha256_to_hex(md, out);
}

void dfd_digester_done(struct dfd_digester *d) {
    dfc_sha256c_done(&d->sha);
    free(d->unit_crcs);
    d->unit_crcs = NULL;
    free(d->states);
    d->states = NULL;
}

void dfd_digest_result_done(struct dfd_digest_result *r) {
    free(r->piece_crcs);
    r->piece_crcs = NULL;
    free(r->piece_shas);
    r->piece_shas = NULL;
}
