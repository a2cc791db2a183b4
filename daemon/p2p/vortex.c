/*
 * vortex.c - the Vortex framing (docs/dragonfly-compat.md, "Vortex"): pure encoders and
 * decoders over caller-owned buffers. Decoders read untrusted bytes through a bounded cursor,
 * so no length a peer sends is ever added to a position before it is compared with what is
 * left.
 */
#include "p2p/vortex.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "storage/piece.h" /* dfd_task_id_valid */

/* Fixed-size parts of the metadata: number, offset, length, digest_len (24), parent_id_len
 * (4), traffic_type, cost_secs, created_at (17). */
#define METADATA_FIXED_LEN (4 + 8 + 8 + 4 + 4 + 1 + 8 + 8)

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_u64(uint8_t *p, uint64_t v) {
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t get_u64(const uint8_t *p) {
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

void dfd_vortex_header_encode(const struct dfd_vortex_header *h,
                              uint8_t out[DFD_VORTEX_HEADER_LEN]) {
    out[0] = h->packet_id;
    out[1] = h->tag;
    put_u32(out + 2, h->length);
}

void dfd_vortex_header_decode(const uint8_t in[DFD_VORTEX_HEADER_LEN],
                              struct dfd_vortex_header *h) {
    h->packet_id = in[0];
    h->tag = in[1];
    h->length = get_u32(in + 2);
}

int dfd_vortex_request_encode(uint8_t packet_id, const char *task_id, uint32_t number,
                              uint8_t out[DFD_VORTEX_REQUEST_PACKET_LEN], struct dfc_error *err) {
    if (task_id == NULL || !dfd_task_id_valid(task_id)) {
        return dfc_error_set(err, -EINVAL,
                             "vortex request: task_id must be %d lowercase hex digits",
                             DFD_VORTEX_TASK_ID_LEN);
    }
    struct dfd_vortex_header h = {
        .packet_id = packet_id,
        .tag = DFD_VORTEX_TAG_DOWNLOAD_PERSISTENT_CACHE_PIECE,
        .length = DFD_VORTEX_REQUEST_LEN,
    };
    dfd_vortex_header_encode(&h, out);
    memcpy(out + DFD_VORTEX_HEADER_LEN, task_id, DFD_VORTEX_TASK_ID_LEN);
    put_u32(out + DFD_VORTEX_HEADER_LEN + DFD_VORTEX_TASK_ID_LEN, number);
    return 0;
}

int dfd_vortex_request_decode(const uint8_t *value, size_t len,
                              char task_id[DFD_VORTEX_TASK_ID_LEN + 1], uint32_t *ret_number,
                              struct dfc_error *err) {
    if (len != DFD_VORTEX_REQUEST_LEN) {
        return dfc_error_set(err, -EPROTO, "vortex request: length is %zu, must be %d", len,
                             DFD_VORTEX_REQUEST_LEN);
    }
    memcpy(task_id, value, DFD_VORTEX_TASK_ID_LEN);
    task_id[DFD_VORTEX_TASK_ID_LEN] = '\0';
    if (!dfd_task_id_valid(task_id)) {
        task_id[0] = '\0';
        return dfc_error_set(err, -EINVAL, "vortex request: task_id is not %d lowercase hex digits",
                             DFD_VORTEX_TASK_ID_LEN);
    }
    *ret_number = get_u32(value + DFD_VORTEX_TASK_ID_LEN);
    return 0;
}

int dfd_vortex_content_encode(uint8_t packet_id, const struct dfd_vortex_piece *p, uint8_t *out,
                              size_t size, size_t *ret_len, struct dfc_error *err) {
    if ((p->digest_len > 0 && p->digest == NULL) ||
        (p->parent_id_len > 0 && p->parent_id == NULL)) {
        return dfc_error_set(err, -EINVAL, "vortex content: digest or parent_id is NULL");
    }
    /* Each part is at most DFD_VORTEX_METADATA_MAX before they are added: no overflow. */
    if (p->digest_len > DFD_VORTEX_METADATA_MAX || p->parent_id_len > DFD_VORTEX_METADATA_MAX ||
        METADATA_FIXED_LEN + (size_t)p->digest_len + p->parent_id_len > DFD_VORTEX_METADATA_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "vortex content: metadata (digest %u, parent_id %u bytes) exceeds %d",
                             p->digest_len, p->parent_id_len, DFD_VORTEX_METADATA_MAX);
    }
    size_t m = METADATA_FIXED_LEN + (size_t)p->digest_len + p->parent_id_len;
    size_t total = DFD_VORTEX_HEADER_LEN + 4 + m;
    if (size < total) {
        return dfc_error_set(err, -ENOBUFS, "vortex content: needs %zu bytes, buffer has %zu",
                             total, size);
    }
    struct dfd_vortex_header h = {
        .packet_id = packet_id,
        .tag = DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT,
        .length = (uint32_t)(4 + m),
    };
    dfd_vortex_header_encode(&h, out);
    uint8_t *q = out + DFD_VORTEX_HEADER_LEN;
    put_u32(q, (uint32_t)m);
    q += 4;
    put_u32(q, p->number);
    put_u64(q + 4, p->offset);
    put_u64(q + 12, p->length);
    put_u32(q + 20, p->digest_len);
    q += 24;
    if (p->digest_len > 0) {
        memcpy(q, p->digest, p->digest_len);
    }
    q += p->digest_len;
    put_u32(q, p->parent_id_len);
    q += 4;
    if (p->parent_id_len > 0) {
        memcpy(q, p->parent_id, p->parent_id_len);
    }
    q += p->parent_id_len;
    q[0] = p->traffic_type;
    put_u64(q + 1, p->cost_secs);
    put_u64(q + 9, (uint64_t)p->created_at);
    *ret_len = total;
    return 0;
}

/* A bounded reader over untrusted bytes. */
struct cursor {
    const uint8_t *p;
    size_t left;
};

static bool take(struct cursor *c, size_t n, const uint8_t **ret) {
    if (n > c->left) {
        return false;
    }
    *ret = c->p;
    c->p += n;
    c->left -= n;
    return true;
}

int dfd_vortex_content_decode(const uint8_t *value, size_t len, struct dfd_vortex_piece *ret,
                              struct dfc_error *err) {
    if (len < 4) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: %zu bytes, too short for "
                             "metadata_length",
                             len);
    }
    uint32_t m = get_u32(value);
    if (m > DFD_VORTEX_METADATA_MAX) {
        return dfc_error_set(err, -EPROTO, "vortex content: metadata_length %u exceeds %d", m,
                             DFD_VORTEX_METADATA_MAX);
    }
    if (m != len - 4) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: metadata_length %u but the value holds %zu bytes", m,
                             len - 4);
    }
    struct cursor c = {.p = value + 4, .left = m};
    const uint8_t *f;
    struct dfd_vortex_piece r = {0};
    if (!take(&c, 24, &f)) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: metadata of %u bytes is too short for "
                             "number, offset, length and digest_len",
                             m);
    }
    r.number = get_u32(f);
    r.offset = get_u64(f + 4);
    r.length = get_u64(f + 12);
    r.digest_len = get_u32(f + 20);
    if (!take(&c, r.digest_len, &f)) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: digest_len %u exceeds the %zu bytes "
                             "left",
                             r.digest_len, c.left);
    }
    r.digest = (const char *)f;
    if (!take(&c, 4, &f)) {
        return dfc_error_set(err, -EPROTO, "vortex content: metadata ends before parent_id_len");
    }
    r.parent_id_len = get_u32(f);
    if (!take(&c, r.parent_id_len, &f)) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: parent_id_len %u exceeds the %zu "
                             "bytes left",
                             r.parent_id_len, c.left);
    }
    r.parent_id = (const char *)f;
    if (!take(&c, 17, &f)) {
        return dfc_error_set(err, -EPROTO,
                             "vortex content: metadata ends before traffic_type, "
                             "cost_secs and created_at");
    }
    r.traffic_type = f[0];
    r.cost_secs = get_u64(f + 1);
    r.created_at = (int64_t)get_u64(f + 9);
    if (c.left != 0) {
        return dfc_error_set(err, -EPROTO, "vortex content: %zu trailing bytes after created_at",
                             c.left);
    }
    *ret = r;
    return 0;
}

int dfd_vortex_error_encode(uint8_t packet_id, uint8_t code, const char *msg, uint8_t *out,
                            size_t size, size_t *ret_len, struct dfc_error *err) {
    if (size < DFD_VORTEX_HEADER_LEN + 1) {
        return dfc_error_set(err, -ENOBUFS, "vortex error: needs %d bytes, buffer has %zu",
                             DFD_VORTEX_HEADER_LEN + 1, size);
    }
    size_t room = size - DFD_VORTEX_HEADER_LEN - 1;
    if (room > DFD_VORTEX_ERROR_MAX) {
        room = DFD_VORTEX_ERROR_MAX;
    }
    size_t n = 0;
    while (msg != NULL && msg[n] != '\0' && n < room) {
        n++;
    }
    if (msg != NULL && msg[n] != '\0') {
        /* Cut before a UTF-8 continuation byte, so that the message stays valid UTF-8. */
        while (n > 0 && ((uint8_t)msg[n] & 0xC0) == 0x80) {
            n--;
        }
    }
    struct dfd_vortex_header h = {
        .packet_id = packet_id,
        .tag = DFD_VORTEX_TAG_ERROR,
        .length = (uint32_t)(1 + n),
    };
    dfd_vortex_header_encode(&h, out);
    out[DFD_VORTEX_HEADER_LEN] = code;
    if (n > 0) {
        memcpy(out + DFD_VORTEX_HEADER_LEN + 1, msg, n);
    }
    *ret_len = DFD_VORTEX_HEADER_LEN + 1 + n;
    return 0;
}

int dfd_vortex_error_decode(const uint8_t *value, size_t len, uint8_t *ret_code,
                            const char **ret_msg, size_t *ret_msg_len, struct dfc_error *err) {
    if (len < 1) {
        return dfc_error_set(err, -EPROTO, "vortex error: empty value, no code");
    }
    if (len - 1 > DFD_VORTEX_ERROR_MAX) {
        return dfc_error_set(err, -EPROTO, "vortex error: message of %zu bytes exceeds %d", len - 1,
                             DFD_VORTEX_ERROR_MAX);
    }
    *ret_code = value[0];
    *ret_msg = (const char *)value + 1;
    *ret_msg_len = len - 1;
    return 0;
}
