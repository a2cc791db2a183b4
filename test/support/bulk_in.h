/*
 * bulk_in.h - for the decoder's tests and fuzz target: turns a message received with a
 * dfc_rpc_bulk_in (rpc_bulk.h) back into an ordinary one, so that it can be re-encoded and
 * compared with protobuf-c's own decoding of the same bytes.
 *
 * Ownership: the gathered bytes become the message's (freed with it); in stays the caller's.
 */
#ifndef DFC_TEST_BULK_IN_H
#define DFC_TEST_BULK_IN_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "dfc/rpc_bulk.h"

/* The bytes field the decoder left empty (a length and no data), at any depth; NULL if none. */
static inline ProtobufCBinaryData *bulk_in_hole(ProtobufCMessage *m) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char *at = (char *)m + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED ||
            ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
             *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)) {
            continue; /* the decoder never leaves these empty; an unset oneof member is not there */
        }
        if (f->type == PROTOBUF_C_TYPE_BYTES) {
            ProtobufCBinaryData *bd = (ProtobufCBinaryData *)at;
            if (bd->data == NULL && bd->len > 0) {
                return bd;
            }
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE && *(ProtobufCMessage **)at != NULL) {
            ProtobufCBinaryData *bd = bulk_in_hole(*(ProtobufCMessage **)at);
            if (bd != NULL) {
                return bd;
            }
        }
    }
    return NULL;
}

/* Fills the hole that in describes with a copy of its bytes. 0; -1 when in and the message
 * disagree (no hole, or iovecs that do not add up to its length). */
static inline int bulk_in_fill(ProtobufCMessage *m, const struct dfc_rpc_bulk_in *in) {
    ProtobufCBinaryData *bd = bulk_in_hole(m);
    if (bd == NULL) {
        return -1;
    }
    struct iovec one;
    const struct iovec *iov;
    int n = dfc_rpc_bulk_in_iov(in, bd, &one, &iov);
    if (iov == &one) {
        return -1; /* in does not hold the hole */
    }
    uint8_t *data = malloc(bd->len);
    size_t got = 0;
    for (int i = 0; data != NULL && i < n; i++) {
        if (got + iov[i].iov_len > bd->len) {
            free(data);
            return -1;
        }
        memcpy(data + got, iov[i].iov_base, iov[i].iov_len);
        got += iov[i].iov_len;
    }
    if (data == NULL || got != bd->len) {
        free(data);
        return -1;
    }
    bd->data = data;
    return 0;
}

#endif /* DFC_TEST_BULK_IN_H */
