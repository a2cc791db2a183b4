/*
 * vortex.h - the Vortex piece-transfer framing (docs/dragonfly-compat.md, "Vortex"), encode and
 * decode only: no I/O, no allocation. Every integer is big-endian.
 *
 *   packet   [packet_id u8][tag u8][length u32][value: length bytes]      header 6 bytes
 *   request  tag 4, value = 64 ASCII task-id bytes + u32 piece number     length exactly 68
 *   content  tag 5, value = [metadata_length u32 = M][metadata M bytes]   length = 4 + M;
 *            metadata = number u32, offset u64, length u64, digest_len u32, digest,
 *            parent_id_len u32, parent_id, traffic_type u8, cost_secs u64, created_at i64;
 *            the piece's raw bytes (metadata.length) follow the packet, outside `length`
 *   error    tag 255, value = code u8 + UTF-8 message
 *
 * Decoders take untrusted bytes (a remote peer): every length is checked against what is
 * there and against the limits below before anything is read; errors are -EPROTO (or -EINVAL
 * for a well-formed packet that is not allowed, such as a task id that is not 64 hex digits)
 * with err naming the field.
 */
#ifndef DFD_P2P_VORTEX_H
#define DFD_P2P_VORTEX_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

#define DFD_VORTEX_HEADER_LEN  6
#define DFD_VORTEX_TASK_ID_LEN 64
#define DFD_VORTEX_REQUEST_LEN (DFD_VORTEX_TASK_ID_LEN + 4) /* the value of a request: 68 */

/* Our bounds on what a peer may make us read: a content packet's value (metadata), and an
 * error message. Upstream has neither (it reads whatever length says). */
#define DFD_VORTEX_METADATA_MAX 4096
#define DFD_VORTEX_ERROR_MAX    4096

/* Socket buffers of a piece connection (SO_SNDBUF on the server's, SO_RCVBUF on the client's,
 * set before connect so the window scale fits): one default piece. A connection carries one
 * piece, so the kernel's autotuning never grows a default buffer in time; with it the window
 * stays small and the sender waits on ACKs (hack/bench/p2p.sh: 1.3-1.8 s per GiB without,
 * 1.1-1.2 s with). The kernel caps it at net.core.{r,w}mem_max. Not on the wire. */
#define DFD_VORTEX_SOCKBUF ((int)4 << 20)

enum dfd_vortex_tag {
    DFD_VORTEX_TAG_DOWNLOAD_PERSISTENT_CACHE_PIECE = 4,
    DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT = 5,
    DFD_VORTEX_TAG_CLOSE = 254,
    DFD_VORTEX_TAG_ERROR = 255,
};

enum dfd_vortex_error_code {
    DFD_VORTEX_ERR_UNKNOWN = 0,
    DFD_VORTEX_ERR_INVALID_ARGUMENT = 1,
    DFD_VORTEX_ERR_NOT_FOUND = 2,
    DFD_VORTEX_ERR_INTERNAL = 3,
    /* Ours (upstream reserves 4..255): the piece is being sent to another peer right now; ask
     * another parent, or this one again later. The connection stays open. */
    DFD_VORTEX_ERR_BUSY = 4,
};

struct dfd_vortex_header {
    uint8_t packet_id;
    uint8_t tag;
    uint32_t length;
};

void dfd_vortex_header_encode(const struct dfd_vortex_header *h,
                              uint8_t out[DFD_VORTEX_HEADER_LEN]);
void dfd_vortex_header_decode(const uint8_t in[DFD_VORTEX_HEADER_LEN], struct dfd_vortex_header *h);

/* A whole request packet (header + value, 74 bytes). task_id must be 64 bytes (-EINVAL). */
#define DFD_VORTEX_REQUEST_PACKET_LEN (DFD_VORTEX_HEADER_LEN + DFD_VORTEX_REQUEST_LEN)
int dfd_vortex_request_encode(uint8_t packet_id, const char *task_id, uint32_t number,
                              uint8_t out[DFD_VORTEX_REQUEST_PACKET_LEN], struct dfc_error *err);

/* Decodes a request's value (len must be 68) into task_id (NUL-terminated; 64 lowercase hex
 * digits, else -EINVAL) and *ret_number. */
int dfd_vortex_request_decode(const uint8_t *value, size_t len,
                              char task_id[DFD_VORTEX_TASK_ID_LEN + 1], uint32_t *ret_number,
                              struct dfc_error *err);

/* A piece's metadata. digest and parent_id point into the decoded buffer (or the caller's
 * strings when encoding) and are not NUL-terminated. */
struct dfd_vortex_piece {
    uint32_t number;
    uint64_t offset;
    uint64_t length;
    const char *digest;
    uint32_t digest_len;
    const char *parent_id;
    uint32_t parent_id_len;
    uint8_t traffic_type; /* common.v2.TrafficType; a server sends REMOTE_PEER (1) */
    uint64_t cost_secs;
    int64_t created_at; /* unix seconds */
};

/* The content packet (header + value, without the raw bytes) into out; *ret_len its length.
 * -ENOBUFS when size is too small, -EINVAL when the metadata exceeds DFD_VORTEX_METADATA_MAX. */
int dfd_vortex_content_encode(uint8_t packet_id, const struct dfd_vortex_piece *p, uint8_t *out,
                              size_t size, size_t *ret_len, struct dfc_error *err);

/* Decodes a content packet's value (the header's length bytes). */
int dfd_vortex_content_decode(const uint8_t *value, size_t len, struct dfd_vortex_piece *ret,
                              struct dfc_error *err);

/* An error packet (header + value) into out; the message is cut to fit size and
 * DFD_VORTEX_ERROR_MAX. */
int dfd_vortex_error_encode(uint8_t packet_id, uint8_t code, const char *msg, uint8_t *out,
                            size_t size, size_t *ret_len, struct dfc_error *err);

/* Decodes an error packet's value; *ret_msg points into value (not NUL-terminated). */
int dfd_vortex_error_decode(const uint8_t *value, size_t len, uint8_t *ret_code,
                            const char **ret_msg, size_t *ret_msg_len, struct dfc_error *err);

#endif /* DFD_P2P_VORTEX_H */
