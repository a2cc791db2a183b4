/*
 * validate.h - request field checks shared by the dfdaemon handlers. Each returns 0 or a
 * negative code with a message that names the field, as the RPC status message.
 * Pure: no I/O.
 */
#ifndef DFD_VALIDATE_H
#define DFD_VALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"

/* The upstream limits (ttl, piece length, replica count) are in dfc/dragonfly.h; these two
 * are our own. */
#define DFD_LABEL_MAX          1024 /* tag, application */
#define DFD_CONTENT_FOR_ID_MAX 4096 /* content_for_calculating_task_id */

/* An absolute path of at most PATH_MAX - 1 bytes, without "." or ".." components. */
int dfd_validate_path(const char *field, const char *path, struct dfc_error *err);
int dfd_validate_replica_count(uint64_t n, struct dfc_error *err);
int dfd_validate_piece_length(uint64_t n, struct dfc_error *err);
/* seconds/nanos of a google.protobuf.Duration, within DFC_TTL_MIN_NS..DFC_TTL_MAX_NS; writes
 * the total to *ret_ns. */
int dfd_validate_ttl(int64_t seconds, int32_t nanos, int64_t *ret_ns, struct dfc_error *err);
int dfd_validate_label(const char *field, const char *s, size_t max, struct dfc_error *err);
int dfd_validate_task_id(const char *id, struct dfc_error *err);
int dfd_validate_ip(const char *field, const char *ip, struct dfc_error *err);

/* "crc32:<decimal>", "sha256:<64 hex>" or "sha512:<128 hex>". Sets *ret_algo to "crc32",
 * "sha256" or "sha512" and *ret_value to the part after the colon (both borrowed from s). */
int dfd_validate_digest(const char *s, const char **ret_algo, const char **ret_value,
                        struct dfc_error *err);

#endif /* DFD_VALIDATE_H */
