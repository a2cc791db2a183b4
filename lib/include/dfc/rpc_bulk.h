/*
 * rpc_bulk.h - buffers for large bytes fields that the RPC layer sends without copying.
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
 */
#ifndef DFC_RPC_BULK_H
#define DFC_RPC_BULK_H

#include <stddef.h>
#include <stdint.h>

struct dfc_rpc_bulk;

/* Allocates cap bytes (uninitialized). NULL when out of memory. */
struct dfc_rpc_bulk *dfc_rpc_bulk_new(size_t cap);

/* The writable memory; stable for the bulk's lifetime. */
uint8_t *dfc_rpc_bulk_data(struct dfc_rpc_bulk *b);

size_t dfc_rpc_bulk_cap(const struct dfc_rpc_bulk *b);

/* Drops the caller's handle; the memory goes when gRPC is done with it too. NULL is fine. */
void dfc_rpc_bulk_free(struct dfc_rpc_bulk *b);

#endif /* DFC_RPC_BULK_H */
