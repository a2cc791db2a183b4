/*
 * rpc_bulk.h - large bytes fields that the RPC layer sends without copying, and receives
 * without copying.
 *
 * A message is normally packed into a fresh buffer (one copy). For piece-sized payloads, fill
 * a dfc_rpc_bulk (e.g. pread() straight into dfc_rpc_bulk_data()), point the message's bytes
 * field into it, and send with dfc_rpc_call_send_bulk() or dfc_rpc_stream_send_bulk(): every
 * bytes field that lies inside the bulk buffer, at any nesting depth, goes to the transport as
 * a reference to that memory, and only the few header bytes around it are packed.
 *
 * Lifetime: the memory is reference-counted. Sending takes gRPC's own references, so the
 * caller may free its handle right after the send call returns; the memory itself lives until
 * gRPC has written it. Once a bulk has been sent, its bytes must not change: allocate a new
 * one for new data (sending the same unchanged bytes again is fine).
 *
 * Receiving: dfc_rpc_call_recv_bulk() and dfc_rpc_stream_recv_bulk() decode a message as their
 * plain counterparts do, except that the first large bytes field of a large message (the
 * content of a piece, at the top or inside singular message fields) may stay in the slices
 * gRPC received it in. That field then has its length, its presence set and a NULL data
 * pointer, and a dfc_rpc_bulk_in, returned beside the message, holds its bytes as iovecs.
 * Ask for a field's bytes with dfc_rpc_bulk_in_iov(), which gives the field's own memory when
 * the bulk_in does not hold it (small messages are decoded as usual, with no bulk_in).
 *
 * Lifetime: the caller owns the bulk_in and frees it with dfc_rpc_bulk_in_free(), before or
 * after the message; its iovecs point into memory it owns, valid until then.
 */
#ifndef DFC_RPC_BULK_H
#define DFC_RPC_BULK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct dfc_rpc_bulk;

/* Allocates cap bytes (uninitialized). NULL when out of memory. */
struct dfc_rpc_bulk *dfc_rpc_bulk_new(size_t cap);

/* The writable memory; stable for the bulk's lifetime. */
uint8_t *dfc_rpc_bulk_data(struct dfc_rpc_bulk *b);

size_t dfc_rpc_bulk_cap(const struct dfc_rpc_bulk *b);

/* Drops the caller's handle; the memory goes when gRPC is done with it too. NULL is fine. */
void dfc_rpc_bulk_free(struct dfc_rpc_bulk *b);

/* The bytes of a large field left in gRPC's slices by a *_recv_bulk call. */
struct dfc_rpc_bulk_in;

/* The bytes of field, a bytes field of a message received with a *_recv_bulk call together
 * with in (NULL is fine): in's iovecs when in holds that field, else one iovec, *one, over the
 * field's own memory. Sets *ret_iov and returns the number of iovecs (0 for no bytes). */
int dfc_rpc_bulk_in_iov(const struct dfc_rpc_bulk_in *in, const ProtobufCBinaryData *field,
                        struct iovec *one, const struct iovec **ret_iov);

/* Frees in and the slices it holds. NULL is fine. */
void dfc_rpc_bulk_in_free(struct dfc_rpc_bulk_in *in);

#endif /* DFC_RPC_BULK_H */
