/*
 * rpc_common.c - gRPC start-up, packing messages into byte buffers (large bytes fields by
 * reference) and deadline arithmetic, shared by the server and client halves of the RPC layer.
 * Decoding is in rpc_unpack.c.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <grpc/slice_buffer.h>
#include <grpc/support/time.h>

#include "dfc/rpc_bulk.h"
#include "dfc/rpc_server.h" /* dfc_rpc_tune_process */
#include "rpc_internal.h"

static pthread_once_t tune_once = PTHREAD_ONCE_INIT;
static atomic_int tune_traffic = -1; /* the first caller's enum dfc_rpc_traffic */

/* Why these thresholds: docs/dragonfly-compat.md, "gRPC core". */
static void tune_malloc(void) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    /* One arena: MiB-sized buffers are freed on other threads than the ones that allocated
     * them, which with per-thread arenas both strands memory and slows frees. Measured with
     * dfdaemon streaming 3 GiB in and out: peak RSS 103 -> 62 MB, import 5.8 -> 4.2 s, export
     * 8.0 -> 4.4 s. The scheduler's messages are small and its 20 handler threads allocate
     * all the time: with one arena they queue on its lock (glibc's lll_lock_wait and its wake
     * were 6% of its samples under load, before the thread switches they cause), and with
     * per-thread arenas it served 7-9% more pairs in hack/bench/scheduler.sh (faster in 6 of 7
     * alternating runs) at the same peak RSS (24 MiB). */
    if (atomic_load(&tune_traffic) == DFC_RPC_TRAFFIC_BULK) {
        mallopt(M_ARENA_MAX, 1);
    }
}

void dfc_rpc_tune_process(enum dfc_rpc_traffic traffic) {
    /* The choice is made before the once, so whoever runs tune_malloc sees the winner's. */
    int unset = -1;
    atomic_compare_exchange_strong(&tune_traffic, &unset, (int)traffic);
    pthread_once(&tune_once, tune_malloc);
}

void dfc__rpc_init(void) {
    dfc_rpc_tune_process(DFC_RPC_TRAFFIC_BULK);
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

/* ---- zero-copy packing ----
 *
 * protobuf_c_message_pack_to_buffer() hands every bytes field to the buffer's append() as the
 * caller's own pointer. The packer below references appends that fall inside the bulk slice
 * (grpc_slice_sub) and copies the rest, the small header bytes, into one small slice that is
 * cut around the references. A first pass with a counting append sizes that small slice.
 */

struct dfc_rpc_bulk {
    grpc_slice slice;
};

struct dfc_rpc_bulk *dfc_rpc_bulk_new(size_t cap) {
    struct dfc_rpc_bulk *b = malloc(sizeof(*b));
    if (b != NULL) {
        b->slice = grpc_slice_malloc(cap);
    }
    return b;
}

uint8_t *dfc_rpc_bulk_data(struct dfc_rpc_bulk *b) {
    return GRPC_SLICE_START_PTR(b->slice);
}

size_t dfc_rpc_bulk_cap(const struct dfc_rpc_bulk *b) {
    return GRPC_SLICE_LENGTH(b->slice);
}

void dfc_rpc_bulk_free(struct dfc_rpc_bulk *b) {
    if (b != NULL) {
        grpc_slice_unref(b->slice);
        free(b);
    }
}

struct bulk_packer {
    ProtobufCBuffer base;
    const uint8_t *lo, *hi; /* the bulk memory */
    grpc_slice bulk;
    size_t head_len; /* bytes outside the bulk (the counting pass) */
    grpc_slice head; /* they are copied here (the second pass) */
    size_t head_used, head_cut;
    grpc_slice_buffer out;
};

static bool in_bulk(const struct bulk_packer *p, const uint8_t *data, size_t len) {
    uintptr_t d = (uintptr_t)data, lo = (uintptr_t)p->lo, hi = (uintptr_t)p->hi;
    return len > 0 && d >= lo && d <= hi && len <= hi - d;
}

static void count_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data) {
    struct bulk_packer *p = (struct bulk_packer *)buf;
    if (!in_bulk(p, data, len)) {
        p->head_len += len;
    }
}

static void cut_head(struct bulk_packer *p) {
    if (p->head_used > p->head_cut) {
        grpc_slice_buffer_add(&p->out, grpc_slice_sub(p->head, p->head_cut, p->head_used));
        p->head_cut = p->head_used;
    }
}

static void slice_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data) {
    struct bulk_packer *p = (struct bulk_packer *)buf;
    if (in_bulk(p, data, len)) {
        cut_head(p);
        size_t at = (size_t)(data - p->lo);
        grpc_slice_buffer_add(&p->out, grpc_slice_sub(p->bulk, at, at + len));
        return;
    }
    /* The counting pass sized head exactly, so this always fits. */
    memcpy(GRPC_SLICE_START_PTR(p->head) + p->head_used, data, len);
    p->head_used += len;
}

grpc_byte_buffer *dfc__rpc_pack_bulk(const ProtobufCMessage *msg, struct dfc_rpc_bulk *bulk) {
    struct bulk_packer p = {.base = {count_append}};
    p.lo = GRPC_SLICE_START_PTR(bulk->slice);
    p.hi = p.lo + GRPC_SLICE_LENGTH(bulk->slice);
    p.bulk = bulk->slice;
    protobuf_c_message_pack_to_buffer(msg, &p.base);

    p.base.append = slice_append;
    p.head = grpc_slice_malloc(p.head_len);
    grpc_slice_buffer_init(&p.out);
    protobuf_c_message_pack_to_buffer(msg, &p.base);
    cut_head(&p);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(p.out.slices, p.out.count);
    grpc_slice_buffer_destroy(&p.out);
    grpc_slice_unref(p.head);
    return bb;
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

int dfc__rpc_md_get(const grpc_metadata_array *md, const char *key, char *buf, size_t size) {
    size_t klen = strlen(key);
    for (size_t i = 0; i < md->count; i++) {
        const grpc_metadata *m = &md->metadata[i];
        if (GRPC_SLICE_LENGTH(m->key) == klen &&
            memcmp(GRPC_SLICE_START_PTR(m->key), key, klen) == 0) {
            size_t n = GRPC_SLICE_LENGTH(m->value);
            if (n + 1 > size) {
                return -ENAMETOOLONG;
            }
            memcpy(buf, GRPC_SLICE_START_PTR(m->value), n);
            buf[n] = '\0';
            return (int)n;
        }
    }
    return -ENOENT;
}
