/*
 * rpc_internal.h - what rpc_server.c and rpc_client.c share: gRPC start-up, message
 * encoding to and from byte buffers, and deadlines. Private to lib/.
 */
#ifndef DFC_RPC_INTERNAL_H
#define DFC_RPC_INTERNAL_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

/* grpc_init(), preceded once per process by dfc_rpc_tune_process(DFC_RPC_TRAFFIC_BULK) unless
 * main() chose first. Pair with grpc_shutdown(). */
void dfc__rpc_init(void);

/* Packs msg into a new byte buffer (one copy). NULL when out of memory. */
grpc_byte_buffer *dfc__rpc_pack(const ProtobufCMessage *msg);

struct dfc_rpc_bulk;

/* Packs msg so that bytes fields lying inside bulk are referenced, not copied. NULL when out
 * of memory. */
grpc_byte_buffer *dfc__rpc_pack_bulk(const ProtobufCMessage *msg, struct dfc_rpc_bulk *bulk);

/* Messages of this many bytes or more take the bulk path of dfc__rpc_unpack() (256 KiB). A
 * variable only so that the fuzz target can drive that path with small inputs. */
extern size_t dfc__rpc_bulk_min;

struct dfc_error;

/* Unpacks bb into a new message of type desc: -EBADMSG when it does not decode ("cannot
 * decode <type>"), -EINVAL when a string field, at any depth, holds a NUL byte ("field
 * `start.tag` contains a NUL byte"), which protobuf-c would silently cut short. */
int dfc__rpc_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                    ProtobufCMessage **ret_msg, struct dfc_error *err);

struct dfc_rpc_bulk_in;

/* As dfc__rpc_unpack(), but the large bytes field of a large message may stay in bb's slices:
 * then *ret_in holds its bytes and bb (rpc_bulk.h), else *ret_in is NULL. Takes bb over
 * either way, also on failure. */
int dfc__rpc_unpack_in(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                       ProtobufCMessage **ret_msg, struct dfc_rpc_bulk_in **ret_in,
                       struct dfc_error *err);

/* Looks for a string field holding a NUL byte in the wire bytes of a desc message. Returns 1
 * with its dotted field path in path, else 0 (also for broken framing, left to the decoder). */
int dfc__rpc_find_nul(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc,
                      char *path, size_t size);

/* An absolute monotonic deadline timeout_ms from now; infinite when timeout_ms <= 0. */
gpr_timespec dfc__rpc_deadline(int64_t timeout_ms);

/* Milliseconds from now until deadline (INT64_MAX when infinite, <= 0 when past). */
int64_t dfc__rpc_remaining_ms(gpr_timespec deadline);

/* Copies the value of key in md into buf, NUL-terminated. Returns its length, -ENOENT when
 * absent, -ENAMETOOLONG when it does not fit. */
int dfc__rpc_md_get(const grpc_metadata_array *md, const char *key, char *buf, size_t size);

/* Copies a slice into a NUL-terminated heap string; NULL when out of memory. */
char *dfc__rpc_slice_strdup(grpc_slice s);

#endif /* DFC_RPC_INTERNAL_H */
