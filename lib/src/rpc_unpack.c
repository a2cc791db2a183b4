/*
 * rpc_unpack.c - decoding received byte buffers into protobuf-c messages, with large bytes
 * fields taken straight from gRPC's slices (one copy, or none with dfc_rpc_bulk_in).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

#include "dfc/error.h"
#include "dfc/rpc_bulk.h"
#include "rpc_internal.h"

/* ---- unpacking ----
 *
 * protobuf-c decodes from one contiguous buffer and copies every bytes field out of it, so a
 * 4 MiB piece arriving in ~540 gRPC slices would be copied twice (gather, then unpack). For
 * messages of dfc__rpc_bulk_min or more, the fields are walked across the slices instead: the
 * first large bytes field, at the top or inside large singular message fields (a piece's
 * content in an export response is two levels down), is copied once, straight into the
 * malloc'd buffer that the message will own. Everything else (a few bytes) is gathered, with
 * the length of each enclosing message rewritten to what is left of it, and decoded by
 * protobuf-c as usual. The result is the same message, freed the same way (the default
 * allocator is malloc/free). With dfc__rpc_unpack_in() that one copy is not made either: the
 * field's bytes are described as iovecs over the slices, and the byte buffer lives on in the
 * dfc_rpc_bulk_in that holds them (rpc_bulk.h).
 */

size_t dfc__rpc_bulk_min = (size_t)256 << 10;

/* A read position across a byte buffer's slices; pos counts bytes consumed. */
struct cursor {
    const grpc_slice *slices;
    size_t n, i, off, pos;
};

static bool cur_byte(struct cursor *c, uint8_t *ret) {
    while (c->i < c->n && c->off >= GRPC_SLICE_LENGTH(c->slices[c->i])) {
        c->i++;
        c->off = 0;
    }
    if (c->i >= c->n) {
        return false;
    }
    *ret = GRPC_SLICE_START_PTR(c->slices[c->i])[c->off++];
    c->pos++;
    return true;
}

/* Takes the next len bytes: copies them to dst, or records them as iovecs at iov[*n...] (at
 * most one per slice), or (both NULL) skips them. */
static bool cur_take(struct cursor *c, size_t len, uint8_t *dst, struct iovec *iov, int *n) {
    while (len > 0) {
        if (c->i >= c->n) {
            return false;
        }
        const uint8_t *at = GRPC_SLICE_START_PTR(c->slices[c->i]) + c->off;
        size_t avail = GRPC_SLICE_LENGTH(c->slices[c->i]) - c->off;
        size_t k = avail < len ? avail : len;
        if (dst != NULL) {
            memcpy(dst, at, k);
            dst += k;
        } else if (iov != NULL && k > 0) {
            iov[(*n)++] = (struct iovec){(void *)at, k}; /* not const in libc; only ever read */
        }
        len -= k;
        c->off += k;
        c->pos += k;
        if (c->off == GRPC_SLICE_LENGTH(c->slices[c->i])) {
            c->i++;
            c->off = 0;
        }
    }
    return true;
}

/* Copies len bytes to dst (or skips them when dst is NULL). */
static bool cur_copy(struct cursor *c, uint8_t *dst, size_t len) {
    return cur_take(c, len, dst, NULL, NULL);
}

static bool cur_varint(struct cursor *c, uint64_t *ret) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b;
        if (!cur_byte(c, &b)) {
            return false;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

/* How deep the bulk field may sit: export responses carry it at depth 2. */
#define BULK_MAX_DEPTH 4

/* Where the bulk field sits: its key starts at key_at, its payload spans [data_at, data_end);
 * it is nested in depth message fields, outer[0] outermost, each with its length varint at
 * len_at and its payload spanning [data_at, data_end). */
struct bulk_span {
    const ProtobufCFieldDescriptor *field;
    size_t key_at, data_at, data_end;
    unsigned depth;
    struct {
        const ProtobufCFieldDescriptor *field;
        size_t len_at, data_at, data_end;
    } outer[BULK_MAX_DEPTH];
};

/* Pass 1: walks the fields of one message, [c.pos, end), without copying. Returns 1 with
 * *ret_span set when the message holds exactly one occurrence of a large, non-repeated bytes
 * field, at this level or (depth < BULK_MAX_DEPTH) inside exactly one occurrence of a large,
 * non-repeated message field; 0 when it has none, or the field or a message holding it repeats
 * or shares its oneof with another member on the wire (protobuf-c's merge and last-one-wins
 * rules then apply to the whole message); -EBADMSG when the wire is broken. */
static int find_bulk(struct cursor c, size_t end, const ProtobufCMessageDescriptor *desc,
                     unsigned depth, struct bulk_span *ret_span) {
    struct bulk_span span = {0};
    const ProtobufCFieldDescriptor *mine = NULL; /* the bulk field or the message holding it */
    /* The length-delimited fields seen, and the oneofs (by quantifier offset) that fields other
     * than mine belong to. */
    const ProtobufCFieldDescriptor *seen[16];
    unsigned oneofs[16], n_seen = 0, n_oneofs = 0;
    while (c.pos < end) {
        size_t key_at = c.pos;
        uint64_t key, len = 0;
        if (!cur_varint(&c, &key)) {
            return -EBADMSG;
        }
        const ProtobufCFieldDescriptor *f =
            (key >> 3) <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3))
                : NULL;
        bool chosen = false;
        switch (key & 7) {
        case 0:
            if (!cur_varint(&c, &len)) {
                return -EBADMSG;
            }
            break;
        case 1:
        case 5:
            if (!cur_copy(&c, NULL, (key & 7) == 1 ? 8 : 4)) {
                return -EBADMSG;
            }
            break;
        case 2: {
            size_t len_at = c.pos;
            if (!cur_varint(&c, &len) || len > end - c.pos) {
                return -EBADMSG;
            }
            if (f != NULL && f == mine) {
                return 0; /* it repeats: protobuf-c's merge rules apply */
            }
            bool big = mine == NULL && f != NULL && f->label != PROTOBUF_C_LABEL_REPEATED &&
                       len >= dfc__rpc_bulk_min;
            for (unsigned i = 0; big && i < n_seen; i++) {
                if (seen[i] == f) {
                    return 0; /* it came before, small: protobuf-c's merge rules apply */
                }
            }
            if (big && f->type == PROTOBUF_C_TYPE_BYTES) {
                span = (struct bulk_span){f, key_at, c.pos, c.pos + len, depth, {{0}}};
                chosen = true;
            } else if (big && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < BULK_MAX_DEPTH) {
                struct bulk_span inner;
                int r = find_bulk(c, c.pos + len, f->descriptor, depth + 1, &inner);
                if (r < 0) {
                    return r;
                }
                if (r == 1) {
                    span = inner;
                    span.outer[depth].field = f;
                    span.outer[depth].len_at = len_at;
                    span.outer[depth].data_at = c.pos;
                    span.outer[depth].data_end = c.pos + len;
                    chosen = true;
                }
            }
            if (chosen) {
                mine = f;
            } else if (f != NULL) {
                if (n_seen == sizeof(seen) / sizeof(seen[0])) {
                    return 0;
                }
                seen[n_seen++] = f;
            }
            if (!cur_copy(&c, NULL, len)) {
                return -EBADMSG;
            }
            break;
        }
        default: /* groups do not exist in proto3 */
            return -EBADMSG;
        }
        if (!chosen && f != NULL && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
            if (n_oneofs == sizeof(oneofs) / sizeof(oneofs[0])) {
                return 0;
            }
            oneofs[n_oneofs++] = f->quantifier_offset;
        }
    }
    if (c.pos != end) {
        return -EBADMSG;
    }
    if (mine == NULL) {
        return 0;
    }
    for (unsigned i = 0; (mine->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && i < n_oneofs; i++) {
        if (oneofs[i] == mine->quantifier_offset) {
            return 0;
        }
    }
    *ret_span = span;
    return 1;
}

/* ---- strings with a NUL byte ----
 *
 * protobuf-c hands a string field over as a C string, so "/tmp/a\0/etc/shadow" on the wire
 * becomes "/tmp/a" in the message: a path, id or tag that silently means something else. The
 * wire is walked once more with the descriptor, into sub-messages, repeated fields and map
 * entries (which are messages), and any string field holding a 0x00 byte fails the decode.
 * It runs on wire bytes that protobuf-c has just decoded, so the framing is known good; it
 * still checks every length, as the fuzz target feeds it whatever decodes.
 */

#define NUL_MAX_DEPTH 32

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

/* Returns 1 with path (dotted field names) filled when a string field holds a NUL, else 0. */
static int find_nul(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                    int depth, char *path, size_t size) {
    while (p < end) {
        uint64_t key, len;
        if (!wire_varint(&p, end, &key)) {
            return 0;
        }
        switch (key & 7) {
        case 0:
            if (!wire_varint(&p, end, &len)) {
                return 0;
            }
            continue;
        case 1:
        case 5: {
            size_t n = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < n) {
                return 0;
            }
            p += n;
            continue;
        }
        case 2:
            break;
        default:
            return 0;
        }
        if (!wire_varint(&p, end, &len) || len > (uint64_t)(end - p)) {
            return 0;
        }
        const uint8_t *data = p;
        p += len;
        const ProtobufCFieldDescriptor *f =
            (key >> 3) <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3))
                : NULL;
        if (f == NULL) {
            continue;
        }
        if (f->type == PROTOBUF_C_TYPE_STRING && memchr(data, 0, (size_t)len) != NULL) {
            snprintf(path, size, "%s", f->name);
            return 1;
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth < NUL_MAX_DEPTH &&
            find_nul(data, data + len, f->descriptor, depth + 1, path, size)) {
            char inner[256];
            snprintf(inner, sizeof(inner), "%s", path);
            snprintf(path, size, "%s.%s", f->name, inner);
            return 1;
        }
    }
    return 0;
}

int dfc__rpc_find_nul(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                      char *path, size_t size) {
    return find_nul(data, data + len, desc, 0, path, size);
}

/* Fails a decoded message whose wire (data, len) has a string field holding a NUL. */
static int check_strings(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                         ProtobufCMessage *m, struct dfc_error *err) {
    char path[256];
    if (dfc__rpc_find_nul(data, len, desc, path, sizeof(path))) {
        protobuf_c_message_free_unpacked(m, NULL);
        return dfc_error_set(err, -EINVAL, "field `%s` contains a NUL byte", path);
    }
    return 0;
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) {
        p[n++] = (uint8_t)(v | 0x80);
    }
    p[n++] = (uint8_t)v;
    return n;
}

struct dfc_rpc_bulk_in {
    grpc_byte_buffer *bb;             /* owned: the slices the iovecs point into */
    const ProtobufCBinaryData *field; /* the field whose bytes these are (identity only) */
    int n;
    struct iovec iov[]; /* n of them, at most one per slice */
};

/* Returns 1 when decoded, 0 to fall back to the plain path, or a negative code. With ret_in,
 * the bulk field's bytes stay in bb's slices: *ret_in holds them and takes bb over. */
static int unpack_bulk(grpc_byte_buffer *bb, size_t total, const ProtobufCMessageDescriptor *desc,
                       ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                       struct dfc_error *err) {
    struct cursor c = {bb->data.raw.slice_buffer.slices, bb->data.raw.slice_buffer.count, 0, 0, 0};
    struct bulk_span span;
    int r = find_bulk(c, total, desc, 0, &span);
    if (r <= 0) {
        return r < 0 ? dfc_error_set(err, r, "cannot decode %s", desc->name) : 0;
    }
    /* Pass 2: the rest is the wire without the bulk field's key, length and payload, each
     * enclosing message's length shrunk by what it lost (its varint may shrink too). */
    size_t removed = span.data_end - span.key_at;
    uint64_t new_len[BULK_MAX_DEPTH];
    for (unsigned i = span.depth; i-- > 0;) {
        new_len[i] = span.outer[i].data_end - span.outer[i].data_at - removed;
        removed += span.outer[i].data_at - span.outer[i].len_at - varint_size(new_len[i]);
    }
    size_t data_len = span.data_end - span.data_at;
    size_t rest_len = total - removed;
    uint8_t *rest = malloc(rest_len ? rest_len : 1);
    uint8_t *data = NULL;
    struct dfc_rpc_bulk_in *in = NULL;
    if (ret_in != NULL) {
        in = malloc(sizeof(*in) + (c.n + 1) * sizeof(struct iovec));
    } else {
        data = malloc(data_len);
    }
    if (rest == NULL || (data == NULL && in == NULL)) {
        free(rest);
        free(data);
        free(in);
        return dfc_error_set(err, -ENOMEM, "out of memory decoding %s", desc->name);
    }
    if (in != NULL) {
        in->n = 0;
    }
    uint8_t *w = rest;
    bool ok = true;
    for (unsigned i = 0; ok && i < span.depth; i++) {
        size_t n = span.outer[i].len_at - c.pos; /* up to this message's length */
        ok = cur_copy(&c, w, n) && cur_copy(&c, NULL, span.outer[i].data_at - span.outer[i].len_at);
        w += n;
        w += ok ? put_varint(w, new_len[i]) : 0;
    }
    size_t n = span.key_at - c.pos;
    ok =
        ok && cur_copy(&c, w, n) && cur_copy(&c, NULL, span.data_at - span.key_at) &&
        (in != NULL ? cur_take(&c, data_len, NULL, in->iov, &in->n) : cur_copy(&c, data, data_len));
    w += ok ? n : 0;
    n = total - span.data_end;
    ok = ok && cur_copy(&c, w, n);
    ok = ok && (size_t)(w + n - rest) == rest_len;
    ProtobufCMessage *m = ok ? protobuf_c_message_unpack(desc, NULL, rest_len, rest) : NULL;
    /* The bulk field is bytes: every string field is in the rest. */
    r = m != NULL ? check_strings(rest, rest_len, desc, m, err) : 0;
    free(rest);
    if (m == NULL || r < 0) { /* check_strings freed m */
        free(data);
        free(in);
        return m == NULL ? dfc_error_set(err, -EBADMSG, "cannot decode %s", desc->name) : r;
    }
    /* Down to the message holding the bulk field: protobuf-c made each enclosing one (an empty
     * message on the wire is still a message) and set its oneof case. */
    ProtobufCMessage *holder = m;
    for (unsigned i = 0; holder != NULL && i < span.depth; i++) {
        holder = *(ProtobufCMessage **)((char *)holder + span.outer[i].field->offset);
    }
    if (holder == NULL) {
        protobuf_c_message_free_unpacked(m, NULL);
        free(data);
        free(in);
        return dfc_error_set(err, -EBADMSG, "cannot decode %s", desc->name);
    }
    const ProtobufCFieldDescriptor *f = span.field;
    ProtobufCBinaryData *bd = (ProtobufCBinaryData *)((char *)holder + f->offset);
    bd->data = data; /* NULL with in: the bytes are in's */
    bd->len = data_len;
    if (in != NULL) {
        in->bb = bb;
        in->field = bd;
        *ret_in = in;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        *(uint32_t *)((char *)holder + f->quantifier_offset) = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        *(protobuf_c_boolean *)((char *)holder + f->quantifier_offset) = 1;
    }
    *ret_msg = m;
    return 1;
}

static int unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                  ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                  struct dfc_error *err) {
    size_t total = grpc_byte_buffer_length(bb);
    if (total >= dfc__rpc_bulk_min && bb->type == GRPC_BB_RAW &&
        bb->data.raw.compression == GRPC_COMPRESS_NONE) {
        int r = unpack_bulk(bb, total, desc, ret_msg, ret_in, err);
        if (r != 0) {
            return r < 0 ? r : 0;
        }
    }
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb)) {
        return dfc_error_set(err, -EBADMSG, "cannot decode %s", desc->name);
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    int r = m != NULL ? check_strings(GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), desc, m, err)
                      : dfc_error_set(err, -EBADMSG, "cannot decode %s", desc->name);
    grpc_slice_unref(s);
    if (r < 0) {
        return r;
    }
    *ret_msg = m;
    return 0;
}

int dfc__rpc_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                    ProtobufCMessage **ret_msg, struct dfc_error *err) {
    return unpack(bb, desc, ret_msg, NULL, err);
}

int dfc__rpc_unpack_in(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                       ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                       struct dfc_error *err) {
    *ret_in = NULL;
    int r = unpack(bb, desc, ret_msg, ret_in, err);
    if (*ret_in == NULL) { /* decoded with copies, or not at all: bb is still the caller's */
        grpc_byte_buffer_destroy(bb);
    }
    return r;
}

int dfc_rpc_bulk_in_iov(const struct dfc_rpc_bulk_in *in, const ProtobufCBinaryData *field,
                        struct iovec *one, const struct iovec **ret_iov) {
    if (in != NULL && in->field == field) {
        *ret_iov = in->iov;
        return in->n;
    }
    *one = (struct iovec){field->data, field->len};
    *ret_iov = one;
    return field->len > 0 ? 1 : 0;
}

void dfc_rpc_bulk_in_free(struct dfc_rpc_bulk_in *in) {
    if (in != NULL) {
        grpc_byte_buffer_destroy(in->bb);
        free(in);
    }
}
