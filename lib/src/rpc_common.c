/*
 * rpc_common.c - gRPC start-up, byte-buffer codec and deadline arithmetic shared by the server
 * and client halves of the RPC layer.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

#include "rpc_internal.h"

static pthread_once_t tune_once = PTHREAD_ONCE_INIT;

static void tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void dfc__rpc_init(void) {
    pthread_once(&tune_once, tune_malloc);
    grpc_init();
}

grpc_byte_buffer *dfc__rpc_pack(const ProtobufCMessage *msg) {
    size_t n = protobuf_c_message_get_packed_size(msg);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

int dfc__rpc_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                    ProtobufCMessage **ret_msg) {
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb)) {
        return -EBADMSG;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    if (m == NULL) {
        return -EBADMSG;
    }
    *ret_msg = m;
    return 0;
}

gpr_timespec dfc__rpc_deadline(int64_t timeout_ms) {
    if (timeout_ms <= 0) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

int64_t dfc__rpc_remaining_ms(gpr_timespec deadline) {
    if (gpr_time_cmp(deadline, gpr_inf_future(deadline.clock_type)) == 0) {
        return INT64_MAX;
    }
    gpr_timespec now = gpr_now(deadline.clock_type);
    gpr_timespec left = gpr_time_sub(deadline, now);
    return left.tv_sec * 1000 + left.tv_nsec / 1000000;
}

char *dfc__rpc_slice_strdup(grpc_slice s) {
    size_t n = GRPC_SLICE_LENGTH(s);
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, GRPC_SLICE_START_PTR(s), n);
        p[n] = '\0';
    }
    return p;
}
