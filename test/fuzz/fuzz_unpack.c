/*
 * Fuzz target: the RPC layer's message decoder, fed what a peer could send. The input is cut
 * into gRPC slices at points the fuzzer chooses (the hand-written bulk path walks fields across
 * slice boundaries), then decoded as a streamed-import request and as an export response, whose
 * bytes fields take the bulk path, and as an upload request, whose string fields the NUL check
 * walks. Whatever decodes must re-encode exactly as protobuf-c's own decoding of the same bytes
 * in one piece does, and what protobuf-c refuses must be refused (the decoder may refuse more:
 * a string holding a NUL byte). Decoded again with the bytes left in the slices (a
 * dfc_rpc_bulk_in), the verdict must be the same and, the bytes gathered, so must the message.
 */
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/import.pb-c.h"
#include "dfc/rpc_server.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "bulk_in.h"
#include "rpc_internal.h"

static grpc_byte_buffer *split(const uint8_t *data, size_t size) {
    /* The first byte chooses the slice length (1..256 bytes); the rest is the message. */
    size_t cut = size > 0 ? (size_t)data[0] + 1 : 1;
    const uint8_t *p = size > 0 ? data + 1 : data;
    size_t n = size > 0 ? size - 1 : 0;
    size_t count = n / cut + 1;
    grpc_slice *slices = calloc(count, sizeof(*slices));
    size_t k = 0;
    for (size_t off = 0; off < n || k == 0; off += cut) {
        size_t len = n - off < cut ? n - off : cut;
        slices[k++] = grpc_slice_from_copied_buffer((const char *)p + off, len);
        if (len == 0) {
            break;
        }
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(slices, k);
    for (size_t i = 0; i < k; i++) {
        grpc_slice_unref(slices[i]);
    }
    free(slices);
    return bb;
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *ret_len) {
    *ret_len = protobuf_c_message_get_packed_size(m);
    uint8_t *out = malloc(*ret_len ? *ret_len : 1);
    protobuf_c_message_pack(m, out);
    return out;
}

/* Aborts unless m re-encodes exactly as want does. */
static void same_as(const ProtobufCMessage *m, const ProtobufCMessage *want) {
    size_t n, want_n;
    uint8_t *out = packed(m, &n), *want_out = packed(want, &want_n);
    if (n != want_n || memcmp(out, want_out, n) != 0) {
        abort(); /* decoded differently from protobuf-c */
    }
    free(out);
    free(want_out);
}

static void decode(grpc_byte_buffer *bb, const uint8_t *wire, size_t len,
                   const ProtobufCMessageDescriptor *desc) {
    ProtobufCMessage *m = NULL;
    int r = dfc__rpc_unpack(bb, desc, &m, NULL);
    ProtobufCMessage *want = protobuf_c_message_unpack(desc, NULL, len, wire);
    if (r == 0) {
        if (want == NULL) {
            abort(); /* decoded what protobuf-c refuses */
        }
        same_as(m, want);
        protobuf_c_message_free_unpacked(m, NULL);
    } else if (r != -EINVAL && want != NULL) {
        abort(); /* refused what protobuf-c decodes, and not for a NUL in a string */
    }
    /* Without the copy: the same verdict, and once the bytes left in the slices are gathered
     * into their field, the same message. */
    struct dfc_rpc_bulk_in *in = NULL;
    if (dfc__rpc_unpack_in(grpc_byte_buffer_copy(bb), desc, &m, &in, NULL) != r) {
        abort();
    }
    if (r == 0) {
        if (in != NULL && bulk_in_fill(m, in) < 0) {
            abort(); /* the bulk_in does not describe the field it left empty */
        }
        same_as(m, want);
        protobuf_c_message_free_unpacked(m, NULL);
    } else if (in != NULL) {
        abort();
    }
    dfc_rpc_bulk_in_free(in);
    if (want != NULL) {
        protobuf_c_message_free_unpacked(want, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    if (!inited) {
        grpc_init();
        dfc__rpc_bulk_min = 16; /* reach the hand-written bulk decoder with small inputs */
        inited = 1;
    }
    grpc_byte_buffer *bb = split(data, size);
    const uint8_t *wire = size > 0 ? data + 1 : data;
    size_t len = size > 0 ? size - 1 : 0;
    decode(bb, wire, len, &dfc__dfdaemon__v1__import_persistent_cache_task_request__descriptor);
    decode(bb, wire, len, &dfdaemon__v2__download_persistent_cache_task_response__descriptor);
    decode(bb, wire, len, &dfdaemon__v2__upload_persistent_cache_task_request__descriptor);
    grpc_byte_buffer_destroy(bb);
    return 0;
}
