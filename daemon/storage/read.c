/*
 * read.c - reading stored content back: a piece checked against its CRC-32, and the whole
 * content against a caller's digest (see storage.h for the contract).
 *
 * Both read a content fd from dfd_storage_open_content() with pread(2), so one fd serves
 * concurrent readers and stays valid when the task is deleted meanwhile. A piece is read
 * straight into the caller's buffer (the export hands its bulk buffer, so the bytes are
 * copied once, disk to buffer, and sent from there).
 */
#include "storage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dfc/digest.h"
#include "dfc/units.h"
#include "storage_internal.h"

int dfd_storage_read_piece(int content_fd, const char *id, const struct dfd_piece_meta *pm,
                           void *buf, struct dfc_error *err) {
    uint8_t *data = buf;
    int r = 0;
    for (uint64_t got = 0; got < pm->length && r == 0;) {
        ssize_t k = pread(content_fd, data + got, pm->length - got, (off_t)(pm->offset + got));
        if (k <= 0) {
            r = k < 0 ? dfc_error_errno(err, -errno, "read piece %u", pm->number)
                      : dfc_error_set(err, DFC_E_DATA_LOSS, "task %s: piece %u is cut short", id,
                                      pm->number);
        }
        got += k > 0 ? (uint64_t)k : 0;
    }
    if (r < 0) {
        return r;
    }
    char have[DFC_CRC32_DIGEST_MAX];
    dfc_crc32_format(dfc_crc32_update(0, data, pm->length), have);
    if (strcmp(have, pm->digest) != 0) {
        return dfc_error_set(err, DFC_E_DATA_LOSS,
                             "task %s: piece %u is corrupt on disk (%s, stored %s)", id, pm->number,
                             have, pm->digest);
    }
    return 0;
}

int dfd_storage_verify_digest(int content_fd, const char *algo, const char *want,
                              struct dfc_error *err) {
    uint8_t *buf = malloc(DFD_IO_CHUNK);
    if (buf == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    struct dfc_evp h = {0};
    bool crc = strcmp(algo, "crc32") == 0;
    uint32_t c = 0;
    int r = crc ? 0 : dfc_evp_init(&h, algo);
    off_t off = 0;
    while (r == 0) {
        ssize_t n = pread(content_fd, buf, DFD_IO_CHUNK, off);
        if (n < 0) {
            r = dfc_error_errno(err, -errno, "read the content");
            break;
        }
        if (n == 0) {
            break;
        }
        if (crc) {
            c = dfc_crc32_update(c, buf, (size_t)n);
        } else {
            dfc_evp_update(&h, buf, (size_t)n);
        }
        off += n;
    }
    free(buf);
    if (r < 0) {
        dfc_evp_done(&h);
        return r;
    }
    char have[DFC_EVP_HEX_MAX];
    bool match;
    if (crc) {
        uint64_t w = 0;
        snprintf(have, sizeof(have), "%u", c);
        match = dfc_parse_u64(want, &w) == 0 && w == c; /* "crc32:0042" is 42 */
    } else {
        dfc_evp_final_hex(&h, have);
        dfc_evp_done(&h);
        match = strcasecmp(have, want) == 0;
    }
    if (!match) {
        return dfc_error_set(err, DFC_E_DATA_LOSS, "digest mismatch: want %s:%s, content has %s:%s",
                             algo, want, algo, have);
    }
    return 0;
}
